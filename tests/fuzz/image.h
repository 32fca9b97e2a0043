/*
 * image.h: a pool image in memory, walked as the format describes it
 * (docs/format.md), for the seed maker and the whole-image harness.
 *
 * An image is the bytes of every device of a pool (and of its log
 * device).  Three walks go over it, all from the uberblocks down, and
 * all bounded (a depth of ZV_MAX_LEVELS + 1, a budget of blocks, each
 * block visited once), since what they walk may be anything a fuzz input
 * made of it:
 *
 *   verify   does copy 0 of every block of a tree match its pointer's
 *            checksum?  Which uberblocks of a pristine image have whole
 *            trees: only those are resealed later.
 *   map      the list of every structure (configuration, uberblock,
 *            objset, indirect block, space-map and deferred-list block,
 *            log block, log record, data block) and where its copies
 *            are: the targets a fuzz input's patches name, and what the
 *            seed maker extracts.
 *   reseal   after patches: recompute every checksum bottom up (log
 *            blocks and the in-place blocks their records name, tree
 *            blocks into their parents' pointers, the objset into the
 *            uberblocks, each label block at its own offset), so that a
 *            patched field reaches the engine's field checks instead of
 *            stopping at a checksum.  Resealing a pristine image changes
 *            nothing (the harness checks that at start-up).
 *
 * The walks follow the pointers they find, not the pristine layout: a
 * pointer patched to name another block gets that block's checksum.
 * Header-only; nothing here is engine code, only its format.
 */
#ifndef ZV_FUZZ_IMAGE_H
#define ZV_FUZZ_IMAGE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "zv_util.h"
#include "format.h"
#include "alloc.h"
#include "label.h"

#ifndef IMG_FN
#define IMG_FN static __attribute__ ((unused))
#endif

typedef struct img {
  unsigned im_ndevs;
  uint8_t *im_dev[ZV_MAX_DEVS];   /* whole data devices */
  uint64_t im_size[ZV_MAX_DEVS];
  uint8_t *im_log;                /* the log device, or NULL */
  uint64_t im_logsize;
} img_t;

/* Bytes [off, off + len) of device vdev (ZV_LOG_VDEV: the log device)
 * if they are inside it, else NULL. */
IMG_FN uint8_t *
img_at (const img_t *im, unsigned vdev, uint64_t off, uint64_t len)
{
  uint8_t *base;
  uint64_t size;

  if (vdev == ZV_LOG_VDEV) {
    base = im->im_log;
    size = im->im_logsize;
  }
  else if (vdev < im->im_ndevs) {
    base = im->im_dev[vdev];
    size = im->im_size[vdev];
  }
  else
    return NULL;
  if (base == NULL || len > size || off > size - len)
    return NULL;
  return base + off;
}

/* The same for a block's address: sector-aligned too. */
IMG_FN uint8_t *
img_dva (const img_t *im, uint64_t dva, uint64_t len)
{
  if (ZV_DVA_OFFSET (dva) % ZV_SECTOR != 0)
    return NULL;
  return img_at (im, ZV_DVA_VDEV (dva), ZV_DVA_OFFSET (dva), len);
}

/* ---- the structures ---- */

enum img_kind {
  IK_CONFIG, IK_UB, IK_OBJSET, IK_INDIRECT, IK_SPACEMAP, IK_DEFER,
  IK_LWB, IK_LREC, IK_DATA, IK_DSDIR, IK_NKINDS
};

typedef struct img_item {
  uint8_t ii_kind;
  uint8_t ii_ncopies;
  uint8_t ii_level;
  uint64_t ii_dva[2];             /* copies: (vdev << 56) | offset */
  uint32_t ii_size;
  uint64_t ii_group;              /* uberblocks: the txg (its copies) */
} img_item_t;

typedef struct img_map {
  img_item_t *mp_items;
  size_t mp_n, mp_cap;
} img_map_t;

/* The items of one kind, in the order the walk found them. */
IMG_FN size_t
img_map_count (const img_map_t *mp, unsigned kind)
{
  size_t n = 0;

  for (size_t i = 0; i < mp->mp_n; i++)
    n += mp->mp_items[i].ii_kind == kind;
  return n;
}

IMG_FN const img_item_t *
img_map_get (const img_map_t *mp, unsigned kind, size_t idx)
{
  for (size_t i = 0; i < mp->mp_n; i++)
    if (mp->mp_items[i].ii_kind == kind && idx-- == 0)
      return &mp->mp_items[i];
  return NULL;
}

IMG_FN void
img_map_add (img_map_t *mp, unsigned kind, const uint64_t *dva,
             unsigned ncopies, uint32_t size, unsigned level, uint64_t group)
{
  img_item_t *it;

  ZV_GROW (mp->mp_items, mp->mp_n, mp->mp_cap, 64);
  it = &mp->mp_items[mp->mp_n++];
  memset (it, 0, sizeof *it);
  it->ii_kind = (uint8_t) kind;
  it->ii_ncopies = (uint8_t) ncopies;
  it->ii_level = (uint8_t) level;
  for (unsigned c = 0; c < ncopies && c < 2; c++)
    it->ii_dva[c] = dva[c];
  it->ii_size = size;
  it->ii_group = group;
}

IMG_FN void
img_map_free (img_map_t *mp)
{
  free (mp->mp_items);
  memset (mp, 0, sizeof *mp);
}

/* ---- the walks ---- */

enum img_mode { IMG_VERIFY, IMG_MAP, IMG_RESEAL };

#define IMG_SEEN_SLOTS 8192u       /* a power of two, twice the budget */
#define IMG_BUDGET 4096u

typedef struct img_walk {
  const img_t *iw_img;
  enum img_mode iw_mode;
  uint64_t iw_guid;               /* the pool's: tree checksums */
  img_map_t *iw_map;              /* IMG_MAP */
  bool iw_bad;                    /* IMG_VERIFY: a block did not match */
  /* IMG_RESEAL: told of every byte range it writes (may be NULL). */
  void (*iw_touch) (void *arg, const void *p, size_t len);
  void *iw_touch_arg;
  unsigned iw_budget;
  uint64_t iw_seen[IMG_SEEN_SLOTS];
} img_walk_t;

IMG_FN void
img_walk_init (img_walk_t *w, const img_t *im, enum img_mode mode,
               uint64_t guid, img_map_t *mp)
{
  memset (w, 0, sizeof *w);
  w->iw_img = im;
  w->iw_mode = mode;
  w->iw_guid = guid;
  w->iw_map = mp;
  w->iw_budget = IMG_BUDGET;
}

static inline void
img_touch (img_walk_t *w, const void *p, size_t len)
{
  if (w->iw_touch)
    w->iw_touch (w->iw_touch_arg, p, len);
}

/* Mark dva visited; false if it was already. */
IMG_FN bool
img_visit (img_walk_t *w, uint64_t dva)
{
  uint64_t h = (dva * 0x9e3779b97f4a7c15ull) >> 51;

  for (unsigned i = 0; i < IMG_SEEN_SLOTS; i++) {
    uint64_t *s = &w->iw_seen[(h + i) & (IMG_SEEN_SLOTS - 1)];
    if (*s == dva)
      return false;
    if (*s == 0) {
      *s = dva;
      return true;
    }
  }
  return false;
}

/* The copies of the block bp names that lie inside the image. */
IMG_FN unsigned
img_copies (const img_t *im, const zv_blkptr_t *bp, uint8_t **c)
{
  unsigned n = 0;

  c[0] = c[1] = NULL;
  if (zv_bp_is_hole (bp) || bp->bp_psize == 0 || bp->bp_psize > ZV_MAX_BLKSZ)
    return 0;
  for (unsigned k = 0; k < 2 && k < bp->bp_ncopies; k++)
    if ((c[k] = img_dva (im, bp->bp_dva[k], bp->bp_psize)) != NULL)
      n = k + 1;
  return c[0] ? n : 0;
}

/* What a block is, from its parent: the object it belongs to. */
enum img_obj { IO_OBJSET, IO_VOLUME, IO_DEFER, IO_SPACEMAP, IO_DSDIR,
               IO_DEADLIST };

IMG_FN unsigned
img_obj_kind (enum img_obj obj, unsigned level)
{
  switch (obj) {
  case IO_OBJSET: return IK_OBJSET;
  case IO_VOLUME: return level > 0 ? IK_INDIRECT : IK_DATA;
  case IO_DEFER: return IK_DEFER;
  case IO_SPACEMAP: return IK_SPACEMAP;
  case IO_DSDIR: return level > 0 ? IK_INDIRECT : IK_DSDIR;
  /* (A dead list is a flat object of raw entries, as a deferred list.) */
  case IO_DEADLIST: return IK_DEFER;
  }
  return IK_DATA;
}

IMG_FN void img_walk_bp_at (img_walk_t *w, zv_blkptr_t **locs,
                            unsigned nloc, enum img_obj obj, unsigned depth,
                            uint64_t idx);

/* A directory block: each record's volume tree, then (reseal) the
 * record's own checksum, seeded with its slot. */
IMG_FN void
img_walk_dsdir (img_walk_t *w, uint8_t **c, unsigned nc, uint64_t blkid,
                unsigned depth)
{
  for (unsigned r = 0; r < ZV_DSDIR_PER_BLK; r++) {
    zv_dsrec_phys_t *rec[2];
    zv_blkptr_t *cl[2];

    for (unsigned k = 0; k < nc; k++) {
      rec[k] = (zv_dsrec_phys_t *) (c[k] + r * ZV_DSREC_SIZE);
      cl[k] = &rec[k]->dr_volume.dn_root;
    }
    if (rec[0]->dr_magic != ZV_DSREC_MAGIC)
      continue;
    img_walk_bp_at (w, cl, nc, IO_VOLUME, depth + 1, 0);
    for (unsigned k = 0; k < nc; k++)
      cl[k] = &rec[k]->dr_deadlist.dn_root;
    img_walk_bp_at (w, cl, nc, IO_DEADLIST, depth + 1, 0);
    if (w->iw_mode != IMG_RESEAL)
      continue;
    for (unsigned k = 0; k < nc; k++) {
      memset (&rec[k]->dr_cksum, 0, sizeof rec[k]->dr_cksum);
      zv_cksum_compute (rec[k], sizeof *rec[k],
                        zv_dsrec_seed (w->iw_guid,
                                       blkid * ZV_DSDIR_PER_BLK + r),
                        &rec[k]->dr_cksum);
      img_touch (w, &rec[k]->dr_cksum, sizeof rec[k]->dr_cksum);
    }
  }
}

IMG_FN void
img_walk_bp (img_walk_t *w, zv_blkptr_t **locs, unsigned nloc,
             enum img_obj obj, unsigned depth)
{
  img_walk_bp_at (w, locs, nloc, obj, depth, 0);
}

/*
 * Visit the block that the pointer at locs[0] names (locs: the same
 * pointer in each copy of its parent; idx: its block number in its
 * object): its children first, then (reseal) its checksum into every
 * loc, or (verify) a check of it.
 */
IMG_FN void
img_walk_bp_at (img_walk_t *w, zv_blkptr_t **locs, unsigned nloc,
                enum img_obj obj, unsigned depth, uint64_t idx)
{
  zv_blkptr_t bp = *locs[0];
  uint8_t *c[2];
  unsigned nc = img_copies (w->iw_img, &bp, c);
  zv_cksum_t ck;

  if (nc == 0)
    return;
  if (depth <= ZV_MAX_LEVELS + 1 && w->iw_budget > 0
      && img_visit (w, bp.bp_dva[0])) {
    w->iw_budget--;
    if (w->iw_mode == IMG_MAP)
      img_map_add (w->iw_map, img_obj_kind (obj, bp.bp_level), bp.bp_dva,
                   nc, bp.bp_psize, bp.bp_level, 0);
    if (obj == IO_OBJSET && bp.bp_psize >= sizeof (zv_objset_phys_t)) {
      const zv_objset_phys_t *os0 = (const zv_objset_phys_t *) c[0];
      unsigned nsm = ZV_MIN (os0->os_ndevs, ZV_MAX_DEVS);
      for (unsigned j = 0; j < 3 + nsm; j++) {
        zv_blkptr_t *cl[2];
        for (unsigned k = 0; k < nc; k++) {
          zv_objset_phys_t *os = (zv_objset_phys_t *) c[k];
          cl[k] = j == 0 ? &os->os_dsdir.dn_root
            : j < 3 ? &os->os_defer[j - 1].dn_root
            : &os->os_spacemap[j - 3].dn_root;
        }
        img_walk_bp (w, cl, nc, j == 0 ? IO_DSDIR : j < 3 ? IO_DEFER
                     : IO_SPACEMAP, depth + 1);
      }
    }
    else if (obj == IO_DSDIR && bp.bp_level == 0
             && bp.bp_psize >= ZV_DSDIR_BLKSZ)
      img_walk_dsdir (w, c, nc, idx, depth);
    else if (obj != IO_OBJSET && bp.bp_level > 0
             && bp.bp_psize >= ZV_INDIRECT_SIZE) {
      for (unsigned i = 0; i < ZV_INDIRECT_FANOUT; i++) {
        zv_blkptr_t *cl[2];
        for (unsigned k = 0; k < nc; k++)
          cl[k] = (zv_blkptr_t *) c[k] + 1 + i;
        img_walk_bp_at (w, cl, nc, obj, depth + 1,
                        idx * ZV_INDIRECT_FANOUT + i);
      }
    }
  }
  zv_cksum_compute (c[0], bp.bp_psize, w->iw_guid, &ck);
  if (w->iw_mode == IMG_RESEAL)
    for (unsigned i = 0; i < nloc; i++) {
      locs[i]->bp_cksum = ck;
      img_touch (w, &locs[i]->bp_cksum, sizeof ck);
    }
  else if (!zv_cksum_equal (&ck, &bp.bp_cksum))
    w->iw_bad = true;
}

/* Checksum seed of log block seq of chain guid (docs/format.md). */
IMG_FN uint64_t
img_lwb_seed (uint64_t guid, uint64_t seq)
{
  return guid ^ (seq * 0x9e3779b97f4a7c15ull) ^ ZV_LWB_MAGIC;
}

/*
 * Walk the log chain a header names, as replay does, for as long as the
 * blocks carry the chain's magic and sequence numbers: map its blocks,
 * records and in-place blocks, or reseal them (the in-place blocks'
 * checksums into their records, then each block's own), or verify them.
 */
IMG_FN void
img_walk_log (img_walk_t *w, const zv_zil_header_t *zh)
{
  const img_t *im = w->iw_img;
  uint32_t bs = zh->zh_blksz;
  uint64_t ring, dva, seq;

  if (zh->zh_magic != ZV_ZIL_MAGIC || bs != ZV_ZIL_BLKSZ
      || zh->zh_nslots < 2 || zh->zh_nslots > (1u << 20))
    return;
  ring = zh->zh_nslots * (uint64_t) bs;
  if (zh->zh_head_pos % ring + bs > ring)
    return;
  dva = zh->zh_ring_dva + zh->zh_head_pos % ring;
  seq = zh->zh_head_seq;
  for (uint64_t n = 0; n < ring / ZV_SECTOR; n++, seq++) {
    zv_lwb_hdr_t *lh = (zv_lwb_hdr_t *) img_dva (im, dva, bs);
    uint32_t nused, len;
    uint64_t next;
    zv_cksum_t ck, want;
    bool mapping;

    if (lh == NULL || lh->lh_magic != ZV_LWB_MAGIC || lh->lh_seq != seq
        || lh->lh_version != ZV_FORMAT_VERSION)
      return;
    nused = ZV_MIN (lh->lh_nused, bs - (uint32_t) sizeof *lh);
    len = (uint32_t) ZV_P2ROUNDUP (sizeof *lh + nused, ZV_SECTOR);
    /* Two objsets may name one chain: map its blocks once (the tag bit
     * keeps log addresses apart from the tree's in the visited set). */
    mapping = w->iw_mode == IMG_MAP && img_visit (w, dva | 1ull << 55);
    if (mapping)
      img_map_add (w->iw_map, IK_LWB, &dva, 1, len, 0, seq);
    for (uint32_t p = 0; p + sizeof (zv_lr_t) <= nused;) {
      zv_lr_t *lr = (zv_lr_t *) ((uint8_t *) (lh + 1) + p);
      uint32_t rl = lr->lr_reclen;

      if (rl < sizeof *lr || rl % 8 != 0 || rl > nused - p)
        break;
      if (mapping) {
        uint64_t at = dva + sizeof *lh + p;
        img_map_add (w->iw_map, IK_LREC, &at, 1, rl, 0, seq);
      }
      if (lr->lr_type == 2 /* WRITE_IND */
          && rl >= sizeof *lr + sizeof (zv_blkptr_t)) {
        zv_blkptr_t *bp = (zv_blkptr_t *) (lr + 1);
        uint8_t *c[2];
        if (img_copies (im, bp, c) > 0) {
          if (mapping)
            img_map_add (w->iw_map, IK_DATA, bp->bp_dva, 1, bp->bp_psize, 0,
                         0);
          zv_cksum_compute (c[0], bp->bp_psize, w->iw_guid, &ck);
          if (w->iw_mode == IMG_RESEAL) {
            bp->bp_cksum = ck;
            img_touch (w, &bp->bp_cksum, sizeof ck);
          }
          else if (!zv_cksum_equal (&ck, &bp->bp_cksum))
            w->iw_bad = true;
        }
      }
      p += rl;
    }
    want = lh->lh_cksum;
    memset (&lh->lh_cksum, 0, sizeof lh->lh_cksum);
    zv_cksum_compute (lh, len, img_lwb_seed (zh->zh_guid, seq), &ck);
    lh->lh_cksum = w->iw_mode == IMG_RESEAL ? ck : want;
    if (w->iw_mode == IMG_RESEAL)
      img_touch (w, &lh->lh_cksum, sizeof ck);
    if (w->iw_mode != IMG_RESEAL && !zv_cksum_equal (&ck, &want))
      w->iw_bad = true;
    next = lh->lh_next_dva;
    if (ZV_DVA_VDEV (next) != ZV_DVA_VDEV (zh->zh_ring_dva)
        || next < zh->zh_ring_dva || next - zh->zh_ring_dva + bs > ring)
      return;
    dva = next;
  }
}

/* ---- labels ---- */

/* The uberblock slot s of label l of device d, or NULL. */
IMG_FN zv_uberblock_phys_t *
img_ub (const img_t *im, unsigned d, unsigned l, unsigned s, uint64_t *off)
{
  *off = zv_label_offset (im->im_size[d], l) + ZV_UB_RING_OFFSET
    + (uint64_t) s * ZV_UB_SIZE;
  return (zv_uberblock_phys_t *) img_at (im, d, *off, ZV_UB_SIZE);
}

/* The logs of every volume record under directory pointer bp (copy 0,
 * read only; bounded like the walks). */
IMG_FN void
img_dsdir_logs (img_walk_t *w, const zv_blkptr_t *bp, unsigned depth,
                unsigned *budget)
{
  uint8_t *c[2];

  if (depth > ZV_MAX_LEVELS + 1 || *budget == 0
      || img_copies (w->iw_img, bp, c) == 0)
    return;
  (*budget)--;
  if (bp->bp_level > 0 && bp->bp_psize >= ZV_INDIRECT_SIZE) {
    for (unsigned i = 0; i < ZV_INDIRECT_FANOUT; i++)
      img_dsdir_logs (w, (const zv_blkptr_t *) c[0] + 1 + i, depth + 1,
                      budget);
    return;
  }
  if (bp->bp_level != 0 || bp->bp_psize < ZV_DSDIR_BLKSZ)
    return;
  for (unsigned r = 0; r < ZV_DSDIR_PER_BLK; r++) {
    const zv_dsrec_phys_t *rec = (const zv_dsrec_phys_t *)
      (c[0] + r * ZV_DSREC_SIZE);
    if (rec->dr_magic == ZV_DSREC_MAGIC) {
      zv_zil_header_t zh = rec->dr_zil;
      img_walk_log (w, &zh);
    }
  }
}

/* The logs of the objset that root names. */
IMG_FN void
img_objset_logs (img_walk_t *w, const zv_blkptr_t *root)
{
  uint8_t *c[2];
  unsigned budget = 4096;

  if (img_copies (w->iw_img, root, c) > 0
      && root->bp_psize >= sizeof (zv_objset_phys_t)) {
    zv_blkptr_t d = ((const zv_objset_phys_t *) c[0])->os_dsdir.dn_root;
    img_dsdir_logs (w, &d, 0, &budget);
  }
}

/* The configuration block of label l of device d (ZV_LOG_VDEV: the log
 * device), or NULL. */
IMG_FN zv_config_phys_t *
img_config (const img_t *im, unsigned d, unsigned l, uint64_t *off)
{
  uint64_t size = d == ZV_LOG_VDEV ? im->im_logsize : im->im_size[d];

  *off = zv_label_offset (size, l);
  return (zv_config_phys_t *) img_at (im, d, *off, ZV_CONFIG_SIZE);
}

/* The pool guid the first readable configuration names, or 0. */
IMG_FN uint64_t
img_guid (const img_t *im)
{
  for (unsigned l = 0; l < ZV_NLABELS; l++) {
    uint64_t off;
    const zv_config_phys_t *cf = img_config (im, 0, l, &off);
    if (cf && cf->cf_magic == ZV_LABEL_MAGIC
        && cf->cf_version == ZV_CONFIG_VERSION)
      return cf->cf_pool_guid;
  }
  return 0;
}

/* A slot of an uberblock ring: which device, label and slot. */
typedef struct img_slot {
  uint8_t is_dev, is_label, is_slot;
} img_slot_t;

/* The uberblock slots that verify, newest first (txg), at most max;
 * returns how many. */
IMG_FN size_t
img_ub_slots (const img_t *im, img_slot_t *out, size_t max)
{
  size_t n = 0;

  for (unsigned d = 0; d < im->im_ndevs; d++)
    for (unsigned l = 0; l < ZV_NLABELS; l++)
      for (unsigned s = 0; s < ZV_UB_COUNT && n < max; s++) {
        uint64_t off;
        const zv_uberblock_phys_t *ub = img_ub (im, d, l, s, &off);
        if (ub && ub->ub_magic == ZV_UB_MAGIC && zv_label_verify_ub (ub, off))
          out[n++] = (img_slot_t) { (uint8_t) d, (uint8_t) l, (uint8_t) s };
      }
  /* Insertion sort, newest first: a few hundred entries at most. */
  for (size_t i = 1; i < n; i++)
    for (size_t j = i; j > 0; j--) {
      uint64_t o1, o2;
      const zv_uberblock_phys_t *a = img_ub (im, out[j - 1].is_dev,
                                             out[j - 1].is_label,
                                             out[j - 1].is_slot, &o1);
      const zv_uberblock_phys_t *b = img_ub (im, out[j].is_dev,
                                             out[j].is_label, out[j].is_slot,
                                             &o2);
      if (a->ub_txg >= b->ub_txg)
        break;
      img_slot_t t = out[j - 1];
      out[j - 1] = out[j];
      out[j] = t;
    }
  return n;
}

/* Does the whole tree of this uberblock, and its log chain, match its
 * checksums? */
IMG_FN bool
img_ub_whole (const img_t *im, uint64_t guid, zv_uberblock_phys_t *ub)
{
  img_walk_t *w = malloc (sizeof *w);
  zv_blkptr_t *loc = &ub->ub_rootbp;
  uint8_t *c[2];
  bool ok;

  img_walk_init (w, im, IMG_VERIFY, guid, NULL);
  img_walk_bp (w, &loc, 1, IO_OBJSET, 0);
  img_objset_logs (w, &ub->ub_rootbp);
  ok = !w->iw_bad && img_copies (im, &ub->ub_rootbp, c) > 0;
  free (w);
  return ok;
}

/*
 * Reseal the image: the log chains and trees of the given uberblock
 * slots (those whose trees were whole in the pristine image), then those
 * uberblocks, then every configuration block that carries the magic.
 */
IMG_FN void
img_reseal (const img_t *im, const img_slot_t *slots, size_t n,
            void (*touch) (void *, const void *, size_t), void *arg)
{
  img_walk_t *w = malloc (sizeof *w);
  uint64_t guid = img_guid (im);

  img_walk_init (w, im, IMG_RESEAL, guid, NULL);
  w->iw_touch = touch;
  w->iw_touch_arg = arg;
  /* The logs first: their blocks are in no tree, and the records' in-place
   * blocks are checksummed by the records. */
  for (size_t i = 0; i < n; i++) {
    uint64_t off;
    zv_uberblock_phys_t *ub = img_ub (im, slots[i].is_dev, slots[i].is_label,
                                      slots[i].is_slot, &off);
    if (ub->ub_magic == ZV_UB_MAGIC)
      img_objset_logs (w, &ub->ub_rootbp);
  }
  for (size_t i = 0; i < n; i++) {
    uint64_t off;
    zv_uberblock_phys_t *ub = img_ub (im, slots[i].is_dev, slots[i].is_label,
                                      slots[i].is_slot, &off);
    zv_blkptr_t *loc = &ub->ub_rootbp;
    if (ub->ub_magic != ZV_UB_MAGIC)
      continue;
    img_walk_bp (w, &loc, 1, IO_OBJSET, 0);
    zv_label_seal_ub (ub, off);
    img_touch (w, ub, sizeof *ub);
  }
  for (unsigned d = 0; d <= im->im_ndevs; d++)
    for (unsigned l = 0; l < ZV_NLABELS; l++) {
      uint64_t off;
      unsigned v = d == im->im_ndevs ? ZV_LOG_VDEV : d;
      zv_config_phys_t *cf = img_config (im, v, l, &off);
      if (cf && cf->cf_magic == ZV_LABEL_MAGIC) {
        zv_label_seal_config (cf, off);
        img_touch (w, cf, sizeof *cf);
      }
    }
  free (w);
}

/*
 * Map every structure: the configurations, the verifying uberblocks,
 * then from the given slots (newest first) their objsets, trees and log
 * chains.
 */
IMG_FN void
img_map_build (const img_t *im, const img_slot_t *slots, size_t n,
               img_map_t *mp)
{
  img_walk_t *w = malloc (sizeof *w);

  memset (mp, 0, sizeof *mp);
  img_walk_init (w, im, IMG_MAP, img_guid (im), mp);
  for (unsigned d = 0; d <= im->im_ndevs; d++)
    for (unsigned l = 0; l < ZV_NLABELS; l++) {
      uint64_t off;
      unsigned v = d == im->im_ndevs ? ZV_LOG_VDEV : d;
      if (img_config (im, v, l, &off)) {
        uint64_t dva = ZV_DVA_MAKE (v, off);
        img_map_add (mp, IK_CONFIG, &dva, 1, ZV_CONFIG_SIZE, 0, 0);
      }
    }
  for (size_t i = 0; i < n; i++) {
    uint64_t off;
    zv_uberblock_phys_t *ub = img_ub (im, slots[i].is_dev, slots[i].is_label,
                                      slots[i].is_slot, &off);
    uint64_t dva = ZV_DVA_MAKE (slots[i].is_dev, off);
    img_map_add (mp, IK_UB, &dva, 1, ZV_UB_SIZE, 0, ub->ub_txg);
  }
  for (size_t i = 0; i < n; i++) {
    uint64_t off;
    zv_uberblock_phys_t *ub = img_ub (im, slots[i].is_dev, slots[i].is_label,
                                      slots[i].is_slot, &off);
    zv_blkptr_t *loc = &ub->ub_rootbp;
    bool first = img_visit (w, ~ub->ub_rootbp.bp_dva[0]);
    img_walk_bp (w, &loc, 1, IO_OBJSET, 0);
    if (first)
      img_objset_logs (w, &ub->ub_rootbp);
  }
  free (w);
}

#endif /* ZV_FUZZ_IMAGE_H */
