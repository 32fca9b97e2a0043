/*
 * pooltest.h: a pool and its volume opened and closed as one, for the
 * unit tests that exercise the engine below the public split (test_pool,
 * test_zvol, test_zil, test_zil_crash).  tpool_open opens the pool and
 * its only volume (which replays the volume's intent log), tvol finds
 * that volume again, tpool_close closes both.  Tests of the split itself
 * call zvol_open / zvol_close directly.
 *
 * Header-only (static functions), like testlib.h.
 */
#ifndef ZV_POOLTEST_H
#define ZV_POOLTEST_H

#include <pthread.h>
#include <stdlib.h>

#include "zvol.h"
#include "pool.h"

#define TP_FN static __attribute__ ((unused))
#define TP_MAX 16

static struct {
  pthread_mutex_t tp_lock;
  zvol_pool_t *tp_pool[TP_MAX];
  zvol_t *tp_vol[TP_MAX];
} tp_open = { .tp_lock = PTHREAD_MUTEX_INITIALIZER };

/* The volume configuration tpool_open uses (tests may change it). */
static zvol_config_t tp_volcfg = {
  .vc_sync = ZVOL_SYNC_STANDARD, .vc_logbias = ZVOL_LOGBIAS_LATENCY,
};

/* zvol_pool_open, then zvol_open of its volume: 0 or the first error
 * (nothing stays open then). */
TP_FN int
tpool_open (const zvol_pool_config_t *pc, zvol_pool_t **pp)
{
  zvol_t *zv;
  int r = zvol_pool_open (pc, pp);

  if (r < 0)
    return r;
  r = zvol_open (*pp, NULL, &tp_volcfg, &zv);
  if (r < 0) {
    /* (A replay cut short may leave the pool suspended: its close then
     * fails too, and releases it all the same.) */
    (void) zvol_pool_close (*pp);
    *pp = NULL;
    return r;
  }
  pthread_mutex_lock (&tp_open.tp_lock);
  for (unsigned i = 0; i < TP_MAX; i++)
    if (tp_open.tp_pool[i] == NULL) {
      tp_open.tp_pool[i] = *pp;
      tp_open.tp_vol[i] = zv;
      pthread_mutex_unlock (&tp_open.tp_lock);
      return 0;
    }
  abort ();                     /* more pools open than a test needs */
}

/* The volume tpool_open opened on p. */
TP_FN zvol_t *
tvol (zvol_pool_t *p)
{
  zvol_t *zv = NULL;

  pthread_mutex_lock (&tp_open.tp_lock);
  for (unsigned i = 0; i < TP_MAX; i++)
    if (tp_open.tp_pool[i] == p)
      zv = tp_open.tp_vol[i];
  pthread_mutex_unlock (&tp_open.tp_lock);
  if (zv == NULL)
    abort ();                   /* not opened with tpool_open */
  return zv;
}

/* zvol_close, then zvol_pool_close: the first error. */
TP_FN int
tpool_close (zvol_pool_t *p)
{
  zvol_t *zv = tvol (p);
  int r, r2;

  pthread_mutex_lock (&tp_open.tp_lock);
  for (unsigned i = 0; i < TP_MAX; i++)
    if (tp_open.tp_pool[i] == p)
      tp_open.tp_pool[i] = NULL;
  pthread_mutex_unlock (&tp_open.tp_lock);
  r = zvol_close (zv);
  r2 = zvol_pool_close (p);
  return r < 0 ? r : r2;
}

/* The pool's figures as the kstat file shows them (free() it). */
TP_FN char *
tpool_stats (zvol_pool_t *p)
{
  return zvol_format_stats (p, tvol (p));
}

#endif /* ZV_POOLTEST_H */
