/*
 * alloc.h: space allocation on the pool's devices.
 *
 * Each device's data area is tracked by a bitmap, one bit per ZV_SECTOR
 * (4 KiB), held in memory whole and persisted by the pool as a chain of
 * 16 KiB chunks (ZV_ALLOC_CHUNK bytes of bitmap each; see psync.c).  The
 * allocator keeps a dirty flag per chunk so the pool rewrites only the
 * chunks that changed in a txg.
 *
 * Frees are deferred: a block freed in txg T goes to the defer list of T
 * and its bits stay set until the sync of T+2 begins (zv_alloc_sync_begin),
 * so the uberblocks of T-1 and T stay valid (TXG_DEFER).  A block born and
 * freed in the same, not yet committed, txg can be freed at once.
 *
 * Striping: allocations rotate across devices (a new device per call), and
 * within a device a cursor walks forward (first fit from the cursor) so
 * that a txg's writes land mostly sequentially.  Ditto copies of metadata
 * pass 'avoid' so the second copy lands on another device, or at least
 * elsewhere.
 *
 * Reservation: writers reserve space in open context (zv_alloc_reserve),
 * so a full pool fails the write that does not fit with ENOSPC and the
 * sync never runs out of space; a slop of 1/32 of the pool (at least
 * 4 MiB) is kept for metadata, half of which a write a volume's
 * reservation covers may borrow while frees are on their way back.
 *
 * Locking: one mutex guards the bitmaps and defer lists.  The txg sync is
 * not the only thread that allocates and frees: the intent log allocates
 * the blocks it writes in place (on committing threads), open context
 * defers the free of such a block when a later write supersedes it, and
 * import and replay claim and free.  Writers otherwise touch only the
 * atomic reservation, which takes no lock.
 */
#ifndef ZV_ALLOC_H
#define ZV_ALLOC_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#define ZV_ALLOC_CHUNK 16384u  /* bytes of bitmap per persisted chunk */
#define ZV_TXG_DEFER 2         /* frees of T are reusable from T+2 */

typedef struct zv_alloc zv_alloc_t;

/* A device address: (vdev << 56) | byte offset.  0 means none. */
#define ZV_DVA_MAKE(vdev, off) (((uint64_t) (vdev) << 56) | (uint64_t) (off))
#define ZV_DVA_VDEV(dva) ((unsigned) ((dva) >> 56))
#define ZV_DVA_OFFSET(dva) ((uint64_t) ((dva) & ((1ull << 56) - 1)))

/*
 * ndevs devices; device i's allocatable area is [start[i], end[i]) (byte
 * offsets, multiples of ZV_SECTOR).  All bits start clear.
 */
zv_alloc_t *zv_alloc_create (unsigned ndevs, const uint64_t *start,
                             const uint64_t *end);
void zv_alloc_destroy (zv_alloc_t *a);

/*
 * Allocate 'size' bytes (a multiple of ZV_SECTOR), contiguous, on one
 * device.  If avoid != 0 the block goes on another device than avoid's,
 * or at least does not overlap it.  Returns 0 with *dva set, or -ENOSPC.
 */
int zv_alloc_block (zv_alloc_t *a, uint32_t size, uint64_t avoid,
                    uint64_t *dva);

/*
 * The same, one copy, in open context for txg 'txg' (the intent log's
 * in-place blocks): the syncs of earlier txgs leave its bits out of the
 * space maps they write, so a crash before 'txg' syncs cannot leave the
 * block allocated on disk and owned by nothing (alloc.c).
 */
int zv_alloc_block_open (zv_alloc_t *a, uint32_t size, uint64_t txg,
                         uint64_t *dva);

/* Mark an extent allocated (import: rebuilding state; tests). */
void zv_alloc_claim (zv_alloc_t *a, uint64_t dva, uint32_t size);

/* Free at once: only for blocks never referenced by a committed txg. */
void zv_alloc_free_now (zv_alloc_t *a, uint64_t dva, uint32_t size);

/* Free when txg 'txg' + ZV_TXG_DEFER begins to sync. */
void zv_alloc_free_defer (zv_alloc_t *a, uint64_t txg, uint64_t dva,
                          uint32_t size);

/* Start of the sync of 'txg': apply the frees deferred at txg - 2. */
void zv_alloc_sync_begin (zv_alloc_t *a, uint64_t txg);

/*
 * The free hold (the live checker's): while it lasts, no deferred free
 * of a txg after 'txg' (a committed one) is applied, so everything
 * allocated as of txg stays on disk unchanged; a sync's start carries
 * each free it keeps back into its own txg's list, which that sync
 * persists, so a crash meanwhile loses none.  begin: 0, -EBUSY while
 * another hold is on, -EAGAIN when txg's frees began to be applied
 * (read the last synced txg again).  get: what it keeps back (bytes,
 * extents), counted allocated and not available.
 */
int zv_alloc_hold_begin (zv_alloc_t *a, uint64_t txg);
void zv_alloc_hold_end (zv_alloc_t *a);
void zv_alloc_hold_get (zv_alloc_t *a, uint64_t *bytes, uint64_t *extents);

/* The defer list of 'txg' (for persisting it): calls fn per extent. */
typedef void (*zv_alloc_extent_fn) (void *arg, uint64_t dva, uint32_t size);
void zv_alloc_defer_foreach (zv_alloc_t *a, uint64_t txg,
                             zv_alloc_extent_fn fn, void *arg);
/* Take an extent out of the pending deferred frees (the caller frees it
 * later); returns the bytes taken out. */
uint64_t zv_alloc_defer_cancel (zv_alloc_t *a, uint64_t dva, uint32_t size);
/* May the intent log claim [dva, dva+size)?  True when every sector is
 * free or on a pending deferred-free list: space that is allocated and
 * live belongs to the synced tree, not to a log record. */
bool zv_alloc_may_claim (zv_alloc_t *a, uint64_t dva, uint32_t size);
/* Import: re-queue a persisted defer list entry (bits must be set). */
void zv_alloc_defer_load (zv_alloc_t *a, uint64_t txg, uint64_t dva,
                          uint32_t size);

/* Persisted bitmap chunks of device 'vdev'. */
size_t zv_alloc_nchunks (zv_alloc_t *a, unsigned vdev);
bool zv_alloc_chunk_dirty (zv_alloc_t *a, unsigned vdev, size_t idx);
/* Copy chunk idx into buf (ZV_ALLOC_CHUNK bytes) and clear its dirty flag. */
void zv_alloc_chunk_save (zv_alloc_t *a, unsigned vdev, size_t idx, void *buf);
/* Import: load chunk idx from buf; -EINVAL if it marks bits past the end. */
int zv_alloc_chunk_load (zv_alloc_t *a, unsigned vdev, size_t idx,
                         const void *buf);
/* Mark every chunk dirty (a new pool writes them all). */
void zv_alloc_dirty_all (zv_alloc_t *a);

/* Is every sector of [dva, dva+size) allocated?  (checks, tests) */
bool zv_alloc_is_allocated (zv_alloc_t *a, uint64_t dva, uint32_t size);

/*
 * Import's ownership check.  Every block the imported trees name (each
 * copy), every pending deferred free and the log ring in the pool must
 * own its sectors alone: space with two owners would be freed twice, or
 * freed while still in use.  zv_alloc_owners_take gives [dva, dva+size)
 * an owner: 0, -EINVAL when it is not an extent of the pool, -EEXIST
 * when a sector of it has an owner already (then nothing is taken).
 * The map is import's alone (no lock), gone with destroy.
 */
typedef struct zv_alloc_owners zv_alloc_owners_t;
zv_alloc_owners_t *zv_alloc_owners_create (zv_alloc_t *a);
int zv_alloc_owners_take (zv_alloc_owners_t *o, uint64_t dva, uint32_t size);
void zv_alloc_owners_destroy (zv_alloc_owners_t *o);

/*
 * The pool's owners, from import on: each sector allocated at import
 * gets at most one owner, when the first pointer (or deferred free, or
 * the log ring) naming it is found, at import or later as the tree is
 * read (dmu.c checks an indirect block's children when it first loads
 * it).  zv_alloc_own_begin, once the space maps are loaded, starts
 * every allocated sector unowned.  Space allocated since import was
 * free then and is never unowned: it is the engine's own.
 *
 * zv_alloc_own takes [dva, dva+size) for an owner, all or nothing: 0,
 * -EINVAL (not an extent of the pool), -ENOENT (a sector is free),
 * -EEXIST (a sector has an owner).  Before own_begin (a new pool) it
 * only checks that the extent is allocated.  own_rest takes whatever is
 * still unowned of the extent (the log's claim, which checked it).
 * own_any: does a sector of the extent have an owner?
 * own_children: the children of the indirect block whose first copy
 * starts at 'parent' take their space, all or nothing (*bad: the child
 * refused, errors as zv_alloc_own), once: the block is then 'checked',
 * and a later load of it (after eviction) takes nothing again.
 * own_checked marks it so without taking (the import's full walk).
 */
typedef struct zv_alloc_ext {
  uint64_t ae_dva;
  uint32_t ae_size;
} zv_alloc_ext_t;
void zv_alloc_own_begin (zv_alloc_t *a);
int zv_alloc_own (zv_alloc_t *a, uint64_t dva, uint32_t size);
void zv_alloc_own_rest (zv_alloc_t *a, uint64_t dva, uint32_t size);
bool zv_alloc_own_any (zv_alloc_t *a, uint64_t dva, uint32_t size);
int zv_alloc_own_children (zv_alloc_t *a, uint64_t parent,
                           const zv_alloc_ext_t *ext, size_t n, size_t *bad);
void zv_alloc_own_checked (zv_alloc_t *a, uint64_t parent);
/* The checker's leak report: each run of sectors allocated at import
 * that nothing has owned since (device, byte offset, length), in device
 * and offset order.  Nothing once own_begin has not run. */
typedef void (*zv_alloc_run_fn) (void *arg, unsigned vdev, uint64_t off,
                                 uint64_t len);
void zv_alloc_own_foreach_unowned (zv_alloc_t *a, zv_alloc_run_fn fn,
                                   void *arg);

/*
 * Iteration over allocated space (a mirror's resilver copies only it):
 * the first run of allocated sectors of device vdev that starts at or
 * after byte offset 'from', at most maxlen bytes of it, into *offp and
 * *lenp.  False when there is none.  A snapshot under the lock: space
 * allocated behind 'from' afterwards is not seen (the resilver's writes
 * reach the new side through the mirror anyway).
 */
bool zv_alloc_next_allocated (zv_alloc_t *a, unsigned vdev, uint64_t from,
                              uint64_t maxlen, uint64_t *offp,
                              uint64_t *lenp);

/* Space, in bytes. */
typedef struct zv_alloc_space {
  uint64_t as_total;      /* all data areas */
  uint64_t as_allocated;  /* bits set (including deferred frees) */
  uint64_t as_deferred;   /* freed, waiting for T+2 */
  uint64_t as_reserved;   /* reserved by writers, not yet allocated */
  uint64_t as_held;       /* freed, kept back by a hold (not in
                             as_deferred) */
} zv_alloc_space_t;
void zv_alloc_get_space (zv_alloc_t *a, zv_alloc_space_t *out);

/*
 * Open context: reserve 'bytes' for a write of the open txg.  Fails with
 * -ENOSPC when allocated + reserved + bytes would pass total - slop.
 * Lock-free (atomics).  The sync releases what it reserved with unreserve.
 */
int zv_alloc_reserve (zv_alloc_t *a, uint64_t bytes);
/* The same, leaving 'held' bytes more untouched: what the unused
 * reservations of the writer's other volumes keep (dsdir.c).  'covered':
 * the writer's own reservation covers the bytes, which may then take the
 * deferred frees as free, up to half the slop (alloc.c says why). */
int zv_alloc_reserve_held (zv_alloc_t *a, uint64_t bytes, uint64_t held,
                           bool covered);
/* For the write throttle: reserved + deferred bytes (*inuse) and that
 * plus what can still be reserved (*cap).  Lock-free, advisory. */
void zv_alloc_pressure (zv_alloc_t *a, uint64_t *inuse, uint64_t *cap);
/* What reserve keeps back of a pool of 'total' bytes, for the metadata a
 * sync writes (1/32, at least 4 MiB, at most half: tunables). */
uint64_t zv_alloc_slop (uint64_t total);
void zv_alloc_unreserve (zv_alloc_t *a, uint64_t bytes);

#endif /* ZV_ALLOC_H */
