/*
 * fuzz_blkptr: the checks every pointer and object descriptor read from
 * disk passes before anything follows it: zio's bounds checks of a block
 * pointer (zv_zio_bp_check, which zv_zio_read runs first), the shape
 * check of a dnode (zv_dmu_check_dnode), and the intent log's check of
 * an in-place record's pointer (zv_zil_ind_check, before a claim or a
 * replay reads the block), and the decompression of a stored block that
 * verified (zv_comp_decompress: hostile lengths and payloads).
 *
 * The input (fuzz_inputs.h) gives the pool's geometry (devices and where
 * their data areas end) and a list of pointers, dnodes and records.
 * Checked: what each check accepts is what its callers rely on, namely
 * every copy inside a device's data area, whole sectors, sizes the reads
 * can take, and tree shapes the walks can address.
 */
#include <config.h>

#include "fuzz.h"
#include "fuzz_inputs.h"
#include "zio.h"
#include "dmu.h"
#include "zil.h"
#include "compress.h"

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fz_setup ();
  return 0;
}

/* What zv_zio_read and every caller of zv_zio_bp_check rely on. */
static void
bp_check_accepted (const zv_spa_t *spa, const zv_blkptr_t *bp)
{
  if (zv_bp_is_hole (bp))
    return;
  FZ_CHECK (bp->bp_psize >= ZV_SECTOR && bp->bp_psize % ZV_SECTOR == 0
            && bp->bp_psize <= ZV_MAX_BLKSZ && bp->bp_lsize <= ZV_MAX_BLKSZ);
  FZ_CHECK (bp->bp_ncopies >= 1 && bp->bp_ncopies <= 2);
  FZ_CHECK (bp->bp_type > ZV_BT_NONE && bp->bp_type < ZV_BT_MAX);
  /* Compression: only volume data, a known algorithm, fewer bytes on
   * disk than it holds, in a pool with the feature; else whole. */
  if (bp->bp_comp == 0)
    FZ_CHECK (bp->bp_psize == bp->bp_lsize);
  else {
    FZ_CHECK (atomic_load (&spa->spa_features) & ZV_FEAT_COMPRESS);
    FZ_CHECK (bp->bp_comp < ZV_COMP_NALGS && bp->bp_type == ZV_BT_VOLDATA
              && bp->bp_level == 0 && bp->bp_psize < bp->bp_lsize
              && bp->bp_lsize % ZV_SECTOR == 0);
  }
  for (unsigned c = 0; c < bp->bp_ncopies; c++) {
    unsigned v = ZV_DVA_VDEV (bp->bp_dva[c]);
    uint64_t off = ZV_DVA_OFFSET (bp->bp_dva[c]);
    FZ_CHECK (v < spa->spa_ndevs);
    FZ_CHECK (off >= zv_data_start () && off % ZV_SECTOR == 0);
    FZ_CHECK (off + bp->bp_psize <= spa->spa_data_end[v]);
  }
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  fz_in_t in = fz_in (data, size);
  zv_spa_t spa;
  uint32_t blksz;

  memset (&spa, 0, sizeof spa);
  spa.spa_ndevs = 1 + fz_u8 (&in) % ZV_MAX_DEVS;
  for (unsigned d = 0; d < spa.spa_ndevs; d++)
    spa.spa_data_end[d] = (uint64_t) fz_u16 (&in) << 16;
  spa.spa_guid = TL_GUID;
  uint8_t g = fz_u8 (&in);
  blksz = ZV_MIN_VOLBLOCKSIZE << ((g & 0x7f) % 6);
  atomic_store (&spa.spa_features, g & 0x80 ? 0 : ZV_FEAT_COMPRESS);

  while (fz_more (&in)) {
    unsigned kind = fz_u8 (&in) % FZ_BP_NKINDS;
    zv_blkptr_t bp;
    zv_dnode_phys_t dn;
    zv_lr_t lr;
    uint8_t type;

    switch (kind) {
    case FZ_BP_PTR:
      fz_bytes (&in, &bp, sizeof bp);
      if (zv_zio_bp_check (&spa, &bp, "fuzz") == 0)
        bp_check_accepted (&spa, &bp);
      break;
    case FZ_BP_DNODE:
      type = fz_u8 (&in);
      fz_bytes (&in, &dn, sizeof dn);
      if (zv_dmu_check_dnode (&dn, type, "fuzz") == 0) {
        FZ_CHECK (dn.dn_type == type);
        FZ_CHECK (dn.dn_nlevels >= 1 && dn.dn_nlevels <= ZV_MAX_LEVELS);
        FZ_CHECK (dn.dn_datablksz >= ZV_SECTOR
                  && dn.dn_datablksz <= ZV_MAX_BLKSZ);
        FZ_CHECK (zv_dmu_nlevels (dn.dn_nblocks) <= dn.dn_nlevels);
        FZ_CHECK (zv_bp_is_hole (&dn.dn_root)
                  || dn.dn_root.bp_level == dn.dn_nlevels - 1);
      }
      break;
    case FZ_BP_IND:
      fz_bytes (&in, &lr, sizeof lr);
      fz_bytes (&in, &bp, sizeof bp);
      if (zv_zil_ind_check (&spa, &lr, &bp, blksz) == 0) {
        FZ_CHECK (!zv_bp_is_hole (&bp) && bp.bp_ncopies == 1
                  && bp.bp_level == 0 && bp.bp_type == ZV_BT_VOLDATA);
        FZ_CHECK (bp.bp_psize == blksz && bp.bp_lsize == blksz);
        FZ_CHECK (lr.lr_length == blksz && lr.lr_offset % blksz == 0);
        bp_check_accepted (&spa, &bp);
      }
      break;
    case FZ_BP_COMP: {
      unsigned alg = fz_u8 (&in);
      uint32_t psize = (uint32_t) (fz_u8 (&in) % 33) * ZV_SECTOR;
      uint32_t lsize = ZV_MIN_VOLBLOCKSIZE << (fz_u8 (&in) % 6);
      /* Exact sizes, so that any read or write past them is caught. */
      uint8_t *src = zv_calloc (1, psize ? psize : 1);
      uint8_t *dst = zv_alloc (lsize);
      fz_bytes (&in, src, psize);
      if (zv_comp_decompress (alg, src, psize, dst, lsize, "fuzz") == 0) {
        /* Accepted: a block a writer could have stored. */
        FZ_CHECK (psize >= ZV_SECTOR && psize < lsize);
        FZ_CHECK (alg == ZV_COMP_LZ4 || alg == ZV_COMP_ZSTD);
      }
      free (src);
      free (dst);
      break;
    }
    }
  }
  return 0;
}
