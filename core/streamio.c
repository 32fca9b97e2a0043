/*
 * streamio.c: the stream of an admin command's send or receive, on a
 * descriptor the command did not open (streamio.h).
 *
 * Theory.  Offline the descriptor is zvoladm's own stdout or stdin; live
 * it is the client's, passed over the control socket, and this process
 * (the server) shares its open file description with the client.  So
 * nothing here changes the description's flags (O_NONBLOCK would change
 * the client's too): every read and write waits in poll, on the stream
 * and on up to two cancel descriptors, the control connection (the
 * client died or shut its side) and the server's stop pipe.  Either one
 * readable or hung up stops the stream with -ECANCELED, which send and
 * receive treat as any stream error (receive undoes what it applied).
 *
 * A blocking write to a pipe may wait for the reader however long it
 * takes, past any cancel; a write of at most PIPE_BUF after POLLOUT does
 * not block (a pipe that polls writable has a free page), so pipes get
 * writes of PIPE_BUF, sockets writes with MSG_DONTWAIT, and regular files
 * and devices plain writes (they do not wait for a reader).  A write to a
 * pipe whose reader is gone raises SIGPIPE, which would kill the server:
 * it is blocked on this thread around the write and a SIGPIPE the write
 * raised is taken back (sigtimedwait) before it is unblocked.
 *
 * The stream is checked before use: a regular file, FIFO, socket or
 * device (no directory, no terminal: the stream is binary), open for the
 * direction of the command.
 *
 * Progress: a line a second at most ("zvoladm: send: 12 of 40 MiB
 * (30%)") and the last one, to the line callback (live: a progress frame
 * to the client at once) or to the command's error stream.
 *
 * No state beyond the struct, which is one command's.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "zv_util.h"
#include "streamio.h"

int
zv_streamio_check (int fd, bool out, char *why, size_t whylen)
{
  struct stat st;
  int fl;

  if (fd < 0 || fstat (fd, &st) < 0 || (fl = fcntl (fd, F_GETFL)) < 0) {
    snprintf (why, whylen, "no stream: the descriptor is not open");
    return -EBADF;
  }
  if ((fl & O_PATH) != 0) {
    snprintf (why, whylen, "the stream's descriptor is a path (O_PATH), "
              "not an open file");
    return -EBADF;
  }
  if (!S_ISREG (st.st_mode) && !S_ISFIFO (st.st_mode)
      && !S_ISSOCK (st.st_mode) && !S_ISCHR (st.st_mode)
      && !S_ISBLK (st.st_mode)) {
    snprintf (why, whylen, "the stream is a %s: it must be a file, a pipe "
              "or a socket", S_ISDIR (st.st_mode) ? "directory"
              : "special file");
    return -EINVAL;
  }
  if (isatty (fd)) {
    snprintf (why, whylen, "the stream is binary: %s", out
              ? "redirect it to a file or a pipe"
              : "redirect it from a file or a pipe");
    return -EINVAL;
  }
  if ((out && (fl & O_ACCMODE) == O_RDONLY)
      || (!out && (fl & O_ACCMODE) == O_WRONLY)) {
    snprintf (why, whylen, "the stream's descriptor is not open for %s",
              out ? "writing" : "reading");
    return -EBADF;
  }
  return 0;
}

/* Wait until fd is ready for 'events': 0, -ECANCELED (said once), or
 * -EPIPE (writing: the reader is gone). */
static int
streamio_wait (zv_streamio_t *s, short events)
{
  for (;;) {
    struct pollfd pf[3] = { { .fd = s->si_stream, .events = events } };
    nfds_t n = 1;
    for (unsigned i = 0; i < 2; i++)
      if (s->si_cancel[i] >= 0) {
        pf[n].fd = s->si_cancel[i];
        pf[n++].events = POLLIN | POLLRDHUP;
      }
    if (poll (pf, n, -1) < 0) {
      if (errno == EINTR)
        continue;
      return -errno;
    }
    for (nfds_t i = 1; i < n; i++)
      if (pf[i].revents) {
        if (!s->si_cancelled)
          zv_error ("%s: stopped: the client is gone or the server is "
                    "stopping", s->si_what);
        s->si_cancelled = true;
        return -ECANCELED;
      }
    if (events == POLLOUT && (pf[0].revents & POLLERR))
      return -EPIPE;
    if (pf[0].revents)
      return 0;
  }
}

/* One write, SIGPIPE kept from the process. */
static ssize_t
streamio_write1 (zv_streamio_t *s, const void *buf, size_t len)
{
  sigset_t pipe_set, old, pending;
  struct timespec zero = { 0, 0 };
  bool was_pending;
  ssize_t n;
  int e;

  if (s->si_socket)
    return send (s->si_stream, buf, len, MSG_NOSIGNAL | MSG_DONTWAIT);
  sigemptyset (&pipe_set);
  sigaddset (&pipe_set, SIGPIPE);
  pthread_sigmask (SIG_BLOCK, &pipe_set, &old);
  sigpending (&pending);
  was_pending = sigismember (&pending, SIGPIPE);
  n = write (s->si_stream, buf, len);
  e = errno;
  if (n < 0 && e == EPIPE && !was_pending)
    while (sigtimedwait (&pipe_set, NULL, &zero) < 0 && errno == EINTR)
      ;
  pthread_sigmask (SIG_SETMASK, &old, NULL);
  errno = e;
  return n;
}

static int
streamio_write (void *arg, const void *buf, size_t len)
{
  zv_streamio_t *s = arg;
  size_t done = 0;

  while (done < len) {
    size_t chunk = len - done;
    ssize_t n;
    int r = streamio_wait (s, POLLOUT);
    if (r < 0)
      return r;
    if (s->si_pipe && chunk > PIPE_BUF)
      chunk = PIPE_BUF;
    n = streamio_write1 (s, (const char *) buf + done, chunk);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    if (n < 0)
      return -errno;
    done += (size_t) n;
  }
  return 0;
}

static int64_t
streamio_read (void *arg, void *buf, size_t len)
{
  zv_streamio_t *s = arg;

  for (;;) {
    ssize_t n;
    int r = streamio_wait (s, POLLIN);
    if (r < 0)
      return r;
    n = read (s->si_stream, buf, len);
    if (n < 0 && (errno == EINTR || errno == EAGAIN))
      continue;
    return n < 0 ? -errno : n;
  }
}

static void
streamio_progress (void *arg, uint64_t done, uint64_t total)
{
  zv_streamio_t *s = arg;
  struct timespec now;
  char line[160];

  clock_gettime (CLOCK_MONOTONIC, &now);
  if (done < total && s->si_last.tv_sec != 0
      && now.tv_sec - s->si_last.tv_sec < 1)
    return;
  s->si_last = now;
  snprintf (line, sizeof line, "zvoladm: %s: %" PRIu64 " of %" PRIu64
            " MiB (%.0f%%)\n", s->si_what, done >> 20, total >> 20,
            total ? 100.0 * (double) done / (double) total : 100.0);
  if (s->si_line)
    s->si_line (s->si_line_arg, line);
  else {
    fputs (line, s->si_err);
    fflush (s->si_err);
  }
}

void
zv_streamio_init (zv_streamio_t *s, int fd, bool out, const int cancel[2],
                  const char *what, bool verbose,
                  void (*line) (void *arg, const char *line),
                  void *line_arg, FILE *err, zvol_stream_io_t *io)
{
  struct stat st;

  memset (s, 0, sizeof *s);
  s->si_stream = fd;
  s->si_cancel[0] = cancel ? cancel[0] : -1;
  s->si_cancel[1] = cancel ? cancel[1] : -1;
  if (fstat (fd, &st) == 0) {
    s->si_pipe = S_ISFIFO (st.st_mode);
    s->si_socket = S_ISSOCK (st.st_mode);
  }
  s->si_what = what;
  s->si_verbose = verbose;
  s->si_line = line;
  s->si_line_arg = line_arg;
  s->si_err = err;
  memset (io, 0, sizeof *io);
  io->sio_fd = fd;
  if (out)
    io->sio_write = streamio_write;
  else
    io->sio_read = streamio_read;
  io->sio_arg = s;
  if (verbose) {
    io->sio_progress = streamio_progress;
    io->sio_progress_arg = s;
  }
}
