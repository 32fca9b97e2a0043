/*
 * test_volumes.c: several volumes in one pool (format 2's dataset
 * directory, core/dsdir.c) through the public API of core/zvol.h: a pool
 * made without a volume, volumes created with their own size, block size
 * and reservation, written and read back independently across export
 * and import and across a power cut (their logs replayed each on its
 * own), destroy giving the space back, names and sizes refused as
 * hostile input, the reservation refused with ENOSPC when the pool
 * cannot keep it, and a format-1 pool refused with a message.
 *
 * Devices are sparse files in a mkdtemp directory under /var/tmp.  Seeds
 * are printed; ZV_TEST_SEED replays a run.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "label.h"
#include "pool.h"
#include "powercut.h"

#define DEV_SIZE (128 * MiB)

/* A pool with no volume on a new sparse file. */
static zvol_pool_t *
vt_new_pool (char *path, size_t len, const char *name)
{
  const char *dev = tl_path (path, len, name);
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;

  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, true);
  pc.pc_name = "tank";
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  return p;
}

static zvol_pool_t *
vt_import (const char *dev)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  pc.pc_verify_full = true;   /* every tree walked, every owner checked */
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  return p;
}

static void
vt_create (zvol_pool_t *p, const char *name, uint64_t size, uint32_t bs,
           uint64_t resv)
{
  zvol_volume_params_t vp = {
    .vp_size = size, .vp_blocksize = bs, .vp_reservation = resv,
  };
  assert_int_equal (zvol_volume_create (p, name, &vp), 0);
}

static zvol_t *
vt_open (zvol_pool_t *p, const char *name)
{
  zvol_t *zv = NULL;

  assert_int_equal (zvol_open (p, name, NULL, &zv), 0);
  return zv;
}

/* The listing's entry for name (which must be there). */
static zvol_volume_info_t
vt_info (zvol_pool_t *p, const char *name)
{
  zvol_volume_info_t vi[16];
  size_t n = zvol_volume_list (p, vi, 16);

  assert_true (n <= 16);
  for (size_t i = 0; i < n; i++)
    if (strcmp (vi[i].vi_name, name) == 0)
      return vi[i];
  fail_msg ("volume %s is not listed", name);
  return vi[0];
}

static const struct vt_vol {
  const char *vv_name;
  uint64_t vv_size;
  uint32_t vv_bs;
  uint64_t vv_resv;
  uint64_t vv_seed;
} vt_vols[] = {
  { "alpha", 8 * MiB, 16384, 0, 0xa1 },
  { "beta.2", 4 * MiB + 512, 4096, 4 * MiB, 0xb2 },
  { "Gamma_3:x", 16 * MiB, 131072, 0, 0xc3 },
};
#define VT_NVOLS (sizeof vt_vols / sizeof vt_vols[0])

/* Each volume's pattern over its first 1 MiB and its last 64 KiB. */
static void
vt_write_all (zvol_pool_t *p, uint64_t salt, unsigned flags)
{
  for (size_t i = 0; i < VT_NVOLS; i++) {
    const struct vt_vol *v = &vt_vols[i];
    zvol_t *zv = vt_open (p, v->vv_name);
    assert_int_equal (zvol_size (zv), v->vv_size);
    assert_int_equal (zvol_blocksize (zv), v->vv_bs);
    tl_vol_write (zv, NULL, 0, MiB, v->vv_seed ^ salt, flags);
    tl_vol_write (zv, NULL, v->vv_size - 65536, 65536,
                  v->vv_seed ^ salt ^ 1, flags);
    assert_int_equal (zvol_flush (zv), 0);
    assert_int_equal (zvol_close (zv), 0);
  }
}

static void
vt_check_all (zvol_pool_t *p, uint64_t salt)
{
  for (size_t i = 0; i < VT_NVOLS; i++) {
    const struct vt_vol *v = &vt_vols[i];
    zvol_t *zv = vt_open (p, v->vv_name);
    zvol_volume_info_t vi = vt_info (p, v->vv_name);

    assert_int_equal (vi.vi_volsize, v->vv_size);
    assert_int_equal (vi.vi_blocksize, v->vv_bs);
    assert_int_equal (vi.vi_reservation, v->vv_resv);
    tl_vol_check (zv, 0, MiB, v->vv_seed ^ salt);
    tl_vol_check (zv, v->vv_size - 65536, 65536, v->vv_seed ^ salt ^ 1);
    assert_int_equal (zvol_close (zv), 0);
  }
}

/* Several volumes, each its own size and block size, written and read
 * back independently, across export and import. */
static void
test_several_volumes (void **state)
{
  char path[512];
  zvol_pool_t *p = vt_new_pool (path, sizeof path, "several");
  zvol_t *zv = NULL;

  (void) state;
  assert_int_equal (zvol_volume_list (p, NULL, 0), 0);
  /* No volume yet: NULL names none. */
  tl_log_reset (true);
  assert_int_equal (zvol_open (p, NULL, NULL, &zv), -ENOENT);
  tl_log_reset (false);
  for (size_t i = 0; i < VT_NVOLS; i++)
    vt_create (p, vt_vols[i].vv_name, vt_vols[i].vv_size, vt_vols[i].vv_bs,
               vt_vols[i].vv_resv);
  assert_int_equal (zvol_volume_list (p, NULL, 0), VT_NVOLS);
  /* Several: NULL is ambiguous, and says so. */
  tl_log_reset (true);
  assert_int_equal (zvol_open (p, NULL, NULL, &zv), -ENOENT);
  assert_true (tl_log_has ("name the one to open"));
  tl_log_reset (false);
  vt_write_all (p, 0, 0);
  vt_check_all (p, 0);
  /* Used and referenced, as the listing gives them after a sync. */
  zvol_volume_info_t a = vt_info (p, "alpha"), b = vt_info (p, "beta.2");
  assert_int_equal (a.vi_referenced, MiB + 65536);
  assert_int_equal (a.vi_used, a.vi_referenced);
  assert_int_equal (b.vi_used, 4 * MiB);          /* its reservation */
  assert_true (a.vi_avail > 0 && a.vi_avail + MiB < b.vi_avail + 4 * MiB);
  assert_int_equal (zvol_pool_close (p), 0);

  p = vt_import (path);
  assert_int_equal (zvol_volume_list (p, NULL, 0), VT_NVOLS);
  vt_check_all (p, 0);
  /* One volume rewritten leaves the others as they were. */
  zv = vt_open (p, "alpha");
  tl_vol_write (zv, NULL, 0, MiB, 0x77, 0);
  assert_int_equal (zvol_close (zv), 0);
  assert_int_equal (zvol_pool_close (p), 0);
  p = vt_import (path);
  zv = vt_open (p, "alpha");
  tl_vol_check (zv, 0, MiB, 0x77);
  assert_int_equal (zvol_close (zv), 0);
  zv = vt_open (p, "beta.2");
  tl_vol_check (zv, 0, MiB, vt_vols[1].vv_seed);
  assert_int_equal (zvol_close (zv), 0);
  assert_int_equal (zvol_pool_close (p), 0);
}

/* Names and sizes are hostile input; a name is unique; a reservation
 * the pool cannot keep is ENOSPC; a read-only pool is EROFS. */
static void
test_create_refusals (void **state)
{
  static const char *const bad[] = {
    "", "-x", ".hidden", "a/b", "a@b", "a b", "caf\xc3\xa9", "tab\t",
    "0123456789012345678901234567890123456789012345678901234567890123",
  };
  char path[512];
  zvol_pool_t *p = vt_new_pool (path, sizeof path, "refuse");
  zvol_volume_params_t vp = { .vp_size = MiB };
  zvol_pool_config_t pc;
  const char *dev = path;

  (void) state;
  tl_log_reset (true);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    assert_int_equal (zvol_volume_create (p, bad[i], &vp), -EINVAL);
    assert_true (tl_log_has ("is invalid"));
  }
  assert_int_equal (zvol_volume_create (p, NULL, &vp), -EINVAL);
  assert_int_equal (zvol_volume_create (p, "v", NULL), -EINVAL);
  vp.vp_size = 0;
  assert_int_equal (zvol_volume_create (p, "v", &vp), -EINVAL);
  vp.vp_size = MiB + 1;
  assert_int_equal (zvol_volume_create (p, "v", &vp), -EINVAL);
  vp.vp_size = MiB;
  vp.vp_blocksize = 3 * 4096;
  assert_int_equal (zvol_volume_create (p, "v", &vp), -EINVAL);
  vp.vp_blocksize = 0;
  vp.vp_reservation = 2 * MiB;
  assert_int_equal (zvol_volume_create (p, "v", &vp), -EINVAL);
  /* A reservation larger than the pool, and one larger than what the
   * others' reservations leave. */
  vp.vp_size = vp.vp_reservation = 1ull << 40;
  assert_int_equal (zvol_volume_create (p, "huge", &vp), -ENOSPC);
  assert_true (tl_log_has ("no room for volume 'huge'"));
  tl_log_reset (false);
  uint64_t avail = zvol_pool_avail (p);
  vt_create (p, "thick", 64 * MiB, 0, 64 * MiB);
  assert_true (zvol_pool_avail (p) + 64 * MiB <= avail);
  vp.vp_size = vp.vp_reservation = zvol_pool_avail (p) + 4096;
  vp.vp_size = ZV_P2ROUNDUP (vp.vp_size, 512);
  vp.vp_reservation = vp.vp_size;
  tl_log_reset (true);
  assert_int_equal (zvol_volume_create (p, "second", &vp), -ENOSPC);
  tl_log_reset (false);
  /* Thin volumes may exceed the pool. */
  vt_create (p, "thin", 1ull << 40, 0, 0);
  /* Taken names. */
  vp.vp_size = MiB;
  vp.vp_reservation = 0;
  tl_log_reset (true);
  assert_int_equal (zvol_volume_create (p, "thin", &vp), -EEXIST);
  assert_true (tl_log_has ("has a volume 'thin' already"));
  assert_int_equal (zvol_volume_destroy (p, "nosuch"), -ENOENT);
  assert_true (tl_log_has ("has no volume 'nosuch'"));
  tl_log_reset (false);
  assert_int_equal (zvol_pool_close (p), 0);

  /* Read-only. */
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  pc.pc_readonly = true;
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  assert_int_equal (zvol_volume_list (p, NULL, 0), 2);
  tl_log_reset (true);
  assert_int_equal (zvol_volume_create (p, "v", &vp), -EROFS);
  assert_int_equal (zvol_volume_destroy (p, "thin"), -EROFS);
  tl_log_reset (false);
  assert_int_equal (zvol_pool_close (p), 0);
}

/* Allocated bytes of the pool (space map), after enough syncs for the
 * deferred frees to come back (those of a destroy, and then the blocks
 * of the deferred-free list that recorded them: 6 txgs). */
static uint64_t
vt_allocated (zvol_pool_t *p)
{
  zvol_pool_stats_t ps;

  for (int i = 0; i < 6; i++) {
    zvol_t *zv = vt_open (p, "keep");
    tl_vol_write (zv, NULL, 0, 4096, 0x99, 0);
    assert_int_equal (zvol_close (zv), 0);
  }
  zvol_pool_get_stats (p, &ps);
  return ps.ps_space_allocated;
}

/* Destroy frees the volume's tree and its log ring, in one txg, and a
 * destroyed volume is gone after import; an open one cannot go. */
static void
test_destroy (void **state)
{
  char path[512];
  zvol_pool_t *p = vt_new_pool (path, sizeof path, "destroy");
  uint64_t base, full;
  zvol_t *zv;

  (void) state;
  vt_create (p, "keep", MiB, 0, 0);
  base = vt_allocated (p);
  vt_create (p, "gone", 32 * MiB, 0, 0);
  zv = vt_open (p, "gone");
  tl_vol_write (zv, NULL, 0, 16 * MiB, 0x5, 0);
  tl_log_reset (true);
  assert_int_equal (zvol_volume_destroy (p, "gone"), -EBUSY);
  assert_true (tl_log_has ("is open"));
  tl_log_reset (false);
  assert_int_equal (zvol_close (zv), 0);
  full = vt_allocated (p);
  assert_true (full >= base + 16 * MiB);
  assert_int_equal (zvol_volume_destroy (p, "gone"), 0);
  assert_int_equal (zvol_volume_list (p, NULL, 0), 1);
  tl_log_reset (true);
  assert_int_equal (zvol_open (p, "gone", NULL, &zv), -ENOENT);
  tl_log_reset (false);
  /* Every block and the ring back: exactly what the pool had before. */
  assert_int_equal (vt_allocated (p), base);
  assert_int_equal (zvol_pool_close (p), 0);
  p = vt_import (path);
  assert_int_equal (zvol_volume_list (p, NULL, 0), 1);
  assert_int_equal (vt_allocated (p), base);
  /* The name is free again. */
  vt_create (p, "gone", MiB, 0, 0);
  zv = vt_open (p, "gone");
  {                                          /* a new volume reads zeros */
    uint8_t *buf = malloc (MiB);
    assert_non_null (buf);
    assert_int_equal (zvol_read (zv, buf, 0, MiB), 0);
    for (size_t i = 0; i < MiB; i++)
      if (buf[i] != 0)
        fail_msg ("byte %zu of a new volume is not zero", i);
    free (buf);
  }
  assert_int_equal (zvol_close (zv), 0);
  assert_int_equal (zvol_pool_close (p), 0);
}

/*
 * A power cut with two volumes open: every write each acknowledged
 * (flushed, in its own intent log) is there after import, each log
 * replayed into its own volume.  Then a cut in the middle of a volume's
 * creation: after import the volume is there whole or not at all, and
 * the pool verifies (verify=full: one owner per sector, no block in
 * free space).
 */
static void
test_powercut (void **state)
{
  uint64_t seed = tl_seed ("volumes powercut");
  char path[512];
  zvol_pool_t *p = vt_new_pool (path, sizeof path, "cut");

  (void) state;
  for (size_t i = 0; i < VT_NVOLS; i++)
    vt_create (p, vt_vols[i].vv_name, vt_vols[i].vv_size, vt_vols[i].vv_bs,
               vt_vols[i].vv_resv);
  vt_write_all (p, 0, 0);
  assert_int_equal (zvol_pool_close (p), 0);

  for (unsigned round = 0; round < 4; round++) {
    pc_t *pc = pc_new (seed + round, PC_RANDOM);
    zvol_t *zv[VT_NVOLS];

    pc_watch (pc, true);
    p = vt_import (path);
    assert_int_equal (zvol_pool_start (p), 0);
    for (size_t i = 0; i < VT_NVOLS; i++) {
      /* Odd rounds write in place (the log holds pointers), so that each
       * volume's claim at import must take its own blocks. */
      zvol_config_t vc;
      zvol_config_init (&vc);
      if (round % 2 == 1)
        vc.vc_logbias = ZVOL_LOGBIAS_THROUGHPUT;
      assert_int_equal (zvol_open (p, vt_vols[i].vv_name, &vc, &zv[i]), 0);
      tl_vol_write (zv[i], NULL, 0, MiB, vt_vols[i].vv_seed ^ (round + 1),
                    0);
      tl_vol_write (zv[i], NULL, vt_vols[i].vv_size - 65536, 65536,
                    vt_vols[i].vv_seed ^ (round + 1) ^ 1, ZVOL_FUA);
      assert_int_equal (zvol_flush (zv[i]), 0);
    }
    pc_cut (pc);
    tl_log_reset (true);
    for (size_t i = 0; i < VT_NVOLS; i++)
      (void) zvol_close (zv[i]);
    (void) zvol_pool_close (p);
    tl_log_reset (false);
    pc_watch (pc, false);
    pc_free (pc);
    p = vt_import (path);
    /* Txgs allocate before the other volumes are opened (replayed): a
     * block their logs name must not be handed out meanwhile. */
    zvol_t *first = vt_open (p, vt_vols[0].vv_name);
    tl_vol_write (first, NULL, MiB, 6 * MiB, round, 0);
    assert_int_equal (zvol_close (first), 0);
    vt_check_all (p, round + 1);
    assert_int_equal (zvol_pool_close (p), 0);
  }

  /* A cut during a create, after n device writes. */
  for (uint64_t n = 1; n <= 40; n += 3) {
    pc_t *pc = pc_new (seed ^ n, PC_RANDOM);
    zvol_volume_params_t vp = { .vp_size = 2 * MiB };
    char name[32];
    int r;

    snprintf (name, sizeof name, "new%" PRIu64, n);
    pc_watch (pc, true);
    p = vt_import (path);
    pc_cut_after_writes (pc, n);
    tl_log_reset (true);
    r = zvol_volume_create (p, name, &vp);
    (void) zvol_pool_close (p);
    tl_log_reset (false);
    pc_settle (pc);
    pc_watch (pc, false);
    pc_free (pc);
    p = vt_import (path);
    zvol_t *zv = NULL;
    tl_log_reset (true);
    int o = zvol_open (p, name, NULL, &zv);
    tl_log_reset (false);
    if (r == 0)
      assert_int_equal (o, 0);      /* it returned: it is on disk */
    if (o == 0) {
      tl_vol_write (zv, NULL, 0, MiB, n, 0);
      tl_vol_check (zv, 0, MiB, n);
      assert_int_equal (zvol_close (zv), 0);
      assert_int_equal (zvol_volume_destroy (p, name), 0);
    }
    else
      assert_int_equal (o, -ENOENT);
    vt_check_all (p, 4);
    assert_int_equal (zvol_pool_close (p), 0);
  }
}

/*
 * Every volume's log is claimed at import, not only the first one's: a
 * power cut after flushed writes to the second volume alone, then an
 * import that opens only the first volume and syncs txgs, and a clean
 * export.  The second volume's log is replayed only at the next import;
 * only its claim (the header's claim txg) says that its records are of
 * txgs after the first import's, so without it they would count as
 * synced there and be skipped.  Both ways of logging: the records' data
 * in the log, and in place (the claim takes those blocks, or the first
 * volume's writes may reuse them).
 */
static void
test_powercut_second_log (void **state)
{
  uint64_t seed = tl_seed ("volumes second log");

  (void) state;
  for (unsigned round = 0; round < 2; round++) {
    char path[512], name[32];
    snprintf (name, sizeof name, "second%u", round);
    zvol_pool_t *p = vt_new_pool (path, sizeof path, name);
    pc_t *pc = pc_new (seed + round, PC_RANDOM);
    zvol_config_t vc;
    zvol_t *zv;

    vt_create (p, "first", 8 * MiB, 4096, 0);
    vt_create (p, "second", 8 * MiB, 4096, 0);
    assert_int_equal (zvol_pool_close (p), 0);

    pc_watch (pc, true);
    p = vt_import (path);
    assert_int_equal (zvol_pool_start (p), 0);
    zvol_config_init (&vc);
    if (round == 1)
      vc.vc_logbias = ZVOL_LOGBIAS_THROUGHPUT;
    assert_int_equal (zvol_open (p, "second", &vc, &zv), 0);
    /* The first commit of the import's new chain waits for a txg that
     * names it; the writes after it are in the log alone. */
    tl_vol_write (zv, NULL, 0, 65536, seed ^ round, 0);
    assert_int_equal (zvol_flush (zv), 0);
    tl_vol_write (zv, NULL, MiB, 65536, seed ^ round ^ 1, 0);
    tl_vol_write (zv, NULL, 2 * MiB, 65536, seed ^ round ^ 2, ZVOL_FUA);
    assert_int_equal (zvol_flush (zv), 0);
    pc_cut (pc);
    tl_log_reset (true);
    (void) zvol_close (zv);
    (void) zvol_pool_close (p);
    tl_log_reset (false);
    pc_watch (pc, false);
    pc_free (pc);

    /* Txgs sync with the second volume's log still unreplayed. */
    p = vt_import (path);
    assert_int_equal (zvol_pool_start (p), 0);
    for (unsigned i = 0; i < 4; i++) {
      zv = vt_open (p, "first");
      tl_vol_write (zv, NULL, i * MiB, 2 * MiB, i, 0);
      assert_int_equal (zvol_close (zv), 0);
    }
    assert_int_equal (zvol_pool_close (p), 0);

    p = vt_import (path);
    zv = vt_open (p, "second");
    tl_vol_check (zv, 0, 65536, seed ^ round);
    tl_vol_check (zv, MiB, 65536, seed ^ round ^ 1);
    tl_vol_check (zv, 2 * MiB, 65536, seed ^ round ^ 2);
    assert_int_equal (zvol_close (zv), 0);
    zv = vt_open (p, "first");
    tl_vol_check (zv, 3 * MiB, 2 * MiB, 3);
    assert_int_equal (zvol_close (zv), 0);
    assert_int_equal (zvol_pool_close (p), 0);
  }
}

/*
 * A reservation is kept for its volume: another volume's writes get
 * ENOSPC once only the unused part of the reservation is left, and the
 * volume with the reservation can still write all of it (as ZFS's
 * refreservation).
 */
static void
test_reservation_kept (void **state)
{
  char path[512];
  zvol_pool_t *p = vt_new_pool (path, sizeof path, "resv");
  const uint64_t R = 24 * MiB;
  uint8_t *buf = malloc (MiB);
  zvol_t *thin, *resv;
  uint64_t off;
  int r = 0;

  (void) state;
  assert_non_null (buf);
  assert_int_equal (zvol_pool_start (p), 0);
  vt_create (p, "resv", R, 16384, R);
  vt_create (p, "thin", DEV_SIZE, 16384, 0);
  thin = vt_open (p, "thin");
  resv = vt_open (p, "resv");
  /* The reserved volume's first quarter is written before the other one
   * fills the pool: what it uses is no longer held for it. */
  tl_vol_write (resv, NULL, 0, R / 4, 0x51, 0);
  assert_int_equal (zvol_flush (resv), 0);

  tl_log_reset (true);
  for (off = 0; off < DEV_SIZE && r == 0; off += MiB) {
    tl_pat_fill (buf, off, MiB, 0x7e);
    r = zvol_write (thin, buf, off, MiB, 0);
  }
  assert_int_equal (r, -ENOSPC);
  assert_true (tl_log_has ("is full"));
  tl_log_reset (false);
  assert_true (off > 8 * MiB);          /* it did fill what was free */

  /* The rest of the reservation: every write of it succeeds. */
  for (uint64_t o = R / 4; o < R; o += MiB)
    tl_vol_write (resv, NULL, o, MiB, 0x52 + o / MiB, 0);
  assert_int_equal (zvol_flush (resv), 0);
  assert_int_equal (zvol_close (resv), 0);
  assert_int_equal (zvol_close (thin), 0);
  assert_int_equal (zvol_pool_close (p), 0);

  p = vt_import (path);
  resv = vt_open (p, "resv");
  tl_vol_check (resv, 0, R / 4, 0x51);
  for (uint64_t o = R / 4; o < R; o += MiB)
    tl_vol_check (resv, o, MiB, 0x52 + o / MiB);
  assert_int_equal (zvol_close (resv), 0);
  assert_int_equal (zvol_pool_close (p), 0);
  free (buf);
}

/*
 * The margin a reservation keeps, made to hurt: after a thin volume
 * filled the pool, the reserved one (thick) is written to its last byte
 * in many small txgs, each of them paying rewritten metadata whose old
 * copies stay allocated for two more txgs: the pool's, and the volume's
 * own indirect blocks.  'sweep': each round writes a piece under every
 * indirect block still to fill, so every txg rewrites all of them; else
 * 1 MiB writes in order, straddling the volume's 1 MiB regions, one txg
 * each.  Every write of the reservation must succeed without waiting
 * for a sync (zvol.c logs each wait).  The txgs are the test's own (a
 * sync every 8 MiB of the fill and after each round; no timer, dirty or
 * space kicks), so the outcome is the same at every run.
 */
static void
vt_margin (uint32_t bs, bool sweep)
{
  char path[512], name[32];
  const char *dev;
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  const uint64_t R = 24 * MiB, lo = R / 4;
  const uint64_t span = (uint64_t) ZV_INDIRECT_FANOUT * bs, piece = 16 * bs;
  const uint64_t rounds = sweep ? (span + piece - 1) / piece
    : (R - lo) / MiB + 1;
  uint8_t *buf = malloc (MiB);
  zvol_t *thin, *resv;
  int r = 0;

  assert_non_null (buf);
  snprintf (name, sizeof name, "margin%u%s", (unsigned) bs,
            sweep ? "s" : "");
  dev = tl_path (path, sizeof path, name);
  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, true);
  pc.pc_name = "tank";
  pc.pc_txg.tt_timeout_ms = 600000;
  pc.pc_txg.tt_dirty_max = 1ull << 30;
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  assert_int_equal (zvol_tunable_set ("space_sync_percent", "100", NULL, 0),
                    0);
  assert_int_equal (zvol_pool_start (p), 0);
  vt_create (p, "resv", R, bs, R);
  vt_create (p, "thin", DEV_SIZE, 16384, 0);
  thin = vt_open (p, "thin");
  resv = vt_open (p, "resv");
  tl_vol_write (resv, NULL, 0, lo, 0x51, 0);
  assert_int_equal (zvol_flush (resv), 0);

  tl_log_reset (true);
  for (uint64_t off = 0; off < DEV_SIZE && r == 0; off += MiB) {
    tl_pat_fill (buf, off, MiB, 0x7e);
    r = zvol_write (thin, buf, off, MiB, 0);
    if (off % (8 * MiB) == 0)
      assert_int_equal (zv_pool_sync (p), 0);
  }
  assert_int_equal (r, -ENOSPC);
  tl_log_reset (false);

  for (uint64_t round = 0; round < rounds; round++) {
    /* This round's pieces [o, o + n): one under each indirect block's
     * span (a sweep), or the round's MiB (in order, half a MiB off). */
    for (uint64_t base = lo; base < R; base += sweep ? span : R) {
      uint64_t o, n;

      if (sweep) {
        o = base + round * piece;
        n = o < ZV_MIN (R, base + span)
          ? ZV_MIN (piece, ZV_MIN (R, base + span) - o) : 0;
      }
      else {
        o = round == 0 ? lo : lo + MiB / 2 + (round - 1) * MiB;
        n = round == 0 ? MiB / 2 : ZV_MIN (MiB, R - o);
      }
      if (n == 0)
        continue;
      tl_pat_fill (buf, o, n, 0x52);
      r = zvol_write (resv, buf, o, (uint32_t) n, 0);
      if (r != 0)
        fail_msg ("%u-byte blocks%s: the reserved volume's write at %"
                  PRIu64 "+%" PRIu64 " failed (%d)", (unsigned) bs,
                  sweep ? ", sweep" : "", o, n, r);
    }
    assert_int_equal (zv_pool_sync (p), 0);
  }
  assert_int_equal (zvol_tunable_set ("space_sync_percent", "30", NULL, 0),
                    0);
  if (tl_log_has ("waiting for a txg"))
    fail_msg ("%u-byte blocks%s: a write of the reservation waited for a "
              "sync", (unsigned) bs, sweep ? ", sweep" : "");
  assert_int_equal (zvol_flush (resv), 0);
  assert_int_equal (zvol_close (resv), 0);
  assert_int_equal (zvol_close (thin), 0);
  assert_int_equal (zvol_pool_close (p), 0);

  p = vt_import (path);
  resv = vt_open (p, "resv");
  tl_vol_check (resv, 0, lo, 0x51);
  tl_vol_check (resv, lo, (uint32_t) (R - lo), 0x52);
  assert_int_equal (zvol_close (resv), 0);
  assert_int_equal (zvol_pool_close (p), 0);
  tl_check_clean (path);
  free (buf);
}

static void
test_reservation_margin (void **state)
{
  (void) state;
  vt_margin (4096, true);
  vt_margin (16384, true);
  vt_margin (4096, false);
}

/* A format-1 pool is refused, saying how to move its data, and create
 * does not overwrite it. */
static void
test_format1_refused (void **state)
{
  char path[512];
  zvol_pool_t *p = vt_new_pool (path, sizeof path, "v1");
  const char *dev = path;
  zvol_pool_config_t pc;
  zv_config_phys_t cf;
  uint64_t off;

  (void) state;
  assert_int_equal (zvol_pool_close (p), 0);
  /* The labels as format 1 wrote them: version 1, sealed. */
  for (unsigned l = 0; l < ZV_NLABELS; l++) {
    off = zv_label_offset (DEV_SIZE, l);
    assert_int_equal (tl_file_pread (dev, &cf, sizeof cf, off), 0);
    assert_int_equal (cf.cf_version, ZV_CONFIG_VERSION);
    cf.cf_version = ZV_POOL_VERSION_1;
    zv_label_seal_config (&cf, off);
    assert_int_equal (tl_file_pwrite (dev, &cf, sizeof cf, off), 0);
  }
  uint64_t h = tl_hash_file (dev);
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  tl_log_reset (true);
  assert_int_equal (zvol_pool_open (&pc, &p), -EINVAL);
  assert_true (tl_log_has ("format version 1"));
  assert_true (tl_log_has ("nbdcopy"));
  tl_pool_cfg (&pc, &dev, 1, MiB, true);
  assert_int_equal (zvol_pool_open (&pc, &p), -EEXIST);
  tl_log_reset (false);
  assert_int_equal (tl_hash_file (dev), h);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_several_volumes),
    tl_test (test_create_refusals),
    tl_test (test_destroy),
    tl_test (test_powercut),
    tl_test (test_powercut_second_log),
    tl_test (test_reservation_kept),
    tl_test (test_reservation_margin),
    tl_test (test_format1_refused),
  };

  return tl_main (tests, "volumes", NULL);
}
