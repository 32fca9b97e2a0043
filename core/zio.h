/*
 * zio.h: block I/O by block pointer.  Reads verify the checksum the
 * parent's pointer carries and fall back to the ditto copy; writes seal
 * the pointer (checksum) and issue every copy in one device batch.
 * The zv_spa_t is the I/O context every object carries: the pool's
 * devices, guid and allocator.
 */
#ifndef ZV_ZIO_H
#define ZV_ZIO_H

#include <stdint.h>
#include <stddef.h>
#include <stdbool.h>

#include "format.h"
#include "dev.h"
#include "alloc.h"

typedef struct zv_spa {
  zv_dev_t *spa_devs[ZV_MAX_DEVS];
  unsigned spa_ndevs;
  uint64_t spa_guid;
  zv_alloc_t *spa_alloc;
  uint64_t spa_data_end[ZV_MAX_DEVS];  /* per device, from the config */
  _Atomic unsigned spa_write_cap;      /* txg writes in flight at most
                                          (0: no cap): set at each sync's
                                          start, raised by the intent log
                                          while it runs */
  _Atomic unsigned spa_sync_io;        /* intent-log batches under way:
                                          txg writes yield meanwhile */
  _Atomic uint64_t spa_written[ZV_BT_MAX]; /* bytes written by block type,
                                          every copy; [ZV_BT_NONE]: the
                                          uberblocks */
  uint64_t spa_own_txg;                /* the txg imported (0: created):
                                          an indirect block born at or
                                          before it came off the disk, and
                                          its children are checked when it
                                          loads (dmu.c) */
  _Atomic uint64_t spa_aio_pending[4]; /* by txg & ZV_TXG_MASK: writes
                                          started for that txg and not
                                          finished (zv_zio_write_start) */
  uint32_t spa_version;                /* the objset's format version
                                          (ZV_POOL_VERSION, or 2 until
                                          upgraded) */
  _Atomic uint64_t spa_features;       /* ZV_FEAT_*: configuration's and
                                          objset's; set by create, import
                                          and upgrade */
} zv_spa_t;

/* Largest block the format allows (a volblock or an indirect block). */
#define ZV_MAX_BLKSZ (128u * 1024)

/* Does bp (checked by zv_zio_bp_check) hold a block of 'size' logical
 * bytes: stored whole, or compressed into fewer? */
static inline bool
zv_bp_size_is (const zv_blkptr_t *bp, uint32_t size)
{
  return bp->bp_lsize == size
    && (bp->bp_comp == 0 ? bp->bp_psize == size : bp->bp_psize < size);
}

/*
 * Read the block 'bp' points at into buf (bp_lsize bytes: a compressed
 * block is decompressed once its bytes on disk verify), trying each
 * copy until one verifies.  Returns 0, or -EIO with a message naming
 * 'what' when no copy is readable and intact.  Hostile pointers (bad
 * device, offset outside the data area, bad size) fail with -EIO.
 */
int zv_zio_read (zv_spa_t *spa, const zv_blkptr_t *bp, void *buf,
                 const char *what);
/* The same without the decompression: the bp_psize bytes as stored and
 * verified (a send stream carries compressed blocks so). */
int zv_zio_read_stored (zv_spa_t *spa, const zv_blkptr_t *bp, void *buf,
                        const char *what);
/* Read copy c of a pointer zv_zio_bp_check passed, without a message:
 * 0, -EIO (the device failed the read) or -EILSEQ (the checksum does not
 * verify).  The checker reads every copy this way. */
int zv_zio_read_copy (zv_spa_t *spa, const zv_blkptr_t *bp, unsigned c,
                      void *buf);

/*
 * Read n blocks at once: the first copy of each is read in one device
 * batch (all in flight together), and only a block whose first copy
 * fails or does not verify is read again through zv_zio_read (its other
 * copies, one at a time).  bps[i] must not be holes; whats[i] names
 * block i in messages.  Returns 0 or the first error; every block that
 * read and verified is in its buffer either way, and res[i] (res may be
 * NULL) gets block i's own result.
 */
int zv_zio_read_many (zv_spa_t *spa, const zv_blkptr_t *const *bps,
                      void *const *bufs, const char *const *whats,
                      int *res, size_t n);

/* Is every copy of bp inside a device's data area?  (sanity, import;
 * what NULL: no message) */
int zv_zio_bp_check (zv_spa_t *spa, const zv_blkptr_t *bp, const char *what);

/* One block to write: bp's dvas and sizes set; its checksum is filled in. */
typedef struct zv_zio_write {
  zv_blkptr_t *zw_bp;
  const void *zw_buf;
  const zv_cksum_t *zw_cksum;   /* zw_buf's checksum, or NULL: computed */
} zv_zio_write_t;

/* Txg writes in flight at once with this much dirty data (% of
 * dirty_max): 2 to 10, or what ZVOL_ZIO_WRITE_MAX_ACTIVE fixes (0: no
 * cap). */
unsigned zv_zio_write_max_active (unsigned dirty_pct);

/* Set spa_write_cap for a sync starting with dirty_pct of dirty_max. */
void zv_zio_write_cap_set (zv_spa_t *spa, unsigned dirty_pct);

/* Raise spa_write_cap (never lower it) to share_pct (at most 100) of the
 * way from the least to the most writes in flight; takes effect in the
 * writes already under way.  The intent log calls it as its ring fills. */
void zv_zio_write_cap_raise (zv_spa_t *spa, unsigned share_pct);

/* Around a batch of the intent log's writes and flushes: while one is
 * under way, the txg sync's writes keep fewer in flight (the sync-write
 * class goes first; see zio.c). */
void zv_zio_sync_io_begin (zv_spa_t *spa);
void zv_zio_sync_io_end (zv_spa_t *spa);

/* Seal and write every copy of n blocks; returns 0 or the first error. */
int zv_zio_write_many (zv_spa_t *spa, zv_zio_write_t *w, size_t n);

/*
 * Writes started and not waited for: a large write's blocks (dmu_write.c),
 * so that the writer returns once they are on their way, and its thread
 * neither sleeps for the device nor is woken again.  The same sealing
 * and joining as zv_zio_write_many, for txg; bufs[0..nbufs) (bufsize
 * bytes each) go back to the buffer cache once the writes are done.
 * On devices the asynchronous queue does not take (RADOS, mirrors,
 * without O_DIRECT), or where the kernel gives no queue, this is
 * zv_zio_write_many: *pp is NULL and the result is returned.  Else *pp
 * is a pending with one reference for the caller, and 0 is returned;
 * the result is known once the writes are reaped:
 *   zv_zio_pending_wait     waits for them, returns 0 or the first error
 *                           (logged)
 *   zv_zio_pending_done     the same without waiting: false if not yet
 *   zv_zio_pending_wait_txg waits for every pending of txg (the sync
 *                           does, before it adopts their blocks or
 *                           commits the txg, after which their space may
 *                           be given to others)
 *   zv_zio_pending_wait_all every txg's: before the devices close
 *   zv_zio_reap_some        finishes what has completed, if no other
 *                           thread is reaping, without waiting
 */
typedef struct zv_zio_pending zv_zio_pending_t;
int zv_zio_write_start (zv_spa_t *spa, uint64_t txg, zv_zio_write_t *w,
                        size_t n, void *const *bufs, size_t nbufs,
                        uint32_t bufsize, zv_zio_pending_t **pp);
void zv_zio_pending_hold (zv_zio_pending_t *p);
void zv_zio_pending_rele (zv_zio_pending_t *p);
int zv_zio_pending_wait (zv_zio_pending_t *p);
bool zv_zio_pending_done (const zv_zio_pending_t *p, int *resultp);
void zv_zio_pending_wait_txg (zv_spa_t *spa, uint64_t txg);
void zv_zio_pending_wait_all (zv_spa_t *spa);
void zv_zio_reap_some (void);

/* Flush every device's cache. */
int zv_zio_flush_all (zv_spa_t *spa);

/* Allocate the copies of a new block of 'size' bytes into bp. */
int zv_zio_alloc_bp (zv_spa_t *spa, zv_blkptr_t *bp, uint32_t size,
                     unsigned copies);
/* One copy, in open context for txg (the intent log's in-place blocks:
 * earlier txgs' syncs keep it out of their space maps, alloc.h). */
int zv_zio_alloc_bp_open (zv_spa_t *spa, zv_blkptr_t *bp, uint32_t size,
                          uint64_t txg);
/* Free every copy of bp: deferred to txg+2, or at once if born in txg. */
void zv_zio_free_bp (zv_spa_t *spa, const zv_blkptr_t *bp, uint64_t txg);
/* Free every copy of bp with txg, deferred even if born in txg: for a
 * block a durable log record may still point at until txg is on disk. */
void zv_zio_free_bp_deferred (zv_spa_t *spa, const zv_blkptr_t *bp,
                              uint64_t txg);

/*
 * Give a block its new pointer for txg (copy on write): a hole frees the
 * old copy; a block already born in txg is overwritten in place (no
 * committed uberblock can point at it); otherwise new space is allocated
 * and the old copy freed, deferred.  The checksum is set when written.
 */
int zv_zio_place_bp (zv_spa_t *spa, const zv_blkptr_t *old, zv_blkptr_t *bp,
                     bool hole, uint32_t size, unsigned level, uint8_t type,
                     uint64_t fill, unsigned copies, uint64_t txg);

#endif /* ZV_ZIO_H */
