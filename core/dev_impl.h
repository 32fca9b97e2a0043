/*
 * dev_impl.h: private to the device layer (dev.c, dev_open.c, its RADOS
 * driver, dev_rados.c, and its mirrors, dev_mirror.c).  The rest of the
 * engine includes dev.h only.
 */
#ifndef ZV_DEV_IMPL_H
#define ZV_DEV_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "dev.h"

typedef struct zv_dev_rados zv_dev_rados_t;
typedef struct zv_dev_mirror zv_dev_mirror_t;

/*
 * A device (dev.c's theory comment).  Its fields are dev.c's and
 * dev_open.c's (which opens and closes it); the drivers go through the
 * accessors (zv_dev_rados_of, zv_dev_mirror_of, zv_dev_path, ...).
 */
struct zv_dev {
  char *dev_path;
  int dev_fd;
  uint64_t dev_size;                  /* bytes, multiple of ZV_SECTOR */
  bool dev_direct;                    /* opened with O_DIRECT */
  bool dev_blockdev;
  int dev_backing_fd;                 /* a loop device's locked file, or -1 */
  zv_dev_rados_t *dev_rados;          /* a RADOS device (dev_fd is -1) */
  zv_dev_mirror_t *dev_mirror;        /* a mirror (dev_fd is -1) */

  _Atomic uint64_t dev_reads, dev_writes, dev_flushes;
  _Atomic uint64_t dev_nread, dev_nwritten;
  /* Failed requests by kind (a flush's failure counts as a write's, as
   * in zpool status), and blocks read whole that failed their checksum
   * (zio.c tells us: only it knows). */
  _Atomic uint64_t dev_read_errors, dev_write_errors, dev_cksum_errors;

  /* Fault hook: the flag keeps the common (unset) case lock-free. */
  atomic_bool dev_fault_armed;
  pthread_mutex_t dev_fault_lock;     /* protects the pair below */
  zv_dev_fault_fn dev_fault_fn;
  void *dev_fault_arg;

  /* Observer hook: the pointer is the unset test; the pair is read
   * under dev_fault_lock. */
  _Atomic (zv_dev_observe_fn) dev_observe_armed;
  zv_dev_observe_fn dev_observe_fn;
  void *dev_observe_arg;
};

/* dev.c: a new device's structure, with the default observer; the
 * opener (dev_open.c) fills in what it learned. */
zv_dev_t *zv_dev_new (const char *path, int fd, uint64_t size);

/* dev_open.c: how long to wait for a device's lock (tunable
 * dev_lock_wait, in dev.c's table). */
extern unsigned zv_dev_lock_wait_ms;

/* dev.c's request steps, which the RADOS driver runs too, so the bounds
 * checks, the fault hook, the observer, the counters and the messages are
 * the same for every kind of device (theory comment of dev.c). */
bool zv_dev_io_start (zv_dev_io_t *io);
bool zv_dev_io_progress (zv_dev_io_t *io, uint32_t *donep, int res);
void zv_dev_io_observe_done (zv_dev_io_t *io);
zv_dev_rados_t *zv_dev_rados_of (const zv_dev_t *dev);
zv_dev_mirror_t *zv_dev_mirror_of (const zv_dev_t *dev);

/* dev_rados.c (see its theory comment). */
int zv_dev_rados_open (const char *path, const zv_dev_opts_t *opts,
                       zv_dev_rados_t **rp, uint64_t *sizep,
                       char *err, size_t errlen);
void zv_dev_rados_close (zv_dev_rados_t *r);
void zv_dev_rados_batch (zv_dev_io_t *ios, size_t n, unsigned cap);

/* dev_mirror.c (see its theory comment). */
int zv_dev_mirror_open (const char *path, const zv_dev_opts_t *opts,
                        zv_dev_mirror_t **mp, uint64_t *sizep,
                        bool *directp, char *err, size_t errlen);
void zv_dev_mirror_set_name (zv_dev_mirror_t *m, const char *name);
void zv_dev_mirror_close (zv_dev_mirror_t *m);
unsigned zv_dev_mirror_nsides (const zv_dev_mirror_t *m);
zv_dev_t *zv_dev_mirror_side (const zv_dev_mirror_t *m, unsigned i);
const char *zv_dev_mirror_side_path (const zv_dev_mirror_t *m, unsigned i);
bool zv_dev_mirror_side_ok (const zv_dev_mirror_t *m, unsigned i);
void zv_dev_mirror_fault_side (zv_dev_mirror_t *m, unsigned i,
                               const char *why);
void zv_dev_mirror_side_why (zv_dev_mirror_t *m, unsigned i, char *buf,
                             size_t len);
unsigned zv_dev_mirror_nok (const zv_dev_mirror_t *m);
bool zv_dev_mirror_may_repair (const zv_dev_mirror_t *m);
bool zv_dev_mirror_side_resilvering (const zv_dev_mirror_t *m, unsigned i);
int zv_dev_mirror_attach (zv_dev_mirror_t *m, unsigned i, zv_dev_t *side,
                          const char *path, char *err, size_t errlen);
void zv_dev_mirror_set_resilvering (zv_dev_mirror_t *m, unsigned i, bool on);
void zv_dev_mirror_batch (zv_dev_io_t *ios, size_t n,
                          const zv_dev_queue_t *q);

#endif /* ZV_DEV_IMPL_H */
