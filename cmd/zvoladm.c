/*
 * zvoladm.c: the admin tool.  The commands themselves (their options,
 * checks and output) are the engine's command layer (zvol_admin_*, the
 * same code a server runs for its control socket); this program finds
 * the pool and chooses the path:
 *
 *   live      the pool's server answers on its control socket (-S
 *             SOCKET, $ZVOLADM_SOCKET, else where the server puts it by
 *             default: zvol_runtime_path (POOL, "control")): the command
 *             line goes there and the server runs it on its open pool;
 *   offline   nothing answers: the pool is imported from its devices
 *             (read-only for a command that only reads) and the command
 *             runs here, printing exactly what the server would.
 *
 * Where a pool's devices are: -d DEV (repeatable) names them; without it
 * the pool cache, a text file of "POOL DEV..." lines that create writes
 * ($ZVOLADM_CACHE, else $XDG_CONFIG_HOME/zvoladm/pools, else
 * ~/.config/zvoladm/pools), as zpool.cache.  "create POOL DEV..." makes a
 * pool, offline.  "send" and "receive" take their stream on stdout or
 * stdin, live too: the descriptor goes to the server with the command
 * (zvol_ctl_call_fd), which reads or writes it itself and sends its
 * progress lines back as they come.  "check POOL" (the whole pool walked
 * and compared with its space maps, as zdb -b) goes live too when a
 * server answers (it checks its last committed txg, holding frees back
 * meanwhile: check.c); else it runs here, on the devices (za_check).
 * "scrub POOL" is the check that repairs what it can (scan.c), live or
 * here alike.  Exit codes: 0 done, 1 failed (check: found problems;
 * scrub: problems it could not repair), 2 usage.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <getopt.h>
#include <sys/stat.h>

#include "zvol.h"

/* Set while the command layer runs here: it shows the engine's
 * messages on stderr itself. */
static bool za_in_command;

/* Engine messages: errors and warnings to stderr, the rest only with
 * ZVOLADM_DEBUG set. */
static void
za_log (zvol_log_level_t level, const char *msg)
{
  if ((level >= ZVOL_LOG_WARN && !za_in_command)
      || getenv ("ZVOLADM_DEBUG") != NULL)
    fprintf (stderr, "zvoladm: %s\n", msg);
}

static void __attribute__ ((format (printf, 1, 2)))
za_err (const char *fmt, ...)
{
  va_list ap;

  fputs ("zvoladm: ", stderr);
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
}

static const char za_check_usage[] =
  "  zvoladm check [-v] [-d DEV]... POOL\n"
  "  zvoladm scrub [-v] [-w | -p | -s] [-d DEV]... POOL\n";

static void
za_print_usage (FILE *fp)
{
  fputs ("zvoladm [-S SOCKET] COMMAND ...; ", fp);
  zvol_admin_print_usage (fp);
}

static int
za_usage_error (const char *why)
{
  if (why)
    za_err ("%s", why);
  fputs ("usage:\n", stderr);
  fputs (za_check_usage, stderr);
  return ZVOL_ADMIN_USAGE;
}

/* ---- the pool cache ---- */

static char *
za_cache_path (void)
{
  const char *e = getenv ("ZVOLADM_CACHE"), *x, *h;
  char *p = NULL;

  if (e && *e)
    return strdup (e);
  x = getenv ("XDG_CONFIG_HOME");
  h = getenv ("HOME");
  if (x && *x) {
    if (asprintf (&p, "%s/zvoladm/pools", x) < 0)
      p = NULL;
  }
  else if (h && *h) {
    if (asprintf (&p, "%s/.config/zvoladm/pools", h) < 0)
      p = NULL;
  }
  return p;
}

/* The devices of pool 'name' from the cache: how many (0: not there). */
static unsigned
za_cache_lookup (const char *name, char devs[][4096], unsigned max)
{
  char *path = za_cache_path ();
  FILE *f = path ? fopen (path, "r") : NULL;
  char line[ZVOL_MAX_DEVS * 4100 + 80];
  unsigned n = 0;

  free (path);
  if (f == NULL)
    return 0;
  while (n == 0 && fgets (line, sizeof line, f) != NULL) {
    char *save = NULL, *tok = strtok_r (line, " \t\n", &save);
    if (tok == NULL || strcmp (tok, name) != 0)
      continue;
    while ((tok = strtok_r (NULL, " \t\n", &save)) != NULL && n < max)
      snprintf (devs[n++], sizeof devs[0], "%s", tok);
  }
  fclose (f);
  return n;
}

/* Record a new pool (a line replacing any of the same name). */
static void
za_cache_add (const char *name, const char *const *devs, unsigned n)
{
  char *path = za_cache_path (), *tmp = NULL, *dir;
  char line[ZVOL_MAX_DEVS * 4100 + 80];
  FILE *in, *out;

  if (path == NULL || asprintf (&tmp, "%s.tmp", path) < 0) {
    za_err ("no pool cache (set ZVOLADM_CACHE or HOME): name the devices "
            "with -d from now on");
    free (path);
    return;
  }
  dir = strdup (path);
  for (char *s = dir ? strchr (dir + 1, '/') : NULL; s; s = strchr (s + 1, '/')) {
    *s = '\0';
    (void) mkdir (dir, 0755);
    *s = '/';
  }
  free (dir);
  out = fopen (tmp, "w");
  if (out == NULL) {
    za_err ("%s: %s (the pool was made; name its devices with -d)", tmp,
            strerror (errno));
    goto done;
  }
  in = fopen (path, "r");
  while (in && fgets (line, sizeof line, in) != NULL) {
    size_t l = strlen (name);
    if (!(strncmp (line, name, l) == 0 && (line[l] == ' ' || line[l] == '\t')))
      fputs (line, out);
  }
  if (in)
    fclose (in);
  fputs (name, out);
  for (unsigned i = 0; i < n; i++)
    fprintf (out, " %s", devs[i]);
  fputc ('\n', out);
  if (fclose (out) != 0 || rename (tmp, path) != 0)
    za_err ("%s: %s", path, strerror (errno));
 done:
  free (tmp);
  free (path);
}

/* ---- opening ---- */

/* Import pool 'name' (NULL: whatever the -d devices hold) from -d or the
 * cache. */
static int
za_open (const char *name, const zvol_admin_target_t *t, bool readonly,
         zvol_pool_t **pp)
{
  static char cached[ZVOL_MAX_DEVS][4096];
  zvol_pool_config_t pc;
  unsigned n = t->at_ndevs;
  int r;

  zvol_pool_config_init (&pc);
  if (n == 0) {
    n = name ? za_cache_lookup (name, cached, ZVOL_MAX_DEVS) : 0;
    if (n == 0) {
      za_err ("pool %s is not in the pool cache and no server of it "
              "answers: name its devices with -d", name ? name : "?");
      return -ENOENT;
    }
    for (unsigned i = 0; i < n; i++)
      pc.pc_devices[i] = cached[i];
  }
  else
    for (unsigned i = 0; i < n; i++)
      pc.pc_devices[i] = t->at_devs[i];
  pc.pc_ndevices = n;
  pc.pc_readonly = readonly;
  r = zvol_pool_open (&pc, pp);
  if (r < 0)
    return r;
  if (name && strcmp (zvol_pool_name (*pp), name) != 0) {
    za_err ("the devices hold pool %s, not %s", zvol_pool_name (*pp), name);
    zvol_pool_close (*pp);
    return -EINVAL;
  }
  return 0;
}

/* create POOL DEV...: make the pool, record it in the cache. */
static int
za_make_pool (int argc, char *const *argv)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p;

  zvol_pool_config_init (&pc);
  pc.pc_create = true;
  pc.pc_name = argv[0];
  for (int i = 1; i < argc; i++)
    pc.pc_devices[i - 1] = argv[i];
  pc.pc_ndevices = (unsigned) argc - 1;
  if (zvol_pool_open (&pc, &p) < 0 || zvol_pool_close (p) < 0)
    return ZVOL_ADMIN_FAIL;
  za_cache_add (argv[0], (const char *const *) argv + 1, (unsigned) argc - 1);
  return ZVOL_ADMIN_OK;
}

/* Run one command line on pool 'name' (NULL: the -d devices' pool):
 * through its server's control socket if one answers, else here. */
static int
za_run (const char *name, const char *sock, const zvol_admin_target_t *t,
        int argc, char *const *argv, unsigned flags)
{
  char *path = sock ? strdup (sock)
    : name ? zvol_runtime_path (name, "control") : NULL;
  int stream = t->at_stream == ZVOL_ADMIN_STREAM_OUT ? STDOUT_FILENO
    : t->at_stream == ZVOL_ADMIN_STREAM_IN ? STDIN_FILENO : -1;
  zvol_admin_io_t io = {
    .ai_out = stdout, .ai_err = stderr, .ai_stream_fd = stream,
    .ai_cancel_fd = { -1, -1 },
  };
  zvol_exports_t *ex;
  zvol_pool_t *p;
  int r, code;

  if (path) {
    r = zvol_ctl_call_fd (path, argc, argv, flags, stream, stdout, stderr,
                          &code);
    if (r == 0) {
      free (path);
      return code;
    }
    if (sock || (r != -ENOENT && r != -ECONNREFUSED)) {
      if (r != -EPROTO && r != -E2BIG)
        za_err ("control socket %s: %s%s", path, strerror (-r),
                r == -ENOENT || r == -ECONNREFUSED
                ? " (is the server running?)" : "");
      free (path);
      return ZVOL_ADMIN_FAIL;
    }
    free (path);
  }
  /* check and scrub run here, on the devices (za_check), not on an
   * open pool. */
  if (strcmp (t->at_cmd, "check") == 0 || strcmp (t->at_cmd, "scrub") == 0)
    return -ENOENT;
  if (za_open (name, t, t->at_readonly, &p) < 0)
    return ZVOL_ADMIN_FAIL;
  ex = zvol_exports_new (p, NULL);
  za_in_command = true;
  code = zvol_admin_run_io (ex, argc, argv, flags, &io);
  za_in_command = false;
  if ((zvol_exports_free (ex) < 0 || zvol_pool_close (p) < 0)
      && code == ZVOL_ADMIN_OK)
    code = ZVOL_ADMIN_FAIL;
  return code;
}

/* list naming no pool or several: once per pool (those named, or every
 * pool of the cache), the header only before the first. */
static int
za_list_each (const char *sock, const zvol_admin_target_t *t, int argc,
              char **argv)
{
  char **av = calloc ((size_t) t->at_optind + 2, sizeof *av);
  unsigned flags = 0;
  int rc = ZVOL_ADMIN_OK;

  if (av == NULL) {
    za_err ("out of memory");
    return ZVOL_ADMIN_FAIL;
  }
  memcpy (av, argv, (size_t) t->at_optind * sizeof *av);
  if (t->at_noperands > 0)
    for (int i = t->at_optind; i < argc; i++, flags = ZVOL_ADMIN_NOHEADER) {
      av[t->at_optind] = argv[i];
      if (za_run (argv[i], sock, t, t->at_optind + 1, av, flags) != 0)
        rc = ZVOL_ADMIN_FAIL;
    }
  else {
    char *path = za_cache_path ();
    FILE *f = path ? fopen (path, "r") : NULL;
    char line[ZVOL_MAX_DEVS * 4100 + 80];
    free (path);
    while (f && fgets (line, sizeof line, f) != NULL) {
      char *save = NULL, *name = strtok_r (line, " \t\n", &save);
      if (name == NULL)
        continue;
      av[t->at_optind] = name;
      if (za_run (name, sock, t, t->at_optind + 1, av, flags) != 0)
        rc = ZVOL_ADMIN_FAIL;
      flags = ZVOL_ADMIN_NOHEADER;
    }
    if (f)
      fclose (f);
    if (flags == 0)
      za_err ("no pool in the pool cache (zvoladm create POOL DEV... makes "
              "one; -d DEV names a pool's devices)");
  }
  free (av);
  return rc;
}

/* ---- check ---- */

typedef struct za_check {
  struct timespec c_last;
} za_check_t;

/* A progress line a second at most, as zpool scrub and qemu-img check
 * show it: bytes read of the total, and the share. */
static void
za_check_progress (void *arg, const char *what, uint64_t done,
                   uint64_t total)
{
  za_check_t *c = arg;
  struct timespec now;
  char line[160];

  clock_gettime (CLOCK_MONOTONIC, &now);
  if (done < total && now.tv_sec - c->c_last.tv_sec < 1)
    return;
  c->c_last = now;
  zvol_check_progress_line (line, sizeof line, what, done, total);
  fputs (line, stderr);
}

/* zvoladm check and scrub offline (they import the pool themselves,
 * read-only, and walk every tree; the scrub rewrites damaged copies in
 * place and nothing else), so they stay here, outside the command layer
 * that runs on an open pool. */
static int
za_check (int argc, char **argv)
{
  bool scrub = strcmp (argv[0], "scrub") == 0;
  const char *devs[ZVOL_MAX_DEVS];
  static char cached[ZVOL_MAX_DEVS][4096];
  za_check_t c = { 0 };
  zvol_check_printer_t pr = { .cp_out = stdout, .cp_scrub = scrub };
  zvol_check_report_t rep = {
    .cr_problem = zvol_check_print_problem, .cr_problem_arg = &pr,
  };
  bool progress = isatty (STDERR_FILENO);
  zvol_pool_config_t pc;
  const char *name;
  unsigned n = 0;
  int ch, r;

  while ((ch = getopt (argc, argv, scrub ? "+vwpsd:" : "+vd:")) != -1)
    switch (ch) {
    case 'v': progress = true; break;
    case 'w': break;            /* offline the scrub is always waited for */
    case 'p': case 's':
      za_err ("scrub -%c: no server serves the pool, so no scrub runs in "
              "the background to %s", ch, ch == 'p' ? "pause" : "cancel");
      return ZVOL_ADMIN_FAIL;
    case 'd':
      if (n >= ZVOL_MAX_DEVS)
        return za_usage_error ("too many -d");
      devs[n++] = optarg;
      break;
    default:
      return za_usage_error (NULL);
    }
  if (argc - optind != 1)
    return za_usage_error (scrub ? "scrub POOL" : "check POOL");
  name = argv[optind];
  zvol_pool_config_init (&pc);
  if (n == 0) {
    n = za_cache_lookup (name, cached, ZVOL_MAX_DEVS);
    if (n == 0) {
      za_err ("pool %s is not in the pool cache: name its devices with -d",
              name);
      return ZVOL_ADMIN_FAIL;
    }
    for (unsigned i = 0; i < n; i++)
      pc.pc_devices[i] = cached[i];
  }
  else
    for (unsigned i = 0; i < n; i++)
      pc.pc_devices[i] = devs[i];
  pc.pc_ndevices = n;
  if (progress) {
    pc.pc_progress = za_check_progress;
    pc.pc_progress_arg = &c;
  }
  r = (scrub ? zvol_pool_scrub : zvol_pool_check) (&pc, &rep);
  if (r < 0) {
    za_err ("pool %s cannot be %s: it does not import (%s)", name,
            scrub ? "scrubbed" : "checked", strerror (-r));
    return ZVOL_ADMIN_FAIL;
  }
  return zvol_check_print_summary (&pr, name, &rep) ? 0 : ZVOL_ADMIN_FAIL;
}

int
main (int argc, char **argv)
{
  const char *sock = getenv ("ZVOLADM_SOCKET");
  zvol_admin_target_t t;
  int a = 1, r;

  zvol_set_log (za_log);
  if (sock && *sock == '\0')
    sock = NULL;
  if (argc > 1
      && (strcmp (argv[1], "-h") == 0 || strcmp (argv[1], "--help") == 0)) {
    za_print_usage (stdout);
    return 0;
  }
  if (argc > 2 && strcmp (argv[1], "-S") == 0) {
    sock = argv[2];
    a = 3;
  }
  if (argc <= a) {
    za_err ("no command");
    za_print_usage (stderr);
    return ZVOL_ADMIN_USAGE;
  }
  argc -= a;
  argv += a;
  if (strcmp (argv[0], "recv") == 0)
    argv[0] = (char *) "receive";
  r = zvol_admin_parse (argc, argv, &t, stderr);
  if (r != ZVOL_ADMIN_OK)
    return r;
  /* check, scrub: a server that answers runs it live; else here. */
  if (strcmp (t.at_cmd, "check") == 0 || strcmp (t.at_cmd, "scrub") == 0) {
    r = za_run (t.at_pool, sock, &t, argc, argv, 0);
    if (r != -ENOENT)
      return r;
    optind = 1;
    return za_check (argc, argv);
  }
  if (t.at_make_pool)
    return za_make_pool (argc - t.at_optind, argv + t.at_optind);
  if (strcmp (t.at_cmd, "list") == 0
      && (t.at_noperands > 1 || (t.at_noperands == 0 && t.at_ndevs == 0
                                 && sock == NULL)))
    return za_list_each (sock, &t, argc, argv);
  return za_run (t.at_pool[0] ? t.at_pool : NULL, sock, &t, argc, argv, 0);
}
