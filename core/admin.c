/*
 * admin.c: the admin commands (zvol.h, "admin commands"): one layer for
 * both of zvoladm's paths, offline (it imported the pool) and live (the
 * control socket of a running server, ctl.c), so both parse and print
 * exactly alike.  This file is the layer's frame: the table of
 * commands, option parsing, the operand checks and the messages.  The
 * commands are in three files by family: admin_dataset.c (volumes,
 * snapshots, clones and their properties), admin_pool.c (the pool's
 * status, statistics, check, scrub, wait and replace) and
 * admin_stream.c (send and receive); admin_impl.h is what the four
 * share.
 *
 * Theory.  A command is one entry of admin_cmds[] (its name, option
 * letters, usage line, whether it only reads) and one function.  The
 * function is called twice in a command's life: first with no pool
 * (c_ex NULL), from zvol_admin_parse, to check its options and operands
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
#include "admin_impl.h"

/* ---- messages ---- */

/* "zvoladm: MESSAGE" on the command's error stream. */
static void __attribute__ ((format (printf, 2, 0)))
admin_verr (admin_ctx_t *c, const char *fmt, va_list ap)
{
  fputs ("zvoladm: ", c->c_err);
  vfprintf (c->c_err, fmt, ap);
  fputc ('\n', c->c_err);
}

void __attribute__ ((format (printf, 2, 3)))
zv_admin_err (admin_ctx_t *c, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  admin_verr (c, fmt, ap);
  va_end (ap);
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
int __attribute__ ((format (printf, 2, 3)))
zv_admin_usage (admin_ctx_t *c, const char *fmt, ...)
{
  if (fmt) {
    va_list ap;
    va_start (ap, fmt);
    admin_verr (c, fmt, ap);
    va_end (ap);
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

/* A size as the admin tables print it (zvol.h). */
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
int
zv_admin_opt_size (admin_ctx_t *c, char letter, uint64_t *out)
{
  if (admin_parse_size (c->c_val[(unsigned char) letter], out) < 0) {
    char shown[64];
    zv_str_printable (c->c_val[(unsigned char) letter], 32, shown,
                      sizeof shown);
    zv_admin_usage (c, "-%c %s: not a size (examples: 64M, 1T)", letter,
                    shown);
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
        return zv_admin_usage (c, "%s: unknown option -%s", c->c_cmd->ac_name,
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
        return zv_admin_usage (c, "%s: -%c needs a value", c->c_cmd->ac_name,
                               u);
      if (u == 'd') {
        if (c->c_ndevs >= ZVOL_MAX_DEVS)
          return zv_admin_usage (c, "too many -d (at most %u)", ZVOL_MAX_DEVS);
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


/* Operand k as POOL/VOL into vol (pool: the part before the slash).
 * With a pool open, the pool must be it. */
int
zv_admin_volume_operand (admin_ctx_t *c, int k, char *vol)
{
  const char *arg = c->c_argv[k], *slash = strchr (arg, '/');
  char shown[4 * ZVOL_NAME_MAX + 8];

  if (slash == NULL || slash == arg || slash[1] == '\0'
      || (size_t) (slash - arg) >= ZVOL_NAME_MAX
      || strlen (slash + 1) >= ZVOL_NAME_MAX) {
    zv_str_printable (arg, 2 * ZVOL_NAME_MAX, shown, sizeof shown);
    return zv_admin_usage (c, "%s: '%s' is not POOL/VOLUME", c->c_cmd->ac_name,
                           shown);
  }
  snprintf (vol, ZVOL_NAME_MAX, "%s", slash + 1);
  if (c->c_pool && (strlen (zvol_pool_name (c->c_pool))
                    != (size_t) (slash - arg)
                    || strncmp (zvol_pool_name (c->c_pool), arg,
                                (size_t) (slash - arg)) != 0)) {
    char pool[ZVOL_NAME_MAX];
    snprintf (pool, sizeof pool, "%.*s", (int) (slash - arg), arg);
    return zv_admin_not_this_pool (c, pool);
  }
  return ZVOL_ADMIN_OK;
}

/* Operand k as POOL/VOL or (snap) POOL/VOL@SNAP: the dataset's name
 * in the pool into name (2 * ZVOL_NAME_MAX bytes). */
int
zv_admin_dataset_operand (admin_ctx_t *c, int k, bool snap, char *name)
{
  return zv_admin_dataset_arg (c, c->c_argv[k], snap, name);
}

/* The same for any argument (an option's value). */
int
zv_admin_dataset_arg (admin_ctx_t *c, const char *arg, bool snap, char *name)
{
  const char *slash = strchr (arg, '/');
  const char *at = slash ? strchr (slash, '@') : NULL;
  char shown[8 * ZVOL_NAME_MAX + 8], pool[ZVOL_NAME_MAX];

  zv_str_printable (arg, 2 * ZVOL_NAME_MAX, shown, sizeof shown);
  if (slash == NULL || slash == arg || (size_t) (slash - arg) >= ZVOL_NAME_MAX
      || strlen (slash + 1) >= 2 * ZVOL_NAME_MAX - 1
      || (snap ? at == NULL || at == slash + 1 || at[1] == '\0'
          : at != NULL)
      || slash[1] == '\0')
    return zv_admin_usage (c, "%s: '%s' is not POOL/VOLUME%s",
                           c->c_cmd->ac_name, shown, snap ? "@SNAPSHOT" : "");
  snprintf (name, 2 * ZVOL_NAME_MAX, "%s", slash + 1);
  snprintf (pool, sizeof pool, "%.*s", (int) (slash - arg), arg);
  if (c->c_pool && strcmp (pool, zvol_pool_name (c->c_pool)) != 0)
    return zv_admin_not_this_pool (c, pool);
  return ZVOL_ADMIN_OK;
}

/* Is operand k this pool's name (a usage error if it is no name)? */
int
zv_admin_pool_operand (admin_ctx_t *c, int k, bool *match)
{
  const char *arg = c->c_argv[k];
  char shown[4 * ZVOL_NAME_MAX + 8];

  *match = false;
  if (!zv_name_is_valid (arg, ZVOL_NAME_MAX) || strchr (arg, '/')) {
    zv_str_printable (arg, ZVOL_NAME_MAX, shown, sizeof shown);
    return zv_admin_usage (c, "%s: '%s' is not a pool name", c->c_cmd->ac_name,
                           shown);
  }
  *match = c->c_pool && strcmp (arg, zvol_pool_name (c->c_pool)) == 0;
  return ZVOL_ADMIN_OK;
}

/* A pool name (an operand, or the part of one before the slash) that is
 * not this pool's: said; returns ZVOL_ADMIN_FAIL. */
int
zv_admin_not_this_pool (admin_ctx_t *c, const char *pool)
{
  char shown[4 * ZVOL_NAME_MAX + 8];

  zv_str_printable (pool, ZVOL_NAME_MAX, shown, sizeof shown);
  zv_admin_err (c, "%s is not this pool (%s)", shown,
                zvol_pool_name (c->c_pool));
  return ZVOL_ADMIN_FAIL;
}

/*
 * The commands.  A new one: an entry here and its function, which
 * checks its arguments (c_ex NULL: stop there) and then works on
 * c_pool / c_ex.  ac_usage is also the man page's synopsis line.
 */
static const admin_cmd_t admin_cmds[] = {
  { "create", "V:b:sr:o:", "create POOL DEV...\n"
    "create -V SIZE [-b BLOCKSIZE] [-s | -r RESERVATION] "
    "[-o compression=VALUE] [-d DEV]... POOL/VOL", false, zv_admin_create },
  { "destroy", "rRnv", "destroy [-rRnv] [-d DEV]... POOL/VOL[@SNAP]", false,
    zv_admin_destroy },
  { "replace", "", "replace [-d DEV]... POOL OLD NEW", false,
    zv_admin_replace },
  { "list", "Hpt:o:", "list [-H] [-p] [-t volume|snapshot|all] [-o COLS] "
    "[-d DEV]... [POOL]...", true, zv_admin_list },
  { "snapshot", "", "snapshot [-d DEV]... POOL/VOL@SNAP...", false,
    zv_admin_snapshot },
  { "rollback", "r", "rollback [-r] [-d DEV]... POOL/VOL@SNAP", false,
    zv_admin_rollback },
  { "clone", "r:", "clone [-r RESERVATION] [-d DEV]... POOL/VOL@SNAP "
    "POOL/VOL", false, zv_admin_clone },
  { "diff", "", "diff [-d DEV]... POOL/VOL@SNAP POOL/VOL[@SNAP]", true,
    zv_admin_diff },
  { "set", "", "set [-d DEV]... compression=VALUE POOL/VOL", false,
    zv_admin_set },
  { "get", "Hp", "get [-H] [-p] [-d DEV]... PROP[,PROP]... POOL/VOL[@SNAP]",
    true, zv_admin_get },
  { "stats", "t", "stats [-t] [-d DEV]... POOL[/VOL]", true, zv_admin_stats },
  { "status", "", "status [-d DEV]... [POOL]", true, zv_admin_status },
  { "send", "vi:", "send [-v] [-i POOL/VOL@FROM] [-d DEV]... POOL/VOL@SNAP "
    "> STREAM", true, zv_admin_send },
  { "receive", "v", "receive [-v] [-d DEV]... POOL/VOL[@SNAP] < STREAM",
    false, zv_admin_receive },
  { "check", "v", "check [-v] [-d DEV]... POOL", true, zv_admin_check },
  { "scrub", "vwps", "scrub [-v] [-w | -p | -s] [-d DEV]... POOL", true,
    zv_admin_scrub },
  { "wait", "", "wait [-d DEV]... POOL", false, zv_admin_wait },
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
  t->at_readonly = t->at_readonly || c.c_cmd->ac_readonly;
  /* The streams' commands, which the tool hands its stdout or stdin. */
  t->at_stream = c.c_cmd->ac_fn == zv_admin_send ? ZVOL_ADMIN_STREAM_OUT
    : c.c_cmd->ac_fn == zv_admin_receive ? ZVOL_ADMIN_STREAM_IN : 0;
  t->at_optind = argc - c.c_argc;
  t->at_noperands = c.c_argc;
  t->at_ndevs = c.c_ndevs;
  memcpy (t->at_devs, c.c_devs, sizeof t->at_devs);
  if (c.c_argc > 0) {
    /* set and get name the property first, the dataset last. */
    const char *a = c.c_cmd->ac_fn == zv_admin_set
      || c.c_cmd->ac_fn == zv_admin_get ? c.c_argv[c.c_argc - 1]
      : c.c_argv[0];
    size_t n = strcspn (a, "/@");
    if (n < ZVOL_NAME_MAX) {
      memcpy (t->at_pool, a, n);
      t->at_pool[n] = '\0';
    }
  }
  return ZVOL_ADMIN_OK;
}

int
zvol_admin_run_io (zvol_exports_t *ex, int argc, char *const *argv,
                   unsigned flags, const zvol_admin_io_t *io)
{
  admin_ctx_t c = {
    .c_ex = ex, .c_pool = zvol_exports_pool (ex), .c_flags = flags,
    .c_out = io->ai_out, .c_io = io,
  };
  int r = admin_begin (&c, argc, argv, io->ai_err);

  if (r != ZVOL_ADMIN_OK)
    return r;
  zv_log_tap (admin_tap, &c);
  r = c.c_cmd->ac_fn (&c);
  zv_log_tap (NULL, NULL);
  fflush (io->ai_out);
  fflush (io->ai_err);
  return r;
}

int
zvol_admin_run (zvol_exports_t *ex, int argc, char *const *argv,
                unsigned flags, FILE *out, FILE *err)
{
  zvol_admin_io_t io = {
    .ai_out = out, .ai_err = err, .ai_stream_fd = -1,
    .ai_cancel_fd = { -1, -1 },
  };

  return zvol_admin_run_io (ex, argc, argv, flags, &io);
}
