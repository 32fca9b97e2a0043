/*
 * scrub.h: the background scrub of a served pool (scrub.c; its public
 * side is zvol_scrub_*, core/zvol.h).
 */
#ifndef ZV_SCRUB_H
#define ZV_SCRUB_H

typedef struct zvol_pool zv_pool_t;
typedef struct zv_scrub zv_scrub_t;

/* Stop the pool's scrub, if one runs (it stays paused), and free its
 * state: the pool's close, before anything else stops. */
void zv_scrub_fini (zv_pool_t *p);

#endif /* ZV_SCRUB_H */
