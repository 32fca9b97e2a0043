/*
 * txg.h: the transaction-group engine.
 *
 * Txgs move open -> quiescing -> syncing -> synced.  Writers join the open
 * txg with zv_txg_hold() (a per-CPU hold: no global lock), dirty buffers
 * in it, then zv_txg_rele().  The engine's sync thread closes the open txg
 * on a timeout (txg_timeout, 5 s), when the open txg's dirty bytes pass
 * dirty_sync_pct of dirty_max, or when someone waits for it; it waits for
 * the holds on that txg to drain (quiescing) and calls the sync callback,
 * which writes the txg to disk.  Without the thread (before zv_txg_start)
 * a waiter runs the same quiesce and sync itself.  Writers are throttled
 * on OpenZFS's delay curve once total dirty data passes
 * delay_min_dirty_pct of dirty_max, and block while it is at dirty_max.
 */
#ifndef ZV_TXG_H
#define ZV_TXG_H

#include <stdint.h>
#include <stddef.h>
#include <assert.h>

/*
 * Per-txg state (hold counts, dirty bytes, dirty records, the intent
 * log's pending heads) lives in rings of ZV_TXG_SIZE slots indexed by
 * txg & ZV_TXG_MASK.  At most two txgs carry such state at once (the open
 * one and the one quiescing or syncing), so a slot is never reused while
 * its previous txg is live.
 */
#define ZV_TXG_SIZE 4u
#define ZV_TXG_MASK (ZV_TXG_SIZE - 1)
static_assert ((ZV_TXG_SIZE & ZV_TXG_MASK) == 0,
               "the txg ring size is a power of two");

typedef struct zv_txg zv_txg_t;

typedef struct zv_txg_tunables {
  uint64_t tt_timeout_ms;          /* txg_timeout, default 5000 */
  uint64_t tt_dirty_max;           /* bytes; default min(10% RAM, 4 GiB) */
  unsigned tt_dirty_sync_pct;      /* default 20 */
  unsigned tt_delay_min_dirty_pct; /* default 60 */
  uint64_t tt_delay_scale_ns;      /* default 500000 */
  uint64_t tt_delay_max_ns;        /* default 100 ms */
} zv_txg_tunables_t;

/* Fill in the OpenZFS defaults (dirty_max from physical memory). */
void zv_txg_tunables_default (zv_txg_tunables_t *tt);

/* What the sync callback reports for the history table. */
typedef struct zv_txg_sync_stats {
  uint64_t ss_nread, ss_nwritten, ss_reads, ss_writes;
} zv_txg_sync_stats_t;

/*
 * Writes txg 'txg' to disk.  Called from the sync thread only, one txg at a
 * time, in order, after every hold on 'txg' has been released.  Returns 0
 * or a negative errno; after an error the engine is failed: no later txg is
 * synced and every waiter gets the error (the pool is suspended).
 */
typedef int (*zv_txg_sync_fn) (void *arg, uint64_t txg,
                               zv_txg_sync_stats_t *stats);

/* 'first_txg' is the first txg that will be opened (last synced + 1). */
zv_txg_t *zv_txg_create (const zv_txg_tunables_t *tt, uint64_t first_txg,
                         zv_txg_sync_fn sync_fn, void *arg);
/*
 * The space the txg pipeline holds, for the throttle: *inuse bytes
 * (reserved by writers, or freed but deferred to a later txg) of *cap
 * (that plus what can still be reserved).  Called lock-free on the write
 * path; zv_alloc_pressure is one.
 */
typedef void (*zv_txg_space_fn) (void *arg, uint64_t *inuse, uint64_t *cap);
/* Make the throttle and the sync kick see space as well as dirty data
 * (before any writer; NULL: dirty data only). */
void zv_txg_set_space_fn (zv_txg_t *tx, zv_txg_space_fn fn, void *arg);
/* Start the sync thread (after nbdkit's fork). */
int zv_txg_start (zv_txg_t *tx);
/* Sync everything still dirty, stop the thread.  Returns the first error. */
int zv_txg_stop (zv_txg_t *tx);
void zv_txg_destroy (zv_txg_t *tx);

/* A hold on the open txg; opaque, lives on the caller's stack. */
typedef struct zv_txg_hold {
  uint64_t th_txg;
  unsigned th_cpu;
} zv_txg_hold_t;

/*
 * Throttle (delay on the curve, block while dirty >= dirty_max), then hold
 * the open txg.  'bytes' is what the caller will dirty; it is charged to
 * the txg (dirty accounting, early sync kick).  Returns 0 with h->th_txg
 * set to the txg held, or a negative errno (the engine's error) when the
 * pool has failed.
 */
int zv_txg_hold (zv_txg_t *tx, uint64_t bytes, zv_txg_hold_t *h);
/* Charge 'bytes' more to the txg h holds, as zv_txg_hold does: for a
 * caller that learns what it dirtied only once it has (a write that
 * finds its blocks already dirty in the txg dirties nothing new). */
void zv_txg_charge (zv_txg_t *tx, const zv_txg_hold_t *h, uint64_t bytes);
void zv_txg_rele (zv_txg_t *tx, zv_txg_hold_t *h);

/* Ask the sync thread to sync 'txg' soon, without waiting (no-op without
 * the thread, or if already asked). */
void zv_txg_kick (zv_txg_t *tx, uint64_t txg);

/*
 * Wait until 'txg' has synced, forcing the sync if needed.  0 means every
 * txg that took a hold so far: the open one, or the one before it if the
 * open txg has had no hold nor dirty byte.  The caller must not hold a
 * txg.  Returns 0, or the engine's error.
 */
int zv_txg_wait_synced (zv_txg_t *tx, uint64_t txg);

uint64_t zv_txg_open_txg (zv_txg_t *tx);
uint64_t zv_txg_last_synced (zv_txg_t *tx);
uint64_t zv_txg_dirty_limit (zv_txg_t *tx);
/* Writers the throttle delayed, the time it made them sleep in all
 * (each delay's whole length, counted when it starts), and writers it
 * stopped at dirty_max until a sync made room. */
void zv_txg_throttle_stats (zv_txg_t *tx, uint64_t *delays,
                            uint64_t *delay_ns, uint64_t *stalls);
uint64_t zv_txg_dirty_total (zv_txg_t *tx);

/* The same as a percentage of dirty_max, or the share of the space the
 * pipeline holds (zv_txg_set_space_fn) when that is higher. */
unsigned zv_txg_dirty_pct (zv_txg_t *tx);
int zv_txg_error (zv_txg_t *tx);   /* 0 or the error that failed the engine */

/*
 * The history: a row per txg of the last ZV_TXG_HISTORY (as OpenZFS's
 * zfs_txg_history), with the columns of its txgs kstat (times in ns;
 * state O open, Q quiescing, S syncing, C committed).
 */
#define ZV_TXG_HISTORY 100u
typedef struct zv_txg_stat {
  uint64_t ts_txg;
  uint64_t ts_birth_ns;             /* since the engine was created */
  char ts_state;
  uint64_t ts_ndirty, ts_nread, ts_nwritten, ts_reads, ts_writes;
  uint64_t ts_otime_ns, ts_qtime_ns, ts_wtime_ns, ts_stime_ns;
} zv_txg_stat_t;
/* The newest rows, oldest first, at most max; returns how many. */
size_t zv_txg_history_get (zv_txg_t *tx, zv_txg_stat_t *out, size_t max);

/* The delay a writer gets at a given dirty level (exposed for tests). */
uint64_t zv_txg_delay_ns (const zv_txg_tunables_t *tt, uint64_t dirty);

#endif /* ZV_TXG_H */
