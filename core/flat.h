/*
 * flat.h: small metadata objects whose whole pointer tree lives in memory
 * (the per-device space maps and the deferred-free lists).  Same on-disk
 * shape as any object (dmu.h); written whole-or-changed-blocks at sync.
 */
#ifndef ZV_FLAT_H
#define ZV_FLAT_H

#include <stdint.h>
#include <stdbool.h>

#include "format.h"
#include "zio.h"

typedef struct zv_flat {
  zv_spa_t *fl_spa;
  uint64_t fl_obj;
  uint8_t fl_type;
  uint8_t fl_nlevels;
  uint32_t fl_blksz;
  uint64_t fl_nblocks;                   /* capacity in data blocks */
  uint64_t fl_size;                      /* logical bytes in use */
  uint64_t fl_txg;                       /* dn_txg */
  uint64_t fl_len[ZV_MAX_LEVELS];        /* pointers per level */
  zv_blkptr_t *fl_bps[ZV_MAX_LEVELS];    /* [nlevels-1][0] is the root */
  uint8_t *fl_dirty[ZV_MAX_LEVELS];
  /* Bounds kept so a sync and a free walk what may have changed, not
   * the whole capacity (a deferred-free list has room for 65,025 data
   * blocks and uses a few): every dirty slot of level l lies in
   * [fl_dlo[l], fl_dhi[l]) (empty when fl_dhi[l] == 0), every slot that
   * is not a hole below fl_used[l]. */
  uint64_t fl_dlo[ZV_MAX_LEVELS], fl_dhi[ZV_MAX_LEVELS];
  uint64_t fl_used[ZV_MAX_LEVELS];
  uint64_t fl_ndirty;                    /* dirty data blocks */
  uint64_t fl_moved;                     /* blocks the last sync placed in
                                            new space or freed */
} zv_flat_t;

void zv_flat_init (zv_flat_t *fl, zv_spa_t *spa, uint64_t obj, uint8_t type,
                   uint32_t blksz, uint64_t nblocks);
void zv_flat_fini (zv_flat_t *fl);

/*
 * Load the tree of 'dn' (checked against this object's shape: hostile
 * data) and hand each data block to fn.  Returns 0 or -EIO.
 */
typedef int (*zv_flat_data_fn) (void *arg, uint64_t blkid, const void *data);
int zv_flat_load (zv_flat_t *fl, const zv_dnode_phys_t *dn,
                  zv_flat_data_fn fn, void *arg);

/* fn NULL: load the pointers only (the data is read when needed). */

/* Room for nblocks data blocks (more than now); see flat.c. */
void zv_flat_reshape (zv_flat_t *fl, uint64_t nblocks, uint64_t txg);

/* Data block blkid changes this txg. */
void zv_flat_dirty (zv_flat_t *fl, uint64_t blkid);

/*
 * Write the dirty data blocks (fill provides their content into a zeroed
 * buffer; an all-zero block becomes a hole) and the indirect blocks above
 * them, copy on write, two copies each.  Returns 0 or a negative errno;
 * fl_moved then says how many blocks did not go back in place (so
 * changed the allocator's bitmap).
 */
typedef void (*zv_flat_fill_fn) (void *arg, uint64_t blkid, void *buf);
int zv_flat_sync (zv_flat_t *fl, uint64_t txg, zv_flat_fill_fn fill,
                  void *arg);

/* Free every block (deferred unless born in txg); the object is empty. */
void zv_flat_free_all (zv_flat_t *fl, uint64_t txg);

/* The descriptor to store in the objset. */
void zv_flat_phys (const zv_flat_t *fl, zv_dnode_phys_t *dn);

#endif /* ZV_FLAT_H */
