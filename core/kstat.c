/*
 * kstat.c: the statistics as text, and the thread that keeps them in
 * files.
 *
 * Theory.  The engine hands out its figures as structs (zvol_pool_stats_t,
 * zvol_stats_t, zvol_txg_stats_t); this module is their one text form, so
 * the plugin's kstat files and the admin tool print the same tables:
 * "name value" lines for the pool and its volume, and the txg history in
 * the columns of OpenZFS's txgs kstat.  It reads the figures through the
 * public API alone, as any front end could; of the engine's insides it
 * uses only the log hook (zv_util.h).
 *
 * The pool's runtime directory (/run/nbdkit-zvol/NAME as root, else
 * under $XDG_RUNTIME_DIR) is computed here once for every front end:
 * the kstat files' default directory, and zvol_runtime_path's files in
 * it (the control socket), which a server and zvoladm must agree on.
 *
 * The writer thread renders the tables once per interval and replaces
 * each file atomically (a temporary file, then rename), so a reader
 * never sees half a table: DIR/txgs, DIR/stats (the pool's figures and
 * the default export's, where they always were), and with the served
 * volumes' table DIR/volumes/NAME/stats for every volume (what zvoladm
 * stats POOL/NAME prints).  It holds no volume between rounds: each
 * round renders the volumes' figures inside zvol_exports_foreach (under
 * the table's lock, so a destroy or rollback waits for the rendering,
 * never fails because of it), then writes the files with no lock.  The
 * directory of a volume that is gone is removed by the next round (that
 * also clears what a previous server left), one created live appears in
 * it.  A failing write is logged once per distinct error, not every
 * interval.  Locking: ks_lock guards only the stop flag; the figures
 * come from the engine's own atomics and locks.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>
#include <unistd.h>
#include <sys/stat.h>

#include "zvol.h"
#include "zv_util.h"
#include "compress.h"

#define KSTAT_VOLUMES "volumes"   /* DIR/volumes/NAME/stats */

struct zvol_kstat {
  zvol_pool_t *ks_pool;
  zvol_exports_t *ks_ex;        /* NULL: the pool's tables only */
  char *ks_volume;              /* the default export, or NULL */
  char *ks_dir;                 /* NULL: no files, only the tick */
  unsigned ks_interval_ms;
  zvol_kstat_tick_fn ks_tick;
  void *ks_tick_arg;
  pthread_mutex_t ks_lock;
  pthread_cond_t ks_cv;
  bool ks_stop;
  pthread_t ks_thread;
  int ks_last_err;              /* last write error, logged once */
};

/* ---- the tables ---- */

/* A table is printed into memory; like every engine allocation, that
 * does not fail (zv_util.h). */
static FILE *
kstat_open_mem (char **buf, size_t *len)
{
  FILE *fp;

  *buf = NULL;
  *len = 0;
  fp = open_memstream (buf, len);
  if (fp == NULL)
    zv_nomem (BUFSIZ);
  return fp;
}

/* Close it: the text (which fclose sets). */
static char *
kstat_close_mem (FILE *fp, char **buf)
{
  if (fclose (fp) != 0)
    zv_nomem (BUFSIZ);
  return *buf;
}

static const char *
kstat_sync_name (unsigned sync)
{
  return sync == ZVOL_SYNC_ALWAYS ? "always"
    : sync == ZVOL_SYNC_DISABLED ? "disabled" : "standard";
}

/* The counters of a stats struct, by name and place: one table per
 * struct instead of a printf per line. */
typedef struct kstat_u64 {
  const char *ku_name;
  size_t ku_off;
} kstat_u64_t;

#define KSTAT_PS(name, field) { name, offsetof (zvol_pool_stats_t, field) }
static const kstat_u64_t kstat_pool_u64[] = {
  KSTAT_PS ("space_total", ps_space_total),
  KSTAT_PS ("space_allocated", ps_space_allocated),
  KSTAT_PS ("space_deferred", ps_space_deferred),
  KSTAT_PS ("space_reserved", ps_space_reserved),
  KSTAT_PS ("txg_synced", ps_txg_synced),
  KSTAT_PS ("txg_open", ps_txg_open),
  KSTAT_PS ("dirty_bytes", ps_dirty_bytes),
  KSTAT_PS ("dirty_max", ps_dirty_max),
  KSTAT_PS ("throttle_delays", ps_throttle_delays),
  KSTAT_PS ("throttle_delay_ns", ps_throttle_delay_ns),
  KSTAT_PS ("throttle_stalls", ps_throttle_stalls),
  KSTAT_PS ("sync_passes_last", ps_sync_passes_last),
  KSTAT_PS ("written_data_bytes", ps_written_data),
  KSTAT_PS ("written_meta_bytes", ps_written_meta),
  KSTAT_PS ("written_meta_indirect_bytes", ps_written_indirect),
  KSTAT_PS ("written_meta_objset_bytes", ps_written_objset),
  KSTAT_PS ("written_meta_spacemap_bytes", ps_written_spacemap),
  KSTAT_PS ("written_meta_defer_bytes", ps_written_defer),
  KSTAT_PS ("written_meta_dsdir_bytes", ps_written_dsdir),
  KSTAT_PS ("written_meta_deadlist_bytes", ps_written_deadlist),
  KSTAT_PS ("written_meta_uberblock_bytes", ps_written_uberblock),
};
static const kstat_u64_t kstat_cache_u64[] = {
  KSTAT_PS ("cache_bytes", ps_cache_bytes),
  KSTAT_PS ("cache_limit", ps_cache_limit),
  KSTAT_PS ("cache_target", ps_cache_target),
  KSTAT_PS ("cache_buffers", ps_cache_buffers),
  KSTAT_PS ("cache_hits", ps_cache_hits),
  KSTAT_PS ("cache_misses", ps_cache_misses),
  KSTAT_PS ("cache_evictions", ps_cache_evictions),
};
#define KSTAT_VS(name, field) { name, offsetof (zvol_stats_t, field) }
static const kstat_u64_t kstat_zil_u64[] = {
  KSTAT_VS ("zil_lwbs_written", vs_zil_lwbs_written),
  KSTAT_VS ("zil_lwbs_ahead", vs_zil_lwbs_ahead),
  KSTAT_VS ("zil_ring_size", vs_zil_ring_size),
  KSTAT_VS ("zil_ring_used", vs_zil_ring_used),
  KSTAT_VS ("zil_lwb_bytes", vs_zil_lwb_bytes),
  KSTAT_VS ("zil_records_copied", vs_zil_records_copied),
  KSTAT_VS ("zil_records_need_copy", vs_zil_records_need_copy),
  KSTAT_VS ("zil_records_indirect", vs_zil_records_indirect),
  KSTAT_VS ("zil_records_free", vs_zil_records_free),
  KSTAT_VS ("zil_records_dropped", vs_zil_records_dropped),
  KSTAT_VS ("zil_commits", vs_zil_commits),
  KSTAT_VS ("zil_commit_fallbacks", vs_zil_commit_fallbacks),
  KSTAT_VS ("zil_commit_sleeps", vs_zil_commit_sleeps),
};
static const kstat_u64_t kstat_zil_lat_u64[] = {
  KSTAT_VS ("zil_commit_latency_mean_ns", vs_zil_commit_latency_mean_ns),
  KSTAT_VS ("zil_commit_latency_p99_ns", vs_zil_commit_latency_p99_ns),
  KSTAT_VS ("zil_lwb_latency_ewma_ns", vs_zil_lwb_latency_ewma_ns),
};

static void
kstat_print_u64 (FILE *fp, const void *st, const kstat_u64_t *t, size_t n)
{
  for (size_t i = 0; i < n; i++) {
    uint64_t v;
    memcpy (&v, (const char *) st + t[i].ku_off, sizeof v);
    fprintf (fp, "%s %" PRIu64 "\n", t[i].ku_name, v);
  }
}
#define KSTAT_PRINT(fp, st, t) \
  kstat_print_u64 ((fp), (st), (t), sizeof (t) / sizeof (t)[0])

/* The listing's compression figures of the volume (as of the last
 * sync), as zfs get compression,compressratio,logicalused,used. */
static void
kstat_print_compression (FILE *fp, zvol_pool_t *pool, const char *name)
{
  size_t n = zvol_dataset_list (pool, ZVOL_LIST_VOLUMES, NULL, 0);
  zvol_volume_info_t *vi = zv_calloc (n ? n : 1, sizeof *vi);

  n = ZV_MIN (n, zvol_dataset_list (pool, ZVOL_LIST_VOLUMES, vi, n));
  for (size_t i = 0; i < n; i++) {
    char c[32];
    if (strcmp (vi[i].vi_name, name) != 0)
      continue;
    zvol_compression_name (vi[i].vi_compression, c, sizeof c);
    fprintf (fp, "compression %s\n", c);
    fprintf (fp, "used %" PRIu64 "\n", vi[i].vi_used);
    fprintf (fp, "written %" PRIu64 "\n", vi[i].vi_written);
    fprintf (fp, "logicalused %" PRIu64 "\n", vi[i].vi_logicalused);
    fprintf (fp, "compressratio %.2f\n", vi[i].vi_written
             ? (double) vi[i].vi_logicalused / (double) vi[i].vi_written
             : 1.0);
    break;
  }
  free (vi);
}

static void
kstat_print_volume (FILE *fp, zvol_pool_t *pool, zvol_t *zv)
{
  zvol_stats_t vs;

  zvol_get_stats (zv, &vs);
  fprintf (fp, "volume %s\n", vs.vs_name);
  fprintf (fp, "volsize %" PRIu64 "\n", vs.vs_volsize);
  fprintf (fp, "volblocksize %" PRIu32 "\n", vs.vs_volblocksize);
  fprintf (fp, "direct_blocks %" PRIu64 "\n", vs.vs_direct_blocks);
  if (vs.vs_name && vs.vs_name[0] != '\0')
    kstat_print_compression (fp, pool, vs.vs_name);
  if (!vs.vs_log)
    return;
  fprintf (fp, "zil_sync_mode %s\n", kstat_sync_name (vs.vs_sync));
  fprintf (fp, "zil_logbias %s\n", vs.vs_logbias == ZVOL_LOGBIAS_THROUGHPUT
           ? "throughput" : "latency");
  fprintf (fp, "zil_log_device %s\n",
           vs.vs_log_device ? vs.vs_log_device : "none");
  KSTAT_PRINT (fp, &vs, kstat_zil_u64);
  fprintf (fp, "zil_waiters_per_lwb %.2f\n", vs.vs_zil_lwbs_written
           ? (double) vs.vs_zil_commits / (double) vs.vs_zil_lwbs_written
           : 0.0);
  KSTAT_PRINT (fp, &vs, kstat_zil_lat_u64);
}

char *
zvol_format_stats (zvol_pool_t *pool, zvol_t *zv)
{
  zvol_pool_stats_t ps;
  char *buf;
  size_t len;
  FILE *fp = kstat_open_mem (&buf, &len);

  zvol_pool_get_stats (pool, &ps);
  fprintf (fp, "pool_name %s\n", ps.ps_name);
  fprintf (fp, "pool_guid %016" PRIx64 "\n", ps.ps_guid);
  fprintf (fp, "devices %u\n", ps.ps_ndevs);
  for (unsigned d = 0; d < ps.ps_ndevs; d++)
    fprintf (fp, "device%u %s direct_io=%s read_errors=%" PRIu64
             " write_errors=%" PRIu64 " cksum_errors=%" PRIu64 "\n", d,
             ps.ps_dev_path[d], ps.ps_dev_direct[d] ? "yes" : "no",
             ps.ps_dev_read_errors[d], ps.ps_dev_write_errors[d],
             ps.ps_dev_cksum_errors[d]);
  if (ps.ps_logdev_path != NULL)
    fprintf (fp, "logdevice %s read_errors=%" PRIu64 " write_errors=%" PRIu64
             " cksum_errors=%" PRIu64 "\n", ps.ps_logdev_path,
             ps.ps_logdev_read_errors, ps.ps_logdev_write_errors,
             ps.ps_logdev_cksum_errors);
  KSTAT_PRINT (fp, &ps, kstat_pool_u64);
  fprintf (fp, "sync_write_max_active_last %u\n",
           ps.ps_sync_write_max_active_last);
  KSTAT_PRINT (fp, &ps, kstat_cache_u64);
  {
    /* The compressor's (every pool of the process): blocks tried, given
     * up on by the early abort, compressed but kept whole (saved less
     * than an eighth), stored compressed. */
    zv_comp_stats_t cs;
    zv_comp_stats (&cs);
    fprintf (fp, "compress_tried %" PRIu64 "\n", cs.cs_tried);
    fprintf (fp, "compress_aborted %" PRIu64 "\n", cs.cs_aborted);
    fprintf (fp, "compress_kept_whole %" PRIu64 "\n", cs.cs_kept);
    fprintf (fp, "compress_stored %" PRIu64 "\n", cs.cs_compressed);
  }
  if (zv)
    kstat_print_volume (fp, pool, zv);
  return kstat_close_mem (fp, &buf);
}

char *
zvol_format_txgs (zvol_pool_t *pool)
{
  zvol_txg_stats_t ts[ZVOL_TXG_HISTORY];
  size_t n = zvol_pool_get_txgs (pool, ts, ZVOL_TXG_HISTORY), len;
  char *buf;
  FILE *fp = kstat_open_mem (&buf, &len);

  fprintf (fp, "%-8s %-16s %-5s %-12s %-12s %-12s %-8s %-8s "
           "%-12s %-12s %-12s %-12s\n",
           "txg", "birth", "state", "ndirty", "nread", "nwritten",
           "reads", "writes", "otime", "qtime", "wtime", "stime");
  for (size_t i = 0; i < n; i++)
    fprintf (fp, "%-8" PRIu64 " %-16" PRIu64 " %-5c %-12" PRIu64
             " %-12" PRIu64 " %-12" PRIu64 " %-8" PRIu64 " %-8" PRIu64
             " %-12" PRIu64 " %-12" PRIu64 " %-12" PRIu64 " %-12" PRIu64
             "\n", ts[i].ts_txg, ts[i].ts_birth_ns, ts[i].ts_state,
             ts[i].ts_ndirty, ts[i].ts_nread, ts[i].ts_nwritten,
             ts[i].ts_reads, ts[i].ts_writes, ts[i].ts_otime_ns,
             ts[i].ts_qtime_ns, ts[i].ts_wtime_ns, ts[i].ts_stime_ns);
  return kstat_close_mem (fp, &buf);
}

/* ---- the files ---- */

int
zvol_kstat_mkdir (const char *dir)
{
  char *s = zv_strdup (dir);
  int r = 0;

  for (char *p = s + 1; *p && r == 0; p++) {
    if (*p != '/')
      continue;
    *p = '\0';
    if (mkdir (s, 0755) == -1 && errno != EEXIST)
      r = -errno;
    *p = '/';
  }
  if (r == 0 && mkdir (s, 0755) == -1 && errno != EEXIST)
    r = -errno;
  free (s);
  return r;
}

/* "a/b" in a new string. */
static char *
kstat_path_join (const char *a, const char *b)
{
  char *s = zv_alloc (strlen (a) + strlen (b) + 2);

  sprintf (s, "%s/%s", a, b);
  return s;
}

/* The pool's runtime directory, nothing made: NULL when there is none. */
static char *
kstat_runtime_dir (const char *pool_name)
{
  const char *xdg = getenv ("XDG_RUNTIME_DIR");
  const char *own = getenv ("ZVOL_RUNTIME_DIR");
  char *safe, *base = NULL, *dir = NULL;

  /* The pool name becomes one path component. */
  safe = zv_strdup (pool_name && *pool_name ? pool_name : "zvol");
  for (char *p = safe; *p; p++)
    if (*p == '/')
      *p = '_';
  if (strcmp (safe, ".") == 0 || strcmp (safe, "..") == 0)
    safe[0] = '_';
  /* ZVOL_RUNTIME_DIR first: servers that must not meet (a test suite's
   * runs side by side, as root, serving pools of one name) each give
   * their own, and their zvoladm the same. */
  if (own && *own == '/')
    base = zv_strdup (own);
  else if (geteuid () == 0 && access ("/run", W_OK) == 0)
    base = zv_strdup ("/run/nbdkit-zvol");
  else if (xdg && *xdg == '/')
    base = kstat_path_join (xdg, "nbdkit-zvol");
  if (base)
    dir = kstat_path_join (base, safe);
  free (base);
  free (safe);
  return dir;
}

char *
zvol_runtime_path (const char *pool_name, const char *file)
{
  char *dir = kstat_runtime_dir (pool_name), *path;

  if (dir == NULL || file == NULL)
    return dir;
  path = kstat_path_join (dir, file);
  free (dir);
  return path;
}

char *
zvol_kstat_default_dir (const char *pool_name)
{
  char *dir = kstat_runtime_dir (pool_name);
  int r;

  if (dir == NULL) {
    zv_debug ("kstat files disabled: not root and no "
               "XDG_RUNTIME_DIR (use kstat=DIR)");
    return NULL;
  }
  r = zvol_kstat_mkdir (dir);
  if (r < 0) {
    zv_debug ("kstat files disabled: cannot create %s: %s",
               dir, strerror (-r));
    free (dir);
    return NULL;
  }
  return dir;
}

/* Replace DIR/NAME with 'len' bytes: a temporary file, then rename.
 * Returns 0 or -errno. */
static int
kstat_write_file (const char *dir, const char *name, const char *buf,
                  size_t len)
{
  char *dst = kstat_path_join (dir, name);
  char *tmp = zv_alloc (strlen (dir) + strlen (name) + 7);
  int fd = -1, err = 0;
  size_t done = 0;

  sprintf (tmp, "%s/.%s.tmp", dir, name);
  fd = open (tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd == -1) {
    err = -errno;
    goto out;
  }
  while (done < len) {
    ssize_t n = write (fd, buf + done, len - done);
    if (n == -1 && errno == EINTR)
      continue;
    if (n == -1) {
      err = -errno;
      goto out;
    }
    done += (size_t) n;
  }
  err = close (fd) == -1 ? -errno : 0;
  fd = -1;
  if (err == 0 && rename (tmp, dst) == -1)
    err = -errno;
 out:
  if (fd != -1)
    close (fd);
  if (err)
    unlink (tmp);
  free (tmp);
  free (dst);
  return err;
}

/* A write error, logged once per distinct error. */
static void
kstat_write_err (zvol_kstat_t *ks, const char *dir, const char *name,
                 int err)
{
  if (err == 0 || err == ks->ks_last_err)
    return;
  zv_debug ("kstat: cannot write %s/%s: %s", dir, name, strerror (-err));
  ks->ks_last_err = err;
}

/* One volume's table, rendered in a round. */
typedef struct kstat_vol {
  char kv_name[ZVOL_NAME_MAX];
  char *kv_text;
} kstat_vol_t;

typedef struct kstat_collect {
  zvol_kstat_t *kc_ks;
  kstat_vol_t *kc_vols;
  size_t kc_n, kc_cap;
  char *kc_default;             /* the default export's table */
} kstat_collect_t;

/* Under the served volumes' table lock: render only. */
static void
kstat_collect_one (void *arg, const char *name, zvol_t *zv)
{
  kstat_collect_t *kc = arg;
  zvol_kstat_t *ks = kc->kc_ks;
  char *text;

  if (strlen (name) >= ZVOL_NAME_MAX)
    return;
  text = zvol_format_stats (ks->ks_pool, zv);
  if (ks->ks_volume && strcmp (name, ks->ks_volume) == 0 && !kc->kc_default)
    kc->kc_default = zv_strdup (text);
  ZV_GROW (kc->kc_vols, kc->kc_n, kc->kc_cap, 8);
  snprintf (kc->kc_vols[kc->kc_n].kv_name, ZVOL_NAME_MAX, "%s", name);
  kc->kc_vols[kc->kc_n++].kv_text = text;
}

/* A volume's name as a directory entry: a name that could climb out or
 * hide (the engine allows neither) is left out. */
static bool
kstat_name_ok (const char *name)
{
  return name[0] != '\0' && name[0] != '.' && strchr (name, '/') == NULL;
}

/* Remove what DIR/volumes holds for volumes not in kc: their table, its
 * temporary file, the directory. */
static void
kstat_prune (const char *vdir, const kstat_collect_t *kc)
{
  DIR *d = opendir (vdir);
  struct dirent *de;

  if (d == NULL)
    return;
  while ((de = readdir (d)) != NULL) {
    bool keep = !kstat_name_ok (de->d_name);
    for (size_t i = 0; i < kc->kc_n && !keep; i++)
      keep = strcmp (kc->kc_vols[i].kv_name, de->d_name) == 0;
    if (keep)
      continue;
    int dfd = openat (dirfd (d), de->d_name, O_RDONLY | O_DIRECTORY
                      | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
      continue;
    (void) unlinkat (dfd, "stats", 0);
    (void) unlinkat (dfd, ".stats.tmp", 0);
    close (dfd);
    (void) unlinkat (dirfd (d), de->d_name, AT_REMOVEDIR);
  }
  closedir (d);
}

/* The volumes' files of a round. */
static void
kstat_write_volumes (zvol_kstat_t *ks, const kstat_collect_t *kc)
{
  char *vdir = kstat_path_join (ks->ks_dir, KSTAT_VOLUMES);

  if (mkdir (vdir, 0755) < 0 && errno != EEXIST) {
    kstat_write_err (ks, ks->ks_dir, KSTAT_VOLUMES, -errno);
    free (vdir);
    return;
  }
  for (size_t i = 0; i < kc->kc_n; i++) {
    const kstat_vol_t *v = &kc->kc_vols[i];
    char *d;
    if (!kstat_name_ok (v->kv_name))
      continue;
    d = kstat_path_join (vdir, v->kv_name);
    if (mkdir (d, 0755) < 0 && errno != EEXIST)
      kstat_write_err (ks, vdir, v->kv_name, -errno);
    else
      kstat_write_err (ks, d, "stats",
                       kstat_write_file (d, "stats", v->kv_text,
                                         strlen (v->kv_text)));
    free (d);
  }
  kstat_prune (vdir, kc);
  free (vdir);
}

/* One round: render the tables, hand the txgs to the tick, write. */
static void
kstat_round (zvol_kstat_t *ks)
{
  char *txgs = zvol_format_txgs (ks->ks_pool);
  kstat_collect_t kc = { .kc_ks = ks };
  char *stats = NULL;

  if (ks->ks_dir && ks->ks_ex)
    zvol_exports_foreach (ks->ks_ex, kstat_collect_one, &kc);
  if (ks->ks_dir)
    stats = kc.kc_default ? kc.kc_default
      : zvol_format_stats (ks->ks_pool, NULL);
  if (ks->ks_tick)
    ks->ks_tick (ks->ks_tick_arg, txgs);
  if (ks->ks_dir) {
    const char *names[2] = { "txgs", "stats" };
    const char *bufs[2] = { txgs, stats };
    for (unsigned i = 0; i < 2; i++)
      kstat_write_err (ks, ks->ks_dir, names[i],
                       kstat_write_file (ks->ks_dir, names[i], bufs[i],
                                         strlen (bufs[i])));
    if (ks->ks_ex)
      kstat_write_volumes (ks, &kc);
  }
  for (size_t i = 0; i < kc.kc_n; i++)
    free (kc.kc_vols[i].kv_text);
  free (kc.kc_vols);
  free (txgs);
  free (stats);
}

static void *
kstat_main (void *arg)
{
  zvol_kstat_t *ks = arg;
  struct timespec ts;

  zv_thread_name ("zv-kstat");
  pthread_mutex_lock (&ks->ks_lock);
  while (!ks->ks_stop) {
    pthread_mutex_unlock (&ks->ks_lock);
    kstat_round (ks);
    pthread_mutex_lock (&ks->ks_lock);
    clock_gettime (CLOCK_MONOTONIC, &ts);
    ts.tv_sec += ks->ks_interval_ms / 1000;
    ts.tv_nsec += (long) (ks->ks_interval_ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    while (!ks->ks_stop
           && pthread_cond_timedwait (&ks->ks_cv, &ks->ks_lock, &ts) == 0)
      ;
  }
  pthread_mutex_unlock (&ks->ks_lock);
  return NULL;
}

int
zvol_kstat_start (zvol_pool_t *pool, zvol_exports_t *ex, const char *volume,
                  const char *dir, unsigned interval_ms,
                  zvol_kstat_tick_fn tick, void *arg, zvol_kstat_t **ksp)
{
  pthread_condattr_t ca;
  zvol_kstat_t *ks;
  int err;

  *ksp = NULL;
  if (interval_ms == 0) {
    zv_error ("kstat: the interval must not be zero");
    return -EINVAL;
  }
  ks = zv_calloc (1, sizeof *ks);
  ks->ks_dir = dir ? zv_strdup (dir) : NULL;
  ks->ks_pool = pool;
  ks->ks_ex = ex;
  ks->ks_volume = volume ? zv_strdup (volume) : NULL;
  ks->ks_interval_ms = interval_ms;
  ks->ks_tick = tick;
  ks->ks_tick_arg = arg;
  pthread_mutex_init (&ks->ks_lock, NULL);
  pthread_condattr_init (&ca);
  pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
  pthread_cond_init (&ks->ks_cv, &ca);
  pthread_condattr_destroy (&ca);
  err = pthread_create (&ks->ks_thread, NULL, kstat_main, ks);
  if (err) {
    zv_error ("cannot start the kstat thread: %s",
               strerror (err));
    pthread_cond_destroy (&ks->ks_cv);
    pthread_mutex_destroy (&ks->ks_lock);
    free (ks->ks_volume);
    free (ks->ks_dir);
    free (ks);
    return -err;
  }
  *ksp = ks;
  return 0;
}

void
zvol_kstat_stop (zvol_kstat_t *ks)
{
  if (ks == NULL)
    return;
  pthread_mutex_lock (&ks->ks_lock);
  ks->ks_stop = true;
  pthread_cond_signal (&ks->ks_cv);
  pthread_mutex_unlock (&ks->ks_lock);
  pthread_join (ks->ks_thread, NULL);
  /* The tables as they stand at the end. */
  kstat_round (ks);
  pthread_cond_destroy (&ks->ks_cv);
  pthread_mutex_destroy (&ks->ks_lock);
  free (ks->ks_volume);
  free (ks->ks_dir);
  free (ks);
}
