/*
 * test_zil.c: unit tests for the intent log (core/zil.c) through the
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
 *   powercut       >= 200 random power cuts under a 4-thread workload
 *                  (ZVOL_POWERCUT_ROUNDS raises it; 50 under TSan): after
 *                  import, each 4 KiB block holds one whole version
 *                  written to it, no older than the last one acknowledged
 *                  durable
 *   replay_crash   power cuts in the middle of replay, at the uberblock
 *                  writes and at random: the next import gives what one
 *                  clean replay gives, and the pool stays sound
 *   hostile_log    corrupt and garbage log blocks: replay stops at the
 *                  first bad one; checksummed nonsense never crashes
 *
 * Devices are sparse files in a mkdtemp directory under /var/tmp.  Checks
 * made on threads other than cmocka's are counted, not asserted, and the
 * main thread asserts on the counts.  Run it under TSan too: the commit
 * path is lock-free.  ZV_TEST_SEED replays a run's random choices (the
 * thread interleavings aside); ZV_TEST_FILTER runs some tests only.
 */
#include <config.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

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
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "pool.h"
#include "powercut.h"
#include "testlib.h"

#define MiB (1ull << 20)
#define KiB 1024u
#define BLK 4096u

/* ------------------------------------------------------------------ */
/* Helpers                                                              */
/* ------------------------------------------------------------------ */

/* A configuration for one device (and maybe a log device). */
static void
cfg (zvol_pool_config_t *pc, const char *dev, const char *logdev,
     bool create, uint64_t volsize)
{
  zvol_pool_config_init (pc);
  pc->pc_devices[0] = dev;
  pc->pc_ndevices = 1;
  pc->pc_logdevice = logdev;
  pc->pc_create = create;
  pc->pc_volsize = volsize;
  pc->pc_cache_size = 16 * MiB;
  pc->pc_zil_size = create && logdev == NULL ? 1 * MiB : 0;
}

/* A txg engine that never syncs by itself: only the log holds FUA data
 * until someone asks for a sync. */
static void
cfg_no_txg (zvol_pool_config_t *pc)
{
  pc->pc_txg.tt_timeout_ms = 3600 * 1000;
  pc->pc_txg.tt_dirty_max = 1ull << 30;
}

/* One value of zvol_pool_print_stats; fails the test if it is missing. */
static double
zstat (zvol_pool_t *p, const char *name)
{
  char *buf = NULL, *line;
  size_t len = 0, nl = strlen (name);
  FILE *f = open_memstream (&buf, &len);
  double v = -1;
  bool found = false;

  assert_non_null (f);
  zvol_pool_print_stats (p, f);
  fclose (f);
  for (line = buf; line != NULL && *line; ) {
    char *end = strchr (line, '\n');
    if (strncmp (line, name, nl) == 0 && line[nl] == ' ') {
      v = strtod (line + nl + 1, NULL);
      found = true;
      break;
    }
    line = end ? end + 1 : NULL;
  }
  free (buf);
  if (!found)
    fail_msg ("stat %s is missing", name);
  return v;
}

static uint64_t
zstatu (zvol_pool_t *p, const char *name)
{
  return (uint64_t) zstat (p, name);
}

/* Copy a file, keeping it sparse (all-zero MiBs are not written). */
static void
copy_file (const char *src, const char *dst)
{
  int in = open (src, O_RDONLY | O_CLOEXEC);
  int out = open (dst, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  char *buf = malloc (MiB);
  off_t off = 0;
  ssize_t n;

  assert_true (in >= 0 && out >= 0 && buf != NULL);
  assert_int_equal (ftruncate (out, lseek (in, 0, SEEK_END)), 0);
  while ((n = pread (in, buf, MiB, off)) > 0) {
    if (!zv_is_zero (buf, (size_t) n))
      assert_int_equal (pwrite (out, buf, (size_t) n, off), n);
    off += n;
  }
  assert_int_equal (n, 0);
  assert_int_equal (fsync (out), 0);
  close (in);
  close (out);
  free (buf);
}

/* A reader of every READERS-th 256 KiB piece of the volume. */
#define READERS 4
#define READ_PIECE (256 * KiB)

typedef struct reader {
  zvol_t *rd_zv;
  uint8_t *rd_buf;
  unsigned rd_idx;
  int rd_err;
  uint64_t rd_err_off;
} reader_t;

static void *
reader_thread (void *arg)
{
  reader_t *rd = arg;
  uint64_t size = zvol_size (rd->rd_zv);

  for (uint64_t off = rd->rd_idx * (uint64_t) READ_PIECE; off < size;
       off += READERS * (uint64_t) READ_PIECE) {
    int r = zvol_read (rd->rd_zv, rd->rd_buf + off, off,
                       (uint32_t) ZV_MIN (READ_PIECE, size - off));
    if (r != 0) {
      rd->rd_err = r;
      rd->rd_err_off = off;
      break;
    }
  }
  return NULL;
}

/* Read the whole volume (several readers at once: a cold import reads
 * block by block); NULL (and why on stderr) if a read fails. */
static uint8_t *
read_volume_try (zvol_t *zv)
{
  uint8_t *buf = malloc (zvol_size (zv));
  reader_t rd[READERS];
  pthread_t th[READERS];
  bool ok = true;

  assert_non_null (buf);
  for (unsigned i = 0; i < READERS; i++) {
    rd[i] = (reader_t) { .rd_zv = zv, .rd_buf = buf, .rd_idx = i };
    assert_int_equal (pthread_create (&th[i], NULL, reader_thread, &rd[i]),
                      0);
  }
  for (unsigned i = 0; i < READERS; i++) {
    assert_int_equal (pthread_join (th[i], NULL), 0);
    if (rd[i].rd_err) {
      fprintf (stderr, "  reading the volume at %" PRIu64 " failed: %s\n",
               rd[i].rd_err_off, strerror (-rd[i].rd_err));
      ok = false;
    }
  }
  if (!ok) {
    free (buf);
    return NULL;
  }
  return buf;
}

static uint8_t *
read_volume (zvol_t *zv)
{
  uint8_t *buf = read_volume_try (zv);

  if (buf == NULL)
    fail_msg ("the volume does not read back");
  return buf;
}

/* Compare two volume images; say where they first differ. */
static void
compare_images (const uint8_t *got, const uint8_t *want, uint64_t size,
                const char *what)
{
  if (memcmp (got, want, size) != 0) {
    uint64_t i = 0;
    while (got[i] == want[i])
      i++;
    fail_msg ("%s: volume byte %" PRIu64 " (4K block %" PRIu64 ") is 0x%02x, "
              "expected 0x%02x", what, i, i / BLK, got[i], want[i]);
  }
}

/* Crash an open pool without losing anything: every request from now
 * on fails, so the close cannot sync. */
static void
crash_close (zvol_pool_t *p)
{
  pc_t *cut = pc_new (1, PC_KEEP_ALL);

  pc_attach (cut, p->p_spa.spa_devs[0]);
  if (p->p_logdev)
    pc_attach (cut, p->p_logdev);
  tl_log_reset (true);
  pc_cut (cut);
  (void) zvol_pool_close (p);
  pc_free (cut);
  tl_log_reset (false);
}

/* Fill a 4K block with one 8-byte stamp. */
static void
stamp_fill (uint8_t *buf, uint64_t stamp)
{
  uint64_t *w = (uint64_t *) buf;

  for (unsigned i = 0; i < BLK / 8; i++)
    w[i] = stamp;
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
  struct sock_filter filt[] = {
    BPF_STMT (BPF_LD | BPF_W | BPF_ABS, offsetof (struct seccomp_data, nr)),
    BPF_JUMP (BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
    BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
    BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = { .len = sizeof filt / sizeof filt[0],
                             .filter = filt };

  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1
      || prctl (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == -1) {
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
  char p1[512], p2[512], p3[512], err[256];
  zv_dev_t *dev, *dev2, *dev3;
  evlog_t el = { .el_lock = PTHREAD_MUTEX_INITIALIZER, .el_fd = -1 };
  evlog_t el2 = { .el_lock = PTHREAD_MUTEX_INITIALIZER, .el_fd = -1 };
  obs_run_t or = { .or_el = &el };
  zv_dev_io_t io2[2];
  pthread_t th;

  tl_path (p1, sizeof p1, "obs1.img");
  tl_path (p2, sizeof p2, "obs2.img");
  tl_path (p3, sizeof p3, "obs3.img");
  assert_int_equal (tl_sparse_file (p1, MiB), 0);
  assert_int_equal (tl_sparse_file (p2, MiB), 0);
  assert_int_equal (tl_sparse_file (p3, MiB), 0);
  assert_int_equal (zv_dev_open (p1, &dev, err, sizeof err), 0);
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
  assert_int_equal (zv_dev_open (p2, &dev2, err, sizeof err), 0);
  zv_dev_set_observer (NULL, NULL, NULL);
  assert_int_equal (zv_dev_open (p3, &dev3, err, sizeof err), 0);
  assert_int_equal (zv_dev_write (dev2, or.or_buf[0], 4096, 4096), 0);
  assert_int_equal (zv_dev_write (dev3, or.or_buf[0], 4096, 4096), 0);
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
  char path[512], err[256];
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

    assert_int_equal (tl_sparse_file (path, MiB), 0);
    assert_int_equal (zv_dev_open (path, &dev, err, sizeof err), 0);
    pc_attach (pc, dev);
    assert_int_equal (zv_dev_write (dev, a, 0, 8192), 0);    /* durable */
    assert_int_equal (zv_dev_flush (dev), 0);
    assert_int_equal (zv_dev_write (dev, b, 0, 8192), 0);    /* pending */
    assert_int_equal (zv_dev_write (dev, c, 65536, 8192), 0); /* pending */
    pc_cut (pc);
    assert_int_equal (zv_dev_write (dev, a, 8192, 4096), -EIO);
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
} ct_thr_t;

/* 2000 FUA writes of 4 KiB in this thread's own region. */
static void *
ct_writer (void *arg)
{
  ct_thr_t *t = arg;
  uint64_t rnd = t->ct_seed;
  uint8_t buf[BLK];

  for (unsigned i = 0; i < CT_WRITES; i++) {
    uint64_t off = t->ct_idx * CT_REGION + tl_rand (&rnd) % 256 * BLK;
    int r;

    tl_pat_fill (buf, off, BLK, t->ct_seed * 7919 + i);
    memcpy (t->ct_shadow + off, buf, BLK);
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
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  assert_int_equal (zvol_pool_start (p), 0);

  t0 = zv_now_ns ();
  for (unsigned i = 0; i < CT_WRITERS + CT_FLUSHERS; i++) {
    thr[i] = (ct_thr_t) {
      .ct_zv = zvol_pool_volume (p), .ct_shadow = shadow, .ct_idx = i,
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

  lwbs = zstatu (p, "zil_lwbs_written");
  commits = zstatu (p, "zil_commits");
  wpl = zstat (p, "zil_waiters_per_lwb");
  fprintf (stderr, "  %u FUA writes + %" PRIu64 " flushes in %.2f s: "
           "%" PRIu64 " commits, %" PRIu64 " log blocks, %.2f waiters per "
           "block, %" PRIu64 " fallbacks\n", CT_WRITERS * CT_WRITES,
           thr[CT_WRITERS].ct_ops + thr[CT_WRITERS + 1].ct_ops,
           (double) (zv_now_ns () - t0) / 1e9, commits, lwbs, wpl,
           zstatu (p, "zil_commit_fallbacks"));
  assert_true (lwbs > 0);
  assert_true (commits >= lwbs);
  /* Group commit: log blocks are shared by several commits. */
  assert_true (wpl > 1.0);

  assert_int_equal (zvol_pool_close (p), 0);
  cfg (&pc, dev, NULL, false, 0);
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  img = read_volume (zvol_pool_volume (p));
  compare_images (img, shadow, CT_VOLSIZE, "after close and import");
  assert_int_equal (zvol_pool_close (p), 0);
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
    .rs_copied = zstatu (p, "zil_records_copied"),
    .rs_need_copy = zstatu (p, "zil_records_need_copy"),
    .rs_indirect = zstatu (p, "zil_records_indirect"),
    .rs_free = zstatu (p, "zil_records_free"),
    .rs_dropped = zstatu (p, "zil_records_dropped"),
    .rs_lwbs = zstatu (p, "zil_lwbs_written"),
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

/* A FUA write of pattern data, mirrored in the shadow. */
static void
rec_write (zvol_t *zv, uint8_t *shadow, uint64_t off, uint32_t len,
           uint64_t seed)
{
  tl_pat_fill (shadow + off, off, len, seed);
  assert_int_equal (zvol_write (zv, shadow + off, off, len, ZVOL_FUA), 0);
}

/* Make the log usable: it writes blocks only once a txg carrying its
 * fresh chain is on disk. */
static void
rec_warm (zvol_pool_t *p, uint8_t *shadow, uint64_t off)
{
  rec_write (zvol_pool_volume (p), shadow, off, BLK, 424242);
  assert_int_equal (zvol_pool_sync (p), 0);
}

/* Crash without losing anything, then import again (replay). */
static zvol_pool_t *
crash_and_import (zvol_pool_t *p, zvol_pool_config_t *pc)
{
  crash_close (p);
  pc->pc_create = false;
  p = NULL;
  assert_int_equal (zvol_pool_open (pc, &p), 0);
  return p;
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
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  zv = zvol_pool_volume (p);
  rec_warm (p, shadow, volsize - BLK);
  synced = zstatu (p, "txg_synced");
  rs = rec_get (p);

  /* Up to zt_max_copied (7680) the data is copied into the record. */
  rec_write (zv, shadow, 0, BLK, 1);
  rec_expect (p, &rs, 1, 0, 0, 0, "4K write");
  rec_write (zv, shadow, 65536, 7680, 2);
  rec_expect (p, &rs, 1, 0, 0, 0, "7680-byte write");
  /* Above it, fetched from the volume when packed. */
  rec_write (zv, shadow, 131072, 7681, 3);
  rec_expect (p, &rs, 0, 1, 0, 0, "7681-byte write");
  rec_write (zv, shadow, 196608, 12288, 4);
  rec_expect (p, &rs, 0, 1, 0, 0, "12K write");
  rec_write (zv, shadow, 262144, 16384, 5);
  rec_expect (p, &rs, 0, 1, 0, 0, "16K write (below 32K)");
  /* From 32K, without a log device: whole volume blocks in place. */
  rec_write (zv, shadow, 327680, 32768, 6);
  rec_expect (p, &rs, 0, 0, 2, 0, "32K aligned write");
  rec_write (zv, shadow, 393216 + 8192, 65536, 7);
  rec_expect (p, &rs, 0, 2, 3, 0, "64K write at +8K (edges 8K)");
  rec_write (zv, shadow, 524288 + 12288, 40960, 8);
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
  /* None of that needed a txg. */
  assert_int_equal (zstatu (p, "txg_synced"), synced);

  /* A crash now: replay brings back every kind of record. */
  p = crash_and_import (p, &pc);
  assert_true (tl_log_has ("intent log: replayed"));
  zv = zvol_pool_volume (p);
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
  assert_int_equal (zvol_pool_sync (p), 0);
  assert_int_equal (zvol_flush (zv), 0);
  {
    rec_stats_t now = rec_get (p);
    assert_true (now.rs_dropped >= rs.rs_dropped + 2);
    assert_int_equal (now.rs_lwbs, rs.rs_lwbs);
    assert_int_equal (now.rs_copied + now.rs_need_copy + now.rs_free,
                      rs.rs_copied + rs.rs_need_copy + rs.rs_free);
  }
  assert_int_equal (zvol_pool_close (p), 0);

  /* logbias=throughput: every whole block in place, even a small write. */
  cfg (&pc, dev, NULL, false, 0);
  cfg_no_txg (&pc);
  pc.pc_logbias = ZVOL_LOGBIAS_THROUGHPUT;
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  zv = zvol_pool_volume (p);
  rec_warm (p, shadow, volsize - BLK);
  rs = rec_get (p);
  rec_write (zv, shadow, 3 * MiB, 16384, 10);
  rec_expect (p, &rs, 0, 0, 1, 0, "16K write, logbias=throughput");
  rec_write (zv, shadow, 3 * MiB + 65536, BLK, 11);
  rec_expect (p, &rs, 1, 0, 0, 0, "4K write, logbias=throughput");
  p = crash_and_import (p, &pc);
  img = read_volume (zvol_pool_volume (p));
  compare_images (img, shadow, volsize, "after replay (throughput)");
  free (img);
  assert_int_equal (zvol_pool_close (p), 0);

  /* With a log device, big writes are copied into the log. */
  assert_int_equal (tl_sparse_file (dev, 48 * MiB), 0);
  assert_int_equal (tl_sparse_file (logdev, 17 * MiB), 0);
  memset (shadow, 0, volsize);
  cfg (&pc, dev, logdev, true, volsize);
  cfg_no_txg (&pc);
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  zv = zvol_pool_volume (p);
  rec_warm (p, shadow, volsize - BLK);
  rs = rec_get (p);
  rec_write (zv, shadow, 0, 65536, 12);
  rec_expect (p, &rs, 0, 1, 0, 0, "64K write with a log device");
  rec_write (zv, shadow, MiB, 256 * KiB, 13);   /* spans log blocks */
  rec_expect (p, &rs, 0, 1, 0, 0, "256K write with a log device");
  rec_write (zv, shadow, 2 * MiB, 2048, 14);
  rec_expect (p, &rs, 1, 0, 0, 0, "2K write with a log device");
  p = crash_and_import (p, &pc);
  assert_true (tl_log_has ("intent log: replayed"));
  img = read_volume (zvol_pool_volume (p));
  compare_images (img, shadow, volsize, "after replay from the log device");
  free (img);
  assert_int_equal (zvol_pool_close (p), 0);

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
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  rec_warm (p, shadow, 0);
  cs.cs_zv = zvol_pool_volume (p);
  cs.cs_main = pthread_self ();
  cs.cs_pc = pc_new (1, PC_KEEP_ALL);
  pc_attach (cs.cs_pc, p->p_spa.spa_devs[0]);
  pc_set_hook (cs.cs_pc, cis_hook, &cs);

  /* 64K in txg T, logged in place (no log device): not yet committed. */
  tl_pat_fill (data, MiB, 65536, 4242);
  assert_int_equal (zvol_write (cs.cs_zv, data, MiB, 65536, 0), 0);
  assert_int_equal (pthread_create (&th, NULL, cis_flusher, &cs), 0);
  tl_log_reset (true);
  pthread_mutex_lock (&cs.cs_lock);
  cs.cs_armed = true;
  pthread_mutex_unlock (&cs.cs_lock);
  r = zvol_pool_sync (p);              /* the power goes in there */
  assert_int_equal (pthread_join (th, NULL), 0);
  (void) zvol_pool_close (p);
  pc_settle (cs.cs_pc);
  pc_free (cs.cs_pc);
  tl_log_reset (false);
  assert_true (cs.cs_fired);
  assert_int_not_equal (r, 0);         /* txg T never committed */
  fprintf (stderr, "  the flush during the sync returned %d\n",
           cs.cs_flush_r);

  cfg (&pc, dev, NULL, false, 0);
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  assert_int_equal (zvol_read (zvol_pool_volume (p), got, MiB, 65536), 0);
  assert_int_equal (zvol_pool_close (p), 0);
  if (cs.cs_flush_r == 0 && memcmp (got, data, 65536) != 0)
    fail_msg ("a flush during the sync of the write's txg returned 0, "
              "the txg never committed, and the write is lost after "
              "import (its in-place record was dropped as if the txg "
              "were on disk)");
  free (data);
  free (got);
  unlink (dev);
}

/* ------------------------------------------------------------------ */
/* c. Power cuts under load                                             */
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
#ifdef __SANITIZE_THREAD__
#define PCT_DEFAULT_ROUNDS 20
#define PCT_SLOW 30
#else
#define PCT_DEFAULT_ROUNDS 200
#define PCT_SLOW 1
#endif

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
    if ((x >> 40) % 8 == 0) {
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
  uint64_t pt_cut_other, pt_replays;
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
  char when[128];
  unsigned bad;
  int r;

  cfg (&pc, dev, logdev, create, PCT_VOLSIZE);
  pc.pc_sync = x % 4 == 0 ? ZVOL_SYNC_ALWAYS : ZVOL_SYNC_STANDARD;
  pc.pc_logbias = (x >> 4) % 3 == 0 ? ZVOL_LOGBIAS_THROUGHPUT
    : ZVOL_LOGBIAS_LATENCY;
  pc.pc_txg.tt_timeout_ms = 10 + (x >> 8) % 150;
  snprintf (when, sizeof when, "round %u (%s, sync=%s, logbias=%s, "
            "txg_timeout=%" PRIu64 " ms)", round,
            logdev ? "log device" : "no log device",
            pc.pc_sync == ZVOL_SYNC_ALWAYS ? "always" : "standard",
            pc.pc_logbias ? "throughput" : "latency",
            pc.pc_txg.tt_timeout_ms);

  pc_watch (cut, true);
  tl_log_reset (false);
  r = zvol_pool_open (&pc, &p);
  if (r != 0) {
    pc_watch (cut, false);
    pc_free (cut);
    fail_msg ("%s: %s failed: %s", when, create ? "create" : "import",
              strerror (-r));
  }
  if (tl_log_has ("intent log: replayed"))
    tot->pt_replays++;
  if (!create) {
    bad = pct_verify (zvol_pool_volume (p), g->pt_blk, when);
    if (bad) {
      (void) zvol_pool_close (p);
      pc_watch (cut, false);
      pc_free (cut);
      fail_msg ("%s: %u bad 4K block(s) after the import that followed "
                "the cut of round %u", when, bad, round - 1);
    }
  }
  assert_int_equal (zvol_pool_start (p), 0);

  g->pt_zv = zvol_pool_volume (p);
  g->pt_round = round;
  g->pt_always = pc.pc_sync == ZVOL_SYNC_ALWAYS;
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
  (void) zvol_pool_close (p);
  pc_watch (cut, false);
  pc_get_stats (cut, &st);
  pc_free (cut);
  tl_log_reset (false);
  tot->pt_rounds++;
  tot->pt_dev_writes += st.ps_writes;
  tot->pt_cut_sectors += st.ps_cut_sectors;
  tot->pt_cut_old += st.ps_cut_old;
  tot->pt_cut_newest += st.ps_cut_newest;
  tot->pt_cut_other += st.ps_cut_other;
}

/* A fault hook that fails every write (the log device's). */
static int
ring_fail_writes (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
                  uint32_t len)
{
  (void) arg; (void) dev; (void) off; (void) len;
  return op == ZV_DEV_WRITE ? -EIO : 0;
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
  assert_int_equal (tl_sparse_file (logdev, PCT_LOGSIZE), 0);
  zv_zil_itx_ring_shift = 4;
  cfg (&pc, dev, logdev, true, 16 * MiB);
  cfg_no_txg (&pc);
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  zv_zil_itx_ring_shift = old_shift;
  zv = zvol_pool_volume (p);
  /* The log writes once a txg with its fresh chain is on disk. */
  tl_pat_fill (buf, 0, BLK, 7);
  assert_int_equal (zvol_write (zv, buf, 0, BLK, 0), 0);
  assert_int_equal (zvol_pool_sync (p), 0);

  tl_log_reset (true);
  zv_dev_set_fault (p->p_logdev, ring_fail_writes, NULL);
  tl_pat_fill (buf, 0, BLK, 1);
  assert_int_equal (zvol_write (zv, buf, 0, BLK, 0), 0);
  assert_int_equal (zvol_flush (zv), 0);          /* by a txg */
  assert_true (tl_log_has ("intent log: writing"));
  assert_true (zstatu (p, "zil_commit_fallbacks") >= 1);

  alarm (120);                  /* a writer that spins fails the test */
  for (unsigned i = 0; i < nblk; i++) {
    tl_pat_fill (buf, (uint64_t) i * BLK, BLK, 7);
    assert_int_equal (zvol_write (zv, buf, (uint64_t) i * BLK, BLK, 0), 0);
  }
  alarm (0);
  assert_int_equal (zvol_flush (zv), 0);
  assert_true (zstatu (p, "zil_records_dropped") >= nblk - 16);
  zv_dev_set_fault (p->p_logdev, NULL, NULL);
  assert_int_equal (zvol_pool_close (p), 0);
  tl_log_reset (false);

  cfg (&pc, dev, logdev, false, 0);
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  zv = zvol_pool_volume (p);
  for (unsigned i = 0; i < nblk; i++) {
    assert_int_equal (zvol_read (zv, buf, (uint64_t) i * BLK, BLK), 0);
    assert_int_equal (tl_pat_check (buf, (uint64_t) i * BLK, BLK, 7), -1);
  }
  assert_int_equal (zvol_pool_close (p), 0);
  zv_buf_free (buf);
  unlink (dev);
  unlink (logdev);
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
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  bad = pct_verify (zvol_pool_volume (p), g->pt_blk, when);
  if (bad)
    fail_msg ("%s: %u bad 4K block(s)", when, bad);
  assert_int_equal (zvol_pool_close (p), 0);
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

  fprintf (stderr, "  %" PRIu64 " power cuts in %.1f s: %" PRIu64
           " writes (%" PRIu64 " durable on return), %" PRIu64 " flushes, "
           "%" PRIu64 " zero/trim; %" PRIu64 " device writes seen, %" PRIu64
           " sectors pending at the cuts (%" PRIu64 " rolled back, %" PRIu64
           " newest kept, %" PRIu64 " an older pending write); %" PRIu64
           " imports replayed records\n", tot.pt_rounds,
           (double) (zv_now_ns () - t0) / 1e9, tot.pt_writes, tot.pt_fua,
           tot.pt_flushes, tot.pt_frees, tot.pt_dev_writes,
           tot.pt_cut_sectors, tot.pt_cut_old, tot.pt_cut_newest,
           tot.pt_cut_other, tot.pt_replays);
  /* The rounds must have exercised something: durable writes, cuts that
   * lost data, and imports that replayed. */
  assert_true (tot.pt_fua > 0 && tot.pt_flushes > 0);
  assert_true (tot.pt_cut_old > 0);
  assert_true (tot.pt_replays > 0);
  for (uint64_t i = 0; i < PCT_NBLK; i++)
    free (g.pt_blk[i].pb_v);
  free (g.pt_blk);
  unlink (dev);
  unlink (logdev);
}

/* ------------------------------------------------------------------ */
/* d. Power cut during replay                                           */
/* ------------------------------------------------------------------ */

#define RC_VOLSIZE (16 * MiB)
#define RC_DEVSIZE (48 * MiB)
#define RC_RANDOM_CUTS 10
#define RC_MAX_CUTS 40

/* FUA operations of every record kind; only the log has them. */
static void
rc_load (zvol_pool_t *p, uint8_t *shadow, uint64_t *rnd)
{
  zvol_t *zv = zvol_pool_volume (p);

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
  r = zvol_pool_open (&pc, &p);
  if (r == 0)
    r = zvol_pool_close (p) == 0 ? 0 : 1;
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
test_replay_crash (void **state)
{
  char dev[512], snap[512], work[512];
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t *shadow = calloc (1, RC_VOLSIZE), *want, *img;
  uint64_t rnd = tl_seed ("replay_crash"), w = 0, synced;
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
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  rec_warm (p, shadow, RC_VOLSIZE - BLK);
  synced = zstatu (p, "txg_synced");
  rc_load (p, shadow, &rnd);
  assert_int_equal (zstatu (p, "txg_synced"), synced);
  assert_true (zstatu (p, "zil_records_indirect") > 0);

  /* The power goes: whatever was not flushed may be lost. */
  cut = pc_new (tl_rand (&rnd), PC_RANDOM);
  pc_attach (cut, p->p_spa.spa_devs[0]);
  tl_log_reset (true);
  pc_cut (cut);
  (void) zvol_pool_close (p);
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
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  want = read_volume (zvol_pool_volume (p));
  assert_int_equal (zvol_pool_close (p), 0);
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
    r = zvol_pool_open (&pc, &p);
    if (r != 0)
      fail_msg ("%s: failed: %s", when, strerror (-r));
    img = read_volume_try (zvol_pool_volume (p));
    if (img == NULL) {
      (void) zvol_pool_close (p);
      fail_msg ("%s: the volume does not read back", when);
    }
    compare_images (img, want, RC_VOLSIZE, when);
    free (img);
    /* Sound afterwards: write, two syncs (deferred frees come due),
     * close, import. */
    tl_pat_fill (shadow, 0, BLK, 77);
    r = zvol_write (zvol_pool_volume (p), shadow, 0, BLK, ZVOL_FUA);
    for (int i = 0; i < 3 && r == 0; i++) {
      r = zvol_write (zvol_pool_volume (p), shadow, MiB * (unsigned) i,
                      BLK, 0);
      if (r == 0)
        r = zvol_pool_sync (p);
    }
    if (r == 0)
      r = zvol_pool_close (p);
    else
      (void) zvol_pool_close (p);
    if (r != 0)
      fail_msg ("%s: writing and syncing afterwards failed: %s", when,
                strerror (-r));
    cfg (&pc, work, NULL, false, 0);
    r = zvol_pool_open (&pc, &p);
    if (r != 0)
      fail_msg ("%s: the import after that failed: %s", when,
                strerror (-r));
    assert_int_equal (zvol_pool_close (p), 0);
  }
  assert_true (nfired >= ncuts / 2);
  free (want);
  free (shadow);
  unlink (dev);
  unlink (snap);
  unlink (work);
}

/* ------------------------------------------------------------------ */
/* e. A hostile log                                                     */
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

/* Import (replay); the 4K blocks at 0, 1 MiB, 2 MiB must hold the
 * stamps of the groups that were replayed, zeros for the others. */
static void
hl_expect (const char *dev, int nreplayed, const char *what)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t buf[BLK], want[BLK];
  int r;

  cfg (&pc, dev, NULL, false, 0);
  tl_log_reset (true);
  r = zvol_pool_open (&pc, &p);
  tl_log_reset (false);
  if (r != 0)
    fail_msg ("%s: import failed: %s", what, strerror (-r));
  for (int g = 0; g < 3; g++) {
    assert_int_equal (zvol_read (zvol_pool_volume (p), buf, g * MiB, BLK), 0);
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
  assert_int_equal (zvol_write (zvol_pool_volume (p), want, 3 * MiB, BLK,
                                ZVOL_FUA), 0);
  assert_int_equal (zvol_pool_close (p), 0);
}

/* The checksum seed of log block seq of chain guid (zil.c's rule). */
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
  r = zvol_pool_open (&pc, &p);
  tl_log_reset (false);
  if (r != 0) {
    fprintf (stderr, "  %s: import refused: %s\n", what, strerror (-r));
    return r;
  }
  for (int g = 0; g < 2; g++) {
    stamp_fill (want, 0x1111ull * (g + 1));
    assert_int_equal (zvol_read (zvol_pool_volume (p), buf, g * MiB, BLK), 0);
    if (memcmp (buf, want, BLK) != 0)
      fail_msg ("%s: group %d (before the bad record) is missing", what, g);
  }
  assert_int_equal (zvol_read (zvol_pool_volume (p), buf, 0, BLK), 0);
  assert_int_equal (zvol_pool_close (p), 0);
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
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  ring_off = ZV_DVA_OFFSET (p->p_zil_hdr.zh_ring_dva);
  ring_len = p->p_zil_hdr.zh_nslots * p->p_zil_hdr.zh_blksz;
  assert_int_equal (ZV_DVA_VDEV (p->p_zil_hdr.zh_ring_dva), 0);
  stamp_fill (buf, 0x9999);
  assert_int_equal (zvol_write (zvol_pool_volume (p), buf, 4 * MiB, BLK, 0),
                    0);
  assert_int_equal (zvol_pool_sync (p), 0);
  /* Three groups, one log block each (a lone committer closes its block
   * at once). */
  for (int g = 0; g < 3; g++) {
    stamp_fill (buf, 0x1111ull * (g + 1));
    assert_int_equal (zvol_write (zvol_pool_volume (p), buf, g * MiB, BLK,
                                  ZVOL_FUA), 0);
  }
  assert_int_equal (zstatu (p, "zil_lwbs_written"), 3);
  crash_close (p);
  copy_file (dev, snap);

  /* The chain's guid and head, from a read-only import (no replay). */
  copy_file (snap, work);
  cfg (&pc, work, NULL, false, 0);
  pc.pc_readonly = true;
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  guid = p->p_zil_hdr.zh_guid;
  head = p->p_zil_hdr.zh_head_seq;
  assert_int_equal (zvol_read (zvol_pool_volume (p), buf, 0, BLK), 0);
  assert_true (zv_is_zero (buf, BLK));        /* only in the log */
  assert_int_equal (zvol_pool_close (p), 0);

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

  /* In the middle block: replay stops there, the newest is not reached
   * although it is intact. */
  copy_file (snap, work);
  assert_int_equal (tl_file_flip (work, hb[1].hb_off + 64 + 48 + 100), 0);
  hl_expect (work, 1, "middle block corrupt");

  /* The first block's header: nothing replays. */
  copy_file (snap, work);
  assert_int_equal (tl_file_flip (work, hb[0].hb_off + 16), 0);
  hl_expect (work, 0, "first block's header corrupt");

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

  unlink (dev);
  unlink (snap);
  unlink (work);
}

/* ------------------------------------------------------------------ */

static int
group_setup (void **state)
{
  return tl_group_begin ("zil");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_setup (test_observer, tl_test_setup),
    cmocka_unit_test_setup (test_powercut_sim, tl_test_setup),
    cmocka_unit_test_setup (test_contention, tl_test_setup),
    cmocka_unit_test_setup (test_records, tl_test_setup),
    cmocka_unit_test_setup (test_commit_in_sync, tl_test_setup),
    cmocka_unit_test_setup (test_ring_full_after_log_error, tl_test_setup),
    cmocka_unit_test_setup (test_powercut, tl_test_setup),
    cmocka_unit_test_setup (test_replay_crash, tl_test_setup),
    cmocka_unit_test_setup (test_hostile_log, tl_test_setup),
  };

  if (getenv ("ZV_TEST_FILTER"))
    cmocka_set_test_filter (getenv ("ZV_TEST_FILTER"));
  return cmocka_run_group_tests (tests, group_setup, tl_group_teardown);
}
