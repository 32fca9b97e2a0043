/*
 * fuzz.h: what the libFuzzer harnesses of tests/fuzz share, on top of
 * testlib.h's data helpers:
 *
 *   input      a cursor over the fuzz input that reads fixed-width
 *              little-endian fields and gives zeros once it runs out, so
 *              every input, however short, is a whole case
 *   devices    memory devices: a memfd the engine opens by its
 *              /proc/self/fd path (tmpfs: buffered I/O), mapped into the
 *              harness so it can lay out and clear blocks without I/O
 *   log        a log hook that keeps quiet (ZV_FUZZ_VERBOSE=1 prints),
 *              and an optional check on every message (fuzz_name's)
 *   checks     FZ_CHECK: an invariant the engine promised; when it does
 *              not hold the harness aborts, which libFuzzer reports as a
 *              crash with the input that did it
 *   data       where the seed maker left the images (fz_data_path)
 *
 * Header-only, like testlib.h.  Each harness is one process, one thread
 * (the engine's sync runs inline: no pool thread is started), so nothing
 * here locks.
 */
#ifndef ZV_FUZZ_H
#define ZV_FUZZ_H

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/mman.h>

#include "testlib.h"

/* ---- checks ---- */

/* An invariant of the engine's answer: abort (a libFuzzer crash) if it
 * does not hold, saying which. */
#define FZ_CHECK(c) do {                                                \
    if (!(c)) {                                                         \
      fprintf (stderr, "fuzz: check failed: %s (%s:%d)\n", #c,          \
               __FILE__, __LINE__);                                     \
      abort ();                                                         \
    }                                                                   \
  } while (0)

/* ---- input ---- */

typedef struct fz_in {
  const uint8_t *fi_p;
  size_t fi_n;
} fz_in_t;

TL_FN fz_in_t
fz_in (const uint8_t *data, size_t size)
{
  return (fz_in_t) { .fi_p = data, .fi_n = size };
}

/* Copy n bytes out, zeros past the end of the input. */
TL_FN void
fz_bytes (fz_in_t *in, void *out, size_t n)
{
  size_t k = ZV_MIN (n, in->fi_n);

  memcpy (out, in->fi_p, k);
  memset ((uint8_t *) out + k, 0, n - k);
  in->fi_p += k;
  in->fi_n -= k;
}

TL_FN uint64_t
fz_uint (fz_in_t *in, unsigned nbytes)
{
  uint8_t b[8];
  uint64_t v = 0;

  fz_bytes (in, b, nbytes);
  for (unsigned i = nbytes; i-- > 0;)
    v = v << 8 | b[i];
  return v;
}

#define fz_u8(in) ((uint8_t) fz_uint ((in), 1))
#define fz_u16(in) ((uint16_t) fz_uint ((in), 2))
#define fz_u32(in) ((uint32_t) fz_uint ((in), 4))
#define fz_u64(in) fz_uint ((in), 8)

TL_FN bool
fz_more (const fz_in_t *in)
{
  return in->fi_n > 0;
}

/* ---- log ---- */

/* Called with every message when set (fuzz_name checks them). */
static void (*fz_log_check) (enum zv_log_level level, const char *msg);
/* Errors logged so far (a harness resets it). */
static unsigned fz_log_errors;

TL_FN void
fz_log_hook (enum zv_log_level level, const char *msg)
{
  static int verbose = -1;

  if (verbose < 0)
    verbose = getenv ("ZV_FUZZ_VERBOSE") != NULL;
  if (verbose)
    fprintf (stderr, "  [zv%s] %s\n", level >= ZV_LOG_ERROR ? " error" : "",
             msg);
  if (level >= ZV_LOG_ERROR)
    fz_log_errors++;
  if (fz_log_check)
    fz_log_check (level, msg);
}

/* Every harness's first step: the quiet log. */
TL_FN void
fz_setup (void)
{
  zv_set_log (fz_log_hook);
}

/* ---- memory devices ---- */

typedef struct fz_memdev {
  int md_fd;
  char md_path[64];
  uint8_t *md_map;
  uint64_t md_size;
} fz_memdev_t;

/* A memfd of 'size' bytes (zeros), mapped; the engine opens md_path. */
TL_FN void
fz_memdev_create (fz_memdev_t *md, const char *name, uint64_t size)
{
  md->md_fd = memfd_create (name, MFD_CLOEXEC);
  if (md->md_fd < 0 || ftruncate (md->md_fd, (off_t) size) < 0) {
    perror ("fuzz: memfd");
    abort ();
  }
  md->md_size = size;
  md->md_map = mmap (NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED,
                     md->md_fd, 0);
  if (md->md_map == MAP_FAILED) {
    perror ("fuzz: mmap");
    abort ();
  }
  snprintf (md->md_path, sizeof md->md_path, "/proc/self/fd/%d", md->md_fd);
}

/* Open it as the engine does; it must open. */
TL_FN zv_dev_t *
fz_memdev_open (const fz_memdev_t *md)
{
  zv_dev_t *dev = NULL;
  char err[256];

  if (zv_dev_open (md->md_path, &dev, err, sizeof err) < 0) {
    fprintf (stderr, "fuzz: %s\n", err);
    abort ();
  }
  return dev;
}

/* ---- data ---- */

/* A file of the seed maker's data directory (ZV_FUZZ_DATA, else the
 * build tree's tests/fuzz/data). */
TL_FN const char *
fz_data_path (char *buf, size_t len, const char *name)
{
  const char *dir = getenv ("ZV_FUZZ_DATA");

#ifdef ZV_FUZZ_DATA_DIR
  if (dir == NULL || *dir == '\0')
    dir = ZV_FUZZ_DATA_DIR;
#endif
  if (dir == NULL) {
    fprintf (stderr, "fuzz: ZV_FUZZ_DATA is not set\n");
    abort ();
  }
  snprintf (buf, len, "%s/%s", dir, name);
  return buf;
}

#endif /* ZV_FUZZ_H */
