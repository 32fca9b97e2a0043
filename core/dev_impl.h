/*
 * dev_impl.h: private to the device layer (dev.c and its RADOS driver,
 * dev_rados.c).  The rest of the engine includes dev.h only.
 */
#ifndef ZV_DEV_IMPL_H
#define ZV_DEV_IMPL_H

#include "dev.h"

typedef struct zv_dev_rados zv_dev_rados_t;

/* dev.c's request steps, which the RADOS driver runs too, so the bounds
 * checks, the fault hook, the observer, the counters and the messages are
 * the same for every kind of device (theory comment of dev.c). */
bool zv_dev_io_start (zv_dev_io_t *io);
bool zv_dev_io_progress (zv_dev_io_t *io, uint32_t *donep, int res);
void zv_dev_io_observe_done (zv_dev_io_t *io);
zv_dev_rados_t *zv_dev_rados_of (const zv_dev_t *dev);

/* dev_rados.c (see its theory comment). */
int zv_dev_rados_open (const char *path, const zv_dev_opts_t *opts,
                       zv_dev_rados_t **rp, uint64_t *sizep,
                       char *err, size_t errlen);
void zv_dev_rados_close (zv_dev_rados_t *r);
void zv_dev_rados_batch (zv_dev_io_t *ios, size_t n, unsigned cap);

#endif /* ZV_DEV_IMPL_H */
