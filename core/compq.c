/*
 * compq.c: the compression queue.
 *
 * Theory.  A txg's data blocks are compressed before they are placed
 * (their stored size decides their allocation), and on the sync thread
 * alone compression and the writes took turns: first every block
 * compressed, then every block written.  The checksum of what is to be
 * stored is taken here too (an item's ci_cksum), so an uncompressed
 * volume's blocks come through the queue as well, with the property off:
 * the sync thread, the pipeline's one serial stage, then only places and
 * writes.  Here a job (one volume's sync)
 * hands its items to worker threads, which claim them in order with one
 * atomic counter (cj_next) and mark each done (ci_done); the sync thread
 * waits for the items in order (zv_compq_wait), placing and writing the
 * first ones while the workers compress the later ones (dmu.c cuts a
 * sync into pieces for that).  While it waits for an item nobody has
 * claimed, the owner claims and compresses it itself, so a job ends
 * with no worker at all (none started yet, or a forked child, where the
 * parent's workers do not exist).
 *
 * The workers stay at most compress_ahead (16 MiB) of logical data past
 * the items the owner last waited for (cj_limit, raised by each
 * zv_compq_wait), and a worker that reaches it sleeps until the owner
 * moves on: a block stored compressed keeps its buffer until its piece
 * is written, and workers left to run freely compressed a whole txg
 * ahead of the writes (a txg of random 4 KiB writes over a 1 GiB volume:
 * about a GiB of buffers, past what the buffer cache keeps, so their
 * pages were faulted in and cleared anew every txg, and the server's
 * resident peak was 1.9 GiB above compression off's).  The owner, too,
 * claims only below the limit (what it waits for always is); past it, it
 * sleeps until a worker finishes the item it waits for.  A worker
 * stalled on one job does not turn to another (several pools in one
 * process): that job's owner compresses what nobody claims, as ever.
 *
 * Workers: up to compq_threads (auto: one per online processor), made
 * when a job starts and fewer are running, detached; one with no job
 * for compq_idle_ms exits, so an idle process keeps none.  The queue is
 * a list of the jobs with unclaimed items; a worker holds a reference
 * (cj_refs) while it works in a job, and zv_compq_finish waits for the
 * references to drop after closing the job to new claims (cj_next
 * pushed to the end), so a job's items and buffers are the owner's
 * again when it returns.
 *
 * Locking: cq_lock guards the queue, the thread count and cj_refs;
 * cq_work_cv wakes workers (idle ones, and those stalled at a job's
 * limit), each job's cj_cv its owner.  A stalled worker counts itself
 * in cj_stalled and then looks at the limit, both under cq_lock; the
 * owner raises the limit and then looks at cj_stalled (all sequentially
 * consistent), and broadcasts under cq_lock when it is nonzero: either
 * the worker sees the new limit or the owner sees the worker, whose
 * check and sleep the lock makes one step.  A worker marks
 * an item done and then looks at cj_waiting; the owner sets cj_waiting,
 * under cq_lock, before it looks at the item (both sequentially
 * consistent), so either the owner sees the item done or the worker sees
 * it waiting and signals it under cq_lock.  In a forked child the state
 * is made anew (cq_atfork_child): no job runs across a fork (the sync
 * thread does not survive one either).
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "compq.h"
#include "compress.h"
#include "tunable.h"
#include "zv_util.h"

unsigned zv_compq_threads = 0;          /* 0: auto */
unsigned zv_compq_idle_ms = 5000;
uint64_t zv_compq_piece = 4ull << 20;
uint64_t zv_compq_ahead = 16ull << 20;

static pthread_mutex_t cq_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cq_work_cv;
static zv_compq_job_t *cq_jobs;         /* with unclaimed items */
static unsigned cq_nthreads;
static _Atomic uint64_t cq_by_workers, cq_by_owner;
static pthread_once_t cq_once = PTHREAD_ONCE_INIT;

static void
compq_cv_init (pthread_cond_t *cv)
{
  pthread_condattr_t a;

  pthread_condattr_init (&a);
  pthread_condattr_setclock (&a, CLOCK_MONOTONIC);
  pthread_cond_init (cv, &a);
  pthread_condattr_destroy (&a);
}

static void
compq_atfork_child (void)
{
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

  memcpy (&cq_lock, &fresh, sizeof fresh);
  compq_cv_init (&cq_work_cv);
  cq_jobs = NULL;
  cq_nthreads = 0;
}

static void
compq_init (void)
{
  compq_cv_init (&cq_work_cv);
  ZV_VERIFY (pthread_atfork (NULL, NULL, compq_atfork_child) == 0);
}

static unsigned
compq_target (void)
{
  long n;

  if (zv_compq_threads != 0)
    return zv_compq_threads;
  n = sysconf (_SC_NPROCESSORS_ONLN);
  return n > 0 ? (unsigned) ZV_MIN (n, 64) : 1;
}

/* Compress item i of j (one without a source was done from the start)
 * and say so; count it in *by.  An item without a buffer gets one only
 * past the early abort, and gives it back when compression saved too
 * little: a txg of incompressible blocks took a buffer per block before,
 * more than the buffer cache keeps, and the pages of every one were
 * faulted in and cleared anew each txg (a quarter of the server's time
 * under 4 KiB random writes, perf). */
static void
compq_one (zv_compq_job_t *j, size_t i, _Atomic uint64_t *by)
{
  zv_compq_item_t *it = &j->cj_items[i];

  if (it->ci_src == NULL)
    return;
  if (j->cj_prop == 0)
    it->ci_psize = 0;
  else if (it->ci_dst != NULL)
    it->ci_psize = it->ci_asked
      ? zv_comp_compress_asked (j->cj_prop, it->ci_src, it->ci_lsize,
                                it->ci_dst)
      : zv_comp_compress (j->cj_prop, it->ci_src, it->ci_lsize, it->ci_dst);
  else if (!it->ci_asked && zv_comp_refuses (j->cj_prop, it->ci_src,
                                             it->ci_lsize)) {
    zv_comp_count_refused ();
    it->ci_psize = 0;
  }
  else {
    it->ci_dst = zv_buf_get (it->ci_lsize);
    it->ci_psize = zv_comp_compress_asked (j->cj_prop, it->ci_src,
                                           it->ci_lsize, it->ci_dst);
    if (it->ci_psize == 0) {
      zv_buf_put (it->ci_dst, it->ci_lsize);
      it->ci_dst = NULL;
    }
  }
  if (it->ci_cksum) {
    if (it->ci_psize > 0)
      zv_cksum_compute (it->ci_dst, it->ci_psize, it->ci_seed, &it->ci_sum);
    else
      zv_cksum_compute (it->ci_src, it->ci_lsize, it->ci_seed, &it->ci_sum);
  }
  atomic_store_explicit (&it->ci_done, true, memory_order_seq_cst);
  atomic_fetch_add_explicit (by, 1, memory_order_relaxed);
}

/* Claim the next item of j: its index, or j->cj_n when none is left.
 * Nobody claims one at or past cj_limit: j->cj_n then, and *stall is set
 * (the owner's items are all below it). */
static size_t
compq_claim (zv_compq_job_t *j, bool *stall)
{
  size_t i = atomic_load_explicit (&j->cj_next, memory_order_relaxed);

  *stall = false;
  for (;;) {
    if (i >= j->cj_n)
      return j->cj_n;
    if (i >= atomic_load_explicit (&j->cj_limit, memory_order_seq_cst)) {
      *stall = true;
      return j->cj_n;
    }
    /* Relaxed: the counter only hands out indexes; an item's state
     * passes through ci_done. */
    if (atomic_compare_exchange_weak_explicit (&j->cj_next, &i, i + 1,
                                               memory_order_relaxed,
                                               memory_order_relaxed))
      return i;
  }
}

/* A worker at j's limit sleeps until the owner raises it, or the job has
 * nothing left to claim (all claimed, or closed by zv_compq_finish). */
static void
compq_stall (zv_compq_job_t *j)
{
  pthread_mutex_lock (&cq_lock);
  atomic_fetch_add_explicit (&j->cj_stalled, 1, memory_order_seq_cst);
  for (;;) {
    size_t next = atomic_load_explicit (&j->cj_next, memory_order_seq_cst);

    if (next >= j->cj_n
        || next < atomic_load_explicit (&j->cj_limit, memory_order_seq_cst))
      break;
    pthread_cond_wait (&cq_work_cv, &cq_lock);
  }
  atomic_fetch_sub_explicit (&j->cj_stalled, 1, memory_order_seq_cst);
  pthread_mutex_unlock (&cq_lock);
}

/* Let the workers claim items below limit (never lowered; the owner's
 * alone). */
static void
compq_raise_limit (zv_compq_job_t *j, size_t limit)
{
  limit = ZV_MIN (limit, j->cj_n);
  if (limit <= atomic_load_explicit (&j->cj_limit, memory_order_seq_cst))
    return;
  atomic_store_explicit (&j->cj_limit, limit, memory_order_seq_cst);
  if (atomic_load_explicit (&j->cj_stalled, memory_order_seq_cst) > 0) {
    pthread_mutex_lock (&cq_lock);
    pthread_cond_broadcast (&cq_work_cv);
    pthread_mutex_unlock (&cq_lock);
  }
}

/* Take j off the queue (cq_lock held). */
static void
compq_unlink_locked (zv_compq_job_t *j)
{
  for (zv_compq_job_t **pp = &cq_jobs; *pp; pp = &(*pp)->cj_link)
    if (*pp == j) {
      *pp = j->cj_link;
      j->cj_link = NULL;
      return;
    }
}

static void *
compq_worker (void *arg)
{
  (void) arg;
  zv_thread_name ("zv-compress");
  pthread_mutex_lock (&cq_lock);
  for (;;) {
    zv_compq_job_t *j = cq_jobs;

    if (j == NULL) {
      uint64_t at = zv_now_ns () + (uint64_t) zv_compq_idle_ms * 1000000;
      struct timespec ts = { .tv_sec = (time_t) (at / 1000000000),
                             .tv_nsec = (long) (at % 1000000000) };
      if (pthread_cond_timedwait (&cq_work_cv, &cq_lock, &ts) == ETIMEDOUT
          && cq_jobs == NULL)
        break;
      continue;
    }
    j->cj_refs++;
    pthread_mutex_unlock (&cq_lock);
    for (;;) {
      bool stall;
      size_t i = compq_claim (j, &stall);

      if (stall) {
        compq_stall (j);
        continue;
      }
      if (i >= j->cj_n)
        break;
      compq_one (j, i, &cq_by_workers);
      if (atomic_load_explicit (&j->cj_waiting, memory_order_seq_cst)) {
        pthread_mutex_lock (&cq_lock);
        pthread_cond_broadcast (&j->cj_cv);
        pthread_mutex_unlock (&cq_lock);
      }
    }
    pthread_mutex_lock (&cq_lock);
    /* Every item is claimed: nothing more for anyone here. */
    compq_unlink_locked (j);
    if (--j->cj_refs == 0)
      pthread_cond_broadcast (&j->cj_cv);
  }
  cq_nthreads--;
  pthread_mutex_unlock (&cq_lock);
  return NULL;
}

void
zv_compq_start (zv_compq_job_t *j, uint32_t prop, zv_compq_item_t *items,
                size_t n)
{
  unsigned want;

  ZV_VERIFY (pthread_once (&cq_once, compq_init) == 0);
  memset (j, 0, sizeof *j);
  j->cj_prop = prop;
  j->cj_items = items;
  j->cj_n = n;
  compq_cv_init (&j->cj_cv);
  size_t work = 0;
  uint32_t lsize = 0;
  for (size_t i = 0; i < n; i++) {
    atomic_init (&items[i].ci_done, items[i].ci_src == NULL);
    work += items[i].ci_src != NULL;
    if (items[i].ci_src != NULL)
      lsize = ZV_MAX (lsize, items[i].ci_lsize);
  }
  if (work == 0)
    return;
  /* Read once a job: a change made live applies from the next sync. */
  j->cj_window = (size_t) ZV_MAX (1u, __atomic_load_n (&zv_compq_ahead,
                                                       __ATOMIC_RELAXED)
                                  / ZV_MAX (lsize, 1u));
  atomic_store_explicit (&j->cj_limit, ZV_MIN (j->cj_window, n),
                         memory_order_seq_cst);
  want = ZV_MIN ((size_t) compq_target (), work);
  pthread_mutex_lock (&cq_lock);
  j->cj_link = cq_jobs;
  cq_jobs = j;
  j->cj_queued = true;
  while (cq_nthreads < want) {
    pthread_t t;
    pthread_attr_t a;

    pthread_attr_init (&a);
    pthread_attr_setdetachstate (&a, PTHREAD_CREATE_DETACHED);
    int e = pthread_create (&t, &a, compq_worker, NULL);
    pthread_attr_destroy (&a);
    if (e != 0)
      break;                    /* the owner compresses what is left */
    cq_nthreads++;
  }
  pthread_cond_broadcast (&cq_work_cv);
  pthread_mutex_unlock (&cq_lock);
}

void
zv_compq_wait (zv_compq_job_t *j, size_t upto)
{
  ZV_VERIFY3U (upto, <=, j->cj_n);
  /* The window moves before the wait, so the workers go on with the
   * next items while this thread takes its piece. */
  if (j->cj_queued)
    compq_raise_limit (j, upto + j->cj_window);
  for (size_t k = j->cj_ready; k < upto; k++) {
    while (!atomic_load_explicit (&j->cj_items[k].ci_done,
                                  memory_order_seq_cst)) {
      bool stall;
      size_t i = compq_claim (j, &stall);
      if (i < j->cj_n) {
        compq_one (j, i, &cq_by_owner);
        continue;
      }
      /* Every item is claimed, k by a worker still at it. */
      pthread_mutex_lock (&cq_lock);
      atomic_store_explicit (&j->cj_waiting, true, memory_order_seq_cst);
      while (!atomic_load_explicit (&j->cj_items[k].ci_done,
                                    memory_order_seq_cst))
        pthread_cond_wait (&j->cj_cv, &cq_lock);
      atomic_store_explicit (&j->cj_waiting, false, memory_order_seq_cst);
      pthread_mutex_unlock (&cq_lock);
    }
  }
  j->cj_ready = ZV_MAX (j->cj_ready, upto);
}

void
zv_compq_finish (zv_compq_job_t *j)
{
  if (!j->cj_queued) {
    pthread_cond_destroy (&j->cj_cv);
    return;
  }
  atomic_store_explicit (&j->cj_next, j->cj_n, memory_order_seq_cst);
  pthread_mutex_lock (&cq_lock);
  compq_unlink_locked (j);
  /* Workers stalled at the limit see the job closed and leave it. */
  pthread_cond_broadcast (&cq_work_cv);
  while (j->cj_refs > 0)
    pthread_cond_wait (&j->cj_cv, &cq_lock);
  pthread_mutex_unlock (&cq_lock);
  pthread_cond_destroy (&j->cj_cv);
}

void
zv_compq_get_stats (zv_compq_stats_t *out)
{
  out->cqs_by_workers = atomic_load_explicit (&cq_by_workers,
                                              memory_order_relaxed);
  out->cqs_by_owner = atomic_load_explicit (&cq_by_owner,
                                            memory_order_relaxed);
  pthread_mutex_lock (&cq_lock);
  out->cqs_threads = cq_nthreads;
  pthread_mutex_unlock (&cq_lock);
}

/* ---- tunables (tunable.h) ---- */
const zv_tunable_t zv_compq_tunable_table[] = {
  { .tn_name = "compress_threads", .tn_module = "compq",
    ZV_TUNABLE_VAR_UINT (zv_compq_threads),
    .tn_default = 0, .tn_min = 1, .tn_max = 64,
    .tn_unit = ZV_TUNABLE_UNIT_COUNT, .tn_flags = ZV_TUNABLE_F_AUTO,
    .tn_when = ZV_TUNABLE_LIVE, .tn_reader = "each txg sync",
    .tn_desc = "Threads that compress (where the property says so) and "
    "checksum a txg's data blocks while the sync thread writes the ones "
    "already done; auto is one per online processor.  The sync thread "
    "does it too when they fall behind." },
  { .tn_name = "compress_idle_ms", .tn_module = "compq",
    ZV_TUNABLE_VAR_UINT (zv_compq_idle_ms),
    .tn_default = 5000, .tn_min = 1, .tn_max = 3600000,
    .tn_unit = ZV_TUNABLE_UNIT_MS, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "each idle compression thread",
    .tn_desc = "A compression thread with no work for this long exits." },
  { .tn_name = "compress_ahead", .tn_module = "compq",
    ZV_TUNABLE_VAR_U64 (zv_compq_ahead),
    .tn_default = 16ull << 20, .tn_min = 128 * 1024, .tn_max = 1ull << 30,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "each txg sync of a volume",
    .tn_desc = "How far (logical bytes) the compression threads may run "
    "ahead of the blocks the sync is writing: a block stored compressed "
    "holds its buffer until it is written, so this bounds those buffers; "
    "too small and the threads wait for the writes." },
  { .tn_name = "compress_piece", .tn_module = "compq",
    ZV_TUNABLE_VAR_U64 (zv_compq_piece),
    .tn_default = 4ull << 20, .tn_min = 128 * 1024, .tn_max = 1ull << 30,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "each txg sync of a compressed volume",
    .tn_desc = "A compressed volume's sync places and writes its data "
    "blocks this many logical bytes at a time, so the writes of one piece "
    "overlap the compression of the next; smaller pieces start the "
    "writes sooner, but each piece waits for its last write." },
  ZV_TUNABLE_END
};
