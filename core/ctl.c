/*
 * ctl.c: the control socket of a running server (zvol.h, "the control
 * socket"), through which zvoladm runs the admin commands of admin.c on
 * the server's pool, and the client side of it.
 *
 * Theory.  The device locks keep zvoladm from importing a pool a server
 * has open, so the live path goes through the server: a Unix stream
 * socket, one request per connection (a command line, ctl.h's format),
 * one reply (exit code, output, messages), then the server closes.
 *
 * Security: the socket is the server's owner's.  Its file is created
 * mode 0600 (the socket's inode is set so before bind, which gives the
 * file its mode; checked, and set by path if the kernel did not, still
 * before listen: until listen nobody can connect), in a directory made
 * 0700 when we make it.  Each peer's uid (SO_PEERCRED) must be the
 * server's euid or root; anyone else is refused, in the log and in the
 * reply.  Everything a peer sends is hostile: a header read with a
 * deadline (ctl_io_timeout), checked (magic, version, flags, counts and
 * a length within ZV_CTL_MAX_REQ) before the rest is read, the rest
 * parsed against the lengths (zv_ctl_parse_req, which the fuzz harness
 * feeds); the tunables are read once, at start (no lock on them later);
 * a bad message gets a reply saying what is wrong, then the connection
 * is closed.  A client parses the reply the same way.
 *
 * Streams (send, receive): the client passes its stdout or stdin as
 * SCM_RIGHTS with the request (flag ZV_CTL_F_STREAM).  Every read of a
 * request is a recvmsg, so a descriptor anywhere in it is seen (a plain
 * read would drop it unseen): at most CTL_MAX_FDS are kept and the rest
 * closed; ancillary data of another kind, or cut, refuses the request,
 * and so does a descriptor count other than one with the flag and zero
 * without.  Every descriptor received is closed when the connection's
 * request is done.  The command (admin.c) checks the descriptor's type
 * and direction and runs the stream with two cancel descriptors: the
 * connection, which turns readable when the client goes (it sends
 * nothing after its request), and the wake pipe, which turns readable at
 * stop and stays so.  Progress lines go to the client as frames (ctl.h)
 * as they come; the client waits for its reply without a deadline.
 *
 * Threads and state: a listener thread polls the socket and a wake
 * pipe; each accepted connection gets a detached thread (at most
 * CTL_MAX_CONN at once; one more is refused at once), which checks the
 * peer, reads and parses, then waits for its turn: one admin command at
 * a time (ct_busy), a waiter giving up after ctl_busy_wait with
 * "another admin command is running".  A stream takes no turn (it may
 * run for hours; the engine holds the datasets it uses), nor does a
 * check (hours too: its free hold keeps a second one out, and a turn
 * would keep snapshots waiting and failing meanwhile), at most
 * CTL_MAX_STREAMS of them at once (ct_nstreams; one more is refused);
 * both get the cancel descriptors, and a check's client waits for its
 * reply without a deadline, as a stream's.  ct_lock
 * guards ct_busy, ct_nstreams, the connections' fds and count and
 * ct_stop; ct_cv is signalled when any of them changes.  Stop: the
 * listener is woken and joined, waiters are told to give up,
 * connections are shut down (a peer that sends nothing is cut off, a
 * stream is cancelled), a command that runs finishes, and once the last
 * connection thread is gone the socket file is removed, if it is still
 * ours (same inode: a server that replaced it keeps its own).
 *
 * A stale socket (its server was killed) is replaced at start, only when
 * a connect to it is refused; a socket that answers is another server's,
 * and start fails with -EADDRINUSE.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>

#include "dev.h"
#include "zvol.h"
#include "zv_util.h"
#include "tunable.h"
#include "ctl.h"

#define CTL_MAX_CONN 8u
#define CTL_MAX_STREAMS 4u         /* sends and receives at once */
#define CTL_CLIENT_TIMEOUT_S 600   /* a client waits this long for a reply */

unsigned zv_ctl_busy_wait_ms = 30000;
unsigned zv_ctl_io_timeout_ms = 10000;

uid_t (*zv_ctl_peer_uid_hook) (uid_t uid);
int (*zv_ctl_run_hook) (zvol_exports_t *ex, int argc, char *const *argv,
                        unsigned flags, FILE *out, FILE *err);

struct zvol_ctl {
  zvol_exports_t *ct_ex;
  char *ct_path;
  int ct_fd;                    /* listening */
  int ct_wake[2];               /* a byte in it: stop */
  dev_t ct_dev;                 /* the socket file we made */
  ino_t ct_ino;
  pthread_t ct_thread;
  pthread_mutex_t ct_lock;
  pthread_cond_t ct_cv;         /* CLOCK_MONOTONIC */
  int ct_conn[CTL_MAX_CONN];    /* -1: free */
  unsigned ct_nconn;
  bool ct_busy;                 /* a command runs */
  unsigned ct_nstreams;         /* streams running (no turn taken) */
  bool ct_stop;
  unsigned ct_busy_wait_ms;     /* the tunables, read at start */
  unsigned ct_io_timeout_ms;
};

/* ---- the messages ---- */

static uint32_t
ctl_get32 (const uint8_t *p)
{
  return (uint32_t) p[0] | (uint32_t) p[1] << 8 | (uint32_t) p[2] << 16
    | (uint32_t) p[3] << 24;
}

static uint16_t
ctl_get16 (const uint8_t *p)
{
  return (uint16_t) (p[0] | p[1] << 8);
}

static void
ctl_put32 (uint8_t *p, uint32_t v)
{
  p[0] = (uint8_t) v;
  p[1] = (uint8_t) (v >> 8);
  p[2] = (uint8_t) (v >> 16);
  p[3] = (uint8_t) (v >> 24);
}

static void
ctl_put16 (uint8_t *p, uint16_t v)
{
  p[0] = (uint8_t) v;
  p[1] = (uint8_t) (v >> 8);
}

/* The reason of a -EPROTO. */
static int __attribute__ ((format (printf, 3, 4)))
ctl_bad (char *err, size_t errlen, const char *fmt, ...)
{
  va_list ap;

  va_start (ap, fmt);
  vsnprintf (err, errlen, fmt, ap);
  va_end (ap);
  return -EPROTO;
}

int
zv_ctl_req_header (const uint8_t *hdr, size_t len, uint32_t *rest, char *err,
                   size_t errlen)
{
  uint32_t magic, argc, n;
  unsigned version, flags;

  if (len < ZV_CTL_REQ_HDR)
    return ctl_bad (err, errlen, "a request of %zu bytes is shorter than "
                    "its header (%u)", len, ZV_CTL_REQ_HDR);
  magic = ctl_get32 (hdr);
  version = ctl_get16 (hdr + 4);
  flags = ctl_get16 (hdr + 6);
  argc = ctl_get32 (hdr + 8);
  n = ctl_get32 (hdr + 12);
  if (magic != ZV_CTL_REQ_MAGIC)
    return ctl_bad (err, errlen, "not a zvoladm request (magic %08" PRIx32
                    ")", magic);
  if (version != ZV_CTL_VERSION)
    return ctl_bad (err, errlen, "protocol version %u: this server speaks "
                    "version %u (use the zvoladm of its release)", version,
                    ZV_CTL_VERSION);
  if (flags & ~ZV_CTL_FLAGS_KNOWN)
    return ctl_bad (err, errlen, "unknown flags %#x", flags);
  if (argc == 0 || argc > ZV_CTL_MAX_ARGC)
    return ctl_bad (err, errlen, "%" PRIu32 " arguments: 1 to %u are "
                    "allowed", argc, ZV_CTL_MAX_ARGC);
  if (n > ZV_CTL_MAX_REQ || n < argc * 5u)
    return ctl_bad (err, errlen, "a request body of %" PRIu32 " bytes for %"
                    PRIu32 " arguments (at most %u bytes)", n, argc,
                    ZV_CTL_MAX_REQ);
  *rest = n;
  return 0;
}

int
zv_ctl_parse_req (uint8_t *buf, size_t len, zv_ctl_req_t *req, char *err,
                  size_t errlen)
{
  uint32_t rest;
  size_t off = ZV_CTL_REQ_HDR;
  int r = zv_ctl_req_header (buf, len, &rest, err, errlen);

  memset (req, 0, sizeof *req);
  if (r < 0)
    return r;
  if (len - ZV_CTL_REQ_HDR != rest)
    return ctl_bad (err, errlen, "the header says %" PRIu32 " bytes follow, "
                    "%zu do", rest, len - ZV_CTL_REQ_HDR);
  req->rq_flags = ctl_get16 (buf + 6);
  req->rq_argc = (int) ctl_get32 (buf + 8);
  for (int i = 0; i < req->rq_argc; i++) {
    uint32_t n;
    if (len - off < 4)
      return ctl_bad (err, errlen, "argument %d: its length is cut off", i);
    n = ctl_get32 (buf + off);
    off += 4;
    if (n == 0 || n > ZV_CTL_MAX_ARG)
      return ctl_bad (err, errlen, "argument %d: %" PRIu32 " bytes (1 to %u "
                      "with its NUL)", i, n, ZV_CTL_MAX_ARG);
    if (n > len - off)
      return ctl_bad (err, errlen, "argument %d: %" PRIu32 " bytes, %zu "
                      "left", i, n, len - off);
    if (buf[off + n - 1] != '\0' || memchr (buf + off, 0, n - 1) != NULL)
      return ctl_bad (err, errlen, "argument %d: not one NUL-terminated "
                      "string", i);
    req->rq_argv[i] = (char *) buf + off;
    off += n;
  }
  if (off != len)
    return ctl_bad (err, errlen, "%zu bytes after the last argument",
                    len - off);
  req->rq_argv[req->rq_argc] = NULL;
  return 0;
}

int
zv_ctl_rep_header (const uint8_t *hdr, size_t len, uint64_t *rest, char *err,
                   size_t errlen)
{
  uint32_t magic, outlen, errl;
  unsigned version, zero;
  int32_t code;

  if (len < ZV_CTL_REP_HDR)
    return ctl_bad (err, errlen, "a reply of %zu bytes is shorter than its "
                    "header (%u)", len, ZV_CTL_REP_HDR);
  magic = ctl_get32 (hdr);
  version = ctl_get16 (hdr + 4);
  zero = ctl_get16 (hdr + 6);
  code = (int32_t) ctl_get32 (hdr + 8);
  outlen = ctl_get32 (hdr + 12);
  errl = ctl_get32 (hdr + 16);
  if (magic != ZV_CTL_REP_MAGIC && magic != ZV_CTL_PROG_MAGIC)
    return ctl_bad (err, errlen, "not a zvol server's reply (magic %08"
                    PRIx32 ")", magic);
  if (magic == ZV_CTL_PROG_MAGIC
      && (code != 0 || outlen != 0 || errl > ZV_CTL_MAX_PROGRESS))
    return ctl_bad (err, errlen, "a progress frame with exit code %" PRId32
                    ", %" PRIu32 " + %" PRIu32 " bytes (0, 0 and at most "
                    "%u)", code, outlen, errl, ZV_CTL_MAX_PROGRESS);
  if (version != ZV_CTL_VERSION || zero != 0)
    return ctl_bad (err, errlen, "reply of protocol version %u (this "
                    "zvoladm speaks %u)", version, ZV_CTL_VERSION);
  if (code < 0 || code > 125)
    return ctl_bad (err, errlen, "exit code %" PRId32 " out of range", code);
  if (outlen > ZV_CTL_MAX_OUT || errl > ZV_CTL_MAX_OUT)
    return ctl_bad (err, errlen, "a reply of %" PRIu32 " + %" PRIu32
                    " bytes (at most %u each)", outlen, errl,
                    ZV_CTL_MAX_OUT);
  *rest = (uint64_t) outlen + errl;
  return 0;
}

int
zv_ctl_parse_rep (const uint8_t *buf, size_t len, zv_ctl_rep_t *rep,
                  char *err, size_t errlen)
{
  uint64_t rest;
  int r = zv_ctl_rep_header (buf, len, &rest, err, errlen);

  memset (rep, 0, sizeof *rep);
  if (r < 0)
    return r;
  if (len - ZV_CTL_REP_HDR != rest)
    return ctl_bad (err, errlen, "the reply's header says %" PRIu64
                    " bytes follow, %zu do", rest, len - ZV_CTL_REP_HDR);
  rep->rp_progress = ctl_get32 (buf) == ZV_CTL_PROG_MAGIC;
  rep->rp_exit = (int) ctl_get32 (buf + 8);
  rep->rp_outlen = ctl_get32 (buf + 12);
  rep->rp_errlen = ctl_get32 (buf + 16);
  rep->rp_out = (const char *) buf + ZV_CTL_REP_HDR;
  rep->rp_err = rep->rp_out + rep->rp_outlen;
  return 0;
}

int
zv_ctl_encode_req (int argc, char *const *argv, unsigned flags,
                   uint8_t **bufp, size_t *lenp)
{
  size_t n = 0, off = ZV_CTL_REQ_HDR;
  uint8_t *buf;

  *bufp = NULL;
  if (argc < 1 || (unsigned) argc > ZV_CTL_MAX_ARGC
      || (flags & ~ZV_CTL_FLAGS_KNOWN))
    return -EINVAL;
  for (int i = 0; i < argc; i++) {
    size_t l = strlen (argv[i]) + 1;
    if (l > ZV_CTL_MAX_ARG)
      return -E2BIG;
    n += 4 + l;
  }
  if (n > ZV_CTL_MAX_REQ)
    return -E2BIG;
  buf = zv_alloc (ZV_CTL_REQ_HDR + n);
  ctl_put32 (buf, ZV_CTL_REQ_MAGIC);
  ctl_put16 (buf + 4, ZV_CTL_VERSION);
  ctl_put16 (buf + 6, (uint16_t) flags);
  ctl_put32 (buf + 8, (uint32_t) argc);
  ctl_put32 (buf + 12, (uint32_t) n);
  for (int i = 0; i < argc; i++) {
    size_t l = strlen (argv[i]) + 1;
    ctl_put32 (buf + off, (uint32_t) l);
    memcpy (buf + off + 4, argv[i], l);
    off += 4 + l;
  }
  *bufp = buf;
  *lenp = off;
  return 0;
}

void
zv_ctl_encode_rep (int exitcode, const char *out, size_t outlen,
                   const char *err, size_t errlen, uint8_t **bufp,
                   size_t *lenp)
{
  uint8_t *buf;

  outlen = ZV_MIN (outlen, (size_t) ZV_CTL_MAX_OUT);
  errlen = ZV_MIN (errlen, (size_t) ZV_CTL_MAX_OUT);
  buf = zv_alloc (ZV_CTL_REP_HDR + outlen + errlen);
  ctl_put32 (buf, ZV_CTL_REP_MAGIC);
  ctl_put16 (buf + 4, ZV_CTL_VERSION);
  ctl_put16 (buf + 6, 0);
  ctl_put32 (buf + 8, (uint32_t) exitcode);
  ctl_put32 (buf + 12, (uint32_t) outlen);
  ctl_put32 (buf + 16, (uint32_t) errlen);
  if (outlen)
    memcpy (buf + ZV_CTL_REP_HDR, out, outlen);
  if (errlen)
    memcpy (buf + ZV_CTL_REP_HDR + outlen, err, errlen);
  *bufp = buf;
  *lenp = ZV_CTL_REP_HDR + outlen + errlen;
}

void
zv_ctl_encode_progress (const char *text, size_t len, uint8_t **bufp,
                        size_t *lenp)
{
  len = ZV_MIN (len, (size_t) ZV_CTL_MAX_PROGRESS);
  zv_ctl_encode_rep (0, NULL, 0, text, len, bufp, lenp);
  ctl_put32 (*bufp, ZV_CTL_PROG_MAGIC);
}

/* ---- sockets ---- */

/* Read exactly len bytes: 0, 1 at end of file first, or -errno
 * (-EAGAIN: the receive timeout passed). */
static int
ctl_read_full (int fd, void *buf, size_t len)
{
  size_t done = 0;

  while (done < len) {
    ssize_t n = read (fd, (char *) buf + done, len - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    if (n == 0)
      return 1;
    done += (size_t) n;
  }
  return 0;
}

/*
 * The descriptors a peer sent with its request (SCM_RIGHTS), gathered
 * by every read of it: at most CTL_MAX_FDS kept, any more closed; any
 * other ancillary data, or data cut (MSG_CTRUNC), marks the request bad.
 */
#define CTL_MAX_FDS 4u

typedef struct ctl_fds {
  int cf_fd[CTL_MAX_FDS];
  unsigned cf_n;                /* kept */
  unsigned cf_seen;             /* sent, kept or not */
  bool cf_bad;                  /* other ancillary data, or cut */
} ctl_fds_t;

static void
ctl_fds_close (ctl_fds_t *cf)
{
  for (unsigned i = 0; i < cf->cf_n; i++)
    close (cf->cf_fd[i]);
  cf->cf_n = 0;
}

static void
ctl_fds_take (ctl_fds_t *cf, struct msghdr *mh)
{
  if (mh->msg_flags & MSG_CTRUNC)
    cf->cf_bad = true;
  for (struct cmsghdr *cm = CMSG_FIRSTHDR (mh); cm;
       cm = CMSG_NXTHDR (mh, cm)) {
    size_t n;
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS
        || cm->cmsg_len < CMSG_LEN (0)) {
      cf->cf_bad = true;
      continue;
    }
    n = (cm->cmsg_len - CMSG_LEN (0)) / sizeof (int);
    for (size_t i = 0; i < n; i++) {
      int fd;
      memcpy (&fd, CMSG_DATA (cm) + i * sizeof fd, sizeof fd);
      cf->cf_seen++;
      if (cf->cf_n < CTL_MAX_FDS)
        cf->cf_fd[cf->cf_n++] = fd;
      else
        close (fd);
    }
  }
}

/* ctl_read_full, through recvmsg: the descriptors that come go to cf
 * (a plain read would drop them unseen). */
static int
ctl_recv_full (int fd, void *buf, size_t len, ctl_fds_t *cf)
{
  size_t done = 0;

  while (done < len) {
    union {
      struct cmsghdr cm;
      char space[CMSG_SPACE (CTL_MAX_FDS * sizeof (int))];
    } ctrl;
    struct iovec iov = { (char *) buf + done, len - done };
    struct msghdr mh = {
      .msg_iov = &iov, .msg_iovlen = 1,
      .msg_control = &ctrl, .msg_controllen = sizeof ctrl,
    };
    ssize_t n = recvmsg (fd, &mh, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    ctl_fds_take (cf, &mh);
    if (n == 0)
      return 1;
    done += (size_t) n;
  }
  return 0;
}

static int
ctl_write_full (int fd, const void *buf, size_t len)
{
  size_t done = 0;

  while (done < len) {
    ssize_t n = send (fd, (const char *) buf + done, len - done,
                      MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return -errno;
    done += (size_t) n;
  }
  return 0;
}

static void
ctl_timeouts (int fd, unsigned ms)
{
  struct timeval tv = { .tv_sec = ms / 1000,
                        .tv_usec = (suseconds_t) (ms % 1000) * 1000 };

  (void) setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  (void) setsockopt (fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

/* The address of path: 0 or -ENAMETOOLONG. */
static int
ctl_addr (const char *path, struct sockaddr_un *sa)
{
  memset (sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  if (strlen (path) >= sizeof sa->sun_path)
    return -ENAMETOOLONG;
  memcpy (sa->sun_path, path, strlen (path));
  return 0;
}

/* Connect to path: 0 and *fdp, or -errno. */
static int
ctl_connect (const char *path, int *fdp)
{
  struct sockaddr_un sa;
  int fd, r = ctl_addr (path, &sa);

  if (r < 0)
    return r;
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return -errno;
  if (connect (fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
    r = -errno;
    close (fd);
    return r;
  }
  *fdp = fd;
  return 0;
}

/* ---- the server ---- */

/* Reply with an exit code and a message, no output. */
static void
ctl_reply_msg (int fd, int code, const char *msg)
{
  uint8_t *buf;
  size_t len;
  char *text = NULL;

  if (asprintf (&text, "zvoladm: %s\n", msg) < 0)
    zv_nomem (strlen (msg) + 16);
  zv_ctl_encode_rep (code, NULL, 0, text, strlen (text), &buf, &len);
  (void) ctl_write_full (fd, buf, len);
  free (buf);
  free (text);
}

/* A deadline ms from now on CLOCK_MONOTONIC. */
static struct timespec
ctl_deadline (unsigned ms)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  ts.tv_sec += ms / 1000;
  ts.tv_nsec += (long) (ms % 1000) * 1000000;
  if (ts.tv_nsec >= 1000000000) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000;
  }
  return ts;
}

/* Wait for our turn: 0, or -ETIMEDOUT / -ESHUTDOWN. */
static int
ctl_turn_begin (zvol_ctl_t *ctl)
{
  struct timespec dl = ctl_deadline (ctl->ct_busy_wait_ms);
  int r = 0;

  pthread_mutex_lock (&ctl->ct_lock);
  while (ctl->ct_busy && !ctl->ct_stop && r == 0)
    r = pthread_cond_timedwait (&ctl->ct_cv, &ctl->ct_lock, &dl);
  if (ctl->ct_stop)
    r = -ESHUTDOWN;
  else if (ctl->ct_busy)
    r = -ETIMEDOUT;
  else {
    r = 0;
    ctl->ct_busy = true;
  }
  pthread_mutex_unlock (&ctl->ct_lock);
  return r;
}

static void
ctl_turn_end (zvol_ctl_t *ctl)
{
  pthread_mutex_lock (&ctl->ct_lock);
  ctl->ct_busy = false;
  pthread_cond_broadcast (&ctl->ct_cv);
  pthread_mutex_unlock (&ctl->ct_lock);
}

/* A stream command's progress line: a frame to the client at once.  A
 * client that does not read is not waited for past the io timeout. */
static void
ctl_progress (void *arg, const char *line)
{
  int fd = *(const int *) arg;
  uint8_t *buf;
  size_t len;

  zv_ctl_encode_progress (line, strlen (line), &buf, &len);
  (void) ctl_write_full (fd, buf, len);
  free (buf);
}

/* A command that may run for hours without a stream: the check and the
 * scrub (the live ones, admin_pool.c) and wait, which their clients wait
 * for without a deadline. */
static bool
ctl_is_long_argv (int argc, char *const *argv)
{
  return argc >= 1 && (strcmp (argv[0], "check") == 0
                       || strcmp (argv[0], "scrub") == 0
                       || strcmp (argv[0], "wait") == 0);
}

static bool
ctl_is_long (const zv_ctl_req_t *req)
{
  return ctl_is_long_argv (req->rq_argc, req->rq_argv);
}

/* Run a parsed request (with its stream, or -1) and reply with what it
 * printed.  A stream stops if the client goes (its side of the
 * connection readable: closed, or data it must not send) or the server
 * stops (the wake pipe). */
static void
ctl_run (zvol_ctl_t *ctl, int fd, const zv_ctl_req_t *req, int stream,
         bool lng)
{
  char *obuf = NULL, *ebuf = NULL;
  size_t olen = 0, elen = 0, len;
  FILE *out = open_memstream (&obuf, &olen);
  FILE *err = open_memstream (&ebuf, &elen);
  unsigned flags = req->rq_flags & ~ZV_CTL_F_STREAM;
  uint8_t *buf;
  int code;

  if (out == NULL || err == NULL)
    zv_nomem (BUFSIZ);
  if (zv_ctl_run_hook)
    code = zv_ctl_run_hook (ctl->ct_ex, req->rq_argc, req->rq_argv, flags,
                            out, err);
  else {
    zvol_admin_io_t io = {
      .ai_out = out, .ai_err = err, .ai_stream_fd = stream,
      .ai_cancel_fd = { lng ? fd : -1, lng ? ctl->ct_wake[0] : -1 },
      .ai_progress = ctl_progress, .ai_progress_arg = &fd,
    };
    code = zvol_admin_run_io (ctl->ct_ex, req->rq_argc, req->rq_argv, flags,
                              &io);
  }
  if (fclose (out) != 0 || fclose (err) != 0)
    zv_nomem (BUFSIZ);
  if (olen > ZV_CTL_MAX_OUT)
    zv_error ("control socket: the output of '%s' was cut at %u bytes",
              req->rq_argv[0], ZV_CTL_MAX_OUT);
  zv_ctl_encode_rep (code, obuf, olen, ebuf, elen, &buf, &len);
  (void) ctl_write_full (fd, buf, len);
  free (buf);
  free (obuf);
  free (ebuf);
}

/* The descriptors against the request: one with ZV_CTL_F_STREAM, none
 * without, nothing else.  Its type and direction are the command's to
 * check (admin_stream.c: the same checks offline). */
static int
ctl_check_fds (const zv_ctl_req_t *req, const ctl_fds_t *cf, char *why,
               size_t whylen)
{
  bool stream = (req->rq_flags & ZV_CTL_F_STREAM) != 0;

  if (cf->cf_bad)
    return ctl_bad (why, whylen, "ancillary data other than file "
                    "descriptors, or cut off");
  if (stream && cf->cf_seen != 1)
    return ctl_bad (why, whylen, "a stream request carries one file "
                    "descriptor, this one %u", cf->cf_seen);
  if (!stream && cf->cf_seen != 0)
    return ctl_bad (why, whylen, "%u file descriptor%s with a request "
                    "that takes none", cf->cf_seen,
                    cf->cf_seen > 1 ? "s" : "");
  return 0;
}

/* A stream's place: 0, -EAGAIN (CTL_MAX_STREAMS run), -ESHUTDOWN. */
static int
ctl_stream_begin (zvol_ctl_t *ctl)
{
  int r = 0;

  pthread_mutex_lock (&ctl->ct_lock);
  if (ctl->ct_stop)
    r = -ESHUTDOWN;
  else if (ctl->ct_nstreams >= CTL_MAX_STREAMS)
    r = -EAGAIN;
  else
    ctl->ct_nstreams++;
  pthread_mutex_unlock (&ctl->ct_lock);
  return r;
}

static void
ctl_stream_end (zvol_ctl_t *ctl)
{
  pthread_mutex_lock (&ctl->ct_lock);
  ZV_VERIFY (ctl->ct_nstreams > 0);
  ctl->ct_nstreams--;
  pthread_cond_broadcast (&ctl->ct_cv);
  pthread_mutex_unlock (&ctl->ct_lock);
}

/* One connection: who, what, then its turn. */
static void
ctl_serve (zvol_ctl_t *ctl, int fd)
{
  struct ucred cr;
  socklen_t crlen = sizeof cr;
  uint8_t hdr[ZV_CTL_REQ_HDR], *buf;
  char why[256], msg[512];
  zv_ctl_req_t req;
  ctl_fds_t cf = { .cf_n = 0 };
  uint32_t rest;
  bool stream, lng;
  uid_t uid;
  int r;

  if (getsockopt (fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) < 0) {
    zv_error ("control socket %s: cannot tell who connected: %s",
              ctl->ct_path, strerror (errno));
    ctl_reply_msg (fd, ZVOL_ADMIN_FAIL, "the server cannot tell who you "
                   "are (SO_PEERCRED)");
    return;
  }
  uid = zv_ctl_peer_uid_hook ? zv_ctl_peer_uid_hook (cr.uid) : cr.uid;
  if (uid != geteuid () && uid != 0) {
    zv_error ("control socket %s: refused uid %u (pid %d): only uid %u "
              "(the server's) and root may run admin commands",
              ctl->ct_path, (unsigned) uid, (int) cr.pid,
              (unsigned) geteuid ());
    snprintf (msg, sizeof msg, "permission denied: the server runs as uid "
              "%u; only it and root may control it (you are uid %u)",
              (unsigned) geteuid (), (unsigned) uid);
    ctl_reply_msg (fd, ZVOL_ADMIN_FAIL, msg);
    return;
  }
  ctl_timeouts (fd, ctl->ct_io_timeout_ms);
  r = ctl_recv_full (fd, hdr, sizeof hdr, &cf);
  if (r != 0) {
    zv_debug ("control socket: a peer sent no request (%s)",
              r > 0 ? "closed" : strerror (-r));
    ctl_fds_close (&cf);
    return;
  }
  if (zv_ctl_req_header (hdr, sizeof hdr, &rest, why, sizeof why) < 0)
    goto bad;
  buf = zv_alloc (ZV_CTL_REQ_HDR + rest);
  memcpy (buf, hdr, sizeof hdr);
  r = ctl_recv_full (fd, buf + ZV_CTL_REQ_HDR, rest, &cf);
  if (r != 0) {
    snprintf (why, sizeof why, "the request was cut off (%s)",
              r > 0 ? "the peer closed" : strerror (-r));
    free (buf);
    goto bad;
  }
  if (zv_ctl_parse_req (buf, ZV_CTL_REQ_HDR + rest, &req, why,
                        sizeof why) < 0
      || ctl_check_fds (&req, &cf, why, sizeof why) < 0) {
    free (buf);
    goto bad;
  }
  stream = req.rq_flags & ZV_CTL_F_STREAM;
  lng = stream || ctl_is_long (&req);
  /* A stream may run for hours: it takes no turn (the engine holds what
   * it reads or writes), within a cap of its own.  So does a check (its
   * hold, not a turn, keeps a second one out, and snapshots go on). */
  r = lng ? ctl_stream_begin (ctl) : ctl_turn_begin (ctl);
  if (r == 0) {
    zv_debug ("control socket: uid %u runs '%s' (%d arguments%s)",
              (unsigned) uid, req.rq_argv[0], req.rq_argc,
              stream ? ", a stream" : "");
    ctl_run (ctl, fd, &req, stream ? cf.cf_fd[0] : -1, lng);
    if (lng)
      ctl_stream_end (ctl);
    else
      ctl_turn_end (ctl);
  }
  else if (r == -EAGAIN) {
    snprintf (msg, sizeof msg, "%u long commands (send, receive, check, scrub, wait) "
              "are running, the most at once: try again when one is done",
              CTL_MAX_STREAMS);
    ctl_reply_msg (fd, ZVOL_ADMIN_FAIL, msg);
  }
  else if (r == -ETIMEDOUT) {
    snprintf (msg, sizeof msg, "another admin command is running (waited "
              "%u ms, ctl_busy_wait): try again when it is done",
              ctl->ct_busy_wait_ms);
    ctl_reply_msg (fd, ZVOL_ADMIN_FAIL, msg);
  }
  else
    ctl_reply_msg (fd, ZVOL_ADMIN_FAIL, "the server is stopping");
  free (buf);
  ctl_fds_close (&cf);
  return;

 bad:
  ctl_fds_close (&cf);
  zv_error ("control socket %s: a bad message from uid %u: %s",
            ctl->ct_path, (unsigned) uid, why);
  snprintf (msg, sizeof msg, "bad control message: %s", why);
  ctl_reply_msg (fd, ZVOL_ADMIN_FAIL, msg);
}

/*
 * Before close: the reply sent (our side shut), read what the peer still
 * sends, briefly.  Closing a Unix socket with unread input resets the
 * connection, and the peer could lose the reply that says what was wrong
 * with its message.
 */
static void
ctl_drain (int fd)
{
  char buf[4096];
  size_t total = 0;

  shutdown (fd, SHUT_WR);
  ctl_timeouts (fd, 100);
  while (total < ZV_CTL_REQ_HDR + ZV_CTL_MAX_REQ) {
    ssize_t n = read (fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    total += (size_t) n;
  }
}

typedef struct ctl_conn {
  zvol_ctl_t *cc_ctl;
  unsigned cc_slot;
} ctl_conn_t;

static void *
ctl_conn_main (void *arg)
{
  ctl_conn_t *cc = arg;
  zvol_ctl_t *ctl = cc->cc_ctl;
  int fd;

  zv_thread_name ("zv-ctl-conn");
  pthread_mutex_lock (&ctl->ct_lock);
  fd = ctl->ct_conn[cc->cc_slot];
  pthread_mutex_unlock (&ctl->ct_lock);
  ctl_serve (ctl, fd);
  ctl_drain (fd);
  pthread_mutex_lock (&ctl->ct_lock);
  close (fd);
  ctl->ct_conn[cc->cc_slot] = -1;
  ctl->ct_nconn--;
  pthread_cond_broadcast (&ctl->ct_cv);
  pthread_mutex_unlock (&ctl->ct_lock);
  free (cc);
  zv_dev_thread_exit ();
  return NULL;
}

/* A connection to serve in a thread of its own, or refuse at once. */
static void
ctl_accept_one (zvol_ctl_t *ctl, int fd)
{
  pthread_attr_t at;
  pthread_t th;
  ctl_conn_t *cc;
  unsigned slot = CTL_MAX_CONN;
  int r;

  pthread_mutex_lock (&ctl->ct_lock);
  for (unsigned i = 0; i < CTL_MAX_CONN && slot == CTL_MAX_CONN; i++)
    if (ctl->ct_conn[i] < 0)
      slot = i;
  if (slot < CTL_MAX_CONN) {
    ctl->ct_conn[slot] = fd;
    ctl->ct_nconn++;
  }
  pthread_mutex_unlock (&ctl->ct_lock);
  if (slot == CTL_MAX_CONN) {
    ctl_timeouts (fd, 1000);
    ctl_reply_msg (fd, ZVOL_ADMIN_FAIL, "too many connections to the "
                   "control socket: try again");
    ctl_drain (fd);
    close (fd);
    return;
  }
  cc = zv_alloc (sizeof *cc);
  cc->cc_ctl = ctl;
  cc->cc_slot = slot;
  pthread_attr_init (&at);
  pthread_attr_setdetachstate (&at, PTHREAD_CREATE_DETACHED);
  r = pthread_create (&th, &at, ctl_conn_main, cc);
  pthread_attr_destroy (&at);
  if (r != 0) {
    zv_error ("control socket: cannot start a thread: %s", strerror (r));
    ctl_timeouts (fd, 1000);
    ctl_reply_msg (fd, ZVOL_ADMIN_FAIL, "the server cannot start a thread");
    pthread_mutex_lock (&ctl->ct_lock);
    close (fd);
    ctl->ct_conn[slot] = -1;
    ctl->ct_nconn--;
    pthread_mutex_unlock (&ctl->ct_lock);
    free (cc);
  }
}

static void *
ctl_listen_main (void *arg)
{
  zvol_ctl_t *ctl = arg;
  int last_err = 0;

  zv_thread_name ("zv-ctl");
  for (;;) {
    struct pollfd pf[2] = {
      { .fd = ctl->ct_fd, .events = POLLIN },
      { .fd = ctl->ct_wake[0], .events = POLLIN },
    };
    int fd;

    if (poll (pf, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      zv_error ("control socket %s: poll: %s", ctl->ct_path,
                strerror (errno));
      break;
    }
    if (pf[1].revents)
      break;
    if (!(pf[0].revents & POLLIN))
      continue;
    fd = accept4 (ctl->ct_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != last_err && errno != EAGAIN && errno != EINTR
          && errno != ECONNABORTED)
        zv_error ("control socket %s: accept: %s", ctl->ct_path,
                  strerror (errno));
      last_err = errno;
      if (errno == EMFILE || errno == ENFILE)
        poll (NULL, 0, 100);    /* out of descriptors: do not spin */
      continue;
    }
    last_err = 0;
    ctl_accept_one (ctl, fd);
  }
  return NULL;
}

/* A reason start fails: an error, or with ZVOL_CTL_QUIET information. */
#define ctl_say(flags, ...) \
  zv_log ((flags) & ZVOL_CTL_QUIET ? ZV_LOG_DEBUG : ZV_LOG_ERROR, __VA_ARGS__)

/* mkdir -p the directory of path, each directory made 0700. */
static int
ctl_mkdir_parent (const char *path)
{
  char *d = zv_strdup (path), *slash = strrchr (d, '/');
  int r = 0;

  if (slash == NULL || slash == d) {
    free (d);
    return 0;
  }
  *slash = '\0';
  for (char *p = d + 1; r == 0; p++) {
    bool end = *p == '\0';
    if (*p != '/' && !end)
      continue;
    *p = '\0';
    if (mkdir (d, 0700) < 0 && errno != EEXIST)
      r = -errno;
    if (end)
      break;
    *p = '/';
  }
  free (d);
  return r;
}

/* What is at path before we listen there: 0 (nothing now, or with
 * 'remove' a stale socket was removed) or an error, said. */
static int
ctl_clear_stale (const char *path, unsigned flags, bool remove)
{
  struct stat st;
  int fd, r;

  if (lstat (path, &st) < 0)
    return errno == ENOENT ? 0 : -errno;
  if (!S_ISSOCK (st.st_mode)) {
    ctl_say (flags, "control socket %s: the path exists and is not a socket "
              "(remove it, or name another with control=)", path);
    return -EEXIST;
  }
  r = ctl_connect (path, &fd);
  if (r == 0) {
    close (fd);
    ctl_say (flags, "control socket %s: another server answers there (a second "
              "pool of the same name? name another with control=)", path);
    return -EADDRINUSE;
  }
  if (r != -ECONNREFUSED) {
    ctl_say (flags, "control socket %s: %s", path, strerror (-r));
    return r;
  }
  if (!remove)
    return 0;
  zv_debug ("control socket %s: replacing the stale socket of a server "
            "that is gone", path);
  if (unlink (path) < 0 && errno != ENOENT)
    return -errno;
  return 0;
}

int
zvol_ctl_check (const char *path, unsigned flags)
{
  struct sockaddr_un sa;

  if (ctl_addr (path, &sa) < 0) {
    ctl_say (flags, "control socket %s: the path is too long (at most %zu "
             "bytes)", path, sizeof sa.sun_path - 1);
    return -ENAMETOOLONG;
  }
  return ctl_clear_stale (path, flags, false);
}

int
zvol_ctl_start (zvol_exports_t *ex, const char *path, unsigned flags,
                zvol_ctl_t **ctlp)
{
  pthread_condattr_t ca;
  struct sockaddr_un sa;
  struct stat st;
  zvol_ctl_t *ctl;
  int fd = -1, r;

  *ctlp = NULL;
  if (ctl_addr (path, &sa) < 0) {
    ctl_say (flags, "control socket %s: the path is too long (at most %zu bytes)",
              path, sizeof sa.sun_path - 1);
    return -ENAMETOOLONG;
  }
  r = ctl_mkdir_parent (path);
  if (r < 0) {
    ctl_say (flags, "control socket %s: cannot make its directory: %s", path,
              strerror (-r));
    return r;
  }
  r = ctl_clear_stale (path, flags, true);
  if (r < 0)
    return r;
  fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    r = -errno;
    goto fail;
  }
  /* The file bind makes takes the socket inode's mode (less the umask). */
  (void) fchmod (fd, 0600);
  if (bind (fd, (struct sockaddr *) &sa, sizeof sa) < 0) {
    r = -errno;
    goto fail;
  }
  if (lstat (path, &st) < 0) {
    r = -errno;
    unlink (path);
    goto fail;
  }
  /* Nobody can connect before listen: setting it by path is as safe. */
  if ((st.st_mode & 07777) != 0600 && chmod (path, 0600) < 0) {
    r = -errno;
    unlink (path);
    goto fail;
  }
  if (listen (fd, 16) < 0) {
    r = -errno;
    unlink (path);
    goto fail;
  }
  ctl = zv_calloc (1, sizeof *ctl);
  ctl->ct_ex = ex;
  ctl->ct_path = zv_strdup (path);
  ctl->ct_fd = fd;
  ctl->ct_dev = st.st_dev;
  ctl->ct_ino = st.st_ino;
  ctl->ct_busy_wait_ms = zv_ctl_busy_wait_ms;
  ctl->ct_io_timeout_ms = zv_ctl_io_timeout_ms;
  for (unsigned i = 0; i < CTL_MAX_CONN; i++)
    ctl->ct_conn[i] = -1;
  pthread_mutex_init (&ctl->ct_lock, NULL);
  pthread_condattr_init (&ca);
  pthread_condattr_setclock (&ca, CLOCK_MONOTONIC);
  pthread_cond_init (&ctl->ct_cv, &ca);
  pthread_condattr_destroy (&ca);
  if (pipe2 (ctl->ct_wake, O_CLOEXEC) < 0) {
    r = -errno;
    ctl->ct_wake[0] = ctl->ct_wake[1] = -1;
  }
  else
    r = -pthread_create (&ctl->ct_thread, NULL, ctl_listen_main, ctl);
  if (r < 0) {
    ctl_say (flags, "control socket %s: cannot start: %s", path, strerror (-r));
    unlink (path);
    if (ctl->ct_wake[0] >= 0) {
      close (ctl->ct_wake[0]);
      close (ctl->ct_wake[1]);
    }
    pthread_cond_destroy (&ctl->ct_cv);
    pthread_mutex_destroy (&ctl->ct_lock);
    free (ctl->ct_path);
    free (ctl);
    close (fd);
    return r;
  }
  zv_debug ("control socket %s: listening", path);
  *ctlp = ctl;
  return 0;

 fail:
  ctl_say (flags, "control socket %s: %s", path, strerror (-r));
  if (fd >= 0)
    close (fd);
  return r;
}

void
zvol_ctl_stop (zvol_ctl_t *ctl)
{
  struct stat st;
  char c = 0;

  if (ctl == NULL)
    return;
  pthread_mutex_lock (&ctl->ct_lock);
  ctl->ct_stop = true;
  pthread_cond_broadcast (&ctl->ct_cv);
  pthread_mutex_unlock (&ctl->ct_lock);
  while (write (ctl->ct_wake[1], &c, 1) < 0 && errno == EINTR)
    ;
  pthread_join (ctl->ct_thread, NULL);
  pthread_mutex_lock (&ctl->ct_lock);
  /* Cut off whoever is still sending; a running command finishes. */
  for (unsigned i = 0; i < CTL_MAX_CONN; i++)
    if (ctl->ct_conn[i] >= 0)
      shutdown (ctl->ct_conn[i], SHUT_RD);
  while (ctl->ct_nconn > 0)
    pthread_cond_wait (&ctl->ct_cv, &ctl->ct_lock);
  pthread_mutex_unlock (&ctl->ct_lock);
  close (ctl->ct_fd);
  if (lstat (ctl->ct_path, &st) == 0 && st.st_dev == ctl->ct_dev
      && st.st_ino == ctl->ct_ino)
    unlink (ctl->ct_path);
  close (ctl->ct_wake[0]);
  close (ctl->ct_wake[1]);
  pthread_cond_destroy (&ctl->ct_cv);
  pthread_mutex_destroy (&ctl->ct_lock);
  free (ctl->ct_path);
  free (ctl);
}

/* ---- the client ---- */

/* The request, its first byte carrying the stream's descriptor. */
static int
ctl_send_req (int fd, const uint8_t *req, size_t len, int stream)
{
  union {
    struct cmsghdr cm;
    char space[CMSG_SPACE (sizeof (int))];
  } ctrl;
  struct iovec iov = { (void *) req, 1 };
  struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
  ssize_t n;

  if (stream < 0)
    return ctl_write_full (fd, req, len);
  memset (&ctrl, 0, sizeof ctrl);
  mh.msg_control = &ctrl;
  mh.msg_controllen = sizeof ctrl;
  ctrl.cm.cmsg_level = SOL_SOCKET;
  ctrl.cm.cmsg_type = SCM_RIGHTS;
  ctrl.cm.cmsg_len = CMSG_LEN (sizeof (int));
  memcpy (CMSG_DATA (&ctrl.cm), &stream, sizeof stream);
  do
    n = sendmsg (fd, &mh, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n < 0)
    return -errno;
  return ctl_write_full (fd, req + 1, len - 1);
}

int
zvol_ctl_call_fd (const char *path, int argc, char *const *argv,
                  unsigned flags, int stream, FILE *out, FILE *err,
                  int *exitp)
{
  uint8_t hdr[ZV_CTL_REP_HDR], *req, *buf;
  char why[256];
  zv_ctl_rep_t rep;
  uint64_t rest;
  size_t len;
  int fd, r, wr;

  *exitp = ZVOL_ADMIN_FAIL;
  if (flags & ZV_CTL_F_STREAM)
    return -EINVAL;
  r = ctl_connect (path, &fd);
  if (r < 0)
    return r;
  r = zv_ctl_encode_req (argc, argv, flags | (stream >= 0 ? ZV_CTL_F_STREAM
                                              : 0), &req, &len);
  if (r < 0) {
    fprintf (err, "zvoladm: the command line is too long for the control "
             "socket (at most %u arguments of %u bytes, %u in all)\n",
             ZV_CTL_MAX_ARGC, ZV_CTL_MAX_ARG - 1, ZV_CTL_MAX_REQ);
    close (fd);
    return r;
  }
  ctl_timeouts (fd, CTL_CLIENT_TIMEOUT_S * 1000);
  /* A stream (or a check) runs as long as it takes: the reply is
   * awaited without a deadline (a server that dies closes the
   * connection). */
  if (stream >= 0 || ctl_is_long_argv (argc, argv)) {
    struct timeval none = { 0, 0 };
    (void) setsockopt (fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
  }
  /* A server that refused us may have replied and closed already: read
   * its reply whatever the write did. */
  wr = ctl_send_req (fd, req, len, stream);
  free (req);
  for (;;) {
    r = ctl_read_full (fd, hdr, sizeof hdr);
    if (r != 0) {
      fprintf (err, "zvoladm: control socket %s: no reply (%s)\n", path,
               r > 0 ? "the server closed the connection"
               : strerror (wr < 0 ? -wr : -r));
      close (fd);
      return -EPROTO;
    }
    if (zv_ctl_rep_header (hdr, sizeof hdr, &rest, why, sizeof why) < 0) {
      fprintf (err, "zvoladm: control socket %s: %s\n", path, why);
      close (fd);
      return -EPROTO;
    }
    buf = zv_alloc (ZV_CTL_REP_HDR + rest);
    memcpy (buf, hdr, sizeof hdr);
    r = ctl_read_full (fd, buf + ZV_CTL_REP_HDR, rest);
    if (r != 0
        || zv_ctl_parse_rep (buf, ZV_CTL_REP_HDR + rest, &rep, why,
                             sizeof why) < 0) {
      fprintf (err, "zvoladm: control socket %s: %s\n", path,
               r != 0 ? "the reply was cut off" : why);
      free (buf);
      close (fd);
      return -EPROTO;
    }
    if (!rep.rp_progress)
      break;
    /* The server's line, shown as it comes. */
    fwrite (rep.rp_err, 1, rep.rp_errlen, err);
    fflush (err);
    free (buf);
  }
  close (fd);
  fwrite (rep.rp_out, 1, rep.rp_outlen, out);
  fwrite (rep.rp_err, 1, rep.rp_errlen, err);
  fflush (out);
  fflush (err);
  *exitp = rep.rp_exit;
  free (buf);
  return 0;
}

int
zvol_ctl_call (const char *path, int argc, char *const *argv,
               unsigned flags, FILE *out, FILE *err, int *exitp)
{
  return zvol_ctl_call_fd (path, argc, argv, flags, -1, out, err, exitp);
}

/* ---- tunables (tunable.h) ---- */
const zv_tunable_t zv_ctl_tunable_table[] = {
  { .tn_name = "ctl_busy_wait", .tn_module = "ctl",
    ZV_TUNABLE_VAR_UINT (zv_ctl_busy_wait_ms),
    .tn_default = 30000, .tn_min = 0, .tn_max = 3600000,
    .tn_unit = ZV_TUNABLE_UNIT_MS, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the control socket, when the server starts it",
    .tn_desc = "How long an admin command waits for the one that runs "
    "before it fails with \"another admin command is running\"." },
  { .tn_name = "ctl_io_timeout", .tn_module = "ctl",
    ZV_TUNABLE_VAR_UINT (zv_ctl_io_timeout_ms),
    .tn_default = 10000, .tn_min = 100, .tn_max = 600000,
    .tn_unit = ZV_TUNABLE_UNIT_MS, .tn_when = ZV_TUNABLE_AT_OPEN,
    .tn_reader = "the control socket, when the server starts it",
    .tn_desc = "How long a peer of the control socket may take to send its "
    "request (and to read the reply) before it is cut off." },
  ZV_TUNABLE_END
};
