/*
 * scan.c: one block verified, and repaired, copy by copy and side by
 * side: the scrub's unit of work (check.c walks the pool and calls
 * zv_scan_block for every block it reaches, with repair on for a scrub).
 *
 * Theory.  A block has bp_ncopies copies (ditto: metadata two, data
 * one), each on a device that has one or more sides (dev.h: a mirror
 * two or three, every other device one).  Every (copy, side) pair, a
 * slot, holds the same bytes when the pool is healthy, so each is read
 * on its own, through zv_dev_side, and verified against the pointer's
 * checksum: an ordinary read (zio.c) stops at the first copy that
 * verifies and never sees the others rot.  A slot that fails (read
 * error, or checksum: counted against its side, as zio.c counts them)
 * is repaired when some slot verified: its bytes are written back to
 * the same place, the side flushed, then read back and compared, so a
 * repair is counted only once the device gives the good bytes back.
 * Nothing else is written: no pointer changes, no space is allocated,
 * so a repair needs no txg and is the same offline and live.
 *
 * Why in place is safe: the caller guarantees the block stays where
 * its pointer says while the scan runs.  Offline the pool is the
 * scrub's alone; live the check's free hold (alloc.c,
 * zv_alloc_hold_begin) keeps every block of the txg it walks from being
 * reused, and blocks are written once (copy on write), so the only
 * writer of those bytes is this repair.  A client read racing it sees
 * either the bad bytes (and falls back to another copy, as before) or
 * the good ones.
 *
 * A side out of service (zv_dev_side_ok false: a faulted mirror side)
 * is neither read nor written: bringing it back is a resilver's job.
 *
 * Locking: none.  The slots are the caller's thread's; the device I/O
 * is per thread (dev.c).
 */
#include <config.h>

#include <errno.h>
#include <string.h>

#include "scan.h"
#include "tunable.h"
#include "zv_util.h"

/* Off: a scrub verifies and reports as it would repair, and repairs
 * nothing (tunable). */
static bool zv_scan_repair = true;

/* The background scrub's pace: bytes read a second at most (0: as fast
 * as the devices go; tunable). */
static uint64_t zv_scan_rate_max = 0;

/* How long (ms) the background scrub waits, at most, before each block
 * while the clients' I/O is under way (tunable; 0: never). */
static unsigned zv_scan_yield_ms = 10;

#define SCAN_MAX_SLOTS (2 * ZV_SCAN_MAX_SIDES)

/* Read one slot (the copy at off on one side) into buf and verify it:
 * 0, -EIO (the side could not read it) or -EILSEQ (checksum; counted
 * against the side, as zio.c counts a copy that does not verify). */
static int
scan_read (zv_spa_t *spa, const zv_blkptr_t *bp, zv_dev_t *side,
           uint64_t off, void *buf)
{
  zv_cksum_t got;

  if (zv_dev_read (side, buf, off, bp->bp_psize) < 0)
    return -EIO;
  zv_cksum_compute (buf, bp->bp_psize, spa->spa_guid, &got);
  if (zv_cksum_equal (&got, &bp->bp_cksum))
    return 0;
  zv_dev_note_cksum_error (side);
  return -EILSEQ;
}

/* Write good (verified) bytes over a bad slot, flush its side, read
 * them back into tmp and compare: 1 repaired, or the failing step's
 * -errno (-EILSEQ: the device gave other bytes back). */
static int
scan_repair (zv_spa_t *spa, const zv_blkptr_t *bp, zv_dev_t *side,
             uint64_t off, void *good, void *tmp)
{
  zv_dev_io_t io = {
    .di_dev = side, .di_op = ZV_DEV_WRITE, .di_buf = good,
    .di_offset = off, .di_len = bp->bp_psize,
  };
  int r;

  if ((r = zv_dev_io_batch (&io, 1)) < 0 || (r = zv_dev_flush (side)) < 0)
    return r;
  r = scan_read (spa, bp, side, off, tmp);
  if (r == 0 && memcmp (tmp, good, bp->bp_psize) != 0)
    r = -EILSEQ;
  return r == 0 ? 1 : r;
}

unsigned
zv_scan_block (zv_spa_t *spa, const zv_blkptr_t *bp, void *buf, bool repair,
               void (*bad) (void *arg, const zv_blkptr_t *bp,
                            const zv_scan_slot_t *ss),
               void *bad_arg, zv_scan_result_t *res)
{
  zv_scan_slot_t slots[SCAN_MAX_SLOTS];
  unsigned nslots = 0, good = 0;
  uint8_t *tmp = zv_buf_get (bp->bp_psize);

  ZV_VERIFY (bp->bp_ncopies >= 1 && bp->bp_ncopies <= 2);
  memset (res, 0, sizeof *res);
  for (unsigned c = 0; c < bp->bp_ncopies; c++) {
    uint64_t dva = bp->bp_dva[c];
    zv_dev_t *dev = spa->spa_devs[ZV_DVA_VDEV (dva)];
    unsigned ns = zv_dev_nsides (dev);

    ZV_VERIFY3U (ns, >=, 1);
    ZV_VERIFY3U (ns, <=, ZV_SCAN_MAX_SIDES);
    for (unsigned s = 0; s < ns; s++) {
      zv_scan_slot_t *ss;

      if (!zv_dev_side_ok (dev, s)) {
        res->sr_skipped++;
        continue;
      }
      ss = &slots[nslots++];
      *ss = (zv_scan_slot_t) {
        .ss_copy = c, .ss_side = s, .ss_nsides = ns,
        .ss_dev = zv_dev_side (dev, s),
      };
      /* The first good slot's bytes stay in buf: the repair source. */
      ss->ss_err = scan_read (spa, bp, ss->ss_dev, ZV_DVA_OFFSET (dva),
                              good > 0 ? tmp : buf);
      res->sr_slots++;
      if (ss->ss_err == 0)
        good++;
      else if (ss->ss_err == -EIO)
        res->sr_read_errors++;
      else
        res->sr_cksum_errors++;
    }
  }
  res->sr_good = good;
  for (unsigned i = 0; i < nslots; i++) {
    zv_scan_slot_t *ss = &slots[i];

    ss->ss_good = good;
    if (ss->ss_err == 0)
      continue;
    if (good > 0 && repair && zv_scan_repair) {
      ss->ss_repair = scan_repair (spa, bp, ss->ss_dev,
                                   ZV_DVA_OFFSET (bp->bp_dva[ss->ss_copy]),
                                   buf, tmp);
      if (ss->ss_repair > 0)
        res->sr_repaired++;
      else
        res->sr_repair_failed++;
    }
    if (bad)
      bad (bad_arg, bp, ss);
  }
  zv_buf_put (tmp, bp->bp_psize);
  return good;
}

uint64_t
zv_scan_rate_max_get (void)
{
  return __atomic_load_n (&zv_scan_rate_max, __ATOMIC_RELAXED);
}

unsigned
zv_scan_yield_ms_get (void)
{
  return __atomic_load_n (&zv_scan_yield_ms, __ATOMIC_RELAXED);
}

/* ---- tunables (tunable.h) ---- */
const zv_tunable_t zv_scan_tunable_table[] = {
  { .tn_name = "scan_repair", .tn_module = "scan",
    ZV_TUNABLE_VAR_BOOL (zv_scan_repair), .tn_default = 1,
    .tn_unit = ZV_TUNABLE_UNIT_NONE, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the scrub (zvoladm scrub)",
    .tn_desc = "On, a scrub rewrites each copy that fails to verify from one "
    "that verifies; off, it only reports them, as a check does." },
  { .tn_name = "scan_rate_max", .tn_module = "scan",
    ZV_TUNABLE_VAR_U64 (zv_scan_rate_max),
    .tn_default = 0, .tn_min = 0, .tn_max = 1ull << 40,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the background scrub (zvoladm scrub on a served pool)",
    .tn_desc = "The most bytes a second the background scrub reads "
    "(every copy of every block counted); 0, no limit." },
  { .tn_name = "scan_yield_ms", .tn_module = "scan",
    ZV_TUNABLE_VAR_UINT (zv_scan_yield_ms),
    .tn_default = 10, .tn_min = 0, .tn_max = 1000,
    .tn_unit = ZV_TUNABLE_UNIT_MS, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the background scrub (zvoladm scrub on a served pool)",
    .tn_desc = "Before each block, the background scrub waits while the "
    "intent log writes for clients or a txg sync writes their data, this "
    "long at most (so it still moves on under a steady load); 0, it does "
    "not wait." },
  ZV_TUNABLE_END
};
