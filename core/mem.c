/*
 * mem.c: sizing caches to the memory the system can spare.
 *
 * Theory.  The devices are opened with O_DIRECT, so the page cache holds
 * none of the pool and the engine's buffer cache is the only read cache:
 * like OpenZFS's ARC it should take a large share of memory when nobody
 * else needs it, and give it back when somebody does.  The kernel tells
 * a user-space process nothing when memory runs short (there are no
 * shrinker callbacks), but it publishes MemAvailable, its estimate of
 * what can be allocated without swapping.  So one monitor thread per
 * process samples it every mem_poll_interval and moves each registered
 * client's target:
 *
 *   available < free_target            shrink: the shortfall, shared out
 *                                      equally, comes off each client's
 *                                      cached bytes (not off its target,
 *                                      which may be far above them), down
 *                                      to its floor; then the freed
 *                                      buffers go back to the system
 *                                      (zv_buf_reclaim)
 *   free_target <= available < 2 x     hold: the band keeps a client from
 *                                      growing straight back into the
 *                                      shortage it just left
 *   available >= 2 x free_target       grow: each target rises by at most
 *                                      a 32nd of its ceiling per sample,
 *                                      and by no more than its share of
 *                                      the memory above the band
 *
 * A target only bounds what a client keeps; growing it allocates
 * nothing.  The ceiling is the client's configured size (cache_size, or
 * half of physical memory by default: ARC's own default on Linux), the
 * floor what it needs to work at all.
 *
 * The thread starts with the first client and stops with the last.  A
 * process that forks after that (nbdkit opens the pool before it forks)
 * has no thread in the child: the atfork handler notes it, and the
 * server's start after the fork (zv_pool_start) starts it again.
 *
 * Locking.  mem_lock guards the client list, the source and the thread's
 * state.  A sample holds it while it calls the clients' callbacks, so
 * zv_mem_unregister, which takes it, returns only once no callback of
 * that client is running or can run.  The callbacks take the client's
 * own locks (a cache's shard mutexes) and never call back in here.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zv_util.h"
#include "tunable.h"
#include "mem.h"

struct zv_mem_client {
  zv_mem_client_t *mc_next;
  uint64_t mc_max, mc_min;
  _Atomic uint64_t mc_target;
  zv_mem_size_fn mc_size;
  zv_mem_apply_fn mc_apply;
  void *mc_arg;
};

/* Tunables (table at the end). */
static uint64_t zv_mem_free_target_bytes = 0;       /* 0: auto */
static unsigned zv_mem_poll_interval_ms = 1000;

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mem_cv;
static pthread_once_t mem_cv_once = PTHREAD_ONCE_INIT;
static zv_mem_client_t *mem_clients;
static unsigned mem_nclients;
static pthread_t mem_thread;
static bool mem_running, mem_stop;
static zv_mem_source_fn mem_source;
static void *mem_source_arg;
static bool mem_source_warned;

static void *mem_thread_main (void *arg);

/* A forked child has no monitor thread (only the forking thread lives
 * on), and mem_lock may have been held by it: start over, unlocked and
 * stopped, until zv_mem_start (a server's after-fork start). */
static void
mem_atfork_child (void)
{
  pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;

  memcpy (&mem_lock, &fresh, sizeof fresh);
  mem_running = false;
  mem_stop = false;
}

static void
mem_cv_init (void)
{
  pthread_condattr_t a;

  pthread_condattr_init (&a);
  pthread_condattr_setclock (&a, CLOCK_MONOTONIC);
  pthread_cond_init (&mem_cv, &a);
  pthread_condattr_destroy (&a);
  pthread_atfork (NULL, NULL, mem_atfork_child);
}

/* Start the monitor thread if clients want it and it is not running
 * (mem_lock held). */
static void
mem_start_locked (void)
{
  if (mem_running || mem_nclients == 0)
    return;
  mem_stop = false;
  int e = pthread_create (&mem_thread, NULL, mem_thread_main, NULL);
  if (e != 0)
    zv_error ("cannot start the memory monitor: %s (caches keep their "
              "size)", strerror (e));
  mem_running = e == 0;
}

void
zv_mem_start (void)
{
  pthread_once (&mem_cv_once, mem_cv_init);
  pthread_mutex_lock (&mem_lock);
  mem_start_locked ();
  pthread_mutex_unlock (&mem_lock);
}

uint64_t
zv_mem_physical (void)
{
  return zv_physical_memory (4ull << 30);
}

uint64_t
zv_mem_free_target (void)
{
  if (zv_mem_free_target_bytes != 0)
    return zv_mem_free_target_bytes;
  return ZV_MIN (ZV_MAX (zv_mem_physical () / 32, 64ull << 20), 4ull << 30);
}

/* MemAvailable from /proc/meminfo, bytes; a negative errno without it. */
static int64_t
mem_read_meminfo (void)
{
  char buf[4096];
  int fd = open ("/proc/meminfo", O_RDONLY | O_CLOEXEC);
  ssize_t n;
  const char *p;

  if (fd < 0)
    return -errno;
  n = read (fd, buf, sizeof buf - 1);
  close (fd);
  if (n <= 0)
    return n < 0 ? -errno : -ENODATA;
  buf[n] = '\0';
  p = strstr (buf, "\nMemAvailable:");
  if (p == NULL)
    return -ENODATA;
  /* "MemAvailable:   123456 kB" */
  char *end;
  unsigned long long kb = strtoull (p + 14, &end, 10);
  if (end == p + 14 || kb > (uint64_t) INT64_MAX / 1024)
    return -ENODATA;
  return (int64_t) kb * 1024;
}

/* One sample and its adjustments (mem_lock held). */
static void
mem_adjust_locked (void)
{
  int64_t avail = mem_source ? mem_source (mem_source_arg)
    : mem_read_meminfo ();
  uint64_t floor = zv_mem_free_target ();
  bool shrunk = false;

  if (avail < 0) {
    if (!mem_source_warned)
      zv_info ("available memory unknown (%s): caches keep their size",
               strerror ((int) -avail));
    mem_source_warned = true;
    return;
  }
  if (mem_nclients == 0)
    return;
  if ((uint64_t) avail < floor) {
    uint64_t per = (floor - (uint64_t) avail) / mem_nclients + 1;
    for (zv_mem_client_t *mc = mem_clients; mc; mc = mc->mc_next) {
      uint64_t t = ZV_MIN (atomic_load (&mc->mc_target), mc->mc_size (mc->mc_arg));
      t = t > mc->mc_min + per ? t - per : mc->mc_min;
      if (t < atomic_load (&mc->mc_target)) {
        atomic_store (&mc->mc_target, t);
        mc->mc_apply (mc->mc_arg, t);
        shrunk = true;
      }
    }
  }
  else if ((uint64_t) avail >= 2 * floor) {
    uint64_t room = ((uint64_t) avail - 2 * floor) / mem_nclients;
    for (zv_mem_client_t *mc = mem_clients; mc; mc = mc->mc_next) {
      uint64_t t = atomic_load (&mc->mc_target);
      uint64_t step = ZV_MIN (ZV_MAX (mc->mc_max / 32, 1ull << 20), room);
      if (t < mc->mc_max && step > 0) {
        t = ZV_MIN (mc->mc_max, t + step);
        atomic_store (&mc->mc_target, t);
        mc->mc_apply (mc->mc_arg, t);
      }
    }
  }
  if (shrunk) {
    /* Evicted buffers wait in the free-buffer cache and in malloc's
     * arenas: hand them back, or the shrink frees nothing. */
    zv_buf_reclaim ();
    malloc_trim (0);
  }
}

void
zv_mem_poll_now (void)
{
  pthread_mutex_lock (&mem_lock);
  mem_adjust_locked ();
  pthread_mutex_unlock (&mem_lock);
}

static void *
mem_thread_main (void *arg)
{
  (void) arg;
  zv_thread_name ("zv-mem");
  pthread_mutex_lock (&mem_lock);
  while (!mem_stop) {
    struct timespec ts;
    uint64_t ns = (uint64_t) zv_mem_poll_interval_ms * 1000000ull;

    clock_gettime (CLOCK_MONOTONIC, &ts);
    ns += (uint64_t) ts.tv_nsec;
    ts.tv_sec += (time_t) (ns / 1000000000ull);
    ts.tv_nsec = (long) (ns % 1000000000ull);
    if (pthread_cond_timedwait (&mem_cv, &mem_lock, &ts) == ETIMEDOUT
        && !mem_stop)
      mem_adjust_locked ();
  }
  pthread_mutex_unlock (&mem_lock);
  return NULL;
}

zv_mem_client_t *
zv_mem_register (uint64_t max, uint64_t min, zv_mem_size_fn size,
                 zv_mem_apply_fn apply, void *arg)
{
  zv_mem_client_t *mc = zv_calloc (1, sizeof *mc);

  ZV_VERIFY3U (min, <=, max);
  mc->mc_max = max;
  mc->mc_min = min;
  atomic_store (&mc->mc_target, max);
  mc->mc_size = size;
  mc->mc_apply = apply;
  mc->mc_arg = arg;
  pthread_once (&mem_cv_once, mem_cv_init);
  pthread_mutex_lock (&mem_lock);
  mc->mc_next = mem_clients;
  mem_clients = mc;
  mem_nclients++;
  mem_start_locked ();
  pthread_mutex_unlock (&mem_lock);
  return mc;
}

void
zv_mem_unregister (zv_mem_client_t *mc)
{
  bool join = false;

  if (mc == NULL)
    return;
  pthread_mutex_lock (&mem_lock);
  for (zv_mem_client_t **pp = &mem_clients; *pp; pp = &(*pp)->mc_next)
    if (*pp == mc) {
      *pp = mc->mc_next;
      break;
    }
  mem_nclients--;
  if (mem_nclients == 0 && mem_running) {
    mem_stop = true;
    pthread_cond_broadcast (&mem_cv);
    join = true;
    mem_running = false;
  }
  pthread_mutex_unlock (&mem_lock);
  if (join)
    pthread_join (mem_thread, NULL);
  free (mc);
}

uint64_t
zv_mem_target (const zv_mem_client_t *mc)
{
  return atomic_load (&mc->mc_target);
}

void
zv_mem_set_source (zv_mem_source_fn fn, void *arg)
{
  pthread_mutex_lock (&mem_lock);
  mem_source = fn;
  mem_source_arg = arg;
  mem_source_warned = false;
  pthread_mutex_unlock (&mem_lock);
}

/* ---- tunables (tunable.h) ---- */

const zv_tunable_t zv_mem_tunable_table[] = {
  { .tn_name = "mem_free_target", .tn_module = "mem",
    ZV_TUNABLE_VAR_U64 (zv_mem_free_target_bytes),
    .tn_default = 0, .tn_min = 1ull << 20, .tn_max = 1ull << 40,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_flags = ZV_TUNABLE_F_AUTO,
    .tn_when = ZV_TUNABLE_LIVE, .tn_reader = "the memory monitor",
    .tn_desc = "Available memory (MemAvailable) the caches defend: under "
    "it they shrink, above twice it they grow back towards their size; "
    "auto is a 32nd of physical memory, 64M to 4G.",
    .tn_zfs = "zfs_arc_sys_free" },
  { .tn_name = "mem_poll_interval", .tn_module = "mem",
    ZV_TUNABLE_VAR_UINT (zv_mem_poll_interval_ms),
    .tn_default = 1000, .tn_min = 10, .tn_max = 60000,
    .tn_unit = ZV_TUNABLE_UNIT_MS, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the memory monitor",
    .tn_desc = "How often the memory monitor samples available memory." },
  ZV_TUNABLE_END
};
