/*
 * fuzz_uberblock: the uberblock rings of a pool's devices, as import
 * collects them (zv_label_collect_ubs: every slot of both labels of
 * every device, verified, merged, the newest kept when there are more
 * than the caller takes, sorted newest first).
 *
 * The input (fuzz_inputs.h) is a list of uberblocks and the slots they
 * go into, each sealed at its slot's offset unless its flag says not.
 * Checked: no more candidates than asked for, each of the pool asked
 * for, in its right slot, never txg 0, no two the same, newest first;
 * and when every valid uberblock fits, none is lost.
 */
#include <config.h>

#include "fuzz.h"
#include "fuzz_inputs.h"
#include "label.h"

#define UB_MAXDEVS 2u
#define UB_MAXCAND (ZV_UB_COUNT * ZV_NLABELS * UB_MAXDEVS)

static fz_memdev_t fz_devs[UB_MAXDEVS];
static zv_dev_t *fz_dev[UB_MAXDEVS];

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fz_setup ();
  for (unsigned d = 0; d < UB_MAXDEVS; d++) {
    fz_memdev_create (&fz_devs[d], "ub", FZ_UB_DEVSIZE);
    fz_dev[d] = fz_memdev_open (&fz_devs[d]);
  }
  return 0;
}

static uint64_t
ub_slot_off (unsigned d, unsigned l, unsigned s)
{
  return zv_label_offset (fz_devs[d].md_size, l) + ZV_UB_RING_OFFSET
    + (uint64_t) s * ZV_UB_SIZE;
}

/* Newer (txg, then timestamp) than b? */
static int
ub_cmp (const zv_uberblock_phys_t *a, const zv_uberblock_phys_t *b)
{
  if (a->ub_txg != b->ub_txg)
    return a->ub_txg > b->ub_txg ? 1 : -1;
  if (a->ub_timestamp != b->ub_timestamp)
    return a->ub_timestamp > b->ub_timestamp ? 1 : -1;
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static zv_ub_cand_t cands[UB_MAXCAND];
  static uint8_t used[UB_MAXDEVS][ZV_NLABELS][ZV_UB_COUNT];
  fz_in_t in = fz_in (data, size);
  uint8_t h = fz_u8 (&in);
  unsigned ndevs = 1 + (h & 1);
  unsigned max = h >> 1 ? h >> 1 : UB_MAXCAND;
  uint64_t guid = fz_u64 (&in);
  int n;

  memset (used, 0, sizeof used);
  while (fz_more (&in)) {
    unsigned d = fz_u8 (&in) % ndevs;
    unsigned l = fz_u8 (&in) % ZV_NLABELS;
    unsigned s = fz_u8 (&in) % ZV_UB_COUNT;
    uint8_t f = fz_u8 (&in);
    uint64_t off = ub_slot_off (d, l, s);
    zv_uberblock_phys_t ub;

    fz_bytes (&in, &ub, sizeof ub);
    if (!(f & FZ_UB_RAW))
      zv_label_seal_ub (&ub, off);
    memcpy (fz_devs[d].md_map + off, &ub, sizeof ub);
    used[d][l][s] = 1;
  }

  max = ZV_MIN (max, UB_MAXCAND);
  n = zv_label_collect_ubs (fz_dev, ndevs, guid, cands, max);
  FZ_CHECK (n >= 0 && (unsigned) n <= max);
  for (int i = 0; i < n; i++) {
    const zv_uberblock_phys_t *ub = &cands[i].uc_ub;
    FZ_CHECK (ub->ub_pool_guid == guid && ub->ub_txg != 0
              && ub->ub_flags == 0);
    FZ_CHECK (ub->ub_magic == ZV_UB_MAGIC
              && ub->ub_version == ZV_FORMAT_VERSION);
    FZ_CHECK (cands[i].uc_copies >= 1
              && cands[i].uc_copies <= ndevs * ZV_NLABELS);
    if (i > 0)
      FZ_CHECK (ub_cmp (&cands[i - 1].uc_ub, ub) >= 0);
    /* It is in one of the slots of its txg, as it was sealed there. */
    unsigned s = ub->ub_txg % ZV_UB_COUNT, seen = 0;
    for (unsigned d = 0; d < ndevs; d++)
      for (unsigned l = 0; l < ZV_NLABELS; l++) {
        const zv_uberblock_phys_t *on =
          (const zv_uberblock_phys_t *) (fz_devs[d].md_map
                                         + ub_slot_off (d, l, s));
        seen += used[d][l][s] && on->ub_txg == ub->ub_txg
          && on->ub_timestamp == ub->ub_timestamp
          && memcmp (&on->ub_rootbp, &ub->ub_rootbp, sizeof ub->ub_rootbp)
          == 0 && zv_label_verify_ub (on, ub_slot_off (d, l, s));
      }
    FZ_CHECK (seen >= 1);
    for (int j = 0; j < i; j++)
      FZ_CHECK (cands[j].uc_ub.ub_txg != ub->ub_txg
                || cands[j].uc_ub.ub_timestamp != ub->ub_timestamp
                || memcmp (&cands[j].uc_ub.ub_rootbp, &ub->ub_rootbp,
                           sizeof ub->ub_rootbp) != 0);
  }
  /* Room for all: every slot that verifies for this pool is there. */
  if ((unsigned) n < max)
    for (unsigned d = 0; d < ndevs; d++)
      for (unsigned l = 0; l < ZV_NLABELS; l++)
        for (unsigned s = 0; s < ZV_UB_COUNT; s++) {
          uint64_t off = ub_slot_off (d, l, s);
          const zv_uberblock_phys_t *on =
            (const zv_uberblock_phys_t *) (fz_devs[d].md_map + off);
          bool found = false;
          if (!used[d][l][s] || !zv_label_verify_ub (on, off)
              || on->ub_pool_guid != guid || on->ub_txg == 0
              || on->ub_flags != 0 /* empty, or flags unknown: no txg */
              || on->ub_txg % ZV_UB_COUNT != s)
            continue;
          for (int i = 0; i < n && !found; i++)
            found = cands[i].uc_ub.ub_txg == on->ub_txg
              && cands[i].uc_ub.ub_timestamp == on->ub_timestamp
              && memcmp (&cands[i].uc_ub.ub_rootbp, &on->ub_rootbp,
                         sizeof on->ub_rootbp) == 0;
          FZ_CHECK (found);
        }

  for (unsigned d = 0; d < ndevs; d++)
    for (unsigned l = 0; l < ZV_NLABELS; l++)
      for (unsigned s = 0; s < ZV_UB_COUNT; s++)
        if (used[d][l][s])
          memset (fz_devs[d].md_map + ub_slot_off (d, l, s), 0, ZV_UB_SIZE);
  return 0;
}
