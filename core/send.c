/*
 * send.c: send and receive of snapshots, and the changed ranges between
 * two of them.
 *
 * Theory.  A stream (docs/format.md, "Send streams") is a header naming
 * the snapshot sent (its guid, the identity a receiver checks), records
 * in ascending offset order (WRITE: data; FREE: a range that reads as
 * zeros) and an END record with the record count and a checksum of every
 * byte before it; each record has its own checksum too, seeded with the
 * snapshot's guid and its index, so a record from elsewhere or out of
 * place does not verify.
 *
 * Send walks the snapshot's tree.  A full stream walks all of it
 * (holes need nothing: the receiver starts from an empty volume).  An
 * incremental one from an older snapshot F of the same volume walks it
 * pruned by birth (zv_dmu_walk_since_ind): a pointer born in F's txg or
 * before is F's too, with everything under it, so only the blocks born
 * between F and the snapshot are read, and each data block met is a
 * WRITE.  A range that was data in F and is a hole now shows as a hole
 * pointer in an indirect block rewritten after F (the free rewrote it),
 * never under a pruned one (unchanged since F).  Holes carry no birth
 * txg in this format, so a hole of a rewritten indirect block may also
 * have been a hole in F: every hole of every indirect block the walk
 * reads is sent as FREE (a root that is a hole: the whole volume), which
 * is exact in what the receiver ends with, and costs at most the holes
 * of the blocks read anyway.  The walk meets an indirect block before
 * its children, its holes go to a queue sorted by offset, and each
 * queued range is sent when the walk has passed it, so records stay in
 * ascending order; adjacent data blocks join into WRITEs of up to 1 MiB
 * and adjacent holes into one FREE.  A compressed block goes as it is
 * stored, a WRITE_STORED record of its own (the walk reads data blocks
 * stored, not decompressed); the receiver decompresses it, checked, and
 * writes the data.  The diff is the same walk without
 * reading data blocks, the ranges given to a callback.
 *
 * Receive applies records to a volume it holds (no open meanwhile) and
 * ends with a snapshot carrying the sent guid, so a later incremental
 * from it applies.  Nothing half-made survives: the volume's record
 * carries ZV_DR_F_RECV_INCOMPLETE (ds_recv) from the txg before its
 * first received write until the txg of that snapshot, which clears it
 * (snap.c).  A failure destroys the new volume (full stream) or rolls
 * the target back to its newest snapshot, the stream's base
 * (incremental); a crash leaves the flag, and the next read-write import
 * does the same (zv_recv_recover).  An incremental receive needs the
 * target unchanged since that snapshot (its root is the snapshot's), so
 * the rollback loses nothing but the stream's part.
 *
 * Locking: the datasets are held (zv_dsdir_hold, or ds_held and ds_recv
 * set under dd_lock by the receive) for the whole operation, so no
 * destroy, rollback or open comes between; the walks read the on-disk
 * trees of snapshots (immutable) or of a held, closed volume.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "send.h"
#include "pool_impl.h"
#include "snap.h"
#include "txg.h"
#include "zio.h"
#include "compress.h"

#define F ZV_INDIRECT_FANOUT

/* ---- reading ---- */

/* Exactly len bytes, else -EIO for a stream that ends early. */
static int
send_rd_fill (zv_stream_rd_t *rd, void *buf, size_t len, const char *what)
{
  size_t got = 0;

  while (got < len) {
    int64_t n = rd->rd_read (rd->rd_arg, (uint8_t *) buf + got, len - got);
    if (n < 0) {
      zv_error ("stream: reading %s at byte %" PRIu64 " failed: %s", what,
                rd->rd_pos + got, strerror ((int) -n));
      return (int) n;
    }
    if (n == 0) {
      zv_error ("stream: truncated at byte %" PRIu64 " (in %s)",
                rd->rd_pos + got, what);
      return -EIO;
    }
    ZV_VERIFY3U ((uint64_t) n, <=, len - got);
    got += (size_t) n;
  }
  rd->rd_pos += len;
  return 0;
}

/* A name field: valid, NUL-terminated and NUL-padded (empty if allowed). */
static bool
send_name_ok (const char *n, bool empty_ok)
{
  const char *nul = memchr (n, '\0', ZV_NAME_MAX);

  if (nul == NULL)
    return false;
  for (const char *c = nul; c < n + ZV_NAME_MAX; c++)
    if (*c != '\0')
      return false;
  return (empty_ok && n[0] == '\0') || zv_dsdir_name_valid (n);
}

int
zv_stream_rd_begin (zv_stream_rd_t *rd, zv_stream_read_fn fn, void *arg)
{
  zv_stream_hdr_t *h = &rd->rd_hdr, copy;
  const char *bad = NULL;
  bool incr;
  int r;

  memset (rd, 0, sizeof *rd);
  rd->rd_read = fn;
  rd->rd_arg = arg;
  rd->rd_sum = zv_cksum_stream_new (ZV_STREAM_MAGIC);
  rd->rd_rsum = zv_cksum_stream_new (0);
  r = send_rd_fill (rd, h, sizeof *h, "the header");
  if (r < 0)
    return r;
  if (h->sh_magic != ZV_STREAM_MAGIC) {
    zv_error ("stream: not a volume stream (bad magic)");
    return -EIO;
  }
  if (h->sh_version != ZV_STREAM_VERSION
      && h->sh_version != ZV_STREAM_VERSION_1) {
    zv_error ("stream: version %" PRIu32 " (this reader knows versions %u "
              "and %u)", h->sh_version, ZV_STREAM_VERSION_1,
              ZV_STREAM_VERSION);
    return -EIO;
  }
  copy = *h;
  memset (&copy.sh_cksum, 0, sizeof copy.sh_cksum);
  zv_cksum_compute (&copy, sizeof copy, ZV_STREAM_MAGIC, &copy.sh_cksum);
  if (!zv_cksum_equal (&copy.sh_cksum, &h->sh_cksum)) {
    zv_error ("stream: the header's checksum does not verify");
    return -EIO;
  }
  incr = (h->sh_flags & ZV_STREAM_F_INCREMENTAL) != 0;
  for (size_t i = 0; i < sizeof h->sh_reserved / 8 && bad == NULL; i++)
    if (h->sh_reserved[i] != 0)
      bad = "reserved bytes";
  if (bad != NULL)
    ;
  else if ((h->sh_flags & ~ZV_STREAM_F_INCREMENTAL) != 0)
    bad = "flags (unknown bits)";
  else if (h->sh_to_guid == 0 || h->sh_to_txg == 0 || h->sh_to_id == 0)
    bad = "snapshot identity";
  else if (incr ? h->sh_from_guid == 0 || h->sh_from_txg == 0
           || h->sh_from_id == 0 || h->sh_from_txg >= h->sh_to_txg
           || h->sh_from_guid == h->sh_to_guid
           : h->sh_from_guid != 0 || h->sh_from_txg != 0 || h->sh_from_id != 0)
    bad = "base snapshot identity";
  else if (!zv_dsdir_volsize_valid (h->sh_volsize))
    bad = "volume size";
  else if (!zv_dsdir_blksz_valid (h->sh_volblocksize) || h->sh_pad != 0)
    bad = "volblocksize";
  else if (h->sh_est_bytes > h->sh_volsize)
    bad = "size estimate";
  else if (!send_name_ok (h->sh_volume, false)
           || !send_name_ok (h->sh_snap, false)
           || !send_name_ok (h->sh_from_snap, !incr)
           || (!incr && h->sh_from_snap[0] != '\0'))
    bad = "names";
  if (bad != NULL) {
    zv_error ("stream: invalid header: %s", bad);
    return -EIO;
  }
  zv_cksum_stream_update (rd->rd_sum, h, sizeof *h);
  rd->rd_buf = zv_alloc (ZV_STREAM_MAX_WRITE);
  rd->rd_dbuf = zv_alloc (h->sh_volblocksize);
  return 0;
}

int
zv_stream_rd_next (zv_stream_rd_t *rd, zv_stream_rec_t *rec,
                   const void **data)
{
  const zv_stream_hdr_t *h = &rd->rd_hdr;
  uint64_t at = rd->rd_pos, vs = h->sh_volsize, bs = h->sh_volblocksize;
  size_t plen;
  zv_stream_rec_t copy;
  zv_cksum_t c;
  const char *bad = NULL;
  int r;

  *data = NULL;
  if (rd->rd_ended)
    return 0;
  r = send_rd_fill (rd, rec, sizeof *rec, "a record");
  if (r < 0)
    return r;
  /* The payload's length, bounded before anything is read. */
  switch (rec->sr_type) {
  case ZV_SR_WRITE:
    if (rec->sr_length == 0 || rec->sr_length > ZV_STREAM_MAX_WRITE) {
      zv_error ("stream: record %" PRIu64 " (byte %" PRIu64 "): WRITE of %"
                PRIu64 " bytes (1 to %u)", rd->rd_seq, at, rec->sr_length,
                ZV_STREAM_MAX_WRITE);
      return -EIO;
    }
    plen = (size_t) rec->sr_length;
    break;
  case ZV_SR_WRITE_STORED: {
    uint32_t f = rec->sr_flags, ps = ZV_SR_STORED_PSIZE (f);
    unsigned alg = ZV_SR_STORED_ALG (f);
    if (h->sh_version < ZV_STREAM_VERSION || f >> 16 != 0
        || (alg != ZV_COMP_LZ4 && alg != ZV_COMP_ZSTD) || ps == 0
        || ps >= bs || rec->sr_length != bs) {
      zv_error ("stream: record %" PRIu64 " (byte %" PRIu64 "): a stored "
                "block of algorithm %u, %" PRIu32 " bytes for %" PRIu64
                " (a block of %" PRIu64 " stored in fewer whole 4 KiB "
                "units, lz4 or zstd, in a stream of version %u)", rd->rd_seq,
                at, alg, ps, rec->sr_length, bs, ZV_STREAM_VERSION);
      return -EIO;
    }
    plen = ps;
    break;
  }
  case ZV_SR_FREE: plen = 0; break;
  case ZV_SR_END: plen = sizeof (zv_cksum_t); break;
  default:
    zv_error ("stream: record %" PRIu64 " (byte %" PRIu64 "): unknown type %"
              PRIu32, rd->rd_seq, at, rec->sr_type);
    return -EIO;
  }
  if (plen > 0) {
    r = send_rd_fill (rd, rd->rd_buf, plen, "a record's payload");
    if (r < 0)
      return r;
  }
  copy = *rec;
  memset (&copy.sr_cksum, 0, sizeof copy.sr_cksum);
  zv_cksum_stream_reset (rd->rd_rsum, zv_stream_seed (h->sh_to_guid,
                                                      rd->rd_seq));
  zv_cksum_stream_update (rd->rd_rsum, &copy, sizeof copy);
  zv_cksum_stream_update (rd->rd_rsum, rd->rd_buf, plen);
  zv_cksum_stream_value (rd->rd_rsum, &c);
  if (!zv_cksum_equal (&c, &rec->sr_cksum)) {
    zv_error ("stream: record %" PRIu64 " (byte %" PRIu64 "): checksum does "
              "not verify", rd->rd_seq, at);
    return -EIO;
  }
  if (rec->sr_seq != rd->rd_seq
      || (rec->sr_flags != 0 && rec->sr_type != ZV_SR_WRITE_STORED))
    bad = "sequence number or flags";
  else if (rec->sr_type == ZV_SR_END) {
    zv_cksum_stream_value (rd->rd_sum, &c);
    if (rec->sr_offset != 0 || rec->sr_length != rd->rd_seq)
      bad = "END: record count";
    else if (!zv_cksum_equal (&c, (const zv_cksum_t *) rd->rd_buf))
      bad = "END: the stream's checksum does not verify";
  }
  else if (rec->sr_offset % bs != 0 || rec->sr_offset < rd->rd_next_off
           || rec->sr_length == 0 || rec->sr_length > vs
           || rec->sr_offset > vs - rec->sr_length
           || (rec->sr_length % bs != 0
               && rec->sr_offset + rec->sr_length != vs))
    bad = "range (out of order, past the volume, or not aligned to its "
      "blocks)";
  if (bad != NULL) {
    zv_error ("stream: record %" PRIu64 " (byte %" PRIu64 "): invalid %s",
              rd->rd_seq, at, bad);
    return -EIO;
  }
  zv_cksum_stream_update (rd->rd_sum, rec, sizeof *rec);
  zv_cksum_stream_update (rd->rd_sum, rd->rd_buf, plen);
  rd->rd_seq++;
  if (rec->sr_type == ZV_SR_END) {
    rd->rd_ended = true;
    return 0;
  }
  rd->rd_next_off = rec->sr_offset + rec->sr_length;
  if (rec->sr_type == ZV_SR_WRITE_STORED) {
    /* Verified as sent; what it decompresses to is checked whole (a
     * hostile payload is refused here, never written). */
    char what[64];
    snprintf (what, sizeof what, "stream: record %" PRIu64,
              rd->rd_seq - 1);
    if (zv_comp_decompress (ZV_SR_STORED_ALG (rec->sr_flags), rd->rd_buf,
                            (uint32_t) plen, rd->rd_dbuf, (uint32_t) bs,
                            what) < 0)
      return -EIO;
    rec->sr_type = ZV_SR_WRITE;
    rec->sr_flags = 0;
    *data = rd->rd_dbuf;
    return 1;
  }
  *data = rec->sr_type == ZV_SR_WRITE ? rd->rd_buf : NULL;
  return 1;
}

void
zv_stream_rd_end (zv_stream_rd_t *rd)
{
  zv_cksum_stream_free (rd->rd_sum);
  zv_cksum_stream_free (rd->rd_rsum);
  free (rd->rd_buf);
  free (rd->rd_dbuf);
  memset (rd, 0, sizeof *rd);
}

/* ---- the walk and the records it makes ---- */

typedef struct send_range {
  uint64_t sg_off, sg_len;
} send_range_t;

typedef struct send_out {
  zv_pool_t *so_pool;
  const zv_stream_io_t *so_io;   /* a stream, or (NULL) a diff: */
  zv_diff_fn so_diff;
  void *so_diff_arg;
  bool so_incr;
  uint64_t so_volsize;
  uint32_t so_blksz;
  uint64_t so_nblocks;
  uint64_t so_guid;              /* the records' checksum seed */
  zv_cksum_stream_t *so_sum, *so_rsum;
  uint64_t so_seq;
  uint64_t so_next;              /* every record from here is past it */
  uint8_t *so_wbuf;              /* the pending WRITE's data */
  uint64_t so_woff, so_wlen;
  uint64_t so_foff, so_flen;     /* the pending FREE */
  send_range_t *so_holes;        /* queued, sorted, from so_hhead */
  size_t so_nholes, so_hhead, so_capholes;
  uint64_t so_done, so_total;    /* WRITE bytes, for the progress */
  uint64_t so_nread;             /* data blocks the walk read */
} send_out_t;

static int
send_put (send_out_t *so, const void *buf, size_t len)
{
  const zv_stream_io_t *io = so->so_io;
  size_t done = 0;

  zv_cksum_stream_update (so->so_sum, buf, len);
  if (io->sio_write != NULL) {
    int r = io->sio_write (io->sio_arg, buf, len);
    if (r < 0)
      zv_error ("send: writing the stream failed: %s", strerror (-r));
    return r < 0 ? r : 0;
  }
  while (done < len) {
    ssize_t n = write (io->sio_fd, (const uint8_t *) buf + done, len - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      zv_error ("send: writing the stream failed: %s", strerror (e));
      return -e;
    }
    done += (size_t) n;
  }
  return 0;
}

/* One record with its payload (plen bytes at data). */
static int
send_record_flags (send_out_t *so, uint32_t type, uint32_t flags,
                   uint64_t off, uint64_t len, const void *data, size_t plen)
{
  zv_stream_rec_t rec = {
    .sr_type = type, .sr_flags = flags, .sr_seq = so->so_seq,
    .sr_offset = off, .sr_length = len,
  };
  int r;

  zv_cksum_stream_reset (so->so_rsum, zv_stream_seed (so->so_guid,
                                                      so->so_seq));
  zv_cksum_stream_update (so->so_rsum, &rec, sizeof rec);
  zv_cksum_stream_update (so->so_rsum, data, plen);
  zv_cksum_stream_value (so->so_rsum, &rec.sr_cksum);
  so->so_seq++;
  r = send_put (so, &rec, sizeof rec);
  if (r == 0 && plen > 0)
    r = send_put (so, data, plen);
  return r;
}

static int
send_record (send_out_t *so, uint32_t type, uint64_t off, uint64_t len,
             const void *data, size_t plen)
{
  return send_record_flags (so, type, 0, off, len, data, plen);
}

static int
send_flush (send_out_t *so)
{
  int r = 0;

  if (so->so_wlen > 0) {
    if (so->so_io == NULL)
      r = so->so_diff (so->so_diff_arg, so->so_woff, so->so_wlen,
                       ZV_DIFF_WRITTEN);
    else
      r = send_record (so, ZV_SR_WRITE, so->so_woff, so->so_wlen,
                       so->so_wbuf, (size_t) so->so_wlen);
    so->so_done += so->so_wlen;
    so->so_wlen = 0;
    if (r == 0 && so->so_io && so->so_io->sio_progress)
      so->so_io->sio_progress (so->so_io->sio_progress_arg, so->so_done,
                              ZV_MAX (so->so_done, so->so_total));
  }
  else if (so->so_flen > 0) {
    r = so->so_io == NULL
      ? so->so_diff (so->so_diff_arg, so->so_foff, so->so_flen,
                     ZV_DIFF_FREED)
      : send_record (so, ZV_SR_FREE, so->so_foff, so->so_flen, NULL, 0);
    so->so_flen = 0;
  }
  return r;
}

static int
send_free (send_out_t *so, uint64_t off, uint64_t len)
{
  int r = 0;

  ZV_VERIFY3U (off, >=, so->so_next);
  if (so->so_wlen > 0 || (so->so_flen > 0 && so->so_foff + so->so_flen != off))
    r = send_flush (so);
  if (so->so_flen == 0)
    so->so_foff = off;
  so->so_flen += len;
  so->so_next = off + len;
  return r;
}

/* The queued holes that start before off (all of them: UINT64_MAX). */
static int
send_holes_before (send_out_t *so, uint64_t off)
{
  int r = 0;

  while (r == 0 && so->so_hhead < so->so_nholes
         && so->so_holes[so->so_hhead].sg_off < off) {
    send_range_t g = so->so_holes[so->so_hhead++];
    r = send_free (so, g.sg_off, g.sg_len);
  }
  if (so->so_hhead == so->so_nholes)
    so->so_hhead = so->so_nholes = 0;
  return r;
}

static void
send_queue_hole (send_out_t *so, uint64_t off, uint64_t len)
{
  size_t i = so->so_nholes;

  ZV_VERIFY3U (off, >=, so->so_next);
  ZV_GROW (so->so_holes, so->so_nholes, so->so_capholes, 64);
  while (i > so->so_hhead && so->so_holes[i - 1].sg_off > off)
    i--;
  memmove (&so->so_holes[i + 1], &so->so_holes[i],
           (so->so_nholes - i) * sizeof *so->so_holes);
  so->so_holes[i] = (send_range_t) { off, len };
  so->so_nholes++;
}

static int
send_data (send_out_t *so, uint64_t off, const void *data, uint64_t len)
{
  int r = send_holes_before (so, off);

  ZV_VERIFY3U (off, >=, so->so_next);
  if (r == 0 && (so->so_flen > 0
                 || (so->so_wlen > 0
                     && (so->so_woff + so->so_wlen != off
                         || (so->so_io != NULL
                             && so->so_wlen + len > ZV_STREAM_MAX_WRITE)))))
    r = send_flush (so);
  if (r != 0)
    return r;
  if (so->so_wlen == 0)
    so->so_woff = off;
  if (so->so_io != NULL)
    memcpy (so->so_wbuf + so->so_wlen, data, (size_t) len);
  so->so_wlen += len;
  so->so_next = off + len;
  return 0;
}

/*
 * A compressed block, as the walk read it (stored): a WRITE_STORED of its
 * stored bytes, the pending records sent first (records stay in order).
 * The volume's last block, when the volume ends inside it, goes as the
 * WRITE of its part instead (a stored block is a whole one).
 */
static int
send_stored (send_out_t *so, const zv_blkptr_t *bp, uint64_t blkid,
             const void *data)
{
  uint64_t bs = so->so_blksz, off = blkid * bs;
  int r;

  if (off + bs > so->so_volsize) {
    uint8_t *d = zv_buf_get (bs);
    r = zv_comp_decompress (bp->bp_comp, data, bp->bp_psize, d,
                            (uint32_t) bs, "send");
    if (r == 0)
      r = send_data (so, off, d, so->so_volsize - off);
    zv_buf_put (d, bs);
    return r;
  }
  r = send_holes_before (so, off);
  if (r == 0 && (so->so_wlen > 0 || so->so_flen > 0))
    r = send_flush (so);
  if (r == 0)
    r = send_record_flags (so, ZV_SR_WRITE_STORED, bp->bp_comp
                           | (bp->bp_psize / ZV_SECTOR) << 8, off, bs, data,
                           bp->bp_psize);
  so->so_next = off + bs;
  so->so_done += bs;
  if (r == 0 && so->so_io->sio_progress)
    so->so_io->sio_progress (so->so_io->sio_progress_arg, so->so_done,
                            ZV_MAX (so->so_done, so->so_total));
  return r;
}

static int
send_walk_cb (void *arg, const zv_blkptr_t *bp, unsigned level,
              uint64_t blkid, const void *data)
{
  send_out_t *so = arg;
  uint64_t bs = so->so_blksz;

  if (level > 0) {
    const zv_blkptr_t *e = data;
    uint64_t span = 1;

    if (!so->so_incr)
      return 0;
    for (unsigned l = 1; l < level; l++)
      span *= F;
    for (uint64_t i = 0; i < F; i++) {
      uint64_t first = (blkid * F + i) * span;
      if (first >= so->so_nblocks)
        break;
      if (zv_bp_is_hole (&e[i]))
        send_queue_hole (so, first * bs,
                         ZV_MIN ((first + span) * bs, so->so_volsize)
                         - first * bs);
    }
    return 0;
  }
  if (blkid >= so->so_nblocks) {
    zv_error ("send: data block %" PRIu64 " is past the volume's end",
              blkid);
    return -EIO;
  }
  if (data != NULL)
    so->so_nread++;
  if (data != NULL && bp->bp_comp != 0)
    return send_stored (so, bp, blkid, data);
  return send_data (so, blkid * bs, data,
                    ZV_MIN (bs, so->so_volsize - blkid * bs));
}

/* The walk of 'to' (its tree dn) since 'from_txg' (0: all of it). */
static int
send_walk (send_out_t *so, const zv_dnode_phys_t *dn, uint64_t from_txg)
{
  int r = 0;

  so->so_nblocks = zv_dsdir_nblocks (so->so_volsize, so->so_blksz);
  if (so->so_incr && zv_bp_is_hole (&dn->dn_root))
    r = send_free (so, 0, so->so_volsize);
  else
    r = zv_dmu_walk_since_ind (&so->so_pool->p_spa, ZV_OBJ_VOLUME, dn,
                               so->so_io != NULL, true, from_txg,
                               send_walk_cb, so);
  if (r == 0)
    r = send_holes_before (so, UINT64_MAX);
  if (r == 0)
    r = send_flush (so);
  return r;
}

/* ---- naming ---- */

/* Hold snapshot 'name' (for 'what' as the message says), or -errno. */
static int
send_hold_snap (zv_pool_t *p, const char *name, const char *what,
                zv_pool_ds_t **dsp)
{
  char shown[8 * ZV_NAME_MAX];
  int r = zv_dsdir_hold (p, name, dsp);

  if (r < 0)
    return r;
  if (!zv_dsdir_is_snapshot (*dsp)) {
    zv_str_printable (name, 2 * ZV_NAME_MAX, shown, sizeof shown);
    zv_error ("%s '%s' is a volume, not a snapshot (VOL@SNAP): take a "
              "snapshot of it first", what, shown);
    zv_dsdir_rele (*dsp);
    *dsp = NULL;
    return -EINVAL;
  }
  return 0;
}

/* 'from' (a snapshot) is an older snapshot of the volume 'to' is of (to:
 * a snapshot, or the volume itself). */
static int
send_check_pair (zv_pool_ds_t *from, zv_pool_ds_t *to)
{
  char a[3 * ZV_NAME_MAX], b[3 * ZV_NAME_MAX];
  zv_pool_ds_t *vol = zv_dsdir_is_snapshot (to) ? to->ds_parent : to;

  zv_dsdir_fullname (from, a, sizeof a);
  zv_dsdir_fullname (to, b, sizeof b);
  if (from->ds_parent != vol) {
    zv_error ("'%s' and '%s' are not of the same volume", a, b);
    return -EINVAL;
  }
  if (from == to || (to != vol
                     && from->ds_creation_txg >= to->ds_creation_txg)) {
    zv_error ("'%s' is not older than '%s'", a, b);
    return -EINVAL;
  }
  return 0;
}

/* ---- send ---- */

int
zv_send (zv_pool_t *p, const char *snap, const char *from,
         const zv_stream_io_t *io)
{
  zv_pool_ds_t *to = NULL, *fr = NULL;
  send_out_t so = { .so_pool = p, .so_io = io };
  zv_stream_hdr_t h;
  zv_dnode_phys_t dn;
  char name[3 * ZV_NAME_MAX];
  int r;

  r = send_hold_snap (p, snap, "send: the snapshot", &to);
  if (r == 0 && from != NULL)
    r = send_hold_snap (p, from, "send: the base snapshot", &fr);
  if (r == 0 && fr != NULL)
    r = send_check_pair (fr, to);
  if (r < 0)
    goto out;
  memset (&h, 0, sizeof h);
  h.sh_magic = ZV_STREAM_MAGIC;
  h.sh_version = ZV_STREAM_VERSION;
  h.sh_flags = fr ? ZV_STREAM_F_INCREMENTAL : 0;
  h.sh_pool_guid = p->p_spa.spa_guid;
  h.sh_to_id = to->ds_id;
  h.sh_to_guid = to->ds_guid;
  h.sh_to_txg = to->ds_creation_txg;
  h.sh_volsize = to->ds_volsize;
  h.sh_volblocksize = to->ds_blksz;
  h.sh_creation_time = to->ds_creation_time;
  snprintf (h.sh_volume, sizeof h.sh_volume, "%s", to->ds_parent->ds_name);
  snprintf (h.sh_snap, sizeof h.sh_snap, "%s", to->ds_name);
  /* What the progress counts to: a full stream's data, or what the
   * snapshots after the base wrote (an upper bound: some of it may have
   * been overwritten again before 'to'). */
  pthread_mutex_lock (&p->p_dd.dd_lock);
  if (fr != NULL) {
    h.sh_from_id = fr->ds_id;
    h.sh_from_guid = fr->ds_guid;
    h.sh_from_txg = fr->ds_creation_txg;
    snprintf (h.sh_from_snap, sizeof h.sh_from_snap, "%s", fr->ds_name);
    for (zv_pool_ds_t *s = to; s != NULL && s != fr; s = s->ds_prev)
      h.sh_est_bytes += s->ds_pub_written;
  }
  else
    h.sh_est_bytes = atomic_load_explicit (&to->ds_referenced,
                                           memory_order_relaxed);
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  h.sh_est_bytes = ZV_MIN (h.sh_est_bytes, h.sh_volsize);
  zv_cksum_compute (&h, sizeof h, ZV_STREAM_MAGIC, &h.sh_cksum);

  so.so_incr = fr != NULL;
  so.so_volsize = to->ds_volsize;
  so.so_blksz = to->ds_blksz;
  so.so_guid = to->ds_guid;
  so.so_total = h.sh_est_bytes;
  so.so_sum = zv_cksum_stream_new (ZV_STREAM_MAGIC);
  so.so_rsum = zv_cksum_stream_new (0);
  so.so_wbuf = zv_alloc (ZV_STREAM_MAX_WRITE);
  zv_dmu_object_phys (&to->ds_obj, &dn);
  dn.dn_size = to->ds_volsize;
  r = send_put (&so, &h, sizeof h);
  if (r == 0)
    r = send_walk (&so, &dn, fr ? fr->ds_creation_txg : 0);
  if (r == 0) {
    zv_cksum_t c;
    uint64_t n = so.so_seq;
    zv_cksum_stream_value (so.so_sum, &c);
    r = send_record (&so, ZV_SR_END, 0, n, &c, sizeof c);
  }
  if (r == 0 && io->sio_progress)
    io->sio_progress (io->sio_progress_arg, so.so_done, so.so_done);
  zv_dsdir_fullname (to, name, sizeof name);
  if (r == 0)
    zv_info ("pool '%s': sent '%s'%s%s (%" PRIu64 " records, %" PRIu64
             " data bytes, %" PRIu64 " blocks read)", p->p_name, name,
             fr ? " from " : "", fr ? fr->ds_name : "", so.so_seq,
             so.so_done, so.so_nread);
  else
    zv_error ("pool '%s': send of '%s' failed: %s", p->p_name, name,
              strerror (r < 0 ? -r : EIO));
  zv_cksum_stream_free (so.so_sum);
  zv_cksum_stream_free (so.so_rsum);
  free (so.so_wbuf);
  free (so.so_holes);
 out:
  if (fr)
    zv_dsdir_rele (fr);
  if (to)
    zv_dsdir_rele (to);
  return r < 0 ? r : r > 0 ? -EIO : 0;
}

/* ---- diff ---- */

int
zv_diff (zv_pool_t *p, const char *from, const char *to, zv_diff_fn fn,
         void *arg)
{
  zv_pool_ds_t *fr = NULL, *t = NULL;
  send_out_t so = { .so_pool = p, .so_diff = fn, .so_diff_arg = arg,
                    .so_incr = true };
  zv_dnode_phys_t dn;
  int r;

  r = send_hold_snap (p, from, "diff: the older snapshot", &fr);
  /* A volume is held closed for the walk: its synced tree is all of it. */
  if (r == 0)
    r = zv_dsdir_hold (p, to, &t);
  if (r == 0)
    r = send_check_pair (fr, t);
  if (r == 0) {
    so.so_volsize = t->ds_volsize;
    so.so_blksz = t->ds_blksz;
    zv_dmu_object_phys (&t->ds_obj, &dn);
    dn.dn_size = t->ds_volsize;
    r = send_walk (&so, &dn, fr->ds_creation_txg);
  }
  free (so.so_holes);
  if (t)
    zv_dsdir_rele (t);
  if (fr)
    zv_dsdir_rele (fr);
  return r > 0 ? 0 : r;
}

/* ---- receive ---- */

typedef struct recv_fd {
  int rf_fd;
} recv_fd_t;

static int64_t
recv_read_fd (void *arg, void *buf, size_t len)
{
  recv_fd_t *f = arg;

  for (;;) {
    ssize_t n = read (f->rf_fd, buf, len);
    if (n < 0 && errno == EINTR)
      continue;
    return n < 0 ? -errno : n;
  }
}

/* Apply one record to the held volume, in txgs of bounded size. */
static int
recv_apply (zv_pool_t *p, zv_pool_ds_t *ds, const zv_stream_rec_t *rec,
            const void *data)
{
  zv_object_t *ob = &ds->ds_obj;
  uint64_t bs = ds->ds_blksz;
  uint64_t b = rec->sr_offset / bs;
  uint64_t e = (rec->sr_offset + rec->sr_length + bs - 1) / bs;

  while (b < e) {
    uint64_t n = rec->sr_type == ZV_SR_WRITE ? e - b
      : ZV_MIN (e - b, (uint64_t) 1 << 16);
    int r = 0;

    for (unsigned tries = 0;; tries++) {
      zv_txg_hold_t h;
      r = zv_txg_hold (p->p_txg, rec->sr_type == ZV_SR_WRITE
                       ? rec->sr_length : 0, &h);
      if (r < 0)
        return r;
      r = rec->sr_type == ZV_SR_WRITE
        ? zv_dmu_write_by_dnode (ob, rec->sr_offset, rec->sr_length, data,
                                 h.th_txg, NULL)
        : zv_dmu_free_by_dnode (ob, b, n, h.th_txg);
      zv_txg_rele (p->p_txg, &h);
      /* A full pool may have space on its way back (deferred frees). */
      if (r != -ENOSPC || tries >= 8 || !zv_pool_space_pending (p)
          || zv_txg_wait_synced (p->p_txg, zv_txg_open_txg (p->p_txg)) < 0)
        break;
    }
    if (r < 0) {
      zv_error ("receive into '%s': %s at %" PRIu64 "+%" PRIu64 " failed: "
                "%s", ds->ds_name, rec->sr_type == ZV_SR_WRITE ? "write"
                : "free", rec->sr_offset, rec->sr_length, strerror (-r));
      return r;
    }
    b += n;
  }
  return 0;
}

/* Set up the target: a new volume (full stream) or the existing one the
 * stream applies to, held and flagged in the open txg. */
static int
recv_target (zv_pool_t *p, const zv_stream_hdr_t *h, const char *vol,
             const char *snap, zv_pool_ds_t **dsp)
{
  bool incr = (h->sh_flags & ZV_STREAM_F_INCREMENTAL) != 0;
  zv_pool_ds_t *v;
  zv_dnode_phys_t a, b;
  zv_txg_hold_t th;
  int r;

  pthread_mutex_lock (&p->p_dd.dd_admin_lock);
  r = zv_txg_hold (p->p_txg, 0, &th);
  if (r < 0)
    goto out;
  if (!incr) {
    r = zv_dsdir_create_locked (p, vol, h->sh_volsize, h->sh_volblocksize,
                                0, zv_pool_default_ring (p), th.th_txg,
                                true, NULL, ZV_COMP_DEFAULT);
    if (r == 0) {
      pthread_mutex_lock (&p->p_dd.dd_lock);
      v = zv_dsdir_lookup_locked (p, ZV_DS_KIND_VOLUME, 0, vol);
      ZV_VERIFY (v != NULL);
      v->ds_recv = v->ds_held = true;
      *dsp = v;
      pthread_mutex_unlock (&p->p_dd.dd_lock);
    }
    zv_txg_rele (p->p_txg, &th);
    goto out;
  }
  pthread_mutex_lock (&p->p_dd.dd_lock);
  v = zv_dsdir_lookup_locked (p, ZV_DS_KIND_VOLUME, 0, vol);
  if (v == NULL) {
    zv_error ("receive: pool '%s' has no volume '%s' (an incremental "
              "stream applies to one)", p->p_name, vol);
    r = -ENOENT;
  }
  else if (v->ds_held || v->ds_recv) {
    zv_error ("receive: volume '%s' is open, or being received", vol);
    r = -EBUSY;
  }
  else if (v->ds_prev == NULL || v->ds_prev->ds_guid != h->sh_from_guid) {
    zv_error ("receive: the stream applies to a volume whose newest "
              "snapshot is '%s@%s' (guid %016" PRIx64 "); volume '%s''s "
              "newest is %s%s", h->sh_volume, h->sh_from_snap,
              h->sh_from_guid, vol, v->ds_prev ? v->ds_prev->ds_name
              : "none", v->ds_prev ? ", another" : "");
    r = -EINVAL;
  }
  else if (v->ds_volsize != h->sh_volsize || v->ds_blksz != h->sh_volblocksize) {
    zv_error ("receive: volume '%s' is not of the stream's size and block "
              "size", vol);
    r = -EINVAL;
  }
  else if (zv_dsdir_lookup_locked (p, ZV_DS_KIND_SNAPSHOT, v->ds_id, snap)) {
    zv_error ("receive: snapshot '%s@%s' exists already", vol, snap);
    r = -EEXIST;
  }
  else {
    zv_dmu_object_phys (&v->ds_obj, &a);
    zv_dmu_object_phys (&v->ds_prev->ds_obj, &b);
    if (memcmp (&a.dn_root, &b.dn_root, sizeof a.dn_root) != 0) {
      zv_error ("receive: volume '%s' changed since its snapshot '%s': "
                "roll it back to it first", vol, v->ds_prev->ds_name);
      r = -EBUSY;
    }
    else {
      v->ds_recv = v->ds_held = true;
      *dsp = v;
    }
  }
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  zv_txg_rele (p->p_txg, &th);
 out:
  pthread_mutex_unlock (&p->p_dd.dd_admin_lock);
  return r;
}

/* Undo a receive that failed: the new volume goes, or the target goes
 * back to its newest snapshot (which also clears the flag). */
static int
recv_undo (zv_pool_t *p, zv_pool_ds_t *v, bool incr)
{
  char name[3 * ZV_NAME_MAX];
  int r;

  pthread_mutex_lock (&p->p_dd.dd_lock);
  v->ds_held = false;
  if (incr)
    snprintf (name, sizeof name, "%s@%s", v->ds_name, v->ds_prev->ds_name);
  else
    snprintf (name, sizeof name, "%s", v->ds_name);
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  r = incr ? zv_snap_rollback (p, name, false) : zv_dsdir_destroy (p, name);
  if (r < 0)
    zv_error ("pool '%s': undoing the receive into '%s' failed (%s): the "
              "next import does it", p->p_name, name, strerror (-r));
  return r;
}

int
zv_recv (zv_pool_t *p, const char *target, const zv_stream_io_t *io)
{
  char shown[8 * ZV_NAME_MAX], vol[ZV_NAME_MAX], snap[ZV_NAME_MAX];
  char full[3 * ZV_NAME_MAX];
  recv_fd_t rf = { io->sio_fd };
  zv_stream_rd_t rd;
  zv_stream_rec_t rec;
  const void *data;
  zv_pool_ds_t *v = NULL;
  uint64_t done = 0, total;
  bool incr;
  int r;

  zv_str_printable (target ? target : "", 2 * ZV_NAME_MAX, shown,
                    sizeof shown);
  if ((r = zv_dsdir_admin_begin (p, "receive")) < 0)
    return r;
  r = zv_stream_rd_begin (&rd, io->sio_read ? io->sio_read : recv_read_fd,
                          io->sio_read ? io->sio_arg : &rf);
  if (r < 0)
    goto out;
  incr = (rd.rd_hdr.sh_flags & ZV_STREAM_F_INCREMENTAL) != 0;
  total = rd.rd_hdr.sh_est_bytes;
  if (target != NULL && zv_snap_split (target, vol, snap))
    ;
  else if (target != NULL && strnlen (target, ZV_NAME_MAX) < ZV_NAME_MAX) {
    snprintf (vol, sizeof vol, "%s", target);
    snprintf (snap, sizeof snap, "%s", rd.rd_hdr.sh_snap);
  }
  else
    vol[0] = '\0';
  if (!zv_dsdir_name_valid (vol) || !zv_dsdir_name_valid (snap)) {
    zv_error ("receive: '%s' is not a volume name (VOL, or VOL@SNAP to "
              "name the snapshot)", shown);
    r = -EINVAL;
    goto out;
  }
  r = recv_target (p, &rd.rd_hdr, vol, snap, &v);
  while (r == 0 && (r = zv_stream_rd_next (&rd, &rec, &data)) == 1) {
    r = recv_apply (p, v, &rec, data);
    if (rec.sr_type == ZV_SR_WRITE)
      done += rec.sr_length;
    if (r == 0 && io->sio_progress)
      io->sio_progress (io->sio_progress_arg, done, ZV_MAX (done, total));
  }
  snprintf (full, sizeof full, "%s@%s", vol, snap);
  if (r == 0)
    r = zv_snap_create_received (p, full, rd.rd_hdr.sh_to_guid);
  if (v != NULL && r == 0) {
    pthread_mutex_lock (&p->p_dd.dd_lock);
    v->ds_held = false;
    pthread_mutex_unlock (&p->p_dd.dd_lock);
  }
  else if (v != NULL)
    recv_undo (p, v, incr);
  if (r == 0 && io->sio_progress)
    io->sio_progress (io->sio_progress_arg, done, done);
  if (r == 0)
    zv_info ("pool '%s': received '%s' (%s stream, %" PRIu64 " records)",
             p->p_name, full, incr ? "incremental" : "full", rd.rd_seq);
 out:
  if (r < 0)
    zv_error ("pool '%s': receive into '%s' failed: %s; nothing of it is "
              "kept", p->p_name, shown, strerror (-r));
  zv_stream_rd_end (&rd);
  return r;
}

void
zv_recv_recover (zv_pool_t *p)
{
  for (;;) {
    char name[3 * ZV_NAME_MAX];
    zv_pool_ds_t *v = NULL;
    bool incr = false;

    pthread_mutex_lock (&p->p_dd.dd_lock);
    for (size_t i = 0; i < p->p_dd.dd_nds && v == NULL; i++)
      if (p->p_dd.dd_dss[i]->ds_recv && !p->p_dd.dd_dss[i]->ds_destroy)
        v = p->p_dd.dd_dss[i];
    if (v != NULL) {
      incr = v->ds_prev != NULL;
      v->ds_held = true;         /* recv_undo's, as after a failure */
      snprintf (name, sizeof name, "%s", v->ds_name);
    }
    pthread_mutex_unlock (&p->p_dd.dd_lock);
    if (v == NULL)
      return;
    zv_warn ("pool '%s': a receive into volume '%s' did not finish: %s",
             p->p_name, name, incr ? "rolling it back to its newest "
             "snapshot" : "destroying it");
    if (recv_undo (p, v, incr) < 0)
      return;
  }
}
