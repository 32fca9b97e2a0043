/*
 * deadlist.c: a dataset's dead list (deadlist.h).
 *
 * Theory.  A dead list only grows between snapshot operations: the txg
 * sync appends the blocks a volume lets go of that a snapshot still holds
 * (snap.c), and a snapshot's destroy or a rollback replaces or frees a
 * list whole.  So the list is a flat object (flat.c: its pointer tree in
 * memory) of which only the tail is ever rewritten, and its entries are
 * in memory only from the first block a sync has yet to write: appends
 * of one txg, plus the partial block they continue (read from disk at the
 * first append after import).  A destroy reads the whole list once, block
 * by block.  So a list costs its pointers (64 bytes per 512 entries) and
 * at most one block while nobody destroys anything, whatever its length.
 *
 * The object grows in three shapes (1 block, F, F^2 blocks: 512, 130,560
 * and 33,292,800 entries), reshaped when an append needs room: the data
 * blocks stay, the levels above are rebuilt.  An empty list has no
 * object: its descriptor is all zero.
 *
 * Entries are hostile data when read back: each is checked (level, size,
 * copies, birth, padding, and that its space is allocated: a snapshot
 * still holds it) before a destroy frees anything it names.
 *
 * Locking: none; the sync thread (or import, before the sync starts)
 * owns every list.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "deadlist.h"
#include "alloc.h"
#include "dmu.h"
#include "mem.h"

#define F ((uint64_t) ZV_INDIRECT_FANOUT)
#define PER ((uint64_t) ZV_DEADLIST_PER_BLK)

void
zv_deadlist_init (zv_deadlist_t *dl, zv_spa_t *spa)
{
  memset (dl, 0, sizeof *dl);
  dl->dl_spa = spa;
  dl->dl_tail_known = true;           /* nothing on disk */
}

void
zv_deadlist_fini (zv_deadlist_t *dl)
{
  if (dl->dl_has_obj)
    zv_flat_fini (&dl->dl_fl);
  free (dl->dl_mem);
  zv_deadlist_init (dl, dl->dl_spa);
}

/* The shapes an object takes: the smallest that holds nblocks. */
static uint64_t
deadlist_shape (uint64_t nblocks)
{
  return nblocks <= 1 ? 1 : nblocks <= F ? F : F * F;
}

bool
zv_deadlist_dnode_valid (const zv_dnode_phys_t *dn)
{
  static const zv_dnode_phys_t zero;

  if (memcmp (dn, &zero, sizeof zero) == 0)
    return true;
  return dn->dn_type == ZV_BT_DEADLIST
    && dn->dn_datablksz == ZV_DEADLIST_BLKSZ
    && dn->dn_nblocks == deadlist_shape (dn->dn_nblocks)
    && dn->dn_nlevels == zv_dmu_nlevels (dn->dn_nblocks)
    && dn->dn_size % sizeof (zv_deadlist_ent_t) == 0
    && dn->dn_size > 0
    && dn->dn_size <= dn->dn_nblocks * (uint64_t) ZV_DEADLIST_BLKSZ;
}

int
zv_deadlist_load (zv_deadlist_t *dl, zv_spa_t *spa,
                  const zv_dnode_phys_t *dn, uint64_t bytes,
                  const char *what)
{
  static const zv_dnode_phys_t zero;
  int r;

  zv_deadlist_init (dl, spa);
  if (memcmp (dn, &zero, sizeof zero) == 0) {
    if (bytes != 0) {
      zv_error ("%s: dead list empty but %" PRIu64 " bytes", what, bytes);
      return -EIO;
    }
    return 0;
  }
  if (!zv_deadlist_dnode_valid (dn)) {
    zv_error ("%s: dead list descriptor is invalid", what);
    return -EIO;
  }
  zv_flat_init (&dl->dl_fl, spa, ZV_OBJ_DEADLIST, ZV_BT_DEADLIST,
                ZV_DEADLIST_BLKSZ, dn->dn_nblocks);
  dl->dl_has_obj = true;
  r = zv_flat_load (&dl->dl_fl, dn, NULL, NULL);
  if (r < 0) {
    zv_error ("%s: dead list does not load", what);
    zv_deadlist_fini (dl);
    return r;
  }
  dl->dl_n = dn->dn_size / sizeof (zv_deadlist_ent_t);
  dl->dl_bytes = bytes;
  dl->dl_mem_first = dl->dl_n - dl->dl_n % PER;
  dl->dl_tail_known = dl->dl_n % PER == 0;
  return 0;
}

/* An entry read back, or given: what the sync writes (its fields). */
static bool
deadlist_ent_shape (const zv_deadlist_ent_t *e)
{
  /* A data block: its size on disk, whole sectors (a compressed one's
   * is no power of two). */
  bool sz = e->de_level == 0
    ? e->de_psize >= ZV_MIN_VOLBLOCKSIZE && e->de_psize <= ZV_MAX_BLKSZ
      && e->de_psize % ZV_SECTOR == 0
    : e->de_level < ZV_MAX_LEVELS && e->de_psize == ZV_INDIRECT_SIZE;

  return sz && e->de_ncopies >= 1 && e->de_ncopies <= 2 && e->de_birth != 0
    && e->de_pad[0] == 0 && e->de_pad[1] == 0
    && (e->de_ncopies == 2 || e->de_dva[1] == 0);
}

/* The same, naming allocated space. */
static bool
deadlist_ent_valid (zv_spa_t *spa, const zv_deadlist_ent_t *e)
{
  if (!deadlist_ent_shape (e))
    return false;
  for (unsigned c = 0; c < e->de_ncopies; c++)
    if (!zv_alloc_is_allocated (spa->spa_alloc, e->de_dva[c], e->de_psize))
      return false;
  return true;
}

/* Read block b of the list into buf (its entries [b*PER, ...)). */
static int
deadlist_read (zv_deadlist_t *dl, uint64_t b, void *buf, const char *what)
{
  const zv_blkptr_t *bp = &dl->dl_fl.fl_bps[0][b];
  char w[128];

  snprintf (w, sizeof w, "%s: dead list block %" PRIu64, what, b);
  if (zv_bp_is_hole (bp) || bp->bp_type != ZV_BT_DEADLIST
      || bp->bp_psize != ZV_DEADLIST_BLKSZ) {
    zv_error ("%s: a hole, or not a dead-list block", w);
    return -EIO;
  }
  return zv_zio_read (dl->dl_spa, bp, buf, w);
}

/* Make the partial last block's entries known (first append after
 * import). */
static int
deadlist_tail (zv_deadlist_t *dl)
{
  uint64_t b = dl->dl_n / PER, n = dl->dl_n % PER;
  void *buf;
  int r;

  if (dl->dl_tail_known)
    return 0;
  buf = zv_buf_alloc (ZV_DEADLIST_BLKSZ);
  r = deadlist_read (dl, b, buf, "appending");
  if (r == 0) {
    ZV_GROW (dl->dl_mem, 0, dl->dl_mem_cap, PER);
    memcpy (dl->dl_mem, buf, n * sizeof (zv_deadlist_ent_t));
    dl->dl_mem_first = b * PER;
    dl->dl_tail_known = true;
  }
  zv_buf_free (buf);
  return r;
}

int
zv_deadlist_append_ent (zv_deadlist_t *dl, const zv_deadlist_ent_t *e,
                        uint64_t txg)
{
  uint64_t nb;
  size_t k;
  int r;

  if (dl->dl_n >= ZV_DEADLIST_MAX_ENTS) {
    zv_error ("a dead list holds the most entries it can (%" PRIu64 "): "
              "destroy a snapshot", ZV_DEADLIST_MAX_ENTS);
    return -EFBIG;
  }
  if ((r = deadlist_tail (dl)) < 0)
    return r;
  nb = dl->dl_n / PER + 1;
  if (!dl->dl_has_obj) {
    zv_flat_init (&dl->dl_fl, dl->dl_spa, ZV_OBJ_DEADLIST, ZV_BT_DEADLIST,
                  ZV_DEADLIST_BLKSZ, 1);
    dl->dl_has_obj = true;
  }
  else if (nb > dl->dl_fl.fl_nblocks)
    zv_flat_reshape (&dl->dl_fl, deadlist_shape (nb), txg);
  k = (size_t) (dl->dl_n - dl->dl_mem_first);
  ZV_GROW (dl->dl_mem, k, dl->dl_mem_cap, PER);
  dl->dl_mem[k] = *e;
  dl->dl_n++;
  if (e->de_level == 0)
    dl->dl_bytes += e->de_psize;
  zv_flat_dirty (&dl->dl_fl, nb - 1);
  return 0;
}

int
zv_deadlist_append (zv_deadlist_t *dl, const zv_blkptr_t *bp, uint64_t txg)
{
  zv_deadlist_ent_t e;

  memset (&e, 0, sizeof e);
  e.de_dva[0] = bp->bp_dva[0];
  if (bp->bp_ncopies > 1)
    e.de_dva[1] = bp->bp_dva[1];
  e.de_psize = bp->bp_psize;
  e.de_ncopies = bp->bp_ncopies;
  e.de_level = bp->bp_level;
  e.de_birth = bp->bp_birth;
  return zv_deadlist_append_ent (dl, &e, txg);
}

int
zv_deadlist_iterate (zv_deadlist_t *dl, const char *what, zv_deadlist_fn fn,
                     void *arg)
{
  zv_deadlist_ent_t *buf = NULL;
  uint64_t nbytes = 0;
  int r = 0;

  for (uint64_t i = 0; i < dl->dl_n && r == 0; i++) {
    const zv_deadlist_ent_t *e;

    /* (Without the tail known, nothing is in memory.) */
    if (i >= dl->dl_mem_first && dl->dl_tail_known)
      e = &dl->dl_mem[i - dl->dl_mem_first];
    else {
      if (i % PER == 0 || buf == NULL) {
        if (buf == NULL)
          buf = zv_buf_alloc (ZV_DEADLIST_BLKSZ);
        if ((r = deadlist_read (dl, i / PER, buf, what)) < 0)
          break;
      }
      e = &buf[i % PER];
    }
    if (!deadlist_ent_valid (dl->dl_spa, e)) {
      zv_error ("%s: dead list entry %" PRIu64 " is invalid (its size, "
                "copies or birth, or it names free space)", what, i);
      r = -EIO;
      break;
    }
    if (e->de_level == 0)
      nbytes += e->de_psize;
    r = fn (arg, e);
  }
  if (r == 0 && nbytes != dl->dl_bytes) {
    zv_error ("%s: dead list holds %" PRIu64 " data bytes, its record "
              "says %" PRIu64, what, nbytes, dl->dl_bytes);
    r = -EIO;
  }
  if (buf)
    zv_buf_free (buf);
  return r;
}

int
zv_deadlist_iterate_from (zv_deadlist_t *dl, const char *what,
                          uint64_t from, zv_deadlist_fn fn, void *arg,
                          uint64_t *next)
{
  zv_deadlist_ent_t *buf = NULL;
  uint64_t i, loaded = UINT64_MAX;
  int r = 0;

  for (i = from; i < dl->dl_n; i++) {
    const zv_deadlist_ent_t *e;

    if (i >= dl->dl_mem_first && dl->dl_tail_known)
      e = &dl->dl_mem[i - dl->dl_mem_first];
    else {
      if (loaded != i / PER) {
        if (buf == NULL)
          buf = zv_buf_alloc (ZV_DEADLIST_BLKSZ);
        if ((r = deadlist_read (dl, i / PER, buf, what)) < 0)
          break;
        loaded = i / PER;
      }
      e = &buf[i % PER];
    }
    if (!deadlist_ent_shape (e)) {
      zv_error ("%s: dead list entry %" PRIu64 " is invalid (its size, "
                "copies or birth)", what, i);
      r = -EIO;
      break;
    }
    r = fn (arg, e);
    if (r != 0)
      break;
  }
  *next = i;
  if (buf)
    zv_buf_free (buf);
  return r < 0 ? r : 0;
}

/* Flat fill: the entries of block blkid, all in memory (dirty). */
static void
deadlist_fill (void *arg, uint64_t blkid, void *buf)
{
  zv_deadlist_t *dl = arg;
  uint64_t first = blkid * PER;
  uint64_t n = ZV_MIN (PER, dl->dl_n - first);

  ZV_VERIFY3U (first, >=, dl->dl_mem_first);
  memcpy (buf, &dl->dl_mem[first - dl->dl_mem_first],
          n * sizeof (zv_deadlist_ent_t));
}

int
zv_deadlist_sync (zv_deadlist_t *dl, uint64_t txg)
{
  uint64_t keep_first;
  int r;

  if (!dl->dl_has_obj || dl->dl_fl.fl_ndirty == 0)
    return 0;
  dl->dl_fl.fl_size = dl->dl_n * sizeof (zv_deadlist_ent_t);
  r = zv_flat_sync (&dl->dl_fl, txg, deadlist_fill, dl);
  if (r < 0)
    return r;
  /* Keep only the partial last block's entries. */
  keep_first = dl->dl_n - dl->dl_n % PER;
  memmove (dl->dl_mem, &dl->dl_mem[keep_first - dl->dl_mem_first],
           (dl->dl_n - keep_first) * sizeof (zv_deadlist_ent_t));
  dl->dl_mem_first = keep_first;
  return 0;
}

void
zv_deadlist_free_obj (zv_deadlist_t *dl, uint64_t txg)
{
  if (dl->dl_has_obj)
    zv_flat_free_all (&dl->dl_fl, txg);
  zv_deadlist_fini (dl);
}

void
zv_deadlist_move (zv_deadlist_t *dst, zv_deadlist_t *src)
{
  ZV_VERIFY (!dst->dl_has_obj && dst->dl_n == 0);
  free (dst->dl_mem);
  *dst = *src;
  zv_deadlist_init (src, dst->dl_spa);
}

void
zv_deadlist_phys (const zv_deadlist_t *dl, zv_dnode_phys_t *dn)
{
  if (!dl->dl_has_obj || dl->dl_n == 0)
    memset (dn, 0, sizeof *dn);
  else
    zv_flat_phys (&dl->dl_fl, dn);
}

zv_flat_t *
zv_deadlist_flat (zv_deadlist_t *dl)
{
  return dl->dl_has_obj ? &dl->dl_fl : NULL;
}
