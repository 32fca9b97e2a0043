/*
 * fuzz_image: a whole pool, as a server meets it after a crash: import
 * (labels, uberblock choice and rewind, the objset and every tree, space
 * maps, deferred lists, the log header), the claim of the intent log,
 * the volume's open and replay, reads of the whole volume and its
 * extents, then writes, a flush, a trim and a zero on what was imported,
 * and the close (a txg sync over it all).
 *
 * The images are the seed maker's (tests/fuzz/make_seeds: a, a2, b, made
 * by the public API and left as kill -9 leaves them), held in memory
 * devices.  An input (fuzz_inputs.h) picks one and lists patches, each
 * naming a structure the image walker found in it (image.h: a
 * configuration, an uberblock, the objset, an indirect block, a space-map
 * or deferred-list block, a log block or record, a data block) or a raw
 * offset; after patching the harness reseals every checksum, so a
 * patched field meets the checks behind them.  After each input what the
 * patches, the reseal and the engine wrote is put back from the pristine
 * copy, so every input starts from the same image.
 *
 * Checked: every call returns one of its promised results; and with
 * FZ_IMG_REOPEN, a pool that imported, took writes, synced and closed
 * without an error imports and reads again without one (the engine must
 * never write what its own import refuses or rewinds past).
 */
#include <config.h>

#include "fuzz.h"
#include "fuzz_inputs.h"
#include "image.h"
#include "pool.h"

#define IMG_NSEL 3u
#define IMG_MAXSLOTS (ZV_MAX_DEVS * ZV_NLABELS * ZV_UB_COUNT)

typedef struct fz_image {
  const char *fi_tag;
  unsigned fi_ndevs;
  bool fi_logdev;
  bool fi_loaded;
  fz_memdev_t fi_md[ZV_MAX_DEVS + 1];   /* [fi_ndevs]: the log device */
  uint8_t *fi_pristine[ZV_MAX_DEVS + 1];
  img_t fi_img;
  img_slot_t fi_slots[IMG_MAXSLOTS];
  size_t fi_nslots;
  img_map_t fi_map;
} fz_image_t;

static fz_image_t fz_images[IMG_NSEL] = {
  { .fi_tag = "a", .fi_ndevs = 1 },
  { .fi_tag = "a2", .fi_ndevs = 1 },
  { .fi_tag = "b", .fi_ndevs = 2, .fi_logdev = true },
};

/* Byte ranges to put back after the input: device index, offset, len. */
typedef struct fz_range {
  unsigned fr_dev;
  uint64_t fr_off, fr_len;
} fz_range_t;

static fz_image_t *fz_cur;
static zvol_pool_t *fz_pool;            /* the pool img_run opened */
static fz_range_t *fz_ranges;
static size_t fz_nranges, fz_capranges;

static void
img_dirty (unsigned dev, uint64_t off, uint64_t len)
{
  ZV_GROW (fz_ranges, fz_nranges, fz_capranges, 256);
  fz_ranges[fz_nranges++] = (fz_range_t) { dev, off, len };
}

/* The reseal's writes (pointers into the memory devices). */
static void
img_touch_cb (void *arg, const void *p, size_t len)
{
  fz_image_t *fi = arg;
  const uint8_t *b = p;

  for (unsigned d = 0; d < fi->fi_ndevs + fi->fi_logdev; d++) {
    const fz_memdev_t *md = &fi->fi_md[d];
    if (b >= md->md_map && b + len <= md->md_map + md->md_size)
      img_dirty (d, (uint64_t) (b - md->md_map), len);
  }
}

/* The engine's writes, seen by the device layer's observer. */
static void
img_observe_cb (void *arg, zv_dev_t *dev, enum zv_dev_op op, int done,
                uint64_t off, uint32_t len, const void *buf, int result)
{
  fz_image_t *fi = fz_cur;

  if (op != ZV_DEV_WRITE || done || fi == NULL)
    return;
  for (unsigned d = 0; d < fi->fi_ndevs + fi->fi_logdev; d++)
    if (strcmp (zv_dev_path (dev), fi->fi_md[d].md_path) == 0)
      img_dirty (d, off, len);
}

static void
img_restore (fz_image_t *fi)
{
  for (size_t i = 0; i < fz_nranges; i++) {
    const fz_range_t *r = &fz_ranges[i];
    const fz_memdev_t *md = &fi->fi_md[r->fr_dev];
    uint64_t len = r->fr_off < md->md_size
      ? ZV_MIN (r->fr_len, md->md_size - r->fr_off) : 0;
    memcpy (md->md_map + r->fr_off, fi->fi_pristine[r->fr_dev] + r->fr_off,
            len);
  }
  fz_nranges = 0;
}

static void
img_load (fz_image_t *fi)
{
  img_t *im = &fi->fi_img;

  memset (im, 0, sizeof *im);
  im->im_ndevs = fi->fi_ndevs;
  for (unsigned d = 0; d < fi->fi_ndevs + fi->fi_logdev; d++) {
    char name[64], path[512];
    struct stat st;
    int fd;

    if (d == fi->fi_ndevs)
      snprintf (name, sizeof name, "%s-log.img", fi->fi_tag);
    else
      snprintf (name, sizeof name, "%s-%u.img", fi->fi_tag, d);
    fz_data_path (path, sizeof path, name);
    fd = open (path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 || fstat (fd, &st) < 0) {
      fprintf (stderr, "fuzz_image: cannot read %s (run make_seeds)\n", path);
      abort ();
    }
    fz_memdev_create (&fi->fi_md[d], name, (uint64_t) st.st_size);
    fi->fi_pristine[d] = zv_alloc ((size_t) st.st_size);
    if (pread (fd, fi->fi_pristine[d], (size_t) st.st_size, 0) != st.st_size)
      abort ();
    close (fd);
    memcpy (fi->fi_md[d].md_map, fi->fi_pristine[d], (size_t) st.st_size);
    if (d == fi->fi_ndevs) {
      im->im_log = fi->fi_md[d].md_map;
      im->im_logsize = fi->fi_md[d].md_size;
    }
    else {
      im->im_dev[d] = fi->fi_md[d].md_map;
      im->im_size[d] = fi->fi_md[d].md_size;
    }
  }
  /* Reseal from the uberblocks whose trees are whole. */
  size_t n = img_ub_slots (im, fi->fi_slots, IMG_MAXSLOTS), k = 0;
  uint64_t guid = img_guid (im);
  for (size_t i = 0; i < n; i++) {
    uint64_t off;
    zv_uberblock_phys_t *ub = img_ub (im, fi->fi_slots[i].is_dev,
                                      fi->fi_slots[i].is_label,
                                      fi->fi_slots[i].is_slot, &off);
    if (img_ub_whole (im, guid, ub))
      fi->fi_slots[k++] = fi->fi_slots[i];
  }
  fi->fi_nslots = k;
  img_map_build (im, fi->fi_slots, k, &fi->fi_map);
  /* Resealing the pristine image must change nothing: the walker
   * understands the format as the engine writes it. */
  img_reseal (im, fi->fi_slots, k, NULL, NULL);
  for (unsigned d = 0; d < fi->fi_ndevs + fi->fi_logdev; d++)
    if (memcmp (fi->fi_md[d].md_map, fi->fi_pristine[d],
                fi->fi_md[d].md_size) != 0) {
      fprintf (stderr, "fuzz_image: resealing image %s changed device %u\n",
               fi->fi_tag, d);
      abort ();
    }
  fi->fi_loaded = true;
  /* ZV_FUZZ_MAP=1: what the patches' (kind, index) name, for writing
   * inputs by hand. */
  if (getenv ("ZV_FUZZ_MAP"))
    for (unsigned kind = 0; kind < IK_NKINDS; kind++)
      for (size_t i = 0; i < img_map_count (&fi->fi_map, kind); i++) {
        const img_item_t *it = img_map_get (&fi->fi_map, kind, i);
        fprintf (stderr, "map %s: kind %u index %zu: level %u, %u bytes at "
                 "%u:%" PRIu64 " (%u copies), group %" PRIu64 "\n",
                 fi->fi_tag, kind, i, it->ii_level, it->ii_size,
                 ZV_DVA_VDEV (it->ii_dva[0]), ZV_DVA_OFFSET (it->ii_dva[0]),
                 it->ii_ncopies, it->ii_group);
      }
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fz_setup ();
  zv_dev_set_observer (NULL, img_observe_cb, NULL);
  for (unsigned i = 0; i < IMG_NSEL; i++)
    img_load (&fz_images[i]);
  return 0;
}

/* Apply one operation to len bytes at p. */
static void
img_apply (uint8_t *p, unsigned len, unsigned what, const uint8_t *data)
{
  uint64_t v = 0;

  switch (what) {
  case FZ_IMG_OP_SET:
    memcpy (p, data, len);
    break;
  case FZ_IMG_OP_XOR:
    for (unsigned i = 0; i < len; i++)
      p[i] ^= data[i];
    break;
  case FZ_IMG_OP_ADD:
    len = ZV_MIN (len, 8u);
    for (unsigned i = len; i-- > 0;)
      v = v << 8 | p[i];
    v += (uint64_t) (int64_t) (int8_t) data[0];
    for (unsigned i = 0; i < len; i++)
      p[i] = (uint8_t) (v >> (8 * i));
    break;
  case FZ_IMG_OP_FILL:
    memset (p, data[0], len);
    break;
  }
}

/* Patch len bytes at (device of dva, offset) if they are in the image. */
static void
img_patch_at (fz_image_t *fi, unsigned vdev, uint64_t off, unsigned len,
              unsigned what, const uint8_t *data)
{
  uint8_t *p = img_at (&fi->fi_img, vdev, off, len);
  unsigned d = vdev == ZV_LOG_VDEV ? fi->fi_ndevs : vdev;

  if (p == NULL)
    return;
  img_apply (p, len, what, data);
  img_dirty (d, off, len);
}

/* Where (kind, idx, off) is: device and offset of its copy c, and how
 * many bytes of the structure are left from there; false if none. */
static bool
img_locate (fz_image_t *fi, unsigned kind, unsigned idx, unsigned off,
            unsigned c, unsigned *vdev, uint64_t *at, uint64_t *left)
{
  size_t count = img_map_count (&fi->fi_map, kind);
  const img_item_t *it;

  if (count == 0)
    return false;
  it = img_map_get (&fi->fi_map, kind, idx % count);
  if (c >= it->ii_ncopies)
    return false;
  *vdev = ZV_DVA_VDEV (it->ii_dva[c]);
  *at = ZV_DVA_OFFSET (it->ii_dva[c]) + off % it->ii_size;
  *left = it->ii_size - off % it->ii_size;
  return true;
}

/* FZ_IMG_COPY: bytes of one structure over another's (every copy of the
 * target, from copy 0 of the source). */
static void
img_copy (fz_image_t *fi, fz_in_t *in)
{
  unsigned sk = fz_u8 (in) % IK_NKINDS, si = fz_u8 (in), so = fz_u16 (in);
  unsigned dk = fz_u8 (in) % IK_NKINDS, di = fz_u8 (in), dof = fz_u16 (in);
  unsigned len = (fz_u8 (in) & 63u) + 1, sv, dv;
  uint64_t sat, sleft, dat, dleft;
  uint8_t data[64];
  const uint8_t *src;

  if (!img_locate (fi, sk, si, so, 0, &sv, &sat, &sleft))
    return;
  len = (unsigned) ZV_MIN ((uint64_t) len, sleft);
  src = img_at (&fi->fi_img, sv, sat, len);
  if (src == NULL)
    return;
  memcpy (data, src, len);
  for (unsigned c = 0; c < 2; c++)
    if (img_locate (fi, dk, di, dof, c, &dv, &dat, &dleft))
      img_patch_at (fi, dv, dat, (unsigned) ZV_MIN ((uint64_t) len, dleft),
                    FZ_IMG_OP_SET, data);
}

static void
img_patch (fz_image_t *fi, fz_in_t *in)
{
  unsigned kind = fz_u8 (in), idx, off;
  uint8_t op;

  if (kind == FZ_IMG_COPY) {
    img_copy (fi, in);
    return;
  }
  idx = fz_u8 (in);
  off = fz_u16 (in);
  op = fz_u8 (in);
  unsigned len = (op & 31u) + 1u, what = (op >> 5) & 3u;
  uint8_t data[32];

  fz_bytes (in, data, what == FZ_IMG_OP_SET || what == FZ_IMG_OP_XOR
            ? len : 1);
  if (kind >= IK_NKINDS) {
    unsigned ndev = fi->fi_ndevs + fi->fi_logdev;
    unsigned d = idx % ndev;
    img_patch_at (fi, d == fi->fi_ndevs ? ZV_LOG_VDEV : d,
                  (uint64_t) off * 512, len, what, data);
    return;
  }
  size_t count = img_map_count (&fi->fi_map, kind);
  if (count == 0)
    return;
  const img_item_t *it = img_map_get (&fi->fi_map, kind, idx % count);
  uint64_t at = off % it->ii_size;
  len = (unsigned) ZV_MIN ((uint64_t) len, it->ii_size - at);
  if (kind == IK_UB && !(op & FZ_IMG_OP_COPY0)) {
    /* Every copy of this txg's uberblock. */
    for (size_t i = 0; i < count; i++) {
      const img_item_t *u = img_map_get (&fi->fi_map, IK_UB, i);
      if (u->ii_group == it->ii_group)
        img_patch_at (fi, ZV_DVA_VDEV (u->ii_dva[0]),
                      ZV_DVA_OFFSET (u->ii_dva[0]) + at, len, what, data);
    }
    return;
  }
  for (unsigned c = 0; c < it->ii_ncopies; c++) {
    if (c > 0 && (op & FZ_IMG_OP_COPY0))
      break;
    img_patch_at (fi, ZV_DVA_VDEV (it->ii_dva[c]),
                  ZV_DVA_OFFSET (it->ii_dva[c]) + at, len, what, data);
  }
}

static void
img_pool_cfg (fz_image_t *fi, zvol_pool_config_t *pc, bool readonly)
{
  zvol_pool_config_init (pc);
  for (unsigned d = 0; d < fi->fi_ndevs; d++)
    pc->pc_devices[d] = fi->fi_md[d].md_path;
  pc->pc_ndevices = fi->fi_ndevs;
  pc->pc_logdevice = fi->fi_logdev ? fi->fi_md[fi->fi_ndevs].md_path : NULL;
  pc->pc_readonly = readonly;
  pc->pc_cache_size = 4u << 20;
  pc->pc_txg.tt_timeout_ms = 3600 * 1000;
  pc->pc_txg.tt_dirty_max = 256u << 20;
}

static int
img_extent_cb (void *arg, uint64_t off, uint64_t len, unsigned type)
{
  return 0;
}

/* Read the whole volume and its extents. */
static void
img_read_all (zvol_t *zv)
{
  static uint8_t buf[1u << 20];
  uint64_t size = zvol_size (zv);
  int r;

  for (uint64_t off = 0; off < size; off += sizeof buf) {
    uint32_t len = (uint32_t) ZV_MIN ((uint64_t) sizeof buf, size - off);
    r = zvol_read (zv, buf, off, len);
    FZ_CHECK (r == 0 || r == -EIO);
  }
  r = zvol_extents (zv, 0, size, img_extent_cb, NULL);
  FZ_CHECK (r == 0 || r == -EIO);
}

/* Change the imported volume as a client would; true if all of it
 * succeeded. */
static bool
img_write_some (zvol_t *zv)
{
  static uint8_t buf[64u << 10];
  uint64_t size = zvol_size (zv);
  int r, bad = 0;

  if (size < (2u << 20))
    return false;
  tl_pat_fill (buf, 0, sizeof buf, 99);
  r = zvol_write (zv, buf, 0, 4096, ZVOL_FUA);
  FZ_CHECK (r == 0 || r == -EIO || r == -ENOSPC);
  bad |= r;
  r = zvol_write (zv, buf, 1u << 20, sizeof buf, 0);
  FZ_CHECK (r == 0 || r == -EIO || r == -ENOSPC);
  bad |= r;
  r = zvol_trim (zv, size - (1u << 20), 64u << 10, 0);
  FZ_CHECK (r == 0 || r == -EIO);
  bad |= r;
  r = zvol_zero (zv, size - (512u << 10), 32u << 10, 0);
  FZ_CHECK (r == 0 || r == -EIO || r == -ENOSPC);
  bad |= r;
  r = zvol_flush (zv);
  FZ_CHECK (r == 0 || r == -EIO);
  bad |= r;
  /* A few txgs, as a server's would follow: frees made now are applied
   * two txgs on (ZV_TXG_DEFER). */
  for (unsigned i = 0; i < 3; i++) {
    r = zv_pool_sync (fz_pool);
    FZ_CHECK (r == 0 || r == -EIO);
    bad |= r;
  }
  return bad == 0;
}

/* Import, open, read (and write); returns true if it all went cleanly. */
static bool
img_run (fz_image_t *fi, uint8_t flags, bool write)
{
  bool readonly = flags & FZ_IMG_RDONLY;
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;
  zvol_t *zv = NULL;
  bool clean = true;
  int r;

  img_pool_cfg (fi, &pc, readonly);
  r = zvol_pool_open (&pc, &p);
  FZ_CHECK (r == 0 || r == -EIO || r == -EINVAL);
  if (r < 0)
    return false;
  fz_pool = p;
  if (!(flags & FZ_IMG_POOLONLY)) {
    r = zvol_open (p, NULL, NULL, &zv);
    /* A record with the receive flag set is a receive a crash cut short:
     * a read-write import destroys its volume (then there is none to
     * open), a read-only one keeps it closed. */
    FZ_CHECK (r == 0 || r == -EIO || r == -ENOSPC || r == -ENOENT
              || r == -EBUSY);
    if (r == 0) {
      img_read_all (zv);
      if (write && !readonly)
        clean = img_write_some (zv);
      r = zvol_close (zv);
      FZ_CHECK (r == 0 || r == -EIO);
      clean &= r == 0;
    }
    else
      clean = false;
  }
  r = zvol_pool_close (p);
  FZ_CHECK (r == 0 || r == -EIO);
  fz_pool = NULL;
  return clean && r == 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  fz_in_t in = fz_in (data, size);
  uint8_t flags = fz_u8 (&in);
  fz_image_t *fi = &fz_images[(flags & FZ_IMG_SEL_MASK) % IMG_NSEL];

  fz_cur = fi;
  while (fz_more (&in))
    img_patch (fi, &in);
  if (!(flags & FZ_IMG_RAW))
    img_reseal (&fi->fi_img, fi->fi_slots, fi->fi_nslots, img_touch_cb, fi);

  fz_log_errors = 0;
  bool clean = img_run (fi, flags, true) && fz_log_errors == 0;
  if ((flags & FZ_IMG_REOPEN) && !(flags & (FZ_IMG_RDONLY | FZ_IMG_POOLONLY))
      && clean) {
    /* What the engine wrote over an image it accepted, replayed and read
     * whole without a word, it imports again without one: no rewind, no
     * refused block. */
    zvol_pool_config_t pc;
    zvol_pool_t *p = NULL;
    zvol_t *zv = NULL;

    img_pool_cfg (fi, &pc, false);
    FZ_CHECK (zvol_pool_open (&pc, &p) == 0);
    FZ_CHECK (zvol_open (p, NULL, NULL, &zv) == 0);
    img_read_all (zv);
    FZ_CHECK (zvol_close (zv) == 0);
    FZ_CHECK (zvol_pool_close (p) == 0);
    FZ_CHECK (fz_log_errors == 0);
  }

  img_restore (fi);
  fz_cur = NULL;
  return 0;
}
