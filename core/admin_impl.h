/*
 * admin_impl.h: what the admin command layer's files share (admin.c, the
 * frame; admin_dataset.c, admin_pool.c and admin_stream.c, the commands
 * by family): a command's context, the option and operand checks, the
 * messages, and the commands' functions, which admin.c's table names.
 * Nothing else includes it; zvol.h declares the admin API.
 */
#ifndef ZV_ADMIN_IMPL_H
#define ZV_ADMIN_IMPL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "zvol.h"

#define ADMIN_MAXOPT 128        /* option letters: ASCII */

typedef struct admin_ctx admin_ctx_t;

typedef struct admin_cmd {
  const char *ac_name;
  const char *ac_opts;          /* letters; ':' after one taking a value */
  const char *ac_usage;         /* after "zvoladm " */
  bool ac_readonly;             /* offline: a read-only import does */
  int (*ac_fn) (admin_ctx_t *c);
} admin_cmd_t;

struct admin_ctx {
  const admin_cmd_t *c_cmd;
  zvol_exports_t *c_ex;         /* NULL: only check the arguments */
  zvol_pool_t *c_pool;
  zvol_admin_target_t *c_target;  /* set while parsing */
  unsigned c_flags;             /* ZVOL_ADMIN_* */
  FILE *c_out, *c_err;
  const zvol_admin_io_t *c_io;  /* the stream and its cancels, or NULL */
  bool c_seen[ADMIN_MAXOPT];
  const char *c_val[ADMIN_MAXOPT];
  const char *c_devs[ZVOL_MAX_DEVS];
  unsigned c_ndevs;
  int c_argc;                   /* operands */
  char *const *c_argv;
};

#define ADMIN_OPT(c, l) ((c)->c_seen[(unsigned char) (l)])

/* An engine result as the exit code (the engine said why). */
static inline int
admin_result (int r)
{
  return r < 0 ? ZVOL_ADMIN_FAIL : ZVOL_ADMIN_OK;
}

/* ---- admin.c: messages, options and operands ---- */

/* "zvoladm: MESSAGE" on the command's error stream. */
void zv_admin_err (admin_ctx_t *c, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
/* A usage error: the reason (if any), the command's usage lines;
 * returns ZVOL_ADMIN_USAGE. */
int zv_admin_usage (admin_ctx_t *c, const char *fmt, ...)
  __attribute__ ((format (printf, 2, 3)));
int zv_admin_opt_size (admin_ctx_t *c, char letter, uint64_t *out);
int zv_admin_volume_operand (admin_ctx_t *c, int k, char *vol);
int zv_admin_dataset_operand (admin_ctx_t *c, int k, bool snap, char *name);
int zv_admin_dataset_arg (admin_ctx_t *c, const char *arg, bool snap,
                          char *name);
int zv_admin_pool_operand (admin_ctx_t *c, int k, bool *match);
/* "NAME is not this pool (POOL)"; returns ZVOL_ADMIN_FAIL. */
int zv_admin_not_this_pool (admin_ctx_t *c, const char *pool);

/* ---- the commands (admin.c's table; each checks its arguments, and
 * with c_ex NULL stops there) ---- */

/* admin_dataset.c */
int zv_admin_create (admin_ctx_t *c);
int zv_admin_destroy (admin_ctx_t *c);
int zv_admin_snapshot (admin_ctx_t *c);
int zv_admin_rollback (admin_ctx_t *c);
int zv_admin_clone (admin_ctx_t *c);
int zv_admin_diff (admin_ctx_t *c);
int zv_admin_list (admin_ctx_t *c);
int zv_admin_set (admin_ctx_t *c);
int zv_admin_get (admin_ctx_t *c);

/* admin_pool.c */
int zv_admin_stats (admin_ctx_t *c);
int zv_admin_status (admin_ctx_t *c);
int zv_admin_replace (admin_ctx_t *c);
int zv_admin_check (admin_ctx_t *c);
int zv_admin_scrub (admin_ctx_t *c);
int zv_admin_wait (admin_ctx_t *c);

/* admin_stream.c */
int zv_admin_send (admin_ctx_t *c);
int zv_admin_receive (admin_ctx_t *c);

#endif /* ZV_ADMIN_IMPL_H */
