/*
 * admin_dataset.c: the admin commands on datasets (admin.c's theory
 * comment has the command layer): create (a volume; a pool is made
 * offline only), destroy, snapshot, rollback, clone, diff, list, set
 * and get.
 *
 * Theory.  Each command checks its options and operands (POOL/VOL,
 * POOL/VOL@SNAP: admin.c's operand checks), stops there when it has no
 * pool, and otherwise calls the engine; what must find a volume unheld
 * (destroy, rollback) goes through the exports table, which refuses a
 * volume a client holds.  list and get print the same columns
 * (admin_cols, named as zfs list names them), one field at a time
 * (admin_field), sizes rounded or, with -p, exact.
 */
#include <config.h>

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "zvol.h"
#include "zv_util.h"
#include "admin_impl.h"

/* create POOL DEV... (offline: zvoladm makes the pool) or
 * create -V SIZE [-b BS] [-s | -r RESV] POOL/VOL. */
int
zv_admin_create (admin_ctx_t *c)
{
  uint64_t size = 0, bs = 0, resv = 0;
  bool thin = ADMIN_OPT (c, 's'), resv_given = ADMIN_OPT (c, 'r');
  char vol[ZVOL_NAME_MAX];
  int r;

  const char *comp = NULL;

  if (ADMIN_OPT (c, 'o')) {
    comp = c->c_val['o'];
    if (strncmp (comp, "compression=", 12) != 0)
      return zv_admin_usage (c, "create -o: compression=off|lz4|zstd|zstd-N "
                             "(the one property a volume is created with)");
    comp += 12;
  }
  if (!ADMIN_OPT (c, 'V')) {
    if (ADMIN_OPT (c, 'b') || thin || resv_given || comp)
      return zv_admin_usage (c, "-b, -s, -r and -o are for a volume "
                             "(with -V)");
    if (c->c_argc < 2 || c->c_argc - 1 > (int) ZVOL_MAX_DEVS || c->c_ndevs)
      return zv_admin_usage (c, "create POOL DEV...");
    if (c->c_target)
      c->c_target->at_make_pool = true;
    if (c->c_ex == NULL)
      return ZVOL_ADMIN_OK;
    zv_admin_err (c, "a pool is made on its devices with no server running "
                  "(zvoladm create POOL DEV...), not through a pool");
    return ZVOL_ADMIN_FAIL;
  }
  if (zv_admin_opt_size (c, 'V', &size) < 0)
    return ZVOL_ADMIN_USAGE;
  if (ADMIN_OPT (c, 'b') && (zv_admin_opt_size (c, 'b', &bs) < 0))
    return ZVOL_ADMIN_USAGE;
  if (bs > UINT32_MAX)
    return zv_admin_usage (c, "-b: not a block size");
  if (resv_given && zv_admin_opt_size (c, 'r', &resv) < 0)
    return ZVOL_ADMIN_USAGE;
  if (thin && resv_given)
    return zv_admin_usage (c, "-s (thin) and -r (a reservation) exclude each "
                           "other");
  if (c->c_argc != 1)
    return zv_admin_usage (c, "create -V SIZE POOL/VOL");
  r = zv_admin_volume_operand (c, 0, vol);
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
int
zv_admin_destroy (admin_ctx_t *c)
{
  char name[2 * ZVOL_NAME_MAX];
  zvol_dsname_t *set = NULL;
  size_t n = 0, m = 0;
  unsigned flags = 0;
  bool snap, dry = ADMIN_OPT (c, 'n');
  int r;

  if (c->c_argc != 1)
    return zv_admin_usage (c, "destroy [-rRnv] POOL/VOL[@SNAP]");
  snap = strchr (c->c_argv[0], '@') != NULL;
  if (snap && ADMIN_OPT (c, 'r'))
    return zv_admin_usage (c, "destroy -r: a volume, with its snapshots (-R: "
                           "a snapshot with its clones)");
  if (dry && c->c_target)
    c->c_target->at_readonly = true;      /* offline: nothing is written */
  r = zv_admin_dataset_operand (c, 0, snap, name);
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
    zv_admin_err (c, "the pool's datasets keep changing: try again");
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
int
zv_admin_snapshot (admin_ctx_t *c)
{
  char name[2 * ZVOL_NAME_MAX];
  int r = ZVOL_ADMIN_OK;

  if (c->c_argc < 1)
    return zv_admin_usage (c, "snapshot POOL/VOL@SNAP...");
  for (int k = 0; k < c->c_argc && r == ZVOL_ADMIN_OK; k++)
    r = zv_admin_dataset_operand (c, k, true, name);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  for (int k = 0; k < c->c_argc && r == ZVOL_ADMIN_OK; k++) {
    zv_admin_dataset_operand (c, k, true, name);
    r = admin_result (zvol_snapshot_create (c->c_pool, name));
  }
  return r;
}

/* rollback [-r] POOL/VOL@SNAP: to the newest snapshot, or with -r to an
 * older one, destroying the newer; refused while a client has VOL open. */
int
zv_admin_rollback (admin_ctx_t *c)
{
  char name[2 * ZVOL_NAME_MAX];
  int r;

  if (c->c_argc != 1)
    return zv_admin_usage (c, "rollback [-r] POOL/VOL@SNAP");
  r = zv_admin_dataset_operand (c, 0, true, name);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  return admin_result (zvol_exports_rollback (c->c_ex, name,
                                              ADMIN_OPT (c, 'r')));
}

/* clone [-r RESERVATION] POOL/VOL@SNAP POOL/NEWVOL: a writable volume
 * sharing the snapshot's blocks (thin unless -r). */
int
zv_admin_clone (admin_ctx_t *c)
{
  char snap[2 * ZVOL_NAME_MAX], vol[2 * ZVOL_NAME_MAX];
  zvol_volume_params_t vp = { 0 };
  int r;

  if (c->c_argc != 2)
    return zv_admin_usage (c, "clone [-r RESERVATION] POOL/VOL@SNAP POOL/VOL");
  if (ADMIN_OPT (c, 'r') && zv_admin_opt_size (c, 'r', &vp.vp_reservation) < 0)
    return ZVOL_ADMIN_USAGE;
  r = zv_admin_dataset_operand (c, 0, true, snap);
  if (r == ZVOL_ADMIN_OK)
    r = zv_admin_dataset_operand (c, 1, false, vol);
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
int
zv_admin_diff (admin_ctx_t *c)
{
  char from[2 * ZVOL_NAME_MAX], to[2 * ZVOL_NAME_MAX];
  int r;

  if (c->c_argc != 2)
    return zv_admin_usage (c, "diff POOL/VOL@SNAP POOL/VOL[@SNAP]");
  r = zv_admin_dataset_operand (c, 0, true, from);
  if (r == ZVOL_ADMIN_OK)
    r = zv_admin_dataset_operand (c, 1, strchr (c->c_argv[1], '@') != NULL,
                                  to);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  return admin_result (zvol_diff (c->c_pool, from, to, admin_diff_cb, c));
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

/* The pool's datasets of the kinds asked (ZVOL_LIST_*), *np of them;
 * the caller frees the array. */
static zvol_volume_info_t *
admin_datasets (zvol_pool_t *p, unsigned kinds, size_t *np)
{
  size_t n = zvol_dataset_list (p, kinds, NULL, 0);
  zvol_volume_info_t *vi = zv_calloc (n ? n : 1, sizeof *vi);

  *np = ZV_MIN (n, zvol_dataset_list (p, kinds, vi, n));
  return vi;
}

static void
admin_list_pool (admin_ctx_t *c, bool scripted, bool exact, unsigned kinds,
                 const unsigned *cols, int ncols)
{
  zvol_pool_t *p = c->c_pool;
  size_t n;
  zvol_volume_info_t *vi = admin_datasets (p, kinds, &n);

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
int
zv_admin_list (admin_ctx_t *c)
{
  bool scripted = ADMIN_OPT (c, 'H'), exact = ADMIN_OPT (c, 'p'), match;
  int rc = ZVOL_ADMIN_OK;
  unsigned cols[ADMIN_NCOLS], kinds = ZVOL_LIST_VOLUMES;
  int ncols = admin_list_cols (c, cols);

  if (ncols <= 0)
    return zv_admin_usage (c, "list -o: a comma-separated list of name, "
                           "used, avail, refer, volsize, written, "
                           "usedbysnapshots, reservation, volblocksize, "
                           "type, origin, creation, compression, "
                           "compressratio, logicalused");
  if (ADMIN_OPT (c, 't')) {
    const char *t = c->c_val['t'];
    if (strcmp (t, "snapshot") == 0)
      kinds = ZVOL_LIST_SNAPSHOTS;
    else if (strcmp (t, "all") == 0)
      kinds = ZVOL_LIST_VOLUMES | ZVOL_LIST_SNAPSHOTS;
    else if (strcmp (t, "volume") != 0)
      return zv_admin_usage (c, "list -t: volume, snapshot or all");
  }

  for (int k = 0; k < c->c_argc; k++) {
    int r = zv_admin_pool_operand (c, k, &match);
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
    zv_admin_pool_operand (c, k, &match);
    if (match)
      admin_list_pool (c, scripted, exact, kinds, cols, ncols);
    else
      rc = zv_admin_not_this_pool (c, c->c_argv[k]);
  }
  return rc;
}

/* set compression=VALUE POOL/VOL: offline, or live while clients
 * write (the next txg's writes use it). */
int
zv_admin_set (admin_ctx_t *c)
{
  char vol[2 * ZVOL_NAME_MAX];
  const char *val;
  int r;

  if (c->c_argc != 2)
    return zv_admin_usage (c, "set compression=VALUE POOL/VOL");
  if (strncmp (c->c_argv[0], "compression=", 12) != 0)
    return zv_admin_usage (c, "set: compression=off|lz4|zstd|zstd-N is the "
                           "property that can be set");
  val = c->c_argv[0] + 12;
  r = zv_admin_dataset_operand (c, 1, false, vol);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  return admin_result (zvol_volume_set_compression (c->c_pool, vol, val));
}

/* get [-H] [-p] PROP[,PROP]... POOL/VOL[@SNAP]: one "NAME PROPERTY VALUE"
 * line per property (the listing's columns), as zfs get. */
int
zv_admin_get (admin_ctx_t *c)
{
  char name[2 * ZVOL_NAME_MAX];
  unsigned cols[ADMIN_NCOLS];
  const char *saved = c->c_val['o'];
  bool seen = c->c_seen['o'], scripted = ADMIN_OPT (c, 'H');
  int ncols, r;

  if (c->c_argc != 2)
    return zv_admin_usage (c, "get [-H] [-p] PROP[,PROP]... POOL/VOL[@SNAP]");
  c->c_seen['o'] = true;
  c->c_val['o'] = c->c_argv[0];
  ncols = admin_list_cols (c, cols);
  c->c_seen['o'] = seen;
  c->c_val['o'] = saved;
  if (ncols <= 0)
    return zv_admin_usage (c, "get: a comma-separated list of the columns of "
                           "list -o (compression, compressratio, logicalused, "
                           "used, ...)");
  r = zv_admin_dataset_operand (c, 1, strchr (c->c_argv[1], '@') != NULL,
                                name);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;

  size_t n;
  zvol_volume_info_t *vi = admin_datasets (c->c_pool, ZVOL_LIST_VOLUMES
                                           | ZVOL_LIST_SNAPSHOTS, &n);
  const zvol_volume_info_t *v = NULL;

  for (size_t i = 0; i < n && v == NULL; i++)
    if (strcmp (vi[i].vi_name, name) == 0)
      v = &vi[i];
  if (v == NULL) {
    char shown[8 * ZVOL_NAME_MAX + 8];
    zv_str_printable (name, 2 * ZVOL_NAME_MAX, shown, sizeof shown);
    zv_admin_err (c, "pool '%s' has no dataset '%s'",
                  zvol_pool_name (c->c_pool), shown);
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
