/*
 * dev.h: attached devices (regular files, block devices, RADOS
 * devices: "rados:CEPHPOOL/NAME", striped over objects of a Ceph cluster,
 * see dev_rados.c; or mirrors of files and block devices,
 * "mirror:A,B[,C]", see dev_mirror.c).
 *
 * A device is opened read-write with O_DIRECT where the file system takes
 * it (tmpfs does not: we fall back to buffered I/O), and locked
 * exclusively (flock LOCK_EX|LOCK_NB, plus O_EXCL for block devices; a
 * loop device also locks its backing file) so one pool is never imported
 * by two processes of this host.  I/O goes in batches:
 * zv_dev_io_batch_max() (zv_dev_io_batch() without a cap) issues a whole
 * batch and waits for every request before returning.  A batch goes
 * through the calling thread's own io_uring (liburing), created on first
 * use, except that a lone flush is an fdatasync() on the calling thread,
 * and that a thread where io_uring is unavailable runs its batches with
 * pread/pwrite/fdatasync instead.  Offsets and lengths are multiples of
 * ZV_SECTOR and buffers are ZV_SECTOR-aligned (zv_buf_get/zv_buf_alloc).
 */
#ifndef ZV_DEV_H
#define ZV_DEV_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

typedef struct zv_dev zv_dev_t;

/* Counters, for the txg history (nread/nwritten/reads/writes) and the
 * pool's health (the error counts, since the device was opened). */
typedef struct zv_dev_stats {
  uint64_t ds_reads, ds_writes, ds_flushes;
  uint64_t ds_nread, ds_nwritten;         /* bytes */
  uint64_t ds_read_errors, ds_write_errors;  /* failed requests (a flush
                                                 counts as a write) */
  uint64_t ds_cksum_errors;               /* blocks that did not verify */
} zv_dev_stats_t;

/* Count a checksum error against the device a block copy came from. */
void zv_dev_note_cksum_error (zv_dev_t *dev);

/*
 * Open and lock a device.  Returns 0 or a negative errno; on failure a
 * readable message is in err (with -EBUSY it names the holder where it
 * can be told: "FILE: in use by another process (device locked by process
 * 1234 (nbdkit), through /dev/loop0)").  A regular file that does not exist is an error
 * (-ENOENT): the caller creates files.  Size is the file size or the block
 * device size, rounded down to ZV_SECTOR.
 */
int zv_dev_open (const char *path, zv_dev_t **devp, char *err, size_t errlen);
/* Write zeros over the first size bytes of the regular file path and
 * make them durable (so the host file system allocates nothing later);
 * -EINVAL for anything but a regular file, else 0 or -errno.  Progress
 * ("preallocate", bytes done of size) at most once per percent. */
int zv_dev_file_fill (const char *path, uint64_t size,
                      void (*progress) (void *arg, const char *what,
                                        uint64_t done, uint64_t total),
                      void *arg);

/*
 * How to reach a RADOS device (unused for files and block devices).
 * NULL strings: librados' defaults (the configuration file it finds
 * ($CEPH_CONF, /etc/ceph/ceph.conf), client.admin, the keyring the
 * configuration names).
 */
typedef struct zv_dev_opts {
  const char *do_ceph_conf;
  const char *do_ceph_user;     /* "admin" or "client.admin" */
  const char *do_ceph_keyring;
  /* A RADOS device that does not exist yet is made with this size (bytes,
   * a multiple of ZV_SECTOR); 0: it must exist (-ENOENT). */
  uint64_t do_create_size;
  /* A RADOS device locked by another client: fence that client
   * (blocklist it), break its lock and take the device. */
  bool do_takeover;
  /* A mirror rewrites no side (a read-only import): a block read from
   * another side after a failure is used, never written back. */
  bool do_no_repair;
} zv_dev_opts_t;

/* zv_dev_open with options (opts may be NULL). */
int zv_dev_open_opts (const char *path, const zv_dev_opts_t *opts,
                      zv_dev_t **devp, char *err, size_t errlen);

/* The path names a RADOS device ("rados:" prefix). */
bool zv_dev_path_is_rados (const char *path);

/*
 * Mirrors (dev_mirror.c): "mirror:A,B[,C]" opens one device whose two or
 * three sides, files or block devices, hold the same bytes.  A side that
 * cannot be opened is faulted and the mirror opens degraded (the open
 * fails only when no side opens, or when a side is locked by another
 * process).  zv_dev_mirror_parse splits the name into its side paths
 * (each allocated; the caller frees them); -EINVAL with a message for a
 * name that is not a mirror of two or three distinct sides.
 */
#define ZV_MIRROR_PREFIX "mirror:"
#define ZV_MIRROR_MAX_SIDES 3u
bool zv_dev_path_is_mirror (const char *path);
int zv_dev_mirror_parse (const char *path, char **sides, unsigned *nsidesp,
                         char *err, size_t errlen);
bool zv_dev_is_mirror (const zv_dev_t *dev);
void zv_dev_close (zv_dev_t *dev);

const char *zv_dev_path (const zv_dev_t *dev);
uint64_t zv_dev_size (const zv_dev_t *dev);
bool zv_dev_is_direct (const zv_dev_t *dev);   /* O_DIRECT in use */
bool zv_dev_is_blockdev (const zv_dev_t *dev);
bool zv_dev_is_rados (const zv_dev_t *dev);
void zv_dev_get_stats (const zv_dev_t *dev, zv_dev_stats_t *out);

/*
 * The sides of a device.  A mirror (several devices holding the same
 * bytes) has two or three; every other device is its own single side.
 * zv_dev_side(dev, i) is a device that reads and writes side i alone (a
 * scrub verifies and repairs each copy through it; NULL for a side that
 * could not be opened); zv_dev_side_ok tells whether side i is in
 * service (opened and not faulted).  i < zv_dev_nsides(dev).
 * zv_dev_side_fault takes side i of a mirror out of service (a write to
 * it failed, its labels are not the pool's), logged once with 'why';
 * the mirror is degraded from then on.  zv_dev_side_path names side i
 * (a faulted one too); zv_dev_side_why says why it is faulted ("" when
 * it is not).  A side never comes back into service while the mirror is
 * open.
 */
unsigned zv_dev_nsides (const zv_dev_t *dev);
zv_dev_t *zv_dev_side (zv_dev_t *dev, unsigned i);
bool zv_dev_side_ok (const zv_dev_t *dev, unsigned i);
void zv_dev_side_fault (zv_dev_t *dev, unsigned i, const char *why);
const char *zv_dev_side_path (const zv_dev_t *dev, unsigned i);
void zv_dev_side_why (const zv_dev_t *dev, unsigned i, char *buf,
                      size_t len);
/* Sides in service (1 for a device that is not a mirror). */
unsigned zv_dev_nsides_ok (const zv_dev_t *dev);
/*
 * Replacing a side (resilver.c).  zv_dev_side_attach puts 'side' (open,
 * its labels written) in slot i of mirror dev, being resilvered: it takes
 * every write from then on and no read, and zv_dev_side_ok is false for
 * it until zv_dev_side_set_resilvering (dev, i, false) puts it in
 * service.  The device it replaces stays open until the mirror closes (a
 * batch may still hold it); 'side' is the mirror's from then on, also on
 * failure (closed).  zv_dev_side_set_resilvering (dev, i, true) marks a
 * side present at import as one a resilver is to finish.
 * zv_dev_side_resilvering: it is being resilvered (and not faulted).
 */
int zv_dev_side_attach (zv_dev_t *dev, unsigned i, zv_dev_t *side,
                        char *err, size_t errlen);
void zv_dev_side_set_resilvering (zv_dev_t *dev, unsigned i, bool on);
bool zv_dev_side_resilvering (const zv_dev_t *dev, unsigned i);

/* May a bad side be rewritten from a good one (false: opened with
 * do_no_repair)?  Always true for a device that is not a mirror. */
bool zv_dev_may_repair (const zv_dev_t *dev);

enum zv_dev_op { ZV_DEV_READ = 1, ZV_DEV_WRITE = 2, ZV_DEV_FLUSH = 3 };

/*
 * One request of a batch.  'di_result' is 0 or a negative errno.  A read
 * or write moves di_len bytes from or to di_buf, or, when di_iov is set,
 * from or to its di_iovcnt segments (each sector-aligned, summing to
 * di_len, at most IOV_MAX): a write of blocks that lie in different
 * buffers, with no copy.  The batch owns the segment array while it runs
 * and may rewrite it (to resume a short transfer).
 */
typedef struct zv_dev_io {
  zv_dev_t *di_dev;
  enum zv_dev_op di_op;
  void *di_buf;
  uint64_t di_offset;
  uint32_t di_len;
  int di_result;
  struct iovec *di_iov;
  unsigned di_iovcnt;
  uint32_t di_iov_done;         /* private: bytes di_iov was advanced by */
  void *di_observed;            /* private: the gathered copy observers see */
  void *di_owner;               /* the caller's: zv_dev_aio_reap hands it
                                   back with the request */
} zv_dev_io_t;

/*
 * Issue every request (through this thread's io_uring, or with plain
 * system calls where it has none; see above) and wait for all of them.
 * Short transfers are resumed; EINTR/EAGAIN are retried.  Returns 0 when
 * all succeeded, else the first negative errno (each request's own result
 * is in di_result).  Reads past the end of a device fail with -EIO, a
 * misaligned request stops the process.
 */
int zv_dev_io_batch (zv_dev_io_t *ios, size_t n);
/* The same with at most *max_active requests in flight at once (NULL or
 * 0: as many as the ring holds), so a long batch leaves the device room
 * for others.  *max_active is read again whenever a request completes:
 * another thread may change it while the batch runs. */
int zv_dev_io_batch_max (zv_dev_io_t *ios, size_t n,
                         const _Atomic unsigned *max_active);

/*
 * Two classes of I/O, as OpenZFS's vdev queue has: a batch of the lower
 * class (the txg sync's async writes) keeps at most *dq_max_active
 * requests in flight, and only dq_yield_active while *dq_yield_to (the
 * count of higher-class batches, the intent log's, under way) is nonzero
 * and *dq_max_active is at most dq_yield_below (above it, the writer
 * throttle or a filling log ring asked for speed, which wins).  All three
 * counters are read again whenever a request of the batch completes.
 */
typedef struct zv_dev_queue {
  const _Atomic unsigned *dq_max_active;  /* NULL or 0: the ring's size */
  const _Atomic unsigned *dq_yield_to;    /* NULL: never yield */
  unsigned dq_yield_active;               /* >= 1 */
  unsigned dq_yield_below;
  /* *dq_max_active times dq_scale (0 or 1: as is), but not above
   * dq_scale_max unless *dq_max_active is (small requests: see zio.c) */
  unsigned dq_scale, dq_scale_max;
} zv_dev_queue_t;
int zv_dev_io_batch_queue (zv_dev_io_t *ios, size_t n,
                           const zv_dev_queue_t *q);

/* Convenience wrappers for one request (writes are always batched). */
int zv_dev_read (zv_dev_t *dev, void *buf, uint64_t off, uint32_t len);

/* The engine's own threads call this last: the calling thread's ring goes
 * now rather than by the key's destructor at its exit, whose order
 * against the sanitizers' own (which stop scanning the thread) is not
 * set: LeakSanitizer called a ring freed that way a leak. */
void zv_dev_thread_exit (void);
/* Rings of threads in this process now (tests). */
uint64_t zv_dev_rings_live (void);
int zv_dev_flush (zv_dev_t *dev);

/*
 * One request started now and finished later, perhaps by another thread
 * (the intent log writes a block ahead on the thread of the write that
 * logged it, and the flush that follows, on any thread, waits for it).
 * io_uring cannot serve this: a completion is posted by the thread that
 * submitted the request, which may be asleep in a socket read by then;
 * the queue is a Linux AIO context instead, whose completions the
 * interrupt posts and any thread may reap.
 *
 * zv_dev_async_new: a queue for this process (NULL when the kernel has
 * no AIO context to give); free it with nothing in flight, in the
 * process that made it (a context is not inherited by a forked child).
 * zv_dev_async_ok: does the device take such requests (a local device
 * opened with O_DIRECT: elsewhere the kernel would do the work in the
 * submitting call)?  zv_dev_async_start: start one read or write (no
 * di_iov) on such a device; false, and nothing done, on any other.
 * True: the queue owns the request (it may already be finished: failed by
 * the fault hook, or done in place when the kernel refused to queue it)
 * until zv_dev_async_finish, which waits for it, completes a short
 * transfer in place and returns di_result.  At most one request is in
 * flight per queue, and start and finish never run at once: the caller
 * hands the queue from the one to the other (release, acquire).  The
 * observer sees the submit on the starting thread and the completion on
 * the finishing one.
 */
typedef struct zv_dev_async zv_dev_async_t;
/*
 * Many requests in flight, each finished by whichever thread reaps it
 * (a large write's blocks: the writer returns once they are on their
 * way, and the txg sync, or a commit that names one of them, reaps).
 * The same kind of queue (Linux AIO), on the same devices.
 *
 * zv_dev_aio_new: a queue for up to 'max' requests in flight (NULL when
 * the kernel gives none).  zv_dev_aio_start: start reads or writes
 * ios[0..n) (each on a device zv_dev_async_ok takes; di_iov allowed)
 * and return how many of them the queue now owes: those have
 * di_owner's value handed back by a later zv_dev_aio_reap.  Every other
 * request is finished on return, di_result saying how (the fault hook
 * failed it, or the kernel would not queue it and it ran in place).
 * zv_dev_aio_reap: finish up to 'max' owed requests (a short transfer
 * is completed in place), waiting for one at least when 'wait', and
 * store them in out[]; returns how many.  Only one thread reaps at a
 * time (the caller's lock).  A queue lasts as long as its process.
 */
typedef struct zv_dev_aio zv_dev_aio_t;
zv_dev_aio_t *zv_dev_aio_new (unsigned max);
size_t zv_dev_aio_start (zv_dev_aio_t *q, zv_dev_io_t *ios, size_t n);
size_t zv_dev_aio_reap (zv_dev_aio_t *q, bool wait, zv_dev_io_t **out,
                        size_t max);
bool zv_dev_async_ok (const zv_dev_t *dev);
zv_dev_async_t *zv_dev_async_new (void);
void zv_dev_async_free (zv_dev_async_t *aq);
bool zv_dev_async_start (zv_dev_async_t *aq, zv_dev_io_t *io);
int zv_dev_async_finish (zv_dev_async_t *aq, zv_dev_io_t *io);

/*
 * Fault injection, for tests only: when set, the hook sees each request
 * before it is issued and may return a negative errno to fail it (the
 * request is then not issued), or 0 to let it through.
 */
typedef int (*zv_dev_fault_fn) (void *arg, zv_dev_t *dev, enum zv_dev_op op,
                                uint64_t off, uint32_t len);
void zv_dev_set_fault (zv_dev_t *dev, zv_dev_fault_fn fn, void *arg);

/*
 * I/O observer, for tests only (a power-cut simulator sits on it).  It is
 * called on the thread that runs the batch:
 *   done == 0  when the request is really submitted: after the fault hook
 *              let it through, before the kernel sees it (a flush: only
 *              once every earlier request of its batch has completed);
 *   done == 1  when it has completed, in full or with an error ('result',
 *              0 or a negative errno); a short transfer resubmitted in
 *              pieces is still one submit and one completion.
 * off, len and buf are the whole request's (0, 0, NULL for a flush).  A
 * request the fault hook failed, or one with nothing to move, is never
 * seen.  The io_uring and the pread/pwrite paths report alike.
 *
 * zv_dev_set_observer (NULL, fn, arg) sets the observer that every device
 * opened from then on starts with (a test reaches the devices a pool opens
 * and replays on inside zvol_pool_open this way); it does not change the
 * devices already open.  fn == NULL clears.  Set a device's observer while
 * no I/O on it is in flight (a pool's direct writes are in flight until
 * reaped: zv_zio_pending_wait_all first).
 */
typedef void (*zv_dev_observe_fn) (void *arg, zv_dev_t *dev,
                                   enum zv_dev_op op, int done,
                                   uint64_t off, uint32_t len,
                                   const void *buf, int result);
void zv_dev_set_observer (zv_dev_t *dev, zv_dev_observe_fn fn, void *arg);

#endif /* ZV_DEV_H */
