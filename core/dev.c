/*
 * dev.c: attached devices (regular files and block devices): the
 * device structure, its accessors, counters and test hooks, and its
 * I/O.  Opening, locking and closing are dev_open.c's; RADOS devices
 * ("rados:CEPHPOOL/NAME") are dev_rados.c's, mirrors dev_mirror.c's.
 *
 * Theory
 * ------
 * Three kinds of device share this structure and its request steps
 * (zv_dev_io_start: checks, fault hook, observer; zv_dev_io_progress:
 * counters, messages): local ones (opened by dev_open.c, their I/O
 * below), RADOS ones, whose open, lock and batches dev_rados.c does
 * (dev_rados set, dev_fd -1), and mirrors (dev_mirror set, dev_fd -1),
 * whose sides are local devices: a batch that names a mirror goes to
 * dev_mirror.c, which turns it into a batch of its sides' requests and
 * comes back here with it.  Any other batch
 * goes to the driver of its devices' kind; a pool mixes no kinds (pool.c
 * refuses it), so neither does a batch.
 *
 * A zv_dev_t (struct zv_dev, dev_impl.h: its fields are dev.c's and
 * dev_open.c's) is an open, locked file descriptor plus a few immutable
 * facts learned at open time (path, size, O_DIRECT or not, block device
 * or not), atomic counters and the optional test hooks (fault, observer).
 * Nothing in it changes after zv_dev_open() except the counters and the
 * hooks, so any number of threads may issue I/O on it without a lock.
 * The caller must not call zv_dev_close() while I/O on the device is in
 * progress.
 *
 * I/O.  Every request goes through zv_dev_io_batch_max() (which
 * zv_dev_io_batch() and the one-request wrappers call), but the single
 * asynchronous ones below ("Asynchronous requests").  Each thread owns
 * one io_uring (zv_dev_ring_t), created the first time the thread issues
 * a batch and torn down by a pthread key destructor when the thread
 * exits.  Rings are not shared, so no lock guards them, and one ring
 * serves every device (each SQE carries its fd).  A batch is driven
 * by one loop:
 *
 *     start(io) --invalid/faulted--> done (di_result < 0)
 *        |
 *        v
 *     queued SQE --submit--> in flight --CQE--> progress(io, res)
 *                              ^                  |  full transfer: done
 *                              |                  |  error: done (logged)
 *                              +---- short, EAGAIN, EINTR: requeue rest
 *
 * At most zv_dev_ring_entries requests are in flight (fewer when the
 * caller's queue says so, re-read at every completion: its *max_active,
 * or its yield cap while a batch of the class it yields to is under
 * way; see "Classes" below), so the
 * completion queue (twice the size of the submission queue) can never
 * overflow; larger batches go in waves as completions free slots.  The
 * identity of a request and its progress travel in the SQE's user_data
 * (index << 32 | bytes done), so the driver needs no memory of its own.
 *
 * Order.  Reads and writes of one batch run concurrently, in any order.
 * A flush is a barrier inside its batch: it is issued only once every
 * earlier read and write of the batch has completed (resubmitted pieces
 * included), and later reads and writes wait until it completes.  Adjacent
 * flushes (say, one per device) go out together; a lone flush is an
 * fdatasync on the calling thread (io_uring would run it on a worker
 * thread: two thread switches more per log commit).  A vectored request
 * (di_iov) is a readv/writev; a short transfer advances its segments in
 * place.
 *
 * Classes.  Rings are per thread, so there is no shared queue to sort
 * by priority; instead a batch of the lower class (the txg sync's
 * writes, zv_dev_io_batch_queue) looks at a counter the higher class
 * (the intent log's writes and flushes) raises for as long as its batch
 * runs, and while it is nonzero keeps only dq_yield_active requests in
 * flight.  A log block then waits at the device behind that many txg
 * writes, not the whole cap, and its flush (which, on one file, makes
 * every completed write durable) has fewer new txg writes to carry.
 * What is already in flight is not recalled.  The yield is off when the
 * cap was raised above dq_yield_below: dirty data near the throttle or a
 * filling log ring needs the sync to finish more than a commit needs the
 * device.
 *
 * Observer (tests).  zv_dev_io_start() reports a request to the observer
 * right after the fault hook let it through, so the observer runs before
 * the kernel sees the request (the SQE is only prepared then); both
 * drivers report its completion once zv_dev_io_progress() finished it.
 * A flush reaches zv_dev_io_start() only when every earlier request of
 * its batch has completed, so its submit event comes after their
 * completion events.  The pointer test is the only cost when unset.
 *
 * Asynchronous requests (zv_dev_async_*, dev.h): one read or write
 * started by one thread and finished by another (the intent log's block
 * written ahead by a write and finished by the flush that follows).  An
 * io_uring completion is posted by task work of the thread that submitted
 * the request, which may be asleep in a socket read by then; a Linux AIO
 * context's completion is posted by the interrupt, and any thread may
 * reap it, so these go through an AIO context (one request in flight per
 * queue; O_DIRECT local devices only, where io_submit does not do the
 * transfer itself).  They take the same start and progress steps as a
 * batch's requests: the fault hook and the submit event on the starting
 * thread, the completion event on the finishing one; a short transfer,
 * or one the kernel would not queue, is completed in place with
 * pread/pwrite.
 *
 * Fallback.  Where io_uring_queue_init() fails (ENOSYS under a seccomp
 * sandbox, EPERM with kernel.io_uring_disabled, a kernel without the
 * opcodes we need), the thread remembers it and runs its batches with
 * pread/pwrite/fdatasync, in order, through the same start and progress
 * steps.  This is logged once per process.  So do the batches of any
 * thread once the library's destructor deleted the rings' key (exit with
 * a pool still open, or unloading): dev_ring_get.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <linux/aio_abi.h>

#include <liburing.h>

#include "zv_util.h"
#include "tunable.h"
#include "dev_impl.h"

/*
 * Tunable: entries of each thread's ring, and so the most requests one
 * thread keeps in flight.  Read when a thread creates its ring.
 */
unsigned zv_dev_ring_entries = 64;

/* This thread's ring, or the note that it has none (fallback). */
typedef struct zv_dev_ring {
  bool dr_uring;                      /* false: pread/pwrite/fdatasync */
  unsigned dr_entries;
  struct io_uring dr_ring;
} zv_dev_ring_t;

static pthread_once_t zv_dev_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t zv_dev_key;
static bool zv_dev_key_ok;
/* Set when dev_key_fini deleted the key (under zv_dev_key_lock, which
 * also covers every pthread_setspecific of it); then no thread is given
 * a new ring, but zv_dev_ring_gone, whose batches run the fallback. */
static atomic_bool zv_dev_key_gone;
static pthread_mutex_t zv_dev_key_lock = PTHREAD_MUTEX_INITIALIZER;
static zv_dev_ring_t zv_dev_ring_gone = { .dr_uring = false };
static atomic_bool zv_dev_fallback_logged;

/* The observer every newly opened device starts with (tests only). */
static pthread_mutex_t zv_dev_default_observe_lock = PTHREAD_MUTEX_INITIALIZER;
static zv_dev_observe_fn zv_dev_default_observe_fn;
static void *zv_dev_default_observe_arg;

/* A new device's structure, with the default observer. */
zv_dev_t *
zv_dev_new (const char *path, int fd, uint64_t size)
{
  zv_dev_t *dev = zv_calloc (1, sizeof *dev);

  dev->dev_path = zv_strdup (path);
  dev->dev_fd = fd;
  dev->dev_backing_fd = -1;
  dev->dev_size = ZV_P2ALIGN (size, ZV_SECTOR);
  pthread_mutex_init (&dev->dev_fault_lock, NULL);
  pthread_mutex_lock (&zv_dev_default_observe_lock);
  dev->dev_observe_fn = zv_dev_default_observe_fn;
  dev->dev_observe_arg = zv_dev_default_observe_arg;
  atomic_store_explicit (&dev->dev_observe_armed, dev->dev_observe_fn,
                         memory_order_release);
  pthread_mutex_unlock (&zv_dev_default_observe_lock);
  return dev;
}

const char *
zv_dev_path (const zv_dev_t *dev)
{
  return dev->dev_path;
}

uint64_t
zv_dev_size (const zv_dev_t *dev)
{
  return dev->dev_size;
}

bool
zv_dev_is_direct (const zv_dev_t *dev)
{
  return dev->dev_direct;
}

bool
zv_dev_is_blockdev (const zv_dev_t *dev)
{
  return dev->dev_blockdev;
}

bool
zv_dev_is_rados (const zv_dev_t *dev)
{
  return dev->dev_rados != NULL;
}

bool
zv_dev_is_mirror (const zv_dev_t *dev)
{
  return dev->dev_mirror != NULL;
}

/* A mirror's sides are dev_mirror.c's; any other device is its own. */
unsigned
zv_dev_nsides (const zv_dev_t *dev)
{
  return dev->dev_mirror ? zv_dev_mirror_nsides (dev->dev_mirror) : 1;
}

zv_dev_t *
zv_dev_side (zv_dev_t *dev, unsigned i)
{
  if (dev->dev_mirror)
    return zv_dev_mirror_side (dev->dev_mirror, i);
  ZV_VERIFY (i == 0);
  return dev;
}

bool
zv_dev_side_ok (const zv_dev_t *dev, unsigned i)
{
  if (dev->dev_mirror)
    return zv_dev_mirror_side_ok (dev->dev_mirror, i);
  ZV_VERIFY (i == 0);
  return true;
}

int
zv_dev_side_attach (zv_dev_t *dev, unsigned i, zv_dev_t *side, char *err,
                    size_t errlen)
{
  int r;

  ZV_VERIFY (dev->dev_mirror != NULL && side != NULL);
  r = zv_dev_mirror_attach (dev->dev_mirror, i, side, side->dev_path, err,
                            errlen);
  if (r < 0)
    zv_dev_close (side);
  return r;
}

void
zv_dev_side_set_resilvering (zv_dev_t *dev, unsigned i, bool on)
{
  ZV_VERIFY (dev->dev_mirror != NULL);
  zv_dev_mirror_set_resilvering (dev->dev_mirror, i, on);
}

bool
zv_dev_side_resilvering (const zv_dev_t *dev, unsigned i)
{
  return dev->dev_mirror != NULL
    && zv_dev_mirror_side_resilvering (dev->dev_mirror, i);
}

bool
zv_dev_may_repair (const zv_dev_t *dev)
{
  return dev->dev_mirror ? zv_dev_mirror_may_repair (dev->dev_mirror) : true;
}

unsigned
zv_dev_nsides_ok (const zv_dev_t *dev)
{
  return dev->dev_mirror ? zv_dev_mirror_nok (dev->dev_mirror) : 1;
}

void
zv_dev_side_fault (zv_dev_t *dev, unsigned i, const char *why)
{
  /* A device that is not a mirror has no other side to go on with. */
  ZV_VERIFY (dev->dev_mirror != NULL);
  zv_dev_mirror_fault_side (dev->dev_mirror, i, why);
}

const char *
zv_dev_side_path (const zv_dev_t *dev, unsigned i)
{
  if (dev->dev_mirror)
    return zv_dev_mirror_side_path (dev->dev_mirror, i);
  ZV_VERIFY (i == 0);
  return dev->dev_path;
}

void
zv_dev_side_why (const zv_dev_t *dev, unsigned i, char *buf, size_t len)
{
  if (dev->dev_mirror) {
    zv_dev_mirror_side_why (dev->dev_mirror, i, buf, len);
    return;
  }
  ZV_VERIFY (i == 0);
  snprintf (buf, len, "%s", "");
}

zv_dev_mirror_t *
zv_dev_mirror_of (const zv_dev_t *dev)
{
  return dev->dev_mirror;
}

static void dev_observe (zv_dev_io_t *io, int done);

zv_dev_rados_t *
zv_dev_rados_of (const zv_dev_t *dev)
{
  return dev->dev_rados;
}

/* A request of the RADOS driver has completed. */
void
zv_dev_io_observe_done (zv_dev_io_t *io)
{
  dev_observe (io, 1);
}

/* Counters are relaxed: each is exact, but a snapshot is not atomic. */
void
zv_dev_get_stats (const zv_dev_t *dev, zv_dev_stats_t *out)
{
  zv_dev_t *d = (zv_dev_t *) dev;     /* atomic loads want non-const */

  out->ds_reads = atomic_load_explicit (&d->dev_reads, memory_order_relaxed);
  out->ds_writes = atomic_load_explicit (&d->dev_writes,
                                         memory_order_relaxed);
  out->ds_flushes = atomic_load_explicit (&d->dev_flushes,
                                          memory_order_relaxed);
  out->ds_nread = atomic_load_explicit (&d->dev_nread, memory_order_relaxed);
  out->ds_nwritten = atomic_load_explicit (&d->dev_nwritten,
                                           memory_order_relaxed);
  out->ds_read_errors = atomic_load_explicit (&d->dev_read_errors,
                                              memory_order_relaxed);
  out->ds_write_errors = atomic_load_explicit (&d->dev_write_errors,
                                               memory_order_relaxed);
  out->ds_cksum_errors = atomic_load_explicit (&d->dev_cksum_errors,
                                               memory_order_relaxed);
}

/* A block read whole from this device did not match its checksum. */
void
zv_dev_note_cksum_error (zv_dev_t *dev)
{
  atomic_fetch_add_explicit (&dev->dev_cksum_errors, 1, memory_order_relaxed);
}

/* Install or clear (fn == NULL) the test fault hook. */
void
zv_dev_set_fault (zv_dev_t *dev, zv_dev_fault_fn fn, void *arg)
{
  pthread_mutex_lock (&dev->dev_fault_lock);
  dev->dev_fault_fn = fn;
  dev->dev_fault_arg = arg;
  atomic_store_explicit (&dev->dev_fault_armed, fn != NULL,
                         memory_order_release);
  pthread_mutex_unlock (&dev->dev_fault_lock);
}

/* Install or clear the test observer of a device, or (dev == NULL) the
 * one that devices opened from now on start with. */
void
zv_dev_set_observer (zv_dev_t *dev, zv_dev_observe_fn fn, void *arg)
{
  if (dev == NULL) {
    pthread_mutex_lock (&zv_dev_default_observe_lock);
    zv_dev_default_observe_fn = fn;
    zv_dev_default_observe_arg = arg;
    pthread_mutex_unlock (&zv_dev_default_observe_lock);
    return;
  }
  pthread_mutex_lock (&dev->dev_fault_lock);
  dev->dev_observe_fn = fn;
  dev->dev_observe_arg = arg;
  atomic_store_explicit (&dev->dev_observe_armed, fn, memory_order_release);
  pthread_mutex_unlock (&dev->dev_fault_lock);
}

/* Tell the observer (if any) that a request was submitted (done == 0)
 * or has completed (done == 1). */
static void
dev_observe (zv_dev_io_t *io, int done)
{
  zv_dev_t *dev = io->di_dev;
  zv_dev_observe_fn fn;
  void *arg;

  if (atomic_load_explicit (&dev->dev_observe_armed,
                            memory_order_acquire) == NULL)
    fn = NULL;
  else {
    pthread_mutex_lock (&dev->dev_fault_lock);
    fn = dev->dev_observe_fn;
    arg = dev->dev_observe_arg;
    pthread_mutex_unlock (&dev->dev_fault_lock);
  }
  if (fn == NULL) {
    /* Disarmed while the request was in flight. */
    if (done && io->di_observed) {
      zv_buf_put (io->di_observed, io->di_len);
      io->di_observed = NULL;
    }
    return;
  }
  if (io->di_op == ZV_DEV_FLUSH)
    fn (arg, dev, io->di_op, done, 0, 0, NULL, done ? io->di_result : 0);
  else if (io->di_iov == NULL)
    fn (arg, dev, io->di_op, done, io->di_offset, io->di_len, io->di_buf,
        done ? io->di_result : 0);
  else {
    /* Observers (tests) see one buffer, the same at submission and at
     * completion: the segments gathered when the request is submitted. */
    if (!done) {
      uint8_t *flat = zv_buf_get (io->di_len);
      for (unsigned i = 0, at = 0; i < io->di_iovcnt; i++) {
        memcpy (flat + at, io->di_iov[i].iov_base, io->di_iov[i].iov_len);
        at += (unsigned) io->di_iov[i].iov_len;
      }
      io->di_observed = flat;
    }
    fn (arg, dev, io->di_op, done, io->di_offset, io->di_len,
        io->di_observed, done ? io->di_result : 0);
    if (done) {
      zv_buf_put (io->di_observed, io->di_len);
      io->di_observed = NULL;
    }
  }
}

/* Ask the hook (if any) whether this request should fail. */
static int
dev_fault_check (zv_dev_t *dev, const zv_dev_io_t *io)
{
  zv_dev_fault_fn fn;
  void *arg;

  if (!atomic_load_explicit (&dev->dev_fault_armed, memory_order_acquire))
    return 0;
  pthread_mutex_lock (&dev->dev_fault_lock);
  fn = dev->dev_fault_fn;
  arg = dev->dev_fault_arg;
  pthread_mutex_unlock (&dev->dev_fault_lock);
  if (fn == NULL)
    return 0;
  return fn (arg, dev, io->di_op, io->di_offset, io->di_len);
}

/* ------------------------------------------------------------------ */
/* Request steps shared by the io_uring and the fallback paths          */
/* ------------------------------------------------------------------ */

/* An operation's name, for messages. */
static const char *
dev_op_name (enum zv_dev_op op)
{
  switch (op) {
  case ZV_DEV_READ: return "read";
  case ZV_DEV_WRITE: return "write";
  case ZV_DEV_FLUSH: return "flush";
  }
  return "?";
}

/* Count a failed request against its device. */
static void
dev_io_count_error (zv_dev_io_t *io)
{
  zv_dev_t *dev = io->di_dev;

  atomic_fetch_add_explicit (io->di_op == ZV_DEV_READ ? &dev->dev_read_errors
                             : &dev->dev_write_errors, 1,
                             memory_order_relaxed);
}

/* Record a failed request: log it against the device, count it, and
 * keep the errno. */
static void
dev_io_fail (zv_dev_io_t *io, uint64_t off, int error)
{
  ZV_ASSERT3S (error, <, 0);
  dev_io_count_error (io);
  if (io->di_op == ZV_DEV_FLUSH)
    zv_error ("%s: flush: %s", io->di_dev->dev_path, strerror (-error));
  else
    zv_error ("%s: %s at %" PRIu64 ": %s", io->di_dev->dev_path,
              dev_op_name (io->di_op), off, strerror (-error));
  io->di_result = error;
}

/*
 * Check a request and pass it by the fault hook.  Returns true when it
 * must be issued; false when it is already finished (di_result set).
 * Misalignment is a caller bug and stops the process; a range past the
 * end is an ordinary -EIO, as a real disk would give.
 */
bool
zv_dev_io_start (zv_dev_io_t *io)
{
  zv_dev_t *dev = io->di_dev;
  int r;

  ZV_VERIFY (dev != NULL);
  ZV_VERIFY (io->di_op == ZV_DEV_READ || io->di_op == ZV_DEV_WRITE ||
             io->di_op == ZV_DEV_FLUSH);
  io->di_result = 0;

  io->di_iov_done = 0;
  io->di_observed = NULL;
  if (io->di_op != ZV_DEV_FLUSH) {
    ZV_VERIFY3U (io->di_offset % ZV_SECTOR, ==, 0);
    ZV_VERIFY3U (io->di_len % ZV_SECTOR, ==, 0);
    if (io->di_iov) {
      uint64_t sum = 0;
      ZV_VERIFY (io->di_iovcnt > 0 && io->di_iovcnt <= IOV_MAX);
      for (unsigned i = 0; i < io->di_iovcnt; i++) {
        ZV_VERIFY3U ((uintptr_t) io->di_iov[i].iov_base % ZV_SECTOR, ==, 0);
        ZV_VERIFY3U (io->di_iov[i].iov_len % ZV_SECTOR, ==, 0);
        sum += io->di_iov[i].iov_len;
      }
      ZV_VERIFY3U (sum, ==, io->di_len);
    }
    else {
      ZV_VERIFY (io->di_buf != NULL);
      ZV_VERIFY3U ((uintptr_t) io->di_buf % ZV_SECTOR, ==, 0);
    }
    if (io->di_offset > dev->dev_size ||
        io->di_len > dev->dev_size - io->di_offset) {
      zv_error ("%s: %s at %" PRIu64 " (%" PRIu32 " bytes): beyond the "
                "end of the device (%" PRIu64 " bytes)", dev->dev_path,
                dev_op_name (io->di_op), io->di_offset, io->di_len,
                dev->dev_size);
      dev_io_count_error (io);
      io->di_result = -EIO;
      return false;
    }
  }

  r = dev_fault_check (dev, io);
  if (r < 0) {
    dev_io_fail (io, io->di_offset, r);
    return false;
  }
  ZV_ASSERT3S (r, ==, 0);                /* the hook: 0 or -errno */

  if (io->di_op != ZV_DEV_FLUSH && io->di_len == 0)
    return false;                     /* nothing to move */
  dev_observe (io, 0);
  return true;
}

/* A request finished in full: count it. */
static void
dev_io_done (zv_dev_io_t *io)
{
  zv_dev_t *dev = io->di_dev;

  io->di_result = 0;
  switch (io->di_op) {
  case ZV_DEV_READ:
    atomic_fetch_add_explicit (&dev->dev_reads, 1, memory_order_relaxed);
    atomic_fetch_add_explicit (&dev->dev_nread, io->di_len,
                               memory_order_relaxed);
    break;
  case ZV_DEV_WRITE:
    atomic_fetch_add_explicit (&dev->dev_writes, 1, memory_order_relaxed);
    atomic_fetch_add_explicit (&dev->dev_nwritten, io->di_len,
                               memory_order_relaxed);
    break;
  case ZV_DEV_FLUSH:
    atomic_fetch_add_explicit (&dev->dev_flushes, 1, memory_order_relaxed);
    break;
  }
}

/*
 * Account for one transfer attempt that moved 'res' bytes (or failed
 * with -errno) after *donep bytes were already moved.  Returns true when
 * the rest must be issued again, with *donep advanced.
 */
bool
zv_dev_io_progress (zv_dev_io_t *io, uint32_t *donep, int res)
{
  uint64_t off = io->di_offset + *donep;

  if (res == -EAGAIN || res == -EINTR)
    return true;
  if (res < 0) {
    dev_io_fail (io, off, res);
    return false;
  }
  if (io->di_op == ZV_DEV_FLUSH) {
    dev_io_done (io);
    return false;
  }
  if (res == 0) {
    /* Past EOF (the file shrank under us), or a write that moved
     * nothing: either way, retrying would spin forever. */
    zv_error ("%s: %s at %" PRIu64 ": %s", io->di_dev->dev_path,
              dev_op_name (io->di_op), off,
              io->di_op == ZV_DEV_READ ? "unexpected end of file"
              : "no progress");
    dev_io_count_error (io);
    io->di_result = -EIO;
    return false;
  }
  ZV_VERIFY3U (res, <=, io->di_len - *donep);
  *donep += (uint32_t) res;
  if (*donep < io->di_len)
    return true;                      /* short transfer: do the rest */
  dev_io_done (io);
  return false;
}

/* ------------------------------------------------------------------ */
/* Fallback: synchronous system calls                                   */
/* ------------------------------------------------------------------ */

/* Advance a vectored request's segments to 'done' bytes from its start
 * (done only grows: a resumed transfer starts where the last one ended). */
static void
dev_iov_seek (zv_dev_io_t *io, uint32_t done)
{
  uint32_t skip = done - io->di_iov_done;

  ZV_ASSERT3U (done, >=, io->di_iov_done);
  while (skip > 0) {
    ZV_ASSERT (io->di_iovcnt > 0);
    if (skip >= io->di_iov[0].iov_len) {
      skip -= (uint32_t) io->di_iov[0].iov_len;
      io->di_iov++;
      io->di_iovcnt--;
    }
    else {
      io->di_iov[0].iov_base = (char *) io->di_iov[0].iov_base + skip;
      io->di_iov[0].iov_len -= skip;
      skip = 0;
    }
  }
  io->di_iov_done = done;
}

/* One attempt at the rest of a request; returns bytes or -errno. */
static int
dev_sync_attempt (zv_dev_io_t *io, uint32_t done)
{
  int fd = io->di_dev->dev_fd;
  /* A flush has no buffer (and NULL + 0 is undefined). */
  char *buf = io->di_buf ? (char *) io->di_buf + done : NULL;
  size_t len = io->di_len - done;
  off_t off = (off_t) (io->di_offset + done);
  ssize_t r;

  if (len > INT32_MAX)
    len = ZV_P2ALIGN (INT32_MAX, ZV_SECTOR);
  if (io->di_iov && io->di_op != ZV_DEV_FLUSH) {
    dev_iov_seek (io, done);
    r = io->di_op == ZV_DEV_READ
      ? preadv (fd, io->di_iov, (int) io->di_iovcnt, off)
      : pwritev (fd, io->di_iov, (int) io->di_iovcnt, off);
    return r == -1 ? -errno : (int) r;
  }
  switch (io->di_op) {
  case ZV_DEV_READ: r = pread (fd, buf, len, off); break;
  case ZV_DEV_WRITE: r = pwrite (fd, buf, len, off); break;
  case ZV_DEV_FLUSH: r = fdatasync (fd); break;
  default: abort ();
  }
  return r == -1 ? -errno : (int) r;
}

/* Run a batch in order with pread/pwrite/fdatasync. */
static void
dev_batch_sync (zv_dev_io_t *ios, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    uint32_t done = 0;

    if (!zv_dev_io_start (&ios[i]))
      continue;
    while (zv_dev_io_progress (&ios[i], &done,
                            dev_sync_attempt (&ios[i], done)))
      ;
    dev_observe (&ios[i], 1);
  }
}

/* ------------------------------------------------------------------ */
/* Per-thread rings                                                     */
/* ------------------------------------------------------------------ */

/* Thread exit: give the ring back to the kernel. */
/* Threads' rings now (zv_dev_rings_live). */
static _Atomic uint64_t dev_rings_live;

static void
dev_ring_destroy (void *p)
{
  zv_dev_ring_t *r = p;

  if (r->dr_uring)
    io_uring_queue_exit (&r->dr_ring);
  free (r);
  atomic_fetch_sub_explicit (&dev_rings_live, 1, memory_order_relaxed);
}

uint64_t
zv_dev_rings_live (void)
{
  return atomic_load_explicit (&dev_rings_live, memory_order_relaxed);
}

/*
 * In a forked child, the forking thread's ring is shared with the parent
 * (its queues are shared mappings): drop the child's use of it, so the
 * child makes its own on its next batch (nbdkit forks after get_ready,
 * where the pool was opened).
 */
static void
dev_atfork_child (void)
{
  zv_dev_ring_t *r;

  if (!zv_dev_key_ok)
    return;
  r = pthread_getspecific (zv_dev_key);
  if (r != NULL) {
    pthread_setspecific (zv_dev_key, NULL);
    dev_ring_destroy (r);
  }
}

static void
dev_key_create (void)
{
  zv_dev_key_ok = pthread_key_create (&zv_dev_key, dev_ring_destroy) == 0;
  if (zv_dev_key_ok)
    pthread_atfork (NULL, NULL, dev_atfork_child);
}

void
zv_dev_thread_exit (void)
{
  zv_dev_ring_t *r;

  ZV_VERIFY (pthread_once (&zv_dev_key_once, dev_key_create) == 0);
  pthread_mutex_lock (&zv_dev_key_lock);
  if (zv_dev_key_ok
      && !atomic_load_explicit (&zv_dev_key_gone, memory_order_relaxed)
      && (r = pthread_getspecific (zv_dev_key)) != NULL) {
    ZV_VERIFY (pthread_setspecific (zv_dev_key, NULL) == 0);
    pthread_mutex_unlock (&zv_dev_key_lock);
    dev_ring_destroy (r);
    return;
  }
  pthread_mutex_unlock (&zv_dev_key_lock);
}

/*
 * Unloading (dlclose of the plugin), or exit: the key goes, so that no
 * thread exit calls dev_ring_destroy once our code is unmapped.  At
 * exit, threads may still issue I/O (a pool never closed: a test that
 * failed and left it open); dev_ring_get gives them the fallback from
 * now on, and their rings are left to the process's end.
 */
static void __attribute__ ((destructor))
dev_key_fini (void)
{
  pthread_mutex_lock (&zv_dev_key_lock);
  atomic_store_explicit (&zv_dev_key_gone, true, memory_order_release);
  if (zv_dev_key_ok)
    pthread_key_delete (zv_dev_key);
  pthread_mutex_unlock (&zv_dev_key_lock);
}

/* The ring must know the operations we use (READ/WRITE: Linux 5.6). */
static int
dev_ring_probe (struct io_uring *ring)
{
  struct io_uring_probe *p = io_uring_get_probe_ring (ring);
  bool ok;

  if (p == NULL)
    return -ENOSYS;
  ok = io_uring_opcode_supported (p, IORING_OP_READ) &&
       io_uring_opcode_supported (p, IORING_OP_WRITE) &&
       io_uring_opcode_supported (p, IORING_OP_FSYNC);
  io_uring_free_probe (p);
  return ok ? 0 : -EOPNOTSUPP;
}

/* Say once per process why batches run without io_uring. */
static void
dev_log_fallback (int error)
{
  if (!atomic_exchange_explicit (&zv_dev_fallback_logged, true,
                                 memory_order_seq_cst))
    zv_info ("io_uring unavailable (%s): using pread/pwrite/fdatasync",
             strerror (-error));
}

/*
 * This thread's ring, created on its first batch.  After dev_key_fini the
 * key is not looked at (its slot may be another library's by then): the
 * fallback's ring, which holds nothing.  A thread that raced the delete
 * past the first test finds no ring in the deleted key (glibc) and meets
 * the second test, under the lock, before it stores one.
 */
static zv_dev_ring_t *
dev_ring_get (void)
{
  zv_dev_ring_t *r;
  int e;

  ZV_VERIFY (pthread_once (&zv_dev_key_once, dev_key_create) == 0);
  ZV_VERIFY (zv_dev_key_ok);
  if (atomic_load_explicit (&zv_dev_key_gone, memory_order_acquire))
    return &zv_dev_ring_gone;
  r = pthread_getspecific (zv_dev_key);
  if (r != NULL)
    return r;

  pthread_mutex_lock (&zv_dev_key_lock);
  if (atomic_load_explicit (&zv_dev_key_gone, memory_order_relaxed)) {
    pthread_mutex_unlock (&zv_dev_key_lock);
    return &zv_dev_ring_gone;
  }
  r = zv_calloc (1, sizeof *r);
  atomic_fetch_add_explicit (&dev_rings_live, 1, memory_order_relaxed);
  r->dr_entries = ZV_MAX (zv_dev_ring_entries, 1u);
  e = io_uring_queue_init (r->dr_entries, &r->dr_ring, 0);
  if (e == 0) {
    e = dev_ring_probe (&r->dr_ring);
    if (e < 0)
      io_uring_queue_exit (&r->dr_ring);
  }
  r->dr_uring = e == 0;
  if (e < 0)
    dev_log_fallback (e);
  ZV_VERIFY (pthread_setspecific (zv_dev_key, r) == 0);
  pthread_mutex_unlock (&zv_dev_key_lock);
  return r;
}

/* ------------------------------------------------------------------ */
/* io_uring driver                                                      */
/* ------------------------------------------------------------------ */

/* user_data: request index in the high half, bytes done in the low. */
#define ZV_DEV_UD(idx, done) (((uint64_t) (idx) << 32) | (uint32_t) (done))
#define ZV_DEV_UD_IDX(ud) ((size_t) ((ud) >> 32))
#define ZV_DEV_UD_DONE(ud) ((uint32_t) (ud))

/* Enter the kernel: push queued SQEs, optionally wait for one CQE. */
static void
dev_ring_submit (zv_dev_ring_t *r, unsigned wait)
{
  int e = io_uring_submit_and_wait (&r->dr_ring, wait);

  /* EINTR/EAGAIN/EBUSY: the caller reaps and comes back. */
  if (e < 0 && e != -EINTR && e != -EAGAIN && e != -EBUSY) {
    zv_error ("io_uring_enter: %s", strerror (-e));
    ZV_VERIFY (!"io_uring_enter failed with requests in flight");
  }
}

/* Queue (the rest of) request 'idx' on the ring. */
static void
dev_ring_prep (zv_dev_ring_t *r, zv_dev_io_t *io, size_t idx,
               uint32_t done)
{
  struct io_uring_sqe *sqe = io_uring_get_sqe (&r->dr_ring);
  int fd = io->di_dev->dev_fd;

  if (sqe == NULL) {
    /* Cannot happen while in-flight <= ring size, but be safe. */
    dev_ring_submit (r, 0);
    sqe = io_uring_get_sqe (&r->dr_ring);
    ZV_VERIFY (sqe != NULL);
  }
  if (io->di_iov && io->di_op != ZV_DEV_FLUSH) {
    /* The array stays put for the whole batch. */
    dev_iov_seek (io, done);
    if (io->di_op == ZV_DEV_READ)
      io_uring_prep_readv (sqe, fd, io->di_iov, io->di_iovcnt,
                           io->di_offset + done);
    else
      io_uring_prep_writev (sqe, fd, io->di_iov, io->di_iovcnt,
                            io->di_offset + done);
    io_uring_sqe_set_data64 (sqe, ZV_DEV_UD (idx, done));
    return;
  }
  switch (io->di_op) {
  case ZV_DEV_READ:
    io_uring_prep_read (sqe, fd, (char *) io->di_buf + done,
                        io->di_len - done, io->di_offset + done);
    break;
  case ZV_DEV_WRITE:
    io_uring_prep_write (sqe, fd, (char *) io->di_buf + done,
                         io->di_len - done, io->di_offset + done);
    break;
  case ZV_DEV_FLUSH:
    io_uring_prep_fsync (sqe, fd, IORING_FSYNC_DATASYNC);
    break;
  }
  io_uring_sqe_set_data64 (sqe, ZV_DEV_UD (idx, done));
}

/* How many requests of a batch of queue q may be in flight now. */
static unsigned
dev_queue_cap (const zv_dev_queue_t *q, unsigned entries)
{
  unsigned cap = q && q->dq_max_active
    ? atomic_load_explicit (q->dq_max_active, memory_order_relaxed) : 0;

  unsigned base = cap;

  if (cap > 0 && q->dq_scale > 1 && cap < q->dq_scale_max)
    cap = (unsigned) ZV_MIN ((uint64_t) cap * q->dq_scale,
                             (uint64_t) q->dq_scale_max);
  if (cap == 0 || cap > entries)
    cap = entries;
  /* Relaxed: advice on pacing, it guards no data.  The yield looks at
   * the cap as asked for, before the scaling. */
  if (q && q->dq_yield_to && base <= q->dq_yield_below
      && atomic_load_explicit (q->dq_yield_to, memory_order_relaxed) > 0)
    cap = ZV_MIN (cap, ZV_MAX (q->dq_yield_active, 1u));
  return cap;
}

/* Run a batch through this thread's ring; see the theory comment. */
static void
dev_batch_uring (zv_dev_ring_t *r, zv_dev_io_t *ios, size_t n,
                 const zv_dev_queue_t *q)
{
  size_t next = 0;
  unsigned inflight = 0;
  bool flush_inflight = false;        /* kind of what is in flight */

  ZV_VERIFY3U (n, <=, UINT32_MAX);
  while (next < n || inflight > 0) {
    struct io_uring_cqe *cqe;
    unsigned cap = dev_queue_cap (q, r->dr_entries);

    /* Fill free slots, stopping at a flush barrier. */
    while (next < n && inflight < cap) {
      zv_dev_io_t *io = &ios[next];
      bool is_flush = io->di_op == ZV_DEV_FLUSH;

      if (inflight > 0 && is_flush != flush_inflight)
        break;
      /* A lone flush (the next request is not one): fdatasync here.
       * io_uring would hand it to a worker thread, and the hop there
       * and back costs a log commit tens of microseconds. */
      if (is_flush && inflight == 0
          && (next + 1 == n || ios[next + 1].di_op != ZV_DEV_FLUSH)) {
        dev_batch_sync (io, 1);
        next++;
        continue;
      }
      if (zv_dev_io_start (io)) {
        dev_ring_prep (r, io, next, 0);
        inflight++;
        flush_inflight = is_flush;
      }
      next++;
    }
    if (inflight == 0)
      continue;

    dev_ring_submit (r, 1);
    while (io_uring_peek_cqe (&r->dr_ring, &cqe) == 0) {
      uint64_t ud = io_uring_cqe_get_data64 (cqe);
      size_t idx = ZV_DEV_UD_IDX (ud);
      uint32_t done = ZV_DEV_UD_DONE (ud);
      int res = cqe->res;

      io_uring_cqe_seen (&r->dr_ring, cqe);
      ZV_VERIFY3U (idx, <, n);
      ZV_ASSERT3U (inflight, >, 0);
      inflight--;
      if (zv_dev_io_progress (&ios[idx], &done, res)) {
        dev_ring_prep (r, &ios[idx], idx, done);
        inflight++;
      }
      else
        dev_observe (&ios[idx], 1);
    }
  }
}

/* Submit a batch and wait for all of it; see dev.h. */
int
zv_dev_io_batch (zv_dev_io_t *ios, size_t n)
{
  return zv_dev_io_batch_max (ios, n, NULL);
}

/* The same, with at most *max_active requests in flight (NULL, 0: no
 * cap), re-read as requests complete. */
int
zv_dev_io_batch_max (zv_dev_io_t *ios, size_t n,
                     const _Atomic unsigned *max_active)
{
  zv_dev_queue_t q = { .dq_max_active = max_active };

  return zv_dev_io_batch_queue (ios, n, &q);
}

/* The same in a class that yields to another; see dev.h. */
int
zv_dev_io_batch_queue (zv_dev_io_t *ios, size_t n, const zv_dev_queue_t *q)
{
  zv_dev_ring_t *r;

  if (n == 0)
    return 0;
  ZV_VERIFY (ios != NULL);
  /* A batch naming a mirror is rewritten into one of its sides' (and
   * the other devices') requests, which comes back here. */
  for (size_t i = 0; i < n; i++)
    if (ios[i].di_dev->dev_mirror != NULL) {
      zv_dev_mirror_batch (ios, n, q);
      goto out;
    }
  /* A pool mixes no kinds of devices (pool.c refuses it), so neither
   * does a batch. */
  for (size_t i = 1; i < n; i++)
    ZV_VERIFY ((ios[i].di_dev->dev_rados == NULL) ==
               (ios[0].di_dev->dev_rados == NULL));
  if (ios[0].di_dev->dev_rados != NULL)
    zv_dev_rados_batch (ios, n, dev_queue_cap (q, UINT_MAX));
  else if ((r = dev_ring_get ())->dr_uring)
    dev_batch_uring (r, ios, n, q);
  else
    dev_batch_sync (ios, n);

 out:
  for (size_t i = 0; i < n; i++)
    if (ios[i].di_result < 0)
      return ios[i].di_result;
  return 0;
}

/* ------------------------------------------------------------------ */
/* Asynchronous single requests (Linux AIO; see dev.h)                  */
/* ------------------------------------------------------------------ */

struct zv_dev_async {
  aio_context_t da_ctx;
  struct iocb da_cb;
  bool da_pending;                    /* submitted, not reaped */
};

bool
zv_dev_async_ok (const zv_dev_t *dev)
{
  return dev->dev_fd >= 0 && dev->dev_direct && dev->dev_rados == NULL
    && dev->dev_mirror == NULL;
}

zv_dev_async_t *
zv_dev_async_new (void)
{
  zv_dev_async_t *aq = zv_calloc (1, sizeof *aq);

  if (syscall (SYS_io_setup, 1, &aq->da_ctx) < 0) {
    zv_info ("no AIO context (%s): log blocks are not written ahead",
             strerror (errno));
    free (aq);
    return NULL;
  }
  return aq;
}

void
zv_dev_async_free (zv_dev_async_t *aq)
{
  if (aq == NULL)
    return;
  ZV_VERIFY (!aq->da_pending);
  (void) syscall (SYS_io_destroy, aq->da_ctx);
  free (aq);
}

/* Run (the rest of) a request in place, after 'res' for the last try. */
static void
dev_async_complete (zv_dev_io_t *io, uint32_t done, int res)
{
  while (zv_dev_io_progress (io, &done, res))
    res = dev_sync_attempt (io, done);
  dev_observe (io, 1);
}

/* Fill cb for a read or write io (no flush). */
static void
dev_aio_prep (struct iocb *cb, zv_dev_io_t *io)
{
  bool rd = io->di_op == ZV_DEV_READ;

  memset (cb, 0, sizeof *cb);
  cb->aio_fildes = (uint32_t) io->di_dev->dev_fd;
  cb->aio_data = (uint64_t) (uintptr_t) io;
  cb->aio_offset = (int64_t) io->di_offset;
  if (io->di_iov != NULL) {
    cb->aio_lio_opcode = rd ? IOCB_CMD_PREADV : IOCB_CMD_PWRITEV;
    cb->aio_buf = (uint64_t) (uintptr_t) io->di_iov;
    cb->aio_nbytes = io->di_iovcnt;
  }
  else {
    cb->aio_lio_opcode = rd ? IOCB_CMD_PREAD : IOCB_CMD_PWRITE;
    cb->aio_buf = (uint64_t) (uintptr_t) io->di_buf;
    cb->aio_nbytes = io->di_len;
  }
}

bool
zv_dev_async_start (zv_dev_async_t *aq, zv_dev_io_t *io)
{
  zv_dev_t *dev = io->di_dev;
  struct iocb *cb = &aq->da_cb;
  long r;

  ZV_VERIFY (!aq->da_pending);
  ZV_VERIFY (io->di_op == ZV_DEV_READ || io->di_op == ZV_DEV_WRITE);
  if (!zv_dev_async_ok (dev) || io->di_iov != NULL)
    return false;
  if (!zv_dev_io_start (io))
    return true;                        /* finished: di_result says */
  dev_aio_prep (cb, io);
  do
    r = syscall (SYS_io_submit, aq->da_ctx, 1L, &cb);
  while (r < 0 && errno == EINTR);
  if (r == 1)
    aq->da_pending = true;
  else {
    /* Not queued (EAGAIN: no room in the kernel): do it here. */
    dev_async_complete (io, 0, dev_sync_attempt (io, 0));
  }
  return true;
}

int
zv_dev_async_finish (zv_dev_async_t *aq, zv_dev_io_t *io)
{
  struct io_event ev;
  long r;

  if (!aq->da_pending)
    return io->di_result;
  do
    r = syscall (SYS_io_getevents, aq->da_ctx, 1L, 1L, &ev, NULL);
  while (r < 0 && errno == EINTR);
  ZV_VERIFY (r == 1);
  ZV_VERIFY (ev.obj == (uint64_t) (uintptr_t) &aq->da_cb);
  aq->da_pending = false;
  dev_async_complete (io, 0, ev.res < INT32_MIN ? -EIO : (int) ev.res);
  return io->di_result;
}

/* ---- many requests in flight (zv_dev_aio_*, dev.h) ---- */

struct zv_dev_aio {
  aio_context_t da_ctx;
  _Atomic unsigned da_owed;           /* started, not reaped */
};

zv_dev_aio_t *
zv_dev_aio_new (unsigned max)
{
  zv_dev_aio_t *q = zv_calloc (1, sizeof *q);

  if (syscall (SYS_io_setup, (long) max, &q->da_ctx) < 0) {
    zv_info ("no AIO context (%s): large writes wait for their devices",
             strerror (errno));
    free (q);
    return NULL;
  }
  return q;
}

size_t
zv_dev_aio_start (zv_dev_aio_t *q, zv_dev_io_t *ios, size_t n)
{
  struct iocb cbs[16], *cbp[16];
  size_t owed = 0;

  /* In groups of 16 on the stack: the kernel copies each control block
   * (and a vector's segments) when it takes it. */
  for (size_t i = 0; i < n;) {
    size_t m = 0;
    long r;

    for (; i < n && m < 16; i++) {
      zv_dev_io_t *io = &ios[i];

      ZV_VERIFY (io->di_op == ZV_DEV_READ || io->di_op == ZV_DEV_WRITE);
      ZV_VERIFY (zv_dev_async_ok (io->di_dev));
      if (!zv_dev_io_start (io))
        continue;                       /* finished: di_result says */
      dev_aio_prep (&cbs[m], io);
      cbp[m] = &cbs[m];
      m++;
    }
    if (m == 0)
      continue;
    atomic_fetch_add (&q->da_owed, (unsigned) m);
    do
      r = syscall (SYS_io_submit, q->da_ctx, (long) m, cbp);
    while (r < 0 && errno == EINTR);
    if (r < 0)
      r = 0;
    owed += (size_t) r;
    /* What the kernel would not queue (no room) runs here. */
    for (size_t j = (size_t) r; j < m; j++) {
      zv_dev_io_t *io = (zv_dev_io_t *) (uintptr_t) cbs[j].aio_data;

      atomic_fetch_sub (&q->da_owed, 1);
      dev_async_complete (io, 0, dev_sync_attempt (io, 0));
    }
  }
  return owed;
}

size_t
zv_dev_aio_reap (zv_dev_aio_t *q, bool wait, zv_dev_io_t **out, size_t max)
{
  struct io_event ev[32];
  struct timespec zero = { 0, 0 };
  long r;

  if (max == 0 || atomic_load (&q->da_owed) == 0)
    return 0;
  do
    r = syscall (SYS_io_getevents, q->da_ctx, wait ? 1L : 0L,
                 (long) ZV_MIN (max, (size_t) 32), ev, wait ? NULL : &zero);
  while (r < 0 && errno == EINTR);
  ZV_VERIFY (r >= 0);
  for (long i = 0; i < r; i++) {
    zv_dev_io_t *io = (zv_dev_io_t *) (uintptr_t) ev[i].data;

    dev_async_complete (io, 0, ev[i].res < INT32_MIN ? -EIO : (int) ev[i].res);
    out[i] = io;
  }
  atomic_fetch_sub (&q->da_owed, (unsigned) r);
  return (size_t) r;
}

/* One read, for callers with nothing to batch. */
int
zv_dev_read (zv_dev_t *dev, void *buf, uint64_t off, uint32_t len)
{
  zv_dev_io_t io = { .di_dev = dev, .di_op = ZV_DEV_READ, .di_buf = buf,
                     .di_offset = off, .di_len = len };

  return zv_dev_io_batch (&io, 1);
}

/* Make every completed write to this device durable. */
int
zv_dev_flush (zv_dev_t *dev)
{
  zv_dev_io_t io = { .di_dev = dev, .di_op = ZV_DEV_FLUSH };

  return zv_dev_io_batch (&io, 1);
}

/* ---- tunables (tunable.h; dev_lock_wait is dev_open.c's) ---- */
const zv_tunable_t zv_dev_tunable_table[] = {
  { .tn_name = "dev_ring_entries", .tn_module = "dev",
    ZV_TUNABLE_VAR_UINT (zv_dev_ring_entries),
    .tn_default = 64, .tn_min = 1, .tn_max = 4096,
    .tn_unit = ZV_TUNABLE_UNIT_COUNT, .tn_when = ZV_TUNABLE_AT_THREAD,
    .tn_reader = "the device layer",
    .tn_desc = "Entries of each thread's io_uring, and so the most "
    "requests one thread keeps in flight." },
  { .tn_name = "dev_lock_wait", .tn_module = "dev",
    ZV_TUNABLE_VAR_UINT (zv_dev_lock_wait_ms),
    .tn_default = 1500, .tn_min = 0, .tn_max = 60000,
    .tn_unit = ZV_TUNABLE_UNIT_MS, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the device layer, locking a device",
    .tn_desc = "How long to wait for a device's exclusive lock, so that a "
    "server restarted at once after a kill -9 waits for its predecessor's "
    "io_uring to be torn down." },
  ZV_TUNABLE_END
};
