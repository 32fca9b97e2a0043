/*
 * zil.c: the intent log, with a commit path that takes no lock.
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
 * Log blocks.  The log lives in a ring (a region of the pool, or the log
 * device); blocks follow each other in it, each as long as its records
 * (rounded to 4 KiB), at increasing logical positions (position % ring
 * size is the offset).  A block is placed when it is opened, right after
 * the previous one, so the address of the next block is known when a
 * block is sealed, and placing a log block never allocates (only the
 * in-place data blocks of large writes are allocated, when their log
 * block is issued).  Each block names the next block's address and checksum seed (guid,
 * seq + 1), and the highest seq durable (written and flushed, with every
 * block before it) when it was issued (lh_durable_seq); replay follows
 * the chain until a block does not verify (see "Where replay ends").  Ring
 * space is reused only behind the head recorded by a txg already on disk
 * (zl_persisted_pos): the head moves past a block once it is written and
 * every record in it belongs to a synced txg; past half the ring the log
 * kicks a txg to move it, and raises how many writes that txg's sync
 * keeps in flight as the ring fills further (zv_zio_write_cap_raise).  A
 * fresh chain (new guid) starts at every import.
 *
 * The commit path.  zv_zil_commit(t) publishes its target with an atomic
 * max (zl_commit_target) and loops:
 *   - done when zl_durable_ticket > t;
 *   - else it tries to become the issuer with a compare-and-swap on
 *     zl_issuer.  The issuer packs every published itx, in ticket order,
 *     into the open log block (dropping those whose txg has synced),
 *     closing blocks that fill up.  It closes the open block too when the
 *     block holds a record somebody waits for and the committer is alone,
 *     or the block is 7/8 full, or it is older than the commit timeout
 *     (10% of the recent log-block latency) with no earlier block in
 *     flight; otherwise more records may still join it, and an earlier
 *     block's completion is the moment to issue it (group commit).
 *     Then it gives up the role and, holding no role at all, writes the
 *     blocks it closed and flushes the devices they touched.  So another
 *     thread can pack and write the next block while this one's I/O is in
 *     flight: several log blocks are in flight at once.  With no block in
 *     flight, every ticket before the open block's first record is durable
 *     (in a done block, or dropped: its txg is on disk), and the issuer
 *     raises zl_durable_ticket to it (zil_durable_idle), since a change is
 *     logged after its txg hold is let go and its record may be dropped
 *     when a later one already opened a block: its committer must not
 *     wait for that block;
 *   - else it sleeps on a futex (zl_wake), for the commit timeout when its
 *     record waits in the open block or another thread holds the role, a
 *     few ms otherwise, and loops.
 * When a block's write and flush are done, its thread marks the slot done
 * and advances zl_durable_seq over every consecutive done block with a
 * compare-and-swap loop, raising zl_durable_ticket to the end ticket of
 * each; it then bumps zl_wake and wakes the sleepers, each of which
 * checks its own ticket: a waiter returns exactly when its records and
 * every earlier record are written and flushed.
 *
 * Write-ahead.  A client that flushes after every write (a database's
 * log, fio fsync=1) waits for the write's reply, sends the flush, and only
 * then would the log block be written and flushed: the device's two round
 * trips came after the transport's, in series.  So a write that nobody
 * commits yet may have its log block written at once, by the log's own
 * thread (started at the first such write, so after nbdkit's fork; a
 * forked child starts its own): zv_zil_write_ahead kicks it (a futex
 * word, woken only when it sleeps) and returns, and while the reply and
 * the flush travel, the thread takes the issuer role (try-CAS: a holder
 * is a committer, which writes what it waits for), packs what is
 * published and, when no block is in flight, closes the open block and
 * writes and flushes it like a committer (zil_issue).  The flush then
 * finds its ticket durable, or waits for the block in flight, as any
 * committer waits for another's.  When a block is in flight the records
 * stay in the open block and the thread's next pass, or a committer,
 * issues them together (group commit).  Nothing changes for durability:
 * a commit still returns only when its ticket is durable, and a block
 * written ahead is an ordinary block of the chain (a cut before its flush
 * leaves a torn tail or a block whose records were never acknowledged).
 * zt_write_ahead says when: always, off, or auto: once ZIL_WA_STREAK
 * flushes in a row (commits of everything; a FUA write commits itself)
 * each covered at most ZIL_WA_MAX_GAP tickets more than the one before
 * it (zil_wa_note), and for zil_write_ahead_window after the last of
 * them, so a stream of writes with rare flushes is logged by its flushes
 * as before, not one block per write.
 *
 * Memory ordering.  An itx is initialised before the release store that
 * publishes it; the issuer's acquire load of the ring slot sees it whole.
 * zl_packed is stored with release after the slots below it are cleared,
 * and a logger loads it (seq_cst) before it reuses a slot.  The issuer
 * role is taken with an acquire CAS and given up with a release store, so
 * the packing state (zl_packed, the open block) passes from one issuer to
 * the next whole.  A block's slot record (end ticket, max txg, next
 * position) is stored when the block is closed, before the same thread
 * writes it; its done flag is stored with release after the flush
 * returned, and whoever loads done == 1 with acquire (zil_advance,
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
 * txgs itself (zil_drop_synced) before it commits: they may have been
 * published after their txg's sync dropped what it could, and with
 * flush=txg no commit packs (it waited for room for ever).  After a
 * log write error (zl_error, sticky) nothing packs itxs any more, so a
 * logger that finds the itx ring full drops the published ones
 * (zil_drain): their txgs carry the changes.  A txg sync that fails marks
 * the log failed too (the pool is suspended): a logger that finds the
 * ring full there asks for a sync, which fails at once, marks the log
 * failed, drains the ring and returns (zil_ring_wait); only while another
 * thread holds the issuer role, or a logger with an earlier ticket has
 * not published yet, does it sleep, 1 ms at most at a time on zl_wake, so
 * it neither spins nor sleeps for ever; a drain that made room, and the
 * failure itself, wake the sleepers at once.  Its record is published and
 * dropped by the next drain.  The logging functions still return a
 * ticket; the request's caller (zvol.c, zvol_check_durable) sees the
 * suspended pool after logging and fails the request with EIO, since its
 * txg will never sync.
 *
 * Where replay ends.  The end of a log after a crash is always a block
 * that does not verify (never written, torn, or older).  Blocks are in
 * flight several at a time, so a crash can tear block S and leave S+1
 * whole; S+1's records were then never acknowledged, and S+1 was issued
 * before S was durable, so its lh_durable_seq is below S.  A block that
 * does not verify although a block written after it says it was durable
 * is therefore damage, not the end: acknowledged writes are lost with it.
 * The claim at import (and the replay, which judges the same way) walks
 * the chain (zil_walk), then past its stop: after a block that verifies
 * at its next_dva, after one that does not at every place it could end
 * (zil_probe: it was 4 KiB to zh_blksz long, or the ring wrapped), as
 * long as blocks of this chain are found; only seq S+1 of this guid can
 * verify there, so stale blocks cannot pose as later ones.  zil_decide
 * then tells a torn tail from damage, and a block that verifies but
 * makes no sense is judged like damage.  Damage fails the import with
 * messages saying which block, which records are lost as far as can be
 * told and how many acknowledged ones after it cannot be applied, unless
 * the import recovers: zil_recover=truncate cuts the chain there (the
 * header records the cut, ZV_ZH_F_TRUNCATED, so a crash during the
 * replay does not need the key again), discard starts a fresh chain.  A
 * damaged block with nothing durable after it (the newest, or one of the
 * newest batch) cannot be told from a torn tail: that is the limit.
 * After a rewind the txgs rewound past may have reused ring space behind
 * their head, so there such a block ends the log (cut, and said).  An
 * in-place block that does not verify is judged the same way, by its log
 * block's seq (zil_replay_nodata).
 *
 * Locks: none on the logging and commit paths (the log's thread only
 * sleeps on its futex word).  Of the txg engine's
 * callbacks (syncing context), zv_zil_synced takes the issuer role only
 * by try-CAS, and zv_zil_sync_header needs no role: it reads the block
 * state slots and writes only the sync-side head (zl_head, zl_pending_*).
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <inttypes.h>
#include <sched.h>
#include <pthread.h>
#include <unistd.h>
#include <stdatomic.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/random.h>

#include "tunable.h"
#include "zil.h"

/* Published itxs that may wait to be packed: 2^shift slots (a tunable,
 * read at open; tests make the ring small to fill it). */
unsigned zv_zil_itx_ring_shift = 18;

/* Ring fill (percent, above 50) at which a txg sync under way writes flat
 * out: from half the ring, where the log kicks a txg, to here, the sync's
 * writes in flight rise from the fewest to the most (zio.c).  A slow
 * writer's kicked txg syncs gently; a fast one's hurries before the ring
 * runs out and commits fall back to waiting for the txg. */
static unsigned zv_zil_ring_full_speed_pct = 75;

/* Boundary (volume offset) on which a write split over log blocks is cut. */
#define ZIL_SPLIT_ALIGN 4096u

/* Where a write's data goes in the log. */
enum zil_wr { ZIL_WR_COPIED = 0, ZIL_WR_NEED_COPY = 1, ZIL_WR_INDIRECT = 2 };

typedef struct zil_itx {
  uint64_t itx_ticket;
  uint64_t itx_txg;
  uint64_t itx_off;
  uint64_t itx_len;
  uint8_t itx_type;            /* enum zv_lr_type */
  uint8_t itx_wr;              /* enum zil_wr */
  uint8_t itx_flags;           /* lr_flags of its records */
  void *itx_data;              /* copied data */
} zil_itx_t;

/* A log block being filled or written (not shared while being filled). */
typedef struct zil_ind {
  uint32_t zi_off;             /* of the record in the block */
  uint64_t zi_txg;
  uint64_t zi_blkid;
} zil_ind_t;

typedef struct zil_lwb {
  uint64_t lwb_seq;
  uint64_t lwb_pos;            /* logical ring position */
  uint64_t lwb_next_pos;       /* of the next block (set at close) */
  uint32_t lwb_len;            /* bytes written (set at close) */
  uint8_t *lwb_buf;
  uint32_t lwb_nused;          /* record bytes */
  uint64_t lwb_max_txg;
  uint64_t lwb_start_ticket;   /* ticket of its first record */
  uint64_t lwb_end_ticket;
  uint64_t lwb_open_ns;
  zil_ind_t *lwb_ind;
  size_t lwb_nind, lwb_indcap;
  struct zil_lwb *lwb_next;
} zil_lwb_t;

/* State of a block in flight or waiting for its txg, by seq % ZIL_NSTATE. */
#define ZIL_NSTATE 16384u
typedef struct zil_slot {
  _Atomic uint64_t zs_seq;
  _Atomic uint64_t zs_max_txg;
  _Atomic uint64_t zs_end_ticket;
  _Atomic uint64_t zs_next_pos;   /* ring position of the block after it */
  _Atomic int zs_done;
} zil_slot_t;

#define ZIL_HIST_BUCKETS 40     /* commit latency, log2 ns buckets */

struct zv_zil {
  zv_spa_t *zl_spa;
  zv_dev_t *zl_logdev;
  zv_txg_t *zl_tx;
  zv_zil_ops_t zl_ops;
  void *zl_arg;
  zv_zil_tunables_t zl_tun;
  zv_zil_header_t zl_hdr;      /* ring geometry, guid, claim */

  /* Logging. */
  _Atomic uint64_t zl_next_ticket;
  _Atomic (zil_itx_t *) *zl_itxs;
  zil_itx_t *zl_itx_store;      /* slot i's itx lives at [i]: no malloc */
  uint64_t zl_itx_ring;         /* slots (a power of two) */
  bool zl_replaying;

  /* The issuer's state (owned by whoever holds zl_issuer). */
  _Atomic int zl_issuer;
  _Atomic uint64_t zl_packed;  /* next ticket to pack (read by loggers) */
  zil_lwb_t *zl_open;
  uint64_t zl_next_seq;        /* seq of the next block to open */
  _Atomic uint64_t zl_next_pos; /* and its logical ring position (the
                                  issuer's; atomic for the stats) */
  uint64_t zl_ring_size;       /* bytes */
  uint64_t zl_pack_done;       /* bytes of the itx at zl_packed packed */
  _Atomic bool zl_ready;       /* replay done: blocks may be written */

  /* Completion. */
  zil_slot_t *zl_slots;
  _Atomic uint64_t zl_durable_seq;    /* blocks <= this are durable */
  _Atomic uint64_t zl_durable_ticket; /* tickets < this are durable */
  _Atomic uint32_t zl_wake;           /* futex word */
  _Atomic uint64_t zl_commit_target;
  _Atomic int zl_active;              /* committers inside commit */
  _Atomic int zl_error;
  _Atomic uint64_t zl_latency_ns;     /* log-block write+flush, EWMA */

  /* Write-ahead (see the theory comment). */
  _Atomic uint64_t zl_wa_until_ns;    /* auto: commits follow writes */
  _Atomic uint64_t zl_wa_last_target; /* ticket of the last flush */
  _Atomic unsigned zl_wa_streak;      /* flushes in a row that did */
  _Atomic uint32_t zl_wa_kick;        /* futex word of the thread */
  _Atomic int zl_wa_sleeping;         /* the thread waits on it */
  _Atomic int zl_wa_state;            /* enum zil_wa_state */
  _Atomic bool zl_wa_stop;
  uint64_t zl_wa_gen;                 /* zil_fork_gen it was started in */
  pthread_t zl_wa_thread;

  /* Ring reuse (sync thread). */
  uint64_t zl_head;                   /* head written in the last header */
  uint64_t zl_head_pos;
  _Atomic uint64_t zl_persisted_head; /* seq, of a header on disk */
  _Atomic uint64_t zl_persisted_pos;  /* and its position */
  uint64_t zl_pending_head[ZV_TXG_SIZE]; /* per txg & ZV_TXG_MASK */
  uint64_t zl_pending_pos[ZV_TXG_SIZE];
  uint64_t zl_pending_guid[ZV_TXG_SIZE]; /* chain each header named */

  /* Stats. */
  _Atomic uint64_t zl_stat_lwbs, zl_stat_lwb_bytes;
  _Atomic uint64_t zl_stat_commits, zl_stat_commit_waits;
  _Atomic uint64_t zl_stat_rec_copied, zl_stat_rec_need_copy;
  _Atomic uint64_t zl_stat_rec_indirect, zl_stat_rec_free;
  _Atomic uint64_t zl_stat_rec_dropped, zl_stat_rec_nop, zl_stat_fallbacks;
  _Atomic uint64_t zl_stat_lat_sum, zl_stat_lat_hist[ZIL_HIST_BUCKETS];
  _Atomic uint64_t zl_stat_lwbs_ahead;
};

/* ---- tunables (the table at the end) ---- */

/* flush=: the intent log, or a txg sync as before the log existed. */
enum zil_flush { ZIL_FLUSH_LOG = 0, ZIL_FLUSH_TXG = 1 };

static unsigned zv_zil_sync_mode = ZV_SYNC_STANDARD;
static unsigned zv_zil_logbias = ZV_LOGBIAS_LATENCY;
static unsigned zv_zil_flush = ZIL_FLUSH_LOG;
static unsigned zv_zil_immediate_write_sz = 32768; /* zfs_immediate_write_sz */
static unsigned zv_zil_max_copied = 7680;          /* zil_maxcopied */
static unsigned zv_zil_commit_timeout_pct = 10;    /* zfs_commit_timeout_pct */
static unsigned zv_zil_write_ahead_mode = ZV_ZIL_WA_OFF;

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
  zt->zt_legacy_txg_commit = zv_zil_flush == ZIL_FLUSH_TXG;
  zt->zt_write_ahead = (enum zv_zil_write_ahead) zv_zil_write_ahead_mode;
}

/* Longest a waiter sleeps before it looks again (safety net). */
static uint64_t zil_max_sleep_ns = 2000000;
/* Commit timeout bounds, ns (zil_min_commit_timeout and a ceiling). */
static uint64_t zil_min_commit_timeout_ns = 5000;
static uint64_t zil_max_commit_timeout_ns = 1000000;
/* Auto write-ahead: on once ZIL_WA_STREAK flushes in a row each covered
 * at most ZIL_WA_MAX_GAP tickets more than the one before it, for
 * zil_write_ahead_window after the last of them. */
#define ZIL_WA_MAX_GAP 4u
#define ZIL_WA_STREAK 2u
static uint64_t zil_write_ahead_window_ns = 20000000;

/* ---- helpers ---- */

/* Device address of a logical ring position. */
static uint64_t
zil_pos_dva (zv_zil_t *zl, uint64_t pos)
{
  return zl->zl_hdr.zh_ring_dva + pos % zl->zl_ring_size;
}

/* A block may start at pos only if a whole zh_blksz fits before the
 * ring's end; else it starts the next lap. */
static uint64_t
zil_pos_fit (zv_zil_t *zl, uint64_t pos)
{
  if (pos % zl->zl_ring_size + zl->zl_hdr.zh_blksz > zl->zl_ring_size)
    pos = pos - pos % zl->zl_ring_size + zl->zl_ring_size;
  return pos;
}

static zil_slot_t *
zil_slot (zv_zil_t *zl, uint64_t seq)
{
  return &zl->zl_slots[seq % ZIL_NSTATE];
}

/* May block seq take its state slot?  Yes if the slot was never used, or
 * its last block, seq - ZIL_NSTATE, is done (for asserts). */
static inline bool
zil_slot_reusable (zil_slot_t *zs, uint64_t seq)
{
  uint64_t old = atomic_load_explicit (&zs->zs_seq, memory_order_acquire);

  return old == 0
    || (old + ZIL_NSTATE == seq
        && atomic_load_explicit (&zs->zs_done, memory_order_acquire));
}

/* The device a ring address is on. */
static zv_dev_t *
zil_ring_dev (zv_zil_t *zl, uint64_t dva)
{
  if (zl->zl_logdev)
    return zl->zl_logdev;
  return zl->zl_spa->spa_devs[ZV_DVA_VDEV (dva)];
}

/* Checksum seed of block seq of this chain. */
static uint64_t
zil_seed (uint64_t guid, uint64_t seq)
{
  return guid ^ (seq * 0x9e3779b97f4a7c15ull) ^ ZV_LWB_MAGIC;
}

/* Loads of the counters most paths poll: seq_cst, like every access that
 * names no weaker order (see "Memory ordering" above). */
static inline uint64_t
zil_packed (zv_zil_t *zl)
{
  return atomic_load_explicit (&zl->zl_packed, memory_order_seq_cst);
}

static inline uint64_t
zil_next_ticket (zv_zil_t *zl)
{
  return atomic_load_explicit (&zl->zl_next_ticket, memory_order_seq_cst);
}

static inline int
zil_error (zv_zil_t *zl)
{
  return atomic_load_explicit (&zl->zl_error, memory_order_seq_cst);
}

static inline uint64_t
zil_durable_seq (zv_zil_t *zl)
{
  return atomic_load_explicit (&zl->zl_durable_seq, memory_order_seq_cst);
}

/* Statistics counters (only ever printed). */
static inline void
zil_stat_add (_Atomic uint64_t *c, uint64_t n)
{
  atomic_fetch_add_explicit (c, n, memory_order_seq_cst);
}

static inline uint64_t
zil_stat_get (_Atomic uint64_t *c)
{
  return atomic_load_explicit (c, memory_order_seq_cst);
}

/* Raise an atomic to at least v. */
static void
zil_atomic_max (_Atomic uint64_t *p, uint64_t v)
{
  uint64_t cur = atomic_load_explicit (p, memory_order_seq_cst);

  while (cur < v
         && !atomic_compare_exchange_weak_explicit (p, &cur, v,
                                                    memory_order_seq_cst,
                                                    memory_order_seq_cst))
    ;
}

/* The issuer role is held (by the caller: nobody else packs). */
#define ZIL_ASSERT_ISSUER(zl) \
  ZV_ASSERT (atomic_load_explicit (&(zl)->zl_issuer, \
                                   memory_order_relaxed) == 1)

/*
 * The ticket order: durable <= packed <= next (reserved; published ones
 * lie between packed and next).  Loaded in that order, and each only
 * grows, so a later load can only be larger: the check holds however the
 * loads interleave with the writers.  Debug builds only.
 */
static inline void
zil_assert_ticket_order (zv_zil_t *zl)
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
zil_wake_all (zv_zil_t *zl)
{
  atomic_fetch_add_explicit (&zl->zl_wake, 1, memory_order_seq_cst);
  syscall (SYS_futex, &zl->zl_wake, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL,
           NULL, 0);
}

static void
zil_sleep (zv_zil_t *zl, uint32_t seen, uint64_t ns)
{
  struct timespec ts = { .tv_sec = ns / 1000000000ull,
                         .tv_nsec = ns % 1000000000ull };
  syscall (SYS_futex, &zl->zl_wake, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}

/* The commit timeout: a share of the recent log-block latency. */
static uint64_t
zil_commit_timeout (zv_zil_t *zl)
{
  uint64_t t = atomic_load_explicit (&zl->zl_latency_ns, memory_order_seq_cst)
    * zl->zl_tun.zt_commit_timeout_pct / 100;
  return ZV_MIN (ZV_MAX (t, zil_min_commit_timeout_ns),
                 zil_max_commit_timeout_ns);
}

/* ---- open / close ---- */

static void zil_wa_stop (zv_zil_t *zl);
static void zil_wa_note (zv_zil_t *zl, uint64_t t);

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
  return zl;
}

/* Done with an itx (its slot is cleared or about to be): its storage is
 * the slot's, only the copied data is freed. */
static void
zil_itx_free (zil_itx_t *itx)
{
  free (itx->itx_data);
  itx->itx_data = NULL;
}

static void
zil_lwb_free (zil_lwb_t *lwb)
{
  if (lwb == NULL)
    return;
  zv_buf_free (lwb->lwb_buf);
  free (lwb->lwb_ind);
  free (lwb);
}

void
zv_zil_close (zv_zil_t *zl)
{
  if (zl == NULL)
    return;
  zil_wa_stop (zl);
  uint64_t end = zil_next_ticket (zl);
  for (uint64_t t = zil_packed (zl); t < end; t++) {
    zil_itx_t *itx = atomic_load_explicit (&zl->zl_itxs[t % zl->zl_itx_ring],
                                           memory_order_seq_cst);
    if (itx)
      zil_itx_free (itx);
  }
  zil_lwb_free (zl->zl_open);
  free (zl->zl_itxs);
  free (zl->zl_itx_store);
  free (zl->zl_slots);
  free (zl);
}

/* ---- logging ---- */

/*
 * With the issuer role: drop the oldest published itxs, up to ticket end
 * and while their txg is at most max_txg; they will never be packed.  A
 * partly packed itx is dropped only if force (the log failed: nothing is
 * packed any more).  Returns the new zl_packed.
 */
static uint64_t
zil_drop_oldest (zv_zil_t *zl, uint64_t end, uint64_t max_txg, bool force)
{
  uint64_t packed = zil_packed (zl);

  ZIL_ASSERT_ISSUER (zl);
  while (packed < end && (force || zl->zl_pack_done == 0)) {
    _Atomic (zil_itx_t *) *slot = &zl->zl_itxs[packed % zl->zl_itx_ring];
    zil_itx_t *itx = atomic_load_explicit (slot, memory_order_acquire);

    if (itx == NULL || itx->itx_txg > max_txg)
      break;
    ZV_ASSERT3U (itx->itx_ticket, ==, packed);
    atomic_store_explicit (slot, NULL, memory_order_seq_cst);
    zil_itx_free (itx);
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
zil_drain (zv_zil_t *zl)
{
  uint64_t before = zil_packed (zl);
  int expect = 0;

  if (!atomic_compare_exchange_strong_explicit (&zl->zl_issuer, &expect, 1,
                                                memory_order_acquire,
                                                memory_order_relaxed))
    return;
  bool moved = zil_drop_oldest (zl, UINT64_MAX, UINT64_MAX, true) != before;
  atomic_store_explicit (&zl->zl_issuer, 0, memory_order_release);
  if (moved)
    zil_wake_all (zl);
}

static void zil_durable_idle (zv_zil_t *zl, uint64_t packed);

/*
 * Drop the oldest itxs of txgs up to txg (on disk), if the issuer role is
 * free (a holder drops them in its own pack), and wake the waiters.
 */
static void
zil_drop_synced (zv_zil_t *zl, uint64_t txg)
{
  int expect = 0;

  if (atomic_compare_exchange_strong_explicit (&zl->zl_issuer, &expect, 1,
                                               memory_order_acquire,
                                               memory_order_relaxed)) {
    uint64_t packed = zil_drop_oldest (zl, zil_next_ticket (zl), txg,
                                       false);

    zil_durable_idle (zl, packed);
    atomic_store_explicit (&zl->zl_issuer, 0, memory_order_release);
  }
  zil_wake_all (zl);
}

/*
 * Wait for room in the itx ring: sync a txg (which makes the oldest itxs
 * droppable) and commit what is there (packing or dropping it).  When the
 * pool is suspended (the txg sync fails for good), nothing will ever be
 * durable again: the log is marked failed and its itxs dropped, so the
 * writer returns instead of spinning; its caller's flush then fails.
 */
static void
zil_ring_wait (zv_zil_t *zl, uint64_t ticket)
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
          zil_wake_all (zl);
        }
      }
      else {
        /* Itxs published after their txg's sync dropped what it could
         * (a change is logged after its txg hold is let go) go only here
         * when nothing packs: with flush=txg a commit never does. */
        zil_drop_synced (zl, zv_txg_last_synced (zl->zl_tx));
        if (ticket - zil_packed (zl) >= zl->zl_itx_ring)
          (void) zv_zil_commit (zl, ticket - zl->zl_itx_ring);
      }
    }
    if (zil_error (zl) != 0)
      zil_drain (zl);
    /* No progress (another thread holds the issuer role): let it run. */
    if (zil_packed (zl) == before)
      zil_sleep (zl, atomic_load_explicit (&zl->zl_wake, memory_order_seq_cst),
                 1000000);
  }
}

/*
 * Take the next ticket and wait for room in the ring: the itx of its
 * slot, cleared, for the caller to fill and zil_publish.  Room means
 * ticket t - ring, the slot's last user, is packed or dropped: the slot
 * was cleared and its itx freed before zl_packed passed it, so nobody
 * looks at that storage any more.
 */
static zil_itx_t *
zil_claim (zv_zil_t *zl)
{
  uint64_t t = atomic_fetch_add_explicit (&zl->zl_next_ticket, 1,
                                          memory_order_seq_cst);
  zil_itx_t *itx;

  if (t - zil_packed (zl) >= zl->zl_itx_ring)
    zil_ring_wait (zl, t);
  ZV_ASSERT3U (t - zil_packed (zl), <, zl->zl_itx_ring);
  ZV_ASSERT (atomic_load_explicit (&zl->zl_itxs[t % zl->zl_itx_ring],
                                   memory_order_relaxed) == NULL);
  itx = &zl->zl_itx_store[t % zl->zl_itx_ring];
  memset (itx, 0, sizeof *itx);
  itx->itx_ticket = t;
  return itx;
}

/* Publish a claimed itx, filled. */
static uint64_t
zil_publish (zv_zil_t *zl, zil_itx_t *itx)
{
  atomic_store_explicit (&zl->zl_itxs[itx->itx_ticket % zl->zl_itx_ring],
                         itx, memory_order_release);
  return itx->itx_ticket;
}

/* Log one piece of a write. */
static uint64_t
zil_log_piece (zv_zil_t *zl, uint64_t txg, uint64_t off, uint64_t len,
               const void *data, enum zil_wr wr)
{
  zil_itx_t *itx = zil_claim (zl);

  itx->itx_type = ZV_LR_WRITE;
  itx->itx_txg = txg;
  itx->itx_off = off;
  itx->itx_len = len;
  itx->itx_wr = wr;
  if (wr == ZIL_WR_COPIED) {
    itx->itx_data = zv_alloc (len);
    memcpy (itx->itx_data, data, len);
  }
  return zil_publish (zl, itx);
}

/* How a piece of write data that does not go in place is logged. */
static enum zil_wr
zil_wr_small (zv_zil_t *zl, uint64_t len, bool commit)
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
    return zil_log_piece (zl, txg, off, len, data,
                          zil_wr_small (zl, len, commit));
  if (b0 > off)
    t = zil_log_piece (zl, txg, off, b0 - off, p,
                       zil_wr_small (zl, b0 - off, commit));
  t = zil_log_piece (zl, txg, b0, b1 - b0, NULL, ZIL_WR_INDIRECT);
  if (off + len > b1)
    t = zil_log_piece (zl, txg, b1, off + len - b1, p + (b1 - off),
                       zil_wr_small (zl, off + len - b1, commit));
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
  itx = zil_claim (zl);
  itx->itx_type = type;
  itx->itx_flags = (uint8_t) lr_flags;
  itx->itx_txg = txg;
  itx->itx_off = off;
  itx->itx_len = len;
  return zil_publish (zl, itx);
}

/* ---- packing (issuer role held) ---- */

/* Open block zl_next_seq if its slot is free; NULL when the ring is full. */
static zil_lwb_t *
zil_lwb_open (zv_zil_t *zl)
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
   * written length are (zil_append, zil_lwb_seal); clearing a whole
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
  atomic_store_explicit (&zs->zs_seq, seq, memory_order_release);
  zl->zl_next_seq = seq + 1;
  zl->zl_open = lwb;
  return lwb;
}

/* Close the open block; it joins the caller's list of blocks to write.
 * Every ticket before end_ticket is in this block or an earlier one, or
 * was dropped. */
static void
zil_lwb_close (zv_zil_t *zl, uint64_t end_ticket, zil_lwb_t **closed)
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
zil_room (zv_zil_t *zl, uint32_t need, uint64_t ticket, zil_lwb_t **closed)
{
  uint32_t cap = zl->zl_hdr.zh_blksz - sizeof (zv_lwb_hdr_t);

  ZV_VERIFY3U (need, <=, cap);
  if (zl->zl_open && zl->zl_open->lwb_nused + need > cap)
    zil_lwb_close (zl, ticket, closed);
  if (zl->zl_open == NULL && zil_lwb_open (zl) == NULL)
    return -EAGAIN;
  return 0;
}

/* Append a record header (and room for its payload) to the open block. */
static uint8_t *
zil_append (zv_zil_t *zl, const zil_itx_t *itx, uint32_t type,
            uint64_t off, uint64_t len, uint32_t payload)
{
  zil_lwb_t *lwb = zl->zl_open;
  zv_lr_t *lr = (zv_lr_t *) (lwb->lwb_buf + sizeof (zv_lwb_hdr_t)
                             + lwb->lwb_nused);
  uint32_t reclen = sizeof (zv_lr_t) + ZV_P2ROUNDUP (payload, 8);

  if (lwb->lwb_nused == 0)
    lwb->lwb_start_ticket = itx->itx_ticket;
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
zil_add_ind (zil_lwb_t *lwb, uint32_t at, uint64_t txg, uint64_t blkid)
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
zil_pack_itx (zv_zil_t *zl, zil_itx_t *itx, zil_lwb_t **closed)
{
  const uint32_t cap = zl->zl_hdr.zh_blksz - sizeof (zv_lwb_hdr_t);
  const uint32_t hdr = sizeof (zv_lr_t);
  uint32_t bs = zl->zl_ops.zo_blksz;
  int r;

  if (itx->itx_type != ZV_LR_WRITE) {
    if ((r = zil_room (zl, hdr, itx->itx_ticket, closed)) < 0)
      return r;
    zil_append (zl, itx, itx->itx_type, itx->itx_off, itx->itx_len, 0);
    zil_stat_add (&zl->zl_stat_rec_free, 1);
    return 0;
  }
  switch (itx->itx_wr) {
  case ZIL_WR_COPIED:
    if ((r = zil_room (zl, hdr + ZV_P2ROUNDUP (itx->itx_len, 8),
                       itx->itx_ticket, closed)) < 0)
      return r;
    memcpy (zil_append (zl, itx, ZV_LR_WRITE, itx->itx_off, itx->itx_len,
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

      if ((r = zil_room (zl, hdr + 8, itx->itx_ticket, closed)) < 0)
        return r;
      room = (cap - zl->zl_open->lwb_nused - hdr) & ~7u;
      n = (uint32_t) ZV_MIN (left, (uint64_t) room);
      /* A write split over blocks is split on 4 KiB boundaries of the
       * volume: if only the first blocks reach the disk, replay applies
       * whole 4 KiB blocks of it, never part of one. */
      if (n < left) {
        uint32_t cut = (uint32_t) ((off + n) % ZIL_SPLIT_ALIGN);
        n = cut < n ? n - cut : 0;
      }
      if (n == 0 || (n < left && n < ZIL_SPLIT_ALIGN)) {
        ZV_ASSERT3U (zl->zl_open->lwb_nused, >, 0);
        /* Not worth a sliver: the rest goes in the next block. */
        zil_lwb_close (zl, itx->itx_ticket, closed);
        continue;
      }
      dst = zil_append (zl, itx, ZV_LR_WRITE, off, n, n);
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

      if ((r = zil_room (zl, hdr + sizeof (zv_blkptr_t), itx->itx_ticket,
                         closed)) < 0)
        return r;
      at = zl->zl_open->lwb_nused;
      zil_append (zl, itx, ZV_LR_WRITE_IND, off, bs, sizeof (zv_blkptr_t));
      zil_add_ind (zl->zl_open, at, itx->itx_txg, off / bs);
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
zil_durable_idle (zv_zil_t *zl, uint64_t packed)
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
static zil_lwb_t *
zil_pack (zv_zil_t *zl, bool *full, bool ahead)
{
  uint64_t end = zil_next_ticket (zl);
  uint64_t synced = zv_txg_last_synced (zl->zl_tx);
  uint64_t packed = zil_packed (zl);
  zil_lwb_t *closed = NULL, *lwb;

  ZIL_ASSERT_ISSUER (zl);
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
      r = zil_pack_itx (zl, itx, &closed);
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
    zil_itx_free (itx);
    packed++;
    atomic_store_explicit (&zl->zl_packed, packed, memory_order_release);
  }

  lwb = zl->zl_open;
  if (lwb && lwb->lwb_nused > 0 && !*full) {
    /* A block still in flight: its completion is the moment to issue
     * this one (group commit: everything that arrived meanwhile shares
     * one write and one flush). */
    bool inflight = zil_durable_seq (zl) + 1 < lwb->lwb_seq;

    if (ahead && !inflight)
      zil_lwb_close (zl, packed, &closed);
    else if (atomic_load_explicit (&zl->zl_commit_target,
                                   memory_order_seq_cst)
             >= lwb->lwb_start_ticket) {
      uint32_t cap = zl->zl_hdr.zh_blksz - sizeof (zv_lwb_hdr_t);
      bool alone = atomic_load_explicit (&zl->zl_active,
                                         memory_order_seq_cst) <= 1;
      bool old = zv_now_ns () - lwb->lwb_open_ns >= zil_commit_timeout (zl);
      bool nearly_full = lwb->lwb_nused >= cap / 8 * 7;

      if (alone || nearly_full || (old && !inflight))
        zil_lwb_close (zl, packed, &closed);
    }
  }
  if (closed == NULL)
    zil_durable_idle (zl, packed);
  return closed;
}

/* ---- writing blocks (no role held) ---- */

/* Advance zl_durable_seq over consecutive done blocks; wake waiters. */
static void
zil_advance (zv_zil_t *zl)
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
    }
  }
  zil_wake_all (zl);
}

/* Seal a block: header and checksum over what will be written. */
static uint32_t
zil_lwb_seal (zv_zil_t *zl, zil_lwb_t *lwb)
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
   * a torn tail from a damaged block (zil_decide). */
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
 * Write the closed blocks (in one batch), after their in-place data
 * blocks, then flush every device they touched; mark them done.
 */
static int
zil_issue (zv_zil_t *zl, zil_lwb_t *list)
{
  size_t count = 0;
  for (zil_lwb_t *l = list; l; l = l->lwb_next)
    count++;
  zv_dev_io_t *ios = zv_calloc (count + ZV_MAX_DEVS + 1, sizeof *ios);
  bool touched[ZV_MAX_DEVS] = { false };

  zv_dev_t *ringdev = NULL;
  uint64_t start = zv_now_ns ();
  size_t n = 0, nlwb = 0;
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
    uint32_t len = zil_lwb_seal (zl, lwb);
    uint64_t dva = zil_pos_dva (zl, lwb->lwb_pos);
    zv_dev_t *dev = zil_ring_dev (zl, dva);
    ios[n++] = (zv_dev_io_t) {
      .di_dev = dev, .di_op = ZV_DEV_WRITE, .di_buf = lwb->lwb_buf,
      .di_offset = ZV_DVA_OFFSET (dva), .di_len = len,
    };
    ringdev = dev;
    nlwb++;
    zil_stat_add (&zl->zl_stat_lwbs, 1);
    zil_stat_add (&zl->zl_stat_lwb_bytes, len);
  }
  /* One flush per device touched, ordered after the writes. */
  for (unsigned d = 0; d < zl->zl_spa->spa_ndevs; d++)
    if (touched[d] || zl->zl_spa->spa_devs[d] == ringdev)
      ios[n++] = (zv_dev_io_t) { .di_dev = zl->zl_spa->spa_devs[d],
                                 .di_op = ZV_DEV_FLUSH };
  if (zl->zl_logdev)
    ios[n++] = (zv_dev_io_t) { .di_dev = zl->zl_logdev,
                               .di_op = ZV_DEV_FLUSH };
  if (r == 0) {
    /* The sync-write class: txg writes yield while this runs. */
    zv_zio_sync_io_begin (zl->zl_spa);
    r = zv_dev_io_batch (ios, n);
    zv_zio_sync_io_end (zl->zl_spa);
  }
  free (ios);
  if (r < 0) {
    zv_error ("intent log: writing %zu log block(s) failed (%s); flushes "
              "now wait for txg syncs", nlwb, strerror (-r));
    atomic_store_explicit (&zl->zl_error, r, memory_order_seq_cst);
  }
  else {
    /* Latency EWMA (7/8 old), per block batch. */
    uint64_t lat = zv_now_ns () - start;
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
    zv_buf_put (list->lwb_buf, zl->zl_hdr.zh_blksz);
    list->lwb_buf = NULL;
    zil_lwb_free (list);
    list = next;
  }
  zil_advance (zl);
  return r;
}

/* ---- commit ---- */

/* Record a commit's latency in the log2 histogram. */
static void
zil_lat_record (zv_zil_t *zl, uint64_t ns)
{
  unsigned b = 0;

  while (b + 1 < ZIL_HIST_BUCKETS && (1ull << (b + 1)) <= ns)
    b++;
  zil_stat_add (&zl->zl_stat_lat_hist[b], 1);
  zil_stat_add (&zl->zl_stat_lat_sum, ns);
}

/* Fallback: everything logged so far reaches disk with its txg. */
static int
zil_commit_by_txg (zv_zil_t *zl)
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
    zil_wa_note (zl, t);
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
    int expect = 0;

    if (atomic_load_explicit (&zl->zl_durable_ticket,
                              memory_order_acquire) > t)
      break;
    if (zil_error (zl)) {
      r = zil_commit_by_txg (zl);
      break;
    }
    if (atomic_compare_exchange_strong_explicit (&zl->zl_issuer, &expect, 1,
                                                 memory_order_acquire,
                                                 memory_order_relaxed)) {
      bool full;
      zil_lwb_t *closed = zil_pack (zl, &full, false);
      bool mine_open = zl->zl_open && t >= zl->zl_open->lwb_start_ticket
        && zil_durable_seq (zl) + 1 >= zl->zl_open->lwb_seq;

      zil_assert_ticket_order (zl);
      atomic_store_explicit (&zl->zl_issuer, 0, memory_order_release);
      if (closed) {
        (void) zil_issue (zl, closed);
        continue;
      }
      if (full) {
        r = zil_commit_by_txg (zl);
        break;
      }
      if (atomic_load_explicit (&zl->zl_durable_ticket,
                                memory_order_seq_cst) > t)
        break;
      zil_stat_add (&zl->zl_stat_commit_waits, 1);
      zil_sleep (zl, seen, mine_open ? zil_commit_timeout (zl)
                 : zil_max_sleep_ns);
      continue;
    }
    /* Somebody else is packing: our record will be in their block, or
     * we take the role when they let go. */
    zil_sleep (zl, seen, zil_commit_timeout (zl));
  }
  atomic_fetch_sub_explicit (&zl->zl_active, 1, memory_order_seq_cst);
  zil_lat_record (zl, zv_now_ns () - start);
  return r;
}

/* ---- write-ahead ---- */

enum zil_wa_state { ZIL_WA_NONE = 0, ZIL_WA_STARTING, ZIL_WA_RUNNING,
                    ZIL_WA_FAILED };

/* Bumped in a forked child: a log's thread started before the fork does
 * not exist there. */
static _Atomic uint64_t zil_fork_gen;
static pthread_once_t zil_fork_once = PTHREAD_ONCE_INIT;

static void
zil_atfork_child (void)
{
  atomic_fetch_add_explicit (&zil_fork_gen, 1, memory_order_seq_cst);
}

static void
zil_fork_init (void)
{
  ZV_VERIFY (pthread_atfork (NULL, NULL, zil_atfork_child) == 0);
}

/* A flush (a commit of everything, up to ticket t) begins: in auto mode,
 * note whether flushes follow writes one by one (t at most ZIL_WA_MAX_GAP
 * past the last flush's), ZIL_WA_STREAK times in a row.  Concurrent
 * flushers may race here: it is advice, and only moves the window. */
static void
zil_wa_note (zv_zil_t *zl, uint64_t t)
{
  uint64_t prev = atomic_exchange_explicit (&zl->zl_wa_last_target, t,
                                            memory_order_relaxed);
  /* t below prev: another flusher's later target came first. */
  bool close = t < prev || t - prev <= ZIL_WA_MAX_GAP;
  unsigned streak = close ? atomic_load_explicit (&zl->zl_wa_streak,
                                                  memory_order_relaxed) + 1
    : 0;

  streak = ZV_MIN (streak, ZIL_WA_STREAK);
  atomic_store_explicit (&zl->zl_wa_streak, streak, memory_order_relaxed);
  atomic_store_explicit (&zl->zl_wa_until_ns, streak == ZIL_WA_STREAK
                         ? zv_now_ns () + zil_write_ahead_window_ns : 0,
                         memory_order_relaxed);
}

/*
 * One pass of the log's thread: pack what is published and, when no block
 * is in flight, close the open block and write it (with its flush), here.
 * The issuer role is only tried: its holder is a committer, which writes
 * what it waits for, or the sync thread dropping records.
 */
static void
zil_wa_pass (zv_zil_t *zl)
{
  int expect = 0;
  bool full;
  zil_lwb_t *closed;

  if (!atomic_load_explicit (&zl->zl_ready, memory_order_seq_cst)
      || zil_error (zl) != 0
      || !atomic_compare_exchange_strong_explicit (&zl->zl_issuer, &expect,
                                                   1, memory_order_acquire,
                                                   memory_order_relaxed))
    return;
  closed = zil_pack (zl, &full, true);
  zil_assert_ticket_order (zl);
  atomic_store_explicit (&zl->zl_issuer, 0, memory_order_release);
  if (closed == NULL)
    return;
  for (zil_lwb_t *l = closed; l; l = l->lwb_next)
    zil_stat_add (&zl->zl_stat_lwbs_ahead, 1);
  (void) zil_issue (zl, closed);
}

static void *
zil_wa_main (void *arg)
{
  zv_zil_t *zl = arg;

  for (;;) {
    uint32_t seen = atomic_load_explicit (&zl->zl_wa_kick,
                                          memory_order_seq_cst);

    if (atomic_load_explicit (&zl->zl_wa_stop, memory_order_seq_cst))
      break;
    zil_wa_pass (zl);
    /* Sleep unless kicked since 'seen': with the kicker's increment
     * then load of zl_wa_sleeping (both seq_cst), either it sees the
     * flag and wakes us or we see its kick; FUTEX_WAIT compares in the
     * kernel. */
    atomic_store_explicit (&zl->zl_wa_sleeping, 1, memory_order_seq_cst);
    if (atomic_load_explicit (&zl->zl_wa_kick, memory_order_seq_cst) == seen)
      syscall (SYS_futex, &zl->zl_wa_kick, FUTEX_WAIT_PRIVATE, seen, NULL,
               NULL, 0);
    atomic_store_explicit (&zl->zl_wa_sleeping, 0, memory_order_seq_cst);
  }
  return NULL;
}

/* The log's thread runs in this process (started at the first write
 * ahead, so after nbdkit's fork); false when it cannot be had now. */
static bool
zil_wa_start (zv_zil_t *zl)
{
  uint64_t gen;
  int st = atomic_load_explicit (&zl->zl_wa_state, memory_order_acquire);
  int e;

  pthread_once (&zil_fork_once, zil_fork_init);
  gen = atomic_load_explicit (&zil_fork_gen, memory_order_seq_cst);
  if (st == ZIL_WA_RUNNING && zl->zl_wa_gen == gen)
    return true;
  if (st == ZIL_WA_STARTING || st == ZIL_WA_FAILED
      || !atomic_compare_exchange_strong_explicit (&zl->zl_wa_state, &st,
                                                   ZIL_WA_STARTING,
                                                   memory_order_acquire,
                                                   memory_order_relaxed))
    return false;
  /* Ours alone now (a forked child's copy of a parent's running thread
   * included: that thread is not here). */
  zl->zl_wa_gen = gen;
  atomic_store_explicit (&zl->zl_wa_sleeping, 0, memory_order_seq_cst);
  atomic_store_explicit (&zl->zl_wa_stop, false, memory_order_seq_cst);
  e = pthread_create (&zl->zl_wa_thread, NULL, zil_wa_main, zl);
  if (e != 0) {
    zv_warn ("intent log: cannot start its thread (%s); log blocks are "
             "written by their commits only", strerror (e));
    atomic_store_explicit (&zl->zl_wa_state, ZIL_WA_FAILED,
                           memory_order_release);
    return false;
  }
  atomic_store_explicit (&zl->zl_wa_state, ZIL_WA_RUNNING,
                         memory_order_release);
  return true;
}

/* Stop the log's thread, if this process runs one (the log is closing:
 * nothing logs or commits any more). */
static void
zil_wa_stop (zv_zil_t *zl)
{
  if (atomic_load_explicit (&zl->zl_wa_state, memory_order_acquire)
      != ZIL_WA_RUNNING
      || zl->zl_wa_gen != atomic_load_explicit (&zil_fork_gen,
                                                memory_order_seq_cst))
    return;
  atomic_store_explicit (&zl->zl_wa_stop, true, memory_order_seq_cst);
  atomic_fetch_add_explicit (&zl->zl_wa_kick, 1, memory_order_seq_cst);
  syscall (SYS_futex, &zl->zl_wa_kick, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL,
           NULL, 0);
  ZV_VERIFY (pthread_join (zl->zl_wa_thread, NULL) == 0);
  atomic_store_explicit (&zl->zl_wa_state, ZIL_WA_NONE, memory_order_release);
}

void
zv_zil_write_ahead (zv_zil_t *zl, uint64_t ticket)
{
  enum zv_zil_write_ahead mode = zl->zl_tun.zt_write_ahead;

  if (mode == ZV_ZIL_WA_OFF || ticket == 0 || zl->zl_replaying
      || zl->zl_tun.zt_sync == ZV_SYNC_DISABLED
      || zl->zl_tun.zt_legacy_txg_commit)
    return;
  if (mode == ZV_ZIL_WA_AUTO
      && zv_now_ns () >= atomic_load_explicit (&zl->zl_wa_until_ns,
                                               memory_order_relaxed))
    return;
  if (atomic_load_explicit (&zl->zl_durable_ticket, memory_order_acquire)
      > ticket || !zil_wa_start (zl))
    return;
  atomic_fetch_add_explicit (&zl->zl_wa_kick, 1, memory_order_seq_cst);
  if (atomic_load_explicit (&zl->zl_wa_sleeping, memory_order_seq_cst))
    syscall (SYS_futex, &zl->zl_wa_kick, FUTEX_WAKE_PRIVATE, 1, NULL, NULL,
             0);
}

/* ---- txg sync ---- */

/* Header for the objset of txg (sync thread). */
void
zv_zil_sync_header (zv_zil_t *zl, uint64_t txg, zv_zil_header_t *zh)
{
  uint64_t head = zl->zl_head, pos = zl->zl_head_pos;

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
}

/* Txg is on disk: its head frees slots; drop the records it made
 * durable (so nobody ever writes them). */
void
zv_zil_synced (zv_zil_t *zl, uint64_t txg)
{
  unsigned g = txg & ZV_TXG_MASK;

  /* Blocks of this chain may be written once a header naming it is on
   * disk (replay would not find them otherwise). */
  if (!zl->zl_replaying && zl->zl_pending_guid[g] == zl->zl_hdr.zh_guid) {
    zil_atomic_max (&zl->zl_persisted_pos, zl->zl_pending_pos[g]);
    zil_atomic_max (&zl->zl_persisted_head, zl->zl_pending_head[g]);
    atomic_store_explicit (&zl->zl_ready, true, memory_order_seq_cst);
  }
  zil_drop_synced (zl, txg);
}

/* ---- replay ---- */

/* Is dva a place where a block may start? */
static bool
zil_dva_ok (zv_zil_t *zl, uint64_t dva)
{
  uint64_t base = zl->zl_hdr.zh_ring_dva;

  return ZV_DVA_VDEV (dva) == ZV_DVA_VDEV (base) && dva >= base
    && (dva - base) % ZV_SECTOR == 0
    && dva - base + zl->zl_hdr.zh_blksz <= zl->zl_ring_size;
}

/* A log block read from the ring that verified. */
typedef struct zil_blk {
  uint64_t zb_seq;
  uint64_t zb_dva;
  uint64_t zb_next_dva;
  uint64_t zb_durable;         /* lh_durable_seq */
  uint32_t zb_nused;           /* record bytes */
} zil_blk_t;

/* Check a log block read from the ring as block seq of this chain. */
static int
zil_verify_block (zv_zil_t *zl, uint8_t *buf, uint64_t seq, zil_blk_t *zb)
{
  zv_lwb_hdr_t *lh = (zv_lwb_hdr_t *) buf;
  zv_cksum_t want = lh->lh_cksum, got;
  uint32_t len;

  if (lh->lh_magic != ZV_LWB_MAGIC || lh->lh_version != ZV_FORMAT_VERSION
      || lh->lh_seq != seq || lh->lh_next_seq != seq + 1
      || !zil_dva_ok (zl, lh->lh_next_dva)
      || lh->lh_nused > zl->zl_hdr.zh_blksz - sizeof *lh)
    return -1;
  len = ZV_P2ROUNDUP (sizeof *lh + lh->lh_nused, ZV_SECTOR);
  memset (&lh->lh_cksum, 0, sizeof lh->lh_cksum);
  zv_cksum_compute (buf, len, zil_seed (zl->zl_hdr.zh_guid, seq), &got);
  lh->lh_cksum = want;
  if (!zv_cksum_equal (&want, &got))
    return -1;
  zb->zb_seq = seq;
  zb->zb_next_dva = lh->lh_next_dva;
  zb->zb_durable = lh->lh_durable_seq;
  zb->zb_nused = lh->lh_nused;
  return 0;
}

/* Read block seq of the chain at dva and verify it: 0, or -1 when it is
 * not there (torn, damaged, stale, never written). */
static int
zil_read_block (zv_zil_t *zl, uint64_t dva, uint64_t seq, uint8_t *buf,
                zil_blk_t *zb)
{
  if (!zil_dva_ok (zl, dva))
    return -1;
  if (zv_dev_read (zil_ring_dev (zl, dva), buf, ZV_DVA_OFFSET (dva),
                   zl->zl_hdr.zh_blksz) < 0)
    return -1;
  if (zil_verify_block (zl, buf, seq, zb) < 0)
    return -1;
  zb->zb_dva = dva;
  return 0;
}

/*
 * Find block seq when the block before it, at dva, did not verify (so
 * its next_dva is unknown): it starts where a block of 4 KiB to zh_blksz
 * at dva ends, or at the ring's start when fewer than zh_blksz bytes are
 * left there (zil_pos_fit).  A candidate whose first sector lacks the
 * magic and seq is not read further.  The checksum is seeded with the
 * chain's guid and seq, so only block seq of this chain can pass: one
 * from an earlier chain, or an older block of this one, cannot.
 */
static int
zil_probe (zv_zil_t *zl, uint64_t dva, uint64_t seq, uint8_t *buf,
           zil_blk_t *zb)
{
  const zv_zil_header_t *zh = &zl->zl_hdr;
  const zv_lwb_hdr_t *lh = (const zv_lwb_hdr_t *) buf;
  uint64_t off = dva - zh->zh_ring_dva, prev = UINT64_MAX;

  for (uint64_t len = ZV_SECTOR; len <= zh->zh_blksz; len += ZV_SECTOR) {
    uint64_t at = off + len;
    uint64_t cand;

    if (at + zh->zh_blksz > zl->zl_ring_size)
      at = 0;
    if (at == prev)
      continue;
    prev = at;
    cand = zh->zh_ring_dva + at;
    if (zv_dev_read (zil_ring_dev (zl, cand), buf, ZV_DVA_OFFSET (cand),
                     ZV_SECTOR) < 0
        || lh->lh_magic != ZV_LWB_MAGIC || lh->lh_seq != seq)
      continue;
    if (zil_read_block (zl, cand, seq, buf, zb) == 0)
      return 0;
  }
  return -1;
}

/*
 * Records are hostile data.  A log block whose checksum verifies was
 * written whole, so a record in it that makes no sense is a bug or a
 * forgery, not a torn write: unless the import recovers (zil_recover,
 * zil_decide), it fails with EIO, saying which record and why, before
 * anything is claimed (docs/design.md, "Replay ends").  The claim at
 * import and the replay check records by the same rules
 * (zil_record_check, zv_zil_ind_check, zil_claims_take).
 */
static int
zil_bad_record (const zv_lr_t *lr, const char *why)
{
  zv_error ("intent log: record %" PRIu64 " (txg %" PRIu64 ", offset %"
            PRIu64 ") %s", lr->lr_seq, lr->lr_txg, lr->lr_offset, why);
  return -EIO;
}

/* The record at the start of 'room' bytes of log block blk's records:
 * its framing, type and flags; and, when it is to be replayed (txg >
 * claim), its range. */
static int
zil_record_check (zv_zil_t *zl, uint64_t blk, const zv_lr_t *lr,
                  uint32_t room, uint64_t claim)
{
  uint32_t payload;

  if (lr->lr_reclen < sizeof (zv_lr_t) || lr->lr_reclen % 8 != 0
      || lr->lr_reclen > room) {
    zv_error ("intent log: a record of log block %" PRIu64 " is framed "
              "wrongly (length %" PRIu32 ", %" PRIu32 " bytes left)", blk,
              lr->lr_reclen, room);
    return -EIO;
  }
  payload = lr->lr_reclen - sizeof (zv_lr_t);
  /* A flag this code does not know would change what the record
   * means: replaying it without would not be the acknowledged state. */
  if ((lr->lr_type == ZV_LR_WRITE && lr->lr_length > payload)
      || (lr->lr_type == ZV_LR_WRITE_IND
          && payload < sizeof (zv_blkptr_t))
      || lr->lr_type > ZV_LR_ZERO
      || (lr->lr_flags & ~(lr->lr_type == ZV_LR_ZERO
                           ? ZV_LR_F_ZERO_ALLOC : 0)) != 0) {
    zv_error ("intent log: record %" PRIu64 " of log block %" PRIu64
              " is inconsistent (type %" PRIu32 ", length %" PRIu64
              ", flags %#" PRIx64 ")", lr->lr_seq, blk, lr->lr_type,
              lr->lr_length, lr->lr_flags);
    return -EIO;
  }
  if (lr->lr_type != ZV_LR_NOP && lr->lr_txg > claim
      && zl->zl_ops.zo_volsize != 0
      && (lr->lr_offset > zl->zl_ops.zo_volsize
          || lr->lr_length > zl->zl_ops.zo_volsize - lr->lr_offset))
    return zil_bad_record (lr, "is past the end of the volume");
  return 0;
}

int
zv_zil_ind_check (zv_spa_t *spa, const zv_lr_t *lr, const zv_blkptr_t *bp,
                  uint32_t blksz)
{
  char why[192];

  why[0] = '\0';
  if (lr->lr_length != blksz || lr->lr_offset % blksz != 0)
    snprintf (why, sizeof why, "covers %" PRIu64 " bytes, not one volume "
              "block of %" PRIu32 " with its in-place block", lr->lr_length,
              blksz);
  else if (zv_bp_is_hole (bp))
    snprintf (why, sizeof why, "names an in-place block pointer that is "
              "a hole");
  else if (bp->bp_ncopies != 1)
    snprintf (why, sizeof why, "names an in-place block of %u copies, "
              "not 1", bp->bp_ncopies);
  else if (bp->bp_level != 0)
    snprintf (why, sizeof why, "names an in-place block at level %u, "
              "not 0", bp->bp_level);
  else if (bp->bp_type != ZV_BT_VOLDATA)
    snprintf (why, sizeof why, "names an in-place block of type %u, not "
              "volume data", bp->bp_type);
  else if (bp->bp_psize != blksz || bp->bp_lsize != blksz)
    snprintf (why, sizeof why, "names an in-place block of size %" PRIu32
              "/%" PRIu32 ", not the volume block size %" PRIu32,
              bp->bp_psize, bp->bp_lsize, blksz);
  else if (zv_zio_bp_check (spa, bp, "intent log record") < 0)
    snprintf (why, sizeof why, "names an in-place block outside the "
              "pool's data area");
  return why[0] ? zil_bad_record (lr, why) : 0;
}

/* In-place blocks named by the records to replay (see zil_check_block):
 * each with the first record that names it and where that record is
 * (log block, byte of its records), for the messages and for a
 * recovering import to cut the chain there. */
typedef struct zil_claim_ent {
  uint64_t ce_dva;
  zv_lr_t ce_lr;
  uint64_t ce_blk;
  uint32_t ce_off;
} zil_claim_ent_t;

typedef struct zil_claims {
  zil_claim_ent_t *cl_ent;
  size_t cl_n, cl_cap;
} zil_claims_t;

/* Records of txgs after the claim (those a replay applies), counted;
 * the others are in synced txgs and lose nothing when dropped. */
typedef struct zil_tally {
  uint64_t ty_records;
  uint64_t ty_min_txg, ty_max_txg;
} zil_tally_t;

static void
zil_tally_add (zil_tally_t *ty, uint64_t txg)
{
  if (ty->ty_records == 0 || txg < ty->ty_min_txg)
    ty->ty_min_txg = txg;
  ty->ty_max_txg = ZV_MAX (ty->ty_max_txg, txg);
  ty->ty_records++;
}

static void
zil_tally_merge (zil_tally_t *to, const zil_tally_t *from)
{
  if (from->ty_records == 0)
    return;
  if (to->ty_records == 0 || from->ty_min_txg < to->ty_min_txg)
    to->ty_min_txg = from->ty_min_txg;
  to->ty_max_txg = ZV_MAX (to->ty_max_txg, from->ty_max_txg);
  to->ty_records += from->ty_records;
}

/* "N record(s) of txgs A-B", for the messages. */
static const char *
zil_tally_text (const zil_tally_t *ty, char *buf, size_t len)
{
  if (ty->ty_records == 0)
    snprintf (buf, len, "no record");
  else if (ty->ty_min_txg == ty->ty_max_txg)
    snprintf (buf, len, "%" PRIu64 " record(s) of txg %" PRIu64,
              ty->ty_records, ty->ty_min_txg);
  else
    snprintf (buf, len, "%" PRIu64 " record(s) of txgs %" PRIu64 "-%"
              PRIu64, ty->ty_records, ty->ty_min_txg, ty->ty_max_txg);
  return buf;
}

/*
 * Where the part of the chain that replays stops.  The end of a log is
 * always a block that does not verify: after a crash, the next block was
 * never written, or torn, or is still an older one.  Whether that block
 * was acknowledged is told by the blocks written after it (zil_decide).
 */
enum zil_stop {
  ZIL_STOP_END = 0,     /* the whole ring was walked */
  ZIL_STOP_GAP,         /* block wk_stop_seq does not verify */
  ZIL_STOP_BAD,         /* it verifies, but makes no sense at wk_stop_off */
  ZIL_STOP_MARK,        /* a recovering import cut the chain here */
};

/* A block found after the stop, with the records counted from it. */
typedef struct zil_later {
  uint64_t la_seq;
  uint64_t la_durable;         /* its lh_durable_seq */
  zil_tally_t la_tally;
} zil_later_t;

typedef struct zil_walk {
  enum zil_stop wk_stop;
  uint64_t wk_stop_seq;        /* replay applies the blocks before it... */
  uint64_t wk_stop_dva;        /* (where it is or would be) */
  uint32_t wk_stop_off;        /* ...and this many bytes of its records */
  uint64_t wk_nblocks;         /* blocks replayed whole */
  zil_tally_t wk_replay;       /* the records the replay applies */
  bool wk_have_last;           /* the last record before the stop */
  uint64_t wk_last_ticket, wk_last_txg;
  /* From the stop on (never replayed): */
  zil_later_t *wk_later;       /* the blocks found, in seq order: the */
  size_t wk_nlater, wk_latercap; /* stop block first if it verified */
  bool wk_stop_read;           /* (it did) */
  uint64_t wk_missing;         /* blocks between them that do not verify */
  bool wk_have_first;          /* the first record found after the stop */
  uint64_t wk_first_ticket, wk_first_txg;
  /* The highest lh_durable_seq of every block that verified, and the
   * block that says so. */
  uint64_t wk_durable, wk_durable_by;
} zil_walk_t;

static void
zil_walk_free (zil_walk_t *wk)
{
  free (wk->wk_later);
  wk->wk_later = NULL;
  wk->wk_nlater = wk->wk_latercap = 0;
}

/* A verified block's word on what was durable when it was issued. */
static void
zil_walk_durable (zil_walk_t *wk, const zil_blk_t *zb)
{
  if (zb->zb_durable > wk->wk_durable) {
    wk->wk_durable = zb->zb_durable;
    wk->wk_durable_by = zb->zb_seq;
  }
}

/* Count the records of block zb from byte 'from' on, as far as their
 * framing holds: it is past the stop, so nothing is checked or applied. */
static void
zil_walk_later (zil_walk_t *wk, const zil_blk_t *zb, const uint8_t *recs,
                uint32_t from, uint64_t claim)
{
  zil_later_t *la;

  ZV_GROW (wk->wk_later, wk->wk_nlater, wk->wk_latercap, 16);
  la = &wk->wk_later[wk->wk_nlater++];
  memset (la, 0, sizeof *la);
  la->la_seq = zb->zb_seq;
  la->la_durable = zb->zb_durable;
  for (uint32_t pos = from; pos + sizeof (zv_lr_t) <= zb->zb_nused;) {
    const zv_lr_t *lr = (const zv_lr_t *) (recs + pos);

    if (lr->lr_reclen < sizeof (zv_lr_t) || lr->lr_reclen % 8 != 0
        || lr->lr_reclen > zb->zb_nused - pos)
      break;
    if (!wk->wk_have_first) {
      wk->wk_have_first = true;
      wk->wk_first_ticket = lr->lr_seq;
      wk->wk_first_txg = lr->lr_txg;
    }
    if (lr->lr_type != ZV_LR_NOP && lr->lr_txg > claim)
      zil_tally_add (&la->la_tally, lr->lr_txg);
    pos += lr->lr_reclen;
  }
}

/* Records found from the stop on: all of them (*all), and those of
 * blocks a later block says were durable (*acked: acknowledged). */
static void
zil_walk_dropped (const zil_walk_t *wk, zil_tally_t *all, zil_tally_t *acked)
{
  memset (all, 0, sizeof *all);
  memset (acked, 0, sizeof *acked);
  for (size_t i = 0; i < wk->wk_nlater; i++) {
    zil_tally_merge (all, &wk->wk_later[i].la_tally);
    if (wk->wk_later[i].la_seq <= wk->wk_durable)
      zil_tally_merge (acked, &wk->wk_later[i].la_tally);
  }
}

/*
 * Pass 1, per block of the part that replays: check every record that
 * starts before byte 'lim' as the replay will, and their order; collect
 * the in-place blocks that records to replay point at (zil_claims_take
 * claims them once the whole part passed); count them.  -EIO with the
 * bad record's byte in *bad.
 */
static int
zil_check_block (zv_zil_t *zl, const zil_blk_t *zb, const uint8_t *recs,
                 uint32_t lim, uint64_t claim, zil_claims_t *cl,
                 zil_walk_t *wk, uint32_t *bad)
{
  uint32_t pos = 0;

  while (pos + sizeof (zv_lr_t) <= lim) {
    const zv_lr_t *lr = (const zv_lr_t *) (recs + pos);
    int r = zil_record_check (zl, zb->zb_seq, lr, zb->zb_nused - pos,
                              claim);

    if (r == 0 && wk->wk_have_last && lr->lr_seq < wk->wk_last_ticket) {
      char why[96];
      snprintf (why, sizeof why, "comes after record %" PRIu64 ": the "
                "log's order is broken", wk->wk_last_ticket);
      r = zil_bad_record (lr, why);
    }
    if (r == 0 && lr->lr_type == ZV_LR_WRITE_IND && lr->lr_txg > claim) {
      zv_blkptr_t bp;
      bool dup = false;

      memcpy (&bp, lr + 1, sizeof bp);
      r = zv_zil_ind_check (zl->zl_spa, lr, &bp, zl->zl_ops.zo_blksz);
      for (size_t i = 0; r == 0 && cl && i < cl->cl_n && !dup; i++)
        dup = cl->cl_ent[i].ce_dva == bp.bp_dva[0];
      if (r == 0 && cl && !dup) {
        ZV_GROW (cl->cl_ent, cl->cl_n, cl->cl_cap, 64);
        cl->cl_ent[cl->cl_n++] = (zil_claim_ent_t) {
          .ce_dva = bp.bp_dva[0], .ce_lr = *lr, .ce_blk = zb->zb_seq,
          .ce_off = pos,
        };
      }
    }
    if (r < 0) {
      *bad = pos;
      return r;
    }
    wk->wk_have_last = true;
    wk->wk_last_ticket = lr->lr_seq;
    wk->wk_last_txg = lr->lr_txg;
    if (lr->lr_type != ZV_LR_NOP && lr->lr_txg > claim)
      zil_tally_add (&wk->wk_replay, lr->lr_txg);
    pos += lr->lr_reclen;
  }
  return 0;
}

/*
 * Walk the chain from the head: the part that replays (checked, its
 * in-place blocks collected into cl unless NULL), up to the first block
 * that does not verify or makes no sense, or up to a cut at (lim_seq,
 * lim_off) when lim_seq is not 0: the header's (ZV_ZH_F_TRUNCATED), or
 * one at a record that zil_claims_take refused (lim_bad).  Then on past
 * the stop, only counting: each block after one that verifies is where
 * that one says; after one that does not, zil_probe looks for it.  The
 * walk ends where neither finds the next block, or after as many blocks
 * as the ring holds.
 */
static void
zil_walk (zv_zil_t *zl, uint64_t claim, uint64_t lim_seq, uint32_t lim_off,
          bool lim_bad, zil_claims_t *cl, zil_walk_t *wk)
{
  const zv_zil_header_t *zh = &zl->zl_hdr;
  uint8_t *buf = zv_buf_get (zh->zh_blksz);
  const uint8_t *recs = buf + sizeof (zv_lwb_hdr_t);
  uint64_t budget = zl->zl_ring_size / ZV_SECTOR;
  uint64_t dva = zil_pos_dva (zl, zh->zh_head_pos), seq = zh->zh_head_seq;
  zil_blk_t zb;
  bool have = false;            /* zb is block seq, which verified */
  uint32_t from = 0;            /* its bytes counted as past the stop */

  memset (wk, 0, sizeof *wk);
  for (;; seq++, budget--) {
    uint32_t bad = 0;

    if (budget == 0) {
      wk->wk_stop = ZIL_STOP_END;
      break;
    }
    have = zil_read_block (zl, dva, seq, buf, &zb) == 0;
    if (!have) {
      wk->wk_stop = seq == lim_seq && !lim_bad ? ZIL_STOP_MARK
        : ZIL_STOP_GAP;
      break;
    }
    /* A block cannot have been durable before it was written. */
    if (zb.zb_durable >= seq) {
      zv_error ("intent log: log block %" PRIu64 " says block %" PRIu64
                " was durable when it was issued", seq, zb.zb_durable);
      wk->wk_stop = ZIL_STOP_BAD;
      from = zb.zb_nused;
      break;
    }
    if (seq == lim_seq) {
      uint32_t lim = ZV_MIN (lim_off, zb.zb_nused);

      from = lim;
      wk->wk_stop = lim_bad ? ZIL_STOP_BAD : ZIL_STOP_MARK;
      if (zil_check_block (zl, &zb, recs, lim, claim, cl, wk, &bad) < 0) {
        wk->wk_stop = ZIL_STOP_BAD;
        from = bad;
      }
      zil_walk_durable (wk, &zb);
      break;
    }
    if (zil_check_block (zl, &zb, recs, zb.zb_nused, claim, cl, wk,
                         &bad) < 0) {
      wk->wk_stop = ZIL_STOP_BAD;
      from = bad;
      zil_walk_durable (wk, &zb);
      break;
    }
    zil_walk_durable (wk, &zb);
    wk->wk_nblocks++;
    dva = zb.zb_next_dva;
  }
  wk->wk_stop_seq = seq;
  wk->wk_stop_dva = dva;
  wk->wk_stop_off = wk->wk_stop == ZIL_STOP_GAP ? 0 : from;
  if (wk->wk_stop == ZIL_STOP_END) {
    zv_buf_put (buf, zh->zh_blksz);
    return;
  }
  if (have) {
    zil_walk_later (wk, &zb, recs, from, claim);
    wk->wk_stop_read = true;
  }

  /* Past the stop. */
  for (uint64_t missing = 0; budget-- > 0;) {
    uint64_t next = seq + 1;

    if (have) {
      uint64_t at = zb.zb_next_dva;
      have = zil_read_block (zl, at, next, buf, &zb) == 0;
      if (!have) {
        missing++;
        seq = next;
        dva = at;
        continue;
      }
    }
    else if (zil_probe (zl, dva, next, buf, &zb) < 0)
      break;
    else
      have = true;
    if (zb.zb_durable >= next)
      break;                    /* nonsense: follow it no further */
    wk->wk_missing += missing;
    missing = 0;
    seq = next;
    dva = zb.zb_dva;
    zil_walk_durable (wk, &zb);
    zil_walk_later (wk, &zb, recs, 0, claim);
  }
  zv_buf_put (buf, zh->zh_blksz);
}

/* How zil_decide judged a walk. */
enum zil_verdict {
  ZIL_ENDS = 0,          /* the log ends at the stop: replay up to it */
  ZIL_CUT = 1,           /* damage or a bad record, cut there (recovery) */
};

/* Who asks: the read-write import's claim, the replay after it (which
 * says again only what the claim did not), a read-only import. */
enum zil_judge { ZIL_JUDGE_CLAIM, ZIL_JUDGE_REPLAY, ZIL_JUDGE_INSPECT };

/*
 * What the stop of a walk means, and what the import does about it.
 *
 * A block that does not verify is the log's torn tail unless a block
 * written after it says it was durable (lh_durable_seq >= its seq): log
 * blocks are written several at a time, so a crash may tear block S and
 * leave S+1 whole, but S+1's records were then never acknowledged, and
 * S+1 was issued before S was durable, so it says less.  A block that
 * was durable and does not verify is damage: acknowledged writes are
 * lost with it, and every later record depends on it (a later write may
 * have overwritten part of a lost one, or the other way round).  So is a
 * block that verifies but makes no sense.  Either way the import fails
 * (-EIO) unless 'recover' says otherwise: ZV_ZIL_RECOVER_TRUNCATE cuts
 * the log there (ZIL_CUT).  After a rewind ('rewound': the import took
 * an older txg than the newest), a durable block that does not verify
 * may have been overwritten legitimately: the txgs rewound past moved
 * the head beyond it and let the ring reuse its space.  It then ends the
 * log, cut there and said, as the rewind loses those txgs anyway.  A read-only import (ZIL_JUDGE_INSPECT),
 * which never replays, only reports.  The messages say which block, where it is, which
 * records are lost as far as can be told (between the last record
 * before the stop and the first found after it), how many acknowledged
 * records after it cannot be applied, and how to import anyway.
 */
static int
zil_decide (zv_zil_t *zl, const zil_walk_t *wk, enum zv_zil_recover recover,
            enum zil_judge judge, bool rewound)
{
  uint64_t s = wk->wk_stop_seq, by = wk->wk_durable_by;
  size_t nlater = wk->wk_nlater - (wk->wk_stop_read ? 1 : 0);
  zil_tally_t all, acked, whole;
  char t1[96], t2[96], lost[192], where[160], missing[64];

  if (wk->wk_stop == ZIL_STOP_END || wk->wk_stop == ZIL_STOP_MARK)
    return ZIL_ENDS;
  zil_walk_dropped (wk, &all, &acked);
  if (wk->wk_stop == ZIL_STOP_GAP && wk->wk_durable < s) {
    if (nlater > 0 && judge != ZIL_JUDGE_REPLAY)
      zv_info ("intent log: log block %" PRIu64 " does not verify and "
               "no block after it says it was durable: it is the torn "
               "tail of the log; the %zu block(s) found after it (%s) "
               "were never acknowledged", s, nlater,
               zil_tally_text (&all, t1, sizeof t1));
    return ZIL_ENDS;
  }

  snprintf (where, sizeof where, "%s offset %" PRIu64,
            zv_dev_path (zil_ring_dev (zl, wk->wk_stop_dva)),
            ZV_DVA_OFFSET (wk->wk_stop_dva));
  /* The lost records lie between the last one before the stop and the
   * first one found after it (tickets are the log's order). */
  if (wk->wk_have_last && wk->wk_have_first)
    snprintf (lost, sizeof lost, "between record %" PRIu64 " (txg %" PRIu64
              ") and record %" PRIu64 " (txg %" PRIu64 ")",
              wk->wk_last_ticket, wk->wk_last_txg, wk->wk_first_ticket,
              wk->wk_first_txg);
  else if (wk->wk_have_first)
    snprintf (lost, sizeof lost, "before record %" PRIu64 " (txg %" PRIu64
              ")", wk->wk_first_ticket, wk->wk_first_txg);
  else if (wk->wk_have_last)
    snprintf (lost, sizeof lost, "after record %" PRIu64 " (txg %" PRIu64
              ")", wk->wk_last_ticket, wk->wk_last_txg);
  else
    snprintf (lost, sizeof lost, "it held");
  /* Name the first block that vouches for it. */
  for (size_t i = 0; i < wk->wk_nlater; i++)
    if (wk->wk_later[i].la_seq > s && wk->wk_later[i].la_durable >= s) {
      by = wk->wk_later[i].la_seq;
      break;
    }
  if (wk->wk_stop == ZIL_STOP_GAP && rewound) {
    zv_error ("intent log: log block %" PRIu64 " (%s) does not verify, but "
              "block %" PRIu64 " says it was durable; the import rewound "
              "past txgs that may have reused its space, so the log ends "
              "there: replaying %s, dropping %s found after it", s, where,
              by, zil_tally_text (&wk->wk_replay, t2, sizeof t2),
              zil_tally_text (&all, t1, sizeof t1));
    return judge == ZIL_JUDGE_INSPECT ? ZIL_ENDS : ZIL_CUT;
  }
  if (wk->wk_stop == ZIL_STOP_GAP)
    zv_error ("intent log: log block %" PRIu64 " (%s) is damaged: it does "
              "not verify, but block %" PRIu64 ", written after it, says "
              "it was durable; the acknowledged records %s are lost with "
              "it", s, where, by, lost);
  else
    zv_error ("intent log: log block %" PRIu64 " (%s) verifies but holds "
              "nonsense (above)%s", s, where,
              wk->wk_durable >= s ? "; it was acknowledged" : "");
  missing[0] = '\0';
  if (wk->wk_missing > 0)
    snprintf (missing, sizeof missing, ", %" PRIu64 " more missing",
              wk->wk_missing);
  zv_error ("intent log: %s %s in %zu later block(s)%s, %" PRIu64 " of "
            "them acknowledged, cannot be applied without it",
            wk->wk_stop == ZIL_STOP_GAP ? "after it," : "from there on,",
            zil_tally_text (&all, t1, sizeof t1), nlater, missing,
            acked.ty_records);
  whole = wk->wk_replay;
  zil_tally_merge (&whole, &all);
  zil_tally_text (&wk->wk_replay, t2, sizeof t2);
  if (judge == ZIL_JUDGE_INSPECT) {
    zv_error ("intent log: a read-only import does not replay the log; a "
              "read-write import fails unless zil_recover=truncate (keeps "
              "what precedes it: %s) or zil_recover=discard", t2);
    return ZIL_ENDS;
  }
  if (recover == ZV_ZIL_RECOVER_TRUNCATE) {
    zv_error ("intent log: zil_recover=truncate: replaying what precedes "
              "log block %" PRIu64 "%s (%s), dropping the rest (%s)", s,
              wk->wk_stop == ZIL_STOP_GAP ? "" : "'s bad record", t2,
              zil_tally_text (&all, t1, sizeof t1));
    return ZIL_CUT;
  }
  zv_error ("intent log: the import fails; to import anyway, "
            "zil_recover=truncate keeps what precedes it (%s) and drops "
            "the rest, zil_recover=discard drops the whole log (%s)", t2,
            zil_tally_text (&whole, t1, sizeof t1));
  return -EIO;
}

static int
zil_claim_ent_cmp (const void *a, const void *b)
{
  uint64_t x = ((const zil_claim_ent_t *) a)->ce_dva;
  uint64_t y = ((const zil_claim_ent_t *) b)->ce_dva;

  return x < y ? -1 : x > y;
}

/*
 * Pass 2 of the claim: the ownership rule, then the claims.  A record
 * may own an in-place block only when its space is free in the
 * allocator as imported, or on a pending deferred-free list (a deferred
 * free of an older txg whose space the in-place write reused before the
 * crash): space that is allocated and live (the objset, an indirect
 * block, a space map, a volume block of the synced tree, the log ring)
 * would be freed after replay while still in use.  Space the bitmap
 * shows allocated is the record's too when the synced tree does not
 * use it ('live', given the record's volume block: the pool's owners,
 * after the tree path to that block is read): a txg sync that ran while the
 * in-place write was allocated stored its bit.  One more case is
 * sound: a claim already made (zh_claim_txg set, by this import or an
 * earlier one that synced it and crashed before the replay) left its
 * blocks allocated, so they are taken again only when the chain names
 * exactly the set that claim recorded (ZV_ZH_F_CLAIM_SET: count and
 * checksum of the sorted addresses).  Nothing is claimed unless every
 * block passes; on success the header records the set.  On failure
 * *bad is the record refused.
 */
static int
zil_claims_take (zv_zil_t *zl, zil_claims_t *cl, zv_zil_header_t *zh,
                 uint64_t claim, zv_zil_live_fn live, void *live_arg,
                 const zil_claim_ent_t **bad)
{
  zv_alloc_t *a = zl->zl_spa->spa_alloc;
  uint32_t bs = zl->zl_ops.zo_blksz;
  uint64_t *dvas;
  zv_cksum_t ck;
  bool same;

  if (cl->cl_n > 1)             /* cl_ent is NULL when empty */
    qsort (cl->cl_ent, cl->cl_n, sizeof *cl->cl_ent, zil_claim_ent_cmp);
  for (size_t i = 1; i < cl->cl_n; i++) {
    uint64_t p = cl->cl_ent[i - 1].ce_dva, q = cl->cl_ent[i].ce_dva;
    if (ZV_DVA_VDEV (p) == ZV_DVA_VDEV (q) && q - p < bs) {
      /* The later of the two records is the one to blame. */
      const zil_claim_ent_t *x = &cl->cl_ent[i - 1], *y = &cl->cl_ent[i];
      char why[128];

      if (x->ce_lr.lr_seq > y->ce_lr.lr_seq) {
        x = &cl->cl_ent[i];
        y = &cl->cl_ent[i - 1];
      }
      snprintf (why, sizeof why, "names an in-place block that overlaps "
                "that of record %" PRIu64, x->ce_lr.lr_seq);
      *bad = y;
      return zil_bad_record (&y->ce_lr, why);
    }
  }
  dvas = zv_calloc (cl->cl_n + 1, sizeof *dvas);
  for (size_t i = 0; i < cl->cl_n; i++)
    dvas[i] = cl->cl_ent[i].ce_dva;
  memset (&ck, 0, sizeof ck);
  zv_cksum_compute (dvas, cl->cl_n * sizeof *dvas, zh->zh_guid, &ck);
  free (dvas);
  same = zh->zh_claim_txg != 0 && (zh->zh_flags & ZV_ZH_F_CLAIM_SET)
    && zh->zh_claim_count == cl->cl_n
    && zv_cksum_equal (&zh->zh_claim_cksum, &ck);
  for (size_t i = 0; i < cl->cl_n && !same; i++) {
    uint64_t dva = cl->cl_ent[i].ce_dva;
    if (!zv_alloc_may_claim (a, dva, bs)
        && (live == NULL
            || live (live_arg, dva, bs, cl->cl_ent[i].ce_lr.lr_offset / bs))) {
      char why[192];
      snprintf (why, sizeof why, "names an in-place block (device %u "
                "offset %" PRIu64 ") whose space is allocated and live, "
                "not the record's to own", ZV_DVA_VDEV (dva),
                ZV_DVA_OFFSET (dva));
      *bad = &cl->cl_ent[i];
      return zil_bad_record (&cl->cl_ent[i].ce_lr, why);
    }
  }
  for (size_t i = 0; i < cl->cl_n; i++) {
    uint64_t dva = cl->cl_ent[i].ce_dva;
    /* Free on disk, or on its way to being free: either way it must stay
     * put until the record is applied, and be freed once, by the
     * replay. */
    (void) zv_alloc_defer_cancel (a, dva, bs);
    if (!zv_alloc_is_allocated (a, dva, bs))
      zv_alloc_claim (a, dva, bs);
    /* The record owns it now: a tree pointer found later that names it
     * is refused (alloc.h, the pool's owners). */
    zv_alloc_own_rest (a, dva, bs);
  }
  zh->zh_claim_txg = claim;
  zh->zh_claim_count = cl->cl_n;
  zh->zh_claim_cksum = ck;
  zh->zh_flags |= ZV_ZH_F_CLAIM_SET;
  return 0;
}

/*
 * The claim of a chain, for the import and the replay alike: walk it,
 * judge where it stops (zil_decide), take the in-place blocks of the
 * part that replays.  A record zil_claims_take refuses is a bad record
 * like any other: the walk is redone with the chain cut there, to judge
 * and report it the same way (each retry cuts earlier, so this ends).
 * With a cut (ZIL_CUT), the header records it (ZV_ZH_F_TRUNCATED), so a
 * replay, or an import after a crash during it, stops at the same place
 * without being told again.  *wk and *cl describe what replays.
 */
static int
zil_chain_claim (zv_zil_t *zl, zv_zil_header_t *zh, uint64_t claim,
                 enum zv_zil_recover recover, enum zil_judge judge,
                 bool rewound, zv_zil_live_fn live, void *live_arg,
                 zil_walk_t *wk, zil_claims_t *cl)
{
  uint64_t lim_seq = 0;
  uint32_t lim_off = 0;
  bool lim_bad = false, cut = false;
  int r;

  if (zh->zh_flags & ZV_ZH_F_TRUNCATED) {
    lim_seq = zh->zh_trunc_seq;
    lim_off = (uint32_t) zh->zh_trunc_off;
  }
  for (;;) {
    const zil_claim_ent_t *bad = NULL;

    memset (cl, 0, sizeof *cl);
    zil_walk (zl, claim, lim_seq, lim_off, lim_bad, cl, wk);
    r = zil_decide (zl, wk, recover, judge, rewound);
    if (r == ZIL_CUT)
      cut = true;
    if (r >= 0)
      r = zil_claims_take (zl, cl, zh, claim, live, live_arg, &bad);
    if (r >= 0 || bad == NULL)
      break;
    lim_seq = bad->ce_blk;
    lim_off = bad->ce_off;
    lim_bad = true;
    free (cl->cl_ent);
    zil_walk_free (wk);
  }
  if (r < 0) {
    free (cl->cl_ent);
    memset (cl, 0, sizeof *cl);
    zil_walk_free (wk);
    return r;
  }
  if (cut) {
    zh->zh_flags |= ZV_ZH_F_TRUNCATED;
    zh->zh_trunc_seq = wk->wk_stop_seq;
    zh->zh_trunc_off = wk->wk_stop_off;
  }
  return 0;
}

/* A zv_zil_t with only what a walk reads: the ring, where it lives, and
 * the volume's geometry for the records' checks. */
static void
zil_walker_init (zv_zil_t *zl, zv_spa_t *spa, zv_dev_t *logdev,
                 const zv_zil_header_t *zh, uint32_t blksz, uint64_t volsize)
{
  memset (zl, 0, sizeof *zl);
  zl->zl_spa = spa;
  zl->zl_logdev = logdev;
  zl->zl_hdr = *zh;
  zl->zl_ring_size = zh->zh_nslots * (uint64_t) zh->zh_blksz;
  zl->zl_ops.zo_blksz = blksz;
  zl->zl_ops.zo_volsize = volsize;
}

int
zv_zil_claim (zv_spa_t *spa, zv_dev_t *logdev, zv_zil_header_t *zh,
              uint64_t imported_txg, uint32_t blksz, uint64_t volsize,
              enum zv_zil_recover recover, bool rewound, zv_zil_live_fn live,
              void *live_arg)
{
  zv_zil_t zl;
  uint64_t claim = zh->zh_claim_txg ? zh->zh_claim_txg : imported_txg;
  zil_claims_t cl;
  zil_walk_t wk;
  int r;

  zil_walker_init (&zl, spa, logdev, zh, blksz, volsize);
  if (recover == ZV_ZIL_RECOVER_DISCARD) {
    zil_tally_t all, acked;
    char t1[96];

    /* Every record found, checked or not: nothing of it is applied. */
    zil_walk (&zl, claim, 0, 0, false, NULL, &wk);
    zil_walk_dropped (&wk, &all, &acked);
    zil_tally_merge (&all, &wk.wk_replay);
    zv_error ("intent log: zil_recover=discard: dropping the whole log: "
              "%s in %" PRIu64 " block(s)%s; the pool is as of txg %"
              PRIu64, zil_tally_text (&all, t1, sizeof t1),
              wk.wk_nblocks + wk.wk_nlater,
              wk.wk_stop == ZIL_STOP_GAP && wk.wk_durable >= wk.wk_stop_seq
              ? " and a damaged one" : "", claim);
    zil_walk_free (&wk);
    /* A fresh chain: its header reaches the disk with the first txg, and
     * until then an import finds the old chain again (and is refused
     * again, or told again). */
    zv_zil_header_init (zh, zh->zh_ring_dva, zh->zh_nslots, zh->zh_blksz);
    return 0;
  }
  r = zil_chain_claim (&zl, zh, claim, recover, ZIL_JUDGE_CLAIM, rewound,
                       live, live_arg, &wk, &cl);
  free (cl.cl_ent);
  if (r < 0)
    return r;
  r = (int) ZV_MIN (wk.wk_nblocks, (uint64_t) INT32_MAX);
  zil_walk_free (&wk);
  return r;
}

void
zv_zil_inspect (zv_spa_t *spa, zv_dev_t *logdev, const zv_zil_header_t *zh,
                uint64_t imported_txg, uint32_t blksz, uint64_t volsize,
                bool rewound)
{
  zv_zil_t zl;
  uint64_t claim = zh->zh_claim_txg ? zh->zh_claim_txg : imported_txg;
  zil_walk_t wk;
  char t1[96];

  zil_walker_init (&zl, spa, logdev, zh, blksz, volsize);
  zil_walk (&zl, claim, zh->zh_flags & ZV_ZH_F_TRUNCATED
            ? zh->zh_trunc_seq : 0, (uint32_t) zh->zh_trunc_off, false,
            NULL, &wk);
  (void) zil_decide (&zl, &wk, ZV_ZIL_RECOVER_NONE, ZIL_JUDGE_INSPECT,
                     rewound);
  if (wk.wk_replay.ty_records > 0)
    zv_info ("intent log: %s not replayed (a read-only import shows txg %"
             PRIu64 ")", zil_tally_text (&wk.wk_replay, t1, sizeof t1),
             imported_txg);
  zil_walk_free (&wk);
}

/* Apply the records of one verified block that start before byte 'lim'
 * (claim rule: txg > claim). */
static int
zil_replay_block (zv_zil_t *zl, uint64_t blk, const uint8_t *recs,
                  uint32_t nused, uint32_t lim, uint64_t claim,
                  uint64_t *last_seq, int *applied, const zv_lr_t **failed)
{
  uint32_t pos = 0;

  while (pos + sizeof (zv_lr_t) <= lim) {
    const zv_lr_t *lr = (const zv_lr_t *) (recs + pos);
    int r = zil_record_check (zl, blk, lr, nused - pos, claim);

    if (r < 0)
      return r;
    if (lr->lr_seq < *last_seq) {
      zv_error ("intent log: record order broken at %" PRIu64, lr->lr_seq);
      return -EIO;
    }
    *last_seq = lr->lr_seq;
    if (lr->lr_type != ZV_LR_NOP && lr->lr_txg > claim) {
      r = zl->zl_ops.zo_replay (zl->zl_arg, lr, lr + 1);
      if (r < 0) {
        *failed = lr;
        return r;               /* -ENODATA: see zv_zil_replay */
      }
      (*applied)++;
    }
    pos += lr->lr_reclen;
  }
  return 0;
}

/*
 * An in-place block that does not verify (-ENODATA from zo_replay, for
 * record lr of log block blk): it is written before its log block and
 * flushed with it, so unless a later block says blk was durable, blk's
 * flush never completed and nothing from lr on was acknowledged: the log
 * ends there.  If one does, the block is damaged, and the replay fails
 * unless 'recover' truncates.  Returns 0 (the log ends before lr) or
 * -EIO.
 */
static int
zil_replay_nodata (const zil_walk_t *wk, uint64_t blk, const zv_lr_t *lr,
                   int applied, enum zv_zil_recover recover)
{
  uint64_t left = wk->wk_replay.ty_records - (uint64_t) applied;

  if (wk->wk_durable < blk) {
    zv_info ("intent log: in-place block of record %" PRIu64 " is not on "
             "disk; the log ends before it", lr->lr_seq);
    return 0;
  }
  zv_error ("intent log: the in-place block of record %" PRIu64 " (txg %"
            PRIu64 ", offset %" PRIu64 ") in log block %" PRIu64 " does "
            "not verify, but block %" PRIu64 " says that block was durable: "
            "it is damaged, and %" PRIu64 " acknowledged or later record(s) "
            "from it on %s", lr->lr_seq, lr->lr_txg, lr->lr_offset, blk,
            wk->wk_durable_by, left,
            recover == ZV_ZIL_RECOVER_TRUNCATE
            ? "are dropped (zil_recover=truncate)"
            : "cannot be applied; the replay fails (zil_recover=truncate "
            "replays up to it)");
  return recover == ZV_ZIL_RECOVER_TRUNCATE ? 0 : -EIO;
}

/*
 * Replay, then start a fresh chain.  The header keeps the old chain (and
 * the claim txg) in every txg synced while replaying, so a crash here
 * replays again from the same start: records are idempotent and applied
 * in the same order, and the result is that of a single replay.  Pass 1
 * is the import's claim again (zil_chain_claim: the same walk, judgement
 * and set of in-place blocks; the import's cut is in the header); pass 2
 * applies the records up to where pass 1 stopped.
 */
int
zv_zil_replay (zv_zil_t *zl, uint64_t imported_txg,
               enum zv_zil_recover recover)
{
  zv_zil_header_t *zh = &zl->zl_hdr;
  uint8_t *buf;
  uint64_t claim = zh->zh_claim_txg ? zh->zh_claim_txg : imported_txg;
  uint64_t seq, last_seq = 0, nblocks = 0, dva;
  int applied = 0, r;
  zil_claims_t cl;
  zil_walk_t wk;

  zl->zl_replaying = true;
  /* The import (zv_zil_claim) discarded the log already if told to. */
  if (recover == ZV_ZIL_RECOVER_DISCARD)
    recover = ZV_ZIL_RECOVER_NONE;
  r = zil_chain_claim (zl, zh, claim, recover, ZIL_JUDGE_REPLAY, false, NULL,
                       NULL, &wk, &cl);
  if (r < 0) {
    zl->zl_replaying = false;
    return r;
  }
  buf = zv_buf_get (zh->zh_blksz);
  dva = zil_pos_dva (zl, zh->zh_head_pos);
  for (seq = zh->zh_head_seq; seq <= wk.wk_stop_seq; seq++) {
    uint32_t lim;
    zil_blk_t zb;
    const zv_lr_t *failed = NULL;

    if (seq == wk.wk_stop_seq && wk.wk_stop_off == 0)
      break;
    if (zil_read_block (zl, dva, seq, buf, &zb) < 0)
      break;                    /* (it verified in pass 1) */
    lim = seq == wk.wk_stop_seq ? wk.wk_stop_off : zb.zb_nused;
    r = zil_replay_block (zl, seq, buf + sizeof (zv_lwb_hdr_t), zb.zb_nused,
                          lim, claim, &last_seq, &applied, &failed);
    if (r == -ENODATA && failed != NULL) {
      r = zil_replay_nodata (&wk, seq, failed, applied, recover);
      break;
    }
    if (r < 0)
      break;
    nblocks++;
    dva = zb.zb_next_dva;
  }
  zv_buf_put (buf, zh->zh_blksz);
  zil_walk_free (&wk);
  if (r < 0) {
    free (cl.cl_ent);
    zl->zl_replaying = false;
    return r;
  }
  if (applied > 0)
    zv_info ("intent log: replayed %d record(s) from %" PRIu64
             " block(s) (txgs after %" PRIu64 ")", applied, nblocks, claim);
  /* The in-place blocks were copied by replay: free them with the txg
   * that makes the copies durable. */
  if (cl.cl_n > 0) {
    zv_txg_hold_t h;
    r = zv_txg_hold (zl->zl_tx, 0, &h);
    if (r == 0) {
      for (size_t i = 0; i < cl.cl_n; i++)
        zv_alloc_free_defer (zl->zl_spa->spa_alloc, h.th_txg,
                             cl.cl_ent[i].ce_dva,
                             zl->zl_ops.zo_blksz);
      zv_txg_rele (zl->zl_tx, &h);
    }
  }
  /* Make the replayed changes durable under the old header... */
  if (applied > 0 || cl.cl_n > 0) {
    r = zv_txg_wait_synced (zl->zl_tx, zv_txg_open_txg (zl->zl_tx));
    if (r < 0) {
      free (cl.cl_ent);
      zl->zl_replaying = false;
      return r;
    }
  }
  /* ...then start a fresh chain: new guid, head 1, no claim, no cut.  No
   * block is written until a txg carrying this header is on disk (the
   * first commits wait for that txg instead; see zv_zil_synced). */
  zv_zil_header_init (zh, zh->zh_ring_dva, zh->zh_nslots, zh->zh_blksz);
  zl->zl_head = 1;
  zl->zl_head_pos = 0;
  zl->zl_next_seq = 1;
  atomic_store_explicit (&zl->zl_next_pos, 0, memory_order_seq_cst);
  atomic_store_explicit (&zl->zl_durable_seq, 0, memory_order_seq_cst);
  atomic_store_explicit (&zl->zl_persisted_head, 0, memory_order_seq_cst);
  atomic_store_explicit (&zl->zl_persisted_pos, 0, memory_order_seq_cst);
  for (uint64_t i = 0; i < ZIL_NSTATE; i++)
    atomic_store_explicit (&zl->zl_slots[i].zs_seq, 0, memory_order_seq_cst);
  zl->zl_replaying = false;
  /* After a replay the old chain must not be replayed again: its
   * in-place blocks are free now.  Put the new header on disk. */
  if (applied > 0 || cl.cl_n > 0) {
    free (cl.cl_ent);
    r = zv_txg_wait_synced (zl->zl_tx, zv_txg_open_txg (zl->zl_tx));
    if (r < 0)
      return r;
  }
  else
    free (cl.cl_ent);
  return applied;
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
}

/* ---- tunables (tunable.h): sync, logbias, flush, zil_write_ahead and
 * the three sizes and shares after them are read into
 * zv_zil_tunables_t by zv_zil_tunables_default, the itx ring's size by
 * zv_zil_open, when a pool's log opens; the commit timeouts and the
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
  [ZIL_FLUSH_LOG] = "log", [ZIL_FLUSH_TXG] = "txg", NULL
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
    .tn_default = ZIL_FLUSH_LOG, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the intent log",
    .tn_desc = "What a flush or FUA waits for: log commits the intent "
    "log, txg waits for a txg sync (slow, kept to compare)." },
  { .tn_name = "zil_write_ahead", .tn_module = "zil",
    ZV_TUNABLE_VAR_ENUM (zv_zil_write_ahead_mode, zv_zil_write_ahead_names,
                         3),
    .tn_default = ZV_ZIL_WA_OFF, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the intent log",
    .tn_desc = "Whether a write's log block is written before its flush "
    "asks, by the log's own thread while the reply and the flush travel: "
    "auto while flushes follow writes one by one, always, or off (only "
    "commits write log blocks)." },
  { .tn_name = "zil_write_ahead_window", .tn_module = "zil",
    ZV_TUNABLE_VAR_U64 (zil_write_ahead_window_ns),
    .tn_default = 20000000, .tn_min = 0, .tn_max = 10000000000ull,
    .tn_unit = ZV_TUNABLE_UNIT_NS, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the intent log, logging a write",
    .tn_desc = "With zil_write_ahead=auto, how long after the last of "
    "two flushes in a row that followed writes one by one writes still go "
    "ahead." },
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
    .tn_default = 10, .tn_min = 0, .tn_max = 100,
    .tn_unit = ZV_TUNABLE_UNIT_PCT, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the intent log",
    .tn_desc = "How long an open log block waits for more records while "
    "others commit, as a share of the recent log-block latency.",
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
    ZV_TUNABLE_VAR_U64 (zil_max_sleep_ns),
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
