/*
 * check.h: the offline checker's hook into import's owner map
 * (check.c; the checker itself is zvol_pool_check, core/zvol.h).
 */
#ifndef ZV_CHECK_H
#define ZV_CHECK_H

#include <stdint.h>

#include "alloc.h"
#include "zvol.h"

typedef struct zvol_pool zv_pool_t;

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

/*
 * A scrub in pieces (scrub.c): where it is, so that a walk stopped (a
 * pause, a stop of the server, the free hold grown too large) goes on
 * from there on a new view.  Trees are walked in the order of their
 * dataset ids: those with an id below cp_ds_id are done, and in tree
 * cp_ds_id the data bytes below cp_off.
 */
enum zv_check_phase {
  ZV_CHECK_PHASE_META = 0,      /* nothing done yet: the pool's objects */
  ZV_CHECK_PHASE_TREES,         /* the datasets' trees, from cp_ds_id */
  ZV_CHECK_PHASE_FREEQ,         /* what the queued frees hold */
  ZV_CHECK_PHASE_DONE,
};

typedef struct zv_check_pos {
  uint32_t cp_phase;            /* enum zv_check_phase */
  uint64_t cp_ds_id;
  uint64_t cp_off;
} zv_check_pos_t;

/*
 * One piece of a live scrub of p from *pos (which it moves on): the
 * live check's walk, with repair, on a view of the last committed txg.
 * Returns 0 when the walk reached its end (*pos is then DONE), or with
 * *pos where it stopped: -ECANCELED once *stop turns true, -EAGAIN when
 * the frees its hold keeps back pass a quarter of what a live check may
 * keep (once it verified a data block: the rest is left for the next
 * piece's view to import in) (scrub.c opens a new view and goes on), or the check's errors
 * (-EBUSY, -EROFS, -ENOSPC, a view that does not import).
 */
int zv_check_scrub_piece (zv_pool_t *p, zvol_check_report_t *rep,
                          const _Atomic bool *stop,
                          void (*progress) (void *arg, const char *what,
                                            uint64_t done, uint64_t total),
                          void *progress_arg, zv_check_pos_t *pos);

#endif /* ZV_CHECK_H */
