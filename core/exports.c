/*
 * exports.c: the volumes a server has open, by name, with a hold count
 * each (zvol.h, "served volumes").
 *
 * Theory.  A server serves every volume of its pool; the admin commands
 * of the control socket create and destroy volumes while it does.  The
 * table is where the two meet: a connection holds its volume from open
 * to close, a command holds one while it reads its statistics, and
 * destroy, rollback and receive go through the table so that a volume a
 * client has open is refused (-EBUSY) and one nobody holds is closed
 * before the engine changes it.  A volume created while serving needs
 * nothing here: it is opened by its first hold, or by the next
 * statistics round (zvol_exports_foreach).  It sits on the public API
 * alone, as any front end could, and adds no engine state.
 *
 * Each entry: the name, the open volume (NULL while destroying), its
 * holds.  States:
 *
 *   (absent) --hold: zvol_open--> open, holds 1 --rele--> open, holds 0
 *   open, holds 0 --destroy--> destroying --zvol_volume_destroy--> absent
 *   open or absent, holds 0 --rollback, receive--> destroying (changing)
 *                           --done--> closed (its next hold opens it)
 *
 * A hold of a destroying name fails with -ENOENT (it is going away, or
 * being changed); destroy of a held one fails with -EBUSY.  The
 * statistics writer takes no hold: zvol_exports_foreach reads each open
 * volume under ex_lock, which exports_exclusive takes to close it, so a
 * round never makes a destroy fail and never sees a closed volume.  It
 * also opens a volume created since (each volume of a server is open);
 * ex_gen, bumped at the end of every exclusive change, tells it that a
 * destroy ended between its listing and its look, so that it does not
 * try to open a name that is gone.  Volumes stay open at 0 holds
 * (opening replays a log and costs a read of the tree's root, so a
 * client that reconnects finds its volume warm), until destroyed or the
 * table freed.
 *
 * Freeing the table waits (up to EXPORTS_DRAIN_S) for the last holds to
 * end: a server stopping may be told to clean up while a connection
 * whose client is gone is still on its way to its close (nbdkit does
 * not wait for that).  A volume still held after the wait is left open
 * and the table with it (-EBUSY): closing it under a connection that
 * still uses it would be worse.
 *
 * Locking: ex_lock guards the entries; ex_cv is signalled when a
 * volume's last hold ends.  zvol_open runs under it (a
 * second open of the same name must wait for the first, not open twice);
 * zvol_close and zvol_volume_destroy run outside it, the entry marked
 * destroying, so that opens of other volumes do not wait for destroy's
 * two txgs.  Entries are not freed while the table lives (a destroyed
 * name's entry is reused), so a pointer to one stays valid unlocked.
 */
#include <config.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zvol.h"
#include "zv_util.h"

/* A volume's name or a snapshot's, "VOL@SNAP" (zvol_volume_info_t). */
#define EXPORTS_NAME_MAX (2 * ZVOL_NAME_MAX)

typedef struct exports_ent {
  char ee_name[EXPORTS_NAME_MAX];
  zvol_t *ee_zv;                /* NULL: not open */
  unsigned ee_holds;
  bool ee_destroying;
  uint64_t ee_failed_gen;       /* foreach's open failed at ex_gen
                                   this - 1 (0: not) */
} exports_ent_t;

#define EXPORTS_DRAIN_S 30

struct zvol_exports {
  zvol_pool_t *ex_pool;
  zvol_config_t ex_vc;
  pthread_mutex_t ex_lock;
  pthread_cond_t ex_cv;         /* CLOCK_MONOTONIC */
  exports_ent_t **ex_ents;
  size_t ex_n, ex_cap;
  uint64_t ex_gen;              /* exclusive changes ended */
};

zvol_exports_t *
zvol_exports_new (zvol_pool_t *pool, const zvol_config_t *vc)
{
  zvol_exports_t *ex = zv_calloc (1, sizeof *ex);
  pthread_condattr_t ca;

  ex->ex_pool = pool;
  if (vc)
    ex->ex_vc = *vc;
  else
    zvol_config_init (&ex->ex_vc);
  pthread_mutex_init (&ex->ex_lock, NULL);
  pthread_condattr_init (&ca);
  pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
  pthread_cond_init (&ex->ex_cv, &ca);
  pthread_condattr_destroy (&ca);
  return ex;
}

zvol_pool_t *
zvol_exports_pool (zvol_exports_t *ex)
{
  return ex->ex_pool;
}

/* The entry of 'name', or NULL.  Under ex_lock. */
static exports_ent_t *
exports_find (zvol_exports_t *ex, const char *name)
{
  for (size_t i = 0; i < ex->ex_n; i++)
    if (strcmp (ex->ex_ents[i]->ee_name, name) == 0)
      return ex->ex_ents[i];
  return NULL;
}

/* The entry of 'name', made (closed, no holds) if missing.  Under
 * ex_lock; the name fits (the caller checked). */
static exports_ent_t *
exports_get (zvol_exports_t *ex, const char *name)
{
  exports_ent_t *e = exports_find (ex, name);

  if (e)
    return e;
  e = zv_calloc (1, sizeof *e);
  snprintf (e->ee_name, sizeof e->ee_name, "%s", name);
  ZV_GROW (ex->ex_ents, ex->ex_n, ex->ex_cap, 8);
  ex->ex_ents[ex->ex_n++] = e;
  return e;
}

/* The entry whose volume is zv.  Under ex_lock. */
static exports_ent_t *
exports_of (zvol_exports_t *ex, zvol_t *zv)
{
  for (size_t i = 0; i < ex->ex_n; i++)
    if (ex->ex_ents[i]->ee_zv == zv)
      return ex->ex_ents[i];
  return NULL;
}

/* Open e's volume (under ex_lock): 0 or zvol_open's error. */
static int
exports_open (zvol_exports_t *ex, exports_ent_t *e)
{
  if (e->ee_zv)
    return 0;
  return zvol_open (ex->ex_pool, e->ee_name, &ex->ex_vc, &e->ee_zv);
}

int
zvol_exports_open_all (zvol_exports_t *ex)
{
  size_t n = zvol_volume_list (ex->ex_pool, NULL, 0);
  zvol_volume_info_t *vi = zv_calloc (n ? n : 1, sizeof *vi);
  int r = 0;

  n = ZV_MIN (n, zvol_volume_list (ex->ex_pool, vi, n));
  pthread_mutex_lock (&ex->ex_lock);
  for (size_t i = 0; i < n && r == 0; i++)
    r = exports_open (ex, exports_get (ex, vi[i].vi_name));
  pthread_mutex_unlock (&ex->ex_lock);
  free (vi);
  return r;
}

int
zvol_exports_hold (zvol_exports_t *ex, const char *name, zvol_t **zvp)
{
  char shown[4 * EXPORTS_NAME_MAX + 4];
  exports_ent_t *e;
  int r;

  *zvp = NULL;
  if (name == NULL || strlen (name) >= EXPORTS_NAME_MAX) {
    /* No volume's name: said as zvol_open says it, escaped and cut. */
    zv_str_printable (name ? name : "", EXPORTS_NAME_MAX, shown, sizeof shown);
    zv_error ("pool '%s' has no volume '%s'", zvol_pool_name (ex->ex_pool),
              shown);
    return -ENOENT;
  }
  pthread_mutex_lock (&ex->ex_lock);
  e = exports_find (ex, name);
  if (e && e->ee_destroying) {
    pthread_mutex_unlock (&ex->ex_lock);
    zv_str_printable (name, EXPORTS_NAME_MAX, shown, sizeof shown);
    zv_error ("volume '%s' of pool '%s' is being destroyed, rolled back "
              "or received", shown, zvol_pool_name (ex->ex_pool));
    return -ENOENT;
  }
  if (e == NULL) {
    /* Open it before making an entry: a client's name for nothing
     * leaves nothing behind. */
    zvol_t *zv;
    r = zvol_open (ex->ex_pool, name, &ex->ex_vc, &zv);
    if (r == 0) {
      e = exports_get (ex, name);
      e->ee_zv = zv;
    }
  }
  else
    r = exports_open (ex, e);
  if (r == 0) {
    e->ee_holds++;
    *zvp = e->ee_zv;
  }
  pthread_mutex_unlock (&ex->ex_lock);
  return r;
}

void
zvol_exports_rele (zvol_exports_t *ex, zvol_t *zv)
{
  exports_ent_t *e;

  pthread_mutex_lock (&ex->ex_lock);
  e = exports_of (ex, zv);
  ZV_VERIFY (e != NULL && e->ee_holds > 0);
  if (--e->ee_holds == 0) {
    /* A snapshot costs nothing while nobody reads it: closed at its
     * last release (read-only: its close waits for no txg). */
    if (strchr (e->ee_name, '@') != NULL) {
      (void) zvol_close (e->ee_zv);
      e->ee_zv = NULL;
    }
    pthread_cond_broadcast (&ex->ex_cv);
  }
  pthread_mutex_unlock (&ex->ex_lock);
}

unsigned
zvol_exports_holds (zvol_exports_t *ex, const char *name)
{
  exports_ent_t *e;
  unsigned n;

  pthread_mutex_lock (&ex->ex_lock);
  e = exports_find (ex, name);
  n = e ? e->ee_holds : 0;
  pthread_mutex_unlock (&ex->ex_lock);
  return n;
}

/*
 * Run fn on the datasets names[0..n) with nobody holding any of them:
 * all are checked and marked under one hold of ex_lock, so that a client
 * cannot come in between the check of the first and the change of the
 * last (which one call per name would let happen, leaving half a tree
 * destroyed).  One held or changing name fails the whole call with
 * -EBUSY, naming it, and nothing changes; otherwise every one is closed
 * and no hold of any succeeds until fn returns (destroy; rollback and
 * receive, after which the volume reopens).  A dry run checks only.
 */
static int
exports_exclusive (zvol_exports_t *ex, const char *const *names, size_t n,
                   const char *what, bool dry_run, int (*fn) (void *arg),
                   void *arg)
{
  char shown[4 * EXPORTS_NAME_MAX + 4];
  exports_ent_t **ents = zv_calloc (n ? n : 1, sizeof *ents);
  zvol_t **zvs = zv_calloc (n ? n : 1, sizeof *zvs);
  exports_ent_t *busy = NULL;
  unsigned holds = 0;
  int r = 0;

  pthread_mutex_lock (&ex->ex_lock);
  for (size_t i = 0; i < n && busy == NULL; i++) {
    ents[i] = exports_get (ex, names[i]);
    if (ents[i]->ee_holds > 0 || ents[i]->ee_destroying)
      busy = ents[i];
  }
  if (busy != NULL)
    holds = busy->ee_holds;
  else if (!dry_run)
    for (size_t i = 0; i < n; i++) {
      ents[i]->ee_destroying = true;
      zvs[i] = ents[i]->ee_zv;
      ents[i]->ee_zv = NULL;
    }
  pthread_mutex_unlock (&ex->ex_lock);
  if (busy != NULL) {
    const char *kind = strchr (busy->ee_name, '@') ? "snapshot" : "volume";
    zv_str_printable (busy->ee_name, EXPORTS_NAME_MAX, shown, sizeof shown);
    if (holds == 0)
      zv_error ("%s '%s' of pool '%s' is being changed already: "
                "not %s", kind, shown, zvol_pool_name (ex->ex_pool), what);
    else
      zv_error ("%s '%s' of pool '%s' is in use (held %u time%s: by "
                "connected clients or a running command): disconnect them "
                "before %s", kind, shown, zvol_pool_name (ex->ex_pool),
                holds, holds > 1 ? "s" : "", what);
    r = -EBUSY;
  }
  if (busy != NULL || dry_run)
    goto out;
  for (size_t i = 0; i < n; i++)
    if (zvs[i] != NULL) {
      int c = zvol_close (zvs[i]);
      if (c < 0 && r == 0)
        r = c;
    }
  if (r == 0)
    r = fn (arg);
  pthread_mutex_lock (&ex->ex_lock);
  for (size_t i = 0; i < n; i++)
    ents[i]->ee_destroying = false;
  ex->ex_gen++;
  pthread_cond_broadcast (&ex->ex_cv);
  pthread_mutex_unlock (&ex->ex_lock);
 out:
  free (ents);
  free (zvs);
  return r;
}

typedef struct exports_op {
  zvol_pool_t *eo_pool;
  const char *eo_name;
  bool eo_flag;
  const zvol_dsname_t *eo_set;  /* a recursive destroy's, in order */
  size_t eo_nset;
} exports_op_t;

static int
exports_do_destroy (void *arg)
{
  exports_op_t *o = arg;
  int r = 0;

  if (o->eo_set == NULL)
    return zvol_volume_destroy (o->eo_pool, o->eo_name);
  for (size_t i = 0; i < o->eo_nset && r == 0; i++)
    r = zvol_volume_destroy (o->eo_pool, o->eo_set[i].dn_name);
  return r;
}

static int
exports_do_rollback (void *arg)
{
  exports_op_t *o = arg;

  return zvol_snapshot_rollback (o->eo_pool, o->eo_name, o->eo_flag);
}

int
zvol_exports_destroy (zvol_exports_t *ex, const char *name)
{
  exports_op_t o = { .eo_pool = ex->ex_pool, .eo_name = name };

  if (strlen (name) >= EXPORTS_NAME_MAX)
    return zvol_volume_destroy (ex->ex_pool, name);  /* it says why */
  return exports_exclusive (ex, &name, 1, "destroying it", false,
                            exports_do_destroy, &o);
}

/* A recursive destroy: the whole set exclusive at once (above). */
int
zvol_exports_destroy_set (zvol_exports_t *ex, const zvol_dsname_t *names,
                          size_t n, bool dry_run)
{
  exports_op_t o = { .eo_pool = ex->ex_pool, .eo_set = names, .eo_nset = n };
  const char **v = zv_calloc (n ? n : 1, sizeof *v);
  int r;

  for (size_t i = 0; i < n; i++) {
    if (strnlen (names[i].dn_name, EXPORTS_NAME_MAX) >= EXPORTS_NAME_MAX) {
      zv_error ("pool '%s': a dataset name in a destroy is too long",
                zvol_pool_name (ex->ex_pool));
      free (v);
      return -EINVAL;
    }
    v[i] = names[i].dn_name;
  }
  r = exports_exclusive (ex, v, n, "the destroy (nothing destroyed)",
                         dry_run, exports_do_destroy, &o);
  free (v);
  return r;
}

int
zvol_exports_rollback (zvol_exports_t *ex, const char *snapshot,
                       bool destroy_newer)
{
  exports_op_t o = { .eo_pool = ex->ex_pool, .eo_name = snapshot,
                     .eo_flag = destroy_newer };
  const char *at = strchr (snapshot, '@');
  char vol[EXPORTS_NAME_MAX];
  const char *vp = vol;

  if (at == NULL || (size_t) (at - snapshot) >= ZVOL_NAME_MAX)
    return zvol_snapshot_rollback (ex->ex_pool, snapshot, destroy_newer);
  snprintf (vol, sizeof vol, "%.*s", (int) (at - snapshot), snapshot);
  return exports_exclusive (ex, &vp, 1, "rolling it back", false,
                            exports_do_rollback, &o);
}

typedef struct exports_recv {
  zvol_pool_t *er_pool;
  const char *er_target;
  const zvol_stream_io_t *er_io;
} exports_recv_t;

static int
exports_do_receive (void *arg)
{
  exports_recv_t *o = arg;

  return zvol_receive (o->er_pool, o->er_target, o->er_io);
}

int
zvol_exports_receive (zvol_exports_t *ex, const char *target,
                      const zvol_stream_io_t *io)
{
  exports_recv_t o = { .er_pool = ex->ex_pool, .er_target = target,
                       .er_io = io };
  const char *at = target ? strchr (target, '@') : NULL;
  size_t n = target ? (at ? (size_t) (at - target) : strlen (target)) : 0;
  char vol[EXPORTS_NAME_MAX];
  const char *vp = vol;

  if (n == 0 || n >= ZVOL_NAME_MAX)
    return zvol_receive (ex->ex_pool, target, io);  /* it says why */
  snprintf (vol, sizeof vol, "%.*s", (int) n, target);
  return exports_exclusive (ex, &vp, 1, "receiving into it", false,
                            exports_do_receive, &o);
}

void
zvol_exports_foreach (zvol_exports_t *ex, zvol_exports_fn fn, void *arg)
{
  size_t n = zvol_volume_list (ex->ex_pool, NULL, 0);
  zvol_volume_info_t *vi = zv_calloc (n ? n : 1, sizeof *vi);
  uint64_t gen;

  /* The generation before the listing: a change ended after it may have
   * removed a listed name. */
  pthread_mutex_lock (&ex->ex_lock);
  gen = ex->ex_gen;
  pthread_mutex_unlock (&ex->ex_lock);
  n = ZV_MIN (n, zvol_volume_list (ex->ex_pool, vi, n));
  pthread_mutex_lock (&ex->ex_lock);
  for (size_t i = 0; i < n; i++) {
    exports_ent_t *e = exports_find (ex, vi[i].vi_name);
    if (e && e->ee_destroying)
      continue;
    if (e == NULL || e->ee_zv == NULL) {
      zvol_t *zv;
      /* A volume that does not open is said once, not every round, until
       * the next change. */
      if (gen != ex->ex_gen || (e && e->ee_failed_gen == gen + 1))
        continue;
      if (zvol_open (ex->ex_pool, vi[i].vi_name, &ex->ex_vc, &zv) < 0) {
        exports_get (ex, vi[i].vi_name)->ee_failed_gen = gen + 1;
        continue;
      }
      e = exports_get (ex, vi[i].vi_name);
      e->ee_zv = zv;
    }
    fn (arg, e->ee_name, e->ee_zv);
  }
  pthread_mutex_unlock (&ex->ex_lock);
  free (vi);
}

/* Holds of every volume, and destroys running.  Under ex_lock. */
static unsigned
exports_busy (zvol_exports_t *ex)
{
  unsigned n = 0;

  for (size_t i = 0; i < ex->ex_n; i++)
    n += ex->ex_ents[i]->ee_holds + ex->ex_ents[i]->ee_destroying;
  return n;
}

unsigned
zvol_exports_forget_holds (zvol_exports_t *ex)
{
  unsigned n = 0;

  pthread_mutex_lock (&ex->ex_lock);
  for (size_t i = 0; i < ex->ex_n; i++) {
    n += ex->ex_ents[i]->ee_holds;
    ex->ex_ents[i]->ee_holds = 0;
  }
  pthread_cond_broadcast (&ex->ex_cv);
  pthread_mutex_unlock (&ex->ex_lock);
  return n;
}

int
zvol_exports_free (zvol_exports_t *ex)
{
  struct timespec dl;
  unsigned busy;
  int err = 0;

  if (ex == NULL)
    return 0;
  clock_gettime (CLOCK_MONOTONIC, &dl);
  dl.tv_sec += EXPORTS_DRAIN_S;
  pthread_mutex_lock (&ex->ex_lock);
  while ((busy = exports_busy (ex)) > 0
         && pthread_cond_timedwait (&ex->ex_cv, &ex->ex_lock, &dl) == 0)
    ;
  busy = exports_busy (ex);
  pthread_mutex_unlock (&ex->ex_lock);
  if (busy > 0) {
    zv_error ("pool '%s': %u volume hold%s still taken after %d s: the "
              "volumes stay open", zvol_pool_name (ex->ex_pool), busy,
              busy > 1 ? "s" : "", EXPORTS_DRAIN_S);
    return -EBUSY;
  }
  for (size_t i = 0; i < ex->ex_n; i++) {
    exports_ent_t *e = ex->ex_ents[i];
    if (e->ee_zv) {
      int r = zvol_close (e->ee_zv);
      if (r < 0 && err == 0)
        err = r;
    }
    free (e);
  }
  free (ex->ex_ents);
  pthread_cond_destroy (&ex->ex_cv);
  pthread_mutex_destroy (&ex->ex_lock);
  free (ex);
  return err;
}
