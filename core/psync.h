/*
 * psync.h: the txg sync (psync.c), the txg engine's callback that writes
 * a txg of the pool to disk.
 */
#ifndef ZV_PSYNC_H
#define ZV_PSYNC_H

#include "pool.h"

/* Write txg to disk: the txg engine's callback (arg: the pool), and
 * create's txg 1. */
int zv_psync_txg (void *arg, uint64_t txg, zv_txg_sync_stats_t *st);

#endif /* ZV_PSYNC_H */
