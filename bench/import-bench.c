/*
 * import-bench: how long an import takes, against how much the volume
 * holds (issue 11, "Growth").  A front end of the engine like the plugin:
 * only zvol.h.
 *
 *   import-bench fill DEV SIZE [RANDOM_SECONDS]
 *       Create a pool on DEV (a new sparse file) whose volume of SIZE
 *       bytes is written whole, in 1 MiB writes of data that is not zeros
 *       (zeros would be holes), then, for RANDOM_SECONDS, 4 KiB writes at
 *       random offsets; export.  Prints the time, the bytes the syncs
 *       wrote (volume data, metadata: per GiB of data) for each phase,
 *       and the peak resident memory (VmHWM).
 *
 *   import-bench time DEV [ROUNDS [full]]
 *       Import DEV read-write and open its volume, ROUNDS times (3): the
 *       milliseconds to an open volume, then to the first 4 KiB read at a
 *       random offset (which reads the indirect blocks above it), then
 *       export.  'full' imports with pc_verify_full (the walk of the whole
 *       tree), where the engine has it (-DHAVE_VERIFY_FULL; the written
       bytes need -DHAVE_WRITTEN_STATS).  One line per
 *       round: "import_ms first_read_ms vmhwm_kib".
 *
 * bench/import-bench.sh builds it against two trees and runs both sides
 * interleaved on one filled pool.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include "zvol.h"

#define KiB 1024ull
#define MiB (1024 * KiB)
#define GiB (1024 * MiB)

static double
ib_now (void)
{
  struct timespec ts;

  clock_gettime (CLOCK_MONOTONIC, &ts);
  return (double) ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Peak resident memory of this process, KiB (0: unknown). */
static uint64_t
ib_vmhwm (void)
{
  FILE *fp = fopen ("/proc/self/status", "r");
  char line[256];
  uint64_t v = 0;

  if (fp == NULL)
    return 0;
  while (fgets (line, sizeof line, fp))
    if (sscanf (line, "VmHWM: %" SCNu64, &v) == 1)
      break;
  fclose (fp);
  return v;
}

static uint64_t
ib_parse_size (const char *s)
{
  char *end;
  uint64_t v = strtoull (s, &end, 10);

  switch (*end) {
  case 'k': case 'K': v *= KiB; break;
  case 'm': case 'M': v *= MiB; break;
  case 'g': case 'G': v *= GiB; break;
  default: break;
  }
  return v;
}

static void
ib_log (zvol_log_level_t level, const char *msg)
{
  if (level >= ZVOL_LOG_WARN)
    fprintf (stderr, "import-bench: %s\n", msg);
}

static uint64_t ib_rng = 0x9e3779b97f4a7c15ull;

static uint64_t
ib_rand (void)
{
  ib_rng ^= ib_rng << 13;
  ib_rng ^= ib_rng >> 7;
  ib_rng ^= ib_rng << 17;
  return ib_rng;
}

static int
ib_open (const char *dev, bool create, uint64_t volsize, bool full,
         zvol_pool_t **pp, zvol_t **zvp)
{
  zvol_pool_config_t pc;
  zvol_config_t vc;
  int r;

  zvol_pool_config_init (&pc);
  pc.pc_devices[0] = dev;
  pc.pc_ndevices = 1;
  pc.pc_create = create;
  pc.pc_volsize = volsize;
#ifdef HAVE_VERIFY_FULL
  pc.pc_verify_full = full;
#else
  if (full) {
    fprintf (stderr, "import-bench: this engine has no verify=full\n");
    return -ENOTSUP;
  }
#endif
  r = zvol_pool_open (&pc, pp);
  if (r < 0)
    return r;
  r = zvol_pool_start (*pp);
  if (r == 0) {
    zvol_config_init (&vc);
    r = zvol_open (*pp, NULL, &vc, zvp);
  }
  if (r < 0)
    (void) zvol_pool_close (*pp);
  return r;
}

static void
ib_written (zvol_pool_t *p, const char *phase, uint64_t *data,
            uint64_t *meta)
{
#ifndef HAVE_WRITTEN_STATS
  (void) p; (void) phase; (void) data; (void) meta;
#else
  zvol_pool_stats_t ps;

  zvol_pool_get_stats (p, &ps);
  uint64_t d = ps.ps_written_data - *data, m = ps.ps_written_meta - *meta;
  printf ("%s: data written %.2f GiB, metadata %.1f MiB, %.3f%% "
          "(%.1f MiB per GiB of data)\n", phase, d / (double) GiB,
          m / (double) MiB, d ? 100.0 * m / d : 0.0,
          d ? m / (double) MiB / (d / (double) GiB) : 0.0);
  *data = ps.ps_written_data;
  *meta = ps.ps_written_meta;
  printf ("%s: VmHWM %.0f MiB; cache limit %.0f MiB + dirty_max %.0f MiB "
          "= %.0f MiB\n", phase, ib_vmhwm () / 1024.0,
          ps.ps_cache_limit / (double) MiB, ps.ps_dirty_max / (double) MiB,
          (ps.ps_cache_limit + ps.ps_dirty_max) / (double) MiB);
#endif
}

static int
ib_fill (const char *dev, uint64_t volsize, double rand_s)
{
  /* The volume, its metadata (well under 1%), the 64 MiB log ring, the
   * slop the allocator keeps (1/32) and room to spare. */
  uint64_t devsize = volsize + volsize / 16 + 512 * MiB;
  uint8_t *buf = aligned_alloc (4096, MiB);
  uint64_t data = 0, meta = 0;
  zvol_pool_t *p;
  zvol_t *zv;
  double t0;
  int fd, r;

  fd = open (dev, O_CREAT | O_EXCL | O_WRONLY, 0600);
  if (fd < 0 || ftruncate (fd, (off_t) devsize) < 0) {
    perror (dev);
    return 1;
  }
  close (fd);
  r = ib_open (dev, true, volsize, false, &p, &zv);
  if (r < 0) {
    fprintf (stderr, "create: %s\n", strerror (-r));
    return 1;
  }
  for (size_t i = 0; i < MiB / 8; i++)
    ((uint64_t *) buf)[i] = ib_rand () | 1;
  t0 = ib_now ();
  for (uint64_t off = 0; off < volsize && r == 0; off += MiB) {
    ((uint64_t *) buf)[0] = off;
    r = zvol_write (zv, buf, off, (uint32_t) (volsize - off < MiB
                                              ? volsize - off : MiB), 0);
  }
  /* Closing the volume waits for its txg: everything is synced. */
  if (r == 0)
    r = zvol_close (zv);
  if (r < 0) {
    fprintf (stderr, "fill: %s\n", strerror (-r));
    return 1;
  }
  printf ("fill: %.2f GiB in %.1f s\n", volsize / (double) GiB,
          ib_now () - t0);
  ib_written (p, "fill (1 MiB sequential)", &data, &meta);
  if (rand_s > 0) {
    zvol_config_t vc;
    uint64_t n = 0;

    zvol_config_init (&vc);
    r = zvol_open (p, NULL, &vc, &zv);

    t0 = ib_now ();
    while (r == 0 && ib_now () - t0 < rand_s) {
      for (unsigned k = 0; k < 256 && r == 0; k++, n++)
        r = zvol_write (zv, buf + (n % 256) * 4096,
                        (ib_rand () % (volsize / 4096)) * 4096, 4096, 0);
    }
    if (zvol_close (zv) < 0)
      r = -EIO;
    printf ("random 4 KiB writes: %" PRIu64 " in %.1f s\n", n,
            ib_now () - t0);
    ib_written (p, "random 4 KiB", &data, &meta);
  }
  printf ("vmhwm_kib %" PRIu64 "\n", ib_vmhwm ());
  if (zvol_pool_close (p) < 0 || r < 0)
    return 1;
  free (buf);
  return 0;
}

static int
ib_time (const char *dev, unsigned rounds, bool full)
{
  for (unsigned i = 0; i < rounds; i++) {
    zvol_pool_t *p;
    zvol_t *zv;
    uint8_t *buf = aligned_alloc (4096, 4096);
    double t0 = ib_now (), t1, t2;
    int r = ib_open (dev, false, 0, full, &p, &zv);

    if (r < 0) {
      fprintf (stderr, "import: %s\n", strerror (-r));
      return 1;
    }
    t1 = ib_now ();
    uint64_t size = zvol_size (zv);
    r = zvol_read (zv, buf, (ib_rand () % (size / 4096)) * 4096, 4096);
    t2 = ib_now ();
    if (r < 0)
      fprintf (stderr, "read: %s\n", strerror (-r));
    printf ("%.1f %.1f %" PRIu64 "\n", (t1 - t0) * 1e3, (t2 - t1) * 1e3,
            ib_vmhwm ());
    fflush (stdout);
    (void) zvol_close (zv);
    if (zvol_pool_close (p) < 0 || r < 0)
      return 1;
    free (buf);
  }
  return 0;
}

int
main (int argc, char **argv)
{
  zvol_set_log (ib_log);
  if (argc >= 4 && strcmp (argv[1], "fill") == 0)
    return ib_fill (argv[2], ib_parse_size (argv[3]),
                    argc > 4 ? atof (argv[4]) : 0);
  if (argc >= 3 && strcmp (argv[1], "time") == 0)
    return ib_time (argv[2], argc > 3 ? (unsigned) atoi (argv[3]) : 3,
                    argc > 4 && strcmp (argv[4], "full") == 0);
  fprintf (stderr, "usage: import-bench fill DEV SIZE [RANDOM_SECONDS]\n"
           "       import-bench time DEV [ROUNDS [full]]\n");
  return 2;
}
