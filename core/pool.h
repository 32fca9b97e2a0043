/*
 * pool.h: the pool as the layer above it (the volume, zvol.c) and the
 * unit tests see it.  The volume reaches what it needs through these
 * functions.
 *
 * Its datasets (the volumes) are dsdir.h's.  The pool's structure is
 * pool_impl.h's, shared by the pool's modules alone: pool.c (open,
 * create, close), import.c, psync.c (the txg sync) and dsdir.c.
 */
#ifndef ZV_POOL_H
#define ZV_POOL_H

#include <stdint.h>
#include <stdbool.h>

#include "format.h"
#include "zio.h"
#include "dmu.h"
#include "txg.h"
#include "zil.h"
#include "dbuf.h"
#include "dsdir.h"

/* The public zvol_pool_t (zvol.h) is this structure. */
typedef struct zvol_pool zv_pool_t;
typedef struct zv_pool_ds zv_pool_ds_t;
typedef struct zv_check zv_check_t;

/*
 * The configuration of an open: the public zvol_pool_config_t field for
 * field (zvol.c checks it with static_assert and passes it on whole), so
 * the pool needs nothing from the header of the layer above.
 */
typedef struct zv_pool_config {
  const char *pc_devices[ZV_MAX_DEVS];
  unsigned pc_ndevices;
  bool pc_create;
  bool pc_readonly;
  bool pc_rewind;
  const char *pc_name;
  uint64_t pc_volsize;
  uint32_t pc_volblocksize;
  bool pc_sparse;
  uint64_t pc_zil_size;
  const char *pc_logdevice;
  uint64_t pc_cache_size;
  zv_txg_tunables_t pc_txg;
  void (*pc_progress) (void *arg, const char *what, uint64_t done,
                       uint64_t total);
  void *pc_progress_arg;
  enum zv_zil_recover pc_zil_recover;
  bool pc_verify_full;
  const char *pc_ceph_conf;
  const char *pc_ceph_user;
  const char *pc_ceph_keyring;
  uint64_t pc_rados_size;
  uint64_t pc_rados_log_size;
  bool pc_rados_takeover;
  const char *pc_compression;  /* create: the first volume's (NULL: lz4) */
} zv_pool_config_t;

/* What zvol.h says of zvol_pool_config_init, _open, _start, _close. */
void zv_pool_config_init (zv_pool_config_t *pc);
int zv_pool_open (const zv_pool_config_t *pc, zv_pool_t **poolp);
/* The same for the offline checker: its import records what the owner
 * map refuses in ck instead of failing (check.c). */
int zv_pool_open_check (const zv_pool_config_t *pc, zv_check_t *ck,
                        zv_pool_t **poolp);
/* The live checker's view of a served pool 'live' as of its committed
 * txg 'txg' (check.c): a read-only import of that uberblock on live's
 * own devices (borrowed, not opened again: a second open would meet the
 * server's flock and O_EXCL), writing nothing and reading no log chain.
 * The caller keeps txg's blocks in place (zv_alloc_hold_begin) and
 * closes the view with zv_pool_close before live closes. */
int zv_pool_open_view (zv_pool_t *live, uint64_t txg, zv_check_t *ck,
                       zv_pool_t **viewp);
int zv_pool_start (zv_pool_t *p);
int zv_pool_close (zv_pool_t *p);
const char *zv_pool_name (zv_pool_t *p);
uint64_t zv_pool_guid (zv_pool_t *p);
bool zv_pool_is_readonly (zv_pool_t *p);

zv_spa_t *zv_pool_spa (zv_pool_t *p);
zv_txg_t *zv_pool_txg (zv_pool_t *p);
zv_dev_t *zv_pool_logdev (zv_pool_t *p);
/* The objset block of the last synced txg. */
const zv_blkptr_t *zv_pool_rootbp (zv_pool_t *p);
/* The txg the pool was imported or created at. */
uint64_t zv_pool_open_txg (zv_pool_t *p);
/* What the import was told to do with a damaged intent log (the replay
 * decides by it too). */
enum zv_zil_recover zv_pool_zil_recover (zv_pool_t *p);
/*
 * A write found no space: is some on its way back (frees deferred to a
 * later txg, or reservations that the next sync turns into exact
 * allocations)?
 */
bool zv_pool_space_pending (zv_pool_t *p);

/* For the statistics: the buffer cache, and the last sync's passes and
 * write cap. */
zv_dbuf_cache_t *zv_pool_cache (zv_pool_t *p);
void zv_pool_last_sync (zv_pool_t *p, uint64_t *passes, unsigned *write_cap);

/* Create a volume (zvol_volume_create): dsdir.h's zv_dsdir_create with
 * the ring of a volume created after its pool (zil_size). */
int zv_pool_volume_create (zv_pool_t *p, const char *name, uint64_t volsize,
                           uint32_t blksz, uint64_t reservation,
                           uint32_t compress);
/* The ring of a volume created after its pool (zil_size's). */
uint64_t zv_pool_default_ring (const zv_pool_t *p);
/* The same for a clone (snap.h's zv_snap_clone). */
int zv_pool_volume_clone (zv_pool_t *p, const char *snap, const char *name,
                          uint64_t reservation);

/* The background free of destroyed datasets (freeq.c): data bytes left
 * to free (and in *nents, when not NULL, how many datasets), and a wait
 * until nothing is left, syncing txgs, fn told after each (bytes left,
 * the most seen): 0, -EIO when a free stopped at a block that failed,
 * -EROFS on a read-only pool with something left, or a sync's error. */
typedef void (*zv_pool_progress_fn) (void *arg, uint64_t left,
                                     uint64_t total);
uint64_t zv_pool_freeing (zv_pool_t *p, uint64_t *nents);
int zv_pool_wait_freeing (zv_pool_t *p, const int cancel_fd[2],
                          zv_pool_progress_fn fn, void *arg);

/* Tests: wait until everything written so far is on disk. */
int zv_pool_sync (zv_pool_t *p);

#endif /* ZV_POOL_H */
