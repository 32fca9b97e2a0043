/*
 * zil_ahead.c: the intent log's write-ahead: a write that nobody commits
 * yet starts its log block's write before it returns, and the commit
 * that follows finishes it.
 *
 * Theory.
 *
 * Write-ahead.  A client that flushes after every write (a database's
 * log, fio fsync=1) waits for the write's reply, sends the flush, and only
 * then would the log block be written and flushed: the device's two round
 * trips came after the transport's, in series.  So a write that nobody
 * commits yet may start its log block's write itself, before it returns:
 * zv_zil_write_ahead takes the write-ahead slot (zl_wa_state, a CAS from
 * idle to submitting), the issuer role (try-CAS: a holder is a committer,
 * which writes what it waits for), packs what is published and, when no
 * block is in flight, closes the open block, seals it and starts its write
 * on an asynchronous queue (dev.h zv_dev_async_*: Linux AIO, whose
 * completion any thread may reap; an io_uring completion is posted by its
 * submitter, an nbdkit thread asleep in a socket read by then), and
 * returns: the slot is in flight.  While the reply and the flush travel,
 * the device writes the block.  The first commit that comes (any ticket:
 * later blocks are durable only once this one is) takes the slot
 * (in flight to finishing), waits for the write, flushes the device and
 * marks the block done like any other (ahead_finish); the committers
 * of its records sleep on its slot meanwhile; one that meets the slot
 * while a block is being submitted waits for that (a futex on the state,
 * woken by ahead_set).  Only one block is written ahead at a time,
 * and only when none is in flight: otherwise the records stay in the open
 * block for the commits (group commit).  More than one block, or data to
 * write in place first (a large write), are written and flushed by the
 * writer at once, as a committer would.  The write that starts a block
 * pays for the submission (tens of microseconds on a virtual disk); the
 * flush saves the whole write.  Nothing changes for durability: a commit
 * still returns only when its ticket is durable, and a block written
 * ahead is an ordinary block of the chain (a cut before its flush leaves
 * a torn tail or a block whose records were never acknowledged).  A
 * block written ahead and never committed stays in flight until the
 * next commit, or the log's close, finishes it; it joins the sync-write
 * class (txg writes yield to the log's I/O, zio.c) only when finished, so
 * that one left in flight does not slow the txg syncs.
 * zt_write_ahead says when: always, off, or auto: once AHEAD_STREAK
 * flushes in a row (commits of everything; a FUA write commits itself)
 * each covered at most AHEAD_MAX_GAP tickets more than the one before
 * it (zv_zil_ahead_note), and for zil_write_ahead_window after the last of
 * them, so a stream of writes with rare flushes is logged by its flushes
 * as before, not one block per write.  The queue is made at the first
 * write ahead (so after nbdkit's fork) in the process that uses it
 * (zl_wa_gen against ahead_fork_gen, bumped in a forked child); where
 * there is none (the ring's device is not a local one opened with
 * O_DIRECT, or the kernel has no AIO context to give) nothing is written
 * ahead (zl_wa_never).

 * Memory ordering.  The write-ahead slot's fields (the queue, the block,
 * its requests: zl_wa_aq, zl_wa_lwb, zl_wa_ios) belong to whoever holds
 * the slot: the submitter's store of "in flight" is seq_cst (so a
 * release) and the finisher's CAS from it an acquire, and the same for
 * "idle" back to the next submitter; only the holder touches the queue,
 * so its start and finish never run at once.  The packing is zil_commit.c's,
 * under the issuer role as any pack.
 *
 * Locks: none.  The slot is a CAS'd state word; a committer that meets a
 * block being submitted sleeps on that word (woken by ahead_set).
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <pthread.h>
#include <stdatomic.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "zil_impl.h"

/* Auto write-ahead: on once AHEAD_STREAK flushes in a row each covered at
 * most AHEAD_MAX_GAP tickets more than the one before it, each from a
 * lone flusher, for zil_write_ahead_window (a tunable, zil_commit.c's
 * table) after the last of them. */
#define AHEAD_MAX_GAP 4u
#define AHEAD_STREAK 2u
uint64_t zv_zil_write_ahead_window_ns = 20000000;

/* Bumped in a forked child: an AIO context made before the fork is not
 * the child's. */
static _Atomic uint64_t ahead_fork_gen;
static pthread_once_t ahead_fork_once = PTHREAD_ONCE_INIT;

static void
ahead_atfork_child (void)
{
  atomic_fetch_add_explicit (&ahead_fork_gen, 1, memory_order_seq_cst);
}

static void
ahead_fork_init (void)
{
  ZV_VERIFY (pthread_atfork (NULL, NULL, ahead_atfork_child) == 0);
}

/* A flush (a commit of everything, up to ticket t) begins: in auto mode,
 * note whether flushes follow writes one by one (t at most AHEAD_MAX_GAP
 * past the last flush's) and alone (no other commit under way: concurrent
 * flushers' commits group their records, where a block written ahead for
 * each write would cost a write and take records from the groups),
 * AHEAD_STREAK times in a row.  Concurrent flushers may race here: it
 * is advice, and only moves the window. */
void
zv_zil_ahead_note (zv_zil_t *zl, uint64_t t)
{
  uint64_t prev = atomic_exchange_explicit (&zl->zl_wa_last_target, t,
                                            memory_order_relaxed);
  /* t below prev: another flusher's later target came first. */
  bool close = (t < prev || t - prev <= AHEAD_MAX_GAP)
    && atomic_load_explicit (&zl->zl_active, memory_order_relaxed) == 0;
  unsigned streak = close ? atomic_load_explicit (&zl->zl_wa_streak,
                                                  memory_order_relaxed) + 1
    : 0;

  streak = ZV_MIN (streak, AHEAD_STREAK);
  atomic_store_explicit (&zl->zl_wa_streak, streak, memory_order_relaxed);
  atomic_store_explicit (&zl->zl_wa_until_ns, streak == AHEAD_STREAK
                         ? zv_now_ns () + zv_zil_write_ahead_window_ns : 0,
                         memory_order_relaxed);
}

/* The write-ahead queue of this process, made at its first write ahead
 * (so after nbdkit's fork); NULL when the kernel gives none.  The slot
 * held (SUBMITTING). */
static zv_dev_async_t *
ahead_queue (zv_zil_t *zl)
{
  uint64_t gen;

  pthread_once (&ahead_fork_once, ahead_fork_init);
  gen = atomic_load_explicit (&ahead_fork_gen, memory_order_seq_cst);
  if (zl->zl_wa_gen != gen) {
    /* A forked child: the parent's context is not ours, and nothing of
     * it is in flight here (nbdkit forks before it serves). */
    zl->zl_wa_aq = NULL;
    zl->zl_wa_tried = false;
    zl->zl_wa_gen = gen;
  }
  if (zl->zl_wa_aq == NULL && !zl->zl_wa_tried) {
    /* The ring is on one device: the log device, or the pool's. */
    zv_dev_t *dev = zil_ring_dev (zl, zl->zl_hdr.zh_ring_dva);

    zl->zl_wa_tried = true;
    if (zv_dev_async_ok (dev))
      zl->zl_wa_aq = zv_dev_async_new ();
    if (zl->zl_wa_aq == NULL)
      atomic_store_explicit (&zl->zl_wa_never, true, memory_order_relaxed);
  }
  return zl->zl_wa_aq;
}

/* Hand the write-ahead slot on in state st, waking the committers that
 * wait while a block is being submitted (ahead_wait). */
static void
ahead_set (zv_zil_t *zl, int st)
{
  atomic_store_explicit (&zl->zl_wa_state, (uint32_t) st,
                         memory_order_seq_cst);
  if (atomic_load_explicit (&zl->zl_wa_waiters, memory_order_seq_cst))
    syscall (SYS_futex, &zl->zl_wa_state, FUTEX_WAKE_PRIVATE, INT32_MAX,
             NULL, NULL, 0);
}

/* Sleep while a writer submits a block ahead (short), at most ns: the
 * waiter count and the state word pair up as the issuer role's do
 * (zil_commit.c, commit_role_wait). */
static void
ahead_wait (zv_zil_t *zl, uint64_t ns)
{
  struct timespec ts = { .tv_sec = ns / 1000000000ull,
                         .tv_nsec = ns % 1000000000ull };

  atomic_fetch_add_explicit (&zl->zl_wa_waiters, 1, memory_order_seq_cst);
  if (atomic_load_explicit (&zl->zl_wa_state, memory_order_seq_cst)
      == ZIL_AHEAD_SUBMITTING) {
    zil_stat_add (&zl->zl_stat_commit_waits, 1);
    syscall (SYS_futex, &zl->zl_wa_state, FUTEX_WAIT_PRIVATE,
             ZIL_AHEAD_SUBMITTING, &ts, NULL, 0);
  }
  atomic_fetch_sub_explicit (&zl->zl_wa_waiters, 1, memory_order_seq_cst);
}

/* Finish the block written ahead: wait for its write, flush its device,
 * mark it done (or fail the log).  The slot held (FINISHING).  Only now
 * is it of the sync-write class (txg writes yield to it): a block that no
 * commit finishes for a while must not slow the txg syncs meanwhile. */
static void
ahead_finish (zv_zil_t *zl)
{
  zil_lwb_t *lwb = zl->zl_wa_lwb;
  zv_dev_io_t *ios = zl->zl_wa_ios;
  int r;

  zv_zio_sync_io_begin (zl->zl_spa);
  r = zv_dev_async_finish (zl->zl_wa_aq, &ios[0]);
  if (r == 0 && zl->zl_wa_nios > 1)
    r = zv_dev_io_batch (ios + 1, zl->zl_wa_nios - 1);
  zv_zio_sync_io_end (zl->zl_spa);
  free (ios);
  zl->zl_wa_lwb = NULL;
  zl->zl_wa_ios = NULL;
  (void) zv_zil_commit_complete (zl, lwb, r, 0);
  ahead_set (zl, ZIL_AHEAD_IDLE);
}

/* A commit meets write-ahead: it finishes a block in flight (whichever
 * ticket it waits for: the blocks after it are durable only once it
 * is), or waits while one is being submitted.  True when it did either
 * (look again); false when the slot is idle or another committer is
 * finishing (its block's waiters sleep on the block's slot). */
bool
zv_zil_ahead_settle (zv_zil_t *zl)
{
  uint32_t st = atomic_load_explicit (&zl->zl_wa_state, memory_order_acquire);

  if (st == ZIL_AHEAD_INFLIGHT) {
    if (atomic_compare_exchange_strong_explicit (&zl->zl_wa_state, &st,
                                                 ZIL_AHEAD_FINISHING,
                                                 memory_order_acquire,
                                                 memory_order_relaxed))
      ahead_finish (zl);
    return true;
  }
  if (st == ZIL_AHEAD_SUBMITTING) {
    ahead_wait (zl, zv_zil_max_sleep_ns);
    return true;
  }
  return false;
}

/*
 * Write ahead (the slot held, SUBMITTING): pack what is published and,
 * when no block is in flight, close the open block and start its write
 * on the queue; the commit that follows finishes it.  More than one
 * block, or data to write in place first (a large write), are written
 * and flushed here, at once.
 */
static void
ahead_submit (zv_zil_t *zl)
{
  zv_dev_async_t *aq = ahead_queue (zl);
  zil_lwb_t *closed = NULL;
  zv_dev_io_t *ios;
  int expect = 0, r;
  bool full;

  if (aq != NULL && atomic_load_explicit (&zl->zl_ready, memory_order_seq_cst)
      && zil_error (zl) == 0
      && atomic_compare_exchange_strong_explicit (&zl->zl_issuer, &expect,
                                                  1, memory_order_acquire,
                                                  memory_order_relaxed)) {
    closed = zv_zil_commit_pack (zl, &full, true);
    zv_zil_role_release (zl);
  }
  if (closed == NULL) {
    ahead_set (zl, ZIL_AHEAD_IDLE);
    return;
  }
  for (zil_lwb_t *l = closed; l; l = l->lwb_next)
    zil_stat_add (&zl->zl_stat_lwbs_ahead, 1);
  if (closed->lwb_next != NULL || closed->lwb_nind != 0) {
    (void) zv_zil_commit_issue (zl, closed);
    ahead_set (zl, ZIL_AHEAD_IDLE);
    return;
  }
  ios = zv_zil_commit_ios_alloc (closed);
  r = zv_zil_commit_prepare (zl, closed, ios);
  if (r > 0 && zv_dev_async_start (aq, &ios[0])) {
    uint64_t seq = closed->lwb_seq;     /* not ours once in flight */

    zl->zl_wa_lwb = closed;
    zl->zl_wa_ios = ios;
    zl->zl_wa_nios = (size_t) r;
    ahead_set (zl, ZIL_AHEAD_INFLIGHT);
    /* A committer that found the slot idle, then its record in this
     * block, may be asleep on the block: wake it to finish the block
     * (commit_wait_block looks at the state after it counts itself). */
    zv_zil_wake_block (zl, seq);
    return;
  }
  /* Not queued (the queue checked the device): write and flush here. */
  if (r > 0) {
    zv_zio_sync_io_begin (zl->zl_spa);
    r = zv_dev_io_batch (ios, (size_t) r);
    zv_zio_sync_io_end (zl->zl_spa);
  }
  free (ios);
  (void) zv_zil_commit_complete (zl, closed, r, 0);
  ahead_set (zl, ZIL_AHEAD_IDLE);
}

void
zv_zil_write_ahead (zv_zil_t *zl, uint64_t ticket)
{
  enum zv_zil_write_ahead mode = zl->zl_tun.zt_write_ahead;
  uint32_t idle = ZIL_AHEAD_IDLE;

  if (mode == ZV_ZIL_WA_OFF || ticket == 0 || zl->zl_replaying
      || zl->zl_tun.zt_sync == ZV_SYNC_DISABLED
      || zl->zl_tun.zt_legacy_txg_commit
      || atomic_load_explicit (&zl->zl_wa_never, memory_order_relaxed))
    return;
  if (mode == ZV_ZIL_WA_AUTO
      && zv_now_ns () >= atomic_load_explicit (&zl->zl_wa_until_ns,
                                               memory_order_relaxed))
    return;
  if (atomic_load_explicit (&zl->zl_durable_ticket, memory_order_acquire)
      > ticket
      || !atomic_compare_exchange_strong_explicit (&zl->zl_wa_state, &idle,
                                                   ZIL_AHEAD_SUBMITTING,
                                                   memory_order_acquire,
                                                   memory_order_relaxed))
    return;
  ahead_submit (zl);
}

/* The log is closing (nothing logs or commits any more): a block still
 * written ahead is finished (its buffer is the kernel's until then), and
 * the queue freed in the process that made it. */
void
zv_zil_ahead_fini (zv_zil_t *zl)
{
  if (zl->zl_wa_gen == atomic_load_explicit (&ahead_fork_gen,
                                             memory_order_seq_cst)) {
    if (atomic_load_explicit (&zl->zl_wa_state, memory_order_acquire)
        == ZIL_AHEAD_INFLIGHT)
      ahead_finish (zl);
    zv_dev_async_free (zl->zl_wa_aq);
  }
  zl->zl_wa_aq = NULL;
}
