/*
 * resilver.h: replacing a side of a mirror online and resilvering it
 * (resilver.c's theory comment).
 */
#ifndef ZV_RESILVER_H
#define ZV_RESILVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool.h"

typedef struct zv_resilver zv_resilver_t;

/*
 * Replace side OLD (its path as the pool shows it) of a mirror of the
 * pool by the device NEW, and start resilvering NEW in the background.
 * 0, or a negative errno with the reason in err (nothing changed).
 */
int zv_resilver_replace (zv_pool_t *p, const char *old, const char *new,
                         char *err, size_t errlen);
/* At the start of a read-write pool: resume a resilver an earlier run
 * left (a side with a resilver record).  0 or a negative errno. */
int zv_resilver_resume (zv_pool_t *p);
/* At close, before the devices close: stop the thread, its position
 * recorded for the next import. */
void zv_resilver_stop (zv_pool_t *p);
/* A resilver under way: its device, side, and bytes of the data area
 * done of the total; false when none is. */
bool zv_resilver_progress (zv_pool_t *p, unsigned *devp, unsigned *sidep,
                           uint64_t *donep, uint64_t *totalp);

#endif /* ZV_RESILVER_H */
