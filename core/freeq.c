/*
 * freeq.c: the pool's free queue: what destroyed datasets held, freed in
 * the background by the txg syncs that follow their destroy.
 *
 * Theory.  A destroy's txg T changes only the namespace and the figures:
 * the dataset leaves the list (its name is free at once), a snapshot's
 * dead lists are split as before (so every figure stays exact), and what
 * the dataset alone held becomes an entry of this queue, stored as a
 * dataset record of kind ZV_DS_KIND_FREE in the destroyed dataset's own
 * directory slot, in the same txg (docs/format.md):
 *
 *   a volume's:   its tree (the descriptor as last synced) and its line;
 *                 its blocks born after the line are its own (a clone's
 *                 older ones are its origin's), the walk prunes the rest;
 *   a snapshot's: the dead list of its successor as it was before the
 *                 split, whose entries born after the snapshot's line
 *                 were its alone (snap.c); the entries at or before the
 *                 line went to the successor's new list, and are skipped;
 *   a rollback's: the tree the volume leaves (as a destroyed clone's,
 *                 the snapshot's txg as its line), in a free slot of
 *                 its own with an id of its own, since the volume keeps
 *                 its slot (zv_freeq_add_rollback).
 *
 * Each later sync (zv_freeq_sync, after the txg's snapshot tasks) frees
 * up to free_max_blocks blocks, or for free_max_ms, whichever comes
 * first (OpenZFS's zfs_async_block_max_blocks and zfs_free_min_time_ms),
 * oldest entry first, and writes each entry's cursor into its record in
 * the same txg as those frees (deferred, as every free: rule 2 of
 * docs/format.md).  So a crash leaves, in the txg imported, exactly the
 * frees its cursor says were made: the import resumes from there,
 * nothing freed twice, nothing leaked.  The sync asks for the next one
 * while work is left (zv_freeq_reap), so an idle pool goes on freeing.
 *
 * The tree is walked in block order from the cursor, the number of the
 * next data block to look at: every data block below it was freed, and
 * every indirect block whose whole span is below it.  An indirect block
 * is freed only after its last child (post-order), so the blocks on the
 * cursor's path are all still there when a later sync, or an import,
 * walks down to the cursor again; those before it are never read again.
 * A dead list is read in order from the cursor, the next entry.  The
 * tree (or list) object itself goes last, in the sync that finishes the
 * entry, which also clears the record; the entry is dropped once that
 * txg is on disk.
 *
 * Hostile data: the record is checked like any record at import
 * (zv_freeq_rec_check), its tree's root and its list's blocks take
 * their owners there, and the walk checks every pointer it follows as
 * dmu.c's walk does.  An entry loaded by import takes the owners of the
 * blocks below its root as it reads them (fe_own: the children of each
 * indirect block, each dead-list entry it frees), as dmu.c does for a
 * volume's tree, so a forged entry naming another dataset's blocks, or
 * one block twice, is refused instead of freeing them.  A block that
 * fails stops its entry for this import (fe_stuck, the error logged):
 * it stays queued, its space in use, and is tried again at the next.
 *
 * State of an entry: queued in the destroy's sync (not worked on in that
 * txg) -> freed a share per sync -> done in the sync that frees its last
 * block (record cleared) -> dropped once that txg is on disk; or stuck.
 *
 * Locking: the sync thread (or import, before it starts) owns the
 * entries; the list changes under dd_lock (zv_dsdir_new_slot_locked
 * reads the slots under it), and the figures other threads read are
 * atomics.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "freeq.h"
#include "pool_impl.h"
#include "alloc.h"
#include "tunable.h"

#define F ((uint64_t) ZV_INDIRECT_FANOUT)

/* Blocks one sync frees at most, and its time for it. */
static uint64_t zv_freeq_max_blocks = 100000;
static unsigned zv_freeq_max_ms = 250;

/* One sync's allowance. */
typedef struct freeq_budget {
  uint64_t b_max, b_freed;
  uint64_t b_deadline;          /* zv_now_ns */
} freeq_budget_t;

/* Bytes for a message. */
static const char *
freeq_size (char *buf, size_t len, uint64_t v)
{
  if (v >= 10ull << 20)
    snprintf (buf, len, "%.1f MiB", (double) v / (1 << 20));
  else
    snprintf (buf, len, "%" PRIu64 " bytes", v);
  return buf;
}

static bool
freeq_spent (const freeq_budget_t *b)
{
  return b->b_freed >= b->b_max || zv_now_ns () >= b->b_deadline;
}

/* A walk of an entry: freeing (w_txg set) or only visiting. */
typedef struct freeq_walk {
  zv_pool_t *w_pool;
  zv_freeq_ent_t *w_e;
  uint64_t w_txg;               /* the sync's txg; 0: visit only */
  freeq_budget_t *w_b;
  zv_dmu_walk_fn w_fn;          /* visit: tree blocks */
  zv_deadlist_fn w_efn;         /* visit: list entries */
  void *w_arg;
  uint64_t w_cursor;
} freeq_walk_t;

static void
freeq_add_left (zv_pool_t *p, zv_freeq_ent_t *e, uint64_t add, uint64_t sub)
{
  atomic_fetch_add (&e->fe_left, add);
  atomic_fetch_sub (&e->fe_left, sub);
  atomic_fetch_add (&p->p_freeq.fq_left, add);
  atomic_fetch_sub (&p->p_freeq.fq_left, sub);
}

/* Free a block of the entry in the sync's txg, counted. */
static int
freeq_free_bp (freeq_walk_t *w, const zv_blkptr_t *bp, const char *what)
{
  zv_spa_t *spa = &w->w_pool->p_spa;
  zv_freeq_ent_t *e = w->w_e;

  for (unsigned c = 0; c < bp->bp_ncopies; c++)
    if (!zv_alloc_is_allocated (spa->spa_alloc, bp->bp_dva[c],
                                bp->bp_psize)) {
      zv_error ("%s: copy %u points at free space: not freed", what, c + 1);
      return -EIO;
    }
  zv_zio_free_bp (spa, bp, w->w_txg);
  w->w_b->b_freed++;
  if (bp->bp_level == 0)
    freeq_add_left (w->w_pool, e, 0,
                    ZV_MIN ((uint64_t) bp->bp_psize,
                            atomic_load (&e->fe_left)));
  return 0;
}

/* An imported entry's indirect block, first read: its children that the
 * free has still to pass take their space in the pool's owners (as
 * dmu.c's first load of a volume's indirect block does). */
static int
freeq_own_children (freeq_walk_t *w, const zv_blkptr_t *bp, unsigned level,
                    uint64_t idx, const void *data, const char *what)
{
  zv_spa_t *spa = &w->w_pool->p_spa;
  const zv_blkptr_t *c = (const zv_blkptr_t *) data + 1;
  uint64_t span = zv_dmu_span (level - 1);
  zv_alloc_ext_t ext[2 * ZV_INDIRECT_FANOUT];
  size_t n = 0, bad;
  int r;

  for (uint64_t i = 0; i < F; i++) {
    uint64_t end = (idx * F + i + 1) * span;
    if (zv_bp_is_hole (&c[i]) || end <= w->w_cursor
        || c[i].bp_birth <= w->w_e->fe_line || c[i].bp_ncopies < 1
        || c[i].bp_ncopies > 2)
      continue;                 /* (the visit checks the fields) */
    for (unsigned k = 0; k < c[i].bp_ncopies; k++)
      ext[n++] = (zv_alloc_ext_t) { c[i].bp_dva[k], c[i].bp_psize };
  }
  r = zv_alloc_own_children (spa->spa_alloc, bp->bp_dva[0], ext, n, &bad);
  if (r == 0)
    return 0;
  zv_error ("%s: a child (device %u offset %" PRIu64 ") %s: not freed",
            what, ZV_DVA_VDEV (ext[bad].ae_dva),
            ZV_DVA_OFFSET (ext[bad].ae_dva),
            r == -ENOENT ? "points at free space"
            : r == -EEXIST ? "shares its space with a block in use"
            : "is not an extent of the pool");
  return -EIO;
}

/*
 * Block idx of level 'level' of the entry's tree (its parent born in
 * pbirth), in block order from the cursor: 0 when it and everything
 * under it is done (freed, or pruned: not this tree's), 1 when the
 * budget ran out before it was, or an error.
 */
static int
freeq_visit (freeq_walk_t *w, const zv_blkptr_t *bp, unsigned level,
             uint64_t idx, uint64_t pbirth)
{
  zv_freeq_ent_t *e = w->w_e;
  zv_spa_t *spa = &w->w_pool->p_spa;
  uint64_t span = zv_dmu_span (level), end = (idx + 1) * span;
  uint32_t size = level ? ZV_INDIRECT_SIZE : e->fe_blksz;
  char what[3 * ZV_NAME_MAX + 64];
  int r = 0;

  if (end <= w->w_cursor)
    return 0;
  if (zv_bp_is_hole (bp)
      || (bp->bp_birth != 0 && bp->bp_birth <= e->fe_line
          && bp->bp_birth <= pbirth)) {
    w->w_cursor = ZV_MAX (w->w_cursor, end);
    return 0;
  }
  snprintf (what, sizeof what, "background free of %s: level %u block %"
            PRIu64, e->fe_shown, level, idx);
  if (bp->bp_level != level || !zv_bp_size_is (bp, size)) {
    zv_error ("%s: pointer level %u size %" PRIu32 "/%" PRIu32 ", expected "
              "level %u size %" PRIu32, what, bp->bp_level, bp->bp_psize,
              bp->bp_lsize, level, size);
    return -EIO;
  }
  if ((r = zv_dmu_check_child (spa, bp, level, pbirth, what)) < 0)
    return r;
  if (w->w_txg == 0 && w->w_fn != NULL
      && (r = w->w_fn (w->w_arg, bp, level, idx, NULL)) != 0)
    return r;
  if (w->w_txg != 0 && freeq_spent (w->w_b))
    return 1;
  if (level > 0) {
    void *data = zv_buf_get (ZV_INDIRECT_SIZE);
    const zv_blkptr_t *c = (const zv_blkptr_t *) data + 1;

    r = zv_zio_read (spa, bp, data, what);
    if (r == 0)
      r = zv_dmu_check_indirect (data, bp, ZV_OBJ_VOLUME, level, idx, what);
    if (r == 0 && w->w_txg != 0 && e->fe_own
        && bp->bp_birth <= spa->spa_own_txg)
      r = freeq_own_children (w, bp, level, idx, data, what);
    for (uint64_t i = 0; i < F && r == 0; i++)
      r = freeq_visit (w, &c[i], level - 1, idx * F + i, bp->bp_birth);
    zv_buf_put (data, ZV_INDIRECT_SIZE);
    if (r != 0)
      return r;
  }
  /* Its span is done: the block itself goes (post-order). */
  if (w->w_txg != 0 && (r = freeq_free_bp (w, bp, what)) < 0)
    return r;
  w->w_cursor = ZV_MAX (w->w_cursor, end);
  return 0;
}

/* A dead-list entry, in order from the cursor. */
static int
freeq_dl_cb (void *arg, const zv_deadlist_ent_t *de)
{
  freeq_walk_t *w = arg;
  zv_freeq_ent_t *e = w->w_e;
  zv_alloc_t *a = w->w_pool->p_spa.spa_alloc;
  char what[3 * ZV_NAME_MAX + 64];
  zv_blkptr_t bp;
  int r;

  if (de->de_birth <= e->fe_line) {
    w->w_cursor++;              /* the successor's now (snap.c) */
    return 0;
  }
  if (w->w_txg == 0) {
    if ((r = w->w_efn (w->w_arg, de)) != 0)
      return r;
    w->w_cursor++;
    return 0;
  }
  if (freeq_spent (w->w_b))
    return 1;
  snprintf (what, sizeof what, "background free of %s: dead-list entry %"
            PRIu64, e->fe_shown, w->w_cursor);
  memset (&bp, 0, sizeof bp);
  bp.bp_dva[0] = de->de_dva[0];
  bp.bp_dva[1] = de->de_dva[1];
  bp.bp_psize = bp.bp_lsize = de->de_psize;
  bp.bp_ncopies = de->de_ncopies;
  bp.bp_level = de->de_level;
  bp.bp_birth = de->de_birth;
  if (e->fe_own && de->de_birth <= w->w_pool->p_spa.spa_own_txg)
    for (unsigned c = 0; c < de->de_ncopies; c++)
      if ((r = zv_alloc_own (a, de->de_dva[c], de->de_psize)) < 0) {
        zv_error ("%s: copy %u %s: not freed", what, c + 1,
                  r == -ENOENT ? "points at free space"
                  : r == -EEXIST ? "shares its space with a block in use"
                  : "is not an extent of the pool");
        return -EIO;
      }
  if ((r = freeq_free_bp (w, &bp, what)) < 0)
    return r;
  w->w_cursor++;
  return 0;
}

/* One entry's share of a sync: 0 done, 1 budget spent, or an error. */
static int
freeq_step (zv_pool_t *p, zv_freeq_ent_t *e, uint64_t txg, freeq_budget_t *b)
{
  freeq_walk_t w = {
    .w_pool = p, .w_e = e, .w_txg = txg, .w_b = b, .w_cursor = e->fe_cursor,
  };
  uint64_t next;
  int r;

  if (e->fe_tree) {
    r = freeq_visit (&w, &e->fe_dn.dn_root, e->fe_dn.dn_nlevels - 1u, 0,
                     UINT64_MAX);
    e->fe_cursor = w.w_cursor;
    return r;
  }
  r = zv_deadlist_iterate_from (&e->fe_dl, e->fe_shown, e->fe_cursor,
                                freeq_dl_cb, &w, &next);
  e->fe_cursor = next;
  if (r < 0)
    return r;
  if (next < e->fe_dl.dl_n)
    return 1;
  zv_deadlist_free_obj (&e->fe_dl, txg);
  return 0;
}

/* The record of an entry, sealed for its slot. */
static void
freeq_record (zv_pool_t *p, zv_freeq_ent_t *e, zv_dsrec_phys_t *rec)
{
  memset (rec, 0, sizeof *rec);
  rec->dr_magic = ZV_DSREC_MAGIC;
  rec->dr_version = ZV_DSREC_VERSION;
  rec->dr_kind = ZV_DS_KIND_FREE;
  rec->dr_id = e->fe_id;
  rec->dr_parent_id = e->fe_parent_id;
  rec->dr_prev_snap_txg = e->fe_line;
  rec->dr_creation_txg = e->fe_txg;
  rec->dr_creation_time = e->fe_time;
  rec->dr_volsize = e->fe_volsize;
  rec->dr_volblocksize = e->fe_blksz;
  rec->dr_used = atomic_load (&e->fe_left);
  snprintf (rec->dr_name, sizeof rec->dr_name, "%s", e->fe_name);
  if (e->fe_tree)
    rec->dr_volume = e->fe_dn;
  else {
    zv_deadlist_phys (&e->fe_dl, &rec->dr_deadlist);
    rec->dr_deadlist_bytes = e->fe_dl.dl_bytes;
  }
  rec->dr_free_cursor = e->fe_cursor;
  rec->dr_free_total = e->fe_total;
  zv_cksum_compute (rec, sizeof *rec, zv_dsrec_seed (p->p_spa.spa_guid,
                                                     e->fe_slot),
                    &rec->dr_cksum);
}

/* A new entry on the list. */
static zv_freeq_ent_t *
freeq_new (zv_pool_t *p, uint64_t slot, uint64_t id, uint64_t txg)
{
  zv_freeq_ent_t *e = zv_calloc (1, sizeof *e);

  e->fe_slot = slot;
  e->fe_id = id;
  e->fe_txg = txg;
  zv_deadlist_init (&e->fe_dl, &p->p_spa);
  return e;
}

/* The list's end; the caller holds dd_lock. */
static void
freeq_append_locked (zv_pool_t *p, zv_freeq_ent_t *e)
{
  zv_freeq_t *fq = &p->p_freeq;

  ZV_GROW (fq->fq_ents, fq->fq_n, fq->fq_cap, 8);
  fq->fq_ents[fq->fq_n++] = e;
  atomic_fetch_add (&fq->fq_nents, 1);
  atomic_fetch_add (&fq->fq_left, atomic_load (&e->fe_left));
}

static void
freeq_append (zv_pool_t *p, zv_freeq_ent_t *e)
{
  pthread_mutex_lock (&p->p_dd.dd_lock);
  freeq_append_locked (p, e);
  pthread_mutex_unlock (&p->p_dd.dd_lock);
}

static void
freeq_free (zv_freeq_ent_t *e)
{
  zv_deadlist_fini (&e->fe_dl);
  free (e);
}

/* A tree's entry: the blocks of dn born after ds's line, in 'slot' under
 * 'id'.  rollback names the snapshot a rollback went back to (the entry
 * then takes a slot of its own: the volume keeps its). */
static zv_freeq_ent_t *
freeq_tree_ent (zv_pool_t *p, zv_pool_ds_t *ds, const zv_dnode_phys_t *dn,
                uint64_t txg, uint64_t slot, uint64_t id,
                const char *rollback)
{
  zv_freeq_ent_t *e = freeq_new (p, slot, id, txg);

  e->fe_tree = true;
  e->fe_dn = *dn;
  e->fe_dn.dn_size = ds->ds_volsize;
  e->fe_line = ds->ds_prev_snap_txg;
  e->fe_time = (uint64_t) time (NULL);
  e->fe_volsize = ds->ds_volsize;
  e->fe_blksz = ds->ds_blksz;
  e->fe_total = ds->ds_obj.ob_written;
  atomic_store (&e->fe_left, e->fe_total);
  snprintf (e->fe_name, sizeof e->fe_name, "%s", ds->ds_name);
  if (rollback)
    snprintf (e->fe_shown, sizeof e->fe_shown, "what volume '%s' wrote "
              "after '%s'", ds->ds_name, rollback);
  else
    snprintf (e->fe_shown, sizeof e->fe_shown, "volume '%s'", ds->ds_name);
  return e;
}

int
zv_freeq_add_tree (zv_pool_t *p, zv_pool_ds_t *ds, const zv_dnode_phys_t *dn,
                   uint64_t txg)
{
  char size[32];
  zv_freeq_ent_t *e;

  if (zv_bp_is_hole (&dn->dn_root)
      || dn->dn_root.bp_birth <= ds->ds_prev_snap_txg)
    return 0;                   /* nothing of its own */
  e = freeq_tree_ent (p, ds, dn, txg, ds->ds_slot, ds->ds_id, NULL);
  freeq_append (p, e);
  freeq_size (size, sizeof size, e->fe_total);
  zv_info ("pool '%s': %s destroyed in txg %" PRIu64 ": its %s are freed "
           "in the background from the next txg on", p->p_name, e->fe_shown,
           txg, size);
  return 0;
}

int
zv_freeq_add_rollback (zv_pool_t *p, zv_pool_ds_t *v,
                       const zv_dnode_phys_t *dn, const char *snap,
                       uint64_t txg)
{
  uint64_t id, slot;
  char size[32];
  zv_freeq_ent_t *e;
  int r;

  if (zv_bp_is_hole (&dn->dn_root)
      || dn->dn_root.bp_birth <= v->ds_prev_snap_txg)
    return 0;                   /* nothing written since */
  /* The slot found free and the entry that takes it under one hold of
   * dd_lock, so that nothing else can take that slot in between. */
  pthread_mutex_lock (&p->p_dd.dd_lock);
  r = zv_dsdir_new_slot_locked (p, &id, &slot);
  if (r < 0) {
    pthread_mutex_unlock (&p->p_dd.dd_lock);
    return r;
  }
  e = freeq_tree_ent (p, v, dn, txg, slot, id, snap);
  freeq_append_locked (p, e);
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  freeq_size (size, sizeof size, e->fe_total);
  zv_info ("pool '%s': volume '%s' rolled back to '%s' in txg %" PRIu64
           ": the %s it wrote after it are freed in the background from "
           "the next txg on", p->p_name, v->ds_name, snap, txg, size);
  return 0;
}

int
zv_freeq_add_deadlist (zv_pool_t *p, zv_pool_ds_t *s, zv_deadlist_t *dl,
                       uint64_t bytes, uint64_t txg)
{
  char size[32];
  zv_freeq_ent_t *e;
  int r;

  /* What the successor appended in this txg is written now: the record
   * names the list as this txg leaves it. */
  r = zv_deadlist_sync (dl, txg);
  if (r < 0)
    return r;
  e = freeq_new (p, s->ds_slot, s->ds_id, txg);
  zv_deadlist_move (&e->fe_dl, dl);
  e->fe_parent_id = s->ds_parent_id;
  e->fe_line = s->ds_prev_snap_txg;
  e->fe_time = (uint64_t) time (NULL);
  e->fe_volsize = s->ds_volsize;
  e->fe_blksz = s->ds_blksz;
  e->fe_total = bytes;
  atomic_store (&e->fe_left, bytes);
  snprintf (e->fe_name, sizeof e->fe_name, "%s", s->ds_name);
  snprintf (e->fe_shown, sizeof e->fe_shown, "snapshot '%s@%s'",
            s->ds_parent ? s->ds_parent->ds_name : "?", s->ds_name);
  freeq_append (p, e);
  freeq_size (size, sizeof size, bytes);
  zv_info ("pool '%s': %s destroyed in txg %" PRIu64 ": the %s only it "
           "held are freed in the background from the next txg on",
           p->p_name, e->fe_shown, txg, size);
  return 0;
}

int
zv_freeq_sync (zv_pool_t *p, uint64_t txg)
{
  zv_freeq_t *fq = &p->p_freeq;
  uint64_t t0 = zv_now_ns ();
  freeq_budget_t b = {
    .b_max = zv_freeq_max_blocks,
    .b_deadline = t0 + (uint64_t) zv_freeq_max_ms * 1000000ull,
  };

  for (size_t i = 0; i < fq->fq_n && !freeq_spent (&b); i++) {
    zv_freeq_ent_t *e = fq->fq_ents[i];
    uint64_t before = b.b_freed;
    char size[32];
    int r;

    if (e->fe_txg >= txg || e->fe_stuck || e->fe_done)
      continue;
    r = freeq_step (p, e, txg, &b);
    if (b.b_freed > before)
      e->fe_txgs++;
    if (r < 0) {
      e->fe_stuck = true;
      atomic_fetch_add (&fq->fq_nstuck, 1);
      freeq_size (size, sizeof size, atomic_load (&e->fe_left));
      zv_error ("pool '%s': the background free of %s stopped at a block "
                "that failed (%s): its %s left stay in use, and the next "
                "import tries again", p->p_name, e->fe_shown,
                strerror (-r), size);
    }
    else if (r == 0) {
      e->fe_done = true;
      freeq_size (size, sizeof size, e->fe_total);
      freeq_add_left (p, e, 0, atomic_load (&e->fe_left));
      zv_info ("pool '%s': %s freed: %s in the background, over %" PRIu64
               " txg%s (the last %" PRIu64 ")", p->p_name, e->fe_shown, size,
               e->fe_txgs, e->fe_txgs == 1 ? "" : "s", txg);
    }
  }
  if (b.b_freed > 0) {
    uint64_t ns = zv_now_ns () - t0;
    atomic_store (&fq->fq_last_blocks, b.b_freed);
    atomic_fetch_add (&fq->fq_total_blocks, b.b_freed);
    atomic_fetch_add (&fq->fq_syncs, 1);
    atomic_store (&fq->fq_last_ns, ns);
    if (b.b_freed > atomic_load (&fq->fq_max_blocks))
      atomic_store (&fq->fq_max_blocks, b.b_freed);
    if (ns > atomic_load (&fq->fq_max_ns))
      atomic_store (&fq->fq_max_ns, ns);
  }
  /* The records: a finished entry's slot is cleared, the others carry
   * their cursor, in this txg with the frees. */
  for (size_t i = 0; i < fq->fq_n; i++) {
    zv_freeq_ent_t *e = fq->fq_ents[i];
    zv_dsrec_phys_t rec;

    if (!e->fe_done) {
      freeq_record (p, e, &rec);
      if (memcmp (&rec, &e->fe_rec, sizeof rec) == 0)
        continue;
      e->fe_rec = rec;
    }
    zv_flat_dirty (&p->p_dd.dd_flat, e->fe_slot / ZV_DSDIR_PER_BLK);
  }
  return 0;
}

void
zv_freeq_fill (zv_pool_t *p, uint64_t blkid, void *buf)
{
  zv_freeq_t *fq = &p->p_freeq;

  for (size_t i = 0; i < fq->fq_n; i++) {
    zv_freeq_ent_t *e = fq->fq_ents[i];
    if (!e->fe_done && e->fe_slot / ZV_DSDIR_PER_BLK == blkid)
      memcpy ((uint8_t *) buf + (e->fe_slot % ZV_DSDIR_PER_BLK)
              * ZV_DSREC_SIZE, &e->fe_rec, ZV_DSREC_SIZE);
  }
}

uint64_t
zv_freeq_dir_size (zv_pool_t *p)
{
  zv_freeq_t *fq = &p->p_freeq;
  uint64_t size = 0;

  for (size_t i = 0; i < fq->fq_n; i++)
    if (!fq->fq_ents[i]->fe_done)
      size = ZV_MAX (size, (fq->fq_ents[i]->fe_slot + 1) * ZV_DSREC_SIZE);
  return size;
}

void
zv_freeq_mark_slots (zv_pool_t *p, uint8_t *used, uint64_t max)
{
  zv_freeq_t *fq = &p->p_freeq;

  for (size_t i = 0; i < fq->fq_n; i++)
    if (fq->fq_ents[i]->fe_slot < max)
      used[fq->fq_ents[i]->fe_slot] = 1;
}

void
zv_freeq_reap (zv_pool_t *p, uint64_t txg)
{
  zv_freeq_t *fq = &p->p_freeq;
  bool freed = false;

  pthread_mutex_lock (&p->p_dd.dd_lock);
  for (size_t i = 0; i < fq->fq_n;) {
    zv_freeq_ent_t *e = fq->fq_ents[i];
    if (!e->fe_done) {
      freed = freed || !e->fe_stuck;
      i++;
      continue;
    }
    freed = true;
    /* (Keep the order: oldest first.) */
    memmove (&fq->fq_ents[i], &fq->fq_ents[i + 1],
             (fq->fq_n - i - 1) * sizeof fq->fq_ents[0]);
    fq->fq_n--;
    atomic_fetch_sub (&fq->fq_nents, 1);
    freeq_free (e);
  }
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  /* An idle pool skips its syncs: ask for the next one while work is
   * left, and then until the last frees are no longer deferred (the txg
   * engine's thread; without it, the waiters sync).  Without the second
   * part the space of the queue's last syncs stayed deferred on an idle
   * server, and a listing then differed from the next import's. */
  if (freed)
    fq->fq_settle_txg = ZV_MAX (fq->fq_settle_txg, txg + ZV_TXG_DEFER);
  if (p->p_txg != NULL && !atomic_load (&p->p_closing)
      && (zv_freeq_pending (p) || txg < fq->fq_settle_txg))
    zv_txg_kick (p->p_txg, txg + 1);
}

bool
zv_freeq_pending (zv_pool_t *p)
{
  return atomic_load (&p->p_freeq.fq_nents)
    > atomic_load (&p->p_freeq.fq_nstuck);
}

void
zv_freeq_drop_all (zv_pool_t *p)
{
  zv_freeq_t *fq = &p->p_freeq;

  for (size_t i = 0; i < fq->fq_n; i++)
    freeq_free (fq->fq_ents[i]);
  free (fq->fq_ents);
  memset (fq, 0, sizeof *fq);
}

/* ---- import ---- */

const char *
zv_freeq_rec_check (const zv_dsrec_phys_t *rec, uint64_t txg,
                    uint64_t next_dsid)
{
  static const zv_dnode_phys_t zdn;
  static const zv_zil_header_t zzh;
  bool tree = memcmp (&rec->dr_volume, &zdn, sizeof zdn) != 0;
  bool list = memcmp (&rec->dr_deadlist, &zdn, sizeof zdn) != 0;

  (void) txg;
  if (rec->dr_flags != 0 || rec->dr_guid != 0 || rec->dr_origin_id != 0
      || rec->dr_prev_snap_id != 0 || rec->dr_reservation != 0
      || rec->dr_written != 0 || rec->dr_referenced != 0
      || memcmp (&rec->dr_zil, &zzh, sizeof zzh) != 0)
    return "fields a queued free does not have (flags, guid, origin, "
      "previous snapshot, reservation, figures or log header set)";
  if (tree == list)
    return "what it frees (a tree or a dead list, exactly one of them)";
  if (rec->dr_prev_snap_txg >= rec->dr_creation_txg)
    return "line (not before its destroy's txg)";
  if (rec->dr_used > rec->dr_free_total)
    return "bytes left (more than it began with)";
  if (tree) {
    const zv_dnode_phys_t *dn = &rec->dr_volume;
    uint64_t nb = zv_dsdir_nblocks (rec->dr_volsize, rec->dr_volblocksize);

    if (rec->dr_parent_id != 0 || rec->dr_deadlist_bytes != 0)
      return "parent or dead-list bytes (set on a volume's tree)";
    if (dn->dn_type != ZV_BT_VOLDATA || dn->dn_size != rec->dr_volsize
        || dn->dn_datablksz != rec->dr_volblocksize || dn->dn_nblocks != nb
        || dn->dn_nlevels != zv_dmu_nlevels (nb) || dn->dn_pad != 0)
      return "tree (its shape is not that of its size)";
    if (zv_bp_is_hole (&dn->dn_root)
        || dn->dn_root.bp_birth <= rec->dr_prev_snap_txg
        || dn->dn_root.bp_birth > rec->dr_creation_txg
        || dn->dn_root.bp_fill > nb
        || dn->dn_root.bp_level != dn->dn_nlevels - 1u)
      return "tree's root (a hole, born at or before its line or after "
        "its destroy, or counts more blocks than it has)";
    if (rec->dr_free_cursor >= nb)
      return "cursor (past the tree's last block)";
    if (rec->dr_free_total > nb * (uint64_t) rec->dr_volblocksize)
      return "bytes to free (more than the tree holds)";
  }
  else {
    const zv_dnode_phys_t *dn = &rec->dr_deadlist;
    uint64_t n = dn->dn_size / sizeof (zv_deadlist_ent_t);

    if (rec->dr_parent_id == 0 || rec->dr_parent_id >= next_dsid
        || rec->dr_parent_id == rec->dr_id)
      return "parent (a snapshot's volume)";
    if (!zv_deadlist_dnode_valid (dn) || dn->dn_txg > rec->dr_creation_txg)
      return "dead list (its shape, or written after its destroy)";
    if (rec->dr_free_cursor >= n)
      return "cursor (past the dead list's last entry)";
    if (rec->dr_deadlist_bytes > n * (uint64_t) ZV_MAX_BLKSZ
        || rec->dr_free_total > rec->dr_deadlist_bytes)
      return "dead-list bytes (more than its entries can name)";
  }
  return NULL;
}

int
zv_freeq_load (zv_pool_t *p, const zv_dsrec_phys_t *rec, uint64_t slot)
{
  zv_freeq_ent_t *e = freeq_new (p, slot, rec->dr_id, rec->dr_creation_txg);
  static const zv_dnode_phys_t zdn;

  e->fe_parent_id = rec->dr_parent_id;
  e->fe_line = rec->dr_prev_snap_txg;
  e->fe_time = rec->dr_creation_time;
  e->fe_volsize = rec->dr_volsize;
  e->fe_blksz = rec->dr_volblocksize;
  e->fe_tree = memcmp (&rec->dr_volume, &zdn, sizeof zdn) != 0;
  e->fe_dn = rec->dr_volume;
  e->fe_cursor = rec->dr_free_cursor;
  e->fe_total = rec->dr_free_total;
  atomic_store (&e->fe_left, rec->dr_used);
  e->fe_own = true;
  e->fe_rec = *rec;
  snprintf (e->fe_name, sizeof e->fe_name, "%s", rec->dr_name);
  snprintf (e->fe_shown, sizeof e->fe_shown, "%s '%s'",
            e->fe_tree ? "volume" : "snapshot", e->fe_name);
  if (!e->fe_tree) {
    int r = zv_deadlist_load (&e->fe_dl, &p->p_spa, &rec->dr_deadlist,
                              rec->dr_deadlist_bytes, e->fe_shown);
    if (r < 0) {
      zv_error ("dataset record %" PRIu64 " (a background free) is "
                "refused", slot);
      freeq_free (e);
      return r;
    }
  }
  freeq_append (p, e);
  return 0;
}

void
zv_freeq_imported (zv_pool_t *p)
{
  zv_freeq_t *fq = &p->p_freeq;

  for (size_t i = 0; i < fq->fq_n; i++) {
    zv_freeq_ent_t *e = fq->fq_ents[i];
    char size[32];

    for (size_t k = 0; k < p->p_dd.dd_nds && !e->fe_tree; k++)
      if (p->p_dd.dd_dss[k]->ds_id == e->fe_parent_id
          && p->p_dd.dd_dss[k]->ds_kind == ZV_DS_KIND_VOLUME)
        snprintf (e->fe_shown, sizeof e->fe_shown, "snapshot '%s@%s'",
                  p->p_dd.dd_dss[k]->ds_name, e->fe_name);
    freeq_size (size, sizeof size, atomic_load (&e->fe_left));
    zv_info ("pool '%s': %s, destroyed in txg %" PRIu64 ", still has %s to "
             "free%s", p->p_name, e->fe_shown, e->fe_txg, size,
             p->p_readonly ? " (a read-write import frees them)"
             : ": the background free goes on");
  }
}

zv_freeq_ent_t *
zv_freeq_find_id (zv_pool_t *p, uint64_t id)
{
  zv_freeq_t *fq = &p->p_freeq;

  for (size_t i = 0; i < fq->fq_n; i++)
    if (fq->fq_ents[i]->fe_id == id)
      return fq->fq_ents[i];
  return NULL;
}

int
zv_freeq_walk (zv_pool_t *p, zv_freeq_ent_t *e, zv_dmu_walk_fn fn,
               zv_deadlist_fn efn, void *arg)
{
  freeq_walk_t w = {
    .w_pool = p, .w_e = e, .w_fn = fn, .w_efn = efn, .w_arg = arg,
    .w_cursor = e->fe_cursor,
  };
  uint64_t next;

  if (e->fe_tree)
    return freeq_visit (&w, &e->fe_dn.dn_root, e->fe_dn.dn_nlevels - 1u, 0,
                        UINT64_MAX);
  return zv_deadlist_iterate_from (&e->fe_dl, e->fe_shown, e->fe_cursor,
                                   freeq_dl_cb, &w, &next);
}

/* ---- the pool's view (pool.h) ---- */

uint64_t
zv_pool_freeing (zv_pool_t *p, uint64_t *nents)
{
  if (nents)
    *nents = atomic_load (&p->p_freeq.fq_nents);
  return atomic_load (&p->p_freeq.fq_left);
}

int
zv_pool_wait_freeing (zv_pool_t *p, const int cancel_fd[2],
                      zv_pool_progress_fn progress, void *arg)
{
  zv_freeq_t *fq = &p->p_freeq;
  uint64_t total = 0;
  zv_txg_hold_t h;
  int r;

  for (;;) {
    uint64_t left = atomic_load (&fq->fq_left);
    uint64_t n = atomic_load (&fq->fq_nents);
    uint64_t stuck = atomic_load (&fq->fq_nstuck);

    total = ZV_MAX (total, left);
    if (progress)
      progress (arg, left, total);
    if (n == 0)
      break;
    if (stuck == n) {
      zv_error ("pool '%s': the background free of %" PRIu64 " destroyed "
                "dataset%s stopped at a block that failed (the messages "
                "before say which); the next import tries again", p->p_name,
                n, n == 1 ? "" : "s");
      return -EIO;
    }
    if (zv_cancel_poll (cancel_fd) != 0)
      return -ECANCELED;        /* (the frees go on without a waiter) */
    if (p->p_readonly) {
      zv_error ("pool '%s' is imported read-only: what %" PRIu64 " destroyed "
                "dataset%s still hold is freed by a read-write import",
                p->p_name, n, n == 1 ? "" : "s");
      return -EROFS;
    }
    /* One more sync (forced: an idle txg may not sync otherwise). */
    if ((r = zv_txg_hold (p->p_txg, 0, &h)) < 0)
      return r;
    zv_txg_rele (p->p_txg, &h);
    if ((r = zv_txg_wait_synced (p->p_txg, h.th_txg)) < 0)
      return r;
  }
  if (p->p_readonly)
    return 0;
  /* The last frees are deferred: free space two txgs later. */
  for (int k = 0; k < 2; k++) {
    if ((r = zv_txg_hold (p->p_txg, 0, &h)) < 0)
      return r;
    zv_txg_rele (p->p_txg, &h);
    if ((r = zv_txg_wait_synced (p->p_txg, h.th_txg)) < 0)
      return r;
  }
  return 0;
}

/* ---- tunables (tunable.h) ---- */
const zv_tunable_t zv_freeq_tunable_table[] = {
  { .tn_name = "free_max_blocks", .tn_module = "freeq",
    ZV_TUNABLE_VAR_U64 (zv_freeq_max_blocks),
    .tn_default = 100000, .tn_min = 1, .tn_max = 1ull << 32,
    .tn_unit = ZV_TUNABLE_UNIT_COUNT, .tn_when = ZV_TUNABLE_AT_SYNC,
    .tn_reader = "the txg sync",
    .tn_desc = "Most blocks of destroyed volumes and snapshots one txg "
    "sync frees in the background (the rest waits for the next syncs, "
    "so that a large destroy never holds one sync long).",
    .tn_zfs = "zfs_async_block_max_blocks" },
  { .tn_name = "free_max_ms", .tn_module = "freeq",
    ZV_TUNABLE_VAR_UINT (zv_freeq_max_ms),
    .tn_default = 250, .tn_min = 1, .tn_max = 60000,
    .tn_unit = ZV_TUNABLE_UNIT_MS, .tn_when = ZV_TUNABLE_AT_SYNC,
    .tn_reader = "the txg sync",
    .tn_desc = "Most time one txg sync spends freeing destroyed volumes "
    "and snapshots in the background.",
    .tn_zfs = "zfs_free_min_time_ms" },
  ZV_TUNABLE_END
};
