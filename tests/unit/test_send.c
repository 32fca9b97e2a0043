/*
 * test_send: send and receive of snapshots (core/send.c) through the
 * public API: full and incremental round trips into the same pool under
 * another name and into another pool, the bytes compared; an incremental
 * stream reads only what changed (device reads counted against the
 * volume's size) and carries the freed ranges; the changed ranges
 * between snapshots; damaged, truncated, forged and misfitting streams
 * refused with nothing left of them; a power cut during a receive leaves
 * nothing half-made after import; progress.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testlib.h"
#include "pool.h"
#include "alloc.h"
#include "txg.h"
#include "dev.h"
#include "send.h"
#include "powercut.h"

#define DEV_SIZE (256 * MiB)
#define VS (8 * MiB)
#define BS 16384u

/* ---- a stream in memory ---- */

typedef struct mbuf {
  uint8_t *mb_buf;
  size_t mb_len, mb_cap, mb_pos;
} mbuf_t;

static int
mb_write (void *arg, const void *buf, size_t len)
{
  mbuf_t *m = arg;

  while (m->mb_len + len > m->mb_cap) {
    m->mb_cap = m->mb_cap ? 2 * m->mb_cap : 1 << 20;
    m->mb_buf = realloc (m->mb_buf, m->mb_cap);
    assert_non_null (m->mb_buf);
  }
  memcpy (m->mb_buf + m->mb_len, buf, len);
  m->mb_len += len;
  return 0;
}

static int64_t
mb_read (void *arg, void *buf, size_t len)
{
  mbuf_t *m = arg;
  size_t n = ZV_MIN (len, m->mb_len - m->mb_pos);

  memcpy (buf, m->mb_buf + m->mb_pos, n);
  m->mb_pos += n;
  return (int64_t) n;
}

/* A reader that makes the pool sync every 512 KiB it hands out, so that
 * a receive spans many txgs (its flag, not one txg, must keep it whole). */
typedef struct mbuf_sync {
  mbuf_t *ms_m;
  zvol_pool_t *ms_pool;
  size_t ms_last;
} mbuf_sync_t;

static int64_t
mb_read_sync (void *arg, void *buf, size_t len)
{
  mbuf_sync_t *s = arg;

  if (s->ms_m->mb_pos - s->ms_last >= 512 * 1024) {
    s->ms_last = s->ms_m->mb_pos;
    (void) zv_pool_sync (s->ms_pool);
  }
  return mb_read (s->ms_m, buf, len);
}

static zvol_stream_io_t
mb_io (mbuf_t *m)
{
  return (zvol_stream_io_t) { .sio_fd = -1, .sio_write = mb_write,
                              .sio_read = mb_read, .sio_arg = m };
}

static void
mb_free (mbuf_t *m)
{
  free (m->mb_buf);
  memset (m, 0, sizeof *m);
}

/* ---- pools and volumes ---- */

static zvol_pool_t *
sd_new_pool (char *path, size_t len, const char *name, bool with_v)
{
  const char *dev = tl_path (path, len, name);
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  zvol_volume_params_t vp = { .vp_size = VS, .vp_blocksize = BS };

  assert_int_equal (tl_sparse_file (dev, DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, 0, true);
  pc.pc_name = name;
  assert_int_equal (zvol_pool_open (&pc, &p), 0);
  if (with_v)
    assert_int_equal (zvol_volume_create (p, "v", &vp), 0);
  return p;
}

static void
sd_trim (zvol_pool_t *p, const char *name, uint64_t off, uint64_t len)
{
  zvol_t *zv = tl_ds_open (p, name);

  assert_int_equal (zvol_trim (zv, off, len, 0), 0);
  assert_int_equal (zvol_close (zv), 0);
}

/* The whole of a dataset's bytes (VS), to free(). */
static uint8_t *
sd_read_all (zvol_pool_t *p, const char *name)
{
  zvol_t *zv = tl_ds_open (p, name);
  uint8_t *b = malloc (VS);

  assert_non_null (b);
  assert_int_equal (zvol_size (zv), VS);
  for (uint64_t off = 0; off < VS; off += MiB)
    assert_int_equal (zvol_read (zv, b + off, off, MiB), 0);
  assert_int_equal (zvol_close (zv), 0);
  return b;
}

/* Datasets a and b (of pools pa and pb) hold the same bytes. */
static void
sd_assert_same (zvol_pool_t *pa, const char *a, zvol_pool_t *pb,
                const char *b)
{
  uint8_t *x = sd_read_all (pa, a), *y = sd_read_all (pb, b);

  tl_assert_same (y, x, VS, 0, b);
  free (x);
  free (y);
}

static size_t
sd_count (zvol_pool_t *p)
{
  zvol_volume_info_t vi[64];

  return zvol_dataset_list (p, ZVOL_LIST_VOLUMES | ZVOL_LIST_SNAPSHOTS, vi,
                            64);
}

/* Bytes allocated once every deferred free is applied. */
static uint64_t
sd_allocated (zvol_pool_t *p)
{
  assert_int_equal (zv_pool_sync (p), 0);
  for (int i = 0; i < 3; i++) {
    zv_txg_hold_t h;
    assert_int_equal (zv_txg_hold (zv_pool_txg (p), 0, &h), 0);
    zv_txg_rele (zv_pool_txg (p), &h);
    assert_int_equal (zv_txg_wait_synced (zv_pool_txg (p), h.th_txg), 0);
  }
  return tl_alloc_space (zv_pool_spa (p)->spa_alloc).as_allocated;
}

static void
sd_assert_near (uint64_t got, uint64_t want, const char *what)
{
  uint64_t d = got > want ? got - want : want - got;

  if (d > 64 * 1024)
    fail_msg ("%s: %" PRIu64 " bytes allocated, expected about %" PRIu64,
              what, got, want);
}

static void
sd_send (zvol_pool_t *p, const char *snap, const char *from, mbuf_t *m)
{
  zvol_stream_io_t io = mb_io (m);

  memset (m, 0, sizeof *m);
  assert_int_equal (zvol_send (p, snap, from, &io), 0);
}

static int
sd_recv (zvol_pool_t *p, const char *target, mbuf_t *m)
{
  zvol_stream_io_t io = mb_io (m);

  m->mb_pos = 0;
  return zvol_receive (p, target, &io);
}

/* Device reads of the pool's one device so far. */
static uint64_t
sd_reads (zvol_pool_t *p)
{
  zv_dev_stats_t st;

  zv_dev_get_stats (zv_pool_spa (p)->spa_devs[0], &st);
  return st.ds_reads;
}

/* ---- the changed ranges ---- */

typedef struct drange {
  uint64_t off, len;
  unsigned kind;
} drange_t;

typedef struct dlist {
  drange_t v[256];
  size_t n;
} dlist_t;

static int
diff_cb (void *arg, uint64_t off, uint64_t len, unsigned kind)
{
  dlist_t *d = arg;

  if (d->n > 0)
    assert_true (off >= d->v[d->n - 1].off + d->v[d->n - 1].len);
  assert_true (d->n < 256);
  d->v[d->n++] = (drange_t) { off, len, kind };
  return 0;
}

/* ---- tests ---- */

/* A volume with data and holes: two patterns over it. */
static void
sd_fill_some (zvol_pool_t *p, const char *v)
{
  tl_ds_write (p, v, 0, 3 * BS, 0x11);
  tl_ds_write (p, v, 1 * MiB + 512, 100000, 0x12);
  tl_ds_write (p, v, 5 * MiB, 2 * MiB, 0x13);
  tl_ds_write (p, v, VS - BS, BS, 0x14);
}

/* A full stream into the same pool under another name: the same bytes,
 * and the snapshot named as the sent one. */
static void
test_full_same_pool (void **state)
{
  char path[512];
  zvol_pool_t *p = sd_new_pool (path, sizeof path, "one", true);
  mbuf_t m;

  (void) state;
  sd_fill_some (p, "v");
  assert_int_equal (zvol_snapshot_create (p, "v@s1"), 0);
  tl_ds_write (p, "v", 0, MiB, 0x99);          /* after the snapshot: not sent */
  sd_send (p, "v@s1", NULL, &m);
  assert_int_equal (sd_recv (p, "w", &m), 0);
  assert_true (tl_ds_find (p, "w", NULL) && tl_ds_find (p, "w@s1", NULL));
  sd_assert_same (p, "v@s1", p, "w");
  sd_assert_same (p, "v@s1", p, "w@s1");
  /* The received volume is a volume like any other. */
  tl_ds_write (p, "w", 0, BS, 0x55);
  /* Another name for the snapshot: "VOL@SNAP". */
  assert_int_equal (sd_recv (p, "x@copy", &m), 0);
  assert_true (tl_ds_find (p, "x@copy", NULL) && !tl_ds_find (p, "x@s1", NULL));
  sd_assert_same (p, "v@s1", p, "x@copy");
  mb_free (&m);
  /* Survives an export and an import with the full walk. */
  assert_int_equal (zvol_pool_close (p), 0);
  p = tl_import (path, true);
  sd_assert_same (p, "v@s1", p, "x");
  assert_int_equal (zvol_pool_close (p), 0);
}

/* Full then incremental streams into another pool: each step gives the
 * same bytes, the freed ranges included, and the chain goes on. */
static void
test_incremental_other_pool (void **state)
{
  char pa[512], pb[512];
  zvol_pool_t *a = sd_new_pool (pa, sizeof pa, "src", true);
  zvol_pool_t *b = sd_new_pool (pb, sizeof pb, "dst", false);
  mbuf_t m;

  (void) state;
  sd_fill_some (a, "v");
  assert_int_equal (zvol_snapshot_create (a, "v@s1"), 0);
  sd_send (a, "v@s1", NULL, &m);
  assert_int_equal (sd_recv (b, "v", &m), 0);
  mb_free (&m);
  /* Overwrites, new data, a trim inside data, a whole MiB trimmed. */
  tl_ds_write (a, "v", BS, BS, 0x21);
  tl_ds_write (a, "v", 3 * MiB, 300000, 0x22);
  sd_trim (a, "v", 5 * MiB + 2 * BS, 3 * BS);
  sd_trim (a, "v", 6 * MiB, MiB);
  assert_int_equal (zvol_snapshot_create (a, "v@s2"), 0);
  sd_send (a, "v@s2", "v@s1", &m);
  assert_int_equal (sd_recv (b, "v", &m), 0);
  mb_free (&m);
  sd_assert_same (a, "v@s2", b, "v");
  sd_assert_same (a, "v@s2", b, "v@s2");
  sd_assert_same (a, "v@s1", b, "v@s1");
  /* A third step: the whole volume trimmed, then a little written. */
  sd_trim (a, "v", 0, VS);
  tl_ds_write (a, "v", 4 * MiB, BS, 0x23);
  assert_int_equal (zvol_snapshot_create (a, "v@s3"), 0);
  sd_send (a, "v@s3", "v@s2", &m);
  assert_int_equal (sd_recv (b, "v@third", &m), 0);
  mb_free (&m);
  sd_assert_same (a, "v@s3", b, "v@third");
  /* An incremental over two steps onto a copy at s1. */
  sd_send (a, "v@s1", NULL, &m);
  assert_int_equal (sd_recv (b, "u", &m), 0);
  mb_free (&m);
  sd_send (a, "v@s3", "v@s1", &m);
  assert_int_equal (sd_recv (b, "u", &m), 0);
  mb_free (&m);
  sd_assert_same (a, "v@s3", b, "u");
  assert_int_equal (zvol_pool_close (b), 0);
  b = tl_import (pb, true);
  sd_assert_same (a, "v@s3", b, "v");
  assert_int_equal (zvol_pool_close (a), 0);
  assert_int_equal (zvol_pool_close (b), 0);
}

/* An incremental stream reads only the blocks born after its base: a
 * volume written whole (512 blocks), three blocks changed, a block
 * trimmed; the device reads, the stream and the diff show it. */
static void
test_incremental_reads_changes (void **state)
{
  char path[512];
  zvol_pool_t *p = sd_new_pool (path, sizeof path, "cnt", true);
  uint64_t r0, full_reads, incr_reads;
  mbuf_t m;
  dlist_t d = { .n = 0 };

  (void) state;
  for (uint64_t off = 0; off < VS; off += MiB)
    tl_ds_write (p, "v", off, MiB, 0x31);
  assert_int_equal (zvol_snapshot_create (p, "v@a"), 0);
  tl_ds_write (p, "v", 7 * BS, BS, 0x32);
  tl_ds_write (p, "v", 300 * BS, BS, 0x33);
  tl_ds_write (p, "v", 511 * BS, BS, 0x34);
  assert_int_equal (zvol_snapshot_create (p, "v@b"), 0);
  assert_int_equal (zv_pool_sync (p), 0);

  r0 = sd_reads (p);
  sd_send (p, "v@b", NULL, &m);
  full_reads = sd_reads (p) - r0;
  mb_free (&m);
  r0 = sd_reads (p);
  sd_send (p, "v@b", "v@a", &m);
  incr_reads = sd_reads (p) - r0;
  fprintf (stderr, "  device reads: full stream %" PRIu64 ", incremental %"
           PRIu64 " (volume: %u blocks)\n", full_reads, incr_reads,
           (unsigned) (VS / BS));
  assert_true (full_reads >= VS / BS);
  /* 3 data blocks, the level-1 blocks above them (3 of 3: the blocks
   * are 7, 300 and 511 of 255 per level-1 block) and the root. */
  assert_true (incr_reads <= 3 + 3 + 1);
  /* 512 header bytes, three WRITEs of one block, the END. */
  assert_int_equal (m.mb_len, 512 + 3 * (48 + BS) + 48 + 16);
  mb_free (&m);

  assert_int_equal (zvol_diff (p, "v@a", "v@b", diff_cb, &d), 0);
  assert_int_equal (d.n, 3);
  assert_true (d.v[0].off == 7 * BS && d.v[0].len == BS
               && d.v[0].kind == ZVOL_DIFF_WRITTEN);
  assert_true (d.v[1].off == 300 * BS && d.v[2].off == 511 * BS);
  /* A trimmed block: the only hole of its rewritten indirect block. */
  sd_trim (p, "v", 100 * BS, BS);
  d.n = 0;
  assert_int_equal (zvol_diff (p, "v@b", "v", diff_cb, &d), 0);
  assert_int_equal (d.n, 1);
  assert_true (d.v[0].off == 100 * BS && d.v[0].len == BS
               && d.v[0].kind == ZVOL_DIFF_FREED);
  /* The volume open: busy. */
  zvol_t *zv = tl_ds_open (p, "v");
  tl_log_reset (true);
  assert_int_equal (zvol_diff (p, "v@b", "v", diff_cb, &d), -EBUSY);
  tl_log_reset (false);
  assert_int_equal (zvol_close (zv), 0);
  assert_int_equal (zvol_pool_close (p), 0);
}

/* Re-seal a stream after a test changed it: each record's checksum, then
 * the END's count and stream checksum, as a forger would. */
static void
sd_reseal (mbuf_t *m)
{
  zv_stream_hdr_t *h = (zv_stream_hdr_t *) m->mb_buf;
  zv_cksum_stream_t *sum = zv_cksum_stream_new (ZV_STREAM_MAGIC);
  zv_cksum_stream_t *rs = zv_cksum_stream_new (0);
  size_t pos = sizeof *h;
  uint64_t seq = 0;

  zv_cksum_stream_update (sum, h, sizeof *h);
  while (pos < m->mb_len) {
    zv_stream_rec_t *r = (zv_stream_rec_t *) (m->mb_buf + pos);
    size_t plen = r->sr_type == ZV_SR_WRITE ? (size_t) r->sr_length
      : r->sr_type == ZV_SR_WRITE_STORED ? ZV_SR_STORED_PSIZE (r->sr_flags)
      : r->sr_type == ZV_SR_END ? 16 : 0;
    if (r->sr_type == ZV_SR_END) {
      r->sr_length = seq;
      zv_cksum_stream_value (sum, (zv_cksum_t *) (r + 1));
    }
    memset (&r->sr_cksum, 0, sizeof r->sr_cksum);
    zv_cksum_stream_reset (rs, zv_stream_seed (h->sh_to_guid, seq));
    zv_cksum_stream_update (rs, r, sizeof *r);
    zv_cksum_stream_update (rs, r + 1, plen);
    zv_cksum_stream_value (rs, &r->sr_cksum);
    zv_cksum_stream_update (sum, r, sizeof *r + plen);
    pos += sizeof *r + plen;
    seq++;
  }
  zv_cksum_stream_free (sum);
  zv_cksum_stream_free (rs);
}

/* The offset of record i of a stream. */
static size_t
sd_rec_at (const mbuf_t *m, unsigned i)
{
  size_t pos = sizeof (zv_stream_hdr_t);

  for (unsigned k = 0; k < i; k++) {
    const zv_stream_rec_t *r = (const zv_stream_rec_t *) (m->mb_buf + pos);
    pos += sizeof *r + (r->sr_type == ZV_SR_WRITE ? r->sr_length
                        : r->sr_type == ZV_SR_WRITE_STORED
                        ? ZV_SR_STORED_PSIZE (r->sr_flags) : 0);
  }
  return pos;
}

/* A receive of m into target must fail with 'err' (and a message holding
 * 'says', unless NULL), leaving the pool's datasets as they were. */
static void
sd_refused (zvol_pool_t *p, const char *target, mbuf_t *m, int err,
            const char *says, const char *what)
{
  size_t before = sd_count (p);
  int r;

  tl_log_reset (true);
  r = sd_recv (p, target, m);
  if (r != err)
    fail_msg ("%s: receive returned %d, expected %d", what, r, err);
  assert_true (tl_log_errors () > 0);
  if (says != NULL && !tl_log_has (says))
    fail_msg ("%s: no message '%s'", what, says);
  tl_log_reset (false);
  assert_int_equal (sd_count (p), before);
}

/* Damaged streams: a byte flipped at many offsets, truncations at many
 * lengths, forged records (resealed: only the field checks stop them),
 * full and incremental; each refused, no new dataset, the target as it
 * was, no space lost. */
static void
test_damaged_stream (void **state)
{
  char path[512];
  zvol_pool_t *p = sd_new_pool (path, sizeof path, "dmg", true);
  uint64_t base, seed = tl_seed ("send damage");
  uint8_t *t_before;
  mbuf_t full, incr;
  unsigned nflip = 0, ntrunc = 0;

  (void) state;
  sd_fill_some (p, "v");
  assert_int_equal (zvol_snapshot_create (p, "v@s1"), 0);
  tl_ds_write (p, "v", 2 * MiB, 2 * MiB, 0x41);
  sd_trim (p, "v", 5 * MiB, MiB);
  assert_int_equal (zvol_snapshot_create (p, "v@s2"), 0);
  sd_send (p, "v@s1", NULL, &full);
  sd_send (p, "v@s2", "v@s1", &incr);
  /* The incremental's target: a copy at s1. */
  assert_int_equal (sd_recv (p, "t", &full), 0);
  t_before = sd_read_all (p, "t");
  base = sd_allocated (p);

  for (int k = 0; k < 2; k++) {
    mbuf_t *s = k == 0 ? &full : &incr;
    const char *target = k == 0 ? "n" : "t";
    size_t len = s->mb_len;

    /* Flips: every 8th header byte, then offsets spread over the rest,
     * the END's included. */
    for (size_t off = 0; off < len;
         off += off < 512 ? 8 : 1 + tl_rand (&seed) % (len / 40)) {
      uint8_t was = s->mb_buf[off];
      s->mb_buf[off] ^= (uint8_t) (1u << (tl_rand (&seed) % 8));
      sd_refused (p, target, s, -EIO, "stream", "a flipped byte");
      s->mb_buf[off] = was;
      nflip++;
    }
    for (unsigned i = 0; i < 16; i++) {
      size_t off = len - 1 - i;
      uint8_t was = s->mb_buf[off];
      s->mb_buf[off] ^= 0x80;
      sd_refused (p, target, s, -EIO, "stream", "a flip near the end");
      s->mb_buf[off] = was;
      nflip++;
    }
    /* Truncations: anywhere, and just before the end. */
    for (size_t cut = 0; cut < len;
         cut += cut < 600 ? 37 : 1 + tl_rand (&seed) % (len / 30)) {
      s->mb_len = cut;
      sd_refused (p, target, s, -EIO, "truncated", "a truncated stream");
      ntrunc++;
    }
    s->mb_len = len - 1;
    sd_refused (p, target, s, -EIO, "truncated", "one byte short");
    s->mb_len = len;
    assert_true (!tl_ds_find (p, "n", NULL) && !tl_ds_find (p, "t@s2", NULL));
  }
  fprintf (stderr, "  %u flipped bytes and %u truncations refused\n", nflip,
           ntrunc);

  /* Forged records, resealed so that only the field checks stop them. */
  mbuf_t f = { 0 };
  struct {
    const char *what, *says;
    unsigned rec;                /* which record to change */
    int field;                   /* 0 type, 1 offset, 2 seq, 3 swap */
    uint64_t value;
  } forge[] = {
    { "unknown type", "unknown type", 1, 0, 9 },
    { "unaligned offset", "not aligned", 1, 1, 512 },
    { "past the volume", "past the volume", 1, 1, VS },
    { "sequence", "sequence", 1, 2, 7 },
    { "out of order", "out of order", 0, 3, 0 },
  };
  for (size_t i = 0; i < sizeof forge / sizeof forge[0]; i++) {
    f.mb_len = f.mb_cap = full.mb_len;
    f.mb_buf = malloc (f.mb_len);
    assert_non_null (f.mb_buf);
    memcpy (f.mb_buf, full.mb_buf, f.mb_len);
    zv_stream_rec_t *r = (zv_stream_rec_t *) (f.mb_buf
                                              + sd_rec_at (&f, forge[i].rec));
    if (forge[i].field == 0)
      r->sr_type = (uint32_t) forge[i].value;
    else if (forge[i].field == 1)
      r->sr_offset = forge[i].value;
    else if (forge[i].field == 2)
      r->sr_seq = forge[i].value;
    else {
      /* Records 0 and 1 (two WRITEs) exchanged. */
      size_t a = sd_rec_at (&f, 0), b = sd_rec_at (&f, 1), c = sd_rec_at (&f, 2);
      uint8_t *tmp = malloc (c - a);
      assert_non_null (tmp);
      memcpy (tmp, f.mb_buf + b, c - b);
      memcpy (tmp + (c - b), f.mb_buf + a, b - a);
      memcpy (f.mb_buf + a, tmp, c - a);
      free (tmp);
      ((zv_stream_rec_t *) (f.mb_buf + sd_rec_at (&f, 0)))->sr_seq = 0;
      ((zv_stream_rec_t *) (f.mb_buf + sd_rec_at (&f, 1)))->sr_seq = 1;
    }
    sd_reseal (&f);
    sd_refused (p, "n", &f, -EIO, forge[i].says, forge[i].what);
    mb_free (&f);
  }
  /* The resealing itself is right: an unchanged copy is received. */
  f.mb_len = f.mb_cap = full.mb_len;
  f.mb_buf = malloc (f.mb_len);
  assert_non_null (f.mb_buf);
  memcpy (f.mb_buf, full.mb_buf, f.mb_len);
  sd_reseal (&f);
  assert_int_equal (sd_recv (p, "n", &f), 0);
  mb_free (&f);
  assert_int_equal (zvol_volume_destroy (p, "n@s1"), 0);
  assert_int_equal (zvol_volume_destroy (p, "n"), 0);

  /* Nothing was left: the target as it was, the space back. */
  uint8_t *t_after = sd_read_all (p, "t");
  tl_assert_same (t_after, t_before, VS, 0, "t");
  free (t_after);
  free (t_before);
  assert_true (!tl_ds_find (p, "t@s2", NULL));
  sd_assert_near (sd_allocated (p), base, "after the refused streams");
  /* And the good incremental still applies. */
  assert_int_equal (sd_recv (p, "t", &incr), 0);
  sd_assert_same (p, "v@s2", p, "t");
  mb_free (&full);
  mb_free (&incr);
  assert_int_equal (zvol_pool_close (p), 0);
}

/* Streams that do not fit, and sends that make no sense: clear errors,
 * nothing changed. */
static void
test_misfits (void **state)
{
  char path[512];
  zvol_pool_t *p = sd_new_pool (path, sizeof path, "fit", true);
  zvol_volume_params_t vp = { .vp_size = VS, .vp_blocksize = BS };
  zvol_stream_io_t io;
  mbuf_t full, incr, m;

  (void) state;
  sd_fill_some (p, "v");
  assert_int_equal (zvol_snapshot_create (p, "v@s1"), 0);
  tl_ds_write (p, "v", 0, BS, 0x51);
  assert_int_equal (zvol_snapshot_create (p, "v@s2"), 0);
  assert_int_equal (zvol_volume_create (p, "o", &vp), 0);
  assert_int_equal (zvol_snapshot_create (p, "o@x"), 0);
  sd_send (p, "v@s1", NULL, &full);
  sd_send (p, "v@s2", "v@s1", &incr);
  memset (&m, 0, sizeof m);
  io = mb_io (&m);
  tl_log_reset (true);
  /* Sends: a volume, a base of another volume, a base not older. */
  assert_int_equal (zvol_send (p, "v", NULL, &io), -EINVAL);
  assert_true (tl_log_has ("not a snapshot"));
  assert_int_equal (zvol_send (p, "v@s2", "o@x", &io), -EINVAL);
  assert_true (tl_log_has ("not of the same volume"));
  assert_int_equal (zvol_send (p, "v@s1", "v@s2", &io), -EINVAL);
  assert_true (tl_log_has ("not older"));
  assert_int_equal (zvol_send (p, "v@nope", NULL, &io), -ENOENT);
  assert_int_equal (m.mb_len, 0);
  tl_log_reset (false);
  /* Receives: a full stream onto an existing name; an incremental onto
   * no volume, onto another base, onto a changed volume, onto an open
   * one, onto a snapshot name taken; a bad target name. */
  sd_refused (p, "v", &full, -EEXIST, "already", "full onto a volume");
  sd_refused (p, "none", &incr, -ENOENT, "no volume", "no target");
  sd_refused (p, "o", &incr, -EINVAL, "applies to", "another base");
  assert_int_equal (sd_recv (p, "t", &full), 0);
  tl_ds_write (p, "t", VS / 2, BS, 0x52);
  sd_refused (p, "t", &incr, -EBUSY, "changed since", "a changed target");
  assert_int_equal (zvol_snapshot_rollback (p, "t@s1", false), 0);
  zvol_t *zv = tl_ds_open (p, "t");
  sd_refused (p, "t", &incr, -EBUSY, "open", "an open target");
  assert_int_equal (zvol_close (zv), 0);
  sd_refused (p, "t@s1", &incr, -EEXIST, "exists", "a snapshot name taken");
  sd_refused (p, "-bad", &full, -EINVAL, "not a volume name", "a bad name");
  /* The right one still applies. */
  assert_int_equal (sd_recv (p, "t", &incr), 0);
  sd_assert_same (p, "v@s2", p, "t");
  /* Read-only: refused. */
  assert_int_equal (zvol_pool_close (p), 0);
  {
    const char *dev = path;
    zvol_pool_config_t pc;
    tl_pool_cfg (&pc, &dev, 1, 0, false);
    pc.pc_readonly = true;
    assert_int_equal (zvol_pool_open (&pc, &p), 0);
  }
  sd_refused (p, "r", &full, -EROFS, "read-only", "a read-only pool");
  /* A send from a read-only pool works. */
  mb_free (&m);
  sd_send (p, "v@s2", "v@s1", &m);
  assert_int_equal (m.mb_len, incr.mb_len);
  assert_int_equal (memcmp (m.mb_buf, incr.mb_buf, m.mb_len), 0);
  mb_free (&m);
  mb_free (&full);
  mb_free (&incr);
  assert_int_equal (zvol_pool_close (p), 0);
}

typedef struct prog {
  uint64_t calls, last_done, last_total;
  bool monotonic;
} prog_t;

static void
prog_cb (void *arg, uint64_t done, uint64_t total)
{
  prog_t *g = arg;

  if (done < g->last_done || done > total)
    g->monotonic = false;
  g->calls++;
  g->last_done = done;
  g->last_total = total;
}

/* Progress: bytes done out of a total, never past it, equal at the end;
 * a stream to and from a file descriptor. */
static void
test_progress_fd (void **state)
{
  char path[512], spath[512];
  zvol_pool_t *p = sd_new_pool (path, sizeof path, "prg", true);
  prog_t gs = { .monotonic = true }, gr = { .monotonic = true };
  zvol_stream_io_t io = { .sio_progress = prog_cb };
  FILE *fp;

  (void) state;
  for (uint64_t off = 0; off < VS; off += 2 * MiB)
    tl_ds_write (p, "v", off, MiB, 0x61);
  assert_int_equal (zvol_snapshot_create (p, "v@s"), 0);
  tl_path (spath, sizeof spath, "stream");
  fp = fopen (spath, "w+");
  assert_non_null (fp);
  io.sio_fd = fileno (fp);
  io.sio_progress_arg = &gs;
  assert_int_equal (zvol_send (p, "v@s", NULL, &io), 0);
  assert_true (gs.monotonic && gs.calls >= 4);
  assert_int_equal (gs.last_done, VS / 2);
  assert_int_equal (gs.last_total, VS / 2);
  assert_int_equal (lseek (io.sio_fd, 0, SEEK_SET), 0);
  io.sio_progress_arg = &gr;
  assert_int_equal (zvol_receive (p, "w", &io), 0);
  assert_true (gr.monotonic && gr.calls >= 4);
  assert_int_equal (gr.last_done, VS / 2);
  assert_int_equal (gr.last_total, VS / 2);
  fclose (fp);
  sd_assert_same (p, "v@s", p, "w");
  assert_int_equal (zvol_pool_close (p), 0);
}

/* A power cut during a receive, at many device writes (the import with
 * the full walk; the pool syncs every 512 KiB of the stream, so the
 * receive spans many txgs): a full stream's volume is there whole with its
 * snapshot, or not at all; an incremental's target is at the new
 * snapshot or back at its base, never in between; no space lost. */
static void
test_powercut (void **state)
{
  uint64_t seed = tl_seed ("send powercut");
  char path[512];
  zvol_pool_t *p = sd_new_pool (path, sizeof path, "cut", true);
  uint64_t base;
  unsigned landed[2] = { 0 }, lost[2] = { 0 };
  mbuf_t full, incr;

  (void) state;
  sd_fill_some (p, "v");
  assert_int_equal (zvol_snapshot_create (p, "v@s1"), 0);
  tl_ds_write (p, "v", MiB, 3 * MiB, 0x71);
  sd_trim (p, "v", 5 * MiB, MiB);
  assert_int_equal (zvol_snapshot_create (p, "v@s2"), 0);
  sd_send (p, "v@s1", NULL, &full);
  sd_send (p, "v@s2", "v@s1", &incr);
  assert_int_equal (sd_recv (p, "t", &full), 0);
  base = sd_allocated (p);
  assert_int_equal (zvol_pool_close (p), 0);
  for (uint64_t n = 1; n <= 300; n += 23) {
    for (int op = 0; op < 2; op++) {
      pc_t *pc = pc_new (seed ^ (n * 2 + (uint64_t) op), PC_RANDOM);
      bool done;
      int r;

      pc_watch (pc, true);
      p = tl_import (path, true);
      pc_cut_after_writes (pc, n);
      tl_log_reset (true);
      {
        mbuf_sync_t ms = { op == 0 ? &full : &incr, p, 0 };
        zvol_stream_io_t io = { .sio_read = mb_read_sync, .sio_arg = &ms };
        ms.ms_m->mb_pos = 0;
        r = zvol_receive (p, op == 0 ? "n" : "t", &io);
      }
      (void) zvol_pool_close (p);
      tl_log_reset (false);
      pc_settle (pc);
      pc_watch (pc, false);
      pc_free (pc);

      tl_log_reset (true);     /* the import may say what it undid */
      p = tl_import (path, true);
      tl_log_reset (false);
      if (op == 0) {
        done = tl_ds_find (p, "n@s1", NULL);
        assert_true (done == tl_ds_find (p, "n", NULL));
        if (done) {
          sd_assert_same (p, "v@s1", p, "n");
          assert_int_equal (zvol_volume_destroy (p, "n@s1"), 0);
          assert_int_equal (zvol_volume_destroy (p, "n"), 0);
        }
      }
      else {
        done = tl_ds_find (p, "t@s2", NULL);
        sd_assert_same (p, done ? "v@s2" : "v@s1", p, "t");
        if (done) {
          assert_int_equal (zvol_snapshot_rollback (p, "t@s1", true), 0);
          sd_assert_same (p, "v@s1", p, "t");
        }
      }
      if (r == 0)
        assert_true (done);
      if (done)
        landed[op]++;
      else
        lost[op]++;
      char what[64];
      snprintf (what, sizeof what, "receive %d cut after %" PRIu64
                " writes (returned %d)", op, n, r);
      sd_assert_near (sd_allocated (p), base, what);
      assert_int_equal (zvol_pool_close (p), 0);
    }
  }
  for (int op = 0; op < 2; op++) {
    fprintf (stderr, "  receive %d: %u landed, %u lost to the cut\n", op,
             landed[op], lost[op]);
    assert_true (landed[op] > 0 && lost[op] > 0);
  }
  mb_free (&full);
  mb_free (&incr);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_full_same_pool),
    tl_test (test_incremental_other_pool),
    tl_test (test_incremental_reads_changes),
    tl_test (test_damaged_stream),
    tl_test (test_misfits),
    tl_test (test_progress_fd),
    tl_test (test_powercut),
  };

  return tl_main (tests, "send", NULL);
}
