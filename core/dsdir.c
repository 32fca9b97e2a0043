/*
 * dsdir.c: the dataset directory: the pool's datasets (volumes), their
 * records, their part of the txg sync, create, destroy and list.
 *
 * Theory.  The pool keeps a list of datasets (volumes), one per record
 * of the directory (a flat object of 1 KiB checksummed records, format
 * 2); a volume holds its dataset while open and attaches its log to it
 * (dsdir.h).  The pool never calls up into the volume: what the sync
 * needs of a volume is its object (dmu) and its log (zil), both below.
 * Create (zv_dsdir_create) allocates and zeroes the new volume's ring in
 * open context, adds it to the list under a hold of the open txg and
 * waits for that txg: a crash before it leaves no record and a ring
 * allocated only in memory, after it the whole volume.  Destroy marks it
 * under a hold; that txg's sync frees its ring and dead list's object
 * and hands its synced tree to the pool's free queue (freeq.c), whose
 * record takes the volume's slot in the same txg: the later syncs free
 * the tree a bounded share at a time, in the background.  The dataset is
 * dropped from the list once the txg is on disk (zv_dsdir_reap); its
 * name is free from the destroy on.  Each sync works on a copy of
 * the list taken at its start (dd_sync_dss), with each dataset's destroy
 * mark as of then (ds_freeing), so a create or destroy that races it
 * belongs to the next txg.  A record is rebuilt every txg and sealed
 * (checksummed) and written only when it changed, so each snapshot costs
 * a sync a few hundred instructions (bench/core-bench txg-sync-snap).
 * Import checks each record alone here
 * (zv_dsdir_rec_check: hostile data) and against the pool in import.c.
 *
 * Reservations (as ZFS's refreservation): a volume's writes reserve
 * their blocks only if the pool keeps what the other volumes'
 * reservations still lack (dsdir_held, the object's zv_dmu_held_fn;
 * zv_alloc_reserve_held), so a volume can always write its reservation.
 * What a reservation holds is its data and the indirect blocks of that
 * data at their size and copies (zv_dsdir_resv_unused), as OpenZFS's
 * refreservation of a zvol counts its metadata; the old copies a sync's
 * rewrites leave for two txgs are the slop's, which a write its own
 * reservation covers may borrow (alloc.c).  dd_resv_total, the
 * undestroyed volumes' reservations so counted, is the lock-free bound
 * a write tries first.
 *
 * State of a dataset: on the list (created or imported) -> held (a
 * volume has it open) -> released -> destroy marked -> freed by the
 * next sync -> dropped once that txg is on disk.  Snapshots are datasets
 * of this list too (kind 2, snap.c): pending until the sync of their txg
 * gives them their root, held any number of times (read-only), and
 * destroyed by their own task, which frees what only they held before
 * the sync here clears their record.  A volume a receive
 * writes (send.c) is held by it and has ds_recv set, stored as
 * ZV_DR_F_RECV_INCOMPLETE in its record: no open while it is set.
 *
 * Locking: dd_lock guards the list of datasets, their holds, destroy
 * marks, attached logs and stored log headers, which volumes and admin
 * calls change while the sync thread reads them; dd_admin_lock (taken
 * before it) makes creates and destroys one at a time (the log device
 * goes to one volume).  dd_resv_lock, innermost (writers may take it
 * under a buffer's db_mtx, dmu.c), also guards the list and the destroy
 * marks, for dsdir_held.  The sync's copy of the list and each dataset's
 * ds_freeing and ds_rec are the sync thread's alone.
 */
#include <config.h>

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <stdlib.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "pool_impl.h"
#include "label.h"
#include "dbuf.h"
#include "mem.h"
#include "flat.h"
#include "tunable.h"
#include "snap.h"
#include "compress.h"

/* Number of volume blocks. */
uint64_t
zv_dsdir_nblocks (uint64_t volsize, uint32_t vbs)
{
  return (volsize + vbs - 1) / vbs;
}

/* A dataset's record, its checksum left zero (dsdir_seal). */
static void
dsdir_record (zv_pool_ds_t *ds, const zv_zil_header_t *zh, bool recv,
              zv_dsrec_phys_t *rec)
{
  uint64_t refd;

  memset (rec, 0, sizeof *rec);
  rec->dr_magic = ZV_DSREC_MAGIC;
  rec->dr_version = ZV_DSREC_VERSION;
  rec->dr_kind = ds->ds_kind;
  rec->dr_id = ds->ds_id;
  rec->dr_parent_id = ds->ds_parent_id;
  rec->dr_origin_id = ds->ds_origin_id;
  rec->dr_prev_snap_id = ds->ds_prev_snap_id;
  rec->dr_prev_snap_txg = ds->ds_prev_snap_txg;
  rec->dr_creation_txg = ds->ds_creation_txg;
  rec->dr_creation_time = ds->ds_creation_time;
  rec->dr_flags = recv ? ZV_DR_F_RECV_INCOMPLETE : 0;
  if (ds->ds_kind == ZV_DS_KIND_SNAPSHOT)
    rec->dr_guid = ds->ds_guid;
  rec->dr_volsize = ds->ds_volsize;
  rec->dr_volblocksize = ds->ds_blksz;
  rec->dr_reservation = ds->ds_reservation;
  rec->dr_compress = atomic_load_explicit (&ds->ds_obj.ob_compress,
                                           memory_order_relaxed);
  memcpy (rec->dr_name, ds->ds_name,
          strnlen (ds->ds_name, sizeof rec->dr_name - 1));
  zv_dmu_object_phys (&ds->ds_obj, &rec->dr_volume);
  rec->dr_volume.dn_size = ds->ds_volsize;
  refd = zv_bp_is_hole (&rec->dr_volume.dn_root) ? 0
    : rec->dr_volume.dn_root.bp_fill * ds->ds_blksz;
  rec->dr_referenced = refd;
  if (ds->ds_kind == ZV_DS_KIND_SNAPSHOT) {
    rec->dr_used = ds->ds_used;
    rec->dr_written = ds->ds_snap_written;
  }
  else {
    rec->dr_used = rec->dr_written = ds->ds_obj.ob_written;
    rec->dr_lwritten = ds->ds_obj.ob_lwritten;
    rec->dr_zil = *zh;
  }
  rec->dr_deadlist_bytes = ds->ds_deadlist.dl_bytes;
  zv_deadlist_phys (&ds->ds_deadlist, &rec->dr_deadlist);
}

/* Seal a record for the dataset's slot. */
static void
dsdir_seal (zv_pool_t *p, const zv_pool_ds_t *ds, zv_dsrec_phys_t *rec)
{
  zv_cksum_compute (rec, sizeof *rec, zv_dsrec_seed (p->p_spa.spa_guid,
                                                     ds->ds_slot),
                    &rec->dr_cksum);
}

/* Directory fill: the records of block blkid (free slots stay zero). */
static void
dsdir_fill (void *arg, uint64_t blkid, void *buf)
{
  zv_pool_t *p = arg;

  for (size_t i = 0; i < p->p_dd.dd_sync_nds; i++) {
    zv_pool_ds_t *ds = p->p_dd.dd_sync_dss[i];
    if (!ds->ds_freeing && ds->ds_slot / ZV_DSDIR_PER_BLK == blkid)
      memcpy ((uint8_t *) buf + (ds->ds_slot % ZV_DSDIR_PER_BLK)
              * ZV_DSREC_SIZE, &ds->ds_rec, ZV_DSREC_SIZE);
  }
  zv_freeq_fill (p, blkid, buf);
}

/* Free what a destroyed volume held at once (its ring, its dead list's
 * object), and queue its synced tree for the background free. */
static int
dsdir_free (zv_pool_t *p, zv_pool_ds_t *ds, uint64_t txg)
{
  zv_spa_t *spa = &p->p_spa;
  const zv_zil_header_t *zh = &ds->ds_zil_hdr;
  zv_dnode_phys_t dn;

  /* zvol_volume_destroy waited for a txg after the last close: nothing
   * is dirty, but a suspended pool's leftovers must not be written. */
  zv_dmu_object_discard_dirty (&ds->ds_obj);
  /* A snapshot's destroy queued what it held in its own task (snap.c). */
  if (ds->ds_kind == ZV_DS_KIND_SNAPSHOT)
    return 0;
  zv_dmu_object_phys (&ds->ds_obj, &dn);
  if (zh->zh_nslots > 0 && ZV_DVA_VDEV (zh->zh_ring_dva) != ZV_LOG_VDEV)
    zv_alloc_free_defer (spa->spa_alloc, txg, zh->zh_ring_dva,
                         (uint32_t) (zh->zh_nslots * zh->zh_blksz));
  zv_deadlist_free_obj (&ds->ds_deadlist, txg);
  /* Without snapshots of its own (destroy refuses a volume with some),
   * what a clone shares with its origin is the origin's: the queue
   * frees only what was born after its line. */
  return zv_freeq_add_tree (p, ds, &dn, txg);
}

/* The figures list shows, as this sync (or the import) leaves them
 * (snap.c: space). */
void
zv_dsdir_publish (zv_pool_t *p)
{
  pthread_mutex_lock (&p->p_dd.dd_lock);
  for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
    zv_pool_ds_t *ds = p->p_dd.dd_dss[i];
    if (ds->ds_kind == ZV_DS_KIND_VOLUME)
      ds->ds_pub_snapused = ds->ds_deadlist.dl_bytes;
  }
  for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
    zv_pool_ds_t *ds = p->p_dd.dd_dss[i];
    if (ds->ds_kind == ZV_DS_KIND_SNAPSHOT) {
      ds->ds_pub_used = ds->ds_used;
      ds->ds_pub_written = ds->ds_snap_written;
      if (ds->ds_parent && !ds->ds_destroy)
        ds->ds_parent->ds_pub_snapused += ds->ds_deadlist.dl_bytes;
    }
    else {
      ds->ds_pub_written = ds->ds_obj.ob_written;
      ds->ds_pub_lwritten = ds->ds_obj.ob_lwritten;
    }
  }
  for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
    zv_pool_ds_t *ds = p->p_dd.dd_dss[i];
    if (ds->ds_kind == ZV_DS_KIND_VOLUME)
      ds->ds_pub_used = ds->ds_pub_written + ds->ds_pub_snapused
        + (ds->ds_reservation > ds->ds_pub_written
           ? ds->ds_reservation - ds->ds_pub_written : 0);
  }
  pthread_mutex_unlock (&p->p_dd.dd_lock);
}

/*
 * Step 2 of the theory comment, for every dataset of the sync's list:
 * free the destroyed ones, write the others' trees, then the directory
 * blocks whose records changed (a record is rebuilt every txg and
 * compared with the one last written).  The log headers are taken here,
 * before the space maps converge: a header only moves its head past
 * blocks whose records are all synced by this txg.
 */
int
zv_dsdir_sync (zv_pool_t *p, uint64_t txg)
{
  uint64_t size = 0;
  int r = 0;

  pthread_mutex_lock (&p->p_dd.dd_lock);
  p->p_dd.dd_sync_nds = 0;
  for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
    ZV_GROW (p->p_dd.dd_sync_dss, p->p_dd.dd_sync_nds, p->p_dd.dd_sync_cap,
             16);
    p->p_dd.dd_sync_dss[p->p_dd.dd_sync_nds++] = p->p_dd.dd_dss[i];
    p->p_dd.dd_dss[i]->ds_freeing = p->p_dd.dd_dss[i]->ds_destroy;
  }
  pthread_mutex_unlock (&p->p_dd.dd_lock);

  for (size_t i = 0; i < p->p_dd.dd_sync_nds && r == 0; i++) {
    zv_pool_ds_t *ds = p->p_dd.dd_sync_dss[i];
    r = ds->ds_freeing ? dsdir_free (p, ds, txg)
      : ds->ds_kind == ZV_DS_KIND_VOLUME ? zv_dmu_sync (&ds->ds_obj, txg)
      : 0;
  }
  /* Snapshots, their destroys and rollbacks of this txg: after every
   * tree of the txg is written (snap.c). */
  if (r == 0)
    r = zv_snap_sync_tasks (p, txg);
  /* The background free's share of this txg (freeq.c). */
  if (r == 0)
    r = zv_freeq_sync (p, txg);
  for (size_t i = 0; i < p->p_dd.dd_sync_nds && r == 0; i++) {
    zv_pool_ds_t *ds = p->p_dd.dd_sync_dss[i];
    if (!ds->ds_freeing && !ds->ds_pending)
      r = zv_deadlist_sync (&ds->ds_deadlist, txg);
  }
  for (size_t i = 0; i < p->p_dd.dd_sync_nds && r == 0; i++) {
    zv_pool_ds_t *ds = p->p_dd.dd_sync_dss[i];
    zv_dsrec_phys_t rec;
    zv_zil_header_t zh;
    bool recv;

    if (ds->ds_freeing) {
      zv_flat_dirty (&p->p_dd.dd_flat, ds->ds_slot / ZV_DSDIR_PER_BLK);
      continue;
    }
    if (ds->ds_pending)
      continue;
    pthread_mutex_lock (&p->p_dd.dd_lock);
    if (ds->ds_zil)
      zv_zil_sync_header (ds->ds_zil, txg, &ds->ds_zil_hdr);
    zh = ds->ds_zil_hdr;
    recv = ds->ds_recv;
    pthread_mutex_unlock (&p->p_dd.dd_lock);
    dsdir_record (ds, &zh, recv, &rec);
    atomic_store_explicit (&ds->ds_referenced, rec.dr_referenced,
                           memory_order_relaxed);
    atomic_store_explicit (&ds->ds_unique, rec.dr_written,
                           memory_order_relaxed);
    /* The same fields have the same checksum (the slot and the pool's
     * guid never change): only a changed record is sealed. */
    if (memcmp (&rec, &ds->ds_rec, offsetof (zv_dsrec_phys_t, dr_cksum))
        != 0) {
      dsdir_seal (p, ds, &rec);
      ds->ds_rec = rec;
      zv_flat_dirty (&p->p_dd.dd_flat, ds->ds_slot / ZV_DSDIR_PER_BLK);
    }
    size = ZV_MAX (size, (ds->ds_slot + 1) * ZV_DSREC_SIZE);
  }
  if (r < 0)
    return r;
  zv_dsdir_publish (p);
  p->p_dd.dd_flat.fl_size = ZV_MAX (size, zv_freeq_dir_size (p));
  return zv_flat_sync (&p->p_dd.dd_flat, txg, dsdir_fill, p);
}

/* After a sync: the destroyed datasets are gone from disk; drop them. */
void
zv_dsdir_reap (zv_pool_t *p)
{
  pthread_mutex_lock (&p->p_dd.dd_lock);
  for (size_t i = 0; i < p->p_dd.dd_nds;) {
    zv_pool_ds_t *ds = p->p_dd.dd_dss[i];
    bool synced = false;

    /* Only a freed one is looked for in the sync's list: a walk of it
     * for every dataset made each txg's end quadratic in snapshots. */
    for (size_t j = 0; ds->ds_freeing && j < p->p_dd.dd_sync_nds && !synced;
         j++)
      synced = p->p_dd.dd_sync_dss[j] == ds;
    if (!synced || !ds->ds_freeing) {
      i++;
      continue;
    }
    pthread_mutex_lock (&p->p_dd.dd_resv_lock);
    p->p_dd.dd_dss[i] = p->p_dd.dd_dss[--p->p_dd.dd_nds];
    pthread_mutex_unlock (&p->p_dd.dd_resv_lock);
    zv_dmu_object_close (&ds->ds_obj);
    zv_deadlist_fini (&ds->ds_deadlist);
    free (ds);
  }
  p->p_dd.dd_sync_nds = 0;
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  zv_freeq_reap (p, p->p_synced_txg);
}

/* The descriptor of a new (empty) volume. */
static void
dsdir_new_volume (uint64_t volsize, uint32_t blksz, zv_dnode_phys_t *dn)
{
  uint64_t nb = zv_dsdir_nblocks (volsize, blksz);

  memset (dn, 0, sizeof *dn);
  dn->dn_type = ZV_BT_VOLDATA;
  dn->dn_datablksz = blksz;
  dn->dn_nblocks = nb;
  dn->dn_nlevels = zv_dmu_nlevels (nb);
  dn->dn_size = volsize;
}

/* The directory of a pool being opened: empty, its locks ready. */
void
zv_dsdir_init (zv_pool_t *p)
{
  pthread_mutex_init (&p->p_dd.dd_lock, NULL);
  pthread_mutex_init (&p->p_dd.dd_admin_lock, NULL);
  pthread_mutex_init (&p->p_dd.dd_resv_lock, NULL);
}

/* After zv_dsdir_drop_all: what is left of an empty directory. */
void
zv_dsdir_fini (zv_pool_t *p)
{
  ZV_VERIFY3U (p->p_dd.dd_nds, ==, 0);
  free (p->p_dd.dd_dss);
  free (p->p_dd.dd_sync_dss);
  pthread_mutex_destroy (&p->p_dd.dd_lock);
  pthread_mutex_destroy (&p->p_dd.dd_admin_lock);
  pthread_mutex_destroy (&p->p_dd.dd_resv_lock);
}

/* Is a dataset held (a volume has it open)?  The first one's name into
 * name (len bytes) if so. */
bool
zv_dsdir_held (zv_pool_t *p, char *name, size_t len)
{
  bool held = false;

  pthread_mutex_lock (&p->p_dd.dd_lock);
  for (size_t i = 0; i < p->p_dd.dd_nds && !held; i++) {
    const zv_pool_ds_t *ds = p->p_dd.dd_dss[i];
    if ((held = ds->ds_held || ds->ds_snap_holds > 0) && len > 0)
      zv_dsdir_fullname (ds, name, len);
  }
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  return held;
}

/* See dsdir.h: zv_dmu_tree_bytes of the reservation's blocks. */
uint64_t
zv_dsdir_resv_meta (uint64_t resv, uint64_t volsize, uint32_t vbs)
{
  return resv == 0 ? 0
    : zv_dmu_tree_bytes (zv_dsdir_nblocks (resv, vbs),
                         zv_dsdir_nblocks (volsize, vbs));
}

/*
 * See dsdir.h: the rest of its data, and every indirect block the whole
 * reservation's data needs (ds_resv_meta; the sync allocates them
 * without a reservation).  The indirect blocks written already are
 * counted twice until the reservation is used up: which exist is known
 * only to a walk of the tree, and the excess is at most ds_resv_meta
 * (0.8% of the reservation with 16 KiB blocks, 3% with 4 KiB ones).
 */
uint64_t
zv_dsdir_resv_unused (const zv_pool_ds_t *ds, uint64_t used)
{
  return ds->ds_reservation > used
    ? ds->ds_reservation - used + ds->ds_resv_meta : 0;
}

/*
 * The object's zv_dmu_held_fn: what a write to ds must leave free for the
 * other volumes' reservations, and (*own) what its own still covers.  A
 * volume's use of its reservation is its data as of the last sync plus
 * what its writers reserved since (an overwrite counts whole: until its
 * txg syncs it takes new space, and the old block comes back two txgs
 * later).  The bound is every other volume's whole reservation.
 */
static uint64_t
dsdir_held (void *arg, bool exact, uint64_t *own)
{
  zv_pool_ds_t *ds = arg;
  zv_dsdir_t *dd = &ds->ds_pool->p_dd;
  uint64_t held = 0;
  uint64_t mine = atomic_load_explicit (&ds->ds_unique, memory_order_relaxed)
    + zv_dmu_object_reserved (&ds->ds_obj);

  *own = ds->ds_reservation > mine ? ds->ds_reservation - mine : 0;
  if (!exact) {
    uint64_t total = atomic_load_explicit (&dd->dd_resv_total,
                                           memory_order_relaxed);
    uint64_t whole = zv_dsdir_resv_unused (ds, 0);

    return total > whole ? total - whole : 0;
  }
  pthread_mutex_lock (&dd->dd_resv_lock);
  for (size_t i = 0; i < dd->dd_nds; i++) {
    zv_pool_ds_t *o = dd->dd_dss[i];
    uint64_t used;

    if (o == ds || o->ds_destroy || o->ds_reservation == 0)
      continue;
    used = atomic_load_explicit (&o->ds_unique, memory_order_relaxed)
      + zv_dmu_object_reserved (&o->ds_obj);
    held += zv_dsdir_resv_unused (o, used);
  }
  pthread_mutex_unlock (&dd->dd_resv_lock);
  return held;
}

/* Make a dataset and put it on the pool's list. */
zv_pool_ds_t *
zv_dsdir_add (zv_pool_t *p, const zv_dsdir_init_t *di)
{
  zv_pool_ds_t *ds = zv_calloc (1, sizeof *ds);

  ds->ds_pool = p;
  snprintf (ds->ds_name, sizeof ds->ds_name, "%s", di->di_name);
  ds->ds_kind = di->di_kind ? di->di_kind : ZV_DS_KIND_VOLUME;
  ds->ds_id = di->di_id;
  ds->ds_parent_id = di->di_parent_id;
  ds->ds_origin_id = di->di_origin_id;
  ds->ds_prev_snap_id = di->di_prev_snap_id;
  ds->ds_prev_snap_txg = di->di_prev_snap_txg;
  ds->ds_pending = di->di_pending;
  ds->ds_slot = di->di_slot;
  ds->ds_volsize = di->di_volsize;
  ds->ds_blksz = di->di_blksz;
  ds->ds_reservation = di->di_reservation;
  ds->ds_resv_meta = zv_dsdir_resv_meta (di->di_reservation, di->di_volsize,
                                         di->di_blksz);
  ds->ds_creation_txg = di->di_creation_txg;
  ds->ds_creation_time = di->di_creation_time;
  ds->ds_recv = di->di_recv;
  ds->ds_guid = di->di_guid;
  if (ds->ds_kind == ZV_DS_KIND_SNAPSHOT && ds->ds_guid == 0) {
    /* A record from before guids: one derived from what identifies it
     * in this pool, the same at every import. */
    uint64_t who[3] = { p->p_spa.spa_guid, ds->ds_id, ds->ds_creation_txg };
    zv_cksum_t c;
    zv_cksum_compute (who, sizeof who, ZV_DSREC_MAGIC, &c);
    ds->ds_guid = c.zc_word[0] | 1;
  }
  if (di->di_zil)
    ds->ds_zil_hdr = *di->di_zil;
  zv_deadlist_init (&ds->ds_deadlist, &p->p_spa);
  zv_dmu_object_open (&ds->ds_obj, &p->p_spa, p->p_cache,
                      ZV_OBJ_VOLUME, di->di_volume);
  ds->ds_obj.ob_snap_txg = ds->ds_prev_snap_txg;
  atomic_store_explicit (&ds->ds_obj.ob_compress, di->di_compress,
                         memory_order_relaxed);
  atomic_store_explicit (&ds->ds_referenced, zv_bp_is_hole
                         (&di->di_volume->dn_root) ? 0
                         : di->di_volume->dn_root.bp_fill * di->di_blksz,
                         memory_order_relaxed);
  if (ds->ds_kind == ZV_DS_KIND_SNAPSHOT) {
    ds->ds_used = ds->ds_pub_used = di->di_used;
    ds->ds_snap_written = ds->ds_pub_written = di->di_written;
  }
  else {
    ds->ds_obj.ob_written = ds->ds_pub_written = di->di_written;
    ds->ds_obj.ob_lwritten = ds->ds_pub_lwritten = di->di_lwritten;
    ds->ds_pub_used = di->di_used;
    atomic_store_explicit (&ds->ds_unique, di->di_written,
                           memory_order_relaxed);
    zv_dmu_object_set_held (&ds->ds_obj, dsdir_held, ds);
    zv_dmu_object_set_kill (&ds->ds_obj, zv_snap_kill, ds);
  }
  pthread_mutex_lock (&p->p_dd.dd_lock);
  pthread_mutex_lock (&p->p_dd.dd_resv_lock);
  /* (At import a volume may come after its snapshots: zv_snap_link.) */
  for (size_t i = 0; i < p->p_dd.dd_nds && ds->ds_parent_id; i++)
    if (p->p_dd.dd_dss[i]->ds_id == ds->ds_parent_id)
      ds->ds_parent = p->p_dd.dd_dss[i];
  ZV_GROW (p->p_dd.dd_dss, p->p_dd.dd_nds, p->p_dd.dd_cap, 8);
  p->p_dd.dd_dss[p->p_dd.dd_nds++] = ds;
  atomic_fetch_add_explicit (&p->p_dd.dd_resv_total,
                             zv_dsdir_resv_unused (ds, 0),
                             memory_order_relaxed);
  pthread_mutex_unlock (&p->p_dd.dd_resv_lock);
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  return ds;
}

/* Drop every dataset (export, or an uberblock whose load failed). */
void
zv_dsdir_drop_all (zv_pool_t *p)
{
  for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
    zv_pool_ds_t *ds = p->p_dd.dd_dss[i];
    /* No volume may still have it (zv_pool_close refuses while one does). */
    ZV_VERIFY (!ds->ds_held && ds->ds_zil == NULL);
    /* Anything still dirty belongs to a suspended pool or a failed
     * open: it cannot be written, and was never acknowledged durable. */
    zv_dmu_object_discard_dirty (&ds->ds_obj);
    zv_dmu_object_close (&ds->ds_obj);
    zv_deadlist_fini (&ds->ds_deadlist);
    free (ds);
  }
  p->p_dd.dd_nds = 0;
  p->p_dd.dd_sync_nds = 0;
  atomic_store_explicit (&p->p_dd.dd_resv_total, 0, memory_order_relaxed);
}

zv_pool_ds_t *
zv_dsdir_lookup_locked (zv_pool_t *p, uint32_t kind, uint64_t parent_id,
                        const char *name)
{
  for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
    zv_pool_ds_t *ds = p->p_dd.dd_dss[i];
    if (!ds->ds_destroy && ds->ds_kind == kind
        && ds->ds_parent_id == parent_id
        && strncmp (ds->ds_name, name, ZV_NAME_MAX) == 0)
      return ds;
  }
  return NULL;
}

/* The dataset called name, "VOL" or "VOL@SNAP" (the caller holds
 * dd_lock), or NULL. */
static zv_pool_ds_t *
dsdir_lookup (zv_pool_t *p, const char *name)
{
  char vol[ZV_NAME_MAX], snap[ZV_NAME_MAX];
  zv_pool_ds_t *v;

  if (!zv_snap_split (name, vol, snap))
    return zv_dsdir_lookup_locked (p, ZV_DS_KIND_VOLUME, 0, name);
  v = zv_dsdir_lookup_locked (p, ZV_DS_KIND_VOLUME, 0, vol);
  return v ? zv_dsdir_lookup_locked (p, ZV_DS_KIND_SNAPSHOT, v->ds_id, snap)
    : NULL;
}

void
zv_dsdir_fullname (const zv_pool_ds_t *ds, char *buf, size_t len)
{
  if (ds->ds_kind == ZV_DS_KIND_SNAPSHOT && ds->ds_parent)
    snprintf (buf, len, "%s@%s", ds->ds_parent->ds_name, ds->ds_name);
  else
    snprintf (buf, len, "%s", ds->ds_name);
}

int
zv_dsdir_new_slot_locked (zv_pool_t *p, uint64_t *id, uint64_t *slot)
{
  uint64_t max = (uint64_t) ZV_DSDIR_NBLOCKS * ZV_DSDIR_PER_BLK;
  uint8_t *used = zv_calloc (max, 1);
  uint64_t s;

  /* The lowest slot no dataset on the list has (a destroyed one keeps
   * its slot until the sync that clears its record). */
  for (size_t i = 0; i < p->p_dd.dd_nds; i++)
    if (p->p_dd.dd_dss[i]->ds_slot < max)
      used[p->p_dd.dd_dss[i]->ds_slot] = 1;
  /* (A destroyed dataset being freed keeps its slot too.) */
  zv_freeq_mark_slots (p, used, max);
  for (s = 0; s < max && used[s]; s++)
    ;
  free (used);
  if (s >= max) {
    zv_error ("pool '%s' holds the most datasets it can (%" PRIu64 ")",
              p->p_name, max);
    return -ENOSPC;
  }
  *slot = s;
  *id = p->p_dd.dd_next_id++;
  return 0;
}

void
zv_dsdir_reopen (zv_pool_ds_t *ds, const zv_dnode_phys_t *dn)
{
  zv_pool_t *p = ds->ds_pool;
  zv_object_t *ob = &ds->ds_obj;
  uint64_t snap_txg = ob->ob_snap_txg;
  uint32_t comp = atomic_load_explicit (&ob->ob_compress,
                                        memory_order_relaxed);

  zv_dmu_object_close (ob);
  zv_dmu_object_open (ob, &p->p_spa, p->p_cache, ZV_OBJ_VOLUME, dn);
  ob->ob_snap_txg = snap_txg;
  atomic_store_explicit (&ob->ob_compress, comp, memory_order_relaxed);
  zv_dmu_object_set_held (ob, dsdir_held, ds);
  zv_dmu_object_set_kill (ob, zv_snap_kill, ds);
}

/*
 * Write zeros over the log ring of a new pool on a regular file.  On a
 * sparse file every log block would otherwise land in a hole until the
 * ring has wrapped once: the file system allocates (io_uring then hands
 * the write to a worker thread) and each flush must write the allocation
 * out too, which costs a fresh pool's first 64 MiB of log writes about
 * twice their time.  Block devices need nothing.
 */
static int
dsdir_zero_ring (zv_dev_t *dev, uint64_t off, uint64_t len)
{
  const uint32_t chunk = 1u << 20;
  zv_dev_io_t ios[16];
  uint8_t *zero;
  int r = 0;

  if (zv_dev_is_blockdev (dev))
    return 0;
  zero = zv_buf_alloc (chunk);
  while (len > 0 && r == 0) {
    size_t n = 0;
    while (len > 0 && n < sizeof ios / sizeof ios[0]) {
      uint32_t l = (uint32_t) ZV_MIN ((uint64_t) chunk, len);
      ios[n++] = (zv_dev_io_t) { .di_dev = dev, .di_op = ZV_DEV_WRITE,
                                 .di_buf = zero, .di_offset = off,
                                 .di_len = l };
      off += l;
      len -= l;
    }
    r = zv_dev_io_batch (ios, n);
  }
  zv_buf_free (zero);
  if (r < 0)
    zv_error ("%s: writing the intent log ring failed: %s",
              zv_dev_path (dev), strerror (-r));
  return r;
}

/* A volume's size: a nonzero multiple of 512 bytes, at most 1 PiB. */
bool
zv_dsdir_volsize_valid (uint64_t v)
{
  return v != 0 && v % 512 == 0 && v <= (1ull << 50);
}

bool
zv_dsdir_blksz_valid (uint32_t vbs)
{
  return vbs >= ZV_MIN_VOLBLOCKSIZE && vbs <= ZV_MAX_VOLBLOCKSIZE
    && (vbs & (vbs - 1)) == 0;
}

/*
 * A new volume's log: the separate log device when the pool has one that
 * no volume uses, else a ring of 'ring' bytes allocated from the pool and
 * zeroed.  The caller holds dd_admin_lock (no other create races it for
 * the log device).  On success *ring_dva is the ring allocated (0: the
 * log device), for the caller to free if it fails later.
 */
static int
dsdir_make_log (zv_pool_t *p, uint64_t ring, zv_zil_header_t *zh,
                  uint64_t *ring_dva)
{
  zv_spa_t *spa = &p->p_spa;
  bool logdev_free = p->p_logdev != NULL;
  uint64_t dva;
  int r;

  *ring_dva = 0;
  pthread_mutex_lock (&p->p_dd.dd_lock);
  for (size_t i = 0; i < p->p_dd.dd_nds; i++)
    if (!p->p_dd.dd_dss[i]->ds_destroy
        && ZV_DVA_VDEV (p->p_dd.dd_dss[i]->ds_zil_hdr.zh_ring_dva)
           == ZV_LOG_VDEV)
      logdev_free = false;
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  if (logdev_free) {
    uint64_t lsize = ZV_P2ALIGN (zv_dev_size (p->p_logdev), ZV_SECTOR);
    zv_zil_header_init (zh, ZV_DVA_MAKE (ZV_LOG_VDEV, zv_data_start ()),
                        (zv_data_end (lsize) - zv_data_start ())
                        / ZV_ZIL_BLKSZ, ZV_ZIL_BLKSZ);
    return 0;
  }
  r = ring > UINT32_MAX ? -ENOSPC
    : zv_alloc_block (spa->spa_alloc, (uint32_t) ring, 0, &dva);
  if (r < 0) {
    zv_error ("pool '%s': no room for a volume's intent log ring (%" PRIu64
              " bytes)", p->p_name, ring);
    return -ENOSPC;
  }
  zv_zil_header_init (zh, dva, ring / ZV_ZIL_BLKSZ, ZV_ZIL_BLKSZ);
  r = dsdir_zero_ring (spa->spa_devs[ZV_DVA_VDEV (dva)], ZV_DVA_OFFSET (dva),
                      ring);
  if (r < 0) {
    zv_alloc_free_now (spa->spa_alloc, dva, (uint32_t) ring);
    return r;
  }
  *ring_dva = dva;
  return 0;
}

/*
 * A volume's name, as a caller gives it and as import reads it: 1 to 63
 * of A-Z a-z 0-9 _ - . : (no '/' or '@', the separators of pool/vol@snap),
 * not starting with '-' (an option to the admin tool) or '.'.  Hostile
 * input: looked at only up to ZV_NAME_MAX bytes.
 */
bool
zv_dsdir_name_valid (const char *name)
{
  size_t n = name ? strnlen (name, ZV_NAME_MAX) : 0;

  if (n == 0 || n >= ZV_NAME_MAX || name[0] == '-' || name[0] == '.')
    return false;
  for (size_t i = 0; i < n; i++) {
    char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
          || (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'
          || c == ':'))
      return false;
  }
  return true;
}

/* The pool's free space less the unused part of every reservation. */
static uint64_t
dsdir_space (zv_pool_t *p, uint64_t *unreserved_freep)
{
  zv_alloc_space_t sp;
  uint64_t inuse, free, held = 0;

  zv_alloc_get_space (p->p_spa.spa_alloc, &sp);
  inuse = sp.as_allocated + sp.as_reserved + zv_alloc_slop (sp.as_total);
  free = sp.as_total > inuse ? sp.as_total - inuse : 0;
  pthread_mutex_lock (&p->p_dd.dd_lock);
  for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
    zv_pool_ds_t *ds = p->p_dd.dd_dss[i];
    uint64_t refd = atomic_load_explicit (&ds->ds_unique,
                                          memory_order_relaxed);
    if (!ds->ds_destroy)
      held += zv_dsdir_resv_unused (ds, refd);
  }
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  if (unreserved_freep)
    *unreserved_freep = free;
  return free > held ? free - held : 0;
}

/*
 * Create a volume: check the arguments, the name (unique) and the
 * reservation, make its log, and put it on the list; the caller's txg
 * (creation_txg) writes its record.  Under dd_admin_lock.
 */
int
zv_dsdir_create_locked (zv_pool_t *p, const char *name, uint64_t volsize,
                       uint32_t blksz, uint64_t reservation, uint64_t ring,
                       uint64_t creation_txg, bool check_space,
                       zv_pool_ds_t *origin, uint32_t compress)
{
  char shown[4 * ZV_NAME_MAX + 4];
  zv_zil_header_t zh;
  zv_dnode_phys_t dn;
  uint64_t ring_dva, id, slot;
  bool exists;
  int r;

  zv_str_printable (name ? name : "", ZV_NAME_MAX, shown, sizeof shown);
  if (!zv_dsdir_name_valid (name)) {
    zv_error ("volume name '%s' is invalid: 1 to %u of A-Z a-z 0-9 _ - . "
              ":, not starting with '-' or '.'", shown, ZV_NAME_MAX - 1);
    return -EINVAL;
  }
  if (!zv_dsdir_volsize_valid (volsize)) {
    zv_error ("volume '%s': size %" PRIu64 " is invalid: a nonzero "
              "multiple of 512 bytes, at most 1 PiB", shown, volsize);
    return -EINVAL;
  }
  if (!zv_dsdir_blksz_valid (blksz)) {
    zv_error ("volume '%s': volblocksize %" PRIu32 " is invalid: a power "
              "of two from 4K to 128K", shown, blksz);
    return -EINVAL;
  }
  if (reservation > volsize) {
    zv_error ("volume '%s': a reservation of %" PRIu64 " bytes is more "
              "than its size (%" PRIu64 ")", shown, reservation, volsize);
    return -EINVAL;
  }
  /* A clone inherits its origin's property. */
  if (origin != NULL)
    compress = atomic_load_explicit (&origin->ds_obj.ob_compress,
                                     memory_order_relaxed);
  if (!zv_comp_prop_valid (compress)) {
    zv_error ("volume '%s': compression %#" PRIx32 " is not one this "
              "build knows", shown, compress);
    return -EINVAL;
  }
  pthread_mutex_lock (&p->p_dd.dd_lock);
  exists = dsdir_lookup (p, name) != NULL;
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  if (exists) {
    zv_error ("pool '%s' has a volume '%s' already", p->p_name, shown);
    return -EEXIST;
  }
  if (check_space && reservation > 0) {
    uint64_t avail = dsdir_space (p, NULL);
    uint64_t meta = zv_dsdir_resv_meta (reservation, volsize, blksz);
    if (reservation + meta + ring > avail) {
      zv_error ("pool '%s': no room for volume '%s' with a reservation of "
                "%" PRIu64 " bytes (%" PRIu64 " available, less %" PRIu64
                " for its log and %" PRIu64 " for its indirect blocks; make "
                "it thin, or smaller)", p->p_name, shown, reservation, avail,
                ring, meta);
      return -ENOSPC;
    }
  }
  r = dsdir_make_log (p, ring, &zh, &ring_dva);
  if (r < 0)
    return r;
  if (origin != NULL) {
    /* A clone: the snapshot's tree (immutable), its txg the line. */
    zv_dmu_object_phys (&origin->ds_obj, &dn);
    dn.dn_size = volsize;
  }
  else
    dsdir_new_volume (volsize, blksz, &dn);
  pthread_mutex_lock (&p->p_dd.dd_lock);
  r = zv_dsdir_new_slot_locked (p, &id, &slot);
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  if (r < 0) {
    if (ring_dva)
      zv_alloc_free_now (p->p_spa.spa_alloc, ring_dva, (uint32_t) ring);
    return r;
  }
  zv_dsdir_init_t di = {
    .di_origin_id = origin ? origin->ds_id : 0,
    .di_prev_snap_txg = origin ? origin->ds_creation_txg : 0,
    .di_name = name, .di_id = id, .di_slot = slot, .di_volsize = volsize,
    .di_blksz = blksz, .di_reservation = reservation,
    .di_creation_txg = creation_txg,
    .di_creation_time = (uint64_t) time (NULL), .di_volume = &dn,
    .di_zil = &zh, .di_compress = compress,
  };
  zv_dsdir_add (p, &di);
  return 0;
}

/* A record read from slot 'slot' of the directory of the objset of
 * 'txg' (see pool.h). */
int
zv_dsdir_rec_check (const zv_dsrec_phys_t *rec, uint64_t slot,
                     uint64_t pool_guid, uint64_t txg, uint64_t next_dsid)
{
  static const zv_dsrec_phys_t zero;
  zv_dsrec_phys_t copy;
  const zv_dnode_phys_t *dn = &rec->dr_volume;
  const char *bad = NULL;
  char what[48];

  if (memcmp (rec, &zero, sizeof zero) == 0)
    return 1;
  snprintf (what, sizeof what, "dataset record %" PRIu64, slot);
  if (rec->dr_magic != ZV_DSREC_MAGIC || rec->dr_version != ZV_DSREC_VERSION) {
    zv_error ("%s: bad magic or version %" PRIu32, what, rec->dr_version);
    return -EIO;
  }
  copy = *rec;
  memset (&copy.dr_cksum, 0, sizeof copy.dr_cksum);
  zv_cksum_compute (&copy, sizeof copy, zv_dsrec_seed (pool_guid, slot),
                    &copy.dr_cksum);
  if (!zv_cksum_equal (&copy.dr_cksum, &rec->dr_cksum)) {
    zv_error ("%s: checksum does not verify", what);
    return -EIO;
  }
  static const zv_zil_header_t zzh;
  bool snap = rec->dr_kind == ZV_DS_KIND_SNAPSHOT;

  if (rec->dr_kind == ZV_DS_KIND_FREE) {
    /* A destroyed dataset being freed (freeq.c): the fields every record
     * has, then its own. */
    if (rec->dr_id == 0 || rec->dr_id >= next_dsid)
      bad = "id (0, or not below the objset's next id)";
    else if (rec->dr_creation_txg == 0 || rec->dr_creation_txg > txg)
      bad = "destroy txg (0, or after the objset)";
    else if (!zv_dsdir_name_valid (rec->dr_name)
             || memchr (rec->dr_name, '\0', sizeof rec->dr_name) == NULL)
      bad = "name";
    else if (!zv_dsdir_volsize_valid (rec->dr_volsize))
      bad = "volume size";
    else if (!zv_dsdir_blksz_valid (rec->dr_volblocksize)
             || rec->dr_pad != 0)
      bad = "volblocksize";
    else
      bad = zv_freeq_rec_check (rec, txg, next_dsid);
    if (bad != NULL) {
      zv_error ("%s (a background free): invalid %s", what, bad);
      return -EIO;
    }
    return 0;
  }
  if (rec->dr_kind != ZV_DS_KIND_VOLUME && !snap)
    bad = "kind";
  else if (rec->dr_free_cursor != 0 || rec->dr_free_total != 0)
    bad = "background free's fields (set on a volume or a snapshot)";
  else if ((rec->dr_flags & ~ZV_DR_F_RECV_INCOMPLETE) != 0
           || (snap && rec->dr_flags != 0))
    bad = "flags (unknown bits set, or a receive's on a snapshot)";
  else if (!snap && rec->dr_guid != 0)
    bad = "guid (set on a volume)";
  else if (rec->dr_id == 0 || rec->dr_id >= next_dsid)
    bad = "id (0, or not below the objset's next id)";
  else if (snap ? rec->dr_parent_id == 0 || rec->dr_parent_id >= next_dsid
           || rec->dr_parent_id == rec->dr_id || rec->dr_origin_id != 0
           : rec->dr_parent_id != 0 || rec->dr_origin_id >= next_dsid
           || rec->dr_origin_id == rec->dr_id)
    bad = "parent or origin id";
  else if (rec->dr_prev_snap_id >= next_dsid
           || rec->dr_prev_snap_id == rec->dr_id
           || (rec->dr_prev_snap_id != 0 && rec->dr_prev_snap_txg == 0))
    bad = "previous snapshot id";
  else if (rec->dr_creation_txg == 0 || rec->dr_creation_txg > txg)
    bad = "creation txg (0, or after the objset)";
  else if (rec->dr_prev_snap_txg > txg
           || (snap && rec->dr_prev_snap_txg >= rec->dr_creation_txg))
    bad = "previous snapshot txg (after the objset, or after the "
      "snapshot's own)";
  else if (!zv_dsdir_name_valid (rec->dr_name)
           || memchr (rec->dr_name, '\0', sizeof rec->dr_name) == NULL)
    bad = "name";
  else if (!zv_dsdir_volsize_valid (rec->dr_volsize))
    bad = "volume size";
  else if (!zv_dsdir_blksz_valid (rec->dr_volblocksize) || rec->dr_pad != 0)
    bad = "volblocksize";
  else if (!zv_comp_prop_valid (rec->dr_compress) || rec->dr_pad2 != 0
           || rec->dr_lwritten > zv_dsdir_nblocks (rec->dr_volsize,
                                                   rec->dr_volblocksize)
           * (uint64_t) rec->dr_volblocksize
           || (snap && rec->dr_lwritten != 0))
    bad = "compression (an unknown property, or logical bytes written "
      "past the volume's size)";
  else if (rec->dr_reservation > rec->dr_volsize
           || (snap && rec->dr_reservation != 0))
    bad = "reservation (more than the volume's size, or on a snapshot)";
  else if (rec->dr_written > rec->dr_volsize
           || rec->dr_used > (snap ? rec->dr_volsize : UINT64_MAX / 4)
           || rec->dr_deadlist_bytes > UINT64_MAX / 4)
    bad = "space figures (more than the volume holds)";
  else if (snap && memcmp (&rec->dr_zil, &zzh, sizeof zzh) != 0)
    bad = "log header (set on a snapshot)";
  else if (!zv_deadlist_dnode_valid (&rec->dr_deadlist)
           || rec->dr_deadlist.dn_txg > txg
           || (rec->dr_deadlist.dn_type == 0 && rec->dr_deadlist_bytes != 0))
    bad = "dead list (its shape, its txg, or bytes without entries)";
  else {
    uint64_t nb = zv_dsdir_nblocks (rec->dr_volsize, rec->dr_volblocksize);

    if (zv_dmu_check_dnode (dn, ZV_BT_VOLDATA, what) < 0)
      return -EIO;
    if (dn->dn_size != rec->dr_volsize
        || dn->dn_datablksz != rec->dr_volblocksize || dn->dn_nblocks != nb
        || dn->dn_nlevels != zv_dmu_nlevels (nb))
      bad = "volume object (its shape is not that of its size)";
    else if (!zv_bp_is_hole (&dn->dn_root)
             && (dn->dn_root.bp_birth > (snap ? rec->dr_creation_txg : txg)
                 || dn->dn_root.bp_fill > nb))
      bad = "volume object's root (born after the objset or the "
        "snapshot, or counts more blocks than the volume has)";
  }
  if (bad != NULL) {
    zv_error ("%s: invalid %s", what, bad);
    return -EIO;
  }
  return 0;
}

/* The dataset 'name', or with NULL the only one (dd_lock held). */
static zv_pool_ds_t *
dsdir_pick (zv_pool_t *p, const char *name, size_t *nlive)
{
  zv_pool_ds_t *only = NULL;
  size_t n = 0;

  if (name != NULL)
    return dsdir_lookup (p, name);
  for (size_t i = 0; i < p->p_dd.dd_nds; i++)
    if (!p->p_dd.dd_dss[i]->ds_destroy
        && p->p_dd.dd_dss[i]->ds_kind == ZV_DS_KIND_VOLUME) {
      only = p->p_dd.dd_dss[i];
      n++;
    }
  if (nlive)
    *nlive = n;
  return n == 1 ? only : NULL;
}

int
zv_dsdir_hold (zv_pool_t *p, const char *name, zv_pool_ds_t **dsp)
{
  char shown[4 * ZV_NAME_MAX + 4];
  zv_pool_ds_t *ds;
  size_t n = 0;
  int r = 0;

  *dsp = NULL;
  pthread_mutex_lock (&p->p_dd.dd_lock);
  ds = dsdir_pick (p, name, &n);
  if (ds == NULL || ds->ds_pending)
    r = -ENOENT;
  else if (ds->ds_recv)
    r = -EINPROGRESS;
  else if (ds->ds_kind == ZV_DS_KIND_SNAPSHOT)
    ds->ds_snap_holds++;       /* read-only: any number of opens */
  else if (ds->ds_held)
    r = -EBUSY;
  else
    ds->ds_held = true;
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  zv_str_printable (name ? name : "", ZV_NAME_MAX, shown, sizeof shown);
  if (r == -ENOENT && name != NULL)
    zv_error ("pool '%s' has no volume '%s'", p->p_name, shown);
  else if (r == -ENOENT)
    zv_error ("pool '%s' has %zu volumes: name the one to open", p->p_name,
              n);
  else if (r == -EINPROGRESS) {
    zv_error ("volume '%s' of pool '%s' is being received (or its receive "
              "did not finish: the next import undoes it)", ds->ds_name,
              p->p_name);
    r = -EBUSY;
  }
  else if (r < 0)
    zv_error ("volume '%s' of pool '%s' is open already", ds->ds_name,
              p->p_name);
  if (r < 0)
    return r;
  *dsp = ds;
  return 0;
}

zv_pool_ds_t *
zv_dsdir_find (zv_pool_t *p, const char *name)
{
  zv_pool_ds_t *ds;

  pthread_mutex_lock (&p->p_dd.dd_lock);
  ds = dsdir_pick (p, name, NULL);
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  return ds;
}

void
zv_dsdir_rele (zv_pool_ds_t *ds)
{
  zv_pool_t *p = ds->ds_pool;

  pthread_mutex_lock (&p->p_dd.dd_lock);
  if (ds->ds_kind == ZV_DS_KIND_SNAPSHOT) {
    ZV_VERIFY (ds->ds_snap_holds > 0);
    ds->ds_snap_holds--;
  }
  else {
    ZV_VERIFY (ds->ds_held && ds->ds_zil == NULL);
    ds->ds_held = false;
  }
  pthread_mutex_unlock (&p->p_dd.dd_lock);
}

/* A change of the dataset list is durable once a txg it held synced. */
int
zv_dsdir_admin_begin (zv_pool_t *p, const char *what)
{
  if (p->p_readonly) {
    zv_error ("pool '%s' is imported read-only: cannot %s", p->p_name,
              what);
    return -EROFS;
  }
  return 0;
}

/* The property is the object's (the sync reads it once per txg);
 * the record carries it from the txg held here on. */
int
zv_dsdir_set_compress (zv_pool_t *p, const char *name, uint32_t compress)
{
  char shown[4 * ZV_NAME_MAX + 4];
  zv_txg_hold_t h;
  zv_pool_ds_t *ds;
  int r = zv_dsdir_admin_begin (p, "set a property");

  if (r < 0)
    return r;
  zv_str_printable (name ? name : "", 2 * ZV_NAME_MAX, shown, sizeof shown);
  if (!zv_comp_prop_valid (compress)) {
    zv_error ("volume '%s': compression %#" PRIx32 " is not one this "
              "build knows", shown, compress);
    return -EINVAL;
  }
  pthread_mutex_lock (&p->p_dd.dd_admin_lock);
  r = zv_txg_hold (p->p_txg, 0, &h);
  if (r == 0) {
    pthread_mutex_lock (&p->p_dd.dd_lock);
    ds = name ? dsdir_lookup (p, name) : NULL;
    if (ds == NULL) {
      zv_error ("pool '%s' has no volume '%s'", p->p_name, shown);
      r = -ENOENT;
    }
    else if (ds->ds_kind != ZV_DS_KIND_VOLUME) {
      zv_error ("'%s' is a snapshot: its blocks never change, and neither "
                "does its compression", shown);
      r = -EINVAL;
    }
    else
      atomic_store_explicit (&ds->ds_obj.ob_compress, compress,
                             memory_order_relaxed);
    pthread_mutex_unlock (&p->p_dd.dd_lock);
    zv_txg_rele (p->p_txg, &h);
    if (r == 0)
      r = zv_txg_wait_synced (p->p_txg, h.th_txg);
    if (r == 0) {
      char v[32];
      zv_comp_prop_name (compress, v, sizeof v);
      zv_info ("pool '%s': volume '%s' compression=%s%s", p->p_name, shown,
               v, compress && p->p_spa.spa_version < ZV_POOL_VERSION
               ? " (a pool of format version 2 stores data uncompressed)"
               : "");
    }
  }
  pthread_mutex_unlock (&p->p_dd.dd_admin_lock);
  return r;
}

int
zv_dsdir_create (zv_pool_t *p, const char *name, uint64_t volsize,
                 uint32_t blksz, uint64_t reservation, uint64_t ring,
                 uint32_t compress)
{
  zv_txg_hold_t h;
  int r = zv_dsdir_admin_begin (p, "create a volume");

  if (r < 0)
    return r;
  pthread_mutex_lock (&p->p_dd.dd_admin_lock);
  r = zv_txg_hold (p->p_txg, 0, &h);
  if (r == 0) {
    r = zv_dsdir_create_locked (p, name, volsize, blksz, reservation, ring,
                                h.th_txg, true, NULL, compress);
    zv_txg_rele (p->p_txg, &h);
    if (r == 0)
      r = zv_txg_wait_synced (p->p_txg, h.th_txg);
    if (r == 0)
      zv_info ("pool '%s': created volume '%s' (%" PRIu64 " bytes, "
               "volblocksize %" PRIu32 ", %s)", p->p_name, name, volsize,
               blksz, reservation ? "with a reservation" : "thin");
  }
  pthread_mutex_unlock (&p->p_dd.dd_admin_lock);
  return r;
}

int
zv_dsdir_destroy (zv_pool_t *p, const char *name)
{
  char shown[4 * ZV_NAME_MAX + 4];
  zv_pool_ds_t *ds;
  zv_txg_hold_t h;
  int r = zv_dsdir_admin_begin (p, "destroy a volume");

  if (r < 0)
    return r;
  if (name && memchr (name, '@', strnlen (name, 2 * ZV_NAME_MAX)))
    return zv_snap_destroy (p, name);
  zv_str_printable (name ? name : "", ZV_NAME_MAX, shown, sizeof shown);
  pthread_mutex_lock (&p->p_dd.dd_admin_lock);
  r = zv_txg_hold (p->p_txg, 0, &h);
  if (r < 0)
    goto out;
  pthread_mutex_lock (&p->p_dd.dd_lock);
  ds = name ? dsdir_lookup (p, name) : NULL;
  if (ds == NULL)
    r = -ENOENT;
  else if (ds->ds_held)
    r = -EBUSY;
  else if (ds->ds_prev_snap_id != 0)
    r = -ENOTEMPTY;
  else {
    pthread_mutex_lock (&p->p_dd.dd_resv_lock);
    ds->ds_destroy = true;
    atomic_fetch_sub_explicit (&p->p_dd.dd_resv_total,
                               zv_dsdir_resv_unused (ds, 0),
                               memory_order_relaxed);
    pthread_mutex_unlock (&p->p_dd.dd_resv_lock);
  }
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  zv_txg_rele (p->p_txg, &h);
  if (r == -ENOENT)
    zv_error ("pool '%s' has no volume '%s'", p->p_name, shown);
  else if (r == -EBUSY)
    zv_error ("volume '%s' of pool '%s' is open: close it before destroying "
              "it", shown, p->p_name);
  else if (r == -ENOTEMPTY) {
    zv_error ("volume '%s' of pool '%s' has snapshots: destroy them first "
              "(or destroy recursively)", shown, p->p_name);
    r = -EBUSY;
  }
  /* Its tree is freed in the background (freeq.c), from T+1 on; what T
   * freed at once (its log ring) is deferred (rule 2 of docs/format.md):
   * free space once T+2 has synced, which is when destroy returns. */
  if (r == 0)
    r = zv_txg_wait_synced (p->p_txg, h.th_txg + 2);
  if (r == 0)
    zv_info ("pool '%s': destroyed volume '%s'", p->p_name, shown);
 out:
  pthread_mutex_unlock (&p->p_dd.dd_admin_lock);
  return r;
}

/* One dataset's line of the listing (dd_lock held). */
static void
dsdir_info (zv_pool_t *p, zv_pool_ds_t *ds, uint64_t avail,
            zv_dsdir_info_t *di)
{
  uint64_t refd = atomic_load_explicit (&ds->ds_referenced,
                                        memory_order_relaxed);
  uint64_t uniq = atomic_load_explicit (&ds->ds_unique,
                                        memory_order_relaxed);

  memset (di, 0, sizeof *di);
  zv_dsdir_fullname (ds, di->di_name, sizeof di->di_name);
  di->di_kind = ds->ds_kind;
  di->di_id = ds->ds_id;
  di->di_volsize = ds->ds_volsize;
  di->di_blksz = ds->ds_blksz;
  di->di_reservation = ds->ds_reservation;
  di->di_referenced = refd;
  di->di_compress = atomic_load_explicit (&ds->ds_obj.ob_compress,
                                          memory_order_relaxed);
  di->di_lwritten = ds->ds_pub_lwritten;
  di->di_used = ds->ds_pub_used;
  di->di_written = ds->ds_pub_written;
  di->di_creation_txg = ds->ds_creation_txg;
  di->di_creation_time = ds->ds_creation_time;
  if (ds->ds_kind == ZV_DS_KIND_SNAPSHOT) {
    di->di_open = ds->ds_snap_holds > 0;
    return;
  }
  di->di_open = ds->ds_held;
  di->di_usedbysnapshots = ds->ds_pub_snapused;
  di->di_avail = avail + (ds->ds_reservation > uniq
                          ? ds->ds_reservation - uniq : 0);
  for (size_t i = 0; i < p->p_dd.dd_nds && ds->ds_origin_id; i++)
    if (p->p_dd.dd_dss[i]->ds_id == ds->ds_origin_id)
      zv_dsdir_fullname (p->p_dd.dd_dss[i], di->di_origin,
                         sizeof di->di_origin);
}

size_t
zv_dsdir_list (zv_pool_t *p, unsigned kinds, zv_dsdir_info_t *out,
               size_t max)
{
  uint64_t avail = dsdir_space (p, NULL);
  zv_pool_ds_t **chain = NULL;
  size_t n = 0, cap = 0;

  pthread_mutex_lock (&p->p_dd.dd_lock);
  for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
    zv_pool_ds_t *v = p->p_dd.dd_dss[i];
    size_t k = 0;

    if (v->ds_destroy || v->ds_kind != ZV_DS_KIND_VOLUME)
      continue;
    if (kinds & (1u << ZV_DS_KIND_VOLUME)) {
      if (n < max)
        dsdir_info (p, v, avail, &out[n]);
      n++;
    }
    if (!(kinds & (1u << ZV_DS_KIND_SNAPSHOT)))
      continue;
    for (zv_pool_ds_t *s = v->ds_prev; s; s = s->ds_prev) {
      ZV_GROW (chain, k, cap, 16);
      chain[k++] = s;
    }
    while (k-- > 0) {
      if (n < max)
        dsdir_info (p, chain[k], avail, &out[n]);
      n++;
    }
  }
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  free (chain);
  return n;
}

uint64_t
zv_dsdir_avail (zv_pool_t *p)
{
  return dsdir_space (p, NULL);
}

const char *
zv_dsdir_name (const zv_pool_ds_t *ds)
{
  return ds->ds_name;
}

bool
zv_dsdir_is_snapshot (const zv_pool_ds_t *ds)
{
  return ds->ds_kind == ZV_DS_KIND_SNAPSHOT;
}

zv_object_t *
zv_dsdir_object (zv_pool_ds_t *ds)
{
  return &ds->ds_obj;
}

uint64_t
zv_dsdir_volsize (const zv_pool_ds_t *ds)
{
  return ds->ds_volsize;
}

uint32_t
zv_dsdir_blksz (const zv_pool_ds_t *ds)
{
  return ds->ds_blksz;
}

const zv_zil_header_t *
zv_dsdir_zil_header (const zv_pool_ds_t *ds)
{
  return &ds->ds_zil_hdr;
}

void
zv_dsdir_attach_zil (zv_pool_ds_t *ds, zv_zil_t *zl)
{
  zv_pool_t *p = ds->ds_pool;

  pthread_mutex_lock (&p->p_dd.dd_lock);
  ZV_VERIFY (ds->ds_held);
  ZV_VERIFY ((zl == NULL) != (ds->ds_zil == NULL));
  ds->ds_zil = zl;
  pthread_mutex_unlock (&p->p_dd.dd_lock);
}
