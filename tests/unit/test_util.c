/*
 * test_util.c: unit tests for core/zv_util.c: the block checksum, the zero
 * test, aligned buffers, the power-of-two rounding and min / max macros,
 * the log hook and the two assertion tiers.
 *
 * Theory.  Each helper is small, but every other module trusts it: a
 * checksum that ignores its seed would let a block copied to another place
 * verify; a zero test that misses a byte at a word boundary would turn
 * data into a hole.  So the tests go byte by byte (every position, every
 * alignment of the start) rather than sampling.  No files; the buffer
 * cache test runs threads, the assertion tests fork a child per failing
 * assertion (it must die of SIGABRT).
 */
#include <config.h>

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "zv_util.h"
#include "testlib.h"

/* ---- checksum -------------------------------------------------------- */

/* Same input and seed: same checksum, every time, from any buffer. */
static void
test_cksum_deterministic (void **state)
{
  static const size_t lens[] = { 0, 1, 7, 64, 4096, 16384 };
  (void) state;

  for (size_t k = 0; k < sizeof lens / sizeof lens[0]; k++) {
    size_t len = lens[k];
    unsigned char *a = malloc (len + 1), *b = malloc (len + 1);
    uint64_t rnd = 42 + len;
    zv_cksum_t ca, cb;

    assert_non_null (a);
    assert_non_null (b);
    tl_fill_rand (a, len, &rnd);
    memcpy (b, a, len);
    zv_cksum_compute (a, len, 7, &ca);
    zv_cksum_compute (b, len, 7, &cb);
    assert_true (zv_cksum_equal (&ca, &cb));
    assert_memory_equal (&ca, &cb, sizeof ca);
    /* And again from the same buffer. */
    zv_cksum_compute (a, len, 7, &cb);
    assert_true (zv_cksum_equal (&ca, &cb));
    free (a);
    free (b);
  }
}

/* The seed (a block's place, a pool guid) changes the checksum. */
static void
test_cksum_seed (void **state)
{
  unsigned char buf[4096];
  uint64_t rnd = 1;
  zv_cksum_t c0, c1;
  (void) state;

  tl_fill_rand (buf, sizeof buf, &rnd);
  zv_cksum_compute (buf, sizeof buf, 0, &c0);
  for (uint64_t seed = 1; seed < 64; seed++) {
    zv_cksum_compute (buf, sizeof buf, seed, &c1);
    assert_false (zv_cksum_equal (&c0, &c1));
  }
  /* High bits of the seed count too (offsets of large devices). */
  zv_cksum_compute (buf, sizeof buf, 1ull << 63, &c1);
  assert_false (zv_cksum_equal (&c0, &c1));
  zv_cksum_compute (buf, sizeof buf, 1ull << 40, &c1);
  assert_false (zv_cksum_equal (&c0, &c1));
  /* Even an all-zero block: zero seed and another seed differ. */
  memset (buf, 0, sizeof buf);
  zv_cksum_compute (buf, sizeof buf, 0, &c0);
  zv_cksum_compute (buf, sizeof buf, 4096, &c1);
  assert_false (zv_cksum_equal (&c0, &c1));
}

/* Any single bit flip anywhere changes it, in both words in practice. */
static void
test_cksum_bitflip (void **state)
{
  unsigned char buf[256];
  zv_cksum_t ref, c;
  unsigned both_words = 0, total = 0;
  uint64_t rnd = 99;
  (void) state;

  tl_fill_rand (buf, sizeof buf, &rnd);
  zv_cksum_compute (buf, sizeof buf, 12345, &ref);
  for (size_t i = 0; i < sizeof buf; i++) {
    for (unsigned bit = 0; bit < 8; bit++) {
      buf[i] ^= (unsigned char) (1u << bit);
      zv_cksum_compute (buf, sizeof buf, 12345, &c);
      assert_false (zv_cksum_equal (&ref, &c));
      if (c.zc_word[0] != ref.zc_word[0] && c.zc_word[1] != ref.zc_word[1])
        both_words++;
      total++;
      buf[i] ^= (unsigned char) (1u << bit);
    }
  }
  /* A 128-bit hash: both halves depend on the input (not a 64-bit one
   * padded with a constant). */
  assert_int_equal (both_words, total);
  /* Restored buffer: back to the reference. */
  zv_cksum_compute (buf, sizeof buf, 12345, &c);
  assert_true (zv_cksum_equal (&ref, &c));

  /* A flip in a large (16 KiB) block, near the end. */
  unsigned char *big = malloc (16384);
  assert_non_null (big);
  tl_fill_rand (big, 16384, &rnd);
  zv_cksum_compute (big, 16384, 1, &ref);
  big[16383] ^= 0x80;
  zv_cksum_compute (big, 16384, 1, &c);
  assert_false (zv_cksum_equal (&ref, &c));
  free (big);
}

/* The length is part of the input: a trailing zero byte changes it. */
static void
test_cksum_length (void **state)
{
  unsigned char buf[65] = { 0 };
  zv_cksum_t a, b;
  (void) state;

  zv_cksum_compute (buf, 64, 3, &a);
  zv_cksum_compute (buf, 65, 3, &b);
  assert_false (zv_cksum_equal (&a, &b));
}

/* zv_cksum_equal compares both words. */
static void
test_cksum_equal (void **state)
{
  zv_cksum_t a = { { 1, 2 } }, b = { { 1, 2 } };
  (void) state;

  assert_true (zv_cksum_equal (&a, &b));
  b.zc_word[1] = 3;
  assert_false (zv_cksum_equal (&a, &b));
  b.zc_word[1] = 2;
  b.zc_word[0] = 0;
  assert_false (zv_cksum_equal (&a, &b));
}

/* ---- zero test ------------------------------------------------------- */

/* All-zero buffers of every length and alignment are zero. */
static void
test_is_zero_all_zero (void **state)
{
  unsigned char *buf = calloc (1, 4096 + 16);
  (void) state;

  assert_non_null (buf);
  assert_true (zv_is_zero (buf, 0));
  assert_true (zv_is_zero (buf, 4096));
  for (size_t start = 0; start < 16; start++)
    for (size_t len = 0; len <= 80; len++)
      assert_true (zv_is_zero (buf + start, len));
  /* A zero-length test looks at nothing, not even a nonzero byte. */
  buf[3] = 1;
  assert_true (zv_is_zero (buf + 3, 0));
  free (buf);
}

/*
 * One nonzero byte, at every position of short buffers that start at
 * every alignment: always found; a byte just outside the range is not.
 */
static void
test_is_zero_every_position (void **state)
{
  enum { PAD = 8, MAXLEN = 72 };
  unsigned char *base = zv_buf_alloc (PAD + 16 + MAXLEN + PAD);
  (void) state;

  for (size_t start = PAD; start < PAD + 16; start++) {
    for (size_t len = 1; len <= MAXLEN; len++) {
      unsigned char *p = base + start;
      for (size_t pos = 0; pos < len; pos++) {
        for (unsigned v = 1; v <= 0x80; v <<= 1) {
          p[pos] = (unsigned char) v;
          if (zv_is_zero (p, len))
            fail_msg ("missed byte 0x%x at %zu of len %zu (start %% 8 = %zu)",
                      v, pos, len, start % 8);
          p[pos] = 0;
        }
      }
      /* Nonzero neighbours outside [p, p+len) are not looked at. */
      p[-1] = 0xff;
      p[len] = 0xff;
      assert_true (zv_is_zero (p, len));
      p[-1] = 0;
      p[len] = 0;
    }
  }
  zv_buf_free (base);
}

/* A large block with its only nonzero byte last, or first. */
static void
test_is_zero_large (void **state)
{
  size_t len = 128 * 1024;
  unsigned char *buf = zv_buf_alloc (len);
  (void) state;

  assert_true (zv_is_zero (buf, len));
  buf[len - 1] = 1;
  assert_false (zv_is_zero (buf, len));
  assert_true (zv_is_zero (buf, len - 1));
  buf[len - 1] = 0;
  buf[0] = 0x10;
  assert_false (zv_is_zero (buf, len));
  assert_true (zv_is_zero (buf + 1, len - 1));
  zv_buf_free (buf);
}

/* ---- aligned buffers -------------------------------------------------- */

/* Aligned to ZV_SECTOR and zeroed, even when recycled memory was dirty. */
static void
test_buf_alloc (void **state)
{
  static const size_t sizes[] = { 0, 1, 511, 4095, 4096, 4097, 16384,
                                  65536 + 12, 1u << 20 };
  (void) state;

  for (int round = 0; round < 4; round++) {
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
      size_t len = sizes[k];
      size_t usable = ZV_P2ROUNDUP (len ? len : 1, ZV_SECTOR);
      unsigned char *p = zv_buf_alloc (len);

      assert_non_null (p);
      assert_int_equal ((uintptr_t) p % ZV_SECTOR, 0);
      /* Zeroed over the rounded size: direct I/O transfers whole
       * sectors, and a short tail must not leak old heap data. */
      assert_true (zv_is_zero (p, usable));
      /* Dirty it so a recycled chunk would show up next round. */
      memset (p, 0xa5, usable);
      zv_buf_free (p);
    }
  }
  zv_buf_free (NULL);   /* like free(NULL) */
}

/* Run the calling thread on cpu only; false if that is not allowed. */
static bool
pin_to_cpu (int cpu)
{
  cpu_set_t set;

  CPU_ZERO (&set);
  CPU_SET (cpu, &set);
  return sched_setaffinity (0, sizeof set, &set) == 0
         && sched_getcpu () == cpu;
}

/* A buffer given back on one CPU is found by an allocation on another:
 * the txg sync thread frees the blocks writers on other CPUs allocate. */
static void
test_buf_cache_across_cpus (void **state)
{
  cpu_set_t saved;
  void *p, *q;
  (void) state;

#if defined(__SANITIZE_ADDRESS__)
  tl_skip ("the buffer cache is off under AddressSanitizer");
#endif
  assert_int_equal (sched_getaffinity (0, sizeof saved, &saved), 0);
  if (CPU_COUNT (&saved) < 2 || !pin_to_cpu (0)) {
    sched_setaffinity (0, sizeof saved, &saved);
    tl_skip ("needs CPUs 0 and 1 (have %d)", CPU_COUNT (&saved));
  }
  p = zv_buf_get (16384);
  zv_buf_put (p, 16384);                /* into CPU 0's shard */
  if (!pin_to_cpu (1)) {
    sched_setaffinity (0, sizeof saved, &saved);
    tl_skip ("cannot run on CPU 1");
  }
  q = zv_buf_get (16384);
  sched_setaffinity (0, sizeof saved, &saved);
  assert_ptr_equal (q, p);
  zv_buf_free (q);
}

/* A record cache gives a freed record back, zeroed, from any CPU; it
 * holds no more than its bound, and gives fresh zeroed records beyond. */
static void
test_rcache (void **state)
{
  enum { SZ = 136, N = 8 };
  zv_rcache_t *rc = zv_rcache_create (SZ, 4 * SZ);
  unsigned char *r[N], *got[4];
  (void) state;

#if defined(__SANITIZE_ADDRESS__)
  zv_rcache_destroy (rc);
  tl_skip ("the record caches are off under AddressSanitizer");
#endif
  for (unsigned i = 0; i < N; i++) {
    r[i] = zv_rcache_alloc (rc);
    for (unsigned b = 0; b < SZ; b++)
      assert_int_equal (r[i][b], 0);
    memset (r[i], 0xa5, SZ);
  }
  assert_int_equal (zv_rcache_cached (rc), 0);
  for (unsigned i = 0; i < N; i++)
    zv_rcache_free (rc, r[i]);
  /* Four fit under the bound; the other four went back to malloc. */
  assert_int_equal (zv_rcache_cached (rc), 4 * SZ);
  for (unsigned i = 0; i < 4; i++) {
    bool found = false;
    got[i] = zv_rcache_alloc (rc);
    for (unsigned b = 0; b < SZ; b++)
      assert_int_equal (got[i][b], 0);
    for (unsigned j = 0; j < 4; j++)
      found |= got[i] == r[j];
    assert_true (found);
  }
  assert_int_equal (zv_rcache_cached (rc), 0);
  zv_rcache_free (rc, NULL);
  for (unsigned i = 0; i < 4; i++)
    zv_rcache_free (rc, got[i]);
  /* Memory is short (mem.c): what waits goes back to the system. */
  assert_int_equal (zv_rcache_cached (rc), 4 * SZ);
  zv_buf_reclaim ();
  assert_int_equal (zv_rcache_cached (rc), 0);
  zv_rcache_free (rc, zv_rcache_alloc (rc));
  assert_int_equal (zv_rcache_cached (rc), SZ);
  zv_rcache_destroy (rc);             /* frees what waits (LeakSanitizer) */
}

/* zv_thread_name names the calling thread (top -H, perf, gdb), cut to
 * what the kernel keeps rather than failing. */
static void *
t_named (void *arg)
{
  char got[32] = "";

  zv_thread_name (arg);
  assert_int_equal (pthread_getname_np (pthread_self (), got, sizeof got), 0);
  return strdup (got);
}

static void
test_thread_name (void **state)
{
  pthread_t th;
  void *got;

  (void) state;
  assert_int_equal (pthread_create (&th, NULL, t_named, "zv-test"), 0);
  assert_int_equal (pthread_join (th, &got), 0);
  assert_string_equal (got, "zv-test");
  free (got);
  assert_int_equal (pthread_create (&th, NULL, t_named,
                                    "zv-a-name-far-too-long"), 0);
  assert_int_equal (pthread_join (th, &got), 0);
  assert_string_equal (got, "zv-a-name-far-t");
  free (got);
}

/* ---- rounding macros -------------------------------------------------- */

/* zv_copy and zv_copy_stream copy exactly n bytes whatever the two
 * buffers' alignment and the length (below the vector path's minimum, a
 * multiple of its stride or not), and write nothing around them. */
static void
test_copy (void **state)
{
  static const size_t lens[] = { 0, 1, 63, 1023, 1024, 1025, 4096, 4099,
                                 16384, 16384 + 127, 131072 };
  const size_t room = 131072 + 256;
  uint8_t *src = zv_buf_alloc (room), *dst = zv_buf_alloc (room);
  uint8_t *want = zv_buf_alloc (room);
  uint64_t rs = 11;

  (void) state;
  tl_fill_rand (src, room, &rs);
  for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
    for (unsigned so = 0; so < 64; so += (lens[l] > 20000 ? 16 : 1))
      for (unsigned d = 0; d < 64; d += (lens[l] > 20000 ? 8 : 1)) {
        memset (dst, 0x5a, room);
        memset (want, 0x5a, room);
        memcpy (want + 64 + d, src + so, lens[l]);
        zv_copy (dst + 64 + d, src + so, lens[l]);
        if (memcmp (dst, want, room) != 0)
          fail_msg ("zv_copy of %zu bytes, source +%u, destination +%u",
                    lens[l], so, d);
        /* The streaming copy: its vector path (an aligned destination,
         * whole 128-byte runs) and every case it hands to zv_copy. */
        memset (dst, 0x5a, room);
        zv_copy_stream (dst + 64 + d, src + so, lens[l]);
        if (memcmp (dst, want, room) != 0)
          fail_msg ("zv_copy_stream of %zu bytes, source +%u, destination "
                    "+%u", lens[l], so, d);
      }
  zv_buf_free (src);
  zv_buf_free (dst);
  zv_buf_free (want);
}

static void
test_p2_macros (void **state)
{
  (void) state;

  assert_int_equal (ZV_P2ROUNDUP (0, 4096), 0);
  assert_int_equal (ZV_P2ROUNDUP (1, 4096), 4096);
  assert_int_equal (ZV_P2ROUNDUP (4095, 4096), 4096);
  assert_int_equal (ZV_P2ROUNDUP (4096, 4096), 4096);
  assert_int_equal (ZV_P2ROUNDUP (4097, 4096), 8192);
  assert_int_equal (ZV_P2ROUNDUP (5, 1), 5);
  assert_int_equal (ZV_P2ROUNDUP (17, 16), 32);
  assert_int_equal (ZV_P2ALIGN (0, 4096), 0);
  assert_int_equal (ZV_P2ALIGN (4095, 4096), 0);
  assert_int_equal (ZV_P2ALIGN (4096, 4096), 4096);
  assert_int_equal (ZV_P2ALIGN (8191, 4096), 4096);
  assert_int_equal (ZV_P2ALIGN (5, 1), 5);

  /* 64-bit values: the mask must not be truncated to 32 bits, even when
   * the alignment is an unsigned int (ZV_SECTOR). */
  uint64_t big = (1ull << 40) + 12345;
  assert_true (ZV_P2ALIGN (big, ZV_SECTOR) == (1ull << 40) + 12288);
  assert_true (ZV_P2ROUNDUP (big, ZV_SECTOR) == (1ull << 40) + 16384);
  assert_true (ZV_P2ALIGN ((1ull << 56) - 1, 1u << 20)
               == (1ull << 56) - (1ull << 20));
  assert_true (ZV_P2ROUNDUP ((1ull << 56) - 1, ZV_SECTOR) == (1ull << 56));

  /* Exhaustive small range against the arithmetic definition. */
  for (uint64_t a = 1; a <= 1024; a <<= 1) {
    for (uint64_t x = 0; x < 3000; x++) {
      assert_true (ZV_P2ALIGN (x, a) == x / a * a);
      assert_true (ZV_P2ROUNDUP (x, a) == (x + a - 1) / a * a);
    }
  }
  assert_int_equal (ZV_MIN (3, 9), 3);
  assert_int_equal (ZV_MAX (3, 9), 9);
}

/* ZV_MIN / ZV_MAX evaluate each argument once, nest, and give the type of
 * the plain ?: expression; the _CONST forms are constant expressions. */
static void
test_min_max (void **state)
{
  static char arr[ZV_MAX_CONST (3, ZV_MIN_CONST (8, 5))];
  static_assert (ZV_MIN_CONST (2u, 7u) == 2u, "constant ZV_MIN");
  int i = 0, j = 10;
  uint32_t small = 7;
  uint64_t big = 1ull << 40;
  (void) state;

  assert_int_equal (sizeof arr, 5);
  assert_int_equal (ZV_MIN (i++, j--), 0);
  assert_int_equal (i, 1);
  assert_int_equal (j, 9);
  assert_int_equal (ZV_MAX (i++, j--), 9);
  assert_int_equal (i, 2);
  assert_int_equal (j, 8);
  assert_int_equal (ZV_MIN (ZV_MAX (i, j), ZV_MIN (20, ZV_MAX (j, 3))), 8);
  assert_int_equal (ZV_MAX (-1, -5), -1);
  assert_true (ZV_MAX (small, big) == big);
  assert_int_equal (sizeof (ZV_MIN (small, big)), sizeof (uint64_t));
  assert_int_equal (sizeof (ZV_MIN ((uint8_t) 1, (uint8_t) 2)),
                    sizeof (int));
}

/* ---- log hook --------------------------------------------------------- */

/* Outside strings are shown as printable ASCII, cut, always terminated. */
static void
test_str_printable (void **state)
{
  char out[64], tiny[6];

  zv_str_printable ("tank", ZV_NAME_MAX, out, sizeof out);
  assert_string_equal (out, "tank");
  zv_str_printable ("a\nb\x1b[2J\\", ZV_NAME_MAX, out, sizeof out);
  assert_string_equal (out, "a\\x0ab\\x1b[2J\\x5c");
  zv_str_printable ("\xff\x7f", ZV_NAME_MAX, out, sizeof out);
  assert_string_equal (out, "\\xff\\x7f");
  /* At most max bytes of the string, then "...". */
  zv_str_printable ("abcdef", 3, out, sizeof out);
  assert_string_equal (out, "abc...");
  /* A small buffer cuts whole characters and stays terminated. */
  zv_str_printable ("abcdefgh", 64, tiny, sizeof tiny);
  assert_string_equal (tiny, "ab...");
  zv_str_printable ("\n\n", 64, tiny, sizeof tiny);
  assert_string_equal (tiny, "...");
  zv_str_printable ("", 64, tiny, sizeof tiny);
  assert_string_equal (tiny, "");
}

#define UT_MAXLOG 16
static struct {
  enum zv_log_level level;
  char msg[1100];
} ut_log[UT_MAXLOG];
static int ut_nlog;

static void
ut_log_hook (enum zv_log_level level, const char *msg)
{
  if (ut_nlog < UT_MAXLOG) {
    ut_log[ut_nlog].level = level;
    snprintf (ut_log[ut_nlog].msg, sizeof ut_log[ut_nlog].msg, "%s", msg);
  }
  ut_nlog++;
  errno = EBADF;   /* a hook that clobbers errno must not leak it */
}

/* The hook sees every message, formatted, with its level. */
static void
test_log_hook (void **state)
{
  (void) state;

  ut_nlog = 0;
  zv_set_log (ut_log_hook);
  /* The stderr threshold does not filter what the hook sees. */
  zv_set_log_level (ZV_LOG_ERROR);
  zv_error ("disk %d failed: %s", 3, "EIO");
  zv_info ("txg %llu synced", 77ull);
  zv_debug ("debug %s", "detail");
  zv_log (ZV_LOG_INFO, "plain");
  zv_warn ("device %s: %s", "d0", "not locked");
  assert_int_equal (ut_nlog, 5);
  assert_int_equal (ut_log[0].level, ZV_LOG_ERROR);
  assert_string_equal (ut_log[0].msg, "disk 3 failed: EIO");
  assert_int_equal (ut_log[1].level, ZV_LOG_INFO);
  assert_string_equal (ut_log[1].msg, "txg 77 synced");
  assert_int_equal (ut_log[2].level, ZV_LOG_DEBUG);
  assert_string_equal (ut_log[2].msg, "debug detail");
  assert_int_equal (ut_log[3].level, ZV_LOG_INFO);
  assert_string_equal (ut_log[3].msg, "plain");
  assert_int_equal (ut_log[4].level, ZV_LOG_WARN);
  assert_string_equal (ut_log[4].msg, "device d0: not locked");
  assert_true (ZV_LOG_INFO < ZV_LOG_WARN && ZV_LOG_WARN < ZV_LOG_ERROR);

  /* Logging preserves errno (callers log, then return -errno). */
  errno = ENOSPC;
  zv_info ("keeps errno");
  assert_int_equal (errno, ENOSPC);

  /* A very long message is truncated, not overflowed. */
  char longmsg[3000];
  memset (longmsg, 'x', sizeof longmsg - 1);
  longmsg[sizeof longmsg - 1] = '\0';
  ut_nlog = 0;
  zv_error ("%s", longmsg);
  assert_int_equal (ut_nlog, 1);
  assert_true (strlen (ut_log[0].msg) > 0);
  assert_true (strlen (ut_log[0].msg) < sizeof longmsg - 1);
  assert_int_equal (ut_log[0].msg[0], 'x');

  /* Uninstall: messages go to stderr again, not to the hook. */
  zv_set_log (NULL);
  ut_nlog = 0;
  zv_set_log_level (ZV_LOG_ERROR);
  zv_info ("not for the hook (and below the stderr threshold)");
  assert_int_equal (ut_nlog, 0);
  zv_set_log_level (ZV_LOG_INFO);
  zv_set_log (tl_log_hook);             /* the group's hook, back */
}

/* ---- assertions ------------------------------------------------------ */

/* Never 1: the compiler cannot fold a failing check away. */
static volatile int ut_zero;

enum ut_check {
  UT_VERIFY, UT_VERIFY3U, UT_VERIFY3S, UT_VERIFY3P,
  UT_ASSERT, UT_ASSERT3U, UT_ASSERT3S, UT_ASSERT3P,
};

/* Run one failing check in a child; its exit status, as waitpid says. */
static int
ut_run_failing (enum ut_check which)
{
  int status = 0;
  pid_t pid = fork ();

  assert_true (pid >= 0);
  if (pid == 0) {
    struct rlimit no_core = { 0, 0 };
    int devnull = open ("/dev/null", O_WRONLY);

    signal (SIGABRT, SIG_DFL);
    setrlimit (RLIMIT_CORE, &no_core);
    if (devnull >= 0)
      dup2 (devnull, 2);        /* the failure message is expected */
    switch (which) {
    case UT_VERIFY: ZV_VERIFY (ut_zero == 1); break;
    case UT_VERIFY3U: ZV_VERIFY3U (ut_zero, >, 0); break;
    case UT_VERIFY3S: ZV_VERIFY3S (ut_zero - 1, >=, 0); break;
    case UT_VERIFY3P: ZV_VERIFY3P (&ut_zero, ==, NULL); break;
    case UT_ASSERT: ZV_ASSERT (ut_zero == 1); break;
    case UT_ASSERT3U: ZV_ASSERT3U (ut_zero, >, 0); break;
    case UT_ASSERT3S: ZV_ASSERT3S (ut_zero - 1, >=, 0); break;
    case UT_ASSERT3P: ZV_ASSERT3P (&ut_zero, ==, NULL); break;
    }
    _exit (0);
  }
  assert_int_equal (waitpid (pid, &status, 0), pid);
  return status;
}

static bool
ut_died_of_abort (int status)
{
  return WIFSIGNALED (status) && WTERMSIG (status) == SIGABRT;
}

/* Every VERIFY form stops the process when its condition is false, and
 * evaluates its argument once when it holds. */
static void
test_verify_aborts (void **state)
{
  int n = 0;
  (void) state;

  assert_true (ut_died_of_abort (ut_run_failing (UT_VERIFY)));
  assert_true (ut_died_of_abort (ut_run_failing (UT_VERIFY3U)));
  assert_true (ut_died_of_abort (ut_run_failing (UT_VERIFY3S)));
  assert_true (ut_died_of_abort (ut_run_failing (UT_VERIFY3P)));
  ZV_VERIFY (++n == 1);
  ZV_VERIFY3U (n++, ==, 1);
  ZV_VERIFY3S (-(n++), ==, -2);
  assert_int_equal (n, 3);
}

/* With ZV_DEBUG, ASSERT is VERIFY.  Without it, ASSERT neither stops the
 * process nor evaluates its argument (the counter below never moves). */
static void
test_assert_tier (void **state)
{
  int n = 0;
  (void) state;

#ifdef ZV_DEBUG
  assert_true (ut_died_of_abort (ut_run_failing (UT_ASSERT)));
  assert_true (ut_died_of_abort (ut_run_failing (UT_ASSERT3U)));
  assert_true (ut_died_of_abort (ut_run_failing (UT_ASSERT3S)));
  assert_true (ut_died_of_abort (ut_run_failing (UT_ASSERT3P)));
  ZV_ASSERT (++n == 1);
  ZV_ASSERT3U (n++, ==, 1);
  ZV_ASSERT3S (-(n++), ==, -2);
  ZV_ASSERT3P ((n++, &n), !=, NULL);
  assert_int_equal (n, 4);
#else
  for (enum ut_check c = UT_ASSERT; c <= UT_ASSERT3P; c++) {
    int status = ut_run_failing (c);
    assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  }
  ZV_ASSERT (++n == 1);
  ZV_ASSERT3U (n++, ==, 7);
  ZV_ASSERT3S (n--, <, -7);
  ZV_ASSERT3P ((n++, &n), ==, NULL);
  assert_int_equal (n, 0);
#endif
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_cksum_deterministic),
    tl_test (test_cksum_seed),
    tl_test (test_cksum_bitflip),
    tl_test (test_cksum_length),
    tl_test (test_cksum_equal),
    tl_test (test_is_zero_all_zero),
    tl_test (test_is_zero_every_position),
    tl_test (test_is_zero_large),
    tl_test (test_buf_alloc),
    tl_test (test_rcache),
    tl_test (test_buf_cache_across_cpus),
    tl_test (test_copy),
    tl_test (test_thread_name),
    tl_test (test_p2_macros),
    tl_test (test_min_max),
    tl_test (test_str_printable),
    tl_test (test_log_hook),
    tl_test (test_verify_aborts),
    tl_test (test_assert_tier),
  };

  return tl_main (tests, NULL, NULL);
}
