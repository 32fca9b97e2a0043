/*
 * testlib.h: the helpers the unit tests share, so each is written once:
 *
 *   units, checks   KiB/MiB/GiB, TL_GUID, TL_CHECK (a check off cmocka's
 *                   thread), tl_assert_same, tl_dies_with_abort, tl_skip
 *   scratch files   a scratch directory under /var/tmp, sparse files,
 *                   damage and hashes of files, tl_dev_open/tl_scratch_dev
 *   log capture     a log hook that keeps what the engine says, so tests
 *                   can assert on it and expected errors stay quiet
 *   data            a position-dependent pattern and a PRNG
 *   below the pool  tl_spa_t: devices, guid and allocator as zio, flat and
 *                   dmu need them; defer-list and space look-ups
 *   the pool        configuration, open, stats and volume I/O helpers for
 *                   the tests that go through core/zvol.h
 *   processes       tl_fork_thread, tl_jail_uring
 *   admin commands  a command line split into argv, its output collected
 *   main            tl_test (a test with tl_test_setup) and tl_main (the
 *                   group: scratch directory, log hook, ZV_TEST_FILTER)
 *
 * Header-only (static functions), so each test stays one .c file; it
 * includes <cmocka.h> itself.  Nothing here is thread-safe except the log
 * hook and TL_CHECK.
 */
#ifndef ZV_TESTLIB_H
#define ZV_TESTLIB_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <setjmp.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include <cmocka.h>

#include "zv_util.h"
#include "format.h"
#include "dev.h"
#include "alloc.h"
#include "zio.h"
#include "zvol.h"

/* Every helper is optional for a given test file. */
#define TL_FN static __attribute__ ((unused))

/* Under ThreadSanitizer (5-15x slower) the long single-threaded loops
 * run shorter: that build is there for the races. */
#if defined (__SANITIZE_THREAD__)
#define TL_TSAN 1
#elif defined (__has_feature)
#if __has_feature (thread_sanitizer)
#define TL_TSAN 1
#endif
#endif
#ifndef TL_TSAN
#define TL_TSAN 0
#endif
/* Under AddressSanitizer: timings of instrumented code mean little. */
#if defined (__SANITIZE_ADDRESS__)
#define TL_ASAN 1
#elif defined (__has_feature)
#if __has_feature (address_sanitizer)
#define TL_ASAN 1
#endif
#endif
#ifndef TL_ASAN
#define TL_ASAN 0
#endif

/* ---- units and checks ---- */

#define KiB 1024u
#define MiB (1ull << 20)
#define GiB (1ull << 30)

/* The pool guid of the tests that build pools by hand. */
#define TL_GUID 0x1234abcd5678ef01ull

/* An invariant checked off cmocka's thread (its asserts must not longjmp
 * across threads): say which and abort the binary. */
#define TL_CHECK(c) do {                                                \
    if (!(c)) {                                                         \
      fprintf (stderr, "check failed: %s (%s:%d)\n", #c, __FILE__,      \
               __LINE__);                                               \
      abort ();                                                         \
    }                                                                   \
  } while (0)

/* Fail unless got and want hold the same len bytes, naming the first
 * byte that differs by its offset plus 'base' ('what' says of what)
 * and, unless blksz is 0, the block of blksz bytes that offset is in. */
TL_FN void
tl_assert_same_blk (const void *got, const void *want, size_t len,
                    uint64_t base, const char *what, uint32_t blksz)
{
  const uint8_t *g = got, *w = want;
  char blk[64] = "";
  size_t i = 0;

  if (memcmp (g, w, len) == 0)
    return;
  while (g[i] == w[i])
    i++;
  if (blksz != 0 && blksz % 1024 == 0)
    snprintf (blk, sizeof blk, " (%uK block %" PRIu64 ")", blksz / 1024,
              (base + i) / blksz);
  else if (blksz != 0)
    snprintf (blk, sizeof blk, " (%u-byte block %" PRIu64 ")", blksz,
              (base + i) / blksz);
  fail_msg ("%s: byte %" PRIu64 "%s is 0x%02x, expected 0x%02x",
            what ? what : "content", base + i, blk, g[i], w[i]);
}

/* The same, naming the byte only. */
TL_FN void
tl_assert_same (const void *got, const void *want, size_t len, uint64_t base,
                const char *what)
{
  tl_assert_same_blk (got, want, len, base, what, 0);
}

/* Run fn(arg) in a child (stderr to /dev/null, for the assert's message);
 * true if it died of SIGABRT, as an engine assert makes it. */
TL_FN bool
tl_dies_with_abort (void (*fn) (void *), void *arg)
{
  pid_t pid;
  int status;

  fflush (NULL);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0) {
    int fd = open ("/dev/null", O_WRONLY | O_CLOEXEC);
    if (fd >= 0)
      dup2 (fd, 2);
    fn (arg);
    _exit (0);
  }
  assert_int_equal (waitpid (pid, &status, 0), pid);
  return WIFSIGNALED (status) && WTERMSIG (status) == SIGABRT;
}

/* Skip the running test, saying why: "skipped: REASON" in its log (the
 * suite's summary lists these lines). */
TL_FN void __attribute__ ((format (printf, 1, 2)))
tl_skip_say (const char *fmt, ...)
{
  char msg[512];
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  print_message ("skipped: %s\n", msg);
}
#define tl_skip(...) do { tl_skip_say (__VA_ARGS__); skip (); } while (0)

/* ---- scratch directory ---- */

static char tl_dir[256];

/* Make the scratch directory /var/tmp/zv-test-NAME.XXXXXX. */
TL_FN int
tl_dir_create (const char *name)
{
  snprintf (tl_dir, sizeof tl_dir, "/var/tmp/zv-test-%s.XXXXXX", name);
  return mkdtemp (tl_dir) ? 0 : -1;
}

TL_FN int
tl_rm_one (const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
  (void) sb; (void) flag; (void) ftw;
  return remove (p) == -1 ? -1 : 0;
}

/* Remove the scratch directory and everything in it.  It stays on the
 * directory's file system: a test that mounted something under it and
 * could not unmount it leaves that (and the directory) in place. */
TL_FN int
tl_dir_remove (void)
{
  if (tl_dir[0] == '\0')
    return 0;
  return nftw (tl_dir, tl_rm_one, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

/* Path of 'name' inside the scratch directory (a static slot per call
 * site would be fragile: the caller passes its buffer). */
TL_FN const char *
tl_path (char *buf, size_t len, const char *name)
{
  snprintf (buf, len, "%s/%s", tl_dir, name);
  return buf;
}

/* Create (or truncate) a sparse file of 'size' bytes.  0 or -errno. */
TL_FN int
tl_sparse_file (const char *path, uint64_t size)
{
  int fd = open (path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  int r = 0;

  if (fd < 0)
    return -errno;
  if (ftruncate (fd, (off_t) size) < 0)
    r = -errno;
  close (fd);
  return r;
}

/* A hash of a whole file (its apparent size), chained over 1 MiB
 * pieces with the engine's block checksum; 0 on error. */
TL_FN uint64_t
tl_hash_file (const char *path)
{
  size_t bufsz = 1u << 20;
  char *buf = malloc (bufsz);
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  uint64_t h = 0x6a09e667f3bcc908ull;
  zv_cksum_t ck;
  ssize_t n = -1;

  if (buf != NULL && fd >= 0)
    while ((n = read (fd, buf, bufsz)) > 0) {
      zv_cksum_compute (buf, (size_t) n, h, &ck);
      h = ck.zc_word[0] ^ ck.zc_word[1] ^ (uint64_t) n;
    }
  if (fd >= 0)
    close (fd);
  free (buf);
  return n == 0 ? h : 0;
}

/* Allocated bytes of a file (st_blocks), or -1. */
TL_FN int64_t
tl_file_allocated (const char *path)
{
  struct stat sb;

  if (stat (path, &sb) < 0)
    return -1;
  return (int64_t) sb.st_blocks * 512;
}

/* Write 'len' bytes at 'off' of a file, bypassing the engine (damage). */
TL_FN int
tl_file_pwrite (const char *path, const void *buf, size_t len, uint64_t off)
{
  int fd = open (path, O_RDWR | O_CLOEXEC);
  ssize_t n;

  if (fd < 0)
    return -errno;
  n = pwrite (fd, buf, len, (off_t) off);
  if (n == (ssize_t) len && fsync (fd) < 0)
    n = -1;
  close (fd);
  return n == (ssize_t) len ? 0 : -EIO;
}

TL_FN int
tl_file_pread (const char *path, void *buf, size_t len, uint64_t off)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  if (fd < 0)
    return -errno;
  n = pread (fd, buf, len, (off_t) off);
  close (fd);
  return n == (ssize_t) len ? 0 : -EIO;
}

/* Invert one byte of a file at 'off'. */
TL_FN int
tl_file_flip (const char *path, uint64_t off)
{
  uint8_t b;
  int r = tl_file_pread (path, &b, 1, off);

  if (r < 0)
    return r;
  b ^= 0xff;
  return tl_file_pwrite (path, &b, 1, off);
}

/* Open a device that must open; its error message is printed if not. */
TL_FN zv_dev_t *
tl_dev_open (const char *path)
{
  zv_dev_t *dev = NULL;
  char err[256];
  int r = zv_dev_open (path, &dev, err, sizeof err);

  if (r != 0)
    print_error ("zv_dev_open: %d %s\n", r, err);
  assert_int_equal (r, 0);
  assert_non_null (dev);
  return dev;
}

/* A new sparse file 'name' of 'size' bytes in the scratch directory,
 * opened as a device; its path in path[len]. */
TL_FN zv_dev_t *
tl_scratch_dev (char *path, size_t len, const char *name, uint64_t size)
{
  tl_path (path, len, name);
  assert_int_equal (tl_sparse_file (path, size), 0);
  return tl_dev_open (path);
}

/* One write to a device, as the engine issues them: a batch of one. */
TL_FN int
tl_dev_write (zv_dev_t *dev, const void *buf, uint64_t off, uint32_t len)
{
  zv_dev_io_t io = { .di_dev = dev, .di_op = ZV_DEV_WRITE,
                     .di_buf = (void *) (uintptr_t) buf,
                     .di_offset = off, .di_len = len };

  return zv_dev_io_batch (&io, 1);
}

/* ---- log capture ---- */

static pthread_mutex_t tl_log_mtx = PTHREAD_MUTEX_INITIALIZER;
static char tl_log_buf[1 << 16];
static size_t tl_log_len;
static unsigned tl_log_nerrors;      /* ZV_LOG_ERROR messages */
static unsigned tl_log_nwarnings;    /* ZV_LOG_WARN messages */
static bool tl_log_echo = true;      /* echo errors to stderr */

/* The hook: keep every message (newline-separated); echo errors and
 * warnings unless a test expects them. */
TL_FN void
tl_log_hook (enum zv_log_level level, const char *msg)
{
  pthread_mutex_lock (&tl_log_mtx);
  size_t n = strlen (msg);
  if (tl_log_len + n + 2 > sizeof tl_log_buf)
    tl_log_len = 0;                     /* keep the recent messages */
  if (n + 2 <= sizeof tl_log_buf) {
    memcpy (tl_log_buf + tl_log_len, msg, n);
    tl_log_len += n;
    tl_log_buf[tl_log_len++] = '\n';
    tl_log_buf[tl_log_len] = '\0';
  }
  if (level >= ZV_LOG_ERROR)
    tl_log_nerrors++;
  else if (level == ZV_LOG_WARN)
    tl_log_nwarnings++;
  if (level >= ZV_LOG_WARN && (tl_log_echo || getenv ("ZV_TEST_VERBOSE")))
    fprintf (stderr, "  [zv %s] %s\n",
             level == ZV_LOG_WARN ? "warning" : "error", msg);
  else if (getenv ("ZV_TEST_VERBOSE"))
    fprintf (stderr, "  [zv] %s\n", msg);
  pthread_mutex_unlock (&tl_log_mtx);
}

/* Start capturing afresh; 'expect_errors' stops the echo to stderr. */
TL_FN void
tl_log_reset (bool expect_errors)
{
  pthread_mutex_lock (&tl_log_mtx);
  tl_log_len = 0;
  tl_log_buf[0] = '\0';
  tl_log_nerrors = 0;
  tl_log_nwarnings = 0;
  tl_log_echo = !expect_errors;
  pthread_mutex_unlock (&tl_log_mtx);
}

/* Group setup: a scratch directory named after the test, and the
 * engine's messages captured (tl_log_has). */
TL_FN int
tl_group_begin (const char *name)
{
  if (tl_dir_create (name) < 0)
    return -1;
  zv_set_log (tl_log_hook);
  return 0;
}

/* Group teardown: the log hook back to stderr, the directory removed. */
TL_FN int
tl_group_teardown (void **state)
{
  (void) state;
  zv_set_log (NULL);
  return tl_dir_remove ();
}

/* Per-test setup: a test that failed while expecting errors must not
 * silence the next one. */
TL_FN int
tl_test_setup (void **state)
{
  (void) state;
  tl_log_reset (false);
  return 0;
}

/* Did any message since the reset contain 'needle'? */
TL_FN bool
tl_log_has (const char *needle)
{
  bool r;

  pthread_mutex_lock (&tl_log_mtx);
  r = strstr (tl_log_buf, needle) != NULL;
  pthread_mutex_unlock (&tl_log_mtx);
  return r;
}

/* How many errors were logged since the reset (kept or not). */
TL_FN unsigned
tl_log_errors (void)
{
  unsigned n;

  pthread_mutex_lock (&tl_log_mtx);
  n = tl_log_nerrors;
  pthread_mutex_unlock (&tl_log_mtx);
  return n;
}

/* How many warnings were logged since the reset. */
TL_FN unsigned
tl_log_warnings (void)
{
  unsigned n;

  pthread_mutex_lock (&tl_log_mtx);
  n = tl_log_nwarnings;
  pthread_mutex_unlock (&tl_log_mtx);
  return n;
}

/* ---- data pattern ---- */

/* 64-bit mix (splitmix64 finaliser). */
TL_FN inline uint64_t
tl_mix (uint64_t x)
{
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* The byte at volume offset 'off' of pattern 'seed'.  Never zero (the
 * low bit is set), so a written block never turns into a hole. */
TL_FN inline uint8_t
tl_pat_byte (uint64_t seed, uint64_t off)
{
  return (uint8_t) (tl_mix (seed * 0x100000001b3ull ^ (off >> 3))
                    >> ((off & 7) * 8)) | 1;
}

/* Fill buf as the bytes [off, off+len) of pattern 'seed' (one mix per
 * 8 bytes: sanitizers make per-byte work slow). */
TL_FN void
tl_pat_fill (void *buf, uint64_t off, size_t len, uint64_t seed)
{
  uint8_t *p = buf;
  size_t i = 0;

  while (i < len) {
    uint64_t pos = off + i;
    uint64_t w = tl_mix (seed * 0x100000001b3ull ^ (pos >> 3));
    for (unsigned b = pos & 7; b < 8 && i < len; b++, i++)
      p[i] = (uint8_t) (w >> (b * 8)) | 1;
  }
}

/* Offset of the first byte that differs from pattern 'seed', or -1. */
TL_FN int64_t
tl_pat_check (const void *buf, uint64_t off, size_t len, uint64_t seed)
{
  const uint8_t *p = buf;
  uint8_t tmp[4096];

  for (size_t done = 0; done < len; done += sizeof tmp) {
    size_t n = ZV_MIN (sizeof tmp, len - done);
    tl_pat_fill (tmp, off + done, n, seed);
    if (memcmp (tmp, p + done, n) != 0)
      for (size_t i = 0; i < n; i++)
        if (tmp[i] != p[done + i])
          return (int64_t) (off + done + i);
  }
  return -1;
}

/*
 * Fork a child that runs fn(arg) on a thread of its own (as a server's
 * connection thread would) and dies without cleaning up, as a crash
 * would: exit status 8 when fn returns, 7 if the thread cannot start.
 * fds is a pipe the child reports on: the child closes the read end, the
 * parent the write end.  Returns the child's pid, or -1.
 */
TL_FN pid_t
tl_fork_thread (void *(*fn) (void *), void *arg, const int fds[2])
{
  pid_t pid;

  fflush (NULL);
  pid = fork ();
  if (pid == 0) {
    pthread_t th;
    close (fds[0]);
    if (pthread_create (&th, NULL, fn, arg) != 0)
      _exit (7);
    pthread_join (th, NULL);
    _exit (8);
  }
  close (fds[1]);
  return pid;
}

/* A small, fast PRNG for test decisions (xorshift64*). */
TL_FN inline uint64_t
tl_rand (uint64_t *s)
{
  uint64_t x = *s;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *s = x;
  return x * 0x2545f4914f6cdd1dull;
}

/* Fill buf with tl_rand() output: noise, zero bytes included. */
TL_FN void
tl_fill_rand (void *buf, size_t len, uint64_t *s)
{
  uint8_t *p = buf;

  for (size_t i = 0; i < len; i += 8) {
    uint64_t v = tl_rand (s);
    memcpy (p + i, &v, ZV_MIN (8, len - i));
  }
}

/* Seed from the environment (ZV_TEST_SEED) or the clock; printed so a
 * failure can be replayed. */
TL_FN uint64_t
tl_seed (const char *what)
{
  const char *e = getenv ("ZV_TEST_SEED");
  uint64_t s = e ? strtoull (e, NULL, 0) : (zv_now_ns () ^ (uint64_t) getpid ());

  if (s == 0)
    s = 1;
  fprintf (stderr, "  %s: seed %llu (set ZV_TEST_SEED to replay)\n", what,
           (unsigned long long) s);
  return s;
}

/* Make io_uring_setup fail with ENOSYS on the calling thread only (as in
 * a seccomp sandbox), so the engine's pread/pwrite fallback runs there.
 * Returns 0, or -1 where seccomp is not available (the caller skips). */
TL_FN int
tl_jail_uring (void)
{
  struct sock_filter filt[] = {
    BPF_STMT (BPF_LD | BPF_W | BPF_ABS, offsetof (struct seccomp_data, nr)),
    BPF_JUMP (BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
    BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
    BPF_STMT (BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = { .len = sizeof filt / sizeof filt[0],
                             .filter = filt };

  /* Without TSYNC the filter binds this thread only. */
  if (prctl (PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == -1
      || prctl (PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == -1)
    return -1;
  return 0;
}

/* ---- below the pool: the I/O context of zio, flat and dmu ---- */

/* What a pool gives its objects, built by hand: devices, guid, data
 * areas and an allocator over them. */
typedef struct tl_spa {
  zv_spa_t ts_spa;
  char ts_path[ZV_MAX_DEVS][512];
} tl_spa_t;

/*
 * ndevs new sparse files of devsize bytes, NAME-0, NAME-1, ... in the
 * scratch directory, opened; the pool guid TL_GUID; each device's data
 * area (between its labels) given to a new allocator.  Nothing is
 * written: the labels stay zeros.
 */
TL_FN void
tl_spa_create (tl_spa_t *ts, const char *name, unsigned ndevs,
               uint64_t devsize)
{
  uint64_t start[ZV_MAX_DEVS], end[ZV_MAX_DEVS];

  assert_true (ndevs >= 1 && ndevs <= ZV_MAX_DEVS);
  memset (ts, 0, sizeof *ts);
  for (unsigned d = 0; d < ndevs; d++) {
    char file[128];
    zv_dev_t *dev;

    snprintf (file, sizeof file, "%s-%u", name, d);
    dev = tl_scratch_dev (ts->ts_path[d], sizeof ts->ts_path[d], file,
                          devsize);
    start[d] = zv_data_start ();
    end[d] = zv_data_end (zv_dev_size (dev));
    ts->ts_spa.spa_devs[d] = dev;
    ts->ts_spa.spa_data_end[d] = end[d];
  }
  ts->ts_spa.spa_ndevs = ndevs;
  ts->ts_spa.spa_guid = TL_GUID;
  ts->ts_spa.spa_alloc = zv_alloc_create (ndevs, start, end);
  assert_non_null (ts->ts_spa.spa_alloc);
}

/* Close the devices, drop the allocator and remove the files. */
TL_FN void
tl_spa_destroy (tl_spa_t *ts)
{
  zv_zio_pending_wait_all (&ts->ts_spa);
  zv_alloc_destroy (ts->ts_spa.spa_alloc);
  for (unsigned d = 0; d < ts->ts_spa.spa_ndevs; d++) {
    zv_dev_close (ts->ts_spa.spa_devs[d]);
    unlink (ts->ts_path[d]);
  }
  memset (ts, 0, sizeof *ts);
}

typedef struct tl_dfind {
  uint64_t df_dva;
  bool df_found;
} tl_dfind_t;

TL_FN void
tl_dfind_cb (void *arg, uint64_t dva, uint32_t size)
{
  tl_dfind_t *d = arg;

  /* An entry may be an extent of several blocks (merged when written). */
  d->df_found |= ZV_DVA_VDEV (dva) == ZV_DVA_VDEV (d->df_dva)
    && dva <= d->df_dva && d->df_dva < dva + size;
}

/* Is dva on the defer list of txg (inside one of its extents)? */
TL_FN bool
tl_alloc_deferred (zv_alloc_t *a, uint64_t txg, uint64_t dva)
{
  tl_dfind_t d = { .df_dva = dva };

  zv_alloc_defer_foreach (a, txg, tl_dfind_cb, &d);
  return d.df_found;
}

static void
tl_dcount_cb (void *arg, uint64_t dva, uint32_t size)
{
  (void) dva;
  (void) size;
  (*(size_t *) arg)++;
}

/* How many deferred frees txg has, counted as the pool's sync lists
 * them. */
TL_FN size_t
tl_alloc_defer_count (zv_alloc_t *a, uint64_t txg)
{
  size_t n = 0;

  zv_alloc_defer_foreach (a, txg, tl_dcount_cb, &n);
  return n;
}

/* The allocator's space figures. */
TL_FN zv_alloc_space_t
tl_alloc_space (zv_alloc_t *a)
{
  zv_alloc_space_t sp;

  zv_alloc_get_space (a, &sp);
  return sp;
}

/* ---- the pool, through core/zvol.h ---- */

/*
 * A pool and its volume opened and closed as one, for the tests of the
 * layers below the public split: tl_pool_open opens the pool and its
 * only volume (which replays the volume's intent log), tl_vol finds that
 * volume again, tl_pool_close closes both.  Tests of the split itself
 * call zvol_open / zvol_close directly.
 */
#define TL_MAX_POOLS 16

static struct {
  pthread_mutex_t to_lock;
  zvol_pool_t *to_pool[TL_MAX_POOLS];
  zvol_t *to_vol[TL_MAX_POOLS];
} tl_open_vols = { .to_lock = PTHREAD_MUTEX_INITIALIZER };

/* The volume configuration tl_pool_open uses (a test may change it). */
static zvol_config_t tl_volcfg = {
  .vc_sync = ZVOL_SYNC_STANDARD, .vc_logbias = ZVOL_LOGBIAS_LATENCY,
};

/* zvol_pool_open, then zvol_open of its volume: 0 or the first error
 * (nothing stays open then). */
TL_FN int
tl_pool_open (const zvol_pool_config_t *pc, zvol_pool_t **pp)
{
  zvol_t *zv;
  int r = zvol_pool_open (pc, pp);

  if (r < 0)
    return r;
  r = zvol_open (*pp, NULL, &tl_volcfg, &zv);
  if (r < 0) {
    /* (A replay cut short may leave the pool suspended: its close then
     * fails too, and releases it all the same.) */
    (void) zvol_pool_close (*pp);
    *pp = NULL;
    return r;
  }
  pthread_mutex_lock (&tl_open_vols.to_lock);
  for (unsigned i = 0; i < TL_MAX_POOLS; i++)
    if (tl_open_vols.to_pool[i] == NULL) {
      tl_open_vols.to_pool[i] = *pp;
      tl_open_vols.to_vol[i] = zv;
      pthread_mutex_unlock (&tl_open_vols.to_lock);
      return 0;
    }
  abort ();                     /* more pools open than a test needs */
}

/* The volume tl_pool_open opened on p, or NULL. */
TL_FN zvol_t *
tl_vol_find (zvol_pool_t *p)
{
  zvol_t *zv = NULL;

  pthread_mutex_lock (&tl_open_vols.to_lock);
  for (unsigned i = 0; i < TL_MAX_POOLS; i++)
    if (tl_open_vols.to_pool[i] == p)
      zv = tl_open_vols.to_vol[i];
  pthread_mutex_unlock (&tl_open_vols.to_lock);
  return zv;
}

/* The same, for a pool that must have been opened with tl_pool_open. */
TL_FN zvol_t *
tl_vol (zvol_pool_t *p)
{
  zvol_t *zv = tl_vol_find (p);

  if (zv == NULL)
    abort ();
  return zv;
}

/* zvol_close, then zvol_pool_close: the first error. */
TL_FN int
tl_pool_close (zvol_pool_t *p)
{
  zvol_t *zv = tl_vol (p);
  int r, r2;

  pthread_mutex_lock (&tl_open_vols.to_lock);
  for (unsigned i = 0; i < TL_MAX_POOLS; i++)
    if (tl_open_vols.to_pool[i] == p)
      tl_open_vols.to_pool[i] = NULL;
  pthread_mutex_unlock (&tl_open_vols.to_lock);
  r = zvol_close (zv);
  r2 = zvol_pool_close (p);
  return r < 0 ? r : r2;
}

/* A configuration over n device paths with an 8 MiB cache. */
TL_FN void
tl_pool_cfg (zvol_pool_config_t *pc, const char *const *devs, unsigned n,
             uint64_t volsize, bool create)
{
  assert_true (n <= ZVOL_MAX_DEVS);
  zvol_pool_config_init (pc);
  for (unsigned i = 0; i < n; i++)
    pc->pc_devices[i] = devs[i];
  pc->pc_ndevices = n;
  pc->pc_create = create;
  pc->pc_volsize = volsize;
  pc->pc_cache_size = 8 * MiB;
}

/* Open a pool that must open. */
TL_FN zvol_pool_t *
tl_pool_open_ok (const zvol_pool_config_t *pc)
{
  zvol_pool_t *p = NULL;

  assert_int_equal (tl_pool_open (pc, &p), 0);
  assert_non_null (p);
  return p;
}

/* Open a pool a killed process left: its io_uring may hold the devices
 * for a while after it died, so -EBUSY is retried for up to 5 s (quietly:
 * the log capture starts afresh, expecting errors).  *busy_ns (unless
 * NULL) gets how long the devices stayed busy (from the first attempt to
 * the start of the last one).  The capture is reset after, unless
 * keep_log: then the caller can look at what the import said (and resets
 * it itself).  Returns tl_pool_open's last result. */
TL_FN int
tl_pool_open_retry_ex (const zvol_pool_config_t *pc, zvol_pool_t **pp,
                       uint64_t *busy_ns, bool keep_log)
{
  uint64_t t0 = zv_now_ns (), t1 = t0;
  int r;

  tl_log_reset (true);
  *pp = NULL;
  while ((r = tl_pool_open (pc, pp)) == -EBUSY
         && zv_now_ns () - t0 < 5000000000ull) {
    struct timespec d = { 0, 2000000 };
    nanosleep (&d, NULL);
    t1 = zv_now_ns ();
  }
  if (!keep_log)
    tl_log_reset (false);
  if (busy_ns != NULL)
    *busy_ns = t1 - t0;
  return r;
}

/* The same, neither timed nor keeping the log. */
TL_FN int
tl_pool_open_retry (const zvol_pool_config_t *pc, zvol_pool_t **pp)
{
  return tl_pool_open_retry_ex (pc, pp, NULL, false);
}

/* The stats table as the kstat file shows it (the caller frees it): the
 * pool's, and its volume's when tl_pool_open opened it. */
TL_FN char *
tl_pool_stats (zvol_pool_t *p)
{
  char *text = zvol_format_stats (p, tl_vol_find (p));

  assert_non_null (text);
  return text;
}

/* Does the pool's stats text contain needle? */
TL_FN bool
tl_pool_stats_has (zvol_pool_t *p, const char *needle)
{
  char *text = tl_pool_stats (p);
  bool r = strstr (text, needle) != NULL;

  free (text);
  return r;
}

/* The value text of the stats line "NAME VALUE" (in text), or NULL. */
TL_FN const char *
tl_stats_find (const char *text, const char *name)
{
  size_t nl = strlen (name);

  for (const char *line = text; line != NULL && *line; ) {
    const char *end = strchr (line, '\n');
    if (strncmp (line, name, nl) == 0 && line[nl] == ' ')
      return line + nl + 1;
    line = end ? end + 1 : NULL;
  }
  return NULL;
}

/* One value of the pool's stats; fails the test if it is missing. */
TL_FN double
tl_pool_stat (zvol_pool_t *p, const char *name)
{
  char *text = tl_pool_stats (p);
  const char *v = tl_stats_find (text, name);
  double d = v ? strtod (v, NULL) : 0;

  free (text);
  if (v == NULL)
    fail_msg ("stat %s is missing", name);
  return d;
}

/* The same for an integer stat (all 64 bits). */
TL_FN uint64_t
tl_pool_stat_u64 (zvol_pool_t *p, const char *name)
{
  char *text = tl_pool_stats (p);
  const char *v = tl_stats_find (text, name);
  uint64_t u = v ? strtoull (v, NULL, 10) : 0;

  free (text);
  if (v == NULL)
    fail_msg ("stat %s is missing", name);
  return u;
}

/* Write pattern 'seed' over [off, off+len) of the volume with 'flags';
 * into shadow + off too, unless shadow is NULL. */
TL_FN void
tl_vol_write (zvol_t *zv, uint8_t *shadow, uint64_t off, uint32_t len,
              uint64_t seed, unsigned flags)
{
  uint8_t *buf = shadow ? shadow + off : malloc (len ? len : 1);

  assert_non_null (buf);
  tl_pat_fill (buf, off, len, seed);
  assert_int_equal (zvol_write (zv, buf, off, len, flags), 0);
  if (shadow == NULL)
    free (buf);
}

/* [off, off+len) of the volume must read as pattern 'seed'. */
TL_FN void
tl_vol_check (zvol_t *zv, uint64_t off, uint32_t len, uint64_t seed)
{
  uint8_t *buf = malloc (len ? len : 1);
  int64_t bad;

  assert_non_null (buf);
  assert_int_equal (zvol_read (zv, buf, off, len), 0);
  bad = tl_pat_check (buf, off, len, seed);
  free (buf);
  if (bad >= 0)
    fail_msg ("volume byte %" PRId64 " is not pattern %" PRIu64, bad, seed);
}

/* [off, off+len) of the volume must read as shadow + off; a difference
 * is reported with its block of blksz bytes too, unless blksz is 0. */
TL_FN void
tl_vol_check_shadow_blk (zvol_t *zv, const uint8_t *shadow, uint64_t off,
                         uint32_t len, uint32_t blksz)
{
  uint8_t *buf = malloc (len ? len : 1);

  assert_non_null (buf);
  memset (buf, 0x5a, len);
  assert_int_equal (zvol_read (zv, buf, off, len), 0);
  tl_assert_same_blk (buf, shadow + off, len, off, "volume", blksz);
  free (buf);
}

/* The same, naming the byte only. */
TL_FN void
tl_vol_check_shadow (zvol_t *zv, const uint8_t *shadow, uint64_t off,
                     uint32_t len)
{
  tl_vol_check_shadow_blk (zv, shadow, off, len, 0);
}

/* ---- datasets by name: several volumes and their snapshots ---- */

/* Open volume or snapshot 'name' ("VOL" or "VOL@SNAP") of the pool. */
TL_FN zvol_t *
tl_ds_open (zvol_pool_t *p, const char *name)
{
  zvol_t *zv = NULL;

  assert_int_equal (zvol_open (p, name, NULL, &zv), 0);
  return zv;
}

/* Open 'name', write pattern 'seed' over [off, off+len), close. */
TL_FN void
tl_ds_write (zvol_pool_t *p, const char *name, uint64_t off, uint32_t len,
             uint64_t seed)
{
  zvol_t *zv = tl_ds_open (p, name);

  tl_vol_write (zv, NULL, off, len, seed, 0);
  assert_int_equal (zvol_close (zv), 0);
}

/* Open 'name': [off, off+len) must read as pattern 'seed'. */
TL_FN void
tl_ds_check (zvol_pool_t *p, const char *name, uint64_t off, uint32_t len,
             uint64_t seed)
{
  zvol_t *zv = tl_ds_open (p, name);

  tl_vol_check (zv, off, len, seed);
  assert_int_equal (zvol_close (zv), 0);
}

/* The listing's row of 'name' (volumes and snapshots) into *vi (unless
 * NULL): false when it is not listed. */
TL_FN bool
tl_ds_find (zvol_pool_t *p, const char *name, zvol_volume_info_t *vi)
{
  const unsigned kinds = ZVOL_LIST_VOLUMES | ZVOL_LIST_SNAPSHOTS;
  size_t n = zvol_dataset_list (p, kinds, NULL, 0), m;
  zvol_volume_info_t *all = calloc (n ? n : 1, sizeof *all);
  bool found = false;

  assert_non_null (all);
  m = zvol_dataset_list (p, kinds, all, n);
  for (size_t i = 0; i < m && i < n && !found; i++)
    if (strcmp (all[i].vi_name, name) == 0) {
      found = true;
      if (vi)
        *vi = all[i];
    }
  free (all);
  return found;
}

/* The listing's row of 'name', which must be listed. */
TL_FN zvol_volume_info_t
tl_ds_info (zvol_pool_t *p, const char *name)
{
  zvol_volume_info_t vi;

  if (!tl_ds_find (p, name, &vi))
    fail_msg ("%s is not listed", name);
  return vi;
}

/* Import the one-device pool; with 'full', the full walk: every tree
 * read, every block owned once. */
TL_FN zvol_pool_t *
tl_import (const char *dev, bool full)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  pc.pc_verify_full = full;
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  return p;
}

TL_FN void
tl_check_problem (void *arg, const zvol_check_problem_t *cp)
{
  (void) arg;
  fprintf (stderr, "  check: %s\n", cp->cp_msg);
}

/* The checker (zvol_pool_check) finds nothing on the exported one-device
 * pool: every block read and verified, each owned once, no space leaked;
 * each problem it finds is printed.  Returns its report. */
TL_FN zvol_check_report_t
tl_check_clean (const char *dev)
{
  zvol_pool_config_t pc;
  zvol_check_report_t rep = { .cr_problem = tl_check_problem };

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  assert_int_equal (zvol_pool_check (&pc, &rep), 0);
  if (rep.cr_problems != 0)
    fail_msg ("the checker found %" PRIu64 " problems (%" PRIu64 " leaked, "
              "%" PRIu64 " doubly allocated)", rep.cr_problems, rep.cr_leaked,
              rep.cr_double);
  return rep;
}

/* ---- admin commands ---- */

/* A command line of words separated by single spaces, split in place
 * into argv (at most max - 1 words, NULL-terminated): the count. */
TL_FN int
tl_argv_split (char *line, char **argv, int max)
{
  int n = 0;

  for (char *save = NULL, *w = strtok_r (line, " ", &save);
       w != NULL && n < max - 1; w = strtok_r (NULL, " ", &save))
    argv[n++] = w;
  argv[n] = NULL;
  return n;
}

/* What a command printed, and its exit code. */
typedef struct tl_cmd_out {
  int co_code;
  char *co_out, *co_err;        /* free() both */
  size_t co_outlen, co_errlen;
} tl_cmd_out_t;

/* Streams to collect a command's output in (tl_cmd_end closes them). */
TL_FN void
tl_cmd_begin (tl_cmd_out_t *co, FILE **out, FILE **err)
{
  memset (co, 0, sizeof *co);
  *out = open_memstream (&co->co_out, &co->co_outlen);
  *err = open_memstream (&co->co_err, &co->co_errlen);
  assert_non_null (*out);
  assert_non_null (*err);
}

TL_FN void
tl_cmd_end (tl_cmd_out_t *co, FILE *out, FILE *err)
{
  assert_int_equal (fclose (out), 0);
  assert_int_equal (fclose (err), 0);
}

TL_FN void
tl_cmd_free (tl_cmd_out_t *co)
{
  free (co->co_out);
  free (co->co_err);
  memset (co, 0, sizeof *co);
}

/* ---- main ---- */

/* A test with the per-test setup every test should have. */
#define tl_test(fn) cmocka_unit_test_setup (fn, tl_test_setup)

static const char *tl_group_name;       /* scratch directory; NULL: none */
static int (*tl_group_fini) (void);     /* extra group teardown, or NULL */

/* Group setup: the log hook, and a scratch directory unless the group
 * needs no files. */
TL_FN int
tl_group_setup (void **state)
{
  (void) state;
  if (tl_group_name == NULL) {
    zv_set_log (tl_log_hook);
    return 0;
  }
  return tl_group_begin (tl_group_name);
}

/* Group teardown: the file's own (tl_group_fini) first, then testlib's. */
TL_FN int
tl_group_end (void **state)
{
  int r = tl_group_fini ? tl_group_fini () : 0;

  if (tl_group_teardown (state) < 0)
    r = -1;
  return r;
}

TL_FN int
tl_main_run (const struct CMUnitTest *tests, size_t n, const char *dir,
             int (*fini) (void))
{
  const char *filter = getenv ("ZV_TEST_FILTER");

  /* Whole lines, in order with stderr's, in the test's log (cmocka's
   * final report goes to stderr, its per-test lines to stdout). */
  setvbuf (stdout, NULL, _IOLBF, 0);
  tl_group_name = dir;
  tl_group_fini = fini;
  if (filter && *filter)
    cmocka_set_test_filter (filter);
  return _cmocka_run_group_tests ("tests", tests, n, tl_group_setup,
                                  tl_group_end);
}

/*
 * The body of main: run the array 'tests' as one group, with the log hook
 * installed and, unless dir is NULL, the scratch directory
 * /var/tmp/zv-test-DIR.XXXXXX (removed at the end); fini (or NULL) runs
 * before testlib's group teardown.  ZV_TEST_FILTER (cmocka's pattern)
 * runs only the tests whose names match.
 */
#define tl_main(tests, dir, fini) \
  tl_main_run ((tests), sizeof (tests) / sizeof ((tests)[0]), (dir), (fini))

#endif /* ZV_TESTLIB_H */
