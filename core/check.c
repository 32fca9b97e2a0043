/*
 * check.c: the checker, zvol_pool_check (`zvoladm check` offline) and
 * zvol_pool_check_live (the same on a served pool), as zdb -b or
 * qemu-img check: every block read, every copy verified, and the space
 * in use compared with the space maps.
 *
 * Theory.  What owns space is said in one place, import's owner map
 * (import.c, import_take; alloc.h, zv_alloc_own*): the objset, the
 * pool's objects' blocks, the pending deferred frees, the log rings and
 * every block of every dataset's tree born after the dataset's min birth
 * (zv_import_ds_min_birth), and what the queued frees of destroyed
 * datasets still hold (freeq.c: a tree from its cursor, a dead list's
 * entries still to free).  The checker imports read-only with p_check
 * set, so what the map refuses is recorded here instead of failing the
 * import (zv_check_take): a sector taken a second time (doubly
 * allocated), free space or space off the pool named by a pointer.  The
 * rest of such an extent is taken all the same (zv_alloc_own_rest), so
 * a conflict is never reported as a leak too.  Then:
 *   1. the pool's objects: every copy of each block read and verified;
 *   2. each dataset's tree, walked by zv_import_walk_tree (taking every
 *      owner, as verify=full), with check_block seeing each block: every
 *      copy read and verified, data blocks too.  The walk itself stops
 *      at an indirect block it cannot read or that fails its checks
 *      (dmu.c); so that such a block is named with its place, the
 *      callback of its parent probes its indirect children first
 *      (check_probe), and the tree is counted incomplete;
 *   3. the log blocks a claim would take own what is left of them
 *      (zv_import_own_log_blocks);
 *   4. with conflicts, a second pass names their owners: the owners
 *      outside the trees were recorded in pass 1 (ck_meta: few), the
 *      trees are walked again with ck_naming set, which makes
 *      zv_check_take compare instead of take;
 *   5. what is still unowned in the map is leaked
 *      (zv_alloc_own_foreach_unowned).
 * A tree that stopped early leaves its unwalked blocks unowned: they
 * show as leaked, and the report counts the tree as incomplete.
 *
 * Live (zvol_pool_check_live, on a pool this process serves): the walk
 * needs every tree and the space maps of one txg, unchanged while it
 * reads them, and the served pool's syncs free and reuse blocks.  So:
 *   - a free hold (alloc.c, zv_alloc_hold_begin) as of T, the last
 *     committed txg: no free of a txg after T is applied until it ends,
 *     so every block T's uberblock reaches stays on disk as it was
 *     (the held frees are carried into each new txg's persisted list:
 *     a crash meanwhile leaks nothing);
 *   - a view of T (pool.c, zv_pool_open_view): a read-only import of
 *     exactly that uberblock on the server's own device handles (no
 *     second open, so no flock or O_EXCL of the server's is met), which
 *     writes nothing and reads no log chain;
 *   - passes 1, 2, 4 and 5 on the view as offline.  Pass 3 is skipped:
 *     T's log chains go on changing live, and T's space maps hold no
 *     block only a log record owns (zv_alloc_block_open keeps the
 *     in-place blocks of later txgs out of them), so a leak found there
 *     is one;
 *   - after each block (check_live_poll): stop on a cancel descriptor
 *     (the client gone, the server stopping: -ECANCELED; looked at
 *     every 64 blocks) or when the hold keeps more than check_hold_pct
 *     of the space free at its start (-ENOSPC); the view is closed and the hold ended whatever
 *     happened.  A second check meets the hold: -EBUSY.
 *
 * Scrub (zvol_pool_scrub, zvol_pool_scrub_live, and scrub.c's pieces):
 * the same passes with ck_repair set, so that check_copies has scan.c
 * verify every copy on every side of its device and rewrite the bad
 * ones.  A piece of the background scrub (zv_check_scrub_piece) walks
 * from a place (check.h, zv_check_pos_t: the trees in the order of their
 * ids, the data offset in the current one), moves the place on as it
 * verifies data blocks, stops on its flag (a pause, a cancel, a close)
 * or, quietly (-EAGAIN), once its hold passes a quarter of the bound; it
 * waits for the clients' I/O and keeps to scan_rate_max before each
 * block (check_yield, check_pace).  Only a piece that began at the start
 * runs passes 4 and 5: a later one did not walk the trees before its
 * place, so their space is not in its owner map.
 *
 * Locking: none of its own.  Offline the pool is the checker's alone
 * (read-only, not started: no thread of the engine runs).  Live the
 * view is the check's thread's alone; what it shares with the served
 * pool is the device handles (their I/O is per thread) and the
 * allocator's hold, under a_lock.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "zvol.h"
#include "pool_impl.h"
#include "import.h"
#include "check.h"
#include "scan.h"
#include "tunable.h"

#define CHECK_NAME 192          /* an owner's name, with its place */
#define CHECK_NAMES 4           /* owners named per doubly allocated extent */
#define CHECK_PIECE_MIN 1      /* data blocks a scrub piece verifies at
                                   least before its hold may end it */

/* The live check's bound: what its hold keeps back, as a share (%) of
 * the space free when it began (tunable). */
static unsigned zv_check_hold_pct = 50;

typedef struct check_owner {
  uint64_t co_dva;
  uint32_t co_size;
  char co_name[CHECK_NAME];
} check_owner_t;

/* Space taken twice: the later claim's extent, and in pass 2 every
 * owner that overlaps it (cc_lo, cc_hi: the bytes two of them share). */
typedef struct check_dup {
  uint64_t cc_dva;
  uint32_t cc_size;
  uint64_t cc_lo, cc_hi;
  char cc_names[CHECK_NAMES][CHECK_NAME];
  unsigned cc_nnames;
} check_dup_t;

struct zv_check {
  zvol_check_report_t *ck_rep;
  zv_pool_t *ck_pool;
  bool ck_repair;               /* a scrub: bad copies rewritten (scan.c) */
  const char *ck_what;          /* "check" or "scrub", for the progress */
  bool ck_in_tree;              /* pass 1 is in a tree walk */
  bool ck_naming;               /* pass 2 */
  check_owner_t *ck_meta;       /* pass 1's owners outside the trees */
  size_t ck_nmeta, ck_meta_cap;
  check_dup_t *ck_dup;
  size_t ck_ndup, ck_dup_cap;
  /* The tree being walked: */
  const char *ck_ds;
  uint64_t ck_ds_blksz;         /* its data block size; 0: no volume
                                   offsets (a queued free's tree) */
  uint64_t ck_ds_size;
  uint64_t ck_min_birth;
  uint64_t ck_cursor;           /* a queued free's: data blocks before it
                                   are freed (freeq.c) */
  uint8_t *ck_buf;              /* ZV_MAX_BLKSZ */
  uint64_t ck_done, ck_total;   /* data bytes, for the progress */
  void (*ck_progress) (void *arg, const char *what, uint64_t done,
                       uint64_t total);
  void *ck_progress_arg;
  /* Live (zvol_pool_check_live): the served pool whose hold keeps the
   * view's blocks, what ends the check early, and why it ended. */
  zv_pool_t *ck_live;
  const int *ck_cancel_fd;      /* two descriptors, -1: none */
  const _Atomic bool *ck_stop_flag;  /* a scrub piece's: stop when true */
  zv_check_pos_t *ck_pos;       /* a scrub piece's place (check.h) */
  uint64_t ck_skip_off;         /* in this tree, data below it is done */
  uint64_t ck_piece_data;       /* data blocks this piece verified */
  uint64_t ck_pace_ns, ck_pace_bytes;  /* a scrub piece's pace: since */
  uint64_t ck_ds_id;
  uint64_t ck_hold_max, ck_hold_max_n;
  uint64_t ck_polled;
  int ck_stop;                  /* 0, -ECANCELED, -ENOSPC */
};

static void
check_who_text (const zv_check_who_t *who, char *buf, size_t len)
{
  if (who->cw_copy == 0)
    snprintf (buf, len, "%s", who->cw_what);
  else
    snprintf (buf, len, "%s level %u block %" PRIu64 " copy %u",
              who->cw_what, who->cw_level, who->cw_blkid, who->cw_copy);
}

/* Where, in its dataset, the block a problem is about lies (a tree's
 * block, in a scrub's report of what it could not repair): cb_ds NULL
 * when it is no tree's, or a queued free's. */
typedef struct check_place {
  const char *cpl_ds;
  uint64_t cpl_off, cpl_len;
} check_place_t;

static void __attribute__ ((format (printf, 8, 0)))
check_problem_at (zv_check_t *ck, zvol_check_kind_t kind, unsigned dev,
                  uint64_t off, uint64_t len, const check_place_t *pl,
                  int repair, const char *fmt, va_list ap)
{
  zvol_check_report_t *rep = ck->ck_rep;
  zvol_check_problem_t cp = {
    .cp_kind = kind, .cp_dev = dev, .cp_offset = off, .cp_length = len,
    .cp_repair = repair,
  };
  char msg[4 * CHECK_NAME + 256];

  vsnprintf (msg, sizeof msg, fmt, ap);
  cp.cp_msg = msg;
  if (pl != NULL && pl->cpl_ds != NULL) {
    cp.cp_dataset = pl->cpl_ds;
    cp.cp_ds_offset = pl->cpl_off;
    cp.cp_ds_length = pl->cpl_len;
  }
  rep->cr_problems++;
  if (rep->cr_problem)
    rep->cr_problem (rep->cr_problem_arg, &cp);
}

static void __attribute__ ((format (printf, 6, 7)))
check_problem (zv_check_t *ck, zvol_check_kind_t kind, unsigned dev,
               uint64_t off, uint64_t len, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  check_problem_at (ck, kind, dev, off, len, NULL, 0, fmt, ap);
  va_end (ap);
}

static void __attribute__ ((format (printf, 8, 9)))
check_problem_pl (zv_check_t *ck, zvol_check_kind_t kind, unsigned dev,
                  uint64_t off, uint64_t len, const check_place_t *pl,
                  int repair, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  check_problem_at (ck, kind, dev, off, len, pl, repair, fmt, ap);
  va_end (ap);
}

/* ---- the owner map's refusals (import_take) ---- */

static bool
check_overlap (uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
  return ZV_DVA_VDEV (a) == ZV_DVA_VDEV (b) && a < b + blen && b < a + alen;
}

/* Pass 2: an owner of space some conflict names gets its name there. */
static void
check_name (zv_check_t *ck, const char *name, uint64_t dva, uint32_t size)
{
  for (size_t i = 0; i < ck->ck_ndup; i++) {
    check_dup_t *cc = &ck->ck_dup[i];
    bool known = false;

    if (!check_overlap (cc->cc_dva, cc->cc_size, dva, size))
      continue;
    for (unsigned k = 0; k < cc->cc_nnames; k++)
      known |= strcmp (cc->cc_names[k], name) == 0;
    if (!known && cc->cc_nnames < CHECK_NAMES)
      snprintf (cc->cc_names[cc->cc_nnames++], CHECK_NAME, "%s", name);
    if (cc->cc_dva == dva && cc->cc_size == size)
      continue;                 /* the conflict's own claim */
    uint64_t lo = ZV_MAX (cc->cc_dva, dva);
    uint64_t hi = ZV_MIN (cc->cc_dva + cc->cc_size, dva + size);
    if (cc->cc_hi == 0) {
      cc->cc_lo = lo;
      cc->cc_hi = hi;
    }
    cc->cc_lo = ZV_MIN (cc->cc_lo, lo);
    cc->cc_hi = ZV_MAX (cc->cc_hi, hi);
  }
}

int
zv_check_take (zv_check_t *ck, zv_alloc_t *a, const zv_check_who_t *who,
               uint64_t dva, uint32_t size)
{
  char name[CHECK_NAME];
  int r;

  if (ck->ck_naming) {
    if (ck->ck_ndup > 0) {
      check_who_text (who, name, sizeof name);
      check_name (ck, name, dva, size);
    }
    return 0;
  }
  r = zv_alloc_own (a, dva, size);
  if (r == 0 && ck->ck_in_tree)
    return 0;
  check_who_text (who, name, sizeof name);
  if (!ck->ck_in_tree) {
    ZV_GROW (ck->ck_meta, ck->ck_nmeta, ck->ck_meta_cap, 64);
    ck->ck_meta[ck->ck_nmeta] = (check_owner_t) {
      .co_dva = dva, .co_size = size,
    };
    snprintf (ck->ck_meta[ck->ck_nmeta++].co_name, CHECK_NAME, "%s", name);
  }
  if (r == -EEXIST) {
    ZV_GROW (ck->ck_dup, ck->ck_ndup, ck->ck_dup_cap, 16);
    ck->ck_dup[ck->ck_ndup++] = (check_dup_t) {
      .cc_dva = dva, .cc_size = size,
    };
  }
  else if (r == -ENOENT) {
    ck->ck_rep->cr_free_refs++;
    check_problem (ck, ZVOL_CHECK_FREE, ZV_DVA_VDEV (dva), ZV_DVA_OFFSET (dva),
                   size, "%s: points at free space (device %u offset %"
                   PRIu64 ", %" PRIu32 " bytes)", name, ZV_DVA_VDEV (dva),
                   ZV_DVA_OFFSET (dva), size);
  }
  else if (r < 0) {
    ck->ck_rep->cr_free_refs++;
    check_problem (ck, ZVOL_CHECK_FREE, ZV_DVA_VDEV (dva), ZV_DVA_OFFSET (dva),
                   size, "%s: points outside the pool's data area (device "
                   "%u offset %" PRIu64 ", %" PRIu32 " bytes)", name,
                   ZV_DVA_VDEV (dva), ZV_DVA_OFFSET (dva), size);
  }
  /* What else of it is allocated is this owner's, not leaked. */
  if (r < 0)
    zv_alloc_own_rest (a, dva, size);
  return 0;
}

void
zv_check_forget (zv_check_t *ck)
{
  ck->ck_nmeta = 0;
  ck->ck_ndup = 0;
  ck->ck_rep->cr_free_refs = 0;
  ck->ck_rep->cr_problems = 0;
}

/* ---- reading every copy ---- */

/* The dataset bytes a tree's block covers (level, blkid), as far as the
 * tree's size; none outside a volume's or snapshot's tree. */
static void
check_place (const zv_check_t *ck, int level, uint64_t blkid,
             check_place_t *pl)
{
  uint64_t span, off;

  memset (pl, 0, sizeof *pl);
  if (level < 0 || ck->ck_ds_blksz == 0)
    return;
  span = zv_dmu_span ((unsigned) level);
  /* Saturating: a hostile blkid or a high level says "past the end". */
  off = blkid > ck->ck_ds_size / ck->ck_ds_blksz / ZV_MAX (span, 1)
    ? ck->ck_ds_size : blkid * span * ck->ck_ds_blksz;
  pl->cpl_ds = ck->ck_ds;
  pl->cpl_off = ZV_MIN (off, ck->ck_ds_size);
  pl->cpl_len = span > ck->ck_ds_size / ck->ck_ds_blksz
    ? ck->ck_ds_size - pl->cpl_off
    : ZV_MIN (span * ck->ck_ds_blksz, ck->ck_ds_size - pl->cpl_off);
}

typedef struct check_copy {
  zv_check_t *cc_ck;
  const char *cc_name;          /* or NULL: named from the tree's place */
  int cc_level;
  uint64_t cc_blkid;
  const check_place_t *cc_place;
  char cc_buf[CHECK_NAME];
} check_copy_t;

/* The block's name for a message.  A tree's blocks are named only when
 * one has something to say: formatting the name of each block the walk
 * verified was a quarter of a scrub's CPU. */
static const char *
check_copy_name (check_copy_t *cc)
{
  if (cc->cc_name == NULL) {
    snprintf (cc->cc_buf, sizeof cc->cc_buf, "%s level %d block %" PRIu64,
              cc->cc_ck->ck_ds, cc->cc_level, cc->cc_blkid);
    cc->cc_name = cc->cc_buf;
  }
  return cc->cc_name;
}

/* A copy on a side that failed (scan.c), after its repair was tried:
 * reported with its place on the device, and in a scrub what the repair
 * did. */
static void
check_bad_slot (void *arg, const zv_blkptr_t *bp, const zv_scan_slot_t *ss)
{
  check_copy_t *cc = arg;
  zv_check_t *ck = cc->cc_ck;
  uint64_t dva = bp->bp_dva[ss->ss_copy];
  unsigned v = ZV_DVA_VDEV (dva);
  char side[48] = "", fix[96] = "";

  if (ss->ss_nsides > 1)
    snprintf (side, sizeof side, " side %u of %u", ss->ss_side + 1,
              ss->ss_nsides);
  if (ck->ck_repair) {
    if (ss->ss_repair > 0)
      snprintf (fix, sizeof fix, ": repaired");
    else if (ss->ss_repair < 0)
      snprintf (fix, sizeof fix, ": the repair failed (%s)",
                strerror (-ss->ss_repair));
    else
      snprintf (fix, sizeof fix, ": not repaired (%s)", ss->ss_good == 0
                ? "no copy verifies" : "scan_repair is off");
  }
  check_problem_pl (ck, ss->ss_err == -EIO ? ZVOL_CHECK_READ
                    : ZVOL_CHECK_CKSUM, v, ZV_DVA_OFFSET (dva), bp->bp_psize,
                    cc->cc_place, ss->ss_repair, "%s copy %u of %u%s: %s on "
                    "device %u (%s) offset %" PRIu64 ", %" PRIu32
                    " bytes, birth txg %" PRIu64 "%s", check_copy_name (cc),
                    ss->ss_copy + 1, bp->bp_ncopies, side,
                    ss->ss_err == -EIO ? "read error" : "checksum error", v,
                    zv_dev_path (ss->ss_dev), ZV_DVA_OFFSET (dva),
                    bp->bp_psize, bp->bp_birth, fix);
}

/* Read and verify every copy of bp on every side of its device (scan.c),
 * reporting each that fails and, in a scrub, repairing it from one that
 * verified; 'name' says whose block it is (NULL: the tree's, ck_ds,
 * named by its place), (level, blkid) where it is in its tree (level -1:
 * in none).  buf gets a copy that verified.  Returns the copies that
 * verified. */
static unsigned
check_copies (zv_check_t *ck, const zv_blkptr_t *bp, const char *name,
              int level, uint64_t blkid, void *buf, bool count)
{
  zvol_check_report_t *rep = ck->ck_rep;
  check_place_t pl;
  check_copy_t cc = { .cc_ck = ck, .cc_name = name, .cc_level = level,
                      .cc_blkid = blkid, .cc_place = &pl };
  zv_scan_result_t sr;
  unsigned good;

  check_place (ck, level, blkid, &pl);
  good = zv_scan_block (&ck->ck_pool->p_spa, bp, buf, ck->ck_repair,
                        check_bad_slot, &cc, &sr);
  if (count) {
    rep->cr_blocks += sr.sr_slots;
    rep->cr_bytes += (uint64_t) sr.sr_slots * bp->bp_psize;
  }
  rep->cr_read_errors += sr.sr_read_errors;
  rep->cr_cksum_errors += sr.sr_cksum_errors;
  rep->cr_repaired += sr.sr_repaired;
  rep->cr_repair_failed += sr.sr_repair_failed;
  if (good == 0) {
    char where[CHECK_NAME + 96] = "";

    if (pl.cpl_ds != NULL)
      snprintf (where, sizeof where, ": %s offset %" PRIu64 ", %" PRIu64
                " bytes", pl.cpl_ds, pl.cpl_off, pl.cpl_len);
    rep->cr_lost_blocks++;
    check_problem_pl (ck, ZVOL_CHECK_LOST, ZV_DVA_VDEV (bp->bp_dva[0]),
                      ZV_DVA_OFFSET (bp->bp_dva[0]), bp->bp_psize, &pl, 0,
                      "%s: no copy verifies (what it holds is lost%s)",
                      check_copy_name (&cc), where);
  }
  return good;
}

/* A pointer check_copies may read: one the import or the walk checked
 * (zv_zio_bp_check, quiet), else it is named and skipped. */
static bool
check_readable (zv_check_t *ck, const zv_blkptr_t *bp, const char *name)
{
  if (zv_zio_bp_check (&ck->ck_pool->p_spa, bp, NULL) == 0)
    return true;
  ck->ck_rep->cr_lost_blocks++;
  check_problem (ck, ZVOL_CHECK_LOST, ZV_DVA_VDEV (bp->bp_dva[0]),
                 ZV_DVA_OFFSET (bp->bp_dva[0]), bp->bp_psize,
                 "%s: its pointer is invalid (size %" PRIu32 ", %u copies)",
                 name, bp->bp_psize, bp->bp_ncopies);
  return false;
}

/* ---- 1. the pool's objects ---- */

static void
check_flat (zv_check_t *ck, const zv_flat_t *fl, const char *what)
{
  char name[CHECK_NAME];

  for (unsigned l = 0; l < fl->fl_nlevels; l++)
    for (uint64_t i = 0; i < fl->fl_len[l]; i++) {
      const zv_blkptr_t *bp = &fl->fl_bps[l][i];
      if (zv_bp_is_hole (bp))
        continue;
      snprintf (name, sizeof name, "%s level %u block %" PRIu64, what, l, i);
      if (check_readable (ck, bp, name))
        (void) check_copies (ck, bp, name, -1, 0, ck->ck_buf, true);
    }
}

static void
check_meta (zv_check_t *ck)
{
  zv_pool_t *p = ck->ck_pool;
  char what[64];

  if (check_readable (ck, &p->p_objset_bp, "objset"))
    (void) check_copies (ck, &p->p_objset_bp, "objset", -1, 0, ck->ck_buf,
                         true);
  check_flat (ck, &p->p_dd.dd_flat, "dataset directory");
  for (unsigned d = 0; d < p->p_spa.spa_ndevs; d++) {
    snprintf (what, sizeof what, "space map %u", d);
    check_flat (ck, &p->p_spacemap[d], what);
  }
  for (unsigned i = 0; i < 2; i++) {
    snprintf (what, sizeof what, "deferred-free list %u", i);
    check_flat (ck, &p->p_defer[i], what);
  }
  for (size_t i = 0; i < p->p_freeq.fq_n; i++) {
    zv_freeq_ent_t *e = p->p_freeq.fq_ents[i];
    zv_flat_t *dlf = zv_deadlist_flat (&e->fe_dl);
    char w[3 * ZV_NAME_MAX + 32];

    snprintf (w, sizeof w, "background free of %s", e->fe_shown);
    if (dlf != NULL)
      check_flat (ck, dlf, w);
  }
}

/* ---- 2. the trees ---- */

static bool check_before_place (const zv_check_t *ck, unsigned level,
                                uint64_t blkid);

/* An indirect child no copy of which verifies stops the walk when it
 * gets there (dmu.c): name it, with its place, while its parent is at
 * hand.  Children the walk prunes or skips are not its to read. */
static void
check_probe (zv_check_t *ck, const zv_blkptr_t *bp, unsigned level,
             uint64_t blkid)
{
  const zv_blkptr_t *e = (const zv_blkptr_t *) ck->ck_buf + 1;
  uint8_t *tmp = zv_buf_get (ZV_INDIRECT_SIZE);
  char name[CHECK_NAME];

  for (uint64_t i = 0; i < ZV_INDIRECT_FANOUT; i++) {
    const zv_blkptr_t *c = &e[i];
    bool ok = false;

    uint64_t end = (blkid * ZV_INDIRECT_FANOUT + i + 1)
      * zv_dmu_span (level - 1);

    if (zv_bp_is_hole (c) || c->bp_birth <= ck->ck_min_birth
        || end <= ck->ck_cursor || c->bp_psize != ZV_INDIRECT_SIZE
        || check_before_place (ck, level - 1, blkid * ZV_INDIRECT_FANOUT + i)
        || zv_zio_bp_check (&ck->ck_pool->p_spa, c, NULL) < 0)
      continue;                 /* the walk's own checks name these */
    for (unsigned k = 0; k < c->bp_ncopies && !ok; k++)
      ok = zv_zio_read_copy (&ck->ck_pool->p_spa, c, k, tmp) == 0;
    if (!ok) {
      snprintf (name, sizeof name, "%s level %u block %" PRIu64, ck->ck_ds,
                level - 1, blkid * ZV_INDIRECT_FANOUT + i);
      (void) check_copies (ck, c, name, (int) level - 1,
                           blkid * ZV_INDIRECT_FANOUT + i, tmp, false);
    }
  }
  zv_buf_put (tmp, ZV_INDIRECT_SIZE);
  (void) bp;
}

/* Live: every 64 blocks, has the client gone or the server begun to
 * stop (a cancel descriptor readable or hung up), or has the hold kept
 * back more than the check may cost?  Then the walk stops, and the
 * check ends with ck_stop. */
static int
check_live_poll (zv_check_t *ck)
{
  uint64_t held, held_n;
  unsigned why;

  if (ck->ck_live == NULL || ck->ck_stop != 0)
    return ck->ck_stop;
  if (ck->ck_stop_flag != NULL && atomic_load (ck->ck_stop_flag)) {
    ck->ck_stop = -ECANCELED;
    return ck->ck_stop;
  }
  /* The descriptors cost a system call: every 64 blocks.  The hold
   * costs two loads, and a writer can fill the pool with held frees
   * within 64 blocks of a scrub that yields to it: every block. */
  if (ck->ck_polled++ % 64 == 0
      && (why = zv_cancel_poll (ck->ck_cancel_fd)) != 0) {
    zv_warn ("pool '%s': %s cancelled: %s", ck->ck_live->p_name, ck->ck_what,
             why == 1 ? "its client went away" : "the server is stopping");
    ck->ck_stop = -ECANCELED;
    return ck->ck_stop;
  }
  zv_alloc_hold_get (ck->ck_live->p_spa.spa_alloc, &held, &held_n);
  /* A scrub in pieces ends this one early, quietly, and goes on from
   * its place on a new view (its hold released meanwhile); but only
   * once it moved on by some blocks, so that a busy pool, whose frees
   * pass the bound while a view imports, does not stop it for good. */
  if (ck->ck_pos != NULL && ck->ck_piece_data >= CHECK_PIECE_MIN
      && (held > ck->ck_hold_max / 4 || held_n > ck->ck_hold_max_n / 4)) {
    ck->ck_stop = -EAGAIN;
    return ck->ck_stop;
  }
  if (held > ck->ck_hold_max || held_n > ck->ck_hold_max_n) {
    char h[32], m[32];
    zvol_admin_size (h, sizeof h, held, false);
    zvol_admin_size (m, sizeof m, ck->ck_hold_max, false);
    zv_error ("pool '%s': %s cancelled: the frees it holds back (%s in "
              "%" PRIu64 " extents) passed its share of the pool's free "
              "space (%s, check_hold_pct=%u%%): held frees would fill the "
              "pool; run it when the pool is less busy, or offline",
              ck->ck_live->p_name, ck->ck_what, h, held_n, m,
              zv_check_hold_pct);
    ck->ck_stop = -ENOSPC;
  }
  return ck->ck_stop;
}

/* Has a scrub piece's hold passed the share at which it ends?  Then it
 * yields no more: the block it is at is verified, and the piece ends
 * (check_live_poll) with its hold, so that the frees come back. */
static bool
check_hold_passed (zv_check_t *ck)
{
  uint64_t held, held_n;

  zv_alloc_hold_get (ck->ck_live->p_spa.spa_alloc, &held, &held_n);
  return held > ck->ck_hold_max / 4 || held_n > ck->ck_hold_max_n / 4;
}

/* A background scrub gives way to the clients (scan_yield_ms): before
 * each block, while the intent log has a batch under way for them
 * (spa_sync_io, as the txg sync's own writes yield to it: zio.c) or a
 * txg sync writes their data, it waits in 1 ms steps, up to the
 * tunable's bound per block, so that it still moves on under a load
 * that never stops. */
static void
check_yield (zv_check_t *ck)
{
  zv_pool_t *p = ck->ck_live;
  uint64_t max = (uint64_t) zv_scan_yield_ms_get () * 1000000ull, waited = 0;
  struct timespec d = { 0, 1000 * 1000 };

  while (waited < max && !atomic_load (ck->ck_stop_flag)
         && !check_hold_passed (ck)
         && (atomic_load_explicit (&p->p_spa.spa_sync_io,
                                   memory_order_relaxed) > 0
             || atomic_load_explicit (&p->p_syncing, memory_order_relaxed))) {
    nanosleep (&d, NULL);
    waited += 1000 * 1000;
  }
}

/* A background scrub's pace (scan_rate_max): after each block, sleep
 * until the bytes read so far are not ahead of the rate, in steps of
 * 100 ms at most so that a pause or a cancel is seen soon. */
static void
check_pace (zv_check_t *ck, uint64_t bytes)
{
  uint64_t rate = zv_scan_rate_max_get (), now = zv_now_ns (), due;

  if (rate == 0) {
    ck->ck_pace_ns = 0;
    return;
  }
  if (ck->ck_pace_ns == 0 || ck->ck_pace_bytes > (1ull << 50)) {
    ck->ck_pace_ns = now;
    ck->ck_pace_bytes = 0;
  }
  ck->ck_pace_bytes += bytes;
  due = ck->ck_pace_ns + (uint64_t) ((double) ck->ck_pace_bytes * 1e9
                                     / (double) rate);
  while (now < due && !atomic_load (ck->ck_stop_flag)) {
    uint64_t ns = ZV_MIN (due - now, 100 * 1000 * 1000ull);
    struct timespec d = { (time_t) (ns / 1000000000ull),
                          (long) (ns % 1000000000ull) };
    nanosleep (&d, NULL);
    now = zv_now_ns ();
  }
}

/*
 * A scrub going on from its place: a block that lies wholly before it
 * was verified by an earlier piece, and is left out of the walk with all
 * under it (zv_import_walk_tree_skip), counted as examined all the same
 * (a data block's bytes, or those of the data blocks under an indirect
 * one, its fill).  Walked down to each data block again, as it was,
 * every piece cost as much as its place was far: each indirect block
 * before it read into the view's cold cache, each block's space taken.
 * A piece that began past the start tells no leak (check_run), so
 * nothing needs them owned.
 */
static bool
check_before_place (const zv_check_t *ck, unsigned level, uint64_t blkid)
{
  uint64_t span = zv_dmu_span (level);

  return ck->ck_skip_off > 0 && ck->ck_ds_blksz > 0
    && blkid < ck->ck_skip_off / ck->ck_ds_blksz / ZV_MAX (span, 1)
    && (blkid + 1) * span * ck->ck_ds_blksz <= ck->ck_skip_off;
}

static bool
check_skip (void *arg, const zv_blkptr_t *bp, unsigned level,
            uint64_t blkid)
{
  zv_check_t *ck = arg;
  uint64_t bytes;

  if (!check_before_place (ck, level, blkid))
    return false;
  /* The fill is read from disk: saturate rather than wrap. */
  bytes = level == 0 ? bp->bp_lsize
    : bp->bp_fill > ck->ck_total / ck->ck_ds_blksz ? ck->ck_total
    : bp->bp_fill * ck->ck_ds_blksz;
  ck->ck_done = ZV_MIN (ck->ck_done + ZV_MIN (bytes, ck->ck_total),
                        ck->ck_total);
  return true;
}

/* Every block of the tree, after the walk took its owner (and read it,
 * if indirect). */
static int
check_block (void *arg, const zv_blkptr_t *bp, unsigned level,
             uint64_t blkid, const void *data)
{
  zv_check_t *ck = arg;
  unsigned good;

  (void) data;
  if (ck->ck_pos != NULL)
    check_yield (ck);
  good = check_copies (ck, bp, NULL, (int) level, blkid, ck->ck_buf, true);
  if (ck->ck_pos != NULL)
    check_pace (ck, (uint64_t) bp->bp_ncopies * bp->bp_psize);
  if (ck->ck_pos != NULL && level == 0) {
    ck->ck_piece_data++;
    ck->ck_pos->cp_ds_id = ck->ck_ds_id;
    ck->ck_pos->cp_off = ZV_MAX (ck->ck_pos->cp_off,
                                 (blkid + 1) * ck->ck_ds_blksz);
  }
  if (good > 0 && level >= 2)
    check_probe (ck, bp, level, blkid);
  if (level == 0) {
    ck->ck_done = ZV_MIN (ck->ck_done + bp->bp_lsize, ck->ck_total);
    if (ck->ck_progress && blkid % 64 == 0)
      ck->ck_progress (ck->ck_progress_arg, ck->ck_what, ck->ck_done,
                       ck->ck_total);
  }
  return check_live_poll (ck);
}

static void
check_tree (zv_check_t *ck, zv_pool_ds_t *ds)
{
  const zv_blkptr_t *root = &ds->ds_rec.dr_volume.dn_root;
  char what[2 * ZV_NAME_MAX + 24];
  int r;

  /* A snapshot is named as its export is, VOL@SNAP. */
  if (ds->ds_kind == ZV_DS_KIND_SNAPSHOT && ds->ds_parent != NULL)
    snprintf (what, sizeof what, "snapshot '%s@%s'", ds->ds_parent->ds_name,
              ds->ds_name);
  else
    snprintf (what, sizeof what, "volume '%s'", ds->ds_name);
  ck->ck_ds = what;
  ck->ck_ds_blksz = ds->ds_rec.dr_volume.dn_datablksz;
  ck->ck_ds_size = ds->ds_rec.dr_volume.dn_size;
  ck->ck_min_birth = zv_import_ds_min_birth (ds);
  ck->ck_rep->cr_trees++;
  if (zv_bp_is_hole (root))
    return;
  /* The root has no parent to probe it. */
  if (root->bp_birth > ck->ck_min_birth) {
    bool ok = false;
    for (unsigned k = 0; k < root->bp_ncopies && !ok; k++)
      ok = zv_zio_read_copy (&ck->ck_pool->p_spa, root, k, ck->ck_buf) == 0;
    if (!ok) {
      char name[CHECK_NAME];
      snprintf (name, sizeof name, "%s level %u block 0", what,
                ds->ds_rec.dr_volume.dn_nlevels - 1u);
      (void) check_copies (ck, root, name,
                           ds->ds_rec.dr_volume.dn_nlevels - 1, 0,
                           ck->ck_buf, true);
      ck->ck_rep->cr_incomplete++;
      check_problem (ck, ZVOL_CHECK_TREE, 0, 0, 0, "%s: its root does not "
                     "read: nothing of the tree is checked, and its space "
                     "shows as leaked", what);
      return;
    }
  }
  ck->ck_in_tree = true;
  r = zv_import_walk_tree_skip (ck->ck_pool, ds, check_skip, ck, check_block,
                                ck);
  ck->ck_in_tree = false;
  if (r < 0 && ck->ck_stop == 0) {
    ck->ck_rep->cr_incomplete++;
    check_problem (ck, ZVOL_CHECK_TREE, 0, 0, 0, "%s: the walk stopped at a "
                   "block that does not read or fails its checks (%s; the "
                   "messages before say which): the rest of the tree is not "
                   "checked, and its space shows as leaked", what,
                   strerror (-r));
  }
}

/* What a queued free still holds (freeq.c): its tree from the cursor,
 * walked and read as a dataset's (its blocks before the cursor are
 * freed, so neither read nor owned), or its dead list's entries still to
 * free, owned (their blocks carry no checksum of their own to read). */
static void
check_freeq (zv_check_t *ck, zv_freeq_ent_t *e)
{
  char what[3 * ZV_NAME_MAX + 32];
  int r;

  snprintf (what, sizeof what, "background free of %s", e->fe_shown);
  ck->ck_ds = what;
  ck->ck_ds_blksz = 0;
  ck->ck_min_birth = e->fe_line;
  ck->ck_cursor = e->fe_cursor;
  ck->ck_in_tree = true;
  r = zv_import_walk_freeq (ck->ck_pool, e, check_block, ck);
  ck->ck_in_tree = false;
  ck->ck_cursor = 0;
  if (r < 0 && ck->ck_stop == 0) {
    ck->ck_rep->cr_incomplete++;
    check_problem (ck, ZVOL_CHECK_TREE, 0, 0, 0, "%s: the walk stopped at a "
                   "block that does not read or fails its checks (%s; the "
                   "messages before say which): the rest is not checked, "
                   "and its space shows as leaked", what, strerror (-r));
  }
}

/* ---- 4. naming the owners of space taken twice ---- */

static void
check_name_dups (zv_check_t *ck)
{
  zv_pool_t *p = ck->ck_pool;
  zvol_check_report_t *rep = ck->ck_rep;

  ck->ck_naming = true;
  for (size_t i = 0; i < ck->ck_nmeta; i++)
    check_name (ck, ck->ck_meta[i].co_name, ck->ck_meta[i].co_dva,
                ck->ck_meta[i].co_size);
  for (size_t i = 0; i < p->p_dd.dd_nds; i++)
    (void) zv_import_walk_tree (p, p->p_dd.dd_dss[i], NULL, NULL);
  for (size_t i = 0; i < p->p_freeq.fq_n; i++)
    (void) zv_import_walk_freeq (p, p->p_freeq.fq_ents[i], NULL, NULL);
  ck->ck_naming = false;
  for (size_t i = 0; i < ck->ck_ndup; i++) {
    check_dup_t *cc = &ck->ck_dup[i];
    char names[CHECK_NAMES * (CHECK_NAME + 8)] = "";
    size_t len = 0;

    if (cc->cc_hi == 0) {       /* the other owner was not found again */
      cc->cc_lo = cc->cc_dva;
      cc->cc_hi = cc->cc_dva + cc->cc_size;
    }
    for (unsigned k = 0; k < cc->cc_nnames; k++)
      len += (size_t) snprintf (names + len, sizeof names - len, "%s%s",
                                k == 0 ? "" : k + 1 == cc->cc_nnames
                                ? " and " : ", ", cc->cc_names[k]);
    rep->cr_double++;
    rep->cr_double_bytes += cc->cc_hi - cc->cc_lo;
    check_problem (ck, ZVOL_CHECK_DOUBLE, ZV_DVA_VDEV (cc->cc_lo),
                   ZV_DVA_OFFSET (cc->cc_lo), cc->cc_hi - cc->cc_lo,
                   "device %u offset %" PRIu64 ", %" PRIu64 " bytes: "
                   "doubly allocated, claimed by %s%s",
                   ZV_DVA_VDEV (cc->cc_lo), ZV_DVA_OFFSET (cc->cc_lo),
                   cc->cc_hi - cc->cc_lo, names, cc->cc_nnames < 2
                   ? " and an owner not found again" : "");
  }
}

/* ---- 5. leaks ---- */

static void
check_leak_cb (void *arg, unsigned vdev, uint64_t off, uint64_t len)
{
  zv_check_t *ck = arg;

  ck->ck_rep->cr_leaked++;
  ck->ck_rep->cr_leaked_bytes += len;
  check_problem (ck, ZVOL_CHECK_LEAK, vdev, off, len, "device %u offset %"
                 PRIu64 ", %" PRIu64 " bytes: allocated in the space map, "
                 "owned by nothing (leaked)", vdev, off, len);
}

/* A scrub piece's passes 1 and 2 from its place (check.h): the pool's
 * objects first (only at the start: later pieces' are other blocks, of
 * newer txgs), then the trees in the order of their ids, then the
 * queued frees (again whole in a later piece: they are short). */
static void
check_pieces (zv_check_t *ck, zv_pool_t *p)
{
  zv_check_pos_t *pos = ck->ck_pos;

  if (pos->cp_phase == ZV_CHECK_PHASE_META) {
    check_meta (ck);
    *pos = (zv_check_pos_t) { .cp_phase = ZV_CHECK_PHASE_TREES };
  }
  while (pos->cp_phase == ZV_CHECK_PHASE_TREES && ck->ck_stop == 0) {
    zv_pool_ds_t *next = NULL;

    /* The tree with the lowest id not done (datasets are few). */
    for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
      zv_pool_ds_t *ds = p->p_dd.dd_dss[i];
      if (ds->ds_id >= pos->cp_ds_id
          && (next == NULL || ds->ds_id < next->ds_id))
        next = ds;
    }
    if (next == NULL) {
      *pos = (zv_check_pos_t) { .cp_phase = ZV_CHECK_PHASE_FREEQ };
      break;
    }
    if (next->ds_id != pos->cp_ds_id)
      *pos = (zv_check_pos_t) {
        .cp_phase = ZV_CHECK_PHASE_TREES, .cp_ds_id = next->ds_id,
      };
    /* What the trees before it hold is examined already. */
    ck->ck_done = 0;
    for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
      const zv_pool_ds_t *ds = p->p_dd.dd_dss[i];
      if (ds->ds_id < next->ds_id)
        ck->ck_done += ds->ds_rec.dr_volume.dn_root.bp_fill
          * ds->ds_rec.dr_volume.dn_datablksz;
    }
    ck->ck_done = ZV_MIN (ck->ck_done, ck->ck_total);
    ck->ck_ds_id = next->ds_id;
    ck->ck_skip_off = pos->cp_off;
    check_tree (ck, next);
    ck->ck_skip_off = 0;
    if (ck->ck_stop == 0)
      *pos = (zv_check_pos_t) {
        .cp_phase = ZV_CHECK_PHASE_TREES, .cp_ds_id = next->ds_id + 1,
      };
  }
  for (size_t i = 0; i < p->p_freeq.fq_n && ck->ck_stop == 0; i++)
    check_freeq (ck, p->p_freeq.fq_ents[i]);
  if (pos->cp_phase == ZV_CHECK_PHASE_FREEQ && ck->ck_stop == 0)
    *pos = (zv_check_pos_t) { .cp_phase = ZV_CHECK_PHASE_DONE };
}

/* Passes 1 to 5 on an open pool (an offline import, or a live view). */
static void
check_run (zv_check_t *ck, zv_pool_t *p)
{
  zvol_check_report_t *rep = ck->ck_rep;
  zv_alloc_space_t sp;
  /* A scrub piece that began after the start walked only some trees:
   * what the others own is not in the map, so no leak can be told. */
  bool whole = ck->ck_pos == NULL
    || ck->ck_pos->cp_phase == ZV_CHECK_PHASE_META;

  ck->ck_pool = p;
  ck->ck_buf = zv_buf_alloc (ZV_MAX_BLKSZ);
  zv_alloc_get_space (p->p_spa.spa_alloc, &sp);
  rep->cr_allocated = sp.as_allocated;
  for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
    const zv_dnode_phys_t *dn = &p->p_dd.dd_dss[i]->ds_rec.dr_volume;
    ck->ck_total += dn->dn_root.bp_fill * dn->dn_datablksz;
  }
  for (size_t i = 0; i < p->p_freeq.fq_n; i++)
    ck->ck_total += atomic_load (&p->p_freeq.fq_ents[i]->fe_left);
  if (ck->ck_pos != NULL)
    check_pieces (ck, p);
  else {
    check_meta (ck);
    for (size_t i = 0; i < p->p_dd.dd_nds && ck->ck_stop == 0; i++)
      check_tree (ck, p->p_dd.dd_dss[i]);
    for (size_t i = 0; i < p->p_freeq.fq_n && ck->ck_stop == 0; i++)
      check_freeq (ck, p->p_freeq.fq_ents[i]);
  }
  if (ck->ck_stop == 0 && ck->ck_progress)
    ck->ck_progress (ck->ck_progress_arg, ck->ck_what, ck->ck_total,
                     ck->ck_total);
  /* Live, the log chains move on while the view stays at its txg, and
   * the view's space maps hold no block only a log record owns (the
   * in-place blocks of later txgs are masked out of them: alloc.c,
   * zv_alloc_block_open): so no chain is walked, and a block of one
   * found leaked is a real leak. */
  if (ck->ck_live == NULL)
    zv_import_own_log_blocks (p);
  if (ck->ck_stop == 0 && whole && ck->ck_ndup > 0)
    check_name_dups (ck);
  if (ck->ck_stop == 0 && whole)
    zv_alloc_own_foreach_unowned (p->p_spa.spa_alloc, check_leak_cb, ck);
  zv_buf_free (ck->ck_buf);
}

static void
check_report_reset (zvol_check_report_t *rep)
{
  memset ((char *) rep + offsetof (zvol_check_report_t, cr_trees), 0,
          sizeof *rep - offsetof (zvol_check_report_t, cr_trees));
}

/* Offline: the check, or with repair the scrub (its rewrites of damaged
 * copies are all it writes: scan.c; the import stays read-only). */
static int
check_offline (const zvol_pool_config_t *pub, zvol_check_report_t *rep,
               bool repair)
{
  zv_pool_config_t pc;
  zv_check_t ck = {
    .ck_rep = rep, .ck_repair = repair,
    .ck_what = repair ? "scrub" : "check",
  };
  zv_pool_t *p = NULL;
  int r;

  /* The same layout, field for field (zvol.c asserts it). */
  memcpy (&pc, pub, sizeof pc);
  pc.pc_readonly = true;
  pc.pc_create = false;
  pc.pc_verify_full = false;    /* the check walks every tree itself */
  pc.pc_zil_recover = ZV_ZIL_RECOVER_NONE;
  ck.ck_progress = pc.pc_progress;
  ck.ck_progress_arg = pc.pc_progress_arg;
  check_report_reset (rep);
  r = zv_pool_open_check (&pc, &ck, &p);
  if (r < 0)
    goto out;
  check_run (&ck, p);
  r = zv_pool_close (p);
 out:
  free (ck.ck_meta);
  free (ck.ck_dup);
  return r;
}

/*
 * Live: the hold first (frees after txg T kept back: everything T's
 * uberblock reaches stays as it is), then a view of T on the served
 * pool's own devices, the same passes as offline on it, the view
 * closed, the hold released, whatever happened.  What it may keep back
 * is bounded (check_hold_pct of the space free when it began, and half
 * of what one txg's deferred-free list can record), checked with the
 * cancel descriptors every 64 blocks.
 */
int
zvol_pool_check (const zvol_pool_config_t *pub, zvol_check_report_t *rep)
{
  return check_offline (pub, rep, false);
}

int
zvol_pool_scrub (const zvol_pool_config_t *pub, zvol_check_report_t *rep)
{
  return check_offline (pub, rep, true);
}

static int
check_live (zvol_pool_t *live, zvol_check_report_t *rep,
            const int cancel_fd[2],
            void (*progress) (void *arg, const char *what,
                              uint64_t done, uint64_t total),
            void *progress_arg, bool repair, const _Atomic bool *stop,
            zv_check_pos_t *pos)
{
  static const int none[2] = { -1, -1 };
  zv_alloc_t *a = live->p_spa.spa_alloc;
  zv_check_t ck = {
    .ck_rep = rep, .ck_live = live, .ck_repair = repair,
    .ck_stop_flag = stop, .ck_pos = pos,
    .ck_what = repair ? "scrub" : "check",
    .ck_cancel_fd = cancel_fd ? cancel_fd : none,
    .ck_progress = progress, .ck_progress_arg = progress_arg,
  };
  zv_alloc_space_t sp;
  zv_pool_t *view = NULL;
  uint64_t txg;
  int r;

  check_report_reset (rep);
  if (live->p_readonly) {
    /* Nothing syncs: the pool is its own view. */
    zv_error ("pool '%s' is imported read-only here: check it offline "
              "(zvoladm check with the server stopped)", live->p_name);
    return -EROFS;
  }
  do {
    txg = zv_txg_last_synced (live->p_txg);
    r = zv_alloc_hold_begin (a, txg);
  } while (r == -EAGAIN);
  if (r < 0) {
    zv_error ("pool '%s': another check is running (a check or a scrub); "
              "one at a time", live->p_name);
    return r;
  }
  zv_alloc_get_space (a, &sp);
  ck.ck_hold_max = (sp.as_total - ZV_MIN (sp.as_allocated, sp.as_total))
    / 100 * zv_check_hold_pct;
  ck.ck_hold_max_n = ZV_DEFER_NBLOCKS * ZV_DEFER_PER_BLK / 2;
  r = zv_pool_open_view (live, txg, &ck, &view);
  if (r == 0) {
    check_run (&ck, view);
    r = zv_pool_close (view);
    if (r == 0)
      r = ck.ck_stop;
  }
  else
    zv_error ("pool '%s': the view of txg %" PRIu64 " does not import: %s",
              live->p_name, txg, strerror (-r));
  zv_alloc_hold_end (a);
  free (ck.ck_meta);
  free (ck.ck_dup);
  return r;
}

int
zvol_pool_check_live (zvol_pool_t *live, zvol_check_report_t *rep,
                      const int cancel_fd[2],
                      void (*progress) (void *arg, const char *what,
                                        uint64_t done, uint64_t total),
                      void *progress_arg)
{
  return check_live (live, rep, cancel_fd, progress, progress_arg, false,
                     NULL, NULL);
}

int
zvol_pool_scrub_live (zvol_pool_t *live, zvol_check_report_t *rep,
                      const int cancel_fd[2],
                      void (*progress) (void *arg, const char *what,
                                        uint64_t done, uint64_t total),
                      void *progress_arg)
{
  return check_live (live, rep, cancel_fd, progress, progress_arg, true,
                     NULL, NULL);
}

int
zv_check_scrub_piece (zv_pool_t *live, zvol_check_report_t *rep,
                      const _Atomic bool *stop,
                      void (*progress) (void *arg, const char *what,
                                        uint64_t done, uint64_t total),
                      void *progress_arg, zv_check_pos_t *pos)
{
  ZV_VERIFY (pos->cp_phase < ZV_CHECK_PHASE_DONE);
  return check_live (live, rep, NULL, progress, progress_arg, true, stop,
                     pos);
}

/* ---- tunables (tunable.h) ---- */
const zv_tunable_t zv_check_tunable_table[] = {
  { .tn_name = "check_hold_pct", .tn_module = "check",
    ZV_TUNABLE_VAR_UINT (zv_check_hold_pct),
    .tn_default = 50, .tn_min = 1, .tn_max = 90,
    .tn_unit = ZV_TUNABLE_UNIT_PCT, .tn_when = ZV_TUNABLE_LIVE,
    .tn_reader = "the live check (zvoladm check on a served pool)",
    .tn_desc = "A live check keeps the pool's frees back while it runs "
    "(so that the txg it walks stays on disk); when what it keeps passes "
    "this share of the space that was free when it began, it stops with "
    "an error and gives the space back." },
  ZV_TUNABLE_END
};
