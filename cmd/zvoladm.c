/*
 * zvoladm.c: the admin tool, offline, on a pool's devices (no server may
 * have the pool open: the devices' locks refuse a second opener).
 *
 *   zvoladm create [-d DEV]... POOL DEV...        a pool, no volume
 *   zvoladm create -V SIZE [-b BLOCKSIZE] [-s | -r RESERVATION]
 *                  [-d DEV]... POOL/VOL           a volume
 *   zvoladm destroy [-d DEV]... POOL/VOL
 *   zvoladm list [-H] [-p] [-d DEV]... [POOL]...
 *   zvoladm check [-v] [-d DEV]... POOL
 *
 * Where a pool's devices are: -d DEV (repeatable) names them; without it
 * the pool cache, a text file of "POOL DEV..." lines that create writes
 * ($ZVOLADM_CACHE, else $XDG_CONFIG_HOME/zvoladm/pools, else
 * ~/.config/zvoladm/pools), as zpool.cache.  Everything else is the
 * engine's, through core/zvol.h alone: the tool parses arguments,
 * prints, and maps errors to exit codes (0 done, 1 failed, 2 usage;
 * check: 1 when it found problems).
 */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "zvol.h"

#define ZA_EXIT_FAIL 1
#define ZA_EXIT_USAGE 2

static const char *za_usage =
  "usage:\n"
  "  zvoladm create [-d DEV]... POOL DEV...\n"
  "  zvoladm create -V SIZE [-b BLOCKSIZE] [-s | -r RESERVATION] "
  "[-d DEV]... POOL/VOL\n"
  "  zvoladm destroy [-d DEV]... POOL/VOL\n"
  "  zvoladm list [-H] [-p] [-d DEV]... [POOL]...\n"
  "  zvoladm check [-v] [-d DEV]... POOL\n";

/* Engine messages: errors and warnings to stderr, the rest only with
 * ZVOLADM_DEBUG set. */
static void
za_log (zvol_log_level_t level, const char *msg)
{
  if (level >= ZVOL_LOG_WARN || getenv ("ZVOLADM_DEBUG") != NULL)
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

static int
za_usage_error (const char *why)
{
  if (why)
    za_err ("%s", why);
  fputs (za_usage, stderr);
  return ZA_EXIT_USAGE;
}

/* A size: digits with an optional K, M, G, T, P suffix (powers of 1024). */
static int
za_parse_size (const char *s, uint64_t *out)
{
  char *end;
  unsigned shift = 0;
  unsigned long long v;

  errno = 0;
  v = strtoull (s, &end, 10);
  if (errno != 0 || end == s || *s == '-')
    return -1;
  switch (*end) {
  case '\0': break;
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  case 't': case 'T': shift = 40; end++; break;
  case 'p': case 'P': shift = 50; end++; break;
  default: return -1;
  }
  if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
    return -1;
  *out = (uint64_t) v << shift;
  return 0;
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

typedef struct za_opts {
  const char *o_devs[ZVOL_MAX_DEVS];
  unsigned o_ndevs;
} za_opts_t;

/* Import pool 'name' read-write (or read-only) from -d or the cache. */
static int
za_open (const char *name, const za_opts_t *o, bool readonly,
         zvol_pool_t **pp)
{
  static char cached[ZVOL_MAX_DEVS][4096];
  zvol_pool_config_t pc;
  unsigned n = o->o_ndevs;
  int r;

  zvol_pool_config_init (&pc);
  if (n == 0) {
    n = za_cache_lookup (name, cached, ZVOL_MAX_DEVS);
    if (n == 0) {
      za_err ("pool %s is not in the pool cache: name its devices with -d",
              name);
      return -ENOENT;
    }
    for (unsigned i = 0; i < n; i++)
      pc.pc_devices[i] = cached[i];
  }
  else
    for (unsigned i = 0; i < n; i++)
      pc.pc_devices[i] = o->o_devs[i];
  pc.pc_ndevices = n;
  pc.pc_readonly = readonly;
  r = zvol_pool_open (&pc, pp);
  if (r < 0)
    return r;
  if (strcmp (zvol_pool_name (*pp), name) != 0) {
    za_err ("the devices hold pool %s, not %s", zvol_pool_name (*pp), name);
    zvol_pool_close (*pp);
    return -EINVAL;
  }
  return 0;
}

/* POOL/VOL into its two parts. */
static int
za_split (const char *arg, char *pool, char *vol)
{
  const char *slash = strchr (arg, '/');

  if (slash == NULL || slash == arg || slash[1] == '\0'
      || (size_t) (slash - arg) >= ZVOL_NAME_MAX
      || strlen (slash + 1) >= ZVOL_NAME_MAX)
    return -1;
  memcpy (pool, arg, (size_t) (slash - arg));
  pool[slash - arg] = '\0';
  strcpy (vol, slash + 1);
  return 0;
}

/* ---- commands ---- */

/* -d DEVICE, which every command that opens a pool takes. */
static int
za_opt_dev (za_opts_t *o, const char *dev)
{
  if (o->o_ndevs >= ZVOL_MAX_DEVS)
    return -1;
  o->o_devs[o->o_ndevs++] = dev;
  return 0;
}

static int
za_create (int argc, char **argv, za_opts_t *o)
{
  uint64_t size = 0, bs = 0, resv = 0;
  bool thin = false, resv_given = false, have_size = false;
  char pool[ZVOL_NAME_MAX], vol[ZVOL_NAME_MAX];
  zvol_pool_t *p;
  int c, r;

  while ((c = getopt (argc, argv, "+V:b:sr:d:")) != -1)
    switch (c) {
    case 'V':
      if (za_parse_size (optarg, &size) < 0)
        return za_usage_error ("-V: not a size");
      have_size = true;
      break;
    case 'b':
      if (za_parse_size (optarg, &bs) < 0 || bs > UINT32_MAX)
        return za_usage_error ("-b: not a block size");
      break;
    case 's': thin = true; break;
    case 'r':
      if (za_parse_size (optarg, &resv) < 0)
        return za_usage_error ("-r: not a size");
      resv_given = true;
      break;
    case 'd':
      if (za_opt_dev (o, optarg) < 0)
        return za_usage_error ("too many -d");
      break;
    default:
      return za_usage_error (NULL);
    }
  argc -= optind;
  argv += optind;
  if (!have_size) {
    /* A pool: POOL DEV... */
    zvol_pool_config_t pc;
    if (bs || thin || resv_given)
      return za_usage_error ("-b, -s and -r are for a volume (with -V)");
    if (argc < 2 || argc - 1 > (int) ZVOL_MAX_DEVS || o->o_ndevs)
      return za_usage_error ("create POOL DEV...");
    zvol_pool_config_init (&pc);
    pc.pc_create = true;
    pc.pc_name = argv[0];
    for (int i = 1; i < argc; i++)
      pc.pc_devices[i - 1] = argv[i];
    pc.pc_ndevices = (unsigned) argc - 1;
    r = zvol_pool_open (&pc, &p);
    if (r < 0)
      return ZA_EXIT_FAIL;
    r = zvol_pool_close (p);
    if (r < 0)
      return ZA_EXIT_FAIL;
    za_cache_add (argv[0], (const char *const *) argv + 1,
                  (unsigned) argc - 1);
    return 0;
  }
  if (thin && resv_given)
    return za_usage_error ("-s (thin) and -r (a reservation) exclude each "
                           "other");
  if (argc != 1 || za_split (argv[0], pool, vol) < 0)
    return za_usage_error ("create -V SIZE POOL/VOL");
  zvol_volume_params_t vp = {
    .vp_size = size, .vp_blocksize = (uint32_t) bs,
    .vp_reservation = thin ? 0 : resv_given ? resv : size,
  };
  if (za_open (pool, o, false, &p) < 0)
    return ZA_EXIT_FAIL;
  r = zvol_volume_create (p, vol, &vp);
  if (zvol_pool_close (p) < 0 && r == 0)
    r = -EIO;
  return r < 0 ? ZA_EXIT_FAIL : 0;
}

static int
za_destroy (int argc, char **argv, za_opts_t *o)
{
  char pool[ZVOL_NAME_MAX], vol[ZVOL_NAME_MAX];
  zvol_pool_t *p;
  int c, r;

  while ((c = getopt (argc, argv, "+d:")) != -1)
    switch (c) {
    case 'd':
      if (za_opt_dev (o, optarg) < 0)
        return za_usage_error ("too many -d");
      break;
    default:
      return za_usage_error (NULL);
    }
  if (argc - optind != 1 || za_split (argv[optind], pool, vol) < 0)
    return za_usage_error ("destroy POOL/VOL");
  if (za_open (pool, o, false, &p) < 0)
    return ZA_EXIT_FAIL;
  r = zvol_volume_destroy (p, vol);
  if (zvol_pool_close (p) < 0 && r == 0)
    r = -EIO;
  return r < 0 ? ZA_EXIT_FAIL : 0;
}

/* A size for people (1.50M) or, with -p, exact bytes. */
static void
za_size (char *buf, size_t len, uint64_t v, bool exact)
{
  static const char units[] = "BKMGTPE";
  unsigned u = 0;
  double d = (double) v;

  if (exact || v < 1024) {
    snprintf (buf, len, "%" PRIu64 "%s", v, exact ? "" : "B");
    return;
  }
  while (d >= 1024 && u < sizeof units - 2) {
    d /= 1024;
    u++;
  }
  snprintf (buf, len, d < 10 ? "%.2f%c" : d < 100 ? "%.1f%c" : "%.0f%c", d,
            units[u]);
}

static void
za_list_pool (zvol_pool_t *p, bool scripted, bool exact)
{
  size_t n = zvol_volume_list (p, NULL, 0);
  zvol_volume_info_t *vi = calloc (n ? n : 1, sizeof *vi);
  const char *sep = scripted ? "\t" : "  ";

  if (vi == NULL)
    return;
  n = zvol_volume_list (p, vi, n);
  for (size_t i = 0; i < n; i++) {
    char name[2 * ZVOL_NAME_MAX + 2], used[32], avail[32], refer[32],
      volsize[32];
    snprintf (name, sizeof name, "%s/%s", zvol_pool_name (p), vi[i].vi_name);
    za_size (used, sizeof used, vi[i].vi_used, exact);
    za_size (avail, sizeof avail, vi[i].vi_avail, exact);
    za_size (refer, sizeof refer, vi[i].vi_referenced, exact);
    za_size (volsize, sizeof volsize, vi[i].vi_volsize, exact);
    if (scripted)
      printf ("%s%s%s%s%s%s%s%s%s\n", name, sep, used, sep, avail, sep,
              refer, sep, volsize);
    else
      printf ("%-24s%s%8s%s%8s%s%8s%s%8s\n", name, sep, used, sep, avail,
              sep, refer, sep, volsize);
  }
  free (vi);
}

static int
za_list (int argc, char **argv, za_opts_t *o)
{
  bool scripted = false, exact = false;
  int c, rc = 0;

  while ((c = getopt (argc, argv, "+Hpd:")) != -1)
    switch (c) {
    case 'H': scripted = true; break;
    case 'p': exact = true; break;
    case 'd':
      if (za_opt_dev (o, optarg) < 0)
        return za_usage_error ("too many -d");
      break;
    default:
      return za_usage_error (NULL);
    }
  if (!scripted)
    printf ("%-24s  %8s  %8s  %8s  %8s\n", "NAME", "USED", "AVAIL", "REFER",
            "VOLSIZE");
  if (optind == argc && o->o_ndevs > 0) {
    /* The pool on the devices given, whatever its name. */
    zvol_pool_config_t pc;
    zvol_pool_t *p;
    zvol_pool_config_init (&pc);
    for (unsigned i = 0; i < o->o_ndevs; i++)
      pc.pc_devices[i] = o->o_devs[i];
    pc.pc_ndevices = o->o_ndevs;
    pc.pc_readonly = true;
    if (zvol_pool_open (&pc, &p) < 0)
      return ZA_EXIT_FAIL;
    za_list_pool (p, scripted, exact);
    zvol_pool_close (p);
    return 0;
  }
  if (optind == argc) {
    /* Every pool of the cache. */
    char *path = za_cache_path ();
    FILE *f = path ? fopen (path, "r") : NULL;
    char line[ZVOL_MAX_DEVS * 4100 + 80];
    free (path);
    while (f && fgets (line, sizeof line, f) != NULL) {
      char *save = NULL, *name = strtok_r (line, " \t\n", &save);
      zvol_pool_t *p;
      if (name == NULL)
        continue;
      if (za_open (name, o, true, &p) < 0) {
        rc = ZA_EXIT_FAIL;
        continue;
      }
      za_list_pool (p, scripted, exact);
      zvol_pool_close (p);
    }
    if (f)
      fclose (f);
    return rc;
  }
  for (int i = optind; i < argc; i++) {
    zvol_pool_t *p;
    if (za_open (argv[i], o, true, &p) < 0) {
      rc = ZA_EXIT_FAIL;
      continue;
    }
    za_list_pool (p, scripted, exact);
    zvol_pool_close (p);
  }
  return rc;
}

/* ---- check ---- */

#define ZA_CHECK_LIST 10        /* problems of one kind printed in full */

typedef struct za_check {
  bool c_progress;
  struct timespec c_last;
  uint64_t c_shown[ZVOL_CHECK_LEAK + 1];
  uint64_t c_more;
} za_check_t;

/* A progress line a second at most, as zpool scrub and qemu-img check
 * show it: bytes read of the total, and the share. */
static void
za_check_progress (void *arg, const char *what, uint64_t done,
                   uint64_t total)
{
  za_check_t *c = arg;
  struct timespec now;
  char d[32], t[32];

  clock_gettime (CLOCK_MONOTONIC, &now);
  if (done < total && now.tv_sec - c->c_last.tv_sec < 1)
    return;
  c->c_last = now;
  za_size (d, sizeof d, done, false);
  za_size (t, sizeof t, total, false);
  fprintf (stderr, "%s: %s of %s (%.1f%%)\n", what, d, t,
           total ? 100.0 * (double) done / (double) total : 100.0);
}

static void
za_check_problem (void *arg, const zvol_check_problem_t *cp)
{
  za_check_t *c = arg;

  if (c->c_shown[cp->cp_kind]++ < ZA_CHECK_LIST)
    printf ("%s\n", cp->cp_msg);
  else
    c->c_more++;
}

/* zvoladm check: the whole command in one function. */
static int
za_check (int argc, char **argv, za_opts_t *o)
{
  static char cached[ZVOL_MAX_DEVS][4096];
  za_check_t c = { .c_progress = isatty (STDERR_FILENO) };
  zvol_check_report_t rep = {
    .cr_problem = za_check_problem, .cr_problem_arg = &c,
  };
  zvol_pool_config_t pc;
  char b1[32], b2[32], b3[32];
  const char *name;
  unsigned n;
  int ch, r;

  while ((ch = getopt (argc, argv, "+vd:")) != -1)
    switch (ch) {
    case 'v': c.c_progress = true; break;
    case 'd':
      if (za_opt_dev (o, optarg) < 0)
        return za_usage_error ("too many -d");
      break;
    default:
      return za_usage_error (NULL);
    }
  if (argc - optind != 1)
    return za_usage_error ("check POOL");
  name = argv[optind];
  zvol_pool_config_init (&pc);
  n = o->o_ndevs;
  if (n == 0) {
    n = za_cache_lookup (name, cached, ZVOL_MAX_DEVS);
    if (n == 0) {
      za_err ("pool %s is not in the pool cache: name its devices with -d",
              name);
      return ZA_EXIT_FAIL;
    }
    for (unsigned i = 0; i < n; i++)
      pc.pc_devices[i] = cached[i];
  }
  else
    for (unsigned i = 0; i < n; i++)
      pc.pc_devices[i] = o->o_devs[i];
  pc.pc_ndevices = n;
  if (c.c_progress) {
    pc.pc_progress = za_check_progress;
    pc.pc_progress_arg = &c;
  }
  r = zvol_pool_check (&pc, &rep);
  if (r < 0) {
    za_err ("pool %s cannot be checked: it does not import (%s)", name,
            strerror (-r));
    return ZA_EXIT_FAIL;
  }
  if (c.c_more > 0)
    printf ("... and %" PRIu64 " more problems (counted below)\n", c.c_more);
  za_size (b1, sizeof b1, rep.cr_bytes, false);
  za_size (b2, sizeof b2, rep.cr_allocated, false);
  printf ("%s: %" PRIu64 " trees, %" PRIu64 " blocks, %s read and verified "
          "(%s allocated)\n", name, rep.cr_trees, rep.cr_blocks, b1, b2);
  printf ("  checksum errors %" PRIu64 ", read errors %" PRIu64 ", blocks "
          "lost %" PRIu64 ", trees not walked to the end %" PRIu64 "\n",
          rep.cr_cksum_errors, rep.cr_read_errors, rep.cr_lost_blocks,
          rep.cr_incomplete);
  za_size (b1, sizeof b1, rep.cr_leaked_bytes, false);
  za_size (b3, sizeof b3, rep.cr_double_bytes, false);
  printf ("  leaked %s in %" PRIu64 " extents, doubly allocated %s in %"
          PRIu64 " extents, pointers at free space %" PRIu64 "\n", b1,
          rep.cr_leaked, b3, rep.cr_double, rep.cr_free_refs);
  printf ("%s\n", rep.cr_problems == 0 ? "No problems found."
          : "Problems found.");
  return rep.cr_problems == 0 ? 0 : ZA_EXIT_FAIL;
}

int
main (int argc, char **argv)
{
  za_opts_t o = { .o_ndevs = 0 };

  zvol_set_log (za_log);
  if (argc < 2)
    return za_usage_error (NULL);
  if (strcmp (argv[1], "-h") == 0 || strcmp (argv[1], "--help") == 0) {
    fputs (za_usage, stdout);
    return 0;
  }
  optind = 1;
  if (strcmp (argv[1], "create") == 0)
    return za_create (argc - 1, argv + 1, &o);
  if (strcmp (argv[1], "destroy") == 0)
    return za_destroy (argc - 1, argv + 1, &o);
  if (strcmp (argv[1], "list") == 0)
    return za_list (argc - 1, argv + 1, &o);
  if (strcmp (argv[1], "check") == 0)
    return za_check (argc - 1, argv + 1, &o);
  za_err ("unknown command '%s'", argv[1]);
  return za_usage_error (NULL);
}
