/*
 * test_admin.c: the admin command layer (core/admin.c and its commands'
 * files, admin_dataset.c, admin_pool.c, admin_stream.c) and the table of
 * served volumes it acts through (core/exports.c), on the public API: a
 * pool "tank" on a sparse file, commands run as zvoladm would run them.
 */
#include <config.h>

#include <fcntl.h>

#include "testlib.h"

#define MiB (1ull << 20)

static char adm_dev[512];
static zvol_pool_t *adm_pool;
static zvol_exports_t *adm_ex;

static int
adm_setup (void **state)
{
  zvol_pool_config_t pc;
  const char *devs[1] = { tl_path (adm_dev, sizeof adm_dev, "admin.img") };

  tl_test_setup (state);
  if (tl_sparse_file (devs[0], 256 * MiB) != 0)
    return -1;
  tl_pool_cfg (&pc, devs, 1, 0, true);
  pc.pc_name = "tank";
  if (zvol_pool_open (&pc, &adm_pool) < 0)
    return -1;
  adm_ex = zvol_exports_new (adm_pool, NULL);
  return 0;
}

static int
adm_teardown (void **state)
{
  int r = zvol_exports_free (adm_ex);

  (void) state;
  if (zvol_pool_close (adm_pool) < 0)
    r = -1;
  unlink (adm_dev);
  return r < 0 ? -1 : 0;
}

/* Run a command line on the pool, with a stream on fd (-1: none, as
 * zvol_admin_run gives). */
static int
adm_run_io (tl_cmd_out_t *co, const char *line, unsigned flags, int fd)
{
  char buf[1024], *argv[64];
  int argc;
  FILE *out, *err;

  snprintf (buf, sizeof buf, "%s", line);
  argc = tl_argv_split (buf, argv, 64);
  tl_cmd_begin (co, &out, &err);
  zvol_admin_io_t io = {
    .ai_out = out, .ai_err = err, .ai_stream_fd = fd,
    .ai_cancel_fd = { -1, -1 },
  };
  co->co_code = zvol_admin_run_io (adm_ex, argc, argv, flags, &io);
  tl_cmd_end (co, out, err);
  return co->co_code;
}

/* Run a command line on the pool. */
static void
adm_run (tl_cmd_out_t *co, const char *line, unsigned flags)
{
  (void) adm_run_io (co, line, flags, -1);
}

/* Run and expect the exit code; the output is freed. */
static void
adm_expect (const char *line, int code, const char *in_err)
{
  tl_cmd_out_t co;

  adm_run (&co, line, 0);
  if (co.co_code != code || (in_err && strstr (co.co_err, in_err) == NULL))
    fail_msg ("'%s': exit %d (want %d), stderr: %s", line, co.co_code, code,
              co.co_err);
  tl_cmd_free (&co);
}

/* Parse a command line. */
static int
adm_parse (const char *line, zvol_admin_target_t *t, char **errp)
{
  char buf[1024], *argv[64], *e = NULL;
  size_t elen = 0;
  FILE *err = open_memstream (&e, &elen);
  int argc, r;

  snprintf (buf, sizeof buf, "%s", line);
  argc = tl_argv_split (buf, argv, 64);
  r = zvol_admin_parse (argc, argv, t, err);
  fclose (err);
  if (errp)
    *errp = e;
  else
    free (e);
  return r;
}

/* What each command needs before a pool is open, and the usage errors
 * found then. */
static void
test_parse (void **state)
{
  zvol_admin_target_t t;
  char *e;

  (void) state;
  assert_int_equal (adm_parse ("create tank /dev/a /dev/b", &t, NULL), 0);
  assert_true (t.at_make_pool);
  assert_string_equal (t.at_pool, "tank");
  assert_int_equal (t.at_optind, 1);
  assert_int_equal (adm_parse ("create -V 4G -s -d /x -d/y tank/v", &t, NULL),
                    0);
  assert_false (t.at_make_pool);
  assert_false (t.at_readonly);
  assert_string_equal (t.at_pool, "tank");
  assert_int_equal (t.at_ndevs, 2);
  assert_string_equal (t.at_devs[1], "/y");
  assert_int_equal (adm_parse ("list -Hp a b c", &t, NULL), 0);
  assert_true (t.at_readonly);
  assert_int_equal (t.at_optind, 2);
  assert_int_equal (t.at_noperands, 3);
  assert_int_equal (adm_parse ("list", &t, NULL), 0);
  assert_string_equal (t.at_pool, "");
  assert_int_equal (adm_parse ("stats -t tank", &t, NULL), 0);
  assert_true (t.at_readonly);

  static const struct { const char *line, *why; } bad[] = {
    { "frobnicate", "unknown command 'frobnicate'" },
    { "list -x", "unknown option -x" },
    { "create -V", "-V needs a value" },
    { "create -V 1X tank/v", "not a size" },
    { "create -V -1 tank/v", "not a size" },
    { "create -V 99999999999999999999 tank/v", "not a size" },
    { "create -V 1M -s -r 1M tank/v", "exclude each other" },
    { "create -V 1M tank", "is not POOL/VOLUME" },
    { "create -V 1M tank/", "is not POOL/VOLUME" },
    { "create -V 1M /v", "is not POOL/VOLUME" },
    { "create -b 4K tank a", "are for a volume" },
    { "create tank", "create POOL DEV" },
    { "destroy", "destroy [-rRnv] POOL/VOL[@SNAP]" },
    { "destroy tank/a tank/b", "destroy [-rRnv] POOL/VOL[@SNAP]" },
    { "destroy -x tank/a", "unknown option -x" },
    { "destroy -r tank/a@s", "a volume, with its snapshots" },
    { "snapshot", "snapshot POOL/VOL@SNAP" },
    { "snapshot tank/a", "is not POOL/VOLUME@SNAPSHOT" },
    { "snapshot tank/@s", "is not POOL/VOLUME@SNAPSHOT" },
    { "snapshot tank/a@", "is not POOL/VOLUME@SNAPSHOT" },
    { "rollback tank/a", "is not POOL/VOLUME@SNAPSHOT" },
    { "clone tank/a@s", "clone [-r RESERVATION]" },
    { "clone tank/a@s tank/b@c", "is not POOL/VOLUME" },
    { "clone -r 1Q tank/a@s tank/b", "not a size" },
    { "diff tank/a tank/a", "is not POOL/VOLUME@SNAPSHOT" },
    { "list -t bogus", "volume, snapshot or all" },
    { "list -o name,bogus", "comma-separated" },
    { "status a/b", "is not a pool name" },
    { "status a b", "status [POOL]" },
    { "list a/b", "is not a pool name" },
    { "stats", "stats [-t]" },
    { "stats -t tank/v", "the txg history is the pool's" },
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    if (adm_parse (bad[i].line, &t, &e) != ZVOL_ADMIN_USAGE
        || strstr (e, bad[i].why) == NULL || strstr (e, "usage:") == NULL)
      fail_msg ("'%s': want a usage error saying '%s', got: %s",
                bad[i].line, bad[i].why, e);
    free (e);
  }
  /* Bytes from a socket: an option letter past ASCII, a lone '-', no
   * argv at all. */
  {
    char *argv[] = { "list", "-\xff", NULL }, *e2 = NULL;
    size_t n = 0;
    FILE *err = open_memstream (&e2, &n);
    assert_int_equal (zvol_admin_parse (2, argv, &t, err), ZVOL_ADMIN_USAGE);
    assert_int_equal (zvol_admin_parse (0, NULL, &t, err), ZVOL_ADMIN_USAGE);
    fclose (err);
    assert_non_null (strstr (e2, "unknown option -\\xff"));
    free (e2);
  }
  assert_int_equal (adm_parse ("list - tank", &t, NULL), 0);
  assert_int_equal (t.at_noperands, 2);
  assert_int_equal (adm_parse ("list a\tb", &t, NULL), ZVOL_ADMIN_USAGE);
  assert_int_equal (adm_parse ("list -- tank", &t, NULL), 0);
  assert_int_equal (t.at_noperands, 1);
}

/* create, list (both forms), destroy, on an open pool. */
static void
test_create_list_destroy (void **state)
{
  tl_cmd_out_t co;

  (void) state;
  adm_expect ("create -V 64M tank/db", 0, NULL);
  adm_expect ("create -V 1T -b 4K -s tank/scratch", 0, NULL);
  adm_expect ("create -V 32M -r16M tank/web", 0, NULL);
  adm_run (&co, "list -H -p", 0);
  assert_int_equal (co.co_code, 0);
  assert_non_null (strstr (co.co_out, "tank/db\t67108864\t"));
  assert_non_null (strstr (co.co_out, "tank/scratch\t0\t"));
  assert_non_null (strstr (co.co_out, "\t1099511627776\n"));
  assert_non_null (strstr (co.co_out, "tank/web\t16777216\t"));
  assert_null (strstr (co.co_out, "NAME"));
  assert_int_equal (co.co_errlen, 0);
  tl_cmd_free (&co);
  adm_run (&co, "list tank", 0);
  assert_int_equal (co.co_code, 0);
  assert_true (strncmp (co.co_out, "NAME  ", 6) == 0);
  assert_non_null (strstr (co.co_out, "tank/db                      64.0M"));
  tl_cmd_free (&co);
  /* A later pool of one listing: no header. */
  adm_run (&co, "list tank", ZVOL_ADMIN_NOHEADER);
  assert_true (strncmp (co.co_out, "tank/", 5) == 0);
  tl_cmd_free (&co);
  adm_expect ("destroy tank/web", 0, NULL);
  adm_run (&co, "list -H", 0);
  assert_null (strstr (co.co_out, "tank/web"));
  tl_cmd_free (&co);
  adm_expect ("destroy tank/scratch", 0, NULL);
  adm_expect ("destroy tank/db", 0, NULL);
}

/* Failures: the engine's reason reaches the command's error stream
 * (and the log), the exit code is 1. */
static void
test_failures (void **state)
{
  tl_cmd_out_t co;

  (void) state;
  tl_log_reset (true);
  adm_expect ("create -V 8M tank/a", 0, NULL);
  adm_expect ("create -V 8M tank/a", 1,
              "zvoladm: pool 'tank' has a volume 'a' already");
  assert_true (tl_log_has ("has a volume 'a' already"));
  adm_expect ("create -V 8M tank/a@b", 1, "is invalid");
  adm_expect ("create -V 2T tank/huge", 1, "no room for volume 'huge'");
  adm_expect ("destroy tank/nosuch", 1, "has no volume 'nosuch'");
  adm_expect ("destroy other/a", 1, "other is not this pool (tank)");
  adm_expect ("list other", 1, "other is not this pool (tank)");
  adm_expect ("stats other", 1, "other is not this pool (tank)");
  adm_expect ("stats tank/nosuch", 1, "has no volume 'nosuch'");
  adm_expect ("create tank /dev/null", 1, "a pool is made on its devices");
  adm_expect ("nothing", 2, "unknown command");
  /* The tap is off after the command: a later message is not copied. */
  adm_run (&co, "list -H", 0);
  assert_int_equal (co.co_code, 0);
  assert_int_equal (co.co_errlen, 0);
  tl_cmd_free (&co);
  adm_expect ("destroy tank/a", 0, NULL);
}

/* stats: the kstat tables, the pool's, a volume's, the txg history. */
static void
test_stats (void **state)
{
  tl_cmd_out_t co;
  char *want;

  (void) state;
  adm_expect ("create -V 8M tank/s", 0, NULL);
  adm_run (&co, "stats tank", 0);
  assert_int_equal (co.co_code, 0);
  assert_true (strncmp (co.co_out, "pool_name tank\n", 15) == 0);
  assert_null (strstr (co.co_out, "\nvolume "));
  tl_cmd_free (&co);
  adm_run (&co, "stats tank/s", 0);
  assert_int_equal (co.co_code, 0);
  assert_non_null (strstr (co.co_out, "\nvolume s\nvolsize 8388608\n"));
  /* The command held the volume only while it ran. */
  assert_int_equal (zvol_exports_holds (adm_ex, "s"), 0);
  tl_cmd_free (&co);
  adm_run (&co, "stats -t tank", 0);
  assert_int_equal (co.co_code, 0);
  want = zvol_format_txgs (adm_pool);
  assert_true (strncmp (co.co_out, want, 20) == 0);
  free (want);
  tl_cmd_free (&co);
  adm_expect ("destroy tank/s", 0, NULL);
}

/* The table: a hold opens, destroy of a held volume is refused, a hold
 * of a destroyed one fails. */
static void
test_exports (void **state)
{
  zvol_t *zv, *zv2;
  char big[200];

  (void) state;
  tl_log_reset (true);
  adm_expect ("create -V 8M tank/e", 0, NULL);
  assert_int_equal (zvol_exports_hold (adm_ex, "e", &zv), 0);
  assert_int_equal (zvol_exports_hold (adm_ex, "e", &zv2), 0);
  assert_ptr_equal (zv, zv2);
  assert_int_equal (zvol_exports_holds (adm_ex, "e"), 2);
  assert_int_equal (zvol_exports_destroy (adm_ex, "e"), -EBUSY);
  assert_true (tl_log_has ("volume 'e' of pool 'tank' is in use (held 2 times"));
  adm_expect ("destroy tank/e", 1, "is in use");
  zvol_exports_rele (adm_ex, zv2);
  assert_int_equal (zvol_exports_destroy (adm_ex, "e"), -EBUSY);
  zvol_exports_rele (adm_ex, zv);
  /* Open at no holds: closed, then destroyed. */
  assert_int_equal (zvol_exports_destroy (adm_ex, "e"), 0);
  assert_int_equal (zvol_exports_hold (adm_ex, "e", &zv), -ENOENT);
  assert_null (zv);
  memset (big, 'x', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  assert_int_equal (zvol_exports_hold (adm_ex, big, &zv), -ENOENT);
  assert_true (tl_log_has ("has no volume 'xxxx"));
  assert_int_equal (zvol_exports_hold (adm_ex, "nosuch", &zv), -ENOENT);
  /* A name that failed leaves no entry: destroying it says no volume. */
  assert_int_equal (zvol_exports_destroy (adm_ex, "nosuch"), -ENOENT);
  /* A new volume is held (opened) on its first hold. */
  adm_expect ("create -V 8M tank/f", 0, NULL);
  assert_int_equal (zvol_exports_hold (adm_ex, "f", &zv), 0);
  assert_string_equal (zvol_name (zv), "f");
  zvol_exports_rele (adm_ex, zv);
  /* Holds whose connections ended without a release (nbdkit quitting)
   * are forgotten: the volume is free again, and a free would not
   * wait for them. */
  assert_int_equal (zvol_exports_hold (adm_ex, "f", &zv), 0);
  assert_int_equal (zvol_exports_hold (adm_ex, "f", &zv2), 0);
  assert_int_equal (zvol_exports_forget_holds (adm_ex), 2);
  assert_int_equal (zvol_exports_holds (adm_ex, "f"), 0);
  assert_int_equal (zvol_exports_forget_holds (adm_ex), 0);
  assert_int_equal (zvol_exports_open_all (adm_ex), 0);
  adm_expect ("destroy tank/f", 0, NULL);
}

static size_t
adm_ndatasets (void)
{
  return zvol_dataset_list (adm_pool, ZVOL_LIST_VOLUMES | ZVOL_LIST_SNAPSHOTS,
                            NULL, 0);
}

/* destroy -R: a snapshot with its clones, their snapshots and clones,
 * dependents first; -n and -v say which; one held dataset anywhere in
 * the set refuses it all. */
static void
test_destroy_recursive (void **state)
{
  zvol_dsname_t names[8];
  tl_cmd_out_t co;
  size_t n;
  zvol_t *zv;

  (void) state;
  tl_log_reset (true);
  adm_expect ("create -V 8M -s tank/v", 0, NULL);
  adm_expect ("create -V 8M -s tank/other", 0, NULL);
  adm_expect ("snapshot tank/v@1 tank/v@2", 0, NULL);
  adm_expect ("clone tank/v@1 tank/c1", 0, NULL);
  adm_expect ("snapshot tank/c1@x", 0, NULL);
  adm_expect ("clone tank/c1@x tank/c2", 0, NULL);
  adm_expect ("clone tank/v@2 tank/c3", 0, NULL);
  assert_int_equal (adm_ndatasets (), 8);

  /* Without -R: refused, naming the clone and the option; nothing goes
   * (-r checks the whole set first). */
  adm_expect ("destroy tank/v@1", 1, "snapshot 'v@1' has a clone, volume "
              "'c1': destroy the clone first, or destroy with its clones "
              "(-R)");
  adm_expect ("destroy -r tank/v", 1, "has a clone, volume 'c1'");
  adm_expect ("destroy tank/v", 1, "has snapshots");
  assert_int_equal (adm_ndatasets (), 8);

  /* The engine's plan: post-order, the count even without room. */
  assert_int_equal (zvol_destroy_plan (adm_pool, "v", ZVOL_DESTROY_CLONES,
                                       NULL, 0, &n), 0);
  assert_int_equal (n, 7);
  assert_int_equal (zvol_destroy_plan (adm_pool, "v", ZVOL_DESTROY_CLONES,
                                       names, 8, &n), 0);
  assert_int_equal (n, 7);
  {
    static const char *order[] = { "c2", "c1@x", "c1", "v@1", "c3", "v@2",
                                   "v" };
    for (size_t i = 0; i < 7; i++)
      assert_string_equal (names[i].dn_name, order[i]);
  }
  assert_int_equal (zvol_destroy_plan (adm_pool, "other", 0, names, 8, &n),
                    0);
  assert_int_equal (n, 1);
  assert_int_equal (zvol_destroy_plan (adm_pool, "v@nosuch",
                                       ZVOL_DESTROY_CLONES, names, 8, &n),
                    -ENOENT);
  assert_int_equal (zvol_destroy_plan (adm_pool, "nosuch", 0, names, 8, &n),
                    -ENOENT);

  /* -n: what would go, nothing gone. */
  adm_run (&co, "destroy -R -n tank/v@1", 0);
  assert_int_equal (co.co_code, 0);
  assert_string_equal (co.co_out, "would destroy tank/c2\n"
                       "would destroy tank/c1@x\nwould destroy tank/c1\n"
                       "would destroy tank/v@1\n");
  tl_cmd_free (&co);
  assert_int_equal (adm_ndatasets (), 8);

  /* A client on c2, deepest in the tree: all refused, -n too. */
  assert_int_equal (zvol_exports_hold (adm_ex, "c2", &zv), 0);
  adm_expect ("destroy -R tank/v@1", 1, "'c2' of pool 'tank' is in use "
              "(held 1 time");
  adm_expect ("destroy -Rn tank/v", 1, "nothing destroyed");
  assert_int_equal (adm_ndatasets (), 8);
  /* A snapshot read by a client counts as well. */
  zvol_exports_rele (adm_ex, zv);
  assert_int_equal (zvol_exports_hold (adm_ex, "c1@x", &zv), 0);
  adm_expect ("destroy -R tank/v@1", 1, "'c1@x' of pool 'tank' is in use");
  zvol_exports_rele (adm_ex, zv);
  assert_int_equal (adm_ndatasets (), 8);

  /* -v: says it, does it; v@2 and its clone stay. */
  adm_run (&co, "destroy -Rv tank/v@1", 0);
  assert_int_equal (co.co_code, 0);
  assert_non_null (strstr (co.co_out, "will destroy tank/c2\nwill destroy "
                           "tank/c1@x\nwill destroy tank/c1\nwill destroy "
                           "tank/v@1\n"));
  tl_cmd_free (&co);
  assert_int_equal (adm_ndatasets (), 4);
  assert_int_equal (zvol_exports_hold (adm_ex, "c1", &zv), -ENOENT);
  adm_run (&co, "list -t all -H -o name,origin", 0);
  assert_string_equal (co.co_out, "tank/v\t-\ntank/v@2\t-\n"
                       "tank/other\t-\ntank/c3\ttank/v@2\n");
  tl_cmd_free (&co);
  /* A served volume in the set (open, no holds) is closed and goes. */
  assert_int_equal (zvol_exports_open_all (adm_ex), 0);
  adm_expect ("destroy -R tank/v", 0, NULL);
  assert_int_equal (adm_ndatasets (), 1);
  /* A volume alone: -R on it is a plain destroy. */
  adm_expect ("destroy -R tank/other", 0, NULL);
  assert_int_equal (adm_ndatasets (), 0);
  adm_expect ("destroy -R tank/other", 1, "has no volume 'other'");
}

static zvol_t *late_zv;

/* A connection on its way to its close: the hold ends a bit later. */
static void *
late_rele (void *arg)
{
  (void) arg;
  usleep (300 * 1000);
  zvol_exports_rele (adm_ex, late_zv);
  return NULL;
}

/* Freeing the table waits for the last hold to end, then closes. */
static void
test_free_waits (void **state)
{
  pthread_t th;

  (void) state;
  adm_expect ("create -V 8M tank/w", 0, NULL);
  assert_int_equal (zvol_exports_hold (adm_ex, "w", &late_zv), 0);
  assert_int_equal (pthread_create (&th, NULL, late_rele, NULL), 0);
  assert_int_equal (zvol_exports_free (adm_ex), 0);
  assert_int_equal (pthread_join (th, NULL), 0);
  adm_ex = zvol_exports_new (adm_pool, NULL);
  adm_expect ("destroy tank/w", 0, NULL);
}

/* The usage text lists every command. */
static void
test_usage (void **state)
{
  char *u = NULL;
  size_t n = 0;
  FILE *fp = open_memstream (&u, &n);

  (void) state;
  zvol_admin_print_usage (fp);
  fclose (fp);
  assert_non_null (strstr (u, "  zvoladm create POOL DEV...\n"));
  assert_non_null (strstr (u, "  zvoladm create -V SIZE"));
  assert_non_null (strstr (u, "  zvoladm destroy"));
  assert_non_null (strstr (u, "  zvoladm list [-H] [-p]"));
  assert_non_null (strstr (u, "  zvoladm stats [-t]"));
  free (u);
}

/* A thread that copies a file into a pipe, then closes it. */
typedef struct adm_feed {
  const char *af_path;
  int af_fd;
} adm_feed_t;

static void *
adm_feed (void *arg)
{
  adm_feed_t *f = arg;
  static uint8_t buf[65536];
  int in = open (f->af_path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  TL_CHECK (in >= 0);
  while ((n = read (in, buf, sizeof buf)) > 0)
    TL_CHECK (write (f->af_fd, buf, (size_t) n) == n);
  close (in);
  close (f->af_fd);
  return NULL;
}

/* A command line with a stream on fd. */
static int
adm_run_fd (tl_cmd_out_t *co, const char *line, int fd)
{
  return adm_run_io (co, line, 0, fd);
}

/* send and receive as commands: what the tool hands them (stdout,
 * stdin), a full and an incremental stream through a pipe into other
 * volumes, the same bytes; -v's progress on err; a stream the wrong way
 * or missing refused; check on an open pool: the live check. */
static void
test_streams (void **state)
{
  zvol_admin_target_t t;
  tl_cmd_out_t co;
  char path[512];
  int fd, p[2];
  zvol_t *zv;
  static uint8_t a[MiB], b[MiB];

  (void) state;
  tl_log_reset (true);
  assert_int_equal (adm_parse ("send -v -i tank/v@1 tank/v@2", &t, NULL), 0);
  assert_int_equal (t.at_stream, ZVOL_ADMIN_STREAM_OUT);
  assert_true (t.at_readonly);
  assert_string_equal (t.at_pool, "tank");
  assert_int_equal (adm_parse ("receive tank/w", &t, NULL), 0);
  assert_int_equal (t.at_stream, ZVOL_ADMIN_STREAM_IN);
  assert_false (t.at_readonly);
  assert_int_equal (adm_parse ("list", &t, NULL), 0);
  assert_int_equal (t.at_stream, 0);
  assert_int_equal (adm_parse ("send tank/v", &t, NULL), ZVOL_ADMIN_USAGE);
  assert_int_equal (adm_parse ("send -i other/v@1 tank/v@2", &t, NULL),
                    ZVOL_ADMIN_USAGE);
  assert_int_equal (adm_parse ("receive", &t, NULL), ZVOL_ADMIN_USAGE);
  assert_int_equal (adm_parse ("check -v tank", &t, NULL), 0);

  adm_expect ("create -V 4M tank/v", 0, NULL);
  assert_int_equal (zvol_exports_hold (adm_ex, "v", &zv), 0);
  memset (a, 0x3c, sizeof a);
  assert_int_equal (zvol_write (zv, a, MiB, MiB, 0), 0);
  zvol_exports_rele (adm_ex, zv);
  adm_expect ("snapshot tank/v@1", 0, NULL);
  tl_path (path, sizeof path, "full.zs");
  fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_int_equal (adm_run_fd (&co, "send -v tank/v@1", fd), 0);
  assert_non_null (strstr (co.co_err, "zvoladm: send: 1 of 1 MiB (100%)\n"));
  tl_cmd_free (&co);
  assert_int_equal (adm_run_fd (&co, "receive tank/w", fd), 1);
  assert_non_null (strstr (co.co_err, "not open for reading"));
  tl_cmd_free (&co);
  close (fd);
  adm_expect ("receive tank/w", 1, "receive: no stream");
  fd = open (path, O_RDONLY | O_CLOEXEC);
  assert_int_equal (adm_run_fd (&co, "receive tank/w", fd), 0);
  tl_cmd_free (&co);
  close (fd);

  /* An incremental through a pipe, sent by a thread of the pipe's own. */
  assert_int_equal (zvol_exports_hold (adm_ex, "v", &zv), 0);
  memset (a, 0x5d, sizeof a);
  assert_int_equal (zvol_write (zv, a, 2 * MiB, MiB, 0), 0);
  zvol_exports_rele (adm_ex, zv);
  adm_expect ("snapshot tank/v@2", 0, NULL);
  tl_path (path, sizeof path, "inc.zs");
  fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_int_equal (adm_run_fd (&co, "send -i tank/v@1 tank/v@2", fd), 0);
  tl_cmd_free (&co);
  close (fd);
  assert_int_equal (pipe2 (p, O_CLOEXEC), 0);
  {
    pthread_t th;
    adm_feed_t f = { .af_path = path, .af_fd = p[1] };
    assert_int_equal (pthread_create (&th, NULL, adm_feed, &f), 0);
    assert_int_equal (adm_run_fd (&co, "receive -v tank/w", p[0]), 0);
    assert_int_equal (pthread_join (th, NULL), 0);
  }
  close (p[0]);
  assert_non_null (strstr (co.co_err, "zvoladm: receive: "));
  tl_cmd_free (&co);
  assert_int_equal (zvol_exports_hold (adm_ex, "w", &zv), 0);
  assert_int_equal (zvol_read (zv, b, 2 * MiB, MiB), 0);
  assert_memory_equal (a, b, MiB);
  memset (a, 0x3c, sizeof a);
  assert_int_equal (zvol_read (zv, b, MiB, MiB), 0);
  assert_memory_equal (a, b, MiB);
  /* A held target: refused, in use. */
  fd = open (path, O_RDONLY | O_CLOEXEC);
  assert_int_equal (adm_run_fd (&co, "receive tank/w", fd), 1);
  assert_non_null (strstr (co.co_err, "is in use"));
  tl_cmd_free (&co);
  close (fd);
  zvol_exports_rele (adm_ex, zv);

  /* check on an open pool is the live check: the same report as
   * offline, and its progress (-v) on err without a progress sink. */
  adm_run (&co, "check -v tank", 0);
  if (co.co_code != 0 || strstr (co.co_out, "No problems found.") == NULL
      || strstr (co.co_out, "tank: ") == NULL
      || strstr (co.co_err, "check: ") == NULL)
    fail_msg ("check -v tank: exit %d, stdout: %s, stderr: %s", co.co_code,
              co.co_out, co.co_err);
  tl_cmd_free (&co);
  adm_expect ("check other", 1, "not this pool");
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_parse),
    tl_test (test_usage),
    cmocka_unit_test_setup_teardown (test_create_list_destroy, adm_setup,
                                     adm_teardown),
    cmocka_unit_test_setup_teardown (test_failures, adm_setup,
                                     adm_teardown),
    cmocka_unit_test_setup_teardown (test_stats, adm_setup, adm_teardown),
    cmocka_unit_test_setup_teardown (test_streams, adm_setup, adm_teardown),
    cmocka_unit_test_setup_teardown (test_exports, adm_setup, adm_teardown),
    cmocka_unit_test_setup_teardown (test_free_waits, adm_setup,
                                     adm_teardown),
    cmocka_unit_test_setup_teardown (test_destroy_recursive, adm_setup,
                                     adm_teardown),
  };

  return tl_main (tests, "admin", NULL);
}
