/*
 * scan.h: verify, and repair, every copy of one block on every side of
 * its device (scan.c).  The scrub (check.c with repair on) calls it for
 * each block the check walk reaches.
 */
#ifndef ZV_SCAN_H
#define ZV_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include "zio.h"

/* Most sides a device may have that a scan verifies one by one (a
 * mirror has two or three; every other device one). */
#define ZV_SCAN_MAX_SIDES 4

/* What became of one copy on one side of its device. */
typedef struct zv_scan_slot {
  unsigned ss_copy;             /* bp_dva index */
  unsigned ss_side;             /* side of that copy's device */
  unsigned ss_nsides;
  zv_dev_t *ss_dev;             /* the side's device */
  int ss_err;                   /* 0, -EIO (read error), -EILSEQ (checksum) */
  unsigned ss_good;             /* the block's slots that verified (0: none
                                   to repair it from) */
  int ss_repair;                /* bad: 1 repaired, 0 not tried (no good
                                   copy, or repair off), -errno: the
                                   rewrite, its flush or the read back
                                   failed */
} zv_scan_slot_t;

/* Counts over a block's slots (what the scan did, for the report). */
typedef struct zv_scan_result {
  unsigned sr_slots;            /* copies times sides read */
  unsigned sr_good;             /* verified as read */
  unsigned sr_read_errors, sr_cksum_errors;
  unsigned sr_repaired, sr_repair_failed;
  unsigned sr_skipped;          /* sides out of service: not read */
} zv_scan_result_t;

/*
 * Read every copy of bp on every side in service of its device and
 * verify each against bp's checksum; buf (bp_psize bytes, sector
 * aligned) gets the stored bytes of one that verified.  With 'repair'
 * (and the tunable scan_repair on), each copy that failed is rewritten
 * in place from a verified one, its side flushed, and read back and
 * compared: the block's pointer and place stay as they are, so nothing
 * but that copy's own bytes is written.  'bad' (may be NULL) sees each
 * failed slot after its repair was tried.  Returns the slots that
 * verified as read (0: no copy verifies, buf holds nothing useful).
 * bp must have passed zv_zio_bp_check.
 */
unsigned zv_scan_block (zv_spa_t *spa, const zv_blkptr_t *bp, void *buf,
                        bool repair,
                        void (*bad) (void *arg, const zv_blkptr_t *bp,
                                     const zv_scan_slot_t *ss),
                        void *bad_arg, zv_scan_result_t *res);

/* The tunable scan_rate_max: bytes a second the background scrub may
 * read (0: no limit). */
uint64_t zv_scan_rate_max_get (void);
/* The tunable scan_yield_ms: how long the background scrub waits, at
 * most, before a block while client I/O is under way. */
unsigned zv_scan_yield_ms_get (void);

#endif /* ZV_SCAN_H */
