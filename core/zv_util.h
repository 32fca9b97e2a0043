/*
 * zv_util.h: small helpers shared by every core module: logging through a
 * hook the embedder installs (the nbdkit plugin routes it to nbdkit_error /
 * nbdkit_debug), the two tiers of asserts of OpenZFS (VERIFY always,
 * ASSERT in debug builds), aligned buffers, bulk copies, the block
 * checksum (XXH3-128) and arithmetic macros.
 */
#ifndef ZV_UTIL_H
#define ZV_UTIL_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdlib.h>
#include <stdio.h>
#include <time.h>

/* Log levels understood by the log hook.  A warning is something the
 * operator must see (the plugin shows it like an error) about an
 * operation that still goes on. */
enum zv_log_level {
  ZV_LOG_DEBUG = 0, ZV_LOG_INFO = 1, ZV_LOG_WARN = 2, ZV_LOG_ERROR = 3
};

typedef void (*zv_log_fn) (enum zv_log_level level, const char *msg);

/* Install the log hook (NULL restores the default: stderr). */
void zv_set_log (zv_log_fn fn);
/* Minimum level printed by the default hook (tests silence debug output). */
void zv_set_log_level (enum zv_log_level level);
void zv_log (enum zv_log_level level, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
#define zv_error(...) zv_log (ZV_LOG_ERROR, __VA_ARGS__)
#define zv_warn(...)  zv_log (ZV_LOG_WARN, __VA_ARGS__)
#define zv_info(...)  zv_log (ZV_LOG_INFO, __VA_ARGS__)
#define zv_debug(...) zv_log (ZV_LOG_DEBUG, __VA_ARGS__)
/* A tap on the calling thread's messages: each one still goes to the
 * hook, and to fn as well (NULL removes the tap).  The admin command
 * layer copies what the engine says during a command to the command's
 * error stream, so the person who ran it reads why it failed. */
typedef void (*zv_log_tap_fn) (void *arg, enum zv_log_level level,
                               const char *msg);
void zv_log_tap (zv_log_tap_fn fn, void *arg);

/*
 * Assertions, in OpenZFS's two tiers.
 *
 * ZV_VERIFY* are always on.  They guard what would corrupt the pool or
 * serve wrong data if it did not hold (space accounting, a double free, a
 * request outside a device or an object): a storage server must stop
 * rather than limp on.  Data read from disk or sent by a client is checked
 * and refused with an error, not asserted on; a VERIFY that backs up such
 * a check made by the caller (a range the plugin already validated) is
 * still a VERIFY.
 *
 * ZV_ASSERT* state cheap internal invariants, on hot paths too, and are
 * compiled in only with ZV_DEBUG (configure --enable-debug, implied by
 * --enable-sanitizers and --enable-tsan).  Otherwise they do not evaluate
 * their arguments (so an argument must have no side effect the code
 * relies on) but still type-check them, inside sizeof.
 *
 * The 3 forms print both sides: U as unsigned (hex), S as signed, P as
 * pointers.
 */
#define ZV_VERIFY(c) \
  ((c) ? (void) 0 : zv_assert_fail (#c, __FILE__, __LINE__))
#define ZV_VERIFY3U(a, op, b) \
  (((uint64_t) (a) op (uint64_t) (b)) ? (void) 0 : \
   zv_assert3_fail (#a " " #op " " #b, (uint64_t) (a), (uint64_t) (b), \
                    __FILE__, __LINE__))
#define ZV_VERIFY3S(a, op, b) \
  (((int64_t) (a) op (int64_t) (b)) ? (void) 0 : \
   zv_assert3s_fail (#a " " #op " " #b, (int64_t) (a), (int64_t) (b), \
                     __FILE__, __LINE__))
#define ZV_VERIFY3P(a, op, b) \
  (((uintptr_t) (a) op (uintptr_t) (b)) ? (void) 0 : \
   zv_assert3_fail (#a " " #op " " #b, (uint64_t) (uintptr_t) (a), \
                    (uint64_t) (uintptr_t) (b), __FILE__, __LINE__))
#ifdef ZV_DEBUG
#define ZV_ASSERT(c) ZV_VERIFY (c)
#define ZV_ASSERT3U(a, op, b) ZV_VERIFY3U (a, op, b)
#define ZV_ASSERT3S(a, op, b) ZV_VERIFY3S (a, op, b)
#define ZV_ASSERT3P(a, op, b) ZV_VERIFY3P (a, op, b)
#else
#define ZV_ASSERT(c) ((void) sizeof (!(c)))
#define ZV_ASSERT3U(a, op, b) \
  ((void) sizeof ((uint64_t) (a) op (uint64_t) (b)))
#define ZV_ASSERT3S(a, op, b) \
  ((void) sizeof ((int64_t) (a) op (int64_t) (b)))
#define ZV_ASSERT3P(a, op, b) \
  ((void) sizeof ((uintptr_t) (a) op (uintptr_t) (b)))
#endif
void zv_assert_fail (const char *what, const char *file, int line)
  __attribute__ ((noreturn));
void zv_assert3_fail (const char *what, uint64_t a, uint64_t b,
                      const char *file, int line) __attribute__ ((noreturn));
void zv_assert3s_fail (const char *what, int64_t a, int64_t b,
                       const char *file, int line) __attribute__ ((noreturn));

/*
 * Memory.  As OpenZFS's KM_SLEEP, an allocation of the engine never
 * fails: on ENOMEM it logs what it wanted and aborts (docs/design.md,
 * "Allocation failure").  So no caller checks for NULL, and no function
 * returns -ENOMEM.
 */
void *zv_alloc (size_t size);                   /* not zeroed */
void *zv_zalloc (size_t size);                  /* zeroed */
void *zv_calloc (size_t n, size_t size);        /* zeroed; n * size checked */
void *zv_realloc (void *p, size_t size);
char *zv_strdup (const char *s);
void zv_nomem (size_t size) __attribute__ ((noreturn));

/* Room for one more element at arr[n] of a growing array (doubling from
 * 'first' elements). */
#define ZV_GROW(arr, n, cap, first)                                      \
  do {                                                                  \
    if ((n) == (cap)) {                                                 \
      (cap) = (cap) ? (cap) * 2 : (first);                              \
      (arr) = zv_realloc ((arr), (cap) * sizeof *(arr));                \
    }                                                                   \
  } while (0)

/* I/O unit: every on-disk offset and size is a multiple of this. */
#define ZV_SECTOR 4096u

/* A buffer aligned for O_DIRECT (ZV_SECTOR), zeroed.  Aborts on ENOMEM. */
void *zv_buf_alloc (size_t size);
void zv_buf_free (void *buf);
/*
 * The same, not zeroed, from a cache of recently freed buffers of that
 * size (block buffers churn at I/O rates; reusing them spares the page
 * faults of fresh memory).  A buffer from either function may go back
 * with zv_buf_put (size as allocated) or zv_buf_free.
 */
void *zv_buf_get (size_t size);
void zv_buf_put (void *buf, size_t size);
/* Free every buffer waiting in the cache (memory is needed elsewhere). */
void zv_buf_reclaim (void);

/*
 * A cache of freed records of one size (kept on per-CPU free lists, up
 * to max_bytes of them, none under AddressSanitizer), for records made
 * at I/O rates on one thread and freed on another.  zv_rcache_alloc
 * gives a zeroed record (aborts on ENOMEM); zv_rcache_free takes one
 * from zv_rcache_alloc of the same cache (NULL: nothing).
 */
typedef struct zv_rcache zv_rcache_t;
zv_rcache_t *zv_rcache_create (size_t size, uint64_t max_bytes);
void zv_rcache_destroy (zv_rcache_t *rc);
void *zv_rcache_alloc (zv_rcache_t *rc);
void zv_rcache_free (zv_rcache_t *rc, void *p);
uint64_t zv_rcache_cached (const zv_rcache_t *rc);   /* bytes waiting */

/* Checksum of a block: XXH3-128 seeded with 'seed'. */
typedef struct zv_cksum { uint64_t zc_word[2]; } zv_cksum_t;
void zv_cksum_compute (const void *buf, size_t len, uint64_t seed,
                       zv_cksum_t *out);
static inline bool
zv_cksum_equal (const zv_cksum_t *a, const zv_cksum_t *b)
{
  return a->zc_word[0] == b->zc_word[0] && a->zc_word[1] == b->zc_word[1];
}

/* The same checksum of a byte stream fed in pieces (a send stream's):
 * its value is zv_cksum_compute's of the pieces put end to end. */
typedef struct zv_cksum_stream zv_cksum_stream_t;
zv_cksum_stream_t *zv_cksum_stream_new (uint64_t seed);
void zv_cksum_stream_reset (zv_cksum_stream_t *cs, uint64_t seed);
void zv_cksum_stream_update (zv_cksum_stream_t *cs, const void *buf,
                             size_t len);
void zv_cksum_stream_value (zv_cksum_stream_t *cs, zv_cksum_t *out);
void zv_cksum_stream_free (zv_cksum_stream_t *cs);

/* Monotonic clock in nanoseconds. */
static inline uint64_t
zv_now_ns (void)
{
  struct timespec ts;
  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

/*
 * The text of a string that came from outside (a client's volume name, a
 * name read from disk) as a log message may show it: printable ASCII as
 * it is, every other byte (and the backslash) as \xNN, at most max bytes
 * of s and "..." when there was more, always NUL-terminated in out.  So a
 * name can never add lines or terminal controls to the server's log.
 */
void zv_str_printable (const char *s, size_t max, char *out, size_t outlen);

/* A pool name as create takes it and import accepts it from a label: 1
 * to max - 1 bytes of printable ASCII, terminated inside max bytes.  A
 * name on disk is shown in messages, so a byte that could add a line or
 * a terminal control there is damage, not a name. */
bool zv_name_is_valid (const char *s, size_t max);

/* Physical memory in bytes, or 'unknown' when the system does not say. */
uint64_t zv_physical_memory (uint64_t unknown);

/* memcpy (no overlap), at full speed whatever the alignment of the two
 * buffers: for the bulk copies between the cache's blocks and a
 * caller's buffer (zv_util.c, "Bulk copies"). */
void zv_copy (void *dst, const void *src, size_t n);
/* zv_copy into memory nothing reads soon (a whole block a write fills,
 * which the device takes by DMA): the stores bypass the processor's
 * caches, so the destination's old lines are neither read nor kept
 * (zv_util.c, "Bulk copies"). */
void zv_copy_stream (void *dst, const void *src, size_t n);

/* Name the calling thread (what top -H, perf and gdb show), cut to the
 * 15 characters the kernel keeps; a failure changes nothing else. */
void zv_thread_name (const char *name);

/* True when every byte of buf is zero. */
bool zv_is_zero (const void *buf, size_t len);

/* A long command's cancel descriptors (fd[0]: its client's connection,
 * fd[1]: the server's stop pipe; -1 or fd NULL: none), polled without
 * waiting: 0, or 1 + the index of the first readable or hung up. */
unsigned zv_cancel_poll (const int fd[2]);

/* Round up / down to a power-of-two alignment. */
#define ZV_P2ROUNDUP(x, a) (((x) + (a) - 1) & ~((uint64_t) (a) - 1))
#define ZV_P2ALIGN(x, a) ((x) & ~((uint64_t) (a) - 1))

/*
 * Smaller / larger of two values, each argument evaluated exactly once (a
 * GNU statement expression), so ZV_MAX (t, zv_zil_log_write (...)) logs
 * once.  The temporaries have the type the plain ?: expression would
 * have (typeof does not evaluate), so the result and the warnings are
 * those of ((a) < (b) ? (a) : (b)).  Their names are made unique with
 * __COUNTER__ so that nested uses do not shadow each other (-Wshadow).
 * A statement expression is not a constant expression: array sizes,
 * static initializers and static_assert use ZV_MIN_CONST / ZV_MAX_CONST,
 * which evaluate an argument twice and so want side-effect-free ones.
 */
#define ZV_MIN(a, b) ZV_CMP_ONCE_ (<, a, b, __COUNTER__)
#define ZV_MAX(a, b) ZV_CMP_ONCE_ (>, a, b, __COUNTER__)
#define ZV_MIN_CONST(a, b) ((a) < (b) ? (a) : (b))
#define ZV_MAX_CONST(a, b) ((a) > (b) ? (a) : (b))
#define ZV_CMP_ONCE_(op, a, b, n) ZV_CMP_ONCE2_ (op, a, b, n)
#define ZV_CMP_ONCE2_(op, a, b, n)                                      \
  __extension__ ({                                                     \
      __typeof__ ((a) op (b) ? (a) : (b)) zv_cmp_a_##n = (a);          \
      __typeof__ (zv_cmp_a_##n) zv_cmp_b_##n = (b);                    \
      zv_cmp_a_##n op zv_cmp_b_##n ? zv_cmp_a_##n : zv_cmp_b_##n;      \
    })

#endif /* ZV_UTIL_H */
