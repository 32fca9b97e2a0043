/*
 * fuzz_label: the pool configuration in a device's labels, as import
 * reads it (zv_label_read_config: both copies, the checksum and magic,
 * zv_label_config_check's field checks, the size against the device,
 * and the damaged-label hint from the uberblock ring), and the same
 * checks on the buffer alone.
 *
 * The input is a configuration (fuzz_inputs.h), sealed by the harness at
 * each label's offset unless a flag says not, so most inputs reach the
 * field checks; flags pick the device's size and what label 1 holds.
 * Checked: the result is one of the promised errors with a message, and
 * a configuration that is accepted has fields import may trust.
 */
#include <config.h>

#include "fuzz.h"
#include "fuzz_inputs.h"
#include "label.h"

static fz_memdev_t fz_devs[4];

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fz_setup ();
  for (unsigned i = 0; i < 4; i++)
    fz_memdev_create (&fz_devs[i], "label", fz_label_sizes[i]);
  return 0;
}

/* What import relies on in a configuration it accepted. */
static void
lab_check_accepted (const zv_config_phys_t *cf, uint64_t devsize)
{
  FZ_CHECK (cf->cf_ndevs >= 1 && cf->cf_ndevs <= ZV_MAX_DEVS);
  FZ_CHECK (cf->cf_role == ZV_ROLE_LOG || cf->cf_dev_index < cf->cf_ndevs);
  FZ_CHECK (cf->cf_volblocksize >= ZV_MIN_VOLBLOCKSIZE
            && cf->cf_volblocksize <= ZV_MAX_VOLBLOCKSIZE
            && (cf->cf_volblocksize & (cf->cf_volblocksize - 1)) == 0);
  FZ_CHECK (cf->cf_version == ZV_CONFIG_VERSION
            && cf->cf_volsize % 512 == 0);
  for (unsigned i = 0; i < cf->cf_ndevs; i++)
    FZ_CHECK (cf->cf_dev_sizes[i] >= ZV_MIN_DEV_SIZE
              && cf->cf_dev_sizes[i] % ZV_SECTOR == 0);
  FZ_CHECK (memchr (cf->cf_name, '\0', sizeof cf->cf_name) != NULL);
  if (devsize)
    FZ_CHECK (cf->cf_dev_size <= devsize);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  fz_in_t in = fz_in (data, size);
  uint8_t flags = fz_u8 (&in);
  fz_memdev_t *md = &fz_devs[flags & FZ_LABEL_SIZE_MASK];
  uint64_t devsize = md->md_size;
  uint64_t off1 = zv_label_offset (devsize, 1);
  unsigned l1 = (flags >> FZ_LABEL_L1_SHIFT) & 3;
  zv_config_phys_t cf0, cf1, got;
  char err[512];
  unsigned nvalid = 99;
  zv_dev_t *dev;
  int r;

  fz_bytes (&in, &cf0, sizeof cf0);
  fz_bytes (&in, &cf1, sizeof cf1);

  /* The buffer alone: a verified configuration either passes the field
   * checks or is refused with a message. */
  if (!(flags & FZ_LABEL_RAW0))
    zv_label_seal_config (&cf0, 0);
  if (zv_label_verify_config (&cf0, 0)) {
    err[0] = '\0';
    r = zv_label_config_check (&cf0, err, sizeof err);
    FZ_CHECK (r == 0 || (r == -EINVAL && err[0] != '\0'));
    if (r == 0)
      lab_check_accepted (&cf0, 0);
  }

  /* The device: label 0, label 1, maybe an uberblock in label 0's ring. */
  memcpy (md->md_map, &cf0, sizeof cf0);
  switch (l1) {
  case FZ_LABEL_L1_SAME:
    cf1 = cf0;
    zv_label_seal_config (&cf1, off1);
    break;
  case FZ_LABEL_L1_INPUT:
    if (!(flags & FZ_LABEL_RAW1))
      zv_label_seal_config (&cf1, off1);
    break;
  case FZ_LABEL_L1_ZERO:
    memset (&cf1, 0, sizeof cf1);
    break;
  case FZ_LABEL_L1_MOVED:
    cf1 = cf0;
    break;
  }
  memcpy (md->md_map + off1, &cf1, sizeof cf1);
  if (flags & FZ_LABEL_RING_UB) {
    uint64_t at = ZV_UB_RING_OFFSET + ZV_UB_SIZE;
    zv_uberblock_phys_t ub = {
      .ub_magic = ZV_UB_MAGIC, .ub_version = ZV_FORMAT_VERSION,
      .ub_txg = 1, .ub_pool_guid = cf0.cf_pool_guid,
    };
    zv_label_seal_ub (&ub, at);
    memcpy (md->md_map + at, &ub, sizeof ub);
  }

  dev = fz_memdev_open (md);
  err[0] = '\0';
  r = zv_label_read_config (dev, &got, &nvalid, err, sizeof err);
  zv_dev_close (dev);
  FZ_CHECK (r == 0 || r == -ENOENT || r == -EIO || r == -EINVAL);
  FZ_CHECK (r == 0 || err[0] != '\0');
  FZ_CHECK (strlen (err) < sizeof err);
  if (r == 0) {
    FZ_CHECK (nvalid >= 1 && nvalid <= ZV_NLABELS);
    lab_check_accepted (&got, devsize);
  }

  memset (md->md_map, 0, ZV_LABEL_SIZE);
  memset (md->md_map + off1, 0, ZV_LABEL_SIZE);
  return 0;
}
