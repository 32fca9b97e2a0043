/*
 * zil_commit.c: the intent log's commit path, which takes no lock:
 * logging records, packing them into log blocks, writing and flushing
 * those, and commits (a block written ahead of its commit is
 * zil_ahead.c's).
 *
 * Theory.
 *
 * Records.  Every change applied to the volume is logged in memory at once
 * (an itx) and numbered by a ticket: zv_zil_log_* takes the next ticket
 * with an atomic fetch-and-add, waits for that slot of the itx ring
 * (ticket % zl_itx_ring) to be free, fills the itx the slot owns
 * (zl_itx_store: logging allocates nothing but copied data; the ring's
 * itxs cost 48 bytes a slot) and publishes it with a release store.  Tickets
 * are the log's total order: a waiter is done when every ticket up to its
 * own is durable.  Small writes (zt_max_copied, 7.5 KiB) that a commit
 * follows at once (FUA, sync=always) copy their data into the itx; the
 * others, and larger ones, are read back from the volume when they are
 * packed into a log block ("need copy": most asynchronous writes are
 * never packed, their txg syncs first, and the copy and its allocation
 * were the log's cost per write; OpenZFS's WR_COPIED is chosen only when
 * a commit is planned likewise); whole volume blocks of writes of
 * zt_immediate_write_sz (32 KiB) and more, when there is no log device or
 * with logbias=throughput, are written in place when their log block is
 * issued, and only the block pointer is logged: the txg adopts that block
 * (zo_write_block) instead of writing the data a second time.
 *
 * Log blocks are placed in the ring as zil.c's theory comment says: a
 * block is placed when it is opened (commit_lwb_open), right after the
 * previous one, and only when the ring has room behind the head on disk
 * and its state slot is free.
 *
 * The commit path.  zv_zil_commit(t) publishes its target with an atomic
 * max (zl_commit_target) and loops:
 *   - done when zl_durable_ticket > t;
 *   - when t is in a closed block still in flight (commit_block_of: the
 *     first one past zl_durable_seq whose records end after t), it only
 *     sleeps until that block is durable (commit_wait_block, below);
 *   - else it tries to become the issuer with a compare-and-swap on
 *     zl_issuer.  The issuer packs every published itx, in ticket order,
 *     into the open log block (dropping those whose txg has synced),
 *     closing blocks that fill up.  It closes the open block too when the
 *     block holds a record somebody waits for and the committer is alone,
 *     or the block is 7/8 full, or its first record is older than the
 *     commit timeout (10% of the recent log-block latency); otherwise more
 *     records may still join it (group commit).  Then it gives up the
 *     role and, holding no role at all, writes the blocks it closed and
 *     flushes the devices they touched.  So another thread can pack and
 *     write the next block while this one's I/O is in flight: blocks are
 *     pipelined, a block is issued whether or not earlier ones are done
 *     (the kernel joins the flushes that meet at the device), and a
 *     committer never waits for an earlier block's completion before its
 *     own block starts.  With no block in
 *     flight, every ticket before the open block's first record is durable
 *     (in a done block, or dropped: its txg is on disk), and the issuer
 *     raises zl_durable_ticket to it (commit_durable_idle), since a
 *     change is logged after its txg hold is let go and its record may be
 *     dropped when a later one already opened a block: its committer must
 *     not wait for that block;
 *   - when its record waits in the open block, the first such committer
 *     times the block (zs_timer: it sleeps until the block is old enough,
 *     then closes and issues it) and the others sleep until the block is
 *     durable;
 *   - when another thread holds the role (a pack: short), it sleeps on
 *     zl_issuer until the role is given up (commit_role_release wakes the
 *     sleepers it counts);
 *   - otherwise (its record dropped, or not published yet) it sleeps on
 *     zl_wake for the commit timeout, and loops.
 * When a block's write and flush are done, its thread marks the slot done
 * and advances zl_durable_seq over every consecutive done block with a
 * compare-and-swap loop, raising zl_durable_ticket to the end ticket of
 * each and then waking the committers asleep on that block's slot
 * (zs_wake, a futex word each slot has, with a count of its sleepers):
 * a block's completion wakes its own waiters and nobody else's, so eight
 * clients flushing at once do not wake each other for every block.  A
 * waiter returns exactly when its records and every earlier record are
 * written and flushed.  Every sleep has a bound (zil_max_sleep), a safety
 * net only.

 * Write-ahead (zil_ahead.c): a write nobody commits yet may start its
 * block's write itself; the first commit that comes finishes it
 * (zv_zil_ahead_settle, called at the top of every pass of the loop
 * above).

 * Memory ordering.  An itx is initialised before the release store that
 * publishes it; the issuer's acquire load of the ring slot sees it whole.
 * zl_packed is stored with release after the slots below it are cleared,
 * and a logger loads it (seq_cst) before it reuses a slot.  The issuer
 * role is taken with an acquire CAS and given up with a release store, so
 * the packing state (zl_packed, the open block) passes from one issuer to
 * the next whole.  A block's slot record (end ticket, max txg, next
 * position) is stored when the block is closed, before the same thread
 * writes it; its done flag is stored with release after the flush
 * returned, and whoever loads done == 1 with acquire (commit_advance,
 * zv_zil_sync_header) reads the record whole.  zl_durable_seq and
 * zl_durable_ticket are advanced with seq_cst CAS (so acq_rel at least),
 * so a waiter that acquires zl_durable_ticket > t knows the flush covering
 * t completed.  A slot is reset (done = 0) before its new seq is published
 * with release.  zl_wake is bumped after the state it announces changed,
 * and FUTEX_WAIT compares it in the kernel, so a waiter cannot sleep
 * through a wake-up.  Every atomic access that names no weaker order is
 * seq_cst, the C11 default the code was written with; the argument above
 * needs no more than the acquire and release it names.
 *
 * Invariants (ZV_ASSERT, debug builds): tickets are ordered durable <=
 * packed <= next (the ones handed out), and the itx in ring slot
 * packed % ring carries ticket packed; a logger publishes ticket t only
 * once t - packed < ring, into a slot already cleared; whoever packs or
 * drops itxs holds the issuer role; a block claims no ticket past
 * zl_packed, and takes its state slot only when the slot's previous block
 * is done; a committer's ticket is one that was handed out.
 *
 * Fallbacks: when the ring has no free slot, or a log write fails, the
 * committer waits for the txg to sync instead (always correct).  A logger
 * that finds the itx ring full syncs a txg and drops the itxs of synced
 * txgs itself (zv_zil_commit_drop_synced) before it commits: they may
 * have been published after their txg's sync dropped what it could, and
 * with flush=txg no commit packs (it waited for room for ever).  After a
 * log write error (zl_error, sticky) nothing packs itxs any more, so a
 * logger that finds the itx ring full drops the published ones
 * (commit_drain): their txgs carry the changes.  A txg sync that fails
 * marks the log failed too (the pool is suspended): a logger that finds
 * the ring full there asks for a sync, which fails at once, marks the log
 * failed, drains the ring and returns (commit_ring_wait); only while
 * another thread holds the issuer role, or a logger with an earlier ticket has
 * not published yet, does it sleep, 1 ms at most at a time on zl_wake, so
 * it neither spins nor sleeps for ever; a drain that made room, and the
 * failure itself, wake the sleepers at once.  Its record is published and
 * dropped by the next drain.  The logging functions still return a
 * ticket; the request's caller (zvol.c, zvol_check_durable) sees the
 * suspended pool after logging and fails the request with EIO, since its
 * txg will never sync.
 *
 * Locks: none on the logging and commit paths (sleeps are on futex words:
 * a block's slot, the issuer role, the write-ahead state, zl_wake).  Of the txg engine's callbacks, zv_zil_synced
 * (zil.c) reaches here only through zv_zil_commit_drop_synced, which takes
 * the issuer role by try-CAS.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <inttypes.h>
#include <pthread.h>
#include <unistd.h>
#include <stdatomic.h>
#include <linux/futex.h>
#include <sys/syscall.h>

#include "tunable.h"
#include "zil_impl.h"

/* ---- tunables (the table at the end) ---- */

/* Published itxs that may wait to be packed: 2^shift slots (a tunable,
 * read at open; tests make the ring small to fill it). */
unsigned zv_zil_itx_ring_shift = 18;

/* Ring fill (percent, above 50) at which a txg sync under way writes flat
 * out: from half the ring, where the log kicks a txg, to here, the sync's
 * writes in flight rise from the fewest to the most (zio.c).  A slow
 * writer's kicked txg syncs gently; a fast one's hurries before the ring
 * runs out and commits fall back to waiting for the txg. */
static unsigned zv_zil_ring_full_speed_pct = 75;

/* flush=: the intent log, or a txg sync as before the log existed. */
enum commit_flush { COMMIT_FLUSH_LOG = 0, COMMIT_FLUSH_TXG = 1 };

static unsigned zv_zil_sync_mode = ZV_SYNC_STANDARD;
static unsigned zv_zil_logbias = ZV_LOGBIAS_LATENCY;
static unsigned zv_zil_flush = COMMIT_FLUSH_LOG;
static unsigned zv_zil_immediate_write_sz = 32768; /* zfs_immediate_write_sz */
static unsigned zv_zil_max_copied = 7680;          /* zil_maxcopied */
static unsigned zv_zil_commit_timeout_pct = 30;    /* zfs_commit_timeout_pct */
static unsigned zv_zil_write_ahead_mode = ZV_ZIL_WA_AUTO;

/* The tunables' current values, for a log about to open. */
void
zv_zil_tunables_default (zv_zil_tunables_t *zt)
{
  memset (zt, 0, sizeof *zt);
  zt->zt_sync = (enum zv_sync_mode) zv_zil_sync_mode;
  zt->zt_logbias = (enum zv_logbias) zv_zil_logbias;
  zt->zt_immediate_write_sz = zv_zil_immediate_write_sz;
  zt->zt_max_copied = zv_zil_max_copied;
  zt->zt_commit_timeout_pct = zv_zil_commit_timeout_pct;
  zt->zt_legacy_txg_commit = zv_zil_flush == COMMIT_FLUSH_TXG;
  zt->zt_write_ahead = (enum zv_zil_write_ahead) zv_zil_write_ahead_mode;
}

/* Longest a waiter sleeps before it looks again (safety net). */
uint64_t zv_zil_max_sleep_ns = 2000000;
/* Commit timeout bounds, ns (zil_min_commit_timeout and a ceiling). */
static uint64_t zil_min_commit_timeout_ns = 5000;
static uint64_t zil_max_commit_timeout_ns = 1000000;

/* Boundary (volume offset) on which a write split over log blocks is cut. */
#define COMMIT_SPLIT_ALIGN 4096u

/* ---- helpers ---- */

/* The issuer role is held (by the caller: nobody else packs). */
#define COMMIT_ASSERT_ISSUER(zl) \
  ZV_ASSERT (atomic_load_explicit (&(zl)->zl_issuer, \
                                   memory_order_relaxed) == 1)

/*
 * The ticket order: durable <= packed <= next (reserved; published ones
 * lie between packed and next).  Loaded in that order, and each only
 * grows, so a later load can only be larger: the check holds however the
 * loads interleave with the writers.  Debug builds only.
 */
static inline void
commit_assert_ticket_order (zv_zil_t *zl)
{
#ifdef ZV_DEBUG
  uint64_t durable = atomic_load_explicit (&zl->zl_durable_ticket,
                                           memory_order_seq_cst);
  uint64_t packed = zil_packed (zl);

  ZV_ASSERT3U (durable, <=, packed);
  ZV_ASSERT3U (packed, <=, zil_next_ticket (zl));
#else
  (void) zl;
#endif
}

static void
commit_wake_all (zv_zil_t *zl)
{
  atomic_fetch_add_explicit (&zl->zl_wake, 1, memory_order_seq_cst);
  syscall (SYS_futex, &zl->zl_wake, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL,
           NULL, 0);
}

/* Give up the issuer role, waking the committers that wait for it. */
void
zv_zil_role_release (zv_zil_t *zl)
{
  atomic_store_explicit (&zl->zl_issuer, 0, memory_order_seq_cst);
  if (atomic_load_explicit (&zl->zl_issuer_waiters, memory_order_seq_cst))
    syscall (SYS_futex, &zl->zl_issuer, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL,
             NULL, 0);
}

/* Sleep while another thread holds the issuer role (a pack: short), at
 * most ns.  The waiter count goes up before the role is looked at again,
 * and the holder stores 0 before it looks at the count (both seq_cst):
 * either we see the role free, or it sees us and wakes us, or FUTEX_WAIT
 * finds the word changed. */
static void
commit_role_wait (zv_zil_t *zl, uint64_t ns)
{
  struct timespec ts = { .tv_sec = ns / 1000000000ull,
                         .tv_nsec = ns % 1000000000ull };

  atomic_fetch_add_explicit (&zl->zl_issuer_waiters, 1, memory_order_seq_cst);
  if (atomic_load_explicit (&zl->zl_issuer, memory_order_seq_cst) == 1) {
    zil_stat_add (&zl->zl_stat_commit_waits, 1);
    syscall (SYS_futex, &zl->zl_issuer, FUTEX_WAIT_PRIVATE, 1, &ts, NULL, 0);
  }
  atomic_fetch_sub_explicit (&zl->zl_issuer_waiters, 1, memory_order_seq_cst);
}

static void
commit_sleep (zv_zil_t *zl, uint32_t seen, uint64_t ns)
{
  struct timespec ts = { .tv_sec = ns / 1000000000ull,
                         .tv_nsec = ns % 1000000000ull };
  syscall (SYS_futex, &zl->zl_wake, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}

/* The commit timeout: a share of the recent log-block latency. */
static uint64_t
commit_timeout (zv_zil_t *zl)
{
  uint64_t t = atomic_load_explicit (&zl->zl_latency_ns, memory_order_seq_cst)
    * zl->zl_tun.zt_commit_timeout_pct / 100;
  return ZV_MIN (ZV_MAX (t, zil_min_commit_timeout_ns),
                 zil_max_commit_timeout_ns);
}


/* Done with an itx (its slot is cleared or about to be): its storage is
 * the slot's, only the copied data is freed. */
static void
commit_itx_free (zil_itx_t *itx)
{
  free (itx->itx_data);
  itx->itx_data = NULL;
}

static void
commit_lwb_free (zil_lwb_t *lwb)
{
  if (lwb == NULL)
    return;
  zv_buf_free (lwb->lwb_buf);
  free (lwb->lwb_ind);
  free (lwb);
}

/* ---- logging ---- */

/*
 * With the issuer role: drop the oldest published itxs, up to ticket end
 * and while their txg is at most max_txg; they will never be packed.  A
 * partly packed itx is dropped only if force (the log failed: nothing is
 * packed any more).  Returns the new zl_packed.
 */
static uint64_t
commit_drop_oldest (zv_zil_t *zl, uint64_t end, uint64_t max_txg, bool force)
{
  uint64_t packed = zil_packed (zl);

  COMMIT_ASSERT_ISSUER (zl);
  while (packed < end && (force || zl->zl_pack_done == 0)) {
    _Atomic (zil_itx_t *) *slot = &zl->zl_itxs[packed % zl->zl_itx_ring];
    zil_itx_t *itx = atomic_load_explicit (slot, memory_order_acquire);

    if (itx == NULL || itx->itx_txg > max_txg)
      break;
    ZV_ASSERT3U (itx->itx_ticket, ==, packed);
    atomic_store_explicit (slot, NULL, memory_order_seq_cst);
    commit_itx_free (itx);
    zil_stat_add (&zl->zl_stat_rec_dropped, 1);
    zl->zl_pack_done = 0;
    packed++;
    atomic_store_explicit (&zl->zl_packed, packed, memory_order_release);
  }
  return packed;
}

/* The log failed (zl_error): commits wait for txgs from now on, so the
 * published itxs are never needed; drop them to free the ring.  Only
 * with the issuer role (a holder gives it up soon: commits fall back to
 * txgs once they see zl_error, and the next drain drops what it left).
 * Writers waiting for room sleep on zl_wake: wake them when room was
 * made, rather than let them wait out their millisecond. */
static void
commit_drain (zv_zil_t *zl)
{
  uint64_t before = zil_packed (zl);
  int expect = 0;

  if (!atomic_compare_exchange_strong_explicit (&zl->zl_issuer, &expect, 1,
                                                memory_order_acquire,
                                                memory_order_relaxed))
    return;
  bool moved = commit_drop_oldest (zl, UINT64_MAX, UINT64_MAX, true) != before;
  zv_zil_role_release (zl);
  if (moved)
    commit_wake_all (zl);
}

static void commit_durable_idle (zv_zil_t *zl, uint64_t packed);

/*
 * Drop the oldest itxs of txgs up to txg (on disk), if the issuer role is
 * free (a holder drops them in its own pack), and wake the waiters.
 */
void
zv_zil_commit_drop_synced (zv_zil_t *zl, uint64_t txg)
{
  int expect = 0;

  if (atomic_compare_exchange_strong_explicit (&zl->zl_issuer, &expect, 1,
                                               memory_order_acquire,
                                               memory_order_relaxed)) {
    uint64_t packed = commit_drop_oldest (zl, zil_next_ticket (zl), txg,
                                          false);

    commit_durable_idle (zl, packed);
    zv_zil_role_release (zl);
  }
  commit_wake_all (zl);
}

/*
 * Wait for room in the itx ring: sync a txg (which makes the oldest itxs
 * droppable) and commit what is there (packing or dropping it).  When the
 * pool is suspended (the txg sync fails for good), nothing will ever be
 * durable again: the log is marked failed and its itxs dropped, so the
 * writer returns instead of spinning; its caller's flush then fails.
 */
static void
commit_ring_wait (zv_zil_t *zl, uint64_t ticket)
{
  while (ticket - zil_packed (zl) >= zl->zl_itx_ring) {
    uint64_t before = zil_packed (zl);
    int r;

    zil_stat_add (&zl->zl_stat_fallbacks, 1);
    if (zil_error (zl) == 0) {
      r = zv_txg_wait_synced (zl->zl_tx, 0);
      if (r < 0) {
        int expect = 0;
        if (atomic_compare_exchange_strong_explicit (&zl->zl_error, &expect,
                                                     r, memory_order_seq_cst,
                                                     memory_order_seq_cst)) {
          zv_error ("intent log: the pool is suspended (%s); logged "
                    "changes are dropped, flushes fail", strerror (-r));
          /* Committers asleep on an open block: fall back now. */
          commit_wake_all (zl);
        }
      }
      else {
        /* Itxs published after their txg's sync dropped what it could
         * (a change is logged after its txg hold is let go) go only here
         * when nothing packs: with flush=txg a commit never does. */
        zv_zil_commit_drop_synced (zl, zv_txg_last_synced (zl->zl_tx));
        if (ticket - zil_packed (zl) >= zl->zl_itx_ring)
          (void) zv_zil_commit (zl, ticket - zl->zl_itx_ring);
      }
    }
    if (zil_error (zl) != 0)
      commit_drain (zl);
    /* No progress (another thread holds the issuer role): let it run. */
    if (zil_packed (zl) == before)
      commit_sleep (zl, atomic_load_explicit (&zl->zl_wake,
                                              memory_order_seq_cst),
                    1000000);
  }
}

/*
 * Take the next ticket and wait for room in the ring: the itx of its
 * slot, cleared, for the caller to fill and commit_publish.  Room means
 * ticket t - ring, the slot's last user, is packed or dropped: the slot
 * was cleared and its itx freed before zl_packed passed it, so nobody
 * looks at that storage any more.
 */
static zil_itx_t *
commit_claim (zv_zil_t *zl)
{
  uint64_t t = atomic_fetch_add_explicit (&zl->zl_next_ticket, 1,
                                          memory_order_seq_cst);
  zil_itx_t *itx;

  if (t - zil_packed (zl) >= zl->zl_itx_ring)
    commit_ring_wait (zl, t);
  ZV_ASSERT3U (t - zil_packed (zl), <, zl->zl_itx_ring);
  ZV_ASSERT (atomic_load_explicit (&zl->zl_itxs[t % zl->zl_itx_ring],
                                   memory_order_relaxed) == NULL);
  itx = &zl->zl_itx_store[t % zl->zl_itx_ring];
  memset (itx, 0, sizeof *itx);
  itx->itx_ticket = t;
  return itx;
}

/* Publish a claimed itx, filled.  The ticket is read before the store:
 * once published, the itx may be packed, its slot cleared and claimed
 * again by another writer at once, so it is no longer ours to read. */
static uint64_t
commit_publish (zv_zil_t *zl, zil_itx_t *itx)
{
  uint64_t t = itx->itx_ticket;

  atomic_store_explicit (&zl->zl_itxs[t % zl->zl_itx_ring], itx,
                         memory_order_release);
  return t;
}

/* Log one piece of a write. */
static uint64_t
commit_log_piece (zv_zil_t *zl, uint64_t txg, uint64_t off, uint64_t len,
                  const void *data, enum zil_wr wr)
{
  zil_itx_t *itx = commit_claim (zl);

  itx->itx_type = ZV_LR_WRITE;
  itx->itx_txg = txg;
  itx->itx_off = off;
  itx->itx_len = len;
  itx->itx_wr = wr;
  if (wr == ZIL_WR_COPIED) {
    itx->itx_data = zv_alloc (len);
    memcpy (itx->itx_data, data, len);
  }
  return commit_publish (zl, itx);
}

/* How a piece of write data that does not go in place is logged. */
static enum zil_wr
commit_wr_small (zv_zil_t *zl, uint64_t len, bool commit)
{
  return commit && len <= zl->zl_tun.zt_max_copied ? ZIL_WR_COPIED
    : ZIL_WR_NEED_COPY;
}

/* Log a write applied in txg; returns the last ticket it used. */
uint64_t
zv_zil_log_write (zv_zil_t *zl, uint64_t txg, uint64_t off, uint32_t len,
                  const void *data, bool commit)
{
  const zv_zil_tunables_t *zt = &zl->zl_tun;
  const uint8_t *p = data;
  uint32_t bs = zl->zl_ops.zo_blksz;
  uint64_t b0 = ZV_P2ROUNDUP (off, bs), b1 = ZV_P2ALIGN (off + len, bs);
  uint64_t t = 0;
  bool indirect;

  if (zl->zl_replaying || zt->zt_sync == ZV_SYNC_DISABLED || len == 0)
    return 0;
  /* Whole blocks of a big write go in place; the edges are copied. */
  indirect = b1 > b0 && (zt->zt_logbias == ZV_LOGBIAS_THROUGHPUT
                         || (zl->zl_logdev == NULL
                             && len >= zt->zt_immediate_write_sz));
  if (!indirect)
    return commit_log_piece (zl, txg, off, len, data,
                             commit_wr_small (zl, len, commit));
  if (b0 > off)
    t = commit_log_piece (zl, txg, off, b0 - off, p,
                          commit_wr_small (zl, b0 - off, commit));
  t = commit_log_piece (zl, txg, b0, b1 - b0, NULL, ZIL_WR_INDIRECT);
  if (off + len > b1)
    t = commit_log_piece (zl, txg, b1, off + len - b1, p + (b1 - off),
                          commit_wr_small (zl, off + len - b1, commit));
  return t;
}

/* Log a trim or zero applied in txg. */
uint64_t
zv_zil_log_free (zv_zil_t *zl, uint64_t txg, enum zv_lr_type type,
                 uint64_t off, uint64_t len, uint64_t lr_flags)
{
  zil_itx_t *itx;

  if (zl->zl_replaying || zl->zl_tun.zt_sync == ZV_SYNC_DISABLED || len == 0)
    return 0;
  ZV_VERIFY (type == ZV_LR_TRIM || type == ZV_LR_ZERO);
  ZV_VERIFY ((lr_flags & ~(type == ZV_LR_ZERO ? ZV_LR_F_ZERO_ALLOC : 0)) == 0);
  itx = commit_claim (zl);
  itx->itx_type = type;
  itx->itx_flags = (uint8_t) lr_flags;
  itx->itx_txg = txg;
  itx->itx_off = off;
  itx->itx_len = len;
  return commit_publish (zl, itx);
}

/* ---- packing (issuer role held) ---- */

/* Open block zl_next_seq if its slot is free; NULL when the ring is full. */
static zil_lwb_t *
commit_lwb_open (zv_zil_t *zl)
{
  uint64_t seq = zl->zl_next_seq;
  uint64_t pos = atomic_load_explicit (&zl->zl_next_pos,
                                      memory_order_relaxed);
  uint64_t head_pos = atomic_load_explicit (&zl->zl_persisted_pos,
                                            memory_order_seq_cst);
  zil_slot_t *zs;
  zil_lwb_t *lwb;

  /* Room: the ring from the head on disk to the end of this block, and
   * a state entry. */
  if (!atomic_load_explicit (&zl->zl_ready, memory_order_seq_cst)
      || pos + zl->zl_hdr.zh_blksz - head_pos > zl->zl_ring_size
      || seq - atomic_load_explicit (&zl->zl_persisted_head,
                                     memory_order_seq_cst) >= ZIL_NSTATE)
    return NULL;
  /* Past half the ring: ask for a txg, whose sync moves the head, and
   * have the sync write faster the fuller the ring gets. */
  if ((pos - head_pos) * 2 > zl->zl_ring_size) {
    uint64_t fill_pct = (pos - head_pos) * 100 / zl->zl_ring_size;

    zv_txg_kick (zl->zl_tx, zv_txg_open_txg (zl->zl_tx));
    zv_zio_write_cap_raise (zl->zl_spa, (unsigned) ((fill_pct - 50) * 100
                            / (zv_zil_ring_full_speed_pct - 50)));
  }
  lwb = zv_calloc (1, sizeof *lwb);
  lwb->lwb_seq = seq;
  lwb->lwb_pos = pos;
  /* Not zeroed: only the header, record padding and the tail up to the
   * written length are (commit_append, commit_lwb_seal); clearing a whole
   * 128 KiB block per commit cost a quarter of a 1-job fsync loop. */
  lwb->lwb_buf = zv_buf_get (zl->zl_hdr.zh_blksz);
  memset (lwb->lwb_buf, 0, sizeof (zv_lwb_hdr_t));
  lwb->lwb_open_ns = zv_now_ns ();
  zs = zil_slot (zl, seq);
  /* The room check above keeps seq - ZIL_NSTATE behind the head on disk,
   * which only moves past done blocks. */
  ZV_ASSERT (zil_slot_reusable (zs, seq));
  atomic_store_explicit (&zs->zs_done, 0, memory_order_seq_cst);
  atomic_store_explicit (&zs->zs_max_txg, 0, memory_order_seq_cst);
  atomic_store_explicit (&zs->zs_end_ticket, 0, memory_order_seq_cst);
  atomic_store_explicit (&zs->zs_timer, 0, memory_order_relaxed);
  atomic_store_explicit (&zs->zs_seq, seq, memory_order_release);
  zl->zl_next_seq = seq + 1;
  zl->zl_open = lwb;
  return lwb;
}

/* Close the open block; it joins the caller's list of blocks to write.
 * Every ticket before end_ticket is in this block or an earlier one, or
 * was dropped. */
static void
commit_lwb_close (zv_zil_t *zl, uint64_t end_ticket, zil_lwb_t **closed)
{
  zil_lwb_t *lwb = zl->zl_open, **pp = closed;
  zil_slot_t *zs = zil_slot (zl, lwb->lwb_seq);

  ZV_ASSERT3U (lwb->lwb_nused, >, 0);
  ZV_ASSERT3U (atomic_load_explicit (&zs->zs_seq, memory_order_relaxed), ==,
               lwb->lwb_seq);
  /* Nothing past what is packed is claimed by the block. */
  ZV_ASSERT3U (end_ticket, <=, zil_packed (zl));
  lwb->lwb_end_ticket = end_ticket;
  lwb->lwb_len = ZV_P2ROUNDUP (sizeof (zv_lwb_hdr_t) + lwb->lwb_nused,
                               ZV_SECTOR);
  lwb->lwb_next_pos = zil_pos_fit (zl, lwb->lwb_pos + lwb->lwb_len);
  atomic_store_explicit (&zl->zl_next_pos, lwb->lwb_next_pos,
                         memory_order_relaxed);
  atomic_store_explicit (&zs->zs_max_txg, lwb->lwb_max_txg,
                         memory_order_seq_cst);
  atomic_store_explicit (&zs->zs_end_ticket, end_ticket,
                         memory_order_seq_cst);
  atomic_store_explicit (&zs->zs_next_pos, lwb->lwb_next_pos,
                         memory_order_seq_cst);
  zl->zl_open = NULL;
  while (*pp)
    pp = &(*pp)->lwb_next;
  *pp = lwb;
}

/* Room for a record of 'need' bytes, closing a full block; -EAGAIN when
 * the ring has no free slot for a new one. */
static int
commit_room (zv_zil_t *zl, uint32_t need, uint64_t ticket, zil_lwb_t **closed)
{
  uint32_t cap = zl->zl_hdr.zh_blksz - sizeof (zv_lwb_hdr_t);

  ZV_VERIFY3U (need, <=, cap);
  if (zl->zl_open && zl->zl_open->lwb_nused + need > cap)
    commit_lwb_close (zl, ticket, closed);
  if (zl->zl_open == NULL && commit_lwb_open (zl) == NULL)
    return -EAGAIN;
  return 0;
}

/* Append a record header (and room for its payload) to the open block. */
static uint8_t *
commit_append (zv_zil_t *zl, const zil_itx_t *itx, uint32_t type,
               uint64_t off, uint64_t len, uint32_t payload)
{
  zil_lwb_t *lwb = zl->zl_open;
  zv_lr_t *lr = (zv_lr_t *) (lwb->lwb_buf + sizeof (zv_lwb_hdr_t)
                             + lwb->lwb_nused);
  uint32_t reclen = sizeof (zv_lr_t) + ZV_P2ROUNDUP (payload, 8);

  if (lwb->lwb_nused == 0) {
    /* Its age, for the commit timeout, counts from its first record:
     * a block opened at the last one's close may sit empty a while. */
    lwb->lwb_start_ticket = itx->itx_ticket;
    lwb->lwb_open_ns = zv_now_ns ();
  }
  memset (lr, 0, sizeof *lr);
  if (reclen > sizeof *lr + payload)       /* padding to 8 bytes */
    memset ((uint8_t *) (lr + 1) + payload, 0,
            reclen - sizeof *lr - payload);
  lr->lr_type = type;
  lr->lr_reclen = reclen;
  lr->lr_seq = itx->itx_ticket;
  lr->lr_txg = itx->itx_txg;
  lr->lr_offset = off;
  lr->lr_length = len;
  lr->lr_flags = itx->itx_flags;
  lwb->lwb_nused += reclen;
  lwb->lwb_max_txg = ZV_MAX (lwb->lwb_max_txg, itx->itx_txg);
  return (uint8_t *) (lr + 1);
}

/* Remember an in-place write whose pointer the issuing thread fills. */
static void
commit_add_ind (zil_lwb_t *lwb, uint32_t at, uint64_t txg, uint64_t blkid)
{
  ZV_GROW (lwb->lwb_ind, lwb->lwb_nind, lwb->lwb_indcap, 16);
  lwb->lwb_ind[lwb->lwb_nind++] = (zil_ind_t) {
    .zi_off = at, .zi_txg = txg, .zi_blkid = blkid,
  };
}

/*
 * Pack (the rest of) one itx, from byte zl_pack_done on.  Returns 0, or
 * -EAGAIN when the ring has no free slot (zl_pack_done says how far it
 * got; the next issuer goes on from there), or a read error.
 */
static int
commit_pack_itx (zv_zil_t *zl, zil_itx_t *itx, zil_lwb_t **closed)
{
  const uint32_t cap = zl->zl_hdr.zh_blksz - sizeof (zv_lwb_hdr_t);
  const uint32_t hdr = sizeof (zv_lr_t);
  uint32_t bs = zl->zl_ops.zo_blksz;
  int r;

  if (itx->itx_type != ZV_LR_WRITE) {
    if ((r = commit_room (zl, hdr, itx->itx_ticket, closed)) < 0)
      return r;
    commit_append (zl, itx, itx->itx_type, itx->itx_off, itx->itx_len, 0);
    zil_stat_add (&zl->zl_stat_rec_free, 1);
    return 0;
  }
  switch (itx->itx_wr) {
  case ZIL_WR_COPIED:
    if ((r = commit_room (zl, hdr + ZV_P2ROUNDUP (itx->itx_len, 8),
                          itx->itx_ticket, closed)) < 0)
      return r;
    memcpy (commit_append (zl, itx, ZV_LR_WRITE, itx->itx_off, itx->itx_len,
                           itx->itx_len), itx->itx_data, itx->itx_len);
    zil_stat_add (&zl->zl_stat_rec_copied, 1);
    return 0;

  case ZIL_WR_NEED_COPY:
    /* Fetched from the volume now, split over blocks as needed. */
    while (zl->zl_pack_done < itx->itx_len) {
      uint64_t left = itx->itx_len - zl->zl_pack_done;
      uint64_t off = itx->itx_off + zl->zl_pack_done;
      uint32_t room, n;
      uint8_t *dst;

      if ((r = commit_room (zl, hdr + 8, itx->itx_ticket, closed)) < 0)
        return r;
      room = (cap - zl->zl_open->lwb_nused - hdr) & ~7u;
      n = (uint32_t) ZV_MIN (left, (uint64_t) room);
      /* A write split over blocks is split on 4 KiB boundaries of the
       * volume: if only the first blocks reach the disk, replay applies
       * whole 4 KiB blocks of it, never part of one. */
      if (n < left) {
        uint32_t cut = (uint32_t) ((off + n) % COMMIT_SPLIT_ALIGN);
        n = cut < n ? n - cut : 0;
      }
      if (n == 0 || (n < left && n < COMMIT_SPLIT_ALIGN)) {
        ZV_ASSERT3U (zl->zl_open->lwb_nused, >, 0);
        /* Not worth a sliver: the rest goes in the next block. */
        commit_lwb_close (zl, itx->itx_ticket, closed);
        continue;
      }
      dst = commit_append (zl, itx, ZV_LR_WRITE, off, n, n);
      r = zl->zl_ops.zo_read (zl->zl_arg, off, n, dst);
      if (r < 0)
        return r;
      zl->zl_pack_done += n;
    }
    zil_stat_add (&zl->zl_stat_rec_need_copy, 1);
    return 0;

  case ZIL_WR_INDIRECT:
    /* One record per volume block; its pointer is filled at issue. */
    while (zl->zl_pack_done < itx->itx_len) {
      uint64_t off = itx->itx_off + zl->zl_pack_done;
      uint32_t at;

      if ((r = commit_room (zl, hdr + sizeof (zv_blkptr_t), itx->itx_ticket,
                            closed)) < 0)
        return r;
      at = zl->zl_open->lwb_nused;
      commit_append (zl, itx, ZV_LR_WRITE_IND, off, bs, sizeof (zv_blkptr_t));
      commit_add_ind (zl->zl_open, at, itx->itx_txg, off / bs);
      zl->zl_pack_done += bs;
      zil_stat_add (&zl->zl_stat_rec_indirect, 1);
    }
    return 0;
  }
  return -EINVAL;
}

/*
 * No block in flight (every closed one is written and flushed): every
 * ticket before the open block's first record, or before 'packed' when
 * no block is open, is durable: in a done block, or dropped because its
 * txg is on disk.  Say so, for the committers of dropped records: the
 * open block is closed only for a committer of one of its own records,
 * so one whose record was dropped before it (its txg synced between the
 * change and its logging) would otherwise wait for ever.  Issuer role
 * held.
 */
static void
commit_durable_idle (zv_zil_t *zl, uint64_t packed)
{
  const zil_lwb_t *open = zl->zl_open;

  if (zil_durable_seq (zl) + 1 != (open ? open->lwb_seq : zl->zl_next_seq))
    return;
  zil_atomic_max (&zl->zl_durable_ticket,
                  open && open->lwb_nused > 0 ? open->lwb_start_ticket
                  : packed);
}

/*
 * Pack every published itx in ticket order (dropping those whose txg has
 * synced) and close the open block if a committer waits for one of its
 * records (see the theory comment for when it waits), or, writing ahead,
 * if no block is in flight.  Issuer role held.  Returns the closed
 * blocks, for the caller to write; *full when the ring had no free slot.
 */
zil_lwb_t *
zv_zil_commit_pack (zv_zil_t *zl, bool *full, bool ahead)
{
  uint64_t end = zil_next_ticket (zl);
  uint64_t synced = zv_txg_last_synced (zl->zl_tx);
  uint64_t packed = zil_packed (zl);
  zil_lwb_t *closed = NULL, *lwb;

  COMMIT_ASSERT_ISSUER (zl);
  ZV_ASSERT3U (packed, <=, end);
  *full = false;
  while (packed < end) {
    _Atomic (zil_itx_t *) *slot = &zl->zl_itxs[packed % zl->zl_itx_ring];
    zil_itx_t *itx;
    int r = 0;

    /* A logger between its ticket and its publish: stop here (it may
     * be the very thread that waits for room in the ring). */
    itx = atomic_load_explicit (slot, memory_order_acquire);
    if (itx == NULL)
      break;
    ZV_ASSERT3U (itx->itx_ticket, ==, packed);
    if (itx->itx_txg <= synced)
      zil_stat_add (&zl->zl_stat_rec_dropped, 1);
    else
      r = commit_pack_itx (zl, itx, &closed);
    if (r == -EAGAIN) {
      *full = true;
      break;
    }
    if (r < 0) {
      /* The volume could not be read: from now on commits wait for
       * txgs (the records packed so far are harmless to replay). */
      zv_error ("intent log: cannot fetch logged data (%s); flushes now "
                "wait for txg syncs", strerror (-r));
      atomic_store_explicit (&zl->zl_error, r, memory_order_seq_cst);
    }
    zl->zl_pack_done = 0;
    atomic_store_explicit (slot, NULL, memory_order_seq_cst);
    commit_itx_free (itx);
    packed++;
    atomic_store_explicit (&zl->zl_packed, packed, memory_order_release);
  }

  lwb = zl->zl_open;
  if (lwb && lwb->lwb_nused > 0 && !*full) {
    /* Writing ahead, a block in flight makes this one wait: the
     * thread's next pass, or a commit, issues it with more records. */
    bool inflight = zil_durable_seq (zl) + 1 < lwb->lwb_seq;

    if (ahead && !inflight)
      commit_lwb_close (zl, packed, &closed);
    else if (atomic_load_explicit (&zl->zl_commit_target,
                                   memory_order_seq_cst)
             >= lwb->lwb_start_ticket) {
      uint32_t cap = zl->zl_hdr.zh_blksz - sizeof (zv_lwb_hdr_t);
      bool alone = atomic_load_explicit (&zl->zl_active,
                                         memory_order_seq_cst) <= 1;
      bool old = zv_now_ns () - lwb->lwb_open_ns >= commit_timeout (zl);
      bool nearly_full = lwb->lwb_nused >= cap / 8 * 7;

      if (alone || nearly_full || old)
        commit_lwb_close (zl, packed, &closed);
    }
  }
  if (closed == NULL)
    commit_durable_idle (zl, packed);
  return closed;
}

/* ---- writing blocks (no role held) ---- */

/* Wake the committers asleep on block seq's slot (commit_wait_block). */
void
zv_zil_wake_block (zv_zil_t *zl, uint64_t seq)
{
  zil_slot_t *zs = zil_slot (zl, seq);

  atomic_fetch_add_explicit (&zs->zs_wake, 1, memory_order_seq_cst);
  if (atomic_load_explicit (&zs->zs_sleepers, memory_order_seq_cst) > 0)
    syscall (SYS_futex, &zs->zs_wake, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL,
             NULL, 0);
}

/* Advance zl_durable_seq over consecutive done blocks, waking the
 * waiters of each block it passes. */
static void
commit_advance (zv_zil_t *zl)
{
  for (;;) {
    uint64_t d = zil_durable_seq (zl), n = d + 1;
    zil_slot_t *zs = zil_slot (zl, n);

    if (atomic_load_explicit (&zs->zs_seq, memory_order_acquire) != n
        || !atomic_load_explicit (&zs->zs_done, memory_order_acquire))
      break;
    if (atomic_compare_exchange_strong_explicit (&zl->zl_durable_seq, &d, n,
                                                 memory_order_seq_cst,
                                                 memory_order_seq_cst)) {
      uint64_t end = atomic_load_explicit (&zs->zs_end_ticket,
                                           memory_order_seq_cst);

      ZV_ASSERT3U (end, <=, zil_packed (zl));
      zil_atomic_max (&zl->zl_durable_ticket, end);
      zv_zil_wake_block (zl, n);
    }
  }
}

/* Seal a block: header and checksum over what will be written. */
static uint32_t
commit_lwb_seal (zv_zil_t *zl, zil_lwb_t *lwb)
{
  zv_lwb_hdr_t *lh = (zv_lwb_hdr_t *) lwb->lwb_buf;
  uint32_t len = lwb->lwb_len;

  lh->lh_magic = ZV_LWB_MAGIC;
  lh->lh_version = ZV_FORMAT_VERSION;
  lh->lh_nused = lwb->lwb_nused;
  lh->lh_seq = lwb->lwb_seq;
  lh->lh_next_dva = zil_pos_dva (zl, lwb->lwb_next_pos);
  lh->lh_next_seq = lwb->lwb_seq + 1;
  /* What is durable now, before this block's write: replay tells by it
   * a torn tail from a damaged block (replay_decide). */
  lh->lh_durable_seq = zil_durable_seq (zl);
  ZV_ASSERT3U (lh->lh_durable_seq, <, lwb->lwb_seq);
  memset (&lh->lh_cksum, 0, sizeof lh->lh_cksum);
  memset (lwb->lwb_buf + sizeof (zv_lwb_hdr_t) + lwb->lwb_nused, 0,
          len - sizeof (zv_lwb_hdr_t) - lwb->lwb_nused);
  zv_cksum_compute (lwb->lwb_buf, len, zil_seed (zl->zl_hdr.zh_guid,
                                                 lwb->lwb_seq),
                    &lh->lh_cksum);
  return len;
}

/*
 * Prepare the closed blocks' I/O: write their in-place data blocks, seal
 * them, and fill ios with their writes, then one flush per device
 * touched (ordered after the writes by the batch).  ios has room for
 * every block and ZV_MAX_DEVS + 1 flushes.  Returns how many requests, or
 * a negative errno (an in-place write failed).
 */
int
zv_zil_commit_prepare (zv_zil_t *zl, zil_lwb_t *list, zv_dev_io_t *ios)
{
  bool touched[ZV_MAX_DEVS] = { false };
  zv_dev_t *ringdev = NULL;
  size_t n = 0;
  int r = 0;

  for (zil_lwb_t *lwb = list; lwb; lwb = lwb->lwb_next) {
    for (size_t i = 0; i < lwb->lwb_nind; i++) {
      zil_ind_t *zi = &lwb->lwb_ind[i];
      zv_lr_t *lr = (zv_lr_t *) (lwb->lwb_buf + sizeof (zv_lwb_hdr_t)
                                 + zi->zi_off);
      zv_blkptr_t *bp = (zv_blkptr_t *) (lr + 1);
      int e = zl->zl_ops.zo_write_block (zl->zl_arg, zi->zi_txg,
                                         zi->zi_blkid, bp);
      if (e == 0) {
        for (unsigned c = 0; c < bp->bp_ncopies; c++)
          touched[ZV_DVA_VDEV (bp->bp_dva[c])] = true;
      }
      else {
        /* Its txg synced (or the block changed since, and a later
         * record carries it): nothing to replay. */
        if (e != -ENOENT)
          r = e;
        lr->lr_type = ZV_LR_NOP;
        memset (bp, 0, sizeof *bp);
        zil_stat_add (&zl->zl_stat_rec_nop, 1);
      }
    }
    uint32_t len = commit_lwb_seal (zl, lwb);
    uint64_t dva = zil_pos_dva (zl, lwb->lwb_pos);
    zv_dev_t *dev = zil_ring_dev (zl, dva);
    ios[n++] = (zv_dev_io_t) {
      .di_dev = dev, .di_op = ZV_DEV_WRITE, .di_buf = lwb->lwb_buf,
      .di_offset = ZV_DVA_OFFSET (dva), .di_len = len,
    };
    ringdev = dev;
    zil_stat_add (&zl->zl_stat_lwbs, 1);
    zil_stat_add (&zl->zl_stat_lwb_bytes, len);
  }
  for (unsigned d = 0; d < zl->zl_spa->spa_ndevs; d++)
    if (touched[d] || zl->zl_spa->spa_devs[d] == ringdev)
      ios[n++] = (zv_dev_io_t) { .di_dev = zl->zl_spa->spa_devs[d],
                                 .di_op = ZV_DEV_FLUSH };
  if (zl->zl_logdev)
    ios[n++] = (zv_dev_io_t) { .di_dev = zl->zl_logdev,
                               .di_op = ZV_DEV_FLUSH };
  return r < 0 ? r : (int) n;
}

/*
 * The closed blocks' I/O is over, with result r (started at start_ns, or
 * 0: not a batch to time): on success mark them done, else fail the log;
 * free them and advance the durable counters, waking their waiters.
 */
int
zv_zil_commit_complete (zv_zil_t *zl, zil_lwb_t *list, int r, uint64_t start_ns)
{
  if (r < 0) {
    zv_error ("intent log: writing log blocks failed (%s); flushes now "
              "wait for txg syncs", strerror (-r));
    atomic_store_explicit (&zl->zl_error, r, memory_order_seq_cst);
  }
  else if (start_ns != 0) {
    /* Latency EWMA (7/8 old), per block batch. */
    uint64_t lat = zv_now_ns () - start_ns;
    uint64_t old = atomic_load_explicit (&zl->zl_latency_ns,
                                         memory_order_seq_cst);

    atomic_store_explicit (&zl->zl_latency_ns, old - old / 8 + lat / 8,
                           memory_order_seq_cst);
  }
  while (list) {
    zil_lwb_t *next = list->lwb_next;
    if (r == 0)
      atomic_store_explicit (&zil_slot (zl, list->lwb_seq)->zs_done, 1,
                             memory_order_release);
    else
      zv_zil_wake_block (zl, list->lwb_seq);    /* to see zl_error */
    zv_buf_put (list->lwb_buf, zl->zl_hdr.zh_blksz);
    list->lwb_buf = NULL;
    commit_lwb_free (list);
    list = next;
  }
  commit_advance (zl);
  if (r < 0)
    commit_wake_all (zl);
  return r;
}

/* Room for the requests of the blocks in list (commit_prepare). */
zv_dev_io_t *
zv_zil_commit_ios_alloc (zil_lwb_t *list)
{
  size_t count = 0;

  for (zil_lwb_t *l = list; l; l = l->lwb_next)
    count++;
  return zv_calloc (count + ZV_MAX_DEVS + 1, sizeof (zv_dev_io_t));
}

/*
 * Write the closed blocks (in one batch), after their in-place data
 * blocks, then flush every device they touched; mark them done.
 */
int
zv_zil_commit_issue (zv_zil_t *zl, zil_lwb_t *list)
{
  zv_dev_io_t *ios = zv_zil_commit_ios_alloc (list);
  uint64_t start = zv_now_ns ();
  int r = zv_zil_commit_prepare (zl, list, ios);

  if (r >= 0) {
    /* The sync-write class: txg writes yield while this runs. */
    zv_zio_sync_io_begin (zl->zl_spa);
    r = zv_dev_io_batch (ios, (size_t) r);
    zv_zio_sync_io_end (zl->zl_spa);
  }
  free (ios);
  return zv_zil_commit_complete (zl, list, r, start);
}

/* ---- commit ---- */

/*
 * The closed block that ticket t waits for: the first one in flight whose
 * records end past t, or 0 when t is in no closed block (not packed yet,
 * in the open block, or dropped).  No role needed: a block's slot is not
 * reused before the block is durable and the head on disk passed it, and
 * zs_end_ticket is set (nonzero) at its close.
 */
static uint64_t
commit_block_of (zv_zil_t *zl, uint64_t t)
{
  uint64_t s = zil_durable_seq (zl) + 1;

  for (unsigned i = 0; i < 64; i++, s++) {
    zil_slot_t *zs = zil_slot (zl, s);
    uint64_t end;

    if (atomic_load_explicit (&zs->zs_seq, memory_order_acquire) != s)
      return 0;
    end = atomic_load_explicit (&zs->zs_end_ticket, memory_order_seq_cst);
    if (end == 0)
      return 0;                 /* the open block */
    if (end > t)
      return s;
  }
  return 0;
}

/*
 * Sleep until block seq is durable (zv_zil_wake_block), at most ns.  The
 * sleeper count goes up before the last look at zl_durable_ticket, and
 * the waker raises that before it bumps zs_wake and looks at the count
 * (all seq_cst): either we see the ticket, or it sees us and FUTEX_WAIT
 * finds the word changed or is woken.  A block written ahead that just
 * went in flight is the same: its writer stores the state, then wakes
 * the block; a committer that sees it in flight does not sleep (it
 * finishes the block, zil_ahead.c).
 */
static void
commit_wait_block (zv_zil_t *zl, uint64_t seq, uint64_t t, uint64_t ns)
{
  zil_slot_t *zs = zil_slot (zl, seq);
  struct timespec ts = { .tv_sec = ns / 1000000000ull,
                         .tv_nsec = ns % 1000000000ull };
  uint32_t gen;

  atomic_fetch_add_explicit (&zs->zs_sleepers, 1, memory_order_seq_cst);
  gen = atomic_load_explicit (&zs->zs_wake, memory_order_seq_cst);
  if (atomic_load_explicit (&zl->zl_durable_ticket, memory_order_seq_cst) <= t
      && zil_error (zl) == 0
      && atomic_load_explicit (&zl->zl_wa_state, memory_order_seq_cst)
         != ZIL_AHEAD_INFLIGHT) {
    zil_stat_add (&zl->zl_stat_commit_waits, 1);
    syscall (SYS_futex, &zs->zs_wake, FUTEX_WAIT_PRIVATE, gen, &ts, NULL, 0);
  }
  atomic_fetch_sub_explicit (&zs->zs_sleepers, 1, memory_order_seq_cst);
}

/* Record a commit's latency in the log2 histogram. */
static void
commit_lat_record (zv_zil_t *zl, uint64_t ns)
{
  unsigned b = 0;

  while (b + 1 < ZIL_HIST_BUCKETS && (1ull << (b + 1)) <= ns)
    b++;
  zil_stat_add (&zl->zl_stat_lat_hist[b], 1);
  zil_stat_add (&zl->zl_stat_lat_sum, ns);
}

/* Fallback: everything logged so far reaches disk with its txg. */
static int
commit_by_txg (zv_zil_t *zl)
{
  zil_stat_add (&zl->zl_stat_fallbacks, 1);
  return zv_txg_wait_synced (zl->zl_tx, 0);
}

int
zv_zil_commit (zv_zil_t *zl, uint64_t ticket)
{
  uint64_t start, t = ticket;
  int r = 0;

  if (zl->zl_tun.zt_sync == ZV_SYNC_DISABLED)
    return 0;
  if (zl->zl_tun.zt_legacy_txg_commit)
    return zv_txg_wait_synced (zl->zl_tx, 0);
  if (t == 0)
    t = zil_next_ticket (zl) - 1;
  if (ticket == 0 && t != 0 && zl->zl_tun.zt_write_ahead == ZV_ZIL_WA_AUTO)
    zv_zil_ahead_note (zl, t);
  if (t == 0 || atomic_load_explicit (&zl->zl_durable_ticket,
                                      memory_order_acquire) > t)
    return 0;
  ZV_ASSERT3U (t, <, zil_next_ticket (zl));      /* a ticket handed out */
  start = zv_now_ns ();
  zil_stat_add (&zl->zl_stat_commits, 1);
  atomic_fetch_add_explicit (&zl->zl_active, 1, memory_order_seq_cst);
  zil_atomic_max (&zl->zl_commit_target, t);
  for (;;) {
    uint32_t seen = atomic_load_explicit (&zl->zl_wake, memory_order_seq_cst);
    uint64_t seq;
    int expect = 0;

    if (atomic_load_explicit (&zl->zl_durable_ticket,
                              memory_order_acquire) > t)
      break;
    if (zil_error (zl)) {
      r = commit_by_txg (zl);
      break;
    }
    if (zv_zil_ahead_settle (zl))
      continue;
    /* Our records are in a block in flight: only wait for it. */
    if ((seq = commit_block_of (zl, t)) != 0) {
      commit_wait_block (zl, seq, t, zv_zil_max_sleep_ns);
      continue;
    }
    if (atomic_compare_exchange_strong_explicit (&zl->zl_issuer, &expect, 1,
                                                 memory_order_acquire,
                                                 memory_order_relaxed)) {
      bool full;
      zil_lwb_t *closed = zv_zil_commit_pack (zl, &full, false);
      zil_lwb_t *open = zl->zl_open;
      bool mine_open = open && t >= open->lwb_start_ticket;
      uint64_t open_seq = open ? open->lwb_seq : 0;
      uint64_t age = open ? zv_now_ns () - open->lwb_open_ns : 0;

      commit_assert_ticket_order (zl);
      zv_zil_role_release (zl);
      if (closed) {
        (void) zv_zil_commit_issue (zl, closed);
        continue;
      }
      if (full) {
        r = commit_by_txg (zl);
        break;
      }
      if (atomic_load_explicit (&zl->zl_durable_ticket,
                                memory_order_seq_cst) > t)
        break;
      if (mine_open) {
        /* The open block waits for more records: one of its waiters
         * times it and closes it when it is old enough, the others
         * sleep until it is durable. */
        uint64_t to = commit_timeout (zl);
        int none = 0;

        if (atomic_compare_exchange_strong_explicit
            (&zil_slot (zl, open_seq)->zs_timer, &none, 1,
             memory_order_relaxed, memory_order_relaxed))
          commit_wait_block (zl, open_seq, t, age < to ? to - age : 1000);
        else
          commit_wait_block (zl, open_seq, t, zv_zil_max_sleep_ns);
      }
      else {
        zil_stat_add (&zl->zl_stat_commit_waits, 1);
        commit_sleep (zl, seen, commit_timeout (zl));
      }
      continue;
    }
    /* Somebody else is packing: our record will be in their block, or
     * we take the role when they let go. */
    commit_role_wait (zl, zv_zil_max_sleep_ns);
  }
  atomic_fetch_sub_explicit (&zl->zl_active, 1, memory_order_seq_cst);
  commit_lat_record (zl, zv_now_ns () - start);
  return r;
}

/* ---- stopping (zil.c closes the log) ---- */

void
zv_zil_commit_fini (zv_zil_t *zl)
{
  zv_zil_ahead_fini (zl);
  uint64_t end = zil_next_ticket (zl);
  for (uint64_t t = zil_packed (zl); t < end; t++) {
    zil_itx_t *itx = atomic_load_explicit (&zl->zl_itxs[t % zl->zl_itx_ring],
                                           memory_order_seq_cst);
    if (itx)
      commit_itx_free (itx);
  }
  commit_lwb_free (zl->zl_open);
}

/* ---- tunables (tunable.h): sync, logbias, flush, zil_write_ahead and
 * the three sizes and shares after them are read into
 * zv_zil_tunables_t by zv_zil_tunables_default, the itx ring's size by
 * zv_zil_open (zil.c), when a pool's log opens; the commit timeouts and the
 * ring's speed-up are read as they are used ---- */
static const char *const zv_zil_sync_names[] = {
  [ZV_SYNC_STANDARD] = "standard", [ZV_SYNC_ALWAYS] = "always",
  [ZV_SYNC_DISABLED] = "disabled", NULL
};
static const char *const zv_zil_logbias_names[] = {
  [ZV_LOGBIAS_LATENCY] = "latency", [ZV_LOGBIAS_THROUGHPUT] = "throughput",
  NULL
};
static const char *const zv_zil_flush_names[] = {
  [COMMIT_FLUSH_LOG] = "log", [COMMIT_FLUSH_TXG] = "txg", NULL
};
static const char *const zv_zil_write_ahead_names[] = {
  [ZV_ZIL_WA_OFF] = "off", [ZV_ZIL_WA_AUTO] = "auto",
  [ZV_ZIL_WA_ALWAYS] = "always", NULL
};

const zv_tunable_t zv_zil_tunable_table[] = {
  { .tn_name = "sync", .tn_module = "zil",
    ZV_TUNABLE_VAR_ENUM (zv_zil_sync_mode, zv_zil_sync_names, 3),
    .tn_default = ZV_SYNC_STANDARD, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the intent log",
    .tn_desc = "When writes are durable: standard after a flush or a FUA "
    "write, always when each write returns, disabled only once their txg "
    "syncs (flush and FUA do nothing; unsafe)." },
  { .tn_name = "logbias", .tn_module = "zil",
    ZV_TUNABLE_VAR_ENUM (zv_zil_logbias, zv_zil_logbias_names, 2),
    .tn_default = ZV_LOGBIAS_LATENCY, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the intent log",
    .tn_desc = "How large writes are logged: latency copies them into log "
    "blocks (in place from zil_immediate_write_sz without a log device), "
    "throughput writes their whole blocks in place and logs pointers." },
  { .tn_name = "flush", .tn_module = "zil",
    ZV_TUNABLE_VAR_ENUM (zv_zil_flush, zv_zil_flush_names, 2),
    .tn_default = COMMIT_FLUSH_LOG, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the intent log",
    .tn_desc = "What a flush or FUA waits for: log commits the intent "
    "log, txg waits for a txg sync (slow, kept to compare)." },
  { .tn_name = "zil_write_ahead", .tn_module = "zil",
    ZV_TUNABLE_VAR_ENUM (zv_zil_write_ahead_mode, zv_zil_write_ahead_names,
                         3),
    .tn_default = ZV_ZIL_WA_AUTO, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the intent log",
    .tn_desc = "Whether a write starts its log block's write before it "
    "returns, so the device writes it while the reply and the flush "
    "travel, and the flush only waits for it and flushes: auto while "
    "flushes follow writes one by one with no other commit under way (one "
    "client writing and flushing), always, or off (only commits write log "
    "blocks).  Needs the log's device to be a local one opened with "
    "O_DIRECT." },
  { .tn_name = "zil_write_ahead_window", .tn_module = "zil",
    ZV_TUNABLE_VAR_U64 (zv_zil_write_ahead_window_ns),
    .tn_default = 20000000, .tn_min = 0, .tn_max = 10000000000ull,
    .tn_unit = ZV_TUNABLE_UNIT_NS, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the intent log, logging a write",
    .tn_desc = "With zil_write_ahead=auto, how long after the last of "
    "two flushes in a row that followed writes one by one (with no other "
    "commit under way) writes still go ahead." },
  { .tn_name = "zil_immediate_write_sz", .tn_module = "zil",
    ZV_TUNABLE_VAR_UINT (zv_zil_immediate_write_sz),
    .tn_default = 32768, .tn_min = 4096, .tn_max = 16u << 20,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the intent log",
    .tn_desc = "Without a log device, writes of this size and more are "
    "written in place and only their block pointers logged.",
    .tn_zfs = "zfs_immediate_write_sz" },
  { .tn_name = "zil_max_copied", .tn_module = "zil",
    ZV_TUNABLE_VAR_UINT (zv_zil_max_copied),
    .tn_default = 7680, .tn_min = 0, .tn_max = 128u << 10,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the intent log",
    .tn_desc = "Writes up to this size that are committed at once (FUA, "
    "sync=always) are copied into their log record; the others and larger "
    "ones are read back when their log block is packed.",
    .tn_zfs = "zil_maxcopied" },
  { .tn_name = "zil_commit_timeout_percent", .tn_module = "zil",
    ZV_TUNABLE_VAR_UINT (zv_zil_commit_timeout_pct),
    .tn_default = 30, .tn_min = 0, .tn_max = 100,
    .tn_unit = ZV_TUNABLE_UNIT_PCT, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the intent log",
    .tn_desc = "How long an open log block waits for more records while "
    "others commit, as a share of the recent log-block latency (OpenZFS "
    "waits 10%; blocks written while earlier ones are in flight need "
    "longer to fill: 8 clients writing with FUA ran 1.13x with 30).",
    .tn_zfs = "zfs_commit_timeout_pct" },
  { .tn_name = "zil_itx_ring_shift", .tn_module = "zil",
    ZV_TUNABLE_VAR_UINT (zv_zil_itx_ring_shift),
    .tn_default = 18, .tn_min = 2, .tn_max = 24,
    .tn_unit = ZV_TUNABLE_UNIT_LOG2, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the intent log",
    .tn_desc = "Slots of the in-memory ring of records not yet packed "
    "into log blocks, as a power of two; a writer that finds it full "
    "waits." },
  { .tn_name = "zil_min_commit_timeout", .tn_module = "zil",
    ZV_TUNABLE_VAR_U64 (zil_min_commit_timeout_ns),
    .tn_default = 5000, .tn_min = 0, .tn_max = 1000000000,
    .tn_unit = ZV_TUNABLE_UNIT_NS, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "a committer waiting on an open log block",
    .tn_desc = "Floor of the commit timeout.",
    .tn_zfs = "zil_min_commit_timeout" },
  { .tn_name = "zil_max_commit_timeout", .tn_module = "zil",
    ZV_TUNABLE_VAR_U64 (zil_max_commit_timeout_ns),
    .tn_default = 1000000, .tn_min = 0, .tn_max = 1000000000,
    .tn_unit = ZV_TUNABLE_UNIT_NS, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "a committer waiting on an open log block",
    .tn_desc = "Ceiling of the commit timeout." },
  { .tn_name = "zil_max_sleep", .tn_module = "zil",
    ZV_TUNABLE_VAR_U64 (zv_zil_max_sleep_ns),
    .tn_default = 2000000, .tn_min = 1000, .tn_max = 1000000000,
    .tn_unit = ZV_TUNABLE_UNIT_NS, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "a committer waiting for another's log block",
    .tn_desc = "Longest a committer sleeps before it looks at the log "
    "again, a safety net against a missed wake-up." },
  { .tn_name = "zil_ring_full_speed_percent", .tn_module = "zil",
    ZV_TUNABLE_VAR_UINT (zv_zil_ring_full_speed_pct),
    .tn_default = 75, .tn_min = 51, .tn_max = 100,
    .tn_unit = ZV_TUNABLE_UNIT_PCT, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the intent log, opening a log block",
    .tn_desc = "Log ring fill at which the txg sync under way writes flat "
    "out; from half the ring to here its writes in flight rise from "
    "zio_async_write_min_active to zio_async_write_max_active." },
  ZV_TUNABLE_END
};
