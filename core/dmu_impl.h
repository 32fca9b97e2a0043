/*
 * dmu_impl.h: what the object layer's modules share (dmu.c, objects,
 * their trees and reads; dmu_write.c, changes in open context;
 * dmu_sync.c, syncing context; dmu_walk.c, the walk of an on-disk tree);
 * nothing outside them includes it (dmu.h is the layer's interface).
 */
#ifndef ZV_DMU_IMPL_H
#define ZV_DMU_IMPL_H

#include "dmu.h"
#include "compress.h"

#define F ((uint64_t) ZV_INDIRECT_FANOUT)

/* Copies of every indirect block (ditto blocks): the sync writes them so,
 * and a reservation holds them so (zv_dmu_tree_bytes). */
#define ZV_DMU_IND_COPIES 2u

/* The content of every allocated-zero block without data of its own
 * (dr_keep_alloc): the sync writes them all from here, and the partial
 * edges of such a zero are copied from it. */
extern const uint8_t zv_dmu_zeros[ZV_MAX_BLKSZ];

/* Entries of an indirect block (slot 0 is the header). */
static inline zv_blkptr_t *
zv_dmu_ind_entries (void *data)
{
  return (zv_blkptr_t *) data + 1;
}

/* Give a dirty record back to the record cache. */
void zv_dmu_dr_free (zv_dirty_t *dr);

/* Free (or hand to the dead list) a pointer this txg replaces. */
int zv_dmu_kill (zv_object_t *ob, const zv_blkptr_t *bp, uint64_t txg);

/* zv_zio_place_bp with the birth rule (dmu.c). */
int zv_dmu_place (zv_object_t *ob, const zv_blkptr_t *old, zv_blkptr_t *bp,
                  bool hole, uint32_t size, unsigned level, uint8_t type,
                  uint64_t fill, unsigned copies, uint64_t txg);

/* Hold indirect block idx of level (loaded and checked if need be). */
int zv_dmu_hold_indirect (zv_object_t *ob, unsigned level, uint64_t idx,
                          zv_dbuf_t **dbp);

/* The synced pointer of data block blkid. */
int zv_dmu_lookup_l0 (zv_object_t *ob, uint64_t blkid, zv_blkptr_t *bp);

/* Merge a partial record over base (the content under it); db_mtx held. */
void zv_dmu_merge_locked (zv_object_t *ob, zv_dirty_t *dr,
                          const uint8_t *base);

/* Forget the intent log's in-place write of a record (db_mtx held). */
void zv_dmu_unoverride (zv_object_t *ob, zv_dirty_t *dr);
/* Is dr's direct write (if any) on disk, waiting for it if need be?  One
 * that failed is given back (zv_dmu_unoverride): false.  db_mtx held. */
bool zv_dmu_pending_ok (zv_object_t *ob, zv_dirty_t *dr);

/* dmu.c's helpers that dmu_write.c uses too. */
zv_dirty_t *zv_dmu_dr_alloc (void);
int zv_dmu_fill_locked (zv_object_t *ob, zv_dbuf_t *db);
int zv_dmu_resolve_locked (zv_object_t *ob, zv_dbuf_t *db, zv_dirty_t *dr);
bool zv_dmu_grain_aligned (uint32_t boff, size_t n);
void zv_dmu_mask_set (zv_object_t *ob, zv_dirty_t *dr, uint32_t boff,
                      size_t n);
int zv_dmu_check_path (zv_object_t *ob, uint64_t first, uint64_t last);

/* The compression the object's data blocks get now: its property, or 0
 * (off) for metadata, in a pool without the feature, or for a property
 * this build does not know. */
static inline uint32_t
zv_dmu_comp_prop (zv_object_t *ob)
{
  uint32_t comp = atomic_load_explicit (&ob->ob_compress,
                                        memory_order_relaxed);

  if (ob->ob_type != ZV_BT_VOLDATA
      || !(atomic_load_explicit (&ob->ob_spa->spa_features,
                                 memory_order_relaxed) & ZV_FEAT_COMPRESS)
      || !zv_comp_prop_valid (comp))
    return 0;
  return comp;
}

#endif /* ZV_DMU_IMPL_H */
