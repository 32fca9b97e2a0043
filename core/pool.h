/*
 * pool.h: the pool as the layer above it (the volume, zvol.c) and the
 * unit tests see it.  The pool's structure is private to pool.c; the
 * volume reaches what it needs through these functions.
 *
 * A dataset is a record of the pool's dataset directory (format 2): a
 * volume's object (its block tree), the header of its intent log, its
 * size, block size and reservation.  A pool holds any number of them.  The volume holds its
 * dataset while it is open, opens the log from the header and attaches
 * it, so that every txg sync stores the log's header in the objset and
 * tells the log what is on disk.  Without an attached log the sync keeps
 * the header it has (as imported, claimed, or as the last sync left it).
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

/* The public zvol_pool_t (zvol.h) is this structure. */
typedef struct zvol_pool zv_pool_t;
typedef struct zv_pool_ds zv_pool_ds_t;

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
} zv_pool_config_t;

/* What zvol.h says of zvol_pool_config_init, _open, _start, _close. */
void zv_pool_config_init (zv_pool_config_t *pc);
int zv_pool_open (const zv_pool_config_t *pc, zv_pool_t **poolp);
int zv_pool_start (zv_pool_t *p);
int zv_pool_close (zv_pool_t *p);
const char *zv_pool_name (zv_pool_t *p);
uint64_t zv_pool_guid (zv_pool_t *p);
bool zv_pool_is_readonly (zv_pool_t *p);

/* Hold the dataset 'name' (NULL: the only one; -ENOENT when the pool
 * has none or several): -ENOENT, or -EBUSY when it is held already; the
 * error is logged.  'name' may be anything a client sent: only compared. */
int zv_pool_ds_hold (zv_pool_t *p, const char *name, zv_pool_ds_t **dsp);
void zv_pool_ds_rele (zv_pool_ds_t *ds);
/* The dataset 'name' (NULL: the only one) without a hold, or NULL: for
 * tests and statistics, which must not outlive the pool. */
zv_pool_ds_t *zv_pool_ds_find (zv_pool_t *p, const char *name);

const char *zv_pool_ds_name (const zv_pool_ds_t *ds);
zv_object_t *zv_pool_ds_object (zv_pool_ds_t *ds);
uint64_t zv_pool_ds_volsize (const zv_pool_ds_t *ds);
uint32_t zv_pool_ds_blksz (const zv_pool_ds_t *ds);
/* The log header as the last sync (or the import) left it. */
const zv_zil_header_t *zv_pool_ds_zil_header (const zv_pool_ds_t *ds);
/* Attach the dataset's open log (NULL detaches it: the log must have
 * nothing unsynced left, see zvol_close). */
void zv_pool_ds_attach_zil (zv_pool_ds_t *ds, zv_zil_t *zl);

/*
 * Volumes (what zvol.h says of zvol_volume_create, _destroy, _list).
 * Create and destroy return once a txg that holds the change is synced.
 */
int zv_pool_ds_create (zv_pool_t *p, const char *name, uint64_t volsize,
                       uint32_t blksz, uint64_t reservation);
int zv_pool_ds_destroy (zv_pool_t *p, const char *name);
typedef struct zv_pool_ds_info {
  char di_name[ZV_NAME_MAX];
  uint64_t di_id;
  uint64_t di_volsize;
  uint32_t di_blksz;
  bool di_open;
  uint64_t di_reservation;
  uint64_t di_referenced;         /* data bytes, as of the last sync */
  uint64_t di_used;               /* max (referenced, reservation) */
  uint64_t di_avail;              /* the pool's, plus its unused reservation */
  uint64_t di_creation_txg, di_creation_time;
} zv_pool_ds_info_t;
/* Up to max volumes into out; returns how many there are. */
size_t zv_pool_ds_list (zv_pool_t *p, zv_pool_ds_info_t *out, size_t max);
/* Free space of the pool less every volume's unused reservation. */
uint64_t zv_pool_avail (zv_pool_t *p);

/*
 * Import: the dataset record in directory slot 'slot' of the objset of
 * 'txg' (hostile data): 1 for a free slot (all zero), 0 when every field
 * alone is what this format's writers store, -EIO (logged, naming the
 * field) when not.  What needs the pool (unique ids and names, the log
 * header, the root's space) is checked after.  A buffer-level step of
 * import, so the fuzz harness reaches it without a pool.
 */
int zv_pool_dsrec_check (const zv_dsrec_phys_t *rec, uint64_t slot,
                         uint64_t pool_guid, uint64_t txg,
                         uint64_t next_dsid);

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

/*
 * Import: queue the entries of block blkid of a deferred-free list of txg
 * (count entries in the whole list) into the allocator.  Every entry must
 * be an allocated extent of whole sectors: -EIO, logged, at the first
 * that is not.  A buffer-level step of import, so the fuzz harness
 * (tests/fuzz) reaches it without a pool.
 */
int zv_pool_defer_load_block (zv_alloc_t *a, uint64_t txg, uint64_t count,
                              uint64_t blkid, const void *data);

/* Tests: wait until everything written so far is on disk. */
int zv_pool_sync (zv_pool_t *p);

#endif /* ZV_POOL_H */
