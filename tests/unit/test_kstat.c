/*
 * test_kstat.c: the statistics tables and the kstat writer (core/kstat.c).
 *
 * Written against the public API alone (zvol.h), as the admin tool will
 * be: a pool on a sparse file, its volume, the tables as text, and the
 * writer thread's files.
 */
#include <config.h>

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "zvol.h"
#include "testlib.h"

#define MiB (1ull << 20)

typedef struct kst {
  char ks_dev[512];
  zvol_pool_t *ks_pool;
  zvol_t *ks_zv;
} kst_t;

/* A pool with some synced txgs and a volume written to. */
static int
kst_setup (void **state)
{
  kst_t *k = calloc (1, sizeof *k);
  const char *dev = tl_path (k->ks_dev, sizeof k->ks_dev, "kstat.img");
  zvol_pool_config_t pc;
  static uint8_t buf[65536];

  tl_test_setup (state);
  if (tl_sparse_file (dev, 64 * MiB) != 0)
    return -1;
  zvol_pool_config_init (&pc);
  pc.pc_devices[0] = dev;
  pc.pc_ndevices = 1;
  pc.pc_create = true;
  pc.pc_name = "ks/pool";
  pc.pc_volsize = 8 * MiB;
  pc.pc_cache_size = 8 * MiB;
  if (zvol_pool_open (&pc, &k->ks_pool) < 0
      || zvol_open (k->ks_pool, NULL, NULL, &k->ks_zv) < 0)
    return -1;
  memset (buf, 0x5a, sizeof buf);
  for (int i = 0; i < 3; i++)
    if (zvol_write (k->ks_zv, buf, (uint64_t) i * MiB, sizeof buf,
                    ZVOL_FUA) < 0 || zvol_flush (k->ks_zv) < 0)
      return -1;
  *state = k;
  return 0;
}

static int
kst_teardown (void **state)
{
  kst_t *k = *state;
  int r = zvol_close (k->ks_zv);

  if (zvol_pool_close (k->ks_pool) < 0)
    r = -1;
  unlink (k->ks_dev);
  free (k);
  return r < 0 ? -1 : 0;
}

/* The value of "name value" in text, or NULL. */
static const char *
kst_value (const char *text, const char *name, char *out, size_t outlen)
{
  char key[128];
  const char *at;
  size_t n;

  snprintf (key, sizeof key, "%s ", name);
  for (at = text; at && *at; at = strchr (at, '\n'), at = at ? at + 1 : NULL)
    if (strncmp (at, key, strlen (key)) == 0) {
      at += strlen (key);
      n = strcspn (at, "\n");
      snprintf (out, outlen, "%.*s", (int) n, at);
      return out;
    }
  return NULL;
}

/* The stats table: the pool's figures, then the volume's, as the structs
 * hold them. */
static void
test_format_stats (void **state)
{
  kst_t *k = *state;
  zvol_pool_stats_t ps;
  zvol_stats_t vs;
  char *t = zvol_format_stats (k->ks_pool, k->ks_zv), v[700], want[700];

  assert_non_null (t);
  zvol_pool_get_stats (k->ks_pool, &ps);
  zvol_get_stats (k->ks_zv, &vs);
  assert_string_equal (kst_value (t, "pool_name", v, sizeof v), "ks/pool");
  snprintf (want, sizeof want, "%016llx", (unsigned long long) ps.ps_guid);
  assert_string_equal (kst_value (t, "pool_guid", v, sizeof v), want);
  assert_string_equal (kst_value (t, "devices", v, sizeof v), "1");
  snprintf (want, sizeof want, "%s direct_io=%s read_errors=0 "
            "write_errors=0 cksum_errors=0", k->ks_dev,
            ps.ps_dev_direct[0] ? "yes" : "no");
  assert_string_equal (kst_value (t, "device0", v, sizeof v), want);
  assert_true (ps.ps_space_allocated > 3 * 65536);
  assert_true (ps.ps_space_total > ps.ps_space_allocated);
  assert_non_null (kst_value (t, "space_allocated", v, sizeof v));
  assert_non_null (kst_value (t, "sync_write_max_active_last", v, sizeof v));
  /* Metadata written, by kind: the kinds add up to the whole, each is
   * printed, and the syncs so far wrote uberblocks and the objset. */
  assert_int_equal (ps.ps_written_meta,
                    ps.ps_written_indirect + ps.ps_written_objset
                    + ps.ps_written_spacemap + ps.ps_written_defer
                    + ps.ps_written_dsdir + ps.ps_written_deadlist
                    + ps.ps_written_uberblock);
  assert_true (ps.ps_written_uberblock > 0 && ps.ps_written_objset > 0);
  snprintf (want, sizeof want, "%llu",
            (unsigned long long) ps.ps_written_uberblock);
  assert_string_equal (kst_value (t, "written_meta_uberblock_bytes", v,
                                  sizeof v), want);
  snprintf (want, sizeof want, "%llu",
            (unsigned long long) ps.ps_written_objset);
  assert_string_equal (kst_value (t, "written_meta_objset_bytes", v,
                                  sizeof v), want);
  for (const char *const *kind = (const char *const[]) {
         "indirect", "spacemap", "defer", "dsdir", "deadlist", NULL };
       *kind; kind++) {
    char key[64];

    snprintf (key, sizeof key, "written_meta_%s_bytes", *kind);
    assert_non_null (kst_value (t, key, v, sizeof v));
  }
  assert_non_null (kst_value (t, "cache_limit", v, sizeof v));
  /* The volume made with the pool: its name, '/' made '_'. */
  assert_string_equal (kst_value (t, "volume", v, sizeof v), "ks_pool");
  assert_string_equal (kst_value (t, "volsize", v, sizeof v), "8388608");
  assert_string_equal (kst_value (t, "volblocksize", v, sizeof v), "16384");
  assert_string_equal (kst_value (t, "zil_sync_mode", v, sizeof v),
                       "standard");
  assert_string_equal (kst_value (t, "zil_log_device", v, sizeof v), "none");
  assert_true (vs.vs_log && vs.vs_zil_commits >= 3);
  snprintf (want, sizeof want, "%llu",
            (unsigned long long) vs.vs_zil_ring_size);
  assert_string_equal (kst_value (t, "zil_ring_size", v, sizeof v), want);
  free (t);

  /* Without a volume: the pool's lines only. */
  t = zvol_format_stats (k->ks_pool, NULL);
  assert_non_null (t);
  assert_non_null (kst_value (t, "space_total", v, sizeof v));
  assert_null (kst_value (t, "volsize", v, sizeof v));
  assert_null (kst_value (t, "zil_commits", v, sizeof v));
  free (t);
}

/* The txg table: OpenZFS's columns, each row aligned under its header,
 * one row per txg the structs report. */
static void
test_format_txgs (void **state)
{
  static const char *const cols[] = {
    "txg", "birth", "state", "ndirty", "nread", "nwritten", "reads",
    "writes", "otime", "qtime", "wtime", "stime",
  };
  const size_t ncols = sizeof cols / sizeof cols[0];
  kst_t *k = *state;
  zvol_txg_stats_t ts[ZVOL_TXG_HISTORY];
  size_t n = zvol_pool_get_txgs (k->ks_pool, ts, ZVOL_TXG_HISTORY);
  size_t colpos[12], rows = 0;
  char *t = zvol_format_txgs (k->ks_pool), *save = NULL, *line;

  assert_non_null (t);
  assert_true (n >= 2);
  assert_int_equal (ts[n - 1].ts_state, 'O');
  line = strtok_r (t, "\n", &save);
  assert_non_null (line);
  {
    char *p = line;
    for (size_t c = 0; c < ncols; c++) {
      while (*p == ' ')
        p++;
      colpos[c] = (size_t) (p - line);
      assert_int_equal (strncmp (p, cols[c], strlen (cols[c])), 0);
      p += strlen (cols[c]);
      assert_true (*p == ' ' || *p == '\0');
    }
  }
  while ((line = strtok_r (NULL, "\n", &save)) != NULL) {
    unsigned long long txg;
    char st;

    for (size_t c = 0; c < ncols; c++) {
      assert_true (strlen (line) > colpos[c]);
      assert_true (line[colpos[c]] != ' ');
      assert_true (colpos[c] == 0 || line[colpos[c] - 1] == ' ');
    }
    assert_int_equal (sscanf (line, "%llu %*u %c", &txg, &st), 2);
    assert_true (rows < n);
    assert_int_equal (txg, ts[rows].ts_txg);
    assert_int_equal (st, ts[rows].ts_state);
    rows++;
  }
  assert_int_equal (rows, n);
  free (t);
}

static void
test_mkdir (void **state)
{
  char base[512], dir[600], file[600];
  struct stat st;

  tl_path (base, sizeof base, "kstat-mkdir");
  snprintf (dir, sizeof dir, "%s/a/b/c", base);
  assert_int_equal (zvol_kstat_mkdir (dir), 0);
  assert_int_equal (stat (dir, &st), 0);
  assert_true (S_ISDIR (st.st_mode));
  assert_int_equal (zvol_kstat_mkdir (dir), 0);          /* exists: fine */
  snprintf (file, sizeof file, "%s/f", base);
  assert_int_equal (tl_sparse_file (file, 4096), 0);
  snprintf (dir, sizeof dir, "%s/f/x", base);
  assert_int_equal (zvol_kstat_mkdir (dir), -ENOTDIR);
  unlink (file);
  snprintf (dir, sizeof dir, "rm -rf '%s'", base);
  assert_int_equal (system (dir), 0);
}

/* A pool name becomes one path component of the default directory,
 * which ZVOL_RUNTIME_DIR moves. */
static void
test_default_dir (void **state)
{
  char own[512], *d, *p;
  struct stat st;

  /* ZVOL_RUNTIME_DIR, when set, is the base (control socket too). */
  tl_path (own, sizeof own, "rt");
  assert_int_equal (setenv ("ZVOL_RUNTIME_DIR", own, 1), 0);
  d = zvol_kstat_default_dir ("kst/x");
  p = zvol_runtime_path ("kst/x", "control");
  assert_non_null (d);
  assert_non_null (p);
  assert_int_equal (strncmp (d, own, strlen (own)), 0);
  assert_string_equal (d + strlen (own), "/kst_x");
  assert_string_equal (p + strlen (own), "/kst_x/control");
  assert_int_equal (stat (d, &st), 0);
  rmdir (d);
  rmdir (own);
  free (d);
  free (p);
  unsetenv ("ZVOL_RUNTIME_DIR");
  d = zvol_kstat_default_dir ("kst/../x");
  if (d == NULL)
    skip ();       /* neither /run (root) nor XDG_RUNTIME_DIR here */
  assert_non_null (strstr (d, "/nbdkit-zvol/kst_.._x"));
  assert_int_equal (stat (d, &st), 0);
  assert_true (S_ISDIR (st.st_mode));
  rmdir (d);
  free (d);
  d = zvol_kstat_default_dir ("..");
  assert_non_null (d);
  assert_non_null (strstr (d, "/nbdkit-zvol/_."));
  rmdir (d);
  free (d);
}

typedef struct tick {
  pthread_mutex_t tk_lock;
  unsigned tk_n;
  bool tk_saw_header;
} tick_t;

static void
kst_tick (void *arg, const char *txgs)
{
  tick_t *tk = arg;

  pthread_mutex_lock (&tk->tk_lock);
  tk->tk_n++;
  tk->tk_saw_header |= strncmp (txgs, "txg ", 4) == 0;
  pthread_mutex_unlock (&tk->tk_lock);
}

/* The whole file, or NULL. */
static char *
kst_slurp (const char *dir, const char *name)
{
  char path[700], *buf = calloc (1, 1 << 16);
  int fd;
  ssize_t n;

  snprintf (path, sizeof path, "%s/%s", dir, name);
  fd = open (path, O_RDONLY | O_CLOEXEC);
  if (fd < 0 || buf == NULL) {
    free (buf);
    if (fd >= 0)
      close (fd);
    return NULL;
  }
  n = read (fd, buf, (1 << 16) - 1);
  close (fd);
  if (n < 0) {
    free (buf);
    return NULL;
  }
  return buf;
}

/* Wait for n more rounds of the writer. */
static void
kst_rounds (tick_t *tk, unsigned n)
{
  unsigned start, now = 0;

  pthread_mutex_lock (&tk->tk_lock);
  start = tk->tk_n;
  pthread_mutex_unlock (&tk->tk_lock);
  for (int i = 0; i < 500; i++) {
    pthread_mutex_lock (&tk->tk_lock);
    now = tk->tk_n;
    pthread_mutex_unlock (&tk->tk_lock);
    if (now >= start + n)
      break;
    usleep (10000);
  }
  assert_true (now >= start + n);
}

/* The writer: files appear, hold whole tables, are rewritten each round
 * and once more at the stop; no temporary file stays behind.  The
 * default volume's table is DIR/stats, and DIR/volumes/NAME/stats too,
 * through a served volumes' table the writer holds nothing of. */
static void
test_writer (void **state)
{
  kst_t *k = *state;
  tick_t tk = { .tk_lock = PTHREAD_MUTEX_INITIALIZER };
  zvol_kstat_t *ks = NULL;
  char dir[512], vdir[600], name[64], *stats, *txgs, *vstats, v[64];
  char want[64], cmd[700];
  zvol_stats_t before, after;
  zvol_exports_t *ex;
  zvol_t *zv;
  uint8_t buf[4096];
  DIR *dp;
  struct dirent *de;
  unsigned n;

  /* The volume, served through a table as a server serves it. */
  snprintf (name, sizeof name, "%s", zvol_name (k->ks_zv));
  assert_int_equal (zvol_close (k->ks_zv), 0);
  k->ks_zv = NULL;
  ex = zvol_exports_new (k->ks_pool, NULL);
  assert_int_equal (zvol_exports_hold (ex, name, &zv), 0);
  tl_path (dir, sizeof dir, "kstat-dir");
  assert_int_equal (zvol_kstat_mkdir (dir), 0);
  assert_int_equal (zvol_kstat_start (k->ks_pool, ex, name, dir, 0, NULL,
                                      NULL, &ks), -EINVAL);
  assert_int_equal (zvol_kstat_start (k->ks_pool, ex, name, dir, 20,
                                      kst_tick, &tk, &ks), 0);
  for (int i = 0; i < 200; i++) {
    pthread_mutex_lock (&tk.tk_lock);
    n = tk.tk_n;
    pthread_mutex_unlock (&tk.tk_lock);
    if (n >= 3)
      break;
    usleep (10000);
  }
  assert_true (n >= 3);
  assert_true (tk.tk_saw_header);
  /* A change shows in the files written after it. */
  zvol_get_stats (zv, &before);
  memset (buf, 1, sizeof buf);
  assert_int_equal (zvol_write (zv, buf, 5 * MiB, sizeof buf, ZVOL_FUA), 0);
  zvol_kstat_stop (ks);
  zvol_get_stats (zv, &after);
  assert_true (after.vs_zil_commits > before.vs_zil_commits);
  snprintf (want, sizeof want, "%llu",
            (unsigned long long) after.vs_zil_commits);
  stats = kst_slurp (dir, "stats");
  txgs = kst_slurp (dir, "txgs");
  assert_non_null (stats);
  assert_non_null (txgs);
  assert_string_equal (kst_value (stats, "pool_name", v, sizeof v),
                       "ks/pool");
  assert_string_equal (kst_value (stats, "zil_commits", v, sizeof v), want);
  assert_int_equal (strncmp (txgs, "txg ", 4), 0);
  snprintf (vdir, sizeof vdir, "%s/volumes/%s", dir, name);
  vstats = kst_slurp (vdir, "stats");
  assert_non_null (vstats);
  assert_string_equal (vstats, stats);  /* what stats POOL/VOL prints */
  free (vstats);
  free (stats);
  free (txgs);
  dp = opendir (dir);
  assert_non_null (dp);
  n = 0;
  while ((de = readdir (dp)) != NULL)
    if (de->d_name[0] != '.' || strstr (de->d_name, ".tmp"))
      n += strstr (de->d_name, ".tmp") ? 100 : 1;
  closedir (dp);
  assert_int_equal (n, 3);       /* stats, txgs, volumes: nothing else */

  /* No directory: the tick alone. */
  tk.tk_n = 0;
  assert_int_equal (zvol_kstat_start (k->ks_pool, NULL, NULL, NULL, 10,
                                      kst_tick, &tk, &ks), 0);
  zvol_kstat_stop (ks);
  assert_true (tk.tk_n >= 1);
  zvol_exports_rele (ex, zv);
  assert_int_equal (zvol_exports_free (ex), 0);
  assert_int_equal (zvol_open (k->ks_pool, name, NULL, &k->ks_zv), 0);
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal (system (cmd), 0);
}

/* Every volume has its files while it exists: one created while the
 * writer runs appears (opened by the next round), one destroyed goes;
 * the default volume, which the writer only reads at each round, is
 * destroyed with the writer running (no EBUSY), and DIR/stats then has
 * the pool's figures alone. */
static void
test_writer_volumes (void **state)
{
  kst_t *k = *state;
  tick_t tk = { .tk_lock = PTHREAD_MUTEX_INITIALIZER };
  zvol_volume_params_t vp = { .vp_size = 4 * MiB };
  zvol_kstat_t *ks = NULL;
  char dir[512], path[700], *stats, v[64], cmd[700];
  zvol_exports_t *ex = zvol_exports_new (k->ks_pool, NULL);
  struct stat st;

  assert_int_equal (zvol_pool_start (k->ks_pool), 0);
  tl_path (dir, sizeof dir, "kstat-vols");
  assert_int_equal (zvol_kstat_mkdir (dir), 0);
  /* A directory a previous server left for a volume that is gone. */
  snprintf (path, sizeof path, "%s/volumes/gone", dir);
  assert_int_equal (zvol_kstat_mkdir (path), 0);
  assert_int_equal (zvol_volume_create (k->ks_pool, "dflt", &vp), 0);
  assert_int_equal (zvol_kstat_start (k->ks_pool, ex, "dflt", dir, 20,
                                      kst_tick, &tk, &ks), 0);
  kst_rounds (&tk, 2);
  snprintf (path, sizeof path, "%s/volumes/dflt/stats", dir);
  assert_int_equal (stat (path, &st), 0);
  snprintf (path, sizeof path, "%s/volumes/gone", dir);
  assert_int_equal (stat (path, &st), -1);
  stats = kst_slurp (dir, "stats");
  assert_non_null (stats);
  assert_string_equal (kst_value (stats, "volume", v, sizeof v), "dflt");
  free (stats);

  /* Created live: it appears. */
  assert_int_equal (zvol_volume_create (k->ks_pool, "later", &vp), 0);
  kst_rounds (&tk, 2);
  snprintf (path, sizeof path, "%s/volumes/later", dir);
  stats = kst_slurp (path, "stats");
  assert_non_null (stats);
  assert_string_equal (kst_value (stats, "volume", v, sizeof v), "later");
  free (stats);

  /* Destroyed live, the default one too: both go, no EBUSY. */
  for (int i = 0; i < 5; i++) {
    assert_int_equal (zvol_exports_destroy (ex, i % 2 ? "later" : "dflt"),
                      0);
    assert_int_equal (zvol_volume_create (k->ks_pool, i % 2 ? "later"
                                          : "dflt", &vp), 0);
  }
  assert_int_equal (zvol_exports_destroy (ex, "dflt"), 0);
  assert_int_equal (zvol_exports_destroy (ex, "later"), 0);
  kst_rounds (&tk, 2);
  snprintf (path, sizeof path, "%s/volumes/later", dir);
  assert_int_equal (stat (path, &st), -1);
  snprintf (path, sizeof path, "%s/volumes/dflt", dir);
  assert_int_equal (stat (path, &st), -1);
  stats = kst_slurp (dir, "stats");
  assert_non_null (stats);
  assert_null (kst_value (stats, "volume", v, sizeof v));
  assert_non_null (kst_value (stats, "pool_name", v, sizeof v));
  free (stats);
  zvol_kstat_stop (ks);
  assert_int_equal (zvol_exports_free (ex), 0);
  snprintf (cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal (system (cmd), 0);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test (test_format_stats),
    cmocka_unit_test (test_format_txgs),
    cmocka_unit_test (test_mkdir),
    cmocka_unit_test (test_default_dir),
    cmocka_unit_test (test_writer),
    cmocka_unit_test (test_writer_volumes),
  };

  return cmocka_run_group_tests (tests, kst_setup, kst_teardown);
}
