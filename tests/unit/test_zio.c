/*
 * test_zio.c: unit tests for block I/O by block pointer (core/zio.c),
 * below the pool: each test builds a zv_spa_t of one or two sparse files
 * with its allocator (testlib.h's tl_spa_create) and drives zio directly.
 *
 *   write cap     the curve of txg writes in flight against dirty data,
 *                 zv_zio_write_cap_set and _raise, and that a batch keeps
 *                 to the cap (and sees a raise while it runs)
 *   bp_check      hostile pointers: a copy off the pool's devices, in a
 *                 label, misaligned or past the data area; a bad size,
 *                 copy count or type; none is followed (no device read)
 *   read          checksums verify, a bad or unreadable copy falls back
 *                 to the ditto copy, no good copy is -EIO
 *   write_many    blocks adjacent on a device go out as one gathered
 *                 write (at most 1 MiB), checksums are sealed, errors name
 *                 the device
 *   placement     alloc_bp, free_bp (at once or deferred), place_bp's copy
 *                 on write, and running out of space
 *
 * The pointer's level is not zio's to check: the object layer checks it
 * against the place the pointer hangs in its tree (see test_flat.c and
 * test_dmu.c).  A device observer (dev.h) sees the requests as they are
 * submitted and completed, which is how gathering and the cap are seen.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "tunable.h"

#define DEV_SIZE (32 * MiB)
#define TXG 5u

/* ---- helpers ---- */

/* Allocate a block of 'size' bytes with 'copies' copies, born in 'birth',
 * and write pattern 'seed' into it; the buffer is returned (zv_buf). */
static void *
zio_put (zv_spa_t *spa, zv_blkptr_t *bp, uint32_t size, unsigned copies,
         uint64_t seed, uint64_t birth)
{
  void *buf = zv_buf_alloc (size);
  zv_zio_write_t w = { .zw_bp = bp, .zw_buf = buf };

  memset (bp, 0, sizeof *bp);
  tl_pat_fill (buf, 0, size, seed);
  assert_int_equal (zv_zio_alloc_bp (spa, bp, size, copies), 0);
  bp->bp_lsize = size;
  bp->bp_birth = birth;
  bp->bp_type = ZV_BT_VOLDATA;
  bp->bp_fill = 1;
  assert_int_equal (zv_zio_write_many (spa, &w, 1), 0);
  return buf;
}

/* The file that holds copy c of bp, and the byte offset in it. */
static const char *
zio_copy_file (tl_spa_t *ts, const zv_blkptr_t *bp, unsigned c,
               uint64_t *off)
{
  *off = ZV_DVA_OFFSET (bp->bp_dva[c]);
  return ts->ts_path[ZV_DVA_VDEV (bp->bp_dva[c])];
}

/* Flip one byte of copy c of bp, on the file behind the device. */
static void
zio_damage (tl_spa_t *ts, const zv_blkptr_t *bp, unsigned c, uint64_t at)
{
  uint64_t off;
  const char *path = zio_copy_file (ts, bp, c, &off);

  assert_int_equal (tl_file_flip (path, off + at), 0);
}

/* Reads done by every device of the spa so far. */
static uint64_t
zio_reads (zv_spa_t *spa)
{
  uint64_t n = 0;

  for (unsigned d = 0; d < spa->spa_ndevs; d++) {
    zv_dev_stats_t st;
    zv_dev_get_stats (spa->spa_devs[d], &st);
    n += st.ds_reads;
  }
  return n;
}

/* What an observer saw: the requests of one kind (zr_op: writes unless
 * zrec_attach_op says otherwise) submitted, and how many were in flight
 * at most (before and after an optional raise of the cap). */
#define ZIO_MAXREC 256
typedef struct zrec {
  zv_spa_t *zr_spa;
  enum zv_dev_op zr_op;
  unsigned zr_nw;
  uint64_t zr_off[ZIO_MAXREC];
  uint32_t zr_len[ZIO_MAXREC];
  zv_dev_t *zr_dev[ZIO_MAXREC];
  unsigned zr_inflight, zr_max, zr_max_after;
  unsigned zr_completions;
  unsigned zr_raise_at;         /* raise the cap at this completion (0: no) */
  bool zr_raised;
} zrec_t;

static void
zrec_observe (void *arg, zv_dev_t *dev, enum zv_dev_op op, int done,
              uint64_t off, uint32_t len, const void *buf, int result)
{
  zrec_t *z = arg;

  (void) buf;
  (void) result;
  if (op != z->zr_op)
    return;
  if (done == 0) {
    if (z->zr_nw < ZIO_MAXREC) {
      z->zr_off[z->zr_nw] = off;
      z->zr_len[z->zr_nw] = len;
      z->zr_dev[z->zr_nw] = dev;
    }
    z->zr_nw++;
    z->zr_inflight++;
    if (z->zr_raised)
      z->zr_max_after = ZV_MAX (z->zr_max_after, z->zr_inflight);
    else
      z->zr_max = ZV_MAX (z->zr_max, z->zr_inflight);
    return;
  }
  z->zr_inflight--;
  z->zr_completions++;
  if (z->zr_raise_at && z->zr_completions == z->zr_raise_at) {
    zv_zio_write_cap_raise (z->zr_spa, 100);
    z->zr_raised = true;
  }
}

static void
zrec_attach_op (zrec_t *z, zv_spa_t *spa, enum zv_dev_op op)
{
  memset (z, 0, sizeof *z);
  z->zr_spa = spa;
  z->zr_op = op;
  for (unsigned d = 0; d < spa->spa_ndevs; d++)
    zv_dev_set_observer (spa->spa_devs[d], zrec_observe, z);
}

static void
zrec_attach (zrec_t *z, zv_spa_t *spa)
{
  zrec_attach_op (z, spa, ZV_DEV_WRITE);
}

static void
zrec_detach (zv_spa_t *spa)
{
  for (unsigned d = 0; d < spa->spa_ndevs; d++)
    zv_dev_set_observer (spa->spa_devs[d], NULL, NULL);
}

/* n blocks of 'size' bytes one after the other from byte 'off' of device
 * 0 (single copies, pointers set by hand: write_many does not allocate),
 * each block with its own buffer of pattern seed + i. */
static void
zio_run (zv_spa_t *spa, zv_blkptr_t *bps, void **bufs, zv_zio_write_t *w,
         size_t n, uint64_t off, uint32_t size, uint32_t gap)
{
  for (size_t i = 0; i < n; i++) {
    memset (&bps[i], 0, sizeof bps[i]);
    bps[i].bp_dva[0] = ZV_DVA_MAKE (0, off + i * (uint64_t) (size + gap));
    bps[i].bp_psize = bps[i].bp_lsize = size;
    bps[i].bp_ncopies = 1;
    bps[i].bp_type = ZV_BT_VOLDATA;
    bps[i].bp_birth = TXG;
    bufs[i] = zv_buf_alloc (size);
    tl_pat_fill (bufs[i], 0, size, 1000 + i);
    w[i] = (zv_zio_write_t) { .zw_bp = &bps[i], .zw_buf = bufs[i] };
  }
  (void) spa;
}

/* Every block reads back (verified) as the buffer it was written from. */
static void
zio_check_all (zv_spa_t *spa, const zv_blkptr_t *bps, void **bufs, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    void *got = zv_buf_alloc (bps[i].bp_psize);
    assert_int_equal (zv_zio_read (spa, &bps[i], got, "check"), 0);
    assert_memory_equal (got, bufs[i], bps[i].bp_psize);
    zv_buf_free (got);
  }
}

static void
zio_free_bufs (void **bufs, size_t n)
{
  for (size_t i = 0; i < n; i++)
    zv_buf_free (bufs[i]);
}

/* ---- the write cap ---- */

/* N sector writes in the gaps zio_run leaves, with spa_write_cap at
 * 'cap' (and the intent log's I/O under way when log_busy), recorded in
 * *z, read back and freed. */
static void
zio_capped (zv_spa_t *spa, zv_blkptr_t *bps, void **bufs, zv_zio_write_t *w,
            unsigned n, unsigned cap, bool log_busy, zrec_t *z)
{
  zio_run (spa, bps, bufs, w, n, zv_data_start (), ZV_SECTOR, ZV_SECTOR);
  atomic_store (&spa->spa_write_cap, cap);
  if (log_busy)
    zv_zio_sync_io_begin (spa);
  zrec_attach (z, spa);
  assert_int_equal (zv_zio_write_many (spa, w, n), 0);
  zrec_detach (spa);
  if (log_busy)
    zv_zio_sync_io_end (spa);
  zio_check_all (spa, bps, bufs, n);
  zio_free_bufs (bufs, n);
}

/* How many txg writes are in flight: OpenZFS's async-write scaling,
 * 2 up to 30% of dirty_max, 10 from 60%, linear between. */
static void
test_write_cap_curve (void **state)
{
  unsigned last = 0;

  if (getenv ("ZVOL_ZIO_WRITE_MAX_ACTIVE"))
    tl_skip ("ZVOL_ZIO_WRITE_MAX_ACTIVE fixes the cap");
  assert_int_equal (zv_zio_write_max_active (0), 2);
  assert_int_equal (zv_zio_write_max_active (30), 2);
  assert_int_equal (zv_zio_write_max_active (45), 6);
  assert_int_equal (zv_zio_write_max_active (60), 10);
  assert_int_equal (zv_zio_write_max_active (100), 10);
  assert_int_equal (zv_zio_write_max_active (1000), 10);
  for (unsigned pct = 0; pct <= 100; pct++) {
    unsigned n = zv_zio_write_max_active (pct);
    assert_true (n >= last && n >= 2 && n <= 10);
    last = n;
  }
}

/* zio_aggregate_max for a test: 4K makes every write of these tests a
 * full-size one, so the cap counts them as it is (no scaling for small
 * writes, test_write_cap_small_writes). */
static void
zio_aggregate_set (const char *v)
{
  char err[256];

  assert_int_equal (zv_tunable_set ("zio_aggregate_max", v, err, sizeof err),
                    0);
}

typedef struct raiser {
  zv_spa_t *ra_spa;
  uint64_t ra_seed;
  unsigned ra_down;             /* times the cap was seen to go down */
} raiser_t;

static void *
raiser_thread (void *arg)
{
  raiser_t *ra = arg;
  unsigned last = 0;

  for (unsigned i = 0; i < 20000; i++) {
    unsigned cap;

    zv_zio_write_cap_raise (ra->ra_spa, (unsigned) (tl_rand (&ra->ra_seed)
                                                    % 101));
    cap = atomic_load (&ra->ra_spa->spa_write_cap);
    ra->ra_down += cap < last;
    last = cap;
  }
  return NULL;
}

/* A sync's cap comes from its dirty data; the intent log's raise moves it
 * up the same range by its share and never down; a new sync sets its own. */
static void
test_write_cap_set_raise (void **state)
{
  zv_spa_t spa;
  raiser_t ra[4];
  pthread_t th[4];

  if (getenv ("ZVOL_ZIO_WRITE_MAX_ACTIVE"))
    tl_skip ("ZVOL_ZIO_WRITE_MAX_ACTIVE fixes the cap");
  memset (&spa, 0, sizeof spa);
  zv_zio_write_cap_set (&spa, 0);
  assert_int_equal (atomic_load (&spa.spa_write_cap), 2);
  zv_zio_write_cap_set (&spa, 45);
  assert_int_equal (atomic_load (&spa.spa_write_cap), 6);
  zv_zio_write_cap_set (&spa, 100);
  assert_int_equal (atomic_load (&spa.spa_write_cap), 10);

  zv_zio_write_cap_set (&spa, 10);
  assert_int_equal (atomic_load (&spa.spa_write_cap), 2);   /* set lowers */
  zv_zio_write_cap_raise (&spa, 0);
  assert_int_equal (atomic_load (&spa.spa_write_cap), 2);
  zv_zio_write_cap_raise (&spa, 50);
  assert_int_equal (atomic_load (&spa.spa_write_cap), 6);
  zv_zio_write_cap_raise (&spa, 25);                        /* not lower */
  assert_int_equal (atomic_load (&spa.spa_write_cap), 6);
  zv_zio_write_cap_raise (&spa, 75);
  assert_int_equal (atomic_load (&spa.spa_write_cap), 8);
  zv_zio_write_cap_raise (&spa, 100);
  assert_int_equal (atomic_load (&spa.spa_write_cap), 10);
  zv_zio_write_cap_raise (&spa, 400);                       /* at most 10 */
  assert_int_equal (atomic_load (&spa.spa_write_cap), 10);
  zv_zio_write_cap_set (&spa, 60);
  zv_zio_write_cap_raise (&spa, 50);
  assert_int_equal (atomic_load (&spa.spa_write_cap), 10);

  /* Raises racing each other: the largest wins, nothing goes down. */
  zv_zio_write_cap_set (&spa, 0);
  for (unsigned i = 0; i < 4; i++) {
    ra[i] = (raiser_t) { .ra_spa = &spa, .ra_seed = 77 + i };
    assert_int_equal (pthread_create (&th[i], NULL, raiser_thread, &ra[i]),
                      0);
  }
  for (unsigned i = 0; i < 4; i++) {
    assert_int_equal (pthread_join (th[i], NULL), 0);
    assert_int_equal (ra[i].ra_down, 0);
  }
  assert_int_equal (atomic_load (&spa.spa_write_cap), 10);
}

/* Sync writes first: while an intent-log batch is under way
 * (spa_sync_io), a sync at the minimum cap keeps one write in flight; a
 * cap raised above the minimum does not yield. */
static void
test_write_yields_to_log (void **state)
{
  enum { N = 40 };
  tl_spa_t ts;
  zv_spa_t *spa;
  zv_blkptr_t bps[N];
  void *bufs[N];
  zv_zio_write_t w[N];
  zrec_t z;
  unsigned caps[2] = { 2, 6 }, want[2] = { 1, 6 };

  tl_spa_create (&ts, "yield", 1, DEV_SIZE);
  spa = &ts.ts_spa;
  zio_aggregate_set ("4K");
  for (unsigned i = 0; i < 2; i++) {
    zio_capped (spa, bps, bufs, w, N, caps[i], true, &z);
    assert_int_equal (z.zr_nw, N);
    print_message ("cap %u, log busy: %u writes in flight at most\n",
                   caps[i], z.zr_max);
    if (i == 1 && z.zr_max <= 1) {
      tl_spa_destroy (&ts);
      tl_skip ("requests run one at a time here (no io_uring)");
    }
    assert_int_equal (z.zr_max, want[i]);
  }
  /* The log done: the cap again. */
  zio_capped (spa, bps, bufs, w, N, 2, false, &z);
  assert_int_equal (z.zr_max, 2);
  zio_aggregate_set ("1M");
  tl_spa_destroy (&ts);
}

/* A batch keeps to spa_write_cap requests in flight, and a raise while
 * it runs lets more out at once. */
static void
test_write_cap_in_flight (void **state)
{
  enum { N = 40 };
  tl_spa_t ts;
  zv_spa_t *spa;
  zv_blkptr_t bps[N];
  void *bufs[N];
  zv_zio_write_t w[N];
  zrec_t z;

  tl_spa_create (&ts, "cap", 1, DEV_SIZE);
  spa = &ts.ts_spa;
  zio_aggregate_set ("4K");

  /* No cap: how many go out at once here (the pread/pwrite fallback
   * runs them one by one, and then there is nothing to measure). */
  zio_capped (spa, bps, bufs, w, N, 0, false, &z);
  assert_int_equal (z.zr_nw, N);                /* the gaps: no gathering */
  print_message ("uncapped: %u writes in flight at most\n", z.zr_max);
  if (z.zr_max <= 2) {
    zio_aggregate_set ("1M");
    tl_spa_destroy (&ts);
    tl_skip ("requests run one at a time here (no io_uring)");
  }

  /* Cap 2. */
  zio_capped (spa, bps, bufs, w, N, 2, false, &z);
  assert_int_equal (z.zr_nw, N);
  assert_int_equal (z.zr_max, 2);

  /* Cap 2, raised to the most (10) at the third completion. */
  if (getenv ("ZVOL_ZIO_WRITE_MAX_ACTIVE") == NULL) {
    zio_run (spa, bps, bufs, w, N, zv_data_start (), ZV_SECTOR, ZV_SECTOR);
    zv_zio_write_cap_set (spa, 0);
    assert_int_equal (atomic_load (&spa->spa_write_cap), 2);
    zrec_attach (&z, spa);
    z.zr_raise_at = 3;
    assert_int_equal (zv_zio_write_many (spa, w, N), 0);
    zrec_detach (spa);
    zio_check_all (spa, bps, bufs, N);
    zio_free_bufs (bufs, N);
    assert_true (z.zr_raised);
    assert_int_equal (z.zr_max, 2);
    print_message ("raised: %u writes in flight at most\n", z.zr_max_after);
    assert_true (z.zr_max_after > 2 && z.zr_max_after <= 10);
  }
  zio_aggregate_set ("1M");
  tl_spa_destroy (&ts);
}

/*
 * Small writes (a fuller pool's, each in a hole of its own): the cap is
 * scaled by how many of them fit in zio_aggregate_max, up to
 * zio_async_write_max_active, so cap 2 of 4 KiB writes keeps 10 in
 * flight; cap 2 of writes of the aggregation limit keeps 2.  While the
 * intent log writes, the minimum cap still yields to one.
 */
static void
test_write_cap_small_writes (void **state)
{
  enum { N = 40 };
  tl_spa_t ts;
  zv_spa_t *spa;
  zv_blkptr_t bps[N];
  void *bufs[N];
  zv_zio_write_t w[N];
  zrec_t z;

  if (getenv ("ZVOL_ZIO_WRITE_MAX_ACTIVE"))
    tl_skip ("ZVOL_ZIO_WRITE_MAX_ACTIVE fixes the cap");
  tl_spa_create (&ts, "small", 1, DEV_SIZE);
  spa = &ts.ts_spa;

  /* Uncapped first: with requests run one by one there is nothing to
   * measure. */
  zio_capped (spa, bps, bufs, w, N, 0, false, &z);
  if (z.zr_max < 10) {
    tl_spa_destroy (&ts);
    tl_skip ("fewer than 10 requests in flight at once here");
  }

  zio_capped (spa, bps, bufs, w, N, 2, false, &z);
  assert_int_equal (z.zr_nw, N);
  print_message ("cap 2, 4 KiB writes: %u in flight at most\n", z.zr_max);
  assert_int_equal (z.zr_max, 10);

  /* The log busy: the minimum cap yields, scaled or not. */
  zio_capped (spa, bps, bufs, w, N, 2, true, &z);
  assert_int_equal (z.zr_max, 1);

  /* Full-size writes (the limit at their size): the cap as it is. */
  zio_aggregate_set ("4K");
  zio_capped (spa, bps, bufs, w, N, 2, false, &z);
  zio_aggregate_set ("1M");
  assert_int_equal (z.zr_max, 2);
  tl_spa_destroy (&ts);
}

/* ---- hostile pointers ---- */

/* Every kind of pointer zv_zio_bp_check must refuse, and zv_zio_read with
 * it: -EIO with a message naming 'what', and not one device read. */
static void
test_bp_check_hostile (void **state)
{
  tl_spa_t ts;
  zv_spa_t *spa;
  zv_blkptr_t good, hole, bp;
  void *data, *buf = zv_buf_alloc (ZV_MAX_BLKSZ + ZV_SECTOR);
  uint64_t end0, end1, reads;
  struct {
    const char *why;
    const char *msg;
  } k[] = {
    { "copy 0 on a device the pool does not have", "outside the pool" },
    { "copy 0 on device 255", "outside the pool" },
    { "copy 0 in the front label", "outside the pool" },
    { "copy 0 at offset 0 of device 1", "outside the pool" },
    { "copy 0 not sector-aligned", "outside the pool" },
    { "copy 0 running into the back label", "outside the pool" },
    { "copy 0 just past the data area", "outside the pool" },
    { "copy 0 past the device, offset near 2^56", "outside the pool" },
    { "copy 1 past the data area", "copy 1" },
    { "copy 1 on a device the pool does not have", "copy 1" },
    { "size 0", "invalid block pointer" },
    { "size not a multiple of 4 KiB", "invalid block pointer" },
    { "size over 128 KiB", "invalid block pointer" },
    { "logical size over 128 KiB", "invalid block pointer" },
    { "no copies", "invalid block pointer" },
    { "three copies", "invalid block pointer" },
    { "type none", "invalid block pointer" },
    { "type past the last", "invalid block pointer" },
    { "type 200", "invalid block pointer" },
  };

  tl_spa_create (&ts, "hostile", 2, DEV_SIZE);
  spa = &ts.ts_spa;
  end0 = spa->spa_data_end[0];
  end1 = spa->spa_data_end[1];
  data = zio_put (spa, &good, 16384, 2, 1, TXG);
  memset (&hole, 0, sizeof hole);
  assert_int_equal (zv_zio_bp_check (spa, &good, "good"), 0);
  assert_int_equal (zv_zio_bp_check (spa, &hole, "hole"), 0);
  /* A block that ends exactly at the end of the data area is fine. */
  bp = good;
  bp.bp_dva[0] = ZV_DVA_MAKE (0, end0 - bp.bp_psize);
  assert_int_equal (zv_zio_bp_check (spa, &bp, "at the end"), 0);

  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    char what[96];

    bp = good;
    switch (i) {
    case 0: bp.bp_dva[0] = ZV_DVA_MAKE (2, ZV_LABEL_SIZE); break;
    case 1: bp.bp_dva[0] = ZV_DVA_MAKE (255, ZV_LABEL_SIZE); break;
    case 2: bp.bp_dva[0] = ZV_DVA_MAKE (0, ZV_LABEL_SIZE - ZV_SECTOR); break;
    case 3: bp.bp_dva[0] = ZV_DVA_MAKE (1, 0); break;
    case 4: bp.bp_dva[0] = ZV_DVA_MAKE (0, ZV_LABEL_SIZE + 512); break;
    case 5: bp.bp_dva[0] = ZV_DVA_MAKE (0, end0 - ZV_SECTOR); break;
    case 6: bp.bp_dva[0] = ZV_DVA_MAKE (0, end0); break;
    case 7: bp.bp_dva[0] = ZV_DVA_MAKE (0, (1ull << 56) - ZV_SECTOR); break;
    case 8: bp.bp_dva[1] = ZV_DVA_MAKE (1, end1); break;
    case 9: bp.bp_dva[1] = ZV_DVA_MAKE (3, ZV_LABEL_SIZE); break;
    case 10: bp.bp_psize = 0; break;
    case 11: bp.bp_psize = 16384 + 512; break;
    case 12: bp.bp_psize = ZV_MAX_BLKSZ + ZV_SECTOR; break;
    case 13: bp.bp_lsize = ZV_MAX_BLKSZ + 1; break;
    case 14: bp.bp_ncopies = 0; break;
    case 15: bp.bp_ncopies = 3; break;
    case 16: bp.bp_type = ZV_BT_NONE; break;
    case 17: bp.bp_type = ZV_BT_MAX; break;
    case 18: bp.bp_type = 200; break;
    }
    snprintf (what, sizeof what, "hostile pointer %zu", i);
    tl_log_reset (true);
    reads = zio_reads (spa);
    if (zv_zio_bp_check (spa, &bp, what) != -EIO)
      fail_msg ("accepted: %s", k[i].why);
    if (!tl_log_has (what) || !tl_log_has (k[i].msg))
      fail_msg ("%s: no message with \"%s\"", k[i].why, k[i].msg);
    if (zv_zio_read (spa, &bp, buf, what) != -EIO)
      fail_msg ("read: %s", k[i].why);
    if (zio_reads (spa) != reads)
      fail_msg ("%s: the device was read", k[i].why);
  }
  tl_log_reset (false);
  zv_buf_free (data);
  zv_buf_free (buf);
  tl_spa_destroy (&ts);
}

/* ---- reads ---- */

/* Fail every read of one device. */
static int
zio_fail_reads (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
                uint32_t len)
{
  (void) arg;
  (void) dev;
  (void) off;
  (void) len;
  return op == ZV_DEV_READ ? -EIO : 0;
}

/* A read verifies the checksum and falls back to the ditto copy; with no
 * good copy it is -EIO; another pool's guid or a wrong checksum in the
 * pointer does not verify. */
static void
test_read_ditto (void **state)
{
  const uint32_t size = 16384;
  tl_spa_t ts;
  zv_spa_t *spa;
  zv_blkptr_t bp, one, bad;
  uint8_t *data, *data1, *buf = zv_buf_alloc (size);
  zv_dev_stats_t st0, st1;
  unsigned dev0, dev1;

  tl_spa_create (&ts, "ditto", 2, DEV_SIZE);
  spa = &ts.ts_spa;
  data = zio_put (spa, &bp, size, 2, 7, TXG);
  assert_int_equal (bp.bp_ncopies, 2);
  assert_int_not_equal (ZV_DVA_VDEV (bp.bp_dva[0]),
                        ZV_DVA_VDEV (bp.bp_dva[1]));
  dev0 = ZV_DVA_VDEV (bp.bp_dva[0]);
  dev1 = ZV_DVA_VDEV (bp.bp_dva[1]);

  memset (buf, 0xa5, size);
  assert_int_equal (zv_zio_read (spa, &bp, buf, "clean"), 0);
  assert_memory_equal (buf, data, size);
  assert_int_equal (tl_log_errors (), 0);

  /* Copy 0 damaged: the ditto copy serves, and the bad one is named. */
  zio_damage (&ts, &bp, 0, 100);
  tl_log_reset (true);
  memset (buf, 0xa5, size);
  zv_dev_get_stats (spa->spa_devs[dev1], &st0);
  assert_int_equal (zv_zio_read (spa, &bp, buf, "copy 0 bad"), 0);
  assert_memory_equal (buf, data, size);
  zv_dev_get_stats (spa->spa_devs[dev1], &st1);
  assert_int_equal (st1.ds_reads, st0.ds_reads + 1);
  assert_int_equal (st1.ds_cksum_errors, 0);
  zv_dev_get_stats (spa->spa_devs[dev0], &st0);
  assert_int_equal (st0.ds_cksum_errors, 1);   /* the bad copy's device */
  assert_int_equal (st0.ds_read_errors, 0);
  assert_int_equal (tl_log_errors (), 1);
  assert_true (tl_log_has ("copy 0 bad: checksum error"));
  assert_true (tl_log_has ("(copy 1 of 2, birth txg 5)"));
  assert_true (tl_log_has (ts.ts_path[ZV_DVA_VDEV (bp.bp_dva[0])]));

  /* Both damaged: -EIO, both named. */
  zio_damage (&ts, &bp, 1, size - 1);
  tl_log_reset (true);
  assert_int_equal (zv_zio_read (spa, &bp, buf, "both bad"), -EIO);
  assert_int_equal (tl_log_errors (), 2);
  zv_dev_get_stats (spa->spa_devs[dev0], &st0);
  zv_dev_get_stats (spa->spa_devs[dev1], &st1);
  assert_int_equal (st0.ds_cksum_errors, 2);
  assert_int_equal (st1.ds_cksum_errors, 1);
  assert_true (tl_log_has ("copy 2 of 2"));

  /* Copy 0 repaired: read without a word (copy 1 is never looked at). */
  zio_damage (&ts, &bp, 0, 100);
  tl_log_reset (true);
  memset (buf, 0xa5, size);
  assert_int_equal (zv_zio_read (spa, &bp, buf, "copy 1 bad"), 0);
  assert_memory_equal (buf, data, size);
  assert_int_equal (tl_log_errors (), 0);
  zio_damage (&ts, &bp, 1, size - 1);

  /* Copy 0 unreadable: the ditto copy serves. */
  zv_dev_set_fault (spa->spa_devs[ZV_DVA_VDEV (bp.bp_dva[0])],
                    zio_fail_reads, NULL);
  tl_log_reset (true);
  memset (buf, 0xa5, size);
  assert_int_equal (zv_zio_read (spa, &bp, buf, "unreadable"), 0);
  assert_memory_equal (buf, data, size);
  assert_true (tl_log_has ("unreadable: read error"));
  zv_dev_get_stats (spa->spa_devs[dev0], &st0);
  assert_int_equal (st0.ds_read_errors, 1);
  assert_int_equal (st0.ds_cksum_errors, 2);   /* unchanged */
  assert_int_equal (st0.ds_write_errors, 0);
  zv_dev_set_fault (spa->spa_devs[ZV_DVA_VDEV (bp.bp_dva[0])], NULL, NULL);

  /* The checksum is seeded with the pool guid: another pool's reader
   * finds nothing good. */
  spa->spa_guid ^= 1;
  tl_log_reset (true);
  assert_int_equal (zv_zio_read (spa, &bp, buf, "other pool"), -EIO);
  spa->spa_guid ^= 1;
  /* A pointer whose checksum is off by one bit. */
  bad = bp;
  bad.bp_cksum.zc_word[1] ^= 1ull << 63;
  assert_int_equal (zv_zio_read (spa, &bad, buf, "bad checksum"), -EIO);
  assert_true (tl_log_has ("bad checksum: checksum error"));

  /* A single copy has nothing to fall back to. */
  data1 = zio_put (spa, &one, size, 1, 8, TXG);
  assert_int_equal (one.bp_ncopies, 1);
  assert_int_equal (one.bp_dva[1], 0);
  zio_damage (&ts, &one, 0, 5000);
  tl_log_reset (true);
  assert_int_equal (zv_zio_read (spa, &one, buf, "single"), -EIO);
  assert_true (tl_log_has ("(copy 1 of 1"));
  tl_log_reset (false);

  zv_buf_free (data);
  zv_buf_free (data1);
  zv_buf_free (buf);
  tl_spa_destroy (&ts);
}

/* ---- writes ---- */

/* Blocks adjacent on a device go out as one write gathered from their
 * own buffers, in offset order whatever the order given; a gap, another
 * device or the 1 MiB limit starts a new write.  Every pointer is sealed
 * (its block reads back verified). */
static void
test_write_many_gathers (void **state)
{
  enum { N = 24 };
  tl_spa_t ts;
  zv_spa_t *spa;
  zv_blkptr_t bps[N];
  void *bufs[N];
  zv_zio_write_t w[N], t;
  const uint64_t base = zv_data_start () + 1 * MiB;
  zrec_t z;

  tl_spa_create (&ts, "gather", 2, DEV_SIZE);
  spa = &ts.ts_spa;
  atomic_store (&spa->spa_write_cap, 0);

  /* Nothing to write. */
  zrec_attach (&z, spa);
  assert_int_equal (zv_zio_write_many (spa, w, 0), 0);
  assert_int_equal (z.zr_nw, 0);

  /* Eight adjacent 4 KiB blocks, given in reverse order: one write. */
  zio_run (spa, bps, bufs, w, 8, base, ZV_SECTOR, 0);
  for (size_t i = 0; i < 4; i++) {
    t = w[i];
    w[i] = w[7 - i];
    w[7 - i] = t;
  }
  zrec_attach (&z, spa);
  assert_int_equal (zv_zio_write_many (spa, w, 8), 0);
  zrec_detach (spa);
  assert_int_equal (z.zr_nw, 1);
  assert_int_equal (z.zr_off[0], base);
  assert_int_equal (z.zr_len[0], 8 * ZV_SECTOR);
  zio_check_all (spa, bps, bufs, 8);
  for (size_t i = 0; i < 8; i++) {
    uint8_t got[ZV_SECTOR];
    assert_int_equal (tl_file_pread (ts.ts_path[0], got, sizeof got,
                                     base + i * ZV_SECTOR), 0);
    assert_memory_equal (got, bufs[i], sizeof got);
  }
  zio_free_bufs (bufs, 8);

  /* Mixed sizes back to back, a gap, then two more: two writes. */
  zio_run (spa, bps, bufs, w, 6, base, 16384, 0);
  bps[1].bp_psize = bps[1].bp_lsize = ZV_SECTOR;      /* 16K 4K ... */
  for (size_t i = 2; i < 6; i++)
    bps[i].bp_dva[0] = ZV_DVA_MAKE (0, base + 16384 + ZV_SECTOR
                                    + (i - 2) * 16384
                                    + (i >= 4 ? 3 * ZV_SECTOR : 0));
  zrec_attach (&z, spa);
  assert_int_equal (zv_zio_write_many (spa, w, 6), 0);
  zrec_detach (spa);
  assert_int_equal (z.zr_nw, 2);
  assert_int_equal (z.zr_off[0], base);
  assert_int_equal (z.zr_len[0], 16384 + ZV_SECTOR + 2 * 16384);
  assert_int_equal (z.zr_off[1], base + 3 * 16384 + 4 * ZV_SECTOR);
  assert_int_equal (z.zr_len[1], 2 * 16384);
  zio_check_all (spa, bps, bufs, 6);
  zio_free_bufs (bufs, 6);

  /* 24 adjacent 128 KiB blocks (3 MiB): three 1 MiB writes. */
  zio_run (spa, bps, bufs, w, N, base, ZV_MAX_BLKSZ, 0);
  zrec_attach (&z, spa);
  assert_int_equal (zv_zio_write_many (spa, w, N), 0);
  zrec_detach (spa);
  assert_int_equal (z.zr_nw, 3);
  for (unsigned i = 0; i < 3; i++) {
    assert_int_equal (z.zr_off[i], base + i * MiB);
    assert_int_equal (z.zr_len[i], MiB);
  }
  zio_check_all (spa, bps, bufs, N);
  zio_free_bufs (bufs, N);

  /* Two copies, one on each device: one write per device. */
  zio_run (spa, bps, bufs, w, 4, base, 16384, 0);
  for (size_t i = 0; i < 4; i++) {
    bps[i].bp_ncopies = 2;
    bps[i].bp_dva[1] = ZV_DVA_MAKE (1, base + 2 * MiB + i * 16384);
  }
  zrec_attach (&z, spa);
  assert_int_equal (zv_zio_write_many (spa, w, 4), 0);
  zrec_detach (spa);
  assert_int_equal (z.zr_nw, 2);
  assert_true (z.zr_dev[0] != z.zr_dev[1]);
  assert_int_equal (z.zr_len[0], 4 * 16384);
  assert_int_equal (z.zr_len[1], 4 * 16384);
  zio_check_all (spa, bps, bufs, 4);
  /* ... and copy 1 alone serves every block. */
  for (size_t i = 0; i < 4; i++)
    zio_damage (&ts, &bps[i], 0, 1);
  tl_log_reset (true);
  zio_check_all (spa, bps, bufs, 4);
  assert_int_equal (tl_log_errors (), 4);
  tl_log_reset (false);
  zio_free_bufs (bufs, 4);
  tl_spa_destroy (&ts);
}

/* zv_zio_read_many joins the blocks that touch on a device into one
 * request whatever order they come in, verifies each block on its own
 * (one bad block in a joined read fails alone), and keeps two pointers
 * at one place (hostile) and blocks with a gap between them apart. */
static void
test_read_many_joins (void **state)
{
  enum { N = 8 };
  tl_spa_t ts;
  zv_spa_t *spa;
  zv_blkptr_t bps[N + 1];
  void *bufs[N + 1], *got[N + 1];
  const zv_blkptr_t *rb[N + 1];
  const char *what[N + 1];
  int res[N + 1];
  zv_zio_write_t w[N + 1];
  const uint64_t base = zv_data_start () + 1 * MiB;
  zrec_t z;

  (void) state;
  tl_spa_create (&ts, "rjoin", 1, DEV_SIZE);
  spa = &ts.ts_spa;
  zio_run (spa, bps, bufs, w, N, base, 16384, 0);
  assert_int_equal (zv_zio_write_many (spa, w, N), 0);
  for (size_t i = 0; i < N; i++) {
    rb[i] = &bps[(i * 5) % N];            /* shuffled */
    got[i] = zv_buf_alloc (16384);
    what[i] = "joined";
  }
  got[N] = zv_buf_alloc (16384);

  zrec_attach_op (&z, spa, ZV_DEV_READ);
  assert_int_equal (zv_zio_read_many (spa, rb, got, what, res, N), 0);
  assert_int_equal (z.zr_nw, 1);
  assert_int_equal (z.zr_len[0], N * 16384);
  for (size_t i = 0; i < N; i++) {
    assert_int_equal (res[i], 0);
    assert_memory_equal (got[i], bufs[(i * 5) % N], 16384);
  }

  /* One bad block inside the joined read: it alone fails (and is read
   * again, alone, to say so). */
  zio_damage (&ts, &bps[3], 0, 100);
  zrec_attach_op (&z, spa, ZV_DEV_READ);
  tl_log_reset (true);
  assert_int_equal (zv_zio_read_many (spa, rb, got, what, res, N), -EIO);
  assert_int_equal (z.zr_nw, 2);
  for (size_t i = 0; i < N; i++) {
    assert_int_equal (res[i], (i * 5) % N == 3 ? -EIO : 0);
    if (res[i] == 0)
      assert_memory_equal (got[i], bufs[(i * 5) % N], 16384);
  }
  assert_true (tl_log_has ("checksum error"));
  tl_log_reset (false);
  zio_damage (&ts, &bps[3], 0, 100);

  /* Two pointers at one block, and a block past a gap: three reads. */
  bps[N] = bps[0];
  bufs[N] = bufs[0];
  const zv_blkptr_t *dup[3] = { &bps[0], &bps[N], &bps[2] };
  zrec_attach_op (&z, spa, ZV_DEV_READ);
  assert_int_equal (zv_zio_read_many (spa, dup, got, what, res, 3), 0);
  assert_int_equal (z.zr_nw, 3);
  assert_memory_equal (got[0], bufs[0], 16384);
  assert_memory_equal (got[1], bufs[0], 16384);
  assert_memory_equal (got[2], bufs[2], 16384);
  zrec_detach (spa);
  zio_free_bufs (got, N + 1);
  zio_free_bufs (bufs, N);
  tl_spa_destroy (&ts);
}

/* Fail writes that cover byte 'arg' (a uint64_t offset). */
static int
zio_fail_write_at (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
                   uint32_t len)
{
  uint64_t at = *(const uint64_t *) arg;

  (void) dev;
  return op == ZV_DEV_WRITE && off <= at && at < off + len ? -EIO : 0;
}

/* A failed write is the batch's error and names the device; the other
 * writes of the batch still happen. */
static void
test_write_error (void **state)
{
  enum { N = 4 };
  tl_spa_t ts;
  zv_spa_t *spa;
  zv_blkptr_t bps[N];
  void *bufs[N];
  zv_zio_write_t w[N];
  const uint64_t base = zv_data_start ();
  uint64_t at;
  char want[600];

  tl_spa_create (&ts, "werr", 1, DEV_SIZE);
  spa = &ts.ts_spa;
  zio_run (spa, bps, bufs, w, N, base, ZV_SECTOR, ZV_SECTOR);
  at = ZV_DVA_OFFSET (bps[2].bp_dva[0]);
  zv_dev_set_fault (spa->spa_devs[0], zio_fail_write_at, &at);
  tl_log_reset (true);
  assert_int_equal (zv_zio_write_many (spa, w, N), -EIO);
  zv_dev_set_fault (spa->spa_devs[0], NULL, NULL);
  {
    zv_dev_stats_t st;
    zv_dev_get_stats (spa->spa_devs[0], &st);
    assert_int_equal (st.ds_write_errors, 1);
    assert_int_equal (st.ds_read_errors, 0);
  }
  snprintf (want, sizeof want, "write error on %s at offset %" PRIu64,
            ts.ts_path[0], at);
  assert_true (tl_log_has (want));
  zio_check_all (spa, bps, bufs, 2);
  zio_check_all (spa, bps + 3, bufs + 3, 1);
  assert_int_equal (zv_zio_read (spa, &bps[2], bufs[2], "unwritten"), -EIO);
  tl_log_reset (false);
  zio_free_bufs (bufs, N);
  tl_spa_destroy (&ts);
}

/* Every device's cache is flushed; a failed flush is the error. */
static int
zio_fail_flush (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
                uint32_t len)
{
  (void) arg;
  (void) dev;
  (void) off;
  (void) len;
  return op == ZV_DEV_FLUSH ? -ENOSPC : 0;
}

static void
test_flush_all (void **state)
{
  tl_spa_t ts;
  zv_spa_t *spa;
  zv_dev_stats_t st;

  tl_spa_create (&ts, "flush", 3, DEV_SIZE);
  spa = &ts.ts_spa;
  assert_int_equal (zv_zio_flush_all (spa), 0);
  for (unsigned d = 0; d < 3; d++) {
    zv_dev_get_stats (spa->spa_devs[d], &st);
    assert_int_equal (st.ds_flushes, 1);
  }
  zv_dev_set_fault (spa->spa_devs[1], zio_fail_flush, NULL);
  tl_log_reset (true);
  assert_int_equal (zv_zio_flush_all (spa), -ENOSPC);
  assert_true (tl_log_has ("device cache flush failed"));
  tl_log_reset (false);
  zv_dev_set_fault (spa->spa_devs[1], NULL, NULL);
  tl_spa_destroy (&ts);
}

/* ---- allocation and placement ---- */

/* alloc_bp: copies apart (on another device when there is one); when the
 * second copy does not fit, the first is given back. */
static void
test_alloc_bp (void **state)
{
  tl_spa_t ts;
  zv_spa_t *spa;
  zv_alloc_t *a;
  zv_blkptr_t bp;
  uint64_t dva, last = 0, used;

  tl_spa_create (&ts, "allocbp", 2, DEV_SIZE);
  spa = &ts.ts_spa;
  memset (&bp, 0xee, sizeof bp);
  assert_int_equal (zv_zio_alloc_bp (spa, &bp, 16384, 2), 0);
  assert_int_equal (bp.bp_psize, 16384);
  assert_int_equal (bp.bp_ncopies, 2);
  assert_int_not_equal (ZV_DVA_VDEV (bp.bp_dva[0]),
                        ZV_DVA_VDEV (bp.bp_dva[1]));
  assert_true (zv_alloc_is_allocated (spa->spa_alloc, bp.bp_dva[0], 16384));
  assert_true (zv_alloc_is_allocated (spa->spa_alloc, bp.bp_dva[1], 16384));
  memset (&bp, 0xee, sizeof bp);
  assert_int_equal (zv_zio_alloc_bp (spa, &bp, ZV_SECTOR, 1), 0);
  assert_int_equal (bp.bp_ncopies, 1);
  assert_int_equal (bp.bp_dva[1], 0);
  tl_spa_destroy (&ts);

  /* One device with room for one sector only. */
  tl_spa_create (&ts, "allocbp1", 1, DEV_SIZE);
  spa = &ts.ts_spa;
  a = spa->spa_alloc;
  while (zv_alloc_block (a, ZV_SECTOR, 0, &dva) == 0)
    last = dva;
  zv_alloc_free_now (a, last, ZV_SECTOR);
  used = tl_alloc_space (a).as_allocated;
  assert_int_equal (zv_zio_alloc_bp (spa, &bp, ZV_SECTOR, 2), -ENOSPC);
  assert_int_equal (bp.bp_dva[0], 0);
  assert_int_equal (tl_alloc_space (a).as_allocated, used);
  assert_int_equal (zv_zio_alloc_bp (spa, &bp, ZV_SECTOR, 1), 0);
  assert_int_equal (bp.bp_dva[0], last);
  tl_spa_destroy (&ts);
}

/* free_bp frees at once what was born in the txg (no committed txg can
 * point at it) and defers the rest to txg + 2; free_bp_deferred always
 * defers; a hole frees nothing. */
static void
test_free_bp (void **state)
{
  tl_spa_t ts;
  zv_spa_t *spa;
  zv_alloc_t *a;
  zv_blkptr_t now, old, log, hole;
  void *b1, *b2, *b3;
  uint64_t used;

  tl_spa_create (&ts, "free", 2, DEV_SIZE);
  spa = &ts.ts_spa;
  a = spa->spa_alloc;
  b1 = zio_put (spa, &now, 16384, 2, 1, 6);
  b2 = zio_put (spa, &old, 16384, 2, 2, 5);
  b3 = zio_put (spa, &log, 16384, 2, 3, 6);
  memset (&hole, 0, sizeof hole);

  used = tl_alloc_space (a).as_allocated;
  zv_zio_free_bp (spa, &hole, 6);
  zv_zio_free_bp_deferred (spa, &hole, 6);
  assert_int_equal (tl_alloc_space (a).as_allocated, used);
  assert_int_equal (tl_alloc_defer_count (a, 6), 0);

  zv_zio_free_bp (spa, &now, 6);                 /* born in 6: at once */
  for (unsigned c = 0; c < 2; c++) {
    assert_false (zv_alloc_is_allocated (a, now.bp_dva[c], 16384));
    assert_false (tl_alloc_deferred (a, 6, now.bp_dva[c]));
  }
  assert_int_equal (tl_alloc_space (a).as_allocated, used - 2 * 16384);

  zv_zio_free_bp (spa, &old, 6);                 /* born in 5: deferred */
  zv_zio_free_bp_deferred (spa, &log, 6);        /* born in 6, deferred */
  assert_int_equal (tl_alloc_defer_count (a, 6), 4);
  for (unsigned c = 0; c < 2; c++) {
    assert_true (zv_alloc_is_allocated (a, old.bp_dva[c], 16384));
    assert_true (tl_alloc_deferred (a, 6, old.bp_dva[c]));
    assert_true (zv_alloc_is_allocated (a, log.bp_dva[c], 16384));
    assert_true (tl_alloc_deferred (a, 6, log.bp_dva[c]));
  }
  zv_alloc_sync_begin (a, 7);
  assert_true (zv_alloc_is_allocated (a, old.bp_dva[0], 16384));
  zv_alloc_sync_begin (a, 8);
  for (unsigned c = 0; c < 2; c++) {
    assert_false (zv_alloc_is_allocated (a, old.bp_dva[c], 16384));
    assert_false (zv_alloc_is_allocated (a, log.bp_dva[c], 16384));
  }
  assert_int_equal (tl_alloc_space (a).as_allocated, 0);
  zv_buf_free (b1);
  zv_buf_free (b2);
  zv_buf_free (b3);
  tl_spa_destroy (&ts);
}

/* place_bp, the copy on write of one block: new space for a block born
 * in an earlier txg (the old copies deferred), in place for one born in
 * this txg with the same shape, a hole frees; out of space is an error
 * that frees nothing. */
static void
test_place_bp (void **state)
{
  tl_spa_t ts;
  zv_spa_t *spa;
  zv_alloc_t *a;
  zv_blkptr_t old, bp, hole, prev;
  void *b;
  uint64_t used, dva;

  tl_spa_create (&ts, "place", 2, DEV_SIZE);
  spa = &ts.ts_spa;
  a = spa->spa_alloc;
  memset (&hole, 0, sizeof hole);

  /* A new block where there was a hole. */
  memset (&bp, 0xee, sizeof bp);
  assert_int_equal (zv_zio_place_bp (spa, &hole, &bp, false, 16384, 1,
                                     ZV_BT_INDIRECT, 7, 2, 6), 0);
  assert_false (zv_bp_is_hole (&bp));
  assert_int_equal (bp.bp_psize, 16384);
  assert_int_equal (bp.bp_lsize, 16384);
  assert_int_equal (bp.bp_ncopies, 2);
  assert_int_equal (bp.bp_birth, 6);
  assert_int_equal (bp.bp_level, 1);
  assert_int_equal (bp.bp_type, ZV_BT_INDIRECT);
  assert_int_equal (bp.bp_fill, 7);
  assert_int_equal (bp.bp_comp, 0);
  assert_true (zv_alloc_is_allocated (a, bp.bp_dva[0], 16384));
  assert_true (zv_alloc_is_allocated (a, bp.bp_dva[1], 16384));
  assert_int_equal (tl_alloc_defer_count (a, 6), 0);

  /* Born in 6, rewritten in 6 with the same shape: in place. */
  prev = bp;
  used = tl_alloc_space (a).as_allocated;
  assert_int_equal (zv_zio_place_bp (spa, &prev, &bp, false, 16384, 1,
                                     ZV_BT_INDIRECT, 9, 2, 6), 0);
  assert_int_equal (bp.bp_dva[0], prev.bp_dva[0]);
  assert_int_equal (bp.bp_dva[1], prev.bp_dva[1]);
  assert_int_equal (bp.bp_fill, 9);
  assert_int_equal (tl_alloc_space (a).as_allocated, used);
  assert_int_equal (tl_alloc_defer_count (a, 6), 0);

  /* Born in 6, rewritten in 6 with one copy: new space, the old block
   * freed at once. */
  prev = bp;
  assert_int_equal (zv_zio_place_bp (spa, &prev, &bp, false, 16384, 1,
                                     ZV_BT_INDIRECT, 9, 1, 6), 0);
  assert_int_equal (bp.bp_ncopies, 1);
  assert_int_equal (bp.bp_dva[1], 0);
  assert_false (zv_alloc_is_allocated (a, prev.bp_dva[0], 16384));
  assert_false (zv_alloc_is_allocated (a, prev.bp_dva[1], 16384));
  assert_int_equal (tl_alloc_space (a).as_allocated, used - 16384);
  /* ... and with another size, the same. */
  prev = bp;
  assert_int_equal (zv_zio_place_bp (spa, &prev, &bp, false, 8192, 0,
                                     ZV_BT_VOLDATA, 1, 1, 6), 0);
  assert_int_equal (bp.bp_psize, 8192);
  assert_false (zv_alloc_is_allocated (a, prev.bp_dva[0], 16384));
  assert_int_equal (tl_alloc_defer_count (a, 6), 0);

  /* Born in 5, rewritten in 6: new space, the old copies deferred. */
  b = zio_put (spa, &old, 16384, 2, 4, 5);
  assert_int_equal (zv_zio_place_bp (spa, &old, &bp, false, 16384, 0,
                                     ZV_BT_VOLDATA, 1, 2, 6), 0);
  for (unsigned c = 0; c < 2; c++) {
    assert_true (bp.bp_dva[c] != old.bp_dva[0]
                 && bp.bp_dva[c] != old.bp_dva[1]);
    assert_true (zv_alloc_is_allocated (a, old.bp_dva[c], 16384));
    assert_true (tl_alloc_deferred (a, 6, old.bp_dva[c]));
  }
  assert_int_equal (bp.bp_birth, 6);
  /* A block becoming a hole: its old copies go, and the pointer is all
   * zeros (born in 6: at once). */
  prev = bp;
  memset (&bp, 0xee, sizeof bp);
  assert_int_equal (zv_zio_place_bp (spa, &prev, &bp, true, 16384, 0,
                                     ZV_BT_VOLDATA, 1, 2, 6), 0);
  assert_true (zv_bp_is_hole (&bp));
  assert_true (zv_is_zero (&bp, sizeof bp));
  assert_false (zv_alloc_is_allocated (a, prev.bp_dva[0], 16384));
  assert_false (zv_alloc_is_allocated (a, prev.bp_dva[1], 16384));
  /* (born in 5: deferred) */
  zv_buf_free (b);
  b = zio_put (spa, &old, 16384, 1, 5, 5);
  assert_int_equal (zv_zio_place_bp (spa, &old, &bp, true, 16384, 0,
                                     ZV_BT_VOLDATA, 1, 1, 6), 0);
  assert_true (zv_bp_is_hole (&bp));
  assert_true (tl_alloc_deferred (a, 6, old.bp_dva[0]));
  assert_true (zv_alloc_is_allocated (a, old.bp_dva[0], 16384));
  zv_buf_free (b);
  tl_spa_destroy (&ts);

  /* A full device: -ENOSPC, and the old block is kept. */
  tl_spa_create (&ts, "place1", 1, DEV_SIZE);
  spa = &ts.ts_spa;
  a = spa->spa_alloc;
  b = zio_put (spa, &old, 16384, 1, 6, 5);
  while (zv_alloc_block (a, ZV_SECTOR, 0, &dva) == 0)
    ;
  used = tl_alloc_space (a).as_allocated;
  tl_log_reset (true);
  assert_int_equal (zv_zio_place_bp (spa, &old, &bp, false, 16384, 0,
                                     ZV_BT_VOLDATA, 1, 1, 6), -ENOSPC);
  assert_true (tl_log_has ("out of space while syncing txg 6"));
  tl_log_reset (false);
  assert_true (zv_alloc_is_allocated (a, old.bp_dva[0], 16384));
  assert_false (tl_alloc_deferred (a, 6, old.bp_dva[0]));
  assert_int_equal (tl_alloc_space (a).as_allocated, used);
  zv_buf_free (b);
  tl_spa_destroy (&ts);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_write_cap_curve),
    tl_test (test_write_cap_set_raise),
    tl_test (test_write_cap_in_flight),
    tl_test (test_write_cap_small_writes),
    tl_test (test_write_yields_to_log),
    tl_test (test_bp_check_hostile),
    tl_test (test_read_ditto),
    tl_test (test_write_many_gathers),
    tl_test (test_read_many_joins),
    tl_test (test_write_error),
    tl_test (test_flush_all),
    tl_test (test_alloc_bp),
    tl_test (test_free_bp),
    tl_test (test_place_bp),
  };

  return tl_main (tests, "zio", NULL);
}
