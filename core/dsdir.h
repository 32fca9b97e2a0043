/*
 * dsdir.h: the dataset directory (format 2): the pool's list of datasets
 * (volumes), one per record of the directory, as the volume (zvol.c), the
 * pool's other modules and the tests see it.
 *
 * A dataset is a record of the pool's dataset directory: a volume's
 * object (its block tree), the header of its intent log, its size, block
 * size and reservation.  A pool holds any number of them.  The volume
 * holds its dataset while it is open, opens the log from the header and
 * attaches it, so that every txg sync stores the log's header in the
 * directory and tells the log what is on disk.  Without an attached log
 * the sync keeps the header it has (as imported, claimed, or as the last
 * sync left it).
 */
#ifndef ZV_DSDIR_H
#define ZV_DSDIR_H

#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>

#include "format.h"
#include "dmu.h"
#include "zil.h"

typedef struct zvol_pool zv_pool_t;
typedef struct zv_pool_ds zv_pool_ds_t;

/* Hold the dataset 'name' (NULL: the only one; -ENOENT when the pool
 * has none or several): -ENOENT, or -EBUSY when it is held already; the
 * error is logged.  'name' may be anything a client sent: only compared. */
int zv_dsdir_hold (zv_pool_t *p, const char *name, zv_pool_ds_t **dsp);
void zv_dsdir_rele (zv_pool_ds_t *ds);
/* The dataset 'name' (NULL: the only one) without a hold, or NULL: for
 * tests and statistics, which must not outlive the pool. */
zv_pool_ds_t *zv_dsdir_find (zv_pool_t *p, const char *name);

const char *zv_dsdir_name (const zv_pool_ds_t *ds);
bool zv_dsdir_is_snapshot (const zv_pool_ds_t *ds);
zv_object_t *zv_dsdir_object (zv_pool_ds_t *ds);
uint64_t zv_dsdir_volsize (const zv_pool_ds_t *ds);
uint32_t zv_dsdir_blksz (const zv_pool_ds_t *ds);
/* The log header as the last sync (or the import) left it. */
const zv_zil_header_t *zv_dsdir_zil_header (const zv_pool_ds_t *ds);
/* Attach the dataset's open log (NULL detaches it: the log must have
 * nothing unsynced left, see zvol_close). */
void zv_dsdir_attach_zil (zv_pool_ds_t *ds, zv_zil_t *zl);

/*
 * Volumes (what zvol.h says of zvol_volume_create, _destroy, _list).
 * Create and destroy return once a txg that holds the change is synced.
 * A created volume's log is the pool's log device when no volume has it,
 * else a ring of 'ring' bytes in the pool (pool.c: zil_size's).
 */
int zv_dsdir_create (zv_pool_t *p, const char *name, uint64_t volsize,
                     uint32_t blksz, uint64_t reservation, uint64_t ring,
                     uint32_t compress);
/* Set a volume's compression property (compress.h), live: the next
 * sync's writes use it, and it is on disk when this returns.  -ENOENT,
 * -EINVAL (a snapshot, a bad value), -EROFS. */
int zv_dsdir_set_compress (zv_pool_t *p, const char *name,
                           uint32_t compress);
int zv_dsdir_destroy (zv_pool_t *p, const char *name);
typedef struct zv_dsdir_info {
  char di_name[2 * ZV_NAME_MAX];  /* "VOL" or "VOL@SNAP" */
  uint64_t di_id;
  uint64_t di_volsize;
  uint32_t di_blksz;
  bool di_open;
  uint64_t di_reservation;
  uint64_t di_referenced;         /* data bytes, as of the last sync */
  uint64_t di_used;               /* snap.c's theory comment */
  uint64_t di_avail;              /* the pool's, plus its unused reservation */
  uint64_t di_creation_txg, di_creation_time;
  uint32_t di_kind;               /* ZV_DS_KIND_* */
  uint64_t di_written;
  uint64_t di_usedbysnapshots;    /* a volume's: its snapshots' dead lists */
  char di_origin[2 * ZV_NAME_MAX]; /* a clone's snapshot, else "" */
  uint32_t di_compress;           /* the property (compress.h) */
  uint64_t di_lwritten;           /* di_written's logical bytes (volumes) */
} zv_dsdir_info_t;
/* Up to max datasets of the kinds in 'kinds' (bit 1 << ZV_DS_KIND_*)
 * into out, each volume followed by its snapshots oldest first; returns
 * how many there are. */
size_t zv_dsdir_list (zv_pool_t *p, unsigned kinds, zv_dsdir_info_t *out,
                      size_t max);
/* Free space of the pool less every volume's unused reservation (and
 * the indirect blocks it keeps room for: zv_dsdir_resv_unused). */
uint64_t zv_dsdir_avail (zv_pool_t *p);
/* What a reservation of 'resv' bytes of a volume of volsize / vbs holds
 * besides its data: the indirect blocks of that much data, every copy. */
uint64_t zv_dsdir_resv_meta (uint64_t resv, uint64_t volsize, uint32_t vbs);
/* What ds's reservation keeps of the pool while its data ('used': as of
 * the last sync, plus what its writers reserved since) is below it. */
uint64_t zv_dsdir_resv_unused (const zv_pool_ds_t *ds, uint64_t used);

/*
 * Import: the dataset record in directory slot 'slot' of the objset of
 * 'txg' (hostile data): 1 for a free slot (all zero), 0 when every field
 * alone is what this format's writers store, -EIO (logged, naming the
 * field) when not.  What needs the pool (unique ids and names, the log
 * header, the root's space) is checked after.  A buffer-level step of
 * import, so the fuzz harness reaches it without a pool.
 */
int zv_dsdir_rec_check (const zv_dsrec_phys_t *rec, uint64_t slot,
                        uint64_t pool_guid, uint64_t txg,
                        uint64_t next_dsid);

/*
 * For the pool's modules (pool.c, import.c, psync.c), which hold the
 * pool's structure (pool_impl.h).
 */
/* What a new dataset is made of, whether created or imported. */
typedef struct zv_dsdir_init {
  uint32_t di_kind;               /* 0 means ZV_DS_KIND_VOLUME */
  const char *di_name;
  uint64_t di_id, di_slot;
  uint64_t di_parent_id, di_origin_id;
  uint64_t di_prev_snap_id, di_prev_snap_txg;
  uint64_t di_written, di_used;   /* as the record says */
  uint64_t di_lwritten;           /* di_written's logical bytes */
  uint32_t di_compress;           /* the property (compress.h) */
  bool di_pending;
  uint64_t di_volsize;
  uint32_t di_blksz;
  uint64_t di_reservation;
  uint64_t di_creation_txg, di_creation_time;
  uint64_t di_guid;               /* a snapshot's; 0: derived (dsdir.c) */
  bool di_recv;                   /* ZV_DR_F_RECV_INCOMPLETE */
  const zv_dnode_phys_t *di_volume;
  const zv_zil_header_t *di_zil;
} zv_dsdir_init_t;

/* A pool's directory: ready at open (empty), gone at its end (after
 * zv_dsdir_drop_all).  held: is a dataset held (a volume has it open)?
 * The first one's name into name (len bytes) if so. */
void zv_dsdir_init (zv_pool_t *p);
void zv_dsdir_fini (zv_pool_t *p);
bool zv_dsdir_held (zv_pool_t *p, char *name, size_t len);
/* Make a dataset and put it on the pool's list. */
zv_pool_ds_t *zv_dsdir_add (zv_pool_t *p, const zv_dsdir_init_t *di);
/* Drop every dataset (export, or an uberblock whose load failed). */
void zv_dsdir_drop_all (zv_pool_t *p);
/* Check and make a volume whose record txg creation_txg writes; the
 * caller holds dd_admin_lock (see dsdir.c). */
int zv_dsdir_create_locked (zv_pool_t *p, const char *name, uint64_t volsize,
                            uint32_t blksz, uint64_t reservation,
                            uint64_t ring, uint64_t creation_txg,
                            bool check_space, zv_pool_ds_t *origin,
                            uint32_t compress);
/* An admin change needs a writable pool: 0, or -EROFS logged as "cannot
 * WHAT" (create, destroy, snapshots). */
int zv_dsdir_admin_begin (zv_pool_t *p, const char *what);
/* The dataset of a kind (a snapshot: of volume parent_id) called name,
 * not destroyed, or NULL; dd_lock held. */
zv_pool_ds_t *zv_dsdir_lookup_locked (zv_pool_t *p, uint32_t kind,
                                      uint64_t parent_id, const char *name);
/* A new dataset's id and its record's slot (dd_lock held): -ENOSPC
 * (logged) when the directory is full. */
int zv_dsdir_new_slot_locked (zv_pool_t *p, uint64_t *id, uint64_t *slot);
/* Give a volume (closed, nothing dirty) the tree of dn (rollback). */
void zv_dsdir_reopen (zv_pool_ds_t *ds, const zv_dnode_phys_t *dn);
/* "VOL" or "VOL@SNAP" into buf. */
void zv_dsdir_fullname (const zv_pool_ds_t *ds, char *buf, size_t len);
/* Step 2 of the txg sync (psync.c), and the drop of the destroyed
 * datasets once it is on disk. */
int zv_dsdir_sync (zv_pool_t *p, uint64_t txg);
void zv_dsdir_reap (zv_pool_t *p);
/* The figures the listing shows, from the datasets' state (each sync,
 * and once at import). */
void zv_dsdir_publish (zv_pool_t *p);
/* What a volume's name, size and block size may be (create and import). */
bool zv_dsdir_name_valid (const char *name);
bool zv_dsdir_volsize_valid (uint64_t v);
bool zv_dsdir_blksz_valid (uint32_t vbs);
/* Number of volume blocks. */
uint64_t zv_dsdir_nblocks (uint64_t volsize, uint32_t vbs);

#endif /* ZV_DSDIR_H */
