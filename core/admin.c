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
 * Streams: send and receive work on a descriptor they are handed
 * (zvol_admin_run_io: zvoladm's stdout or stdin, or live the one its
 * client passed), checked and driven by streamio.c, stoppable by the
 * caller's cancel descriptors.  check runs offline in zvoladm (it
 * imports the pool itself); on an open pool, here, it is the live check
 * (zvol_pool_check_live), stoppable by the same cancel descriptors.
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
#include "streamio.h"

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
  const zvol_admin_io_t *c_io;  /* the stream and its cancels, or NULL */
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

static int admin_dataset_arg (admin_ctx_t *c, const char *arg, bool snap,
                              char *name);

/* Operand k as POOL/VOL or (snap) POOL/VOL@SNAP: the dataset's name
 * in the pool into name (2 * ZVOL_NAME_MAX bytes). */
static int
admin_dataset_operand (admin_ctx_t *c, int k, bool snap, char *name)
{
  return admin_dataset_arg (c, c->c_argv[k], snap, name);
}

/* The same for any argument (an option's value). */
static int
admin_dataset_arg (admin_ctx_t *c, const char *arg, bool snap, char *name)
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
    return admin_usage (c, "%s: '%s' is not POOL/VOLUME%s", c->c_cmd->ac_name,
                        shown, snap ? "@SNAPSHOT" : "");
  snprintf (name, 2 * ZVOL_NAME_MAX, "%s", slash + 1);
  snprintf (pool, sizeof pool, "%.*s", (int) (slash - arg), arg);
  if (c->c_pool && strcmp (pool, zvol_pool_name (c->c_pool)) != 0) {
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

  const char *comp = NULL;

  if (ADMIN_OPT (c, 'o')) {
    comp = c->c_val['o'];
    if (strncmp (comp, "compression=", 12) != 0)
      return admin_usage (c, "create -o: compression=off|lz4|zstd|zstd-N "
                          "(the one property a volume is created with)");
    comp += 12;
  }
  if (!ADMIN_OPT (c, 'V')) {
    if (ADMIN_OPT (c, 'b') || thin || resv_given || comp)
      return admin_usage (c, "-b, -s, -r and -o are for a volume (with -V)");
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
    .vp_compression = comp,
  };
  return admin_result (zvol_volume_create (c->c_pool, vol, &vp));
}

/* destroy [-rRnv] POOL/VOL or POOL/VOL@SNAP: refused while a client
 * has it open.  -r takes a volume's snapshots too (oldest first), -R
 * also every clone depending on what goes, recursively (as zfs destroy
 * -R), dependents first; all of them are checked unheld before the
 * first goes.  -n prints what would go ("would destroy NAME") and
 * destroys nothing; -v prints it ("will destroy NAME") and goes on. */
static int
admin_destroy (admin_ctx_t *c)
{
  char name[2 * ZVOL_NAME_MAX];
  zvol_dsname_t *set = NULL;
  size_t n = 0, m = 0;
  unsigned flags = 0;
  bool snap, dry = ADMIN_OPT (c, 'n');
  int r;

  if (c->c_argc != 1)
    return admin_usage (c, "destroy [-rRnv] POOL/VOL[@SNAP]");
  snap = strchr (c->c_argv[0], '@') != NULL;
  if (snap && ADMIN_OPT (c, 'r'))
    return admin_usage (c, "destroy -r: a volume, with its snapshots (-R: "
                        "a snapshot with its clones)");
  if (dry && c->c_target)
    c->c_target->at_readonly = true;      /* offline: nothing is written */
  r = admin_dataset_operand (c, 0, snap, name);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  if (ADMIN_OPT (c, 'r'))
    flags |= ZVOL_DESTROY_SNAPSHOTS;
  if (ADMIN_OPT (c, 'R'))
    flags |= ZVOL_DESTROY_SNAPSHOTS | ZVOL_DESTROY_CLONES;
  /* The set, then its names (a second call: the count may have grown in
   * between, on a server; then the set is read again). */
  for (int tries = 0; tries < 4; tries++) {
    if (zvol_destroy_plan (c->c_pool, name, flags, set, m, &n) < 0) {
      free (set);
      return ZVOL_ADMIN_FAIL;
    }
    if (n <= m)
      break;
    free (set);
    m = n;
    set = zv_calloc (m, sizeof *set);
  }
  if (n > m) {
    free (set);
    admin_err (c, "the pool's datasets keep changing: try again");
    return ZVOL_ADMIN_FAIL;
  }
  if (dry || ADMIN_OPT (c, 'v'))
    for (size_t i = 0; i < n; i++)
      fprintf (c->c_out, "%s destroy %s/%s\n", dry ? "would" : "will",
               zvol_pool_name (c->c_pool), set[i].dn_name);
  fflush (c->c_out);
  r = admin_result (zvol_exports_destroy_set (c->c_ex, set, n, dry));
  free (set);
  return r;
}

/* snapshot POOL/VOL@SNAP...: each taken while clients write (it holds
 * every write acknowledged before it). */
static int
admin_snapshot (admin_ctx_t *c)
{
  char name[2 * ZVOL_NAME_MAX];
  int r = ZVOL_ADMIN_OK;

  if (c->c_argc < 1)
    return admin_usage (c, "snapshot POOL/VOL@SNAP...");
  for (int k = 0; k < c->c_argc && r == ZVOL_ADMIN_OK; k++)
    r = admin_dataset_operand (c, k, true, name);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  for (int k = 0; k < c->c_argc && r == ZVOL_ADMIN_OK; k++) {
    admin_dataset_operand (c, k, true, name);
    r = admin_result (zvol_snapshot_create (c->c_pool, name));
  }
  return r;
}

/* rollback [-r] POOL/VOL@SNAP: to the newest snapshot, or with -r to an
 * older one, destroying the newer; refused while a client has VOL open. */
static int
admin_rollback (admin_ctx_t *c)
{
  char name[2 * ZVOL_NAME_MAX];
  int r;

  if (c->c_argc != 1)
    return admin_usage (c, "rollback [-r] POOL/VOL@SNAP");
  r = admin_dataset_operand (c, 0, true, name);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  return admin_result (zvol_exports_rollback (c->c_ex, name,
                                              ADMIN_OPT (c, 'r')));
}

/* clone [-r RESERVATION] POOL/VOL@SNAP POOL/NEWVOL: a writable volume
 * sharing the snapshot's blocks (thin unless -r). */
static int
admin_clone (admin_ctx_t *c)
{
  char snap[2 * ZVOL_NAME_MAX], vol[2 * ZVOL_NAME_MAX];
  zvol_volume_params_t vp = { 0 };
  int r;

  if (c->c_argc != 2)
    return admin_usage (c, "clone [-r RESERVATION] POOL/VOL@SNAP POOL/VOL");
  if (ADMIN_OPT (c, 'r') && admin_opt_size (c, 'r', &vp.vp_reservation) < 0)
    return ZVOL_ADMIN_USAGE;
  r = admin_dataset_operand (c, 0, true, snap);
  if (r == ZVOL_ADMIN_OK)
    r = admin_dataset_operand (c, 1, false, vol);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  return admin_result (zvol_volume_clone (c->c_pool, snap, vol, &vp));
}

static int
admin_diff_cb (void *arg, uint64_t off, uint64_t len, unsigned kind)
{
  admin_ctx_t *c = arg;

  fprintf (c->c_out, "%s\t%" PRIu64 "\t%" PRIu64 "\n",
           kind == ZVOL_DIFF_FREED ? "freed" : "written", off, len);
  return 0;
}

/* diff POOL/VOL@A POOL/VOL[@B]: the byte ranges written or freed from A
 * to B (or to the volume, closed), one "written|freed OFFSET LENGTH"
 * line each, for a backup tool that copies them (nbdcopy). */
static int
admin_diff (admin_ctx_t *c)
{
  char from[2 * ZVOL_NAME_MAX], to[2 * ZVOL_NAME_MAX];
  int r;

  if (c->c_argc != 2)
    return admin_usage (c, "diff POOL/VOL@SNAP POOL/VOL[@SNAP]");
  r = admin_dataset_operand (c, 0, true, from);
  if (r == ZVOL_ADMIN_OK)
    r = admin_dataset_operand (c, 1, strchr (c->c_argv[1], '@') != NULL, to);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  return admin_result (zvol_diff (c->c_pool, from, to, admin_diff_cb, c));
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

/* The listing's columns (-o), as zfs list names them. */
typedef struct admin_col {
  const char *co_name, *co_head;
  int co_width;                 /* < 0: left-aligned */
} admin_col_t;

static const admin_col_t admin_cols[] = {
  { "name", "NAME", -24 }, { "used", "USED", 8 }, { "avail", "AVAIL", 8 },
  { "refer", "REFER", 8 }, { "volsize", "VOLSIZE", 8 },
  { "written", "WRITTEN", 8 }, { "usedbysnapshots", "USEDSNAP", 8 },
  { "reservation", "RESERV", 8 }, { "volblocksize", "VOLBLOCK", 8 },
  { "type", "TYPE", -8 }, { "origin", "ORIGIN", -24 },
  { "creation", "CREATION", 10 }, { "compression", "COMPRESS", -8 },
  { "compressratio", "RATIO", 6 }, { "logicalused", "LUSED", 8 },
};
#define ADMIN_NCOLS (sizeof admin_cols / sizeof admin_cols[0])
#define ADMIN_DEFAULT_COLS "name,used,avail,refer,volsize"

/* Parse -o into column indexes: the count, or -1 (usage). */
static int
admin_list_cols (admin_ctx_t *c, unsigned *cols)
{
  const char *o = ADMIN_OPT (c, 'o') ? c->c_val['o'] : ADMIN_DEFAULT_COLS;
  int n = 0;

  while (*o) {
    size_t len = strcspn (o, ",");
    size_t i;
    for (i = 0; i < ADMIN_NCOLS; i++)
      if (strlen (admin_cols[i].co_name) == len
          && strncmp (admin_cols[i].co_name, o, len) == 0)
        break;
    if (i == ADMIN_NCOLS || n == (int) ADMIN_NCOLS)
      return -1;
    cols[n++] = (unsigned) i;
    o += len + (o[len] == ',');
  }
  return n;
}

/* One field of a dataset's line; "-" where the kind has none. */
static void
admin_field (zvol_pool_t *p, const zvol_volume_info_t *v, unsigned col,
             bool exact, char *val, size_t len)
{
  bool snap = v->vi_kind == ZVOL_KIND_SNAPSHOT;
  uint64_t num;

  switch (col) {
  case 0:
    snprintf (val, len, "%s/%s", zvol_pool_name (p), v->vi_name);
    return;
  case 1: num = v->vi_used; break;
  case 2: num = v->vi_avail; break;
  case 3: num = v->vi_referenced; break;
  case 4: num = v->vi_volsize; break;
  case 5: num = v->vi_written; break;
  case 6: num = v->vi_usedbysnapshots; break;
  case 7: num = v->vi_reservation; break;
  case 8: num = v->vi_blocksize; break;
  case 9:
    snprintf (val, len, "%s", snap ? "snapshot" : "volume");
    return;
  case 10:
    if (v->vi_origin[0])
      snprintf (val, len, "%s/%s", zvol_pool_name (p), v->vi_origin);
    else
      snprintf (val, len, "-");
    return;
  case 11:
    snprintf (val, len, "%" PRIu64, v->vi_creation_time);
    return;
  case 12:
    zvol_compression_name (v->vi_compression, val, len);
    return;
  case 13:
    /* As zfs's: the logical bytes of the data over what it takes on
     * disk (a snapshot's are its volume's at the time: not kept). */
    if (snap)
      snprintf (val, len, "-");
    else
      snprintf (val, len, "%.2fx", v->vi_written == 0 ? 1.0
                : (double) v->vi_logicalused / (double) v->vi_written);
    return;
  default:
    num = v->vi_logicalused;
    break;
  }
  if (snap && (col == 2 || col == 6 || col == 7 || col == 14))
    snprintf (val, len, "-");
  else
    zvol_admin_size (val, len, num, exact);
}

static void
admin_list_pool (admin_ctx_t *c, bool scripted, bool exact, unsigned kinds,
                 const unsigned *cols, int ncols)
{
  zvol_pool_t *p = c->c_pool;
  size_t n = zvol_dataset_list (p, kinds, NULL, 0);
  zvol_volume_info_t *vi = zv_calloc (n ? n : 1, sizeof *vi);

  n = ZV_MIN (n, zvol_dataset_list (p, kinds, vi, n));
  for (size_t i = 0; i < n; i++) {
    for (int k = 0; k < ncols; k++) {
      char val[3 * ZVOL_NAME_MAX];
      admin_field (p, &vi[i], cols[k], exact, val, sizeof val);
      if (scripted)
        fprintf (c->c_out, "%s%s", k ? "\t" : "", val);
      else
        fprintf (c->c_out, "%s%*s", k ? "  " : "",
                 admin_cols[cols[k]].co_width, val);
    }
    fputc ('\n', c->c_out);
  }
  free (vi);
}

/* list [-H] [-p] [-t TYPE] [-o COLS] [POOL]...: without POOL, this
 * pool; a POOL that is not this one fails (zvoladm runs the command once
 * per pool it names).  TYPE: volume (the default), snapshot, all. */
static int
admin_list (admin_ctx_t *c)
{
  bool scripted = ADMIN_OPT (c, 'H'), exact = ADMIN_OPT (c, 'p'), match;
  int rc = ZVOL_ADMIN_OK;
  unsigned cols[ADMIN_NCOLS], kinds = ZVOL_LIST_VOLUMES;
  int ncols = admin_list_cols (c, cols);

  if (ncols <= 0)
    return admin_usage (c, "list -o: a comma-separated list of name, used, "
                        "avail, refer, volsize, written, usedbysnapshots, "
                        "reservation, volblocksize, type, origin, creation, "
                        "compression, compressratio, logicalused");
  if (ADMIN_OPT (c, 't')) {
    const char *t = c->c_val['t'];
    if (strcmp (t, "snapshot") == 0)
      kinds = ZVOL_LIST_SNAPSHOTS;
    else if (strcmp (t, "all") == 0)
      kinds = ZVOL_LIST_VOLUMES | ZVOL_LIST_SNAPSHOTS;
    else if (strcmp (t, "volume") != 0)
      return admin_usage (c, "list -t: volume, snapshot or all");
  }

  for (int k = 0; k < c->c_argc; k++) {
    int r = admin_pool_operand (c, k, &match);
    if (r != ZVOL_ADMIN_OK)
      return r;
  }
  if (c->c_ex == NULL)
    return ZVOL_ADMIN_OK;
  if (!scripted && !(c->c_flags & ZVOL_ADMIN_NOHEADER)) {
    for (int k = 0; k < ncols; k++)
      fprintf (c->c_out, "%s%*s", k ? "  " : "", admin_cols[cols[k]].co_width,
               admin_cols[cols[k]].co_head);
    fputc ('\n', c->c_out);
  }
  if (c->c_argc == 0)
    admin_list_pool (c, scripted, exact, kinds, cols, ncols);
  for (int k = 0; k < c->c_argc; k++) {
    admin_pool_operand (c, k, &match);
    if (match)
      admin_list_pool (c, scripted, exact, kinds, cols, ncols);
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

/* set compression=VALUE POOL/VOL: offline, or live while clients
 * write (the next txg's writes use it). */
static int
admin_set (admin_ctx_t *c)
{
  char vol[2 * ZVOL_NAME_MAX];
  const char *val;
  int r;

  if (c->c_argc != 2)
    return admin_usage (c, "set compression=VALUE POOL/VOL");
  if (strncmp (c->c_argv[0], "compression=", 12) != 0)
    return admin_usage (c, "set: compression=off|lz4|zstd|zstd-N is the "
                        "property that can be set");
  val = c->c_argv[0] + 12;
  r = admin_dataset_operand (c, 1, false, vol);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  return admin_result (zvol_volume_set_compression (c->c_pool, vol, val));
}

/* get [-H] [-p] PROP[,PROP]... POOL/VOL[@SNAP]: one "NAME PROPERTY VALUE"
 * line per property (the listing's columns), as zfs get. */
static int
admin_get (admin_ctx_t *c)
{
  char name[2 * ZVOL_NAME_MAX];
  unsigned cols[ADMIN_NCOLS];
  const char *saved = c->c_val['o'];
  bool seen = c->c_seen['o'], scripted = ADMIN_OPT (c, 'H');
  int ncols, r;

  if (c->c_argc != 2)
    return admin_usage (c, "get [-H] [-p] PROP[,PROP]... POOL/VOL[@SNAP]");
  c->c_seen['o'] = true;
  c->c_val['o'] = c->c_argv[0];
  ncols = admin_list_cols (c, cols);
  c->c_seen['o'] = seen;
  c->c_val['o'] = saved;
  if (ncols <= 0)
    return admin_usage (c, "get: a comma-separated list of the columns of "
                        "list -o (compression, compressratio, logicalused, "
                        "used, ...)");
  r = admin_dataset_operand (c, 1, strchr (c->c_argv[1], '@') != NULL, name);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;

  size_t n = zvol_dataset_list (c->c_pool, ZVOL_LIST_VOLUMES
                                | ZVOL_LIST_SNAPSHOTS, NULL, 0);
  zvol_volume_info_t *vi = zv_calloc (n ? n : 1, sizeof *vi);
  const zvol_volume_info_t *v = NULL;

  n = ZV_MIN (n, zvol_dataset_list (c->c_pool, ZVOL_LIST_VOLUMES
                                    | ZVOL_LIST_SNAPSHOTS, vi, n));
  for (size_t i = 0; i < n && v == NULL; i++)
    if (strcmp (vi[i].vi_name, name) == 0)
      v = &vi[i];
  if (v == NULL) {
    char shown[8 * ZVOL_NAME_MAX + 8];
    zv_str_printable (name, 2 * ZVOL_NAME_MAX, shown, sizeof shown);
    admin_err (c, "pool '%s' has no dataset '%s'", zvol_pool_name (c->c_pool),
               shown);
    free (vi);
    return ZVOL_ADMIN_FAIL;
  }
  if (!scripted && !(c->c_flags & ZVOL_ADMIN_NOHEADER))
    fprintf (c->c_out, "%-24s  %-14s  %s\n", "NAME", "PROPERTY", "VALUE");
  for (int k = 0; k < ncols; k++) {
    char val[3 * ZVOL_NAME_MAX];
    admin_field (c->c_pool, v, cols[k], ADMIN_OPT (c, 'p'), val, sizeof val);
    if (scripted)
      fprintf (c->c_out, "%s/%s\t%s\t%s\n", zvol_pool_name (c->c_pool),
               v->vi_name, admin_cols[cols[k]].co_name, val);
    else {
      char full[3 * ZVOL_NAME_MAX];
      snprintf (full, sizeof full, "%s/%s", zvol_pool_name (c->c_pool),
                v->vi_name);
      fprintf (c->c_out, "%-24s  %-14s  %s\n", full,
               admin_cols[cols[k]].co_name, val);
    }
  }
  free (vi);
  return ZVOL_ADMIN_OK;
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
/* A duration as status prints it: 1h02m03s, 2m03s, 3s. */
static void
admin_duration (char *buf, size_t len, uint64_t s)
{
  if (s >= 3600)
    snprintf (buf, len, "%" PRIu64 "h%02" PRIu64 "m%02" PRIu64 "s",
              s / 3600, s / 60 % 60, s % 60);
  else if (s >= 60)
    snprintf (buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
  else
    snprintf (buf, len, "%" PRIu64 "s", s);
}

/* The scrub's lines of status (and of scrub -w), as zpool status -v
 * shows its scan and its permanent errors. */
static void
admin_scrub_print (FILE *o, const zvol_scrub_status_t *st)
{
  static const char *const state[] = {
    [ZVOL_SCRUB_NONE] = "none requested",
    [ZVOL_SCRUB_SCANNING] = "scrub in progress",
    [ZVOL_SCRUB_PAUSED] = "scrub paused",
    [ZVOL_SCRUB_FINISHED] = "scrub finished",
    [ZVOL_SCRUB_CANCELED] = "scrub canceled",
  };
  char e[32], t[32], r[32], d[32];

  if (st->ss_state == ZVOL_SCRUB_NONE) {
    fprintf (o, "  scan: none requested\n");
    return;
  }
  zvol_admin_size (e, sizeof e, st->ss_examined, false);
  zvol_admin_size (t, sizeof t, st->ss_total, false);
  zvol_admin_size (r, sizeof r, st->ss_rate, false);
  admin_duration (d, sizeof d, st->ss_elapsed_ns / 1000000000ull);
  fprintf (o, "  scan: %s%s%s%s, %s examined of %s (%.1f%%) in %s", 
           state[st->ss_state], st->ss_error ? " (" : "",
           st->ss_error ? strerror (-st->ss_error) : "",
           st->ss_error ? ")" : "", e, t, st->ss_total
           ? 100.0 * (double) ZV_MIN (st->ss_examined, st->ss_total)
           / (double) st->ss_total
           : st->ss_state == ZVOL_SCRUB_FINISHED ? 100.0 : 0.0, d);
  if (st->ss_state == ZVOL_SCRUB_SCANNING) {
    admin_duration (d, sizeof d, st->ss_eta_s);
    fprintf (o, ", %s/s, %s to go", r, st->ss_rate ? d : "?");
  }
  fprintf (o, "\n        repaired %" PRIu64 " copies, repairs failed %"
           PRIu64 ", blocks that could not be repaired %" PRIu64
           " (checksum errors %" PRIu64 ", read errors %" PRIu64 ")\n",
           st->ss_repaired, st->ss_repair_failed, st->ss_lost,
           st->ss_cksum_errors, st->ss_read_errors);
  if (st->ss_other > 0)
    fprintf (o, "        other problems %" PRIu64 " (space accounting: "
             "zvoladm check says which)\n", st->ss_other);
  if (st->ss_ndamaged == 0)
    return;
  fprintf (o, "damaged: blocks no copy of which verifies (their data is "
           "lost):\n");
  for (uint64_t i = 0; i < st->ss_ndamaged && i < ZVOL_SCRUB_DAMAGED_MAX;
       i++) {
    const zvol_scrub_damaged_t *dm = &st->ss_damaged[i];
    if (dm->sd_length > 0)
      fprintf (o, "        %s offset %" PRIu64 ", %" PRIu64 " bytes\n",
               dm->sd_dataset, dm->sd_offset, dm->sd_length);
    else
      fprintf (o, "        %s\n", dm->sd_dataset);
  }
  if (st->ss_ndamaged > ZVOL_SCRUB_DAMAGED_MAX)
    fprintf (o, "        ... and %" PRIu64 " more (the server's log says "
             "which)\n", st->ss_ndamaged - ZVOL_SCRUB_DAMAGED_MAX);
}


/* The POOL operand (argument 0) of a command that runs on the served
 * pool: *runp true when it names c->c_pool and the command is to run;
 * false, with what to return, otherwise (an error, or nothing to do
 * outside a server). */
static int
admin_live_pool (admin_ctx_t *c, bool *runp)
{
  bool match;
  int r = admin_pool_operand (c, 0, &match);

  *runp = false;
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  if (!match) {
    admin_err (c, "not this pool (%s)", zvol_pool_name (c->c_pool));
    return ZVOL_ADMIN_FAIL;
  }
  *runp = true;
  return ZVOL_ADMIN_OK;
}

/* replace POOL OLD NEW: a side of a mirror by another device, resilvered
 * in the background (status shows how far). */
static int
admin_replace (admin_ctx_t *c)
{
  bool run;
  int r;

  if (c->c_argc != 3)
    return admin_usage (c, "replace POOL OLD NEW");
  r = admin_live_pool (c, &run);
  if (!run)
    return r;
  r = zvol_pool_replace (c->c_pool, c->c_argv[1], c->c_argv[2]);
  if (r < 0)
    return ZVOL_ADMIN_FAIL;
  fprintf (c->c_out, "replaced %s by %s: resilvering (zvoladm status "
           "shows how far)\n", c->c_argv[1], c->c_argv[2]);
  return ZVOL_ADMIN_OK;
}

/* status [POOL]: the pool's state (healthy, read-only, or suspended by
 * a failed sync, with the error), its devices with their error counts
 * (as zpool status: failed reads and writes, copies that did not
 * verify), space, txgs and the number of volumes and snapshots. */
static int
admin_status (admin_ctx_t *c)
{
  zvol_scrub_status_t ss;
  zvol_pool_stats_t ps;
  char a[32], b[32], d[32], f[32];
  bool match = true;
  uint64_t nerr = 0;
  int err;

  if (c->c_argc > 1)
    return admin_usage (c, "status [POOL]");
  if (c->c_argc == 1) {
    int r = admin_pool_operand (c, 0, &match);
    if (r != ZVOL_ADMIN_OK)
      return r;
  }
  if (c->c_ex == NULL)
    return ZVOL_ADMIN_OK;
  if (!match) {
    admin_err (c, "not this pool (%s)", zvol_pool_name (c->c_pool));
    return ZVOL_ADMIN_FAIL;
  }
  zvol_pool_get_stats (c->c_pool, &ps);
  err = zvol_pool_error (c->c_pool);
  fprintf (c->c_out, "  pool: %s\n  guid: %016" PRIx64 "\n", ps.ps_name,
           ps.ps_guid);
  if (err != 0)
    fprintf (c->c_out, " state: SUSPENDED (a txg sync failed: %s; writes "
             "fail until the pool is imported again)\n", strerror (-err));
  else
    fprintf (c->c_out, " state: %s%s\n", ps.ps_degraded
             || ps.ps_resilver_active ? "DEGRADED"
             : "ONLINE", zvol_pool_is_readonly (c->c_pool)
             ? " (read-only)" : "");
  if (ps.ps_degraded)
    fprintf (c->c_out, "status: a side of a mirror is out of service; the "
             "pool goes on without it (the server's log says why)\n");
  if (ps.ps_resilver_active)
    fprintf (c->c_out, "resilver: device %u side %u, %" PRIu64 " of %"
             PRIu64 " bytes of its data area done (%.1f%%)\n",
             ps.ps_resilver_dev, ps.ps_resilver_side, ps.ps_resilver_done,
             ps.ps_resilver_total, ps.ps_resilver_total
             ? 100.0 * (double) ps.ps_resilver_done
             / (double) ps.ps_resilver_total : 100.0);
  fprintf (c->c_out, "devices:\n  %4s %6s %6s %6s  %s\n", "DEV", "READ",
           "WRITE", "CKSUM", "PATH");
  for (unsigned i = 0; i < ps.ps_ndevs && i < ZVOL_MAX_DEVS; i++) {
    fprintf (c->c_out, "  %4u %6" PRIu64 " %6" PRIu64 " %6" PRIu64
             "  %s%s\n", i, ps.ps_dev_read_errors[i],
             ps.ps_dev_write_errors[i], ps.ps_dev_cksum_errors[i],
             ps.ps_dev_path[i] ? ps.ps_dev_path[i] : "?",
             ps.ps_dev_direct[i] ? "" : "  (no direct I/O)");
    nerr += ps.ps_dev_read_errors[i] + ps.ps_dev_write_errors[i]
      + ps.ps_dev_cksum_errors[i];
    /* A mirror: its state, then each side (as zpool status indents the
     * leaves under their mirror), with its own counters. */
    if (ps.ps_dev_nsides[i] > 0)
      fprintf (c->c_out, "  %4s %6s %6s %6s    mirror %s\n", "", "", "", "",
               ps.ps_dev_degraded[i] ? "DEGRADED" : "ONLINE");
    for (unsigned s = 0; s < ps.ps_dev_nsides[i] && s < ZVOL_MAX_SIDES;
         s++) {
      const zvol_side_stats_t *sd = &ps.ps_dev_sides[i][s];

      fprintf (c->c_out, "  %4s %6" PRIu64 " %6" PRIu64 " %6" PRIu64
               "    side %u %-8s %s  (%" PRIu64 " reads, %" PRIu64
               " writes)%s%s\n", "", sd->ss_read_errors,
               sd->ss_write_errors, sd->ss_cksum_errors, s,
               sd->ss_online ? "ONLINE" : sd->ss_resilvering
               ? "RESILVERING" : "FAULTED",
               sd->ss_path ? sd->ss_path : "?", sd->ss_reads, sd->ss_writes,
               sd->ss_online || sd->ss_resilvering ? "" : ": ", sd->ss_why);
      nerr += sd->ss_read_errors + sd->ss_write_errors + sd->ss_cksum_errors;
    }
  }
  if (ps.ps_logdev_path != NULL) {
    fprintf (c->c_out, "  %4s %6" PRIu64 " %6" PRIu64 " %6" PRIu64 "  %s\n",
             "log", ps.ps_logdev_read_errors, ps.ps_logdev_write_errors,
             ps.ps_logdev_cksum_errors, ps.ps_logdev_path);
    nerr += ps.ps_logdev_read_errors + ps.ps_logdev_write_errors
      + ps.ps_logdev_cksum_errors;
  }
  if (nerr == 0)
    fprintf (c->c_out, "errors: none since the pool was opened\n");
  else
    fprintf (c->c_out, "errors: %" PRIu64 " since the pool was opened (the "
             "server's log says where)\n", nerr);
  zvol_admin_size (a, sizeof a, ps.ps_space_total, false);
  zvol_admin_size (b, sizeof b, ps.ps_space_allocated, false);
  zvol_admin_size (d, sizeof d, ps.ps_space_deferred, false);
  zvol_admin_size (f, sizeof f, zvol_pool_avail (c->c_pool), false);
  fprintf (c->c_out, " space: %s, %s allocated (%s of it freed, back in "
           "two txgs), %s available\n", a, b, d, f);
  if (ps.ps_space_held > 0) {
    zvol_admin_size (d, sizeof d, ps.ps_space_held, false);
    fprintf (c->c_out, "  held: %s freed, kept allocated until the "
             "running check ends\n", d);
  }
  zvol_admin_size (a, sizeof a, ps.ps_freeing, false);
  if (ps.ps_freeing_datasets > 0)
    fprintf (c->c_out, "freeing: %s, of %" PRIu64 " destroyed dataset%s "
             "(freed in the background%s)\n", a, ps.ps_freeing_datasets,
             ps.ps_freeing_datasets == 1 ? "" : "s",
             zvol_pool_is_readonly (c->c_pool)
             ? " by a read-write import" : "");
  else
    fprintf (c->c_out, "freeing: 0\n");
  fprintf (c->c_out, "   txg: %" PRIu64 " synced\n", ps.ps_txg_synced);
  fprintf (c->c_out, "  data: %zu volumes, %zu snapshots\n",
           zvol_dataset_list (c->c_pool, ZVOL_LIST_VOLUMES, NULL, 0),
           zvol_dataset_list (c->c_pool, ZVOL_LIST_SNAPSHOTS, NULL, 0));
  zvol_scrub_get_status (c->c_pool, &ss);
  admin_scrub_print (c->c_out, &ss);
  return err != 0 ? ZVOL_ADMIN_FAIL : ZVOL_ADMIN_OK;
}

/* ---- streams: send, receive ---- */

/* The stream of c's command, checked (type, direction, no terminal):
 * ZVOL_ADMIN_OK and *fdp, or a failure said. */
static int
admin_stream_fd (admin_ctx_t *c, bool out, int *fdp)
{
  int fd = c->c_io ? c->c_io->ai_stream_fd : -1;
  char why[160];

  if (fd < 0) {
    admin_err (c, "%s: no stream (zvoladm gives it its standard %s)",
               c->c_cmd->ac_name, out ? "output" : "input");
    return ZVOL_ADMIN_FAIL;
  }
  if (zv_streamio_check (fd, out, why, sizeof why) < 0) {
    admin_err (c, "%s: %s", c->c_cmd->ac_name, why);
    return ZVOL_ADMIN_FAIL;
  }
  *fdp = fd;
  return ZVOL_ADMIN_OK;
}

/* Set up the stream of the command (checked, as admin_stream_fd). */
static int
admin_stream_io (admin_ctx_t *c, bool out, zv_streamio_t *si,
                 zvol_stream_io_t *io)
{
  const zvol_admin_io_t *a = c->c_io;
  int fd, r = admin_stream_fd (c, out, &fd);

  if (r != ZVOL_ADMIN_OK)
    return r;
  zv_streamio_init (si, fd, out, a->ai_cancel_fd, c->c_cmd->ac_name,
                    ADMIN_OPT (c, 'v'), a->ai_progress, a->ai_progress_arg,
                    c->c_err, io);
  return ZVOL_ADMIN_OK;
}

/* A stream command's result, its failure said with the operand. */
static int
admin_stream_result (admin_ctx_t *c, int r)
{
  if (r < 0) {
    char shown[4 * ZVOL_NAME_MAX + 8];
    zv_str_printable (c->c_argv[0], 2 * ZVOL_NAME_MAX, shown, sizeof shown);
    admin_err (c, "%s %s failed: %s", c->c_cmd->ac_name, shown,
               strerror (-r));
  }
  return admin_result (r);
}

/* send [-v] [-i POOL/VOL@FROM] POOL/VOL@SNAP: the snapshot as a stream
 * on the caller's stream (live: the client's stdout, passed to the
 * server), full or from the older snapshot FROM; the volume may be
 * served meanwhile (a snapshot does not change). */
static int
admin_send (admin_ctx_t *c)
{
  char snap[2 * ZVOL_NAME_MAX], from[2 * ZVOL_NAME_MAX];
  const char *fa = c->c_val['i'];
  bool incr = ADMIN_OPT (c, 'i');
  zv_streamio_t si;
  zvol_stream_io_t io;
  int r;

  if (c->c_argc != 1)
    return admin_usage (c, "send [-v] [-i POOL/VOL@FROM] POOL/VOL@SNAP");
  r = admin_dataset_operand (c, 0, true, snap);
  if (r == ZVOL_ADMIN_OK && incr) {
    size_t pl = strcspn (c->c_argv[0], "/");
    if (strncmp (fa, c->c_argv[0], pl) != 0 || fa[pl] != '/')
      return admin_usage (c, "send -i: a snapshot POOL/VOL@FROM of the "
                          "same pool");
    r = admin_dataset_arg (c, fa, true, from);
  }
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  r = admin_stream_io (c, true, &si, &io);
  if (r != ZVOL_ADMIN_OK)
    return r;
  return admin_stream_result (c, zvol_send (c->c_pool, snap,
                                            incr ? from : NULL, &io));
}

/* receive [-v] POOL/VOL[@SNAP]: a stream from the caller's stream into
 * a new volume (full) or VOL (incremental), VOL unheld meanwhile (live:
 * refused while a client has it open); a failure, a cut stream or a
 * client gone mid-way leaves nothing of it.  A new volume is served at
 * once. */
static int
admin_receive (admin_ctx_t *c)
{
  char name[2 * ZVOL_NAME_MAX];
  zv_streamio_t si;
  zvol_stream_io_t io;
  int r;

  if (c->c_argc != 1)
    return admin_usage (c, "receive [-v] POOL/VOL[@SNAP]");
  r = admin_dataset_operand (c, 0, strchr (c->c_argv[0], '@') != NULL,
                             name);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  r = admin_stream_io (c, false, &si, &io);
  if (r != ZVOL_ADMIN_OK)
    return r;
  return admin_stream_result (c, zvol_exports_receive (c->c_ex, name, &io));
}

/* check [-v] POOL: the whole pool walked and compared with its space
 * maps.  Offline zvoladm runs zvol_pool_check on the devices itself;
 * here, on a served pool, zvol_pool_check_live does it as of the last
 * committed txg, whose blocks a hold keeps while the walk runs (check.c).
 * It takes no turn of "one command at a time" (ctl.c: it may take
 * hours; the hold, not a lock, keeps a second one out), so snapshots
 * and the rest run beside it; it stops when the client goes or the
 * server stops (the cancel descriptors).  The report is the offline
 * one (cmd/zvoladm.c, za_check): both print with zvol_check_print_*. */
typedef struct admin_check {
  admin_ctx_t *ak_c;
  uint64_t ak_last_ns;
} admin_check_t;

void
zvol_check_progress_line (char *buf, size_t len, const char *what,
                          uint64_t done, uint64_t total)
{
  char d[32], t[32];

  zvol_admin_size (d, sizeof d, done, false);
  zvol_admin_size (t, sizeof t, total, false);
  snprintf (buf, len, "%s: %s of %s (%.1f%%)\n", what, d, t,
            total ? 100.0 * (double) done / (double) total : 100.0);
}

void
zvol_check_print_problem (void *printer, const zvol_check_problem_t *cp)
{
  zvol_check_printer_t *pr = printer;

  if (cp->cp_kind <= ZVOL_CHECK_LEAK
      && pr->cp_shown[cp->cp_kind]++ < ZVOL_CHECK_PRINT_LIST)
    fprintf (pr->cp_out, "%s\n", cp->cp_msg);
  else
    pr->cp_more++;
}

bool
zvol_check_print_summary (const zvol_check_printer_t *pr, const char *pool,
                          const zvol_check_report_t *rep)
{
  FILE *o = pr->cp_out;
  char b1[32], b2[32];

  if (pr->cp_more > 0)
    fprintf (o, "... and %" PRIu64 " more problems (counted below)\n",
             pr->cp_more);
  zvol_admin_size (b1, sizeof b1, rep->cr_bytes, false);
  zvol_admin_size (b2, sizeof b2, rep->cr_allocated, false);
  fprintf (o, "%s: %" PRIu64 " trees, %" PRIu64 " blocks, %s read and "
           "verified (%s allocated)\n", pool, rep->cr_trees,
           rep->cr_blocks, b1, b2);
  fprintf (o, "  checksum errors %" PRIu64 ", read errors %" PRIu64
           ", blocks lost %" PRIu64 ", trees not walked to the end %" PRIu64
           "\n", rep->cr_cksum_errors, rep->cr_read_errors,
           rep->cr_lost_blocks, rep->cr_incomplete);
  zvol_admin_size (b1, sizeof b1, rep->cr_leaked_bytes, false);
  zvol_admin_size (b2, sizeof b2, rep->cr_double_bytes, false);
  fprintf (o, "  leaked %s in %" PRIu64 " extents, doubly allocated %s in %"
           PRIu64 " extents, pointers at free space %" PRIu64 "\n", b1,
           rep->cr_leaked, b2, rep->cr_double, rep->cr_free_refs);
  if (pr->cp_scrub) {
    uint64_t left = rep->cr_problems - ZV_MIN (rep->cr_repaired,
                                               rep->cr_problems);
    fprintf (o, "  repaired %" PRIu64 " copies, repairs failed %" PRIu64
             ", blocks that could not be repaired %" PRIu64 "\n",
             rep->cr_repaired, rep->cr_repair_failed, rep->cr_lost_blocks);
    if (rep->cr_problems == 0)
      fprintf (o, "No problems found.\n");
    else if (left == 0)
      fprintf (o, "All damage found was repaired.\n");
    else
      fprintf (o, "Problems remain.\n");
    return left == 0;
  }
  fprintf (o, "%s\n", rep->cr_problems == 0 ? "No problems found."
           : "Problems found.");
  return rep->cr_problems == 0;
}

static void
admin_check_progress (void *arg, const char *what, uint64_t done,
                      uint64_t total)
{
  admin_check_t *ak = arg;
  const zvol_admin_io_t *io = ak->ak_c->c_io;
  uint64_t now = zv_now_ns ();
  char line[160];

  if (done < total && ak->ak_last_ns != 0
      && now - ak->ak_last_ns < 1000000000ull)
    return;
  ak->ak_last_ns = now;
  zvol_check_progress_line (line, sizeof line, what, done, total);
  if (io && io->ai_progress)
    io->ai_progress (io->ai_progress_arg, line);
  else {
    fputs (line, ak->ak_c->c_err);
    fflush (ak->ak_c->c_err);
  }
}

static int
admin_check (admin_ctx_t *c)
{
  admin_check_t ak = { .ak_c = c };
  zvol_check_printer_t pr = { .cp_out = c->c_out };
  zvol_check_report_t rep = {
    .cr_problem = zvol_check_print_problem, .cr_problem_arg = &pr,
  };
  const char *name;
  bool run;
  int r;

  if (c->c_argc != 1)
    return admin_usage (c, "check [-v] POOL");
  r = admin_live_pool (c, &run);
  if (!run)
    return r;
  name = zvol_pool_name (c->c_pool);
  r = zvol_pool_check_live (c->c_pool, &rep, c->c_io
                            ? c->c_io->ai_cancel_fd : NULL,
                            ADMIN_OPT (c, 'v') ? admin_check_progress : NULL,
                            &ak);
  if (r < 0) {
    admin_err (c, "pool %s: the check %s (%s)", name, r == -ECANCELED
               || r == -ENOSPC ? "was cancelled" : "did not run",
               strerror (-r));
    return ZVOL_ADMIN_FAIL;
  }
  return zvol_check_print_summary (&pr, name, &rep) ? ZVOL_ADMIN_OK
    : ZVOL_ADMIN_FAIL;
}

/* scrub [-v] [-w | -p | -s] POOL, live: the server's background scrub
 * (scrub.c) started, or resumed when paused, and with -w waited for
 * (progress with -v), its summary then as status shows it; -p pauses,
 * -s cancels.  A long command (ctl.c) for -w.  Offline cmd/zvoladm.c
 * runs zvol_pool_scrub in the foreground instead. */
static void
admin_scrub_progress (void *arg, uint64_t done, uint64_t total)
{
  admin_check_t ak = { .ak_c = arg };

  admin_check_progress (&ak, "scrub", done, total);
}

static int
admin_scrub (admin_ctx_t *c)
{
  const char *name;
  zvol_scrub_status_t st;
  bool run;
  int r;

  if (c->c_argc != 1
      || ADMIN_OPT (c, 'w') + ADMIN_OPT (c, 'p') + ADMIN_OPT (c, 's') > 1)
    return admin_usage (c, "scrub [-v] [-w | -p | -s] POOL");
  r = admin_live_pool (c, &run);
  if (!run)
    return r;
  name = zvol_pool_name (c->c_pool);
  if (ADMIN_OPT (c, 'p') || ADMIN_OPT (c, 's')) {
    bool pause = ADMIN_OPT (c, 'p');
    r = pause ? zvol_scrub_pause (c->c_pool) : zvol_scrub_cancel (c->c_pool);
    if (r == -ENOENT) {
      admin_err (c, "pool %s: no scrub is %s", name, pause ? "running"
                 : "running or paused");
      return ZVOL_ADMIN_FAIL;
    }
    zvol_scrub_get_status (c->c_pool, &st);
    fprintf (c->c_out, "pool %s: scrub %s\n", name, pause ? "paused"
             : "canceled");
    admin_scrub_print (c->c_out, &st);
    return admin_result (r);
  }
  r = zvol_scrub_start (c->c_pool);
  if (r == -EBUSY && ADMIN_OPT (c, 'w'))
    r = 2;                      /* one runs: -w waits for it */
  else if (r == -EBUSY) {
    admin_err (c, "pool %s: a scrub is running (zvoladm status shows how "
               "far; -w waits for it, -p pauses it, -s cancels it)", name);
    return ZVOL_ADMIN_FAIL;
  }
  if (r < 0)
    return admin_result (r);
  fprintf (c->c_out, "pool %s: scrub %s\n", name, r == 1 ? "resumed"
           : r == 2 ? "running" : "started");
  if (!ADMIN_OPT (c, 'w'))
    return ZVOL_ADMIN_OK;
  fflush (c->c_out);
  r = zvol_scrub_wait (c->c_pool, c->c_io ? c->c_io->ai_cancel_fd : NULL,
                       ADMIN_OPT (c, 'v') ? admin_scrub_progress : NULL, c);
  if (r < 0) {
    admin_err (c, "pool %s: the wait ended (%s); the scrub goes on", name,
               strerror (-r));
    return ZVOL_ADMIN_FAIL;
  }
  zvol_scrub_get_status (c->c_pool, &st);
  admin_scrub_print (c->c_out, &st);
  if (st.ss_state != ZVOL_SCRUB_FINISHED)
    return ZVOL_ADMIN_FAIL;
  fprintf (c->c_out, "%s\n", st.ss_problems == 0 ? "No problems found."
           : st.ss_problems == st.ss_repaired
           ? "All damage found was repaired." : "Problems remain.");
  return st.ss_problems == st.ss_repaired ? ZVOL_ADMIN_OK : ZVOL_ADMIN_FAIL;
}

/* wait POOL: until the background free of destroyed volumes and
 * snapshots is done and its space free again (offline, this import does
 * the freeing); what is left, at most once a second (live: as progress
 * frames, at once).  Live it is a long command as check is: no turn of
 * the control socket, ended by its client's going or the server's stop
 * (the free itself goes on). */
typedef struct admin_wait {
  admin_ctx_t *aw_c;
  uint64_t aw_last_ns;
} admin_wait_t;

static void
admin_wait_progress (void *arg, uint64_t left, uint64_t total)
{
  admin_wait_t *aw = arg;
  const zvol_admin_io_t *io = aw->aw_c->c_io;
  uint64_t now = zv_now_ns ();
  char a[32], b[32], line[96];

  if (left > 0 && aw->aw_last_ns != 0
      && now - aw->aw_last_ns < 1000000000ull)
    return;
  aw->aw_last_ns = now;
  zvol_admin_size (a, sizeof a, left, false);
  zvol_admin_size (b, sizeof b, total, false);
  snprintf (line, sizeof line, "freeing: %s left of %s\n", a, b);
  if (io && io->ai_progress)
    io->ai_progress (io->ai_progress_arg, line);    /* live: at once */
  else {
    fputs (line, aw->aw_c->c_err);
    fflush (aw->aw_c->c_err);
  }
}

static int
admin_wait (admin_ctx_t *c)
{
  admin_wait_t aw = { .aw_c = c };
  bool run;
  int r;

  if (c->c_argc != 1)
    return admin_usage (c, "wait POOL");
  r = admin_live_pool (c, &run);
  if (!run)
    return r;
  return admin_result (zvol_pool_wait_freeing (c->c_pool, c->c_io
                                               ? c->c_io->ai_cancel_fd : NULL,
                                               admin_wait_progress, &aw));
}

/*
 * The commands.  A new one: an entry here and its function, which
 * checks its arguments (c_ex NULL: stop there) and then works on
 * c_pool / c_ex.  ac_usage is also the man page's synopsis line.
 */
static const admin_cmd_t admin_cmds[] = {
  { "create", "V:b:sr:o:", "create POOL DEV...\n"
    "create -V SIZE [-b BLOCKSIZE] [-s | -r RESERVATION] "
    "[-o compression=VALUE] [-d DEV]... POOL/VOL", false, admin_create },
  { "destroy", "rRnv", "destroy [-rRnv] [-d DEV]... POOL/VOL[@SNAP]", false,
    admin_destroy },
  { "replace", "", "replace [-d DEV]... POOL OLD NEW", false,
    admin_replace },
  { "list", "Hpt:o:", "list [-H] [-p] [-t volume|snapshot|all] [-o COLS] "
    "[-d DEV]... [POOL]...", true, admin_list },
  { "snapshot", "", "snapshot [-d DEV]... POOL/VOL@SNAP...", false,
    admin_snapshot },
  { "rollback", "r", "rollback [-r] [-d DEV]... POOL/VOL@SNAP", false,
    admin_rollback },
  { "clone", "r:", "clone [-r RESERVATION] [-d DEV]... POOL/VOL@SNAP "
    "POOL/VOL", false, admin_clone },
  { "diff", "", "diff [-d DEV]... POOL/VOL@SNAP POOL/VOL[@SNAP]", true,
    admin_diff },
  { "set", "", "set [-d DEV]... compression=VALUE POOL/VOL", false,
    admin_set },
  { "get", "Hp", "get [-H] [-p] [-d DEV]... PROP[,PROP]... POOL/VOL[@SNAP]",
    true, admin_get },
  { "stats", "t", "stats [-t] [-d DEV]... POOL[/VOL]", true, admin_stats },
  { "status", "", "status [-d DEV]... [POOL]", true, admin_status },
  { "send", "vi:", "send [-v] [-i POOL/VOL@FROM] [-d DEV]... POOL/VOL@SNAP "
    "> STREAM", true, admin_send },
  { "receive", "v", "receive [-v] [-d DEV]... POOL/VOL[@SNAP] < STREAM",
    false, admin_receive },
  { "check", "v", "check [-v] [-d DEV]... POOL", true, admin_check },
  { "scrub", "vwps", "scrub [-v] [-w | -p | -s] [-d DEV]... POOL", true,
    admin_scrub },
  { "wait", "", "wait [-d DEV]... POOL", false, admin_wait },
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
  t->at_stream = c.c_cmd->ac_fn == admin_send ? ZVOL_ADMIN_STREAM_OUT
    : c.c_cmd->ac_fn == admin_receive ? ZVOL_ADMIN_STREAM_IN : 0;
  t->at_optind = argc - c.c_argc;
  t->at_noperands = c.c_argc;
  t->at_ndevs = c.c_ndevs;
  memcpy (t->at_devs, c.c_devs, sizeof t->at_devs);
  if (c.c_argc > 0) {
    /* set and get name the property first, the dataset last. */
    const char *a = c.c_cmd->ac_fn == admin_set || c.c_cmd->ac_fn == admin_get
      ? c.c_argv[c.c_argc - 1] : c.c_argv[0];
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
