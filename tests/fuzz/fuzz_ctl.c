/*
 * fuzz_ctl: the control socket's messages (core/ctl.c), what any local
 * process of the server's uid may send it, and the command lines they
 * carry into the admin layer (core/admin.c).
 *
 * The input's first byte picks the parser, the rest is the message:
 *
 *   even   a request: zv_ctl_parse_req; an accepted one encodes back to
 *          the same bytes, its arguments are strings within the limits,
 *          and its command line goes through zvol_admin_parse, and, for
 *          a command that only reads (list, stats), zvol_admin_run on a
 *          pool "tank" with a volume "v" (memory device)
 *   odd    a reply or a progress frame: zv_ctl_parse_rep; an accepted
 *          one's parts lie in it, a progress frame has no output, exit
 *          code 0 and a bounded line
 *
 * A request's stream (send, receive) is a descriptor in ancillary data,
 * not in the bytes: run here without one, such a command must refuse
 * cleanly ("no stream"), as check refuses on an open pool.
 *
 * Checked besides "no crash": a refusal has a reason, and every reason
 * and every message the commands print or log is printable text (a
 * hostile argument must not write lines or terminal controls of its own
 * into zvoladm's output or the server's log).
 */
#include <config.h>

#include "fuzz.h"
#include "ctl.h"

#define CTL_DEVSIZE (20ull << 20)

static fz_memdev_t fz_md;
static zvol_pool_t *fz_pool;
static zvol_exports_t *fz_ex;

/* Printable text: lines of printable ASCII. */
static void
ctl_text_check (const char *s, size_t n)
{
  for (size_t i = 0; i < n; i++)
    FZ_CHECK (s[i] == '\n' || ((unsigned char) s[i] >= 0x20
                               && (unsigned char) s[i] < 0x7f));
}

static void
ctl_log_check (enum zv_log_level level, const char *msg)
{
  (void) level;
  ctl_text_check (msg, strlen (msg));
  FZ_CHECK (strchr (msg, '\n') == NULL);
}

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  zvol_pool_config_t pc;
  zvol_volume_params_t vp = { .vp_size = 1u << 20 };

  (void) argc;
  (void) argv;
  fz_setup ();
  fz_memdev_create (&fz_md, "ctl", CTL_DEVSIZE);
  zvol_pool_config_init (&pc);
  pc.pc_devices[0] = fz_md.md_path;
  pc.pc_ndevices = 1;
  pc.pc_create = true;
  pc.pc_name = "tank";
  pc.pc_zil_size = 512u << 10;
  pc.pc_cache_size = 1u << 20;
  pc.pc_txg.tt_timeout_ms = 3600 * 1000;
  if (zvol_pool_open (&pc, &fz_pool) < 0
      || zvol_volume_create (fz_pool, "v", &vp) < 0)
    abort ();
  fz_ex = zvol_exports_new (fz_pool, NULL);
  fz_log_check = ctl_log_check;
  return 0;
}

/* An accepted request's command line, as the server would take it. */
static void
ctl_command (const zv_ctl_req_t *rq)
{
  zvol_admin_target_t t;
  char *o = NULL, *e = NULL;
  size_t olen = 0, elen = 0;
  FILE *out = open_memstream (&o, &olen), *err = open_memstream (&e, &elen);
  int r;

  FZ_CHECK (out != NULL && err != NULL);
  r = zvol_admin_parse (rq->rq_argc, rq->rq_argv, &t, err);
  FZ_CHECK (r == ZVOL_ADMIN_OK || r == ZVOL_ADMIN_USAGE);
  if (r == ZVOL_ADMIN_OK) {
    FZ_CHECK (t.at_optind >= 1 && t.at_optind <= rq->rq_argc);
    FZ_CHECK (t.at_optind + t.at_noperands == rq->rq_argc);
    FZ_CHECK (t.at_ndevs <= ZVOL_MAX_DEVS);
    FZ_CHECK (memchr (t.at_pool, 0, sizeof t.at_pool) != NULL);
    /* Run what only reads: send among them, which finds no stream. */
    if (t.at_readonly) {
      r = zvol_admin_run (fz_ex, rq->rq_argc, rq->rq_argv, rq->rq_flags,
                          out, err);
      FZ_CHECK (r >= ZVOL_ADMIN_OK && r <= ZVOL_ADMIN_USAGE);
    }
  }
  FZ_CHECK (fclose (out) == 0 && fclose (err) == 0);
  ctl_text_check (e, elen);
  FZ_CHECK (zvol_exports_holds (fz_ex, "v") == 0);
  free (o);
  free (e);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  uint8_t *buf;
  size_t len;
  char why[256];

  if (size < 1)
    return 0;
  len = size - 1;
  buf = zv_alloc (len ? len : 1);
  memcpy (buf, data + 1, len);
  why[0] = '\0';
  if ((data[0] & 1) == 0) {
    zv_ctl_req_t rq;
    if (zv_ctl_parse_req (buf, len, &rq, why, sizeof why) == 0) {
      uint8_t *enc;
      size_t enclen;
      FZ_CHECK (rq.rq_argc >= 1 && rq.rq_argc <= (int) ZV_CTL_MAX_ARGC);
      FZ_CHECK (rq.rq_argv[rq.rq_argc] == NULL);
      for (int i = 0; i < rq.rq_argc; i++) {
        FZ_CHECK ((uint8_t *) rq.rq_argv[i] > buf
                  && (uint8_t *) rq.rq_argv[i] < buf + len);
        FZ_CHECK (strlen (rq.rq_argv[i]) < ZV_CTL_MAX_ARG);
      }
      FZ_CHECK (zv_ctl_encode_req (rq.rq_argc, rq.rq_argv, rq.rq_flags,
                                   &enc, &enclen) == 0);
      FZ_CHECK (enclen == len && memcmp (enc, buf, len) == 0);
      free (enc);
      ctl_command (&rq);
    }
    else {
      FZ_CHECK (why[0] != '\0');
      ctl_text_check (why, strlen (why));
    }
  }
  else {
    zv_ctl_rep_t rp;
    if (zv_ctl_parse_rep (buf, len, &rp, why, sizeof why) == 0) {
      FZ_CHECK (rp.rp_exit >= 0 && rp.rp_exit <= 125);
      FZ_CHECK (ZV_CTL_REP_HDR + rp.rp_outlen + rp.rp_errlen == len);
      FZ_CHECK ((const uint8_t *) rp.rp_err + rp.rp_errlen == buf + len);
      if (rp.rp_progress)
        FZ_CHECK (rp.rp_exit == 0 && rp.rp_outlen == 0
                  && rp.rp_errlen <= ZV_CTL_MAX_PROGRESS);
    }
    else {
      FZ_CHECK (why[0] != '\0');
      ctl_text_check (why, strlen (why));
    }
  }
  free (buf);
  return 0;
}
