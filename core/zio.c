/*
 * zio.c: block I/O by block pointer.
 *
 * Theory.  A block is named only by its parent's pointer: the pointer
 * holds where the copies are, how big the block is and its XXH3-128
 * checksum (seeded with the pool guid, so a block of another pool never
 * verifies here).  A read tries copy 0, then copy 1; a copy that fails to
 * read or to verify is logged and skipped, and only when none is good
 * does the caller see -EIO.  Nothing read is trusted before it verifies,
 * and no pointer is followed before its fields are bounds-checked.  A
 * compressed block (bp_comp, psize < lsize: compress.c) is verified as
 * stored and only then decompressed into the caller's lsize bytes; one
 * that verifies but does not decompress exactly is -EIO too, never the
 * decompressor's output (zv_zio_read_stored gives the stored bytes).
 * A copy on a mirror that does not verify is read again from each side
 * on its own, and the sides that do not have it are rewritten from one
 * that does (self-heal, zio_mirror_heal): the mirror reads one side, and
 * only here is a block's checksum known.
 * zv_zio_read_many reads many blocks' first copies in one device batch
 * (the sync's merge of partial records, a read of several blocks),
 * joining the copies that touch on a device into one scattered read, and
 * sends only the blocks that failed through the one-at-a-time path above.
 *
 * Writes are batched: zv_zio_write_many seals every pointer, joins the
 * copies that touch on a device into larger gathered writes, and issues
 * them all through one call to zv_dev_io_batch_queue, which keeps at most
 * spa_write_cap of them in flight (see the scaling comment below), and
 * fewer while the intent log has a batch under way (spa_sync_io, the
 * sync-write class: see zv_zio_async_write_yield_active).
 *
 * zv_zio_write_start does the same without waiting: the requests go to
 * one Linux AIO queue for the process, and a pending (held by the
 * records that carry the blocks) says when they are done; see the
 * comment above zv_zio_write_start's pending.
 *
 * Locks: only the started writes' queue has one (zio_aq_lock, below).
 * Otherwise its state is the write cap, the sync-class count and the
 * pending counts in the zv_spa_t (atomics) and the
 * ZVOL_ZIO_WRITE_MAX_ACTIVE override, read once.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <pthread.h>

#include "tunable.h"
#include "zio.h"
#include "compress.h"
#include "txg.h"

_Static_assert (sizeof ((zv_spa_t *) 0)->spa_aio_pending
                / sizeof (uint64_t) == ZV_TXG_SIZE,
                "spa_aio_pending has a slot per txg state");

/* Check one copy's address against the pool's geometry. */
static int
zio_dva_check (zv_spa_t *spa, uint64_t dva, uint32_t psize)
{
  unsigned v = ZV_DVA_VDEV (dva);
  uint64_t off = ZV_DVA_OFFSET (dva);

  if (v >= spa->spa_ndevs)
    return -1;
  if (off < zv_data_start () || off % ZV_SECTOR != 0)
    return -1;
  if (off + psize > spa->spa_data_end[v] || off + psize < off)
    return -1;
  return 0;
}

/* Bounds-check a pointer read from disk before following it. */
int
zv_zio_bp_check (zv_spa_t *spa, const zv_blkptr_t *bp, const char *what)
{
  if (zv_bp_is_hole (bp))
    return 0;
  if (bp->bp_psize == 0 || bp->bp_psize % ZV_SECTOR != 0
      || bp->bp_psize > ZV_MAX_BLKSZ || bp->bp_lsize > ZV_MAX_BLKSZ
      || bp->bp_ncopies < 1 || bp->bp_ncopies > 2
      || bp->bp_type == ZV_BT_NONE || bp->bp_type >= ZV_BT_MAX) {
    if (what)
      zv_error ("%s: invalid block pointer (size %" PRIu32 ", copies %u, "
                "type %u)", what, bp->bp_psize, bp->bp_ncopies, bp->bp_type);
    return -EIO;
  }
  /* Only volume data is ever compressed, only in a pool with the
   * feature, and only into fewer bytes than it holds. */
  if (bp->bp_comp == 0 ? bp->bp_lsize != bp->bp_psize
      : bp->bp_comp >= ZV_COMP_NALGS || bp->bp_type != ZV_BT_VOLDATA
      || bp->bp_level != 0 || bp->bp_psize >= bp->bp_lsize
      || bp->bp_lsize % ZV_SECTOR != 0
      || !(atomic_load_explicit (&spa->spa_features, memory_order_relaxed)
           & ZV_FEAT_COMPRESS)) {
    if (what)
      zv_error ("%s: invalid block pointer (compression %u, %" PRIu32
                " bytes on disk for %" PRIu32 ", type %u, level %u%s)", what,
                bp->bp_comp, bp->bp_psize, bp->bp_lsize, bp->bp_type,
                bp->bp_level, bp->bp_comp != 0
                && !(atomic_load_explicit (&spa->spa_features,
                                           memory_order_relaxed)
                     & ZV_FEAT_COMPRESS)
                ? ", in a pool without the compression feature" : "");
    return -EIO;
  }
  for (unsigned c = 0; c < bp->bp_ncopies; c++) {
    if (zio_dva_check (spa, bp->bp_dva[c], bp->bp_psize) < 0) {
      if (what)
        zv_error ("%s: block pointer copy %u points outside the pool "
                  "(device %u offset %" PRIu64 ")", what, c,
                  ZV_DVA_VDEV (bp->bp_dva[c]),
                  ZV_DVA_OFFSET (bp->bp_dva[c]));
      return -EIO;
    }
  }
  return 0;
}

/*
 * A compressed block read into buf (its psize bytes, verified): out to
 * its lsize bytes in place.  The payload moves to a pooled buffer first
 * (the decompressor cannot work in place); what the decompressor makes
 * of a block that verified but does not decompress exactly is refused,
 * never returned.
 */
static int
zio_decompress (const zv_blkptr_t *bp, void *buf, const char *what)
{
  void *c;
  int r;

  if (bp->bp_comp == 0)
    return 0;
  c = zv_buf_get (bp->bp_psize);
  memcpy (c, buf, bp->bp_psize);
  r = zv_comp_decompress (bp->bp_comp, c, bp->bp_psize, buf, bp->bp_lsize,
                          what ? what : "block");
  zv_buf_put (c, bp->bp_psize);
  return r;
}

/* Read and verify, falling back to the ditto copy: the bytes as stored. */
int
zv_zio_read_stored (zv_spa_t *spa, const zv_blkptr_t *bp, void *buf,
                    const char *what)
{
  int r = zv_zio_bp_check (spa, bp, what);

  if (r < 0)
    return r;
  ZV_VERIFY (!zv_bp_is_hole (bp));
  for (unsigned c = 0; c < bp->bp_ncopies; c++) {
    uint64_t dva = bp->bp_dva[c];
    zv_dev_t *dev = spa->spa_devs[ZV_DVA_VDEV (dva)];

    r = zv_zio_read_copy (spa, bp, c, buf);
    if (r == 0)
      return 0;
    if (r == -EIO)
      zv_error ("%s: read error on %s at offset %" PRIu64 " (copy %u of %u)",
                what, zv_dev_path (dev), ZV_DVA_OFFSET (dva), c + 1,
                bp->bp_ncopies);
    else
      zv_error ("%s: checksum error on %s at offset %" PRIu64
                " (copy %u of %u, birth txg %" PRIu64 ")",
                what, zv_dev_path (dev), ZV_DVA_OFFSET (dva), c + 1,
                bp->bp_ncopies, bp->bp_birth);
  }
  return -EIO;
}

/* The same, then out of its compression. */
int
zv_zio_read (zv_spa_t *spa, const zv_blkptr_t *bp, void *buf,
             const char *what)
{
  int r = zv_zio_read_stored (spa, bp, buf, what);

  return r == 0 ? zio_decompress (bp, buf, what) : r;
}

/*
 * Self-heal: a copy on a mirror did not verify (or could not be read).
 * Read it from each side in service on its own; the first that verifies
 * goes to buf, and every side whose bytes did not verify gets them
 * written back (a side whose write fails is faulted: the device layer
 * cannot tell a bad block from a good one, so the rewrite is ours).
 * Each side that failed to verify counts a checksum error; the mirror
 * counts one only when no side has the block.  A read-only import
 * (zv_dev_may_repair false) rewrites nothing.  Returns 0 or -EILSEQ.
 */
static int
zio_mirror_heal (zv_spa_t *spa, zv_dev_t *dev, uint64_t off,
                 const zv_blkptr_t *bp, void *buf)
{
  unsigned n = zv_dev_nsides (dev), good = UINT_MAX;
  bool bad[ZV_MIRROR_MAX_SIDES] = { false };
  void *tmp = zv_buf_get (bp->bp_psize);

  ZV_VERIFY3U (n, <=, ZV_MIRROR_MAX_SIDES);
  for (unsigned i = 0; i < n; i++) {
    zv_cksum_t got;

    if (!zv_dev_side_ok (dev, i))
      continue;
    if (zv_dev_read (zv_dev_side (dev, i), tmp, off, bp->bp_psize) < 0)
      continue;                 /* counted and logged by the device */
    zv_cksum_compute (tmp, bp->bp_psize, spa->spa_guid, &got);
    if (!zv_cksum_equal (&got, &bp->bp_cksum)) {
      bad[i] = true;
      zv_dev_note_cksum_error (zv_dev_side (dev, i));
      continue;
    }
    if (good == UINT_MAX) {
      good = i;
      memcpy (buf, tmp, bp->bp_psize);
    }
  }
  zv_buf_put (tmp, bp->bp_psize);
  if (good == UINT_MAX) {
    zv_dev_note_cksum_error (dev);
    return -EILSEQ;
  }
  for (unsigned i = 0; i < n && zv_dev_may_repair (dev); i++) {
    zv_dev_io_t w = {
      .di_dev = zv_dev_side (dev, i), .di_op = ZV_DEV_WRITE, .di_buf = buf,
      .di_offset = off, .di_len = bp->bp_psize,
    };

    if (!bad[i] || !zv_dev_side_ok (dev, i))
      continue;
    if (zv_dev_io_batch (&w, 1) < 0)
      zv_dev_side_fault (dev, i, "rewriting a block that failed its "
                         "checksum failed");
    else
      zv_warn ("%s: side %u (%s): block at %" PRIu64 " (%" PRIu32 " bytes, "
               "birth txg %" PRIu64 ") failed its checksum; rewritten from "
               "side %u", zv_dev_path (dev), i, zv_dev_side_path (dev, i),
               off, bp->bp_psize, bp->bp_birth, good);
  }
  return 0;
}

/* One copy, quietly: the caller says what went wrong. */
int
zv_zio_read_copy (zv_spa_t *spa, const zv_blkptr_t *bp, unsigned c,
                  void *buf)
{
  uint64_t dva = bp->bp_dva[c];
  zv_dev_t *dev = spa->spa_devs[ZV_DVA_VDEV (dva)];
  zv_cksum_t got;

  ZV_VERIFY (c < bp->bp_ncopies && c < 2);
  if (zv_dev_read (dev, buf, ZV_DVA_OFFSET (dva), bp->bp_psize) < 0)
    return -EIO;
  zv_cksum_compute (buf, bp->bp_psize, spa->spa_guid, &got);
  if (zv_cksum_equal (&got, &bp->bp_cksum))
    return 0;
  /* A mirror has the copy on each side: the other sides may have it. */
  if (zv_dev_nsides (dev) > 1)
    return zio_mirror_heal (spa, dev, ZV_DVA_OFFSET (dva), bp, buf);
  /* Every block that fails to verify comes through here (the batched
   * path sends its failures this way), so each is counted once per try. */
  zv_dev_note_cksum_error (dev);
  return -EILSEQ;
}

/* One copy of one block, to be read or written (zp_idx: the block's
 * place in the caller's arrays, for reads). */
typedef struct zio_piece {
  zv_dev_t *zp_dev;
  uint64_t zp_off;
  uint32_t zp_len;
  const void *zp_buf;
  size_t zp_idx;
} zio_piece_t;

/* Order pieces by device, then offset. */
static int
zio_piece_cmp (const void *a, const void *b)
{
  const zio_piece_t *x = a, *y = b;

  if (x->zp_dev != y->zp_dev)
    return (uintptr_t) x->zp_dev < (uintptr_t) y->zp_dev ? -1 : 1;
  return x->zp_off < y->zp_off ? -1 : x->zp_off > y->zp_off;
}

/* Largest read or write made by joining blocks that are adjacent on a
 * device. */
static uint32_t zv_zio_aggregate_max = 1u << 20;

/*
 * Turn pieces into device requests: sorted by device and offset (a
 * stream placed in turn from the allocator's cursor usually is already:
 * then there is no sort), the pieces that touch joined into one request
 * of up to zv_zio_aggregate_max bytes, scattered or gathered (readv,
 * writev) over the pieces' own buffers, so nothing is copied.  A piece
 * must start strictly where the previous one ends: two pieces at one
 * place (a hostile pointer read twice) stay two requests.  ios and iovs
 * have room for n; io_of (or NULL) gets, for each piece's zp_idx, the
 * request that carries it.  Returns the number of requests.
 */
static size_t
zio_join (zio_piece_t *pieces, size_t n, enum zv_dev_op op, zv_dev_io_t *ios,
          struct iovec *iovs, size_t *io_of)
{
  size_t sorted = 1, nios = 0;

  while (sorted < n && zio_piece_cmp (&pieces[sorted - 1], &pieces[sorted])
         <= 0)
    sorted++;
  if (sorted < n)
    qsort (pieces, n, sizeof *pieces, zio_piece_cmp);
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    uint64_t len = pieces[i].zp_len;

    while (j < n && pieces[j].zp_dev == pieces[i].zp_dev
           && pieces[j].zp_off == pieces[i].zp_off + len
           && len + pieces[j].zp_len <= zv_zio_aggregate_max
           && j - i < IOV_MAX) {
      len += pieces[j].zp_len;
      j++;
    }
    ios[nios] = (zv_dev_io_t) {
      .di_dev = pieces[i].zp_dev, .di_op = op,
      .di_buf = (void *) pieces[i].zp_buf,
      .di_offset = pieces[i].zp_off, .di_len = (uint32_t) len,
    };
    if (j > i + 1) {
      for (size_t k = i; k < j; k++)
        iovs[k] = (struct iovec) { .iov_base = (void *) pieces[k].zp_buf,
                                   .iov_len = pieces[k].zp_len };
      ios[nios].di_buf = NULL;
      ios[nios].di_iov = &iovs[i];
      ios[nios].di_iovcnt = (unsigned) (j - i);
    }
    for (size_t k = i; io_of && k < j; k++)
      io_of[pieces[k].zp_idx] = nios;
    nios++;
    i = j;
  }
  return nios;
}

/* Batched reads (see zio.h): one device batch for the first copies, the
 * ones that touch on a device joined into one scattered read (readv into
 * the blocks' own buffers: a volume written in order reads back in large
 * requests, as the device likes). */
int
zv_zio_read_many (zv_spa_t *spa, const zv_blkptr_t *const *bps,
                  void *const *bufs, const char *const *whats, int *res,
                  size_t n)
{
  zio_piece_t *pieces = zv_calloc (n ? n : 1, sizeof *pieces);
  zv_dev_io_t *ios = zv_calloc (n ? n : 1, sizeof *ios);
  struct iovec *iovs = zv_calloc (n ? n : 1, sizeof *iovs);
  size_t *io_of = zv_calloc (n ? n : 1, sizeof *io_of);
  bool *ok = zv_calloc (n ? n : 1, sizeof *ok);
  size_t m = 0, nios = 0;
  int r = 0;

  for (size_t i = 0; i < n; i++) {
    const zv_blkptr_t *bp = bps[i];

    ZV_VERIFY (!zv_bp_is_hole (bp));
    /* A hostile pointer gets no request: zv_zio_read below says why. */
    if (zv_zio_bp_check (spa, bp, whats[i]) < 0)
      continue;
    pieces[m++] = (zio_piece_t) {
      .zp_dev = spa->spa_devs[ZV_DVA_VDEV (bp->bp_dva[0])],
      .zp_off = ZV_DVA_OFFSET (bp->bp_dva[0]), .zp_len = bp->bp_psize,
      .zp_buf = bufs[i], .zp_idx = i,
    };
    ok[i] = true;
  }
  nios = zio_join (pieces, m, ZV_DEV_READ, ios, iovs, io_of);
  (void) zv_dev_io_batch (ios, nios);
  for (size_t i = 0; i < n; i++) {
    if (ok[i]) {
      zv_cksum_t got;
      ok[i] = ios[io_of[i]].di_result == 0;
      if (ok[i]) {
        zv_cksum_compute (bufs[i], bps[i]->bp_psize, spa->spa_guid, &got);
        ok[i] = zv_cksum_equal (&got, &bps[i]->bp_cksum);
      }
      /* Verified: a compressed block that does not decompress is
       * refused here, with its message (no other copy is tried: the
       * one on disk is what was written). */
      if (ok[i] && zio_decompress (bps[i], bufs[i], whats[i]) < 0) {
        if (res)
          res[i] = -EIO;
        if (r == 0)
          r = -EIO;
        continue;
      }
    }
    /* The slow path names the copy that failed and tries the others. */
    int ri = ok[i] ? 0 : zv_zio_read (spa, bps[i], bufs[i], whats[i]);
    if (ri < 0 && r == 0)
      r = ri;
    if (res)
      res[i] = ri;
  }
  free (ok);
  free (io_of);
  free (iovs);
  free (ios);
  free (pieces);
  return r;
}

/*
 * Writes of one batch in flight at once, OpenZFS's async-write scaling:
 * zv_zio_async_write_min_active while the pool's dirty data is at most
 * active_min_dirty_pct of dirty_max, rising linearly to
 * zv_zio_async_write_max_active at active_max_dirty_pct.  A txg's
 * megabytes go out a few at a time, so a log block written meanwhile
 * queues behind few of them; only when dirty data piles up (and writers
 * are about to be throttled) does the sync take the whole queue.
 *
 * The cap lives in spa_write_cap: the pool sets it from the dirty data
 * when a sync starts, and the intent log raises it while the sync runs
 * when its ring, which only a synced txg frees, fills past half
 * (zv_zio_write_cap_raise); the device layer reads it again each time a
 * slot frees, so a sync under way speeds up at once.  A sync the log
 * kicked at half the ring of a slow writer stays gentle (flat out, the
 * writer's flush p99 is higher), while a burst that would fill the ring
 * before the sync frees it gets the whole queue.  ZVOL_ZIO_WRITE_MAX_ACTIVE
 * fixes the cap (0: none), for benchmarks.
 */
static unsigned zv_zio_async_write_min_active = 2;
static unsigned zv_zio_async_write_max_active = 10;
static unsigned zv_zio_async_write_active_min_dirty_pct = 30;
static unsigned zv_zio_async_write_active_max_dirty_pct = 60;

/*
 * Sync writes before async ones (OpenZFS's vdev queue classes): while an
 * intent-log batch is under way (spa_sync_io > 0), a txg sync whose cap
 * is at zv_zio_async_write_min_active or below keeps at most
 * zv_zio_async_write_yield_active writes in flight, so a log block waits
 * at the device behind that many and its flush carries fewer new txg
 * writes.  A cap raised above the minimum (dirty data near the throttle,
 * a filling log ring) does not yield: then the sync is what is late.
 */
static unsigned zv_zio_async_write_yield_active = 1;

/* The cap ZVOL_ZIO_WRITE_MAX_ACTIVE fixes (read once), or -1. */
static int
zio_write_cap_fixed (void)
{
  static _Atomic int fixed = -2;        /* -2: not read yet */
  int v = atomic_load_explicit (&fixed, memory_order_relaxed);

  if (v == -2) {
    const char *e = getenv ("ZVOL_ZIO_WRITE_MAX_ACTIVE");
    v = e && *e ? ZV_MAX (atoi (e), 0) : -1;
    atomic_store_explicit (&fixed, v, memory_order_relaxed);
  }
  return v;
}

/* The cap num/den of the way from the fewest writes to the most. */
static unsigned
zio_cap_between (unsigned num, unsigned den)
{
  const unsigned amin = zv_zio_async_write_min_active;
  const unsigned amax = zv_zio_async_write_max_active;

  return amin + (amax - amin) * ZV_MIN (num, den) / den;
}

/* The cap at a dirty level: fixed, else on the scaling curve. */
unsigned
zv_zio_write_max_active (unsigned dirty_pct)
{
  int v = zio_write_cap_fixed ();
  const unsigned lo = zv_zio_async_write_active_min_dirty_pct;
  const unsigned hi = zv_zio_async_write_active_max_dirty_pct;

  if (v >= 0)
    return (unsigned) v;
  return zio_cap_between (dirty_pct > lo ? dirty_pct - lo : 0, hi - lo);
}

/* The cap of a sync that starts now; see zio.h. */
void
zv_zio_write_cap_set (zv_spa_t *spa, unsigned dirty_pct)
{
  atomic_store_explicit (&spa->spa_write_cap,
                         zv_zio_write_max_active (dirty_pct),
                         memory_order_relaxed);
}

/* Raise the cap of the sync under way (or the next one's, until that one
 * sets its own); see zio.h.  Relaxed: the cap is advice to the device
 * layer, not a guard of any data. */
void
zv_zio_write_cap_raise (zv_spa_t *spa, unsigned share_pct)
{
  unsigned want, cur;

  if (zio_write_cap_fixed () >= 0)
    return;
  want = zio_cap_between (share_pct, 100);
  cur = atomic_load_explicit (&spa->spa_write_cap, memory_order_relaxed);
  while (cur < want
         && !atomic_compare_exchange_weak_explicit (&spa->spa_write_cap,
                                                    &cur, want,
                                                    memory_order_relaxed,
                                                    memory_order_relaxed))
    ;
}

void
zv_zio_sync_io_begin (zv_spa_t *spa)
{
  atomic_fetch_add_explicit (&spa->spa_sync_io, 1, memory_order_relaxed);
}

void
zv_zio_sync_io_end (zv_spa_t *spa)
{
  unsigned was = atomic_fetch_sub_explicit (&spa->spa_sync_io, 1,
                                            memory_order_relaxed);

  ZV_VERIFY3U (was, >, 0);
}

/*
 * The cap counts writes, as OpenZFS's does, but what a low cap is for
 * (a log block waits at the device behind few bytes of the sync's, and
 * its flush carries few) is a matter of bytes, and OpenZFS's writes are
 * joined up to the aggregation limit.  Here a fuller pool's are not: its
 * free space is in holes, and a sync's joined writes averaged 40 KiB
 * there against 700 KiB on a roomy pool (bench, txgs kstat), so two in
 * flight left the device idle between them, and the pool's 4 KiB writes
 * took three times as long (core-bench write-4k-full, wall 65 us/op
 * against 31 us with ten in flight; docs/design.md, "Allocation").  So a
 * batch's cap is multiplied by how many of its mean write fit in
 * zio_aggregate_max, up to zio_async_write_max_active: about the bytes
 * in flight of the cap's own count of full-size writes.  Not while the
 * cap is fixed (ZVOL_ZIO_WRITE_MAX_ACTIVE).
 */
static unsigned
zio_write_cap_scale (const zv_dev_io_t *ios, size_t nios)
{
  uint64_t bytes = 0, mean;

  if (nios == 0 || zio_write_cap_fixed () >= 0)
    return 1;
  for (size_t i = 0; i < nios; i++)
    bytes += ios[i].di_len;
  mean = ZV_MAX (bytes / nios, (uint64_t) 1);
  return (unsigned) ZV_MAX (ZV_MIN ((uint64_t) zv_zio_aggregate_max / mean,
                                    (uint64_t) zv_zio_async_write_max_active),
                            (uint64_t) 1);
}

/*
 * Seal every pointer and join the copies that touch into device
 * requests: the first half of zv_zio_write_many and zv_zio_write_start.
 * Returns the number of requests; *piecesp, *iosp and *iovsp (NULL when
 * there are none) are the caller's to free once the requests are done.
 */
static size_t
zio_write_prep (zv_spa_t *spa, zv_zio_write_t *w, size_t n,
                zio_piece_t **piecesp, zv_dev_io_t **iosp,
                struct iovec **iovsp)
{
  size_t npieces = 0, k = 0;
  zio_piece_t *pieces;
  zv_dev_io_t *ios;
  struct iovec *iovs;

  *piecesp = NULL;
  *iosp = NULL;
  *iovsp = NULL;
  for (size_t i = 0; i < n; i++)
    npieces += w[i].zw_bp->bp_ncopies;
  if (npieces == 0)
    return 0;
  /* Not zeroed: every entry used is assigned whole below and in
   * zio_join (zeroing them cost about 130 instructions a block). */
  pieces = zv_alloc (npieces * sizeof *pieces);
  ios = zv_alloc (npieces * sizeof *ios);
  iovs = zv_alloc (npieces * sizeof *iovs);
  for (size_t i = 0; i < n; i++) {
    zv_blkptr_t *bp = w[i].zw_bp;

    ZV_VERIFY (!zv_bp_is_hole (bp));
    ZV_VERIFY (bp->bp_type < ZV_BT_MAX);
    if (w[i].zw_cksum != NULL) {
      /* Computed by the block's writer while the data was in its cache
       * (dmu.c's seal); a debug build checks the seal held. */
      bp->bp_cksum = *w[i].zw_cksum;
#ifdef ZV_DEBUG
      zv_cksum_t c;
      zv_cksum_compute (w[i].zw_buf, bp->bp_psize, spa->spa_guid, &c);
      ZV_VERIFY (zv_cksum_equal (&c, &bp->bp_cksum));
#endif
    }
    else
      zv_cksum_compute (w[i].zw_buf, bp->bp_psize, spa->spa_guid,
                        &bp->bp_cksum);
    atomic_fetch_add_explicit (&spa->spa_written[bp->bp_type],
                               (uint64_t) bp->bp_psize * bp->bp_ncopies,
                               memory_order_relaxed);
    for (unsigned c = 0; c < bp->bp_ncopies; c++) {
      ZV_VERIFY (zio_dva_check (spa, bp->bp_dva[c], bp->bp_psize) == 0);
      pieces[k++] = (zio_piece_t) {
        .zp_dev = spa->spa_devs[ZV_DVA_VDEV (bp->bp_dva[c])],
        .zp_off = ZV_DVA_OFFSET (bp->bp_dva[c]),
        .zp_len = bp->bp_psize,
        .zp_buf = w[i].zw_buf,
      };
    }
  }
  *piecesp = pieces;
  *iosp = ios;
  *iovsp = iovs;
  return zio_join (pieces, npieces, ZV_DEV_WRITE, ios, iovs, NULL);
}

/* The first failed request's error, logged (0: none failed). */
static int
zio_write_result (const zv_dev_io_t *ios, size_t nios)
{
  for (size_t i = 0; i < nios; i++)
    if (ios[i].di_result < 0) {
      zv_error ("write error on %s at offset %" PRIu64 ": %s",
                zv_dev_path (ios[i].di_dev), ios[i].di_offset,
                strerror (-ios[i].di_result));
      return ios[i].di_result;
    }
  return 0;
}

/*
 * Seal and write all copies of all blocks in one batch.  Copy on write
 * puts a txg's blocks one after the other on each device, so pieces that
 * touch are joined into writes of up to zv_zio_aggregate_max bytes (as
 * OpenZFS's vdev queue aggregates): far fewer, larger I/Os, each gathered
 * (writev) from the blocks' own buffers, so nothing is copied.  At most
 * spa_write_cap of them are in flight.
 */
int
zv_zio_write_many (zv_spa_t *spa, zv_zio_write_t *w, size_t n)
{
  zio_piece_t *pieces;
  zv_dev_io_t *ios;
  struct iovec *iovs;
  size_t nios = zio_write_prep (spa, w, n, &pieces, &ios, &iovs);
  int r = 0;

  if (nios > 0) {
    zv_dev_queue_t q = {
      .dq_max_active = &spa->spa_write_cap,
      .dq_yield_to = &spa->spa_sync_io,
      .dq_yield_active = zv_zio_async_write_yield_active,
      .dq_yield_below = zv_zio_async_write_min_active,
      .dq_scale = zio_write_cap_scale (ios, nios),
      .dq_scale_max = zv_zio_async_write_max_active,
    };

    if ((r = zv_dev_io_batch_queue (ios, nios, &q)) < 0)
      (void) zio_write_result (ios, nios);
  }
  free (iovs);
  free (ios);
  free (pieces);
  return r;
}

/*
 * Writes started and not waited for (zv_zio_write_start).  One queue
 * for the process, made at the first such write.  A context does not
 * survive a fork: every write started ends before one (the prepare
 * handler reaps them all), and the child starts over with no queue.  zio_aq_lock guards its making
 * and the reaping: one thread at a time waits in the kernel for
 * completions and finishes whichever writes they belong to, so a thread
 * waiting for one write may finish others' (each pending knows its
 * owed count).  A pending is counted in its pool's spa_aio_pending
 * slot for its txg from before its first request is started until its
 * last is reaped.
 */
struct zv_zio_pending {
  zv_spa_t *zp_spa;
  uint64_t zp_txg;
  _Atomic unsigned zp_refs;     /* the writes' own, and the holders' */
  _Atomic size_t zp_owed;       /* requests not finished */
  _Atomic bool zp_done;         /* zp_result set; buffers given back */
  int zp_result;
  zio_piece_t *zp_pieces;
  zv_dev_io_t *zp_ios;
  struct iovec *zp_iovs;
  size_t zp_nios;
  void **zp_bufs;               /* back to the buffer cache when done */
  size_t zp_nbufs;
  uint32_t zp_bufsize;
};

static pthread_mutex_t zio_aq_lock = PTHREAD_MUTEX_INITIALIZER;
/* Made under zio_aq_lock, read without it (release, acquire). */
static _Atomic (zv_dev_aio_t *) zio_aq;
static bool zio_aq_none;                /* the kernel gave none */
static pthread_once_t zio_aq_once = PTHREAD_ONCE_INIT;
#define ZIO_AQ_MAX 4096u

static size_t zio_reap_locked (bool wait);

/* Before a fork: every started write ends, so that no pending is left
 * in the child, whose queue is gone (nbdkit forks after get_ready, whose
 * intent-log replay may have started some); the lock is held across the
 * fork, so no reaper is half way. */
static void
zio_aq_atfork_prepare (void)
{
  pthread_mutex_lock (&zio_aq_lock);
  while (atomic_load_explicit (&zio_aq, memory_order_relaxed) != NULL
         && zio_reap_locked (true) > 0)
    ;
}

static void
zio_aq_atfork_parent (void)
{
  pthread_mutex_unlock (&zio_aq_lock);
}

static void
zio_aq_atfork_child (void)
{
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

  memcpy (&zio_aq_lock, &fresh, sizeof fresh);
  atomic_store (&zio_aq, NULL); /* the parent's: gone with the fork */
  zio_aq_none = false;
}

static void
zio_aq_init (void)
{
  pthread_atfork (zio_aq_atfork_prepare, zio_aq_atfork_parent,
                  zio_aq_atfork_child);
}

/* The queue, made if needed; NULL when the kernel has none to give. */
static zv_dev_aio_t *
zio_aq_get (void)
{
  zv_dev_aio_t *q = atomic_load_explicit (&zio_aq, memory_order_acquire);

  if (q != NULL)
    return q;
  pthread_once (&zio_aq_once, zio_aq_init);
  pthread_mutex_lock (&zio_aq_lock);
  q = atomic_load_explicit (&zio_aq, memory_order_relaxed);
  if (q == NULL && !zio_aq_none) {
    q = zv_dev_aio_new (ZIO_AQ_MAX);
    zio_aq_none = q == NULL;
    atomic_store_explicit (&zio_aq, q, memory_order_release);
  }
  pthread_mutex_unlock (&zio_aq_lock);
  return q;
}

void
zv_zio_pending_hold (zv_zio_pending_t *p)
{
  atomic_fetch_add_explicit (&p->zp_refs, 1, memory_order_relaxed);
}

void
zv_zio_pending_rele (zv_zio_pending_t *p)
{
  if (p != NULL && atomic_fetch_sub_explicit (&p->zp_refs, 1,
                                              memory_order_acq_rel) == 1)
    free (p);
}

/* The last request of p is finished: its result, its memory back. */
static void
zio_pending_finish (zv_zio_pending_t *p)
{
  zv_spa_t *spa = p->zp_spa;

  p->zp_result = zio_write_result (p->zp_ios, p->zp_nios);
  free (p->zp_iovs);
  free (p->zp_ios);
  free (p->zp_pieces);
  for (size_t i = 0; i < p->zp_nbufs; i++)
    zv_buf_put (p->zp_bufs[i], p->zp_bufsize);
  free (p->zp_bufs);
  atomic_store_explicit (&p->zp_done, true, memory_order_release);
  atomic_fetch_sub_explicit (&spa->spa_aio_pending[p->zp_txg & ZV_TXG_MASK],
                             1, memory_order_release);
  zv_zio_pending_rele (p);
}

/* Take 'k' requests off p's owed count; the last one finishes it. */
static void
zio_pending_paid (zv_zio_pending_t *p, size_t k)
{
  if (k > 0 && atomic_fetch_sub_explicit (&p->zp_owed, k,
                                          memory_order_acq_rel) == k)
    zio_pending_finish (p);
}

/* Finish what the queue has completed (zio_aq_lock held); with 'wait',
 * at least one request unless none is owed.  Returns how many. */
static size_t
zio_reap_locked (bool wait)
{
  zv_dev_aio_t *q = atomic_load_explicit (&zio_aq, memory_order_relaxed);
  zv_dev_io_t *done[32];
  size_t k;

  ZV_VERIFY (q != NULL);        /* a pending means a queue */
  k = zv_dev_aio_reap (q, wait, done, 32);

  for (size_t i = 0; i < k; i++)
    zio_pending_paid (done[i]->di_owner, 1);
  return k;
}

void
zv_zio_reap_some (void)
{
  if (atomic_load_explicit (&zio_aq, memory_order_relaxed) == NULL
      || pthread_mutex_trylock (&zio_aq_lock) != 0)
    return;
  if (atomic_load_explicit (&zio_aq, memory_order_relaxed) != NULL)
    zio_reap_locked (false);
  pthread_mutex_unlock (&zio_aq_lock);
}

int
zv_zio_write_start (zv_spa_t *spa, uint64_t txg, zv_zio_write_t *w,
                    size_t n, void *const *bufs, size_t nbufs,
                    uint32_t bufsize, zv_zio_pending_t **pp)
{
  zv_dev_aio_t *q = NULL;
  zv_zio_pending_t *p;
  size_t owed;
  bool async = true;

  *pp = NULL;
  for (size_t i = 0; i < n && async; i++)
    for (unsigned c = 0; c < w[i].zw_bp->bp_ncopies && async; c++) {
      unsigned v = ZV_DVA_VDEV (w[i].zw_bp->bp_dva[c]);
      async = v < spa->spa_ndevs && zv_dev_async_ok (spa->spa_devs[v]);
    }
  if (!async || n == 0 || (q = zio_aq_get ()) == NULL) {
    int r = zv_zio_write_many (spa, w, n);

    for (size_t i = 0; i < nbufs; i++)
      zv_buf_put (bufs[i], bufsize);
    return r;
  }
  p = zv_calloc (1, sizeof *p);
  p->zp_spa = spa;
  p->zp_txg = txg;
  p->zp_nios = zio_write_prep (spa, w, n, &p->zp_pieces, &p->zp_ios,
                               &p->zp_iovs);
  p->zp_bufsize = bufsize;
  p->zp_nbufs = nbufs;
  if (nbufs > 0) {
    p->zp_bufs = zv_alloc (nbufs * sizeof *p->zp_bufs);
    memcpy (p->zp_bufs, bufs, nbufs * sizeof *bufs);
  }
  for (size_t i = 0; i < p->zp_nios; i++)
    p->zp_ios[i].di_owner = p;
  /* One reference for the writes, one for the caller. */
  atomic_store_explicit (&p->zp_refs, 2, memory_order_relaxed);
  atomic_store_explicit (&p->zp_owed, p->zp_nios + 1, memory_order_relaxed);
  atomic_fetch_add_explicit (&spa->spa_aio_pending[txg & ZV_TXG_MASK], 1,
                             memory_order_acq_rel);
  owed = zv_dev_aio_start (q, p->zp_ios, p->zp_nios);
  /* Those run in place are paid now, and so is the extra one that kept
   * a fast reaper from finishing p before this count was known. */
  zio_pending_paid (p, p->zp_nios - owed + 1);
  *pp = p;
  return 0;
}

int
zv_zio_pending_wait (zv_zio_pending_t *p)
{
  while (!atomic_load_explicit (&p->zp_done, memory_order_acquire)) {
    pthread_mutex_lock (&zio_aq_lock);
    if (!atomic_load_explicit (&p->zp_done, memory_order_acquire))
      zio_reap_locked (true);
    pthread_mutex_unlock (&zio_aq_lock);
  }
  return p->zp_result;
}

bool
zv_zio_pending_done (const zv_zio_pending_t *p, int *resultp)
{
  if (!atomic_load_explicit (&p->zp_done, memory_order_acquire))
    return false;
  *resultp = p->zp_result;
  return true;
}

void
zv_zio_pending_wait_all (zv_spa_t *spa)
{
  for (uint64_t t = 0; t < ZV_TXG_SIZE; t++)
    zv_zio_pending_wait_txg (spa, t);
}

void
zv_zio_pending_wait_txg (zv_spa_t *spa, uint64_t txg)
{
  _Atomic uint64_t *slot = &spa->spa_aio_pending[txg & ZV_TXG_MASK];

  while (atomic_load_explicit (slot, memory_order_acquire) > 0) {
    pthread_mutex_lock (&zio_aq_lock);
    if (atomic_load_explicit (slot, memory_order_acquire) > 0)
      zio_reap_locked (true);
    pthread_mutex_unlock (&zio_aq_lock);
  }
}

/* Flush the cache of every device. */
int
zv_zio_flush_all (zv_spa_t *spa)
{
  zv_dev_io_t ios[ZV_MAX_DEVS];
  int r;

  for (unsigned d = 0; d < spa->spa_ndevs; d++)
    ios[d] = (zv_dev_io_t) { .di_dev = spa->spa_devs[d],
                             .di_op = ZV_DEV_FLUSH };
  r = zv_dev_io_batch (ios, spa->spa_ndevs);
  if (r < 0)
    zv_error ("device cache flush failed: %s", strerror (-r));
  return r;
}

/* Allocate every copy of a new block; the second avoids the first. */
int
zv_zio_alloc_bp (zv_spa_t *spa, zv_blkptr_t *bp, uint32_t size,
                 unsigned copies)
{
  int r;

  ZV_VERIFY (copies >= 1 && copies <= 2);
  memset (bp->bp_dva, 0, sizeof bp->bp_dva);
  r = zv_alloc_block (spa->spa_alloc, size, 0, &bp->bp_dva[0]);
  if (r < 0)
    return r;
  if (copies == 2) {
    r = zv_alloc_block (spa->spa_alloc, size, bp->bp_dva[0], &bp->bp_dva[1]);
    if (r < 0) {
      zv_alloc_free_now (spa->spa_alloc, bp->bp_dva[0], size);
      bp->bp_dva[0] = 0;
      return r;
    }
  }
  bp->bp_psize = size;
  bp->bp_ncopies = copies;
  return 0;
}

/* One copy in open context for txg (zv_alloc_block_open: the intent
 * log's in-place blocks). */
int
zv_zio_alloc_bp_open (zv_spa_t *spa, zv_blkptr_t *bp, uint32_t size,
                      uint64_t txg)
{
  int r;

  memset (bp->bp_dva, 0, sizeof bp->bp_dva);
  r = zv_alloc_block_open (spa->spa_alloc, size, txg, &bp->bp_dva[0]);
  if (r < 0)
    return r;
  bp->bp_psize = size;
  bp->bp_ncopies = 1;
  return 0;
}

/* Free every copy: at once if born in this (uncommitted) txg. */
void
zv_zio_free_bp (zv_spa_t *spa, const zv_blkptr_t *bp, uint64_t txg)
{
  if (zv_bp_is_hole (bp))
    return;
  for (unsigned c = 0; c < bp->bp_ncopies; c++) {
    if (bp->bp_birth == txg)
      zv_alloc_free_now (spa->spa_alloc, bp->bp_dva[c], bp->bp_psize);
    else
      zv_alloc_free_defer (spa->spa_alloc, txg, bp->bp_dva[c], bp->bp_psize);
  }
}

/* Free a block with txg, deferred even if it was born in txg (see zio.h). */
void
zv_zio_free_bp_deferred (zv_spa_t *spa, const zv_blkptr_t *bp, uint64_t txg)
{
  if (zv_bp_is_hole (bp))
    return;
  for (unsigned c = 0; c < bp->bp_ncopies; c++)
    zv_alloc_free_defer (spa->spa_alloc, txg, bp->bp_dva[c], bp->bp_psize);
}

/* Copy-on-write placement of a block's new version (see zio.h). */
int
zv_zio_place_bp (zv_spa_t *spa, const zv_blkptr_t *old, zv_blkptr_t *bp,
                 bool hole, uint32_t size, unsigned level, uint8_t type,
                 uint64_t fill, unsigned copies, uint64_t txg)
{
  int r;

  if (hole) {
    zv_zio_free_bp (spa, old, txg);
    memset (bp, 0, sizeof *bp);
    return 0;
  }
  if (!zv_bp_is_hole (old) && old->bp_birth == txg && old->bp_psize == size
      && old->bp_ncopies == copies)
    *bp = *old;
  else {
    memset (bp, 0, sizeof *bp);
    r = zv_zio_alloc_bp (spa, bp, size, copies);
    if (r < 0) {
      zv_error ("out of space while syncing txg %" PRIu64
                " (the reservation should have prevented this)", txg);
      return r;
    }
    zv_zio_free_bp (spa, old, txg);
  }
  bp->bp_lsize = size;
  bp->bp_birth = txg;
  bp->bp_type = type;
  bp->bp_level = level;
  bp->bp_fill = fill;
  return 0;
}

/* ---- tunables (tunable.h), read by the sync's writes as they are
 * issued.  The ranges of each min/max pair meet but do not overlap, so
 * the curve never runs backwards (or divides by zero) whatever order they
 * are set in ---- */
const zv_tunable_t zv_zio_tunable_table[] = {
  { .tn_name = "zio_aggregate_max", .tn_module = "zio",
    ZV_TUNABLE_VAR_UINT (zv_zio_aggregate_max),
    .tn_default = 1u << 20, .tn_min = 4096, .tn_max = 16u << 20,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the txg sync's block writes and batched reads",
    .tn_desc = "Largest read or write made by joining blocks that are "
    "adjacent on a device.",
    .tn_zfs = "zfs_vdev_aggregation_limit" },
  { .tn_name = "zio_async_write_min_active", .tn_module = "zio",
    ZV_TUNABLE_VAR_UINT (zv_zio_async_write_min_active),
    .tn_default = 2, .tn_min = 1, .tn_max = 10,
    .tn_unit = ZV_TUNABLE_UNIT_COUNT, .tn_when = ZV_TUNABLE_AT_SYNC,
    .tn_reader = "the txg sync's block writes",
    .tn_desc = "Writes a txg sync keeps in flight while dirty data is "
    "low.",
    .tn_zfs = "zfs_vdev_async_write_min_active" },
  { .tn_name = "zio_async_write_max_active", .tn_module = "zio",
    ZV_TUNABLE_VAR_UINT (zv_zio_async_write_max_active),
    .tn_default = 10, .tn_min = 10, .tn_max = 4096,
    .tn_unit = ZV_TUNABLE_UNIT_COUNT, .tn_when = ZV_TUNABLE_AT_SYNC,
    .tn_reader = "the txg sync's block writes",
    .tn_desc = "Writes a txg sync keeps in flight when dirty data is high "
    "or the log ring fills; the environment variable "
    "ZVOL_ZIO_WRITE_MAX_ACTIVE fixes the cap instead, 0 for none.",
    .tn_zfs = "zfs_vdev_async_write_max_active" },
  { .tn_name = "zio_async_write_yield_active", .tn_module = "zio",
    ZV_TUNABLE_VAR_UINT (zv_zio_async_write_yield_active),
    .tn_default = 1, .tn_min = 1, .tn_max = 10,
    .tn_unit = ZV_TUNABLE_UNIT_COUNT, .tn_when = ZV_TUNABLE_AT_SYNC,
    .tn_reader = "the txg sync's block writes",
    .tn_desc = "Writes a txg sync keeps in flight while the intent log "
    "writes or flushes (sync writes go first), as long as its cap is at "
    "zio_async_write_min_active; a cap raised above that does not yield." },
  { .tn_name = "zio_async_write_active_min_dirty_percent",
    .tn_module = "zio",
    ZV_TUNABLE_VAR_UINT (zv_zio_async_write_active_min_dirty_pct),
    .tn_default = 30, .tn_min = 0, .tn_max = 50,
    .tn_unit = ZV_TUNABLE_UNIT_PCT, .tn_when = ZV_TUNABLE_AT_SYNC,
    .tn_reader = "the txg sync's block writes",
    .tn_desc = "Share of dirty_max up to which a sync keeps "
    "zio_async_write_min_active writes in flight.",
    .tn_zfs = "zfs_vdev_async_write_active_min_dirty_percent" },
  { .tn_name = "zio_async_write_active_max_dirty_percent",
    .tn_module = "zio",
    ZV_TUNABLE_VAR_UINT (zv_zio_async_write_active_max_dirty_pct),
    .tn_default = 60, .tn_min = 51, .tn_max = 100,
    .tn_unit = ZV_TUNABLE_UNIT_PCT, .tn_when = ZV_TUNABLE_AT_SYNC,
    .tn_reader = "the txg sync's block writes",
    .tn_desc = "Share of dirty_max from which a sync keeps "
    "zio_async_write_max_active writes in flight.",
    .tn_zfs = "zfs_vdev_async_write_active_max_dirty_percent" },
  ZV_TUNABLE_END
};
