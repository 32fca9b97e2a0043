/*
 * test_dev.c: unit tests for core/dev.c and core/dev_open.c (open/lock,
 * io_uring batches, asynchronous requests, fallbacks, counters, fault
 * injection).
 *
 * Files live in testlib.h's scratch directory under /var/tmp, removed at
 * the end.
 * Some tests need root (mounting ramfs, loop devices) and skip without it.
 */
#include <config.h>

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/loop.h>
#include <linux/magic.h>

#include <liburing.h>

#include "zv_util.h"
#include "dev.h"
#include "tunable.h"
#include "testlib.h"

/* Tunable in dev.c: ring size of threads created after it is set. */
extern unsigned zv_dev_ring_entries;

/* ---- helpers ---------------------------------------------------------- */

/*
 * Open-file flags (from /proc/self/fdinfo) of this process's only
 * descriptor for 'path'; -1 if there is none or more than one.
 */
static long
fd_flags_of (const char *path)
{
  DIR *d = opendir ("/proc/self/fd");
  struct dirent *de;
  char want[PATH_MAX], link[PATH_MAX], p[300];
  long flags = -1;
  int found = 0;

  assert_non_null (realpath (path, want));
  assert_non_null (d);
  while ((de = readdir (d)) != NULL) {
    ssize_t n;
    if (de->d_name[0] == '.')
      continue;
    snprintf (p, sizeof p, "/proc/self/fd/%s", de->d_name);
    n = readlink (p, link, sizeof link - 1);
    if (n < 0)
      continue;
    link[n] = '\0';
    if (strcmp (link, want) == 0) {
      char line[128];
      FILE *f;
      snprintf (p, sizeof p, "/proc/self/fdinfo/%s", de->d_name);
      f = fopen (p, "r");
      if (f == NULL)
        continue;
      while (fgets (line, sizeof line, f))
        if (strncmp (line, "flags:", 6) == 0)
          flags = strtol (line + 6, NULL, 8);
      fclose (f);
      found++;
    }
  }
  closedir (d);
  return found == 1 ? flags : -1;
}

/* How many io_uring instances this process has open. */
static int
count_uring_fds (void)
{
  DIR *d = opendir ("/proc/self/fd");
  struct dirent *de;
  char link[128], p[300];
  int n = 0;

  assert_non_null (d);
  while ((de = readdir (d)) != NULL) {
    ssize_t len;
    snprintf (p, sizeof p, "/proc/self/fd/%s", de->d_name);
    len = readlink (p, link, sizeof link - 1);
    if (len < 0)
      continue;
    link[len] = '\0';
    if (strcmp (link, "anon_inode:[io_uring]") == 0)
      n++;
  }
  closedir (d);
  return n;
}

/*
 * Random batches on [base, base + nsect sectors) of one device: each
 * batch mixes reads and writes of 1-8 sectors on extents that do not
 * overlap within the batch (a batch has no order), so every read must see
 * the shadow.  Returns the number of problems; no cmocka asserts, so that
 * threads may call it.
 */
typedef struct rb {
  zv_dev_t *rb_dev;
  uint64_t rb_base;
  uint32_t rb_nsect;
  int rb_rounds, rb_batch;
  uint64_t rb_seed;
  unsigned char *rb_shadow;           /* nsect * ZV_SECTOR */
  uint64_t rb_writes, rb_wbytes, rb_reads, rb_rbytes;
  int rb_problems;
  char rb_what[256];                  /* first problem */
} rb_t;

static void __attribute__ ((format (printf, 2, 3)))
rb_problem (rb_t *c, const char *fmt, ...)
{
  va_list ap;
  if (c->rb_problems++ == 0) {
    va_start (ap, fmt);
    vsnprintf (c->rb_what, sizeof c->rb_what, fmt, ap);
    va_end (ap);
  }
}

/* A third of the requests of 2+ sectors are vectored: up to three
 * segments, each in its own buffer, cut at random sector boundaries. */
#define RB_MAXSEG 3

static int
run_random_batches (rb_t *c)
{
  zv_dev_io_t *ios = calloc ((size_t) c->rb_batch, sizeof *ios);
  unsigned char **flat = calloc ((size_t) c->rb_batch, sizeof *flat);
  struct iovec *segs = calloc ((size_t) c->rb_batch * RB_MAXSEG,
                               sizeof *segs);
  unsigned char *used = malloc (c->rb_nsect);
  uint64_t s = c->rb_seed | 1;

  if (ios == NULL || flat == NULL || segs == NULL || used == NULL)
    abort ();
  for (int round = 0; round < c->rb_rounds; round++) {
    int n = 0, r;

    memset (used, 0, c->rb_nsect);
    for (int i = 0; i < c->rb_batch; i++) {
      for (int tries = 0; tries < 200; tries++) {
        uint32_t len = 1 + (uint32_t) (tl_rand (&s) % 8);
        uint32_t sect = (uint32_t) (tl_rand (&s) % (c->rb_nsect - len + 1));
        bool ok = true;
        for (uint32_t k = 0; k < len; k++)
          ok = ok && !used[sect + k];
        if (!ok)
          continue;
        memset (used + sect, 1, len);
        flat[n] = zv_buf_alloc ((size_t) len * ZV_SECTOR);
        ios[n] = (zv_dev_io_t) {
          .di_dev = c->rb_dev,
          .di_op = tl_rand (&s) % 5 < 3 ? ZV_DEV_WRITE : ZV_DEV_READ,
          .di_buf = flat[n],
          .di_offset = c->rb_base + (uint64_t) sect * ZV_SECTOR,
          .di_len = len * ZV_SECTOR,
          .di_result = 12345,
        };
        if (ios[n].di_op == ZV_DEV_WRITE)
          tl_fill_rand (flat[n], ios[n].di_len, &s);
        else
          memset (flat[n], 0xa5, ios[n].di_len);
        if (len >= 2 && tl_rand (&s) % 3 == 0) {
          struct iovec *v = &segs[(size_t) n * RB_MAXSEG];
          uint32_t left = len, at = 0, cnt = 0;
          while (left > 0) {
            uint32_t k = cnt + 1 == RB_MAXSEG ? left
              : 1 + (uint32_t) (tl_rand (&s) % left);
            v[cnt].iov_base = zv_buf_alloc ((size_t) k * ZV_SECTOR);
            v[cnt].iov_len = (size_t) k * ZV_SECTOR;
            memcpy (v[cnt].iov_base, flat[n] + (size_t) at * ZV_SECTOR,
                    v[cnt].iov_len);
            at += k;
            left -= k;
            cnt++;
          }
          ios[n].di_buf = NULL;
          ios[n].di_iov = v;
          ios[n].di_iovcnt = cnt;
        }
        n++;
        break;
      }
    }
    r = zv_dev_io_batch (ios, (size_t) n);
    if (r != 0)
      rb_problem (c, "round %d: batch returned %d", round, r);
    for (int i = 0; i < n; i++) {
      unsigned char *sh = c->rb_shadow + (ios[i].di_offset - c->rb_base);
      if (ios[i].di_result != 0)
        rb_problem (c, "round %d io %d: result %d", round, i,
                    ios[i].di_result);
      if (ios[i].di_iov) {
        /* Segments as first given (the batch may have advanced them). */
        struct iovec *v = &segs[(size_t) i * RB_MAXSEG];
        uint32_t at = 0;
        for (unsigned k = 0; k < RB_MAXSEG && at < ios[i].di_len; k++) {
          if (ios[i].di_op == ZV_DEV_READ)
            memcpy (flat[i] + at, v[k].iov_base, v[k].iov_len);
          at += (uint32_t) v[k].iov_len;
          zv_buf_free (v[k].iov_base);
        }
      }
      if (ios[i].di_op == ZV_DEV_WRITE) {
        memcpy (sh, flat[i], ios[i].di_len);
        c->rb_writes++;
        c->rb_wbytes += ios[i].di_len;
      }
      else {
        if (memcmp (sh, flat[i], ios[i].di_len) != 0)
          rb_problem (c, "round %d: read at %" PRIu64 " differs", round,
                      ios[i].di_offset);
        c->rb_reads++;
        c->rb_rbytes += ios[i].di_len;
      }
      zv_buf_free (flat[i]);
    }
  }
  free (used);
  free (segs);
  free (flat);
  free (ios);
  return c->rb_problems;
}

/* The whole device must equal 'shadow' (through the device and a plain fd). */
static void
verify_whole (zv_dev_t *dev, const unsigned char *shadow, uint64_t len)
{
  unsigned char *buf = zv_buf_alloc (len);

  assert_int_equal (zv_dev_read (dev, buf, 0, (uint32_t) len), 0);
  assert_memory_equal (buf, shadow, len);
  memset (buf, 0, len);
  assert_int_equal (tl_file_pread (zv_dev_path (dev), buf, len, 0), 0);
  assert_memory_equal (buf, shadow, len);
  zv_buf_free (buf);
}

/* This process's name, as a message naming it says (/proc/self/comm). */
static void
self_comm (char *comm, size_t len)
{
  FILE *f = fopen ("/proc/self/comm", "re");

  assert_non_null (f);
  assert_non_null (fgets (comm, (int) len, f));
  fclose (f);
  comm[strcspn (comm, "\n")] = '\0';
}

/*
 * Open 'path' as a device in a child process (a second server) and keep
 * it until release_child(); returns the child's pid, *ctlp what releases
 * it.  The child says whether the open worked before the parent goes on.
 */
static pid_t
hold_in_child (const char *path, int *ctlp)
{
  int up[2], down[2];
  pid_t pid;
  char c = 0;

  assert_int_equal (pipe2 (up, O_CLOEXEC), 0);
  assert_int_equal (pipe2 (down, O_CLOEXEC), 0);
  fflush (NULL);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0) {
    zv_dev_t *d = NULL;

    close (up[0]);
    close (down[1]);
    c = zv_dev_open (path, &d, NULL, 0) == 0 ? 'y' : 'n';
    if (write (up[1], &c, 1) != 1)
      _exit (2);
    while (read (down[0], &c, 1) > 0)   /* until the parent closes it */
      ;
    _exit (0);
  }
  close (up[1]);
  close (down[0]);
  assert_int_equal (read (up[0], &c, 1), 1);
  close (up[0]);
  assert_int_equal (c, 'y');
  *ctlp = down[1];
  return pid;
}

static void
release_child (pid_t pid, int ctl)
{
  int status;

  close (ctl);
  assert_int_equal (waitpid (pid, &status, 0), pid);
  assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
}

/* ---- open, lock, size ------------------------------------------------ */

static void
test_open_missing (void **state)
{
  char path[512], err[256], want[600];
  zv_dev_t *dev = (zv_dev_t *) 0x1;

  tl_path (path, sizeof path, "does-not-exist");
  assert_int_equal (zv_dev_open (path, &dev, err, sizeof err), -ENOENT);
  assert_null (dev);
  snprintf (want, sizeof want, "%s: no such file", path);
  assert_string_equal (err, want);
  /* Must not create it. */
  assert_int_equal (access (path, F_OK), -1);
  /* A NULL error buffer is allowed. */
  assert_int_equal (zv_dev_open (path, &dev, NULL, 0), -ENOENT);
}

static void
test_open_not_file (void **state)
{
  char err[256];
  zv_dev_t *dev = (zv_dev_t *) 0x1;

  assert_int_equal (zv_dev_open (tl_dir, &dev, err, sizeof err), -EINVAL);
  assert_null (dev);
  assert_true (strncmp (err, tl_dir, strlen (tl_dir)) == 0);
  assert_non_null (strstr (err, "directory"));

  assert_int_equal (zv_dev_open ("/dev/null", &dev, err, sizeof err),
                    -EINVAL);
  assert_null (dev);
  assert_true (strncmp (err, "/dev/null: ", 11) == 0);
}

static void
test_lock_conflict (void **state)
{
  char path[512], err[256], want[600];
  zv_dev_t *a, *b = (zv_dev_t *) 0x1;
  int fd;

  a = tl_scratch_dev (path, sizeof path, "lock", MiB);
  assert_int_equal (zv_dev_open (path, &b, err, sizeof err), -EBUSY);
  assert_null (b);
  snprintf (want, sizeof want,
            "%s: already in use in this process (device locked)", path);
  assert_string_equal (err, want);

  /* Somebody else's flock is seen too. */
  zv_dev_close (a);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  assert_int_equal (flock (fd, LOCK_EX | LOCK_NB), 0);
  assert_int_equal (zv_dev_open (path, &b, err, sizeof err), -EBUSY);
  close (fd);

  /* Another process's lock: the message names it. */
  {
    char comm[64] = "";
    pid_t pid;
    int ctl;

    self_comm (comm, sizeof comm);
    pid = hold_in_child (path, &ctl);
    assert_int_equal (zv_dev_open (path, &b, err, sizeof err), -EBUSY);
    snprintf (want, sizeof want, "%s: in use by another process (device "
              "locked by process %d (%s))", path, (int) pid, comm);
    assert_string_equal (err, want);
    release_child (pid, ctl);
  }

  /* Closing releases the lock. */
  b = tl_dev_open (path);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  assert_int_equal (flock (fd, LOCK_EX | LOCK_NB), -1);
  assert_int_equal (errno, EWOULDBLOCK);
  close (fd);
  zv_dev_close (b);
  unlink (path);
}

static void
test_size_sparse (void **state)
{
  char path[512], tiny[512];
  unsigned char *buf = zv_buf_alloc (ZV_SECTOR);
  struct stat st;
  zv_dev_t *dev;

  tl_path (path, sizeof path, "sparse");
  tl_path (tiny, sizeof tiny, "tiny");
  assert_int_equal (tl_sparse_file (path, (1ull << 30) + 1234), 0);
  assert_int_equal (tl_sparse_file (tiny, 100), 0);
  dev = tl_dev_open (path);
  assert_int_equal (zv_dev_size (dev), 1ull << 30);
  assert_false (zv_dev_is_blockdev (dev));
  assert_string_equal (zv_dev_path (dev), path);
  assert_int_equal (stat (path, &st), 0);
  assert_true ((uint64_t) st.st_blocks * 512 < MiB);    /* still sparse */
  /* A hole reads as zeros. */
  memset (buf, 0xff, ZV_SECTOR);
  assert_int_equal (zv_dev_read (dev, buf, 512 * MiB, ZV_SECTOR), 0);
  assert_true (zv_is_zero (buf, ZV_SECTOR));
  zv_dev_close (dev);

  dev = tl_dev_open (tiny);
  assert_int_equal (zv_dev_size (dev), 0);
  tl_log_reset (true);
  assert_int_equal (zv_dev_read (dev, buf, 0, ZV_SECTOR), -EIO);
  zv_dev_close (dev);

  zv_buf_free (buf);
  unlink (path);
  unlink (tiny);
}

/* ---- I/O ------------------------------------------------------------- */

static void
test_roundtrip_batch (void **state)
{
  const uint64_t size = 8 * MiB;
  char path[512];
  unsigned char *shadow = calloc (1, size);
  zv_dev_stats_t st;
  zv_dev_t *dev;
  rb_t c;

  dev = tl_scratch_dev (path, sizeof path, "rt", size);
  c = (rb_t) {
    .rb_dev = dev, .rb_base = 0, .rb_nsect = (uint32_t) (size / ZV_SECTOR),
    .rb_rounds = 20, .rb_batch = 100, .rb_seed = 0x5eed1234,
    .rb_shadow = shadow,
  };

  tl_log_reset (false);
  if (run_random_batches (&c) != 0)
    fail_msg ("%d problems, first: %s", c.rb_problems, c.rb_what);
  assert_true (c.rb_writes > 500 && c.rb_reads > 300);
  zv_dev_get_stats (dev, &st);
  assert_int_equal (st.ds_writes, c.rb_writes);
  assert_int_equal (st.ds_nwritten, c.rb_wbytes);
  assert_int_equal (st.ds_reads, c.rb_reads);
  assert_int_equal (st.ds_nread, c.rb_rbytes);
  assert_int_equal (st.ds_flushes, 0);
  assert_int_equal (tl_log_errors (), 0);

  verify_whole (dev, shadow, size);
  zv_dev_close (dev);

  /* Still there after reopening. */
  dev = tl_dev_open (path);
  verify_whole (dev, shadow, size);
  zv_dev_close (dev);
  free (shadow);
  unlink (path);
}

static void
test_flush (void **state)
{
  char pa[512], pb[512];
  zv_dev_t *a, *b;
  enum { NW = 32 };
  zv_dev_io_t ios[2 * NW + 2];
  unsigned char *wbuf[NW], *rbuf[NW];
  zv_dev_stats_t sa, sb;
  uint64_t s = 42;
  size_t n = 0;

  tl_path (pa, sizeof pa, "fa");
  tl_path (pb, sizeof pb, "fb");
  assert_int_equal (tl_sparse_file (pa, 2 * MiB), 0);
  assert_int_equal (tl_sparse_file (pb, 2 * MiB), 0);
  a = tl_dev_open (pa);
  b = tl_dev_open (pb);

  /* Single flush. */
  unsigned char *buf = zv_buf_alloc (ZV_SECTOR);
  memset (buf, 0x5a, ZV_SECTOR);
  assert_int_equal (tl_dev_write (a, buf, 0, ZV_SECTOR), 0);
  assert_int_equal (zv_dev_flush (a), 0);
  zv_dev_get_stats (a, &sa);
  assert_int_equal (sa.ds_flushes, 1);
  zv_buf_free (buf);

  /*
   * A flush is a barrier inside its batch: writes before it complete
   * first and reads after it see them.  Two adjacent flushes (two
   * devices) go together.
   */
  for (int i = 0; i < NW; i++) {
    wbuf[i] = zv_buf_alloc (16384);
    rbuf[i] = zv_buf_alloc (16384);
    tl_fill_rand (wbuf[i], 16384, &s);
    ios[n++] = (zv_dev_io_t) { .di_dev = i % 2 ? b : a, .di_op = ZV_DEV_WRITE,
                               .di_buf = wbuf[i],
                               .di_offset = (uint64_t) (i / 2) * 16384,
                               .di_len = 16384 };
  }
  ios[n++] = (zv_dev_io_t) { .di_dev = a, .di_op = ZV_DEV_FLUSH };
  ios[n++] = (zv_dev_io_t) { .di_dev = b, .di_op = ZV_DEV_FLUSH };
  for (int i = 0; i < NW; i++)
    ios[n++] = (zv_dev_io_t) { .di_dev = i % 2 ? b : a, .di_op = ZV_DEV_READ,
                               .di_buf = rbuf[i],
                               .di_offset = (uint64_t) (i / 2) * 16384,
                               .di_len = 16384 };
  for (size_t i = 0; i < n; i++)
    ios[i].di_result = 777;
  assert_int_equal (zv_dev_io_batch (ios, n), 0);
  for (size_t i = 0; i < n; i++)
    assert_int_equal (ios[i].di_result, 0);
  for (int i = 0; i < NW; i++) {
    assert_memory_equal (wbuf[i], rbuf[i], 16384);
    zv_buf_free (wbuf[i]);
    zv_buf_free (rbuf[i]);
  }
  zv_dev_get_stats (a, &sa);
  zv_dev_get_stats (b, &sb);
  assert_int_equal (sa.ds_flushes, 2);
  assert_int_equal (sb.ds_flushes, 1);
  assert_int_equal (sa.ds_writes, 1 + NW / 2);
  assert_int_equal (sb.ds_writes, NW / 2);
  assert_int_equal (sa.ds_reads, NW / 2);

  zv_dev_close (a);
  zv_dev_close (b);
  unlink (pa);
  unlink (pb);
}

/* Fault hook: fail 'fa_op' on requests covering 'fa_off'. */
struct fault {
  enum zv_dev_op fa_op;
  uint64_t fa_off;
  int fa_error;
  atomic_int fa_calls, fa_hits;
};

static int
fault_fn (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
          uint32_t len)
{
  struct fault *f = arg;

  atomic_fetch_add (&f->fa_calls, 1);
  if (op != f->fa_op)
    return 0;
  if (op != ZV_DEV_FLUSH && !(off <= f->fa_off && f->fa_off < off + len))
    return 0;
  atomic_fetch_add (&f->fa_hits, 1);
  return f->fa_error;
}

static void
test_fault_injection (void **state)
{
  char path[512];
  zv_dev_t *dev;
  struct fault f = { .fa_op = ZV_DEV_WRITE, .fa_off = 65536,
                     .fa_error = -EIO };
  unsigned char *buf[3], *chk = zv_buf_alloc (ZV_SECTOR);
  zv_dev_io_t ios[3];
  zv_dev_stats_t st;
  char want[600];

  dev = tl_scratch_dev (path, sizeof path, "fault", MiB);
  for (int i = 0; i < 3; i++) {
    buf[i] = zv_buf_alloc (ZV_SECTOR);
    memset (buf[i], 0x11 * (i + 1), ZV_SECTOR);
    ios[i] = (zv_dev_io_t) { .di_dev = dev, .di_op = ZV_DEV_WRITE,
                             .di_buf = buf[i],
                             .di_offset = (uint64_t) i * 65536,
                             .di_len = ZV_SECTOR };
  }
  zv_dev_set_fault (dev, fault_fn, &f);
  tl_log_reset (true);
  assert_int_equal (zv_dev_io_batch (ios, 3), -EIO);
  assert_int_equal (ios[0].di_result, 0);
  assert_int_equal (ios[1].di_result, -EIO);
  assert_int_equal (ios[2].di_result, 0);
  assert_int_equal (atomic_load (&f.fa_calls), 3);
  assert_int_equal (atomic_load (&f.fa_hits), 1);
  snprintf (want, sizeof want, "%s: write at 65536: %s", path,
            strerror (EIO));
  assert_true (tl_log_has (want));

  /* The failed write never reached the file; the others did. */
  assert_int_equal (tl_file_pread (path, chk, ZV_SECTOR, 65536), 0);
  assert_true (zv_is_zero (chk, ZV_SECTOR));
  assert_int_equal (tl_file_pread (path, chk, ZV_SECTOR, 0), 0);
  assert_memory_equal (chk, buf[0], ZV_SECTOR);
  assert_int_equal (tl_file_pread (path, chk, ZV_SECTOR, 2 * 65536), 0);
  assert_memory_equal (chk, buf[2], ZV_SECTOR);
  zv_dev_get_stats (dev, &st);
  assert_int_equal (st.ds_writes, 2);
  assert_int_equal (st.ds_nwritten, 2 * ZV_SECTOR);

  /* Any errno passes through, for flushes too. */
  f.fa_op = ZV_DEV_FLUSH;
  f.fa_error = -ENOSPC;
  tl_log_reset (true);
  assert_int_equal (zv_dev_flush (dev), -ENOSPC);
  snprintf (want, sizeof want, "%s: flush: %s", path, strerror (ENOSPC));
  assert_true (tl_log_has (want));
  zv_dev_get_stats (dev, &st);
  assert_int_equal (st.ds_flushes, 0);

  /* Reads that cover the bad offset fail; others pass. */
  f.fa_op = ZV_DEV_READ;
  f.fa_error = -EIO;
  assert_int_equal (zv_dev_read (dev, chk, 65536, ZV_SECTOR), -EIO);
  assert_int_equal (zv_dev_read (dev, chk, 0, ZV_SECTOR), 0);
  assert_memory_equal (chk, buf[0], ZV_SECTOR);

  /* Cleared: the write goes through. */
  zv_dev_set_fault (dev, NULL, NULL);
  assert_int_equal (tl_dev_write (dev, buf[1], 65536, ZV_SECTOR), 0);
  assert_int_equal (tl_file_pread (path, chk, ZV_SECTOR, 65536), 0);
  assert_memory_equal (chk, buf[1], ZV_SECTOR);

  for (int i = 0; i < 3; i++)
    zv_buf_free (buf[i]);
  zv_buf_free (chk);
  zv_dev_close (dev);
  unlink (path);
}

static void
test_past_end (void **state)
{
  const uint64_t size = MiB;
  char path[512];
  zv_dev_t *dev;
  unsigned char *buf = zv_buf_alloc (2 * ZV_SECTOR);
  unsigned char *pat = zv_buf_alloc (2 * ZV_SECTOR);
  zv_dev_io_t ios[2];
  zv_dev_stats_t st;
  struct stat sb;

  dev = tl_scratch_dev (path, sizeof path, "end", size);
  tl_log_reset (true);
  assert_int_equal (zv_dev_read (dev, buf, size, ZV_SECTOR), -EIO);
  assert_int_equal (zv_dev_read (dev, buf, size - ZV_SECTOR, 2 * ZV_SECTOR),
                    -EIO);
  assert_int_equal (zv_dev_read (dev, buf, UINT64_MAX - ZV_SECTOR + 1,
                                 ZV_SECTOR), -EIO);
  assert_int_equal (tl_dev_write (dev, buf, size, ZV_SECTOR), -EIO);
  assert_true (tl_log_has ("beyond the end of the device"));
  assert_int_equal (stat (path, &sb), 0);
  assert_int_equal (sb.st_size, (off_t) size);       /* did not grow */

  /* In a batch, only the bad request fails. */
  memset (pat, 0x3c, 2 * ZV_SECTOR);
  ios[0] = (zv_dev_io_t) { .di_dev = dev, .di_op = ZV_DEV_WRITE,
                           .di_buf = pat, .di_offset = size - 2 * ZV_SECTOR,
                           .di_len = 2 * ZV_SECTOR };
  ios[1] = (zv_dev_io_t) { .di_dev = dev, .di_op = ZV_DEV_WRITE,
                           .di_buf = pat, .di_offset = size - ZV_SECTOR,
                           .di_len = 2 * ZV_SECTOR };
  assert_int_equal (zv_dev_io_batch (ios, 2), -EIO);
  assert_int_equal (ios[0].di_result, 0);
  assert_int_equal (ios[1].di_result, -EIO);
  zv_dev_get_stats (dev, &st);
  assert_int_equal (st.ds_writes, 1);
  assert_int_equal (st.ds_reads, 0);

  /*
   * The file shrinks behind our back: the read comes back short, the
   * rest is retried, hits end of file and fails -EIO; the part that
   * existed was transferred.
   */
  assert_int_equal (truncate (path, (off_t) (size - ZV_SECTOR)), 0);
  memset (buf, 0, 2 * ZV_SECTOR);
  tl_log_reset (true);
  assert_int_equal (zv_dev_read (dev, buf, size - 2 * ZV_SECTOR,
                                 2 * ZV_SECTOR), -EIO);
  assert_memory_equal (buf, pat, ZV_SECTOR);
  assert_true (tl_log_has ("unexpected end of file"));
  {
    char want[600];
    snprintf (want, sizeof want, "%s: read at %" PRIu64 ": ", path,
              size - ZV_SECTOR);
    assert_true (tl_log_has (want));
  }
  /* What is left of the file still reads fine. */
  assert_int_equal (zv_dev_read (dev, buf, size - 3 * ZV_SECTOR,
                                 2 * ZV_SECTOR), 0);
  assert_true (zv_is_zero (buf, ZV_SECTOR));
  assert_memory_equal (buf + ZV_SECTOR, pat, ZV_SECTOR);

  zv_buf_free (buf);
  zv_buf_free (pat);
  zv_dev_close (dev);
  unlink (path);
}

/* A misaligned request is a caller bug: the process must stop. */
typedef struct misread {
  zv_dev_t *mr_dev;
  unsigned char *mr_buf;
  uint64_t mr_off;
  uint32_t mr_len;
} misread_t;

static void
misread_fn (void *arg)
{
  misread_t *m = arg;

  zv_dev_read (m->mr_dev, m->mr_buf, m->mr_off, m->mr_len);
}

static void
test_misaligned_aborts (void **state)
{
  char path[512];
  zv_dev_t *dev;
  unsigned char *buf = zv_buf_alloc (2 * ZV_SECTOR);
  struct { uint64_t off; uint32_t len; size_t bufoff; } bad[] = {
    { 512, ZV_SECTOR, 0 },          /* offset */
    { 0, 1000, 0 },                 /* length */
    { 0, ZV_SECTOR, 512 },          /* buffer */
  };
  misread_t m;

  dev = tl_scratch_dev (path, sizeof path, "misaligned", MiB);
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    m = (misread_t) { .mr_dev = dev, .mr_buf = buf + bad[i].bufoff,
                      .mr_off = bad[i].off, .mr_len = bad[i].len };
    if (!tl_dies_with_abort (misread_fn, &m))
      fail_msg ("request %zu did not abort", i);
  }
  /* The same read, aligned, is fine. */
  m = (misread_t) { .mr_dev = dev, .mr_buf = buf, .mr_off = 0,
                    .mr_len = ZV_SECTOR };
  assert_false (tl_dies_with_abort (misread_fn, &m));
  zv_buf_free (buf);
  zv_dev_close (dev);
  unlink (path);
}

/* ---- O_DIRECT and the buffered fallback ------------------------------ */

/* Does this directory's file system take O_DIRECT? */
static bool
probe_direct (const char *dir)
{
  char path[300];
  int fd;

  snprintf (path, sizeof path, "%s/.probe-direct", dir);
  fd = open (path, O_RDWR | O_CREAT | O_DIRECT | O_CLOEXEC, 0600);
  if (fd >= 0)
    close (fd);
  else
    assert_int_equal (errno, EINVAL);
  unlink (path);
  return fd >= 0;
}

/* Open, check the flags the kernel really holds, and do some I/O. */
static void
check_dev_mode (const char *path, bool want_direct)
{
  zv_dev_t *dev = tl_dev_open (path);
  uint64_t size = zv_dev_size (dev);
  unsigned char *shadow = calloc (1, size);
  long flags = fd_flags_of (path);
  rb_t c = {
    .rb_dev = dev, .rb_nsect = (uint32_t) (size / ZV_SECTOR),
    .rb_rounds = 5, .rb_batch = 50, .rb_seed = 99, .rb_shadow = shadow,
  };

  assert_int_equal (zv_dev_is_direct (dev), want_direct);
  assert_true (flags != -1);
  assert_int_equal ((flags & O_DIRECT) != 0, want_direct);
  assert_true (flags & O_CLOEXEC);
  assert_int_equal (flags & O_ACCMODE, O_RDWR);
  if (run_random_batches (&c) != 0)
    fail_msg ("%s: %d problems, first: %s", path, c.rb_problems, c.rb_what);
  assert_int_equal (zv_dev_flush (dev), 0);
  verify_whole (dev, shadow, size);
  zv_dev_close (dev);
  free (shadow);
}

/* Asynchronous requests: an observer that notes each event's thread. */
typedef struct async_obs {
  pthread_t ao_submit_thr, ao_done_thr;
  atomic_int ao_submits, ao_dones;
  int ao_result;
} async_obs_t;

static void
async_observe (void *arg, zv_dev_t *dev, enum zv_dev_op op, int done,
               uint64_t off, uint32_t len, const void *buf, int result)
{
  async_obs_t *o = arg;

  (void) dev; (void) op; (void) off; (void) len; (void) buf;
  if (done) {
    o->ao_done_thr = pthread_self ();
    o->ao_result = result;
    atomic_fetch_add (&o->ao_dones, 1);
  }
  else {
    o->ao_submit_thr = pthread_self ();
    atomic_fetch_add (&o->ao_submits, 1);
  }
}

typedef struct async_fin {
  zv_dev_async_t *af_aq;
  zv_dev_io_t *af_io;
  int af_r;
} async_fin_t;

static void *
async_finisher (void *arg)
{
  async_fin_t *f = arg;

  f->af_r = zv_dev_async_finish (f->af_aq, f->af_io);
  return NULL;
}

/*
 * A write started on one thread is finished on another (the intent
 * log's write-ahead): the data is on the file, the observer saw the
 * submit on the first thread and the completion on the second, the
 * counters took it; a read the same way; a request the fault hook fails
 * is owned by the queue and finished with its error, touching nothing;
 * a vectored request is not taken.
 */
static void
test_async (void **state)
{
  char path[512];
  zv_dev_t *dev;
  zv_dev_async_t *aq;
  uint8_t *buf = zv_buf_alloc (4 * ZV_SECTOR);
  uint8_t *chk = zv_buf_alloc (4 * ZV_SECTOR);
  zv_dev_io_t io;
  async_obs_t o = { .ao_result = 1 };
  async_fin_t f;
  struct fault fa = { .fa_op = ZV_DEV_WRITE, .fa_off = 65536,
                      .fa_error = -EIO };
  struct iovec iov = { .iov_base = buf, .iov_len = ZV_SECTOR };
  zv_dev_stats_t st;
  pthread_t th;

  (void) state;
  dev = tl_scratch_dev (path, sizeof path, "async", MiB);
  if (!zv_dev_async_ok (dev)) {
    zv_dev_close (dev);
    unlink (path);
    zv_buf_free (buf);
    zv_buf_free (chk);
    tl_skip ("the scratch directory takes no O_DIRECT");
  }
  aq = zv_dev_async_new ();
  assert_non_null (aq);
  zv_dev_set_observer (dev, async_observe, &o);

  memset (buf, 0x5a, 4 * ZV_SECTOR);
  io = (zv_dev_io_t) { .di_dev = dev, .di_op = ZV_DEV_WRITE, .di_buf = buf,
                       .di_offset = 8 * ZV_SECTOR, .di_len = 4 * ZV_SECTOR };
  assert_true (zv_dev_async_start (aq, &io));
  assert_int_equal (atomic_load (&o.ao_submits), 1);
  assert_true (pthread_equal (o.ao_submit_thr, pthread_self ()));
  f = (async_fin_t) { .af_aq = aq, .af_io = &io, .af_r = 1 };
  assert_int_equal (pthread_create (&th, NULL, async_finisher, &f), 0);
  assert_int_equal (pthread_join (th, NULL), 0);
  assert_int_equal (f.af_r, 0);
  assert_int_equal (atomic_load (&o.ao_dones), 1);
  assert_true (pthread_equal (o.ao_done_thr, th));
  assert_int_equal (o.ao_result, 0);
  assert_int_equal (tl_file_pread (path, chk, 4 * ZV_SECTOR, 8 * ZV_SECTOR),
                    0);
  assert_memory_equal (chk, buf, 4 * ZV_SECTOR);
  zv_dev_get_stats (dev, &st);
  assert_int_equal (st.ds_writes, 1);
  assert_int_equal (st.ds_nwritten, 4 * ZV_SECTOR);

  /* A read, finished on this thread. */
  memset (chk, 0, 4 * ZV_SECTOR);
  io = (zv_dev_io_t) { .di_dev = dev, .di_op = ZV_DEV_READ, .di_buf = chk,
                       .di_offset = 8 * ZV_SECTOR, .di_len = 4 * ZV_SECTOR };
  assert_true (zv_dev_async_start (aq, &io));
  assert_int_equal (zv_dev_async_finish (aq, &io), 0);
  assert_memory_equal (chk, buf, 4 * ZV_SECTOR);

  /* Failed by the fault hook: never issued, finished with its error. */
  zv_dev_set_fault (dev, fault_fn, &fa);
  tl_log_reset (true);
  io = (zv_dev_io_t) { .di_dev = dev, .di_op = ZV_DEV_WRITE, .di_buf = buf,
                       .di_offset = 65536, .di_len = ZV_SECTOR };
  assert_true (zv_dev_async_start (aq, &io));
  assert_int_equal (zv_dev_async_finish (aq, &io), -EIO);
  assert_int_equal (atomic_load (&fa.fa_hits), 1);
  assert_int_equal (tl_file_pread (path, chk, ZV_SECTOR, 65536), 0);
  assert_true (zv_is_zero (chk, ZV_SECTOR));
  zv_dev_set_fault (dev, NULL, NULL);
  tl_log_reset (false);

  /* Vectored: not taken, nothing done. */
  io = (zv_dev_io_t) { .di_dev = dev, .di_op = ZV_DEV_WRITE, .di_iov = &iov,
                       .di_iovcnt = 1, .di_offset = 0, .di_len = ZV_SECTOR };
  assert_false (zv_dev_async_start (aq, &io));

  zv_dev_set_observer (dev, NULL, NULL);
  zv_dev_async_free (aq);
  zv_dev_close (dev);
  unlink (path);
  zv_buf_free (buf);
  zv_buf_free (chk);
}

static void
test_direct_var_tmp (void **state)
{
  char path[512];
  struct statfs sf;
  bool want;

  tl_path (path, sizeof path, "direct");
  assert_int_equal (tl_sparse_file (path, 2 * MiB), 0);
  assert_int_equal (statfs (tl_dir, &sf), 0);
  want = probe_direct (tl_dir);
  /* These always take O_DIRECT. */
  if (sf.f_type == EXT4_SUPER_MAGIC || sf.f_type == XFS_SUPER_MAGIC ||
      sf.f_type == BTRFS_SUPER_MAGIC)
    assert_true (want);
  print_message ("/var/tmp: fs type 0x%lx, O_DIRECT %s\n",
                 (unsigned long) sf.f_type, want ? "yes" : "no");
  check_dev_mode (path, want);
  unlink (path);
}

/* Mount a throwaway file system in the scratch directory: 0, or the
 * errno of a mount that is not allowed. */
static int
mount_scratch (const char *type, char *dir, size_t len)
{
  tl_path (dir, len, type);
  assert_int_equal (mkdir (dir, 0700), 0);
  if (mount (type, dir, type, 0, NULL) == -1) {
    int e = errno;
    rmdir (dir);
    return e;
  }
  return 0;
}

static void
unmount_scratch (const char *dir)
{
  if (umount (dir) == -1)
    umount2 (dir, MNT_DETACH);
  rmdir (dir);
}

static void
test_tmpfs_and_ramfs (void **state)
{
  char dir[512], path[PATH_MAX];
  struct statfs sf;
  bool mounted = false, want;
  int e;

  /*
   * tmpfs: it takes O_DIRECT since Linux 6.6; before that, this is the
   * buffered fallback.  Either way, the device must say what it uses.
   */
  if (statfs ("/dev/shm", &sf) == 0 && sf.f_type == TMPFS_MAGIC)
    snprintf (dir, sizeof dir, "/dev/shm");
  else if ((e = mount_scratch ("tmpfs", dir, sizeof dir)) == 0)
    mounted = true;
  else {
    print_message ("cannot mount tmpfs (%s): tmpfs not tested\n",
                   strerror (e));
    dir[0] = '\0';
  }
  if (dir[0]) {
    char name[64];
    snprintf (name, sizeof name, "zv-test-dev.%d", (int) getpid ());
    want = probe_direct (dir);
    print_message ("tmpfs (%s): O_DIRECT %s\n", dir, want ? "yes" : "no");
    snprintf (path, sizeof path, "%s/%s", dir, name);
    assert_int_equal (tl_sparse_file (path, MiB), 0);
    check_dev_mode (path, want);
    unlink (path);
    if (mounted)
      unmount_scratch (dir);
  }

  /* ramfs never takes O_DIRECT: the fallback must be used. */
  if ((e = mount_scratch ("ramfs", dir, sizeof dir)) != 0)
    tl_skip ("cannot mount ramfs (%s)", strerror (e));
  assert_false (probe_direct (dir));
  snprintf (path, sizeof path, "%s/ram", dir);
  assert_int_equal (tl_sparse_file (path, MiB), 0);
  check_dev_mode (path, false);
  unlink (path);
  unmount_scratch (dir);
}

/* ---- threads ---------------------------------------------------------- */

static void *
rb_thread (void *arg)
{
  run_random_batches (arg);
  return NULL;
}

static void
test_threads (void **state)
{
  enum { NT = 4 };
  const uint64_t region = 2 * MiB, size = NT * region;
  char path[512];
  zv_dev_t *dev;
  unsigned char *shadow = calloc (1, size);
  pthread_t th[NT];
  rb_t c[NT];
  zv_dev_stats_t st;
  uint64_t w = 0, wb = 0, r = 0, rb = 0;
  int rings0;

  dev = tl_scratch_dev (path, sizeof path, "mt", size);
  /* This thread's ring exists already, for a stable baseline. */
  assert_int_equal (zv_dev_flush (dev), 0);
  rings0 = count_uring_fds ();
  tl_log_reset (false);
  for (int i = 0; i < NT; i++) {
    c[i] = (rb_t) {
      .rb_dev = dev, .rb_base = (uint64_t) i * region,
      .rb_nsect = (uint32_t) (region / ZV_SECTOR), .rb_rounds = 15,
      .rb_batch = 64, .rb_seed = 1000 + (uint64_t) i,
      .rb_shadow = shadow + (uint64_t) i * region,
    };
    assert_int_equal (pthread_create (&th[i], NULL, rb_thread, &c[i]), 0);
  }
  for (int i = 0; i < NT; i++) {
    assert_int_equal (pthread_join (th[i], NULL), 0);
    if (c[i].rb_problems)
      fail_msg ("thread %d: %d problems, first: %s", i, c[i].rb_problems,
                c[i].rb_what);
    w += c[i].rb_writes;
    wb += c[i].rb_wbytes;
    r += c[i].rb_reads;
    rb += c[i].rb_rbytes;
  }
  assert_int_equal (tl_log_errors (), 0);
  /* Each thread's ring went away with the thread. */
  assert_int_equal (count_uring_fds (), rings0);

  zv_dev_get_stats (dev, &st);
  assert_int_equal (st.ds_writes, w);
  assert_int_equal (st.ds_nwritten, wb);
  assert_int_equal (st.ds_reads, r);
  assert_int_equal (st.ds_nread, rb);
  assert_int_equal (st.ds_flushes, 1);
  verify_whole (dev, shadow, size);

  zv_dev_close (dev);
  free (shadow);
  unlink (path);
}

/* A thread with a 4-entry ring: 100-request batches go in waves. */
static void *
small_ring_thread (void *arg)
{
  rb_t *c = arg;
  run_random_batches (c);
  if (zv_dev_flush (c->rb_dev) != 0)
    rb_problem (c, "flush failed");
  return NULL;
}

static void
test_waves (void **state)
{
  const uint64_t size = 4 * MiB;
  char path[512];
  zv_dev_t *dev;
  unsigned char *shadow = calloc (1, size);
  unsigned saved = zv_dev_ring_entries;
  rb_t c;
  pthread_t th;

  dev = tl_scratch_dev (path, sizeof path, "waves", size);
  c = (rb_t) {
    .rb_dev = dev, .rb_nsect = (uint32_t) (size / ZV_SECTOR),
    .rb_rounds = 10, .rb_batch = 100, .rb_seed = 777, .rb_shadow = shadow,
  };
  zv_dev_ring_entries = 4;
  assert_int_equal (pthread_create (&th, NULL, small_ring_thread, &c), 0);
  assert_int_equal (pthread_join (th, NULL), 0);
  zv_dev_ring_entries = saved;
  if (c.rb_problems)
    fail_msg ("%d problems, first: %s", c.rb_problems, c.rb_what);
  verify_whole (dev, shadow, size);
  zv_dev_close (dev);
  free (shadow);
  unlink (path);
}

/*
 * No io_uring (as in a seccomp sandbox): a thread whose io_uring_setup
 * fails with ENOSYS must still do all its I/O, with pread/pwrite.
 */
typedef struct nouring {
  rb_t nu_rb;
  int nu_init;                        /* io_uring_queue_init in the jail */
  int nu_rings_before, nu_rings_after;
  int nu_past_end, nu_flush;
} nouring_t;

static void *
nouring_thread (void *arg)
{
  nouring_t *nu = arg;
  struct io_uring ring;
  unsigned char *buf = zv_buf_alloc (ZV_SECTOR);

  if (tl_jail_uring () != 0) {
    nu->nu_init = 1;
    zv_buf_free (buf);
    return NULL;
  }
  nu->nu_init = io_uring_queue_init (8, &ring, 0);
  if (nu->nu_init == 0)
    io_uring_queue_exit (&ring);

  run_random_batches (&nu->nu_rb);
  nu->nu_flush = zv_dev_flush (nu->nu_rb.rb_dev);
  nu->nu_past_end = zv_dev_read (nu->nu_rb.rb_dev, buf,
                                 zv_dev_size (nu->nu_rb.rb_dev), ZV_SECTOR);
  nu->nu_rings_after = count_uring_fds ();
  zv_buf_free (buf);
  return NULL;
}

static void
test_no_uring_fallback (void **state)
{
  const uint64_t size = 2 * MiB;
  char path[512];
  zv_dev_t *dev;
  unsigned char *shadow = calloc (1, size);
  nouring_t nu;
  zv_dev_stats_t st;
  pthread_t th;

  dev = tl_scratch_dev (path, sizeof path, "nouring", size);
  nu = (nouring_t) {
    .nu_rb = {
      .rb_dev = dev, .rb_nsect = (uint32_t) (size / ZV_SECTOR),
      .rb_rounds = 10, .rb_batch = 100, .rb_seed = 31337,
      .rb_shadow = shadow,
    },
  };
  assert_int_equal (zv_dev_flush (dev), 0);   /* main ring exists */
  nu.nu_rings_before = count_uring_fds ();
  tl_log_reset (true);                /* it reads past the end */
  assert_int_equal (pthread_create (&th, NULL, nouring_thread, &nu), 0);
  assert_int_equal (pthread_join (th, NULL), 0);
  if (nu.nu_init == 1)
    tl_skip ("seccomp is not available to take io_uring away");
  assert_int_equal (nu.nu_init, -ENOSYS);
  if (nu.nu_rb.rb_problems)
    fail_msg ("%d problems, first: %s", nu.nu_rb.rb_problems,
              nu.nu_rb.rb_what);
  assert_int_equal (nu.nu_flush, 0);
  assert_int_equal (nu.nu_past_end, -EIO);
  assert_int_equal (nu.nu_rings_after, nu.nu_rings_before);
  assert_true (tl_log_has ("io_uring unavailable"));

  zv_dev_get_stats (dev, &st);
  assert_int_equal (st.ds_writes, nu.nu_rb.rb_writes);
  assert_int_equal (st.ds_nwritten, nu.nu_rb.rb_wbytes);
  assert_int_equal (st.ds_reads, nu.nu_rb.rb_reads);
  assert_int_equal (st.ds_flushes, 2);
  verify_whole (dev, shadow, size);
  zv_dev_close (dev);
  free (shadow);
  unlink (path);
}

/* ---- I/O while the process exits -------------------------------------- */

/*
 * A thread of the exiting child (test_io_during_exit): a read before the
 * exit when ei_early (it has a ring then), and one more once the last
 * destructor lets it go, after dev.c's destructor deleted the rings' key.
 */
typedef struct exitio {
  zv_dev_t *ei_dev;
  bool ei_early;
  int ei_ready, ei_go;            /* pipe ends: "early read done", "go" */
  int ei_result;
} exitio_t;

static exitio_t exitio[2];
static pthread_t exitio_th[2];
static bool exitio_armed;         /* only in the child */
static int exitio_go;             /* the write end of the threads' "go" */

static void *
exitio_thread (void *arg)
{
  exitio_t *e = arg;
  void *buf = zv_buf_alloc (ZV_SECTOR);
  char c = 'r';

  e->ei_result = e->ei_early ? zv_dev_read (e->ei_dev, buf, 0, ZV_SECTOR)
    : 0;
  if (write (e->ei_ready, &c, 1) != 1 || read (e->ei_go, &c, 1) != 1)
    e->ei_result = -EPIPE;
  else if (e->ei_result == 0)
    e->ei_result = zv_dev_read (e->ei_dev, buf, 0, ZV_SECTOR);
  zv_buf_free (buf);
  return NULL;
}

/* Runs after every destructor without a priority, dev.c's among them
 * (GCC: the smaller the number, the later).  It ends the child itself:
 * the ring the early thread had is left to the process's end by design,
 * which a sanitizer's leak check at exit would report. */
static void __attribute__ ((destructor (101)))
exitio_fini (void)
{
  char go[2] = { 'g', 'g' };

  if (!exitio_armed)
    return;
  if (write (exitio_go, go, 2) != 2)
    _exit (4);
  for (int i = 0; i < 2; i++)
    if (pthread_join (exitio_th[i], NULL) != 0 || exitio[i].ei_result != 0)
      _exit (3);
  _exit (0);
}

/* A thread that ends with zv_dev_thread_exit gives its ring back at
 * once (a sanitizer's scan of the exiting thread cannot miss it). */
static void *
ring_exit_thread (void *arg)
{
  zv_dev_t *dev = arg;
  void *buf = zv_buf_alloc (ZV_SECTOR);
  uint64_t *counts = zv_alloc (2 * sizeof *counts);

  assert_int_equal (zv_dev_read (dev, buf, 0, ZV_SECTOR), 0);
  counts[0] = zv_dev_rings_live ();
  zv_dev_thread_exit ();
  counts[1] = zv_dev_rings_live ();
  zv_dev_thread_exit ();                /* again: nothing to give */
  zv_buf_free (buf);
  return counts;
}

static void
test_thread_exit_ring (void **state)
{
  char path[512];
  const char *p = tl_path (path, sizeof path, "ringexit");
  zv_dev_t *dev;
  pthread_t th;
  uint64_t *counts;
  char err[256];

  (void) state;
  assert_int_equal (tl_sparse_file (p, MiB), 0);
  assert_int_equal (zv_dev_open (p, &dev, err, sizeof err), 0);
  assert_int_equal (pthread_create (&th, NULL, ring_exit_thread, dev), 0);
  assert_int_equal (pthread_join (th, (void **) &counts), 0);
  assert_int_equal (counts[1], counts[0] - 1);
  free (counts);
  zv_dev_close (dev);
  unlink (p);
}

/*
 * A pool left open at exit (a test that failed, a server that exits
 * without closing it) has threads doing I/O while the library's
 * destructors run: a batch after the rings' key was deleted used to
 * abort on pthread_setspecific (core/dev.c, dev_ring_get).  Both kinds
 * of thread must get their reads done: one that had a ring before the
 * exit and one whose first batch comes after.
 */
static void
test_io_during_exit (void **state)
{
  char path[512];
  zv_dev_t *dev;
  int ready[2], go[2], status;
  pid_t pid;

  dev = tl_scratch_dev (path, sizeof path, "exitio", MiB);
  assert_int_equal (pipe2 (ready, O_CLOEXEC), 0);
  assert_int_equal (pipe2 (go, O_CLOEXEC), 0);
  fflush (NULL);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0) {
    /* The device (and its lock) is the parent's, shared by the fork. */
    char c[1];

    for (int i = 0; i < 2; i++) {
      exitio[i] = (exitio_t) { .ei_dev = dev, .ei_early = i == 0,
                               .ei_ready = ready[1], .ei_go = go[0] };
      if (pthread_create (&exitio_th[i], NULL, exitio_thread,
                          &exitio[i]) != 0)
        _exit (5);
    }
    for (int i = 0; i < 2; i++)
      if (read (ready[0], c, 1) != 1)
        _exit (6);
    exitio_go = go[1];
    exitio_armed = true;
    exit (0);
  }
  close (ready[0]);
  close (ready[1]);
  close (go[0]);
  close (go[1]);
  assert_int_equal (waitpid (pid, &status, 0), pid);
  if (WIFSIGNALED (status))
    fail_msg ("the exiting child died of signal %d", WTERMSIG (status));
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 0);
  zv_dev_close (dev);
  unlink (path);
}

/* ---- block device (loop) ---------------------------------------------- */

/*
 * Attach a free loop device to file 'backing' (autoclear: it detaches
 * when its last descriptor closes); its path in lp[len].  Returns the
 * descriptor that keeps it; skips the test (removing 'backing' if it is
 * a file) when no loop device can be had.  'backing' may be a loop
 * device itself.
 */
static int
loop_attach (const char *backing, char *lp, size_t len)
{
  int ctl, bfd, lfd = -1;

  ctl = open ("/dev/loop-control", O_RDWR | O_CLOEXEC);
  if (ctl == -1) {
    int e = errno;
    if (strncmp (backing, "/dev/", 5) != 0)
      unlink (backing);
    tl_skip ("no /dev/loop-control (%s)", strerror (e));
  }
  bfd = open (backing, O_RDWR | O_CLOEXEC);
  assert_true (bfd >= 0);
  for (int tries = 0; tries < 10 && lfd == -1; tries++) {
    struct loop_config cfg = { .fd = (uint32_t) bfd };
    int n = ioctl (ctl, LOOP_CTL_GET_FREE);
    if (n < 0)
      break;
    snprintf (lp, len, "/dev/loop%d", n);
    lfd = open (lp, O_RDWR | O_CLOEXEC);
    if (lfd == -1)
      break;
    cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    if (ioctl (lfd, LOOP_CONFIGURE, &cfg) == -1) {
      close (lfd);
      lfd = -1;
    }
  }
  close (ctl);
  close (bfd);
  if (lfd == -1) {
    if (strncmp (backing, "/dev/", 5) != 0)
      unlink (backing);
    tl_skip ("cannot set up a loop device");
  }
  return lfd;
}

static void
test_blockdev (void **state)
{
  const uint64_t size = 16 * MiB + 512;       /* rounds down to 16 MiB */
  char backing[512], lp[64], err[256], want[300];
  zv_dev_t *dev, *dev2 = NULL;
  unsigned char *buf, *chk;
  int lfd;

  tl_path (backing, sizeof backing, "loop.img");
  assert_int_equal (tl_sparse_file (backing, size), 0);
  lfd = loop_attach (backing, lp, sizeof lp);

  dev = tl_dev_open (lp);
  assert_true (zv_dev_is_blockdev (dev));
  assert_true (zv_dev_is_direct (dev));
  assert_int_equal (zv_dev_size (dev), 16 * MiB);

  /* O_EXCL: a second exclusive open is refused. */
  assert_int_equal (zv_dev_open (lp, &dev2, err, sizeof err), -EBUSY);
  assert_null (dev2);
  snprintf (want, sizeof want,
            "%s: in use by another process (device locked)", lp);
  assert_string_equal (err, want);

  buf = zv_buf_alloc (65536);
  chk = zv_buf_alloc (65536);
  memset (buf, 0xc3, 65536);
  assert_int_equal (tl_dev_write (dev, buf, 16 * MiB - 65536, 65536), 0);
  assert_int_equal (zv_dev_flush (dev), 0);
  assert_int_equal (zv_dev_read (dev, chk, 16 * MiB - 65536, 65536), 0);
  assert_memory_equal (buf, chk, 65536);
  tl_log_reset (true);                /* the read past the end */
  assert_int_equal (zv_dev_read (dev, chk, 16 * MiB, ZV_SECTOR), -EIO);
  memset (chk, 0, 65536);
  assert_int_equal (tl_file_pread (backing, chk, 65536, 16 * MiB - 65536),
                    0);
  assert_memory_equal (buf, chk, 65536);
  zv_buf_free (buf);
  zv_buf_free (chk);

  zv_dev_close (dev);
  /* Released: it opens again. */
  dev = tl_dev_open (lp);
  zv_dev_close (dev);

  /* Another exclusive holder (say, a mount) that takes no flock. */
  {
    int xfd = open (lp, O_RDWR | O_EXCL | O_CLOEXEC);
    assert_true (xfd >= 0);
    assert_int_equal (zv_dev_open (lp, &dev2, err, sizeof err), -EBUSY);
    assert_string_equal (err, want);
    close (xfd);
  }
  close (lfd);
  unlink (backing);
}

/*
 * A loop device and its backing file are one pool: whichever is open,
 * the other is refused, saying who holds it (issue 10: a server on each
 * used to serve, and one server's writes were lost).
 */
static void
test_loop_backing_lock (void **state)
{
  const zv_tunable_t *wait = zv_tunable_lookup ("dev_lock_wait");
  char backing[512], real[PATH_MAX], lp[64], lp2[64], comm[64];
  char err[512], want[PATH_MAX + 1024];
  zv_dev_t *dev, *dev2 = NULL;
  int lfd, lfd2, ctl, n;
  pid_t pid;

  tl_path (backing, sizeof backing, "backed.img");
  assert_int_equal (tl_sparse_file (backing, 16 * MiB), 0);
  lfd = loop_attach (backing, lp, sizeof lp);
  assert_non_null (realpath (backing, real));
  self_comm (comm, sizeof comm);
  /* Every refusal below waits for the lock first: not for long. */
  assert_non_null (wait);
  assert_int_equal (zv_tunable_set_value (wait, 100, err, sizeof err), 0);

  /* A server on the file: one on the loop device is refused. */
  pid = hold_in_child (backing, &ctl);
  assert_int_equal (zv_dev_open (lp, &dev2, err, sizeof err), -EBUSY);
  assert_null (dev2);
  n = snprintf (want, sizeof want, "%s: in use by another process: its "
                "backing file %s is locked by process %d (%s)", lp, real,
                (int) pid, comm);
  assert_true (n > 0 && (size_t) n < sizeof err);
  assert_string_equal (err, want);
  release_child (pid, ctl);

  /* A server on the loop device: one on the file is refused. */
  pid = hold_in_child (lp, &ctl);
  assert_int_equal (zv_dev_open (backing, &dev2, err, sizeof err), -EBUSY);
  assert_null (dev2);
  snprintf (want, sizeof want, "%s: in use by another process (device "
            "locked by process %d (%s), through %s)", backing, (int) pid,
            comm, lp);
  assert_string_equal (err, want);
  release_child (pid, ctl);

  /* Both names in one process (one pool given both): refused too; the
   * file's open warns that the loop device exists. */
  tl_log_reset (false);
  dev = tl_dev_open (backing);
  snprintf (want, sizeof want, "%s: it is the backing file of %s", backing,
            lp);
  assert_true (tl_log_has (want));
  assert_int_equal (zv_dev_open (lp, &dev2, err, sizeof err), -EBUSY);
  snprintf (want, sizeof want, "%s: already in use in this process: its "
            "backing file %s is open as a device too", lp, real);
  assert_string_equal (err, want);
  zv_dev_close (dev);

  /* Closing the loop device drops the file's lock with its own. */
  dev = tl_dev_open (lp);
  zv_dev_close (dev);
  dev = tl_dev_open (backing);
  zv_dev_close (dev);

  /* A loop device over the loop device claims it (O_EXCL), both ways. */
  lfd2 = loop_attach (lp, lp2, sizeof lp2);
  dev = tl_dev_open (lp2);
  assert_int_equal (zv_dev_open (lp, &dev2, err, sizeof err), -EBUSY);
  snprintf (want, sizeof want, "%s: in use by another process (device "
            "locked; it backs %s)", lp, lp2);
  assert_string_equal (err, want);
  zv_dev_close (dev);
  dev = tl_dev_open (lp);
  assert_int_equal (zv_dev_open (lp2, &dev2, err, sizeof err), -EBUSY);
  snprintf (want, sizeof want, "%s: in use by another process: its "
            "backing device %s is held exclusively", lp2, lp);
  assert_string_equal (err, want);
  zv_dev_close (dev);
  close (lfd2);

  /* The file deleted: nothing can reach it by name any more, so the
   * loop device opens, with a warning. */
  assert_int_equal (unlink (backing), 0);
  tl_log_reset (false);
  dev = tl_dev_open (lp);
  snprintf (want, sizeof want, "%s: a loop device over %s, "
            "which cannot be locked (it was deleted)", lp, real);
  assert_true (tl_log_has (want));
  assert_int_equal (tl_log_errors (), 0);
  zv_dev_close (dev);
  close (lfd);
  assert_int_equal (zv_tunable_set_value (wait, wait->tn_default, err,
                                          sizeof err), 0);
}

/* zv_dev_file_fill: a sparse file written whole (its tail not a whole
 * sector: written buffered), what was in it zeroed, progress to the end
 * and at most once per percent; anything but a regular file refused. */
static uint64_t fill_calls, fill_last;

static void
fill_progress (void *arg, const char *what, uint64_t done, uint64_t total)
{
  assert_string_equal (what, "preallocate");
  assert_true (done > fill_last && done <= total);
  assert_ptr_equal (arg, &fill_calls);
  fill_last = done;
  fill_calls++;
}

static void
test_file_fill (void **state)
{
  char path[512];
  const uint64_t size = 128 * MiB + 512;
  unsigned char *buf = malloc (MiB);
  struct stat st;
  int fd;

  assert_non_null (buf);
  tl_path (path, sizeof path, "fill");
  assert_int_equal (tl_sparse_file (path, size), 0);
  /* Bytes already there become zeros too. */
  fd = open (path, O_WRONLY);
  assert_true (fd >= 0);
  memset (buf, 0xa5, 4096);
  assert_int_equal (pwrite (fd, buf, 4096, 5 * MiB), 4096);
  close (fd);
  assert_int_equal (stat (path, &st), 0);
  assert_true ((uint64_t) st.st_blocks * 512 < MiB);

  fill_calls = fill_last = 0;
  assert_int_equal (zv_dev_file_fill (path, size, fill_progress,
                                      &fill_calls), 0);
  assert_int_equal (fill_last, size);
  assert_true (fill_calls >= 64 && fill_calls <= 101);
  assert_int_equal (stat (path, &st), 0);
  assert_int_equal ((uint64_t) st.st_size, size);
  assert_true ((uint64_t) st.st_blocks * 512 >= size);
  fd = open (path, O_RDONLY);
  assert_true (fd >= 0);
  for (uint64_t off = 0; off < size; off += MiB) {
    size_t n = (size_t) ZV_MIN ((uint64_t) MiB, size - off);
    assert_int_equal (pread (fd, buf, n, (off_t) off), (ssize_t) n);
    assert_true (zv_is_zero (buf, n));
  }
  close (fd);
  /* No progress function: the same without reports. */
  assert_int_equal (zv_dev_file_fill (path, MiB, NULL, NULL), 0);

  assert_int_equal (zv_dev_file_fill ("/dev/null", MiB, NULL, NULL),
                    -EINVAL);
  /* A FIFO is refused, not opened (which would wait for a reader). */
  tl_path (path, sizeof path, "fifo");
  assert_int_equal (mkfifo (path, 0600), 0);
  assert_int_equal (zv_dev_file_fill (path, MiB, NULL, NULL), -EINVAL);
  unlink (path);
  assert_int_equal (zv_dev_file_fill (tl_path (path, sizeof path, "nofile"),
                                      MiB, NULL, NULL), -ENOENT);
  tl_path (path, sizeof path, "fill");
  unlink (path);
  free (buf);
}

/* ---- setup ------------------------------------------------------------- */

/* Scratch mounts a failed test left behind. */
static int
dev_unmount_leftovers (void)
{
  char dir[512];

  umount2 (tl_path (dir, sizeof dir, "tmpfs"), MNT_DETACH);
  umount2 (tl_path (dir, sizeof dir, "ramfs"), MNT_DETACH);
  return 0;
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_open_missing),
    tl_test (test_open_not_file),
    tl_test (test_lock_conflict),
    tl_test (test_size_sparse),
    tl_test (test_file_fill),
    tl_test (test_roundtrip_batch),
    tl_test (test_flush),
    tl_test (test_fault_injection),
    tl_test (test_async),
    tl_test (test_past_end),
    tl_test (test_misaligned_aborts),
    tl_test (test_direct_var_tmp),
    tl_test (test_tmpfs_and_ramfs),
    tl_test (test_threads),
    tl_test (test_waves),
    tl_test (test_no_uring_fallback),
    tl_test (test_thread_exit_ring),
    tl_test (test_io_during_exit),
    tl_test (test_blockdev),
    tl_test (test_loop_backing_lock),
  };

  return tl_main (tests, "dev", dev_unmount_leftovers);
}
