/*
 * label.h: the two labels of every device: pool configuration and the
 * uberblock ring.
 */
#ifndef ZV_LABEL_H
#define ZV_LABEL_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#include "format.h"
#include "dev.h"

/*
 * Seal and write the configuration into both labels, and fill both rings
 * with empty uberblocks of the pool when cf_flags has ZV_CF_F_UB_EMPTY
 * (zeros without it, as before the flag).
 */
int zv_label_init (zv_dev_t *dev, const zv_config_phys_t *cf);

/*
 * Read the configuration.  Returns 0 with *cf from the first label copy
 * that verifies (and *nvalid the number that did), -ENOENT when no copy
 * carries the label magic (not a pool device), -EIO when copies carry the
 * magic but none verifies, -EINVAL when a copy verifies but its fields are
 * out of range; the reason is in err.
 */
int zv_label_read_config (zv_dev_t *dev, zv_config_phys_t *cf,
                          unsigned *nvalid, char *err, size_t errlen);

/* Check a configuration read from disk (bounds, names, sizes). */
int zv_label_config_check (const zv_config_phys_t *cf, char *err,
                           size_t errlen);

/*
 * Write uberblock 'ub' (sealed here) into slot txg % ZV_UB_COUNT of
 * label 'l' of every device.  The caller flushes.
 */
int zv_label_write_ub (zv_dev_t **devs, unsigned ndevs,
                       zv_uberblock_phys_t *ub, unsigned l);

/* A valid uberblock found on disk. */
typedef struct zv_ub_cand {
  zv_uberblock_phys_t uc_ub;
  unsigned uc_copies;        /* label slots holding this exact uberblock */
} zv_ub_cand_t;

/*
 * Collect every uberblock of a txg of pool 'guid' (ZV_UB_TXG below), from
 * every slot of every label of every device, newest first (txg, then
 * timestamp), identical copies merged.  Returns the count (at most max)
 * or a negative errno on an I/O failure of every copy.
 */
int zv_label_collect_ubs (zv_dev_t **devs, unsigned ndevs, uint64_t guid,
                          zv_ub_cand_t *cands, unsigned max);

/* What one copy of a ring slot holds. */
enum zv_ub_kind {
  ZV_UB_INVALID = 0,  /* does not verify, another pool's, a txg of another
                         slot, or flags this version does not know */
  ZV_UB_EMPTY,        /* an empty uberblock (no txg wrote it yet) */
  ZV_UB_TXG,          /* the uberblock of a txg */
};

/* One slot across every copy (each label of each device). */
typedef struct zv_ub_slot {
  unsigned us_copies;        /* copies read (readable labels) */
  unsigned us_valid;         /* copies that verify: a txg's or empty */
  unsigned us_empty;         /* of those, empty */
  uint64_t us_newest;        /* newest txg among them, 0 when none */
} zv_ub_slot_t;

/*
 * Fill slots[ZV_UB_COUNT] with what each slot holds in the rings of every
 * label of every device.  Returns the number of rings read, or -EIO when
 * none could be.
 */
int zv_label_ring_state (zv_dev_t **devs, unsigned ndevs, uint64_t guid,
                         zv_ub_slot_t *slots);

/*
 * Write an empty uberblock of pool 'guid' over every copy in label l (of
 * every device) that lies in a slot s with discard[s] set, or that holds
 * an uberblock newer (txg, then timestamp) than 'keep', the one imported;
 * discard[keep->ub_txg % ZV_UB_COUNT] must be false.  Returns the number
 * of copies written or a negative errno; the caller flushes.
 */
int zv_label_discard (zv_dev_t **devs, unsigned ndevs, uint64_t guid,
                      const zv_uberblock_phys_t *keep, const bool *discard,
                      unsigned l);

/*
 * Mirrors' resilver records (format.h): write one (NULL: clear) into
 * both labels of a side, placed by the mirror's size, and flush; read
 * the one that verifies and names the side cf describes.
 * zv_label_init_side labels a new side i of mirror dev (the configuration
 * of a side in service, with side number i; an empty ring) and gives
 * that configuration in *cf.
 */
int zv_label_write_resilver (zv_dev_t *side, uint64_t size,
                             const zv_resilver_phys_t *rs);
bool zv_label_read_resilver (zv_dev_t *side, uint64_t size,
                             const zv_config_phys_t *cf,
                             zv_resilver_phys_t *rs);
int zv_label_init_side (zv_dev_t *dev, unsigned i, zv_dev_t *side,
                        zv_config_phys_t *cf);

/* Seal: compute the checksum of a config / uberblock at 'offset'. */
void zv_label_seal_config (zv_config_phys_t *cf, uint64_t offset);
void zv_label_seal_ub (zv_uberblock_phys_t *ub, uint64_t offset);
bool zv_label_verify_config (const zv_config_phys_t *cf, uint64_t offset);
bool zv_label_verify_ub (const zv_uberblock_phys_t *ub, uint64_t offset);

#endif /* ZV_LABEL_H */
