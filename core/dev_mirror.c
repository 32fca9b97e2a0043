/*
 * dev_mirror.c: a mirror, one device made of two or three devices (its
 * sides) that hold the same bytes ("mirror:A,B[,C]").
 *
 * Theory
 * ------
 * A mirror is a kind of device, as a RADOS device is: dev_open.c opens
 * it (zv_dev_open_opts sees the "mirror:" prefix and calls
 * zv_dev_mirror_open) and dev.c hands every batch that names one to
 * zv_dev_mirror_batch, so everything above the device layer sees one
 * device of one size (the smallest side's).  Its sides are ordinary
 * devices (files or block devices: a RADOS side or a mirror side is
 * refused), each opened and locked by dev_open.c and counted by dev.c
 * as any other, so each has its own counters, fault hook and observer;
 * the mirror's own zv_dev_t counts the requests made of the mirror, and
 * its fault hook and observer see them before they are split.
 *
 * Requests.  A batch is rewritten into a batch of side requests, issued
 * in one zv_dev_io_batch_queue call (so flush barriers keep their place:
 * the side requests are in the order of the requests they come from):
 *
 *   read   one side, round-robin over the sides in service; a side that
 *          fails is retried on the next side not yet tried, in a second
 *          (third) batch, and once a side has returned the bytes the
 *          sides that failed are rewritten from them (a side whose
 *          rewrite fails is faulted; not on a read-only import,
 *          do_no_repair, which writes nothing).  Only when every side in service
 *          failed does the read fail.
 *   write  every side in service, each with its own copy of the segment
 *   flush  array (a batch may rewrite a request's segments); a side whose
 *          write or flush fails is faulted, and the request succeeds when
 *          one side took it.
 *
 * Side states.  A side is ONLINE, or FAULTED: it could not be opened (a
 * side missing at import: the mirror is DEGRADED, service goes on), its
 * labels are missing or damaged (label.c), or a write or flush to it
 * failed.  A faulted side gets no more requests until the mirror is
 * closed: what it missed meanwhile is not recorded, so a side that comes
 * back at the next import is trusted block by block only through the
 * checksums of the pointers above (a stale block fails them and is
 * healed from the other side: zio.c), and its labels count as older
 * copies of the uberblock ring (label.c reads every side's ring).  The
 * mirror is never without a side: the open fails when none opens.
 *
 * A third state, RESILVERING, is a side a replace attached (resilver.c,
 * zv_dev_mirror_attach) or an import found with a resilver record: it
 * takes every write and flush, no read, and a write counts as done only
 * once a side in service has it; resilver.c puts it in service when its
 * copy ends.  The device a replace takes out stays open, retired, until
 * the mirror closes (a batch may still hold its pointer: the side table
 * is atomics, read without the lock).
 *
 * Self-heal of checksum errors is zio.c's (only it knows a block's
 * checksum): it reads each side in service through zv_dev_side() and
 * rewrites the ones that do not verify.
 *
 * Locking.  The side table (device and name pointers) is atomics,
 * replaced only by an attach under dm_lock; the faulted flags are
 * atomics, set once (a faulted side comes back only as a new device
 * through a replace), and the reason text is written under dm_lock
 * before the flag is raised (readers take the lock).  The round-robin cursor is a relaxed atomic.  No lock is
 * held across I/O.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "zv_util.h"
#include "tunable.h"
#include "dev_impl.h"

/*
 * Tunable: which side a read goes to first.  0: round-robin over the
 * sides in service (balanced); N: side N-1 while it is in service (a
 * side much faster than the others, or a test that wants every read to
 * meet one side).  A read that fails there still goes to the others.
 */
static unsigned zv_mirror_read_side = 0;

#define ZV_MIRROR_MAX_RETIRED 8

struct zv_dev_mirror {
  unsigned dm_nsides;
  /* A side's device (NULL: could not open) and name; a replace stores
   * new ones (zv_dev_mirror_attach), the old ones retired, not freed,
   * until close: a batch may still hold them. */
  _Atomic (zv_dev_t *) dm_sides[ZV_MIRROR_MAX_SIDES];
  _Atomic (char *) dm_paths[ZV_MIRROR_MAX_SIDES];
  atomic_bool dm_faulted[ZV_MIRROR_MAX_SIDES];
  /* Being resilvered: written, never read from (not "in service"). */
  atomic_bool dm_resilvering[ZV_MIRROR_MAX_SIDES];
  zv_dev_t *dm_retired[ZV_MIRROR_MAX_RETIRED];  /* under dm_lock */
  char *dm_retired_paths[ZV_MIRROR_MAX_RETIRED];
  unsigned dm_nretired;
  pthread_mutex_t dm_lock;                     /* dm_why, retirements */
  char dm_why[ZV_MIRROR_MAX_SIDES][160];
  _Atomic unsigned dm_next;                    /* read round-robin */
  bool dm_no_repair;                           /* read-only: no rewrite */
  const char *dm_name;                         /* the mirror's path */
};

/* ------------------------------------------------------------------ */
/* Names                                                                */
/* ------------------------------------------------------------------ */

bool
zv_dev_path_is_mirror (const char *path)
{
  return path != NULL && strncmp (path, ZV_MIRROR_PREFIX,
                                  strlen (ZV_MIRROR_PREFIX)) == 0;
}

/* Split "mirror:A,B[,C]" into its side paths (see dev.h). */
int
zv_dev_mirror_parse (const char *path, char **sides, unsigned *nsidesp,
                     char *err, size_t errlen)
{
  const char *p;
  unsigned n = 0;

  *nsidesp = 0;
  if (!zv_dev_path_is_mirror (path)) {
    snprintf (err, errlen, "%s: not a mirror (mirror:A,B[,C])", path);
    return -EINVAL;
  }
  p = path + strlen (ZV_MIRROR_PREFIX);
  for (;;) {
    size_t len = strcspn (p, ",");

    if (len == 0) {
      snprintf (err, errlen, "%s: empty side name (mirror:A,B[,C])", path);
      goto fail;
    }
    if (n == ZV_MIRROR_MAX_SIDES) {
      snprintf (err, errlen, "%s: more than %u sides", path,
                ZV_MIRROR_MAX_SIDES);
      goto fail;
    }
    sides[n] = zv_calloc (len + 1, 1);
    memcpy (sides[n], p, len);
    if (zv_dev_path_is_mirror (sides[n]) || zv_dev_path_is_rados (sides[n])) {
      snprintf (err, errlen, "%s: side %s: a side is a file or a block "
                "device (no mirror or RADOS device)", path, sides[n]);
      n++;
      goto fail;
    }
    for (unsigned j = 0; j < n; j++)
      if (strcmp (sides[j], sides[n]) == 0) {
        snprintf (err, errlen, "%s: side %s given twice", path, sides[n]);
        n++;
        goto fail;
      }
    n++;
    if (p[len] == '\0')
      break;
    p += len + 1;
  }
  if (n < 2) {
    snprintf (err, errlen, "%s: a mirror has two or three sides "
              "(mirror:A,B[,C])", path);
    goto fail;
  }
  *nsidesp = n;
  return 0;

 fail:
  for (unsigned j = 0; j < n; j++) {
    free (sides[j]);
    sides[j] = NULL;
  }
  return -EINVAL;
}

/* ------------------------------------------------------------------ */
/* Open and close                                                       */
/* ------------------------------------------------------------------ */

/* Take side i out of service, once, saying why. */
static void
mirror_fault (zv_dev_mirror_t *m, unsigned i, const char *why)
{
  bool first;

  pthread_mutex_lock (&m->dm_lock);
  first = !atomic_load (&m->dm_faulted[i]);
  if (first) {
    snprintf (m->dm_why[i], sizeof m->dm_why[i], "%s", why);
    atomic_store (&m->dm_faulted[i], true);
  }
  pthread_mutex_unlock (&m->dm_lock);
  if (first)
    zv_error ("%s: side %u (%s) FAULTED: %s; the mirror is DEGRADED "
              "(service goes on with the other side%s)", m->dm_name, i,
              atomic_load (&m->dm_paths[i]), why,
              m->dm_nsides > 2 ? "s" : "");
}

/*
 * Open the sides.  One that cannot be opened (missing, unreadable) is
 * faulted and the mirror opens degraded; one held by another process
 * (-EBUSY) fails the open, as a plain device would: the pool is in use.
 */
int
zv_dev_mirror_open (const char *path, const zv_dev_opts_t *opts,
                    zv_dev_mirror_t **mp, uint64_t *sizep, bool *directp,
                    char *err, size_t errlen)
{
  zv_dev_mirror_t *m = zv_calloc (1, sizeof *m);
  char serr[ZV_MIRROR_MAX_SIDES][512];
  unsigned nopen = 0;
  uint64_t size = UINT64_MAX;
  bool direct = true;
  int r, first_err = 0;

  {
    char *paths[ZV_MIRROR_MAX_SIDES] = { NULL };

    r = zv_dev_mirror_parse (path, paths, &m->dm_nsides, err, errlen);
    if (r < 0) {
      free (m);
      return r;
    }
    for (unsigned i = 0; i < m->dm_nsides; i++)
      atomic_store (&m->dm_paths[i], paths[i]);
  }
  pthread_mutex_init (&m->dm_lock, NULL);
  m->dm_name = path;
  m->dm_no_repair = opts != NULL && opts->do_no_repair;
  for (unsigned i = 0; i < m->dm_nsides; i++) {
    zv_dev_t *sd = NULL;

    r = zv_dev_open_opts (atomic_load (&m->dm_paths[i]), opts, &sd, serr[i],
                          sizeof serr[i]);
    atomic_store (&m->dm_sides[i], sd);
    if (r == -EBUSY) {
      snprintf (err, errlen, "%s: side %u: %s", path, i, serr[i]);
      goto fail;
    }
    if (r < 0) {
      if (first_err == 0)
        first_err = r;
      continue;
    }
    nopen++;
    size = ZV_MIN (size, zv_dev_size (sd));
    direct = direct && zv_dev_is_direct (sd);
  }
  if (nopen == 0) {
    snprintf (err, errlen, "%s: no side can be opened (side 0: %s)", path,
              serr[0]);
    r = first_err;
    goto fail;
  }
  for (unsigned i = 0; i < m->dm_nsides; i++)
    if (atomic_load (&m->dm_sides[i]) == NULL) {
      char why[sizeof m->dm_why[i]];
      snprintf (why, sizeof why, "cannot be opened (%s)", serr[i]);
      mirror_fault (m, i, why);
    }
  *mp = m;
  *sizep = size;
  *directp = direct;
  return 0;

 fail:
  for (unsigned i = 0; i < m->dm_nsides; i++) {
    zv_dev_close (atomic_load (&m->dm_sides[i]));
    free (atomic_load (&m->dm_paths[i]));
  }
  pthread_mutex_destroy (&m->dm_lock);
  free (m);
  return r;
}

/* The mirror's zv_dev_t holds the name the messages use. */
void
zv_dev_mirror_set_name (zv_dev_mirror_t *m, const char *name)
{
  m->dm_name = name;
}

void
zv_dev_mirror_close (zv_dev_mirror_t *m)
{
  if (m == NULL)
    return;
  for (unsigned i = 0; i < m->dm_nsides; i++) {
    zv_dev_close (atomic_load (&m->dm_sides[i]));
    free (atomic_load (&m->dm_paths[i]));
  }
  for (unsigned i = 0; i < m->dm_nretired; i++) {
    zv_dev_close (m->dm_retired[i]);
    free (m->dm_retired_paths[i]);
  }
  pthread_mutex_destroy (&m->dm_lock);
  free (m);
}

unsigned
zv_dev_mirror_nsides (const zv_dev_mirror_t *m)
{
  return m->dm_nsides;
}

zv_dev_t *
zv_dev_mirror_side (const zv_dev_mirror_t *m, unsigned i)
{
  ZV_VERIFY3U (i, <, m->dm_nsides);
  return atomic_load_explicit (&((zv_dev_mirror_t *) m)->dm_sides[i],
                               memory_order_acquire);
}

const char *
zv_dev_mirror_side_path (const zv_dev_mirror_t *m, unsigned i)
{
  ZV_VERIFY3U (i, <, m->dm_nsides);
  return atomic_load_explicit (&((zv_dev_mirror_t *) m)->dm_paths[i],
                               memory_order_acquire);
}

bool
zv_dev_mirror_side_ok (const zv_dev_mirror_t *m, unsigned i)
{
  zv_dev_mirror_t *mm = (zv_dev_mirror_t *) m;  /* atomics want non-const */

  ZV_VERIFY3U (i, <, m->dm_nsides);
  return zv_dev_mirror_side (m, i) != NULL
    && !atomic_load (&mm->dm_faulted[i])
    && !atomic_load (&mm->dm_resilvering[i]);
}

/* Does side i take writes (in service, or being resilvered)? */
static bool
mirror_side_writable (const zv_dev_mirror_t *m, unsigned i)
{
  zv_dev_mirror_t *mm = (zv_dev_mirror_t *) m;

  return zv_dev_mirror_side (m, i) != NULL
    && !atomic_load (&mm->dm_faulted[i]);
}

bool
zv_dev_mirror_side_resilvering (const zv_dev_mirror_t *m, unsigned i)
{
  ZV_VERIFY3U (i, <, m->dm_nsides);
  return zv_dev_mirror_side (m, i) != NULL
    && !atomic_load (&((zv_dev_mirror_t *) m)->dm_faulted[i])
    && atomic_load (&((zv_dev_mirror_t *) m)->dm_resilvering[i]);
}

/* Put 'side' (open, labelled by the caller) in slot i, being resilvered:
 * it takes every write from now on and no read.  The device that was
 * there is retired (closed with the mirror: a batch may hold it). */
int
zv_dev_mirror_attach (zv_dev_mirror_t *m, unsigned i, zv_dev_t *side,
                      const char *path, char *err, size_t errlen)
{
  zv_dev_t *old;
  char *oldpath;

  ZV_VERIFY3U (i, <, m->dm_nsides);
  pthread_mutex_lock (&m->dm_lock);
  if (m->dm_nretired == ZV_MIRROR_MAX_RETIRED) {
    pthread_mutex_unlock (&m->dm_lock);
    snprintf (err, errlen, "%s: too many sides replaced since the pool "
              "was imported (export and import it first)", m->dm_name);
    return -EBUSY;
  }
  atomic_store (&m->dm_resilvering[i], true);
  old = atomic_exchange (&m->dm_sides[i], side);
  oldpath = atomic_exchange (&m->dm_paths[i], zv_strdup (path));
  m->dm_retired[m->dm_nretired] = old;
  m->dm_retired_paths[m->dm_nretired++] = oldpath;
  m->dm_why[i][0] = '\0';
  atomic_store (&m->dm_faulted[i], false);
  pthread_mutex_unlock (&m->dm_lock);
  return 0;
}

/* Side i, present, is being resilvered (an import that resumes one). */
void
zv_dev_mirror_set_resilvering (zv_dev_mirror_t *m, unsigned i, bool on)
{
  ZV_VERIFY3U (i, <, m->dm_nsides);
  atomic_store (&m->dm_resilvering[i], on);
}

void
zv_dev_mirror_fault_side (zv_dev_mirror_t *m, unsigned i, const char *why)
{
  ZV_VERIFY3U (i, <, m->dm_nsides);
  mirror_fault (m, i, why);
}

/* Why side i is faulted ("" when it is not). */
void
zv_dev_mirror_side_why (zv_dev_mirror_t *m, unsigned i, char *buf,
                        size_t len)
{
  ZV_VERIFY3U (i, <, m->dm_nsides);
  pthread_mutex_lock (&m->dm_lock);
  snprintf (buf, len, "%s", atomic_load (&m->dm_faulted[i])
            ? m->dm_why[i] : "");
  pthread_mutex_unlock (&m->dm_lock);
}

bool
zv_dev_mirror_may_repair (const zv_dev_mirror_t *m)
{
  return !m->dm_no_repair;
}

unsigned
zv_dev_mirror_nok (const zv_dev_mirror_t *m)
{
  unsigned n = 0;

  for (unsigned i = 0; i < m->dm_nsides; i++)
    n += zv_dev_mirror_side_ok (m, i);
  return n;
}

/* ------------------------------------------------------------------ */
/* Batches                                                              */
/* ------------------------------------------------------------------ */

/* One side request and where it came from. */
typedef struct mirror_sub {
  size_t ms_parent;             /* index in the caller's batch */
  unsigned ms_side;             /* side of a mirror (UINT_MAX: not one) */
} mirror_sub_t;

/* The next side in service after 'from' that 'tried' (bit mask) lacks;
 * UINT_MAX when none. */
static unsigned
mirror_pick (const zv_dev_mirror_t *m, unsigned from, unsigned tried)
{
  for (unsigned k = 0; k < m->dm_nsides; k++) {
    unsigned i = (from + k) % m->dm_nsides;
    if (!(tried & (1u << i)) && zv_dev_mirror_side_ok (m, i))
      return i;
  }
  return UINT_MAX;
}

/* A side request like 'io' to side dev, with its own segment array. */
static void
mirror_sub_io (zv_dev_io_t *sub, const zv_dev_io_t *io, zv_dev_t *dev)
{
  *sub = (zv_dev_io_t) {
    .di_dev = dev, .di_op = io->di_op, .di_buf = io->di_buf,
    .di_offset = io->di_offset, .di_len = io->di_len,
  };
  if (io->di_iov != NULL && io->di_op != ZV_DEV_FLUSH) {
    sub->di_iov = zv_calloc (io->di_iovcnt, sizeof *sub->di_iov);
    memcpy (sub->di_iov, io->di_iov, io->di_iovcnt * sizeof *sub->di_iov);
    sub->di_iovcnt = io->di_iovcnt;
  }
}

/* Finish a request of a mirror with 'res' (0 or -errno): its counters,
 * its message, its observer. */
static void
mirror_finish (zv_dev_io_t *io, int res)
{
  uint32_t done = 0;

  if (res == -EAGAIN || res == -EINTR)
    res = -EIO;
  ZV_VERIFY (!zv_dev_io_progress (io, &done, res < 0 ? res
                                  : io->di_op == ZV_DEV_FLUSH ? 0
                                  : (int) io->di_len));
  zv_dev_io_observe_done (io);
}

/* Rewrite the sides of a read that failed on them with the bytes another
 * side returned (a side whose rewrite fails is faulted). */
static void
mirror_repair_reads (zv_dev_io_t *ios, size_t n, const unsigned *failed,
                     const int *res)
{
  zv_dev_io_t *w = NULL;
  mirror_sub_t *wm = NULL;
  size_t nw = 0, cap = 0;

  for (size_t i = 0; i < n; i++) {
    zv_dev_mirror_t *m;

    if (failed[i] == 0 || res[i] < 0)
      continue;
    m = zv_dev_mirror_of (ios[i].di_dev);
    if (m->dm_no_repair)
      continue;
    for (unsigned s = 0; s < m->dm_nsides; s++) {
      if (!(failed[i] & (1u << s)) || !zv_dev_mirror_side_ok (m, s))
        continue;
      if (nw == cap) {
        cap = cap ? 2 * cap : 8;
        w = zv_realloc (w, cap * sizeof *w);
        wm = zv_realloc (wm, cap * sizeof *wm);
      }
      mirror_sub_io (&w[nw], &ios[i], zv_dev_mirror_side (m, s));
      w[nw].di_op = ZV_DEV_WRITE;
      wm[nw] = (mirror_sub_t) { .ms_parent = i, .ms_side = s };
      nw++;
    }
  }
  if (nw == 0)
    return;
  (void) zv_dev_io_batch (w, nw);
  for (size_t k = 0; k < nw; k++) {
    zv_dev_mirror_t *m = zv_dev_mirror_of (ios[wm[k].ms_parent].di_dev);

    if (w[k].di_result < 0)
      mirror_fault (m, wm[k].ms_side, "rewriting a block it failed to "
                    "read failed");
    else
      zv_warn ("%s: side %u (%s): rewrote %" PRIu32 " bytes at %" PRIu64
               " it failed to read, from another side", m->dm_name,
               wm[k].ms_side, zv_dev_mirror_side_path (m, wm[k].ms_side),
               w[k].di_len,
               w[k].di_offset);
    free (w[k].di_iov);
  }
  free (w);
  free (wm);
}

/*
 * Run a batch some of whose requests are to mirrors (see the theory
 * comment); the others go through as they are, in the same side batch.
 */
void
zv_dev_mirror_batch (zv_dev_io_t *ios, size_t n, const zv_dev_queue_t *q)
{
  size_t cap = 0, m = 0;
  zv_dev_io_t *sub;
  mirror_sub_t *map;
  unsigned *tried = zv_calloc (n, sizeof *tried);
  unsigned *failed = zv_calloc (n, sizeof *failed);
  int *res = zv_calloc (n, sizeof *res);
  bool *active = zv_calloc (n, sizeof *active);

  for (size_t i = 0; i < n; i++) {
    zv_dev_mirror_t *mm = zv_dev_mirror_of (ios[i].di_dev);
    cap += mm == NULL || ios[i].di_op == ZV_DEV_READ ? 1 : mm->dm_nsides;
  }
  sub = zv_calloc (cap, sizeof *sub);
  map = zv_calloc (cap, sizeof *map);

  /* First round: every request. */
  for (size_t i = 0; i < n; i++) {
    zv_dev_io_t *io = &ios[i];
    zv_dev_mirror_t *mm = zv_dev_mirror_of (io->di_dev);

    if (mm == NULL) {
      sub[m] = *io;
      map[m++] = (mirror_sub_t) { .ms_parent = i, .ms_side = UINT_MAX };
      continue;
    }
    if (!zv_dev_io_start (io))
      continue;                 /* refused or faulted: di_result is set */
    active[i] = true;
    res[i] = -EIO;
    if (io->di_op == ZV_DEV_READ) {
      unsigned pref = __atomic_load_n (&zv_mirror_read_side,
                                       __ATOMIC_RELAXED);   /* live */
      unsigned s = mirror_pick (mm, pref != 0 ? pref - 1
                                : atomic_fetch_add_explicit
                                (&mm->dm_next, 1, memory_order_relaxed)
                                % mm->dm_nsides, 0);
      if (s == UINT_MAX)
        continue;
      tried[i] |= 1u << s;
      mirror_sub_io (&sub[m], io, zv_dev_mirror_side (mm, s));
      map[m++] = (mirror_sub_t) { .ms_parent = i, .ms_side = s };
      continue;
    }
    for (unsigned s = 0; s < mm->dm_nsides; s++) {
      if (!mirror_side_writable (mm, s))
        continue;
      mirror_sub_io (&sub[m], io, zv_dev_mirror_side (mm, s));
      map[m++] = (mirror_sub_t) { .ms_parent = i, .ms_side = s };
    }
  }

  while (m > 0) {
    size_t nretry = 0;

    (void) zv_dev_io_batch_queue (sub, m, q);
    for (size_t k = 0; k < m; k++) {
      size_t i = map[k].ms_parent;
      unsigned s = map[k].ms_side;
      zv_dev_mirror_t *mm;

      if (s == UINT_MAX) {
        ios[i] = sub[k];        /* a plain device's request: as it ran */
        continue;
      }
      mm = zv_dev_mirror_of (ios[i].di_dev);
      free (sub[k].di_iov);
      sub[k].di_iov = NULL;
      if (sub[k].di_result == 0) {
        /* A write counts once a side in service has it: a side being
         * resilvered alone would hold it where no read looks. */
        if (ios[i].di_op == ZV_DEV_READ
            || !zv_dev_mirror_side_resilvering (mm, s))
          res[i] = 0;
        continue;
      }
      if (ios[i].di_op == ZV_DEV_READ)
        failed[i] |= 1u << s;
      else {
        char why[96];
        snprintf (why, sizeof why, "%s failed (%s)",
                  ios[i].di_op == ZV_DEV_WRITE ? "a write" : "a flush",
                  strerror (-sub[k].di_result));
        mirror_fault (mm, s, why);
      }
    }
    /* Reads that no side answered yet go to a side not yet tried. */
    for (size_t i = 0; i < n; i++) {
      zv_dev_mirror_t *mm = zv_dev_mirror_of (ios[i].di_dev);
      unsigned s;

      if (!active[i] || ios[i].di_op != ZV_DEV_READ || res[i] == 0
          || (tried[i] & failed[i]) != tried[i] || mm == NULL)
        continue;
      s = mirror_pick (mm, 0, tried[i]);
      if (s == UINT_MAX)
        continue;
      tried[i] |= 1u << s;
      mirror_sub_io (&sub[nretry], &ios[i], zv_dev_mirror_side (mm, s));
      map[nretry++] = (mirror_sub_t) { .ms_parent = i, .ms_side = s };
    }
    m = nretry;
  }
  mirror_repair_reads (ios, n, failed, res);

  for (size_t i = 0; i < n; i++) {
    if (!active[i])
      continue;
    if (res[i] < 0) {
      zv_dev_mirror_t *mm = zv_dev_mirror_of (ios[i].di_dev);
      if (zv_dev_mirror_nok (mm) == 0)
        zv_error ("%s: no side in service", mm->dm_name);
    }
    mirror_finish (&ios[i], res[i]);
  }
  free (map);
  free (sub);
  free (active);
  free (res);
  free (failed);
  free (tried);
}

/* ---- tunables (tunable.h) ---- */
const zv_tunable_t zv_dev_mirror_tunable_table[] = {
  { .tn_name = "mirror_read_side", .tn_module = "dev_mirror",
    ZV_TUNABLE_VAR_UINT (zv_mirror_read_side),
    .tn_default = 0, .tn_min = 0, .tn_max = ZV_MIRROR_MAX_SIDES,
    .tn_unit = ZV_TUNABLE_UNIT_COUNT, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the mirror, at every read",
    .tn_desc = "Which side of a mirror a read goes to first: 0 balances "
    "reads round-robin over the sides in service, N sends them to side "
    "N-1 while it is in service (a read that fails there goes to the "
    "others)." },
  ZV_TUNABLE_END
};
