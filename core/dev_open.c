/*
 * dev_open.c: opening and closing a device: what a path may name,
 * O_DIRECT where the file system allows it, the exclusive lock (and a
 * loop device's backing file's), and the messages that say who holds
 * a device we are refused.  dev.c has the structure (dev_impl.h) and
 * its I/O; RADOS devices and mirrors are opened by their drivers
 * (dev_rados.c, dev_mirror.c), which zv_dev_open_opts() hands their
 * paths to.
 *
 * Theory
 * ------
 * Opening.  stat() first, so that we never open a character device or a
 * FIFO read-write just to reject it.  Regular files and block devices are
 * opened O_RDWR|O_CLOEXEC|O_DIRECT (block devices also O_EXCL, which the
 * kernel refuses with EBUSY while anyone else holds the device
 * exclusively: a mount, md, another pool).  A file system without direct
 * I/O (ramfs, tmpfs before Linux 6.6, some FUSE) fails that open with
 * EINVAL, and we reopen buffered.  Then flock(LOCK_EX|LOCK_NB): the lock
 * belongs to the open file description, so a second zv_dev_open() of the
 * same file conflicts even inside one process, and the lock goes away by
 * itself when the process dies.  The lock covers the processes of one
 * host (see docs/design.md for why there is no on-disk in-use mark).
 *
 * Loop devices.  A loop device is a second name for its backing file,
 * which the file's flock does not see: a server on /dev/loopN and one on
 * the file would both serve, each with its own idea of the pool.  So a
 * block device that is a loop device or a partition of one (sysfs: its
 * directory, or its disk's, has "loop"; without sysfs, major 7) also
 * locks the file: LOOP_GET_STATUS64 gives the device and inode the kernel
 * has open, sysfs's backing_file its name; we open that name, check the
 * inode, and flock it (a block device behind the loop: O_EXCL, as for
 * our own devices), held as long as the device is open (dev_backing_fd).
 * A server on the file flocks the same inode, so the two conflict in
 * either order, and so do two loop devices over one file.  When the file
 * cannot be reached by that name (deleted; another mount namespace; a
 * name the ioctl cut at 63 characters) we warn and go on rather than
 * refuse: a loop device handed to a container without its file is a
 * fair use, and a deleted file cannot be opened by anybody else; the
 * device's own lock is then all there is.  Not covered: stacked loops
 * (over a file on a file system mounted from another loop device, or
 * over a loop device over a file): only the nearest backing file or
 * device is locked.  The lock is whole-file, so two loop devices over
 * disjoint ranges of one file (losetup --offset) conflict too.
 *
 * Messages.  A refusal names the holder: /proc/locks gives the pid that
 * took the flock, kept if that process still has the file open (a lock
 * taken before a fork names the parent: nbdkit opens the pool, then
 * forks into the background and the parent exits), else the one other
 * process that has the file open; and the loop devices over the file
 * (/sys/block/loop* backing_file), the holder's if it has one open.  A
 * device that loop devices are set up over is warned about at open:
 * whatever writes through them damages the pool.
 */
#include <config.h>

#ifndef _GNU_SOURCE                 /* O_DIRECT; config.h normally has it */
#define _GNU_SOURCE 1
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <linux/major.h>

#include "zv_util.h"
#include "dev_impl.h"

/* ------------------------------------------------------------------ */
/* Opening and closing                                                  */
/* ------------------------------------------------------------------ */

/* Put "PATH: message" into the caller's buffer (if it gave one). */
static void __attribute__ ((format (printf, 4, 5)))
dev_errmsg (char *err, size_t errlen, const char *path,
            const char *fmt, ...)
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

/* Map a failed open()/stat() errno to our error code and message. */
static int
dev_open_error (int e, const char *what, const char *path,
                char *err, size_t errlen)
{
  switch (e) {
  case ENOENT:
    dev_errmsg (err, errlen, path, "no such file");
    return -ENOENT;
  case EBUSY:                         /* O_EXCL on a claimed block device */
    dev_errmsg (err, errlen, path,
                "in use by another process (device locked)");
    return -EBUSY;
  case EISDIR:
    dev_errmsg (err, errlen, path,
                "is a directory, not a regular file or block device");
    return -EINVAL;
  default:
    dev_errmsg (err, errlen, path, "%s: %s", what, strerror (e));
    return -e;
  }
}

/* The only kinds of file a pool may live on. */
static bool
dev_type_ok (mode_t mode)
{
  return S_ISREG (mode) || S_ISBLK (mode);
}

/*
 * Open with flags, direct where the file system allows it.  Returns the
 * fd or -errno; *directp says whether O_DIRECT stuck.
 */
static int
dev_open_fd (const char *path, int flags, bool *directp)
{
  int fd;

  *directp = true;
  fd = open (path, flags | O_DIRECT);
  if (fd == -1 && errno == EINVAL) {
    /* No direct I/O on this file system (ramfs, old tmpfs, ...). */
    *directp = false;
    fd = open (path, flags);
  }
  return fd == -1 ? -errno : fd;
}

/*
 * How long to keep trying for the lock, ms.  A process killed with
 * SIGKILL releases its lock only when the kernel has torn down its
 * io_uring, a moment after it died: a server restarted at once would
 * otherwise see its own predecessor's lock.  A live owner still fails us
 * after this short wait.  Tunable dev_lock_wait (in dev.c's table).
 */
unsigned zv_dev_lock_wait_ms = 1500;

/* Take the exclusive pool lock (see zv_dev_lock_wait_ms). */
static int
dev_lock (int fd)
{
  for (unsigned waited = 0;;) {
    if (flock (fd, LOCK_EX | LOCK_NB) == 0)
      return 0;
    if (errno == EINTR)
      continue;
    if (errno != EWOULDBLOCK || waited >= zv_dev_lock_wait_ms)
      return -errno;
    usleep (10000);
    waited += 10;
  }
}

/* ---- what holds a lock, and loop devices ---- */

/*
 * What a conflict is about: a regular file is its inode, a block device
 * its device number (so that any node of it matches).
 */
typedef struct dev_ident {
  bool id_blk;
  dev_t id_dev;                       /* st_rdev of a block device, else st_dev */
  ino_t id_ino;                       /* 0 for a block device */
} dev_ident_t;

static void
dev_ident_of (const struct stat *st, dev_ident_t *id)
{
  id->id_blk = S_ISBLK (st->st_mode);
  id->id_dev = id->id_blk ? st->st_rdev : st->st_dev;
  id->id_ino = id->id_blk ? 0 : st->st_ino;
}

/*
 * Is the file at 'path' the one 'id' names?  statx without a sync: the
 * paths looked at here are other processes' descriptors and loop
 * devices' files, and a network file system need not be asked.
 */
static bool
dev_path_is (const char *path, const dev_ident_t *id)
{
  struct statx sx;

  if (statx (AT_FDCWD, path, AT_STATX_DONT_SYNC,
             STATX_TYPE | STATX_INO, &sx) == -1)
    return false;
  if (id->id_blk)
    return S_ISBLK (sx.stx_mode)
      && makedev (sx.stx_rdev_major, sx.stx_rdev_minor) == id->id_dev;
  return S_ISREG (sx.stx_mode) && sx.stx_ino == id->id_ino
    && makedev (sx.stx_dev_major, sx.stx_dev_minor) == id->id_dev;
}

/* One line of a sysfs or proc file, without its newline; false if absent. */
static bool
dev_read_line (const char *path, char *buf, size_t len)
{
  int fd = open (path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  if (fd == -1)
    return false;
  n = read (fd, buf, len - 1);
  close (fd);
  if (n <= 0)
    return false;
  buf[n] = '\0';
  buf[strcspn (buf, "\n")] = '\0';
  return true;
}

/* Does process 'pid' have 'id' open? */
static bool
dev_proc_has_open (pid_t pid, const dev_ident_t *id)
{
  char dir[64], p[64 + 256 + 2];         /* dir, "/", a d_name */
  struct dirent *de;
  bool found = false;
  DIR *d;

  snprintf (dir, sizeof dir, "/proc/%d/fd", (int) pid);
  d = opendir (dir);
  if (d == NULL)
    return false;
  while (!found && (de = readdir (d)) != NULL) {
    if (de->d_name[0] == '.')
      continue;
    snprintf (p, sizeof p, "%s/%s", dir, de->d_name);
    found = dev_path_is (p, id);
  }
  closedir (d);
  return found;
}

/*
 * The process that holds the flock of the file 'st' describes: the pid
 * /proc/locks gives, if that process still has the file open.  A lock
 * taken before a fork names the parent (nbdkit opens the pool, then
 * forks into the background and the parent exits): then the one other
 * process that has the file open.  0 when that cannot be told.
 */
static pid_t
dev_flock_holder (const struct stat *st)
{
  dev_ident_t id;
  char line[256];
  pid_t pid = 0, only = 0;
  struct dirent *de;
  FILE *f;
  DIR *d;

  dev_ident_of (st, &id);
  f = fopen ("/proc/locks", "re");
  if (f != NULL) {
    while (pid == 0 && fgets (line, sizeof line, f) != NULL) {
      char kind[16], how[16], mode[16];
      unsigned maj, min;
      unsigned long long ino;
      int p;

      /* "1: FLOCK  ADVISORY  WRITE 1234 fe:01:5678 0 EOF"; waiters
       * have "->" after the number. */
      if (sscanf (line, "%*d: %15s %15s %15s %d %x:%x:%llu", kind, how,
                  mode, &p, &maj, &min, &ino) == 7
          && strcmp (kind, "FLOCK") == 0 && strcmp (mode, "WRITE") == 0
          && maj == major (st->st_dev) && min == minor (st->st_dev)
          && ino == (unsigned long long) st->st_ino && p > 0)
        pid = p;
    }
    fclose (f);
  }
  if (pid == getpid () || (pid > 0 && dev_proc_has_open (pid, &id)))
    return pid;

  d = opendir ("/proc");
  if (d == NULL)
    return 0;
  while ((de = readdir (d)) != NULL) {
    char *end;
    long p = strtol (de->d_name, &end, 10);

    if (*end != '\0' || p <= 0 || p > INT_MAX || p == getpid ()
        || !dev_proc_has_open ((pid_t) p, &id))
      continue;
    if (only != 0) {
      only = 0;                       /* several: we cannot tell which */
      break;
    }
    only = (pid_t) p;
  }
  closedir (d);
  return only;
}

/* "process 1234 (nbdkit)", "this process", or "" for a holder pid. */
static void
dev_describe_pid (pid_t pid, char *who, size_t len)
{
  char p[64], comm[64];

  who[0] = '\0';
  if (pid <= 0)
    return;
  if (pid == getpid ()) {
    snprintf (who, len, "this process");
    return;
  }
  snprintf (p, sizeof p, "/proc/%d/comm", (int) pid);
  if (dev_read_line (p, comm, sizeof comm))
    snprintf (who, len, "process %d (%s)", (int) pid, comm);
  else
    snprintf (who, len, "process %d", (int) pid);
}

/*
 * The loop devices (/sys/block/loop*) whose backing file or device is
 * 'id', except the device 'self', as "/dev/loop0, /dev/loop3" in 'out';
 * with 'holder' > 0, only the first of them that process has open.
 * Returns how many were found.  Without sysfs, none are.
 */
static unsigned
dev_loops_over (const dev_ident_t *id, dev_t self, pid_t holder,
                char *out, size_t len)
{
  char p[PATH_MAX], file[PATH_MAX + 32], num[32];
  struct dirent *de;
  unsigned n = 0, maj, min;
  size_t used = 0;
  DIR *d;

  out[0] = '\0';
  d = opendir ("/sys/block");
  if (d == NULL)
    return 0;
  while ((de = readdir (d)) != NULL) {
    dev_ident_t loop = { .id_blk = true };
    int w;

    if (strncmp (de->d_name, "loop", 4) != 0 || strlen (de->d_name) > 64)
      continue;
    snprintf (p, sizeof p, "/sys/block/%s/loop/backing_file", de->d_name);
    if (!dev_read_line (p, file, sizeof file) || !dev_path_is (file, id))
      continue;
    snprintf (p, sizeof p, "/sys/block/%s/dev", de->d_name);
    if (!dev_read_line (p, num, sizeof num)
        || sscanf (num, "%u:%u", &maj, &min) != 2)
      continue;
    loop.id_dev = makedev (maj, min);
    if (loop.id_dev == self)
      continue;
    if (holder > 0 && !dev_proc_has_open (holder, &loop))
      continue;
    w = snprintf (out + used, len - used, "%s/dev/%s", n ? ", " : "",
                  de->d_name);
    if (w > 0 && (size_t) w < len - used)
      used += (size_t) w;
    n++;
    if (holder > 0)
      break;
  }
  closedir (d);
  return n;
}

/*
 * The message of a regular file whose flock is held: who holds it and,
 * when the file backs loop devices, which (the holder's, if it has one
 * open: a server on a loop device over this file).
 */
static void
dev_file_busy_msg (const char *path, const struct stat *st,
                   char *err, size_t errlen)
{
  char who[128], loops[256];
  pid_t pid = dev_flock_holder (st);
  dev_ident_t id;

  dev_ident_of (st, &id);
  dev_describe_pid (pid, who, sizeof who);
  if (pid > 0 && pid != getpid ()
      && dev_loops_over (&id, 0, pid, loops, sizeof loops) > 0)
    dev_errmsg (err, errlen, path, "in use by another process (device "
                "locked by %s, through %s)", who, loops);
  else if (pid == getpid ())
    dev_errmsg (err, errlen, path, "already in use in this process "
                "(device locked)");
  else if (pid > 0)
    dev_errmsg (err, errlen, path, "in use by another process (device "
                "locked by %s)", who);
  else if (dev_loops_over (&id, 0, 0, loops, sizeof loops) > 0)
    dev_errmsg (err, errlen, path, "in use by another process (device "
                "locked; the file backs %s)", loops);
  else
    dev_errmsg (err, errlen, path, "in use by another process (device "
                "locked)");
}

/* The kernel's encoding of a device number (new_encode_dev), which the
 * loop ioctl reports, as a dev_t. */
static dev_t
dev_from_kernel (uint64_t k)
{
  return makedev ((unsigned) ((k >> 8) & 0xfff),
                  (unsigned) ((k & 0xff) | ((k >> 12) & 0xfff00)));
}

/*
 * If block device 'fd' (device number 'rdev') is a loop device or a
 * partition of one, bound to a file: true, with what the kernel has open
 * in *backing and its path in 'file' (sysfs's backing_file; without
 * sysfs the ioctl's name, which may be cut at 63 characters, or "").
 */
static bool
dev_loop_backing (int fd, dev_t rdev, dev_ident_t *backing,
                  char *file, size_t len)
{
  struct loop_info64 li;
  char dir[128], p[192];
  bool sys = false;

  /* The disk's directory holds "loop"; a partition's is inside it. */
  snprintf (dir, sizeof dir, "/sys/dev/block/%u:%u", major (rdev),
            minor (rdev));
  snprintf (p, sizeof p, "%s/loop", dir);
  if (access (p, F_OK) == 0)
    sys = true;
  else {
    snprintf (p, sizeof p, "%s/partition", dir);
    if (access (p, F_OK) == 0) {
      snprintf (p, sizeof p, "%s/../loop", dir);
      sys = access (p, F_OK) == 0;
      if (sys)
        snprintf (dir + strlen (dir), sizeof dir - strlen (dir), "/..");
    }
  }
  if (!sys && major (rdev) != LOOP_MAJOR)
    return false;
  memset (&li, 0, sizeof li);
  /* ENXIO: a loop device with no file (size 0, refused later). */
  if (ioctl (fd, LOOP_GET_STATUS64, &li) == -1)
    return false;
  backing->id_blk = li.lo_rdevice != 0;
  backing->id_dev = dev_from_kernel (backing->id_blk ? li.lo_rdevice
                                     : li.lo_device);
  backing->id_ino = backing->id_blk ? 0 : (ino_t) li.lo_inode;
  snprintf (p, sizeof p, "%s/loop/backing_file", dir);
  if (!sys || !dev_read_line (p, file, len)) {
    li.lo_file_name[LO_NAME_SIZE - 1] = '\0';
    snprintf (file, len, "%s", (const char *) li.lo_file_name);
  }
  return true;
}

/*
 * Block device 'path' (open as 'fd', device number 'rdev'): when it is
 * a loop device, lock its backing file too (see the theory comment).
 * Returns 0 with *bfdp the locked descriptor, or -1 when there is
 * nothing to lock or the file is out of reach (a warning says so); or
 * -EBUSY with a message when another holder has the file.
 */
static int
dev_lock_backing (const char *path, int fd, dev_t rdev, int *bfdp,
                  char *err, size_t errlen)
{
  char file[PATH_MAX + 32], why[128], who[128], loops[256];
  dev_ident_t id;
  struct stat st;
  size_t flen;
  int bfd, r;

  *bfdp = -1;
  if (!dev_loop_backing (fd, rdev, &id, file, sizeof file))
    return 0;
  flen = strlen (file);
  /* A block device behind the loop is claimed as we claim devices:
   * O_EXCL, which a server on that device holds too. */
  bfd = flen == 0 ? -1
    : open (file, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK
            | O_NOFOLLOW | (id.id_blk ? O_EXCL : 0));
  if (bfd == -1 && flen > 0 && errno == EBUSY && id.id_blk) {
    dev_errmsg (err, errlen, path, "in use by another process: its "
                "backing device %s is held exclusively", file);
    return -EBUSY;
  }
  if (bfd == -1) {
    if (flen == 0)
      snprintf (why, sizeof why, "its name is unknown");
    else if (flen > 10 && strcmp (file + flen - 10, " (deleted)") == 0) {
      file[flen - 10] = '\0';          /* sysfs's mark */
      snprintf (why, sizeof why, "it was deleted");
    }
    else
      snprintf (why, sizeof why, "%s", strerror (errno));
    goto unreachable;
  }
  if (fstat (bfd, &st) == -1
      || (id.id_blk ? !S_ISBLK (st.st_mode) || st.st_rdev != id.id_dev
          : !S_ISREG (st.st_mode) || st.st_dev != id.id_dev
            || st.st_ino != id.id_ino)) {
    snprintf (why, sizeof why, "the file of that name is another one: "
              "replaced, or a view from another mount namespace");
    close (bfd);
    goto unreachable;
  }
  r = dev_lock (bfd);
  if (r == -EWOULDBLOCK) {
    pid_t pid = id.id_blk ? 0 : dev_flock_holder (&st);

    dev_describe_pid (pid, who, sizeof who);
    if (pid == getpid ())
      dev_errmsg (err, errlen, path, "already in use in this process: "
                  "its backing file %s is open as a device too", file);
    else if (pid > 0 && dev_loops_over (&id, rdev, pid, loops,
                                        sizeof loops) > 0)
      dev_errmsg (err, errlen, path, "in use by another process: its "
                  "backing file %s is locked by %s, through %s", file, who,
                  loops);
    else if (pid > 0)
      dev_errmsg (err, errlen, path, "in use by another process: its "
                  "backing file %s is locked by %s", file, who);
    else
      dev_errmsg (err, errlen, path, "in use by another process: its "
                  "backing file %s is locked", file);
    close (bfd);
    return -EBUSY;
  }
  if (r < 0) {
    snprintf (why, sizeof why, "flock: %s", strerror (-r));
    close (bfd);
    goto unreachable;
  }
  zv_debug ("%s: loop device over %s, which is locked too", path, file);
  *bfdp = bfd;
  return 0;

 unreachable:
  zv_warn ("%s: a loop device over %s, which cannot be locked (%s): a "
           "server on that %s, or on another loop device over it, would "
           "not be refused", path, flen ? file : "an unknown file", why,
           id.id_blk ? "device" : "file");
  return 0;
}

/* A device that backs loop devices can be written behind the pool's
 * back: say so (a server on such a loop device is refused). */
static void
dev_warn_loops (const char *path, const struct stat *st)
{
  char loops[256];
  dev_ident_t id;

  dev_ident_of (st, &id);
  if (dev_loops_over (&id, 0, 0, loops, sizeof loops) > 0)
    zv_warn ("%s: it is the backing %s of %s: whatever writes through "
             "that (except a server of this pool, which is refused) "
             "damages the pool", path, id.id_blk ? "device" : "file",
             loops);
}

/* O_EXCL refused a block device: say which loop devices it backs, if
 * any (a server on one of them holds it). */
static void
dev_blk_busy_msg (const char *path, const struct stat *st,
                  char *err, size_t errlen)
{
  char loops[256];
  dev_ident_t id;

  dev_ident_of (st, &id);
  if (dev_loops_over (&id, 0, 0, loops, sizeof loops) > 0)
    dev_errmsg (err, errlen, path, "in use by another process (device "
                "locked; it backs %s)", loops);
  else
    dev_open_error (EBUSY, "open", path, err, errlen);
}

/* Size in bytes of the open device, not yet rounded. */
static int
dev_query_size (int fd, bool blockdev, const struct stat *st,
                uint64_t *sizep)
{
  if (blockdev) {
    uint64_t sz;
    if (ioctl (fd, BLKGETSIZE64, &sz) == -1)
      return -errno;
    *sizep = sz;
  }
  else {
    ZV_VERIFY (st->st_size >= 0);
    *sizep = (uint64_t) st->st_size;
  }
  return 0;
}

int
zv_dev_open (const char *path, zv_dev_t **devp, char *err, size_t errlen)
{
  return zv_dev_open_opts (path, NULL, devp, err, errlen);
}

/* Open and lock a device; see dev.h.  Every failure leaves a message. */
int
zv_dev_open_opts (const char *path, const zv_dev_opts_t *opts,
                  zv_dev_t **devp, char *err, size_t errlen)
{
  struct stat st, fst;
  zv_dev_t *dev;
  bool blockdev, direct;
  uint64_t size = 0;
  int fd, bfd = -1, r;

  ZV_VERIFY (path != NULL);
  ZV_VERIFY (devp != NULL);
  *devp = NULL;
  if (err != NULL && errlen > 0)
    err[0] = '\0';

  if (zv_dev_path_is_mirror (path)) {
    zv_dev_mirror_t *mm;

    r = zv_dev_mirror_open (path, opts, &mm, &size, &direct, err, errlen);
    if (r < 0)
      return r;
    dev = zv_dev_new (path, -1, size);
    dev->dev_mirror = mm;
    dev->dev_direct = direct;
    zv_dev_mirror_set_name (mm, dev->dev_path);
    *devp = dev;
    return 0;
  }

  if (zv_dev_path_is_rados (path)) {
    zv_dev_rados_t *rd;

    r = zv_dev_rados_open (path, opts, &rd, &size, err, errlen);
    if (r < 0)
      return r;
    dev = zv_dev_new (path, -1, size);
    dev->dev_rados = rd;
    *devp = dev;
    return 0;
  }

  if (stat (path, &st) == -1)
    return dev_open_error (errno, "stat", path, err, errlen);
  if (!dev_type_ok (st.st_mode)) {
    dev_errmsg (err, errlen, path, "%s, not a regular file or "
                "block device", S_ISDIR (st.st_mode) ? "is a directory"
                : "is a special file");
    return -EINVAL;
  }
  blockdev = S_ISBLK (st.st_mode);

  fd = dev_open_fd (path, O_RDWR | O_CLOEXEC | (blockdev ? O_EXCL : 0),
                   &direct);
  if (fd == -EBUSY && blockdev) {
    dev_blk_busy_msg (path, &st, err, errlen);
    return -EBUSY;
  }
  if (fd < 0)
    return dev_open_error (-fd, "open", path, err, errlen);

  /* The path could have been replaced between stat() and open(). */
  if (fstat (fd, &fst) == -1) {
    r = -errno;
    dev_errmsg (err, errlen, path, "fstat: %s", strerror (-r));
    goto fail;
  }
  if ((fst.st_mode & S_IFMT) != (st.st_mode & S_IFMT)) {
    dev_errmsg (err, errlen, path, "changed type while being opened");
    r = -EINVAL;
    goto fail;
  }

  r = dev_lock (fd);
  if (r == -EWOULDBLOCK) {
    if (blockdev)
      dev_blk_busy_msg (path, &fst, err, errlen);
    else
      dev_file_busy_msg (path, &fst, err, errlen);
    r = -EBUSY;
    goto fail;
  }
  if (r < 0) {
    dev_errmsg (err, errlen, path, "flock: %s", strerror (-r));
    goto fail;
  }
  if (blockdev) {
    r = dev_lock_backing (path, fd, fst.st_rdev, &bfd, err, errlen);
    if (r < 0)
      goto fail;
  }
  dev_warn_loops (path, &fst);

  r = dev_query_size (fd, blockdev, &fst, &size);
  if (r < 0) {
    dev_errmsg (err, errlen, path, "cannot get size: %s", strerror (-r));
    goto fail;
  }

  dev = zv_dev_new (path, fd, size);
  dev->dev_direct = direct;
  dev->dev_blockdev = blockdev;
  dev->dev_backing_fd = bfd;

  zv_debug ("%s: opened %s, %" PRIu64 " bytes, %s I/O", path,
            blockdev ? "block device" : "file", dev->dev_size,
            direct ? "direct" : "buffered (no O_DIRECT here)");
  *devp = dev;
  return 0;

 fail:
  if (bfd >= 0)
    close (bfd);
  close (fd);
  return r;
}

/*
 * Write zeros over the first 'size' bytes of the regular file 'path' and
 * make them durable (dev.h).  Why: on a sparse file, every txg write that
 * lands in a hole makes the host file system allocate, and then the
 * intent log's next fdatasync on the same file commits the file system's
 * journal as well (ext4), so sync writes wait on it.  Copy on write moves
 * over the whole file, so its blocks all get allocated in the end; this
 * does it before the pool is made.  O_DIRECT where the file system takes
 * it, so the zeros do not crowd the page cache; 1 MiB at a time, progress
 * at most once per percent.
 */
#define DEV_FILL_CHUNK (1u << 20)

int
zv_dev_file_fill (const char *path, uint64_t size,
                  void (*progress) (void *arg, const char *what,
                                    uint64_t done, uint64_t total),
                  void *arg)
{
  struct stat st;
  void *zeros = NULL;
  uint64_t done = 0;
  unsigned last = 101;
  bool direct;
  int fd, flags, r = 0;

  /* stat() first: opening a FIFO for writing would wait for a reader. */
  if (stat (path, &st) == -1)
    return -errno;
  if (!S_ISREG (st.st_mode))
    return -EINVAL;             /* a block device has no holes to fill */
  fd = dev_open_fd (path, O_WRONLY | O_CLOEXEC | O_NONBLOCK, &direct);
  if (fd < 0)
    return fd;
  if (fstat (fd, &st) == -1) {
    r = -errno;
    goto out;
  }
  if (!S_ISREG (st.st_mode)) {
    r = -EINVAL;                /* replaced since the stat() */
    goto out;
  }
  /* O_NONBLOCK was for the open only (a FIFO put in its place). */
  if ((flags = fcntl (fd, F_GETFL)) == -1
      || fcntl (fd, F_SETFL, flags & ~O_NONBLOCK) == -1) {
    r = -errno;
    goto out;
  }
  if (posix_memalign (&zeros, ZV_SECTOR, DEV_FILL_CHUNK) != 0) {
    r = -ENOMEM;
    goto out;
  }
  memset (zeros, 0, DEV_FILL_CHUNK);
  while (done < size) {
    size_t n = (size_t) ZV_MIN ((uint64_t) DEV_FILL_CHUNK, size - done);
    ssize_t w;

    /* A tail that is no whole number of sectors: buffered. */
    if (n % ZV_SECTOR != 0) {
      int fl = fcntl (fd, F_GETFL);
      if (fl == -1 || fcntl (fd, F_SETFL, fl & ~O_DIRECT) == -1) {
        r = -errno;
        break;
      }
    }
    w = pwrite (fd, zeros, n, (off_t) done);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0) {
      r = w < 0 ? -errno : -EIO;
      break;
    }
    done += (uint64_t) w;
    if (progress != NULL && (unsigned) (done * 100 / size) != last) {
      last = (unsigned) (done * 100 / size);
      progress (arg, "preallocate", done, size);
    }
  }
  if (r == 0 && fdatasync (fd) == -1)
    r = -errno;
 out:
  free (zeros);
  if (close (fd) == -1 && r == 0)
    r = -errno;
  return r;
}

/* Closing the fds drops the flocks and the O_EXCL claims (the backing
 * file's with the device's). */
void
zv_dev_close (zv_dev_t *dev)
{
  if (dev == NULL)
    return;
  if (dev->dev_rados != NULL)
    zv_dev_rados_close (dev->dev_rados);
  else if (dev->dev_mirror != NULL)
    zv_dev_mirror_close (dev->dev_mirror);
  else if (close (dev->dev_fd) == -1)
    zv_error ("%s: close: %s", dev->dev_path, strerror (errno));
  if (dev->dev_backing_fd >= 0)
    close (dev->dev_backing_fd);
  pthread_mutex_destroy (&dev->dev_fault_lock);
  free (dev->dev_path);
  free (dev);
}
