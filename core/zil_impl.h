/*
 * zil_impl.h: what the intent log's modules share (zil.c, zil_commit.c,
 * zil_ahead.c, zil_replay.c); nothing outside them includes it (zil.h is
 * the log's interface to the rest of the engine).
 *
 * One object, struct zv_zil, carries the log's state: the ring and the
 * header (zil.c), the itx ring, the issuer's packing state, the block
 * state slots and the durable counters (zil_commit.c), which replay
 * (zil_replay.c) reads through a walker's copy and resets when it starts
 * a fresh chain, and the write-ahead slot (zil_ahead.c).  Each field says who writes it; the memory-ordering
 * argument for the atomics is the theory comment of zil_commit.c.  The
 * inline helpers here are the ring's geometry, the checksum seed of a
 * block (written by zil_commit.c, verified by zil_replay.c: one rule) and
 * the loads every path polls.
 */
#ifndef ZV_ZIL_IMPL_H
#define ZV_ZIL_IMPL_H

#include <stdatomic.h>
#include <pthread.h>

#include "zil.h"

/* Who owns the write-ahead slot (zl_wa_state; zil_ahead.c): the queue,
 * the block in it and its requests. */
enum zil_ahead_state { ZIL_AHEAD_IDLE = 0, ZIL_AHEAD_SUBMITTING,
                       ZIL_AHEAD_INFLIGHT, ZIL_AHEAD_FINISHING };

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
  /* Committers waiting for this block to be durable sleep here (a futex
   * word, bumped when zl_durable_seq reaches the block), so a block's
   * completion wakes its own waiters and nobody else's. */
  _Atomic uint32_t zs_wake;
  _Atomic uint32_t zs_sleepers;   /* asleep on zs_wake, or about to be */
  _Atomic int zs_timer;           /* a waiter times the open block */
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
  _Atomic uint32_t zl_issuer_waiters; /* asleep on zl_issuer (futex) */
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

  /* Write-ahead (zil_ahead.c's theory comment). */
  _Atomic uint64_t zl_wa_until_ns;    /* auto: commits follow writes */
  _Atomic uint64_t zl_wa_last_target; /* ticket of the last flush */
  _Atomic unsigned zl_wa_streak;      /* flushes in a row that did */
  _Atomic bool zl_wa_never;           /* no queue or device for it */
  _Atomic uint32_t zl_wa_state;       /* enum zil_ahead_state; futex */
  _Atomic uint32_t zl_wa_waiters;     /* asleep on it */
  /* Owned by whoever holds the state (SUBMITTING, FINISHING), handed on
   * by its stores (release) and CAS (acquire): */
  zv_dev_async_t *zl_wa_aq;           /* this process's queue */
  uint64_t zl_wa_gen;                 /* ahead_fork_gen it was made in */
  bool zl_wa_tried;                   /* zl_wa_aq was asked for */
  zil_lwb_t *zl_wa_lwb;               /* the block in flight */
  zv_dev_io_t *zl_wa_ios;             /* its write, then its flushes */
  size_t zl_wa_nios;

  /* Ring reuse (sync thread).  zl_hdr_lock: a replay runs in the
   * opener's thread while the sync thread already writes the volume's
   * header each txg (the log is attached first, so that the replayed
   * txgs carry it), so the two share zl_hdr, zl_replaying, zl_head,
   * zl_head_pos and zl_pending_* under it.  Taken once per txg by the
   * sync callbacks and a few times by a replay; never on the write path. */
  pthread_mutex_t zl_hdr_lock;
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

/* ---- helpers ---- */

/* Device address of a logical ring position. */
static inline uint64_t
zil_pos_dva (zv_zil_t *zl, uint64_t pos)
{
  return zl->zl_hdr.zh_ring_dva + pos % zl->zl_ring_size;
}

/* A block may start at pos only if a whole zh_blksz fits before the
 * ring's end; else it starts the next lap. */
static inline uint64_t
zil_pos_fit (zv_zil_t *zl, uint64_t pos)
{
  if (pos % zl->zl_ring_size + zl->zl_hdr.zh_blksz > zl->zl_ring_size)
    pos = pos - pos % zl->zl_ring_size + zl->zl_ring_size;
  return pos;
}

static inline zil_slot_t *
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
static inline zv_dev_t *
zil_ring_dev (zv_zil_t *zl, uint64_t dva)
{
  if (zl->zl_logdev)
    return zl->zl_logdev;
  return zl->zl_spa->spa_devs[ZV_DVA_VDEV (dva)];
}

/* Checksum seed of block seq of this chain. */
static inline uint64_t
zil_seed (uint64_t guid, uint64_t seq)
{
  return guid ^ (seq * 0x9e3779b97f4a7c15ull) ^ ZV_LWB_MAGIC;
}

/* Loads of the counters most paths poll: seq_cst, like every access that
 * names no weaker order (see "Memory ordering" in zil_commit.c). */
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
static inline void
zil_atomic_max (_Atomic uint64_t *p, uint64_t v)
{
  uint64_t cur = atomic_load_explicit (p, memory_order_seq_cst);

  while (cur < v
         && !atomic_compare_exchange_weak_explicit (p, &cur, v,
                                                    memory_order_seq_cst,
                                                    memory_order_seq_cst))
    ;
}

/* zil_commit.c, for zil_ahead.c: the pack (issuer role held), the role's
 * release, the wake-up of a block's waiters, and a batch of closed blocks' I/O in its three steps
 * (room for the requests, prepare: in-place data, seal, the requests;
 * complete: done flags or the log's failure, wake-ups), or all at once
 * (issue).  See zil_commit.c. */
extern uint64_t zv_zil_max_sleep_ns;
zil_lwb_t *zv_zil_commit_pack (zv_zil_t *zl, bool *full, bool ahead);
void zv_zil_role_release (zv_zil_t *zl);
void zv_zil_wake_block (zv_zil_t *zl, uint64_t seq);
zv_dev_io_t *zv_zil_commit_ios_alloc (zil_lwb_t *list);
int zv_zil_commit_prepare (zv_zil_t *zl, zil_lwb_t *list, zv_dev_io_t *ios);
int zv_zil_commit_complete (zv_zil_t *zl, zil_lwb_t *list, int r,
                            uint64_t start_ns);
int zv_zil_commit_issue (zv_zil_t *zl, zil_lwb_t *list);

/* zil_ahead.c, for zil_commit.c: a flush to ticket t begins (auto mode's
 * bookkeeping); a commit meets the write-ahead slot (true: it finished a
 * block or waited for one, look again); the log closes. */
extern uint64_t zv_zil_write_ahead_window_ns;
void zv_zil_ahead_note (zv_zil_t *zl, uint64_t t);
bool zv_zil_ahead_settle (zv_zil_t *zl);
void zv_zil_ahead_fini (zv_zil_t *zl);

/* zil_commit.c, for zil.c: finish a block written ahead, free the
 * write-ahead queue, what was published but not packed, and the open
 * block (the log is closing). */
void zv_zil_commit_fini (zv_zil_t *zl);
/* zil_commit.c, for zil.c (zv_zil_synced): drop the oldest itxs of txgs
 * up to txg, if the issuer role is free, and wake the waiters. */
void zv_zil_commit_drop_synced (zv_zil_t *zl, uint64_t txg);

#endif /* ZV_ZIL_IMPL_H */
