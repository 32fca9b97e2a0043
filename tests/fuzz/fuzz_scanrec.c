/*
 * fuzz_scanrec: the scrub's place in the objset (format.h
 * zv_scan_phys_t), as import reads it (scrub.c zv_scrub_phys_check:
 * hostile data).
 *
 * The input is a flags byte and the record's 256 bytes.  Unless the
 * flags say not, the record is resealed for the pool first, so that a
 * changed field reaches the field checks instead of stopping at the
 * checksum.  Checked: nothing returns but 0 (all zero: no scrub), 1 or
 * -EIO; a record that passes is one the scrub may resume (scanning or
 * paused, a phase before the end, no place inside the trees outside
 * their phase, zero reserved fields, examined no more than the total,
 * no more repairs than bad copies) and never passes for another pool;
 * and the record as the sync would write it back from the state it
 * gives passes again, unchanged.
 */
#include <config.h>

#include "fuzz.h"
#include "scrub.h"
#include "check.h"

#define SCAN_GUID 0x5eed5eed12345678ull
#define SCAN_F_RAW 0x1u           /* keep the input's checksum */

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fz_setup ();
  return 0;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static const zv_scan_phys_t zero;
  fz_in_t in = fz_in (data, size);
  unsigned flags = fz_u8 (&in);
  zv_scan_phys_t rec, again;
  int r;

  fz_bytes (&in, &rec, sizeof rec);
  if (!(flags & SCAN_F_RAW) && memcmp (&rec, &zero, sizeof rec) != 0)
    zv_scrub_phys_seal (&rec, SCAN_GUID);
  r = zv_scrub_phys_check (&rec, SCAN_GUID);
  FZ_CHECK (r == 0 || r == 1 || r == -EIO);
  if (r == 0)
    FZ_CHECK (memcmp (&rec, &zero, sizeof rec) == 0);
  if (r != 1)
    return 0;
  FZ_CHECK (rec.sp_magic == ZV_SCAN_MAGIC
            && rec.sp_version == ZV_SCAN_VERSION);
  FZ_CHECK (rec.sp_state == ZV_SCAN_SCANNING
            || rec.sp_state == ZV_SCAN_PAUSED);
  FZ_CHECK (rec.sp_phase < ZV_CHECK_PHASE_DONE);
  FZ_CHECK (rec.sp_phase == ZV_CHECK_PHASE_TREES
            || (rec.sp_ds_id == 0 && rec.sp_off == 0));
  FZ_CHECK (rec.sp_examined <= rec.sp_total);
  FZ_CHECK (rec.sp_repaired + rec.sp_repair_failed
            <= rec.sp_cksum_errors + rec.sp_read_errors);
  FZ_CHECK (zv_scrub_phys_check (&rec, SCAN_GUID + 1) == -EIO);
  again = rec;
  zv_scrub_phys_seal (&again, SCAN_GUID);
  FZ_CHECK (memcmp (&again, &rec, sizeof rec) == 0);
  return 0;
}
