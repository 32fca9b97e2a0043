/*
 * test_dmu.c: unit tests for objects as trees of block pointers
 * (core/dmu.c), below the pool: each test builds a one-device zv_spa_t
 * on a sparse file with its allocator (testlib.h's tl_spa_create) and a
 * buffer cache, opens an object on it with zv_dmu_object_open, and drives
 * the by-dnode calls and zv_dmu_sync directly with txg numbers of its
 * choosing.  Block I/O itself (checksums, ditto copies, placement) is
 * tested in test_zio.c.
 *
 * "Reopen" means: take the descriptor (zv_dmu_object_phys), close the handle,
 * destroy the cache and open a new handle on a new cache, so every later
 * read goes through the on-disk tree.  A cache limit of 0 evicts every
 * clean block as soon as its last hold goes.
 *
 * Note on levels: with 255 pointers per indirect block, 200 blocks need 2
 * levels, up to 65025 need 3, and 70000 need 4.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "dbuf.h"
#include "dmu.h"
#include "tunable.h"
#include "compress.h"

#define DEV_SIZE (64 * MiB)
#define BIG_CACHE (64 * MiB)
#define F ((uint64_t) ZV_INDIRECT_FANOUT)

/* A pool-like setup around one object. */
typedef struct denv {
  tl_spa_t ts;
  zv_spa_t *spa;                /* &ts.ts_spa */
  const char *path;             /* its device file */
  zv_dbuf_cache_t *cache;
  zv_object_t ob;
  uint32_t blksz;
  uint64_t nblocks;
} denv_t;

/* Device, allocator, cache and an empty object of nblocks x blksz. */
static void
denv_setup (denv_t *e, const char *name, uint64_t nblocks, uint32_t blksz,
            uint64_t cache_limit)
{
  zv_dnode_phys_t dn;

  memset (e, 0, sizeof *e);
  tl_spa_create (&e->ts, name, 1, DEV_SIZE);
  e->spa = &e->ts.ts_spa;
  e->path = e->ts.ts_path[0];
  e->cache = zv_dbuf_cache_create (cache_limit);
  assert_non_null (e->cache);
  e->blksz = blksz;
  e->nblocks = nblocks;

  memset (&dn, 0, sizeof dn);
  dn.dn_type = ZV_BT_VOLDATA;
  dn.dn_datablksz = blksz;
  dn.dn_nblocks = nblocks;
  dn.dn_nlevels = zv_dmu_nlevels (nblocks);
  dn.dn_size = nblocks * blksz;
  assert_int_equal (zv_dmu_object_open (&e->ob, e->spa, e->cache, 1, &dn), 0);
}

/* A new handle on a new cache, from the descriptor of the last sync. */
static void
denv_reopen (denv_t *e, uint64_t cache_limit)
{
  zv_dnode_phys_t dn;

  zv_dmu_object_phys (&e->ob, &dn);
  zv_dmu_object_close (&e->ob);
  zv_dbuf_cache_destroy (e->cache);
  e->cache = zv_dbuf_cache_create (cache_limit);
  assert_int_equal (zv_dmu_object_open (&e->ob, e->spa, e->cache, 1, &dn), 0);
}

static void
denv_teardown (denv_t *e)
{
  zv_dmu_object_close (&e->ob);
  zv_dbuf_cache_destroy (e->cache);
  tl_spa_destroy (&e->ts);
}

static zv_blkptr_t
denv_root (denv_t *e)
{
  zv_dnode_phys_t dn;

  zv_dmu_object_phys (&e->ob, &dn);
  return dn.dn_root;
}

/* Write pattern 'seed' over [off, off+len) in txg and into the shadow. */
static void
denv_write (denv_t *e, uint8_t *shadow, uint64_t off, size_t len,
            uint64_t seed, uint64_t txg)
{
  uint8_t *buf = malloc (len);

  assert_non_null (buf);
  tl_pat_fill (buf, off, len, seed);
  assert_int_equal (zv_dmu_write_by_dnode (&e->ob, off, len, buf, txg, NULL), 0);
  if (shadow)
    memcpy (shadow + off, buf, len);
  free (buf);
}

/* Read [off, off+len) and compare it with the shadow. */
static void
denv_check (denv_t *e, const uint8_t *shadow, uint64_t off, size_t len)
{
  uint8_t *buf = malloc (len);

  assert_non_null (buf);
  memset (buf, 0xa5, len);
  assert_int_equal (zv_dmu_read_by_dnode (&e->ob, off, len, buf), 0);
  tl_assert_same (buf, shadow + off, len, off, "object");
  free (buf);
}

/* Is the block all zeros when read? */
static void
denv_check_zero (denv_t *e, uint64_t blkid)
{
  uint8_t *buf = malloc (e->blksz);

  assert_non_null (buf);
  memset (buf, 0xa5, e->blksz);
  assert_int_equal (zv_dmu_read_by_dnode (&e->ob, blkid * e->blksz,
                                          e->blksz, buf), 0);
  assert_true (zv_is_zero (buf, e->blksz));
  free (buf);
}

static bool
denv_is_hole (denv_t *e, uint64_t blkid)
{
  bool hole = false;

  assert_int_equal (zv_dmu_block_is_hole (&e->ob, blkid, &hole), 0);
  return hole;
}

/* ---- walking the on-disk tree ---- */

typedef struct wrec {
  unsigned level;
  uint64_t blkid;
  zv_blkptr_t bp;
  uint8_t *data;            /* L0 content when walked with data */
} wrec_t;

typedef struct wlist {
  wrec_t *v;
  size_t n, cap;
  uint32_t blksz;
  size_t stop_at;           /* return 7 from this visit (0: never) */
} wlist_t;

static int
walk_cb (void *arg, const zv_blkptr_t *bp, unsigned level, uint64_t blkid,
         const void *data)
{
  wlist_t *w = arg;

  if (w->n == w->cap) {
    w->cap = w->cap ? w->cap * 2 : 64;
    w->v = realloc (w->v, w->cap * sizeof *w->v);
    if (w->v == NULL)
      abort ();
  }
  wrec_t *r = &w->v[w->n++];
  r->level = level;
  r->blkid = blkid;
  r->bp = *bp;
  r->data = NULL;
  if (data) {
    r->data = malloc (w->blksz);
    if (r->data == NULL)
      abort ();
    memcpy (r->data, data, w->blksz);
  }
  if (w->stop_at && w->n == w->stop_at)
    return 7;
  return 0;
}

static void
wlist_free (wlist_t *w)
{
  for (size_t i = 0; i < w->n; i++)
    free (w->v[i].data);
  free (w->v);
  memset (w, 0, sizeof *w);
}

/* Walk the object's tree as of its last sync. */
static int
denv_walk (denv_t *e, bool data, wlist_t *w)
{
  zv_dnode_phys_t dn;

  memset (w, 0, sizeof *w);
  w->blksz = e->blksz;
  zv_dmu_object_phys (&e->ob, &dn);
  return zv_dmu_walk (e->spa, 1, &dn, data, walk_cb, w);
}

static const wrec_t *
wlist_find (const wlist_t *w, unsigned level, uint64_t blkid)
{
  for (size_t i = 0; i < w->n; i++)
    if (w->v[i].level == level && w->v[i].blkid == blkid)
      return &w->v[i];
  return NULL;
}

static size_t
wlist_count (const wlist_t *w, unsigned level)
{
  size_t n = 0;

  for (size_t i = 0; i < w->n; i++)
    n += w->v[i].level == level;
  return n;
}

/* The synced pointer of (level, blkid), which must exist. */
static zv_blkptr_t
denv_bp (denv_t *e, unsigned level, uint64_t blkid)
{
  wlist_t w;
  const wrec_t *r;
  zv_blkptr_t bp;

  assert_int_equal (denv_walk (e, false, &w), 0);
  r = wlist_find (&w, level, blkid);
  assert_non_null (r);
  bp = r->bp;
  wlist_free (&w);
  return bp;
}

static bool
denv_deferred (denv_t *e, uint64_t txg, uint64_t dva)
{
  return tl_alloc_deferred (e->spa->spa_alloc, txg, dva);
}

static uint64_t
denv_allocated (denv_t *e)
{
  return tl_alloc_space (e->spa->spa_alloc).as_allocated;
}

/* ---- tests ---- */

/* Writes read back before and after the sync; the sync sets the root
 * pointer with the right level and fill counts. */
static void
test_write_read_sync (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  uint8_t *shadow = calloc (200, bs);
  zv_blkptr_t root;
  wlist_t w;

  assert_non_null (shadow);
  denv_setup (&e, "wrs", 200, bs, BIG_CACHE);
  assert_int_equal (e.ob.ob_nlevels, 2);

  denv_write (&e, shadow, 0, bs, 1, 5);                  /* block 0 whole */
  denv_write (&e, shadow, 3 * bs + 100, 5000, 2, 5);     /* block 3 part */
  denv_write (&e, shadow, 10 * bs + 8000, bs, 3, 5);     /* blocks 10, 11 */
  denv_write (&e, shadow, 199 * bs, bs, 4, 5);           /* last block */

  denv_check (&e, shadow, 0, 200 * bs);
  root = denv_root (&e);
  assert_true (zv_bp_is_hole (&root));    /* nothing synced yet */
  assert_false (denv_is_hole (&e, 3));
  assert_true (denv_is_hole (&e, 4));

  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  root = denv_root (&e);
  assert_false (zv_bp_is_hole (&root));
  assert_int_equal (root.bp_level, e.ob.ob_nlevels - 1);
  assert_int_equal (root.bp_type, ZV_BT_INDIRECT);
  assert_int_equal (root.bp_fill, 5);
  assert_int_equal (root.bp_birth, 5);
  assert_int_equal (root.bp_ncopies, 2);
  assert_int_equal (root.bp_psize, ZV_INDIRECT_SIZE);
  denv_check (&e, shadow, 0, 200 * bs);

  /* The tree on disk says the same. */
  assert_int_equal (denv_walk (&e, true, &w), 0);
  assert_int_equal (wlist_count (&w, 1), 1);
  assert_int_equal (wlist_count (&w, 0), 5);
  for (size_t i = 0; i < w.n; i++) {
    const wrec_t *r = &w.v[i];
    assert_int_equal (r->bp.bp_birth, 5);
    if (r->level == 0) {
      assert_int_equal (r->bp.bp_fill, 1);
      assert_int_equal (r->bp.bp_type, ZV_BT_VOLDATA);
      assert_int_equal (r->bp.bp_psize, bs);
      assert_memory_equal (r->data, shadow + r->blkid * bs, bs);
    }
  }
  wlist_free (&w);

  /* And a cold cache reads it back from disk. */
  denv_reopen (&e, 0);
  denv_check (&e, shadow, 0, 200 * bs);
  assert_false (denv_is_hole (&e, 11));
  assert_true (denv_is_hole (&e, 12));

  denv_teardown (&e);
  free (shadow);
}

/* Is block blkid's record of txg sealed (dmu.c: written whole, its
 * checksum taken by the writer)? */
static bool
denv_sealed (denv_t *e, uint64_t blkid, uint64_t txg)
{
  zv_dbuf_t *db = zv_dbuf_find (e->cache, &e->ob, 0, blkid);
  zv_dirty_t *dr;
  bool sealed;

  assert_non_null (db);
  pthread_mutex_lock (&db->db_mtx);
  dr = db->db_dirty[txg & ZV_TXG_MASK];
  assert_non_null (dr);
  sealed = dr->dr_sealed;
  if (sealed) {
    zv_cksum_t c;
    zv_cksum_compute (dr->dr_data, e->blksz, e->spa->spa_guid, &c);
    assert_true (zv_cksum_equal (&c, &dr->dr_cksum));
  }
  pthread_mutex_unlock (&db->db_mtx);
  zv_dbuf_rele (e->cache, db);
  return sealed;
}

/* A write of a whole block seals its record (the sync writes it with the
 * writer's checksum); every other change of the record's data in the
 * same txg breaks the seal, so what the sync writes verifies when read
 * back cold.  Fails if a change keeps a stale seal: the block then reads
 * back as a checksum error. */
static void
test_seal (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  uint8_t *shadow = calloc (16, bs);

  (void) state;
  assert_non_null (shadow);
  denv_setup (&e, "seal", 16, bs, BIG_CACHE);
  for (uint64_t b = 0; b < 8; b++) {
    denv_write (&e, shadow, b * bs, bs, 10 + b, 5);
    assert_true (denv_sealed (&e, b, 5));
  }
  /* Two blocks in one write: both whole, both sealed. */
  denv_write (&e, shadow, 8 * bs, 2 * bs, 30, 5);
  assert_true (denv_sealed (&e, 8, 5) && denv_sealed (&e, 9, 5));
  /* Half a block on block 10, then its other half: never sealed. */
  denv_write (&e, shadow, 10 * bs, bs / 2, 31, 5);
  denv_write (&e, shadow, 10 * bs + bs / 2, bs / 2, 32, 5);
  assert_false (denv_sealed (&e, 10, 5));

  denv_write (&e, shadow, 0 * bs + 1024, 512, 20, 5);     /* aligned part */
  assert_false (denv_sealed (&e, 0, 5));
  denv_write (&e, shadow, 1 * bs + 7, 100, 21, 5);        /* unaligned */
  assert_false (denv_sealed (&e, 1, 5));
  denv_write (&e, shadow, 2 * bs, bs, 22, 5);             /* whole again */
  assert_true (denv_sealed (&e, 2, 5));
  assert_int_equal (zv_dmu_zero_by_dnode (&e.ob, 3 * bs + 4096, 4096, 5), 0);
  memset (shadow + 3 * bs + 4096, 0, 4096);
  assert_false (denv_sealed (&e, 3, 5));
  assert_int_equal (zv_dmu_free_by_dnode (&e.ob, 4, 1, 5), 0);
  memset (shadow + 4 * bs, 0, bs);
  denv_write (&e, shadow, 4 * bs + 512, 512, 23, 5);      /* over the free */
  assert_false (denv_sealed (&e, 4, 5));
  assert_int_equal (zv_dmu_zero_by_dnode (&e.ob, 5 * bs, bs, 5), 0);
  memset (shadow + 5 * bs, 0, bs);
  denv_write (&e, shadow, 5 * bs + 8192, 512, 24, 5);     /* over a zero */
  assert_false (denv_sealed (&e, 5, 5));

  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  denv_reopen (&e, 0);
  tl_log_reset (false);
  denv_check (&e, shadow, 0, 16 * bs);
  denv_teardown (&e);
  free (shadow);
}

/* Block blkid's record of txg: overridden (written already), and where. */
static bool
denv_overridden (denv_t *e, uint64_t blkid, uint64_t txg, zv_blkptr_t *bp)
{
  zv_dbuf_t *db = zv_dbuf_find (e->cache, &e->ob, 0, blkid);
  zv_dirty_t *dr;
  bool over;

  assert_non_null (db);
  pthread_mutex_lock (&db->db_mtx);
  dr = db->db_dirty[txg & ZV_TXG_MASK];
  assert_non_null (dr);
  over = dr->dr_overridden;
  if (over && bp)
    *bp = dr->dr_override;
  pthread_mutex_unlock (&db->db_mtx);
  zv_dbuf_rele (e->cache, db);
  return over;
}

/* A write of whole blocks from direct_write_min up goes to the device at
 * once (compressed by the writer when it shrinks): its blocks hold the
 * data before the sync, which adopts them (the tree points where the
 * writer wrote); not all zeros, nor below the minimum; a later change in
 * the txg gives the written block back, and so does the log's asking for
 * a compressed one in place.  Fails without direct writes (no
 * override, ob_direct 0) or if the sync rewrites an adopted block. */
static void
test_direct_write (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  uint8_t *shadow = calloc (64, bs), *buf = malloc (8 * bs);
  uint64_t rs = 5;
  zv_blkptr_t over[8];
  char err[256];

  (void) state;
  assert_non_null (shadow);
  assert_non_null (buf);
  denv_setup (&e, "direct", 64, bs, BIG_CACHE);
  assert_int_equal (zv_tunable_set ("direct_write_min", "64K", err,
                                    sizeof err), 0);
  /* 8 blocks: all written directly, and readable there already. */
  tl_fill_rand (buf, 8 * bs, &rs);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 0, 8 * bs, buf, 5, NULL), 0);
  memcpy (shadow, buf, 8 * bs);
  assert_int_equal (atomic_load (&e.ob.ob_direct), 8);
  /* (started, not waited for: test_direct_write_async) */
  zv_zio_pending_wait_txg (e.spa, 5);
  for (uint64_t b = 0; b < 8; b++) {
    uint8_t *got = zv_buf_alloc (bs);
    assert_true (denv_overridden (&e, b, 5, &over[b]));
    assert_int_equal (over[b].bp_birth, 5);
    assert_int_equal (zv_zio_read (e.spa, &over[b], got, "direct"), 0);
    assert_memory_equal (got, shadow + b * bs, bs);
    zv_buf_free (got);
  }
  /* Block 2 changes again: its written block goes back. */
  denv_write (&e, shadow, 2 * bs + 512, 512, 40, 5);
  assert_false (denv_overridden (&e, 2, 5, NULL));
  /* Below the minimum (3 blocks of 16 KiB are 48 KiB): left to the sync. */
  tl_fill_rand (buf, 3 * bs, &rs);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 10 * bs, 3 * bs, buf, 5, NULL),
                    0);
  memcpy (shadow + 10 * bs, buf, 3 * bs);
  assert_false (denv_overridden (&e, 10, 5, NULL));
  /* Zeros become holes: nothing written. */
  memset (buf, 0, 4 * bs);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 16 * bs, 4 * bs, buf, 5, NULL),
                    0);
  assert_false (denv_overridden (&e, 16, 5, NULL));
  /* Compressed volume: data the early abort refuses goes directly as it
   * is, data that shrinks goes directly compressed (by the writer). */
  e.spa->spa_features |= ZV_FEAT_COMPRESS;
  atomic_store (&e.ob.ob_compress, ZV_COMP_DEFAULT);
  tl_fill_rand (buf, 4 * bs, &rs);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 24 * bs, 4 * bs, buf, 5, NULL),
                    0);
  memcpy (shadow + 24 * bs, buf, 4 * bs);
  assert_true (denv_overridden (&e, 24, 5, NULL));
  for (size_t i = 0; i < 4 * bs; i++)
    buf[i] = (uint8_t) ("abcdefgh"[i % 8]);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 32 * bs, 4 * bs, buf, 5, NULL),
                    0);
  memcpy (shadow + 32 * bs, buf, 4 * bs);
  {
    zv_blkptr_t cbp, lbp;
    assert_true (denv_overridden (&e, 32, 5, &cbp));
    assert_int_equal (cbp.bp_comp, ZV_COMP_LZ4);
    assert_true (cbp.bp_psize < bs);
    assert_int_equal (cbp.bp_lsize, bs);
    /* The log names whole uncompressed blocks only: asked for block 33
     * in place, it gets one, and the compressed copy goes. */
    assert_true (denv_overridden (&e, 33, 5, NULL));
    assert_int_equal (zv_dmu_sync_block (&e.ob, 5, 33, &lbp), 0);
    assert_int_equal (lbp.bp_comp, 0);
    assert_int_equal (lbp.bp_psize, bs);
    assert_true (denv_overridden (&e, 33, 5, &cbp));
    assert_memory_equal (&cbp, &lbp, sizeof cbp);
  }
  assert_int_equal (atomic_load (&e.ob.ob_direct), 8 + 4 + 4);
  /* Off: nothing direct. */
  assert_int_equal (zv_tunable_set ("direct_write_min", "0", err,
                                    sizeof err), 0);
  tl_fill_rand (buf, 8 * bs, &rs);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 40 * bs, 8 * bs, buf, 5, NULL),
                    0);
  memcpy (shadow + 40 * bs, buf, 8 * bs);
  assert_false (denv_overridden (&e, 40, 5, NULL));
  assert_int_equal (zv_tunable_set ("direct_write_min", "64K", err,
                                    sizeof err), 0);

  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  /* The sync adopted the blocks written directly, as they were. */
  for (uint64_t b = 0; b < 8; b++) {
    zv_blkptr_t bp;
    assert_int_equal (zv_dmu_block_bp (&e.ob, b, &bp), 0);
    if (b == 2)
      assert_false (bp.bp_dva[0] == over[2].bp_dva[0]);
    else
      assert_memory_equal (&bp, &over[b], sizeof bp);
  }
  denv_reopen (&e, 0);
  denv_check (&e, shadow, 0, 64 * bs);
  assert_true (denv_is_hole (&e, 16));
  denv_teardown (&e);
  free (buf);
  free (shadow);
}

/* Counts of write submits and completions a device's observer saw. */
typedef struct dw_obs {
  _Atomic unsigned do_submits, do_done;
} dw_obs_t;

static void
dw_observe (void *arg, zv_dev_t *dev, enum zv_dev_op op, int done,
            uint64_t off, uint32_t len, const void *buf, int result)
{
  dw_obs_t *o = arg;

  (void) dev, (void) off, (void) len, (void) buf, (void) result;
  if (op == ZV_DEV_WRITE)
    atomic_fetch_add (done ? &o->do_done : &o->do_submits, 1);
}

static int
dw_fail_writes (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
                uint32_t len)
{
  (void) arg, (void) dev, (void) off, (void) len;
  return op == ZV_DEV_WRITE ? -EIO : 0;
}

/* A direct write is started and not waited for: right after the call
 * its device write was submitted and none has been reaped, yet reads
 * see the data; a fork waits for it (the child has no queue); a commit that names a block waits for it and gets a
 * pointer to what is on disk; the sync adopts what was written.  One
 * the device fails keeps its record's data, and the sync writes the
 * blocks elsewhere.  Fails if the writer waits for its writes (a
 * completion seen before the call returned), if a forked child is left
 * a write in flight, or if a failed direct write is adopted. */
static void
test_direct_write_async (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  uint8_t *shadow = calloc (64, bs), *buf = malloc (8 * bs);
  uint8_t *got = zv_buf_alloc (bs);
  uint64_t rs = 11;
  dw_obs_t o = { 0 };
  zv_blkptr_t lbp, failed, bp;
  zv_dev_t *dev;
  char err[256];

  (void) state;
  assert_non_null (shadow);
  assert_non_null (buf);
  denv_setup (&e, "dwasync", 64, bs, BIG_CACHE);
  dev = e.spa->spa_devs[0];
  if (!zv_dev_async_ok (dev)) {
    print_message ("skipped: the scratch directory takes no O_DIRECT, so "
                   "there are no asynchronous direct writes\n");
    denv_teardown (&e);
    free (buf);
    free (shadow);
    zv_buf_free (got);
    skip ();
  }
  assert_int_equal (zv_tunable_set ("direct_write_min", "64K", err,
                                    sizeof err), 0);
  zv_dev_set_observer (dev, dw_observe, &o);
  tl_fill_rand (buf, 8 * bs, &rs);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 0, 8 * bs, buf, 5, NULL), 0);
  memcpy (shadow, buf, 8 * bs);
  assert_int_equal (atomic_load (&e.ob.ob_direct), 8);
  assert_true (atomic_load (&o.do_submits) >= 1);
  assert_int_equal (atomic_load (&o.do_done), 0);
  /* A fork ends every started write first: the child, whose queue is
   * gone, has none left to wait for. */
  assert_true (atomic_load (&e.spa->spa_aio_pending[5 & ZV_TXG_MASK]) > 0);
  {
    int st;
    pid_t pid = fork ();

    if (pid == 0)
      _exit (atomic_load (&e.spa->spa_aio_pending[5 & ZV_TXG_MASK]) == 0
             ? 0 : 1);
    assert_true (pid > 0);
    assert_int_equal (waitpid (pid, &st, 0), pid);
    assert_true (WIFEXITED (st));
    assert_int_equal (WEXITSTATUS (st), 0);
  }
  denv_check (&e, shadow, 0, 8 * bs);
  /* The log's in-place block: the one already written, once written. */
  assert_int_equal (zv_dmu_sync_block (&e.ob, 5, 3, &lbp), 0);
  assert_int_equal (atomic_load (&o.do_done), atomic_load (&o.do_submits));
  assert_int_equal (zv_zio_read (e.spa, &lbp, got, "direct"), 0);
  assert_memory_equal (got, shadow + 3 * bs, bs);

  /* The device fails the next one. */
  zv_dev_set_fault (dev, dw_fail_writes, NULL);
  tl_fill_rand (buf, 8 * bs, &rs);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 16 * bs, 8 * bs, buf, 5, NULL),
                    0);
  zv_dev_set_fault (dev, NULL, NULL);
  memcpy (shadow + 16 * bs, buf, 8 * bs);
  assert_true (denv_overridden (&e, 20, 5, &failed));
  denv_check (&e, shadow, 0, 64 * bs);

  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  assert_int_equal (atomic_load (&o.do_done), atomic_load (&o.do_submits));
  assert_int_equal (zv_dmu_block_bp (&e.ob, 3, &bp), 0);
  assert_memory_equal (&bp, &lbp, sizeof bp);
  assert_int_equal (zv_dmu_block_bp (&e.ob, 20, &bp), 0);
  assert_false (bp.bp_dva[0] == failed.bp_dva[0]);
  zv_dev_set_observer (dev, NULL, NULL);
  denv_reopen (&e, 0);
  denv_check (&e, shadow, 0, 64 * bs);
  denv_teardown (&e);
  zv_buf_free (got);
  free (buf);
  free (shadow);
}

/* All-zero blocks become holes at sync; the fill counts follow, and an
 * object with nothing left has a hole for a root. */
static void
test_zero_blocks_become_holes (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  uint8_t *zeros = calloc (1, bs);
  uint8_t *shadow = calloc (200, bs);
  zv_blkptr_t root, old1;

  denv_setup (&e, "zero", 200, bs, BIG_CACHE);
  denv_write (&e, shadow, 1 * bs, bs, 1, 5);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 2 * bs, bs, zeros, 5, NULL), 0);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 3 * bs + 10, 99, zeros,
                                           5, NULL), 0);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  assert_false (denv_is_hole (&e, 1));
  assert_true (denv_is_hole (&e, 2));
  assert_true (denv_is_hole (&e, 3));
  root = denv_root (&e);
  assert_int_equal (root.bp_fill, 1);
  denv_check_zero (&e, 2);
  denv_check_zero (&e, 3);

  /* Zeroing the last data block: a hole, the old copy deferred, and the
   * whole tree collapses to a hole root. */
  old1 = denv_bp (&e, 0, 1);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 1 * bs, bs, zeros, 6, NULL), 0);
  assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
  assert_true (denv_is_hole (&e, 1));
  denv_check_zero (&e, 1);
  assert_true (denv_deferred (&e, 6, old1.bp_dva[0]));
  root = denv_root (&e);
  assert_true (zv_bp_is_hole (&root));

  denv_reopen (&e, 0);
  for (uint64_t b = 0; b < 5; b++) {
    assert_true (denv_is_hole (&e, b));
    denv_check_zero (&e, b);
  }
  denv_teardown (&e);
  free (zeros);
  free (shadow);
}

/* Freed blocks become holes; a write after a free in the same txg sees
 * zeros around it. */
static void
test_free_by_dnode (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  uint8_t *shadow = calloc (200, bs);

  denv_setup (&e, "free", 200, bs, BIG_CACHE);
  denv_write (&e, shadow, 0, 10 * bs, 1, 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  assert_int_equal (denv_root (&e).bp_fill, 10);

  assert_int_equal (zv_dmu_free_by_dnode (&e.ob, 2, 4, 6), 0);
  assert_int_equal (zv_dmu_free_by_dnode (&e.ob, 50, 3, 6), 0); /* holes */
  memset (shadow + 2 * bs, 0, 4 * bs);
  assert_true (denv_is_hole (&e, 3));
  denv_check (&e, shadow, 0, 12 * bs);
  /* Free, then a partial write, in one txg. */
  assert_int_equal (zv_dmu_free_by_dnode (&e.ob, 7, 1, 6), 0);
  memset (shadow + 7 * bs, 0, bs);
  denv_write (&e, shadow, 7 * bs + 300, 200, 2, 6);
  denv_check (&e, shadow, 0, 12 * bs);

  assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
  assert_int_equal (denv_root (&e).bp_fill, 6);
  denv_reopen (&e, 0);
  for (uint64_t b = 0; b < 12; b++)
    assert_int_equal (denv_is_hole (&e, b), b >= 2 && b <= 5 ? 1 : b >= 10);
  denv_check (&e, shadow, 0, 200 * bs);
  denv_teardown (&e);
  free (shadow);
}

/* A partial write of a block that is not cached reads the old block and
 * merges: with a fresh cache, and with a cache that keeps nothing. */
static void
test_partial_uncached (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  uint8_t *shadow = calloc (200, bs);
  zv_dbuf_stats_t cs;

  denv_setup (&e, "part", 200, bs, BIG_CACHE);
  denv_write (&e, shadow, 4 * bs, bs, 7, 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);

  denv_reopen (&e, BIG_CACHE);
  zv_dbuf_get_stats (e.cache, &cs);
  assert_int_equal (cs.cs_misses, 0);
  denv_write (&e, shadow, 4 * bs + 1000, 300, 8, 6);
  zv_dbuf_get_stats (e.cache, &cs);
  assert_true (cs.cs_misses >= 1);          /* it did read the old block */
  denv_check (&e, shadow, 4 * bs, bs);
  assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
  denv_reopen (&e, BIG_CACHE);
  denv_check (&e, shadow, 4 * bs, bs);
  denv_teardown (&e);

  /* A cache with no room: the synced block is evicted at once. */
  memset (shadow, 0, 200 * bs);
  denv_setup (&e, "part0", 200, bs, 0);
  denv_write (&e, shadow, 9 * bs, bs, 9, 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  zv_dbuf_get_stats (e.cache, &cs);
  assert_true (cs.cs_evictions >= 1);
  denv_write (&e, shadow, 9 * bs + bs - 17, 17, 10, 6);     /* tail */
  denv_write (&e, shadow, 8 * bs + bs - 5, 10, 11, 6);      /* straddle */
  denv_check (&e, shadow, 8 * bs, 2 * bs);
  assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
  denv_check (&e, shadow, 8 * bs, 2 * bs);
  denv_teardown (&e);
  free (shadow);
}

/* Device reads so far (the one device of the setup). */
static uint64_t
denv_dev_reads (denv_t *e)
{
  zv_dev_stats_t ds;

  zv_dev_get_stats (e->spa->spa_devs[0], &ds);
  return ds.ds_reads;
}

/*
 * No read on the write path: grain-aligned writes into part of uncached
 * blocks (several pieces of one block, a second txg over the first, a
 * partial zero, a free over a partial record) read nothing from the
 * device; reads before the sync overlay the old content, the sync merges
 * it, and the result is the same after a reopen.  A write that is not
 * grain-aligned still reads (a read-modify-write), and so does an
 * in-place write for the log.
 */
static void
test_partial_no_read (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  const uint64_t nb = 300;       /* 3 levels: the indirects are cold too */
  uint8_t *shadow = calloc (nb, bs);
  uint64_t reads;
  zv_blkptr_t bp;

  denv_setup (&e, "noread", nb, bs, BIG_CACHE);
  for (uint64_t b = 0; b < 20; b++)
    denv_write (&e, shadow, b * bs, bs, 100 + b, 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  denv_reopen (&e, BIG_CACHE);

  reads = denv_dev_reads (&e);
  denv_write (&e, shadow, 1 * bs + 4096, 4096, 1, 6);
  denv_write (&e, shadow, 2 * bs + 512, 512, 2, 6);
  denv_write (&e, shadow, 2 * bs + 8192, 1024, 3, 6);   /* same block */
  denv_write (&e, shadow, 3 * bs + 12288, 4096, 4, 6);
  denv_write (&e, shadow, 3 * bs + 4096, 4096, 5, 7);   /* over txg 6's */
  denv_write (&e, shadow, 4 * bs + bs - 1536, 3072, 6, 6);  /* straddles */
  denv_write (&e, shadow, 250 * bs + 1024, 2048, 7, 6); /* over a hole */
  assert_int_equal (zv_dmu_zero_by_dnode (&e.ob, 6 * bs + 512, 1024, 6), 0);
  memset (shadow + 6 * bs + 512, 0, 1024);
  denv_write (&e, shadow, 7 * bs, 4096, 8, 6);
  assert_int_equal (zv_dmu_free_by_dnode (&e.ob, 7, 1, 6), 0);
  memset (shadow + 7 * bs, 0, bs);
  denv_write (&e, shadow, 8 * bs + 2048, 2048, 9, 6);   /* then whole */
  denv_write (&e, shadow, 8 * bs, 2048, 10, 6);
  denv_write (&e, shadow, 8 * bs + 4096, bs - 4096, 11, 6);
  assert_int_equal (denv_dev_reads (&e), reads);

  /* A write that is not grain-aligned reads the block first. */
  denv_write (&e, shadow, 10 * bs + 4096, 4096, 12, 6);
  reads = denv_dev_reads (&e);
  denv_write (&e, shadow, 10 * bs + 100, 10, 13, 6);
  assert_true (denv_dev_reads (&e) > reads);

  /* The log's in-place write of a partial record writes the whole
   * block: merged first. */
  denv_write (&e, shadow, 11 * bs + 512, 512, 14, 6);
  assert_int_equal (zv_dmu_sync_block (&e.ob, 6, 11, &bp), 0);

  /* Reads overlay the old content (these do read). */
  denv_check (&e, shadow, 0, nb * bs);
  assert_false (denv_is_hole (&e, 250));

  assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
  denv_check (&e, shadow, 0, nb * bs);
  assert_int_equal (zv_dmu_sync (&e.ob, 7), 0);
  denv_check (&e, shadow, 0, nb * bs);
  denv_reopen (&e, BIG_CACHE);
  denv_check (&e, shadow, 0, nb * bs);

  /* The same with nothing read before the sync, and a cache that keeps
   * nothing: the sync reads the old blocks itself. */
  denv_reopen (&e, 0);
  for (uint64_t b = 12; b < 20; b++)
    denv_write (&e, shadow, b * bs + 512 * b, 512, 200 + b, 8);
  denv_write (&e, shadow, 12 * bs + 8192, 4096, 300, 9);
  assert_int_equal (zv_dmu_sync (&e.ob, 8), 0);
  assert_int_equal (zv_dmu_sync (&e.ob, 9), 0);
  denv_check (&e, shadow, 0, nb * bs);
  denv_reopen (&e, BIG_CACHE);
  denv_check (&e, shadow, 0, nb * bs);
  denv_teardown (&e);
  free (shadow);
}

/*
 * The first dirty record of a cached block takes the cached buffer
 * rather than copying it: the cache's byte count drops by one block
 * while the record is open and is back after the sync.  A record behind
 * another (txg 7 behind 6) still copies, and a discarded record leaves
 * the block to be read back from disk.
 */
static void
test_dirty_takes_cached_block (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  uint8_t *shadow = calloc (200, bs);
  uint8_t *synced = malloc (200 * bs);
  zv_dbuf_stats_t cs;
  uint64_t clean, misses;

  denv_setup (&e, "take", 200, bs, BIG_CACHE);
  denv_write (&e, shadow, 4 * bs, bs, 1, 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  zv_dbuf_get_stats (e.cache, &cs);
  clean = cs.cs_bytes;
  misses = cs.cs_misses;

  denv_write (&e, shadow, 4 * bs + 100, 200, 2, 6);
  zv_dbuf_get_stats (e.cache, &cs);
  assert_int_equal (cs.cs_bytes, clean - bs);       /* taken, not copied */
  assert_int_equal (cs.cs_misses, misses);          /* and not read */
  denv_write (&e, shadow, 4 * bs + 5000, 300, 3, 7);  /* behind txg 6 */
  denv_check (&e, shadow, 0, 200 * bs);

  assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
  zv_dbuf_get_stats (e.cache, &cs);
  assert_int_equal (cs.cs_bytes, clean);
  assert_int_equal (zv_dmu_sync (&e.ob, 7), 0);
  denv_check (&e, shadow, 0, 200 * bs);
  denv_reopen (&e, BIG_CACHE);
  denv_check (&e, shadow, 0, 200 * bs);

  /* Cached again (the read above); a record discarded unsynced. */
  memcpy (synced, shadow, 200 * bs);
  denv_write (&e, shadow, 4 * bs + 64, 64, 4, 8);
  zv_dmu_object_discard_dirty (&e.ob);
  denv_check (&e, synced, 0, 200 * bs);
  denv_teardown (&e);
  free (synced);
  free (shadow);
}

/* Dirty in txg 6 and 7 on the same block; syncing 6 writes exactly 6's
 * content, syncing 7 the merged content. */
static void
test_two_txgs_in_flight (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  uint8_t *shadow = calloc (200, bs);
  uint8_t *v6 = malloc (bs);
  wlist_t w;
  const wrec_t *r;

  denv_setup (&e, "two", 200, bs, BIG_CACHE);
  denv_write (&e, shadow, 8 * bs, bs, 1, 6);
  memcpy (v6, shadow + 8 * bs, bs);
  denv_write (&e, shadow, 8 * bs + 2000, 500, 2, 7);
  denv_write (&e, shadow, 9 * bs, bs, 3, 7);
  denv_check (&e, shadow, 8 * bs, 2 * bs);

  assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
  assert_int_equal (denv_root (&e).bp_birth, 6);
  assert_int_equal (denv_root (&e).bp_fill, 1);
  denv_check (&e, shadow, 8 * bs, 2 * bs);  /* reads still see txg 7 */
  assert_int_equal (denv_walk (&e, true, &w), 0);
  r = wlist_find (&w, 0, 8);
  assert_non_null (r);
  assert_memory_equal (r->data, v6, bs);    /* disk has txg 6 only */
  assert_null (wlist_find (&w, 0, 9));
  wlist_free (&w);

  assert_int_equal (zv_dmu_sync (&e.ob, 7), 0);
  assert_int_equal (denv_root (&e).bp_birth, 7);
  assert_int_equal (denv_root (&e).bp_fill, 2);
  assert_int_equal (denv_walk (&e, true, &w), 0);
  r = wlist_find (&w, 0, 8);
  assert_non_null (r);
  assert_memory_equal (r->data, shadow + 8 * bs, bs);
  r = wlist_find (&w, 0, 9);
  assert_non_null (r);
  assert_memory_equal (r->data, shadow + 9 * bs, bs);
  wlist_free (&w);
  denv_reopen (&e, 0);
  denv_check (&e, shadow, 0, 200 * bs);

  /* Free in 8 then a partial write in 9 (zeros around it); write in 8
   * then free in 9. */
  assert_int_equal (zv_dmu_free_by_dnode (&e.ob, 8, 1, 8), 0);
  memset (shadow + 8 * bs, 0, bs);
  denv_write (&e, shadow, 8 * bs + 100, 50, 4, 9);
  denv_write (&e, shadow, 30 * bs, 10, 5, 8);
  assert_int_equal (zv_dmu_free_by_dnode (&e.ob, 30, 1, 9), 0);
  memset (shadow + 30 * bs, 0, bs);
  denv_check (&e, shadow, 0, 200 * bs);
  assert_int_equal (zv_dmu_sync (&e.ob, 8), 0);
  assert_true (denv_is_hole (&e, 30));          /* txg 9's view */
  assert_int_equal (zv_dmu_sync (&e.ob, 9), 0);
  assert_true (denv_is_hole (&e, 30));
  assert_false (denv_is_hole (&e, 8));
  assert_int_equal (denv_root (&e).bp_fill, 2);   /* blocks 8, 9 */
  denv_reopen (&e, 0);
  denv_check (&e, shadow, 0, 200 * bs);
  denv_teardown (&e);
  free (v6);
  free (shadow);
}

/* Copy on write: an overwrite in a later txg goes to new space and the
 * old copies (data and both indirect copies) wait on the defer list
 * until the sync of T+2 begins. */
static void
test_overwrite_defers (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  zv_blkptr_t d5, i5, d6, i6;
  zv_alloc_t *a;

  denv_setup (&e, "cow", 200, bs, BIG_CACHE);
  a = e.spa->spa_alloc;
  denv_write (&e, NULL, 0, bs, 1, 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  assert_int_equal (tl_alloc_defer_count (a, 5), 0);
  d5 = denv_bp (&e, 0, 0);
  i5 = denv_bp (&e, 1, 0);
  assert_int_not_equal (i5.bp_dva[0], i5.bp_dva[1]);   /* ditto */

  denv_write (&e, NULL, 0, bs, 2, 6);
  assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
  d6 = denv_bp (&e, 0, 0);
  i6 = denv_bp (&e, 1, 0);
  assert_int_not_equal (d6.bp_dva[0], d5.bp_dva[0]);
  assert_int_not_equal (i6.bp_dva[0], i5.bp_dva[0]);
  assert_int_not_equal (i6.bp_dva[1], i5.bp_dva[1]);
  assert_int_equal (d6.bp_birth, 6);
  assert_int_equal (tl_alloc_defer_count (a, 6), 3);
  assert_true (denv_deferred (&e, 6, d5.bp_dva[0]));
  assert_true (denv_deferred (&e, 6, i5.bp_dva[0]));
  assert_true (denv_deferred (&e, 6, i5.bp_dva[1]));
  assert_true (zv_alloc_is_allocated (a, d5.bp_dva[0], bs));

  zv_alloc_sync_begin (a, 7);
  assert_true (zv_alloc_is_allocated (a, d5.bp_dva[0], bs));
  assert_true (zv_alloc_is_allocated (a, i5.bp_dva[1], ZV_INDIRECT_SIZE));
  zv_alloc_sync_begin (a, 8);
  assert_false (zv_alloc_is_allocated (a, d5.bp_dva[0], bs));
  assert_false (zv_alloc_is_allocated (a, i5.bp_dva[0], ZV_INDIRECT_SIZE));
  assert_false (zv_alloc_is_allocated (a, i5.bp_dva[1], ZV_INDIRECT_SIZE));
  assert_true (zv_alloc_is_allocated (a, d6.bp_dva[0], bs));
  denv_teardown (&e);

  /* A one-level object: the root is the data block. */
  denv_setup (&e, "cow1", 1, bs, BIG_CACHE);
  a = e.spa->spa_alloc;
  denv_write (&e, NULL, 0, bs, 1, 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  d5 = denv_root (&e);
  denv_write (&e, NULL, 100, 10, 2, 6);
  assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
  assert_int_not_equal (denv_root (&e).bp_dva[0], d5.bp_dva[0]);
  assert_int_equal (tl_alloc_defer_count (a, 6), 1);
  assert_true (denv_deferred (&e, 6, d5.bp_dva[0]));
  denv_teardown (&e);
}

/* A second sync of the same txg after more dirtying rewrites in place:
 * same addresses, nothing freed, no new space but the new block's. */
static void
test_resync_in_place (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  uint8_t *shadow = calloc (200, bs);
  zv_blkptr_t d1, i1, d2, i2;
  uint64_t alloc1;

  denv_setup (&e, "resync", 200, bs, BIG_CACHE);
  denv_write (&e, shadow, 3 * bs, bs, 1, 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  d1 = denv_bp (&e, 0, 3);
  i1 = denv_bp (&e, 1, 0);
  alloc1 = denv_allocated (&e);

  denv_write (&e, shadow, 3 * bs + 5, 100, 2, 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  d2 = denv_bp (&e, 0, 3);
  i2 = denv_bp (&e, 1, 0);
  assert_int_equal (d2.bp_dva[0], d1.bp_dva[0]);
  assert_int_equal (i2.bp_dva[0], i1.bp_dva[0]);
  assert_int_equal (i2.bp_dva[1], i1.bp_dva[1]);
  assert_false (zv_cksum_equal (&d1.bp_cksum, &d2.bp_cksum));
  assert_int_equal (tl_alloc_defer_count (e.spa->spa_alloc, 5), 0);
  assert_int_equal (denv_allocated (&e), alloc1);

  denv_write (&e, shadow, 4 * bs, bs, 3, 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  assert_int_equal (denv_bp (&e, 1, 0).bp_dva[0], i1.bp_dva[0]);
  assert_int_equal (denv_allocated (&e), alloc1 + bs);
  assert_int_equal (denv_root (&e).bp_fill, 2);
  denv_reopen (&e, 0);
  denv_check (&e, shadow, 0, 200 * bs);
  denv_teardown (&e);
  free (shadow);
}

/* zv_dmu_walk visits every non-hole pointer, parents first, with the
 * right fills and content; a nonzero return stops it. */
static void
test_walk (void **state)
{
  static const uint64_t blocks[] = { 0, 1, 254, 255, 599, 65025, 69999 };
  const size_t nb = sizeof blocks / sizeof blocks[0];
  const uint32_t bs = 4096;
  denv_t e;
  wlist_t w;

  denv_setup (&e, "walk", 70000, bs, BIG_CACHE);
  assert_int_equal (e.ob.ob_nlevels, 4);
  for (size_t i = 0; i < nb; i++)
    denv_write (&e, NULL, blocks[i] * bs, bs, 100 + blocks[i], 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);

  assert_int_equal (denv_walk (&e, true, &w), 0);
  assert_int_equal (wlist_count (&w, 3), 1);
  assert_int_equal (wlist_count (&w, 2), 2);             /* 0, 1 */
  assert_int_equal (wlist_count (&w, 1), 5);             /* 0,1,2,255,274 */
  assert_int_equal (wlist_count (&w, 0), nb);
  assert_int_equal (w.v[0].level, 3);
  assert_int_equal (w.v[0].bp.bp_fill, nb);
  for (size_t i = 0; i < w.n; i++) {
    const wrec_t *r = &w.v[i];
    uint64_t fill = 0;

    assert_false (zv_bp_is_hole (&r->bp));
    assert_int_equal (r->bp.bp_level, r->level);
    /* The parent was visited before. */
    if (r->level < 3) {
      bool seen = false;
      for (size_t j = 0; j < i; j++)
        seen |= w.v[j].level == r->level + 1 && w.v[j].blkid == r->blkid / F;
      assert_true (seen);
    }
    if (r->level == 0) {
      assert_non_null (r->data);
      assert_int_equal (tl_pat_check (r->data, r->blkid * bs, bs,
                                      100 + r->blkid), -1);
      continue;
    }
    /* An indirect block's fill is the data blocks below it. */
    uint64_t span = 1;
    for (unsigned l = 0; l < r->level; l++)
      span *= F;
    for (size_t k = 0; k < nb; k++)
      fill += blocks[k] / span == r->blkid;
    assert_int_equal (r->bp.bp_fill, fill);
  }
  for (size_t k = 0; k < nb; k++)
    assert_non_null (wlist_find (&w, 0, blocks[k]));
  wlist_free (&w);

  /* Without data, L0 content is not read; a nonzero return stops. */
  assert_int_equal (denv_walk (&e, false, &w), 0);
  assert_null (wlist_find (&w, 0, 0)->data);
  wlist_free (&w);
  {
    zv_dnode_phys_t dn;
    memset (&w, 0, sizeof w);
    w.blksz = bs;
    w.stop_at = 4;                           /* L3, L2, L1, first L0 */
    zv_dmu_object_phys (&e.ob, &dn);
    assert_int_equal (zv_dmu_walk (e.spa, 1, &dn, false, walk_cb, &w), 7);
    assert_int_equal (w.n, 4);
    assert_int_equal (w.v[3].level, 0);
    wlist_free (&w);
  }
  denv_teardown (&e);
}

/* Damage on disk: one bad copy of an indirect block is survived, two are
 * -EIO for reads that need it (and for the walk); a bad data block (one
 * copy) is -EIO for that block only. */
static void
test_corrupt_indirect (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  uint8_t *shadow = calloc (200, bs);
  uint8_t *buf = malloc (bs);
  zv_blkptr_t ind, d20;
  wlist_t w;

  denv_setup (&e, "corrupt", 200, bs, BIG_CACHE);
  denv_write (&e, shadow, 10 * bs, bs, 1, 5);
  denv_write (&e, shadow, 20 * bs, bs, 2, 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  ind = denv_bp (&e, 1, 0);
  d20 = denv_bp (&e, 0, 20);
  assert_int_equal (ind.bp_ncopies, 2);

  /* One copy damaged: reads fall back to the other, and say so. */
  assert_int_equal (tl_file_flip (e.path, ZV_DVA_OFFSET (ind.bp_dva[0])
                                  + 200), 0);
  tl_log_reset (true);
  denv_reopen (&e, 0);
  denv_check (&e, shadow, 10 * bs, bs);
  assert_true (tl_log_has ("checksum error"));
  assert_int_equal (denv_walk (&e, false, &w), 0);
  wlist_free (&w);

  /* Both copies damaged. */
  assert_int_equal (tl_file_flip (e.path, ZV_DVA_OFFSET (ind.bp_dva[1])
                                  + 5000), 0);
  denv_reopen (&e, 0);
  bool hole;
  assert_int_equal (zv_dmu_read_by_dnode (&e.ob, 10 * bs, bs, buf), -EIO);
  assert_int_equal (zv_dmu_read_by_dnode (&e.ob, 20 * bs + 7, 9, buf), -EIO);
  assert_int_equal (zv_dmu_block_is_hole (&e.ob, 30, &hole), -EIO);
  /* A partial write needs the old block: it fails and dirties nothing. */
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 10 * bs + 1, 1, buf, 6, NULL),
                    -EIO);
  assert_int_equal (denv_walk (&e, false, &w), -EIO);
  wlist_free (&w);

  /* Repaired: readable again.  Then a bad data block. */
  assert_int_equal (tl_file_flip (e.path, ZV_DVA_OFFSET (ind.bp_dva[0])
                                  + 200), 0);
  assert_int_equal (tl_file_flip (e.path, ZV_DVA_OFFSET (d20.bp_dva[0])
                                  + 9), 0);
  denv_reopen (&e, 0);
  denv_check (&e, shadow, 10 * bs, bs);
  assert_int_equal (zv_dmu_read_by_dnode (&e.ob, 20 * bs, bs, buf), -EIO);

  /* A partial write into the bad block reads nothing, so it succeeds;
   * its own grains read back, the rest still fails.  The sync cannot
   * merge it and fails (the pool would suspend): committing would drop
   * an acknowledged write.  The record stays, reads still see it, and
   * once the block reads again the same sync places it. */
  memset (buf, 0x5a, 4096);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 20 * bs + 4096, 4096,
                                           buf, 30, NULL), 0);
  memcpy (shadow + 20 * bs + 4096, buf, 4096);
  denv_write (&e, shadow, 21 * bs + 512, 512, 31, 30);
  assert_int_equal (zv_dmu_read_by_dnode (&e.ob, 20 * bs + 4096, 4096,
                                          buf + 8192), 0);
  assert_memory_equal (buf, buf + 8192, 4096);
  assert_int_equal (zv_dmu_read_by_dnode (&e.ob, 20 * bs, bs, buf), -EIO);
  zv_blkptr_t root = denv_root (&e);
  assert_int_equal (zv_dmu_sync (&e.ob, 30), -EIO);
  assert_true (tl_log_has ("partly written in txg 30 cannot be read"));
  zv_blkptr_t root2 = denv_root (&e);
  assert_memory_equal (&root, &root2, sizeof root);
  denv_check (&e, shadow, 20 * bs + 4096, 4096);
  denv_check (&e, shadow, 21 * bs, bs);
  assert_int_equal (tl_file_flip (e.path, ZV_DVA_OFFSET (d20.bp_dva[0])
                                  + 9), 0);
  assert_int_equal (zv_dmu_sync (&e.ob, 30), 0);
  denv_reopen (&e, 0);
  denv_check (&e, shadow, 20 * bs, 2 * bs);
  tl_log_reset (false);
  denv_teardown (&e);
  free (buf);
  free (shadow);
}

/* Fails the first fr_left reads that cover fr_off. */
typedef struct {
  uint64_t fr_off;
  int fr_left;
  int fr_hits;
} flaky_read_t;

static int
flaky_read (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
            uint32_t len)
{
  flaky_read_t *f = arg;

  (void) dev;
  if (op != ZV_DEV_READ || f->fr_off < off || f->fr_off >= off + len
      || f->fr_left == 0)
    return 0;
  f->fr_left--;
  f->fr_hits++;
  return -EIO;
}

/* A read error under a partial write at the sync passes on a later try:
 * the write lands whole, merged with the old content.  (Before, the
 * first failure dropped the acknowledged write.) */
static void
test_partial_read_retry (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  uint8_t *shadow = calloc (40, bs);
  flaky_read_t f = { 0 };

  (void) state;
  denv_setup (&e, "flaky", 40, bs, BIG_CACHE);
  for (uint64_t b = 0; b < 8; b++)
    denv_write (&e, shadow, b * bs, bs, 1, 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  f.fr_off = ZV_DVA_OFFSET (denv_bp (&e, 0, 3).bp_dva[0]);
  denv_reopen (&e, BIG_CACHE);

  /* Partial writes over uncached blocks: 3 fails twice, then reads. */
  denv_write (&e, shadow, 3 * bs + 1024, 2048, 2, 6);
  denv_write (&e, shadow, 5 * bs, 512, 3, 6);
  f.fr_left = 2;
  zv_dev_set_fault (e.spa->spa_devs[0], flaky_read, &f);
  tl_log_reset (true);
  assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
  zv_dev_set_fault (e.spa->spa_devs[0], NULL, NULL);
  assert_int_equal (f.fr_hits, 2);
  assert_true (tl_log_has ("read error"));
  assert_false (tl_log_has ("cannot be read"));
  denv_reopen (&e, 0);
  denv_check (&e, shadow, 0, 8 * bs);

  /* A fault that outlasts the tries fails the sync; nothing is placed,
   * and the record is still there for the next sync. */
  denv_write (&e, shadow, 3 * bs, 512, 4, 7);
  f.fr_off = ZV_DVA_OFFSET (denv_bp (&e, 0, 3).bp_dva[0]);
  f.fr_left = -1;
  f.fr_hits = 0;
  zv_dev_set_fault (e.spa->spa_devs[0], flaky_read, &f);
  assert_int_equal (zv_dmu_sync (&e.ob, 7), -EIO);
  assert_int_equal (f.fr_hits, 3);
  assert_true (tl_log_has ("partly written in txg 7 cannot be read"));
  zv_dev_set_fault (e.spa->spa_devs[0], NULL, NULL);
  assert_int_equal (zv_dmu_sync (&e.ob, 7), 0);
  denv_reopen (&e, 0);
  denv_check (&e, shadow, 0, 8 * bs);
  tl_log_reset (false);
  denv_teardown (&e);
  free (shadow);
}

/* Counts reads in flight, and the most at once. */
typedef struct {
  int ri_now, ri_max, ri_total;
  uint64_t ri_bytes;
} inflight_t;

static void
inflight_obs (void *arg, zv_dev_t *dev, enum zv_dev_op op, int done,
              uint64_t off, uint32_t len, const void *buf, int result)
{
  inflight_t *f = arg;

  (void) dev; (void) off; (void) len; (void) buf; (void) result;
  if (op != ZV_DEV_READ)
    return;
  if (done)
    f->ri_now--;
  else {
    f->ri_total++;
    f->ri_bytes += len;
    if (++f->ri_now > f->ri_max)
      f->ri_max = f->ri_now;
  }
}

/* A cold read of several blocks reads them all at once (one batch, the
 * blocks that touch on the device in one request), not one after the
 * other; the cache counts them as misses; blocks cached or dirty are not
 * read; and the bytes are right. */
static void
test_read_batch (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  uint8_t *shadow = calloc (128, bs), *buf = malloc (100 * bs);
  inflight_t f = { 0 };
  zv_dbuf_stats_t st;

  (void) state;
  denv_setup (&e, "rbatch", 128, bs, BIG_CACHE);
  for (uint64_t b = 0; b < 100; b++)
    denv_write (&e, shadow, b * bs, bs, 3, 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  denv_reopen (&e, BIG_CACHE);
  /* Warm the level-1 block, so what follows reads only data. */
  denv_check (&e, shadow, 31 * bs, 512);

  zv_dbuf_get_stats (e.cache, &st);
  uint64_t misses = st.cs_misses;
  zv_dev_set_observer (e.spa->spa_devs[0], inflight_obs, &f);
  assert_int_equal (zv_dmu_read_by_dnode (&e.ob, 100, 8 * bs - 200, buf), 0);
  assert_memory_equal (buf, shadow + 100, 8 * bs - 200);
  /* Written in order in one txg: one place on the device, one read. */
  assert_int_equal (f.ri_bytes, 8 * bs);
  assert_int_equal (f.ri_total, 1);
  zv_dbuf_get_stats (e.cache, &st);
  assert_int_equal (st.cs_misses - misses, 8);

  /* Cached blocks (0..7) and a dirty one (9) are not read again. */
  denv_write (&e, shadow, 9 * bs + 4096, 4096, 4, 6);
  f = (inflight_t) { 0 };
  uint8_t *buf2 = malloc (12 * bs);
  assert_int_equal (zv_dmu_read_by_dnode (&e.ob, 0, 12 * bs, buf2), 0);
  assert_memory_equal (buf2, shadow, 12 * bs);
  free (buf2);
  /* 8, 10 and 11 in one batch, two requests in flight at once (10 and
   * 11 touch); 9 merges its partial record with the old block (a read
   * of its own). */
  assert_int_equal (f.ri_bytes, 4 * bs);
  assert_int_equal (f.ri_total, 3);
  assert_int_equal (f.ri_max, 2);
  zv_dev_set_observer (e.spa->spa_devs[0], NULL, NULL);
  assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
  denv_reopen (&e, 0);
  denv_check (&e, shadow, 0, 32 * bs);

  /* A read longer than one batch (64 blocks): window after window,
   * never block by block. */
  denv_reopen (&e, BIG_CACHE);
  denv_check (&e, shadow, 99 * bs, 512);
  f = (inflight_t) { 0 };
  zv_dev_set_observer (e.spa->spa_devs[0], inflight_obs, &f);
  assert_int_equal (zv_dmu_read_by_dnode (&e.ob, 0, 100 * bs, buf), 0);
  zv_dev_set_observer (e.spa->spa_devs[0], NULL, NULL);
  assert_memory_equal (buf, shadow, 100 * bs);
  assert_int_equal (f.ri_bytes, 99 * bs);
  assert_true (f.ri_total <= 4);
  denv_teardown (&e);
  free (buf);
  free (shadow);
}

/* A read of cached blocks holds each block once (not once to look for
 * blocks to batch and again to copy), and one that is partly cached,
 * partly dirty and partly on disk still returns the right bytes, with
 * the misses counted once each. */
static void
test_read_holds_once (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  uint8_t *shadow = calloc (80, bs), *buf = malloc (80 * bs);
  zv_dbuf_stats_t st0, st;

  (void) state;
  denv_setup (&e, "rholds", 80, bs, BIG_CACHE);
  for (uint64_t b = 0; b < 80; b++)
    denv_write (&e, shadow, b * bs, bs, 7, 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  denv_reopen (&e, BIG_CACHE);
  denv_check (&e, shadow, 0, 8 * bs);             /* cache 0..7 */

  zv_dbuf_get_stats (e.cache, &st0);
  assert_int_equal (zv_dmu_read_by_dnode (&e.ob, 0, 8 * bs, buf), 0);
  assert_memory_equal (buf, shadow, 8 * bs);
  zv_dbuf_get_stats (e.cache, &st);
  assert_int_equal (st.cs_holds - st0.cs_holds, 8);
  assert_int_equal (st.cs_hits - st0.cs_hits, 8);
  assert_int_equal (st.cs_misses, st0.cs_misses);

  /* 0..7 cached, a partial record over uncached 9, a whole one over 12,
   * the rest on disk, over more than one window, both ends unaligned. */
  denv_write (&e, shadow, 9 * bs + 1024, 2048, 8, 6);
  denv_write (&e, shadow, 12 * bs, bs, 9, 6);
  zv_dbuf_get_stats (e.cache, &st0);
  assert_int_equal (zv_dmu_read_by_dnode (&e.ob, 300, 79 * bs, buf), 0);
  assert_memory_equal (buf, shadow + 300, 79 * bs);
  zv_dbuf_get_stats (e.cache, &st);
  /* On disk: 8, 9 (under its partial record) and 10..79 but 12. */
  assert_int_equal (st.cs_misses - st0.cs_misses, 71);
  assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
  denv_reopen (&e, 0);
  denv_check (&e, shadow, 0, 80 * bs);
  denv_teardown (&e);
  free (buf);
  free (shadow);
}

/* Objects of 1, 2, 3 and 4 levels: first, middle and last blocks write,
 * sync, read back cold, and take a partial rewrite through every level. */
static void
test_levels (void **state)
{
  static const struct { uint64_t nblocks; unsigned nlevels; } shapes[] = {
    { 1, 1 }, { 200, 2 }, { 255, 2 }, { 256, 3 }, { 60000, 3 },
    { 70000, 4 },
  };
  const uint32_t bs = 4096;

  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    uint64_t nb = shapes[s].nblocks;
    uint64_t bl[3] = { 0, nb / 2, nb - 1 };
    unsigned distinct = nb == 1 ? 1 : nb == 2 ? 2 : 3;
    uint8_t *buf = malloc (bs), *want = malloc (bs);
    zv_blkptr_t root;
    denv_t e;

    assert_int_equal (zv_dmu_nlevels (nb), shapes[s].nlevels);
    denv_setup (&e, "levels", nb, bs, 0);
    for (unsigned i = 0; i < 3; i++)
      denv_write (&e, NULL, bl[i] * bs, bs, 50 + bl[i], 5);
    assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
    root = denv_root (&e);
    assert_int_equal (root.bp_level, shapes[s].nlevels - 1);
    assert_int_equal (root.bp_fill, distinct);
    assert_int_equal (root.bp_type, shapes[s].nlevels == 1 ? ZV_BT_VOLDATA
                      : ZV_BT_INDIRECT);
    assert_int_equal (root.bp_ncopies, shapes[s].nlevels == 1 ? 1 : 2);

    denv_reopen (&e, 0);
    for (unsigned i = 0; i < 3; i++) {
      assert_int_equal (zv_dmu_read_by_dnode (&e.ob, bl[i] * bs, bs, buf), 0);
      assert_int_equal (tl_pat_check (buf, bl[i] * bs, bs, 50 + bl[i]), -1);
    }
    if (nb > 3) {
      assert_int_equal (zv_dmu_read_by_dnode (&e.ob, 1 * bs, bs, buf), 0);
      assert_true (zv_is_zero (buf, bs));
    }

    /* Partial rewrite of the last block, cold. */
    tl_pat_fill (want, bl[2] * bs, bs, 50 + bl[2]);
    tl_pat_fill (want + 100, bl[2] * bs + 100, 33, 9);
    assert_int_equal (zv_dmu_write_by_dnode (&e.ob, bl[2] * bs + 100, 33,
                                             want + 100, 6, NULL), 0);
    assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
    assert_int_equal (denv_root (&e).bp_birth, 6);
    denv_reopen (&e, 0);
    assert_int_equal (zv_dmu_read_by_dnode (&e.ob, bl[2] * bs, bs, buf), 0);
    assert_memory_equal (buf, want, bs);
    denv_teardown (&e);
    free (buf);
    free (want);
  }
}

/*
 * A write or zero that finds too little space changes nothing: it
 * reserves every block of its range before it dirties the first.  (It
 * used to dirty the blocks that fit and fail at the next: a retry after
 * a sync then rewrote those in new space, their old copies allocated
 * two txgs more.)  What fits still goes in, and what blocks dirty in
 * the txg already did not need goes back.
 */
static void
test_enospc_changes_nothing (void **state)
{
  denv_t e;
  const uint32_t bs = 16384;
  uint8_t *shadow = calloc (64, bs);
  zv_alloc_t *a;
  zv_alloc_space_t sp;
  uint64_t room;

  assert_non_null (shadow);
  denv_setup (&e, "enospc", 64, bs, BIG_CACHE);
  a = e.spa->spa_alloc;
  denv_write (&e, shadow, 0, 4 * bs, 1, 5);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);

  /* Leave room for three blocks. */
  sp = tl_alloc_space (a);
  room = sp.as_total - zv_alloc_slop (sp.as_total) - sp.as_allocated
    - sp.as_reserved - 3 * bs;
  assert_int_equal (zv_alloc_reserve (a, room), 0);

  uint8_t *buf = malloc (8 * bs);
  assert_non_null (buf);
  tl_pat_fill (buf, 0, 8 * bs, 2);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 0, 8 * bs, buf, 6, NULL),
                    -ENOSPC);
  assert_int_equal (zv_dmu_zero_by_dnode (&e.ob, bs / 2, 4 * bs, 6),
                    -ENOSPC);
  assert_int_equal (zv_dmu_object_reserved (&e.ob), 0);
  assert_int_equal (tl_alloc_space (a).as_reserved, room);
  assert_null (atomic_load (&e.ob.ob_dirty[6 & ZV_TXG_MASK]));
  denv_check (&e, shadow, 0, 64 * bs);

  /* Three blocks fit; rewriting two of them needs nothing more (found
   * dirty once the whole range does not fit), and a fourth block still
   * does not fit. */
  denv_write (&e, shadow, bs, 3 * bs, 3, 6);
  assert_int_equal (zv_dmu_object_reserved (&e.ob), 3 * bs);
  denv_write (&e, shadow, bs + 100, bs, 4, 6);
  assert_int_equal (zv_dmu_object_reserved (&e.ob), 3 * bs);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 4 * bs, bs, buf, 6, NULL),
                    -ENOSPC);
  assert_int_equal (zv_dmu_object_reserved (&e.ob), 3 * bs);
  zv_alloc_unreserve (a, room);
  assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
  assert_int_equal (zv_dmu_object_reserved (&e.ob), 0);
  assert_int_equal (tl_alloc_space (a).as_reserved, 0);
  denv_reopen (&e, 0);
  denv_check (&e, shadow, 0, 64 * bs);
  free (buf);
  denv_teardown (&e);
  free (shadow);
}

/*
 * zv_dmu_tree_bytes, what a reservation holds for indirect blocks, is
 * what the tree of a whole object written takes (two copies of each
 * indirect block), and no less than a run's anywhere in a larger one.
 */
static void
test_tree_bytes (void **state)
{
  static const struct { uint64_t total, first, n; } runs[] = {
    { 600, 0, 600 }, { 255, 0, 255 }, { 70000, 0, 70000 },
    { 70000, 250, 300 }, { 70000, 65000, 520 }, { 1, 0, 1 },
  };
  const uint32_t bs = 4096;
  const uint64_t step = 64;     /* every 64th block: all indirect blocks */

  assert_int_equal (zv_dmu_tree_bytes (0, 600), 0);
  for (size_t i = 0; i < sizeof runs / sizeof runs[0]; i++) {
    uint64_t want = zv_dmu_tree_bytes (runs[i].n, runs[i].total), got = 0;
    uint8_t *buf = malloc (bs);
    wlist_t w;
    denv_t e;

    assert_non_null (buf);
    denv_setup (&e, "tree", runs[i].total, bs, 0);
    /* Every indirect block the run needs exists once its first and last
     * blocks and one block per 64 are written. */
    for (uint64_t b = runs[i].first, end = b + runs[i].n; b < end;
         b = b + step < end || b + 1 == end ? b + step : end - 1) {
      tl_pat_fill (buf, b * bs, bs, 7);
      assert_int_equal (zv_dmu_write_by_dnode (&e.ob, b * bs, bs, buf, 5, NULL), 0);
    }
    assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
    assert_int_equal (denv_walk (&e, false, &w), 0);
    for (size_t j = 0; j < w.n; j++)
      if (w.v[j].level > 0)
        got += (uint64_t) w.v[j].bp.bp_psize * w.v[j].bp.bp_ncopies;
    wlist_free (&w);
    if (runs[i].n == runs[i].total)
      assert_int_equal (got, want);
    else
      assert_true (got <= want);
    denv_teardown (&e);
    free (buf);
  }
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_write_read_sync),
    tl_test (test_seal),
    tl_test (test_direct_write),
    tl_test (test_direct_write_async),
    tl_test (test_zero_blocks_become_holes),
    tl_test (test_free_by_dnode),
    tl_test (test_partial_uncached),
    tl_test (test_partial_no_read),
    tl_test (test_partial_read_retry),
    tl_test (test_read_batch),
    tl_test (test_read_holds_once),
    tl_test (test_dirty_takes_cached_block),
    tl_test (test_two_txgs_in_flight),
    tl_test (test_overwrite_defers),
    tl_test (test_resync_in_place),
    tl_test (test_walk),
    tl_test (test_corrupt_indirect),
    tl_test (test_levels),
    tl_test (test_enospc_changes_nothing),
    tl_test (test_tree_bytes),
  };

  return tl_main (tests, "dmu", NULL);
}
