/*
 * resilver.c: replacing a side of a mirror online, and the resilver that
 * copies the pool's allocated space onto the new side in the background.
 *
 * Theory
 * ------
 * zv_resilver_replace (zvoladm replace POOL OLD NEW) opens NEW (it must
 * hold no pool's labels and be at least the mirror's size), labels it as
 * side i of the mirror OLD is a side of (the configuration of a side in
 * service, with its side number and the side guid OLD had, so the other
 * sides' side tables stay true; an empty ring), writes its resilver
 * record at the start of the data area, and attaches it in OLD's slot
 * (zv_dev_side_attach): from then on every write and flush of the mirror
 * goes to it too, and no read.  Then one thread per pool copies, in
 * offset order, each run of allocated space of that device
 * (zv_alloc_next_allocated, at most zv_resilver_chunk bytes) from a side
 * in service to the new side, flushes the new side and records the
 * position in its resilver record every zv_resilver_persist bytes.  When
 * the last run is copied the record is cleared and the side is put in
 * service, and one more txg is synced so that the new side's ring holds
 * the newest uberblock (until then it may hold none): the mirror is
 * whole.
 *
 *   replace --> RESILVERING --(last run copied, record cleared)--> ONLINE
 *                   |  ^
 *   pool close -----+  +----- import finds the record: resume at rs_pos
 *                   |
 *                   +--(write or copy to the new side fails)--> FAULTED
 *
 * Why this is enough: space allocated behind the position after the
 * thread passed it is written through the mirror, so reaches the new
 * side; space below the position was copied and flushed before the
 * position was recorded; a crash resumes from the last recorded position
 * and copies again what followed it.  Known limit: a run freed and
 * allocated again while the thread copies it may get the old bytes on
 * the new side after the new ones (copy-on-write makes this rare: a
 * freed block is reused two txgs later); such a block fails its checksum
 * there and is healed from another side when read (zio.c), or by a
 * scrub.  The intent log's ring, written in place, has the same window;
 * the replay reads each side until a block verifies (zil_replay.c).
 *
 * Locking: rv_lock guards the pool's resilver state; the counters the
 * status reads are atomics.  One resilver at a time per pool.  The
 * thread is stopped and joined by zv_resilver_stop (pool close) before
 * any device closes.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dev.h"
#include "pool_impl.h"
#include "label.h"
#include "tunable.h"
#include "resilver.h"

/* Tunables: the largest run copied at once; how many bytes of progress
 * between two records of the position; a pause after each run (ms; 0:
 * none), for a resilver that must leave the devices to the clients. */
static uint64_t zv_resilver_chunk = 1ull << 20;
static uint64_t zv_resilver_persist = 16ull << 20;
static unsigned zv_resilver_delay_ms = 0;

struct zv_resilver {
  pthread_mutex_t rv_lock;
  bool rv_running;              /* a thread exists (joined at stop) */
  pthread_t rv_thread;
  atomic_bool rv_stop;
  unsigned rv_dev, rv_side;
  zv_pool_t *rv_pool;
  _Atomic uint64_t rv_pos;      /* data-area offset copied below */
  _Atomic uint64_t rv_copied;   /* bytes copied by this run */
  atomic_bool rv_active;
  char rv_last[256];            /* the last outcome, for status */
};

/* The pool's resilver state, made on first use. */
static zv_resilver_t *
resilver_of (zv_pool_t *p)
{
  static pthread_mutex_t make_lock = PTHREAD_MUTEX_INITIALIZER;

  pthread_mutex_lock (&make_lock);
  if (p->p_resilver == NULL) {
    zv_resilver_t *rv = zv_calloc (1, sizeof *rv);
    pthread_mutex_init (&rv->rv_lock, NULL);
    rv->rv_pool = p;
    p->p_resilver = rv;
  }
  pthread_mutex_unlock (&make_lock);
  return p->p_resilver;
}

/* Record the position (NULL record: the resilver ended). */
static int
resilver_record (zv_resilver_t *rv, bool done, uint64_t pos)
{
  zv_dev_t *dev = rv->rv_pool->p_spa.spa_devs[rv->rv_dev];
  zv_dev_t *side = zv_dev_side (dev, rv->rv_side);
  zv_config_phys_t cf;
  zv_resilver_phys_t rs;
  char err[512];

  if (done)
    return zv_label_write_resilver (side, zv_dev_size (dev), NULL);
  if (zv_label_read_config (dev, &cf, NULL, err, sizeof err) < 0) {
    zv_error ("%s", err);
    return -EIO;
  }
  memset (&rs, 0, sizeof rs);
  rs.rs_magic = ZV_RESILVER_MAGIC;
  rs.rs_version = ZV_RESILVER_VERSION;
  rs.rs_pool_guid = cf.cf_pool_guid;
  rs.rs_dev_guid = cf.cf_dev_guid;
  rs.rs_side_guid = cf.cf_side_guids[rv->rv_side];
  rs.rs_pos = pos;
  return zv_label_write_resilver (side, zv_dev_size (dev), &rs);
}

/* Copy [off, off + len) from a side in service onto the new side. */
static int
resilver_copy (zv_resilver_t *rv, uint64_t off, uint32_t len, void *buf)
{
  zv_dev_t *dev = rv->rv_pool->p_spa.spa_devs[rv->rv_dev];
  int r = -EIO;

  for (unsigned j = 0; j < zv_dev_nsides (dev) && r < 0; j++)
    if (j != rv->rv_side && zv_dev_side_ok (dev, j))
      r = zv_dev_read (zv_dev_side (dev, j), buf, off, len);
  if (r < 0) {
    snprintf (rv->rv_last, sizeof rv->rv_last, "no side in service could "
              "read %" PRIu32 " bytes at %" PRIu64, len, off);
    return r;
  }
  zv_dev_io_t w = {
    .di_dev = zv_dev_side (dev, rv->rv_side), .di_op = ZV_DEV_WRITE,
    .di_buf = buf, .di_offset = off, .di_len = len,
  };
  r = zv_dev_io_batch (&w, 1);
  if (r < 0) {
    zv_dev_side_fault (dev, rv->rv_side, "a resilver write failed");
    snprintf (rv->rv_last, sizeof rv->rv_last, "a write to the new side "
              "failed at %" PRIu64 ": %s", off, strerror (-r));
  }
  return r;
}

static void *
resilver_thread (void *arg)
{
  zv_resilver_t *rv = arg;
  zv_pool_t *p = rv->rv_pool;
  zv_dev_t *dev = p->p_spa.spa_devs[rv->rv_dev];
  uint64_t pos = atomic_load (&rv->rv_pos), recorded = pos;
  uint64_t chunk = ZV_MAX (ZV_P2ALIGN (zv_resilver_chunk, ZV_SECTOR),
                           (uint64_t) ZV_SECTOR);
  void *buf = zv_buf_alloc ((uint32_t) chunk);
  int r = 0;

  zv_thread_name ("zv-resilver");
  while (!atomic_load (&rv->rv_stop)) {
    uint64_t off, len;

    if (!zv_dev_side_resilvering (dev, rv->rv_side)) {
      r = -EIO;                 /* faulted meanwhile */
      snprintf (rv->rv_last, sizeof rv->rv_last, "the new side was "
                "faulted");
      break;
    }
    if (!zv_alloc_next_allocated (p->p_spa.spa_alloc, rv->rv_dev, pos,
                                  chunk, &off, &len))
      break;                    /* all copied */
    r = resilver_copy (rv, off, (uint32_t) len, buf);
    if (r < 0)
      break;
    pos = off + len;
    atomic_store (&rv->rv_pos, pos);
    atomic_fetch_add (&rv->rv_copied, len);
    if (pos - recorded >= __atomic_load_n (&zv_resilver_persist,
                                           __ATOMIC_RELAXED)) {
      r = resilver_record (rv, false, pos);
      if (r < 0)
        break;
      recorded = pos;
    }
    unsigned delay = __atomic_load_n (&zv_resilver_delay_ms,
                                      __ATOMIC_RELAXED);   /* live */
    if (delay > 0) {
      struct timespec ts = { .tv_sec = delay / 1000,
                             .tv_nsec = (long) (delay % 1000) * 1000000 };
      nanosleep (&ts, NULL);
    }
  }
  zv_buf_free (buf);
  if (r == 0 && atomic_load (&rv->rv_stop)) {
    /* Stopped by the pool's close: the position outlives it. */
    if (resilver_record (rv, false, pos) == 0)
      zv_info ("%s: resilver of side %u stopped at %" PRIu64 "; the next "
               "import resumes it", zv_dev_path (dev), rv->rv_side, pos);
  }
  else if (r == 0) {
    /* Everything allocated is on the new side, flushed; the record goes
     * and the side is read from. */
    r = zv_dev_flush (zv_dev_side (dev, rv->rv_side));
    if (r == 0)
      r = resilver_record (rv, true, 0);
    if (r == 0) {
      zv_dev_side_set_resilvering (dev, rv->rv_side, false);
      /* Its ring holds only what txgs wrote since the replace (maybe
       * nothing): one more txg puts the newest uberblock on it, so it
       * holds the pool alone. */
      r = zv_txg_wait_synced (p->p_txg, zv_txg_open_txg (p->p_txg));
      if (r < 0)
        snprintf (rv->rv_last, sizeof rv->rv_last, "the txg after it "
                  "failed: %s", strerror (-r));
    }
    if (r == 0) {
      snprintf (rv->rv_last, sizeof rv->rv_last, "resilvered %" PRIu64
                " bytes", atomic_load (&rv->rv_copied));
      zv_warn ("%s: side %u (%s) resilvered (%" PRIu64 " bytes copied): "
               "the mirror is whole", zv_dev_path (dev), rv->rv_side,
               zv_dev_side_path (dev, rv->rv_side),
               atomic_load (&rv->rv_copied));
    }
  }
  if (r < 0)
    zv_error ("%s: resilver of side %u failed: %s", zv_dev_path (dev),
              rv->rv_side, rv->rv_last[0] ? rv->rv_last : strerror (-r));
  atomic_store (&rv->rv_active, false);
  zv_dev_thread_exit ();
  return NULL;
}

/* Start the thread on side (d, i) from data-area offset pos. */
static int
resilver_start (zv_pool_t *p, unsigned d, unsigned i, uint64_t pos)
{
  zv_resilver_t *rv = resilver_of (p);
  int e;

  pthread_mutex_lock (&rv->rv_lock);
  if (atomic_load (&rv->rv_active)) {
    pthread_mutex_unlock (&rv->rv_lock);
    return -EBUSY;
  }
  if (rv->rv_running) {
    pthread_join (rv->rv_thread, NULL);
    rv->rv_running = false;
  }
  rv->rv_dev = d;
  rv->rv_side = i;
  atomic_store (&rv->rv_pos, ZV_MAX (pos, zv_data_start ()));
  atomic_store (&rv->rv_copied, 0);
  atomic_store (&rv->rv_stop, false);
  atomic_store (&rv->rv_active, true);
  rv->rv_last[0] = '\0';
  e = pthread_create (&rv->rv_thread, NULL, resilver_thread, rv);
  if (e != 0) {
    atomic_store (&rv->rv_active, false);
    pthread_mutex_unlock (&rv->rv_lock);
    zv_error ("resilver: cannot start a thread: %s", strerror (e));
    return -e;
  }
  rv->rv_running = true;
  pthread_mutex_unlock (&rv->rv_lock);
  return 0;
}

int
zv_resilver_replace (zv_pool_t *p, const char *old, const char *new,
                     char *err, size_t errlen)
{
  zv_spa_t *spa = &p->p_spa;
  unsigned d, i = UINT_MAX;
  zv_dev_t *dev = NULL, *side;
  zv_config_phys_t cf;
  zv_resilver_phys_t rs;
  char lerr[512];
  int r;

  if (p->p_readonly) {
    snprintf (err, errlen, "pool '%s' is imported read-only", p->p_name);
    return -EROFS;
  }
  for (d = 0; d < spa->spa_ndevs && i == UINT_MAX; d++)
    for (unsigned s = 0; s < zv_dev_nsides (spa->spa_devs[d]); s++)
      if (zv_dev_is_mirror (spa->spa_devs[d])
          && strcmp (zv_dev_side_path (spa->spa_devs[d], s), old) == 0) {
        dev = spa->spa_devs[d];
        i = s;
        break;
      }
  if (i == UINT_MAX) {
    snprintf (err, errlen, "%s is no side of a mirror of pool '%s'", old,
              p->p_name);
    return -ENOENT;
  }
  d--;
  if (p->p_resilver && atomic_load (&p->p_resilver->rv_active)) {
    snprintf (err, errlen, "a resilver is under way; wait for it to end");
    return -EBUSY;
  }
  if (zv_dev_nsides_ok (dev) - (zv_dev_side_ok (dev, i) ? 1 : 0) == 0) {
    snprintf (err, errlen, "%s is the mirror's last side in service: "
              "replace a faulted side, or add none", old);
    return -EINVAL;
  }
  if (zv_dev_side_ok (dev, i)) {
    /* Replacing a healthy side: the mirror is one side short until the
     * resilver ends, as zpool replace of an online disk is not. */
    zv_warn ("%s: replacing side %u (%s), which is in service: the mirror "
             "has one side less until the resilver ends",
             zv_dev_path (dev), i, old);
  }
  r = zv_dev_open (new, &side, lerr, sizeof lerr);
  if (r < 0) {
    snprintf (err, errlen, "%s", lerr);
    return r;
  }
  if (zv_dev_size (side) < zv_dev_size (dev)) {
    snprintf (err, errlen, "%s: too small (%" PRIu64 " bytes; the mirror "
              "needs %" PRIu64 ")", new, zv_dev_size (side),
              zv_dev_size (dev));
    zv_dev_close (side);
    return -EINVAL;
  }
  r = zv_label_read_config (side, &cf, NULL, lerr, sizeof lerr);
  if (r != -ENOENT) {
    snprintf (err, errlen, "%s: holds a pool's labels (%s); refusing to "
              "overwrite it (wipe it first if it really is unused)", new,
              r == 0 ? cf.cf_name : lerr);
    zv_dev_close (side);
    return -EEXIST;
  }
  r = zv_label_init_side (dev, i, side, &cf);
  if (r == 0) {
    memset (&rs, 0, sizeof rs);
    rs.rs_magic = ZV_RESILVER_MAGIC;
    rs.rs_version = ZV_RESILVER_VERSION;
    rs.rs_pool_guid = cf.cf_pool_guid;
    rs.rs_dev_guid = cf.cf_dev_guid;
    rs.rs_side_guid = cf.cf_side_guids[i];
    rs.rs_pos = zv_data_start ();
    r = zv_label_write_resilver (side, zv_dev_size (dev), &rs);
  }
  if (r < 0) {
    snprintf (err, errlen, "%s: writing its labels failed: %s", new,
              strerror (-r));
    zv_dev_close (side);
    return r;
  }
  r = zv_dev_side_attach (dev, i, side, err, errlen);
  if (r < 0)
    return r;
  zv_warn ("%s: side %u: %s replaced by %s, resilvering", zv_dev_path (dev),
           i, old, new);
  return resilver_start (p, d, i, zv_data_start ());
}

/* An import found a side being resilvered: go on where it stopped. */
int
zv_resilver_resume (zv_pool_t *p)
{
  zv_spa_t *spa = &p->p_spa;

  if (p->p_readonly || p->p_view)
    return 0;
  for (unsigned d = 0; d < spa->spa_ndevs; d++) {
    zv_dev_t *dev = spa->spa_devs[d];

    for (unsigned i = 0; i < zv_dev_nsides (dev); i++) {
      zv_config_phys_t cf;
      zv_resilver_phys_t rs;
      char err[512];

      if (!zv_dev_side_resilvering (dev, i))
        continue;
      if (zv_label_read_config (dev, &cf, NULL, err, sizeof err) < 0)
        return -EIO;
      cf.cf_mirror_side = i;
      if (!zv_label_read_resilver (zv_dev_side (dev, i), zv_dev_size (dev),
                                   &cf, &rs))
        return -EIO;
      zv_warn ("%s: side %u (%s): resuming its resilver at %" PRIu64,
               zv_dev_path (dev), i, zv_dev_side_path (dev, i), rs.rs_pos);
      return resilver_start (p, d, i, rs.rs_pos);
    }
  }
  return 0;
}

void
zv_resilver_stop (zv_pool_t *p)
{
  zv_resilver_t *rv = p->p_resilver;

  if (rv == NULL)
    return;
  atomic_store (&rv->rv_stop, true);
  pthread_mutex_lock (&rv->rv_lock);
  if (rv->rv_running) {
    pthread_join (rv->rv_thread, NULL);
    rv->rv_running = false;
  }
  pthread_mutex_unlock (&rv->rv_lock);
  pthread_mutex_destroy (&rv->rv_lock);
  free (rv);
  p->p_resilver = NULL;
}

bool
zv_resilver_progress (zv_pool_t *p, unsigned *devp, unsigned *sidep,
                      uint64_t *donep, uint64_t *totalp)
{
  zv_resilver_t *rv = p->p_resilver;
  uint64_t end, pos;

  if (rv == NULL || !atomic_load (&rv->rv_active))
    return false;
  *devp = rv->rv_dev;
  *sidep = rv->rv_side;
  end = p->p_spa.spa_data_end[rv->rv_dev];
  pos = ZV_MIN (atomic_load (&rv->rv_pos), end);
  *donep = pos - zv_data_start ();
  *totalp = end - zv_data_start ();
  return true;
}

/* ---- tunables (tunable.h) ---- */
const zv_tunable_t zv_resilver_tunable_table[] = {
  { .tn_name = "resilver_chunk", .tn_module = "resilver",
    ZV_TUNABLE_VAR_U64 (zv_resilver_chunk),
    .tn_default = 1ull << 20, .tn_min = 4096, .tn_max = 16ull << 20,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the resilver thread, when it starts",
    .tn_desc = "The largest run of allocated space a resilver copies at "
    "once onto a new side of a mirror." },
  { .tn_name = "resilver_persist", .tn_module = "resilver",
    ZV_TUNABLE_VAR_U64 (zv_resilver_persist),
    .tn_default = 16ull << 20, .tn_min = 4096, .tn_max = 1ull << 40,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the resilver thread",
    .tn_desc = "How far a resilver goes between two records of its "
    "position on the new side (a restart resumes from the last)." },
  { .tn_name = "resilver_delay", .tn_module = "resilver",
    ZV_TUNABLE_VAR_UINT (zv_resilver_delay_ms),
    .tn_default = 0, .tn_min = 0, .tn_max = 10000,
    .tn_unit = ZV_TUNABLE_UNIT_MS, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the resilver thread, after each run",
    .tn_desc = "A pause after each run a resilver copies, to leave the "
    "devices to the clients (0: none)." },
  ZV_TUNABLE_END
};
