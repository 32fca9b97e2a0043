/*
 * ctl.h: the control socket's messages, for ctl.c, its unit test and
 * its fuzz harness (the server itself is zvol.h's zvol_ctl_*).
 *
 * A request, little-endian:
 *
 *   u32 magic "ZVCQ"  u16 version (1)  u16 flags (ZVOL_ADMIN_*)
 *   u32 argc (1..ZV_CTL_MAX_ARGC)  u32 length of what follows
 *   argc times: u32 n (1..ZV_CTL_MAX_ARG), n bytes: the argument and its
 *   NUL, none before it
 *
 * and the reply:
 *
 *   u32 magic "ZVCR"  u16 version  u16 zero  i32 exit code (0, 1, 2)
 *   u32 length of out  u32 length of err  then out, then err
 *
 * A request with flag ZV_CTL_F_STREAM (send, receive) carries one file
 * descriptor, the client's stdout or stdin, as SCM_RIGHTS ancillary data
 * (on its first bytes; no other ancillary data, no descriptor without
 * the flag).  Before its reply, such a command's server may send
 * progress frames, as a reply's header with magic "ZVCP", exit code 0,
 * no out and at most ZV_CTL_MAX_PROGRESS bytes of err: a line for the
 * client's stderr.
 *
 * The length in a header says how much to read before parsing; every
 * field is checked against it and against the limits, nothing trusted.
 */
#ifndef ZV_CTL_H
#define ZV_CTL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "zvol.h"

#define ZV_CTL_REQ_MAGIC 0x5143565au      /* "ZVCQ" on the wire */
#define ZV_CTL_REP_MAGIC 0x5243565au      /* "ZVCR" */
#define ZV_CTL_PROG_MAGIC 0x5043565au     /* "ZVCP" */
#define ZV_CTL_VERSION 1u
#define ZV_CTL_REQ_HDR 16u
#define ZV_CTL_REP_HDR 20u
#define ZV_CTL_MAX_ARGC 64u
#define ZV_CTL_MAX_ARG 4096u
#define ZV_CTL_MAX_REQ (64u << 10)        /* after the header */
#define ZV_CTL_MAX_OUT (16u << 20)        /* each of out and err */
#define ZV_CTL_MAX_PROGRESS 1024u
#define ZV_CTL_F_STREAM 0x2u              /* a descriptor comes with it */
#define ZV_CTL_FLAGS_KNOWN 0x3u           /* ZVOL_ADMIN_NOHEADER, STREAM */

typedef struct zv_ctl_req {
  unsigned rq_flags;
  int rq_argc;
  char *rq_argv[ZV_CTL_MAX_ARGC + 1];     /* into the buffer; NULL-ended */
} zv_ctl_req_t;

typedef struct zv_ctl_rep {
  bool rp_progress;                       /* a progress frame: rp_err */
  int rp_exit;
  const char *rp_out, *rp_err;            /* into the buffer */
  size_t rp_outlen, rp_errlen;
} zv_ctl_rep_t;

/* The header of a request: 0 and the length that follows it, or -EPROTO
 * with the reason in err. */
int zv_ctl_req_header (const uint8_t *hdr, size_t len, uint32_t *rest,
                       char *err, size_t errlen);
/* A whole request (header included): 0 with req's argv pointing into
 * buf, or -EPROTO with the reason. */
int zv_ctl_parse_req (uint8_t *buf, size_t len, zv_ctl_req_t *req,
                      char *err, size_t errlen);
/* The same for a reply or a progress frame (rp_progress). */
int zv_ctl_rep_header (const uint8_t *hdr, size_t len, uint64_t *rest,
                       char *err, size_t errlen);
int zv_ctl_parse_rep (const uint8_t *buf, size_t len, zv_ctl_rep_t *rep,
                      char *err, size_t errlen);
/* Encode: a buffer to free(), or -E2BIG / -EINVAL past the limits. */
int zv_ctl_encode_req (int argc, char *const *argv, unsigned flags,
                       uint8_t **bufp, size_t *lenp);
void zv_ctl_encode_rep (int exitcode, const char *out, size_t outlen,
                        const char *err, size_t errlen, uint8_t **bufp,
                        size_t *lenp);
/* A progress frame of text (cut at ZV_CTL_MAX_PROGRESS). */
void zv_ctl_encode_progress (const char *text, size_t len, uint8_t **bufp,
                             size_t *lenp);

/* Tests: the uid the server sees its peer as (returns the real one
 * when unset), and the command a request runs instead of the admin
 * layer's.  Set before zvol_ctl_start. */
extern uid_t (*zv_ctl_peer_uid_hook) (uid_t uid);
extern int (*zv_ctl_run_hook) (zvol_exports_t *ex, int argc,
                               char *const *argv, unsigned flags, FILE *out,
                               FILE *err);

#endif /* ZV_CTL_H */
