/*
 * import.h: reading a pool back from its devices (import.c), for pool.c
 * and, for its buffer-level steps, the fuzz harness.
 */
#ifndef ZV_IMPORT_H
#define ZV_IMPORT_H

#include "pool.h"
#include "alloc.h"
#include "freeq.h"

/* Import the pool on 'given' (every device of the configuration, open):
 * labels, the uberblock, its objset and every dataset, and the loss
 * check.  Nothing is written and no log is claimed yet. */
int zv_import_pool (const zv_pool_config_t *pc, zv_pool_t *p,
                    zv_dev_t **given);
/* A read-write import: claim every dataset's intent log before anything
 * syncs.  A read-only one: only say what the logs hold. */
int zv_import_claim_logs (zv_pool_t *p);
void zv_import_inspect_logs (zv_pool_t *p);
/* An accepted rewind, once every check passed: empty the uberblock slots
 * it gave up. */
int zv_import_ub_discard (zv_pool_t *p);
/* Drop what an uberblock's load built (the allocator, cache, objects and
 * datasets). */
void zv_import_unload (zv_pool_t *p);
/* The in-memory pool of its geometry (allocator, cache, the pool's
 * objects), shared by create and import. */
void zv_import_setup (zv_pool_t *p, const zv_pool_config_t *pc);
/* How to open the configuration's devices (RADOS ones: the cluster, and
 * with create the size of one not made yet). */
void zv_import_dev_opts (const zv_pool_config_t *pc, bool log,
                         zv_dev_opts_t *o);

/* The txg after which a dataset's tree blocks are its own (0 today:
 * snapshots set it); walks that take owners prune by it. */
uint64_t zv_import_ds_min_birth (const zv_pool_ds_t *ds);
/* Walk a dataset's tree taking every owner of it, as verify=full does
 * (the root excepted: import took it); fn (may be NULL) sees each block
 * after its owner is taken.  0, the walk's first error or fn's return. */
int zv_import_walk_tree (zv_pool_t *p, zv_pool_ds_t *ds, zv_dmu_walk_fn fn,
                         void *arg);
/* The same, but the pointers skip says true for are left alone with
 * what is under them: not read, not owned, not seen by fn
 * (zv_dmu_walk_since_skip). */
int zv_import_walk_tree_skip (zv_pool_t *p, zv_pool_ds_t *ds,
                              zv_dmu_skip_fn skip, void *skip_arg,
                              zv_dmu_walk_fn fn, void *arg);
/* The same for a queued free (freeq.c): every block or dead-list entry
 * it still holds takes its owner (its root or list object excepted);
 * fn sees the tree's blocks. */
int zv_import_walk_freeq (zv_pool_t *p, zv_freeq_ent_t *e, zv_dmu_walk_fn fn,
                          void *arg);
/* The checker's: the in-place blocks the datasets' logs would claim own
 * whatever of them is allocated and owned by nothing else. */
void zv_import_own_log_blocks (zv_pool_t *p);

/*
 * Import: queue the entries of block blkid of a deferred-free list of txg
 * (count entries in the whole list) into the allocator.  Every entry must
 * be an allocated extent of whole sectors: -EIO, logged, at the first
 * that is not.  A buffer-level step of import, so the fuzz harness
 * (tests/fuzz) reaches it without a pool.
 */
int zv_import_defer_load_block (zv_alloc_t *a, uint64_t txg,
                                uint64_t count, uint64_t blkid,
                                const void *data);

#endif /* ZV_IMPORT_H */
