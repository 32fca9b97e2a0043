/*
 * freeq.h: the pool's free queue: destroyed datasets whose blocks the
 * txg syncs free a bounded amount at a time, in the background (freeq.c
 * has the theory), as the pool's modules see it.
 */
#ifndef ZV_FREEQ_H
#define ZV_FREEQ_H

#include <stdint.h>
#include <stdbool.h>
#include <stdatomic.h>

#include "format.h"
#include "dmu.h"
#include "deadlist.h"

typedef struct zvol_pool zv_pool_t;
typedef struct zv_pool_ds zv_pool_ds_t;

/* One destroyed dataset (or the tree a rollback left) still being
 * freed: a record of kind ZV_DS_KIND_FREE in its old directory slot (a
 * free one for a rollback's). */
typedef struct zv_freeq_ent {
  uint64_t fe_slot, fe_id, fe_parent_id;
  uint64_t fe_line;            /* frees only what was born after it */
  uint64_t fe_txg;             /* the destroy's txg */
  uint64_t fe_time;            /* the destroy's time (seconds) */
  uint64_t fe_volsize;
  uint32_t fe_blksz;
  char fe_name[ZV_NAME_MAX];   /* the record's (a snapshot's own part) */
  char fe_shown[3 * ZV_NAME_MAX]; /* "volume 'v'", "snapshot 'v@s'" */
  bool fe_tree;                /* a volume's tree (fe_dn), else a dead list */
  zv_dnode_phys_t fe_dn;
  zv_deadlist_t fe_dl;
  /* Progress: the next data block (tree) or entry (list) to look at,
   * and the data bytes it began with and still has to free. */
  uint64_t fe_cursor;
  uint64_t fe_total;
  _Atomic uint64_t fe_left;
  /* The sync thread's (or import's): */
  bool fe_own;                 /* imported, not walked: the owners of its
                                  blocks are taken as they are read */
  bool fe_done;                /* freed whole by the sync under way */
  bool fe_stuck;               /* a block of it failed: left as it is */
  uint64_t fe_txgs;            /* syncs that freed some of it */
  zv_dsrec_phys_t fe_rec;      /* its record as last written */
} zv_freeq_ent_t;

typedef struct zv_freeq {
  /* Oldest first.  Changed under dd_lock, by the sync thread (or the
   * import); the sync thread reads it without. */
  zv_freeq_ent_t **fq_ents;
  size_t fq_n, fq_cap;
  _Atomic uint64_t fq_left;    /* data bytes, every entry */
  _Atomic uint64_t fq_nents;
  _Atomic uint64_t fq_nstuck;
  /* The first txg whose sync has nothing of the queue's frees deferred
   * any more (the sync thread's): an idle pool syncs up to it, so the
   * space is back, not only the queue empty. */
  uint64_t fq_settle_txg;
  /* What the syncs did (statistics, tests): blocks freed by the last
   * sync that freed any, the most by one, in all; its time. */
  _Atomic uint64_t fq_last_blocks, fq_max_blocks, fq_total_blocks;
  _Atomic uint64_t fq_last_ns, fq_max_ns, fq_syncs;
} zv_freeq_t;

/* Export, or an uberblock whose load failed: forget every entry. */
void zv_freeq_drop_all (zv_pool_t *p);

/*
 * The destroy's sync (txg): queue what dataset ds alone held, so that
 * later syncs free it.  A volume's tree dn (its blocks born after its
 * line); a snapshot's: the entries of dead list dl (moved into the queue,
 * written in txg first) born after the snapshot's line, 'bytes' of data.
 * Nothing is queued when there is nothing to free (dl is freed then).
 * 0, or a write error.
 */
int zv_freeq_add_tree (zv_pool_t *p, zv_pool_ds_t *ds,
                       const zv_dnode_phys_t *dn, uint64_t txg);
int zv_freeq_add_deadlist (zv_pool_t *p, zv_pool_ds_t *s, zv_deadlist_t *dl,
                           uint64_t bytes, uint64_t txg);
/* A rollback's sync (txg): volume v goes back to its newest snapshot
 * 'snap'; its tree as last synced, dn, is queued (its blocks born after
 * the snapshot), in a directory slot of its own.  0, or -ENOSPC when
 * the directory has no free slot. */
int zv_freeq_add_rollback (zv_pool_t *p, zv_pool_ds_t *v,
                           const zv_dnode_phys_t *dn, const char *snap,
                           uint64_t txg);
/* Txg's share of the work (zv_dsdir_sync, after the tasks of the txg):
 * free a bounded amount (free_max_blocks, free_max_ms) of the entries
 * queued before txg, and mark the directory blocks of the records that
 * changed.  Always 0: a block that fails stops its entry only. */
int zv_freeq_sync (zv_pool_t *p, uint64_t txg);
/* The directory's fill: the queue's records of block blkid. */
void zv_freeq_fill (zv_pool_t *p, uint64_t blkid, void *buf);
/* Bytes of the directory the queue's records need. */
uint64_t zv_freeq_dir_size (zv_pool_t *p);
/* Mark the slots the queue holds (dd_lock held). */
void zv_freeq_mark_slots (zv_pool_t *p, uint8_t *used, uint64_t max);
/* After the sync is on disk: drop the entries it finished, and ask for
 * the next sync while work is left. */
void zv_freeq_reap (zv_pool_t *p, uint64_t txg);
/* Work left that a sync would do (an entry not stuck)? */
bool zv_freeq_pending (zv_pool_t *p);

/*
 * Import.  The checks of a record of kind ZV_DS_KIND_FREE alone (after
 * dsdir.c's common ones: magic, checksum, id, creation txg, name, size):
 * NULL, or what is wrong.  A buffer-level step, for the fuzz harness.
 */
const char *zv_freeq_rec_check (const zv_dsrec_phys_t *rec, uint64_t txg,
                                uint64_t next_dsid);
/* Queue the entry of a record that passed (its dead list loaded, as
 * hostile data): 0 or -EIO. */
int zv_freeq_load (zv_pool_t *p, const zv_dsrec_phys_t *rec, uint64_t slot);
/* Once the directory is loaded: name the entries, say what is pending. */
void zv_freeq_imported (zv_pool_t *p);
/* The entry of dataset id, or NULL. */
zv_freeq_ent_t *zv_freeq_find_id (zv_pool_t *p, uint64_t id);
/*
 * What an entry still holds, for import's owners and the checker: every
 * block of its tree the free has not passed (fn, parents first, root
 * included; data NULL), or every entry of its list it has still to free
 * (efn).  0, the first error, or a callback's nonzero return.
 */
int zv_freeq_walk (zv_pool_t *p, zv_freeq_ent_t *e, zv_dmu_walk_fn fn,
                   zv_deadlist_fn efn, void *arg);

#endif /* ZV_FREEQ_H */
