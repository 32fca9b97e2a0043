/*
 * fuzz_tree: trees of indirect blocks as import reads them: the volume's
 * (zv_dmu_check_dnode, then zv_dmu_walk, which checks every pointer's
 * level, size, birth against its parent, fill and bounds, and every
 * indirect block's header), optionally read through the buffer cache as
 * a volume read does (zv_dmu_read_by_dnode); and the flat objects, the
 * space map (zv_flat_load into zv_alloc_chunk_load) and a deferred-free
 * list (zv_flat_load into zv_import_defer_load_block); and a dead list
 * (zv_deadlist_load, then every entry through zv_deadlist_iterate, then
 * an append, as a snapshot's destroy and the next sync would: its input
 * carries the record's dr_deadlist_bytes after the dnode).
 *
 * The input (fuzz_inputs.h) is a dnode and the blocks of its tree, block
 * k in slot k of a memory device; the harness reseals the tree (image.h:
 * every checksum recomputed bottom up, following the pointers as given)
 * so the input reaches the checks behind the checksums.  Checked: an
 * accepted tree's pointers are what the walks promise, and loading an
 * accepted flat object leaves an allocator whose accounting holds.
 */
#include <config.h>

#include "fuzz.h"
#include "fuzz_inputs.h"
#include "image.h"
#include "zio.h"
#include "dmu.h"
#include "flat.h"
#include "pool.h"
#include "import.h"
#include "deadlist.h"

static fz_memdev_t fz_small, fz_large;
static zv_dev_t *fz_dev_small, *fz_dev_large;
static img_walk_t fz_walk;
static zv_alloc_owners_t *tree_owners;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fz_setup ();
  fz_memdev_create (&fz_small, "tree", FZ_TREE_SMALL);
  fz_memdev_create (&fz_large, "tree-large", FZ_TREE_LARGE);
  fz_dev_small = fz_memdev_open (&fz_small);
  fz_dev_large = fz_memdev_open (&fz_large);
  return 0;
}

typedef struct tree_state {
  const zv_spa_t *ts_spa;
  const zv_dnode_phys_t *ts_dn;
  uint64_t ts_nvisited;
} tree_state_t;

/* Every pointer the walk hands on passed its checks. */
static int
tree_walk_cb (void *arg, const zv_blkptr_t *bp, unsigned level,
              uint64_t blkid, const void *data)
{
  tree_state_t *ts = arg;

  FZ_CHECK (level < ts->ts_dn->dn_nlevels);
  FZ_CHECK (bp->bp_level == level && !zv_bp_is_hole (bp));
  FZ_CHECK (bp->bp_psize == (level ? ZV_INDIRECT_SIZE
                             : ts->ts_dn->dn_datablksz));
  FZ_CHECK (bp->bp_birth != 0 && bp->bp_fill != 0);
  for (unsigned c = 0; c < bp->bp_ncopies; c++)
    FZ_CHECK (ZV_DVA_OFFSET (bp->bp_dva[c]) + bp->bp_psize
              <= ts->ts_spa->spa_data_end[ZV_DVA_VDEV (bp->bp_dva[c])]);
  ts->ts_nvisited++;
  return 0;
}

static int
tree_chunk_cb (void *arg, uint64_t blkid, const void *data)
{
  return zv_alloc_chunk_load (arg, 0, blkid, data);
}

/* A dead list's entries, as iterate hands them on: each one checked. */
typedef struct tree_dl {
  zv_spa_t *tc_spa;
  uint64_t tc_n, tc_bytes;
} tree_dl_t;

static int
tree_dl_cb (void *arg, const zv_deadlist_ent_t *e)
{
  tree_dl_t *tc = arg;

  FZ_CHECK (e->de_ncopies >= 1 && e->de_ncopies <= 2 && e->de_birth != 0);
  FZ_CHECK (e->de_level == 0 ? e->de_psize >= ZV_MIN_VOLBLOCKSIZE
            && e->de_psize <= ZV_MAX_BLKSZ
            : e->de_psize == ZV_INDIRECT_SIZE);
  for (unsigned c = 0; c < e->de_ncopies; c++)
    FZ_CHECK (zv_alloc_is_allocated (tc->tc_spa->spa_alloc, e->de_dva[c],
                                     e->de_psize));
  tc->tc_n++;
  if (e->de_level == 0)
    tc->tc_bytes += e->de_psize;
  return 0;
}

typedef struct tree_defer {
  zv_alloc_t *td_alloc;
  uint64_t td_txg, td_count;
} tree_defer_t;

static int
tree_defer_cb (void *arg, uint64_t blkid, const void *data)
{
  tree_defer_t *td = arg;

  return zv_import_defer_load_block (td->td_alloc, td->td_txg, td->td_count,
                                   blkid, data);
}

static void
tree_own_cb (void *arg, uint64_t dva, uint32_t size)
{
  bool *ok = arg;

  if (zv_alloc_owners_take (tree_owners, dva, size) < 0)
    *ok = false;
}

/* Import's ownership check of the list's entries. */
static bool
tree_owners_ok (zv_alloc_t *a, uint64_t txg)
{
  bool ok = true;

  tree_owners = zv_alloc_owners_create (a);
  zv_alloc_defer_foreach (a, txg, tree_own_cb, &ok);
  zv_alloc_owners_destroy (tree_owners);
  tree_owners = NULL;
  return ok;
}

/* The volume object, through the cache: a few blocks across the tree. */
static void
tree_read_volume (zv_spa_t *spa, const zv_dnode_phys_t *dn)
{
  zv_dbuf_cache_t *cache = zv_dbuf_cache_create (4u << 20);
  uint64_t nb = dn->dn_nblocks;
  uint64_t ids[] = { 0, 1, 254, 255, 256, nb / 2, nb - 1 };
  void *buf = zv_buf_alloc (dn->dn_datablksz);
  zv_object_t ob;

  zv_dmu_object_open (&ob, spa, cache, ZV_OBJ_VOLUME, dn);
  for (unsigned i = 0; i < sizeof ids / sizeof ids[0]; i++) {
    bool hole;
    int r;
    if (ids[i] >= nb)
      continue;
    r = zv_dmu_read_by_dnode (&ob, ids[i] * dn->dn_datablksz,
                              dn->dn_datablksz, buf);
    FZ_CHECK (r == 0 || r == -EIO);
    r = zv_dmu_block_is_hole (&ob, ids[i], &hole);
    FZ_CHECK (r == 0 || r == -EIO);
  }
  zv_dmu_object_close (&ob);
  zv_dbuf_cache_destroy (cache);
  zv_buf_free (buf);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  fz_in_t in = fz_in (data, size);
  unsigned obj = fz_u8 (&in) % FZ_TREE_NOBJS;
  uint8_t flags = fz_u8 (&in);
  bool big = flags & FZ_TREE_BIG;
  fz_memdev_t *md = big ? &fz_large : &fz_small;
  uint64_t start = zv_data_start (), end = zv_data_end (md->md_size);
  uint32_t used[FZ_TREE_SLOTS] = { 0 };
  zv_dnode_phys_t dn;
  zv_spa_t spa;
  unsigned nclaims;
  int r;

  fz_bytes (&in, &dn, sizeof dn);
  uint64_t dl_bytes = obj == FZ_TREE_DEADLIST ? fz_u32 (&in) : 0;
  memset (&spa, 0, sizeof spa);
  spa.spa_devs[0] = big ? fz_dev_large : fz_dev_small;
  spa.spa_ndevs = 1;
  spa.spa_guid = TL_GUID;
  spa.spa_data_end[0] = end;
  spa.spa_alloc = zv_alloc_create (1, &start, &end);

  /* Extents the deferred list's entries may name. */
  nclaims = fz_u8 (&in);
  for (unsigned i = 0; i < nclaims; i++) {
    uint64_t sec = fz_u32 (&in);
    uint32_t n = fz_u16 (&in);
    if (n > 0 && sec * ZV_SECTOR >= start
        && sec * ZV_SECTOR + (uint64_t) n * ZV_SECTOR <= end)
      zv_alloc_claim (spa.spa_alloc, ZV_DVA_MAKE (0, sec * ZV_SECTOR),
                      n * ZV_SECTOR);
  }
  for (unsigned k = 0; k < FZ_TREE_SLOTS && fz_more (&in); k++) {
    used[k] = ZV_MIN ((uint32_t) fz_u16 (&in), FZ_TREE_SLOTSZ);
    fz_bytes (&in, md->md_map + fz_tree_slot (k), used[k]);
  }
  if (!(flags & FZ_TREE_RAW)) {
    img_t im = { .im_ndevs = 1, .im_dev = { md->md_map },
                 .im_size = { md->md_size } };
    zv_blkptr_t *loc = &dn.dn_root;
    img_walk_init (&fz_walk, &im, IMG_RESEAL, TL_GUID, NULL);
    img_walk_bp (&fz_walk, &loc, 1, obj == FZ_TREE_VOLUME ? IO_VOLUME
                 : obj == FZ_TREE_SPACEMAP ? IO_SPACEMAP
                 : obj == FZ_TREE_DEADLIST ? IO_DEADLIST : IO_DEFER, 0);
  }

  if (obj == FZ_TREE_VOLUME) {
    tree_state_t ts = { .ts_spa = &spa, .ts_dn = &dn };
    r = zv_dmu_check_dnode (&dn, ZV_BT_VOLDATA, "volume");
    if (r == 0) {
      r = zv_dmu_walk (&spa, ZV_OBJ_VOLUME, &dn, false, tree_walk_cb, &ts);
      FZ_CHECK (r == 0 || r == -EIO);
      if (flags & FZ_TREE_READ)
        tree_read_volume (&spa, &dn);
    }
  }
  else if (obj == FZ_TREE_DEADLIST) {
    zv_deadlist_t dl;
    tree_dl_t tc = { .tc_spa = &spa };
    r = zv_deadlist_load (&dl, &spa, &dn, dl_bytes, "dead list");
    FZ_CHECK (r == 0 || r == -EIO);
    if (r == 0) {
      r = zv_deadlist_iterate (&dl, "dead list", tree_dl_cb, &tc);
      FZ_CHECK (r == 0 || r == -EIO);
      if (r == 0) {
        FZ_CHECK (tc.tc_n == dl.dl_n && tc.tc_bytes == dl.dl_bytes);
        /* The next kill appends after what was read. */
        zv_blkptr_t bp = { .bp_dva = { ZV_DVA_MAKE (0, start) },
                           .bp_psize = ZV_MIN_VOLBLOCKSIZE,
                           .bp_lsize = ZV_MIN_VOLBLOCKSIZE,
                           .bp_ncopies = 1, .bp_birth = 1, .bp_fill = 1 };
        r = zv_deadlist_append (&dl, &bp, dn.dn_txg + 1);
        FZ_CHECK (r == 0 || r == -EIO || r == -EFBIG);
        if (r == 0)
          FZ_CHECK (dl.dl_n == tc.tc_n + 1);
      }
    }
    zv_deadlist_fini (&dl);
  }
  else {
    bool sm = obj == FZ_TREE_SPACEMAP;
    tree_defer_t td = {
      .td_alloc = spa.spa_alloc, .td_txg = dn.dn_txg,
      .td_count = dn.dn_size / sizeof (zv_defer_ent_t),
    };
    zv_flat_t fl;
    zv_dnode_phys_t back;

    if (sm)
      zv_flat_init (&fl, &spa, ZV_OBJ_SPACEMAP0, ZV_BT_SPACEMAP,
                    ZV_ALLOC_CHUNK, zv_alloc_nchunks (spa.spa_alloc, 0));
    else
      zv_flat_init (&fl, &spa, ZV_OBJ_DEFER0, ZV_BT_DEFER, ZV_DEFER_BLKSZ,
                    (uint64_t) ZV_INDIRECT_FANOUT * ZV_INDIRECT_FANOUT);
    r = zv_flat_load (&fl, &dn, sm ? tree_chunk_cb : tree_defer_cb,
                      sm ? (void *) spa.spa_alloc : (void *) &td);
    FZ_CHECK (r == 0 || r == -EIO || r == -EINVAL);
    if (r == 0) {
      zv_alloc_space_t sp;
      zv_flat_phys (&fl, &back);
      FZ_CHECK (zv_bp_is_hole (&dn.dn_root)
                || memcmp (&back.dn_root, &dn.dn_root,
                           sizeof dn.dn_root) == 0);
      zv_alloc_get_space (spa.spa_alloc, &sp);
      FZ_CHECK (sp.as_allocated <= sp.as_total);
      /* The first syncs after import apply the list (T+2): its frees
       * must be frees the allocator can make, once import checked that
       * no two of them share a sector (import.c, import_own_meta). */
      if (!sm && tree_owners_ok (spa.spa_alloc, dn.dn_txg))
        zv_alloc_sync_begin (spa.spa_alloc, dn.dn_txg + ZV_TXG_DEFER);
    }
    zv_flat_fini (&fl);
  }

  zv_alloc_destroy (spa.spa_alloc);
  /* The reseal wrote only inside the blocks given. */
  for (unsigned k = 0; k < FZ_TREE_SLOTS; k++)
    memset (md->md_map + fz_tree_slot (k), 0, used[k]);
  return 0;
}
