/*
 * test_check.c: the live check (zvol_pool_check_live, check.c) on a
 * pool this process serves, and the free hold under it (alloc.c):
 *
 *   - clean, again and again, while another thread writes (with FUA and
 *     flushes) and the syncs run; the hold keeps frees back while it
 *     runs and gives them back after;
 *   - damage made on the live pool (space allocated and owned by
 *     nothing, a deferred free of a block still in use, a data block's
 *     byte flipped on the device) reported live as offline;
 *   - a cancel (the client gone: its descriptor turns readable) in the
 *     middle, a second check while one runs (EBUSY), and the bound on
 *     what the hold keeps back (ENOSPC, "held frees would fill the
 *     pool"), each releasing the hold;
 *   - a power cut while a hold carries frees over many txgs: the pool
 *     imports after it and the offline check finds nothing leaked.
 */
#include <config.h>

#include "testlib.h"
#include "powercut.h"
#include "pool.h"
#include "tunable.h"

#define LC_DEV_SIZE (256 * MiB)
#define LC_VOLSIZE (64 * MiB)
#define LC_SPAN (32 * MiB)              /* what the writer overwrites */

/* ---- what a check reported ---- */

typedef struct lc_seen {
  char ls_text[16384];
  size_t ls_len;
  unsigned ls_kinds[ZVOL_CHECK_LEAK + 1];
  unsigned ls_progress;
  /* Run from the progress callback, once, mid-check: */
  void (*ls_mid) (struct lc_seen *ls);
  zvol_pool_t *ls_pool;
  int ls_cancel[2];                     /* a pipe: the client's side */
  int ls_mid_r;
  uint64_t ls_held_mid;
} lc_seen_t;

static void
lc_problem (void *arg, const zvol_check_problem_t *cp)
{
  lc_seen_t *ls = arg;
  int n = snprintf (ls->ls_text + ls->ls_len, sizeof ls->ls_text - ls->ls_len,
                    "%s\n", cp->cp_msg);

  if (n > 0)
    ls->ls_len = ZV_MIN (ls->ls_len + (size_t) n, sizeof ls->ls_text - 1);
  ls->ls_kinds[cp->cp_kind]++;
}

static void
lc_progress (void *arg, const char *what, uint64_t done, uint64_t total)
{
  lc_seen_t *ls = arg;

  assert_string_equal (what, "check");
  assert_true (done <= total);
  if (ls->ls_progress++ == 1 && ls->ls_mid)
    ls->ls_mid (ls);
}

/* One live check of p: its result, what it said in ls. */
static int
lc_run (zvol_pool_t *p, zvol_check_report_t *rep, lc_seen_t *ls)
{
  ls->ls_len = 0;
  ls->ls_text[0] = '\0';
  memset (ls->ls_kinds, 0, sizeof ls->ls_kinds);
  ls->ls_progress = 0;
  ls->ls_pool = p;
  memset (rep, 0, sizeof *rep);
  rep->cr_problem = lc_problem;
  rep->cr_problem_arg = ls;
  int r = zvol_pool_check_live (p, rep, ls->ls_cancel, lc_progress, ls);
  if (rep->cr_problems > 0)
    print_message ("  %" PRIu64 " problems:\n%s", rep->cr_problems,
                   ls->ls_text);
  return r;
}

static void
lc_expect (const lc_seen_t *ls, const char *needle)
{
  if (strstr (ls->ls_text, needle) == NULL)
    fail_msg ("the check did not say \"%s\"; it said:\n%s", needle,
              ls->ls_text);
}

static zv_alloc_t *
lc_alloc (zvol_pool_t *p)
{
  return zv_pool_spa (p)->spa_alloc;
}

static uint64_t
lc_synced (zvol_pool_t *p)
{
  zvol_pool_stats_t ps;

  zvol_pool_get_stats (p, &ps);
  return ps.ps_txg_synced;
}

static uint64_t
lc_held (zvol_pool_t *p)
{
  uint64_t b;

  zv_alloc_hold_get (lc_alloc (p), &b, NULL);
  return b;
}

/* A pool with one volume, LC_SPAN of it written and synced. */
static zvol_pool_t *
lc_pool (const char *dev)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p;

  assert_int_equal (tl_sparse_file (dev, LC_DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, LC_VOLSIZE, true);
  p = tl_pool_open_ok (&pc);
  for (uint64_t off = 0; off < LC_SPAN; off += 4 * MiB)
    tl_vol_write (tl_vol (p), NULL, off, 4 * MiB, 0x51, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  return p;
}

/* ---- a writer beside the check ---- */

typedef struct lc_writer {
  zvol_pool_t *lw_pool;
  _Atomic bool lw_stop;
  _Atomic uint64_t lw_writes, lw_syncs;
  uint64_t lw_seed;
} lc_writer_t;

static void *
lc_writer_main (void *arg)
{
  lc_writer_t *w = arg;
  zvol_t *zv = tl_vol (w->lw_pool);
  uint8_t *buf = malloc (64 * KiB);
  uint64_t s = w->lw_seed;

  TL_CHECK (buf != NULL);
  while (!atomic_load (&w->lw_stop)) {
    uint64_t n = tl_rand (&s);
    uint32_t len = (uint32_t) (4 * KiB << (n % 5));     /* 4K to 64K */
    uint64_t off = (n >> 8) % (LC_SPAN / len) * len;

    tl_fill_rand (buf, len, &s);
    TL_CHECK (zvol_write (zv, buf, off, len, n & 0x10000 ? ZVOL_FUA : 0)
              == 0);
    if (n & 0x20000)
      TL_CHECK (zvol_flush (zv) == 0);
    if (atomic_fetch_add (&w->lw_writes, 1) % 16 == 15) {
      TL_CHECK (zv_pool_sync (w->lw_pool) == 0);
      atomic_fetch_add (&w->lw_syncs, 1);
    }
  }
  free (buf);
  return NULL;
}

/* Clean, five times over, while another thread writes and syncs; frees
 * kept back while a check runs, none after it. */
static void
test_live_clean_while_writing (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "lc-clean");
  zvol_pool_t *p = lc_pool (dev);
  lc_writer_t w = { .lw_pool = p, .lw_seed = tl_seed ("lc-clean") };
  lc_seen_t ls = { .ls_cancel = { -1, -1 } };
  zvol_check_report_t rep;
  uint64_t syncs_in_checks = 0;
  pthread_t th;

  (void) state;
  assert_int_equal (pthread_create (&th, NULL, lc_writer_main, &w), 0);
  for (unsigned i = 0; i < 5; i++) {
    uint64_t s0;
    struct timespec d = { 0, 20 * 1000 * 1000 };

    nanosleep (&d, NULL);
    s0 = atomic_load (&w.lw_syncs);
    assert_int_equal (lc_run (p, &rep, &ls), 0);
    syncs_in_checks += atomic_load (&w.lw_syncs) - s0;
    assert_int_equal (rep.cr_problems, 0);
    assert_int_equal (rep.cr_trees, 1);
    assert_true (rep.cr_bytes >= LC_SPAN);
    /* The hold is gone with the check. */
    assert_int_equal (lc_held (p), 0);
  }
  atomic_store (&w.lw_stop, true);
  assert_int_equal (pthread_join (th, NULL), 0);
  print_message ("  %" PRIu64 " writes, %" PRIu64 " syncs, %" PRIu64
                 " of them during the checks\n", atomic_load (&w.lw_writes),
                 atomic_load (&w.lw_syncs), syncs_in_checks);
  assert_true (syncs_in_checks > 0);
  assert_int_equal (tl_pool_close (p), 0);
  tl_check_clean (dev);
  unlink (dev);
}

/* ---- the hold: kept back while it lasts, given back after ---- */

/* Mid-check: a snapshot (the check takes no lock a snapshot needs),
 * then overwrite what the check's txg holds, sync, and destroy the
 * snapshot to the end of its background free: the frees are held, and
 * the space stays allocated. */
static void
lc_mid_overwrite (lc_seen_t *ls)
{
  zvol_pool_t *p = ls->ls_pool;

  assert_int_equal (zvol_snapshot_create (p, "zvol@mid"), 0);
  for (unsigned t = 0; t < 4; t++) {
    for (uint64_t off = 0; off < 8 * MiB; off += 4 * MiB)
      tl_vol_write (tl_vol (p), NULL, off, 4 * MiB, 0x60 + t, 0);
    assert_int_equal (zv_pool_sync (p), 0);
  }
  assert_int_equal (zvol_volume_destroy (p, "zvol@mid"), 0);
  assert_int_equal (zvol_pool_wait_freeing (p, NULL, NULL, NULL), 0);
  ls->ls_held_mid = lc_held (p);
}

static void
test_live_hold_released (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "lc-hold");
  zvol_pool_t *p = lc_pool (dev);
  lc_seen_t ls = { .ls_cancel = { -1, -1 }, .ls_mid = lc_mid_overwrite };
  zvol_check_report_t rep;
  zv_alloc_space_t before, after;
  zvol_pool_stats_t ps;

  (void) state;
  zv_alloc_get_space (lc_alloc (p), &before);
  assert_int_equal (lc_run (p, &rep, &ls), 0);
  assert_int_equal (rep.cr_problems, 0);
  /* 4 txgs overwrote 8 MiB each: the first three's frees (and more)
   * were due back during the check, and were held. */
  print_message ("  held mid-check: %" PRIu64 " bytes\n", ls.ls_held_mid);
  assert_true (ls.ls_held_mid >= 8 * MiB);
  assert_int_equal (lc_held (p), 0);
  /* Two syncs after the check, the held frees are free again. */
  for (unsigned i = 0; i < 3; i++) {
    tl_vol_write (tl_vol (p), NULL, 40 * MiB, 16 * KiB, 0x70 + i, 0);
    assert_int_equal (zv_pool_sync (p), 0);
  }
  zv_alloc_get_space (lc_alloc (p), &after);
  print_message ("  allocated before %" PRIu64 ", after %" PRIu64 "\n",
                 before.as_allocated, after.as_allocated);
  assert_true (after.as_allocated < before.as_allocated + 2 * MiB);
  zvol_pool_get_stats (p, &ps);
  assert_int_equal (ps.ps_space_held, 0);
  assert_int_equal (tl_pool_close (p), 0);
  tl_check_clean (dev);
  unlink (dev);
}

/* ---- damage, found live ---- */

/* The offset of the first 4 KiB of the device that begins with buf's
 * first 64 bytes. */
static uint64_t
lc_find (const char *dev, const uint8_t *want)
{
  uint8_t *blk = malloc (ZV_SECTOR);
  uint64_t found = 0;

  assert_non_null (blk);
  for (uint64_t off = 0; off < LC_DEV_SIZE && found == 0; off += ZV_SECTOR) {
    assert_int_equal (tl_file_pread (dev, blk, ZV_SECTOR, off), 0);
    if (memcmp (blk, want, 64) == 0)
      found = off;
  }
  free (blk);
  return found;
}

static void
test_live_damage (void **state)
{
  char path[512], want[1024];
  const char *dev = tl_path (path, sizeof path, "lc-damage");
  zvol_pool_t *p = lc_pool (dev);
  zv_alloc_t *a = lc_alloc (p);
  lc_seen_t ls = { .ls_cancel = { -1, -1 } };
  zvol_check_report_t rep;
  uint8_t *mark = malloc (16 * KiB);
  uint64_t lost, off;

  (void) state;
  assert_non_null (mark);
  /* A leak: space allocated, and persisted so, that nothing names. */
  assert_int_equal (zv_alloc_block (a, 3 * ZV_SECTOR, 0, &lost), 0);
  tl_vol_write (tl_vol (p), NULL, 48 * MiB, 16 * KiB, 0x99, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  assert_int_equal (lc_run (p, &rep, &ls), 0);
  assert_int_equal (rep.cr_leaked, 1);
  assert_int_equal (rep.cr_leaked_bytes, 3 * ZV_SECTOR);
  snprintf (want, sizeof want, "device 0 offset %" PRIu64 ", %u bytes: "
            "allocated in the space map, owned by nothing (leaked)",
            ZV_DVA_OFFSET (lost), 3 * ZV_SECTOR);
  lc_expect (&ls, want);
  assert_int_equal (rep.cr_problems, 1);
  assert_int_equal (lc_held (p), 0);

  /* Doubly allocated: a deferred free of a block the tree still uses
   * (the block found on the device by its contents). */
  tl_pat_fill (mark, 52 * MiB, 16 * KiB, 0x77);
  assert_int_equal (zvol_write (tl_vol (p), mark, 52 * MiB, 16 * KiB, 0),
                    0);
  assert_int_equal (zv_pool_sync (p), 0);
  off = lc_find (dev, mark);
  assert_true (off > 0);
  uint64_t dva = ZV_DVA_MAKE (0, off);
  uint64_t txg = lc_synced (p) + 1;
  zv_alloc_free_defer (a, txg, dva, 16 * KiB);
  tl_vol_write (tl_vol (p), NULL, 48 * MiB, 16 * KiB, 0x9a, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  assert_int_equal (lc_synced (p), txg);
  assert_int_equal (lc_run (p, &rep, &ls), 0);
  assert_int_equal (rep.cr_double, 1);
  assert_int_equal (rep.cr_double_bytes, 16 * KiB);
  snprintf (want, sizeof want, "device 0 offset %" PRIu64 ", %u bytes: "
            "doubly allocated, claimed by", off, 16 * KiB);
  lc_expect (&ls, want);
  lc_expect (&ls, "volume 'zvol' level 0 block 3328 copy 1");
  /* Undo it before a sync applies that free. */
  assert_int_equal (zv_alloc_defer_cancel (a, dva, 16 * KiB), 16 * KiB);

  /* A byte of that block flipped on the device: a checksum error. */
  tl_file_flip (dev, off + 100);
  assert_int_equal (lc_run (p, &rep, &ls), 0);
  assert_int_equal (rep.cr_cksum_errors, 1);
  snprintf (want, sizeof want, "volume 'zvol' level 0 block 3328 copy 1 of "
            "1: checksum error on device 0 (%s) offset %" PRIu64, dev, off);
  lc_expect (&ls, want);
  assert_int_equal (lc_held (p), 0);
  free (mark);
  tl_log_reset (true);
  (void) tl_pool_close (p);
  tl_log_reset (false);
  unlink (dev);
}

/* ---- ends: the client gone, a second check, the bound ---- */

static void
lc_mid_cancel (lc_seen_t *ls)
{
  /* The client goes: its end of the connection turns readable. */
  assert_int_equal (close (ls->ls_cancel[1]), 0);
  ls->ls_cancel[1] = -1;
}

static void
lc_mid_second (lc_seen_t *ls)
{
  zvol_check_report_t rep2 = { 0 };

  ls->ls_mid_r = zvol_pool_check_live (ls->ls_pool, &rep2, NULL, NULL, NULL);
}

/* Enough overwritten and synced, mid-check, that the hold passes 1% of
 * the free space. */
static void
lc_mid_fill (lc_seen_t *ls)
{
  zvol_pool_t *p = ls->ls_pool;

  for (unsigned t = 0; t < 6; t++) {
    for (uint64_t off = 0; off < LC_SPAN; off += 4 * MiB)
      tl_vol_write (tl_vol (p), NULL, off, 4 * MiB, 0x40 + t, 0);
    assert_int_equal (zv_pool_sync (p), 0);
  }
  ls->ls_held_mid = lc_held (p);
}

static void
test_live_ends (void **state)
{
  char path[512], err[256];
  const char *dev = tl_path (path, sizeof path, "lc-ends");
  zvol_pool_t *p = lc_pool (dev);
  lc_seen_t ls = { .ls_mid = lc_mid_cancel };
  zvol_check_report_t rep;

  (void) state;
  /* The client goes mid-check. */
  assert_int_equal (pipe (ls.ls_cancel), 0);
  tl_log_reset (true);
  assert_int_equal (lc_run (p, &rep, &ls), -ECANCELED);
  assert_true (tl_log_has ("check cancelled: its client went away"));
  tl_log_reset (false);
  close (ls.ls_cancel[0]);
  ls.ls_cancel[0] = -1;
  assert_int_equal (lc_held (p), 0);
  assert_int_equal (zv_alloc_hold_begin (lc_alloc (p), lc_synced (p)), 0);
  zv_alloc_hold_end (lc_alloc (p));

  /* A second check while one runs: refused, and the first goes on. */
  ls.ls_mid = lc_mid_second;
  tl_log_reset (true);
  assert_int_equal (lc_run (p, &rep, &ls), 0);
  assert_true (tl_log_has ("another check is running"));
  tl_log_reset (false);
  assert_int_equal (ls.ls_mid_r, -EBUSY);
  assert_int_equal (rep.cr_problems, 0);

  /* The bound: what the hold keeps passes check_hold_pct of the space
   * free at its start. */
  assert_int_equal (zvol_tunable_set ("check_hold_pct", "5", err,
                                      sizeof err), 0);
  ls.ls_mid = lc_mid_fill;
  tl_log_reset (true);
  assert_int_equal (lc_run (p, &rep, &ls), -ENOSPC);
  assert_true (tl_log_has ("check cancelled"));
  assert_true (tl_log_has ("held frees would fill the pool"));
  tl_log_reset (false);
  print_message ("  held when cancelled: %" PRIu64 " bytes\n",
                 ls.ls_held_mid);
  assert_int_equal (lc_held (p), 0);
  assert_int_equal (zvol_tunable_set ("check_hold_pct", "50", err,
                                      sizeof err), 0);
  /* And then a check runs to its end again. */
  ls.ls_mid = NULL;
  assert_int_equal (lc_run (p, &rep, &ls), 0);
  assert_int_equal (rep.cr_problems, 0);
  assert_int_equal (tl_pool_close (p), 0);
  tl_check_clean (dev);
  unlink (dev);
}

/* ---- a power cut during a hold ---- */

/* A hold on, txgs that free what the hold's txg holds (carried on from
 * list to list), then the power cut at a random write: the pool imports
 * and nothing of what was held is leaked. */
static void
test_live_hold_powercut (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "lc-cut");
  uint64_t seed = tl_seed ("lc-cut");

  (void) state;
  for (unsigned round = 0; round < 6; round++) {
    pc_t *pc = pc_new (seed + round, PC_RANDOM);
    zvol_pool_config_t cfg;
    zvol_pool_t *p;

    assert_int_equal (tl_sparse_file (dev, LC_DEV_SIZE), 0);
    pc_watch (pc, true);
    tl_pool_cfg (&cfg, &dev, 1, LC_VOLSIZE, true);
    p = tl_pool_open_ok (&cfg);
    for (uint64_t off = 0; off < 8 * MiB; off += 4 * MiB)
      tl_vol_write (tl_vol (p), NULL, off, 4 * MiB, 0x11, 0);
    assert_int_equal (zv_pool_sync (p), 0);
    assert_int_equal (zv_alloc_hold_begin (lc_alloc (p), lc_synced (p)), 0);
    /* Txgs enough that a free not carried would have left the two
     * lists on disk, then the cut after a few more writes. */
    for (unsigned i = 0; i < 6 + round; i++) {
      tl_vol_write (tl_vol (p), NULL, (i % 2) * 4 * MiB, 4 * MiB, 0x20 + i,
                    0);
      assert_int_equal (zv_pool_sync (p), 0);
    }
    assert_true (lc_held (p) > 0);
    pc_cut_after_writes (pc, 1 + round * 7);
    tl_log_reset (true);
    for (unsigned i = 0; i < 4; i++) {
      uint8_t *buf = malloc (4 * MiB);
      assert_non_null (buf);
      tl_pat_fill (buf, 0, 4 * MiB, 0x30 + i);
      (void) zvol_write (tl_vol (p), buf, 0, 4 * MiB, 0);
      free (buf);
      (void) zv_pool_sync (p);
    }
    zv_alloc_hold_end (lc_alloc (p));
    (void) tl_pool_close (p);
    tl_log_reset (false);
    pc_settle (pc);
    pc_watch (pc, false);
    pc_free (pc);
    /* Imported again, and synced twice (the held frees applied), the
     * pool is clean. */
    tl_pool_cfg (&cfg, &dev, 1, 0, false);
    tl_check_clean (dev);
    p = tl_pool_open_ok (&cfg);
    for (unsigned i = 0; i < 3; i++) {
      tl_vol_write (tl_vol (p), NULL, 20 * MiB, 16 * KiB, 0x50 + i, 0);
      assert_int_equal (zv_pool_sync (p), 0);
    }
    assert_int_equal (tl_pool_close (p), 0);
    tl_check_clean (dev);
    unlink (dev);
  }
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_live_clean_while_writing),
    tl_test (test_live_hold_released),
    tl_test (test_live_damage),
    tl_test (test_live_ends),
    tl_test (test_live_hold_powercut),
  };
  return tl_main (tests, "check", NULL);
}
