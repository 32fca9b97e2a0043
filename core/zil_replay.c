/*
 * zil_replay.c: the intent log read back: log blocks verified, the chain
 * walked, claimed at import, judged (torn tail or damage, zil_recover)
 * and replayed.
 *
 * Theory.
 *
 * The blocks are the ones zil_commit.c writes (format.md, "Intent log"):
 * each names the next block's address and checksum seed and the highest
 * seq durable when it was issued.  Nothing here runs while the log
 * commits: the import's claim and inspection walk a walker's copy of the
 * log (replay_walker_init: the ring, the devices and the volume's
 * geometry), and zv_zil_replay runs on an open log before anything is
 * logged (zl_replaying) or written (zl_ready is false until a header
 * naming the fresh chain it starts is on disk, zil.c).
 *
 * Where replay ends.  The end of a log after a crash is always a block
 * that does not verify (never written, torn, or older).  Blocks are in
 * flight several at a time, so a crash can tear block S and leave S+1
 * whole; S+1's records were then never acknowledged, and S+1 was issued
 * before S was durable, so its lh_durable_seq is below S.  A block that
 * does not verify although a block written after it says it was durable
 * is therefore damage, not the end: acknowledged writes are lost with it.
 * The claim at import (and the replay, which judges the same way) walks
 * the chain (replay_walk), then past its stop: after a block that verifies
 * at its next_dva, after one that does not at every place it could end
 * (replay_probe: it was 4 KiB to zh_blksz long, or the ring wrapped), as
 * long as blocks of this chain are found; only seq S+1 of this guid can
 * verify there, so stale blocks cannot pose as later ones.  replay_decide
 * then tells a torn tail from damage, and a block that verifies but
 * makes no sense is judged like damage.  Damage fails the import with
 * messages saying which block, which records are lost as far as can be
 * told and how many acknowledged ones after it cannot be applied, unless
 * the import recovers: zil_recover=truncate cuts the chain there (the
 * header records the cut, ZV_ZH_F_TRUNCATED, so a crash during the
 * replay does not need the key again), discard starts a fresh chain.  A
 * damaged block with nothing durable after it (the newest, or one of the
 * newest batch) cannot be told from a torn tail: that is the limit.
 * After a rewind the txgs rewound past may have reused ring space behind
 * their head, so there such a block ends the log (cut, and said).  An
 * in-place block that does not verify is judged the same way, by its log
 * block's seq (replay_nodata).
 *
 * The steps, the same for the claim, an inspection and the replay: walk
 * (replay_walk: blocks verified one after the other until the stop,
 * enum replay_stop: the end of the ring, a gap, a bad block or record,
 * or the cut a recovering import recorded), then judge the stop
 * (replay_decide: the log ends there, or it is cut there, or the import
 * fails), then claim the in-place blocks of the records before it
 * (replay_claims_take); the replay applies those records (pass 2 of
 * zv_zil_replay).  After the replay zv_zil_replay resets the commit
 * path's block state (zl_next_seq, the slots, the durable and persisted
 * seqs) for the fresh chain: the one place outside zil_commit.c that
 * writes it, safe because nothing logs or commits yet.
 *
 * Locks: none (see above: one thread).
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <stdio.h>
#include <inttypes.h>
#include <stdatomic.h>

#include "zil_impl.h"

/* ---- replay ---- */

/* Is dva a place where a block may start? */
static bool
replay_dva_ok (zv_zil_t *zl, uint64_t dva)
{
  uint64_t base = zl->zl_hdr.zh_ring_dva;

  return ZV_DVA_VDEV (dva) == ZV_DVA_VDEV (base) && dva >= base
    && (dva - base) % ZV_SECTOR == 0
    && dva - base + zl->zl_hdr.zh_blksz <= zl->zl_ring_size;
}

/* A log block read from the ring that verified. */
typedef struct replay_blk {
  uint64_t zb_seq;
  uint64_t zb_dva;
  uint64_t zb_next_dva;
  uint64_t zb_durable;         /* lh_durable_seq */
  uint32_t zb_nused;           /* record bytes */
} replay_blk_t;

/* Check a log block read from the ring as block seq of this chain. */
static int
replay_verify_block (zv_zil_t *zl, uint8_t *buf, uint64_t seq,
                     replay_blk_t *zb)
{
  zv_lwb_hdr_t *lh = (zv_lwb_hdr_t *) buf;
  zv_cksum_t want = lh->lh_cksum, got;
  uint32_t len;

  if (lh->lh_magic != ZV_LWB_MAGIC || lh->lh_version != ZV_FORMAT_VERSION
      || lh->lh_seq != seq || lh->lh_next_seq != seq + 1
      || !replay_dva_ok (zl, lh->lh_next_dva)
      || lh->lh_nused > zl->zl_hdr.zh_blksz - sizeof *lh)
    return -1;
  len = ZV_P2ROUNDUP (sizeof *lh + lh->lh_nused, ZV_SECTOR);
  memset (&lh->lh_cksum, 0, sizeof lh->lh_cksum);
  zv_cksum_compute (buf, len, zil_seed (zl->zl_hdr.zh_guid, seq), &got);
  lh->lh_cksum = want;
  if (!zv_cksum_equal (&want, &got))
    return -1;
  zb->zb_seq = seq;
  zb->zb_next_dva = lh->lh_next_dva;
  zb->zb_durable = lh->lh_durable_seq;
  zb->zb_nused = lh->lh_nused;
  return 0;
}

/*
 * Read len bytes at dva from side 'side' of the ring's device (a mirror's
 * side on its own; any other device is its own side 0): -1 when that
 * side is out of service or the read fails.  The chain is followed by
 * checksums the device layer cannot see, so a mirror's sides are tried
 * one by one here: a side that missed log writes (it was faulted, and is
 * back at this import) holds stale blocks, and a stale block read from
 * it must not end the chain while another side has the real one.
 */
static int
replay_read_side (zv_zil_t *zl, uint64_t dva, void *buf, uint32_t len,
                  unsigned side)
{
  zv_dev_t *dev = zil_ring_dev (zl, dva);

  if (!zv_dev_side_ok (dev, side))
    return -1;
  return zv_dev_read (zv_dev_side (dev, side), buf, ZV_DVA_OFFSET (dva), len)
    < 0 ? -1 : 0;
}

/* Read block seq of the chain at dva and verify it: 0, or -1 when it is
 * not there (torn, damaged, stale, never written) on any side. */
static int
replay_read_block (zv_zil_t *zl, uint64_t dva, uint64_t seq, uint8_t *buf,
                   replay_blk_t *zb)
{
  if (!replay_dva_ok (zl, dva))
    return -1;
  for (unsigned side = 0; side < zv_dev_nsides (zil_ring_dev (zl, dva));
       side++) {
    if (replay_read_side (zl, dva, buf, zl->zl_hdr.zh_blksz, side) < 0
        || replay_verify_block (zl, buf, seq, zb) < 0)
      continue;
    zb->zb_dva = dva;
    return 0;
  }
  return -1;
}

/*
 * Find block seq when the block before it, at dva, did not verify (so
 * its next_dva is unknown): it starts where a block of 4 KiB to zh_blksz
 * at dva ends, or at the ring's start when fewer than zh_blksz bytes are
 * left there (zil_pos_fit).  A candidate whose first sector lacks the
 * magic and seq is not read further.  The checksum is seeded with the
 * chain's guid and seq, so only block seq of this chain can pass: one
 * from an earlier chain, or an older block of this one, cannot.
 */
static int
replay_probe (zv_zil_t *zl, uint64_t dva, uint64_t seq, uint8_t *buf,
              replay_blk_t *zb)
{
  const zv_zil_header_t *zh = &zl->zl_hdr;
  const zv_lwb_hdr_t *lh = (const zv_lwb_hdr_t *) buf;
  uint64_t off = dva - zh->zh_ring_dva, prev = UINT64_MAX;

  for (uint64_t len = ZV_SECTOR; len <= zh->zh_blksz; len += ZV_SECTOR) {
    uint64_t at = off + len;
    uint64_t cand;

    if (at + zh->zh_blksz > zl->zl_ring_size)
      at = 0;
    if (at == prev)
      continue;
    prev = at;
    cand = zh->zh_ring_dva + at;
    bool head = false;
    for (unsigned side = 0; !head && side < zv_dev_nsides
           (zil_ring_dev (zl, cand)); side++)
      head = replay_read_side (zl, cand, buf, ZV_SECTOR, side) == 0
        && lh->lh_magic == ZV_LWB_MAGIC && lh->lh_seq == seq;
    if (!head)
      continue;
    if (replay_read_block (zl, cand, seq, buf, zb) == 0)
      return 0;
  }
  return -1;
}

/*
 * Records are hostile data.  A log block whose checksum verifies was
 * written whole, so a record in it that makes no sense is a bug or a
 * forgery, not a torn write: unless the import recovers (zil_recover,
 * replay_decide), it fails with EIO, saying which record and why, before
 * anything is claimed (docs/design.md, "Replay ends").  The claim at
 * import and the replay check records by the same rules
 * (replay_record_check, zv_zil_ind_check, replay_claims_take).
 */
static int
replay_bad_record (const zv_lr_t *lr, const char *why)
{
  zv_error ("intent log: record %" PRIu64 " (txg %" PRIu64 ", offset %"
            PRIu64 ") %s", lr->lr_seq, lr->lr_txg, lr->lr_offset, why);
  return -EIO;
}

/* The record at the start of 'room' bytes of log block blk's records:
 * its framing, type and flags; and, when it is to be replayed (txg >
 * claim), its range. */
static int
replay_record_check (zv_zil_t *zl, uint64_t blk, const zv_lr_t *lr,
                     uint32_t room, uint64_t claim)
{
  uint32_t payload;

  if (lr->lr_reclen < sizeof (zv_lr_t) || lr->lr_reclen % 8 != 0
      || lr->lr_reclen > room) {
    zv_error ("intent log: a record of log block %" PRIu64 " is framed "
              "wrongly (length %" PRIu32 ", %" PRIu32 " bytes left)", blk,
              lr->lr_reclen, room);
    return -EIO;
  }
  payload = lr->lr_reclen - sizeof (zv_lr_t);
  /* A flag this code does not know would change what the record
   * means: replaying it without would not be the acknowledged state. */
  if ((lr->lr_type == ZV_LR_WRITE && lr->lr_length > payload)
      || (lr->lr_type == ZV_LR_WRITE_IND
          && payload < sizeof (zv_blkptr_t))
      || lr->lr_type > ZV_LR_ZERO
      || (lr->lr_flags & ~(lr->lr_type == ZV_LR_ZERO
                           ? ZV_LR_F_ZERO_ALLOC : 0)) != 0) {
    zv_error ("intent log: record %" PRIu64 " of log block %" PRIu64
              " is inconsistent (type %" PRIu32 ", length %" PRIu64
              ", flags %#" PRIx64 ")", lr->lr_seq, blk, lr->lr_type,
              lr->lr_length, lr->lr_flags);
    return -EIO;
  }
  if (lr->lr_type != ZV_LR_NOP && lr->lr_txg > claim
      && zl->zl_ops.zo_volsize != 0
      && (lr->lr_offset > zl->zl_ops.zo_volsize
          || lr->lr_length > zl->zl_ops.zo_volsize - lr->lr_offset))
    return replay_bad_record (lr, "is past the end of the volume");
  return 0;
}

int
zv_zil_ind_check (zv_spa_t *spa, const zv_lr_t *lr, const zv_blkptr_t *bp,
                  uint32_t blksz)
{
  char why[192];

  why[0] = '\0';
  if (lr->lr_length != blksz || lr->lr_offset % blksz != 0)
    snprintf (why, sizeof why, "covers %" PRIu64 " bytes, not one volume "
              "block of %" PRIu32 " with its in-place block", lr->lr_length,
              blksz);
  else if (zv_bp_is_hole (bp))
    snprintf (why, sizeof why, "names an in-place block pointer that is "
              "a hole");
  else if (bp->bp_ncopies != 1)
    snprintf (why, sizeof why, "names an in-place block of %u copies, "
              "not 1", bp->bp_ncopies);
  else if (bp->bp_level != 0)
    snprintf (why, sizeof why, "names an in-place block at level %u, "
              "not 0", bp->bp_level);
  else if (bp->bp_type != ZV_BT_VOLDATA)
    snprintf (why, sizeof why, "names an in-place block of type %u, not "
              "volume data", bp->bp_type);
  else if (bp->bp_psize != blksz || bp->bp_lsize != blksz)
    snprintf (why, sizeof why, "names an in-place block of size %" PRIu32
              "/%" PRIu32 ", not the volume block size %" PRIu32,
              bp->bp_psize, bp->bp_lsize, blksz);
  else if (zv_zio_bp_check (spa, bp, "intent log record") < 0)
    snprintf (why, sizeof why, "names an in-place block outside the "
              "pool's data area");
  return why[0] ? replay_bad_record (lr, why) : 0;
}

/* In-place blocks named by the records to replay (see replay_check_block):
 * each with the first record that names it and where that record is
 * (log block, byte of its records), for the messages and for a
 * recovering import to cut the chain there. */
typedef struct replay_claim_ent {
  uint64_t ce_dva;
  zv_lr_t ce_lr;
  uint64_t ce_blk;
  uint32_t ce_off;
} replay_claim_ent_t;

typedef struct replay_claims {
  replay_claim_ent_t *cl_ent;
  size_t cl_n, cl_cap;
} replay_claims_t;

/* Records of txgs after the claim (those a replay applies), counted;
 * the others are in synced txgs and lose nothing when dropped. */
typedef struct replay_tally {
  uint64_t ty_records;
  uint64_t ty_min_txg, ty_max_txg;
} replay_tally_t;

static void
replay_tally_add (replay_tally_t *ty, uint64_t txg)
{
  if (ty->ty_records == 0 || txg < ty->ty_min_txg)
    ty->ty_min_txg = txg;
  ty->ty_max_txg = ZV_MAX (ty->ty_max_txg, txg);
  ty->ty_records++;
}

static void
replay_tally_merge (replay_tally_t *to, const replay_tally_t *from)
{
  if (from->ty_records == 0)
    return;
  if (to->ty_records == 0 || from->ty_min_txg < to->ty_min_txg)
    to->ty_min_txg = from->ty_min_txg;
  to->ty_max_txg = ZV_MAX (to->ty_max_txg, from->ty_max_txg);
  to->ty_records += from->ty_records;
}

/* "N record(s) of txgs A-B", for the messages. */
static const char *
replay_tally_text (const replay_tally_t *ty, char *buf, size_t len)
{
  if (ty->ty_records == 0)
    snprintf (buf, len, "no record");
  else if (ty->ty_min_txg == ty->ty_max_txg)
    snprintf (buf, len, "%" PRIu64 " record(s) of txg %" PRIu64,
              ty->ty_records, ty->ty_min_txg);
  else
    snprintf (buf, len, "%" PRIu64 " record(s) of txgs %" PRIu64 "-%"
              PRIu64, ty->ty_records, ty->ty_min_txg, ty->ty_max_txg);
  return buf;
}

/*
 * Where the part of the chain that replays stops.  The end of a log is
 * always a block that does not verify: after a crash, the next block was
 * never written, or torn, or is still an older one.  Whether that block
 * was acknowledged is told by the blocks written after it (replay_decide).
 */
enum replay_stop {
  REPLAY_STOP_END = 0,     /* the whole ring was walked */
  REPLAY_STOP_GAP,         /* block wk_stop_seq does not verify */
  REPLAY_STOP_BAD,         /* it verifies, but makes no sense at wk_stop_off */
  REPLAY_STOP_MARK,        /* a recovering import cut the chain here */
};

/* A block found after the stop, with the records counted from it. */
typedef struct replay_later {
  uint64_t la_seq;
  uint64_t la_durable;         /* its lh_durable_seq */
  replay_tally_t la_tally;
} replay_later_t;

typedef struct replay_walk {
  enum replay_stop wk_stop;
  uint64_t wk_stop_seq;        /* replay applies the blocks before it... */
  uint64_t wk_stop_dva;        /* (where it is or would be) */
  uint32_t wk_stop_off;        /* ...and this many bytes of its records */
  uint64_t wk_nblocks;         /* blocks replayed whole */
  replay_tally_t wk_replay;       /* the records the replay applies */
  bool wk_have_last;           /* the last record before the stop */
  uint64_t wk_last_ticket, wk_last_txg;
  /* From the stop on (never replayed): */
  replay_later_t *wk_later;       /* the blocks found, in seq order: the */
  size_t wk_nlater, wk_latercap; /* stop block first if it verified */
  bool wk_stop_read;           /* (it did) */
  uint64_t wk_missing;         /* blocks between them that do not verify */
  bool wk_have_first;          /* the first record found after the stop */
  uint64_t wk_first_ticket, wk_first_txg;
  /* The highest lh_durable_seq of every block that verified, and the
   * block that says so. */
  uint64_t wk_durable, wk_durable_by;
} replay_walk_t;

static void
replay_walk_free (replay_walk_t *wk)
{
  free (wk->wk_later);
  wk->wk_later = NULL;
  wk->wk_nlater = wk->wk_latercap = 0;
}

/* A verified block's word on what was durable when it was issued. */
static void
replay_walk_durable (replay_walk_t *wk, const replay_blk_t *zb)
{
  if (zb->zb_durable > wk->wk_durable) {
    wk->wk_durable = zb->zb_durable;
    wk->wk_durable_by = zb->zb_seq;
  }
}

/* Count the records of block zb from byte 'from' on, as far as their
 * framing holds: it is past the stop, so nothing is checked or applied. */
static void
replay_walk_later (replay_walk_t *wk, const replay_blk_t *zb,
                   const uint8_t *recs, uint32_t from, uint64_t claim)
{
  replay_later_t *la;

  ZV_GROW (wk->wk_later, wk->wk_nlater, wk->wk_latercap, 16);
  la = &wk->wk_later[wk->wk_nlater++];
  memset (la, 0, sizeof *la);
  la->la_seq = zb->zb_seq;
  la->la_durable = zb->zb_durable;
  for (uint32_t pos = from; pos + sizeof (zv_lr_t) <= zb->zb_nused;) {
    const zv_lr_t *lr = (const zv_lr_t *) (recs + pos);

    if (lr->lr_reclen < sizeof (zv_lr_t) || lr->lr_reclen % 8 != 0
        || lr->lr_reclen > zb->zb_nused - pos)
      break;
    if (!wk->wk_have_first) {
      wk->wk_have_first = true;
      wk->wk_first_ticket = lr->lr_seq;
      wk->wk_first_txg = lr->lr_txg;
    }
    if (lr->lr_type != ZV_LR_NOP && lr->lr_txg > claim)
      replay_tally_add (&la->la_tally, lr->lr_txg);
    pos += lr->lr_reclen;
  }
}

/* Records found from the stop on: all of them (*all), and those of
 * blocks a later block says were durable (*acked: acknowledged). */
static void
replay_walk_dropped (const replay_walk_t *wk, replay_tally_t *all,
                     replay_tally_t *acked)
{
  memset (all, 0, sizeof *all);
  memset (acked, 0, sizeof *acked);
  for (size_t i = 0; i < wk->wk_nlater; i++) {
    replay_tally_merge (all, &wk->wk_later[i].la_tally);
    if (wk->wk_later[i].la_seq <= wk->wk_durable)
      replay_tally_merge (acked, &wk->wk_later[i].la_tally);
  }
}

/*
 * Pass 1, per block of the part that replays: check every record that
 * starts before byte 'lim' as the replay will, and their order; collect
 * the in-place blocks that records to replay point at (replay_claims_take
 * claims them once the whole part passed); count them.  -EIO with the
 * bad record's byte in *bad.
 */
static int
replay_check_block (zv_zil_t *zl, const replay_blk_t *zb, const uint8_t *recs,
                    uint32_t lim, uint64_t claim, replay_claims_t *cl,
                    replay_walk_t *wk, uint32_t *bad)
{
  uint32_t pos = 0;

  while (pos + sizeof (zv_lr_t) <= lim) {
    const zv_lr_t *lr = (const zv_lr_t *) (recs + pos);
    int r = replay_record_check (zl, zb->zb_seq, lr, zb->zb_nused - pos,
                                 claim);

    if (r == 0 && wk->wk_have_last && lr->lr_seq < wk->wk_last_ticket) {
      char why[96];
      snprintf (why, sizeof why, "comes after record %" PRIu64 ": the "
                "log's order is broken", wk->wk_last_ticket);
      r = replay_bad_record (lr, why);
    }
    if (r == 0 && lr->lr_type == ZV_LR_WRITE_IND && lr->lr_txg > claim) {
      zv_blkptr_t bp;
      bool dup = false;

      memcpy (&bp, lr + 1, sizeof bp);
      r = zv_zil_ind_check (zl->zl_spa, lr, &bp, zl->zl_ops.zo_blksz);
      for (size_t i = 0; r == 0 && cl && i < cl->cl_n && !dup; i++)
        dup = cl->cl_ent[i].ce_dva == bp.bp_dva[0];
      if (r == 0 && cl && !dup) {
        ZV_GROW (cl->cl_ent, cl->cl_n, cl->cl_cap, 64);
        cl->cl_ent[cl->cl_n++] = (replay_claim_ent_t) {
          .ce_dva = bp.bp_dva[0], .ce_lr = *lr, .ce_blk = zb->zb_seq,
          .ce_off = pos,
        };
      }
    }
    if (r < 0) {
      *bad = pos;
      return r;
    }
    wk->wk_have_last = true;
    wk->wk_last_ticket = lr->lr_seq;
    wk->wk_last_txg = lr->lr_txg;
    if (lr->lr_type != ZV_LR_NOP && lr->lr_txg > claim)
      replay_tally_add (&wk->wk_replay, lr->lr_txg);
    pos += lr->lr_reclen;
  }
  return 0;
}

/*
 * Walk the chain from the head: the part that replays (checked, its
 * in-place blocks collected into cl unless NULL), up to the first block
 * that does not verify or makes no sense, or up to a cut at (lim_seq,
 * lim_off) when lim_seq is not 0: the header's (ZV_ZH_F_TRUNCATED), or
 * one at a record that replay_claims_take refused (lim_bad).  Then on past
 * the stop, only counting: each block after one that verifies is where
 * that one says; after one that does not, replay_probe looks for it.  The
 * walk ends where neither finds the next block, or after as many blocks
 * as the ring holds.
 */
static void
replay_walk (zv_zil_t *zl, uint64_t claim, uint64_t lim_seq, uint32_t lim_off,
             bool lim_bad, replay_claims_t *cl, replay_walk_t *wk)
{
  const zv_zil_header_t *zh = &zl->zl_hdr;
  uint8_t *buf = zv_buf_get (zh->zh_blksz);
  const uint8_t *recs = buf + sizeof (zv_lwb_hdr_t);
  uint64_t budget = zl->zl_ring_size / ZV_SECTOR;
  uint64_t dva = zil_pos_dva (zl, zh->zh_head_pos), seq = zh->zh_head_seq;
  replay_blk_t zb;
  bool have = false;            /* zb is block seq, which verified */
  uint32_t from = 0;            /* its bytes counted as past the stop */

  memset (wk, 0, sizeof *wk);
  for (;; seq++, budget--) {
    uint32_t bad = 0;

    if (budget == 0) {
      wk->wk_stop = REPLAY_STOP_END;
      break;
    }
    have = replay_read_block (zl, dva, seq, buf, &zb) == 0;
    if (!have) {
      wk->wk_stop = seq == lim_seq && !lim_bad ? REPLAY_STOP_MARK
        : REPLAY_STOP_GAP;
      break;
    }
    /* A block cannot have been durable before it was written. */
    if (zb.zb_durable >= seq) {
      zv_error ("intent log: log block %" PRIu64 " says block %" PRIu64
                " was durable when it was issued", seq, zb.zb_durable);
      wk->wk_stop = REPLAY_STOP_BAD;
      from = zb.zb_nused;
      break;
    }
    if (seq == lim_seq) {
      uint32_t lim = ZV_MIN (lim_off, zb.zb_nused);

      from = lim;
      wk->wk_stop = lim_bad ? REPLAY_STOP_BAD : REPLAY_STOP_MARK;
      if (replay_check_block (zl, &zb, recs, lim, claim, cl, wk, &bad) < 0) {
        wk->wk_stop = REPLAY_STOP_BAD;
        from = bad;
      }
      replay_walk_durable (wk, &zb);
      break;
    }
    if (replay_check_block (zl, &zb, recs, zb.zb_nused, claim, cl, wk,
                            &bad) < 0) {
      wk->wk_stop = REPLAY_STOP_BAD;
      from = bad;
      replay_walk_durable (wk, &zb);
      break;
    }
    replay_walk_durable (wk, &zb);
    wk->wk_nblocks++;
    dva = zb.zb_next_dva;
  }
  wk->wk_stop_seq = seq;
  wk->wk_stop_dva = dva;
  wk->wk_stop_off = wk->wk_stop == REPLAY_STOP_GAP ? 0 : from;
  if (wk->wk_stop == REPLAY_STOP_END) {
    zv_buf_put (buf, zh->zh_blksz);
    return;
  }
  if (have) {
    replay_walk_later (wk, &zb, recs, from, claim);
    wk->wk_stop_read = true;
  }

  /* Past the stop. */
  for (uint64_t missing = 0; budget-- > 0;) {
    uint64_t next = seq + 1;

    if (have) {
      uint64_t at = zb.zb_next_dva;
      have = replay_read_block (zl, at, next, buf, &zb) == 0;
      if (!have) {
        missing++;
        seq = next;
        dva = at;
        continue;
      }
    }
    else if (replay_probe (zl, dva, next, buf, &zb) < 0)
      break;
    else
      have = true;
    if (zb.zb_durable >= next)
      break;                    /* nonsense: follow it no further */
    wk->wk_missing += missing;
    missing = 0;
    seq = next;
    dva = zb.zb_dva;
    replay_walk_durable (wk, &zb);
    replay_walk_later (wk, &zb, recs, 0, claim);
  }
  zv_buf_put (buf, zh->zh_blksz);
}

/* How replay_decide judged a walk. */
enum replay_verdict {
  REPLAY_ENDS = 0,          /* the log ends at the stop: replay up to it */
  REPLAY_CUT = 1,           /* damage or a bad record, cut there (recovery) */
};

/* Who asks: the read-write import's claim, the replay after it (which
 * says again only what the claim did not), a read-only import. */
enum replay_judge { REPLAY_JUDGE_CLAIM, REPLAY_JUDGE_REPLAY,
                    REPLAY_JUDGE_INSPECT };

/*
 * What the stop of a walk means, and what the import does about it.
 *
 * A block that does not verify is the log's torn tail unless a block
 * written after it says it was durable (lh_durable_seq >= its seq): log
 * blocks are written several at a time, so a crash may tear block S and
 * leave S+1 whole, but S+1's records were then never acknowledged, and
 * S+1 was issued before S was durable, so it says less.  A block that
 * was durable and does not verify is damage: acknowledged writes are
 * lost with it, and every later record depends on it (a later write may
 * have overwritten part of a lost one, or the other way round).  So is a
 * block that verifies but makes no sense.  Either way the import fails
 * (-EIO) unless 'recover' says otherwise: ZV_ZIL_RECOVER_TRUNCATE cuts
 * the log there (REPLAY_CUT).  After a rewind ('rewound': the import took
 * an older txg than the newest), a durable block that does not verify
 * may have been overwritten legitimately: the txgs rewound past moved
 * the head beyond it and let the ring reuse its space.  It then ends the
 * log, cut there and said, as the rewind loses those txgs anyway.  A
 * read-only import (REPLAY_JUDGE_INSPECT), which never replays, only
 * reports.  The messages say which block, where it is, which records are
 * lost as far as can be told (between the last record
 * before the stop and the first found after it), how many acknowledged
 * records after it cannot be applied, and how to import anyway.
 */
static int
replay_decide (zv_zil_t *zl, const replay_walk_t *wk,
               enum zv_zil_recover recover, enum replay_judge judge,
               bool rewound)
{
  uint64_t s = wk->wk_stop_seq, by = wk->wk_durable_by;
  size_t nlater = wk->wk_nlater - (wk->wk_stop_read ? 1 : 0);
  replay_tally_t all, acked, whole;
  char t1[96], t2[96], lost[192], where[160], missing[64];

  if (wk->wk_stop == REPLAY_STOP_END || wk->wk_stop == REPLAY_STOP_MARK)
    return REPLAY_ENDS;
  replay_walk_dropped (wk, &all, &acked);
  if (wk->wk_stop == REPLAY_STOP_GAP && wk->wk_durable < s) {
    if (nlater > 0 && judge != REPLAY_JUDGE_REPLAY)
      zv_info ("intent log: log block %" PRIu64 " does not verify and "
               "no block after it says it was durable: it is the torn "
               "tail of the log; the %zu block(s) found after it (%s) "
               "were never acknowledged", s, nlater,
               replay_tally_text (&all, t1, sizeof t1));
    return REPLAY_ENDS;
  }

  snprintf (where, sizeof where, "%s offset %" PRIu64,
            zv_dev_path (zil_ring_dev (zl, wk->wk_stop_dva)),
            ZV_DVA_OFFSET (wk->wk_stop_dva));
  /* The lost records lie between the last one before the stop and the
   * first one found after it (tickets are the log's order). */
  if (wk->wk_have_last && wk->wk_have_first)
    snprintf (lost, sizeof lost, "between record %" PRIu64 " (txg %" PRIu64
              ") and record %" PRIu64 " (txg %" PRIu64 ")",
              wk->wk_last_ticket, wk->wk_last_txg, wk->wk_first_ticket,
              wk->wk_first_txg);
  else if (wk->wk_have_first)
    snprintf (lost, sizeof lost, "before record %" PRIu64 " (txg %" PRIu64
              ")", wk->wk_first_ticket, wk->wk_first_txg);
  else if (wk->wk_have_last)
    snprintf (lost, sizeof lost, "after record %" PRIu64 " (txg %" PRIu64
              ")", wk->wk_last_ticket, wk->wk_last_txg);
  else
    snprintf (lost, sizeof lost, "it held");
  /* Name the first block that vouches for it. */
  for (size_t i = 0; i < wk->wk_nlater; i++)
    if (wk->wk_later[i].la_seq > s && wk->wk_later[i].la_durable >= s) {
      by = wk->wk_later[i].la_seq;
      break;
    }
  if (wk->wk_stop == REPLAY_STOP_GAP && rewound) {
    zv_error ("intent log: log block %" PRIu64 " (%s) does not verify, but "
              "block %" PRIu64 " says it was durable; the import rewound "
              "past txgs that may have reused its space, so the log ends "
              "there: replaying %s, dropping %s found after it", s, where,
              by, replay_tally_text (&wk->wk_replay, t2, sizeof t2),
              replay_tally_text (&all, t1, sizeof t1));
    return judge == REPLAY_JUDGE_INSPECT ? REPLAY_ENDS : REPLAY_CUT;
  }
  if (wk->wk_stop == REPLAY_STOP_GAP)
    zv_error ("intent log: log block %" PRIu64 " (%s) is damaged: it does "
              "not verify, but block %" PRIu64 ", written after it, says "
              "it was durable; the acknowledged records %s are lost with "
              "it", s, where, by, lost);
  else
    zv_error ("intent log: log block %" PRIu64 " (%s) verifies but holds "
              "nonsense (above)%s", s, where,
              wk->wk_durable >= s ? "; it was acknowledged" : "");
  missing[0] = '\0';
  if (wk->wk_missing > 0)
    snprintf (missing, sizeof missing, ", %" PRIu64 " more missing",
              wk->wk_missing);
  zv_error ("intent log: %s %s in %zu later block(s)%s, %" PRIu64 " of "
            "them acknowledged, cannot be applied without it",
            wk->wk_stop == REPLAY_STOP_GAP ? "after it," : "from there on,",
            replay_tally_text (&all, t1, sizeof t1), nlater, missing,
            acked.ty_records);
  whole = wk->wk_replay;
  replay_tally_merge (&whole, &all);
  replay_tally_text (&wk->wk_replay, t2, sizeof t2);
  if (judge == REPLAY_JUDGE_INSPECT) {
    zv_error ("intent log: a read-only import does not replay the log; a "
              "read-write import fails unless zil_recover=truncate (keeps "
              "what precedes it: %s) or zil_recover=discard", t2);
    return REPLAY_ENDS;
  }
  if (recover == ZV_ZIL_RECOVER_TRUNCATE) {
    zv_error ("intent log: zil_recover=truncate: replaying what precedes "
              "log block %" PRIu64 "%s (%s), dropping the rest (%s)", s,
              wk->wk_stop == REPLAY_STOP_GAP ? "" : "'s bad record", t2,
              replay_tally_text (&all, t1, sizeof t1));
    return REPLAY_CUT;
  }
  zv_error ("intent log: the import fails; to import anyway, "
            "zil_recover=truncate keeps what precedes it (%s) and drops "
            "the rest, zil_recover=discard drops the whole log (%s)", t2,
            replay_tally_text (&whole, t1, sizeof t1));
  return -EIO;
}

static int
replay_claim_ent_cmp (const void *a, const void *b)
{
  uint64_t x = ((const replay_claim_ent_t *) a)->ce_dva;
  uint64_t y = ((const replay_claim_ent_t *) b)->ce_dva;

  return x < y ? -1 : x > y;
}

/*
 * Pass 2 of the claim: the ownership rule, then the claims.  A record
 * may own an in-place block only when its space is free in the
 * allocator as imported, or on a pending deferred-free list (a deferred
 * free of an older txg whose space the in-place write reused before the
 * crash): space that is allocated and live (the objset, an indirect
 * block, a space map, a volume block of the synced tree, the log ring)
 * would be freed after replay while still in use.  Space the bitmap
 * shows allocated is the record's too when the synced tree does not
 * use it ('live', given the record's volume block: the pool's owners,
 * after the tree path to that block is read): a txg sync that ran while the
 * in-place write was allocated stored its bit.  One more case is
 * sound: a claim already made (zh_claim_txg set, by this import or an
 * earlier one that synced it and crashed before the replay) left its
 * blocks allocated, so they are taken again only when the chain names
 * exactly the set that claim recorded (ZV_ZH_F_CLAIM_SET: count and
 * checksum of the sorted addresses).  Nothing is claimed unless every
 * block passes; on success the header records the set.  On failure
 * *bad is the record refused.
 */
static int
replay_claims_take (zv_zil_t *zl, replay_claims_t *cl, zv_zil_header_t *zh,
                    uint64_t claim, zv_zil_live_fn live, void *live_arg,
                    const replay_claim_ent_t **bad)
{
  zv_alloc_t *a = zl->zl_spa->spa_alloc;
  uint32_t bs = zl->zl_ops.zo_blksz;
  uint64_t *dvas;
  zv_cksum_t ck;
  bool same;

  if (cl->cl_n > 1)             /* cl_ent is NULL when empty */
    qsort (cl->cl_ent, cl->cl_n, sizeof *cl->cl_ent, replay_claim_ent_cmp);
  for (size_t i = 1; i < cl->cl_n; i++) {
    uint64_t p = cl->cl_ent[i - 1].ce_dva, q = cl->cl_ent[i].ce_dva;
    if (ZV_DVA_VDEV (p) == ZV_DVA_VDEV (q) && q - p < bs) {
      /* The later of the two records is the one to blame. */
      const replay_claim_ent_t *x = &cl->cl_ent[i - 1], *y = &cl->cl_ent[i];
      char why[128];

      if (x->ce_lr.lr_seq > y->ce_lr.lr_seq) {
        x = &cl->cl_ent[i];
        y = &cl->cl_ent[i - 1];
      }
      snprintf (why, sizeof why, "names an in-place block that overlaps "
                "that of record %" PRIu64, x->ce_lr.lr_seq);
      *bad = y;
      return replay_bad_record (&y->ce_lr, why);
    }
  }
  dvas = zv_calloc (cl->cl_n + 1, sizeof *dvas);
  for (size_t i = 0; i < cl->cl_n; i++)
    dvas[i] = cl->cl_ent[i].ce_dva;
  memset (&ck, 0, sizeof ck);
  zv_cksum_compute (dvas, cl->cl_n * sizeof *dvas, zh->zh_guid, &ck);
  free (dvas);
  same = zh->zh_claim_txg != 0 && (zh->zh_flags & ZV_ZH_F_CLAIM_SET)
    && zh->zh_claim_count == cl->cl_n
    && zv_cksum_equal (&zh->zh_claim_cksum, &ck);
  for (size_t i = 0; i < cl->cl_n && !same; i++) {
    uint64_t dva = cl->cl_ent[i].ce_dva;
    if (!zv_alloc_may_claim (a, dva, bs)
        && (live == NULL
            || live (live_arg, dva, bs, cl->cl_ent[i].ce_lr.lr_offset / bs))) {
      char why[192];
      snprintf (why, sizeof why, "names an in-place block (device %u "
                "offset %" PRIu64 ") whose space is allocated and live, "
                "not the record's to own", ZV_DVA_VDEV (dva),
                ZV_DVA_OFFSET (dva));
      *bad = &cl->cl_ent[i];
      return replay_bad_record (&cl->cl_ent[i].ce_lr, why);
    }
  }
  for (size_t i = 0; i < cl->cl_n; i++) {
    uint64_t dva = cl->cl_ent[i].ce_dva;
    /* Free on disk, or on its way to being free: either way it must stay
     * put until the record is applied, and be freed once, by the
     * replay. */
    (void) zv_alloc_defer_cancel (a, dva, bs);
    if (!zv_alloc_is_allocated (a, dva, bs))
      zv_alloc_claim (a, dva, bs);
    /* The record owns it now: a tree pointer found later that names it
     * is refused (alloc.h, the pool's owners). */
    zv_alloc_own_rest (a, dva, bs);
  }
  zh->zh_claim_txg = claim;
  zh->zh_claim_count = cl->cl_n;
  zh->zh_claim_cksum = ck;
  zh->zh_flags |= ZV_ZH_F_CLAIM_SET;
  return 0;
}

/*
 * The claim of a chain, for the import and the replay alike: walk it,
 * judge where it stops (replay_decide), take the in-place blocks of the
 * part that replays.  A record replay_claims_take refuses is a bad record
 * like any other: the walk is redone with the chain cut there, to judge
 * and report it the same way (each retry cuts earlier, so this ends).
 * With a cut (REPLAY_CUT), the header records it (ZV_ZH_F_TRUNCATED), so a
 * replay, or an import after a crash during it, stops at the same place
 * without being told again.  *wk and *cl describe what replays.
 */
static int
replay_chain_claim (zv_zil_t *zl, zv_zil_header_t *zh, uint64_t claim,
                    enum zv_zil_recover recover, enum replay_judge judge,
                    bool rewound, zv_zil_live_fn live, void *live_arg,
                    replay_walk_t *wk, replay_claims_t *cl)
{
  uint64_t lim_seq = 0;
  uint32_t lim_off = 0;
  bool lim_bad = false, cut = false;
  int r;

  if (zh->zh_flags & ZV_ZH_F_TRUNCATED) {
    lim_seq = zh->zh_trunc_seq;
    lim_off = (uint32_t) zh->zh_trunc_off;
  }
  for (;;) {
    const replay_claim_ent_t *bad = NULL;

    memset (cl, 0, sizeof *cl);
    replay_walk (zl, claim, lim_seq, lim_off, lim_bad, cl, wk);
    r = replay_decide (zl, wk, recover, judge, rewound);
    if (r == REPLAY_CUT)
      cut = true;
    if (r >= 0)
      r = replay_claims_take (zl, cl, zh, claim, live, live_arg, &bad);
    if (r >= 0 || bad == NULL)
      break;
    lim_seq = bad->ce_blk;
    lim_off = bad->ce_off;
    lim_bad = true;
    free (cl->cl_ent);
    replay_walk_free (wk);
  }
  if (r < 0) {
    free (cl->cl_ent);
    memset (cl, 0, sizeof *cl);
    replay_walk_free (wk);
    return r;
  }
  if (cut) {
    zh->zh_flags |= ZV_ZH_F_TRUNCATED;
    zh->zh_trunc_seq = wk->wk_stop_seq;
    zh->zh_trunc_off = wk->wk_stop_off;
  }
  return 0;
}

/* A zv_zil_t with only what a walk reads: the ring, where it lives, and
 * the volume's geometry for the records' checks. */
static void
replay_walker_init (zv_zil_t *zl, zv_spa_t *spa, zv_dev_t *logdev,
                    const zv_zil_header_t *zh, uint32_t blksz,
                    uint64_t volsize)
{
  memset (zl, 0, sizeof *zl);
  zl->zl_spa = spa;
  zl->zl_logdev = logdev;
  zl->zl_hdr = *zh;
  zl->zl_ring_size = zh->zh_nslots * (uint64_t) zh->zh_blksz;
  zl->zl_ops.zo_blksz = blksz;
  zl->zl_ops.zo_volsize = volsize;
}

int
zv_zil_claim (zv_spa_t *spa, zv_dev_t *logdev, zv_zil_header_t *zh,
              uint64_t imported_txg, uint32_t blksz, uint64_t volsize,
              enum zv_zil_recover recover, bool rewound, zv_zil_live_fn live,
              void *live_arg)
{
  zv_zil_t zl;
  uint64_t claim = zh->zh_claim_txg ? zh->zh_claim_txg : imported_txg;
  replay_claims_t cl;
  replay_walk_t wk;
  int r;

  replay_walker_init (&zl, spa, logdev, zh, blksz, volsize);
  if (recover == ZV_ZIL_RECOVER_DISCARD) {
    replay_tally_t all, acked;
    char t1[96];

    /* Every record found, checked or not: nothing of it is applied. */
    replay_walk (&zl, claim, 0, 0, false, NULL, &wk);
    replay_walk_dropped (&wk, &all, &acked);
    replay_tally_merge (&all, &wk.wk_replay);
    zv_error ("intent log: zil_recover=discard: dropping the whole log: "
              "%s in %" PRIu64 " block(s)%s; the pool is as of txg %"
              PRIu64, replay_tally_text (&all, t1, sizeof t1),
              wk.wk_nblocks + wk.wk_nlater,
              wk.wk_stop == REPLAY_STOP_GAP && wk.wk_durable >= wk.wk_stop_seq
              ? " and a damaged one" : "", claim);
    replay_walk_free (&wk);
    /* A fresh chain: its header reaches the disk with the first txg, and
     * until then an import finds the old chain again (and is refused
     * again, or told again). */
    zv_zil_header_init (zh, zh->zh_ring_dva, zh->zh_nslots, zh->zh_blksz);
    return 0;
  }
  r = replay_chain_claim (&zl, zh, claim, recover, REPLAY_JUDGE_CLAIM, rewound,
                          live, live_arg, &wk, &cl);
  free (cl.cl_ent);
  if (r < 0)
    return r;
  r = (int) ZV_MIN (wk.wk_nblocks, (uint64_t) INT32_MAX);
  replay_walk_free (&wk);
  return r;
}

void
zv_zil_inspect (zv_spa_t *spa, zv_dev_t *logdev, const zv_zil_header_t *zh,
                uint64_t imported_txg, uint32_t blksz, uint64_t volsize,
                bool rewound)
{
  zv_zil_t zl;
  uint64_t claim = zh->zh_claim_txg ? zh->zh_claim_txg : imported_txg;
  replay_walk_t wk;
  char t1[96];

  replay_walker_init (&zl, spa, logdev, zh, blksz, volsize);
  replay_walk (&zl, claim, zh->zh_flags & ZV_ZH_F_TRUNCATED
               ? zh->zh_trunc_seq : 0, (uint32_t) zh->zh_trunc_off, false,
               NULL, &wk);
  (void) replay_decide (&zl, &wk, ZV_ZIL_RECOVER_NONE, REPLAY_JUDGE_INSPECT,
                        rewound);
  if (wk.wk_replay.ty_records > 0)
    zv_info ("intent log: %s not replayed (a read-only import shows txg %"
             PRIu64 ")", replay_tally_text (&wk.wk_replay, t1, sizeof t1),
             imported_txg);
  replay_walk_free (&wk);
}

/* The checker's view of a claim (zil.h): the in-place blocks of the
 * records a claim would keep, found by the same walk, judged by none. */
void
zv_zil_foreach_claim (zv_spa_t *spa, zv_dev_t *logdev,
                      const zv_zil_header_t *zh, uint64_t imported_txg,
                      uint32_t blksz, uint64_t volsize,
                      zv_alloc_extent_fn fn, void *arg)
{
  zv_zil_t zl;
  uint64_t claim = zh->zh_claim_txg ? zh->zh_claim_txg : imported_txg;
  replay_claims_t cl;
  replay_walk_t wk;

  replay_walker_init (&zl, spa, logdev, zh, blksz, volsize);
  memset (&cl, 0, sizeof cl);
  replay_walk (&zl, claim, zh->zh_flags & ZV_ZH_F_TRUNCATED
               ? zh->zh_trunc_seq : 0, (uint32_t) zh->zh_trunc_off, false,
               &cl, &wk);
  for (size_t i = 0; i < cl.cl_n; i++)
    fn (arg, cl.cl_ent[i].ce_dva, blksz);
  free (cl.cl_ent);
  replay_walk_free (&wk);
}

/* Apply the records of one verified block that start before byte 'lim'
 * (claim rule: txg > claim). */
static int
replay_block (zv_zil_t *zl, uint64_t blk, const uint8_t *recs,
              uint32_t nused, uint32_t lim, uint64_t claim,
              uint64_t *last_seq, int *applied, const zv_lr_t **failed)
{
  uint32_t pos = 0;

  while (pos + sizeof (zv_lr_t) <= lim) {
    const zv_lr_t *lr = (const zv_lr_t *) (recs + pos);
    int r = replay_record_check (zl, blk, lr, nused - pos, claim);

    if (r < 0)
      return r;
    if (lr->lr_seq < *last_seq) {
      zv_error ("intent log: record order broken at %" PRIu64, lr->lr_seq);
      return -EIO;
    }
    *last_seq = lr->lr_seq;
    if (lr->lr_type != ZV_LR_NOP && lr->lr_txg > claim) {
      r = zl->zl_ops.zo_replay (zl->zl_arg, lr, lr + 1);
      if (r < 0) {
        *failed = lr;
        return r;               /* -ENODATA: see zv_zil_replay */
      }
      (*applied)++;
    }
    pos += lr->lr_reclen;
  }
  return 0;
}

/*
 * An in-place block that does not verify (-ENODATA from zo_replay, for
 * record lr of log block blk): it is written before its log block and
 * flushed with it, so unless a later block says blk was durable, blk's
 * flush never completed and nothing from lr on was acknowledged: the log
 * ends there.  If one does, the block is damaged, and the replay fails
 * unless 'recover' truncates.  Returns 0 (the log ends before lr) or
 * -EIO.
 */
static int
replay_nodata (const replay_walk_t *wk, uint64_t blk, const zv_lr_t *lr,
               int applied, enum zv_zil_recover recover)
{
  uint64_t left = wk->wk_replay.ty_records - (uint64_t) applied;

  if (wk->wk_durable < blk) {
    zv_info ("intent log: in-place block of record %" PRIu64 " is not on "
             "disk; the log ends before it", lr->lr_seq);
    return 0;
  }
  zv_error ("intent log: the in-place block of record %" PRIu64 " (txg %"
            PRIu64 ", offset %" PRIu64 ") in log block %" PRIu64 " does "
            "not verify, but block %" PRIu64 " says that block was durable: "
            "it is damaged, and %" PRIu64 " acknowledged or later record(s) "
            "from it on %s", lr->lr_seq, lr->lr_txg, lr->lr_offset, blk,
            wk->wk_durable_by, left,
            recover == ZV_ZIL_RECOVER_TRUNCATE
            ? "are dropped (zil_recover=truncate)"
            : "cannot be applied; the replay fails (zil_recover=truncate "
            "replays up to it)");
  return recover == ZV_ZIL_RECOVER_TRUNCATE ? 0 : -EIO;
}

/* zl_replaying is read by the sync callbacks (zil.c) under zl_hdr_lock. */
static void
replay_set_replaying (zv_zil_t *zl, bool on)
{
  pthread_mutex_lock (&zl->zl_hdr_lock);
  zl->zl_replaying = on;
  pthread_mutex_unlock (&zl->zl_hdr_lock);
}

/*
 * Replay, then start a fresh chain.  The header keeps the old chain (and
 * the claim txg) in every txg synced while replaying, so a crash here
 * replays again from the same start: records are idempotent and applied
 * in the same order, and the result is that of a single replay.  Pass 1
 * is the import's claim again (replay_chain_claim: the same walk, judgement
 * and set of in-place blocks; the import's cut is in the header); pass 2
 * applies the records up to where pass 1 stopped.
 */
int
zv_zil_replay (zv_zil_t *zl, uint64_t imported_txg,
               enum zv_zil_recover recover)
{
  /* The sync thread copies zl_hdr each txg: the walk's changes to the
   * header (claim, cut) are made on a copy and published under
   * zl_hdr_lock, as is the fresh chain at the end. */
  zv_zil_header_t hdr = zl->zl_hdr, *zh = &hdr;
  uint8_t *buf;
  uint64_t claim = zh->zh_claim_txg ? zh->zh_claim_txg : imported_txg;
  uint64_t seq, last_seq = 0, nblocks = 0, dva;
  int applied = 0, r;
  replay_claims_t cl;
  replay_walk_t wk;

  replay_set_replaying (zl, true);
  /* The import (zv_zil_claim) discarded the log already if told to. */
  if (recover == ZV_ZIL_RECOVER_DISCARD)
    recover = ZV_ZIL_RECOVER_NONE;
  r = replay_chain_claim (zl, zh, claim, recover, REPLAY_JUDGE_REPLAY,
                          false, NULL, NULL, &wk, &cl);
  if (r < 0) {
    replay_set_replaying (zl, false);
    return r;
  }
  pthread_mutex_lock (&zl->zl_hdr_lock);
  zl->zl_hdr = hdr;
  pthread_mutex_unlock (&zl->zl_hdr_lock);
  buf = zv_buf_get (zh->zh_blksz);
  dva = zil_pos_dva (zl, zh->zh_head_pos);
  for (seq = zh->zh_head_seq; seq <= wk.wk_stop_seq; seq++) {
    uint32_t lim;
    replay_blk_t zb;
    const zv_lr_t *failed = NULL;

    if (seq == wk.wk_stop_seq && wk.wk_stop_off == 0)
      break;
    if (replay_read_block (zl, dva, seq, buf, &zb) < 0)
      break;                    /* (it verified in pass 1) */
    lim = seq == wk.wk_stop_seq ? wk.wk_stop_off : zb.zb_nused;
    r = replay_block (zl, seq, buf + sizeof (zv_lwb_hdr_t), zb.zb_nused,
                      lim, claim, &last_seq, &applied, &failed);
    if (r == -ENODATA && failed != NULL) {
      r = replay_nodata (&wk, seq, failed, applied, recover);
      break;
    }
    if (r < 0)
      break;
    nblocks++;
    dva = zb.zb_next_dva;
  }
  zv_buf_put (buf, zh->zh_blksz);
  replay_walk_free (&wk);
  if (r < 0) {
    free (cl.cl_ent);
    replay_set_replaying (zl, false);
    return r;
  }
  if (applied > 0)
    zv_info ("intent log: replayed %d record(s) from %" PRIu64
             " block(s) (txgs after %" PRIu64 ")", applied, nblocks, claim);
  /* The in-place blocks were copied by replay: free them with the txg
   * that makes the copies durable. */
  if (cl.cl_n > 0) {
    zv_txg_hold_t h;
    r = zv_txg_hold (zl->zl_tx, 0, &h);
    if (r == 0) {
      for (size_t i = 0; i < cl.cl_n; i++)
        zv_alloc_free_defer (zl->zl_spa->spa_alloc, h.th_txg,
                             cl.cl_ent[i].ce_dva,
                             zl->zl_ops.zo_blksz);
      zv_txg_rele (zl->zl_tx, &h);
    }
  }
  /* Make the replayed changes durable under the old header... */
  if (applied > 0 || cl.cl_n > 0) {
    r = zv_txg_wait_synced (zl->zl_tx, zv_txg_open_txg (zl->zl_tx));
    if (r < 0) {
      free (cl.cl_ent);
      replay_set_replaying (zl, false);
      return r;
    }
  }
  /* ...then start a fresh chain: new guid, head 1, no claim, no cut.  No
   * block is written until a txg carrying this header is on disk (the
   * first commits wait for that txg instead; see zv_zil_synced). */
  zv_zil_header_init (zh, zh->zh_ring_dva, zh->zh_nslots, zh->zh_blksz);
  pthread_mutex_lock (&zl->zl_hdr_lock);
  zl->zl_hdr = hdr;
  zl->zl_head = 1;
  zl->zl_head_pos = 0;
  zl->zl_next_seq = 1;
  atomic_store_explicit (&zl->zl_next_pos, 0, memory_order_seq_cst);
  atomic_store_explicit (&zl->zl_durable_seq, 0, memory_order_seq_cst);
  atomic_store_explicit (&zl->zl_persisted_head, 0, memory_order_seq_cst);
  atomic_store_explicit (&zl->zl_persisted_pos, 0, memory_order_seq_cst);
  for (uint64_t i = 0; i < ZIL_NSTATE; i++)
    atomic_store_explicit (&zl->zl_slots[i].zs_seq, 0, memory_order_seq_cst);
  zl->zl_replaying = false;
  pthread_mutex_unlock (&zl->zl_hdr_lock);
  /* After a replay the old chain must not be replayed again: its
   * in-place blocks are free now.  Put the new header on disk. */
  if (applied > 0 || cl.cl_n > 0) {
    free (cl.cl_ent);
    r = zv_txg_wait_synced (zl->zl_tx, zv_txg_open_txg (zl->zl_tx));
    if (r < 0)
      return r;
  }
  else
    free (cl.cl_ent);
  return applied;
}
