/*
 * pool_impl.h: the pool's structure and its datasets', shared by the
 * pool's modules alone: pool.c (open, create, close), import.c, psync.c
 * (the txg sync), dsdir.c (the dataset directory), snap.c and send.c
 * (snapshots, and send and receive of them), freeq.c (the background
 * free of destroyed datasets) and check.c (the offline checker).  Everything above
 * them sees pool.h and dsdir.h.  Each field says who guards it; the
 * modules' theory comments say why.
 */
#ifndef ZV_POOL_IMPL_H
#define ZV_POOL_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "pool.h"
#include "dsdir.h"
#include "flat.h"
#include "label.h"
#include "mem.h"
#include "deadlist.h"
#include "check.h"
#include "freeq.h"

/* A dataset: a record of the dataset directory (a volume or a
 * snapshot; snap.c has the snapshots' part). */
struct zv_pool_ds {
  zv_pool_t *ds_pool;
  char ds_name[ZV_NAME_MAX];   /* a snapshot's: the part after the '@' */
  uint32_t ds_kind;            /* ZV_DS_KIND_* */
  uint64_t ds_id;
  uint64_t ds_parent_id;       /* a snapshot's volume (0 for a volume) */
  uint64_t ds_origin_id;       /* a clone's snapshot, else 0 */
  uint64_t ds_slot;            /* its record's index in the directory */
  uint64_t ds_creation_txg, ds_creation_time;
  uint64_t ds_guid;            /* a snapshot's identity (send streams) */
  uint64_t ds_reservation;
  uint64_t ds_resv_meta;       /* its indirect blocks (zv_dsdir_resv_meta) */
  zv_object_t ds_obj;          /* the volume's block tree */
  uint64_t ds_volsize;
  uint32_t ds_blksz;
  /* Under dd_lock (the sync thread reads them): */
  zv_zil_header_t ds_zil_hdr;  /* as the last sync or the import left it */
  zv_zil_t *ds_zil;            /* the open volume's log, or NULL */
  bool ds_held;                /* a volume has it open */
  unsigned ds_snap_holds;      /* a snapshot: read-only opens */
  bool ds_pending;             /* a snapshot its txg's sync has yet to take */
  bool ds_recv;                /* a receive writes it (ZV_DR_F_RECV_INCOMPLETE
                                  in its record): no open, no snapshot but
                                  the receive's own */
  /* The snapshot chain, changed by the sync thread's tasks under
   * dd_lock (read under it, or by the sync thread): the newest snapshot
   * (a volume's) or the one before (a snapshot's), its creation txg (the
   * birth rule's line: ds_obj.ob_snap_txg), and that dataset. */
  uint64_t ds_prev_snap_id, ds_prev_snap_txg;
  zv_pool_ds_t *ds_prev;
  zv_pool_ds_t *ds_parent;     /* a snapshot's volume */
  /* Figures as of the last sync (under dd_lock): what list shows. */
  uint64_t ds_pub_used, ds_pub_written, ds_pub_snapused;
  uint64_t ds_pub_lwritten;    /* a volume's written, in logical bytes */
  bool ds_destroy;             /* destroyed: the next sync frees it */
  _Atomic uint64_t ds_referenced; /* data bytes, as of the last sync */
  _Atomic uint64_t ds_unique;  /* of them, born after its newest snapshot
                                  (what its reservation covers) */
  /* The sync thread's: ds_destroy as the sync under way took it, and the
   * record as last written. */
  bool ds_freeing;
  zv_dsrec_phys_t ds_rec;
  /* The sync thread's: the dead list, a snapshot's unique data bytes
   * and its written (fixed when it is taken). */
  zv_deadlist_t ds_deadlist;
  uint64_t ds_used;
  uint64_t ds_snap_written;
};

/* The dataset directory's state (dsdir.c's; see its theory comment). */
typedef struct zv_dsdir {
  pthread_mutex_t dd_lock;     /* the datasets' list, holds and logs */
  pthread_mutex_t dd_admin_lock; /* one create or destroy at a time */
  zv_pool_ds_t **dd_dss;       /* under dd_lock */
  size_t dd_nds, dd_cap;
  uint64_t dd_next_id;         /* under dd_lock */
  zv_pool_ds_t **dd_sync_dss;  /* the sync's copy of the list */
  size_t dd_sync_nds, dd_sync_cap;
  zv_flat_t dd_flat;           /* the directory's blocks */
  /* For writers' space reservations (dsdir_held), taken under db_mtx and
   * inside dd_lock, never before either: the list (dd_dss, dd_nds) and
   * the destroy marks change under it too. */
  pthread_mutex_t dd_resv_lock;
  _Atomic uint64_t dd_resv_total; /* reservations of the undestroyed,
                                     ds_resv_meta included */
  /* Snapshot operations waiting for the sync of their txg (snap.c),
   * under dd_lock. */
  struct zv_snap_task *dd_tasks;
} zv_dsdir_t;

struct zvol_pool {
  zv_spa_t p_spa;
  char p_name[ZV_NAME_MAX];
  bool p_readonly;
  bool p_started;
  zv_dbuf_cache_t *p_cache;
  zv_mem_client_t *p_cache_mem;  /* the cache's share of memory (mem.h) */
  zv_txg_t *p_txg;
  zv_dsdir_t p_dd;             /* the dataset directory (dsdir.c) */
  zv_freeq_t p_freeq;          /* destroyed datasets still being freed
                                  (freeq.c; their records are in p_dd's) */
  uint64_t p_capacity;         /* bytes of the data devices' data areas */
  zv_flat_t p_spacemap[ZV_MAX_DEVS];
  zv_flat_t p_defer[2];
  zv_blkptr_t p_objset_bp;     /* as of the last synced txg */
  /* An accepted rewind (rewind=true, read-write): the uberblock slots to
   * empty once the import has passed every check (zv_import_ub_discard). */
  bool p_ub_discard[ZV_UB_COUNT];
  bool p_ub_discard_pending;
  zv_uberblock_phys_t p_ub_keep; /* the uberblock imported */
  zv_dev_t *p_logdev;          /* separate log device, or NULL */
  struct zv_resilver *p_resilver; /* a mirror side's resilver (resilver.c),
                                  or NULL */
  enum zv_zil_recover p_zil_recover; /* the import's zil_recover= */
  bool p_rewound;              /* imported at an older txg than the newest */
  bool p_verified;             /* verify=full walked the whole tree */
  zv_check_t *p_check;         /* the offline checker's import (check.c):
                                  owners it refuses are recorded, not
                                  fatal; NULL otherwise */
  /* The claim at import took in-place blocks off the imported txg's
   * pending deferred-free list (zv_alloc_defer_cancel): the next sync
   * rewrites that list too (psync_defer_prev). */
  bool p_defer_rewrite;
  /* The live checker's view (zv_pool_open_view): a read-only import of
   * exactly txg p_view_txg on the devices of a served pool, borrowed
   * (neither opened nor closed here, so no lock is taken twice). */
  bool p_view;
  uint64_t p_view_txg;
  uint64_t p_synced_txg;
  uint64_t p_open_txg;         /* imported or created at */
  _Atomic bool p_syncing;      /* a sync is under way (asserts) */
  _Atomic bool p_closing;      /* close began: the background free asks
                                  for no more syncs (freeq.c) */
  _Atomic uint64_t p_sync_passes; /* of the last sync (read by stats) */
  _Atomic unsigned p_sync_write_cap; /* its cap at its end (stats) */
  struct zv_scrub *p_scrub;    /* the background scrub (scrub.c), made
                                  when the pool starts (or at its first
                                  use) */
  zv_scan_phys_t p_scan_rec;   /* the objset's scrub place, as imported
                                  and checked (zero: none) */
  zv_defer_ent_t *p_defer_ents; /* sync scratch: this txg's frees, */
  size_t p_defer_n, p_defer_cap; /* adjacent ones merged */
  size_t p_defer_seen;          /* the frees collected, before merging */
};

/* Deferred-free list capacity, in 16 KiB blocks (F^2: 66M extents). */
#define ZV_DEFER_NBLOCKS ((uint64_t) ZV_INDIRECT_FANOUT * ZV_INDIRECT_FANOUT)
#define ZV_DEFER_PER_BLK (ZV_DEFER_BLKSZ / sizeof (zv_defer_ent_t))

#endif /* ZV_POOL_IMPL_H */
