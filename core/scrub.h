/*
 * scrub.h: the background scrub of a served pool (scrub.c; its public
 * side is zvol_scrub_*, core/zvol.h).
 */
#ifndef ZV_SCRUB_H
#define ZV_SCRUB_H

#include <stdint.h>

#include "format.h"

typedef struct zvol_pool zv_pool_t;
typedef struct zv_scrub zv_scrub_t;

/* The persisted place (format.h, zv_scan_phys_t). */
void zv_scrub_phys_seal (zv_scan_phys_t *sp, uint64_t guid);
/* A record read from disk (hostile): 0 all zero (no scrub), 1 one that
 * may be resumed, -EIO anything else (magic, version, checksum, a state,
 * phase or reserved field out of its range, counts that do not add up). */
int zv_scrub_phys_check (const zv_scan_phys_t *sp, uint64_t guid);
/* The txg sync: the record of the scrub as it is now (all zero when
 * none runs or is paused), sealed. */
void zv_scrub_phys_fill (zv_pool_t *p, zv_scan_phys_t *sp);
/* Import: the objset's record, checked (a bad one is said and
 * ignored).  The pool's start makes the scrub's state from it before
 * the txg thread starts (zv_scrub_pool_init: paused, its counts and
 * place) and resumes it after when it was scanning
 * (zv_scrub_pool_started). */
void zv_scrub_phys_load (zv_pool_t *p, const zv_scan_phys_t *sp);
void zv_scrub_pool_init (zv_pool_t *p);
void zv_scrub_pool_started (zv_pool_t *p);

/* The pool's close: the scrub stopped first (its views read the
 * devices, its hold keeps frees; the record written by the close's
 * last sync still says scanning, so the next start resumes it), its
 * state freed after the txg thread stopped. */
void zv_scrub_stop_for_close (zv_pool_t *p);
void zv_scrub_free (zv_pool_t *p);

#endif /* ZV_SCRUB_H */
