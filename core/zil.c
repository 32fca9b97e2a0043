/*
 * zil.c: the intent log's life (open, close), its ring and its header.
 *
 * Theory.
 *
 * The log is three modules over one private header (zil_impl.h: struct
 * zv_zil and the helpers they share); zil.h is the interface the rest of
 * the engine uses:
 *   - zil.c (this file): open and close, the ring's placement and reuse,
 *     the header each txg writes and what a synced txg frees, and the
 *     stats;
 *   - zil_commit.c: logging (itxs and tickets), packing records into log
 *     blocks, writing and flushing them, the commit path and the log's
 *     thread that writes blocks ahead of their flush;
 *   - zil_replay.c: log blocks read back: the chain walk, the import's
 *     claim, telling a torn tail from damage (zil_recover) and replay.
 * zil.c calls into zil_commit.c only to stop it (zv_zil_commit_fini) and
 * to drop the records a synced txg made durable
 * (zv_zil_commit_drop_synced); zil_replay.c calls zv_zil_header_init to
 * start a fresh chain; neither of the others calls zil.c otherwise.  The
 * log's tunables all say how records are logged and committed, so they
 * are zil_commit.c's (zv_zil_tunables_default, and the table there);
 * zv_zil_open only reads zv_zil_itx_ring_shift to size the itx ring.
 *
 * Log blocks.  The log lives in a ring (a region of the pool, or the log
 * device); blocks follow each other in it, each as long as its records
 * (rounded to 4 KiB), at increasing logical positions (position % ring
 * size is the offset).  A block is placed when it is opened, right after
 * the previous one, so the address of the next block is known when a
 * block is sealed, and placing a log block never allocates (only the
 * in-place data blocks of large writes are allocated, when their log
 * block is issued).  Each block names the next block's address and
 * checksum seed (guid, seq + 1), and the highest seq durable (written
 * and flushed, with every block before it) when it was issued
 * (lh_durable_seq); replay follows the chain until a block does not
 * verify (zil_replay.c, "Where replay ends").  Ring space is reused
 * only behind the head recorded by a txg already on disk
 * (zl_persisted_pos): the head moves past a block once it is written and
 * every record in it belongs to a synced txg; past half the ring the log
 * kicks a txg to move it, and raises how many writes that txg's sync
 * keeps in flight as the ring fills further (zv_zio_write_cap_raise).  A
 * fresh chain (new guid) starts at every import.
 *
 * The chain's life.  At open the log is not ready (zl_ready false): the
 * blocks from the header's head on may hold records to replay, so none
 * is written and commits wait for txgs.  zv_zil_replay (zil_replay.c)
 * applies them and starts a fresh chain (new guid, head 1).  Each txg's
 * sync writes a header (zv_zil_sync_header) whose head is the first block
 * not yet both written and made redundant by synced txgs; the head, its
 * position and the chain it names are kept per txg (zl_pending_*), and
 * when that txg is on disk (zv_zil_synced) they become the persisted
 * head: ring space behind it may be reused, and once a header naming the
 * fresh chain is on disk, blocks of it may be written (zl_ready: replay
 * would not find them before).
 *
 * Locks: zl_hdr_lock only, between a replay and the sync callbacks
 * (zil_impl.h).  Open and close run with nobody else using the log.  Of
 * the txg engine's callbacks (syncing context), zv_zil_sync_header needs
 * no role: it reads the block state slots (a done flag loaded with
 * acquire, so the slot's record is whole) and writes only the sync-side
 * head (zl_head, zl_pending_*); zv_zil_synced raises the persisted head
 * with an atomic max, read by whoever opens a block, and takes the issuer
 * role only by try-CAS (zv_zil_commit_drop_synced).
 */
#include <config.h>

#include <string.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <sys/random.h>

#include "zil_impl.h"

/* ---- open / close ---- */

void
zv_zil_header_init (zv_zil_header_t *zh, uint64_t ring_dva, uint64_t nslots,
                    uint32_t blksz)
{
  memset (zh, 0, sizeof *zh);
  zh->zh_magic = ZV_ZIL_MAGIC;
  zh->zh_version = ZV_FORMAT_VERSION;
  zh->zh_blksz = blksz;
  zh->zh_ring_dva = ring_dva;
  zh->zh_nslots = nslots;
  zh->zh_head_seq = 1;
  zh->zh_head_pos = 0;
  if (getrandom (&zh->zh_guid, sizeof zh->zh_guid, 0) != sizeof zh->zh_guid)
    zh->zh_guid = zv_now_ns () ^ 0x5bd1e995ull;
}

zv_zil_t *
zv_zil_open (zv_spa_t *spa, zv_dev_t *logdev, zv_txg_t *tx,
             const zv_zil_header_t *zh, const zv_zil_ops_t *ops, void *arg,
             const zv_zil_tunables_t *zt)
{
  zv_zil_t *zl = zv_calloc (1, sizeof *zl);

  ZV_VERIFY (zh->zh_nslots >= 2);
  zl->zl_spa = spa;
  zl->zl_logdev = logdev;
  zl->zl_tx = tx;
  zl->zl_ops = *ops;
  zl->zl_arg = arg;
  zl->zl_tun = *zt;
  zl->zl_hdr = *zh;
  ZV_VERIFY (zv_zil_itx_ring_shift >= 2 && zv_zil_itx_ring_shift <= 30);
  zl->zl_itx_ring = 1ull << zv_zil_itx_ring_shift;
  zl->zl_itxs = zv_calloc (zl->zl_itx_ring, sizeof *zl->zl_itxs);
  zl->zl_itx_store = zv_calloc (zl->zl_itx_ring, sizeof *zl->zl_itx_store);
  zl->zl_slots = zv_calloc (ZIL_NSTATE, sizeof *zl->zl_slots);
  zl->zl_ring_size = zh->zh_nslots * (uint64_t) zh->zh_blksz;
  /* Nobody sees zl before it is returned (calloc zeroed the other
   * atomics). */
  atomic_init (&zl->zl_next_ticket, 1);
  atomic_init (&zl->zl_packed, 1);
  atomic_init (&zl->zl_durable_ticket, 1);
  /* Until replay starts a fresh chain, nothing may be written: the
   * blocks from the head on may hold records to replay. */
  zl->zl_next_seq = zh->zh_head_seq;
  atomic_init (&zl->zl_next_pos, zh->zh_head_pos);
  atomic_init (&zl->zl_durable_seq, zh->zh_head_seq - 1);
  zl->zl_head = zh->zh_head_seq;
  zl->zl_head_pos = zh->zh_head_pos;
  atomic_init (&zl->zl_persisted_head, 0);
  atomic_init (&zl->zl_latency_ns, 200000);
  pthread_mutex_init (&zl->zl_hdr_lock, NULL);
  return zl;
}

void
zv_zil_close (zv_zil_t *zl)
{
  if (zl == NULL)
    return;
  zv_zil_commit_fini (zl);
  free (zl->zl_itxs);
  free (zl->zl_itx_store);
  free (zl->zl_slots);
  pthread_mutex_destroy (&zl->zl_hdr_lock);
  free (zl);
}

/* ---- txg sync ---- */

/* Header for the objset of txg (sync thread). */
void
zv_zil_sync_header (zv_zil_t *zl, uint64_t txg, zv_zil_header_t *zh)
{
  uint64_t head, pos;

  pthread_mutex_lock (&zl->zl_hdr_lock);
  head = zl->zl_head;
  pos = zl->zl_head_pos;
  /* Move past blocks that are written and hold only synced records. */
  for (;;) {
    zil_slot_t *zs = zil_slot (zl, head);
    if (atomic_load_explicit (&zs->zs_seq, memory_order_acquire) != head
        || !atomic_load_explicit (&zs->zs_done, memory_order_acquire)
        || atomic_load_explicit (&zs->zs_max_txg, memory_order_seq_cst) > txg)
      break;
    pos = atomic_load_explicit (&zs->zs_next_pos, memory_order_seq_cst);
    head++;
  }
  zl->zl_head = head;
  zl->zl_head_pos = pos;
  zl->zl_pending_head[txg & ZV_TXG_MASK] = head;
  zl->zl_pending_pos[txg & ZV_TXG_MASK] = pos;
  zl->zl_pending_guid[txg & ZV_TXG_MASK] = zl->zl_hdr.zh_guid;
  *zh = zl->zl_hdr;
  zh->zh_head_seq = head;
  zh->zh_head_pos = pos;
  pthread_mutex_unlock (&zl->zl_hdr_lock);
}

/* Txg is on disk: its head frees slots; drop the records it made
 * durable (so nobody ever writes them). */
void
zv_zil_synced (zv_zil_t *zl, uint64_t txg)
{
  unsigned g = txg & ZV_TXG_MASK;

  /* Blocks of this chain may be written once a header naming it is on
   * disk (replay would not find them otherwise). */
  pthread_mutex_lock (&zl->zl_hdr_lock);
  if (!zl->zl_replaying && zl->zl_pending_guid[g] == zl->zl_hdr.zh_guid) {
    zil_atomic_max (&zl->zl_persisted_pos, zl->zl_pending_pos[g]);
    zil_atomic_max (&zl->zl_persisted_head, zl->zl_pending_head[g]);
    atomic_store_explicit (&zl->zl_ready, true, memory_order_seq_cst);
  }
  pthread_mutex_unlock (&zl->zl_hdr_lock);
  zv_zil_commit_drop_synced (zl, txg);
}

/* ---- stats ---- */

void
zv_zil_get_stats (zv_zil_t *zl, zv_zil_stats_t *st)
{
  uint64_t n = 0, total = 0;
  /* The head first: it only ever trails the end. */
  uint64_t head_pos = atomic_load_explicit (&zl->zl_persisted_pos,
                                            memory_order_seq_cst);
  uint64_t ring_end = atomic_load_explicit (&zl->zl_next_pos,
                                            memory_order_seq_cst);

  memset (st, 0, sizeof *st);
  for (unsigned b = 0; b < ZIL_HIST_BUCKETS; b++)
    total += zil_stat_get (&zl->zl_stat_lat_hist[b]);
  for (unsigned b = 0; b < ZIL_HIST_BUCKETS; b++) {
    n += zil_stat_get (&zl->zl_stat_lat_hist[b]);
    if (total && n * 100 >= total * 99) {
      st->zst_commit_latency_p99_ns = 1ull << (b + 1);
      break;
    }
  }
  st->zst_sync = zl->zl_tun.zt_sync;
  st->zst_logbias = zl->zl_tun.zt_logbias;
  st->zst_log_device = zl->zl_logdev ? zv_dev_path (zl->zl_logdev) : NULL;
  st->zst_lwbs_written = zil_stat_get (&zl->zl_stat_lwbs);
  st->zst_ring_size = zl->zl_ring_size;
  st->zst_ring_used = ring_end > head_pos ? ring_end - head_pos : 0;
  st->zst_lwb_bytes = zil_stat_get (&zl->zl_stat_lwb_bytes);
  st->zst_records_copied = zil_stat_get (&zl->zl_stat_rec_copied);
  st->zst_records_need_copy = zil_stat_get (&zl->zl_stat_rec_need_copy);
  st->zst_records_indirect = zil_stat_get (&zl->zl_stat_rec_indirect);
  st->zst_records_free = zil_stat_get (&zl->zl_stat_rec_free);
  st->zst_records_dropped = zil_stat_get (&zl->zl_stat_rec_dropped);
  st->zst_commits = zil_stat_get (&zl->zl_stat_commits);
  st->zst_commit_fallbacks = zil_stat_get (&zl->zl_stat_fallbacks);
  st->zst_commit_latency_mean_ns = total
    ? zil_stat_get (&zl->zl_stat_lat_sum) / total : 0;
  st->zst_lwb_latency_ewma_ns = atomic_load_explicit (&zl->zl_latency_ns,
                                                      memory_order_seq_cst);
  st->zst_lwbs_ahead = zil_stat_get (&zl->zl_stat_lwbs_ahead);
  st->zst_commit_sleeps = zil_stat_get (&zl->zl_stat_commit_waits);
}
