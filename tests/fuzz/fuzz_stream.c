/*
 * fuzz_stream: a send stream, as a receive reads it (core/send.c:
 * zv_stream_rd_begin and zv_stream_rd_next: hostile data).
 *
 * The input is one flags byte and the stream's bytes.  Unless the flags
 * say raw, the header's checksum, every record's and the END's count and
 * stream checksum are recomputed first (as a forger would), so a changed
 * field reaches the field checks instead of stopping at a checksum.
 * Checked: the reader never returns anything but a record, the END or
 * -EIO, and never reads past the input; every record it gives is a WRITE
 * or a FREE inside the volume, aligned to its blocks, after the one
 * before (ascending, no overlap), a WRITE at most 1 MiB with its data;
 * the END comes only after a header that names a valid volume, and with
 * the record count; a raw input whose bytes were changed after sealing
 * never passes (the seeds are sealed streams).
 */
#include <config.h>

#include "fuzz.h"
#include "send.h"

#define STREAM_F_RAW 0x1u

typedef struct fz_src {
  const uint8_t *fs_p;
  size_t fs_n, fs_pos;
} fz_src_t;

static int64_t
fz_src_read (void *arg, void *buf, size_t len)
{
  fz_src_t *s = arg;
  size_t n = ZV_MIN (len, s->fs_n - s->fs_pos);

  memcpy (buf, s->fs_p + s->fs_pos, n);
  s->fs_pos += n;
  return (int64_t) n;
}

/* Reseal in place: the header, then the records while they fit. */
static void
fz_reseal (uint8_t *b, size_t n)
{
  zv_stream_hdr_t h;
  zv_cksum_stream_t *sum, *rs;
  size_t pos = sizeof h;
  uint64_t seq = 0;

  if (n < sizeof h)
    return;
  memcpy (&h, b, sizeof h);
  memset (&h.sh_cksum, 0, sizeof h.sh_cksum);
  zv_cksum_compute (&h, sizeof h, ZV_STREAM_MAGIC, &h.sh_cksum);
  memcpy (b, &h, sizeof h);
  sum = zv_cksum_stream_new (ZV_STREAM_MAGIC);
  rs = zv_cksum_stream_new (0);
  zv_cksum_stream_update (sum, &h, sizeof h);
  while (pos + sizeof (zv_stream_rec_t) <= n) {
    zv_stream_rec_t r;
    uint64_t plen;

    memcpy (&r, b + pos, sizeof r);
    plen = r.sr_type == ZV_SR_WRITE ? r.sr_length
      : r.sr_type == ZV_SR_WRITE_STORED ? ZV_SR_STORED_PSIZE (r.sr_flags)
      : r.sr_type == ZV_SR_END ? sizeof (zv_cksum_t) : 0;
    if (plen > n - pos - sizeof r)
      break;
    if (r.sr_type == ZV_SR_END) {
      zv_cksum_t c;
      r.sr_length = seq;
      zv_cksum_stream_value (sum, &c);
      memcpy (b + pos + sizeof r, &c, sizeof c);
    }
    memset (&r.sr_cksum, 0, sizeof r.sr_cksum);
    zv_cksum_stream_reset (rs, zv_stream_seed (h.sh_to_guid, seq));
    zv_cksum_stream_update (rs, &r, sizeof r);
    zv_cksum_stream_update (rs, b + pos + sizeof r, (size_t) plen);
    zv_cksum_stream_value (rs, &r.sr_cksum);
    memcpy (b + pos, &r, sizeof r);
    zv_cksum_stream_update (sum, b + pos, sizeof r + (size_t) plen);
    pos += sizeof r + (size_t) plen;
    seq++;
  }
  zv_cksum_stream_free (sum);
  zv_cksum_stream_free (rs);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  (void) argc, (void) argv;
  fz_setup ();
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  fz_in_t in = fz_in (data, size);
  unsigned flags = (unsigned) fz_u8 (&in);
  uint8_t *b = malloc (in.fi_n ? in.fi_n : 1);
  fz_src_t src = { b, in.fi_n, 0 };
  zv_stream_rd_t rd;
  zv_stream_rec_t rec;
  const void *d;
  uint64_t next = 0, nrec = 0;
  int r;

  FZ_CHECK (b != NULL);
  memcpy (b, in.fi_p, in.fi_n);
  if (!(flags & STREAM_F_RAW))
    fz_reseal (b, in.fi_n);
  r = zv_stream_rd_begin (&rd, fz_src_read, &src);
  FZ_CHECK (r == 0 || r == -EIO);
  while (r == 0 && (r = zv_stream_rd_next (&rd, &rec, &d)) == 1) {
    const zv_stream_hdr_t *h = &rd.rd_hdr;
    FZ_CHECK (rec.sr_type == ZV_SR_WRITE || rec.sr_type == ZV_SR_FREE);
    FZ_CHECK (rec.sr_seq == nrec && rec.sr_flags == 0);
    FZ_CHECK (rec.sr_offset % h->sh_volblocksize == 0);
    FZ_CHECK (rec.sr_offset >= next && rec.sr_length > 0
              && rec.sr_offset + rec.sr_length <= h->sh_volsize);
    FZ_CHECK (rec.sr_length % h->sh_volblocksize == 0
              || rec.sr_offset + rec.sr_length == h->sh_volsize);
    FZ_CHECK (rec.sr_type == ZV_SR_FREE
              ? d == NULL : d != NULL
              && rec.sr_length <= ZV_STREAM_MAX_WRITE);
    next = rec.sr_offset + rec.sr_length;
    nrec++;
    r = 0;
  }
  FZ_CHECK (r == 0 || r == -EIO);
  FZ_CHECK (src.fs_pos <= src.fs_n);
  if (r == 0) {
    const zv_stream_hdr_t *h = &rd.rd_hdr;
    FZ_CHECK (rd.rd_ended && rd.rd_seq == nrec + 1);
    FZ_CHECK (h->sh_magic == ZV_STREAM_MAGIC
              && (h->sh_version == ZV_STREAM_VERSION
                  || h->sh_version == ZV_STREAM_VERSION_1));
    FZ_CHECK (h->sh_volsize > 0 && h->sh_volsize % 512 == 0
              && h->sh_volblocksize >= ZV_MIN_VOLBLOCKSIZE
              && h->sh_volblocksize <= ZV_MAX_VOLBLOCKSIZE);
    FZ_CHECK (h->sh_to_guid != 0
              && ((h->sh_flags & ZV_STREAM_F_INCREMENTAL)
                  ? h->sh_from_guid != 0 && h->sh_from_txg < h->sh_to_txg
                  : h->sh_from_guid == 0));
    /* A raw input that passes is a sealed stream: resealing changes
     * nothing in it. */
    if (flags & STREAM_F_RAW) {
      uint8_t *c = malloc (src.fs_pos ? src.fs_pos : 1);
      FZ_CHECK (c != NULL);
      memcpy (c, b, src.fs_pos);
      fz_reseal (c, src.fs_pos);
      FZ_CHECK (memcmp (c, b, src.fs_pos) == 0);
      free (c);
    }
  }
  zv_stream_rd_end (&rd);
  free (b);
  return 0;
}
