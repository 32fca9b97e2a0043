/*
 * txg.c: the transaction-group engine.
 *
 * THEORY
 *
 * Every change to the pool belongs to a transaction group (txg).  A txg
 * moves through four states:
 *
 *   open       writers join it with zv_txg_hold(), dirty buffers in it and
 *              leave with zv_txg_rele().  Exactly one txg is open.
 *   quiescing  no new writer can join (the open txg has moved on); we wait
 *              for the writers still holding it to release it.
 *   syncing    the sync callback writes the txg to disk.
 *   committed  the callback returned 0; zv_txg_last_synced() says so.
 *
 * At most one txg is quiescing or syncing at a time, so at most two txgs
 * carry state (the open one and the one being synced) and the per-txg
 * arrays of ZV_TXG_SIZE slots (txg.h), indexed by txg & ZV_TXG_MASK, never
 * wrap onto a live txg.
 *
 * Holds (the hot path) take no global lock.  Each CPU has a cache-line
 * aligned slot with its own mutex (the "open lock"), a per-txg hold count
 * and a condvar.  zv_txg_hold() locks the slot of the CPU it runs on, reads
 * the open txg, bumps count[txg & ZV_TXG_MASK] and unlocks; zv_txg_rele()
 * locks the same slot (the hold remembers it), drops the count and
 * broadcasts when it reaches zero.  Closing the open txg (quiesce) takes
 * every slot's open lock, advances tx_open_txg and releases them all, so a
 * hold either counted itself in the old txg before the switch or sees the
 * new one: held txgs never go backwards.  Then it waits, slot by slot, for
 * count[old & ZV_TXG_MASK] to reach zero.
 *
 * Dirty accounting is by atomics: each hold charges its bytes to the txg's
 * counter (tx_dirty_pertxg[txg & ZV_TXG_MASK]) and to the total
 * (tx_dirty_total), when it is taken or, for a holder that knows only
 * afterwards what it dirtied (zv_txg_charge), before it is let go.  When
 * the open txg's dirty bytes pass tt_dirty_sync_pct of tt_dirty_max, the
 * holder kicks the sync thread (once per txg, guarded by an atomic flag);
 * only then does the hot path touch the engine mutex.
 *
 * There is one engine thread, the sync thread, which both quiesces and
 * syncs (OpenZFS uses two; one is enough here because quiescing is short:
 * holds last one request).  While it syncs txg N, txg N+1 is open and takes
 * writes, which is the pipelining that matters.  It sleeps on tx_sync_cv and
 * wakes on
 *   - the timeout: tt_timeout_ms after the start of the previous sync;
 *     if the open txg had no hold and no dirty byte, it skips the sync and
 *     restarts the timer (an idle pool does not spin txgs);
 *   - a kick or a waiter: tx_sync_want > last synced txg; it syncs txgs one
 *     by one until it gets there, empty or not;
 *   - stop: it syncs the open txg if it has anything in it, then exits.
 *
 * One sync (txg_sync_once): under tx_lock mark tx_syncing, close the open
 * txg, then drop tx_lock while waiting for the holds to drain and while the
 * sync callback runs, retake it to publish the result: on success subtract
 * the txg's dirty bytes from the total, advance tx_last_synced and broadcast
 * tx_done_cv (waiters, throttled writers); on failure record the error
 * (the first one wins), broadcast, and never sync again: later holds and
 * waits return the error.
 *
 * Without the thread (unit tests, or before the nbdkit fork), the caller of
 * zv_txg_wait_synced() -- or a writer throttled at dirty_max, or
 * zv_txg_stop() -- runs the same quiesce + sync inline.  Inline syncs are
 * serialised by the engine mutex: the caller takes tx_lock and owns the sync
 * through tx_syncing, which it sets and clears under that mutex; it drops
 * tx_lock only while it waits for holds to drain and while the callback runs
 * (exactly like the thread), so that a writer still holding the txg can
 * finish a kick and release it instead of deadlocking on the mutex.  Anyone
 * who finds tx_syncing set waits on tx_done_cv.  As in OpenZFS, a thread
 * that waits for a sync must not itself hold a txg.
 *
 * Throttle (OpenZFS's dmu_tx_delay curve): before holding, a writer blocks
 * on tx_done_cv while the total dirty is at or above dirty_max (making sure
 * a sync of the open txg is asked for), then sleeps zv_txg_delay_ns() of the
 * pressure, spaced so that writers wake at least that far apart
 * (tx_last_wakeup, updated with compare-and-swap).  The pressure is the
 * total dirty, or, when the pool gave a space function
 * (zv_txg_set_space_fn) and the space the pipeline holds (reserved, or
 * freed but deferred) is the larger share of the space it may use, that
 * share of dirty_max.  Why: in a nearly full pool an overwrite's new
 * block must be reserved while the old one comes back only two txgs
 * later; without this, writers ran into ENOSPC with a few hundred MB
 * dirty and each waited for whole syncs (seconds).  With it, the open txg
 * is also kicked once the pipeline holds space_sync_percent of that space
 * (smaller txgs, so frees return sooner), and a writer is slowed on
 * the curve before space runs out; the wait for a sync on ENOSPC
 * (zvol.c) stays as the last resort.
 *
 * Invariants, asserted where they are relied on: the open txg is
 * last_synced + 1, or last_synced + 2 while the txg before it quiesces or
 * syncs; a txg is closed only as last_synced + 1 and committed only as
 * last_synced + 1 with the open txg right after it, so txgs go through
 * open > quiescing > syncing > committed one at a time and in order (the
 * history row of each goes O, Q, S, C); a held txg is never synced; hold
 * counts never go below zero; the slot a new txg takes has no hold and no
 * dirty byte left of the txg that used it before.  Those on the hold path
 * are ZV_ASSERTs (debug builds), those of the once-per-txg close and sync
 * ZV_VERIFYs.
 *
 * Locking: lock order is tx_lock -> slot open lock.  The hot path takes only
 * a slot lock, never while holding tx_lock.  tx_lock protects tx_syncing,
 * tx_sync_want, the thread flags, tx_sync_start_ns and the history ring.
 * tx_open_txg is written under every slot lock and read atomically;
 * tx_last_synced and tx_error are written under tx_lock and read atomically.
 *
 * History: a ring of the last ZV_TXG_HISTORY txgs with the columns of
 * OpenZFS's txgs kstat, under tx_lock.  Times are ns; birth is ns since the
 * engine was created; wtime (quiesced, waiting for the previous sync) is the
 * short gap between the end of quiescing and the start of the callback,
 * since one thread does both.  A txg whose sync failed stays in state S.
 */
#include <config.h>

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1           /* sched_getcpu */
#endif

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zv_util.h"
#include "tunable.h"
#include "txg.h"

#define ZV_TXG_CACHELINE 64

/* One CPU's hold slot; aligned so CPUs do not share its cache line. */
typedef struct zv_txg_cpu {
  pthread_mutex_t tc_open_lock;     /* protects tc_count; quiesce takes all */
  pthread_cond_t tc_cv;             /* a count dropped to zero */
  uint64_t tc_count[ZV_TXG_SIZE];   /* holds per txg & ZV_TXG_MASK */
} __attribute__ ((aligned (ZV_TXG_CACHELINE))) zv_txg_cpu_t;

/* One row of the txgs history. */
typedef struct zv_txg_hist {
  uint64_t txh_txg;
  uint64_t txh_birth;               /* CLOCK_MONOTONIC ns when opened */
  char txh_state;                   /* O Q S C */
  uint64_t txh_ndirty;
  uint64_t txh_nread, txh_nwritten, txh_reads, txh_writes;
  uint64_t txh_otime, txh_qtime, txh_wtime, txh_stime;
} zv_txg_hist_t;

struct zv_txg {
  zv_txg_tunables_t tx_tt;
  uint64_t tx_dirty_sync;           /* kick threshold in bytes */
  zv_txg_sync_fn tx_sync_fn;
  void *tx_arg;
  uint64_t tx_first_txg;
  uint64_t tx_start_ns;             /* engine creation (history birth) */
  zv_txg_space_fn tx_space_fn;      /* set before any writer, or NULL */
  void *tx_space_arg;

  /* Hot path. */
  unsigned tx_ncpu;
  zv_txg_cpu_t *tx_cpu;
  _Atomic uint64_t tx_open_txg;     /* written under all open locks */
  _Atomic uint64_t tx_dirty_pertxg[ZV_TXG_SIZE];
  _Atomic uint64_t tx_dirty_total;
  _Atomic int tx_active[ZV_TXG_SIZE]; /* the txg had a hold */
  _Atomic int tx_kicked[ZV_TXG_SIZE]; /* it kicked the thread */
  _Atomic uint64_t tx_last_wakeup;  /* throttle spacing */
  /* The throttle's counts (zv_txg_throttle_stats): writers delayed on
   * the curve and the time they slept; writers stopped at dirty_max
   * until a sync freed some. */
  _Atomic uint64_t tx_delays, tx_delay_ns, tx_stalls;
  _Atomic int tx_running;           /* the sync thread is alive */

  /* Engine state, under tx_lock.  tx_last_synced and tx_error are also
   * read without it: written with release under tx_lock, they are loaded
   * relaxed under it and with acquire outside it. */
  pthread_mutex_t tx_lock;
  pthread_cond_t tx_sync_cv;        /* wakes the sync thread */
  pthread_cond_t tx_done_cv;        /* a sync finished or failed */
  _Atomic uint64_t tx_last_synced;
  _Atomic int tx_error;
  uint64_t tx_sync_want;            /* sync up to here (kick, waiter) */
  bool tx_syncing;                  /* a quiesce + sync is in progress */
  bool tx_started;                  /* the thread was created, not joined */
  bool tx_exiting;                  /* stop asked the thread to exit */
  uint64_t tx_sync_start_ns;        /* start of the previous sync */
  pthread_t tx_thread;
  zv_txg_hist_t tx_hist[ZV_TXG_HISTORY];
};

/* ---------------------------------------------------------------------- */
/* History. */

/* Start the row of a txg that has just opened (tx_lock held). */
static void
txg_hist_open (zv_txg_t *tx, uint64_t txg, uint64_t now)
{
  zv_txg_hist_t *th = &tx->tx_hist[txg % ZV_TXG_HISTORY];

  memset (th, 0, sizeof *th);
  th->txh_txg = txg;
  th->txh_birth = now;
  th->txh_state = 'O';
}

/* The row of a txg still in the ring (tx_lock held). */
static zv_txg_hist_t *
txg_hist_get (zv_txg_t *tx, uint64_t txg)
{
  zv_txg_hist_t *th = &tx->tx_hist[txg % ZV_TXG_HISTORY];

  ZV_ASSERT3U (th->txh_txg, ==, txg);
  return th;
}

size_t
zv_txg_history_get (zv_txg_t *tx, zv_txg_stat_t *out, size_t max)
{
  uint64_t open, first, t;
  size_t n = 0;

  pthread_mutex_lock (&tx->tx_lock);
  open = atomic_load_explicit (&tx->tx_open_txg, memory_order_acquire);
  first = open - tx->tx_first_txg >= ZV_TXG_HISTORY ?
    open - (ZV_TXG_HISTORY - 1) : tx->tx_first_txg;
  /* The newest rows when max cuts the list. */
  if (open + 1 - first > max)
    first = open + 1 - max;
  for (t = first; t <= open && n < max; t++) {
    const zv_txg_hist_t *th = &tx->tx_hist[t % ZV_TXG_HISTORY];

    if (th->txh_txg != t)
      continue;
    out[n++] = (zv_txg_stat_t) {
      .ts_txg = th->txh_txg, .ts_birth_ns = th->txh_birth - tx->tx_start_ns,
      .ts_state = th->txh_state, .ts_ndirty = th->txh_ndirty,
      .ts_nread = th->txh_nread, .ts_nwritten = th->txh_nwritten,
      .ts_reads = th->txh_reads, .ts_writes = th->txh_writes,
      .ts_otime_ns = th->txh_otime, .ts_qtime_ns = th->txh_qtime,
      .ts_wtime_ns = th->txh_wtime, .ts_stime_ns = th->txh_stime,
    };
  }
  pthread_mutex_unlock (&tx->tx_lock);
  return n;
}

/* tx_error and tx_last_synced with tx_lock held: the lock orders them
 * against their writers (who hold it too), so a relaxed load suffices. */
static inline int
txg_error_locked (zv_txg_t *tx)
{
  return atomic_load_explicit (&tx->tx_error, memory_order_relaxed);
}

static inline uint64_t
txg_last_synced_locked (zv_txg_t *tx)
{
  return atomic_load_explicit (&tx->tx_last_synced, memory_order_relaxed);
}

/* ---------------------------------------------------------------------- */
/* Holds (hot path: slot locks and atomics only). */

/* Did txg take a hold or a dirty byte since it opened (its slot says)? */
static bool
txg_active (zv_txg_t *tx, uint64_t txg)
{
  unsigned g = txg & ZV_TXG_MASK;

  return atomic_load_explicit (&tx->tx_active[g], memory_order_acquire) != 0 ||
    atomic_load_explicit (&tx->tx_dirty_pertxg[g], memory_order_acquire) != 0;
}

/*
 * Ask the sync thread to sync 'txg' early: its dirty bytes passed the sync
 * threshold.  Without a running thread there is nobody to wake (waiters
 * sync inline), and the flag stays clear so a later thread can be kicked.
 */
void
zv_txg_kick (zv_txg_t *tx, uint64_t txg)
{
  unsigned g = txg & ZV_TXG_MASK;

  if (!atomic_load_explicit (&tx->tx_running, memory_order_acquire))
    return;
  if (atomic_load_explicit (&tx->tx_kicked[g], memory_order_acquire) ||
      atomic_exchange_explicit (&tx->tx_kicked[g], 1, memory_order_acq_rel))
    return;
  pthread_mutex_lock (&tx->tx_lock);
  if (tx->tx_sync_want < txg)
    tx->tx_sync_want = txg;
  pthread_cond_signal (&tx->tx_sync_cv);
  pthread_mutex_unlock (&tx->tx_lock);
}

/* Kick a sync when the pipeline holds this share of the space it may
 * use (zv_txg_set_space_fn). */
static unsigned zv_txg_space_sync_pct = 30;

/* Charge dirty bytes to a held txg and to the total; kick the sync once
 * the txg passes the sync threshold (dirty_sync_pct of dirty_max), or
 * the pipeline holds space_sync_percent of the space it may use. */
static void
txg_charge (zv_txg_t *tx, uint64_t txg, uint64_t bytes)
{
  uint64_t d;

  ZV_ASSERT3U (txg, >, zv_txg_last_synced (tx));     /* held: not synced */
  /* Per-txg first: the total never counts bytes no txg owns. */
  d = atomic_fetch_add_explicit (&tx->tx_dirty_pertxg[txg & ZV_TXG_MASK],
                                 bytes, memory_order_acq_rel) + bytes;
  atomic_fetch_add_explicit (&tx->tx_dirty_total, bytes,
                             memory_order_acq_rel);
  if (d > tx->tx_dirty_sync)
    zv_txg_kick (tx, txg);
  else if (tx->tx_space_fn != NULL
           && !atomic_load_explicit (&tx->tx_kicked[txg & ZV_TXG_MASK],
                                     memory_order_relaxed)) {
    uint64_t inuse, cap;

    /* Little free space: sync early, so frees come back sooner.  The
     * share held counts the deferred frees of the last two txgs, so
     * under overwrites the txgs shrink to about a third of it, while a
     * fill (nothing deferred) keeps them large. */
    tx->tx_space_fn (tx->tx_space_arg, &inuse, &cap);
    if ((unsigned __int128) inuse * 100
        > (unsigned __int128) cap * zv_txg_space_sync_pct)
      zv_txg_kick (tx, txg);
  }
}

/*
 * The throttle's input: the dirty bytes, or, when the space the pipeline
 * holds is the larger share of its limit, that share of dirty_max.
 */
static uint64_t
txg_pressure (zv_txg_t *tx)
{
  uint64_t dirty = zv_txg_dirty_total (tx), inuse, cap, eq;

  if (tx->tx_space_fn == NULL)
    return dirty;
  tx->tx_space_fn (tx->tx_space_arg, &inuse, &cap);
  if (inuse >= cap)
    eq = tx->tx_tt.tt_dirty_max;
  else
    eq = (uint64_t) ((unsigned __int128) tx->tx_tt.tt_dirty_max * inuse
                     / cap);
  return ZV_MAX (dirty, eq);
}

static int txg_sync_once (zv_txg_t *tx);

/* Throttle tunables (dmu_tx.c's curve, dsl_pool.c's thresholds; see the
 * table at the end). */
static unsigned zv_txg_delay_min_dirty_pct = 60;     /* delay from */
static uint64_t zv_txg_delay_scale_ns = 500000;      /* 1e9 / 2000 */
static uint64_t zv_txg_delay_max_ns = 100000000;     /* 100 ms cap */

/*
 * The delay curve: nothing below delay_min_dirty_pct of dirty_max, then
 * scale * (dirty - min) / (max - dirty), which is 'scale' at the midpoint
 * between min and max and grows without bound towards max; capped.
 */
uint64_t
zv_txg_delay_ns (const zv_txg_tunables_t *tt, uint64_t dirty)
{
  uint64_t max = tt->tt_dirty_max;
  uint64_t min = (uint64_t) ((unsigned __int128) max *
                             tt->tt_delay_min_dirty_pct / 100);
  unsigned __int128 d;

  if (dirty <= min)
    return 0;
  if (dirty >= max)
    return tt->tt_delay_max_ns;
  d = (unsigned __int128) tt->tt_delay_scale_ns * (dirty - min) /
    (max - dirty);
  return d > tt->tt_delay_max_ns ? tt->tt_delay_max_ns : (uint64_t) d;
}

/* Sleep until an absolute CLOCK_MONOTONIC time in ns. */
static void
txg_sleep_until (uint64_t ns)
{
  struct timespec ts = {
    .tv_sec = (time_t) (ns / 1000000000ull),
    .tv_nsec = (long) (ns % 1000000000ull),
  };

  while (clock_nanosleep (CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
    ;
}

/*
 * One step of waiting for a sync, tx_lock held: ask for txg 'want' (0:
 * nothing new), then let the sync thread run it and wait for a sync to
 * end, or wait for the inline sync someone else runs, or, with neither,
 * run one inline here.  The callers loop until what they wait for holds.
 */
static void
txg_sync_step (zv_txg_t *tx, uint64_t want)
{
  if (tx->tx_sync_want < want)
    tx->tx_sync_want = want;
  if (atomic_load_explicit (&tx->tx_running, memory_order_acquire)) {
    pthread_cond_signal (&tx->tx_sync_cv);
    pthread_cond_wait (&tx->tx_done_cv, &tx->tx_lock);
  }
  else if (tx->tx_syncing)
    pthread_cond_wait (&tx->tx_done_cv, &tx->tx_lock);
  else
    (void) txg_sync_once (tx);
}

/*
 * The write throttle, run before a hold.  Block while dirty data is at its
 * limit (a sync must free some; we make sure one of the open txg is asked
 * for, or run it inline without the thread), then sleep on the curve,
 * spaced behind the previous delayed writer like OpenZFS's dp_last_wakeup.
 */
static int
txg_throttle (zv_txg_t *tx)
{
  const uint64_t max = tx->tx_tt.tt_dirty_max;
  uint64_t delay, now, last, wakeup;

  if (zv_txg_dirty_total (tx) >= max) {
    atomic_fetch_add_explicit (&tx->tx_stalls, 1, memory_order_relaxed);
    pthread_mutex_lock (&tx->tx_lock);
    while (zv_txg_dirty_total (tx) >= max && txg_error_locked (tx) == 0) {
      uint64_t open = atomic_load_explicit (&tx->tx_open_txg,
                                            memory_order_acquire);
      _Atomic uint64_t *odirty = &tx->tx_dirty_pertxg[open & ZV_TXG_MASK];

      txg_sync_step (tx, atomic_load_explicit (odirty, memory_order_acquire)
                     > 0 ? open : 0);
    }
    pthread_mutex_unlock (&tx->tx_lock);
  }
  if (zv_txg_error (tx))
    return zv_txg_error (tx);

  delay = zv_txg_delay_ns (&tx->tx_tt, txg_pressure (tx));
  if (delay == 0)
    return 0;
  now = zv_now_ns ();
  last = atomic_load_explicit (&tx->tx_last_wakeup, memory_order_acquire);
  do
    wakeup = ZV_MAX (now + delay, last + delay);
  while (!atomic_compare_exchange_strong_explicit (&tx->tx_last_wakeup, &last,
                                                   wakeup,
                                                   memory_order_acq_rel,
                                                   memory_order_acquire));
  atomic_fetch_add_explicit (&tx->tx_delays, 1, memory_order_relaxed);
  atomic_fetch_add_explicit (&tx->tx_delay_ns, wakeup - now,
                             memory_order_relaxed);
  txg_sleep_until (wakeup);
  return zv_txg_error (tx);
}

/* Join the open txg (after the throttle); no global lock. */
int
zv_txg_hold (zv_txg_t *tx, uint64_t bytes, zv_txg_hold_t *h)
{
  zv_txg_cpu_t *tc;
  uint64_t txg;
  unsigned g;
  int cpu, err;

  if ((err = zv_txg_error (tx)) != 0)
    return err;
  if ((err = txg_throttle (tx)) != 0)
    return err;

  cpu = sched_getcpu ();
  h->th_cpu = cpu < 0 ? 0 : (unsigned) cpu % tx->tx_ncpu;
  tc = &tx->tx_cpu[h->th_cpu];
  pthread_mutex_lock (&tc->tc_open_lock);
  txg = atomic_load_explicit (&tx->tx_open_txg, memory_order_acquire);
  /* The open txg is past the last synced one, by one, or by two while
   * the txg before it quiesces or syncs. */
  ZV_ASSERT3U (txg, >, zv_txg_last_synced (tx));
  ZV_ASSERT3U (txg - zv_txg_last_synced (tx), <=, 2);
  g = txg & ZV_TXG_MASK;
  tc->tc_count[g]++;
  pthread_mutex_unlock (&tc->tc_open_lock);
  h->th_txg = txg;

  /* Still counted in txg, so it cannot be quiesced under us. */
  if (!atomic_load_explicit (&tx->tx_active[g], memory_order_acquire))
    atomic_store_explicit (&tx->tx_active[g], 1, memory_order_release);
  if (bytes > 0)
    txg_charge (tx, txg, bytes);
  return 0;
}

void
zv_txg_charge (zv_txg_t *tx, const zv_txg_hold_t *h, uint64_t bytes)
{
  ZV_ASSERT3U (h->th_cpu, <, tx->tx_ncpu);
  if (bytes > 0)
    txg_charge (tx, h->th_txg, bytes);
}

/* Leave the txg; the last holder on a slot wakes the quiescer. */
void
zv_txg_rele (zv_txg_t *tx, zv_txg_hold_t *h)
{
  zv_txg_cpu_t *tc;
  unsigned g = h->th_txg & ZV_TXG_MASK;

  ZV_ASSERT3U (h->th_cpu, <, tx->tx_ncpu);
  /* A held txg cannot have synced: its quiesce waits for this rele. */
  ZV_ASSERT3U (h->th_txg, >, zv_txg_last_synced (tx));
  tc = &tx->tx_cpu[h->th_cpu];
  pthread_mutex_lock (&tc->tc_open_lock);
  ZV_ASSERT3U (tc->tc_count[g], >, 0);          /* never negative */
  if (--tc->tc_count[g] == 0)
    pthread_cond_broadcast (&tc->tc_cv);
  pthread_mutex_unlock (&tc->tc_open_lock);
}

/* ---------------------------------------------------------------------- */
/* Quiesce and sync. */

/*
 * Close the open txg: with every slot's open lock held, no hold is in
 * flight, so advancing tx_open_txg is seen by every later hold.  The slot of
 * the new txg was last used by txg + 1 - ZV_TXG_SIZE, synced long ago:
 * reset its flags.
 * Called with tx_lock held and tx_syncing set.  Returns the closed txg.
 */
static uint64_t
txg_close (zv_txg_t *tx, uint64_t now)
{
  uint64_t txg = atomic_load_explicit (&tx->tx_open_txg,
                                      memory_order_acquire);
  unsigned ng = (txg + 1) & ZV_TXG_MASK;
  unsigned c;

  /* Nothing quiesces or syncs: the open txg is the only one with state. */
  ZV_VERIFY3U (txg_last_synced_locked (tx), ==, txg - 1);
  for (c = 0; c < tx->tx_ncpu; c++)
    pthread_mutex_lock (&tx->tx_cpu[c].tc_open_lock);
  /* The new txg's slot holds nothing of the txg that last used it. */
  for (c = 0; c < tx->tx_ncpu; c++)
    ZV_VERIFY3U (tx->tx_cpu[c].tc_count[ng], ==, 0);
  ZV_VERIFY3U (atomic_load_explicit (&tx->tx_dirty_pertxg[ng],
                                     memory_order_acquire), ==, 0);
  atomic_store_explicit (&tx->tx_active[ng], 0, memory_order_release);
  atomic_store_explicit (&tx->tx_kicked[ng], 0, memory_order_release);
  atomic_store_explicit (&tx->tx_open_txg, txg + 1, memory_order_release);
  for (c = tx->tx_ncpu; c-- > 0;)
    pthread_mutex_unlock (&tx->tx_cpu[c].tc_open_lock);
  txg_hist_open (tx, txg + 1, now);
  return txg;
}

/* Wait for every hold on 'txg' to be released (tx_lock not held). */
static void
txg_quiesce_wait (zv_txg_t *tx, uint64_t txg)
{
  unsigned g = txg & ZV_TXG_MASK;
  unsigned c;

  for (c = 0; c < tx->tx_ncpu; c++) {
    zv_txg_cpu_t *tc = &tx->tx_cpu[c];

    pthread_mutex_lock (&tc->tc_open_lock);
    while (tc->tc_count[g] > 0)
      pthread_cond_wait (&tc->tc_cv, &tc->tc_open_lock);
    pthread_mutex_unlock (&tc->tc_open_lock);
  }
}

/*
 * Quiesce and sync the open txg, from the sync thread or inline.  Called
 * with tx_lock held, no sync in progress and the engine not failed; drops
 * tx_lock while holds drain and while the callback runs, returns with it
 * held.  Returns 0 or the callback's error (which fails the engine).
 */
static int
txg_sync_once (zv_txg_t *tx)
{
  zv_txg_sync_stats_t stats = { 0 };
  zv_txg_hist_t *th;
  uint64_t txg, ndirty, t_open, t_quiesced, t_sync, t_done;
  unsigned g;
  int err;

  ZV_VERIFY (!tx->tx_syncing);
  ZV_VERIFY (txg_error_locked (tx) == 0);
  tx->tx_syncing = true;

  t_open = zv_now_ns ();
  tx->tx_sync_start_ns = t_open;
  txg = txg_close (tx, t_open);
  g = txg & ZV_TXG_MASK;
  th = txg_hist_get (tx, txg);
  ZV_ASSERT (th->txh_state == 'O');
  th->txh_state = 'Q';
  th->txh_otime = t_open - th->txh_birth;
  pthread_mutex_unlock (&tx->tx_lock);

  txg_quiesce_wait (tx, txg);
  t_quiesced = zv_now_ns ();

  /* Holds are gone: the per-txg dirty count is final. */
  ndirty = atomic_load_explicit (&tx->tx_dirty_pertxg[g],
                                memory_order_acquire);
  pthread_mutex_lock (&tx->tx_lock);
  th = txg_hist_get (tx, txg);
  th->txh_qtime = t_quiesced - t_open;
  th->txh_ndirty = ndirty;
  ZV_ASSERT (th->txh_state == 'Q');
  th->txh_state = 'S';
  t_sync = zv_now_ns ();
  th->txh_wtime = t_sync - t_quiesced;
  pthread_mutex_unlock (&tx->tx_lock);

  err = tx->tx_sync_fn (tx->tx_arg, txg, &stats);
  if (err > 0)
    err = -err;
  t_done = zv_now_ns ();

  pthread_mutex_lock (&tx->tx_lock);
  th = txg_hist_get (tx, txg);
  th->txh_stime = t_done - t_sync;
  th->txh_nread = stats.ss_nread;
  th->txh_nwritten = stats.ss_nwritten;
  th->txh_reads = stats.ss_reads;
  th->txh_writes = stats.ss_writes;
  if (err == 0) {
    /* Synced in order, and the only quiesce + sync in progress. */
    ZV_VERIFY3U (txg_last_synced_locked (tx), ==, txg - 1);
    ZV_VERIFY3U (zv_txg_open_txg (tx), ==, txg + 1);
    ZV_VERIFY3U (zv_txg_dirty_total (tx), >=, ndirty);
    atomic_fetch_sub_explicit (&tx->tx_dirty_total, ndirty,
                               memory_order_acq_rel);
    atomic_store_explicit (&tx->tx_dirty_pertxg[g], 0, memory_order_release);
    th->txh_state = 'C';
    atomic_store_explicit (&tx->tx_last_synced, txg, memory_order_release);
  }
  else {
    zv_error ("txg %" PRIu64 ": sync failed: %s; the pool is suspended",
              txg, strerror (-err));
    atomic_store_explicit (&tx->tx_error, err, memory_order_release);
  }
  tx->tx_syncing = false;
  pthread_cond_broadcast (&tx->tx_done_cv);
  return err;
}

/* Timeout tunable: max seconds of changes per txg (zfs_txg_timeout). */
static unsigned zv_txg_timeout_s = 5;

/* Absolute CLOCK_MONOTONIC ns to timespec, for timed waits. */
static struct timespec
txg_timespec (uint64_t ns)
{
  struct timespec ts = {
    .tv_sec = (time_t) (ns / 1000000000ull),
    .tv_nsec = (long) (ns % 1000000000ull),
  };
  return ts;
}

/*
 * The sync thread: sleeps until the timeout, a kick or a waiter, then
 * quiesces and syncs the open txg.  On stop, syncs what is left first.
 */
static void *
txg_sync_thread (void *arg)
{
  zv_txg_t *tx = arg;
  const uint64_t timeout_ns =
    tx->tx_tt.tt_timeout_ms > UINT64_MAX / 2000000 ? UINT64_MAX / 2 :
    tx->tx_tt.tt_timeout_ms * 1000000;

  zv_thread_name ("zv-txg-sync");
  pthread_mutex_lock (&tx->tx_lock);
  for (;;) {
    uint64_t open, now, deadline;
    bool want;

    if (tx->tx_syncing) {       /* an inline sync from before we started */
      pthread_cond_wait (&tx->tx_done_cv, &tx->tx_lock);
      continue;
    }
    if (txg_error_locked (tx) != 0) {   /* failed: sync nothing more */
      if (tx->tx_exiting)
        break;
      pthread_cond_wait (&tx->tx_sync_cv, &tx->tx_lock);
      continue;
    }
    open = atomic_load_explicit (&tx->tx_open_txg, memory_order_acquire);
    want = tx->tx_sync_want > txg_last_synced_locked (tx);
    if (tx->tx_exiting) {
      if (!want && !txg_active (tx, open))
        break;
      (void) txg_sync_once (tx);
      continue;
    }
    if (!want) {
      now = zv_now_ns ();
      deadline = tx->tx_sync_start_ns + timeout_ns;
      if (now < deadline) {
        struct timespec ts = txg_timespec (deadline);

        pthread_cond_timedwait (&tx->tx_sync_cv, &tx->tx_lock, &ts);
        continue;
      }
      if (!txg_active (tx, open)) {
        tx->tx_sync_start_ns = now;     /* idle: nothing to write */
        continue;
      }
    }
    (void) txg_sync_once (tx);
  }
  atomic_store_explicit (&tx->tx_running, 0, memory_order_release);
  pthread_cond_broadcast (&tx->tx_done_cv);
  pthread_mutex_unlock (&tx->tx_lock);
  return NULL;
}

/* ---------------------------------------------------------------------- */
/* Waiting and control. */

/*
 * Wait until 'txg' (0: every txg with a hold so far) is on disk.  With the
 * thread running we ask it and sleep; without it (tests, before the fork)
 * we run the syncs inline, serialised by tx_lock / tx_syncing.  The caller
 * holds no txg.
 */
int
zv_txg_wait_synced (zv_txg_t *tx, uint64_t txg)
{
  int err;

  pthread_mutex_lock (&tx->tx_lock);
  if (txg == 0) {
    /* Everything acknowledged so far lives in txgs up to the open one.
     * If the open txg never took a hold, nothing in it needs to be
     * durable: wait for the one before (a flush on an idle pool then
     * costs nothing). */
    txg = atomic_load_explicit (&tx->tx_open_txg, memory_order_acquire);
    if (!txg_active (tx, txg))
      txg--;
  }
  for (;;) {
    if (txg_last_synced_locked (tx) >= txg) {
      err = 0;
      break;
    }
    if (txg_error_locked (tx) != 0) {
      err = txg_error_locked (tx);
      break;
    }
    txg_sync_step (tx, txg);
  }
  pthread_mutex_unlock (&tx->tx_lock);
  return err;
}

/* Start the sync thread (after nbdkit's fork: threads do not survive it). */
int
zv_txg_start (zv_txg_t *tx)
{
  int err;

  pthread_mutex_lock (&tx->tx_lock);
  if (tx->tx_started) {
    pthread_mutex_unlock (&tx->tx_lock);
    return 0;
  }
  tx->tx_exiting = false;
  tx->tx_sync_start_ns = zv_now_ns ();
  atomic_store_explicit (&tx->tx_running, 1, memory_order_release);
  err = pthread_create (&tx->tx_thread, NULL, txg_sync_thread, tx);
  if (err != 0) {
    atomic_store_explicit (&tx->tx_running, 0, memory_order_release);
    pthread_mutex_unlock (&tx->tx_lock);
    zv_error ("txg: cannot start the sync thread: %s", strerror (err));
    return -err;
  }
  tx->tx_started = true;
  pthread_mutex_unlock (&tx->tx_lock);
  return 0;
}

/*
 * Sync what is still dirty (or held) and stop the thread; without a thread,
 * do that sync inline.  Returns the error that failed the engine, if any.
 */
int
zv_txg_stop (zv_txg_t *tx)
{
  int err;

  pthread_mutex_lock (&tx->tx_lock);
  if (tx->tx_started) {
    ZV_VERIFY (!tx->tx_exiting);
    tx->tx_exiting = true;
    pthread_cond_signal (&tx->tx_sync_cv);
    pthread_mutex_unlock (&tx->tx_lock);
    err = pthread_join (tx->tx_thread, NULL);
    ZV_VERIFY (err == 0);
    pthread_mutex_lock (&tx->tx_lock);
    ZV_VERIFY (!atomic_load_explicit (&tx->tx_running,
                                      memory_order_acquire));
    tx->tx_started = false;
    tx->tx_exiting = false;
  }
  else {
    while (txg_error_locked (tx) == 0) {
      if (tx->tx_syncing) {
        pthread_cond_wait (&tx->tx_done_cv, &tx->tx_lock);
        continue;
      }
      if (tx->tx_sync_want <= txg_last_synced_locked (tx) &&
          !txg_active (tx, zv_txg_open_txg (tx)))
        break;
      (void) txg_sync_once (tx);
    }
  }
  err = txg_error_locked (tx);
  pthread_mutex_unlock (&tx->tx_lock);
  return err;
}

/* Dirty-data tunables (dsl_pool.c). */
static uint64_t zv_txg_dirty_max = 0;                /* 0: from RAM */
static uint64_t zv_txg_dirty_max_max = 4ull << 30;   /* 4 GiB cap */
static unsigned zv_txg_dirty_max_pct = 10;           /* of RAM */
static unsigned zv_txg_dirty_sync_pct = 20;          /* kick at */

/* The tunables' current values (the table at the end); dirty_max, when
 * auto, from physical memory. */
void
zv_txg_tunables_default (zv_txg_tunables_t *tt)
{
  uint64_t phys = zv_physical_memory (zv_txg_dirty_max_max * 10);

  memset (tt, 0, sizeof *tt);
  tt->tt_timeout_ms = (uint64_t) zv_txg_timeout_s * 1000;
  tt->tt_dirty_max = zv_txg_dirty_max ? zv_txg_dirty_max
    : ZV_MIN (phys / 100 * zv_txg_dirty_max_pct, zv_txg_dirty_max_max);
  tt->tt_dirty_sync_pct = zv_txg_dirty_sync_pct;
  tt->tt_delay_min_dirty_pct = zv_txg_delay_min_dirty_pct;
  tt->tt_delay_scale_ns = zv_txg_delay_scale_ns;
  tt->tt_delay_max_ns = zv_txg_delay_max_ns;
}

/* An engine whose first open txg is 'first_txg'; no thread yet. */
zv_txg_t *
zv_txg_create (const zv_txg_tunables_t *tt, uint64_t first_txg,
               zv_txg_sync_fn sync_fn, void *arg)
{
  zv_txg_t *tx;
  pthread_condattr_t ca;
  long ncpu;
  unsigned c;
  void *p = NULL;

  ZV_VERIFY (first_txg > 0);
  ZV_VERIFY (sync_fn != NULL);
  ZV_VERIFY (tt->tt_dirty_max > 0);

  tx = zv_calloc (1, sizeof *tx);
  ncpu = sysconf (_SC_NPROCESSORS_CONF);
  tx->tx_ncpu = ncpu > 0 ? (unsigned) ncpu : 1;
  if (posix_memalign (&p, ZV_TXG_CACHELINE,
                      tx->tx_ncpu * sizeof (zv_txg_cpu_t)) != 0)
    zv_nomem (tx->tx_ncpu * sizeof (zv_txg_cpu_t));
  tx->tx_cpu = p;
  memset (tx->tx_cpu, 0, tx->tx_ncpu * sizeof (zv_txg_cpu_t));
  for (c = 0; c < tx->tx_ncpu; c++) {
    pthread_mutex_init (&tx->tx_cpu[c].tc_open_lock, NULL);
    pthread_cond_init (&tx->tx_cpu[c].tc_cv, NULL);
  }

  tx->tx_tt = *tt;
  tx->tx_dirty_sync = (uint64_t) ((unsigned __int128) tt->tt_dirty_max *
                                  tt->tt_dirty_sync_pct / 100);
  tx->tx_sync_fn = sync_fn;
  tx->tx_arg = arg;
  tx->tx_first_txg = first_txg;
  tx->tx_start_ns = zv_now_ns ();
  /* calloc zeroed the other atomics; nobody sees tx before we return. */
  atomic_init (&tx->tx_open_txg, first_txg);
  atomic_init (&tx->tx_last_synced, first_txg - 1);
  tx->tx_sync_want = first_txg - 1;
  tx->tx_sync_start_ns = tx->tx_start_ns;

  pthread_mutex_init (&tx->tx_lock, NULL);
  pthread_condattr_init (&ca);
  pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
  pthread_cond_init (&tx->tx_sync_cv, &ca);
  pthread_condattr_destroy (&ca);
  pthread_cond_init (&tx->tx_done_cv, NULL);
  txg_hist_open (tx, first_txg, tx->tx_start_ns);
  return tx;
}

/* Free the engine (stopping the thread if the caller did not). */
void
zv_txg_destroy (zv_txg_t *tx)
{
  unsigned c;

  if (tx == NULL)
    return;
  if (tx->tx_started)
    (void) zv_txg_stop (tx);
  ZV_VERIFY (!tx->tx_syncing);
  for (c = 0; c < tx->tx_ncpu; c++) {
    pthread_mutex_destroy (&tx->tx_cpu[c].tc_open_lock);
    pthread_cond_destroy (&tx->tx_cpu[c].tc_cv);
  }
  free (tx->tx_cpu);
  pthread_mutex_destroy (&tx->tx_lock);
  pthread_cond_destroy (&tx->tx_sync_cv);
  pthread_cond_destroy (&tx->tx_done_cv);
  free (tx);
}

/* The txg new holds join (atomic read: may move on at once). */
uint64_t
zv_txg_open_txg (zv_txg_t *tx)
{
  return atomic_load_explicit (&tx->tx_open_txg, memory_order_acquire);
}

/* The newest txg on disk. */
uint64_t
zv_txg_last_synced (zv_txg_t *tx)
{
  return atomic_load_explicit (&tx->tx_last_synced, memory_order_acquire);
}

/* Dirty bytes not yet synced, over every txg (the throttle's input). */
uint64_t
zv_txg_dirty_total (zv_txg_t *tx)
{
  return atomic_load_explicit (&tx->tx_dirty_total, memory_order_acquire);
}

/* The dirty-data limit the throttle works to (statistics). */
void
zv_txg_throttle_stats (zv_txg_t *tx, uint64_t *delays, uint64_t *delay_ns,
                       uint64_t *stalls)
{
  *delays = atomic_load_explicit (&tx->tx_delays, memory_order_relaxed);
  *delay_ns = atomic_load_explicit (&tx->tx_delay_ns, memory_order_relaxed);
  *stalls = atomic_load_explicit (&tx->tx_stalls, memory_order_relaxed);
}

uint64_t
zv_txg_dirty_limit (zv_txg_t *tx)
{
  return tx->tx_tt.tt_dirty_max;
}

/* Dirty bytes as a percentage of dirty_max. */
unsigned
zv_txg_dirty_pct (zv_txg_t *tx)
{
  uint64_t max = tx->tx_tt.tt_dirty_max;

  return max ? (unsigned) ZV_MIN (txg_pressure (tx) * 100 / max, 100) : 100;
}

/* Before any writer: no hold reads the pair while it changes. */
void
zv_txg_set_space_fn (zv_txg_t *tx, zv_txg_space_fn fn, void *arg)
{
  tx->tx_space_fn = fn;
  tx->tx_space_arg = arg;
}

/* 0, or the error that failed the engine (the pool is suspended). */
int
zv_txg_error (zv_txg_t *tx)
{
  return atomic_load_explicit (&tx->tx_error, memory_order_acquire);
}

/* ---- tunables (tunable.h): read into zv_txg_tunables_t by
 * zv_txg_tunables_default, which a pool's configuration starts from ---- */
const zv_tunable_t zv_txg_tunable_table[] = {
  { .tn_name = "txg_timeout", .tn_module = "txg",
    ZV_TUNABLE_VAR_UINT (zv_txg_timeout_s),
    .tn_default = 5, .tn_min = 1, .tn_max = 3600,
    .tn_unit = ZV_TUNABLE_UNIT_S, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the txg sync thread",
    .tn_desc = "Sync a txg at least this often, even if little is dirty.",
    .tn_zfs = "zfs_txg_timeout" },
  { .tn_name = "dirty_max", .tn_module = "txg",
    ZV_TUNABLE_VAR_U64 (zv_txg_dirty_max),
    .tn_default = 0, .tn_min = 1ull << 20, .tn_max = 1ull << 40,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_flags = ZV_TUNABLE_F_AUTO,
    .tn_when = ZV_TUNABLE_AT_OPEN, .tn_reader = "the write throttle",
    .tn_desc = "Most dirty data held in memory: writers are delayed as it "
    "nears this and block at it; auto is dirty_max_percent of physical "
    "memory, at most dirty_max_max.",
    .tn_zfs = "zfs_dirty_data_max" },
  { .tn_name = "dirty_max_max", .tn_module = "txg",
    ZV_TUNABLE_VAR_U64 (zv_txg_dirty_max_max),
    .tn_default = 4ull << 30, .tn_min = 1ull << 20, .tn_max = 1ull << 40,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the write throttle",
    .tn_desc = "Cap of an auto dirty_max.",
    .tn_zfs = "zfs_dirty_data_max_max" },
  { .tn_name = "dirty_max_percent", .tn_module = "txg",
    ZV_TUNABLE_VAR_UINT (zv_txg_dirty_max_pct),
    .tn_default = 10, .tn_min = 1, .tn_max = 50,
    .tn_unit = ZV_TUNABLE_UNIT_PCT, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the write throttle",
    .tn_desc = "An auto dirty_max as a share of physical memory.",
    .tn_zfs = "zfs_dirty_data_max_percent" },
  { .tn_name = "dirty_sync_percent", .tn_module = "txg",
    ZV_TUNABLE_VAR_UINT (zv_txg_dirty_sync_pct),
    .tn_default = 20, .tn_min = 1, .tn_max = 100,
    .tn_unit = ZV_TUNABLE_UNIT_PCT, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the txg engine",
    .tn_desc = "Start a txg sync early once the open txg holds this share "
    "of dirty_max.",
    .tn_zfs = "zfs_dirty_data_sync_percent" },
  { .tn_name = "space_sync_percent", .tn_module = "txg",
    ZV_TUNABLE_VAR_UINT (zv_txg_space_sync_pct),
    .tn_default = 30, .tn_min = 1, .tn_max = 100,
    .tn_unit = ZV_TUNABLE_UNIT_PCT, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the txg engine",
    .tn_desc = "Start a txg sync early once writers' reservations and the "
    "frees waiting for later txgs hold this share of the space not taken "
    "by live data: a nearly full pool syncs smaller txgs, so its frees "
    "come back before writers run out of space and wait for whole "
    "syncs." },
  { .tn_name = "delay_min_dirty_percent", .tn_module = "txg",
    ZV_TUNABLE_VAR_UINT (zv_txg_delay_min_dirty_pct),
    .tn_default = 60, .tn_min = 1, .tn_max = 99,
    .tn_unit = ZV_TUNABLE_UNIT_PCT, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the write throttle",
    .tn_desc = "Start delaying writers once dirty data passes this share "
    "of dirty_max.",
    .tn_zfs = "zfs_delay_min_dirty_percent" },
  { .tn_name = "delay_scale", .tn_module = "txg",
    ZV_TUNABLE_VAR_U64 (zv_txg_delay_scale_ns),
    .tn_default = 500000, .tn_min = 0, .tn_max = 1000000000,
    .tn_unit = ZV_TUNABLE_UNIT_NS, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the write throttle",
    .tn_desc = "A writer's delay midway between delay_min_dirty_percent "
    "and dirty_max; the curve grows steeply past it.",
    .tn_zfs = "zfs_delay_scale" },
  { .tn_name = "delay_max", .tn_module = "txg",
    ZV_TUNABLE_VAR_U64 (zv_txg_delay_max_ns),
    .tn_default = 100000000, .tn_min = 0, .tn_max = 10000000000ull,
    .tn_unit = ZV_TUNABLE_UNIT_NS, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the write throttle",
    .tn_desc = "Longest delay of one write by the throttle." },
  ZV_TUNABLE_END
};
