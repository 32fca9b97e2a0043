/*
 * dev_rados.c: the RADOS device, a fixed-size device striped over the
 * objects of a Ceph pool.
 *
 * Theory
 * ------
 * "rados:CEPHPOOL/NAME" is a device of a size fixed when it is made,
 * laid over objects of ZV_RADOS_OBJ bytes or whatever size the header
 * says (4 MiB by default, as rbd): bytes [i * objsize, (i + 1) * objsize)
 * live in object "NAME.%016x" (i).  An object that does not exist reads
 * as zeros, and so does the part of one past its end, so a new device
 * costs nothing until it is written.  The pool's labels and every other
 * block are stored exactly as on a file: the on-disk format does not know
 * where it lives.
 *
 * The header.  Object "NAME" holds the device's geometry as two xattrs,
 * "zvol.size" and "zvol.objsize" (decimal text), written once when the
 * device is made (zv_dev_opts_t.do_create_size, create=true) and read at
 * every open as hostile data: a size that is not a positive multiple of
 * ZV_SECTOR, an object size that is not a power of two in [64 KiB,
 * 64 MiB], or an object count beyond 2^40 is refused.
 *
 * One opener.  The open takes the exclusive RADOS lock "zvol" on the
 * header object (rados_lock_exclusive) before it reads the header, with a
 * cookie "HOST:PID:RANDOM" of this open, and holds it until close.
 * Locking creates the object if it is missing, so an open that is not to
 * make the device first checks that the header object exists
 * (rados_stat): a missing device is refused and nothing is left behind.
 * (A header removed between the two calls comes back empty, and is then
 * refused as a header without geometry.)  The lock is the cluster's, so
 * it covers every host, where the file device's flock covers one; a
 * second opener anywhere is refused at once with a message naming the
 * holder (its client, address and cookie: host and pid).  A lock has no
 * lifetime: when its holder dies without closing (kill -9, a lost
 * machine), the lock stays, and the refusal says how to break it by hand
 * once the operator knows the holder is gone; a takeover (below) fences
 * the holder first instead.
 * A process that calls exit() with devices open releases their locks in
 * an atexit handler (rados_open_list), as a dead process's flocks go.
 *
 * Takeover (do_takeover, the import's pc_rados_takeover).  A lock held
 * by another client is taken in the order that makes it safe, as rbd's
 * exclusive lock does: blocklist the holder's client (address and nonce,
 * for rados_blocklist_time), wait for the OSD map that carries it, break
 * the holder's lock, take ours.  Once OSDs have that map they refuse
 * every request of the old client, also one it sent before and that
 * arrives late, so a holder that was only stalled (not dead) cannot
 * write behind the new one; its own requests fail with EIO from then on,
 * and its pool suspends.
 *
 * Connection.  Each device has its own cluster handle (rados_t) and I/O
 * context, made at open from zv_dev_opts_t (configuration file, user,
 * keyring; NULL: librados' defaults, which also read $CEPH_CONF and
 * $CEPH_ARGS).  Timeouts are always set (tunables below): mounting
 * (client_mount_timeout), monitor and OSD operations (rados_mon_op_timeout,
 * rados_osd_op_timeout), so a cluster that is down fails the open with a
 * message after rados_mount_timeout seconds, and a request in service
 * fails with EIO after at most rados_op_timeout seconds instead of
 * waiting for ever.  librados runs threads of its own, which a fork does
 * not keep: a batch in a process other than the opener's fails with EIO
 * and says so (nbdkit must run in the foreground, -f).
 *
 * I/O.  A batch (zv_dev_rados_batch) cuts each read and write into pieces
 * at object boundaries and issues them as librados aio requests, up to
 * the queue's cap in flight; when the cap is reached it waits for the
 * oldest.  A read's piece is one segment of it inside one object (read
 * in place); a write's is one write operation per object holding every
 * extent of the request there (rados_write_op_write, which copies them
 * into librados' buffers, as rados_aio_write does), so that the txg
 * sync's gathered write of many blocks is one request per object and
 * the cap, which counts requests, is not spent on single blocks (it
 * was: 16 KiB at a time, two in flight, 5 MiB/s).
 * A request completes when its last piece has; its result is its first
 * error.  A flush is a barrier as in dev.c: it waits for every earlier
 * request of the batch, and that is all it does, since RADOS acknowledges
 * a write only once every replica has it durably: there is no volatile
 * cache to flush.  Requests go through dev.c's common steps
 * (zv_dev_io_start / zv_dev_io_progress), so the bounds checks, the
 * fault hook, the observer and the counters behave as for a file.  Every
 * failure is EIO to the layers above (checksums and the ditto copy then
 * do their work), logged with librados' own error and the object.  After
 * a request timed out, every request to the device fails at once for
 * rados_op_timeout seconds (dr_down_until) instead of waiting for the
 * cluster again: the txg sync writes hundreds of blocks a few at a time,
 * and would otherwise take minutes to fail; the first failure suspends
 * the pool anyway.
 *
 * No trim: the engine frees space in its own allocator and never discards
 * a device range, on any kind of device.
 *
 * Nothing of a zv_dev_rados_t changes after open, so any number of
 * threads may run batches on it at once (librados is thread-safe, each
 * batch has its own completions).
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <time.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/random.h>

#include <rados/librados.h>

#include "zv_util.h"
#include "tunable.h"
#include "dev_impl.h"

/* Tunables (seconds): see the table at the end. */
static unsigned zv_rados_mount_timeout = 10;
static unsigned zv_rados_op_timeout = 30;
static unsigned zv_rados_max_active = 64;
static unsigned zv_rados_obj_shift = 22;        /* 4 MiB */
static unsigned zv_rados_blocklist_s = 3600;

#define ZV_RADOS_PREFIX "rados:"
#define ZV_RADOS_LOCK "zvol"
#define ZV_RADOS_XATTR_SIZE "zvol.size"
#define ZV_RADOS_XATTR_OBJSIZE "zvol.objsize"
#define ZV_RADOS_NAME_MAX 96            /* object name prefix */
#define ZV_RADOS_POOL_MAX 63
#define ZV_RADOS_OBJ_MIN_SHIFT 16
#define ZV_RADOS_OBJ_MAX_SHIFT 26
#define ZV_RADOS_MAX_OBJS (1ULL << 40)

struct zv_dev_rados {
  char *dr_path;                        /* "rados:POOL/NAME", messages */
  char *dr_name;                        /* header object, data prefix */
  rados_t dr_cluster;
  rados_ioctx_t dr_io;
  char dr_cookie[128];
  uint64_t dr_size;
  unsigned dr_obj_shift;
  pid_t dr_pid;                         /* the process that connected */
  /* A request timed out: until then, requests fail at once (zv_now_ns). */
  _Atomic uint64_t dr_down_until;
  struct zv_dev_rados *dr_next;         /* rados_open_list */
};

/* The devices open in this process, whose locks an exit releases. */
static pthread_mutex_t rados_open_lock = PTHREAD_MUTEX_INITIALIZER;
static zv_dev_rados_t *rados_open_list;
static pthread_once_t rados_atexit_once = PTHREAD_ONCE_INIT;

/* One aio request: a piece of a batch's request inside one object (a
 * read, or a write operation of every extent of the request there). */
typedef struct rados_piece {
  rados_completion_t rp_c;
  rados_write_op_t rp_op;               /* a write's, else NULL */
  size_t rp_idx;                        /* the request in the batch */
  char *rp_buf;                         /* a read's */
  uint32_t rp_len;
  uint64_t rp_obj;
} rados_piece_t;

bool
zv_dev_path_is_rados (const char *path)
{
  return strncmp (path, ZV_RADOS_PREFIX, strlen (ZV_RADOS_PREFIX)) == 0;
}

static void __attribute__ ((format (printf, 4, 5)))
rados_errmsg (char *err, size_t errlen, const char *path, const char *fmt,
              ...)
{
  va_list ap;
  int n;

  if (err == NULL || errlen == 0)
    return;
  n = snprintf (err, errlen, "%s: ", path);
  if (n < 0 || (size_t) n >= errlen)
    return;
  va_start (ap, fmt);
  vsnprintf (err + n, errlen - (size_t) n, fmt, ap);
  va_end (ap);
}

/* Ceph's names: pools and objects of ours are plain ASCII words. */
static bool
rados_name_ok (const char *s, size_t len, size_t max)
{
  if (len == 0 || len > max)
    return false;
  for (size_t i = 0; i < len; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '-' || c == '.'))
      return false;
  }
  return s[0] != '.';
}

/* Split "rados:POOL/NAME"; returns false if it is not one. */
static bool
rados_parse_path (const char *path, char **poolp, char **namep)
{
  const char *p = path + strlen (ZV_RADOS_PREFIX);
  const char *slash = strchr (p, '/');

  if (slash == NULL || !rados_name_ok (p, (size_t) (slash - p),
                                       ZV_RADOS_POOL_MAX) ||
      !rados_name_ok (slash + 1, strlen (slash + 1), ZV_RADOS_NAME_MAX))
    return false;
  *poolp = zv_strdup (p);
  (*poolp)[slash - p] = '\0';
  *namep = zv_strdup (slash + 1);
  return true;
}

/* Connect a cluster handle with the options and our timeouts. */
static int
rados_connect_opts (const char *path, const zv_dev_opts_t *opts,
                    rados_t *clusterp, char *err, size_t errlen)
{
  const char *user = opts && opts->do_ceph_user ? opts->do_ceph_user
    : "client.admin";
  const char *conf = opts ? opts->do_ceph_conf : NULL;
  char name[128], num[32];
  rados_t cl;
  int r;

  if (strchr (user, '.') != NULL)
    snprintf (name, sizeof name, "%s", user);
  else
    snprintf (name, sizeof name, "client.%s", user);
  r = rados_create2 (&cl, "ceph", name, 0);
  if (r < 0) {
    rados_errmsg (err, errlen, path, "cannot make a Ceph client %s: %s",
                  name, strerror (-r));
    return -EINVAL;
  }
  r = rados_conf_read_file (cl, conf);
  if (r < 0) {
    rados_errmsg (err, errlen, path, "cannot read the Ceph configuration "
                  "%s: %s", conf ? conf : "($CEPH_CONF, /etc/ceph/ceph.conf)",
                  strerror (-r));
    rados_shutdown (cl);
    return -EINVAL;
  }
  rados_conf_parse_env (cl, NULL);
  if (opts && opts->do_ceph_keyring &&
      (r = rados_conf_set (cl, "keyring", opts->do_ceph_keyring)) < 0) {
    rados_errmsg (err, errlen, path, "keyring %s: %s",
                  opts->do_ceph_keyring, strerror (-r));
    rados_shutdown (cl);
    return -EINVAL;
  }
  snprintf (num, sizeof num, "%u", zv_rados_mount_timeout);
  ZV_VERIFY (rados_conf_set (cl, "client_mount_timeout", num) == 0);
  snprintf (num, sizeof num, "%u", zv_rados_op_timeout);
  ZV_VERIFY (rados_conf_set (cl, "rados_mon_op_timeout", num) == 0);
  ZV_VERIFY (rados_conf_set (cl, "rados_osd_op_timeout", num) == 0);
  r = rados_connect (cl);
  if (r < 0) {
    rados_errmsg (err, errlen, path, "cannot connect to the Ceph cluster "
                  "as %s (configuration %s, %us timeout): %s", name,
                  conf ? conf : "librados' default", zv_rados_mount_timeout,
                  strerror (-r));
    rados_shutdown (cl);
    return r == -ETIMEDOUT || r == -ENOENT || r == -EINVAL ? -EIO : r;
  }
  *clusterp = cl;
  return 0;
}

/* The refusal of a held lock: who holds it, and how to break it. */
static void
rados_busy_msg (zv_dev_rados_t *r, const char *pool, char *err,
                size_t errlen)
{
  char tag[64], clients[256], cookies[256], addrs[256];
  size_t tl = sizeof tag, cl = sizeof clients, kl = sizeof cookies,
    al = sizeof addrs;
  int excl = 0;
  ssize_t n = rados_list_lockers (r->dr_io, r->dr_name, ZV_RADOS_LOCK,
                                  &excl, tag, &tl, clients, &cl, cookies,
                                  &kl, addrs, &al);
  char pc[64], pk[192], pa[128];

  if (n <= 0) {
    rados_errmsg (err, errlen, r->dr_path, "in use by another server (its "
                  "lock could not be listed: %s)",
                  n < 0 ? strerror ((int) -n) : "no holder left");
    return;
  }
  /* The lists are NUL-separated; the first holder is the one. */
  zv_str_printable (clients, sizeof pc, pc, sizeof pc);
  zv_str_printable (cookies, sizeof pk, pk, sizeof pk);
  zv_str_printable (addrs, sizeof pa, pa, sizeof pa);
  rados_errmsg (err, errlen, r->dr_path, "in use by another server "
                "(RADOS lock '%s' of object %s held by %s at %s, cookie "
                "'%s': host:pid:random).  If that server is gone for good, "
                "break the lock with: rados -p %s lock break %s %s %s "
                "--lock-cookie '%s'", ZV_RADOS_LOCK, r->dr_name, pc, pa, pk,
                pool, r->dr_name, ZV_RADOS_LOCK, pc, pk);
}

/*
 * Take the device from the client that holds its lock (do_takeover):
 * blocklist that client first, and wait until this client has the OSD
 * map that says so, so that no request of the old holder can land after
 * ours (OSDs refuse a blocklisted client's requests, in flight or not);
 * then break its lock and take ours.  0, or -errno with a message.
 */
static int
rados_takeover (zv_dev_rados_t *r, char *err, size_t errlen)
{
  char tag[64], clients[256], cookies[256], addrs[256];
  size_t tl = sizeof tag, cl = sizeof clients, kl = sizeof cookies,
    al = sizeof addrs;
  int excl = 0, e;
  ssize_t n = rados_list_lockers (r->dr_io, r->dr_name, ZV_RADOS_LOCK,
                                  &excl, tag, &tl, clients, &cl, cookies,
                                  &kl, addrs, &al);
  char pc[64], pk[192], pa[128];

  if (n < 0) {
    rados_errmsg (err, errlen, r->dr_path, "takeover: cannot list the "
                  "lock's holder: %s", strerror ((int) -n));
    return -EIO;
  }
  if (n == 0)
    goto lock;                          /* released meanwhile */
  zv_str_printable (clients, sizeof pc, pc, sizeof pc);
  zv_str_printable (cookies, sizeof pk, pk, sizeof pk);
  zv_str_printable (addrs, sizeof pa, pa, sizeof pa);
  zv_warn ("%s: taking over from %s at %s (cookie '%s'): blocklisting that "
           "client, then breaking its lock", r->dr_path, pc, pa, pk);
  e = rados_blocklist_add (r->dr_cluster, addrs, zv_rados_blocklist_s);
  if (e < 0) {
    rados_errmsg (err, errlen, r->dr_path, "takeover: cannot blocklist %s "
                  "at %s: %s (the lock stays)", pc, pa, strerror (-e));
    return -EIO;
  }
  e = rados_wait_for_latest_osdmap (r->dr_cluster);
  if (e < 0) {
    rados_errmsg (err, errlen, r->dr_path, "takeover: waiting for the OSD "
                  "map with %s blocklisted: %s", pc, strerror (-e));
    return -EIO;
  }
  e = rados_break_lock (r->dr_io, r->dr_name, ZV_RADOS_LOCK, clients,
                        cookies);
  if (e < 0 && e != -ENOENT) {
    rados_errmsg (err, errlen, r->dr_path, "takeover: cannot break the "
                  "lock of %s: %s", pc, strerror (-e));
    return -EIO;
  }
 lock:
  e = rados_lock_exclusive (r->dr_io, r->dr_name, ZV_RADOS_LOCK,
                            r->dr_cookie, "nbdkit-zvol device", NULL, 0);
  if (e < 0) {
    rados_errmsg (err, errlen, r->dr_path, "takeover: the lock was taken "
                  "again: %s", strerror (-e));
    return e == -EBUSY || e == -EEXIST ? -EBUSY : -EIO;
  }
  return 0;
}

/* An existing device's header object is there: 0, or -ENOENT / -EIO
 * with a message. */
static int
rados_header_exists (zv_dev_rados_t *r, char *err, size_t errlen)
{
  uint64_t size;
  time_t mtime;
  int e = rados_stat (r->dr_io, r->dr_name, &size, &mtime);

  if (e == -ENOENT) {
    rados_errmsg (err, errlen, r->dr_path, "no such RADOS device (no "
                  "header object %s; create=true makes one)", r->dr_name);
    return -ENOENT;
  }
  if (e < 0) {
    rados_errmsg (err, errlen, r->dr_path, "cannot look up the header "
                  "object %s: %s", r->dr_name, strerror (-e));
    return -EIO;
  }
  return 0;
}

/* Read one decimal xattr of the header: 0, -ENODATA, or an error. */
static int
rados_get_u64 (zv_dev_rados_t *r, const char *key, uint64_t *out)
{
  char buf[32];
  int n = rados_getxattr (r->dr_io, r->dr_name, key, buf, sizeof buf - 1);
  char *end;

  if (n == -ENOENT)
    return -ENODATA;
  if (n < 0)
    return n;
  buf[n] = '\0';
  if (n == 0 || buf[0] < '0' || buf[0] > '9')
    return -EINVAL;
  errno = 0;
  *out = strtoull (buf, &end, 10);
  if (errno != 0 || *end != '\0')
    return -EINVAL;
  return 0;
}

/* Make the header of a new device (we hold its lock). */
static int
rados_make_header (zv_dev_rados_t *r, uint64_t size, char *err,
                   size_t errlen)
{
  char s[32], o[32];
  rados_write_op_t op = rados_create_write_op ();
  int e;

  snprintf (s, sizeof s, "%" PRIu64, size);
  snprintf (o, sizeof o, "%" PRIu64, (uint64_t) 1 << zv_rados_obj_shift);
  rados_write_op_create (op, LIBRADOS_CREATE_IDEMPOTENT, NULL);
  rados_write_op_setxattr (op, ZV_RADOS_XATTR_SIZE, s, strlen (s));
  rados_write_op_setxattr (op, ZV_RADOS_XATTR_OBJSIZE, o, strlen (o));
  e = rados_write_op_operate (op, r->dr_io, r->dr_name, NULL, 0);
  rados_release_write_op (op);
  if (e < 0) {
    rados_errmsg (err, errlen, r->dr_path, "cannot write the device's "
                  "header object: %s", strerror (-e));
    return -EIO;
  }
  r->dr_size = size;
  r->dr_obj_shift = zv_rados_obj_shift;
  zv_info ("%s: made a RADOS device of %" PRIu64 " bytes in objects of "
           "%s bytes", r->dr_path, size, o);
  return 0;
}

/* Read (or, when asked, make) the geometry; we hold the lock. */
static int
rados_load_header (zv_dev_rados_t *r, const zv_dev_opts_t *opts,
                   char *err, size_t errlen)
{
  uint64_t size = 0, objsize = 0;
  int e1 = rados_get_u64 (r, ZV_RADOS_XATTR_SIZE, &size);
  int e2 = rados_get_u64 (r, ZV_RADOS_XATTR_OBJSIZE, &objsize);
  uint64_t create = opts ? opts->do_create_size : 0;

  if (e1 == -ENODATA && e2 == -ENODATA) {
    if (create == 0) {
      rados_errmsg (err, errlen, r->dr_path, "no such RADOS device (its "
                    "header object %s has no geometry; create=true makes "
                    "one)", r->dr_name);
      return -ENOENT;
    }
    ZV_VERIFY3U (create % ZV_SECTOR, ==, 0);
    return rados_make_header (r, create, err, errlen);
  }
  if (e1 < 0 || e2 < 0) {
    int e = e1 < 0 ? e1 : e2;
    rados_errmsg (err, errlen, r->dr_path, "header object %s: %s", r->dr_name,
                  e == -EINVAL || e == -ENODATA ? "damaged geometry xattrs"
                  : strerror (-e));
    return -EIO;
  }
  if (size == 0 || size % ZV_SECTOR != 0 || objsize == 0 ||
      (objsize & (objsize - 1)) != 0 ||
      objsize < (1u << ZV_RADOS_OBJ_MIN_SHIFT) ||
      objsize > (1u << ZV_RADOS_OBJ_MAX_SHIFT) ||
      size / objsize > ZV_RADOS_MAX_OBJS) {
    rados_errmsg (err, errlen, r->dr_path, "header object %s: impossible "
                  "geometry (size %" PRIu64 ", object size %" PRIu64 ")",
                  r->dr_name, size, objsize);
    return -EIO;
  }
  r->dr_size = size;
  r->dr_obj_shift = (unsigned) __builtin_ctzll (objsize);
  return 0;
}

/* exit() with devices open (nbdkit exits so when it cannot listen after
 * get_ready, without the plugin's cleanup): release their locks, as the
 * kernel drops a dead process's flocks.  A kill -9 runs nothing: that is
 * what the refusal's lock-break hint is for.  (Registered from the
 * plugin's object, the handler also runs if that is unloaded first.) */
static void
rados_atexit (void)
{
  pthread_mutex_lock (&rados_open_lock);
  for (zv_dev_rados_t *r = rados_open_list; r != NULL; r = r->dr_next)
    if (r->dr_pid == getpid ())
      (void) rados_unlock (r->dr_io, r->dr_name, ZV_RADOS_LOCK,
                           r->dr_cookie);
  rados_open_list = NULL;
  pthread_mutex_unlock (&rados_open_lock);
}

static void
rados_atexit_register (void)
{
  ZV_VERIFY (atexit (rados_atexit) == 0);
}

/* Open, lock and size a RADOS device; see dev_impl.h. */
int
zv_dev_rados_open (const char *path, const zv_dev_opts_t *opts,
                   zv_dev_rados_t **rp, uint64_t *sizep, char *err,
                   size_t errlen)
{
  zv_dev_rados_t *r;
  char *pool = NULL, *name = NULL, host[64];
  uint64_t rnd = 0;
  int e;

  *rp = NULL;
  if (!rados_parse_path (path, &pool, &name)) {
    rados_errmsg (err, errlen, path, "not a RADOS device name: use "
                  "rados:CEPHPOOL/NAME (letters, digits, '.', '_', '-'; "
                  "a pool of up to %u, a name of up to %u)",
                  ZV_RADOS_POOL_MAX, ZV_RADOS_NAME_MAX);
    return -EINVAL;
  }
  r = zv_calloc (1, sizeof *r);
  r->dr_path = zv_strdup (path);
  r->dr_name = name;
  r->dr_pid = getpid ();
  e = rados_connect_opts (path, opts, &r->dr_cluster, err, errlen);
  if (e < 0) {
    r->dr_cluster = NULL;
    goto fail;
  }
  e = rados_ioctx_create (r->dr_cluster, pool, &r->dr_io);
  if (e < 0) {
    rados_errmsg (err, errlen, path, e == -ENOENT ? "no Ceph pool named %s"
                  : "Ceph pool %s: %s", pool, strerror (-e));
    e = e == -ENOENT ? -ENOENT : -EIO;
    r->dr_io = NULL;
    goto fail;
  }

  if (gethostname (host, sizeof host) != 0)
    snprintf (host, sizeof host, "?");
  host[sizeof host - 1] = '\0';
  if (getrandom (&rnd, sizeof rnd, 0) != sizeof rnd)
    rnd = (uint64_t) (uintptr_t) r ^ (uint64_t) time (NULL);
  snprintf (r->dr_cookie, sizeof r->dr_cookie, "%s:%ld:%016" PRIx64, host,
            (long) r->dr_pid, rnd);
  /* Locking an object creates it: a device that is not to be made must
   * exist first, or a refused open would leave an empty header behind. */
  if ((opts == NULL || opts->do_create_size == 0) &&
      (e = rados_header_exists (r, err, errlen)) < 0)
    goto fail;
  e = rados_lock_exclusive (r->dr_io, r->dr_name, ZV_RADOS_LOCK,
                            r->dr_cookie, "nbdkit-zvol device", NULL, 0);
  if ((e == -EBUSY || e == -EEXIST) && opts && opts->do_takeover) {
    e = rados_takeover (r, err, errlen);
    if (e < 0)
      goto fail;
  }
  else if (e == -EBUSY || e == -EEXIST) {
    rados_busy_msg (r, pool, err, errlen);
    e = -EBUSY;
    goto fail;
  }
  else if (e < 0) {
    rados_errmsg (err, errlen, path, "cannot lock the header object %s: %s",
                  r->dr_name, strerror (-e));
    e = -EIO;
    goto fail;
  }
  e = rados_load_header (r, opts, err, errlen);
  if (e < 0) {
    rados_unlock (r->dr_io, r->dr_name, ZV_RADOS_LOCK, r->dr_cookie);
    goto fail;
  }
  zv_debug ("%s: opened RADOS device, %" PRIu64 " bytes in objects of %"
            PRIu64 " bytes, lock cookie %s", path, r->dr_size,
            (uint64_t) 1 << r->dr_obj_shift, r->dr_cookie);
  free (pool);
  ZV_VERIFY (pthread_once (&rados_atexit_once, rados_atexit_register) == 0);
  pthread_mutex_lock (&rados_open_lock);
  r->dr_next = rados_open_list;
  rados_open_list = r;
  pthread_mutex_unlock (&rados_open_lock);
  *sizep = r->dr_size;
  *rp = r;
  return 0;

 fail:
  free (pool);
  zv_dev_rados_close (r);
  return e;
}

void
zv_dev_rados_close (zv_dev_rados_t *r)
{
  if (r == NULL)
    return;
  pthread_mutex_lock (&rados_open_lock);
  for (zv_dev_rados_t **pp = &rados_open_list; *pp != NULL;
       pp = &(*pp)->dr_next)
    if (*pp == r) {
      *pp = r->dr_next;
      break;
    }
  pthread_mutex_unlock (&rados_open_lock);
  if (r->dr_io != NULL) {
    if (r->dr_size != 0 && r->dr_pid == getpid ()) {
      int e = rados_unlock (r->dr_io, r->dr_name, ZV_RADOS_LOCK,
                            r->dr_cookie);
      if (e < 0 && e != -ENOENT)
        zv_error ("%s: unlock: %s", r->dr_path, strerror (-e));
    }
    rados_ioctx_destroy (r->dr_io);
  }
  if (r->dr_cluster != NULL && r->dr_pid == getpid ())
    rados_shutdown (r->dr_cluster);
  free (r->dr_name);
  free (r->dr_path);
  free (r);
}

/* ------------------------------------------------------------------ */
/* Batches                                                              */
/* ------------------------------------------------------------------ */

typedef struct rados_batch {
  zv_dev_io_t *rb_ios;
  size_t rb_n;
  uint32_t *rb_pending;                 /* pieces in flight, per request */
  int *rb_err;                          /* first error, per request */
  rados_piece_t *rb_ring;               /* in flight, oldest first */
  unsigned rb_cap, rb_head, rb_count;
} rados_batch_t;

/* A request whose pieces are all done: finish it through dev.c. */
static void
rados_req_done (rados_batch_t *b, size_t idx)
{
  zv_dev_io_t *io = &b->rb_ios[idx];
  uint32_t done = 0;

  ZV_VERIFY (!zv_dev_io_progress (io, &done, b->rb_err[idx] < 0
                                  ? b->rb_err[idx] : (int) io->di_len));
  zv_dev_io_observe_done (io);
}

/* Wait for the oldest piece in flight and account for it. */
static void
rados_reap_one (rados_batch_t *b)
{
  rados_piece_t *p = &b->rb_ring[b->rb_head];
  zv_dev_io_t *io = &b->rb_ios[p->rp_idx];
  zv_dev_rados_t *r = zv_dev_rados_of (io->di_dev);
  int res;

  ZV_VERIFY3U (b->rb_count, >, 0);
  rados_aio_wait_for_complete (p->rp_c);
  res = rados_aio_get_return_value (p->rp_c);
  rados_aio_release (p->rp_c);
  if (p->rp_op != NULL)
    rados_release_write_op (p->rp_op);
  if (io->di_op == ZV_DEV_READ && (res >= 0 || res == -ENOENT)) {
    /* A missing object, or the part past its end, reads as zeros. */
    uint32_t got = res > 0 ? (uint32_t) res : 0;
    if (got > p->rp_len)
      got = p->rp_len;
    memset (p->rp_buf + got, 0, p->rp_len - got);
    res = 0;
  }
  if (res == -ETIMEDOUT)
    atomic_store_explicit (&r->dr_down_until, zv_now_ns () +
                           (uint64_t) zv_rados_op_timeout * 1000000000ull,
                           memory_order_relaxed);
  if (res < 0) {
    if (b->rb_err[p->rp_idx] == 0)
      zv_error ("%s: %s of object %s.%016" PRIx64 ": %s%s", r->dr_path,
                io->di_op == ZV_DEV_READ ? "read" : "write", r->dr_name,
                p->rp_obj, strerror (-res), res == -ETIMEDOUT
                ? " (the cluster did not answer within rados_op_timeout; "
                "for as long again, requests to this device fail at once)"
                : "");
    if (b->rb_err[p->rp_idx] == 0)
      b->rb_err[p->rp_idx] = -EIO;
  }
  b->rb_head = (b->rb_head + 1) % b->rb_cap;
  b->rb_count--;
  if (--b->rb_pending[p->rp_idx] == 0)
    rados_req_done (b, p->rp_idx);
}

/* Issue one piece inside object obj (waiting for room first): a read of
 * len bytes at in into buf, or the write operation op. */
static void
rados_issue (rados_batch_t *b, size_t idx, uint64_t obj, char *buf,
             uint64_t in, uint32_t len, rados_write_op_t op)
{
  zv_dev_io_t *io = &b->rb_ios[idx];
  zv_dev_rados_t *r = zv_dev_rados_of (io->di_dev);
  rados_piece_t *p;
  char oid[ZV_RADOS_NAME_MAX + 20];
  int e;

  /* A cluster that just let a request time out is not asked again for
   * a while: a txg's hundreds of writes, a few in flight at a time, would
   * each wait the whole timeout. */
  if (zv_now_ns () < atomic_load_explicit (&r->dr_down_until,
                                           memory_order_relaxed)) {
    if (op != NULL)
      rados_release_write_op (op);
    b->rb_err[idx] = -EIO;
    return;
  }
  while (b->rb_count >= b->rb_cap)
    rados_reap_one (b);
  p = &b->rb_ring[(b->rb_head + b->rb_count) % b->rb_cap];
  p->rp_idx = idx;
  p->rp_op = op;
  p->rp_buf = buf;
  p->rp_len = len;
  p->rp_obj = obj;
  snprintf (oid, sizeof oid, "%s.%016" PRIx64, r->dr_name, obj);
  ZV_VERIFY (rados_aio_create_completion2 (NULL, NULL, &p->rp_c) == 0);
  if (op == NULL)
    e = rados_aio_read (r->dr_io, oid, p->rp_c, buf, len, in);
  else
    e = rados_aio_write_op_operate (op, r->dr_io, p->rp_c, oid, NULL, 0);
  if (e < 0) {
    /* Not issued: account for it as a completed failure. */
    rados_aio_release (p->rp_c);
    if (op != NULL)
      rados_release_write_op (op);
    zv_error ("%s: cannot issue a %s of object %s: %s", r->dr_path,
              op == NULL ? "read" : "write", oid, strerror (-e));
    if (b->rb_err[idx] == 0)
      b->rb_err[idx] = -EIO;
    return;
  }
  b->rb_pending[idx]++;
  b->rb_count++;
}

/* Read one contiguous range of a request, cut at object boundaries. */
static void
rados_read_range (rados_batch_t *b, size_t idx, char *buf, uint64_t off,
                  uint64_t len)
{
  zv_dev_rados_t *r = zv_dev_rados_of (b->rb_ios[idx].di_dev);
  uint64_t objsize = (uint64_t) 1 << r->dr_obj_shift;

  while (len > 0) {
    uint64_t n = ZV_MIN (len, objsize - (off & (objsize - 1)));
    rados_issue (b, idx, off >> r->dr_obj_shift, buf, off & (objsize - 1),
                 (uint32_t) n, NULL);
    buf += n;
    off += n;
    len -= n;
  }
}

/* Write a request: one write operation per object it touches, holding
 * every extent of it there (a gathered write of many blocks is one
 * request to the OSD, not one per segment: the cap counts requests). */
static void
rados_issue_write (rados_batch_t *b, size_t idx)
{
  zv_dev_io_t *io = &b->rb_ios[idx];
  zv_dev_rados_t *r = zv_dev_rados_of (io->di_dev);
  uint64_t objsize = (uint64_t) 1 << r->dr_obj_shift;
  uint64_t off = io->di_offset, obj = 0;
  struct iovec one = { .iov_base = io->di_buf, .iov_len = io->di_len };
  const struct iovec *iov = io->di_iov != NULL ? io->di_iov : &one;
  unsigned cnt = io->di_iov != NULL ? io->di_iovcnt : 1;
  rados_write_op_t op = NULL;

  for (unsigned s = 0; s < cnt; s++) {
    char *buf = iov[s].iov_base;
    uint64_t len = iov[s].iov_len;

    while (len > 0) {
      uint64_t n = ZV_MIN (len, objsize - (off & (objsize - 1)));

      if (op != NULL && off >> r->dr_obj_shift != obj) {
        rados_issue (b, idx, obj, NULL, 0, 0, op);
        op = NULL;
      }
      if (op == NULL) {
        op = rados_create_write_op ();
        ZV_VERIFY (op != NULL);
        obj = off >> r->dr_obj_shift;
      }
      rados_write_op_write (op, buf, n, off & (objsize - 1));
      buf += n;
      off += n;
      len -= n;
    }
  }
  if (op != NULL)
    rados_issue (b, idx, obj, NULL, 0, 0, op);
}

/* Run a batch of RADOS devices' requests; see the theory comment. */
void
zv_dev_rados_batch (zv_dev_io_t *ios, size_t n, unsigned cap)
{
  rados_batch_t b = { .rb_ios = ios, .rb_n = n };

  if (cap == 0 || cap > zv_rados_max_active)
    cap = zv_rados_max_active;
  b.rb_cap = ZV_MAX (cap, 1u);
  b.rb_pending = zv_calloc (n, sizeof *b.rb_pending);
  b.rb_err = zv_calloc (n, sizeof *b.rb_err);
  b.rb_ring = zv_calloc (b.rb_cap, sizeof *b.rb_ring);

  for (size_t i = 0; i < n; i++) {
    zv_dev_io_t *io = &ios[i];
    zv_dev_rados_t *r = zv_dev_rados_of (io->di_dev);

    ZV_VERIFY (r != NULL);
    if (io->di_op == ZV_DEV_FLUSH) {
      /* The barrier: every earlier request has completed. */
      while (b.rb_count > 0)
        rados_reap_one (&b);
    }
    if (!zv_dev_io_start (io))
      continue;
    /* b.rb_pending[i] counts the pieces; hold one for the issuing. */
    b.rb_pending[i] = 1;
    if (r->dr_pid != getpid ()) {
      zv_error ("%s: this process (%ld) is a fork of the one that opened "
                "the RADOS device (%ld), and librados does not survive a "
                "fork (run nbdkit in the foreground: -f)", r->dr_path,
                (long) getpid (), (long) r->dr_pid);
      b.rb_err[i] = -EIO;
    }
    else if (io->di_op == ZV_DEV_FLUSH)
      ;
    else if (io->di_op != ZV_DEV_READ)
      rados_issue_write (&b, i);
    else if (io->di_iov == NULL)
      rados_read_range (&b, i, io->di_buf, io->di_offset, io->di_len);
    else {
      uint64_t off = io->di_offset;
      for (unsigned s = 0; s < io->di_iovcnt; s++) {
        rados_read_range (&b, i, io->di_iov[s].iov_base, off,
                          io->di_iov[s].iov_len);
        off += io->di_iov[s].iov_len;
      }
    }
    if (--b.rb_pending[i] == 0)
      rados_req_done (&b, i);
  }
  while (b.rb_count > 0)
    rados_reap_one (&b);
  free (b.rb_ring);
  free (b.rb_err);
  free (b.rb_pending);
}

/* ---- tunables (tunable.h) ---- */
const zv_tunable_t zv_dev_rados_tunable_table[] = {
  { .tn_name = "rados_mount_timeout", .tn_module = "dev_rados",
    ZV_TUNABLE_VAR_UINT (zv_rados_mount_timeout),
    .tn_default = 10, .tn_min = 1, .tn_max = 3600,
    .tn_unit = ZV_TUNABLE_UNIT_S, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the RADOS device, connecting",
    .tn_desc = "How long a RADOS device's open waits for the Ceph cluster "
    "(client_mount_timeout) before it fails with a message." },
  { .tn_name = "rados_op_timeout", .tn_module = "dev_rados",
    ZV_TUNABLE_VAR_UINT (zv_rados_op_timeout),
    .tn_default = 30, .tn_min = 1, .tn_max = 3600,
    .tn_unit = ZV_TUNABLE_UNIT_S, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the RADOS device, connecting",
    .tn_desc = "How long a RADOS request may wait for the cluster "
    "(rados_osd_op_timeout, rados_mon_op_timeout) before it fails with "
    "EIO." },
  { .tn_name = "rados_max_active", .tn_module = "dev_rados",
    ZV_TUNABLE_VAR_UINT (zv_rados_max_active),
    .tn_default = 64, .tn_min = 1, .tn_max = 4096,
    .tn_unit = ZV_TUNABLE_UNIT_COUNT, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the RADOS device, at each batch",
    .tn_desc = "The most aio requests one batch keeps in flight on RADOS "
    "devices (a request is cut at object boundaries)." },
  { .tn_name = "rados_blocklist_time", .tn_module = "dev_rados",
    ZV_TUNABLE_VAR_UINT (zv_rados_blocklist_s),
    .tn_default = 3600, .tn_min = 60, .tn_max = 30 * 86400,
    .tn_unit = ZV_TUNABLE_UNIT_S, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the RADOS device, taking over",
    .tn_desc = "How long a takeover keeps the old holder's client "
    "blocklisted (fenced) in the cluster." },
  { .tn_name = "rados_object_shift", .tn_module = "dev_rados",
    ZV_TUNABLE_VAR_UINT (zv_rados_obj_shift),
    .tn_default = 22, .tn_min = ZV_RADOS_OBJ_MIN_SHIFT,
    .tn_max = ZV_RADOS_OBJ_MAX_SHIFT,
    .tn_unit = ZV_TUNABLE_UNIT_LOG2, .tn_when = ZV_TUNABLE_AT_CREATE,
    .tn_reader = "the RADOS device, when it is made",
    .tn_desc = "Size of the objects a new RADOS device is striped over "
    "(22: 4 MiB, as rbd); stored in the device's header." },
  ZV_TUNABLE_END
};
