/*
 * zvol.h: the public face of the engine.  The nbdkit plugin (and the admin
 * tool) see only this header.
 *
 * A pool lives on one or more devices (files or block devices) and holds
 * one volume.  Every function returns 0 or a negative errno:
 *   -EIO      device error, or a block whose checksum does not verify
 *   -ENOSPC   the pool is full
 *   -EROFS    the pool was opened read-only
 *   -EINVAL   bad argument (out of range, bad configuration)
 *   -EBUSY    a device is in use by another process
 * with a readable message logged through the hook of zv_set_log().
 */
#ifndef ZVOL_H
#define ZVOL_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "zv_util.h"
#include "txg.h"

#define ZVOL_MAX_DEVS 16
#define ZVOL_DEFAULT_VOLBLOCKSIZE 16384u
#define ZVOL_MIN_VOLBLOCKSIZE 4096u
#define ZVOL_MAX_VOLBLOCKSIZE (128u * 1024)

typedef struct zvol_pool zvol_pool_t;
typedef struct zvol zvol_t;

typedef struct zvol_pool_config {
  const char *pc_devices[ZVOL_MAX_DEVS];
  unsigned pc_ndevices;
  bool pc_create;              /* create a new pool on the devices */
  bool pc_readonly;
  uint64_t pc_volsize;         /* create: volume size in bytes */
  uint32_t pc_volblocksize;    /* create: default 16 KiB */
  bool pc_sparse;              /* create: volume may exceed the pool */
  const char *pc_name;         /* create: pool name, default "zvol" */
  uint64_t pc_cache_size;      /* buffer cache limit, bytes (0: default) */
  zv_txg_tunables_t pc_txg;    /* zv_txg_tunables_default() first */
  /* The intent log. */
  const char *pc_logdevice;    /* separate log device; create adds it,
                                  import needs it if the pool has one */
  unsigned pc_sync;            /* ZVOL_SYNC_* */
  unsigned pc_logbias;         /* ZVOL_LOGBIAS_* */
  bool pc_flush_by_txg;        /* flush/FUA wait for a txg (no log) */
  uint64_t pc_zil_size;        /* create: log ring in the pool (0: auto) */
  /* Import progress (may be NULL): done out of total units. */
  void (*pc_progress) (void *arg, const char *what, uint64_t done,
                       uint64_t total);
  void *pc_progress_arg;
} zvol_pool_config_t;

#define ZVOL_SYNC_STANDARD 0u      /* flush and FUA are durable */
#define ZVOL_SYNC_ALWAYS   1u      /* every write is durable on return */
#define ZVOL_SYNC_DISABLED 2u      /* flush and FUA do nothing (unsafe) */
#define ZVOL_LOGBIAS_LATENCY    0u /* small writes copied into the log */
#define ZVOL_LOGBIAS_THROUGHPUT 1u /* data written in place, pointer logged */

/* Defaults for every field. */
void zvol_pool_config_init (zvol_pool_config_t *pc);

/*
 * Create (pc_create) or import the pool.  Nothing is written before every
 * check passed (devices exist, lockable, large enough, not part of another
 * pool for create; all present and of one pool for import).
 */
int zvol_pool_open (const zvol_pool_config_t *pc, zvol_pool_t **poolp);
/* Start the engine's threads (after nbdkit forks). */
int zvol_pool_start (zvol_pool_t *pool);
/* Sync everything, stop threads, release devices.  Returns first error. */
int zvol_pool_close (zvol_pool_t *pool);

/* The pool's volume; valid until zvol_pool_close. */
zvol_t *zvol_pool_volume (zvol_pool_t *pool);
const char *zvol_pool_name (zvol_pool_t *pool);
uint64_t zvol_pool_guid (zvol_pool_t *pool);

/* Write the txg history (OpenZFS txgs kstat columns). */
void zvol_pool_print_txgs (zvol_pool_t *pool, FILE *fp);
/* Space, cache and intent-log figures, one "name value" line each. */
void zvol_pool_print_stats (zvol_pool_t *pool, FILE *fp);
/* Wait until everything written so far is on disk. */
int zvol_pool_sync (zvol_pool_t *pool);

/* Volume I/O.  Any offset and length within the volume. */
#define ZVOL_FUA      0x1u   /* durable before returning */
#define ZVOL_MAY_TRIM 0x2u   /* zero: holes allowed */
#define ZVOL_FAST     0x4u   /* zero: fail -ENOTSUP unless fast */

uint64_t zvol_size (zvol_t *zv);
uint32_t zvol_blocksize (zvol_t *zv);
bool zvol_is_readonly (zvol_t *zv);
int zvol_read (zvol_t *zv, void *buf, uint64_t off, uint32_t len);
int zvol_write (zvol_t *zv, const void *buf, uint64_t off, uint32_t len,
                unsigned flags);
int zvol_flush (zvol_t *zv);
int zvol_trim (zvol_t *zv, uint64_t off, uint64_t len, unsigned flags);
int zvol_zero (zvol_t *zv, uint64_t off, uint64_t len, unsigned flags);

/* Extents: calls fn for ascending, contiguous ranges from 'off'. */
#define ZVOL_EXTENT_HOLE 0x1u   /* unallocated, reads as zeros */
typedef int (*zvol_extent_fn) (void *arg, uint64_t off, uint64_t len,
                               unsigned type);
int zvol_extents (zvol_t *zv, uint64_t off, uint64_t len, zvol_extent_fn fn,
                  void *arg);

#endif /* ZVOL_H */
