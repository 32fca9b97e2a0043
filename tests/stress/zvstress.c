/*
 * zvstress.c: randomized stress of the engine, in the manner of OpenZFS's
 * ztest: threads drive a volume through core/zvol.h with random writes,
 * trims, zeroes, FUA writes, flushes, txg syncs, reads and extent walks
 * of random sizes and alignments, against a shadow model that checks
 * every read; the pool is exported and imported between epochs, and
 * faults come at random: device errors on read, write and flush, a full
 * pool, power cuts through the volatile-cache simulator
 * (tests/unit/powercut.c), kill -9 of a child process running the load.
 *
 *   zvstress [--seed N] [--time S] [--epochs N] [--threads N]
 *            [--volsize SIZE] [--no-kill] [--keep] [--verbose] [--strict]
 *
 * Without options it is the short run of "make check" (40 s).  It prints
 * its seed first; the same seed replays the same epochs (kinds, pool
 * layouts, tunables, faults) and the same request stream of each thread,
 * the threads' interleaving and the timing aside.  It ends with a summary
 * and the line "N passed, N failed" (checks of the whole volume after an
 * import, for the test driver and scripts/count-tests.sh), exits 1 on any
 * mismatch or unexpected error (the first one printed in detail, with the
 * seed and epoch), and then keeps its scratch directory (the pool's
 * files and the engine's recent messages).
 *
 * Theory
 * ------
 * Epochs.  The run is a series of epochs; each imports the pool (the
 * first of a series creates it: device count, volume block size, log
 * device or ring drawn at random), checks the whole volume against the
 * model, runs a load for a few seconds and ends in one of four ways:
 *
 *   clean  the pool is exported; the next import must give back exactly
 *          what the live model says;
 *   cut    the power goes, at a random moment or at the n-th device write
 *          from the import on (so in the import, the replay or the load);
 *   fault  device errors are injected (read, write, flush, each with its
 *          own rate) from a random moment: requests fail with EIO, the
 *          pool may suspend; the export may fail; sometimes a cut follows;
 *   kill   a child process imports the pool and runs the load, and is
 *          killed with SIGKILL at a random moment (now and then during
 *          its import).
 *
 * At most four times the volume's worth of changes goes between two
 * checks, so that a check (whose cost is the bytes changed since the
 * last) stays cheap; an epoch whose model is full just stops early.
 * A "fill" epoch writes over the whole thin volume, which is larger than
 * the pool: writes fail with ENOSPC and nothing else may break; other
 * epochs first trim what lies beyond their working set.
 *
 * The model, per byte of the volume (4 KiB cells, each with the list of
 * the changes made to it since the last check, newest first):
 *
 *   - base: the value the last check found (on disk, durable);
 *   - the changes since: data written (a pattern seeded by the change's
 *     unique id, so a value names its writer) or zeros (write of zeros,
 *     zero, and trim, whose whole volume blocks read as zeros; the
 *     partial edges of a trim are left alone and so not changed here),
 *     each pending, done (with its completion number) or failed;
 *   - cur: the live value, the last completed change.
 *
 * What the engine promises, and so what is checked:
 *
 *   live     a read returns cur exactly.  The stresser never runs two
 *            requests on overlapping bytes at once (its own range lock,
 *            byte-exact, so requests share volume blocks and the engine's
 *            1 MiB range-lock regions).  A failed request may have been
 *            applied in part (block by block, piece by piece), so after
 *            one each byte must read as before or as the request would
 *            have made it; what it reads becomes cur.  Holes an extent
 *            walk reports must be zeros in cur.  A read may fail with
 *            EIO only if a device read was failed during it (or the
 *            power went): never wrong data.
 *   durable  a change is acknowledged durable when a FUA request, or any
 *            request of a sync=always volume, returned 0 (itself and
 *            every change completed before it started), or when a flush
 *            or a txg sync (zv_pool_sync) returned 0 (every change
 *            completed before it started); sync=disabled acknowledges
 *            nothing but syncs and the export.
 *   crash    after a cut, a kill, or an export that failed, the next
 *            import must give, for each byte, the value of its newest
 *            durable change (base if none) or of any change made after
 *            it (done, failed or in flight).  This is per byte, not per
 *            request nor per 4 KiB sector, because that is what the
 *            engine promises for what was not acknowledged: a write is
 *            cut into 1 MiB pieces, each a record of its own; a record is
 *            split over log blocks on 4 KiB boundaries; a "need copy"
 *            record is filled from the volume when packed and an
 *            in-place record writes the whole volume block as it is when
 *            issued, so both may carry bytes of a later write whose own
 *            record never made it.  A stricter model gives false
 *            mismatches; this one still catches a lost acknowledged
 *            change, stale data coming back, and bytes never written
 *            (a byte of a pattern matches a wrong candidate by chance
 *            with probability 1/128, and a bad block is thousands).
 *   export   after an export that returned 0, the import gives cur
 *            exactly, failed requests as they were read back included.
 *
 * After a check the volume as read is the new base and cur, and the
 * change lists are emptied.
 *
 * Shared memory.  The model, the counters and the failure message live
 * in one MAP_SHARED mapping made before any fork, so a child killed with
 * SIGKILL leaves its model to the parent: each change is recorded whole
 * before it is linked into its cells (a compare-and-swap on the cell's
 * head) and before the request is issued, and marked done only after the
 * request returned, so whatever instant the kill comes at, the parent
 * sees every change that may have reached the disk and no acknowledgement
 * that was not given.
 *
 * Faults.  The stresser's fault hook (zv_dev_set_fault, or behind the
 * simulator's own through pc_set_fault in epochs that may cut) fails a
 * device request with EIO at the epoch's rates once armed.  EIO from a
 * request other than a read is allowed once any fault was injected in the
 * epoch or the power went; ENOSPC from writes and zeroes always (trims,
 * flushes and syncs only from a pool a sync out of space suspended, see
 * below); ENOTSUP only from a fast zero without MAY_TRIM, which must give
 * it.  Anything else is a failure.
 *
 * Known limits.  Two failures of a nearly full pool are the engine's
 * known limits (docs/design.md), counted and reported, not failures
 * unless --strict: a txg sync that finds no contiguous room for a block
 * suspends the pool (the epoch goes on as after a fault, and the next
 * import is checked as after a crash); an import whose log replay runs
 * out of space ends the series (a new pool next).
 *
 * Hangs: an alarm bounds every epoch (a request that never returns after
 * a fault is a bug too); it reports the seed and the epoch and exits.
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "testlib.h"
#include "pool.h"
#include "powercut.h"

#define ZS_CELL ZV_SECTOR
#define ZS_MAX_THREADS 16u
#define ZS_CTL ZS_MAX_THREADS          /* the controller's range-lock slot */
#define ZS_MAX_WRITE (1536 * KiB)      /* crosses a 1 MiB piece */
#define ZS_MAX_FREE (4 * MiB)          /* trims and zeroes */
#define ZS_MAX_READ (1 * MiB)
#define ZS_DATA_SPACE (56 * MiB)       /* the devices' total */
#define ZS_LOGDEV_SIZE (17 * MiB)
#define ZS_FAIL_MAX 16384

/* Slower builds get more time before a silence counts as a hang. */
#define ZS_SLOW (TL_TSAN ? 8 : 1)

/* ---- requests, epochs, counters ---- */

enum zs_req {
  ZS_R_WRITE, ZS_R_WRITE_ZEROS, ZS_R_ZERO, ZS_R_ZERO_ALLOC, ZS_R_ZERO_FAST,
  ZS_R_TRIM, ZS_R_FLUSH, ZS_R_SYNC, ZS_R_READ, ZS_R_EXTENTS, ZS_R_N
};
static const char *const zs_req_name[ZS_R_N] = {
  "write", "write-of-zeros", "zero", "zero-no-trim", "zero-fast", "trim",
  "flush", "txg-sync", "read", "extents",
};

enum zs_ekind { ZS_E_CLEAN, ZS_E_CUT, ZS_E_FAULT, ZS_E_KILL, ZS_E_N };
static const char *const zs_ekind_name[ZS_E_N] = {
  "clean", "cut", "fault", "kill",
};

/* What the next import is checked against. */
enum zs_check { ZS_C_NONE, ZS_C_EXACT, ZS_C_CRASH };

typedef struct zs_stats {
  _Atomic uint64_t st_ops[ZS_R_N];
  _Atomic uint64_t st_fua;              /* of the above, with FUA */
  _Atomic uint64_t st_bytes_written, st_bytes_read;
  _Atomic uint64_t st_enospc, st_eio, st_enotsup;
  _Atomic uint64_t st_faults[4];        /* by zv_dev_op */
  _Atomic uint64_t st_live_checks;      /* reads and walks compared */
  _Atomic uint64_t st_resolved;         /* failed requests read back */
  uint64_t st_epochs[ZS_E_N];
  uint64_t st_cuts, st_cuts_in_import, st_cut_sectors, st_cut_lost;
  uint64_t st_kills, st_kills_in_import;
  uint64_t st_imports, st_replays, st_creates, st_export_failed;
  _Atomic uint64_t st_limit_sync_enospc;  /* known limits (--strict: fail) */
  uint64_t st_limit_replay_enospc;
  uint64_t st_checks_exact, st_checks_crash, st_bytes_checked;
} zs_stats_t;

/* ---- the model (see the theory comment) ---- */

enum { ZS_K_DATA = 0, ZS_K_ZEROS = 1 };
enum { ZS_S_PENDING = 0, ZS_S_DONE = 1, ZS_S_FAILED = 2 };

typedef struct zs_op {
  uint64_t op_id;                   /* unique in the run: the pattern */
  uint64_t op_off;
  uint32_t op_len;
  uint8_t op_kind;                  /* ZS_K_* */
  uint8_t op_req;                   /* enum zs_req */
  uint8_t op_thread;
  uint8_t op_fua;
  _Atomic uint8_t op_state;         /* ZS_S_* */
  _Atomic uint8_t op_acked;         /* durable when it returned */
  _Atomic uint64_t op_cseq;         /* completion number once done */
} zs_op_t;

/* A change's bytes [lk_lo, lk_hi) in one cell. */
typedef struct zs_link {
  uint32_t lk_op;
  uint32_t lk_next;                 /* older link of the cell; 0: none */
  uint16_t lk_lo, lk_hi;
} zs_link_t;

typedef struct zs_model {
  uint64_t m_volsize, m_ncells;
  uint8_t *m_base;
  uint8_t *m_cur;
  _Atomic uint32_t *m_head;         /* per cell: newest link */
  _Atomic uint8_t *m_uncertain;     /* per cell: cur not known */
  zs_op_t *m_ops;
  zs_link_t *m_links;
  uint32_t m_ops_cap, m_links_cap;
  _Atomic uint32_t m_nops, m_nlinks; /* index 0 is "none" */
  _Atomic uint64_t m_cseq;          /* completion numbers handed out */
  _Atomic uint64_t m_durable;       /* completions up to it are durable */
  _Atomic uint64_t m_written;       /* bytes changed since the check */
  uint64_t m_written_max;
  atomic_bool m_full;
  uint64_t m_epoch;                 /* high half of the op ids */
} zs_model_t;

typedef struct zs_fail {
  atomic_int f_claimed;
  atomic_int f_mismatches;          /* data found wrong (not other failures) */
  char f_msg[ZS_FAIL_MAX];
  char f_log[ZS_FAIL_MAX];          /* the failing process's engine messages */
} zs_fail_t;

/* ---- options, plans, the run ---- */

typedef struct zs_opts {
  uint64_t o_seed;
  double o_time;                    /* seconds; 0: no bound */
  unsigned o_epochs;                /* 0: no bound */
  unsigned o_threads;
  uint64_t o_volsize;
  bool o_no_kill, o_keep, o_verbose, o_strict;
} zs_opts_t;

typedef struct zs_plan {
  enum zs_ekind p_kind;
  unsigned p_ms;                    /* the load's length */
  unsigned p_threads;
  unsigned p_sync, p_logbias;
  bool p_flush_txg;
  uint64_t p_txg_timeout_ms, p_dirty_max, p_cache_size;
  bool p_fill;                      /* the whole volume: ENOSPC */
  uint64_t p_ws;                    /* working set [0, p_ws) */
  unsigned p_w[ZS_R_N];             /* request weights */
  unsigned p_wsum;
  unsigned p_fua_pct;
  unsigned p_cut_ms;                /* 0: none (by time) */
  uint64_t p_cut_writes;            /* 0: none (by count, from the import) */
  unsigned p_fault_ms;              /* when faults are armed; 0: never */
  uint32_t p_fault_every[4];        /* 1 in N requests, by zv_dev_op */
  bool p_fault_disarm;              /* before the export */
  unsigned p_kill_ms;
  bool p_kill_in_import;
  /* tunables */
  uint64_t p_zvol_chunk, p_itx_shift, p_max_copied, p_imm_sz;
  uint64_t p_aggregate, p_ring_entries;
} zs_plan_t;

typedef struct zs_run {
  zs_opts_t r_o;
  zs_model_t *r_m;
  zs_stats_t *r_st;
  zs_fail_t *r_fail;
  uint8_t *r_img;                   /* the volume as a check reads it */
  /* the series: the pool's layout */
  uint64_t r_series;
  unsigned r_series_left;
  unsigned r_ndevs;
  bool r_has_logdev;
  uint32_t r_vbs;
  uint64_t r_zil_size;
  char r_dev[2][512], r_logdev[512];
  bool r_create;                    /* the next open creates */
  /* the epoch */
  uint64_t r_epoch;
  zs_plan_t r_plan;
  const char *r_prev_end;           /* how the previous epoch ended */
  zvol_pool_t *r_pool;
  zvol_t *r_zv;
  pc_t *r_pc;
  atomic_bool r_stop;
  atomic_uint r_live;               /* load threads still running */
  atomic_bool r_faults_armed;
  atomic_bool r_eio_ok;             /* a fault was injected, or a cut */
  atomic_bool r_limit;              /* a known limit suspended the pool */
  _Atomic uint64_t r_fault_calls;
  uint64_t r_deadline_ns;           /* of the whole run; 0: none */
  int r_ready_fd;                   /* kill epochs: the child's pipe */
} zs_run_t;

typedef struct zs_thr {
  zs_run_t *t_run;
  unsigned t_idx;
  uint64_t t_rnd;
  uint8_t *t_buf;                   /* what a write sends */
  uint8_t *t_rbuf;                  /* what a read gets */
  unsigned t_fails;                 /* failed requests in a row */
  uint64_t t_end_ns;
  pthread_t t_th;
} zs_thr_t;

static zs_run_t zs_run;

/* ---- failures ---- */

/* Record the first failure (from any thread or process) and stop. */
static void __attribute__ ((format (printf, 2, 3)))
zs_failf (zs_run_t *run, const char *fmt, ...)
{
  int expect = 0;
  va_list ap;

  atomic_store (&run->r_stop, true);
  if (!atomic_compare_exchange_strong (&run->r_fail->f_claimed, &expect, 1))
    return;
  va_start (ap, fmt);
  vsnprintf (run->r_fail->f_msg, sizeof run->r_fail->f_msg, fmt, ap);
  va_end (ap);
  /* The engine's recent messages, from whichever process failed (a
   * child's would die with it). */
  pthread_mutex_lock (&tl_log_mtx);
  {
    size_t n = ZV_MIN (tl_log_len, sizeof run->r_fail->f_log - 1);
    memcpy (run->r_fail->f_log, tl_log_buf + tl_log_len - n, n);
    run->r_fail->f_log[n] = '\0';
  }
  pthread_mutex_unlock (&tl_log_mtx);
}

static bool
zs_failed (const zs_run_t *run)
{
  return atomic_load (&run->r_fail->f_claimed) != 0;
}

/* ---- the range lock: no two requests on overlapping bytes ---- */

static struct {
  pthread_mutex_t rl_lock;
  pthread_cond_t rl_cv;
  uint64_t rl_lo[ZS_MAX_THREADS + 1], rl_hi[ZS_MAX_THREADS + 1];
} zs_rl = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, {0}, {0} };

static void
zs_rl_enter (unsigned slot, uint64_t lo, uint64_t hi)
{
  bool busy;

  pthread_mutex_lock (&zs_rl.rl_lock);
  do {
    busy = false;
    for (unsigned i = 0; i <= ZS_MAX_THREADS && !busy; i++)
      busy = i != slot && zs_rl.rl_lo[i] < hi && lo < zs_rl.rl_hi[i];
    if (busy)
      pthread_cond_wait (&zs_rl.rl_cv, &zs_rl.rl_lock);
  } while (busy);
  zs_rl.rl_lo[slot] = lo;
  zs_rl.rl_hi[slot] = hi;
  pthread_mutex_unlock (&zs_rl.rl_lock);
}

static void
zs_rl_exit (unsigned slot)
{
  pthread_mutex_lock (&zs_rl.rl_lock);
  zs_rl.rl_lo[slot] = zs_rl.rl_hi[slot] = 0;
  pthread_cond_broadcast (&zs_rl.rl_cv);
  pthread_mutex_unlock (&zs_rl.rl_lock);
}

/* ---- the model ---- */

/* Everything shared with a child, in one mapping made before any fork. */
static void
zs_model_create (zs_run_t *run)
{
  uint64_t vs = run->r_o.o_volsize, nc = vs / ZS_CELL;
  uint32_t ops_cap = 1u << 20, links_cap = 1u << 23;
  size_t sz[8] = {
    sizeof (zs_model_t), sizeof (zs_stats_t), sizeof (zs_fail_t),
    vs, vs, nc * sizeof (uint32_t), nc,
    ops_cap * sizeof (zs_op_t) + links_cap * sizeof (zs_link_t),
  };
  size_t total = 0, at = 0;
  uint8_t *p;
  zs_model_t *m;

  for (unsigned i = 0; i < 8; i++)
    total += ZV_P2ROUNDUP (sz[i], 64);
  p = mmap (NULL, total, PROT_READ | PROT_WRITE,
            MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    perror ("zvstress: mmap");
    exit (1);
  }
#define ZS_CARVE(i) (at += ZV_P2ROUNDUP (sz[i], 64), p + at - ZV_P2ROUNDUP (sz[i], 64))
  m = (zs_model_t *) ZS_CARVE (0);
  run->r_st = (zs_stats_t *) ZS_CARVE (1);
  run->r_fail = (zs_fail_t *) ZS_CARVE (2);
  m->m_base = ZS_CARVE (3);
  m->m_cur = ZS_CARVE (4);
  m->m_head = (_Atomic uint32_t *) ZS_CARVE (5);
  m->m_uncertain = (_Atomic uint8_t *) ZS_CARVE (6);
  m->m_ops = (zs_op_t *) ZS_CARVE (7);
#undef ZS_CARVE
  m->m_links = (zs_link_t *) (m->m_ops + ops_cap);
  m->m_ops_cap = ops_cap;
  m->m_links_cap = links_cap;
  m->m_volsize = vs;
  m->m_ncells = nc;
  /* Each check reads back what was written since the last: a bound on
   * the writes bounds its cost. */
  m->m_written_max = 4 * vs;
  atomic_store (&m->m_nops, 1);
  atomic_store (&m->m_nlinks, 1);
  run->r_m = m;
  run->r_img = malloc (vs);
  if (run->r_img == NULL)
    abort ();
}

/* After a check: what was read is the base and the live value. */
static void
zs_model_reset (zs_model_t *m, const uint8_t *img)
{
  if (img) {
    memcpy (m->m_base, img, m->m_volsize);
    memcpy (m->m_cur, img, m->m_volsize);
  }
  else {
    memset (m->m_base, 0, m->m_volsize);
    memset (m->m_cur, 0, m->m_volsize);
  }
  for (uint64_t c = 0; c < m->m_ncells; c++) {
    atomic_store_explicit (&m->m_head[c], 0, memory_order_relaxed);
    atomic_store_explicit (&m->m_uncertain[c], 0, memory_order_relaxed);
  }
  atomic_store (&m->m_nops, 1);
  atomic_store (&m->m_nlinks, 1);
  atomic_store (&m->m_cseq, 0);
  atomic_store (&m->m_durable, 0);
  atomic_store (&m->m_written, 0);
  atomic_store (&m->m_full, false);
}

/* The values change 'op' gives bytes [off, off+len) of the volume. */
static void
zs_op_fill (const zs_op_t *op, uint8_t *out, uint64_t off, size_t len)
{
  if (op->op_kind == ZS_K_ZEROS)
    memset (out, 0, len);
  else
    tl_pat_fill (out, off, len, op->op_id);
}

static uint8_t
zs_op_byte (const zs_op_t *op, uint64_t off)
{
  return op->op_kind == ZS_K_ZEROS ? 0 : tl_pat_byte (op->op_id, off);
}

static bool
zs_op_durable (zs_model_t *m, zs_op_t *op)
{
  return atomic_load (&op->op_state) == ZS_S_DONE
    && (atomic_load (&op->op_acked)
        || atomic_load (&op->op_cseq) <= atomic_load (&m->m_durable));
}

/* Every completion up to c0 is durable. */
static void
zs_durable (zs_model_t *m, uint64_t c0)
{
  uint64_t d = atomic_load (&m->m_durable);

  while (d < c0 && !atomic_compare_exchange_weak (&m->m_durable, &d, c0))
    ;
}

/*
 * Record a change of [off, off+len) before its request is issued, and
 * link it into its cells.  Returns its index, or 0 when the model is full
 * (the request is then not made).
 */
static uint32_t
zs_model_begin (zs_model_t *m, unsigned thr, enum zs_req req, unsigned kind,
                uint64_t off, uint64_t len, bool fua)
{
  uint64_t c0 = off / ZS_CELL;
  uint64_t c1 = len ? (off + len - 1) / ZS_CELL + 1 : c0;
  uint32_t n = (uint32_t) (c1 - c0), i, l;
  zs_op_t *op;

  if (atomic_load (&m->m_full))
    return 0;
  i = atomic_fetch_add (&m->m_nops, 1);
  l = atomic_fetch_add (&m->m_nlinks, n);
  if (i >= m->m_ops_cap || (uint64_t) l + n > m->m_links_cap
      || atomic_fetch_add (&m->m_written, len) + len > m->m_written_max) {
    atomic_store (&m->m_full, true);
    return 0;
  }
  op = &m->m_ops[i];
  op->op_id = (m->m_epoch << 32) | i;
  op->op_off = off;
  op->op_len = (uint32_t) len;
  op->op_kind = (uint8_t) kind;
  op->op_req = (uint8_t) req;
  op->op_thread = (uint8_t) thr;
  op->op_fua = fua;
  atomic_store (&op->op_cseq, 0);
  atomic_store (&op->op_acked, 0);
  atomic_store (&op->op_state, ZS_S_PENDING);
  for (uint64_t c = c0; c < c1; c++, l++) {
    zs_link_t *lk = &m->m_links[l];
    uint64_t cs = c * ZS_CELL;
    uint32_t h;

    lk->lk_op = i;
    lk->lk_lo = (uint16_t) (ZV_MAX (off, cs) - cs);
    lk->lk_hi = (uint16_t) (ZV_MIN (off + len, cs + ZS_CELL) - cs);
    h = atomic_load (&m->m_head[c]);
    do
      lk->lk_next = h;
    while (!atomic_compare_exchange_weak (&m->m_head[c], &h, l));
  }
  return i;
}

/* The request of change i returned r; 'acked': durable if r is 0, with
 * every change completed before c0. */
static void
zs_model_done (zs_model_t *m, uint32_t i, int r, bool acked, uint64_t c0)
{
  zs_op_t *op = &m->m_ops[i];

  if (r != 0) {
    atomic_store (&op->op_state, ZS_S_FAILED);
    return;
  }
  atomic_store (&op->op_cseq, atomic_fetch_add (&m->m_cseq, 1) + 1);
  if (acked)
    atomic_store (&op->op_acked, 1);
  atomic_store (&op->op_state, ZS_S_DONE);
  if (acked)
    zs_durable (m, c0);
}

static void
zs_mark_uncertain (zs_model_t *m, uint64_t off, uint64_t len)
{
  for (uint64_t c = off / ZS_CELL; len && c <= (off + len - 1) / ZS_CELL; c++)
    atomic_store (&m->m_uncertain[c], 1);
}

static bool
zs_uncertain (zs_model_t *m, uint64_t cell)
{
  return atomic_load_explicit (&m->m_uncertain[cell], memory_order_relaxed);
}

/* ---- describing a byte's history (failure messages) ---- */

static size_t __attribute__ ((format (printf, 4, 5)))
zs_cat (char *buf, size_t len, size_t at, const char *fmt, ...)
{
  va_list ap;
  int n;

  if (at >= len)
    return at;
  va_start (ap, fmt);
  n = vsnprintf (buf + at, len - at, fmt, ap);
  va_end (ap);
  return n < 0 ? at : at + (size_t) n;
}

/* The changes of byte 'off' since the last check, newest first. */
static size_t
zs_describe (zs_model_t *m, uint64_t off, char *buf, size_t len, size_t at)
{
  uint64_t c = off / ZS_CELL;
  uint32_t b = (uint32_t) (off % ZS_CELL);
  unsigned shown = 0;
  bool floor = false;

  for (uint32_t l = atomic_load (&m->m_head[c]); l;
       l = m->m_links[l].lk_next) {
    const zs_link_t *lk = &m->m_links[l];
    zs_op_t *op = &m->m_ops[lk->lk_op];
    uint8_t st = atomic_load (&op->op_state);
    bool dur = zs_op_durable (m, op);

    if (b < lk->lk_lo || b >= lk->lk_hi)
      continue;
    if (shown++ < 12)
      at = zs_cat (buf, len, at, "    change %" PRIu32 " (thread %u): %s%s "
                   "%" PRIu64 "+%" PRIu32 ", %s%s, completion %" PRIu64
                   ", gives 0x%02x%s\n", lk->lk_op, op->op_thread,
                   zs_req_name[op->op_req], op->op_fua ? " FUA" : "",
                   op->op_off, op->op_len,
                   st == ZS_S_DONE ? "done" : st == ZS_S_FAILED ? "failed"
                   : "in flight", dur ? ", durable" : "",
                   atomic_load (&op->op_cseq), zs_op_byte (op, off),
                   floor ? " (older than a durable one: not allowed)" : "");
    floor |= dur;
  }
  if (shown > 12)
    at = zs_cat (buf, len, at, "    ... %u changes in all\n", shown);
  at = zs_cat (buf, len, at, "    value at the last check: 0x%02x%s; live "
               "value 0x%02x%s; durable up to completion %" PRIu64 "\n",
               m->m_base[off], floor ? " (not allowed: a durable change "
               "came after it)" : "", m->m_cur[off],
               zs_uncertain (m, c) ? " (not known: a failed request could "
               "not be read back)" : "", atomic_load (&m->m_durable));
  return at;
}

/* ---- the checks ---- */

/*
 * Check one cell of the volume as an import gave it against what a crash
 * allows; returns the first bad byte of the cell or -1, and in *nbad how
 * many are bad.
 */
static int
zs_cell_crash_check (zs_model_t *m, uint64_t c, const uint8_t *got,
                     unsigned *nbad)
{
  uint8_t ok[ZS_CELL], floor[ZS_CELL], val[ZS_CELL];
  const uint8_t *base = m->m_base + c * ZS_CELL;
  unsigned nfloor = 0;
  int first = -1;

  memset (ok, 0, sizeof ok);
  memset (floor, 0, sizeof floor);
  for (uint32_t l = atomic_load (&m->m_head[c]); l && nfloor < ZS_CELL;
       l = m->m_links[l].lk_next) {
    const zs_link_t *lk = &m->m_links[l];
    zs_op_t *op = &m->m_ops[lk->lk_op];
    bool dur = zs_op_durable (m, op);

    zs_op_fill (op, val + lk->lk_lo, c * ZS_CELL + lk->lk_lo,
                lk->lk_hi - lk->lk_lo);
    for (unsigned b = lk->lk_lo; b < lk->lk_hi; b++)
      if (!floor[b]) {
        ok[b] |= got[b] == val[b];
        if (dur) {
          floor[b] = 1;
          nfloor++;
        }
      }
  }
  *nbad = 0;
  for (unsigned b = 0; b < ZS_CELL; b++)
    if (!ok[b] && (floor[b] || got[b] != base[b])) {
      if (first < 0)
        first = (int) b;
      (*nbad)++;
    }
  return first;
}

/* Holes of an extent walk must read as zeros. */
typedef struct zs_walk {
  zs_model_t *w_m;
  const uint8_t *w_img;             /* what to compare with */
  bool w_live;                      /* skip uncertain cells */
  uint64_t w_bad;                   /* first bad byte + 1 */
} zs_walk_t;

static int
zs_walk_cb (void *arg, uint64_t off, uint64_t len, unsigned type)
{
  zs_walk_t *w = arg;
  zs_model_t *m = w->w_m;

  if (!(type & ZVOL_EXTENT_HOLE))
    return 0;
  for (uint64_t i = off; i < off + len; i++)
    if (w->w_img[i] != 0 && !(w->w_live && zs_uncertain (m, i / ZS_CELL))) {
      w->w_bad = i + 1;
      return -1;
    }
  return 0;
}

/* Where the previous epoch left the volume, for messages. */
static const char *
zs_check_name (enum zs_check mode)
{
  return mode == ZS_C_EXACT ? "exactly as last written (clean export)"
    : "as a crash allows";
}

/*
 * Check the imported volume against the model: read it whole, walk its
 * extents (holes read as zeros), compare every cell.  On success the
 * volume as read becomes the model's base.
 */
static bool
zs_verify (zs_run_t *run, enum zs_check mode)
{
  zs_model_t *m = run->r_m;
  uint64_t vs = m->m_volsize, badcells = 0, badbytes = 0, first = 0;
  int64_t firstb = -1;
  int r = 0;

  for (uint64_t off = 0; off < vs && r == 0; off += ZS_MAX_READ) {
    r = zvol_read (run->r_zv, run->r_img + off, off,
                   (uint32_t) ZV_MIN ((uint64_t) ZS_MAX_READ, vs - off));
    if (r < 0)
      zs_failf (run, "epoch %" PRIu64 ": reading the volume after the "
                "import failed at %" PRIu64 ": %s", run->r_epoch, off,
                strerror (-r));
  }
  if (r < 0)
    return false;
  {
    zs_walk_t w = { .w_m = m, .w_img = run->r_img };

    r = zvol_extents (run->r_zv, 0, vs, zs_walk_cb, &w);
    if (w.w_bad) {
      atomic_fetch_add (&run->r_fail->f_mismatches, 1);
      zs_failf (run, "MISMATCH after the import of epoch %" PRIu64 ": the "
                "extents call byte %" PRIu64 " a hole, and it reads 0x%02x",
                run->r_epoch, w.w_bad - 1, run->r_img[w.w_bad - 1]);
      return false;
    }
    if (r < 0) {
      zs_failf (run, "epoch %" PRIu64 ": walking the extents after the "
                "import failed: %s", run->r_epoch, strerror (-r));
      return false;
    }
  }

  for (uint64_t c = 0; c < m->m_ncells; c++) {
    const uint8_t *got = run->r_img + c * ZS_CELL;
    unsigned nbad = 0;
    int b;

    if (mode == ZS_C_EXACT && !zs_uncertain (m, c)) {
      const uint8_t *want = m->m_cur + c * ZS_CELL;
      b = -1;
      if (memcmp (got, want, ZS_CELL) != 0)
        for (unsigned i = 0; i < ZS_CELL; i++)
          if (got[i] != want[i]) {
            if (b < 0)
              b = (int) i;
            nbad++;
          }
    }
    else
      b = zs_cell_crash_check (m, c, got, &nbad);
    if (b >= 0) {
      if (firstb < 0) {
        first = c;
        firstb = b;
      }
      badcells++;
      badbytes += nbad;
    }
  }
  if (firstb >= 0) {
    uint64_t off = first * ZS_CELL + (uint64_t) firstb;
    char *msg = malloc (ZS_FAIL_MAX);
    size_t at = 0;
    unsigned nbad = 0;

    if (msg == NULL)
      abort ();
    at = zs_cat (msg, ZS_FAIL_MAX, at, "MISMATCH after the import of epoch "
                 "%" PRIu64 " (the previous epoch ended: %s; checked %s)\n"
                 "  volume offset %" PRIu64 " (4K cell %" PRIu64 ", volume "
                 "block %" PRIu64 " of %u bytes): got 0x%02x",
                 run->r_epoch, run->r_prev_end, zs_check_name (mode), off,
                 first, off / run->r_vbs, run->r_vbs, run->r_img[off]);
    if (mode == ZS_C_EXACT && !zs_uncertain (m, first))
      at = zs_cat (msg, ZS_FAIL_MAX, at, ", expected 0x%02x (the last "
                   "completed change); as a crash would allow it: %s\n",
                   m->m_cur[off],
                   zs_cell_crash_check (m, first, run->r_img + first
                                        * ZS_CELL, &nbad) < 0 ? "yes" : "no");
    else
      at = zs_cat (msg, ZS_FAIL_MAX, at, ", which no allowed change "
                   "gives\n");
    at = zs_cat (msg, ZS_FAIL_MAX, at, "  the byte's history since the last "
                 "check (newest first):\n");
    at = zs_describe (m, off, msg, ZS_FAIL_MAX, at);
    at = zs_cat (msg, ZS_FAIL_MAX, at, "  %" PRIu64 " bad byte(s) in %"
                 PRIu64 " cell(s) of %" PRIu64, badbytes, badcells,
                 m->m_ncells);
    atomic_fetch_add (&run->r_fail->f_mismatches, 1);
    zs_failf (run, "%s", msg);
    free (msg);
    return false;
  }

  if (mode == ZS_C_EXACT)
    run->r_st->st_checks_exact++;
  else
    run->r_st->st_checks_crash++;
  run->r_st->st_bytes_checked += vs;
  zs_model_reset (m, run->r_img);
  return true;
}

/* ---- faults ---- */

static int
zs_fault (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
          uint32_t len)
{
  zs_run_t *run = arg;
  uint32_t every;
  uint64_t x;

  (void) dev;
  (void) off;
  (void) len;
  if (!atomic_load (&run->r_faults_armed) || op < 1 || op > 3)
    return 0;
  every = run->r_plan.p_fault_every[op];
  if (every == 0)
    return 0;
  x = tl_mix (run->r_o.o_seed ^ (run->r_epoch << 40)
              ^ atomic_fetch_add (&run->r_fault_calls, 1));
  if (x % every != 0)
    return 0;
  atomic_store (&run->r_eio_ok, true);
  atomic_fetch_add (&run->r_st->st_faults[op], 1);
  return -EIO;
}

/* Put the fault hook on every device of the open pool. */
static void
zs_fault_attach (zs_run_t *run)
{
  zv_spa_t *spa = zv_pool_spa (run->r_pool);

  for (unsigned d = 0; d < spa->spa_ndevs; d++)
    zv_dev_set_fault (spa->spa_devs[d], zs_fault, run);
  if (zv_pool_logdev (run->r_pool))
    zv_dev_set_fault (zv_pool_logdev (run->r_pool), zs_fault, run);
}

static bool
zs_cut_now (zs_run_t *run)
{
  return run->r_pc != NULL && pc_is_cut (run->r_pc);
}

/*
 * A known limit of the engine on a nearly full pool (docs/design.md,
 * "Known limits"): a txg sync that finds no contiguous room for a block
 * (the reservations count bytes, free space may be in smaller pieces)
 * fails with ENOSPC and suspends the pool.  The load then goes on as
 * after a fault, and the next import is checked as after a crash (what
 * the engine promises of a suspended pool).  --strict makes it a failure.
 */
static void
zs_limit_hit (zs_run_t *run)
{
  bool was = false;

  if (atomic_compare_exchange_strong (&run->r_limit, &was, true)) {
    atomic_fetch_add (&run->r_st->st_limit_sync_enospc, 1);
    if (run->r_o.o_strict)
      zs_failf (run, "epoch %" PRIu64 ": a txg sync ran out of space and "
                "suspended the pool (a known limit: docs/design.md)",
                run->r_epoch);
  }
}

static bool
zs_limit_sync_enospc (zs_run_t *run)
{
  if (run->r_pool == NULL
      || zv_txg_error (zv_pool_txg (run->r_pool)) != -ENOSPC)
    return false;
  zs_limit_hit (run);
  return !run->r_o.o_strict;
}

/*
 * The other known limit there: after a crash on a nearly full pool, the
 * import's log replay may find no room for what it replays (ENOSPC), and
 * every read-write import fails the same way.  The series ends (a new
 * pool next); --strict makes it a failure.  Returns true if r is that.
 */
static bool
zs_limit_replay_enospc (zs_run_t *run, int r, enum zs_check *check)
{
  if (r != -ENOSPC || run->r_o.o_strict)
    return false;
  run->r_st->st_limit_replay_enospc++;
  run->r_series_left = 0;
  *check = ZS_C_NONE;
  printf ("zvstress: epoch %" PRIu64 ": the import's log replay ran out of "
          "space (a known limit); a new pool next\n", run->r_epoch);
  return true;
}

/* May a request other than a read fail with EIO now? */
static bool
zs_eio_ok (zs_run_t *run)
{
  return atomic_load (&run->r_eio_ok) || zs_cut_now (run)
    || zs_limit_sync_enospc (run);
}

static uint64_t
zs_read_faults (zs_run_t *run)
{
  return atomic_load (&run->r_st->st_faults[ZV_DEV_READ]);
}

/* A read failed with r: fine only for EIO with a device read failed
 * while it ran (rf: the count before), or after a cut. */
static bool
zs_read_error_ok (zs_run_t *run, int r, uint64_t rf)
{
  if (r != -EIO)
    return false;
  if (zs_read_faults (run) == rf && !zs_cut_now (run))
    return false;
  atomic_fetch_add (&run->r_st->st_eio, 1);
  return true;
}

/* ---- the load ---- */

static uint64_t
zs_rand (zs_thr_t *t, uint64_t n)
{
  return n ? tl_rand (&t->t_rnd) % n : 0;
}

/* A request length: mostly small, some large, any alignment. */
static uint64_t
zs_pick_len (zs_thr_t *t, uint64_t max)
{
  uint64_t x = zs_rand (t, 100), len;

  if (x < 8)
    len = 1 + zs_rand (t, 511);
  else if (x < 40)
    len = 512 * (1 + zs_rand (t, 16));
  else if (x < 75)
    len = 4096 * (1 + zs_rand (t, 16));
  else if (x < 92)
    len = 4096 * (1 + zs_rand (t, 64));
  else
    len = 4096 * (1 + zs_rand (t, max / 4096));
  if (zs_rand (t, 5) == 0)
    len += zs_rand (t, 4096);
  return ZV_MAX ((uint64_t) 1, ZV_MIN (len, max));
}

/* An offset for len bytes in [0, ws): byte, 512, 4K or block aligned. */
static uint64_t
zs_pick_off (zs_thr_t *t, uint64_t ws, uint64_t len)
{
  static const unsigned align_pct[3] = { 10, 35, 75 };
  uint64_t x = zs_rand (t, 100), a, off;

  a = x < align_pct[0] ? 1 : x < align_pct[1] ? 512
    : x < align_pct[2] ? 4096 : t->t_run->r_vbs;
  off = zs_rand (t, ws - len + 1);
  off -= off % a;
  return off;
}

/* A request (not a read) returned r: fine? Counts the allowed errors. */
static bool
zs_error_ok (zs_thr_t *t, enum zs_req req, int r)
{
  zs_run_t *run = t->t_run;

  /* (A pool suspended by a sync out of space fails its waiters, flushes
   * too, with that sync's ENOSPC.) */
  if (r == -ENOSPC && ((req != ZS_R_TRIM && req != ZS_R_FLUSH
                        && req != ZS_R_SYNC) || zs_limit_sync_enospc (run))) {
    atomic_fetch_add (&run->r_st->st_enospc, 1);
    return true;
  }
  if (r == -EIO && zs_eio_ok (run)) {
    atomic_fetch_add (&run->r_st->st_eio, 1);
    return true;
  }
  return false;
}

/*
 * A change failed: each of its bytes reads as before (cur) or as the
 * change would have made it (want); what is read is the live value now.
 * If it cannot be read back (a fault), its cells are not known any more.
 */
static void
zs_resolve (zs_thr_t *t, const zs_op_t *op, const uint8_t *want)
{
  zs_run_t *run = t->t_run;
  zs_model_t *m = run->r_m;
  uint64_t rf = zs_read_faults (run);
  int r;

  if (op->op_len == 0)
    return;
  atomic_fetch_add (&run->r_st->st_resolved, 1);
  r = zvol_read (run->r_zv, t->t_rbuf, op->op_off, op->op_len);
  if (r < 0) {
    if (!zs_read_error_ok (run, r, rf))
      zs_failf (run, "epoch %" PRIu64 ": reading back a failed %s at %"
                PRIu64 "+%" PRIu32 " failed: %s, and no device read was "
                "failed meanwhile", run->r_epoch, zs_req_name[op->op_req],
                op->op_off, op->op_len, strerror (-r));
    zs_mark_uncertain (m, op->op_off, op->op_len);
    return;
  }
  for (uint32_t i = 0; i < op->op_len; i++) {
    uint64_t off = op->op_off + i;
    uint8_t g = t->t_rbuf[i];

    if (g != m->m_cur[off] && g != want[i]
        && !zs_uncertain (m, off / ZS_CELL)) {
      char msg[4096];
      size_t at = zs_cat (msg, sizeof msg, 0, "epoch %" PRIu64 ": after a "
                          "failed %s at %" PRIu64 "+%" PRIu32 ", byte %"
                          PRIu64 " reads 0x%02x: neither its old value "
                          "0x%02x nor the new 0x%02x\n", run->r_epoch,
                          zs_req_name[op->op_req], op->op_off, op->op_len,
                          off, g, m->m_cur[off], want[i]);
      zs_describe (m, off, msg, sizeof msg, at);
      atomic_fetch_add (&run->r_fail->f_mismatches, 1);
      zs_failf (run, "%s", msg);
      return;
    }
  }
  memcpy (m->m_cur + op->op_off, t->t_rbuf, op->op_len);
}

/* A change's request returned r: record it, update the live value. */
static void
zs_finish (zs_thr_t *t, uint32_t i, enum zs_req req, int r, bool acked,
           uint64_t c0, const uint8_t *want)
{
  zs_run_t *run = t->t_run;
  zs_model_t *m = run->r_m;
  zs_op_t *op = &m->m_ops[i];

  zs_model_done (m, i, r, acked, c0);
  if (r == 0) {
    memcpy (m->m_cur + op->op_off, want, op->op_len);
    atomic_fetch_add (&run->r_st->st_ops[req], 1);
    atomic_fetch_add (&run->r_st->st_bytes_written, op->op_len);
    t->t_fails = 0;
    return;
  }
  t->t_fails++;
  if (!zs_error_ok (t, req, r)) {
    zs_failf (run, "epoch %" PRIu64 ": %s at %" PRIu64 "+%" PRIu32
              " failed: %s (%s)", run->r_epoch, zs_req_name[req],
              op->op_off, op->op_len, strerror (-r),
              r == -EIO ? "no fault was injected and the power is on"
              : "not an error this request may return");
    return;
  }
  zs_resolve (t, op, want);
}

/* Durable on return: FUA, or every write of a sync=always volume. */
static bool
zs_acked (zs_run_t *run, bool fua)
{
  if (run->r_plan.p_sync == ZVOL_SYNC_DISABLED)
    return false;
  return fua || run->r_plan.p_sync == ZVOL_SYNC_ALWAYS;
}

static void
zs_do_write (zs_thr_t *t, bool zeros)
{
  zs_run_t *run = t->t_run;
  zs_model_t *m = run->r_m;
  const zs_plan_t *pl = &run->r_plan;
  uint64_t len = zs_pick_len (t, ZV_MIN ((uint64_t) ZS_MAX_WRITE, pl->p_ws));
  uint64_t off = zs_pick_off (t, pl->p_ws, len), c0;
  bool fua = zs_rand (t, 100) < pl->p_fua_pct;
  enum zs_req req = zeros ? ZS_R_WRITE_ZEROS : ZS_R_WRITE;
  uint32_t i;
  int r;

  zs_rl_enter (t->t_idx, off, off + len);
  c0 = atomic_load (&m->m_cseq);
  i = zs_model_begin (m, t->t_idx, req, zeros ? ZS_K_ZEROS : ZS_K_DATA, off,
                      len, fua);
  if (i != 0) {
    zs_op_fill (&m->m_ops[i], t->t_buf, off, len);
    r = zvol_write (run->r_zv, t->t_buf, off, (uint32_t) len,
                    fua ? ZVOL_FUA : 0);
    if (r == 0 && fua)
      atomic_fetch_add (&run->r_st->st_fua, 1);
    zs_finish (t, i, req, r, zs_acked (run, fua), c0, t->t_buf);
  }
  zs_rl_exit (t->t_idx);
}

/* Trim, or zero (MAY_TRIM or not, FAST or not). */
static void
zs_do_free (zs_thr_t *t, enum zs_req req)
{
  zs_run_t *run = t->t_run;
  zs_model_t *m = run->r_m;
  const zs_plan_t *pl = &run->r_plan;
  uint64_t len = zs_pick_len (t, ZV_MIN ((uint64_t) ZS_MAX_FREE, pl->p_ws));
  uint64_t off = zs_pick_off (t, pl->p_ws, len), c0, moff = off, mlen = len;
  bool fua = zs_rand (t, 100) < pl->p_fua_pct;
  unsigned flags = fua ? ZVOL_FUA : 0;
  uint32_t i;
  int r;

  if (req == ZS_R_TRIM) {
    /* Only whole volume blocks change (the volume is a whole number of
     * them); the edges are left alone. */
    uint64_t b = ZV_P2ROUNDUP (off, run->r_vbs);
    uint64_t e = ZV_P2ALIGN (off + len, run->r_vbs);
    moff = b;
    mlen = e > b ? e - b : 0;
  }
  else if (req == ZS_R_ZERO)
    flags |= ZVOL_MAY_TRIM | (zs_rand (t, 4) == 0 ? ZVOL_FAST : 0);
  else if (req == ZS_R_ZERO_FAST)
    flags |= ZVOL_FAST;

  zs_rl_enter (t->t_idx, off, off + len);
  if (req == ZS_R_ZERO_FAST) {
    /* Without MAY_TRIM a fast zero is refused, and changes nothing. */
    r = zvol_zero (run->r_zv, off, len, flags);
    if (r == -ENOTSUP) {
      atomic_fetch_add (&run->r_st->st_enotsup, 1);
      atomic_fetch_add (&run->r_st->st_ops[req], 1);
    }
    else if (!(r == -EIO && zs_eio_ok (run)))
      zs_failf (run, "epoch %" PRIu64 ": a fast zero without MAY_TRIM at %"
                PRIu64 "+%" PRIu64 " returned %d, not ENOTSUP", run->r_epoch,
                off, len, r);
    zs_rl_exit (t->t_idx);
    return;
  }
  c0 = atomic_load (&m->m_cseq);
  i = zs_model_begin (m, t->t_idx, req, ZS_K_ZEROS, moff, mlen, fua);
  if (i != 0) {
    r = req == ZS_R_TRIM ? zvol_trim (run->r_zv, off, len, flags)
      : zvol_zero (run->r_zv, off, len, flags);
    if (r == 0 && fua)
      atomic_fetch_add (&run->r_st->st_fua, 1);
    memset (t->t_buf, 0, mlen);
    zs_finish (t, i, req, r, zs_acked (run, fua), c0, t->t_buf);
  }
  zs_rl_exit (t->t_idx);
}

/* Flush or txg sync: durable, everything completed before it started. */
static void
zs_do_flush (zs_thr_t *t, enum zs_req req)
{
  zs_run_t *run = t->t_run;
  zs_model_t *m = run->r_m;
  uint64_t c0 = atomic_load (&m->m_cseq);
  int r = req == ZS_R_SYNC ? zv_pool_sync (run->r_pool)
    : zvol_flush (run->r_zv);

  if (r == 0) {
    atomic_fetch_add (&run->r_st->st_ops[req], 1);
    if (req == ZS_R_SYNC || run->r_plan.p_sync != ZVOL_SYNC_DISABLED)
      zs_durable (m, c0);
    t->t_fails = 0;
  }
  else {
    t->t_fails++;
    if (!zs_error_ok (t, req, r))
      zs_failf (run, "epoch %" PRIu64 ": %s failed: %s with no fault "
                "injected and the power on", run->r_epoch,
                zs_req_name[req], strerror (-r));
  }
}

/* Say where a live read differs from the model. */
static void
zs_live_mismatch (zs_thr_t *t, const char *what, uint64_t off, uint64_t len,
                  uint64_t bad, uint8_t got)
{
  zs_run_t *run = t->t_run;
  char msg[4096];
  size_t at = zs_cat (msg, sizeof msg, 0, "MISMATCH in epoch %" PRIu64
                      " (%s): %s at %" PRIu64 "+%" PRIu64 ": byte %" PRIu64
                      " (volume block %" PRIu64 ") is 0x%02x, expected "
                      "0x%02x\n  the byte's history since the last check "
                      "(newest first):\n", run->r_epoch,
                      zs_ekind_name[run->r_plan.p_kind], what, off, len, bad,
                      bad / run->r_vbs, got, run->r_m->m_cur[bad]);

  zs_describe (run->r_m, bad, msg, sizeof msg, at);
  atomic_fetch_add (&run->r_fail->f_mismatches, 1);
  zs_failf (run, "%s", msg);
}

static void
zs_do_read (zs_thr_t *t)
{
  zs_run_t *run = t->t_run;
  zs_model_t *m = run->r_m;
  uint64_t len = zs_pick_len (t, ZV_MIN ((uint64_t) ZS_MAX_READ,
                                          run->r_plan.p_ws));
  uint64_t off = zs_pick_off (t, run->r_plan.p_ws, len);
  uint64_t rf = zs_read_faults (run);
  int r;

  zs_rl_enter (t->t_idx, off, off + len);
  r = zvol_read (run->r_zv, t->t_rbuf, off, (uint32_t) len);
  if (r < 0) {
    if (!zs_read_error_ok (run, r, rf))
      zs_failf (run, "epoch %" PRIu64 ": read at %" PRIu64 "+%" PRIu64
                " failed: %s, and no device read was failed meanwhile",
                run->r_epoch, off, len, strerror (-r));
  }
  else {
    for (uint64_t c = off / ZS_CELL; c <= (off + len - 1) / ZS_CELL; c++) {
      uint64_t a = ZV_MAX (off, c * ZS_CELL);
      uint64_t e = ZV_MIN (off + len, (c + 1) * ZS_CELL);

      if (zs_uncertain (m, c)
          || memcmp (t->t_rbuf + (a - off), m->m_cur + a, e - a) == 0)
        continue;
      while (t->t_rbuf[a - off] == m->m_cur[a])
        a++;
      zs_live_mismatch (t, "read", off, len, a, t->t_rbuf[a - off]);
      break;
    }
    atomic_fetch_add (&run->r_st->st_ops[ZS_R_READ], 1);
    atomic_fetch_add (&run->r_st->st_bytes_read, len);
    atomic_fetch_add (&run->r_st->st_live_checks, 1);
  }
  zs_rl_exit (t->t_idx);
}

static void
zs_do_extents (zs_thr_t *t)
{
  zs_run_t *run = t->t_run;
  uint64_t len = zs_pick_len (t, ZV_MIN ((uint64_t) ZS_MAX_FREE,
                                          run->r_plan.p_ws));
  uint64_t off = zs_pick_off (t, run->r_plan.p_ws, len);
  zs_walk_t w = { .w_m = run->r_m, .w_img = run->r_m->m_cur,
                  .w_live = true };
  uint64_t rf = zs_read_faults (run);
  int r;

  zs_rl_enter (t->t_idx, off, off + len);
  r = zvol_extents (run->r_zv, off, len, zs_walk_cb, &w);
  if (w.w_bad)
    zs_live_mismatch (t, "extents (a hole that is not zeros)", off, len,
                      w.w_bad - 1, run->r_m->m_cur[w.w_bad - 1]);
  else if (r < 0 && !zs_read_error_ok (run, r, rf))
    zs_failf (run, "epoch %" PRIu64 ": extents at %" PRIu64 "+%" PRIu64
              " failed: %s, and no device read was failed meanwhile",
              run->r_epoch, off, len, strerror (-r));
  else if (r == 0) {
    atomic_fetch_add (&run->r_st->st_ops[ZS_R_EXTENTS], 1);
    atomic_fetch_add (&run->r_st->st_live_checks, 1);
  }
  zs_rl_exit (t->t_idx);
}

static void *
zs_worker (void *arg)
{
  zs_thr_t *t = arg;
  zs_run_t *run = t->t_run;
  const zs_plan_t *pl = &run->r_plan;

  while (!atomic_load (&run->r_stop) && !atomic_load (&run->r_m->m_full)
         && zv_now_ns () < t->t_end_ns) {
    uint64_t x = zs_rand (t, pl->p_wsum);
    unsigned req = 0;

    /* A suspended pool fails everything at once: no point spinning. */
    if (t->t_fails >= 64)
      break;
    while (x >= pl->p_w[req])
      x -= pl->p_w[req++];
    switch ((enum zs_req) req) {
    case ZS_R_WRITE: zs_do_write (t, false); break;
    case ZS_R_WRITE_ZEROS: zs_do_write (t, true); break;
    case ZS_R_ZERO: case ZS_R_ZERO_ALLOC: case ZS_R_ZERO_FAST: case ZS_R_TRIM:
      zs_do_free (t, (enum zs_req) req);
      break;
    case ZS_R_FLUSH: case ZS_R_SYNC: zs_do_flush (t, (enum zs_req) req); break;
    case ZS_R_READ: zs_do_read (t); break;
    case ZS_R_EXTENTS: zs_do_extents (t); break;
    case ZS_R_N: abort ();
    }
  }
  atomic_fetch_sub (&run->r_live, 1);
  return NULL;
}

static zs_thr_t *
zs_threads_start (zs_run_t *run, unsigned n, uint64_t end_ns)
{
  zs_thr_t *thr = calloc (n, sizeof *thr);

  if (thr == NULL)
    abort ();
  atomic_store (&run->r_live, n);
  for (unsigned i = 0; i < n; i++) {
    thr[i].t_run = run;
    thr[i].t_idx = i;
    thr[i].t_rnd = tl_mix (run->r_o.o_seed ^ tl_mix (run->r_epoch * 131 + i))
      | 1;
    thr[i].t_buf = malloc (ZS_MAX_FREE);
    thr[i].t_rbuf = malloc (ZS_MAX_FREE);
    thr[i].t_end_ns = end_ns;
    if (thr[i].t_buf == NULL || thr[i].t_rbuf == NULL
        || pthread_create (&thr[i].t_th, NULL, zs_worker, &thr[i]) != 0)
      abort ();
  }
  return thr;
}

static void
zs_threads_join (zs_thr_t *thr, unsigned n)
{
  for (unsigned i = 0; i < n; i++) {
    pthread_join (thr[i].t_th, NULL);
    free (thr[i].t_buf);
    free (thr[i].t_rbuf);
  }
  free (thr);
}

/* ---- plans ---- */

static uint64_t
zs_pick (uint64_t *rnd, const uint64_t *v, unsigned n)
{
  return v[tl_rand (rnd) % n];
}

/* The epoch's plan, from the seed and the epoch number only. */
static void
zs_plan_make (zs_run_t *run, zs_plan_t *p)
{
  uint64_t rnd = tl_mix (run->r_o.o_seed ^ tl_mix (run->r_epoch + 1)) | 1;
  uint64_t vs = run->r_o.o_volsize;
  static const uint64_t timeouts[] = { 5, 20, 100, 500, 2000, 5000 };
  static const uint64_t dirty[] = { 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB };
  static const uint64_t everies[] = { 8, 50, 300, 2000 };
  static const uint64_t chunks[] = { 4 * KiB, 64 * KiB, 1 * MiB, 1 * MiB };
  static const uint64_t shifts[] = { 3, 6, 18, 18 };
  static const uint64_t copied[] = { 0, 4 * KiB, 7680, 7680, 64 * KiB };
  static const uint64_t imm[] = { 4 * KiB, 32 * KiB, 32 * KiB, 256 * KiB };
  static const uint64_t aggr[] = { 4 * KiB, 128 * KiB, 1 * MiB, 1 * MiB };
  static const uint64_t rings[] = { 2, 64, 64 };
  unsigned k;
#define ZS_R(n) (tl_rand (&rnd) % (n))

  memset (p, 0, sizeof *p);
  k = (unsigned) ZS_R (100);
  p->p_kind = k < 28 ? ZS_E_CLEAN : k < 58 ? ZS_E_CUT : k < 82 ? ZS_E_FAULT
    : ZS_E_KILL;
  if (p->p_kind == ZS_E_KILL && run->r_o.o_no_kill)
    p->p_kind = ZS_E_CUT;
  p->p_ms = 300 + (unsigned) ZS_R (3700);
  p->p_threads = 1 + (unsigned) ZS_R (run->r_o.o_threads);
  k = (unsigned) ZS_R (100);
  p->p_sync = k < 76 ? ZVOL_SYNC_STANDARD : k < 94 ? ZVOL_SYNC_ALWAYS
    : ZVOL_SYNC_DISABLED;
  p->p_flush_txg = ZS_R (16) == 0;
  p->p_logbias = ZS_R (3) == 0 ? ZVOL_LOGBIAS_THROUGHPUT
    : ZVOL_LOGBIAS_LATENCY;
  p->p_txg_timeout_ms = zs_pick (&rnd, timeouts, 6);
  p->p_dirty_max = zs_pick (&rnd, dirty, 4);
  p->p_cache_size = (8 + ZS_R (25)) * MiB;
  p->p_fill = ZS_R (100) < 15;
  p->p_ws = p->p_fill ? vs
    : ZV_P2ALIGN (4 * MiB + ZS_R (vs / 2 - 4 * MiB), ZS_CELL);
  p->p_w[ZS_R_WRITE] = p->p_fill ? 80 : 25 + (unsigned) ZS_R (40);
  p->p_w[ZS_R_WRITE_ZEROS] = (unsigned) ZS_R (3);
  p->p_w[ZS_R_ZERO] = p->p_fill ? 2 : (unsigned) ZS_R (8);
  p->p_w[ZS_R_ZERO_ALLOC] = (unsigned) ZS_R (4);
  p->p_w[ZS_R_ZERO_FAST] = (unsigned) ZS_R (2);
  p->p_w[ZS_R_TRIM] = p->p_fill ? 2 : (unsigned) ZS_R (10);
  p->p_w[ZS_R_FLUSH] = (unsigned) ZS_R (10);
  p->p_w[ZS_R_SYNC] = (unsigned) ZS_R (3);
  p->p_w[ZS_R_READ] = 5 + (unsigned) ZS_R (25);
  p->p_w[ZS_R_EXTENTS] = (unsigned) ZS_R (4);
  for (unsigned i = 0; i < ZS_R_N; i++)
    p->p_wsum += p->p_w[i];
  p->p_fua_pct = ZS_R (4) == 0 ? 0 : (unsigned) ZS_R (40);

  if (p->p_kind == ZS_E_CUT) {
    if (ZS_R (4) == 0)
      p->p_cut_writes = 1 + ZS_R (4000);
    else
      p->p_cut_ms = 20 + (unsigned) ZS_R (p->p_ms - 20);
  }
  if (p->p_kind == ZS_E_FAULT) {
    p->p_fault_ms = 1 + (unsigned) ZS_R (p->p_ms / 2);
    while (p->p_fault_every[1] + p->p_fault_every[2] + p->p_fault_every[3]
           == 0)
      for (unsigned op = 1; op <= 3; op++)
        /* Read faults leave the pool running (writes and flushes fail
         * a txg sync and suspend it): more of them. */
        p->p_fault_every[op] = ZS_R (10) >= (op == ZV_DEV_READ ? 7 : 4) ? 0
          : (uint32_t) zs_pick (&rnd, everies, 4);
    p->p_fault_disarm = ZS_R (2) == 0;
    if (ZS_R (3) == 0)
      p->p_cut_ms = p->p_fault_ms + (unsigned) ZS_R (p->p_ms - p->p_fault_ms);
  }
  if (p->p_kind == ZS_E_KILL) {
    p->p_kill_in_import = ZS_R (10) == 0;
    p->p_kill_ms = p->p_kill_in_import ? (unsigned) ZS_R (40)
      : 50 + (unsigned) ZS_R (p->p_ms);
  }

  p->p_zvol_chunk = zs_pick (&rnd, chunks, 4);
  p->p_itx_shift = zs_pick (&rnd, shifts, 4);
  p->p_max_copied = zs_pick (&rnd, copied, 5);
  p->p_imm_sz = zs_pick (&rnd, imm, 4);
  p->p_aggregate = zs_pick (&rnd, aggr, 4);
  p->p_ring_entries = zs_pick (&rnd, rings, 3);
#undef ZS_R
}

static void
zs_tunable (const char *name, uint64_t v)
{
  char val[32], err[256];

  snprintf (val, sizeof val, "%" PRIu64, v);
  if (zvol_tunable_set (name, val, err, sizeof err) != 0) {
    fprintf (stderr, "zvstress: tunable %s=%s: %s\n", name, val, err);
    exit (1);
  }
}

static void
zs_tunables (const zs_plan_t *p)
{
  zs_tunable ("zvol_chunk", p->p_zvol_chunk);
  zs_tunable ("zil_itx_ring_shift", p->p_itx_shift);
  zs_tunable ("zil_max_copied", p->p_max_copied);
  zs_tunable ("zil_immediate_write_sz", p->p_imm_sz);
  zs_tunable ("zio_aggregate_max", p->p_aggregate);
  zs_tunable ("dev_ring_entries", p->p_ring_entries);
}

static void
zs_plan_print (const zs_run_t *run, const zs_plan_t *p, FILE *fp)
{
  fprintf (fp, "epoch %" PRIu64 ": %s, %u ms, %u thread(s), sync=%s%s, "
           "logbias=%s, txg_timeout %" PRIu64 " ms, dirty_max %" PRIu64
           "M, working set %" PRIu64 "M%s, FUA %u%%", run->r_epoch,
           zs_ekind_name[p->p_kind], p->p_ms, p->p_threads,
           p->p_sync == ZVOL_SYNC_ALWAYS ? "always"
           : p->p_sync == ZVOL_SYNC_DISABLED ? "disabled" : "standard",
           p->p_flush_txg ? " (flush=txg)" : "",
           p->p_logbias ? "throughput" : "latency", p->p_txg_timeout_ms,
           (uint64_t) (p->p_dirty_max / MiB), (uint64_t) (p->p_ws / MiB), p->p_fill ? " (fill)" : "",
           p->p_fua_pct);
  if (p->p_cut_ms)
    fprintf (fp, ", cut at %u ms", p->p_cut_ms);
  if (p->p_cut_writes)
    fprintf (fp, ", cut at device write %" PRIu64, p->p_cut_writes);
  if (p->p_fault_ms)
    fprintf (fp, ", faults from %u ms (1 in %u/%u/%u reads/writes/flushes)",
             p->p_fault_ms, p->p_fault_every[1], p->p_fault_every[2],
             p->p_fault_every[3]);
  if (p->p_kind == ZS_E_KILL)
    fprintf (fp, ", kill at %u ms%s", p->p_kill_ms,
             p->p_kill_in_import ? " (in the import)" : "");
  fprintf (fp, "; cache %" PRIu64 "M, zvol_chunk %" PRIu64
           ", zil_itx_ring_shift %" PRIu64 ", zil_max_copied %" PRIu64
           ", zil_immediate_write_sz %" PRIu64 ", zio_aggregate_max %" PRIu64
           ", dev_ring_entries %" PRIu64 "\n", (uint64_t) (p->p_cache_size / MiB),
           p->p_zvol_chunk, p->p_itx_shift, p->p_max_copied, p->p_imm_sz,
           p->p_aggregate, p->p_ring_entries);
}

/* ---- the pool ---- */

/* A new pool layout; its files are made afresh and the model zeroed. */
static void
zs_series_new (zs_run_t *run)
{
  uint64_t rnd = tl_mix (run->r_o.o_seed ^ 0x5e5e5e5eull
                         ^ tl_mix (run->r_series)) | 1;
  static const uint64_t vbs[] = { 4 * KiB, 8 * KiB, 16 * KiB, 16 * KiB,
                                  16 * KiB, 32 * KiB, 64 * KiB, 128 * KiB };

  run->r_series++;
  run->r_series_left = 6 + (unsigned) (tl_rand (&rnd) % 15);
  run->r_ndevs = tl_rand (&rnd) % 5 == 0 ? 2 : 1;
  run->r_has_logdev = tl_rand (&rnd) % 5 == 0;
  run->r_vbs = (uint32_t) zs_pick (&rnd, vbs, 8);
  run->r_zil_size = run->r_has_logdev ? 0 : (1 + tl_rand (&rnd) % 4) * MiB;
  for (unsigned d = 0; d < run->r_ndevs; d++) {
    char name[32];
    snprintf (name, sizeof name, "pool-%u.img", d);
    tl_path (run->r_dev[d], sizeof run->r_dev[d], name);
    if (tl_sparse_file (run->r_dev[d], ZS_DATA_SPACE / run->r_ndevs) < 0) {
      perror (run->r_dev[d]);
      exit (1);
    }
  }
  tl_path (run->r_logdev, sizeof run->r_logdev, "log.img");
  unlink (run->r_logdev);
  if (run->r_has_logdev && tl_sparse_file (run->r_logdev, ZS_LOGDEV_SIZE) < 0) {
    perror (run->r_logdev);
    exit (1);
  }
  run->r_create = true;
  zs_model_reset (run->r_m, NULL);
  if (run->r_o.o_verbose)
    fprintf (stderr, "series %" PRIu64 ": %u device(s), volblocksize %uK, "
             "%s\n", run->r_series, run->r_ndevs, run->r_vbs / 1024,
             run->r_has_logdev ? "a log device" : "a log ring in the pool");
}

/* Create or import the pool and open its volume (which replays the log);
 * a killed child's io_uring may keep the devices busy a moment (EBUSY is
 * retried for a few seconds). */
static int
zs_open (zs_run_t *run)
{
  const zs_plan_t *p = &run->r_plan;
  zvol_pool_config_t pc;
  zvol_pool_t *pool = NULL;
  int r;

  zvol_pool_config_init (&pc);
  for (unsigned d = 0; d < run->r_ndevs; d++)
    pc.pc_devices[d] = run->r_dev[d];
  pc.pc_ndevices = run->r_ndevs;
  pc.pc_create = run->r_create;
  pc.pc_volsize = run->r_o.o_volsize;
  pc.pc_volblocksize = run->r_vbs;
  pc.pc_sparse = true;
  pc.pc_zil_size = run->r_create ? run->r_zil_size : 0;
  pc.pc_logdevice = run->r_has_logdev ? run->r_logdev : NULL;
  pc.pc_cache_size = p->p_cache_size;
  pc.pc_txg.tt_timeout_ms = p->p_txg_timeout_ms;
  pc.pc_txg.tt_dirty_max = p->p_dirty_max;
  zvol_config_init (&tl_volcfg);
  tl_volcfg.vc_sync = p->p_sync;
  tl_volcfg.vc_logbias = p->p_logbias;
  tl_volcfg.vc_flush_by_txg = p->p_flush_txg;

  r = tl_pool_open_retry_ex (&pc, &pool, NULL, true);
  if (r < 0)
    return r;
  if (run->r_create)
    run->r_st->st_creates++;
  else
    run->r_st->st_imports++;
  if (tl_log_has ("intent log: replayed"))
    run->r_st->st_replays++;
  run->r_create = false;
  run->r_pool = pool;
  run->r_zv = tl_vol (pool);
  return 0;
}

/* Export; 0 or the first error. */
static int
zs_close (zs_run_t *run)
{
  int r = tl_pool_close (run->r_pool);

  run->r_pool = NULL;
  run->r_zv = NULL;
  return r;
}

/* Before the load: trim what lies past the working set, so the pool has
 * room again after a fill. */
static void
zs_prologue (zs_run_t *run)
{
  zs_model_t *m = run->r_m;
  uint64_t ws = run->r_plan.p_ws, vs = m->m_volsize;
  uint64_t b = ZV_P2ROUNDUP (ws, run->r_vbs);
  zs_thr_t ctl = { .t_run = run, .t_idx = ZS_CTL };
  uint32_t i;
  int r;

  if (b >= vs || zv_is_zero (m->m_cur + b, vs - b))
    return;
  ctl.t_buf = calloc (1, vs - b);
  ctl.t_rbuf = malloc (vs - b);
  if (ctl.t_buf == NULL || ctl.t_rbuf == NULL)
    abort ();
  i = zs_model_begin (m, ZS_CTL, ZS_R_TRIM, ZS_K_ZEROS, b, vs - b, false);
  if (i != 0) {
    r = zvol_trim (run->r_zv, b, vs - b, 0);
    zs_finish (&ctl, i, ZS_R_TRIM, r, false, 0, ctl.t_buf);
  }
  free (ctl.t_buf);
  free (ctl.t_rbuf);
}

/* ---- epochs ---- */

static void
zs_sleep_ms (unsigned ms)
{
  struct timespec ts = { ms / 1000, (long) (ms % 1000) * 1000000 };

  while (nanosleep (&ts, &ts) < 0 && errno == EINTR)
    ;
}

/* The alarm's message, made before each epoch (the handler only writes). */
static char zs_alarm_msg[512];

static void
zs_alarm (int sig)
{
  ssize_t n;

  (void) sig;
  n = write (2, zs_alarm_msg, strlen (zs_alarm_msg));
  (void) n;
  _exit (2);
}

static void
zs_alarm_arm (zs_run_t *run, unsigned seconds)
{
  snprintf (zs_alarm_msg, sizeof zs_alarm_msg, "zvstress: FAILED: epoch %"
            PRIu64 " (%s) did not end within %u s: a request, the export "
            "or the import hangs; seed %" PRIu64 ", replay with: zvstress "
            "--seed %" PRIu64 " --epochs %" PRIu64 "; files kept in %s\n"
            "%" PRIu64 " passed, 1 failed\n", run->r_epoch,
            zs_ekind_name[run->r_plan.p_kind], seconds, run->r_o.o_seed,
            run->r_o.o_seed, run->r_epoch + 1, tl_dir,
            run->r_st->st_checks_exact + run->r_st->st_checks_crash);
  alarm (seconds);
}

/*
 * An epoch in this process: import (under the simulator if the plan may
 * cut), check what the previous one left, load, end as planned, export.
 * *check becomes what the next import is checked against.
 */
static void
zs_epoch_local (zs_run_t *run, enum zs_check *check)
{
  const zs_plan_t *p = &run->r_plan;
  zs_stats_t *st = run->r_st;
  pc_t *pc = NULL;
  zs_thr_t *thr;
  uint64_t t0;
  unsigned cut_at = 0;
  bool cut = false;
  int r;

  /* A cut in a create would leave a half-made pool that create refuses
   * (it is not a crash of a pool): a create is cut by time only. */
  if (run->r_create && run->r_plan.p_cut_writes) {
    run->r_plan.p_cut_writes = 0;
    run->r_plan.p_cut_ms = 20 + p->p_ms / 2;
  }
  if (p->p_cut_ms || p->p_cut_writes) {
    pc = pc_new (tl_mix (run->r_o.o_seed ^ (run->r_epoch << 20)) | 1,
                 PC_RANDOM);
    if (p->p_cut_writes)
      pc_cut_after_writes (pc, p->p_cut_writes);
    pc_set_fault (pc, zs_fault, run);
    pc_watch (pc, true);
  }
  run->r_pc = pc;
  atomic_store (&run->r_faults_armed, false);
  atomic_store (&run->r_eio_ok, false);
  atomic_store (&run->r_limit, false);
  atomic_store (&run->r_stop, false);

  r = zs_open (run);
  if (r < 0 || zs_cut_now (run)) {
    if (r == 0)
      (void) zs_close (run);
    if (pc != NULL && pc_is_cut (pc))
      ;
    else if (!zs_limit_replay_enospc (run, r, check))
      zs_failf (run, "epoch %" PRIu64 ": the import failed: %s (the "
                "previous epoch ended: %s)", run->r_epoch, strerror (-r),
                run->r_prev_end);
    if (pc != NULL && pc_is_cut (pc)) {
      st->st_cuts++;
      st->st_cuts_in_import++;
      run->r_prev_end = "a power cut in the import";
    }
    if (pc) {
      pc_watch (pc, false);
      pc_settle (pc);
      pc_free (pc);
      run->r_pc = NULL;
    }
    return;
  }
  if (*check != ZS_C_NONE && !zs_verify (run, *check)) {
    (void) zs_close (run);
    if (pc) {
      pc_watch (pc, false);
      pc_settle (pc);
      pc_free (pc);
      run->r_pc = NULL;
    }
    return;
  }
  run->r_m->m_epoch = run->r_epoch + 1;
  if (zvol_pool_start (run->r_pool) != 0)
    zs_failf (run, "epoch %" PRIu64 ": the pool's threads do not start",
              run->r_epoch);
  if (pc == NULL)
    zs_fault_attach (run);
  zs_prologue (run);

  t0 = zv_now_ns ();
  thr = zs_threads_start (run, p->p_threads, t0 + p->p_ms * 1000000ull
                          + 60000000000ull);
  for (;;) {
    unsigned el = (unsigned) ((zv_now_ns () - t0) / 1000000);

    if (p->p_fault_ms && el >= p->p_fault_ms)
      atomic_store (&run->r_faults_armed, true);
    if (pc && !cut && p->p_cut_ms && el >= p->p_cut_ms)
      pc_cut (pc);
    if (!cut && pc && pc_is_cut (pc)) {
      cut = true;
      cut_at = el;
    }
    /* After a cut, the load runs on a little, into the errors. */
    if (el >= p->p_ms || zs_failed (run) || atomic_load (&run->r_live) == 0
        || (cut && el >= cut_at + 50))
      break;
    zs_sleep_ms (5);
  }
  atomic_store (&run->r_stop, true);
  zs_threads_join (thr, p->p_threads);
  if (p->p_fault_disarm)
    atomic_store (&run->r_faults_armed, false);
  (void) zs_limit_sync_enospc (run);
  r = zs_close (run);
  if (r == -ENOSPC)
    /* (The export's own sync ran out of space.) */
    zs_limit_hit (run);
  cut = pc && pc_is_cut (pc);
  atomic_store (&run->r_faults_armed, false);
  if (pc) {
    pc_stats_t ps;

    pc_watch (pc, false);
    pc_settle (pc);
    pc_get_stats (pc, &ps);
    pc_free (pc);
    run->r_pc = NULL;
    if (cut) {
      st->st_cuts++;
      st->st_cut_sectors += ps.ps_cut_sectors;
      st->st_cut_lost += ps.ps_cut_old + ps.ps_cut_other;
    }
    if (run->r_o.o_verbose)
      fprintf (stderr, "  cut %s: %" PRIu64 " device writes seen, %" PRIu64
               " sectors pending at the cut, %" PRIu64 " rolled back, %"
               PRIu64 " torn to an older write\n", cut ? "yes" : "no",
               ps.ps_writes, ps.ps_cut_sectors, ps.ps_cut_old,
               ps.ps_cut_other);
  }
  if (r != 0 && !cut && !atomic_load (&run->r_eio_ok)
      && !(atomic_load (&run->r_limit) && !run->r_o.o_strict))
    zs_failf (run, "epoch %" PRIu64 ": the export failed: %s, with no fault "
              "injected and the power on", run->r_epoch, strerror (-r));
  if (r != 0)
    st->st_export_failed++;
  *check = r == 0 && !cut ? ZS_C_EXACT : ZS_C_CRASH;
  run->r_prev_end = cut ? "a power cut"
    : r != 0 ? "device faults, then an export that failed"
    : atomic_load (&run->r_eio_ok) ? "device faults, then a clean export"
    : "a clean export";
}

/* The child of a kill epoch: import, say so, load until killed. */
static void *
zs_kill_child (void *arg)
{
  zs_run_t *run = arg;
  const zs_plan_t *p = &run->r_plan;
  char c = 'r';
  zs_thr_t *thr;

  if (zs_open (run) < 0 || zvol_pool_start (run->r_pool) != 0)
    _exit (9);
  if (write (run->r_ready_fd, &c, 1) != 1)
    _exit (10);
  run->r_m->m_epoch = run->r_epoch + 1;
  zs_prologue (run);
  thr = zs_threads_start (run, p->p_threads, zv_now_ns ()
                          + (p->p_ms + 60000ull) * 1000000ull);
  zs_threads_join (thr, p->p_threads);
  /* Done before the kill (the model is full, or a failure): wait for it
   * all the same, as a crash cannot be told to wait. */
  for (;;)
    pause ();
  return NULL;
}

static void
zs_epoch_kill (zs_run_t *run, enum zs_check *check)
{
  const zs_plan_t *p = &run->r_plan;
  int fds[2], status = 0;
  pid_t pid;
  char c;

  /* The child starts from a checked pool, exported cleanly. */
  if (*check != ZS_C_NONE || run->r_create) {
    int r = zs_open (run);

    if (r < 0) {
      if (!zs_limit_replay_enospc (run, r, check))
        zs_failf (run, "epoch %" PRIu64 ": the import failed: %s (the "
                  "previous epoch ended: %s)", run->r_epoch, strerror (-r),
                  run->r_prev_end);
      return;
    }
    if (*check != ZS_C_NONE && !zs_verify (run, *check)) {
      (void) zs_close (run);
      return;
    }
    if (zs_close (run) != 0) {
      zs_failf (run, "epoch %" PRIu64 ": the export after the check "
                "failed", run->r_epoch);
      return;
    }
    *check = ZS_C_EXACT;
  }
  if (pipe (fds) < 0)
    abort ();
  run->r_ready_fd = fds[1];
  run->r_pc = NULL;
  atomic_store (&run->r_stop, false);
  atomic_store (&run->r_faults_armed, false);
  atomic_store (&run->r_eio_ok, false);
  pid = tl_fork_thread (zs_kill_child, run, fds);
  if (pid < 0)
    abort ();
  if (!p->p_kill_in_import) {
    struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
    if (poll (&pfd, 1, 60000 * ZS_SLOW) != 1 || read (fds[0], &c, 1) != 1) {
      kill (pid, SIGKILL);
      waitpid (pid, &status, 0);
      close (fds[0]);
      if (!zs_failed (run))
        zs_failf (run, "epoch %" PRIu64 ": the child did not import the "
                  "pool (exit status %d)", run->r_epoch,
                  WIFEXITED (status) ? WEXITSTATUS (status) : -1);
      return;
    }
  }
  zs_sleep_ms (p->p_kill_ms);
  kill (pid, SIGKILL);
  waitpid (pid, &status, 0);
  close (fds[0]);
  if (!WIFSIGNALED (status) || WTERMSIG (status) != SIGKILL) {
    if (!zs_failed (run))
      zs_failf (run, "epoch %" PRIu64 ": the child ended before the kill "
                "(status %#x)", run->r_epoch, (unsigned) status);
    return;
  }
  run->r_st->st_kills++;
  if (p->p_kill_in_import)
    run->r_st->st_kills_in_import++;
  *check = ZS_C_CRASH;
  run->r_prev_end = p->p_kill_in_import ? "kill -9 of the child (maybe in "
    "its import)" : "kill -9 of the child";
}

/* ---- main ---- */

static void
zs_usage (FILE *fp)
{
  fprintf (fp,
           "usage: zvstress [--seed N] [--time SECONDS] [--epochs N] "
           "[--threads N]\n"
           "                [--volsize SIZE] [--no-kill] [--keep] "
           "[--verbose] [--strict]\n"
           "Randomized stress of the engine against a shadow model "
           "(tests/stress/zvstress.c).\n"
           "  --seed N      the run's seed (default: from the clock)\n"
           "  --time S      stop starting epochs after S seconds (default "
           "40; 0: no bound)\n"
           "  --epochs N    at most N epochs (without --time: no time "
           "bound)\n"
           "  --threads N   at most N load threads per epoch (default 4, "
           "at most 16)\n"
           "  --volsize SZ  the thin volume (default 64M; the pool has %lluM)\n"
           "  --no-kill     no kill -9 epochs (no fork)\n"
           "  --keep        keep the scratch directory after a pass\n"
           "  --verbose     print each epoch's plan\n"
           "  --strict      the known limits of a full pool (docs/design.md) "
           "fail the run\n",
           (unsigned long long) (ZS_DATA_SPACE / MiB));
}

static uint64_t
zs_parse_size (const char *s)
{
  char *end;
  uint64_t v = strtoull (s, &end, 0);

  switch (*end) {
  case 'K': case 'k': v <<= 10; end++; break;
  case 'M': case 'm': v <<= 20; end++; break;
  case 'G': case 'g': v <<= 30; end++; break;
  default: break;
  }
  if (*end != '\0' || v == 0) {
    fprintf (stderr, "zvstress: bad size '%s'\n", s);
    exit (1);
  }
  return v;
}

static void
zs_parse (int argc, char **argv, zs_opts_t *o)
{
  static const struct option opts[] = {
    { "seed", required_argument, NULL, 's' },
    { "time", required_argument, NULL, 't' },
    { "epochs", required_argument, NULL, 'e' },
    { "threads", required_argument, NULL, 'j' },
    { "volsize", required_argument, NULL, 'v' },
    { "no-kill", no_argument, NULL, 'K' },
    { "keep", no_argument, NULL, 'k' },
    { "verbose", no_argument, NULL, 'V' },
    { "strict", no_argument, NULL, 'S' },
    { "help", no_argument, NULL, 'h' },
    { NULL, 0, NULL, 0 },
  };
  bool time_given = false;
  int c;

  memset (o, 0, sizeof *o);
  o->o_time = 40;
  o->o_threads = 4;
  o->o_volsize = 64 * MiB;
  o->o_seed = zv_now_ns () ^ ((uint64_t) getpid () << 32);
  while ((c = getopt_long (argc, argv, "", opts, NULL)) != -1)
    switch (c) {
    case 's': o->o_seed = strtoull (optarg, NULL, 0); break;
    case 't': o->o_time = strtod (optarg, NULL); time_given = true; break;
    case 'e': o->o_epochs = (unsigned) strtoul (optarg, NULL, 0); break;
    case 'j': o->o_threads = (unsigned) strtoul (optarg, NULL, 0); break;
    case 'v': o->o_volsize = zs_parse_size (optarg); break;
    case 'K': o->o_no_kill = true; break;
    case 'k': o->o_keep = true; break;
    case 'V': o->o_verbose = true; break;
    case 'S': o->o_strict = true; break;
    case 'h': zs_usage (stdout); exit (0);
    default: zs_usage (stderr); exit (1);
    }
  if (o->o_epochs && !time_given)
    o->o_time = 0;               /* a replay runs all its epochs */
  if (optind < argc || o->o_threads < 1 || o->o_threads > ZS_MAX_THREADS
      || o->o_volsize % (128 * KiB) != 0 || o->o_volsize < 16 * MiB) {
    fprintf (stderr, "zvstress: bad arguments (the volume size must be a "
             "multiple of 128K, at least 16M)\n");
    zs_usage (stderr);
    exit (1);
  }
  if (o->o_seed == 0)
    o->o_seed = 1;
}

/* The options that replay this run, for messages. */
static void
zs_replay_args (const zs_run_t *run, char *buf, size_t len, uint64_t epochs)
{
  const zs_opts_t *o = &run->r_o;
  size_t at = zs_cat (buf, len, 0, "zvstress --seed %" PRIu64, o->o_seed);

  if (epochs || o->o_epochs)
    at = zs_cat (buf, len, at, " --epochs %" PRIu64,
                 epochs ? epochs : o->o_epochs);
  else
    at = zs_cat (buf, len, at, " --time %g", o->o_time);
  if (o->o_threads != 4)
    at = zs_cat (buf, len, at, " --threads %u", o->o_threads);
  if (o->o_volsize != 64 * MiB)
    at = zs_cat (buf, len, at, " --volsize %" PRIu64 "M",
                 (uint64_t) (o->o_volsize / MiB));
  if (o->o_no_kill)
    (void) zs_cat (buf, len, at, " --no-kill");
}

static void
zs_summary (const zs_run_t *run, double secs)
{
  const zs_stats_t *st = run->r_st;
  uint64_t ops = 0;

  for (unsigned i = 0; i < ZS_R_N; i++)
    ops += st->st_ops[i];
  printf ("zvstress: %" PRIu64 " epochs in %.0f s (clean %" PRIu64 ", cut %"
          PRIu64 ", fault %" PRIu64 ", kill %" PRIu64 "), %" PRIu64
          " pool(s) created\n", run->r_epoch, secs, st->st_epochs[ZS_E_CLEAN],
          st->st_epochs[ZS_E_CUT], st->st_epochs[ZS_E_FAULT],
          st->st_epochs[ZS_E_KILL], st->st_creates);
  printf ("zvstress: %" PRIu64 " requests done:", ops);
  for (unsigned i = 0; i < ZS_R_N; i++)
    printf (" %s %" PRIu64 "%s", zs_req_name[i], (uint64_t) st->st_ops[i],
            i + 1 < ZS_R_N ? "," : "");
  printf ("; %" PRIu64 " with FUA; %.1f GiB written, %.1f GiB read\n",
          (uint64_t) st->st_fua, (double) st->st_bytes_written / GiB,
          (double) st->st_bytes_read / GiB);
  printf ("zvstress: errors returned (allowed): ENOSPC %" PRIu64 ", EIO %"
          PRIu64 ", ENOTSUP %" PRIu64 " (fast zeroes); %" PRIu64 " failed "
          "requests read back\n", (uint64_t) st->st_enospc,
          (uint64_t) st->st_eio, (uint64_t) st->st_enotsup,
          (uint64_t) st->st_resolved);
  printf ("zvstress: faults injected: %" PRIu64 " device reads, %" PRIu64
          " writes, %" PRIu64 " flushes; %" PRIu64 " power cuts (%" PRIu64
          " in an import; %" PRIu64 " sectors pending, %" PRIu64 " of them "
          "lost or torn); %" PRIu64 " kills (%" PRIu64 " in an import); %"
          PRIu64 " exports failed\n", (uint64_t) st->st_faults[ZV_DEV_READ],
          (uint64_t) st->st_faults[ZV_DEV_WRITE],
          (uint64_t) st->st_faults[ZV_DEV_FLUSH], st->st_cuts,
          st->st_cuts_in_import, st->st_cut_sectors, st->st_cut_lost,
          st->st_kills, st->st_kills_in_import, st->st_export_failed);
  printf ("zvstress: known limits of a full pool (docs/design.md): %" PRIu64
          " txg syncs out of space, %" PRIu64 " log replays out of space at "
          "import\n", (uint64_t) st->st_limit_sync_enospc,
          st->st_limit_replay_enospc);
  printf ("zvstress: %" PRIu64 " imports (%" PRIu64 " replayed the intent "
          "log); %" PRIu64 " checks of the whole volume (%" PRIu64 " exact, %"
          PRIu64 " after a crash, %.1f GiB compared); %" PRIu64 " live reads "
          "and extent walks compared; mismatches: %d\n", st->st_imports,
          st->st_replays, st->st_checks_exact + st->st_checks_crash,
          st->st_checks_exact, st->st_checks_crash,
          (double) st->st_bytes_checked / GiB,
          (uint64_t) st->st_live_checks,
          atomic_load (&run->r_fail->f_mismatches));
}

int
main (int argc, char **argv)
{
  zs_run_t *run = &zs_run;
  enum zs_check check = ZS_C_NONE;
  uint64_t t0 = zv_now_ns();
  char replay[256];
  bool done = false;

  zs_parse (argc, argv, &run->r_o);
  setvbuf (stdout, NULL, _IOLBF, 0);
  zs_model_create (run);
  zs_replay_args (run, replay, sizeof replay, 0);
  printf ("zvstress: seed %" PRIu64 ", replay with: %s\n", run->r_o.o_seed,
          replay);
  if (run->r_o.o_time > 0)
    run->r_deadline_ns = t0 + (uint64_t) (run->r_o.o_time * 1e9);
  if (tl_dir_create ("stress") < 0) {
    perror ("zvstress: mkdtemp");
    return 1;
  }
  printf ("zvstress: scratch directory %s (kept if the run fails)\n", tl_dir);
  zv_set_log (tl_log_hook);
  tl_log_reset (true);
  signal (SIGALRM, zs_alarm);
  run->r_prev_end = "nothing (a new pool)";

  while (!done && !zs_failed (run)) {
    zs_plan_t *p = &run->r_plan;

    if (run->r_series_left == 0) {
      /* The last epoch's result is checked before the pool goes. */
      if (check != ZS_C_NONE) {
        int r;

        zs_plan_make (run, p);
        r = zs_open (run);
        if (r < 0) {
          if (!zs_limit_replay_enospc (run, r, &check))
            zs_failf (run, "epoch %" PRIu64 ": the import failed: %s (the "
                      "previous epoch ended: %s)", run->r_epoch,
                      strerror (-r), run->r_prev_end);
        }
        else {
          if (zs_verify (run, check))
            check = ZS_C_NONE;
          (void) zs_close (run);
        }
        if (zs_failed (run))
          break;
      }
      zs_series_new (run);
      check = ZS_C_NONE;
    }
    run->r_series_left--;
    zs_plan_make (run, p);
    if (run->r_o.o_verbose)
      zs_plan_print (run, p, stderr);
    zs_tunables (p);
    zs_alarm_arm (run, (p->p_ms / 1000 + 120) * ZS_SLOW);
    run->r_st->st_epochs[p->p_kind]++;
    if (p->p_kind == ZS_E_KILL)
      zs_epoch_kill (run, &check);
    else
      zs_epoch_local (run, &check);
    alarm (0);
    if (run->r_o.o_verbose) {
      uint64_t ops = 0;
      for (unsigned i = 0; i < ZS_R_N; i++)
        ops += run->r_st->st_ops[i];
      fprintf (stderr, "  ended: %s; %" PRIu64 " requests so far\n",
               run->r_prev_end, ops);
    }
    run->r_epoch++;
    if ((run->r_o.o_epochs && run->r_epoch >= run->r_o.o_epochs)
        || (run->r_deadline_ns && zv_now_ns () >= run->r_deadline_ns))
      done = true;
  }
  /* The last epoch's result is checked too. */
  if (!zs_failed (run) && check != ZS_C_NONE) {
    int r;

    zs_alarm_arm (run, 120 * ZS_SLOW);
    r = zs_open (run);
    if (r < 0) {
      if (!zs_limit_replay_enospc (run, r, &check))
        zs_failf (run, "the final import failed: %s (the last epoch "
                  "ended: %s)", strerror (-r), run->r_prev_end);
    }
    else {
      zs_verify (run, check);
      if (zs_close (run) != 0 && !zs_failed (run))
        zs_failf (run, "the final export failed");
    }
    alarm (0);
  }

  zs_summary (run, (double) (zv_now_ns () - t0) / 1e9);
  if (zs_failed (run)) {
    char path[512];
    FILE *fp = fopen (tl_path (path, sizeof path, "zvstress.log"), "w");

    zs_replay_args (run, replay, sizeof replay, run->r_epoch + 1);
    fprintf (stderr, "zvstress: FAILED: %s\nzvstress: seed %" PRIu64
             ", epoch %" PRIu64 "; replay with: %s\nzvstress: the pool's "
             "files and the engine's recent messages are in %s\n",
             run->r_fail->f_msg, run->r_o.o_seed, run->r_epoch, replay,
             tl_dir);
    if (fp) {
      fprintf (fp, "seed %" PRIu64 ", epoch %" PRIu64 "\n%s\n--- recent "
               "engine messages ---\n%s", run->r_o.o_seed, run->r_epoch,
               run->r_fail->f_msg, run->r_fail->f_log);
      fclose (fp);
    }
    printf ("%" PRIu64 " passed, 1 failed\n",
            run->r_st->st_checks_exact + run->r_st->st_checks_crash);
    return 1;
  }
  zv_set_log (NULL);
  if (!run->r_o.o_keep)
    tl_dir_remove ();
  else
    printf ("zvstress: files kept in %s\n", tl_dir);
  printf ("%" PRIu64 " passed, 0 failed\n",
          run->r_st->st_checks_exact + run->r_st->st_checks_crash);
  return 0;
}
