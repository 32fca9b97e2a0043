/*
 * test_rados.c: the RADOS device (core/dev_rados.c) with a real cluster,
 * through the public API: a pool created on RADOS, written, exported,
 * imported and read back; a txg sync's gathered write reaching the OSD
 * as one request per object (the OSD's op_w counter); its intent log on
 * RADOS; the exclusive lock
 * against a second import; a takeover that fences the holder; the
 * checks of names, missing devices (refused, nothing made) and mixed
 * kinds; and a cluster that goes away (EIO within the timeout, no
 * hang; an open that fails with a message).
 *
 * The cluster: main() runs itself again under tests/ceph/ceph-cluster.sh
 * ("run": one monitor, one memstore OSD on 127.0.0.1, stopped by PID when
 * this program ends, however it ends), so one cluster serves every test;
 * the last test stops it.  Without the Ceph packages the program skips
 * (77) and says why.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rados/librados.h>

#include "testlib.h"
#include "zv_util.h"

#define VOLSIZE (24 * MiB)
#define DEVSIZE (40 * MiB)
#define TIMEOUT_S 3             /* rados_op_timeout, rados_mount_timeout */

static const char *ceph_pool;

/* Whether object NAME exists in the test pool, asked of the cluster
 * directly with a client of its own. */
static bool
obj_exists (const char *name)
{
  rados_t cl;
  rados_ioctx_t io;
  uint64_t size;
  time_t mtime;
  int r;

  assert_int_equal (rados_create (&cl, NULL), 0);
  assert_int_equal (rados_conf_read_file (cl, getenv ("CEPH_CONF")), 0);
  assert_int_equal (rados_connect (cl), 0);
  assert_int_equal (rados_ioctx_create (cl, ceph_pool, &io), 0);
  r = rados_stat (io, name, &size, &mtime);
  rados_ioctx_destroy (io);
  rados_shutdown (cl);
  assert_true (r == 0 || r == -ENOENT);
  return r == 0;
}

/* The OSD's count of write requests (its perf counter op_w, from its
 * admin socket). */
static uint64_t
osd_writes (void)
{
  char cmd[1024], buf[65536];
  const char *at;
  size_t n;
  FILE *f;

  snprintf (cmd, sizeof cmd, "ceph --admin-daemon '%s/run/osd.0.asok' "
            "perf dump 2>/dev/null", getenv ("ZV_CEPH_DIR"));
  f = popen (cmd, "r");
  assert_non_null (f);
  n = fread (buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  assert_int_equal (pclose (f), 0);
  /* The OSD's own section, not its objecter's (which has an op_w too). */
  at = strstr (buf, "\"osd\": {");
  assert_non_null (at);
  at = strstr (at, "\"op_w\":");
  assert_non_null (at);
  return strtoull (at + strlen ("\"op_w\":"), NULL, 10);
}

/* rados:POOL/NAME in buf. */
static const char *
dev_name (char *buf, size_t len, const char *name)
{
  snprintf (buf, len, "rados:%s/%s", ceph_pool, name);
  return buf;
}

/* A configuration of one RADOS device (made at create). */
static void
rados_cfg (zvol_pool_config_t *pc, const char *const *devs, unsigned n,
           bool create)
{
  tl_pool_cfg (pc, devs, n, VOLSIZE, create);
  pc->pc_ceph_conf = getenv ("CEPH_CONF");
  pc->pc_rados_size = DEVSIZE;
  pc->pc_rados_log_size = 32 * MiB;
}

/* Create, write (some FUA, some flushed, some left to the close), export,
 * import, read back; then once more after an import with no close in
 * between the writes. */
static void
test_roundtrip (void **state)
{
  char d[128];
  const char *devs[] = { dev_name (d, sizeof d, "rt") };
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  zvol_t *zv;

  (void) state;
  rados_cfg (&pc, devs, 1, true);
  p = tl_pool_open_ok (&pc);
  zv = tl_vol (p);
  tl_vol_write (zv, NULL, 0, 1 * MiB, 1, 0);
  tl_vol_write (zv, NULL, 5 * MiB - 4096, 3 * MiB + 8192, 2, ZVOL_FUA);
  tl_vol_write (zv, NULL, VOLSIZE - 64 * KiB, 64 * KiB, 3, 0);
  assert_int_equal (zvol_flush (zv), 0);
  tl_vol_write (zv, NULL, 12 * MiB, 128 * KiB, 4, 0);
  tl_vol_check (zv, 5 * MiB - 4096, 3 * MiB + 8192, 2);
  assert_int_equal (tl_pool_close (p), 0);

  rados_cfg (&pc, devs, 1, false);
  p = tl_pool_open_ok (&pc);
  zv = tl_vol (p);
  tl_vol_check (zv, 0, 1 * MiB, 1);
  tl_vol_check (zv, 5 * MiB - 4096, 3 * MiB + 8192, 2);
  tl_vol_check (zv, VOLSIZE - 64 * KiB, 64 * KiB, 3);
  tl_vol_check (zv, 12 * MiB, 128 * KiB, 4);
  tl_vol_write (zv, NULL, 2 * MiB, 256 * KiB, 5, ZVOL_FUA);
  assert_int_equal (tl_pool_close (p), 0);

  p = tl_pool_open_ok (&pc);
  tl_vol_check (tl_vol (p), 2 * MiB, 256 * KiB, 5);
  tl_vol_check (tl_vol (p), 0, 1 * MiB, 1);
  assert_int_equal (tl_pool_close (p), 0);
}

/* The txg sync's gathered write of many volume blocks reaches the OSD as
 * one request per object it touches, not one per block: 4 MiB of new
 * data (256 blocks of 16 KiB) and the sync's metadata take far fewer
 * than 256 OSD writes. */
static void
test_gathered_write (void **state)
{
  char d[128];
  const char *devs[] = { dev_name (d, sizeof d, "gw") };
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  uint64_t w0, w;

  (void) state;
  rados_cfg (&pc, devs, 1, true);
  p = tl_pool_open_ok (&pc);
  w0 = osd_writes ();
  tl_vol_write (tl_vol (p), NULL, 0, 4 * MiB, 41, 0);
  {
    /* Left to the sync: no direct writes on RADOS (dmu_write.c). */
    zvol_stats_t vs;
    zvol_get_stats (tl_vol (p), &vs);
    assert_int_equal (vs.vs_direct_blocks, 0);
  }
  assert_int_equal (tl_pool_close (p), 0);
  w = osd_writes () - w0;
  printf ("# 4 MiB written and synced: %" PRIu64 " OSD write requests\n", w);
  assert_true (w < 128);

  rados_cfg (&pc, devs, 1, false);
  p = tl_pool_open_ok (&pc);
  tl_vol_check (tl_vol (p), 0, 4 * MiB, 41);
  assert_int_equal (tl_pool_close (p), 0);
}

/* Two data devices and a log device, all on RADOS. */
static void
test_log_device (void **state)
{
  char d0[128], d1[128], lg[128];
  const char *devs[] = { dev_name (d0, sizeof d0, "two-0"),
                         dev_name (d1, sizeof d1, "two-1") };
  zvol_pool_config_t pc;
  zvol_pool_t *p;

  (void) state;
  rados_cfg (&pc, devs, 2, true);
  pc.pc_logdevice = dev_name (lg, sizeof lg, "two-log");
  p = tl_pool_open_ok (&pc);
  for (unsigned i = 0; i < 8; i++)
    tl_vol_write (tl_vol (p), NULL, i * 2 * MiB, 192 * KiB, 10 + i,
                  ZVOL_FUA);
  assert_int_equal (tl_pool_close (p), 0);

  /* The log device is needed to import, and is found on RADOS. */
  rados_cfg (&pc, devs, 2, false);
  tl_log_reset (true);
  assert_int_equal (zvol_pool_open (&pc, &p), -EINVAL);
  assert_true (tl_log_has ("has a separate log device"));
  tl_log_reset (false);
  pc.pc_logdevice = lg;
  p = tl_pool_open_ok (&pc);
  for (unsigned i = 0; i < 8; i++)
    tl_vol_check (tl_vol (p), i * 2 * MiB, 192 * KiB, 10 + i);
  assert_int_equal (tl_pool_close (p), 0);
}

/* A second import of a pool in use is refused at once, naming the
 * holder; after the close it imports. */
static void
test_lock (void **state)
{
  char d[128];
  const char *devs[] = { dev_name (d, sizeof d, "lk") };
  zvol_pool_config_t pc;
  zvol_pool_t *p, *p2 = NULL;
  char cookie[128];
  uint64_t t0;

  (void) state;
  rados_cfg (&pc, devs, 1, true);
  p = tl_pool_open_ok (&pc);
  tl_vol_write (tl_vol (p), NULL, 0, 64 * KiB, 7, ZVOL_FUA);

  rados_cfg (&pc, devs, 1, false);
  tl_log_reset (true);
  t0 = zv_now_ns ();
  assert_int_equal (zvol_pool_open (&pc, &p2), -EBUSY);
  assert_true (zv_now_ns () - t0 < 5000000000ull);
  assert_null (p2);
  snprintf (cookie, sizeof cookie, ":%ld:", (long) getpid ());
  assert_true (tl_log_has ("in use by another server"));
  assert_true (tl_log_has ("held by client."));
  assert_true (tl_log_has (cookie));
  assert_true (tl_log_has ("lock break"));
  /* create=true on it is refused the same way, before anything. */
  rados_cfg (&pc, devs, 1, true);
  assert_int_equal (zvol_pool_open (&pc, &p2), -EBUSY);
  tl_log_reset (false);

  tl_vol_check (tl_vol (p), 0, 64 * KiB, 7);
  assert_int_equal (tl_pool_close (p), 0);
  rados_cfg (&pc, devs, 1, false);
  p = tl_pool_open_ok (&pc);
  tl_vol_check (tl_vol (p), 0, 64 * KiB, 7);
  assert_int_equal (tl_pool_close (p), 0);
}

/* A second server takes the pool from a first that still runs
 * (pc_rados_takeover): it sees every FUA write of the first (the replay
 * of the log device), and the first is fenced: its writes fail with EIO
 * and land nowhere. */
static void
test_takeover (void **state)
{
  char d[128], lg[128];
  const char *devs[] = { dev_name (d, sizeof d, "tk") };
  zvol_pool_config_t pc;
  zvol_pool_t *a, *b;
  uint8_t *buf = malloc (64 * KiB);

  (void) state;
  assert_non_null (buf);
  rados_cfg (&pc, devs, 1, true);
  pc.pc_logdevice = dev_name (lg, sizeof lg, "tk-log");
  a = tl_pool_open_ok (&pc);
  tl_vol_write (tl_vol (a), NULL, 0, 1 * MiB, 21, 0);
  assert_int_equal (zvol_flush (tl_vol (a)), 0);
  tl_vol_write (tl_vol (a), NULL, 3 * MiB, 128 * KiB, 22, ZVOL_FUA);

  rados_cfg (&pc, devs, 1, false);
  pc.pc_logdevice = lg;
  pc.pc_rados_takeover = true;
  tl_log_reset (true);
  b = tl_pool_open_ok (&pc);
  assert_true (tl_log_has ("taking over from client."));
  assert_true (tl_log_has ("blocklisting that client"));
  tl_log_reset (false);
  tl_vol_check (tl_vol (b), 0, 1 * MiB, 21);
  tl_vol_check (tl_vol (b), 3 * MiB, 128 * KiB, 22);

  /* The old holder is fenced. */
  tl_log_reset (true);
  memset (buf, 0x44, 64 * KiB);
  assert_int_equal (zvol_write (tl_vol (a), buf, 3 * MiB, 64 * KiB,
                                ZVOL_FUA), -EIO);
  (void) tl_pool_close (a);
  tl_log_reset (false);
  tl_vol_check (tl_vol (b), 3 * MiB, 128 * KiB, 22);
  tl_vol_write (tl_vol (b), NULL, 5 * MiB, 64 * KiB, 23, ZVOL_FUA);
  assert_int_equal (tl_pool_close (b), 0);

  pc.pc_rados_takeover = false;
  b = tl_pool_open_ok (&pc);
  tl_vol_check (tl_vol (b), 3 * MiB, 128 * KiB, 22);
  tl_vol_check (tl_vol (b), 5 * MiB, 64 * KiB, 23);
  assert_int_equal (tl_pool_close (b), 0);
  free (buf);
}

/* Names, missing devices, kinds mixed: clear errors, nothing made. */
static void
test_refusals (void **state)
{
  char d[128], f[512], bad[128];
  const char *devs[2];
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;

  (void) state;
  tl_log_reset (true);
  devs[0] = dev_name (d, sizeof d, "never-made");
  rados_cfg (&pc, devs, 1, false);
  assert_int_equal (zvol_pool_open (&pc, &p), -ENOENT);
  assert_true (tl_log_has ("no such RADOS device"));
  /* ... and the refused open made nothing (no header object). */
  assert_false (obj_exists ("never-made"));
  assert_int_equal (zvol_pool_open (&pc, &p), -ENOENT);
  assert_true (tl_log_has ("no such RADOS device"));
  assert_false (obj_exists ("never-made"));

  snprintf (bad, sizeof bad, "rados:%s", ceph_pool);
  devs[0] = bad;
  rados_cfg (&pc, devs, 1, true);
  assert_int_equal (zvol_pool_open (&pc, &p), -EINVAL);
  assert_true (tl_log_has ("not a RADOS device name"));

  devs[0] = "rados:no-such-pool/x";
  rados_cfg (&pc, devs, 1, true);
  assert_int_equal (zvol_pool_open (&pc, &p), -ENOENT);
  assert_true (tl_log_has ("no Ceph pool named no-such-pool"));

  tl_path (f, sizeof f, "local");
  assert_int_equal (tl_sparse_file (f, DEVSIZE), 0);
  devs[0] = f;
  devs[1] = dev_name (d, sizeof d, "mixed");
  rados_cfg (&pc, devs, 2, true);
  assert_int_equal (zvol_pool_open (&pc, &p), -EINVAL);
  assert_true (tl_log_has ("are all RADOS devices or all files"));
  rados_cfg (&pc, devs, 1, true);
  pc.pc_logdevice = d;
  assert_int_equal (zvol_pool_open (&pc, &p), -EINVAL);
  assert_true (tl_log_has ("is a RADOS device and"));
  assert_null (p);
  tl_log_reset (false);
}

/* Last: the cluster stops under an open pool.  A FUA write fails with
 * EIO within a bounded time (the op timeout: after the first request
 * timed out the others fail at once), the close returns as soon, and an
 * open fails with a message within the mount timeout. */
static void
test_cluster_down (void **state)
{
  char d[128], cmd[1024];
  const char *devs[] = { dev_name (d, sizeof d, "down") };
  const char *dir = getenv ("ZV_CEPH_DIR"), *top = getenv ("ZVOL_TOP_SRCDIR");
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  uint8_t *buf = malloc (256 * KiB);
  uint64_t t0, el;
  int r;

  (void) state;
  assert_non_null (buf);
  rados_cfg (&pc, devs, 1, true);
  p = tl_pool_open_ok (&pc);
  tl_vol_write (tl_vol (p), NULL, 0, 256 * KiB, 9, ZVOL_FUA);

  snprintf (cmd, sizeof cmd, "%s/tests/ceph/ceph-cluster.sh stop '%s'",
            top, dir);
  assert_int_equal (system (cmd), 0);

  tl_log_reset (true);
  t0 = zv_now_ns ();
  memset (buf, 0x33, 256 * KiB);
  r = zvol_write (tl_vol (p), buf, 1 * MiB, 256 * KiB, ZVOL_FUA);
  el = (zv_now_ns () - t0) / 1000000;
  printf ("# FUA write with the cluster down: %s after %" PRIu64 " ms\n",
          strerror (-r), el);
  assert_int_equal (r, -EIO);
  assert_true (el < 4 * TIMEOUT_S * 1000);
  assert_true (tl_log_has ("Connection timed out"));
  t0 = zv_now_ns ();
  (void) tl_pool_close (p);
  el = (zv_now_ns () - t0) / 1000000;
  printf ("# close with the cluster down: %" PRIu64 " ms\n", el);
  assert_true (el < 20 * TIMEOUT_S * 1000);

  t0 = zv_now_ns ();
  rados_cfg (&pc, devs, 1, false);
  p = NULL;
  r = zvol_pool_open (&pc, &p);
  el = (zv_now_ns () - t0) / 1000000;
  printf ("# open with the cluster down: %s after %" PRIu64 " ms\n",
          strerror (-r), el);
  assert_int_equal (r, -EIO);
  assert_true (el < 3 * TIMEOUT_S * 1000);
  assert_true (tl_log_has ("cannot connect to the Ceph cluster"));
  tl_log_reset (false);
  free (buf);
}

int
main (int argc, char **argv)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_roundtrip),
    tl_test (test_gathered_write),
    tl_test (test_log_device),
    tl_test (test_lock),
    tl_test (test_takeover),
    tl_test (test_refusals),
    tl_test (test_cluster_down),
  };
  char err[256];

  (void) argc;
#if defined(__SANITIZE_THREAD__)
  /* librados and libceph-common are not built with ThreadSanitizer: the
   * atomics and locks inside them are invisible to it, and every run
   * reports races between Ceph's own threads (its buffers' reference
   * counts, its string copies).  The device's own code runs in the
   * normal and the ASan builds. */
  printf ("test_rados: skipped: librados is not built with ThreadSanitizer, "
          "which then reports races inside Ceph's own threads\n");
  return 77;
#endif
  ceph_pool = getenv ("ZV_CEPH_POOL");
  if (ceph_pool == NULL) {
    /* Run again under the cluster script, which stops the cluster by
     * PID when we end, even by a crash. */
    const char *top = getenv ("ZVOL_TOP_SRCDIR");
    static char script[1024], dir[] = "/var/tmp/zv-ceph.XXXXXX";

    if (top == NULL)
      top = ".";
    snprintf (script, sizeof script, "%s/tests/ceph/ceph-cluster.sh", top);
    if (mkdtemp (dir) == NULL) {
      perror ("mkdtemp");
      return 1;
    }
    setenv ("ZV_CEPH_DIR", dir, 1);
    setenv ("ZV_CEPH_CLEANUP", "1", 1);
    execl ("/bin/bash", "bash", script, "run", dir, argv[0], (char *) NULL);
    perror (script);
    return 1;
  }
  /* Small timeouts: the down-cluster test waits for them. */
  if (zvol_tunable_set ("rados_op_timeout", "3", err, sizeof err) < 0 ||
      zvol_tunable_set ("rados_mount_timeout", "3", err, sizeof err) < 0) {
    fprintf (stderr, "%s\n", err);
    return 1;
  }
  return tl_main (tests, "rados", NULL);
}
