/*
 * zvol.c: the volume: NBD-shaped requests onto the by-dnode object calls
 * under txg holds, and the volume's intent log.
 *
 * Theory.  A request never looks anything up: the volume keeps its
 * object handle (zv_obj) for its whole life, from the dataset it holds
 * in the pool.  A write is cut into pieces of at most zv_zvol_chunk
 * bytes; each piece takes a hold on the open txg (throttled there when
 * dirty data runs high), dirties its blocks, lets go, and logs the change
 * in the intent log (an in-memory record, no I/O), so a huge write cannot
 * pin one txg.  A FUA write, a flush, or any write of a sync=always
 * volume then commits the log up to its record: one log write and a
 * device flush, shared by concurrent committers (zil_commit.c), not a
 * txg.  Trim, and zero with MAY_TRIM, free whole blocks (holes read as
 * zeros); zero writes zeros into partial edges, trim leaves them as they
 * are (a trim is advisory).  A zero without MAY_TRIM keeps every block of its
 * range allocated.
 *
 * Opening the volume opens its log from the header the pool keeps,
 * attaches it to the pool (every txg sync stores its header and tells it
 * what is on disk), and replays it (the import judged the log already,
 * and the replay goes by the pool's zil_recover for what only it can
 * find: an in-place block that does not verify); closing makes everything
 * durable first, so the detached log has nothing left to say.
 *
 * Concurrency: requests run in parallel.  What they share is the range
 * locks below (a writer's order of applying and of logging), the buffer
 * cache's per-block locks (dbuf.c), the txg holds (txg.c) and the log's
 * lock-free rings (zil_commit.c).  Nothing else is written after open.
 */
#include <config.h>

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <inttypes.h>

#include <pthread.h>
#include <stdlib.h>

#include "zvol.h"
#include "pool.h"
#include "snap.h"
#include "send.h"
#include "tunable.h"
#include "compress.h"
#include "resilver.h"
#include "txg.h"

/* The public constants are the engine's own, not a copy to keep in step. */
static_assert (ZVOL_MAX_DEVS == ZV_MAX_DEVS, "device count");
static_assert (ZVOL_NAME_MAX == ZV_NAME_MAX, "name length");
static_assert (ZVOL_MAX_VOLBLOCKSIZE <= ZV_MAX_BLKSZ, "largest block");
static_assert (ZVOL_MIN_VOLBLOCKSIZE % ZV_SECTOR == 0, "smallest block");
static_assert (ZVOL_SYNC_STANDARD == (unsigned) ZV_SYNC_STANDARD
               && ZVOL_SYNC_ALWAYS == (unsigned) ZV_SYNC_ALWAYS
               && ZVOL_SYNC_DISABLED == (unsigned) ZV_SYNC_DISABLED,
               "sync modes");
static_assert (ZVOL_LOGBIAS_LATENCY == (unsigned) ZV_LOGBIAS_LATENCY
               && ZVOL_LOGBIAS_THROUGHPUT == (unsigned) ZV_LOGBIAS_THROUGHPUT,
               "logbias");
static_assert (ZVOL_LOG_DEBUG == (int) ZV_LOG_DEBUG
               && ZVOL_LOG_INFO == (int) ZV_LOG_INFO
               && ZVOL_LOG_WARN == (int) ZV_LOG_WARN
               && ZVOL_LOG_ERROR == (int) ZV_LOG_ERROR, "log levels");
static_assert (ZVOL_TXG_HISTORY == ZV_TXG_HISTORY, "txg history rows");
static_assert (ZVOL_MIN_VOLBLOCKSIZE == ZV_MIN_VOLBLOCKSIZE
               && ZVOL_MAX_VOLBLOCKSIZE == ZV_MAX_VOLBLOCKSIZE
               && ZVOL_DEFAULT_VOLBLOCKSIZE == ZV_DEFAULT_VOLBLOCKSIZE,
               "volume block sizes");

/* The public configuration structs are the engine's, field for field: a
 * change to either fails the build here, and the API passes them whole. */
#define ZVOL_SAME_FIELD(pub, eng, f) \
  static_assert (offsetof (pub, f) == offsetof (eng, f) \
                 && sizeof (((pub *) 0)->f) == sizeof (((eng *) 0)->f), #f)
#define ZVOL_SAME_TT(f) \
  ZVOL_SAME_FIELD (zvol_txg_tunables_t, zv_txg_tunables_t, f)
ZVOL_SAME_TT (tt_timeout_ms);
ZVOL_SAME_TT (tt_dirty_max);
ZVOL_SAME_TT (tt_dirty_sync_pct);
ZVOL_SAME_TT (tt_delay_min_dirty_pct);
ZVOL_SAME_TT (tt_delay_scale_ns);
ZVOL_SAME_TT (tt_delay_max_ns);
static_assert (sizeof (zvol_txg_tunables_t) == sizeof (zv_txg_tunables_t),
               "txg tunables");
#define ZVOL_SAME_PC(f) \
  ZVOL_SAME_FIELD (zvol_pool_config_t, zv_pool_config_t, f)
ZVOL_SAME_PC (pc_devices);
ZVOL_SAME_PC (pc_ndevices);
ZVOL_SAME_PC (pc_create);
ZVOL_SAME_PC (pc_readonly);
ZVOL_SAME_PC (pc_rewind);
ZVOL_SAME_PC (pc_name);
ZVOL_SAME_PC (pc_volsize);
ZVOL_SAME_PC (pc_volblocksize);
ZVOL_SAME_PC (pc_sparse);
ZVOL_SAME_PC (pc_zil_size);
ZVOL_SAME_PC (pc_logdevice);
ZVOL_SAME_PC (pc_cache_size);
ZVOL_SAME_PC (pc_txg);
ZVOL_SAME_PC (pc_progress);
ZVOL_SAME_PC (pc_progress_arg);
ZVOL_SAME_PC (pc_zil_recover);
ZVOL_SAME_PC (pc_verify_full);
ZVOL_SAME_PC (pc_ceph_conf);
ZVOL_SAME_PC (pc_ceph_user);
ZVOL_SAME_PC (pc_ceph_keyring);
ZVOL_SAME_PC (pc_rados_size);
ZVOL_SAME_PC (pc_rados_log_size);
ZVOL_SAME_PC (pc_rados_takeover);
ZVOL_SAME_PC (pc_compression);
static_assert (sizeof (zvol_pool_config_t) == sizeof (zv_pool_config_t),
               "pool configuration");
static_assert (ZVOL_ZIL_RECOVER_NONE == (unsigned) ZV_ZIL_RECOVER_NONE
               && ZVOL_ZIL_RECOVER_TRUNCATE
                  == (unsigned) ZV_ZIL_RECOVER_TRUNCATE
               && ZVOL_ZIL_RECOVER_DISCARD
                  == (unsigned) ZV_ZIL_RECOVER_DISCARD, "zil_recover modes");

/*
 * Range locks.  A change is applied to the blocks (in txg order) and then
 * logged (in ticket order); replay follows ticket order, so for any block
 * the two orders must agree: two overlapping writes must not apply in one
 * order and log in the other.  A writer holds the locks of the grains it
 * changes from before it applies the change until its record is
 * published.  The volume is cut into grains of ZVOL_LOCK_GRAIN (128 KiB,
 * the largest volume block, so every block lies in one grain and two
 * changes of one block always meet on its lock), grain i locked by stripe
 * i % ZVOL_STRIPES.  Every operation works on at most a region (1 MiB) at
 * a time (writes in pieces, trim and zero region by region), so it holds
 * at most ZVOL_LOCK_MAX stripes, taken in ascending stripe order.  The
 * grain is finer than the region because a sequential stream of 128 KiB
 * writes at a queue depth of 16 puts eight requests in flight in each
 * 1 MiB region: with one lock per region they ran one at a time, each
 * woken by the last (a futex wake and a thread switch per request), while
 * disjoint requests have nothing to order.  Readers take none: a read
 * sees whole blocks under the buffer's own lock.
 */
#define ZVOL_STRIPES 256u
#define ZVOL_REGION (1ull << 20)
#define ZVOL_LOCK_GRAIN ((uint64_t) ZV_MAX_BLKSZ)
/* Grains a range of at most a region can touch. */
#define ZVOL_LOCK_MAX ((unsigned) (ZVOL_REGION / ZVOL_LOCK_GRAIN) + 1)
static_assert (ZVOL_LOCK_MAX <= ZVOL_STRIPES, "a range's grains have "
               "distinct stripes");

struct zvol {
  zv_pool_t *zv_pool;
  zv_pool_ds_t *zv_ds;        /* held while open */
  zv_object_t *zv_obj;        /* the dataset's, for the volume's life */
  zv_txg_t *zv_txg;
  zv_zil_t *zv_zil;           /* NULL when read-only */
  unsigned zv_sync;           /* ZVOL_SYNC_* */
  uint64_t zv_volsize;
  uint32_t zv_blksz;
  bool zv_readonly;
  bool zv_snapshot;           /* a snapshot: read-only whatever the pool */
  char zv_name[2 * ZV_NAME_MAX]; /* "VOL" or "VOL@SNAP" */
  pthread_mutex_t zv_stripes[ZVOL_STRIPES]; /* range locks */
};

typedef struct zvol_range {
  unsigned zr_s[ZVOL_LOCK_MAX];         /* ascending */
  unsigned zr_n;
} zvol_range_t;

/* Lock the grains of [off, off + len), len <= ZVOL_REGION. */
static void
zvol_range_enter (zvol_t *zv, uint64_t off, uint64_t len, zvol_range_t *zr)
{
  uint64_t g0 = off / ZVOL_LOCK_GRAIN;
  uint64_t g1 = (off + (len ? len : 1) - 1) / ZVOL_LOCK_GRAIN;
  unsigned first = (unsigned) (g0 % ZVOL_STRIPES), wrap;

  ZV_VERIFY3U (len, <=, ZVOL_REGION);
  zr->zr_n = (unsigned) (g1 - g0 + 1);
  ZV_ASSERT3U (zr->zr_n, <=, ZVOL_LOCK_MAX);
  /* Consecutive stripes from 'first', maybe wrapping past the last one:
   * the wrapped ones (the lowest indices) go first. */
  wrap = first + zr->zr_n > ZVOL_STRIPES ? first + zr->zr_n - ZVOL_STRIPES
    : 0;
  for (unsigned i = 0; i < wrap; i++)
    zr->zr_s[i] = i;
  for (unsigned i = wrap; i < zr->zr_n; i++)
    zr->zr_s[i] = first + i - wrap;
  for (unsigned i = 0; i < zr->zr_n; i++)
    pthread_mutex_lock (&zv->zv_stripes[zr->zr_s[i]]);
}

static void
zvol_range_exit (zvol_t *zv, zvol_range_t *zr)
{
  for (unsigned i = zr->zr_n; i-- > 0;)
    pthread_mutex_unlock (&zv->zv_stripes[zr->zr_s[i]]);
}

/* End of the region chunk that starts at off, within [off, end). */
static uint64_t
zvol_region_end (uint64_t off, uint64_t end)
{
  return ZV_MIN (end, ZV_P2ALIGN (off, ZVOL_REGION) + ZVOL_REGION);
}

/* Bytes of a request dirtied under one txg hold (at most a region). */
static uint64_t zv_zvol_chunk = ZVOL_REGION;
/* Blocks freed under one txg hold. */
static uint64_t zv_zvol_free_chunk = 1ull << 16;

uint64_t
zvol_size (zvol_t *zv)
{
  return zv->zv_volsize;
}

uint32_t
zvol_blocksize (zvol_t *zv)
{
  return zv->zv_blksz;
}

bool
zvol_is_readonly (zvol_t *zv)
{
  return zv->zv_readonly;
}

/* Range and mode checks common to every request. */
static int
zvol_check (zvol_t *zv, uint64_t off, uint64_t len, bool write,
            const char *op)
{
  if (write && zv->zv_snapshot) {
    zv_error ("%s: '%s' is a snapshot, read-only", op, zv->zv_name);
    return -EROFS;
  }
  if (write && zv->zv_readonly) {
    zv_error ("%s: pool '%s' is read-only", op, zv_pool_name (zv->zv_pool));
    return -EROFS;
  }
  if (off > zv->zv_volsize || len > zv->zv_volsize - off) {
    zv_error ("%s: range %" PRIu64 "+%" PRIu64 " is past the end of the "
              "volume (%" PRIu64 " bytes)", op, off, len, zv->zv_volsize);
    return -EINVAL;
  }
  if (write) {
    int e = zv_txg_error (zv->zv_txg);
    if (e) {
      zv_error ("%s: pool '%s' is suspended after an I/O error", op,
                zv_pool_name (zv->zv_pool));
      return -EIO;
    }
  }
  return 0;
}

/*
 * After a change was applied in txgs up to 'txg' and logged: if the pool
 * was suspended meanwhile (a txg sync failed, perhaps the very sync the
 * log's wait for room in its record ring ran) and that txg is not on
 * disk, the change can never be durable: no txg syncs again, and the log
 * dropped its record or fails every commit from now on.  Such a request
 * fails with EIO, as one that found the pool suspended at its start.
 */
static int
zvol_check_durable (zvol_t *zv, uint64_t txg, const char *op)
{
  if (txg == 0 || zv_txg_error (zv->zv_txg) == 0
      || txg <= zv_txg_last_synced (zv->zv_txg))
    return 0;
  zv_error ("%s: pool '%s' was suspended after an I/O error; the change "
            "will never be durable", op, zv_pool_name (zv->zv_pool));
  return -EIO;
}

/* Syncs a writer may wait for, when space is only pending, before it
 * gives up with ENOSPC (frees of txg T come back at T+2). */
static unsigned zv_zvol_enospc_retries = 8;

/* One change to the volume in the txg fn is called with; a change that
 * learns only as it makes it what it dirtied adds that to *dirtied. */
typedef int (*zvol_apply_fn) (zvol_t *zv, const void *arg, uint64_t txg,
                              uint64_t *dirtied);

/*
 * Apply a change of [off, off+len) under a hold on the open txg charged
 * with 'dirty' bytes, and with what fn reports it dirtied, before the
 * hold goes; *txgp gets the txg it went into.  A change that
 * finds no space while space is on its way back (frees deferred to a
 * later txg, or reservations that the next sync turns into exact
 * allocations) waits for a txg to sync and tries again, a bounded number
 * of times: like OpenZFS's ERESTART from the space reservation, a nearly
 * full pool slows writers down to smaller txgs instead of failing them.
 * A change that found no space changed nothing (dmu.c reserves its
 * whole range first), so a retry costs no space of its own.  The one
 * message of a full pool is logged here (each wait at debug level).
 */
static int
zvol_apply (zvol_t *zv, const char *op, uint64_t off, uint64_t len,
            uint64_t dirty, zvol_apply_fn fn, const void *arg,
            uint64_t *txgp)
{
  for (unsigned tries = 0;; tries++) {
    zv_txg_hold_t h;
    uint64_t dirtied = 0;
    int r = zv_txg_hold (zv->zv_txg, dirty, &h);

    if (r < 0)
      return r;
    r = fn (zv, arg, h.th_txg, &dirtied);
    zv_txg_charge (zv->zv_txg, &h, dirtied);
    zv_txg_rele (zv->zv_txg, &h);
    *txgp = h.th_txg;
    if (r != -ENOSPC)
      return r;
    if (tries >= zv_zvol_enospc_retries
        || !zv_pool_space_pending (zv->zv_pool)) {
      zv_error ("%s at %" PRIu64 "+%" PRIu64 ": pool '%s' is full", op, off,
                len, zv_pool_name (zv->zv_pool));
      return r;
    }
    zv_debug ("%s at %" PRIu64 "+%" PRIu64 ": pool '%s' has no room now, "
              "waiting for a txg to sync (%u)", op, off, len,
              zv_pool_name (zv->zv_pool), tries + 1);
    if (zv_txg_wait_synced (zv->zv_txg, zv_txg_open_txg (zv->zv_txg)) < 0) {
      zv_error ("%s at %" PRIu64 "+%" PRIu64 ": pool '%s' is full", op, off,
                len, zv_pool_name (zv->zv_pool));
      return r;
    }
  }
}

/* The arguments of a data change (zvol_apply_write). */
typedef struct zvol_piece {
  uint64_t zp_off, zp_len;
  const void *zp_data;
} zvol_piece_t;

/* Charged with what it dirtied, not an estimate: a 4 KiB write into a
 * block already dirty in the txg adds no dirty data, and charging it the
 * whole block again made random small writes close their txgs early and
 * meet the throttle with far less dirty data held than counted. */
static int
zvol_apply_write (zvol_t *zv, const void *arg, uint64_t txg,
                  uint64_t *dirtied)
{
  const zvol_piece_t *pc = arg;

  return zv_dmu_write_by_dnode (zv->zv_obj, pc->zp_off, pc->zp_len,
                                pc->zp_data, txg, dirtied);
}

static int
zvol_apply_zero_alloc (zvol_t *zv, const void *arg, uint64_t txg,
                       uint64_t *dirtied)
{
  const zvol_piece_t *pc = arg;

  (void) dirtied;               /* charged every block at the hold */
  return zv_dmu_zero_by_dnode (zv->zv_obj, pc->zp_off, pc->zp_len, txg);
}

static int
zvol_apply_free (zvol_t *zv, const void *arg, uint64_t txg,
                 uint64_t *dirtied)
{
  const zvol_piece_t *pc = arg;

  (void) dirtied;               /* charged its block pointers at the hold */
  return zv_dmu_free_by_dnode (zv->zv_obj, pc->zp_off, pc->zp_len, txg);
}

/* Bytes of dirty data a piece will create. */
static uint64_t
zvol_dirty_estimate (zvol_t *zv, uint64_t off, uint64_t len)
{
  uint64_t first = off / zv->zv_blksz;
  uint64_t last = (off + len - 1) / zv->zv_blksz;

  return (last - first + 1) * zv->zv_blksz;
}

int
zvol_read (zvol_t *zv, void *buf, uint64_t off, uint32_t len)
{
  int r = zvol_check (zv, off, len, false, "read");

  if (r < 0 || len == 0)
    return r;
  return zv_dmu_read_by_dnode (zv->zv_obj, off, len, buf);
}

/* Make the records up to 'ticket' durable (0: everything logged). */
static int
zvol_commit (zvol_t *zv, uint64_t ticket)
{
  int r;

  if (zv->zv_zil == NULL)
    return 0;                   /* read-only */
  r = zv_zil_commit (zv->zv_zil, ticket);
  if (r < 0)
    zv_error ("pool '%s': commit failed: %s", zv_pool_name (zv->zv_pool),
              strerror (-r));
  return r;
}

/* Is a change durable before it returns: the request asked (FUA) or the
 * volume always does (sync=always)? */
static bool
zvol_commits (zvol_t *zv, unsigned flags)
{
  return (flags & ZVOL_FUA) || zv->zv_sync == ZVOL_SYNC_ALWAYS;
}

/* Commit a change that ended with 'ticket' when zvol_commits says so. */
static int
zvol_commit_if_sync (zvol_t *zv, unsigned flags, uint64_t ticket)
{
  return zvol_commits (zv, flags) ? zvol_commit (zv, ticket) : 0;
}

int
zvol_write (zvol_t *zv, const void *buf, uint64_t off, uint32_t len,
            unsigned flags)
{
  const uint8_t *in = buf;
  uint64_t ticket = 0, max_txg = 0;
  int r = zvol_check (zv, off, len, true, "write");
  bool commit = zvol_commits (zv, flags);

  if (r < 0)
    return r;
  while (len > 0) {
    uint32_t n = (uint32_t) ZV_MIN ((uint64_t) len, zv_zvol_chunk);
    zvol_piece_t pc = { .zp_off = off, .zp_len = n, .zp_data = in };
    uint64_t txg;
    zvol_range_t zr;

    zvol_range_enter (zv, off, n, &zr);
    r = zvol_apply (zv, "write", off, n, 0, zvol_apply_write, &pc, &txg);
    /* Applied: log it, in the same order (range lock still held; after
     * the txg hold, since the log may wait for room). */
    if (r == 0 && zv->zv_zil)
      ticket = zv_zil_log_write (zv->zv_zil, txg, off, n, in, commit);
    zvol_range_exit (zv, &zr);
    if (r < 0)
      return r;
    max_txg = ZV_MAX (max_txg, txg);
    in += n;
    off += n;
    len -= n;
  }
  if ((r = zvol_check_durable (zv, max_txg, "write")) < 0)
    return r;
  if (!commit && zv->zv_zil)
    zv_zil_write_ahead (zv->zv_zil, ticket);
  return zvol_commit_if_sync (zv, flags, ticket);
}

int
zvol_flush (zvol_t *zv)
{
  if (zv->zv_readonly)
    return 0;
  return zvol_commit (zv, 0);
}

/* Log a trim or zero that ended in txg; returns its ticket. */
static uint64_t
zvol_log_free (zvol_t *zv, uint64_t txg, enum zv_lr_type type, uint64_t off,
               uint64_t len, uint64_t lr_flags)
{
  if (zv->zv_zil == NULL || txg == 0)
    return 0;
  return zv_zil_log_free (zv->zv_zil, txg, type, off, len, lr_flags);
}

/* Free whole blocks [b, e), a chunk per txg hold. */
static int
zvol_free_blocks (zvol_t *zv, uint64_t b, uint64_t e, uint64_t *last_txg)
{
  while (b < e) {
    zvol_piece_t pc = {
      .zp_off = b, .zp_len = ZV_MIN (e - b, zv_zvol_free_chunk),
    };
    int r = zvol_apply (zv, "free", b * zv->zv_blksz,
                        pc.zp_len * zv->zv_blksz,
                        pc.zp_len * sizeof (zv_blkptr_t), zvol_apply_free,
                        &pc, last_txg);

    if (r < 0)
      return r;
    b += pc.zp_len;
  }
  return 0;
}

/* Whole blocks inside [off, off+len): [*b, *e). */
static void
zvol_inner_blocks (zvol_t *zv, uint64_t off, uint64_t len, uint64_t *b,
                   uint64_t *e)
{
  uint64_t end = off + len;

  *b = (off + zv->zv_blksz - 1) / zv->zv_blksz;
  /* The last block may be short (volsize not a multiple): it counts as
   * whole when the range reaches the end of the volume. */
  *e = end == zv->zv_volsize ? (end + zv->zv_blksz - 1) / zv->zv_blksz
    : end / zv->zv_blksz;
  if (*e < *b)
    *e = *b;
}

/* Trim [off, end), within one region: its whole blocks become holes;
 * partial edges are left alone (a trim is advisory). */
static int
zvol_trim_region (zvol_t *zv, uint64_t off, uint64_t end, uint64_t *last_txg)
{
  uint64_t b, e;

  zvol_inner_blocks (zv, off, end - off, &b, &e);
  return zvol_free_blocks (zv, b, e, last_txg);
}

/*
 * Trim and zero: region by region (at most 1 MiB, under its range lock),
 * change the region with fn, then log it as a 'type' record (lr_flags)
 * before the lock goes, so the log's order is the order of application;
 * commit the last record when the request asks.  A region fn changed
 * nothing in (last txg 0) logs nothing.
 */
typedef int (*zvol_region_fn) (zvol_t *zv, uint64_t off, uint64_t end,
                               uint64_t *last_txg);

static int
zvol_by_region (zvol_t *zv, uint64_t off, uint64_t len, unsigned flags,
                zvol_region_fn fn, enum zv_lr_type type, uint64_t lr_flags)
{
  uint64_t end = off + len, ticket = 0, max_txg = 0;
  int r = 0;

  for (uint64_t pos = off; pos < end && r == 0;) {
    uint64_t next = zvol_region_end (pos, end), last_txg = 0;
    zvol_range_t zr;

    zvol_range_enter (zv, pos, next - pos, &zr);
    r = fn (zv, pos, next, &last_txg);
    if (r == 0) {
      uint64_t t = zvol_log_free (zv, last_txg, type, pos, next - pos,
                                  lr_flags);
      ticket = ZV_MAX (ticket, t);
      max_txg = ZV_MAX (max_txg, last_txg);
    }
    zvol_range_exit (zv, &zr);
    pos = next;
  }
  if (r == 0)
    r = zvol_check_durable (zv, max_txg,
                            type == ZV_LR_TRIM ? "trim" : "zero");
  if (r == 0)
    r = zvol_commit_if_sync (zv, flags, ticket);
  return r;
}

int
zvol_trim (zvol_t *zv, uint64_t off, uint64_t len, unsigned flags)
{
  int r = zvol_check (zv, off, len, true, "trim");

  if (r < 0 || len == 0)
    return r;
  return zvol_by_region (zv, off, len, flags, zvol_trim_region, ZV_LR_TRIM,
                         0);
}

/* Write zeros into [off, off+len) (a partial block). */
static int
zvol_zero_partial (zvol_t *zv, uint64_t off, uint64_t len, uint64_t *last)
{
  static const uint8_t zeros[ZVOL_MAX_VOLBLOCKSIZE];
  zvol_piece_t pc = { .zp_off = off, .zp_len = len, .zp_data = zeros };

  if (len == 0)
    return 0;
  ZV_VERIFY3U (len, <=, sizeof zeros);
  return zvol_apply (zv, "zero", off, len, 0, zvol_apply_write, &pc, last);
}

/*
 * Zero [off, end), within one region, keeping its blocks allocated (no
 * MAY_TRIM): one txg hold for the region, charged with every block the
 * sync will write, so a huge zero is throttled like a write of its size
 * although its records hold no data.
 */
static int
zvol_zero_alloc (zvol_t *zv, uint64_t off, uint64_t end, uint64_t *last_txg)
{
  /* The short last block is zeroed whole (its bytes past the end of the
   * volume are never seen), so it needs no read of its old content. */
  uint64_t dend = end == zv->zv_volsize ? ZV_P2ROUNDUP (end, zv->zv_blksz)
    : end;
  zvol_piece_t pc = { .zp_off = off, .zp_len = dend - off };

  return zvol_apply (zv, "zero", off, end - off,
                     zvol_dirty_estimate (zv, off, end - off),
                     zvol_apply_zero_alloc, &pc, last_txg);
}

/* Zero [off, end), within one region, with MAY_TRIM: free whole blocks,
 * write zeros into partial ones. */
static int
zvol_zero_region (zvol_t *zv, uint64_t off, uint64_t end, uint64_t *last_txg)
{
  uint64_t b, e, bs = zv->zv_blksz;
  int r;

  zvol_inner_blocks (zv, off, end - off, &b, &e);
  if (b >= e) {
    /* Inside one block, or straddling two without a whole one. */
    uint64_t mid = ZV_MIN (end, ZV_P2ROUNDUP (off + 1, bs));
    r = zvol_zero_partial (zv, off, mid - off, last_txg);
    if (r == 0 && mid < end)
      r = zvol_zero_partial (zv, mid, end - mid, last_txg);
    return r;
  }
  r = zvol_zero_partial (zv, off, b * bs - off, last_txg);
  if (r == 0)
    r = zvol_free_blocks (zv, b, e, last_txg);
  if (r == 0 && e * bs < end)
    r = zvol_zero_partial (zv, e * bs, end - e * bs, last_txg);
  return r;
}

int
zvol_zero (zvol_t *zv, uint64_t off, uint64_t len, unsigned flags)
{
  bool may_trim = (flags & ZVOL_MAY_TRIM) != 0;
  int r = zvol_check (zv, off, len, true, "zero");

  if (r < 0 || len == 0)
    return r;
  /*
   * ZVOL_FAST (NBD's FAST_ZERO) asks for a failure, at once and with
   * nothing changed, unless the zero is faster than writing zeros.  With
   * MAY_TRIM it is: whole blocks are only freed (metadata, whatever the
   * length) and the partial edges cost two block writes at most.  Without
   * MAY_TRIM every block of the range is written by the txg sync and
   * takes space, as a write of zeros would (a write of zeros even costs
   * less here: it becomes holes); saving the copy and the log payload
   * does not make it fast in the sense the client asks about.  Refused.
   */
  if ((flags & ZVOL_FAST) && !may_trim) {
    zv_debug ("zero at %" PRIu64 "+%" PRIu64 ": a fast zero that must keep "
              "its blocks allocated is refused", off, len);
    return -ENOTSUP;
  }
  /* Replay must repeat what was done: holes, or allocated zeros. */
  if (may_trim)
    return zvol_by_region (zv, off, len, flags, zvol_zero_region,
                           ZV_LR_ZERO, 0);
  return zvol_by_region (zv, off, len, flags, zvol_zero_alloc, ZV_LR_ZERO,
                         ZV_LR_F_ZERO_ALLOC);
}

int
zvol_extents (zvol_t *zv, uint64_t off, uint64_t len, zvol_extent_fn fn,
              void *arg)
{
  uint64_t end, bs = zv->zv_blksz;
  uint64_t run_start = off;
  unsigned run_type = 0;
  bool have_run = false;
  int r = zvol_check (zv, off, len, false, "extents");

  if (r < 0 || len == 0)
    return r;
  end = off + len;
  for (uint64_t pos = off; pos < end;) {
    uint64_t blkid = pos / bs;
    uint64_t next = ZV_MIN (end, (blkid + 1) * bs);
    bool hole;
    unsigned type;

    r = zv_dmu_block_is_hole (zv->zv_obj, blkid, &hole);
    if (r < 0)
      return r;
    type = hole ? ZVOL_EXTENT_HOLE : 0;
    if (have_run && type != run_type) {
      r = fn (arg, run_start, pos - run_start, run_type);
      if (r != 0)
        return r > 0 ? 0 : r;
      run_start = pos;
    }
    run_type = type;
    have_run = true;
    pos = next;
  }
  if (have_run) {
    r = fn (arg, run_start, end - run_start, run_type);
    if (r > 0)
      r = 0;
  }
  return r;
}

/* ---- the intent log's view of the volume ---- */

/* Commit-time fetch of a write's data. */
static int
zvol_log_read (void *arg, uint64_t off, uint32_t len, void *buf)
{
  zvol_t *zv = arg;
  return zv_dmu_read_by_dnode (zv->zv_obj, off, len, buf);
}

/* In-place write of a dirty block for an indirect record. */
static int
zvol_log_write_block (void *arg, uint64_t txg, uint64_t blkid,
                      zv_blkptr_t *bp)
{
  zvol_t *zv = arg;
  int r = zv_dmu_sync_block (zv->zv_obj, txg, blkid, bp);

  /* No dirty record of txg to write (-ENOENT), or txg is syncing now
   * (-EAGAIN): the record is moot only once txg is on disk, and the sync
   * retires dirty records before it writes the uberblock, so wait. */
  if ((r == -EAGAIN || r == -ENOENT)
      && zv_txg_last_synced (zv->zv_txg) < txg) {
    r = zv_txg_wait_synced (zv->zv_txg, txg);
    return r < 0 ? r : -ENOENT;
  }
  return r == -EAGAIN ? -ENOENT : r;
}

/* Replay one record through the normal write paths. */
static int
zvol_log_replay (void *arg, const zv_lr_t *lr, const void *data)
{
  zvol_t *zv = arg;
  int r;

  if (lr->lr_offset > zv->zv_volsize
      || lr->lr_length > zv->zv_volsize - lr->lr_offset) {
    zv_error ("intent log: record %" PRIu64 " is past the end of the volume",
              lr->lr_seq);
    return -EIO;
  }
  switch ((enum zv_lr_type) lr->lr_type) {
  case ZV_LR_WRITE:
    return zvol_write (zv, data, lr->lr_offset, (uint32_t) lr->lr_length, 0);
  case ZV_LR_WRITE_IND: {
    zv_blkptr_t bp;
    void *buf;
    memcpy (&bp, data, sizeof bp);
    /* Hostile data until checked whole: zv_zio_read takes only a
     * pointer that is not a hole and lies inside the pool.  The claim
     * checked ownership already. */
    r = zv_zil_ind_check (zv_pool_spa (zv->zv_pool), lr, &bp, zv->zv_blksz);
    if (r < 0)
      return r;
    buf = zv_buf_get (zv->zv_blksz);
    r = zv_zio_read (zv_pool_spa (zv->zv_pool), &bp, buf,
                     "intent log block");
    if (r == 0)
      r = zvol_write (zv, buf, lr->lr_offset, zv->zv_blksz, 0);
    else {
      /* The block is written before its log block and both are flushed
       * together: a block that does not verify means its log block was
       * never flushed, so neither this record nor any later one was
       * acknowledged.  The log ends here. */
      zv_info ("intent log: in-place block of record %" PRIu64 " is not on "
               "disk; the log ends before it", lr->lr_seq);
      r = -ENODATA;
    }
    zv_buf_put (buf, zv->zv_blksz);
    return r;
  }
  case ZV_LR_TRIM:
    return zvol_trim (zv, lr->lr_offset, lr->lr_length, 0);
  case ZV_LR_ZERO:
    /* Without the flag (every ZERO record from before it existed too)
     * the zero made holes. */
    return zvol_zero (zv, lr->lr_offset, lr->lr_length,
                      lr->lr_flags & ZV_LR_F_ZERO_ALLOC ? 0 : ZVOL_MAY_TRIM);
  case ZV_LR_NOP:
    break;
  }
  /* The log skips padding and refuses types it does not know before it
   * calls here. */
  ZV_VERIFY (!"a log record of no known type reached replay");
  return -EIO;
}

/* ---- the pool, as the API shows it (pool.c does the work) ---- */

int
zvol_pool_replace (zvol_pool_t *p, const char *old_side,
                   const char *new_side)
{
  char err[1024];
  int r;

  if (old_side == NULL || new_side == NULL || old_side[0] != '/'
      || new_side[0] != '/') {
    zv_error ("replace: give both sides as absolute paths");
    return -EINVAL;
  }
  r = zv_resilver_replace (p, old_side, new_side, err, sizeof err);
  if (r < 0)
    zv_error ("replace %s by %s: %s", old_side, new_side, err);
  return r;
}

int
zvol_device_mirror_sides (const char *name, char **sides, char *err,
                          size_t errlen)
{
  unsigned n;
  int r;

  if (!zv_dev_path_is_mirror (name))
    return 0;
  r = zv_dev_mirror_parse (name, sides, &n, err, errlen);
  return r < 0 ? r : (int) n;
}

void
zvol_pool_config_init (zvol_pool_config_t *pc)
{
  zv_pool_config_t c;

  zv_pool_config_init (&c);
  memcpy (pc, &c, sizeof *pc);
}

int
zvol_pool_open (const zvol_pool_config_t *pc, zvol_pool_t **poolp)
{
  zv_pool_config_t c;

  memcpy (&c, pc, sizeof c);
  return zv_pool_open (&c, poolp);
}

int
zvol_pool_start (zvol_pool_t *pool)
{
  return zv_pool_start (pool);
}

int
zvol_pool_close (zvol_pool_t *pool)
{
  return zv_pool_close (pool);
}

uint64_t
zvol_pool_create_size (uint64_t volsize, bool room)
{
  const uint64_t round = 1ull << 20;
  uint64_t add = volsize / 4 + (128ull << 20);

  if (room) {
    zv_txg_tunables_t tt;

    zv_txg_tunables_default (&tt);
    add += 2 * tt.tt_dirty_max;
  }
  /* A size no file can have stays one (the caller's truncate says so),
   * rather than wrapping to a small one. */
  if (volsize > UINT64_MAX - round - add)
    return UINT64_MAX / round * round;
  return (volsize + add + round - 1) / round * round;
}

int
zvol_device_preallocate (const char *path, uint64_t size,
                         void (*progress) (void *arg, const char *what,
                                           uint64_t done, uint64_t total),
                         void *arg)
{
  return zv_dev_file_fill (path, size, progress, arg);
}

const char *
zvol_pool_name (zvol_pool_t *pool)
{
  return zv_pool_name (pool);
}

uint64_t
zvol_pool_guid (zvol_pool_t *pool)
{
  return zv_pool_guid (pool);
}

bool
zvol_pool_is_readonly (zvol_pool_t *pool)
{
  return zv_pool_is_readonly (pool);
}

void
zvol_pool_get_stats (zvol_pool_t *p, zvol_pool_stats_t *ps)
{
  zv_spa_t *spa = zv_pool_spa (p);
  zv_txg_t *tx = zv_pool_txg (p);
  zv_alloc_space_t sp;
  zv_dbuf_stats_t cs;
  zv_dev_stats_t ds;

  memset (ps, 0, sizeof *ps);
  zv_alloc_get_space (spa->spa_alloc, &sp);
  zv_dbuf_get_stats (zv_pool_cache (p), &cs);
  ps->ps_name = zv_pool_name (p);
  ps->ps_guid = spa->spa_guid;
  ps->ps_ndevs = spa->spa_ndevs;
  for (unsigned d = 0; d < spa->spa_ndevs; d++) {
    ps->ps_dev_path[d] = zv_dev_path (spa->spa_devs[d]);
    ps->ps_dev_direct[d] = zv_dev_is_direct (spa->spa_devs[d]);
    zv_dev_get_stats (spa->spa_devs[d], &ds);
    ps->ps_dev_read_errors[d] = ds.ds_read_errors;
    ps->ps_dev_write_errors[d] = ds.ds_write_errors;
    ps->ps_dev_cksum_errors[d] = ds.ds_cksum_errors;
    if (!zv_dev_is_mirror (spa->spa_devs[d]))
      continue;
    ps->ps_dev_nsides[d] = ZV_MIN (zv_dev_nsides (spa->spa_devs[d]),
                                   ZVOL_MAX_SIDES);
    for (unsigned i = 0; i < ps->ps_dev_nsides[d]; i++) {
      zvol_side_stats_t *ss = &ps->ps_dev_sides[d][i];
      zv_dev_t *side = zv_dev_side (spa->spa_devs[d], i);

      ss->ss_path = zv_dev_side_path (spa->spa_devs[d], i);
      ss->ss_online = zv_dev_side_ok (spa->spa_devs[d], i);
      ss->ss_resilvering = zv_dev_side_resilvering (spa->spa_devs[d], i);
      zv_dev_side_why (spa->spa_devs[d], i, ss->ss_why, sizeof ss->ss_why);
      if (!ss->ss_online)
        ps->ps_dev_degraded[d] = ps->ps_degraded = true;
      if (side == NULL)
        continue;
      zv_dev_get_stats (side, &ds);
      ss->ss_reads = ds.ds_reads;
      ss->ss_writes = ds.ds_writes;
      ss->ss_read_errors = ds.ds_read_errors;
      ss->ss_write_errors = ds.ds_write_errors;
      ss->ss_cksum_errors = ds.ds_cksum_errors;
    }
  }
  ps->ps_resilver_active = zv_resilver_progress (p, &ps->ps_resilver_dev,
                                                 &ps->ps_resilver_side,
                                                 &ps->ps_resilver_done,
                                                 &ps->ps_resilver_total);
  if (zv_pool_logdev (p) != NULL) {
    ps->ps_logdev_path = zv_dev_path (zv_pool_logdev (p));
    zv_dev_get_stats (zv_pool_logdev (p), &ds);
    ps->ps_logdev_read_errors = ds.ds_read_errors;
    ps->ps_logdev_write_errors = ds.ds_write_errors;
    ps->ps_logdev_cksum_errors = ds.ds_cksum_errors;
  }
  ps->ps_space_total = sp.as_total;
  ps->ps_space_allocated = sp.as_allocated;
  ps->ps_space_deferred = sp.as_deferred;
  ps->ps_space_reserved = sp.as_reserved;
  ps->ps_space_held = sp.as_held;
  ps->ps_txg_synced = zv_txg_last_synced (tx);
  ps->ps_txg_open = zv_txg_open_txg (tx);
  ps->ps_dirty_bytes = zv_txg_dirty_total (tx);
  ps->ps_dirty_max = zv_txg_dirty_limit (tx);
  zv_txg_throttle_stats (tx, &ps->ps_throttle_delays,
                         &ps->ps_throttle_delay_ns, &ps->ps_throttle_stalls);
  zv_pool_last_sync (p, &ps->ps_sync_passes_last,
                     &ps->ps_sync_write_max_active_last);
  ps->ps_cache_bytes = cs.cs_bytes;
  ps->ps_cache_limit = cs.cs_limit;
  ps->ps_cache_target = cs.cs_target;
  ps->ps_cache_buffers = cs.cs_count;
  ps->ps_cache_hits = cs.cs_hits;
  ps->ps_cache_misses = cs.cs_misses;
  ps->ps_cache_evictions = cs.cs_evictions;
  ps->ps_freeing = zv_pool_freeing (p, &ps->ps_freeing_datasets);
  for (unsigned t = 0; t < ZV_BT_MAX; t++) {
    uint64_t b = atomic_load_explicit (&spa->spa_written[t],
                                       memory_order_relaxed);
    uint64_t *kind = NULL;

    switch ((enum zv_blk_type) t) {
    case ZV_BT_VOLDATA: ps->ps_written_data = b; continue;
    case ZV_BT_NONE: kind = &ps->ps_written_uberblock; break;
    case ZV_BT_INDIRECT: kind = &ps->ps_written_indirect; break;
    case ZV_BT_OBJSET: kind = &ps->ps_written_objset; break;
    case ZV_BT_SPACEMAP: kind = &ps->ps_written_spacemap; break;
    case ZV_BT_DEFER: kind = &ps->ps_written_defer; break;
    case ZV_BT_DSDIR: kind = &ps->ps_written_dsdir; break;
    case ZV_BT_DEADLIST: kind = &ps->ps_written_deadlist; break;
    case ZV_BT_MAX: break;
    }
    ZV_VERIFY (kind != NULL);
    *kind = b;
    ps->ps_written_meta += b;
  }
}

int
zvol_pool_wait_freeing (zvol_pool_t *p, const int cancel_fd[2],
                        void (*progress) (void *arg, uint64_t left,
                                          uint64_t total), void *arg)
{
  return zv_pool_wait_freeing (p, cancel_fd, progress, arg);
}

size_t
zvol_pool_get_txgs (zvol_pool_t *p, zvol_txg_stats_t *out, size_t max)
{
  zv_txg_stat_t ts[ZV_TXG_HISTORY];
  size_t n = zv_txg_history_get (zv_pool_txg (p), ts,
                                 ZV_MIN (max, (size_t) ZV_TXG_HISTORY));

  for (size_t i = 0; i < n; i++)
    out[i] = (zvol_txg_stats_t) {
      .ts_txg = ts[i].ts_txg, .ts_birth_ns = ts[i].ts_birth_ns,
      .ts_state = ts[i].ts_state, .ts_ndirty = ts[i].ts_ndirty,
      .ts_nread = ts[i].ts_nread, .ts_nwritten = ts[i].ts_nwritten,
      .ts_reads = ts[i].ts_reads, .ts_writes = ts[i].ts_writes,
      .ts_otime_ns = ts[i].ts_otime_ns, .ts_qtime_ns = ts[i].ts_qtime_ns,
      .ts_wtime_ns = ts[i].ts_wtime_ns, .ts_stime_ns = ts[i].ts_stime_ns,
    };
  return n;
}

/* ---- open and close ---- */

/* The application's log hook, behind the engine's (same levels: the
 * static_assert above). */
static zvol_log_fn zvol_log_hook;

static void
zvol_log_trampoline (enum zv_log_level level, const char *msg)
{
  zvol_log_hook ((zvol_log_level_t) level, msg);
}

void
zvol_set_log (zvol_log_fn fn)
{
  zvol_log_hook = fn;
  zv_set_log (fn ? zvol_log_trampoline : NULL);
}

void
zvol_set_log_level (zvol_log_level_t level)
{
  zv_set_log_level ((enum zv_log_level) level);
}

/* The volume's properties default to the log's tunables (sync, logbias,
 * flush). */
/* The volume listing is the pool's, field for field. */
#define ZVOL_VI_SAME(pf, ef) \
  static_assert (offsetof (zvol_volume_info_t, pf) \
                 == offsetof (zv_dsdir_info_t, ef) \
                 && sizeof (((zvol_volume_info_t *) 0)->pf) \
                 == sizeof (((zv_dsdir_info_t *) 0)->ef), #pf)
ZVOL_VI_SAME (vi_name, di_name);
ZVOL_VI_SAME (vi_id, di_id);
ZVOL_VI_SAME (vi_volsize, di_volsize);
ZVOL_VI_SAME (vi_blocksize, di_blksz);
ZVOL_VI_SAME (vi_open, di_open);
ZVOL_VI_SAME (vi_reservation, di_reservation);
ZVOL_VI_SAME (vi_referenced, di_referenced);
ZVOL_VI_SAME (vi_used, di_used);
ZVOL_VI_SAME (vi_avail, di_avail);
ZVOL_VI_SAME (vi_creation_txg, di_creation_txg);
ZVOL_VI_SAME (vi_creation_time, di_creation_time);
ZVOL_VI_SAME (vi_kind, di_kind);
ZVOL_VI_SAME (vi_written, di_written);
ZVOL_VI_SAME (vi_usedbysnapshots, di_usedbysnapshots);
ZVOL_VI_SAME (vi_origin, di_origin);
ZVOL_VI_SAME (vi_compression, di_compress);
ZVOL_VI_SAME (vi_logicalused, di_lwritten);
static_assert (ZVOL_KIND_VOLUME == ZV_DS_KIND_VOLUME
               && ZVOL_KIND_SNAPSHOT == ZV_DS_KIND_SNAPSHOT, "kinds");
static_assert (sizeof (zvol_volume_info_t) == sizeof (zv_dsdir_info_t),
               "volume info");

int
zvol_pool_error (zvol_pool_t *pool)
{
  return zv_txg_error (zv_pool_txg (pool));
}

int
zvol_volume_create (zvol_pool_t *pool, const char *name,
                    const zvol_volume_params_t *vp)
{
  uint32_t comp = ZV_COMP_DEFAULT;

  if (vp == NULL) {
    zv_error ("zvol_volume_create: no parameters");
    return -EINVAL;
  }
  if (vp->vp_compression
      && zv_comp_prop_parse (vp->vp_compression, &comp) < 0) {
    char shown[64];
    zv_str_printable (vp->vp_compression, 32, shown, sizeof shown);
    zv_error ("compression '%s' is invalid: off, lz4, zstd or zstd-N "
              "(N from 1 to %u)", shown, ZV_COMP_ZSTD_MAX_LEVEL);
    return -EINVAL;
  }
  return zv_pool_volume_create (pool, name, vp->vp_size, vp->vp_blocksize
                            ? vp->vp_blocksize : ZVOL_DEFAULT_VOLBLOCKSIZE,
                            vp->vp_reservation, comp);
}

void
zvol_compression_name (uint32_t compression, char *buf, size_t len)
{
  zv_comp_prop_name (compression, buf, len);
}

int
zvol_volume_set_compression (zvol_pool_t *pool, const char *name,
                             const char *value)
{
  uint32_t comp;

  if (value == NULL || zv_comp_prop_parse (value, &comp) < 0) {
    char shown[64];
    zv_str_printable (value ? value : "", 32, shown, sizeof shown);
    zv_error ("compression '%s' is invalid: off, lz4, zstd or zstd-N "
              "(N from 1 to %u)", shown, ZV_COMP_ZSTD_MAX_LEVEL);
    return -EINVAL;
  }
  return zv_dsdir_set_compress (pool, name, comp);
}

int
zvol_volume_destroy (zvol_pool_t *pool, const char *name)
{
  return zv_dsdir_destroy (pool, name);
}

static_assert (sizeof (zvol_dsname_t) == 2 * ZV_NAME_MAX
               && ZVOL_DESTROY_SNAPSHOTS == ZV_SNAP_DESTROY_SNAPSHOTS
               && ZVOL_DESTROY_CLONES == ZV_SNAP_DESTROY_CLONES,
               "destroy plans are the engine's");

int
zvol_destroy_plan (zvol_pool_t *pool, const char *name, unsigned flags,
                   zvol_dsname_t *out, size_t max, size_t *countp)
{
  return zv_snap_destroy_plan (pool, name, flags,
                               (char (*)[2 * ZV_NAME_MAX]) out,
                               out ? max : 0, countp);
}

size_t
zvol_volume_list (zvol_pool_t *pool, zvol_volume_info_t *out, size_t max)
{
  return zv_dsdir_list (pool, ZVOL_LIST_VOLUMES, (zv_dsdir_info_t *) out,
                        max);
}

size_t
zvol_dataset_list (zvol_pool_t *pool, unsigned kinds,
                   zvol_volume_info_t *out, size_t max)
{
  return zv_dsdir_list (pool, kinds, (zv_dsdir_info_t *) out, max);
}

int
zvol_snapshot_create (zvol_pool_t *pool, const char *name)
{
  return zv_snap_create (pool, name);
}

int
zvol_snapshot_rollback (zvol_pool_t *pool, const char *name,
                        bool destroy_newer)
{
  return zv_snap_rollback (pool, name, destroy_newer);
}

int
zvol_volume_clone (zvol_pool_t *pool, const char *snapshot,
                   const char *clone, const zvol_volume_params_t *vp)
{
  return zv_pool_volume_clone (pool, snapshot, clone,
                               vp ? vp->vp_reservation : 0);
}

static_assert (sizeof (zvol_stream_io_t) == sizeof (zv_stream_io_t)
               && offsetof (zvol_stream_io_t, sio_read)
                  == offsetof (zv_stream_io_t, sio_read)
               && offsetof (zvol_stream_io_t, sio_progress_arg)
                  == offsetof (zv_stream_io_t, sio_progress_arg),
               "stream I/O is the engine's, field for field");
static_assert (ZVOL_DIFF_WRITTEN == ZV_DIFF_WRITTEN
               && ZVOL_DIFF_FREED == ZV_DIFF_FREED, "diff kinds");

int
zvol_send (zvol_pool_t *pool, const char *snapshot, const char *from,
           const zvol_stream_io_t *io)
{
  return zv_send (pool, snapshot, from, (const zv_stream_io_t *) io);
}

int
zvol_receive (zvol_pool_t *pool, const char *target,
              const zvol_stream_io_t *io)
{
  return zv_recv (pool, target, (const zv_stream_io_t *) io);
}

int
zvol_diff (zvol_pool_t *pool, const char *from, const char *to,
           zvol_diff_fn fn, void *arg)
{
  return zv_diff (pool, from, to, fn, arg);
}

uint64_t
zvol_pool_avail (zvol_pool_t *pool)
{
  return zv_dsdir_avail (pool);
}

void
zvol_config_init (zvol_config_t *vc)
{
  zv_zil_tunables_t zt;

  zv_zil_tunables_default (&zt);
  memset (vc, 0, sizeof *vc);
  vc->vc_sync = (unsigned) zt.zt_sync;
  vc->vc_logbias = (unsigned) zt.zt_logbias;
  vc->vc_flush_by_txg = zt.zt_legacy_txg_commit;
}

int
zvol_tunable_set (const char *name, const char *value, char *err,
                  size_t errlen)
{
  return zv_tunable_set (name, value, err, errlen);
}

bool
zvol_tunable_exists (const char *name)
{
  return zv_tunable_lookup (name) != NULL;
}

bool
zvol_tunable_create_only (const char *name)
{
  const zv_tunable_t *tn = zv_tunable_lookup (name);

  return tn != NULL && tn->tn_when == ZV_TUNABLE_AT_CREATE;
}

char *
zvol_tunable_help (void)
{
  char *buf = NULL;
  size_t len = 0;
  FILE *fp = open_memstream (&buf, &len);

  if (fp == NULL)
    zv_nomem (BUFSIZ);
  zv_tunable_print_help (fp);
  if (fclose (fp) != 0)
    zv_nomem (len);
  return buf;
}

/* Open the volume's intent log, attach it, replay what it holds. */
static int
zvol_log_open (zvol_t *zv, const zvol_config_t *vc)
{
  zv_zil_tunables_t zt;
  zv_zil_ops_t ops = {
    .zo_read = zvol_log_read,
    .zo_write_block = zvol_log_write_block,
    .zo_replay = zvol_log_replay,
    .zo_blksz = zv->zv_blksz,
    .zo_volsize = zv->zv_volsize,
  };
  int r;

  zv_zil_tunables_default (&zt);
  zt.zt_sync = (enum zv_sync_mode) vc->vc_sync;
  zt.zt_logbias = (enum zv_logbias) vc->vc_logbias;
  zt.zt_legacy_txg_commit = vc->vc_flush_by_txg;
  zv->zv_zil = zv_zil_open (zv_pool_spa (zv->zv_pool),
                            zv_pool_logdev (zv->zv_pool), zv->zv_txg,
                            zv_dsdir_zil_header (zv->zv_ds), &ops, zv,
                            &zt);
  zv_dsdir_attach_zil (zv->zv_ds, zv->zv_zil);
  r = zv_zil_replay (zv->zv_zil, zv_pool_open_txg (zv->zv_pool),
                     zv_pool_zil_recover (zv->zv_pool));
  if (r < 0) {
    zv_error ("volume '%s': intent log replay failed: %s",
              zv_dsdir_name (zv->zv_ds), strerror (-r));
    return r;
  }
  return 0;
}

/* Detach and close the log (it has nothing unsynced, or never will). */
static void
zvol_log_close (zvol_t *zv)
{
  if (zv->zv_zil == NULL)
    return;
  zv_dsdir_attach_zil (zv->zv_ds, NULL);
  zv_zil_close (zv->zv_zil);
  zv->zv_zil = NULL;
}

static void
zvol_free (zvol_t *zv)
{
  zvol_log_close (zv);
  for (unsigned i = 0; i < ZVOL_STRIPES; i++)
    pthread_mutex_destroy (&zv->zv_stripes[i]);
  zv_dsdir_rele (zv->zv_ds);
  free (zv);
}

int
zvol_open (zvol_pool_t *pool, const char *name, const zvol_config_t *vc,
           zvol_t **zvp)
{
  zvol_config_t dflt;
  zv_pool_ds_t *ds;
  zvol_t *zv;
  int r;

  *zvp = NULL;
  if (vc == NULL) {
    zvol_config_init (&dflt);
    vc = &dflt;
  }
  if (vc->vc_sync > ZVOL_SYNC_DISABLED
      || vc->vc_logbias > ZVOL_LOGBIAS_THROUGHPUT) {
    zv_error ("volume: invalid sync mode %u or logbias %u", vc->vc_sync,
              vc->vc_logbias);
    return -EINVAL;
  }
  /* A name may be a client's (an NBD export name: up to 4 KiB of any
   * bytes): it is only ever compared, and shown escaped. */
  if (name != NULL && zv_dsdir_find (pool, name) == NULL) {
    char shown[4 * ZV_NAME_MAX + 4], pname[4 * ZV_NAME_MAX + 4];

    zv_str_printable (name, ZV_NAME_MAX, shown, sizeof shown);
    zv_str_printable (zv_pool_name (pool), ZV_NAME_MAX, pname,
                      sizeof pname);
    zv_error ("pool '%s' has no volume '%s'", pname, shown);
    return -ENOENT;
  }
  r = zv_dsdir_hold (pool, name, &ds);
  if (r < 0)
    return r;
  zv = zv_calloc (1, sizeof *zv);
  zv->zv_pool = pool;
  zv->zv_ds = ds;
  zv->zv_obj = zv_dsdir_object (ds);
  zv->zv_txg = zv_pool_txg (pool);
  zv->zv_sync = vc->vc_sync;
  zv->zv_volsize = zv_dsdir_volsize (ds);
  zv->zv_blksz = zv_dsdir_blksz (ds);
  zv->zv_snapshot = zv_dsdir_is_snapshot (ds);
  zv->zv_readonly = zv_pool_is_readonly (pool) || zv->zv_snapshot;
  zv_dsdir_fullname (ds, zv->zv_name, sizeof zv->zv_name);
  for (unsigned i = 0; i < ZVOL_STRIPES; i++)
    pthread_mutex_init (&zv->zv_stripes[i], NULL);
  if (!zv->zv_readonly) {
    r = zvol_log_open (zv, vc);
    if (r < 0) {
      zvol_free (zv);
      return r;
    }
  }
  *zvp = zv;
  return 0;
}

int
zvol_close (zvol_t *zv)
{
  int r = 0;

  if (zv == NULL)
    return 0;
  /* Everything on disk first: the detached log must hold nothing the
   * txgs do not (its header stays with the pool). */
  if (!zv->zv_readonly)
    r = zv_txg_wait_synced (zv->zv_txg, 0);
  if (r < 0)
    zv_error ("volume '%s': syncing before close failed: %s",
              zv_dsdir_name (zv->zv_ds), strerror (-r));
  zvol_free (zv);
  return r;
}

const char *
zvol_name (zvol_t *zv)
{
  return zv->zv_name;
}

void
zvol_get_stats (zvol_t *zv, zvol_stats_t *vs)
{
  zv_zil_stats_t st;

  memset (vs, 0, sizeof *vs);
  vs->vs_name = zvol_name (zv);
  vs->vs_volsize = zv->zv_volsize;
  vs->vs_volblocksize = zv->zv_blksz;
  vs->vs_readonly = zv->zv_readonly;
  vs->vs_direct_blocks = atomic_load_explicit (&zv->zv_obj->ob_direct,
                                               memory_order_relaxed);
  if (zv->zv_zil == NULL)
    return;
  zv_zil_get_stats (zv->zv_zil, &st);
  vs->vs_log = true;
  vs->vs_sync = (unsigned) st.zst_sync;
  vs->vs_logbias = (unsigned) st.zst_logbias;
  vs->vs_log_device = st.zst_log_device;
  vs->vs_zil_lwbs_written = st.zst_lwbs_written;
  vs->vs_zil_lwb_bytes = st.zst_lwb_bytes;
  vs->vs_zil_ring_size = st.zst_ring_size;
  vs->vs_zil_ring_used = st.zst_ring_used;
  vs->vs_zil_records_copied = st.zst_records_copied;
  vs->vs_zil_records_need_copy = st.zst_records_need_copy;
  vs->vs_zil_records_indirect = st.zst_records_indirect;
  vs->vs_zil_records_free = st.zst_records_free;
  vs->vs_zil_records_dropped = st.zst_records_dropped;
  vs->vs_zil_commits = st.zst_commits;
  vs->vs_zil_commit_fallbacks = st.zst_commit_fallbacks;
  vs->vs_zil_commit_latency_mean_ns = st.zst_commit_latency_mean_ns;
  vs->vs_zil_commit_latency_p99_ns = st.zst_commit_latency_p99_ns;
  vs->vs_zil_lwb_latency_ewma_ns = st.zst_lwb_latency_ewma_ns;
  vs->vs_zil_lwbs_ahead = st.zst_lwbs_ahead;
  vs->vs_zil_commit_sleeps = st.zst_commit_sleeps;
}

/* ---- tunables (tunable.h), read by every request ---- */
const zv_tunable_t zv_zvol_tunable_table[] = {
  { .tn_name = "zvol_chunk", .tn_module = "zvol",
    ZV_TUNABLE_VAR_U64 (zv_zvol_chunk),
    .tn_default = ZVOL_REGION, .tn_min = 4096, .tn_max = ZVOL_REGION,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the volume's writes",
    .tn_desc = "A write is cut into pieces of at most this size, each "
    "under its own txg hold, so that a huge write cannot pin one txg; at "
    "most a range-lock region." },
  { .tn_name = "zvol_free_chunk", .tn_module = "zvol",
    ZV_TUNABLE_VAR_U64 (zv_zvol_free_chunk),
    .tn_default = 1ull << 16, .tn_min = 1, .tn_max = 1ull << 24,
    .tn_unit = ZV_TUNABLE_UNIT_COUNT, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the volume's trims and zeroes",
    .tn_desc = "Blocks freed under one txg hold." },
  { .tn_name = "zvol_enospc_retries", .tn_module = "zvol",
    ZV_TUNABLE_VAR_UINT (zv_zvol_enospc_retries),
    .tn_default = 8, .tn_min = 0, .tn_max = 1000,
    .tn_unit = ZV_TUNABLE_UNIT_COUNT, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "a write that finds the pool full",
    .tn_desc = "Txg syncs a write waits for, while freed space is still "
    "on its way back, before it fails with ENOSPC." },
  ZV_TUNABLE_END
};
