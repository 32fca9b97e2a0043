/*
 * test_mem.c: the memory monitor (core/mem.c) and the buffer cache it
 * sizes: the shrink, hold and grow bands, floors and ceilings, several
 * clients, a real pool's cache giving its memory back, and the default
 * ceiling.  Available memory comes from a test source, samples are taken
 * with zv_mem_poll_now; the monitor's own thread samples once a minute
 * here (mem_poll_interval), so it does not interfere.
 */
#include <config.h>

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testlib.h"
#include "dbuf.h"
#include "mem.h"
#include "tunable.h"

/* Available memory the test pretends the system has. */
static int64_t fake_avail;

static int64_t
fake_source (void *arg)
{
  (void) arg;
  return fake_avail;
}

/* A client that only records. */
typedef struct {
  uint64_t fc_bytes;            /* "cached" */
  uint64_t fc_applied;          /* last target applied */
  unsigned fc_calls;
} fake_client_t;

static uint64_t
fc_size (void *arg)
{
  return ((fake_client_t *) arg)->fc_bytes;
}

static void
fc_apply (void *arg, uint64_t target)
{
  fake_client_t *fc = arg;

  fc->fc_applied = target;
  fc->fc_calls++;
  if (fc->fc_bytes > target)
    fc->fc_bytes = target;      /* as a cache evicts */
}

static int
fini (void)
{
  zv_mem_set_source (NULL, NULL);
  return 0;
}

/* Shrink by the shortfall off what is cached, hold in the band, grow a
 * 32nd of the ceiling per sample back to it. */
static void
test_bands (void **state)
{
  const uint64_t F = zv_mem_free_target (), max = 1024 * MiB;
  fake_client_t fc = { .fc_bytes = 600 * MiB };
  zv_mem_client_t *mc;

  (void) state;
  assert_true (F >= 64 * MiB && F <= 4096 * MiB);
  mc = zv_mem_register (max, 32 * MiB, fc_size, fc_apply, &fc);
  assert_int_equal (zv_mem_target (mc), max);

  /* Plenty: nothing to do (already at the ceiling). */
  fake_avail = (int64_t) (4 * F);
  zv_mem_poll_now ();
  assert_int_equal (fc.fc_calls, 0);

  /* 100 MiB short: the target goes 100 MiB under what is cached (not
   * under the ceiling, which would free nothing). */
  fake_avail = (int64_t) (F - 100 * MiB);
  zv_mem_poll_now ();
  assert_int_equal (fc.fc_calls, 1);
  assert_int_equal (zv_mem_target (mc), 500 * MiB - 1);
  assert_int_equal (fc.fc_bytes, 500 * MiB - 1);

  /* In the band: hold. */
  fake_avail = (int64_t) (F + F / 2);
  zv_mem_poll_now ();
  assert_int_equal (fc.fc_calls, 1);

  /* Very short: down to the floor, never under. */
  fake_avail = 0;
  zv_mem_poll_now ();
  assert_int_equal (zv_mem_target (mc), 32 * MiB);
  zv_mem_poll_now ();
  assert_int_equal (zv_mem_target (mc), 32 * MiB);

  /* Plenty again: a 32nd of the ceiling per sample, up to it. */
  fake_avail = (int64_t) (2 * F + 64 * GiB);
  unsigned calls = fc.fc_calls;
  zv_mem_poll_now ();
  assert_int_equal (zv_mem_target (mc), 32 * MiB + max / 32);
  for (int i = 0; i < 40; i++)
    zv_mem_poll_now ();
  assert_int_equal (zv_mem_target (mc), max);
  assert_int_equal (fc.fc_applied, max);
  assert_int_equal (fc.fc_calls, calls + 31);

  /* Growth takes no more than the memory above the band. */
  fake_avail = 0;
  zv_mem_poll_now ();
  fake_avail = (int64_t) (2 * F + 3 * MiB);
  zv_mem_poll_now ();
  assert_int_equal (zv_mem_target (mc), 32 * MiB + 3 * MiB);

  /* Unknown: nothing changes, and it is said once. */
  tl_log_reset (true);
  fake_avail = -ENOENT;
  zv_mem_poll_now ();
  zv_mem_poll_now ();
  assert_int_equal (zv_mem_target (mc), 35 * MiB);
  assert_true (tl_log_has ("available memory unknown"));
  tl_log_reset (false);
  zv_mem_unregister (mc);
}

/* Two clients share the shortfall; one gone, the other alone. */
static void
test_two_clients (void **state)
{
  const uint64_t F = zv_mem_free_target ();
  fake_client_t a = { .fc_bytes = 400 * MiB }, b = { .fc_bytes = 100 * MiB };
  zv_mem_client_t *ma = zv_mem_register (512 * MiB, 8 * MiB, fc_size,
                                         fc_apply, &a);
  zv_mem_client_t *mb = zv_mem_register (512 * MiB, 8 * MiB, fc_size,
                                         fc_apply, &b);

  (void) state;
  fake_avail = (int64_t) (F - 100 * MiB);
  zv_mem_poll_now ();
  assert_int_equal (zv_mem_target (ma), 350 * MiB - 1);
  assert_int_equal (zv_mem_target (mb), 50 * MiB - 1);
  zv_mem_unregister (mb);
  zv_mem_poll_now ();
  assert_int_equal (zv_mem_target (ma), 250 * MiB - 2);
  zv_mem_unregister (ma);
  /* No client: a sample is harmless. */
  zv_mem_poll_now ();
}

/* A real pool: its cache fills from reads, a shortage empties it to the
 * new target (stats say both), and it grows back when memory returns. */
static void
test_pool_cache (void **state)
{
  const uint64_t F = zv_mem_free_target (), vol = 48 * MiB;
  char path[512];
  const char *dev = tl_path (path, sizeof path, "mem");
  zvol_pool_config_t pc;
  zvol_pool_stats_t ps;
  zvol_pool_t *p;
  zvol_t *zv;
  uint8_t *buf = malloc (MiB);

  (void) state;
  fake_avail = (int64_t) (4 * F);
  assert_int_equal (tl_sparse_file (dev, 96 * MiB), 0);
  tl_pool_cfg (&pc, &dev, 1, vol, true);
  pc.pc_cache_size = 64 * MiB;
  p = tl_pool_open_ok (&pc);
  zv = tl_vol (p);
  for (uint64_t off = 0; off < vol; off += MiB) {
    tl_pat_fill (buf, off, MiB, 7);
    assert_int_equal (zvol_write (zv, buf, off, MiB, 0), 0);
  }
  assert_int_equal (tl_pool_close (p), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  pc.pc_cache_size = 64 * MiB;
  p = tl_pool_open_ok (&pc);
  zv = tl_vol (p);
  for (uint64_t off = 0; off < vol; off += MiB)
    assert_int_equal (zvol_read (zv, buf, off, MiB), 0);
  zvol_pool_get_stats (p, &ps);
  assert_int_equal (ps.ps_cache_limit, 64 * MiB);
  assert_int_equal (ps.ps_cache_target, 64 * MiB);
  assert_true (ps.ps_cache_bytes >= 40 * MiB);
  uint64_t before = ps.ps_cache_bytes;

  /* 10 MiB short: the cache evicts 10 MiB at once (its floor is 32 MiB,
   * a 64th of the ceiling but at least that). */
  fake_avail = (int64_t) (F - 10 * MiB);
  zv_mem_poll_now ();
  zvol_pool_get_stats (p, &ps);
  assert_true (ps.ps_cache_target <= before - 10 * MiB);
  assert_true (ps.ps_cache_target >= 32 * MiB);
  assert_true (ps.ps_cache_bytes <= ps.ps_cache_target);
  assert_true (ps.ps_cache_evictions > 0);
  /* Still right: evicted blocks are read again. */
  for (uint64_t off = 0; off < vol; off += MiB) {
    assert_int_equal (zvol_read (zv, buf, off, MiB), 0);
    assert_int_equal (tl_pat_check (buf, off, MiB, 7), -1);
  }
  zvol_pool_get_stats (p, &ps);
  assert_true (ps.ps_cache_bytes <= ps.ps_cache_target);

  /* Memory back: the target climbs to the ceiling. */
  fake_avail = (int64_t) (2 * F + 64 * GiB);
  for (int i = 0; i < 40; i++)
    zv_mem_poll_now ();
  zvol_pool_get_stats (p, &ps);
  assert_int_equal (ps.ps_cache_target, 64 * MiB);
  assert_int_equal (tl_pool_close (p), 0);
  free (buf);
}

/* The dbuf lever itself: a target evicts at once, clean bytes only. */
static void
test_dbuf_target (void **state)
{
  zv_dbuf_cache_t *c = zv_dbuf_cache_create (64 * 4 * 16384);
  zv_dbuf_stats_t st;
  int obj;

  (void) state;
  for (uint64_t b = 0; b < 256; b++) {
    zv_dbuf_t *db = zv_dbuf_hold (c, &obj, 0, b, 16384);
    pthread_mutex_lock (&db->db_mtx);
    zv_dbuf_set_data (c, db, zv_buf_alloc (16384));
    pthread_mutex_unlock (&db->db_mtx);
    zv_dbuf_rele (c, db);
  }
  assert_true (zv_dbuf_cache_bytes (c) > 128 * 16384);
  zv_dbuf_cache_set_target (c, 64 * 16384);
  assert_true (zv_dbuf_cache_bytes (c) <= 64 * 16384);
  zv_dbuf_get_stats (c, &st);
  assert_int_equal (st.cs_target, 64 * 16384);
  assert_int_equal (st.cs_limit, 64 * 4 * 16384);
  /* Never above the ceiling. */
  zv_dbuf_cache_set_target (c, UINT64_MAX);
  zv_dbuf_get_stats (c, &st);
  assert_int_equal (st.cs_target, 64 * 4 * 16384);
  zv_dbuf_cache_destroy (c);
}

/* The default ceiling is half of memory; cache_size= overrides it. */
static void
test_default_ceiling (void **state)
{
  char err[256];

  (void) state;
  assert_int_equal (zv_dbuf_cache_limit_default (), zv_mem_physical () / 2);
  assert_int_equal (zv_tunable_set ("cache_size", "16M", err, sizeof err), 0);
  assert_int_equal (zv_dbuf_cache_limit_default (), 16 * MiB);
  assert_int_equal (zv_tunable_set ("cache_size", "auto", err, sizeof err),
                    0);
  assert_int_equal (zv_tunable_set ("mem_free_target", "100M", err,
                                    sizeof err), 0);
  assert_int_equal (zv_mem_free_target (), 100 * MiB);
  assert_int_equal (zv_tunable_set ("mem_free_target", "auto", err,
                                    sizeof err), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_bands),
    tl_test (test_two_clients),
    tl_test (test_pool_cache),
    tl_test (test_dbuf_target),
    tl_test (test_default_ceiling),
  };

  char err[256];

  if (zv_tunable_set ("mem_poll_interval", "60000", err, sizeof err) < 0)
    return 1;
  zv_mem_set_source (fake_source, NULL);
  return tl_main (tests, "mem", fini);
}
