/*
 * zv_util.c: logging hook, assert failures, aligned buffers, bulk
 * copies, XXH3 checksums.  Exported names are zv_<thing> (these are the
 * engine's common vocabulary, not a module's), file-local ones
 * util_<thing>.
 */
#include <config.h>

#include <stdarg.h>
#include <string.h>
#include <unistd.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#if defined(HAVE_XXH_X86DISPATCH_H) \
  && defined(HAVE_XXH3_128BITS_WITHSEED_DISPATCH)
#define UTIL_XXH_DISPATCH 1
#define XXH_DISPATCH_DISABLE_REPLACE
#include <xxh_x86dispatch.h>
#else
#define XXH_INLINE_ALL
#include <xxhash.h>
#endif

#include "zv_util.h"
#include "tunable.h"

static zv_log_fn zv_log_hook;
static enum zv_log_level zv_log_min = ZV_LOG_INFO;
static __thread zv_log_tap_fn zv_log_tap_fn_cur;
static __thread void *zv_log_tap_arg;

/* This thread's tap (zv_util.h). */
void
zv_log_tap (zv_log_tap_fn fn, void *arg)
{
  zv_log_tap_fn_cur = fn;
  zv_log_tap_arg = arg;
}

/* Install the embedder's log hook. */
void
zv_set_log (zv_log_fn fn)
{
  zv_log_hook = fn;
}

/* Minimum level for the default (stderr) hook. */
void
zv_set_log_level (enum zv_log_level level)
{
  zv_log_min = level;
}

/* Format a message and hand it to the hook, or to stderr. */
void
zv_log (enum zv_log_level level, const char *fmt, ...)
{
  char msg[1024];
  va_list ap;
  int saved = errno;

  va_start (ap, fmt);
  vsnprintf (msg, sizeof msg, fmt, ap);
  va_end (ap);
  if (zv_log_hook)
    zv_log_hook (level, msg);
  else if (level >= zv_log_min)
    fprintf (stderr, "zvol: %s%s\n", level == ZV_LOG_WARN ? "warning: " : "",
             msg);
  if (zv_log_tap_fn_cur)
    zv_log_tap_fn_cur (zv_log_tap_arg, level, msg);
  errno = saved;
}

/* An invariant did not hold: say which, and stop before damage spreads. */
void
zv_assert_fail (const char *what, const char *file, int line)
{
  fprintf (stderr, "zvol: assertion failed: %s (%s:%d)\n", what, file, line);
  abort ();
}

/* A typed invariant did not hold: print both sides. */
void
zv_assert3_fail (const char *what, uint64_t a, uint64_t b,
                 const char *file, int line)
{
  fprintf (stderr, "zvol: assertion failed: %s (0x%llx vs 0x%llx) (%s:%d)\n",
           what, (unsigned long long) a, (unsigned long long) b, file, line);
  abort ();
}

/* The same for signed operands. */
void
zv_assert3s_fail (const char *what, int64_t a, int64_t b,
                  const char *file, int line)
{
  fprintf (stderr, "zvol: assertion failed: %s (%lld vs %lld) (%s:%d)\n",
           what, (long long) a, (long long) b, file, line);
  abort ();
}

/* ---- memory ---- */

void
zv_nomem (size_t size)
{
  zv_error ("out of memory (%zu bytes); stopping", size);
  fprintf (stderr, "zvol: out of memory (%zu bytes)\n", size);
  abort ();
}

void *
zv_alloc (size_t size)
{
  void *p = malloc (size ? size : 1);

  if (p == NULL)
    zv_nomem (size);
  return p;
}

void *
zv_zalloc (size_t size)
{
  return zv_calloc (1, size);
}

void *
zv_calloc (size_t n, size_t size)
{
  void *p;

  if (size && n > SIZE_MAX / size)
    zv_nomem (SIZE_MAX);
  p = calloc (n ? n : 1, size ? size : 1);
  if (p == NULL)
    zv_nomem (n * size);
  return p;
}

void *
zv_realloc (void *old, size_t size)
{
  void *p = realloc (old, size ? size : 1);

  if (p == NULL)
    zv_nomem (size);
  return p;
}

char *
zv_strdup (const char *s)
{
  char *p = strdup (s);

  if (p == NULL)
    zv_nomem (strlen (s) + 1);
  return p;
}

/*
 * Buffer cache: freed block buffers of the power-of-two sizes 4K..128K
 * wait in per-CPU-ish shards (a mutex and a free list each, linked
 * through the buffers themselves) for the next allocation of their size,
 * up to zv_buf_cache_max bytes in all.  Off under AddressSanitizer, so
 * that it still sees every use after free.
 */
#if defined(__SANITIZE_ADDRESS__)
#define ZV_BUF_CACHE_MAX_DEFAULT 0
#else
#define ZV_BUF_CACHE_MAX_DEFAULT (256ull << 20)
#endif
static uint64_t zv_buf_cache_max = ZV_BUF_CACHE_MAX_DEFAULT;
#define ZV_BUF_CLASSES 6        /* 4K, 8K, 16K, 32K, 64K, 128K */
#define ZV_BUF_SHARDS 16

typedef struct zv_buf_shard {
  pthread_mutex_t bs_mtx;
  void *bs_head;                 /* under bs_mtx */
  _Atomic uint32_t bs_count;     /* buffers on bs_head: a lock-free peek */
} __attribute__ ((aligned (64))) zv_buf_shard_t;

static zv_buf_shard_t zv_buf_shards[ZV_BUF_CLASSES][ZV_BUF_SHARDS];
static _Atomic uint64_t zv_buf_cached;
static pthread_once_t zv_buf_once = PTHREAD_ONCE_INIT;

static void
util_buf_init (void)
{
  for (unsigned c = 0; c < ZV_BUF_CLASSES; c++)
    for (unsigned s = 0; s < ZV_BUF_SHARDS; s++)
      pthread_mutex_init (&zv_buf_shards[c][s].bs_mtx, NULL);
}

/* Size class of a buffer size, or -1 when it is not cached. */
static int
util_buf_class (size_t size)
{
  for (int c = 0; c < ZV_BUF_CLASSES; c++)
    if (size == (size_t) ZV_SECTOR << c)
      return c;
  return -1;
}

/* The shard this thread frees into and allocates from first. */
static unsigned
util_buf_shard_index (void)
{
  int cpu = sched_getcpu ();
  return (unsigned) (cpu < 0 ? 0 : cpu) % ZV_BUF_SHARDS;
}

/* Take an object off the first shard of 'shards' that has one, this
 * thread's first: objects are often freed on another CPU (the txg sync
 * thread) than the one allocating. */
static void *
util_shards_pop (zv_buf_shard_t *shards)
{
  unsigned first = util_buf_shard_index ();
  void *p = NULL;

  for (unsigned i = 0; i < ZV_BUF_SHARDS && p == NULL; i++) {
    zv_buf_shard_t *s = &shards[(first + i) % ZV_BUF_SHARDS];
    if (atomic_load_explicit (&s->bs_count, memory_order_relaxed) == 0)
      continue;
    pthread_mutex_lock (&s->bs_mtx);
    p = s->bs_head;
    if (p) {
      memcpy (&s->bs_head, p, sizeof (void *));
      atomic_fetch_sub_explicit (&s->bs_count, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock (&s->bs_mtx);
  }
  return p;
}

/* Put an object on this thread's shard (linked through its first
 * pointer's worth of bytes). */
static void
util_shards_push (zv_buf_shard_t *shards, void *p)
{
  zv_buf_shard_t *s = &shards[util_buf_shard_index ()];

  pthread_mutex_lock (&s->bs_mtx);
  memcpy (p, &s->bs_head, sizeof (void *));
  s->bs_head = p;
  atomic_fetch_add_explicit (&s->bs_count, 1, memory_order_relaxed);
  pthread_mutex_unlock (&s->bs_mtx);
}

/* Free every object on the shards; returns how many there were. */
static uint64_t
util_shards_drain (zv_buf_shard_t *shards)
{
  uint64_t n = 0;

  for (unsigned i = 0; i < ZV_BUF_SHARDS; i++) {
    zv_buf_shard_t *s = &shards[i];
    void *p;

    pthread_mutex_lock (&s->bs_mtx);
    p = s->bs_head;
    s->bs_head = NULL;
    atomic_store (&s->bs_count, 0);
    pthread_mutex_unlock (&s->bs_mtx);
    while (p) {
      void *next;
      memcpy (&next, p, sizeof next);
      free (p);
      p = next;
      n++;
    }
  }
  return n;
}

/* Uninitialised aligned buffer, cached if possible. */
void *
zv_buf_get (size_t size)
{
  size_t rounded = ZV_P2ROUNDUP (size ? size : 1, ZV_SECTOR);
  int c = util_buf_class (rounded);
  void *p = NULL;

  if (c >= 0 && atomic_load_explicit (&zv_buf_cached,
                                      memory_order_relaxed) > 0) {
    pthread_once (&zv_buf_once, util_buf_init);
    p = util_shards_pop (zv_buf_shards[c]);
    if (p) {
      atomic_fetch_sub_explicit (&zv_buf_cached, rounded,
                                 memory_order_seq_cst);
      return p;
    }
  }
  if (posix_memalign (&p, ZV_SECTOR, rounded) != 0)
    zv_nomem (rounded);
  return p;
}

/* Back to the cache, or to malloc when the cache is full. */
void
zv_buf_put (void *buf, size_t size)
{
  size_t rounded = ZV_P2ROUNDUP (size ? size : 1, ZV_SECTOR);
  int c = util_buf_class (rounded);

  if (buf == NULL)
    return;
  if (c < 0 || atomic_load_explicit (&zv_buf_cached, memory_order_relaxed)
      + rounded > zv_buf_cache_max) {
    free (buf);
    return;
  }
  pthread_once (&zv_buf_once, util_buf_init);
  /* Counted before it is on a shard, so a get never takes the count
   * below what the shards hold. */
  atomic_fetch_add_explicit (&zv_buf_cached, rounded, memory_order_seq_cst);
  util_shards_push (zv_buf_shards[c], buf);
}

static void util_rcache_reclaim (void);

/* Empty every shard of every class, and every record cache. */
void
zv_buf_reclaim (void)
{
  pthread_once (&zv_buf_once, util_buf_init);
  for (unsigned c = 0; c < ZV_BUF_CLASSES; c++) {
    uint64_t n = util_shards_drain (zv_buf_shards[c]);
    atomic_fetch_sub_explicit (&zv_buf_cached, n * ((uint64_t) ZV_SECTOR << c),
                               memory_order_seq_cst);
  }
  util_rcache_reclaim ();
}

/*
 * Record caches: the same shards for records of one size (a dirty
 * record per block written, allocated by the writers and freed by the
 * txg sync thread, where malloc's per-thread caches do not help: each
 * cost about 300 instructions through calloc and free).  At most
 * rc_max bytes wait; none under AddressSanitizer.
 */
struct zv_rcache {
  size_t rc_size;
  uint64_t rc_max;
  _Atomic uint64_t rc_cached;                 /* bytes on the shards */
  struct zv_rcache *rc_next;                  /* under util_rc_mtx */
  zv_buf_shard_t rc_shards[ZV_BUF_SHARDS];
};

/* Every record cache, so that zv_buf_reclaim empties them too. */
static pthread_mutex_t util_rc_mtx = PTHREAD_MUTEX_INITIALIZER;
static zv_rcache_t *util_rc_list;

static void
util_rcache_drain (zv_rcache_t *rc)
{
  uint64_t n = util_shards_drain (rc->rc_shards);

  atomic_fetch_sub_explicit (&rc->rc_cached, n * rc->rc_size,
                             memory_order_relaxed);
}

zv_rcache_t *
zv_rcache_create (size_t size, uint64_t max_bytes)
{
  zv_rcache_t *rc;

  ZV_VERIFY (size >= sizeof (void *));
  if (posix_memalign ((void **) &rc, 64, sizeof *rc) != 0)
    zv_nomem (sizeof *rc);
  memset (rc, 0, sizeof *rc);
  rc->rc_size = size;
#if defined(__SANITIZE_ADDRESS__)
  (void) max_bytes;             /* off, as the buffer cache */
#else
  rc->rc_max = max_bytes;
#endif
  for (unsigned i = 0; i < ZV_BUF_SHARDS; i++)
    pthread_mutex_init (&rc->rc_shards[i].bs_mtx, NULL);
  pthread_mutex_lock (&util_rc_mtx);
  rc->rc_next = util_rc_list;
  util_rc_list = rc;
  pthread_mutex_unlock (&util_rc_mtx);
  return rc;
}

void
zv_rcache_destroy (zv_rcache_t *rc)
{
  if (rc == NULL)
    return;
  pthread_mutex_lock (&util_rc_mtx);
  for (zv_rcache_t **pp = &util_rc_list; *pp; pp = &(*pp)->rc_next)
    if (*pp == rc) {
      *pp = rc->rc_next;
      break;
    }
  pthread_mutex_unlock (&util_rc_mtx);
  (void) util_shards_drain (rc->rc_shards);
  for (unsigned i = 0; i < ZV_BUF_SHARDS; i++)
    pthread_mutex_destroy (&rc->rc_shards[i].bs_mtx);
  free (rc);
}

void *
zv_rcache_alloc (zv_rcache_t *rc)
{
  void *p = NULL;

  if (atomic_load_explicit (&rc->rc_cached, memory_order_relaxed) > 0
      && (p = util_shards_pop (rc->rc_shards)) != NULL)
    atomic_fetch_sub_explicit (&rc->rc_cached, rc->rc_size,
                               memory_order_relaxed);
  else
    return zv_calloc (1, rc->rc_size);
  memset (p, 0, rc->rc_size);
  return p;
}

void
zv_rcache_free (zv_rcache_t *rc, void *p)
{
  if (p == NULL)
    return;
  if (atomic_load_explicit (&rc->rc_cached, memory_order_relaxed)
      + rc->rc_size > rc->rc_max) {
    free (p);
    return;
  }
  atomic_fetch_add_explicit (&rc->rc_cached, rc->rc_size,
                             memory_order_relaxed);
  util_shards_push (rc->rc_shards, p);
}

static void
util_rcache_reclaim (void)
{
  pthread_mutex_lock (&util_rc_mtx);
  for (zv_rcache_t *rc = util_rc_list; rc; rc = rc->rc_next)
    util_rcache_drain (rc);
  pthread_mutex_unlock (&util_rc_mtx);
}

uint64_t
zv_rcache_cached (const zv_rcache_t *rc)
{
  return atomic_load_explicit (&rc->rc_cached, memory_order_relaxed);
}

/* Zeroed, sector-aligned buffer for direct I/O. */
void *
zv_buf_alloc (size_t size)
{
  size_t rounded = ZV_P2ROUNDUP (size ? size : 1, ZV_SECTOR);
  void *p = zv_buf_get (rounded);

  memset (p, 0, rounded);
  return p;
}

void
zv_buf_free (void *buf)
{
  free (buf);
}

/* XXH3-128 of a block, seeded so a block from another place or pool
 * does not verify by accident.  Every data block is hashed once when
 * written and once when read, so this is most of the engine's cost per
 * byte: libxxhash's dispatching entry picks the widest vector unit the
 * CPU has (AVX2: half the instructions of SSE2); the value is the same
 * whatever code computes it. */
void
zv_cksum_compute (const void *buf, size_t len, uint64_t seed,
                  zv_cksum_t *out)
{
#ifdef UTIL_XXH_DISPATCH
  XXH128_hash_t h = XXH3_128bits_withSeed_dispatch (buf, len, seed);
#else
  XXH128_hash_t h = XXH3_128bits_withSeed (buf, len, seed);
#endif
  out->zc_word[0] = h.low64;
  out->zc_word[1] = h.high64;
}

struct zv_cksum_stream {
  XXH3_state_t *cs_state;
};

zv_cksum_stream_t *
zv_cksum_stream_new (uint64_t seed)
{
  zv_cksum_stream_t *cs = zv_alloc (sizeof *cs);

  cs->cs_state = XXH3_createState ();
  if (cs->cs_state == NULL)
    zv_nomem (sizeof *cs);
  zv_cksum_stream_reset (cs, seed);
  return cs;
}

void
zv_cksum_stream_reset (zv_cksum_stream_t *cs, uint64_t seed)
{
  ZV_VERIFY (XXH3_128bits_reset_withSeed (cs->cs_state, seed) == XXH_OK);
}

void
zv_cksum_stream_update (zv_cksum_stream_t *cs, const void *buf, size_t len)
{
#ifdef UTIL_XXH_DISPATCH
  ZV_VERIFY (XXH3_128bits_update_dispatch (cs->cs_state, buf, len)
             == XXH_OK);
#else
  ZV_VERIFY (XXH3_128bits_update (cs->cs_state, buf, len) == XXH_OK);
#endif
}

void
zv_cksum_stream_value (zv_cksum_stream_t *cs, zv_cksum_t *out)
{
  XXH128_hash_t h = XXH3_128bits_digest (cs->cs_state);

  out->zc_word[0] = h.low64;
  out->zc_word[1] = h.high64;
}

void
zv_cksum_stream_free (zv_cksum_stream_t *cs)
{
  if (cs == NULL)
    return;
  XXH3_freeState (cs->cs_state);
  free (cs);
}

/* A hostile string as a log line may show it (see zv_util.h). */
void
zv_str_printable (const char *s, size_t max, char *out, size_t outlen)
{
  size_t o = 0, i;

  if (outlen == 0)
    return;
  for (i = 0; s[i] != '\0' && i < max; i++) {
    unsigned char c = (unsigned char) s[i];
    char esc[8];
    int n = c >= 0x20 && c < 0x7f && c != '\\'
      ? snprintf (esc, sizeof esc, "%c", c)
      : snprintf (esc, sizeof esc, "\\x%02x", c);
    if (o + (size_t) n + 4 > outlen)
      break;
    memcpy (out + o, esc, (size_t) n);
    o += (size_t) n;
  }
  if (s[i] != '\0' && o + 4 <= outlen) {
    memcpy (out + o, "...", 3);
    o += 3;
  }
  out[ZV_MIN (o, outlen - 1)] = '\0';
}

/* Pool names (see zv_util.h). */
bool
zv_name_is_valid (const char *s, size_t max)
{
  size_t i;

  for (i = 0; i < max && s[i] != '\0'; i++)
    if ((unsigned char) s[i] < 0x20 || (unsigned char) s[i] >= 0x7f)
      return false;
  return i > 0 && i < max;
}

uint64_t
zv_physical_memory (uint64_t unknown)
{
  long pages = sysconf (_SC_PHYS_PAGES), psz = sysconf (_SC_PAGESIZE);

  return pages > 0 && psz > 0 ? (uint64_t) pages * (uint64_t) psz : unknown;
}

unsigned
zv_cancel_poll (const int fd[2])
{
  for (unsigned i = 0; fd != NULL && i < 2; i++) {
    struct pollfd pf = { .fd = fd[i], .events = POLLIN };
    if (pf.fd >= 0 && poll (&pf, 1, 0) > 0)
      return i + 1;
  }
  return 0;
}

void
zv_thread_name (const char *name)
{
  char cut[16];                 /* the kernel keeps 15 characters */

  snprintf (cut, sizeof cut, "%s", name);
  (void) pthread_setname_np (pthread_self (), cut);
}

/* Word-at-a-time zero test (buffers are 8-byte aligned in practice). */
bool
zv_is_zero (const void *buf, size_t len)
{
  const unsigned char *p = buf;
  size_t i = 0;

  while (i < len && ((uintptr_t) (p + i) & 7) != 0)
    if (p[i++] != 0)
      return false;
  for (; i + 8 <= len; i += 8) {
    uint64_t w;
    memcpy (&w, p + i, 8);
    if (w != 0)
      return false;
  }
  for (; i < len; i++)
    if (p[i] != 0)
      return false;
  return true;
}

/*
 * Bulk copies.  glibc's memcpy moves large blocks with "rep movsb", which
 * on some CPUs (AMD EPYC here: docs/design.md, "Copies") runs at half
 * speed when the destination sits a few bytes past the source's alignment
 * in a 64-byte line: a 128 KiB copy from the cache's sector-aligned
 * blocks into nbdkit's request buffer (malloc'd, 16 bytes past a line)
 * took 18 us instead of 8.  A loop of unaligned 32-byte vector loads and
 * stores is as fast as the best case whatever the alignment, so copies
 * whose two addresses differ modulo 64 take it; the others, and small
 * ones, stay with memcpy.  x86-64 picks the AVX2 loop once where the CPU
 * has it (the SSE2 one costs ~20% more); elsewhere this is memcpy.
 *
 * A write that fills a whole block copies into the cache's memory, which
 * is cold (the cache cycles through far more than the processor's), and
 * nothing reads the block soon: the sync hands it to the device, which
 * reads it by DMA.  An ordinary store first reads each line it writes;
 * non-temporal stores (zv_copy_stream) do not, and leave the caches to
 * what is in use: 16 KiB blocks into a 1 GiB ring from a buffer 16 bytes
 * past a line, 22 GB/s against memcpy's 11.6 on this EPYC.
 */
#define UTIL_COPY_MIN 1024u

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

typedef uint8_t util_v32 __attribute__ ((vector_size (32), aligned (1),
                                         may_alias));

static inline __attribute__ ((always_inline)) void
util_copy_loop (uint8_t *d, const uint8_t *s, size_t n)
{
  size_t i = 0;

  for (; i + 128 <= n; i += 128) {
    util_v32 a = *(const util_v32 *) (s + i);
    util_v32 b = *(const util_v32 *) (s + i + 32);
    util_v32 c = *(const util_v32 *) (s + i + 64);
    util_v32 e = *(const util_v32 *) (s + i + 96);

    *(util_v32 *) (d + i) = a;
    *(util_v32 *) (d + i + 32) = b;
    *(util_v32 *) (d + i + 64) = c;
    *(util_v32 *) (d + i + 96) = e;
  }
  if (i < n)
    memcpy (d + i, s + i, n - i);
}

static void
util_copy_sse2 (uint8_t *d, const uint8_t *s, size_t n)
{
  util_copy_loop (d, s, n);
}

__attribute__ ((target ("avx2"))) static void
util_copy_avx2 (uint8_t *d, const uint8_t *s, size_t n)
{
  util_copy_loop (d, s, n);
}

/* 128-byte runs, destination 32-byte aligned; the caller checks both. */
__attribute__ ((target ("avx2"))) static void
util_copy_stream_avx2 (uint8_t *d, const uint8_t *s, size_t n)
{
  for (size_t i = 0; i < n; i += 128)
#pragma GCC unroll 4
    for (size_t k = 0; k < 128; k += 32)
      _mm256_stream_si256 ((__m256i *) (void *) (d + i + k),
                           _mm256_loadu_si256 ((const __m256i *) (const void *)
                                               (s + i + k)));
  /* Non-temporal stores are weakly ordered: fence them before anyone
   * (the sync thread, through a lock) may read the block. */
  _mm_sfence ();
}

/* 1 when the CPU has AVX2; asked once (a race only asks twice). */
static int
util_have_avx2 (void)
{
  static _Atomic int avx2;              /* 0: not asked yet */
  int a = atomic_load_explicit (&avx2, memory_order_relaxed);

  if (a == 0) {
    __builtin_cpu_init ();
    a = __builtin_cpu_supports ("avx2") ? 1 : -1;
    atomic_store_explicit (&avx2, a, memory_order_relaxed);
  }
  return a > 0;
}

void
zv_copy (void *dst, const void *src, size_t n)
{
  if (n < UTIL_COPY_MIN || (((uintptr_t) dst - (uintptr_t) src) & 63) == 0) {
    memcpy (dst, src, n);
    return;
  }
  if (util_have_avx2 ())
    util_copy_avx2 (dst, src, n);
  else
    util_copy_sse2 (dst, src, n);
}

void
zv_copy_stream (void *dst, const void *src, size_t n)
{
  if (n >= UTIL_COPY_MIN && n % 128 == 0 && ((uintptr_t) dst & 31) == 0
      && util_have_avx2 ())
    util_copy_stream_avx2 (dst, src, n);
  else
    zv_copy (dst, src, n);
}
#else
void
zv_copy (void *dst, const void *src, size_t n)
{
  memcpy (dst, src, n);
}

void
zv_copy_stream (void *dst, const void *src, size_t n)
{
  memcpy (dst, src, n);
}
#endif

/* ---- tunables (tunable.h) ---- */
const zv_tunable_t zv_util_tunable_table[] = {
  { .tn_name = "buf_cache_max", .tn_module = "util",
    ZV_TUNABLE_VAR_U64 (zv_buf_cache_max),
    .tn_default = ZV_BUF_CACHE_MAX_DEFAULT, .tn_min = 0,
    .tn_max = 1ull << 40,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the block buffer allocator, freeing a buffer",
    .tn_desc = "Freed block buffers kept for reuse, which spares the page "
    "faults of fresh memory; 0 under AddressSanitizer, so it sees every "
    "use after free." },
  ZV_TUNABLE_END
};
