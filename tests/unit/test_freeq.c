/*
 * test_freeq.c: the background free of destroyed volumes and snapshots
 * (core/freeq.c) through the public API of core/zvol.h, and of what a
 * rollback leaves behind: a destroy
 * returns with its name gone and leaves its blocks to the txg syncs
 * that follow, each freeing at most free_max_blocks; the pool's freeing
 * figure falls and its free space climbs back txg by txg; another
 * volume's writes go on meanwhile; a name is reused at once; a power cut
 * at any point of the free leaves a pool the checker finds clean (the
 * queue's blocks in use, nothing leaked, nothing doubly allocated) whose
 * import resumes where the last synced txg left it and finishes with
 * every other volume's data intact; and the records of the queue are
 * checked as hostile data.
 *
 * Devices are sparse files in a mkdtemp directory under /var/tmp.  Seeds
 * are printed; ZV_TEST_SEED replays a run.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "testlib.h"
#include "pool_impl.h"
#include "alloc.h"
#include "txg.h"
#include "tunable.h"
#include "powercut.h"

#define DEV_SIZE (256 * MiB)
#define BS 16384u

static void
fq_set (const char *name, const char *value)
{
  char err[256];

  assert_int_equal (zv_tunable_set (name, value, err, sizeof err), 0);
}

/* A pool "tank" with volume "keep" holding 4 MiB of pattern 0x11. */
static zvol_pool_t *
fq_new_pool (char *path, size_t len, const char *name)
{
  const char *dev = tl_path (path, len, name);
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  zvol_volume_params_t vp = { .vp_size = 8 * MiB, .vp_blocksize = BS };
  zvol_t *zv;

  zv_tunable_reset_all ();
  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, true);
  pc.pc_name = "tank";
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  assert_int_equal (zvol_volume_create (p, "keep", &vp), 0);
  assert_int_equal (zvol_open (p, "keep", NULL, &zv), 0);
  tl_vol_write (zv, NULL, 0, 4 * MiB, 0x11, 0);
  assert_int_equal (zvol_close (zv), 0);
  return p;
}

/* A volume of 'size' bytes, written whole with pattern 'seed'. */
static void
fq_make_volume (zvol_pool_t *p, const char *name, uint64_t size,
                uint64_t seed)
{
  zvol_volume_params_t vp = { .vp_size = size, .vp_blocksize = BS };
  zvol_t *zv;

  assert_int_equal (zvol_volume_create (p, name, &vp), 0);
  assert_int_equal (zvol_open (p, name, NULL, &zv), 0);
  for (uint64_t off = 0; off < size; off += 4 * MiB)
    tl_vol_write (zv, NULL, off, (uint32_t) ZV_MIN (4 * MiB, size - off),
                  seed, 0);
  assert_int_equal (zvol_close (zv), 0);
}

/* One more txg synced (forced: an idle txg may not sync). */
static int
fq_sync_one (zvol_pool_t *p)
{
  zv_txg_hold_t h;
  int r = zv_txg_hold (zv_pool_txg (p), 0, &h);

  if (r < 0)
    return r;
  zv_txg_rele (zv_pool_txg (p), &h);
  return zv_txg_wait_synced (zv_pool_txg (p), h.th_txg);
}

static uint64_t
fq_freeing (zvol_pool_t *p, uint64_t *nds)
{
  zvol_pool_stats_t ps;

  zvol_pool_get_stats (p, &ps);
  if (nds)
    *nds = ps.ps_freeing_datasets;
  return ps.ps_freeing;
}

/* Sync until the queue is empty, from 'left' bytes to free: each sync
 * frees some and at most max_blocks blocks, within 100 syncs.  The
 * syncs it took. */
static unsigned
fq_drain (zvol_pool_t *p, uint64_t left, uint64_t max_blocks)
{
  uint64_t prev = left;
  unsigned txgs = 0;

  while (left > 0) {
    assert_int_equal (fq_sync_one (p), 0);
    left = fq_freeing (p, NULL);
    assert_true (left < prev);
    assert_true (atomic_load (&p->p_freeq.fq_last_blocks) <= max_blocks);
    prev = left;
    assert_true (++txgs < 100);
  }
  return txgs;
}

static uint64_t
fq_alloc_now (zvol_pool_t *p)
{
  return tl_alloc_space (zv_pool_spa (p)->spa_alloc).as_allocated;
}

/* Allocation once every deferred free is applied. */
static uint64_t
fq_allocated (zvol_pool_t *p)
{
  for (int i = 0; i < 3; i++)
    assert_int_equal (fq_sync_one (p), 0);
  return fq_alloc_now (p);
}

static void
fq_assert_near (uint64_t got, uint64_t want, const char *what)
{
  uint64_t d = got > want ? got - want : want - got;

  if (d > 64 * 1024)
    fail_msg ("%s: %" PRIu64 " bytes allocated, expected about %" PRIu64,
              what, got, want);
}

/* The longest sync in the txg history since txg 'from'. */
static double
fq_max_sync_ms (zvol_pool_t *p, uint64_t from)
{
  zvol_txg_stats_t ts[ZVOL_TXG_HISTORY];
  size_t n = zvol_pool_get_txgs (p, ts, ZVOL_TXG_HISTORY);
  double m = 0;

  for (size_t i = 0; i < n; i++)
    if (ts[i].ts_txg >= from && ts[i].ts_state == 'C')
      m = ZV_MAX (m, ts[i].ts_stime_ns / 1e6);
  return m;
}

/*
 * A volume of 32 MiB destroyed with free_max_blocks=128: the destroy
 * returns with the name gone; then each sync frees at most the bound,
 * the freeing figure falls at every one and the free space climbs, over
 * more than ten txgs, until allocation is back where it was before the
 * volume.  The same destroy with no bound ("in one go", as before the
 * queue) frees everything in one sync: the longest syncs of both are
 * printed.
 */
static void
test_volume_background (void **state)
{
  char path[512];
  double bounded_ms = 0, one_go_ms = 0, bounded_free_ms = 0;
  double one_go_free_ms = 0;

  (void) state;
  for (int one_go = 0; one_go < 2; one_go++) {
    zvol_pool_t *p = fq_new_pool (path, sizeof path,
                                  one_go ? "vol-one-go" : "vol");
    zv_freeq_t *fq = &p->p_freeq;
    uint64_t base = fq_allocated (p), full, left, prev, nds, txg0;
    /* ZV_TEST_FREEQ_MIB: a larger volume, for the figures. */
    const char *env = getenv ("ZV_TEST_FREEQ_MIB");
    uint64_t size = (env ? strtoull (env, NULL, 10) : 32) * MiB;
    unsigned txgs = 0;
    zvol_t *zv;

    fq_make_volume (p, "big", size, 0x21);
    full = fq_allocated (p);
    assert_true (full >= base + size);
    if (one_go) {
      fq_set ("free_max_blocks", "4294967296");
      fq_set ("free_max_ms", "60000");
    }
    else
      fq_set ("free_max_blocks", "128");
    txg0 = zv_txg_last_synced (zv_pool_txg (p));
    assert_int_equal (zvol_volume_destroy (p, "big"), 0);
    /* The name is gone at once. */
    assert_false (tl_ds_find (p, "big", NULL));
    tl_log_reset (true);
    assert_int_equal (zvol_open (p, "big", NULL, &zv), -ENOENT);
    tl_log_reset (false);
    left = fq_freeing (p, &nds);
    if (one_go) {
      assert_int_equal (left, 0);
      one_go_ms = fq_max_sync_ms (p, txg0 + 1);
      assert_true (atomic_load (&fq->fq_max_blocks) > size / BS);
    }
    else {
      /* The destroy waited for T+2: T+1 and T+2 freed at most 128 each. */
      assert_int_equal (nds, 1);
      assert_true (left >= size - 2 * 130 * BS);
      prev = left;
      while (left > 0) {
        assert_int_equal (fq_sync_one (p), 0);
        left = fq_freeing (p, NULL);
        assert_true (left < prev);
        assert_true (atomic_load (&fq->fq_last_blocks) <= 128 + 4);
        if (++txgs == 6)
          /* The space comes back as it goes. */
          assert_true (fq_alloc_now (p) + 4 * MiB <= full);
        prev = left;
        assert_true (txgs < 100 + size / BS / 128);
      }
      assert_true (txgs >= 10);
      bounded_ms = fq_max_sync_ms (p, txg0 + 1);
      assert_true (atomic_load (&fq->fq_max_blocks) <= 128 + 4);
      assert_true (tl_log_has ("freed: "));
    }
    assert_int_equal (fq_freeing (p, &nds), 0);
    assert_int_equal (nds, 0);
    fq_assert_near (fq_allocated (p), base, "after the background free");
    tl_ds_check (p, "keep", 0, 4 * MiB, 0x11);
    if (!one_go)
      print_message ("  %" PRIu64 " MiB volume: freed over %u txgs after the "
                     "destroy's (at most %" PRIu64 " blocks each)\n",
                     (uint64_t) (size / MiB), txgs + 2,
                     atomic_load (&fq->fq_max_blocks));
    /* The time a sync spent freeing, at most. */
    if (one_go)
      one_go_free_ms = atomic_load (&fq->fq_max_ns) / 1e6;
    else
      bounded_free_ms = atomic_load (&fq->fq_max_ns) / 1e6;
    assert_int_equal (zvol_pool_close (p), 0);
    tl_check_clean (path);
  }
  print_message ("  longest sync after the destroy: %.2f ms bounded, %.2f ms "
                 "in one go; of it freeing: %.2f ms bounded, %.2f ms in one "
                 "go\n", bounded_ms, one_go_ms, bounded_free_ms,
                 one_go_free_ms);
  zv_tunable_reset_all ();
}

/*
 * A snapshot holding 16 MiB of its own: its destroy splits the dead
 * lists at once (the volume's figures are exact when it returns) and the
 * 16 MiB come back over several syncs of at most free_max_blocks.
 */
static void
test_snapshot_background (void **state)
{
  char path[512];
  zvol_pool_t *p = fq_new_pool (path, sizeof path, "snap");
  uint64_t base, left;

  (void) state;
  fq_make_volume (p, "v", 16 * MiB, 0x31);
  base = fq_allocated (p);
  assert_int_equal (zvol_snapshot_create (p, "v@s"), 0);
  for (uint64_t off = 0; off < 16 * MiB; off += 4 * MiB)
    tl_ds_write (p, "v", off, 4 * MiB, 0x32);
  assert_true (fq_allocated (p) >= base + 16 * MiB);
  assert_int_equal (tl_ds_info (p, "v@s").vi_used, 16 * MiB);
  assert_int_equal (tl_ds_info (p, "v").vi_usedbysnapshots, 16 * MiB);
  fq_set ("free_max_blocks", "64");
  assert_int_equal (zvol_volume_destroy (p, "v@s"), 0);
  assert_false (tl_ds_find (p, "v@s", NULL));
  /* The figures are the split's, exact at once. */
  assert_int_equal (tl_ds_info (p, "v").vi_usedbysnapshots, 0);
  assert_int_equal (tl_ds_info (p, "v").vi_written, 16 * MiB);
  left = fq_freeing (p, NULL);
  assert_true (left >= 16 * MiB - 2 * 64 * BS);
  assert_true (fq_drain (p, left, 64) >= 8);
  fq_assert_near (fq_allocated (p), base, "after the snapshot's free");
  tl_ds_check (p, "v", 0, 16 * MiB, 0x32);
  tl_ds_check (p, "keep", 0, 4 * MiB, 0x11);
  assert_int_equal (zvol_pool_close (p), 0);
  tl_check_clean (path);
  p = tl_import (path, true);
  tl_ds_check (p, "v", 0, 16 * MiB, 0x32);
  assert_int_equal (zvol_pool_close (p), 0);
  zv_tunable_reset_all ();
}

/*
 * A rollback of a volume that wrote 16 MiB since its snapshot: the
 * rollback's txg only switches the roots (the data read back is the
 * snapshot's at once, and the 16 MiB are still allocated); the syncs
 * after it free them, a bounded share each, through an entry of its own
 * in the directory (the volume keeps its slot); an import finds it all
 * clean.
 */
static void
test_rollback_background (void **state)
{
  char path[512];
  zvol_pool_t *p = fq_new_pool (path, sizeof path, "rollback");
  uint64_t base, full, left, nds;

  (void) state;
  fq_make_volume (p, "v", 16 * MiB, 0x41);
  assert_int_equal (zvol_snapshot_create (p, "v@s"), 0);
  base = fq_allocated (p);
  for (uint64_t off = 0; off < 16 * MiB; off += 4 * MiB)
    tl_ds_write (p, "v", off, 4 * MiB, 0x42);
  full = fq_allocated (p);
  assert_true (full >= base + 16 * MiB);
  fq_set ("free_max_blocks", "64");
  tl_log_reset (false);
  assert_int_equal (zvol_snapshot_rollback (p, "v@s", false), 0);
  tl_ds_check (p, "v", 0, 16 * MiB, 0x41);
  assert_int_equal (tl_ds_info (p, "v").vi_written, 0);
  /* The rollback waited for T+2: T+1 and T+2 freed 64 blocks each at
   * most, so nearly all of it is still queued and allocated. */
  left = fq_freeing (p, &nds);
  assert_int_equal (nds, 1);
  assert_true (left >= 16 * MiB - 2 * 66 * BS);
  assert_true (fq_alloc_now (p) + 3 * 66 * BS >= full);
  assert_true (tl_log_has ("rolled back to 's'"));
  assert_true (tl_log_has ("freed in the background"));
  assert_true (fq_drain (p, left, 64 + 2) >= 8);
  fq_assert_near (fq_allocated (p), base, "after the rollback's free");
  tl_ds_check (p, "v", 0, 16 * MiB, 0x41);
  tl_ds_check (p, "keep", 0, 4 * MiB, 0x11);
  assert_int_equal (zvol_pool_close (p), 0);
  tl_check_clean (path);
  p = tl_import (path, true);
  tl_ds_check (p, "v", 0, 16 * MiB, 0x41);
  assert_true (tl_ds_find (p, "v@s", NULL));
  assert_int_equal (zvol_pool_close (p), 0);
  zv_tunable_reset_all ();
}

/*
 * Export in the middle of a free: the checker counts what the queue
 * holds as in use; an import (the default, and the full walk) resumes
 * where the last sync left it; zvol_pool_wait_freeing finishes it.  A
 * read-only import shows what is left and cannot wait for it.
 */
static void
test_export_resume (void **state)
{
  char path[512];
  zvol_pool_t *p = fq_new_pool (path, sizeof path, "resume");
  uint64_t base, left, left2;

  (void) state;
  base = fq_allocated (p);
  fq_make_volume (p, "big", 24 * MiB, 0x41);
  fq_make_volume (p, "v", 8 * MiB, 0x42);
  assert_int_equal (zvol_snapshot_create (p, "v@s"), 0);
  tl_ds_write (p, "v", 0, 8 * MiB, 0x43);
  fq_set ("free_max_blocks", "64");
  assert_int_equal (zvol_volume_destroy (p, "big"), 0);
  assert_int_equal (zvol_volume_destroy (p, "v@s"), 0);
  assert_int_equal (fq_sync_one (p), 0);
  left = fq_freeing (p, NULL);
  assert_true (left > 8 * MiB);
  assert_int_equal (zvol_pool_close (p), 0);
  tl_check_clean (path);
  for (int round = 0; round < 2; round++) {
    zvol_pool_config_t pc;
    const char *dev = path;
    uint64_t nds;

    /* Read-only: shown, not freed. */
    tl_pool_cfg (&pc, &dev, 1, 0, false);
    pc.pc_readonly = true;
    assert_int_equal (zvol_pool_open (&pc, &p), 0);
    assert_int_equal (fq_freeing (p, &nds), left);
    assert_int_equal (nds, 2);
    tl_log_reset (true);
    assert_int_equal (zvol_pool_wait_freeing (p, NULL, NULL, NULL), -EROFS);
    tl_log_reset (false);
    assert_int_equal (zvol_pool_close (p), 0);

    p = tl_import (path, round == 1);
    assert_int_equal (fq_freeing (p, NULL), left);
    assert_int_equal (fq_sync_one (p), 0);
    assert_int_equal (fq_sync_one (p), 0);
    left2 = fq_freeing (p, NULL);
    assert_true (left2 < left);
    tl_ds_check (p, "v", 0, 8 * MiB, 0x43);
    assert_int_equal (zvol_pool_close (p), 0);
    tl_check_clean (path);
    left = left2;
  }
  p = tl_import (path, false);
  assert_int_equal (zvol_pool_wait_freeing (p, NULL, NULL, NULL), 0);
  assert_int_equal (fq_freeing (p, NULL), 0);
  /* keep, and v: its 8 MiB, its four indirect blocks (two copies) and
   * its log ring ('big' and its ring are gone). */
  fq_assert_near (fq_alloc_now (p), base + 8 * MiB + 8 * ZV_INDIRECT_SIZE
                  + zv_pool_default_ring (p), "once the frees are done");
  tl_ds_check (p, "keep", 0, 4 * MiB, 0x11);
  tl_ds_check (p, "v", 0, 8 * MiB, 0x43);
  assert_int_equal (zvol_pool_close (p), 0);
  tl_check_clean (path);
  zv_tunable_reset_all ();
}

/*
 * The name of a volume being freed is free at once: a new volume of that
 * name is made, written and served while the old one's blocks are still
 * being freed, across an export; destroying the new one queues a second
 * free; both finish.
 */
static void
test_recreate_same_name (void **state)
{
  char path[512];
  zvol_pool_t *p = fq_new_pool (path, sizeof path, "rename");
  uint64_t base;

  (void) state;
  base = fq_allocated (p);
  fq_make_volume (p, "big", 16 * MiB, 0x51);
  fq_set ("free_max_blocks", "32");
  assert_int_equal (zvol_volume_destroy (p, "big"), 0);
  fq_make_volume (p, "big", 4 * MiB, 0x52);
  assert_true (tl_ds_find (p, "big", NULL));
  assert_true (fq_freeing (p, NULL) > 8 * MiB);
  tl_ds_check (p, "big", 0, 4 * MiB, 0x52);
  assert_int_equal (zvol_pool_close (p), 0);
  tl_check_clean (path);
  p = tl_import (path, false);
  assert_true (fq_freeing (p, NULL) > 0);
  tl_ds_check (p, "big", 0, 4 * MiB, 0x52);
  assert_int_equal (tl_ds_info (p, "big").vi_volsize, 4 * MiB);
  assert_int_equal (zvol_volume_destroy (p, "big"), 0);
  {
    uint64_t nds;
    (void) fq_freeing (p, &nds);
    assert_int_equal (nds, 2);
  }
  assert_int_equal (zvol_pool_wait_freeing (p, NULL, NULL, NULL), 0);
  fq_assert_near (fq_alloc_now (p), base, "both frees done");
  tl_ds_check (p, "keep", 0, 4 * MiB, 0x11);
  assert_int_equal (zvol_pool_close (p), 0);
  tl_check_clean (path);
  zv_tunable_reset_all ();
}

/*
 * With the txg engine's thread: nobody waits, yet the free runs to its
 * end (each sync asks for the next while work is left), while another
 * volume is written; its writes all land, and none waits long.
 */
typedef struct fq_writer {
  zvol_t *fw_zv;
  _Atomic bool fw_stop;
  uint64_t fw_writes;
  double fw_max_ms;
} fq_writer_t;

static double
fq_now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void *
fq_writer_fn (void *arg)
{
  fq_writer_t *w = arg;
  uint8_t buf[65536];

  while (!atomic_load (&w->fw_stop)) {
    uint64_t off = (w->fw_writes * sizeof buf) % (4 * MiB);
    double t0 = fq_now_ms ();
    tl_pat_fill (buf, off, sizeof buf, 0x60 + w->fw_writes / 64);
    assert_int_equal (zvol_write (w->fw_zv, buf, off, sizeof buf, 0), 0);
    if (w->fw_writes % 16 == 15)
      assert_int_equal (zvol_flush (w->fw_zv), 0);
    w->fw_max_ms = ZV_MAX (w->fw_max_ms, fq_now_ms () - t0);
    w->fw_writes++;
  }
  return NULL;
}

static void
test_writes_during_free (void **state)
{
  char path[512];
  zvol_pool_t *p = fq_new_pool (path, sizeof path, "busy");
  fq_writer_t w = { 0 };
  pthread_t th;
  uint64_t base, last_gen;
  double t0;

  (void) state;
  base = fq_allocated (p);
  fq_make_volume (p, "big", 32 * MiB, 0x61);
  assert_int_equal (zvol_pool_start (p), 0);
  fq_set ("free_max_blocks", "64");
  assert_int_equal (zvol_open (p, "keep", NULL, &w.fw_zv), 0);
  assert_int_equal (pthread_create (&th, NULL, fq_writer_fn, &w), 0);
  assert_int_equal (zvol_volume_destroy (p, "big"), 0);
  t0 = fq_now_ms ();
  while (fq_freeing (p, NULL) > 0) {
    assert_true (fq_now_ms () - t0 < 120000);
    struct timespec ts = { 0, 10 * 1000 * 1000 };
    nanosleep (&ts, NULL);
  }
  atomic_store (&w.fw_stop, true);
  assert_int_equal (pthread_join (th, NULL), 0);
  last_gen = (w.fw_writes - 1) / 64;
  print_message ("  %" PRIu64 " writes of 64 KiB to another volume during "
                 "the free (%.0f ms), the slowest %.1f ms\n", w.fw_writes,
                 fq_now_ms () - t0, w.fw_max_ms);
  assert_true (w.fw_writes > 0);
  /* The last 64 writes (4 MiB) are what the volume holds now. */
  {
    uint8_t *b = malloc (4 * MiB);
    assert_non_null (b);
    assert_int_equal (zvol_read (w.fw_zv, b, 0, 4 * MiB), 0);
    for (uint64_t j = w.fw_writes - ZV_MIN (w.fw_writes, 64);
         j < w.fw_writes; j++) {
      uint64_t off = (j * 65536) % (4 * MiB);
      assert_true (tl_pat_check (b + off, off, 65536, 0x60 + j / 64) < 0);
    }
    free (b);
  }
  (void) last_gen;
  assert_int_equal (zvol_close (w.fw_zv), 0);
  /* An idle pool: the free still runs to its end by itself. */
  fq_make_volume (p, "big2", 8 * MiB, 0x62);
  assert_int_equal (zvol_volume_destroy (p, "big2"), 0);
  t0 = fq_now_ms ();
  while (fq_freeing (p, NULL) > 0) {
    assert_true (fq_now_ms () - t0 < 60000);
    struct timespec ts = { 0, 10 * 1000 * 1000 };
    nanosleep (&ts, NULL);
  }
  fq_assert_near (fq_allocated (p), base, "after the frees");
  assert_int_equal (zvol_pool_close (p), 0);
  tl_check_clean (path);
  zv_tunable_reset_all ();
}

/*
 * Power cuts during a background free: a pool whose queue holds a
 * volume's tree and a snapshot's dead list (each freed 48 blocks a
 * sync), cut after n device writes of the free, n from 1 on.  Each time
 * the checker finds the pool clean (what the queue holds is in use,
 * nothing leaked, nothing doubly allocated), the import resumes with no
 * more left than before the cut (the cursor of the last synced txg: some
 * cuts land after progress), finishes, and the pool is clean again with
 * every other volume's data intact and the space back.
 */
static void
fq_copy (const char *from, const char *to)
{
  char cmd[1200];

  snprintf (cmd, sizeof cmd, "cp --sparse=always '%s' '%s'", from, to);
  assert_int_equal (system (cmd), 0);
}

static void
test_powercut (void **state)
{
  uint64_t seed = tl_seed ("freeq powercut");
  char path[512], work[512], ref[512];
  zvol_pool_t *p = fq_new_pool (path, sizeof path, "cut-base");
  uint64_t left0, want;
  unsigned progressed = 0, untouched = 0, finished = 0;

  (void) state;
  tl_path (work, sizeof work, "cut-work");
  tl_path (ref, sizeof ref, "cut-ref");
  fq_make_volume (p, "big", 16 * MiB, 0x71);
  fq_make_volume (p, "v", 8 * MiB, 0x72);
  assert_int_equal (zvol_snapshot_create (p, "v@s"), 0);
  tl_ds_write (p, "v", 0, 8 * MiB, 0x73);
  fq_make_volume (p, "r", 4 * MiB, 0x74);
  assert_int_equal (zvol_snapshot_create (p, "r@s"), 0);
  tl_ds_write (p, "r", 0, 4 * MiB, 0x75);
  fq_set ("free_max_blocks", "48");
  assert_int_equal (zvol_volume_destroy (p, "big"), 0);
  assert_int_equal (zvol_volume_destroy (p, "v@s"), 0);
  assert_int_equal (zvol_snapshot_rollback (p, "r@s", false), 0);
  left0 = fq_freeing (p, NULL);
  assert_true (left0 > 20 * MiB);
  assert_int_equal (zvol_pool_close (p), 0);
  /* What the pool holds once it is all done, without a cut. */
  fq_copy (path, ref);
  p = tl_import (ref, false);
  assert_int_equal (zvol_pool_wait_freeing (p, NULL, NULL, NULL), 0);
  want = fq_alloc_now (p);
  assert_int_equal (zvol_pool_close (p), 0);

  for (uint64_t n = 1; n <= 400; n += 7) {
    pc_t *pc = pc_new (seed ^ n, PC_RANDOM);
    bool full = n % 2 == 0;
    uint64_t left;
    int r;

    fq_copy (path, work);
    pc_watch (pc, true);
    p = tl_import (work, full);
    pc_cut_after_writes (pc, n);
    tl_log_reset (true);
    r = zvol_pool_wait_freeing (p, NULL, NULL, NULL);
    (void) zvol_pool_close (p);
    tl_log_reset (false);
    pc_settle (pc);
    pc_watch (pc, false);
    pc_free (pc);

    tl_check_clean (work);
    p = tl_import (work, !full);
    left = fq_freeing (p, NULL);
    if (left > left0)
      fail_msg ("cut after %" PRIu64 " writes: %" PRIu64 " bytes to free "
                "after it, %" PRIu64 " before", n, left, left0);
    if (r == 0 && left == 0)
      finished++;
    else if (left < left0)
      progressed++;
    else
      untouched++;
    assert_int_equal (zvol_pool_wait_freeing (p, NULL, NULL, NULL), 0);
    tl_ds_check (p, "keep", 0, 4 * MiB, 0x11);
    tl_ds_check (p, "v", 0, 8 * MiB, 0x73);
    tl_ds_check (p, "r", 0, 4 * MiB, 0x74);
    assert_false (tl_ds_find (p, "big", NULL) || tl_ds_find (p, "v@s", NULL));
    char what[64];
    snprintf (what, sizeof what, "cut after %" PRIu64 " writes", n);
    fq_assert_near (fq_alloc_now (p), want, what);
    assert_int_equal (zvol_pool_close (p), 0);
    tl_check_clean (work);
    if (r == 0)
      break;                    /* the free ended before the cut */
  }
  print_message ("  cuts: %u before any progress, %u in the middle, %u after "
                 "the end\n", untouched, progressed, finished);
  assert_true (progressed >= 5);
  zv_tunable_reset_all ();
}

/* ---- the queue's records as hostile data ---- */

/* A record of a queued volume tree, as the sync writes it. */
static void
fq_tree_rec (zv_dsrec_phys_t *rec)
{
  uint64_t nb = 1024;

  memset (rec, 0, sizeof *rec);
  rec->dr_magic = ZV_DSREC_MAGIC;
  rec->dr_version = ZV_DSREC_VERSION;
  rec->dr_kind = ZV_DS_KIND_FREE;
  rec->dr_id = 7;
  rec->dr_prev_snap_txg = 5;
  rec->dr_creation_txg = 20;
  rec->dr_volsize = nb * BS;
  rec->dr_volblocksize = BS;
  rec->dr_used = 8 * MiB;
  rec->dr_free_total = 16 * MiB;
  rec->dr_free_cursor = 100;
  snprintf (rec->dr_name, sizeof rec->dr_name, "big");
  rec->dr_volume.dn_type = ZV_BT_VOLDATA;
  rec->dr_volume.dn_datablksz = BS;
  rec->dr_volume.dn_nblocks = nb;
  rec->dr_volume.dn_nlevels = 3;
  rec->dr_volume.dn_size = nb * BS;
  rec->dr_volume.dn_root = (zv_blkptr_t) {
    .bp_dva = { ZV_DVA_MAKE (0, 1 << 20), ZV_DVA_MAKE (0, 2 << 20) },
    .bp_psize = ZV_INDIRECT_SIZE, .bp_lsize = ZV_INDIRECT_SIZE,
    .bp_birth = 19, .bp_type = ZV_BT_INDIRECT, .bp_level = 2,
    .bp_ncopies = 2, .bp_fill = 1000,
  };
}

static int
fq_rec_check (zv_dsrec_phys_t *rec)
{
  memset (&rec->dr_cksum, 0, sizeof rec->dr_cksum);
  zv_cksum_compute (rec, sizeof *rec, zv_dsrec_seed (TL_GUID, 3),
                    &rec->dr_cksum);
  return zv_dsdir_rec_check (rec, 3, TL_GUID, 30, 10);
}

static void
test_hostile_record (void **state)
{
  zv_dsrec_phys_t rec;

  (void) state;
  fq_tree_rec (&rec);
  tl_log_reset (true);
  assert_int_equal (fq_rec_check (&rec), 0);
  for (int k = 0; k < 15; k++) {
    fq_tree_rec (&rec);
    switch (k) {
    case 0: rec.dr_free_cursor = 1024; break;           /* past the end */
    case 1: rec.dr_prev_snap_txg = 20; break;           /* line not before */
    case 2: rec.dr_used = rec.dr_free_total + 1; break;
    case 3: rec.dr_flags = 1; break;
    case 4: rec.dr_volume.dn_root.bp_birth = 5; break;  /* not its own */
    case 5: memset (&rec.dr_volume.dn_root, 0, sizeof (zv_blkptr_t)); break;
    case 6: rec.dr_volume.dn_nblocks = 1023; break;
    case 7: rec.dr_deadlist.dn_type = ZV_BT_DEADLIST; break;   /* both */
    case 8: rec.dr_volume.dn_root.bp_birth = 21; break;  /* after destroy */
    case 9: rec.dr_id = 10; break;                      /* next id */
    case 10: rec.dr_creation_txg = 31; break;           /* after objset */
    case 11: rec.dr_parent_id = 3; break;               /* on a tree */
    case 12: rec.dr_free_total = 1024 * BS + 1; break;
    case 13: rec.dr_reservation = 1; break;
    default: rec.dr_name[0] = '-'; break;
    }
    if (fq_rec_check (&rec) != -EIO)
      fail_msg ("forged background-free record %d was not refused", k);
  }
  assert_true (tl_log_has ("a background free"));
  /* A dead list's: a snapshot's, with its volume's id. */
  fq_tree_rec (&rec);
  memset (&rec.dr_volume, 0, sizeof rec.dr_volume);
  rec.dr_parent_id = 2;
  rec.dr_deadlist_bytes = 16 * MiB;
  rec.dr_deadlist.dn_type = ZV_BT_DEADLIST;
  rec.dr_deadlist.dn_datablksz = ZV_DEADLIST_BLKSZ;
  rec.dr_deadlist.dn_nblocks = 255;
  rec.dr_deadlist.dn_nlevels = 2;
  rec.dr_deadlist.dn_size = 2000 * sizeof (zv_deadlist_ent_t);
  rec.dr_deadlist.dn_txg = 20;
  assert_int_equal (fq_rec_check (&rec), 0);
  rec.dr_free_cursor = 2000;
  assert_int_equal (fq_rec_check (&rec), -EIO);
  rec.dr_free_cursor = 100;
  rec.dr_parent_id = 0;
  assert_int_equal (fq_rec_check (&rec), -EIO);
  rec.dr_parent_id = 2;
  rec.dr_deadlist.dn_txg = 21;
  assert_int_equal (fq_rec_check (&rec), -EIO);
  /* The new fields are zero on the other kinds. */
  fq_tree_rec (&rec);
  rec.dr_kind = ZV_DS_KIND_VOLUME;
  assert_int_equal (fq_rec_check (&rec), -EIO);
  tl_log_reset (false);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_volume_background),
    tl_test (test_snapshot_background),
    tl_test (test_rollback_background),
    tl_test (test_export_resume),
    tl_test (test_recreate_same_name),
    tl_test (test_writes_during_free),
    tl_test (test_powercut),
    tl_test (test_hostile_record),
  };

  return tl_main (tests, "freeq", NULL);
}
