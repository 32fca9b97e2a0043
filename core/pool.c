/*
 * pool.c: create, import, sync and export a pool.
 *
 * Theory.  The pool is the root of everything on disk: the uberblock
 * names the objset block, the pool's own object set, which names the
 * pool's objects (the dataset directory, one space map per device, the
 * deferred-free lists of the last two txgs); each volume's object and
 * log header are in its dataset record (format 2, docs/format.md).  The txg engine (txg.c) calls pool_sync_txg for txg T once every
 * writer of T has let go, and the sync does, in order:
 *
 *   1. apply the frees deferred in T-2 (the space of blocks the uberblocks
 *      of T-2 and older pointed at becomes free again), and free the
 *      object that listed them;
 *   2. free the trees and rings of the volumes destroyed since the last
 *      sync, write every other volume's dirty blocks and indirect blocks
 *      (dmu.c), take each one's log header, and write the directory
 *      blocks whose records changed (pool_sync_datasets);
 *   3. choose where the new objset block goes;
 *   4. converge: write the changed space-map chunks and T's deferred-free
 *      list, then again, while a pass moved a block (placed one in new
 *      space or freed one, so changed the bitmap or the list; blocks
 *      already born in T are rewritten in place, so each pass allocates
 *      less than the one before, and the loop ends).  What open context
 *      changes meanwhile (the intent log's in-place writes allocate while
 *      T syncs) is left dirty for T+1: T's tree does not point there;
 *   5. write the objset block (two copies), flush every device;
 *   6. write the uberblock into the front labels, flush, into the back
 *      labels, flush.  Txg T is committed when one copy is on disk.
 *
 * A crash anywhere before 6 leaves the previous uberblock in charge, and
 * nothing it points at has been overwritten: every block written in T went
 * to space that was free at T-1, and blocks freed in T-1 or T-2 are not
 * reused before T+1 / T.  A crash in 6 leaves one label set with T and the
 * other with T-1; import takes the newest that verifies.
 *
 * Import reads every label of every device, checks that the devices form
 * one complete pool, and tries the uberblocks newest first: the objset,
 * the space maps and deferred lists, and the volume's root pointer must
 * read and verify, and every pointer of them must point at allocated
 * space that nothing else owns (the pool's owner map, alloc.h: each
 * block's copies, the pending deferred frees, the log ring and the
 * volume's root take their sectors; a sector taken twice would be freed
 * twice, or while still in use).  The volume's tree below its root is
 * not walked: its cost would grow with the volume (seconds for tens of
 * GiB).  Each of its indirect blocks is checked as it is first read
 * (dmu.c: fields, and owners for its children, from the same map), and
 * a block that fails is refused then, with EIO for what it covers, as
 * OpenZFS verifies blocks when they are read and leaves the walk to
 * scrub.  verify=full (pc_verify_full) walks the whole tree at import
 * as before, taking every owner, so a damaged tree is found there and
 * the import rewinds or refuses.  The first uberblock that passes is
 * the candidate.  Then the
 * loss check (pool_check_loss): importing it loses
 *   - every txg after it up to the newest valid uberblock N, when it is
 *     not N itself: those txgs committed (a txg's uberblock is written
 *     only after everything it wrote is flushed), so a tree that fails is
 *     damage, never a crash;
 *   - txg N+1 (and N+2... while the following slots are damaged too) when
 *     slot (N+1) % ZV_UB_COUNT holds no copy that verifies in any label
 *     of any device: a crash tears the copies of one label set at most
 *     (label.c), so a slot with none was damaged and may have held N+1.
 * Either refuses the import (-EIO, with what would be lost and how to
 * accept it) unless pc_rewind says to take the loss; taking it is a
 * warning, and a read-write import then empties the slots it gave up
 * (damaged ones, and those of the txgs newer than the one imported) so
 * that the next import neither refuses again nor meets a stale txg
 * newer than the pool's own.  Read-only imports refuse too: a warning
 * nobody asked for is no way to serve older data in place of newer.  A
 * pool created before its rings were prefilled (no ZV_CF_F_UB_EMPTY)
 * cannot tell a damaged slot from an unwritten one until the ring has
 * been written once (txg > ZV_UB_COUNT); below that it imports as
 * before, noted at info level.
 *
 * A rewind replays the imported txg's own intent-log header, never the
 * header of a txg it gave up (that objset does not verify, or its
 * uberblock is gone).  The chain from that header runs on into blocks
 * written after it as long as they verify (guid and seq seed each
 * checksum, an in-place block's pointer carries its checksum), so blocks
 * reused since, by the ring wrapping or by a later txg's allocations,
 * end it: what it recovers is flushed writes, never stale data.  When an
 * import came between the two txgs, the older header names the chain of
 * before it (every import begins a new one, which only later headers
 * name), and nothing flushed since is recovered: the refusal's message
 * says the loss includes such records (p_rewound tells the log's claim
 * that a vouched-for block may have been reused: zil_replay.c).
 *
 * A read-write import then claims each dataset's log (zv_zil_claim)
 * before anything can sync; a log damaged where acknowledged writes would
 * be lost, or holding a record that makes no sense, fails it there unless
 * the configuration's zil_recover says what to drop.  The claim takes
 * in-place blocks off the imported txg's pending deferred-free list; only
 * T's list is written by T's sync, so the first sync after a claim also
 * rewrites that one (pool_sync_defer_prev), or T+1 would free blocks the
 * replay adopted.  A read-only import
 * claims nothing and replays nothing (zv_zil_inspect only reports what
 * the log holds).
 *
 * Datasets.  The pool keeps a list of datasets (volumes), one per record
 * of the directory; a volume holds its dataset while open and attaches
 * its log to it (pool.h).  The pool never calls up into the volume: what
 * the sync needs of a volume is its object (dmu) and its log (zil), both
 * below.  Create (zv_pool_ds_create) allocates and zeroes the new
 * volume's ring in open context, adds it to the list under a hold of the
 * open txg and waits for that txg: a crash before it leaves no record and
 * a ring allocated only in memory, after it the whole volume.  Destroy
 * marks it under a hold; that txg's sync frees its synced tree (a walk,
 * every block deferred as any free) and its ring, and writes the
 * directory without its record, in one txg; the dataset is dropped from
 * the list once the txg is on disk (pool_sync_reap).  Each sync works on
 * a copy of the list taken at its start (p_sync_dss), with each
 * dataset's destroy mark as of then (ds_freeing), so a create or destroy
 * that races it belongs to the next txg.  p_admin_lock makes creates and
 * destroys one at a time (the log device goes to one volume).  Import
 * checks each record alone (zv_pool_dsrec_check: hostile data), then
 * against the others (ids, names, at most one volume on the log device)
 * and the pool (its log header, its root's space), and claims each
 * volume's log; an in-place block a record names must be in no volume's
 * tree.
 *
 * Locking: pool_sync_txg runs only on the txg engine's thread (or inline
 * in a waiter, serialized by the engine; p_syncing asserts it); import
 * and create run before any thread starts.  p_ds_lock guards the list of
 * datasets, their holds, destroy marks, attached logs and stored log
 * headers, which volumes and admin calls change while the sync thread
 * reads them; p_admin_lock (taken before it) serializes create and
 * destroy.
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

#include "pool.h"
#include "label.h"
#include "dbuf.h"
#include "mem.h"
#include "flat.h"
#include "tunable.h"

/* A dataset: a record of the dataset directory (a volume). */
struct zv_pool_ds {
  zv_pool_t *ds_pool;
  char ds_name[ZV_NAME_MAX];
  uint64_t ds_id;
  uint64_t ds_slot;            /* its record's index in the directory */
  uint64_t ds_creation_txg, ds_creation_time;
  uint64_t ds_reservation;
  zv_object_t ds_obj;          /* the volume's block tree */
  uint64_t ds_volsize;
  uint32_t ds_blksz;
  /* Under p_ds_lock (the sync thread reads them): */
  zv_zil_header_t ds_zil_hdr;  /* as the last sync or the import left it */
  zv_zil_t *ds_zil;            /* the open volume's log, or NULL */
  bool ds_held;                /* a volume has it open */
  bool ds_destroy;             /* destroyed: the next sync frees it */
  _Atomic uint64_t ds_referenced; /* data bytes, as of the last sync */
  /* The sync thread's: ds_destroy as the sync under way took it, and the
   * record as last written. */
  bool ds_freeing;
  zv_dsrec_phys_t ds_rec;
};

struct zvol_pool {
  zv_spa_t p_spa;
  char p_name[ZV_NAME_MAX];
  bool p_readonly;
  bool p_started;
  zv_dbuf_cache_t *p_cache;
  zv_mem_client_t *p_cache_mem;  /* the cache's share of memory (mem.h) */
  zv_txg_t *p_txg;
  pthread_mutex_t p_ds_lock;   /* the datasets' list, holds and logs */
  pthread_mutex_t p_admin_lock; /* one create or destroy at a time */
  zv_pool_ds_t **p_dss;        /* under p_ds_lock */
  size_t p_nds, p_dscap;
  uint64_t p_next_dsid;        /* under p_ds_lock */
  zv_pool_ds_t **p_sync_dss;   /* the sync's copy of the list */
  size_t p_sync_nds, p_sync_dscap;
  zv_flat_t p_dsdir;           /* the dataset directory */
  uint64_t p_capacity;         /* bytes of the data devices' data areas */
  zv_flat_t p_spacemap[ZV_MAX_DEVS];
  zv_flat_t p_defer[2];
  zv_blkptr_t p_objset_bp;     /* as of the last synced txg */
  /* An accepted rewind (rewind=true, read-write): the uberblock slots to
   * empty once the import has passed every check (pool_ub_discard). */
  bool p_ub_discard[ZV_UB_COUNT];
  bool p_ub_discard_pending;
  zv_uberblock_phys_t p_ub_keep; /* the uberblock imported */
  zv_dev_t *p_logdev;          /* separate log device, or NULL */
  enum zv_zil_recover p_zil_recover; /* the import's zil_recover= */
  bool p_rewound;              /* imported at an older txg than the newest */
  bool p_verified;             /* verify=full walked the whole tree */
  /* The claim at import took in-place blocks off the imported txg's
   * pending deferred-free list (zv_alloc_defer_cancel): the next sync
   * rewrites that list too (pool_sync_defer_prev). */
  bool p_defer_rewrite;
  uint64_t p_synced_txg;
  uint64_t p_open_txg;         /* imported or created at */
  _Atomic bool p_syncing;      /* a sync is under way (asserts) */
  _Atomic uint64_t p_sync_passes; /* of the last sync (read by stats) */
  _Atomic unsigned p_sync_write_cap; /* its cap at its end (stats) */
  zv_defer_ent_t *p_defer_ents; /* sync scratch: this txg's frees */
  size_t p_defer_n, p_defer_cap;
};

/* Sync passes after which the space maps must have converged. */
static unsigned zv_pool_max_passes = 64;
/* zil_size: the log ring of a pool created without a log device (0: 64
 * MiB, or a sixteenth of a small pool). */
static uint64_t zv_pool_zil_size = 0;

/* Deferred-free list capacity, in 16 KiB blocks (F^2: 66M extents). */
#define ZV_DEFER_NBLOCKS ((uint64_t) ZV_INDIRECT_FANOUT * ZV_INDIRECT_FANOUT)
#define ZV_DEFER_PER_BLK (ZV_DEFER_BLKSZ / sizeof (zv_defer_ent_t))

/* Defaults for a pool configuration: the tunables' current values. */
void
zv_pool_config_init (zv_pool_config_t *pc)
{
  memset (pc, 0, sizeof *pc);
  pc->pc_volblocksize = ZV_DEFAULT_VOLBLOCKSIZE;
  pc->pc_name = "zvol";
  pc->pc_zil_size = zv_pool_zil_size;
  zv_txg_tunables_default (&pc->pc_txg);
}

/* A random, nonzero 64-bit id. */
static uint64_t
pool_random_guid (void)
{
  uint64_t g = 0;

  while (g == 0)
    if (getrandom (&g, sizeof g, 0) != sizeof g)
      g = (uint64_t) time (NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t) getpid ();
  return g;
}

/* Number of volume blocks. */
static uint64_t
pool_vol_nblocks (uint64_t volsize, uint32_t vbs)
{
  return (volsize + vbs - 1) / vbs;
}

/* ---- the sync ---- */

/* Space-map fill: the allocator's bitmap chunk. */
static void
pool_chunk_fill (void *arg, uint64_t blkid, void *buf)
{
  void **a = arg;
  zv_alloc_t *alloc = a[0];
  unsigned dev = (unsigned) (uintptr_t) a[1];

  zv_alloc_chunk_save (alloc, dev, blkid, buf);
}

/* Collect one of this txg's deferred frees into the scratch list. */
static void
pool_defer_collect (void *arg, uint64_t dva, uint32_t size)
{
  zv_pool_t *p = arg;

  ZV_GROW (p->p_defer_ents, p->p_defer_n, p->p_defer_cap, 1024);
  p->p_defer_ents[p->p_defer_n++] = (zv_defer_ent_t) {
    .de_dva = dva, .de_size = size,
  };
}

/* Deferred-list fill: entries of block blkid. */
static void
pool_defer_fill (void *arg, uint64_t blkid, void *buf)
{
  zv_pool_t *p = arg;
  size_t first = blkid * ZV_DEFER_PER_BLK;

  if (first < p->p_defer_n)
    memcpy (buf, &p->p_defer_ents[first],
            ZV_MIN (ZV_DEFER_PER_BLK, p->p_defer_n - first)
            * sizeof (zv_defer_ent_t));
}

/*
 * Write T's deferred-free list if it grew since the last pass (within a
 * sync the list only grows, so the same count is the same list).  It is
 * collected afresh each pass, in the allocator's order, which need not
 * be the last pass's, so every block in use is rewritten, not only those
 * past the old end.  Returns 1 if it wrote.
 */
static int
pool_sync_defer (zv_pool_t *p, zv_flat_t *df, uint64_t txg, size_t *lastn)
{
  size_t n;

  p->p_defer_n = 0;
  zv_alloc_defer_foreach (p->p_spa.spa_alloc, txg, pool_defer_collect, p);
  n = p->p_defer_n;
  if (n == *lastn)
    return 0;
  if (n > ZV_DEFER_NBLOCKS * ZV_DEFER_PER_BLK) {
    zv_error ("txg %" PRIu64 " frees %zu extents, more than one txg can "
              "record", txg, n);
    return -ENOSPC;
  }
  for (uint64_t b = 0; b * ZV_DEFER_PER_BLK < ZV_MAX (n, *lastn == SIZE_MAX
                                                        ? 0 : *lastn); b++)
    zv_flat_dirty (df, b);
  df->fl_size = n * sizeof (zv_defer_ent_t);
  *lastn = n;
  return 1;
}

/*
 * Rewrite T-1's deferred-free list in T, once after an import whose
 * claim cancelled entries of it.  Only T's list is written by a sync;
 * T-1's on disk would otherwise still name the blocks the replay adopted,
 * and T+1 would free them while the tree uses them (import's ownership
 * check refuses such a pool).  The list keeps its own txg.
 */
static int
pool_sync_defer_prev (zv_pool_t *p, uint64_t txg)
{
  zv_flat_t *pf = &p->p_defer[(txg + 1) % 2];
  uint64_t ptxg = pf->fl_txg;
  size_t pn = SIZE_MAX;
  int r;

  p->p_defer_rewrite = false;
  if (ptxg + 1 != txg)
    return 0;                   /* no pending list of T-1 */
  r = pool_sync_defer (p, pf, ptxg, &pn);
  if (r > 0)
    r = zv_flat_sync (pf, txg, pool_defer_fill, p);
  pf->fl_txg = ptxg;
  return r < 0 ? r : 0;
}

/* ---- the datasets' part of the sync ---- */

/* A dataset's record, sealed for its slot. */
static void
pool_ds_record (zv_pool_t *p, zv_pool_ds_t *ds, const zv_zil_header_t *zh,
                zv_dsrec_phys_t *rec)
{
  uint64_t refd;

  memset (rec, 0, sizeof *rec);
  rec->dr_magic = ZV_DSREC_MAGIC;
  rec->dr_version = ZV_DSREC_VERSION;
  rec->dr_kind = ZV_DS_KIND_VOLUME;
  rec->dr_id = ds->ds_id;
  rec->dr_creation_txg = ds->ds_creation_txg;
  rec->dr_creation_time = ds->ds_creation_time;
  rec->dr_volsize = ds->ds_volsize;
  rec->dr_volblocksize = ds->ds_blksz;
  rec->dr_reservation = ds->ds_reservation;
  snprintf (rec->dr_name, sizeof rec->dr_name, "%s", ds->ds_name);
  zv_dmu_object_phys (&ds->ds_obj, &rec->dr_volume);
  rec->dr_volume.dn_size = ds->ds_volsize;
  /* Without snapshots every data block is the volume's alone. */
  refd = zv_bp_is_hole (&rec->dr_volume.dn_root) ? 0
    : rec->dr_volume.dn_root.bp_fill * ds->ds_blksz;
  rec->dr_referenced = rec->dr_used = rec->dr_written = refd;
  rec->dr_zil = *zh;
  zv_cksum_compute (rec, sizeof *rec, zv_dsrec_seed (p->p_spa.spa_guid,
                                                     ds->ds_slot),
                    &rec->dr_cksum);
}

/* Directory fill: the records of block blkid (free slots stay zero). */
static void
pool_dsdir_fill (void *arg, uint64_t blkid, void *buf)
{
  zv_pool_t *p = arg;

  for (size_t i = 0; i < p->p_sync_nds; i++) {
    zv_pool_ds_t *ds = p->p_sync_dss[i];
    if (!ds->ds_freeing && ds->ds_slot / ZV_DSDIR_PER_BLK == blkid)
      memcpy ((uint8_t *) buf + (ds->ds_slot % ZV_DSDIR_PER_BLK)
              * ZV_DSREC_SIZE, &ds->ds_rec, ZV_DSREC_SIZE);
  }
}

/* A destroyed volume's walk: every block of its tree goes. */
static int
pool_free_cb (void *arg, const zv_blkptr_t *bp, unsigned level,
              uint64_t blkid, const void *data)
{
  void **a = arg;

  (void) level, (void) blkid, (void) data;
  zv_zio_free_bp (a[0], bp, *(uint64_t *) a[1]);
  return 0;
}

/* Free what a destroyed volume held: its synced tree and its ring. */
static int
pool_ds_free (zv_pool_t *p, zv_pool_ds_t *ds, uint64_t txg)
{
  zv_spa_t *spa = &p->p_spa;
  const zv_zil_header_t *zh = &ds->ds_zil_hdr;
  zv_dnode_phys_t dn;
  void *arg[2] = { spa, &txg };
  int r;

  /* zvol_volume_destroy waited for a txg after the last close: nothing
   * is dirty, but a suspended pool's leftovers must not be written. */
  zv_dmu_object_discard_dirty (&ds->ds_obj);
  zv_dmu_object_phys (&ds->ds_obj, &dn);
  r = zv_dmu_walk (spa, ds->ds_obj.ob_id, &dn, false, pool_free_cb, arg);
  if (r < 0) {
    zv_error ("pool '%s': freeing volume '%s' failed reading its tree",
              p->p_name, ds->ds_name);
    return r;
  }
  if (zh->zh_nslots > 0 && ZV_DVA_VDEV (zh->zh_ring_dva) != ZV_LOG_VDEV)
    zv_alloc_free_defer (spa->spa_alloc, txg, zh->zh_ring_dva,
                         (uint32_t) (zh->zh_nslots * zh->zh_blksz));
  return 0;
}

/*
 * Step 2 of the theory comment, for every dataset of the sync's list:
 * free the destroyed ones, write the others' trees, then the directory
 * blocks whose records changed (a record is rebuilt every txg and
 * compared with the one last written).  The log headers are taken here,
 * before the space maps converge: a header only moves its head past
 * blocks whose records are all synced by this txg.
 */
static int
pool_sync_datasets (zv_pool_t *p, uint64_t txg)
{
  uint64_t size = 0;
  int r = 0;

  pthread_mutex_lock (&p->p_ds_lock);
  p->p_sync_nds = 0;
  for (size_t i = 0; i < p->p_nds; i++) {
    ZV_GROW (p->p_sync_dss, p->p_sync_nds, p->p_sync_dscap, 16);
    p->p_sync_dss[p->p_sync_nds++] = p->p_dss[i];
    p->p_dss[i]->ds_freeing = p->p_dss[i]->ds_destroy;
  }
  pthread_mutex_unlock (&p->p_ds_lock);

  for (size_t i = 0; i < p->p_sync_nds && r == 0; i++) {
    zv_pool_ds_t *ds = p->p_sync_dss[i];
    r = ds->ds_freeing ? pool_ds_free (p, ds, txg)
      : zv_dmu_sync (&ds->ds_obj, txg);
  }
  for (size_t i = 0; i < p->p_sync_nds && r == 0; i++) {
    zv_pool_ds_t *ds = p->p_sync_dss[i];
    zv_dsrec_phys_t rec;
    zv_zil_header_t zh;

    if (ds->ds_freeing) {
      zv_flat_dirty (&p->p_dsdir, ds->ds_slot / ZV_DSDIR_PER_BLK);
      continue;
    }
    pthread_mutex_lock (&p->p_ds_lock);
    if (ds->ds_zil)
      zv_zil_sync_header (ds->ds_zil, txg, &ds->ds_zil_hdr);
    zh = ds->ds_zil_hdr;
    pthread_mutex_unlock (&p->p_ds_lock);
    pool_ds_record (p, ds, &zh, &rec);
    atomic_store_explicit (&ds->ds_referenced, rec.dr_referenced,
                           memory_order_relaxed);
    if (memcmp (&rec, &ds->ds_rec, sizeof rec) != 0) {
      ds->ds_rec = rec;
      zv_flat_dirty (&p->p_dsdir, ds->ds_slot / ZV_DSDIR_PER_BLK);
    }
    size = ZV_MAX (size, (ds->ds_slot + 1) * ZV_DSREC_SIZE);
  }
  if (r < 0)
    return r;
  p->p_dsdir.fl_size = size;
  return zv_flat_sync (&p->p_dsdir, txg, pool_dsdir_fill, p);
}

/* After a sync: the destroyed datasets are gone from disk; drop them. */
static void
pool_sync_reap (zv_pool_t *p)
{
  pthread_mutex_lock (&p->p_ds_lock);
  for (size_t i = 0; i < p->p_nds;) {
    zv_pool_ds_t *ds = p->p_dss[i];
    bool synced = false;

    for (size_t j = 0; j < p->p_sync_nds && !synced; j++)
      synced = p->p_sync_dss[j] == ds;
    if (!synced || !ds->ds_freeing) {
      i++;
      continue;
    }
    p->p_dss[i] = p->p_dss[--p->p_nds];
    zv_dmu_object_close (&ds->ds_obj);
    free (ds);
  }
  p->p_sync_nds = 0;
  pthread_mutex_unlock (&p->p_ds_lock);
}

/* Steps 4-6 of the theory comment: converge, objset, uberblock. */
static int
pool_sync_meta (zv_pool_t *p, uint64_t txg)
{
  zv_spa_t *spa = &p->p_spa;
  zv_alloc_t *alloc = spa->spa_alloc;
  zv_flat_t *df = &p->p_defer[txg % 2];
  zv_blkptr_t osbp, old = p->p_objset_bp;
  size_t lastn = SIZE_MAX;
  unsigned pass;
  bool moved = true;
  int r;

  /* The objset's place first, so the bitmap converges with it in. */
  r = zv_zio_place_bp (spa, &old, &osbp, false, ZV_OBJSET_SIZE, 0,
                       ZV_BT_OBJSET, 1, 2, txg);
  if (r < 0)
    return r;
  if (p->p_defer_rewrite && (r = pool_sync_defer_prev (p, txg)) < 0)
    return r;

  for (pass = 1;; pass++) {
    bool work = false;

    /* A pass that moved no block (every one went back in place) changed
     * neither the bitmap nor T's list: what it wrote is all of T.  What
     * is dirty now was changed meanwhile in open context (an in-place log
     * write allocates there, and a chunk covers 512 MiB): it belongs to
     * the next txg, and waiting for it here would never end under a
     * stream of such writes. */
    if (!moved)
      break;
    for (unsigned d = 0; d < spa->spa_ndevs; d++)
      for (size_t c = 0; c < zv_alloc_nchunks (alloc, d); c++)
        if (zv_alloc_chunk_dirty (alloc, d, c)) {
          zv_flat_dirty (&p->p_spacemap[d], c);
          work = true;
        }
    r = pool_sync_defer (p, df, txg, &lastn);
    if (r < 0)
      return r;
    if (r > 0)
      work = true;
    if (!work)
      break;
    if (pass > zv_pool_max_passes) {
      zv_error ("txg %" PRIu64 ": space maps did not converge after %u "
                "passes", txg, pass);
      return -EIO;
    }
    moved = false;
    r = 0;                      /* (pool_sync_defer's 1 is not an error) */
    for (unsigned d = 0; d < spa->spa_ndevs && r == 0; d++) {
      void *arg[2] = { alloc, (void *) (uintptr_t) d };
      r = zv_flat_sync (&p->p_spacemap[d], txg, pool_chunk_fill, arg);
      moved |= p->p_spacemap[d].fl_moved > 0;
    }
    if (r == 0)
      r = zv_flat_sync (df, txg, pool_defer_fill, p);
    if (r < 0)
      return r;
    moved |= df->fl_moved > 0;
  }
  p->p_sync_passes = pass;

  /* The objset block. */
  zv_objset_phys_t *os = zv_buf_alloc (ZV_OBJSET_SIZE);
  memset (os, 0, ZV_OBJSET_SIZE);
  os->os_hdr.mh_magic = ZV_MBLK_MAGIC;
  os->os_hdr.mh_version = ZV_POOL_VERSION;
  os->os_hdr.mh_type = ZV_BT_OBJSET;
  os->os_hdr.mh_txg = txg;
  os->os_pool_guid = spa->spa_guid;
  os->os_txg = txg;
  os->os_ndevs = spa->spa_ndevs;
  zv_flat_phys (&p->p_dsdir, &os->os_dsdir);
  pthread_mutex_lock (&p->p_ds_lock);
  os->os_next_dsid = p->p_next_dsid;
  pthread_mutex_unlock (&p->p_ds_lock);
  for (unsigned i = 0; i < 2; i++)
    zv_flat_phys (&p->p_defer[i], &os->os_defer[i]);
  for (unsigned d = 0; d < spa->spa_ndevs; d++)
    zv_flat_phys (&p->p_spacemap[d], &os->os_spacemap[d]);
  zv_zio_write_t w = { .zw_bp = &osbp, .zw_buf = os };
  r = zv_zio_write_many (spa, &w, 1);
  zv_buf_free (os);
  if (r == 0)
    r = zv_zio_flush_all (spa);
  if (r < 0)
    return r;

  /* The uberblock: front labels, flush, back labels, flush. */
  zv_uberblock_phys_t ub;
  struct timespec now;
  memset (&ub, 0, sizeof ub);
  clock_gettime (CLOCK_REALTIME, &now);
  ub.ub_magic = ZV_UB_MAGIC;
  ub.ub_version = ZV_FORMAT_VERSION;
  ub.ub_txg = txg;
  ub.ub_timestamp = (uint64_t) now.tv_sec * 1000000000ull + now.tv_nsec;
  ub.ub_pool_guid = spa->spa_guid;
  ub.ub_rootbp = osbp;
  for (unsigned l = 0; l < ZV_NLABELS && r == 0; l++) {
    r = zv_label_write_ub (spa->spa_devs, spa->spa_ndevs, &ub, l);
    if (r == 0) {
      atomic_fetch_add_explicit (&spa->spa_written[ZV_BT_NONE],
                                 (uint64_t) ZV_SECTOR * spa->spa_ndevs,
                                 memory_order_relaxed);
      r = zv_zio_flush_all (spa);
    }
  }
  if (r < 0) {
    zv_error ("txg %" PRIu64 ": writing the uberblock failed", txg);
    return r;
  }
  p->p_objset_bp = osbp;
  p->p_synced_txg = txg;
  pthread_mutex_lock (&p->p_ds_lock);
  for (size_t i = 0; i < p->p_sync_nds; i++)
    if (p->p_sync_dss[i]->ds_zil)
      zv_zil_synced (p->p_sync_dss[i]->ds_zil, txg);
  pthread_mutex_unlock (&p->p_ds_lock);
  return 0;
}

/* Write txg to disk (the txg engine's callback). */
static int
pool_sync_txg (void *arg, uint64_t txg, zv_txg_sync_stats_t *st)
{
  zv_pool_t *p = arg;
  zv_spa_t *spa = &p->p_spa;
  zv_dev_stats_t before[ZV_MAX_DEVS], after;
  int r;

  /* One sync at a time, in txg order, never on a read-only pool: the
   * txg engine serializes syncs, and a read-only pool has no writer. */
  ZV_VERIFY3U (txg, >, p->p_synced_txg);
  ZV_ASSERT3U (txg, ==, p->p_synced_txg + 1);
  ZV_VERIFY (!p->p_readonly);
  ZV_VERIFY (!atomic_exchange_explicit (&p->p_syncing, true,
                                        memory_order_relaxed));
  for (unsigned d = 0; d < spa->spa_ndevs; d++)
    zv_dev_get_stats (spa->spa_devs[d], &before[d]);

  /* How fast to write: on the dirty-data curve; the intent log raises
   * the cap while the sync runs if its ring fills (zio.c). */
  zv_zio_write_cap_set (spa, p->p_txg ? zv_txg_dirty_pct (p->p_txg) : 0);
  zv_alloc_sync_begin (spa->spa_alloc, txg);
  /* The list in this slot was T-2's, just applied: its blocks go. */
  zv_flat_free_all (&p->p_defer[txg % 2], txg);
  r = pool_sync_datasets (p, txg);
  if (r == 0)
    r = pool_sync_meta (p, txg);
  if (r == 0)
    pool_sync_reap (p);
  if (r < 0)
    zv_error ("pool %s: txg %" PRIu64 " failed to sync (%s); the pool is "
              "suspended and every later write fails", p->p_name, txg,
              strerror (-r));
  atomic_store_explicit (&p->p_sync_write_cap,
                         atomic_load_explicit (&spa->spa_write_cap,
                                               memory_order_relaxed),
                         memory_order_relaxed);

  memset (st, 0, sizeof *st);
  for (unsigned d = 0; d < spa->spa_ndevs; d++) {
    zv_dev_get_stats (spa->spa_devs[d], &after);
    st->ss_reads += after.ds_reads - before[d].ds_reads;
    st->ss_writes += after.ds_writes - before[d].ds_writes;
    st->ss_nread += after.ds_nread - before[d].ds_nread;
    st->ss_nwritten += after.ds_nwritten - before[d].ds_nwritten;
  }
  atomic_store_explicit (&p->p_syncing, false, memory_order_relaxed);
  return r;
}

/* ---- opening ---- */

static void pool_unload (zv_pool_t *p);

/* Release everything a failed or finished open holds. */
static void
pool_free (zv_pool_t *p)
{
  if (p == NULL)
    return;
  for (size_t i = 0; i < p->p_nds; i++)
    ZV_VERIFY (!p->p_dss[i]->ds_held && p->p_dss[i]->ds_zil == NULL);
  if (p->p_txg)
    zv_txg_destroy (p->p_txg);
  if (p->p_logdev)
    zv_dev_close (p->p_logdev);
  pool_unload (p);
  for (unsigned d = 0; d < p->p_spa.spa_ndevs; d++)
    if (p->p_spa.spa_devs[d])
      zv_dev_close (p->p_spa.spa_devs[d]);
  free (p->p_dss);
  free (p->p_sync_dss);
  free (p->p_defer_ents);
  pthread_mutex_destroy (&p->p_ds_lock);
  pthread_mutex_destroy (&p->p_admin_lock);
  free (p);
}

/*
 * The identity of a device for the duplicate checks: a block device is
 * its device number (two nodes of one disk are one device), anything
 * else its inode (a symlink, a hard link or another spelling of a path
 * leads to the same one).  false when the path cannot be looked at: its
 * open reports why.
 */
typedef struct pool_dev_id {
  bool di_known;
  bool di_blk;
  dev_t di_dev;                /* st_rdev of a block device, else st_dev */
  ino_t di_ino;                /* 0 for a block device */
} pool_dev_id_t;

static void
pool_dev_id (const char *path, pool_dev_id_t *id)
{
  struct stat st;

  memset (id, 0, sizeof *id);
  if (stat (path, &st) == -1)
    return;
  id->di_known = true;
  id->di_blk = S_ISBLK (st.st_mode);
  id->di_dev = id->di_blk ? st.st_rdev : st.st_dev;
  id->di_ino = id->di_blk ? 0 : st.st_ino;
}

/* The same path, or the same device or file under two names. */
static bool
pool_same_dev (const char *pa, const pool_dev_id_t *a, const char *pb,
               const pool_dev_id_t *b)
{
  if (strcmp (pa, pb) == 0)
    return true;
  return a->di_known && b->di_known && a->di_blk == b->di_blk
    && a->di_dev == b->di_dev && a->di_ino == b->di_ino;
}

/*
 * Before anything is opened: every data device is a different device,
 * and the log device is none of them.  Opening one twice would fail on
 * its lock, with a message about another process.
 */
static int
pool_check_distinct (const zv_pool_config_t *pc)
{
  pool_dev_id_t ids[ZV_MAX_DEVS], logid;
  const char *rados = NULL, *local = NULL;

  /* One kind of device: a pool half in a cluster and half on this host
   * would have neither's properties (another server could not import it,
   * and the RADOS lock would not cover the local half). */
  for (unsigned i = 0; i <= pc->pc_ndevices; i++) {
    const char *d = i < pc->pc_ndevices ? pc->pc_devices[i]
      : pc->pc_logdevice;
    if (d == NULL)
      continue;
    if (zv_dev_path_is_rados (d))
      rados = rados ? rados : d;
    else
      local = local ? local : d;
  }
  if (rados != NULL && local != NULL) {
    zv_error ("%s is a RADOS device and %s is not: a pool's devices (its "
              "log device included) are all RADOS devices or all files and "
              "block devices", rados, local);
    return -EINVAL;
  }

  for (unsigned i = 0; i < pc->pc_ndevices; i++) {
    pool_dev_id (pc->pc_devices[i], &ids[i]);
    for (unsigned j = 0; j < i; j++) {
      if (!pool_same_dev (pc->pc_devices[i], &ids[i], pc->pc_devices[j],
                          &ids[j]))
        continue;
      if (strcmp (pc->pc_devices[i], pc->pc_devices[j]) == 0)
        zv_error ("%s: device given twice", pc->pc_devices[i]);
      else
        zv_error ("%s and %s are the same %s: device given twice",
                  pc->pc_devices[j], pc->pc_devices[i],
                  ids[i].di_blk ? "block device" : "file");
      return -EINVAL;
    }
  }
  if (pc->pc_logdevice == NULL)
    return 0;
  pool_dev_id (pc->pc_logdevice, &logid);
  for (unsigned i = 0; i < pc->pc_ndevices; i++) {
    if (!pool_same_dev (pc->pc_logdevice, &logid, pc->pc_devices[i],
                        &ids[i]))
      continue;
    if (strcmp (pc->pc_logdevice, pc->pc_devices[i]) == 0)
      zv_error ("%s is both a data device and the log device: the log "
                "device must be a separate device", pc->pc_logdevice);
    else
      zv_error ("log device %s is the data device %s (the same %s): the "
                "log device must be a separate device", pc->pc_logdevice,
                pc->pc_devices[i], logid.di_blk ? "block device" : "file");
    return -EINVAL;
  }
  return 0;
}

/* How to open the configuration's devices (RADOS ones: the cluster, and
 * with create the size of one not made yet). */
static void
pool_dev_opts (const zv_pool_config_t *pc, bool log, zv_dev_opts_t *o)
{
  memset (o, 0, sizeof *o);
  o->do_ceph_conf = pc->pc_ceph_conf;
  o->do_ceph_user = pc->pc_ceph_user;
  o->do_ceph_keyring = pc->pc_ceph_keyring;
  o->do_takeover = pc->pc_rados_takeover && !pc->pc_create;
  if (pc->pc_create)
    o->do_create_size = ZV_P2ALIGN (log ? pc->pc_rados_log_size
                                    : pc->pc_rados_size, ZV_SECTOR);
}

/* Open and lock every device named in the configuration (distinct:
 * pool_check_distinct). */
static int
pool_open_devs (const zv_pool_config_t *pc, zv_dev_t **devs)
{
  char err[1024];
  zv_dev_opts_t o;

  pool_dev_opts (pc, false, &o);
  for (unsigned i = 0; i < pc->pc_ndevices; i++) {
    int r = zv_dev_open_opts (pc->pc_devices[i], &o, &devs[i], err,
                              sizeof err);
    if (r < 0) {
      zv_error ("%s", err);
      for (unsigned j = 0; j < i; j++)
        zv_dev_close (devs[j]);
      return r;
    }
  }
  return 0;
}

/* The memory monitor's view of the cache (mem.h). */
static uint64_t
pool_cache_size (void *arg)
{
  return zv_dbuf_cache_bytes (arg);
}

static void
pool_cache_apply (void *arg, uint64_t target)
{
  zv_dbuf_cache_set_target (arg, target);
}

/* Geometry shared by create and import. */
static void
pool_setup (zv_pool_t *p, const zv_pool_config_t *pc)
{
  zv_spa_t *spa = &p->p_spa;
  uint64_t start[ZV_MAX_DEVS], end[ZV_MAX_DEVS];

  for (unsigned d = 0; d < spa->spa_ndevs; d++) {
    start[d] = zv_data_start ();
    end[d] = spa->spa_data_end[d];
  }
  spa->spa_alloc = zv_alloc_create (spa->spa_ndevs, start, end);
  uint64_t limit = pc->pc_cache_size ? pc->pc_cache_size
    : zv_dbuf_cache_limit_default ();
  p->p_cache = zv_dbuf_cache_create (limit);
  /* The configured size is a ceiling: the cache gives memory back when
   * the system runs short, down to a floor it needs to work. */
  p->p_cache_mem = zv_mem_register (limit, ZV_MIN (limit, ZV_MAX (limit / 64,
                                                                  32ull << 20)),
                                    pool_cache_size, pool_cache_apply,
                                    p->p_cache);
  for (unsigned d = 0; d < spa->spa_ndevs; d++)
    zv_flat_init (&p->p_spacemap[d], spa, ZV_OBJ_SPACEMAP0 + d,
                  ZV_BT_SPACEMAP, ZV_ALLOC_CHUNK,
                  zv_alloc_nchunks (spa->spa_alloc, d));
  for (unsigned i = 0; i < 2; i++)
    zv_flat_init (&p->p_defer[i], spa, ZV_OBJ_DEFER0 + i, ZV_BT_DEFER,
                  ZV_DEFER_BLKSZ, ZV_DEFER_NBLOCKS);
  zv_flat_init (&p->p_dsdir, spa, ZV_OBJ_DSDIR, ZV_BT_DSDIR, ZV_DSDIR_BLKSZ,
                ZV_DSDIR_NBLOCKS);
  p->p_capacity = 0;
  for (unsigned d = 0; d < spa->spa_ndevs; d++)
    p->p_capacity += end[d] - start[d];
}

/* The descriptor of a new (empty) volume. */
static void
pool_new_volume (uint64_t volsize, uint32_t blksz, zv_dnode_phys_t *dn)
{
  uint64_t nb = pool_vol_nblocks (volsize, blksz);

  memset (dn, 0, sizeof *dn);
  dn->dn_type = ZV_BT_VOLDATA;
  dn->dn_datablksz = blksz;
  dn->dn_nblocks = nb;
  dn->dn_nlevels = zv_dmu_nlevels (nb);
  dn->dn_size = volsize;
}

/* What a new dataset is made of, whether created or imported. */
typedef struct pool_ds_init {
  const char *di_name;
  uint64_t di_id, di_slot;
  uint64_t di_volsize;
  uint32_t di_blksz;
  uint64_t di_reservation;
  uint64_t di_creation_txg, di_creation_time;
  const zv_dnode_phys_t *di_volume;
  const zv_zil_header_t *di_zil;
} pool_ds_init_t;

/* Make a dataset and put it on the pool's list. */
static zv_pool_ds_t *
pool_ds_add (zv_pool_t *p, const pool_ds_init_t *di)
{
  zv_pool_ds_t *ds = zv_calloc (1, sizeof *ds);

  ds->ds_pool = p;
  snprintf (ds->ds_name, sizeof ds->ds_name, "%s", di->di_name);
  ds->ds_id = di->di_id;
  ds->ds_slot = di->di_slot;
  ds->ds_volsize = di->di_volsize;
  ds->ds_blksz = di->di_blksz;
  ds->ds_reservation = di->di_reservation;
  ds->ds_creation_txg = di->di_creation_txg;
  ds->ds_creation_time = di->di_creation_time;
  ds->ds_zil_hdr = *di->di_zil;
  zv_dmu_object_open (&ds->ds_obj, &p->p_spa, p->p_cache,
                      ZV_OBJ_VOLUME, di->di_volume);
  atomic_store_explicit (&ds->ds_referenced, zv_bp_is_hole
                         (&di->di_volume->dn_root) ? 0
                         : di->di_volume->dn_root.bp_fill * di->di_blksz,
                         memory_order_relaxed);
  pthread_mutex_lock (&p->p_ds_lock);
  ZV_GROW (p->p_dss, p->p_nds, p->p_dscap, 8);
  p->p_dss[p->p_nds++] = ds;
  pthread_mutex_unlock (&p->p_ds_lock);
  return ds;
}

/* Drop every dataset (export, or an uberblock whose load failed). */
static void
pool_ds_drop_all (zv_pool_t *p)
{
  for (size_t i = 0; i < p->p_nds; i++) {
    zv_pool_ds_t *ds = p->p_dss[i];
    /* Anything still dirty belongs to a suspended pool or a failed
     * open: it cannot be written, and was never acknowledged durable. */
    zv_dmu_object_discard_dirty (&ds->ds_obj);
    zv_dmu_object_close (&ds->ds_obj);
    free (ds);
  }
  p->p_nds = 0;
  p->p_sync_nds = 0;
}

/* The dataset called name (the caller holds p_ds_lock), or NULL. */
static zv_pool_ds_t *
pool_ds_lookup (zv_pool_t *p, const char *name)
{
  for (size_t i = 0; i < p->p_nds; i++)
    if (!p->p_dss[i]->ds_destroy
        && strncmp (p->p_dss[i]->ds_name, name, ZV_NAME_MAX) == 0)
      return p->p_dss[i];
  return NULL;
}

/* The throttle's view of space (zv_txg_space_fn). */
static void
pool_space_pressure (void *arg, uint64_t *inuse, uint64_t *cap)
{
  zv_alloc_pressure (arg, inuse, cap);
}

/* Finish opening: the txg engine, whose throttle sees space too. */
static void
pool_finish (zv_pool_t *p, const zv_pool_config_t *pc)
{
  p->p_txg = zv_txg_create (&pc->pc_txg, p->p_synced_txg + 1, pool_sync_txg,
                            p);
  zv_txg_set_space_fn (p->p_txg, pool_space_pressure, p->p_spa.spa_alloc);
  p->p_open_txg = p->p_synced_txg;
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
pool_zero_ring (zv_dev_t *dev, uint64_t off, uint64_t len)
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

/*
 * The pool's geometry: how create shares out the devices' data areas.
 * The allocator keeps its slop back from writers so that a sync never
 * runs out (zv_alloc_slop, with its tunables); create also keeps room for
 * the metadata of a full volume and, without a log device, for the intent
 * log's ring.  The deferred-free lists' size is ZV_DEFER_NBLOCKS above.
 */
static const struct pool_geometry {
  unsigned pg_meta_shift;         /* metadata: 1/64 of the capacity... */
  uint64_t pg_meta_extra;         /* ...plus this */
  unsigned pg_zil_shift;          /* default ring: 1/16 of the capacity... */
  uint64_t pg_zil_max;            /* ...at most this */
  unsigned pg_zil_limit_shift;    /* any ring: at most 1/4 of it */
  unsigned pg_zil_min_blocks;     /* and at least this many log blocks */
} pool_geometry = {
  .pg_meta_shift = 6, .pg_meta_extra = 8ull << 20,
  .pg_zil_shift = 4, .pg_zil_max = 64ull << 20,
  .pg_zil_limit_shift = 2, .pg_zil_min_blocks = 4,
};

/* What create lays out, once every argument checked. */
typedef struct pool_layout {
  uint64_t pl_capacity;           /* data areas of the data devices */
  uint64_t pl_zil_ring;           /* bytes; 0 with a log device */
} pool_layout_t;

/* A volume's size: a nonzero multiple of 512 bytes, at most 1 PiB. */
static bool
pool_volsize_valid (uint64_t v)
{
  return v != 0 && v % 512 == 0 && v <= (1ull << 50);
}

static bool
pool_blksz_valid (uint32_t vbs)
{
  return vbs >= ZV_MIN_VOLBLOCKSIZE && vbs <= ZV_MAX_VOLBLOCKSIZE
    && (vbs & (vbs - 1)) == 0;
}

/* Create, step 1: the arguments. */
static int
pool_create_validate (const zv_pool_config_t *pc)
{
  uint32_t vbs = pc->pc_volblocksize;

  if (!pool_blksz_valid (vbs)) {
    zv_error ("volblocksize %" PRIu32 " is invalid: a power of two from "
              "4K to 128K", vbs);
    return -EINVAL;
  }
  /* 0: the pool alone, its volumes created later. */
  if (pc->pc_volsize != 0 && !pool_volsize_valid (pc->pc_volsize)) {
    zv_error ("volume size %" PRIu64 " is invalid: a nonzero multiple of "
              "512 bytes, at most 1 PiB", pc->pc_volsize);
    return -EINVAL;
  }
  if (pc->pc_name == NULL || !zv_name_is_valid (pc->pc_name, ZV_NAME_MAX)) {
    zv_error ("pool name must be 1 to %u characters of printable ASCII",
              ZV_NAME_MAX - 1);
    return -EINVAL;
  }
  return 0;
}

/* A device create may use: large enough, and no pool's labels on it. */
static int
pool_create_check_dev (zv_dev_t *dev, const char *role)
{
  uint64_t size = ZV_P2ALIGN (zv_dev_size (dev), ZV_SECTOR);
  zv_config_phys_t cf;
  char err[512];
  int r;

  if (size < ZV_MIN_DEV_SIZE) {
    zv_error ("%s: %s too small (%" PRIu64 " bytes; at least %llu)",
              zv_dev_path (dev), role, size,
              (unsigned long long) ZV_MIN_DEV_SIZE);
    return -EINVAL;
  }
  /* Only a device that shows no sign of a pool is free: damaged labels,
   * or a configuration that verifies but fails its bounds, may sit over
   * a pool whose uberblocks, tree and data are intact. */
  r = zv_label_read_config (dev, &cf, NULL, err, sizeof err);
  if (r == 0)
    zv_error ("%s: already a device of pool '%s' (guid %016" PRIx64 "); "
              "refusing to overwrite it as a %s (import it without "
              "create=true, or wipe it first)", zv_dev_path (dev),
              cf.cf_name, cf.cf_pool_guid, role);
  else if (r == -EIO)
    zv_error ("%s; refusing to overwrite it as a %s (wipe it first if it "
              "really is unused)", err, role);
  else if (r != -ENOENT)
    zv_error ("%s: holds a pool configuration that verifies but is "
              "invalid (%s); refusing to overwrite it as a %s (wipe it "
              "first if it really is unused)", zv_dev_path (dev), err, role);
  return r == -ENOENT ? 0 : -EEXIST;
}

/* Create, step 2: check the devices and share out their space. */
/* A size as the user writes it (zil_size's format: 64M, 7680, auto). */
static void
pool_size_text (uint64_t v, char *buf, size_t len)
{
  const zv_tunable_t *tn = zv_tunable_lookup ("zil_size");

  if (tn != NULL)
    zv_tunable_format (tn, v, buf, len);
  else
    snprintf (buf, len, "%" PRIu64, v);
}

static int
pool_create_layout (const zv_pool_config_t *pc, zv_pool_t *p,
                    pool_layout_t *pl)
{
  const struct pool_geometry *g = &pool_geometry;
  zv_spa_t *spa = &p->p_spa;
  uint64_t cap = 0, ring = 0, slop, meta, usable;
  int r;

  for (unsigned d = 0; d < spa->spa_ndevs; d++) {
    r = pool_create_check_dev (spa->spa_devs[d], "device");
    if (r < 0)
      return r;
    spa->spa_data_end[d] = zv_data_end (zv_dev_size (spa->spa_devs[d]));
    cap += spa->spa_data_end[d] - zv_data_start ();
  }
  if (p->p_logdev) {
    r = pool_create_check_dev (p->p_logdev, "log device");
    if (r < 0)
      return r;
  }
  else {
    uint64_t lo = g->pg_zil_min_blocks * (uint64_t) ZV_ZIL_BLKSZ;
    uint64_t hi = ZV_P2ALIGN (cap >> g->pg_zil_limit_shift, ZV_ZIL_BLKSZ);

    ring = pc->pc_zil_size ? pc->pc_zil_size
      : ZV_MIN (g->pg_zil_max, cap >> g->pg_zil_shift);
    ring = ZV_P2ALIGN (ring, ZV_ZIL_BLKSZ);
    if (ring < lo || ring > hi) {
      char given[32], los[32], his[32], caps[32];

      pool_size_text (pc->pc_zil_size, given, sizeof given);
      pool_size_text (lo, los, sizeof los);
      pool_size_text (hi, his, sizeof his);
      pool_size_text (cap, caps, sizeof caps);
      if (hi < lo)
        zv_error ("zil_size=%s: the pool (%s of data space) is too small "
                  "for an intent log ring, which needs at least %s (%u log "
                  "blocks of %uK) and at most a quarter of the pool: use "
                  "larger devices or a log device (log=)", given, caps, los,
                  g->pg_zil_min_blocks, ZV_ZIL_BLKSZ / 1024);
      else
        zv_error ("zil_size=%s does not fit this pool: the intent log "
                  "ring must be from %s (%u log blocks of %uK) to %s (a "
                  "quarter of the pool's %s of data space)", given, los,
                  g->pg_zil_min_blocks, ZV_ZIL_BLKSZ / 1024, his, caps);
      return -EINVAL;
    }
  }
  slop = zv_alloc_slop (cap) + ring;
  meta = (cap >> g->pg_meta_shift) + g->pg_meta_extra;
  usable = cap > slop + meta ? cap - slop - meta : 0;
  if (pc->pc_volsize != 0 && !pc->pc_sparse && pc->pc_volsize > usable) {
    zv_error ("devices too small for a %" PRIu64 "-byte volume: %" PRIu64
              " bytes usable of %" PRIu64 " (grow the devices, shrink "
              "size=, or pass sparse=true for a thin volume)",
              pc->pc_volsize, usable, cap);
    return -EINVAL;
  }
  pl->pl_capacity = cap;
  pl->pl_zil_ring = ring;
  return 0;
}

/* Label one device with the pool's configuration. */
static int
pool_label_dev (zv_dev_t *dev, const zv_config_phys_t *cf)
{
  int r = zv_label_init (dev, cf);

  if (r < 0)
    zv_error ("%s: writing the labels failed: %s", zv_dev_path (dev),
              strerror (-r));
  return r;
}

/* Create, step 3: the configuration, into every device's labels. */
static int
pool_create_labels (const zv_pool_config_t *pc, zv_pool_t *p)
{
  zv_spa_t *spa = &p->p_spa;
  zv_config_phys_t cf;
  int r = 0;

  memset (&cf, 0, sizeof cf);
  cf.cf_magic = ZV_LABEL_MAGIC;
  cf.cf_version = ZV_POOL_VERSION;
  cf.cf_ndevs = spa->spa_ndevs;
  cf.cf_pool_guid = pool_random_guid ();
  cf.cf_volblocksize = pc->pc_volblocksize;
  cf.cf_volsize = pc->pc_volsize;
  cf.cf_create_time = (uint64_t) time (NULL);
  /* Every ring slot starts as a valid empty uberblock (label.c), so a
   * slot that does not verify was damaged, not merely unwritten. */
  cf.cf_flags = ZV_CF_F_UB_EMPTY;
  snprintf (cf.cf_name, sizeof cf.cf_name, "%s", pc->pc_name);
  for (unsigned d = 0; d < spa->spa_ndevs; d++) {
    cf.cf_dev_guids[d] = pool_random_guid ();
    cf.cf_dev_sizes[d] = ZV_P2ALIGN (zv_dev_size (spa->spa_devs[d]),
                                     ZV_SECTOR);
  }
  if (p->p_logdev) {
    cf.cf_log_guid = pool_random_guid ();
    cf.cf_log_size = ZV_P2ALIGN (zv_dev_size (p->p_logdev), ZV_SECTOR);
  }
  for (unsigned d = 0; d < spa->spa_ndevs && r == 0; d++) {
    cf.cf_dev_index = d;
    cf.cf_dev_guid = cf.cf_dev_guids[d];
    cf.cf_dev_size = cf.cf_dev_sizes[d];
    r = pool_label_dev (spa->spa_devs[d], &cf);
  }
  if (r == 0 && p->p_logdev) {
    zv_config_phys_t lcf = cf;
    lcf.cf_role = ZV_ROLE_LOG;
    lcf.cf_dev_index = 0;
    lcf.cf_dev_guid = cf.cf_log_guid;
    lcf.cf_dev_size = cf.cf_log_size;
    r = pool_label_dev (p->p_logdev, &lcf);
  }
  if (r < 0)
    return r;
  spa->spa_guid = cf.cf_pool_guid;
  snprintf (p->p_name, sizeof p->p_name, "%s", cf.cf_name);
  return 0;
}

/*
 * A new volume's log: the separate log device when the pool has one that
 * no volume uses, else a ring of 'ring' bytes allocated from the pool and
 * zeroed.  The caller holds p_admin_lock (no other create races it for
 * the log device).  On success *ring_dva is the ring allocated (0: the
 * log device), for the caller to free if it fails later.
 */
static int
pool_ds_make_log (zv_pool_t *p, uint64_t ring, zv_zil_header_t *zh,
                  uint64_t *ring_dva)
{
  zv_spa_t *spa = &p->p_spa;
  bool logdev_free = p->p_logdev != NULL;
  uint64_t dva;
  int r;

  *ring_dva = 0;
  pthread_mutex_lock (&p->p_ds_lock);
  for (size_t i = 0; i < p->p_nds; i++)
    if (!p->p_dss[i]->ds_destroy
        && ZV_DVA_VDEV (p->p_dss[i]->ds_zil_hdr.zh_ring_dva) == ZV_LOG_VDEV)
      logdev_free = false;
  pthread_mutex_unlock (&p->p_ds_lock);
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
  r = pool_zero_ring (spa->spa_devs[ZV_DVA_VDEV (dva)], ZV_DVA_OFFSET (dva),
                      ring);
  if (r < 0) {
    zv_alloc_free_now (spa->spa_alloc, dva, (uint32_t) ring);
    return r;
  }
  *ring_dva = dva;
  return 0;
}

/* The ring of a volume created after the pool: zil_size, or 64 MiB (a
 * sixteenth of a small pool), within what create accepts. */
static uint64_t
pool_default_ring (const zv_pool_t *p)
{
  const struct pool_geometry *g = &pool_geometry;
  uint64_t lo = g->pg_zil_min_blocks * (uint64_t) ZV_ZIL_BLKSZ;
  uint64_t hi = ZV_P2ALIGN (p->p_capacity >> g->pg_zil_limit_shift,
                            ZV_ZIL_BLKSZ);
  uint64_t ring = zv_pool_zil_size ? zv_pool_zil_size
    : ZV_MIN (g->pg_zil_max, p->p_capacity >> g->pg_zil_shift);

  ring = ZV_P2ALIGN (ring, ZV_ZIL_BLKSZ);
  return ZV_MAX (lo, ZV_MIN (ring, ZV_MAX (hi, lo)));
}

/*
 * A volume's name, as a caller gives it and as import reads it: 1 to 63
 * of A-Z a-z 0-9 _ - . : (no '/' or '@', the separators of pool/vol@snap),
 * not starting with '-' (an option to the admin tool) or '.'.  Hostile
 * input: looked at only up to ZV_NAME_MAX bytes.
 */
static bool
pool_vol_name_valid (const char *name)
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
pool_avail (zv_pool_t *p, uint64_t *unreserved_freep)
{
  zv_alloc_space_t sp;
  uint64_t inuse, free, held = 0;

  zv_alloc_get_space (p->p_spa.spa_alloc, &sp);
  inuse = sp.as_allocated + sp.as_reserved + zv_alloc_slop (sp.as_total);
  free = sp.as_total > inuse ? sp.as_total - inuse : 0;
  pthread_mutex_lock (&p->p_ds_lock);
  for (size_t i = 0; i < p->p_nds; i++) {
    zv_pool_ds_t *ds = p->p_dss[i];
    uint64_t refd = atomic_load_explicit (&ds->ds_referenced,
                                          memory_order_relaxed);
    if (!ds->ds_destroy && ds->ds_reservation > refd)
      held += ds->ds_reservation - refd;
  }
  pthread_mutex_unlock (&p->p_ds_lock);
  if (unreserved_freep)
    *unreserved_freep = free;
  return free > held ? free - held : 0;
}

/*
 * Create a volume: check the arguments, the name (unique) and the
 * reservation, make its log, and put it on the list; the caller's txg
 * (creation_txg) writes its record.  Under p_admin_lock.
 */
static int
pool_ds_create_locked (zv_pool_t *p, const char *name, uint64_t volsize,
                       uint32_t blksz, uint64_t reservation, uint64_t ring,
                       uint64_t creation_txg, bool check_space)
{
  char shown[4 * ZV_NAME_MAX + 4];
  zv_zil_header_t zh;
  zv_dnode_phys_t dn;
  uint64_t ring_dva, id, slot;
  bool exists;
  int r;

  zv_str_printable (name ? name : "", ZV_NAME_MAX, shown, sizeof shown);
  if (!pool_vol_name_valid (name)) {
    zv_error ("volume name '%s' is invalid: 1 to %u of A-Z a-z 0-9 _ - . "
              ":, not starting with '-' or '.'", shown, ZV_NAME_MAX - 1);
    return -EINVAL;
  }
  if (!pool_volsize_valid (volsize)) {
    zv_error ("volume '%s': size %" PRIu64 " is invalid: a nonzero "
              "multiple of 512 bytes, at most 1 PiB", shown, volsize);
    return -EINVAL;
  }
  if (!pool_blksz_valid (blksz)) {
    zv_error ("volume '%s': volblocksize %" PRIu32 " is invalid: a power "
              "of two from 4K to 128K", shown, blksz);
    return -EINVAL;
  }
  if (reservation > volsize) {
    zv_error ("volume '%s': a reservation of %" PRIu64 " bytes is more "
              "than its size (%" PRIu64 ")", shown, reservation, volsize);
    return -EINVAL;
  }
  pthread_mutex_lock (&p->p_ds_lock);
  exists = pool_ds_lookup (p, name) != NULL;
  pthread_mutex_unlock (&p->p_ds_lock);
  if (exists) {
    zv_error ("pool '%s' has a volume '%s' already", p->p_name, shown);
    return -EEXIST;
  }
  if (check_space && reservation > 0) {
    uint64_t avail = pool_avail (p, NULL);
    if (reservation + ring > avail) {
      zv_error ("pool '%s': no room for volume '%s' with a reservation of "
                "%" PRIu64 " bytes (%" PRIu64 " available, less %" PRIu64
                " for its log; make it thin, or smaller)", p->p_name, shown,
                reservation, avail, ring);
      return -ENOSPC;
    }
  }
  r = pool_ds_make_log (p, ring, &zh, &ring_dva);
  if (r < 0)
    return r;
  pool_new_volume (volsize, blksz, &dn);
  pthread_mutex_lock (&p->p_ds_lock);
  id = p->p_next_dsid++;
  /* The lowest slot no dataset on the list has (a destroyed one keeps
   * its slot until the sync that clears its record). */
  for (slot = 0;; slot++) {
    bool used = false;
    for (size_t i = 0; i < p->p_nds && !used; i++)
      used = p->p_dss[i]->ds_slot == slot;
    if (!used)
      break;
  }
  pthread_mutex_unlock (&p->p_ds_lock);
  if (slot >= (uint64_t) ZV_DSDIR_NBLOCKS * ZV_DSDIR_PER_BLK) {
    if (ring_dva)
      zv_alloc_free_now (p->p_spa.spa_alloc, ring_dva, (uint32_t) ring);
    zv_error ("pool '%s' holds the most datasets it can (%u)", p->p_name,
              ZV_DSDIR_NBLOCKS * ZV_DSDIR_PER_BLK);
    return -ENOSPC;
  }
  pool_ds_init_t di = {
    .di_name = name, .di_id = id, .di_slot = slot, .di_volsize = volsize,
    .di_blksz = blksz, .di_reservation = reservation,
    .di_creation_txg = creation_txg,
    .di_creation_time = (uint64_t) time (NULL), .di_volume = &dn,
    .di_zil = &zh,
  };
  pool_ds_add (p, &di);
  return 0;
}

/* Create a new pool: every check first, then the labels, then txg 1
 * with its first volume if asked for one. */
static int
pool_create (const zv_pool_config_t *pc, zv_pool_t *p)
{
  zv_spa_t *spa = &p->p_spa;
  zv_txg_sync_stats_t st;
  pool_layout_t pl;
  int r = pool_create_validate (pc);

  if (r == 0)
    r = pool_create_layout (pc, p, &pl);
  /* The volume made with the pool is named as the pool, each byte a
   * volume's name cannot hold ('/', '@', a space, a leading '-' or '.')
   * made '_'. */
  char vname[ZV_NAME_MAX];
  if (r == 0) {
    snprintf (vname, sizeof vname, "%s", pc->pc_name);
    for (size_t i = 0; vname[i] != '\0'; i++) {
      char t[2] = { vname[i], '\0' };
      if (!pool_vol_name_valid (t) && !(i > 0 && (t[0] == '-'
                                                  || t[0] == '.')))
        vname[i] = '_';
    }
  }
  /* Every check passed: from here on we write. */
  if (r == 0)
    r = pool_create_labels (pc, p);
  if (r < 0)
    return r;
  pool_setup (p, pc);
  p->p_next_dsid = 1;
  zv_alloc_dirty_all (spa->spa_alloc);
  if (pc->pc_volsize != 0)
    r = pool_ds_create_locked (p, vname, pc->pc_volsize,
                               pc->pc_volblocksize,
                               pc->pc_sparse ? 0 : pc->pc_volsize,
                               pl.pl_zil_ring ? pl.pl_zil_ring
                               : pool_default_ring (p), 1, false);
  if (r == 0)
    r = pool_sync_txg (p, 1, &st);
  if (r < 0)
    return r;
  if (pc->pc_volsize != 0)
    zv_info ("created pool '%s' (guid %016" PRIx64 "): %u device(s), "
             "%" PRIu64 "-byte volume, volblocksize %" PRIu32, p->p_name,
             spa->spa_guid, spa->spa_ndevs, pc->pc_volsize,
             pc->pc_volblocksize);
  else
    zv_info ("created pool '%s' (guid %016" PRIx64 "): %u device(s), no "
             "volume yet", p->p_name, spa->spa_guid, spa->spa_ndevs);
  return 0;
}

/* Import: the devices must make one whole pool. */
static int
pool_check_members (zv_pool_t *p, zv_dev_t **given, unsigned ngiven,
                    zv_config_phys_t *ref)
{
  zv_spa_t *spa = &p->p_spa;
  zv_config_phys_t cf[ZV_MAX_DEVS];
  char err[512];
  int r;

  ZV_VERIFY (ngiven >= 1 && ngiven <= ZV_MAX_DEVS);
  memset (cf, 0, sizeof cf);
  for (unsigned i = 0; i < ngiven; i++) {
    r = zv_label_read_config (given[i], &cf[i], NULL, err, sizeof err);
    if (r < 0) {
      zv_error ("%s%s", err, r == -ENOENT
                ? " (to make a new pool, pass create=true and size=)" : "");
      return r == -ENOENT ? -EINVAL : r;
    }
  }
  for (unsigned i = 0; i < ngiven; i++)
    if (cf[i].cf_role == ZV_ROLE_LOG) {
      zv_error ("%s is the log device of pool '%s': pass it with log=",
                zv_dev_path (given[i]), cf[i].cf_name);
      return -EINVAL;
    }
  *ref = cf[0];
  for (unsigned i = 1; i < ngiven; i++) {
    if (cf[i].cf_pool_guid != ref->cf_pool_guid) {
      zv_error ("%s belongs to pool '%s' (guid %016" PRIx64 "), not to "
                "pool '%s' (guid %016" PRIx64 ") of %s",
                zv_dev_path (given[i]), cf[i].cf_name, cf[i].cf_pool_guid,
                ref->cf_name, ref->cf_pool_guid, zv_dev_path (given[0]));
      return -EINVAL;
    }
  }
  if (ngiven != ref->cf_ndevs) {
    zv_error ("pool '%s' has %u device(s) but %u given: pass every device "
              "of the pool", ref->cf_name, ref->cf_ndevs, ngiven);
    return -EINVAL;
  }
  spa->spa_ndevs = ref->cf_ndevs;
  for (unsigned i = 0; i < ngiven; i++) {
    unsigned idx = cf[i].cf_dev_index;
    /* The index is checked against the device's own count: one past the
     * pool's would leave a slot of the pool empty (a NULL device). */
    if (idx >= ref->cf_ndevs || cf[i].cf_dev_guid != ref->cf_dev_guids[idx]
        || spa->spa_devs[idx] != NULL) {
      zv_error ("%s: device %u of pool '%s' does not match the pool's "
                "device table (given twice, or from an older pool)",
                zv_dev_path (given[i]), idx, ref->cf_name);
      return -EINVAL;
    }
    if (zv_dev_size (given[i]) < ref->cf_dev_sizes[idx]) {
      zv_error ("%s: device shrank (%" PRIu64 " bytes, pool needs %" PRIu64
                ")", zv_dev_path (given[i]), zv_dev_size (given[i]),
                ref->cf_dev_sizes[idx]);
      return -EINVAL;
    }
    spa->spa_devs[idx] = given[i];
    spa->spa_data_end[idx] = zv_data_end (ref->cf_dev_sizes[idx]);
  }
  return 0;
}

/* Import: the log device given must be the pool's, and must be given
 * when the pool has one. */
static int
pool_check_logdev (zv_pool_t *p, const zv_pool_config_t *pc,
                   const zv_config_phys_t *ref)
{
  zv_config_phys_t cf;
  char err[1024];
  zv_dev_opts_t o;
  int r;

  if (ref->cf_log_guid == 0) {
    if (pc->pc_logdevice) {
      zv_error ("pool '%s' has no log device; %s cannot be added after "
                "create", ref->cf_name, pc->pc_logdevice);
      return -EINVAL;
    }
    return 0;
  }
  if (pc->pc_logdevice == NULL) {
    zv_error ("pool '%s' has a separate log device: pass it with log= "
              "(its records are needed to import)", ref->cf_name);
    return -EINVAL;
  }
  pool_dev_opts (pc, true, &o);
  r = zv_dev_open_opts (pc->pc_logdevice, &o, &p->p_logdev, err, sizeof err);
  if (r < 0) {
    zv_error ("%s", err);
    return r;
  }
  r = zv_label_read_config (p->p_logdev, &cf, NULL, err, sizeof err);
  if (r < 0) {
    zv_error ("%s", err);
    return r == -ENOENT ? -EINVAL : r;
  }
  if (cf.cf_pool_guid != ref->cf_pool_guid || cf.cf_role != ZV_ROLE_LOG
      || cf.cf_dev_guid != ref->cf_log_guid) {
    zv_error ("%s is not the log device of pool '%s'", pc->pc_logdevice,
              ref->cf_name);
    return -EINVAL;
  }
  if (cf.cf_dev_size != ref->cf_log_size) {
    zv_error ("%s: its label records %" PRIu64 " bytes, the pool's "
              "configuration %" PRIu64 " for its log device", pc->pc_logdevice,
              cf.cf_dev_size, ref->cf_log_size);
    return -EINVAL;
  }
  return 0;
}

/*
 * Import: the copies of a block the imported objset names must be
 * allocated space, and space nothing else owns (see alloc.h, the pool's
 * owners): two owners of a sector would each free it one day.
 */
static int
pool_own_bp (zv_alloc_t *a, const zv_blkptr_t *bp, const char *what,
             unsigned level, uint64_t blkid)
{
  for (unsigned c = 0; c < bp->bp_ncopies && c < 2; c++) {
    int r = zv_alloc_own (a, bp->bp_dva[c], bp->bp_psize);

    if (r == -EEXIST) {
      zv_error ("%s block (level %u, %" PRIu64 "): copy %u shares its "
                "space with another block", what, level, blkid, c + 1);
      return -EIO;
    }
    if (r < 0) {
      zv_error ("%s block (level %u, %" PRIu64 ") points at free space",
                what, level, blkid);
      return -EIO;
    }
  }
  return 0;
}

/* The full walk's state (verify=full). */
typedef struct pool_verify {
  zv_pool_t *pv_pool;
  zv_pool_ds_t *pv_ds;
  const zv_pool_config_t *pv_pc;
  uint64_t pv_done, pv_total;
} pool_verify_t;

/* verify=full: every pointer of the volume tree must point at allocated
 * space that only it owns.  The walk gives each its owner, so the
 * indirect blocks it passed are checked (dmu.c skips them later). */
static int
pool_verify_cb (void *arg, const zv_blkptr_t *bp, unsigned level,
                uint64_t blkid, const void *data)
{
  pool_verify_t *pv = arg;
  zv_alloc_t *a = pv->pv_pool->p_spa.spa_alloc;
  int r = 0;

  /* The root took its space before the walk (pool_load_ub). */
  if (level + 1u < pv->pv_ds->ds_obj.ob_nlevels || level == 0)
    r = pool_own_bp (a, bp, "volume", level, blkid);
  if (r < 0)
    return r;
  if (level > 0)
    zv_alloc_own_checked (a, bp->bp_dva[0]);
  if (level == 1 || (level == 0 && blkid % 4096 == 0)) {
    pv->pv_done = ZV_MIN (pv->pv_total, level == 1
                          ? (blkid + 1) * ZV_INDIRECT_FANOUT : blkid + 1);
    if (pv->pv_pc->pc_progress && (level != 1 || blkid % 64 == 0))
      pv->pv_pc->pc_progress (pv->pv_pc->pc_progress_arg, "verify",
                              pv->pv_done, pv->pv_total);
  }
  return 0;
}

/* Space-map load: a chunk into the allocator. */
static int
pool_chunk_load (void *arg, uint64_t blkid, const void *data)
{
  void **a = arg;
  return zv_alloc_chunk_load (a[0], (unsigned) (uintptr_t) a[1], blkid,
                              data);
}

/* Deferred-list load: re-queue the extents. */
typedef struct pool_defer_load {
  zv_pool_t *dl_pool;
  uint64_t dl_txg;
  uint64_t dl_count;     /* entries still expected */
} pool_defer_load_t;

/* Block blkid of a deferred-free list (see pool.h). */
int
zv_pool_defer_load_block (zv_alloc_t *a, uint64_t txg, uint64_t count,
                          uint64_t blkid, const void *data)
{
  const zv_defer_ent_t *e = data;
  uint64_t first = blkid * ZV_DEFER_PER_BLK;

  for (uint64_t i = 0; i < ZV_DEFER_PER_BLK && first + i < count; i++) {
    if (e[i].de_size == 0 || e[i].de_size % ZV_SECTOR != 0
        || !zv_alloc_is_allocated (a, e[i].de_dva, e[i].de_size)) {
      zv_error ("deferred-free list of txg %" PRIu64 ": entry %" PRIu64
                " is not an allocated extent", txg, first + i);
      return -EIO;
    }
    zv_alloc_defer_load (a, txg, e[i].de_dva, e[i].de_size);
  }
  return 0;
}

static int
pool_defer_load_cb (void *arg, uint64_t blkid, const void *data)
{
  pool_defer_load_t *dl = arg;

  return zv_pool_defer_load_block (dl->dl_pool->p_spa.spa_alloc, dl->dl_txg,
                                   dl->dl_count, blkid, data);
}

/*
 * Highest log head position and sequence number an import accepts.  Both
 * only grow (by one block, at most ZV_ZIL_BLKSZ bytes plus the ring end's
 * remainder) and restart at 1 / 0 after every replay; a log would need
 * decades at full speed to come near, and below this every sum of a
 * position with a ring size or a block size fits in 64 bits.
 */
#define POOL_ZIL_POS_MAX (1ull << 62)

/* The intent-log header from disk, of the objset of txg: ring inside its
 * device, in use; head and claim txg possible. */
static int
pool_check_zil (zv_pool_t *p, const zv_zil_header_t *zh, uint64_t txg)
{
  uint64_t off = ZV_DVA_OFFSET (zh->zh_ring_dva);
  unsigned v = ZV_DVA_VDEV (zh->zh_ring_dva);
  uint64_t len = zh->zh_nslots * (uint64_t) zh->zh_blksz;

  if (zh->zh_magic != ZV_ZIL_MAGIC || zh->zh_version != ZV_FORMAT_VERSION
      || zh->zh_blksz != ZV_ZIL_BLKSZ || zh->zh_nslots < 2
      || zh->zh_nslots > (1ull << 32) || zh->zh_head_seq == 0
      || zh->zh_head_pos % ZV_SECTOR != 0
      || zh->zh_head_pos % len + zh->zh_blksz > len
      || off < zv_data_start () || off % ZV_SECTOR != 0) {
    zv_error ("intent log header is invalid");
    return -EIO;
  }
  /* A claim is the txg an import found, so it is never newer than the
   * objset carrying it; a larger one would make replay skip every record
   * (each is "older than the claim"), and a head near 2^64 would wrap the
   * position arithmetic: damage or a forgery, not "nothing to replay". */
  if (zh->zh_claim_txg > txg) {
    zv_error ("intent log header: claim txg %" PRIu64 " is after the txg "
              "of its objset (%" PRIu64 ")", zh->zh_claim_txg, txg);
    return -EIO;
  }
  if (zh->zh_head_pos >= POOL_ZIL_POS_MAX
      || zh->zh_head_seq >= POOL_ZIL_POS_MAX) {
    zv_error ("intent log header: head block %" PRIu64 " at position %"
              PRIu64 " is out of range", zh->zh_head_seq, zh->zh_head_pos);
    return -EIO;
  }
  /* A cut that a recovering import made (zil_recover=truncate) lies in
   * the chain, inside one block's records. */
  if ((zh->zh_flags & ZV_ZH_F_TRUNCATED)
      && (zh->zh_trunc_seq < zh->zh_head_seq
          || zh->zh_trunc_seq - zh->zh_head_seq > len / ZV_SECTOR
          || zh->zh_trunc_off >= zh->zh_blksz)) {
    zv_error ("intent log header: the cut at block %" PRIu64 ", byte %"
              PRIu64 " is outside the chain from block %" PRIu64,
              zh->zh_trunc_seq, zh->zh_trunc_off, zh->zh_head_seq);
    return -EIO;
  }
  if (v == ZV_LOG_VDEV) {
    if (p->p_logdev == NULL) {
      zv_error ("intent log header names a log device the pool does not "
                "have");
      return -EIO;
    }
    if (off + len > zv_data_end (zv_dev_size (p->p_logdev))) {
      zv_error ("intent log ring does not fit its log device");
      return -EIO;
    }
    return 0;
  }
  if (v >= p->p_spa.spa_ndevs || off + len > p->p_spa.spa_data_end[v]
      || len > UINT32_MAX
      || !zv_alloc_is_allocated (p->p_spa.spa_alloc, zh->zh_ring_dva,
                                 (uint32_t) len)) {
    zv_error ("intent log ring is outside the pool's allocated space");
    return -EIO;
  }
  return 0;
}

/* ---- dataset records ---- */

/* A record read from slot 'slot' of the directory of the objset of
 * 'txg' (see pool.h). */
int
zv_pool_dsrec_check (const zv_dsrec_phys_t *rec, uint64_t slot,
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
  if (rec->dr_kind != ZV_DS_KIND_VOLUME)
    bad = "kind (snapshots are not read by this version)";
  else if (rec->dr_flags != 0)
    bad = "flags (unknown bits set)";
  else if (rec->dr_id == 0 || rec->dr_id >= next_dsid)
    bad = "id (0, or not below the objset's next id)";
  else if (rec->dr_parent_id != 0 || rec->dr_origin_id != 0
           || rec->dr_prev_snap_id != 0 || rec->dr_prev_snap_txg != 0
           || rec->dr_deadlist_bytes != 0)
    bad = "snapshot fields (set in a pool without snapshots)";
  else if (rec->dr_creation_txg == 0 || rec->dr_creation_txg > txg)
    bad = "creation txg (0, or after the objset)";
  else if (!pool_vol_name_valid (rec->dr_name)
           || memchr (rec->dr_name, '\0', sizeof rec->dr_name) == NULL)
    bad = "name";
  else if (!pool_volsize_valid (rec->dr_volsize))
    bad = "volume size";
  else if (!pool_blksz_valid (rec->dr_volblocksize) || rec->dr_pad != 0)
    bad = "volblocksize";
  else if (rec->dr_reservation > rec->dr_volsize)
    bad = "reservation (more than the volume's size)";
  else {
    static const zv_dnode_phys_t zdn;
    uint64_t nb = pool_vol_nblocks (rec->dr_volsize, rec->dr_volblocksize);

    if (zv_dmu_check_dnode (dn, ZV_BT_VOLDATA, what) < 0)
      return -EIO;
    if (dn->dn_size != rec->dr_volsize
        || dn->dn_datablksz != rec->dr_volblocksize || dn->dn_nblocks != nb
        || dn->dn_nlevels != zv_dmu_nlevels (nb))
      bad = "volume object (its shape is not that of its size)";
    else if (!zv_bp_is_hole (&dn->dn_root)
             && (dn->dn_root.bp_birth > txg || dn->dn_root.bp_fill > nb))
      bad = "volume object's root (born after the objset, or counts more "
        "blocks than the volume has)";
    else if (memcmp (&rec->dr_deadlist, &zdn, sizeof zdn) != 0)
      bad = "dead list (set in a pool without snapshots)";
  }
  if (bad != NULL) {
    zv_error ("%s: invalid %s", what, bad);
    return -EIO;
  }
  return 0;
}

typedef struct pool_dsdir_load {
  zv_pool_t *dl_pool;
  uint64_t dl_txg;
} pool_dsdir_load_t;

/* A directory block at import: every record checked, alone (above) and
 * against the pool (unique id and name, its log header, its root), then
 * a dataset made of it. */
static int
pool_dsdir_load_cb (void *arg, uint64_t blkid, const void *data)
{
  pool_dsdir_load_t *dl = arg;
  zv_pool_t *p = dl->dl_pool;

  for (unsigned k = 0; k < ZV_DSDIR_PER_BLK; k++) {
    const zv_dsrec_phys_t *rec = (const zv_dsrec_phys_t *)
      ((const uint8_t *) data + k * ZV_DSREC_SIZE);
    uint64_t slot = blkid * ZV_DSDIR_PER_BLK + k;
    int r = zv_pool_dsrec_check (rec, slot, p->p_spa.spa_guid, dl->dl_txg,
                                 p->p_next_dsid);
    if (r == 1)
      continue;
    if (r < 0)
      return r;
    if ((slot + 1) * ZV_DSREC_SIZE > p->p_dsdir.fl_size) {
      zv_error ("dataset record %" PRIu64 ": past the directory's size",
                slot);
      return -EIO;
    }
    for (size_t i = 0; i < p->p_nds; i++) {
      const zv_pool_ds_t *o = p->p_dss[i];
      bool logs = ZV_DVA_VDEV (o->ds_zil_hdr.zh_ring_dva) == ZV_LOG_VDEV
        && ZV_DVA_VDEV (rec->dr_zil.zh_ring_dva) == ZV_LOG_VDEV;
      if (o->ds_id == rec->dr_id || strcmp (o->ds_name, rec->dr_name) == 0
          || logs) {
        zv_error ("dataset record %" PRIu64 ": its %s is also record %"
                  PRIu64 "'s", slot, o->ds_id == rec->dr_id ? "id"
                  : logs ? "log device" : "name", o->ds_slot);
        return -EIO;
      }
    }
    r = pool_check_zil (p, &rec->dr_zil, dl->dl_txg);
    if (r == 0 && !zv_bp_is_hole (&rec->dr_volume.dn_root)
        && zv_zio_bp_check (&p->p_spa, &rec->dr_volume.dn_root,
                            "volume root") < 0)
      r = -EIO;
    if (r < 0) {
      zv_error ("dataset record %" PRIu64 " (volume '%s') is refused", slot,
                rec->dr_name);
      return r;
    }
    pool_ds_init_t di = {
      .di_name = rec->dr_name, .di_id = rec->dr_id, .di_slot = slot,
      .di_volsize = rec->dr_volsize, .di_blksz = rec->dr_volblocksize,
      .di_reservation = rec->dr_reservation,
      .di_creation_txg = rec->dr_creation_txg,
      .di_creation_time = rec->dr_creation_time,
      .di_volume = &rec->dr_volume, .di_zil = &rec->dr_zil,
    };
    pool_ds_add (p, &di)->ds_rec = *rec;
  }
  return 0;
}

/* The blocks of a flat object (a space map, a deferred list), owned. */
static int
pool_own_flat (zv_alloc_t *a, const zv_flat_t *fl, const char *what)
{
  for (unsigned l = 0; l < fl->fl_nlevels; l++)
    for (uint64_t i = 0; i < fl->fl_len[l]; i++)
      if (!zv_bp_is_hole (&fl->fl_bps[l][i])) {
        int r = pool_own_bp (a, &fl->fl_bps[l][i], what, l, i);
        if (r < 0)
          return r;
      }
  return 0;
}

typedef struct pool_own_defer {
  zv_alloc_t *od_alloc;
  uint64_t od_txg;
  int od_err;
} pool_own_defer_t;

/* A pending deferred free owns its extent until it is applied: a block
 * still in use, or another entry, must not overlap it. */
static void
pool_own_defer_cb (void *arg, uint64_t dva, uint32_t size)
{
  pool_own_defer_t *od = arg;

  if (od->od_err == 0 && zv_alloc_own (od->od_alloc, dva, size) < 0) {
    zv_error ("deferred-free list of txg %" PRIu64 ": extent (device %u "
              "offset %" PRIu64 ", %" PRIu32 " bytes) shares its space with "
              "a block in use or another entry", od->od_txg,
              ZV_DVA_VDEV (dva), ZV_DVA_OFFSET (dva), size);
    od->od_err = -EIO;
  }
}

/*
 * Import: the owners of everything but the volume's tree below its root
 * (whose indirect blocks take their children's space as they are first
 * read, dmu.c, or all at once with verify=full): the objset, the space
 * maps' and deferred lists' blocks, the pending deferred frees, the log
 * ring and the volume's root block.
 */
static int
pool_own_meta (zv_pool_t *p, const zv_blkptr_t *osbp,
               const zv_objset_phys_t *os)
{
  zv_alloc_t *a = p->p_spa.spa_alloc;
  int r;

  zv_alloc_own_begin (a);
  r = pool_own_bp (a, osbp, "objset", 0, 0);
  if (r == 0)
    r = pool_own_flat (a, &p->p_dsdir, "dataset directory");
  for (unsigned d = 0; d < p->p_spa.spa_ndevs && r == 0; d++)
    r = pool_own_flat (a, &p->p_spacemap[d], "space map");
  for (unsigned i = 0; i < 2 && r == 0; i++)
    r = pool_own_flat (a, &p->p_defer[i], "deferred-free list");
  for (unsigned i = 0; i < 2 && r == 0; i++) {
    pool_own_defer_t od = { .od_alloc = a,
                            .od_txg = os->os_defer[i].dn_txg };
    /* Both lists in one txg would be the same allocator list: once. */
    if (os->os_defer[i].dn_size == 0
        || (i == 1 && os->os_defer[0].dn_size > 0
            && os->os_defer[0].dn_txg == od.od_txg))
      continue;
    zv_alloc_defer_foreach (a, od.od_txg, pool_own_defer_cb, &od);
    r = od.od_err;
  }
  for (size_t i = 0; i < p->p_nds && r == 0; i++) {
    zv_pool_ds_t *ds = p->p_dss[i];
    const zv_zil_header_t *zh = &ds->ds_zil_hdr;
    const zv_dnode_phys_t *dn = &ds->ds_rec.dr_volume;

    if (ZV_DVA_VDEV (zh->zh_ring_dva) != ZV_LOG_VDEV
        && zv_alloc_own (a, zh->zh_ring_dva,
                         (uint32_t) (zh->zh_nslots * zh->zh_blksz)) < 0) {
      zv_error ("volume '%s': intent log ring shares its space with a "
                "block in use", ds->ds_name);
      r = -EIO;
    }
    if (r == 0 && !zv_bp_is_hole (&dn->dn_root))
      r = pool_own_bp (a, &dn->dn_root, "volume", dn->dn_nlevels - 1u, 0);
  }
  return r;
}

/* Load everything uberblock 'ub' names, verifying as we go. */
static int
pool_load_ub (zv_pool_t *p, const zv_pool_config_t *pc,
              const zv_uberblock_phys_t *ub)
{
  zv_spa_t *spa = &p->p_spa;
  const zv_blkptr_t *bp = &ub->ub_rootbp;
  zv_objset_phys_t *os = NULL;
  uint64_t txg = ub->ub_txg;
  char what[64];
  int r;

  snprintf (what, sizeof what, "objset of txg %" PRIu64, txg);
  /* Exactly what the sync writes (pool_sync_meta): one objset block,
   * born in this txg (an older birth would be a block a later sync may
   * rewrite in place; a newer one a txg that never committed). */
  if (zv_bp_is_hole (bp) || bp->bp_type != ZV_BT_OBJSET
      || bp->bp_psize != ZV_OBJSET_SIZE || bp->bp_lsize != ZV_OBJSET_SIZE
      || bp->bp_level != 0 || bp->bp_comp != 0 || bp->bp_birth != txg
      || bp->bp_fill != 1 || bp->bp_ncopies < 1 || bp->bp_ncopies > 2) {
    zv_error ("%s: invalid root pointer (size %" PRIu32 "/%" PRIu32
              ", level %u, birth %" PRIu64 ", fill %" PRIu64 ", %u copies, "
              "compression %u)", what, bp->bp_psize, bp->bp_lsize,
              bp->bp_level, bp->bp_birth, bp->bp_fill, bp->bp_ncopies,
              bp->bp_comp);
    return -EIO;
  }
  os = zv_buf_alloc (ZV_OBJSET_SIZE);
  r = zv_zio_read (spa, bp, os, what);
  if (r < 0)
    goto out;
  if (os->os_hdr.mh_magic != ZV_MBLK_MAGIC
      || os->os_hdr.mh_version != ZV_POOL_VERSION
      || os->os_hdr.mh_type != ZV_BT_OBJSET || os->os_txg != txg
      || os->os_pool_guid != spa->spa_guid
      || os->os_ndevs != spa->spa_ndevs) {
    zv_error ("%s: header does not match the pool", what);
    r = -EIO;
    goto out;
  }
  /* No object of this objset can have been written after it. */
  for (unsigned i = 0; i < 3 + spa->spa_ndevs; i++) {
    const zv_dnode_phys_t *dn = i == 0 ? &os->os_dsdir
      : i < 3 ? &os->os_defer[i - 1] : &os->os_spacemap[i - 3];
    if (!zv_bp_is_hole (&dn->dn_root) && dn->dn_root.bp_birth > txg) {
      unsigned obj = i == 0 ? ZV_OBJ_DSDIR : i < 3 ? ZV_OBJ_DEFER0 + i - 1
        : ZV_OBJ_SPACEMAP0 + i - 3;
      zv_error ("%s: object %u's root block is born in txg %" PRIu64
                ", after the objset", what, obj, dn->dn_root.bp_birth);
      r = -EIO;
      goto out;
    }
  }
  pool_setup (p, pc);
  for (unsigned d = 0; d < spa->spa_ndevs && r == 0; d++) {
    void *arg[2] = { spa->spa_alloc, (void *) (uintptr_t) d };
    r = zv_flat_load (&p->p_spacemap[d], &os->os_spacemap[d],
                      pool_chunk_load, arg);
  }
  for (unsigned i = 0; i < 2 && r == 0; i++) {
    const zv_dnode_phys_t *dn = &os->os_defer[i];
    pool_defer_load_t dl = {
      .dl_pool = p, .dl_txg = dn->dn_txg,
      .dl_count = dn->dn_size / sizeof (zv_defer_ent_t),
    };
    if (dn->dn_size % sizeof (zv_defer_ent_t) != 0
        || (dn->dn_size > 0 && (dn->dn_txg > txg || dn->dn_txg + 2 <= txg))) {
      zv_error ("%s: deferred-free list %u is inconsistent (txg %" PRIu64
                ", %" PRIu64 " bytes)", what, i, dn->dn_txg, dn->dn_size);
      r = -EIO;
      break;
    }
    r = zv_flat_load (&p->p_defer[i], dn, pool_defer_load_cb, &dl);
  }
  if (r < 0)
    goto out;
  if (os->os_next_dsid == 0 || os->os_next_dsid >= (1ull << 62)) {
    zv_error ("%s: next dataset id %" PRIu64 " is out of range", what,
              os->os_next_dsid);
    r = -EIO;
    goto out;
  }
  p->p_next_dsid = os->os_next_dsid;
  {
    pool_dsdir_load_t dl = { .dl_pool = p, .dl_txg = txg };
    r = zv_flat_load (&p->p_dsdir, &os->os_dsdir, pool_dsdir_load_cb, &dl);
  }
  if (r == 0)
    r = pool_own_meta (p, bp, os);
  if (r < 0)
    goto out;
  /* The volumes' indirect blocks are checked as they are first read
   * (dmu.c), so import costs the same whatever the volumes hold;
   * verify=full checks every tree now, as a scrub would. */
  spa->spa_own_txg = txg;
  if (pc->pc_verify_full) {
    pool_verify_t pv = { .pv_pool = p, .pv_pc = pc };
    for (size_t i = 0; i < p->p_nds; i++)
      pv.pv_total += p->p_dss[i]->ds_rec.dr_volume.dn_nblocks;
    for (size_t i = 0; i < p->p_nds && r == 0; i++) {
      zv_pool_ds_t *ds = p->p_dss[i];
      pv.pv_ds = ds;
      r = zv_dmu_walk (spa, ds->ds_obj.ob_id, &ds->ds_rec.dr_volume, false,
                       pool_verify_cb, &pv);
    }
    if (r < 0)
      goto out;
    p->p_verified = true;
    if (pc->pc_progress)
      pc->pc_progress (pc->pc_progress_arg, "verify", pv.pv_total,
                       pv.pv_total);
  }
  p->p_objset_bp = *bp;
  p->p_synced_txg = txg;
 out:
  zv_buf_free (os);
  return r;
}

/* Drop the space maps, deferred lists, cache and allocator (a failed
 * pool_load_ub, so the next uberblock starts clean; and pool_free). */
static void
pool_unload (zv_pool_t *p)
{
  pool_ds_drop_all (p);
  if (p->p_dsdir.fl_spa)
    zv_flat_fini (&p->p_dsdir);
  for (unsigned d = 0; d < ZV_MAX_DEVS; d++)
    if (p->p_spacemap[d].fl_spa)
      zv_flat_fini (&p->p_spacemap[d]);
  for (unsigned i = 0; i < 2; i++)
    if (p->p_defer[i].fl_spa)
      zv_flat_fini (&p->p_defer[i]);
  zv_mem_unregister (p->p_cache_mem);
  p->p_cache_mem = NULL;
  if (p->p_cache) {
    zv_dbuf_cache_destroy (p->p_cache);
    p->p_cache = NULL;
  }
  if (p->p_spa.spa_alloc) {
    zv_alloc_destroy (p->p_spa.spa_alloc);
    p->p_spa.spa_alloc = NULL;
  }
}

/*
 * The txgs after the newest valid uberblock 'newest' that may have
 * committed: the run of slots from (newest + 1) % ZV_UB_COUNT on that
 * hold no copy that verifies (marked in discard).  Without the prefilled
 * ring a slot that never held a txg (txg - ZV_UB_COUNT below 1) is zeros
 * when intact, so the run stops there: nothing can be told.
 */
static unsigned
pool_ub_missing (bool prefilled, uint64_t newest, const zv_ub_slot_t *slots,
                 bool *discard)
{
  unsigned k = 0;

  for (unsigned j = 1; j < ZV_UB_COUNT; j++) {
    uint64_t txg = newest + j;
    unsigned s = (unsigned) (txg % ZV_UB_COUNT);

    if (slots[s].us_valid > 0 || (!prefilled && txg <= ZV_UB_COUNT))
      break;
    discard[s] = true;
    k++;
  }
  return k;
}

/* "txg A" or "txgs A to B" */
static void
pool_txg_range (char *buf, size_t len, uint64_t a, uint64_t b)
{
  if (a == b)
    snprintf (buf, len, "txg %" PRIu64, a);
  else
    snprintf (buf, len, "txgs %" PRIu64 " to %" PRIu64, a, b);
}

/*
 * Would importing the loaded uberblock, cands[chosen], lose txgs that
 * committed or may have?  Say what, then refuse (-EIO) or, with
 * pc_rewind, warn and take it (see the theory comment).  cands[0] is the
 * newest uberblock found.
 */
static int
pool_check_loss (zv_pool_t *p, const zv_pool_config_t *pc,
                 const zv_config_phys_t *ref, const zv_ub_cand_t *cands,
                 int chosen)
{
  zv_spa_t *spa = &p->p_spa;
  zv_ub_slot_t slots[ZV_UB_COUNT];
  bool discard[ZV_UB_COUNT] = { false };
  bool prefilled = (ref->cf_flags & ZV_CF_F_UB_EMPTY) != 0;
  uint64_t txg = p->p_synced_txg, newest = cands[0].uc_ub.ub_txg;
  char done[160] = "", maybe[384] = "", range[64];
  unsigned k;
  int r;

  ZV_VERIFY3U (txg, ==, cands[chosen].uc_ub.ub_txg);
  ZV_VERIFY3U (txg, <=, newest);
  r = zv_label_ring_state (spa->spa_devs, spa->spa_ndevs, spa->spa_guid,
                           slots);
  if (r < 0) {
    zv_error ("pool '%s': the uberblock rings cannot be read again",
              p->p_name);
    return r;
  }
  if (!prefilled)
    zv_info ("pool '%s' was created before uberblock rings were filled "
             "with empty uberblocks: a damaged uberblock slot is told from "
             "an unwritten one only once every slot has held a txg "
             "(after txg %u; the newest is %" PRIu64 ")", p->p_name,
             ZV_UB_COUNT, newest);
  k = pool_ub_missing (prefilled, newest, slots, discard);
  if (k == 0 && chosen == 0) {
    if (pc->pc_rewind)
      zv_info ("pool '%s': rewind=true, but txg %" PRIu64 " is the newest "
               "and intact: nothing to rewind", p->p_name, txg);
    return 0;
  }

  if (txg < newest) {
    pool_txg_range (range, sizeof range, txg + 1, newest);
    snprintf (done, sizeof done, "%s, which committed but whose tree does "
              "not verify", range);
  }
  else if (chosen > 0)           /* the same txg, written again later */
    snprintf (done, sizeof done, "the later uberblock of txg %" PRIu64
              ", whose tree does not verify", txg);
  if (k > 0) {
    unsigned s = (unsigned) ((newest + 1) % ZV_UB_COUNT);
    char slot[48];

    pool_txg_range (range, sizeof range, newest + 1, newest + k);
    if (k == 1)
      snprintf (slot, sizeof slot, "its uberblock slot, %u, is", s);
    else
      snprintf (slot, sizeof slot, "their uberblock slots, %u to %u, are",
                s, (unsigned) ((newest + k) % ZV_UB_COUNT));
    snprintf (maybe, sizeof maybe, "%s%s, which may have committed (%s "
              "damaged in every copy: %u, both labels of %u device%s)",
              done[0] ? ", and " : "", range, slot, slots[s].us_copies,
              spa->spa_ndevs, spa->spa_ndevs == 1 ? "" : "s");
  }
  if (!pc->pc_rewind) {
    zv_error ("pool '%s': importing txg %" PRIu64 ", the newest intact "
              "one, would lose %s%s: the writes those txgs synced, and the "
              "intent-log records flushed after them that txg %" PRIu64
              "'s own log chain no longer reaches.  Refusing to import; "
              "to import txg %" PRIu64 " and accept that loss, pass "
              "rewind=true (with readonly=true to look at it first "
              "without writing anything)", p->p_name, txg, done, maybe,
              txg, txg);
    return -EIO;
  }
  zv_warn ("pool '%s': rewound to txg %" PRIu64 " (rewind=true), losing "
           "%s%s; %s", p->p_name, txg, done, maybe, p->p_readonly
           ? "read-only: nothing is written and the intent log is not "
           "replayed, so a read-write import refuses again without "
           "rewind=true"
           : "the intent log of that txg is replayed as far as its blocks "
           "are intact, and the uberblock slots given up are emptied");
  p->p_rewound = true;
  if (!p->p_readonly) {
    memcpy (p->p_ub_discard, discard, sizeof discard);
    p->p_ub_keep = cands[chosen].uc_ub;
    p->p_ub_discard_pending = true;
  }
  return 0;
}

/*
 * An accepted rewind, once every import check passed: empty the slots it
 * gave up (label by label, each flushed) so the acceptance is durable.
 * A crash in between leaves some copies: the next import asks again.
 */
static int
pool_ub_discard (zv_pool_t *p)
{
  zv_spa_t *spa = &p->p_spa;
  unsigned n = 0;
  int r = 0;

  for (unsigned l = 0; l < ZV_NLABELS && r == 0; l++) {
    r = zv_label_discard (spa->spa_devs, spa->spa_ndevs, spa->spa_guid,
                          &p->p_ub_keep, p->p_ub_discard, l);
    if (r >= 0) {
      n += (unsigned) r;
      r = zv_zio_flush_all (spa);
    }
  }
  if (r < 0) {
    zv_error ("pool '%s': emptying the uberblock slots the rewind gave "
              "up failed: %s", p->p_name, strerror (-r));
    return r;
  }
  p->p_ub_discard_pending = false;
  zv_info ("pool '%s': emptied %u uberblock copies the rewind to txg %"
           PRIu64 " gave up", p->p_name, n, p->p_synced_txg);
  return 0;
}

/* Import an existing pool, refusing to lose committed txgs unasked. */
static int
pool_import (const zv_pool_config_t *pc, zv_pool_t *p, zv_dev_t **given)
{
  zv_spa_t *spa = &p->p_spa;
  zv_config_phys_t ref;
  enum { MAXCAND = ZV_UB_COUNT * ZV_NLABELS * 2 };
  zv_ub_cand_t *cands;
  int n, r, chosen;

  r = pool_check_members (p, given, pc->pc_ndevices, &ref);
  if (r < 0)
    return r;
  r = pool_check_logdev (p, pc, &ref);
  if (r < 0)
    return r;
  spa->spa_guid = ref.cf_pool_guid;
  snprintf (p->p_name, sizeof p->p_name, "%s", ref.cf_name);

  cands = zv_calloc (MAXCAND, sizeof *cands);
  n = zv_label_collect_ubs (spa->spa_devs, spa->spa_ndevs, spa->spa_guid,
                            cands, MAXCAND);
  if (n <= 0) {
    zv_error ("pool '%s': no valid uberblock on any device%s", p->p_name,
              n < 0 ? " (labels unreadable)" : "");
    free (cands);
    return -EIO;
  }
  r = -EIO;
  for (chosen = 0; chosen < n; chosen++) {
    const zv_uberblock_phys_t *ub = &cands[chosen].uc_ub;
    r = pool_load_ub (p, pc, ub);
    if (r == 0)
      break;
    zv_error ("pool '%s': uberblock of txg %" PRIu64 " does not verify; "
              "trying an older one", p->p_name, ub->ub_txg);
    pool_unload (p);
  }
  if (r == 0)
    r = pool_check_loss (p, pc, &ref, cands, chosen);
  else
    zv_error ("pool '%s': no uberblock's tree verifies; cannot import",
              p->p_name);
  free (cands);
  if (r < 0)
    return r;
  zv_info ("imported pool '%s' (guid %016" PRIx64 ") at txg %" PRIu64,
           p->p_name, spa->spa_guid, p->p_synced_txg);
  return 0;
}

static bool pool_space_live (void *arg, uint64_t dva, uint32_t size,
                             uint64_t blkid);

/*
 * A read-write import claims what the datasets' intent logs hold before
 * anything can sync: the in-place blocks their records point at become
 * allocated (else the next sync might allocate over them), and the
 * header records the imported txg, so that a replay after more txgs have
 * synced (the volume opened later, or a crash before it was) still
 * applies exactly the records of the txgs that never reached the disk.
 */
static int
pool_claim_logs (zv_pool_t *p)
{
  for (size_t i = 0; i < p->p_nds; i++) {
    zv_pool_ds_t *ds = p->p_dss[i];
    int r = zv_zil_claim (&p->p_spa, p->p_logdev, &ds->ds_zil_hdr,
                          p->p_synced_txg, ds->ds_blksz, ds->ds_volsize,
                          p->p_zil_recover, p->p_rewound, pool_space_live,
                          ds);

    if (r >= 0 && ds->ds_zil_hdr.zh_claim_count > 0)
      p->p_defer_rewrite = true;
    if (r < 0) {
      zv_error ("pool '%s': claiming the intent log of '%s' failed: %s",
                p->p_name, ds->ds_name, strerror (-r));
      return r;
    }
  }
  return 0;
}

/* A read-only import claims and replays nothing (it serves the synced
 * txg); it only says what the log holds, and whether a read-write import
 * would be refused. */
static void
pool_inspect_logs (zv_pool_t *p)
{
  for (size_t i = 0; i < p->p_nds; i++)
    zv_zil_inspect (&p->p_spa, p->p_logdev, &p->p_dss[i]->ds_zil_hdr,
                    p->p_synced_txg, p->p_dss[i]->ds_blksz,
                    p->p_dss[i]->ds_volsize, p->p_rewound);
}

/* Is [dva, dva+size) used by the synced tree?  For the log's claim: an
 * in-place block the bitmap shows allocated may still be the record's
 * (a sync that ran beside the write stored the bit), but never space the
 * objset of the imported txg reaches.  The pool's owners answer for what
 * import owned (the objset, space maps, deferred lists and frees, the
 * ring, the volume's root) and for the indirect blocks read so far; the
 * record's own block and every indirect block above it are read first
 * (each one's children take their owners as it loads, dmu.c), which
 * catches a record naming its own block's old copy or the indirect
 * blocks over it.  Space still unowned then can be another volume
 * block's: unless verify=full knew every owner, the tree is walked, only
 * for such a block (which only a crash leaves).  A pointer found later
 * naming space the claim took is refused as it loads (alloc.h). */
typedef struct pool_live {
  uint64_t pl_dva;
  uint32_t pl_size;
} pool_live_t;

static bool
pool_overlaps (const pool_live_t *pl, uint64_t dva, uint32_t size)
{
  return dva != 0 && ZV_DVA_VDEV (dva) == ZV_DVA_VDEV (pl->pl_dva)
    && dva < pl->pl_dva + pl->pl_size && pl->pl_dva < dva + size;
}

static int
pool_live_fn (void *arg, const zv_blkptr_t *bp, unsigned level,
              uint64_t blkid, const void *data)
{
  const pool_live_t *pl = arg;

  for (unsigned c = 0; c < bp->bp_ncopies && c < 2; c++)
    if (pool_overlaps (pl, bp->bp_dva[c], bp->bp_psize))
      return 1;
  return 0;
}

static bool
pool_space_live (void *arg, uint64_t dva, uint32_t size, uint64_t blkid)
{
  zv_pool_ds_t *ds = arg;
  zv_pool_t *p = ds->ds_pool;
  zv_alloc_t *a = p->p_spa.spa_alloc;
  zv_dnode_phys_t dn;
  zv_blkptr_t bp;
  pool_live_t pl = { dva, size };

  if (zv_alloc_own_any (a, dva, size))
    return true;
  if (zv_dmu_block_bp (&ds->ds_obj, blkid, &bp) < 0)
    return true;              /* an error: assume live, refuse the claim */
  if (zv_alloc_own_any (a, dva, size))
    return true;
  if (p->p_verified)
    return false;
  /* Any volume's tree may hold it, not only the log's own. */
  for (size_t i = 0; i < p->p_nds; i++) {
    zv_dmu_object_phys (&p->p_dss[i]->ds_obj, &dn);
    if (zv_dmu_walk (&p->p_spa, p->p_dss[i]->ds_obj.ob_id, &dn, false,
                     pool_live_fn, &pl) != 0)
      return true;
  }
  return false;
}

/* Create or import. */
int
zv_pool_open (const zv_pool_config_t *pc, zv_pool_t **poolp)
{
  zv_dev_t *devs[ZV_MAX_DEVS] = { 0 };
  zv_pool_t *p;
  int r;

  *poolp = NULL;
  if (pc->pc_ndevices == 0 || pc->pc_ndevices > ZV_MAX_DEVS) {
    zv_error ("a pool needs 1 to %u devices (%u given)", ZV_MAX_DEVS,
              pc->pc_ndevices);
    return -EINVAL;
  }
  if (pc->pc_create && pc->pc_logdevice != NULL && pc->pc_zil_size != 0) {
    char given[32];

    pool_size_text (pc->pc_zil_size, given, sizeof given);
    zv_error ("zil_size=%s sizes the intent log's ring inside the pool, "
              "which a pool with a log device does not have: the whole of "
              "%s holds the log (drop zil_size= or log=)", given,
              pc->pc_logdevice);
    return -EINVAL;
  }
  if (pc->pc_zil_recover > ZV_ZIL_RECOVER_DISCARD) {
    zv_error ("zil_recover: unknown mode %u", (unsigned) pc->pc_zil_recover);
    return -EINVAL;
  }
  /* Recovery drops records a replay would apply: only a read-write
   * import replays, so anywhere else it would mean nothing. */
  if (pc->pc_zil_recover != ZV_ZIL_RECOVER_NONE
      && (pc->pc_create || pc->pc_readonly)) {
    zv_error ("zil_recover= applies to a read-write import only: %s",
              pc->pc_create ? "a new pool has no intent log to recover"
              : "a read-only import never replays the intent log (it "
              "shows the last synced txg)");
    return -EINVAL;
  }
  r = pool_check_distinct (pc);
  if (r < 0)
    return r;
  r = pool_open_devs (pc, devs);
  if (r < 0)
    return r;
  p = zv_calloc (1, sizeof *p);
  p->p_readonly = pc->pc_readonly;
  p->p_zil_recover = pc->pc_zil_recover;
  pthread_mutex_init (&p->p_ds_lock, NULL);
  pthread_mutex_init (&p->p_admin_lock, NULL);
  if (pc->pc_create) {
    if (pc->pc_readonly) {
      zv_error ("cannot create a pool read-only");
      r = -EINVAL;
    }
    else {
      char err[1024];
      p->p_spa.spa_ndevs = pc->pc_ndevices;
      memcpy (p->p_spa.spa_devs, devs, sizeof devs);
      r = 0;
      if (pc->pc_logdevice) {
        zv_dev_opts_t o;
        pool_dev_opts (pc, true, &o);
        r = zv_dev_open_opts (pc->pc_logdevice, &o, &p->p_logdev, err,
                              sizeof err);
        if (r < 0)
          zv_error ("%s", err);
      }
      if (r == 0)
        r = pool_create (pc, p);
    }
  }
  else {
    r = pool_import (pc, p, devs);
    if (r < 0) {
      /* Devices not yet placed into the pool are ours to close. */
      for (unsigned i = 0; i < pc->pc_ndevices; i++) {
        bool placed = false;
        for (unsigned d = 0; d < p->p_spa.spa_ndevs; d++)
          placed |= p->p_spa.spa_devs[d] == devs[i];
        if (!placed)
          zv_dev_close (devs[i]);
      }
    }
  }
  if (r == 0)
    pool_finish (p, pc);
  if (r == 0 && !pc->pc_create && !p->p_readonly)
    r = pool_claim_logs (p);
  else if (r == 0 && !pc->pc_create)
    pool_inspect_logs (p);
  if (r == 0 && p->p_ub_discard_pending)
    r = pool_ub_discard (p);
  if (r < 0) {
    pool_free (p);
    return r;
  }
  *poolp = p;
  return 0;
}

/* Start the txg engine's thread. */
int
zv_pool_start (zv_pool_t *p)
{
  int r;

  zv_mem_start ();
  if (p->p_readonly || p->p_started)
    return 0;
  r = zv_txg_start (p->p_txg);
  if (r == 0)
    p->p_started = true;
  return r;
}

/* Sync, stop, release. */
int
zv_pool_close (zv_pool_t *p)
{
  bool held;
  int r = 0;

  if (p == NULL)
    return 0;
  char busy[ZV_NAME_MAX] = "";
  pthread_mutex_lock (&p->p_ds_lock);
  held = false;
  for (size_t i = 0; i < p->p_nds && !held; i++)
    if ((held = p->p_dss[i]->ds_held))
      snprintf (busy, sizeof busy, "%s", p->p_dss[i]->ds_name);
  pthread_mutex_unlock (&p->p_ds_lock);
  if (held) {
    zv_error ("pool '%s': volume '%s' is still open; close it first",
              p->p_name, busy);
    return -EBUSY;
  }
  if (!p->p_readonly)
    r = zv_txg_stop (p->p_txg);
  if (r == 0)
    zv_info ("pool '%s' exported at txg %" PRIu64, p->p_name,
             p->p_synced_txg);
  pool_free (p);
  return r;
}

const char *
zv_pool_name (zv_pool_t *p)
{
  return p->p_name;
}

uint64_t
zv_pool_guid (zv_pool_t *p)
{
  return p->p_spa.spa_guid;
}

bool
zv_pool_is_readonly (zv_pool_t *p)
{
  return p->p_readonly;
}

/* ---- the datasets, for the volume ---- */

/* The dataset 'name', or with NULL the only one (p_ds_lock held). */
static zv_pool_ds_t *
pool_ds_pick (zv_pool_t *p, const char *name, size_t *nlive)
{
  zv_pool_ds_t *only = NULL;
  size_t n = 0;

  if (name != NULL)
    return pool_ds_lookup (p, name);
  for (size_t i = 0; i < p->p_nds; i++)
    if (!p->p_dss[i]->ds_destroy) {
      only = p->p_dss[i];
      n++;
    }
  if (nlive)
    *nlive = n;
  return n == 1 ? only : NULL;
}

int
zv_pool_ds_hold (zv_pool_t *p, const char *name, zv_pool_ds_t **dsp)
{
  char shown[4 * ZV_NAME_MAX + 4];
  zv_pool_ds_t *ds;
  size_t n = 0;
  int r = 0;

  *dsp = NULL;
  pthread_mutex_lock (&p->p_ds_lock);
  ds = pool_ds_pick (p, name, &n);
  if (ds == NULL)
    r = -ENOENT;
  else if (ds->ds_held)
    r = -EBUSY;
  else
    ds->ds_held = true;
  pthread_mutex_unlock (&p->p_ds_lock);
  zv_str_printable (name ? name : "", ZV_NAME_MAX, shown, sizeof shown);
  if (r == -ENOENT && name != NULL)
    zv_error ("pool '%s' has no volume '%s'", p->p_name, shown);
  else if (r == -ENOENT)
    zv_error ("pool '%s' has %zu volumes: name the one to open", p->p_name,
              n);
  else if (r < 0)
    zv_error ("volume '%s' of pool '%s' is open already", ds->ds_name,
              p->p_name);
  if (r < 0)
    return r;
  *dsp = ds;
  return 0;
}

zv_pool_ds_t *
zv_pool_ds_find (zv_pool_t *p, const char *name)
{
  zv_pool_ds_t *ds;

  pthread_mutex_lock (&p->p_ds_lock);
  ds = pool_ds_pick (p, name, NULL);
  pthread_mutex_unlock (&p->p_ds_lock);
  return ds;
}

void
zv_pool_ds_rele (zv_pool_ds_t *ds)
{
  zv_pool_t *p = ds->ds_pool;

  pthread_mutex_lock (&p->p_ds_lock);
  ZV_VERIFY (ds->ds_held && ds->ds_zil == NULL);
  ds->ds_held = false;
  pthread_mutex_unlock (&p->p_ds_lock);
}

/* ---- creating, destroying and listing volumes ---- */

/* A change of the dataset list is durable once a txg it held synced. */
static int
pool_admin_begin (zv_pool_t *p, const char *what)
{
  if (p->p_readonly) {
    zv_error ("pool '%s' is imported read-only: cannot %s a volume",
              p->p_name, what);
    return -EROFS;
  }
  return 0;
}

int
zv_pool_ds_create (zv_pool_t *p, const char *name, uint64_t volsize,
                   uint32_t blksz, uint64_t reservation)
{
  zv_txg_hold_t h;
  int r = pool_admin_begin (p, "create");

  if (r < 0)
    return r;
  pthread_mutex_lock (&p->p_admin_lock);
  r = zv_txg_hold (p->p_txg, 0, &h);
  if (r == 0) {
    r = pool_ds_create_locked (p, name, volsize, blksz, reservation,
                               pool_default_ring (p), h.th_txg, true);
    zv_txg_rele (p->p_txg, &h);
    if (r == 0)
      r = zv_txg_wait_synced (p->p_txg, h.th_txg);
    if (r == 0)
      zv_info ("pool '%s': created volume '%s' (%" PRIu64 " bytes, "
               "volblocksize %" PRIu32 ", %s)", p->p_name, name, volsize,
               blksz, reservation ? "with a reservation" : "thin");
  }
  pthread_mutex_unlock (&p->p_admin_lock);
  return r;
}

int
zv_pool_ds_destroy (zv_pool_t *p, const char *name)
{
  char shown[4 * ZV_NAME_MAX + 4];
  zv_pool_ds_t *ds;
  zv_txg_hold_t h;
  int r = pool_admin_begin (p, "destroy");

  if (r < 0)
    return r;
  zv_str_printable (name ? name : "", ZV_NAME_MAX, shown, sizeof shown);
  pthread_mutex_lock (&p->p_admin_lock);
  r = zv_txg_hold (p->p_txg, 0, &h);
  if (r < 0)
    goto out;
  pthread_mutex_lock (&p->p_ds_lock);
  ds = name ? pool_ds_lookup (p, name) : NULL;
  if (ds == NULL)
    r = -ENOENT;
  else if (ds->ds_held)
    r = -EBUSY;
  else
    ds->ds_destroy = true;
  pthread_mutex_unlock (&p->p_ds_lock);
  zv_txg_rele (p->p_txg, &h);
  if (r == -ENOENT)
    zv_error ("pool '%s' has no volume '%s'", p->p_name, shown);
  else if (r == -EBUSY)
    zv_error ("volume '%s' of pool '%s' is open: close it before destroying "
              "it", shown, p->p_name);
  /* Its frees are deferred (rule 2 of docs/format.md): the space is free
   * once T+2 has synced, which is when destroy returns, so the caller
   * sees it back. */
  if (r == 0)
    r = zv_txg_wait_synced (p->p_txg, h.th_txg + 2);
  if (r == 0)
    zv_info ("pool '%s': destroyed volume '%s'", p->p_name, shown);
 out:
  pthread_mutex_unlock (&p->p_admin_lock);
  return r;
}

size_t
zv_pool_ds_list (zv_pool_t *p, zv_pool_ds_info_t *out, size_t max)
{
  uint64_t avail = pool_avail (p, NULL);
  size_t n = 0;

  pthread_mutex_lock (&p->p_ds_lock);
  for (size_t i = 0; i < p->p_nds; i++) {
    zv_pool_ds_t *ds = p->p_dss[i];
    uint64_t refd = atomic_load_explicit (&ds->ds_referenced,
                                          memory_order_relaxed);
    uint64_t unused = ds->ds_reservation > refd
      ? ds->ds_reservation - refd : 0;

    if (ds->ds_destroy)
      continue;
    if (n < max) {
      zv_pool_ds_info_t *di = &out[n];
      memset (di, 0, sizeof *di);
      snprintf (di->di_name, sizeof di->di_name, "%s", ds->ds_name);
      di->di_id = ds->ds_id;
      di->di_volsize = ds->ds_volsize;
      di->di_blksz = ds->ds_blksz;
      di->di_reservation = ds->ds_reservation;
      di->di_referenced = refd;
      di->di_used = ZV_MAX (refd, ds->ds_reservation);
      di->di_avail = avail + unused;
      di->di_creation_txg = ds->ds_creation_txg;
      di->di_creation_time = ds->ds_creation_time;
      di->di_open = ds->ds_held;
    }
    n++;
  }
  pthread_mutex_unlock (&p->p_ds_lock);
  return n;
}

uint64_t
zv_pool_avail (zv_pool_t *p)
{
  return pool_avail (p, NULL);
}

const char *
zv_pool_ds_name (const zv_pool_ds_t *ds)
{
  return ds->ds_name;
}

zv_object_t *
zv_pool_ds_object (zv_pool_ds_t *ds)
{
  return &ds->ds_obj;
}

uint64_t
zv_pool_ds_volsize (const zv_pool_ds_t *ds)
{
  return ds->ds_volsize;
}

uint32_t
zv_pool_ds_blksz (const zv_pool_ds_t *ds)
{
  return ds->ds_blksz;
}

const zv_zil_header_t *
zv_pool_ds_zil_header (const zv_pool_ds_t *ds)
{
  return &ds->ds_zil_hdr;
}

void
zv_pool_ds_attach_zil (zv_pool_ds_t *ds, zv_zil_t *zl)
{
  zv_pool_t *p = ds->ds_pool;

  pthread_mutex_lock (&p->p_ds_lock);
  ZV_VERIFY (ds->ds_held);
  ZV_VERIFY ((zl == NULL) != (ds->ds_zil == NULL));
  ds->ds_zil = zl;
  pthread_mutex_unlock (&p->p_ds_lock);
}

zv_spa_t *
zv_pool_spa (zv_pool_t *p)
{
  return &p->p_spa;
}

zv_txg_t *
zv_pool_txg (zv_pool_t *p)
{
  return p->p_txg;
}

zv_dev_t *
zv_pool_logdev (zv_pool_t *p)
{
  return p->p_logdev;
}

const zv_blkptr_t *
zv_pool_rootbp (zv_pool_t *p)
{
  return &p->p_objset_bp;
}

uint64_t
zv_pool_open_txg (zv_pool_t *p)
{
  return p->p_open_txg;
}

enum zv_zil_recover
zv_pool_zil_recover (zv_pool_t *p)
{
  return p->p_zil_recover;
}

bool
zv_pool_space_pending (zv_pool_t *p)
{
  zv_alloc_space_t sp;

  zv_alloc_get_space (p->p_spa.spa_alloc, &sp);
  return sp.as_deferred > 0 || sp.as_reserved > 0;
}

int
zv_pool_sync (zv_pool_t *p)
{
  if (p->p_readonly)
    return 0;
  return zv_txg_wait_synced (p->p_txg, 0);
}

/* ---- statistics ---- */

zv_dbuf_cache_t *
zv_pool_cache (zv_pool_t *p)
{
  return p->p_cache;
}

void
zv_pool_last_sync (zv_pool_t *p, uint64_t *passes, unsigned *write_cap)
{
  *passes = atomic_load_explicit (&p->p_sync_passes, memory_order_relaxed);
  *write_cap = atomic_load_explicit (&p->p_sync_write_cap,
                                     memory_order_relaxed);
}

/* ---- tunables (tunable.h) ---- */
const zv_tunable_t zv_pool_tunable_table[] = {
  { .tn_name = "zil_size", .tn_module = "pool",
    ZV_TUNABLE_VAR_U64 (zv_pool_zil_size),
    .tn_default = 0, .tn_min = 4 * ZV_ZIL_BLKSZ, .tn_max = 1ull << 40,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_flags = ZV_TUNABLE_F_AUTO,
    .tn_when = ZV_TUNABLE_AT_CREATE, .tn_reader = "pool creation",
    .tn_desc = "Without log= (refused with it), the size of the intent "
    "log's ring inside the pool of the volume created with the pool (and "
    "of each volume created later in this process), at most a quarter of "
    "the pool; auto is 64M, or a sixteenth of a small pool." },
  { .tn_name = "pool_max_passes", .tn_module = "pool",
    ZV_TUNABLE_VAR_UINT (zv_pool_max_passes),
    .tn_default = 64, .tn_min = 2, .tn_max = 1000,
    .tn_unit = ZV_TUNABLE_UNIT_COUNT, .tn_when = ZV_TUNABLE_AT_SYNC,
    .tn_reader = "the txg sync",
    .tn_desc = "Passes of one txg sync after which its space maps must "
    "have converged; past them the sync fails and the pool is "
    "suspended." },
  ZV_TUNABLE_END
};
