/*
 * test_ctl.c: the control socket (core/ctl.c): a real socket in the
 * scratch directory over a started pool "tank".  Its mode, the peer
 * check (through the uid hook, and as another uid for real when run as
 * root), the same output as the command layer run in place, garbage and
 * cut-off messages, one command at a time (a second one waits, then
 * fails), the stale socket of a dead server, and the messages' parsers.
 * Streams: send and receive with the descriptor passed, progress frames,
 * the ancillary data checked (none, two, a directory, the wrong
 * direction: refused, no descriptor kept), a stream beside a running
 * command, and a client gone or a server stopping mid-receive: nothing
 * of it is kept.  wait, a long command beside the others.
 */
#include <config.h>

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "testlib.h"
#include "ctl.h"

#define MiB (1ull << 20)

static char ctl_dev[512], ctl_sock[512];
static zvol_pool_t *ctl_pool;
static zvol_exports_t *ctl_ex;
static zvol_ctl_t *ctl_srv;

static int
ctl_setup (void **state)
{
  zvol_pool_config_t pc;
  const char *devs[1] = { tl_path (ctl_dev, sizeof ctl_dev, "ctl.img") };

  tl_test_setup (state);
  if (tl_sparse_file (devs[0], 256 * MiB) != 0)
    return -1;
  tl_pool_cfg (&pc, devs, 1, 0, true);
  pc.pc_name = "tank";
  pc.pc_txg.tt_timeout_ms = 200;
  if (zvol_pool_open (&pc, &ctl_pool) < 0 || zvol_pool_start (ctl_pool) < 0)
    return -1;
  ctl_ex = zvol_exports_new (ctl_pool, NULL);
  /* In a directory that does not exist yet: made 0700. */
  tl_path (ctl_sock, sizeof ctl_sock, "run/sub/control");
  return zvol_ctl_start (ctl_ex, ctl_sock, 0, &ctl_srv) < 0 ? -1 : 0;
}

static void
ctl_stop_srv (void)
{
  zvol_ctl_stop (ctl_srv);
  ctl_srv = NULL;
}

/* A tunable (or a hook, name NULL) for the server: set while it is
 * stopped (it reads them when it starts, its threads unlocked). */
static void
ctl_restart_with (const char *name, const char *value)
{
  char e[128];

  ctl_stop_srv ();
  if (name)
    assert_int_equal (zvol_tunable_set (name, value, e, sizeof e), 0);
  assert_int_equal (zvol_ctl_start (ctl_ex, ctl_sock, 0, &ctl_srv), 0);
}

static int
ctl_teardown (void **state)
{
  int r;

  (void) state;
  zvol_ctl_stop (ctl_srv);
  zv_ctl_peer_uid_hook = NULL;
  zv_ctl_run_hook = NULL;
  r = zvol_exports_free (ctl_ex);
  if (zvol_pool_close (ctl_pool) < 0)
    r = -1;
  unlink (ctl_dev);
  return r < 0 ? -1 : 0;
}

/* A command line through the socket: zvol_ctl_call's result. */
static int
ctl_call (tl_cmd_out_t *co, const char *line)
{
  char buf[1024], *argv[64];
  int argc, r;
  FILE *out, *err;

  snprintf (buf, sizeof buf, "%s", line);
  argc = tl_argv_split (buf, argv, 64);
  tl_cmd_begin (co, &out, &err);
  r = zvol_ctl_call (ctl_sock, argc, argv, 0, out, err, &co->co_code);
  tl_cmd_end (co, out, err);
  return r;
}

/* The same line run in place. */
static void
ctl_here (tl_cmd_out_t *co, const char *line)
{
  char buf[1024], *argv[64];
  int argc;
  FILE *out, *err;

  snprintf (buf, sizeof buf, "%s", line);
  argc = tl_argv_split (buf, argv, 64);
  tl_cmd_begin (co, &out, &err);
  co->co_code = zvol_admin_run (ctl_ex, argc, argv, 0, out, err);
  tl_cmd_end (co, out, err);
}

/* Connect by hand. */
static int
ctl_raw_connect (void)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  int fd = socket (AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

  assert_true (fd >= 0);
  assert_true (strlen (ctl_sock) < sizeof sa.sun_path);
  memcpy (sa.sun_path, ctl_sock, strlen (ctl_sock));
  assert_int_equal (connect (fd, (struct sockaddr *) &sa, sizeof sa), 0);
  return fd;
}

/* Read a whole reply off fd (the server closes after it): its parse. */
static int
ctl_raw_reply (int fd, uint8_t *buf, size_t cap, zv_ctl_rep_t *rep)
{
  size_t len = 0;
  ssize_t n;
  char why[256];

  while ((n = read (fd, buf + len, cap - len)) > 0)
    len += (size_t) n;
  assert_int_equal (n, 0);      /* closed, not an error */
  return zv_ctl_parse_rep (buf, len, rep, why, sizeof why);
}

/* Mode 0600, directory 0700; the same output live as in place. */
static void
test_socket_and_output (void **state)
{
  static const char *const lines[] = {
    "list", "list -H -p tank", "stats tank/v", "create -V 8M tank/v",
    "list nosuch", "frob", "create -V 1Q tank/x",
  };
  tl_cmd_out_t a, b;
  struct stat st;
  char dir[512];

  (void) state;
  assert_int_equal (lstat (ctl_sock, &st), 0);
  assert_true (S_ISSOCK (st.st_mode));
  assert_int_equal (st.st_mode & 07777, 0600);
  snprintf (dir, sizeof dir, "%s", ctl_sock);
  *strrchr (dir, '/') = '\0';
  assert_int_equal (stat (dir, &st), 0);
  assert_int_equal (st.st_mode & 07777, 0700);

  tl_log_reset (true);
  assert_int_equal (ctl_call (&a, "create -V 8M tank/v"), 0);
  assert_int_equal (a.co_code, 0);
  tl_cmd_free (&a);
  for (size_t i = 0; i < sizeof lines / sizeof lines[0]; i++) {
    assert_int_equal (ctl_call (&a, lines[i]), 0);
    ctl_here (&b, lines[i]);
    assert_int_equal (a.co_code, b.co_code);
    /* stats: the counters move between the two runs; the names not. */
    if (strncmp (lines[i], "stats", 5) != 0)
      assert_string_equal (a.co_out, b.co_out);
    else
      assert_int_equal (strncmp (a.co_out, b.co_out, 15), 0);
    assert_string_equal (a.co_err, b.co_err);
    tl_cmd_free (&a);
    tl_cmd_free (&b);
  }
  assert_int_equal (ctl_call (&a, "destroy tank/v"), 0);
  assert_int_equal (a.co_code, 0);
  tl_cmd_free (&a);
}

static uid_t
ctl_other_uid (uid_t uid)
{
  (void) uid;
  return 4242;
}

/* A peer of another uid is refused, in the log and in the reply. */
static void
test_peer_refused (void **state)
{
  tl_cmd_out_t a;

  (void) state;
  tl_log_reset (true);
  ctl_stop_srv ();
  zv_ctl_peer_uid_hook = ctl_other_uid;
  ctl_restart_with (NULL, NULL);
  assert_int_equal (ctl_call (&a, "create -V 8M tank/no"), 0);
  ctl_stop_srv ();
  zv_ctl_peer_uid_hook = NULL;
  ctl_restart_with (NULL, NULL);
  assert_int_equal (a.co_code, 1);
  assert_non_null (strstr (a.co_err, "zvoladm: permission denied"));
  assert_non_null (strstr (a.co_err, "you are uid 4242"));
  assert_true (tl_log_has ("refused uid 4242"));
  tl_cmd_free (&a);
  /* Nothing was run. */
  assert_int_equal (zvol_volume_list (ctl_pool, NULL, 0), 0);
}

/* zvol_ctl_call as uid 65534 in a child: its result, or its exit
 * code. */
static int
ctl_call_as_nobody (void)
{
  int p[2], status, res = -1;
  pid_t pid;

  assert_int_equal (pipe (p), 0);
  pid = fork ();
  assert_true (pid >= 0);
  if (pid == 0) {
    char *argv[] = { "list", NULL };
    int code = -1, r;
    FILE *null = fopen ("/dev/null", "w");
    close (p[0]);
    if (null == NULL || setgid (65534) < 0 || setuid (65534) < 0)
      _exit (99);
    r = zvol_ctl_call (ctl_sock, 1, argv, 0, null, null, &code);
    r = r < 0 ? r : code;
    _exit (write (p[1], &r, sizeof r) == sizeof r ? 0 : 98);
  }
  close (p[1]);
  assert_int_equal (read (p[0], &res, sizeof res), sizeof res);
  close (p[0]);
  assert_int_equal (waitpid (pid, &status, 0), pid);
  assert_true (WIFEXITED (status) && WEXITSTATUS (status) == 0);
  return res;
}

/* As root: another uid for real.  The modes keep it out; with them
 * opened, the uid check does. */
static void
test_peer_real_uid (void **state)
{
  char run[512], sub[512];

  (void) state;
  if (geteuid () != 0)
    tl_skip ("not root: cannot connect as another uid (the uid hook "
             "test covers the refusal)");
  tl_log_reset (true);
  assert_int_equal (ctl_call_as_nobody (), -EACCES);
  tl_path (run, sizeof run, "run");
  tl_path (sub, sizeof sub, "run/sub");
  assert_int_equal (chmod (tl_dir, 0755), 0);
  assert_int_equal (chmod (run, 0755), 0);
  assert_int_equal (chmod (sub, 0755), 0);
  /* The directories open, the socket's own mode keeps it out. */
  assert_int_equal (ctl_call_as_nobody (), -EACCES);
  assert_int_equal (chmod (ctl_sock, 0666), 0);
  assert_int_equal (ctl_call_as_nobody (), 1);
  assert_true (tl_log_has ("refused uid 65534"));
  assert_int_equal (chmod (tl_dir, 0700), 0);
}

/* Garbage: a reply that says what is wrong, then the connection closed;
 * the server goes on serving. */
static void
test_garbage (void **state)
{
  static uint8_t buf[1 << 16];
  uint8_t *good;
  size_t goodlen;
  char *argv[] = { "list", "-H", NULL };
  zv_ctl_rep_t rep;
  tl_cmd_out_t a;

  (void) state;
  tl_log_reset (true);
  assert_int_equal (zv_ctl_encode_req (2, argv, 0, &good, &goodlen), 0);
  static const struct { size_t off; uint8_t val; const char *why; } muts[] = {
    { 0, 'X', "not a zvoladm request" },
    { 4, 2, "protocol version 2" },
    { 6, 0x80, "unknown flags" },
    { 8, 0, "0 arguments" },
    { 8, 65, "65 arguments" },
    { 16, 0, "argument 0: 0 bytes" },
    { 16, 200, "argument 0: 200 bytes" },
    { 24, 'x', "argument 0: not one NUL-terminated string" },
    { 22, 0, "argument 0: not one NUL-terminated string" },
  };
  for (size_t i = 0; i < sizeof muts / sizeof muts[0]; i++) {
    int fd = ctl_raw_connect ();
    memcpy (buf, good, goodlen);
    buf[muts[i].off] = muts[i].val;
    assert_int_equal (write (fd, buf, goodlen), (ssize_t) goodlen);
    shutdown (fd, SHUT_WR);
    assert_int_equal (ctl_raw_reply (fd, buf, sizeof buf, &rep), 0);
    close (fd);
    assert_int_equal (rep.rp_exit, 1);
    if (memmem (rep.rp_err, rep.rp_errlen, muts[i].why,
                strlen (muts[i].why)) == NULL)
      fail_msg ("mutation %zu: want '%s', got '%.*s'", i, muts[i].why,
                (int) rep.rp_errlen, rep.rp_err);
    assert_non_null (memmem (rep.rp_err, rep.rp_errlen,
                             "bad control message", 19));
  }
  /* Cut off in the middle (the peer closes), and a header that
   * announces more than the limit. */
  {
    int fd = ctl_raw_connect ();
    assert_int_equal (write (fd, good, goodlen - 2), (ssize_t) goodlen - 2);
    shutdown (fd, SHUT_WR);
    assert_int_equal (ctl_raw_reply (fd, buf, sizeof buf, &rep), 0);
    assert_non_null (memmem (rep.rp_err, rep.rp_errlen, "cut off", 7));
    close (fd);
    fd = ctl_raw_connect ();
    memcpy (buf, good, 16);
    buf[14] = 0x10;               /* 1 MiB follows */
    assert_int_equal (write (fd, buf, 16), 16);
    assert_int_equal (ctl_raw_reply (fd, buf, sizeof buf, &rep), 0);
    assert_non_null (memmem (rep.rp_err, rep.rp_errlen, "at most 65536", 13));
    close (fd);
  }
  /* A peer that sends nothing is cut off after ctl_io_timeout. */
  {
    int fd;
    ctl_restart_with ("ctl_io_timeout", "200");
    fd = ctl_raw_connect ();
    assert_int_equal (read (fd, buf, sizeof buf), 0);
    close (fd);
    ctl_restart_with ("ctl_io_timeout", "10000");
  }
  free (good);
  /* Every refusal was logged, and the server still answers. */
  assert_true (tl_log_has ("a bad message from uid"));
  assert_int_equal (ctl_call (&a, "list -H"), 0);
  assert_int_equal (a.co_code, 0);
  tl_cmd_free (&a);
}

/* ---- one command at a time ---- */

static pthread_mutex_t slow_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slow_cv = PTHREAD_COND_INITIALIZER;
static bool slow_in, slow_go;
static int slow_ran;

/* A command that runs until told to finish. */
static int
slow_run (zvol_exports_t *ex, int argc, char *const *argv, unsigned flags,
          FILE *out, FILE *err)
{
  (void) ex; (void) argc; (void) flags; (void) err;
  pthread_mutex_lock (&slow_lock);
  slow_in = true;
  slow_ran++;
  pthread_cond_broadcast (&slow_cv);
  while (!slow_go)
    pthread_cond_wait (&slow_cv, &slow_lock);
  pthread_mutex_unlock (&slow_lock);
  fprintf (out, "ran %s\n", argv[0]);
  return 0;
}

typedef struct slow_call {
  const char *sc_line;
  tl_cmd_out_t sc_out;
} slow_call_t;

static void *
slow_client (void *arg)
{
  slow_call_t *sc = arg;

  TL_CHECK (ctl_call (&sc->sc_out, sc->sc_line) == 0);
  return NULL;
}

/* Start a call of 'line' in a thread; with 'entered', wait until the
 * command runs. */
static void
slow_start (pthread_t *th, slow_call_t *sc, const char *line, bool entered)
{
  sc->sc_line = line;
  assert_int_equal (pthread_create (th, NULL, slow_client, sc), 0);
  pthread_mutex_lock (&slow_lock);
  while (entered && !slow_in)
    pthread_cond_wait (&slow_cv, &slow_lock);
  pthread_mutex_unlock (&slow_lock);
}

static void
slow_release (void)
{
  pthread_mutex_lock (&slow_lock);
  slow_go = true;
  pthread_cond_broadcast (&slow_cv);
  pthread_mutex_unlock (&slow_lock);
}

static void
test_busy (void **state)
{
  slow_call_t a, c;
  tl_cmd_out_t b;
  pthread_t th, th2;

  (void) state;
  slow_in = slow_go = false;
  slow_ran = 0;
  ctl_stop_srv ();
  zv_ctl_run_hook = slow_run;
  ctl_restart_with ("ctl_busy_wait", "300");
  slow_start (&th, &a, "first", true);
  /* The second waits its 300 ms, then fails, saying why. */
  assert_int_equal (ctl_call (&b, "second"), 0);
  assert_int_equal (b.co_code, 1);
  assert_non_null (strstr (b.co_err, "another admin command is running "
                           "(waited 300 ms"));
  tl_cmd_free (&b);
  pthread_mutex_lock (&slow_lock);
  assert_int_equal (slow_ran, 1);
  pthread_mutex_unlock (&slow_lock);
  slow_release ();
  assert_int_equal (pthread_join (th, NULL), 0);
  assert_int_equal (a.sc_out.co_code, 0);
  assert_string_equal (a.sc_out.co_out, "ran first\n");
  tl_cmd_free (&a.sc_out);

  /* With a longer wait, the second gets its turn once the first is
   * done. */
  slow_in = slow_go = false;
  slow_ran = 0;
  ctl_restart_with ("ctl_busy_wait", "20000");
  slow_start (&th, &a, "first", true);
  slow_start (&th2, &c, "second", false);
  usleep (300 * 1000);
  pthread_mutex_lock (&slow_lock);
  assert_int_equal (slow_ran, 1);        /* the second still waits */
  pthread_mutex_unlock (&slow_lock);
  slow_release ();
  assert_int_equal (pthread_join (th, NULL), 0);
  assert_int_equal (pthread_join (th2, NULL), 0);
  assert_int_equal (a.sc_out.co_code, 0);
  assert_int_equal (c.sc_out.co_code, 0);
  assert_string_equal (c.sc_out.co_out, "ran second\n");
  tl_cmd_free (&a.sc_out);
  tl_cmd_free (&c.sc_out);
  pthread_mutex_lock (&slow_lock);
  assert_int_equal (slow_ran, 2);
  pthread_mutex_unlock (&slow_lock);
  ctl_stop_srv ();
  zv_ctl_run_hook = NULL;
  ctl_restart_with ("ctl_busy_wait", "30000");
}

/* Start and stop: a stale socket is replaced, a live one refused, a
 * file that is no socket refused; stop removes only its own socket. */
static void
test_stale_and_stop (void **state)
{
  struct sockaddr_un sa = { .sun_family = AF_UNIX };
  char path[512], reg[512];
  zvol_ctl_t *c2;
  tl_cmd_out_t a;
  struct stat st;
  int fd;

  (void) state;
  tl_log_reset (true);
  /* A second server on the same path: refused. */
  assert_int_equal (zvol_ctl_start (ctl_ex, ctl_sock, 0, &c2), -EADDRINUSE);
  assert_true (tl_log_has ("another server answers there"));
  assert_null (c2);
  /* A stale socket: bound, never listening (as a killed server's). */
  tl_path (path, sizeof path, "stale");
  fd = socket (AF_UNIX, SOCK_STREAM, 0);
  assert_true (strlen (path) < sizeof sa.sun_path);
  memcpy (sa.sun_path, path, strlen (path));
  assert_int_equal (bind (fd, (struct sockaddr *) &sa, sizeof sa), 0);
  close (fd);
  assert_int_equal (zvol_ctl_call (path, 1, (char *[]) { "list", NULL }, 0,
                                   stdout, stderr, &fd), -ECONNREFUSED);
  /* The check before a fork: a stale one is free, and kept. */
  assert_int_equal (zvol_ctl_check (path, 0), 0);
  assert_int_equal (lstat (path, &st), 0);
  assert_int_equal (zvol_ctl_check (ctl_sock, 0), -EADDRINUSE);
  assert_int_equal (zvol_ctl_start (ctl_ex, path, 0, &c2), 0);
  assert_int_equal (lstat (path, &st), 0);
  assert_int_equal (st.st_mode & 07777, 0600);
  zvol_ctl_stop (c2);
  assert_int_equal (lstat (path, &st), -1);
  assert_int_equal (errno, ENOENT);
  assert_int_equal (zvol_ctl_call (path, 1, (char *[]) { "list", NULL }, 0,
                                   stdout, stderr, &fd), -ENOENT);
  /* A regular file: refused, kept. */
  tl_path (reg, sizeof reg, "regular");
  assert_int_equal (tl_sparse_file (reg, 10), 0);
  assert_int_equal (zvol_ctl_start (ctl_ex, reg, 0, &c2), -EEXIST);
  assert_int_equal (zvol_ctl_check (reg, 0), -EEXIST);
  assert_int_equal (stat (reg, &st), 0);
  /* Quiet: the same refusal at debug level. */
  tl_log_reset (true);
  assert_int_equal (zvol_ctl_start (ctl_ex, reg, ZVOL_CTL_QUIET, &c2),
                    -EEXIST);
  assert_int_equal (tl_log_errors (), 0);
  /* A path too long for a socket address. */
  {
    char longp[200];
    memset (longp, 'a', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    assert_int_equal (zvol_ctl_start (ctl_ex, longp, 0, &c2), -ENAMETOOLONG);
  }
  /* A socket replaced by another server's is left to it at stop. */
  assert_int_equal (zvol_ctl_start (ctl_ex, path, 0, &c2), 0);
  assert_int_equal (unlink (path), 0);
  fd = socket (AF_UNIX, SOCK_STREAM, 0);
  assert_int_equal (bind (fd, (struct sockaddr *) &sa, sizeof sa), 0);
  zvol_ctl_stop (c2);
  assert_int_equal (lstat (path, &st), 0);
  close (fd);
  unlink (path);
  /* The first server still answers. */
  assert_int_equal (ctl_call (&a, "list -H"), 0);
  assert_int_equal (a.co_code, 0);
  tl_cmd_free (&a);
}

/* The parsers alone: a round trip, and the limits. */
static void
test_messages (void **state)
{
  char *argv[ZV_CTL_MAX_ARGC + 2], big[ZV_CTL_MAX_ARG + 1], why[256];
  uint8_t *buf;
  size_t len;
  zv_ctl_req_t rq;
  zv_ctl_rep_t rp;
  uint64_t rest;

  (void) state;
  for (unsigned i = 0; i < ZV_CTL_MAX_ARGC + 1; i++)
    argv[i] = "x";
  assert_int_equal (zv_ctl_encode_req (ZV_CTL_MAX_ARGC, argv, 1, &buf, &len),
                    0);
  assert_int_equal (zv_ctl_parse_req (buf, len, &rq, why, sizeof why), 0);
  assert_int_equal (rq.rq_argc, ZV_CTL_MAX_ARGC);
  assert_int_equal (rq.rq_flags, 1);
  assert_null (rq.rq_argv[ZV_CTL_MAX_ARGC]);
  assert_string_equal (rq.rq_argv[7], "x");
  /* One byte more or less than the header says. */
  assert_int_equal (zv_ctl_parse_req (buf, len - 1, &rq, why, sizeof why),
                    -EPROTO);
  assert_non_null (strstr (why, "the header says"));
  free (buf);
  assert_int_equal (zv_ctl_encode_req (ZV_CTL_MAX_ARGC + 1, argv, 0, &buf,
                                       &len), -EINVAL);
  assert_int_equal (zv_ctl_encode_req (0, argv, 0, &buf, &len), -EINVAL);
  memset (big, 'b', sizeof big - 1);
  big[sizeof big - 1] = '\0';
  argv[0] = big;
  assert_int_equal (zv_ctl_encode_req (1, argv, 0, &buf, &len), -E2BIG);
  assert_int_equal (zv_ctl_parse_req ((uint8_t *) "ZV", 2, &rq, why,
                                      sizeof why), -EPROTO);
  assert_non_null (strstr (why, "shorter than its header"));
  /* Replies. */
  zv_ctl_encode_rep (2, "out", 3, "err\n", 4, &buf, &len);
  assert_int_equal (zv_ctl_parse_rep (buf, len, &rp, why, sizeof why), 0);
  assert_int_equal (rp.rp_exit, 2);
  assert_int_equal (rp.rp_outlen, 3);
  assert_memory_equal (rp.rp_err, "err\n", 4);
  buf[8] = 200;                       /* exit code 200 */
  assert_int_equal (zv_ctl_parse_rep (buf, len, &rp, why, sizeof why),
                    -EPROTO);
  buf[8] = 2;
  buf[15] = 0x10;                     /* out of 256 MiB */
  assert_int_equal (zv_ctl_parse_rep (buf, len, &rp, why, sizeof why),
                    -EPROTO);
  assert_non_null (strstr (why, "at most"));
  free (buf);
  /* Progress frames: a line of err, nothing else. */
  zv_ctl_encode_progress ("zvoladm: send: 1 of 2 MiB (50%)\n", 32, &buf,
                          &len);
  assert_int_equal (zv_ctl_parse_rep (buf, len, &rp, why, sizeof why), 0);
  assert_true (rp.rp_progress);
  assert_int_equal (rp.rp_errlen, 32);
  assert_int_equal (rp.rp_outlen, 0);
  buf[8] = 1;                         /* an exit code in a frame */
  assert_int_equal (zv_ctl_parse_rep (buf, len, &rp, why, sizeof why),
                    -EPROTO);
  assert_non_null (strstr (why, "a progress frame"));
  buf[8] = 0;
  buf[17] = 0x10;                     /* 4 KiB of err */
  assert_int_equal (zv_ctl_rep_header (buf, len, &rest, why, sizeof why),
                    -EPROTO);
  free (buf);
  zv_ctl_encode_rep (0, NULL, 0, "x", 1, &buf, &len);
  assert_int_equal (zv_ctl_parse_rep (buf, len, &rp, why, sizeof why), 0);
  assert_false (rp.rp_progress);
  free (buf);
}


/* ---- streams ---- */

/* Open descriptors of this process (the server's are ours). */
static unsigned
ctl_nfds (void)
{
  DIR *d = opendir ("/proc/self/fd");
  struct dirent *de;
  unsigned n = 0;

  assert_non_null (d);
  while ((de = readdir (d)) != NULL)
    n += de->d_name[0] != '.';
  closedir (d);
  return n - 1;                 /* opendir's own */
}

/* The fewest open descriptors of a few looks (see below). */
static unsigned
ctl_nfds_base (void)
{
  unsigned n = ctl_nfds ();

  for (int i = 0; i < 5; i++) {
    usleep (10000);
    n = ZV_MIN (n, ctl_nfds ());
  }
  return n;
}

/* Back to 'want' open descriptors, or the count: the engine's threads
 * open files of their own for a moment (the memory monitor reads
 * /proc), a descriptor kept stays. */
static unsigned
ctl_nfds_settle (unsigned want)
{
  unsigned n = ctl_nfds ();

  for (int i = 0; i < 100 && n != want; i++) {
    usleep (10000);
    n = ctl_nfds ();
  }
  return n;
}

/* A request sent by hand with nfds descriptors on its first byte. */
static int
ctl_raw_send_fds (const char *line, unsigned flags, const int *fds,
                  unsigned nfds)
{
  char buf[1024], *argv[64];
  union {
    struct cmsghdr cm;
    char space[CMSG_SPACE (4 * sizeof (int))];
  } ctrl;
  struct iovec iov;
  struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
  uint8_t *req;
  size_t len;
  int fd = ctl_raw_connect (), argc;

  snprintf (buf, sizeof buf, "%s", line);
  argc = tl_argv_split (buf, argv, 64);
  assert_int_equal (zv_ctl_encode_req (argc, argv, flags, &req, &len), 0);
  iov.iov_base = req;
  iov.iov_len = 1;
  if (nfds > 0) {
    memset (&ctrl, 0, sizeof ctrl);
    mh.msg_control = &ctrl;
    mh.msg_controllen = CMSG_SPACE (nfds * sizeof (int));
    ctrl.cm.cmsg_level = SOL_SOCKET;
    ctrl.cm.cmsg_type = SCM_RIGHTS;
    ctrl.cm.cmsg_len = CMSG_LEN (nfds * sizeof (int));
    memcpy (CMSG_DATA (&ctrl.cm), fds, nfds * sizeof (int));
  }
  assert_int_equal (sendmsg (fd, &mh, 0), 1);
  assert_int_equal (write (fd, req + 1, len - 1), (ssize_t) (len - 1));
  free (req);
  return fd;
}

/* A hand-made request's reply: its exit code, err into why. */
static int
ctl_raw_result (int fd, char *why, size_t whylen)
{
  static uint8_t buf[1 << 16];
  zv_ctl_rep_t rep;

  assert_int_equal (ctl_raw_reply (fd, buf, sizeof buf, &rep), 0);
  close (fd);
  snprintf (why, whylen, "%.*s", (int) rep.rp_errlen, rep.rp_err);
  return rep.rp_exit;
}

/* A volume "sv" with a pattern, its snapshot sv@a. */
static void
ctl_make_snapshot (void)
{
  zvol_volume_params_t vp = { .vp_size = 8 * MiB };
  static uint8_t pat[65536];
  zvol_t *zv;

  assert_int_equal (zvol_volume_create (ctl_pool, "sv", &vp), 0);
  assert_int_equal (zvol_exports_hold (ctl_ex, "sv", &zv), 0);
  for (unsigned i = 0; i < 8; i++) {
    memset (pat, (int) i + 1, sizeof pat);
    assert_int_equal (zvol_write (zv, pat, i * MiB, sizeof pat, 0), 0);
  }
  assert_int_equal (zvol_flush (zv), 0);
  zvol_exports_rele (ctl_ex, zv);
  assert_int_equal (zvol_snapshot_create (ctl_pool, "sv@a"), 0);
}

/* Do two datasets read the same? */
static bool
ctl_same (const char *a, const char *b)
{
  static uint8_t x[MiB], y[MiB];
  zvol_t *za, *zb;
  bool same;

  assert_int_equal (zvol_exports_hold (ctl_ex, a, &za), 0);
  assert_int_equal (zvol_exports_hold (ctl_ex, b, &zb), 0);
  same = zvol_size (za) == zvol_size (zb);
  for (uint64_t o = 0; same && o < zvol_size (za); o += MiB) {
    assert_int_equal (zvol_read (za, x, o, MiB), 0);
    assert_int_equal (zvol_read (zb, y, o, MiB), 0);
    same = memcmp (x, y, MiB) == 0;
  }
  zvol_exports_rele (ctl_ex, za);
  zvol_exports_rele (ctl_ex, zb);
  return same;
}

/* Is there a dataset 'name' in the pool? */
static bool
ctl_exists (const char *name)
{
  zvol_volume_info_t vi[32];
  size_t n = zvol_dataset_list (ctl_pool, ZVOL_LIST_VOLUMES
                                | ZVOL_LIST_SNAPSHOTS, vi, 32);

  for (size_t i = 0; i < n && i < 32; i++)
    if (strcmp (vi[i].vi_name, name) == 0)
      return true;
  return false;
}

/* send -v through the socket into a file, receive it back as another
 * volume: the same bytes, progress lines on err as they came, and the
 * descriptors the server was given closed again. */
static void
test_stream (void **state)
{
  char path[512], *argv[4];
  tl_cmd_out_t co;
  FILE *out, *err;
  unsigned before;
  int fd;

  (void) state;
  ctl_make_snapshot ();
  before = ctl_nfds_base ();
  tl_path (path, sizeof path, "sv.zs");
  fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true (fd >= 0);
  argv[0] = "send";
  argv[1] = "-v";
  argv[2] = "tank/sv@a";
  argv[3] = NULL;
  tl_cmd_begin (&co, &out, &err);
  assert_int_equal (zvol_ctl_call_fd (ctl_sock, 3, argv, 0, fd, out, err,
                                      &co.co_code), 0);
  tl_cmd_end (&co, out, err);
  close (fd);
  assert_int_equal (co.co_code, 0);
  assert_int_equal (co.co_outlen, 0);
  assert_non_null (strstr (co.co_err, "zvoladm: send: "));
  assert_non_null (strstr (co.co_err, " MiB (100%)\n"));
  tl_cmd_free (&co);

  fd = open (path, O_RDONLY | O_CLOEXEC);
  assert_true (fd >= 0);
  argv[0] = "receive";
  argv[1] = "tank/rv";
  argv[2] = NULL;
  tl_cmd_begin (&co, &out, &err);
  assert_int_equal (zvol_ctl_call_fd (ctl_sock, 2, argv, 0, fd, out, err,
                                      &co.co_code), 0);
  tl_cmd_end (&co, out, err);
  close (fd);
  assert_int_equal (co.co_code, 0);
  assert_int_equal (co.co_errlen, 0);  /* no -v: no progress */
  tl_cmd_free (&co);
  assert_true (ctl_exists ("rv@a"));
  assert_true (ctl_same ("sv@a", "rv@a"));
  assert_true (ctl_same ("sv@a", "rv"));
  assert_int_equal (ctl_nfds_settle (before), before);

  /* Without its stream, through the plain call: refused, saying why. */
  assert_int_equal (ctl_call (&co, "send tank/sv@a"), 0);
  assert_int_equal (co.co_code, 1);
  assert_non_null (strstr (co.co_err, "send: no stream"));
  tl_cmd_free (&co);
}

/* The ancillary data is hostile: a stream request with no descriptor or
 * two, a descriptor with a request that takes none, a directory, a
 * descriptor open the wrong way: each refused with its reason, and the
 * server keeps none of them. */
static void
test_stream_hostile (void **state)
{
  char why[512], path[512];
  int p[2], dir, rd, two[2];
  unsigned before;

  (void) state;
  tl_log_reset (true);
  ctl_make_snapshot ();
  assert_int_equal (pipe2 (p, O_CLOEXEC), 0);
  tl_path (path, sizeof path, "");
  dir = open (path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  rd = open ("/dev/zero", O_RDONLY | O_CLOEXEC);
  assert_true (dir >= 0 && rd >= 0);
  two[0] = p[1];
  two[1] = p[1];
  before = ctl_nfds_base ();

  assert_int_equal (ctl_raw_result (ctl_raw_send_fds ("send tank/sv@a",
                                                      ZV_CTL_F_STREAM,
                                                      NULL, 0),
                                    why, sizeof why), 1);
  assert_non_null (strstr (why, "bad control message: a stream request "
                           "carries one file descriptor, this one 0"));
  assert_int_equal (ctl_raw_result (ctl_raw_send_fds ("send tank/sv@a",
                                                      ZV_CTL_F_STREAM,
                                                      two, 2),
                                    why, sizeof why), 1);
  assert_non_null (strstr (why, "this one 2"));
  assert_int_equal (ctl_raw_result (ctl_raw_send_fds ("list", 0, &p[1], 1),
                                    why, sizeof why), 1);
  assert_non_null (strstr (why, "1 file descriptor with a request that "
                           "takes none"));
  assert_int_equal (ctl_raw_result (ctl_raw_send_fds ("send tank/sv@a",
                                                      ZV_CTL_F_STREAM,
                                                      &dir, 1),
                                    why, sizeof why), 1);
  assert_non_null (strstr (why, "send: the stream is a directory"));
  assert_int_equal (ctl_raw_result (ctl_raw_send_fds ("send tank/sv@a",
                                                      ZV_CTL_F_STREAM,
                                                      &rd, 1),
                                    why, sizeof why), 1);
  assert_non_null (strstr (why, "not open for writing"));
  assert_int_equal (ctl_raw_result (ctl_raw_send_fds ("receive tank/x",
                                                      ZV_CTL_F_STREAM,
                                                      &p[1], 1),
                                    why, sizeof why), 1);
  assert_non_null (strstr (why, "not open for reading"));
  /* A stream command with a descriptor that is fine but a usage error. */
  assert_int_equal (ctl_raw_result (ctl_raw_send_fds ("send tank/sv",
                                                      ZV_CTL_F_STREAM,
                                                      &p[1], 1),
                                    why, sizeof why), 2);
  assert_true (tl_log_has ("a bad message from uid"));
  assert_int_equal (ctl_nfds_settle (before), before);
  assert_false (ctl_exists ("x"));
  close (p[0]);
  close (p[1]);
  close (dir);
  close (rd);
}

typedef struct half_recv {
  int hr_conn;                  /* the client's connection */
  int hr_feed;                  /* the stream's write end, kept open */
} half_recv_t;

/* A receive of 'name' fed the first 'cut' bytes of the stream at path,
 * then left waiting for more, with the write end still open. */
static void
half_recv_start (half_recv_t *hr, const char *path, const char *name,
                 size_t cut)
{
  static uint8_t buf[1 << 20];
  char line[128];
  int p[2], fd = open (path, O_RDONLY | O_CLOEXEC);
  ssize_t n;

  assert_true (fd >= 0);
  n = read (fd, buf, cut);
  close (fd);
  assert_int_equal (n, (ssize_t) cut);
  assert_int_equal (pipe2 (p, O_CLOEXEC), 0);
  assert_int_equal (fcntl (p[1], F_SETPIPE_SZ, 1 << 20) >= (int) cut, 1);
  assert_int_equal (write (p[1], buf, cut), n);
  snprintf (line, sizeof line, "receive %s", name);
  hr->hr_conn = ctl_raw_send_fds (line, ZV_CTL_F_STREAM, &p[0], 1);
  close (p[0]);
  hr->hr_feed = p[1];
  /* Under way once the new volume is listed. */
  for (int i = 0; i < 500 && !ctl_exists (name + 5); i++)
    usleep (10000);
  assert_true (ctl_exists (name + 5));
}

/* A stream beside a command, and stopped mid-way: by its client leaving
 * (the server sees the connection close), or by the server stopping;
 * either way nothing of the received volume stays. */
static void
test_stream_cancel (void **state)
{
  char path[512], *argv[3] = { "send", "tank/sv@a", NULL };
  half_recv_t hr;
  tl_cmd_out_t co;
  FILE *out, *err;
  int fd, code;

  (void) state;
  tl_log_reset (true);
  ctl_make_snapshot ();
  tl_path (path, sizeof path, "sv.zs");
  fd = open (path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  assert_true (fd >= 0);
  tl_cmd_begin (&co, &out, &err);
  assert_int_equal (zvol_ctl_call_fd (ctl_sock, 2, argv, 0, fd, out, err,
                                      &code), 0);
  tl_cmd_end (&co, out, err);
  close (fd);
  assert_int_equal (code, 0);
  tl_cmd_free (&co);

  /* A receive waits for the rest of its stream; a command still runs
   * meanwhile (a stream takes no turn). */
  half_recv_start (&hr, path, "tank/gone", 100000);
  assert_int_equal (ctl_call (&co, "list -H -o name tank"), 0);
  assert_int_equal (co.co_code, 0);
  assert_non_null (strstr (co.co_out, "tank/sv\n"));
  tl_cmd_free (&co);
  /* The client leaves: the receive stops and is undone. */
  close (hr.hr_conn);
  for (int i = 0; i < 500 && ctl_exists ("gone"); i++)
    usleep (10000);
  assert_false (ctl_exists ("gone"));
  assert_true (tl_log_has ("receive: stopped: the client is gone"));
  close (hr.hr_feed);

  /* The server stops mid-receive: stop returns, nothing is kept. */
  half_recv_start (&hr, path, "tank/cut", 100000);
  ctl_stop_srv ();
  assert_false (ctl_exists ("cut"));
  close (hr.hr_conn);
  close (hr.hr_feed);
  assert_int_equal (zvol_ctl_start (ctl_ex, ctl_sock, 0, &ctl_srv), 0);
  assert_int_equal (zvol_exports_holds (ctl_ex, "sv"), 0);
}

/*
 * wait live: a long command, as check is.  While it waits for a slow
 * background free (8 blocks a sync), another command gets its turn at
 * once (the server's ctl_busy_wait is 300 ms: a wait that held the turn
 * would fail it), the wait's progress comes back as frames ("freeing:"
 * lines on its standard error), and it returns once the free is done.
 * Through the API, a cancel descriptor ends the wait, not the free.
 */
typedef struct wait_call {
  tl_cmd_out_t wc_out;
  int wc_r;
} wait_call_t;

static void *
wait_client (void *arg)
{
  wait_call_t *wc = arg;

  wc->wc_r = ctl_call (&wc->wc_out, "wait tank");
  return NULL;
}

static uint64_t
ctl_freeing (void)
{
  zvol_pool_stats_t ps;

  zvol_pool_get_stats (ctl_pool, &ps);
  return ps.ps_freeing;
}

static void
ctl_make_big (const char *name)
{
  zvol_volume_params_t vp = { .vp_size = 32 * MiB, .vp_blocksize = 16384 };

  assert_int_equal (zvol_volume_create (ctl_pool, name, &vp), 0);
  for (uint64_t off = 0; off < 32 * MiB; off += 4 * MiB)
    tl_ds_write (ctl_pool, name, off, 4 * MiB, 0x5a);
}

static void
test_wait_live (void **state)
{
  char e[128];
  tl_cmd_out_t co;
  wait_call_t wc = { .wc_r = -1 };
  pthread_t th;
  int cancel[2], fds[2] = { -1, -1 };

  (void) state;
  ctl_restart_with ("ctl_busy_wait", "300");
  assert_int_equal (zvol_tunable_set ("free_max_blocks", "8", e, sizeof e),
                    0);
  ctl_make_big ("wbig");
  assert_int_equal (ctl_call (&co, "destroy tank/wbig"), 0);
  assert_int_equal (co.co_code, 0);
  tl_cmd_free (&co);
  assert_true (ctl_freeing () > 16 * MiB);
  assert_int_equal (pthread_create (&th, NULL, wait_client, &wc), 0);
  usleep (200000);
  assert_int_equal (ctl_call (&co, "list -H -o name tank"), 0);
  assert_int_equal (co.co_code, 0);
  tl_cmd_free (&co);
  assert_true (ctl_freeing () > 0);       /* the wait still runs */
  assert_int_equal (pthread_join (th, NULL), 0);
  assert_int_equal (wc.wc_r, 0);
  assert_int_equal (wc.wc_out.co_code, 0);
  assert_non_null (strstr (wc.wc_out.co_err, "freeing: "));
  assert_int_equal (ctl_freeing (), 0);
  tl_cmd_free (&wc.wc_out);

  /* A cancel descriptor ends the wait with ECANCELED; the free goes on
   * (and a wait without one sees it to its end). */
  ctl_make_big ("wbig2");
  assert_int_equal (zvol_volume_destroy (ctl_pool, "wbig2"), 0);
  assert_true (ctl_freeing () > 16 * MiB);
  assert_int_equal (pipe (cancel), 0);
  assert_int_equal (write (cancel[1], "x", 1), 1);
  fds[0] = cancel[0];
  assert_int_equal (zvol_pool_wait_freeing (ctl_pool, fds, NULL, NULL),
                    -ECANCELED);
  assert_true (ctl_freeing () > 0);
  close (cancel[0]);
  close (cancel[1]);
  assert_int_equal (zvol_pool_wait_freeing (ctl_pool, NULL, NULL, NULL), 0);
  assert_int_equal (ctl_freeing (), 0);
  assert_int_equal (zvol_tunable_set ("free_max_blocks", "100000", e,
                                      sizeof e), 0);
  ctl_restart_with ("ctl_busy_wait", "30000");   /* the default */
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_messages),
    cmocka_unit_test_setup_teardown (test_socket_and_output, ctl_setup,
                                     ctl_teardown),
    cmocka_unit_test_setup_teardown (test_peer_refused, ctl_setup,
                                     ctl_teardown),
    cmocka_unit_test_setup_teardown (test_peer_real_uid, ctl_setup,
                                     ctl_teardown),
    cmocka_unit_test_setup_teardown (test_garbage, ctl_setup, ctl_teardown),
    cmocka_unit_test_setup_teardown (test_busy, ctl_setup, ctl_teardown),
    cmocka_unit_test_setup_teardown (test_stream, ctl_setup, ctl_teardown),
    cmocka_unit_test_setup_teardown (test_stream_hostile, ctl_setup,
                                     ctl_teardown),
    cmocka_unit_test_setup_teardown (test_stream_cancel, ctl_setup,
                                     ctl_teardown),
    cmocka_unit_test_setup_teardown (test_stale_and_stop, ctl_setup,
                                     ctl_teardown),
    cmocka_unit_test_setup_teardown (test_wait_live, ctl_setup,
                                     ctl_teardown),
  };

  return tl_main (tests, "ctl", NULL);
}
