/*
 * snap.c: snapshots, clones and rollback.
 *
 * Theory.  Every block pointer carries the txg it was born in, so a
 * snapshot is a record, not a copy: snapshot S of volume V taken in txg T
 * is a dataset record whose tree root is V's as of the end of T.  From
 * then on V shares every block born in T or before with S, and the
 * birth rule decides what V's later syncs may free:
 *
 *   a block V lets go of (overwritten, trimmed, or a tree block
 *   rewritten) is freed if it was born after V's newest snapshot
 *   (ds_prev_snap_txg, the object's ob_snap_txg); otherwise a snapshot
 *   still holds it, and it goes on V's dead list (deadlist.c).
 *
 * Taking S hands V's dead list to S (the blocks that died between S's
 * predecessor and S: they are the older snapshots') and starts V on an
 * empty one.  Each dataset's dead list so holds, for the interval before
 * it, the blocks of the older snapshots that it no longer has.
 *
 * Destroying snapshot S (predecessor P, successor N: the next snapshot
 * or V) reads only dead lists, never a tree: an entry of N's list born
 * after P's txg was S's alone (N dropped it, P never had it) and is to
 * be freed; the rest of N's list, and all of S's, are P's (or older) and
 * become N's new list; N's predecessor becomes P.  The cost is the two
 * lists (and the successor's, for N's unique bytes), not the volume.
 * The frees themselves are not made in the destroy's txg: N's old list
 * goes whole to the pool's free queue (freeq.c), which frees its entries
 * born after S's line over the following syncs, a bounded share each.
 * Rollback of V to its newest snapshot S gives V S's root, drops V's
 * dead list (every entry is S's) and queues V's old tree for the free
 * queue, which frees its blocks born after S (a walk pruned by birth:
 * only what changed) in the background, as it does a destroyed clone's.  A clone is a new volume whose
 * root is S's and whose birth-rule line is S's txg, so it frees nothing
 * it shares; S cannot be destroyed while a clone of it exists.
 *
 * Every change happens in the txg sync (a task, dd_tasks, run by
 * zv_snap_sync_tasks after every volume's tree of that txg is written):
 * the caller checks what it can in open context under dd_admin_lock (one
 * admin operation at a time), queues its task under a hold of the open
 * txg T, and waits for T.  So a snapshot is consistent: every write
 * acknowledged before the call is in a txg <= T (it was dirtied), every
 * write issued after it returns is in a later one; no client waits for it
 * at all.  And a crash leaves each operation whole or not begun: its
 * records, dead lists and frees are all in T.
 *
 * Space, in data bytes as `zfs list` shows them: a dataset's referenced
 * (its tree's data), written (data born after its predecessor), a
 * snapshot's used (its unique data: what its destroy frees, kept
 * exactly: a kill in V of a block born after S's predecessor adds to S's
 * used, and a destroy recounts its neighbours), and a volume's used:
 * written, plus what its snapshots hold (every dead list of the chain),
 * plus its reservation's unused part.
 *
 * Each snapshot has a guid (ds_guid, dr_guid), its identity for send
 * streams (send.c).  A receive writes its volume with the receive flag
 * (ds_recv) set: no snapshot of it is taken but the one that ends the
 * receive (zv_snap_create_received, which clears the flag in its own
 * txg), and a rollback clears it too (how a failed receive is undone).
 *
 * Locking: dd_admin_lock serialises the operations; dd_lock guards the
 * list, the task queue and the chain fields (ds_prev*, which readers
 * follow); dead lists and the figures they feed are the sync thread's.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>

#include "snap.h"
#include "pool_impl.h"
#include "txg.h"
#include "zio.h"

enum snap_op { SNAP_CREATE = 1, SNAP_DESTROY, SNAP_ROLLBACK };

typedef struct zv_snap_task {
  struct zv_snap_task *st_next;
  enum snap_op st_op;
  uint64_t st_txg;
  zv_pool_ds_t *st_ds;           /* the new snapshot; the one destroyed;
                                    the volume rolled back */
  bool st_recv;                  /* the snapshot that ends a receive */
  int st_result;
} zv_snap_task_t;

bool
zv_snap_split (const char *name, char *vol, char *snap)
{
  const char *at;
  size_t lv, ls;

  if (name == NULL)
    return false;
  at = memchr (name, '@', strnlen (name, 2 * ZV_NAME_MAX + 1));
  if (at == NULL)
    return false;
  lv = (size_t) (at - name);
  ls = strnlen (at + 1, ZV_NAME_MAX);
  if (lv >= ZV_NAME_MAX || ls >= ZV_NAME_MAX)
    return false;
  memcpy (vol, name, lv);
  vol[lv] = '\0';
  memcpy (snap, at + 1, ls);
  snap[ls] = '\0';
  return true;
}

zv_pool_ds_t *
zv_snap_next (zv_pool_t *p, zv_pool_ds_t *s)
{
  for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
    zv_pool_ds_t *d = p->p_dd.dd_dss[i];
    if (d->ds_prev == s && !d->ds_destroy
        && (d->ds_id == s->ds_parent_id || d->ds_parent_id == s->ds_parent_id))
      return d;
  }
  return NULL;
}

/* The birth rule's kill (dmu.h): the block goes on the volume's dead
 * list, and counts as unique to the newest snapshot if born after that
 * snapshot's predecessor. */
int
zv_snap_kill (void *arg, const zv_blkptr_t *bp, uint64_t txg)
{
  zv_pool_ds_t *ds = arg;
  zv_pool_ds_t *s = ds->ds_prev;
  int r = zv_deadlist_append (&ds->ds_deadlist, bp, txg);

  if (r == 0 && s != NULL && bp->bp_level == 0
      && bp->bp_birth > s->ds_prev_snap_txg)
    s->ds_used += bp->bp_psize;
  return r;
}

/* Queue a task for the open txg and wait for its sync. */
static int
snap_run (zv_pool_t *p, zv_snap_task_t *t, zv_txg_hold_t *h)
{
  int r;

  t->st_txg = h->th_txg;
  t->st_result = -EINPROGRESS;
  pthread_mutex_lock (&p->p_dd.dd_lock);
  t->st_next = p->p_dd.dd_tasks;
  p->p_dd.dd_tasks = t;
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  zv_txg_rele (p->p_txg, h);
  r = zv_txg_wait_synced (p->p_txg, t->st_txg);
  pthread_mutex_lock (&p->p_dd.dd_lock);
  if (t->st_result == -EINPROGRESS) {
    /* Not run (the pool failed before that sync): unqueue it. */
    for (zv_snap_task_t **pp = &p->p_dd.dd_tasks; *pp; pp = &(*pp)->st_next)
      if (*pp == t) {
        *pp = t->st_next;
        break;
      }
    t->st_result = r < 0 ? r : -EIO;
  }
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  return r < 0 ? r : t->st_result;
}

/* The volume of a snapshot name and the snapshot (either may be NULL),
 * under dd_lock. */
static zv_pool_ds_t *
snap_lookup (zv_pool_t *p, const char *name, zv_pool_ds_t **volp,
             char *shown, size_t shownlen)
{
  char vol[ZV_NAME_MAX], snap[ZV_NAME_MAX];

  zv_str_printable (name ? name : "", 2 * ZV_NAME_MAX, shown, shownlen);
  *volp = NULL;
  if (!zv_snap_split (name, vol, snap))
    return NULL;
  *volp = zv_dsdir_lookup_locked (p, ZV_DS_KIND_VOLUME, 0, vol);
  if (*volp == NULL)
    return NULL;
  return zv_dsdir_lookup_locked (p, ZV_DS_KIND_SNAPSHOT, (*volp)->ds_id, snap);
}

/* A snapshot's guid: random, nonzero. */
static uint64_t
snap_random_guid (void)
{
  uint64_t g = 0;

  while (g == 0)
    if (getrandom (&g, sizeof g, 0) != sizeof g)
      g = zv_now_ns () * 0x9e3779b97f4a7c15ull;
  return g;
}

/* Take a snapshot; with recv, the one that ends a receive into the
 * volume (guid: the stream's), which clears the volume's receive flag in
 * the same txg (send.c). */
static int
snap_create (zv_pool_t *p, const char *name, uint64_t guid, bool recv)
{
  char shown[8 * ZV_NAME_MAX], vol[ZV_NAME_MAX], snap[ZV_NAME_MAX];
  zv_pool_ds_t *v, *s;
  zv_snap_task_t t = { .st_op = SNAP_CREATE, .st_recv = recv };
  zv_txg_hold_t h;
  uint64_t id, slot, need = 0, avail;
  int r = zv_dsdir_admin_begin (p, "snapshot");

  if (r < 0)
    return r;
  zv_str_printable (name ? name : "", 2 * ZV_NAME_MAX, shown, sizeof shown);
  if (!zv_snap_split (name, vol, snap) || !zv_dsdir_name_valid (snap)) {
    zv_error ("snapshot name '%s' is invalid: VOLUME@NAME, NAME 1 to %u of "
              "A-Z a-z 0-9 _ - . :, not starting with '-' or '.'", shown,
              ZV_NAME_MAX - 1);
    return -EINVAL;
  }
  pthread_mutex_lock (&p->p_dd.dd_admin_lock);
  r = zv_txg_hold (p->p_txg, 0, &h);
  if (r < 0)
    goto out;
  pthread_mutex_lock (&p->p_dd.dd_lock);
  s = snap_lookup (p, name, &v, shown, sizeof shown);
  if (v == NULL)
    r = -ENOENT;
  else if (s != NULL)
    r = -EEXIST;
  else if (v->ds_recv != recv)
    r = -EBUSY;
  else {
    /* A reservation covers the volume's own data: its blocks become the
     * snapshot's, so the volume may need it all again (and its indirect
     * blocks, if it had used it up). */
    need = zv_dsdir_resv_unused (v, 0)
      - zv_dsdir_resv_unused (v, v->ds_pub_written);
    r = zv_dsdir_new_slot_locked (p, &id, &slot);
  }
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  if (r == 0 && need > 0 && (avail = zv_dsdir_avail (p)) < need) {
    zv_error ("pool '%s': no room for snapshot '%s': the reservation of "
              "volume '%s' needs %" PRIu64 " bytes more (%" PRIu64
              " available)", p->p_name, shown, vol, need, avail);
    r = -ENOSPC;
  }
  if (r < 0) {
    zv_txg_rele (p->p_txg, &h);
    if (r == -ENOENT)
      zv_error ("pool '%s' has no volume '%s'", p->p_name, vol);
    else if (r == -EEXIST)
      zv_error ("snapshot '%s' exists already", shown);
    else if (r == -EBUSY)
      zv_error ("volume '%s' is being received: no snapshot of it until "
                "the receive ends", vol);
    goto out;
  }
  zv_dnode_phys_t none;
  memset (&none, 0, sizeof none);
  zv_dsdir_init_t di = {
    .di_kind = ZV_DS_KIND_SNAPSHOT, .di_name = snap, .di_id = id,
    .di_slot = slot, .di_parent_id = v->ds_id, .di_volsize = v->ds_volsize,
    .di_blksz = v->ds_blksz, .di_creation_txg = h.th_txg,
    .di_creation_time = (uint64_t) time (NULL), .di_volume = &none,
    .di_pending = true, .di_guid = guid ? guid : snap_random_guid (),
    .di_compress = atomic_load_explicit (&v->ds_obj.ob_compress,
                                         memory_order_relaxed),
  };
  t.st_ds = zv_dsdir_add (p, &di);
  r = snap_run (p, &t, &h);
  if (r == 0)
    zv_info ("pool '%s': snapshot '%s' taken (txg %" PRIu64 ")", p->p_name,
             shown, t.st_txg);
  else
    zv_error ("pool '%s': snapshot '%s' failed: %s", p->p_name, shown,
              strerror (-r));
 out:
  pthread_mutex_unlock (&p->p_dd.dd_admin_lock);
  return r;
}

int
zv_snap_create (zv_pool_t *p, const char *name)
{
  return snap_create (p, name, 0, false);
}

int
zv_snap_create_received (zv_pool_t *p, const char *name, uint64_t guid)
{
  return snap_create (p, name, guid, true);
}

/* Sync of a snapshot's txg: S takes V's root and dead list. */
static int
snap_sync_create (zv_pool_t *p, zv_pool_ds_t *s, bool recv)
{
  zv_pool_ds_t *v = s->ds_parent;
  zv_dnode_phys_t dn;

  zv_dmu_object_phys (&v->ds_obj, &dn);
  dn.dn_size = v->ds_volsize;
  zv_dmu_object_close (&s->ds_obj);
  zv_dmu_object_open (&s->ds_obj, &p->p_spa, p->p_cache, ZV_OBJ_VOLUME, &dn);
  /* The snapshot keeps the property its volume had (a clone takes it). */
  atomic_store_explicit (&s->ds_obj.ob_compress,
                         atomic_load_explicit (&v->ds_obj.ob_compress,
                                               memory_order_relaxed),
                         memory_order_relaxed);
  zv_deadlist_move (&s->ds_deadlist, &v->ds_deadlist);
  s->ds_snap_written = v->ds_obj.ob_written;
  s->ds_used = 0;
  v->ds_obj.ob_written = 0;
  v->ds_obj.ob_lwritten = 0;
  pthread_mutex_lock (&p->p_dd.dd_lock);
  s->ds_prev_snap_id = v->ds_prev_snap_id;
  s->ds_prev_snap_txg = v->ds_prev_snap_txg;
  s->ds_prev = v->ds_prev;
  s->ds_obj.ob_snap_txg = s->ds_prev_snap_txg;
  v->ds_prev_snap_id = s->ds_id;
  v->ds_prev_snap_txg = s->ds_creation_txg;
  v->ds_prev = s;
  v->ds_obj.ob_snap_txg = s->ds_creation_txg;
  s->ds_pending = false;
  if (recv)
    v->ds_recv = false;         /* the receive is whole in this txg */
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  return 0;
}

int
zv_snap_destroy (zv_pool_t *p, const char *name)
{
  char shown[8 * ZV_NAME_MAX];
  zv_pool_ds_t *v, *s;
  zv_snap_task_t t = { .st_op = SNAP_DESTROY };
  zv_txg_hold_t h;
  const char *clone = NULL;
  int r = zv_dsdir_admin_begin (p, "destroy a snapshot");

  if (r < 0)
    return r;
  pthread_mutex_lock (&p->p_dd.dd_admin_lock);
  r = zv_txg_hold (p->p_txg, 0, &h);
  if (r < 0)
    goto out;
  pthread_mutex_lock (&p->p_dd.dd_lock);
  s = snap_lookup (p, name, &v, shown, sizeof shown);
  if (s == NULL || s->ds_pending)
    r = -ENOENT;
  else if (s->ds_snap_holds > 0)
    r = -EBUSY;
  else {
    for (size_t i = 0; i < p->p_dd.dd_nds && clone == NULL; i++)
      if (!p->p_dd.dd_dss[i]->ds_destroy
          && p->p_dd.dd_dss[i]->ds_origin_id == s->ds_id)
        clone = p->p_dd.dd_dss[i]->ds_name;
    if (clone != NULL)
      r = -EEXIST;
  }
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  if (r < 0) {
    zv_txg_rele (p->p_txg, &h);
    if (r == -ENOENT)
      zv_error ("pool '%s' has no snapshot '%s'", p->p_name, shown);
    else if (r == -EBUSY)
      zv_error ("snapshot '%s' is open: close it before destroying it",
                shown);
    else {
      zv_error ("snapshot '%s' has a clone, volume '%s': destroy the clone "
                "first", shown, clone);
      r = -EBUSY;
    }
    goto out;
  }
  t.st_ds = s;
  r = snap_run (p, &t, &h);
  /* What it alone held is freed in the background from T+1 on
   * (freeq.c); T's own frees (its dead list's object) are free space
   * once T+2 has synced. */
  if (r == 0)
    r = zv_txg_wait_synced (p->p_txg, t.st_txg + 2);
  if (r == 0)
    zv_info ("pool '%s': destroyed snapshot '%s'", p->p_name, shown);
 out:
  pthread_mutex_unlock (&p->p_dd.dd_admin_lock);
  return r;
}

/* Destroy's scratch: the new list, what to free, the predecessor's new
 * unique bytes. */
typedef struct snap_merge {
  zv_deadlist_t *sm_new;
  uint64_t sm_line;              /* S's predecessor's txg */
  uint64_t sm_pline;             /* P's predecessor's txg (P's unique) */
  bool sm_has_p;
  uint64_t sm_txg;
  uint64_t sm_nfree;              /* entries S alone held */
  uint64_t sm_freed_data;
  uint64_t sm_p_used;
  uint64_t sm_lo, sm_hi, sm_range_bytes;   /* snap_count_cb */
} snap_merge_t;

static int
snap_keep (snap_merge_t *m, const zv_deadlist_ent_t *e)
{
  if (m->sm_has_p && e->de_level == 0 && e->de_birth > m->sm_pline)
    m->sm_p_used += e->de_psize;
  return zv_deadlist_append_ent (m->sm_new, e, m->sm_txg);
}

/* N's list: S's alone is counted (the free queue frees it from N's old
 * list), the rest kept. */
static int
snap_split_cb (void *arg, const zv_deadlist_ent_t *e)
{
  snap_merge_t *m = arg;

  if (e->de_birth > m->sm_line) {
    m->sm_nfree++;
    if (e->de_level == 0)
      m->sm_freed_data += e->de_psize;
    return 0;
  }
  return snap_keep (m, e);
}

static int
snap_keep_cb (void *arg, const zv_deadlist_ent_t *e)
{
  return snap_keep (arg, e);
}

static int
snap_count_cb (void *arg, const zv_deadlist_ent_t *e)
{
  snap_merge_t *m = arg;

  if (e->de_level == 0 && e->de_birth > m->sm_lo && e->de_birth <= m->sm_hi)
    m->sm_range_bytes += e->de_psize;
  return 0;
}

/* Sync of a destroy: see the theory comment.  Nothing changes unless
 * every list read verifies. */
static int
snap_sync_destroy (zv_pool_t *p, zv_pool_ds_t *s, uint64_t txg)
{
  zv_pool_ds_t *n, *pr = s->ds_prev, *nn = NULL;
  zv_deadlist_t nl;
  snap_merge_t m = {
    .sm_new = &nl, .sm_line = s->ds_prev_snap_txg, .sm_txg = txg,
    .sm_has_p = pr != NULL, .sm_pline = pr ? pr->ds_prev_snap_txg : 0,
  };
  char what[3 * ZV_NAME_MAX];
  int r;

  pthread_mutex_lock (&p->p_dd.dd_lock);
  n = zv_snap_next (p, s);
  if (n != NULL && n->ds_kind == ZV_DS_KIND_SNAPSHOT)
    nn = zv_snap_next (p, n);
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  ZV_VERIFY (n != NULL);
  snprintf (what, sizeof what, "%s@%s", s->ds_parent->ds_name, s->ds_name);
  zv_deadlist_init (&nl, &p->p_spa);
  r = zv_deadlist_iterate (&n->ds_deadlist, what, snap_split_cb, &m);
  if (r == 0)
    r = zv_deadlist_iterate (&s->ds_deadlist, what, snap_keep_cb, &m);
  /* N's unique data grows by what its successor dropped that was born
   * between P and S (N's predecessor moves back from S to P). */
  if (r == 0 && nn != NULL) {
    m.sm_lo = s->ds_prev_snap_txg;
    m.sm_hi = s->ds_creation_txg;
    r = zv_deadlist_iterate (&nn->ds_deadlist, what, snap_count_cb, &m);
  }
  if (r < 0) {
    zv_deadlist_fini (&nl);
    zv_error ("snapshot '%s': not destroyed, a dead list does not read",
              what);
    return r;
  }
  /* What S alone held: freed in the background, from N's old list (the
   * queue takes it whole), or nothing to free and the list goes now. */
  if (m.sm_nfree > 0) {
    r = zv_freeq_add_deadlist (p, s, &n->ds_deadlist, m.sm_freed_data, txg);
    if (r < 0) {
      zv_deadlist_fini (&nl);
      return r;
    }
  }
  else
    zv_deadlist_free_obj (&n->ds_deadlist, txg);
  zv_deadlist_free_obj (&s->ds_deadlist, txg);
  zv_deadlist_move (&n->ds_deadlist, &nl);
  {
    uint64_t add = s->ds_snap_written > m.sm_freed_data
      ? s->ds_snap_written - m.sm_freed_data : 0;
    if (n->ds_kind == ZV_DS_KIND_VOLUME) {
      n->ds_obj.ob_written += add;
      /* A snapshot keeps no logical figure: what it hands on counts
       * as stored whole (the ratio errs towards 1). */
      n->ds_obj.ob_lwritten += add;
    }
    else {
      n->ds_snap_written += add;
      n->ds_used += m.sm_range_bytes;
    }
  }
  if (pr != NULL)
    pr->ds_used = m.sm_p_used;
  pthread_mutex_lock (&p->p_dd.dd_lock);
  n->ds_prev_snap_id = s->ds_prev_snap_id;
  n->ds_prev_snap_txg = s->ds_prev_snap_txg;
  n->ds_prev = pr;
  n->ds_obj.ob_snap_txg = s->ds_prev_snap_txg;
  s->ds_destroy = true;
  s->ds_freeing = true;
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  return 0;
}

int
zv_snap_rollback (zv_pool_t *p, const char *name, bool destroy_newer)
{
  char shown[8 * ZV_NAME_MAX], newer[3 * ZV_NAME_MAX];
  zv_pool_ds_t *v, *s;
  zv_snap_task_t t = { .st_op = SNAP_ROLLBACK };
  zv_txg_hold_t h;
  int r = zv_dsdir_admin_begin (p, "roll back");

  if (r < 0)
    return r;
  for (;;) {
    pthread_mutex_lock (&p->p_dd.dd_lock);
    s = snap_lookup (p, name, &v, shown, sizeof shown);
    if (s == NULL || s->ds_pending)
      r = -ENOENT;
    else if (v->ds_held)
      r = -EBUSY;
    else if (v->ds_prev != s) {
      snprintf (newer, sizeof newer, "%s@%s", v->ds_name,
                v->ds_prev->ds_name);
      r = -EEXIST;
    }
    pthread_mutex_unlock (&p->p_dd.dd_lock);
    if (r == -EEXIST && destroy_newer) {
      /* Newest first, each in its own txg: a crash between them leaves
       * fewer snapshots, the volume as it was. */
      r = zv_snap_destroy (p, newer);
      if (r < 0)
        return r;
      continue;
    }
    break;
  }
  if (r == -ENOENT)
    zv_error ("pool '%s' has no snapshot '%s'", p->p_name, shown);
  else if (r == -EBUSY)
    zv_error ("volume '%s' is open: a rollback needs it closed (no client "
              "may read a mix of before and after)", v->ds_name);
  else if (r == -EEXIST)
    zv_error ("'%s' is not the newest snapshot of '%s' ('%s' is): roll "
              "back to it saying so, which destroys the newer ones", shown,
              v->ds_name, newer);
  if (r < 0)
    return r;
  pthread_mutex_lock (&p->p_dd.dd_admin_lock);
  r = zv_txg_hold (p->p_txg, 0, &h);
  if (r == 0) {
    pthread_mutex_lock (&p->p_dd.dd_lock);
    s = snap_lookup (p, name, &v, shown, sizeof shown);
    /* (Checked again: another operation may have come between.) */
    if (s == NULL || v->ds_prev != s || v->ds_held) {
      r = -EAGAIN;
      zv_error ("volume of '%s' changed during the rollback: try again",
                shown);
    }
    else
      v->ds_held = true;      /* no open while the task is pending */
    pthread_mutex_unlock (&p->p_dd.dd_lock);
    if (r < 0)
      zv_txg_rele (p->p_txg, &h);
    else {
      t.st_ds = v;
      r = snap_run (p, &t, &h);
      pthread_mutex_lock (&p->p_dd.dd_lock);
      v->ds_held = false;
      pthread_mutex_unlock (&p->p_dd.dd_lock);
      if (r == 0)
        r = zv_txg_wait_synced (p->p_txg, t.st_txg + 2);
    }
  }
  if (r == 0)
    zv_info ("pool '%s': volume '%s' rolled back to '%s'", p->p_name,
             v->ds_name, shown);
  pthread_mutex_unlock (&p->p_dd.dd_admin_lock);
  return r;
}

/* Sync of a rollback: V takes S's root; V's tree as it was, whose
 * blocks born after S are V's alone, goes to the free queue, which
 * frees them in the background in later syncs (freeq.c), so that the
 * rollback's own txg costs the same whatever V wrote since S. */
static int
snap_sync_rollback (zv_pool_t *p, zv_pool_ds_t *v, uint64_t txg)
{
  zv_pool_ds_t *s = v->ds_prev;
  zv_dnode_phys_t dn;
  int r;

  ZV_VERIFY (s != NULL);
  zv_dmu_object_phys (&v->ds_obj, &dn);
  r = zv_freeq_add_rollback (p, v, &dn, s->ds_name, txg);
  if (r < 0) {
    zv_error ("volume '%s': not rolled back (%s)", v->ds_name,
              strerror (-r));
    return r;
  }
  zv_deadlist_free_obj (&v->ds_deadlist, txg);
  s->ds_used = 0;
  zv_dmu_object_phys (&s->ds_obj, &dn);
  dn.dn_size = v->ds_volsize;
  zv_dsdir_reopen (v, &dn);
  v->ds_obj.ob_written = 0;
  v->ds_obj.ob_lwritten = 0;
  pthread_mutex_lock (&p->p_dd.dd_lock);
  v->ds_recv = false;           /* an unfinished receive is undone */
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  return 0;
}

int
zv_snap_clone (zv_pool_t *p, const char *snap, const char *clone,
               uint64_t reservation, uint64_t ring)
{
  char shown[8 * ZV_NAME_MAX];
  zv_pool_ds_t *v, *s;
  zv_txg_hold_t h;
  int r = zv_dsdir_admin_begin (p, "clone");

  if (r < 0)
    return r;
  pthread_mutex_lock (&p->p_dd.dd_admin_lock);
  r = zv_txg_hold (p->p_txg, 0, &h);
  if (r < 0)
    goto out;
  pthread_mutex_lock (&p->p_dd.dd_lock);
  s = snap_lookup (p, snap, &v, shown, sizeof shown);
  if (s == NULL || s->ds_pending)
    r = -ENOENT;
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  if (r == 0)
    r = zv_dsdir_create_locked (p, clone, s->ds_volsize, s->ds_blksz,
                                reservation, ring, h.th_txg, true, s, 0);
  else
    zv_error ("pool '%s' has no snapshot '%s'", p->p_name, shown);
  zv_txg_rele (p->p_txg, &h);
  if (r == 0)
    r = zv_txg_wait_synced (p->p_txg, h.th_txg);
  if (r == 0)
    zv_info ("pool '%s': volume '%s' cloned from '%s'", p->p_name, clone,
             shown);
 out:
  pthread_mutex_unlock (&p->p_dd.dd_admin_lock);
  return r;
}

/* ---- the set a recursive destroy takes ----
 *
 * Dependencies form a tree rooted at what the caller names: a volume's
 * snapshots depend on it, a clone on its origin snapshot.  The plan
 * lists the tree in post-order (every dataset after all that depend on
 * it), which is the only order the single destroys accept.  Each
 * dataset has one thing it depends on, so meeting one twice means the
 * directory loops (hostile data: import checks the chains, not a clone
 * of a volume's own snapshot): -EIO, not a loop here. */

typedef struct snap_plan {
  zv_pool_t *sp_pool;
  unsigned sp_flags;            /* ZV_SNAP_DESTROY_* */
  zv_pool_ds_t **sp_seen;       /* in post-order once emitted */
  size_t sp_nseen, sp_capseen;
  zv_pool_ds_t **sp_out;
  size_t sp_n, sp_cap;
} snap_plan_t;

static int
snap_plan_visit (snap_plan_t *sp, zv_pool_ds_t *ds)
{
  char full[2 * ZV_NAME_MAX];

  for (size_t i = 0; i < sp->sp_nseen; i++)
    if (sp->sp_seen[i] == ds) {
      zv_dsdir_fullname (ds, full, sizeof full);
      zv_error ("pool '%s': dataset '%s' depends on itself (a damaged "
                "directory): not destroyed", sp->sp_pool->p_name, full);
      return -EIO;
    }
  ZV_GROW (sp->sp_seen, sp->sp_nseen, sp->sp_capseen, 16);
  sp->sp_seen[sp->sp_nseen++] = ds;
  return 0;
}

static void
snap_plan_emit (snap_plan_t *sp, zv_pool_ds_t *ds)
{
  ZV_GROW (sp->sp_out, sp->sp_n, sp->sp_cap, 16);
  sp->sp_out[sp->sp_n++] = ds;
}

static int snap_plan_volume (snap_plan_t *sp, zv_pool_ds_t *v);

/* Snapshot s after its clones (each with all that depends on it). */
static int
snap_plan_snapshot (snap_plan_t *sp, zv_pool_ds_t *s)
{
  zv_pool_t *p = sp->sp_pool;
  char full[2 * ZV_NAME_MAX];
  int r = snap_plan_visit (sp, s);

  for (size_t i = 0; i < p->p_dd.dd_nds && r == 0; i++) {
    zv_pool_ds_t *c = p->p_dd.dd_dss[i];
    if (c->ds_destroy || c->ds_kind != ZV_DS_KIND_VOLUME
        || c->ds_origin_id != s->ds_id)
      continue;
    if (!(sp->sp_flags & ZV_SNAP_DESTROY_CLONES)) {
      zv_dsdir_fullname (s, full, sizeof full);
      zv_error ("snapshot '%s' has a clone, volume '%s': destroy the clone "
                "first, or destroy with its clones (-R)", full, c->ds_name);
      return -EBUSY;
    }
    r = snap_plan_volume (sp, c);
  }
  if (r == 0)
    snap_plan_emit (sp, s);
  return r;
}

/* Volume v after its snapshots, oldest first (each after its clones). */
static int
snap_plan_volume (snap_plan_t *sp, zv_pool_ds_t *v)
{
  zv_pool_ds_t **chain = NULL;
  size_t k = 0, cap = 0;
  int r = snap_plan_visit (sp, v);

  for (zv_pool_ds_t *s = v->ds_prev; s && r == 0; s = s->ds_prev) {
    if (k > sp->sp_pool->p_dd.dd_nds) {
      zv_error ("volume '%s': its snapshots form a cycle: not destroyed",
                v->ds_name);
      r = -EIO;
      break;
    }
    ZV_GROW (chain, k, cap, 16);
    chain[k++] = s;
  }
  if (r == 0 && k > 0 && !(sp->sp_flags & (ZV_SNAP_DESTROY_SNAPSHOTS
                                           | ZV_SNAP_DESTROY_CLONES))) {
    zv_error ("volume '%s' of pool '%s' has snapshots: destroy them first "
              "(or destroy recursively: -r, or -R with their clones)",
              v->ds_name, sp->sp_pool->p_name);
    r = -EBUSY;
  }
  while (r == 0 && k-- > 0)
    r = snap_plan_snapshot (sp, chain[k]);
  free (chain);
  if (r == 0)
    snap_plan_emit (sp, v);
  return r;
}

int
zv_snap_destroy_plan (zv_pool_t *p, const char *name, unsigned flags,
                      char (*out)[2 * ZV_NAME_MAX], size_t max, size_t *np)
{
  char shown[8 * ZV_NAME_MAX], vol[ZV_NAME_MAX], snap[ZV_NAME_MAX];
  snap_plan_t sp = { .sp_pool = p, .sp_flags = flags };
  zv_pool_ds_t *ds = NULL, *v;
  bool is_snap = zv_snap_split (name, vol, snap);
  int r;

  *np = 0;
  zv_str_printable (name ? name : "", 2 * ZV_NAME_MAX, shown, sizeof shown);
  pthread_mutex_lock (&p->p_dd.dd_lock);
  if (is_snap) {
    ds = snap_lookup (p, name, &v, shown, sizeof shown);
    if (ds != NULL && ds->ds_pending)
      ds = NULL;
  }
  else if (name != NULL && strnlen (name, ZV_NAME_MAX) < ZV_NAME_MAX)
    ds = zv_dsdir_lookup_locked (p, ZV_DS_KIND_VOLUME, 0, name);
  if (ds == NULL)
    r = -ENOENT;
  else if (is_snap)
    r = snap_plan_snapshot (&sp, ds);
  else
    r = snap_plan_volume (&sp, ds);
  for (size_t i = 0; r == 0 && i < sp.sp_n && i < max; i++)
    zv_dsdir_fullname (sp.sp_out[i], out[i], sizeof out[i]);
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  if (r == -ENOENT)
    zv_error ("pool '%s' has no %s '%s'", p->p_name,
              is_snap ? "snapshot" : "volume", shown);
  if (r == 0)
    *np = sp.sp_n;
  free (sp.sp_seen);
  free (sp.sp_out);
  return r;
}

int
zv_snap_sync_tasks (zv_pool_t *p, uint64_t txg)
{
  zv_snap_task_t *list, *rev = NULL;
  int r = 0;

  /* This txg's tasks, in the order they came. */
  pthread_mutex_lock (&p->p_dd.dd_lock);
  for (zv_snap_task_t **pp = &p->p_dd.dd_tasks; *pp;) {
    zv_snap_task_t *t = *pp;
    if (t->st_txg <= txg) {
      *pp = t->st_next;
      t->st_next = rev;
      rev = t;
    }
    else
      pp = &t->st_next;
  }
  pthread_mutex_unlock (&p->p_dd.dd_lock);
  list = NULL;
  while (rev) {
    zv_snap_task_t *t = rev;
    rev = t->st_next;
    t->st_next = list;
    list = t;
  }
  for (zv_snap_task_t *t = list, *next; t; t = next) {
    int tr;
    next = t->st_next;
    switch (t->st_op) {
    case SNAP_CREATE: tr = snap_sync_create (p, t->st_ds, t->st_recv); break;
    case SNAP_DESTROY: tr = snap_sync_destroy (p, t->st_ds, txg); break;
    case SNAP_ROLLBACK: tr = snap_sync_rollback (p, t->st_ds, txg); break;
    default: abort ();
    }
    /* A task that failed changed nothing (each checks before it
     * changes); only a failed snapshot leaves a record to drop. */
    if (tr < 0 && t->st_op == SNAP_CREATE) {
      pthread_mutex_lock (&p->p_dd.dd_lock);
      t->st_ds->ds_destroy = t->st_ds->ds_freeing = true;
      pthread_mutex_unlock (&p->p_dd.dd_lock);
    }
    pthread_mutex_lock (&p->p_dd.dd_lock);
    t->st_result = tr;
    pthread_mutex_unlock (&p->p_dd.dd_lock);
  }
  return r;
}

/* ---- import ---- */

/* The dataset with id 'id' (0: none), or NULL. */
static zv_pool_ds_t *
snap_by_id (zv_pool_t *p, uint64_t id)
{
  if (id == 0)
    return NULL;
  for (size_t i = 0; i < p->p_dd.dd_nds; i++)
    if (p->p_dd.dd_dss[i]->ds_id == id)
      return p->p_dd.dd_dss[i];
  return NULL;
}

int
zv_snap_link (zv_pool_t *p)
{
  size_t n = p->p_dd.dd_nds;

  /* Pointers first, each checked alone. */
  for (size_t i = 0; i < n; i++) {
    zv_pool_ds_t *d = p->p_dd.dd_dss[i];
    const char *bad = NULL;

    d->ds_parent = snap_by_id (p, d->ds_parent_id);
    d->ds_prev = snap_by_id (p, d->ds_prev_snap_id);
    if (d->ds_kind == ZV_DS_KIND_SNAPSHOT
        && (d->ds_parent == NULL
            || d->ds_parent->ds_kind != ZV_DS_KIND_VOLUME))
      bad = "its volume is not a volume of the pool";
    else if (d->ds_prev_snap_id != 0
             && (d->ds_prev == NULL
                 || d->ds_prev->ds_kind != ZV_DS_KIND_SNAPSHOT
                 || d->ds_prev->ds_parent_id
                    != (d->ds_kind == ZV_DS_KIND_VOLUME ? d->ds_id
                        : d->ds_parent_id)
                 || d->ds_prev->ds_creation_txg != d->ds_prev_snap_txg))
      bad = "its previous snapshot is not a snapshot of the same volume "
        "taken at its txg";
    else if (d->ds_prev != NULL
             && d->ds_kind == ZV_DS_KIND_SNAPSHOT
             && d->ds_prev->ds_creation_txg >= d->ds_creation_txg)
      bad = "its previous snapshot is not older";
    else if (d->ds_origin_id != 0) {
      zv_pool_ds_t *o = snap_by_id (p, d->ds_origin_id);
      if (o == NULL || o->ds_kind != ZV_DS_KIND_SNAPSHOT
          || d->ds_kind != ZV_DS_KIND_VOLUME
          || o->ds_volsize != d->ds_volsize || o->ds_blksz != d->ds_blksz)
        bad = "its origin is not a snapshot of its shape";
      else if (d->ds_prev_snap_id == 0
               && d->ds_prev_snap_txg != o->ds_creation_txg)
        bad = "a clone's line is not its origin's txg";
    }
    else if (d->ds_prev_snap_id == 0 && d->ds_prev_snap_txg != 0
             && !(d->ds_kind == ZV_DS_KIND_SNAPSHOT && d->ds_parent
                  && d->ds_parent->ds_origin_id != 0))
      bad = "a line without a previous snapshot";
    if (bad == NULL && d->ds_kind == ZV_DS_KIND_SNAPSHOT
        && (d->ds_volsize != d->ds_parent->ds_volsize
            || d->ds_blksz != d->ds_parent->ds_blksz))
      bad = "its shape is not its volume's";
    if (bad != NULL) {
      zv_error ("dataset record %" PRIu64 " ('%s'): %s", d->ds_slot,
                d->ds_name, bad);
      return -EIO;
    }
  }
  /* Each volume's chain: newest to oldest, every snapshot of it once
   * (a cycle or a fork would free a block twice). */
  size_t nsnaps = 0, seen = 0;
  for (size_t i = 0; i < n; i++) {
    zv_pool_ds_t *v = p->p_dd.dd_dss[i];
    size_t steps = 0;

    if (v->ds_kind == ZV_DS_KIND_SNAPSHOT) {
      nsnaps++;
      continue;
    }
    for (zv_pool_ds_t *s = v->ds_prev; s; s = s->ds_prev) {
      if (++steps > n) {
        zv_error ("volume '%s': its snapshots form a cycle", v->ds_name);
        return -EIO;
      }
      if (s->ds_parent != v) {
        zv_error ("volume '%s': snapshot record %" PRIu64 " of another "
                  "volume is in its chain", v->ds_name, s->ds_slot);
        return -EIO;
      }
    }
    seen += steps;
  }
  if (seen != nsnaps) {
    zv_error ("the pool's snapshots are not each in their volume's chain "
              "once (%zu snapshots, %zu in chains)", nsnaps, seen);
    return -EIO;
  }
  /* The birth rule's lines, and the dead lists. */
  for (size_t i = 0; i < n; i++) {
    zv_pool_ds_t *d = p->p_dd.dd_dss[i];
    char what[3 * ZV_NAME_MAX];
    int r;

    if (d->ds_kind == ZV_DS_KIND_SNAPSHOT)
      snprintf (what, sizeof what, "%s@%s", d->ds_parent->ds_name,
                d->ds_name);
    else
      snprintf (what, sizeof what, "%s", d->ds_name);
    d->ds_obj.ob_snap_txg = d->ds_prev_snap_txg;
    r = zv_deadlist_load (&d->ds_deadlist, &p->p_spa, &d->ds_rec.dr_deadlist,
                          d->ds_rec.dr_deadlist_bytes, what);
    if (r < 0)
      return r;
  }
  /* The listing's figures, as a sync would publish them (a read-only
   * import never syncs). */
  zv_dsdir_publish (p);
  return 0;
}
