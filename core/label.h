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

/* Seal and write the configuration into both labels; clear both rings. */
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
 * Collect every uberblock of pool 'guid' that verifies, from every slot of
 * every label of every device, newest first (txg, then timestamp),
 * identical copies merged.  Returns the count (at most max) or a negative
 * errno on an I/O failure of every copy.
 */
int zv_label_collect_ubs (zv_dev_t **devs, unsigned ndevs, uint64_t guid,
                          zv_ub_cand_t *cands, unsigned max);

/* Seal: compute the checksum of a config / uberblock at 'offset'. */
void zv_label_seal_config (zv_config_phys_t *cf, uint64_t offset);
void zv_label_seal_ub (zv_uberblock_phys_t *ub, uint64_t offset);
bool zv_label_verify_config (const zv_config_phys_t *cf, uint64_t offset);
bool zv_label_verify_ub (const zv_uberblock_phys_t *ub, uint64_t offset);

#endif /* ZV_LABEL_H */
