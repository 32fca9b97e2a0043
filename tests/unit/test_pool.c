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

/* Every valid uberblock on a one-device pool (parsed by hand). */
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
      if (ub.ub_magic != ZV_UB_MAGIC || !zv_label_verify_ub (&ub, off))
        continue;
      assert_int_equal (s, ub.ub_txg % ZV_UB_COUNT);
      if (n < max)
        out[n++] = ub;
    }
  return n;
}

/* The objset of the newest txg is damaged in both copies: import rewinds
 * to the txg before, with its content, and says so. */
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

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  tl_log_reset (true);
  p = tl_pool_open_ok (&pc);
  assert_true (tl_log_has ("rewound"));
  assert_int_equal (zv_txg_last_synced (zv_pool_txg (p)), txg_a);
  tl_vol_check (tl_vol (p), 0, 256 * 1024, 0xa);
  tl_log_reset (false);
  /* Writable after the rewind, and the next import is clean. */
  tl_vol_write (tl_vol (p), NULL, MiB, 65536, 0xc, 0);
  assert_int_equal (tl_pool_close (p), 0);
  tl_log_reset (true);
  p = tl_pool_open_ok (&pc);
  assert_false (tl_log_has ("rewound"));
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

/* Import: the damaged txg is refused with 'msg', and the pool rewinds. */
static void
expect_refused_txg (const char *dev, uint64_t bad_txg, const char *msg)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  tl_log_reset (true);
  assert_int_equal (tl_pool_open (&pc, &p), 0);
  if (!tl_log_has (msg))
    fail_msg ("import of txg %" PRIu64 " did not say \"%s\"", bad_txg, msg);
  assert_true (tl_log_has ("rewound"));
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
os_set_volsize (const char *dev, uint64_t guid, zv_objset_phys_t *os,
                uint64_t v)
{
  os->os_volume.dn_size = v;
}

static void
os_set_volroot_birth (const char *dev, uint64_t guid, zv_objset_phys_t *os,
                      uint64_t v)
{
  os->os_volume.dn_root.bp_birth = os->os_txg + v;
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
  txg = edit_newest_objset (dev, os_set_volsize, 8 * MiB - 512);
  expect_refused_txg (dev, txg, "size does not match");
  hostile_pool (dev);
  txg = edit_newest_objset (dev, os_set_volsize, 1ull << 50);
  expect_refused_txg (dev, txg, "size does not match");
  /* A root born after the txg that names it. */
  hostile_pool (dev);
  txg = edit_newest_objset (dev, os_set_volroot_birth, 5);
  expect_refused_txg (dev, txg, "born in txg");
}

/* An indirect block's header txg: the writer stores its pointer's birth. */
static void
os_set_ind_txg (const char *dev, uint64_t guid, zv_objset_phys_t *os,
                uint64_t delta)
{
  zv_blkptr_t *root = &os->os_volume.dn_root;
  zv_mblk_hdr_t *h;

  assert_int_equal (root->bp_type, ZV_BT_INDIRECT);
  h = read_bp (dev, root);
  assert_int_equal (h->mh_type, ZV_BT_INDIRECT);
  assert_int_equal (h->mh_txg, root->bp_birth);  /* what the writer stores */
  h->mh_txg = root->bp_birth + delta;
  rewrite_bp (dev, root, h, guid);
  free (h);
}

static void
test_hostile_indirect (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "h-ind");
  uint64_t txg;

  (void) state;
  hostile_pool (dev);
  txg = edit_newest_objset (dev, os_set_ind_txg, 7);
  expect_refused_txg (dev, txg, "header txg");
  hostile_pool (dev);
  txg = edit_newest_objset (dev, os_set_ind_txg, (uint64_t) -1);
  expect_refused_txg (dev, txg, "header txg");
}

/* The intent-log header: a claim txg or a head that cannot be. */
static void
os_set_zil (const char *dev, uint64_t guid, zv_objset_phys_t *os,
            uint64_t which)
{
  zv_zil_header_t *zh = &os->os_zil;
  uint64_t len = zh->zh_nslots * (uint64_t) zh->zh_blksz;

  switch (which) {
  case 0: zh->zh_claim_txg = UINT64_MAX - 5; break;
  case 1: zh->zh_claim_txg = os->os_txg + 1; break;
  case 2: zh->zh_head_pos = (UINT64_MAX / len) * len; break;
  case 3: zh->zh_head_seq = UINT64_MAX; break;
  }
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
    txg = edit_newest_objset (dev, os_set_zil, w);
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

  zv_dmu_object_phys (zv_pool_ds_object (zv_pool_ds_find (p, NULL)), &dn);
  assert_int_equal (zv_dmu_walk (zv_pool_spa (p), ZV_OBJ_VOLUME, &dn, false,
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
    if (zv_dmu_sync_block (zv_pool_ds_object (zv_pool_ds_find (p, NULL)), t, 5, &bp) != 0)
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
    tl_test (test_hostile_zil),
    tl_test (test_hostile_config),
    tl_test (test_hostile_member_index),
    tl_test (test_labels_zeroed_pool),
    tl_test (test_ebusy),
    tl_test (test_txg_history),
    tl_test (test_deferred_free_rule),
    tl_test (test_inplace_free_durable),
    tl_test (test_crash_rounds),
  };

  return tl_main (tests, "pool", NULL);
}
