/*
 * fuzz_dsrec: a dataset record of format 2's directory, as import reads
 * it (zv_dsdir_rec_check: hostile data).
 *
 * The input is a header (flags, the record's slot, the objset's txg and
 * next dataset id, as offsets from the record's own fields) and the
 * record's 1 KiB.  Unless the flags say not, the record is resealed for
 * its slot first, so that a changed field reaches the field checks
 * instead of stopping at the checksum.  Checked: a record that passes is
 * one import may serve (a volume or a snapshot of a valid size, block
 * size and name, its object of that shape, born no later than the
 * objset; a snapshot with its volume's id, no reservation and no flag; a
 * volume with no guid and no flag but a receive's; a queued background
 * free with one tree or dead list and its cursor inside it), a record
 * sealed for another slot never passes, an all-zero
 * record is a free slot, and nothing else returns but -EIO.
 */
#include <config.h>

#include "fuzz.h"
#include "pool.h"
#include "deadlist.h"

#define DSREC_GUID 0x5eed5eed12345678ull
#define DSREC_F_RAW 0x1u          /* keep the input's checksum */
#define DSREC_F_MOVED 0x2u        /* sealed for the next slot */

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fz_setup ();
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const zv_dsrec_phys_t zero;
  fz_in_t in = fz_in (data, size);
  unsigned flags = fz_u8 (&in);
  uint64_t slot = fz_u16 (&in);
  uint64_t txg_delta = fz_u16 (&in), next_delta = fz_u16 (&in);
  zv_dsrec_phys_t rec;
  uint64_t txg, next;
  int r;

  fz_bytes (&in, &rec, sizeof rec);
  txg = rec.dr_creation_txg + txg_delta;
  next = rec.dr_id + next_delta;
  if (!(flags & DSREC_F_RAW) && memcmp (&rec, &zero, sizeof rec) != 0) {
    memset (&rec.dr_cksum, 0, sizeof rec.dr_cksum);
    zv_cksum_compute (&rec, sizeof rec,
                      zv_dsrec_seed (DSREC_GUID, slot
                                     + ((flags & DSREC_F_MOVED) ? 1 : 0)),
                      &rec.dr_cksum);
  }
  r = zv_dsdir_rec_check (&rec, slot, DSREC_GUID, txg, next);
  FZ_CHECK (r == 0 || r == 1 || r == -EIO);
  if (r == 1)
    FZ_CHECK (memcmp (&rec, &zero, sizeof rec) == 0);
  if (r != 0)
    return 0;
  FZ_CHECK (!(flags & DSREC_F_MOVED) || (flags & DSREC_F_RAW));
  if (rec.dr_kind == ZV_DS_KIND_FREE) {
    /* A queued background free (freeq.c): a tree or a dead list, its
     * cursor inside it, no more left than it began with. */
    static const zv_dnode_phys_t zdn;
    bool tree = memcmp (&rec.dr_volume, &zdn, sizeof zdn) != 0;
    bool list = memcmp (&rec.dr_deadlist, &zdn, sizeof zdn) != 0;
    FZ_CHECK (tree != list);
    FZ_CHECK (rec.dr_id != 0 && rec.dr_id < next);
    FZ_CHECK (rec.dr_creation_txg != 0 && rec.dr_creation_txg <= txg);
    FZ_CHECK (rec.dr_prev_snap_txg < rec.dr_creation_txg);
    FZ_CHECK (rec.dr_flags == 0 && rec.dr_guid == 0
              && rec.dr_reservation == 0 && rec.dr_origin_id == 0);
    FZ_CHECK (rec.dr_used <= rec.dr_free_total);
    if (tree) {
      FZ_CHECK (!zv_bp_is_hole (&rec.dr_volume.dn_root)
                && rec.dr_volume.dn_root.bp_birth > rec.dr_prev_snap_txg
                && rec.dr_volume.dn_root.bp_birth <= rec.dr_creation_txg);
      FZ_CHECK (rec.dr_free_cursor < rec.dr_volume.dn_nblocks);
      FZ_CHECK (rec.dr_volume.dn_size == rec.dr_volsize);
    }
    else {
      FZ_CHECK (zv_deadlist_dnode_valid (&rec.dr_deadlist));
      FZ_CHECK (rec.dr_free_cursor
                < rec.dr_deadlist.dn_size / sizeof (zv_deadlist_ent_t));
      FZ_CHECK (rec.dr_parent_id != 0 && rec.dr_parent_id < next);
    }
    return 0;
  }
  FZ_CHECK (rec.dr_free_cursor == 0 && rec.dr_free_total == 0);
  FZ_CHECK (rec.dr_kind == ZV_DS_KIND_VOLUME
            ? (rec.dr_flags & ~ZV_DR_F_RECV_INCOMPLETE) == 0
              && rec.dr_guid == 0 && rec.dr_parent_id == 0
            : rec.dr_kind == ZV_DS_KIND_SNAPSHOT && rec.dr_flags == 0
              && rec.dr_parent_id != 0 && rec.dr_origin_id == 0
              && rec.dr_reservation == 0);
  FZ_CHECK (rec.dr_id != 0 && rec.dr_id < next);
  FZ_CHECK (rec.dr_creation_txg != 0 && rec.dr_creation_txg <= txg);
  FZ_CHECK (memchr (rec.dr_name, '\0', sizeof rec.dr_name) != NULL
            && rec.dr_name[0] != '\0' && rec.dr_name[0] != '-');
  for (const char *c = rec.dr_name; *c; c++)
    FZ_CHECK (*c != '/' && *c != '@' && *c > 0x20 && *c < 0x7f);
  FZ_CHECK (rec.dr_volsize > 0 && rec.dr_volsize % 512 == 0
            && rec.dr_volsize <= (1ull << 50));
  FZ_CHECK (rec.dr_volblocksize >= ZV_MIN_VOLBLOCKSIZE
            && rec.dr_volblocksize <= ZV_MAX_VOLBLOCKSIZE
            && (rec.dr_volblocksize & (rec.dr_volblocksize - 1)) == 0);
  FZ_CHECK (rec.dr_reservation <= rec.dr_volsize);
  FZ_CHECK (rec.dr_volume.dn_size == rec.dr_volsize
            && rec.dr_volume.dn_datablksz == rec.dr_volblocksize
            && rec.dr_volume.dn_nblocks
            == (rec.dr_volsize + rec.dr_volblocksize - 1)
            / rec.dr_volblocksize);
  FZ_CHECK (zv_bp_is_hole (&rec.dr_volume.dn_root)
            || rec.dr_volume.dn_root.bp_birth <= txg);
  /* Snapshots' fields (snap.c): what each kind may hold; the chains are
   * checked against the other records at import (zv_snap_link). */
  if (rec.dr_kind == ZV_DS_KIND_SNAPSHOT) {
    static const zv_zil_header_t zzh;
    FZ_CHECK (rec.dr_parent_id != 0 && rec.dr_parent_id < next
              && rec.dr_parent_id != rec.dr_id && rec.dr_origin_id == 0);
    FZ_CHECK (rec.dr_prev_snap_txg < rec.dr_creation_txg);
    FZ_CHECK (rec.dr_reservation == 0);
    FZ_CHECK (memcmp (&rec.dr_zil, &zzh, sizeof zzh) == 0);
  }
  else
    FZ_CHECK (rec.dr_parent_id == 0 && rec.dr_origin_id < next
              && rec.dr_origin_id != rec.dr_id);
  FZ_CHECK (rec.dr_prev_snap_id < next && rec.dr_prev_snap_id != rec.dr_id);
  FZ_CHECK (rec.dr_prev_snap_txg <= txg);
  FZ_CHECK (rec.dr_written <= rec.dr_volsize);
  FZ_CHECK (zv_deadlist_dnode_valid (&rec.dr_deadlist));
  FZ_CHECK (rec.dr_prev_snap_id == 0 || rec.dr_prev_snap_txg != 0);
  return 0;
}
