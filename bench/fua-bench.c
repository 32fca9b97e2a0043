/*
 * fua-bench.c: the latency and rate of durable small writes sent as NBD
 * writes with the FUA flag, which fio's nbd engine cannot send (it only
 * knows write + NBD_CMD_FLUSH).
 *
 * Usage: fua-bench [-c CONNS] [-t SECONDS] [-r RAMP] [-b BYTES] [-j] URI
 *
 * Theory of operation
 * -------------------
 * The main thread opens CONNS connections to URI (one libnbd handle each,
 * one after the other, so a refused connection is reported before any
 * load starts), checks that the server offers FUA, and splits the export
 * into CONNS equal regions, one per connection, so no two connections
 * ever write the same block.  Then it starts one thread per connection.
 *
 * Each thread runs a queue-depth-1 loop with the blocking libnbd API:
 * pick a random block-aligned offset in its region, nbd_pwrite() one
 * block with LIBNBD_CMD_FLAG_FUA, time it.  The first RAMP seconds are
 * not measured; then every write that *starts* within the next SECONDS
 * is recorded (its latency appended to the thread's own array); a write
 * started before the end may finish slightly after it.  The buffer holds
 * random bytes, and its first 8 bytes are rewritten before every write,
 * so no two writes carry the same data (no zero detection, no dedup).
 *
 * States of a thread: RAMP -> MEASURE -> DONE, decided only by the clock
 * against the three times fb_t_start, fb_t_measure and fb_t_end that
 * main sets before creating the threads.  An error stops every thread
 * early (fb_failed, an atomic flag), and the program exits non-zero.
 *
 * Locking: none on the data path.  Each thread owns its handle, buffer
 * and latency array; main reads the arrays only after pthread_join.
 *
 * At the end main merges and sorts all latencies and prints the total
 * IOPS (recorded writes / SECONDS), the mean, the 50th and 99th
 * percentiles (nearest rank) and the maximum, and the fewest and most
 * writes any one connection made (a fairness check).  With -j this is
 * one JSON object on stdout, for bench/run-bench.sh.
 *
 * Built by run-bench.sh at run time:
 *   cc -O2 $(pkg-config --cflags libnbd) -o fua-bench bench/fua-bench.c \
 *      $(pkg-config --libs libnbd) -pthread
 */

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libnbd.h>

/* Tunables: defaults of the command line options. */
static unsigned fb_conns = 16;          /* -c: connections (= threads) */
static double fb_seconds = 10;          /* -t: measured seconds */
static double fb_ramp = 2;              /* -r: unmeasured seconds first */
static uint32_t fb_blksz = 4096;        /* -b: bytes per write */
static bool fb_json;                    /* -j: JSON output */

#define FB_MAX_CONNS 1024

/* One connection and its thread. */
typedef struct fb_conn {
  struct nbd_handle *fc_nbd;
  unsigned fc_index;
  uint64_t fc_region_off;               /* first byte of its region */
  uint64_t fc_region_blocks;            /* blocks in its region */
  uint64_t *fc_lat;                     /* recorded latencies, ns */
  size_t fc_nlat, fc_cap;
  pthread_t fc_thread;
  char fc_err[256];                     /* first error, if any */
} fb_conn_t;

/* Set by main before the threads start; read-only afterwards. */
static uint64_t fb_t_measure, fb_t_end;
static atomic_bool fb_failed;

/* Monotonic clock in nanoseconds: every time in the program is one. */
static uint64_t
fb_now_ns (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* xorshift64*: cheap per-thread random numbers; quality is not an issue
 * for choosing offsets and filling a buffer. */
static uint64_t
fb_rand (uint64_t *state)
{
  uint64_t x = *state;

  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  *state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

/* Append one latency to the thread's array, growing it geometrically so
 * the measured loop almost never calls realloc. */
static int
fb_record (fb_conn_t *fc, uint64_t ns)
{
  if (fc->fc_nlat == fc->fc_cap) {
    size_t cap = fc->fc_cap ? fc->fc_cap * 2 : 65536;
    uint64_t *p = realloc (fc->fc_lat, cap * sizeof *p);

    if (p == NULL)
      return -1;
    fc->fc_lat = p;
    fc->fc_cap = cap;
  }
  fc->fc_lat[fc->fc_nlat++] = ns;
  return 0;
}

/* A thread: QD1 FUA writes to its own region until fb_t_end, or until
 * any thread fails. */
static void *
fb_thread (void *arg)
{
  fb_conn_t *fc = arg;
  uint64_t seed = 0x9E3779B97F4A7C15ull * (fc->fc_index + 1) ^ fb_now_ns ();
  uint64_t seq = 0;
  unsigned char *buf;

  if (posix_memalign ((void **) &buf, 4096, fb_blksz) != 0) {
    snprintf (fc->fc_err, sizeof fc->fc_err, "out of memory");
    atomic_store (&fb_failed, true);
    return NULL;
  }
  for (uint32_t i = 0; i + 8 <= fb_blksz; i += 8) {
    uint64_t r = fb_rand (&seed);
    memcpy (buf + i, &r, 8);
  }

  while (!atomic_load_explicit (&fb_failed, memory_order_relaxed)) {
    uint64_t blk = fb_rand (&seed) % fc->fc_region_blocks;
    uint64_t off = fc->fc_region_off + blk * fb_blksz;
    uint64_t t0 = fb_now_ns (), t1;

    if (t0 >= fb_t_end)
      break;
    seq++;
    if (fb_blksz >= 8)
      memcpy (buf, &seq, 8);
    if (nbd_pwrite (fc->fc_nbd, buf, fb_blksz, off,
                    LIBNBD_CMD_FLAG_FUA) == -1) {
      snprintf (fc->fc_err, sizeof fc->fc_err,
                "connection %u: pwrite at %" PRIu64 ": %s",
                fc->fc_index, off, nbd_get_error ());
      atomic_store (&fb_failed, true);
      break;
    }
    t1 = fb_now_ns ();
    if (t0 >= fb_t_measure && fb_record (fc, t1 - t0) == -1) {
      snprintf (fc->fc_err, sizeof fc->fc_err, "out of memory");
      atomic_store (&fb_failed, true);
      break;
    }
  }
  free (buf);
  return NULL;
}

/* qsort comparator for the merged latencies. */
static int
fb_cmp_u64 (const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

  return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of a sorted array (n > 0). */
static uint64_t
fb_percentile (const uint64_t *v, size_t n, double pct)
{
  size_t rank = (size_t) ((pct / 100.0) * (double) n + 0.999999);

  if (rank < 1)
    rank = 1;
  if (rank > n)
    rank = n;
  return v[rank - 1];
}

/* Parse a positive number option, or exit with a message. */
static double
fb_parse_num (const char *opt, const char *s, double min, double max)
{
  char *end;
  double v;

  errno = 0;
  v = strtod (s, &end);
  if (errno || end == s || *end != '\0' || v < min || v > max) {
    fprintf (stderr, "fua-bench: %s %s: expected a number from %g to %g\n",
             opt, s, min, max);
    exit (2);
  }
  return v;
}

static void
fb_usage (FILE *fp)
{
  fprintf (fp,
           "usage: fua-bench [-c CONNS] [-t SECONDS] [-r RAMP] [-b BYTES] [-j] URI\n"
           "  QD1 writes with FUA, one thread per connection, each to its own\n"
           "  region of the export.  Defaults: -c 16 -t 10 -r 2 -b 4096.\n"
           "  -j prints one JSON object.  URI e.g. nbd+unix:///?socket=/path\n");
}

/* Open connection i, check FUA (and multi-conn when there are several
 * connections). */
static int
fb_connect (fb_conn_t *fc, const char *uri)
{
  fc->fc_nbd = nbd_create ();
  if (fc->fc_nbd == NULL || nbd_connect_uri (fc->fc_nbd, uri) == -1) {
    fprintf (stderr, "fua-bench: connection %u to %s: %s\n", fc->fc_index,
             uri, nbd_get_error ());
    return -1;
  }
  if (nbd_can_fua (fc->fc_nbd) != 1) {
    fprintf (stderr, "fua-bench: %s does not offer FUA\n", uri);
    return -1;
  }
  if (nbd_is_read_only (fc->fc_nbd) == 1) {
    fprintf (stderr, "fua-bench: %s is read-only\n", uri);
    return -1;
  }
  if (fc->fc_index == 0 && fb_conns > 1
      && nbd_can_multi_conn (fc->fc_nbd) != 1)
    fprintf (stderr, "fua-bench: warning: %s does not offer multi-conn; "
             "using %u connections anyway (disjoint regions)\n",
             uri, fb_conns);
  return 0;
}

int
main (int argc, char *argv[])
{
  const char *uri;
  fb_conn_t *conns;
  int64_t size;
  uint64_t region, *all, sum = 0, minops = UINT64_MAX, maxops = 0;
  size_t n = 0;
  int c, rc = 0;

  while ((c = getopt (argc, argv, "c:t:r:b:jh")) != -1) {
    switch (c) {
    case 'c':
      fb_conns = (unsigned) fb_parse_num ("-c", optarg, 1, FB_MAX_CONNS);
      break;
    case 't':
      fb_seconds = fb_parse_num ("-t", optarg, 0.1, 86400);
      break;
    case 'r':
      fb_ramp = fb_parse_num ("-r", optarg, 0, 86400);
      break;
    case 'b':
      fb_blksz = (uint32_t) fb_parse_num ("-b", optarg, 512, 32 << 20);
      break;
    case 'j':
      fb_json = true;
      break;
    case 'h':
      fb_usage (stdout);
      return 0;
    default:
      fb_usage (stderr);
      return 2;
    }
  }
  if (optind != argc - 1) {
    fb_usage (stderr);
    return 2;
  }
  uri = argv[optind];

  conns = calloc (fb_conns, sizeof *conns);
  if (conns == NULL) {
    perror ("fua-bench: calloc");
    return 1;
  }
  for (unsigned i = 0; i < fb_conns; i++) {
    conns[i].fc_index = i;
    if (fb_connect (&conns[i], uri) == -1) {
      rc = 1;
      goto out;
    }
  }
  size = nbd_get_size (conns[0].fc_nbd);
  if (size < 0) {
    fprintf (stderr, "fua-bench: %s: %s\n", uri, nbd_get_error ());
    rc = 1;
    goto out;
  }
  region = (uint64_t) size / fb_conns / fb_blksz * fb_blksz;
  if (region == 0) {
    fprintf (stderr, "fua-bench: export of %" PRId64 " bytes is too small "
             "for %u regions of %" PRIu32 "-byte blocks\n",
             size, fb_conns, fb_blksz);
    rc = 1;
    goto out;
  }

  /* The clock starts now; every thread reads the same three times. */
  fb_t_measure = fb_now_ns () + (uint64_t) (fb_ramp * 1e9);
  fb_t_end = fb_t_measure + (uint64_t) (fb_seconds * 1e9);
  for (unsigned i = 0; i < fb_conns; i++) {
    conns[i].fc_region_off = (uint64_t) i * region;
    conns[i].fc_region_blocks = region / fb_blksz;
    errno = pthread_create (&conns[i].fc_thread, NULL, fb_thread, &conns[i]);
    if (errno != 0) {
      perror ("fua-bench: pthread_create");
      atomic_store (&fb_failed, true);
      for (unsigned j = 0; j < i; j++)
        pthread_join (conns[j].fc_thread, NULL);
      rc = 1;
      goto out;
    }
  }
  for (unsigned i = 0; i < fb_conns; i++)
    pthread_join (conns[i].fc_thread, NULL);
  if (atomic_load (&fb_failed)) {
    for (unsigned i = 0; i < fb_conns; i++)
      if (conns[i].fc_err[0])
        fprintf (stderr, "fua-bench: %s\n", conns[i].fc_err);
    rc = 1;
    goto out;
  }

  /* Merge, sort, summarize. */
  for (unsigned i = 0; i < fb_conns; i++) {
    n += conns[i].fc_nlat;
    if (conns[i].fc_nlat < minops)
      minops = conns[i].fc_nlat;
    if (conns[i].fc_nlat > maxops)
      maxops = conns[i].fc_nlat;
  }
  if (n == 0) {
    fprintf (stderr, "fua-bench: no write completed in the measured "
             "window\n");
    rc = 1;
    goto out;
  }
  all = malloc (n * sizeof *all);
  if (all == NULL) {
    perror ("fua-bench: malloc");
    rc = 1;
    goto out;
  }
  n = 0;
  for (unsigned i = 0; i < fb_conns; i++) {
    memcpy (all + n, conns[i].fc_lat, conns[i].fc_nlat * sizeof *all);
    n += conns[i].fc_nlat;
  }
  qsort (all, n, sizeof *all, fb_cmp_u64);
  for (size_t i = 0; i < n; i++)
    sum += all[i];

  {
    double iops = (double) n / fb_seconds;
    double mean_us = (double) sum / (double) n / 1000.0;
    double p50_us = (double) fb_percentile (all, n, 50) / 1000.0;
    double p99_us = (double) fb_percentile (all, n, 99) / 1000.0;
    double max_us = (double) all[n - 1] / 1000.0;

    if (fb_json)
      printf ("{\"conns\": %u, \"seconds\": %g, \"ramp\": %g, "
              "\"block_size\": %" PRIu32 ", \"export_size\": %" PRId64 ", "
              "\"ops\": %zu, \"iops\": %.1f, \"lat_mean_us\": %.1f, "
              "\"lat_p50_us\": %.1f, \"lat_p99_us\": %.1f, "
              "\"lat_max_us\": %.1f, \"ops_per_conn_min\": %" PRIu64 ", "
              "\"ops_per_conn_max\": %" PRIu64 "}\n",
              fb_conns, fb_seconds, fb_ramp, fb_blksz, size, n, iops,
              mean_us, p50_us, p99_us, max_us, minops, maxops);
    else
      printf ("fua-bench: %u connections, %g s (+%g s ramp), %" PRIu32
              "-byte FUA writes at QD1 each\n"
              "  writes %zu, IOPS %.1f\n"
              "  latency us: mean %.1f, p50 %.1f, p99 %.1f, max %.1f\n"
              "  writes per connection: min %" PRIu64 ", max %" PRIu64 "\n",
              fb_conns, fb_seconds, fb_ramp, fb_blksz, n, iops, mean_us,
              p50_us, p99_us, max_us, minops, maxops);
  }
  free (all);

 out:
  for (unsigned i = 0; i < fb_conns; i++) {
    if (conns[i].fc_nbd) {
      if (rc == 0)
        nbd_shutdown (conns[i].fc_nbd, 0);
      nbd_close (conns[i].fc_nbd);
    }
    free (conns[i].fc_lat);
  }
  free (conns);
  return rc;
}
