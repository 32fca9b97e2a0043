/*
 * ziltest.h: helpers shared by the intent-log tests (test_zil.c and
 * test_zil_crash.c), on top of testlib.h's: their pool configuration
 * (one device, maybe a log device), a sparse copy of a device file,
 * reading back a whole volume and comparing it with a shadow image,
 * 4K blocks of one stamp, and making the log usable (rec_warm).
 *
 * Header-only (static functions), like testlib.h, which it includes.
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

#include "testlib.h"
#include "pool.h"

#define BLK 4096u

/* ---- pool configuration ---- */

/* testlib's configuration for one device, with a log device (or NULL),
 * a 16 MiB cache and, for a pool created without a log device, a 1 MiB
 * log ring; the volume's properties back to their defaults. */
TL_FN void
cfg (zvol_pool_config_t *pc, const char *dev, const char *logdev,
     bool create, uint64_t volsize)
{
  tl_pool_cfg (pc, &dev, 1, volsize, create);
  zvol_config_init (&tl_volcfg);
  pc->pc_logdevice = logdev;
  pc->pc_cache_size = 16 * MiB;
  pc->pc_zil_size = create && logdev == NULL ? 1 * MiB : 0;
}

/* A txg engine that never syncs by itself: only the log holds FUA data
 * until someone asks for a sync. */
TL_FN void
cfg_no_txg (zvol_pool_config_t *pc)
{
  pc->pc_txg.tt_timeout_ms = 3600 * 1000;
  pc->pc_txg.tt_dirty_max = 1ull << 30;
}

/* ---- files and volume images ---- */

/* Copy a file, keeping it sparse (all-zero MiBs are not written). */
TL_FN void
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

TL_FN void *
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
TL_FN uint8_t *
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

TL_FN uint8_t *
read_volume (zvol_t *zv)
{
  uint8_t *buf = read_volume_try (zv);

  if (buf == NULL)
    fail_msg ("the volume does not read back");
  return buf;
}

/* Compare two volume images; say where they first differ (the byte
 * and its 4K block). */
TL_FN void
compare_images (const uint8_t *got, const uint8_t *want, uint64_t size,
                const char *what)
{
  tl_assert_same_blk (got, want, size, 0, what, BLK);
}

/* ---- data ---- */

/* Fill a 4K block with one 8-byte stamp. */
TL_FN void
stamp_fill (uint8_t *buf, uint64_t stamp)
{
  uint64_t *w = (uint64_t *) buf;

  for (unsigned i = 0; i < BLK / 8; i++)
    w[i] = stamp;
}

/* Make the log usable: it writes blocks only once a txg carrying its
 * fresh chain is on disk. */
TL_FN void
rec_warm (zvol_pool_t *p, uint8_t *shadow, uint64_t off)
{
  tl_vol_write (tl_vol (p), shadow, off, BLK, 424242, ZVOL_FUA);
  assert_int_equal (zv_pool_sync (p), 0);
}

#endif /* ZV_ZILTEST_H */
