/*
 * test_pool.c: unit tests for the pool (core/pool.c) through the public
 * API of core/zvol.h: create, import, export, the checks done before
 * anything is written, full pools, several devices, rewind past a
 * damaged txg, label damage, exclusive opens, the txg history, the
 * deferred-free rule (looked at through core/pool.h's internals) and
 * crash consistency (a child process killed with SIGKILL while it writes
 * and flushes; the parent imports and checks every acknowledged write).
 *
 * Devices are sparse files in a mkdtemp directory under /var/tmp (20
 * crash rounds; 6 under TSan, which is 5-15x slower).  No
 * test starts the engine's thread except the crash test's child, so
 * txgs here sync exactly when a test flushes, syncs or closes.
 *
 * Forking: the device layer keeps one io_uring per thread, and a forked
 * child shares the mappings of its parent's rings.  The child therefore
 * does all its pool work on a thread of its own (a fresh ring) and the
 * parent never has a pool open across a fork.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <poll.h>
#include <sys/wait.h>

#include "testlib.h"
#include "pool.h"
#include "label.h"

#define DEV_SIZE (64 * MiB)
#define BS 16384u

/* Create a one-device pool on a new sparse file and close it. */
static void
make_pool (const char *path, uint64_t devsize, uint64_t volsize)
{
  zvol_pool_config_t pc;

  assert_int_equal (tl_sparse_file (path, devsize), 0);
  tl_pool_cfg (&pc, &path, 1, volsize, true);
  assert_int_equal (tl_pool_close (tl_pool_open_ok (&pc)), 0);
}

/* ---- create / import ---- */

/* Write, export, import: the same pool, the same bytes. */
static void
test_roundtrip (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "rt");
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  uint64_t guid;

  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 16 * MiB, true);
  pc.pc_name = "roundtrip";
  p = tl_pool_open_ok (&pc);
  zvol_t *zv = tl_vol (p);
  assert_int_equal (zvol_size (zv), 16 * MiB);
  assert_int_equal (zvol_blocksize (zv), BS);
  assert_false (zvol_is_readonly (zv));
  guid = zvol_pool_guid (p);
  tl_vol_write (zv, NULL, 0, 65536, 1, 0);
  tl_vol_write (zv, NULL, 5 * MiB + 777, 100000, 2, 0);
  tl_vol_write (zv, NULL, 16 * MiB - 4096, 4096, 3, 0);
  assert_int_equal (tl_pool_close (p), 0);

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  p = tl_pool_open_ok (&pc);
  zv = tl_vol (p);
  assert_string_equal (zvol_pool_name (p), "roundtrip");
  assert_int_equal (zvol_pool_guid (p), guid);
  assert_int_equal (zvol_size (zv), 16 * MiB);
  tl_vol_check (zv, 0, 65536, 1);
  tl_vol_check (zv, 5 * MiB + 777, 100000, 2);
  tl_vol_check (zv, 16 * MiB - 4096, 4096, 3);
  assert_int_equal (tl_pool_close (p), 0);
}

/* Create refuses a device that holds a pool (intact or damaged), and
 * writes nothing. */
static void
test_create_refuses_pool (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "exist");
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint64_t h;

  make_pool (dev, DEV_SIZE, 8 * MiB);
  h = tl_hash_file (dev);
  assert_int_not_equal (h, 0);
  tl_pool_cfg (&pc, &dev, 1, 8 * MiB, true);
  tl_log_reset (true);
  assert_int_equal (tl_pool_open (&pc, &p), -EEXIST);
  assert_null (p);
  assert_true (tl_log_has ("already a device of pool"));
  assert_int_equal (tl_file_allocated (dev) > 0, 1);
  assert_int_equal (tl_hash_file (dev), h);

  /* Both configuration copies damaged: still refused. */
  assert_int_equal (tl_file_flip (dev, 64), 0);
  assert_int_equal (tl_file_flip (dev, DEV_SIZE - ZV_LABEL_SIZE + 64), 0);
  h = tl_hash_file (dev);
  assert_int_equal (tl_pool_open (&pc, &p), -EEXIST);
  assert_true (tl_log_has ("holds a damaged pool"));
  assert_int_equal (tl_hash_file (dev), h);
  tl_log_reset (false);
}

/* Import of a device that never held a pool: -EINVAL, with a hint. */
static void
test_import_zeroed (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "zeroed");
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;

  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  tl_log_reset (true);
  assert_int_equal (tl_pool_open (&pc, &p), -EINVAL);
  assert_null (p);
  assert_true (tl_log_has ("create=true"));
  assert_int_equal (tl_file_allocated (dev), 0);

  /* A device that does not exist. */
  const char *missing = tl_path (path, sizeof path, "nosuchfile");
  tl_pool_cfg (&pc, &missing, 1, 0, false);
  assert_int_equal (tl_pool_open (&pc, &p), -ENOENT);
  tl_log_reset (false);
}

/* Too small a device, or a volume larger than the pool without sparse:
 * -EINVAL, and nothing written. */
static void
test_create_checks (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "small");
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;

  tl_log_reset (true);
  assert_int_equal (tl_sparse_file (dev, ZV_MIN_DEV_SIZE - ZV_SECTOR), 0);
  tl_pool_cfg (&pc, &dev, 1, 1 * MiB, true);
  assert_int_equal (tl_pool_open (&pc, &p), -EINVAL);
  assert_true (tl_log_has ("too small"));
  assert_int_equal (tl_file_allocated (dev), 0);

  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, DEV_SIZE, true);
  assert_int_equal (tl_pool_open (&pc, &p), -EINVAL);
  assert_true (tl_log_has ("sparse=true"));
  assert_int_equal (tl_file_allocated (dev), 0);

  /* Bad volume size and block size. */
  tl_pool_cfg (&pc, &dev, 1, 1000, true);
  assert_int_equal (tl_pool_open (&pc, &p), -EINVAL);
  tl_pool_cfg (&pc, &dev, 1, MiB, true);
  pc.pc_volblocksize = 12288;
  assert_int_equal (tl_pool_open (&pc, &p), -EINVAL);
  assert_int_equal (tl_file_allocated (dev), 0);

  /* The same size with sparse is accepted. */
  tl_pool_cfg (&pc, &dev, 1, DEV_SIZE, true);
  pc.pc_sparse = true;
  tl_log_reset (false);
  assert_int_equal (tl_pool_close (tl_pool_open_ok (&pc)), 0);
}

/* A thin volume fills the pool: the write that does not fit fails with
 * -ENOSPC; every acknowledged write survives flush, export and import,
 * and freeing space makes room again. */
static void
test_sparse_enospc (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "thin");
  const uint32_t chunk = 1 * MiB;
  const uint64_t volsize = 256 * MiB;
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  zvol_t *zv;
  uint8_t *buf = malloc (chunk);
  uint64_t n = 0;
  int r = 0;

  assert_int_equal (tl_sparse_file (dev, 32 * MiB), 0);
  tl_pool_cfg (&pc, &dev, 1, volsize, true);
  pc.pc_sparse = true;
  p = tl_pool_open_ok (&pc);
  zv = tl_vol (p);
  tl_log_reset (true);
  for (n = 0; n * chunk < volsize; n++) {
    tl_pat_fill (buf, n * chunk, chunk, 40);
    r = zvol_write (zv, buf, n * chunk, chunk, 0);
    if (r < 0)
      break;
    assert_int_equal (zvol_flush (zv), 0);
  }
  assert_int_equal (r, -ENOSPC);
  assert_true (tl_log_has ("is full"));
  assert_true (n >= 16);             /* 32 MiB devices hold 16 MiB at least */
  assert_int_equal (zvol_flush (zv), 0);
  /* Still full, still clean. */
  tl_pat_fill (buf, n * chunk, chunk, 40);
  assert_int_equal (zvol_write (zv, buf, n * chunk, chunk, 0), -ENOSPC);
  assert_int_equal (zv_pool_sync (p), 0);
  tl_log_reset (false);
  assert_int_equal (tl_pool_close (p), 0);

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  p = tl_pool_open_ok (&pc);
  zv = tl_vol (p);
  for (uint64_t i = 0; i < n; i++)
    tl_vol_check (zv, i * chunk, chunk, 40);

  /* Still full after the import. */
  tl_log_reset (true);
  tl_pat_fill (buf, n * chunk, chunk, 41);
  assert_int_equal (zvol_write (zv, buf, n * chunk, chunk, 0), -ENOSPC);
  tl_log_reset (false);
  /* Trim a quarter; once the frees are past the defer window (two more
   * txgs: an idle pool does not sync, so each rewrites a sector) there
   * is room again. */
  assert_int_equal (zvol_trim (zv, 0, n / 4 * chunk, 0), 0);
  for (int i = 0; i < 3; i++) {
    assert_int_equal (zvol_write (zv, buf, n / 4 * chunk, 4096, 0), 0);
    assert_int_equal (zv_pool_sync (p), 0);
  }
  assert_int_equal (zvol_write (zv, buf, n * chunk, chunk, 0), 0);
  assert_int_equal (tl_pool_close (p), 0);

  p = tl_pool_open_ok (&pc);
  zv = tl_vol (p);
  tl_vol_check (zv, n * chunk, chunk, 41);
  tl_vol_check (zv, (n - 1) * chunk, chunk, 40);
  tl_vol_check (zv, n / 4 * chunk + 4096, chunk - 4096, 40);
  assert_int_equal (tl_pool_close (p), 0);
  free (buf);
}

/* A pool holds its volume by name: open once at a time, closed before
 * the pool; read-only with the pool. */
static void
test_volume_open (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "vols");
  zvol_pool_config_t pc;
  zvol_config_t vc;
  zvol_pool_t *p = NULL;
  zvol_t *zv = NULL, *zv2 = NULL;

  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 8 * MiB, true);
  pc.pc_name = "tank";
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  /* Format 1: one volume, named as the pool. */
  assert_int_equal (zvol_open (p, "nosuch", NULL, &zv), -ENOENT);
  assert_null (zv);
  assert_true (tl_log_has ("has no volume 'nosuch'"));
  /* A name is a client's (an NBD export name): it never writes control
   * characters or lines of its own into the log, whatever its length. */
  {
    char *big = zv_alloc (4097);
    memset (big, 'x', 4096);
    big[4096] = '\0';
    tl_log_reset (true);
    assert_int_equal (zvol_open (p, "a\nb\x1b[2J", NULL, &zv), -ENOENT);
    assert_true (tl_log_has ("has no volume 'a\\x0ab\\x1b[2J'"));
    assert_false (tl_log_has ("a\nb"));
    assert_int_equal (zvol_open (p, big, NULL, &zv), -ENOENT);
    assert_true (tl_log_has ("xxx...'"));
    assert_null (zv);
    free (big);
    tl_log_reset (false);
  }
  assert_int_equal (zvol_open (p, "tank", NULL, &zv), 0);
  assert_string_equal (zvol_name (zv), "tank");
  assert_int_equal (zvol_size (zv), 8 * MiB);
  assert_int_equal (zvol_open (p, NULL, NULL, &zv2), -EBUSY);
  assert_null (zv2);
  /* A bad property is refused before anything is held. */
  zvol_config_init (&vc);
  vc.vc_sync = 7;
  assert_int_equal (zvol_open (p, NULL, &vc, &zv2), -EINVAL);
  tl_vol_write (zv, NULL, 0, BS, 31, 0);
  assert_int_equal (zvol_pool_close (p), -EBUSY);
  assert_true (tl_log_has ("volume 'tank' is still open"));
  tl_vol_check (zv, 0, BS, 31);        /* the refused close touched nothing */
  assert_int_equal (zvol_close (zv), 0);
  /* Closed, it can be opened again in the same pool. */
  assert_int_equal (zvol_open (p, NULL, NULL, &zv), 0);
  tl_vol_check (zv, 0, BS, 31);
  assert_int_equal (zvol_close (zv), 0);
  assert_int_equal (zvol_pool_close (p), 0);

  pc.pc_create = false;
  pc.pc_readonly = true;
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  assert_true (zvol_pool_is_readonly (p));
  assert_int_equal (zvol_open (p, NULL, NULL, &zv), 0);
  assert_true (zvol_is_readonly (zv));
  tl_vol_check (zv, 0, BS, 31);
  assert_int_equal (zvol_write (zv, path, 0, 512, 0), -EROFS);
  assert_int_equal (zvol_close (zv), 0);
  assert_int_equal (zvol_pool_close (p), 0);
  unlink (dev);
}

/* ---- several devices ---- */

/* Writes stripe over both devices; import needs exactly the pool's
 * devices, in any order. */
static void
test_two_devices (void **state)
{
  char pa[512], pb[512], pc2[512], pd[512];
  const char *a = tl_path (pa, sizeof pa, "two-a");
  const char *b = tl_path (pb, sizeof pb, "two-b");
  const char *c = tl_path (pc2, sizeof pc2, "two-c");
  const char *d = tl_path (pd, sizeof pd, "two-d");
  zvol_pool_config_t pc;
  zvol_pool_t *p, *q = NULL;
  int64_t a0, b0;

  assert_int_equal (tl_sparse_file (a, DEV_SIZE), 0);
  assert_int_equal (tl_sparse_file (b, DEV_SIZE), 0);
  {
    const char *devs[] = { a, b };
    tl_pool_cfg (&pc, devs, 2, 64 * MiB, true);
  }
  p = tl_pool_open_ok (&pc);
  assert_true (tl_pool_stats_has (p, "devices 2\n"));
  a0 = tl_file_allocated (a);
  b0 = tl_file_allocated (b);
  for (unsigned i = 0; i < 8; i++)
    tl_vol_write (tl_vol (p), NULL, i * MiB, MiB, 60 + i, 0);
  assert_int_equal (zvol_flush (tl_vol (p)), 0);
  assert_true (tl_file_allocated (a) - a0 >= (int64_t) (2 * MiB));
  assert_true (tl_file_allocated (b) - b0 >= (int64_t) (2 * MiB));
  assert_int_equal (tl_pool_close (p), 0);

  /* Another pool, of one device. */
  make_pool (c, DEV_SIZE, MiB);
  /* And another two-device pool. */
  assert_int_equal (tl_sparse_file (d, DEV_SIZE), 0);
  {
    const char *devs[] = { c, d };
    tl_pool_cfg (&pc, devs, 2, MiB, true);
    tl_log_reset (true);
    assert_int_equal (tl_pool_open (&pc, &q), -EEXIST);  /* c is taken */
  }

  tl_log_reset (true);
  {
    const char *devs[] = { a };
    tl_pool_cfg (&pc, devs, 1, 0, false);
    assert_int_equal (tl_pool_open (&pc, &q), -EINVAL);
    assert_true (tl_log_has ("but 1 given"));
  }
  {
    const char *devs[] = { a, c };
    tl_pool_cfg (&pc, devs, 2, 0, false);
    assert_int_equal (tl_pool_open (&pc, &q), -EINVAL);
    assert_true (tl_log_has ("belongs to pool"));
  }
  {
    const char *devs[] = { a, b, c };
    tl_pool_cfg (&pc, devs, 3, 0, false);
    assert_int_not_equal (tl_pool_open (&pc, &q), 0);
  }
  assert_null (q);
  tl_log_reset (false);

  /* Swapped order: fine (and every failed attempt let go of its locks). */
  {
    const char *devs[] = { b, a };
    tl_pool_cfg (&pc, devs, 2, 0, false);
  }
  p = tl_pool_open_ok (&pc);
  for (unsigned i = 0; i < 8; i++)
    tl_vol_check (tl_vol (p), i * MiB, MiB, 60 + i);
  assert_int_equal (tl_pool_close (p), 0);
}

/* A device named twice is refused, and the refusal lets go of every
 * device it had opened (else the pool stays locked until exit). */
static void
test_duplicate_device (void **state)
{
  char pa[512];
  const char *a = tl_path (pa, sizeof pa, "dup");
  zvol_pool_config_t pc;
  zvol_pool_t *q = NULL;

  make_pool (a, DEV_SIZE, MiB);
  {
    const char *devs[] = { a, a };
    tl_pool_cfg (&pc, devs, 2, 0, false);
    tl_log_reset (true);
    assert_int_equal (tl_pool_open (&pc, &q), -EINVAL);
    assert_true (tl_log_has ("given twice"));
    assert_null (q);
  }
  tl_pool_cfg (&pc, &a, 1, 0, false);
  tl_log_reset (false);
  assert_int_equal (tl_pool_open (&pc, &q), 0);   /* not -EBUSY */
  assert_int_equal (tl_pool_close (q), 0);
}

/* The same file under another name (a hard link, a symlink) is the same
 * device: refused as a second data device and as the log device, before
 * anything is opened (no lock message), and nothing is written.  The
 * intent log's size is checked with messages naming zil_size. */
static void
test_same_device_identity (void **state)
{
  char pa[512], ph[512], ps[512], pl[512], pn[512];
  const char *a = tl_path (pa, sizeof pa, "ident");
  const char *hard = tl_path (ph, sizeof ph, "ident-hard");
  const char *sym = tl_path (ps, sizeof ps, "ident-sym");
  const char *lg = tl_path (pl, sizeof pl, "ident-log");
  const char *n = tl_path (pn, sizeof pn, "ident-new");
  zvol_pool_config_t pc;
  zvol_pool_t *q = NULL;
  uint64_t h;

  make_pool (a, DEV_SIZE, MiB);
  assert_int_equal (link (a, hard), 0);
  assert_int_equal (symlink (a, sym), 0);
  h = tl_hash_file (a);

  /* Data devices: a hard link to a device already given. */
  {
    const char *devs[] = { a, hard };
    tl_pool_cfg (&pc, devs, 2, 0, false);
    tl_log_reset (true);
    assert_int_equal (tl_pool_open (&pc, &q), -EINVAL);
    assert_null (q);
    assert_true (tl_log_has ("are the same file: device given twice"));
    assert_false (tl_log_has ("in use"));
  }
  /* The log device: the same path, a symlink, a hard link; import and
   * create alike. */
  {
    const char *logs[] = { a, sym, hard };
    for (unsigned i = 0; i < 3; i++)
      for (int create = 0; create <= 1; create++) {
        tl_pool_cfg (&pc, &a, 1, create ? MiB : 0, create);
        pc.pc_logdevice = logs[i];
        tl_log_reset (true);
        assert_int_equal (tl_pool_open (&pc, &q), -EINVAL);
        assert_null (q);
        assert_true (tl_log_has ("the log device must be a separate "
                                 "device"));
        assert_false (tl_log_has ("in use"));
        assert_false (tl_log_has ("already a device"));
      }
  }
  assert_int_equal (tl_hash_file (a), h);

  /* zil_size with a log device: refused, naming both. */
  assert_int_equal (tl_sparse_file (n, DEV_SIZE), 0);
  assert_int_equal (tl_sparse_file (lg, 16 * MiB), 0);
  tl_pool_cfg (&pc, &n, 1, MiB, true);
  pc.pc_logdevice = lg;
  pc.pc_zil_size = MiB;
  tl_log_reset (true);
  assert_int_equal (tl_pool_open (&pc, &q), -EINVAL);
  assert_true (tl_log_has ("zil_size=1M sizes the intent log's ring"));
  /* A ring below one log block (rounded down to 0) or above a quarter of
   * the pool: the message names the value given and the range. */
  tl_pool_cfg (&pc, &n, 1, MiB, true);
  pc.pc_zil_size = 1;
  assert_int_equal (tl_pool_open (&pc, &q), -EINVAL);
  assert_true (tl_log_has ("zil_size=1 does not fit this pool"));
  assert_true (tl_log_has ("from 512K"));
  assert_false (tl_log_has ("size 0"));
  pc.pc_zil_size = 1ull << 30;
  assert_int_equal (tl_pool_open (&pc, &q), -EINVAL);
  assert_true (tl_log_has ("zil_size=1G does not fit this pool"));
  assert_int_equal (tl_file_allocated (n), 0);
  assert_int_equal (tl_file_allocated (lg), 0);

  /* The refusals let go of everything: the pool imports. */
  tl_pool_cfg (&pc, &a, 1, 0, false);
  tl_log_reset (false);
  assert_int_equal (tl_pool_open (&pc, &q), 0);
  assert_int_equal (tl_pool_close (q), 0);
}

/* ---- rewind ---- */

/*
 * Import must fail with -EIO, saying what it would lose ('msg') and how
 * to accept it, and must write nothing.  The log capture is left for the
 * caller to look at (reset, expecting errors).
 */
/* The refusal helpers import with verify=full when set (damage below
 * the volume's root is found at import only then). */
static bool hostile_verify_full;

static void
expect_refusal (const char *const *devs, unsigned ndevs, bool readonly,
                const char *msg)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint64_t h[ZVOL_MAX_DEVS];

  for (unsigned d = 0; d < ndevs; d++)
    h[d] = tl_hash_file (devs[d]);
  tl_pool_cfg (&pc, devs, ndevs, 0, false);
  pc.pc_readonly = readonly;
  pc.pc_verify_full = hostile_verify_full;
  tl_log_reset (true);
  assert_int_equal (tl_pool_open (&pc, &p), -EIO);
  assert_null (p);
  if (!tl_log_has (msg))
    fail_msg ("the refusal did not say \"%s\"", msg);
  assert_true (tl_log_has ("Refusing to import"));
  assert_true (tl_log_has ("pass rewind=true"));
  for (unsigned d = 0; d < ndevs; d++)
    assert_true (tl_hash_file (devs[d]) == h[d]);
}

/* Import with rewind=true: it must take txg 'want' and say so in one
 * warning.  The capture is left to the caller (expecting errors). */
static zvol_pool_t *
open_rewind (const char *const *devs, unsigned ndevs, bool readonly,
             uint64_t want)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  char msg[64];

  tl_pool_cfg (&pc, devs, ndevs, 0, false);
  pc.pc_readonly = readonly;
  pc.pc_rewind = true;
  tl_log_reset (true);
  assert_int_equal (tl_pool_open (&pc, &p), 0);
  assert_int_equal (zv_pool_open_txg (p), want);
  snprintf (msg, sizeof msg, "rewound to txg %" PRIu64 " (rewind=true)", want);
  if (!tl_log_has (msg))
    fail_msg ("the rewind did not warn \"%s\"", msg);
  assert_int_equal (tl_log_warnings (), 1);
  return p;
}

/* Every valid uberblock of a txg on a one-device pool (parsed by hand;
 * empty ones skipped). */
static int
read_ubs (const char *path, uint64_t devsize, zv_uberblock_phys_t *out,
          int max)
{
  int n = 0;

  for (unsigned l = 0; l < ZV_NLABELS; l++)
    for (unsigned s = 0; s < ZV_UB_COUNT; s++) {
      uint64_t off = zv_label_offset (devsize, l) + ZV_UB_RING_OFFSET
        + (uint64_t) s * ZV_UB_SIZE;
      zv_uberblock_phys_t ub;

      assert_int_equal (tl_file_pread (path, &ub, sizeof ub, off), 0);
      if (ub.ub_magic != ZV_UB_MAGIC || !zv_label_verify_ub (&ub, off)
          || ub.ub_flags == ZV_UB_F_EMPTY)
        continue;
      assert_int_equal (s, ub.ub_txg % ZV_UB_COUNT);
      if (n < max)
        out[n++] = ub;
    }
  return n;
}

/* The objset of the newest txg is damaged in both copies: import refuses
 * to rewind (read-only too) and says what it would lose; with rewind=true
 * it takes the txg before, with its content, and warns.  The stale newer
 * uberblocks are emptied at once, so the next import is clean. */
static void
test_rewind (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "rewind");
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  uint64_t txg_a, txg_b, newest = 0;
  zv_uberblock_phys_t ubs[2 * ZV_UB_COUNT];
  int n, damaged = 0;

  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 8 * MiB, true);
  p = tl_pool_open_ok (&pc);
  tl_vol_write (tl_vol (p), NULL, 0, 256 * 1024, 0xa, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  txg_a = zv_txg_last_synced (zv_pool_txg (p));
  tl_vol_write (tl_vol (p), NULL, 0, 256 * 1024, 0xb, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  txg_b = zv_txg_last_synced (zv_pool_txg (p));
  assert_true (txg_b > txg_a);
  assert_int_equal (tl_pool_close (p), 0);

  n = read_ubs (dev, DEV_SIZE, ubs, 2 * ZV_UB_COUNT);
  assert_true (n >= 2);
  for (int i = 0; i < n; i++)
    newest = ZV_MAX (newest, ubs[i].ub_txg);
  assert_int_equal (newest, txg_b);       /* closing wrote no other txg */
  /* Damage the objset of every txg after A, once each (the front and
   * back labels hold the same uberblock). */
  uint64_t done[2 * ZV_UB_COUNT];
  for (int i = 0; i < n; i++) {
    const zv_blkptr_t *bp = &ubs[i].ub_rootbp;
    bool seen = false;
    if (ubs[i].ub_txg <= txg_a)
      continue;
    for (int j = 0; j < damaged; j++)
      seen |= done[j] == ubs[i].ub_txg;
    if (seen)
      continue;
    assert_int_equal (bp->bp_ncopies, 2);
    for (unsigned c = 0; c < 2; c++) {
      assert_int_equal (ZV_DVA_VDEV (bp->bp_dva[c]), 0);
      assert_int_equal (tl_file_flip (dev, ZV_DVA_OFFSET (bp->bp_dva[c])
                                      + 100 + c), 0);
    }
    done[damaged++] = ubs[i].ub_txg;
  }
  assert_int_equal (damaged, txg_b - txg_a);

  char lost[64];
  if (txg_b == txg_a + 1)
    snprintf (lost, sizeof lost, "lose txg %" PRIu64 ",", txg_b);
  else
    snprintf (lost, sizeof lost, "lose txgs %" PRIu64 " to %" PRIu64 ",",
              txg_a + 1, txg_b);
  expect_refusal (&dev, 1, false, lost);
  expect_refusal (&dev, 1, true, lost);
  p = open_rewind (&dev, 1, false, txg_a);
  assert_int_equal (zv_txg_last_synced (zv_pool_txg (p)), txg_a);
  tl_vol_check (tl_vol (p), 0, 256 * 1024, 0xa);
  /* Nothing newer than the imported txg is left in the rings. */
  n = read_ubs (dev, DEV_SIZE, ubs, 2 * ZV_UB_COUNT);
  for (int i = 0; i < n; i++)
    assert_true (ubs[i].ub_txg <= txg_a);
  tl_log_reset (false);
  /* Writable after the rewind, and the next import is clean. */
  tl_vol_write (tl_vol (p), NULL, MiB, 65536, 0xc, 0);
  assert_int_equal (tl_pool_close (p), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  tl_log_reset (true);
  p = tl_pool_open_ok (&pc);
  assert_false (tl_log_has ("rewound"));
  assert_int_equal (tl_log_warnings (), 0);
  tl_vol_check (tl_vol (p), 0, 256 * 1024, 0xa);
  tl_vol_check (tl_vol (p), MiB, 65536, 0xc);
  assert_int_equal (tl_pool_close (p), 0);
  tl_log_reset (false);
}

/* A damaged front configuration: import uses the back one.  Both
 * damaged: the import fails cleanly. */
static void
test_damaged_config (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "label");
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;

  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 8 * MiB, true);
  p = tl_pool_open_ok (&pc);
  tl_vol_write (tl_vol (p), NULL, 12345, 54321, 5, 0);
  assert_int_equal (tl_pool_close (p), 0);

  assert_int_equal (tl_file_flip (dev, 100), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  tl_log_reset (true);
  p = tl_pool_open_ok (&pc);
  tl_vol_check (tl_vol (p), 12345, 54321, 5);
  assert_int_equal (tl_pool_close (p), 0);

  /* The whole front label gone (config and ring). */
  {
    uint8_t *z = calloc (1, ZV_LABEL_SIZE);
    assert_int_equal (tl_file_pwrite (dev, z, ZV_LABEL_SIZE, 0), 0);
    free (z);
  }
  p = tl_pool_open_ok (&pc);
  tl_vol_check (tl_vol (p), 12345, 54321, 5);
  assert_int_equal (tl_pool_close (p), 0);

  assert_int_equal (tl_file_flip (dev, DEV_SIZE - ZV_LABEL_SIZE + 100), 0);
  p = NULL;
  assert_true (tl_pool_open (&pc, &p) < 0);
  assert_null (p);
  tl_log_reset (false);
}

/* ---- hostile fields that verify: each must stop the import ---- */

/*
 * These tests change one field of an on-disk structure and seal it again,
 * so that every checksum verifies and only the field's meaning is wrong
 * (damage the checksums would not catch: a bug that wrote the wrong
 * value, or a forged device).  Configuration blocks and uberblocks are
 * resealed with label.c's seals; an objset or indirect block is rewritten
 * in both its copies with its parent pointer's checksum updated, up to
 * the uberblock.
 */

/* A pool with a few txgs and data under an indirect root: the newest
 * txg can be damaged and an older one is left to rewind to. */
static void
hostile_pool (const char *dev)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p;

  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 8 * MiB, true);
  p = tl_pool_open_ok (&pc);
  tl_vol_write (tl_vol (p), NULL, 0, 256 * 1024, 0xa, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  tl_vol_write (tl_vol (p), NULL, 4 * MiB, 256 * 1024, 0xb, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  assert_int_equal (tl_pool_close (p), 0);
}

/* The newest uberblock of a one-device pool. */
static zv_uberblock_phys_t
newest_ub (const char *dev)
{
  zv_uberblock_phys_t ubs[2 * ZV_UB_COUNT], best;
  int n = read_ubs (dev, DEV_SIZE, ubs, 2 * ZV_UB_COUNT);

  assert_true (n > 0);
  best = ubs[0];
  for (int i = 1; i < n; i++)
    if (ubs[i].ub_txg > best.ub_txg)
      best = ubs[i];
  return best;
}

/* Seal ub into its slot of both labels. */
static void
reseal_ub (const char *dev, const zv_uberblock_phys_t *ub)
{
  for (unsigned l = 0; l < ZV_NLABELS; l++) {
    uint64_t off = zv_label_offset (DEV_SIZE, l) + ZV_UB_RING_OFFSET
      + (ub->ub_txg % ZV_UB_COUNT) * ZV_UB_SIZE;
    zv_uberblock_phys_t copy = *ub;
    zv_label_seal_ub (&copy, off);
    assert_int_equal (tl_file_pwrite (dev, &copy, sizeof copy, off), 0);
  }
}

/* Read the block bp names (its first copy). */
static void *
read_bp (const char *dev, const zv_blkptr_t *bp)
{
  void *buf = calloc (1, bp->bp_psize);

  assert_non_null (buf);
  assert_int_equal (ZV_DVA_VDEV (bp->bp_dva[0]), 0);
  assert_int_equal (tl_file_pread (dev, buf, bp->bp_psize,
                                   ZV_DVA_OFFSET (bp->bp_dva[0])), 0);
  return buf;
}

/* Write buf as the new content of every copy of bp, and bp's checksum. */
static void
rewrite_bp (const char *dev, zv_blkptr_t *bp, const void *buf, uint64_t guid)
{
  zv_cksum_compute (buf, bp->bp_psize, guid, &bp->bp_cksum);
  for (unsigned c = 0; c < bp->bp_ncopies; c++) {
    assert_int_equal (ZV_DVA_VDEV (bp->bp_dva[c]), 0);
    assert_int_equal (tl_file_pwrite (dev, buf, bp->bp_psize,
                                      ZV_DVA_OFFSET (bp->bp_dva[c])), 0);
  }
}

typedef void (*os_edit_fn) (const char *dev, uint64_t guid,
                            zv_objset_phys_t *os, uint64_t arg);

/* Change the newest objset with fn and reseal it and its uberblock;
 * returns that txg. */
static uint64_t
edit_newest_objset (const char *dev, os_edit_fn fn, uint64_t arg)
{
  zv_uberblock_phys_t ub = newest_ub (dev);
  zv_objset_phys_t *os = read_bp (dev, &ub.ub_rootbp);

  fn (dev, ub.ub_pool_guid, os, arg);
  rewrite_bp (dev, &ub.ub_rootbp, os, ub.ub_pool_guid);
  free (os);
  reseal_ub (dev, &ub);
  return ub.ub_txg;
}

/* The same for the first dataset record (the volume's object and log
 * header): fn edits it; the record, the directory blocks above it, the
 * objset and the uberblock are resealed.  Returns the txg. */
typedef void (*rec_edit_fn) (const char *dev, uint64_t guid,
                             zv_dsrec_phys_t *rec, uint64_t txg,
                             uint64_t arg);

static uint64_t
edit_newest_rec (const char *dev, rec_edit_fn fn, uint64_t arg)
{
  zv_uberblock_phys_t ub = newest_ub (dev);
  uint64_t guid = ub.ub_pool_guid;
  zv_objset_phys_t *os = read_bp (dev, &ub.ub_rootbp);
  zv_blkptr_t *bps[ZV_MAX_LEVELS + 1], *bp = &os->os_dsdir.dn_root;
  void *bufs[ZV_MAX_LEVELS + 1];
  unsigned n = 0;
  zv_dsrec_phys_t *rec;

  for (;;) {
    assert_true (n <= ZV_MAX_LEVELS);
    bps[n] = bp;
    bufs[n] = read_bp (dev, bp);
    if (bps[n++]->bp_level == 0)
      break;
    bp = (zv_blkptr_t *) bufs[n - 1] + 1;
  }
  rec = bufs[n - 1];
  assert_true (rec->dr_magic == ZV_DSREC_MAGIC);
  fn (dev, guid, rec, ub.ub_txg, arg);
  memset (&rec->dr_cksum, 0, sizeof rec->dr_cksum);
  zv_cksum_compute (rec, sizeof *rec, zv_dsrec_seed (guid, 0),
                    &rec->dr_cksum);
  while (n-- > 0) {
    rewrite_bp (dev, bps[n], bufs[n], guid);
    free (bufs[n]);
  }
  rewrite_bp (dev, &ub.ub_rootbp, os, guid);
  free (os);
  reseal_ub (dev, &ub);
  return ub.ub_txg;
}

/* Import: the damaged txg is refused with 'msg', the import refuses to
 * rewind past it, and with rewind=true the pool rewinds. */
static void
expect_refused_txg (const char *dev, uint64_t bad_txg, const char *msg)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;

  expect_refusal (&dev, 1, false, "which committed but whose tree does not "
                  "verify");
  if (!tl_log_has (msg))
    fail_msg ("import of txg %" PRIu64 " did not say \"%s\"", bad_txg, msg);
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  pc.pc_rewind = true;
  pc.pc_verify_full = hostile_verify_full;
  tl_log_reset (true);
  assert_int_equal (tl_pool_open (&pc, &p), 0);
  if (!tl_log_has (msg))
    fail_msg ("import of txg %" PRIu64 " did not say \"%s\"", bad_txg, msg);
  assert_true (tl_log_has ("rewound"));
  assert_int_equal (tl_log_warnings (), 1);
  assert_true (zv_txg_last_synced (zv_pool_txg (p)) < bad_txg);
  tl_vol_check (tl_vol (p), 0, 256 * 1024, 0xa);
  assert_int_equal (tl_pool_close (p), 0);
  tl_log_reset (false);
}

/* The root pointer's fields, in the uberblock. */
static void
test_hostile_rootbp (void **state)
{
  static const struct {
    const char *name;
    unsigned field;
    uint64_t value;
  } cases[] = {
    { "birth", 0, 1000 }, { "lsize", 1, 8192 }, { "level", 2, 1 },
    { "fill", 3, 0 }, { "fill", 3, 1000 }, { "comp", 4, 1 },
  };
  char path[512];

  (void) state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    const char *dev = tl_path (path, sizeof path, "h-rootbp");
    zv_uberblock_phys_t ub;
    zv_blkptr_t *bp = &ub.ub_rootbp;

    hostile_pool (dev);
    ub = newest_ub (dev);
    switch (cases[i].field) {
    case 0: bp->bp_birth += cases[i].value; break;
    case 1: bp->bp_lsize = (uint32_t) cases[i].value; break;
    case 2: bp->bp_level = (uint8_t) cases[i].value; break;
    case 3: bp->bp_fill = cases[i].value; break;
    case 4: bp->bp_comp = (uint8_t) cases[i].value; break;
    }
    reseal_ub (dev, &ub);
    print_message ("  root pointer %s\n", cases[i].name);
    expect_refused_txg (dev, ub.ub_txg, "invalid root pointer");
  }
}

/* The volume's size field, and its root pointer's birth. */
static void
os_set_volsize (const char *dev, uint64_t guid, zv_dsrec_phys_t *rec,
                uint64_t txg, uint64_t v)
{
  rec->dr_volume.dn_size = v;
}

static void
os_set_volroot_birth (const char *dev, uint64_t guid, zv_dsrec_phys_t *rec,
                      uint64_t txg, uint64_t v)
{
  rec->dr_volume.dn_root.bp_birth = txg + v;
}

static void
test_hostile_volume (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "h-vol");
  uint64_t txg;

  (void) state;
  /* Same number of blocks, a smaller size. */
  hostile_pool (dev);
  txg = edit_newest_rec (dev, os_set_volsize, 8 * MiB - 512);
  expect_refused_txg (dev, txg, "its shape is not that of its size");
  hostile_pool (dev);
  txg = edit_newest_rec (dev, os_set_volsize, 1ull << 50);
  expect_refused_txg (dev, txg, "its shape is not that of its size");
  /* A root born after the txg that names it. */
  hostile_pool (dev);
  txg = edit_newest_rec (dev, os_set_volroot_birth, 5);
  expect_refused_txg (dev, txg, "born after the objset");
}

/* An indirect block's header txg: the writer stores its pointer's birth. */
static void
os_set_ind_txg (const char *dev, uint64_t guid, zv_dsrec_phys_t *rec,
                uint64_t txg, uint64_t delta)
{
  zv_blkptr_t *root = &rec->dr_volume.dn_root;
  zv_mblk_hdr_t *h;

  assert_int_equal (root->bp_type, ZV_BT_INDIRECT);
  h = read_bp (dev, root);
  assert_int_equal (h->mh_type, ZV_BT_INDIRECT);
  assert_int_equal (h->mh_txg, root->bp_birth);  /* what the writer stores */
  h->mh_txg = root->bp_birth + delta;
  rewrite_bp (dev, root, h, guid);
  free (h);
}

/* Import without verify=full: the pool imports, and what the damaged
 * block covers fails with EIO and 'msg' when it is used (read at off,
 * write there), while the rest of the volume ('good', 256 KiB of seed
 * 0xb) serves and syncs; nothing aborts, the pool is not suspended. */
static void
expect_lazy_eio (const char *dev, uint64_t off, uint64_t good,
                 const char *msg)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t *buf = calloc (1, BS);

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  tl_log_reset (true);
  assert_int_equal (tl_pool_open (&pc, &p), 0);
  assert_int_equal (zvol_read (tl_vol (p), buf, off, BS), -EIO);
  if (!tl_log_has (msg))
    fail_msg ("the read did not say \"%s\"", msg);
  assert_int_equal (zvol_write (tl_vol (p), buf, off, BS, 0), -EIO);
  assert_int_equal (zvol_write (tl_vol (p), buf, off + 512, 4096, 0), -EIO);
  assert_int_equal (zvol_trim (tl_vol (p), off, 4 * BS, 0), -EIO);
  assert_int_equal (zvol_zero (tl_vol (p), off, 4 * BS, 0), -EIO);
  if (good != UINT64_MAX) {
    tl_vol_check (tl_vol (p), good, 256 * 1024, 0xb);
    tl_vol_write (tl_vol (p), NULL, good, 64 * 1024, 0xc, 0);
    assert_int_equal (zv_pool_sync (p), 0);
    tl_vol_check (tl_vol (p), good, 64 * 1024, 0xc);
  }
  assert_int_equal (zvol_read (tl_vol (p), buf, off, BS), -EIO);
  assert_int_equal (tl_pool_close (p), 0);
  tl_log_reset (false);
  free (buf);
}

static void
test_hostile_indirect (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "h-ind");
  uint64_t txg;

  (void) state;
  /* The root indirect block: found when the volume is first used. */
  hostile_pool (dev);
  txg = edit_newest_rec (dev, os_set_ind_txg, 7);
  expect_lazy_eio (dev, 0, UINT64_MAX, "header txg");
  /* verify=full finds it at import. */
  hostile_verify_full = true;
  expect_refused_txg (dev, txg, "header txg");
  hostile_pool (dev);
  txg = edit_newest_rec (dev, os_set_ind_txg, (uint64_t) -1);
  expect_refused_txg (dev, txg, "header txg");
  hostile_verify_full = false;
}

/*
 * A level-1 block's entries, as a hostile or damaged pool may have them,
 * resealed (checksums up to the uberblock) so that only the checks of
 * the tree can find them.  The volume of hostile_pool: level-1 block 0
 * holds the data at 0 (seed 0xa), block 1 that at 4 MiB (seed 0xb).
 */
enum { L1_FREE, L1_SHARE_OTHER, L1_SHARE_SAME, L1_BIRTH, L1_HOLE };

static void
os_edit_l1 (const char *dev, uint64_t guid, zv_dsrec_phys_t *rec,
            uint64_t txg, uint64_t how)
{
  zv_blkptr_t *root = &rec->dr_volume.dn_root;
  zv_blkptr_t *top, *l1[2];
  void *l1buf[2];
  unsigned which = how == L1_SHARE_OTHER ? 1 : 0;

  assert_int_equal (rec->dr_volume.dn_nlevels, 3);
  top = read_bp (dev, root);
  for (unsigned i = 0; i < 2; i++) {
    l1buf[i] = read_bp (dev, &top[1 + i]);
    l1[i] = (zv_blkptr_t *) l1buf[i] + 1;
  }
  switch (how) {
  case L1_FREE:               /* block 1: into free space */
    l1[0][1].bp_dva[0] = ZV_DVA_MAKE (0, zv_data_end (DEV_SIZE) - MiB);
    break;
  case L1_SHARE_OTHER:        /* block 256: block 1's space */
    l1[1][1] = l1[0][1];
    break;
  case L1_SHARE_SAME:         /* block 2: block 1's space */
    l1[0][2] = l1[0][1];
    break;
  case L1_BIRTH:              /* block 1: born after its parent */
    l1[0][1].bp_birth = top[1].bp_birth + 1;
    break;
  case L1_HOLE:               /* block 1 forgotten: its space leaks */
    memset (&l1[0][1], 0, sizeof l1[0][1]);
    top[1].bp_fill--;
    root->bp_fill--;
    break;
  }
  rewrite_bp (dev, &top[1 + which], l1buf[which], guid);
  rewrite_bp (dev, root, top, guid);
  free (l1buf[0]);
  free (l1buf[1]);
  free (top);
}

/* A level-1 block pointing into free space, at another block's space
 * (in another level-1 block or in its own) or born after its parent:
 * import takes no notice (no walk), the first use of the block refuses
 * it with EIO and a message, the rest of the volume serves, and nothing
 * is ever freed twice; verify=full refuses the import. */
static void
test_lazy_indirect (void **state)
{
  static const struct {
    unsigned how;
    const char *msg;
  } cases[] = {
    { L1_FREE, "points at free space" },
    { L1_SHARE_SAME, "shares its space with another block" },
    { L1_BIRTH, "after its parent" },
  };
  char path[512];
  const char *dev = tl_path (path, sizeof path, "h-l1");
  zvol_pool_config_t pc;

  (void) state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    print_message ("  %s\n", cases[i].msg);
    hostile_pool (dev);
    edit_newest_rec (dev, os_edit_l1, cases[i].how);
    expect_lazy_eio (dev, 0, 4 * MiB, cases[i].msg);
    /* verify=full: refused at import, naming it. */
    tl_pool_cfg (&pc, &dev, 1, 0, false);
    pc.pc_verify_full = true;
    tl_log_reset (true);
    zvol_pool_t *p = NULL;
    assert_int_equal (tl_pool_open (&pc, &p), -EIO);
    if (!tl_log_has (cases[i].msg))
      fail_msg ("verify=full did not say \"%s\"", cases[i].msg);
    tl_log_reset (false);
  }
}

/* Two level-1 blocks naming one data block: the first read owns it, the
 * other level-1 block is refused (EIO, a message).  The owner's block is
 * then rewritten, its old copy freed (once) and its space reused, txg
 * after txg: no double free, no abort, and the other block stays
 * refused, on this import and the next. */
static void
test_lazy_double_owner (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "h-own");
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t *buf = calloc (1, BS);

  (void) state;
  hostile_pool (dev);
  edit_newest_rec (dev, os_edit_l1, L1_SHARE_OTHER);
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  tl_log_reset (true);
  assert_int_equal (tl_pool_open (&pc, &p), 0);
  tl_vol_check (tl_vol (p), 0, 256 * 1024, 0xa);
  assert_int_equal (zvol_read (tl_vol (p), buf, 4 * MiB, BS), -EIO);
  assert_true (tl_log_has ("shares its space with another block"));
  assert_int_equal (zvol_write (tl_vol (p), buf, 4 * MiB, BS, 0), -EIO);
  for (unsigned t = 0; t < 6; t++) {
    tl_vol_write (tl_vol (p), NULL, 0, 256 * 1024, 0x10 + t, 0);
    assert_int_equal (zv_pool_sync (p), 0);
  }
  tl_vol_check (tl_vol (p), 0, 256 * 1024, 0x15);
  assert_int_equal (zvol_read (tl_vol (p), buf, 4 * MiB + BS, BS), -EIO);
  assert_int_equal (tl_pool_close (p), 0);
  /* Next import: the block it named was freed and reused; the pointer
   * is refused still. */
  tl_log_reset (true);
  assert_int_equal (tl_pool_open (&pc, &p), 0);
  assert_int_equal (zvol_read (tl_vol (p), buf, 4 * MiB, BS), -EIO);
  tl_vol_check (tl_vol (p), 0, 256 * 1024, 0x15);
  assert_int_equal (tl_pool_close (p), 0);
  tl_log_reset (false);
  free (buf);
}

/* The intent-log header: a claim txg or a head that cannot be. */
static void
os_set_zil (const char *dev, uint64_t guid, zv_dsrec_phys_t *rec,
            uint64_t txg, uint64_t which)
{
  zv_zil_header_t *zh = &rec->dr_zil;
  uint64_t len = zh->zh_nslots * (uint64_t) zh->zh_blksz;

  switch (which) {
  case 0: zh->zh_claim_txg = UINT64_MAX - 5; break;
  case 1: zh->zh_claim_txg = txg + 1; break;
  case 2: zh->zh_head_pos = (UINT64_MAX / len) * len; break;
  case 3: zh->zh_head_seq = UINT64_MAX; break;
  }
}

/* The objset's next dataset id: at or below a record's id. */
static void
os_set_next_dsid (const char *dev, uint64_t guid, zv_objset_phys_t *os,
                  uint64_t v)
{
  os->os_next_dsid = v;
}

/* A dataset record's fields, each as a hostile pool may have them (the
 * record resealed, so only the field checks can find them). */
static void
rec_edit (const char *dev, uint64_t guid, zv_dsrec_phys_t *rec,
          uint64_t txg, uint64_t which)
{
  switch (which) {
  case 0: rec->dr_magic ^= 1; break;
  case 1: rec->dr_kind = 4;   /* 3: a background free (freeq.c) */ break;
  case 2: rec->dr_flags = 4; break;
  case 3: rec->dr_id = 0; break;
  case 4: memset (rec->dr_name, 0, sizeof rec->dr_name); break;
  case 5: strcpy (rec->dr_name, "a/b"); break;
  case 6: memset (rec->dr_name, 'x', sizeof rec->dr_name); break;
  case 7: rec->dr_reservation = rec->dr_volsize + 512; break;
  case 8: rec->dr_creation_txg = txg + 1; break;
  case 9: rec->dr_volblocksize = 3 * 4096; break;
  case 10: rec->dr_deadlist.dn_type = ZV_BT_DEADLIST; break;
  case 11: rec->dr_origin_id = 7; break;
  case 12: rec->dr_volsize = 0; break;
  /* Snapshots' fields (snap.c): a snapshot of no volume, a previous
   * snapshot that cannot be, a line after the objset, figures past the
   * volume, a log header on a snapshot. */
  case 13: rec->dr_kind = ZV_DS_KIND_SNAPSHOT; break;
  case 14: rec->dr_prev_snap_id = rec->dr_id; break;
  case 15: rec->dr_prev_snap_txg = txg + 1; break;
  case 16: rec->dr_written = rec->dr_volsize + 1; break;
  case 17:
    rec->dr_kind = ZV_DS_KIND_SNAPSHOT;
    rec->dr_parent_id = 1;
    rec->dr_id = 1;
    break;
  case 18: rec->dr_deadlist_bytes = 4096; break;
  }
}

static void
test_hostile_dsrec (void **state)
{
  static const char *const msgs[] = {
    "bad magic", "invalid kind", "invalid flags", "invalid id",
    "invalid name", "invalid name", "invalid name", "invalid reservation",
    "invalid creation txg", "invalid volblocksize", "invalid dead list",
    "invalid parent or origin id", "invalid volume size",
    "invalid parent or origin id", "invalid previous snapshot id",
    "invalid previous snapshot txg", "invalid space figures",
    "invalid parent or origin id", "invalid dead list",
  };
  char path[512];
  const char *dev = tl_path (path, sizeof path, "h-dsrec");
  uint64_t txg;

  (void) state;
  for (uint64_t w = 0; w < sizeof msgs / sizeof msgs[0]; w++) {
    print_message ("  record field %" PRIu64 ": %s\n", w, msgs[w]);
    hostile_pool (dev);
    txg = edit_newest_rec (dev, rec_edit, w);
    expect_refused_txg (dev, txg, msgs[w]);
  }
  hostile_pool (dev);
  txg = edit_newest_objset (dev, os_set_next_dsid, 1);
  expect_refused_txg (dev, txg, "invalid id");
  hostile_pool (dev);
  txg = edit_newest_objset (dev, os_set_next_dsid, 0);
  expect_refused_txg (dev, txg, "next dataset id");
}

static void
test_hostile_zil (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "h-zil");

  (void) state;
  for (uint64_t w = 0; w < 4; w++) {
    uint64_t txg;
    hostile_pool (dev);
    txg = edit_newest_rec (dev, os_set_zil, w);
    print_message ("  log header case %" PRIu64 "\n", w);
    expect_refused_txg (dev, txg, "intent log header");
  }
}

/* The configuration's device sizes (field 0: this device's, 1: its table
 * entry, 2: both): reseal both copies and import. */
static void
edit_config (const char *dev, unsigned field, uint64_t value)
{
  for (unsigned l = 0; l < ZV_NLABELS; l++) {
    uint64_t off = zv_label_offset (DEV_SIZE, l);
    zv_config_phys_t cf;
    assert_int_equal (tl_file_pread (dev, &cf, sizeof cf, off), 0);
    assert_true (zv_label_verify_config (&cf, off));
    if (field != 1)
      cf.cf_dev_size = value;
    if (field != 0)
      cf.cf_dev_sizes[0] = value;
    zv_label_seal_config (&cf, off);
    assert_int_equal (tl_file_pwrite (dev, &cf, sizeof cf, off), 0);
  }
}

static void
test_hostile_config (void **state)
{
  static const struct {
    unsigned field;
    uint64_t value;
    const char *msg;
  } cases[] = {
    { 0, 0, "size of this device" },
    { 0, 1ull << 50, "size of this device" },
    { 0, DEV_SIZE - ZV_SECTOR, "size of this device" },
    { 0, DEV_SIZE + 1, "size of this device" },
    { 1, DEV_SIZE - ZV_SECTOR, "size of this device" },
    { 1, 1ull << 50, "size of this device" },
    { 2, 1ull << 50, "more than the device has" },
    { 2, 0, "size of device 0" },
  };
  char path[512];
  const char *dev = tl_path (path, sizeof path, "h-cfg");

  (void) state;
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    zvol_pool_config_t pc;
    zvol_pool_t *p = NULL;

    make_pool (dev, DEV_SIZE, 8 * MiB);
    edit_config (dev, cases[i].field, cases[i].value);
    tl_pool_cfg (&pc, &dev, 1, 0, false);
    tl_log_reset (true);
    print_message ("  config case %zu\n", i);
    assert_int_equal (tl_pool_open (&pc, &p), -EINVAL);
    assert_null (p);
    if (!tl_log_has (cases[i].msg))
      fail_msg ("config case %zu did not say \"%s\"", i, cases[i].msg);
    tl_log_reset (false);
  }
}

/*
 * A member whose configuration (sealed, in range by itself) says it is
 * device 2 of 3, with guid 0 as the pool's unused table slot 2, beside
 * device 0 of a 2-device pool: refused, not placed past the pool's
 * devices (which left slot 1 empty, and import dereferenced it).
 */
static void
test_hostile_member_index (void **state)
{
  char p0[512], p1[512];
  const char *devs[2] = { tl_path (p0, sizeof p0, "h-m0"),
                          tl_path (p1, sizeof p1, "h-m1") };
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;

  (void) state;
  for (unsigned d = 0; d < 2; d++)
    assert_int_equal (tl_sparse_file (devs[d], DEV_SIZE), 0);
  tl_pool_cfg (&pc, devs, 2, 8 * MiB, true);
  assert_int_equal (tl_pool_close (tl_pool_open_ok (&pc)), 0);
  for (unsigned l = 0; l < ZV_NLABELS; l++) {
    uint64_t off = zv_label_offset (DEV_SIZE, l);
    zv_config_phys_t cf;
    assert_int_equal (tl_file_pread (devs[1], &cf, sizeof cf, off), 0);
    cf.cf_ndevs = 3;
    cf.cf_dev_index = 2;
    cf.cf_dev_guid = 0;
    cf.cf_dev_sizes[2] = cf.cf_dev_sizes[0];
    zv_label_seal_config (&cf, off);
    assert_int_equal (tl_file_pwrite (devs[1], &cf, sizeof cf, off), 0);
  }
  pc.pc_create = false;
  tl_log_reset (true);
  assert_int_equal (tl_pool_open (&pc, &p), -EINVAL);
  assert_null (p);
  assert_true (tl_log_has ("device 2 of pool 'zvol' does not match"));
  tl_log_reset (false);
}

/*
 * Both configuration blocks zeroed, the uberblocks and the tree intact:
 * the device holds a pool with damaged labels.  Import must say so (with
 * the pool's guid, from an uberblock) and must not suggest create, and
 * create must refuse the device and write nothing.
 */
static void
test_labels_zeroed_pool (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "h-nocfg");
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t zero[ZV_CONFIG_SIZE];
  char guid[32];
  uint64_t h;

  (void) state;
  make_pool (dev, DEV_SIZE, 8 * MiB);
  snprintf (guid, sizeof guid, "%016" PRIx64, newest_ub (dev).ub_pool_guid);
  memset (zero, 0, sizeof zero);
  for (unsigned l = 0; l < ZV_NLABELS; l++)
    assert_int_equal (tl_file_pwrite (dev, zero, sizeof zero,
                                      zv_label_offset (DEV_SIZE, l)), 0);
  h = tl_hash_file (dev);

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  tl_log_reset (true);
  assert_true (tl_pool_open (&pc, &p) < 0);
  assert_null (p);
  assert_false (tl_log_has ("create=true"));
  assert_false (tl_log_has ("not a pool device"));
  assert_true (tl_log_has ("labels are damaged"));
  assert_true (tl_log_has (guid));

  tl_log_reset (true);
  tl_pool_cfg (&pc, &dev, 1, 8 * MiB, true);
  assert_int_equal (tl_pool_open (&pc, &p), -EEXIST);
  assert_null (p);
  assert_true (tl_log_has ("holds a damaged pool"));
  assert_true (tl_log_has (guid));
  assert_int_equal (tl_hash_file (dev), h);
  tl_log_reset (false);
}

/* ---- the uberblock slot after the newest ---- */

/* Device offset of slot s of label l on a device of DEV_SIZE bytes. */
static uint64_t
slot_off (unsigned l, unsigned s)
{
  return zv_label_offset (DEV_SIZE, l) + ZV_UB_RING_OFFSET
    + (uint64_t) s * ZV_UB_SIZE;
}

/* Overwrite label l's copy of slot s of dev: zeros, or noise from *seed
 * when seed is not NULL. */
static void
slot_damage (const char *dev, unsigned l, unsigned s, uint64_t *seed)
{
  uint8_t buf[ZV_UB_SIZE];

  if (seed != NULL)
    tl_fill_rand (buf, sizeof buf, seed);
  else
    memset (buf, 0, sizeof buf);
  assert_int_equal (tl_file_pwrite (dev, buf, sizeof buf, slot_off (l, s)),
                    0);
}

/* Every copy of slot s (both labels of every device) damaged. */
static void
slot_damage_all (const char *const *devs, unsigned ndevs, unsigned s,
                 uint64_t *seed)
{
  for (unsigned d = 0; d < ndevs; d++)
    for (unsigned l = 0; l < ZV_NLABELS; l++)
      slot_damage (devs[d], l, s, seed);
}

/* A new pool on devs (DEV_SIZE each) with two synced txgs: pattern 0xa
 * over [0, 256K) synced in *a, 0xb over [1M, 1M + 256K) in *b, the
 * newest. */
static void
two_txg_pool (const char *const *devs, unsigned ndevs, uint64_t *a,
              uint64_t *b)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p;

  for (unsigned d = 0; d < ndevs; d++)
    assert_int_equal (tl_sparse_file (devs[d], DEV_SIZE), 0);
  tl_pool_cfg (&pc, devs, ndevs, 8 * MiB, true);
  p = tl_pool_open_ok (&pc);
  tl_vol_write (tl_vol (p), NULL, 0, 256 * 1024, 0xa, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  *a = zv_txg_last_synced (zv_pool_txg (p));
  tl_vol_write (tl_vol (p), NULL, MiB, 256 * 1024, 0xb, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  *b = zv_txg_last_synced (zv_pool_txg (p));
  assert_int_equal (tl_pool_close (p), 0);
  assert_true (*a >= 2 && *b == *a + 1);
  assert_int_equal (newest_ub (devs[0]).ub_txg, *b);
}

/* [off, off + len) of the volume reads as zeros. */
static void
vol_check_zero (zvol_t *zv, uint64_t off, uint32_t len)
{
  uint8_t *buf = malloc (len);

  assert_non_null (buf);
  assert_int_equal (zvol_read (zv, buf, off, len), 0);
  if (!zv_is_zero (buf, len))
    fail_msg ("volume range at %" PRIu64 " is not zeros", off);
  free (buf);
}

/* What the refusal says of a lost txg whose slot is damaged. */
static void
lost_slot_msg (char *buf, size_t len, uint64_t txg, unsigned ncopies,
               unsigned ndevs)
{
  snprintf (buf, len, "would lose txg %" PRIu64 ", which may have "
            "committed (its uberblock slot, %u, is damaged in every copy: "
            "%u, both labels of %u device%s)", txg,
            (unsigned) (txg % ZV_UB_COUNT), ncopies, ndevs,
            ndevs == 1 ? "" : "s");
}

typedef struct lost_child {
  const char *dev;
  int fd;
} lost_child_t;

/* Pattern 'seed' over [off, off + len), off cmocka's thread. */
static void
child_write (zvol_t *zv, uint64_t off, uint32_t len, uint64_t seed)
{
  uint8_t *buf = malloc (len);

  TL_CHECK (buf != NULL);
  tl_pat_fill (buf, off, len, seed);
  TL_CHECK (zvol_write (zv, buf, off, len, 0) == 0);
  free (buf);
}

/*
 * The child of test_ub_slot_lost, on its own thread (a fresh io_uring):
 * A synced in txg a; B flushed (log records, one in place) and synced in
 * txg b with D, which nobody flushed; C flushed after b.  Then it dies
 * without closing the pool, as a server killed with -9 would.
 */
static void *
lost_child_thread (void *arg)
{
  const lost_child_t *c = arg;
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  zvol_t *zv;
  uint64_t txg[2];

  tl_pool_cfg (&pc, &c->dev, 1, 0, false);
  TL_CHECK (tl_pool_open (&pc, &p) == 0);
  zv = tl_vol (p);
  child_write (zv, 0, 256 * 1024, 0xa);
  TL_CHECK (zv_pool_sync (p) == 0);
  txg[0] = zv_txg_last_synced (zv_pool_txg (p));
  child_write (zv, MiB, 64 * 1024, 0xb);          /* logged in place */
  child_write (zv, MiB + 512 * 1024, 4096, 0xb);  /* copied */
  TL_CHECK (zvol_flush (zv) == 0);
  child_write (zv, 2 * MiB, 64 * 1024, 0xd);      /* durable with b only */
  TL_CHECK (zv_pool_sync (p) == 0);
  txg[1] = zv_txg_last_synced (zv_pool_txg (p));
  child_write (zv, 3 * MiB, 64 * 1024, 0xc);
  child_write (zv, 3 * MiB + 512 * 1024, 4096, 0xc);
  TL_CHECK (zvol_flush (zv) == 0);
  TL_CHECK (write (c->fd, txg, sizeof txg) == (ssize_t) sizeof txg);
  _exit (0);
}

/* What test_ub_slot_lost expects to read: A always; B and C when the log
 * was replayed; D never (its only copy was txg b). */
static void
lost_check (zvol_t *zv, bool replayed)
{
  tl_vol_check (zv, 0, 256 * 1024, 0xa);
  if (replayed) {
    tl_vol_check (zv, MiB, 64 * 1024, 0xb);
    tl_vol_check (zv, MiB + 512 * 1024, 4096, 0xb);
    tl_vol_check (zv, 3 * MiB, 64 * 1024, 0xc);
    tl_vol_check (zv, 3 * MiB + 512 * 1024, 4096, 0xc);
  }
  else {
    vol_check_zero (zv, MiB, 1024 * 1024);
    vol_check_zero (zv, 3 * MiB, 1024 * 1024);
  }
  vol_check_zero (zv, 2 * MiB, 64 * 1024);
}

/*
 * The finding: a server synced txg b, flushed more, and was killed; then
 * the newest uberblock's slot was zeroed in both labels.  Import used to
 * take txg a quietly and lose what only txg b held.  It must refuse (and
 * read-only too), naming the slot and txg b, and write nothing; with
 * rewind=true read-only it shows txg a as it is (no replay, nothing
 * written); with rewind=true it takes txg a, replays a's log chain, which
 * still reaches what was flushed (B, and C after b), and loses D, which
 * only txg b held; the next plain import is clean.
 */
static void
test_ub_slot_lost (void **state)
{
  char path[512], want[256];
  const char *dev = tl_path (path, sizeof path, "ub-lost");
  lost_child_t c = { .dev = dev };
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  uint64_t txg[2], h;
  int fds[2], status;
  pid_t pid;

  (void) state;
  make_pool (dev, DEV_SIZE, 8 * MiB);
  assert_int_equal (pipe (fds), 0);
  c.fd = fds[1];
  pid = tl_fork_thread (lost_child_thread, &c, fds);
  assert_true (pid >= 0);
  assert_int_equal (read (fds[0], txg, sizeof txg), (ssize_t) sizeof txg);
  close (fds[0]);
  assert_int_equal (waitpid (pid, &status, 0), pid);
  assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  assert_int_equal (txg[1], txg[0] + 1);
  assert_int_equal (newest_ub (dev).ub_txg, txg[1]);

  slot_damage_all (&dev, 1, (unsigned) (txg[1] % ZV_UB_COUNT), NULL);
  lost_slot_msg (want, sizeof want, txg[1], 2, 1);
  expect_refusal (&dev, 1, false, want);
  expect_refusal (&dev, 1, true, want);

  h = tl_hash_file (dev);
  p = open_rewind (&dev, 1, true, txg[0]);
  assert_true (tl_log_has ("read-only: nothing is written"));
  lost_check (tl_vol (p), false);
  assert_int_equal (tl_pool_close (p), 0);
  assert_true (tl_hash_file (dev) == h);

  p = open_rewind (&dev, 1, false, txg[0]);
  assert_true (tl_log_has ("slots given up are emptied"));
  lost_check (tl_vol (p), true);
  assert_int_equal (tl_pool_close (p), 0);

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  tl_log_reset (false);
  p = tl_pool_open_ok (&pc);
  assert_int_equal (tl_log_errors (), 0);
  assert_int_equal (tl_log_warnings (), 0);
  lost_check (tl_vol (p), true);
  assert_int_equal (tl_pool_close (p), 0);
  unlink (dev);
}

/* The newest slot damaged in one label only (zeros, then noise, in
 * either label): the other copy serves, nothing is lost, nothing said. */
static void
test_ub_slot_one_copy (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "ub-one");
  uint64_t a, b, seed = 12345;

  (void) state;
  for (unsigned k = 0; k < 4; k++) {
    zvol_pool_config_t pc;
    zvol_pool_t *p;

    two_txg_pool (&dev, 1, &a, &b);
    slot_damage (dev, k % 2, (unsigned) (b % ZV_UB_COUNT),
                 k < 2 ? NULL : &seed);
    tl_pool_cfg (&pc, &dev, 1, 0, false);
    tl_log_reset (false);
    p = tl_pool_open_ok (&pc);
    assert_int_equal (zv_pool_open_txg (p), b);
    assert_int_equal (tl_log_errors (), 0);
    assert_int_equal (tl_log_warnings (), 0);
    tl_vol_check (tl_vol (p), MiB, 256 * 1024, 0xb);
    assert_int_equal (tl_pool_close (p), 0);
  }
  unlink (dev);
}

/*
 * Damage that is not zeros, in both copies of the newest slot: noise; the
 * copies of the slot before (moved: they do not verify at this offset);
 * the uberblock of txg a sealed at this slot's offsets (a txg of another
 * slot); txg b's own uberblock with a flag this version does not know.
 * Each is no valid copy, so each refuses, and rewind=true takes txg a.
 */
static void
test_ub_slot_garbage (void **state)
{
  char path[512], want[256];
  const char *dev = tl_path (path, sizeof path, "ub-garbage");
  uint64_t a, b, seed = 999;

  (void) state;
  for (unsigned k = 0; k < 4; k++) {
    zvol_pool_t *p;
    unsigned s, sa;

    two_txg_pool (&dev, 1, &a, &b);
    s = (unsigned) (b % ZV_UB_COUNT);
    sa = (unsigned) (a % ZV_UB_COUNT);
    for (unsigned l = 0; l < ZV_NLABELS; l++) {
      zv_uberblock_phys_t ub;
      uint8_t blk[ZV_UB_SIZE];

      switch (k) {
      case 0:
        slot_damage (dev, l, s, &seed);
        break;
      case 1:
        assert_int_equal (tl_file_pread (dev, blk, sizeof blk,
                                         slot_off (l, sa)), 0);
        assert_int_equal (tl_file_pwrite (dev, blk, sizeof blk,
                                          slot_off (l, s)), 0);
        break;
      case 2:
      case 3:
        assert_int_equal (tl_file_pread (dev, &ub, sizeof ub,
                                         slot_off (l, k == 2 ? sa : s)), 0);
        if (k == 3)
          ub.ub_flags = 4;
        zv_label_seal_ub (&ub, slot_off (l, s));
        assert_int_equal (tl_file_pwrite (dev, &ub, sizeof ub,
                                          slot_off (l, s)), 0);
        break;
      }
    }
    print_message ("  damage case %u\n", k);
    lost_slot_msg (want, sizeof want, b, 2, 1);
    expect_refusal (&dev, 1, false, want);
    p = open_rewind (&dev, 1, false, a);
    tl_vol_check (tl_vol (p), 0, 256 * 1024, 0xa);
    assert_int_equal (tl_pool_close (p), 0);
    tl_log_reset (false);
  }
  unlink (dev);
}

/* The two newest slots damaged in every copy: txgs a and b may both have
 * committed, and the import would take the txg before a. */
static void
test_ub_slot_run (void **state)
{
  char path[512], want[256];
  const char *dev = tl_path (path, sizeof path, "ub-run");
  zvol_pool_t *p;
  uint64_t a, b;

  (void) state;
  two_txg_pool (&dev, 1, &a, &b);
  slot_damage_all (&dev, 1, (unsigned) (a % ZV_UB_COUNT), NULL);
  slot_damage_all (&dev, 1, (unsigned) (b % ZV_UB_COUNT), NULL);
  snprintf (want, sizeof want, "would lose txgs %" PRIu64 " to %" PRIu64
            ", which may have committed (their uberblock slots, %u to %u, "
            "are damaged in every copy", a, b, (unsigned) (a % ZV_UB_COUNT),
            (unsigned) (b % ZV_UB_COUNT));
  expect_refusal (&dev, 1, false, want);
  p = open_rewind (&dev, 1, false, a - 1);
  vol_check_zero (tl_vol (p), 0, 2 * MiB);
  assert_int_equal (tl_pool_close (p), 0);
  tl_log_reset (false);
  unlink (dev);
}

/* Two devices, four copies of each slot: all four damaged refuses; three
 * leave one copy, which serves txg b. */
static void
test_ub_slot_two_devices (void **state)
{
  char pa[512], pb[512], want[256];
  const char *devs[] = { tl_path (pa, sizeof pa, "ub2-a"),
                         tl_path (pb, sizeof pb, "ub2-b") };
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  uint64_t a, b;

  (void) state;
  two_txg_pool (devs, 2, &a, &b);
  slot_damage_all (devs, 2, (unsigned) (b % ZV_UB_COUNT), NULL);
  lost_slot_msg (want, sizeof want, b, 4, 2);
  expect_refusal (devs, 2, false, want);
  p = open_rewind (devs, 2, false, a);
  tl_vol_check (tl_vol (p), 0, 256 * 1024, 0xa);
  assert_int_equal (tl_pool_close (p), 0);

  two_txg_pool (devs, 2, &a, &b);
  slot_damage (devs[0], 0, (unsigned) (b % ZV_UB_COUNT), NULL);
  slot_damage (devs[0], 1, (unsigned) (b % ZV_UB_COUNT), NULL);
  slot_damage (devs[1], 0, (unsigned) (b % ZV_UB_COUNT), NULL);
  tl_pool_cfg (&pc, devs, 2, 0, false);
  tl_log_reset (false);
  p = tl_pool_open_ok (&pc);
  assert_int_equal (zv_pool_open_txg (p), b);
  assert_int_equal (tl_log_warnings (), 0);
  tl_vol_check (tl_vol (p), MiB, 256 * 1024, 0xb);
  assert_int_equal (tl_pool_close (p), 0);
  unlink (devs[0]);
  unlink (devs[1]);
}

/*
 * A later uberblock of the newest txg itself (the txg written again) whose
 * tree does not verify, in the front label: the import would take the
 * earlier one of the same txg, which is still a rewind past a committed
 * uberblock, so it refuses; rewind=true empties the later copy.
 */
static void
test_ub_same_txg_later (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "ub-later");
  zv_uberblock_phys_t ub;
  zvol_pool_t *p;
  uint64_t a, b, off;

  (void) state;
  two_txg_pool (&dev, 1, &a, &b);
  ub = newest_ub (dev);
  ub.ub_timestamp += 1000;
  ub.ub_rootbp.bp_birth = b + 1;          /* an invalid root pointer */
  off = slot_off (0, (unsigned) (b % ZV_UB_COUNT));
  zv_label_seal_ub (&ub, off);
  assert_int_equal (tl_file_pwrite (dev, &ub, sizeof ub, off), 0);
  expect_refusal (&dev, 1, false, "would lose the later uberblock of txg");
  assert_true (tl_log_has ("invalid root pointer"));
  p = open_rewind (&dev, 1, false, b);
  tl_vol_check (tl_vol (p), MiB, 256 * 1024, 0xb);
  assert_int_equal (tl_pool_close (p), 0);
  /* Gone: the next import takes txg b at once. */
  {
    zvol_pool_config_t pc;
    tl_pool_cfg (&pc, &dev, 1, 0, false);
    tl_log_reset (false);
    p = tl_pool_open_ok (&pc);
    assert_int_equal (tl_log_errors (), 0);
    assert_int_equal (tl_log_warnings (), 0);
    assert_int_equal (tl_pool_close (p), 0);
  }
  unlink (dev);
}

/* Make a pool look as one created before the prefilled rings: the flag
 * cleared (resealed) and every empty uberblock zeros again. */
static void
make_old_format (const char *dev)
{
  static const uint8_t zero[ZV_UB_SIZE];

  for (unsigned l = 0; l < ZV_NLABELS; l++) {
    uint64_t off = zv_label_offset (DEV_SIZE, l);
    zv_config_phys_t cf;

    assert_int_equal (tl_file_pread (dev, &cf, sizeof cf, off), 0);
    assert_true (zv_label_verify_config (&cf, off));
    /* (A pool of format 3 has ZV_CF_F_FEATURES too: kept.) */
    assert_true (cf.cf_flags == (ZV_CF_F_UB_EMPTY | ZV_CF_F_FEATURES));
    cf.cf_flags &= ~ZV_CF_F_UB_EMPTY;
    zv_label_seal_config (&cf, off);
    assert_int_equal (tl_file_pwrite (dev, &cf, sizeof cf, off), 0);
    for (unsigned s = 0; s < ZV_UB_COUNT; s++) {
      zv_uberblock_phys_t ub;

      assert_int_equal (tl_file_pread (dev, &ub, sizeof ub, slot_off (l, s)),
                        0);
      if (zv_label_verify_ub (&ub, slot_off (l, s))
          && ub.ub_flags == ZV_UB_F_EMPTY)
        assert_int_equal (tl_file_pwrite (dev, zero, sizeof zero,
                                          slot_off (l, s)), 0);
    }
  }
}

/*
 * A pool of before the prefilled rings: while its ring has slots no txg
 * wrote, a zeroed newest slot cannot be told from one, and the import
 * takes the txg before as it always did (noted at info level, no
 * warning).  Once every slot has held a txg, the slot after the newest
 * must hold an older txg, and the refusal works there too.
 */
static void
test_ub_slot_old_pool (void **state)
{
  char path[512], want[256];
  const char *dev = tl_path (path, sizeof path, "ub-old");
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  uint64_t a, b, n;

  (void) state;
  two_txg_pool (&dev, 1, &a, &b);
  make_old_format (dev);
  slot_damage_all (&dev, 1, (unsigned) (b % ZV_UB_COUNT), NULL);
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  tl_log_reset (false);
  p = tl_pool_open_ok (&pc);
  assert_int_equal (zv_pool_open_txg (p), a);
  assert_true (tl_log_has ("created before uberblock rings were filled"));
  assert_int_equal (tl_log_warnings (), 0);
  assert_int_equal (tl_log_errors (), 0);
  tl_vol_check (tl_vol (p), 0, 256 * 1024, 0xa);
  assert_int_equal (tl_pool_close (p), 0);

  /* Past a whole ring of txgs. */
  make_pool (dev, DEV_SIZE, 8 * MiB);
  make_old_format (dev);
  p = tl_pool_open_ok (&pc);
  for (unsigned i = 0; i < ZV_UB_COUNT + 5; i++) {
    tl_vol_write (tl_vol (p), NULL, (uint64_t) i * BS, BS, 100 + i, 0);
    assert_int_equal (zv_pool_sync (p), 0);
  }
  n = zv_txg_last_synced (zv_pool_txg (p));
  assert_true (n > ZV_UB_COUNT + 1);
  assert_int_equal (tl_pool_close (p), 0);
  assert_int_equal (newest_ub (dev).ub_txg, n);
  slot_damage_all (&dev, 1, (unsigned) (n % ZV_UB_COUNT), NULL);
  lost_slot_msg (want, sizeof want, n, 2, 1);
  expect_refusal (&dev, 1, false, want);
  p = open_rewind (&dev, 1, false, n - 1);
  assert_int_equal (tl_pool_close (p), 0);
  tl_log_reset (false);
  unlink (dev);
}

/* One pool, one opener: a second open of the same devices is -EBUSY
 * while the first is open, and works once it is closed. */
static void
test_ebusy (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "busy");
  zvol_pool_config_t pc;
  zvol_pool_t *p, *q = NULL;

  make_pool (dev, DEV_SIZE, 4 * MiB);
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  p = tl_pool_open_ok (&pc);
  /* (Each refusal takes the device layer's short wait for a lock held
   * by a process just killed.) */
  tl_log_reset (true);
  assert_int_equal (tl_pool_open (&pc, &q), -EBUSY);
  assert_null (q);
  assert_true (tl_log_has ("in use"));
  uint64_t h = tl_hash_file (dev);
  tl_pool_cfg (&pc, &dev, 1, 4 * MiB, true);
  assert_int_equal (tl_pool_open (&pc, &q), -EBUSY);
  assert_null (q);
  assert_int_equal (tl_hash_file (dev), h);
  tl_log_reset (false);
  tl_vol_write (tl_vol (p), NULL, 0, 4096, 8, 0);   /* the first is unharmed */
  assert_int_equal (tl_pool_close (p), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  p = tl_pool_open_ok (&pc);
  tl_vol_check (tl_vol (p), 0, 4096, 8);
  assert_int_equal (tl_pool_close (p), 0);
}

/* The txg history: the kstat header and a row per txg. */
static void
test_txg_history (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "hist");
  static const char *const cols[] = {
    "txg", "birth", "state", "ndirty", "nread", "nwritten", "reads",
    "writes", "otime", "qtime", "wtime", "stime",
  };
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  char *text = NULL, *save = NULL, *line;
  unsigned committed = 0, open = 0, written = 0;

  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 8 * MiB, true);
  p = tl_pool_open_ok (&pc);
  for (unsigned i = 0; i < 3; i++) {
    tl_vol_write (tl_vol (p), NULL, i * MiB, 256 * 1024, i, 0);
    assert_int_equal (zv_pool_sync (p), 0);
  }
  text = zvol_format_txgs (p);
  assert_non_null (text);

  line = strtok_r (text, "\n", &save);
  assert_non_null (line);
  {
    char *s2 = NULL, *tok = strtok_r (line, " ", &s2);
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++) {
      assert_non_null (tok);
      assert_string_equal (tok, cols[i]);
      tok = strtok_r (NULL, " ", &s2);
    }
    assert_null (tok);
  }
  while ((line = strtok_r (NULL, "\n", &save)) != NULL) {
    unsigned long long txg, birth, ndirty, nread, nwritten;
    char st;
    assert_int_equal (sscanf (line, "%llu %llu %c %llu %llu %llu", &txg,
                              &birth, &st, &ndirty, &nread, &nwritten), 6);
    if (st == 'C') {
      committed++;
      if (ndirty >= 256 * 1024 && nwritten >= 256 * 1024)
        written++;
    }
    open += st == 'O';
  }
  assert_true (committed >= 3);
  assert_int_equal (written, 3);
  assert_int_equal (open, 1);
  free (text);
  assert_int_equal (tl_pool_close (p), 0);
}

/* ---- the deferred-free rule ---- */

/* Walker: block 0's pointer, and whether a block born in 'txg' overlaps
 * the extent [dva, dva + size). */
typedef struct vwalk {
  zv_blkptr_t blk0;
  uint64_t txg, dva;
  uint32_t size;
  bool overlap;
} vwalk_t;

static bool
extents_overlap (uint64_t a, uint32_t alen, uint64_t b, uint32_t blen)
{
  return ZV_DVA_VDEV (a) == ZV_DVA_VDEV (b) && a < b + blen && b < a + alen;
}

static int
vwalk_cb (void *arg, const zv_blkptr_t *bp, unsigned level, uint64_t blkid,
          const void *data)
{
  vwalk_t *w = arg;

  if (level == 0 && blkid == 0)
    w->blk0 = *bp;
  if (w->dva && bp->bp_birth == w->txg)
    for (unsigned c = 0; c < bp->bp_ncopies; c++)
      w->overlap |= extents_overlap (bp->bp_dva[c], bp->bp_psize, w->dva,
                                     w->size);
  return 0;
}

static void
vol_walk (zvol_pool_t *p, vwalk_t *w)
{
  zv_dnode_phys_t dn;

  zv_object_t *ob = zv_dsdir_object (zv_dsdir_find (p, NULL));

  zv_dmu_object_phys (ob, &dn);
  assert_int_equal (zv_dmu_walk (zv_pool_spa (p), ob->ob_id, &dn, false,
                                 vwalk_cb, w), 0);
  for (unsigned c = 0; c < zv_pool_rootbp (p)->bp_ncopies; c++)
    if (w->dva && zv_pool_rootbp (p)->bp_birth == w->txg)
      w->overlap |= extents_overlap (zv_pool_rootbp (p)->bp_dva[c],
                                     zv_pool_rootbp (p)->bp_psize, w->dva,
                                     w->size);
}

/*
 * A block the intent log wrote in place for txg T (zv_dmu_sync_block),
 * then overwritten in T before T synced, is freed with T: after a crash
 * right after T's sync it must be on T's defer list as imported, not
 * allocated with nothing pointing at it (it was deferred to T + 1, and
 * leaked when the power went before T + 1 synced).  A child process does
 * the work and exits without closing the pool, as a power cut would.
 */
static void
test_inplace_free_durable (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "inplace");
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  uint64_t msg[2] = { 0, 0 };   /* the in-place block's dva, and T */
  int fds[2], status;
  pid_t pid;

  (void) state;
  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 8 * MiB, true);
  p = tl_pool_open_ok (&pc);
  tl_vol_write (tl_vol (p), NULL, 0, BS, 1, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  assert_int_equal (tl_pool_close (p), 0);

  assert_int_equal (pipe (fds), 0);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0) {
    zv_blkptr_t bp;
    uint64_t t;

    close (fds[0]);
    tl_pool_cfg (&pc, &dev, 1, 0, false);
    if (tl_pool_open (&pc, &p) != 0)
      _exit (10);
    t = zv_txg_open_txg (zv_pool_txg (p));
    tl_vol_write (tl_vol (p), NULL, 5 * BS, BS, 2, 0);
    memset (&bp, 0, sizeof bp);
    if (zv_dmu_sync_block (zv_dsdir_object (zv_dsdir_find (p, NULL)), t, 5, &bp) != 0)
      _exit (11);
    tl_vol_write (tl_vol (p), NULL, 5 * BS, BS, 3, 0);  /* unoverride */
    if (zv_pool_sync (p) != 0 || zv_txg_last_synced (zv_pool_txg (p)) != t)
      _exit (12);
    msg[0] = bp.bp_dva[0];
    msg[1] = t;
    if (write (fds[1], msg, sizeof msg) != (ssize_t) sizeof msg)
      _exit (13);
    _exit (0);                  /* no close: T + 1 never syncs */
  }
  close (fds[1]);
  assert_int_equal (read (fds[0], msg, sizeof msg), (ssize_t) sizeof msg);
  close (fds[0]);
  assert_int_equal (waitpid (pid, &status, 0), pid);
  assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  assert_int_not_equal (msg[0], 0);

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  p = tl_pool_open_ok (&pc);
  assert_true (zv_alloc_is_allocated (zv_pool_spa (p)->spa_alloc, msg[0], BS));
  if (!tl_alloc_deferred (zv_pool_spa (p)->spa_alloc, msg[1], msg[0]))
    fail_msg ("the in-place block of txg %" PRIu64 " is allocated after "
              "import but on no defer list: leaked", msg[1]);
  tl_vol_check (tl_vol (p), 5 * BS, BS, 3);
  assert_int_equal (tl_pool_close (p), 0);
  unlink (dev);
}

/*
 * The intent log allocates in open context (an in-place write of a dirty
 * block) while a txg syncs, and a space-map chunk covers 512 MiB: under a
 * steady stream of large FUA writes every pass of the sync's convergence
 * loop found the chunk dirty again, and the sync gave up after 64 passes
 * ("space maps did not converge") and suspended the pool.  Here every
 * device write of the sync is accompanied by such an allocation (from the
 * device observer, so one lands between any two passes): the sync must
 * still complete, leaving what open context changed to the next txg, and
 * the pool must import afterwards with its data.
 */
#define OA_MAX 4096

typedef struct oa {
  zv_alloc_t *oa_alloc;
  uint64_t oa_dva[OA_MAX];
  unsigned oa_n;
} oa_t;

static void
oa_observe (void *arg, zv_dev_t *dev, enum zv_dev_op op, int done,
            uint64_t off, uint32_t len, const void *buf, int result)
{
  oa_t *oa = arg;

  (void) dev; (void) off; (void) len; (void) buf; (void) result;
  if (op == ZV_DEV_WRITE && !done && oa->oa_n < OA_MAX
      && zv_alloc_block (oa->oa_alloc, ZV_SECTOR, 0,
                         &oa->oa_dva[oa->oa_n]) == 0)
    oa->oa_n++;
}

static void
test_sync_open_context_alloc (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "openalloc");
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  zv_spa_t *spa;
  oa_t *oa = calloc (1, sizeof *oa);
  uint64_t passes;
  unsigned cap;

  (void) state;
  assert_non_null (oa);
  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 8 * MiB, true);
  p = tl_pool_open_ok (&pc);
  spa = zv_pool_spa (p);
  tl_vol_write (tl_vol (p), NULL, 0, 4 * BS, 1, 0);
  assert_int_equal (zv_pool_sync (p), 0);

  tl_vol_write (tl_vol (p), NULL, 8 * BS, 4 * BS, 2, 0);
  oa->oa_alloc = spa->spa_alloc;
  zv_dev_set_observer (spa->spa_devs[0], oa_observe, oa);
  assert_int_equal (zv_pool_sync (p), 0);
  zv_dev_set_observer (spa->spa_devs[0], NULL, NULL);
  zv_pool_last_sync (p, &passes, &cap);
  assert_true (oa->oa_n > passes);
  assert_true (passes < 64);

  /* The blocks were never part of a committed tree (a log record that
   * went away): free them, sync, and the pool is as it was. */
  for (unsigned i = 0; i < oa->oa_n; i++)
    zv_alloc_free_now (spa->spa_alloc, oa->oa_dva[i], ZV_SECTOR);
  assert_int_equal (zv_pool_sync (p), 0);
  assert_int_equal (tl_pool_close (p), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  p = tl_pool_open_ok (&pc);
  tl_vol_check (tl_vol (p), 0, 4 * BS, 1);
  tl_vol_check (tl_vol (p), 8 * BS, 4 * BS, 2);
  assert_int_equal (tl_pool_close (p), 0);
  free (oa);
  unlink (dev);
}

/* A block overwritten in txg T stays allocated (on T's defer list)
 * through the sync of T+1 and is free again from T+2. */
static void
test_deferred_free_rule (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "defer");
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  zv_alloc_t *a;
  zvol_t *zv;
  vwalk_t w;
  uint64_t t, old;

  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 8 * MiB, true);
  p = tl_pool_open_ok (&pc);
  zv = tl_vol (p);
  a = zv_pool_spa (p)->spa_alloc;
  tl_vol_write (zv, NULL, 0, BS, 1, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  memset (&w, 0, sizeof w);
  vol_walk (p, &w);
  old = w.blk0.bp_dva[0];
  assert_int_not_equal (old, 0);
  assert_true (zv_alloc_is_allocated (a, old, BS));

  /* Txg T overwrites block 0. */
  t = zv_txg_open_txg (zv_pool_txg (p));
  tl_vol_write (zv, NULL, 0, BS, 2, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  assert_int_equal (zv_txg_last_synced (zv_pool_txg (p)), t);
  memset (&w, 0, sizeof w);
  vol_walk (p, &w);
  assert_int_not_equal (w.blk0.bp_dva[0], old);
  assert_int_equal (w.blk0.bp_birth, t);
  assert_true (tl_alloc_deferred (a, t, old));
  assert_true (zv_alloc_is_allocated (a, old, BS));

  /* T+1 writes plenty: the old block is still reserved, and nothing
   * born in T+1 lands on it. */
  for (unsigned i = 1; i < 40; i++)
    tl_vol_write (zv, NULL, i * BS, BS, 3, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  assert_int_equal (zv_txg_last_synced (zv_pool_txg (p)), t + 1);
  assert_true (tl_alloc_deferred (a, t, old));
  assert_true (zv_alloc_is_allocated (a, old, BS));
  memset (&w, 0, sizeof w);
  w.txg = t + 1;
  w.dva = old;
  w.size = BS;
  vol_walk (p, &w);
  assert_false (w.overlap);

  /* T+2: the space is free (or, if already reused, by a block of T+2). */
  tl_vol_write (zv, NULL, 100 * BS, BS, 4, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  assert_int_equal (zv_txg_last_synced (zv_pool_txg (p)), t + 2);
  assert_false (tl_alloc_deferred (a, t, old));
  memset (&w, 0, sizeof w);
  w.txg = t + 2;
  w.dva = old;
  w.size = BS;
  vol_walk (p, &w);
  assert_true (!zv_alloc_is_allocated (a, old, BS) || w.overlap);
  assert_int_equal (tl_pool_close (p), 0);

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  p = tl_pool_open_ok (&pc);
  tl_vol_check (tl_vol (p), 0, BS, 2);
  tl_vol_check (tl_vol (p), 39 * BS, BS, 3);
  assert_int_equal (tl_pool_close (p), 0);
}

/* Copy the image at from to to (a crash image: the pool is idle). */
static void
copy_image (const char *from, const char *to)
{
  static uint8_t buf[MiB];

  assert_int_equal (tl_sparse_file (to, DEV_SIZE), 0);
  for (uint64_t off = 0; off < DEV_SIZE; off += sizeof buf) {
    assert_int_equal (tl_file_pread (from, buf, sizeof buf, off), 0);
    assert_int_equal (tl_file_pwrite (to, buf, sizeof buf, off), 0);
  }
}

/* A sequential overwrite frees blocks that lie side by side: T's list is
 * written with them merged into extents, an import right after T's sync
 * takes the extents back (every block of them still deferred, the data
 * the new one), and T+2 frees them.  Fails when the list keeps an entry
 * per block. */
static void
test_deferred_list_merged (void **state)
{
  (void) state;
  char path[512], path2[512];
  const char *dev = tl_path (path, sizeof path, "defmerge");
  const char *dev2 = tl_path (path2, sizeof path2, "defmerge-crash");
  const uint32_t len = 64 * BS;
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  zv_alloc_t *a;
  vwalk_t w;
  uint64_t t, old, before;
  size_t n, m;

  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 8 * MiB, true);
  p = tl_pool_open_ok (&pc);
  tl_vol_write (tl_vol (p), NULL, 0, len, 1, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  memset (&w, 0, sizeof w);
  vol_walk (p, &w);
  old = w.blk0.bp_dva[0];
  t = zv_txg_open_txg (zv_pool_txg (p));
  tl_vol_write (tl_vol (p), NULL, 0, len, 2, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  assert_int_equal (zv_txg_last_synced (zv_pool_txg (p)), t);
  a = zv_pool_spa (p)->spa_alloc;
  n = tl_alloc_defer_count (a, t);
  assert_true (n >= 64);
  assert_true (tl_alloc_deferred (a, t, old));
  copy_image (dev, dev2);
  assert_int_equal (tl_pool_close (p), 0);

  tl_pool_cfg (&pc, &dev2, 1, 0, false);
  p = tl_pool_open_ok (&pc);
  a = zv_pool_spa (p)->spa_alloc;
  m = tl_alloc_defer_count (a, t);
  assert_true (m > 0 && m + 48 <= n);
  assert_true (tl_alloc_deferred (a, t, old));
  assert_true (zv_alloc_is_allocated (a, old, BS));
  tl_vol_check (tl_vol (p), 0, len, 2);
  before = tl_alloc_space (a).as_allocated;
  for (int i = 0; i < 3; i++) {
    tl_vol_write (tl_vol (p), NULL, 2 * MiB + i * BS, BS, 3, 0);
    assert_int_equal (zv_pool_sync (p), 0);
  }
  assert_false (tl_alloc_deferred (a, t, old));
  assert_true (tl_alloc_space (a).as_allocated + len / 2 <= before);
  tl_vol_check (tl_vol (p), 0, len, 2);
  assert_int_equal (tl_pool_close (p), 0);
  unlink (dev);
  unlink (dev2);
}

/* ---- crash consistency ---- */

#define CR_VOLSIZE (8 * MiB)
#define CR_SLOT 4096u
#define CR_NSLOTS (CR_VOLSIZE / CR_SLOT)
#define CR_ROUNDS (TL_TSAN ? 6 : 20)
#define CR_MAGIC 0x5a56435241534821ull

/* Child -> parent: "about to write slot s with version v" (M_ISSUE) or
 * "everything issued so far is flushed" (M_FLUSHED). */
enum { M_ISSUE = 1, M_FLUSHED = 2 };
typedef struct crmsg {
  uint32_t m_type, m_slot;
  uint64_t m_version;
} crmsg_t;

/* A slot's content: a header then the pattern of (slot, version). */
static void
cr_fill (uint8_t *buf, uint32_t slot, uint64_t version)
{
  uint64_t hdr[3] = { CR_MAGIC, slot, version };

  tl_pat_fill (buf, (uint64_t) slot * CR_SLOT, CR_SLOT, version);
  memcpy (buf, hdr, sizeof hdr);
}

/* 0: zeros; else the version found; UINT64_MAX: garbage. */
static uint64_t
cr_parse (const uint8_t *buf, uint32_t slot)
{
  uint64_t hdr[3];

  if (zv_is_zero (buf, CR_SLOT))
    return 0;
  memcpy (hdr, buf, sizeof hdr);
  if (hdr[0] != CR_MAGIC || hdr[1] != slot || hdr[2] == 0)
    return UINT64_MAX;
  if (tl_pat_check (buf + sizeof hdr, (uint64_t) slot * CR_SLOT + sizeof hdr,
                    CR_SLOT - sizeof hdr, hdr[2]) >= 0)
    return UINT64_MAX;
  return hdr[2];
}

typedef struct crchild {
  const char *dev;
  int fd;
  unsigned round;
  uint64_t seed;
} crchild_t;

static void
cr_send (int fd, uint32_t type, uint32_t slot, uint64_t version)
{
  crmsg_t m = { .m_type = type, .m_slot = slot, .m_version = version };

  if (write (fd, &m, sizeof m) != sizeof m)
    _exit (3);
}

/* The child's writer (on its own thread: a fresh io_uring): import,
 * start the engine with a short txg timeout, then write and flush until
 * killed. */
static void *
cr_child_thread (void *arg)
{
  crchild_t *c = arg;
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t *buf = malloc (CR_SLOT);
  uint64_t s = c->seed, seq = 0;

  tl_pool_cfg (&pc, &c->dev, 1, 0, false);
  pc.pc_txg.tt_timeout_ms = 20;
  if (buf == NULL || tl_pool_open (&pc, &p) < 0 || zvol_pool_start (p) < 0)
    _exit (4);
  zvol_t *zv = tl_vol (p);
  for (;;) {
    unsigned nw = 1 + tl_rand (&s) % 8;
    for (unsigned i = 0; i < nw; i++) {
      uint32_t slot = tl_rand (&s) % CR_NSLOTS;
      uint64_t version = (uint64_t) (c->round + 1) * 1000000 + ++seq;
      cr_fill (buf, slot, version);
      cr_send (c->fd, M_ISSUE, slot, version);
      if (zvol_write (zv, buf, (uint64_t) slot * CR_SLOT, CR_SLOT, 0) < 0)
        _exit (5);
    }
    if (zvol_flush (zv) < 0)
      _exit (6);
    cr_send (c->fd, M_FLUSHED, 0, 0);
  }
  return NULL;
}

/* Kill a writer at random moments; every write acknowledged by a flush
 * must be there after import, and nothing may be torn or garbage. */
static void
test_crash_rounds (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "crash");
  uint64_t *acked = calloc (CR_NSLOTS, sizeof *acked);
  uint64_t *issued = calloc (CR_NSLOTS, sizeof *issued);
  crmsg_t *pend = calloc (1u << 16, sizeof *pend);
  uint8_t *vol = malloc (CR_VOLSIZE);
  uint64_t seed = tl_seed ("crash rounds");
  uint64_t total_acked = 0, busy_ns = 0;
  unsigned acked_rounds = 0;          /* rounds that saw a flush */
  zvol_pool_config_t pc;

  assert_non_null (acked);
  assert_non_null (vol);
  make_pool (dev, DEV_SIZE, CR_VOLSIZE);
  tl_pool_cfg (&pc, &dev, 1, 0, false);

  for (unsigned round = 0; round < CR_ROUNDS; round++) {
    int fds[2];
    pid_t pid;
    size_t npend = 0;
    crmsg_t m;
    ssize_t got;
    int status;

    assert_int_equal (pipe (fds), 0);
    crchild_t c = {
      .dev = dev, .fd = fds[1], .round = round,
      .seed = tl_mix (seed + round),
    };
    pid = tl_fork_thread (cr_child_thread, &c, fds);
    assert_true (pid >= 0);
    /* Once it has imported and acknowledged its first flush, let it run
     * 10 to 130 ms more, then kill it.  (Waiting for the first flush
     * keeps the test meaningful on slow runs, under TSan say.)  The pipe
     * holds thousands of messages, so the child does not block on it. */
    uint64_t s = tl_mix (seed ^ (round * 77 + 1));
    struct timespec ts = { 0, (long) (10 + tl_rand (&s) % 120) * 1000000L };
    bool killed = false;
    for (;;) {
      if (!killed && acked_rounds > round) {
        nanosleep (&ts, NULL);
        kill (pid, SIGKILL);
        killed = true;
      }
      if (!killed) {
        struct pollfd pf = { .fd = fds[0], .events = POLLIN };
        if (poll (&pf, 1, 20000) == 0) {
          kill (pid, SIGKILL);
          waitpid (pid, NULL, 0);
          fail_msg ("round %u: no flush acknowledged in 20 s", round);
        }
      }
      got = read (fds[0], &m, sizeof m);
      if (got != sizeof m)
        break;
      if (m.m_type == M_ISSUE) {
        assert_true (m.m_slot < CR_NSLOTS);
        issued[m.m_slot] = ZV_MAX (issued[m.m_slot], m.m_version);
        assert_true (npend < (1u << 16));
        pend[npend++] = m;
      }
      else {
        for (size_t i = 0; i < npend; i++)
          acked[pend[i].m_slot] = ZV_MAX (acked[pend[i].m_slot],
                                          pend[i].m_version);
        total_acked += npend;
        npend = 0;
        acked_rounds = round + 1;
      }
    }
    assert_int_equal (got, 0);
    close (fds[0]);
    assert_int_equal (waitpid (pid, &status, 0), pid);
    if (!WIFSIGNALED (status) || WTERMSIG (status) != SIGKILL)
      fail_msg ("round %u: the child exited by itself (status 0x%x)", round,
                status);

    /* Import what the dead child left and check every slot.  The dead
     * child's io_uring is torn down asynchronously by the kernel, and the
     * lock on the device goes with its last file reference: wait. */
    zvol_pool_t *p = NULL;
    uint64_t t0 = zv_now_ns (), busy;
    assert_int_equal (tl_pool_open_retry_ex (&pc, &p, &busy, false), 0);
    busy_ns = ZV_MAX (busy_ns, busy);
    if (getenv ("ZV_TEST_VERBOSE"))
      fprintf (stderr, "  round %u: device busy %.3f s, import %.3f s\n",
               round, busy / 1e9, (zv_now_ns () - t0 - busy) / 1e9);
    assert_int_equal (zvol_read (tl_vol (p), vol, 0, CR_VOLSIZE),
                      0);
    assert_int_equal (tl_pool_close (p), 0);
    for (uint32_t slot = 0; slot < CR_NSLOTS; slot++) {
      uint64_t v = cr_parse (vol + (uint64_t) slot * CR_SLOT, slot);
      if (v == UINT64_MAX)
        fail_msg ("round %u: slot %u holds garbage", round, slot);
      if (v < acked[slot] || v > issued[slot])
        fail_msg ("round %u: slot %u has version %" PRIu64 ", acknowledged "
                  "%" PRIu64 ", newest issued %" PRIu64, round, slot, v,
                  acked[slot], issued[slot]);
      /* What we saw is now the floor: a later round may not lose it. */
      acked[slot] = v;
    }
  }
  print_message ("  crash rounds: %" PRIu64 " acknowledged writes checked; "
                 "longest wait for the dead child's lock %" PRIu64 " us\n",
                 total_acked, busy_ns / 1000);
  assert_true (total_acked > 0);
  free (acked);
  free (issued);
  free (pend);
  free (vol);
}

/* ---- a rewind's log chain ---- */

#define RU_RING (4u * ZV_ZIL_BLKSZ)     /* the smallest log ring */
enum { M_SYNCED = 3 };                 /* a txg synced: m_version = txg */

typedef struct ruchild {
  const char *dev;
  int fd;
  uint64_t seed;
} ruchild_t;

/*
 * The child of test_rewind_log_reused, on its own thread: without the
 * sync thread, a commit that finds the log ring full syncs a txg inline.
 * It writes and flushes (4 KiB copied, 64 KiB in place) until the ring
 * has forced two syncs, N-1 and N, then 24 more: N synced when the ring
 * was full again behind N-1's head, so those blocks land on the ring
 * space where N-1's chain went on.  Then it dies without closing.
 */
static void *
ru_child_thread (void *arg)
{
  const ruchild_t *c = arg;
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  zvol_t *zv;
  uint8_t *buf = malloc (16 * CR_SLOT);
  uint64_t s = c->seed, version = 0, synced;
  unsigned syncs = 0, after = 0;

  tl_pool_cfg (&pc, &c->dev, 1, 0, false);
  TL_CHECK (buf != NULL && tl_pool_open (&pc, &p) == 0);
  zv = tl_vol (p);
  synced = zv_txg_last_synced (zv_pool_txg (p));
  for (unsigned i = 0; i < 100000 && (syncs < 2 || after < 24); i++) {
    unsigned n = tl_rand (&s) % 4 == 0 ? 16 : 1;
    uint32_t slot = (uint32_t) (tl_rand (&s) % (CR_NSLOTS / 4 - 4)) * 4;
    uint64_t now;

    for (unsigned k = 0; k < n; k++) {
      cr_fill (buf + (size_t) k * CR_SLOT, slot + k, ++version);
      cr_send (c->fd, M_ISSUE, slot + k, version);
    }
    TL_CHECK (zvol_write (zv, buf, (uint64_t) slot * CR_SLOT, n * CR_SLOT,
                          0) == 0);
    TL_CHECK (zvol_flush (zv) == 0);
    cr_send (c->fd, M_FLUSHED, 0, 0);
    now = zv_txg_last_synced (zv_pool_txg (p));
    if (now != synced) {
      cr_send (c->fd, M_SYNCED, 0, now);
      synced = now;
      syncs++;
      after = 0;
    }
    else if (syncs >= 2)
      after++;
  }
  _exit (0);
}

/*
 * A rewind replays the log chain of the txg it takes, which may run into
 * ring space reused since (by blocks written after the newer txg synced)
 * and into in-place blocks: the chain must end there, never replay stale
 * or foreign data.  The newest slot zeroed after a crash: the import
 * refuses, rewind=true takes N-1, and every 4 KiB of the volume then
 * holds zeros or one version a write gave it, whole.  The flushed writes
 * whose records only the overwritten blocks held are lost: the count
 * shows that the chain did meet reused space.
 */
static void
test_rewind_log_reused (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "ru");
  uint64_t *acked = calloc (CR_NSLOTS, sizeof *acked);
  uint64_t *issued = calloc (CR_NSLOTS, sizeof *issued);
  uint8_t *vol = malloc (CR_VOLSIZE);
  crmsg_t *pend = calloc (1u << 16, sizeof *pend);
  ruchild_t c = { .dev = dev, .seed = tl_seed ("rewind log") };
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  uint64_t last_sync = 0, lost = 0, nacked = 0;
  unsigned nsyncs = 0;
  size_t npend = 0;
  int fds[2], status;
  crmsg_t m;
  pid_t pid;

  (void) state;
  assert_true (acked && issued && vol && pend);
  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, CR_VOLSIZE, true);
  pc.pc_zil_size = RU_RING;
  assert_int_equal (tl_pool_close (tl_pool_open_ok (&pc)), 0);

  assert_int_equal (pipe (fds), 0);
  c.fd = fds[1];
  pid = tl_fork_thread (ru_child_thread, &c, fds);
  assert_true (pid >= 0);
  while (read (fds[0], &m, sizeof m) == (ssize_t) sizeof m) {
    if (m.m_type == M_ISSUE) {
      assert_true (m.m_slot < CR_NSLOTS && npend < (1u << 16));
      issued[m.m_slot] = ZV_MAX (issued[m.m_slot], m.m_version);
      pend[npend++] = m;
    }
    else if (m.m_type == M_FLUSHED) {
      for (size_t i = 0; i < npend; i++)
        acked[pend[i].m_slot] = ZV_MAX (acked[pend[i].m_slot],
                                        pend[i].m_version);
      nacked += npend;
      npend = 0;
    }
    else {
      last_sync = m.m_version;
      nsyncs++;
    }
  }
  close (fds[0]);
  assert_int_equal (waitpid (pid, &status, 0), pid);
  assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  assert_true (nsyncs >= 2);
  assert_int_equal (newest_ub (dev).ub_txg, last_sync);

  slot_damage_all (&dev, 1, (unsigned) (last_sync % ZV_UB_COUNT), NULL);
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  expect_refusal (&dev, 1, false, "may have committed");
  p = open_rewind (&dev, 1, false, last_sync - 1);
  assert_int_equal (zvol_read (tl_vol (p), vol, 0, CR_VOLSIZE), 0);
  assert_int_equal (tl_pool_close (p), 0);
  for (uint32_t slot = 0; slot < CR_NSLOTS; slot++) {
    uint64_t v = cr_parse (vol + (uint64_t) slot * CR_SLOT, slot);
    if (v == UINT64_MAX)
      fail_msg ("slot %u holds garbage after the rewind", slot);
    if (v > issued[slot])
      fail_msg ("slot %u has version %" PRIu64 ", newer than any written "
                "(%" PRIu64 ")", slot, v, issued[slot]);
    lost += v < acked[slot];
  }
  print_message ("  %" PRIu64 " flushed writes, %u syncs; after the rewind "
                 "to txg %" PRIu64 ", %" PRIu64 " slots older than flushed\n",
                 nacked, nsyncs, last_sync - 1, lost);
  assert_true (lost > 0);
  /* The pool is whole again: a plain import, and it reads the same. */
  tl_log_reset (false);
  p = tl_pool_open_ok (&pc);
  assert_int_equal (tl_log_warnings (), 0);
  uint8_t *again = malloc (CR_VOLSIZE);
  assert_non_null (again);
  assert_int_equal (zvol_read (tl_vol (p), again, 0, CR_VOLSIZE), 0);
  assert_memory_equal (again, vol, CR_VOLSIZE);
  assert_int_equal (tl_pool_close (p), 0);
  free (again);
  free (acked);
  free (issued);
  free (vol);
  free (pend);
  unlink (dev);
}

/* ---- the offline checker (zvol_pool_check) ---- */

/* Every problem a check reported, one line each, and its kinds. */
typedef struct chk_seen {
  char cs_text[16384];
  size_t cs_len;
  unsigned cs_kinds[ZVOL_CHECK_LEAK + 1];
  uint64_t cs_progress_done, cs_progress_total;
} chk_seen_t;

static void
chk_problem (void *arg, const zvol_check_problem_t *cp)
{
  chk_seen_t *cs = arg;
  int n = snprintf (cs->cs_text + cs->cs_len, sizeof cs->cs_text - cs->cs_len,
                    "%s\n", cp->cp_msg);

  if (n > 0)
    cs->cs_len = ZV_MIN (cs->cs_len + (size_t) n, sizeof cs->cs_text - 1);
  assert_true (cp->cp_kind >= ZVOL_CHECK_CKSUM
               && cp->cp_kind <= ZVOL_CHECK_LEAK);
  cs->cs_kinds[cp->cp_kind]++;
}

static void
chk_progress (void *arg, const char *what, uint64_t done, uint64_t total)
{
  chk_seen_t *cs = arg;

  assert_string_equal (what, "check");
  assert_true (done <= total);
  assert_true (done >= cs->cs_progress_done);
  cs->cs_progress_done = done;
  cs->cs_progress_total = total;
}

/* Check the pool on dev; the devices must not change. */
static void
chk_run (const char *dev, zvol_check_report_t *rep, chk_seen_t *cs)
{
  zvol_pool_config_t pc;
  uint64_t h = tl_hash_file (dev);

  memset (cs, 0, sizeof *cs);
  memset (rep, 0, sizeof *rep);
  rep->cr_problem = chk_problem;
  rep->cr_problem_arg = cs;
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  pc.pc_progress = chk_progress;
  pc.pc_progress_arg = cs;
  tl_log_reset (true);
  assert_int_equal (zvol_pool_check (&pc, rep), 0);
  tl_log_reset (false);
  assert_true (tl_hash_file (dev) == h);
  print_message ("  %" PRIu64 " problems:\n%s", rep->cr_problems,
                 cs->cs_text);
}

static void
chk_expect (const chk_seen_t *cs, const char *needle)
{
  if (strstr (cs->cs_text, needle) == NULL)
    fail_msg ("the check did not say \"%s\"", needle);
}

/* Several volumes with data, after txgs that overwrote, trimmed and
 * destroyed: every block read, nothing to report, the progress reaching
 * the total. */
static void
test_check_clean (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "chk-clean");
  static const char *const names[] = { "a", "b", "c" };
  zvol_pool_config_t pc;
  zvol_volume_params_t vp = { .vp_size = 8 * MiB };
  zvol_check_report_t rep;
  chk_seen_t cs;
  zvol_pool_t *p;
  zvol_t *zv;

  (void) state;
  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, true);
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  for (unsigned i = 0; i < 3; i++) {
    vp.vp_blocksize = i == 1 ? 4096 : 0;
    vp.vp_reservation = i == 2 ? 0 : vp.vp_size;
    assert_int_equal (zvol_volume_create (p, names[i], &vp), 0);
  }
  assert_int_equal (zvol_volume_create (p, "gone", &vp), 0);
  for (unsigned t = 0; t < 3; t++)
    for (unsigned i = 0; i < 3; i++) {
      assert_int_equal (zvol_open (p, names[i], &tl_volcfg, &zv), 0);
      tl_vol_write (zv, NULL, t * 512 * KiB, 1 * MiB, 0x30 + t + i, 0);
      if (t == 2)
        assert_int_equal (zvol_trim (zv, 0, 256 * KiB, 0), 0);
      assert_int_equal (zvol_close (zv), 0);
      assert_int_equal (zv_pool_sync (p), 0);
    }
  assert_int_equal (zvol_volume_destroy (p, "gone"), 0);
  assert_int_equal (zvol_pool_close (p), 0);

  chk_run (dev, &rep, &cs);
  assert_int_equal (rep.cr_problems, 0);
  assert_int_equal (rep.cr_trees, 3);
  /* 1.75 MiB of data per volume (2 MiB written, 256 KiB trimmed), and
   * every block of it read. */
  assert_true (rep.cr_bytes >= 3 * (2 * MiB - 256 * KiB));
  assert_true (rep.cr_blocks > 3 * (2 * MiB - 256 * KiB) / (16 * KiB));
  assert_int_equal (rep.cr_leaked + rep.cr_double + rep.cr_cksum_errors
                    + rep.cr_free_refs + rep.cr_incomplete, 0);
  assert_true (cs.cs_progress_total > 0);
  assert_int_equal (cs.cs_progress_done, cs.cs_progress_total);
}

/* A pointer forgotten (the data block's space allocated, named by
 * nothing): leaked, with its bytes and place. */
static void
test_check_leak (void **state)
{
  char path[512], want[128];
  const char *dev = tl_path (path, sizeof path, "chk-leak");
  zvol_check_report_t rep;
  chk_seen_t cs;

  (void) state;
  hostile_pool (dev);
  chk_run (dev, &rep, &cs);
  assert_int_equal (rep.cr_problems, 0);
  edit_newest_rec (dev, os_edit_l1, L1_HOLE);
  chk_run (dev, &rep, &cs);
  assert_int_equal (rep.cr_leaked, 1);
  assert_int_equal (rep.cr_leaked_bytes, BS);
  assert_int_equal (cs.cs_kinds[ZVOL_CHECK_LEAK], 1);
  assert_int_equal (rep.cr_problems, 1);
  snprintf (want, sizeof want, "%u bytes: allocated in the space map, owned "
            "by nothing (leaked)", BS);
  chk_expect (&cs, want);
}

/* Two pointers at one block: doubly allocated, both named; the block
 * the second pointer had named leaks.  A pointer at free space: said. */
static void
test_check_double (void **state)
{
  char path[512], want[160];
  const char *dev = tl_path (path, sizeof path, "chk-dup");
  zvol_check_report_t rep;
  chk_seen_t cs;

  (void) state;
  hostile_pool (dev);
  edit_newest_rec (dev, os_edit_l1, L1_SHARE_SAME);
  chk_run (dev, &rep, &cs);
  assert_int_equal (rep.cr_double, 1);
  assert_int_equal (rep.cr_double_bytes, BS);
  assert_int_equal (rep.cr_leaked_bytes, BS);
  assert_int_equal (rep.cr_cksum_errors + rep.cr_incomplete, 0);
  snprintf (want, sizeof want, "%u bytes: doubly allocated, claimed by "
            "volume 'zvol' level 0 block 1 copy 1 and volume 'zvol' level 0 "
            "block 2 copy 1", BS);
  chk_expect (&cs, want);

  hostile_pool (dev);
  edit_newest_rec (dev, os_edit_l1, L1_FREE);
  chk_run (dev, &rep, &cs);
  assert_int_equal (rep.cr_free_refs, 1);
  assert_int_equal (rep.cr_leaked_bytes, BS);   /* what block 1 was */
  chk_expect (&cs, "volume 'zvol' level 0 block 1 copy 1: points at free "
              "space");
}

/* A flipped byte of a data block: a checksum error with its place
 * (volume, level, block, device, offset), the block lost (one copy);
 * an indirect block damaged in both copies: named, and the tree counted
 * as not walked to the end. */
static void
test_check_cksum (void **state)
{
  char path[512], want[768];
  const char *dev = tl_path (path, sizeof path, "chk-ck");
  zv_uberblock_phys_t ub;
  zv_objset_phys_t *os;
  zv_dsrec_phys_t *rec;
  zv_blkptr_t *top, l1bp, d0;
  zvol_check_report_t rep;
  chk_seen_t cs;
  void *l1;

  (void) state;
  hostile_pool (dev);
  ub = newest_ub (dev);
  os = read_bp (dev, &ub.ub_rootbp);
  rec = read_bp (dev, &os->os_dsdir.dn_root);
  while (os->os_dsdir.dn_root.bp_level-- > 0) {   /* down the directory */
    void *next = read_bp (dev, (zv_blkptr_t *) (void *) rec + 1);
    free (rec);
    rec = next;
  }
  assert_true (rec->dr_magic == ZV_DSREC_MAGIC);
  top = read_bp (dev, &rec->dr_volume.dn_root);
  l1bp = top[1];
  l1 = read_bp (dev, &l1bp);
  d0 = ((zv_blkptr_t *) l1 + 1)[0];
  assert_int_equal (d0.bp_ncopies, 1);
  assert_int_equal (tl_file_flip (dev, ZV_DVA_OFFSET (d0.bp_dva[0]) + 77), 0);
  chk_run (dev, &rep, &cs);
  assert_int_equal (rep.cr_cksum_errors, 1);
  assert_int_equal (rep.cr_lost_blocks, 1);
  assert_int_equal (rep.cr_leaked + rep.cr_double + rep.cr_incomplete, 0);
  snprintf (want, sizeof want, "volume 'zvol' level 0 block 0 copy 1 of 1: "
            "checksum error on device 0 (%s) offset %" PRIu64, dev,
            ZV_DVA_OFFSET (d0.bp_dva[0]));
  chk_expect (&cs, want);
  chk_expect (&cs, "volume 'zvol' level 0 block 0: no copy verifies");

  /* One copy of the level-1 block: the walk reads the other; both: it
   * stops there. */
  assert_int_equal (l1bp.bp_ncopies, 2);
  assert_int_equal (tl_file_flip (dev, ZV_DVA_OFFSET (l1bp.bp_dva[1]) + 300),
                    0);
  chk_run (dev, &rep, &cs);
  assert_int_equal (rep.cr_cksum_errors, 2);
  assert_int_equal (rep.cr_incomplete, 0);
  snprintf (want, sizeof want, "volume 'zvol' level 1 block 0 copy 2 of 2: "
            "checksum error on device 0 (%s) offset %" PRIu64, dev,
            ZV_DVA_OFFSET (l1bp.bp_dva[1]));
  chk_expect (&cs, want);
  assert_int_equal (tl_file_flip (dev, ZV_DVA_OFFSET (l1bp.bp_dva[0]) + 300),
                    0);
  chk_run (dev, &rep, &cs);
  assert_int_equal (rep.cr_incomplete, 1);
  chk_expect (&cs, "volume 'zvol' level 1 block 0: no copy verifies");
  chk_expect (&cs, "volume 'zvol': the walk stopped");
  assert_true (rep.cr_leaked > 0);  /* what the unwalked part holds */
  free (l1);
  free (top);
  free (rec);
  free (os);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_roundtrip),
    tl_test (test_volume_open),
    tl_test (test_create_refuses_pool),
    tl_test (test_import_zeroed),
    tl_test (test_create_checks),
    tl_test (test_sparse_enospc),
    tl_test (test_two_devices),
    tl_test (test_duplicate_device),
    tl_test (test_same_device_identity),
    tl_test (test_rewind),
    tl_test (test_damaged_config),
    tl_test (test_hostile_rootbp),
    tl_test (test_hostile_volume),
    tl_test (test_hostile_indirect),
    tl_test (test_lazy_indirect),
    tl_test (test_lazy_double_owner),
    tl_test (test_hostile_zil),
    tl_test (test_hostile_dsrec),
    tl_test (test_hostile_config),
    tl_test (test_hostile_member_index),
    tl_test (test_labels_zeroed_pool),
    tl_test (test_ub_slot_lost),
    tl_test (test_ub_slot_one_copy),
    tl_test (test_ub_slot_garbage),
    tl_test (test_ub_slot_run),
    tl_test (test_ub_slot_two_devices),
    tl_test (test_ub_same_txg_later),
    tl_test (test_ub_slot_old_pool),
    tl_test (test_ebusy),
    tl_test (test_txg_history),
    tl_test (test_deferred_free_rule),
    tl_test (test_deferred_list_merged),
    tl_test (test_inplace_free_durable),
    tl_test (test_sync_open_context_alloc),
    tl_test (test_crash_rounds),
    tl_test (test_rewind_log_reused),
    tl_test (test_check_clean),
    tl_test (test_check_leak),
    tl_test (test_check_double),
    tl_test (test_check_cksum),
  };

  return tl_main (tests, "pool", NULL);
}
