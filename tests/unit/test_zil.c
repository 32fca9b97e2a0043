/*
 * test_zil.c: unit tests for the intent log (core/zil*.c) through the
 * public API, the pool's internals (core/pool.h, to reach the devices and
 * the log header) and a power-cut simulator (powercut.c) that sits on the
 * device layer's observer hook (tested here first):
 *
 *   observer       the hook's events, order and content, in the io_uring
 *                  and the pread/pwrite paths; the default for new devices
 *   powercut_sim   the simulator on a bare device: flushed writes survive,
 *                  the others land whole per sector or not at all
 *   contention     8 FUA writers and 2 flushers at once: every call
 *                  succeeds, commits share log blocks, the data is right
 *   records        copied / need-copy / indirect / free records, dropped
 *                  records of synced txgs, and their replay after a crash
 *   commit_in_sync a flush while its txg is half synced, then a power cut
 *                  before that txg commits: what the flush acknowledged
 *                  must survive
 *   commit_dropped_record
 *                  the commit of a record dropped because its txg synced
 *                  before it was packed returns, though a later record
 *                  sits in an open log block
 *   write_ahead    a write nobody commits yet starts its log block's
 *                  write itself (zil_write_ahead=always, and auto once
 *                  flushes follow writes); its flush writes no block;
 *                  off writes only at the flush
 *   pipeline       a commit writes its block while an earlier block's
 *                  flush is held, and returns only after that block
 *   write_ahead_group
 *                  eight threads each writing then flushing at once:
 *                  auto writes (almost) nothing ahead, their commits
 *                  group the records
 *   ring_full_by_txg
 *                  with flush=txg, a writer that finds the record ring
 *                  full of records of synced txgs gets room
 *   ring_full_after_log_error
 *                  after a failed log write, the in-memory records are
 *                  still dropped as the ring fills: no writer spins
 *   ring_full_suspended
 *                  on a suspended pool a writer that finds the ring full
 *                  returns EIO at once, using little CPU
 *   hostile_log    corrupt and garbage log blocks: replay stops at a
 *                  torn tail, the import fails at a damaged block in the
 *                  middle; checksummed nonsense never crashes
 *   hostile_ind    checksummed in-place records pointing at a hole, live
 *                  metadata or data, the log ring, or of the wrong shape:
 *                  the import fails with EIO and touches nothing
 *   log_damage     a damaged block in the middle of the chain (a later
 *                  one says it was durable): the import fails saying so;
 *                  read-only, zil_recover=truncate and discard import; a
 *                  torn tail (the newest block, or one nothing vouches
 *                  for) imports as before
 *   log_damage_batch
 *                  blocks written in one batch do not vouch for each
 *                  other; the next block vouches for them all
 *   log_damage_random
 *                  40 random damaged sectors: never an import silently
 *                  without an acknowledged write, but for the newest block
 *   log_damage_inplace
 *                  an in-place block damaged under a durable log block
 *   log_damage_rewound
 *                  after a rewind, such a block ends the log (its space
 *                  may have been reused), said
 *
 * Power cuts under load and during replay are in test_zil_crash.c; the
 * helpers both use are in ziltest.h.
 *
 * Devices are sparse files in a mkdtemp directory under /var/tmp.  Checks
 * made on threads other than cmocka's are counted, not asserted, and the
 * main thread asserts on the counts.  Run it under TSan too: the commit
 * path is lock-free.  ZV_TEST_SEED replays a run's random choices (the
 * thread interleavings aside); ZV_TEST_FILTER runs some tests only.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "testlib.h"
#include "ziltest.h"
#include "pool.h"
#include "powercut.h"

/* ------------------------------------------------------------------ */
/* Helpers                                                              */
/* ------------------------------------------------------------------ */

/* Crash an open pool without losing anything: every request from now
 * on fails, so the close cannot sync. */
static void
crash_close (zvol_pool_t *p)
{
  pc_t *cut = pc_new (1, PC_KEEP_ALL);

  /* Direct writes end first: the simulator sees a request whole. */
  zv_zio_pending_wait_all (zv_pool_spa (p));
  pc_attach (cut, zv_pool_spa (p)->spa_devs[0]);
  if (zv_pool_logdev (p))
    pc_attach (cut, zv_pool_logdev (p));
  tl_log_reset (true);
  pc_cut (cut);
  (void) tl_pool_close (p);
  pc_free (cut);
  tl_log_reset (false);
}

/* ------------------------------------------------------------------ */
/* The device observer hook                                             */
/* ------------------------------------------------------------------ */

typedef struct ev {
  enum zv_dev_op e_op;
  int e_done;
  uint64_t e_off;
  uint32_t e_len;
  const void *e_buf;
  int e_result;
  int e_on_disk;              /* a write's data in the file: 1, 0, -1 n/a */
} ev_t;

typedef struct evlog {
  pthread_mutex_t el_lock;
  ev_t el_ev[64];
  int el_n;
  int el_fd;                  /* O_DIRECT view of the file, or -1 */
} evlog_t;

/* Record an event; for a write, whether its data is in the file yet. */
static void
ev_observe (void *arg, zv_dev_t *dev, enum zv_dev_op op, int done,
            uint64_t off, uint32_t len, const void *buf, int result)
{
  evlog_t *el = arg;
  ev_t e = { op, done, off, len, buf, result, -1 };

  if (op == ZV_DEV_WRITE && el->el_fd >= 0 && len > 0) {
    uint8_t *tmp = zv_buf_alloc (len);
    if (pread (el->el_fd, tmp, len, (off_t) off) == (ssize_t) len)
      e.e_on_disk = memcmp (tmp, buf, len) == 0;
    zv_buf_free (tmp);
  }
  pthread_mutex_lock (&el->el_lock);
  if (el->el_n < 64)
    el->el_ev[el->el_n++] = e;
  pthread_mutex_unlock (&el->el_lock);
}

/* Index of the event (op, done, off), or -1. */
static int
ev_find (evlog_t *el, enum zv_dev_op op, int done, uint64_t off)
{
  for (int i = 0; i < el->el_n; i++)
    if (el->el_ev[i].e_op == op && el->el_ev[i].e_done == done
        && (op == ZV_DEV_FLUSH || el->el_ev[i].e_off == off))
      return i;
  return -1;
}

/* What one batch run of obs_batch() saw; checked on the main thread. */
typedef struct obs_run {
  evlog_t *or_el;
  zv_dev_t *or_dev;
  uint8_t *or_buf[4];
  int or_batch;               /* zv_dev_io_batch's result */
  int or_jail;                /* 0, or 1 when seccomp was unavailable */
} obs_run_t;

/* W(0,8K) W(16K,4K) FLUSH W(32K,4K) R(0,8K), one batch. */
static void
obs_batch (obs_run_t *or)
{
  zv_dev_io_t ios[5] = {
    { .di_dev = or->or_dev, .di_op = ZV_DEV_WRITE, .di_buf = or->or_buf[0], .di_offset = 0, .di_len = 8192 },
    { .di_dev = or->or_dev, .di_op = ZV_DEV_WRITE, .di_buf = or->or_buf[1], .di_offset = 16384, .di_len = 4096 },
    { .di_dev = or->or_dev, .di_op = ZV_DEV_FLUSH, .di_buf = NULL, .di_offset = 0, .di_len = 0 },
    { .di_dev = or->or_dev, .di_op = ZV_DEV_WRITE, .di_buf = or->or_buf[2], .di_offset = 32768, .di_len = 4096 },
    { .di_dev = or->or_dev, .di_op = ZV_DEV_READ, .di_buf = or->or_buf[3], .di_offset = 0, .di_len = 8192 },
  };

  or->or_batch = zv_dev_io_batch (ios, 5);
}

/* The order and content obs_batch() must produce. */
static void
obs_check (obs_run_t *or)
{
  evlog_t *el = or->or_el;
  int sa = ev_find (el, ZV_DEV_WRITE, 0, 0);
  int sb = ev_find (el, ZV_DEV_WRITE, 0, 16384);
  int da = ev_find (el, ZV_DEV_WRITE, 1, 0);
  int db = ev_find (el, ZV_DEV_WRITE, 1, 16384);
  int sf = ev_find (el, ZV_DEV_FLUSH, 0, 0);
  int df = ev_find (el, ZV_DEV_FLUSH, 1, 0);
  int sc = ev_find (el, ZV_DEV_WRITE, 0, 32768);
  int dc = ev_find (el, ZV_DEV_WRITE, 1, 32768);
  int sr = ev_find (el, ZV_DEV_READ, 0, 0);
  int dr = ev_find (el, ZV_DEV_READ, 1, 0);

  assert_int_equal (or->or_batch, 0);
  assert_int_equal (el->el_n, 10);
  assert_true (sa >= 0 && sb >= 0 && da >= 0 && db >= 0 && sf >= 0
               && df >= 0 && sc >= 0 && dc >= 0 && sr >= 0 && dr >= 0);
  /* Each completion after its submit; the flush only after both writes
   * before it completed; the requests after it only after it completed. */
  assert_true (sa < da && sb < db && sf < df && sc < dc && sr < dr);
  assert_true (da < sf && db < sf);
  assert_true (df < sc && df < sr);
  /* Content: the whole request, the caller's buffer, the result. */
  assert_int_equal (el->el_ev[sa].e_len, 8192);
  assert_ptr_equal (el->el_ev[sa].e_buf, or->or_buf[0]);
  assert_ptr_equal (el->el_ev[da].e_buf, or->or_buf[0]);
  assert_int_equal (el->el_ev[sb].e_len, 4096);
  assert_ptr_equal (el->el_ev[sb].e_buf, or->or_buf[1]);
  assert_ptr_equal (el->el_ev[sr].e_buf, or->or_buf[3]);
  assert_int_equal (el->el_ev[sf].e_len, 0);
  assert_null (el->el_ev[sf].e_buf);
  for (int i = 0; i < el->el_n; i++)
    assert_int_equal (el->el_ev[i].e_result, 0);
  /* A write is not in the file when submitted, and is when completed. */
  assert_int_equal (el->el_ev[sa].e_on_disk, 0);
  assert_int_equal (el->el_ev[sb].e_on_disk, 0);
  assert_int_equal (el->el_ev[sc].e_on_disk, 0);
  assert_int_equal (el->el_ev[da].e_on_disk, 1);
  assert_int_equal (el->el_ev[db].e_on_disk, 1);
  assert_int_equal (el->el_ev[dc].e_on_disk, 1);
}

/* Run obs_batch() on a thread whose io_uring_setup fails (seccomp). */
static void *
obs_jail_thread (void *arg)
{
  obs_run_t *or = arg;

  if (tl_jail_uring () != 0) {
    or->or_jail = 1;
    return NULL;
  }
  obs_batch (or);
  return NULL;
}

/* Fail every request at 16K. */
static int
obs_fault_16k (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
               uint32_t len)
{
  return op != ZV_DEV_FLUSH && off == 16384 ? -EIO : 0;
}

static void
evlog_reset (evlog_t *el, const char *path)
{
  el->el_n = 0;
  if (el->el_fd >= 0)
    close (el->el_fd);
  el->el_fd = path ? open (path, O_RDONLY | O_DIRECT | O_CLOEXEC) : -1;
  if (path && el->el_fd < 0)        /* no O_DIRECT here */
    el->el_fd = open (path, O_RDONLY | O_CLOEXEC);
}

/* The observer hook of dev.c, which the power-cut simulator relies on. */
static void
test_observer (void **state)
{
  char p1[512], p2[512], p3[512];
  zv_dev_t *dev, *dev2, *dev3;
  evlog_t el = { .el_lock = PTHREAD_MUTEX_INITIALIZER, .el_fd = -1 };
  evlog_t el2 = { .el_lock = PTHREAD_MUTEX_INITIALIZER, .el_fd = -1 };
  obs_run_t or = { .or_el = &el };
  zv_dev_io_t io2[2];
  pthread_t th;

  tl_path (p2, sizeof p2, "obs2.img");
  tl_path (p3, sizeof p3, "obs3.img");
  assert_int_equal (tl_sparse_file (p2, MiB), 0);
  assert_int_equal (tl_sparse_file (p3, MiB), 0);
  dev = tl_scratch_dev (p1, sizeof p1, "obs1.img", MiB);
  or.or_dev = dev;
  for (int i = 0; i < 4; i++) {
    or.or_buf[i] = zv_buf_alloc (8192);
    tl_pat_fill (or.or_buf[i], 0, 8192, 100 + i);
  }

  /* io_uring path. */
  evlog_reset (&el, p1);
  zv_dev_set_observer (dev, ev_observe, &el);
  obs_batch (&or);
  obs_check (&or);

  /* pread/pwrite path: new data, so "not yet on disk" means something. */
  for (int i = 0; i < 3; i++)
    tl_pat_fill (or.or_buf[i], 0, 8192, 200 + i);
  evlog_reset (&el, p1);
  assert_int_equal (pthread_create (&th, NULL, obs_jail_thread, &or), 0);
  assert_int_equal (pthread_join (th, NULL), 0);
  if (or.or_jail == 0)
    obs_check (&or);
  else
    fprintf (stderr, "  (seccomp unavailable: fallback path not tested)\n");

  /* A request the fault hook fails is never seen. */
  evlog_reset (&el, NULL);
  zv_dev_set_fault (dev, obs_fault_16k, NULL);
  io2[0] = (zv_dev_io_t) { .di_dev = dev, .di_op = ZV_DEV_WRITE, .di_buf = or.or_buf[0], .di_offset = 0, .di_len = 4096 };
  io2[1] = (zv_dev_io_t) { .di_dev = dev, .di_op = ZV_DEV_WRITE, .di_buf = or.or_buf[1], .di_offset = 16384, .di_len = 4096 };
  assert_int_equal (zv_dev_io_batch (io2, 2), -EIO);
  zv_dev_set_fault (dev, NULL, NULL);
  assert_int_equal (el.el_n, 2);
  assert_int_equal (el.el_ev[0].e_off, 0);
  assert_int_equal (el.el_ev[1].e_off, 0);
  assert_int_equal (el.el_ev[1].e_done, 1);

  /* Cleared: nothing seen. */
  zv_dev_set_observer (dev, NULL, NULL);
  assert_int_equal (zv_dev_flush (dev), 0);
  assert_int_equal (el.el_n, 2);

  /* The default for devices opened from now on (only those). */
  zv_dev_set_observer (NULL, ev_observe, &el2);
  dev2 = tl_dev_open (p2);
  zv_dev_set_observer (NULL, NULL, NULL);
  dev3 = tl_dev_open (p3);
  assert_int_equal (tl_dev_write (dev2, or.or_buf[0], 4096, 4096), 0);
  assert_int_equal (tl_dev_write (dev3, or.or_buf[0], 4096, 4096), 0);
  assert_int_equal (zv_dev_flush (dev), 0);
  assert_int_equal (el.el_n, 2);
  assert_int_equal (el2.el_n, 2);
  assert_int_equal (el2.el_ev[0].e_off, 4096);
  assert_int_equal (el2.el_ev[0].e_done, 0);
  assert_int_equal (el2.el_ev[1].e_done, 1);

  zv_dev_close (dev);
  zv_dev_close (dev2);
  zv_dev_close (dev3);
  evlog_reset (&el, NULL);
  for (int i = 0; i < 4; i++)
    zv_buf_free (or.or_buf[i]);
  unlink (p1);
  unlink (p2);
  unlink (p3);
}

/* ------------------------------------------------------------------ */
/* The simulator itself, on a bare device                               */
/* ------------------------------------------------------------------ */

/*
 * Writes completed before a flush was submitted survive every cut; a
 * write after the last flush either lands whole per sector or not, and
 * the lose-all and keep-all modes do what they say.
 */
static void
test_powercut_sim (void **state)
{
  char path[512];
  uint8_t *a = zv_buf_alloc (8192), *b = zv_buf_alloc (8192);
  uint8_t *c = zv_buf_alloc (8192), *got = zv_buf_alloc (8192);
  uint64_t seed = tl_seed ("powercut_sim");
  int seen_old = 0, seen_new = 0, seen_mixed = 0;

  tl_path (path, sizeof path, "sim.img");
  tl_pat_fill (a, 0, 8192, 1);
  tl_pat_fill (b, 0, 8192, 2);
  tl_pat_fill (c, 0, 8192, 3);
  tl_log_reset (true);               /* the I/O errors after the cuts */
  for (int round = 0; round < 60; round++) {
    enum pc_mode mode = round < 40 ? PC_RANDOM
      : round < 50 ? PC_LOSE_ALL : PC_KEEP_ALL;
    pc_t *pc = pc_new (seed + (uint64_t) round, mode);
    pc_stats_t st;
    zv_dev_t *dev;

    dev = tl_scratch_dev (path, sizeof path, "sim.img", MiB);
    pc_attach (pc, dev);
    assert_int_equal (tl_dev_write (dev, a, 0, 8192), 0);    /* durable */
    assert_int_equal (zv_dev_flush (dev), 0);
    assert_int_equal (tl_dev_write (dev, b, 0, 8192), 0);    /* pending */
    assert_int_equal (tl_dev_write (dev, c, 65536, 8192), 0); /* pending */
    pc_cut (pc);
    assert_int_equal (tl_dev_write (dev, a, 8192, 4096), -EIO);
    assert_int_equal (zv_dev_flush (dev), -EIO);
    pc_get_stats (pc, &st);
    zv_dev_close (dev);
    pc_free (pc);
    assert_int_equal (st.ps_writes, 3);
    assert_int_equal (st.ps_durable, 1);
    assert_int_equal (st.ps_cut_sectors, 4);
    assert_true (st.ps_failed >= 2);

    assert_int_equal (tl_file_pread (path, got, 8192, 0), 0);
    for (int s = 0; s < 2; s++) {
      bool is_a = memcmp (got + s * 4096, a + s * 4096, 4096) == 0;
      bool is_b = memcmp (got + s * 4096, b + s * 4096, 4096) == 0;
      assert_true (is_a || is_b);
      if (mode == PC_LOSE_ALL)
        assert_true (is_a);
      if (mode == PC_KEEP_ALL)
        assert_true (is_b);
    }
    if (memcmp (got, a, 8192) == 0)
      seen_old++;
    else if (memcmp (got, b, 8192) == 0)
      seen_new++;
    else
      seen_mixed++;                /* torn between sectors */
    assert_int_equal (tl_file_pread (path, got, 8192, 65536), 0);
    for (int s = 0; s < 2; s++)
      assert_true (zv_is_zero (got + s * 4096, 4096)
                   || memcmp (got + s * 4096, c + s * 4096, 4096) == 0);
  }
  tl_log_reset (false);
  /* The random mode really explores (40 rounds, 4 outcomes each). */
  assert_true (seen_old > 0 && seen_new > 0 && seen_mixed > 0);
  zv_buf_free (a);
  zv_buf_free (b);
  zv_buf_free (c);
  zv_buf_free (got);
  unlink (path);
}

/* ------------------------------------------------------------------ */
/* a. Contention                                                        */
/* ------------------------------------------------------------------ */

#define CT_WRITERS 8
#define CT_FLUSHERS 2
#define CT_WRITES 2000
#define CT_REGION (256ull * BLK)
#define CT_VOLSIZE (CT_WRITERS * CT_REGION)

typedef struct ct_thr {
  zvol_t *ct_zv;
  uint8_t *ct_shadow;
  unsigned ct_idx;
  uint64_t ct_seed;
  atomic_bool *ct_stop;
  int ct_errors, ct_first_err;
  uint64_t ct_ops;
  unsigned ct_writes;           /* a writer's: 0 is CT_WRITES */
  bool ct_flush_each;           /* write, then flush, instead of FUA */
} ct_thr_t;

/* ct_writes (CT_WRITES) sync writes of 4 KiB in this thread's own
 * region: FUA, or each followed by a flush; each copied to the shadow
 * when there is one. */
static void *
ct_writer (void *arg)
{
  ct_thr_t *t = arg;
  uint64_t rnd = t->ct_seed;
  uint8_t buf[BLK];
  unsigned n = t->ct_writes ? t->ct_writes : CT_WRITES;

  for (unsigned i = 0; i < n; i++) {
    uint64_t off = t->ct_idx * CT_REGION + tl_rand (&rnd) % 256 * BLK;
    int r;

    tl_pat_fill (buf, off, BLK, t->ct_seed * 7919 + i);
    if (t->ct_shadow != NULL)
      memcpy (t->ct_shadow + off, buf, BLK);
    if (t->ct_flush_each) {
      r = zvol_write (t->ct_zv, buf, off, BLK, 0);
      if (r == 0)
        r = zvol_flush (t->ct_zv);
    }
    else
      r = zvol_write (t->ct_zv, buf, off, BLK, ZVOL_FUA);
    if (r != 0 && t->ct_errors++ == 0)
      t->ct_first_err = r;
    t->ct_ops++;
  }
  return NULL;
}

/* Flush until the writers are done. */
static void *
ct_flusher (void *arg)
{
  ct_thr_t *t = arg;

  while (!atomic_load (t->ct_stop)) {
    int r = zvol_flush (t->ct_zv);
    if (r != 0 && t->ct_errors++ == 0)
      t->ct_first_err = r;
    t->ct_ops++;
    sched_yield ();            /* (two cores: let the writers run) */
  }
  return NULL;
}

static void
test_contention (void **state)
{
  char dev[512];
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t *shadow = calloc (1, CT_VOLSIZE), *img;
  ct_thr_t thr[CT_WRITERS + CT_FLUSHERS];
  pthread_t th[CT_WRITERS + CT_FLUSHERS];
  atomic_bool stop = false;
  uint64_t seed = tl_seed ("contention"), lwbs, commits;
  uint64_t t0;
  double wpl;

  tl_path (dev, sizeof dev, "contention.img");
  assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
  cfg (&pc, dev, NULL, true, CT_VOLSIZE);
  p = tl_pool_open_ok (&pc);
  assert_int_equal (zvol_pool_start (p), 0);

  t0 = zv_now_ns ();
  for (unsigned i = 0; i < CT_WRITERS + CT_FLUSHERS; i++) {
    thr[i] = (ct_thr_t) {
      .ct_zv = tl_vol (p), .ct_shadow = shadow, .ct_idx = i,
      .ct_seed = seed * 31 + i + 1, .ct_stop = &stop,
    };
    assert_int_equal (pthread_create (&th[i], NULL, i < CT_WRITERS
                                      ? ct_writer : ct_flusher, &thr[i]), 0);
  }
  for (unsigned i = 0; i < CT_WRITERS; i++)
    assert_int_equal (pthread_join (th[i], NULL), 0);
  atomic_store (&stop, true);
  for (unsigned i = CT_WRITERS; i < CT_WRITERS + CT_FLUSHERS; i++)
    assert_int_equal (pthread_join (th[i], NULL), 0);
  for (unsigned i = 0; i < CT_WRITERS + CT_FLUSHERS; i++)
    if (thr[i].ct_errors)
      fail_msg ("thread %u: %d calls failed, first with %d", i,
                thr[i].ct_errors, thr[i].ct_first_err);

  lwbs = tl_pool_stat_u64 (p, "zil_lwbs_written");
  commits = tl_pool_stat_u64 (p, "zil_commits");
  wpl = tl_pool_stat (p, "zil_waiters_per_lwb");
  fprintf (stderr, "  %u FUA writes + %" PRIu64 " flushes in %.2f s: "
           "%" PRIu64 " commits, %" PRIu64 " log blocks, %.2f waiters per "
           "block, %" PRIu64 " fallbacks\n", CT_WRITERS * CT_WRITES,
           thr[CT_WRITERS].ct_ops + thr[CT_WRITERS + 1].ct_ops,
           (double) (zv_now_ns () - t0) / 1e9, commits, lwbs, wpl,
           tl_pool_stat_u64 (p, "zil_commit_fallbacks"));
  assert_true (lwbs > 0);
  assert_true (commits >= lwbs);
  /* Group commit: log blocks are shared by several commits. */
  assert_true (wpl > 1.0);

  assert_int_equal (tl_pool_close (p), 0);
  cfg (&pc, dev, NULL, false, 0);
  p = tl_pool_open_ok (&pc);
  img = read_volume (tl_vol (p));
  compare_images (img, shadow, CT_VOLSIZE, "after close and import");
  assert_int_equal (tl_pool_close (p), 0);
  free (img);
  free (shadow);
  unlink (dev);
}

/* ------------------------------------------------------------------ */
/* b. Records                                                           */
/* ------------------------------------------------------------------ */

typedef struct rec_stats {
  uint64_t rs_copied, rs_need_copy, rs_indirect, rs_free, rs_dropped;
  uint64_t rs_lwbs;
} rec_stats_t;

static rec_stats_t
rec_get (zvol_pool_t *p)
{
  return (rec_stats_t) {
    .rs_copied = tl_pool_stat_u64 (p, "zil_records_copied"),
    .rs_need_copy = tl_pool_stat_u64 (p, "zil_records_need_copy"),
    .rs_indirect = tl_pool_stat_u64 (p, "zil_records_indirect"),
    .rs_free = tl_pool_stat_u64 (p, "zil_records_free"),
    .rs_dropped = tl_pool_stat_u64 (p, "zil_records_dropped"),
    .rs_lwbs = tl_pool_stat_u64 (p, "zil_lwbs_written"),
  };
}

/* Assert the record counters moved by exactly these amounts. */
static void
rec_expect (zvol_pool_t *p, rec_stats_t *before, uint64_t copied,
            uint64_t need_copy, uint64_t indirect, uint64_t nfree,
            const char *what)
{
  rec_stats_t now = rec_get (p);

  if (now.rs_copied - before->rs_copied != copied
      || now.rs_need_copy - before->rs_need_copy != need_copy
      || now.rs_indirect - before->rs_indirect != indirect
      || now.rs_free - before->rs_free != nfree)
    fail_msg ("%s: records copied +%" PRIu64 " need_copy +%" PRIu64
              " indirect +%" PRIu64 " free +%" PRIu64 "; expected +%" PRIu64
              " +%" PRIu64 " +%" PRIu64 " +%" PRIu64, what,
              now.rs_copied - before->rs_copied,
              now.rs_need_copy - before->rs_need_copy,
              now.rs_indirect - before->rs_indirect,
              now.rs_free - before->rs_free, copied, need_copy, indirect,
              nfree);
  if (now.rs_lwbs == before->rs_lwbs)
    fail_msg ("%s: no log block was written", what);
  *before = now;
}

/* Crash without losing anything, then import again (replay). */
static zvol_pool_t *
crash_and_import (zvol_pool_t *p, zvol_pool_config_t *pc)
{
  crash_close (p);
  pc->pc_create = false;
  return tl_pool_open_ok (pc);
}

/*
 * A read-write import claims the log before the volume replays it: the
 * pool may sync any number of txgs in between (an admin tool, a volume
 * opened later), crash, and the replay still applies every acknowledged
 * record: the claim txg keeps txgs the old incarnation never synced
 * apart from those the new one did, and the in-place blocks the records
 * point at are allocated before any sync can write over them.
 */
static void
test_claim_before_open (void **state)
{
  const uint64_t volsize = 16 * MiB;
  char dev[512];
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t *shadow = calloc (1, volsize), *img;
  uint64_t synced;

  assert_non_null (shadow);
  tl_path (dev, sizeof dev, "claim.img");
  assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
  cfg (&pc, dev, NULL, true, volsize);
  cfg_no_txg (&pc);
  p = tl_pool_open_ok (&pc);
  rec_warm (p, shadow, volsize - BLK);
  /* Acknowledged through the log only: in place (64K) and copied (4K). */
  tl_vol_write (tl_vol (p), shadow, 0, 65536, 21, ZVOL_FUA);
  tl_vol_write (tl_vol (p), shadow, 2 * MiB, 65536, 22, ZVOL_FUA);
  tl_vol_write (tl_vol (p), shadow, 4 * MiB, BLK, 23, ZVOL_FUA);
  crash_close (p);

  /* Import, sync without opening the volume, crash again. */
  pc.pc_create = false;
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  synced = zv_txg_last_synced (zv_pool_txg (p));
  for (int i = 0; i < 6; i++)          /* empty txgs, synced all the same */
    assert_int_equal (zv_txg_wait_synced (zv_pool_txg (p),
                                          zv_txg_open_txg (zv_pool_txg (p))),
                      0);
  assert_true (zv_txg_last_synced (zv_pool_txg (p)) >= synced + 6);
  {
    pc_t *cut = pc_new (1, PC_KEEP_ALL);
    /* Direct writes end first: the simulator sees a request whole. */
    zv_zio_pending_wait_all (zv_pool_spa (p));
    pc_attach (cut, zv_pool_spa (p)->spa_devs[0]);
    tl_log_reset (true);
    pc_cut (cut);
    (void) zvol_pool_close (p);
    pc_free (cut);
    tl_log_reset (false);
  }

  /* The volume opens at last: its log replays in full. */
  p = tl_pool_open_ok (&pc);
  assert_true (tl_log_has ("intent log: replayed"));
  img = read_volume (tl_vol (p));
  compare_images (img, shadow, volsize, "replay after syncs before open");
  free (img);
  assert_int_equal (tl_pool_close (p), 0);
  free (shadow);
  unlink (dev);
}

static void
test_records (void **state)
{
  const uint64_t volsize = 16 * MiB;
  char dev[512], logdev[512];
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  zvol_t *zv;
  uint8_t *shadow = calloc (1, volsize), *img;
  rec_stats_t rs;
  uint64_t synced;

  tl_path (dev, sizeof dev, "records.img");
  tl_path (logdev, sizeof logdev, "records-log.img");
  assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
  cfg (&pc, dev, NULL, true, volsize);
  cfg_no_txg (&pc);
  p = tl_pool_open_ok (&pc);
  zv = tl_vol (p);
  rec_warm (p, shadow, volsize - BLK);
  synced = tl_pool_stat_u64 (p, "txg_synced");
  rs = rec_get (p);

  /* Up to zt_max_copied (7680) the data is copied into the record. */
  tl_vol_write (zv, shadow, 0, BLK, 1, ZVOL_FUA);
  rec_expect (p, &rs, 1, 0, 0, 0, "4K write");
  tl_vol_write (zv, shadow, 65536, 7680, 2, ZVOL_FUA);
  rec_expect (p, &rs, 1, 0, 0, 0, "7680-byte write");
  /* Above it, fetched from the volume when packed. */
  tl_vol_write (zv, shadow, 131072, 7681, 3, ZVOL_FUA);
  rec_expect (p, &rs, 0, 1, 0, 0, "7681-byte write");
  tl_vol_write (zv, shadow, 196608, 12288, 4, ZVOL_FUA);
  rec_expect (p, &rs, 0, 1, 0, 0, "12K write");
  tl_vol_write (zv, shadow, 262144, 16384, 5, ZVOL_FUA);
  rec_expect (p, &rs, 0, 1, 0, 0, "16K write (below 32K)");
  /* From 32K, without a log device: whole volume blocks in place. */
  tl_vol_write (zv, shadow, 327680, 32768, 6, ZVOL_FUA);
  rec_expect (p, &rs, 0, 0, 2, 0, "32K aligned write");
  tl_vol_write (zv, shadow, 393216 + 8192, 65536, 7, ZVOL_FUA);
  rec_expect (p, &rs, 0, 2, 3, 0, "64K write at +8K (edges 8K)");
  tl_vol_write (zv, shadow, 524288 + 12288, 40960, 8, ZVOL_FUA);
  rec_expect (p, &rs, 2, 0, 2, 0, "40K write at +12K (edges 4K)");
  /* Trim and zero log a free record. */
  assert_int_equal (zvol_trim (zv, 327680, 16384, ZVOL_FUA), 0);
  memset (shadow + 327680, 0, 16384);
  rec_expect (p, &rs, 0, 0, 0, 1, "trim");
  assert_int_equal (zvol_zero (zv, 0, 2048, ZVOL_FUA), 0);
  memset (shadow, 0, 2048);
  rec_expect (p, &rs, 0, 0, 0, 1, "zero");
  assert_int_equal (zvol_zero (zv, 393216, 49152, ZVOL_FUA), 0);
  memset (shadow + 393216, 0, 49152);
  rec_expect (p, &rs, 0, 0, 0, 1, "zero of whole blocks");
  /* A small write no commit follows is logged by reference: its data is
   * read back when a later flush packs it, never copied at the write. */
  tl_vol_write (zv, shadow, 655360, BLK, 9, 0);
  assert_int_equal (zvol_flush (zv), 0);
  rec_expect (p, &rs, 0, 1, 0, 0, "4K write, flushed later");
  /* None of that needed a txg. */
  assert_int_equal (tl_pool_stat_u64 (p, "txg_synced"), synced);

  /* A crash now: replay brings back every kind of record. */
  p = crash_and_import (p, &pc);
  assert_true (tl_log_has ("intent log: replayed"));
  zv = tl_vol (p);
  img = read_volume (zv);
  compare_images (img, shadow, volsize, "after replay of every record type");
  free (img);

  /* Records of a txg that synced before any commit are dropped, and no
   * log block is written for them. */
  rec_warm (p, shadow, volsize - BLK);
  rs = rec_get (p);
  tl_pat_fill (shadow + MiB, MiB, 3 * BLK, 9);
  assert_int_equal (zvol_write (zv, shadow + MiB, MiB, 3 * BLK, 0), 0);
  assert_int_equal (zvol_trim (zv, 2 * MiB, 16384, 0), 0);
  assert_int_equal (zv_pool_sync (p), 0);
  assert_int_equal (zvol_flush (zv), 0);
  {
    rec_stats_t now = rec_get (p);
    assert_true (now.rs_dropped >= rs.rs_dropped + 2);
    assert_int_equal (now.rs_lwbs, rs.rs_lwbs);
    assert_int_equal (now.rs_copied + now.rs_need_copy + now.rs_free,
                      rs.rs_copied + rs.rs_need_copy + rs.rs_free);
  }
  assert_int_equal (tl_pool_close (p), 0);

  /* logbias=throughput: every whole block in place, even a small write. */
  cfg (&pc, dev, NULL, false, 0);
  cfg_no_txg (&pc);
  tl_volcfg.vc_logbias = ZVOL_LOGBIAS_THROUGHPUT;
  p = tl_pool_open_ok (&pc);
  zv = tl_vol (p);
  rec_warm (p, shadow, volsize - BLK);
  rs = rec_get (p);
  tl_vol_write (zv, shadow, 3 * MiB, 16384, 10, ZVOL_FUA);
  rec_expect (p, &rs, 0, 0, 1, 0, "16K write, logbias=throughput");
  tl_vol_write (zv, shadow, 3 * MiB + 65536, BLK, 11, ZVOL_FUA);
  rec_expect (p, &rs, 1, 0, 0, 0, "4K write, logbias=throughput");
  p = crash_and_import (p, &pc);
  img = read_volume (tl_vol (p));
  compare_images (img, shadow, volsize, "after replay (throughput)");
  free (img);
  assert_int_equal (tl_pool_close (p), 0);

  /* With a log device, big writes are copied into the log. */
  assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
  assert_int_equal (tl_sparse_file (logdev, 17 * MiB), 0);
  memset (shadow, 0, volsize);
  cfg (&pc, dev, logdev, true, volsize);
  cfg_no_txg (&pc);
  p = tl_pool_open_ok (&pc);
  zv = tl_vol (p);
  rec_warm (p, shadow, volsize - BLK);
  rs = rec_get (p);
  tl_vol_write (zv, shadow, 0, 65536, 12, ZVOL_FUA);
  rec_expect (p, &rs, 0, 1, 0, 0, "64K write with a log device");
  /* (256K spans log blocks.) */
  tl_vol_write (zv, shadow, MiB, 256 * KiB, 13, ZVOL_FUA);
  rec_expect (p, &rs, 0, 1, 0, 0, "256K write with a log device");
  tl_vol_write (zv, shadow, 2 * MiB, 2048, 14, ZVOL_FUA);
  rec_expect (p, &rs, 1, 0, 0, 0, "2K write with a log device");
  p = crash_and_import (p, &pc);
  assert_true (tl_log_has ("intent log: replayed"));
  img = read_volume (tl_vol (p));
  compare_images (img, shadow, volsize, "after replay from the log device");
  free (img);
  assert_int_equal (tl_pool_close (p), 0);

  free (shadow);
  unlink (dev);
  unlink (logdev);
}

/*
 * A commit in the middle of a txg sync.  The sync of txg T retires T's
 * dirty records when its data is written, well before T's uberblock is.
 * A flush that packs an in-place (indirect) record of T in that window
 * finds no dirty block; the record is moot only if T then commits.  Here
 * the sync is paused at its first flush (after the objset block), a
 * flush runs on another thread, then the power goes before T's
 * uberblock: if that flush said "durable", the data must be there.
 */
typedef struct cis {
  zvol_t *cs_zv;
  pc_t *cs_pc;
  pthread_t cs_main;
  pthread_mutex_t cs_lock;
  pthread_cond_t cs_cv;
  bool cs_armed, cs_fired, cs_go, cs_done;
  int cs_flush_r;
} cis_t;

/* The simulator's hook: at the sync's first flush, run the other
 * thread's flush (for up to a second), then cut the power at the next
 * write (the uberblock). */
static void
cis_hook (void *arg, enum zv_dev_op op, int done, uint64_t off, uint32_t len)
{
  cis_t *cs = arg;
  struct timespec ts;

  if (op != ZV_DEV_FLUSH || done || !pthread_equal (pthread_self (),
                                                    cs->cs_main))
    return;
  pthread_mutex_lock (&cs->cs_lock);
  if (!cs->cs_armed) {
    pthread_mutex_unlock (&cs->cs_lock);
    return;
  }
  cs->cs_armed = false;
  cs->cs_fired = true;
  cs->cs_go = true;
  pthread_cond_broadcast (&cs->cs_cv);
  clock_gettime (CLOCK_REALTIME, &ts);
  ts.tv_sec += 1;
  while (!cs->cs_done
         && pthread_cond_timedwait (&cs->cs_cv, &cs->cs_lock, &ts) == 0)
    ;
  pthread_mutex_unlock (&cs->cs_lock);
  pc_cut_after_writes (cs->cs_pc, 1);
}

static void *
cis_flusher (void *arg)
{
  cis_t *cs = arg;
  int r;

  pthread_mutex_lock (&cs->cs_lock);
  while (!cs->cs_go)
    pthread_cond_wait (&cs->cs_cv, &cs->cs_lock);
  pthread_mutex_unlock (&cs->cs_lock);
  r = zvol_flush (cs->cs_zv);
  pthread_mutex_lock (&cs->cs_lock);
  cs->cs_flush_r = r;
  cs->cs_done = true;
  pthread_cond_broadcast (&cs->cs_cv);
  pthread_mutex_unlock (&cs->cs_lock);
  return NULL;
}

static void
test_commit_in_sync (void **state)
{
  char dev[512];
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t *data = malloc (65536), *got = malloc (65536);
  cis_t cs = { .cs_lock = PTHREAD_MUTEX_INITIALIZER,
               .cs_cv = PTHREAD_COND_INITIALIZER, .cs_flush_r = 1 };
  uint8_t shadow[BLK];
  pthread_t th;
  int r;

  tl_path (dev, sizeof dev, "cis.img");
  assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
  cfg (&pc, dev, NULL, true, 16 * MiB);
  cfg_no_txg (&pc);
  p = tl_pool_open_ok (&pc);
  rec_warm (p, shadow, 0);
  cs.cs_zv = tl_vol (p);
  cs.cs_main = pthread_self ();
  cs.cs_pc = pc_new (1, PC_KEEP_ALL);
  /* Direct writes end first: the simulator sees a request whole. */
  zv_zio_pending_wait_all (zv_pool_spa (p));
  pc_attach (cs.cs_pc, zv_pool_spa (p)->spa_devs[0]);
  pc_set_hook (cs.cs_pc, cis_hook, &cs);

  /* 64K in txg T, logged in place (no log device): not yet committed. */
  tl_pat_fill (data, MiB, 65536, 4242);
  assert_int_equal (zvol_write (cs.cs_zv, data, MiB, 65536, 0), 0);
  assert_int_equal (pthread_create (&th, NULL, cis_flusher, &cs), 0);
  tl_log_reset (true);
  pthread_mutex_lock (&cs.cs_lock);
  cs.cs_armed = true;
  pthread_mutex_unlock (&cs.cs_lock);
  r = zv_pool_sync (p);              /* the power goes in there */
  assert_int_equal (pthread_join (th, NULL), 0);
  (void) tl_pool_close (p);
  pc_settle (cs.cs_pc);
  pc_free (cs.cs_pc);
  tl_log_reset (false);
  assert_true (cs.cs_fired);
  assert_int_not_equal (r, 0);         /* txg T never committed */
  fprintf (stderr, "  the flush during the sync returned %d\n",
           cs.cs_flush_r);

  cfg (&pc, dev, NULL, false, 0);
  p = tl_pool_open_ok (&pc);
  assert_int_equal (zvol_read (tl_vol (p), got, MiB, 65536), 0);
  assert_int_equal (tl_pool_close (p), 0);
  if (cs.cs_flush_r == 0 && memcmp (got, data, 65536) != 0)
    fail_msg ("a flush during the sync of the write's txg returned 0, "
              "the txg never committed, and the write is lost after "
              "import (its in-place record was dropped as if the txg "
              "were on disk)");
  free (data);
  free (got);
  unlink (dev);
}

/* Holds the first write a thread other than the test's issues (the txg
 * sync's) until the test lets it go. */
typedef struct {
  pthread_t rh_main;
  pthread_mutex_t rh_lock;
  pthread_cond_t rh_cv;
  int rh_state;                 /* 0 armed, 1 holding, 2 released */
  unsigned rh_cap_held;         /* spa_write_cap when the hold began */
  zv_spa_t *rh_spa;
} ring_hold_t;

static int
ring_hold_sync_write (void *arg, zv_dev_t *dev, enum zv_dev_op op,
                      uint64_t off, uint32_t len)
{
  ring_hold_t *h = arg;

  (void) dev; (void) off; (void) len;
  if (op != ZV_DEV_WRITE || pthread_equal (pthread_self (), h->rh_main))
    return 0;
  pthread_mutex_lock (&h->rh_lock);
  if (h->rh_state == 0) {
    h->rh_cap_held = atomic_load (&h->rh_spa->spa_write_cap);
    h->rh_state = 1;
    pthread_cond_broadcast (&h->rh_cv);
    while (h->rh_state == 1)
      pthread_cond_wait (&h->rh_cv, &h->rh_lock);
  }
  pthread_mutex_unlock (&h->rh_lock);
  return 0;
}

static void *
ring_sync_thread (void *arg)
{
  return (void *) (intptr_t) zv_pool_sync (arg);
}

/* FUA writes of one block each (one log block each) until pct percent
 * of the log's ring is in use. */
static void
ring_fill_to (zvol_pool_t *p, zvol_t *zv, unsigned pct, unsigned *seq)
{
  uint8_t buf[BLK];
  uint64_t ring = tl_pool_stat_u64 (p, "zil_ring_size");

  assert_int_equal (ring, 1 * MiB);
  while (tl_pool_stat_u64 (p, "zil_ring_used") * 100 < pct * ring) {
    uint64_t off = (uint64_t) (*seq % 4096) * BLK;

    tl_pat_fill (buf, off, BLK, *seq);
    assert_int_equal (zvol_write (zv, buf, off, BLK, ZVOL_FUA), 0);
    ++*seq;
  }
}

/*
 * How hard a txg sync writes follows the log's ring as well as the dirty
 * data.  Past half the ring the log kicks a txg, and the sync starts at
 * the dirty-data cap (2 writes in flight with little dirty data): a slow
 * writer that fills the ring in a second gets gentle syncs.  If the ring
 * keeps filling while that sync runs, the log raises the cap of the sync
 * under way, reaching 10 at three quarters, before commits would fall
 * back to waiting for the txg.  (Before, a sync that started with the
 * ring past half always ran at 10.)
 */
static void
test_ring_fill_raises_cap (void **state)
{
  char dev[512];
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  zvol_t *zv;
  uint8_t buf[BLK];
  uint64_t synced, fallbacks;
  unsigned seq = 1;
  pthread_t th;
  void *ret;
  ring_hold_t h = { .rh_lock = PTHREAD_MUTEX_INITIALIZER,
                    .rh_cv = PTHREAD_COND_INITIALIZER };
  (void) state;

  if (getenv ("ZVOL_ZIO_WRITE_MAX_ACTIVE"))
    tl_skip ("ZVOL_ZIO_WRITE_MAX_ACTIVE fixes the cap");
  tl_path (dev, sizeof dev, "press.img");
  assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
  cfg (&pc, dev, NULL, true, 16 * MiB);         /* a 1 MiB log ring */
  cfg_no_txg (&pc);
  p = tl_pool_open_ok (&pc);
  zv = tl_vol (p);

  /* A sync that starts with the ring just past half (where the log kicks
   * a running pool's sync thread; this pool has none, so the syncs here
   * are the test's own, inline) and no commit while it runs keeps the
   * dirty-data cap. */
  synced = tl_pool_stat_u64 (p, "txg_synced");
  ring_fill_to (p, zv, 52, &seq);
  assert_int_equal (zv_pool_sync (p), 0);
  assert_true (tl_pool_stat_u64 (p, "txg_synced") > synced + 1);
  assert_int_equal (tl_pool_stat_u64 (p, "sync_write_max_active_last"), 2);
  /* Two more txgs, and the head on disk has passed every block. */
  for (unsigned i = 0; i < 2; i++) {
    tl_pat_fill (buf, 0, BLK, seq);
    assert_int_equal (zvol_write (zv, buf, 0, BLK, 0), 0);
    assert_int_equal (zv_pool_sync (p), 0);
  }
  assert_int_equal (tl_pool_stat_u64 (p, "zil_ring_used"), 0);

  /* A sync that the ring overtakes: hold its first write while FUA
   * writes fill the ring to 78%. */
  tl_pat_fill (buf, 0, BLK, seq);
  assert_int_equal (zvol_write (zv, buf, 0, BLK, 0), 0);
  h.rh_main = pthread_self ();
  h.rh_spa = zv_pool_spa (p);
  zv_dev_set_fault (zv_pool_spa (p)->spa_devs[0], ring_hold_sync_write, &h);
  assert_int_equal (pthread_create (&th, NULL, ring_sync_thread, p), 0);
  pthread_mutex_lock (&h.rh_lock);
  while (h.rh_state == 0)
    pthread_cond_wait (&h.rh_cv, &h.rh_lock);
  pthread_mutex_unlock (&h.rh_lock);
  assert_int_equal (h.rh_cap_held, 2);
  fallbacks = tl_pool_stat_u64 (p, "zil_commit_fallbacks");
  ring_fill_to (p, zv, 78, &seq);
  assert_int_equal (atomic_load (&zv_pool_spa (p)->spa_write_cap), 10);
  pthread_mutex_lock (&h.rh_lock);
  h.rh_state = 2;
  pthread_cond_broadcast (&h.rh_cv);
  pthread_mutex_unlock (&h.rh_lock);
  assert_int_equal (pthread_join (th, &ret), 0);
  assert_int_equal ((int) (intptr_t) ret, 0);
  zv_dev_set_fault (zv_pool_spa (p)->spa_devs[0], NULL, NULL);
  assert_int_equal (tl_pool_stat_u64 (p, "sync_write_max_active_last"), 10);
  assert_int_equal (tl_pool_stat_u64 (p, "zil_commit_fallbacks"), fallbacks);
  assert_int_equal (tl_pool_close (p), 0);
  unlink (dev);
}

/* ------------------------------------------------------------------ */
/* c. A failed log write                                                */
/* ------------------------------------------------------------------ */

/* A fault hook that fails every write (the log device's). */
static int
ring_fail_writes (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
                  uint32_t len)
{
  (void) arg; (void) dev; (void) off; (void) len;
  return op == ZV_DEV_WRITE ? -EIO : 0;
}

/*
 * A change is logged after its txg hold is let go, and that txg may sync
 * in between: its record, of a txg already on disk, is dropped when it is
 * packed, and a record of the open txg logged after it opens a log block.
 * The committer of the dropped record must return (its change is on
 * disk).  It waited, looping, for a durable point past that block, which
 * is closed only for a committer of one of its own records: with no other
 * committer it never was (found by zvstress, seed 1, epoch 6: writers
 * waiting for room in a small record ring never got it).  The log is
 * driven here directly, on a pool without a volume.
 */
static int
cdr_replay (void *arg, const zv_lr_t *lr, const void *data)
{
  (void) arg; (void) lr; (void) data;
  return 0;
}

typedef struct cdr {
  zv_zil_t *cd_zl;
  uint64_t cd_ticket;
  uint64_t cd_log_txg;         /* cdr_log: the txg to log a record of */
  int cd_r;
  atomic_bool cd_done;
} cdr_t;

static void *
cdr_commit (void *arg)
{
  cdr_t *cd = arg;

  cd->cd_r = zv_zil_commit (cd->cd_zl, cd->cd_ticket);
  atomic_store (&cd->cd_done, true);
  return NULL;
}

static void *
cdr_log (void *arg)
{
  cdr_t *cd = arg;

  cd->cd_ticket = zv_zil_log_free (cd->cd_zl, cd->cd_log_txg, ZV_LR_TRIM,
                                   0, 16384, 0);
  atomic_store (&cd->cd_done, true);
  return NULL;
}

/* Wait up to 10 s for the thread of cd; false if it is still running. */
static bool
cdr_wait (cdr_t *cd, pthread_t th)
{
  for (int i = 0; i < 1000 && !atomic_load (&cd->cd_done); i++)
    usleep (10000);
  if (!atomic_load (&cd->cd_done))
    return false;
  assert_int_equal (pthread_join (th, NULL), 0);
  return true;
}

/* A pool without a volume whose log the test drives (legacy: flush=txg),
 * with one synced txg whose header names the log's fresh chain. */
static zv_zil_t *
cdr_open (const char *dev, bool legacy, zvol_pool_t **pp, zv_pool_ds_t **dsp)
{
  static zv_zil_ops_t ops = { .zo_replay = cdr_replay };
  zvol_pool_config_t pc;
  zv_zil_tunables_t zt;
  zv_txg_hold_t h;
  zv_zil_t *zl;

  assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
  cfg (&pc, dev, NULL, true, 16 * MiB);
  cfg_no_txg (&pc);
  assert_int_equal (zvol_pool_open (&pc, pp), 0);
  assert_int_equal (zv_dsdir_hold (*pp, NULL, dsp), 0);
  ops.zo_blksz = zv_dsdir_blksz (*dsp);
  ops.zo_volsize = zv_dsdir_volsize (*dsp);
  zv_zil_tunables_default (&zt);
  zt.zt_legacy_txg_commit = legacy;
  zl = zv_zil_open (zv_pool_spa (*pp), zv_pool_logdev (*pp),
                    zv_pool_txg (*pp), zv_dsdir_zil_header (*dsp), &ops,
                    NULL, &zt);
  zv_dsdir_attach_zil (*dsp, zl);
  assert_int_equal (zv_zil_replay (zl, zv_pool_open_txg (*pp),
                                   ZV_ZIL_RECOVER_NONE), 0);
  /* (A txg that took no hold does not sync.) */
  assert_int_equal (zv_txg_hold (zv_pool_txg (*pp), 0, &h), 0);
  zv_txg_rele (zv_pool_txg (*pp), &h);
  assert_int_equal (zv_pool_sync (*pp), 0);
  return zl;
}

static void
cdr_close (zvol_pool_t *p, zv_pool_ds_t *ds, zv_zil_t *zl)
{
  assert_int_equal (zv_pool_sync (p), 0);
  zv_dsdir_attach_zil (ds, NULL);
  zv_zil_close (zl);
  zv_dsdir_rele (ds);
  assert_int_equal (zvol_pool_close (p), 0);
}

static void
test_commit_dropped_record (void **state)
{
  char dev[512];
  zvol_pool_t *p = NULL;
  zv_pool_ds_t *ds;
  zv_zil_t *zl;
  zv_txg_t *tx;
  zv_txg_hold_t h;
  cdr_t cd = { 0 };
  pthread_t th;
  uint64_t t1, t2, txg1;

  (void) state;
  zl = cdr_open (tl_path (dev, sizeof dev, "dropped.img"), false, &p, &ds);
  tx = zv_pool_txg (p);

  /* A change let go of its hold, and its txg synced before it logged. */
  assert_int_equal (zv_txg_hold (tx, 0, &h), 0);
  txg1 = h.th_txg;
  zv_txg_rele (tx, &h);
  assert_int_equal (zv_pool_sync (p), 0);
  assert_true (zv_txg_last_synced (tx) >= txg1);
  t1 = zv_zil_log_free (zl, txg1, ZV_LR_TRIM, 0, 16384, 0);
  /* Another change, of the open txg. */
  assert_int_equal (zv_txg_hold (tx, 0, &h), 0);
  zv_txg_rele (tx, &h);
  t2 = zv_zil_log_free (zl, h.th_txg, ZV_LR_TRIM, 65536, 16384, 0);
  assert_true (t2 > t1 && h.th_txg > zv_txg_last_synced (tx));
  cd.cd_zl = zl;
  cd.cd_ticket = t1;
  assert_int_equal (pthread_create (&th, NULL, cdr_commit, &cd), 0);
  if (!cdr_wait (&cd, th))
    fail_msg ("the commit of a record whose txg was on disk did not return "
              "in 10 s (it waits for a log block nobody closes)");
  assert_int_equal (cd.cd_r, 0);
  assert_int_equal (zv_zil_commit (zl, t2), 0);
  cdr_close (p, ds, zl);
  unlink (dev);
}

/*
 * With flush=txg a commit waits for a txg and never packs: the records
 * in the in-memory ring go only when a txg sync drops those of synced
 * txgs.  Records published after that drop (logged after their txg
 * synced, as above) filled the ring for good: the next writer waited for
 * room for ever, spinning on syncs of an idle pool that had nothing to
 * sync (found by zvstress, a 4-thread epoch with flush=txg and an 8-slot
 * ring).  A writer that waits for room drops them itself.
 */
static void
test_ring_full_by_txg (void **state)
{
  char dev[512];
  unsigned old_shift = zv_zil_itx_ring_shift;
  zvol_pool_t *p = NULL;
  zv_pool_ds_t *ds;
  zv_zil_t *zl;
  zv_txg_t *tx;
  zv_txg_hold_t h;
  cdr_t cd = { 0 };
  pthread_t th;

  (void) state;
  zv_zil_itx_ring_shift = 2;
  zl = cdr_open (tl_path (dev, sizeof dev, "ringtxg.img"), true, &p, &ds);
  zv_zil_itx_ring_shift = old_shift;
  tx = zv_pool_txg (p);
  assert_int_equal (zv_txg_hold (tx, 0, &h), 0);
  zv_txg_rele (tx, &h);
  assert_int_equal (zv_pool_sync (p), 0);
  for (int i = 0; i < 4; i++)
    (void) zv_zil_log_free (zl, h.th_txg, ZV_LR_TRIM, 0, 16384, 0);
  cd.cd_zl = zl;
  cd.cd_log_txg = h.th_txg;
  assert_int_equal (pthread_create (&th, NULL, cdr_log, &cd), 0);
  if (!cdr_wait (&cd, th))
    fail_msg ("a writer that found the record ring full of records of "
              "synced txgs (flush=txg) did not get room in 10 s");
  assert_int_equal (zv_zil_commit (zl, cd.cd_ticket), 0);
  cdr_close (p, ds, zl);
  unlink (dev);
}

/*
 * After a log write fails, flushes wait for txgs and nothing packs the
 * in-memory records any more: they must still be dropped as the ring
 * fills, or the next writer to find it full loops for ever.  The ring is
 * made 16 slots long; 200 writes go through it.
 */
static void
test_ring_full_after_log_error (void **state)
{
  char dev[512], logdev[512];
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  zvol_t *zv;
  uint8_t *buf = zv_buf_alloc (BLK);
  unsigned old_shift = zv_zil_itx_ring_shift;
  const unsigned nblk = 200;

  (void) state;
  tl_path (dev, sizeof dev, "ringfull.img");
  tl_path (logdev, sizeof logdev, "ringfull-log.img");
  assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
  assert_int_equal (tl_sparse_file (logdev, 17 * MiB), 0);
  zv_zil_itx_ring_shift = 4;
  cfg (&pc, dev, logdev, true, 16 * MiB);
  cfg_no_txg (&pc);
  p = tl_pool_open_ok (&pc);
  zv_zil_itx_ring_shift = old_shift;
  zv = tl_vol (p);
  /* The log writes once a txg with its fresh chain is on disk. */
  tl_pat_fill (buf, 0, BLK, 7);
  assert_int_equal (zvol_write (zv, buf, 0, BLK, 0), 0);
  assert_int_equal (zv_pool_sync (p), 0);

  tl_log_reset (true);
  zv_dev_set_fault (zv_pool_logdev (p), ring_fail_writes, NULL);
  tl_pat_fill (buf, 0, BLK, 1);
  assert_int_equal (zvol_write (zv, buf, 0, BLK, 0), 0);
  assert_int_equal (zvol_flush (zv), 0);          /* by a txg */
  assert_true (tl_log_has ("intent log: writing"));
  assert_true (tl_pool_stat_u64 (p, "zil_commit_fallbacks") >= 1);

  alarm (120);                  /* a writer that spins fails the test */
  for (unsigned i = 0; i < nblk; i++) {
    tl_pat_fill (buf, (uint64_t) i * BLK, BLK, 7);
    assert_int_equal (zvol_write (zv, buf, (uint64_t) i * BLK, BLK, 0), 0);
  }
  alarm (0);
  assert_int_equal (zvol_flush (zv), 0);
  assert_true (tl_pool_stat_u64 (p, "zil_records_dropped") >= nblk - 16);
  zv_dev_set_fault (zv_pool_logdev (p), NULL, NULL);
  assert_int_equal (tl_pool_close (p), 0);
  tl_log_reset (false);

  cfg (&pc, dev, logdev, false, 0);
  p = tl_pool_open_ok (&pc);
  zv = tl_vol (p);
  for (unsigned i = 0; i < nblk; i++) {
    assert_int_equal (zvol_read (zv, buf, (uint64_t) i * BLK, BLK), 0);
    assert_int_equal (tl_pat_check (buf, (uint64_t) i * BLK, BLK, 7), -1);
  }
  assert_int_equal (tl_pool_close (p), 0);
  zv_buf_free (buf);
  unlink (dev);
  unlink (logdev);
}

/*
 * A writer that finds the in-memory record ring full on a suspended pool
 * (a txg sync failed: no txg will ever free a record again) must neither
 * spin nor sleep for ever: it returns promptly, its record dropped, and
 * a write whose change can never be durable ends with EIO, not success.
 * Every write to the pool's only device fails from some point on (its log
 * ring is in the pool, so log writes fail too); writer threads write 4 KiB
 * pieces, never FUA, with a 4-slot ring, until a write fails.  The main
 * thread watches the writers' CPU clocks: each must return within 10 s of
 * wall time, having used little CPU (a writer that polls for room in a
 * loop shows CPU time near its wall time; one that sleeps for ever runs
 * into the deadline).  Once with one writer and the syncs run inline
 * (the writer's own wait for room runs the sync that fails: the write
 * that suspends the pool must fail too), once with four writers and the
 * sync thread.
 */
#define SW_MAX 4

typedef struct suspend_writer {
  zvol_pool_t *sw_pool;
  zvol_t *sw_zv;
  unsigned sw_id;
  unsigned sw_nwrites;          /* calls that returned 0 */
  unsigned sw_acked_suspended;  /* ... with the pool suspended */
  int sw_result;                /* the first failure (or 0) */
  uint64_t sw_cpu_ns;           /* the thread's CPU time, start to end */
  uint64_t sw_wall_ns;
  _Atomic bool sw_done;
} suspend_writer_t;

static uint64_t
cpu_clock_ns (clockid_t clk)
{
  struct timespec ts;

  if (clock_gettime (clk, &ts) != 0)
    return 0;
  return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

static void *
suspend_writer_thread (void *arg)
{
  suspend_writer_t *sw = arg;
  uint8_t *buf = zv_buf_alloc (BLK);
  uint64_t cpu0 = cpu_clock_ns (CLOCK_THREAD_CPUTIME_ID);
  uint64_t wall0 = zv_now_ns ();

  for (unsigned i = 0; i < 256; i++) {
    uint64_t off = (uint64_t) (i * SW_MAX + sw->sw_id) * BLK;
    int r;

    tl_pat_fill (buf, off, BLK, 11);
    r = zvol_write (sw->sw_zv, buf, off, BLK, 0);
    if (r != 0) {
      sw->sw_result = r;
      break;
    }
    sw->sw_nwrites++;
    if (zv_txg_error (zv_pool_txg (sw->sw_pool)) != 0)
      sw->sw_acked_suspended++;
  }
  zv_buf_free (buf);
  sw->sw_cpu_ns = cpu_clock_ns (CLOCK_THREAD_CPUTIME_ID) - cpu0;
  sw->sw_wall_ns = zv_now_ns () - wall0;
  atomic_store (&sw->sw_done, true);
  return NULL;
}

static void
ring_full_suspended (unsigned nwriters, bool sync_thread)
{
  char dev[512];
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  zvol_t *zv;
  uint8_t *buf = zv_buf_alloc (BLK);
  unsigned old_shift = zv_zil_itx_ring_shift;
  suspend_writer_t sw[SW_MAX];
  pthread_t th[SW_MAX];
  clockid_t clk[SW_MAX];
  uint64_t cpu0[SW_MAX], wall0, wall;
  const uint64_t deadline_ns = 10000000000ull;
  bool all_done;

  assert_true (nwriters <= SW_MAX);
  memset (sw, 0, sizeof sw);
  tl_path (dev, sizeof dev, "suspend.img");
  assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
  zv_zil_itx_ring_shift = 2;                    /* 4 slots */
  cfg (&pc, dev, NULL, true, 16 * MiB);
  cfg_no_txg (&pc);
  p = tl_pool_open_ok (&pc);
  zv_zil_itx_ring_shift = old_shift;
  zv = tl_vol (p);
  if (sync_thread)
    assert_int_equal (zvol_pool_start (p), 0);
  /* The log writes once a txg with its fresh chain is on disk. */
  tl_pat_fill (buf, 0, BLK, 7);
  assert_int_equal (zvol_write (zv, buf, 0, BLK, ZVOL_FUA), 0);
  assert_int_equal (zv_pool_sync (p), 0);

  tl_log_reset (true);
  zv_dev_set_fault (zv_pool_spa (p)->spa_devs[0], ring_fail_writes, NULL);
  wall0 = zv_now_ns ();
  for (unsigned i = 0; i < nwriters; i++) {
    sw[i].sw_pool = p;
    sw[i].sw_zv = zv;
    sw[i].sw_id = i;
    assert_int_equal (pthread_create (&th[i], NULL, suspend_writer_thread,
                                      &sw[i]), 0);
    /* A writer may be gone already (its first write failed): ESRCH.
     * The clock only serves a stuck writer, which is still there. */
    int cr = pthread_getcpuclockid (th[i], &clk[i]);
    assert_true (cr == 0 || cr == ESRCH);
    cpu0[i] = cr == 0 ? cpu_clock_ns (clk[i]) : 0;
  }
  do {
    struct timespec d = { 0, 10000000 };
    nanosleep (&d, NULL);
    all_done = true;
    for (unsigned i = 0; i < nwriters; i++)
      all_done &= atomic_load (&sw[i].sw_done);
  } while (!all_done && zv_now_ns () - wall0 < deadline_ns);
  wall = zv_now_ns () - wall0;
  for (unsigned i = 0; i < nwriters; i++)
    if (!atomic_load (&sw[i].sw_done)) {
      uint64_t cpu = cpu_clock_ns (clk[i]) - cpu0[i];
      /* Stuck: leave the threads and the pool (the process ends soon). */
      fail_msg ("writer %u did not return in %.1f s (%u writes done); it "
                "used %.2f s of CPU: it %s", i, wall / 1e9, sw[i].sw_nwrites,
                cpu / 1e9, cpu > wall / 2 ? "spins" : "sleeps for ever");
    }
  for (unsigned i = 0; i < nwriters; i++) {
    assert_int_equal (pthread_join (th[i], NULL), 0);
    printf ("  writer %u: %u writes, then %d, in %.3f s wall, %.3f s CPU\n",
            i, sw[i].sw_nwrites, sw[i].sw_result, sw[i].sw_wall_ns / 1e9,
            sw[i].sw_cpu_ns / 1e9);
    assert_int_equal (sw[i].sw_result, -EIO);
    assert_true (sw[i].sw_wall_ns < 5000000000ull);
    assert_true (sw[i].sw_cpu_ns < 500000000ull);
  }
  /* One writer: the pool can only be suspended by its own write's wait
   * for room, which must then fail.  (With several, another's sync may
   * fail between a write's end and the look.) */
  if (nwriters == 1)
    assert_int_equal (sw[0].sw_acked_suspended, 0);
  assert_true (tl_log_has ("suspended"));
  /* Nothing more gets in, nothing is acknowledged as durable. */
  assert_int_equal (zvol_write (zv, buf, 0, BLK, 0), -EIO);
  assert_true (zvol_flush (zv) < 0);
  zv_dev_set_fault (zv_pool_spa (p)->spa_devs[0], NULL, NULL);
  (void) tl_pool_close (p);                     /* suspended: may fail */
  tl_log_reset (false);
  zv_buf_free (buf);
  unlink (dev);
}

static void
test_ring_full_suspended (void **state)
{
  (void) state;
  ring_full_suspended (1, false);
  ring_full_suspended (SW_MAX, true);
}

/* ------------------------------------------------------------------ */
/* d. A hostile log                                                     */
/* ------------------------------------------------------------------ */

typedef struct hl_block {
  uint64_t hb_off;               /* in the device file */
  uint64_t hb_seq;
  uint32_t hb_len;               /* bytes written (header + records) */
} hl_block_t;

/* Find the log blocks in the ring by their magic, oldest first. */
static int
hl_scan (const char *dev, uint64_t ring_off, uint64_t ring_len,
         hl_block_t *out, int max)
{
  uint8_t *buf = malloc (ring_len);
  int n = 0;

  assert_non_null (buf);
  assert_int_equal (tl_file_pread (dev, buf, ring_len, ring_off), 0);
  for (uint64_t o = 0; o + sizeof (zv_lwb_hdr_t) <= ring_len; o += BLK) {
    zv_lwb_hdr_t lh;
    memcpy (&lh, buf + o, sizeof lh);
    if (lh.lh_magic == ZV_LWB_MAGIC && n < max)
      out[n++] = (hl_block_t) { ring_off + o, lh.lh_seq,
                                (uint32_t) ZV_P2ROUNDUP (sizeof lh
                                                         + lh.lh_nused,
                                                         BLK) };
  }
  free (buf);
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && out[j - 1].hb_seq > out[j].hb_seq; j--) {
      hl_block_t t = out[j];
      out[j] = out[j - 1];
      out[j - 1] = t;
    }
  return n;
}

/* Import (replay) with zil_recover=recover; the 4K blocks at 0, 1 MiB,
 * 2 MiB must hold the stamps of the groups that were replayed, zeros
 * for the others. */
static void
hl_expect_ex (const char *dev, unsigned recover, int nreplayed,
              const char *what)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t buf[BLK], want[BLK];
  int r;

  cfg (&pc, dev, NULL, false, 0);
  pc.pc_zil_recover = recover;
  tl_log_reset (true);
  r = tl_pool_open (&pc, &p);
  tl_log_reset (false);
  if (r != 0)
    fail_msg ("%s: import failed: %s", what, strerror (-r));
  for (int g = 0; g < 3; g++) {
    assert_int_equal (zvol_read (tl_vol (p), buf, g * MiB, BLK), 0);
    if (g < nreplayed)
      stamp_fill (want, 0x1111ull * (g + 1));
    else
      memset (want, 0, BLK);
    if (memcmp (buf, want, BLK) != 0)
      fail_msg ("%s: group %d should %sbe there (first word %016" PRIx64
                ")", what, g, g < nreplayed ? "" : "not ",
                *(uint64_t *) buf);
  }
  /* Usable afterwards. */
  assert_int_equal (zvol_write (tl_vol (p), want, 3 * MiB, BLK,
                                ZVOL_FUA), 0);
  assert_int_equal (tl_pool_close (p), 0);
}

static void
hl_expect (const char *dev, int nreplayed, const char *what)
{
  hl_expect_ex (dev, ZVOL_ZIL_RECOVER_NONE, nreplayed, what);
}

/* A read-write import must fail with EIO, saying the log is damaged and
 * how to import anyway. */
static void
hl_expect_refused (const char *dev, const char *what)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  int r;

  cfg (&pc, dev, NULL, false, 0);
  tl_log_reset (true);
  r = tl_pool_open (&pc, &p);
  if (r == 0)
    fail_msg ("%s: the import succeeded", what);
  assert_int_equal (r, -EIO);
  if (!tl_log_has ("is damaged") || !tl_log_has ("zil_recover=truncate"))
    fail_msg ("%s: the import failed without saying why", what);
  tl_log_reset (false);
}

/* The checksum seed of log block seq of chain guid (zil_impl.h's rule). */
static uint64_t
hl_seed (uint64_t guid, uint64_t seq)
{
  return guid ^ (seq * 0x9e3779b97f4a7c15ull) ^ ZV_LWB_MAGIC;
}

/* Rewrite the first record of a log block and checksum it again, so
 * that only the record's content is hostile. */
static void
hl_forge (const char *dev, const hl_block_t *hb, uint64_t guid,
          void (*edit) (zv_lr_t *lr, uint32_t nused))
{
  uint8_t *buf = zv_buf_alloc (hb->hb_len);
  zv_lwb_hdr_t *lh = (zv_lwb_hdr_t *) buf;

  assert_int_equal (tl_file_pread (dev, buf, hb->hb_len, hb->hb_off), 0);
  edit ((zv_lr_t *) (lh + 1), lh->lh_nused);
  memset (&lh->lh_cksum, 0, sizeof lh->lh_cksum);
  zv_cksum_compute (buf, hb->hb_len, hl_seed (guid, hb->hb_seq),
                    &lh->lh_cksum);
  assert_int_equal (tl_file_pwrite (dev, buf, hb->hb_len, hb->hb_off), 0);
  zv_buf_free (buf);
}

static void hl_past_end (zv_lr_t *lr, uint32_t n) { lr->lr_offset = 1ull << 40; }
static void hl_bad_len (zv_lr_t *lr, uint32_t n) { lr->lr_reclen = 1u << 30; }
static void hl_bad_type (zv_lr_t *lr, uint32_t n) { lr->lr_type = 77; }
static void hl_long (zv_lr_t *lr, uint32_t n) { lr->lr_length = 1u << 20; }
static void hl_write_flag (zv_lr_t *lr, uint32_t n) { lr->lr_flags = 1; }
static void
hl_zero_flag (zv_lr_t *lr, uint32_t n)
{
  lr->lr_type = ZV_LR_ZERO;
  lr->lr_flags = ZV_LR_F_ZERO_ALLOC << 1;
}
static void
hl_bad_ind (zv_lr_t *lr, uint32_t n)
{
  zv_blkptr_t bp = { .bp_dva = { 4096 }, .bp_psize = 16384,
                     .bp_lsize = 16384, .bp_type = ZV_BT_VOLDATA,
                     .bp_ncopies = 1, .bp_birth = lr->lr_txg };
  lr->lr_type = ZV_LR_WRITE_IND;
  lr->lr_offset = 0;
  lr->lr_length = 16384;
  memcpy (lr + 1, &bp, sizeof bp);      /* label space, wrong checksum */
}

/* Import with hostile records: never a crash; either the import fails
 * with an error, or it succeeds with the blocks before the bad record
 * replayed and nothing of it applied.  Returns the import's result. */
static int
hl_try_forged (const char *dev, const char *what)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t buf[BLK], want[BLK];
  int r;

  cfg (&pc, dev, NULL, false, 0);
  tl_log_reset (true);
  r = tl_pool_open (&pc, &p);
  tl_log_reset (false);
  if (r != 0) {
    fprintf (stderr, "  %s: import refused: %s\n", what, strerror (-r));
    return r;
  }
  for (int g = 0; g < 2; g++) {
    stamp_fill (want, 0x1111ull * (g + 1));
    assert_int_equal (zvol_read (tl_vol (p), buf, g * MiB, BLK), 0);
    if (memcmp (buf, want, BLK) != 0)
      fail_msg ("%s: group %d (before the bad record) is missing", what, g);
  }
  assert_int_equal (zvol_read (tl_vol (p), buf, 0, BLK), 0);
  assert_int_equal (tl_pool_close (p), 0);
  fprintf (stderr, "  %s: imported\n", what);
  return 0;
}

static void
test_hostile_log (void **state)
{
  char dev[512], snap[512], work[512];
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t buf[BLK], *garbage;
  hl_block_t hb[16];
  uint64_t ring_off, ring_len, guid, head, rnd = tl_seed ("hostile_log");
  static void (*const forge[]) (zv_lr_t *, uint32_t) = {
    hl_past_end, hl_bad_len, hl_bad_type, hl_long, hl_bad_ind,
  };
  static const char *const forge_name[] = {
    "record past the end of the volume", "record length 1 GiB",
    "record type 77", "write record longer than its data",
    "indirect record pointing at label space",
  };
  int n;

  tl_path (dev, sizeof dev, "hl.img");
  tl_path (snap, sizeof snap, "hl-snap.img");
  tl_path (work, sizeof work, "hl-work.img");
  assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
  cfg (&pc, dev, NULL, true, 16 * MiB);
  cfg_no_txg (&pc);
  p = tl_pool_open_ok (&pc);
  ring_off = ZV_DVA_OFFSET (zv_dsdir_zil_header (zv_dsdir_find (p, NULL))->zh_ring_dva);
  ring_len = zv_dsdir_zil_header (zv_dsdir_find (p, NULL))->zh_nslots * zv_dsdir_zil_header (zv_dsdir_find (p, NULL))->zh_blksz;
  assert_int_equal (ZV_DVA_VDEV (zv_dsdir_zil_header (zv_dsdir_find (p, NULL))->zh_ring_dva), 0);
  stamp_fill (buf, 0x9999);
  assert_int_equal (zvol_write (tl_vol (p), buf, 4 * MiB, BLK, 0),
                    0);
  assert_int_equal (zv_pool_sync (p), 0);
  /* Three groups, one log block each (a lone committer closes its block
   * at once). */
  for (int g = 0; g < 3; g++) {
    stamp_fill (buf, 0x1111ull * (g + 1));
    assert_int_equal (zvol_write (tl_vol (p), buf, g * MiB, BLK,
                                  ZVOL_FUA), 0);
  }
  assert_int_equal (tl_pool_stat_u64 (p, "zil_lwbs_written"), 3);
  crash_close (p);
  copy_file (dev, snap);

  /* The chain's guid and head, from a read-only import (no replay). */
  copy_file (snap, work);
  cfg (&pc, work, NULL, false, 0);
  pc.pc_readonly = true;
  p = tl_pool_open_ok (&pc);
  guid = zv_dsdir_zil_header (zv_dsdir_find (p, NULL))->zh_guid;
  head = zv_dsdir_zil_header (zv_dsdir_find (p, NULL))->zh_head_seq;
  assert_int_equal (zvol_read (tl_vol (p), buf, 0, BLK), 0);
  assert_true (zv_is_zero (buf, BLK));        /* only in the log */
  assert_int_equal (tl_pool_close (p), 0);

  n = hl_scan (snap, ring_off, ring_len, hb, 16);
  assert_int_equal (n, 3);
  assert_int_equal (hb[0].hb_seq, head);
  assert_int_equal (hb[1].hb_seq, head + 1);
  assert_int_equal (hb[2].hb_seq, head + 2);

  copy_file (snap, work);
  hl_expect (work, 3, "intact log");

  /* A bad byte in the newest block's records: the first two replay. */
  copy_file (snap, work);
  assert_int_equal (tl_file_flip (work, hb[2].hb_off + 64 + 40), 0);
  hl_expect (work, 2, "newest block corrupt");

  /* In the middle block: the newest, written after it was durable, says
   * so: damage, not the end of the log.  The import fails; truncating
   * keeps the first block, discarding none. */
  copy_file (snap, work);
  assert_int_equal (tl_file_flip (work, hb[1].hb_off + 64 + 48 + 100), 0);
  hl_expect_refused (work, "middle block corrupt");
  copy_file (snap, work);
  assert_int_equal (tl_file_flip (work, hb[1].hb_off + 64 + 48 + 100), 0);
  hl_expect_ex (work, ZVOL_ZIL_RECOVER_TRUNCATE, 1,
                "middle block corrupt, truncated");
  copy_file (snap, work);
  assert_int_equal (tl_file_flip (work, hb[1].hb_off + 64 + 48 + 100), 0);
  hl_expect_ex (work, ZVOL_ZIL_RECOVER_DISCARD, 0,
                "middle block corrupt, discarded");

  /* The first block's header (its seq): the second block is found all
   * the same, and says the first was durable. */
  copy_file (snap, work);
  assert_int_equal (tl_file_flip (work, hb[0].hb_off + 16), 0);
  hl_expect_refused (work, "first block's header corrupt");
  copy_file (snap, work);
  assert_int_equal (tl_file_flip (work, hb[0].hb_off + 16), 0);
  hl_expect_ex (work, ZVOL_ZIL_RECOVER_TRUNCATE, 0,
                "first block's header corrupt, truncated");

  /* The newest block's checksum field. */
  copy_file (snap, work);
  assert_int_equal (tl_file_flip (work, hb[2].hb_off + 50), 0);
  hl_expect (work, 2, "newest block's checksum corrupt");

  /* Garbage over the whole ring. */
  garbage = malloc (ring_len);
  assert_non_null (garbage);
  for (uint64_t i = 0; i < ring_len / 8; i++)
    ((uint64_t *) garbage)[i] = tl_rand (&rnd);
  copy_file (snap, work);
  assert_int_equal (tl_file_pwrite (work, garbage, ring_len, ring_off), 0);
  hl_expect (work, 0, "random garbage in the whole ring");

  /* Garbage that looks like log blocks: every 4K slot starts with a
   * header of the right magic, version and sequence, and a bad checksum;
   * the next pointers are random. */
  for (uint64_t o = 0; o < ring_len; o += BLK) {
    zv_lwb_hdr_t *lh = (zv_lwb_hdr_t *) (garbage + o);
    lh->lh_magic = ZV_LWB_MAGIC;
    lh->lh_version = ZV_FORMAT_VERSION;
    lh->lh_seq = head + (tl_rand (&rnd) % 4);
    lh->lh_next_seq = lh->lh_seq + 1;
    lh->lh_nused = (uint32_t) (tl_rand (&rnd) % (128 * KiB));
  }
  copy_file (snap, work);
  assert_int_equal (tl_file_pwrite (work, garbage, ring_len, ring_off), 0);
  hl_expect (work, 0, "log-block-like garbage in the whole ring");
  free (garbage);

  /* A stale copy of the first block where the fourth would go: its
   * sequence is wrong, so it ends the chain. */
  copy_file (snap, work);
  {
    uint8_t *blk = malloc (hb[0].hb_len);
    assert_int_equal (tl_file_pread (snap, blk, hb[0].hb_len, hb[0].hb_off),
                      0);
    assert_int_equal (tl_file_pwrite (work, blk, hb[0].hb_len,
                                      hb[2].hb_off + hb[2].hb_len), 0);
    free (blk);
  }
  hl_expect (work, 3, "stale block after the chain");

  /* Records that are hostile under a valid checksum. */
  for (size_t f = 0; f < sizeof forge / sizeof forge[0]; f++) {
    copy_file (snap, work);
    hl_forge (work, &hb[2], guid, forge[f]);
    (void) hl_try_forged (work, forge_name[f]);
  }
  /* A flag this version does not know would change what its record
   * means: the import fails instead of replaying something else. */
  copy_file (snap, work);
  hl_forge (work, &hb[2], guid, hl_write_flag);
  assert_int_equal (hl_try_forged (work, "write record with a flag"), -EIO);
  copy_file (snap, work);
  hl_forge (work, &hb[2], guid, hl_zero_flag);
  assert_int_equal (hl_try_forged (work, "zero record with an unknown flag"),
                    -EIO);

  unlink (dev);
  unlink (snap);
  unlink (work);
}

/*
 * In-place records whose block pointer, under a valid checksum, names
 * something the record cannot own: a hole, the objset of the last synced
 * txg, a live indirect or data block of the synced tree, the log ring,
 * or a pointer of the wrong shape.  Each read-write import must fail
 * with EIO and say why, without an abort; nothing may be claimed, freed
 * or written, so a read-only import still reads exactly the synced data
 * and the next read-write import fails the same way.
 */

/* The pointer hi_edit puts into every in-place record of a block. */
static zv_blkptr_t hi_target;

static void
hi_edit (zv_lr_t *lr0, uint32_t nused)
{
  uint32_t pos = 0;
  int n = 0;

  while (pos + sizeof (zv_lr_t) <= nused) {
    zv_lr_t *lr = (zv_lr_t *) ((uint8_t *) lr0 + pos);
    if (lr->lr_reclen < sizeof (zv_lr_t))
      break;
    if (lr->lr_type == ZV_LR_WRITE_IND) {
      memcpy (lr + 1, &hi_target, sizeof hi_target);
      n++;
      break;                    /* the first one only */
    }
    pos += lr->lr_reclen;
  }
  assert_int_equal (n, 1);
}

/* Find a synced block pointer: the first L0 (level 0) or indirect one. */
typedef struct hi_find {
  unsigned hf_level;            /* 0: a data block; 1: an indirect */
  zv_blkptr_t hf_bp;
  bool hf_found;
} hi_find_t;

static int
hi_find_fn (void *arg, const zv_blkptr_t *bp, unsigned level, uint64_t blkid,
            const void *data)
{
  hi_find_t *hf = arg;

  if (!hf->hf_found && bp->bp_level == hf->hf_level) {
    hf->hf_bp = *bp;
    hf->hf_found = true;
  }
  return 0;
}

/* Import read-only: the volume reads exactly the synced image. */
static void
hi_check_synced (const char *dev, const uint8_t *synced, uint64_t volsize,
                 const char *what)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  uint8_t *img;

  cfg (&pc, dev, NULL, false, 0);
  pc.pc_readonly = true;
  p = tl_pool_open_ok (&pc);
  img = read_volume (tl_vol (p));
  compare_images (img, synced, volsize, what);
  free (img);
  assert_int_equal (tl_pool_close (p), 0);
}

static void
test_hostile_ind (void **state)
{
  const uint64_t volsize = 16 * MiB;
  char dev[512], snap[512], work[512];
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t *synced, *shadow = calloc (1, volsize);
  hl_block_t hb[16];
  const zv_zil_header_t *zh;
  zv_blkptr_t rootbp, ind, l0;
  uint64_t ring_dva, ring_len, guid;
  uint32_t vbs;
  const char *only = getenv ("ZV_TEST_HOSTILE_IND_CASE");
  int n;

  assert_non_null (shadow);
  tl_path (dev, sizeof dev, "hi.img");
  tl_path (snap, sizeof snap, "hi-snap.img");
  tl_path (work, sizeof work, "hi-work.img");
  assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
  cfg (&pc, dev, NULL, true, volsize);
  cfg_no_txg (&pc);
  p = tl_pool_open_ok (&pc);
  rec_warm (p, shadow, volsize - BLK);
  /* Synced data: live data blocks and indirect blocks. */
  tl_vol_write (tl_vol (p), shadow, 8 * MiB, 256 * KiB, 31, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  /* Acknowledged through the log only, in place (no log device). */
  tl_vol_write (tl_vol (p), shadow, 0, 65536, 32, ZVOL_FUA);
  assert_true (tl_pool_stat_u64 (p, "zil_records_indirect") > 0);
  crash_close (p);
  copy_file (dev, snap);

  /* What the last synced txg holds, from a read-only import. */
  copy_file (snap, work);
  cfg (&pc, work, NULL, false, 0);
  pc.pc_readonly = true;
  p = tl_pool_open_ok (&pc);
  zh = zv_dsdir_zil_header (zv_dsdir_find (p, NULL));
  guid = zh->zh_guid;
  ring_dva = zh->zh_ring_dva;
  ring_len = zh->zh_nslots * zh->zh_blksz;
  assert_int_equal (ZV_DVA_VDEV (ring_dva), 0);
  rootbp = *zv_pool_rootbp (p);
  vbs = zv_dsdir_blksz (zv_dsdir_find (p, NULL));
  {
    zv_dnode_phys_t dn;
    hi_find_t f0 = { .hf_level = 0 }, f1 = { .hf_level = 1 };
    zv_object_t *ob = zv_dsdir_object (zv_dsdir_find (p, NULL));
    zv_dmu_object_phys (ob, &dn);
    assert_int_equal (zv_dmu_walk (zv_pool_spa (p), ob->ob_id, &dn,
                                   false, hi_find_fn, &f0), 0);
    assert_int_equal (zv_dmu_walk (zv_pool_spa (p), ob->ob_id, &dn,
                                   false, hi_find_fn, &f1), 0);
    assert_true (f0.hf_found && f1.hf_found);
    l0 = f0.hf_bp;
    ind = f1.hf_bp;
  }
  synced = read_volume (tl_vol (p));
  assert_true (zv_is_zero (synced, 65536));   /* only in the log */
  assert_int_equal (tl_pool_close (p), 0);

  n = hl_scan (snap, ZV_DVA_OFFSET (ring_dva), ring_len, hb, 16);
  assert_true (n >= 1);

  {
    /* A pointer of the right shape: one copy, L0, volume data, the
     * volume's block size; only its address is wrong. */
    zv_blkptr_t shape = l0;
    zv_blkptr_t hole, objset, live_ind, ring, psize, lsize, level, type,
      copies;
    hole = shape;               /* the right shape, no address */
    hole.bp_dva[0] = 0;
    objset = shape;
    objset.bp_dva[0] = rootbp.bp_dva[0];
    live_ind = shape;
    live_ind.bp_dva[0] = ind.bp_dva[0];
    ring = shape;
    ring.bp_dva[0] = ring_dva;
    psize = shape;
    psize.bp_psize = vbs / 2;
    lsize = shape;
    lsize.bp_lsize = vbs * 2;
    level = shape;
    level.bp_level = 1;
    type = shape;
    type.bp_type = ZV_BT_INDIRECT;
    copies = shape;
    copies.bp_ncopies = 2;
    copies.bp_dva[1] = rootbp.bp_dva[1] ? rootbp.bp_dva[1] : rootbp.bp_dva[0];
    const struct {
      const char *name, *why;
      zv_blkptr_t bp;
    } cases[] = {
      { "hole", "is a hole", hole },
      { "objset", "allocated", objset },
      { "live indirect", "allocated", live_ind },
      { "live data", "allocated", l0 },
      { "log ring", "allocated", ring },
      { "psize", "size", psize },
      { "lsize", "size", lsize },
      { "level", "level", level },
      { "type", "type", type },
      { "copies", "copies", copies },
    };

    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
      int r;
      if (only && atoi (only) != (int) c)
        continue;
      fprintf (stderr, "  in-place record: %s\n", cases[c].name);
      copy_file (snap, work);
      hi_target = cases[c].bp;
      hl_forge (work, &hb[0], guid, hi_edit);
      cfg (&pc, work, NULL, false, 0);
      for (int round = 0; round < 2; round++) {
        bool said;
        tl_log_reset (true);
        r = tl_pool_open (&pc, &p);
        said = tl_log_has ("in-place block") && tl_log_has (cases[c].why)
          && tl_log_has ("the import fails");
        tl_log_reset (false);
        if (r == 0)
          assert_int_equal (tl_pool_close (p), 0);
        if (r != -EIO)
          fail_msg ("%s (round %d): import returned %d, not -EIO",
                    cases[c].name, round, r);
        if (!said)
          fail_msg ("%s (round %d): no message saying why", cases[c].name,
                    round);
        hi_check_synced (work, synced, volsize, cases[c].name);
      }
    }
  }

  free (synced);
  free (shadow);
  unlink (dev);
  unlink (snap);
  unlink (work);
}

/* ------------------------------------------------------------------ */
/* e. A damaged log                                                     */
/* ------------------------------------------------------------------ */

/*
 * Acknowledged writes whose log blocks are damaged after the crash.  Each
 * test builds one chain: a pool whose txgs never sync by themselves, its
 * log made usable, then FUA writes one after the other (each in its own
 * log block, or blocks, written and flushed before the next write is
 * logged, so each later block says the earlier ones were durable), then
 * a crash that loses nothing.  Damage goes into copies of the files.
 */
typedef struct ld_write {
  uint64_t lw_off;
  uint32_t lw_len;
  uint64_t lw_seed;
  uint64_t lw_first, lw_last;   /* seqs of the log blocks of its records */
} ld_write_t;

#define LD_MAXBLK 64
#define LD_MAXW 32
#define LD_SLOT (512 * KiB)     /* write i is at i * LD_SLOT */

typedef struct ld_chain {
  char lc_dev[512], lc_log[512];        /* the snapshot */
  char lc_wdev[512], lc_wlog[512];      /* the copies imported */
  bool lc_has_log;                      /* a separate log device */
  uint64_t lc_ring_off, lc_ring_len, lc_guid;
  hl_block_t lc_blk[LD_MAXBLK];         /* the chain's blocks, by seq */
  uint64_t lc_durable[LD_MAXBLK];       /* their lh_durable_seq */
  int lc_n;
  ld_write_t lc_w[LD_MAXW];
  int lc_nw;
  uint64_t lc_objset[2];                /* device offsets, newest txg's */
} ld_chain_t;

/* The file that holds the log ring: of the snapshot, or of the copy. */
static const char *
ld_ring_file (const ld_chain_t *lc, bool work)
{
  if (lc->lc_has_log)
    return work ? lc->lc_wlog : lc->lc_log;
  return work ? lc->lc_wdev : lc->lc_dev;
}

/* Which writes each block holds records of, and what it says was
 * durable. */
static void
ld_parse (ld_chain_t *lc)
{
  for (int b = 0; b < lc->lc_n; b++) {
    const hl_block_t *hb = &lc->lc_blk[b];
    uint8_t *buf = malloc (hb->hb_len);
    const zv_lwb_hdr_t *lh = (const zv_lwb_hdr_t *) buf;

    assert_non_null (buf);
    assert_int_equal (tl_file_pread (ld_ring_file (lc, false), buf,
                                     hb->hb_len, hb->hb_off), 0);
    lc->lc_durable[b] = lh->lh_durable_seq;
    for (uint32_t pos = 0; pos + sizeof (zv_lr_t) <= lh->lh_nused;) {
      const zv_lr_t *lr = (const zv_lr_t *) (buf + sizeof *lh + pos);

      assert_true (lr->lr_reclen >= sizeof *lr);
      for (int i = 0; i < lc->lc_nw; i++) {
        ld_write_t *w = &lc->lc_w[i];
        if (lr->lr_type != ZV_LR_NOP && lr->lr_offset >= w->lw_off
            && lr->lr_offset < w->lw_off + w->lw_len) {
          if (w->lw_first == 0)
            w->lw_first = hb->hb_seq;
          w->lw_last = hb->hb_seq;
        }
      }
      pos += lr->lr_reclen;
    }
    free (buf);
  }
  for (int i = 0; i < lc->lc_nw; i++)
    assert_true (lc->lc_w[i].lw_first != 0);
}

/* Build the chain of FUA writes of lens[0..nw) (file names from name);
 * with extra_txg, one more txg syncs before them, whose header names the
 * same chain (so that an import rewound past the newest txg still finds
 * it). */
static void
ld_build_ex (ld_chain_t *lc, const char *name, bool logdev,
             const uint32_t *lens, int nw, bool extra_txg)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  const zv_zil_header_t *zh;
  char file[128];

  assert_true (nw <= LD_MAXW && (uint64_t) nw * LD_SLOT <= 15 * MiB);
  memset (lc, 0, sizeof *lc);
  lc->lc_has_log = logdev;
  snprintf (file, sizeof file, "%s.img", name);
  tl_path (lc->lc_dev, sizeof lc->lc_dev, file);
  snprintf (file, sizeof file, "%s-log.img", name);
  tl_path (lc->lc_log, sizeof lc->lc_log, file);
  snprintf (file, sizeof file, "%s-w.img", name);
  tl_path (lc->lc_wdev, sizeof lc->lc_wdev, file);
  snprintf (file, sizeof file, "%s-wlog.img", name);
  tl_path (lc->lc_wlog, sizeof lc->lc_wlog, file);
  assert_int_equal (tl_sparse_file (lc->lc_dev, 48 * MiB), 0);
  if (logdev)
    assert_int_equal (tl_sparse_file (lc->lc_log, 17 * MiB), 0);
  cfg (&pc, lc->lc_dev, logdev ? lc->lc_log : NULL, true, 16 * MiB);
  cfg_no_txg (&pc);
  p = tl_pool_open_ok (&pc);
  rec_warm (p, NULL, 15 * MiB);
  if (extra_txg) {
    tl_vol_write (tl_vol (p), NULL, 14 * MiB, BLK, 77, 0);
    assert_int_equal (zv_pool_sync (p), 0);
  }
  for (int c = 0; c < 2; c++)
    lc->lc_objset[c] = ZV_DVA_OFFSET (zv_pool_rootbp (p)->bp_dva[c]);
  zh = zv_dsdir_zil_header (zv_dsdir_find (p, NULL));
  lc->lc_ring_off = ZV_DVA_OFFSET (zh->zh_ring_dva);
  lc->lc_ring_len = zh->zh_nslots * (uint64_t) zh->zh_blksz;
  lc->lc_guid = zh->zh_guid;
  for (int i = 0; i < nw; i++) {
    ld_write_t *w = &lc->lc_w[lc->lc_nw++];

    w->lw_off = (uint64_t) i * LD_SLOT;
    w->lw_len = lens[i];
    w->lw_seed = 1000 + (uint64_t) i;
    tl_vol_write (tl_vol (p), NULL, w->lw_off, w->lw_len, w->lw_seed,
                  ZVOL_FUA);
  }
  crash_close (p);
  lc->lc_n = hl_scan (ld_ring_file (lc, false), lc->lc_ring_off,
                      lc->lc_ring_len, lc->lc_blk, LD_MAXBLK);
  assert_true (lc->lc_n > 0 && lc->lc_n < LD_MAXBLK);
  for (int b = 1; b < lc->lc_n; b++)
    assert_int_equal (lc->lc_blk[b].hb_seq, lc->lc_blk[0].hb_seq + b);
  ld_parse (lc);
}

static void
ld_build (ld_chain_t *lc, const char *name, bool logdev, const uint32_t *lens,
          int nw)
{
  ld_build_ex (lc, name, logdev, lens, nw, false);
}

static void
ld_unlink (const ld_chain_t *lc)
{
  unlink (lc->lc_dev);
  unlink (lc->lc_log);
  unlink (lc->lc_wdev);
  unlink (lc->lc_wlog);
}

/* Fresh copies of the snapshot to damage and import. */
static void
ld_reset (const ld_chain_t *lc)
{
  copy_file (lc->lc_dev, lc->lc_wdev);
  if (lc->lc_has_log)
    copy_file (lc->lc_log, lc->lc_wlog);
}

/* Invert the byte 'off' bytes into block b (of the copy). */
static void
ld_flip (const ld_chain_t *lc, int b, uint32_t off)
{
  assert_true (off < lc->lc_blk[b].hb_len);
  assert_int_equal (tl_file_flip (ld_ring_file (lc, true),
                                  lc->lc_blk[b].hb_off + off), 0);
}

/* Rewrite block b's lh_durable_seq (of the copy), checksummed again. */
static void
ld_set_durable (const ld_chain_t *lc, int b, uint64_t durable)
{
  const hl_block_t *hb = &lc->lc_blk[b];
  uint8_t *buf = zv_buf_alloc (hb->hb_len);
  zv_lwb_hdr_t *lh = (zv_lwb_hdr_t *) buf;

  assert_int_equal (tl_file_pread (ld_ring_file (lc, true), buf, hb->hb_len,
                                   hb->hb_off), 0);
  lh->lh_durable_seq = durable;
  memset (&lh->lh_cksum, 0, sizeof lh->lh_cksum);
  zv_cksum_compute (buf, hb->hb_len, hl_seed (lc->lc_guid, hb->hb_seq),
                    &lh->lh_cksum);
  assert_int_equal (tl_file_pwrite (ld_ring_file (lc, true), buf,
                                    hb->hb_len, hb->hb_off), 0);
  zv_buf_free (buf);
}

/* The configuration that imports the copies. */
static void
ld_cfg (const ld_chain_t *lc, zvol_pool_config_t *pc, unsigned recover,
        bool readonly)
{
  cfg (pc, lc->lc_wdev, lc->lc_has_log ? lc->lc_wlog : NULL, false, 0);
  pc->pc_zil_recover = recover;
  pc->pc_readonly = readonly;
}

/* Import the copies (and open the volume, which replays): tl_pool_open's
 * result.  The log capture starts afresh, expecting errors; the caller
 * looks at it, then resets it. */
static int
ld_import_ex (const ld_chain_t *lc, unsigned recover, bool readonly,
              bool rewind, zvol_pool_t **pp)
{
  zvol_pool_config_t pc;

  ld_cfg (lc, &pc, recover, readonly);
  pc.pc_rewind = rewind;
  tl_log_reset (true);
  *pp = NULL;
  return tl_pool_open (&pc, pp);
}

static int
ld_import (const ld_chain_t *lc, unsigned recover, bool readonly,
           zvol_pool_t **pp)
{
  return ld_import_ex (lc, recover, readonly, false, pp);
}

/* Does write i read back whole (1), as zeros (0: dropped), or neither
 * (-1: part of it)? */
static int
ld_state (zvol_t *zv, const ld_write_t *w)
{
  uint8_t *buf = malloc (w->lw_len);
  int st;

  assert_non_null (buf);
  assert_int_equal (zvol_read (zv, buf, w->lw_off, w->lw_len), 0);
  st = tl_pat_check (buf, w->lw_off, w->lw_len, w->lw_seed) == -1 ? 1
    : zv_is_zero (buf, w->lw_len) ? 0 : -1;
  free (buf);
  return st;
}

/* The log ended before block seq s: every write whose records are all
 * in earlier blocks reads back, every one that starts at s or later is
 * not there at all (none of it applied). */
static void
ld_expect_upto (zvol_t *zv, const ld_chain_t *lc, uint64_t s,
                const char *what)
{
  for (int i = 0; i < lc->lc_nw; i++) {
    const ld_write_t *w = &lc->lc_w[i];
    int st = ld_state (zv, w);

    if (w->lw_last < s && st != 1)
      fail_msg ("%s: write %d (log blocks %" PRIu64 "-%" PRIu64 ", before "
                "block %" PRIu64 ") is %s", what, i, w->lw_first, w->lw_last,
                s, st == 0 ? "missing" : "partly there");
    if (w->lw_first >= s && st != 0)
      fail_msg ("%s: write %d (log block %" PRIu64 ", from block %" PRIu64
                " on) is %s", what, i, w->lw_first, s,
                st == 1 ? "there" : "partly there");
  }
}

/* Crash a pool opened without its volume, losing nothing. */
static void
ld_crash_pool (zvol_pool_t *p)
{
  pc_t *cut = pc_new (1, PC_KEEP_ALL);

  /* Direct writes end first: the simulator sees a request whole. */
  zv_zio_pending_wait_all (zv_pool_spa (p));
  pc_attach (cut, zv_pool_spa (p)->spa_devs[0]);
  if (zv_pool_logdev (p))
    pc_attach (cut, zv_pool_logdev (p));
  tl_log_reset (true);
  pc_cut (cut);
  (void) zvol_pool_close (p);
  pc_free (cut);
  tl_log_reset (false);
}

/*
 * Six acknowledged 12 KiB writes, six 16 KiB log blocks, each saying
 * the one before was durable.  One 4 KiB sector of the third block
 * damaged, its header's and then one of its records': the import fails,
 * saying which block, what is lost and how to import anyway (before the
 * change it imported without the writes of blocks 3-6); read-only it
 * imports with the synced data; zil_recover=truncate imports with the
 * first two writes, discard with none, and the cut outlives a crash
 * before the replay.  The newest block damaged is a torn tail (imports,
 * without it), and so is a damaged block that the blocks after it do
 * not vouch for (as when it was in flight with them).  zil_recover with
 * create or readonly is refused.
 */
static void
test_log_damage (void **state)
{
  static const uint32_t lens[6] = {
    12288, 12288, 12288, 12288, 12288, 12288,
  };
  static const struct {
    const char *name;
    uint32_t off;
  } where[] = {
    { "header sector", 16 },                    /* its seq */
    { "record sector", 2 * BLK + 1000 },        /* data of its record */
  };
  ld_chain_t *lc = calloc (1, sizeof *lc);
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  char needle[64], what[128];
  uint64_t s;
  int r;

  (void) state;
  assert_non_null (lc);
  ld_build (lc, "ld", false, lens, 6);
  assert_int_equal (lc->lc_n, 6);
  for (int b = 0; b < 6; b++) {
    assert_int_equal (lc->lc_blk[b].hb_len, 16384);
    assert_int_equal (lc->lc_w[b].lw_first, lc->lc_blk[b].hb_seq);
    assert_int_equal (lc->lc_w[b].lw_last, lc->lc_blk[b].hb_seq);
  }
  s = lc->lc_blk[2].hb_seq;
  snprintf (needle, sizeof needle, "log block %" PRIu64 " (", s);

  for (size_t k = 0; k < sizeof where / sizeof where[0]; k++) {
    snprintf (what, sizeof what, "middle block's %s damaged", where[k].name);
    ld_reset (lc);
    ld_flip (lc, 2, where[k].off);
    r = ld_import (lc, ZVOL_ZIL_RECOVER_NONE, false, &p);
    if (r == 0)
      fail_msg ("%s: the pool imported (without the acknowledged writes "
                "of blocks 3-6)", what);
    assert_int_equal (r, -EIO);
    if (!tl_log_has (needle) || !tl_log_has ("is damaged")
        || !tl_log_has ("are lost with it")
        || !tl_log_has ("3 record(s) of txg") || !tl_log_has ("in 3 later")
        || !tl_log_has ("zil_recover=truncate")
        || !tl_log_has ("zil_recover=discard"))
      fail_msg ("%s: the refusal does not say what is lost and how to "
                "import anyway", what);
    tl_log_reset (false);

    /* Read-only: the synced txg, nothing of the log; the damage said. */
    assert_int_equal (ld_import (lc, ZVOL_ZIL_RECOVER_NONE, true, &p), 0);
    assert_true (tl_log_has ("a read-only import does not replay"));
    tl_log_reset (false);
    ld_expect_upto (tl_vol (p), lc, lc->lc_blk[0].hb_seq, what);
    assert_int_equal (tl_pool_close (p), 0);

    /* Truncate: the first two writes; and so it stays. */
    assert_int_equal (ld_import (lc, ZVOL_ZIL_RECOVER_TRUNCATE, false, &p),
                      0);
    assert_true (tl_log_has ("zil_recover=truncate: replaying"));
    tl_log_reset (false);
    ld_expect_upto (tl_vol (p), lc, s, what);
    assert_int_equal (tl_pool_close (p), 0);
    assert_int_equal (ld_import (lc, ZVOL_ZIL_RECOVER_NONE, false, &p), 0);
    tl_log_reset (false);
    ld_expect_upto (tl_vol (p), lc, s, what);
    assert_int_equal (tl_pool_close (p), 0);

    /* Discard: none of the log. */
    ld_reset (lc);
    ld_flip (lc, 2, where[k].off);
    assert_int_equal (ld_import (lc, ZVOL_ZIL_RECOVER_DISCARD, false, &p),
                      0);
    assert_true (tl_log_has ("zil_recover=discard: dropping the whole log: "
                             "5 record(s)"));
    tl_log_reset (false);
    ld_expect_upto (tl_vol (p), lc, lc->lc_blk[0].hb_seq, what);
    assert_int_equal (tl_pool_close (p), 0);
  }

  /* The newest block: nothing written after it can tell, so it is the
   * torn tail of the log, quietly. */
  ld_reset (lc);
  ld_flip (lc, 5, 2 * BLK + 1000);
  assert_int_equal (ld_import (lc, ZVOL_ZIL_RECOVER_NONE, false, &p), 0);
  assert_int_equal (tl_log_errors (), 0);
  tl_log_reset (false);
  ld_expect_upto (tl_vol (p), lc, lc->lc_blk[5].hb_seq, "newest damaged");
  assert_int_equal (tl_pool_close (p), 0);

  /* Blocks 5 and 6 issued while block 4 was in flight (they say only
   * block 3 was durable): block 4 torn is the end of the log, and their
   * records were never acknowledged. */
  ld_reset (lc);
  ld_set_durable (lc, 4, lc->lc_blk[2].hb_seq);
  ld_set_durable (lc, 5, lc->lc_blk[2].hb_seq);
  ld_flip (lc, 3, 2 * BLK + 1000);
  assert_int_equal (ld_import (lc, ZVOL_ZIL_RECOVER_NONE, false, &p), 0);
  assert_int_equal (tl_log_errors (), 0);
  assert_true (tl_log_has ("torn tail"));
  tl_log_reset (false);
  ld_expect_upto (tl_vol (p), lc, lc->lc_blk[3].hb_seq,
                  "block torn, later ones unacknowledged");
  assert_int_equal (tl_pool_close (p), 0);

  /* The cut is in the header: a crash after the truncating import's
   * first txg and before the replay, then an import without the key,
   * replays up to the same place. */
  ld_reset (lc);
  ld_flip (lc, 2, 2 * BLK + 1000);
  ld_cfg (lc, &pc, ZVOL_ZIL_RECOVER_TRUNCATE, false);
  tl_log_reset (true);
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  assert_int_equal (zv_txg_wait_synced (zv_pool_txg (p),
                                        zv_txg_open_txg (zv_pool_txg (p))),
                    0);
  ld_crash_pool (p);
  assert_int_equal (ld_import (lc, ZVOL_ZIL_RECOVER_NONE, false, &p), 0);
  tl_log_reset (false);
  ld_expect_upto (tl_vol (p), lc, s, "cut, crash, import without the key");
  assert_int_equal (tl_pool_close (p), 0);

  /* Where it would mean nothing. */
  ld_reset (lc);
  ld_cfg (lc, &pc, ZVOL_ZIL_RECOVER_DISCARD, true);
  tl_log_reset (true);
  assert_int_equal (zvol_pool_open (&pc, &p), -EINVAL);
  assert_true (tl_log_has ("read-only import never replays"));
  cfg (&pc, lc->lc_wdev, NULL, true, 16 * MiB);
  pc.pc_zil_recover = ZVOL_ZIL_RECOVER_TRUNCATE;
  assert_int_equal (zvol_pool_open (&pc, &p), -EINVAL);
  assert_true (tl_log_has ("a new pool has no intent log"));
  pc.pc_zil_recover = 7;
  pc.pc_create = false;
  assert_int_equal (zvol_pool_open (&pc, &p), -EINVAL);
  tl_log_reset (false);

  /* What the writer recorded: each block says the one before was
   * durable (last, so that the checks above fail on what an import
   * does, should it not tell). */
  for (int b = 1; b < 6; b++)
    assert_int_equal (lc->lc_durable[b], lc->lc_blk[b - 1].hb_seq);
  ld_unlink (lc);
  free (lc);
}

/*
 * Blocks written together: one 400 KiB FUA write, logged into several
 * blocks issued in one batch (none of which can say the others were
 * durable), then a 4 KiB FUA write, whose block says the whole batch was.
 * A block of the batch damaged: refused.  Damaged too the newest block,
 * which vouched for it: a torn tail (a crash while the batch was in
 * flight looks the same), the first piece of the big write replays.
 */
static void
test_log_damage_batch (void **state)
{
  static const uint32_t lens[2] = { 400 * KiB, 4096 };
  ld_chain_t *lc = calloc (1, sizeof *lc);
  zvol_pool_t *p;
  int last, r;

  (void) state;
  assert_non_null (lc);
  ld_build (lc, "ldb", true, lens, 2);
  last = lc->lc_n - 1;
  assert_true (lc->lc_n >= 4);
  assert_int_equal (lc->lc_w[0].lw_first, lc->lc_blk[0].hb_seq);
  assert_int_equal (lc->lc_w[0].lw_last, lc->lc_blk[last - 1].hb_seq);
  assert_int_equal (lc->lc_w[1].lw_first, lc->lc_blk[last].hb_seq);

  ld_reset (lc);
  ld_flip (lc, 1, 3 * BLK + 7);
  r = ld_import (lc, ZVOL_ZIL_RECOVER_NONE, false, &p);
  if (r == 0)
    fail_msg ("a block of the batch damaged: the pool imported");
  assert_int_equal (r, -EIO);
  assert_true (tl_log_has ("is damaged"));
  tl_log_reset (false);

  ld_reset (lc);
  ld_flip (lc, 1, 3 * BLK + 7);
  ld_flip (lc, last, 100);
  assert_int_equal (ld_import (lc, ZVOL_ZIL_RECOVER_NONE, false, &p), 0);
  assert_int_equal (tl_log_errors (), 0);
  tl_log_reset (false);
  tl_vol_check (tl_vol (p), 0, 64 * KiB, lc->lc_w[0].lw_seed);
  assert_int_equal (ld_state (tl_vol (p), &lc->lc_w[1]), 0);
  assert_int_equal (tl_pool_close (p), 0);

  /* What the writer recorded: the batch's blocks all say the same, from
   * before the first of them; the next block says the last of them. */
  for (int b = 0; b < last; b++)
    assert_int_equal (lc->lc_durable[b], lc->lc_durable[0]);
  assert_true (lc->lc_durable[0] < lc->lc_blk[0].hb_seq);
  assert_int_equal (lc->lc_durable[last], lc->lc_blk[last - 1].hb_seq);
  ld_unlink (lc);
  free (lc);
}

/*
 * 40 random 4 KiB sectors of the live chain (16 acknowledged writes of
 * 512 bytes to 40 KiB, one of 300 KiB over several blocks in the
 * middle), each overwritten with noise on a fresh copy, then imported.
 * Every write was acknowledged (FUA), so an import that succeeds without
 * one is allowed only when the damaged block is the chain's last: nothing
 * written after it can tell it from a torn tail.  Otherwise the import
 * must fail, naming the block, and zil_recover=truncate must then import
 * with every write before it.
 */
static void
test_log_damage_random (void **state)
{
  uint64_t rnd = tl_seed ("log_damage_random");
  const int trials = TL_TSAN ? 10 : 40;
  uint32_t lens[16];
  uint64_t nsect = 0;
  unsigned refused = 0, tail = 0, silent = 0, wrong_refusal = 0;
  ld_chain_t *lc = calloc (1, sizeof *lc);
  uint8_t *noise = zv_buf_alloc (BLK);
  zvol_pool_t *p;

  (void) state;
  assert_non_null (lc);
  for (int i = 0; i < 16; i++)
    lens[i] = (uint32_t) (1 + tl_rand (&rnd) % 80) * 512;
  lens[7] = 300 * KiB;
  ld_build (lc, "ldr", true, lens, 16);
  for (int b = 0; b < lc->lc_n; b++)
    nsect += lc->lc_blk[b].hb_len / BLK;
  printf ("  %d log blocks, %" PRIu64 " sectors, %u in the last block\n",
          lc->lc_n, nsect, lc->lc_blk[lc->lc_n - 1].hb_len / BLK);

  for (int t = 0; t < trials; t++) {
    uint64_t k = tl_rand (&rnd) % nsect;
    int b = 0, r;
    char needle[64];
    uint64_t s;
    bool last;

    while (k >= lc->lc_blk[b].hb_len / BLK)
      k -= lc->lc_blk[b++].hb_len / BLK;
    s = lc->lc_blk[b].hb_seq;
    last = b == lc->lc_n - 1;
    ld_reset (lc);
    tl_fill_rand (noise, BLK, &rnd);
    assert_int_equal (tl_file_pwrite (ld_ring_file (lc, true), noise, BLK,
                                      lc->lc_blk[b].hb_off + k * BLK), 0);
    r = ld_import (lc, ZVOL_ZIL_RECOVER_NONE, false, &p);
    if (r == 0) {
      int lost = 0;

      tl_log_reset (false);
      for (int i = 0; i < lc->lc_nw; i++)
        lost += ld_state (tl_vol (p), &lc->lc_w[i]) != 1;
      ld_expect_upto (tl_vol (p), lc, s, "imported after damage");
      assert_int_equal (tl_pool_close (p), 0);
      if (lost > 0 && !last) {
        silent++;
        printf ("  trial %d: block %" PRIu64 " sector %" PRIu64 ": imported "
                "without %d acknowledged write(s)\n", t, s, k, lost);
      }
      else
        tail++;
      continue;
    }
    assert_int_equal (r, -EIO);
    snprintf (needle, sizeof needle, "log block %" PRIu64 " (", s);
    if (last || !tl_log_has (needle) || !tl_log_has ("is damaged")) {
      wrong_refusal++;
      printf ("  trial %d: block %" PRIu64 " sector %" PRIu64 ": refused "
              "%s\n", t, s, k, last ? "although it is the last block"
              : "without naming it");
    }
    refused++;
    tl_log_reset (false);
    assert_int_equal (ld_import (lc, ZVOL_ZIL_RECOVER_TRUNCATE, false, &p),
                      0);
    tl_log_reset (false);
    ld_expect_upto (tl_vol (p), lc, s, "truncated after damage");
    assert_int_equal (tl_pool_close (p), 0);
  }
  printf ("  %d damaged sectors: %u refused (damage told apart), %u in "
          "the last block (imported as a torn tail, its write lost), %u "
          "imported without acknowledged writes of earlier blocks, %u "
          "refused wrongly\n", trials, refused, tail, silent,
          wrong_refusal);
  assert_int_equal (silent, 0);
  assert_int_equal (wrong_refusal, 0);
  zv_buf_free (noise);
  ld_unlink (lc);
  free (lc);
}

/*
 * After a rewind (the newest txg's object set damaged in both copies,
 * the import, told rewind=true, takes the txg before, whose header names
 * the same chain),
 * a block that does not verify although a later one says it was durable
 * may have been overwritten legitimately: the txgs rewound past let the
 * ring reuse space behind their head.  So the import goes on, the log
 * ending at that block, and says so; without the rewind the same damage
 * is refused.
 */
static void
test_log_damage_rewound (void **state)
{
  static const uint32_t lens[4] = { 12288, 12288, 12288, 12288 };
  ld_chain_t *lc = calloc (1, sizeof *lc);
  zvol_pool_t *p;

  (void) state;
  assert_non_null (lc);
  ld_build_ex (lc, "ldw", false, lens, 4, true);
  assert_int_equal (lc->lc_n, 4);

  ld_reset (lc);
  ld_flip (lc, 1, 2 * BLK + 1000);
  assert_int_equal (ld_import (lc, ZVOL_ZIL_RECOVER_NONE, false, &p), -EIO);
  tl_log_reset (false);

  ld_reset (lc);
  ld_flip (lc, 1, 2 * BLK + 1000);
  for (int c = 0; c < 2; c++)
    assert_int_equal (tl_file_flip (lc->lc_wdev, lc->lc_objset[c] + 200), 0);
  /* The rewind itself loses a committed txg: refused without rewind=. */
  assert_int_equal (ld_import (lc, ZVOL_ZIL_RECOVER_NONE, false, &p), -EIO);
  assert_true (tl_log_has ("rewind=true"));
  assert_int_equal (ld_import_ex (lc, ZVOL_ZIL_RECOVER_NONE, false, true,
                                  &p), 0);
  assert_true (tl_log_has ("rewound to txg"));
  assert_true (tl_log_has ("the import rewound past txgs that may have "
                           "reused its space"));
  tl_log_reset (false);
  ld_expect_upto (tl_vol (p), lc, lc->lc_blk[1].hb_seq, "rewound");
  assert_int_equal (tl_pool_close (p), 0);

  ld_unlink (lc);
  free (lc);
}

/*
 * In-place records: their data block is written before their log block
 * and flushed with it.  Two 64 KiB FUA writes (each one log block of
 * in-place records).  The first one's in-place block damaged: the second
 * block says the first was durable, so the replay fails (the volume does
 * not open) unless zil_recover=truncate; the second one's damaged: the
 * log ends there, as after a crash before its flush.
 */
static void
test_log_damage_inplace (void **state)
{
  static const uint32_t lens[2] = { 65536, 65536 };
  ld_chain_t *lc = calloc (1, sizeof *lc);
  zvol_pool_t *p;
  uint64_t ip[2];

  (void) state;
  assert_non_null (lc);
  ld_build (lc, "ldi", false, lens, 2);
  assert_int_equal (lc->lc_n, 2);
  for (int b = 0; b < 2; b++) {
    uint8_t buf[BLK];
    const zv_lr_t *lr = (const zv_lr_t *) (buf + sizeof (zv_lwb_hdr_t));
    zv_blkptr_t bp;

    assert_int_equal (tl_file_pread (lc->lc_dev, buf, BLK,
                                     lc->lc_blk[b].hb_off), 0);
    assert_int_equal (lr->lr_type, ZV_LR_WRITE_IND);
    memcpy (&bp, lr + 1, sizeof bp);
    ip[b] = ZV_DVA_OFFSET (bp.bp_dva[0]);
  }

  ld_reset (lc);
  assert_int_equal (tl_file_flip (lc->lc_wdev, ip[0] + 100), 0);
  assert_int_equal (ld_import (lc, ZVOL_ZIL_RECOVER_NONE, false, &p), -EIO);
  assert_true (tl_log_has ("says that block was durable"));
  tl_log_reset (false);
  assert_int_equal (ld_import (lc, ZVOL_ZIL_RECOVER_TRUNCATE, false, &p), 0);
  assert_true (tl_log_has ("are dropped (zil_recover=truncate)"));
  tl_log_reset (false);
  ld_expect_upto (tl_vol (p), lc, lc->lc_blk[0].hb_seq, "in-place damaged");
  assert_int_equal (tl_pool_close (p), 0);

  ld_reset (lc);
  assert_int_equal (tl_file_flip (lc->lc_wdev, ip[1] + 100), 0);
  assert_int_equal (ld_import (lc, ZVOL_ZIL_RECOVER_NONE, false, &p), 0);
  assert_true (tl_log_has ("the log ends before it"));
  assert_false (tl_log_has ("says that block was durable"));
  tl_log_reset (false);
  ld_expect_upto (tl_vol (p), lc, lc->lc_blk[1].hb_seq, "newest in-place");
  assert_int_equal (tl_pool_close (p), 0);

  assert_int_equal (lc->lc_durable[1], lc->lc_blk[0].hb_seq);
  ld_unlink (lc);
  free (lc);
}

/* ------------------------------------------------------------------ */

/*
 * Write-ahead: a write that nobody commits yet starts its log block's
 * write at once (zil_write_ahead=always), so the flush that follows only
 * finishes it (waits for it and flushes) and writes no block of its own;
 * in auto mode the same happens once flushes follow writes one by one.
 */
static bool
wa_wait_ahead (zvol_pool_t *p, uint64_t want)
{
  for (int i = 0; i < 5000; i++) {
    if (tl_pool_stat_u64 (p, "zil_lwbs_ahead") >= want)
      return true;
    usleep (1000);
  }
  return false;
}

static void
test_write_ahead (void **state)
{
  char dev[512], err[256];
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  zvol_t *zv;
  uint8_t shadow[BLK], buf[BLK], buf2[BLK], got[BLK];
  uint64_t lwbs;

  (void) state;
  tl_path (dev, sizeof dev, "ahead.img");
  assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
  for (unsigned mode = 0; mode < 2; mode++) {
    assert_int_equal (zvol_tunable_set ("zil_write_ahead",
                                        mode == 0 ? "always" : "auto", err,
                                        sizeof err), 0);
    cfg (&pc, dev, NULL, mode == 0, 16 * MiB);
    cfg_no_txg (&pc);
    p = tl_pool_open_ok (&pc);
    zv = tl_vol (p);
    rec_warm (p, shadow, 0);
    if (mode == 1) {
      /* A few writes each followed by its flush: now writes go ahead. */
      for (unsigned i = 0; i < 4; i++) {
        stamp_fill (buf, 100 + i);
        assert_int_equal (zvol_write (zv, buf, (8 + i) * BLK, BLK, 0), 0);
        assert_int_equal (zvol_flush (zv), 0);
      }
    }
    lwbs = tl_pool_stat_u64 (p, "zil_lwbs_written");
    stamp_fill (buf, 4242 + mode);
    assert_int_equal (zvol_write (zv, buf, 3 * BLK, BLK, 0), 0);
    if (!wa_wait_ahead (p, 1))
      fail_msg ("zil_write_ahead=%s: a write's log block was not written "
                "within 5 s without a flush", mode == 0 ? "always" : "auto");
    /* Written ahead; the flush has nothing left to write. */
    for (int i = 0; i < 5000
         && tl_pool_stat_u64 (p, "zil_lwbs_written") == lwbs; i++)
      usleep (1000);
    assert_int_equal (tl_pool_stat_u64 (p, "zil_lwbs_written"), lwbs + 1);
    assert_int_equal (zvol_flush (zv), 0);
    assert_int_equal (tl_pool_stat_u64 (p, "zil_lwbs_written"), lwbs + 1);
    /* A last write goes ahead and no flush follows: the close finishes
     * its block (the kernel owns the buffer until then). */
    stamp_fill (buf2, 5252 + mode);
    assert_int_equal (zvol_write (zv, buf2, 4 * BLK, BLK, 0), 0);
    if (mode == 0)
      assert_int_equal (tl_pool_stat_u64 (p, "zil_lwbs_ahead"), 2);
    /* Not finished yet, so not of the sync-write class: txg writes do
     * not yield to it meanwhile. */
    assert_int_equal (atomic_load (&zv_pool_spa (p)->spa_sync_io), 0);
    assert_int_equal (tl_pool_close (p), 0);
    /* And the log block is the write's (the txg never synced it: the
     * clean close did; read it back after the import anyway). */
    cfg (&pc, dev, NULL, false, 0);
    p = tl_pool_open_ok (&pc);
    assert_int_equal (zvol_read (tl_vol (p), got, 3 * BLK, BLK), 0);
    assert_memory_equal (got, buf, BLK);
    assert_int_equal (zvol_read (tl_vol (p), got, 4 * BLK, BLK), 0);
    assert_memory_equal (got, buf2, BLK);
    assert_int_equal (tl_pool_close (p), 0);
  }
  /* Off: only commits write log blocks. */
  assert_int_equal (zvol_tunable_set ("zil_write_ahead", "off", err,
                                      sizeof err), 0);
  cfg (&pc, dev, NULL, false, 0);
  cfg_no_txg (&pc);
  p = tl_pool_open_ok (&pc);
  zv = tl_vol (p);
  rec_warm (p, shadow, 0);
  lwbs = tl_pool_stat_u64 (p, "zil_lwbs_written");
  assert_int_equal (zvol_write (zv, buf, 5 * BLK, BLK, 0), 0);
  usleep (50000);
  assert_int_equal (tl_pool_stat_u64 (p, "zil_lwbs_written"), lwbs);
  assert_int_equal (tl_pool_stat_u64 (p, "zil_lwbs_ahead"), 0);
  assert_int_equal (zvol_flush (zv), 0);
  assert_int_equal (tl_pool_stat_u64 (p, "zil_lwbs_written"), lwbs + 1);
  assert_int_equal (tl_pool_close (p), 0);
  assert_int_equal (zvol_tunable_set ("zil_write_ahead", "off", err,
                                      sizeof err), 0);
  unlink (dev);
}

/*
 * Pipelined blocks: thread A's log block is written and its flush held
 * at the device; thread B writes and commits.  B's block is written (and
 * flushed) while A's flush is still held: a commit does not wait for an
 * earlier block to complete before it issues its own.  B's commit still
 * returns only once A's block is durable (tickets are durable in order),
 * and both writes are there.
 */
typedef struct pl_hold {
  pthread_mutex_t ph_lock;
  pthread_cond_t ph_cv;
  int ph_state;                 /* 0 armed, 1 holding a flush, 2 let go */
} pl_hold_t;

static int
pl_hold_flush (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
               uint32_t len)
{
  pl_hold_t *h = arg;

  (void) dev; (void) off; (void) len;
  if (op != ZV_DEV_FLUSH)
    return 0;
  pthread_mutex_lock (&h->ph_lock);
  if (h->ph_state == 0) {
    h->ph_state = 1;
    pthread_cond_broadcast (&h->ph_cv);
    while (h->ph_state == 1)
      pthread_cond_wait (&h->ph_cv, &h->ph_lock);
  }
  pthread_mutex_unlock (&h->ph_lock);
  return 0;
}

typedef struct pl_thr {
  zvol_t *pt_zv;
  uint64_t pt_off;
  uint8_t pt_buf[BLK];
  int pt_r;
  atomic_bool pt_done;
} pl_thr_t;

static void *
pl_writer (void *arg)
{
  pl_thr_t *t = arg;

  t->pt_r = zvol_write (t->pt_zv, t->pt_buf, t->pt_off, BLK, 0);
  if (t->pt_r == 0)
    t->pt_r = zvol_flush (t->pt_zv);
  atomic_store (&t->pt_done, true);
  return NULL;
}

static void
test_pipeline (void **state)
{
  char dev[512], err[256];
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  uint8_t shadow[BLK], got[BLK];
  pl_hold_t h = { .ph_lock = PTHREAD_MUTEX_INITIALIZER,
                  .ph_cv = PTHREAD_COND_INITIALIZER };
  pl_thr_t a = { .pt_off = 1 * BLK }, b = { .pt_off = 2 * BLK };
  pthread_t ta, tb;
  uint64_t lwbs;
  bool issued = false;

  (void) state;
  tl_path (dev, sizeof dev, "pipeline.img");
  assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
  assert_int_equal (zvol_tunable_set ("zil_write_ahead", "off", err,
                                      sizeof err), 0);
  cfg (&pc, dev, NULL, true, 16 * MiB);
  cfg_no_txg (&pc);
  p = tl_pool_open_ok (&pc);
  rec_warm (p, shadow, 0);
  a.pt_zv = b.pt_zv = tl_vol (p);
  stamp_fill (a.pt_buf, 0xa1);
  stamp_fill (b.pt_buf, 0xb2);
  lwbs = tl_pool_stat_u64 (p, "zil_lwbs_written");
  zv_dev_set_fault (zv_pool_spa (p)->spa_devs[0], pl_hold_flush, &h);

  assert_int_equal (pthread_create (&ta, NULL, pl_writer, &a), 0);
  pthread_mutex_lock (&h.ph_lock);
  while (h.ph_state == 0)
    pthread_cond_wait (&h.ph_cv, &h.ph_lock);
  pthread_mutex_unlock (&h.ph_lock);
  assert_int_equal (tl_pool_stat_u64 (p, "zil_lwbs_written"), lwbs + 1);

  assert_int_equal (pthread_create (&tb, NULL, pl_writer, &b), 0);
  for (int i = 0; i < 5000 && !issued; i++) {
    issued = tl_pool_stat_u64 (p, "zil_lwbs_written") == lwbs + 2;
    if (!issued)
      usleep (1000);
  }
  /* B's block is written; its flush passes the hook (only the first is
   * held): give it time to complete, and B still waits for A's block. */
  usleep (20000);
  bool b_early = atomic_load (&b.pt_done);

  pthread_mutex_lock (&h.ph_lock);
  h.ph_state = 2;
  pthread_cond_broadcast (&h.ph_cv);
  pthread_mutex_unlock (&h.ph_lock);
  assert_int_equal (pthread_join (ta, NULL), 0);
  assert_int_equal (pthread_join (tb, NULL), 0);
  zv_dev_set_fault (zv_pool_spa (p)->spa_devs[0], NULL, NULL);
  if (!issued)
    fail_msg ("a second commit did not write its block within 5 s while "
              "the first block's flush was held");
  if (b_early)
    fail_msg ("a commit returned before an earlier block was durable");
  assert_int_equal (a.pt_r, 0);
  assert_int_equal (b.pt_r, 0);
  assert_int_equal (tl_pool_stat_u64 (p, "zil_lwbs_written"), lwbs + 2);
  assert_int_equal (tl_pool_close (p), 0);

  cfg (&pc, dev, NULL, false, 0);
  p = tl_pool_open_ok (&pc);
  assert_int_equal (zvol_read (tl_vol (p), got, a.pt_off, BLK), 0);
  assert_memory_equal (got, a.pt_buf, BLK);
  assert_int_equal (zvol_read (tl_vol (p), got, b.pt_off, BLK), 0);
  assert_memory_equal (got, b.pt_buf, BLK);
  assert_int_equal (tl_pool_close (p), 0);
  unlink (dev);
}

/*
 * Write-ahead, auto, with flushers side by side: eight threads, each a
 * write of its own then a flush, as eight clients fsync'ing at once.
 * Their commits overlap, so write-ahead stays off and their records are
 * grouped into the commits' blocks: a block written ahead for each write
 * would take the records from the groups and cost a write each.
 */
#define WG_THREADS 8
#define WG_ROUNDS 300

static void
test_write_ahead_group (void **state)
{
  char dev[512], err[256];
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  ct_thr_t thr[WG_THREADS];
  pthread_t th[WG_THREADS];
  uint64_t seed = tl_seed ("write_ahead_group"), lwbs, ahead, commits;
  uint64_t sleeps;

  (void) state;
  tl_path (dev, sizeof dev, "wagroup.img");
  assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
  assert_int_equal (zvol_tunable_set ("zil_write_ahead", "auto", err,
                                      sizeof err), 0);
  cfg (&pc, dev, NULL, true, CT_VOLSIZE);
  p = tl_pool_open_ok (&pc);
  assert_int_equal (zvol_pool_start (p), 0);
  for (unsigned i = 0; i < WG_THREADS; i++) {
    thr[i] = (ct_thr_t) { .ct_zv = tl_vol (p), .ct_idx = i,
                          .ct_seed = seed * 31 + i + 1,
                          .ct_writes = WG_ROUNDS, .ct_flush_each = true };
    assert_int_equal (pthread_create (&th[i], NULL, ct_writer, &thr[i]), 0);
  }
  for (unsigned i = 0; i < WG_THREADS; i++) {
    assert_int_equal (pthread_join (th[i], NULL), 0);
    if (thr[i].ct_errors)
      fail_msg ("thread %u: %d calls failed, first with %d", i,
                thr[i].ct_errors, thr[i].ct_first_err);
  }
  lwbs = tl_pool_stat_u64 (p, "zil_lwbs_written");
  ahead = tl_pool_stat_u64 (p, "zil_lwbs_ahead");
  commits = tl_pool_stat_u64 (p, "zil_commits");
  sleeps = tl_pool_stat_u64 (p, "zil_commit_sleeps");
  fprintf (stderr, "  %u writes each flushed, by %u threads: %" PRIu64
           " log blocks, %" PRIu64 " written ahead, %.2f waiters per "
           "block, %.2f sleeps per commit\n", WG_THREADS * WG_ROUNDS,
           WG_THREADS, lwbs, ahead, tl_pool_stat (p, "zil_waiters_per_lwb"),
           commits ? (double) sleeps / commits : 0.0);
  assert_true (lwbs > 0);
  if (ahead * 10 > lwbs)
    fail_msg ("%" PRIu64 " of %" PRIu64 " log blocks were written ahead "
              "though the flushes overlapped", ahead, lwbs);
  assert_int_equal (tl_pool_close (p), 0);
  assert_int_equal (zvol_tunable_set ("zil_write_ahead", "off", err,
                                      sizeof err), 0);
  unlink (dev);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_observer),
    tl_test (test_powercut_sim),
    tl_test (test_contention),
    tl_test (test_records),
    tl_test (test_claim_before_open),
    tl_test (test_commit_in_sync),
    tl_test (test_ring_fill_raises_cap),
    tl_test (test_commit_dropped_record),
    tl_test (test_write_ahead),
    tl_test (test_write_ahead_group),
    tl_test (test_pipeline),
    tl_test (test_ring_full_by_txg),
    tl_test (test_ring_full_after_log_error),
    tl_test (test_ring_full_suspended),
    tl_test (test_hostile_log),
    tl_test (test_hostile_ind),
    tl_test (test_log_damage),
    tl_test (test_log_damage_batch),
    tl_test (test_log_damage_random),
    tl_test (test_log_damage_inplace),
    tl_test (test_log_damage_rewound),
  };

  return tl_main (tests, "zil", NULL);
}
