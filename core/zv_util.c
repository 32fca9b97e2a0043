/*
 * zv_util.c: logging hook, asserts, aligned buffers, XXH3 checksums.
 */
#include <config.h>

#include <stdarg.h>
#include <string.h>
#include <errno.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

#include "zv_util.h"

static zv_log_fn zv_log_hook;
static enum zv_log_level zv_log_min = ZV_LOG_INFO;

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
    fprintf (stderr, "zvol: %s\n", msg);
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

/* Zeroed, sector-aligned buffer for direct I/O. */
void *
zv_buf_alloc (size_t size)
{
  void *p = NULL;
  size_t rounded = ZV_P2ROUNDUP (size ? size : 1, ZV_SECTOR);

  if (posix_memalign (&p, ZV_SECTOR, rounded) != 0) {
    fprintf (stderr, "zvol: out of memory allocating %zu bytes\n", rounded);
    abort ();
  }
  memset (p, 0, rounded);
  return p;
}

void
zv_buf_free (void *buf)
{
  free (buf);
}

/* XXH3-128 of a block, seeded so a block from another place or pool
 * does not verify by accident. */
void
zv_cksum_compute (const void *buf, size_t len, uint64_t seed,
                  zv_cksum_t *out)
{
  XXH128_hash_t h = XXH3_128bits_withSeed (buf, len, seed);
  out->zc_word[0] = h.low64;
  out->zc_word[1] = h.high64;
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
