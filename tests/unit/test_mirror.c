/*
 * test_mirror.c: mirror devices (core/dev_mirror.c), through a pool.
 *
 * One side of a mirror damaged at random places, data and metadata:
 * every read is right and every damaged place is rewritten from the
 * other side (self-heal, zio.c).  A side that fails entirely (the fault
 * hook): no error reaches the writer, the side is faulted, the pool is
 * degraded, and after an import with the side back (stale) every read is
 * still right.  Import with a side missing: degraded.  A side of another
 * pool, or one side given alone: refused.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

#include "testlib.h"
#include "pool.h"
#include "label.h"
#include "dsdir.h"
#include "dmu.h"
#include "tunable.h"

#define SIDE_SIZE (64 * MiB)
#define VOL_SIZE (8 * MiB)
#define BS 16384u

/* Two (three) side files and the mirror's name over them. */
typedef struct tm_mirror {
  char side[3][512];
  char name[1600];
  unsigned n;
} tm_mirror_t;

static void
tm_mirror_make (tm_mirror_t *m, const char *tag, unsigned n)
{
  char *p = m->name;

  m->n = n;
  p += sprintf (p, "mirror:");
  for (unsigned i = 0; i < n; i++) {
    char nm[64];
    snprintf (nm, sizeof nm, "%s-%u", tag, i);
    tl_path (m->side[i], sizeof m->side[i], nm);
    unlink (m->side[i]);
    assert_int_equal (tl_sparse_file (m->side[i], SIDE_SIZE), 0);
    p += sprintf (p, "%s%s", i ? "," : "", m->side[i]);
  }
}

static void
tm_mirror_remove (tm_mirror_t *m)
{
  for (unsigned i = 0; i < m->n; i++)
    unlink (m->side[i]);
}

/* A new pool on the mirror with its volume written with pattern seed. */
static void
tm_pool_create (tm_mirror_t *m, uint64_t seed)
{
  const char *dev = m->name;
  zvol_pool_config_t pc;
  zvol_pool_t *p;

  tl_pool_cfg (&pc, &dev, 1, VOL_SIZE, true);
  pc.pc_volblocksize = BS;
  p = tl_pool_open_ok (&pc);
  for (uint64_t off = 0; off < VOL_SIZE; off += MiB)
    tl_vol_write (tl_vol (p), NULL, off, MiB, seed, 0);
  assert_int_equal (zvol_flush (tl_vol (p)), 0);
  assert_int_equal (tl_pool_close (p), 0);
}

static zvol_pool_t *
tm_pool_import (const tm_mirror_t *m)
{
  const char *dev = m->name;
  zvol_pool_config_t pc;

  tl_pool_cfg (&pc, &dev, 1, 0, false);
  return tl_pool_open_ok (&pc);
}

/* ---- the volume's tree ---- */

#define TM_MAX_PLACES 4096
typedef struct tm_places {
  uint64_t off[TM_MAX_PLACES];          /* device offsets */
  uint32_t len[TM_MAX_PLACES];
  unsigned level[TM_MAX_PLACES];
  unsigned copy[TM_MAX_PLACES];         /* which copy of its block */
  uint64_t blkid[TM_MAX_PLACES];
  size_t n;
} tm_places_t;

static int
tm_walk_cb (void *arg, const zv_blkptr_t *bp, unsigned level, uint64_t blkid,
            const void *data)
{
  tm_places_t *t = arg;

  (void) data;
  for (unsigned c = 0; c < bp->bp_ncopies && t->n < TM_MAX_PLACES; c++) {
    t->blkid[t->n] = blkid;
    t->off[t->n] = ZV_DVA_OFFSET (bp->bp_dva[c]);
    t->len[t->n] = bp->bp_psize;
    t->level[t->n] = level;
    t->copy[t->n] = c;
    t->n++;
  }
  return 0;
}

/* Every copy of every block of the volume's tree, and of the objset. */
static void
tm_tree_places (zvol_pool_t *p, tm_places_t *t)
{
  zv_object_t *ob = zv_dsdir_object (zv_dsdir_find (p, NULL));
  const zv_blkptr_t *root = zv_pool_rootbp (p);
  zv_dnode_phys_t dn;

  memset (t, 0, sizeof *t);
  zv_dmu_object_phys (ob, &dn);
  assert_int_equal (zv_dmu_walk (zv_pool_spa (p), ob->ob_id, &dn, false,
                                 tm_walk_cb, t), 0);
  for (unsigned c = 0; c < root->bp_ncopies; c++) {
    t->off[t->n] = ZV_DVA_OFFSET (root->bp_dva[c]);
    t->len[t->n] = root->bp_psize;
    t->level[t->n] = 99;              /* the objset */
    t->copy[t->n] = c;
    t->n++;
  }
}

/* Do the two files hold the same bytes at [off, off + len)? */
static bool
tm_same (const char *a, const char *b, uint64_t off, uint32_t len)
{
  uint8_t *x = malloc (len), *y = malloc (len);
  bool same;

  assert_int_equal (tl_file_pread (a, x, len, off), 0);
  assert_int_equal (tl_file_pread (b, y, len, off), 0);
  same = memcmp (x, y, len) == 0;
  free (x);
  free (y);
  return same;
}

/* ---- tests ---- */

/* Labels: each side names the mirror and which side it is, and the pool
 * carries the mirror feature; one side alone is refused. */
static void
test_mirror_labels (void **state)
{
  tm_mirror_t m;
  zv_config_phys_t cf[2];
  zv_dev_t *d;
  char err[512];

  (void) state;
  tm_mirror_make (&m, "lab", 2);
  tm_pool_create (&m, 1);
  for (unsigned i = 0; i < 2; i++) {
    assert_int_equal (tl_file_pread (m.side[i], &cf[i], sizeof cf[i], 0), 0);
    assert_true (zv_label_verify_config (&cf[i], 0));
    assert_int_equal (cf[i].cf_mirror_nsides, 2);
    assert_int_equal (cf[i].cf_mirror_side, i);
    assert_true (cf[i].cf_features & ZV_FEAT_MIRROR);
    assert_true (cf[i].cf_side_guids[0] != 0 && cf[i].cf_side_guids[1] != 0);
    assert_true (cf[i].cf_side_guids[0] != cf[i].cf_side_guids[1]);
    assert_int_equal (cf[i].cf_side_guids[2], 0);
  }
  assert_true (cf[0].cf_pool_guid == cf[1].cf_pool_guid);
  assert_true (cf[0].cf_dev_guid == cf[1].cf_dev_guid);
  assert_memory_equal (cf[0].cf_side_guids, cf[1].cf_side_guids,
                       sizeof cf[0].cf_side_guids);

  /* A side given as a plain device is refused, naming the mirror. */
  d = tl_dev_open (m.side[1]);
  tl_log_reset (true);
  assert_int_equal (zv_label_read_config (d, &cf[0], NULL, err, sizeof err),
                    -EINVAL);
  assert_non_null (strstr (err, "give the mirror"));
  zv_dev_close (d);
  {
    const char *dev = m.side[0];
    zvol_pool_config_t pc;
    zvol_pool_t *p = NULL;

    tl_pool_cfg (&pc, &dev, 1, 0, false);
    assert_int_equal (tl_pool_open (&pc, &p), -EINVAL);
    assert_true (tl_log_has ("give the mirror"));
  }
  tl_log_reset (false);
  /* The sides in another order: each is not the side it is given as. */
  {
    char swapped[1600];
    const char *dev = swapped;
    zvol_pool_config_t pc;
    zvol_pool_t *p = NULL;

    snprintf (swapped, sizeof swapped, "mirror:%s,%s", m.side[1], m.side[0]);
    tl_log_reset (true);
    tl_pool_cfg (&pc, &dev, 1, 0, false);
    assert_int_equal (tl_pool_open (&pc, &p), -EINVAL);
    assert_true (tl_log_has ("in the order they were created"));
    tl_log_reset (false);
  }
  /* Names that are no mirror. */
  {
    char *sides[3];
    unsigned n;

    assert_int_equal (zv_dev_mirror_parse ("mirror:a", sides, &n, err,
                                           sizeof err), -EINVAL);
    assert_int_equal (zv_dev_mirror_parse ("mirror:a,,b", sides, &n, err,
                                           sizeof err), -EINVAL);
    assert_int_equal (zv_dev_mirror_parse ("mirror:a,a", sides, &n, err,
                                           sizeof err), -EINVAL);
    assert_int_equal (zv_dev_mirror_parse ("mirror:a,b,c,d", sides, &n, err,
                                           sizeof err), -EINVAL);
    assert_int_equal (zv_dev_mirror_parse ("mirror:a,mirror:b", sides, &n,
                                           err, sizeof err), -EINVAL);
    assert_int_equal (zv_dev_mirror_parse ("mirror:a,b,c", sides, &n, err,
                                           sizeof err), 0);
    assert_int_equal (n, 3);
    assert_string_equal (sides[2], "c");
    for (unsigned i = 0; i < n; i++)
      free (sides[i]);
  }
  tm_mirror_remove (&m);
}

/*
 * One side damaged at random places of the volume's tree (data blocks,
 * both ditto copies of indirect blocks, the objset): every read of a
 * fresh import is right, the damaged side counts checksum errors, the
 * other none, and afterwards every damaged place holds the other side's
 * bytes again.
 */
static void
test_mirror_corrupt_heal (void **state)
{
  static tm_places_t t;
  static bool hit[TM_MAX_PLACES];
  uint64_t rng = 0x5eed1234abcdull;
  tm_mirror_t m;
  zvol_pool_t *p;
  zvol_pool_stats_t ps;
  size_t nhit = 0, nmeta = 0;

  (void) state;
  tm_mirror_make (&m, "heal", 2);
  tm_pool_create (&m, 7);
  p = tm_pool_import (&m);
  tm_tree_places (p, &t);
  assert_int_equal (tl_pool_close (p), 0);
  assert_true (t.n > 500);

  /* Side 0: one random byte in about a third of the data blocks, and in
   * every copy of every metadata block (so the ditto copy cannot save
   * it: only the other side can). */
  memset (hit, 0, sizeof hit);
  for (size_t i = 0; i < t.n; i++) {
    rng = tl_mix (rng + i);
    if (t.level[i] == 0 && rng % 3 != 0)
      continue;
    assert_int_equal (tl_file_flip (m.side[0], t.off[i]
                                    + (rng >> 8) % t.len[i]), 0);
    hit[i] = true;
    nhit++;
    nmeta += t.level[i] != 0;
    assert_false (tm_same (m.side[0], m.side[1], t.off[i], t.len[i]));
  }
  assert_true (nhit > 100);
  assert_true (nmeta >= 4);

  /* Reads go to the damaged side first, so that each damaged place is
   * met (balanced, half of them would be read from the good side and
   * never seen: the scrub finds those). */
  assert_int_equal (zv_tunable_set ("mirror_read_side", "1", NULL, 0), 0);
  p = tm_pool_import (&m);
  tl_vol_check (tl_vol (p), 0, VOL_SIZE, 7);
  zvol_pool_get_stats (p, &ps);
  assert_int_equal (ps.ps_dev_nsides[0], 2);
  assert_true (ps.ps_dev_sides[0][0].ss_cksum_errors > 0);
  assert_int_equal (ps.ps_dev_sides[0][1].ss_cksum_errors, 0);
  assert_int_equal (ps.ps_dev_cksum_errors[0], 0);      /* all recovered */
  assert_false (ps.ps_degraded);
  assert_true (ps.ps_dev_sides[0][0].ss_online);
  assert_true (tl_log_has ("failed its checksum; rewritten from side 1"));
  assert_int_equal (tl_pool_close (p), 0);

  /* Every damaged place that was read was rewritten: every first copy
   * (the second copy of a block whose first was healed is never read). */
  for (size_t i = 0; i < t.n; i++)
    if (hit[i] && t.copy[i] == 0 && !tm_same (m.side[0], m.side[1], t.off[i], t.len[i]))
      fail_msg ("place %zu (level %u, offset %" PRIu64 ") not rewritten", i,
                t.level[i], t.off[i]);

  /* And a second import finds nothing more to heal. */
  p = tm_pool_import (&m);
  tl_vol_check (tl_vol (p), 0, VOL_SIZE, 7);
  zvol_pool_get_stats (p, &ps);
  assert_int_equal (ps.ps_dev_sides[0][0].ss_cksum_errors, 0);
  assert_int_equal (ps.ps_dev_sides[0][1].ss_cksum_errors, 0);
  assert_int_equal (tl_pool_close (p), 0);
  zv_tunable_reset_all ();

  /* Balanced reads over damage on both sides (at places apart: not the
   * same block on both) are right too. */
  for (size_t i = 0; i < t.n; i++) {
    if (t.level[i] != 0)
      continue;
    rng = tl_mix (rng + i);
    if (rng % 4 != 0)
      continue;
    assert_int_equal (tl_file_flip (m.side[i % 2], t.off[i]
                                    + (rng >> 8) % t.len[i]), 0);
  }
  p = tm_pool_import (&m);
  tl_vol_check (tl_vol (p), 0, VOL_SIZE, 7);
  zvol_pool_get_stats (p, &ps);
  assert_true (ps.ps_dev_sides[0][0].ss_cksum_errors > 0);
  assert_true (ps.ps_dev_sides[0][1].ss_cksum_errors > 0);
  assert_true (ps.ps_dev_sides[0][0].ss_reads > 0);
  assert_true (ps.ps_dev_sides[0][1].ss_reads > 0);
  assert_int_equal (ps.ps_dev_cksum_errors[0], 0);
  assert_int_equal (tl_pool_close (p), 0);
  tm_mirror_remove (&m);
}

/* A read-only import reads right over a damaged side but writes
 * nothing: the damage stays until a read-write import meets it. */
static void
test_mirror_readonly_no_repair (void **state)
{
  static tm_places_t t;
  tm_mirror_t m;
  zvol_pool_t *p;
  zvol_pool_stats_t ps;
  const char *dev;
  zvol_pool_config_t pc;
  size_t n = 0;

  (void) state;
  tm_mirror_make (&m, "ro", 2);
  tm_pool_create (&m, 11);
  p = tm_pool_import (&m);
  tm_tree_places (p, &t);
  assert_int_equal (tl_pool_close (p), 0);
  for (size_t i = 0; i < t.n; i += 7)
    if (t.level[i] == 0) {
      assert_int_equal (tl_file_flip (m.side[0], t.off[i] + 100), 0);
      n++;
    }
  assert_true (n > 10);
  assert_int_equal (zv_tunable_set ("mirror_read_side", "1", NULL, 0), 0);
  dev = m.name;
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  pc.pc_readonly = true;
  p = tl_pool_open_ok (&pc);
  tl_vol_check (tl_vol (p), 0, VOL_SIZE, 11);
  zvol_pool_get_stats (p, &ps);
  assert_true (ps.ps_dev_sides[0][0].ss_cksum_errors >= n);
  assert_int_equal (ps.ps_dev_sides[0][0].ss_writes, 0);
  assert_int_equal (tl_pool_close (p), 0);
  for (size_t i = 0; i < t.n; i += 7)
    if (t.level[i] == 0)
      assert_false (tm_same (m.side[0], m.side[1], t.off[i], t.len[i]));
  /* Read-write, the same reads heal it. */
  p = tm_pool_import (&m);
  tl_vol_check (tl_vol (p), 0, VOL_SIZE, 11);
  assert_int_equal (tl_pool_close (p), 0);
  for (size_t i = 0; i < t.n; i += 7)
    if (t.level[i] == 0)
      assert_true (tm_same (m.side[0], m.side[1], t.off[i], t.len[i]));
  zv_tunable_reset_all ();
  tm_mirror_remove (&m);
}

/* Fault hook: requests to the side fail (only its reads while
 * tf_reads_only). */
typedef struct tm_fault {
  unsigned tf_n;
  bool tf_reads_only;
} tm_fault_t;

static int
tm_fail (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
         uint32_t len)
{
  tm_fault_t *f = arg;

  (void) dev;
  (void) off;
  (void) len;
  if (f->tf_reads_only && op != ZV_DEV_READ)
    return 0;
  __atomic_fetch_add (&f->tf_n, 1, __ATOMIC_RELAXED);
  return -EIO;
}

/*
 * A side that fails entirely: writes, flushes and reads go on without an
 * error, the side is faulted and the pool degraded; every read is right.
 * Imported again with the side back (it missed what was written
 * meanwhile): still every read right, the stale blocks healed.
 */
static void
test_mirror_fault_side (void **state)
{
  tm_mirror_t m;
  zvol_pool_t *p;
  zvol_pool_stats_t ps;
  zv_dev_t *mdev, *side1;
  tm_fault_t f = { .tf_reads_only = true };

  (void) state;
  zv_tunable_reset_all ();
  tm_mirror_make (&m, "fault", 3);
  tm_pool_create (&m, 3);
  p = tm_pool_import (&m);
  mdev = zv_pool_spa (p)->spa_devs[0];
  assert_int_equal (zv_dev_nsides (mdev), 3);
  side1 = zv_dev_side (mdev, 1);
  zv_dev_set_fault (side1, tm_fail, &f);
  tl_log_reset (true);
  /* Its reads fail first: retried on another side, the failed block
   * rewritten on it, the side still in service. */
  tl_vol_check (tl_vol (p), 0, VOL_SIZE, 3);
  assert_true (zv_dev_side_ok (mdev, 1));
  assert_true (f.tf_n > 0);
  assert_true (tl_log_has ("it failed to read, from another side"));
  zvol_pool_get_stats (p, &ps);
  assert_false (ps.ps_degraded);
  assert_true (ps.ps_dev_sides[0][1].ss_read_errors > 0);
  assert_int_equal (ps.ps_dev_read_errors[0], 0);     /* the mirror's */
  /* Then everything fails. */
  f.tf_reads_only = false;
  /* Writes: the side fails them and is faulted; the writer sees none. */
  for (uint64_t off = 0; off < VOL_SIZE / 2; off += MiB)
    tl_vol_write (tl_vol (p), NULL, off, MiB, 4, 0);
  assert_int_equal (zvol_flush (tl_vol (p)), 0);
  assert_false (zv_dev_side_ok (mdev, 1));
  assert_true (zv_dev_side_ok (mdev, 0) && zv_dev_side_ok (mdev, 2));
  assert_true (tl_log_has ("FAULTED"));
  zvol_pool_get_stats (p, &ps);
  assert_true (ps.ps_degraded);
  assert_true (ps.ps_dev_degraded[0]);
  assert_false (ps.ps_dev_sides[0][1].ss_online);
  assert_non_null (strstr (ps.ps_dev_sides[0][1].ss_why, "failed"));
  assert_true (ps.ps_dev_sides[0][1].ss_write_errors > 0);
  assert_int_equal (zvol_pool_error (p), 0);
  /* A faulted side gets no more requests. */
  f.tf_n = 0;
  tl_vol_write (tl_vol (p), NULL, VOL_SIZE / 2, MiB, 5, 0);
  assert_int_equal (zvol_flush (tl_vol (p)), 0);
  tl_vol_check (tl_vol (p), 0, VOL_SIZE / 2, 4);
  tl_vol_check (tl_vol (p), VOL_SIZE / 2, MiB, 5);
  assert_int_equal (f.tf_n, 0);
  zv_dev_set_fault (side1, NULL, NULL);
  assert_int_equal (tl_pool_close (p), 0);
  tl_log_reset (false);

  /* Back with the pool: side 1 is stale where it missed the writes.
   * Reads go to it first: its uberblocks are older, and the import must
   * still find the newest (every side's ring is read), and every stale
   * block fails its checksum there and is healed. */
  assert_int_equal (zv_tunable_set ("mirror_read_side", "2", NULL, 0), 0);
  p = tm_pool_import (&m);
  tl_vol_check (tl_vol (p), 0, VOL_SIZE / 2, 4);
  tl_vol_check (tl_vol (p), VOL_SIZE / 2, MiB, 5);
  tl_vol_check (tl_vol (p), VOL_SIZE / 2 + MiB, VOL_SIZE / 2 - MiB, 3);
  zvol_pool_get_stats (p, &ps);
  assert_int_equal (ps.ps_dev_cksum_errors[0], 0);
  assert_true (ps.ps_dev_sides[0][1].ss_cksum_errors > 0);
  assert_int_equal (tl_pool_close (p), 0);
  zv_tunable_reset_all ();
  tm_mirror_remove (&m);
}

/*
 * The intent log over a stale side: a process writes and flushes (log
 * blocks, no txg sync) while side 1 fails everything, and dies.  At the
 * import side 1 is back, stale, and reads go to it first: the replay
 * must still find every log block (on side 0), so nothing acknowledged
 * is lost.
 */
static void
test_mirror_stale_log (void **state)
{
  tm_mirror_t m;
  zvol_pool_t *p;
  int status;
  pid_t pid;

  (void) state;
  if (TL_TSAN)
    tl_skip ("TSan does not follow a child forked from a threaded parent");
  zv_tunable_reset_all ();
  tm_mirror_make (&m, "slog", 2);
  tm_pool_create (&m, 21);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0) {
    tm_fault_t f = { .tf_reads_only = false };
    const char *dev = m.name;
    zvol_pool_config_t pc;
    uint8_t *buf = malloc (MiB);

    tl_pool_cfg (&pc, &dev, 1, 0, false);
    /* No txg sync before the end: only the log holds the writes. */
    pc.pc_txg.tt_timeout_ms = 3600 * 1000;
    pc.pc_txg.tt_dirty_max = 1ull << 30;
    if (tl_pool_open (&pc, &p) != 0)
      _exit (10);
    zv_dev_set_fault (zv_dev_side (zv_pool_spa (p)->spa_devs[0], 1), tm_fail,
                      &f);
    /* Little, so that the log ring stays far from the half that kicks
     * a txg sync. */
    for (uint64_t off = 0; off < 256 * KiB; off += 64 * KiB) {
      tl_pat_fill (buf, off, 64 * KiB, 22);
      if (zvol_write (tl_vol (p), buf, off, 64 * KiB, ZVOL_FUA) != 0)
        _exit (11);
    }
    if (zv_dev_side_ok (zv_pool_spa (p)->spa_devs[0], 1))
      _exit (13);
    _exit (0);                  /* no close: the replay has the writes */
  }
  assert_int_equal (waitpid (pid, &status, 0), pid);
  assert_true (WIFEXITED (status));
  assert_int_equal (WEXITSTATUS (status), 0);

  assert_int_equal (zv_tunable_set ("mirror_read_side", "2", NULL, 0), 0);
  {
    const char *dev = m.name;
    zvol_pool_config_t pc;

    tl_pool_cfg (&pc, &dev, 1, 0, false);
    assert_int_equal (tl_pool_open_retry_ex (&pc, &p, NULL, true), 0);
  }
  /* The writes came back through the replay, not a txg. */
  assert_true (tl_log_has ("intent log: replayed"));
  tl_vol_check (tl_vol (p), 0, 256 * KiB, 22);
  tl_vol_check (tl_vol (p), 256 * KiB, VOL_SIZE - 256 * KiB, 21);
  assert_int_equal (tl_pool_close (p), 0);
  zv_tunable_reset_all ();
  tm_mirror_remove (&m);
}

/* ---- replace and resilver ---- */

/* Wait (at most 60 s) for the pool's resilver to end. */
static void
tm_wait_resilver (zvol_pool_t *p)
{
  zvol_pool_stats_t ps;

  for (int i = 0; i < 6000; i++) {
    zvol_pool_get_stats (p, &ps);
    if (!ps.ps_resilver_active)
      return;
    usleep (10000);
  }
  fail_msg ("the resilver did not end within 60 s");
}

/* Every read of the volume must come from side 'only' now: the other
 * sides fail everything. */
static void
tm_check_from_side (zvol_pool_t *p, unsigned only, tm_fault_t *f,
                    void (*check) (zvol_t *))
{
  zv_dev_t *mdev = zv_pool_spa (p)->spa_devs[0];

  for (unsigned i = 0; i < zv_dev_nsides (mdev); i++)
    if (i != only)
      zv_dev_set_fault (zv_dev_side (mdev, i), tm_fail, f);
  check (tl_vol (p));
  for (unsigned i = 0; i < zv_dev_nsides (mdev); i++)
    if (i != only)
      zv_dev_set_fault (zv_dev_side (mdev, i), NULL, NULL);
}

static void
tm_check_replaced (zvol_t *zv)
{
  tl_vol_check (zv, 0, MiB, 14);
  tl_vol_check (zv, MiB, MiB, 13);
  tl_vol_check (zv, 2 * MiB, MiB, 16);
  tl_vol_check (zv, 3 * MiB, VOL_SIZE - 3 * MiB, 13);
}

/*
 * A side fails; it is replaced online by a new file while the volume is
 * written; the resilver ends, the new side is in service, and it alone
 * holds the whole volume (the other side failing every request, every
 * read is right), the writes made during the resilver included.
 */
static void
test_mirror_replace (void **state)
{
  tm_mirror_t m;
  char newside[512];
  zvol_pool_t *p;
  zvol_pool_stats_t ps;
  zv_dev_t *mdev;
  tm_fault_t f = { .tf_reads_only = false };
  bool seen_active = false;

  (void) state;
  zv_tunable_reset_all ();
  tm_mirror_make (&m, "repl", 2);
  tl_path (newside, sizeof newside, "repl-new");
  unlink (newside);
  assert_int_equal (tl_sparse_file (newside, SIDE_SIZE), 0);
  tm_pool_create (&m, 13);
  p = tm_pool_import (&m);
  mdev = zv_pool_spa (p)->spa_devs[0];
  tl_log_reset (true);
  zv_dev_set_fault (zv_dev_side (mdev, 1), tm_fail, &f);
  tl_vol_write (tl_vol (p), NULL, 0, MiB, 14, 0);
  assert_int_equal (zvol_flush (tl_vol (p)), 0);
  assert_false (zv_dev_side_ok (mdev, 1));
  zv_dev_set_fault (zv_dev_side (mdev, 1), NULL, NULL);

  /* Refused: a side of no mirror, a relative path, a device with a
   * pool's labels on it. */
  assert_int_equal (zvol_pool_replace (p, "/nonexistent", newside), -ENOENT);
  assert_int_equal (zvol_pool_replace (p, m.side[1], "relative"), -EINVAL);
  assert_int_equal (zvol_pool_replace (p, m.side[1], m.side[0]), -EBUSY);
  /* Nor the last side in service (side 1 is faulted). */
  assert_int_equal (zvol_pool_replace (p, m.side[0], newside), -EINVAL);
  assert_true (tl_log_has ("last side in service"));

  assert_int_equal (zv_tunable_set ("resilver_delay", "5", NULL, 0), 0);
  assert_int_equal (zv_tunable_set ("resilver_chunk", "256K", NULL, 0), 0);
  assert_int_equal (zvol_pool_replace (p, m.side[1], newside), 0);
  zvol_pool_get_stats (p, &ps);
  if (ps.ps_resilver_active) {
    seen_active = true;
    assert_true (ps.ps_dev_sides[0][1].ss_resilvering);
    assert_false (ps.ps_dev_sides[0][1].ss_online);
    assert_string_equal (ps.ps_dev_sides[0][1].ss_path, newside);
    assert_true (ps.ps_degraded);
  }
  assert_true (seen_active);
  /* Written meanwhile: reaches the new side through the mirror.  The
   * resilver pauses (3 s after each run) so that it cannot be what
   * copies these blocks: right after the flush, the new side already
   * has every block of the range, as side 0 does. */
  assert_int_equal (zv_tunable_set ("resilver_delay", "3000", NULL, 0), 0);
  usleep (100000);
  tl_vol_write (tl_vol (p), NULL, 2 * MiB, MiB, 16, 0);
  assert_int_equal (zvol_flush (tl_vol (p)), 0);
  assert_int_equal (zv_pool_sync (p), 0);
  {
    static tm_places_t t;
    size_t nchecked = 0;

    tm_tree_places (p, &t);
    for (size_t k = 0; k < t.n; k++)
      if (t.level[k] == 0 && t.blkid[k] * BS >= 2 * MiB
          && t.blkid[k] * BS < 3 * MiB) {
        if (!tm_same (m.side[0], newside, t.off[k], t.len[k]))
          fail_msg ("block %" PRIu64 " written during the resilver is not "
                    "on the new side", t.blkid[k]);
        nchecked++;
      }
    assert_int_equal (nchecked, MiB / BS);
  }
  assert_int_equal (zvol_pool_replace (p, m.side[0], newside), -EBUSY);
  assert_int_equal (zv_tunable_set ("resilver_delay", "0", NULL, 0), 0);
  tm_wait_resilver (p);
  assert_true (tl_log_has ("the mirror is whole"));
  zvol_pool_get_stats (p, &ps);
  assert_false (ps.ps_degraded);
  assert_true (ps.ps_dev_sides[0][1].ss_online);
  assert_false (ps.ps_dev_sides[0][1].ss_resilvering);
  tm_check_from_side (p, 1, &f, tm_check_replaced);
  assert_int_equal (tl_pool_close (p), 0);
  tl_log_reset (false);

  /* The pool imports on the new side, which holds it alone. */
  {
    tm_mirror_t m2 = m;
    zv_dev_t *d;

    snprintf (m2.side[1], sizeof m2.side[1], "%s", newside);
    snprintf (m2.name, sizeof m2.name, "mirror:%s,%s", m.side[0], newside);
    p = tm_pool_import (&m2);
    d = zv_pool_spa (p)->spa_devs[0];
    assert_true (zv_dev_side_ok (d, 0) && zv_dev_side_ok (d, 1));
    tm_check_from_side (p, 1, &f, tm_check_replaced);
    assert_int_equal (tl_pool_close (p), 0);

    /* And with side 0 gone: its labels (ring included) are enough. */
    char away[600];
    snprintf (away, sizeof away, "%s.away", m.side[0]);
    assert_int_equal (rename (m.side[0], away), 0);
    tl_log_reset (true);
    p = tm_pool_import (&m2);
    tm_check_replaced (tl_vol (p));
    assert_int_equal (tl_pool_close (p), 0);
    tl_log_reset (false);
    assert_int_equal (rename (away, m.side[0]), 0);
  }
  zv_tunable_reset_all ();
  unlink (newside);
  tm_mirror_remove (&m);
}

static void
tm_check_resumed (zvol_t *zv)
{
  tl_vol_check (zv, 0, VOL_SIZE, 15);
}

/*
 * A resilver stopped in the middle (the pool closed) resumes at the next
 * import where its record says, not from the start, and ends with the
 * new side whole.
 */
static void
test_mirror_resilver_resume (void **state)
{
  tm_mirror_t m, m2;
  char newside[512];
  zvol_pool_t *p;
  zvol_pool_stats_t ps;
  tm_fault_t f = { .tf_reads_only = false };
  const char *at;
  unsigned long long pos = 0;

  (void) state;
  zv_tunable_reset_all ();
  tm_mirror_make (&m, "resume", 2);
  tl_path (newside, sizeof newside, "resume-new");
  unlink (newside);
  assert_int_equal (tl_sparse_file (newside, SIDE_SIZE), 0);
  tm_pool_create (&m, 15);
  m2 = m;
  snprintf (m2.side[1], sizeof m2.side[1], "%s", newside);
  snprintf (m2.name, sizeof m2.name, "mirror:%s,%s", m.side[0], newside);

  p = tm_pool_import (&m);
  tl_log_reset (true);
  assert_int_equal (zv_tunable_set ("resilver_delay", "20", NULL, 0), 0);
  assert_int_equal (zv_tunable_set ("resilver_chunk", "64K", NULL, 0), 0);
  assert_int_equal (zv_tunable_set ("resilver_persist", "64K", NULL, 0), 0);
  /* A side in service may be replaced too (the mirror is one short). */
  assert_int_equal (zvol_pool_replace (p, m.side[1], newside), 0);
  for (int i = 0; i < 3000; i++) {
    zvol_pool_get_stats (p, &ps);
    if (ps.ps_resilver_done >= 2 * MiB)
      break;
    usleep (10000);
  }
  assert_true (ps.ps_resilver_active);
  assert_true (ps.ps_resilver_done >= 2 * MiB);
  assert_true (ps.ps_resilver_done < ps.ps_resilver_total);
  assert_int_equal (tl_pool_close (p), 0);      /* stops it */
  assert_true (tl_log_has ("the next import resumes it"));

  /* The new side's labels say a resilver is under way: it is not read. */
  tl_log_reset (true);
  p = tm_pool_import (&m2);
  /* The engine's threads start after the server's fork: the resilver's
   * too. */
  assert_false (tl_log_has ("resuming its resilver"));
  assert_int_equal (zvol_pool_start (p), 0);
  at = strstr (tl_log_buf, "resuming its resilver at ");
  assert_non_null (at);
  pos = strtoull (at + strlen ("resuming its resilver at "), NULL, 10);
  assert_true (pos >= ZV_LABEL_SIZE + 2 * MiB);
  /* It goes on from there (still slow: it is seen under way). */
  zvol_pool_get_stats (p, &ps);
  assert_true (ps.ps_resilver_active);
  assert_true (ps.ps_resilver_done >= 2 * MiB);
  assert_int_equal (zv_tunable_set ("resilver_delay", "0", NULL, 0), 0);
  tm_wait_resilver (p);
  assert_true (tl_log_has ("the mirror is whole"));
  zvol_pool_get_stats (p, &ps);
  assert_true (ps.ps_dev_sides[0][1].ss_online);
  tm_check_from_side (p, 1, &f, tm_check_resumed);
  assert_int_equal (tl_pool_close (p), 0);
  tl_log_reset (false);
  /* Whole: nothing to resume any more. */
  p = tm_pool_import (&m2);
  assert_int_equal (zvol_pool_start (p), 0);
  assert_false (tl_log_has ("resuming its resilver"));
  tm_check_from_side (p, 1, &f, tm_check_resumed);
  assert_int_equal (tl_pool_close (p), 0);
  zv_tunable_reset_all ();
  unlink (newside);
  tm_mirror_remove (&m);
}

/* A side missing at import: the pool opens degraded, says so, serves
 * and writes; the mirror with no side at all does not open. */
static void
test_mirror_missing_side (void **state)
{
  tm_mirror_t m;
  zvol_pool_t *p;
  zvol_pool_stats_t ps;

  (void) state;
  tm_mirror_make (&m, "miss", 2);
  tm_pool_create (&m, 9);
  unlink (m.side[0]);
  tl_log_reset (true);
  p = tm_pool_import (&m);
  assert_true (tl_log_has ("cannot be opened"));
  assert_true (tl_log_has ("DEGRADED"));
  zvol_pool_get_stats (p, &ps);
  assert_true (ps.ps_degraded);
  assert_false (ps.ps_dev_sides[0][0].ss_online);
  assert_true (ps.ps_dev_sides[0][1].ss_online);
  tl_vol_check (tl_vol (p), 0, VOL_SIZE, 9);
  tl_vol_write (tl_vol (p), NULL, 0, MiB, 10, 0);
  assert_int_equal (zvol_flush (tl_vol (p)), 0);
  assert_int_equal (tl_pool_close (p), 0);
  p = tm_pool_import (&m);
  tl_vol_check (tl_vol (p), 0, MiB, 10);
  tl_vol_check (tl_vol (p), MiB, VOL_SIZE - MiB, 9);
  assert_int_equal (tl_pool_close (p), 0);

  /* A new mirror needs every side. */
  {
    const char *dev = m.name;
    zvol_pool_config_t pc;

    tl_pool_cfg (&pc, &dev, 1, VOL_SIZE, true);
    unlink (m.side[1]);
    assert_int_equal (tl_sparse_file (m.side[1], SIDE_SIZE), 0);
    assert_true (zvol_pool_open (&pc, &p) < 0);
    assert_true (tl_log_has ("a new mirror needs every side"));
  }
  /* No side at all. */
  {
    const char *dev = m.name;
    zvol_pool_config_t pc;

    unlink (m.side[1]);
    tl_pool_cfg (&pc, &dev, 1, 0, false);
    assert_true (zvol_pool_open (&pc, &p) < 0);
    assert_true (tl_log_has ("no side can be opened"));
  }
  tl_log_reset (false);
  tm_mirror_remove (&m);
}

/* A side of another pool is refused, and so is the import. */
static void
test_mirror_foreign_side (void **state)
{
  tm_mirror_t a, b;
  char mixed[1600];
  const char *dev = mixed;
  zvol_pool_config_t pc;
  zvol_pool_t *p = NULL;

  (void) state;
  tm_mirror_make (&a, "fa", 2);
  tm_mirror_make (&b, "fb", 2);
  tm_pool_create (&a, 1);
  tm_pool_create (&b, 2);
  snprintf (mixed, sizeof mixed, "mirror:%s,%s", a.side[0], b.side[1]);
  tl_log_reset (true);
  tl_pool_cfg (&pc, &dev, 1, 0, false);
  assert_int_equal (tl_pool_open (&pc, &p), -EINVAL);
  assert_true (tl_log_has ("refusing it"));
  tl_log_reset (false);
  /* Nothing was written to either: both pools import whole. */
  p = tm_pool_import (&a);
  tl_vol_check (tl_vol (p), 0, VOL_SIZE, 1);
  assert_int_equal (tl_pool_close (p), 0);
  p = tm_pool_import (&b);
  tl_vol_check (tl_vol (p), 0, VOL_SIZE, 2);
  assert_int_equal (tl_pool_close (p), 0);
  tm_mirror_remove (&a);
  tm_mirror_remove (&b);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_mirror_labels),
    tl_test (test_mirror_corrupt_heal),
    tl_test (test_mirror_readonly_no_repair),
    tl_test (test_mirror_fault_side),
    tl_test (test_mirror_stale_log),
    tl_test (test_mirror_replace),
    tl_test (test_mirror_resilver_resume),
    tl_test (test_mirror_missing_side),
    tl_test (test_mirror_foreign_side),
  };

  return tl_main (tests, "mirror", NULL);
}
