/*
 * ziltest.h: helpers shared by the intent-log tests (test_zil.c and
 * test_zil_crash.c): a pool configuration for one device, the pool's
 * statistics, a sparse copy of a device file, reading back a whole
 * volume and comparing it with a shadow image, 4K blocks of one stamp,
 * and FUA writes mirrored in a shadow.
 *
 * Header-only (static functions), like testlib.h; include it after
 * <cmocka.h> (the helpers assert) and testlib.h.
 */
#ifndef ZV_ZILTEST_H
#define ZV_ZILTEST_H

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pool.h"
#include "testlib.h"

/* Every helper is optional for a given test file. */
#define ZT_FN static __attribute__ ((unused))

#define MiB (1ull << 20)
#define KiB 1024u
#define BLK 4096u

/* ---- pool configuration and statistics ---- */

/* A configuration for one device (and maybe a log device). */
ZT_FN void
cfg (zvol_pool_config_t *pc, const char *dev, const char *logdev,
     bool create, uint64_t volsize)
{
  zvol_pool_config_init (pc);
  zvol_config_init (&tl_volcfg);  /* the volume's properties, likewise */
  pc->pc_devices[0] = dev;
  pc->pc_ndevices = 1;
  pc->pc_logdevice = logdev;
  pc->pc_create = create;
  pc->pc_volsize = volsize;
  pc->pc_cache_size = 16 * MiB;
  pc->pc_zil_size = create && logdev == NULL ? 1 * MiB : 0;
}

/* A txg engine that never syncs by itself: only the log holds FUA data
 * until someone asks for a sync. */
ZT_FN void
cfg_no_txg (zvol_pool_config_t *pc)
{
  pc->pc_txg.tt_timeout_ms = 3600 * 1000;
  pc->pc_txg.tt_dirty_max = 1ull << 30;
}

/* One value of the stats table; fails the test if it is missing. */
ZT_FN double
zstat (zvol_pool_t *p, const char *name)
{
  char *buf = tl_pool_stats (p), *line;
  size_t nl = strlen (name);
  double v = -1;
  bool found = false;

  assert_non_null (buf);
  for (line = buf; line != NULL && *line; ) {
    char *end = strchr (line, '\n');
    if (strncmp (line, name, nl) == 0 && line[nl] == ' ') {
      v = strtod (line + nl + 1, NULL);
      found = true;
      break;
    }
    line = end ? end + 1 : NULL;
  }
  free (buf);
  if (!found)
    fail_msg ("stat %s is missing", name);
  return v;
}

ZT_FN uint64_t
zstatu (zvol_pool_t *p, const char *name)
{
  return (uint64_t) zstat (p, name);
}

/* ---- files and volume images ---- */

/* Copy a file, keeping it sparse (all-zero MiBs are not written). */
ZT_FN void
copy_file (const char *src, const char *dst)
{
  int in = open (src, O_RDONLY | O_CLOEXEC);
  int out = open (dst, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  char *buf = malloc (MiB);
  off_t off = 0;
  ssize_t n;

  assert_true (in >= 0 && out >= 0 && buf != NULL);
  assert_int_equal (ftruncate (out, lseek (in, 0, SEEK_END)), 0);
  while ((n = pread (in, buf, MiB, off)) > 0) {
    if (!zv_is_zero (buf, (size_t) n))
      assert_int_equal (pwrite (out, buf, (size_t) n, off), n);
    off += n;
  }
  assert_int_equal (n, 0);
  assert_int_equal (fsync (out), 0);
  close (in);
  close (out);
  free (buf);
}

/* A reader of every READERS-th 256 KiB piece of the volume. */
#define READERS 4
#define READ_PIECE (256 * KiB)

typedef struct reader {
  zvol_t *rd_zv;
  uint8_t *rd_buf;
  unsigned rd_idx;
  int rd_err;
  uint64_t rd_err_off;
} reader_t;

ZT_FN void *
reader_thread (void *arg)
{
  reader_t *rd = arg;
  uint64_t size = zvol_size (rd->rd_zv);

  for (uint64_t off = rd->rd_idx * (uint64_t) READ_PIECE; off < size;
       off += READERS * (uint64_t) READ_PIECE) {
    int r = zvol_read (rd->rd_zv, rd->rd_buf + off, off,
                       (uint32_t) ZV_MIN (READ_PIECE, size - off));
    if (r != 0) {
      rd->rd_err = r;
      rd->rd_err_off = off;
      break;
    }
  }
  return NULL;
}

/* Read the whole volume (several readers at once: a cold import reads
 * block by block); NULL (and why on stderr) if a read fails. */
ZT_FN uint8_t *
read_volume_try (zvol_t *zv)
{
  uint8_t *buf = malloc (zvol_size (zv));
  reader_t rd[READERS];
  pthread_t th[READERS];
  bool ok = true;

  assert_non_null (buf);
  for (unsigned i = 0; i < READERS; i++) {
    rd[i] = (reader_t) { .rd_zv = zv, .rd_buf = buf, .rd_idx = i };
    assert_int_equal (pthread_create (&th[i], NULL, reader_thread, &rd[i]),
                      0);
  }
  for (unsigned i = 0; i < READERS; i++) {
    assert_int_equal (pthread_join (th[i], NULL), 0);
    if (rd[i].rd_err) {
      fprintf (stderr, "  reading the volume at %" PRIu64 " failed: %s\n",
               rd[i].rd_err_off, strerror (-rd[i].rd_err));
      ok = false;
    }
  }
  if (!ok) {
    free (buf);
    return NULL;
  }
  return buf;
}

ZT_FN uint8_t *
read_volume (zvol_t *zv)
{
  uint8_t *buf = read_volume_try (zv);

  if (buf == NULL)
    fail_msg ("the volume does not read back");
  return buf;
}

/* Compare two volume images; say where they first differ. */
ZT_FN void
compare_images (const uint8_t *got, const uint8_t *want, uint64_t size,
                const char *what)
{
  if (memcmp (got, want, size) != 0) {
    uint64_t i = 0;
    while (got[i] == want[i])
      i++;
    fail_msg ("%s: volume byte %" PRIu64 " (4K block %" PRIu64 ") is 0x%02x, "
              "expected 0x%02x", what, i, i / BLK, got[i], want[i]);
  }
}

/* ---- data ---- */

/* Fill a 4K block with one 8-byte stamp. */
ZT_FN void
stamp_fill (uint8_t *buf, uint64_t stamp)
{
  uint64_t *w = (uint64_t *) buf;

  for (unsigned i = 0; i < BLK / 8; i++)
    w[i] = stamp;
}

/* A FUA write of pattern data, mirrored in the shadow. */
ZT_FN void
rec_write (zvol_t *zv, uint8_t *shadow, uint64_t off, uint32_t len,
           uint64_t seed)
{
  tl_pat_fill (shadow + off, off, len, seed);
  assert_int_equal (zvol_write (zv, shadow + off, off, len, ZVOL_FUA), 0);
}

/* Make the log usable: it writes blocks only once a txg carrying its
 * fresh chain is on disk. */
ZT_FN void
rec_warm (zvol_pool_t *p, uint8_t *shadow, uint64_t off)
{
  rec_write (tl_vol (p), shadow, off, BLK, 424242);
  assert_int_equal (zv_pool_sync (p), 0);
}

#endif /* ZV_ZILTEST_H */
