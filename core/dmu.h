/*
 * dmu.h: objects (dnodes) whose blocks hang from a tree of indirect
 * blocks, read and written through the buffer cache by direct handle
 * ("by dnode": the caller holds the zv_object_t for its whole life, so no
 * request looks anything up or takes a hold on the object).
 */
#ifndef ZV_DMU_H
#define ZV_DMU_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdatomic.h>
#include <pthread.h>

#include "format.h"
#include "zio.h"
#include "dbuf.h"

/*
 * What a write to an object must leave free of the pool besides the slop
 * (zv_alloc_reserve_held): the unused reservations of the other volumes
 * (dsdir.c).  exact false: a bound, lock-free (every other volume's whole
 * reservation); true: the exact amount, which costs a walk of the
 * volumes, asked only when the bound refused the write.  *own gets what
 * the object's own reservation still covers (data bytes; 0 without one):
 * a write no larger is covered (zv_alloc_reserve_held).
 */
typedef uint64_t (*zv_dmu_held_fn) (void *arg, bool exact, uint64_t *own);

/*
 * Snapshots' birth rule (snap.c): a block the sync lets go of that was
 * born in the object's ob_snap_txg or before is still a snapshot's, and
 * goes to this function (the dataset's dead list) instead of being
 * freed.  A nonzero return fails the sync.
 */
typedef int (*zv_dmu_kill_fn) (void *arg, const zv_blkptr_t *bp,
                               uint64_t txg);

typedef struct zv_object {
  zv_spa_t *ob_spa;
  zv_dbuf_cache_t *ob_cache;
  uint64_t ob_id;
  uint8_t ob_type;                /* ZV_BT_* of the data blocks */
  uint8_t ob_nlevels;
  uint32_t ob_blksz;
  uint64_t ob_nblocks;
  pthread_mutex_t ob_mtx;         /* guards ob_root */
  zv_blkptr_t ob_root;
  _Atomic (zv_dirty_t *) ob_dirty[ZV_TXG_SIZE];  /* L0 records per txg */
  _Atomic uint64_t ob_reserved[ZV_TXG_SIZE];     /* bytes per txg */
  zv_dmu_held_fn ob_held_fn;      /* NULL: nothing held for others */
  void *ob_held_arg;
  /* The birth rule (zv_dmu_kill_fn), and the data bytes of the tree born
   * after ob_snap_txg (the dataset's "written"): the sync thread's, set
   * between syncs (and by import). */
  uint64_t ob_snap_txg;
  zv_dmu_kill_fn ob_kill_fn;
  void *ob_kill_arg;
  uint64_t ob_written;
  /* The logical bytes of what ob_written counts (ob_written counts a
   * compressed block at its size on disk), the same thread's; and the
   * compression property of the data blocks the sync writes next
   * (compress.h: 0 off), changed live (relaxed: a sync takes it once). */
  uint64_t ob_lwritten;
  _Atomic uint32_t ob_compress;
  /* Data blocks written directly by their writers (dmu.c). */
  _Atomic uint64_t ob_direct;
  /* Indirect blocks refused when they loaded (dmu.c, "Trust"), as
   * (level << 56) | index: changes under them fail at once.  Under
   * ob_refused_mtx; ob_nrefused is also read without it. */
  pthread_mutex_t ob_refused_mtx;
  _Atomic size_t ob_nrefused;
  uint64_t *ob_refused;
  size_t ob_refused_cap;
} zv_object_t;

/* Levels needed to address nblocks blocks (1: the root is the block). */
unsigned zv_dmu_nlevels (uint64_t nblocks);
/* The most bytes, every copy, that the indirect blocks above a run of
 * nblocks written data blocks take, anywhere in an object of 'total'
 * blocks (a thick volume's: what its reservation holds besides data). */
uint64_t zv_dmu_tree_bytes (uint64_t nblocks, uint64_t total);

/* Set up a handle from its on-disk descriptor. */
int zv_dmu_object_open (zv_object_t *ob, zv_spa_t *spa,
                        zv_dbuf_cache_t *cache, uint64_t id,
                        const zv_dnode_phys_t *dn);
/* Set what the object's writes must leave free (before any write). */
void zv_dmu_object_set_held (zv_object_t *ob, zv_dmu_held_fn fn, void *arg);
/* Set the birth rule's function (the sync thread, or before it runs). */
void zv_dmu_object_set_kill (zv_object_t *ob, zv_dmu_kill_fn fn, void *arg);
/* Bytes its writers reserved that no sync has turned into allocations. */
uint64_t zv_dmu_object_reserved (zv_object_t *ob);
/* Throw away every dirty record (failed pools only). */
void zv_dmu_object_discard_dirty (zv_object_t *ob);
/* Drop its cached blocks (nothing may be dirty). */
void zv_dmu_object_close (zv_object_t *ob);
/* The on-disk descriptor as of the last sync. */
void zv_dmu_object_phys (zv_object_t *ob, zv_dnode_phys_t *dn);

/* Open context.  Ranges are in bytes within the object. */
int zv_dmu_read_by_dnode (zv_object_t *ob, uint64_t off, size_t len,
                          void *buf);
/* Dirty the blocks in 'txg' (held by the caller); -ENOSPC when full,
 * and then nothing changed (the space of every block the range touches
 * is reserved before the first is dirtied).  *dirtied (unless NULL)
 * gets the bytes of the dirty records the write created: none for a
 * block it found dirty in txg already. */
int zv_dmu_write_by_dnode (zv_object_t *ob, uint64_t off, size_t len,
                           const void *buf, uint64_t txg, uint64_t *dirtied);
/* Free whole blocks [blkid, blkid + n) in 'txg': they become holes. */
int zv_dmu_free_by_dnode (zv_object_t *ob, uint64_t blkid, uint64_t n,
                          uint64_t txg);
/*
 * Zero [off, off + len) in 'txg', every block it touches staying
 * allocated: the sync writes them as data even though they are all zeros
 * (a zero without MAY_TRIM).  Whole blocks keep no buffer; partial ones
 * are written with zeros.  Reserves space like a write: -ENOSPC when full,
 * and then nothing changed.
 */
int zv_dmu_zero_by_dnode (zv_object_t *ob, uint64_t off, size_t len,
                          uint64_t txg);
/* Is the block a hole, as a read would see it now? */
int zv_dmu_block_is_hole (zv_object_t *ob, uint64_t blkid, bool *hole);
/* The synced tree's pointer of data block blkid, read through the
 * indirect blocks above it (each checked as it loads: dmu.c). */
int zv_dmu_block_bp (zv_object_t *ob, uint64_t blkid, zv_blkptr_t *bp);

/*
 * Write block blkid's dirty data of txg now, to new space, and mark the
 * record so the txg sync adopts that block (the intent log's in-place
 * writes).  *bp gets the block's pointer.  -ENOENT: no dirty record of
 * txg (synced, or freed); -EAGAIN: the txg is being synced right now.
 */
int zv_dmu_sync_block (zv_object_t *ob, uint64_t txg, uint64_t blkid,
                       zv_blkptr_t *bp);

/* Syncing context: write txg's dirty blocks and the indirects above them. */
int zv_dmu_sync (zv_object_t *ob, uint64_t txg);

/*
 * Walk an on-disk tree (no cache): fn sees every non-hole pointer, parents
 * before children; indirect blocks are read and verified.  With 'data'
 * set, L0 blocks are read too and fn gets their content.  Returns 0, the
 * first error, or fn's nonzero return.
 */
typedef int (*zv_dmu_walk_fn) (void *arg, const zv_blkptr_t *bp,
                               unsigned level, uint64_t blkid,
                               const void *data);
int zv_dmu_walk (zv_spa_t *spa, uint64_t obj, const zv_dnode_phys_t *dn,
                 bool data, zv_dmu_walk_fn fn, void *arg);
/* The same, pruned: a pointer born in min_birth or before is skipped with
 * everything under it (the blocks a snapshot already holds: the birth
 * rule of dsdir.c; send's incremental walk). */
int zv_dmu_walk_since (zv_spa_t *spa, uint64_t obj,
                       const zv_dnode_phys_t *dn, bool data,
                       uint64_t min_birth, zv_dmu_walk_fn fn, void *arg);
/* The same, and a pointer for which skip (may be NULL) says true is left
 * alone with everything under it: nothing of it is read or seen by fn
 * (a scrub piece's blocks before its place, check.c). */
typedef bool (*zv_dmu_skip_fn) (void *arg, const zv_blkptr_t *bp,
                                unsigned level, uint64_t blkid);
int zv_dmu_walk_since_skip (zv_spa_t *spa, uint64_t obj,
                            const zv_dnode_phys_t *dn, uint64_t min_birth,
                            zv_dmu_skip_fn skip, void *skip_arg,
                            zv_dmu_walk_fn fn, void *arg);
/* The same, and fn gets each indirect block's ZV_INDIRECT_FANOUT entries
 * as its data, holes included: an incremental stream's FREE ranges are
 * the holes of the indirect blocks born after min_birth (send.c).  With
 * stored, a data block comes as stored (a compressed one's bp_psize
 * bytes, not decompressed: fn sees its pointer). */
int zv_dmu_walk_since_ind (zv_spa_t *spa, uint64_t obj,
                           const zv_dnode_phys_t *dn, bool data, bool stored,
                           uint64_t min_birth, zv_dmu_walk_fn fn,
                           void *arg);

/* The checks a walk makes of what it reads, for a walk of its own (the
 * background free of a destroyed tree, freeq.c): a pointer's fields
 * against its parent's birth (UINT64_MAX for a root), an indirect
 * block's header; messages name 'what' (NULL: none).  0 or -EIO.  And
 * F^level, the data blocks a block of that level covers (saturating). */
int zv_dmu_check_child (zv_spa_t *spa, const zv_blkptr_t *bp, unsigned level,
                        uint64_t pbirth, const char *what);
int zv_dmu_check_indirect (const void *buf, const zv_blkptr_t *bp,
                           uint64_t obj, unsigned level, uint64_t blkid,
                           const char *what);
uint64_t zv_dmu_span (unsigned level);

/* Shape check of a dnode read from disk. */
int zv_dmu_check_dnode (const zv_dnode_phys_t *dn, uint8_t type,
                        const char *what);

#endif /* ZV_DMU_H */
