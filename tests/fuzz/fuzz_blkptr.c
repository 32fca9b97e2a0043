/*
 * fuzz_blkptr: the checks every pointer and object descriptor read from
 * disk passes before anything follows it: zio's bounds checks of a block
 * pointer (zv_zio_bp_check, which zv_zio_read runs first), the shape
 * check of a dnode (zv_dmu_check_dnode), and the intent log's check of
 * an in-place record's pointer (zv_zil_ind_check, before a claim or a
 * replay reads the block).
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
  blksz = ZV_MIN_VOLBLOCKSIZE << (fz_u8 (&in) % 6);

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
    }
  }
  return 0;
}
