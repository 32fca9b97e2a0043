/*
 * core-bench.c: what one operation of the engine costs, with no NBD, no
 * nbdkit and no client in the way: instructions and CPU time per 4 KiB
 * and per 128 KiB write, per read (cold and cached), per txg sync and per
 * intent-log commit.  A front end like any other: it includes core/zvol.h
 * alone and links libzvol (the exported API), so it measures what the
 * plugin calls.
 *
 * Usage: core-bench [-d DIR] [-s SIZE] [-b VOLBLOCKSIZE] [-c CACHE]
 *                   [-n OPS] [-k TXGS] [-l COMMITS] [-a OFFSET] [-t] [-q]
 * (-h for the meaning; bench/run-bench.sh --suite core runs it, also
 * under callgrind, and compares two builds: bench/README.md).
 *
 * Theory of operation
 * -------------------
 * One pool on one file, DIR/core-bench.PID.img (sparse; removed at the
 * end; a DIR on tmpfs takes the disk out), goes through a fixed sequence
 * of phases.  Each phase is
 * a window: a sample of the counters before, the operations, whatever
 * makes them complete (a txg sync for the writes), a sample after.  The
 * figures of a phase are the differences divided by its operation count:
 *
 *   write-128k   sequential 128 KiB writes filling the volume once, then
 *                the txg sync that writes them (zvol_flush, the volume
 *                being open with flush-by-txg)
 *   write-4k     OPS 4 KiB writes, each to a different volume block, over
 *                the filled volume, then the txg sync
 *   txg-sync     TXGS times: one 4 KiB write, then a txg sync: the fixed
 *                cost of a txg (space maps, objset, uberblocks, flushes)
 *   write-4k-base, snapshot, write-4k-snap  (at the end, each on a new
 *                pool with the same history: the volume filled, 100
 *                rounds of 64 scattered 4 KiB writes)  write-4k-base:
 *                OPS 4 KiB overwrites and a txg sync; snapshot: the 100
 *                rounds again with a snapshot ending each (the writes'
 *                cost is in its figures); write-4k-snap: the same
 *                overwrites with the 100 snapshots present, every block a
 *                block they hold (it goes on the dead list instead of
 *                being freed).  snap over base: what snapshots cost a
 *                writer
 *   write-4k-full, write-128k-full  (after the snapshot phases, on a
 *                new pool of the volume + 25% + 128 MiB, about 80% full
 *                once the volume is filled: the plugin's default size
 *                before it made room for the txg pipeline, and a pool
 *                users may still give it): the volume filled, then 16 txgs of OPS/4
 *                4 KiB writes to random blocks each, which leave the free
 *                space in scattered holes, as a live pool's overwrites do.
 *                write-4k-full: 4 more such txgs (OPS writes); write-128k-
 *                full: sequential 128 KiB writes over an eighth of the
 *                volume and one txg.  After each, a line '#dev' gives the
 *                device writes of its txgs (txg history): how many, and
 *                KiB per write, which says how well the allocator found
 *                long free runs for them (tab-separated: phase, txgs,
 *                writes, KiB written)
 *   write-4k-room, txg-sync-room, write-4k-room-snap, txg-sync-snap,
 *   write-4k-room-less  (last, each on a new pool of the NBD bench's
 *                zvol-snap size, 4 x the volume + 256 MiB; -R runs them
 *                alone): the volume filled, every block overwritten once,
 *                then 8 txgs of random 4 KiB writes, each txg as many as
 *                dirty a twelfth of the space live data leaves (in
 *                volume blocks, at most half the volume's): just under
 *                the size the space kick gives txgs under overwrites, so
 *                the sizes are the NBD bench's and the syncs the loop's
 *                own, not the sync thread's.  txg-sync-room: then TXGS times one 4 KiB
 *                write and a sync.  -snap: the same with 100 snapshots
 *                taken after the fill; -less: without snapshots, on a
 *                pool smaller by the volume (what the snapshots hold).
 *                After each write-4k-room phase a line '#txgs' gives its
 *                txgs, their size in blocks, and the data and metadata
 *                bytes written per write (tab-separated: phase, txgs,
 *                blocks, data, metadata)
 *   read-128k    the pool re-imported (a cold cache), then sequential
 *                128 KiB reads of the whole volume: read, verify, cache
 *   read-128k-hot  the same reads again, from the cache (what a client
 *                streaming a volume that fits the cache costs)
 *   read-4k      re-imported again, OPS 4 KiB reads of distinct blocks
 *                (every one a cache miss)
 *   read-4k-hot  the same OPS reads again (cache hits while the cache
 *                holds them; the miss/op column says)
 *   zil-commit   COMMITS times: one 4 KiB write, then zvol_flush through
 *                the intent log (the volume's default flush path)
 *
 * The txg timeout is set to ten minutes, so no timer sync falls into a
 * window: every txg is one that a phase asked for, and a second run does
 * the same work (offsets and data come from fixed seeds).  The data is
 * random and every write changes its first bytes, so no block is all
 * zeros (the sync would turn it into a hole).
 *
 * Counters, per window:
 *   cpu     getrusage(RUSAGE_SELF): every thread of the process, the txg
 *           sync thread and io_uring's workers included
 *   caller  CLOCK_THREAD_CPUTIME_ID of the thread issuing the calls (the
 *           open-context share; a txg sync's work is not in it)
 *   wall    CLOCK_MONOTONIC
 *   instr   instructions, every thread, from perf_event_open (hardware
 *           counter, inherited by the threads the engine starts; user and
 *           kernel where allowed) when the machine has one; under
 *           callgrind none here: each window is a callgrind dump named by
 *           the phase (CALLGRIND_DUMP_STATS_AT), counted by the script,
 *           user space only.  A window opens with a dump too ("between",
 *           which the script ignores): CALLGRIND_ZERO_STATS resets only
 *           the calling thread's counts, so the txg thread's work between
 *           two windows (a pool's fill, an import) landed in the next one
 *   miss    buffer-cache misses per operation (zvol_pool_get_stats): a
 *           cold read-4k should show 1.00, a hot one 0.00
 *
 * The request buffer starts OFFSET bytes (-a, default 16) past a page
 * boundary, as nbdkit's are (malloc'd: 16 bytes past a 64-byte line),
 * since the speed of a copy can depend on how the two buffers are
 * aligned (zv_util.c, "Bulk copies").
 *
 * Single-threaded apart from the engine's own threads; no locking here.
 * Output: a table, or with -t tab-separated lines for the script.
 */
#include <config.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <linux/perf_event.h>

#ifdef HAVE_VALGRIND_CALLGRIND_H
#include <valgrind/callgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#define CALLGRIND_DUMP_STATS_AT(name) do { (void) (name); } while (0)
#endif

#include "zvol.h"

#define KiB ((uint64_t) 1024)
#define MiB (1024 * KiB)
#define GiB (1024 * MiB)

/* Command line (defaults: the full run of run-bench.sh --suite core). */
static const char *cbench_dir = "/var/tmp";     /* -d */
static uint64_t cbench_volsize = 1 * GiB;       /* -s */
static uint32_t cbench_volblocksize = ZVOL_DEFAULT_VOLBLOCKSIZE; /* -b */
static uint64_t cbench_cache;                   /* -c (0: engine default) */
static uint64_t cbench_ops = 16384;             /* -n: 4 KiB ops */
static uint64_t cbench_txgs = 100;              /* -k */
static uint64_t cbench_commits = 1000;          /* -l */
static uint32_t cbench_buf_off = 16;            /* -a */
static bool cbench_tsv;                         /* -t */
static bool cbench_quiet;                       /* -q */
static bool cbench_room_only;                   /* -R */
static const char *cbench_compression;          /* -z: NULL, the default */

static char cbench_path[4096];                  /* the pool file */
static bool cbench_created;
static int cbench_perf_fd = -1;                 /* instructions, or -1 */
static const char *cbench_instr_src = "none";

/* ---- small things ---- */

static void __attribute__ ((noreturn, format (printf, 1, 2)))
cbench_die (const char *fmt, ...)
{
  va_list ap;

  fprintf (stderr, "core-bench: ");
  va_start (ap, fmt);
  vfprintf (stderr, fmt, ap);
  va_end (ap);
  fputc ('\n', stderr);
  if (cbench_created)
    unlink (cbench_path);
  exit (1);
}

static void
cbench_check (int r, const char *what)
{
  if (r < 0)
    cbench_die ("%s: %s", what, strerror (-r));
}

static void *
cbench_alloc_aligned (size_t len)
{
  void *p;

  if (posix_memalign (&p, 4096, len) != 0)
    cbench_die ("out of memory (%zu bytes)", len);
  return p;
}

/* "4K", "16M", "1G", or bytes; 0 on a bad value. */
static uint64_t
cbench_parse_size (const char *s)
{
  char *end;
  unsigned long long v;

  errno = 0;
  v = strtoull (s, &end, 10);
  if (errno != 0 || end == s)
    return 0;
  switch (*end) {
  case 'k': case 'K': v *= KiB; end++; break;
  case 'm': case 'M': v *= MiB; end++; break;
  case 'g': case 'G': v *= GiB; end++; break;
  case '\0': break;
  default: return 0;
  }
  return *end == '\0' ? v : 0;
}

static uint64_t
cbench_ns (clockid_t clk)
{
  struct timespec ts;

  clock_gettime (clk, &ts);
  return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static uint64_t
cbench_gcd (uint64_t a, uint64_t b)
{
  while (b) {
    uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

/* splitmix64: the data and the offsets come from fixed seeds. */
static uint64_t
cbench_rand (uint64_t *state)
{
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* ---- counters ---- */

/* The instruction counter, inherited by every thread created after it
 * (the engine's threads start later), read as their sum.  Kernel
 * instructions too where perf_event_paranoid allows; none under
 * valgrind, whose own instructions it would count. */
static void
cbench_perf_open (void)
{
  struct perf_event_attr pa;

  if (RUNNING_ON_VALGRIND) {
    cbench_instr_src = "callgrind";
    return;
  }
  for (int user_only = 0; user_only <= 1 && cbench_perf_fd < 0; user_only++) {
    memset (&pa, 0, sizeof pa);
    pa.size = sizeof pa;
    pa.type = PERF_TYPE_HARDWARE;
    pa.config = PERF_COUNT_HW_INSTRUCTIONS;
    pa.inherit = 1;
    pa.exclude_hv = 1;
    pa.exclude_kernel = user_only;
    cbench_perf_fd = (int) syscall (SYS_perf_event_open, &pa, 0, -1, -1, 0);
    if (cbench_perf_fd >= 0)
      cbench_instr_src = user_only ? "perf (user)" : "perf (user+kernel)";
  }
}

typedef struct cbench_sample {
  uint64_t cs_wall_ns, cs_cpu_ns, cs_caller_ns, cs_instr;
  uint64_t cs_misses;
} cbench_sample_t;

static void
cbench_sample (zvol_pool_t *pool, cbench_sample_t *s)
{
  struct rusage ru;
  zvol_pool_stats_t ps;
  uint64_t v = 0;

  getrusage (RUSAGE_SELF, &ru);
  s->cs_cpu_ns = ((uint64_t) ru.ru_utime.tv_sec + (uint64_t) ru.ru_stime.tv_sec)
    * 1000000000u
    + ((uint64_t) ru.ru_utime.tv_usec + (uint64_t) ru.ru_stime.tv_usec) * 1000u;
  s->cs_caller_ns = cbench_ns (CLOCK_THREAD_CPUTIME_ID);
  s->cs_wall_ns = cbench_ns (CLOCK_MONOTONIC);
  s->cs_instr = 0;
  if (cbench_perf_fd >= 0 && read (cbench_perf_fd, &v, sizeof v) == sizeof v)
    s->cs_instr = v;
  zvol_pool_get_stats (pool, &ps);
  s->cs_misses = ps.ps_cache_misses;
}

/* ---- phases ---- */

/* One phase's window.  'begin' dumps callgrind's counts so far (every
 * thread's, discarded), 'end' dumps them under the phase's name and
 * prints the row. */
typedef struct cbench_phase {
  const char *cp_name;
  uint64_t cp_ops;
  cbench_sample_t cp_before;
} cbench_phase_t;

static void
cbench_begin (cbench_phase_t *cp, zvol_pool_t *pool, const char *name,
              uint64_t ops)
{
  cp->cp_name = name;
  cp->cp_ops = ops;
  if (!cbench_quiet && ops > 0)
    fprintf (stderr, "core-bench: %s: %" PRIu64 " ops\n", name, ops);
  else if (!cbench_quiet)
    fprintf (stderr, "core-bench: %s\n", name);
  CALLGRIND_DUMP_STATS_AT ("between");
  cbench_sample (pool, &cp->cp_before);
}

static void
cbench_end (cbench_phase_t *cp, zvol_pool_t *pool)
{
  cbench_sample_t a;
  const cbench_sample_t *b = &cp->cp_before;
  double n = (double) cp->cp_ops;
  uint64_t misses;
  char instr[32];

  cbench_sample (pool, &a);
  CALLGRIND_DUMP_STATS_AT (cp->cp_name);
  if (cbench_perf_fd >= 0)
    snprintf (instr, sizeof instr, "%.0f", (double) (a.cs_instr - b->cs_instr) / n);
  else
    snprintf (instr, sizeof instr, "-");
  misses = a.cs_misses - b->cs_misses;
  printf (cbench_tsv ? "%s\t%" PRIu64 "\t%s\t%.3f\t%.3f\t%.3f\t%.2f\n"
          : "%-12s %8" PRIu64 " %12s %11.3f %12.3f %11.3f %8.2f\n",
          cp->cp_name, cp->cp_ops, instr,
          (double) (a.cs_cpu_ns - b->cs_cpu_ns) / n / 1000,
          (double) (a.cs_caller_ns - b->cs_caller_ns) / n / 1000,
          (double) (a.cs_wall_ns - b->cs_wall_ns) / n / 1000,
          (double) misses / n);
  fflush (stdout);
}

/* The i-th block of a fixed walk that visits every volume block once per
 * nblocks steps (a stride coprime to nblocks), and a 4 KiB piece of it. */
static uint64_t
cbench_spread (uint64_t i, uint64_t nblocks, uint64_t stride)
{
  uint64_t pieces = cbench_volblocksize / (4 * KiB);
  uint64_t blk = (stride * (i % nblocks) + 17) % nblocks;

  return blk * cbench_volblocksize + ((i * 5) % pieces) * 4 * KiB;
}

static zvol_pool_t *
cbench_pool_open (bool create)
{
  zvol_pool_config_t pc;
  zvol_pool_t *pool;

  zvol_pool_config_init (&pc);
  pc.pc_devices[0] = cbench_path;
  pc.pc_ndevices = 1;
  pc.pc_create = create;
  pc.pc_name = "bench";
  pc.pc_volsize = cbench_volsize;
  pc.pc_volblocksize = cbench_volblocksize;
  pc.pc_sparse = true;
  pc.pc_compression = cbench_compression;
  if (cbench_cache)
    pc.pc_cache_size = cbench_cache;
  pc.pc_txg.tt_timeout_ms = 600000;     /* syncs only when asked */
  cbench_check (zvol_pool_open (&pc, &pool), create ? "create" : "import");
  cbench_check (zvol_pool_start (pool), "start");
  return pool;
}

static zvol_t *
cbench_vol_open (zvol_pool_t *pool, bool flush_by_txg)
{
  zvol_config_t vc;
  zvol_t *zv;

  zvol_config_init (&vc);
  vc.vc_flush_by_txg = flush_by_txg;
  cbench_check (zvol_open (pool, NULL, &vc, &zv), "open");
  return zv;
}

static void
cbench_close (zvol_pool_t *pool, zvol_t *zv)
{
  cbench_check (zvol_close (zv), "close");
  cbench_check (zvol_pool_close (pool), "pool close");
}

static void
cbench_write (zvol_t *zv, uint8_t *buf, uint64_t *seq, uint64_t off,
              uint32_t len)
{
  /* New bytes in every write: no two blocks alike, none all zeros. */
  (*seq)++;
  memcpy (buf, seq, sizeof *seq);
  cbench_check (zvol_write (zv, buf, off, len, 0), "write");
}

/* Room for the volume, the metadata and the log ring, and for the
 * blocks the snapshots keep when write-4k-snap overwrites them (OPS
 * blocks and the snapshots' own); sparse. */
static uint64_t
cbench_file_size (void)
{
  return cbench_volsize + cbench_volsize / 4 + 256 * MiB
    + (cbench_ops + 6400) * (uint64_t) cbench_volblocksize
    + cbench_ops * (uint64_t) cbench_volblocksize / 8;
}

static uint64_t
cbench_max (uint64_t a, uint64_t b)
{
  return a > b ? a : b;
}

/* The device writes of the txgs after 'since', reported after a phase
 * (see the theory comment); returns the newest txg. */
static uint64_t
cbench_dev_writes (zvol_pool_t *pool, const char *phase, uint64_t since)
{
  zvol_txg_stats_t h[ZVOL_TXG_HISTORY];
  size_t n = zvol_pool_get_txgs (pool, h, ZVOL_TXG_HISTORY);
  uint64_t txgs = 0, writes = 0, bytes = 0, last = since;

  for (size_t i = 0; i < n; i++) {
    if (h[i].ts_txg <= since || h[i].ts_state != 'C')
      continue;
    txgs++;
    writes += h[i].ts_writes;
    bytes += h[i].ts_nwritten;
    last = cbench_max (last, h[i].ts_txg);
  }
  if (cbench_tsv)
    printf ("#dev\t%s\t%" PRIu64 "\t%" PRIu64 "\t%" PRIu64 "\n", phase, txgs,
            writes, bytes / KiB);
  else
    printf ("# %s: %" PRIu64 " txgs, %" PRIu64 " device writes, %.1f KiB "
            "per write\n", phase, txgs, writes,
            writes ? (double) bytes / KiB / (double) writes : 0.0);
  fflush (stdout);
  return last;
}

/* The newest committed txg. */
static uint64_t
cbench_last_txg (zvol_pool_t *pool)
{
  zvol_pool_stats_t ps;

  zvol_pool_get_stats (pool, &ps);
  return ps.ps_txg_synced;
}

/*
 * The fuller pool's phases (see the theory comment): a pool of the
 * volume + 25% + 128 MiB (without the txg pipeline's room), filled, its free space scattered
 * by random overwrites, then the two measured phases.
 */
static void
cbench_full (uint8_t *buf, uint64_t *seq)
{
  const uint32_t big = 128 * KiB, small = 4 * KiB;
  uint64_t nblocks = cbench_volsize / cbench_volblocksize;
  uint64_t nbig = cbench_volsize / big, round = cbench_max (cbench_ops / 4, 1);
  uint64_t rs = 4242, since;
  cbench_phase_t cp;
  zvol_pool_t *pool;
  zvol_t *zv;
  int fd;

  unlink (cbench_path);
  fd = open (cbench_path, O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd < 0 || ftruncate (fd, (off_t) (cbench_volsize + cbench_volsize / 4
                                        + 128 * MiB)) != 0)
    cbench_die ("%s: %s", cbench_path, strerror (errno));
  close (fd);
  pool = cbench_pool_open (true);
  zv = cbench_vol_open (pool, true);
  for (uint64_t i = 0; i < nbig; i++)
    cbench_write (zv, buf, seq, i * big, big);
  cbench_check (zvol_flush (zv), "flush");
  for (unsigned k = 0; k < 16; k++) {
    for (uint64_t i = 0; i < round; i++)
      cbench_write (zv, buf, seq,
                    (cbench_rand (&rs) % nblocks) * cbench_volblocksize, small);
    cbench_check (zvol_flush (zv), "flush");
  }

  since = cbench_last_txg (pool);
  cbench_begin (&cp, pool, "write-4k-full", 4 * round);
  for (unsigned k = 0; k < 4; k++) {
    for (uint64_t i = 0; i < round; i++)
      cbench_write (zv, buf, seq,
                    (cbench_rand (&rs) % nblocks) * cbench_volblocksize, small);
    cbench_check (zvol_flush (zv), "flush");
  }
  cbench_end (&cp, pool);
  since = cbench_dev_writes (pool, "write-4k-full", since);

  cbench_begin (&cp, pool, "write-128k-full", nbig / 8);
  for (uint64_t i = 0; i < nbig / 8; i++)
    cbench_write (zv, buf, seq, (nbig / 2 + i) * big, big);
  cbench_check (zvol_flush (zv), "flush");
  cbench_end (&cp, pool);
  (void) cbench_dev_writes (pool, "write-128k-full", since);
  cbench_close (pool, zv);
}

/* The table's header (or, with -t, the lines the script reads), once. */
static void
cbench_header (zvol_pool_t *pool)
{
  static bool done;
  zvol_pool_stats_t ps;

  if (done)
    return;
  done = true;
  zvol_pool_get_stats (pool, &ps);
  if (!cbench_tsv)
    printf ("# core-bench: %s, volume %" PRIu64 " MiB, volblocksize %u KiB,"
            " cache limit %" PRIu64 " MiB, direct I/O %s, instructions: %s\n"
            "%-12s %8s %12s %11s %12s %11s %8s\n",
            cbench_path, cbench_volsize / MiB, cbench_volblocksize / 1024,
            ps.ps_cache_limit / MiB, ps.ps_dev_direct[0] ? "yes" : "no",
            cbench_instr_src, "op", "ops", "instr/op", "cpu us/op",
            "caller us/op", "wall us/op", "miss/op");
  else
    printf ("#instr\t%s\n#direct\t%s\n", cbench_instr_src,
            ps.ps_dev_direct[0] ? "yes" : "no");
}

/* The txgs after 'since' (txg history): how many, and the data and
 * metadata their syncs wrote per operation of a phase of 'ops' (the
 * theory comment's '#txgs' line). */
static void
cbench_txg_figures (zvol_pool_t *pool, const char *phase, uint64_t since,
                    uint64_t per_txg, uint64_t data0, uint64_t meta0,
                    uint64_t ops)
{
  zvol_pool_stats_t ps;
  uint64_t txgs;

  zvol_pool_get_stats (pool, &ps);
  txgs = ps.ps_txg_synced - since;
  if (cbench_tsv)
    printf ("#txgs\t%s\t%" PRIu64 "\t%" PRIu64 "\t%.0f\t%.0f\n", phase,
            txgs, per_txg,
            (double) (ps.ps_written_data - data0) / (double) ops,
            (double) (ps.ps_written_meta - meta0) / (double) ops);
  else
    printf ("# %s: %" PRIu64 " txgs of %" PRIu64 " blocks, %.0f bytes of "
            "data and %.0f of metadata written per write\n", phase, txgs,
            per_txg,
            (double) (ps.ps_written_data - data0) / (double) ops,
            (double) (ps.ps_written_meta - meta0) / (double) ops);
  fflush (stdout);
}

/* One txg of random 4 KiB writes that dirty 'blocks' distinct volume
 * blocks, then its sync; returns the writes. */
static uint64_t
cbench_room_txg (zvol_t *zv, uint8_t *buf, uint64_t *seq, uint64_t *rs,
                 uint8_t *dirty, uint64_t blocks)
{
  uint64_t npieces = cbench_volsize / (4 * KiB);
  uint64_t per_block = cbench_volblocksize / (4 * KiB), n = 0, writes = 0;

  memset (dirty, 0, cbench_volsize / cbench_volblocksize);
  while (n < blocks) {
    uint64_t piece = cbench_rand (rs) % npieces;

    n += !dirty[piece / per_block];
    dirty[piece / per_block] = 1;
    cbench_write (zv, buf, seq, piece * 4 * KiB, 4 * KiB);
    writes++;
  }
  cbench_check (zvol_flush (zv), "flush");
  return writes;
}

/*
 * Random 4 KiB overwrites in txgs of the size the space kick gives them
 * on the NBD bench's zvol-snap pool, 4 x the volume + 256 MiB (see the
 * theory comment).  variant 0: no snapshot; 1: 100 snapshots after the
 * fill; 2: no snapshot, on a pool smaller by the volume (what the
 * snapshots hold).
 */
static void
cbench_room (uint8_t *buf, uint64_t *seq, int variant)
{
  static const char *const names[] = {
    "write-4k-room", "write-4k-room-snap", "write-4k-room-less",
  };
  const uint32_t big = 128 * KiB, small = 4 * KiB;
  const unsigned txgs = 8;
  uint64_t nblocks = cbench_volsize / cbench_volblocksize;
  uint64_t rs = 4343, stride = (0x9e3779b1u % nblocks) | 1, since;
  uint64_t room, slop, per_txg, ops = 0;
  uint8_t *dirty = calloc (nblocks, 1);
  zvol_pool_stats_t ps;
  cbench_phase_t cp;
  zvol_pool_t *pool;
  zvol_t *zv;
  int fd;

  if (dirty == NULL)
    cbench_die ("out of memory");
  while (cbench_gcd (stride, nblocks) != 1)
    stride += 2;
  unlink (cbench_path);
  fd = open (cbench_path, O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd < 0
      || ftruncate (fd, (off_t) ((variant == 2 ? 3 : 4) * cbench_volsize
                                 + 256 * MiB)) != 0)
    cbench_die ("%s: %s", cbench_path, strerror (errno));
  close (fd);
  pool = cbench_pool_open (true);
  zv = cbench_vol_open (pool, true);
  cbench_header (pool);
  for (uint64_t i = 0; i < cbench_volsize / big; i++)
    cbench_write (zv, buf, seq, i * big, big);
  cbench_check (zvol_flush (zv), "flush");
  if (variant == 1)
    for (unsigned k = 0; k < 100; k++) {
      char name[2 * ZVOL_NAME_MAX + 16];

      snprintf (name, sizeof name, "%s@room%u", zvol_name (zv), k);
      cbench_check (zvol_snapshot_create (pool, name), "snapshot");
    }
  /* Every block overwritten once (with the snapshots, each goes on the
   * dead list): what follows is the steady state, where every block a
   * write lets go of was born after the snapshots. */
  for (uint64_t i = 0; i < nblocks; i++)
    cbench_write (zv, buf, seq, cbench_spread (i, nblocks, stride), small);
  cbench_check (zvol_flush (zv), "flush");

  /* The space kick's txgs under overwrites: it fires when the
   * reservations of the open txg and the deferred frees of the two
   * before it (about three txgs' worth) pass space_sync_percent (30%)
   * of the space not held by live data, less the allocator's slop (a
   * thirty-second of the pool), so at about a tenth of that space a txg.
   * A twelfth here: just short of it, so that each txg ends where this
   * loop syncs it and no kick makes the window's txgs depend on the
   * sync thread's timing. */
  zvol_pool_get_stats (pool, &ps);
  slop = cbench_max (ps.ps_space_total / 32, 4 * MiB);
  room = ps.ps_space_total - ps.ps_space_allocated + ps.ps_space_deferred;
  room = room > slop ? room - slop : 0;
  per_txg = room / 12 / cbench_volblocksize;
  /* A small volume in a roomy pool: half its blocks, not all of them
   * (which would take random writes some ln(blocks) passes over it). */
  if (per_txg > nblocks / 2)
    per_txg = nblocks / 2;
  per_txg = cbench_max (per_txg, 1);
  /* Two txgs of that size before the window: the deferred frees are
   * those of txgs of its size too.  The window's writes are known only
   * at its end (they are random: as many as make the txgs' blocks). */
  for (unsigned t = 0; t < 2; t++)
    (void) cbench_room_txg (zv, buf, seq, &rs, dirty, per_txg);
  zvol_pool_get_stats (pool, &ps);
  since = ps.ps_txg_synced;
  cbench_begin (&cp, pool, names[variant], 0);
  for (unsigned t = 0; t < txgs; t++)
    ops += cbench_room_txg (zv, buf, seq, &rs, dirty, per_txg);
  cp.cp_ops = ops;
  cbench_end (&cp, pool);
  cbench_txg_figures (pool, names[variant], since, per_txg,
                      ps.ps_written_data, ps.ps_written_meta, ops);
  /* The fixed cost of a txg with the snapshots present, against the
   * same pool without them: what a sync does for each dataset. */
  if (variant < 2) {
    cbench_begin (&cp, pool, variant ? "txg-sync-snap" : "txg-sync-room",
                  cbench_txgs);
    for (uint64_t i = 0; i < cbench_txgs; i++) {
      cbench_write (zv, buf, seq,
                    cbench_spread (i * 7 + 3, nblocks, stride), small);
      cbench_check (zvol_flush (zv), "flush");
    }
    cbench_end (&cp, pool);
  }
  cbench_close (pool, zv);
  free (dirty);
}

/* Every phase but the write-4k-room ones, in order. */
static void
cbench_phases (uint8_t *buf, uint64_t *seqp, uint64_t stride)
{
  const uint32_t big = 128 * KiB, small = 4 * KiB;
  uint64_t nblocks = cbench_volsize / cbench_volblocksize;
  uint64_t nbig = cbench_volsize / big, seq = *seqp;
  cbench_phase_t cp;
  zvol_pool_t *pool;
  zvol_t *zv;
  int fd;

  pool = cbench_pool_open (true);
  zv = cbench_vol_open (pool, true);
  cbench_header (pool);
  cbench_begin (&cp, pool, "write-128k", nbig);
  for (uint64_t i = 0; i < nbig; i++)
    cbench_write (zv, buf, &seq, i * big, big);
  cbench_check (zvol_flush (zv), "flush");
  cbench_end (&cp, pool);

  cbench_begin (&cp, pool, "write-4k", cbench_ops);
  for (uint64_t i = 0; i < cbench_ops; i++)
    cbench_write (zv, buf, &seq, cbench_spread (i, nblocks, stride), small);
  cbench_check (zvol_flush (zv), "flush");
  cbench_end (&cp, pool);

  cbench_begin (&cp, pool, "txg-sync", cbench_txgs);
  for (uint64_t i = 0; i < cbench_txgs; i++) {
    cbench_write (zv, buf, &seq, cbench_spread (i * 7 + 3, nblocks, stride), small);
    cbench_check (zvol_flush (zv), "flush");
  }
  cbench_end (&cp, pool);

  cbench_close (pool, zv);

  /* Cold reads: a fresh import has an empty cache. */
  pool = cbench_pool_open (false);
  zv = cbench_vol_open (pool, false);
  cbench_begin (&cp, pool, "read-128k", nbig);
  for (uint64_t i = 0; i < nbig; i++)
    cbench_check (zvol_read (zv, buf, i * big, big), "read");
  cbench_end (&cp, pool);
  cbench_begin (&cp, pool, "read-128k-hot", nbig);
  for (uint64_t i = 0; i < nbig; i++)
    cbench_check (zvol_read (zv, buf, i * big, big), "read");
  cbench_end (&cp, pool);
  cbench_close (pool, zv);

  pool = cbench_pool_open (false);
  zv = cbench_vol_open (pool, false);
  cbench_begin (&cp, pool, "read-4k", cbench_ops);
  for (uint64_t i = 0; i < cbench_ops; i++)
    cbench_check (zvol_read (zv, buf, cbench_spread (i, nblocks, stride), small), "read");
  cbench_end (&cp, pool);

  cbench_begin (&cp, pool, "read-4k-hot", cbench_ops);
  for (uint64_t i = 0; i < cbench_ops; i++)
    cbench_check (zvol_read (zv, buf, cbench_spread (i, nblocks, stride), small), "read");
  cbench_end (&cp, pool);

  cbench_begin (&cp, pool, "zil-commit", cbench_commits);
  for (uint64_t i = 0; i < cbench_commits; i++) {
    cbench_write (zv, buf, &seq, cbench_spread (i * 11 + 5, nblocks, stride), small);
    cbench_check (zvol_flush (zv), "flush");
  }
  cbench_end (&cp, pool);
  cbench_close (pool, zv);

  /* What snapshots cost a writer: twice the same history on a new pool
   * (the volume filled, then 100 rounds of 64 scattered 4 KiB writes and
   * a txg), the second time with a snapshot after each round; then the
   * same 4 KiB overwrites on each.  Each block they overwrite, the
   * snapshots hold: it goes on the dead list instead of being freed. */
  for (int snaps = 0; snaps < 2; snaps++) {
    char name[2 * ZVOL_NAME_MAX + 16];

    unlink (cbench_path);
    fd = open (cbench_path, O_CREAT | O_EXCL | O_WRONLY, 0600);
    if (fd < 0 || ftruncate (fd, (off_t) cbench_file_size ()) != 0)
      cbench_die ("%s: %s", cbench_path, strerror (errno));
    close (fd);
    pool = cbench_pool_open (true);
    zv = cbench_vol_open (pool, true);
    for (uint64_t i = 0; i < nbig; i++)
      cbench_write (zv, buf, &seq, i * big, big);
    cbench_check (zvol_flush (zv), "flush");
    if (snaps)
      cbench_begin (&cp, pool, "snapshot", 100);
    for (unsigned k = 0; k < 100; k++) {
      for (unsigned i = 0; i < 64; i++)
        cbench_write (zv, buf, &seq,
                      cbench_spread (k * 64 + i + 5000, nblocks, stride),
                      small);
      if (snaps) {
        snprintf (name, sizeof name, "%s@bench%u", zvol_name (zv), k);
        cbench_check (zvol_snapshot_create (pool, name), "snapshot");
      }
      else
        cbench_check (zvol_flush (zv), "flush");
    }
    if (snaps)
      cbench_end (&cp, pool);
    cbench_begin (&cp, pool, snaps ? "write-4k-snap" : "write-4k-base",
                  cbench_ops);
    for (uint64_t i = 0; i < cbench_ops; i++)
      cbench_write (zv, buf, &seq, cbench_spread (i, nblocks, stride), small);
    cbench_check (zvol_flush (zv), "flush");
    cbench_end (&cp, pool);
    cbench_close (pool, zv);
  }

  cbench_full (buf, &seq);
  *seqp = seq;
}

static void
cbench_run (void)
{
  const uint32_t big = 128 * KiB;
  uint64_t nblocks = cbench_volsize / cbench_volblocksize;
  uint64_t stride, seq = 0, rs = 42;
  uint8_t *buf0 = cbench_alloc_aligned (big + 4096);
  uint8_t *buf = buf0 + cbench_buf_off;
  int fd;

  for (size_t i = 0; i < big; i += 8) {
    uint64_t r = cbench_rand (&rs);
    memcpy (buf + i, &r, 8);
  }
  stride = (0x9e3779b1u % nblocks) | 1;
  while (cbench_gcd (stride, nblocks) != 1)
    stride += 2;

  snprintf (cbench_path, sizeof cbench_path, "%s/core-bench.%ld.img",
            cbench_dir, (long) getpid ());
  fd = open (cbench_path, O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd < 0)
    cbench_die ("%s: %s", cbench_path, strerror (errno));
  cbench_created = true;
  if (ftruncate (fd, (off_t) cbench_file_size ()) != 0)
    cbench_die ("%s: %s", cbench_path, strerror (errno));
  close (fd);

  if (!cbench_room_only)
    cbench_phases (buf, &seq, stride);
  for (int variant = 0; variant < 3; variant++)
    cbench_room (buf, &seq, variant);

  unlink (cbench_path);
  cbench_created = false;
  free (buf0);
}

static void
cbench_usage (FILE *fp)
{
  fprintf (fp,
           "usage: core-bench [-d DIR] [-s SIZE] [-b VOLBLOCKSIZE] [-c CACHE]\n"
           "                  [-n OPS] [-k TXGS] [-l COMMITS] [-a OFFSET] [-z ALG] [-t] [-q] [-R]\n"
           "  -d DIR   where the pool file goes (default /var/tmp; tmpfs: no device)\n"
           "  -s SIZE  volume size (default 1G); the 128 KiB phases cover it once\n"
           "  -b SIZE  volblocksize (default 16K)\n"
           "  -c SIZE  buffer cache limit (default: the engine's)\n"
           "  -n OPS   4 KiB writes and reads (default 16384, at most one per block)\n"
           "  -k TXGS  txg syncs (default 100)\n"
           "  -l N     intent-log commits (default 1000)\n"
           "  -a OFF   the request buffer starts OFF bytes past a page (default 16, as\n"
           "           nbdkit's malloc'd buffers; 0 to 4095)\n"
           "  -z ALG   the volume's compression (off, lz4, zstd, zstd-N; default:\n"
           "           the engine's, lz4)\n"
           "  -t       tab-separated output (op, ops, instr/op, cpu, caller, wall us/op, miss/op)\n"
           "  -q       no progress lines on stderr\n"
           "  -R       only the write-4k-room phases\n");
}

int
main (int argc, char **argv)
{
  int c;

  while ((c = getopt (argc, argv, "d:s:b:c:n:k:l:a:z:tqRh")) != -1) {
    switch (c) {
    case 'd': cbench_dir = optarg; break;
    case 's': cbench_volsize = cbench_parse_size (optarg); break;
    case 'b': cbench_volblocksize = (uint32_t) cbench_parse_size (optarg); break;
    case 'c':
      cbench_cache = cbench_parse_size (optarg);
      if (cbench_cache == 0)
        cbench_die ("-c %s: not a size", optarg);
      break;
    case 'n': cbench_ops = strtoull (optarg, NULL, 10); break;
    case 'k': cbench_txgs = strtoull (optarg, NULL, 10); break;
    case 'l': cbench_commits = strtoull (optarg, NULL, 10); break;
    case 'a':
      cbench_buf_off = (uint32_t) strtoul (optarg, NULL, 10);
      if (cbench_buf_off >= 4096)
        cbench_die ("-a %s: 0 to 4095", optarg);
      break;
    case 't': cbench_tsv = true; break;
    case 'q': cbench_quiet = true; break;
    case 'R': cbench_room_only = true; break;
    case 'z': cbench_compression = optarg; break;
    case 'h': cbench_usage (stdout); return 0;
    default: cbench_usage (stderr); return 2;
    }
  }
  if (optind != argc) {
    cbench_usage (stderr);
    return 2;
  }
  if (cbench_volblocksize < ZVOL_MIN_VOLBLOCKSIZE
      || cbench_volblocksize > ZVOL_MAX_VOLBLOCKSIZE
      || (cbench_volblocksize & (cbench_volblocksize - 1)))
    cbench_die ("-b: a power of two from %u to %u", ZVOL_MIN_VOLBLOCKSIZE,
                ZVOL_MAX_VOLBLOCKSIZE);
  if (cbench_volsize < 16 * MiB || cbench_volsize % (128 * KiB))
    cbench_die ("-s: at least 16M, a multiple of 128K");
  if (cbench_ops == 0 || cbench_txgs == 0 || cbench_commits == 0)
    cbench_die ("-n, -k, -l: at least 1");
  if (cbench_ops > cbench_volsize / cbench_volblocksize)
    cbench_die ("-n %" PRIu64 ": more than the volume's %" PRIu64 " blocks",
                cbench_ops, cbench_volsize / cbench_volblocksize);

  zvol_set_log_level (ZVOL_LOG_ERROR);
  cbench_perf_open ();
  cbench_run ();
  return 0;
}
