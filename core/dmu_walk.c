/*
 * dmu_walk.c: walking an object's tree as it is on disk, without the
 * buffer cache (import's full walk and owner map, the check, loading a
 * flat object, an incremental send).
 *
 * Theory.  A walk reads the tree from its root pointer down, parents
 * before children, depth first; each pointer is checked before it is
 * followed (dmu.c's checks: its level and size, its fields against its
 * parent's birth, an indirect block's header once read), so a damaged
 * tree fails the walk with a message naming the block, never takes it
 * somewhere else.  A pruned walk skips a pointer born at or before
 * min_birth with everything under it: a child is never born after its
 * parent, which the checks enforce as each block loads.  Nothing is
 * cached and nothing locked: the caller walks a tree that nothing frees
 * while it runs (dmu.h).
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "dmu_impl.h"

typedef struct dmu_walk {
  zv_spa_t *dw_spa;
  uint64_t dw_obj;
  uint32_t dw_blksz;
  bool dw_data;
  uint64_t dw_min_birth;          /* prune: born no later is skipped */
  bool dw_ind;                    /* fn gets indirect blocks' entries */
  bool dw_stored;                 /* data blocks as stored */
  zv_dmu_skip_fn dw_skip;         /* or NULL */
  void *dw_skip_arg;
  zv_dmu_walk_fn dw_fn;
  void *dw_arg;
} dmu_walk_t;

/* Visit bp (level, idx) and, for an indirect block, its children; its
 * parent was born in txg 'pbirth' (UINT64_MAX for the root: the caller
 * checks it against the objset). */
static int
dmu_walk_bp (dmu_walk_t *w, const zv_blkptr_t *bp, unsigned level,
             uint64_t idx, uint64_t pbirth)
{
  char what[96];
  uint32_t size = level ? ZV_INDIRECT_SIZE : w->dw_blksz;
  void *data = NULL;
  int r;

  if (zv_bp_is_hole (bp))
    return 0;
  /* A child is never born after its parent (checked below as each
   * loads), so nothing under a pruned pointer is newer either. */
  if (bp->bp_birth != 0 && bp->bp_birth <= w->dw_min_birth
      && bp->bp_birth <= pbirth)
    return 0;
  if (w->dw_skip != NULL && w->dw_skip (w->dw_skip_arg, bp, level, idx))
    return 0;
  snprintf (what, sizeof what, "object %" PRIu64 " level %u block %" PRIu64,
            w->dw_obj, level, idx);
  if (bp->bp_level != level || !zv_bp_size_is (bp, size)) {
    zv_error ("%s: pointer level %u size %" PRIu32 "/%" PRIu32 ", expected "
              "level %u size %" PRIu32, what, bp->bp_level, bp->bp_psize,
              bp->bp_lsize, level, size);
    return -EIO;
  }
  r = zv_dmu_check_child (w->dw_spa, bp, level, pbirth, what);
  if (r < 0)
    return r;
  if (level > 0 || w->dw_data) {
    data = zv_buf_get (size);
    r = level == 0 && w->dw_stored
      ? zv_zio_read_stored (w->dw_spa, bp, data, what)
      : zv_zio_read (w->dw_spa, bp, data, what);
    if (r == 0 && level > 0)
      r = zv_dmu_check_indirect (data, bp, w->dw_obj, level, idx, what);
    if (r < 0)
      goto out;
  }
  r = w->dw_fn (w->dw_arg, bp, level, idx, level == 0 ? data
                : w->dw_ind ? zv_dmu_ind_entries (data) : NULL);
  if (r != 0 || level == 0)
    goto out;
  const zv_blkptr_t *e = zv_dmu_ind_entries (data);
  for (uint64_t i = 0; i < F && r == 0; i++)
    r = dmu_walk_bp (w, &e[i], level - 1, idx * F + i, bp->bp_birth);
 out:
  zv_buf_put (data, size);
  return r;
}

/* Walk an on-disk tree, or only what was born after min_birth. */
int
zv_dmu_walk_since (zv_spa_t *spa, uint64_t obj, const zv_dnode_phys_t *dn,
                   bool data, uint64_t min_birth, zv_dmu_walk_fn fn,
                   void *arg)
{
  dmu_walk_t w = {
    .dw_spa = spa, .dw_obj = obj, .dw_blksz = dn->dn_datablksz,
    .dw_data = data, .dw_min_birth = min_birth, .dw_fn = fn, .dw_arg = arg,
  };

  return dmu_walk_bp (&w, &dn->dn_root, dn->dn_nlevels - 1u, 0, UINT64_MAX);
}

int
zv_dmu_walk_since_skip (zv_spa_t *spa, uint64_t obj,
                        const zv_dnode_phys_t *dn, uint64_t min_birth,
                        zv_dmu_skip_fn skip, void *skip_arg,
                        zv_dmu_walk_fn fn, void *arg)
{
  dmu_walk_t w = {
    .dw_spa = spa, .dw_obj = obj, .dw_blksz = dn->dn_datablksz,
    .dw_min_birth = min_birth, .dw_skip = skip, .dw_skip_arg = skip_arg,
    .dw_fn = fn, .dw_arg = arg,
  };

  return dmu_walk_bp (&w, &dn->dn_root, dn->dn_nlevels - 1u, 0, UINT64_MAX);
}

int
zv_dmu_walk_since_ind (zv_spa_t *spa, uint64_t obj,
                       const zv_dnode_phys_t *dn, bool data, bool stored,
                       uint64_t min_birth, zv_dmu_walk_fn fn, void *arg)
{
  dmu_walk_t w = {
    .dw_spa = spa, .dw_obj = obj, .dw_blksz = dn->dn_datablksz,
    .dw_data = data, .dw_min_birth = min_birth, .dw_ind = true,
    .dw_stored = stored,
    .dw_fn = fn, .dw_arg = arg,
  };

  return dmu_walk_bp (&w, &dn->dn_root, dn->dn_nlevels - 1u, 0, UINT64_MAX);
}

int
zv_dmu_walk (zv_spa_t *spa, uint64_t obj, const zv_dnode_phys_t *dn,
             bool data, zv_dmu_walk_fn fn, void *arg)
{
  return zv_dmu_walk_since (spa, obj, dn, data, 0, fn, arg);
}
