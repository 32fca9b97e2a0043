/*
 * label.c: pool configuration and uberblock ring on every device.
 *
 * Theory.  A device carries two labels, one at the front and one at the
 * back (format.h).  The configuration block is written once, at create,
 * into both labels; it names the pool, this device and every other
 * device of the pool, so import can tell a missing or foreign device.
 *
 * Uberblocks are the only data overwritten in place.  Txg T writes slot
 * T % ZV_UB_COUNT; the pool's sync writes the front labels of every
 * device, flushes, then the back labels, and flushes again, so at any
 * moment at least one copy of the newest committed uberblock, or of the
 * one before it, is intact.  Each block's checksum is seeded with its
 * physical offset: a block copied to another place does not verify.
 *
 * Import reads every slot of both labels of every device and keeps those
 * that verify (magic, version, checksum, pool guid, the slot of their
 * txg, flags zero); import.c then tries them newest first until one's tree
 * verifies, and refuses a rewind unless told to accept it.
 *
 * Empty slots.  A zeroed or overwritten slot must not look like one no
 * txg has written yet, or import cannot tell that the newest txg is
 * missing.  So create (zv_label_init, when the configuration carries
 * ZV_CF_F_UB_EMPTY) fills every slot with an empty uberblock: sealed at
 * its offset, the pool guid, flag ZV_UB_F_EMPTY, txg 0.  From then on
 * every copy of every slot verifies, except one the sync is writing at
 * that moment: it writes a slot's front copies (all devices), flushes,
 * and only then its back copies, so a crash tears the copies of one
 * label set at most, and the other set still verifies (older txg, or
 * empty).  zv_label_ring_state reports, slot by slot, how many copies
 * verify; a slot with none was damaged after it was written, and may
 * have held a txg newer than every one that survived (import.c).  Pools
 * created before the flag have zeros in slots never written; there a
 * slot is known to have been written only once its txg minus
 * ZV_UB_COUNT is a txg of the pool.
 *
 * An empty uberblock is never a candidate: an older reader skips it too
 * (txg 0), so the prefilled ring keeps format 1 readable by it.
 * zv_label_discard writes empty uberblocks over slots a rewind gave up
 * (damaged ones, and those of txgs newer than the one imported), so the
 * acceptance is durable: the next import neither refuses again nor
 * finds a stale txg newer than the pool's own.
 *
 * Mirrors.  Each side of a mirror has labels of its own, placed by the
 * mirror's size: the configuration is the mirror's plus the side count,
 * the side's own number and every side's guid (zv_label_init writes each
 * side with its number).  Reading a mirror's configuration reads every
 * side in service on its own and checks they agree (a side of another
 * pool or mirror refuses the import; one with no label or damaged ones,
 * beside one with the pool's, is faulted).  The rings are walked side by
 * side (label_leaves): a side that was out of service holds older
 * uberblocks, and the newest of any side must be seen.  Uberblock writes
 * go through the mirror (every side in service; dev_mirror.c), a
 * discard side by side, as it must look at what each holds.
 *
 * No locking: called from import, create and the sync thread only.
 */
#include <config.h>

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <stdlib.h>

#include "label.h"

/* Seed for a label block: its physical offset, mixed with the magic. */
static uint64_t
label_seed (uint64_t offset)
{
  return offset ^ ZV_LABEL_MAGIC;
}

/* Compute and store the checksum of a configuration block. */
void
zv_label_seal_config (zv_config_phys_t *cf, uint64_t offset)
{
  memset (&cf->cf_cksum, 0, sizeof cf->cf_cksum);
  zv_cksum_compute (cf, sizeof *cf, label_seed (offset), &cf->cf_cksum);
}

/* Check a configuration block's magic, version and checksum. */
bool
zv_label_verify_config (const zv_config_phys_t *cf, uint64_t offset)
{
  zv_config_phys_t copy = *cf;
  zv_cksum_t want = cf->cf_cksum;

  /* A format-1 configuration verifies, and so does one of a version
   * newer than this build's, so that import refuses it with a message
   * (zv_label_config_check) and create never overwrites it. */
  if (cf->cf_magic != ZV_LABEL_MAGIC || cf->cf_version == 0
      || cf->cf_version > 0xffff)
    return false;
  zv_label_seal_config (&copy, offset);
  return zv_cksum_equal (&copy.cf_cksum, &want);
}

/* Compute and store the checksum of an uberblock. */
void
zv_label_seal_ub (zv_uberblock_phys_t *ub, uint64_t offset)
{
  memset (&ub->ub_cksum, 0, sizeof ub->ub_cksum);
  zv_cksum_compute (ub, sizeof *ub, label_seed (offset), &ub->ub_cksum);
}

/* Check an uberblock's magic, version and checksum. */
bool
zv_label_verify_ub (const zv_uberblock_phys_t *ub, uint64_t offset)
{
  zv_uberblock_phys_t copy = *ub;
  zv_cksum_t want = ub->ub_cksum;

  if (ub->ub_magic != ZV_UB_MAGIC || ub->ub_version != ZV_FORMAT_VERSION)
    return false;
  zv_label_seal_ub (&copy, offset);
  return zv_cksum_equal (&copy.ub_cksum, &want);
}

/* The empty uberblock of pool 'guid' (sealed by the caller). */
static void
label_empty_ub (zv_uberblock_phys_t *ub, uint64_t guid)
{
  memset (ub, 0, sizeof *ub);
  ub->ub_magic = ZV_UB_MAGIC;
  ub->ub_version = ZV_FORMAT_VERSION;
  ub->ub_flags = ZV_UB_F_EMPTY;
  ub->ub_pool_guid = guid;
}

/* Fill the ring of a label image at device offset 'base' (the label's)
 * with empty uberblocks, each sealed at its own offset. */
static void
label_fill_empty (uint8_t *label, uint64_t base, uint64_t guid)
{
  for (unsigned s = 0; s < ZV_UB_COUNT; s++) {
    uint64_t off = ZV_UB_RING_OFFSET + (uint64_t) s * ZV_UB_SIZE;
    zv_uberblock_phys_t *ub = (zv_uberblock_phys_t *) (label + off);

    label_empty_ub (ub, guid);
    zv_label_seal_ub (ub, base + off);
  }
}

/* Write a sealed configuration and an empty ring into both labels of
 * 'dev', placed as on a device of 'size' bytes (a mirror's side: the
 * mirror's size). */
static int
label_init_at (zv_dev_t *dev, uint64_t size, const zv_config_phys_t *cf)
{
  uint8_t *buf = zv_buf_alloc (ZV_LABEL_SIZE);
  zv_dev_io_t ios[ZV_NLABELS];
  int r;

  for (unsigned l = 0; l < ZV_NLABELS; l++) {
    ios[l] = (zv_dev_io_t) {
      .di_dev = dev, .di_op = ZV_DEV_WRITE,
      .di_offset = zv_label_offset (size, l), .di_len = ZV_LABEL_SIZE,
    };
  }
  /* Each copy has its own seal (the seed is its offset): two buffers. */
  uint8_t *buf2 = zv_buf_alloc (ZV_LABEL_SIZE);
  memcpy (buf, cf, sizeof *cf);
  memcpy (buf2, cf, sizeof *cf);
  zv_label_seal_config ((zv_config_phys_t *) buf, ios[0].di_offset);
  zv_label_seal_config ((zv_config_phys_t *) buf2, ios[1].di_offset);
  if (cf->cf_flags & ZV_CF_F_UB_EMPTY) {
    label_fill_empty (buf, ios[0].di_offset, cf->cf_pool_guid);
    label_fill_empty (buf2, ios[1].di_offset, cf->cf_pool_guid);
  }
  ios[0].di_buf = buf;
  ios[1].di_buf = buf2;
  r = zv_dev_io_batch (ios, ZV_NLABELS);
  if (r == 0)
    r = zv_dev_flush (dev);
  zv_buf_free (buf);
  zv_buf_free (buf2);
  return r;
}

/* Label a device; a mirror's sides each get their own side number (the
 * rest of the configuration, cf_side_guids included, is the caller's). */
int
zv_label_init (zv_dev_t *dev, const zv_config_phys_t *cf)
{
  uint64_t size = zv_dev_size (dev);

  if (!zv_dev_is_mirror (dev))
    return label_init_at (dev, size, cf);
  ZV_VERIFY3U (cf->cf_mirror_nsides, ==, zv_dev_nsides (dev));
  for (unsigned i = 0; i < zv_dev_nsides (dev); i++) {
    zv_config_phys_t scf = *cf;
    int r;

    if (!zv_dev_side_ok (dev, i))
      return -EIO;
    scf.cf_mirror_side = i;
    r = label_init_at (zv_dev_side (dev, i), size, &scf);
    if (r < 0)
      return r;
  }
  return 0;
}

/*
 * A device size a configuration may record: room for both labels and the
 * smallest data area, whole sectors, and offsets that fit a dva's 56 bits.
 */
static bool
label_size_ok (uint64_t size)
{
  return size >= ZV_MIN_DEV_SIZE && size % ZV_SECTOR == 0
    && size <= (1ull << 56);
}

/* Bounds and sanity of a configuration that verified. */
int
zv_label_config_check (const zv_config_phys_t *cf, char *err, size_t errlen)
{
  uint32_t vbs = cf->cf_volblocksize;

  uint64_t feats = cf->cf_flags & ZV_CF_F_FEATURES ? ZV_FEAT_KNOWN : 0;

  if (cf->cf_version > ZV_CONFIG_VERSION) {
    snprintf (err, errlen, "label is of format version %u, newer than this "
              "build reads (%u): serve the pool with a newer release",
              cf->cf_version, ZV_CONFIG_VERSION);
    return -EINVAL;
  }
  /* Without the flag the field was zero (cf_reserved); format 1 is
   * refused below, with a message of its own. */
  if (cf->cf_version != ZV_POOL_VERSION_1 && (cf->cf_features & ~feats)) {
    snprintf (err, errlen, "pool uses format features this build does not "
              "know (mask 0x%llx): serve it with a newer release",
              (unsigned long long) (cf->cf_features & ~feats));
    return -EINVAL;
  }
  if (cf->cf_flags & ~ZV_CF_F_KNOWN) {
    snprintf (err, errlen, "label has unknown flags 0x%llx (a newer format "
              "feature?)", (unsigned long long) (cf->cf_flags
                                                  & ~ZV_CF_F_KNOWN));
    return -EINVAL;
  }
  if (cf->cf_ndevs == 0 || cf->cf_ndevs > ZV_MAX_DEVS) {
    snprintf (err, errlen, "label names %u devices (1..%u allowed)",
              cf->cf_ndevs, ZV_MAX_DEVS);
    return -EINVAL;
  }
  if (cf->cf_role == ZV_ROLE_LOG) {
    if (cf->cf_log_guid == 0 || cf->cf_dev_guid != cf->cf_log_guid) {
      snprintf (err, errlen, "log device label does not name itself");
      return -EINVAL;
    }
  }
  else if (cf->cf_role != ZV_ROLE_DATA) {
    snprintf (err, errlen, "label has an unknown device role %u",
              cf->cf_role);
    return -EINVAL;
  }
  else if (cf->cf_dev_index >= cf->cf_ndevs) {
    snprintf (err, errlen, "label device index %u out of range (%u devices)",
              cf->cf_dev_index, cf->cf_ndevs);
    return -EINVAL;
  }
  if (cf->cf_role == ZV_ROLE_DATA
      && cf->cf_dev_guids[cf->cf_dev_index] != cf->cf_dev_guid) {
    snprintf (err, errlen, "label device guid does not match its own table");
    return -EINVAL;
  }
  if (vbs < 4096 || vbs > 128 * 1024 || (vbs & (vbs - 1)) != 0) {
    snprintf (err, errlen, "label volblocksize %u is invalid", vbs);
    return -EINVAL;
  }
  /* Format 2: the volume create made with the pool (0: none); each
   * volume's own size is in its dataset record. */
  if (cf->cf_volsize % 512 != 0
      || cf->cf_volsize > (1ull << 56)) {
    snprintf (err, errlen, "label volume size %llu is invalid",
              (unsigned long long) cf->cf_volsize);
    return -EINVAL;
  }
  for (unsigned i = 0; i < cf->cf_ndevs; i++) {
    if (!label_size_ok (cf->cf_dev_sizes[i])) {
      snprintf (err, errlen, "label size of device %u (%llu bytes) is "
                "invalid", i, (unsigned long long) cf->cf_dev_sizes[i]);
      return -EINVAL;
    }
  }
  if (cf->cf_log_guid != 0 && !label_size_ok (cf->cf_log_size)) {
    snprintf (err, errlen, "label size of the log device (%llu bytes) is "
              "invalid", (unsigned long long) cf->cf_log_size);
    return -EINVAL;
  }
  /* The size of this device is written once, from the same number as its
   * entry in the table (the log device's: cf_log_size); a copy that
   * differs is not a configuration create wrote. */
  uint64_t own = cf->cf_role == ZV_ROLE_LOG ? cf->cf_log_size
    : cf->cf_dev_sizes[cf->cf_dev_index];
  if (cf->cf_dev_size != own) {
    snprintf (err, errlen, "label size of this device (%llu bytes) does "
              "not match its entry in the device table (%llu)",
              (unsigned long long) cf->cf_dev_size,
              (unsigned long long) own);
    return -EINVAL;
  }
  if (memchr (cf->cf_name, '\0', sizeof cf->cf_name) == NULL) {
    snprintf (err, errlen, "label pool name is not terminated");
    return -EINVAL;
  }
  if (!zv_name_is_valid (cf->cf_name, sizeof cf->cf_name)) {
    snprintf (err, errlen, "label pool name is empty or holds a byte that "
              "is not printable ASCII");
    return -EINVAL;
  }
  if (cf->cf_mirror_nsides != 0) {
    if (!(cf->cf_features & ZV_FEAT_MIRROR) || cf->cf_role != ZV_ROLE_DATA
        || cf->cf_mirror_nsides < 2
        || cf->cf_mirror_nsides > ZV_MIRROR_MAX_SIDES
        || cf->cf_mirror_side >= cf->cf_mirror_nsides) {
      snprintf (err, errlen, "label names side %u of a mirror of %u (a "
                "mirror has 2 or 3 sides, of a data device, in a pool with "
                "the mirror feature)", cf->cf_mirror_side,
                cf->cf_mirror_nsides);
      return -EINVAL;
    }
    for (unsigned i = 0; i < ZV_MIRROR_MAX_SIDES; i++)
      if ((cf->cf_side_guids[i] == 0) != (i >= cf->cf_mirror_nsides)) {
        snprintf (err, errlen, "label's mirror side table is invalid");
        return -EINVAL;
      }
  }
  else if (cf->cf_mirror_side != 0 || cf->cf_side_guids[0] != 0
           || cf->cf_side_guids[1] != 0 || cf->cf_side_guids[2] != 0) {
    snprintf (err, errlen, "label has mirror fields but names no mirror");
    return -EINVAL;
  }
  if (cf->cf_version == ZV_POOL_VERSION_1) {
    snprintf (err, errlen, "pool '%s' is of format version 1 (one volume "
              "per pool), which this version does not read: serve it with "
              "a release that reads format 1, create a pool of format 2 "
              "and copy the volume into a volume of it (nbdcopy from one "
              "export to the other)", cf->cf_name);
    return -EINVAL;
  }
  return 0;
}

/*
 * Does any uberblock slot of either label verify (magic, version and its
 * offset-seeded checksum)?  The guid of the newest goes to *guid.  Only
 * asked when no configuration verifies: a hint, not a trust decision.
 */
static bool
label_ring_has_ub (zv_dev_t *dev, uint64_t size, uint64_t *guid)
{
  const uint32_t ringlen = ZV_LABEL_SIZE - ZV_UB_RING_OFFSET;
  uint8_t *ring = zv_buf_alloc (ringlen);
  uint64_t best_txg = 0;
  bool found = false;

  for (unsigned l = 0; l < ZV_NLABELS; l++) {
    uint64_t base = zv_label_offset (size, l) + ZV_UB_RING_OFFSET;

    if (zv_dev_read (dev, ring, base, ringlen) < 0)
      continue;
    for (unsigned s = 0; s < ZV_UB_COUNT; s++) {
      const zv_uberblock_phys_t *ub =
        (const zv_uberblock_phys_t *) (ring + (size_t) s * ZV_UB_SIZE);
      if (ub->ub_magic != ZV_UB_MAGIC
          || !zv_label_verify_ub (ub, base + (uint64_t) s * ZV_UB_SIZE))
        continue;
      if (!found || ub->ub_txg > best_txg) {
        best_txg = ub->ub_txg;
        *guid = ub->ub_pool_guid;
      }
      found = true;
    }
  }
  zv_buf_free (ring);
  return found;
}

/* Read both configuration copies of 'dev', placed as on a device of
 * 'size' bytes; return the first that verifies. */
static int
label_read_config_at (zv_dev_t *dev, uint64_t size, zv_config_phys_t *cf,
                      unsigned *nvalid, char *err, size_t errlen)
{
  bool magic_seen = false;
  unsigned valid = 0;
  int ioerr = 0;
  uint8_t *buf = zv_buf_alloc (ZV_CONFIG_SIZE);

  if (size < ZV_MIN_DEV_SIZE) {
    zv_buf_free (buf);
    snprintf (err, errlen, "%s: too small to hold a pool (%llu bytes)",
              zv_dev_path (dev), (unsigned long long) size);
    return -ENOENT;
  }
  for (unsigned l = 0; l < ZV_NLABELS; l++) {
    uint64_t off = zv_label_offset (size, l);
    const zv_config_phys_t *c = (const zv_config_phys_t *) buf;
    int r = zv_dev_read (dev, buf, off, ZV_CONFIG_SIZE);

    if (r < 0) {
      ioerr = r;
      continue;
    }
    if (c->cf_magic == ZV_LABEL_MAGIC)
      magic_seen = true;
    if (!zv_label_verify_config (c, off)) {
      if (c->cf_magic == ZV_LABEL_MAGIC)
        zv_info ("%s: label %u does not verify; using the other copy",
                 zv_dev_path (dev), l);
      continue;
    }
    if (valid == 0)
      *cf = *c;
    valid++;
  }
  zv_buf_free (buf);
  if (nvalid)
    *nvalid = valid;
  if (valid > 0) {
    int r = zv_label_config_check (cf, err, errlen);
    uint64_t have = ZV_P2ALIGN (size, ZV_SECTOR);
    if (r == 0 && cf->cf_dev_size > have) {
      snprintf (err, errlen, "%s: label size of this device (%llu bytes) is "
                "more than the device has (%llu bytes): it shrank, or the "
                "label is not its own", zv_dev_path (dev),
                (unsigned long long) cf->cf_dev_size,
                (unsigned long long) have);
      r = -EINVAL;
    }
    return r;
  }
  /* No configuration verifies.  A device whose uberblocks still verify
   * holds a pool (its tree and data may be intact): it must never be
   * called empty, or the hint to create over it destroys the pool. */
  uint64_t guid = 0;
  bool ring = label_ring_has_ub (dev, size, &guid);
  if (magic_seen || ioerr || ring) {
    char g[48] = "";
    if (ring)
      snprintf (g, sizeof g, " (guid %016llx)",
                (unsigned long long) guid);
    snprintf (err, errlen, "%s: holds a damaged pool%s: its labels are "
              "damaged (no configuration copy verifies%s)",
              zv_dev_path (dev), g, ioerr ? ", or one is unreadable"
              : ring && !magic_seen ? "; its uberblocks do" : "");
    return -EIO;
  }
  snprintf (err, errlen, "%s: not a pool device (no label found)",
            zv_dev_path (dev));
  return -ENOENT;
}

/*
 * A mirror's configuration: every side in service is read on its own.
 * The sides must agree (one pool, one mirror, each the side it is given
 * as); a side of another pool or another mirror is refused, the whole
 * import with it, since writing to it would damage what it belongs to.
 * A side with no label or damaged labels, next to one whose labels are
 * the pool's, is faulted (the mirror goes on degraded); when no side has
 * a label the answer is the first side's (-ENOENT: a device create may
 * use).
 */
static int
label_read_mirror_config (zv_dev_t *dev, zv_config_phys_t *cf,
                          unsigned *nvalid, char *err, size_t errlen)
{
  unsigned n = zv_dev_nsides (dev), valid = 0, ref = UINT_MAX;
  uint64_t size = zv_dev_size (dev);
  zv_config_phys_t scf[ZV_MIRROR_MAX_SIDES];
  char serr[ZV_MIRROR_MAX_SIDES][512];
  int sr[ZV_MIRROR_MAX_SIDES];

  ZV_VERIFY3U (n, <=, ZV_MIRROR_MAX_SIDES);
  for (unsigned i = 0; i < n; i++) {
    unsigned nv = 0;

    sr[i] = -ENODEV;
    serr[i][0] = '\0';
    if (!zv_dev_side_ok (dev, i))
      continue;
    sr[i] = label_read_config_at (zv_dev_side (dev, i), size, &scf[i], &nv,
                                  serr[i], sizeof serr[i]);
    if (sr[i] == -EINVAL) {
      snprintf (err, errlen, "%s: side %u: %s", zv_dev_path (dev), i,
                serr[i]);
      return -EINVAL;
    }
    if (sr[i] < 0)
      continue;
    if (scf[i].cf_mirror_nsides != n || scf[i].cf_mirror_side != i) {
      if (scf[i].cf_mirror_nsides == 0)
        snprintf (err, errlen, "%s: side %u (%s) is a plain device of pool "
                  "'%s', not a side of a mirror", zv_dev_path (dev), i,
                  zv_dev_side_path (dev, i), scf[i].cf_name);
      else
        snprintf (err, errlen, "%s: side %u (%s) is side %u of a mirror of "
                  "%u in pool '%s': give the sides in the order they were "
                  "created, every one (a missing one by its old name)",
                  zv_dev_path (dev), i, zv_dev_side_path (dev, i),
                  scf[i].cf_mirror_side, scf[i].cf_mirror_nsides,
                  scf[i].cf_name);
      return -EINVAL;
    }
    if (ref == UINT_MAX) {
      ref = i;
      *cf = scf[i];
    }
    else if (scf[i].cf_pool_guid != cf->cf_pool_guid
             || scf[i].cf_dev_guid != cf->cf_dev_guid
             || memcmp (scf[i].cf_side_guids, cf->cf_side_guids,
                        sizeof cf->cf_side_guids) != 0) {
      snprintf (err, errlen, "%s: side %u (%s) belongs to pool '%s' (guid "
                "%016llx) or to another mirror, not to the mirror of pool "
                "'%s' (guid %016llx) that side %u (%s) is of: refusing it",
                zv_dev_path (dev), i, zv_dev_side_path (dev, i),
                scf[i].cf_name, (unsigned long long) scf[i].cf_pool_guid,
                cf->cf_name, (unsigned long long) cf->cf_pool_guid, ref,
                zv_dev_side_path (dev, ref));
      return -EINVAL;
    }
    valid += nv;
  }
  /* A side a resilver had not finished: written, not read, until the
   * pool's resilver (resilver.c) resumes and ends it. */
  for (unsigned i = 0; i < n && ref != UINT_MAX; i++) {
    zv_resilver_phys_t rs;

    if (sr[i] == 0 && zv_label_read_resilver (zv_dev_side (dev, i), size,
                                              &scf[i], &rs)) {
      zv_warn ("%s: side %u (%s) is being resilvered (%llu bytes of the "
               "data area done); it is read once that ends",
               zv_dev_path (dev), i, zv_dev_side_path (dev, i),
               (unsigned long long) (rs.rs_pos - ZV_MIN (rs.rs_pos,
                                                         zv_data_start ())));
      zv_dev_side_set_resilvering (dev, i, true);
    }
  }
  if (ref == UINT_MAX) {
    /* No side holds the pool's labels: say what the first one holds. */
    for (unsigned i = 0; i < n; i++)
      if (sr[i] != -ENODEV) {
        snprintf (err, errlen, "%s", serr[i]);
        return sr[i];
      }
    snprintf (err, errlen, "%s: no side in service", zv_dev_path (dev));
    return -EIO;
  }
  for (unsigned i = 0; i < n; i++)
    if (sr[i] == -ENOENT || sr[i] == -EIO) {
      char why[600];
      snprintf (why, sizeof why, "%s", sr[i] == -ENOENT
                ? "it has no pool label (a new or wiped device)"
                : "its labels are damaged");
      zv_dev_side_fault (dev, i, why);
    }
  if (nvalid)
    *nvalid = valid;
  return 0;
}

/* ---- resilver records (see format.h) ---- */

/* Write rs (sealed here; NULL: zeros, no resilver) into both labels of
 * 'side', placed by 'size', and flush. */
int
zv_label_write_resilver (zv_dev_t *side, uint64_t size,
                         const zv_resilver_phys_t *rs)
{
  zv_dev_io_t ios[ZV_NLABELS];
  uint8_t *bufs[ZV_NLABELS];
  int r;

  for (unsigned l = 0; l < ZV_NLABELS; l++) {
    uint64_t off = zv_label_offset (size, l) + ZV_RESILVER_OFFSET;

    bufs[l] = zv_buf_alloc (ZV_SECTOR);
    memset (bufs[l], 0, ZV_SECTOR);
    if (rs != NULL) {
      zv_resilver_phys_t *c = (zv_resilver_phys_t *) bufs[l];
      *c = *rs;
      memset (&c->rs_cksum, 0, sizeof c->rs_cksum);
      zv_cksum_compute (c, sizeof *c, label_seed (off), &c->rs_cksum);
    }
    ios[l] = (zv_dev_io_t) {
      .di_dev = side, .di_op = ZV_DEV_WRITE, .di_buf = bufs[l],
      .di_offset = off, .di_len = ZV_SECTOR,
    };
  }
  r = zv_dev_io_batch (ios, ZV_NLABELS);
  if (r == 0)
    r = zv_dev_flush (side);
  for (unsigned l = 0; l < ZV_NLABELS; l++)
    zv_buf_free (bufs[l]);
  return r;
}

/* The resilver record of 'side' (placed by 'size') that verifies and
 * names the side of cf: true with it in *rs.  A record that verifies
 * but names another side, or has flags, is no record (logged). */
bool
zv_label_read_resilver (zv_dev_t *side, uint64_t size,
                        const zv_config_phys_t *cf, zv_resilver_phys_t *rs)
{
  uint8_t *buf = zv_buf_alloc (ZV_SECTOR);
  bool found = false;

  for (unsigned l = 0; l < ZV_NLABELS && !found; l++) {
    uint64_t off = zv_label_offset (size, l) + ZV_RESILVER_OFFSET;
    zv_resilver_phys_t c;
    zv_cksum_t want;

    if (zv_dev_read (side, buf, off, ZV_SECTOR) < 0)
      continue;
    memcpy (&c, buf, sizeof c);
    if (c.rs_magic != ZV_RESILVER_MAGIC)
      continue;
    want = c.rs_cksum;
    memset (&c.rs_cksum, 0, sizeof c.rs_cksum);
    zv_cksum_compute (&c, sizeof c, label_seed (off), &c.rs_cksum);
    if (!zv_cksum_equal (&c.rs_cksum, &want)
        || c.rs_version != ZV_RESILVER_VERSION)
      continue;
    if (c.rs_flags != 0 || c.rs_pool_guid != cf->cf_pool_guid
        || c.rs_dev_guid != cf->cf_dev_guid
        || c.rs_side_guid != cf->cf_side_guids[cf->cf_mirror_side]
        || c.rs_pos > size) {
      zv_error ("%s: resilver record %u is not this side's; ignored",
                zv_dev_path (side), l);
      continue;
    }
    *rs = c;
    found = true;
  }
  zv_buf_free (buf);
  return found;
}

/* Label 'side', new, as side i of mirror dev: a configuration of a side
 * in service with its side number, an empty ring. */
int
zv_label_init_side (zv_dev_t *dev, unsigned i, zv_dev_t *side,
                    zv_config_phys_t *cfp)
{
  char err[512];
  int r = -EIO;

  for (unsigned j = 0; j < zv_dev_nsides (dev) && r < 0; j++) {
    if (j == i || !zv_dev_side_ok (dev, j))
      continue;
    r = label_read_config_at (zv_dev_side (dev, j), zv_dev_size (dev), cfp,
                              NULL, err, sizeof err);
  }
  if (r < 0)
    return r;
  cfp->cf_mirror_side = i;
  return label_init_at (side, zv_dev_size (dev), cfp);
}

/* Read a device's configuration (see label.h). */
int
zv_label_read_config (zv_dev_t *dev, zv_config_phys_t *cf, unsigned *nvalid,
                      char *err, size_t errlen)
{
  int r;

  if (zv_dev_is_mirror (dev))
    return label_read_mirror_config (dev, cf, nvalid, err, errlen);
  r = label_read_config_at (dev, zv_dev_size (dev), cf, nvalid, err,
                            errlen);
  if (r == 0 && cf->cf_mirror_nsides != 0) {
    snprintf (err, errlen, "%s: side %u of a mirror of %u in pool '%s': "
              "give the mirror (mirror:A,B%s), not one of its sides",
              zv_dev_path (dev), cf->cf_mirror_side, cf->cf_mirror_nsides,
              cf->cf_name, cf->cf_mirror_nsides > 2 ? ",C" : "");
    return -EINVAL;
  }
  return r;
}

/* Write the uberblock into slot txg % count of label l on every device. */
int
zv_label_write_ub (zv_dev_t **devs, unsigned ndevs, zv_uberblock_phys_t *ub,
                   unsigned l)
{
  zv_dev_io_t ios[ZV_MAX_DEVS];
  void *bufs[ZV_MAX_DEVS];
  uint64_t slot = ub->ub_txg % ZV_UB_COUNT;
  int r;

  ZV_VERIFY3U (ndevs, <=, ZV_MAX_DEVS);
  for (unsigned d = 0; d < ndevs; d++) {
    uint64_t off = zv_label_offset (zv_dev_size (devs[d]), l)
      + ZV_UB_RING_OFFSET + slot * ZV_UB_SIZE;
    zv_uberblock_phys_t *copy;

    bufs[d] = zv_buf_alloc (ZV_UB_SIZE);
    copy = bufs[d];
    *copy = *ub;
    zv_label_seal_ub (copy, off);
    ios[d] = (zv_dev_io_t) {
      .di_dev = devs[d], .di_op = ZV_DEV_WRITE, .di_buf = bufs[d],
      .di_offset = off, .di_len = ZV_UB_SIZE,
    };
  }
  r = zv_dev_io_batch (ios, ndevs);
  for (unsigned d = 0; d < ndevs; d++)
    zv_buf_free (bufs[d]);
  return r;
}

/* Newest first: txg, then timestamp. */
static int
label_cand_cmp (const void *a, const void *b)
{
  const zv_uberblock_phys_t *x = &((const zv_ub_cand_t *) a)->uc_ub;
  const zv_uberblock_phys_t *y = &((const zv_ub_cand_t *) b)->uc_ub;

  if (x->ub_txg != y->ub_txg)
    return x->ub_txg > y->ub_txg ? -1 : 1;
  if (x->ub_timestamp != y->ub_timestamp)
    return x->ub_timestamp > y->ub_timestamp ? -1 : 1;
  return 0;
}

/* Add a verified uberblock, merging an identical copy. */
static unsigned
label_cand_add (zv_ub_cand_t *cands, unsigned n, unsigned max,
                const zv_uberblock_phys_t *ub)
{
  if (max == 0)
    return 0;
  for (unsigned i = 0; i < n; i++) {
    const zv_uberblock_phys_t *c = &cands[i].uc_ub;
    if (c->ub_txg == ub->ub_txg && c->ub_timestamp == ub->ub_timestamp
        && memcmp (&c->ub_rootbp, &ub->ub_rootbp, sizeof ub->ub_rootbp) == 0) {
      cands[i].uc_copies++;
      return n;
    }
  }
  if (n < max) {
    cands[n].uc_ub = *ub;
    cands[n].uc_copies = 1;
    n++;
  }
  else {
    /* Keep the newest: replace the oldest if this one is newer. */
    unsigned oldest = 0;
    zv_ub_cand_t tmp = { .uc_ub = *ub, .uc_copies = 1 };
    for (unsigned i = 1; i < n; i++)
      if (label_cand_cmp (&cands[i], &cands[oldest]) > 0)
        oldest = i;
    if (label_cand_cmp (&tmp, &cands[oldest]) < 0)
      cands[oldest] = tmp;
  }
  return n;
}

/* What a copy of slot s (at device offset off) holds for pool guid. */
static enum zv_ub_kind
label_ub_kind (const zv_uberblock_phys_t *ub, uint64_t off, unsigned s,
               uint64_t guid)
{
  if (ub->ub_magic != ZV_UB_MAGIC || !zv_label_verify_ub (ub, off)
      || ub->ub_pool_guid != guid)
    return ZV_UB_INVALID;
  if (ub->ub_flags == ZV_UB_F_EMPTY)
    return ub->ub_txg == 0 && zv_bp_is_hole (&ub->ub_rootbp)
      ? ZV_UB_EMPTY : ZV_UB_INVALID;
  if (ub->ub_flags != 0 || ub->ub_txg == 0 || ub->ub_txg % ZV_UB_COUNT != s)
    return ZV_UB_INVALID;
  return ZV_UB_TXG;
}

/*
 * Read the ring of label l of device dev into ring (ZV_UB_COUNT slots);
 * *base gets its device offset.
 */
static int
label_read_ring (zv_dev_t *dev, uint64_t size, unsigned l, uint8_t *ring,
                 uint64_t *base)
{
  *base = zv_label_offset (size, l) + ZV_UB_RING_OFFSET;
  return zv_dev_read (dev, ring, *base, ZV_UB_COUNT * ZV_UB_SIZE);
}

/* A device whose rings are read one by one: a device, or one side in
 * service of a mirror, with the size its labels are placed by. */
typedef struct label_leaf {
  zv_dev_t *ll_dev;
  uint64_t ll_size;
} label_leaf_t;

/* Every ring holder of devs: a mirror's sides each count, so the newest
 * uberblock of any side is seen (one that was out of service is older). */
static unsigned
label_leaves (zv_dev_t **devs, unsigned ndevs, label_leaf_t *leaves)
{
  unsigned n = 0;

  for (unsigned d = 0; d < ndevs; d++)
    for (unsigned i = 0; i < zv_dev_nsides (devs[d]); i++)
      if (zv_dev_side_ok (devs[d], i))
        leaves[n++] = (label_leaf_t) { .ll_dev = zv_dev_side (devs[d], i),
                                       .ll_size = zv_dev_size (devs[d]) };
  return n;
}
#define LABEL_MAX_LEAVES (ZV_MAX_DEVS * ZV_MIRROR_MAX_SIDES)

static const zv_uberblock_phys_t *
label_ring_slot (const uint8_t *ring, unsigned s)
{
  return (const zv_uberblock_phys_t *) (ring + (size_t) s * ZV_UB_SIZE);
}

/* Called for every slot copy of every readable ring, with its kind. */
typedef void (*label_slot_fn) (void *arg, unsigned s,
                               const zv_uberblock_phys_t *ub,
                               enum zv_ub_kind kind);

/* Read each ring of each device and judge every slot; the number of
 * rings that could be read (0: none, and nothing was called). */
static unsigned
label_ring_walk (zv_dev_t **devs, unsigned ndevs, uint64_t guid,
                 label_slot_fn fn, void *arg)
{
  uint8_t *ring = zv_buf_alloc (ZV_UB_COUNT * ZV_UB_SIZE);
  label_leaf_t leaves[LABEL_MAX_LEAVES];
  unsigned readable = 0, nleaves = label_leaves (devs, ndevs, leaves);

  for (unsigned d = 0; d < nleaves; d++) {
    for (unsigned l = 0; l < ZV_NLABELS; l++) {
      uint64_t base;

      if (label_read_ring (leaves[d].ll_dev, leaves[d].ll_size, l, ring,
                           &base) < 0)
        continue;
      readable++;
      for (unsigned s = 0; s < ZV_UB_COUNT; s++) {
        const zv_uberblock_phys_t *ub = label_ring_slot (ring, s);

        fn (arg, s, ub, label_ub_kind (ub, base + (uint64_t) s * ZV_UB_SIZE,
                                       s, guid));
      }
    }
  }
  zv_buf_free (ring);
  return readable;
}

typedef struct label_collect {
  zv_ub_cand_t *lc_cands;
  unsigned lc_n, lc_max;
} label_collect_t;

static void
label_collect_slot (void *arg, unsigned s, const zv_uberblock_phys_t *ub,
                    enum zv_ub_kind kind)
{
  label_collect_t *lc = arg;

  (void) s;
  if (kind == ZV_UB_TXG)
    lc->lc_n = label_cand_add (lc->lc_cands, lc->lc_n, lc->lc_max, ub);
}

/* Gather every verifying uberblock of the pool, newest first. */
int
zv_label_collect_ubs (zv_dev_t **devs, unsigned ndevs, uint64_t guid,
                      zv_ub_cand_t *cands, unsigned max)
{
  label_collect_t lc = { .lc_cands = cands, .lc_max = max };

  if (label_ring_walk (devs, ndevs, guid, label_collect_slot, &lc) == 0)
    return -EIO;
  qsort (cands, lc.lc_n, sizeof *cands, label_cand_cmp);
  return (int) lc.lc_n;
}

static void
label_state_slot (void *arg, unsigned s, const zv_uberblock_phys_t *ub,
                  enum zv_ub_kind kind)
{
  zv_ub_slot_t *us = (zv_ub_slot_t *) arg + s;

  switch (kind) {
  case ZV_UB_INVALID:
    break;
  case ZV_UB_EMPTY:
    us->us_valid++;
    us->us_empty++;
    break;
  case ZV_UB_TXG:
    us->us_valid++;
    us->us_newest = ZV_MAX (us->us_newest, ub->ub_txg);
    break;
  }
}

/* Count, slot by slot, the copies that verify. */
int
zv_label_ring_state (zv_dev_t **devs, unsigned ndevs, uint64_t guid,
                     zv_ub_slot_t *slots)
{
  unsigned readable;

  memset (slots, 0, ZV_UB_COUNT * sizeof *slots);
  readable = label_ring_walk (devs, ndevs, guid, label_state_slot, slots);
  for (unsigned s = 0; s < ZV_UB_COUNT; s++)
    slots[s].us_copies = readable;
  return readable == 0 ? -EIO : (int) readable;
}

/* Empty the copies in label l that a rewind gave up. */
int
zv_label_discard (zv_dev_t **devs, unsigned ndevs, uint64_t guid,
                  const zv_uberblock_phys_t *keep, const bool *discard,
                  unsigned l)
{
  zv_ub_cand_t kc = { .uc_ub = *keep };
  uint8_t *ring = zv_buf_alloc (ZV_UB_COUNT * ZV_UB_SIZE);
  label_leaf_t leaves[LABEL_MAX_LEAVES];
  unsigned nleaves = label_leaves (devs, ndevs, leaves);
  zv_dev_io_t *ios = zv_calloc ((size_t) nleaves * ZV_UB_COUNT + 1,
                                sizeof *ios);
  size_t nio = 0;
  int r = 0;

  /* The imported txg's own slot is never given up.  Each side of a
   * mirror is read and written on its own: they need not hold the same
   * uberblocks (one was out of service). */
  ZV_VERIFY (!discard[keep->ub_txg % ZV_UB_COUNT]);
  for (unsigned d = 0; d < nleaves && r == 0; d++) {
    uint64_t base;

    r = label_read_ring (leaves[d].ll_dev, leaves[d].ll_size, l, ring,
                         &base);
    if (r < 0)
      break;
    for (unsigned s = 0; s < ZV_UB_COUNT; s++) {
      const zv_uberblock_phys_t *ub = label_ring_slot (ring, s);
      uint64_t off = base + (uint64_t) s * ZV_UB_SIZE;
      zv_uberblock_phys_t *e;

      zv_ub_cand_t uc;

      if (!discard[s]) {
        if (label_ub_kind (ub, off, s, guid) != ZV_UB_TXG)
          continue;
        uc.uc_ub = *ub;
        if (label_cand_cmp (&uc, &kc) >= 0)     /* not newer than keep */
          continue;
      }
      e = zv_buf_alloc (ZV_UB_SIZE);
      label_empty_ub (e, guid);
      zv_label_seal_ub (e, off);
      ios[nio++] = (zv_dev_io_t) {
        .di_dev = leaves[d].ll_dev, .di_op = ZV_DEV_WRITE, .di_buf = e,
        .di_offset = off, .di_len = ZV_UB_SIZE,
      };
    }
  }
  if (r == 0 && nio > 0)
    r = zv_dev_io_batch (ios, nio);
  for (size_t i = 0; i < nio; i++)
    zv_buf_free (ios[i].di_buf);
  free (ios);
  zv_buf_free (ring);
  return r < 0 ? r : (int) nio;
}
