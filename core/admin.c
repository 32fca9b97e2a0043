/*
 * admin.c: the admin commands (zvol.h, "admin commands"): one layer for
 * both of zvoladm's paths, offline (it imported the pool) and live (the
 * control socket of a running server, ctl.c), so both parse and print
 * exactly alike.
 *
 * Theory.  A command is one entry of admin_cmds[] (its name, option
 * letters, usage line, whether it only reads) and one function.  The
 * function is called twice in a command's life: first with no pool
 * (ac_ex NULL), from zvol_admin_parse, to check its options and operands
 * and say what it needs (zvoladm's choice of pool and of a read-only
 * import), then, from zvol_admin_run, on the open pool to do the work.
 * So a usage error is found before a pool is imported or a socket
 * reached, and the checks are written once.  Options are parsed here,
 * reentrantly (a server runs commands in its own threads; getopt's state
 * is global): clustered letters, a value attached or the next argument,
 * options before operands ("--" ends them), and -d DEVICE for every
 * command (offline only; the live path ignores it).  Everything in argv
 * may come from a socket: no option letter or length is trusted.
 *
 * Messages: a command's own go to its error stream as "zvoladm: ...";
 * what the engine logs on this thread during the command (why a create
 * failed) is copied there too by a log tap (zv_util.h), and still goes
 * to the log hook (a server's log keeps it).
 *
 * No state of its own: one command's context lives on the stack.  A
 * server runs one command at a time (ctl.c), but nothing here relies on
 * it; the volumes a command touches are held through the exports table.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "zvol.h"
#include "zv_util.h"

#define ADMIN_MAXOPT 128        /* option letters: ASCII */

typedef struct admin_ctx admin_ctx_t;

typedef struct admin_cmd {
  const char *ac_name;
  const char *ac_opts;          /* letters; ':' after one taking a value */
  const char *ac_usage;         /* after "zvoladm " */
  bool ac_readonly;             /* offline: a read-only import does */
  int (*ac_fn) (admin_ctx_t *c);
} admin_cmd_t;

struct admin_ctx {
  const admin_cmd_t *c_cmd;
  zvol_exports_t *c_ex;         /* NULL: only check the arguments */
  zvol_pool_t *c_pool;
  zvol_admin_target_t *c_target;  /* set while parsing */
  unsigned c_flags;             /* ZVOL_ADMIN_* */
  FILE *c_out, *c_err;
  bool c_seen[ADMIN_MAXOPT];
  const char *c_val[ADMIN_MAXOPT];
  const char *c_devs[ZVOL_MAX_DEVS];
  unsigned c_ndevs;
  int c_argc;                   /* operands */
  char *const *c_argv;
};

/* ---- messages ---- */

static void __attribute__ ((format (printf, 2, 3)))
admin_err (admin_ctx_t *c, const char *fmt, ...)
{
  va_list ap;

  fputs ("zvoladm: ", c->c_err);
  va_start (ap, fmt);
  vfprintf (c->c_err, fmt, ap);
  va_end (ap);
  fputc ('\n', c->c_err);
}

static const admin_cmd_t admin_cmds[];
static const size_t admin_ncmds;

static void
admin_print_usage_of (FILE *fp, const admin_cmd_t *only)
{
  fputs ("usage:\n", fp);
  for (size_t i = 0; i < admin_ncmds; i++) {
    const char *u = admin_cmds[i].ac_usage;
    if (only != NULL && only != &admin_cmds[i])
      continue;
    /* One line per syntax of the command. */
    while (*u) {
      size_t n = strcspn (u, "\n");
      fprintf (fp, "  zvoladm %.*s\n", (int) n, u);
      u += n + (u[n] == '\n');
    }
  }
}

void
zvol_admin_print_usage (FILE *fp)
{
  admin_print_usage_of (fp, NULL);
}

/* A usage error: the reason (if any), the command's usage lines. */
static int __attribute__ ((format (printf, 2, 3)))
admin_usage (admin_ctx_t *c, const char *fmt, ...)
{
  if (fmt) {
    va_list ap;
    fputs ("zvoladm: ", c->c_err);
    va_start (ap, fmt);
    vfprintf (c->c_err, fmt, ap);
    va_end (ap);
    fputc ('\n', c->c_err);
  }
  admin_print_usage_of (c->c_err, c->c_cmd);
  return ZVOL_ADMIN_USAGE;
}

/* The engine's messages of this thread, during a command. */
static void
admin_tap (void *arg, enum zv_log_level level, const char *msg)
{
  admin_ctx_t *c = arg;

  if (level >= ZV_LOG_WARN)
    fprintf (c->c_err, "zvoladm: %s%s\n",
             level == ZV_LOG_WARN ? "warning: " : "", msg);
}

/* ---- arguments ---- */

/* A size: digits with an optional K, M, G, T, P suffix (powers of 1024). */
static int
admin_parse_size (const char *s, uint64_t *out)
{
  char *end;
  unsigned shift = 0;
  unsigned long long v;

  errno = 0;
  v = strtoull (s, &end, 10);
  if (errno != 0 || end == s || *s == '-' || *s == '+' || *s == ' ')
    return -EINVAL;
  switch (*end) {
  case '\0': break;
  case 'k': case 'K': shift = 10; end++; break;
  case 'm': case 'M': shift = 20; end++; break;
  case 'g': case 'G': shift = 30; end++; break;
  case 't': case 'T': shift = 40; end++; break;
  case 'p': case 'P': shift = 50; end++; break;
  default: return -EINVAL;
  }
  if (*end != '\0' || (shift && v > (UINT64_MAX >> shift)))
    return -EINVAL;
  *out = (uint64_t) v << shift;
  return 0;
}

/* An option value as a size, or a usage error naming the option. */
static int
admin_opt_size (admin_ctx_t *c, char letter, uint64_t *out)
{
  if (admin_parse_size (c->c_val[(unsigned char) letter], out) < 0) {
    char shown[64];
    zv_str_printable (c->c_val[(unsigned char) letter], 32, shown,
                      sizeof shown);
    admin_usage (c, "-%c %s: not a size (examples: 64M, 1T)", letter, shown);
    return -1;
  }
  return 0;
}

/* The options of c's command (and -d), then the operands.  Usage
 * errors are said here. */
static int
admin_getopts (admin_ctx_t *c, int argc, char *const *argv)
{
  int i;

  for (i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp (a, "--") == 0) {
      i++;
      break;
    }
    if (a[0] != '-' || a[1] == '\0')
      break;
    for (const char *l = a + 1; *l; l++) {
      unsigned char u = (unsigned char) *l;
      const char *o = u != ':' && u < ADMIN_MAXOPT && u != 'd'
        ? strchr (c->c_cmd->ac_opts, u) : NULL;
      bool takes = u == 'd' || (o && o[1] == ':');
      const char *val;
      if (u != 'd' && o == NULL) {
        char shown[8];
        zv_str_printable (l, 2, shown, sizeof shown);
        return admin_usage (c, "%s: unknown option -%s", c->c_cmd->ac_name,
                            shown);
      }
      if (!takes) {
        c->c_seen[u] = true;
        continue;
      }
      if (l[1] != '\0')
        val = l + 1;
      else if (i + 1 < argc)
        val = argv[++i];
      else
        return admin_usage (c, "%s: -%c needs a value", c->c_cmd->ac_name,
                            u);
      if (u == 'd') {
        if (c->c_ndevs >= ZVOL_MAX_DEVS)
          return admin_usage (c, "too many -d (at most %u)", ZVOL_MAX_DEVS);
        c->c_devs[c->c_ndevs++] = val;
      }
      else {
        c->c_seen[u] = true;
        c->c_val[u] = val;
      }
      break;
    }
  }
  c->c_argc = argc - i;
  c->c_argv = argv + i;
  return ZVOL_ADMIN_OK;
}

#define ADMIN_OPT(c, l) ((c)->c_seen[(unsigned char) (l)])

/* Operand k as POOL/VOL into vol (pool: the part before the slash).
 * With a pool open, the pool must be it. */
static int
admin_volume_operand (admin_ctx_t *c, int k, char *vol)
{
  const char *arg = c->c_argv[k], *slash = strchr (arg, '/');
  char shown[4 * ZVOL_NAME_MAX + 8];

  if (slash == NULL || slash == arg || slash[1] == '\0'
      || (size_t) (slash - arg) >= ZVOL_NAME_MAX
      || strlen (slash + 1) >= ZVOL_NAME_MAX) {
    zv_str_printable (arg, 2 * ZVOL_NAME_MAX, shown, sizeof shown);
    return admin_usage (c, "%s: '%s' is not POOL/VOLUME", c->c_cmd->ac_name,
                        shown);
  }
  snprintf (vol, ZVOL_NAME_MAX, "%s", slash + 1);
  if (c->c_pool && (strlen (zvol_pool_name (c->c_pool))
                    != (size_t) (slash - arg)
                    || strncmp (zvol_pool_name (c->c_pool), arg,
                                (size_t) (slash - arg)) != 0)) {
    char pool[ZVOL_NAME_MAX];
    snprintf (pool, sizeof pool, "%.*s", (int) (slash - arg), arg);
    zv_str_printable (pool, ZVOL_NAME_MAX, shown, sizeof shown);
    admin_err (c, "%s is not this pool (%s)", shown,
               zvol_pool_name (c->c_pool));
    return ZVOL_ADMIN_FAIL;
  }
  return ZVOL_ADMIN_OK;
}

/* Is operand k this pool's name (a usage error if it is no name)? */
static int
admin_pool_operand (admin_ctx_t *c, int k, bool *match)
{
  const char *arg = c->c_argv[k];
  char shown[4 * ZVOL_NAME_MAX + 8];

  *match = false;
  if (!zv_name_is_valid (arg, ZVOL_NAME_MAX) || strchr (arg, '/')) {
    zv_str_printable (arg, ZVOL_NAME_MAX, shown, sizeof shown);
    return admin_usage (c, "%s: '%s' is not a pool name", c->c_cmd->ac_name,
                        shown);
  }
  *match = c->c_pool && strcmp (arg, zvol_pool_name (c->c_pool)) == 0;
  return ZVOL_ADMIN_OK;
}

/* An engine result as the exit code (the engine said why). */
static int
admin_result (int r)
{
  return r < 0 ? ZVOL_ADMIN_FAIL : ZVOL_ADMIN_OK;
}

/* ---- the commands ---- */

/* create POOL DEV... (offline: zvoladm makes the pool) or
 * create -V SIZE [-b BS] [-s | -r RESV] POOL/VOL. */
static int
admin_create (admin_ctx_t *c)
{
  uint64_t size = 0, bs = 0, resv = 0;
  bool thin = ADMIN_OPT (c, 's'), resv_given = ADMIN_OPT (c, 'r');
  char vol[ZVOL_NAME_MAX];
  int r;

  if (!ADMIN_OPT (c, 'V')) {
    if (ADMIN_OPT (c, 'b') || thin || resv_given)
      return admin_usage (c, "-b, -s and -r are for a volume (with -V)");
    if (c->c_argc < 2 || c->c_argc - 1 > (int) ZVOL_MAX_DEVS || c->c_ndevs)
      return admin_usage (c, "create POOL DEV...");
    if (c->c_target)
      c->c_target->at_make_pool = true;
    if (c->c_ex == NULL)
      return ZVOL_ADMIN_OK;
    admin_err (c, "a pool is made on its devices with no server running "
               "(zvoladm create POOL DEV...), not through a pool");
    return ZVOL_ADMIN_FAIL;
  }
  if (admin_opt_size (c, 'V', &size) < 0)
    return ZVOL_ADMIN_USAGE;
  if (ADMIN_OPT (c, 'b') && (admin_opt_size (c, 'b', &bs) < 0))
    return ZVOL_ADMIN_USAGE;
  if (bs > UINT32_MAX)
    return admin_usage (c, "-b: not a block size");
  if (resv_given && admin_opt_size (c, 'r', &resv) < 0)
    return ZVOL_ADMIN_USAGE;
  if (thin && resv_given)
    return admin_usage (c, "-s (thin) and -r (a reservation) exclude each "
                        "other");
  if (c->c_argc != 1)
    return admin_usage (c, "create -V SIZE POOL/VOL");
  r = admin_volume_operand (c, 0, vol);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  zvol_volume_params_t vp = {
    .vp_size = size, .vp_blocksize = (uint32_t) bs,
    .vp_reservation = thin ? 0 : resv_given ? resv : size,
  };
  return admin_result (zvol_volume_create (c->c_pool, vol, &vp));
}

/* destroy POOL/VOL: refused while a client has the volume open. */
static int
admin_destroy (admin_ctx_t *c)
{
  char vol[ZVOL_NAME_MAX];
  int r;

  if (c->c_argc != 1)
    return admin_usage (c, "destroy POOL/VOL");
  r = admin_volume_operand (c, 0, vol);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  return admin_result (zvol_exports_destroy (c->c_ex, vol));
}

void
zvol_admin_size (char *buf, size_t len, uint64_t v, bool exact)
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
admin_list_pool (admin_ctx_t *c, bool scripted, bool exact)
{
  zvol_pool_t *p = c->c_pool;
  size_t n = zvol_volume_list (p, NULL, 0);
  zvol_volume_info_t *vi = zv_calloc (n ? n : 1, sizeof *vi);
  const char *sep = scripted ? "\t" : "  ";

  n = ZV_MIN (n, zvol_volume_list (p, vi, n));
  for (size_t i = 0; i < n; i++) {
    char name[2 * ZVOL_NAME_MAX + 2], used[32], avail[32], refer[32],
      volsize[32];
    snprintf (name, sizeof name, "%s/%s", zvol_pool_name (p), vi[i].vi_name);
    zvol_admin_size (used, sizeof used, vi[i].vi_used, exact);
    zvol_admin_size (avail, sizeof avail, vi[i].vi_avail, exact);
    zvol_admin_size (refer, sizeof refer, vi[i].vi_referenced, exact);
    zvol_admin_size (volsize, sizeof volsize, vi[i].vi_volsize, exact);
    if (scripted)
      fprintf (c->c_out, "%s%s%s%s%s%s%s%s%s\n", name, sep, used, sep, avail,
               sep, refer, sep, volsize);
    else
      fprintf (c->c_out, "%-24s%s%8s%s%8s%s%8s%s%8s\n", name, sep, used, sep,
               avail, sep, refer, sep, volsize);
  }
  free (vi);
}

/* list [-H] [-p] [POOL]...: without POOL, this pool; a POOL that is not
 * this one fails (zvoladm runs the command once per pool it names). */
static int
admin_list (admin_ctx_t *c)
{
  bool scripted = ADMIN_OPT (c, 'H'), exact = ADMIN_OPT (c, 'p'), match;
  int rc = ZVOL_ADMIN_OK;

  for (int k = 0; k < c->c_argc; k++) {
    int r = admin_pool_operand (c, k, &match);
    if (r != ZVOL_ADMIN_OK)
      return r;
  }
  if (c->c_ex == NULL)
    return ZVOL_ADMIN_OK;
  if (!scripted && !(c->c_flags & ZVOL_ADMIN_NOHEADER))
    fprintf (c->c_out, "%-24s  %8s  %8s  %8s  %8s\n", "NAME", "USED",
             "AVAIL", "REFER", "VOLSIZE");
  if (c->c_argc == 0)
    admin_list_pool (c, scripted, exact);
  for (int k = 0; k < c->c_argc; k++) {
    admin_pool_operand (c, k, &match);
    if (match)
      admin_list_pool (c, scripted, exact);
    else {
      char shown[4 * ZVOL_NAME_MAX + 8];
      zv_str_printable (c->c_argv[k], ZVOL_NAME_MAX, shown, sizeof shown);
      admin_err (c, "%s is not this pool (%s)", shown,
                 zvol_pool_name (c->c_pool));
      rc = ZVOL_ADMIN_FAIL;
    }
  }
  return rc;
}

/* stats [-t] POOL[/VOL]: the kstat tables, the pool's figures (and the
 * volume's), or with -t the txg history. */
static int
admin_stats (admin_ctx_t *c)
{
  char vol[ZVOL_NAME_MAX];
  bool has_vol, match;
  zvol_t *zv = NULL;
  char *text;
  int r;

  if (c->c_argc != 1)
    return admin_usage (c, "stats [-t] POOL[/VOL]");
  has_vol = strchr (c->c_argv[0], '/') != NULL;
  if (has_vol && ADMIN_OPT (c, 't'))
    return admin_usage (c, "-t: the txg history is the pool's (stats -t "
                        "POOL)");
  r = has_vol ? admin_volume_operand (c, 0, vol)
    : admin_pool_operand (c, 0, &match);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  if (!has_vol && !match) {
    char shown[4 * ZVOL_NAME_MAX + 8];
    zv_str_printable (c->c_argv[0], ZVOL_NAME_MAX, shown, sizeof shown);
    admin_err (c, "%s is not this pool (%s)", shown,
               zvol_pool_name (c->c_pool));
    return ZVOL_ADMIN_FAIL;
  }
  if (has_vol && zvol_exports_hold (c->c_ex, vol, &zv) < 0)
    return ZVOL_ADMIN_FAIL;
  text = ADMIN_OPT (c, 't') ? zvol_format_txgs (c->c_pool)
    : zvol_format_stats (c->c_pool, zv);
  if (zv)
    zvol_exports_rele (c->c_ex, zv);
  fputs (text, c->c_out);
  free (text);
  return ZVOL_ADMIN_OK;
}

/*
 * The commands.  A new one: an entry here and its function, which
 * checks its arguments (c_ex NULL: stop there) and then works on
 * c_pool / c_ex.  ac_usage is also the man page's synopsis line.
 */
static const admin_cmd_t admin_cmds[] = {
  { "create", "V:b:sr:", "create POOL DEV...\n"
    "create -V SIZE [-b BLOCKSIZE] [-s | -r RESERVATION] [-d DEV]... "
    "POOL/VOL", false, admin_create },
  { "destroy", "", "destroy [-d DEV]... POOL/VOL", false, admin_destroy },
  { "list", "Hp", "list [-H] [-p] [-d DEV]... [POOL]...", true, admin_list },
  { "stats", "t", "stats [-t] [-d DEV]... POOL[/VOL]", true, admin_stats },
};
static const size_t admin_ncmds = sizeof admin_cmds / sizeof admin_cmds[0];

/* Find the command and parse its options: ZVOL_ADMIN_OK or USAGE. */
static int
admin_begin (admin_ctx_t *c, int argc, char *const *argv, FILE *err)
{
  c->c_err = err;
  if (argc < 1 || argv == NULL || argv[0] == NULL) {
    fputs ("zvoladm: no command\n", err);
    zvol_admin_print_usage (err);
    return ZVOL_ADMIN_USAGE;
  }
  for (size_t i = 0; i < admin_ncmds && c->c_cmd == NULL; i++)
    if (strcmp (argv[0], admin_cmds[i].ac_name) == 0)
      c->c_cmd = &admin_cmds[i];
  if (c->c_cmd == NULL) {
    char shown[4 * ZVOL_NAME_MAX + 8];
    zv_str_printable (argv[0], ZVOL_NAME_MAX, shown, sizeof shown);
    fprintf (err, "zvoladm: unknown command '%s'\n", shown);
    zvol_admin_print_usage (err);
    return ZVOL_ADMIN_USAGE;
  }
  return admin_getopts (c, argc, argv);
}

int
zvol_admin_parse (int argc, char *const *argv, zvol_admin_target_t *t,
                  FILE *err)
{
  admin_ctx_t c = { .c_target = t };
  int r;

  memset (t, 0, sizeof *t);
  r = admin_begin (&c, argc, argv, err);
  if (r == ZVOL_ADMIN_OK)
    r = c.c_cmd->ac_fn (&c);
  if (r != ZVOL_ADMIN_OK)
    return r;
  t->at_cmd = c.c_cmd->ac_name;
  t->at_readonly = c.c_cmd->ac_readonly;
  t->at_optind = argc - c.c_argc;
  t->at_noperands = c.c_argc;
  t->at_ndevs = c.c_ndevs;
  memcpy (t->at_devs, c.c_devs, sizeof t->at_devs);
  if (c.c_argc > 0) {
    const char *a = c.c_argv[0];
    size_t n = strcspn (a, "/@");
    if (n < ZVOL_NAME_MAX) {
      memcpy (t->at_pool, a, n);
      t->at_pool[n] = '\0';
    }
  }
  return ZVOL_ADMIN_OK;
}

int
zvol_admin_run (zvol_exports_t *ex, int argc, char *const *argv,
                unsigned flags, FILE *out, FILE *err)
{
  admin_ctx_t c = {
    .c_ex = ex, .c_pool = zvol_exports_pool (ex), .c_flags = flags,
    .c_out = out,
  };
  int r = admin_begin (&c, argc, argv, err);

  if (r != ZVOL_ADMIN_OK)
    return r;
  zv_log_tap (admin_tap, &c);
  r = c.c_cmd->ac_fn (&c);
  zv_log_tap (NULL, NULL);
  fflush (out);
  fflush (err);
  return r;
}
