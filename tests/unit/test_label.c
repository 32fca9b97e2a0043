/*
 * test_label.c: unit tests for core/label.c (pool configuration and the
 * uberblock ring in the two labels of every device).
 *
 * Theory.  Labels are the one place where the pool trusts what it reads
 * before any parent checksum vouches for it, so the tests attack them the
 * way a disk would: a flipped byte in one copy, in every copy, a block
 * that lands in the wrong slot, a device of another pool, a device full of
 * zeros or of noise, and finally a fuzz loop of random damage.  The fuzz
 * loop keeps a shadow image of every label block it touches, so after
 * each round it knows exactly which copies are still intact and checks the
 * exact answer (count, order, copies), not just the absence of a crash.
 *
 * Devices are sparse files in testlib.h's scratch directory under
 * /var/tmp, opened with zv_dev_open (O_DIRECT there).  Damage goes
 * through a separate buffered descriptor (pwrite) or through
 * tl_dev_write on the pool's own; the kernel keeps the two coherent.
 * Everything is removed at the end.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "zv_util.h"
#include "format.h"
#include "dev.h"
#include "label.h"
#include "testlib.h"

#define UT_NDEVS 2u
#define UT_LASTTXG 70u

/* Two sizes: the back labels of the two devices sit at different offsets,
 * and the second is not a multiple of ZV_SECTOR. */
static const uint64_t ut_sizes[UT_NDEVS] = { 32 * MiB, 40 * MiB + 5000 };

/* ---- helpers -------------------------------------------------------- */

/* A valid configuration of device 'idx' of the test pool. */
static void
ut_config (zv_config_phys_t *cf, unsigned idx)
{
  memset (cf, 0, sizeof *cf);
  cf->cf_magic = ZV_LABEL_MAGIC;
  cf->cf_version = ZV_CONFIG_VERSION;
  cf->cf_ndevs = UT_NDEVS;
  cf->cf_pool_guid = TL_GUID;
  cf->cf_volblocksize = 16384;
  cf->cf_volsize = 8 * MiB;
  cf->cf_create_time = 1700000000;
  snprintf (cf->cf_name, sizeof cf->cf_name, "tank");
  for (unsigned d = 0; d < UT_NDEVS; d++) {
    cf->cf_dev_guids[d] = 0xd000 + d;
    cf->cf_dev_sizes[d] = ZV_P2ALIGN (ut_sizes[d], ZV_SECTOR);
  }
  cf->cf_dev_index = idx;
  cf->cf_dev_guid = cf->cf_dev_guids[idx];
  cf->cf_dev_size = cf->cf_dev_sizes[idx];
}

/* The uberblock the test pool writes for 'txg' (content derived from it). */
static void
ut_ub (zv_uberblock_phys_t *ub, uint64_t guid, uint64_t txg)
{
  memset (ub, 0, sizeof *ub);
  ub->ub_magic = ZV_UB_MAGIC;
  ub->ub_version = ZV_FORMAT_VERSION;
  ub->ub_txg = txg;
  ub->ub_timestamp = 1700000000000000000ull + txg * 1000;
  ub->ub_pool_guid = guid;
  ub->ub_rootbp.bp_dva[0] = ZV_LABEL_SIZE + txg * 4096;
  ub->ub_rootbp.bp_psize = 4096;
  ub->ub_rootbp.bp_lsize = 4096;
  ub->ub_rootbp.bp_birth = txg;
  ub->ub_rootbp.bp_type = ZV_BT_OBJSET;
  ub->ub_rootbp.bp_ncopies = 1;
  ub->ub_rootbp.bp_cksum.zc_word[0] = txg * 77;
  ub->ub_rootbp.bp_cksum.zc_word[1] = ~txg;
}

/* Byte offset of uberblock slot s of label l of a device of 'size'. */
static uint64_t
ut_slot_off (uint64_t size, unsigned l, unsigned s)
{
  return zv_label_offset (ZV_P2ALIGN (size, ZV_SECTOR), l)
    + ZV_UB_RING_OFFSET + (uint64_t) s * ZV_UB_SIZE;
}

/* The test pool: two devices, labels initialised. */
typedef struct ut_pool {
  char up_path[UT_NDEVS][512];
  zv_dev_t *up_dev[UT_NDEVS];
} ut_pool_t;

static void
ut_pool_init_labels (ut_pool_t *p)
{
  for (unsigned d = 0; d < UT_NDEVS; d++) {
    zv_config_phys_t cf;
    ut_config (&cf, d);
    assert_int_equal (zv_label_init (p->up_dev[d], &cf), 0);
  }
}

static void
ut_pool_open (ut_pool_t *p, const char *tag)
{
  for (unsigned d = 0; d < UT_NDEVS; d++) {
    char name[64];
    snprintf (name, sizeof name, "%s-%u", tag, d);
    tl_path (p->up_path[d], sizeof p->up_path[d], name);
    assert_int_equal (tl_sparse_file (p->up_path[d], ut_sizes[d]), 0);
    p->up_dev[d] = tl_dev_open (p->up_path[d]);
  }
  ut_pool_init_labels (p);
}

static void
ut_pool_close (ut_pool_t *p)
{
  for (unsigned d = 0; d < UT_NDEVS; d++) {
    zv_dev_close (p->up_dev[d]);
    unlink (p->up_path[d]);
  }
}

/* Write txgs first..last into both labels of every device. */
static void
ut_write_txgs (ut_pool_t *p, uint64_t guid, uint64_t first, uint64_t last)
{
  for (uint64_t t = first; t <= last; t++) {
    zv_uberblock_phys_t ub;
    for (unsigned l = 0; l < ZV_NLABELS; l++) {
      ut_ub (&ub, guid, t);
      assert_int_equal (zv_label_write_ub (p->up_dev, UT_NDEVS, &ub, l), 0);
    }
  }
}

/* Collect with a generous array; returns the count. */
static int
ut_collect (ut_pool_t *p, uint64_t guid, zv_ub_cand_t **out)
{
  zv_ub_cand_t *c = calloc (1024, sizeof *c);
  int n;

  assert_non_null (c);
  n = zv_label_collect_ubs (p->up_dev, UT_NDEVS, guid, c, 1024);
  *out = c;
  return n;
}

/* The candidate is exactly what ut_ub() made for its txg. */
static void
ut_check_cand (const zv_ub_cand_t *c, uint64_t guid)
{
  zv_uberblock_phys_t want;

  ut_ub (&want, guid, c->uc_ub.ub_txg);
  assert_int_equal (c->uc_ub.ub_magic, ZV_UB_MAGIC);
  assert_int_equal (c->uc_ub.ub_version, ZV_FORMAT_VERSION);
  assert_true (c->uc_ub.ub_pool_guid == guid);
  assert_true (c->uc_ub.ub_timestamp == want.ub_timestamp);
  assert_memory_equal (&c->uc_ub.ub_rootbp, &want.ub_rootbp,
                       sizeof want.ub_rootbp);
}

/* ---- configuration ---------------------------------------------------- */

/* Init then read: the same configuration, from both copies. */
static void
test_config_roundtrip (void **state)
{
  ut_pool_t p;
  zv_config_phys_t want, got;
  unsigned nvalid = 99;
  char err[256] = "";
  (void) state;

  ut_pool_open (&p, "rt");
  for (unsigned d = 0; d < UT_NDEVS; d++) {
    ut_config (&want, d);
    memset (&got, 0xee, sizeof got);
    assert_int_equal (zv_label_read_config (p.up_dev[d], &got, &nvalid,
                                            err, sizeof err), 0);
    assert_int_equal (nvalid, 2);
    /* Everything but the checksum (which the seal filled in). */
    assert_memory_equal (&got, &want, offsetof (zv_config_phys_t, cf_cksum));
    assert_true (zv_label_verify_config (&got, 0));
    /* nvalid is optional. */
    assert_int_equal (zv_label_read_config (p.up_dev[d], &got, NULL,
                                            err, sizeof err), 0);
  }

  /* On disk: the config at the front and at size - 256K (size rounded
   * down to a sector), each sealed for its own offset. */
  for (unsigned d = 0; d < UT_NDEVS; d++) {
    uint64_t back = ZV_P2ALIGN (ut_sizes[d], ZV_SECTOR) - ZV_LABEL_SIZE;
    zv_config_phys_t c0, c1;
    assert_int_equal (tl_file_pread (p.up_path[d], &c0, sizeof c0, 0), 0);
    assert_int_equal (tl_file_pread (p.up_path[d], &c1, sizeof c1, back), 0);
    assert_true (c0.cf_magic == ZV_LABEL_MAGIC);
    assert_true (c1.cf_magic == ZV_LABEL_MAGIC);
    assert_true (zv_label_verify_config (&c0, 0));
    assert_true (zv_label_verify_config (&c1, back));
    /* Sealed per place: swapping the copies does not verify. */
    assert_false (zv_label_verify_config (&c0, back));
    assert_false (zv_label_verify_config (&c1, 0));
  }

  /* A fresh label has an empty ring. */
  zv_ub_cand_t *c;
  assert_int_equal (ut_collect (&p, TL_GUID, &c), 0);
  free (c);
  ut_pool_close (&p);
}

/* One damaged copy: the other one serves (either one). */
static void
test_config_one_corrupt (void **state)
{
  ut_pool_t p;
  zv_config_phys_t want, got;
  unsigned nvalid;
  char err[256];
  (void) state;

  ut_pool_open (&p, "one");
  ut_config (&want, 0);

  /* Front copy: a byte in the middle of the name. */
  tl_log_reset (false);
  assert_int_equal (tl_file_flip (p.up_path[0],
                                  offsetof (zv_config_phys_t, cf_name) + 2),
                    0);
  assert_int_equal (zv_label_read_config (p.up_dev[0], &got, &nvalid,
                                          err, sizeof err), 0);
  assert_int_equal (nvalid, 1);
  assert_memory_equal (&got, &want, offsetof (zv_config_phys_t, cf_cksum));
  assert_true (tl_log_has ("label 0 does not verify"));

  /* Back copy instead (front repaired by a fresh init). */
  ut_pool_init_labels (&p);
  uint64_t back = ZV_P2ALIGN (ut_sizes[1], ZV_SECTOR) - ZV_LABEL_SIZE;
  ut_config (&want, 1);
  assert_int_equal (tl_file_flip (p.up_path[1], back
                                  + offsetof (zv_config_phys_t, cf_cksum)),
                    0);
  assert_int_equal (zv_label_read_config (p.up_dev[1], &got, &nvalid,
                                          err, sizeof err), 0);
  assert_int_equal (nvalid, 1);
  assert_memory_equal (&got, &want, offsetof (zv_config_phys_t, cf_cksum));

  /* Front copy with a destroyed magic (no longer a label at all). */
  ut_pool_init_labels (&p);
  assert_int_equal (tl_file_flip (p.up_path[0], 0), 0);
  assert_int_equal (zv_label_read_config (p.up_dev[0], &got, &nvalid,
                                          err, sizeof err), 0);
  assert_int_equal (nvalid, 1);
  ut_pool_close (&p);
}

/* Both copies damaged: -EIO and a message naming the device. */
static void
test_config_both_corrupt (void **state)
{
  ut_pool_t p;
  zv_config_phys_t got;
  unsigned nvalid = 99;
  char err[256] = "";
  (void) state;

  ut_pool_open (&p, "both");
  uint64_t back = ZV_P2ALIGN (ut_sizes[0], ZV_SECTOR) - ZV_LABEL_SIZE;
  assert_int_equal (tl_file_flip (p.up_path[0], 40), 0);
  assert_int_equal (tl_file_flip (p.up_path[0], back + 40), 0);
  assert_int_equal (zv_label_read_config (p.up_dev[0], &got, &nvalid,
                                          err, sizeof err), -EIO);
  assert_int_equal (nvalid, 0);
  assert_non_null (strstr (err, "damaged"));
  assert_non_null (strstr (err, p.up_path[0]));

  /* Magic gone in one copy, checksum bad in the other: still -EIO (a
   * pool device that is damaged, not a foreign one). */
  ut_pool_init_labels (&p);
  assert_int_equal (tl_file_flip (p.up_path[0], 0), 0);
  assert_int_equal (tl_file_flip (p.up_path[0], back + 100), 0);
  err[0] = '\0';
  assert_int_equal (zv_label_read_config (p.up_dev[0], &got, &nvalid,
                                          err, sizeof err), -EIO);
  assert_true (strlen (err) > 0);
  ut_pool_close (&p);
}

/* Read errors on every copy: -EIO, "unreadable". */
static int
ut_fail_reads (void *arg, zv_dev_t *dev, enum zv_dev_op op, uint64_t off,
               uint32_t len)
{
  (void) arg;
  (void) dev;
  (void) off;
  (void) len;
  return op == ZV_DEV_READ ? -EIO : 0;
}

static void
test_config_unreadable (void **state)
{
  ut_pool_t p;
  zv_config_phys_t got;
  unsigned nvalid;
  char err[256] = "";
  (void) state;

  ut_pool_open (&p, "unread");
  tl_log_reset (true);                /* the failed reads */
  zv_dev_set_fault (p.up_dev[0], ut_fail_reads, NULL);
  assert_int_equal (zv_label_read_config (p.up_dev[0], &got, &nvalid,
                                          err, sizeof err), -EIO);
  assert_int_equal (nvalid, 0);
  assert_non_null (strstr (err, "unreadable"));

  /* Uberblocks: one device unreadable, the other still answers. */
  ut_write_txgs (&p, TL_GUID, 1, 3);
  zv_ub_cand_t *c;
  int n = ut_collect (&p, TL_GUID, &c);
  assert_int_equal (n, 3);
  assert_int_equal (c[0].uc_ub.ub_txg, 3);
  assert_int_equal (c[0].uc_copies, 2);
  free (c);
  /* Every device unreadable: a negative errno, not "no uberblocks". */
  zv_dev_set_fault (p.up_dev[1], ut_fail_reads, NULL);
  n = ut_collect (&p, TL_GUID, &c);
  assert_true (n < 0);
  free (c);
  zv_dev_set_fault (p.up_dev[0], NULL, NULL);
  zv_dev_set_fault (p.up_dev[1], NULL, NULL);
  ut_pool_close (&p);
}

/* All zeros: not a pool device (-ENOENT), not damage. */
static void
test_config_zeros (void **state)
{
  char path[512];
  zv_dev_t *dev;
  zv_config_phys_t got;
  unsigned nvalid = 99;
  char err[256] = "";
  (void) state;

  tl_path (path, sizeof path, "zeros");
  assert_int_equal (tl_sparse_file (path, 32 * MiB), 0);
  dev = tl_dev_open (path);
  assert_int_equal (zv_label_read_config (dev, &got, &nvalid, err,
                                          sizeof err), -ENOENT);
  assert_int_equal (nvalid, 0);
  assert_non_null (strstr (err, "not a pool device"));
  zv_dev_close (dev);
  unlink (path);

  /* Too small to hold a pool: -ENOENT with a reason, no reads past end. */
  tl_path (path, sizeof path, "small");
  assert_int_equal (tl_sparse_file (path, ZV_MIN_DEV_SIZE - ZV_SECTOR), 0);
  dev = tl_dev_open (path);
  err[0] = '\0';
  assert_int_equal (zv_label_read_config (dev, &got, &nvalid, err,
                                          sizeof err), -ENOENT);
  assert_true (strlen (err) > 0);
  zv_dev_close (dev);
  unlink (path);
}

/* Random bytes: -ENOENT or -EIO, never a crash, no uberblocks. */
static void
test_config_random (void **state)
{
  uint64_t seed = 0x9e3779b97f4a7c15ull;
  uint64_t size = ZV_MIN_DEV_SIZE + 3 * ZV_SECTOR;
  char path[512];
  unsigned char *buf = malloc (1 * MiB);
  (void) state;

  tl_path (path, sizeof path, "random");
  assert_int_equal (tl_sparse_file (path, size), 0);
  assert_non_null (buf);
  for (uint64_t off = 0; off < size; off += 1 * MiB) {
    size_t len = ZV_MIN (1 * MiB, size - off);
    tl_fill_rand (buf, len, &seed);
    assert_int_equal (tl_file_pwrite (path, buf, len, off), 0);
  }
  free (buf);

  zv_dev_t *dev = tl_dev_open (path);
  zv_config_phys_t got;
  unsigned nvalid = 99;
  char err[256] = "";
  int r = zv_label_read_config (dev, &got, &nvalid, err, sizeof err);
  assert_true (r == -ENOENT || r == -EIO);
  assert_int_equal (nvalid, 0);
  assert_true (strlen (err) > 0);

  /* With the label magic in front (noise after it): damaged, -EIO. */
  uint64_t magic = ZV_LABEL_MAGIC;
  assert_int_equal (tl_file_pwrite (path, &magic, sizeof magic, 0), 0);
  r = zv_label_read_config (dev, &got, &nvalid, err, sizeof err);
  assert_int_equal (r, -EIO);

  zv_ub_cand_t c[8];
  assert_int_equal (zv_label_collect_ubs (&dev, 1, TL_GUID, c, 8), 0);
  zv_dev_close (dev);
  unlink (path);
}

/* The bounds check rejects each field out of range, with a message. */
static void
test_config_check (void **state)
{
  zv_config_phys_t good, cf;
  char err[256];
  (void) state;

  ut_config (&good, 1);
  assert_int_equal (zv_label_config_check (&good, err, sizeof err), 0);

#define UT_REJECT(mutation) do {                                        \
    cf = good;                                                          \
    mutation;                                                           \
    err[0] = '\0';                                                      \
    if (zv_label_config_check (&cf, err, sizeof err) != -EINVAL)        \
      fail_msg ("accepted: %s", #mutation);                             \
    assert_true (strlen (err) > 0);                                     \
  } while (0)
#define UT_ACCEPT(mutation) do {                                        \
    cf = good;                                                          \
    mutation;                                                           \
    if (zv_label_config_check (&cf, err, sizeof err) != 0)              \
      fail_msg ("rejected: %s (%s)", #mutation, err);                   \
  } while (0)

  /* ndevs */
  UT_REJECT (cf.cf_ndevs = 0);
  UT_REJECT (cf.cf_ndevs = ZV_MAX_DEVS + 1);
  UT_REJECT (cf.cf_ndevs = UINT32_MAX);
  UT_REJECT (cf.cf_ndevs = 1u << 31);
  /* dev_index (1 of 2 is valid; a huge one must not index the table) */
  UT_REJECT (cf.cf_dev_index = 2);
  UT_REJECT (cf.cf_dev_index = ZV_MAX_DEVS);
  UT_REJECT (cf.cf_dev_index = UINT32_MAX);
  UT_REJECT ((cf.cf_ndevs = 1, cf.cf_dev_index = 1));
  /* the device's own guid must match its table entry */
  UT_REJECT (cf.cf_dev_guid ^= 1);
  /* volblocksize: power of two, 4 KiB .. 128 KiB */
  UT_REJECT (cf.cf_volblocksize = 0);
  UT_REJECT (cf.cf_volblocksize = 2048);
  UT_REJECT (cf.cf_volblocksize = 3 * 4096);
  UT_REJECT (cf.cf_volblocksize = 256 * 1024);
  UT_REJECT (cf.cf_volblocksize = UINT32_MAX);
  UT_REJECT (cf.cf_volblocksize = 1u << 31);
  UT_ACCEPT (cf.cf_volblocksize = 4096);
  UT_ACCEPT (cf.cf_volblocksize = 128 * 1024);
  /* volsize: that of the volume made with the pool, 0 for none (each
   * volume's own is in its dataset record) */
  UT_ACCEPT (cf.cf_volsize = 0);
  UT_REJECT (cf.cf_volsize = 8 * MiB + 1);
  UT_REJECT (cf.cf_volsize = UINT64_MAX - 511);
  /* device sizes of every member */
  UT_REJECT (cf.cf_dev_sizes[0] = ZV_MIN_DEV_SIZE - ZV_SECTOR);
  UT_REJECT (cf.cf_dev_sizes[1] = 32 * MiB + 512);
  UT_REJECT (cf.cf_dev_sizes[1] = UINT64_MAX - 4095);
  /* name: must be terminated inside the field */
  UT_REJECT (memset (cf.cf_name, 'a', sizeof cf.cf_name));
  UT_ACCEPT ((memset (cf.cf_name, 'a', sizeof cf.cf_name - 1),
              cf.cf_name[sizeof cf.cf_name - 1] = '\0'));
  /* ... and be 1 or more bytes of printable ASCII: it goes into
   * messages */
  UT_REJECT (memset (cf.cf_name, 0, sizeof cf.cf_name));
  UT_REJECT (memcpy (cf.cf_name, "ta\nnk", 6));
  UT_REJECT (memcpy (cf.cf_name, "t\x1b[2Jk", 7));
  UT_REJECT (memcpy (cf.cf_name, "t\xc3\xa9", 4));
  UT_ACCEPT (memcpy (cf.cf_name, "my pool ~1", 11));
  /* a full pool */
  UT_ACCEPT ((cf.cf_ndevs = ZV_MAX_DEVS,
              ({ for (unsigned i = 0; i < ZV_MAX_DEVS; i++)
                   cf.cf_dev_sizes[i] = 32 * MiB; }),
              cf.cf_dev_index = ZV_MAX_DEVS - 1, cf.cf_dev_size = 32 * MiB,
              cf.cf_dev_guids[ZV_MAX_DEVS - 1] = cf.cf_dev_guid));
  /* this device's size: its table entry, nothing else */
  UT_REJECT (cf.cf_dev_size = 0);
  UT_REJECT (cf.cf_dev_size = 1ull << 50);
  UT_REJECT (cf.cf_dev_size -= ZV_SECTOR);
  UT_REJECT (cf.cf_dev_size = cf.cf_dev_sizes[0]);
  UT_REJECT ((cf.cf_dev_size = 1ull << 50, cf.cf_dev_sizes[1] = 1ull << 57));
  /* the log device's size, when there is one */
  UT_REJECT ((cf.cf_log_guid = 0x10, cf.cf_log_size = 0));
  UT_REJECT ((cf.cf_log_guid = 0x10, cf.cf_log_size = 32 * MiB + 512));
  UT_ACCEPT ((cf.cf_log_guid = 0x10, cf.cf_log_size = 32 * MiB));
#undef UT_REJECT
#undef UT_ACCEPT
}

/*
 * A configuration that verifies but is out of bounds (a buggy writer, or
 * a crafted device) is refused by read_config: the check runs on what is
 * read, and a huge dev_index does not index the guid table.
 */
static void
test_config_sealed_hostile (void **state)
{
  char path[512];
  zv_dev_t *dev;
  uint64_t seed = 77;
  unsigned accepted = 0;
  (void) state;

  tl_path (path, sizeof path, "hostile");
  assert_int_equal (tl_sparse_file (path, 32 * MiB), 0);
  dev = tl_dev_open (path);
  for (int i = 0; i < 300; i++) {
    zv_config_phys_t cf, got;
    char err[256] = "", err2[256];
    unsigned nvalid;

    /* Mostly a valid config with one or two random fields. */
    ut_config (&cf, 0);
    cf.cf_ndevs = 1;
    cf.cf_dev_sizes[1] = 0;
    uint64_t pick = tl_rand (&seed);
    if (pick & 1)
      cf.cf_dev_index = (uint32_t) tl_rand (&seed) % (pick & 2 ? 40 : ~0u);
    if (pick & 4)
      cf.cf_ndevs = (uint32_t) tl_rand (&seed) % (pick & 8 ? 20 : ~0u);
    if (pick & 16)
      cf.cf_volblocksize = 1u << (tl_rand (&seed) % 32);
    if (pick & 32)
      tl_fill_rand (cf.cf_name, sizeof cf.cf_name, &seed);
    if (pick & 64)
      tl_fill_rand (cf.cf_dev_sizes, sizeof cf.cf_dev_sizes, &seed);
    if ((pick & 127) == 0)
      tl_fill_rand (&cf.cf_ndevs, offsetof (zv_config_phys_t, cf_cksum)
                    - offsetof (zv_config_phys_t, cf_ndevs), &seed);
    cf.cf_version = ZV_CONFIG_VERSION;
    zv_label_seal_config (&cf, 0);
    assert_int_equal (tl_file_pwrite (path, &cf, sizeof cf, 0), 0);

    int want = zv_label_config_check (&cf, err2, sizeof err2);
    int r = zv_label_read_config (dev, &got, &nvalid, err, sizeof err);
    assert_int_equal (nvalid, 1);
    assert_int_equal (r, want);
    if (r == 0) {
      accepted++;
      assert_memory_equal (&got, &cf, sizeof cf);
    }
    else
      assert_true (strlen (err) > 0);
  }
  /* Both outcomes were exercised. */
  assert_true (accepted > 0);
  assert_true (accepted < 300);
  zv_dev_close (dev);
  unlink (path);
}

/* ---- uberblocks -------------------------------------------------------- */

/* Txgs 1..70 wrap the ring: the newest ZV_UB_COUNT, newest first, 4 copies. */
static void
test_ub_ring (void **state)
{
  ut_pool_t p;
  zv_ub_cand_t *c;
  const unsigned expect = ZV_MIN (UT_LASTTXG, ZV_UB_COUNT);
  (void) state;

  assert_int_equal (ZV_UB_COUNT, 60);
  ut_pool_open (&p, "ring");
  ut_write_txgs (&p, TL_GUID, 1, UT_LASTTXG);

  int n = ut_collect (&p, TL_GUID, &c);
  assert_int_equal (n, expect);
  for (unsigned i = 0; i < expect; i++) {
    assert_int_equal (c[i].uc_ub.ub_txg, UT_LASTTXG - i);
    assert_int_equal (c[i].uc_copies, 2 * UT_NDEVS);
    ut_check_cand (&c[i], TL_GUID);
  }
  free (c);

  /* Each copy sits at its slot, sealed for its own offset. */
  for (unsigned d = 0; d < UT_NDEVS; d++) {
    for (unsigned l = 0; l < ZV_NLABELS; l++) {
      zv_uberblock_phys_t ub;
      uint64_t off = ut_slot_off (ut_sizes[d], l, UT_LASTTXG % ZV_UB_COUNT);
      assert_int_equal (tl_file_pread (p.up_path[d], &ub, sizeof ub, off), 0);
      assert_int_equal (ub.ub_txg, UT_LASTTXG);
      assert_true (zv_label_verify_ub (&ub, off));
      assert_false (zv_label_verify_ub (&ub, off + ZV_UB_SIZE));
    }
  }

  /* A small array keeps the newest, with their full copy counts. */
  zv_ub_cand_t small[5];
  n = zv_label_collect_ubs (p.up_dev, UT_NDEVS, TL_GUID, small, 5);
  assert_int_equal (n, 5);
  for (unsigned i = 0; i < 5; i++) {
    assert_int_equal (small[i].uc_ub.ub_txg, UT_LASTTXG - i);
    assert_int_equal (small[i].uc_copies, 2 * UT_NDEVS);
  }
  /* One device only: 2 copies each. */
  n = zv_label_collect_ubs (&p.up_dev[1], 1, TL_GUID, small, 5);
  assert_int_equal (n, 5);
  assert_int_equal (small[0].uc_ub.ub_txg, UT_LASTTXG);
  assert_int_equal (small[0].uc_copies, 2);
  ut_pool_close (&p);
}

/*
 * max 0: "at most max" means nothing is returned and the array is neither
 * read nor written (a caller may pass an empty array).  The array below is
 * zeroed, so an uberblock stored into element 0 shows.
 */
static void
test_ub_collect_max0 (void **state)
{
  ut_pool_t p;
  zv_ub_cand_t guard[2];
  (void) state;

  ut_pool_open (&p, "max0");
  ut_write_txgs (&p, TL_GUID, 1, 3);
  memset (guard, 0, sizeof guard);
  int n = zv_label_collect_ubs (p.up_dev, UT_NDEVS, TL_GUID, guard, 0);
  bool untouched = true;
  for (size_t i = 0; i < sizeof guard; i++)
    untouched &= ((const unsigned char *) guard)[i] == 0;
  ut_pool_close (&p);
  assert_int_equal (n, 0);
  if (!untouched)
    fail_msg ("collect with max 0 wrote an uberblock into cands[0]");
}

/* A damaged copy of the newest: found with fewer copies; all: 69 wins. */
static void
test_ub_corrupt_newest (void **state)
{
  ut_pool_t p;
  zv_ub_cand_t *c;
  const unsigned slot = UT_LASTTXG % ZV_UB_COUNT;
  (void) state;

  ut_pool_open (&p, "newest");
  ut_write_txgs (&p, TL_GUID, 1, UT_LASTTXG);

  assert_int_equal (tl_file_flip (p.up_path[0],
                                  ut_slot_off (ut_sizes[0], 0, slot)
                                  + offsetof (zv_uberblock_phys_t, ub_rootbp)
                                  + 3), 0);
  int n = ut_collect (&p, TL_GUID, &c);
  assert_int_equal (n, ZV_UB_COUNT);
  assert_int_equal (c[0].uc_ub.ub_txg, UT_LASTTXG);
  assert_int_equal (c[0].uc_copies, 3);
  ut_check_cand (&c[0], TL_GUID);
  assert_int_equal (c[1].uc_ub.ub_txg, UT_LASTTXG - 1);
  assert_int_equal (c[1].uc_copies, 4);
  free (c);

  /* Every copy: the newest is now 69, and 70 is nowhere. */
  assert_int_equal (tl_file_flip (p.up_path[0],
                                  ut_slot_off (ut_sizes[0], 1, slot) + 8), 0);
  assert_int_equal (tl_file_flip (p.up_path[1],
                                  ut_slot_off (ut_sizes[1], 0, slot)
                                  + offsetof (zv_uberblock_phys_t, ub_cksum)),
                    0);
  assert_int_equal (tl_file_flip (p.up_path[1],
                                  ut_slot_off (ut_sizes[1], 1, slot)
                                  + offsetof (zv_uberblock_phys_t,
                                              ub_pool_guid)), 0);
  n = ut_collect (&p, TL_GUID, &c);
  assert_int_equal (n, ZV_UB_COUNT - 1);
  assert_int_equal (c[0].uc_ub.ub_txg, UT_LASTTXG - 1);
  assert_int_equal (c[0].uc_copies, 4);
  for (int i = 0; i < n; i++)
    assert_true (c[i].uc_ub.ub_txg != UT_LASTTXG);
  free (c);
  ut_pool_close (&p);
}

/* A block copied into another slot or label does not verify there. */
static void
test_ub_misplaced (void **state)
{
  ut_pool_t p;
  zv_ub_cand_t *c;
  unsigned char blk[ZV_UB_SIZE];
  const unsigned slot70 = UT_LASTTXG % ZV_UB_COUNT;
  const unsigned slot30 = 30 % ZV_UB_COUNT;
  (void) state;

  ut_pool_open (&p, "misplaced");
  ut_write_txgs (&p, TL_GUID, 1, UT_LASTTXG);

  /* Txg 70 of dev 0 label 0 over txg 30's slot: neither counts there. */
  assert_int_equal (tl_file_pread (p.up_path[0], blk, sizeof blk,
                                   ut_slot_off (ut_sizes[0], 0, slot70)), 0);
  assert_int_equal (tl_file_pwrite (p.up_path[0], blk, sizeof blk,
                                    ut_slot_off (ut_sizes[0], 0, slot30)), 0);
  /* ... and into the back label, same slot (another offset). */
  assert_int_equal (tl_file_pread (p.up_path[1], blk, sizeof blk,
                                   ut_slot_off (ut_sizes[1], 0, slot30 + 1)),
                    0);
  assert_int_equal (tl_file_pwrite (p.up_path[1], blk, sizeof blk,
                                    ut_slot_off (ut_sizes[1], 1, slot30 + 1)),
                    0);

  int n = ut_collect (&p, TL_GUID, &c);
  assert_int_equal (n, ZV_UB_COUNT);
  assert_int_equal (c[0].uc_ub.ub_txg, UT_LASTTXG);
  assert_int_equal (c[0].uc_copies, 4);           /* not 5 */
  for (int i = 0; i < n; i++) {
    if (c[i].uc_ub.ub_txg == 30)
      assert_int_equal (c[i].uc_copies, 3);       /* overwritten once */
    else if (c[i].uc_ub.ub_txg == 31)
      assert_int_equal (c[i].uc_copies, 3);       /* back copy replaced */
    else
      assert_int_equal (c[i].uc_copies, 4);
  }
  free (c);

  /* Directly: the offset is part of the seal. */
  zv_uberblock_phys_t ub;
  ut_ub (&ub, TL_GUID, 5);
  zv_label_seal_ub (&ub, ut_slot_off (ut_sizes[0], 0, 5));
  assert_true (zv_label_verify_ub (&ub, ut_slot_off (ut_sizes[0], 0, 5)));
  assert_false (zv_label_verify_ub (&ub, ut_slot_off (ut_sizes[0], 0, 6)));
  assert_false (zv_label_verify_ub (&ub, ut_slot_off (ut_sizes[0], 1, 5)));
  /* A sealed uberblock written into the wrong slot, sealed for that slot
   * (a writer bug): its txg does not belong there, so it is refused. */
  ut_ub (&ub, TL_GUID, 200);     /* slot 200 % 60 = 20 */
  uint64_t off = ut_slot_off (ut_sizes[0], 0, 21);
  zv_label_seal_ub (&ub, off);
  assert_int_equal (tl_file_pwrite (p.up_path[0], &ub, sizeof ub, off), 0);
  n = ut_collect (&p, TL_GUID, &c);
  assert_int_equal (c[0].uc_ub.ub_txg, UT_LASTTXG);
  for (int i = 0; i < n; i++)
    assert_true (c[i].uc_ub.ub_txg != 200);
  free (c);
  /* Txg 0 is never a committed txg. */
  ut_ub (&ub, TL_GUID, 0);
  off = ut_slot_off (ut_sizes[0], 0, 0);
  zv_label_seal_ub (&ub, off);
  assert_int_equal (tl_file_pwrite (p.up_path[0], &ub, sizeof ub, off), 0);
  n = ut_collect (&p, TL_GUID, &c);
  for (int i = 0; i < n; i++)
    assert_true (c[i].uc_ub.ub_txg != 0);
  free (c);
  ut_pool_close (&p);
}

/* Uberblocks of another pool (a reused device) are not ours. */
static void
test_ub_foreign_pool (void **state)
{
  ut_pool_t p;
  zv_ub_cand_t *c;
  const uint64_t other = TL_GUID ^ 0xffff;
  (void) state;

  ut_pool_open (&p, "foreign");
  ut_write_txgs (&p, TL_GUID, 1, UT_LASTTXG);
  /* Newer txgs of another pool over slots 11..15 (txgs 11..15 of ours). */
  ut_write_txgs (&p, other, 71, 75);

  int n = ut_collect (&p, TL_GUID, &c);
  assert_int_equal (n, ZV_UB_COUNT - 5);
  assert_int_equal (c[0].uc_ub.ub_txg, UT_LASTTXG);
  for (int i = 0; i < n; i++) {
    assert_true (c[i].uc_ub.ub_pool_guid == TL_GUID);
    assert_true (c[i].uc_ub.ub_txg <= UT_LASTTXG);
    assert_true (c[i].uc_ub.ub_txg > 15);
  }
  free (c);
  n = ut_collect (&p, other, &c);
  assert_int_equal (n, 5);
  assert_int_equal (c[0].uc_ub.ub_txg, 75);
  assert_true (c[0].uc_ub.ub_pool_guid == other);
  free (c);
  n = ut_collect (&p, 0, &c);
  assert_int_equal (n, 0);
  free (c);
  ut_pool_close (&p);
}

/* Same txg written twice (a retried sync): newer timestamp first. */
static void
test_ub_same_txg (void **state)
{
  ut_pool_t p;
  zv_ub_cand_t *c;
  zv_uberblock_phys_t ub;
  (void) state;

  ut_pool_open (&p, "same");
  ut_write_txgs (&p, TL_GUID, 1, 9);
  ut_ub (&ub, TL_GUID, 10);
  assert_int_equal (zv_label_write_ub (p.up_dev, UT_NDEVS, &ub, 1), 0);
  ut_ub (&ub, TL_GUID, 10);
  ub.ub_timestamp += 5;
  ub.ub_rootbp.bp_dva[0] += 4096;
  assert_int_equal (zv_label_write_ub (p.up_dev, UT_NDEVS, &ub, 0), 0);

  int n = ut_collect (&p, TL_GUID, &c);
  assert_int_equal (n, 11);
  assert_int_equal (c[0].uc_ub.ub_txg, 10);
  assert_int_equal (c[1].uc_ub.ub_txg, 10);
  assert_true (c[0].uc_ub.ub_timestamp == ub.ub_timestamp);
  assert_true (c[1].uc_ub.ub_timestamp == ub.ub_timestamp - 5);
  assert_int_equal (c[0].uc_copies, 2);
  assert_int_equal (c[1].uc_copies, 2);
  assert_int_equal (c[2].uc_ub.ub_txg, 9);
  free (c);
  ut_pool_close (&p);
}

/* ---- empty uberblocks ------------------------------------------------- */

/* Labels of the test pool with the rings prefilled (ZV_CF_F_UB_EMPTY). */
static void
ut_pool_init_empty (ut_pool_t *p)
{
  for (unsigned d = 0; d < UT_NDEVS; d++) {
    zv_config_phys_t cf;
    ut_config (&cf, d);
    cf.cf_flags = ZV_CF_F_UB_EMPTY;
    assert_int_equal (zv_label_init (p->up_dev[d], &cf), 0);
  }
}

/* The ring state of the test pool for guid. */
static void
ut_ring_state (ut_pool_t *p, uint64_t guid, zv_ub_slot_t *slots)
{
  assert_int_equal (zv_label_ring_state (p->up_dev, UT_NDEVS, guid, slots),
                    2 * UT_NDEVS);
}

/* Seal ub into label l, slot s of device d (whatever its txg says). */
static void
ut_put_ub (ut_pool_t *p, unsigned d, unsigned l, unsigned s,
           zv_uberblock_phys_t *ub)
{
  uint64_t off = ut_slot_off (ut_sizes[d], l, s);

  zv_label_seal_ub (ub, off);
  assert_int_equal (tl_file_pwrite (p->up_path[d], ub, sizeof *ub, off), 0);
}

/*
 * With the flag, create fills every slot of every label with an empty
 * uberblock: each verifies at its own offset only, is never a candidate,
 * and counts as a valid copy of its slot; without it the ring is zeros
 * (pools of before the flag), no copy valid.  A sealed empty uberblock
 * that carries a txg or a root pointer, another pool's, or one with
 * flags this version does not know, is no valid copy.
 */
static void
test_ub_empty_ring (void **state)
{
  ut_pool_t p;
  zv_ub_slot_t slots[ZV_UB_COUNT];
  zv_ub_cand_t *c;
  zv_config_phys_t cf;
  unsigned nvalid;
  char err[256];
  (void) state;

  ut_pool_open (&p, "empty");
  ut_ring_state (&p, TL_GUID, slots);
  for (unsigned s = 0; s < ZV_UB_COUNT; s++) {
    assert_int_equal (slots[s].us_copies, 2 * UT_NDEVS);
    assert_int_equal (slots[s].us_valid, 0);
  }

  ut_pool_init_empty (&p);
  assert_int_equal (zv_label_read_config (p.up_dev[1], &cf, &nvalid, err,
                                          sizeof err), 0);
  assert_int_equal (nvalid, 2);
  assert_true (cf.cf_flags == ZV_CF_F_UB_EMPTY);
  assert_int_equal (ut_collect (&p, TL_GUID, &c), 0);
  free (c);
  ut_ring_state (&p, TL_GUID, slots);
  for (unsigned s = 0; s < ZV_UB_COUNT; s++) {
    assert_int_equal (slots[s].us_valid, 2 * UT_NDEVS);
    assert_int_equal (slots[s].us_empty, 2 * UT_NDEVS);
    assert_true (slots[s].us_newest == 0);
  }
  for (unsigned d = 0; d < UT_NDEVS; d++)
    for (unsigned l = 0; l < ZV_NLABELS; l++) {
      zv_uberblock_phys_t ub;
      uint64_t off = ut_slot_off (ut_sizes[d], l, 17);
      assert_int_equal (tl_file_pread (p.up_path[d], &ub, sizeof ub, off), 0);
      assert_true (zv_label_verify_ub (&ub, off));
      assert_false (zv_label_verify_ub (&ub, off + ZV_UB_SIZE));
      assert_int_equal (ub.ub_flags, ZV_UB_F_EMPTY);
      assert_true (ub.ub_txg == 0 && ub.ub_pool_guid == TL_GUID);
    }
  /* Another pool's rings are nothing of ours. */
  ut_ring_state (&p, TL_GUID ^ 1, slots);
  for (unsigned s = 0; s < ZV_UB_COUNT; s++)
    assert_int_equal (slots[s].us_valid, 0);

  /* Txgs take their slots; one damaged copy, then all four. */
  ut_write_txgs (&p, TL_GUID, 1, 3);
  assert_int_equal (tl_file_flip (p.up_path[0],
                                  ut_slot_off (ut_sizes[0], 0, 3) + 40), 0);
  ut_ring_state (&p, TL_GUID, slots);
  assert_true (slots[2].us_newest == 2);
  assert_int_equal (slots[2].us_empty, 0);
  assert_int_equal (slots[3].us_valid, 2 * UT_NDEVS - 1);
  assert_int_equal (slots[4].us_empty, 2 * UT_NDEVS);
  for (unsigned d = 0; d < UT_NDEVS; d++)
    for (unsigned l = 0; l < ZV_NLABELS; l++) {
      uint8_t zero[ZV_UB_SIZE] = { 0 };
      assert_int_equal (tl_file_pwrite (p.up_path[d], zero, sizeof zero,
                                        ut_slot_off (ut_sizes[d], l, 3)), 0);
    }
  ut_ring_state (&p, TL_GUID, slots);
  assert_int_equal (slots[3].us_valid, 0);
  assert_int_equal (slots[3].us_copies, 2 * UT_NDEVS);

  /* Hostile copies that verify, in slot 9 (one copy each). */
  zv_uberblock_phys_t ub;
  memset (&ub, 0, sizeof ub);
  ub.ub_magic = ZV_UB_MAGIC;
  ub.ub_version = ZV_FORMAT_VERSION;
  ub.ub_pool_guid = TL_GUID;
  ub.ub_flags = ZV_UB_F_EMPTY;
  ub.ub_txg = 9;                          /* empty, yet a txg */
  ut_put_ub (&p, 0, 0, 9, &ub);
  ub.ub_txg = 0;
  ub.ub_rootbp.bp_dva[0] = ZV_LABEL_SIZE; /* empty, yet a tree */
  ut_put_ub (&p, 0, 1, 9, &ub);
  ut_ub (&ub, TL_GUID, 9);
  ub.ub_flags = 2;                        /* a flag nobody defined */
  ut_put_ub (&p, 1, 0, 9, &ub);
  ut_ub (&ub, TL_GUID, 9);
  ub.ub_flags = ZV_UB_F_EMPTY;            /* a txg marked empty */
  ut_put_ub (&p, 1, 1, 9, &ub);
  ut_ring_state (&p, TL_GUID, slots);
  assert_int_equal (slots[9].us_valid, 0);
  assert_int_equal (ut_collect (&p, TL_GUID, &c), 2);
  assert_int_equal (c[0].uc_ub.ub_txg, 2);
  free (c);

  /* A flag of the configuration this version does not know. */
  ut_config (&cf, 0);
  cf.cf_flags = ZV_CF_F_UB_EMPTY | 0x100;
  assert_int_equal (zv_label_config_check (&cf, err, sizeof err), -EINVAL);
  assert_non_null (strstr (err, "unknown flags 0x100"));
  ut_pool_close (&p);
}

static ut_pool_t *ut_abort_pool;

static void
ut_discard_own_slot (void *arg)
{
  const zv_uberblock_phys_t *keep = arg;
  bool discard[ZV_UB_COUNT] = { false };

  discard[keep->ub_txg % ZV_UB_COUNT] = true;
  (void) zv_label_discard (ut_abort_pool->up_dev, UT_NDEVS, TL_GUID, keep,
                           discard, 0);
}

/*
 * zv_label_discard empties, label by label, the slots it is given (a run
 * a rewind accepted as damaged) and every copy of an uberblock newer
 * than the one kept (a later txg, or the same txg written later), and
 * nothing else: the kept uberblock and the older ones stay, and it
 * refuses (abort) to empty the kept txg's own slot.
 */
static void
test_ub_discard (void **state)
{
  ut_pool_t p;
  zv_ub_slot_t slots[ZV_UB_COUNT];
  bool discard[ZV_UB_COUNT] = { false };
  zv_uberblock_phys_t keep_ub, later;
  zv_ub_cand_t *c;
  uint64_t keep = 7;
  int n;
  (void) state;

  ut_pool_open (&p, "discard");
  ut_pool_init_empty (&p);
  ut_write_txgs (&p, TL_GUID, 1, 10);
  ut_ub (&keep_ub, TL_GUID, keep);
  /* Txg 7 again, later, in device 1's front label. */
  ut_ub (&later, TL_GUID, keep);
  later.ub_timestamp += 5;
  ut_put_ub (&p, 1, 0, keep % ZV_UB_COUNT, &later);
  /* Slot 12 (never written: empty) damaged in every copy. */
  for (unsigned d = 0; d < UT_NDEVS; d++)
    for (unsigned l = 0; l < ZV_NLABELS; l++)
      assert_int_equal (tl_file_flip (p.up_path[d],
                                      ut_slot_off (ut_sizes[d], l, 12) + 8),
                        0);
  discard[12] = true;
  n = zv_label_discard (p.up_dev, UT_NDEVS, TL_GUID, &keep_ub, discard, 0);
  /* slots 8, 9, 10 and 12 of each device, and the later txg 7 */
  assert_int_equal (n, UT_NDEVS * 4 + 1);
  ut_ring_state (&p, TL_GUID, slots);
  assert_true (slots[10].us_newest == 10);  /* label 1 untouched */
  assert_int_equal (slots[10].us_empty, UT_NDEVS);
  assert_int_equal (slots[12].us_valid, UT_NDEVS);
  assert_int_equal (slots[keep].us_valid, 2 * UT_NDEVS);
  assert_int_equal (slots[keep].us_empty, 1);
  n = zv_label_discard (p.up_dev, UT_NDEVS, TL_GUID, &keep_ub, discard, 1);
  assert_int_equal (n, UT_NDEVS * 4);
  ut_ring_state (&p, TL_GUID, slots);
  for (unsigned s = 8; s <= 12; s++)
    if (s != 11)
      assert_int_equal (slots[s].us_empty, 2 * UT_NDEVS);
  assert_int_equal (slots[11].us_empty, 2 * UT_NDEVS);  /* never written */
  n = ut_collect (&p, TL_GUID, &c);
  assert_int_equal (n, 7);
  assert_int_equal (c[0].uc_ub.ub_txg, keep);
  assert_int_equal (c[0].uc_copies, 2 * UT_NDEVS - 1);
  ut_check_cand (&c[0], TL_GUID);
  free (c);
  /* Again: nothing left to do. */
  memset (discard, 0, sizeof discard);
  assert_int_equal (zv_label_discard (p.up_dev, UT_NDEVS, TL_GUID, &keep_ub,
                                      discard, 0), 0);
  ut_abort_pool = &p;
  tl_dies_with_abort (ut_discard_own_slot, &keep_ub);
  ut_pool_close (&p);
}

/* ---- fuzz -------------------------------------------------------------- */

/*
 * Every label block the fuzz loop may touch: the two configs and the
 * ZV_UB_COUNT ring slots of both labels of both devices.  The shadow is
 * the block's current content; 'legit' is what the pool wrote there.
 */
#define UT_FZ_SLOTS (1 + ZV_UB_COUNT)     /* config + ring, per label */
#define UT_FZ_BLOCKS (UT_NDEVS * ZV_NLABELS * UT_FZ_SLOTS)

typedef struct ut_fz_blk {
  unsigned char fb_shadow[ZV_UB_SIZE];
  unsigned char fb_legit[ZV_UB_SIZE];
  uint64_t fb_off;
  unsigned fb_dev, fb_label, fb_slot;      /* slot 0: config */
} ut_fz_blk_t;

/* Rebuild a legit pool image and record it in the shadow. */
static void
ut_fz_reset (ut_pool_t *p, ut_fz_blk_t *blks)
{
  ut_pool_init_labels (p);
  ut_write_txgs (p, TL_GUID, 1, UT_LASTTXG);
  for (unsigned i = 0; i < UT_FZ_BLOCKS; i++) {
    ut_fz_blk_t *b = &blks[i];
    assert_int_equal (tl_file_pread (p->up_path[b->fb_dev], b->fb_legit,
                                     ZV_UB_SIZE, b->fb_off), 0);
    memcpy (b->fb_shadow, b->fb_legit, ZV_UB_SIZE);
  }
}

/* Is the checksummed part of the block what the pool wrote? */
static bool
ut_fz_intact (const ut_fz_blk_t *b)
{
  size_t len = b->fb_slot == 0 ? sizeof (zv_config_phys_t)
    : sizeof (zv_uberblock_phys_t);
  return memcmp (b->fb_shadow, b->fb_legit, len) == 0;
}

/* Damage one block: noise, a few bytes, or a hostile header. */
static void
ut_fz_damage (ut_pool_t *p, ut_fz_blk_t *b, uint64_t *seed)
{
  unsigned char *s = b->fb_shadow;
  uint64_t how = tl_rand (seed) % 8;

  switch (how) {
  case 0:                       /* a whole block of noise */
    tl_fill_rand (s, ZV_UB_SIZE, seed);
    break;
  case 1: case 2: {             /* a few random bytes in the header */
    unsigned k = 1 + tl_rand (seed) % 4;
    for (unsigned i = 0; i < k; i++)
      s[tl_rand (seed) % 256] = (unsigned char) tl_rand (seed);
    break;
  }
  case 3: {                     /* a random run anywhere in the block */
    unsigned at = tl_rand (seed) % ZV_UB_SIZE;
    unsigned len = 1 + tl_rand (seed) % (ZV_UB_SIZE - at);
    tl_fill_rand (s + at, len, seed);
    break;
  }
  case 4: {                     /* noise behind a right magic + version */
    tl_fill_rand (s, ZV_UB_SIZE, seed);
    uint64_t m = b->fb_slot == 0 ? ZV_LABEL_MAGIC : ZV_UB_MAGIC;
    uint32_t v = ZV_FORMAT_VERSION;
    memcpy (s, &m, 8);
    memcpy (s + 8, &v, 4);
    break;
  }
  case 5:                       /* zeroed (trimmed, never written) */
    memset (s, 0, ZV_UB_SIZE);
    break;
  case 6:                       /* restore the legit content */
    memcpy (s, b->fb_legit, ZV_UB_SIZE);
    break;
  case 7: {
    /* A sealed uberblock the pool must still refuse: another pool, a
     * txg that does not belong in this slot, or txg 0.  Over a config
     * block: a foreign block type, which must not verify as a config. */
    zv_uberblock_phys_t ub;
    uint64_t t = tl_rand (seed) % 3;
    ut_ub (&ub, TL_GUID, 1 + tl_rand (seed) % 1000);
    if (t == 0)
      ub.ub_pool_guid = tl_rand (seed) | 1;
    else if (t == 1) {
      if (b->fb_slot > 0 && ub.ub_txg % ZV_UB_COUNT == b->fb_slot - 1)
        ub.ub_txg++;
    }
    else
      ub.ub_txg = 0;
    if (ub.ub_pool_guid == TL_GUID && b->fb_slot > 0
        && ub.ub_txg % ZV_UB_COUNT == b->fb_slot - 1 && ub.ub_txg != 0)
      ub.ub_txg++;
    zv_label_seal_ub (&ub, b->fb_off);
    memset (s, 0, ZV_UB_SIZE);
    memcpy (s, &ub, sizeof ub);
    break;
  }
  }
  /* Through the device (direct I/O wants an aligned buffer). */
  void *io = zv_buf_alloc (ZV_UB_SIZE);
  memcpy (io, s, ZV_UB_SIZE);
  assert_int_equal (tl_dev_write (p->up_dev[b->fb_dev], io, b->fb_off,
                                  ZV_UB_SIZE), 0);
  zv_buf_free (io);
}

/*
 * Check collect, and read_config when a config block changed (else its
 * answer is the one already checked), against the shadow: exact answers.
 */
static void
ut_fz_check (ut_pool_t *p, ut_fz_blk_t *blks, zv_ub_cand_t *c, bool configs)
{
  unsigned copies[UT_LASTTXG + 1] = { 0 };
  unsigned ntxg = 0;

  for (unsigned i = 0; i < UT_FZ_BLOCKS; i++) {
    const ut_fz_blk_t *b = &blks[i];
    if (b->fb_slot == 0 || !ut_fz_intact (b))
      continue;
    const zv_uberblock_phys_t *ub = (const void *) b->fb_legit;
    if (copies[ub->ub_txg]++ == 0)
      ntxg++;
  }
  int n = zv_label_collect_ubs (p->up_dev, UT_NDEVS, TL_GUID, c, 128);
  assert_int_equal (n, ntxg);
  for (int i = 0; i < n; i++) {
    uint64_t t = c[i].uc_ub.ub_txg;
    assert_true (t >= 1 && t <= UT_LASTTXG);
    if (i > 0)
      assert_true (t < c[i - 1].uc_ub.ub_txg);
    ut_check_cand (&c[i], TL_GUID);
    assert_int_equal (c[i].uc_copies, copies[t]);
  }

  for (unsigned d = 0; configs && d < UT_NDEVS; d++) {
    unsigned intact = 0;
    bool magic = false;
    for (unsigned i = 0; i < UT_FZ_BLOCKS; i++) {
      const ut_fz_blk_t *b = &blks[i];
      uint64_t m;
      /* An uberblock that verifies marks a pool too (damaged labels). */
      if (b->fb_dev == d && b->fb_slot != 0
          && zv_label_verify_ub ((const void *) b->fb_shadow, b->fb_off))
        magic = true;
      if (b->fb_dev != d || b->fb_slot != 0)
        continue;
      intact += ut_fz_intact (b);
      memcpy (&m, b->fb_shadow, 8);
      magic |= m == ZV_LABEL_MAGIC;
    }
    zv_config_phys_t got, want;
    unsigned nvalid = 99;
    char err[256] = "";
    int r = zv_label_read_config (p->up_dev[d], &got, &nvalid, err,
                                  sizeof err);
    assert_int_equal (nvalid, intact);
    if (intact > 0) {
      assert_int_equal (r, 0);
      ut_config (&want, d);
      assert_memory_equal (&got, &want, offsetof (zv_config_phys_t,
                                                  cf_cksum));
    }
    else {
      assert_int_equal (r, magic ? -EIO : -ENOENT);
      assert_true (strlen (err) > 0);
    }
  }
}

static void
test_fuzz (void **state)
{
  ut_pool_t p;
  ut_fz_blk_t *blks = calloc (UT_FZ_BLOCKS, sizeof *blks);
  zv_ub_cand_t *c = calloc (128, sizeof *c);
  uint64_t seed = 0xfeedface12345ull;
  const char *env = getenv ("ZV_TEST_SEED");
  (void) state;

  int iters = 2000;

  if (env)
    seed = strtoull (env, NULL, 0) | 1;
  if ((env = getenv ("ZV_TEST_FUZZ_ITERS")) != NULL)
    iters = atoi (env);
  assert_non_null (blks);
  assert_non_null (c);
  ut_pool_open (&p, "fuzz");
  for (unsigned d = 0, i = 0; d < UT_NDEVS; d++)
    for (unsigned l = 0; l < ZV_NLABELS; l++)
      for (unsigned s = 0; s < UT_FZ_SLOTS; s++, i++) {
        blks[i].fb_dev = d;
        blks[i].fb_label = l;
        blks[i].fb_slot = s;
        blks[i].fb_off = s == 0
          ? zv_label_offset (ZV_P2ALIGN (ut_sizes[d], ZV_SECTOR), l)
          : ut_slot_off (ut_sizes[d], l, s - 1);
      }
  ut_fz_reset (&p, blks);
  ut_fz_check (&p, blks, c, true);

  for (int it = 0; it < iters; it++) {
    /* Every so often start from a healthy pool again, so that damage
     * to a few copies (not only to nearly all) stays the common case. */
    bool configs = false;
    if (it % 250 == 249) {
      ut_fz_reset (&p, blks);
      configs = true;
    }
    unsigned k = 1 + tl_rand (&seed) % 3;
    for (unsigned j = 0; j < k; j++) {
      ut_fz_blk_t *b;
      /* A config block one time in six, else a ring slot. */
      if (tl_rand (&seed) % 6 == 0) {
        unsigned d = tl_rand (&seed) % UT_NDEVS, l = tl_rand (&seed) % 2;
        b = &blks[(d * ZV_NLABELS + l) * UT_FZ_SLOTS];
      }
      else
        b = &blks[tl_rand (&seed) % UT_FZ_BLOCKS];
      ut_fz_damage (&p, b, &seed);
      configs |= b->fb_slot == 0;
    }
    ut_fz_check (&p, blks, c, configs);
  }
  ut_pool_close (&p);
  free (blks);
  free (c);
}

/* ---- setup ------------------------------------------------------------- */

int
main (void)
{
  const struct CMUnitTest tests[] = {
    tl_test (test_config_roundtrip),
    tl_test (test_config_one_corrupt),
    tl_test (test_config_both_corrupt),
    tl_test (test_config_unreadable),
    tl_test (test_config_zeros),
    tl_test (test_config_random),
    tl_test (test_config_check),
    tl_test (test_config_sealed_hostile),
    tl_test (test_ub_ring),
    tl_test (test_ub_collect_max0),
    tl_test (test_ub_corrupt_newest),
    tl_test (test_ub_misplaced),
    tl_test (test_ub_foreign_pool),
    tl_test (test_ub_same_txg),
    tl_test (test_ub_empty_ring),
    tl_test (test_ub_discard),
    tl_test (test_fuzz),
  };

  return tl_main (tests, "label", NULL);
}
