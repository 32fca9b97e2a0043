/*
 * dmu_sync.c: the object layer's syncing context (its open context, the
 * reads and the walk are dmu.c, whose theory comment says what a dirty
 * record is and how the tree is laid out and trusted).
 *
 * Theory.  The txg sync thread, one txg at a time, takes T's list
 * (nobody adds to it once T is quiesced), writes each block to new space
 * (copy on write: the old copy is freed, deferred to T+2), or adopts the
 * block the intent log already wrote for it (zv_dmu_sync_block), and
 * records the new pointer in the parent indirect block in memory (the
 * blocks go in order, so one hold on a level-1 parent serves the run of
 * blocks under it: dmu_l1_cursor_t); then writes the indirect blocks of
 * each level (two copies each), bottom up, and last the root pointer.  A data block of a volume whose property
 * says so is compressed first (compress.c), into a pooled buffer, and
 * placed at its stored size; the record's buffer, which the cache takes,
 * stays as written (the cache holds uncompressed data only).  The intent
 * log's in-place blocks and allocated zeros are never compressed.  A
 * block already born in T (a second sync pass of the same txg) is
 * overwritten in place: no committed uberblock
 * can point at it, and not reallocating is what lets the pool's passes
 * converge.  Data blocks of zeros become holes (the volume is thin),
 * except those a zero without MAY_TRIM asked to keep allocated
 * (dr_keep_alloc): their records hold no data, and the sync writes them
 * from one shared zero block.  A sync that fails (the pool is suspended
 * then) leaves T's records dirty, so reads keep returning T's content,
 * which is nowhere else; the export discards them.
 *
 * Locking: the rules of dmu.c's theory comment, which cover both files.
 * zv_dmu_sync runs on the pool's sync thread alone (dsdir.c, one txg at
 * a time).
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <inttypes.h>

#include "dmu_impl.h"
#include "compress.h"
#include "compq.h"

/* An indirect block changed by this sync, held until its parent knows. */
typedef struct dmu_dirty_ind {
  zv_dbuf_t *dd_db;
  uint64_t dd_idx;
} dmu_dirty_ind_t;

typedef struct dmu_ind_set {
  dmu_dirty_ind_t *is_v;
  size_t is_n, is_cap;
} dmu_ind_set_t;

/* Add (held) to the set unless the last entry is the same block. */
static void
dmu_ind_set_add (zv_object_t *ob, dmu_ind_set_t *s, zv_dbuf_t *db,
                 uint64_t idx)
{
  if (s->is_n > 0 && s->is_v[s->is_n - 1].dd_idx == idx) {
    ZV_ASSERT3P (s->is_v[s->is_n - 1].dd_db, ==, db);
    zv_dbuf_rele (ob->ob_cache, db);
    return;
  }
  ZV_GROW (s->is_v, s->is_n, s->is_cap, 64);
  s->is_v[s->is_n++] = (dmu_dirty_ind_t) { .dd_db = db, .dd_idx = idx };
}

/* Sort dirty records by block. */
static int
dmu_dr_cmp (const void *a, const void *b)
{
  const zv_dirty_t *x = *(zv_dirty_t * const *) a;
  const zv_dirty_t *y = *(zv_dirty_t * const *) b;

  return x->dr_dbuf->db_blkid < y->dr_dbuf->db_blkid ? -1
    : x->dr_dbuf->db_blkid > y->dr_dbuf->db_blkid;
}

/*
 * Put txg's records in block order.  They come off the object's list
 * newest first, so a sequential writer's are in descending order already
 * and a few streams give long runs of it: reversing costs n steps where
 * the merge sort, each comparison two pointers chased into the dbufs,
 * was the largest share of the sync's bookkeeping for large writes.
 * Anything else is sorted.
 */
static void
dmu_dr_order (zv_dirty_t **drs, size_t n)
{
  size_t i = 1;

  while (i < n && drs[i]->dr_dbuf->db_blkid < drs[i - 1]->dr_dbuf->db_blkid)
    i++;
  if (i == n) {
    for (size_t a = 0, b = n - 1; a < b; a++, b--) {
      zv_dirty_t *t = drs[a];
      drs[a] = drs[b];
      drs[b] = t;
    }
    return;
  }
  qsort (drs, n, sizeof *drs, dmu_dr_cmp);
}

/* Sum of fills under an indirect block (its db_mtx held). */
static uint64_t
dmu_ind_fill (void *data)
{
  const zv_blkptr_t *e = zv_dmu_ind_entries (data);
  uint64_t fill = 0;

  for (uint64_t i = 0; i < F; i++)
    if (!zv_bp_is_hole (&e[i]))
      fill += e[i].bp_fill;
  return fill;
}

/* Where the pointer to (level, idx) lives: the root or a held parent. */
static int
dmu_parent_slot (zv_object_t *ob, unsigned level, uint64_t idx,
                 zv_dbuf_t **pdbp, zv_blkptr_t **slotp)
{
  int r;

  *pdbp = NULL;
  if (level == ob->ob_nlevels - 1u) {
    ZV_VERIFY3U (idx, ==, 0);
    pthread_mutex_lock (&ob->ob_mtx);
    *slotp = &ob->ob_root;
    return 0;
  }
  r = zv_dmu_hold_indirect (ob, level + 1, idx / F, pdbp);
  if (r < 0)
    return r;
  pthread_mutex_lock (&(*pdbp)->db_mtx);
  *slotp = &zv_dmu_ind_entries ((*pdbp)->db_data)[idx % F];
  return 0;
}

/* Unlock what dmu_parent_slot locked; the parent's hold goes to 'keep'
 * (the next level's set) or is dropped. */
static void
dmu_parent_done (zv_object_t *ob, zv_dbuf_t *pdb, uint64_t pidx,
                 dmu_ind_set_t *keep)
{
  if (pdb == NULL) {
    pthread_mutex_unlock (&ob->ob_mtx);
    return;
  }
  pthread_mutex_unlock (&pdb->db_mtx);
  if (keep)
    dmu_ind_set_add (ob, keep, pdb, pidx);
  else
    zv_dbuf_rele (ob->ob_cache, pdb);
}

/*
 * The level-1 parent of a sync's data blocks, taken in block order: one
 * hold on it serves every block of a run under the same parent (up to
 * F of them), instead of a hold, a state check and a release per block.
 * Only the sync changes indirect blocks, and the hold keeps the parent
 * from being evicted, so the parent stays the current one across the run.
 */
typedef struct dmu_l1_cursor {
  zv_dbuf_t *lc_db;             /* held, or NULL */
  uint64_t lc_idx;
} dmu_l1_cursor_t;

/* Give up the cursor's parent: to 'keep' (the next level's set) or not. */
static void
dmu_l1_release (zv_object_t *ob, dmu_l1_cursor_t *c, dmu_ind_set_t *keep)
{
  if (c->lc_db == NULL)
    return;
  if (keep)
    dmu_ind_set_add (ob, keep, c->lc_db, c->lc_idx);
  else
    zv_dbuf_rele (ob->ob_cache, c->lc_db);
  c->lc_db = NULL;
}

/* Lock and point at data block blkid's slot (dmu_parent_slot for level 0
 * through the cursor); dmu_l1_unlock undoes the lock. */
static int
dmu_l1_slot (zv_object_t *ob, dmu_l1_cursor_t *c, uint64_t blkid,
             dmu_ind_set_t *keep, zv_blkptr_t **slotp)
{
  if (ob->ob_nlevels == 1) {
    zv_dbuf_t *none;
    return dmu_parent_slot (ob, 0, blkid, &none, slotp);
  }
  if (c->lc_db == NULL || c->lc_idx != blkid / F) {
    int r;

    dmu_l1_release (ob, c, keep);
    r = zv_dmu_hold_indirect (ob, 1, blkid / F, &c->lc_db);
    if (r < 0) {
      c->lc_db = NULL;
      return r;
    }
    c->lc_idx = blkid / F;
  }
  pthread_mutex_lock (&c->lc_db->db_mtx);
  *slotp = &zv_dmu_ind_entries (c->lc_db->db_data)[blkid % F];
  return 0;
}

static void
dmu_l1_unlock (zv_object_t *ob, dmu_l1_cursor_t *c)
{
  if (ob->ob_nlevels == 1)
    pthread_mutex_unlock (&ob->ob_mtx);
  else
    pthread_mutex_unlock (&c->lc_db->db_mtx);
}

/*
 * Write one level's changed indirect blocks: place each (reading the old
 * pointer from its parent), write them all, then record the sealed
 * pointers in the parents, which become the next level's work.
 */
static int
dmu_sync_indirects (zv_object_t *ob, unsigned level, dmu_ind_set_t *cur,
                    dmu_ind_set_t *next, uint64_t txg)
{
  size_t n = cur->is_n, nw = 0;
  zv_zio_write_t *w = zv_calloc (n ? n : 1, sizeof *w);
  zv_blkptr_t *bps = zv_calloc (n ? n : 1, sizeof *bps);
  int r = 0;

  for (size_t i = 0; i < n && r == 0; i++) {
    zv_dbuf_t *db = cur->is_v[i].dd_db;
    uint64_t idx = cur->is_v[i].dd_idx;
    zv_dbuf_t *pdb;
    zv_blkptr_t *slot, old;
    uint64_t fill;

    pthread_mutex_lock (&db->db_mtx);
    fill = dmu_ind_fill (db->db_data);
    ((zv_mblk_hdr_t *) db->db_data)->mh_txg = txg;
    pthread_mutex_unlock (&db->db_mtx);

    r = dmu_parent_slot (ob, level, idx, &pdb, &slot);
    if (r < 0)
      break;
    old = *slot;
    dmu_parent_done (ob, pdb, idx / F, NULL);
    r = zv_dmu_place (ob, &old, &bps[i], fill == 0, ZV_INDIRECT_SIZE, level,
                   ZV_BT_INDIRECT, fill, ZV_DMU_IND_COPIES, txg);
    if (r == 0 && fill > 0) {
      w[nw].zw_bp = &bps[i];
      w[nw].zw_buf = db->db_data;
      nw++;
    }
  }
  if (r == 0)
    r = zv_zio_write_many (ob->ob_spa, w, nw);
  for (size_t i = 0; i < n && r == 0; i++) {
    uint64_t idx = cur->is_v[i].dd_idx;
    zv_dbuf_t *pdb;
    zv_blkptr_t *slot;

    r = dmu_parent_slot (ob, level, idx, &pdb, &slot);
    if (r < 0)
      break;
    *slot = bps[i];
    dmu_parent_done (ob, pdb, idx / F, next);
  }
  for (size_t i = 0; i < n; i++)
    zv_dbuf_rele (ob->ob_cache, cur->is_v[i].dd_db);
  cur->is_n = 0;
  free (w);
  free (bps);
  return r;
}

/*
 * Merge the partial records of a sync with the content under them
 * (before anything is placed: a block's zeros decide whether it is a
 * hole).  The cache gives what it holds; the other blocks are read in one
 * batch, all in flight together, not one at a time.  A record merged
 * meanwhile by the intent log's in-place write is left alone.
 *
 * An old block that does not read back (a checksum or device error) has
 * no content to merge with.  It is read again (a device error may pass:
 * dmu_merge_read_tries in all), and if it still fails the sync fails:
 * the write was acknowledged, maybe flushed, and only the intent log and
 * this record hold it, so the txg must not commit without it (committing
 * would retire the log records too).  The pool suspends with a message
 * naming the block; reads keep seeing the record.  The next import
 * replays the write, and a block still unreadable then fails that sync
 * again, until the block is repaired or the log is given up
 * (zil_recover=).  Before partial records the write itself failed with
 * EIO; now one bad block under a partial write stops the pool's writes,
 * loudly, rather than drop data it acknowledged.
 */
/* Reads of an old block the sync tries before it gives up (see above). */
static const unsigned dmu_merge_read_tries = 3;

static int
dmu_sync_merge (zv_object_t *ob, zv_dirty_t **drs, size_t n)
{
  zv_dirty_t **need = zv_alloc ((n ? n : 1) * sizeof *need);
  size_t m = 0, nr = 0;
  int r = 0;

  for (size_t i = 0; i < n; i++) {
    zv_dbuf_t *db = drs[i]->dr_dbuf;

    pthread_mutex_lock (&db->db_mtx);
    if (drs[i]->dr_partial) {
      if (db->db_state == ZV_DB_CACHED)
        zv_dmu_merge_locked (ob, drs[i], db->db_data);
      else
        need[m++] = drs[i];
    }
    pthread_mutex_unlock (&db->db_mtx);
  }
  if (m == 0) {
    free (need);
    return 0;
  }

  zv_blkptr_t *bps = zv_calloc (m, sizeof *bps);
  const zv_blkptr_t **rbps = zv_calloc (m, sizeof *rbps);
  void **bufs = zv_calloc (m, sizeof *bufs);
  void **rbufs = zv_calloc (m, sizeof *rbufs);
  char (*names)[96] = zv_calloc (m, sizeof *names);
  const char **whats = zv_calloc (m, sizeof *whats);
  int *res = zv_calloc (m, sizeof *res);
  size_t *at = zv_calloc (m, sizeof *at);

  for (size_t k = 0; k < m && r == 0; k++) {
    uint64_t blkid = need[k]->dr_dbuf->db_blkid;

    r = zv_dmu_lookup_l0 (ob, blkid, &bps[k]);
    if (r < 0 || zv_bp_is_hole (&bps[k]))
      continue;                       /* a hole: the rest is zeros */
    snprintf (names[k], sizeof names[k], "object %" PRIu64 " level 0 "
              "block %" PRIu64, ob->ob_id, blkid);
    if (!zv_bp_size_is (&bps[k], ob->ob_blksz) || bps[k].bp_level != 0) {
      zv_error ("%s: pointer has size %" PRIu32 "/%" PRIu32 " level %u, "
                "expected %" PRIu32 " level 0", names[k], bps[k].bp_psize,
                bps[k].bp_lsize, bps[k].bp_level, ob->ob_blksz);
      r = -EIO;
      break;
    }
    bufs[k] = zv_buf_get (ob->ob_blksz);
    at[nr] = k;
    rbps[nr] = &bps[k];
    rbufs[nr] = bufs[k];
    whats[nr++] = names[k];
  }
  if (r == 0)
    (void) zv_zio_read_many (ob->ob_spa, rbps, rbufs, whats, res, nr);
  for (size_t j = 0; j < nr && r == 0; j++) {
    /* zv_zio_read_many read a failed block twice already. */
    for (unsigned t = 2; res[j] != 0 && t < dmu_merge_read_tries; t++)
      res[j] = zv_zio_read (ob->ob_spa, rbps[j], rbufs[j], whats[j]);
    if (res[j] == 0)
      continue;
    zv_error ("%s: the old content of a block partly written in txg %"
              PRIu64 " cannot be read, so the write cannot be placed: the "
              "txg does not commit and the pool suspends (the write is "
              "kept in the intent log; repair the device, or import with "
              "zil_recover= to give the log up)", whats[j],
              need[at[j]]->dr_txg);
    r = res[j];
  }
  for (size_t k = 0; k < m; k++) {
    zv_dbuf_t *db = need[k]->dr_dbuf;

    if (r == 0) {
      pthread_mutex_lock (&db->db_mtx);
      if (need[k]->dr_partial)
        zv_dmu_merge_locked (ob, need[k], bufs[k]);
      pthread_mutex_unlock (&db->db_mtx);
    }
    zv_buf_put (bufs[k], ob->ob_blksz);
  }
  free (at);
  free (res);
  free (whats);
  free (names);
  free (rbufs);
  free (bufs);
  free (rbps);
  free (bps);
  free (need);
  return r;
}

/* Write txg's dirty blocks of this object and every indirect above. */
int
zv_dmu_sync (zv_object_t *ob, uint64_t txg)
{
  unsigned g = txg & ZV_TXG_MASK;
  zv_dirty_t *list = atomic_exchange_explicit (&ob->ob_dirty[g], NULL,
                                               memory_order_seq_cst);
  zv_dirty_t **drs;
  zv_zio_write_t *w;
  size_t n = 0, nw = 0;
  dmu_ind_set_t sets[2] = { { 0 } };
  dmu_l1_cursor_t cur = { 0 };
  int r = 0;

  for (zv_dirty_t *dr = list; dr; dr = dr->dr_next)
    n++;
  if (n == 0)
    return 0;
  drs = zv_alloc (n * sizeof *drs);
  w = zv_calloc (n, sizeof *w);
  n = 0;
  for (zv_dirty_t *dr = list; dr; dr = dr->dr_next)
    drs[n++] = dr;
  dmu_dr_order (drs, n);

  /* Data blocks: merge the partial ones, place each, record its pointer
   * in the parent. */
  zv_blkptr_t *bps = zv_calloc (n, sizeof *bps);
  /* Compression (compress.c): each data block with content of its own
   * goes through the compressor into a pooled buffer before it is
   * placed, so it is allocated at the size it is stored at; the record
   * keeps the block as written, which the cache takes below. */
  uint32_t comp = zv_dmu_comp_prop (ob);
  bool *hole = zv_calloc (n, sizeof *hole), *adopt = zv_calloc (n,
                                                                sizeof *adopt);
  /* Item i is block drs[i]'s; one with nothing to compress or checksum
   * has no source (compq.h). */
  zv_compq_item_t *items = zv_calloc (n, sizeof *items);
  zv_compq_job_t job;
  size_t nitems = 0;

  r = dmu_sync_merge (ob, drs, n);
  /* The direct writes of txg are all started (their writers held the
   * txg): here they end, before their blocks are adopted. */
  zv_zio_pending_wait_txg (ob->ob_spa, txg);
  /* From here the records are the sync's: the intent log no longer
   * writes them in place; a block it already wrote is adopted. */
  for (size_t i = 0; i < n && r == 0; i++) {
    zv_dirty_t *dr = drs[i];

    ZV_VERIFY3U (dr->dr_txg, ==, txg);
    /* All zeros is a hole (thin), unless a zero kept it allocated. */
    hole[i] = !dr->dr_keep_alloc
      && (dr->dr_data == NULL || zv_is_zero (dr->dr_data, ob->ob_blksz));
    pthread_mutex_lock (&dr->dr_dbuf->db_mtx);
    dr->dr_syncing = true;
    if (dr->dr_pending != NULL) {
      int pr;

      /* Ended above: nothing waits here.  One that failed (logged) is
       * no override any more, and the block is written below. */
      ZV_VERIFY (zv_zio_pending_done (dr->dr_pending, &pr));
      (void) zv_dmu_pending_ok (ob, dr);
    }
    adopt[i] = dr->dr_overridden && !hole[i];
    if (dr->dr_overridden && hole[i])
      zv_dmu_unoverride (ob, dr);
    pthread_mutex_unlock (&dr->dr_dbuf->db_mtx);
    /* Allocated zeros (dr_keep_alloc, no data) stay whole: keeping the
     * space is what they were asked for. */
    if (hole[i] || adopt[i] || dr->dr_data == NULL)
      continue;
    /* A sealed block (dmu_write.c) comes with its checksum, and with
     * nothing to compress when its writer's early abort refused it:
     * nothing for the queue then. */
    if (dr->dr_sealed && (comp == 0 || dr->dr_incomp)) {
      if (comp != 0)
        zv_comp_count_refused ();
      continue;
    }
    items[i] = (zv_compq_item_t) {
      .ci_src = dr->dr_data,
      .ci_dst = NULL,         /* the queue takes one if it compresses */
      .ci_lsize = ob->ob_blksz, .ci_cksum = true,
      /* (a sealed block here is one the early abort let through) */
      .ci_asked = dr->dr_sealed,
      .ci_seed = ob->ob_spa->spa_guid,
    };
    nitems++;
  }
  /* The blocks are compressed (if the property says so) and checksummed
   * by the queue's threads (compq.c) while this thread places and writes
   * them a piece at a time: the writes of one piece overlap the work on
   * the next.  A txg with nothing for the queue is one piece, one batch. */
  bool queued = nitems > 0 && r == 0;
  zv_compq_start (&job, comp, items, queued ? n : 0);
  for (size_t first = 0; first < n && r == 0;) {
    size_t end = queued ? ZV_MIN (n, first + ZV_MAX (1u, zv_compq_piece
                                                     / ob->ob_blksz)) : n;
    size_t nw0 = nw;

    if (queued) {
      zv_compq_wait (&job, end);
      /* What the threads have compressed already joins the piece: each
       * piece waits for its last write, so pieces are only as many as
       * the compression makes necessary (incompressible data, refused
       * by the sample, is all done by the end of the first). */
      while (end < n && atomic_load_explicit (&items[end].ci_done,
                                              memory_order_acquire))
        end++;
    }
    for (size_t i = first; i < end && r == 0; i++) {
      zv_dirty_t *dr = drs[i];
      zv_blkptr_t *slot, old;

      r = dmu_l1_slot (ob, &cur, dr->dr_dbuf->db_blkid, NULL, &slot);
      if (r < 0)
        break;
      old = *slot;
      dmu_l1_unlock (ob, &cur);
      if (adopt[i]) {
        /* Written already (by a direct write, or in place by the
         * intent log): no second write of the data. */
        r = zv_dmu_kill (ob, &old, txg);
        bps[i] = dr->dr_override;
        ob->ob_written += bps[i].bp_psize;
        ob->ob_lwritten += ob->ob_blksz;
        continue;
      }
      /* The queue keeps a buffer only for a block stored compressed. */
      void *cbuf = items[i].ci_dst;
      uint32_t psize = cbuf != NULL ? items[i].ci_psize : ob->ob_blksz;

      ZV_ASSERT (psize > 0);
      r = zv_dmu_place (ob, &old, &bps[i], hole[i], psize, 0, ob->ob_type, 1,
                     1, txg);
      if (r == 0 && !hole[i]) {
        bps[i].bp_lsize = ob->ob_blksz;
        bps[i].bp_comp = cbuf ? (uint8_t) ZV_COMP_PROP_ALG (comp) : 0;
        w[nw].zw_bp = &bps[i];
        w[nw].zw_buf = cbuf ? cbuf : dr->dr_data ? dr->dr_data : zv_dmu_zeros;
        /* The checksum the queue took of what is stored, or the
         * writer's (the seal), or none: zio takes it then. */
        w[nw].zw_cksum = items[i].ci_src != NULL ? &items[i].ci_sum
          : cbuf == NULL && dr->dr_sealed ? &dr->dr_cksum : NULL;
        nw++;
      }
    }
    if (r == 0 && nw > nw0)
      r = zv_zio_write_many (ob->ob_spa, w + nw0, nw - nw0);
    /* The piece is on disk (or failed): its compressed copies go back
     * to the buffer cache now, for the next pieces' blocks, instead of
     * a txg's worth of them being held to the end. */
    for (size_t i = first; i < end; i++) {
      zv_buf_put (items[i].ci_dst, ob->ob_blksz);
      items[i].ci_dst = NULL;
    }
    first = end;
  }
  /* No thread touches the buffers after this, whatever happened. */
  zv_compq_finish (&job);
  dmu_l1_release (ob, &cur, NULL);
  /* Reservations of txg are now real allocations. */
  zv_alloc_unreserve (ob->ob_spa->spa_alloc,
                      atomic_exchange_explicit (&ob->ob_reserved[g], 0,
                                                memory_order_seq_cst));
  free (hole);
  free (adopt);
  for (size_t i = 0; i < n; i++)
    zv_buf_put (items[i].ci_dst, ob->ob_blksz);
  free (items);
  /* Record the sealed pointers (checksums now set) in the parents. */
  for (size_t i = 0; i < n && r == 0; i++) {
    zv_blkptr_t *slot;

    r = dmu_l1_slot (ob, &cur, drs[i]->dr_dbuf->db_blkid, &sets[1], &slot);
    if (r < 0)
      break;
    *slot = bps[i];
    dmu_l1_unlock (ob, &cur);
  }
  dmu_l1_release (ob, &cur, &sets[1]);
  /* Indirect levels, bottom up. */
  for (unsigned level = 1; level < ob->ob_nlevels && r == 0; level++)
    r = dmu_sync_indirects (ob, level, &sets[level % 2],
                            &sets[(level + 1) % 2], txg);

  /* Retire the records: the synced content is what they held.  On error
   * the pool is suspended (nothing more is written) and T's content is in
   * memory only: the records stay dirty, back on T's list, so reads keep
   * seeing them until the export discards them
   * (zv_dmu_object_discard_dirty).  Handed to the cache as if synced,
   * they could be evicted, and a read through the tree would then find
   * the old block: stale data, neither the write nor an error. */
  if (r < 0) {
    atomic_store_explicit (&ob->ob_dirty[g], list, memory_order_seq_cst);
    n = 0;
  }
  for (size_t i = 0; i < n; i++) {
    zv_dirty_t *dr = drs[i];
    zv_dbuf_t *db = dr->dr_dbuf;
    void *data = dr->dr_data;

    pthread_mutex_lock (&db->db_mtx);
    /* The merge completed every partial record, or the sync failed. */
    ZV_ASSERT (!dr->dr_partial);
    if (data && zv_bp_is_hole (&bps[i])) {
      zv_buf_put (data, ob->ob_blksz);
      data = NULL;
    }
    db->db_dirty[g] = NULL;
    if (data == NULL && !zv_bp_is_hole (&bps[i])) {
      /* Allocated zeros without a buffer: a cached NULL would say hole,
       * so the content is left for a read to fetch from disk. */
      if (db->db_data)
        zv_buf_put (zv_dbuf_take_data (ob->ob_cache, db), ob->ob_blksz);
      db->db_state = ZV_DB_UNCACHED;
    }
    else
      zv_dbuf_set_data (ob->ob_cache, db, data);
    pthread_mutex_unlock (&db->db_mtx);
    zv_dbuf_rele (ob->ob_cache, db);
    zv_dmu_dr_free (dr);
  }
  for (unsigned s = 0; s < 2; s++) {
    for (size_t i = 0; i < sets[s].is_n; i++)
      zv_dbuf_rele (ob->ob_cache, sets[s].is_v[i].dd_db);
    free (sets[s].is_v);
  }
  free (bps);
  free (drs);
  free (w);
  return r;
}
