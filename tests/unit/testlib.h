/*
 * testlib.h: small helpers shared by the unit tests that work on files
 * (test_dev.c, test_label.c, test_dmu.c, test_pool.c, test_zvol.c,
 * test_zil.c): a scratch directory under /var/tmp, sparse device files, a
 * log hook that keeps what the engine says so tests can assert on it, a
 * position-dependent data pattern and a PRNG.
 *
 * Header-only (static functions), so each test stays one .c file; include
 * it after <cmocka.h>.  Nothing here is thread-safe except the log hook.
 */
#ifndef ZV_TESTLIB_H
#define ZV_TESTLIB_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stddef.h>
#include <unistd.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "zv_util.h"
#include "dev.h"

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
static bool tl_log_echo = true;      /* echo errors to stderr */

/* The hook: keep every message (newline-separated); echo errors unless a
 * test expects them. */
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
  if (level >= ZV_LOG_ERROR && (tl_log_echo || getenv ("ZV_TEST_VERBOSE")))
    fprintf (stderr, "  [zv error] %s\n", msg);
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

#endif /* ZV_TESTLIB_H */
