/*
 * powercut.c: a volatile-write-cache simulator for tests (see powercut.h).
 *
 * Theory
 * ------
 * The simulator sees every request of a watched device twice through the
 * device layer's observer: when it is submitted (before the kernel sees
 * it) and when it has completed.  Per device it keeps:
 *
 *   - the pending writes: each with a copy of its data, and, once it has
 *     completed, its completion number (pd_ncomp counts completions);
 *   - per 4 KiB sector touched by a pending write (pd_sect[]): its
 *     durable content (read from the file when the first pending write to
 *     it is submitted, before that write reaches the file) and the list
 *     of pending writes over it.
 *
 * A flush takes, when submitted, the device's completion count (the
 * cutoff); when it completes without error, every pending write whose
 * completion number is at most the cutoff becomes durable: it leaves the
 * lists of its sectors and becomes their durable content (unless a
 * later-completed durable write already is).  A sector with no pending
 * write left is forgotten: the file holds its durable content.  The
 * submitting thread also completes the request, so a flush's cutoff
 * travels from its submit to its completion in a small thread-local list.
 * A write that completed in the kernel but whose completion was not seen
 * before the flush was submitted is not made durable by that flush: the
 * engine could not have known it completed.
 *
 * The cut.  pc_fault(), the fault hook of every watched device, asks the
 * test's own fault hook first (pc_set_fault: a request it fails is never
 * issued, so the simulator has nothing to account for), then counts the request in pc_busy and only then looks at pc_cut: so either
 * the request sees the cut and fails (and uncounts itself), or the
 * settling thread sees it in pc_busy and waits for its completion.  The
 * observer's completion event uncounts it.  Once the cut flag is set and
 * pc_busy is zero no request can reach a file any more, and settling
 * rewrites every sector with pending writes, under the lock, with the
 * content the mode picks.  A device's first request can slip past before
 * its fault hook is installed (the hook is installed at the device's
 * first observer event): the observer counts such a request itself
 * (pc_tls_admitted says whether pc_fault already did).
 *
 * Locking: pc_lock protects every device's state and the statistics;
 * the observer runs under it (reading old content from the file too),
 * and calls the test's hook (pc_set_hook) after letting go of it.
 * pc_cut, pc_busy and pc_trigger are atomics, so pc_fault takes no lock.
 * The simulator opens each file a second time (buffered) for its own
 * reads and its restoring writes; it never touches a zv_dev_t after the
 * device's own I/O, so the devices may be closed before pc_free().
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/syscall.h>

#include "zv_util.h"
#include "powercut.h"

#define PC_SECT ZV_SECTOR
#define PC_MAX_DEVS 32
#define PC_TLS_FLUSHES 64

/* One write the device has not made durable yet. */
typedef struct pc_write {
  uint64_t pw_off;
  uint32_t pw_len;
  uint8_t *pw_data;             /* copy of what it writes */
  const void *pw_src;           /* the caller's buffer (identifies it) */
  uint64_t pw_comp;             /* completion number; 0: not completed */
  bool pw_failed;               /* completed with an error */
  struct pc_write *pw_next;     /* the device's pending list */
} pc_write_t;

/* A sector with pending writes. */
typedef struct pc_sector {
  uint8_t ps_old[PC_SECT];      /* durable content */
  uint64_t ps_old_comp;         /* completion number of the write it is */
  pc_write_t **ps_pend;         /* pending writes over it, in submit order */
  unsigned ps_npend, ps_cap;
} pc_sector_t;

typedef struct pc_dev {
  zv_dev_t *pd_dev;             /* key only */
  char *pd_path;
  int pd_fd;
  uint64_t pd_nsect;
  pc_sector_t **pd_sect;
  pc_write_t *pd_pending;
  uint64_t pd_ncomp;
} pc_dev_t;

struct pc {
  pthread_mutex_t pc_lock;
  enum pc_mode pc_mode;
  uint64_t pc_rand;
  pc_dev_t pc_devs[PC_MAX_DEVS];
  unsigned pc_ndevs;
  pc_stats_t pc_stats;
  bool pc_settled;
  atomic_bool pc_cut;
  atomic_long pc_busy;          /* admitted requests not yet completed */
  atomic_long pc_trigger;       /* writes left before the cut; 0: off */
  atomic_ulong pc_failed;
  FILE *pc_trace;               /* event log, or NULL */
  pc_hook_fn pc_hook;           /* the test's own look at each event */
  void *pc_hook_arg;
  zv_dev_fault_fn pc_user_fault; /* the test's own fault hook, or NULL */
  void *pc_user_fault_arg;
};

/* Trace one event (lock held), when a trace file is set. */
static void __attribute__ ((format (printf, 2, 3)))
pc_tracef (pc_t *pc, const char *fmt, ...)
{
  va_list ap;

  if (pc->pc_trace == NULL)
    return;
  va_start (ap, fmt);
  vfprintf (pc->pc_trace, fmt, ap);
  va_end (ap);
}

/* Flushes this thread submitted, with their cutoffs. */
static __thread struct {
  pc_dev_t *tf_dev;
  uint64_t tf_cutoff;
} pc_tls_flush[PC_TLS_FLUSHES];
static __thread unsigned pc_tls_nflush;
/* pc_fault admitted (and counted) the request about to be observed. */
static __thread bool pc_tls_admitted;

/* xorshift64*, for the choices at the cut. */
static uint64_t
pc_rand (pc_t *pc)
{
  uint64_t x = pc->pc_rand;

  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  pc->pc_rand = x;
  return x * 0x2545f4914f6cdd1dull;
}

pc_t *
pc_new (uint64_t seed, enum pc_mode mode)
{
  pc_t *pc = calloc (1, sizeof *pc);

  if (pc == NULL)
    abort ();
  pthread_mutex_init (&pc->pc_lock, NULL);
  pc->pc_mode = mode;
  pc->pc_rand = seed ? seed : 1;
  return pc;
}

/* Drop a device's state (the lock held, or nobody else left). */
static void
pc_dev_fini (pc_dev_t *d)
{
  for (uint64_t s = 0; s < d->pd_nsect; s++)
    if (d->pd_sect[s]) {
      free (d->pd_sect[s]->ps_pend);
      free (d->pd_sect[s]);
    }
  while (d->pd_pending) {
    pc_write_t *w = d->pd_pending;
    d->pd_pending = w->pw_next;
    free (w->pw_data);
    free (w);
  }
  free (d->pd_sect);
  if (d->pd_fd >= 0)
    close (d->pd_fd);
  free (d->pd_path);
}

void
pc_free (pc_t *pc)
{
  if (pc == NULL)
    return;
  pc_settle (pc);                       /* a cut pc_cut() left */
  ZV_VERIFY (atomic_load (&pc->pc_busy) == 0);
  for (unsigned i = 0; i < pc->pc_ndevs; i++)
    pc_dev_fini (&pc->pc_devs[i]);
  pthread_mutex_destroy (&pc->pc_lock);
  free (pc);
}

/* The fault hook of every watched device: count, then check the cut. */
static int
pc_fault (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
          uint32_t len)
{
  pc_t *pc = arg;

  if (pc->pc_user_fault != NULL) {
    int r = pc->pc_user_fault (pc->pc_user_fault_arg, dev, op, off, len);
    if (r < 0)
      return r;
  }
  if (op == ZV_DEV_WRITE && atomic_load (&pc->pc_trigger) > 0
      && atomic_fetch_sub (&pc->pc_trigger, 1) == 1)
    atomic_store (&pc->pc_cut, true);
  if (op == ZV_DEV_READ || (op == ZV_DEV_WRITE && len == 0)) {
    if (!atomic_load (&pc->pc_cut))
      return 0;
    atomic_fetch_add (&pc->pc_failed, 1);
    return -EIO;
  }
  atomic_fetch_add (&pc->pc_busy, 1);
  if (atomic_load (&pc->pc_cut)) {
    atomic_fetch_sub (&pc->pc_busy, 1);
    atomic_fetch_add (&pc->pc_failed, 1);
    return -EIO;
  }
  pc_tls_admitted = true;
  return 0;
}

/* The state of a device, made at its first event (lock held). */
static pc_dev_t *
pc_dev_find (pc_t *pc, zv_dev_t *dev)
{
  pc_dev_t *d;

  for (unsigned i = 0; i < pc->pc_ndevs; i++)
    if (pc->pc_devs[i].pd_dev == dev)
      return &pc->pc_devs[i];
  ZV_VERIFY3U (pc->pc_ndevs, <, PC_MAX_DEVS);
  d = &pc->pc_devs[pc->pc_ndevs++];
  memset (d, 0, sizeof *d);
  d->pd_dev = dev;
  d->pd_path = strdup (zv_dev_path (dev));
  d->pd_fd = open (zv_dev_path (dev), O_RDWR | O_CLOEXEC);
  ZV_VERIFY (d->pd_path != NULL && d->pd_fd >= 0);
  d->pd_nsect = zv_dev_size (dev) / PC_SECT;
  d->pd_sect = calloc (d->pd_nsect ? d->pd_nsect : 1, sizeof *d->pd_sect);
  ZV_VERIFY (d->pd_sect != NULL);
  pc->pc_stats.ps_devices++;
  zv_dev_set_fault (dev, pc_fault, pc);
  return d;
}

/* A write is about to reach the file: keep its data and, for sectors
 * without pending writes, their content now. */
static void
pc_write_submit (pc_t *pc, pc_dev_t *d, uint64_t off, uint32_t len,
                 const void *buf)
{
  uint64_t s0 = off / PC_SECT, n = len / PC_SECT;
  pc_write_t *w = calloc (1, sizeof *w);
  uint8_t *old = NULL;

  ZV_VERIFY (w != NULL && off % PC_SECT == 0 && len % PC_SECT == 0);
  ZV_VERIFY3U (s0 + n, <=, d->pd_nsect);
  w->pw_off = off;
  w->pw_len = len;
  w->pw_src = buf;
  w->pw_data = malloc (len);
  ZV_VERIFY (w->pw_data != NULL);
  memcpy (w->pw_data, buf, len);
  w->pw_next = d->pd_pending;
  d->pd_pending = w;
  pc->pc_stats.ps_writes++;

  for (uint64_t i = 0; i < n; i++) {
    pc_sector_t *s = d->pd_sect[s0 + i];

    if (s == NULL) {
      if (old == NULL) {
        old = malloc (len);
        ZV_VERIFY (old != NULL);
        ZV_VERIFY (pread (d->pd_fd, old, len, (off_t) off) == (ssize_t) len);
      }
      s = calloc (1, sizeof *s);
      ZV_VERIFY (s != NULL);
      memcpy (s->ps_old, old + i * PC_SECT, PC_SECT);
      d->pd_sect[s0 + i] = s;
    }
    else if (s->ps_npend > 0 && s->ps_pend[s->ps_npend - 1]->pw_comp == 0
             && !s->ps_pend[s->ps_npend - 1]->pw_failed)
      pc->pc_stats.ps_overlaps++;
    if (s->ps_npend == s->ps_cap) {
      s->ps_cap = s->ps_cap ? s->ps_cap * 2 : 4;
      s->ps_pend = realloc (s->ps_pend, s->ps_cap * sizeof *s->ps_pend);
      ZV_VERIFY (s->ps_pend != NULL);
    }
    s->ps_pend[s->ps_npend++] = w;
  }
  free (old);
}

/* Find the pending write that this completion is about: the oldest
 * uncompleted one of that range and buffer (lock held). */
static void
pc_write_done (pc_t *pc, pc_dev_t *d, uint64_t off, uint32_t len,
               const void *buf, int result)
{
  pc_write_t *found = NULL;

  for (pc_write_t *w = d->pd_pending; w; w = w->pw_next)
    if (w->pw_off == off && w->pw_len == len && w->pw_src == buf
        && w->pw_comp == 0 && !w->pw_failed)
      found = w;                    /* the list is newest first */
  ZV_VERIFY (found != NULL);
  if (result < 0)
    found->pw_failed = true;        /* may have landed, never durable */
  else
    found->pw_comp = ++d->pd_ncomp;
}

/* A write became durable: it is its sectors' durable content now. */
static void
pc_write_durable (pc_dev_t *d, pc_write_t *w)
{
  uint64_t s0 = w->pw_off / PC_SECT, n = w->pw_len / PC_SECT;

  for (uint64_t i = 0; i < n; i++) {
    pc_sector_t *s = d->pd_sect[s0 + i];
    unsigned j = 0;

    ZV_VERIFY (s != NULL);
    while (j < s->ps_npend && s->ps_pend[j] != w)
      j++;
    ZV_VERIFY3U (j, <, s->ps_npend);
    memmove (&s->ps_pend[j], &s->ps_pend[j + 1],
             (s->ps_npend - j - 1) * sizeof *s->ps_pend);
    s->ps_npend--;
    if (w->pw_comp > s->ps_old_comp) {
      memcpy (s->ps_old, w->pw_data + i * PC_SECT, PC_SECT);
      s->ps_old_comp = w->pw_comp;
    }
    if (s->ps_npend == 0) {
      free (s->ps_pend);
      free (s);
      d->pd_sect[s0 + i] = NULL;
    }
  }
}

/* A flush completed: everything completed before its cutoff is durable. */
static void
pc_flush_done (pc_t *pc, pc_dev_t *d, uint64_t cutoff)
{
  pc_write_t **pp = &d->pd_pending;

  pc->pc_stats.ps_flushes++;
  while (*pp) {
    pc_write_t *w = *pp;
    if (w->pw_comp != 0 && w->pw_comp <= cutoff) {
      *pp = w->pw_next;
      pc_write_durable (d, w);
      free (w->pw_data);
      free (w);
      pc->pc_stats.ps_durable++;
    }
    else
      pp = &w->pw_next;
  }
}

/* The observer of every watched device. */
static void
pc_observe (void *arg, zv_dev_t *dev, enum zv_dev_op op, int done,
            uint64_t off, uint32_t len, const void *buf, int result)
{
  pc_t *pc = arg;
  pc_dev_t *d;
  pc_hook_fn hook;
  void *hook_arg;

  if (op == ZV_DEV_READ) {
    if (!done && pc_tls_admitted)
      pc_tls_admitted = false;     /* (reads are not counted) */
    return;
  }
  if (!done) {
    if (pc_tls_admitted)
      pc_tls_admitted = false;
    else
      atomic_fetch_add (&pc->pc_busy, 1);   /* before the hook was in */
  }
  pthread_mutex_lock (&pc->pc_lock);
  d = pc_dev_find (pc, dev);
  pc_tracef (pc, "%s %s dev %u tid %ld off %" PRIu64 " len %" PRIu32
             " word %016" PRIx64 " result %d ncomp %" PRIu64 "\n",
             op == ZV_DEV_WRITE ? "write" : "flush",
             done ? "done" : "submit", (unsigned) (d - pc->pc_devs),
             (long) syscall (SYS_gettid), off, len,
             buf && len >= 8 ? *(const uint64_t *) buf : 0, result,
             d->pd_ncomp);
  if (op == ZV_DEV_WRITE) {
    if (!done)
      pc_write_submit (pc, d, off, len, buf);
    else
      pc_write_done (pc, d, off, len, buf, result);
  }
  else if (!done) {
    ZV_VERIFY3U (pc_tls_nflush, <, PC_TLS_FLUSHES);
    pc_tls_flush[pc_tls_nflush].tf_dev = d;
    pc_tls_flush[pc_tls_nflush].tf_cutoff = d->pd_ncomp;
    pc_tls_nflush++;
  }
  else {
    unsigned i = 0;
    uint64_t cutoff;

    while (i < pc_tls_nflush && pc_tls_flush[i].tf_dev != d)
      i++;
    ZV_VERIFY3U (i, <, pc_tls_nflush);
    cutoff = pc_tls_flush[i].tf_cutoff;
    memmove (&pc_tls_flush[i], &pc_tls_flush[i + 1],
             (pc_tls_nflush - i - 1) * sizeof pc_tls_flush[0]);
    pc_tls_nflush--;
    if (result == 0)
      pc_flush_done (pc, d, cutoff);
  }
  hook = pc->pc_hook;
  hook_arg = pc->pc_hook_arg;
  pthread_mutex_unlock (&pc->pc_lock);
  if (hook)
    hook (hook_arg, op, done, off, len);
  if (done)
    atomic_fetch_sub (&pc->pc_busy, 1);
}

void
pc_watch (pc_t *pc, bool on)
{
  zv_dev_set_observer (NULL, on ? pc_observe : NULL, on ? pc : NULL);
}

void
pc_attach (pc_t *pc, zv_dev_t *dev)
{
  pthread_mutex_lock (&pc->pc_lock);
  (void) pc_dev_find (pc, dev);
  pthread_mutex_unlock (&pc->pc_lock);
  zv_dev_set_observer (dev, pc_observe, pc);
}

bool
pc_is_cut (pc_t *pc)
{
  return atomic_load (&pc->pc_cut);
}

void
pc_cut_after_writes (pc_t *pc, uint64_t n)
{
  ZV_VERIFY (n >= 1);
  atomic_store (&pc->pc_trigger, (long) n);
}

/* Rewrite one device's sectors with pending writes (lock held). */
static void
pc_dev_apply (pc_t *pc, pc_dev_t *d)
{
  pc_stats_t *st = &pc->pc_stats;

  for (uint64_t i = 0; i < d->pd_nsect; i++) {
    pc_sector_t *s = d->pd_sect[i];
    const uint8_t *what;
    unsigned k;

    if (s == NULL)
      continue;
    ZV_VERIFY (s->ps_npend > 0);
    st->ps_cut_sectors++;
    switch (pc->pc_mode) {
    case PC_KEEP_ALL:
      continue;
    case PC_LOSE_ALL:
      k = 0;
      break;
    default:
      k = (unsigned) (pc_rand (pc) % (s->ps_npend + 1));
      break;
    }
    pc_tracef (pc, "cut dev %u sector %" PRIu64 " (off %" PRIu64 "): choice "
               "%u of %u\n", (unsigned) (d - pc->pc_devs), i, i * PC_SECT,
               k, s->ps_npend);
    if (k == 0) {
      what = s->ps_old;
      st->ps_cut_old++;
    }
    else {
      pc_write_t *w = s->ps_pend[k - 1];
      what = w->pw_data + (i * PC_SECT - w->pw_off);
      if (k == s->ps_npend)
        st->ps_cut_newest++;
      else
        st->ps_cut_other++;
    }
    ZV_VERIFY (pwrite (d->pd_fd, what, PC_SECT, (off_t) (i * PC_SECT))
               == (ssize_t) PC_SECT);
  }
  ZV_VERIFY (fsync (d->pd_fd) == 0);
}

void
pc_settle (pc_t *pc)
{
  if (!atomic_load (&pc->pc_cut))
    return;
  /* Every request admitted before the cut must land first. */
  while (atomic_load (&pc->pc_busy) > 0)
    usleep (100);
  pthread_mutex_lock (&pc->pc_lock);
  if (!pc->pc_settled) {
    for (unsigned i = 0; i < pc->pc_ndevs; i++)
      pc_dev_apply (pc, &pc->pc_devs[i]);
    pc->pc_settled = true;
  }
  pthread_mutex_unlock (&pc->pc_lock);
}

void
pc_cut (pc_t *pc)
{
  atomic_store (&pc->pc_cut, true);
  /* A write the engine started ahead (the intent log's block written by
   * a write, dev.h zv_dev_async_*) completes only when a later commit or
   * the pool's close finishes it; when no commit comes (every worker
   * stopped at its first error), only the close does.  So wait a while,
   * then leave the cut to pc_settle(), pc_get_stats() or pc_free(), which
   * run after the close.  Nothing new reaches a file meanwhile: every
   * request fails at pc_fault(). */
  for (unsigned i = 0; i < PC_CUT_WAIT_MS * 10
         && atomic_load (&pc->pc_busy) > 0; i++)
    usleep (100);
  if (atomic_load (&pc->pc_busy) == 0)
    pc_settle (pc);
  else {
    pthread_mutex_lock (&pc->pc_lock);
    pc->pc_stats.ps_cut_late++;
    pthread_mutex_unlock (&pc->pc_lock);
  }
}

void
pc_set_trace (pc_t *pc, FILE *fp)
{
  pthread_mutex_lock (&pc->pc_lock);
  pc->pc_trace = fp;
  pthread_mutex_unlock (&pc->pc_lock);
}

void
pc_set_hook (pc_t *pc, pc_hook_fn fn, void *arg)
{
  pthread_mutex_lock (&pc->pc_lock);
  pc->pc_hook = fn;
  pc->pc_hook_arg = arg;
  pthread_mutex_unlock (&pc->pc_lock);
}

void
pc_set_fault (pc_t *pc, zv_dev_fault_fn fn, void *arg)
{
  pc->pc_user_fault = fn;
  pc->pc_user_fault_arg = arg;
}

void
pc_get_stats (pc_t *pc, pc_stats_t *st)
{
  pc_settle (pc);                       /* a cut pc_cut() left */
  pthread_mutex_lock (&pc->pc_lock);
  *st = pc->pc_stats;
  st->ps_failed = atomic_load (&pc->pc_failed);
  pthread_mutex_unlock (&pc->pc_lock);
}
