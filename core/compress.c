/*
 * compress.c: inline compression of volume data blocks.
 *
 * Theory.  The txg sync compresses each dirty data block of a volume
 * whose property says so before it checksums and allocates it (dmu.c);
 * reads verify the bytes on disk and only then decompress (zio.c).  A
 * block is kept compressed only when that saves at least an eighth of
 * it once rounded up to the allocation unit (ZV_SECTOR), as OpenZFS
 * does: a 4 KiB block never compresses, an 8 KiB one only to 4 KiB.
 * The compressor's output room is that bound, so both lz4 and zstd give
 * up as soon as the output would not fit, without finishing the block.
 *
 * Layout of a stored block: a 4-byte little-endian payload length
 * (ZV_COMP_HDR), the payload (an lz4 block, or one zstd frame), zeros
 * to the next ZV_SECTOR.  The checksum covers all of it.  The reader
 * trusts nothing: the length must fit the block, the decompressor runs
 * with exactly lsize bytes of room and must fill them exactly, and the
 * padding must be zero (what a writer stores), so a block that verifies
 * but was not written by this code reads as EIO, never as garbage.
 *
 * Early abort (zv_comp_predict_incompressible).  OpenZFS's lz4 pass as a
 * predictor of zstd only runs on blocks of 128 KiB and more; here blocks
 * are 4-128 KiB, and incompressible data (already compressed, encrypted)
 * would pay a whole compression per block for nothing.  The test used
 * is the order-0 entropy of a sample: every seventh byte of 4 runs of
 * 512 bytes, one run in each quarter of the block at a phase of its own
 * (296 bytes over 2 KiB, whatever the block's size).
 * Runs of whole cache lines, since the block is cold by its sync (32
 * runs of 64 bytes cost 16 us a block in misses), and of 512 bytes, so
 * that each spans one record of data laid out in records of up to 512
 * (fio's buffer_compress_chunk: noise, then a constant): a shorter run
 * can land on the noise alone.
 * A block must save an eighth to be kept compressed, which order-0
 * coding alone reaches at 7 bits a byte, and lz4 (no entropy coder)
 * needs matches for; so a sample above ZV_COMP_PREDICT_BITS (6.5) says
 * "store it as it is".  An estimate from a sample is biased low, the
 * more so the smaller the sample: uniform random bytes measure 7.1 to
 * 7.4 from these 296 bytes (7.6 to 7.8 from the 684 of every third
 * byte, this sample's first form), noise with a few zero bytes every
 * 512 (fio's default buffers) as much.  With every third byte,
 * half-compressible data (fio buffer_compress_percentage=50) measured
 * 4.4 to 4.7, 256-byte records of noise and of a constant that changes
 * from one record to the next (test_compress) 5.7 to 5.9, 16-bit values
 * in 32-bit words 4.6 to 4.7, text about 4.5: lower still from fewer
 * bytes.  Its cost, in
 * instructions (bench/core-bench write-4k, a 16 KiB block per write):
 * a whole 2 KiB counted took 12,600 a block, as much as the rest of the
 * write; every third byte of it, with the sum of c log2 c taken over
 * the 256 counts at the end, 5,360; every seventh, the sum kept as the
 * bytes are counted and the loop unrolled, 1,800 (the test_compress
 * cases pass either way).  A first version summed the squares of the
 * counts of a 512-byte sample: one short run of zeros in it (fio's buffer
 * headers) passed the whole block to lz4, which then saved 3% and was
 * kept whole: 96% of fio's blocks cost a compression for nothing, and
 * the single sync thread ran at a third of the speed.  The sample's one
 * blind spot is data whose bytes are uniform but which repeats at a long
 * range (a
 * random pattern written twice in a block): stored uncompressed, as if
 * incompressible.  A block the sample lets through is compressed whole,
 * bounded as above.
 *
 * Locking: none.  zstd keeps a compression and a decompression context
 * per thread (a thread-specific key frees them at thread exit); lz4
 * keeps its state on the stack.  The counters are relaxed atomics.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <lz4.h>
#include <zstd.h>

#include "zv_util.h"
#include "compress.h"

/* Entropy of the sample (bits a byte) above which a block is stored as
 * it is (the theory comment says why 7). */
#define ZV_COMP_PREDICT_BITS  6.5
#define ZV_COMP_SAMPLE_RUNS   4u
#define ZV_COMP_SAMPLE_RUN    512u

static _Atomic uint64_t comp_tried, comp_aborted, comp_kept, comp_compressed;
static _Atomic bool comp_predict_on = true;

static pthread_key_t comp_key;
static pthread_once_t comp_key_once = PTHREAD_ONCE_INIT;

typedef struct comp_tls {
  ZSTD_CCtx *ct_cctx;
  ZSTD_DCtx *ct_dctx;
} comp_tls_t;

static void
comp_tls_free (void *arg)
{
  comp_tls_t *t = arg;

  ZSTD_freeCCtx (t->ct_cctx);
  ZSTD_freeDCtx (t->ct_dctx);
  free (t);
}

static void
comp_key_init (void)
{
  ZV_VERIFY (pthread_key_create (&comp_key, comp_tls_free) == 0);
}

static comp_tls_t *
comp_tls (void)
{
  comp_tls_t *t;

  pthread_once (&comp_key_once, comp_key_init);
  t = pthread_getspecific (comp_key);
  if (t == NULL) {
    t = zv_calloc (1, sizeof *t);
    ZV_VERIFY (pthread_setspecific (comp_key, t) == 0);
  }
  return t;
}

bool
zv_comp_prop_valid (uint32_t p)
{
  unsigned alg = ZV_COMP_PROP_ALG (p), level = ZV_COMP_PROP_LEVEL (p);

  if (p >> 16 != 0 || alg >= ZV_COMP_NALGS)
    return false;
  if (alg == ZV_COMP_ZSTD)
    return level >= 1 && level <= ZV_COMP_ZSTD_MAX_LEVEL;
  return level == 0;
}

int
zv_comp_prop_parse (const char *s, uint32_t *p)
{
  if (strcmp (s, "off") == 0)
    *p = ZV_COMP_PROP (ZV_COMP_OFF, 0);
  else if (strcmp (s, "lz4") == 0 || strcmp (s, "on") == 0)
    *p = ZV_COMP_PROP (ZV_COMP_LZ4, 0);
  else if (strcmp (s, "zstd") == 0)
    *p = ZV_COMP_PROP (ZV_COMP_ZSTD, ZV_COMP_ZSTD_DEFAULT_LEVEL);
  else if (strncmp (s, "zstd-", 5) == 0) {
    char *end;
    unsigned long l;

    if (s[5] < '0' || s[5] > '9')
      return -EINVAL;
    l = strtoul (s + 5, &end, 10);
    if (*end != '\0' || l < 1 || l > ZV_COMP_ZSTD_MAX_LEVEL)
      return -EINVAL;
    *p = ZV_COMP_PROP (ZV_COMP_ZSTD, l);
  }
  else
    return -EINVAL;
  return 0;
}

void
zv_comp_prop_name (uint32_t p, char *buf, size_t len)
{
  switch (zv_comp_prop_valid (p) ? ZV_COMP_PROP_ALG (p) : ZV_COMP_NALGS) {
  case ZV_COMP_OFF:
    snprintf (buf, len, "off");
    break;
  case ZV_COMP_LZ4:
    snprintf (buf, len, "lz4");
    break;
  case ZV_COMP_ZSTD:
    if (ZV_COMP_PROP_LEVEL (p) == ZV_COMP_ZSTD_DEFAULT_LEVEL)
      snprintf (buf, len, "zstd");
    else
      snprintf (buf, len, "zstd-%u", ZV_COMP_PROP_LEVEL (p));
    break;
  default:
    snprintf (buf, len, "unknown(%#" PRIx32 ")", p);
    break;
  }
}

void
zv_comp_set_predict (bool on)
{
  atomic_store_explicit (&comp_predict_on, on, memory_order_relaxed);
}

/* Every ZV_COMP_SAMPLE_STRIDE-th byte of each run is counted: a stride
 * prime to every power of two, so that words of 2, 4 or 8 bytes are
 * seen at every byte of theirs (a stride of 4 would see only the low
 * byte of 32-bit integers).  The span sampled, for the length check. */
#define ZV_COMP_SAMPLE_STRIDE 7u
#define ZV_COMP_SAMPLE (ZV_COMP_SAMPLE_RUNS * ZV_COMP_SAMPLE_RUN)
#define ZV_COMP_SAMPLE_N (ZV_COMP_SAMPLE_RUNS * ((ZV_COMP_SAMPLE_RUN \
                          + ZV_COMP_SAMPLE_STRIDE - 1) / ZV_COMP_SAMPLE_STRIDE))
/* What one more byte of a value already counted c times adds to
 * sum c log2 c, for every count a sample can hold, made once: the sum is
 * kept as the bytes are counted, with no pass over the 256 counts. */
static float comp_dclogc[ZV_COMP_SAMPLE_N];
static double comp_log2_sample;
static pthread_once_t comp_clogc_once = PTHREAD_ONCE_INIT;

static double
comp_clogc (unsigned c)
{
  return c ? (double) c * log2 ((double) c) : 0;
}

static void
comp_clogc_init (void)
{
  for (unsigned c = 0; c < ZV_COMP_SAMPLE_N; c++)
    comp_dclogc[c] = (float) (comp_clogc (c + 1) - comp_clogc (c));
  comp_log2_sample = log2 ((double) ZV_COMP_SAMPLE_N);
}

bool
zv_comp_predict_incompressible (const void *src, uint32_t len)
{
  const uint8_t *b = src;
  uint16_t count[256] = { 0 };
  float sum = 0;
  double bits;
  uint32_t step;

  if (len < ZV_COMP_SAMPLE)
    return false;
  ZV_VERIFY (pthread_once (&comp_clogc_once, comp_clogc_init) == 0);
  step = len / ZV_COMP_SAMPLE_RUNS;
  for (unsigned r = 0; r < ZV_COMP_SAMPLE_RUNS; r++) {
    /* Each run at its own phase inside its share (a multiplicative
     * hash of r): runs at a fixed stride would all land on the same
     * part of data laid out in records of a power-of-two size (fio's
     * buffer_compress_chunk makes 512-byte records of noise then zeros). */
    uint32_t phase = (uint32_t) ((r + 1) * 2654435761u)
      % (step - ZV_COMP_SAMPLE_RUN + 1);
    const uint8_t *s = b + (size_t) r * step + phase;
    /* Unrolled: the loop's own compare and branch were 3 of its 8
     * instructions a byte. */
#pragma GCC unroll 8
    for (unsigned i = 0; i < ZV_COMP_SAMPLE_RUN; i += ZV_COMP_SAMPLE_STRIDE)
      sum += comp_dclogc[count[s[i]]++];
  }
  /* H = log2 n - (1/n) sum c log2 c */
  bits = comp_log2_sample - (double) sum / ZV_COMP_SAMPLE_N;
  return bits > ZV_COMP_PREDICT_BITS;
}

/* See compress.h.  The same tests as zv_comp_compress's, in its order. */
bool
zv_comp_refuses (uint32_t p, const void *src, uint32_t lsize)
{
  uint32_t room = ZV_P2ALIGN (lsize - lsize / 8, ZV_SECTOR);

  if (!zv_comp_prop_valid (p) || ZV_COMP_PROP_ALG (p) == ZV_COMP_OFF
      || room <= ZV_COMP_HDR)
    return false;
  return atomic_load_explicit (&comp_predict_on, memory_order_relaxed)
    && zv_comp_predict_incompressible (src, lsize);
}

void
zv_comp_count_refused (void)
{
  atomic_fetch_add_explicit (&comp_tried, 1, memory_order_relaxed);
  atomic_fetch_add_explicit (&comp_aborted, 1, memory_order_relaxed);
}

/* zv_comp_compress; 'asked': the caller's zv_comp_refuses said no
 * already, and the sample is not taken twice. */
static uint32_t
comp_compress (uint32_t p, const void *src, uint32_t lsize, void *dst,
               bool asked)
{
  unsigned alg = ZV_COMP_PROP_ALG (p);
  /* Keep it only if it saves an eighth, counted in allocation units. */
  uint32_t room = ZV_P2ALIGN (lsize - lsize / 8, ZV_SECTOR);
  uint8_t *out = dst;
  size_t clen;

  ZV_ASSERT (zv_comp_prop_valid (p));
  if (alg == ZV_COMP_OFF || room <= ZV_COMP_HDR)
    return 0;
  atomic_fetch_add_explicit (&comp_tried, 1, memory_order_relaxed);
  if (!asked && atomic_load_explicit (&comp_predict_on, memory_order_relaxed)
      && zv_comp_predict_incompressible (src, lsize)) {
    atomic_fetch_add_explicit (&comp_aborted, 1, memory_order_relaxed);
    return 0;
  }
  if (alg == ZV_COMP_LZ4) {
    int n = LZ4_compress_default (src, (char *) out + ZV_COMP_HDR,
                                  (int) lsize, (int) (room - ZV_COMP_HDR));
    clen = n > 0 ? (size_t) n : 0;
  }
  else {
    comp_tls_t *t = comp_tls ();
    size_t n;

    if (t->ct_cctx == NULL && (t->ct_cctx = ZSTD_createCCtx ()) == NULL)
      zv_nomem (sizeof (void *));
    n = ZSTD_compressCCtx (t->ct_cctx, out + ZV_COMP_HDR, room - ZV_COMP_HDR,
                           src, lsize, (int) ZV_COMP_PROP_LEVEL (p));
    clen = ZSTD_isError (n) ? 0 : n;
  }
  if (clen == 0) {
    atomic_fetch_add_explicit (&comp_kept, 1, memory_order_relaxed);
    return 0;
  }
  uint32_t stored = ZV_P2ROUNDUP ((uint32_t) clen + ZV_COMP_HDR, ZV_SECTOR);
  ZV_VERIFY3U (stored, <=, room);
  out[0] = (uint8_t) clen;
  out[1] = (uint8_t) (clen >> 8);
  out[2] = (uint8_t) (clen >> 16);
  out[3] = (uint8_t) (clen >> 24);
  memset (out + ZV_COMP_HDR + clen, 0, stored - ZV_COMP_HDR - clen);
  atomic_fetch_add_explicit (&comp_compressed, 1, memory_order_relaxed);
  return stored;
}

uint32_t
zv_comp_compress (uint32_t p, const void *src, uint32_t lsize, void *dst)
{
  return comp_compress (p, src, lsize, dst, false);
}

uint32_t
zv_comp_compress_asked (uint32_t p, const void *src, uint32_t lsize,
                        void *dst)
{
  return comp_compress (p, src, lsize, dst, true);
}

int
zv_comp_decompress (unsigned alg, const void *src, uint32_t psize,
                    void *dst, uint32_t lsize, const char *what)
{
  const uint8_t *in = src;
  uint32_t clen;
  size_t got;

  if (psize < ZV_SECTOR || psize >= lsize || psize % ZV_SECTOR != 0
      || (alg != ZV_COMP_LZ4 && alg != ZV_COMP_ZSTD)) {
    zv_error ("%s: invalid compressed block (algorithm %u, %" PRIu32
              " bytes on disk for %" PRIu32 ")", what, alg, psize, lsize);
    return -EIO;
  }
  clen = (uint32_t) in[0] | (uint32_t) in[1] << 8 | (uint32_t) in[2] << 16
    | (uint32_t) in[3] << 24;
  if (clen == 0 || clen > psize - ZV_COMP_HDR
      || ZV_P2ROUNDUP (clen + ZV_COMP_HDR, ZV_SECTOR) != psize
      || !zv_is_zero (in + ZV_COMP_HDR + clen, psize - ZV_COMP_HDR - clen)) {
    zv_error ("%s: compressed block header says %" PRIu32 " bytes in a "
              "block of %" PRIu32 ": not a block this format writes", what,
              clen, psize);
    return -EIO;
  }
  if (alg == ZV_COMP_LZ4) {
    int n = LZ4_decompress_safe ((const char *) in + ZV_COMP_HDR, dst,
                                 (int) clen, (int) lsize);
    got = n < 0 ? SIZE_MAX : (size_t) n;
  }
  else {
    comp_tls_t *t = comp_tls ();
    size_t n;

    if (t->ct_dctx == NULL && (t->ct_dctx = ZSTD_createDCtx ()) == NULL)
      zv_nomem (sizeof (void *));
    n = ZSTD_decompressDCtx (t->ct_dctx, dst, lsize, in + ZV_COMP_HDR, clen);
    got = ZSTD_isError (n) ? SIZE_MAX : n;
  }
  if (got != lsize) {
    if (got == SIZE_MAX)
      zv_error ("%s: compressed block does not decompress (%s)", what,
                alg == ZV_COMP_LZ4 ? "lz4" : "zstd");
    else
      zv_error ("%s: compressed block decompresses to %zu bytes, its "
                "pointer says %" PRIu32, what, got, lsize);
    return -EIO;
  }
  return 0;
}

void
zv_comp_stats (zv_comp_stats_t *out)
{
  out->cs_tried = atomic_load_explicit (&comp_tried, memory_order_relaxed);
  out->cs_aborted = atomic_load_explicit (&comp_aborted,
                                          memory_order_relaxed);
  out->cs_kept = atomic_load_explicit (&comp_kept, memory_order_relaxed);
  out->cs_compressed = atomic_load_explicit (&comp_compressed,
                                             memory_order_relaxed);
}
