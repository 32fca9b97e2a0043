/*
 * streamio.h: a send or receive stream on a file descriptor an admin
 * command was handed (zvoladm's stdout or stdin offline, the descriptor
 * a control socket client passed live), stoppable, with progress lines.
 * For admin.c; streamio.c has the theory.
 */
#ifndef ZV_STREAMIO_H
#define ZV_STREAMIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "zvol.h"

typedef struct zv_streamio {
  int si_stream;
  int si_cancel[2];             /* -1: unused */
  bool si_pipe;                 /* a FIFO: PIPE_BUF writes after POLLOUT */
  bool si_socket;
  bool si_cancelled;            /* a cancel fd fired: said once */
  const char *si_what;          /* "send", "receive" */
  bool si_verbose;              /* progress lines */
  struct timespec si_last;      /* the last progress line */
  void (*si_line) (void *arg, const char *line);
  void *si_line_arg;
  FILE *si_err;                 /* lines go here when si_line is NULL */
} zv_streamio_t;

/* Is fd a stream for this direction (out: send writes it)?  0, or
 * -EINVAL / -EBADF with the reason in why (a directory, a terminal, a
 * descriptor not open for that direction). */
int zv_streamio_check (int fd, bool out, char *why, size_t whylen);
/* Set up s on fd (checked) and fill io's callbacks with it. */
void zv_streamio_init (zv_streamio_t *s, int fd, bool out,
                       const int cancel[2], const char *what, bool verbose,
                       void (*line) (void *arg, const char *line),
                       void *line_arg, FILE *err, zvol_stream_io_t *io);

#endif /* ZV_STREAMIO_H */
