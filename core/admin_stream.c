/*
 * admin_stream.c: the admin commands send and receive (admin.c's
 * theory comment has the command layer).
 *
 * Theory.  send and receive work on a descriptor they are handed
 * (zvol_admin_run_io: zvoladm's stdout or stdin, or live the one its
 * client passed), checked and driven by streamio.c, stoppable by the
 * caller's cancel descriptors; zvol_admin_parse tells zvoladm which of
 * the two it is to hand (at_stream).  A failure is said with the
 * command's operand.
 */
#include <config.h>

#include <string.h>

#include "zvol.h"
#include "zv_util.h"
#include "streamio.h"
#include "admin_impl.h"

/* The stream of c's command, checked (type, direction, no terminal):
 * ZVOL_ADMIN_OK and *fdp, or a failure said. */
static int
admin_stream_fd (admin_ctx_t *c, bool out, int *fdp)
{
  int fd = c->c_io ? c->c_io->ai_stream_fd : -1;
  char why[160];

  if (fd < 0) {
    zv_admin_err (c, "%s: no stream (zvoladm gives it its standard %s)",
                  c->c_cmd->ac_name, out ? "output" : "input");
    return ZVOL_ADMIN_FAIL;
  }
  if (zv_streamio_check (fd, out, why, sizeof why) < 0) {
    zv_admin_err (c, "%s: %s", c->c_cmd->ac_name, why);
    return ZVOL_ADMIN_FAIL;
  }
  *fdp = fd;
  return ZVOL_ADMIN_OK;
}

/* Set up the stream of the command (checked, as admin_stream_fd). */
static int
admin_stream_io (admin_ctx_t *c, bool out, zv_streamio_t *si,
                 zvol_stream_io_t *io)
{
  const zvol_admin_io_t *a = c->c_io;
  int fd, r = admin_stream_fd (c, out, &fd);

  if (r != ZVOL_ADMIN_OK)
    return r;
  zv_streamio_init (si, fd, out, a->ai_cancel_fd, c->c_cmd->ac_name,
                    ADMIN_OPT (c, 'v'), a->ai_progress, a->ai_progress_arg,
                    c->c_err, io);
  return ZVOL_ADMIN_OK;
}

/* A stream command's result, its failure said with the operand. */
static int
admin_stream_result (admin_ctx_t *c, int r)
{
  if (r < 0) {
    char shown[4 * ZVOL_NAME_MAX + 8];
    zv_str_printable (c->c_argv[0], 2 * ZVOL_NAME_MAX, shown, sizeof shown);
    zv_admin_err (c, "%s %s failed: %s", c->c_cmd->ac_name, shown,
                  strerror (-r));
  }
  return admin_result (r);
}

/* send [-v] [-i POOL/VOL@FROM] POOL/VOL@SNAP: the snapshot as a stream
 * on the caller's stream (live: the client's stdout, passed to the
 * server), full or from the older snapshot FROM; the volume may be
 * served meanwhile (a snapshot does not change). */
int
zv_admin_send (admin_ctx_t *c)
{
  char snap[2 * ZVOL_NAME_MAX], from[2 * ZVOL_NAME_MAX];
  const char *fa = c->c_val['i'];
  bool incr = ADMIN_OPT (c, 'i');
  zv_streamio_t si;
  zvol_stream_io_t io;
  int r;

  if (c->c_argc != 1)
    return zv_admin_usage (c, "send [-v] [-i POOL/VOL@FROM] POOL/VOL@SNAP");
  r = zv_admin_dataset_operand (c, 0, true, snap);
  if (r == ZVOL_ADMIN_OK && incr) {
    size_t pl = strcspn (c->c_argv[0], "/");
    if (strncmp (fa, c->c_argv[0], pl) != 0 || fa[pl] != '/')
      return zv_admin_usage (c, "send -i: a snapshot POOL/VOL@FROM of the "
                             "same pool");
    r = zv_admin_dataset_arg (c, fa, true, from);
  }
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  r = admin_stream_io (c, true, &si, &io);
  if (r != ZVOL_ADMIN_OK)
    return r;
  return admin_stream_result (c, zvol_send (c->c_pool, snap,
                                            incr ? from : NULL, &io));
}

/* receive [-v] POOL/VOL[@SNAP]: a stream from the caller's stream into
 * a new volume (full) or VOL (incremental), VOL unheld meanwhile (live:
 * refused while a client has it open); a failure, a cut stream or a
 * client gone mid-way leaves nothing of it.  A new volume is served at
 * once. */
int
zv_admin_receive (admin_ctx_t *c)
{
  char name[2 * ZVOL_NAME_MAX];
  zv_streamio_t si;
  zvol_stream_io_t io;
  int r;

  if (c->c_argc != 1)
    return zv_admin_usage (c, "receive [-v] POOL/VOL[@SNAP]");
  r = zv_admin_dataset_operand (c, 0, strchr (c->c_argv[0], '@') != NULL,
                                name);
  if (r != ZVOL_ADMIN_OK || c->c_ex == NULL)
    return r;
  r = admin_stream_io (c, false, &si, &io);
  if (r != ZVOL_ADMIN_OK)
    return r;
  return admin_stream_result (c, zvol_exports_receive (c->c_ex, name, &io));
}
