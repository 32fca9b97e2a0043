/*
 * test_alloc.c: unit tests for core/alloc.c (bitmaps, striping, ditto
 * placement, deferred frees, persisted chunks, reservation).  No I/O: the
 * allocator only does arithmetic on offsets.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#include "zv_util.h"
#include "alloc.h"
#include "testlib.h"

#define CHUNK_BYTES_OF_DEV ((uint64_t) ZV_ALLOC_CHUNK * 8 * ZV_SECTOR)

/* ---- helpers ---- */

/* A shadow bitmap of one device, to catch overlapping allocations. */
struct shadow {
  uint64_t start, end;
  uint8_t *bits;              /* one byte per sector, simple on purpose */
};

static void
shadow_init (struct shadow *s, uint64_t start, uint64_t end)
{
  s->start = start;
  s->end = end;
  s->bits = calloc ((end - start) / ZV_SECTOR, 1);
  assert_non_null (s->bits);
}

/* Record an extent; fails the test if any sector was already taken. */
static void
shadow_take (struct shadow *s, uint64_t off, uint32_t size)
{
  uint64_t i;

  assert_int_equal (off % ZV_SECTOR, 0);
  assert_true (off >= s->start);
  assert_true (off + size <= s->end);
  for (i = (off - s->start) / ZV_SECTOR;
       i < (off - s->start + size) / ZV_SECTOR; i++) {
    assert_int_equal (s->bits[i], 0);
    s->bits[i] = 1;
  }
}

static void
shadow_release (struct shadow *s, uint64_t off, uint32_t size)
{
  uint64_t i;

  for (i = (off - s->start) / ZV_SECTOR;
       i < (off - s->start + size) / ZV_SECTOR; i++) {
    assert_int_equal (s->bits[i], 1);
    s->bits[i] = 0;
  }
}

/* Fill a one-device allocator completely with 4 KiB blocks. */
static uint64_t
fill_4k (zv_alloc_t *a)
{
  uint64_t dva, n = 0;

  while (zv_alloc_block (a, ZV_SECTOR, 0, &dva) == 0)
    n++;
  return n;
}

/* ---- tests ---- */

/*
 * Two devices of different sizes: allocate mixed sizes until ENOSPC; no
 * two blocks overlap, every block is inside its area, blocks alternate
 * devices while both have room, and at the end every byte is allocated.
 */
static void
test_fill_two_devices (void **state)
{
  const uint64_t start[2] = { 1 * MiB, 64 * KiB };
  const uint64_t end[2] = { 1 * MiB + 4 * MiB, 64 * KiB + 3 * MiB };
  zv_alloc_t *a = zv_alloc_create (2, start, end);
  struct shadow sh[2];
  zv_alloc_space_t sp;
  uint64_t dva, bytes = 0;
  unsigned i, prev = 99, alternations = 0, count = 0;
  uint64_t keep_dva[64], freed = 0;
  uint32_t size, keep_size[64];

  assert_non_null (a);
  shadow_init (&sh[0], start[0], end[0]);
  shadow_init (&sh[1], start[1], end[1]);

  for (i = 0;; i++) {
    size = (uint32_t) ((i * 7) % 4 + 1) * ZV_SECTOR;
    if (zv_alloc_block (a, size, 0, &dva) != 0)
      break;
    assert_true (ZV_DVA_VDEV (dva) < 2);
    shadow_take (&sh[ZV_DVA_VDEV (dva)], ZV_DVA_OFFSET (dva), size);
    assert_true (zv_alloc_is_allocated (a, dva, size));
    bytes += size;
    if (i < 64) {
      keep_dva[i] = dva;
      keep_size[i] = size;
    }
    /* While device 1 (the smaller) still has room, they must alternate. */
    if (bytes < 4 * MiB) {
      if (prev != 99)
        assert_int_not_equal (ZV_DVA_VDEV (dva), prev);
      alternations++;
    }
    prev = ZV_DVA_VDEV (dva);
  }
  assert_true (alternations > 300);
  /* Top up with single sectors: fragmentation must not hide free space. */
  while (zv_alloc_block (a, ZV_SECTOR, 0, &dva) == 0) {
    shadow_take (&sh[ZV_DVA_VDEV (dva)], ZV_DVA_OFFSET (dva), ZV_SECTOR);
    bytes += ZV_SECTOR;
    count++;
  }
  assert_int_equal (zv_alloc_block (a, ZV_SECTOR, 0, &dva), -ENOSPC);
  zv_alloc_get_space (a, &sp);
  assert_int_equal (sp.as_total, 7 * MiB);
  assert_int_equal (sp.as_allocated, 7 * MiB);
  assert_int_equal (bytes, 7 * MiB);
  for (i = 0; i < (4 * MiB) / ZV_SECTOR; i++)
    assert_int_equal (sh[0].bits[i], 1);
  for (i = 0; i < (3 * MiB) / ZV_SECTOR; i++)
    assert_int_equal (sh[1].bits[i], 1);
  assert_true (count > 0);

  /* Punch holes, refill with 4 KiB blocks: exactly the holes come back. */
  for (i = 0; i < 64; i += 2) {
    zv_alloc_free_now (a, keep_dva[i], keep_size[i]);
    shadow_release (&sh[ZV_DVA_VDEV (keep_dva[i])],
                    ZV_DVA_OFFSET (keep_dva[i]), keep_size[i]);
    freed += keep_size[i];
  }
  while (zv_alloc_block (a, ZV_SECTOR, 0, &dva) == 0) {
    shadow_take (&sh[ZV_DVA_VDEV (dva)], ZV_DVA_OFFSET (dva), ZV_SECTOR);
    freed -= ZV_SECTOR;
  }
  assert_int_equal (freed, 0);

  free (sh[0].bits);
  free (sh[1].bits);
  zv_alloc_destroy (a);
}

/* The cursor makes consecutive blocks on one device ascend. */
static void
test_cursor_sequential (void **state)
{
  const uint64_t start = 8 * KiB, end = 8 * KiB + 16 * MiB;
  zv_alloc_t *a = zv_alloc_create (1, &start, &end);
  uint64_t d1, d2, d3, d4;

  assert_int_equal (zv_alloc_block (a, 16384, 0, &d1), 0);
  assert_int_equal (zv_alloc_block (a, 8192, 0, &d2), 0);
  assert_int_equal (d1, ZV_DVA_MAKE (0, start));
  assert_int_equal (d2, d1 + 16384);
  /* A hole behind the cursor is not reused before the device wraps. */
  zv_alloc_free_now (a, d1, 16384);
  assert_int_equal (zv_alloc_block (a, 4096, 0, &d3), 0);
  assert_int_equal (d3, d2 + 8192);
  /* Everything full but the cursor (sector 7) stays put. */
  zv_alloc_claim (a, d3 + 4096, (uint32_t) (end - (start + 28672)));
  zv_alloc_claim (a, d1, 16384);
  assert_int_equal (zv_alloc_block (a, 4096, 0, &d4), -ENOSPC);
  /* Free sectors 6..9: a run straddling the cursor is found on the wrap. */
  zv_alloc_free_now (a, d3, 4096);
  zv_alloc_free_now (a, d3 + 4096, 12288);
  assert_int_equal (zv_alloc_block (a, 16384, 0, &d4), 0);
  assert_int_equal (d4, d3);
  assert_int_equal (zv_alloc_block (a, 4096, 0, &d4), -ENOSPC);
  zv_alloc_destroy (a);
}

/* How many runs (extents joined where they touch) n blocks of 'size'
 * bytes form on one device: the device writes a sync would make. */
static unsigned
count_runs (uint64_t *dva, size_t n, uint32_t size)
{
  unsigned runs = n > 0;

  for (size_t i = 1; i < n; i++)       /* insertion sort: n is small */
    for (size_t j = i; j > 0 && dva[j - 1] > dva[j]; j--) {
      uint64_t t = dva[j];
      dva[j] = dva[j - 1];
      dva[j - 1] = t;
    }
  for (size_t i = 1; i < n; i++)
    runs += dva[i] != dva[i - 1] + size;
  return runs;
}

/*
 * A full 64 MiB device into which frees have cut holes of one 16 KiB
 * block each (four sectors free, one allocated) from the cursor to
 * 40 MiB: a txg's blocks go into the long free runs among them, not hole
 * by hole.  A 1 MiB run 1 MiB past the cursor (inside the 2 MiB a pick
 * walks): 64 blocks, one run.  Then, with that taken and holes cut again,
 * only a 192 KiB run 1 MiB past the cursor: 12 blocks, one run.  Plain
 * first fit from the cursor put every block in a hole of its own (64 and
 * 12 runs).  The holes are still used once nothing longer is left.
 */
static void
holes_cut (zv_alloc_t *a, uint64_t from, uint64_t to, uint32_t blk)
{
  zv_alloc_claim (a, ZV_DVA_MAKE (0, from), (uint32_t) (to - from));
  for (uint64_t off = from; off + blk <= to; off += blk + ZV_SECTOR)
    zv_alloc_free_now (a, ZV_DVA_MAKE (0, off), blk);
}

static void
run_cut (zv_alloc_t *a, uint64_t off, uint32_t len)
{
  zv_alloc_claim (a, ZV_DVA_MAKE (0, off), len);
  zv_alloc_free_now (a, ZV_DVA_MAKE (0, off), len);
}

static void
test_segment_long_runs (void **state)
{
  const uint64_t start = 1 * MiB, end = start + 64 * MiB;
  const uint32_t blk = 16 * KiB;
  zv_alloc_t *a = zv_alloc_create (1, &start, &end);
  zv_alloc_space_t sp;
  uint64_t dva[64], first;
  unsigned runs;

  (void) state;
  /* Move the cursor 1 MiB in, then fill the device and cut the holes. */
  assert_int_equal (zv_alloc_block (a, (uint32_t) (1 * MiB), 0, &first), 0);
  zv_alloc_claim (a, ZV_DVA_MAKE (0, start), (uint32_t) (64 * MiB));
  holes_cut (a, start + 1 * MiB, start + 40 * MiB, blk);
  run_cut (a, start + 2 * MiB, (uint32_t) (1 * MiB));
  for (size_t i = 0; i < 64; i++)
    assert_int_equal (zv_alloc_block (a, blk, 0, &dva[i]), 0);
  runs = count_runs (dva, 64, blk);
  print_message ("64 blocks of 16 KiB in %u runs (a 1 MiB run among "
                 "holes of 16 KiB)\n", runs);
  assert_int_equal (runs, 1);
  /* (a hole that touches the run may join it at its front) */
  assert_true (dva[0] + blk > ZV_DVA_MAKE (0, start + 2 * MiB));
  assert_true (dva[0] <= ZV_DVA_MAKE (0, start + 2 * MiB));

  /* The cursor is at 3 MiB now; a 192 KiB run 1 MiB past it. */
  holes_cut (a, start + 1 * MiB, start + 40 * MiB, blk);
  run_cut (a, start + 4 * MiB, (uint32_t) (192 * KiB));
  for (size_t i = 0; i < 12; i++)
    assert_int_equal (zv_alloc_block (a, blk, 0, &dva[i]), 0);
  runs = count_runs (dva, 12, blk);
  print_message ("12 blocks of 16 KiB in %u runs (a 192 KiB run among "
                 "holes of 16 KiB)\n", runs);
  assert_int_equal (runs, 1);
  assert_true (dva[0] + blk > ZV_DVA_MAKE (0, start + 4 * MiB));
  assert_true (dva[0] <= ZV_DVA_MAKE (0, start + 4 * MiB));

  /* Nothing longer than a hole left: the holes fill, then every sector. */
  while (zv_alloc_block (a, blk, 0, &first) == 0)
    ;
  while (zv_alloc_block (a, ZV_SECTOR, 0, &first) == 0)
    ;
  zv_alloc_get_space (a, &sp);
  assert_int_equal (sp.as_allocated, 64 * MiB);
  zv_alloc_destroy (a);
}

/* Device 0 starting at 0: sector 0 would be dva 0 ("none"): never handed out. */
static void
test_no_dva_zero (void **state)
{
  const uint64_t start = 0, end = 64 * KiB;
  zv_alloc_t *a = zv_alloc_create (1, &start, &end);
  uint64_t dva;
  unsigned n = 0;

  while (zv_alloc_block (a, ZV_SECTOR, 0, &dva) == 0) {
    assert_int_not_equal (dva, 0);
    n++;
  }
  assert_int_equal (n, 15);
  zv_alloc_destroy (a);
}

/* A deferred free of T stays allocated through T+1, is reusable at T+2. */
static void
test_free_defer (void **state)
{
  const uint64_t start = 1 * MiB, end = 2 * MiB;
  zv_alloc_t *a = zv_alloc_create (1, &start, &end);
  zv_alloc_space_t sp;
  uint64_t x = ZV_DVA_MAKE (0, start + 40 * ZV_SECTOR), dva;

  assert_int_equal (fill_4k (a), 256);
  zv_alloc_sync_begin (a, 10);
  zv_alloc_free_defer (a, 10, x, 2 * ZV_SECTOR);
  assert_int_equal (tl_alloc_defer_count (a, 10), 1);
  assert_int_equal (tl_alloc_defer_count (a, 11), 0);
  zv_alloc_get_space (a, &sp);
  assert_int_equal (sp.as_deferred, 8192);
  assert_int_equal (sp.as_allocated, 1 * MiB);
  assert_true (zv_alloc_is_allocated (a, x, 2 * ZV_SECTOR));

  zv_alloc_sync_begin (a, 11);
  assert_true (zv_alloc_is_allocated (a, x, 2 * ZV_SECTOR));
  assert_int_equal (zv_alloc_block (a, ZV_SECTOR, 0, &dva), -ENOSPC);

  zv_alloc_sync_begin (a, 12);
  assert_false (zv_alloc_is_allocated (a, x, ZV_SECTOR));
  assert_int_equal (tl_alloc_defer_count (a, 10), 0);
  zv_alloc_get_space (a, &sp);
  assert_int_equal (sp.as_deferred, 0);
  assert_int_equal (sp.as_allocated, 1 * MiB - 8192);
  assert_int_equal (zv_alloc_block (a, 2 * ZV_SECTOR, 0, &dva), 0);
  assert_int_equal (dva, x);
  zv_alloc_destroy (a);
}

/* Frees of several txgs in flight: each is released at its own T+2. */
static void
test_free_defer_pipeline (void **state)
{
  const uint64_t start = 1 * MiB, end = 2 * MiB;
  zv_alloc_t *a = zv_alloc_create (1, &start, &end);
  uint64_t t, b[8];
  unsigned i;

  for (i = 0; i < 8; i++)
    assert_int_equal (zv_alloc_block (a, ZV_SECTOR, 0, &b[i]), 0);
  for (t = 5; t < 9; t++) {
    zv_alloc_sync_begin (a, t);
    zv_alloc_free_defer (a, t, b[(t - 5) * 2], ZV_SECTOR);
    zv_alloc_free_defer (a, t, b[(t - 5) * 2 + 1], ZV_SECTOR);
    /* Frees of t - 1 are still held; those of t - 2 are gone. */
    if (t >= 6)
      assert_true (zv_alloc_is_allocated (a, b[(t - 6) * 2], ZV_SECTOR));
    if (t >= 7) {
      assert_false (zv_alloc_is_allocated (a, b[(t - 7) * 2], ZV_SECTOR));
      assert_false (zv_alloc_is_allocated (a, b[(t - 7) * 2 + 1], ZV_SECTOR));
    }
  }
  zv_alloc_destroy (a);

  /* An open-context free of txg 11 lands in the same list as txg 8's. */
  a = zv_alloc_create (1, &start, &end);
  zv_alloc_claim (a, ZV_DVA_MAKE (0, start), 8 * ZV_SECTOR);
  zv_alloc_free_defer (a, 8, ZV_DVA_MAKE (0, start), ZV_SECTOR);
  zv_alloc_free_defer (a, 11, ZV_DVA_MAKE (0, start + ZV_SECTOR), ZV_SECTOR);
  assert_int_equal (tl_alloc_defer_count (a, 8), 1);
  assert_int_equal (tl_alloc_defer_count (a, 11), 1);
  zv_alloc_sync_begin (a, 10);
  assert_false (zv_alloc_is_allocated (a, ZV_DVA_MAKE (0, start), ZV_SECTOR));
  assert_true (zv_alloc_is_allocated (a, ZV_DVA_MAKE (0, start + ZV_SECTOR),
                                      ZV_SECTOR));
  assert_int_equal (tl_alloc_defer_count (a, 11), 1);
  zv_alloc_sync_begin (a, 13);
  assert_false (zv_alloc_is_allocated (a, ZV_DVA_MAKE (0, start + ZV_SECTOR),
                                       ZV_SECTOR));
  zv_alloc_destroy (a);
}

/* free_now: the space is reusable by the very next allocation. */
static void
test_free_now (void **state)
{
  const uint64_t start = 1 * MiB, end = 2 * MiB;
  zv_alloc_t *a = zv_alloc_create (1, &start, &end);
  uint64_t x = ZV_DVA_MAKE (0, start + 100 * ZV_SECTOR), dva;
  zv_alloc_space_t sp;

  assert_int_equal (fill_4k (a), 256);
  zv_alloc_free_now (a, x, 3 * ZV_SECTOR);
  zv_alloc_get_space (a, &sp);
  assert_int_equal (sp.as_allocated, 1 * MiB - 3 * ZV_SECTOR);
  assert_int_equal (sp.as_deferred, 0);
  assert_int_equal (zv_alloc_block (a, 4 * ZV_SECTOR, 0, &dva), -ENOSPC);
  assert_int_equal (zv_alloc_block (a, 3 * ZV_SECTOR, 0, &dva), 0);
  assert_int_equal (dva, x);
  zv_alloc_destroy (a);
}

/* Double frees and other misuse trip the asserts (each runs in a child,
 * on the allocator it is given). */
static void
do_double_free_now (void *arg)
{
  zv_alloc_t *abort_a = arg;
  uint64_t dva;

  ZV_VERIFY (zv_alloc_block (abort_a, ZV_SECTOR, 0, &dva) == 0);
  zv_alloc_free_now (abort_a, dva, ZV_SECTOR);
  zv_alloc_free_now (abort_a, dva, ZV_SECTOR);
}

static void
do_double_free_defer (void *arg)
{
  zv_alloc_t *abort_a = arg;
  uint64_t dva;

  ZV_VERIFY (zv_alloc_block (abort_a, ZV_SECTOR, 0, &dva) == 0);
  zv_alloc_free_defer (abort_a, 20, dva, ZV_SECTOR);
  zv_alloc_free_defer (abort_a, 20, dva, ZV_SECTOR);
  zv_alloc_sync_begin (abort_a, 22);
}

static void
do_free_unallocated_defer (void *arg)
{
  zv_alloc_t *abort_a = arg;
  const uint64_t start = 1 * MiB;
  zv_alloc_free_defer (abort_a, 3, ZV_DVA_MAKE (0, start + 512 * KiB),
                       ZV_SECTOR);
}

static void
do_unreserve_too_much (void *arg)
{
  zv_alloc_t *abort_a = arg;
  ZV_VERIFY (zv_alloc_reserve (abort_a, 8192) == 0);
  zv_alloc_unreserve (abort_a, 8192 + 4096);
}

static void
do_nothing_wrong (void *arg)
{
  zv_alloc_t *abort_a = arg;
  uint64_t dva;

  ZV_VERIFY (zv_alloc_block (abort_a, ZV_SECTOR, 0, &dva) == 0);
  zv_alloc_free_defer (abort_a, 20, dva, ZV_SECTOR);
  zv_alloc_sync_begin (abort_a, 22);
  ZV_VERIFY (zv_alloc_reserve (abort_a, 8192) == 0);
  zv_alloc_unreserve (abort_a, 8192);
}

static void
test_misuse_aborts (void **state)
{
  const uint64_t start = 1 * MiB, end = 2 * MiB;
  zv_alloc_t *a = zv_alloc_create (1, &start, &end);

  assert_false (tl_dies_with_abort (do_nothing_wrong, a));
  assert_true (tl_dies_with_abort (do_double_free_now, a));
  assert_true (tl_dies_with_abort (do_double_free_defer, a));
  assert_true (tl_dies_with_abort (do_free_unallocated_defer, a));
  assert_true (tl_dies_with_abort (do_unreserve_too_much, a));
  zv_alloc_destroy (a);
}

/* Ditto copies: another device when there are two; apart on one device. */
static void
test_avoid (void **state)
{
  const uint64_t start[2] = { 1 * MiB, 1 * MiB };
  const uint64_t end[2] = { 9 * MiB, 3 * MiB };
  zv_alloc_t *a = zv_alloc_create (2, start, end);
  uint64_t first, copy, x, y, dva;
  unsigned i;

  /* Two devices: every second copy is on the other device. */
  for (i = 0; i < 100; i++) {
    assert_int_equal (zv_alloc_block (a, 8192, 0, &first), 0);
    assert_int_equal (zv_alloc_block (a, 8192, first, &copy), 0);
    assert_int_not_equal (ZV_DVA_VDEV (copy), ZV_DVA_VDEV (first));
  }
  /* Device 1 (2 MiB) full: copies of device-0 blocks fall back apart. */
  zv_alloc_claim (a, ZV_DVA_MAKE (1, 1 * MiB), 2 * MiB);
  for (i = 0; i < 20; i++) {
    assert_int_equal (zv_alloc_block (a, 8192, 0, &first), 0);
    assert_int_equal (ZV_DVA_VDEV (first), 0);
    assert_int_equal (zv_alloc_block (a, 8192, first, &copy), 0);
    assert_int_equal (ZV_DVA_VDEV (copy), 0);
    /* At least 1/8 of the device away when there is room for it. */
    assert_true (copy >= first + 1 * MiB || copy + 1 * MiB <= first);
  }
  zv_alloc_destroy (a);

  /*
   * One device, full but for two holes; the cursor sits before the first
   * hole x.  A copy avoiding x (freed since, say) must take y instead.
   */
  a = zv_alloc_create (1, start, end);
  assert_int_equal (fill_4k (a), 2048);
  x = ZV_DVA_MAKE (0, start[0] + 64 * KiB);
  y = ZV_DVA_MAKE (0, start[0] + 80 * KiB);   /* close: no distance */
  zv_alloc_free_now (a, x, 8192);
  zv_alloc_free_now (a, y, 8192);
  assert_int_equal (zv_alloc_block (a, 8192, x, &dva), 0);
  assert_int_equal (dva, y);
  assert_int_equal (zv_alloc_block (a, 8192, x, &dva), -ENOSPC);
  /* Without avoid, x is taken. */
  assert_int_equal (zv_alloc_block (a, 8192, 0, &dva), 0);
  assert_int_equal (dva, x);
  /* Partial overlap is refused too: a hole straddling x's start. */
  zv_alloc_free_now (a, x, 8192);
  zv_alloc_free_now (a, x - 4096, 4096);
  assert_int_equal (zv_alloc_block (a, 8192, x, &dva), -ENOSPC);
  assert_int_equal (zv_alloc_block (a, 8192, x + 4096, &dva), 0);
  assert_int_equal (dva, x - 4096);
  zv_alloc_destroy (a);
}

/*
 * Ditto copies apart on one device go on from the last one placed, not
 * from the window's end each time: a full run past the window (the
 * blocks snapshots keep, never freed) is walked once, not for every
 * copy.  So a hole freed in that run since is not taken.
 */
static void
test_avoid_cursor (void **state)
{
  const uint64_t start = 1 * MiB, end = start + 64 * MiB;
  zv_alloc_t *a = zv_alloc_create (1, &start, &end);
  uint64_t first, second, copy1, copy2, full;

  (void) state;
  assert_int_equal (zv_alloc_block (a, 8192, 0, &first), 0);
  assert_int_equal (first, ZV_DVA_MAKE (0, start));
  /* Full from the end of first's window (8 MiB, an eighth) on. */
  full = start + 8192 + 8 * MiB;
  zv_alloc_claim (a, ZV_DVA_MAKE (0, full), (uint32_t) (32 * MiB));
  assert_int_equal (zv_alloc_block (a, 8192, first, &copy1), 0);
  assert_int_equal (copy1, ZV_DVA_MAKE (0, full + 32 * MiB));
  zv_alloc_free_now (a, ZV_DVA_MAKE (0, full + 1 * MiB), 8192);
  assert_int_equal (zv_alloc_block (a, 8192, 0, &second), 0);
  assert_int_equal (second, first + 8192);
  assert_int_equal (zv_alloc_block (a, 8192, second, &copy2), 0);
  assert_int_equal (copy2, copy1 + 8192);
  /* The hole is still there for anything else. */
  assert_true (zv_alloc_is_allocated (a, copy2, 8192));
  assert_false (zv_alloc_is_allocated (a, ZV_DVA_MAKE (0, full + 1 * MiB),
                                       8192));
  zv_alloc_destroy (a);
}

/* Fill a chunk buffer-sized pattern and a random allocation history. */
static void
scribble (zv_alloc_t *a, unsigned seed)
{
  uint64_t dva[400];
  uint32_t sz[400];
  unsigned i;

  uint64_t rnd = seed;

  for (i = 0; i < 400; i++) {
    sz[i] = (uint32_t) (tl_rand (&rnd) % 64 + 1) * ZV_SECTOR;
    assert_int_equal (zv_alloc_block (a, sz[i], 0, &dva[i]), 0);
  }
  for (i = 0; i < 400; i += 3)
    zv_alloc_free_now (a, dva[i], sz[i]);
}

/*
 * Save every chunk, load them into a fresh allocator of the same geometry:
 * the bitmaps, the counters and the saved bytes must match exactly, and
 * both save and load leave the chunk clean.
 */
static void
test_chunk_roundtrip (void **state)
{
  /* 2 devices, the first spans 3 chunks (the last partial). */
  const uint64_t start[2] = { 1 * MiB, 256 * KiB };
  const uint64_t end[2] = { 1 * MiB + 2 * CHUNK_BYTES_OF_DEV + 300 * MiB,
                            256 * KiB + 100 * MiB };
  zv_alloc_t *a = zv_alloc_create (2, start, end);
  zv_alloc_t *b = zv_alloc_create (2, start, end);
  unsigned char *buf = malloc (ZV_ALLOC_CHUNK), *buf2 = malloc (ZV_ALLOC_CHUNK);
  zv_alloc_space_t sa, sb;
  unsigned v;
  size_t i;
  uint64_t off;

  assert_int_equal (zv_alloc_nchunks (a, 0), 3);
  assert_int_equal (zv_alloc_nchunks (a, 1), 1);
  scribble (a, 1);
  /* Touch the far end of device 0 (last chunk) and its very last sector. */
  zv_alloc_claim (a, ZV_DVA_MAKE (0, end[0] - ZV_SECTOR), ZV_SECTOR);
  zv_alloc_claim (a, ZV_DVA_MAKE (0, start[0] + CHUNK_BYTES_OF_DEV - 8192),
                  16384);

  for (v = 0; v < 2; v++)
    for (i = 0; i < zv_alloc_nchunks (a, v); i++) {
      zv_alloc_chunk_save (a, v, i, buf);
      assert_false (zv_alloc_chunk_dirty (a, v, i));
      assert_int_equal (zv_alloc_chunk_load (b, v, i, buf), 0);
      assert_false (zv_alloc_chunk_dirty (b, v, i));
      zv_alloc_chunk_save (b, v, i, buf2);
      assert_memory_equal (buf, buf2, ZV_ALLOC_CHUNK);
    }
  zv_alloc_get_space (a, &sa);
  zv_alloc_get_space (b, &sb);
  assert_int_equal (sa.as_allocated, sb.as_allocated);
  assert_true (sa.as_allocated > 0);
  for (v = 0; v < 2; v++)
    for (off = start[v]; off < end[v]; off += ZV_SECTOR)
      if (off < start[v] + 200 * MiB || off > end[v] - 16 * MiB)
        assert_int_equal (zv_alloc_is_allocated (a, ZV_DVA_MAKE (v, off),
                                                 ZV_SECTOR),
                          zv_alloc_is_allocated (b, ZV_DVA_MAKE (v, off),
                                                 ZV_SECTOR));
  assert_true (zv_alloc_is_allocated (b, ZV_DVA_MAKE (0, end[0] - ZV_SECTOR),
                                      ZV_SECTOR));

  /* The loaded allocator keeps working: same next allocation. */
  {
    uint64_t db;
    /* Cursors differ (b never allocated), so compare from a full scan. */
    zv_alloc_claim (a, ZV_DVA_MAKE (1, start[1]), 100 * MiB);
    zv_alloc_claim (b, ZV_DVA_MAKE (1, start[1]), 100 * MiB);
    assert_int_equal (zv_alloc_block (b, 4 * ZV_SECTOR, 0, &db), 0);
    assert_false (zv_alloc_is_allocated (a, db, 4 * ZV_SECTOR));
    zv_alloc_claim (a, db, 4 * ZV_SECTOR);
    zv_alloc_get_space (a, &sa);
    zv_alloc_get_space (b, &sb);
    assert_int_equal (sa.as_allocated, sb.as_allocated);
  }

  /* On-disk form: sector i of the area is bit (i % 8) of byte i / 8. */
  zv_alloc_destroy (b);
  b = zv_alloc_create (1, start, end);
  zv_alloc_claim (b, ZV_DVA_MAKE (0, start[0] + 9 * ZV_SECTOR), ZV_SECTOR);
  zv_alloc_claim (b, ZV_DVA_MAKE (0, start[0] + 70 * ZV_SECTOR), 2 * ZV_SECTOR);
  zv_alloc_chunk_save (b, 0, 0, buf);
  assert_int_equal (buf[1], 0x02);
  assert_int_equal (buf[8], 0xc0);
  for (i = 0; i < ZV_ALLOC_CHUNK; i++)
    if (i != 1 && i != 8)
      assert_int_equal (buf[i], 0);

  free (buf);
  free (buf2);
  zv_alloc_destroy (a);
  zv_alloc_destroy (b);
}

/* Bit of 'off' (bytes from the area's start) in a saved chunk 0. */
static bool
alloc_saved_bit (const unsigned char *buf, uint64_t off)
{
  uint64_t k = off / ZV_SECTOR;

  return (buf[k / 8] >> (k % 8)) & 1;
}

/* An open-context allocation for txg T (an in-place log block) stays
 * out of the chunks the syncs of txgs before T save, and the chunk stays
 * dirty until T's sync saves it with the bits; an ordinary allocation
 * is saved at once. */
static void
test_open_alloc_masked (void **state)
{
  const uint64_t start = 4 * MiB, end = 4 * MiB + CHUNK_BYTES_OF_DEV;
  zv_alloc_t *a = zv_alloc_create (1, &start, &end);
  unsigned char *buf = malloc (ZV_ALLOC_CHUNK);
  uint64_t dva, plain;

  (void) state;
  assert_non_null (buf);
  zv_alloc_sync_begin (a, 4);           /* txg 4 syncs, 5 is open */
  assert_int_equal (zv_alloc_block_open (a, 16384, 5, &dva), 0);
  assert_int_equal (zv_alloc_block (a, 16384, 0, &plain), 0);
  assert_true (zv_alloc_chunk_dirty (a, 0, 0));
  zv_alloc_chunk_save (a, 0, 0, buf);   /* txg 4's space map */
  assert_false (alloc_saved_bit (buf, ZV_DVA_OFFSET (dva) - start));
  assert_false (alloc_saved_bit (buf, ZV_DVA_OFFSET (dva) - start + 12288));
  assert_true (alloc_saved_bit (buf, ZV_DVA_OFFSET (plain) - start));
  assert_true (zv_alloc_chunk_dirty (a, 0, 0));     /* for txg 5 */
  assert_true (zv_alloc_is_allocated (a, dva, 16384)); /* in memory: taken */
  zv_alloc_chunk_save (a, 0, 0, buf);   /* a second pass of txg 4 */
  assert_false (alloc_saved_bit (buf, ZV_DVA_OFFSET (dva) - start));

  zv_alloc_sync_begin (a, 5);
  zv_alloc_chunk_save (a, 0, 0, buf);   /* txg 5's: the block is its own */
  assert_true (alloc_saved_bit (buf, ZV_DVA_OFFSET (dva) - start));
  assert_true (alloc_saved_bit (buf, ZV_DVA_OFFSET (dva) - start + 12288));
  assert_false (zv_alloc_chunk_dirty (a, 0, 0));

  /* One for the txg syncing already is that txg's own. */
  assert_int_equal (zv_alloc_block_open (a, 16384, 5, &dva), 0);
  zv_alloc_chunk_save (a, 0, 0, buf);
  assert_true (alloc_saved_bit (buf, ZV_DVA_OFFSET (dva) - start));
  assert_false (zv_alloc_chunk_dirty (a, 0, 0));
  free (buf);
  zv_alloc_destroy (a);
}

/* Only the chunks whose bits changed are dirty. */
static void
test_dirty_tracking (void **state)
{
  const uint64_t start = 4 * MiB, end = 4 * MiB + 3 * CHUNK_BYTES_OF_DEV;
  zv_alloc_t *a = zv_alloc_create (1, &start, &end);
  unsigned char *buf = malloc (ZV_ALLOC_CHUNK);
  uint64_t boundary = start + CHUNK_BYTES_OF_DEV, dva;
  size_t i;

  assert_int_equal (zv_alloc_nchunks (a, 0), 3);
  for (i = 0; i < 3; i++)
    assert_false (zv_alloc_chunk_dirty (a, 0, i));

  zv_alloc_claim (a, ZV_DVA_MAKE (0, boundary + 1 * MiB), 8192);
  assert_false (zv_alloc_chunk_dirty (a, 0, 0));
  assert_true (zv_alloc_chunk_dirty (a, 0, 1));
  assert_false (zv_alloc_chunk_dirty (a, 0, 2));
  zv_alloc_chunk_save (a, 0, 1, buf);
  assert_false (zv_alloc_chunk_dirty (a, 0, 1));

  /* Claiming bits already set changes nothing, dirties nothing. */
  zv_alloc_claim (a, ZV_DVA_MAKE (0, boundary + 1 * MiB), 8192);
  assert_false (zv_alloc_chunk_dirty (a, 0, 1));

  /* An extent across the 0/1 boundary dirties both. */
  zv_alloc_claim (a, ZV_DVA_MAKE (0, boundary - 4096), 8192);
  assert_true (zv_alloc_chunk_dirty (a, 0, 0));
  assert_true (zv_alloc_chunk_dirty (a, 0, 1));
  assert_false (zv_alloc_chunk_dirty (a, 0, 2));
  zv_alloc_chunk_save (a, 0, 0, buf);
  zv_alloc_chunk_save (a, 0, 1, buf);

  /* An allocation dirties its chunk (0: the cursor starts there). */
  assert_int_equal (zv_alloc_block (a, 16384, 0, &dva), 0);
  assert_true (zv_alloc_chunk_dirty (a, 0, 0));
  assert_false (zv_alloc_chunk_dirty (a, 0, 1));
  zv_alloc_chunk_save (a, 0, 0, buf);

  /* A deferred free dirties nothing until it is applied. */
  zv_alloc_free_defer (a, 7, ZV_DVA_MAKE (0, boundary + 1 * MiB), 8192);
  zv_alloc_sync_begin (a, 8);
  assert_false (zv_alloc_chunk_dirty (a, 0, 1));
  zv_alloc_sync_begin (a, 9);
  assert_true (zv_alloc_chunk_dirty (a, 0, 1));
  assert_false (zv_alloc_chunk_dirty (a, 0, 0));
  assert_false (zv_alloc_chunk_dirty (a, 0, 2));

  zv_alloc_dirty_all (a);
  for (i = 0; i < 3; i++)
    assert_true (zv_alloc_chunk_dirty (a, 0, i));
  free (buf);
  zv_alloc_destroy (a);
}

/* A chunk from disk that sets bits past the end of the area is refused. */
static void
test_chunk_load_garbage (void **state)
{
  /* 600 MiB: chunk 1 covers 88 MiB of area; the rest is tail. */
  const uint64_t start[2] = { 1 * MiB, 1 * MiB };
  const uint64_t end[2] = { 1 * MiB + 600 * MiB, 1 * MiB + 600 * MiB };
  zv_alloc_t *a = zv_alloc_create (2, start, end);
  unsigned char *buf = calloc (1, ZV_ALLOC_CHUNK);
  uint64_t nbits_in_last = (600 * MiB - CHUNK_BYTES_OF_DEV) / ZV_SECTOR;
  zv_alloc_space_t sp;

  assert_int_equal (zv_alloc_nchunks (a, 1), 2);
  zv_alloc_claim (a, ZV_DVA_MAKE (1, start[1] + CHUNK_BYTES_OF_DEV), 8192);

  /* Last valid bit set: fine. */
  buf[(nbits_in_last - 1) / 8] |= (unsigned char) (1u << ((nbits_in_last - 1) % 8));
  assert_int_equal (zv_alloc_chunk_load (a, 1, 1, buf), 0);
  assert_true (zv_alloc_is_allocated (a, ZV_DVA_MAKE (1, end[1] - ZV_SECTOR),
                                      ZV_SECTOR));
  /* The load replaced the chunk: the earlier claim is gone. */
  assert_false (zv_alloc_is_allocated (a, ZV_DVA_MAKE (1, start[1] +
                                                       CHUNK_BYTES_OF_DEV),
                                       ZV_SECTOR));
  zv_alloc_get_space (a, &sp);
  assert_int_equal (sp.as_allocated, ZV_SECTOR);

  /* First bit past the end set: refused, nothing changes. */
  tl_log_reset (true);
  memset (buf, 0x5a, ZV_ALLOC_CHUNK / 2);
  buf[nbits_in_last / 8] |= (unsigned char) (1u << (nbits_in_last % 8));
  assert_int_equal (zv_alloc_chunk_load (a, 1, 1, buf), -EINVAL);
  assert_int_equal (tl_log_errors (), 1);
  assert_true (tl_log_has ("chunk 1"));
  assert_true (tl_log_has ("device 1"));
  zv_alloc_get_space (a, &sp);
  assert_int_equal (sp.as_allocated, ZV_SECTOR);
  assert_false (zv_alloc_is_allocated (a, ZV_DVA_MAKE (1, start[1] +
                                                       CHUNK_BYTES_OF_DEV),
                                       ZV_SECTOR));

  /* Pure garbage in the tail only (last byte of the chunk). */
  memset (buf, 0, ZV_ALLOC_CHUNK);
  buf[ZV_ALLOC_CHUNK - 1] = 0x80;
  assert_int_equal (zv_alloc_chunk_load (a, 0, 1, buf), -EINVAL);
  /* A chunk index that does not exist. */
  assert_int_equal (zv_alloc_chunk_load (a, 0, 2, buf), -EINVAL);
  assert_int_equal (zv_alloc_chunk_load (a, 2, 0, buf), -EINVAL);
  /* A full first chunk has no tail: all ones is legal. */
  memset (buf, 0xff, ZV_ALLOC_CHUNK);
  assert_int_equal (zv_alloc_chunk_load (a, 0, 0, buf), 0);
  zv_alloc_get_space (a, &sp);
  assert_int_equal (sp.as_allocated, ZV_SECTOR + CHUNK_BYTES_OF_DEV);
  tl_log_reset (false);
  free (buf);
  zv_alloc_destroy (a);
}

/* Persisted defer lists: foreach lists a txg's frees; load re-queues them. */
struct collect { uint64_t dva[16]; uint32_t size[16]; unsigned n; };
static void
collect_fn (void *arg, uint64_t dva, uint32_t size)
{
  struct collect *c = arg;

  assert_true (c->n < 16);
  c->dva[c->n] = dva;
  c->size[c->n] = size;
  c->n++;
}

static void
test_defer_persist (void **state)
{
  const uint64_t start = 1 * MiB, end = 9 * MiB;
  zv_alloc_t *a = zv_alloc_create (1, &start, &end);
  zv_alloc_t *b = zv_alloc_create (1, &start, &end);
  unsigned char *buf = malloc (ZV_ALLOC_CHUNK);
  struct collect c = { .n = 0 };
  uint64_t d[4];
  unsigned i;

  for (i = 0; i < 4; i++)
    assert_int_equal (zv_alloc_block (a, (i + 1) * 8192, 0, &d[i]), 0);
  zv_alloc_free_defer (a, 30, d[0], 8192);
  zv_alloc_free_defer (a, 31, d[1], 16384);
  zv_alloc_free_defer (a, 31, d[2], 24576);
  assert_int_equal (tl_alloc_defer_count (a, 31), 2);
  zv_alloc_defer_foreach (a, 31, collect_fn, &c);
  assert_int_equal (c.n, 2);
  assert_int_equal (c.dva[0], d[1]);
  assert_int_equal (c.size[0], 16384);
  assert_int_equal (c.dva[1], d[2]);
  assert_int_equal (c.size[1], 24576);

  /* "Import" into b: bitmap first, then the defer lists. */
  zv_alloc_chunk_save (a, 0, 0, buf);
  assert_int_equal (zv_alloc_chunk_load (b, 0, 0, buf), 0);
  for (i = 0; i < c.n; i++)
    zv_alloc_defer_load (b, 31, c.dva[i], c.size[i]);
  tl_log_reset (true);
  /* A persisted entry naming free space is refused, not queued. */
  zv_alloc_defer_load (b, 31, ZV_DVA_MAKE (0, 8 * MiB), 4096);
  assert_true (tl_log_has ("not an allocated extent"));
  zv_alloc_defer_load (b, 31, ZV_DVA_MAKE (5, 8 * MiB), 4096);
  assert_int_equal (tl_log_errors (), 2);
  tl_log_reset (false);
  assert_int_equal (tl_alloc_defer_count (b, 31), 2);
  zv_alloc_sync_begin (b, 32);
  assert_true (zv_alloc_is_allocated (b, d[1], 16384));
  zv_alloc_sync_begin (b, 33);
  assert_false (zv_alloc_is_allocated (b, d[1], 4096));
  assert_false (zv_alloc_is_allocated (b, d[2] + 20480, 4096));
  assert_true (zv_alloc_is_allocated (b, d[0], 8192));  /* txg 30: not loaded */
  assert_true (zv_alloc_is_allocated (b, d[3], 32768));
  free (buf);
  zv_alloc_destroy (a);
  zv_alloc_destroy (b);
}

/* Reservation stops exactly at total - slop, counting allocations. */
static void
test_reserve_slop (void **state)
{
  const uint64_t start = 1 * MiB;
  uint64_t end = 1 * MiB + 256 * MiB, dva, slop;
  zv_alloc_t *a = zv_alloc_create (1, &start, &end);
  zv_alloc_space_t sp;

  /* 256 MiB: slop = 8 MiB (1/32). */
  slop = 8 * MiB;
  assert_int_equal (zv_alloc_reserve (a, 256 * MiB - slop - 4096), 0);
  assert_int_equal (zv_alloc_reserve (a, 4096), 0);
  assert_int_equal (zv_alloc_reserve (a, 1), -ENOSPC);
  zv_alloc_get_space (a, &sp);
  assert_int_equal (sp.as_reserved, 256 * MiB - slop);
  zv_alloc_unreserve (a, 16384);
  /* Allocated space counts against it too. */
  assert_int_equal (zv_alloc_block (a, 8192, 0, &dva), 0);
  assert_int_equal (zv_alloc_reserve (a, 8192 + 1), -ENOSPC);
  assert_int_equal (zv_alloc_reserve (a, 8192), 0);
  assert_int_equal (zv_alloc_reserve (a, UINT64_MAX), -ENOSPC);
  zv_alloc_unreserve (a, 256 * MiB - slop - 8192);
  zv_alloc_get_space (a, &sp);
  assert_int_equal (sp.as_reserved, 0);
  /* Deferred frees still occupy space until applied. */
  zv_alloc_free_defer (a, 1, dva, 8192);
  assert_int_equal (zv_alloc_reserve (a, 256 * MiB - slop - 8192), 0);
  assert_int_equal (zv_alloc_reserve (a, 4096), -ENOSPC);
  zv_alloc_sync_begin (a, 3);
  assert_int_equal (zv_alloc_reserve (a, 8192), 0);
  assert_int_equal (zv_alloc_reserve (a, 4096), -ENOSPC);
  zv_alloc_destroy (a);

  /* 64 MiB: 1/32 is 2 MiB, the 4 MiB floor wins. */
  end = start + 64 * MiB;
  a = zv_alloc_create (1, &start, &end);
  assert_int_equal (zv_alloc_reserve (a, 60 * MiB + 4096), -ENOSPC);
  assert_int_equal (zv_alloc_reserve (a, 60 * MiB), 0);
  assert_int_equal (zv_alloc_reserve (a, 1), -ENOSPC);
  zv_alloc_destroy (a);

  /* 6 MiB: the floor would be 4 MiB, but slop never exceeds half. */
  end = start + 6 * MiB;
  a = zv_alloc_create (1, &start, &end);
  assert_int_equal (zv_alloc_reserve (a, 3 * MiB + 4096), -ENOSPC);
  assert_int_equal (zv_alloc_reserve (a, 3 * MiB), 0);
  assert_int_equal (zv_alloc_reserve (a, 1), -ENOSPC);
  zv_alloc_destroy (a);
}

/*
 * zv_alloc_reserve_held: what others' reservations hold stays free, with
 * 1/32 of the data in flight for its indirect blocks; a write its own
 * reservation covers may take the deferred frees as free, up to half the
 * slop, and nothing more.
 */
static void
test_reserve_held (void **state)
{
  const uint64_t start = 1 * MiB, end = start + 256 * MiB;
  const uint64_t slop = 8 * MiB, limit = 256 * MiB - slop, H = 10 * MiB;
  zv_alloc_t *a = zv_alloc_create (1, &start, &end);
  uint64_t b = (limit - H) / 33 * 32;

  /* Held: the rest, less 1/32 of what is reserved. */
  assert_int_equal (zv_alloc_reserve_held (a, limit - H, H, false), -ENOSPC);
  assert_int_equal (zv_alloc_reserve_held (a, b, H, false), 0);
  assert_int_equal (zv_alloc_reserve_held (a, 64 * KiB, H, false), -ENOSPC);
  assert_int_equal (zv_alloc_reserve_held (a, 64 * KiB, 0, false), 0);
  zv_alloc_unreserve (a, b + 64 * KiB);

  /* 1 MiB below the limit is free, 12 MiB more are deferred. */
  zv_alloc_claim (a, ZV_DVA_MAKE (0, start), (uint32_t) (limit - MiB));
  zv_alloc_free_defer (a, 1, ZV_DVA_MAKE (0, start), 12 * MiB);
  assert_int_equal (zv_alloc_reserve_held (a, 2 * MiB, 0, false), -ENOSPC);
  assert_int_equal (zv_alloc_reserve_held (a, 2 * MiB, 0, true), 0);
  zv_alloc_unreserve (a, 2 * MiB);
  /* Half the slop at most, though more is on its way back. */
  assert_int_equal (zv_alloc_reserve_held (a, MiB + slop / 2, 0, true), 0);
  assert_int_equal (zv_alloc_reserve_held (a, 4096, 0, true), -ENOSPC);
  zv_alloc_unreserve (a, MiB + slop / 2);
  /* Others' holds count the same for a covered write. */
  assert_int_equal (zv_alloc_reserve_held (a, MiB, slop / 2, true),
                    -ENOSPC);
  /* Back: free for everybody, and nothing more to borrow. */
  zv_alloc_sync_begin (a, 3);
  assert_int_equal (zv_alloc_reserve_held (a, 13 * MiB + 4096, 0, true),
                    -ENOSPC);
  assert_int_equal (zv_alloc_reserve_held (a, 13 * MiB, 0, false), 0);
  zv_alloc_destroy (a);
}

/*
 * A 64 GiB device (2 MiB of bitmap), full but for scattered single
 * sectors and one 64 KiB hole far from the cursor: finding the hole,
 * proving no 2-sector run exists, and taking a single sector must each be
 * quick.
 */
static void
test_big_device_fast (void **state)
{
  const uint64_t start = 1 * MiB, end = start + 64 * GiB;
  zv_alloc_t *a = zv_alloc_create (1, &start, &end);
  uint64_t off, dva, hole = start + 50 * GiB + 12 * ZV_SECTOR, t0, dt;
  zv_alloc_space_t sp;
  unsigned n = 0;

  assert_non_null (a);
  assert_int_equal (zv_alloc_nchunks (a, 0), 128);
  for (off = start; off < end; off += 1 * GiB)
    zv_alloc_claim (a, ZV_DVA_MAKE (0, off), (uint32_t) (1 * GiB));
  /* Move the cursor to the far end, then make the holes. */
  zv_alloc_free_now (a, ZV_DVA_MAKE (0, end - 2 * ZV_SECTOR), ZV_SECTOR);
  assert_int_equal (zv_alloc_block (a, ZV_SECTOR, 0, &dva), 0);
  for (off = start + 7 * ZV_SECTOR; off < end; off += 64 * MiB + ZV_SECTOR) {
    zv_alloc_free_now (a, ZV_DVA_MAKE (0, off), ZV_SECTOR);
    n++;
  }
  zv_alloc_free_now (a, ZV_DVA_MAKE (0, hole), 64 * KiB);

  t0 = zv_now_ns ();
  assert_int_equal (zv_alloc_block (a, 64 * KiB, 0, &dva), 0);
  assert_int_equal (dva, ZV_DVA_MAKE (0, hole));
  assert_int_equal (zv_alloc_block (a, 2 * ZV_SECTOR, 0, &dva), -ENOSPC);
  assert_int_equal (zv_alloc_block (a, ZV_SECTOR, 0, &dva), 0);
  dt = zv_now_ns () - t0;
  print_message ("64 GiB device: 3 searches over %u holes took %.3f ms\n",
                 n, (double) dt / 1e6);
  assert_true (dt < 500000000ull);
  zv_alloc_get_space (a, &sp);
  assert_int_equal (sp.as_allocated, 64 * GiB - (uint64_t) (n - 1) * ZV_SECTOR);
  zv_alloc_destroy (a);
}

/* ---- concurrency ---- */

struct conc {
  zv_alloc_t *a;
  atomic_bool stop;
  atomic_uint_fast64_t ok, fail;
};

/* A writer: reserve, hold briefly, release; sometimes a burst. */
static void *
conc_reserver (void *arg)
{
  struct conc *c = arg;
  uint64_t held[8];
  unsigned n = 0, i = 0;

  while (!atomic_load (&c->stop)) {
    uint64_t bytes = (uint64_t) ((i++ % 16) + 1) * 512 * KiB;

    if (zv_alloc_reserve (c->a, bytes) == 0) {
      atomic_fetch_add (&c->ok, 1);
      held[n++] = bytes;
    }
    else
      atomic_fetch_add (&c->fail, 1);
    if (n == 8 || (i % 3) == 0) {
      while (n > 0)
        zv_alloc_unreserve (c->a, held[--n]);
    }
  }
  while (n > 0)
    zv_alloc_unreserve (c->a, held[--n]);
  return NULL;
}

/* The sync thread: allocate, free (now and deferred), begin txgs. */
static void
conc_syncer (struct conc *c, uint64_t *nblocks)
{
  enum { NB = 256 };
  uint64_t dva[NB], txg = 1, t0 = zv_now_ns ();
  uint32_t size[NB];
  zv_alloc_space_t sp;
  unsigned i, round = 0;

  memset (dva, 0, sizeof dva);
  while (zv_now_ns () - t0 < 1500000000ull && round < 4000) {
    for (i = round % 4; i < NB; i += 4) {
      if (dva[i] != 0) {
        if (i % 2)
          zv_alloc_free_defer (c->a, txg, dva[i], size[i]);
        else
          zv_alloc_free_now (c->a, dva[i], size[i]);
        dva[i] = 0;
      }
      size[i] = (uint32_t) ((i + round) % 8 + 1) * ZV_SECTOR;
      if (zv_alloc_block (c->a, size[i], 0, &dva[i]) != 0)
        dva[i] = 0;
      else
        (*nblocks)++;
    }
    zv_alloc_get_space (c->a, &sp);
    assert_true (sp.as_allocated <= sp.as_total);
    zv_alloc_sync_begin (c->a, ++txg);
    round++;
  }
  for (i = 0; i < NB; i++)
    if (dva[i] != 0)
      zv_alloc_free_defer (c->a, txg, dva[i], size[i]);
  zv_alloc_sync_begin (c->a, txg + 2);
}

static void
test_concurrent_reserve (void **state)
{
  const uint64_t start[2] = { 1 * MiB, 1 * MiB };
  const uint64_t end[2] = { 1 * MiB + 24 * MiB, 1 * MiB + 16 * MiB };
  struct conc c;
  pthread_t th[3];
  zv_alloc_space_t sp;
  uint64_t nblocks = 0;
  unsigned i;

  c.a = zv_alloc_create (2, start, end);
  atomic_init (&c.stop, false);
  atomic_init (&c.ok, 0);
  atomic_init (&c.fail, 0);
  for (i = 0; i < 3; i++)
    assert_int_equal (pthread_create (&th[i], NULL, conc_reserver, &c), 0);
  conc_syncer (&c, &nblocks);
  atomic_store (&c.stop, true);
  for (i = 0; i < 3; i++)
    assert_int_equal (pthread_join (th[i], NULL), 0);

  zv_alloc_get_space (c.a, &sp);
  assert_int_equal (sp.as_reserved, 0);
  assert_int_equal (sp.as_allocated, 0);
  assert_int_equal (sp.as_deferred, 0);
  assert_true (nblocks > 0);
  assert_true (atomic_load (&c.ok) > 0);
  print_message ("concurrency: %llu blocks, %llu reservations ok, %llu ENOSPC\n",
                 (unsigned long long) nblocks,
                 (unsigned long long) atomic_load (&c.ok),
                 (unsigned long long) atomic_load (&c.fail));
  /* Everything is free again: the whole pool can be reserved. */
  assert_int_equal (zv_alloc_reserve (c.a, sp.as_total - 4 * MiB), 0);
  zv_alloc_unreserve (c.a, sp.as_total - 4 * MiB);
  zv_alloc_destroy (c.a);
}

/* Import's ownership map: an extent is taken whole or not at all, and a
 * sector has one owner; extents outside the pool are refused. */
static void
test_owners (void **state)
{
  uint64_t start[2] = { 256 * KiB, 256 * KiB }, end[2] = { 64 * MiB,
                                                           32 * MiB };
  zv_alloc_t *a = zv_alloc_create (2, start, end);
  zv_alloc_owners_t *o = zv_alloc_owners_create (a);
  uint64_t x = ZV_DVA_MAKE (0, 1 * MiB), y = ZV_DVA_MAKE (1, 1 * MiB);

  assert_int_equal (zv_alloc_owners_take (o, x, 16 * KiB), 0);
  /* The same sectors on the other device are another extent. */
  assert_int_equal (zv_alloc_owners_take (o, y, 16 * KiB), 0);
  assert_int_equal (zv_alloc_owners_take (o, x, 16 * KiB), -EEXIST);
  /* Overlapping its last sector only: refused, and nothing taken. */
  assert_int_equal (zv_alloc_owners_take (o, x + 12 * KiB, 8 * KiB),
                    -EEXIST);
  assert_int_equal (zv_alloc_owners_take (o, x + 16 * KiB, 4 * KiB), 0);
  assert_int_equal (zv_alloc_owners_take (o, x - 4 * KiB, 4 * KiB), 0);
  /* Across a 64-sector word and to the end of a device. */
  assert_int_equal (zv_alloc_owners_take (o, ZV_DVA_MAKE (0, 2 * MiB
                                                          - 8 * KiB),
                                          128 * KiB), 0);
  assert_int_equal (zv_alloc_owners_take (o, ZV_DVA_MAKE (0, 2 * MiB
                                                          + 64 * KiB),
                                          4 * KiB), -EEXIST);
  assert_int_equal (zv_alloc_owners_take (o, ZV_DVA_MAKE (1, 32 * MiB
                                                          - 4 * KiB),
                                          4 * KiB), 0);
  /* Not extents of the pool. */
  assert_int_equal (zv_alloc_owners_take (o, ZV_DVA_MAKE (1, 32 * MiB),
                                          4 * KiB), -EINVAL);
  assert_int_equal (zv_alloc_owners_take (o, ZV_DVA_MAKE (2, 1 * MiB),
                                          4 * KiB), -EINVAL);
  assert_int_equal (zv_alloc_owners_take (o, ZV_DVA_MAKE (0, 4 * KiB),
                                          4 * KiB), -EINVAL);
  assert_int_equal (zv_alloc_owners_take (o, x + 1, 4 * KiB), -EINVAL);
  assert_int_equal (zv_alloc_owners_take (o, 0, 4 * KiB), -EINVAL);
  /* The allocator itself is untouched. */
  assert_false (zv_alloc_is_allocated (a, x, 16 * KiB));
  zv_alloc_owners_destroy (o);
  zv_alloc_destroy (a);
}

/* The pool's owner map: only space allocated at own_begin and unowned
 * can be taken, once; space allocated since is never unowned; a block's
 * children are taken all or nothing, and once per block. */
static void
test_own_lazy (void **state)
{
  uint64_t start = 256 * KiB, end = 64 * MiB;
  zv_alloc_t *a = zv_alloc_create (1, &start, &end);
  uint64_t x = ZV_DVA_MAKE (0, 1 * MiB), y = ZV_DVA_MAKE (0, 2 * MiB);
  uint64_t z = ZV_DVA_MAKE (0, 3 * MiB), n, p = ZV_DVA_MAKE (0, 8 * MiB);
  size_t bad;

  (void) state;
  /* Before own_begin (a new pool): only "allocated?" is asked. */
  assert_int_equal (zv_alloc_own (a, x, 16 * KiB), -ENOENT);
  zv_alloc_claim (a, x, 64 * KiB);
  zv_alloc_claim (a, y, 64 * KiB);
  zv_alloc_claim (a, p, 16 * KiB);
  assert_int_equal (zv_alloc_own (a, x, 16 * KiB), 0);
  assert_int_equal (zv_alloc_own (a, x, 16 * KiB), 0);
  zv_alloc_own_begin (a);
  assert_false (zv_alloc_own_any (a, x, 64 * KiB));
  assert_int_equal (zv_alloc_own (a, x, 16 * KiB), 0);
  assert_true (zv_alloc_own_any (a, x, 64 * KiB));
  assert_int_equal (zv_alloc_own (a, x, 16 * KiB), -EEXIST);
  assert_int_equal (zv_alloc_own (a, x + 12 * KiB, 8 * KiB), -EEXIST);
  assert_int_equal (zv_alloc_own (a, x + 16 * KiB, 4 * KiB), 0);
  assert_int_equal (zv_alloc_own (a, z, 4 * KiB), -ENOENT);
  assert_int_equal (zv_alloc_own (a, ZV_DVA_MAKE (1, MiB), 4 * KiB),
                    -EINVAL);
  /* Allocated after own_begin: the engine's own, never taken. */
  assert_int_equal (zv_alloc_block (a, 16 * KiB, 0, &n), 0);
  assert_int_equal (zv_alloc_own (a, n, 16 * KiB), -EEXIST);
  /* A block's children: one refused (y + 4K is taken twice), nothing
   * taken; then all of them, once; a second load takes nothing. */
  zv_alloc_ext_t ext[3] = { { y, 4 * KiB }, { y + 4 * KiB, 4 * KiB },
                            { y + 4 * KiB, 4 * KiB } };
  assert_int_equal (zv_alloc_own_children (a, p, ext, 3, &bad), -EEXIST);
  assert_int_equal (bad, 2);
  assert_false (zv_alloc_own_any (a, y, 8 * KiB));
  assert_int_equal (zv_alloc_own_children (a, p, ext, 2, &bad), 0);
  assert_true (zv_alloc_own_any (a, y, 4 * KiB));
  assert_int_equal (zv_alloc_own_children (a, p, ext, 2, &bad), 0);
  /* Another block naming them is refused. */
  assert_int_equal (zv_alloc_own_children (a, x + 32 * KiB, ext, 1, &bad),
                    -EEXIST);
  assert_int_equal (bad, 0);
  /* Freed and applied: free space, refused. */
  zv_alloc_free_defer (a, 5, y, 4 * KiB);
  zv_alloc_sync_begin (a, 7);
  assert_int_equal (zv_alloc_own (a, y, 4 * KiB), -ENOENT);
  /* own_rest takes whatever is unowned of an extent. */
  zv_alloc_own_rest (a, y + 8 * KiB, 16 * KiB);
  assert_int_equal (zv_alloc_own (a, y + 8 * KiB, 4 * KiB), -EEXIST);
  zv_alloc_destroy (a);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_fill_two_devices),
    tl_test (test_cursor_sequential),
    tl_test (test_no_dva_zero),
    tl_test (test_segment_long_runs),
    tl_test (test_free_defer),
    tl_test (test_free_defer_pipeline),
    tl_test (test_free_now),
    tl_test (test_misuse_aborts),
    tl_test (test_avoid),
    tl_test (test_avoid_cursor),
    tl_test (test_chunk_roundtrip),
    tl_test (test_dirty_tracking),
    tl_test (test_chunk_load_garbage),
    tl_test (test_defer_persist),
    tl_test (test_reserve_slop),
    tl_test (test_reserve_held),
    tl_test (test_big_device_fast),
    tl_test (test_concurrent_reserve),
    tl_test (test_owners),
    tl_test (test_own_lazy),
    tl_test (test_open_alloc_masked),
  };

  return tl_main (tests, NULL, NULL);
}
