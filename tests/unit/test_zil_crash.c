/*
 * test_zil_crash.c: crash tests of the intent log (core/zil*.c) under the
 * power-cut simulator (powercut.c): power cuts while the log is busy, and
 * while it is being replayed.
 *
 *   powercut       >= 200 random power cuts under a 4-thread workload
 *                  (ZVOL_POWERCUT_ROUNDS raises it; 20 under TSan): after
 *                  import, each 4 KiB block holds one whole version
 *                  written to it, no older than the last one acknowledged
 *                  durable; a third of the rounds flush after every change
 *                  with log blocks written ahead (zil_write_ahead=always)
 *   replay_crash   power cuts in the middle of replay, at the uberblock
 *                  writes and at random: the next import gives what one
 *                  clean replay gives, and the pool stays sound
 *   write_ahead_cut
 *                  a power cut between a log block whose write a write
 *                  started ahead of its flush and that flush: the flush
 *                  fails, what was flushed before is there, the write
 *                  is whole or absent
 *
 * The log's records, commit path and hostile input are tested in
 * test_zil.c (with the simulator itself); the helpers both use are in
 * ziltest.h.
 *
 * Devices are sparse files in a mkdtemp directory under /var/tmp.  Checks
 * made on threads other than cmocka's are counted, not asserted, and the
 * main thread asserts on the counts.  ZV_TEST_SEED replays a run's random
 * choices (the thread interleavings aside); ZV_TEST_FILTER runs some
 * tests only.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"
#include "ziltest.h"
#include "pool.h"
#include "powercut.h"

/* ------------------------------------------------------------------ */
/* a. Power cuts under load                                             */
/* ------------------------------------------------------------------ */

#define PCT_VOLSIZE (8 * MiB)
#define PCT_DEVSIZE (32 * MiB)
#define PCT_LOGSIZE (17 * MiB)
#define PCT_THREADS 4
#define PCT_NBLK (PCT_VOLSIZE / BLK)
#define PCT_REGION (PCT_NBLK / PCT_THREADS)   /* 4K blocks per thread */
#define PCT_SERIES 20                          /* rounds per pool */
/* Under ThreadSanitizer everything runs several times slower: fewer
 * rounds, each with a longer load (races are what that build is for). */
#define PCT_DEFAULT_ROUNDS (TL_TSAN ? 20 : 200)
#define PCT_SLOW (TL_TSAN ? 30 : 1)

/* The versions a 4 KiB block went through since it was last checked:
 * v[0] is what the check found, v[1..] were written after it, in order;
 * v[durable] is the newest acknowledged durable. */
typedef struct pct_blk {
  uint64_t *pb_v;
  uint32_t pb_n, pb_cap;
  uint32_t pb_durable;
} pct_blk_t;

typedef struct pct {
  zvol_t *pt_zv;
  pct_blk_t *pt_blk;
  atomic_bool pt_stop;
  bool pt_always;                /* sync=always: every write is durable */
  bool pt_flush_each;            /* a flush after every change */
  unsigned pt_round;
} pct_t;

typedef struct pct_thr {
  pct_t *tt_g;
  unsigned tt_idx;
  uint64_t tt_rnd;
  uint64_t tt_seq;
  uint64_t tt_writes, tt_fua, tt_flushes, tt_frees;
  int tt_err;
  bool tt_done;
} pct_thr_t;

/* A version stamp: unique, never zero, with the block number inside. */
static uint64_t
pct_stamp (unsigned round, unsigned idx, uint64_t seq, uint64_t blk)
{
  return ((uint64_t) (round + 1) << 48) | ((uint64_t) idx << 44)
    | ((seq & 0xffffffffull) << 12) | (blk & 0xfff);
}

static void
pct_push (pct_blk_t *b, uint64_t v)
{
  if (b->pb_n == b->pb_cap) {
    b->pb_cap = b->pb_cap ? b->pb_cap * 2 : 8;
    b->pb_v = realloc (b->pb_v, b->pb_cap * sizeof *b->pb_v);
    if (b->pb_v == NULL)
      abort ();
  }
  b->pb_v[b->pb_n++] = v;
}

/* Writes (some FUA, some followed by a flush), zeros and trims in this
 * thread's region until told to stop or an error (after the cut). */
static void *
pct_worker (void *arg)
{
  pct_thr_t *t = arg;
  pct_t *g = t->tt_g;
  uint8_t *buf = malloc (65536);
  uint64_t base = (uint64_t) t->tt_idx * PCT_REGION;

  while (!atomic_load (&g->pt_stop)) {
    uint64_t x = tl_rand (&t->tt_rnd);
    unsigned op = x % 32, nblk;
    bool fua = (x >> 8) % 4 == 0;
    uint64_t first;
    int r;

    if (op < 3) {
      /* zero (4K granular) or trim (whole 16K volume blocks only: the
       * partial edges of a trim are left as they are) */
      bool trim = op == 2;
      nblk = trim ? 4 * (1 + (x >> 12) % 2) : 1 + (x >> 12) % 4;
      first = (x >> 16) % (PCT_REGION - nblk + 1);
      if (trim)
        first &= ~3ull;
      for (unsigned i = 0; i < nblk; i++)
        pct_push (&g->pt_blk[base + first + i], 0);
      r = trim ? zvol_trim (g->pt_zv, (base + first) * BLK, nblk * BLK,
                            fua ? ZVOL_FUA : 0)
        : zvol_zero (g->pt_zv, (base + first) * BLK, nblk * BLK,
                     fua ? ZVOL_FUA : 0);
      t->tt_frees++;
    }
    else {
      unsigned sz = (x >> 12) % 20;
      nblk = sz < 8 ? 1 : sz < 13 ? 2 : sz < 17 ? 4 : 16;
      first = (x >> 20) % (PCT_REGION - nblk + 1);
      for (unsigned i = 0; i < nblk; i++) {
        uint64_t v = pct_stamp (g->pt_round, t->tt_idx, t->tt_seq++,
                                base + first + i);
        stamp_fill (buf + i * BLK, v);
        pct_push (&g->pt_blk[base + first + i], v);
      }
      r = zvol_write (g->pt_zv, buf, (base + first) * BLK, nblk * BLK,
                      fua ? ZVOL_FUA : 0);
      t->tt_writes++;
    }
    if (r != 0) {
      t->tt_err = r;
      break;
    }
    if (fua || g->pt_always) {
      t->tt_fua++;
      for (unsigned i = 0; i < nblk; i++) {
        pct_blk_t *b = &g->pt_blk[base + first + i];
        b->pb_durable = b->pb_n - 1;
      }
    }
    if ((x >> 40) % 8 == 0 || g->pt_flush_each) {
      r = zvol_flush (g->pt_zv);
      if (r != 0) {
        t->tt_err = r;
        break;
      }
      t->tt_flushes++;
      for (uint64_t i = 0; i < PCT_REGION; i++) {
        pct_blk_t *b = &g->pt_blk[base + i];
        b->pb_durable = b->pb_n - 1;
      }
    }
  }
  free (buf);
  t->tt_done = true;
  return NULL;
}

/* Describe a block's history for a failure message. */
static void
pct_describe (const pct_blk_t *b, char *out, size_t len)
{
  size_t n = 0;

  n += (size_t) snprintf (out + n, len - n, "durable index %u of %u:",
                          b->pb_durable, b->pb_n);
  for (uint32_t i = 0; i < b->pb_n && n + 24 < len; i++)
    n += (size_t) snprintf (out + n, len - n, " %s%016" PRIx64,
                            i == b->pb_durable ? "*" : "", b->pb_v[i]);
}

/*
 * Check every 4 KiB block: one whole version written to it, no older
 * than the durable one.  Then make what was found each block's only
 * version (durable: it came from an import, which syncs what it
 * replays).  Returns the number of bad blocks (details on stderr).
 */
static unsigned
pct_verify (zvol_t *zv, pct_blk_t *blk, const char *when)
{
  uint8_t *img = read_volume_try (zv);
  unsigned bad = 0;
  char desc[1024];

  if (img == NULL) {
    fprintf (stderr, "  %s: the volume does not read back\n", when);
    return PCT_NBLK;
  }

  for (uint64_t i = 0; i < PCT_NBLK; i++) {
    const uint64_t *w = (const uint64_t *) (img + i * BLK);
    pct_blk_t *b = &blk[i];
    const char *why = NULL;
    uint32_t k;

    for (k = 1; k < BLK / 8 && w[k] == w[0]; k++)
      ;
    if (k < BLK / 8)
      why = "torn (not one version)";
    else if (w[0] != 0 && (w[0] & 0xfff) != (i & 0xfff))
      why = "holds another block's version";
    else {
      for (k = b->pb_durable; k < b->pb_n && b->pb_v[k] != w[0]; k++)
        ;
      if (k == b->pb_n) {
        for (k = 0; k < b->pb_durable && b->pb_v[k] != w[0]; k++)
          ;
        why = k < b->pb_durable ? "older than the acknowledged durable "
          "version (lost write)" : "a version never written to it";
      }
    }
    if (why) {
      if (bad++ < 8) {
        pct_describe (b, desc, sizeof desc);
        fprintf (stderr, "  %s: 4K block %" PRIu64 " (volume offset %"
                 PRIu64 "): %s; found %016" PRIx64 " (word %u: %016" PRIx64
                 "); history %s\n", when, i, i * BLK, why, w[0],
                 (unsigned) (BLK / 8 - 1), w[BLK / 8 - 1], desc);
      }
    }
    b->pb_n = 0;
    pct_push (b, why && w[0] != w[1] ? 0xdeadull : w[0]);
    b->pb_durable = 0;
  }
  free (img);
  return bad;
}

typedef struct pct_totals {
  uint64_t pt_rounds, pt_writes, pt_fua, pt_flushes, pt_frees;
  uint64_t pt_dev_writes, pt_cut_sectors, pt_cut_old, pt_cut_newest;
  uint64_t pt_cut_other, pt_replays, pt_ahead_rounds, pt_cut_late;
} pct_totals_t;

/* One round: open (create or import + verify), load, cut, close. */
static void
pct_round (pct_t *g, unsigned round, uint64_t *rnd, const char *dev,
           const char *logdev, bool create, pct_totals_t *tot)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  pct_thr_t thr[PCT_THREADS];
  pthread_t th[PCT_THREADS];
  uint64_t x = tl_rand (rnd);
  pc_t *cut = pc_new (tl_rand (rnd), PC_RANDOM);
  pc_stats_t st;
  char when[128], terr[128];
  unsigned bad;
  int r;

  cfg (&pc, dev, logdev, create, PCT_VOLSIZE);
  tl_volcfg.vc_sync = x % 4 == 0 ? ZVOL_SYNC_ALWAYS : ZVOL_SYNC_STANDARD;
  tl_volcfg.vc_logbias = (x >> 4) % 3 == 0 ? ZVOL_LOGBIAS_THROUGHPUT
    : ZVOL_LOGBIAS_LATENCY;
  pc.pc_txg.tt_timeout_ms = 10 + (x >> 8) % 150;
  /* A third of the rounds: a flush after every change, log blocks
   * written ahead of it by the change's own thread. */
  g->pt_flush_each = (x >> 32) % 3 == 0;
  snprintf (when, sizeof when, "round %u (%s, sync=%s, logbias=%s, "
            "txg_timeout=%" PRIu64 " ms%s)", round,
            logdev ? "log device" : "no log device",
            tl_volcfg.vc_sync == ZVOL_SYNC_ALWAYS ? "always" : "standard",
            tl_volcfg.vc_logbias ? "throughput" : "latency",
            pc.pc_txg.tt_timeout_ms,
            g->pt_flush_each ? ", flush each, write ahead" : "");

  pc_watch (cut, true);
  tl_log_reset (false);
  assert_int_equal (zvol_tunable_set ("zil_write_ahead", g->pt_flush_each
                                      ? "always" : "auto", terr,
                                      sizeof terr), 0);
  r = tl_pool_open (&pc, &p);
  if (r != 0) {
    pc_watch (cut, false);
    pc_free (cut);
    fail_msg ("%s: %s failed: %s", when, create ? "create" : "import",
              strerror (-r));
  }
  if (tl_log_has ("intent log: replayed"))
    tot->pt_replays++;
  if (!create) {
    bad = pct_verify (tl_vol (p), g->pt_blk, when);
    if (bad) {
      (void) tl_pool_close (p);
      pc_watch (cut, false);
      pc_free (cut);
      fail_msg ("%s: %u bad 4K block(s) after the import that followed "
                "the cut of round %u", when, bad, round - 1);
    }
  }
  assert_int_equal (zvol_pool_start (p), 0);

  g->pt_zv = tl_vol (p);
  g->pt_round = round;
  g->pt_always = tl_volcfg.vc_sync == ZVOL_SYNC_ALWAYS;
  atomic_store (&g->pt_stop, false);
  for (unsigned i = 0; i < PCT_THREADS; i++) {
    thr[i] = (pct_thr_t) { .tt_g = g, .tt_idx = i,
                           .tt_rnd = tl_rand (rnd) | 1 };
    assert_int_equal (pthread_create (&th[i], NULL, pct_worker, &thr[i]), 0);
  }
  usleep ((useconds_t) (PCT_SLOW * (5000 + (x >> 20) % 45000)));
  tl_log_reset (true);               /* errors from here on are expected */
  pc_cut (cut);
  atomic_store (&g->pt_stop, true);
  for (unsigned i = 0; i < PCT_THREADS; i++) {
    struct timespec ts;
    clock_gettime (CLOCK_REALTIME, &ts);
    ts.tv_sec += 30;
    r = pthread_timedjoin_np (th[i], NULL, &ts);
    if (r != 0)
      fail_msg ("%s: worker %u still running 30 s after the power cut "
                "(a call that never returns once the devices fail)",
                when, i);
    tot->pt_writes += thr[i].tt_writes;
    tot->pt_fua += thr[i].tt_fua;
    tot->pt_flushes += thr[i].tt_flushes;
    tot->pt_frees += thr[i].tt_frees;
  }
  (void) tl_pool_close (p);
  pc_watch (cut, false);
  pc_get_stats (cut, &st);
  pc_free (cut);
  tl_log_reset (false);
  tot->pt_rounds++;
  tot->pt_dev_writes += st.ps_writes;
  tot->pt_ahead_rounds += g->pt_flush_each;
  tot->pt_cut_sectors += st.ps_cut_sectors;
  tot->pt_cut_old += st.ps_cut_old;
  tot->pt_cut_newest += st.ps_cut_newest;
  tot->pt_cut_other += st.ps_cut_other;
  tot->pt_cut_late += st.ps_cut_late;
}

/* The final check of a series: import, verify, close cleanly. */
static void
pct_final (pct_t *g, const char *dev, const char *logdev, unsigned round)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  unsigned bad;
  char when[64];

  snprintf (when, sizeof when, "import after round %u", round);
  cfg (&pc, dev, logdev, false, 0);
  p = tl_pool_open_ok (&pc);
  bad = pct_verify (tl_vol (p), g->pt_blk, when);
  if (bad)
    fail_msg ("%s: %u bad 4K block(s)", when, bad);
  assert_int_equal (tl_pool_close (p), 0);
}

static void
test_powercut (void **state)
{
  const char *env = getenv ("ZVOL_POWERCUT_ROUNDS");
  unsigned rounds = PCT_DEFAULT_ROUNDS;
  uint64_t rnd = tl_seed ("powercut");
  char dev[512], logdev[512];
  pct_t g = { 0 };
  pct_totals_t tot = { 0 };
  uint64_t t0 = zv_now_ns ();

  if (env && strtoul (env, NULL, 0) > rounds)
    rounds = (unsigned) strtoul (env, NULL, 0);
  g.pt_blk = calloc (PCT_NBLK, sizeof *g.pt_blk);
  assert_non_null (g.pt_blk);
  tl_path (dev, sizeof dev, "powercut.img");
  tl_path (logdev, sizeof logdev, "powercut-log.img");

  for (unsigned round = 0; round < rounds; round++) {
    unsigned series = round / PCT_SERIES;
    bool create = round % PCT_SERIES == 0;
    const char *ld = series % 2 == 1 ? logdev : NULL;

    if (create) {
      if (round > 0)
        pct_final (&g, dev, series % 2 == 0 ? logdev : NULL, round - 1);
      assert_int_equal (tl_sparse_file (dev, PCT_DEVSIZE), 0);
      unlink (logdev);
      if (ld)
        assert_int_equal (tl_sparse_file (logdev, PCT_LOGSIZE), 0);
      for (uint64_t i = 0; i < PCT_NBLK; i++) {
        g.pt_blk[i].pb_n = 0;
        pct_push (&g.pt_blk[i], 0);
        g.pt_blk[i].pb_durable = 0;
      }
    }
    pct_round (&g, round, &rnd, dev, ld, create, &tot);
  }
  pct_final (&g, dev, (rounds - 1) / PCT_SERIES % 2 == 1 ? logdev : NULL,
             rounds - 1);
  assert_int_equal (zvol_tunable_set ("zil_write_ahead", "off", dev,
                                      sizeof dev), 0);

  fprintf (stderr, "  %" PRIu64 " power cuts in %.1f s: %" PRIu64
           " writes (%" PRIu64 " durable on return), %" PRIu64 " flushes, "
           "%" PRIu64 " zero/trim; %" PRIu64 " device writes seen, %" PRIu64
           " sectors pending at the cuts (%" PRIu64 " rolled back, %" PRIu64
           " newest kept, %" PRIu64 " an older pending write); %" PRIu64
           " imports replayed records; %" PRIu64 " rounds flushed every "
           "change with writes ahead (%" PRIu64 " cuts applied after the "
           "close: a block written ahead in flight)\n", tot.pt_rounds,
           (double) (zv_now_ns () - t0) / 1e9, tot.pt_writes, tot.pt_fua,
           tot.pt_flushes, tot.pt_frees, tot.pt_dev_writes,
           tot.pt_cut_sectors, tot.pt_cut_old, tot.pt_cut_newest,
           tot.pt_cut_other, tot.pt_replays, tot.pt_ahead_rounds,
           tot.pt_cut_late);
  /* The rounds must have exercised something: durable writes, cuts that
   * lost data, and imports that replayed. */
  assert_true (tot.pt_fua > 0 && tot.pt_flushes > 0);
  assert_true (tot.pt_cut_old > 0);
  assert_true (tot.pt_replays > 0);
  assert_true (tot.pt_ahead_rounds > 0);
  for (uint64_t i = 0; i < PCT_NBLK; i++)
    free (g.pt_blk[i].pb_v);
  free (g.pt_blk);
  unlink (dev);
  unlink (logdev);
}

/* ------------------------------------------------------------------ */
/* b. Power cut during replay                                           */
/* ------------------------------------------------------------------ */

#define RC_VOLSIZE (16 * MiB)
#define RC_DEVSIZE (48 * MiB)
#define RC_RANDOM_CUTS 10
#define RC_MAX_CUTS 40

/* FUA operations of every record kind; only the log has them. */
static void
rc_load (zvol_pool_t *p, uint8_t *shadow, uint64_t *rnd)
{
  zvol_t *zv = tl_vol (p);

  for (int i = 0; i < 48; i++) {
    uint64_t x = tl_rand (rnd);
    uint64_t off = (x >> 8) % (4 * MiB / BLK) * BLK;
    uint32_t len;

    switch (x % 8) {
    case 0: case 1: len = BLK; break;                   /* copied */
    case 2: len = 3 * BLK; break;                        /* need copy */
    case 3: case 4: len = 65536; off &= ~16383ull; break; /* indirect */
    case 5: len = 49152; break;                          /* edges + ind */
    case 6:
      len = 2 * BLK;
      assert_int_equal (zvol_zero (zv, off, len, ZVOL_FUA), 0);
      memset (shadow + off, 0, len);
      continue;
    default:
      off &= ~16383ull;
      len = 32768;
      assert_int_equal (zvol_trim (zv, off, len, ZVOL_FUA), 0);
      memset (shadow + off, 0, len);
      continue;
    }
    tl_pat_fill (shadow + off, off, len, x);
    assert_int_equal (zvol_write (zv, shadow + off, off, len, ZVOL_FUA), 0);
  }
}

/* Import 'dev' and close it, crashing at the n-th device write (n == 0:
 * no cut).  Returns the import's result; *cutp says whether the power
 * went.  When 'trace' is given, it gets the simulator's event log. */
static int
rc_import (const char *dev, uint64_t seed, uint64_t n, FILE *trace,
           bool *cutp)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  pc_t *cut = pc_new (seed, n ? PC_RANDOM : PC_KEEP_ALL);
  int r;

  cfg (&pc, dev, NULL, false, 0);
  cfg_no_txg (&pc);
  if (n)
    pc_cut_after_writes (cut, n);
  pc_set_trace (cut, trace);
  pc_watch (cut, true);
  r = tl_pool_open (&pc, &p);
  if (r == 0)
    r = tl_pool_close (p) == 0 ? 0 : 1;
  pc_watch (cut, false);
  pc_settle (cut);
  if (cutp)
    *cutp = pc_is_cut (cut);
  pc_free (cut);
  return r;
}

/*
 * The cut points worth trying in a replay that makes 'w' device writes:
 * at and just after every uberblock write (the label areas: the moments
 * a txg of the replay commits), then random ones.  Returns how many.
 */
static int
rc_cut_points (const char *trace, size_t len, uint64_t *rnd, uint64_t *w,
               uint64_t *out)
{
  uint64_t nw = 0;
  int n = 0;

  for (const char *l = trace; l && l < trace + len; ) {
    const char *e = memchr (l, '\n', (size_t) (trace + len - l));
    uint64_t off;

    if (strncmp (l, "write submit ", 13) == 0) {
      const char *o = strstr (l, " off ");
      nw++;
      off = o ? strtoull (o + 5, NULL, 10) : 0;
      if ((off < ZV_LABEL_SIZE || off >= RC_DEVSIZE - ZV_LABEL_SIZE)
          && n + 2 <= RC_MAX_CUTS - RC_RANDOM_CUTS) {
        out[n++] = nw;            /* the label write fails */
        out[n++] = nw + 1;        /* it (and its flush) made it */
      }
    }
    l = e ? e + 1 : NULL;
  }
  *w = nw;
  for (int i = 0; i < RC_RANDOM_CUTS && nw > 0; i++)
    out[n++] = 1 + tl_rand (rnd) % nw;
  return n;
}

static void
replay_crash (uint64_t rnd)
{
  char dev[512], snap[512], work[512];
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t *shadow = calloc (1, RC_VOLSIZE), *want, *img;
  uint64_t w = 0, synced;
  uint64_t cuts[RC_MAX_CUTS];
  char *trace = NULL;
  size_t tracelen = 0;
  FILE *tf;
  int ncuts, nfired = 0, r;
  pc_t *cut;

  tl_path (dev, sizeof dev, "rc.img");
  tl_path (snap, sizeof snap, "rc-snap.img");
  tl_path (work, sizeof work, "rc-work.img");
  assert_int_equal (tl_sparse_file (dev, RC_DEVSIZE), 0);
  cfg (&pc, dev, NULL, true, RC_VOLSIZE);
  pc.pc_zil_size = 4 * MiB;
  cfg_no_txg (&pc);
  p = tl_pool_open_ok (&pc);
  rec_warm (p, shadow, RC_VOLSIZE - BLK);
  synced = tl_pool_stat_u64 (p, "txg_synced");
  rc_load (p, shadow, &rnd);
  assert_int_equal (tl_pool_stat_u64 (p, "txg_synced"), synced);
  assert_true (tl_pool_stat_u64 (p, "zil_records_indirect") > 0);

  /* The power goes: whatever was not flushed may be lost. */
  cut = pc_new (tl_rand (&rnd), PC_RANDOM);
  /* Direct writes end first: the simulator sees a request whole. */
  zv_zio_pending_wait_all (zv_pool_spa (p));
  pc_attach (cut, zv_pool_spa (p)->spa_devs[0]);
  tl_log_reset (true);
  pc_cut (cut);
  (void) tl_pool_close (p);
  pc_free (cut);
  tl_log_reset (false);
  copy_file (dev, snap);

  /* One clean replay of a copy: it must give back every FUA write. */
  copy_file (snap, work);
  tf = open_memstream (&trace, &tracelen);
  assert_non_null (tf);
  r = rc_import (work, 0, 0, tf, NULL);
  fclose (tf);
  assert_int_equal (r, 0);
  assert_true (tl_log_has ("intent log: replayed"));
  ncuts = rc_cut_points (trace, tracelen, &rnd, &w, cuts);
  if (getenv ("ZV_TEST_VERBOSE"))
    fwrite (trace, 1, tracelen, stderr);
  free (trace);
  cfg (&pc, work, NULL, false, 0);
  p = tl_pool_open_ok (&pc);
  want = read_volume (tl_vol (p));
  assert_int_equal (tl_pool_close (p), 0);
  compare_images (want, shadow, RC_VOLSIZE, "clean replay");
  fprintf (stderr, "  a clean replay writes %" PRIu64 " device blocks; %d "
           "cut points\n", w, ncuts);
  assert_true (w > 2 && ncuts > RC_RANDOM_CUTS);

  /* Cut the power at those points of the replay (a third of the time a
   * second cut in the next replay), then import: the result must be that
   * of the clean replay, and the pool sound afterwards. */
  for (int a = 0; a < ncuts; a++) {
    uint64_t n1 = cuts[a], n2 = 0;
    char when[160];
    bool fired;

    copy_file (snap, work);
    tl_log_reset (true);
    /* (The count of writes varies a little from run to run: a cut near
     * the end may fall in the close, or not happen.) */
    (void) rc_import (work, tl_rand (&rnd), n1, NULL, &fired);
    nfired += fired;
    if (a % 3 == 2) {
      n2 = 1 + tl_rand (&rnd) % w;
      (void) rc_import (work, tl_rand (&rnd), n2, NULL, NULL);
    }
    tl_log_reset (false);
    snprintf (when, sizeof when, "import after a cut at write %" PRIu64
              " (then %" PRIu64 ") of a replay of %" PRIu64, n1, n2, w);
    cfg (&pc, work, NULL, false, 0);
    r = tl_pool_open (&pc, &p);
    if (r != 0)
      fail_msg ("%s: failed: %s", when, strerror (-r));
    img = read_volume_try (tl_vol (p));
    if (img == NULL) {
      (void) tl_pool_close (p);
      fail_msg ("%s: the volume does not read back", when);
    }
    compare_images (img, want, RC_VOLSIZE, when);
    free (img);
    /* Sound afterwards: write, two syncs (deferred frees come due),
     * close, import. */
    tl_pat_fill (shadow, 0, BLK, 77);
    r = zvol_write (tl_vol (p), shadow, 0, BLK, ZVOL_FUA);
    for (int i = 0; i < 3 && r == 0; i++) {
      r = zvol_write (tl_vol (p), shadow, MiB * (unsigned) i,
                      BLK, 0);
      if (r == 0)
        r = zv_pool_sync (p);
    }
    if (r == 0)
      r = tl_pool_close (p);
    else
      (void) tl_pool_close (p);
    if (r != 0)
      fail_msg ("%s: writing and syncing afterwards failed: %s", when,
                strerror (-r));
    cfg (&pc, work, NULL, false, 0);
    r = tl_pool_open (&pc, &p);
    if (r != 0)
      fail_msg ("%s: the import after that failed: %s", when,
                strerror (-r));
    assert_int_equal (tl_pool_close (p), 0);
  }
  assert_true (nfired >= ncuts / 2);
  free (want);
  free (shadow);
  unlink (dev);
  unlink (snap);
  unlink (work);
}

/* ------------------------------------------------------------------ */

static void
test_replay_crash (void **state)
{
  (void) state;
  replay_crash (tl_seed ("replay_crash"));
}

/* A seed whose cuts leave the replay's txg on disk with the imported
 * txg's deferred-free list still naming a block the claim took back and
 * the replay adopted: the next import refused the pool (ownership check)
 * until the replay's sync rewrote that list (psync_defer_prev). */
static void
test_replay_crash_defer (void **state)
{
  (void) state;
  replay_crash (17164093666615ull);
}

/* ------------------------------------------------------------------ */
/* c. Power cut between a log block written ahead and its flush         */
/* ------------------------------------------------------------------ */

/* Cuts the power at the first flush once armed: the log block written
 * ahead is complete in the device's cache (its write completed, and was
 * seen to, before the commit that finishes it flushes) and never
 * flushed.  The hook runs before the simulator counts the flush, so the
 * cut settles at once, and the flush fails as every request after it. */
typedef struct wac {
  pc_t *wa_pc;
  atomic_int wa_state;          /* 0 off, 1 armed, 2 cut */
} wac_t;

static int
wac_fault (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
           uint32_t len)
{
  wac_t *w = arg;
  int armed = 1;

  (void) dev; (void) off; (void) len;
  if (op == ZV_DEV_FLUSH
      && atomic_compare_exchange_strong (&w->wa_state, &armed, 2))
    pc_cut (w->wa_pc);
  return 0;
}

/*
 * zil_write_ahead=always: write A and flush it (acknowledged), then
 * write B, whose log block the write starts at once; the power goes
 * after that write completed and before the flush that the commit of B
 * issues.  That commit must fail (B never became durable), and after the
 * import A is there and B's block holds either what it held before or
 * B, whole, as the simulator kept the unflushed log block (PC_KEEP_ALL:
 * B is replayed from it), lost it (PC_LOSE_ALL) or tore it (PC_RANDOM).
 */
static void
test_write_ahead_cut (void **state)
{
  static const enum pc_mode modes[] = { PC_KEEP_ALL, PC_LOSE_ALL, PC_RANDOM,
                                        PC_RANDOM, PC_RANDOM, PC_RANDOM };
  char dev[512], err[256];
  uint64_t rnd = tl_seed ("write_ahead_cut");
  unsigned kept = 0, lost = 0;

  (void) state;
  tl_path (dev, sizeof dev, "wacut.img");
  assert_int_equal (zvol_tunable_set ("zil_write_ahead", "always", err,
                                      sizeof err), 0);
  for (unsigned i = 0; i < sizeof modes / sizeof modes[0]; i++) {
    pc_t *pc = pc_new (tl_rand (&rnd), modes[i]);
    wac_t w = { .wa_pc = pc };
    zvol_pool_config_t cf;
    zvol_pool_t *p;
    zvol_t *zv;
    uint8_t warm[BLK], a[BLK], b[BLK], got[BLK], zero[BLK] = { 0 };
    uint64_t ahead;
    int r;

    assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
    pc_set_fault (pc, wac_fault, &w);
    pc_watch (pc, true);
    cfg (&cf, dev, NULL, true, 16 * MiB);
    cfg_no_txg (&cf);
    p = tl_pool_open_ok (&cf);
    zv = tl_vol (p);
    rec_warm (p, warm, 0);
    stamp_fill (a, 0xa000 + i);
    stamp_fill (b, 0xb000 + i);
    assert_int_equal (zvol_write (zv, a, 1 * BLK, BLK, 0), 0);
    assert_int_equal (zvol_flush (zv), 0);

    ahead = tl_pool_stat_u64 (p, "zil_lwbs_ahead");
    atomic_store (&w.wa_state, 1);
    assert_int_equal (zvol_write (zv, b, 2 * BLK, BLK, 0), 0);
    if (tl_pool_stat_u64 (p, "zil_lwbs_ahead") != ahead + 1)
      fail_msg ("round %u: the write did not start its log block ahead "
                "of the flush", i);
    tl_log_reset (true);               /* errors from here on */
    r = zvol_flush (zv);
    if (atomic_load (&w.wa_state) != 2)
      fail_msg ("round %u: the commit of a block written ahead issued no "
                "flush", i);
    if (r == 0)
      fail_msg ("round %u: a flush returned 0 though the log block it "
                "needed was never flushed and the power is off", i);
    (void) tl_pool_close (p);
    pc_watch (pc, false);
    pc_free (pc);
    tl_log_reset (false);

    cfg (&cf, dev, NULL, false, 0);
    p = tl_pool_open_ok (&cf);
    assert_int_equal (zvol_read (tl_vol (p), got, 1 * BLK, BLK), 0);
    if (memcmp (got, a, BLK) != 0)
      fail_msg ("round %u: a flushed write is lost after the cut", i);
    assert_int_equal (zvol_read (tl_vol (p), got, 2 * BLK, BLK), 0);
    if (memcmp (got, b, BLK) == 0)
      kept++;
    else if (memcmp (got, zero, BLK) == 0)
      lost++;
    else
      fail_msg ("round %u: the block written ahead holds neither its old "
                "content nor the write", i);
    if (modes[i] == PC_KEEP_ALL && memcmp (got, b, BLK) != 0)
      fail_msg ("round %u: the log block written ahead was kept whole "
                "but its record was not replayed", i);
    if (modes[i] == PC_LOSE_ALL && memcmp (got, zero, BLK) != 0)
      fail_msg ("round %u: the write is there though its log block was "
                "lost", i);
    assert_int_equal (tl_pool_close (p), 0);
  }
  fprintf (stderr, "  %u cuts between a log block written ahead and its "
           "flush: the write replayed %u times, lost %u times\n",
           kept + lost, kept, lost);
  assert_int_equal (zvol_tunable_set ("zil_write_ahead", "off", err,
                                      sizeof err), 0);
  unlink (dev);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_powercut),
    tl_test (test_replay_crash),
    tl_test (test_replay_crash_defer),
    tl_test (test_write_ahead_cut),
  };

  return tl_main (tests, "zil-crash", NULL);
}
