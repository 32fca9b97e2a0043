/*
 * test_compress.c: inline compression (core/compress.c, its use by the
 * sync and the reads of core/dmu.c and core/zio.c, the property and the
 * figures of core/dsdir.c).
 *
 * Three layers: the codec alone (round trips at every algorithm and
 * block size, the 1/8 rule, the early abort, hostile stored blocks); one
 * object on a bare zv_spa_t, as test_dmu.c builds it, where the block
 * pointers can be looked at and forged (sizes on disk, a damaged block,
 * hostile pointers); and whole pools through zvol.h (every algorithm
 * and block size mixed with snapshots, trim and zero, through export
 * and the full-walk import and the checker; the figures; the property
 * set live; a clone inheriting it).
 *
 * Devices are sparse files in a mkdtemp directory under /var/tmp.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testlib.h"
#include "dbuf.h"
#include "dmu.h"
#include "pool.h"
#include "compress.h"
#include "compq.h"
#include "send.h"
#include <sys/wait.h>

#define DEV_SIZE (64 * MiB)

static const char *const tc_algs[] = { "off", "lz4", "zstd", "zstd-1",
                                       "zstd-19" };
#define TC_NALGS (sizeof tc_algs / sizeof tc_algs[0])

/* Data that compresses about 2:1 (what fio's
 * buffer_compress_percentage=50 makes): each 512-byte run is half noise,
 * half a repeated byte. */
static void
tc_fill_half (uint8_t *buf, size_t len, uint64_t *s)
{
  tl_fill_rand (buf, len, s);
  for (size_t i = 0; i < len; i += 512)
    memset (buf + i + 256, (int) (i / 512), ZV_MIN (256, len - i - 256));
}

/* Text-like data (a few words over and over): compresses well. */
static void
tc_fill_text (uint8_t *buf, size_t len, uint64_t *s)
{
  static const char *const words[] = { "block ", "pointer ", "txg ",
                                       "volume ", "sync ", "the ", "of " };
  size_t i = 0;

  while (i < len) {
    const char *w = words[tl_rand (s) % 7];
    size_t n = ZV_MIN (strlen (w), len - i);
    memcpy (buf + i, w, n);
    i += n;
  }
}

/* ---- the codec ---- */

static void
test_codec_roundtrip (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("codec");
  uint8_t *src = malloc (ZV_MAX_BLKSZ), *dst = malloc (ZV_MAX_BLKSZ);
  uint8_t *back = malloc (ZV_MAX_BLKSZ);

  assert_non_null (src);
  assert_non_null (dst);
  assert_non_null (back);
  for (size_t a = 0; a < TC_NALGS; a++) {
    uint32_t p;
    assert_int_equal (zv_comp_prop_parse (tc_algs[a], &p), 0);
    assert_true (zv_comp_prop_valid (p));
    for (uint32_t bs = 4096; bs <= ZV_MAX_BLKSZ; bs *= 2) {
      for (int kind = 0; kind < 3; kind++) {
        if (kind == 0)
          tl_fill_rand (src, bs, &s);
        else if (kind == 1)
          tc_fill_half (src, bs, &s);
        else
          tc_fill_text (src, bs, &s);
        uint32_t ps = zv_comp_compress (p, src, bs, dst);
        /* Off, incompressible, and 4 KiB (one allocation unit) stay. */
        if (a == 0 || kind == 0 || bs == 4096) {
          assert_int_equal (ps, 0);
          continue;
        }
        /* Half noise in 8 KiB does not fit one sector with its header. */
        if (kind == 1 && bs == 8192 && ps == 0)
          continue;
        assert_int_not_equal (ps, 0);
        assert_int_equal (ps % ZV_SECTOR, 0);
        assert_true (ps <= bs - bs / 8);
        memset (back, 0xa5, bs);
        assert_int_equal (zv_comp_decompress (ZV_COMP_PROP_ALG (p), dst, ps,
                                              back, bs, "codec"), 0);
        assert_memory_equal (back, src, bs);
      }
    }
  }
  /* Names round trip; bad ones are refused. */
  static const char *const bad[] = { "", "gzip", "zstd-0", "zstd-20",
                                     "zstd-", "zstd-3x", "lz4 ", "zstd--1" };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    uint32_t p = 77;
    assert_int_equal (zv_comp_prop_parse (bad[i], &p), -EINVAL);
  }
  char name[32];
  uint32_t p;
  assert_int_equal (zv_comp_prop_parse ("zstd-7", &p), 0);
  zv_comp_prop_name (p, name, sizeof name);
  assert_string_equal (name, "zstd-7");
  assert_false (zv_comp_prop_valid (ZV_COMP_PROP (ZV_COMP_NALGS, 0)));
  assert_false (zv_comp_prop_valid (ZV_COMP_PROP (ZV_COMP_LZ4, 1)));
  free (src);
  free (dst);
  free (back);
}

/* The sample says "random" for noise (fio's default buffers too: noise
 * with short runs of zeros) and lets every compressible kind through,
 * at every block size; with it off, noise costs a whole
 * compression that then saves too little. */
static void
test_codec_predict (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("predict");
  uint8_t *src = malloc (ZV_MAX_BLKSZ), *dst = malloc (ZV_MAX_BLKSZ);
  zv_comp_stats_t a, b;

  assert_non_null (src);
  assert_non_null (dst);
  for (uint32_t bs = 8192; bs <= ZV_MAX_BLKSZ; bs *= 2) {
    for (int i = 0; i < 50; i++) {
      tl_fill_rand (src, bs, &s);
      assert_true (zv_comp_predict_incompressible (src, bs));
      /* fio's default buffers: noise with a few zero bytes every 512,
       * which save far less than an eighth. */
      for (uint32_t o = 0; o + 512 <= bs; o += 512)
        memset (src + o + 48, 0, 12);
      assert_true (zv_comp_predict_incompressible (src, bs));
      tc_fill_half (src, bs, &s);
      assert_false (zv_comp_predict_incompressible (src, bs));
      tc_fill_text (src, bs, &s);
      assert_false (zv_comp_predict_incompressible (src, bs));
      /* 16-bit values in 32-bit words: a sample that saw one byte of
       * each word would call them random. */
      for (uint32_t o = 0; o + 4 <= bs; o += 4) {
        uint32_t v = (uint32_t) (tl_rand (&s) & 0xffff);
        memcpy (src + o, &v, 4);
      }
      assert_false (zv_comp_predict_incompressible (src, bs));
      memset (src, 0, bs);
      assert_false (zv_comp_predict_incompressible (src, bs));
    }
  }
  zv_comp_stats (&a);
  tl_fill_rand (src, 16384, &s);
  assert_int_equal (zv_comp_compress (ZV_COMP_DEFAULT, src, 16384, dst), 0);
  zv_comp_stats (&b);
  assert_int_equal (b.cs_aborted, a.cs_aborted + 1);
  zv_comp_set_predict (false);
  assert_int_equal (zv_comp_compress (ZV_COMP_DEFAULT, src, 16384, dst), 0);
  zv_comp_set_predict (true);
  zv_comp_stats (&a);
  assert_int_equal (a.cs_aborted, b.cs_aborted);
  assert_int_equal (a.cs_kept, b.cs_kept + 1);
  /* A writer that asked the sample already is not asked again: noise it
   * hands over anyway costs the pass (kept, not aborted). */
  assert_int_equal (zv_comp_compress_asked (ZV_COMP_DEFAULT, src, 16384,
                                            dst), 0);
  zv_comp_stats (&b);
  assert_int_equal (b.cs_aborted, a.cs_aborted);
  assert_int_equal (b.cs_kept, a.cs_kept + 1);
  free (src);
  free (dst);
}

static double
tc_now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec * 1e9 + (double) ts.tv_nsec;
}

/* Nanoseconds per block of one compression call (best of 5 rounds of
 * 'n' calls: the machine is shared). */
static double
tc_cost (uint32_t p, bool predict, const uint8_t *src, uint32_t bs,
         uint8_t *dst, int n)
{
  double best = 1e30;

  zv_comp_set_predict (predict);
  for (int round = 0; round < 5; round++) {
    double t0 = tc_now_ns ();
    for (int i = 0; i < n; i++)
      (void) zv_comp_compress (p, src, bs, dst);
    best = ZV_MIN (best, (tc_now_ns () - t0) / n);
  }
  zv_comp_set_predict (true);
  return best;
}

/* The early abort's measure (docs/design.md has a run's figures): per
 * block size, what a write of noise costs with the sample and without
 * (a whole lz4 or zstd pass that then saves too little), and what the
 * sample adds to a compressible block.  The sample must cost less than
 * the pass it saves from 16 KiB on. */
static void
test_codec_cost (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("cost");
  uint8_t *rnd = malloc (ZV_MAX_BLKSZ), *half = malloc (ZV_MAX_BLKSZ);
  uint8_t *dst = malloc (ZV_MAX_BLKSZ);
  const uint32_t lz4 = ZV_COMP_DEFAULT;
  const uint32_t zstd = ZV_COMP_PROP (ZV_COMP_ZSTD, 3);

  assert_non_null (rnd);
  assert_non_null (half);
  assert_non_null (dst);
  tl_fill_rand (rnd, ZV_MAX_BLKSZ, &s);
  tc_fill_half (half, ZV_MAX_BLKSZ, &s);
  print_message ("  %7s %9s %9s %9s %9s %9s %9s\n", "block", "sample",
                 "lz4-rnd", "zstd-rnd", "lz4-half", "lz4-half+",
                 "zstd-half");
  for (uint32_t bs = 8192; bs <= ZV_MAX_BLKSZ; bs *= 2) {
    int n = (int) (4 * 1024 * 1024 / bs);
    double sample = tc_cost (lz4, true, rnd, bs, dst, n);
    double lz4r = tc_cost (lz4, false, rnd, bs, dst, n);
    double zstdr = tc_cost (zstd, false, rnd, bs, dst, n / 4);
    double lz4h = tc_cost (lz4, false, half, bs, dst, n);
    double lz4hp = tc_cost (lz4, true, half, bs, dst, n);
    double zstdh = tc_cost (zstd, true, half, bs, dst, n / 4);
    print_message ("  %6uK %8.0fns %8.0fns %8.0fns %8.0fns %8.0fns "
                   "%8.0fns\n", bs / 1024, sample, lz4r, zstdr, lz4h, lz4hp,
                   zstdh);
    /* (Timed: not under a sanitizer, whose instrumented sample races an
     * uninstrumented lz4.) */
    if (bs >= 16384 && !TL_TSAN && !TL_ASAN)
      assert_true (sample < lz4r);
  }
  free (rnd);
  free (half);
  free (dst);
}

/* A stored block that is not what a writer stores is refused, and the
 * decompressor never writes past lsize. */
static void
test_codec_hostile (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("hostile");
  const uint32_t bs = 32768;
  uint8_t *src = malloc (bs), *st = malloc (bs), *back = malloc (bs + 64);
  uint8_t *bad = malloc (bs);

  assert_non_null (src);
  assert_non_null (st);
  assert_non_null (back);
  assert_non_null (bad);
  for (unsigned alg = ZV_COMP_LZ4; alg <= ZV_COMP_ZSTD; alg++) {
    uint32_t p = alg == ZV_COMP_LZ4 ? ZV_COMP_PROP (alg, 0)
      : ZV_COMP_PROP (alg, 3);
    tc_fill_text (src, bs, &s);
    uint32_t ps = zv_comp_compress (p, src, bs, st);
    assert_true (ps > 0 && ps < bs);
    tl_log_reset (true);
    /* Sizes: psize not below lsize, not a whole sector, no room. */
    assert_int_equal (zv_comp_decompress (alg, st, bs, back, bs, "t"), -EIO);
    assert_int_equal (zv_comp_decompress (alg, st, ps - 1, back, bs, "t"),
                      -EIO);
    assert_int_equal (zv_comp_decompress (7, st, ps, back, bs, "t"), -EIO);
    assert_int_equal (zv_comp_decompress (0, st, ps, back, bs, "t"), -EIO);
    /* The header's length: zero, past the block, or off by a sector. */
    uint32_t clen;
    memcpy (&clen, st, 4);
    for (int k = 0; k < 4; k++) {
      uint32_t v = k == 0 ? 0 : k == 1 ? ps : k == 2 ? clen + ZV_SECTOR
        : (clen > ZV_SECTOR ? clen - ZV_SECTOR : ps - 3);
      memcpy (bad, st, ps);
      memcpy (bad, &v, 4);
      assert_int_equal (zv_comp_decompress (alg, bad, ps, back, bs, "t"),
                        -EIO);
    }
    /* Padding that is not zero. */
    if (clen + ZV_COMP_HDR < ps) {
      memcpy (bad, st, ps);
      bad[ps - 1] = 1;
      assert_int_equal (zv_comp_decompress (alg, bad, ps, back, bs, "t"),
                        -EIO);
    }
    /* Garbage payload: refused (or, where it happens to decode, never
     * more than lsize and never accepted at a wrong size). */
    for (int k = 0; k < 50; k++) {
      memcpy (bad, st, ps);
      tl_fill_rand (bad + ZV_COMP_HDR, clen, &s);
      back[bs] = 0x5a;
      (void) zv_comp_decompress (alg, bad, ps, back, bs, "t");
      assert_int_equal (back[bs], 0x5a);
    }
    /* A block of other content decompressing to another size. */
    assert_int_equal (zv_comp_decompress (alg, st, ps, back, bs / 2, "t"),
                      -EIO);
    assert_true (tl_log_has ("compressed block"));
    tl_log_reset (false);
  }
  free (src);
  free (st);
  free (back);
  free (bad);
}

/* ---- one object on a bare spa ---- */

typedef struct cenv {
  tl_spa_t ts;
  zv_spa_t *spa;
  zv_dbuf_cache_t *cache;
  zv_object_t ob;
  uint32_t blksz;
  uint64_t nblocks;
} cenv_t;

static void
cenv_open (cenv_t *e, const zv_dnode_phys_t *dn, uint32_t comp)
{
  e->cache = zv_dbuf_cache_create (0);
  assert_non_null (e->cache);
  assert_int_equal (zv_dmu_object_open (&e->ob, e->spa, e->cache, 1, dn), 0);
  atomic_store (&e->ob.ob_compress, comp);
}

static void
cenv_setup (cenv_t *e, const char *name, uint64_t nblocks, uint32_t blksz,
            uint32_t comp)
{
  zv_dnode_phys_t dn;

  memset (e, 0, sizeof *e);
  tl_spa_create (&e->ts, name, 1, DEV_SIZE);
  e->spa = &e->ts.ts_spa;
  atomic_store (&e->spa->spa_features, ZV_FEAT_COMPRESS);
  e->blksz = blksz;
  e->nblocks = nblocks;
  memset (&dn, 0, sizeof dn);
  dn.dn_type = ZV_BT_VOLDATA;
  dn.dn_datablksz = blksz;
  dn.dn_nblocks = nblocks;
  dn.dn_nlevels = zv_dmu_nlevels (nblocks);
  dn.dn_size = nblocks * blksz;
  cenv_open (e, &dn, comp);
}

/* Reopen on a new, empty cache from dn (or the last sync's). */
static void
cenv_reopen (cenv_t *e, const zv_dnode_phys_t *forged)
{
  zv_dnode_phys_t dn;
  uint32_t comp = atomic_load (&e->ob.ob_compress);

  zv_dmu_object_phys (&e->ob, &dn);
  zv_dmu_object_close (&e->ob);
  zv_dbuf_cache_destroy (e->cache);
  cenv_open (e, forged ? forged : &dn, comp);
}

static void
cenv_teardown (cenv_t *e)
{
  zv_dmu_object_close (&e->ob);
  zv_dbuf_cache_destroy (e->cache);
  tl_spa_destroy (&e->ts);
}

/* Every algorithm and block size: compressible blocks are stored in
 * fewer sectors (pointer and allocator agree), noise and 4 KiB blocks
 * whole, and everything reads back through the disk; overwrites, frees
 * and a second txg mixed in. */
static void
test_object_sizes (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("object");
  const uint64_t nb = 24;

  for (size_t a = 0; a < TC_NALGS; a++) {
    uint32_t comp;
    assert_int_equal (zv_comp_prop_parse (tc_algs[a], &comp), 0);
    for (uint32_t bs = 4096; bs <= ZV_MAX_BLKSZ; bs *= 2) {
      cenv_t e;
      uint8_t *shadow = calloc (nb, bs), *buf = malloc (bs);
      assert_non_null (shadow);
      assert_non_null (buf);
      cenv_setup (&e, "obj", nb, bs, comp);
      for (uint64_t b = 0; b < nb; b++) {
        uint8_t *d = shadow + b * bs;
        if (b % 3 == 0)
          tl_fill_rand (d, bs, &s);
        else if (b % 3 == 1)
          tc_fill_half (d, bs, &s);
        else
          tc_fill_text (d, bs, &s);
        assert_int_equal (zv_dmu_write_by_dnode (&e.ob, b * bs, bs, d, 5, NULL),
                          0);
      }
      assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
      /* txg 6: overwrite some with other kinds, free one. */
      for (uint64_t b = 0; b < nb; b += 4) {
        uint8_t *d = shadow + b * bs;
        tc_fill_text (d, bs, &s);
        assert_int_equal (zv_dmu_write_by_dnode (&e.ob, b * bs, bs, d, 6, NULL),
                          0);
      }
      assert_int_equal (zv_dmu_free_by_dnode (&e.ob, 7, 1, 6), 0);
      memset (shadow + 7 * bs, 0, bs);
      assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
      cenv_reopen (&e, NULL);
      uint64_t phys = 0;
      for (uint64_t b = 0; b < nb; b++) {
        zv_blkptr_t bp;
        const uint8_t *d = shadow + b * bs;
        assert_int_equal (zv_dmu_block_bp (&e.ob, b, &bp), 0);
        memset (buf, 0xa5, bs);
        assert_int_equal (zv_dmu_read_by_dnode (&e.ob, b * bs, bs, buf), 0);
        tl_assert_same (buf, d, bs, b * bs, "compressed object");
        if (b == 7) {
          assert_true (zv_bp_is_hole (&bp));
          continue;
        }
        assert_int_equal (bp.bp_lsize, bs);
        phys += bp.bp_psize;
        assert_true (zv_alloc_is_allocated (e.spa->spa_alloc, bp.bp_dva[0],
                                            bp.bp_psize));
        /* Stored exactly as the codec says (noise, 4 KiB blocks and
         * half noise in 8 KiB stay whole). */
        uint32_t want = comp ? zv_comp_compress (comp, d, bs, buf) : 0;
        if (comp == 0 || bs == 4096
            || zv_comp_predict_incompressible (d, bs))
          assert_int_equal (want, 0);
        if (want == 0) {
          assert_int_equal (bp.bp_comp, 0);
          assert_int_equal (bp.bp_psize, bs);
        }
        else {
          assert_int_equal (bp.bp_comp, ZV_COMP_PROP_ALG (comp));
          assert_int_equal (bp.bp_psize, want);
          assert_true (bp.bp_psize <= bs - bs / 8);
        }
      }
      /* The space taken: the volume's written counts it on disk. */
      assert_int_equal (e.ob.ob_written, 0);  /* (reopened: not kept) */
      if (comp != 0 && bs > 8192)
        assert_true (phys < (nb - 1) * (uint64_t) bs * 3 / 4);
      cenv_teardown (&e);
      free (shadow);
      free (buf);
    }
  }
}

/* The written figures of one sync: physical and logical. */
static void
test_object_written (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("written");
  const uint32_t bs = 16384;
  cenv_t e;
  uint8_t *d = malloc (bs);

  assert_non_null (d);
  cenv_setup (&e, "wr", 16, bs, ZV_COMP_DEFAULT);
  for (uint64_t b = 0; b < 16; b++) {
    tc_fill_text (d, bs, &s);
    assert_int_equal (zv_dmu_write_by_dnode (&e.ob, b * bs, bs, d, 5, NULL), 0);
  }
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  assert_int_equal (e.ob.ob_lwritten, 16 * bs);
  assert_true (e.ob.ob_written <= 16 * (uint64_t) bs / 2);
  /* Overwritten with noise: both back to the logical size. */
  for (uint64_t b = 0; b < 16; b++) {
    tl_fill_rand (d, bs, &s);
    assert_int_equal (zv_dmu_write_by_dnode (&e.ob, b * bs, bs, d, 6, NULL), 0);
  }
  assert_int_equal (zv_dmu_sync (&e.ob, 6), 0);
  assert_int_equal (e.ob.ob_lwritten, 16 * bs);
  assert_int_equal (e.ob.ob_written, 16 * bs);
  /* Freed: nothing. */
  assert_int_equal (zv_dmu_free_by_dnode (&e.ob, 0, 16, 7), 0);
  assert_int_equal (zv_dmu_sync (&e.ob, 7), 0);
  assert_int_equal (e.ob.ob_lwritten, 0);
  assert_int_equal (e.ob.ob_written, 0);
  cenv_teardown (&e);
  free (d);
}

/* A damaged compressed block reads as EIO (the checksum covers the bytes
 * on disk: the decompressor never sees them). */
static void
test_object_damaged (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("damaged");
  const uint32_t bs = 16384;
  cenv_t e;
  uint8_t *d = malloc (bs), *buf = malloc (bs);
  zv_blkptr_t bp;

  assert_non_null (d);
  assert_non_null (buf);
  cenv_setup (&e, "dmg", 4, bs, ZV_COMP_DEFAULT);
  tc_fill_text (d, bs, &s);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, bs, bs, d, 5, NULL), 0);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  cenv_reopen (&e, NULL);
  assert_int_equal (zv_dmu_block_bp (&e.ob, 1, &bp), 0);
  assert_int_not_equal (bp.bp_comp, 0);
  /* One byte of the payload, then one of the header. */
  for (int k = 0; k < 2; k++) {
    uint64_t off = ZV_DVA_OFFSET (bp.bp_dva[0]) + (k ? 1 : bp.bp_psize / 2);
    assert_int_equal (tl_file_flip (e.ts.ts_path[0], off), 0);
    cenv_reopen (&e, NULL);
    tl_log_reset (true);
    assert_int_equal (zv_dmu_read_by_dnode (&e.ob, bs, bs, buf), -EIO);
    /* In a window with others: the batched path too. */
    uint8_t *big = malloc (4 * bs);
    assert_non_null (big);
    assert_int_equal (zv_dmu_read_by_dnode (&e.ob, 0, 4 * bs, big), -EIO);
    free (big);
    assert_true (tl_log_has ("checksum error"));
    tl_log_reset (false);
    assert_int_equal (tl_file_flip (e.ts.ts_path[0], off), 0);
    cenv_reopen (&e, NULL);
    assert_int_equal (zv_dmu_read_by_dnode (&e.ob, bs, bs, buf), 0);
    assert_memory_equal (buf, d, bs);
  }
  cenv_teardown (&e);
  free (d);
  free (buf);
}

/* Hostile pointers (the root of a one-block object, forged): an unknown
 * algorithm, psize not below lsize, lsize not the block size, compression
 * on metadata, compression in a pool without the feature, and a block
 * that verifies but decompresses to another size: all EIO, with a
 * message, nothing returned. */
static void
test_object_hostile (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("hostile bp");
  const uint32_t bs = 16384;
  cenv_t e;
  uint8_t *d = malloc (bs), *buf = malloc (bs);
  zv_dnode_phys_t dn, f;

  assert_non_null (d);
  assert_non_null (buf);
  cenv_setup (&e, "hbp", 1, bs, ZV_COMP_DEFAULT);
  tc_fill_text (d, bs, &s);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 0, bs, d, 5, NULL), 0);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  zv_dmu_object_phys (&e.ob, &dn);
  assert_int_equal (dn.dn_root.bp_comp, ZV_COMP_LZ4);
  for (int k = 0; k < 7; k++) {
    f = dn;
    switch (k) {
    case 0: f.dn_root.bp_comp = 7; break;
    case 1: f.dn_root.bp_comp = ZV_COMP_NALGS; break;
    case 2: f.dn_root.bp_psize = bs; break;            /* not smaller */
    case 3: f.dn_root.bp_lsize = bs * 2; break;        /* not the blksz */
    case 4: f.dn_root.bp_lsize = f.dn_root.bp_psize; break;
    case 5: f.dn_root.bp_comp = ZV_COMP_ZSTD; break;   /* wrong codec */
    case 6:
      atomic_store (&e.spa->spa_features, 0);          /* no feature */
      break;
    }
    cenv_reopen (&e, &f);
    tl_log_reset (true);
    memset (buf, 0xa5, bs);
    assert_int_equal (zv_dmu_read_by_dnode (&e.ob, 0, bs, buf), -EIO);
    assert_true (tl_log_errors () > 0);
    tl_log_reset (false);
    atomic_store (&e.spa->spa_features, ZV_FEAT_COMPRESS);
  }
  /* The bare pointer check, for the cases the tree's own checks do not
   * reach first. */
  zv_blkptr_t bp = dn.dn_root;
  tl_log_reset (true);
  assert_int_equal (zv_zio_bp_check (e.spa, &bp, NULL), 0);
  bp.bp_type = ZV_BT_INDIRECT;
  assert_int_equal (zv_zio_bp_check (e.spa, &bp, "t"), -EIO);
  bp = dn.dn_root;
  bp.bp_level = 1;
  assert_int_equal (zv_zio_bp_check (e.spa, &bp, "t"), -EIO);
  bp = dn.dn_root;
  bp.bp_comp = 0;                              /* whole, but psize != lsize */
  assert_int_equal (zv_zio_bp_check (e.spa, &bp, "t"), -EIO);
  tl_log_reset (false);

  /* A block that verifies but decompresses short: 8 KiB of text stored
   * compressed under a pointer of a 16 KiB block. */
  uint8_t *st = zv_buf_alloc (bs);
  uint32_t ps = zv_comp_compress (ZV_COMP_DEFAULT, d, bs / 2, st);
  assert_true (ps > 0);
  f = dn;
  memset (&f.dn_root, 0, sizeof f.dn_root);
  assert_int_equal (zv_zio_alloc_bp (e.spa, &f.dn_root, ps, 1), 0);
  f.dn_root.bp_lsize = bs;
  f.dn_root.bp_comp = ZV_COMP_LZ4;
  f.dn_root.bp_type = ZV_BT_VOLDATA;
  f.dn_root.bp_birth = 6;
  f.dn_root.bp_fill = 1;
  zv_zio_write_t w = { .zw_bp = &f.dn_root, .zw_buf = st };
  assert_int_equal (zv_zio_write_many (e.spa, &w, 1), 0);
  cenv_reopen (&e, &f);
  tl_log_reset (true);
  memset (buf, 0xa5, bs);
  assert_int_equal (zv_dmu_read_by_dnode (&e.ob, 0, bs, buf), -EIO);
  assert_true (tl_log_has ("decompresses to 8192 bytes"));
  tl_log_reset (false);
  zv_buf_free (st);
  cenv_teardown (&e);
  free (d);
  free (buf);
}

/* A pool without the feature writes no compressed block, whatever the
 * property (a version-2 pool before zvoladm upgrade). */
static void
test_object_no_feature (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("no feature");
  const uint32_t bs = 16384;
  cenv_t e;
  uint8_t *d = malloc (bs);
  zv_blkptr_t bp;

  assert_non_null (d);
  cenv_setup (&e, "nof", 2, bs, ZV_COMP_PROP (ZV_COMP_ZSTD, 3));
  atomic_store (&e.spa->spa_features, 0);
  tc_fill_text (d, bs, &s);
  assert_int_equal (zv_dmu_write_by_dnode (&e.ob, 0, bs, d, 5, NULL), 0);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  assert_int_equal (zv_dmu_block_bp (&e.ob, 0, &bp), 0);
  assert_int_equal (bp.bp_comp, 0);
  assert_int_equal (bp.bp_psize, bs);
  cenv_teardown (&e);
  free (d);
}

/* ---- pools through zvol.h ---- */

#define POOL_DEV (512 * MiB)
#define VS (2 * MiB)

static void
tc_write_kind (zvol_t *zv, uint8_t *shadow, uint64_t off, uint32_t len,
               int kind, uint64_t *s)
{
  uint8_t *d = shadow + off;

  if (kind == 0)
    tl_fill_rand (d, len, s);
  else if (kind == 1)
    tc_fill_half (d, len, s);
  else
    tc_fill_text (d, len, s);
  assert_int_equal (zvol_write (zv, d, off, len, 0), 0);
}

static void
tc_check (zvol_pool_t *p, const char *name, const uint8_t *shadow)
{
  zvol_t *zv = tl_ds_open (p, name);
  uint8_t *buf = malloc (VS);

  assert_non_null (buf);
  memset (buf, 0xa5, VS);
  assert_int_equal (zvol_read (zv, buf, 0, VS), 0);
  tl_assert_same (buf, shadow, VS, 0, name);
  free (buf);
  assert_int_equal (zvol_close (zv), 0);
}

/* Every algorithm at 4K, 16K and 128K: volumes written with all three
 * kinds of data, snapshotted, overwritten, trimmed and zeroed, each read
 * back before and after export and the full-walk import, snapshots too;
 * the checker finds nothing; compressratio above 1 for compressible
 * volumes, 1.00x for off. */
static void
test_pool_roundtrip (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("pool");
  char path[512];
  const char *dev = tl_path (path, sizeof path, "pool");
  static const uint32_t bss[] = { 4096, 16384, 131072 };
  enum { NV = TC_NALGS * 3 };
  uint8_t *shadow[NV], *snap[NV];
  char names[NV][32];
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;

  char err[128];
  assert_int_equal (zvol_tunable_set ("zil_size", "4M", err, sizeof err), 0);
  assert_int_equal (tl_sparse_file (dev, POOL_DEV), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, true);
  pc.pc_name = "tank";
  pc.pc_zil_size = 4 * MiB;
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  for (size_t a = 0; a < TC_NALGS; a++)
    for (size_t b = 0; b < 3; b++) {
      size_t i = a * 3 + b;
      zvol_volume_params_t vp = {
        .vp_size = VS, .vp_blocksize = bss[b], .vp_compression = tc_algs[a],
      };
      snprintf (names[i], sizeof names[i], "v%zu", i);
      assert_int_equal (zvol_volume_create (p, names[i], &vp), 0);
      shadow[i] = calloc (1, VS);
      snap[i] = malloc (VS);
      assert_non_null (shadow[i]);
      assert_non_null (snap[i]);
      zvol_t *zv = tl_ds_open (p, names[i]);
      for (uint64_t off = 0; off < VS; off += 64 * KiB)
        tc_write_kind (zv, shadow[i], off, 64 * KiB, (int) (off / (64 * KiB)
                                                            % 3), &s);
      assert_int_equal (zvol_close (zv), 0);
      char sn[48];
      snprintf (sn, sizeof sn, "%s@s", names[i]);
      assert_int_equal (zvol_snapshot_create (p, sn), 0);
      memcpy (snap[i], shadow[i], VS);
      zv = tl_ds_open (p, names[i]);
      tc_write_kind (zv, shadow[i], 100 * KiB, 200 * KiB, 2, &s);
      assert_int_equal (zvol_trim (zv, 512 * KiB, 256 * KiB, 0), 0);
      memset (shadow[i] + 512 * KiB, 0, 256 * KiB);
      assert_int_equal (zvol_zero (zv, 1 * MiB, 128 * KiB, 0), 0);
      memset (shadow[i] + 1 * MiB, 0, 128 * KiB);
      assert_int_equal (zvol_zero (zv, 1536 * KiB, 128 * KiB,
                                   ZVOL_MAY_TRIM), 0);
      memset (shadow[i] + 1536 * KiB, 0, 128 * KiB);
      assert_int_equal (zvol_close (zv), 0);
      tc_check (p, names[i], shadow[i]);
      tc_check (p, sn, snap[i]);
    }
  assert_int_equal (zvol_tunable_set ("zil_size", "auto", err, sizeof err),
                    0);
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < NV; i++) {
      char sn[48];
      zvol_volume_info_t vi = tl_ds_info (p, names[i]);
      char cname[32];
      zvol_compression_name (vi.vi_compression, cname, sizeof cname);
      assert_string_equal (cname, strcmp (tc_algs[i / 3], "zstd") == 0
                           ? "zstd" : tc_algs[i / 3]);
      double ratio = vi.vi_written ? (double) vi.vi_logicalused
        / (double) vi.vi_written : 1.0;
      if (i / 3 == 0 || bss[i % 3] == 4096)
        assert_true (ratio == 1.0);
      else
        assert_true (ratio > 1.2);
      tc_check (p, names[i], shadow[i]);
      snprintf (sn, sizeof sn, "%s@s", names[i]);
      tc_check (p, sn, snap[i]);
    }
    assert_int_equal (zvol_pool_close (p), 0);
    assert_true (tl_check_clean (dev).cr_trees >= NV);
    p = tl_import (dev, round == 0);
  }
  /* The snapshots destroyed: their dead lists hold compressed blocks
   * (the overwrites above), freed at their stored sizes. */
  for (size_t i = 0; i < NV; i++) {
    char sn[64];
    snprintf (sn, sizeof sn, "%.31s@s", names[i]);
    assert_int_equal (zvol_volume_destroy (p, sn), 0);
    tc_check (p, names[i], shadow[i]);
  }
  assert_int_equal (zvol_pool_wait_freeing (p, NULL, NULL, NULL), 0);
  assert_int_equal (zvol_pool_close (p), 0);
  assert_true (tl_check_clean (dev).cr_trees >= NV);
  p = tl_import (dev, true);
  for (size_t i = 0; i < NV; i++)
    tc_check (p, names[i], shadow[i]);
  assert_int_equal (zvol_pool_close (p), 0);
  for (size_t i = 0; i < NV; i++) {
    free (shadow[i]);
    free (snap[i]);
  }
}

/* The property: set live (new writes only), refused on a snapshot or
 * with a bad value; a clone inherits it; it survives import. */
static void
test_pool_property (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("property");
  char path[512];
  const char *dev = tl_path (path, sizeof path, "prop");
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t *shadow = calloc (1, VS);
  zvol_volume_params_t vp = { .vp_size = VS, .vp_compression = "off" };
  zvol_volume_info_t vi;

  assert_non_null (shadow);
  assert_int_equal (tl_sparse_file (dev, POOL_DEV), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, true);
  pc.pc_name = "tank";
  pc.pc_zil_size = 8 * MiB;
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  vp.vp_compression = "gzip";
  tl_log_reset (true);
  assert_int_equal (zvol_volume_create (p, "v", &vp), -EINVAL);
  tl_log_reset (false);
  vp.vp_compression = "off";
  assert_int_equal (zvol_volume_create (p, "v", &vp), 0);
  vp.vp_compression = NULL;
  assert_int_equal (zvol_volume_create (p, "d", &vp), 0);
  vi = tl_ds_info (p, "d");
  assert_int_equal (vi.vi_compression, ZV_COMP_DEFAULT);

  zvol_t *zv = tl_ds_open (p, "v");
  /* (No flush: the intent log's in-place blocks are never compressed,
   * docs/design.md; the sync writes these.) */
  tc_write_kind (zv, shadow, 0, VS / 2, 2, &s);
  assert_int_equal (zv_pool_sync (p), 0);
  vi = tl_ds_info (p, "v");
  assert_int_equal (vi.vi_logicalused, vi.vi_written);
  /* Live, with the volume open. */
  assert_int_equal (zvol_volume_set_compression (p, "v", "zstd-5"), 0);
  tc_write_kind (zv, shadow, VS / 2, VS / 2, 2, &s);
  assert_int_equal (zv_pool_sync (p), 0);
  vi = tl_ds_info (p, "v");
  /* Only the second half compressed: between 1 and 2. */
  print_message ("  written %" PRIu64 ", logical %" PRIu64 "\n",
                 vi.vi_written, vi.vi_logicalused);
  assert_true (vi.vi_logicalused == VS);
  assert_true (vi.vi_written < VS * 3 / 4 && vi.vi_written > VS / 2);
  assert_int_equal (zvol_close (zv), 0);
  tl_log_reset (true);
  assert_int_equal (zvol_volume_set_compression (p, "v", "zstd-99"), -EINVAL);
  assert_int_equal (zvol_volume_set_compression (p, "nope", "lz4"), -ENOENT);
  assert_int_equal (zvol_snapshot_create (p, "v@a"), 0);
  assert_int_equal (zvol_volume_set_compression (p, "v@a", "lz4"), -EINVAL);
  tl_log_reset (false);
  assert_int_equal (zvol_volume_clone (p, "v@a", "c", NULL), 0);
  vi = tl_ds_info (p, "c");
  char name[32];
  zvol_compression_name (vi.vi_compression, name, sizeof name);
  assert_string_equal (name, "zstd-5");
  tc_check (p, "c", shadow);
  /* A stream of the compressed snapshot (its blocks read whole: the
   * stream carries data, docs/design.md), received as a new volume that
   * compresses with the default. */
  char sp[512];
  tl_path (sp, sizeof sp, "v.stream");
  int fd = open (sp, O_RDWR | O_CREAT | O_TRUNC, 0600);
  assert_true (fd >= 0);
  zvol_stream_io_t io = { .sio_fd = fd };
  assert_int_equal (zvol_send (p, "v@a", NULL, &io), 0);
  assert_int_equal (lseek (fd, 0, SEEK_SET), 0);
  assert_int_equal (zvol_receive (p, "r", &io), 0);
  close (fd);
  tc_check (p, "r@a", shadow);
  assert_int_equal (zv_pool_sync (p), 0);
  vi = tl_ds_info (p, "r");
  zvol_compression_name (vi.vi_compression, name, sizeof name);
  assert_string_equal (name, "lz4");
  assert_int_equal (zvol_pool_close (p), 0);
  p = tl_import (dev, true);
  tc_check (p, "r@a", shadow);
  vi = tl_ds_info (p, "v");
  zvol_compression_name (vi.vi_compression, name, sizeof name);
  assert_string_equal (name, "zstd-5");
  assert_true (vi.vi_logicalused == 0);       /* a snapshot since */
  tc_check (p, "v", shadow);
  tc_check (p, "c", shadow);
  assert_int_equal (zvol_pool_close (p), 0);
  assert_true (tl_check_clean (dev).cr_trees >= 3);
  free (shadow);
}

/* ---- streams ---- */

/* Seal a stream again after an edit: header, each record's checksum,
 * the END's record count and checksum of everything before it. */
static void
tc_reseal (uint8_t *b, size_t n)
{
  zv_stream_hdr_t h;
  zv_cksum_stream_t *sum = zv_cksum_stream_new (ZV_STREAM_MAGIC);
  zv_cksum_stream_t *rs = zv_cksum_stream_new (0);
  size_t pos = sizeof h;
  uint64_t seq = 0;

  memcpy (&h, b, sizeof h);
  memset (&h.sh_cksum, 0, sizeof h.sh_cksum);
  zv_cksum_compute (&h, sizeof h, ZV_STREAM_MAGIC, &h.sh_cksum);
  memcpy (b, &h, sizeof h);
  zv_cksum_stream_update (sum, &h, sizeof h);
  while (pos + sizeof (zv_stream_rec_t) <= n) {
    zv_stream_rec_t r;
    memcpy (&r, b + pos, sizeof r);
    size_t plen = r.sr_type == ZV_SR_WRITE ? (size_t) r.sr_length
      : r.sr_type == ZV_SR_WRITE_STORED ? ZV_SR_STORED_PSIZE (r.sr_flags)
      : r.sr_type == ZV_SR_END ? sizeof (zv_cksum_t) : 0;
    if (r.sr_type == ZV_SR_END) {
      zv_cksum_t c;
      r.sr_length = seq;
      zv_cksum_stream_value (sum, &c);
      memcpy (b + pos + sizeof r, &c, sizeof c);
    }
    memset (&r.sr_cksum, 0, sizeof r.sr_cksum);
    zv_cksum_stream_reset (rs, zv_stream_seed (h.sh_to_guid, seq));
    zv_cksum_stream_update (rs, &r, sizeof r);
    zv_cksum_stream_update (rs, b + pos + sizeof r, plen);
    zv_cksum_stream_value (rs, &r.sr_cksum);
    memcpy (b + pos, &r, sizeof r);
    zv_cksum_stream_update (sum, b + pos, sizeof r + plen);
    pos += sizeof r + plen;
    seq++;
  }
  zv_cksum_stream_free (sum);
  zv_cksum_stream_free (rs);
}

/* The records of a stream: counts by type, and where the first stored
 * one is (0: none). */
static size_t
tc_records (const uint8_t *b, size_t n, size_t count[5])
{
  size_t pos = sizeof (zv_stream_hdr_t), first = 0;

  memset (count, 0, 5 * sizeof *count);
  while (pos + sizeof (zv_stream_rec_t) <= n) {
    zv_stream_rec_t r;
    memcpy (&r, b + pos, sizeof r);
    assert_true (r.sr_type >= 1 && r.sr_type <= 4);
    count[r.sr_type]++;
    if (r.sr_type == ZV_SR_WRITE_STORED && first == 0)
      first = pos;
    pos += sizeof r + (r.sr_type == ZV_SR_WRITE ? (size_t) r.sr_length
                       : r.sr_type == ZV_SR_WRITE_STORED
                       ? ZV_SR_STORED_PSIZE (r.sr_flags)
                       : r.sr_type == ZV_SR_END ? sizeof (zv_cksum_t) : 0);
  }
  assert_int_equal (pos, n);
  return first;
}

static uint8_t *
tc_file (const char *path, size_t *n)
{
  FILE *f = fopen (path, "rb");
  uint8_t *b;
  long len;

  assert_non_null (f);
  assert_int_equal (fseek (f, 0, SEEK_END), 0);
  len = ftell (f);
  assert_true (len > 0);
  rewind (f);
  b = malloc ((size_t) len);
  assert_non_null (b);
  assert_int_equal (fread (b, 1, (size_t) len, f), (size_t) len);
  fclose (f);
  *n = (size_t) len;
  return b;
}

static int
tc_receive_buf (zvol_pool_t *p, const char *target, const uint8_t *b,
                size_t n)
{
  char sp[512];
  tl_path (sp, sizeof sp, "edited.stream");
  int fd = open (sp, O_RDWR | O_CREAT | O_TRUNC, 0600);
  assert_true (fd >= 0);
  assert_int_equal (write (fd, b, n), (ssize_t) n);
  assert_int_equal (lseek (fd, 0, SEEK_SET), 0);
  zvol_stream_io_t io = { .sio_fd = fd };
  int r = zvol_receive (p, target, &io);
  close (fd);
  return r;
}

/* A stream carries a compressed volume's blocks as stored (WRITE_STORED:
 * smaller than the data), the receiver reads them back right; a stream
 * of version 1 (WRITEs only) is still received; stored records that are
 * hostile (a stored size not below the block, an unknown algorithm, in
 * a version-1 stream, a payload that does not decompress, resealed so
 * that only the content is wrong) are refused and leave nothing. */
static void
test_stream_stored (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("stream");
  char path[512], sp[512];
  const char *dev = tl_path (path, sizeof path, "strm");
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  uint8_t *shadow = calloc (1, VS);
  zvol_volume_params_t vp = { .vp_size = VS, .vp_compression = "zstd" };
  size_t cnt[5], n;

  assert_non_null (shadow);
  assert_int_equal (tl_sparse_file (dev, POOL_DEV), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, true);
  pc.pc_name = "tank";
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  assert_int_equal (zvol_volume_create (p, "v", &vp), 0);
  zvol_t *zv = tl_ds_open (p, "v");
  tc_write_kind (zv, shadow, 0, VS / 2, 2, &s);
  tc_write_kind (zv, shadow, VS / 2, VS / 4, 0, &s);
  assert_int_equal (zvol_close (zv), 0);
  assert_int_equal (zvol_snapshot_create (p, "v@a"), 0);

  tl_path (sp, sizeof sp, "v.stream");
  int fd = open (sp, O_RDWR | O_CREAT | O_TRUNC, 0600);
  assert_true (fd >= 0);
  zvol_stream_io_t io = { .sio_fd = fd };
  assert_int_equal (zvol_send (p, "v@a", NULL, &io), 0);
  close (fd);
  uint8_t *b = tc_file (sp, &n);
  size_t first = tc_records (b, n, cnt);
  /* The text half stored compressed, the noise as WRITEs. */
  assert_true (cnt[ZV_SR_WRITE_STORED] >= VS / 2 / 16384 - 1);
  assert_true (cnt[ZV_SR_WRITE] >= 1);
  assert_true (first > 0);
  assert_true (n < VS / 2 + VS / 8);
  print_message ("  stream: %zu bytes for %u of data (%zu stored records, "
                 "%zu WRITEs)\n", n, (unsigned) (VS * 3 / 4),
                 cnt[ZV_SR_WRITE_STORED],
                 cnt[ZV_SR_WRITE]);
  assert_int_equal (tc_receive_buf (p, "r", b, n), 0);
  tc_check (p, "r@a", shadow);

  /* Hostile stored records, each resealed: refused, nothing kept. */
  for (int k = 0; k < 5; k++) {
    uint8_t *e = malloc (n);
    assert_non_null (e);
    memcpy (e, b, n);
    zv_stream_rec_t r;
    memcpy (&r, e + first, sizeof r);
    switch (k) {
    case 0: r.sr_flags = (r.sr_flags & 0xff) | 4u << 8; break; /* 16K */
    case 1: r.sr_flags = (r.sr_flags & ~0xffu) | 7; break;
    case 2: r.sr_length = 8192; break;
    case 3:                                  /* garbage payload */
      tl_fill_rand (e + first + sizeof r + 8,
                    ZV_SR_STORED_PSIZE (r.sr_flags) - 16, &s);
      break;
    case 4: {                                /* in a version-1 stream */
      zv_stream_hdr_t h;
      memcpy (&h, e, sizeof h);
      h.sh_version = ZV_STREAM_VERSION_1;
      memcpy (e, &h, sizeof h);
      break;
    }
    }
    memcpy (e + first, &r, sizeof r);
    /* (Case 0's bigger stored size shifts what follows: refused before
     * that matters.) */
    tc_reseal (e, n);
    tl_log_reset (true);
    assert_int_equal (tc_receive_buf (p, "bad", e, n), -EIO);
    assert_false (tl_ds_find (p, "bad", NULL));
    tl_log_reset (false);
    free (e);
  }
  free (b);

  /* Version 1: an uncompressed volume's stream, labeled as version 1. */
  vp.vp_compression = "off";
  assert_int_equal (zvol_volume_create (p, "o", &vp), 0);
  zv = tl_ds_open (p, "o");
  memset (shadow, 0, VS);
  tc_write_kind (zv, shadow, 0, VS, 2, &s);
  assert_int_equal (zvol_close (zv), 0);
  assert_int_equal (zvol_snapshot_create (p, "o@a"), 0);
  fd = open (sp, O_RDWR | O_CREAT | O_TRUNC, 0600);
  assert_true (fd >= 0);
  io.sio_fd = fd;
  assert_int_equal (zvol_send (p, "o@a", NULL, &io), 0);
  close (fd);
  b = tc_file (sp, &n);
  assert_int_equal (tc_records (b, n, cnt), 0);
  zv_stream_hdr_t h;
  memcpy (&h, b, sizeof h);
  assert_int_equal (h.sh_version, ZV_STREAM_VERSION);
  h.sh_version = ZV_STREAM_VERSION_1;
  memcpy (b, &h, sizeof h);
  tc_reseal (b, n);
  assert_int_equal (tc_receive_buf (p, "o1", b, n), 0);
  tc_check (p, "o1@a", shadow);
  free (b);
  /* Compressed volumes destroyed: the background free takes their
   * blocks at their stored sizes (the checker finds no leak). */
  assert_int_equal (zvol_volume_destroy (p, "r@a"), 0);
  assert_int_equal (zvol_volume_destroy (p, "r"), 0);
  assert_int_equal (zvol_volume_destroy (p, "v@a"), 0);
  assert_int_equal (zvol_volume_destroy (p, "v"), 0);
  assert_int_equal (zvol_pool_wait_freeing (p, NULL, NULL, NULL), 0);
  assert_false (tl_ds_find (p, "v", NULL));
  assert_int_equal (zvol_pool_close (p), 0);
  assert_true (tl_check_clean (dev).cr_trees >= 3);
  free (shadow);
}

/* ---- the compression queue (compq.c) ---- */

/* n items of mixed data (noise, half, text, zeros), each bs bytes. */
static zv_compq_item_t *
tq_items (size_t n, uint32_t bs, uint64_t *s)
{
  zv_compq_item_t *it = calloc (n, sizeof *it);

  assert_non_null (it);
  for (size_t i = 0; i < n; i++) {
    uint8_t *src = malloc (bs);
    assert_non_null (src);
    switch (i % 4) {
    case 0: tl_fill_rand (src, bs, s); break;
    case 1: tc_fill_half (src, bs, s); break;
    case 2: tc_fill_text (src, bs, s); break;
    default: memset (src, (int) i, bs); break;
    }
    it[i].ci_src = src;
    it[i].ci_dst = malloc (bs);
    assert_non_null (it[i].ci_dst);
    it[i].ci_lsize = bs;
  }
  return it;
}

static void
tq_free (zv_compq_item_t *it, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    free ((void *) it[i].ci_src);
    free (it[i].ci_dst);
  }
  free (it);
}

/* Wait (at most 10 s) for the workers to have compressed more than
 * 'since' items. */
static bool
tq_workers_past (uint64_t since)
{
  for (int t = 0; t < 10000; t++) {
    zv_compq_stats_t st;
    zv_compq_get_stats (&st);
    if (st.cqs_by_workers > since)
      return true;
    usleep (1000);
  }
  return false;
}

/* Every item comes out as zv_comp_compress makes it alone, whoever
 * compressed it; the workers did part of it; zv_compq_wait returns with
 * the items asked for done, in order. */
static void
test_compq_matches (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("compq");
  const size_t n = 96;
  const uint32_t bs = 16384;
  uint32_t comp;
  zv_compq_stats_t st0, st1;
  zv_compq_job_t j;
  uint8_t *want = malloc (bs);

  assert_non_null (want);
  assert_int_equal (zv_comp_prop_parse ("zstd", &comp), 0);
  zv_compq_threads = 2;
  zv_compq_item_t *it = tq_items (n, bs, &s);
  zv_compq_get_stats (&st0);
  zv_compq_start (&j, comp, it, n);
  /* Let the workers start before this thread claims anything. */
  assert_true (tq_workers_past (st0.cqs_by_workers));
  for (size_t upto = 1; upto <= n; upto += 7) {
    zv_compq_wait (&j, upto);
    for (size_t i = 0; i < upto; i++)
      assert_true (atomic_load (&it[i].ci_done));
  }
  zv_compq_wait (&j, n);
  zv_compq_finish (&j);
  zv_compq_get_stats (&st1);
  assert_true (st1.cqs_threads >= 1);
  assert_int_equal (st1.cqs_by_workers + st1.cqs_by_owner
                    - st0.cqs_by_workers - st0.cqs_by_owner, n);
  size_t compressed = 0;
  for (size_t i = 0; i < n; i++) {
    uint32_t w = zv_comp_compress (comp, it[i].ci_src, bs, want);
    assert_int_equal (it[i].ci_psize, w);
    if (w > 0) {
      assert_memory_equal (it[i].ci_dst, want, w);
      compressed++;
    }
  }
  /* half, text and constant blocks compress; noise does not */
  assert_int_equal (compressed, n / 4 * 3);
  tq_free (it, n);
  free (want);
}

/* The queue checksums what is to be stored when asked: the compressed
 * bytes, or the source when a block stays whole; a job with the
 * property off only checksums (no destination).  Fails when an item's
 * sum is of the wrong bytes, or missing. */
static void
test_compq_checksums (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("compq sums");
  const size_t n = 40;
  const uint32_t bs = 16384;
  uint32_t comp;
  zv_compq_job_t j;

  assert_int_equal (zv_comp_prop_parse ("lz4", &comp), 0);
  zv_compq_threads = 2;
  for (int off = 0; off < 2; off++) {
    zv_compq_item_t *it = tq_items (n, bs, &s);
    for (size_t i = 0; i < n; i++) {
      it[i].ci_cksum = i % 5 != 4;      /* some without a sum asked */
      it[i].ci_seed = 0x1234 + i;
      if (off) {
        free (it[i].ci_dst);
        it[i].ci_dst = NULL;
      }
    }
    zv_compq_start (&j, off ? 0 : comp, it, n);
    zv_compq_wait (&j, n);
    zv_compq_finish (&j);
    for (size_t i = 0; i < n; i++) {
      zv_cksum_t want, none = { { 0 } };
      if (off)
        assert_int_equal (it[i].ci_psize, 0);
      if (it[i].ci_psize > 0)
        zv_cksum_compute (it[i].ci_dst, it[i].ci_psize, 0x1234 + i, &want);
      else
        zv_cksum_compute (it[i].ci_src, bs, 0x1234 + i, &want);
      assert_true (zv_cksum_equal (&it[i].ci_sum,
                                   it[i].ci_cksum ? &want : &none));
    }
    tq_free (it, n);
  }
}

/* How many of it[0..n) are done. */
static size_t
tq_done (zv_compq_item_t *it, size_t n)
{
  size_t d = 0;

  for (size_t i = 0; i < n; i++)
    d += atomic_load (&it[i].ci_done);
  return d;
}

/* Start an lz4 job of n 16 KiB items with compress_ahead set to window
 * items (the caller puts it back), and wait until the workers took the
 * whole window. */
static zv_compq_item_t *
tq_window_start (zv_compq_job_t *j, size_t n, size_t window, uint64_t *s)
{
  const uint32_t bs = 16384;
  uint32_t comp;
  zv_compq_stats_t st0;

  assert_int_equal (zv_comp_prop_parse ("lz4", &comp), 0);
  zv_compq_threads = 2;
  zv_compq_ahead = window * bs;
  zv_compq_item_t *it = tq_items (n, bs, s);
  zv_compq_get_stats (&st0);
  zv_compq_start (j, comp, it, n);
  assert_true (tq_workers_past (st0.cqs_by_workers + window - 1));
  return it;
}

/* The workers run at most compress_ahead past what the owner waited for,
 * and go on as the owner moves: fails when they compress the whole job
 * ahead of the owner (each compressed block holds a buffer until it is
 * written). */
static void
test_compq_window (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("compq-window");
  const size_t n = 64, window = 4;
  uint64_t ahead0 = zv_compq_ahead;
  zv_compq_job_t j;
  zv_compq_item_t *it = tq_window_start (&j, n, window, &s);

  /* The workers took the first window alone, and stop there (64 blocks
   * of lz4 take about a millisecond: 100 ms is plenty to overrun). */
  usleep (100 * 1000);
  assert_int_equal (tq_done (it, n), window);
  /* The owner's wait moves the window: up to 10, then 4 more. */
  zv_compq_wait (&j, 10);
  for (int t = 0; t < 10000 && tq_done (it, n) < 10 + window; t++)
    usleep (1000);
  usleep (100 * 1000);
  assert_int_equal (tq_done (it, n), 10 + window);
  for (size_t i = 10 + window; i < n; i++)
    assert_false (atomic_load (&it[i].ci_done));
  zv_compq_wait (&j, n);
  assert_int_equal (tq_done (it, n), n);
  zv_compq_finish (&j);
  zv_compq_ahead = ahead0;
  tq_free (it, n);
}

/* Workers stalled at the limit leave a job closed early: finish returns
 * (it waits for every worker inside the job). */
static void
test_compq_window_finish (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("compq-window-finish");
  const size_t n = 32;
  uint64_t ahead0 = zv_compq_ahead;
  zv_compq_job_t j;
  zv_compq_item_t *it = tq_window_start (&j, n, 2, &s);

  usleep (20 * 1000);
  zv_compq_finish (&j);
  assert_int_equal (tq_done (it, n), 2);
  zv_compq_ahead = ahead0;
  tq_free (it, n);
}

/* A job ended early (a sync that failed): items nobody claimed stay
 * untouched, and nothing changes after zv_compq_finish returns. */
static void
test_compq_finish_early (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("compq-early");
  const size_t n = 400;
  uint32_t comp;
  zv_compq_job_t j;
  bool done[400];

  assert_int_equal (zv_comp_prop_parse ("zstd-19", &comp), 0);
  zv_compq_threads = 2;
  zv_compq_item_t *it = tq_items (n, 65536, &s);
  zv_compq_start (&j, comp, it, n);
  zv_compq_wait (&j, 3);
  zv_compq_finish (&j);
  size_t ndone = 0;
  for (size_t i = 0; i < n; i++) {
    done[i] = atomic_load (&it[i].ci_done);
    ndone += done[i];
  }
  assert_true (ndone >= 3 && ndone < n);
  usleep (100 * 1000);
  for (size_t i = 0; i < n; i++)
    assert_int_equal (atomic_load (&it[i].ci_done), done[i]);
  tq_free (it, n);
}

/* In a forked child (the plugin forks after its config phase) the
 * parent's workers do not exist: the child makes its own, and a job
 * there ends. */
static void
test_compq_fork (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("compq-fork");
  const size_t n = 64;
  uint32_t comp;
  zv_compq_job_t j;

  /* TSan does not follow a child forked from a threaded parent. */
  if (TL_TSAN)
    skip ();
  assert_int_equal (zv_comp_prop_parse ("lz4", &comp), 0);
  zv_compq_threads = 2;
  zv_compq_item_t *it = tq_items (n, 16384, &s);
  zv_compq_start (&j, comp, it, n);
  zv_compq_wait (&j, n);
  zv_compq_finish (&j);
  pid_t pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0) {
    zv_compq_stats_t st0;
    alarm (20);
    zv_compq_get_stats (&st0);
    for (size_t i = 0; i < n; i++)
      atomic_store (&it[i].ci_done, false);
    zv_compq_start (&j, comp, it, n);
    bool workers = tq_workers_past (st0.cqs_by_workers);
    zv_compq_wait (&j, n);
    zv_compq_finish (&j);
    _exit (workers ? 0 : 3);
  }
  int status;
  assert_int_equal (waitpid (pid, &status, 0), pid);
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 0);
  tq_free (it, n);
}

/* A compressed volume's sync in pieces of one block (compress_piece at
 * its least; zstd-19, slow enough that the first write comes long
 * before the last block is compressed): what the codec makes, read back after a reopen, and a
 * sync whose writes fail half-way ends cleanly (the buffers given back,
 * no worker left in the job: ASan and TSan runs see it). */
static int
tq_fail_writes (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
                uint32_t len)
{
  (void) dev; (void) off; (void) len;
  int *budget = arg;
  if (op != ZV_DEV_WRITE)
    return 0;
  return (*budget)-- > 0 ? 0 : -EIO;
}

/* At the first data write of a sync: how many items were compressed. */
typedef struct tq_first {
  uint64_t tf_base;
  _Atomic int64_t tf_at_first;         /* -1 until the first write */
} tq_first_t;

static void
tq_observe (void *arg, zv_dev_t *dev, enum zv_dev_op op, int done,
            uint64_t off, uint32_t len, const void *buf, int result)
{
  (void) dev; (void) off; (void) len; (void) buf; (void) result;
  tq_first_t *f = arg;
  zv_compq_stats_t st;
  int64_t none = -1;

  if (op != ZV_DEV_WRITE || done)
    return;
  zv_compq_get_stats (&st);
  atomic_compare_exchange_strong (&f->tf_at_first, &none,
                                  (int64_t) (st.cqs_by_workers
                                             + st.cqs_by_owner
                                             - f->tf_base));
}

static void
test_object_pieces (void **state)
{
  (void) state;
  uint64_t s = tl_seed ("pieces");
  const uint64_t nb = 64;
  const uint32_t bs = 131072;
  uint32_t comp;
  uint64_t piece = zv_compq_piece;
  zv_compq_stats_t st0, st1;
  cenv_t e;
  uint8_t *shadow = calloc (nb, bs), *buf = malloc (bs);

  assert_non_null (shadow);
  assert_non_null (buf);
  assert_int_equal (zv_comp_prop_parse ("zstd-19", &comp), 0);
  zv_compq_threads = 2;
  zv_compq_piece = 128 * 1024;
  cenv_setup (&e, "pieces", nb, bs, comp);
  for (uint64_t b = 0; b < nb; b++) {
    uint8_t *d = shadow + b * bs;
    if (b % 2)
      tc_fill_half (d, bs, &s);
    else
      tc_fill_text (d, bs, &s);
    assert_int_equal (zv_dmu_write_by_dnode (&e.ob, b * bs, bs, d, 5, NULL), 0);
  }
  zv_compq_get_stats (&st0);
  tq_first_t first = { .tf_base = st0.cqs_by_workers + st0.cqs_by_owner,
                       .tf_at_first = -1 };
  zv_dev_set_observer (e.spa->spa_devs[0], tq_observe, &first);
  assert_int_equal (zv_dmu_sync (&e.ob, 5), 0);
  zv_dev_set_observer (e.spa->spa_devs[0], NULL, NULL);
  zv_compq_get_stats (&st1);
  /* The writes began before the compression ended. */
  assert_true (atomic_load (&first.tf_at_first) >= 1);
  assert_true (atomic_load (&first.tf_at_first) < (int64_t) nb);
  assert_int_equal (st1.cqs_by_workers + st1.cqs_by_owner
                    - st0.cqs_by_workers - st0.cqs_by_owner, nb);
  cenv_reopen (&e, NULL);
  for (uint64_t b = 0; b < nb; b++) {
    zv_blkptr_t bp;
    assert_int_equal (zv_dmu_block_bp (&e.ob, b, &bp), 0);
    assert_int_equal (bp.bp_psize, zv_comp_compress (comp, shadow + b * bs,
                                                     bs, buf));
    assert_int_equal (bp.bp_comp, ZV_COMP_ZSTD);
    assert_int_equal (zv_dmu_read_by_dnode (&e.ob, b * bs, bs, buf), 0);
    tl_assert_same (buf, shadow + b * bs, bs, b * bs, "pieces");
  }
  /* txg 6: the fifth piece's write fails. */
  int budget = 4;
  for (uint64_t b = 0; b < nb; b++)
    assert_int_equal (zv_dmu_write_by_dnode (&e.ob, b * bs, bs,
                                             shadow + b * bs, 6, NULL), 0);
  zv_dev_set_fault (e.spa->spa_devs[0], tq_fail_writes, &budget);
  assert_int_equal (zv_dmu_sync (&e.ob, 6), -EIO);
  zv_dev_set_fault (e.spa->spa_devs[0], NULL, NULL);
  zv_dmu_object_discard_dirty (&e.ob);
  zv_compq_piece = piece;
  cenv_teardown (&e);
  free (shadow);
  free (buf);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_codec_roundtrip),
    tl_test (test_codec_predict),
    tl_test (test_codec_hostile),
    tl_test (test_codec_cost),
    tl_test (test_object_sizes),
    tl_test (test_object_written),
    tl_test (test_object_damaged),
    tl_test (test_object_hostile),
    tl_test (test_object_no_feature),
    tl_test (test_pool_roundtrip),
    tl_test (test_pool_property),
    tl_test (test_stream_stored),
    tl_test (test_compq_matches),
    tl_test (test_compq_checksums),
    tl_test (test_compq_finish_early),
    tl_test (test_compq_window),
    tl_test (test_compq_window_finish),
    tl_test (test_compq_fork),
    tl_test (test_object_pieces),
  };

  return tl_main (tests, "compress", NULL);
}
