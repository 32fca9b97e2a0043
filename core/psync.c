/*
 * psync.c: the txg sync, which writes one txg of the pool to disk.
 *
 * Theory.  The pool is the root of everything on disk: the uberblock
 * names the objset block, the pool's own object set, which names the
 * pool's objects (the dataset directory, one space map per device, the
 * deferred-free lists of the last two txgs); each volume's object and
 * log header are in its dataset record (format 2, docs/format.md).  The
 * txg engine (txg.c) calls zv_psync_txg for txg T once every
 * writer of T has let go, and the sync does, in order:
 *
 *   1. apply the frees deferred in T-2 (the space of blocks the uberblocks
 *      of T-2 and older pointed at becomes free again), and free the
 *      object that listed them;
 *   2. free the trees and rings of the volumes destroyed since the last
 *      sync, write every other volume's dirty blocks and indirect blocks
 *      (dmu.c), take each one's log header, and write the directory
 *      blocks whose records changed (zv_dsdir_sync);
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
 * After an import whose log claim took in-place blocks off the imported
 * txg's pending deferred-free list (p_defer_rewrite, import.c), the first
 * sync rewrites that list too (psync_defer_prev).
 *
 * State: the pool's space maps, deferred lists and objset pointer
 * (pool_impl.h); the datasets' part of step 2 and the drop of destroyed
 * ones after step 6 are dsdir.c's.
 *
 * Locking: zv_psync_txg runs only on the txg engine's thread (or inline
 * in a waiter, serialized by the engine; p_syncing asserts it), or in
 * create before any thread starts.  It takes dd_lock only to read the
 * datasets' list and logs, which volumes and admin calls change.
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
#include "psync.h"
#include "label.h"
#include "dbuf.h"
#include "mem.h"
#include "flat.h"
#include "tunable.h"
#include "scrub.h"

/* Sync passes after which the space maps must have converged. */
static unsigned zv_psync_max_passes = 64;

/* Space-map fill: the allocator's bitmap chunk. */
static void
psync_chunk_fill (void *arg, uint64_t blkid, void *buf)
{
  void **a = arg;
  zv_alloc_t *alloc = a[0];
  unsigned dev = (unsigned) (uintptr_t) a[1];

  zv_alloc_chunk_save (alloc, dev, blkid, buf);
}

/* The largest extent a deferred-free entry is merged up to (de_size is
 * 32 bits). */
#define PSYNC_DEFER_EXTENT_MAX (1ull << 30)

/* Collect one of this txg's deferred frees into the scratch list.  An
 * extent that starts where the last one ends (same device) extends it:
 * a sequential overwrite frees the blocks an earlier sequential write
 * placed side by side, and an entry per block was 0.4% of the data
 * written, in two copies.  What reads the list takes any extent the
 * bitmap has allocated (import), and a cancel splits one (the log's
 * claim, zv_alloc_defer_cancel). */
static void
psync_defer_collect (void *arg, uint64_t dva, uint32_t size)
{
  zv_pool_t *p = arg;
  zv_defer_ent_t *last = p->p_defer_n > 0
    ? &p->p_defer_ents[p->p_defer_n - 1] : NULL;

  p->p_defer_seen++;
  if (last && ZV_DVA_VDEV (last->de_dva) == ZV_DVA_VDEV (dva)
      && last->de_dva + last->de_size == dva
      && (uint64_t) last->de_size + size <= PSYNC_DEFER_EXTENT_MAX) {
    last->de_size += size;
    return;
  }
  ZV_GROW (p->p_defer_ents, p->p_defer_n, p->p_defer_cap, 1024);
  p->p_defer_ents[p->p_defer_n++] = (zv_defer_ent_t) {
    .de_dva = dva, .de_size = size,
  };
}

/* Deferred-list fill: entries of block blkid. */
static void
psync_defer_fill (void *arg, uint64_t blkid, void *buf)
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
 * sync the list only grows, so as many frees collected is the same list;
 * the entries, merged, may be as many although it grew).  It is
 * collected afresh each pass, in the allocator's order, which need not
 * be the last pass's, so every block in use is rewritten, not only those
 * past the old end.  Returns 1 if it wrote.
 */
static int
psync_defer (zv_pool_t *p, zv_flat_t *df, uint64_t txg, size_t *lastn,
             size_t *lastseen)
{
  size_t n;

  p->p_defer_n = 0;
  p->p_defer_seen = 0;
  zv_alloc_defer_foreach (p->p_spa.spa_alloc, txg, psync_defer_collect, p);
  n = p->p_defer_n;
  /* Unchanged when as many frees were collected: a new one may have
   * joined the last extent without adding an entry. */
  if (p->p_defer_seen == *lastseen)
    return 0;
  *lastseen = p->p_defer_seen;
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
psync_defer_prev (zv_pool_t *p, uint64_t txg)
{
  zv_flat_t *pf = &p->p_defer[(txg + 1) % 2];
  uint64_t ptxg = pf->fl_txg;
  size_t pn = SIZE_MAX, pseen = SIZE_MAX;
  int r;

  p->p_defer_rewrite = false;
  if (ptxg + 1 != txg)
    return 0;                   /* no pending list of T-1 */
  r = psync_defer (p, pf, ptxg, &pn, &pseen);
  if (r > 0)
    r = zv_flat_sync (pf, txg, psync_defer_fill, p);
  pf->fl_txg = ptxg;
  return r < 0 ? r : 0;
}

/* Steps 4-6 of the theory comment: converge, objset, uberblock. */
static int
psync_meta (zv_pool_t *p, uint64_t txg)
{
  zv_spa_t *spa = &p->p_spa;
  zv_alloc_t *alloc = spa->spa_alloc;
  zv_flat_t *df = &p->p_defer[txg % 2];
  zv_blkptr_t osbp, old = p->p_objset_bp;
  size_t lastn = SIZE_MAX, lastseen = SIZE_MAX;
  unsigned pass;
  bool moved = true;
  int r;

  /* The objset's place first, so the bitmap converges with it in. */
  r = zv_zio_place_bp (spa, &old, &osbp, false, ZV_OBJSET_SIZE, 0,
                       ZV_BT_OBJSET, 1, 2, txg);
  if (r < 0)
    return r;
  if (p->p_defer_rewrite && (r = psync_defer_prev (p, txg)) < 0)
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
    r = psync_defer (p, df, txg, &lastn, &lastseen);
    if (r < 0)
      return r;
    if (r > 0)
      work = true;
    if (!work)
      break;
    if (pass > zv_psync_max_passes) {
      zv_error ("txg %" PRIu64 ": space maps did not converge after %u "
                "passes", txg, pass);
      return -EIO;
    }
    moved = false;
    r = 0;                      /* (psync_defer's 1 is not an error) */
    for (unsigned d = 0; d < spa->spa_ndevs && r == 0; d++) {
      void *arg[2] = { alloc, (void *) (uintptr_t) d };
      r = zv_flat_sync (&p->p_spacemap[d], txg, psync_chunk_fill, arg);
      moved |= p->p_spacemap[d].fl_moved > 0;
    }
    if (r == 0)
      r = zv_flat_sync (df, txg, psync_defer_fill, p);
    if (r < 0)
      return r;
    moved |= df->fl_moved > 0;
  }
  p->p_sync_passes = pass;

  /* The objset block. */
  zv_objset_phys_t *os = zv_buf_alloc (ZV_OBJSET_SIZE);
  memset (os, 0, ZV_OBJSET_SIZE);
  os->os_hdr.mh_magic = ZV_MBLK_MAGIC;
  os->os_hdr.mh_version = spa->spa_version;
  if (spa->spa_version >= ZV_POOL_VERSION)
    os->os_features = atomic_load (&spa->spa_features);
  os->os_hdr.mh_type = ZV_BT_OBJSET;
  os->os_hdr.mh_txg = txg;
  os->os_pool_guid = spa->spa_guid;
  os->os_txg = txg;
  os->os_ndevs = spa->spa_ndevs;
  zv_flat_phys (&p->p_dd.dd_flat, &os->os_dsdir);
  pthread_mutex_lock (&p->p_dd.dd_lock);
  os->os_next_dsid = p->p_dd.dd_next_id;
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  for (unsigned i = 0; i < 2; i++)
    zv_flat_phys (&p->p_defer[i], &os->os_defer[i]);
  for (unsigned d = 0; d < spa->spa_ndevs; d++)
    zv_flat_phys (&p->p_spacemap[d], &os->os_spacemap[d]);
  /* Where a scrub is, so that a restart goes on from there. */
  zv_scrub_phys_fill (p, (zv_scan_phys_t *) (void *) ((uint8_t *) os
                                                       + ZV_SCAN_OFFSET));
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
  pthread_mutex_lock (&p->p_dd.dd_lock);
  for (size_t i = 0; i < p->p_dd.dd_sync_nds; i++)
    if (p->p_dd.dd_sync_dss[i]->ds_zil)
      zv_zil_synced (p->p_dd.dd_sync_dss[i]->ds_zil, txg);
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  return 0;
}

/* Write txg to disk (the txg engine's callback). */
int
zv_psync_txg (void *arg, uint64_t txg, zv_txg_sync_stats_t *st)
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
  r = zv_dsdir_sync (p, txg);
  /* Direct writes of txg whose records were dropped (a later change, a
   * discarded volume) end too, before txg commits: their space is free
   * again from then on. */
  zv_zio_pending_wait_txg (spa, txg);
  if (r == 0)
    r = psync_meta (p, txg);
  if (r == 0)
    zv_dsdir_reap (p);
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

/* ---- tunables (tunable.h) ---- */
const zv_tunable_t zv_psync_tunable_table[] = {
  { .tn_name = "pool_max_passes", .tn_module = "psync",
    ZV_TUNABLE_VAR_UINT (zv_psync_max_passes),
    .tn_default = 64, .tn_min = 2, .tn_max = 1000,
    .tn_unit = ZV_TUNABLE_UNIT_COUNT, .tn_when = ZV_TUNABLE_AT_SYNC,
    .tn_reader = "the txg sync",
    .tn_desc = "Passes of one txg sync after which its space maps must "
    "have converged; past them the sync fails and the pool is "
    "suspended." },
  ZV_TUNABLE_END
};
