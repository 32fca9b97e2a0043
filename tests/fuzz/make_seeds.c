/*
 * make_seeds: the fuzz harnesses' starting points, from real pools.
 *
 *   tests/fuzz/make_seeds OUTDIR
 *
 * Creates pools through the public API (core/zvol.h) the way a server
 * uses them, and leaves the state a crash (kill -9) leaves: writes synced
 * in a few txgs (a tree of indirect blocks, space maps, a deferred-free
 * list), then writes, a trim and zeros only in the intent log (copied and
 * in-place records), the files copied while the pool is still open.
 *
 *   OUTDIR/data/a-0.img           one device, log ring in the pool
 *   OUTDIR/data/a2-0.img          the same, imported once: the log claimed
 *                                 and that claim synced, not replayed
 *   OUTDIR/data/b-{0,1,log}.img   two devices and a log device
 *
 * Then it extracts each harness's seeds from them into
 * OUTDIR/seeds/HARNESS/ (tests/fuzz/fuzz_inputs.h says the layouts):
 * configurations, uberblock rings, block pointers and dnodes, the trees
 * (moved to the harness's slots), space-map chunks and deferred lists,
 * log blocks, names, and for the whole-image harness patch lists that
 * touch each field the import checks.  Deterministic but for guids and
 * times: the blocks land in the same places every time.
 */
#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testlib.h"
#include "pool.h"
#include "zil.h"
#include "scrub.h"
#include "deadlist.h"
#include "image.h"
#include "fuzz_inputs.h"
#include "ctl.h"
#include "deadlist.h"

static const char *out;

static void __attribute__ ((noreturn, format (printf, 1, 2)))
die (const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  fprintf (stderr, "make_seeds: ");
  vfprintf (stderr, fmt, ap);
  fprintf (stderr, "\n");
  va_end (ap);
  exit (1);
}

static void
mkdir_p (const char *path)
{
  char buf[512];

  snprintf (buf, sizeof buf, "%s", path);
  for (char *p = buf + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      (void) mkdir (buf, 0755);
      *p = '/';
    }
  if (mkdir (buf, 0755) < 0 && errno != EEXIST)
    die ("mkdir %s: %s", buf, strerror (errno));
}

/* ---- a growing byte buffer: one seed ---- */

typedef struct sb {
  uint8_t *sb_p;
  size_t sb_n, sb_cap;
} sb_t;

static void
sb_put (sb_t *b, const void *p, size_t n)
{
  while (b->sb_n + n > b->sb_cap) {
    b->sb_cap = b->sb_cap ? b->sb_cap * 2 : 4096;
    b->sb_p = zv_realloc (b->sb_p, b->sb_cap);
  }
  memcpy (b->sb_p + b->sb_n, p, n);
  b->sb_n += n;
}

static void
sb_uint (sb_t *b, uint64_t v, unsigned nbytes)
{
  uint8_t x[8];

  for (unsigned i = 0; i < nbytes; i++)
    x[i] = (uint8_t) (v >> (8 * i));
  sb_put (b, x, nbytes);
}

#define sb_u8(b, v) sb_uint ((b), (v), 1)
#define sb_u16(b, v) sb_uint ((b), (v), 2)
#define sb_u32(b, v) sb_uint ((b), (v), 4)
#define sb_u64(b, v) sb_uint ((b), (v), 8)

/* Write the seed and start the buffer afresh. */
static void
sb_save (sb_t *b, const char *harness, const char *fmt, ...)
{
  char name[128], path[640], dir[512];
  va_list ap;
  FILE *f;

  va_start (ap, fmt);
  vsnprintf (name, sizeof name, fmt, ap);
  va_end (ap);
  snprintf (dir, sizeof dir, "%s/seeds/%s", out, harness);
  mkdir_p (dir);
  snprintf (path, sizeof path, "%s/%s", dir, name);
  f = fopen (path, "wb");
  if (f == NULL || fwrite (b->sb_p, 1, b->sb_n, f) != b->sb_n
      || fclose (f) != 0)
    die ("writing %s failed", path);
  b->sb_n = 0;
}

/* ---- the pools ---- */

#define VOLSIZE (8ull << 20)

static void
vol_write (zvol_t *zv, uint64_t off, uint32_t len, uint64_t seed,
           unsigned flags)
{
  uint8_t *buf = zv_alloc (len);

  tl_pat_fill (buf, off, len, seed);
  if (zvol_write (zv, buf, off, len, flags) < 0)
    die ("write at %llu failed", (unsigned long long) off);
  free (buf);
}

static void
copy_dev (const char *src, const char *dst)
{
  int in = open (src, O_RDONLY | O_CLOEXEC);
  int fd = open (dst, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  uint8_t *buf = zv_alloc (1u << 20);
  off_t off = 0;
  ssize_t n;

  if (in < 0 || fd < 0 || ftruncate (fd, lseek (in, 0, SEEK_END)) < 0)
    die ("copying %s to %s failed", src, dst);
  while ((n = pread (in, buf, 1u << 20, off)) > 0) {
    if (!zv_is_zero (buf, (size_t) n)
        && pwrite (fd, buf, (size_t) n, off) != n)
      die ("copying %s failed", src);
    off += n;
  }
  if (n < 0 || fsync (fd) < 0)
    die ("copying %s failed", src);
  close (in);
  close (fd);
  free (buf);
}

static void
pool_cfg (zvol_pool_config_t *pc, const char *const *devs, unsigned n,
          const char *logdev, bool create)
{
  zvol_pool_config_init (pc);
  for (unsigned i = 0; i < n; i++)
    pc->pc_devices[i] = devs[i];
  pc->pc_ndevices = n;
  pc->pc_create = create;
  pc->pc_volsize = VOLSIZE;
  pc->pc_sparse = true;         /* small devices: the slop takes most */
  pc->pc_logdevice = logdev;
  pc->pc_zil_size = create && logdev == NULL ? 1ull << 20 : 0;
  pc->pc_cache_size = 8ull << 20;
  /* No sync but the ones asked for: the same txgs every time. */
  pc->pc_txg.tt_timeout_ms = 3600 * 1000;
  pc->pc_txg.tt_dirty_max = 1ull << 30;
}

/*
 * Pool TAG on ndevs devices of devsize bytes (and a log device), left as
 * a crash leaves it, copied to OUTDIR/data/TAG-*.img.
 */
static void
make_pool (const char *tag, unsigned ndevs, uint64_t devsize, bool logdev)
{
  char work[ZV_MAX_DEVS + 1][512], dst[512];
  const char *devs[ZV_MAX_DEVS];
  zvol_pool_config_t pc;
  zvol_config_t vc;
  zvol_pool_t *p;
  zvol_t *zv;

  for (unsigned d = 0; d <= ndevs; d++) {
    if (d == ndevs)
      snprintf (work[d], sizeof work[d], "%s/work/%s-log.img", out, tag);
    else
      snprintf (work[d], sizeof work[d], "%s/work/%s-%u.img", out, tag, d);
    if ((d < ndevs || logdev) && tl_sparse_file (work[d], devsize) < 0)
      die ("cannot create %s", work[d]);
    if (d < ndevs)
      devs[d] = work[d];
  }
  pool_cfg (&pc, devs, ndevs, logdev ? work[ndevs] : NULL, true);
  if (zvol_pool_open (&pc, &p) < 0)
    die ("creating pool %s failed", tag);
  zvol_config_init (&vc);
  /* With a log device large writes are copied unless in place is asked
   * for: the records of both kinds either way. */
  if (logdev)
    vc.vc_logbias = ZVOL_LOGBIAS_THROUGHPUT;
  if (zvol_open (p, NULL, &vc, &zv) < 0)
    die ("opening the volume of %s failed", tag);

  /* Synced: a tree of three levels, then blocks overwritten (a deferred
   * list), then the end of the volume (another level-1 block). */
  vol_write (zv, 0, 1u << 20, 1, 0);
  if (zv_pool_sync (p) < 0)
    die ("sync failed");
  vol_write (zv, 4u << 20, 256u << 10, 2, 0);
  vol_write (zv, 0, 128u << 10, 3, 0);
  if (zv_pool_sync (p) < 0)
    die ("sync failed");
  vol_write (zv, VOLSIZE - (64u << 10), 64u << 10, 4, 0);
  if (zv_pool_sync (p) < 0)
    die ("sync failed");

  /* Only in the log: copied and in-place writes, a trim, both zeros. */
  vol_write (zv, 8u << 10, 4096, 5, 0);
  vol_write (zv, 2u << 20, 64u << 10, 6, 0);
  vol_write (zv, (3u << 20) + 4096, 12u << 10, 7, 0);
  if (zvol_trim (zv, 4u << 20, 64u << 10, 0) < 0
      || zvol_zero (zv, 5u << 20, 32u << 10, 0) < 0
      || zvol_zero (zv, 6u << 20, 16u << 10, ZVOL_MAY_TRIM) < 0
      || zvol_flush (zv) < 0)
    die ("trim, zero or flush failed");
  vol_write (zv, 1u << 20, 8u << 10, 8, ZVOL_FUA);

  /* The crash: what is in the files now. */
  for (unsigned d = 0; d <= ndevs; d++) {
    if (d == ndevs && !logdev)
      break;
    if (d == ndevs)
      snprintf (dst, sizeof dst, "%s/data/%s-log.img", out, tag);
    else
      snprintf (dst, sizeof dst, "%s/data/%s-%u.img", out, tag, d);
    copy_dev (work[d], dst);
  }
  if (zvol_close (zv) < 0 || zvol_pool_close (p) < 0)
    die ("closing %s failed", tag);
}

/* Image a2: a's crash imported, its log claimed and synced, then the
 * crash again before the volume replays. */
static void
make_claimed (void)
{
  char src[512], dst[512];
  const char *dev = src;
  zvol_pool_config_t pc;
  zvol_pool_t *p;

  snprintf (src, sizeof src, "%s/work/a2-0.img", out);
  snprintf (dst, sizeof dst, "%s/data/a-0.img", out);
  copy_dev (dst, src);
  pool_cfg (&pc, &dev, 1, NULL, false);
  if (zvol_pool_open (&pc, &p) < 0)
    die ("importing a for a2 failed");
  if (zv_pool_sync (p) < 0)
    die ("sync failed");
  snprintf (dst, sizeof dst, "%s/data/a2-0.img", out);
  copy_dev (src, dst);
  if (zvol_pool_close (p) < 0)
    die ("closing a2 failed");
}

/* ---- reading the images back ---- */

static void
img_load (img_t *im, const char *tag, unsigned ndevs, bool logdev)
{
  char path[512];

  memset (im, 0, sizeof *im);
  im->im_ndevs = ndevs;
  for (unsigned d = 0; d <= ndevs; d++) {
    uint8_t **bufp = d == ndevs ? &im->im_log : &im->im_dev[d];
    uint64_t *sizep = d == ndevs ? &im->im_logsize : &im->im_size[d];
    struct stat st;
    int fd;

    if (d == ndevs && !logdev)
      break;
    if (d == ndevs)
      snprintf (path, sizeof path, "%s/data/%s-log.img", out, tag);
    else
      snprintf (path, sizeof path, "%s/data/%s-%u.img", out, tag, d);
    fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat (fd, &st) < 0)
      die ("cannot read %s", path);
    *sizep = (uint64_t) st.st_size;
    *bufp = zv_alloc (*sizep);
    if (pread (fd, *bufp, *sizep, 0) != (ssize_t) *sizep)
      die ("cannot read %s", path);
    close (fd);
  }
}

/* The image's structures, from the uberblocks whose trees are whole. */
static size_t
img_scan (const img_t *im, img_slot_t *slots, size_t max, img_map_t *mp)
{
  size_t n = img_ub_slots (im, slots, max), k = 0;
  uint64_t guid = img_guid (im);

  for (size_t i = 0; i < n; i++) {
    uint64_t off;
    zv_uberblock_phys_t *ub = img_ub (im, slots[i].is_dev, slots[i].is_label,
                                      slots[i].is_slot, &off);
    if (img_ub_whole (im, guid, ub))
      slots[k++] = slots[i];
  }
  if (k == 0)
    die ("an image without a whole tree");
  img_map_build (im, slots, k, mp);
  return k;
}

static const zv_objset_phys_t *
img_newest_objset (const img_t *im, const img_slot_t *slots)
{
  uint64_t off;
  zv_uberblock_phys_t *ub = img_ub (im, slots[0].is_dev, slots[0].is_label,
                                    slots[0].is_slot, &off);
  uint8_t *c[2];

  if (img_copies (im, &ub->ub_rootbp, c) == 0)
    die ("the newest objset is outside the image");
  return (const zv_objset_phys_t *) c[0];
}

/* The first record of the objset's dataset directory (the volume the
 * seed pools are made with). */
static const zv_dsrec_phys_t *
img_first_rec (const img_t *im, const zv_objset_phys_t *os)
{
  const zv_blkptr_t *bp = &os->os_dsdir.dn_root;
  uint8_t *c[2];

  for (unsigned depth = 0; depth <= ZV_MAX_LEVELS; depth++) {
    if (img_copies (im, bp, c) == 0)
      break;
    if (bp->bp_level == 0) {
      const zv_dsrec_phys_t *rec = (const zv_dsrec_phys_t *) c[0];
      if (rec->dr_magic != ZV_DSREC_MAGIC)
        break;
      return rec;
    }
    bp = (const zv_blkptr_t *) c[0] + 1;
  }
  die ("the newest objset has no dataset record");
  return NULL;
}

static const uint8_t *
item_at (const img_t *im, const img_item_t *it)
{
  return img_at (im, ZV_DVA_VDEV (it->ii_dva[0]),
                 ZV_DVA_OFFSET (it->ii_dva[0]), it->ii_size);
}

/* Bytes up to the last nonzero one, rounded up to 8. */
static size_t
trimmed (const uint8_t *p, size_t n)
{
  while (n > 0 && p[n - 1] == 0)
    n--;
  return ZV_P2ROUNDUP (n, 8);
}

/* ---- seeds: labels and uberblocks ---- */

static unsigned
label_size_index (uint64_t size)
{
  for (unsigned i = 0; i < 4; i++)
    if (fz_label_sizes[i] == size)
      return i;
  return 0;
}

static void
seeds_label (const img_t *im, const img_map_t *mp, const char *tag)
{
  sb_t b = { 0 };
  size_t n = img_map_count (mp, IK_CONFIG);

  for (size_t i = 0; i < n; i++) {
    const img_item_t *it = img_map_get (mp, IK_CONFIG, i);
    unsigned v = ZV_DVA_VDEV (it->ii_dva[0]);
    uint64_t size = v == ZV_LOG_VDEV ? im->im_logsize : im->im_size[v];
    const uint8_t *cf = item_at (im, it);

    sb_u8 (&b, label_size_index (size));
    sb_put (&b, cf, sizeof (zv_config_phys_t));
    sb_save (&b, "label", "%s-config-%zu", tag, i);
    /* The same with damage the import must survive or refuse. */
    sb_u8 (&b, label_size_index (size) | FZ_LABEL_RAW0
           | FZ_LABEL_L1_SAME << FZ_LABEL_L1_SHIFT);
    sb_put (&b, cf, sizeof (zv_config_phys_t));
    sb_save (&b, "label", "%s-config-%zu-raw0", tag, i);
    sb_u8 (&b, label_size_index (size) | FZ_LABEL_RING_UB
           | FZ_LABEL_L1_ZERO << FZ_LABEL_L1_SHIFT | FZ_LABEL_RAW0);
    sb_put (&b, cf, sizeof (zv_config_phys_t));
    sb_save (&b, "label", "%s-config-%zu-ring", tag, i);
    if (i + 1 < n) {
      sb_u8 (&b, label_size_index (size)
             | FZ_LABEL_L1_INPUT << FZ_LABEL_L1_SHIFT);
      sb_put (&b, cf, sizeof (zv_config_phys_t));
      sb_put (&b, item_at (im, img_map_get (mp, IK_CONFIG, i + 1)),
              sizeof (zv_config_phys_t));
      sb_save (&b, "label", "%s-config-%zu-pair", tag, i);
    }
  }
  free (b.sb_p);
}

static void
seeds_uberblock (const img_t *im, const img_map_t *mp, const char *tag)
{
  sb_t b = { 0 };
  size_t n = img_map_count (mp, IK_UB);
  unsigned ndevs = ZV_MIN (im->im_ndevs, 2u);

  for (unsigned max = 0; max < 2; max++) {
    sb_u8 (&b, (ndevs - 1) | (max ? 2u << 1 : 0));
    sb_u64 (&b, img_guid (im));
    for (size_t i = 0; i < n; i++) {
      const img_item_t *it = img_map_get (mp, IK_UB, i);
      unsigned d = ZV_DVA_VDEV (it->ii_dva[0]);
      uint64_t off = ZV_DVA_OFFSET (it->ii_dva[0]);
      unsigned l = off >= ZV_LABEL_SIZE;
      uint64_t base = zv_label_offset (im->im_size[d], l) + ZV_UB_RING_OFFSET;

      if (d >= ndevs)
        continue;
      sb_u8 (&b, d);
      sb_u8 (&b, l);
      sb_u8 (&b, (off - base) / ZV_UB_SIZE);
      sb_u8 (&b, 0);
      sb_put (&b, item_at (im, it), sizeof (zv_uberblock_phys_t));
    }
    sb_save (&b, "uberblock", "%s-ring%s", tag, max ? "-max2" : "");
  }
  free (b.sb_p);
}

/* ---- seeds: pointers, dnodes, in-place records ---- */

static void
seeds_blkptr (const img_t *im, const img_map_t *mp, const img_slot_t *slots,
              const char *tag)
{
  const zv_objset_phys_t *os = img_newest_objset (im, slots);
  sb_t b = { 0 };
  size_t n;

  sb_u8 (&b, im->im_ndevs - 1);
  for (unsigned d = 0; d < im->im_ndevs; d++)
    sb_u16 (&b, zv_data_end (im->im_size[d]) >> 16);
  sb_u8 (&b, 2);                /* 16K volume blocks */
  size_t hdr = b.sb_n;
  uint8_t *h = zv_alloc (hdr);
  memcpy (h, b.sb_p, hdr);

  /* The dnodes of the objset. */
  sb_u8 (&b, FZ_BP_DNODE);
  sb_u8 (&b, ZV_BT_VOLDATA);
  sb_put (&b, &img_first_rec (im, os)->dr_volume, sizeof (zv_dnode_phys_t));
  for (unsigned i = 0; i < 2; i++) {
    sb_u8 (&b, FZ_BP_DNODE);
    sb_u8 (&b, ZV_BT_DEFER);
    sb_put (&b, &os->os_defer[i], sizeof os->os_defer[i]);
  }
  for (unsigned i = 0; i < os->os_ndevs && i < ZV_MAX_DEVS; i++) {
    sb_u8 (&b, FZ_BP_DNODE);
    sb_u8 (&b, ZV_BT_SPACEMAP);
    sb_put (&b, &os->os_spacemap[i], sizeof os->os_spacemap[i]);
  }
  sb_save (&b, "blkptr", "%s-dnodes", tag);

  /* Every pointer of every indirect block, in one seed each. */
  n = img_map_count (mp, IK_INDIRECT);
  for (size_t i = 0; i < n; i++) {
    const zv_blkptr_t *e = (const zv_blkptr_t *) item_at
      (im, img_map_get (mp, IK_INDIRECT, i)) + 1;
    sb_put (&b, h, hdr);
    for (unsigned k = 0; k < ZV_INDIRECT_FANOUT; k++)
      if (!zv_bp_is_hole (&e[k])) {
        sb_u8 (&b, FZ_BP_PTR);
        sb_put (&b, &e[k], sizeof e[k]);
      }
    sb_save (&b, "blkptr", "%s-indirect-%zu", tag, i);
  }
  /* The in-place records. */
  n = img_map_count (mp, IK_LREC);
  sb_put (&b, h, hdr);
  for (size_t i = 0; i < n; i++) {
    const img_item_t *it = img_map_get (mp, IK_LREC, i);
    const zv_lr_t *lr = (const zv_lr_t *) item_at (im, it);
    if (lr->lr_type == ZV_LR_WRITE_IND) {
      sb_u8 (&b, FZ_BP_IND);
      sb_put (&b, lr, sizeof *lr + sizeof (zv_blkptr_t));
    }
  }
  sb_save (&b, "blkptr", "%s-records", tag);
  free (h);
  free (b.sb_p);
}

/* ---- seeds: trees, moved to the harness's slots ---- */

typedef struct tree_seed {
  uint8_t ts_blk[FZ_TREE_SLOTS][ZV_INDIRECT_SIZE];
  uint32_t ts_len[FZ_TREE_SLOTS];
  unsigned ts_n;
} tree_seed_t;

/* Copy the block bp names into the next slot (its children first when
 * it is an indirect block and 'deep'), and point bp at the slot. */
static bool
tree_move (const img_t *im, tree_seed_t *ts, zv_blkptr_t *bp, bool deep)
{
  uint8_t *c[2];
  unsigned k;

  if (zv_bp_is_hole (bp))
    return true;
  if (img_copies (im, bp, c) == 0 || ts->ts_n == FZ_TREE_SLOTS
      || bp->bp_psize > ZV_INDIRECT_SIZE)
    return false;
  k = ts->ts_n++;
  memcpy (ts->ts_blk[k], c[0], bp->bp_psize);
  ts->ts_len[k] = bp->bp_psize;
  if (bp->bp_level > 0 && (deep || bp->bp_level > 1)) {
    zv_blkptr_t *e = (zv_blkptr_t *) ts->ts_blk[k] + 1;
    for (unsigned i = 0; i < ZV_INDIRECT_FANOUT; i++)
      if (!tree_move (im, ts, &e[i], deep))
        return false;
  }
  bp->bp_dva[0] = ZV_DVA_MAKE (0, fz_tree_slot (k));
  bp->bp_dva[1] = 0;
  bp->bp_ncopies = 1;
  return true;
}

static void
tree_save (const tree_seed_t *ts, unsigned obj, unsigned flags,
           const zv_dnode_phys_t *dn, const uint32_t *claims, unsigned nclaims,
           const char *tag, const char *what)
{
  sb_t b = { 0 };

  sb_u8 (&b, obj);
  sb_u8 (&b, flags);
  sb_put (&b, dn, sizeof *dn);
  sb_u8 (&b, nclaims);
  for (unsigned i = 0; i < nclaims; i++) {
    sb_u32 (&b, claims[2 * i]);
    sb_u16 (&b, claims[2 * i + 1]);
  }
  for (unsigned k = 0; k < ts->ts_n; k++) {
    size_t len = trimmed (ts->ts_blk[k], ts->ts_len[k]);
    sb_u16 (&b, len);
    sb_put (&b, ts->ts_blk[k], len);
  }
  sb_save (&b, "tree", "%s-%s", tag, what);
  free (b.sb_p);
}

/* A dead list of one block: four entries (data blocks of one and two
 * copies, an indirect block) naming extents the seed claims. */
static void
seeds_deadlist (void)
{
  tree_seed_t *ts = zv_calloc (1, sizeof *ts);
  zv_deadlist_ent_t *e = (zv_deadlist_ent_t *) ts->ts_blk[0];
  uint64_t base = zv_data_start () + 64 * ZV_SECTOR;
  uint32_t claims[2] = { (uint32_t) (base / ZV_SECTOR), 64 };
  zv_dnode_phys_t dn;
  sb_t b = { 0 };

  e[0] = (zv_deadlist_ent_t) { .de_dva = { ZV_DVA_MAKE (0, base) },
                               .de_psize = 16384, .de_ncopies = 1,
                               .de_birth = 3 };
  e[1] = (zv_deadlist_ent_t) { .de_dva = { ZV_DVA_MAKE (0, base + 16384),
                                           ZV_DVA_MAKE (0, base + 32768) },
                               .de_psize = 16384, .de_ncopies = 2,
                               .de_birth = 4 };
  e[2] = (zv_deadlist_ent_t) { .de_dva = { ZV_DVA_MAKE (0, base + 65536) },
                               .de_psize = ZV_INDIRECT_SIZE,
                               .de_ncopies = 1, .de_level = 1,
                               .de_birth = 4 };
  e[3] = e[0];
  e[3].de_dva[0] = ZV_DVA_MAKE (0, base + 131072);
  ts->ts_len[0] = ZV_DEADLIST_BLKSZ;
  ts->ts_n = 1;
  memset (&dn, 0, sizeof dn);
  dn.dn_type = ZV_BT_DEADLIST;
  dn.dn_nlevels = 1;
  dn.dn_datablksz = ZV_DEADLIST_BLKSZ;
  dn.dn_nblocks = 1;
  dn.dn_size = 4 * sizeof (zv_deadlist_ent_t);
  dn.dn_txg = 5;
  dn.dn_root = (zv_blkptr_t) {
    .bp_dva = { ZV_DVA_MAKE (0, fz_tree_slot (0)) },
    .bp_psize = ZV_DEADLIST_BLKSZ, .bp_lsize = ZV_DEADLIST_BLKSZ,
    .bp_birth = 5, .bp_type = ZV_BT_DEADLIST, .bp_ncopies = 1,
    .bp_fill = 1,
  };
  sb_u8 (&b, FZ_TREE_DEADLIST);
  sb_u8 (&b, 0);
  sb_put (&b, &dn, sizeof dn);
  sb_u32 (&b, 3 * 16384);                  /* dr_deadlist_bytes */
  sb_u8 (&b, 1);
  sb_u32 (&b, claims[0]);
  sb_u16 (&b, claims[1]);
  sb_u16 (&b, trimmed (ts->ts_blk[0], ts->ts_len[0]));
  sb_put (&b, ts->ts_blk[0], trimmed (ts->ts_blk[0], ts->ts_len[0]));
  sb_save (&b, "tree", "deadlist");
  free (b.sb_p);
  free (ts);
}

static void
seeds_tree (const img_t *im, const img_slot_t *slots, const char *tag)
{
  const zv_objset_phys_t *os = img_newest_objset (im, slots);
  tree_seed_t *ts = zv_calloc (1, sizeof *ts);
  zv_dnode_phys_t dn;
  uint8_t *c[2];

  if (im->im_ndevs != 1)      /* the harness's device is one of a's */
    goto out;
  dn = img_first_rec (im, os)->dr_volume;
  if (tree_move (im, ts, &dn.dn_root, false)) {
    tree_save (ts, FZ_TREE_VOLUME, 0, &dn, NULL, 0, tag, "volume");
    tree_save (ts, FZ_TREE_VOLUME, FZ_TREE_READ, &dn, NULL, 0, tag,
               "volume-read");
  }
  memset (ts, 0, sizeof *ts);
  dn = os->os_spacemap[0];
  if (tree_move (im, ts, &dn.dn_root, true))
    tree_save (ts, FZ_TREE_SPACEMAP, 0, &dn, NULL, 0, tag, "spacemap");

  /* The large device: a level-1 block over three chunks (the real one,
   * a hole, and one with a sector of the last chunk's valid part set). */
  memset (ts, 0, sizeof *ts);
  dn = os->os_spacemap[0];
  if (dn.dn_nlevels == 1 && img_copies (im, &dn.dn_root, c) > 0
      && dn.dn_root.bp_psize == ZV_ALLOC_CHUNK) {
    zv_mblk_hdr_t *h = (zv_mblk_hdr_t *) ts->ts_blk[0];
    zv_blkptr_t *e = (zv_blkptr_t *) ts->ts_blk[0] + 1;

    *h = (zv_mblk_hdr_t) {
      .mh_magic = ZV_MBLK_MAGIC, .mh_version = ZV_FORMAT_VERSION,
      .mh_type = ZV_BT_INDIRECT, .mh_txg = dn.dn_root.bp_birth,
      .mh_object = ZV_OBJ_SPACEMAP0, .mh_level = 1,
    };
    e[0] = e[2] = dn.dn_root;
    e[0].bp_dva[0] = ZV_DVA_MAKE (0, fz_tree_slot (1));
    e[2].bp_dva[0] = ZV_DVA_MAKE (0, fz_tree_slot (2));
    e[0].bp_dva[1] = e[2].bp_dva[1] = 0;
    e[0].bp_ncopies = e[2].bp_ncopies = 1;
    memcpy (ts->ts_blk[1], c[0], ZV_ALLOC_CHUNK);
    ts->ts_blk[2][8] = 1;
    ts->ts_len[0] = ZV_INDIRECT_SIZE;
    ts->ts_len[1] = ts->ts_len[2] = ZV_ALLOC_CHUNK;
    ts->ts_n = 3;
    dn.dn_nlevels = 2;
    dn.dn_nblocks = 3;
    dn.dn_root.bp_level = 1;
    dn.dn_root.bp_psize = dn.dn_root.bp_lsize = ZV_INDIRECT_SIZE;
    dn.dn_root.bp_type = ZV_BT_INDIRECT;
    dn.dn_root.bp_fill = 2;
    dn.dn_root.bp_dva[0] = ZV_DVA_MAKE (0, fz_tree_slot (0));
    dn.dn_root.bp_dva[1] = 0;
    dn.dn_root.bp_ncopies = 1;
    tree_save (ts, FZ_TREE_SPACEMAP, FZ_TREE_BIG, &dn, NULL, 0, tag,
               "spacemap-big");
  }

  for (unsigned i = 0; i < 2; i++) {
    const zv_dnode_phys_t *d = &os->os_defer[i];
    uint32_t claims[2 * 32];
    unsigned nclaims = 0;

    memset (ts, 0, sizeof *ts);
    dn = *d;
    if (zv_bp_is_hole (&dn.dn_root) || !tree_move (im, ts, &dn.dn_root, true))
      continue;
    /* The entries must be allocated extents: claim them first. */
    for (unsigned k = 0; k < ts->ts_n; k++) {
      if (ts->ts_len[k] != ZV_DEFER_BLKSZ
          || ((zv_mblk_hdr_t *) ts->ts_blk[k])->mh_magic == ZV_MBLK_MAGIC)
        continue;
      const zv_defer_ent_t *e = (const zv_defer_ent_t *) ts->ts_blk[k];
      for (unsigned j = 0; j < ZV_DEFER_BLKSZ / sizeof *e && nclaims < 32;
           j++)
        if (e[j].de_size != 0) {
          claims[2 * nclaims] = ZV_DVA_OFFSET (e[j].de_dva) / ZV_SECTOR;
          claims[2 * nclaims + 1] = e[j].de_size / ZV_SECTOR;
          nclaims++;
        }
    }
    tree_save (ts, FZ_TREE_DEFER, 0, &dn, claims, nclaims, tag,
               i ? "defer1" : "defer0");
  }
 out:
  free (ts);
}

/* ---- seeds: the allocator's loads ---- */

static void
seeds_spacemap (const img_t *im, const img_map_t *mp,
                const img_slot_t *slots, const char *tag)
{
  const zv_objset_phys_t *os = img_newest_objset (im, slots);
  sb_t b = { 0 };

  sb_u8 (&b, ZV_MIN (im->im_ndevs, 4u) - 1);
  for (unsigned d = 0; d < ZV_MIN (im->im_ndevs, 4u); d++)
    sb_u16 (&b, (zv_data_end (im->im_size[d]) - zv_data_start ()) >> 16);
  size_t n = img_map_count (mp, IK_SPACEMAP);
  for (size_t i = 0, d = 0; i < n; i++) {
    const img_item_t *it = img_map_get (mp, IK_SPACEMAP, i);
    const uint8_t *p = item_at (im, it);
    size_t len;

    if (it->ii_level != 0 || it->ii_size != ZV_ALLOC_CHUNK)
      continue;
    len = trimmed (p, ZV_ALLOC_CHUNK);
    sb_u8 (&b, FZ_SM_CHUNK);
    sb_u8 (&b, d++);
    sb_u16 (&b, 0);
    sb_u16 (&b, len);
    sb_put (&b, p, len);
  }
  /* Block 0 of each deferred list: down the first pointers. */
  for (unsigned i = 0; i < 2; i++) {
    const zv_dnode_phys_t *dn = &os->os_defer[i];
    uint64_t count = dn->dn_size / sizeof (zv_defer_ent_t);
    const zv_blkptr_t *bp = &dn->dn_root;
    uint8_t *c[2] = { NULL, NULL };

    while (count > 0 && img_copies (im, bp, c) > 0 && bp->bp_level > 0)
      bp = (const zv_blkptr_t *) c[0] + 1;
    if (count == 0 || c[0] == NULL || bp->bp_level != 0)
      continue;
    sb_u8 (&b, FZ_SM_DEFER);
    sb_u8 (&b, dn->dn_txg);
    sb_u16 (&b, count);
    sb_u8 (&b, 0);
    sb_u8 (&b, ZV_MIN (count, 255u));
    sb_put (&b, c[0], ZV_MIN (count, 255u) * sizeof (zv_defer_ent_t));
  }
  for (unsigned i = 0; i < 4; i++) {
    sb_u8 (&b, FZ_SM_ALLOC);
    sb_u8 (&b, i);
  }
  sb_u8 (&b, FZ_SM_SYNC);
  sb_u8 (&b, FZ_SM_FREE);
  sb_u8 (&b, 1);
  sb_u8 (&b, FZ_SM_SYNC);
  sb_u8 (&b, FZ_SM_SYNC);
  sb_u8 (&b, FZ_SM_SYNC);
  sb_save (&b, "spacemap", "%s-import", tag);
  free (b.sb_p);
}

/* ---- seeds: dataset records ---- */

/* The first record, as fuzz_dsrec reads it: a header (flags, slot 0, the
 * objset's txg and next id as offsets from the record's), resealed or
 * raw, and the free slot. */
static void
seeds_dsrec (const img_t *im, const img_slot_t *slots, const char *tag)
{
  const zv_objset_phys_t *os = img_newest_objset (im, slots);
  const zv_dsrec_phys_t *rec = img_first_rec (im, os);
  static const zv_dsrec_phys_t zero;
  sb_t b = { 0 };

  for (unsigned raw = 0; raw < 2; raw++) {
    sb_u8 (&b, raw);
    sb_u16 (&b, 0);
    sb_u16 (&b, (uint16_t) (os->os_txg - rec->dr_creation_txg));
    sb_u16 (&b, (uint16_t) (os->os_next_dsid - rec->dr_id));
    sb_put (&b, rec, sizeof *rec);
    sb_save (&b, "dsrec", "%s-record%s", tag, raw ? "-raw" : "");
  }
  sb_u8 (&b, 0);
  sb_u16 (&b, 3);
  sb_u16 (&b, 0);
  sb_u16 (&b, 0);
  sb_put (&b, &zero, sizeof zero);
  sb_save (&b, "dsrec", "%s-free", tag);
  /* The same volume's tree as a queued background free (freeq.c), its
   * cursor at the start. */
  zv_dsrec_phys_t fr = *rec;
  memset (&fr.dr_zil, 0, sizeof fr.dr_zil);
  memset (&fr.dr_deadlist, 0, sizeof fr.dr_deadlist);
  fr.dr_kind = ZV_DS_KIND_FREE;
  fr.dr_flags = fr.dr_guid = fr.dr_reservation = fr.dr_written = 0;
  fr.dr_referenced = fr.dr_deadlist_bytes = 0;
  fr.dr_origin_id = fr.dr_prev_snap_id = fr.dr_parent_id = 0;
  fr.dr_prev_snap_txg = 0;
  fr.dr_creation_txg = os->os_txg;
  fr.dr_free_total = fr.dr_used = rec->dr_referenced;
  fr.dr_free_cursor = 0;
  sb_u8 (&b, 0);
  sb_u16 (&b, 0);
  sb_u16 (&b, 0);
  sb_u16 (&b, (uint16_t) (os->os_next_dsid - fr.dr_id));
  sb_put (&b, &fr, sizeof fr);
  sb_save (&b, "dsrec", "%s-freeing", tag);
  free (b.sb_p);
}

/* The scrub's place, as fuzz_scanrec reads it: a flags byte and the
 * record (sealed by the harness unless raw): a scanning one in the
 * trees, a paused one at the start, a raw one sealed for the harness's
 * guid, and the all-zero record of a pool with no scrub. */
static void
seeds_scanrec (void)
{
  static const zv_scan_phys_t zero;
  zv_scan_phys_t sp = {
    .sp_magic = ZV_SCAN_MAGIC, .sp_version = ZV_SCAN_VERSION,
    .sp_state = ZV_SCAN_SCANNING, .sp_phase = 1, .sp_ds_id = 3,
    .sp_off = 1 << 20, .sp_examined = 3 << 20, .sp_total = 8 << 20,
    .sp_repaired = 2, .sp_cksum_errors = 3, .sp_lost = 1,
    .sp_problems = 4, .sp_pieces = 2, .sp_elapsed_ns = 1000000000,
  };
  sb_t b = { 0 };

  sb_u8 (&b, 0);
  sb_put (&b, &sp, sizeof sp);
  sb_save (&b, "scanrec", "scanning");
  zv_scrub_phys_seal (&sp, 0x5eed5eed12345678ull);
  sb_u8 (&b, 1);
  sb_put (&b, &sp, sizeof sp);
  sb_save (&b, "scanrec", "scanning-raw");
  sp = (zv_scan_phys_t) {
    .sp_magic = ZV_SCAN_MAGIC, .sp_version = ZV_SCAN_VERSION,
    .sp_state = ZV_SCAN_PAUSED, .sp_total = 1 << 20,
  };
  sb_u8 (&b, 0);
  sb_put (&b, &sp, sizeof sp);
  sb_save (&b, "scanrec", "paused");
  sb_u8 (&b, 0);
  sb_put (&b, &zero, sizeof zero);
  sb_save (&b, "scanrec", "none");
  free (b.sb_p);
}

/* ---- seeds: the intent log ---- */

static void
seeds_zil (const img_t *im, const img_map_t *mp, const img_slot_t *slots,
           const char *tag)
{
  const zv_objset_phys_t *os = img_newest_objset (im, slots);
  const zv_zil_header_t *zh = &img_first_rec (im, os)->dr_zil;
  sb_t b = { 0 };
  size_t nl = img_map_count (mp, IK_LWB);
  static const uint8_t variants[] = {
    0, FZ_ZIL_CLAIMED | FZ_ZIL_CLAIM_TXG, FZ_ZIL_LIVE, FZ_ZIL_NOREPLAY,
  };

  if (im->im_ndevs != 1 || nl == 0)   /* the harness's device is a's */
    return;
  for (unsigned v = 0; v < sizeof variants; v++) {
    uint64_t claim = zh->zh_claim_txg ? zh->zh_claim_txg : os->os_txg;
    sb_u8 (&b, variants[v]);
    sb_u8 (&b, ZV_MIN (zh->zh_nslots, 16u) - 2);
    sb_u16 (&b, zh->zh_head_pos % (zh->zh_nslots * (uint64_t) zh->zh_blksz)
            / ZV_SECTOR);
    sb_u16 (&b, zh->zh_head_seq);
    sb_u8 (&b, variants[v] & FZ_ZIL_CLAIM_TXG ? claim : 0);
    sb_u8 (&b, os->os_txg);
    sb_u8 (&b, 2);                            /* 16K */
    sb_u16 (&b, VOLSIZE >> 16);
    sb_u8 (&b, 0);                            /* no regions */
    for (size_t i = 0; i < nl; i++) {
      const img_item_t *it = img_map_get (mp, IK_LWB, i);
      const zv_lwb_hdr_t *lh = (const zv_lwb_hdr_t *) item_at (im, it);
      sb_u8 (&b, 0);
      sb_u16 (&b, lh->lh_nused);
      sb_put (&b, lh + 1, lh->lh_nused);
    }
    sb_save (&b, "zil", "%s-chain-%u", tag, v);
  }
  free (b.sb_p);
}

/* ---- seeds: names ---- */

static void
seeds_name (void)
{
  static const char *const names[] = {
    "zvol", "", "zvol@snap", "zvo", "zvol/", "zvol\n",
    "0123456789012345678901234567890123456789012345678901234567890123",
  };
  sb_t b = { 0 };

  for (unsigned i = 0; i < sizeof names / sizeof names[0]; i++) {
    sb_put (&b, names[i], strlen (names[i]));
    sb_save (&b, "name", "name-%u", i);
  }
  free (b.sb_p);
}

/* ---- seeds: control socket messages ---- */

/* Requests (first byte even) of each command, and replies (odd). */
static void
seeds_ctl (void)
{
  static const char *const lines[] = {
    "list", "list -H -p tank", "list -Hp -d /dev/null tank other",
    "stats tank", "stats -t tank", "stats tank/v", "create -V 64M tank/db",
    "create -V 1T -s -b 4K tank/x", "destroy tank/db", "create tank /x /y",
    "frob -x", "list -- -H", "send -v -i tank/v@a tank/v@b",
    "receive -v tank/w@s", "check -v tank",
  };
  sb_t b = { 0 };

  for (unsigned i = 0; i < sizeof lines / sizeof lines[0]; i++) {
    char line[128], *argv[16];
    uint8_t *buf;
    size_t len;
    int argc;
    snprintf (line, sizeof line, "%s", lines[i]);
    argc = tl_argv_split (line, argv, 16);
    /* The stream commands with their flag (the descriptor is ancillary
     * data, not in the bytes). */
    unsigned fl = strncmp (lines[i], "send", 4) == 0
      || strncmp (lines[i], "receive", 7) == 0 ? ZV_CTL_F_STREAM : 0;
    if (zv_ctl_encode_req (argc, argv, fl | (i % 2 ? 1 : 0), &buf, &len) < 0)
      die ("encoding '%s'", lines[i]);
    sb_u8 (&b, 0);
    sb_put (&b, buf, len);
    sb_save (&b, "ctl", "req-%u", i);
    free (buf);
  }
  for (unsigned i = 0; i < 3; i++) {
    static const char rout[] = "NAME  USED\ntank/v  1M\n";
    static const char rerr[] = "zvoladm: another admin command is running\n";
    uint8_t *buf;
    size_t len;
    zv_ctl_encode_rep ((int) i, rout, i == 1 ? 0 : sizeof rout - 1, rerr,
                       i == 0 ? 0 : sizeof rerr - 1, &buf, &len);
    sb_u8 (&b, 1);
    sb_put (&b, buf, len);
    sb_save (&b, "ctl", "rep-%u", i);
    free (buf);
  }
  {
    static const char line[] = "zvoladm: send: 12 of 40 MiB (30%)\n";
    uint8_t *buf;
    size_t len;
    zv_ctl_encode_progress (line, sizeof line - 1, &buf, &len);
    sb_u8 (&b, 1);
    sb_put (&b, buf, len);
    sb_save (&b, "ctl", "progress");
    free (buf);
  }
  free (b.sb_p);
}

/* ---- seeds: patch lists for the whole image ---- */

typedef struct field {
  uint8_t f_kind;
  uint16_t f_off;
  uint8_t f_len;
  const char *f_name;
} field_t;

#define OS_F(f) offsetof (zv_objset_phys_t, f)
#define UB_F(f) offsetof (zv_uberblock_phys_t, f)
#define CF_F(f) offsetof (zv_config_phys_t, f)
#define BP_F(f) offsetof (zv_blkptr_t, f)
#define LR_F(f) offsetof (zv_lr_t, f)
#define DR_F(f) offsetof (zv_dsrec_phys_t, f)
#define F(kind, off, len, name) { kind, (uint16_t) (off), len, name }

static const field_t fields[] = {
  F (IK_CONFIG, CF_F (cf_ndevs), 4, "cf_ndevs"),
  F (IK_CONFIG, CF_F (cf_dev_index), 4, "cf_dev_index"),
  F (IK_CONFIG, CF_F (cf_volblocksize), 4, "cf_volblocksize"),
  F (IK_CONFIG, CF_F (cf_dev_size), 8, "cf_dev_size"),
  F (IK_CONFIG, CF_F (cf_volsize), 8, "cf_volsize"),
  F (IK_CONFIG, CF_F (cf_dev_sizes), 8, "cf_dev_sizes"),
  F (IK_CONFIG, CF_F (cf_role), 4, "cf_role"),
  F (IK_CONFIG, CF_F (cf_log_size), 8, "cf_log_size"),
  F (IK_UB, UB_F (ub_txg), 8, "ub_txg"),
  F (IK_UB, UB_F (ub_rootbp) + BP_F (bp_birth), 8, "ub_root_birth"),
  F (IK_UB, UB_F (ub_rootbp) + BP_F (bp_fill), 8, "ub_root_fill"),
  F (IK_UB, UB_F (ub_rootbp) + BP_F (bp_psize), 4, "ub_root_psize"),
  F (IK_UB, UB_F (ub_rootbp) + BP_F (bp_ncopies), 1, "ub_root_ncopies"),
  F (IK_UB, UB_F (ub_rootbp) + BP_F (bp_dva), 8, "ub_root_dva"),
  F (IK_OBJSET, OS_F (os_txg), 8, "os_txg"),
  F (IK_OBJSET, OS_F (os_ndevs), 4, "os_ndevs"),
  F (IK_OBJSET, OS_F (os_next_dsid), 8, "os_next_dsid"),
  F (IK_DSDIR, DR_F (dr_volume.dn_size), 8, "vol_size"),
  F (IK_DSDIR, DR_F (dr_volume.dn_nblocks), 8, "vol_nblocks"),
  F (IK_DSDIR, DR_F (dr_volume.dn_nlevels), 1, "vol_nlevels"),
  F (IK_DSDIR, DR_F (dr_volume.dn_root) + BP_F (bp_fill), 8, "vol_fill"),
  F (IK_DSDIR, DR_F (dr_volume.dn_root) + BP_F (bp_birth), 8,
     "vol_birth"),
  F (IK_DSDIR, DR_F (dr_kind), 4, "dr_kind"),
  F (IK_DSDIR, DR_F (dr_id), 8, "dr_id"),
  F (IK_DSDIR, DR_F (dr_flags), 8, "dr_flags"),
  F (IK_DSDIR, DR_F (dr_volsize), 8, "dr_volsize"),
  F (IK_DSDIR, DR_F (dr_volblocksize), 4, "dr_volblocksize"),
  F (IK_DSDIR, DR_F (dr_reservation), 8, "dr_reservation"),
  F (IK_DSDIR, DR_F (dr_creation_txg), 8, "dr_creation_txg"),
  F (IK_DSDIR, DR_F (dr_name), 8, "dr_name"),
  F (IK_OBJSET, OS_F (os_defer[0].dn_txg), 8, "defer0_txg"),
  F (IK_OBJSET, OS_F (os_defer[1].dn_size), 8, "defer1_size"),
  F (IK_OBJSET, OS_F (os_spacemap[0].dn_nblocks), 8, "sm_nblocks"),
  F (IK_DSDIR, DR_F (dr_zil.zh_claim_txg), 8, "zh_claim_txg"),
  F (IK_DSDIR, DR_F (dr_zil.zh_head_seq), 8, "zh_head_seq"),
  F (IK_DSDIR, DR_F (dr_zil.zh_head_pos), 8, "zh_head_pos"),
  F (IK_DSDIR, DR_F (dr_zil.zh_nslots), 8, "zh_nslots"),
  F (IK_DSDIR, DR_F (dr_zil.zh_flags), 8, "zh_flags"),
  F (IK_DSDIR, DR_F (dr_zil.zh_claim_count), 8, "zh_claim_count"),
  F (IK_DSDIR, DR_F (dr_zil.zh_ring_dva), 8, "zh_ring_dva"),
  F (IK_INDIRECT, offsetof (zv_mblk_hdr_t, mh_txg), 8, "mh_txg"),
  F (IK_INDIRECT, offsetof (zv_mblk_hdr_t, mh_blkid), 8, "mh_blkid"),
  F (IK_INDIRECT, 64 + BP_F (bp_birth), 8, "ent_birth"),
  F (IK_INDIRECT, 64 + BP_F (bp_fill), 8, "ent_fill"),
  F (IK_INDIRECT, 64 + BP_F (bp_psize), 4, "ent_psize"),
  F (IK_INDIRECT, 64 + BP_F (bp_level), 1, "ent_level"),
  F (IK_INDIRECT, 64 + BP_F (bp_dva), 8, "ent_dva"),
  F (IK_DEFER, 0, 8, "de_dva"),
  F (IK_DEFER, 8, 4, "de_size"),
  F (IK_SPACEMAP, 0, 8, "sm_word0"),
  F (IK_SPACEMAP, 600, 8, "sm_word75"),
  F (IK_LWB, offsetof (zv_lwb_hdr_t, lh_nused), 4, "lh_nused"),
  F (IK_LWB, offsetof (zv_lwb_hdr_t, lh_next_dva), 8, "lh_next_dva"),
  F (IK_LREC, LR_F (lr_type), 4, "lr_type"),
  F (IK_LREC, LR_F (lr_reclen), 4, "lr_reclen"),
  F (IK_LREC, LR_F (lr_txg), 8, "lr_txg"),
  F (IK_LREC, LR_F (lr_offset), 8, "lr_offset"),
  F (IK_LREC, LR_F (lr_length), 8, "lr_length"),
  F (IK_LREC, LR_F (lr_flags), 8, "lr_flags"),
  F (IK_LREC, 48 + BP_F (bp_dva), 8, "lr_bp_dva"),
  F (IK_LREC, 48 + BP_F (bp_psize), 4, "lr_bp_psize"),
  F (IK_DATA, 0, 8, "data0"),
};

static void
seeds_image (void)
{
  static const uint8_t flags[] = {
    0, 1, 2, FZ_IMG_RDONLY, FZ_IMG_REOPEN, 1 | FZ_IMG_REOPEN,
    2 | FZ_IMG_REOPEN, FZ_IMG_RAW, FZ_IMG_POOLONLY,
  };
  static const char *const sel[] = { "a", "a2", "b", "a" };
  sb_t b = { 0 };

  for (unsigned i = 0; i < sizeof flags; i++) {
    sb_u8 (&b, flags[i]);
    sb_save (&b, "image", "plain-%02x", flags[i]);
  }
  for (unsigned s = 0; s < 3; s++)
    for (unsigned i = 0; i < sizeof fields / sizeof fields[0]; i++)
      for (unsigned idx = 0; idx < 2; idx++) {
        const field_t *f = &fields[i];
        sb_u8 (&b, s);
        sb_u8 (&b, f->f_kind);
        sb_u8 (&b, idx);
        sb_u16 (&b, f->f_off);
        sb_u8 (&b, (f->f_len - 1) | FZ_IMG_OP_ADD << 5);
        sb_u8 (&b, idx ? 0xff : 1);
        sb_save (&b, "image", "%s-%s-%u", sel[s], f->f_name, idx);
      }
  free (b.sb_p);
}

/* ---- seeds: send streams ---- */

static int
seeds_stream_write (void *arg, const void *buf, size_t len)
{
  sb_put (arg, buf, len);
  return 0;
}

/* A small volume's full and incremental streams (data, a hole, a trim
 * and an overwrite between the snapshots), for fuzz_stream: a flags
 * byte (0: resealed by the harness, 1: raw) and the stream. */
static void
seeds_stream (void)
{
  char dev[512];
  const char *devs[1] = { dev };
  zvol_pool_config_t pc;
  zvol_volume_params_t vp = { .vp_size = 1u << 20, .vp_blocksize = 4096 };
  zvol_pool_t *p;
  zvol_t *zv;
  sb_t b = { 0 };
  zvol_stream_io_t io = { .sio_write = seeds_stream_write, .sio_arg = &b };

  snprintf (dev, sizeof dev, "%s/work/s-0.img", out);
  if (tl_sparse_file (dev, 20ull << 20) < 0)
    die ("cannot create %s", dev);
  pool_cfg (&pc, devs, 1, NULL, true);
  pc.pc_volsize = 0;
  if (zvol_pool_open (&pc, &p) < 0 || zvol_volume_create (p, "s", &vp) < 0
      || zvol_open (p, "s", NULL, &zv) < 0)
    die ("creating the stream pool failed");
  vol_write (zv, 0, 8192, 11, 0);
  vol_write (zv, 64u << 10, 4096, 12, 0);
  vol_write (zv, (1u << 20) - 4096, 4096, 13, 0);
  if (zvol_close (zv) < 0 || zvol_snapshot_create (p, "s@a") < 0
      || zvol_open (p, "s", NULL, &zv) < 0)
    die ("snapshot failed");
  vol_write (zv, 4096, 4096, 14, 0);
  vol_write (zv, 512u << 10, 4096, 15, 0);
  if (zvol_trim (zv, 64u << 10, 4096, 0) < 0 || zvol_close (zv) < 0
      || zvol_snapshot_create (p, "s@b") < 0)
    die ("snapshot failed");
  for (unsigned raw = 0; raw < 2; raw++)
    for (unsigned incr = 0; incr < 2; incr++) {
      sb_u8 (&b, raw);
      if (zvol_send (p, "s@b", incr ? "s@a" : NULL, &io) < 0)
        die ("send failed");
      sb_save (&b, "stream", "%s%s", incr ? "incremental" : "full",
               raw ? "-raw" : "");
    }
  if (zvol_pool_close (p) < 0)
    die ("closing the stream pool failed");
  unlink (dev);
  free (b.sb_p);
}

/* ---- main ---- */

static void
seeds_from (const char *tag, unsigned ndevs, bool logdev)
{
  img_t im;
  img_map_t mp;
  img_slot_t slots[ZV_MAX_DEVS * ZV_NLABELS * ZV_UB_COUNT];
  size_t n;

  img_load (&im, tag, ndevs, logdev);
  n = img_scan (&im, slots, sizeof slots / sizeof slots[0], &mp);
  printf ("make_seeds: image %s: %zu whole uberblocks; %zu configurations, "
          "%zu objsets, %zu indirect, %zu space-map, %zu deferred-list, "
          "%zu log blocks, %zu records, %zu data blocks\n", tag, n,
          img_map_count (&mp, IK_CONFIG), img_map_count (&mp, IK_OBJSET),
          img_map_count (&mp, IK_INDIRECT), img_map_count (&mp, IK_SPACEMAP),
          img_map_count (&mp, IK_DEFER), img_map_count (&mp, IK_LWB),
          img_map_count (&mp, IK_LREC), img_map_count (&mp, IK_DATA));
  seeds_label (&im, &mp, tag);
  seeds_uberblock (&im, &mp, tag);
  seeds_blkptr (&im, &mp, slots, tag);
  seeds_tree (&im, slots, tag);
  seeds_spacemap (&im, &mp, slots, tag);
  seeds_zil (&im, &mp, slots, tag);
  seeds_dsrec (&im, slots, tag);
  img_map_free (&mp);
  for (unsigned d = 0; d < ndevs; d++)
    free (im.im_dev[d]);
  free (im.im_log);
}

int
main (int argc, char **argv)
{
  char path[512];

  if (argc != 2) {
    fprintf (stderr, "usage: make_seeds OUTDIR\n");
    return 2;
  }
  out = argv[1];
  zv_set_log_level (ZV_LOG_ERROR);
  snprintf (path, sizeof path, "%s/data", out);
  mkdir_p (path);
  snprintf (path, sizeof path, "%s/work", out);
  mkdir_p (path);

  make_pool ("a", 1, 20ull << 20, false);
  make_claimed ();
  make_pool ("b", 2, 17ull << 20, true);
  seeds_from ("a", 1, false);
  seeds_from ("a2", 1, false);
  seeds_from ("b", 2, true);
  seeds_name ();
  seeds_ctl ();
  seeds_image ();
  seeds_deadlist ();
  seeds_stream ();
  seeds_scanrec ();

  static const char *const work[] = { "a-0", "a2-0", "b-0", "b-1", "b-log" };
  for (unsigned i = 0; i < sizeof work / sizeof work[0]; i++) {
    snprintf (path, sizeof path, "%s/work/%s.img", out, work[i]);
    unlink (path);
  }
  snprintf (path, sizeof path, "%s/work", out);
  rmdir (path);
  return 0;
}
