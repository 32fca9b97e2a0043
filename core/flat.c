/*
 * flat.c: metadata objects with their whole pointer tree in memory.
 *
 * Theory.  The space maps (one bitmap object per device) and the deferred
 * free lists are small, rewritten at every txg, and read only at import.
 * Keeping every pointer of their trees in arrays (one per level) lets the
 * sync rewrite just the blocks that changed without a cache or any read:
 * a dirty data block is written (copy on write, or in place when it was
 * already born in this txg), its slot in the level-1 array is updated and
 * marked dirty, and so on up to the root, which is [nlevels-1][0].
 *
 * The pool's sync calls zv_flat_sync repeatedly in one txg (each pass's
 * allocations change the bitmap it is writing); placement in place for
 * blocks born in the txg is what makes those passes converge, and
 * fl_moved (blocks of the last sync that did not go back in place) is
 * how the pool tells that a pass changed nothing more.
 *
 * Each level keeps the bounds of its dirty slots and of the slots that
 * may hold a block (fl_dlo/fl_dhi, fl_used), and a sync or a free walks
 * only those: a deferred-free list has room for 65,025 data blocks and
 * uses a few, and walking all of it, twice a sync and once a free, cost
 * 5.3 million instructions a txg (bench/core-bench txg-sync).
 *
 * Only the sync thread (or import, before it starts) touches these.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <inttypes.h>

#include "flat.h"
#include "dmu.h"

#define F ((uint64_t) ZV_INDIRECT_FANOUT)

/* Mark slot i of level l dirty, widening the level's dirty bounds. */
static void
flat_mark (zv_flat_t *fl, unsigned l, uint64_t i)
{
  ZV_ASSERT (i < fl->fl_len[l]);
  fl->fl_dirty[l][i] = 1;
  if (fl->fl_dhi[l] == 0 || i < fl->fl_dlo[l])
    fl->fl_dlo[l] = i;
  if (i + 1 > fl->fl_dhi[l])
    fl->fl_dhi[l] = i + 1;
}

/* Slot i of level l holds (or may hold) a block. */
static void
flat_use (zv_flat_t *fl, unsigned l, uint64_t i)
{
  if (i + 1 > fl->fl_used[l])
    fl->fl_used[l] = i + 1;
}

/* Set up an empty object able to hold nblocks data blocks. */
void
zv_flat_init (zv_flat_t *fl, zv_spa_t *spa, uint64_t obj, uint8_t type,
              uint32_t blksz, uint64_t nblocks)
{
  uint64_t len = nblocks ? nblocks : 1;

  memset (fl, 0, sizeof *fl);
  fl->fl_spa = spa;
  fl->fl_obj = obj;
  fl->fl_type = type;
  fl->fl_blksz = blksz;
  fl->fl_nblocks = nblocks;
  fl->fl_nlevels = zv_dmu_nlevels (nblocks);
  ZV_VERIFY3U (fl->fl_nlevels, <=, ZV_MAX_LEVELS);
  for (unsigned l = 0; l < fl->fl_nlevels; l++) {
    fl->fl_len[l] = len;
    fl->fl_bps[l] = zv_calloc (len, sizeof (zv_blkptr_t));
    fl->fl_dirty[l] = zv_calloc (len, 1);
    len = (len + F - 1) / F;
  }
  ZV_VERIFY3U (fl->fl_len[fl->fl_nlevels - 1], ==, 1);
}

void
zv_flat_fini (zv_flat_t *fl)
{
  for (unsigned l = 0; l < fl->fl_nlevels; l++) {
    free (fl->fl_bps[l]);
    free (fl->fl_dirty[l]);
  }
  memset (fl, 0, sizeof *fl);
}

typedef struct flat_load {
  zv_flat_t *lo_fl;
  zv_flat_data_fn lo_fn;
  void *lo_arg;
} flat_load_t;

/* Walk callback: store each pointer, hand data blocks on. */
static int
flat_load_cb (void *arg, const zv_blkptr_t *bp, unsigned level,
              uint64_t blkid, const void *data)
{
  flat_load_t *lo = arg;
  zv_flat_t *fl = lo->lo_fl;

  if (blkid >= fl->fl_len[level]) {
    zv_error ("object %" PRIu64 ": block %" PRIu64 " of level %u is past "
              "its end", fl->fl_obj, blkid, level);
    return -EIO;
  }
  if (level == 0 && bp->bp_type != fl->fl_type) {
    zv_error ("object %" PRIu64 ": block %" PRIu64 " has type %u, "
              "expected %u", fl->fl_obj, blkid, bp->bp_type, fl->fl_type);
    return -EIO;
  }
  fl->fl_bps[level][blkid] = *bp;
  flat_use (fl, level, blkid);
  if (level == 0 && lo->lo_fn)
    return lo->lo_fn (lo->lo_arg, blkid, data);
  return 0;
}

/* Load a tree from disk, checking its shape against ours. */
int
zv_flat_load (zv_flat_t *fl, const zv_dnode_phys_t *dn, zv_flat_data_fn fn,
              void *arg)
{
  char what[64];
  flat_load_t lo = { .lo_fl = fl, .lo_fn = fn, .lo_arg = arg };
  int r;

  snprintf (what, sizeof what, "object %" PRIu64, fl->fl_obj);
  r = zv_dmu_check_dnode (dn, fl->fl_type, what);
  if (r < 0)
    return r;
  if (dn->dn_datablksz != fl->fl_blksz || dn->dn_nlevels != fl->fl_nlevels
      || dn->dn_nblocks != fl->fl_nblocks
      || dn->dn_size > fl->fl_nblocks * (uint64_t) fl->fl_blksz) {
    zv_error ("%s: shape does not match the pool (%u levels, %" PRIu64
              " blocks of %" PRIu32 ")", what, dn->dn_nlevels,
              dn->dn_nblocks, dn->dn_datablksz);
    return -EIO;
  }
  fl->fl_size = dn->dn_size;
  fl->fl_txg = dn->dn_txg;
  return zv_dmu_walk (fl->fl_spa, fl->fl_obj, dn, fn != NULL, flat_load_cb,
                      &lo);
}

/*
 * Give the object room for nblocks data blocks (more than it has): the
 * data blocks stay where they are, the levels above are rebuilt (the old
 * indirect blocks freed in txg), so its next sync writes a new tree.
 */
void
zv_flat_reshape (zv_flat_t *fl, uint64_t nblocks, uint64_t txg)
{
  zv_flat_t nf;

  ZV_VERIFY3U (nblocks, >, fl->fl_nblocks);
  zv_flat_init (&nf, fl->fl_spa, fl->fl_obj, fl->fl_type, fl->fl_blksz,
                nblocks);
  memcpy (nf.fl_bps[0], fl->fl_bps[0], fl->fl_len[0] * sizeof (zv_blkptr_t));
  memcpy (nf.fl_dirty[0], fl->fl_dirty[0], fl->fl_len[0]);
  nf.fl_dlo[0] = fl->fl_dlo[0];
  nf.fl_dhi[0] = fl->fl_dhi[0];
  nf.fl_used[0] = fl->fl_used[0];
  for (unsigned l = 1; l < fl->fl_nlevels; l++)
    for (uint64_t i = 0; i < fl->fl_used[l]; i++)
      zv_zio_free_bp (fl->fl_spa, &fl->fl_bps[l][i], txg);
  if (nf.fl_nlevels > 1)
    for (uint64_t i = 0; i < ZV_MAX (nf.fl_used[0], nf.fl_dhi[0]); i++)
      if (!zv_bp_is_hole (&nf.fl_bps[0][i]) || nf.fl_dirty[0][i])
        flat_mark (&nf, 1, i / F);
  /* The sync starts only with a dirty data block: the rebuilt levels
   * need it even when no data block changed. */
  nf.fl_ndirty = fl->fl_ndirty ? fl->fl_ndirty : 1;
  nf.fl_size = fl->fl_size;
  nf.fl_txg = fl->fl_txg;
  zv_flat_fini (fl);
  *fl = nf;
}

/* Mark a data block for rewriting. */
void
zv_flat_dirty (zv_flat_t *fl, uint64_t blkid)
{
  ZV_VERIFY3U (blkid, <, fl->fl_len[0]);
  if (!fl->fl_dirty[0][blkid]) {
    flat_mark (fl, 0, blkid);
    fl->fl_ndirty++;
  }
}

/* Build indirect block idx of level l from the level below. */
static void
flat_build_indirect (zv_flat_t *fl, unsigned l, uint64_t idx, uint64_t txg,
                     void *buf, uint64_t *fill)
{
  zv_mblk_hdr_t *h = buf;
  zv_blkptr_t *e = (zv_blkptr_t *) buf + 1;
  uint64_t first = idx * F;
  uint64_t n = ZV_MIN (F, fl->fl_len[l - 1] - first);

  memset (buf, 0, ZV_INDIRECT_SIZE);
  h->mh_magic = ZV_MBLK_MAGIC;
  h->mh_version = ZV_FORMAT_VERSION;
  h->mh_type = ZV_BT_INDIRECT;
  h->mh_txg = txg;
  h->mh_object = fl->fl_obj;
  h->mh_level = l;
  h->mh_blkid = idx;
  *fill = 0;
  for (uint64_t i = 0; i < n; i++) {
    e[i] = fl->fl_bps[l - 1][first + i];
    if (!zv_bp_is_hole (&e[i]))
      *fill += e[i].bp_fill;
  }
}

/* Write the dirty blocks of one level; mark their parents dirty. */
static int
flat_sync_level (zv_flat_t *fl, unsigned l, uint64_t txg,
                 zv_flat_fill_fn fill, void *arg)
{
  uint32_t size = l ? ZV_INDIRECT_SIZE : fl->fl_blksz;
  uint64_t ndirty = 0, nw = 0;
  zv_zio_write_t *w;
  void **bufs;
  uint64_t lo = fl->fl_dlo[l], hi = fl->fl_dhi[l], i, k = 0;
  int r = 0;

  ZV_ASSERT (hi <= fl->fl_len[l]);
  for (i = lo; i < hi; i++)
    ndirty += fl->fl_dirty[l][i];
  if (ndirty == 0)
    return 0;
  w = zv_calloc (ndirty, sizeof *w);
  bufs = zv_calloc (ndirty, sizeof *bufs);
  for (i = lo; i < hi && r == 0; i++) {
    zv_blkptr_t *bp = &fl->fl_bps[l][i];
    zv_blkptr_t old = *bp;
    bool was_hole = zv_bp_is_hole (&old);
    uint64_t bfill;
    bool hole;

    if (!fl->fl_dirty[l][i])
      continue;
    fl->fl_dirty[l][i] = 0;
    bufs[k] = zv_buf_alloc (size);
    if (l == 0) {
      fill (arg, i, bufs[k]);
      hole = zv_is_zero (bufs[k], size);
      bfill = 1;
    }
    else {
      flat_build_indirect (fl, l, i, txg, bufs[k], &bfill);
      hole = bfill == 0;
    }
    r = zv_zio_place_bp (fl->fl_spa, &old, bp, hole, size, l,
                         l ? ZV_BT_INDIRECT : fl->fl_type, bfill, 2, txg);
    if (r == 0 && (hole ? !was_hole
                   : was_hole || bp->bp_dva[0] != old.bp_dva[0]))
      fl->fl_moved++;
    if (r == 0 && !hole) {
      w[nw].zw_bp = bp;
      w[nw].zw_buf = bufs[k];
      nw++;
      flat_use (fl, l, i);
    }
    if (l + 1u < fl->fl_nlevels)
      flat_mark (fl, l + 1, i / F);
    k++;
  }
  /* Every dirty slot was visited and cleared unless the loop stopped
   * on an error; then the bounds stay as wide as the slots left dirty. */
  if (r == 0)
    fl->fl_dlo[l] = fl->fl_dhi[l] = 0;
  else
    fl->fl_dlo[l] = i;
  if (r == 0)
    r = zv_zio_write_many (fl->fl_spa, w, nw);
  for (uint64_t b = 0; b < k; b++)
    zv_buf_free (bufs[b]);
  free (w);
  free (bufs);
  return r;
}

/* Write what changed, bottom up. */
int
zv_flat_sync (zv_flat_t *fl, uint64_t txg, zv_flat_fill_fn fill, void *arg)
{
  int r = 0;

  fl->fl_moved = 0;
  if (fl->fl_ndirty == 0)
    return 0;
  fl->fl_ndirty = 0;
  fl->fl_txg = txg;
  /* A one-level object's root is its data block: nothing above. */
  for (unsigned l = 0; l < fl->fl_nlevels && r == 0; l++)
    r = flat_sync_level (fl, l, txg, fill, arg);
  return r;
}

/* Free every block of the object. */
void
zv_flat_free_all (zv_flat_t *fl, uint64_t txg)
{
  for (unsigned l = 0; l < fl->fl_nlevels; l++) {
    for (uint64_t i = 0; i < fl->fl_used[l]; i++) {
      zv_zio_free_bp (fl->fl_spa, &fl->fl_bps[l][i], txg);
      memset (&fl->fl_bps[l][i], 0, sizeof (zv_blkptr_t));
    }
    if (fl->fl_dhi[l] > fl->fl_dlo[l])
      memset (fl->fl_dirty[l] + fl->fl_dlo[l], 0,
              fl->fl_dhi[l] - fl->fl_dlo[l]);
    fl->fl_used[l] = fl->fl_dlo[l] = fl->fl_dhi[l] = 0;
  }
  fl->fl_ndirty = 0;
  fl->fl_size = 0;
}

/* Descriptor for the objset. */
void
zv_flat_phys (const zv_flat_t *fl, zv_dnode_phys_t *dn)
{
  memset (dn, 0, sizeof *dn);
  dn->dn_type = fl->fl_type;
  dn->dn_nlevels = fl->fl_nlevels;
  dn->dn_datablksz = fl->fl_blksz;
  dn->dn_nblocks = fl->fl_nblocks;
  dn->dn_size = fl->fl_size;
  dn->dn_txg = fl->fl_txg;
  dn->dn_root = fl->fl_bps[fl->fl_nlevels - 1][0];
}
