/*
 * test_scrub.c: the scrub (zvol_pool_scrub, zvol_pool_scrub_live:
 * check.c's walk with scan.c's repair) on a pool with copies damaged at
 * random places, data and metadata:
 *
 *   - live: metadata copies (indirect blocks of the volume and of its
 *     snapshot, the objset, the dataset directory, the space maps, the
 *     deferred-free lists: each with a ditto copy) and data blocks (one
 *     copy) of both trees flipped on the device.  Every read returns
 *     the right bytes except the damaged data blocks' (EIO).  A check
 *     and a scrub with scan_repair off repair nothing; the scrub
 *     repairs every metadata copy (each read back good from the
 *     device), and names each data block it could not repair with its
 *     volume or snapshot and offset; a second scrub repairs nothing
 *     more; once the lost blocks are written again and the snapshot
 *     destroyed, a scrub finds nothing;
 *   - offline: the same damage, metadata only, on a closed pool: the
 *     offline scrub repairs all of it, and the offline check then finds
 *     the pool clean and the volume reads back whole.
 */
#include <config.h>

#include "testlib.h"
#include "pool.h"
#include "pool_impl.h"
#include "flat.h"
#include "import.h"

#define SC_DEV_SIZE (256 * MiB)
#define SC_VOLSIZE (64 * MiB)
#define SC_SPAN (8 * MiB)               /* what is written */
#define SC_META 8                       /* metadata copies damaged */
#define SC_DATA 4                       /* data blocks damaged */
#define SC_MAXDS 3

/* Every block of the pool, each once, with whose it is. */
typedef struct sc_blk {
  zv_blkptr_t sb_bp;
  int sb_ds;                            /* -1: a pool object */
  unsigned sb_level;
  uint64_t sb_blkid;
} sc_blk_t;

typedef struct sc_set {
  sc_blk_t *ss_blk;
  size_t ss_n, ss_cap;
  unsigned ss_nds;
  char ss_name[SC_MAXDS][2 * ZV_NAME_MAX + 24]; /* as the check names it */
  char ss_open[SC_MAXDS][2 * ZV_NAME_MAX + 2];  /* as zvol_open takes it */
  uint32_t ss_blksz[SC_MAXDS];
  /* A full walk of each tree: the first copy of each data block. */
  uint64_t ss_dva0[SC_MAXDS][SC_SPAN / (4 * KiB)];
} sc_set_t;

static void
sc_add (sc_set_t *ss, const zv_blkptr_t *bp, int ds, unsigned level,
        uint64_t blkid)
{
  for (size_t i = 0; i < ss->ss_n; i++)
    if (ss->ss_blk[i].sb_bp.bp_dva[0] == bp->bp_dva[0])
      return;
  if (ss->ss_n == ss->ss_cap) {
    ss->ss_cap = ss->ss_cap ? 2 * ss->ss_cap : 256;
    ss->ss_blk = realloc (ss->ss_blk, ss->ss_cap * sizeof *ss->ss_blk);
    assert_non_null (ss->ss_blk);
  }
  ss->ss_blk[ss->ss_n++] = (sc_blk_t) {
    .sb_bp = *bp, .sb_ds = ds, .sb_level = level, .sb_blkid = blkid,
  };
}

/* A tree from bp down: blocks born after min_birth are the tree's own
 * (its snapshot's otherwise, walked there, as the check walks them);
 * 'full' records every data block's first copy whoever's it is. */
static void
sc_walk (sc_set_t *ss, zv_spa_t *spa, const zv_blkptr_t *bp, int ds,
         unsigned level, uint64_t blkid, uint64_t min_birth, bool full)
{
  if (zv_bp_is_hole (bp) || (!full && bp->bp_birth <= min_birth))
    return;
  if (full && level == 0) {
    if (blkid * ss->ss_blksz[ds] < SC_SPAN)
      ss->ss_dva0[ds][blkid] = bp->bp_dva[0];
    return;
  }
  if (!full)
    sc_add (ss, bp, ds, level, blkid);
  if (level > 0) {
    uint8_t *buf = zv_buf_alloc (ZV_MAX_BLKSZ);
    const zv_blkptr_t *e = (const zv_blkptr_t *) (void *) buf + 1;

    assert_int_equal (zv_zio_read (spa, bp, buf, "test"), 0);
    for (uint64_t i = 0; i < ZV_INDIRECT_FANOUT; i++)
      sc_walk (ss, spa, &e[i], ds, level - 1, blkid * ZV_INDIRECT_FANOUT + i,
               min_birth, full);
    zv_buf_free (buf);
  }
}

static void
sc_flat (sc_set_t *ss, const zv_flat_t *fl)
{
  for (unsigned l = 0; l < fl->fl_nlevels; l++)
    for (uint64_t i = 0; i < fl->fl_len[l]; i++)
      if (!zv_bp_is_hole (&fl->fl_bps[l][i]))
        sc_add (ss, &fl->fl_bps[l][i], -1, l, i);
}

/* Every block of p as of its last sync (nothing may write meanwhile). */
static void
sc_collect (zvol_pool_t *p, sc_set_t *ss)
{
  zv_spa_t *spa = &p->p_spa;

  memset (ss, 0, sizeof *ss);
  sc_add (ss, &p->p_objset_bp, -1, 0, 0);
  sc_flat (ss, &p->p_dd.dd_flat);
  for (unsigned d = 0; d < spa->spa_ndevs; d++)
    sc_flat (ss, &p->p_spacemap[d]);
  for (unsigned i = 0; i < 2; i++)
    sc_flat (ss, &p->p_defer[i]);
  assert_true (p->p_dd.dd_nds <= SC_MAXDS);
  for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
    zv_pool_ds_t *ds = p->p_dd.dd_dss[i];
    const zv_dnode_phys_t *dn = &ds->ds_rec.dr_volume;
    int k = (int) ss->ss_nds++;

    if (ds->ds_kind == ZV_DS_KIND_SNAPSHOT) {
      snprintf (ss->ss_name[k], sizeof ss->ss_name[k], "snapshot '%s@%s'",
                ds->ds_parent->ds_name, ds->ds_name);
      snprintf (ss->ss_open[k], sizeof ss->ss_open[k], "%s@%s",
                ds->ds_parent->ds_name, ds->ds_name);
    }
    else {
      snprintf (ss->ss_name[k], sizeof ss->ss_name[k], "volume '%s'",
                ds->ds_name);
      snprintf (ss->ss_open[k], sizeof ss->ss_open[k], "%s", ds->ds_name);
    }
    ss->ss_blksz[k] = dn->dn_datablksz;
    assert_true (SC_SPAN / dn->dn_datablksz
                 <= sizeof ss->ss_dva0[k] / sizeof ss->ss_dva0[k][0]);
    sc_walk (ss, spa, &dn->dn_root, k, dn->dn_nlevels - 1u, 0,
             zv_import_ds_min_birth (ds), false);
    sc_walk (ss, spa, &dn->dn_root, k, dn->dn_nlevels - 1u, 0, 0, true);
  }
}

/* ---- the damage ---- */

typedef struct sc_damage {
  sc_blk_t sd_blk;
  unsigned sd_copy;
} sc_damage_t;

/* Flip a byte at a random place of one copy of nmeta random metadata
 * blocks (two copies each: one is left good) and of ndata random data
 * blocks (one copy), the first ones one of each tree.  Returns how
 * many. */
static size_t
sc_damage_in (const char *dev, const sc_set_t *ss, int only_ds,
              unsigned nmeta, unsigned ndata, uint64_t *seed,
              sc_damage_t *out)
{
  bool *taken = calloc (ss->ss_n, sizeof *taken);
  size_t n = 0;
  unsigned ndata0 = ndata;

  assert_non_null (taken);
  for (unsigned tries = 0; (nmeta > 0 || ndata > 0) && tries < 1000000;
       tries++) {
    size_t i = tl_rand (seed) % ss->ss_n;
    const sc_blk_t *b = &ss->ss_blk[i];
    bool data = b->sb_ds >= 0 && b->sb_level == 0;
    unsigned done = ndata0 - ndata;

    if (taken[i] || (data ? ndata == 0 : nmeta == 0)
        || (only_ds >= 0 && b->sb_ds != only_ds))
      continue;
    if (data && only_ds < 0 && done < ss->ss_nds && b->sb_ds != (int) done)
      continue;
    assert_int_equal (b->sb_bp.bp_ncopies, data ? 1 : 2);
    if (data)
      ndata--;
    else
      nmeta--;
    taken[i] = true;
    out[n].sd_blk = *b;
    out[n].sd_copy = data ? 0 : (unsigned) (tl_rand (seed) % 2);
    assert_int_equal (tl_file_flip (dev, ZV_DVA_OFFSET
                                    (b->sb_bp.bp_dva[out[n].sd_copy])
                                    + tl_rand (seed) % b->sb_bp.bp_psize),
                      0);
    n++;
  }
  assert_int_equal (nmeta + ndata, 0);
  free (taken);
  return n;
}

static size_t
sc_damage (const char *dev, const sc_set_t *ss, unsigned nmeta,
           unsigned ndata, uint64_t *seed, sc_damage_t *out)
{
  return sc_damage_in (dev, ss, -1, nmeta, ndata, seed, out);
}

/* Does that copy verify on the device now? */
static bool
sc_copy_good (zvol_pool_t *p, const sc_damage_t *d)
{
  uint8_t *buf = zv_buf_alloc (ZV_MAX_BLKSZ);
  bool ok = zv_zio_read_copy (&p->p_spa, &d->sd_blk.sb_bp, d->sd_copy, buf)
    == 0;

  zv_buf_free (buf);
  return ok;
}

static bool
sc_data_damaged (const sc_damage_t *dm, size_t n, uint64_t dva0)
{
  for (size_t i = 0; i < n; i++)
    if (dm[i].sd_blk.sb_level == 0 && dm[i].sd_blk.sb_ds >= 0
        && dm[i].sd_blk.sb_bp.bp_dva[0] == dva0)
      return true;
  return false;
}

/* Every block of every tree reads as written: seed(ds, off), or EIO
 * where its data block is damaged (its only copy). */
static void
sc_reads (zvol_pool_t *p, const sc_set_t *ss, const sc_damage_t *dm,
          size_t n, uint64_t (*seed) (unsigned ds, uint64_t off))
{
  for (unsigned k = 0; k < ss->ss_nds; k++) {
    bool snap = strchr (ss->ss_open[k], '@') != NULL;
    zvol_t *zv = snap ? tl_ds_open (p, ss->ss_open[k]) : tl_vol (p);
    uint32_t bs = ss->ss_blksz[k];
    uint8_t *buf = malloc (bs);

    assert_non_null (buf);
    for (uint64_t off = 0; off < SC_SPAN; off += bs) {
      int r = zvol_read (zv, buf, off, bs);

      /* Its only copy damaged: EIO, or the right bytes if the cache
       * still holds them; never others. */
      if (sc_data_damaged (dm, n, ss->ss_dva0[k][off / bs]) && r != 0) {
        if (r != -EIO)
          fail_msg ("%s offset %" PRIu64 ": its only copy is damaged, "
                    "the read gave %d", ss->ss_open[k], off, r);
        continue;
      }
      if (r != 0)
        fail_msg ("%s offset %" PRIu64 ": read %d", ss->ss_open[k], off, r);
      if (tl_pat_check (buf, off, bs, seed (k, off)) >= 0)
        fail_msg ("%s offset %" PRIu64 ": wrong bytes", ss->ss_open[k], off);
    }
    free (buf);
    if (snap)
      assert_int_equal (zvol_close (zv), 0);
  }
}

/* ---- what a scrub said ---- */

typedef struct sc_lost {
  char sl_ds[2 * ZV_NAME_MAX + 24];
  uint64_t sl_off, sl_len;
} sc_lost_t;

typedef struct sc_seen {
  sc_lost_t sn_lost[64];
  unsigned sn_nlost;
  unsigned sn_repaired_msgs;
  unsigned sn_progress;
  const char *sn_what;
} sc_seen_t;

static void
sc_problem (void *arg, const zvol_check_problem_t *cp)
{
  sc_seen_t *sn = arg;

  print_message ("  %s\n", cp->cp_msg);
  if (cp->cp_kind == ZVOL_CHECK_LOST && sn->sn_nlost < 64) {
    sc_lost_t *l = &sn->sn_lost[sn->sn_nlost++];
    snprintf (l->sl_ds, sizeof l->sl_ds, "%s",
              cp->cp_dataset ? cp->cp_dataset : "");
    l->sl_off = cp->cp_ds_offset;
    l->sl_len = cp->cp_ds_length;
  }
  if (cp->cp_repair > 0) {
    assert_non_null (strstr (cp->cp_msg, ": repaired"));
    sn->sn_repaired_msgs++;
  }
}

static void
sc_progress (void *arg, const char *what, uint64_t done, uint64_t total)
{
  sc_seen_t *sn = arg;

  assert_string_equal (what, sn->sn_what);
  assert_true (done <= total);
  sn->sn_progress++;
}

enum sc_how { SC_CHECK, SC_SCRUB };

static void
sc_run_live (zvol_pool_t *p, enum sc_how how, zvol_check_report_t *rep,
             sc_seen_t *sn)
{
  memset (sn, 0, sizeof *sn);
  memset (rep, 0, sizeof *rep);
  rep->cr_problem = sc_problem;
  rep->cr_problem_arg = sn;
  sn->sn_what = how == SC_SCRUB ? "scrub" : "check";
  print_message ("live %s:\n", sn->sn_what);
  assert_int_equal ((how == SC_SCRUB ? zvol_pool_scrub_live
                     : zvol_pool_check_live) (p, rep, NULL, sc_progress, sn),
                    0);
  assert_true (sn->sn_progress > 0);
}

static void
sc_tunable (const char *name, const char *value)
{
  char err[256];

  assert_int_equal (zvol_tunable_set (name, value, err, sizeof err), 0);
}

/* What each tree was written with: seed 1, and in the volume seed 2
 * over [2M, 4M) (written after the snapshot was taken). */
static sc_set_t *sc_cur;

static uint64_t
sc_seed_of (unsigned ds, uint64_t off)
{
  bool vol = strchr (sc_cur->ss_open[ds], '@') == NULL;

  return vol && off >= 2 * MiB && off < 4 * MiB ? 2 : 1;
}

static void
test_scrub_live (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "sc-live");
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  sc_set_t *ss = calloc (1, sizeof *ss);
  sc_damage_t dm[SC_META + SC_DATA];
  zvol_check_report_t rep;
  sc_seen_t sn;
  uint64_t seed = tl_seed ("scrub-live");
  size_t n, nmeta_pool = 0;

  (void) state;
  assert_non_null (ss);
  assert_int_equal (tl_sparse_file (dev, SC_DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, SC_VOLSIZE, true);
  p = tl_pool_open_ok (&pc);
  for (uint64_t off = 0; off < SC_SPAN; off += 1 * MiB)
    tl_vol_write (tl_vol (p), NULL, off, 1 * MiB, 1, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  assert_int_equal (zvol_snapshot_create (p, "zvol@s1"), 0);
  for (uint64_t off = 2 * MiB; off < 4 * MiB; off += 1 * MiB)
    tl_vol_write (tl_vol (p), NULL, off, 1 * MiB, 2, 0);
  assert_int_equal (zv_pool_sync (p), 0);

  sc_collect (p, ss);
  sc_cur = ss;
  assert_int_equal (ss->ss_nds, 2);
  n = sc_damage (dev, ss, SC_META, SC_DATA, &seed, dm);
  for (size_t i = 0; i < n; i++) {
    print_message ("damaged: %s level %u block %" PRIu64 " copy %u\n",
                   dm[i].sd_blk.sb_ds < 0 ? "pool object"
                   : ss->ss_name[dm[i].sd_blk.sb_ds], dm[i].sd_blk.sb_level,
                   dm[i].sd_blk.sb_blkid, dm[i].sd_copy + 1);
    nmeta_pool += dm[i].sd_blk.sb_ds < 0;
    assert_false (sc_copy_good (p, &dm[i]));
  }
  /* Reads are right wherever a good copy is left. */
  tl_log_reset (true);
  sc_reads (p, ss, dm, n, sc_seed_of);

  /* A check, and a scrub with repair off: all found, nothing repaired. */
  sc_run_live (p, SC_CHECK, &rep, &sn);
  assert_int_equal (rep.cr_cksum_errors, SC_META + SC_DATA);
  assert_int_equal (rep.cr_lost_blocks, SC_DATA);
  assert_int_equal (rep.cr_repaired, 0);
  sc_tunable ("scan_repair", "off");
  sc_run_live (p, SC_SCRUB, &rep, &sn);
  sc_tunable ("scan_repair", "on");
  assert_int_equal (rep.cr_cksum_errors, SC_META + SC_DATA);
  assert_int_equal (rep.cr_repaired, 0);
  for (size_t i = 0; i < n; i++)
    assert_false (sc_copy_good (p, &dm[i]));

  /* The scrub: every metadata copy repaired, each data block named. */
  sc_run_live (p, SC_SCRUB, &rep, &sn);
  assert_int_equal (rep.cr_cksum_errors, SC_META + SC_DATA);
  assert_int_equal (rep.cr_repaired, SC_META);
  assert_int_equal (sn.sn_repaired_msgs, SC_META);
  assert_int_equal (rep.cr_repair_failed, 0);
  assert_int_equal (rep.cr_lost_blocks, SC_DATA);
  assert_int_equal (rep.cr_problems, SC_META + 2 * SC_DATA);
  assert_int_equal (sn.sn_nlost, SC_DATA);
  for (size_t i = 0; i < n; i++) {
    const sc_blk_t *b = &dm[i].sd_blk;
    bool named = false;

    if (b->sb_ds < 0 || b->sb_level > 0) {
      if (!sc_copy_good (p, &dm[i]))
        fail_msg ("a damaged metadata copy was not repaired on the device");
      continue;
    }
    assert_false (sc_copy_good (p, &dm[i]));
    for (unsigned k = 0; k < sn.sn_nlost; k++)
      named |= strcmp (sn.sn_lost[k].sl_ds, ss->ss_name[b->sb_ds]) == 0
        && sn.sn_lost[k].sl_off == b->sb_blkid * ss->ss_blksz[b->sb_ds]
        && sn.sn_lost[k].sl_len == ss->ss_blksz[b->sb_ds];
    if (!named)
      fail_msg ("%s offset %" PRIu64 ": lost, and not named so",
                ss->ss_name[b->sb_ds], b->sb_blkid * ss->ss_blksz[b->sb_ds]);
  }
  sc_reads (p, ss, dm, n, sc_seed_of);

  /* Again: only the lost data blocks, nothing more to repair. */
  sc_run_live (p, SC_SCRUB, &rep, &sn);
  assert_int_equal (rep.cr_cksum_errors, SC_DATA);
  assert_int_equal (rep.cr_repaired, 0);
  assert_int_equal (rep.cr_lost_blocks, SC_DATA);

  /* The lost blocks written again, the snapshot destroyed: clean. */
  for (size_t i = 0; i < n; i++) {
    const sc_blk_t *b = &dm[i].sd_blk;
    uint32_t bs;

    if (b->sb_ds < 0 || b->sb_level > 0)
      continue;
    bs = ss->ss_blksz[b->sb_ds];
    tl_vol_write (tl_vol (p), NULL, b->sb_blkid * bs, bs, 3, 0);
  }
  assert_int_equal (zvol_volume_destroy (p, "zvol@s1"), 0);
  assert_int_equal (zvol_pool_wait_freeing (p, NULL, NULL, NULL), 0);
  assert_int_equal (zv_pool_sync (p), 0);
  sc_run_live (p, SC_SCRUB, &rep, &sn);
  assert_int_equal (rep.cr_problems, 0);
  assert_int_equal (rep.cr_repaired, 0);
  tl_log_reset (false);
  assert_int_equal (tl_pool_close (p), 0);
  tl_check_clean (dev);
  free (ss->ss_blk);
  free (ss);
  unlink (dev);
}

/* Offline: metadata copies damaged on a closed pool, repaired by the
 * offline scrub; the offline check then finds nothing. */
static void
test_scrub_offline (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "sc-off");
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  sc_set_t *ss = calloc (1, sizeof *ss);
  sc_damage_t *dm;
  zvol_check_report_t rep;
  sc_seen_t sn;
  uint64_t seed = tl_seed ("scrub-offline");
  size_t n, nmeta = 0;

  (void) state;
  assert_non_null (ss);
  assert_int_equal (tl_sparse_file (dev, SC_DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, SC_VOLSIZE, true);
  p = tl_pool_open_ok (&pc);
  for (uint64_t off = 0; off < SC_SPAN; off += 1 * MiB)
    tl_vol_write (tl_vol (p), NULL, off, 1 * MiB, 1, 0);
  assert_int_equal (tl_pool_close (p), 0);
  /* The blocks as imported read-only: nothing moves them. */
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  pc.pc_readonly = true;
  p = tl_pool_open_ok (&pc);
  sc_collect (p, ss);
  /* Every metadata block, one copy or the other. */
  for (size_t i = 0; i < ss->ss_n; i++)
    nmeta += ss->ss_blk[i].sb_ds < 0 || ss->ss_blk[i].sb_level > 0;
  print_message ("%zu metadata blocks, one copy of each damaged\n", nmeta);
  assert_true (nmeta >= SC_META);
  dm = calloc (nmeta, sizeof *dm);
  assert_non_null (dm);
  n = sc_damage (dev, ss, (unsigned) nmeta, 0, &seed, dm);
  for (size_t i = 0; i < n; i++)
    assert_false (sc_copy_good (p, &dm[i]));
  assert_int_equal (tl_pool_close (p), 0);

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  memset (&rep, 0, sizeof rep);
  memset (&sn, 0, sizeof sn);
  rep.cr_problem = sc_problem;
  rep.cr_problem_arg = &sn;
  tl_log_reset (true);
  assert_int_equal (zvol_pool_check (&pc, &rep), 0);
  assert_int_equal (rep.cr_cksum_errors, nmeta);
  assert_int_equal (rep.cr_repaired, 0);
  assert_int_equal (zvol_pool_scrub (&pc, &rep), 0);
  assert_int_equal (rep.cr_cksum_errors, nmeta);
  assert_int_equal (rep.cr_repaired, nmeta);
  assert_int_equal (rep.cr_lost_blocks, 0);
  assert_int_equal (rep.cr_problems, nmeta);
  tl_log_reset (false);
  tl_check_clean (dev);
  assert_int_equal (zvol_pool_scrub (&pc, &rep), 0);
  assert_int_equal (rep.cr_problems, 0);

  pc.pc_readonly = true;
  p = tl_pool_open_ok (&pc);
  for (size_t i = 0; i < n; i++)
    assert_true (sc_copy_good (p, &dm[i]));
  tl_vol_check (tl_vol (p), 0, SC_SPAN, 1);
  assert_int_equal (tl_pool_close (p), 0);
  free (dm);
  free (ss->ss_blk);
  free (ss);
  unlink (dev);
}

/* ---- the background scrub (scrub.c) ---- */

/* Reads slowed down, so that a scrub is still running when the test
 * pauses or cancels it. */
static int
sc_slow (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
         uint32_t len)
{
  struct timespec d = { 0, 300 * 1000 };

  (void) arg; (void) dev; (void) off; (void) len;
  if (op == ZV_DEV_READ)
    nanosleep (&d, NULL);
  return 0;
}

static zvol_scrub_status_t
sc_status (zvol_pool_t *p)
{
  zvol_scrub_status_t st;

  zvol_scrub_get_status (p, &st);
  return st;
}

/* Until the running scrub has examined more than share/100 of the data
 * (at most 20 s). */
static void
sc_wait_examined (zvol_pool_t *p, unsigned share)
{
  for (unsigned i = 0; i < 20000; i++) {
    zvol_scrub_status_t st = sc_status (p);
    if (st.ss_state != ZVOL_SCRUB_SCANNING
        || st.ss_examined > st.ss_total / 100 * share)
      break;
    usleep (1000);
  }
  assert_int_equal (sc_status (p).ss_state, ZVOL_SCRUB_SCANNING);
}

/* The pool of test_scrub_live, damaged the same way. */
static zvol_pool_t *
sc_damaged_pool (const char *dev, sc_set_t *ss, sc_damage_t *dm, size_t *np,
                 uint64_t *seed)
{
  zvol_pool_config_t pc;
  zvol_pool_t *p;

  assert_int_equal (tl_sparse_file (dev, SC_DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, SC_VOLSIZE, true);
  p = tl_pool_open_ok (&pc);
  for (uint64_t off = 0; off < SC_SPAN; off += 1 * MiB)
    tl_vol_write (tl_vol (p), NULL, off, 1 * MiB, 1, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  assert_int_equal (zvol_snapshot_create (p, "zvol@s1"), 0);
  for (uint64_t off = 2 * MiB; off < 4 * MiB; off += 1 * MiB)
    tl_vol_write (tl_vol (p), NULL, off, 1 * MiB, 2, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  sc_collect (p, ss);
  sc_cur = ss;
  *np = sc_damage (dev, ss, SC_META, SC_DATA, seed, dm);
  return p;
}

/* The damaged data blocks are the status's damaged list, by dataset
 * and offset. */
static void
sc_expect_damaged (const zvol_scrub_status_t *st, const sc_set_t *ss,
                   const sc_damage_t *dm, size_t n)
{
  unsigned ndata = 0;

  for (size_t i = 0; i < n; i++) {
    const sc_blk_t *b = &dm[i].sd_blk;
    bool named = false;

    if (b->sb_ds < 0 || b->sb_level > 0)
      continue;
    ndata++;
    for (uint64_t k = 0; k < st->ss_ndamaged; k++)
      named |= strcmp (st->ss_damaged[k].sd_dataset, ss->ss_name[b->sb_ds])
        == 0 && st->ss_damaged[k].sd_offset
        == b->sb_blkid * ss->ss_blksz[b->sb_ds];
    if (!named)
      fail_msg ("%s offset %" PRIu64 ": not in the damaged list",
                ss->ss_name[b->sb_ds], b->sb_blkid * ss->ss_blksz[b->sb_ds]);
  }
  assert_int_equal (st->ss_ndamaged, ndata);
}

/* Started, waited for: every copy repaired, the data blocks listed;
 * paused half way (its place kept: nothing examined meanwhile) and
 * resumed: each damaged copy found once over both runs; canceled, and
 * started again from zero; refusals (EBUSY, ENOENT); a close while it
 * scans stops it. */
static void
test_scrub_background (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "sc-bg");
  sc_set_t *ss = calloc (1, sizeof *ss);
  sc_damage_t dm[SC_META + SC_DATA];
  uint64_t seed = tl_seed ("scrub-bg");
  zvol_scrub_status_t st;
  zvol_pool_t *p;
  size_t n;

  (void) state;
  assert_non_null (ss);
  p = sc_damaged_pool (dev, ss, dm, &n, &seed);
  tl_log_reset (true);
  st = sc_status (p);
  assert_int_equal (st.ss_state, ZVOL_SCRUB_NONE);
  assert_int_equal (zvol_scrub_pause (p), -ENOENT);
  assert_int_equal (zvol_scrub_cancel (p), -ENOENT);

  /* Paused and resumed. */
  zv_dev_set_fault (p->p_spa.spa_devs[0], sc_slow, NULL);
  assert_int_equal (zvol_scrub_start (p), 0);
  assert_int_equal (zvol_scrub_start (p), -EBUSY);
  sc_wait_examined (p, 40);
  assert_int_equal (zvol_scrub_pause (p), 0);
  st = sc_status (p);
  assert_int_equal (st.ss_state, ZVOL_SCRUB_PAUSED);
  assert_true (st.ss_examined > 0 && st.ss_examined < st.ss_total);
  print_message ("paused at %" PRIu64 " of %" PRIu64 ", %" PRIu64
                 " repaired\n", st.ss_examined, st.ss_total,
                 st.ss_repaired);
  usleep (100 * 1000);
  assert_int_equal (sc_status (p).ss_examined, st.ss_examined);
  zv_dev_set_fault (p->p_spa.spa_devs[0], NULL, NULL);
  assert_int_equal (zvol_scrub_start (p), 1);        /* resumed */
  assert_int_equal (zvol_scrub_wait (p, NULL, NULL, NULL), 0);
  st = sc_status (p);
  assert_int_equal (st.ss_state, ZVOL_SCRUB_FINISHED);
  assert_int_equal (st.ss_examined, st.ss_total);
  assert_true (st.ss_pieces >= 2);
  assert_int_equal (st.ss_cksum_errors, SC_META + SC_DATA);
  assert_int_equal (st.ss_repaired, SC_META);
  assert_int_equal (st.ss_repair_failed, 0);
  assert_int_equal (st.ss_lost, SC_DATA);
  sc_expect_damaged (&st, ss, dm, n);
  for (size_t i = 0; i < n; i++)
    if (dm[i].sd_blk.sb_ds < 0 || dm[i].sd_blk.sb_level > 0)
      assert_true (sc_copy_good (p, &dm[i]));
  assert_int_equal (zvol_scrub_pause (p), -ENOENT);

  /* Again: only the lost blocks. */
  assert_int_equal (zvol_scrub_start (p), 0);
  assert_int_equal (zvol_scrub_wait (p, NULL, NULL, NULL), 0);
  st = sc_status (p);
  assert_int_equal (st.ss_state, ZVOL_SCRUB_FINISHED);
  assert_int_equal (st.ss_cksum_errors, SC_DATA);
  assert_int_equal (st.ss_repaired, 0);
  sc_expect_damaged (&st, ss, dm, n);

  /* Canceled: a start after it begins from zero. */
  zv_dev_set_fault (p->p_spa.spa_devs[0], sc_slow, NULL);
  assert_int_equal (zvol_scrub_start (p), 0);
  sc_wait_examined (p, 0);
  assert_int_equal (zvol_scrub_cancel (p), 0);
  st = sc_status (p);
  assert_int_equal (st.ss_state, ZVOL_SCRUB_CANCELED);
  assert_int_equal (st.ss_error, 0);
  assert_int_equal (zvol_scrub_cancel (p), -ENOENT);
  assert_int_equal (zvol_scrub_start (p), 0);        /* not resumed */
  sc_wait_examined (p, 0);
  assert_int_equal (zvol_scrub_pause (p), 0);
  assert_int_equal (zvol_scrub_cancel (p), 0);       /* a paused one */
  assert_int_equal (sc_status (p).ss_state, ZVOL_SCRUB_CANCELED);

  /* The pool closed while one scans: it stops. */
  assert_int_equal (zvol_scrub_start (p), 0);
  sc_wait_examined (p, 0);
  zv_dev_set_fault (p->p_spa.spa_devs[0], NULL, NULL);
  tl_log_reset (false);
  assert_int_equal (tl_pool_close (p), 0);
  free (ss->ss_blk);
  free (ss);
  unlink (dev);
}

/* The pool closed while a scrub scans (paced by scan_rate_max, so that
 * it is half way): imported again, it goes on by itself from the place
 * the objset's record kept, and over both runs finds each damaged copy
 * exactly once. */
static void
test_scrub_restart (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "sc-restart");
  sc_set_t *ss = calloc (1, sizeof *ss);
  sc_damage_t dm[SC_META + SC_DATA];
  uint64_t seed = tl_seed ("scrub-restart");
  zvol_scrub_status_t st;
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  uint64_t at_close;
  size_t n;

  (void) state;
  assert_non_null (ss);
  p = sc_damaged_pool (dev, ss, dm, &n, &seed);
  /* Served: the txg thread syncs the scrub's place as it goes. */
  assert_int_equal (zvol_pool_start (p), 0);
  tl_log_reset (true);
  sc_tunable ("scan_rate_max", "8M");
  assert_int_equal (zvol_scrub_start (p), 0);
  sc_wait_examined (p, 40);
  at_close = sc_status (p).ss_examined;
  assert_int_equal (tl_pool_close (p), 0);

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  p = tl_pool_open_ok (&pc);
  assert_int_equal (zvol_pool_start (p), 0);
  st = sc_status (p);
  print_message ("closed at %" PRIu64 ", resumed at %" PRIu64 " of %" PRIu64
                 "\n", at_close, st.ss_examined, st.ss_total);
  assert_true (st.ss_state == ZVOL_SCRUB_SCANNING
               || st.ss_state == ZVOL_SCRUB_FINISHED);
  assert_true (st.ss_examined > 0 && st.ss_examined <= at_close);
  sc_tunable ("scan_rate_max", "0");
  assert_int_equal (zvol_scrub_wait (p, NULL, NULL, NULL), 0);
  st = sc_status (p);
  assert_int_equal (st.ss_state, ZVOL_SCRUB_FINISHED);
  assert_int_equal (st.ss_cksum_errors, SC_META + SC_DATA);
  assert_int_equal (st.ss_repaired, SC_META);
  assert_int_equal (st.ss_lost, SC_DATA);
  for (size_t i = 0; i < n; i++)
    if (dm[i].sd_blk.sb_ds < 0 || dm[i].sd_blk.sb_level > 0)
      assert_true (sc_copy_good (p, &dm[i]));
  /* Finished: the record is gone, nothing resumes. */
  assert_int_equal (zv_pool_sync (p), 0);
  assert_int_equal (tl_pool_close (p), 0);
  p = tl_pool_open_ok (&pc);
  assert_int_equal (zvol_pool_start (p), 0);
  assert_int_equal (sc_status (p).ss_state, ZVOL_SCRUB_NONE);
  tl_log_reset (false);
  assert_int_equal (tl_pool_close (p), 0);
  free (ss->ss_blk);
  free (ss);
  unlink (dev);
}

/* While the intent log writes for clients (spa_sync_io, held up here
 * by hand), the scrub waits before each block (scan_yield_ms): it is
 * still near its start when it would long have finished; with the
 * clients' I/O over it finishes, and with scan_yield_ms=0 it does not
 * wait at all. */
static void
test_scrub_yield (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "sc-yield");
  zvol_pool_config_t pc;
  zvol_scrub_status_t st;
  zvol_pool_t *p;
  uint64_t t0;

  (void) state;
  assert_int_equal (tl_sparse_file (dev, SC_DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, SC_VOLSIZE, true);
  p = tl_pool_open_ok (&pc);
  for (uint64_t off = 0; off < SC_SPAN; off += 1 * MiB)
    tl_vol_write (tl_vol (p), NULL, off, 1 * MiB, 1, 0);
  assert_int_equal (zv_pool_sync (p), 0);

  /* Unhindered: how long a whole scrub takes here. */
  t0 = zv_now_ns ();
  assert_int_equal (zvol_scrub_start (p), 0);
  assert_int_equal (zvol_scrub_wait (p, NULL, NULL, NULL), 0);
  t0 = zv_now_ns () - t0;
  print_message ("a scrub alone: %" PRIu64 " ms\n", t0 / 1000000);

  sc_tunable ("scan_yield_ms", "50");
  atomic_fetch_add (&p->p_spa.spa_sync_io, 1);
  assert_int_equal (zvol_scrub_start (p), 0);
  usleep ((useconds_t) (ZV_MAX (t0 / 1000 * 3, 300 * 1000)));
  st = sc_status (p);
  print_message ("yielding: %" PRIu64 " of %" PRIu64 " examined\n",
                 st.ss_examined, st.ss_total);
  assert_int_equal (st.ss_state, ZVOL_SCRUB_SCANNING);
  assert_true (st.ss_examined < SC_SPAN / 4);
  atomic_fetch_sub (&p->p_spa.spa_sync_io, 1);
  assert_int_equal (zvol_scrub_wait (p, NULL, NULL, NULL), 0);
  assert_int_equal (sc_status (p).ss_state, ZVOL_SCRUB_FINISHED);

  /* scan_yield_ms=0: no waiting, the log's I/O or not. */
  sc_tunable ("scan_yield_ms", "0");
  atomic_fetch_add (&p->p_spa.spa_sync_io, 1);
  assert_int_equal (zvol_scrub_start (p), 0);
  usleep ((useconds_t) (ZV_MAX (t0 / 1000 * 3, 300 * 1000)));
  assert_int_equal (sc_status (p).ss_state, ZVOL_SCRUB_FINISHED);
  atomic_fetch_sub (&p->p_spa.spa_sync_io, 1);
  sc_tunable ("scan_yield_ms", "10");
  assert_int_equal (tl_pool_close (p), 0);
  unlink (dev);
}

/* A writer beside the scrub: writes to another volume, whose frees the
 * scrub's hold keeps back. */
typedef struct sc_writer {
  zvol_t *sw_vol;
  zvol_pool_t *sw_pool;
  _Atomic bool sw_stop;
  uint64_t sw_seed;
} sc_writer_t;

static void *
sc_writer_main (void *arg)
{
  sc_writer_t *w = arg;
  uint8_t *buf = malloc (64 * KiB);

  TL_CHECK (buf != NULL);
  while (!atomic_load (&w->sw_stop)) {
    uint64_t r = tl_rand (&w->sw_seed);
    tl_fill_rand (buf, 64 * KiB, &w->sw_seed);
    TL_CHECK (zvol_write (w->sw_vol, buf, r % (SC_SPAN / (64 * KiB))
                          * 64 * KiB, 64 * KiB, 0) == 0);
    /* Synced often: each sync frees what the last overwrote. */
    if (r % 16 == 0)
      TL_CHECK (zv_pool_sync (w->sw_pool) == 0);
  }
  free (buf);
  return NULL;
}

/* With the hold's bound low (check_hold_pct=20) and a writer freeing
 * blocks, the scrub goes in many pieces, each on a new view from where
 * the last stopped: it finishes, and finds each damaged copy of the
 * volume's tree (which the writer leaves alone) exactly once. */
static void
test_scrub_pieces (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "sc-pieces");
  sc_set_t *ss = calloc (1, sizeof *ss);
  sc_damage_t dm[SC_META + SC_DATA];
  zvol_volume_params_t vp = { .vp_size = SC_VOLSIZE };
  uint64_t seed = tl_seed ("scrub-pieces");
  zvol_scrub_status_t st;
  zvol_pool_config_t pc;
  sc_writer_t w = { .sw_seed = seed };
  zvol_pool_t *p;
  pthread_t th;
  size_t n;
  int zi = -1;

  (void) state;
  assert_non_null (ss);
  assert_int_equal (tl_sparse_file (dev, SC_DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, SC_VOLSIZE, true);
  p = tl_pool_open_ok (&pc);
  assert_int_equal (zvol_volume_create (p, "w", &vp), 0);
  for (uint64_t off = 0; off < SC_SPAN; off += 1 * MiB) {
    tl_vol_write (tl_vol (p), NULL, off, 1 * MiB, 1, 0);
    tl_ds_write (p, "w", off, 1 * MiB, 5);
  }
  assert_int_equal (zv_pool_sync (p), 0);
  sc_collect (p, ss);
  for (unsigned k = 0; k < ss->ss_nds; k++)
    if (strcmp (ss->ss_open[k], "zvol") == 0)
      zi = (int) k;
  assert_true (zi >= 0);
  n = sc_damage_in (dev, ss, zi, 2, SC_DATA, &seed, dm);
  tl_log_reset (true);
  w.sw_vol = tl_ds_open (p, "w");
  w.sw_pool = p;
  sc_tunable ("check_hold_pct", "20");
  zv_dev_set_fault (p->p_spa.spa_devs[0], sc_slow, NULL);
  assert_int_equal (pthread_create (&th, NULL, sc_writer_main, &w), 0);
  assert_int_equal (zvol_scrub_start (p), 0);
  assert_int_equal (zvol_scrub_wait (p, NULL, NULL, NULL), 0);
  atomic_store (&w.sw_stop, true);
  assert_int_equal (pthread_join (th, NULL), 0);
  zv_dev_set_fault (p->p_spa.spa_devs[0], NULL, NULL);
  sc_tunable ("check_hold_pct", "20");
  st = sc_status (p);
  print_message ("%" PRIu64 " pieces, error %d\n", st.ss_pieces,
                 st.ss_error);
  assert_int_equal (st.ss_state, ZVOL_SCRUB_FINISHED);
  assert_true (st.ss_pieces > 1);
  assert_int_equal (st.ss_cksum_errors, n);
  assert_int_equal (st.ss_repaired, n - SC_DATA);
  assert_int_equal (st.ss_lost, SC_DATA);
  sc_expect_damaged (&st, ss, dm, n);
  assert_int_equal (zvol_close (w.sw_vol), 0);
  tl_log_reset (false);
  assert_int_equal (tl_pool_close (p), 0);
  free (ss->ss_blk);
  free (ss);
  unlink (dev);
}

/* The device reads a piece makes of the indirect blocks (level 1) of
 * one tree that lie wholly before its place, and of the others. */
typedef struct sc_l1_reads {
  const sc_set_t *lr_ss;
  int lr_ds;
  uint64_t lr_place;                    /* bytes */
  _Atomic unsigned lr_before, lr_after;
} sc_l1_reads_t;

static int
sc_count_l1 (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
             uint32_t len)
{
  sc_l1_reads_t *lr = arg;
  const sc_set_t *ss = lr->lr_ss;
  const uint64_t span = (uint64_t) ZV_INDIRECT_FANOUT
    * ss->ss_blksz[lr->lr_ds];

  (void) dev; (void) len;
  if (op != ZV_DEV_READ)
    return 0;
  for (size_t i = 0; i < ss->ss_n; i++) {
    const sc_blk_t *b = &ss->ss_blk[i];

    if (b->sb_ds != lr->lr_ds || b->sb_level != 1)
      continue;
    for (unsigned c = 0; c < b->sb_bp.bp_ncopies; c++)
      if (off == ZV_DVA_OFFSET (b->sb_bp.bp_dva[c])) {
        if ((b->sb_blkid + 1) * span <= lr->lr_place)
          atomic_fetch_add (&lr->lr_before, 1);
        else
          atomic_fetch_add (&lr->lr_after, 1);
      }
  }
  return 0;
}

/* A piece that goes on from a place reads nothing of the tree wholly
 * before it: the walk skips what is under an indirect block the place
 * is past (re-walked, each piece read every indirect block before its
 * place into its view's cold cache, and took each data block's space). */
static void
test_scrub_piece_skips (void **state)
{
  char path[512];
  const char *dev = tl_path (path, sizeof path, "sc-skip");
  sc_set_t *ss = calloc (1, sizeof *ss);
  zvol_pool_config_t pc;
  zvol_pool_t *p;
  zvol_check_report_t rep;
  zv_check_pos_t pos = { .cp_phase = ZV_CHECK_PHASE_TREES };
  sc_l1_reads_t lr = { .lr_ds = -1, .lr_place = 20 * MiB };
  _Atomic bool stop = false;
  unsigned nbefore = 0;

  (void) state;
  assert_non_null (ss);
  assert_int_equal (tl_sparse_file (dev, SC_DEV_SIZE), 0);
  tl_pool_cfg (&pc, &dev, 1, SC_VOLSIZE, true);
  p = tl_pool_open_ok (&pc);
  /* Past the place by a few MiB: several indirect blocks before it,
   * some after. */
  for (uint64_t off = 0; off < lr.lr_place + 4 * MiB; off += 1 * MiB)
    tl_vol_write (tl_vol (p), NULL, off, 1 * MiB, 1, 0);
  assert_int_equal (zv_pool_sync (p), 0);
  sc_collect (p, ss);
  for (unsigned k = 0; k < ss->ss_nds; k++)
    if (strcmp (ss->ss_open[k], "zvol") == 0)
      lr.lr_ds = (int) k;
  assert_true (lr.lr_ds >= 0);
  for (size_t i = 0; i < p->p_dd.dd_nds; i++)
    if (strcmp (p->p_dd.dd_dss[i]->ds_name, "zvol") == 0)
      pos.cp_ds_id = p->p_dd.dd_dss[i]->ds_id;
  pos.cp_off = lr.lr_place;
  for (size_t i = 0; i < ss->ss_n; i++)
    nbefore += ss->ss_blk[i].sb_ds == lr.lr_ds
      && ss->ss_blk[i].sb_level == 1
      && (ss->ss_blk[i].sb_blkid + 1) * ZV_INDIRECT_FANOUT
      * ss->ss_blksz[lr.lr_ds] <= lr.lr_place;
  assert_true (nbefore >= 2);           /* else the test shows nothing */
  lr.lr_ss = ss;
  zv_dev_set_fault (p->p_spa.spa_devs[0], sc_count_l1, &lr);
  assert_int_equal (zv_check_scrub_piece (p, &rep, &stop, NULL, NULL, &pos),
                    0);
  zv_dev_set_fault (p->p_spa.spa_devs[0], NULL, NULL);
  print_message ("%u indirect blocks before the place: %u reads of them, "
                 "%u of the others\n", nbefore, lr.lr_before, lr.lr_after);
  assert_int_equal (pos.cp_phase, ZV_CHECK_PHASE_DONE);
  assert_int_equal (lr.lr_before, 0);
  assert_true (lr.lr_after > 0);        /* the counter sees the reads */
  assert_int_equal (rep.cr_cksum_errors + rep.cr_read_errors, 0);
  assert_int_equal (tl_pool_close (p), 0);
  free (ss->ss_blk);
  free (ss);
  unlink (dev);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_scrub_live),
    tl_test (test_scrub_offline),
    tl_test (test_scrub_background),
    tl_test (test_scrub_restart),
    tl_test (test_scrub_yield),
    tl_test (test_scrub_pieces),
    tl_test (test_scrub_piece_skips),
  };
  return tl_main (tests, "scrub", NULL);
}
