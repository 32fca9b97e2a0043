/*
 * scrub.c: the background scrub of a served pool (zvol_scrub_*): a
 * thread that runs the live scrub (check.c's walk, scan.c's repair) in
 * pieces, and its state for zvoladm status.
 *
 * Theory.  A live check holds the frees of every txg after the one it
 * walks until it ends (check.c), so a walk of hours on a busy pool would
 * keep back more space than a pool has free.  So the scrub is cut in
 * pieces: each piece is a live scrub on a view of the txg last
 * committed when it began, from the place the previous one reached
 * (zv_check_pos_t: trees in the order of their ids, and in the current
 * one the data offset), and ends by itself, quietly, once its hold has
 * kept back a quarter of what a check may (-EAGAIN): the hold is released,
 * and the next piece takes a new view and goes on.  A block written
 * after the scrub passed its place is not scrubbed (it was written
 * after the scrub began); one ahead of the place is the version of the
 * txg its piece walks.  Pause and cancel are the same stop
 * (sc_stop, looked at before each block): the piece ends with
 * -ECANCELED, and the place is kept (paused) or dropped (canceled).
 *
 * States: NONE -> SCANNING (start) -> FINISHED (the walk reached its
 * end) | PAUSED (pause, or the pool's close) | CANCELED (cancel, or an
 * error: ss_error).  PAUSED -> SCANNING (start: resume) | CANCELED
 * (cancel).  FINISHED, CANCELED -> SCANNING (start: a new one, counts
 * from zero).
 *
 * Locking: sc_lock guards the status, the place, sc_why and the
 * thread's existence; sc_cv is signalled whenever the state leaves
 * SCANNING.  The thread takes sc_lock only between pieces and in its
 * progress and problem callbacks (short).  sc_stop is atomic: set under
 * sc_lock, read by the walk without it.  The thread is joined by the
 * one who stopped it, or by the next start, never by itself.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dev.h"
#include "zvol.h"
#include "pool_impl.h"
#include "check.h"
#include "scrub.h"
#include "tunable.h"
#include "txg.h"

/* Pieces in a row that may end for the hold with nothing done, and the
 * longest wait before the next try (each waits twice the last, from
 * 20 ms): a burst of frees (a large txg of overwrites) outlasts a few
 * pieces tried at once, so they are spread over about half a minute
 * before the scrub gives up. */
#define SCRUB_STUCK 32
#define SCRUB_STUCK_WAIT_MAX_MS 1000u

/* How many of a scrub's problem lines go to the log (then a count). */
#define SCRUB_LOG_LINES 200

enum scrub_why {
  SCRUB_WHY_NONE = 0, SCRUB_WHY_PAUSE, SCRUB_WHY_CANCEL,
  SCRUB_WHY_CLOSE,              /* paused by the pool's close: the record
                                   says scanning, so the next import's
                                   start resumes it */
};

struct zv_scrub {
  zv_pool_t *sc_pool;
  pthread_mutex_t sc_lock;
  pthread_cond_t sc_cv;
  pthread_t sc_thread;
  bool sc_have_thread;          /* started and not yet joined */
  _Atomic bool sc_stop;
  enum scrub_why sc_why;
  zv_check_pos_t sc_pos;        /* where the scrub is (the walking piece's
                                   copied in at each progress call) */
  zv_check_pos_t *sc_walk_pos;  /* the walking piece's: its thread's */
  uint64_t sc_kick_ns;          /* the last txg asked for (the place) */
  zvol_scrub_status_t sc_st;
  uint64_t sc_run_ns;           /* this run (since start or resume) */
  uint64_t sc_run_examined;     /* examined when it began */
  uint64_t sc_logged;
};

/* Guards the making of a pool's scrub state (p_scrub is set once). */
static pthread_mutex_t scrub_make_lock = PTHREAD_MUTEX_INITIALIZER;

static zv_scrub_t *
scrub_get (zv_pool_t *p)
{
  zv_scrub_t *sc;

  pthread_mutex_lock (&scrub_make_lock);
  if ((sc = p->p_scrub) == NULL) {
    sc = calloc (1, sizeof *sc);
    ZV_VERIFY (sc != NULL);
    sc->sc_pool = p;
    pthread_mutex_init (&sc->sc_lock, NULL);
    pthread_cond_init (&sc->sc_cv, NULL);
    p->p_scrub = sc;
  }
  pthread_mutex_unlock (&scrub_make_lock);
  return sc;
}

/* Under sc_lock: the rate and what is left, from this run. */
static void
scrub_update_rate (zv_scrub_t *sc, uint64_t now)
{
  zvol_scrub_status_t *st = &sc->sc_st;
  uint64_t ns = now - sc->sc_run_ns;
  uint64_t done = st->ss_examined - ZV_MIN (sc->sc_run_examined,
                                            st->ss_examined);

  if (ns < 100 * 1000 * 1000ull || done == 0)
    return;
  st->ss_rate = (uint64_t) ((double) done * 1e9 / (double) ns);
  st->ss_eta_s = st->ss_rate == 0 ? 0
    : (st->ss_total - ZV_MIN (st->ss_examined, st->ss_total)) / st->ss_rate;
}

/* A txg, so that the scrub's place reaches the disk even while nothing
 * else is written (the sync writes the record: zv_scrub_phys_fill). */
static void
scrub_kick (zv_scrub_t *sc)
{
  zv_txg_t *tx = sc->sc_pool->p_txg;

  zv_txg_kick (tx, zv_txg_open_txg (tx));
}

static void
scrub_progress (void *arg, const char *what, uint64_t done, uint64_t total)
{
  zv_scrub_t *sc = arg;
  uint64_t now = zv_now_ns ();
  bool kick = false;

  (void) what;
  pthread_mutex_lock (&sc->sc_lock);
  sc->sc_st.ss_examined = done;
  sc->sc_st.ss_total = total;
  /* The piece's place is this thread's: a copy for the syncs. */
  if (sc->sc_walk_pos != NULL)
    sc->sc_pos = *sc->sc_walk_pos;
  scrub_update_rate (sc, now);
  if (now - sc->sc_kick_ns >= 1000 * 1000 * 1000ull) {
    sc->sc_kick_ns = now;
    kick = true;
  }
  pthread_mutex_unlock (&sc->sc_lock);
  if (kick)
    scrub_kick (sc);
}

/* Each problem of a piece: to the log (the first SCRUB_LOG_LINES of a
 * scrub), and a block that could not be repaired to the damaged list. */
static void
scrub_problem (void *arg, const zvol_check_problem_t *cp)
{
  zv_scrub_t *sc = arg;
  zvol_scrub_status_t *st = &sc->sc_st;
  bool log;

  pthread_mutex_lock (&sc->sc_lock);
  log = sc->sc_logged++ < SCRUB_LOG_LINES;
  if (cp->cp_kind == ZVOL_CHECK_LOST) {
    if (st->ss_ndamaged < ZVOL_SCRUB_DAMAGED_MAX) {
      zvol_scrub_damaged_t *d = &st->ss_damaged[st->ss_ndamaged];
      if (cp->cp_dataset != NULL) {
        snprintf (d->sd_dataset, sizeof d->sd_dataset, "%s", cp->cp_dataset);
        d->sd_offset = cp->cp_ds_offset;
        d->sd_length = cp->cp_ds_length;
      }
      else                      /* a pool object's block: its line */
        snprintf (d->sd_dataset, sizeof d->sd_dataset, "%.*s",
                  (int) (strcspn (cp->cp_msg, ":")), cp->cp_msg);
    }
    st->ss_ndamaged++;
  }
  else if (cp->cp_kind != ZVOL_CHECK_CKSUM && cp->cp_kind != ZVOL_CHECK_READ)
    st->ss_other++;
  pthread_mutex_unlock (&sc->sc_lock);
  if (log)
    zv_warn ("pool '%s': scrub: %s", sc->sc_pool->p_name, cp->cp_msg);
}

/* Wait before the stuck-th try in a row (10 ms steps, so a pause or a
 * cancel is seen at once). */
static void
scrub_backoff (zv_scrub_t *sc, unsigned stuck)
{
  unsigned ms = 20u << ZV_MIN (stuck - 1, 6u);
  const struct timespec step = { 0, 10 * 1000 * 1000 };

  ms = ZV_MIN (ms, SCRUB_STUCK_WAIT_MAX_MS);
  for (unsigned t = 0; t < ms && !atomic_load (&sc->sc_stop); t += 10)
    nanosleep (&step, NULL);
}

static void *
scrub_main (void *arg)
{
  zv_scrub_t *sc = arg;
  zv_pool_t *p = sc->sc_pool;
  zvol_scrub_status_t *st = &sc->sc_st;
  unsigned stuck = 0;
  int r;

  zv_thread_name ("zv-scrub");
  for (;;) {
    zvol_check_report_t rep = {
      .cr_problem = scrub_problem, .cr_problem_arg = sc,
    };
    zv_check_pos_t pos, before;

    pthread_mutex_lock (&sc->sc_lock);
    pos = before = sc->sc_pos;
    sc->sc_walk_pos = &pos;
    pthread_mutex_unlock (&sc->sc_lock);
    r = zv_check_scrub_piece (p, &rep, &sc->sc_stop, scrub_progress, sc,
                              &pos);
    pthread_mutex_lock (&sc->sc_lock);
    sc->sc_walk_pos = NULL;
    sc->sc_pos = pos;
    st->ss_pieces++;
    st->ss_repaired += rep.cr_repaired;
    st->ss_repair_failed += rep.cr_repair_failed;
    st->ss_cksum_errors += rep.cr_cksum_errors;
    st->ss_read_errors += rep.cr_read_errors;
    st->ss_lost += rep.cr_lost_blocks;
    st->ss_problems += rep.cr_problems;
    /* A piece that ended for its hold: the next one, from where it
     * got to.  One that got nowhere (its view took so long to import,
     * the pool being busy, that the hold passed its bound before a
     * block was verified) is tried again after a wait, SCRUB_STUCK
     * times at most. */
    if (r == -EAGAIN || r == -ENOSPC) {
      bool moved = pos.cp_phase != before.cp_phase
        || pos.cp_ds_id != before.cp_ds_id || pos.cp_off != before.cp_off;
      stuck = moved ? 0 : stuck + 1;
      if ((r == -EAGAIN && moved) || (stuck > 0 && stuck <= SCRUB_STUCK
                                      && !atomic_load (&sc->sc_stop))) {
        pthread_mutex_unlock (&sc->sc_lock);
        if (stuck > 0)
          scrub_backoff (sc, stuck);
        continue;
      }
    }
    break;
  }
  /* Still under sc_lock. */
  st->ss_elapsed_ns += zv_now_ns () - sc->sc_run_ns;
  scrub_update_rate (sc, zv_now_ns ());
  if (r == 0) {
    st->ss_state = ZVOL_SCRUB_FINISHED;
    st->ss_examined = st->ss_total;
    st->ss_eta_s = 0;
    zv_info ("pool '%s': scrub finished: %" PRIu64 " copies repaired, %"
             PRIu64 " repairs failed, %" PRIu64 " blocks could not be "
             "repaired", p->p_name, st->ss_repaired, st->ss_repair_failed,
             st->ss_lost);
  }
  else if (r == -ECANCELED && sc->sc_why == SCRUB_WHY_CANCEL) {
    st->ss_state = ZVOL_SCRUB_CANCELED;
    zv_info ("pool '%s': scrub canceled", p->p_name);
  }
  else if (r == -ECANCELED) {
    st->ss_state = ZVOL_SCRUB_PAUSED;
    zv_info ("pool '%s': scrub %s", p->p_name,
             sc->sc_why == SCRUB_WHY_CLOSE ? "stopped with the pool (it "
             "goes on when the pool is served again)" : "paused");
  }
  else {
    st->ss_state = ZVOL_SCRUB_CANCELED;
    st->ss_error = r == -EAGAIN ? -ENOSPC : r;
    if (st->ss_error == -ENOSPC)
      zv_error ("pool '%s': the scrub's hold kept back too much of the "
                "free space %u times in a row before it could verify a "
                "block: the pool is too busy (or check_hold_pct too low)",
                p->p_name, stuck);
    zv_error ("pool '%s': scrub stopped: %s", p->p_name,
              strerror (-st->ss_error));
  }
  if (st->ss_state != ZVOL_SCRUB_PAUSED)
    sc->sc_pos = (zv_check_pos_t) { 0 };
  pthread_cond_broadcast (&sc->sc_cv);
  pthread_mutex_unlock (&sc->sc_lock);
  scrub_kick (sc);              /* the record changes: gone, or paused */
  zv_dev_thread_exit ();
  return NULL;
}

/* Under sc_lock: join a thread that ended. */
static void
scrub_join (zv_scrub_t *sc)
{
  if (sc->sc_have_thread) {
    ZV_VERIFY (sc->sc_st.ss_state != ZVOL_SCRUB_SCANNING);
    pthread_join (sc->sc_thread, NULL);
    sc->sc_have_thread = false;
  }
}

int
zvol_scrub_start (zvol_pool_t *p)
{
  zv_scrub_t *sc;
  zvol_scrub_status_t *st;
  bool resume;
  int r;

  if (p->p_readonly || p->p_view) {
    zv_error ("pool '%s' is imported read-only here: scrub it offline "
              "(zvoladm scrub with the server stopped)", p->p_name);
    return -EROFS;
  }
  sc = scrub_get (p);
  st = &sc->sc_st;
  pthread_mutex_lock (&sc->sc_lock);
  if (st->ss_state == ZVOL_SCRUB_SCANNING) {
    pthread_mutex_unlock (&sc->sc_lock);
    return -EBUSY;
  }
  scrub_join (sc);
  resume = st->ss_state == ZVOL_SCRUB_PAUSED;
  if (!resume) {
    memset (st, 0, sizeof *st);
    sc->sc_pos = (zv_check_pos_t) { 0 };
    sc->sc_logged = 0;
  }
  st->ss_state = ZVOL_SCRUB_SCANNING;
  st->ss_error = 0;
  sc->sc_why = SCRUB_WHY_NONE;
  atomic_store (&sc->sc_stop, false);
  sc->sc_run_ns = zv_now_ns ();
  sc->sc_run_examined = st->ss_examined;
  r = pthread_create (&sc->sc_thread, NULL, scrub_main, sc);
  if (r != 0) {
    st->ss_state = ZVOL_SCRUB_CANCELED;
    st->ss_error = -r;
    pthread_mutex_unlock (&sc->sc_lock);
    zv_error ("pool '%s': the scrub's thread: %s", p->p_name, strerror (r));
    return -r;
  }
  sc->sc_have_thread = true;
  pthread_mutex_unlock (&sc->sc_lock);
  zv_info ("pool '%s': scrub %s", p->p_name, resume ? "resumed" : "started");
  return resume ? 1 : 0;
}

/* Stop a scanning scrub for 'why' and wait for its thread. */
static int
scrub_stop (zv_scrub_t *sc, enum scrub_why why)
{
  zvol_scrub_status_t *st = &sc->sc_st;

  pthread_mutex_lock (&sc->sc_lock);
  if (st->ss_state == ZVOL_SCRUB_PAUSED && why == SCRUB_WHY_CANCEL) {
    scrub_join (sc);
    st->ss_state = ZVOL_SCRUB_CANCELED;
    sc->sc_pos = (zv_check_pos_t) { 0 };
    pthread_mutex_unlock (&sc->sc_lock);
    zv_info ("pool '%s': scrub canceled", sc->sc_pool->p_name);
    scrub_kick (sc);
    return 0;
  }
  if (st->ss_state != ZVOL_SCRUB_SCANNING) {
    pthread_mutex_unlock (&sc->sc_lock);
    return -ENOENT;
  }
  sc->sc_why = why;
  atomic_store (&sc->sc_stop, true);
  while (st->ss_state == ZVOL_SCRUB_SCANNING)
    pthread_cond_wait (&sc->sc_cv, &sc->sc_lock);
  scrub_join (sc);
  pthread_mutex_unlock (&sc->sc_lock);
  return 0;
}

int
zvol_scrub_pause (zvol_pool_t *p)
{
  return scrub_stop (scrub_get (p), SCRUB_WHY_PAUSE);
}

int
zvol_scrub_cancel (zvol_pool_t *p)
{
  return scrub_stop (scrub_get (p), SCRUB_WHY_CANCEL);
}

int
zvol_scrub_wait (zvol_pool_t *p, const int cancel_fd[2],
                 void (*progress) (void *arg, uint64_t done, uint64_t total),
                 void *arg)
{
  static const int none[2] = { -1, -1 };
  zv_scrub_t *sc = scrub_get (p);
  zvol_scrub_status_t *st = &sc->sc_st;
  uint64_t last = 0, total;

  pthread_mutex_lock (&sc->sc_lock);
  while (st->ss_state == ZVOL_SCRUB_SCANNING) {
    struct timespec t;
    uint64_t now = zv_now_ns ();

    if (progress && now - last >= 1000 * 1000 * 1000ull) {
      uint64_t d = st->ss_examined, n = st->ss_total;
      last = now;
      pthread_mutex_unlock (&sc->sc_lock);
      progress (arg, d, n);
      pthread_mutex_lock (&sc->sc_lock);
      continue;
    }
    if (zv_cancel_poll (cancel_fd ? cancel_fd : none) != 0) {
      pthread_mutex_unlock (&sc->sc_lock);
      return -ECANCELED;
    }
    clock_gettime (CLOCK_REALTIME, &t);
    t.tv_nsec += 200 * 1000 * 1000;
    if (t.tv_nsec >= 1000 * 1000 * 1000) {
      t.tv_sec++;
      t.tv_nsec -= 1000 * 1000 * 1000;
    }
    (void) pthread_cond_timedwait (&sc->sc_cv, &sc->sc_lock, &t);
  }
  total = st->ss_total;
  pthread_mutex_unlock (&sc->sc_lock);
  if (progress)
    progress (arg, total, total);
  return 0;
}

void
zvol_scrub_get_status (zvol_pool_t *p, zvol_scrub_status_t *out)
{
  zv_scrub_t *sc;

  if (p->p_readonly || p->p_view) {
    memset (out, 0, sizeof *out);
    return;
  }
  sc = scrub_get (p);
  pthread_mutex_lock (&sc->sc_lock);
  *out = sc->sc_st;
  if (out->ss_state == ZVOL_SCRUB_SCANNING)
    out->ss_elapsed_ns += zv_now_ns () - sc->sc_run_ns;
  pthread_mutex_unlock (&sc->sc_lock);
}

void
zv_scrub_stop_for_close (zv_pool_t *p)
{
  if (p->p_scrub != NULL)
    (void) scrub_stop (p->p_scrub, SCRUB_WHY_CLOSE);
}

void
zv_scrub_free (zv_pool_t *p)
{
  zv_scrub_t *sc = p->p_scrub;

  if (sc == NULL)
    return;
  (void) scrub_stop (sc, SCRUB_WHY_CLOSE);
  pthread_mutex_lock (&sc->sc_lock);
  scrub_join (sc);
  pthread_mutex_unlock (&sc->sc_lock);
  pthread_cond_destroy (&sc->sc_cv);
  pthread_mutex_destroy (&sc->sc_lock);
  free (sc);
  p->p_scrub = NULL;
}

/* ---- the persisted place (format.h, zv_scan_phys_t) ---- */

void
zv_scrub_phys_seal (zv_scan_phys_t *sp, uint64_t guid)
{
  memset (&sp->sp_cksum, 0, sizeof sp->sp_cksum);
  zv_cksum_compute (sp, sizeof *sp, guid, &sp->sp_cksum);
}

int
zv_scrub_phys_check (const zv_scan_phys_t *sp, uint64_t guid)
{
  static const zv_scan_phys_t zero;
  zv_scan_phys_t c;

  if (memcmp (sp, &zero, sizeof *sp) == 0)
    return 0;
  if (sp->sp_magic != ZV_SCAN_MAGIC || sp->sp_version != ZV_SCAN_VERSION)
    return -EIO;
  c = *sp;
  zv_scrub_phys_seal (&c, guid);
  if (!zv_cksum_equal (&c.sp_cksum, &sp->sp_cksum))
    return -EIO;
  if ((sp->sp_state != ZV_SCAN_SCANNING && sp->sp_state != ZV_SCAN_PAUSED)
      || sp->sp_phase >= ZV_CHECK_PHASE_DONE || sp->sp_pad != 0
      || memcmp (sp->sp_reserved, zero.sp_reserved,
                 sizeof sp->sp_reserved) != 0)
    return -EIO;
  /* A place before the trees has nothing of them done. */
  if (sp->sp_phase != ZV_CHECK_PHASE_TREES
      && (sp->sp_ds_id != 0 || sp->sp_off != 0))
    return -EIO;
  if (sp->sp_ds_id >= (1ull << 62) || sp->sp_examined > sp->sp_total
      || sp->sp_repaired + sp->sp_repair_failed
      > sp->sp_cksum_errors + sp->sp_read_errors
      || sp->sp_cksum_errors > sp->sp_problems
      || sp->sp_read_errors > sp->sp_problems
      || sp->sp_lost > sp->sp_problems || sp->sp_other > sp->sp_problems)
    return -EIO;
  return 1;
}

void
zv_scrub_phys_fill (zv_pool_t *p, zv_scan_phys_t *sp)
{
  zv_scrub_t *sc = p->p_scrub;
  const zvol_scrub_status_t *st;

  memset (sp, 0, sizeof *sp);
  /* p_scrub is made before the txg thread starts (zv_scrub_pool_init)
   * and freed after it stopped: the sync reads it without
   * scrub_make_lock. */
  if (sc == NULL)
    return;
  st = &sc->sc_st;
  pthread_mutex_lock (&sc->sc_lock);
  if (st->ss_state == ZVOL_SCRUB_SCANNING
      || st->ss_state == ZVOL_SCRUB_PAUSED) {
    bool scanning = st->ss_state == ZVOL_SCRUB_SCANNING
      || sc->sc_why == SCRUB_WHY_CLOSE;
    *sp = (zv_scan_phys_t) {
      .sp_magic = ZV_SCAN_MAGIC, .sp_version = ZV_SCAN_VERSION,
      .sp_state = scanning ? ZV_SCAN_SCANNING : ZV_SCAN_PAUSED,
      .sp_phase = sc->sc_pos.cp_phase, .sp_ds_id = sc->sc_pos.cp_ds_id,
      .sp_off = sc->sc_pos.cp_off,
      .sp_examined = ZV_MIN (st->ss_examined, st->ss_total),
      .sp_total = st->ss_total,
      .sp_repaired = st->ss_repaired,
      .sp_repair_failed = st->ss_repair_failed,
      .sp_cksum_errors = st->ss_cksum_errors,
      .sp_read_errors = st->ss_read_errors, .sp_lost = st->ss_lost,
      .sp_problems = st->ss_problems, .sp_other = st->ss_other,
      .sp_pieces = st->ss_pieces, .sp_elapsed_ns = st->ss_elapsed_ns
      + (st->ss_state == ZVOL_SCRUB_SCANNING ? zv_now_ns () - sc->sc_run_ns
         : 0),
    };
    /* The walk's own place is DONE only after its last block; the
     * record keeps the last place before it. */
    if (sp->sp_phase >= ZV_CHECK_PHASE_DONE)
      *sp = (zv_scan_phys_t) { 0 };
  }
  pthread_mutex_unlock (&sc->sc_lock);
  if (sp->sp_magic != 0)
    zv_scrub_phys_seal (sp, p->p_spa.spa_guid);
}

void
zv_scrub_phys_load (zv_pool_t *p, const zv_scan_phys_t *sp)
{
  int r = zv_scrub_phys_check (sp, p->p_spa.spa_guid);

  memset (&p->p_scan_rec, 0, sizeof p->p_scan_rec);
  if (r < 0)
    zv_warn ("pool '%s': the scrub's place in the objset does not verify: "
             "a scrub that was running or paused starts over when asked "
             "for", p->p_name);
  if (r == 1)
    p->p_scan_rec = *sp;
}

void
zv_scrub_pool_init (zv_pool_t *p)
{
  const zv_scan_phys_t *sp = &p->p_scan_rec;
  zv_scrub_t *sc;
  zvol_scrub_status_t *st;

  if (p->p_readonly || p->p_view)
    return;
  sc = scrub_get (p);
  if (sp->sp_magic != ZV_SCAN_MAGIC)
    return;
  st = &sc->sc_st;
  pthread_mutex_lock (&sc->sc_lock);
  *st = (zvol_scrub_status_t) {
    .ss_state = ZVOL_SCRUB_PAUSED,
    .ss_examined = sp->sp_examined, .ss_total = sp->sp_total,
    .ss_repaired = sp->sp_repaired,
    .ss_repair_failed = sp->sp_repair_failed,
    .ss_cksum_errors = sp->sp_cksum_errors,
    .ss_read_errors = sp->sp_read_errors, .ss_lost = sp->sp_lost,
    .ss_problems = sp->sp_problems, .ss_other = sp->sp_other,
    .ss_pieces = sp->sp_pieces, .ss_elapsed_ns = sp->sp_elapsed_ns,
  };
  sc->sc_pos = (zv_check_pos_t) {
    .cp_phase = sp->sp_phase, .cp_ds_id = sp->sp_ds_id,
    .cp_off = sp->sp_off,
  };
  pthread_mutex_unlock (&sc->sc_lock);
  /* Said as a warning: the operator learns that a scrub goes on (or
   * waits) beside the clients after a restart. */
  zv_warn ("pool '%s': a scrub was %s when the pool was last written, at "
           "%" PRIu64 " of %" PRIu64 " bytes%s", p->p_name,
           sp->sp_state == ZV_SCAN_SCANNING ? "running" : "paused",
           sp->sp_examined, sp->sp_total,
           sp->sp_state == ZV_SCAN_SCANNING ? ": resumed"
           : " (zvoladm scrub resumes it)");
}

void
zv_scrub_pool_started (zv_pool_t *p)
{
  if (!p->p_readonly && !p->p_view && p->p_scan_rec.sp_magic == ZV_SCAN_MAGIC
      && p->p_scan_rec.sp_state == ZV_SCAN_SCANNING)
    (void) zvol_scrub_start (p);
}
