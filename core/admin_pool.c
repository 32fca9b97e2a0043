/*
 * admin_pool.c: the admin commands on the pool as a whole (admin.c's
 * theory comment has the command layer): stats, status, replace,
 * check, scrub and wait; and the check's report printers, which
 * zvoladm's offline check prints with too (zvol_check_print_*).
 *
 * Theory.  The commands that act on the served pool (replace, check,
 * scrub, wait) take their POOL operand through admin_live_pool.  check
 * runs offline in zvoladm (it imports the pool itself); on an open
 * pool, here, it is the live check (zvol_pool_check_live), stoppable by
 * the caller's cancel descriptors, as scrub -w and wait are: the long
 * commands, which take no turn of the control socket's one command at
 * a time (ctl.c).  Their progress lines come at most once a second (the
 * first and the last always): live as the control socket's progress
 * frames, offline on the error stream.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "zvol.h"
#include "zv_util.h"
#include "admin_impl.h"

/* stats [-t] POOL[/VOL]: the kstat tables, the pool's figures (and the
 * volume's), or with -t the txg history. */
int
zv_admin_stats (admin_ctx_t *c)
{
  char vol[ZVOL_NAME_MAX];
  bool has_vol, match;
  zvol_t *zv = NULL;
  char *text;
  int r;

  if (c->c_argc != 1)
    return zv_admin_usage (c, "stats [-t] POOL[/VOL]");
  has_vol = strchr (c->c_argv[0], '/') != NULL;
  if (has_vol && ADMIN_OPT (c, 't'))
    return zv_admin_usage (c, "-t: the txg history is the pool's (stats -t "
                           "POOL)");
  r = has_vol ? zv_admin_volume_operand (c, 0, vol)
    : zv_admin_pool_operand (c, 0, &match);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  if (!has_vol && !match)
    return zv_admin_not_this_pool (c, c->c_argv[0]);
  if (has_vol && zvol_exports_hold (c->c_ex, vol, &zv) < 0)
    return ZVOL_ADMIN_FAIL;
  text = ADMIN_OPT (c, 't') ? zvol_format_txgs (c->c_pool)
    : zvol_format_stats (c->c_pool, zv);
  if (zv)
    zvol_exports_rele (c->c_ex, zv);
  fputs (text, c->c_out);
  free (text);
  return ZVOL_ADMIN_OK;
}
/* A duration as status prints it: 1h02m03s, 2m03s, 3s. */
static void
admin_duration (char *buf, size_t len, uint64_t s)
{
  if (s >= 3600)
    snprintf (buf, len, "%" PRIu64 "h%02" PRIu64 "m%02" PRIu64 "s",
              s / 3600, s / 60 % 60, s % 60);
  else if (s >= 60)
    snprintf (buf, len, "%" PRIu64 "m%02" PRIu64 "s", s / 60, s % 60);
  else
    snprintf (buf, len, "%" PRIu64 "s", s);
}

/* The scrub's lines of status (and of scrub -w), as zpool status -v
 * shows its scan and its permanent errors. */
static void
admin_scrub_print (FILE *o, const zvol_scrub_status_t *st)
{
  static const char *const state[] = {
    [ZVOL_SCRUB_NONE] = "none requested",
    [ZVOL_SCRUB_SCANNING] = "scrub in progress",
    [ZVOL_SCRUB_PAUSED] = "scrub paused",
    [ZVOL_SCRUB_FINISHED] = "scrub finished",
    [ZVOL_SCRUB_CANCELED] = "scrub canceled",
  };
  char e[32], t[32], r[32], d[32];

  if (st->ss_state == ZVOL_SCRUB_NONE) {
    fprintf (o, "  scan: none requested\n");
    return;
  }
  zvol_admin_size (e, sizeof e, st->ss_examined, false);
  zvol_admin_size (t, sizeof t, st->ss_total, false);
  zvol_admin_size (r, sizeof r, st->ss_rate, false);
  admin_duration (d, sizeof d, st->ss_elapsed_ns / 1000000000ull);
  fprintf (o, "  scan: %s%s%s%s, %s examined of %s (%.1f%%) in %s", 
           state[st->ss_state], st->ss_error ? " (" : "",
           st->ss_error ? strerror (-st->ss_error) : "",
           st->ss_error ? ")" : "", e, t, st->ss_total
           ? 100.0 * (double) ZV_MIN (st->ss_examined, st->ss_total)
           / (double) st->ss_total
           : st->ss_state == ZVOL_SCRUB_FINISHED ? 100.0 : 0.0, d);
  /* Pieces: how often frees held back ended one (scrub.c). */
  if (st->ss_pieces > 1)
    fprintf (o, " (%" PRIu64 " pieces)", st->ss_pieces);
  if (st->ss_state == ZVOL_SCRUB_SCANNING) {
    admin_duration (d, sizeof d, st->ss_eta_s);
    fprintf (o, ", %s/s, %s to go", r, st->ss_rate ? d : "?");
  }
  fprintf (o, "\n        repaired %" PRIu64 " copies, repairs failed %"
           PRIu64 ", blocks that could not be repaired %" PRIu64
           " (checksum errors %" PRIu64 ", read errors %" PRIu64 ")\n",
           st->ss_repaired, st->ss_repair_failed, st->ss_lost,
           st->ss_cksum_errors, st->ss_read_errors);
  if (st->ss_other > 0)
    fprintf (o, "        other problems %" PRIu64 " (space accounting: "
             "zvoladm check says which)\n", st->ss_other);
  if (st->ss_ndamaged == 0)
    return;
  fprintf (o, "damaged: blocks no copy of which verifies (their data is "
           "lost):\n");
  for (uint64_t i = 0; i < st->ss_ndamaged && i < ZVOL_SCRUB_DAMAGED_MAX;
       i++) {
    const zvol_scrub_damaged_t *dm = &st->ss_damaged[i];
    if (dm->sd_length > 0)
      fprintf (o, "        %s offset %" PRIu64 ", %" PRIu64 " bytes\n",
               dm->sd_dataset, dm->sd_offset, dm->sd_length);
    else
      fprintf (o, "        %s\n", dm->sd_dataset);
  }
  if (st->ss_ndamaged > ZVOL_SCRUB_DAMAGED_MAX)
    fprintf (o, "        ... and %" PRIu64 " more (the server's log says "
             "which)\n", st->ss_ndamaged - ZVOL_SCRUB_DAMAGED_MAX);
}


/* The POOL operand (argument 0) of a command that runs on the served
 * pool: *runp true when it names c->c_pool and the command is to run;
 * false, with what to return, otherwise (an error, or nothing to do
 * outside a server). */
static int
admin_live_pool (admin_ctx_t *c, bool *runp)
{
  bool match;
  int r = zv_admin_pool_operand (c, 0, &match);

  *runp = false;
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  if (!match) {
    zv_admin_err (c, "not this pool (%s)", zvol_pool_name (c->c_pool));
    return ZVOL_ADMIN_FAIL;
  }
  *runp = true;
  return ZVOL_ADMIN_OK;
}

/* replace POOL OLD NEW: a side of a mirror by another device, resilvered
 * in the background (status shows how far). */
int
zv_admin_replace (admin_ctx_t *c)
{
  bool run;
  int r;

  if (c->c_argc != 3)
    return zv_admin_usage (c, "replace POOL OLD NEW");
  r = admin_live_pool (c, &run);
  if (!run)
    return r;
  r = zvol_pool_replace (c->c_pool, c->c_argv[1], c->c_argv[2]);
  if (r < 0)
    return ZVOL_ADMIN_FAIL;
  fprintf (c->c_out, "replaced %s by %s: resilvering (zvoladm status "
           "shows how far)\n", c->c_argv[1], c->c_argv[2]);
  return ZVOL_ADMIN_OK;
}

/* status [POOL]: the pool's state (healthy, read-only, or suspended by
 * a failed sync, with the error), its devices with their error counts
 * (as zpool status: failed reads and writes, copies that did not
 * verify), space, txgs and the number of volumes and snapshots. */
int
zv_admin_status (admin_ctx_t *c)
{
  zvol_scrub_status_t ss;
  zvol_pool_stats_t ps;
  char a[32], b[32], d[32], f[32];
  uint64_t nerr = 0;
  bool run;
  int err;

  if (c->c_argc > 1)
    return zv_admin_usage (c, "status [POOL]");
  if (c->c_argc == 1) {
    int r = admin_live_pool (c, &run);
    if (!run)
      return r;
  }
  else if (c->c_ex == NULL)
    return ZVOL_ADMIN_OK;
  zvol_pool_get_stats (c->c_pool, &ps);
  err = zvol_pool_error (c->c_pool);
  fprintf (c->c_out, "  pool: %s\n  guid: %016" PRIx64 "\n", ps.ps_name,
           ps.ps_guid);
  if (err != 0)
    fprintf (c->c_out, " state: SUSPENDED (a txg sync failed: %s; writes "
             "fail until the pool is imported again)\n", strerror (-err));
  else
    fprintf (c->c_out, " state: %s%s\n", ps.ps_degraded
             || ps.ps_resilver_active ? "DEGRADED"
             : "ONLINE", zvol_pool_is_readonly (c->c_pool)
             ? " (read-only)" : "");
  if (ps.ps_degraded)
    fprintf (c->c_out, "status: a side of a mirror is out of service; the "
             "pool goes on without it (the server's log says why)\n");
  if (ps.ps_resilver_active)
    fprintf (c->c_out, "resilver: device %u side %u, %" PRIu64 " of %"
             PRIu64 " bytes of its data area done (%.1f%%)\n",
             ps.ps_resilver_dev, ps.ps_resilver_side, ps.ps_resilver_done,
             ps.ps_resilver_total, ps.ps_resilver_total
             ? 100.0 * (double) ps.ps_resilver_done
             / (double) ps.ps_resilver_total : 100.0);
  fprintf (c->c_out, "devices:\n  %4s %6s %6s %6s  %s\n", "DEV", "READ",
           "WRITE", "CKSUM", "PATH");
  for (unsigned i = 0; i < ps.ps_ndevs && i < ZVOL_MAX_DEVS; i++) {
    fprintf (c->c_out, "  %4u %6" PRIu64 " %6" PRIu64 " %6" PRIu64
             "  %s%s\n", i, ps.ps_dev_read_errors[i],
             ps.ps_dev_write_errors[i], ps.ps_dev_cksum_errors[i],
             ps.ps_dev_path[i] ? ps.ps_dev_path[i] : "?",
             ps.ps_dev_direct[i] ? "" : "  (no direct I/O)");
    nerr += ps.ps_dev_read_errors[i] + ps.ps_dev_write_errors[i]
      + ps.ps_dev_cksum_errors[i];
    /* A mirror: its state, then each side (as zpool status indents the
     * leaves under their mirror), with its own counters. */
    if (ps.ps_dev_nsides[i] > 0)
      fprintf (c->c_out, "  %4s %6s %6s %6s    mirror %s\n", "", "", "", "",
               ps.ps_dev_degraded[i] ? "DEGRADED" : "ONLINE");
    for (unsigned s = 0; s < ps.ps_dev_nsides[i] && s < ZVOL_MAX_SIDES;
         s++) {
      const zvol_side_stats_t *sd = &ps.ps_dev_sides[i][s];

      fprintf (c->c_out, "  %4s %6" PRIu64 " %6" PRIu64 " %6" PRIu64
               "    side %u %-8s %s  (%" PRIu64 " reads, %" PRIu64
               " writes)%s%s\n", "", sd->ss_read_errors,
               sd->ss_write_errors, sd->ss_cksum_errors, s,
               sd->ss_online ? "ONLINE" : sd->ss_resilvering
               ? "RESILVERING" : "FAULTED",
               sd->ss_path ? sd->ss_path : "?", sd->ss_reads, sd->ss_writes,
               sd->ss_online || sd->ss_resilvering ? "" : ": ", sd->ss_why);
      nerr += sd->ss_read_errors + sd->ss_write_errors + sd->ss_cksum_errors;
    }
  }
  if (ps.ps_logdev_path != NULL) {
    fprintf (c->c_out, "  %4s %6" PRIu64 " %6" PRIu64 " %6" PRIu64 "  %s\n",
             "log", ps.ps_logdev_read_errors, ps.ps_logdev_write_errors,
             ps.ps_logdev_cksum_errors, ps.ps_logdev_path);
    nerr += ps.ps_logdev_read_errors + ps.ps_logdev_write_errors
      + ps.ps_logdev_cksum_errors;
  }
  if (nerr == 0)
    fprintf (c->c_out, "errors: none since the pool was opened\n");
  else
    fprintf (c->c_out, "errors: %" PRIu64 " since the pool was opened (the "
             "server's log says where)\n", nerr);
  zvol_admin_size (a, sizeof a, ps.ps_space_total, false);
  zvol_admin_size (b, sizeof b, ps.ps_space_allocated, false);
  zvol_admin_size (d, sizeof d, ps.ps_space_deferred, false);
  zvol_admin_size (f, sizeof f, zvol_pool_avail (c->c_pool), false);
  fprintf (c->c_out, " space: %s, %s allocated (%s of it freed, back in "
           "two txgs), %s available\n", a, b, d, f);
  if (ps.ps_space_held > 0) {
    zvol_admin_size (d, sizeof d, ps.ps_space_held, false);
    fprintf (c->c_out, "  held: %s freed, kept allocated until the "
             "running check ends\n", d);
  }
  zvol_admin_size (a, sizeof a, ps.ps_freeing, false);
  if (ps.ps_freeing_datasets > 0)
    fprintf (c->c_out, "freeing: %s, of %" PRIu64 " destroyed dataset%s "
             "(freed in the background%s)\n", a, ps.ps_freeing_datasets,
             ps.ps_freeing_datasets == 1 ? "" : "s",
             zvol_pool_is_readonly (c->c_pool)
             ? " by a read-write import" : "");
  else
    fprintf (c->c_out, "freeing: 0\n");
  fprintf (c->c_out, "   txg: %" PRIu64 " synced\n", ps.ps_txg_synced);
  fprintf (c->c_out, "  data: %zu volumes, %zu snapshots\n",
           zvol_dataset_list (c->c_pool, ZVOL_LIST_VOLUMES, NULL, 0),
           zvol_dataset_list (c->c_pool, ZVOL_LIST_SNAPSHOTS, NULL, 0));
  zvol_scrub_get_status (c->c_pool, &ss);
  admin_scrub_print (c->c_out, &ss);
  return err != 0 ? ZVOL_ADMIN_FAIL : ZVOL_ADMIN_OK;
}

/* A long command's progress: a line at most once a second (the first
 * and the last always), live as a progress frame (at once), offline on
 * the error stream. */
typedef struct admin_progress {
  admin_ctx_t *ap_c;
  uint64_t ap_last_ns;
} admin_progress_t;

/* Is a line due?  'last': the work is done, and its line always is. */
static bool
admin_progress_due (admin_progress_t *ap, bool last)
{
  uint64_t now = zv_now_ns ();

  if (!last && ap->ap_last_ns != 0
      && now - ap->ap_last_ns < 1000000000ull)
    return false;
  ap->ap_last_ns = now;
  return true;
}

static void
admin_progress_say (admin_progress_t *ap, const char *line)
{
  const zvol_admin_io_t *io = ap->ap_c->c_io;

  if (io && io->ai_progress)
    io->ai_progress (io->ai_progress_arg, line);    /* live: at once */
  else {
    fputs (line, ap->ap_c->c_err);
    fflush (ap->ap_c->c_err);
  }
}

/* check [-v] POOL: the whole pool walked and compared with its space
 * maps.  Offline zvoladm runs zvol_pool_check on the devices itself;
 * here, on a served pool, zvol_pool_check_live does it as of the last
 * committed txg, whose blocks a hold keeps while the walk runs (check.c).
 * It takes no turn of "one command at a time" (ctl.c: it may take
 * hours; the hold, not a lock, keeps a second one out), so snapshots
 * and the rest run beside it; it stops when the client goes or the
 * server stops (the cancel descriptors).  The report is the offline
 * one (cmd/zvoladm.c, za_check): both print with zvol_check_print_*. */
void
zvol_check_progress_line (char *buf, size_t len, const char *what,
                          uint64_t done, uint64_t total)
{
  char d[32], t[32];

  zvol_admin_size (d, sizeof d, done, false);
  zvol_admin_size (t, sizeof t, total, false);
  snprintf (buf, len, "%s: %s of %s (%.1f%%)\n", what, d, t,
            total ? 100.0 * (double) done / (double) total : 100.0);
}

void
zvol_check_print_problem (void *printer, const zvol_check_problem_t *cp)
{
  zvol_check_printer_t *pr = printer;

  if (cp->cp_kind <= ZVOL_CHECK_LEAK
      && pr->cp_shown[cp->cp_kind]++ < ZVOL_CHECK_PRINT_LIST)
    fprintf (pr->cp_out, "%s\n", cp->cp_msg);
  else
    pr->cp_more++;
}

bool
zvol_check_print_summary (const zvol_check_printer_t *pr, const char *pool,
                          const zvol_check_report_t *rep)
{
  FILE *o = pr->cp_out;
  char b1[32], b2[32];

  if (pr->cp_more > 0)
    fprintf (o, "... and %" PRIu64 " more problems (counted below)\n",
             pr->cp_more);
  zvol_admin_size (b1, sizeof b1, rep->cr_bytes, false);
  zvol_admin_size (b2, sizeof b2, rep->cr_allocated, false);
  fprintf (o, "%s: %" PRIu64 " trees, %" PRIu64 " blocks, %s read and "
           "verified (%s allocated)\n", pool, rep->cr_trees,
           rep->cr_blocks, b1, b2);
  fprintf (o, "  checksum errors %" PRIu64 ", read errors %" PRIu64
           ", blocks lost %" PRIu64 ", trees not walked to the end %" PRIu64
           "\n", rep->cr_cksum_errors, rep->cr_read_errors,
           rep->cr_lost_blocks, rep->cr_incomplete);
  zvol_admin_size (b1, sizeof b1, rep->cr_leaked_bytes, false);
  zvol_admin_size (b2, sizeof b2, rep->cr_double_bytes, false);
  fprintf (o, "  leaked %s in %" PRIu64 " extents, doubly allocated %s in %"
           PRIu64 " extents, pointers at free space %" PRIu64 "\n", b1,
           rep->cr_leaked, b2, rep->cr_double, rep->cr_free_refs);
  if (pr->cp_scrub) {
    uint64_t left = rep->cr_problems - ZV_MIN (rep->cr_repaired,
                                               rep->cr_problems);
    fprintf (o, "  repaired %" PRIu64 " copies, repairs failed %" PRIu64
             ", blocks that could not be repaired %" PRIu64 "\n",
             rep->cr_repaired, rep->cr_repair_failed, rep->cr_lost_blocks);
    if (rep->cr_problems == 0)
      fprintf (o, "No problems found.\n");
    else if (left == 0)
      fprintf (o, "All damage found was repaired.\n");
    else
      fprintf (o, "Problems remain.\n");
    return left == 0;
  }
  fprintf (o, "%s\n", rep->cr_problems == 0 ? "No problems found."
           : "Problems found.");
  return rep->cr_problems == 0;
}

static void
admin_check_progress (void *arg, const char *what, uint64_t done,
                      uint64_t total)
{
  admin_progress_t *ap = arg;
  char line[160];

  if (!admin_progress_due (ap, done >= total))
    return;
  zvol_check_progress_line (line, sizeof line, what, done, total);
  admin_progress_say (ap, line);
}

int
zv_admin_check (admin_ctx_t *c)
{
  admin_progress_t ap = { .ap_c = c };
  zvol_check_printer_t pr = { .cp_out = c->c_out };
  zvol_check_report_t rep = {
    .cr_problem = zvol_check_print_problem, .cr_problem_arg = &pr,
  };
  const char *name;
  bool run;
  int r;

  if (c->c_argc != 1)
    return zv_admin_usage (c, "check [-v] POOL");
  r = admin_live_pool (c, &run);
  if (!run)
    return r;
  name = zvol_pool_name (c->c_pool);
  r = zvol_pool_check_live (c->c_pool, &rep, c->c_io
                            ? c->c_io->ai_cancel_fd : NULL,
                            ADMIN_OPT (c, 'v') ? admin_check_progress : NULL,
                            &ap);
  if (r < 0) {
    zv_admin_err (c, "pool %s: the check %s (%s)", name, r == -ECANCELED
                  || r == -ENOSPC ? "was cancelled" : "did not run",
                  strerror (-r));
    return ZVOL_ADMIN_FAIL;
  }
  return zvol_check_print_summary (&pr, name, &rep) ? ZVOL_ADMIN_OK
    : ZVOL_ADMIN_FAIL;
}

/* scrub [-v] [-w | -p | -s] POOL, live: the server's background scrub
 * (scrub.c) started, or resumed when paused, and with -w waited for
 * (progress with -v), its summary then as status shows it; -p pauses,
 * -s cancels.  A long command (ctl.c) for -w.  Offline cmd/zvoladm.c
 * runs zvol_pool_scrub in the foreground instead. */
static void
admin_scrub_progress (void *arg, uint64_t done, uint64_t total)
{
  admin_progress_t ap = { .ap_c = arg };

  admin_check_progress (&ap, "scrub", done, total);
}

int
zv_admin_scrub (admin_ctx_t *c)
{
  const char *name;
  zvol_scrub_status_t st;
  bool run;
  int r;

  if (c->c_argc != 1
      || ADMIN_OPT (c, 'w') + ADMIN_OPT (c, 'p') + ADMIN_OPT (c, 's') > 1)
    return zv_admin_usage (c, "scrub [-v] [-w | -p | -s] POOL");
  r = admin_live_pool (c, &run);
  if (!run)
    return r;
  name = zvol_pool_name (c->c_pool);
  if (ADMIN_OPT (c, 'p') || ADMIN_OPT (c, 's')) {
    bool pause = ADMIN_OPT (c, 'p');
    r = pause ? zvol_scrub_pause (c->c_pool) : zvol_scrub_cancel (c->c_pool);
    if (r == -ENOENT) {
      zv_admin_err (c, "pool %s: no scrub is %s", name, pause ? "running"
                    : "running or paused");
      return ZVOL_ADMIN_FAIL;
    }
    zvol_scrub_get_status (c->c_pool, &st);
    fprintf (c->c_out, "pool %s: scrub %s\n", name, pause ? "paused"
             : "canceled");
    admin_scrub_print (c->c_out, &st);
    return admin_result (r);
  }
  r = zvol_scrub_start (c->c_pool);
  if (r == -EBUSY && ADMIN_OPT (c, 'w'))
    r = 2;                      /* one runs: -w waits for it */
  else if (r == -EBUSY) {
    zv_admin_err (c, "pool %s: a scrub is running (zvoladm status shows how "
                  "far; -w waits for it, -p pauses it, -s cancels it)", name);
    return ZVOL_ADMIN_FAIL;
  }
  if (r < 0)
    return admin_result (r);
  fprintf (c->c_out, "pool %s: scrub %s\n", name, r == 1 ? "resumed"
           : r == 2 ? "running" : "started");
  if (!ADMIN_OPT (c, 'w'))
    return ZVOL_ADMIN_OK;
  fflush (c->c_out);
  r = zvol_scrub_wait (c->c_pool, c->c_io ? c->c_io->ai_cancel_fd : NULL,
                       ADMIN_OPT (c, 'v') ? admin_scrub_progress : NULL, c);
  if (r < 0) {
    zv_admin_err (c, "pool %s: the wait ended (%s); the scrub goes on", name,
                  strerror (-r));
    return ZVOL_ADMIN_FAIL;
  }
  zvol_scrub_get_status (c->c_pool, &st);
  admin_scrub_print (c->c_out, &st);
  if (st.ss_state != ZVOL_SCRUB_FINISHED)
    return ZVOL_ADMIN_FAIL;
  fprintf (c->c_out, "%s\n", st.ss_problems == 0 ? "No problems found."
           : st.ss_problems == st.ss_repaired
           ? "All damage found was repaired." : "Problems remain.");
  return st.ss_problems == st.ss_repaired ? ZVOL_ADMIN_OK : ZVOL_ADMIN_FAIL;
}

/* wait POOL: until the background free of destroyed volumes and
 * snapshots is done and its space free again (offline, this import does
 * the freeing); what is left, at most once a second (live: as progress
 * frames, at once).  Live it is a long command as check is: no turn of
 * the control socket, ended by its client's going or the server's stop
 * (the free itself goes on). */
static void
admin_wait_progress (void *arg, uint64_t left, uint64_t total)
{
  admin_progress_t *ap = arg;
  char a[32], b[32], line[96];

  if (!admin_progress_due (ap, left == 0))
    return;
  zvol_admin_size (a, sizeof a, left, false);
  zvol_admin_size (b, sizeof b, total, false);
  snprintf (line, sizeof line, "freeing: %s left of %s\n", a, b);
  admin_progress_say (ap, line);
}

int
zv_admin_wait (admin_ctx_t *c)
{
  admin_progress_t ap = { .ap_c = c };
  bool run;
  int r;

  if (c->c_argc != 1)
    return zv_admin_usage (c, "wait POOL");
  r = admin_live_pool (c, &run);
  if (!run)
    return r;
  return admin_result (zvol_pool_wait_freeing (c->c_pool, c->c_io
                                               ? c->c_io->ai_cancel_fd : NULL,
                                               admin_wait_progress, &ap));
}
