/*
 * snap.h: snapshots, clones and rollback of a pool's volumes (snap.c has
 * the theory), as zvol.c and the pool's modules see them.
 */
#ifndef ZV_SNAP_H
#define ZV_SNAP_H

#include <stdint.h>
#include <stdbool.h>

#include "format.h"
#include "dmu.h"

typedef struct zvol_pool zv_pool_t;
typedef struct zv_pool_ds zv_pool_ds_t;

/* Split "VOL@SNAP" (hostile: any bytes) into its parts: false when it
 * has no '@' or a part is too long (not otherwise checked). */
bool zv_snap_split (const char *name, char *vol, char *snap);

/*
 * The admin operations; each returns once a txg holding it has synced
 * (0), or a negative errno with the reason logged.
 */
/* Snapshot "VOL@SNAP" of a volume, while it is written: it holds every
 * write acknowledged before the call and none issued after it returns. */
int zv_snap_create (zv_pool_t *p, const char *name);
/* The snapshot that ends a receive into the volume (send.c): it carries
 * the stream's guid and clears the volume's receive flag in its txg. */
int zv_snap_create_received (zv_pool_t *p, const char *name, uint64_t guid);
/* Destroy snapshot "VOL@SNAP": refused (EBUSY) while it is open or a
 * clone comes from it. */
int zv_snap_destroy (zv_pool_t *p, const char *name);
/* Roll volume VOL back to its snapshot "VOL@SNAP": its newest, or, with
 * destroy_newer, an older one after destroying the newer ones.  Refused
 * (EBUSY) while the volume is open. */
int zv_snap_rollback (zv_pool_t *p, const char *name, bool destroy_newer);
/* A writable volume 'clone' made from snapshot "VOL@SNAP", sharing its
 * blocks; 'ring' as zv_dsdir_create's. */
int zv_snap_clone (zv_pool_t *p, const char *snap, const char *clone,
                   uint64_t reservation, uint64_t ring);

/* What destroying "VOL" or "VOL@SNAP" takes, dependents first (the
 * order the single destroys accept): with ZV_SNAP_DESTROY_SNAPSHOTS a
 * volume's snapshots, with ZV_SNAP_DESTROY_CLONES (which implies it)
 * also every clone of a snapshot that goes, recursively.  The names go
 * to out (up to max), their count to *np.  -ENOENT; -EBUSY when
 * something depends on the set that the flags leave out (the message
 * names it and the option). */
#define ZV_SNAP_DESTROY_SNAPSHOTS 1u
#define ZV_SNAP_DESTROY_CLONES    2u
int zv_snap_destroy_plan (zv_pool_t *p, const char *name, unsigned flags,
                          char (*out)[2 * ZV_NAME_MAX], size_t max,
                          size_t *np);

/* For dsdir.c: the birth rule's kill function of every volume (arg: its
 * dataset), and the operations of txg, run by its sync after every
 * volume's tree is written. */
int zv_snap_kill (void *arg, const zv_blkptr_t *bp, uint64_t txg);
int zv_snap_sync_tasks (zv_pool_t *p, uint64_t txg);
/* For import: link each snapshot to its volume and the one before it,
 * checking the chains (hostile data), and load every dead list. */
int zv_snap_link (zv_pool_t *p);
/* The dataset that comes after snapshot s in its chain (a snapshot or
 * the volume), under dd_lock or the sync thread's. */
zv_pool_ds_t *zv_snap_next (zv_pool_t *p, zv_pool_ds_t *s);

#endif /* ZV_SNAP_H */
