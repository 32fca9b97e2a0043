/*
 * check.h: the offline checker's hook into import's owner map
 * (check.c; the checker itself is zvol_pool_check, core/zvol.h).
 */
#ifndef ZV_CHECK_H
#define ZV_CHECK_H

#include <stdint.h>

#include "alloc.h"

typedef struct zv_check zv_check_t;

/* Who takes space: "volume 'v'" level 0 block 5 copy 1; copy 0 for an
 * owner that is no block (a deferred free, a log ring). */
typedef struct zv_check_who {
  const char *cw_what;
  unsigned cw_level;
  uint64_t cw_blkid;
  unsigned cw_copy;
} zv_check_who_t;

/*
 * import.c's import_take in a check: [dva, dva + size) gets its owner
 * in the map as import would give it, and what the map refuses (a
 * sector owned already, free, outside the pool) is recorded and the
 * import goes on.  Always 0.
 */
int zv_check_take (zv_check_t *ck, zv_alloc_t *a, const zv_check_who_t *who,
                   uint64_t dva, uint32_t size);
/* The uberblock being loaded failed: forget what its load recorded. */
void zv_check_forget (zv_check_t *ck);

#endif /* ZV_CHECK_H */
