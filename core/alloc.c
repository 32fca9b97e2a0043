/*
 * alloc.c: space allocation on the pool's devices.
 *
 * Theory of operation
 * -------------------
 *
 * Each device's allocatable area [start, end) is tracked by an in-memory
 * bitmap, one bit per ZV_SECTOR; bit i covers the byte range
 * [start + i * ZV_SECTOR, start + (i + 1) * ZV_SECTOR).  A set bit means
 * "allocated", which includes blocks freed but still waiting on a defer
 * list.  The bitmap is sized to a whole number of ZV_ALLOC_CHUNK-byte
 * chunks, the unit the pool persists; the bits past the end of the area
 * (the tail of the last chunk) are never set, and a chunk read from disk
 * that sets them is refused.  On disk a chunk is the bitmap as a sequence
 * of little-endian 64-bit words, so bit i is bit (i % 8) of byte i / 8.
 *
 * Every change to a bit marks its chunk dirty; zv_alloc_chunk_save copies
 * a chunk out and clears the flag, so a txg rewrites only the chunks that
 * changed in it.
 *
 * Life of a sector:
 *
 *   clear --zv_alloc_block / claim--> set --free_now---------------> clear
 *                                     set --free_defer(T)--> [defer list T]
 *   [defer list T] --sync_begin(T + 2)--> clear
 *
 * A block freed in txg T stays allocated until the sync of T + 2 begins,
 * so the blocks that the uberblocks of T and T + 1 point to are never
 * overwritten before a newer uberblock is on disk (TXG_DEFER).  The defer
 * lists are ZV_TXG_DEFER + 1 growable arrays indexed by txg % 3; every
 * entry carries its own txg, so a list may hold a later txg's frees (an
 * open-context free of T + 3 lands in the list of T) and sync_begin
 * applies only the entries that are old enough, in every list.
 *
 * The free hold (zv_alloc_hold_begin/end; the live checker's, check.c):
 * while it is on, sync_begin applies no entry of a txg after the hold's
 * txg H (the last txg surely committed when it began), so nothing H's
 * uberblock reaches (its trees, space maps, lists: all freed in txgs
 * after H) is reused until the hold ends.  An entry kept back is
 * carried into the list of the txg whose sync begins, which that sync
 * persists; so each held free is, at any time, in exactly one of the
 * two lists the newest uberblock names (txg T's or T - 1's), and a
 * crash or kill -9 during a hold loses none: the next import applies
 * them as any deferred free.  The bytes the last two starts carried are
 * "held" (a_held, part of a_deferred): allocated bits, not available,
 * and not on their way back either (zv_alloc_pressure, get_space).  The
 * hold ends with the check; what it kept is then applied two txgs after
 * its last carry, as any free.
 *
 * Placement: each zv_alloc_block call starts on the next device of a rotor
 * (striping); within a device the blocks go into the device's current
 * segment, a free run [ad_cursor, ad_seg_end) that successive allocations
 * fill in ascending order, so the blocks of one txg land side by side and
 * the sync joins them into few large writes (zio.c).  When a block does
 * not fit the rest of the segment, a new one is picked (alloc_seg_pick):
 * walking the free runs from the cursor, wrapping once, the first run of
 * alloc_segment_size (1 MiB, the largest joined write) or more wins; short
 * of that, once alloc_segment_scan (2 MiB) of the device has been walked,
 * the longest run seen there that fits; and if none did, the first run
 * that fits anywhere, so placement fails only when no run of the size
 * exists (the reservation's ENOSPC rules are unchanged).  Why not plain
 * first fit from the cursor: in a fuller pool the free space is the holes
 * that overwrites free at random, and first fit took each hole in turn,
 * so a txg's blocks were spread over about as many device writes as it
 * had holes in its way (bench: 35 KiB per write against 700 KiB on a
 * roomy pool).  Taking the longest run in a window of a few MiB leaves the
 * shortest holes for a later pass of the cursor, by when frees around
 * them have often joined them into longer runs; a much wider window
 * costs more to walk and did no better in a model of random overwrites
 * (docs/design.md, "Allocation").  The walk looks
 * at 64-bit words and skips full ones (and devices whose free count is
 * too small), so even a nearly full device of many GiB costs a few
 * hundred microseconds, and a pick within a window a few microseconds,
 * once per segment, not per block.  A ditto copy
 * ('avoid' != 0) goes on another device when one has room; otherwise on
 * the same device, first at least 1 / 2^zv_alloc_ditto_shift of the device
 * away from the first copy, and failing that anywhere not overlapping it.
 * Ditto placements on the avoided device do not move its cursor; they
 * have one of their own (ad_ditto_cursor): first fit from after the last
 * copy so placed, when that is outside the window, so a full run past the
 * window (the blocks snapshots keep) is walked once, not for every copy.
 *
 * Reservation: open context reserves bytes with a compare-and-swap loop on
 * an atomic counter against total - slop - allocated; the allocated byte
 * count is atomic too (written under the lock, read without it).  The
 * check is advisory by design: allocations racing with a reservation may
 * make it pass or fail a little early, never by more than one sync's
 * worth, which the slop absorbs.  A write that a volume's reservation
 * covers may count the deferred frees as back already, up to half the
 * slop (zv_alloc_reserve_held says why).
 *
 * Locking: a_lock guards the bitmaps, dirty flags, cursors, rotor, defer
 * lists and the writes of the deferred byte count (atomic, so that the
 * write throttle reads it without the lock, zv_alloc_pressure).
 * zv_alloc_reserve/unreserve take no lock.  No callback runs under a_lock (defer_foreach snapshots first), so
 * a callback may call back into the allocator.
 *
 * Trust: arguments from the engine's own bookkeeping (frees, chunk
 * indices, device areas, the reservation given back) are checked with
 * ZV_VERIFY, in every build: a double free or a lost byte of accounting
 * would corrupt the pool later, far from its cause.  The allocator's own
 * postconditions (a run it found clear changes every bit it marks, a
 * range stays inside its map) are ZV_ASSERTs.  Data that came off a disk
 * (chunk_load, defer_load, claim on import) is checked and refused with a
 * message instead, since a damaged pool must not crash the server.  Which sector has
 * which owner on an imported pool is alloc_own.c's.
 */
#include <config.h>

#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <endian.h>
#include <pthread.h>
#include <stdatomic.h>

#include "zv_util.h"
#include "tunable.h"
#include "alloc.h"
#include "alloc_impl.h"

/* Ditto copies on one device go at least nbits >> this apart if they can. */
static unsigned zv_alloc_ditto_shift = 3;

/* A segment: a free run this long ends the pick at once; short of one,
 * the longest run within the first 'scan' bytes walked wins (bytes; a
 * sector at least, the scan at least the segment). */
static uint64_t zv_alloc_segment_size = 1ull << 20;
static uint64_t zv_alloc_segment_scan = 2ull << 20;

/* Slop: total >> shift, at least min bytes, at most half the pool. */
static unsigned zv_alloc_slop_shift = 5;
static uint64_t zv_alloc_slop_min = 4ull << 20;

/* ---- bitmap primitives (caller holds a_lock) ---- */

/* Mask of bits [lo, hi) of one word, 0 <= lo < hi <= 64. */
static inline uint64_t
alloc_mask (unsigned lo, unsigned hi)
{
  uint64_t m = hi - lo == 64 ? ~0ull : ((1ull << (hi - lo)) - 1);
  return m << lo;
}

/*
 * First clear bit in [from, to), or 'to'.  Whole words of ones are skipped,
 * which is what keeps a nearly full device cheap to scan.
 */
static uint64_t
alloc_next_clear (const uint64_t *map, uint64_t from, uint64_t to)
{
  uint64_t w, word;

  if (from >= to)
    return to;
  w = from / 64;
  word = ~map[w] & (~0ull << (from % 64));
  for (;;) {
    if (word != 0) {
      uint64_t bit = w * 64 + (uint64_t) __builtin_ctzll (word);
      return bit < to ? bit : to;
    }
    if (++w * 64 >= to)
      return to;
    word = ~map[w];
  }
}

/* First set bit in [from, to), or 'to'; skips whole words of zeros. */
static uint64_t
alloc_next_set (const uint64_t *map, uint64_t from, uint64_t to)
{
  uint64_t w, word;

  if (from >= to)
    return to;
  w = from / 64;
  word = map[w] & (~0ull << (from % 64));
  for (;;) {
    if (word != 0) {
      uint64_t bit = w * 64 + (uint64_t) __builtin_ctzll (word);
      return bit < to ? bit : to;
    }
    if (++w * 64 >= to)
      return to;
    word = map[w];
  }
}

/*
 * Lowest s in [from, to) such that [s, s + n) is clear and ends at or
 * before 'limit' (to <= limit), or ZV_ALLOC_NONE.
 */
static uint64_t
alloc_find_run (const uint64_t *map, uint64_t from, uint64_t to,
                uint64_t limit, uint64_t n)
{
  uint64_t s = from;

  while (s < to) {
    uint64_t e;

    s = alloc_next_clear (map, s, to);
    if (s >= to || n > limit - s)
      return ZV_ALLOC_NONE;
    e = alloc_next_set (map, s, s + n);
    if (e == s + n)
      return s;
    s = e + 1;
  }
  return ZV_ALLOC_NONE;
}

/*
 * First fit of n bits on d, starting at 'cursor' and wrapping once,
 * excluding the window [wlo, whi) (empty when wlo >= whi).  The allowed
 * space is one or two intervals; they are visited in address order from
 * the one holding the cursor, and the part of that interval before the
 * cursor comes last.
 */
static uint64_t
alloc_dev_search (const zv_alloc_dev_t *d, uint64_t n, uint64_t cursor,
                  uint64_t wlo, uint64_t whi)
{
  uint64_t lo[2], hi[2], s;
  unsigned k = 0, j, pass;

  wlo = ZV_MAX (wlo, d->ad_minbit);
  whi = ZV_MIN (whi, d->ad_nbits);
  if (wlo < whi) {
    if (d->ad_minbit < wlo) {
      lo[k] = d->ad_minbit; hi[k] = wlo; k++;
    }
    if (whi < d->ad_nbits) {
      lo[k] = whi; hi[k] = d->ad_nbits; k++;
    }
  }
  else if (d->ad_minbit < d->ad_nbits) {
    lo[k] = d->ad_minbit; hi[k] = d->ad_nbits; k++;
  }
  if (k == 0)
    return ZV_ALLOC_NONE;

  for (j = 0; j < k && hi[j] <= cursor; j++)
    ;
  if (j == k) {                 /* cursor past everything: wrap */
    j = 0;
    cursor = 0;
  }

  for (pass = 0; pass < k; pass++) {
    unsigned i = (j + pass) % k;
    uint64_t from = pass == 0 ? ZV_MAX (cursor, lo[i]) : lo[i];

    s = alloc_find_run (d->ad_map, from, hi[i], hi[i], n);
    if (s != ZV_ALLOC_NONE)
      return s;
  }
  if (cursor > lo[j])
    return alloc_find_run (d->ad_map, lo[j], ZV_MIN (cursor, hi[j]),
                           hi[j], n);
  return ZV_ALLOC_NONE;
}

/*
 * Set or clear bits [b, b + n) of d a word at a time, dirtying each chunk
 * whose bits change.  Returns the number of bits that changed.
 */
static uint64_t
alloc_range_mark (zv_alloc_dev_t *d, uint64_t b, uint64_t n, bool set)
{
  uint64_t end = b + n, changed = 0;

  ZV_ASSERT3U (end, <=, d->ad_nbits);
  while (b < end) {
    uint64_t w = b / 64;
    unsigned lo = (unsigned) (b % 64);
    unsigned hi = (unsigned) ZV_MIN ((uint64_t) 64, lo + (end - b));
    uint64_t mask = alloc_mask (lo, hi);
    uint64_t old = d->ad_map[w];
    uint64_t neu = set ? old | mask : old & ~mask;

    if (neu != old) {
      changed += (uint64_t) __builtin_popcountll (old ^ neu);
      d->ad_map[w] = neu;
      d->ad_dirty[w / ZV_ALLOC_CHUNK_WORDS] = 1;
    }
    b += hi - lo;
  }
  return changed;
}

/* Are all bits [b, b + n) of map set? */
bool
zv_alloc_bits_all_set (const uint64_t *map, uint64_t b, uint64_t n)
{
  uint64_t end = b + n;

  while (b < end) {
    unsigned lo = (unsigned) (b % 64);
    unsigned hi = (unsigned) ZV_MIN ((uint64_t) 64, lo + (end - b));
    uint64_t mask = alloc_mask (lo, hi);

    if ((map[b / 64] & mask) != mask)
      return false;
    b += hi - lo;
  }
  return true;
}

/* Set or clear bits [b, b + n) of map (no accounting, no dirty flags). */
void
zv_alloc_bits_mark (uint64_t *map, uint64_t b, uint64_t n, bool set)
{
  uint64_t end = b + n;

  while (b < end) {
    unsigned lo = (unsigned) (b % 64);
    unsigned hi = (unsigned) ZV_MIN ((uint64_t) 64, lo + (end - b));
    uint64_t mask = alloc_mask (lo, hi);

    map[b / 64] = set ? map[b / 64] | mask : map[b / 64] & ~mask;
    b += hi - lo;
  }
}

/* Are all bits [b, b + n) of d set? */
bool
zv_alloc_range_all_set (const zv_alloc_dev_t *d, uint64_t b, uint64_t n)
{
  return zv_alloc_bits_all_set (d->ad_map, b, n);
}

/*
 * Map (dva, size) onto a device and a bit range.  False when the extent
 * is not sector-aligned, empty, or not wholly inside one device's area.
 */
bool
zv_alloc_extent (zv_alloc_t *a, uint64_t dva, uint32_t size,
              zv_alloc_dev_t **dp, uint64_t *bp, uint64_t *np)
{
  unsigned v = ZV_DVA_VDEV (dva);
  uint64_t off = ZV_DVA_OFFSET (dva);
  zv_alloc_dev_t *d;

  if (dva == 0 || v >= a->a_ndevs || size == 0 || size % ZV_SECTOR != 0 ||
      off % ZV_SECTOR != 0)
    return false;
  d = &a->a_devs[v];
  if (off < d->ad_start || off > d->ad_end || size > d->ad_end - off)
    return false;
  *dp = d;
  *bp = (off - d->ad_start) / ZV_SECTOR;
  *np = size / ZV_SECTOR;
  return true;
}

/* Mark a found run allocated and account for it. */
static void
alloc_take (zv_alloc_t *a, zv_alloc_dev_t *d, uint64_t b, uint64_t n)
{
  uint64_t changed = alloc_range_mark (d, b, n, true);

  ZV_ASSERT3U (changed, ==, n);
  d->ad_free -= n;
  atomic_fetch_add_explicit (&a->a_allocated, n * ZV_SECTOR,
                             memory_order_relaxed);
}

/* Clear an allocated extent; every bit must be set (else double free). */
static void
alloc_release (zv_alloc_t *a, zv_alloc_dev_t *d, uint64_t b, uint64_t n)
{
  uint64_t changed;

  ZV_VERIFY (zv_alloc_range_all_set (d, b, n));
  changed = alloc_range_mark (d, b, n, false);
  ZV_ASSERT3U (changed, ==, n);
  d->ad_free += n;
  atomic_fetch_sub_explicit (&a->a_allocated, n * ZV_SECTOR,
                             memory_order_relaxed);
}

/* The slop of a pool of 'total' bytes (the tunables alloc_slop_shift and
 * alloc_slop_min): the pool's create sizes the volume by it too. */
uint64_t
zv_alloc_slop (uint64_t total)
{
  uint64_t slop = ZV_MAX (total >> zv_alloc_slop_shift, zv_alloc_slop_min);

  return ZV_MIN (slop, total / 2);
}

/* ---- create / destroy ---- */

/* Build one bitmap per device, all clear. */
zv_alloc_t *
zv_alloc_create (unsigned ndevs, const uint64_t *start, const uint64_t *end)
{
  zv_alloc_t *a;
  unsigned i;

  ZV_VERIFY (ndevs >= 1 && ndevs <= 256);
  a = zv_calloc (1, sizeof *a);
  ZV_VERIFY (pthread_mutex_init (&a->a_lock, NULL) == 0);
  a->a_ndevs = ndevs;
  a->a_devs = zv_calloc (ndevs, sizeof *a->a_devs);
  atomic_init (&a->a_allocated, 0);
  atomic_init (&a->a_reserved, 0);

  for (i = 0; i < ndevs; i++) {
    zv_alloc_dev_t *d = &a->a_devs[i];

    ZV_VERIFY (start[i] % ZV_SECTOR == 0 && end[i] % ZV_SECTOR == 0);
    ZV_VERIFY3U (start[i], <=, end[i]);
    ZV_VERIFY3U (end[i], <=, 1ull << 56);  /* a dva's offset field */
    d->ad_start = start[i];
    d->ad_end = end[i];
    d->ad_nbits = (end[i] - start[i]) / ZV_SECTOR;
    /* Sector 0 of device 0 would be dva 0, which means "no block". */
    d->ad_minbit = (i == 0 && start[i] == 0 && d->ad_nbits > 0) ? 1 : 0;
    d->ad_free = d->ad_nbits;
    d->ad_nchunks = (size_t) ((d->ad_nbits + ZV_ALLOC_CHUNK_BITS - 1) /
                              ZV_ALLOC_CHUNK_BITS);
    if (d->ad_nchunks > 0) {
      d->ad_map = zv_calloc (d->ad_nchunks, ZV_ALLOC_CHUNK);
      d->ad_dirty = zv_calloc (d->ad_nchunks, 1);
    }
    a->a_total += end[i] - start[i];
  }

  a->a_slop = zv_alloc_slop (a->a_total);
  return a;

}

/* Free everything; pending defer lists are simply dropped. */
void
zv_alloc_destroy (zv_alloc_t *a)
{
  unsigned i;

  if (a == NULL)
    return;
  if (a->a_devs != NULL) {
    for (i = 0; i < a->a_ndevs; i++) {
      free (a->a_devs[i].ad_map);
      free (a->a_devs[i].ad_dirty);
      free (a->a_devs[i].ad_unowned);
      free (a->a_devs[i].ad_checked);
    }
    free (a->a_devs);
  }
  for (i = 0; i < ZV_ALLOC_NLISTS; i++)
    free (a->a_defer[i].dl_ents);
  free (a->a_open);
  pthread_mutex_destroy (&a->a_lock);
  free (a);
}

/* ---- allocation ---- */

/*
 * Walk the free runs that start in [from, to), each looked at up to
 * 'want' bits and allowed to run on to 'limit', and update the pick
 * (caller holds a_lock).  *walked counts the bits walked over; true when
 * the pick is made: a run of 'want', or the longest run of at least n
 * once 'scan' bits have been walked.
 */
static bool
alloc_seg_walk (const zv_alloc_dev_t *d, uint64_t from, uint64_t to,
                uint64_t limit, uint64_t n, uint64_t want, uint64_t scan,
                uint64_t *walked, uint64_t *best, uint64_t *blen)
{
  uint64_t s = from;

  while (s < to) {
    uint64_t c = alloc_next_clear (d->ad_map, s, to), e;

    *walked += c - s;
    if (c >= to)
      break;
    e = alloc_next_set (d->ad_map, c, ZV_MIN (c + want, limit));
    if (e - c > *blen && e - c >= n) {
      *best = c;
      *blen = e - c;
    }
    if (*blen >= want || (*walked >= scan && *blen >= n))
      return true;
    *walked += e + 1 - c;
    s = e + 1;
  }
  return false;
}

/*
 * Pick a new segment on d for a block of n bits (see the theory comment)
 * and point the cursor at it; false when no free run of n bits exists.
 * The walk goes from the cursor to the end, then from the start, where
 * a run may run on past the cursor (it was cut there on the way out).
 */
static bool
alloc_seg_pick (zv_alloc_dev_t *d, uint64_t n)
{
  uint64_t want = ZV_MAX (n, zv_alloc_segment_size / ZV_SECTOR);
  uint64_t scan = ZV_MAX (want, zv_alloc_segment_scan / ZV_SECTOR);
  uint64_t cur = ZV_MAX (d->ad_cursor, d->ad_minbit);
  uint64_t walked = 0, best = ZV_ALLOC_NONE, blen = 0;

  if (cur >= d->ad_nbits)
    cur = d->ad_minbit;
  if (!alloc_seg_walk (d, cur, d->ad_nbits, d->ad_nbits, n, want, scan,
                       &walked, &best, &blen))
    (void) alloc_seg_walk (d, d->ad_minbit, cur, d->ad_nbits, n, want, scan,
                           &walked, &best, &blen);
  if (best == ZV_ALLOC_NONE)
    return false;
  d->ad_cursor = best;
  d->ad_seg_end = best + blen;
  return true;
}

/* A block of n bits into d's segment, picking a new one when it does not
 * fit what is left; moves the cursor past it. */
static bool
alloc_try_dev (zv_alloc_t *a, unsigned v, uint64_t n, uint64_t *dva)
{
  zv_alloc_dev_t *d = &a->a_devs[v];
  uint64_t s = d->ad_cursor;

  if (d->ad_free < n)
    return false;
  /* The segment was clear when picked; a claim or a ditto copy may have
   * taken part of it since, so its bits are looked at again. */
  if (s >= d->ad_seg_end || n > d->ad_seg_end - s
      || alloc_next_set (d->ad_map, s, s + n) != s + n) {
    if (!alloc_seg_pick (d, n))
      return false;
    s = d->ad_cursor;
  }
  ZV_ASSERT3U (s + n, <=, d->ad_seg_end);
  alloc_take (a, d, s, n);
  d->ad_cursor = s + n;
  if (d->ad_cursor >= d->ad_nbits)
    d->ad_cursor = d->ad_seg_end = 0;
  *dva = ZV_DVA_MAKE (v, d->ad_start + s * ZV_SECTOR);
  return true;
}

/*
 * A ditto copy on the device of 'avoid': first keep a distance from it,
 * then settle for not overlapping [avoid, avoid + n sectors).  The cursor
 * stays where the ordinary allocations left it.
 */
static bool
alloc_try_apart (zv_alloc_t *a, uint64_t avoid, uint64_t n, uint64_t *dva)
{
  unsigned v = ZV_DVA_VDEV (avoid);
  zv_alloc_dev_t *d = &a->a_devs[v];
  uint64_t off = ZV_DVA_OFFSET (avoid);
  uint64_t ab, aend, dist, wlo, whi, from, s;

  if (d->ad_free < n)
    return false;
  if (off < d->ad_start || off >= d->ad_end) {
    /* Not in this area at all: nothing to keep away from. */
    s = alloc_dev_search (d, n, d->ad_cursor, 0, 0);
  }
  else {
    ab = (off - d->ad_start) / ZV_SECTOR;
    aend = ZV_MIN (ab + n, d->ad_nbits);
    dist = d->ad_nbits >> zv_alloc_ditto_shift;
    wlo = ab > dist ? ab - dist : 0;
    whi = aend + dist;
    /* From where the last one went, when that is outside the window:
     * from the window's end each time, a search walked the same full
     * run again for every copy (100 snapshots of a 1 GiB volume: 460,000
     * instructions a txg, core-bench txg-sync-snap). */
    from = d->ad_ditto_cursor < wlo || d->ad_ditto_cursor >= whi
      ? d->ad_ditto_cursor : whi;
    s = alloc_dev_search (d, n, from, wlo, whi);
    if (s == ZV_ALLOC_NONE)
      s = alloc_dev_search (d, n, d->ad_cursor, ab, aend);
  }
  if (s == ZV_ALLOC_NONE)
    return false;
  d->ad_ditto_cursor = s + n < d->ad_nbits ? s + n : 0;
  alloc_take (a, d, s, n);
  *dva = ZV_DVA_MAKE (v, d->ad_start + s * ZV_SECTOR);
  return true;
}

static int alloc_block_locked (zv_alloc_t *a, uint32_t size, uint64_t avoid,
                               uint64_t *dva);

/*
 * Allocate 'size' contiguous bytes: rotate the starting device per call,
 * first fit on each; a ditto copy avoids the first copy's device, and only
 * falls back to that device (apart from the copy) when no other has room.
 */
int
zv_alloc_block (zv_alloc_t *a, uint32_t size, uint64_t avoid, uint64_t *dva)
{
  int r;

  ZV_VERIFY (size > 0 && size % ZV_SECTOR == 0);
  alloc_lock (a);
  r = alloc_block_locked (a, size, avoid, dva);
  alloc_unlock (a);
  return r;
}

/*
 * An allocation in open context for txg 'txg' (the intent log's in-place
 * blocks, written before their txg syncs).  Its bits are set at once, as
 * any allocation's, but a sync of an earlier txg must not write them:
 * that sync's tree does not own the block, and if the server then died
 * before the log block naming it was written, the block would be
 * allocated on disk with no owner at all, leaked for good (found by
 * test-snapshot-crash.sh's kill -9 and the checker).  So the allocation
 * is recorded, under the same lock, and zv_alloc_chunk_save leaves its
 * bits out of every chunk saved by the sync of a txg before 'txg'.  After
 * a crash such a block is free on disk, or, when a durable log record
 * names it, taken by the import's claim as before.
 */
int
zv_alloc_block_open (zv_alloc_t *a, uint32_t size, uint64_t txg,
                     uint64_t *dva)
{
  int r;

  ZV_VERIFY (size > 0 && size % ZV_SECTOR == 0);
  alloc_lock (a);
  r = alloc_block_locked (a, size, 0, dva);
  if (r == 0 && txg > a->a_sync_txg) {
    ZV_GROW (a->a_open, a->a_nopen, a->a_capopen, 64);
    a->a_open[a->a_nopen++] = (zv_alloc_open_t) {
      .ao_dva = *dva, .ao_size = size, .ao_txg = txg,
    };
  }
  alloc_unlock (a);
  return r;
}

static int
alloc_block_locked (zv_alloc_t *a, uint32_t size, uint64_t avoid,
                    uint64_t *dva)
{
  uint64_t n = size / ZV_SECTOR;
  unsigned first, i, avdev = avoid != 0 ? ZV_DVA_VDEV (avoid) : UINT32_MAX;
  int r = -ENOSPC;

  first = a->a_rotor;
  a->a_rotor = (a->a_rotor + 1) % a->a_ndevs;
  for (i = 0; i < a->a_ndevs; i++) {
    unsigned v = (first + i) % a->a_ndevs;

    if (v == avdev)
      continue;
    if (alloc_try_dev (a, v, n, dva)) {
      r = 0;
      goto out;
    }
  }
  if (avdev < a->a_ndevs && alloc_try_apart (a, avoid, n, dva))
    r = 0;
 out:
  return r;
}

/*
 * Import: mark an extent allocated.  Bits already set stay set and are
 * counted once.  An extent outside every area came from a damaged disk:
 * say so and ignore it.
 */
void
zv_alloc_claim (zv_alloc_t *a, uint64_t dva, uint32_t size)
{
  zv_alloc_dev_t *d;
  uint64_t b, n, changed;

  if (!zv_alloc_extent (a, dva, size, &d, &b, &n)) {
    zv_error ("alloc: claim of an invalid extent (device %u offset %llu "
              "size %u) ignored", ZV_DVA_VDEV (dva),
              (unsigned long long) ZV_DVA_OFFSET (dva), size);
    return;
  }
  alloc_lock (a);
  changed = alloc_range_mark (d, b, n, true);
  d->ad_free -= changed;
  atomic_fetch_add_explicit (&a->a_allocated, changed * ZV_SECTOR,
                             memory_order_relaxed);
  alloc_unlock (a);
}

/* Free a block that no committed txg references: reusable at once. */
void
zv_alloc_free_now (zv_alloc_t *a, uint64_t dva, uint32_t size)
{
  zv_alloc_dev_t *d;
  uint64_t b, n;

  ZV_VERIFY (zv_alloc_extent (a, dva, size, &d, &b, &n));
  alloc_lock (a);
  alloc_release (a, d, b, n);
  alloc_unlock (a);
}

/* ---- deferred frees ---- */

/* Append to the defer list of txg (caller holds a_lock). */
static void
alloc_defer_append (zv_alloc_t *a, uint64_t txg, uint64_t dva,
                    uint32_t size)
{
  zv_alloc_defer_list_t *dl = &a->a_defer[txg % ZV_ALLOC_NLISTS];

  ZV_GROW (dl->dl_ents, dl->dl_count, dl->dl_cap, 64);
  dl->dl_ents[dl->dl_count].de_dva = dva;
  dl->dl_ents[dl->dl_count].de_txg = txg;
  dl->dl_ents[dl->dl_count].de_size = size;
  dl->dl_count++;
  atomic_fetch_add_explicit (&a->a_deferred, size, memory_order_relaxed);
}

/*
 * Take [dva, dva + size) out of every pending deferred free (splitting
 * the extents that overlap it): the space stays allocated, and whoever
 * called this now owns its free.  Intent-log replay uses it for blocks
 * that records still point at.  Returns the bytes taken out.
 */
uint64_t
zv_alloc_defer_cancel (zv_alloc_t *a, uint64_t dva, uint32_t size)
{
  uint64_t lo = dva, hi = dva + size, taken = 0;

  alloc_lock (a);
  for (unsigned l = 0; l < ZV_ALLOC_NLISTS; l++) {
    zv_alloc_defer_list_t *dl = &a->a_defer[l];
    for (size_t i = 0; i < dl->dl_count; i++) {
      zv_alloc_defer_ent_t e = dl->dl_ents[i];
      uint64_t elo = e.de_dva, ehi = e.de_dva + e.de_size;

      if (ZV_DVA_VDEV (elo) != ZV_DVA_VDEV (lo) || ehi <= lo || elo >= hi)
        continue;
      /* Remove the entry, then put back the parts outside [lo, hi). */
      dl->dl_ents[i] = dl->dl_ents[--dl->dl_count];
      atomic_fetch_sub_explicit (&a->a_deferred, e.de_size,
                                 memory_order_relaxed);
      taken += ZV_MIN (ehi, hi) - ZV_MAX (elo, lo);
      if (elo < lo)
        alloc_defer_append (a, e.de_txg, elo, (uint32_t) (lo - elo));
      if (ehi > hi)
        alloc_defer_append (a, e.de_txg, hi, (uint32_t) (ehi - hi));
      i--;                      /* look at what moved into slot i */
    }
  }
  alloc_unlock (a);
  return taken;
}

/* Every sector of the extent clear, or inside a pending deferred free. */
bool
zv_alloc_may_claim (zv_alloc_t *a, uint64_t dva, uint32_t size)
{
  zv_alloc_dev_t *d;
  uint64_t b, n;
  bool ok = true;

  if (!zv_alloc_extent (a, dva, size, &d, &b, &n))
    return false;
  alloc_lock (a);
  for (uint64_t i = 0; i < n && ok; i++) {
    uint64_t bit = b + i, sec = dva + i * ZV_SECTOR;
    if ((d->ad_map[bit / 64] & (1ull << (bit % 64))) == 0)
      continue;
    ok = false;
    for (unsigned l = 0; l < ZV_ALLOC_NLISTS && !ok; l++) {
      const zv_alloc_defer_list_t *dl = &a->a_defer[l];
      for (size_t j = 0; j < dl->dl_count && !ok; j++) {
        const zv_alloc_defer_ent_t *e = &dl->dl_ents[j];
        ok = ZV_DVA_VDEV (e->de_dva) == ZV_DVA_VDEV (sec)
          && e->de_dva <= sec && sec < e->de_dva + e->de_size;
      }
    }
  }
  alloc_unlock (a);
  return ok;
}

/* Free when the sync of txg + ZV_TXG_DEFER begins; the block must be live. */
void
zv_alloc_free_defer (zv_alloc_t *a, uint64_t txg, uint64_t dva,
                     uint32_t size)
{
  zv_alloc_dev_t *d;
  uint64_t b, n;

  ZV_VERIFY (zv_alloc_extent (a, dva, size, &d, &b, &n));
  alloc_lock (a);
  ZV_VERIFY (zv_alloc_range_all_set (d, b, n));
  alloc_defer_append (a, txg, dva, size);
  alloc_unlock (a);
}

/*
 * Start of the sync of txg: every deferred free of txg - ZV_TXG_DEFER or
 * older becomes reusable.  Normally that is exactly the list of txg - 2;
 * the other lists are filtered too so a skipped txg cannot strand a free.
 */
void
zv_alloc_sync_begin (zv_alloc_t *a, uint64_t txg)
{
  zv_alloc_defer_ent_t *carry = NULL;
  size_t ncarry = 0, capcarry = 0;
  uint64_t held = 0;
  unsigned l;

  alloc_lock (a);
  if (txg > a->a_sync_txg)
    a->a_sync_txg = txg;
  if (txg < ZV_TXG_DEFER) {
    alloc_unlock (a);
    return;
  }
  for (l = 0; l < ZV_ALLOC_NLISTS; l++) {
    zv_alloc_defer_list_t *dl = &a->a_defer[l];
    size_t i, keep = 0;

    for (i = 0; i < dl->dl_count; i++) {
      zv_alloc_defer_ent_t *e = &dl->dl_ents[i];
      zv_alloc_dev_t *d;
      uint64_t b, n;

      if (e->de_txg > txg - ZV_TXG_DEFER) {
        dl->dl_ents[keep++] = *e;
        continue;
      }
      /* Held: carried into txg's own list, which this sync persists. */
      if (a->a_hold && e->de_txg > a->a_hold_txg) {
        ZV_GROW (carry, ncarry, capcarry, 64);
        carry[ncarry] = *e;
        carry[ncarry++].de_txg = txg;
        held += e->de_size;
        atomic_fetch_sub_explicit (&a->a_deferred, e->de_size,
                                   memory_order_relaxed);
        continue;
      }
      ZV_VERIFY (zv_alloc_extent (a, e->de_dva, e->de_size, &d, &b, &n));
      alloc_release (a, d, b, n);
      atomic_fetch_sub_explicit (&a->a_deferred, e->de_size,
                                 memory_order_relaxed);
    }
    dl->dl_count = keep;
  }
  for (size_t i = 0; i < ncarry; i++)
    alloc_defer_append (a, txg, carry[i].de_dva, carry[i].de_size);
  if (a->a_hold) {
    atomic_store_explicit (&a->a_held, held + a->a_carry,
                           memory_order_relaxed);
    atomic_store_explicit (&a->a_held_n, ncarry + a->a_carry_n,
                           memory_order_relaxed);
    a->a_carry = held;
    a->a_carry_n = ncarry;
  }
  alloc_unlock (a);
  free (carry);
}

/*
 * The free hold (the live checker's, check.c): from now on no deferred
 * free of a txg after 'txg' (one that committed) is applied, so nothing
 * allocated as of txg (its trees, space maps, lists) is reused until
 * zv_alloc_hold_end.  Those frees are applied from the sync of txg + 3
 * on: -EAGAIN when that sync began already (the caller read its txg
 * before a sync raced past it: it reads again), -EBUSY when a hold is
 * on already.
 */
int
zv_alloc_hold_begin (zv_alloc_t *a, uint64_t txg)
{
  int r = 0;

  alloc_lock (a);
  if (a->a_hold)
    r = -EBUSY;
  else if (a->a_sync_txg > txg + ZV_TXG_DEFER)
    r = -EAGAIN;
  else {
    a->a_hold = true;
    a->a_hold_txg = txg;
    a->a_carry = a->a_carry_n = 0;
    atomic_store_explicit (&a->a_held, 0, memory_order_relaxed);
    atomic_store_explicit (&a->a_held_n, 0, memory_order_relaxed);
  }
  alloc_unlock (a);
  return r;
}

/* The hold ends: what it kept back is applied by the next syncs, two
 * txgs after the last one that carried it, as any deferred free. */
void
zv_alloc_hold_end (zv_alloc_t *a)
{
  alloc_lock (a);
  ZV_VERIFY (a->a_hold);
  a->a_hold = false;
  atomic_store_explicit (&a->a_held, 0, memory_order_relaxed);
  atomic_store_explicit (&a->a_held_n, 0, memory_order_relaxed);
  alloc_unlock (a);
}

/* What the hold keeps back: bytes and extents (lock-free, advisory). */
void
zv_alloc_hold_get (zv_alloc_t *a, uint64_t *bytes, uint64_t *extents)
{
  *bytes = atomic_load_explicit (&a->a_held, memory_order_relaxed);
  if (extents)
    *extents = atomic_load_explicit (&a->a_held_n, memory_order_relaxed);
}

/*
 * Hand txg's deferred frees to fn, in the order they were made.  The list
 * is copied first so fn runs without a_lock and may allocate or free.
 */
void
zv_alloc_defer_foreach (zv_alloc_t *a, uint64_t txg, zv_alloc_extent_fn fn,
                        void *arg)
{
  const zv_alloc_defer_list_t *dl = &a->a_defer[txg % ZV_ALLOC_NLISTS];
  zv_alloc_defer_ent_t *copy = NULL;
  size_t i, count = 0;

  alloc_lock (a);
  if (dl->dl_count > 0) {
    copy = zv_alloc (dl->dl_count * sizeof *copy);
    for (i = 0; i < dl->dl_count; i++)
      if (dl->dl_ents[i].de_txg == txg)
        copy[count++] = dl->dl_ents[i];
  }
  alloc_unlock (a);

  for (i = 0; i < count; i++)
    fn (arg, copy[i].de_dva, copy[i].de_size);
  free (copy);
}

/*
 * Import: put back a persisted deferred free.  The entry came off disk: if
 * it does not name an allocated extent, applying it later would free
 * space that is not ours, so it is refused (at worst a leak).
 */
void
zv_alloc_defer_load (zv_alloc_t *a, uint64_t txg, uint64_t dva,
                     uint32_t size)
{
  zv_alloc_dev_t *d;
  uint64_t b, n;
  bool ok;

  ok = zv_alloc_extent (a, dva, size, &d, &b, &n);
  alloc_lock (a);
  if (ok)
    ok = zv_alloc_range_all_set (d, b, n);
  if (ok)
    alloc_defer_append (a, txg, dva, size);
  alloc_unlock (a);
  if (!ok)
    zv_error ("alloc: deferred free of txg %llu (device %u offset %llu "
              "size %u) is not an allocated extent; ignored",
              (unsigned long long) txg, ZV_DVA_VDEV (dva),
              (unsigned long long) ZV_DVA_OFFSET (dva), size);
}

/* ---- persisted chunks ---- */

/* Number of ZV_ALLOC_CHUNK-byte chunks of device vdev's bitmap. */
size_t
zv_alloc_nchunks (zv_alloc_t *a, unsigned vdev)
{
  ZV_VERIFY3U (vdev, <, a->a_ndevs);
  return a->a_devs[vdev].ad_nchunks;
}

/* Has chunk idx changed since it was last saved or loaded? */
bool
zv_alloc_chunk_dirty (zv_alloc_t *a, unsigned vdev, size_t idx)
{
  bool dirty;

  ZV_VERIFY3U (vdev, <, a->a_ndevs);
  ZV_VERIFY3U (idx, <, a->a_devs[vdev].ad_nchunks);
  alloc_lock (a);
  dirty = a->a_devs[vdev].ad_dirty[idx] != 0;
  alloc_unlock (a);
  return dirty;
}

/*
 * Clear in chunk idx of device vdev (on-disk form, dst) the bits of the
 * open-context allocations of txgs after the one syncing (caller holds
 * a_lock); those of that txg or before are its own now and are dropped.
 * True when a bit was left out.
 */
static bool
alloc_open_mask (zv_alloc_t *a, unsigned vdev, size_t idx, unsigned char *dst)
{
  const uint64_t lo = (uint64_t) idx * ZV_ALLOC_CHUNK_BITS;
  const uint64_t hi = lo + ZV_ALLOC_CHUNK_BITS;
  size_t keep = 0;
  bool masked = false;

  for (size_t i = 0; i < a->a_nopen; i++) {
    zv_alloc_open_t *o = &a->a_open[i];
    zv_alloc_dev_t *d;
    uint64_t b, n;

    if (o->ao_txg <= a->a_sync_txg)
      continue;                           /* its txg owns it: drop */
    a->a_open[keep++] = *o;
    if (ZV_DVA_VDEV (o->ao_dva) != vdev)
      continue;
    ZV_VERIFY (zv_alloc_extent (a, o->ao_dva, o->ao_size, &d, &b, &n));
    for (uint64_t k = ZV_MAX (b, lo); k < ZV_MIN (b + n, hi); k++) {
      dst[(k - lo) / 8] &= (unsigned char) ~(1u << ((k - lo) % 8));
      masked = true;
    }
  }
  a->a_nopen = keep;
  return masked;
}

/* Copy chunk idx out in on-disk (little-endian) form; it is clean after. */
void
zv_alloc_chunk_save (zv_alloc_t *a, unsigned vdev, size_t idx, void *buf)
{
  zv_alloc_dev_t *d;
  const uint64_t *src;
  unsigned char *dst = buf;
  uint64_t i;

  ZV_VERIFY3U (vdev, <, a->a_ndevs);
  d = &a->a_devs[vdev];
  ZV_VERIFY3U (idx, <, d->ad_nchunks);
  alloc_lock (a);
  src = &d->ad_map[idx * ZV_ALLOC_CHUNK_WORDS];
  for (i = 0; i < ZV_ALLOC_CHUNK_WORDS; i++) {
    uint64_t le = htole64 (src[i]);
    memcpy (dst + i * 8, &le, 8);
  }
  d->ad_dirty[idx] = 0;
  if (alloc_open_mask (a, vdev, idx, dst))
    d->ad_dirty[idx] = 1;       /* written again, whole, by a later txg */
  alloc_unlock (a);
}

/*
 * Import: replace chunk idx with the on-disk copy in buf.  The whole chunk
 * is checked before anything changes: a chunk that sets bits past the end
 * of the area is damaged or not ours, and is refused with -EINVAL.
 */
int
zv_alloc_chunk_load (zv_alloc_t *a, unsigned vdev, size_t idx,
                     const void *buf)
{
  const unsigned char *src = buf;
  zv_alloc_dev_t *d;
  uint64_t i, first_bit, before = 0, after = 0;

  if (vdev >= a->a_ndevs || idx >= a->a_devs[vdev].ad_nchunks) {
    zv_error ("alloc: space map chunk %zu of device %u does not exist",
              idx, vdev);
    return -EINVAL;
  }
  d = &a->a_devs[vdev];
  first_bit = (uint64_t) idx * ZV_ALLOC_CHUNK_BITS;

  for (i = 0; i < ZV_ALLOC_CHUNK_WORDS; i++) {
    uint64_t bit0 = first_bit + i * 64, w, valid;

    if (bit0 + 64 <= d->ad_nbits)
      continue;
    memcpy (&w, src + i * 8, 8);
    w = le64toh (w);
    valid = bit0 >= d->ad_nbits ? 0 :
      alloc_mask (0, (unsigned) (d->ad_nbits - bit0));
    if ((w & ~valid) != 0) {
      zv_error ("alloc: space map chunk %zu of device %u marks sectors past "
                "the end of the device (bit %llu); refusing it",
                idx, vdev,
                (unsigned long long) (bit0 +
                                      (uint64_t) __builtin_ctzll (w & ~valid)));
      return -EINVAL;
    }
  }

  alloc_lock (a);
  for (i = 0; i < ZV_ALLOC_CHUNK_WORDS; i++) {
    uint64_t *dst = &d->ad_map[idx * ZV_ALLOC_CHUNK_WORDS + i], w;

    memcpy (&w, src + i * 8, 8);
    w = le64toh (w);
    before += (uint64_t) __builtin_popcountll (*dst);
    after += (uint64_t) __builtin_popcountll (w);
    *dst = w;
  }
  d->ad_free = d->ad_free + before - after;
  if (after >= before)
    atomic_fetch_add_explicit (&a->a_allocated, (after - before) * ZV_SECTOR,
                               memory_order_relaxed);
  else
    atomic_fetch_sub_explicit (&a->a_allocated, (before - after) * ZV_SECTOR,
                               memory_order_relaxed);
  d->ad_dirty[idx] = 0;
  alloc_unlock (a);
  return 0;
}

/* A new pool has nothing on disk yet: every chunk must be written. */
void
zv_alloc_dirty_all (zv_alloc_t *a)
{
  unsigned v;

  alloc_lock (a);
  for (v = 0; v < a->a_ndevs; v++)
    if (a->a_devs[v].ad_nchunks > 0)
      memset (a->a_devs[v].ad_dirty, 1, a->a_devs[v].ad_nchunks);
  alloc_unlock (a);
}

/* ---- queries ---- */

/* Is every sector of the extent allocated?  False for a bogus extent. */
bool
zv_alloc_is_allocated (zv_alloc_t *a, uint64_t dva, uint32_t size)
{
  zv_alloc_dev_t *d;
  uint64_t b, n;
  bool r;

  if (!zv_alloc_extent (a, dva, size, &d, &b, &n))
    return false;
  alloc_lock (a);
  r = zv_alloc_range_all_set (d, b, n);
  alloc_unlock (a);
  return r;
}

/* The first run of allocated space on device vdev at or after byte
 * offset 'from', cut at maxlen bytes (a resilver's iteration; see
 * alloc.h). */
bool
zv_alloc_next_allocated (zv_alloc_t *a, unsigned vdev, uint64_t from,
                         uint64_t maxlen, uint64_t *offp, uint64_t *lenp)
{
  zv_alloc_dev_t *d;
  uint64_t b, e, lim;

  if (vdev >= a->a_ndevs || maxlen < ZV_SECTOR)
    return false;
  d = &a->a_devs[vdev];
  from = ZV_MAX (from, d->ad_start);
  if (from >= d->ad_end)
    return false;
  b = (from - d->ad_start) / ZV_SECTOR;
  alloc_lock (a);
  b = alloc_next_set (d->ad_map, b, d->ad_nbits);
  lim = ZV_MIN (d->ad_nbits, b + maxlen / ZV_SECTOR);
  e = alloc_next_clear (d->ad_map, b, lim);
  alloc_unlock (a);
  if (b >= d->ad_nbits)
    return false;
  *offp = d->ad_start + b * ZV_SECTOR;
  *lenp = (e - b) * ZV_SECTOR;
  return true;
}

/* Space accounting snapshot. */
void
zv_alloc_get_space (zv_alloc_t *a, zv_alloc_space_t *out)
{
  alloc_lock (a);
  out->as_total = a->a_total;
  out->as_allocated = atomic_load_explicit (&a->a_allocated,
                                            memory_order_relaxed);
  out->as_held = atomic_load_explicit (&a->a_held, memory_order_relaxed);
  out->as_deferred = atomic_load_explicit (&a->a_deferred,
                                          memory_order_relaxed);
  out->as_deferred -= ZV_MIN (out->as_held, out->as_deferred);
  out->as_reserved = atomic_load_explicit (&a->a_reserved,
                                           memory_order_relaxed);
  alloc_unlock (a);
}

/* ---- reservation (lock-free) ---- */

/*
 * Open context: claim 'bytes' of future allocation, or -ENOSPC when that
 * would eat into the slop or into 'held' (what other volumes' unused
 * reservations keep, their indirect blocks included: dsdir.c).  The
 * indirect blocks a sync writes for the data in flight are allocated
 * there without a reservation, out of the same space: with something
 * held, the check keeps 1/32 of the data reserved for them too (two
 * copies of a 64-byte pointer per 4 KiB block, the smallest, is 1/32;
 * larger blocks need less), or another volume's metadata would eat into
 * the reservations.
 *
 * A write its own volume's reservation covers ('covered') may use the
 * frees on their way back (deferred, not held by a hold) as if they were
 * back already, up to half the slop.  They are the old copies of what
 * the last two syncs rewrote (indirect blocks, the pool's metadata, the
 * write's own earlier blocks): a reservation cannot hold those for two
 * txgs without guessing how many txgs and how much each rewrites, while
 * the slop is there for exactly that, and gets them back within two
 * syncs; half of it stays for the sync's own metadata.  Without it a
 * reserved volume filling its last MiBs on a pool others filled waited
 * for its own metadata to come back, and under load ran out of retries
 * (test_reservation_kept).
 *
 * Written so no sum can overflow (every value is at most the pool's
 * size).
 */
int
zv_alloc_reserve_held (zv_alloc_t *a, uint64_t bytes, uint64_t held,
                       bool covered)
{
  uint64_t limit = a->a_total - a->a_slop;
  uint64_t cur = atomic_load_explicit (&a->a_reserved, memory_order_relaxed);

  if (covered) {
    uint64_t def = atomic_load_explicit (&a->a_deferred,
                                         memory_order_relaxed);
    uint64_t hfree = atomic_load_explicit (&a->a_held, memory_order_relaxed);

    def -= ZV_MIN (hfree, def);
    limit += ZV_MIN (def, a->a_slop / 2);
  }
  for (;;) {
    uint64_t used = atomic_load_explicit (&a->a_allocated,
                                          memory_order_relaxed);
    uint64_t keep = held > 0 ? held + (cur + bytes) / 32 : 0;

    if (used > limit || cur > limit - used || keep > limit - used - cur
        || bytes > limit - used - cur - keep)
      return -ENOSPC;
    if (atomic_compare_exchange_weak_explicit (&a->a_reserved, &cur,
                                               cur + bytes,
                                               memory_order_relaxed,
                                               memory_order_relaxed))
      return 0;
  }
}

int
zv_alloc_reserve (zv_alloc_t *a, uint64_t bytes)
{
  return zv_alloc_reserve_held (a, bytes, 0, false);
}

/*
 * The space the txg pipeline has in use, for the write throttle: *inuse
 * is what writers reserved plus what waits on the defer lists (space that
 * comes back only when a later txg syncs), *cap that plus what can still
 * be reserved, i.e. everything below total - slop that live data does not
 * hold.  Lock-free and advisory, like the reservation itself: the three
 * counters are read one after the other.
 */
void
zv_alloc_pressure (zv_alloc_t *a, uint64_t *inuse, uint64_t *cap)
{
  uint64_t limit = a->a_total - a->a_slop;
  uint64_t used = atomic_load_explicit (&a->a_allocated, memory_order_relaxed);
  uint64_t res = atomic_load_explicit (&a->a_reserved, memory_order_relaxed);
  uint64_t def = atomic_load_explicit (&a->a_deferred, memory_order_relaxed);
  uint64_t held = atomic_load_explicit (&a->a_held, memory_order_relaxed);
  uint64_t live;

  /* Held frees (zv_alloc_hold_begin) do not come back with the next
   * syncs: they count as space in use, not as space on its way back. */
  def -= ZV_MIN (held, def);
  live = used > def ? used - def : 0;

  *inuse = res + def;
  *cap = limit > live ? limit - live : 0;
}

/* Give back a reservation; releasing more than is held is a bug. */
void
zv_alloc_unreserve (zv_alloc_t *a, uint64_t bytes)
{
  uint64_t cur = atomic_load_explicit (&a->a_reserved, memory_order_relaxed);

  do
    ZV_VERIFY3U (cur, >=, bytes);
  while (!atomic_compare_exchange_weak_explicit (&a->a_reserved, &cur,
                                                 cur - bytes,
                                                 memory_order_relaxed,
                                                 memory_order_relaxed));
}

/* ---- tunables (tunable.h) ---- */
const zv_tunable_t zv_alloc_tunable_table[] = {
  { .tn_name = "alloc_ditto_shift", .tn_module = "alloc",
    ZV_TUNABLE_VAR_UINT (zv_alloc_ditto_shift),
    .tn_default = 3, .tn_min = 1, .tn_max = 16,
    .tn_unit = ZV_TUNABLE_UNIT_LOG2, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the allocator, placing a ditto copy",
    .tn_desc = "The second copy of a block on the same device goes at "
    "least this power of two's share of the device away from the first if "
    "it can (3: an eighth)." },
  { .tn_name = "alloc_segment_size", .tn_module = "alloc",
    ZV_TUNABLE_VAR_U64 (zv_alloc_segment_size),
    .tn_default = 1ull << 20, .tn_min = ZV_SECTOR, .tn_max = 1ull << 30,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the allocator, picking a device's next segment",
    .tn_desc = "A free run this long is taken as the next segment at once "
    "(the blocks that follow fill it side by side); as long as the largest "
    "write a sync joins (zio_aggregate_max) is a good value; 4K: plain "
    "first fit from the cursor." },
  { .tn_name = "alloc_segment_scan", .tn_module = "alloc",
    ZV_TUNABLE_VAR_U64 (zv_alloc_segment_scan),
    .tn_default = 2ull << 20, .tn_min = ZV_SECTOR, .tn_max = 1ull << 40,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the allocator, picking a device's next segment",
    .tn_desc = "How much of the device a segment pick walks, when it finds "
    "no run of alloc_segment_size, before it takes the longest run it saw "
    "(never less than alloc_segment_size)." },
  { .tn_name = "alloc_slop_shift", .tn_module = "alloc",
    ZV_TUNABLE_VAR_UINT (zv_alloc_slop_shift),
    .tn_default = 5, .tn_min = 1, .tn_max = 16,
    .tn_unit = ZV_TUNABLE_UNIT_LOG2, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the allocator",
    .tn_desc = "Space kept back from writers so that a txg sync always "
    "finds room, as a power of two's share of the pool (5: a "
    "thirty-second).",
    .tn_zfs = "spa_slop_shift" },
  { .tn_name = "alloc_slop_min", .tn_module = "alloc",
    ZV_TUNABLE_VAR_U64 (zv_alloc_slop_min),
    .tn_default = 4ull << 20, .tn_min = 0, .tn_max = 1ull << 40,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the allocator",
    .tn_desc = "Least space kept back, however small the pool; never more "
    "than half of it.",
    .tn_zfs = "spa_min_slop" },
  ZV_TUNABLE_END
};
