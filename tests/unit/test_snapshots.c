/*
 * test_snapshots.c: snapshots, clones and rollback (core/snap.c, the
 * dead lists of core/deadlist.c) through the public API of core/zvol.h:
 * a snapshot reads what the volume held when it was taken, while the
 * volume moves on; the birth rule keeps what a snapshot holds and frees
 * the rest; destroying a snapshot frees exactly what only it held (the
 * space accounting checked byte for byte against the expected unique
 * data, and the pool's allocation back where it was); rollback and
 * clones; a snapshot taken while a writer runs holds every acknowledged
 * write and none issued after it returned; every step survives export,
 * import with the full walk (each block owned once) and a power cut.
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
#include "pool.h"
#include "alloc.h"
#include "txg.h"
#include "powercut.h"

#define DEV_SIZE (256 * MiB)
#define VS (8 * MiB)
#define BS 16384u

static zvol_pool_t *
st_new_pool (char *path, size_t len, const char *name)
{
  const char *dev = tl_path (path, len, name);
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  zvol_volume_params_t vp = { .vp_size = VS, .vp_blocksize = BS };

  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, true);
  pc.pc_name = "tank";
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  assert_int_equal (zvol_volume_create (p, "v", &vp), 0);
  return p;
}

/* The checker finds nothing, and walked a tree at least. */
static void
st_check_pool (const char *dev)
{
  assert_true (tl_check_clean (dev).cr_trees >= 1);
}

static zvol_pool_t *
st_reimport (zvol_pool_t *p, const char *dev)
{
  assert_int_equal (zvol_pool_close (p), 0);
  st_check_pool (dev);
  return tl_import (dev, true);
}

static bool
st_is_zero (const uint8_t *b, size_t len)
{
  for (size_t i = 0; i < len; i++)
    if (b[i] != 0)
      return false;
  return true;
}

static void
st_check_zero (zvol_pool_t *p, const char *name, uint64_t off, uint32_t len)
{
  zvol_t *zv = tl_ds_open (p, name);
  uint8_t *b = malloc (len);

  assert_non_null (b);
  assert_int_equal (zvol_read (zv, b, off, len), 0);
  assert_true (st_is_zero (b, len));
  free (b);
  assert_int_equal (zvol_close (zv), 0);
}

/* Bytes allocated in the pool, once every deferred free is applied
 * (three txgs, each forced: a sync with nothing dirty may not run). */
static uint64_t
st_allocated (zvol_pool_t *p)
{
  assert_int_equal (zv_pool_sync (p), 0);
  for (int i = 0; i < 3; i++) {
    zv_txg_hold_t h;
    assert_int_equal (zv_txg_hold (zv_pool_txg (p), 0, &h), 0);
    zv_txg_rele (zv_pool_txg (p), &h);
    assert_int_equal (zv_txg_wait_synced (zv_pool_txg (p), h.th_txg), 0);
  }
  return tl_alloc_space (zv_pool_spa (p)->spa_alloc).as_allocated;
}

/* Allocation must come back to where it was: what a test frees is data
 * of whole blocks; the metadata around it (indirect blocks, dead lists,
 * the directory) may differ by a few blocks. */
static void
st_assert_near (uint64_t got, uint64_t want, const char *what)
{
  uint64_t d = got > want ? got - want : want - got;

  if (d > 64 * 1024)
    fail_msg ("%s: %" PRIu64 " bytes allocated, expected about %" PRIu64,
              what, got, want);
}

/* A snapshot reads as the volume was; writes to it are EROFS; the
 * figures; destroy frees what only it held. */
static void
test_snapshot_basic (void **state)
{
  char path[512];
  zvol_pool_t *p = st_new_pool (path, sizeof path, "basic");
  zvol_t *zv, *snap;
  uint8_t buf[4096];
  uint64_t before, held;

  (void) state;
  tl_ds_write (p, "v", 0, 4 * MiB, 0xa);
  before = st_allocated (p);
  assert_int_equal (zvol_snapshot_create (p, "v@s1"), 0);
  tl_log_reset (true);
  assert_int_equal (zvol_snapshot_create (p, "v@s1"), -EEXIST);
  assert_int_equal (zvol_snapshot_create (p, "nope@s1"), -ENOENT);
  assert_int_equal (zvol_snapshot_create (p, "v@-bad"), -EINVAL);
  assert_int_equal (zvol_snapshot_create (p, "v"), -EINVAL);
  tl_log_reset (false);
  tl_ds_write (p, "v", 0, 2 * MiB, 0xb);
  /* The overwritten 2 MiB are the snapshot's still: not freed. */
  held = st_allocated (p);
  assert_true (held >= before + 2 * MiB);

  snap = tl_ds_open (p, "v@s1");
  assert_true (zvol_is_readonly (snap));
  assert_string_equal (zvol_name (snap), "v@s1");
  tl_vol_check (snap, 0, 4 * MiB, 0xa);
  memset (buf, 1, sizeof buf);
  tl_log_reset (true);
  assert_int_equal (zvol_write (snap, buf, 0, sizeof buf, 0), -EROFS);
  assert_true (tl_log_has ("snapshot"));
  /* Open: not destroyed. */
  assert_int_equal (zvol_volume_destroy (p, "v@s1"), -EBUSY);
  /* A volume with snapshots is not destroyed either. */
  assert_int_equal (zvol_volume_destroy (p, "v"), -EBUSY);
  tl_log_reset (false);
  /* Opened twice at once: read-only opens do not exclude each other. */
  zv = tl_ds_open (p, "v@s1");
  assert_int_equal (zvol_close (zv), 0);
  assert_int_equal (zvol_close (snap), 0);
  tl_ds_check (p, "v", 0, 2 * MiB, 0xb);
  tl_ds_check (p, "v", 2 * MiB, 2 * MiB, 0xa);

  zvol_volume_info_t s = tl_ds_info (p, "v@s1"), v = tl_ds_info (p, "v");
  assert_int_equal (s.vi_kind, ZVOL_KIND_SNAPSHOT);
  assert_int_equal (s.vi_referenced, 4 * MiB);
  assert_int_equal (s.vi_used, 2 * MiB);
  assert_int_equal (s.vi_written, 4 * MiB);
  assert_int_equal (v.vi_referenced, 4 * MiB);
  assert_int_equal (v.vi_written, 2 * MiB);
  assert_int_equal (v.vi_usedbysnapshots, 2 * MiB);
  assert_int_equal (v.vi_used, 4 * MiB);
  /* The plain volume list has volumes only. */
  assert_int_equal (zvol_volume_list (p, NULL, 0), 1);

  p = st_reimport (p, path);
  tl_ds_check (p, "v@s1", 0, 4 * MiB, 0xa);
  tl_ds_check (p, "v", 0, 2 * MiB, 0xb);
  s = tl_ds_info (p, "v@s1");
  assert_int_equal (s.vi_used, 2 * MiB);
  /* More overwrites after import append to the list read back. */
  tl_ds_write (p, "v", 2 * MiB, MiB, 0xc);
  assert_int_equal (tl_ds_info (p, "v@s1").vi_used, 3 * MiB);
  p = st_reimport (p, path);
  assert_int_equal (tl_ds_info (p, "v@s1").vi_used, 3 * MiB);
  assert_int_equal (zvol_volume_destroy (p, "v@s1"), 0);
  assert_false (tl_ds_find (p, "v@s1", NULL));
  st_assert_near (st_allocated (p), before, "after the destroy");
  tl_ds_check (p, "v", 0, 2 * MiB, 0xb);
  tl_ds_check (p, "v", 2 * MiB, MiB, 0xc);
  tl_ds_check (p, "v", 3 * MiB, MiB, 0xa);
  assert_int_equal (tl_ds_info (p, "v").vi_written, 4 * MiB);
  assert_int_equal (tl_ds_info (p, "v").vi_usedbysnapshots, 0);
  p = st_reimport (p, path);
  assert_int_equal (zvol_volume_destroy (p, "v"), 0);
  assert_int_equal (zvol_pool_close (p), 0);
}

/* Three snapshots; destroying the middle one, then the others, frees
 * exactly what only each held, and the neighbours' unique bytes are
 * recounted. */
static void
test_snapshot_chain (void **state)
{
  char path[512];
  zvol_pool_t *p = st_new_pool (path, sizeof path, "chain");
  uint64_t base;

  (void) state;
  tl_ds_write (p, "v", 0, 4 * MiB, 0xa);                 /* A */
  base = st_allocated (p);
  assert_int_equal (zvol_snapshot_create (p, "v@s1"), 0);
  tl_ds_write (p, "v", 0, MiB, 0xb);                     /* B */
  assert_int_equal (zvol_snapshot_create (p, "v@s2"), 0);
  tl_ds_write (p, "v", 0, 2 * MiB, 0xc);                 /* C */
  assert_int_equal (zvol_snapshot_create (p, "v@s3"), 0);
  tl_ds_write (p, "v", 3 * MiB, MiB, 0xd);               /* D */
  (void) st_allocated (p);

  /* s1 alone holds A[0,1M); s2 alone B; s3 nothing alone. */
  assert_int_equal (tl_ds_info (p, "v@s1").vi_used, MiB);
  assert_int_equal (tl_ds_info (p, "v@s2").vi_used, MiB);
  assert_int_equal (tl_ds_info (p, "v@s3").vi_used, 0);
  assert_int_equal (tl_ds_info (p, "v@s2").vi_written, MiB);
  assert_int_equal (tl_ds_info (p, "v@s3").vi_written, 2 * MiB);
  assert_int_equal (tl_ds_info (p, "v").vi_written, MiB);
  /* Dead lists: B, A[1M,2M) and A[0,1M), A[3M,4M). */
  assert_int_equal (tl_ds_info (p, "v").vi_usedbysnapshots, 4 * MiB);
  {
    zvol_volume_info_t vi[8];
    assert_int_equal (zvol_dataset_list (p, ZVOL_LIST_SNAPSHOTS, vi, 8), 3);
    assert_string_equal (vi[0].vi_name, "v@s1");
    assert_string_equal (vi[2].vi_name, "v@s3");
  }

  p = st_reimport (p, path);
  assert_int_equal (zvol_volume_destroy (p, "v@s2"), 0);
  /* B went; A[1M,2M) is now s1's alone. */
  assert_int_equal (tl_ds_info (p, "v@s1").vi_used, 2 * MiB);
  assert_int_equal (tl_ds_info (p, "v@s3").vi_used, 0);
  assert_int_equal (tl_ds_info (p, "v@s3").vi_written, 2 * MiB);
  assert_int_equal (tl_ds_info (p, "v").vi_usedbysnapshots, 3 * MiB);
  tl_ds_check (p, "v@s1", 0, 4 * MiB, 0xa);
  tl_ds_check (p, "v@s3", 0, 2 * MiB, 0xc);
  tl_ds_check (p, "v@s3", 2 * MiB, 2 * MiB, 0xa);
  tl_ds_check (p, "v", 0, 2 * MiB, 0xc);
  tl_ds_check (p, "v", 2 * MiB, MiB, 0xa);
  tl_ds_check (p, "v", 3 * MiB, MiB, 0xd);

  p = st_reimport (p, path);
  assert_int_equal (zvol_volume_destroy (p, "v@s1"), 0);
  /* A[3M,4M), dropped by the volume, is now s3's alone. */
  assert_int_equal (tl_ds_info (p, "v@s3").vi_used, MiB);
  assert_int_equal (tl_ds_info (p, "v@s3").vi_written, 4 * MiB);
  assert_int_equal (tl_ds_info (p, "v").vi_usedbysnapshots, MiB);
  tl_ds_check (p, "v@s3", 0, 2 * MiB, 0xc);
  tl_ds_check (p, "v@s3", 2 * MiB, 2 * MiB, 0xa);
  p = st_reimport (p, path);
  assert_int_equal (zvol_volume_destroy (p, "v@s3"), 0);
  assert_int_equal (tl_ds_info (p, "v").vi_usedbysnapshots, 0);
  assert_int_equal (tl_ds_info (p, "v").vi_written, 4 * MiB);
  st_assert_near (st_allocated (p), base, "every snapshot destroyed");
  tl_ds_check (p, "v", 0, 2 * MiB, 0xc);
  tl_ds_check (p, "v", 3 * MiB, MiB, 0xd);
  p = st_reimport (p, path);
  assert_int_equal (zvol_pool_close (p), 0);
}

/* Rollback: refused while open and to an older snapshot unless asked;
 * gives back what was written since. */
static void
test_rollback (void **state)
{
  char path[512];
  zvol_pool_t *p = st_new_pool (path, sizeof path, "rollback");
  zvol_t *zv;
  uint64_t base;

  (void) state;
  tl_ds_write (p, "v", 0, 2 * MiB, 0xa);
  assert_int_equal (zvol_snapshot_create (p, "v@s1"), 0);
  base = st_allocated (p);
  tl_ds_write (p, "v", 0, MiB, 0xb);
  tl_ds_write (p, "v", 4 * MiB, 2 * MiB, 0xb);
  zv = tl_ds_open (p, "v");
  tl_log_reset (true);
  assert_int_equal (zvol_snapshot_rollback (p, "v@s1", false), -EBUSY);
  assert_true (tl_log_has ("open"));
  assert_int_equal (zvol_snapshot_rollback (p, "v@none", false), -ENOENT);
  tl_log_reset (false);
  assert_int_equal (zvol_close (zv), 0);
  assert_int_equal (zvol_snapshot_rollback (p, "v@s1", false), 0);
  tl_ds_check (p, "v", 0, 2 * MiB, 0xa);
  st_check_zero (p, "v", 4 * MiB, 2 * MiB);     /* a hole again */
  st_assert_near (st_allocated (p), base, "after the rollback");
  assert_int_equal (tl_ds_info (p, "v").vi_written, 0);
  assert_int_equal (tl_ds_info (p, "v@s1").vi_used, 0);
  /* Written after a rollback, imported: the volume goes on. */
  tl_ds_write (p, "v", MiB, MiB, 0xc);
  p = st_reimport (p, path);
  tl_ds_check (p, "v", 0, MiB, 0xa);
  tl_ds_check (p, "v", MiB, MiB, 0xc);
  tl_ds_check (p, "v@s1", 0, 2 * MiB, 0xa);

  /* To an older one: only saying so, which destroys the newer. */
  assert_int_equal (zvol_snapshot_create (p, "v@s2"), 0);
  tl_ds_write (p, "v", 0, MiB, 0xd);
  tl_log_reset (true);
  assert_int_equal (zvol_snapshot_rollback (p, "v@s1", false), -EEXIST);
  assert_true (tl_log_has ("newest"));
  tl_log_reset (false);
  assert_true (tl_ds_find (p, "v@s2", NULL));
  assert_int_equal (zvol_snapshot_rollback (p, "v@s1", true), 0);
  assert_false (tl_ds_find (p, "v@s2", NULL));
  tl_ds_check (p, "v", 0, 2 * MiB, 0xa);
  p = st_reimport (p, path);
  tl_ds_check (p, "v", 0, 2 * MiB, 0xa);
  assert_int_equal (zvol_pool_close (p), 0);
}

/* A clone shares its snapshot's blocks, goes its own way, and keeps its
 * snapshot from being destroyed. */
static void
test_clone (void **state)
{
  char path[512];
  zvol_pool_t *p = st_new_pool (path, sizeof path, "clone");
  uint64_t base, after_clone;

  (void) state;
  tl_ds_write (p, "v", 0, 4 * MiB, 0xa);
  assert_int_equal (zvol_snapshot_create (p, "v@s"), 0);
  /* What an empty volume costs (its log ring): a clone costs no more. */
  base = st_allocated (p);
  zvol_volume_params_t vp = { .vp_size = VS, .vp_blocksize = BS };
  assert_int_equal (zvol_volume_create (p, "empty", &vp), 0);
  uint64_t empty = st_allocated (p) - base;
  assert_int_equal (zvol_volume_destroy (p, "empty"), 0);
  base = st_allocated (p);
  assert_int_equal (zvol_volume_clone (p, "v@s", "c", NULL), 0);
  tl_log_reset (true);
  assert_int_equal (zvol_volume_clone (p, "v@s", "c", NULL), -EEXIST);
  assert_int_equal (zvol_volume_clone (p, "v@none", "d", NULL), -ENOENT);
  tl_log_reset (false);
  after_clone = st_allocated (p);
  /* O(1): the clone costs its log ring, not a copy. */
  st_assert_near (after_clone - base, empty, "a clone's cost");
  tl_ds_check (p, "c", 0, 4 * MiB, 0xa);
  assert_int_equal (tl_ds_info (p, "c").vi_referenced, 4 * MiB);
  assert_int_equal (tl_ds_info (p, "c").vi_written, 0);
  assert_string_equal (tl_ds_info (p, "c").vi_origin, "v@s");
  tl_ds_write (p, "c", 0, MiB, 0xc);
  tl_ds_write (p, "v", MiB, MiB, 0xb);
  tl_ds_check (p, "c", 0, MiB, 0xc);
  tl_ds_check (p, "c", MiB, 3 * MiB, 0xa);
  tl_ds_check (p, "v", 0, MiB, 0xa);
  tl_ds_check (p, "v", MiB, MiB, 0xb);
  tl_ds_check (p, "v@s", 0, 4 * MiB, 0xa);
  assert_int_equal (tl_ds_info (p, "c").vi_written, MiB);
  tl_log_reset (true);
  assert_int_equal (zvol_volume_destroy (p, "v@s"), -EBUSY);
  assert_true (tl_log_has ("clone"));
  tl_log_reset (false);
  p = st_reimport (p, path);
  tl_ds_check (p, "c", 0, MiB, 0xc);
  tl_ds_check (p, "c", MiB, 3 * MiB, 0xa);
  /* A snapshot of the clone, and the clone rolled back to it. */
  assert_int_equal (zvol_snapshot_create (p, "c@cs"), 0);
  tl_ds_write (p, "c", 2 * MiB, MiB, 0xe);
  assert_int_equal (zvol_snapshot_rollback (p, "c@cs", false), 0);
  tl_ds_check (p, "c", MiB, 3 * MiB, 0xa);
  assert_int_equal (zvol_volume_destroy (p, "c@cs"), 0);
  p = st_reimport (p, path);
  assert_int_equal (zvol_volume_destroy (p, "c"), 0);
  tl_ds_check (p, "v@s", 0, 4 * MiB, 0xa);
  assert_int_equal (zvol_volume_destroy (p, "v@s"), 0);
  tl_ds_check (p, "v", 0, MiB, 0xa);
  tl_ds_check (p, "v", MiB, MiB, 0xb);
  p = st_reimport (p, path);
  assert_int_equal (zvol_pool_close (p), 0);
}

/* A snapshot taken while a writer runs: every write acknowledged before
 * the call is in it, none issued after it returned.  The writer goes
 * over the volume three times (write j: block j % NB, pattern j / NB + 1),
 * so the later snapshots hold blocks born in the same txgs as the
 * earlier ones and the dead lists fill; destroying them in any order then
 * keeps what the others hold. */
#define ST_NB (VS / 4096)

typedef struct st_writer {
  zvol_t *sw_zv;
  _Atomic uint64_t sw_started, sw_acked;
  _Atomic bool sw_stop;
} st_writer_t;

static void *
st_writer_fn (void *arg)
{
  st_writer_t *w = arg;
  uint8_t buf[4096];

  for (uint64_t j = 0; j < 3 * ST_NB && !atomic_load (&w->sw_stop); j++) {
    uint64_t i = j % ST_NB;
    atomic_store (&w->sw_started, j + 1);
    tl_pat_fill (buf, i * sizeof buf, sizeof buf, j / ST_NB + 1);
    assert_int_equal (zvol_write (w->sw_zv, buf, i * sizeof buf, sizeof buf,
                                  0), 0);
    atomic_store (&w->sw_acked, j + 1);
  }
  return NULL;
}

/* Snapshot k (taken with acked[k] writes done, started[k] begun) holds,
 * in each block, the last write acknowledged before it or one that was
 * in flight. */
static void
st_check_live (zvol_pool_t *p, int k, const uint64_t *acked,
               const uint64_t *started, uint8_t *buf)
{
  char name[16];
  zvol_t *zv;

  snprintf (name, sizeof name, "v@t%d", k);
  zv = tl_ds_open (p, name);
  assert_int_equal (zvol_read (zv, buf, 0, VS), 0);
  for (uint64_t i = 0; i < ST_NB; i++) {
    const uint8_t *b = buf + i * 4096;
    bool ok = false;
    /* The writes to block i: j = i + m * NB. */
    int64_t lo = -1;
    for (uint64_t j = i; j < acked[k]; j += ST_NB)
      lo = (int64_t) j;
    if (lo < 0 && st_is_zero (b, 4096))
      ok = true;
    for (uint64_t j = lo < 0 ? i : (uint64_t) lo; j < started[k] && !ok;
         j += ST_NB)
      ok = tl_pat_check (b, i * 4096, 4096, j / ST_NB + 1) < 0;
    if (!ok)
      fail_msg ("%s: block %" PRIu64 " holds neither the last write "
                "acknowledged before the snapshot (%" PRIu64 " were) nor "
                "one in flight (%" PRIu64 " had begun)", name, i, acked[k],
                started[k]);
  }
  assert_int_equal (zvol_close (zv), 0);
}

static void
test_snapshot_while_writing (void **state)
{
  static const uint64_t at[] = { 1500, 3000, 4500, 5500 };
  enum { NS = sizeof at / sizeof at[0] };
  char path[512];
  zvol_pool_t *p = st_new_pool (path, sizeof path, "live");
  st_writer_t w = { 0 };
  pthread_t th;
  uint64_t acked[NS], started[NS];
  uint8_t *buf = malloc (VS);

  (void) state;
  assert_non_null (buf);
  w.sw_zv = tl_ds_open (p, "v");
  assert_int_equal (pthread_create (&th, NULL, st_writer_fn, &w), 0);
  for (int k = 0; k < NS; k++) {
    char name[16];
    while (atomic_load (&w.sw_acked) < at[k])
      ;
    snprintf (name, sizeof name, "v@t%d", k);
    acked[k] = atomic_load (&w.sw_acked);
    assert_int_equal (zvol_snapshot_create (p, name), 0);
    started[k] = atomic_load (&w.sw_started);
  }
  atomic_store (&w.sw_stop, true);
  assert_int_equal (pthread_join (th, NULL), 0);
  assert_int_equal (zvol_close (w.sw_zv), 0);
  p = st_reimport (p, path);
  for (int k = 0; k < NS; k++)
    st_check_live (p, k, acked, started, buf);
  /* Destroyed out of order, each step checked: the others keep their
   * blocks, born in the txgs of their neighbours' lines too. */
  static const int order[] = { 1, 0, 3 };
  for (size_t o = 0; o < sizeof order / sizeof order[0]; o++) {
    char name[16];
    snprintf (name, sizeof name, "v@t%d", order[o]);
    assert_int_equal (zvol_volume_destroy (p, name), 0);
    p = st_reimport (p, path);
    for (int k = 0; k < NS; k++) {
      bool gone = false;
      for (size_t q = 0; q <= o; q++)
        gone |= order[q] == k;
      if (!gone)
        st_check_live (p, k, acked, started, buf);
    }
  }
  free (buf);
  assert_int_equal (zvol_pool_close (p), 0);
}

/*
 * A power cut during a snapshot, its destroy, a rollback and a clone,
 * after n device writes: the import (full walk: every block owned once)
 * finds the operation whole or not begun, the data as it was, and, once
 * everything is destroyed again, no space lost.
 */
static void
test_powercut (void **state)
{
  uint64_t seed = tl_seed ("snapshots powercut");
  char path[512];
  zvol_pool_t *p = st_new_pool (path, sizeof path, "cut");
  uint64_t base;
  unsigned landed[4] = { 0 }, lost[4] = { 0 };

  (void) state;
  tl_ds_write (p, "v", 0, 2 * MiB, 0xa);
  base = st_allocated (p);
  assert_int_equal (zvol_pool_close (p), 0);
  for (uint64_t n = 1; n <= 66; n += 5) {
    for (int op = 0; op < 4; op++) {
      pc_t *pc = pc_new (seed ^ (n * 4 + (uint64_t) op), PC_RANDOM);
      int r;

      p = tl_import (path, true);
      /* The state each operation starts from. */
      if (op >= 1)
        assert_int_equal (zvol_snapshot_create (p, "v@s"), 0);
      if (op == 1 || op == 2)
        tl_ds_write (p, "v", 0, MiB, 0xb);
      assert_int_equal (zvol_pool_close (p), 0);
      /* The cut sees the devices opened after pc_watch. */
      pc_watch (pc, true);
      p = tl_import (path, true);
      pc_cut_after_writes (pc, n);
      tl_log_reset (true);
      switch (op) {
      case 0: r = zvol_snapshot_create (p, "v@s"); break;
      case 1: r = zvol_volume_destroy (p, "v@s"); break;
      case 2: r = zvol_snapshot_rollback (p, "v@s", false); break;
      default: r = zvol_volume_clone (p, "v@s", "c", NULL); break;
      }
      (void) zvol_pool_close (p);
      tl_log_reset (false);
      pc_settle (pc);
      pc_watch (pc, false);
      pc_free (pc);

      st_check_pool (path);
      p = tl_import (path, true);
      bool has_s = tl_ds_find (p, "v@s", NULL), has_c = tl_ds_find (p, "c", NULL);
      if (r == 0)
        assert_true (op == 1 ? !has_s : op == 3 ? has_c : has_s);
      if (has_s)
        tl_ds_check (p, "v@s", 0, 2 * MiB, 0xa);
      bool done = op == 0 ? has_s : op == 1 ? !has_s : op == 3 ? has_c
        : false;
      if (op == 2) {
        /* Whole or not at all: either all of B or none of it. */
        zvol_t *zv = tl_ds_open (p, "v");
        uint8_t *b = malloc (MiB);
        assert_non_null (b);
        assert_int_equal (zvol_read (zv, b, 0, MiB), 0);
        done = tl_pat_check (b, 0, MiB, 0xa) < 0;
        assert_true (done || tl_pat_check (b, 0, MiB, 0xb) < 0);
        free (b);
        assert_int_equal (zvol_close (zv), 0);
      }
      if (done)
        landed[op]++;
      else
        lost[op]++;
      if (has_c) {
        tl_ds_check (p, "c", 0, 2 * MiB, 0xa);
        assert_int_equal (zvol_volume_destroy (p, "c"), 0);
      }
      /* Back to the start: v holds A only, no snapshot. */
      if (tl_ds_find (p, "v@s", NULL)) {
        zvol_t *zv = tl_ds_open (p, "v");
        assert_int_equal (zvol_close (zv), 0);
        assert_int_equal (zvol_snapshot_rollback (p, "v@s", false), 0);
        assert_int_equal (zvol_volume_destroy (p, "v@s"), 0);
      }
      else
        tl_ds_write (p, "v", 0, MiB, 0xa);
      tl_ds_check (p, "v", 0, 2 * MiB, 0xa);
      char what[64];
      snprintf (what, sizeof what, "operation %d cut after %" PRIu64
                " writes (returned %d)", op, n, r);
      st_assert_near (st_allocated (p), base, what);
      assert_int_equal (zvol_pool_close (p), 0);
    }
  }
  /* The cuts fell both before and after each operation's txg. */
  for (int op = 0; op < 4; op++) {
    fprintf (stderr, "  operation %d: %u landed, %u lost to the cut\n", op,
             landed[op], lost[op]);
    assert_true (landed[op] > 0 && lost[op] > 0);
  }
}

/* ---- scale ---- */

static double
st_now_ms (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int
st_cmp_d (const void *a, const void *b)
{
  double x = *(const double *) a, y = *(const double *) b;

  return x < y ? -1 : x > y;
}

static double
st_median (const double *v, size_t n)
{
  double *c = malloc (n * sizeof *c);
  double m;

  assert_non_null (c);
  memcpy (c, v, n * sizeof *c);
  qsort (c, n, sizeof *c, st_cmp_d);
  m = c[n / 2];
  free (c);
  return m;
}

/*
 * 1,000 snapshots of one volume: the time to take one stays flat from
 * the first to the last (median of the last 100 against the first 100),
 * and listing them, opening one, importing the pool and destroying one
 * stay fast.  Each snapshot holds a block of its own.
 */
#define ST_NSNAP 1000

static void
test_scale (void **state)
{
  char path[512], name[32];
  zvol_pool_t *p = st_new_pool (path, sizeof path, "scale");
  double *t = calloc (ST_NSNAP, sizeof *t), t0, first, last;
  zvol_volume_info_t *vi = calloc (ST_NSNAP + 8, sizeof *vi);
  zvol_t *zv = tl_ds_open (p, "v");

  (void) state;
  assert_non_null (t);
  assert_non_null (vi);
  for (unsigned k = 0; k < ST_NSNAP; k++) {
    tl_vol_write (zv, NULL, (uint64_t) (k * 37 % (VS / BS)) * BS, BS, k + 1,
                  0);
    snprintf (name, sizeof name, "v@s%u", k);
    t0 = st_now_ms ();
    assert_int_equal (zvol_snapshot_create (p, name), 0);
    t[k] = st_now_ms () - t0;
  }
  assert_int_equal (zvol_close (zv), 0);
  first = st_median (t, 100);
  last = st_median (t + ST_NSNAP - 100, 100);
  print_message ("  snapshot create: median %.2f ms (first 100), %.2f ms "
                 "(last 100)\n", first, last);
  assert_true (last <= 3 * first + 2);

  t0 = st_now_ms ();
  assert_int_equal (zvol_dataset_list (p, ZVOL_LIST_SNAPSHOTS, vi,
                                       ST_NSNAP + 8), ST_NSNAP);
  double tl = st_now_ms () - t0;
  assert_string_equal (vi[0].vi_name, "v@s0");
  assert_string_equal (vi[ST_NSNAP - 1].vi_name, "v@s999");
  t0 = st_now_ms ();
  zv = tl_ds_open (p, "v@s500");
  double to = st_now_ms () - t0;
  assert_int_equal (zvol_close (zv), 0);
  print_message ("  list of %u: %.2f ms; open one: %.3f ms\n", ST_NSNAP, tl,
                 to);
  assert_true (tl < 500);
  assert_true (to < 50);

  assert_int_equal (zvol_pool_close (p), 0);
  t0 = st_now_ms ();
  p = tl_import (path, true);
  double ti = st_now_ms () - t0;
  assert_int_equal (zvol_dataset_list (p, ZVOL_LIST_SNAPSHOTS, vi,
                                       ST_NSNAP + 8), ST_NSNAP);
  /* s500's block (written just before it) is in it; the one written just
   * after it is not. */
  tl_ds_check (p, "v@s500", (uint64_t) (500 * 37 % (VS / BS)) * BS, BS, 501);
  t0 = st_now_ms ();
  assert_int_equal (zvol_volume_destroy (p, "v@s500"), 0);
  double td = st_now_ms () - t0;
  print_message ("  import (full walk): %.1f ms; destroy one: %.2f ms\n", ti,
                 td);
  t0 = st_now_ms ();
  assert_int_equal (zvol_volume_destroy (p, "v@s700"), 0);
  print_message ("  destroy another: %.2f ms\n", st_now_ms () - t0);
  assert_true (td < 2000);
  tl_ds_check (p, "v@s501", (uint64_t) (500 * 37 % (VS / BS)) * BS, BS, 501);
  tl_ds_check (p, "v@s499", (uint64_t) (499 * 37 % (VS / BS)) * BS, BS, 500);
  assert_int_equal (zvol_pool_close (p), 0);
  st_check_pool (path);
  free (vi);
  free (t);
}

/*
 * Destroying a snapshot costs what it frees, not the volume's size: the
 * same snapshot (one block of its own) destroyed on a volume holding 8
 * MiB and one holding 16 times that takes the same time (best of five;
 * most of it is the three txg syncs a destroy waits for).  The destroy
 * reads dead lists only, never a tree (snap.c).
 */
static void
test_destroy_cost (void **state)
{
  double td[2];

  (void) state;
  for (int big = 0; big < 2; big++) {
    char path[512];
    zvol_pool_t *p;
    const char *dev = tl_path (path, sizeof path, big ? "cost-big" : "cost");
    zvol_pool_config_t pc;
    zvol_volume_params_t vp = { .vp_size = 256 * MiB, .vp_blocksize = BS };
    uint64_t data = big ? 128 * MiB : 8 * MiB;
    double t0, best = 1e9;

    assert_int_equal (tl_sparse_file (dev, 512 * MiB), 0);
    tl_pool_cfg (&pc, &dev, 1, 0, true);
    pc.pc_name = "tank";
    assert_int_equal (zvol_pool_open (&pc, &p), 0);
    assert_int_equal (zvol_volume_create (p, "v", &vp), 0);
    for (uint64_t off = 0; off < data; off += 4 * MiB)
      tl_ds_write (p, "v", off, 4 * MiB, 0xa);
    for (int round = 0; round < 5; round++) {
      assert_int_equal (zvol_snapshot_create (p, "v@a"), 0);
      tl_ds_write (p, "v", 0, BS, round + 2);
      assert_int_equal (zvol_snapshot_create (p, "v@b"), 0);
      tl_ds_write (p, "v", 0, BS, round + 20);
      t0 = st_now_ms ();
      assert_int_equal (zvol_volume_destroy (p, "v@b"), 0);
      best = ZV_MIN (best, st_now_ms () - t0);
      assert_int_equal (zvol_volume_destroy (p, "v@a"), 0);
    }
    td[big] = best;
    assert_int_equal (zvol_pool_close (p), 0);
  }
  print_message ("  destroy (best of 5): %.2f ms with 8 MiB, %.2f ms with "
                 "128 MiB of data\n", td[0], td[1]);
  assert_true (td[1] < 3 * td[0] + 5);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_snapshot_basic),
    tl_test (test_snapshot_chain),
    tl_test (test_rollback),
    tl_test (test_clone),
    tl_test (test_snapshot_while_writing),
    tl_test (test_powercut),
    tl_test (test_scale),
    tl_test (test_destroy_cost),
  };

  return tl_main (tests, "snapshots", NULL);
}
