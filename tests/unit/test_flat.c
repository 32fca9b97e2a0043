/*
 * test_flat.c: unit tests for the metadata objects whose whole pointer
 * tree lives in memory (core/flat.c: the space maps and the deferred-free
 * lists), below the pool: each test builds a zv_spa_t of sparse files with
 * its allocator (testlib.h's tl_spa_create), fills blocks through the
 * sync's fill callback and reads them back with zv_flat_load into a fresh
 * object, as an import would.
 *
 * Every block's content is a pattern named by (block, version), so the
 * load callback knows what each block must hold; version 0 means an
 * all-zero block, which the sync turns into a hole.
 *
 * Shapes: with 255 pointers per indirect block, 1 block needs 1 level (the
 * root is the data block), up to 255 need 2, 256 to 65025 need 3.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "flat.h"

#define DEV_SIZE (64 * MiB)
#define BS 16384u
#define OBJ 16u                          /* a space map's object number */
#define F ((uint64_t) ZV_INDIRECT_FANOUT)

/* What the blocks of one object hold, and what a load handed over. */
typedef struct fcontent {
  uint32_t fc_blksz;
  uint64_t fc_nblocks;
  uint64_t *fc_ver;             /* per block; 0: all zeros */
  uint64_t fc_nfill;            /* fill calls */
  uint8_t *fc_seen;             /* per block: handed over by a load */
  uint64_t fc_nseen;
  uint64_t fc_bad;              /* handed over with the wrong content */
  uint64_t fc_fail_at;          /* the load callback fails at this call */
} fcontent_t;

static void
fc_init (fcontent_t *fc, uint32_t blksz, uint64_t nblocks)
{
  memset (fc, 0, sizeof *fc);
  fc->fc_blksz = blksz;
  fc->fc_nblocks = nblocks;
  fc->fc_ver = calloc (nblocks, sizeof *fc->fc_ver);
  fc->fc_seen = calloc (nblocks, 1);
  assert_true (fc->fc_ver != NULL && fc->fc_seen != NULL);
}

static void
fc_fini (fcontent_t *fc)
{
  free (fc->fc_ver);
  free (fc->fc_seen);
}

static uint64_t
fc_seed (uint64_t blkid, uint64_t ver)
{
  return blkid * 1000 + ver;
}

/* The sync's fill callback: block blkid's current version. */
static void
fc_fill (void *arg, uint64_t blkid, void *buf)
{
  fcontent_t *fc = arg;

  fc->fc_nfill++;
  if (blkid < fc->fc_nblocks && fc->fc_ver[blkid] != 0)
    tl_pat_fill (buf, 0, fc->fc_blksz, fc_seed (blkid, fc->fc_ver[blkid]));
}

/* The load's callback: check each block against its version. */
static int
fc_load (void *arg, uint64_t blkid, const void *data)
{
  fcontent_t *fc = arg;

  fc->fc_nseen++;
  if (fc->fc_fail_at && fc->fc_nseen == fc->fc_fail_at)
    return -EIO;
  if (blkid >= fc->fc_nblocks || fc->fc_seen[blkid]
      || fc->fc_ver[blkid] == 0
      || tl_pat_check (data, 0, fc->fc_blksz,
                       fc_seed (blkid, fc->fc_ver[blkid])) >= 0) {
    fc->fc_bad++;
    return 0;
  }
  fc->fc_seen[blkid] = 1;
  return 0;
}

/* Set block blkid to version ver and mark it dirty. */
static void
fc_set (zv_flat_t *fl, fcontent_t *fc, uint64_t blkid, uint64_t ver)
{
  fc->fc_ver[blkid] = ver;
  zv_flat_dirty (fl, blkid);
}

/* Load dn into a fresh object of fl's shape; the result of the load, with
 * the loaded object in *out (to be finied by the caller). */
static int
fc_reload (const zv_flat_t *fl, const zv_dnode_phys_t *dn, fcontent_t *fc,
           zv_flat_t *out)
{
  memset (fc->fc_seen, 0, fc->fc_nblocks);
  fc->fc_nseen = 0;
  fc->fc_bad = 0;
  zv_flat_init (out, fl->fl_spa, fl->fl_obj, fl->fl_type, fl->fl_blksz,
                fl->fl_nblocks);
  return zv_flat_load (out, dn, fc_load, fc);
}

/* The load handed over exactly the blocks with a nonzero version, each
 * once and right, and rebuilt the same pointers at every level. */
static void
fc_check_load (const zv_flat_t *fl, const fcontent_t *fc, const zv_flat_t *got)
{
  uint64_t want = 0;

  assert_int_equal (fc->fc_bad, 0);
  for (uint64_t b = 0; b < fc->fc_nblocks; b++) {
    want += fc->fc_ver[b] != 0;
    if ((fc->fc_ver[b] != 0) != (fc->fc_seen[b] != 0))
      fail_msg ("block %" PRIu64 " (version %" PRIu64 ") %s", b,
                fc->fc_ver[b], fc->fc_seen[b] ? "handed over" : "missing");
  }
  assert_int_equal (fc->fc_nseen, want);
  assert_int_equal (got->fl_nlevels, fl->fl_nlevels);
  for (unsigned l = 0; l < fl->fl_nlevels; l++)
    assert_memory_equal (got->fl_bps[l], fl->fl_bps[l],
                         fl->fl_len[l] * sizeof (zv_blkptr_t));
  assert_int_equal (got->fl_txg, fl->fl_txg);
  assert_int_equal (got->fl_size, fl->fl_size);
}

/* Is every copy of every non-hole pointer of fl allocated? */
static void
fc_check_allocated (const zv_flat_t *fl)
{
  zv_alloc_t *a = fl->fl_spa->spa_alloc;

  for (unsigned l = 0; l < fl->fl_nlevels; l++)
    for (uint64_t i = 0; i < fl->fl_len[l]; i++) {
      const zv_blkptr_t *bp = &fl->fl_bps[l][i];
      if (zv_bp_is_hole (bp))
        continue;
      for (unsigned c = 0; c < bp->bp_ncopies; c++)
        assert_true (zv_alloc_is_allocated (a, bp->bp_dva[c],
                                            bp->bp_psize));
    }
}

/* ---- tests ---- */

/* The in-memory tree has the levels and lengths its size needs, and an
 * empty object describes itself with a hole for a root. */
static void
test_init_shape (void **state)
{
  static const struct { uint64_t nblocks; unsigned nlevels; } shapes[] = {
    { 0, 1 }, { 1, 1 }, { 2, 2 }, { 255, 2 }, { 256, 3 }, { 65025, 3 },
    { 65026, 4 },
  };
  zv_spa_t spa;
  zv_flat_t fl;
  zv_dnode_phys_t dn;

  memset (&spa, 0, sizeof spa);
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
    uint64_t n = shapes[s].nblocks, len = n ? n : 1;

    zv_flat_init (&fl, &spa, OBJ, ZV_BT_SPACEMAP, BS, n);
    assert_int_equal (fl.fl_nlevels, shapes[s].nlevels);
    for (unsigned l = 0; l < fl.fl_nlevels; l++) {
      assert_int_equal (fl.fl_len[l], len);
      assert_non_null (fl.fl_bps[l]);
      len = (len + F - 1) / F;
    }
    assert_int_equal (fl.fl_len[fl.fl_nlevels - 1], 1);
    zv_flat_phys (&fl, &dn);
    assert_int_equal (dn.dn_type, ZV_BT_SPACEMAP);
    assert_int_equal (dn.dn_nlevels, shapes[s].nlevels);
    assert_int_equal (dn.dn_datablksz, BS);
    assert_int_equal (dn.dn_nblocks, n);
    assert_int_equal (dn.dn_size, 0);
    assert_true (zv_bp_is_hole (&dn.dn_root));
    zv_flat_fini (&fl);
  }
}

/* Dirty, sync, describe, load into a fresh object: the same blocks come
 * back, each once, with every pointer as the sync left it; a later txg
 * rewrites only what changed, copy on write. */
static void
test_roundtrip (void **state)
{
  static const uint64_t blocks[] = { 0, 1, 254, 255, 299 };
  const uint64_t nb = 300;
  tl_spa_t ts;
  zv_alloc_t *a;
  zv_flat_t fl, got;
  zv_dnode_phys_t dn;
  fcontent_t fc;
  zv_blkptr_t old1, old254, oldroot, oldl0, oldl1;

  tl_spa_create (&ts, "rt", 2, DEV_SIZE);
  a = ts.ts_spa.spa_alloc;
  zv_flat_init (&fl, &ts.ts_spa, OBJ, ZV_BT_SPACEMAP, BS, nb);
  assert_int_equal (fl.fl_nlevels, 3);
  fc_init (&fc, BS, nb);

  /* Nothing dirty: nothing written, not even the fill callback. */
  assert_int_equal (zv_flat_sync (&fl, 4, fc_fill, &fc), 0);
  assert_int_equal (fc.fc_nfill, 0);
  assert_int_equal (tl_alloc_space (a).as_allocated, 0);

  for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
    fc_set (&fl, &fc, blocks[i], 1);
  fc_set (&fl, &fc, 0, 2);                        /* twice: one block */
  assert_int_equal (fl.fl_ndirty, 5);
  fl.fl_size = nb * BS;
  assert_int_equal (zv_flat_sync (&fl, 5, fc_fill, &fc), 0);
  assert_int_equal (fc.fc_nfill, 5);
  assert_int_equal (fl.fl_ndirty, 0);
  fc_check_allocated (&fl);

  zv_flat_phys (&fl, &dn);
  assert_int_equal (dn.dn_txg, 5);
  assert_int_equal (dn.dn_size, nb * BS);
  assert_int_equal (dn.dn_root.bp_level, 2);
  assert_int_equal (dn.dn_root.bp_type, ZV_BT_INDIRECT);
  assert_int_equal (dn.dn_root.bp_fill, 5);
  assert_int_equal (dn.dn_root.bp_birth, 5);
  assert_int_equal (dn.dn_root.bp_ncopies, 2);
  assert_int_equal (dn.dn_root.bp_psize, ZV_INDIRECT_SIZE);
  /* Data blocks are metadata too: two copies, on both devices. */
  for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++) {
    const zv_blkptr_t *bp = &fl.fl_bps[0][blocks[i]];
    assert_int_equal (bp->bp_ncopies, 2);
    assert_int_not_equal (ZV_DVA_VDEV (bp->bp_dva[0]),
                          ZV_DVA_VDEV (bp->bp_dva[1]));
    assert_int_equal (bp->bp_type, ZV_BT_SPACEMAP);
    assert_int_equal (bp->bp_level, 0);
    assert_int_equal (bp->bp_fill, 1);
    assert_int_equal (bp->bp_psize, BS);
  }
  assert_int_equal (fl.fl_bps[1][0].bp_fill, 3);    /* 0, 1, 254 */
  assert_int_equal (fl.fl_bps[1][1].bp_fill, 2);    /* 255, 299 */
  assert_true (zv_bp_is_hole (&fl.fl_bps[0][2]));

  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), 0);
  fc_check_load (&fl, &fc, &got);
  zv_flat_fini (&got);

  /* Txg 6: block 1 changes, block 254 becomes all zeros (a hole).  New
   * space for what changed; the old copies wait on txg 6's defer list;
   * the untouched level-1 block 1 keeps its place. */
  old1 = fl.fl_bps[0][1];
  old254 = fl.fl_bps[0][254];
  oldl0 = fl.fl_bps[1][0];
  oldl1 = fl.fl_bps[1][1];
  oldroot = fl.fl_bps[2][0];
  fc_set (&fl, &fc, 1, 3);
  fc_set (&fl, &fc, 254, 0);
  assert_int_equal (zv_flat_sync (&fl, 6, fc_fill, &fc), 0);
  assert_true (zv_bp_is_hole (&fl.fl_bps[0][254]));
  assert_int_not_equal (fl.fl_bps[0][1].bp_dva[0], old1.bp_dva[0]);
  assert_int_equal (fl.fl_bps[0][1].bp_birth, 6);
  assert_memory_equal (&fl.fl_bps[1][1], &oldl1, sizeof oldl1);
  assert_int_equal (fl.fl_bps[0][0].bp_birth, 5);
  for (unsigned c = 0; c < 2; c++) {
    assert_true (tl_alloc_deferred (a, 6, old1.bp_dva[c]));
    assert_true (tl_alloc_deferred (a, 6, old254.bp_dva[c]));
    assert_true (tl_alloc_deferred (a, 6, oldl0.bp_dva[c]));
    assert_true (tl_alloc_deferred (a, 6, oldroot.bp_dva[c]));
  }
  /* data 1, 254; level-1 block 0; the root: two copies each */
  assert_int_equal (tl_alloc_defer_count (a, 6), 8);
  zv_flat_phys (&fl, &dn);
  assert_int_equal (dn.dn_root.bp_fill, 4);
  assert_int_equal (dn.dn_txg, 6);
  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), 0);
  fc_check_load (&fl, &fc, &got);
  zv_flat_fini (&got);

  fc_fini (&fc);
  zv_flat_fini (&fl);
  tl_spa_destroy (&ts);
}

/* A one-level object: the root is the data block itself. */
static void
test_one_level (void **state)
{
  tl_spa_t ts;
  zv_flat_t fl, got;
  zv_dnode_phys_t dn;
  fcontent_t fc;

  tl_spa_create (&ts, "one", 1, DEV_SIZE);
  zv_flat_init (&fl, &ts.ts_spa, ZV_OBJ_DEFER0, ZV_BT_DEFER, ZV_DEFER_BLKSZ,
                1);
  fc_init (&fc, ZV_DEFER_BLKSZ, 1);
  fc_set (&fl, &fc, 0, 1);
  assert_int_equal (zv_flat_sync (&fl, 5, fc_fill, &fc), 0);
  zv_flat_phys (&fl, &dn);
  assert_int_equal (dn.dn_nlevels, 1);
  assert_int_equal (dn.dn_root.bp_level, 0);
  assert_int_equal (dn.dn_root.bp_type, ZV_BT_DEFER);
  assert_int_equal (dn.dn_root.bp_ncopies, 2);
  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), 0);
  fc_check_load (&fl, &fc, &got);
  zv_flat_fini (&got);

  /* All zeros: the root is a hole, the object empty. */
  fc_set (&fl, &fc, 0, 0);
  assert_int_equal (zv_flat_sync (&fl, 6, fc_fill, &fc), 0);
  zv_flat_phys (&fl, &dn);
  assert_true (zv_bp_is_hole (&dn.dn_root));
  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), 0);
  assert_int_equal (fc.fc_nseen, 0);
  zv_flat_fini (&got);
  fc_fini (&fc);
  zv_flat_fini (&fl);
  tl_spa_destroy (&ts);
}

/* All-zero blocks are holes: no space, never handed to a load; an
 * indirect block with only holes below is a hole too, and an object of
 * zeros has a hole for a root. */
static void
test_zero_blocks_are_holes (void **state)
{
  const uint64_t nb = 300;
  tl_spa_t ts;
  zv_alloc_t *a;
  zv_flat_t fl, got;
  zv_dnode_phys_t dn;
  fcontent_t fc;

  tl_spa_create (&ts, "zero", 1, DEV_SIZE);
  a = ts.ts_spa.spa_alloc;
  zv_flat_init (&fl, &ts.ts_spa, OBJ, ZV_BT_SPACEMAP, BS, nb);
  fc_init (&fc, BS, nb);

  /* Only zeros: nothing at all is written. */
  fc_set (&fl, &fc, 3, 0);
  fc_set (&fl, &fc, 280, 0);
  assert_int_equal (zv_flat_sync (&fl, 5, fc_fill, &fc), 0);
  assert_int_equal (fc.fc_nfill, 2);
  assert_int_equal (tl_alloc_space (a).as_allocated, 0);
  zv_flat_phys (&fl, &dn);
  assert_true (zv_bp_is_hole (&dn.dn_root));

  /* One data block in each half; then the second half zeroed again. */
  fc_set (&fl, &fc, 3, 1);
  fc_set (&fl, &fc, 4, 0);
  fc_set (&fl, &fc, 280, 1);
  assert_int_equal (zv_flat_sync (&fl, 5, fc_fill, &fc), 0);
  assert_true (zv_bp_is_hole (&fl.fl_bps[0][4]));
  assert_false (zv_bp_is_hole (&fl.fl_bps[1][1]));
  /* data 3, 280; level-1 blocks 0, 1; the root: two copies each */
  assert_int_equal (tl_alloc_space (a).as_allocated,
                    2 * (2 * BS + 3 * ZV_INDIRECT_SIZE));
  fc_set (&fl, &fc, 280, 0);
  assert_int_equal (zv_flat_sync (&fl, 5, fc_fill, &fc), 0);
  assert_true (zv_bp_is_hole (&fl.fl_bps[0][280]));
  assert_true (zv_bp_is_hole (&fl.fl_bps[1][1]));      /* nothing below */
  assert_int_equal (fl.fl_bps[2][0].bp_fill, 1);
  /* Born in this txg: given back at once. */
  assert_int_equal (tl_alloc_space (a).as_allocated,
                    2 * (BS + 2 * ZV_INDIRECT_SIZE));
  assert_int_equal (tl_alloc_defer_count (a, 5), 0);
  zv_flat_phys (&fl, &dn);
  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), 0);
  fc_check_load (&fl, &fc, &got);
  assert_int_equal (fc.fc_nseen, 1);
  zv_flat_fini (&got);

  /* The last data block zeroed in a later txg: the whole tree goes (to
   * the defer list) and the root is a hole. */
  fc_set (&fl, &fc, 3, 0);
  assert_int_equal (zv_flat_sync (&fl, 6, fc_fill, &fc), 0);
  for (unsigned l = 0; l < fl.fl_nlevels; l++)
    for (uint64_t i = 0; i < fl.fl_len[l]; i++)
      assert_true (zv_bp_is_hole (&fl.fl_bps[l][i]));
  assert_int_equal (tl_alloc_defer_count (a, 6), 6);
  zv_flat_phys (&fl, &dn);
  assert_true (zv_bp_is_hole (&dn.dn_root));
  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), 0);
  assert_int_equal (fc.fc_nseen, 0);
  zv_flat_fini (&got);

  fc_fini (&fc);
  zv_flat_fini (&fl);
  tl_spa_destroy (&ts);
}

/* A second sync of the same txg (the pool's sync passes: each pass's
 * allocations change the space map it writes) rewrites in place: the same
 * addresses, no new space, nothing freed, and fl_moved says so (the pool
 * stops its passes on it); a block that becomes a hole moves. */
static void
test_resync_in_place (void **state)
{
  const uint64_t nb = 300;
  tl_spa_t ts;
  zv_alloc_t *a;
  zv_flat_t fl, got;
  zv_dnode_phys_t dn;
  fcontent_t fc;
  zv_blkptr_t *before[ZV_MAX_LEVELS];
  uint64_t used;

  tl_spa_create (&ts, "resync", 1, DEV_SIZE);
  a = ts.ts_spa.spa_alloc;
  zv_flat_init (&fl, &ts.ts_spa, OBJ, ZV_BT_SPACEMAP, BS, nb);
  fc_init (&fc, BS, nb);
  fc_set (&fl, &fc, 10, 1);
  fc_set (&fl, &fc, 290, 1);
  assert_int_equal (zv_flat_sync (&fl, 5, fc_fill, &fc), 0);
  assert_true (fl.fl_moved >= 2);         /* two data blocks, new space */
  used = tl_alloc_space (a).as_allocated;
  for (unsigned l = 0; l < fl.fl_nlevels; l++) {
    before[l] = malloc (fl.fl_len[l] * sizeof (zv_blkptr_t));
    assert_non_null (before[l]);
    memcpy (before[l], fl.fl_bps[l], fl.fl_len[l] * sizeof (zv_blkptr_t));
  }

  fc_set (&fl, &fc, 10, 2);
  assert_int_equal (zv_flat_sync (&fl, 5, fc_fill, &fc), 0);
  assert_int_equal (fl.fl_moved, 0);
  for (unsigned l = 0; l < fl.fl_nlevels; l++)
    for (uint64_t i = 0; i < fl.fl_len[l]; i++)
      for (unsigned c = 0; c < 2; c++)
        assert_int_equal (fl.fl_bps[l][i].bp_dva[c], before[l][i].bp_dva[c]);
  assert_false (zv_cksum_equal (&fl.fl_bps[0][10].bp_cksum,
                                &before[0][10].bp_cksum));
  assert_int_equal (tl_alloc_space (a).as_allocated, used);
  assert_int_equal (tl_alloc_defer_count (a, 5), 0);

  zv_flat_phys (&fl, &dn);
  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), 0);
  fc_check_load (&fl, &fc, &got);
  zv_flat_fini (&got);
  /* Nothing dirty: nothing moves. */
  assert_int_equal (zv_flat_sync (&fl, 5, fc_fill, &fc), 0);
  assert_int_equal (fl.fl_moved, 0);
  fc_set (&fl, &fc, 290, 0);
  assert_int_equal (zv_flat_sync (&fl, 5, fc_fill, &fc), 0);
  assert_true (fl.fl_moved >= 1);
  for (unsigned l = 0; l < fl.fl_nlevels; l++)
    free (before[l]);
  fc_fini (&fc);
  zv_flat_fini (&fl);
  tl_spa_destroy (&ts);
}

/* free_all empties the object: every copy deferred (or freed at once
 * when born in the txg), the root a hole, nothing dirty. */
static void
test_free_all (void **state)
{
  const uint64_t nb = 300;
  tl_spa_t ts;
  zv_alloc_t *a;
  zv_flat_t fl;
  zv_dnode_phys_t dn;
  fcontent_t fc;

  tl_spa_create (&ts, "free", 2, DEV_SIZE);
  a = ts.ts_spa.spa_alloc;
  zv_flat_init (&fl, &ts.ts_spa, OBJ, ZV_BT_SPACEMAP, BS, nb);
  fc_init (&fc, BS, nb);
  static const uint64_t blocks[] = { 0, 100, 200, 254, 255, 299 };
  for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
    fc_set (&fl, &fc, blocks[i], 1);
  fl.fl_size = nb * BS;
  assert_int_equal (zv_flat_sync (&fl, 5, fc_fill, &fc), 0);
  /* 6 data blocks, level-1 blocks 0 and 1, the root: 9 blocks x 2 */
  assert_int_equal (tl_alloc_space (a).as_allocated,
                    2 * (6 * BS + 3 * ZV_INDIRECT_SIZE));

  zv_flat_dirty (&fl, 7);
  zv_flat_free_all (&fl, 6);
  assert_int_equal (fl.fl_ndirty, 0);
  assert_int_equal (fl.fl_size, 0);
  zv_flat_phys (&fl, &dn);
  assert_true (zv_bp_is_hole (&dn.dn_root));
  assert_int_equal (dn.dn_size, 0);
  for (unsigned l = 0; l < fl.fl_nlevels; l++)
    for (uint64_t i = 0; i < fl.fl_len[l]; i++) {
      assert_true (zv_bp_is_hole (&fl.fl_bps[l][i]));
      assert_int_equal (fl.fl_dirty[l][i], 0);
    }
  assert_int_equal (tl_alloc_defer_count (a, 6), 18);
  assert_int_equal (tl_alloc_space (a).as_deferred,
                    2 * (6 * BS + 3 * ZV_INDIRECT_SIZE));
  /* Nothing dirty is left: a sync writes nothing. */
  fc.fc_nfill = 0;
  assert_int_equal (zv_flat_sync (&fl, 6, fc_fill, &fc), 0);
  assert_int_equal (fc.fc_nfill, 0);
  zv_alloc_sync_begin (a, 8);
  assert_int_equal (tl_alloc_space (a).as_allocated, 0);

  /* Written and freed in the same txg: given back at once. */
  fc_set (&fl, &fc, 100, 1);
  assert_int_equal (zv_flat_sync (&fl, 9, fc_fill, &fc), 0);
  assert_true (tl_alloc_space (a).as_allocated > 0);
  zv_flat_free_all (&fl, 9);
  assert_int_equal (tl_alloc_space (a).as_allocated, 0);
  assert_int_equal (tl_alloc_defer_count (a, 9), 0);

  fc_fini (&fc);
  zv_flat_fini (&fl);
  tl_spa_destroy (&ts);
}

/* An object loaded from disk is freed whole: the free walks the slots a
 * load filled, not only those this process wrote. */
static void
test_free_all_loaded (void **state)
{
  const uint64_t nb = 300;
  tl_spa_t ts;
  zv_alloc_t *a;
  zv_flat_t fl, got;
  zv_dnode_phys_t dn;
  fcontent_t fc;

  (void) state;
  tl_spa_create (&ts, "freeld", 2, DEV_SIZE);
  a = ts.ts_spa.spa_alloc;
  zv_flat_init (&fl, &ts.ts_spa, OBJ, ZV_BT_SPACEMAP, BS, nb);
  fc_init (&fc, BS, nb);
  fc_set (&fl, &fc, 3, 1);
  fc_set (&fl, &fc, 290, 1);
  fl.fl_size = nb * BS;
  assert_int_equal (zv_flat_sync (&fl, 5, fc_fill, &fc), 0);
  zv_flat_phys (&fl, &dn);
  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), 0);
  fc_check_load (&fl, &fc, &got);

  /* 2 data blocks, level-1 blocks 0 and 1, the root: 5 blocks x 2 */
  zv_flat_free_all (&got, 6);
  assert_int_equal (tl_alloc_defer_count (a, 6), 10);
  for (unsigned l = 0; l < got.fl_nlevels; l++)
    for (uint64_t i = 0; i < got.fl_len[l]; i++)
      assert_true (zv_bp_is_hole (&got.fl_bps[l][i]));
  zv_alloc_sync_begin (a, 8);
  assert_int_equal (tl_alloc_space (a).as_allocated, 0);

  fc_fini (&fc);
  zv_flat_fini (&got);
  zv_flat_fini (&fl);
  tl_spa_destroy (&ts);
}

/* Growing an object keeps its data blocks where they are, frees the old
 * levels above them and writes new ones at the next sync, which holds
 * the blocks dirtied before and after the growth; what it wrote loads
 * back, and is freed whole. */
static void
test_reshape (void **state)
{
  const uint64_t nb = 200, nb2 = 600, nb3 = F * F + 1;
  tl_spa_t ts;
  zv_alloc_t *a;
  zv_flat_t fl, got;
  zv_dnode_phys_t dn;
  fcontent_t fc;
  zv_blkptr_t old0, oldl1, oldroot;

  (void) state;
  tl_spa_create (&ts, "reshape", 2, DEV_SIZE);
  a = ts.ts_spa.spa_alloc;
  zv_flat_init (&fl, &ts.ts_spa, OBJ, ZV_BT_SPACEMAP, BS, nb);
  assert_int_equal (fl.fl_nlevels, 2);
  fc_init (&fc, BS, nb3);
  fc_set (&fl, &fc, 0, 1);
  fc_set (&fl, &fc, 150, 1);
  fl.fl_size = nb * BS;
  assert_int_equal (zv_flat_sync (&fl, 5, fc_fill, &fc), 0);
  old0 = fl.fl_bps[0][0];
  oldl1 = fl.fl_bps[1][0];
  oldroot = oldl1;                        /* two levels: L1 is the root */

  /* Only a block in the new room is dirty: the level-1 block above the
   * old data is rewritten all the same. */
  zv_flat_reshape (&fl, nb2, 6);
  assert_int_equal (fl.fl_nlevels, 3);
  fc_set (&fl, &fc, 580, 1);
  fl.fl_size = nb2 * BS;
  assert_int_equal (zv_flat_sync (&fl, 6, fc_fill, &fc), 0);
  assert_memory_equal (&fl.fl_bps[0][0], &old0, sizeof old0);
  assert_int_equal (fl.fl_bps[1][0].bp_fill, 2);    /* 0, 150 */
  assert_int_equal (fl.fl_bps[1][2].bp_fill, 1);    /* 580 */
  for (unsigned c = 0; c < 2; c++)
    assert_true (tl_alloc_deferred (a, 6, oldroot.bp_dva[c]));
  fc_check_allocated (&fl);
  zv_flat_phys (&fl, &dn);
  assert_int_equal (dn.dn_root.bp_fill, 3);
  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), 0);
  fc_check_load (&fl, &fc, &got);
  zv_flat_fini (&got);

  /* Only a block dirtied before the growth: it is written by the sync
   * after it. */
  fc_set (&fl, &fc, 150, 2);
  zv_flat_reshape (&fl, nb3, 7);
  assert_int_equal (fl.fl_nlevels, 4);
  fl.fl_size = nb3 * BS;
  assert_int_equal (zv_flat_sync (&fl, 7, fc_fill, &fc), 0);
  assert_int_equal (fl.fl_bps[0][150].bp_birth, 7);
  fc_check_allocated (&fl);
  zv_flat_phys (&fl, &dn);
  assert_int_equal (dn.dn_root.bp_fill, 3);
  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), 0);
  fc_check_load (&fl, &fc, &got);
  zv_flat_fini (&got);

  /* 3 data blocks, level-1 blocks 0 and 2, one level-2 block, the root:
   * 7 blocks x 2 */
  zv_flat_free_all (&fl, 8);
  assert_int_equal (tl_alloc_defer_count (a, 8), 14);
  zv_alloc_sync_begin (a, 10);
  assert_int_equal (tl_alloc_space (a).as_allocated, 0);

  fc_fini (&fc);
  zv_flat_fini (&fl);
  tl_spa_destroy (&ts);
}

/* A load checks the descriptor against the object's shape before it
 * follows anything: each hostile field is -EIO with a message, and no
 * block is handed over. */
static void
test_load_hostile_dnode (void **state)
{
  const uint64_t nb = 300;
  tl_spa_t ts;
  zv_flat_t fl, got;
  zv_dnode_phys_t good, dn;
  fcontent_t fc;
  struct {
    const char *why;
    const char *msg;
  } k[] = {
    { "another object type", "object type" },
    { "no type", "object type" },
    { "another block size", "shape does not match" },
    { "a block size not a power of two", "invalid block size" },
    { "a block size over 128 KiB", "invalid block size" },
    { "too few levels for its blocks", "invalid tree shape" },
    { "one level more", "shape does not match" },
    { "no levels", "invalid tree shape" },
    { "more levels than the format has", "invalid tree shape" },
    { "one block fewer", "shape does not match" },
    { "a size past its blocks", "shape does not match" },
    { "2^50 blocks", "invalid tree shape" },
    { "a root pointer of the wrong level", "root pointer level" },
    { "a root pointer of the wrong size", "expected level 2" },
    { "a root pointer past the device", "outside the pool" },
    { "a root pointer with a wrong checksum", "checksum error" },
    { "a root pointer with three copies", "invalid block pointer" },
  };

  tl_spa_create (&ts, "hdn", 1, DEV_SIZE);
  zv_flat_init (&fl, &ts.ts_spa, OBJ, ZV_BT_SPACEMAP, BS, nb);
  fc_init (&fc, BS, nb);
  fc_set (&fl, &fc, 0, 1);
  fc_set (&fl, &fc, 299, 1);
  fl.fl_size = nb * BS;
  assert_int_equal (zv_flat_sync (&fl, 5, fc_fill, &fc), 0);
  zv_flat_phys (&fl, &good);
  assert_int_equal (fc_reload (&fl, &good, &fc, &got), 0);   /* control */
  fc_check_load (&fl, &fc, &got);
  zv_flat_fini (&got);

  for (size_t i = 0; i < sizeof k / sizeof k[0]; i++) {
    dn = good;
    switch (i) {
    case 0: dn.dn_type = ZV_BT_DEFER; break;
    case 1: dn.dn_type = ZV_BT_NONE; break;
    case 2: dn.dn_datablksz = BS / 2; break;
    case 3: dn.dn_datablksz = 12288; break;
    case 4: dn.dn_datablksz = 2 * ZV_MAX_BLKSZ; break;
    case 5: dn.dn_nlevels = 2; break;
    case 6: dn.dn_nlevels = 4; dn.dn_root.bp_level = 3; break;
    case 7: dn.dn_nlevels = 0; break;
    case 8: dn.dn_nlevels = ZV_MAX_LEVELS + 1; break;
    case 9: dn.dn_nblocks = nb - 1; break;
    case 10: dn.dn_size = nb * BS + 1; break;
    case 11: dn.dn_nblocks = 1ull << 50; dn.dn_nlevels = 8;
      dn.dn_root.bp_level = 7; break;
    case 12: dn.dn_root.bp_level = 1; dn.dn_nlevels = 3; break;
    case 13: dn.dn_root.bp_psize = BS * 2; break;
    case 14: dn.dn_root.bp_dva[0] = ZV_DVA_MAKE (0, DEV_SIZE); break;
    case 15: dn.dn_root.bp_cksum.zc_word[0] ^= 1; break;
    case 16: dn.dn_root.bp_ncopies = 3; break;
    }
    tl_log_reset (true);
    if (fc_reload (&fl, &dn, &fc, &got) != -EIO)
      fail_msg ("loaded: %s", k[i].why);
    if (!tl_log_has (k[i].msg))
      fail_msg ("%s: no message with \"%s\"", k[i].why, k[i].msg);
    if (fc.fc_nseen != 0)
      fail_msg ("%s: %" PRIu64 " blocks handed over", k[i].why, fc.fc_nseen);
    zv_flat_fini (&got);
  }
  tl_log_reset (false);
  fc_fini (&fc);
  zv_flat_fini (&fl);
  tl_spa_destroy (&ts);
}

/* Damage on disk: one bad copy of a block is survived (the ditto copy),
 * both bad copies of a data or an indirect block fail the load. */
static void
test_load_damaged (void **state)
{
  const uint64_t nb = 300;
  tl_spa_t ts;
  zv_flat_t fl, got;
  zv_dnode_phys_t dn;
  fcontent_t fc;
  const zv_blkptr_t *d, *ind;

  tl_spa_create (&ts, "dmg", 2, DEV_SIZE);
  zv_flat_init (&fl, &ts.ts_spa, OBJ, ZV_BT_SPACEMAP, BS, nb);
  fc_init (&fc, BS, nb);
  fc_set (&fl, &fc, 20, 1);
  fc_set (&fl, &fc, 260, 1);
  assert_int_equal (zv_flat_sync (&fl, 5, fc_fill, &fc), 0);
  zv_flat_phys (&fl, &dn);
  d = &fl.fl_bps[0][20];
  ind = &fl.fl_bps[1][1];

#define FLIP(bp, c, at) \
  assert_int_equal (tl_file_flip (ts.ts_path[ZV_DVA_VDEV ((bp)->bp_dva[c])], \
                                  ZV_DVA_OFFSET ((bp)->bp_dva[c]) + (at)), 0)

  /* One copy of the data block: loads, and says so. */
  FLIP (d, 0, 77);
  tl_log_reset (true);
  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), 0);
  fc_check_load (&fl, &fc, &got);
  assert_true (tl_log_has ("checksum error"));
  zv_flat_fini (&got);
  /* Both copies: -EIO. */
  FLIP (d, 1, BS - 1);
  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), -EIO);
  zv_flat_fini (&got);
  FLIP (d, 0, 77);
  FLIP (d, 1, BS - 1);

  /* Both copies of an indirect block (its header, then its pointers). */
  FLIP (ind, 0, 8);
  tl_log_reset (true);
  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), 0);
  zv_flat_fini (&got);
  FLIP (ind, 1, 64 + 5);
  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), -EIO);
  assert_int_equal (fc.fc_seen[260], 0);
  zv_flat_fini (&got);
  FLIP (ind, 0, 8);
  FLIP (ind, 1, 64 + 5);
#undef FLIP

  /* Repaired: the whole object loads again. */
  tl_log_reset (true);
  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), 0);
  fc_check_load (&fl, &fc, &got);
  assert_int_equal (tl_log_errors (), 0);
  tl_log_reset (false);
  zv_flat_fini (&got);
  fc_fini (&fc);
  zv_flat_fini (&fl);
  tl_spa_destroy (&ts);
}

/* Trees that verify but do not fit the object: a data block of another
 * type, a block past the object's end; and the load's callback stops the
 * load with its error. */
static void
test_load_hostile_tree (void **state)
{
  tl_spa_t ts;
  zv_flat_t fl, small, got;
  zv_dnode_phys_t dn;
  fcontent_t fc, fcs;

  tl_spa_create (&ts, "htree", 1, DEV_SIZE);
  zv_flat_init (&fl, &ts.ts_spa, OBJ, ZV_BT_SPACEMAP, BS, 500);
  fc_init (&fc, BS, 500);
  fc_set (&fl, &fc, 10, 1);
  fc_set (&fl, &fc, 20, 1);
  fc_set (&fl, &fc, 400, 1);
  assert_int_equal (zv_flat_sync (&fl, 5, fc_fill, &fc), 0);
  zv_flat_phys (&fl, &dn);

  /* The same tree read as a deferred-free list. */
  dn.dn_type = ZV_BT_DEFER;
  zv_flat_init (&got, &ts.ts_spa, OBJ, ZV_BT_DEFER, BS, 500);
  tl_log_reset (true);
  assert_int_equal (zv_flat_load (&got, &dn, NULL, NULL), -EIO);
  assert_true (tl_log_has ("has type 4, expected 5"));
  zv_flat_fini (&got);

  /* Read as an object of 300 blocks (same levels): block 400 is past its
   * end. */
  dn.dn_type = ZV_BT_SPACEMAP;
  dn.dn_nblocks = 300;
  dn.dn_size = 0;
  zv_flat_init (&small, &ts.ts_spa, OBJ, ZV_BT_SPACEMAP, BS, 300);
  assert_int_equal (small.fl_nlevels, fl.fl_nlevels);
  fc_init (&fcs, BS, 300);
  fcs.fc_ver[10] = fcs.fc_ver[20] = 1;
  tl_log_reset (true);
  assert_int_equal (fc_reload (&small, &dn, &fcs, &got), -EIO);
  assert_true (tl_log_has ("block 400 of level 0 is past its end"));
  zv_flat_fini (&got);
  zv_flat_fini (&small);
  fc_fini (&fcs);

  /* The callback's error stops the load there. */
  zv_flat_phys (&fl, &dn);
  fc.fc_fail_at = 2;
  assert_int_equal (fc_reload (&fl, &dn, &fc, &got), -EIO);
  assert_int_equal (fc.fc_nseen, 2);
  assert_int_equal (fc.fc_seen[20], 0);
  assert_int_equal (fc.fc_seen[400], 0);
  zv_flat_fini (&got);
  tl_log_reset (false);

  fc_fini (&fc);
  zv_flat_fini (&fl);
  tl_spa_destroy (&ts);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_init_shape),
    tl_test (test_roundtrip),
    tl_test (test_one_level),
    tl_test (test_zero_blocks_are_holes),
    tl_test (test_resync_in_place),
    tl_test (test_free_all),
    tl_test (test_free_all_loaded),
    tl_test (test_reshape),
    tl_test (test_load_hostile_dnode),
    tl_test (test_load_damaged),
    tl_test (test_load_hostile_tree),
  };

  return tl_main (tests, "flat", NULL);
}
