/*
 * test_zvol.c: unit tests for the volume (core/zvol.c) through the
 * public API of core/zvol.h: random unaligned I/O against a shadow copy,
 * a large write, trim and zero semantics (holes, partial edges, the short
 * last block), extents, range checks, read-only pools, durability of FUA
 * writes across a process that dies without exporting, the order in which
 * the intent log replays overlapping writes, concurrent writers (run
 * this binary under TSan too), and reads after a failed txg sync.
 *
 * Devices are sparse files in a mkdtemp directory under /var/tmp.  Seeds
 * are printed; ZV_TEST_SEED replays a run.  Under TSan the random test
 * runs 500 operations instead of 2000 (that build is there for races).
 * Checks made on threads other than cmocka's are counted, not asserted
 * (cmocka's asserts must not longjmp across threads), and the main thread
 * asserts on the count.
 *
 * Forking: the device layer keeps one io_uring per thread and a forked
 * child shares its parent's ring mappings, so the FUA child does its pool
 * work on a thread of its own, and the parent has no pool open across the
 * fork.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>

#include "testlib.h"
#include "pool.h"

#define BS 16384u
#define DEV_SIZE (64 * MiB)

/* ---- helpers ---- */

/* A new pool of one device (a cache of 'cache' bytes, 0: testlib's);
 * its path in path[pathlen]. */
static zvol_pool_t *
new_pool (char *path, size_t pathlen, const char *name, uint64_t devsize,
          uint64_t volsize, uint64_t cache)
{
  const char *dev = tl_path (path, pathlen, name);
  zvol_pool_config_t pc;

  assert_int_equal (tl_sparse_file (dev, devsize), 0);
  tl_pool_cfg (&pc, &dev, 1, volsize, true);
  if (cache)
    pc.pc_cache_size = cache;
  return tl_pool_open_ok (&pc);
}

/* Export and import again. */
static zvol_pool_t *
reimport (zvol_pool_t *p, const char *dev)
{
  zvol_pool_config_t pc;

  assert_int_equal (tl_pool_close (p), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  return tl_pool_open_ok (&pc);
}

/* Read [off, off+len) and compare with the shadow (a difference names
 * its volume block too). */
static void
check_shadow (zvol_t *zv, const uint8_t *shadow, uint64_t off, uint64_t len)
{
  tl_vol_check_shadow_blk (zv, shadow, off, (uint32_t) len, BS);
}

/* What a trim does to the shadow: whole blocks inside the range become
 * zeros (the last, short block counts as whole when the range reaches
 * the end of the volume); partial edges keep their bytes. */
static void
trim_shadow (uint8_t *shadow, uint64_t volsize, uint64_t off, uint64_t len)
{
  uint64_t end = off + len;
  uint64_t b = (off + BS - 1) / BS;
  uint64_t e = end == volsize ? (end + BS - 1) / BS : end / BS;

  for (uint64_t k = b; k < e; k++)
    memset (shadow + k * BS, 0, ZV_MIN ((uint64_t) BS, volsize - k * BS));
}

/* ---- extents ---- */

typedef struct ext {
  uint64_t off, len;
  unsigned type;
} ext_t;

typedef struct extlist {
  ext_t v[4096];
  size_t n;
  size_t stop_after;        /* return 1 after this many (0: never) */
} extlist_t;

static int
ext_cb (void *arg, uint64_t off, uint64_t len, unsigned type)
{
  extlist_t *l = arg;

  if (l->n < sizeof l->v / sizeof l->v[0])
    l->v[l->n++] = (ext_t) { off, len, type };
  return l->stop_after && l->n >= l->stop_after ? 1 : 0;
}

/* Extents of [off, off+len): ascending, contiguous, covering it, no two
 * neighbours of one type. */
static void
get_extents (zvol_t *zv, uint64_t off, uint64_t len, extlist_t *l)
{
  uint64_t pos = off;

  l->n = 0;
  l->stop_after = 0;
  assert_int_equal (zvol_extents (zv, off, len, ext_cb, l), 0);
  assert_true (l->n >= 1);
  for (size_t i = 0; i < l->n; i++) {
    assert_int_equal (l->v[i].off, pos);
    assert_true (l->v[i].len > 0);
    assert_true ((l->v[i].type & ~ZVOL_EXTENT_HOLE) == 0);
    if (i > 0)
      assert_int_not_equal (l->v[i].type, l->v[i - 1].type);
    pos += l->v[i].len;
  }
  assert_int_equal (pos, off + len);
}

/* Is [off, off+len) inside one extent of the given type? */
static bool
ext_is (const extlist_t *l, uint64_t off, uint64_t len, unsigned type)
{
  for (size_t i = 0; i < l->n; i++)
    if (l->v[i].off <= off && off + len <= l->v[i].off + l->v[i].len)
      return l->v[i].type == type;
  return false;
}

/* ---- tests ---- */

/* 2000 random unaligned operations (write, read, trim, zero, extents,
 * flush, sync) against a shadow, with a cache too small to hold much;
 * then export, import and compare the whole volume. */
static void
test_random_shadow (void **state)
{
  char path[512];
  const uint64_t volsize = 8 * MiB + 12800;      /* short last block */
  zvol_pool_t *p = new_pool (path, sizeof path, "random", DEV_SIZE, volsize,
                             256 * KiB);
  zvol_t *zv = tl_vol (p);
  uint8_t *shadow = calloc (1, volsize);
  uint8_t *buf = malloc (128 * KiB);
  extlist_t *el = malloc (sizeof *el);
  uint64_t s = tl_seed ("random shadow");
  unsigned counts[7] = { 0 };

  assert_non_null (shadow);
  for (unsigned it = 0; it < (TL_TSAN ? 500 : 2000); it++) {
    unsigned op = tl_rand (&s) % 100;
    uint64_t len, off;

    /* Mostly small, sometimes tiny, sometimes large; a fifth of the
     * ranges hug the end of the volume. */
    switch (tl_rand (&s) % 4) {
    case 0: len = 1 + tl_rand (&s) % 512; break;
    case 1: len = 1 + tl_rand (&s) % (128 * KiB); break;
    default: len = 1 + tl_rand (&s) % (40 * KiB); break;
    }
    if (tl_rand (&s) % 5 == 0) {
      uint64_t back = len + tl_rand (&s) % (3 * BS);
      off = volsize - ZV_MIN (volsize, back);
    }
    else
      off = tl_rand (&s) % volsize;
    len = ZV_MIN (len, volsize - off);
    if (len == 0)
      len = 1, off = volsize - 1;

    if (op < 45) {
      counts[0]++;
      tl_vol_write (zv, shadow, off, (uint32_t) len, it + 1, 0);
    }
    else if (op < 75) {
      counts[1]++;
      memset (buf, 0x5a, len);
      assert_int_equal (zvol_read (zv, buf, off, (uint32_t) len), 0);
      if (memcmp (buf, shadow + off, len) != 0)
        fail_msg ("iteration %u: read %" PRIu64 "+%" PRIu64 " differs", it,
                  off, len);
    }
    else if (op < 83) {
      counts[2]++;
      assert_int_equal (zvol_trim (zv, off, len, 0), 0);
      trim_shadow (shadow, volsize, off, len);
    }
    else if (op < 91) {
      static const unsigned zf[] = { 0, ZVOL_MAY_TRIM, ZVOL_FAST,
                                     ZVOL_MAY_TRIM | ZVOL_FAST };
      counts[3]++;
      /* A fast zero that must keep its blocks allocated is refused. */
      if (zf[it % 4] == ZVOL_FAST)
        assert_int_equal (zvol_zero (zv, off, len, zf[it % 4]), -ENOTSUP);
      else {
        assert_int_equal (zvol_zero (zv, off, len, zf[it % 4]), 0);
        memset (shadow + off, 0, len);
      }
    }
    else if (op < 93) {
      counts[4]++;
      get_extents (zv, off, len, el);
      for (size_t i = 0; i < el->n; i++)
        if (el->v[i].type & ZVOL_EXTENT_HOLE)
          assert_true (zv_is_zero (shadow + el->v[i].off, el->v[i].len));
    }
    else if (op < 99) {
      counts[5]++;
      assert_int_equal (zvol_flush (zv), 0);
    }
    else {
      counts[6]++;
      assert_int_equal (zv_pool_sync (p), 0);
    }
  }
  print_message ("  ops: %u writes, %u reads, %u trims, %u zeros, "
                 "%u extents, %u flushes, %u syncs\n", counts[0], counts[1],
                 counts[2], counts[3], counts[4], counts[5], counts[6]);
  check_shadow (zv, shadow, 0, volsize);
  p = reimport (p, path);
  zv = tl_vol (p);
  assert_int_equal (zvol_size (zv), volsize);
  check_shadow (zv, shadow, 0, volsize);
  assert_int_equal (tl_pool_close (p), 0);
  free (el);
  free (buf);
  free (shadow);
}

/* One 32 MiB write, unaligned, read back before and after an import. */
static void
test_large_write (void **state)
{
  char path[512];
  const uint64_t volsize = 40 * MiB;
  const uint32_t len = 32 * MiB;
  const uint64_t off = 4096 + 512;
  zvol_pool_t *p = new_pool (path, sizeof path, "large", 128 * MiB, volsize,
                             0);
  uint8_t *buf = malloc (len);

  assert_non_null (buf);
  tl_pat_fill (buf, off, len, 32);
  assert_int_equal (zvol_write (tl_vol (p), buf, off, len, 0), 0);
  memset (buf, 0, len);
  assert_int_equal (zvol_read (tl_vol (p), buf, off, len), 0);
  assert_int_equal (tl_pat_check (buf, off, len, 32), -1);
  p = reimport (p, path);
  memset (buf, 0, len);
  assert_int_equal (zvol_read (tl_vol (p), buf, off, len), 0);
  assert_int_equal (tl_pat_check (buf, off, len, 32), -1);
  assert_int_equal (zvol_read (tl_vol (p), buf, 0, off), 0);
  assert_true (zv_is_zero (buf, off));
  /* An aligned MiB of noise (the early abort refuses it) goes to the
   * device from the write itself: its blocks are counted, and read back
   * after an import. */
  {
    zvol_stats_t a, b;
    uint64_t rs = 3;
    zvol_get_stats (tl_vol (p), &a);
    tl_fill_rand (buf, MiB, &rs);
    assert_int_equal (zvol_write (tl_vol (p), buf, 4 * MiB, MiB, 0), 0);
    zvol_get_stats (tl_vol (p), &b);
    assert_int_equal (b.vs_direct_blocks - a.vs_direct_blocks,
                      MiB / ZVOL_DEFAULT_VOLBLOCKSIZE);
    p = reimport (p, path);
    memset (buf + MiB, 0, MiB);
    assert_int_equal (zvol_read (tl_vol (p), buf + MiB, 4 * MiB, MiB), 0);
    assert_memory_equal (buf, buf + MiB, MiB);
  }
  assert_int_equal (tl_pool_close (p), 0);
  free (buf);
}

/* The write throttle counts what a write dirtied: a block the open txg
 * holds dirty already adds nothing, however often it is written (a
 * charge per write made random 4 KiB writes close txgs at a quarter of
 * their data and meet the throttle early); a block dirty only in an
 * older txg is dirtied anew.  Nothing syncs by itself here (no sync
 * thread), so the counter moves only with the writes below. */
static void
test_dirty_charge (void **state)
{
  char path[512];
  zvol_pool_t *p = new_pool (path, sizeof path, "dirty", 64 * MiB,
                             8 * MiB, 0);
  zvol_t *zv = tl_vol (p);
  static uint8_t buf[4 * BS];
  zvol_pool_stats_t ps;
  uint64_t base;

  memset (buf, 0x5a, sizeof buf);
  assert_int_equal (zv_pool_sync (p), 0);
  zvol_pool_get_stats (p, &ps);
  base = ps.ps_dirty_bytes;
  /* Four 4 KiB writes into block 3: one block. */
  for (unsigned i = 0; i < 4; i++)
    assert_int_equal (zvol_write (zv, buf, 3 * BS + i * 4096, 4096, 0), 0);
  zvol_pool_get_stats (p, &ps);
  assert_int_equal (ps.ps_dirty_bytes - base, BS);
  /* Blocks 3 to 6, of which only 4 to 6 are new. */
  assert_int_equal (zvol_write (zv, buf, 3 * BS, 4 * BS, 0), 0);
  zvol_pool_get_stats (p, &ps);
  assert_int_equal (ps.ps_dirty_bytes - base, 4 * BS);
  /* An unaligned write across blocks 6 and 7: block 7 is new. */
  assert_int_equal (zvol_write (zv, buf, 7 * BS - 100, 200, 0), 0);
  zvol_pool_get_stats (p, &ps);
  assert_int_equal (ps.ps_dirty_bytes - base, 5 * BS);
  /* Synced, the same block is dirtied anew in the next txg. */
  assert_int_equal (zv_pool_sync (p), 0);
  zvol_pool_get_stats (p, &ps);
  assert_int_equal (ps.ps_dirty_bytes, base);
  assert_int_equal (zvol_write (zv, buf, 3 * BS + 512, 4096, 0), 0);
  assert_int_equal (zvol_write (zv, buf, 3 * BS + 8192, 4096, 0), 0);
  zvol_pool_get_stats (p, &ps);
  assert_int_equal (ps.ps_dirty_bytes - base, BS);
  assert_int_equal (tl_pool_close (p), 0);
}

/* Trim frees the whole blocks inside the range (holes, zeros, space
 * returned) and leaves partial edges as they were. */
static void
test_trim (void **state)
{
  char path[512];
  const uint64_t volsize = MiB;
  zvol_pool_t *p = new_pool (path, sizeof path, "trim", DEV_SIZE, volsize, 0);
  zvol_t *zv = tl_vol (p);
  uint8_t *shadow = calloc (1, volsize);
  extlist_t *el = malloc (sizeof *el);
  uint64_t before, after, alloc[3];

  tl_vol_write (zv, shadow, 0, 10 * BS, 1, 0);
  /* Every txg rewrites block 20: a flush of an idle pool syncs nothing,
   * and deferred frees are applied only by later txgs.  Space in use is
   * what is allocated less what waits on the deferred-free lists (their
   * size varies with the metadata each txg rewrites). */
  for (unsigned i = 0; i < 3; i++) {
    tl_vol_write (zv, shadow, 20 * BS, 512, 100 + i, 0);
    assert_int_equal (zv_pool_sync (p), 0);
  }
  before = tl_pool_stat_u64 (p, "space_allocated")
    - tl_pool_stat_u64 (p, "space_deferred");

  assert_int_equal (zvol_trim (zv, BS + 5000, 6 * BS - 2000, 0), 0);
  trim_shadow (shadow, volsize, BS + 5000, 6 * BS - 2000);
  for (unsigned b = 2; b < 7; b++)
    assert_true (zv_is_zero (shadow + b * BS, BS));
  assert_false (zv_is_zero (shadow + BS + 5000, 100));   /* edges kept */
  assert_false (zv_is_zero (shadow + 7 * BS, 100));
  check_shadow (zv, shadow, 0, volsize);
  get_extents (zv, 0, volsize, el);
  assert_int_equal (el->n, 6);
  assert_true (ext_is (el, 0, 2 * BS, 0));
  assert_true (ext_is (el, 2 * BS, 5 * BS, ZVOL_EXTENT_HOLE));
  assert_true (ext_is (el, 7 * BS, 3 * BS, 0));
  assert_true (ext_is (el, 10 * BS, 10 * BS, ZVOL_EXTENT_HOLE));
  assert_true (ext_is (el, 20 * BS, BS, 0));
  assert_true (ext_is (el, 21 * BS, volsize - 21 * BS, ZVOL_EXTENT_HOLE));

  /* A trim inside one block does nothing. */
  assert_int_equal (zvol_trim (zv, 8 * BS + 1, BS - 2, ZVOL_FUA), 0);
  check_shadow (zv, shadow, 0, volsize);

  /* The space comes back once the frees are past the defer window. */
  for (unsigned i = 0; i < 3; i++) {
    tl_vol_write (zv, shadow, 20 * BS, 512, 200 + i, 0);
    assert_int_equal (zv_pool_sync (p), 0);
    alloc[i] = tl_pool_stat_u64 (p, "space_allocated");
  }
  after = alloc[2] - tl_pool_stat_u64 (p, "space_deferred");
  assert_true (after + 5 * BS <= before);
  /* The trim's txg was the first of the three: its frees became free
   * space when the third began to sync. */
  assert_true (alloc[2] + 5 * BS <= alloc[1]);
  p = reimport (p, path);
  zv = tl_vol (p);
  check_shadow (zv, shadow, 0, volsize);
  get_extents (zv, 0, volsize, el);
  assert_true (ext_is (el, 2 * BS, 5 * BS, ZVOL_EXTENT_HOLE));
  assert_int_equal (tl_pool_close (p), 0);
  free (el);
  free (shadow);
}

/* Zero reads back zeros everywhere it was asked to, partial edges and
 * the short last block included; with MAY_TRIM whole blocks become
 * holes (test_zero_no_hole has the zero without). */
static void
test_zero (void **state)
{
  char path[512];
  const uint64_t volsize = 10 * BS + 4096;
  zvol_pool_t *p = new_pool (path, sizeof path, "zero", DEV_SIZE, volsize, 0);
  zvol_t *zv = tl_vol (p);
  uint8_t *shadow = calloc (1, volsize);
  extlist_t *el = malloc (sizeof *el);
  static const struct { uint64_t off, len; unsigned flags; } z[] = {
    { 100, 100, ZVOL_MAY_TRIM },                   /* inside block 0 */
    { BS - 50, 120, ZVOL_MAY_TRIM },               /* straddles 0/1 */
    { 2 * BS + 1, 3 * BS + 6, ZVOL_MAY_TRIM },     /* 3, 4 whole; edges */
    { 9 * BS + 3, BS - 3 + 4096, ZVOL_MAY_TRIM },  /* to the end */
    { 6 * BS, 2 * BS, ZVOL_FAST | ZVOL_MAY_TRIM },
    { 8 * BS + 7, 9, ZVOL_FUA | ZVOL_MAY_TRIM },
  };

  tl_vol_write (zv, shadow, 0, (uint32_t) volsize, 3, 0);
  for (size_t i = 0; i < sizeof z / sizeof z[0]; i++) {
    assert_int_equal (zvol_zero (zv, z[i].off, z[i].len, z[i].flags), 0);
    memset (shadow + z[i].off, 0, z[i].len);
    check_shadow (zv, shadow, 0, volsize);
    if (i == 3)
      assert_int_equal (zvol_flush (zv), 0);
  }
  assert_int_equal (zvol_flush (zv), 0);
  get_extents (zv, 0, volsize, el);
  for (unsigned b = 3; b <= 7; b++)
    assert_true (ext_is (el, b * BS, BS, b == 5 ? 0 : ZVOL_EXTENT_HOLE));
  assert_true (ext_is (el, 10 * BS, 4096, ZVOL_EXTENT_HOLE));
  assert_true (ext_is (el, 0, BS, 0));
  assert_true (ext_is (el, 9 * BS, BS, 0));

  /* The short last block: rewrite it, zero a piece of it, then all. */
  tl_vol_write (zv, shadow, 10 * BS, 4096, 4, 0);
  assert_int_equal (zvol_zero (zv, 10 * BS + 100, 200, ZVOL_MAY_TRIM), 0);
  memset (shadow + 10 * BS + 100, 0, 200);
  check_shadow (zv, shadow, 9 * BS, BS + 4096);
  assert_int_equal (zvol_zero (zv, volsize - 1, 1, ZVOL_MAY_TRIM), 0);
  shadow[volsize - 1] = 0;
  check_shadow (zv, shadow, 9 * BS, BS + 4096);

  p = reimport (p, path);
  zv = tl_vol (p);
  check_shadow (zv, shadow, 0, volsize);

  /* Everything. */
  assert_int_equal (zvol_zero (zv, 0, volsize, ZVOL_FAST | ZVOL_MAY_TRIM),
                    0);
  memset (shadow, 0, volsize);
  check_shadow (zv, shadow, 0, volsize);
  assert_int_equal (zvol_flush (zv), 0);
  get_extents (zv, 0, volsize, el);
  assert_int_equal (el->n, 1);
  assert_int_equal (el->v[0].type, ZVOL_EXTENT_HOLE);
  assert_int_equal (tl_pool_close (p), 0);
  free (el);
  free (shadow);
}

/* Extents: holes where never written or trimmed, data where written
 * (synced or not), any start offset, and a callback can stop early. */
static void
test_extents (void **state)
{
  char path[512];
  const uint64_t volsize = MiB + 4096;
  zvol_pool_t *p = new_pool (path, sizeof path, "extents", DEV_SIZE, volsize,
                             0);
  zvol_t *zv = tl_vol (p);
  uint8_t *shadow = calloc (1, volsize);
  extlist_t *el = malloc (sizeof *el);

  get_extents (zv, 0, volsize, el);
  assert_int_equal (el->n, 1);
  assert_int_equal (el->v[0].type, ZVOL_EXTENT_HOLE);

  tl_vol_write (zv, shadow, 0, 2 * BS, 1, 0);
  tl_vol_write (zv, shadow, 5 * BS + 10, 20, 2, 0);   /* partial: data */
  assert_int_equal (zvol_trim (zv, BS, BS, 0), 0);
  trim_shadow (shadow, volsize, BS, BS);
  get_extents (zv, 0, volsize, el);              /* before any sync */
  assert_int_equal (el->n, 4);
  assert_true (ext_is (el, 0, BS, 0));
  assert_true (ext_is (el, BS, 4 * BS, ZVOL_EXTENT_HOLE));
  assert_true (ext_is (el, 5 * BS, BS, 0));
  assert_true (ext_is (el, 6 * BS, volsize - 6 * BS, ZVOL_EXTENT_HOLE));
  assert_int_equal (zvol_flush (zv), 0);
  get_extents (zv, 0, volsize, el);              /* after */
  assert_int_equal (el->n, 4);
  assert_true (ext_is (el, BS, 4 * BS, ZVOL_EXTENT_HOLE));
  assert_true (ext_is (el, 5 * BS, BS, 0));

  /* An unaligned window. */
  get_extents (zv, 100, 5 * BS, el);
  assert_int_equal (el->v[0].off, 100);
  assert_int_equal (el->v[0].len, BS - 100);
  assert_int_equal (el->v[el->n - 1].off + el->v[el->n - 1].len,
                    100 + 5 * BS);
  /* The short last block, written. */
  tl_vol_write (zv, shadow, volsize - 10, 10, 3, 0);
  get_extents (zv, MiB - 1, 4097, el);
  assert_int_equal (el->n, 2);
  assert_true (ext_is (el, MiB, 4096, 0));

  /* Stop after the first. */
  el->n = 0;
  el->stop_after = 1;
  assert_int_equal (zvol_extents (zv, 0, volsize, ext_cb, el), 0);
  assert_int_equal (el->n, 1);
  assert_int_equal (el->v[0].off, 0);
  el->n = 0;
  el->stop_after = 2;
  assert_int_equal (zvol_extents (zv, 0, volsize, ext_cb, el), 0);
  assert_int_equal (el->n, 2);
  /* Zero length: no call. */
  el->n = 0;
  el->stop_after = 0;
  assert_int_equal (zvol_extents (zv, 5, 0, ext_cb, el), 0);
  assert_int_equal (el->n, 0);
  check_shadow (zv, shadow, 0, volsize);
  assert_int_equal (tl_pool_close (p), 0);
  free (el);
  free (shadow);
}

/* Requests past the end (including offsets that would overflow) fail
 * with -EINVAL and change nothing. */
static void
test_out_of_range (void **state)
{
  char path[512];
  const uint64_t volsize = MiB;
  zvol_pool_t *p = new_pool (path, sizeof path, "range", DEV_SIZE, volsize,
                             0);
  zvol_t *zv = tl_vol (p);
  uint8_t buf[64] = { 1 };
  extlist_t *el = malloc (sizeof *el);
  static const struct { uint64_t off, len; } bad[] = {
    { MiB - 10, 20 }, { MiB, 1 }, { MiB + 4096, 4096 },
    { UINT64_MAX - 10, 20 }, { UINT64_MAX, 1 }, { 1, UINT32_MAX },
  };

  tl_log_reset (true);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint32_t l32 = (uint32_t) ZV_MIN (bad[i].len, sizeof buf);
    if (bad[i].len > sizeof buf) {
      /* Only the range check may look at a length the buffer lacks. */
      assert_int_equal (zvol_trim (zv, bad[i].off, bad[i].len, 0), -EINVAL);
      assert_int_equal (zvol_zero (zv, bad[i].off, bad[i].len, 0), -EINVAL);
      continue;
    }
    assert_int_equal (zvol_read (zv, buf, bad[i].off, l32), -EINVAL);
    assert_int_equal (zvol_write (zv, buf, bad[i].off, l32, 0), -EINVAL);
    assert_int_equal (zvol_trim (zv, bad[i].off, bad[i].len, 0), -EINVAL);
    assert_int_equal (zvol_zero (zv, bad[i].off, bad[i].len, 0), -EINVAL);
    assert_int_equal (zvol_extents (zv, bad[i].off, bad[i].len, ext_cb, el),
                      -EINVAL);
  }
  assert_true (tl_log_has ("past the end"));
  tl_log_reset (false);
  /* The last byte is in range. */
  assert_int_equal (zvol_write (zv, buf, MiB - 1, 1, 0), 0);
  assert_int_equal (zvol_read (zv, buf + 1, MiB - 1, 1), 0);
  assert_int_equal (buf[1], buf[0]);
  get_extents (zv, 0, volsize, el);
  assert_int_equal (el->n, 2);          /* only the last block has data */
  assert_int_equal (tl_pool_close (p), 0);
  free (el);
}

/* A read-only pool reads, refuses every change with -EROFS, and writes
 * nothing to its devices. */
static void
test_readonly (void **state)
{
  char path[512];
  const uint64_t volsize = 4 * MiB;
  zvol_pool_t *p = new_pool (path, sizeof path, "ro", DEV_SIZE, volsize, 0);
  const char *dev = path;
  zvol_pool_config_t pc;
  uint8_t buf[8192];
  uint64_t h;

  tl_pat_fill (buf, 4096, sizeof buf, 9);
  assert_int_equal (zvol_write (tl_vol (p), buf, 4096, sizeof buf,
                                0), 0);
  assert_int_equal (tl_pool_close (p), 0);
  h = tl_hash_file (dev);

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  pc.pc_readonly = true;
  p = tl_pool_open_ok (&pc);
  assert_int_equal (zvol_pool_start (p), 0);
  zvol_t *zv = tl_vol (p);
  assert_true (zvol_is_readonly (zv));
  tl_log_reset (true);
  assert_int_equal (zvol_write (zv, buf, 0, 512, 0), -EROFS);
  assert_int_equal (zvol_write (zv, buf, 0, 512, ZVOL_FUA), -EROFS);
  assert_int_equal (zvol_trim (zv, 0, BS, 0), -EROFS);
  assert_int_equal (zvol_zero (zv, 0, BS, 0), -EROFS);
  assert_true (tl_log_has ("read-only"));
  tl_log_reset (false);
  memset (buf, 0, sizeof buf);
  assert_int_equal (zvol_read (zv, buf, 4096, sizeof buf), 0);
  assert_int_equal (tl_pat_check (buf, 4096, sizeof buf, 9), -1);
  assert_int_equal (zvol_flush (zv), 0);
  assert_int_equal (zv_pool_sync (p), 0);
  assert_int_equal (tl_pool_close (p), 0);
  assert_int_equal (tl_hash_file (dev), h);
}

/* ---- FUA durability ---- */

typedef struct fuachild {
  const char *dev;
  int fd;
} fuachild_t;

#define FUA_N 5

/*
 * Run fn (given a fuachild_t) on a thread of a forked child, which dies
 * without exporting (as a crash would).  Returns the child's pid; *rfd
 * is the read end of the pipe the child reports on.
 */
static pid_t
child_spawn (const char *dev, void *(*fn) (void *), int *rfd)
{
  int fds[2];
  pid_t pid;
  fuachild_t c;

  assert_int_equal (pipe (fds), 0);
  c = (fuachild_t) { .dev = dev, .fd = fds[1] };
  pid = tl_fork_thread (fn, &c, fds);
  assert_true (pid >= 0);
  *rfd = fds[0];
  return pid;
}

/* The child must have exited with status 0. */
static void
child_reap (pid_t pid)
{
  int status;

  assert_int_equal (waitpid (pid, &status, 0), pid);
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 0);
}

/* Import the pool the child left (its io_uring may hold the device
 * briefly after it died: -EBUSY is retried for up to 5 s). */
static zvol_pool_t *
child_import (const char *dev)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p;

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  assert_int_equal (tl_pool_open_retry (&pc, &p), 0);
  return p;
}

/* The child's work, on its own thread: import, start the engine with a
 * long txg timeout (nothing syncs by itself), FUA-write, report, and die
 * without exporting. */
static void *
fua_child_thread (void *arg)
{
  fuachild_t *c = arg;
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t buf[3 * 4096];

  tl_pool_cfg (&pc, &c->dev, 1, 0, false);
  pc.pc_txg.tt_timeout_ms = 600000;
  if (tl_pool_open (&pc, &p) < 0 || zvol_pool_start (p) < 0)
    _exit (4);
  for (unsigned i = 0; i < FUA_N; i++) {
    uint64_t off = i * 300000 + 1234;
    char ack = (char) i;
    tl_pat_fill (buf, off, sizeof buf, 70 + i);
    if (zvol_write (tl_vol (p), buf, off, sizeof buf, ZVOL_FUA) < 0)
      _exit (5);
    if (write (c->fd, &ack, 1) != 1)
      _exit (6);
  }
  _exit (0);                  /* no export: the pool is not closed */
}

/* A FUA write is on disk when it returns, even if the process then dies
 * without closing the pool. */
static void
test_fua_durable (void **state)
{
  char path[512];
  const char *dev = path;
  zvol_pool_t *p = new_pool (path, sizeof path, "fua", DEV_SIZE, 4 * MiB, 0);
  unsigned acks = 0;
  char ack;
  int fd;
  pid_t pid;

  assert_int_equal (tl_pool_close (p), 0);
  pid = child_spawn (dev, fua_child_thread, &fd);
  while (read (fd, &ack, 1) == 1)
    assert_int_equal ((unsigned) ack, acks++);
  close (fd);
  child_reap (pid);
  assert_int_equal (acks, FUA_N);

  p = child_import (dev);
  for (unsigned i = 0; i < FUA_N; i++) {
    uint8_t buf[3 * 4096];
    uint64_t off = i * 300000 + 1234;
    assert_int_equal (zvol_read (tl_vol (p), buf, off, sizeof buf),
                      0);
    assert_int_equal (tl_pat_check (buf, off, sizeof buf, 70 + i), -1);
  }
  assert_int_equal (tl_pool_close (p), 0);
}

/* ---- overlapping writes and the log ---- */

#define OV_SLOTS (TL_TSAN ? 500u : 2000u)
#define OV_SLOT 4096u

typedef struct ovchild {
  zvol_t *zv;
  pthread_barrier_t bar;
  _Atomic unsigned id;
} ovchild_t;

/* One of two writers: both write each slot at the same moment (a
 * barrier before each), each with its own id in the first byte. */
static void *
ov_writer (void *arg)
{
  ovchild_t *c = arg;
  unsigned id = atomic_fetch_add_explicit (&c->id, 1, memory_order_acq_rel)
    + 1;
  uint8_t *buf = calloc (1, OV_SLOT);

  if (buf == NULL)
    _exit (11);
  for (uint32_t s = 0; s < OV_SLOTS; s++) {
    buf[0] = (uint8_t) id;
    memcpy (buf + 8, &s, sizeof s);
    pthread_barrier_wait (&c->bar);
    if (zvol_write (c->zv, buf, (uint64_t) s * OV_SLOT, OV_SLOT, 0) < 0)
      _exit (12);
    if (id == 1 && s % 16 == 15 && zvol_flush (c->zv) < 0)
      _exit (13);
  }
  free (buf);
  return NULL;
}

/* The child: import (long txg timeout: the log carries everything),
 * race the writers, flush, send the parent what each slot reads now,
 * and die without exporting. */
static void *
ov_child_thread (void *arg)
{
  fuachild_t *fc = arg;
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  ovchild_t c;
  pthread_t th[2];
  uint8_t *seen = malloc (OV_SLOTS), b[OV_SLOT];

  tl_pool_cfg (&pc, &fc->dev, 1, 0, false);
  pc.pc_txg.tt_timeout_ms = 600000;
  if (seen == NULL || tl_pool_open (&pc, &p) < 0 || zvol_pool_start (p) < 0)
    _exit (4);
  memset (&c, 0, sizeof c);
  c.zv = tl_vol (p);
  pthread_barrier_init (&c.bar, NULL, 2);
  for (unsigned i = 0; i < 2; i++)
    if (pthread_create (&th[i], NULL, ov_writer, &c) != 0)
      _exit (7);
  for (unsigned i = 0; i < 2; i++)
    pthread_join (th[i], NULL);
  if (zvol_flush (c.zv) < 0)
    _exit (5);
  for (uint32_t s = 0; s < OV_SLOTS; s++) {
    if (zvol_read (c.zv, b, (uint64_t) s * OV_SLOT, OV_SLOT) < 0)
      _exit (6);
    seen[s] = b[0];
  }
  if (write (fc->fd, seen, OV_SLOTS) != (ssize_t) OV_SLOTS)
    _exit (14);
  _exit (0);
}

/* Two writes to the same range at once, both complete, then a flush: what
 * a read returns now must be what the volume holds after a crash (the
 * log must replay overlapping writes in the order they were applied).
 * The device is large enough (sparse) that the log ring never fills to
 * the point of kicking a txg, so every slot comes back by replay. */
static void
test_overlap_replay (void **state)
{
  char path[512];
  const char *dev = path;
  zvol_pool_t *p = new_pool (path, sizeof path, "overlap", 1024 * MiB,
                             OV_SLOTS * OV_SLOT, 0);
  uint8_t *want = calloc (1, OV_SLOTS), b[OV_SLOT];
  size_t got = 0;
  ssize_t n;
  unsigned bad = 0;
  int fd;
  pid_t pid;

  assert_int_equal (tl_pool_close (p), 0);
  pid = child_spawn (dev, ov_child_thread, &fd);
  while (got < OV_SLOTS && (n = read (fd, want + got, OV_SLOTS - got)) > 0)
    got += (size_t) n;
  close (fd);
  child_reap (pid);
  assert_int_equal (got, OV_SLOTS);

  p = child_import (dev);
  for (uint32_t s = 0; s < OV_SLOTS; s++) {
    assert_int_equal (zvol_read (tl_vol (p), b,
                                 (uint64_t) s * OV_SLOT, OV_SLOT), 0);
    assert_true (b[0] == 1 || b[0] == 2);
    if (b[0] != want[s]) {
      if (bad < 5)
        print_message ("  slot %u: writer %u's data before the crash, "
                       "writer %u's after\n", s, want[s], b[0]);
      bad++;
    }
  }
  assert_int_equal (tl_pool_close (p), 0);
  free (want);
  if (bad)
    fail_msg ("%u of %u slots changed across the crash: the log replays "
              "overlapping writes out of the order they were applied",
              bad, OV_SLOTS);
}

/* ---- concurrency ---- */

#define CC_THREADS 8
#define CC_REGION (2 * MiB)
#define CC_VOLSIZE (CC_THREADS * CC_REGION)
#define CC_OPS 300

typedef struct ccshared {
  zvol_pool_t *pool;
  zvol_t *zv;
  uint8_t *shadow;             /* region i belongs to thread i */
  uint64_t seed;
  atomic_uint failures;
  atomic_uint ops;
  atomic_bool stop;
  char first_failure[256];
  pthread_mutex_t fail_mtx;
} ccshared_t;

typedef struct ccthread {
  ccshared_t *sh;
  unsigned idx;
} ccthread_t;

static void
cc_fail (ccshared_t *sh, const char *fmt, ...)
{
  va_list ap;

  pthread_mutex_lock (&sh->fail_mtx);
  if (atomic_fetch_add (&sh->failures, 1) == 0) {
    va_start (ap, fmt);
    vsnprintf (sh->first_failure, sizeof sh->first_failure, fmt, ap);
    va_end (ap);
  }
  pthread_mutex_unlock (&sh->fail_mtx);
}

/* A writer: random writes, zeros and trims inside its own region, reads
 * compared with its part of the shadow, a flush now and then. */
static void *
cc_writer (void *arg)
{
  ccthread_t *t = arg;
  ccshared_t *sh = t->sh;
  uint64_t base = t->idx * CC_REGION;
  uint64_t s = tl_mix (sh->seed + t->idx);
  uint8_t *buf = malloc (64 * KiB);
  int r;

  for (unsigned it = 0; it < CC_OPS && buf; it++) {
    uint64_t len = 1 + tl_rand (&s) % (48 * KiB);
    uint64_t off = base + tl_rand (&s) % CC_REGION;
    unsigned op = tl_rand (&s) % 100;

    len = ZV_MIN (len, base + CC_REGION - off);
    if (op < 50) {
      uint8_t *dst = sh->shadow + off;
      tl_pat_fill (dst, off, len, (t->idx << 20) + it + 1);
      r = zvol_write (sh->zv, dst, off, (uint32_t) len,
                      it % 50 == 7 ? ZVOL_FUA : 0);
      if (r < 0)
        cc_fail (sh, "thread %u: write %" PRIu64 "+%" PRIu64 ": %d", t->idx,
                 off, len, r);
    }
    else if (op < 85) {
      r = zvol_read (sh->zv, buf, off, (uint32_t) len);
      if (r < 0 || memcmp (buf, sh->shadow + off, len) != 0)
        cc_fail (sh, "thread %u: read %" PRIu64 "+%" PRIu64 " (r %d) "
                 "differs", t->idx, off, len, r);
    }
    else if (op < 90) {
      r = zvol_zero (sh->zv, off, len, ZVOL_MAY_TRIM);
      memset (sh->shadow + off, 0, len);
      if (r < 0)
        cc_fail (sh, "thread %u: zero: %d", t->idx, r);
    }
    else if (op < 94) {
      r = zvol_trim (sh->zv, off, len, 0);
      trim_shadow (sh->shadow, CC_VOLSIZE, off, len);
      if (r < 0)
        cc_fail (sh, "thread %u: trim: %d", t->idx, r);
    }
    else {
      r = zvol_flush (sh->zv);
      if (r < 0)
        cc_fail (sh, "thread %u: flush: %d", t->idx, r);
    }
    atomic_fetch_add (&sh->ops, 1);
  }
  free (buf);
  return NULL;
}

static int
cc_ext_cb (void *arg, uint64_t off, uint64_t len, unsigned type)
{
  uint64_t *pos = arg;

  if (off != *pos)
    return -1;
  *pos = off + len;
  return 0;
}

/* A bystander: reads anywhere (content races with the writers, so only
 * errors count), asks for extents and stats, syncs the pool. */
static void *
cc_bystander (void *arg)
{
  ccshared_t *sh = arg;
  uint64_t s = tl_mix (sh->seed ^ 0xb7);
  uint8_t *buf = malloc (64 * KiB);
  int r;

  while (!atomic_load (&sh->stop) && buf) {
    uint64_t off = tl_rand (&s) % CC_VOLSIZE;
    uint64_t len = 1 + tl_rand (&s) % (64 * KiB);
    uint64_t pos = off;

    len = ZV_MIN (len, CC_VOLSIZE - off);
    if ((r = zvol_read (sh->zv, buf, off, (uint32_t) len)) < 0)
      cc_fail (sh, "bystander: read: %d", r);
    if ((r = zvol_extents (sh->zv, off, len, cc_ext_cb, &pos)) < 0
        || pos != off + len)
      cc_fail (sh, "bystander: extents %" PRIu64 "+%" PRIu64 ": r %d, "
               "covered up to %" PRIu64, off, len, r, pos);
    if (tl_rand (&s) % 16 == 0) {
      free (zvol_format_stats (sh->pool, sh->zv));
      free (zvol_format_txgs (sh->pool));
    }
    if (tl_rand (&s) % 32 == 0 && (r = zv_pool_sync (sh->pool)) < 0)
      cc_fail (sh, "bystander: sync: %d", r);
  }
  free (buf);
  return NULL;
}

/* Eight writers on disjoint ranges plus a bystander, with the engine's
 * thread syncing on a short timeout and a small dirty limit (throttle)
 * and a small cache (evictions); then everything is compared, before
 * and after an import. */
static void
test_concurrency (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "cc");
  zvol_pool_config_t pc;
  ccshared_t sh;
  ccthread_t th[CC_THREADS];
  pthread_t tid[CC_THREADS], by;
  zvol_pool_t *p = NULL;

  memset (&sh, 0, sizeof sh);
  pthread_mutex_init (&sh.fail_mtx, NULL);
  sh.shadow = calloc (1, CC_VOLSIZE);
  sh.seed = tl_seed ("concurrency");
  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, CC_VOLSIZE, true);
  pc.pc_cache_size = MiB;
  pc.pc_txg.tt_timeout_ms = 20;
  pc.pc_txg.tt_dirty_max = 4 * MiB;
  p = tl_pool_open_ok (&pc);
  assert_int_equal (zvol_pool_start (p), 0);
  sh.pool = p;
  sh.zv = tl_vol (p);

  assert_int_equal (pthread_create (&by, NULL, cc_bystander, &sh), 0);
  for (unsigned i = 0; i < CC_THREADS; i++) {
    th[i] = (ccthread_t) { .sh = &sh, .idx = i };
    assert_int_equal (pthread_create (&tid[i], NULL, cc_writer, &th[i]), 0);
  }
  for (unsigned i = 0; i < CC_THREADS; i++)
    pthread_join (tid[i], NULL);
  atomic_store (&sh.stop, true);
  pthread_join (by, NULL);
  if (atomic_load (&sh.failures) > 0)
    fail_msg ("%u failures; first: %s", atomic_load (&sh.failures),
              sh.first_failure);
  assert_int_equal (atomic_load (&sh.ops), CC_THREADS * CC_OPS);

  check_shadow (sh.zv, sh.shadow, 0, CC_VOLSIZE);
  p = reimport (p, dev);
  check_shadow (tl_vol (p), sh.shadow, 0, CC_VOLSIZE);
  assert_int_equal (tl_pool_close (p), 0);
  pthread_mutex_destroy (&sh.fail_mtx);
  free (sh.shadow);
}

/* ---- zero without MAY_TRIM (NBD's NO_HOLE) ---- */

#define NH_VOLSIZE (128 * BS + 4096)      /* a short last block */
#define NH_NBLK 129u

/* What each block of the no-hole volume should be: 1 data, 0 hole. */
typedef struct nhstate {
  uint8_t *shadow;
  bool data[NH_NBLK];
} nhstate_t;

/* Zero [off, off+len) with flags and mirror it: blocks a zero without
 * MAY_TRIM touches are data, whole blocks of one with MAY_TRIM holes. */
static void
nh_zero (zvol_t *zv, nhstate_t *st, uint64_t off, uint64_t len,
         unsigned flags)
{
  assert_int_equal (zvol_zero (zv, off, len, flags), 0);
  memset (st->shadow + off, 0, len);
  for (uint64_t b = off / BS; b * BS < off + len; b++) {
    uint64_t bend = ZV_MIN ((b + 1) * BS, (uint64_t) NH_VOLSIZE);
    if (!(flags & ZVOL_MAY_TRIM))
      st->data[b] = true;
    else if (off <= b * BS && bend <= off + len)
      st->data[b] = false;
  }
}

/* Content and allocation as the state says, block by block. */
static void
nh_check (zvol_t *zv, const nhstate_t *st, extlist_t *el, const char *when)
{
  check_shadow (zv, st->shadow, 0, NH_VOLSIZE);
  get_extents (zv, 0, NH_VOLSIZE, el);
  for (unsigned b = 0; b < NH_NBLK; b++) {
    uint64_t len = ZV_MIN ((uint64_t) BS, NH_VOLSIZE - (uint64_t) b * BS);
    if (!ext_is (el, (uint64_t) b * BS, len,
                 st->data[b] ? 0 : ZVOL_EXTENT_HOLE))
      fail_msg ("%s: block %u is reported as %s, expected %s", when, b,
                st->data[b] ? "a hole" : "data", st->data[b] ? "data"
                : "a hole");
  }
}

/* Syncs enough txgs that the frees of the first are applied, then the
 * space in use (allocated less what waits on the deferred lists). */
static uint64_t
nh_space (zvol_pool_t *p, nhstate_t *st)
{
  for (unsigned i = 0; i < 3; i++) {
    tl_vol_write (tl_vol (p), st->shadow, 127 * BS, 512, 900 + i,
                  0);
    assert_int_equal (zv_pool_sync (p), 0);
  }
  return tl_pool_stat_u64 (p, "space_allocated")
    - tl_pool_stat_u64 (p, "space_deferred");
}

/* This process's resident memory, bytes. */
static uint64_t
nh_rss (void)
{
  FILE *f = fopen ("/proc/self/status", "r");
  char line[256];
  uint64_t kib = 0;

  assert_non_null (f);
  while (fgets (line, sizeof line, f))
    if (sscanf (line, "VmRSS: %" SCNu64, &kib) == 1)
      break;
  fclose (f);
  assert_true (kib > 0);
  return kib * 1024;
}

/* The crash child: import (nothing syncs by itself), make the log usable
 * (a txg with its fresh chain on disk: a write of zeros into a hole
 * dirties one and changes nothing), zero without and with MAY_TRIM,
 * flush, report, and die without exporting. */
static void *
nh_child_thread (void *arg)
{
  fuachild_t *c = arg;
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  zvol_t *zv;
  uint8_t zeros[512] = { 0 };
  char ack = 1;

  tl_pool_cfg (&pc, &c->dev, 1, 0, false);
  pc.pc_txg.tt_timeout_ms = 600000;
  if (tl_pool_open (&pc, &p) < 0 || zvol_pool_start (p) < 0)
    _exit (4);
  zv = tl_vol (p);
  if (zvol_write (zv, zeros, 100 * BS, sizeof zeros, 0) < 0
      || zv_pool_sync (p) < 0)
    _exit (4);
  if (zvol_zero (zv, 70 * BS, 10 * BS, 0) < 0                    /* holes */
      || zvol_zero (zv, 90 * BS + 300, 500, 0) < 0               /* edge */
      || zvol_zero (zv, 24 * BS, 4 * BS, ZVOL_MAY_TRIM) < 0      /* data */
      || zvol_zero (zv, 28 * BS, 2 * BS, 0) < 0                  /* data */
      || zvol_flush (zv) < 0)
    _exit (5);
  if (write (c->fd, &ack, 1) != 1)
    _exit (6);
  _exit (0);
}

/*
 * A zero without MAY_TRIM keeps its range allocated: whole and partial
 * blocks, over data and over holes, read as zeros and are reported as
 * data in open context, after the txg sync, after an import and after an
 * intent-log replay, and they take space; with MAY_TRIM whole blocks
 * become holes.  ZVOL_FAST is refused (changing nothing) without
 * MAY_TRIM and honoured with it.  A write of zeros still makes holes.
 * A zero that does not fit in the pool fails with -ENOSPC and leaves a
 * pool that works and exports cleanly.
 */
static void
test_zero_no_hole (void **state)
{
  char path[512];
  const char *dev = path;
  zvol_pool_t *p = new_pool (path, sizeof path, "nohole", DEV_SIZE,
                             NH_VOLSIZE, 0);
  zvol_t *zv = tl_vol (p);
  extlist_t *el = malloc (sizeof *el);
  nhstate_t st = { .shadow = calloc (1, NH_VOLSIZE) };
  uint8_t zeros[BS] = { 0 };
  uint64_t before, after;
  int fd;
  char ack;
  pid_t pid;

  assert_non_null (el);
  assert_non_null (st.shadow);
  /* Data in blocks 0..31 (and 127, which nh_space rewrites). */
  tl_vol_write (zv, st.shadow, 0, 32 * BS, 1, 0);
  for (unsigned b = 0; b < 32; b++)
    st.data[b] = true;
  st.data[127] = true;
  before = nh_space (p, &st);

  nh_zero (zv, &st, 2 * BS + 100, 6 * BS, 0);        /* over data, edges */
  nh_zero (zv, &st, 40 * BS, 16 * BS, 0);            /* over holes */
  nh_zero (zv, &st, 60 * BS + 1000, 200, 0);         /* inside a hole */
  nh_zero (zv, &st, 128 * BS, 4096, 0);              /* the short block */
  nh_zero (zv, &st, 10 * BS, 4 * BS, ZVOL_MAY_TRIM); /* holes */
  nh_zero (zv, &st, 20 * BS, 2 * BS, ZVOL_MAY_TRIM | ZVOL_FAST);
  /* Fast without MAY_TRIM: refused, nothing changed. */
  tl_log_reset (true);
  assert_int_equal (zvol_zero (zv, 16 * BS, 4 * BS, ZVOL_FAST), -ENOTSUP);
  assert_int_equal (zvol_zero (zv, 45 * BS + 7, 9, ZVOL_FAST | ZVOL_FUA),
                    -ENOTSUP);
  tl_log_reset (false);
  /* Zeroed without MAY_TRIM, then written with zeros in the same txg:
   * the write decides, and written zeros are a hole. */
  nh_zero (zv, &st, 44 * BS, BS, 0);
  assert_int_equal (zvol_write (zv, zeros, 44 * BS, BS, 0), 0);
  nh_check (zv, &st, el, "open context");
  st.data[44] = false;

  assert_int_equal (zvol_flush (zv), 0);
  after = nh_space (p, &st);
  nh_check (zv, &st, el, "after the txg sync");
  /* 17 blocks allocated on holes (40..55 less 44, 60, 128), 6 freed
   * (10..13, 20, 21); the zeros over data replaced data: 11 more.  Two
   * blocks of slack for the metadata each txg rewrites. */
  if (after < before + 9 * BS)
    fail_msg ("space in use went from %" PRIu64 " to %" PRIu64 ": the "
              "allocated zeros take no space", before, after);

  /* An ordinary write of zeros over allocated zeros makes a hole. */
  assert_int_equal (zvol_write (zv, zeros, 41 * BS, BS, 0), 0);
  st.data[41] = false;
  assert_int_equal (zv_pool_sync (p), 0);
  nh_check (zv, &st, el, "after a write of zeros");

  p = reimport (p, dev);
  zv = tl_vol (p);
  nh_check (zv, &st, el, "after an import");
  assert_int_equal (tl_pool_close (p), 0);

  /* A crash after a flush: the intent log replays each zero as it was
   * made, allocated or holes. */
  pid = child_spawn (dev, nh_child_thread, &fd);
  assert_int_equal (read (fd, &ack, 1), 1);
  close (fd);
  child_reap (pid);
  memset (st.shadow + 70 * BS, 0, 10 * BS);
  memset (st.shadow + 90 * BS + 300, 0, 500);
  memset (st.shadow + 24 * BS, 0, 6 * BS);
  for (unsigned b = 70; b < 80; b++)
    st.data[b] = true;
  st.data[90] = true;
  for (unsigned b = 24; b < 28; b++)
    st.data[b] = false;
  {
    zvol_pool_config_t pc;
    tl_pool_cfg (&pc, &dev, 1, 0, false);
    assert_int_equal (tl_pool_open_retry_ex (&pc, &p, NULL, true), 0);
    assert_true (tl_log_has ("intent log: replayed"));
    tl_log_reset (false);
  }
  zv = tl_vol (p);
  nh_check (zv, &st, el, "after intent-log replay");
  p = reimport (p, dev);
  zv = tl_vol (p);
  nh_check (zv, &st, el, "after the replayed txgs were imported");
  assert_int_equal (tl_pool_close (p), 0);

  /* A sparse volume four times the pool: zeroing most of it allocated
   * fails with -ENOSPC; the pool still works, frees, and exports. */
  {
    zvol_pool_config_t pc;
    char spath[512];
    const char *sdev = tl_path (spath, sizeof spath, "nohole-full");
    uint8_t buf[4096];
    uint64_t full;

    assert_int_equal (tl_sparse_file (sdev, DEV_SIZE), 0);
    tl_pool_cfg (&pc, &sdev, 1, 4 * DEV_SIZE, true);
    pc.pc_sparse = true;
    p = tl_pool_open_ok (&pc);
    zv = tl_vol (p);
    tl_log_reset (true);
    assert_int_equal (zvol_zero (zv, 0, 3 * DEV_SIZE, 0), -ENOSPC);
    assert_true (tl_log_has ("is full"));
    tl_log_reset (false);
    assert_int_equal (zv_pool_sync (p), 0);
    full = tl_pool_stat_u64 (p, "space_allocated");
    assert_true (full > DEV_SIZE / 2);
    assert_int_equal (zvol_zero (zv, 0, 4 * DEV_SIZE, ZVOL_MAY_TRIM), 0);
    for (unsigned i = 0; i < 3; i++) {
      tl_pat_fill (buf, 4096, sizeof buf, 77 + i);
      assert_int_equal (zvol_write (zv, buf, 4096, sizeof buf, 0), 0);
      assert_int_equal (zv_pool_sync (p), 0);
    }
    assert_true (tl_pool_stat_u64 (p, "space_allocated") + DEV_SIZE / 4
                 < full);
    memset (buf, 0, sizeof buf);
    assert_int_equal (zvol_read (zv, buf, 4096, sizeof buf), 0);
    assert_int_equal (tl_pat_check (buf, 4096, sizeof buf, 79), -1);
    assert_int_equal (tl_pool_close (p), 0);
  }

  /* 256 MiB zeroed in one txg: the records hold no data, so memory does
   * not grow with the range (a buffer per block would be 256 MiB). */
  {
    zvol_pool_config_t pc;
    char mpath[512];
    const char *mdev = tl_path (mpath, sizeof mpath, "nohole-mem");
    uint64_t rss0, rss1;

    assert_int_equal (tl_sparse_file (mdev, 512 * MiB), 0);
    tl_pool_cfg (&pc, &mdev, 1, 256 * MiB, true);
    pc.pc_txg.tt_dirty_max = 1ull << 30;     /* no throttle, one txg */
    p = tl_pool_open_ok (&pc);
    zv = tl_vol (p);
    rss0 = nh_rss ();
    assert_int_equal (zvol_zero (zv, 0, 256 * MiB, 0), 0);
    rss1 = nh_rss ();
    print_message ("  256 MiB zeroed allocated: resident memory grew by "
                   "%" PRIu64 " KiB\n", (rss1 - ZV_MIN (rss0, rss1)) / 1024);
    if (rss1 > rss0 + 64 * MiB)
      fail_msg ("zeroing 256 MiB took %" PRIu64 " MiB of memory",
                (rss1 - rss0) / MiB);
    get_extents (zv, 0, 256 * MiB, el);
    assert_int_equal (el->n, 1);
    assert_int_equal (el->v[0].type, 0);
    assert_int_equal (zv_pool_sync (p), 0);
    get_extents (zv, 0, 256 * MiB, el);
    assert_int_equal (el->n, 1);
    assert_int_equal (el->v[0].type, 0);
    assert_true (tl_pool_stat_u64 (p, "space_allocated") >= 256 * MiB);
    assert_int_equal (tl_pool_close (p), 0);
    unlink (mdev);
  }
  free (st.shadow);
  free (el);
}

/*
 * After a txg sync fails (a device write error: the pool is suspended),
 * reads must go on returning what was written, since the failed txg's
 * changes are in memory only.  They were handed to the cache as if
 * synced; once evicted, a read went through the tree to the old blocks:
 * stale data, neither the write nor an error (found by zvstress).
 */
static int
sr_fail_writes (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
                uint32_t len)
{
  (void) arg; (void) dev; (void) off; (void) len;
  return op == ZV_DEV_WRITE ? -EIO : 0;
}

static void
test_suspended_reads (void **state)
{
  char path[512];
  zvol_pool_t *p = new_pool (path, sizeof path, "suspended", DEV_SIZE,
                             32 * MiB, 8 * MiB);
  zvol_t *zv = tl_vol (p);
  uint8_t *buf = malloc (MiB);

  (void) state;
  assert_non_null (buf);
  /* Version 1 everywhere, on disk; then version 2 of the first blocks. */
  tl_vol_write (zv, NULL, 0, 24 * MiB, 1, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  tl_vol_write (zv, NULL, 0, 4 * BS, 2, 0);
  tl_log_reset (true);
  zv_dev_set_fault (zv_pool_spa (p)->spa_devs[0], sr_fail_writes, NULL);
  assert_int_equal (zv_pool_sync (p), -EIO);
  zv_dev_set_fault (zv_pool_spa (p)->spa_devs[0], NULL, NULL);
  /* Through the 8 MiB cache twice over: nothing clean of before stays. */
  for (uint64_t off = MiB; off < 24 * MiB; off += MiB)
    assert_int_equal (zvol_read (zv, buf, off, MiB), 0);
  tl_vol_check (zv, 0, 4 * BS, 2);
  assert_int_equal (zvol_write (zv, buf, 0, BS, 0), -EIO);
  assert_int_not_equal (tl_pool_close (p), 0);
  tl_log_reset (false);
  free (buf);
}

/* ---- range locks: disjoint writes of one 1 MiB region ---- */

/* A read that parks its thread until the test lets it go. */
typedef struct rgpark {
  pthread_mutex_t mtx;
  pthread_cond_t cv;
  bool armed, parked, release;
} rgpark_t;

static int
rg_park_reads (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
               uint32_t len)
{
  rgpark_t *pk = arg;

  (void) dev; (void) off; (void) len;
  if (op != ZV_DEV_READ)
    return 0;
  pthread_mutex_lock (&pk->mtx);
  if (pk->armed) {
    pk->armed = false;
    pk->parked = true;
    pthread_cond_broadcast (&pk->cv);
    while (!pk->release)
      pthread_cond_wait (&pk->cv, &pk->mtx);
  }
  pthread_mutex_unlock (&pk->mtx);
  return 0;
}

typedef struct rgwrite {
  zvol_t *zv;
  const uint8_t *buf;
  uint64_t off;
  uint32_t len;
  int r;
  _Atomic bool done;
} rgwrite_t;

static void *
rg_writer (void *arg)
{
  rgwrite_t *w = arg;

  w->r = zvol_write (w->zv, w->buf, w->off, w->len, 0);
  atomic_store (&w->done, true);
  return NULL;
}

/*
 * A write that is not grain-aligned reads its old block while it holds
 * its range lock (a read-modify-write).  Parked in that read, it must not
 * hold up a write of other blocks of the same 1 MiB region: a sequential
 * stream of 128 KiB writes keeps eight of them in flight in each region,
 * and a lock per region ran them one at a time.  Both land.
 */
static void
test_range_grains (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "rg");
  zvol_pool_t *p = new_pool (path, sizeof path, "rg", DEV_SIZE, 4 * MiB, 0);
  uint8_t *shadow = calloc (1, 4 * MiB), *buf = malloc (128 * KiB);
  rgpark_t pk = { .mtx = PTHREAD_MUTEX_INITIALIZER,
                  .cv = PTHREAD_COND_INITIALIZER };
  rgwrite_t a = { 0 }, b = { 0 };
  pthread_t ta, tb;
  zvol_t *zv;
  bool b_first;

  (void) state;
  /* A synced first MiB, then an import with a cold cache. */
  tl_vol_write (tl_vol (p), shadow, 0, MiB, 1, 0);
  p = reimport (p, dev);
  zv = tl_vol (p);
  zv_dev_set_fault (zv_pool_spa (p)->spa_devs[0], rg_park_reads, &pk);

  memset (buf, 0xa5, 128 * KiB);
  pk.armed = true;
  a = (rgwrite_t) { .zv = zv, .buf = buf, .off = 100, .len = 10 };
  assert_int_equal (pthread_create (&ta, NULL, rg_writer, &a), 0);
  pthread_mutex_lock (&pk.mtx);
  while (!pk.parked)
    pthread_cond_wait (&pk.cv, &pk.mtx);
  pthread_mutex_unlock (&pk.mtx);

  /* Whole blocks of the fifth 128 KiB of the region: no read. */
  b = (rgwrite_t) { .zv = zv, .buf = buf, .off = 512 * KiB,
                    .len = 128 * KiB };
  assert_int_equal (pthread_create (&tb, NULL, rg_writer, &b), 0);
  for (unsigned i = 0; i < 2000 && !atomic_load (&b.done); i++)
    usleep (1000);
  b_first = atomic_load (&b.done);

  pthread_mutex_lock (&pk.mtx);
  pk.release = true;
  pthread_cond_broadcast (&pk.cv);
  pthread_mutex_unlock (&pk.mtx);
  pthread_join (ta, NULL);
  pthread_join (tb, NULL);
  zv_dev_set_fault (zv_pool_spa (p)->spa_devs[0], NULL, NULL);
  assert_true (b_first);
  assert_int_equal (a.r, 0);
  assert_int_equal (b.r, 0);
  memset (shadow + 100, 0xa5, 10);
  memset (shadow + 512 * KiB, 0xa5, 128 * KiB);
  check_shadow (zv, shadow, 0, 4 * MiB);
  p = reimport (p, dev);
  check_shadow (tl_vol (p), shadow, 0, 4 * MiB);
  assert_int_equal (tl_pool_close (p), 0);
  free (buf);
  free (shadow);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_random_shadow),
    tl_test (test_large_write),
    tl_test (test_dirty_charge),
    tl_test (test_trim),
    tl_test (test_zero),
    tl_test (test_extents),
    tl_test (test_out_of_range),
    tl_test (test_readonly),
    tl_test (test_fua_durable),
    tl_test (test_overlap_replay),
    tl_test (test_concurrency),
    tl_test (test_range_grains),
    tl_test (test_zero_no_hole),
    tl_test (test_suspended_reads),
  };

  return tl_main (tests, "zvol", NULL);
}
