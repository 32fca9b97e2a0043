/*
 * dmu_write.c: the object layer's changes in open context: dirty records
 * and their reservations, writes (the seal, direct writes), frees and
 * zeroes, and the intent log's in-place write of a dirty block.  The
 * records, the cache and the locking are dmu.c's theory comment's; the
 * sync that retires the records is dmu_sync.c.
 *
 * Theory.  A change takes the space of every block it dirties before it
 * touches any (dmu_prepay), so it is applied whole or, on ENOSPC, not at
 * all; each block then gets its record for the txg under its db_mtx
 * (dmu_dirty_locked), its data copied in, and, when the write filled it,
 * the writer's checksum and compression verdict (the seal).  Runs of
 * whole blocks go to the devices at once (dmu_write_direct) and their
 * records carry the blocks written, which the sync adopts.  Lock order:
 * a data block's db_mtx, then what dmu.c's reads take under it (the
 * indirect blocks' db_mtx, ob_mtx); a direct write holds several data
 * blocks' db_mtx, always taken in block order, and nothing else does.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dmu_impl.h"
#include "tunable.h"

/*
 * A record the intent log had written in place changes again: the block
 * written is no longer its content.  It is freed in the record's own txg,
 * but deferred, never at once although it was born in that txg: a log
 * record may point at it until txg is on disk (replay follows it only if
 * txg never made it, and then claims the block back).  Deferred into txg
 * itself, the free is on disk exactly when txg is; deferring it to txg + 1
 * leaked the block when the power went between the two.  db_mtx held.
 */
void
zv_dmu_unoverride (zv_object_t *ob, zv_dirty_t *dr)
{
  if (!dr->dr_overridden)
    return;
  /* A direct write still on its way writes a block nobody will read:
   * its txg's sync waits for it before the space can be reused. */
  zv_zio_pending_rele (dr->dr_pending);
  dr->dr_pending = NULL;
  zv_zio_free_bp_deferred (ob->ob_spa, &dr->dr_override, dr->dr_txg);
  dr->dr_overridden = false;
  memset (&dr->dr_override, 0, sizeof dr->dr_override);
}

/*
 * Reserve 'bytes' for txg (zv_alloc_reserve_held), counted in ob_reserved
 * so the sync of txg turns it into its allocation.  What other volumes'
 * reservations hold stays free: the lock-free bound first, the exact
 * amount only when the bound refuses.  A write the object's own
 * reservation covers may take the frees on their way back (alloc.c).
 */
static int
dmu_reserve (zv_object_t *ob, uint64_t txg, uint64_t bytes)
{
  zv_alloc_t *a = ob->ob_spa->spa_alloc;
  uint64_t own = 0;
  uint64_t held = ob->ob_held_fn
    ? ob->ob_held_fn (ob->ob_held_arg, false, &own) : 0;
  int r = zv_alloc_reserve_held (a, bytes, held, own >= bytes);

  if (r == -ENOSPC && held > 0) {
    held = ob->ob_held_fn (ob->ob_held_arg, true, &own);
    r = zv_alloc_reserve_held (a, bytes, held, own >= bytes);
  }
  if (r == 0)
    atomic_fetch_add_explicit (&ob->ob_reserved[txg & ZV_TXG_MASK], bytes,
                               memory_order_seq_cst);
  return r;
}

/* Give back what dmu_reserve took. */
static void
dmu_unreserve (zv_object_t *ob, uint64_t txg, uint64_t bytes)
{
  zv_alloc_unreserve (ob->ob_spa->spa_alloc, bytes);
  atomic_fetch_sub_explicit (&ob->ob_reserved[txg & ZV_TXG_MASK], bytes,
                             memory_order_seq_cst);
}

/*
 * One block's reservation, out of the change's prepaid extent
 * (dmu_prepay), or alone if that ran out: the count of the blocks that
 * need one is kept true only by the caller's range lock (zvol.c's).
 */
static int
dmu_reserve_block (zv_object_t *ob, uint64_t txg, uint64_t *prepaid)
{
  if (*prepaid < ob->ob_blksz)
    return dmu_reserve (ob, txg, ob->ob_blksz);
  *prepaid -= ob->ob_blksz;
  return 0;
}

/*
 * The dirty record of db for txg, created if needed (db_mtx held).  A
 * record for a write that covers the whole block needs no old content.
 * A new record for a write takes its block's reservation out of
 * *prepaid (a free's takes none: prepaid may be NULL then).  A new
 * record pins its dbuf with the caller's hold (*keptp true: the
 * caller must not release it), which saves a hold and a release, each a
 * shard lock, per new record.
 */
static int
dmu_dirty_locked (zv_object_t *ob, zv_dbuf_t *db, uint64_t txg,
                  bool whole, bool aligned, bool for_free, uint64_t *prepaid,
                  zv_dirty_t **drp, bool *keptp)
{
  zv_dirty_t *dr = db->db_dirty[txg & ZV_TXG_MASK];
  zv_dirty_t *prev;
  int r;

  *keptp = false;
  if (dr) {
    ZV_VERIFY3U (dr->dr_txg, ==, txg);
    ZV_VERIFY (!dr->dr_syncing);
    zv_dmu_unoverride (ob, dr);
    *drp = dr;
    return 0;
  }
  prev = zv_dbuf_newest_dirty (db);
  if (prev)
    ZV_VERIFY3U (prev->dr_txg, <, txg);
  if (!for_free && (r = dmu_reserve_block (ob, txg, prepaid)) < 0)
    return r;
  dr = zv_dmu_dr_alloc ();
  dr->dr_txg = txg;
  dr->dr_dbuf = db;
  if (!for_free) {
    /* A grain-aligned write of an uncached block reads nothing: its
     * record is partial, merged with the old content at the sync. */
    bool partial = !whole && aligned && prev == NULL
      && db->db_state != ZV_DB_CACHED;
    if (!whole && !partial && prev == NULL) {
      r = zv_dmu_fill_locked (ob, db);
      if (r < 0) {
        zv_dmu_dr_free (dr);
        *prepaid += ob->ob_blksz;
        return r;
      }
    }
    if (prev == NULL && db->db_state == ZV_DB_CACHED && db->db_data)
      /* Nothing older needs the synced content: the record takes the
       * cached block itself, not a copy (its sync gives it back). */
      dr->dr_data = zv_dbuf_take_data (ob->ob_cache, db);
    else if (whole || partial) {
      /* A whole-block write needs no old content and no zeroing; a
       * partial one fills in its grains (dr_valid starts empty). */
      dr->dr_data = zv_buf_get (ob->ob_blksz);
      dr->dr_partial = partial;
    }
    else if (prev && prev->dr_data) {
      /* prev may be syncing: copy on write.  A partial prev leaves this
       * record partial over the same content under both. */
      dr->dr_data = zv_buf_get (ob->ob_blksz);
      memcpy (dr->dr_data, prev->dr_data, ob->ob_blksz);
      dr->dr_partial = prev->dr_partial;
      memcpy (dr->dr_valid, prev->dr_valid, sizeof dr->dr_valid);
    }
    else
      dr->dr_data = zv_buf_alloc (ob->ob_blksz);
  }
  db->db_dirty[txg & ZV_TXG_MASK] = dr;
  *keptp = true;                /* the record pins its dbuf */
  /* Lock-free push onto the object's list for txg. */
  _Atomic (zv_dirty_t *) *head = &ob->ob_dirty[txg & ZV_TXG_MASK];
  zv_dirty_t *old = atomic_load_explicit (head, memory_order_relaxed);
  do
    dr->dr_next = old;
  while (!atomic_compare_exchange_weak_explicit (head, &old, dr,
                                                 memory_order_release,
                                                 memory_order_relaxed));
  *drp = dr;
  return 0;
}

/* Does a write or zero of db in txg take a reservation: it has no
 * record of txg, or one of a free (db_mtx held)? */
static bool
dmu_needs_reserve (const zv_dbuf_t *db, uint64_t txg)
{
  const zv_dirty_t *dr = db->db_dirty[txg & ZV_TXG_MASK];

  return dr == NULL || (dr->dr_data == NULL && !dr->dr_keep_alloc);
}

/*
 * Reserve, before a write or zero of [off, off + len) in txg (len > 0)
 * changes anything, the space of every block of the range that will
 * take some (*prepaid: the bytes; each block takes its share with
 * dmu_reserve_block, and what is left goes back at the end), so that the
 * change gets all its space or fails having changed nothing.  A change
 * cut off halfway left blocks dirty that its retry, after a sync,
 * rewrote in new space while their old copies stayed allocated two txgs
 * more: near full, retries that ate the space they waited for.  Every
 * block is reserved first, without a look (the common case, one
 * reservation); only when that fails are the blocks looked up, since a
 * block dirty in txg already takes nothing.
 */
static int
dmu_prepay (zv_object_t *ob, uint64_t off, size_t len, uint64_t txg,
            uint64_t *prepaid)
{
  uint64_t first = off / ob->ob_blksz, last = (off + len - 1) / ob->ob_blksz;
  int r;

  *prepaid = (last - first + 1) * ob->ob_blksz;
  r = dmu_reserve (ob, txg, *prepaid);
  if (r != -ENOSPC)
    return r;
  *prepaid = 0;
  for (uint64_t b = first; b <= last; b++) {
    zv_dbuf_t *db = zv_dbuf_find (ob->ob_cache, ob, 0, b);
    bool need = true;

    if (db != NULL) {
      pthread_mutex_lock (&db->db_mtx);
      need = dmu_needs_reserve (db, txg);
      pthread_mutex_unlock (&db->db_mtx);
      zv_dbuf_rele (ob->ob_cache, db);
    }
    *prepaid += need ? ob->ob_blksz : 0;
  }
  return *prepaid == 0 ? 0 : dmu_reserve (ob, txg, *prepaid);
}

/*
 * A write that filled the whole block (from 'whole', the caller's copy of
 * its bytes; NULL: any other change) seals its record: the checksum and
 * the early abort's verdict are taken now, from the writer's buffer,
 * which is in this processor's cache, and the sync (which meets the
 * block cold, a txg later) only hands it to the device.  Any other
 * change of the record's data breaks the seal (db_mtx held).  Without
 * 'sum' the checksum is left to the caller, who takes it or breaks the
 * seal before it lets go of db_mtx (a direct write that compresses the
 * block: its checksum is of what is stored).
 */
static void
dmu_seal_locked (zv_object_t *ob, zv_dirty_t *dr, const void *whole,
                 bool sum)
{
  uint32_t comp;

  dr->dr_sealed = whole != NULL && !dr->dr_partial && dr->dr_data != NULL;
  dr->dr_incomp = false;
  if (!dr->dr_sealed)
    return;
  if (sum)
    zv_cksum_compute (whole, ob->ob_blksz, ob->ob_spa->spa_guid,
                      &dr->dr_cksum);
  comp = zv_dmu_comp_prop (ob);
  if (comp != 0)
    dr->dr_incomp = zv_comp_refuses (comp, whole, ob->ob_blksz);
}

/* Copy n bytes of 'in' into block db at boff, dirtying it in txg
 * (db_mtx held), its reservation out of *prepaid (dmu_prepay); *drp
 * gets the record, *keptp as dmu_dirty_locked; 'sum' as
 * dmu_seal_locked's. */
static int
dmu_write_block_locked (zv_object_t *ob, zv_dbuf_t *db, uint64_t txg,
                        uint32_t boff, size_t n, const uint8_t *in,
                        uint64_t *prepaid, zv_dirty_t **drp, bool *keptp,
                        bool sum)
{
  bool aligned = zv_dmu_grain_aligned (boff, n);
  zv_dirty_t *dr;
  int r;

  r = dmu_dirty_locked (ob, db, txg, n == ob->ob_blksz, aligned, false,
                        prepaid, &dr, keptp);
  /* A write that is not grain-aligned cannot be told apart in the
   * mask: the block is read and merged first. */
  if (r == 0 && dr->dr_data && dr->dr_partial && !aligned)
    r = zv_dmu_resolve_locked (ob, db, dr);
  if (r == 0 && dr->dr_data == NULL) {
    /* Freed or zeroed earlier in this txg: the rest of the block is
     * zeros.  A zeroed one (kept allocated) is reserved already. */
    if (!dr->dr_keep_alloc)
      r = dmu_reserve_block (ob, txg, prepaid);
    if (r == 0)
      dr->dr_data = zv_buf_alloc (ob->ob_blksz);
  }
  if (r < 0)
    return r;
  /* A whole block is not read again before the sync writes it
   * (dmu_seal_locked reads the source, in this processor's cache
   * already): its copy bypasses the caches. */
  if (n == ob->ob_blksz)
    zv_copy_stream (dr->dr_data, in, n);
  else
    memcpy ((uint8_t *) dr->dr_data + boff, in, n);
  if (dr->dr_partial)
    zv_dmu_mask_set (ob, dr, boff, n);
  /* A write decides the block's fate as any write does: all zeros
   * become a hole at the sync.  Only a zero keeps zeros allocated. */
  dr->dr_keep_alloc = false;
  dmu_seal_locked (ob, dr, n == ob->ob_blksz ? in : NULL, sum);
  *drp = dr;
  return 0;
}

/* Bytes of whole blocks from which a write goes to the device at once
 * (dmu_write_direct; 0: never, every block waits for its txg's sync). */
static uint64_t zv_dmu_direct_write_min = 64 * 1024;

/* Blocks written directly in one device batch: their db_mtx are held
 * together (ThreadSanitizer's deadlock detector gives up past 64 locks
 * held at once). */
#define DMU_DIRECT_MAX 32u

/*
 * Direct writes.  A run of whole blocks is dirtied as any write's, and
 * then, while the writer still holds the txg and the blocks' db_mtx
 * (taken in block order; no other path holds two data blocks' at once),
 * placed in open context (zv_zio_alloc_bp_open, as the intent log's
 * in-place blocks) and its device writes started in one batch from the
 * records' buffers with the writer's checksums (the seal), and not
 * waited for (zv_zio_write_start): the writer returns while they run.
 * Each record then carries its block as an override and the writes'
 * pending (dr_pending): the txg sync waits for its txg's pendings,
 * adopts each block written (dmu_sync.c) and writes only the indirect
 * blocks above.  So the data goes to the device as it arrives, from
 * many writers' threads at once, instead of in one burst from the sync
 * thread, which a sequential writer kept busy end to end (sync-bound:
 * each txg closed the moment the last one ended); and no writer sleeps
 * for its device write and is woken again (a sleep and a wake-up per
 * request cost more than the write's submission on a virtual machine:
 * 16 threads each writing 128 KiB at a time took 100 us of CPU a write,
 * one thread with 16 in flight 15).  The record keeps its data, which
 * reads take and the cache takes at the sync as before; its buffer is
 * the write's source, so a later change of the block, which changes the
 * buffer in place, first gives the block written back
 * (zv_dmu_unoverride; the write still lands there, on space nobody can
 * have until the txg has synced, and the sync waits for every write of
 * its txg).  Nothing changes for durability: the block is free on disk
 * until its txg commits, and a commit that needs the write waits for it
 * and logs the pointer (zv_dmu_sync_block finds the override; one
 * stored compressed it drops, since the log names whole blocks only).
 * A block the early abort does not refuse is compressed here, from the
 * writer's buffer; the compressed copy goes back to the buffer cache
 * when its write ends.  Left to the sync: all zeros (a hole), or any
 * block the allocation or the write fails for (the sync places and
 * writes it as any other; a write that fails after it started is found
 * by the sync, which then does the same).
 * Only on local devices: see dmu_write_prepaid.
 */
static int
dmu_write_direct (zv_object_t *ob, uint64_t first, size_t nb,
                  const uint8_t *in, uint64_t txg, uint64_t *prepaid)
{
  const uint32_t bs = ob->ob_blksz;
  zv_dbuf_t *dbs[DMU_DIRECT_MAX];
  zv_dirty_t *drs[DMU_DIRECT_MAX];
  zv_blkptr_t bps[DMU_DIRECT_MAX];
  zv_zio_write_t w[DMU_DIRECT_MAX];
  void *cbufs[DMU_DIRECT_MAX];
  size_t at[DMU_DIRECT_MAX], held = 0, done = 0, m = 0;
  uint32_t psizes[DMU_DIRECT_MAX];
  bool kept[DMU_DIRECT_MAX], summed[DMU_DIRECT_MAX];
  uint32_t comp = zv_dmu_comp_prop (ob);
  int r = 0;

  ZV_VERIFY (nb >= 1 && nb <= DMU_DIRECT_MAX);
  for (size_t j = 0; j < nb; j++) {
    dbs[j] = zv_dbuf_hold (ob->ob_cache, ob, 0, first + j, bs);
    pthread_mutex_lock (&dbs[j]->db_mtx);
    held = j + 1;
    /* On a compressed volume the seal's checksum waits: a block
     * stored compressed is checksummed as stored, and one of the whole
     * block would be thrown away. */
    r = dmu_write_block_locked (ob, dbs[j], txg, 0, bs, in + j * bs,
                                prepaid, &drs[j], &kept[j], comp == 0);
    if (r < 0)
      break;
    summed[j] = comp == 0;
    done = j + 1;
  }
  /* Compressed here, from the writer's buffer (in this processor's
   * cache), not by the sync's workers a txg later; all of the run first,
   * then placed in one go: allocations spread between compressions let
   * other writers' blocks in between, and the run's blocks, no longer
   * side by side, went out in writes of a third of the size. */
  for (size_t j = 0; j < nb && r == 0; j++) {
    zv_dirty_t *dr = drs[j];

    if (!dr->dr_sealed || zv_is_zero (in + j * bs, bs))
      continue;
    cbufs[m] = NULL;
    psizes[m] = bs;
    if (comp != 0 && !dr->dr_incomp) {
      cbufs[m] = zv_buf_get (bs);
      psizes[m] = zv_comp_compress_asked (comp, in + j * bs, bs,
                                          cbufs[m]);
      if (psizes[m] == 0) {
        zv_buf_put (cbufs[m], bs);
        cbufs[m] = NULL;
        psizes[m] = bs;
      }
    }
    /* Stored as it is: the seal's checksum after all, from the same
     * buffer, still in this processor's cache. */
    if (cbufs[m] == NULL && !summed[j]) {
      zv_cksum_compute (in + j * bs, bs, ob->ob_spa->spa_guid,
                        &dr->dr_cksum);
      summed[j] = true;
    }
    at[m++] = j;
  }
  for (size_t k = 0; k < m; k++) {
    zv_dirty_t *dr = drs[at[k]];

    memset (&bps[k], 0, sizeof bps[k]);
    if (zv_zio_alloc_bp_open (ob->ob_spa, &bps[k], psizes[k], txg) < 0) {
      /* The sync places this one and what is left. */
      for (size_t l = k; l < m; l++)
        zv_buf_put (cbufs[l], bs);
      m = k;
      break;
    }
    bps[k].bp_lsize = bs;
    bps[k].bp_birth = txg;
    bps[k].bp_type = ob->ob_type;
    bps[k].bp_level = 0;
    bps[k].bp_fill = 1;
    bps[k].bp_comp = cbufs[k] ? (uint8_t) ZV_COMP_PROP_ALG (comp) : 0;
    w[k] = (zv_zio_write_t) {
      .zw_bp = &bps[k], .zw_buf = cbufs[k] ? cbufs[k] : dr->dr_data,
      .zw_cksum = cbufs[k] ? NULL : &dr->dr_cksum,
    };
  }
  /* Started, not waited for: the records keep their data, which reads
   * take, and the sync (or a commit that names a block) waits; the
   * compressed copies go back to the buffer cache when written. */
  zv_zio_pending_t *pend = NULL;
  void *owned[DMU_DIRECT_MAX];
  size_t nowned = 0;

  for (size_t k = 0; k < m; k++)
    if (cbufs[k] != NULL)
      owned[nowned++] = cbufs[k];
  zv_zio_reap_some ();
  if (m > 0 && zv_zio_write_start (ob->ob_spa, txg, w, m, owned, nowned, bs,
                                   &pend) == 0) {
    for (size_t k = 0; k < m; k++) {
      zv_dirty_t *dr = drs[at[k]];

      dr->dr_override = bps[k];
      dr->dr_overridden = true;
      if (pend != NULL) {
        zv_zio_pending_hold (pend);
        dr->dr_pending = pend;
      }
      if (comp != 0 && dr->dr_incomp)
        zv_comp_count_refused ();       /* the sync meets no item for it */
    }
    atomic_fetch_add_explicit (&ob->ob_direct, m, memory_order_relaxed);
  }
  else {
    /* Not written (the write logged why): the sync writes these blocks
     * as any other.  Deferred into txg, like an unoverride's free. */
    for (size_t k = 0; k < m; k++)
      zv_zio_free_bp_deferred (ob->ob_spa, &bps[k], txg);
  }
  zv_zio_pending_rele (pend);
  /* A seal without its checksum is no seal: the sync (or a commit that
   * wants the block in place) takes the checksum then. */
  for (size_t j = 0; j < done; j++)
    if (!summed[j])
      drs[j]->dr_sealed = false;
  for (size_t j = held; j-- > 0;) {
    pthread_mutex_unlock (&dbs[j]->db_mtx);
    if (!kept[j])
      zv_dbuf_rele (ob->ob_cache, dbs[j]);
  }
  return r;
}

/* Copy into blocks, dirtying them in txg; the new records' reservations
 * come out of *prepaid (dmu_prepay). */
static int
dmu_write_prepaid (zv_object_t *ob, uint64_t off, size_t len,
                   const void *buf, uint64_t txg, uint64_t *prepaid)
{
  const uint8_t *in = buf;
  uint64_t dmin = __atomic_load_n (&zv_dmu_direct_write_min,
                                   __ATOMIC_RELAXED);

  /* Not on RADOS devices (a pool mixes no kinds): there a write is a
   * round trip to the cluster, which a write nobody asked to be durable
   * would wait for (through an OSD's outage too) instead of memory, and
   * the sync's large batches are what the cluster takes best. */
  if (zv_dev_is_rados (ob->ob_spa->spa_devs[0]))
    dmin = 0;

  while (len > 0) {
    uint64_t blkid = off / ob->ob_blksz;
    uint32_t boff = off % ob->ob_blksz;
    size_t n = ZV_MIN (len, (size_t) (ob->ob_blksz - boff));
    zv_dbuf_t *db;
    zv_dirty_t *dr;
    bool kept;
    int r;

    /* Whole blocks, enough of them: straight to the device. */
    if (boff == 0 && dmin > 0 && len >= ZV_MAX (dmin, (uint64_t) ob->ob_blksz)
        && len >= 2 * (size_t) ob->ob_blksz) {
      size_t nb = ZV_MIN (len / ob->ob_blksz, (size_t) DMU_DIRECT_MAX);

      r = dmu_write_direct (ob, blkid, nb, in, txg, prepaid);
      if (r < 0)
        return r;
      n = nb * ob->ob_blksz;
    }
    else {
      db = zv_dbuf_hold (ob->ob_cache, ob, 0, blkid, ob->ob_blksz);
      pthread_mutex_lock (&db->db_mtx);
      r = dmu_write_block_locked (ob, db, txg, boff, n, in, prepaid, &dr,
                                  &kept, true);
      pthread_mutex_unlock (&db->db_mtx);
      if (!kept)
        zv_dbuf_rele (ob->ob_cache, db);
      if (r < 0)
        return r;
    }
    in += n;
    off += n;
    len -= n;
  }
  return 0;
}

int
zv_dmu_write_by_dnode (zv_object_t *ob, uint64_t off, size_t len,
                       const void *buf, uint64_t txg, uint64_t *dirtied)
{
  uint64_t prepaid, paid;
  int r;

  ZV_VERIFY (off + len <= ob->ob_nblocks * ob->ob_blksz);
  if (dirtied)
    *dirtied = 0;
  if (len == 0)
    return 0;
  r = zv_dmu_check_path (ob, off / ob->ob_blksz, (off + len - 1) / ob->ob_blksz);
  if (r < 0)
    return r;
  if ((r = dmu_prepay (ob, off, len, txg, &prepaid)) < 0)
    return r;
  paid = prepaid;
  r = dmu_write_prepaid (ob, off, len, buf, txg, &prepaid);
  /* Every new record took a block's worth out of the prepaid extent
   * (dmu_reserve_block; one the count missed, with no range lock to keep
   * it true, reserved its own and is not counted); what is left, blocks
   * dirty in txg already did not need. */
  ZV_ASSERT3U (prepaid, <=, paid);
  if (dirtied)
    *dirtied = paid - prepaid;
  if (prepaid > 0)
    dmu_unreserve (ob, txg, prepaid);
  return r;
}

/* Free whole blocks in txg (no reservation: frees release space). */
int
zv_dmu_free_by_dnode (zv_object_t *ob, uint64_t blkid, uint64_t n,
                      uint64_t txg)
{
  ZV_VERIFY (blkid + n <= ob->ob_nblocks);
  for (uint64_t b = blkid; b < blkid + n; b++) {
    zv_dbuf_t *db = zv_dbuf_hold (ob->ob_cache, ob, 0, b, ob->ob_blksz);
    zv_dirty_t *dr = NULL;
    bool kept = false;
    int r = 0;

    pthread_mutex_lock (&db->db_mtx);
    if (db->db_dirty[txg & ZV_TXG_MASK] == NULL
        && zv_dbuf_newest_dirty (db) == NULL) {
      /* Nothing to free if it already is a hole on disk. */
      if (db->db_state == ZV_DB_CACHED) {
        if (db->db_data == NULL)
          goto next;
      }
      else {
        zv_blkptr_t bp;
        r = zv_dmu_lookup_l0 (ob, b, &bp);
        if (r < 0)
          goto next;
        if (zv_bp_is_hole (&bp)) {
          zv_dbuf_set_data (ob->ob_cache, db, NULL);
          goto next;
        }
      }
    }
    r = dmu_dirty_locked (ob, db, txg, true, true, true, NULL, &dr, &kept);
    if (r == 0) {
      zv_dmu_unoverride (ob, dr);
      dr->dr_keep_alloc = false;
    }
    if (r == 0 && dr->dr_data) {
      zv_buf_put (dr->dr_data, ob->ob_blksz);
      dr->dr_data = NULL;
      dr->dr_partial = false;
      dr->dr_sealed = false;
    }
  next:
    pthread_mutex_unlock (&db->db_mtx);
    if (!kept)
      zv_dbuf_rele (ob->ob_cache, db);
    if (r < 0)
      return r;
  }
  return 0;
}

/* After a write of zeros into part of a block in txg (the caller still
 * holds txg and the block's range), keep the block allocated. */
static void
dmu_keep_alloc (zv_object_t *ob, uint64_t blkid, uint64_t txg)
{
  zv_dbuf_t *db = zv_dbuf_find (ob->ob_cache, ob, 0, blkid);
  zv_dirty_t *dr;

  ZV_VERIFY (db != NULL);           /* its dirty record holds it */
  pthread_mutex_lock (&db->db_mtx);
  dr = db->db_dirty[txg & ZV_TXG_MASK];
  ZV_VERIFY (dr != NULL && dr->dr_txg == txg);
  dr->dr_keep_alloc = true;
  pthread_mutex_unlock (&db->db_mtx);
  zv_dbuf_rele (ob->ob_cache, db);
}

/*
 * Zero, keeping every block allocated (see dmu.h).  A whole block's
 * record drops whatever data it had: the sync writes it from zv_dmu_zeros,
 * so memory does not grow with the range.  Every block the range touches
 * is reserved first, as for a write; a block takes its share unless its
 * record of this txg did already (one with data, or zeroed already),
 * and the rest goes back at the end.
 */
int
zv_dmu_zero_by_dnode (zv_object_t *ob, uint64_t off, size_t len,
                      uint64_t txg)
{
  uint64_t prepaid;
  int r = 0;

  ZV_VERIFY (off + len <= ob->ob_nblocks * ob->ob_blksz);
  if (len == 0)
    return 0;
  r = zv_dmu_check_path (ob, off / ob->ob_blksz, (off + len - 1) / ob->ob_blksz);
  if (r < 0)
    return r;
  if ((r = dmu_prepay (ob, off, len, txg, &prepaid)) < 0)
    return r;
  while (len > 0 && r == 0) {
    uint64_t blkid = off / ob->ob_blksz;
    uint32_t boff = off % ob->ob_blksz;
    size_t n = ZV_MIN (len, (size_t) (ob->ob_blksz - boff));
    zv_dbuf_t *db;
    zv_dirty_t *dr;
    bool kept = false;

    if (n < ob->ob_blksz) {
      r = dmu_write_prepaid (ob, off, n, zv_dmu_zeros, txg, &prepaid);
      if (r == 0)
        dmu_keep_alloc (ob, blkid, txg);
      off += n;
      len -= n;
      continue;
    }
    db = zv_dbuf_hold (ob->ob_cache, ob, 0, blkid, ob->ob_blksz);
    pthread_mutex_lock (&db->db_mtx);
    if (dmu_needs_reserve (db, txg))
      r = dmu_reserve_block (ob, txg, &prepaid);
    if (r == 0) {
      /* The record of a free is what a whole zeroed block needs: no old
       * content, no buffer, and no reservation beyond the one above. */
      r = dmu_dirty_locked (ob, db, txg, true, true, true, NULL, &dr, &kept);
      ZV_VERIFY3U (r, ==, 0);
      if (dr->dr_data) {
        zv_buf_put (dr->dr_data, ob->ob_blksz);
        dr->dr_data = NULL;
        dr->dr_partial = false;
        dr->dr_sealed = false;
      }
      dr->dr_keep_alloc = true;
    }
    pthread_mutex_unlock (&db->db_mtx);
    if (!kept)
      zv_dbuf_rele (ob->ob_cache, db);
    off += n;
    len -= n;
  }
  if (prepaid > 0)
    dmu_unreserve (ob, txg, prepaid);
  return r;
}

/* (dmu_impl.h) The write's failure was logged when it was reaped; the
 * record is then as if never written directly. */
bool
zv_dmu_pending_ok (zv_object_t *ob, zv_dirty_t *dr)
{
  if (dr->dr_pending == NULL)
    return true;
  if (zv_zio_pending_wait (dr->dr_pending) < 0) {
    zv_dmu_unoverride (ob, dr);
    return false;
  }
  zv_zio_pending_rele (dr->dr_pending);
  dr->dr_pending = NULL;
  return true;
}

/* Hole as a read would see it now. */

/* Write a dirty block in place for the intent log (see dmu.h). */
int
zv_dmu_sync_block (zv_object_t *ob, uint64_t txg, uint64_t blkid,
                   zv_blkptr_t *bp)
{
  zv_dbuf_t *db;
  zv_dirty_t *dr;
  int r = 0;

  if (blkid >= ob->ob_nblocks)
    return -EINVAL;
  db = zv_dbuf_find (ob->ob_cache, ob, 0, blkid);
  if (db == NULL)
    return -ENOENT;               /* not dirty: its txg synced */
  pthread_mutex_lock (&db->db_mtx);
  dr = db->db_dirty[txg & ZV_TXG_MASK];
  if (dr == NULL || dr->dr_txg != txg || dr->dr_data == NULL)
    r = -ENOENT;
  else if (dr->dr_syncing)
    r = -EAGAIN;
  else if (dr->dr_overridden && dr->dr_override.bp_comp == 0
           && zv_dmu_pending_ok (ob, dr))
    *bp = dr->dr_override;
  else if ((r = zv_dmu_resolve_locked (ob, db, dr)) == 0) {
    /* A block a direct write stored compressed is no in-place block a
     * log record may name (replay takes whole uncompressed blocks only):
     * it goes, and the block is written again, whole. */
    zv_dmu_unoverride (ob, dr);
    /* (A partial record was merged first: the block goes whole.) */
    zv_blkptr_t nbp;
    memset (&nbp, 0, sizeof nbp);
    /* The data is held still by db_mtx while it goes to disk. */
    r = zv_zio_alloc_bp_open (ob->ob_spa, &nbp, ob->ob_blksz, txg);
    if (r == 0) {
      zv_zio_write_t w = {
        .zw_bp = &nbp, .zw_buf = dr->dr_data,
        .zw_cksum = dr->dr_sealed ? &dr->dr_cksum : NULL,
      };
      nbp.bp_lsize = ob->ob_blksz;
      nbp.bp_birth = txg;
      nbp.bp_type = ob->ob_type;
      nbp.bp_level = 0;
      nbp.bp_fill = 1;
      r = zv_zio_write_many (ob->ob_spa, &w, 1);
      if (r < 0)
        zv_zio_free_bp_deferred (ob->ob_spa, &nbp, txg);
    }
    if (r == 0) {
      dr->dr_override = nbp;
      dr->dr_overridden = true;
      *bp = nbp;
    }
  }
  pthread_mutex_unlock (&db->db_mtx);
  zv_dbuf_rele (ob->ob_cache, db);
  return r;
}

/* ---- tunables (tunable.h) ---- */
const zv_tunable_t zv_dmu_tunable_table[] = {
  { .tn_name = "direct_write_min", .tn_module = "dmu",
    ZV_TUNABLE_VAR_U64 (zv_dmu_direct_write_min),
    .tn_default = 64 * 1024, .tn_min = 0, .tn_max = 1ull << 30,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "each write",
    .tn_desc = "A write of at least this many bytes of whole blocks (two "
    "at least) starts their device writes at once, from the writer's "
    "thread, without waiting for them, and its txg's sync only adopts "
    "them; 0: every block waits for its txg's sync." },
  ZV_TUNABLE_END
};
