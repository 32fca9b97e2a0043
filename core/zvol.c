/*
 * zvol.c: the volume: NBD-shaped requests onto the by-dnode object calls
 * under txg holds.
 *
 * Theory.  A request never looks anything up: the volume keeps its object
 * handle (zv_obj) for its whole life.  A write is cut into pieces of at
 * most zv_zvol_chunk bytes; each piece takes a hold on the open txg
 * (throttled there when dirty data runs high), dirties its blocks and lets
 * go, so a huge write cannot pin one txg.  A FUA write, a flush, or any
 * write under a pool that must be durable waits for the txg to sync (the
 * intent log will make that cheaper).  Trim, and zero with MAY_TRIM,
 * free whole blocks (holes read as zeros); zero writes zeros into partial
 * edges, trim leaves them as they are (a trim is advisory).  A zero
 * without MAY_TRIM keeps every block of its range allocated.
 *
 * Concurrency: nothing here is shared but the handles; the per-block
 * locks live in the buffer cache.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <inttypes.h>

#include "pool.h"

/*
 * Range locks.  A change is applied to the blocks (in txg order) and then
 * logged (in ticket order); replay follows ticket order, so for any block
 * the two orders must agree: two overlapping writes must not apply in one
 * order and log in the other.  A writer holds the lock of the regions it
 * changes from before it applies the change until its record is
 * published.  The volume is cut into 1 MiB regions, region i locked by
 * stripe i % ZVOL_STRIPES; every operation works on at most 1 MiB at a
 * time (writes in pieces, trim and zero region by region), so it holds
 * one or two stripes, taken in ascending order.  Readers take none: a
 * read sees whole blocks under the buffer's own lock.
 */
#define ZVOL_STRIPES 256u
#define ZVOL_REGION (1ull << 20)

typedef struct zvol_range {
  unsigned zr_s[2];
  unsigned zr_n;
} zvol_range_t;

/* Lock the regions of [off, off + len), len <= ZVOL_REGION. */
static void
zvol_range_enter (zvol_t *zv, uint64_t off, uint64_t len, zvol_range_t *zr)
{
  unsigned a = (off / ZVOL_REGION) % ZVOL_STRIPES;
  unsigned b = ((off + (len ? len : 1) - 1) / ZVOL_REGION) % ZVOL_STRIPES;

  ZV_VERIFY3U (len, <=, ZVOL_REGION);
  zr->zr_n = a == b ? 1 : 2;
  zr->zr_s[0] = ZV_MIN (a, b);
  zr->zr_s[1] = ZV_MAX (a, b);
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
  if (write && zv->zv_readonly) {
    zv_error ("%s: pool '%s' is read-only", op, zv->zv_pool->p_name);
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
                zv->zv_pool->p_name);
      return -EIO;
    }
  }
  return 0;
}

/* Say why a write failed for lack of space. */
static void
zvol_enospc (zvol_t *zv, const char *op, uint64_t off, uint64_t len)
{
  zv_error ("%s at %" PRIu64 "+%" PRIu64 ": pool '%s' is full", op, off,
            len, zv->zv_pool->p_name);
}

/* Syncs a writer may wait for, when space is only pending, before it
 * gives up with ENOSPC (frees of txg T come back at T+2). */
static unsigned zv_zvol_enospc_retries = 8;

/*
 * A write found no space.  If space is on its way back (frees deferred to
 * a later txg, or reservations that the next sync turns into exact
 * allocations), wait for a txg to sync and say "try again", a bounded
 * number of times: like OpenZFS's ERESTART from the space reservation, a
 * nearly full pool slows writers down to smaller txgs instead of failing
 * them.  Called with no txg held.
 */
static bool
zvol_space_pending (zvol_t *zv, unsigned *tries)
{
  zv_alloc_space_t sp;

  if ((*tries)++ >= zv_zvol_enospc_retries)
    return false;
  zv_alloc_get_space (zv->zv_pool->p_spa.spa_alloc, &sp);
  if (sp.as_deferred == 0 && sp.as_reserved == 0)
    return false;
  return zv_txg_wait_synced (zv->zv_txg,
                             zv_txg_open_txg (zv->zv_txg)) == 0;
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
    zv_error ("pool '%s': commit failed: %s", zv->zv_pool->p_name,
              strerror (-r));
  return r;
}

/* A change that ended with 'ticket': durable before returning when the
 * request asked (FUA) or the volume always does (sync=always). */
static int
zvol_commit_if_sync (zvol_t *zv, unsigned flags, uint64_t ticket)
{
  if ((flags & ZVOL_FUA) || zv->zv_sync == ZVOL_SYNC_ALWAYS)
    return zvol_commit (zv, ticket);
  return 0;
}

int
zvol_write (zvol_t *zv, const void *buf, uint64_t off, uint32_t len,
            unsigned flags)
{
  const uint8_t *in = buf;
  uint64_t ticket = 0;
  int r = zvol_check (zv, off, len, true, "write");

  if (r < 0)
    return r;
  while (len > 0) {
    uint32_t n = (uint32_t) ZV_MIN ((uint64_t) len, zv_zvol_chunk);
    unsigned tries = 0;
    zv_txg_hold_t h;
    zvol_range_t zr;

  again:
    zvol_range_enter (zv, off, n, &zr);
    r = zv_txg_hold (zv->zv_txg, zvol_dirty_estimate (zv, off, n), &h);
    if (r < 0) {
      zvol_range_exit (zv, &zr);
      return r;
    }
    r = zv_dmu_write_by_dnode (zv->zv_obj, off, n, in, h.th_txg);
    zv_txg_rele (zv->zv_txg, &h);
    /* Applied: log it, in the same order (range lock still held; after
     * the txg hold, since the log may wait for room). */
    if (r == 0 && zv->zv_zil)
      ticket = zv_zil_log_write (zv->zv_zil, h.th_txg, off, n, in);
    zvol_range_exit (zv, &zr);
    if (r == -ENOSPC && zvol_space_pending (zv, &tries))
      goto again;
    if (r < 0) {
      if (r == -ENOSPC)
        zvol_enospc (zv, "write", off, n);
      return r;
    }
    in += n;
    off += n;
    len -= n;
  }
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
    uint64_t n = ZV_MIN (e - b, zv_zvol_free_chunk);
    zv_txg_hold_t h;
    int r = zv_txg_hold (zv->zv_txg, n * sizeof (zv_blkptr_t), &h);

    if (r < 0)
      return r;
    r = zv_dmu_free_by_dnode (zv->zv_obj, b, n, h.th_txg);
    *last_txg = h.th_txg;
    zv_txg_rele (zv->zv_txg, &h);
    if (r < 0)
      return r;
    b += n;
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

int
zvol_trim (zvol_t *zv, uint64_t off, uint64_t len, unsigned flags)
{
  uint64_t end = off + len, t = 0;
  int r = zvol_check (zv, off, len, true, "trim");

  if (r < 0 || len == 0)
    return r;
  for (uint64_t pos = off; pos < end && r == 0;) {
    uint64_t next = zvol_region_end (pos, end), b, e, last_txg = 0;
    zvol_range_t zr;

    zvol_inner_blocks (zv, pos, next - pos, &b, &e);
    if (b < e) {
      zvol_range_enter (zv, pos, next - pos, &zr);
      r = zvol_free_blocks (zv, b, e, &last_txg);
      if (r == 0) {
        /* (ZV_MAX evaluates its arguments twice: log once, first.) */
        uint64_t lt = zvol_log_free (zv, last_txg, ZV_LR_TRIM, pos,
                                     next - pos, 0);
        t = ZV_MAX (t, lt);
      }
      zvol_range_exit (zv, &zr);
    }
    pos = next;
  }
  if (r == 0)
    r = zvol_commit_if_sync (zv, flags, t);
  return r;
}

/* Write zeros into [off, off+len) (a partial block). */
static int
zvol_zero_partial (zvol_t *zv, uint64_t off, uint64_t len, uint64_t *last)
{
  static const uint8_t zeros[ZVOL_MAX_VOLBLOCKSIZE];
  zv_txg_hold_t h;
  int r;

  if (len == 0)
    return 0;
  ZV_VERIFY3U (len, <=, sizeof zeros);
  unsigned tries = 0;
 again:
  r = zv_txg_hold (zv->zv_txg, zv->zv_blksz, &h);
  if (r < 0)
    return r;
  r = zv_dmu_write_by_dnode (zv->zv_obj, off, len, zeros, h.th_txg);
  *last = h.th_txg;
  zv_txg_rele (zv->zv_txg, &h);
  if (r == -ENOSPC && zvol_space_pending (zv, &tries))
    goto again;
  if (r == -ENOSPC)
    zvol_enospc (zv, "zero", off, len);
  return r;
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
  unsigned tries = 0;
  zv_txg_hold_t h;
  int r;

 again:
  r = zv_txg_hold (zv->zv_txg, zvol_dirty_estimate (zv, off, end - off), &h);
  if (r < 0)
    return r;
  r = zv_dmu_zero_by_dnode (zv->zv_obj, off, dend - off, h.th_txg);
  *last_txg = h.th_txg;
  zv_txg_rele (zv->zv_txg, &h);
  if (r == -ENOSPC && zvol_space_pending (zv, &tries))
    goto again;
  if (r == -ENOSPC)
    zvol_enospc (zv, "zero", off, end - off);
  return r;
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
  uint64_t end = off + len, t = 0;
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
  for (uint64_t pos = off; pos < end && r == 0;) {
    uint64_t next = zvol_region_end (pos, end), last_txg = 0;
    zvol_range_t zr;

    zvol_range_enter (zv, pos, next - pos, &zr);
    r = may_trim ? zvol_zero_region (zv, pos, next, &last_txg)
      : zvol_zero_alloc (zv, pos, next, &last_txg);
    if (r == 0) {
      /* Replay must repeat what was done: holes, or allocated zeros. */
      uint64_t lt = zvol_log_free (zv, last_txg, ZV_LR_ZERO, pos,
                                   next - pos,
                                   may_trim ? 0 : ZV_LR_F_ZERO_ALLOC);
      t = ZV_MAX (t, lt);
    }
    zvol_range_exit (zv, &zr);
    pos = next;
  }
  if (r == 0)
    r = zvol_commit_if_sync (zv, flags, t);
  return r;
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
  switch (lr->lr_type) {
  case ZV_LR_WRITE:
    return zvol_write (zv, data, lr->lr_offset, (uint32_t) lr->lr_length, 0);
  case ZV_LR_WRITE_IND: {
    zv_blkptr_t bp;
    void *buf;
    memcpy (&bp, data, sizeof bp);
    if (lr->lr_length != zv->zv_blksz || lr->lr_offset % zv->zv_blksz
        || bp.bp_psize != zv->zv_blksz || bp.bp_level != 0) {
      zv_error ("intent log: indirect record %" PRIu64 " is inconsistent",
                lr->lr_seq);
      return -EIO;
    }
    buf = zv_buf_get (zv->zv_blksz);
    r = zv_zio_read (&zv->zv_pool->p_spa, &bp, buf, "intent log block");
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
  default:
    return 0;
  }
}

/* Open the volume's intent log; replay what it holds (read-write). */
int
zvol_log_open (zvol_pool_t *p, const zvol_pool_config_t *pc)
{
  zvol_t *zv = &p->p_zvol;
  zv_zil_tunables_t zt;
  zv_zil_ops_t ops = {
    .zo_read = zvol_log_read,
    .zo_write_block = zvol_log_write_block,
    .zo_replay = zvol_log_replay,
    .zo_blksz = zv->zv_blksz,
  };
  int r;

  zv->zv_sync = pc->pc_sync;
  zv->zv_stripes = calloc (ZVOL_STRIPES, sizeof *zv->zv_stripes);
  if (zv->zv_stripes == NULL)
    return -ENOMEM;
  for (unsigned i = 0; i < ZVOL_STRIPES; i++)
    pthread_mutex_init (&zv->zv_stripes[i], NULL);
  if (p->p_readonly)
    return 0;
  zv_zil_tunables_default (&zt);
  zt.zt_sync = pc->pc_sync == ZVOL_SYNC_ALWAYS ? ZV_SYNC_ALWAYS
    : pc->pc_sync == ZVOL_SYNC_DISABLED ? ZV_SYNC_DISABLED : ZV_SYNC_STANDARD;
  zt.zt_logbias = pc->pc_logbias == ZVOL_LOGBIAS_THROUGHPUT
    ? ZV_LOGBIAS_THROUGHPUT : ZV_LOGBIAS_LATENCY;
  zt.zt_legacy_txg_commit = pc->pc_flush_by_txg;
  p->p_zil = zv_zil_open (&p->p_spa, p->p_logdev, p->p_txg, &p->p_zil_hdr,
                          &ops, zv, &zt);
  if (p->p_zil == NULL)
    return -ENOMEM;
  zv->zv_zil = p->p_zil;
  r = zv_zil_replay (p->p_zil, p->p_synced_txg);
  if (r < 0) {
    zv_error ("pool '%s': intent log replay failed: %s", p->p_name,
              strerror (-r));
    return r;
  }
  return 0;
}

/* Release what zvol_log_open set up (pool_free). */
void
zvol_log_free_stripes (zvol_t *zv)
{
  if (zv->zv_stripes == NULL)
    return;
  for (unsigned i = 0; i < ZVOL_STRIPES; i++)
    pthread_mutex_destroy (&zv->zv_stripes[i]);
  free (zv->zv_stripes);
  zv->zv_stripes = NULL;
}
