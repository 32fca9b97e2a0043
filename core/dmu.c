/*
 * dmu.c: objects as trees of block pointers, through the buffer cache.
 *
 * Theory.  An object of nblocks data blocks (L0, ob_blksz bytes each) has
 * nlevels levels: level 0 holds data, levels 1..nlevels-1 hold indirect
 * blocks of ZV_INDIRECT_FANOUT pointers, and the single block of the top
 * level is pointed at by ob_root (with nlevels == 1, ob_root points at the
 * only data block).  Indirect block i of level l covers data blocks
 * [i * F^l, (i + 1) * F^l), and its parent is block i / F of level l + 1,
 * slot i % F.
 *
 * Open context (writers, under a txg hold) only ever dirties data blocks:
 * the first change of a block in txg T creates a dirty record that owns a
 * whole buffer of the block, pins the dbuf (a hold) and pushes the record
 * on the object's lock-free list for T (ob_dirty[T & ZV_TXG_MASK]; a
 * Treiber stack push, so no lock is shared between writers).  That buffer
 * is the cache's own when no record of an earlier txg is pending and the
 * content is cached (the dbuf is uncached until the sync of T hands the
 * written buffer back: docs/design.md, "Choices"); otherwise a write of
 * the whole block gets a fresh buffer, a partial one a copy of the
 * earlier record's data (that record may be syncing and must not change
 * under the sync), or zeros over a hole.  A free's record has no buffer.
 * A partial write never waits for a read of the old content when it is
 * aligned on ZV_DR_GRAIN (512 B): over an uncached block its record is
 * partial, a buffer holding only the grains written (dr_valid), and the
 * sync merges it with the content under it before placing anything
 * (dmu_sync_merge: the cache's copy, or the old blocks read in one
 * batch).  A record behind a partial one copies its data and mask: the
 * later mask covers the earlier, so outside it both sit over the same
 * content, whichever of the two versions of the block is on disk.  A
 * write that is not grain-aligned, and the intent log's in-place write,
 * merge at once (a synchronous read).  Reads see the newest dirty
 * record, else the synced content, else read the block through the tree
 * and cache it; a read holds each block of a window once, copies what
 * is there, then reads the uncached ones in one batch (dmu_read_window);
 * a partial record is overlaid on the synced content,
 * which is read and cached for it (safe while records are pending: the
 * sync that retires one replaces the cached content, under db_mtx).
 *
 * The changes themselves (records, reservations, the seal, direct
 * writes, frees, zeroes) are dmu_write.c; syncing context (the txg sync
 * thread) is dmu_sync.c, the walk of an on-disk tree dmu_walk.c: see
 * their theory comments.
 *
 * Locking.  db_mtx of a data block is held across its read-modify-write
 * and any read that fills it.  Indirect blocks are only modified by the
 * sync thread, under their db_mtx; loading a missing indirect block holds
 * its db_mtx and then its parent's (child before parent, ob_mtx last),
 * so a pointer is read and followed while the sync cannot change it.  The
 * sync never holds two of these at once, and it keeps a hold on every
 * indirect block it changed until the parent records its new pointer, so
 * an evicted indirect block is always reloaded from the current pointer.
 * A write's space reservation is taken before it locks any block (all
 * of it at once: dmu_prepay), or, when its count raced a change of the
 * same block, under the block's db_mtx; ob_held_fn takes only a lock of
 * its own, held for nothing else (dsdir.c's dd_resv_lock).
 *
 * Trust.  Import checks the volume's root and nothing below it (import.c).
 * An indirect block of the imported tree (born at or before the txg
 * imported, spa_own_txg) is checked when it is first read from disk:
 * its header, then every child's fields (dmu_check_child, the same
 * checks as the walk's) and the child's space in the pool's owner map
 * (alloc.h): allocated at import and owned by nothing else.  A block
 * that fails is refused (EIO, with a message naming the entry) and
 * remembered (ob_refused): reads under it fail, and so do writes, trims
 * and zeroes once it is known (zv_dmu_check_path: open context reads
 * nothing for it); a change that reaches the sync under a block never
 * read before fails that sync (the pool suspends, saying which block).
 * Either way nothing under a refused block is read or freed.  Blocks
 * born since import are the engine's own.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <inttypes.h>

#include "dmu_impl.h"
#include "compress.h"
#include "tunable.h"


/* See dmu_impl.h. */
const uint8_t zv_dmu_zeros[ZV_MAX_BLKSZ]
  __attribute__ ((aligned (ZV_SECTOR)));

/* F^l (l <= ZV_MAX_LEVELS; saturates long before overflow matters). */
static uint64_t
dmu_span (unsigned l)
{
  uint64_t s = 1;
  while (l-- > 0) {
    if (s > UINT64_MAX / F)
      return UINT64_MAX;
    s *= F;
  }
  return s;
}

/* Levels needed so that the top level is a single block. */
unsigned
zv_dmu_nlevels (uint64_t nblocks)
{
  unsigned n = 1;

  while (dmu_span (n - 1) < nblocks)
    n++;
  return n;
}

/* See dmu.h.  Level l has ceil(nblocks / F^l) blocks over an aligned
 * run, one more over a run that straddles, never more than the level
 * has.  A thick volume's run is the whole object, so exact. */
uint64_t
zv_dmu_tree_bytes (uint64_t nblocks, uint64_t total)
{
  unsigned nlevels = zv_dmu_nlevels (total);
  uint64_t n = 0;

  if (nblocks == 0)
    return 0;
  for (unsigned l = 1; l < nlevels; l++) {
    uint64_t span = dmu_span (l);
    uint64_t all = total / span + (total % span != 0);

    n += ZV_MIN (nblocks / span + (nblocks % span != 0) + 1, all);
  }
  return n * ZV_INDIRECT_SIZE * ZV_DMU_IND_COPIES;
}

/* Shape check of a dnode from disk. */
int
zv_dmu_check_dnode (const zv_dnode_phys_t *dn, uint8_t type, const char *what)
{
  if (dn->dn_type != type) {
    zv_error ("%s: object type %u, expected %u", what, dn->dn_type, type);
    return -EIO;
  }
  if (dn->dn_datablksz < ZV_SECTOR || dn->dn_datablksz > ZV_MAX_BLKSZ
      || (dn->dn_datablksz & (dn->dn_datablksz - 1)) != 0) {
    zv_error ("%s: invalid block size %" PRIu32, what, dn->dn_datablksz);
    return -EIO;
  }
  if (dn->dn_nlevels < 1 || dn->dn_nlevels > ZV_MAX_LEVELS
      || dmu_span (dn->dn_nlevels - 1) < dn->dn_nblocks
      || dn->dn_nblocks > (1ull << 48)) {
    zv_error ("%s: invalid tree shape (%u levels, %" PRIu64 " blocks)",
              what, dn->dn_nlevels, dn->dn_nblocks);
    return -EIO;
  }
  if (!zv_bp_is_hole (&dn->dn_root)
      && dn->dn_root.bp_level != dn->dn_nlevels - 1) {
    zv_error ("%s: root pointer level %u, expected %u", what,
              dn->dn_root.bp_level, dn->dn_nlevels - 1);
    return -EIO;
  }
  return 0;
}

/* Set up a handle from its descriptor. */
int
zv_dmu_object_open (zv_object_t *ob, zv_spa_t *spa, zv_dbuf_cache_t *cache,
                    uint64_t id, const zv_dnode_phys_t *dn)
{
  memset (ob, 0, sizeof *ob);
  ob->ob_spa = spa;
  ob->ob_cache = cache;
  ob->ob_id = id;
  ob->ob_type = dn->dn_type;
  ob->ob_nlevels = dn->dn_nlevels;
  ob->ob_blksz = dn->dn_datablksz;
  ob->ob_nblocks = dn->dn_nblocks;
  ob->ob_root = dn->dn_root;
  pthread_mutex_init (&ob->ob_mtx, NULL);
  pthread_mutex_init (&ob->ob_refused_mtx, NULL);
  return 0;
}

void
zv_dmu_object_set_held (zv_object_t *ob, zv_dmu_held_fn fn, void *arg)
{
  ob->ob_held_fn = fn;
  ob->ob_held_arg = arg;
}

void
zv_dmu_object_set_kill (zv_object_t *ob, zv_dmu_kill_fn fn, void *arg)
{
  ob->ob_kill_fn = fn;
  ob->ob_kill_arg = arg;
}

/*
 * The sync lets go of bp (overwritten, freed, or a tree block rewritten):
 * freed, unless a snapshot still holds it (the birth rule).  Only a block
 * born in txg itself is freed at once (zv_zio_free_bp).
 */
int
zv_dmu_kill (zv_object_t *ob, const zv_blkptr_t *bp, uint64_t txg)
{
  if (zv_bp_is_hole (bp))
    return 0;
  if (bp->bp_level == 0 && bp->bp_birth > ob->ob_snap_txg) {
    ob->ob_written -= ZV_MIN (ob->ob_written, (uint64_t) bp->bp_psize);
    ob->ob_lwritten -= ZV_MIN (ob->ob_lwritten, (uint64_t) bp->bp_lsize);
  }
  if (bp->bp_birth > ob->ob_snap_txg || ob->ob_kill_fn == NULL)
    zv_zio_free_bp (ob->ob_spa, bp, txg);
  else
    return ob->ob_kill_fn (ob->ob_kill_arg, bp, txg);
  return 0;
}

/* Dirty records come from a cache of freed ones (zv_rcache): a writer
 * makes one per block it dirties and the txg sync frees them all, on
 * another thread, every txg.  16 MiB is about 100,000 records, the
 * blocks of a couple of txgs of 16 KiB writes. */
#define DMU_DR_CACHE_MAX (16ull << 20)
static zv_rcache_t *dmu_dr_cache;
static pthread_once_t dmu_dr_cache_once = PTHREAD_ONCE_INIT;

static void
dmu_dr_cache_init (void)
{
  dmu_dr_cache = zv_rcache_create (sizeof (zv_dirty_t), DMU_DR_CACHE_MAX);
}

zv_dirty_t *
zv_dmu_dr_alloc (void)
{
  ZV_VERIFY (pthread_once (&dmu_dr_cache_once, dmu_dr_cache_init) == 0);
  return zv_rcache_alloc (dmu_dr_cache);
}

void
zv_dmu_dr_free (zv_dirty_t *dr)
{
  ZV_ASSERT (dr != NULL);
  /* (a sync that failed before it reached the record's direct write) */
  zv_zio_pending_rele (dr->dr_pending);
  zv_rcache_free (dmu_dr_cache, dr);
}

/*
 * zv_zio_place_bp with the birth rule: old is killed here unless it is
 * rewritten in place (born in txg: never a snapshot's).
 */
int
zv_dmu_place (zv_object_t *ob, const zv_blkptr_t *old, zv_blkptr_t *bp,
           bool hole, uint32_t size, unsigned level, uint8_t type,
           uint64_t fill, unsigned copies, uint64_t txg)
{
  zv_blkptr_t none;
  int r;

  if (!zv_bp_is_hole (old) && old->bp_birth != txg) {
    if ((r = zv_dmu_kill (ob, old, txg)) < 0)
      return r;
    memset (&none, 0, sizeof none);
    old = &none;
  }
  else if (!zv_bp_is_hole (old) && level == 0) {
    /* Born in txg: a hole, or placed again at another size
     * (compressed differently), replaces what it counted. */
    if (hole || old->bp_psize != size) {
      ob->ob_written -= ZV_MIN (ob->ob_written, (uint64_t) old->bp_psize);
      ob->ob_lwritten -= ZV_MIN (ob->ob_lwritten, (uint64_t) old->bp_lsize);
    }
  }
  bool anew = zv_bp_is_hole (old) || old->bp_psize != size;
  r = zv_zio_place_bp (ob->ob_spa, old, bp, hole, size, level, type, fill,
                       copies, txg);
  /* A data block placed anew (not again in place) is written data. */
  if (r == 0 && level == 0 && !hole && anew) {
    ob->ob_written += size;
    ob->ob_lwritten += ob->ob_blksz;
  }
  return r;
}

uint64_t
zv_dmu_object_reserved (zv_object_t *ob)
{
  uint64_t n = 0;

  for (unsigned t = 0; t < ZV_TXG_SIZE; t++)
    n += atomic_load_explicit (&ob->ob_reserved[t], memory_order_relaxed);
  return n;
}

/* Throw away every dirty record (a suspended pool, a failed open, a
 * failed receive's volume destroyed): the changes were never acknowledged
 * as durable.  A block written for a record (directly, or in place by the
 * log) is freed with the record's txg, as an unoverride frees it: no tree
 * will own it. */
void
zv_dmu_object_discard_dirty (zv_object_t *ob)
{
  for (unsigned t = 0; t < ZV_TXG_SIZE; t++) {
    zv_dirty_t *dr = atomic_exchange_explicit (&ob->ob_dirty[t], NULL,
                                               memory_order_seq_cst);
    atomic_store_explicit (&ob->ob_reserved[t], 0, memory_order_seq_cst);
    while (dr) {
      zv_dirty_t *next = dr->dr_next;
      zv_dbuf_t *db = dr->dr_dbuf;
      pthread_mutex_lock (&db->db_mtx);
      db->db_dirty[t] = NULL;
      zv_dmu_unoverride (ob, dr);
      pthread_mutex_unlock (&db->db_mtx);
      zv_dbuf_rele (ob->ob_cache, db);
      zv_buf_free (dr->dr_data);
      zv_dmu_dr_free (dr);
      dr = next;
    }
  }
}

/* Drop cached blocks; nothing may be dirty. */
void
zv_dmu_object_close (zv_object_t *ob)
{
  for (unsigned t = 0; t < ZV_TXG_SIZE; t++)
    ZV_VERIFY (atomic_load_explicit (&ob->ob_dirty[t],
                                     memory_order_seq_cst) == NULL);
  zv_dbuf_evict_object (ob->ob_cache, ob);
  pthread_mutex_destroy (&ob->ob_mtx);
  pthread_mutex_destroy (&ob->ob_refused_mtx);
  free (ob->ob_refused);
  ob->ob_refused = NULL;
}

/* Descriptor as of the last sync. */
void
zv_dmu_object_phys (zv_object_t *ob, zv_dnode_phys_t *dn)
{
  memset (dn, 0, sizeof *dn);
  dn->dn_type = ob->ob_type;
  dn->dn_nlevels = ob->ob_nlevels;
  dn->dn_datablksz = ob->ob_blksz;
  dn->dn_nblocks = ob->ob_nblocks;
  dn->dn_size = ob->ob_nblocks * ob->ob_blksz;
  pthread_mutex_lock (&ob->ob_mtx);
  dn->dn_root = ob->ob_root;
  pthread_mutex_unlock (&ob->ob_mtx);
}

/*
 * Check an indirect block's header read from disk through bp.  Every
 * writer (dmu_sync_indirects, flat_build_indirect) stamps the header with
 * the txg it places the block in, which is the birth of the pointer it
 * then makes, so the two are equal in any block this format writes.
 */
static int
dmu_check_indirect (const void *buf, const zv_blkptr_t *bp, uint64_t obj,
                    unsigned level, uint64_t blkid, const char *what)
{
  const zv_mblk_hdr_t *h = buf;

  if (h->mh_magic != ZV_MBLK_MAGIC || h->mh_version != ZV_FORMAT_VERSION
      || h->mh_type != ZV_BT_INDIRECT || h->mh_object != obj
      || h->mh_level != level || h->mh_blkid != blkid) {
    zv_error ("%s: indirect block header does not match (object %" PRIu64
              " level %u block %" PRIu64 ")", what, obj, level, blkid);
    return -EIO;
  }
  if (h->mh_txg != bp->bp_birth) {
    zv_error ("%s: indirect block header txg %" PRIu64 " is not its "
              "pointer's birth txg %" PRIu64, what, h->mh_txg, bp->bp_birth);
    return -EIO;
  }
  return 0;
}

/* A fresh, empty indirect block. */
static void *
dmu_new_indirect (zv_object_t *ob, unsigned level, uint64_t idx)
{
  void *data = zv_buf_alloc (ZV_INDIRECT_SIZE);
  zv_mblk_hdr_t *h = data;

  h->mh_magic = ZV_MBLK_MAGIC;
  h->mh_version = ZV_FORMAT_VERSION;
  h->mh_type = ZV_BT_INDIRECT;
  h->mh_object = ob->ob_id;
  h->mh_level = level;
  h->mh_blkid = idx;
  return data;
}

/*
 * The fields of a pointer from disk, against its parent (born in txg
 * pbirth; UINT64_MAX for a root, which the pool checks against the
 * objset).  A parent is rewritten in every txg a child changes, so no
 * child is younger than its parent; fill counts the data blocks below (1
 * for a data block), so it is at least 1 and at most what the level
 * spans; and every copy lies inside a device's data area.
 */
static int
dmu_check_child (zv_spa_t *spa, const zv_blkptr_t *bp, unsigned level,
                 uint64_t pbirth, const char *what)
{
  if (bp->bp_birth == 0 || bp->bp_birth > pbirth) {
    if (what)
      zv_error ("%s: pointer born in txg %" PRIu64 ", after its parent "
                "(txg %" PRIu64 ")", what, bp->bp_birth, pbirth);
    return -EIO;
  }
  if (level == 0 ? bp->bp_fill != 1
      : bp->bp_fill == 0 || bp->bp_fill > dmu_span (level)) {
    if (what)
      zv_error ("%s: pointer fill %" PRIu64 " is impossible at level %u",
                what, bp->bp_fill, level);
    return -EIO;
  }
  return zv_zio_bp_check (spa, bp, what);
}

/*
 * An indirect block of the imported tree, loaded for the first time
 * since import (import no longer walks the tree: docs/design.md, "What
 * import trusts"): each child must be what the format's writers store
 * (shape, birth, fill, inside the pool) and take space that was
 * allocated at import and that nothing else owns (alloc.h, the pool's
 * owners).  A child that fails refuses the whole block: every read,
 * write and trim under it fails with EIO and this message, and nothing
 * under it is ever freed, so a pointer into free space or at another
 * block's space can neither return the wrong bytes nor free space twice.
 * Blocks born after the import are the engine's own (their children are
 * checked or new), and so is a block checked once already (loaded
 * again after eviction).
 */
static int
dmu_check_children (zv_object_t *ob, const zv_blkptr_t *bp, unsigned level,
                    uint64_t idx, const void *data, const char *what)
{
  zv_spa_t *spa = ob->ob_spa;
  const zv_blkptr_t *e = zv_dmu_ind_entries ((void *) data);
  zv_alloc_ext_t ext[2 * ZV_INDIRECT_FANOUT];
  uint64_t from[2 * ZV_INDIRECT_FANOUT];
  uint32_t size = level > 1 ? ZV_INDIRECT_SIZE : ob->ob_blksz;
  size_t n = 0, bad;
  char cwhat[128];
  int r;

  if (bp->bp_birth > spa->spa_own_txg)
    return 0;
  for (uint64_t i = 0; i < F; i++) {
    if (zv_bp_is_hole (&e[i]))
      continue;
    if (e[i].bp_level != level - 1 || !zv_bp_size_is (&e[i], size)
        || e[i].bp_ncopies < 1 || e[i].bp_ncopies > 2
        || dmu_check_child (spa, &e[i], level - 1, bp->bp_birth, NULL) < 0) {
      /* (Named only now: a name per entry would cost more than the
       * checks.) */
      snprintf (cwhat, sizeof cwhat, "%s, entry %" PRIu64 " (level %u "
                "block %" PRIu64 ")", what, i, level - 1, idx * F + i);
      if (e[i].bp_level != level - 1 || !zv_bp_size_is (&e[i], size)
          || e[i].bp_ncopies < 1 || e[i].bp_ncopies > 2)
        zv_error ("%s: pointer level %u size %" PRIu32 "/%" PRIu32 ", %u "
                  "copies, expected level %u size %" PRIu32, cwhat,
                  e[i].bp_level, e[i].bp_psize, e[i].bp_lsize,
                  e[i].bp_ncopies, level - 1, size);
      else
        (void) dmu_check_child (spa, &e[i], level - 1, bp->bp_birth, cwhat);
      return -EIO;
    }
    /* A child a snapshot holds is the snapshot's to own (each dataset
     * owns what was born after its ob_snap_txg: snap.c). */
    if (e[i].bp_birth <= ob->ob_snap_txg)
      continue;
    for (unsigned c = 0; c < e[i].bp_ncopies; c++) {
      ext[n] = (zv_alloc_ext_t) { e[i].bp_dva[c], e[i].bp_psize };
      from[n++] = i;
    }
  }
  r = zv_alloc_own_children (spa->spa_alloc, bp->bp_dva[0], ext, n, &bad);
  if (r == 0)
    return 0;
  zv_error ("%s: entry %" PRIu64 " (level %u block %" PRIu64 ", device %u "
            "offset %" PRIu64 ") %s; the block is refused, what it covers "
            "reads and writes as an I/O error", what, from[bad], level - 1,
            idx * F + from[bad], ZV_DVA_VDEV (ext[bad].ae_dva),
            ZV_DVA_OFFSET (ext[bad].ae_dva),
            r == -ENOENT ? "points at free space"
            : r == -EEXIST ? "shares its space with another block"
            : "is not an extent of the pool");
  return -EIO;
}

/* Remember an indirect block whose checks failed (dmu_read_bp). */
static void
dmu_refuse (zv_object_t *ob, unsigned level, uint64_t idx)
{
  uint64_t key = (uint64_t) level << 56 | idx;
  size_t n;

  pthread_mutex_lock (&ob->ob_refused_mtx);
  n = atomic_load_explicit (&ob->ob_nrefused, memory_order_relaxed);
  for (size_t i = 0; i < n; i++)
    if (ob->ob_refused[i] == key) {
      pthread_mutex_unlock (&ob->ob_refused_mtx);
      return;
    }
  ZV_GROW (ob->ob_refused, n, ob->ob_refused_cap, 8);
  ob->ob_refused[n] = key;
  atomic_store_explicit (&ob->ob_nrefused, n + 1, memory_order_release);
  pthread_mutex_unlock (&ob->ob_refused_mtx);
}

/* Read a block the tree points at into a new buffer (or NULL: hole). */
static int
dmu_read_bp (zv_object_t *ob, const zv_blkptr_t *bp, unsigned level,
             uint64_t idx, void **datap)
{
  char what[96];
  uint32_t size = level ? ZV_INDIRECT_SIZE : ob->ob_blksz;
  void *data;
  int r;

  *datap = NULL;
  if (zv_bp_is_hole (bp))
    return 0;
  snprintf (what, sizeof what, "object %" PRIu64 " level %u block %" PRIu64,
            ob->ob_id, level, idx);
  if (!zv_bp_size_is (bp, size) || bp->bp_level != level) {
    zv_error ("%s: pointer has size %" PRIu32 "/%" PRIu32 " level %u, "
              "expected %" PRIu32 " level %u", what, bp->bp_psize,
              bp->bp_lsize, bp->bp_level, size, level);
    return -EIO;
  }
  data = zv_buf_get (size);
  r = zv_zio_read (ob->ob_spa, bp, data, what);
  if (r == 0 && level > 0) {
    /* Read and verified, but not what this format writes: refused for
     * good (a read error may pass, and is not remembered). */
    r = dmu_check_indirect (data, bp, ob->ob_id, level, idx, what);
    if (r == 0)
      r = dmu_check_children (ob, bp, level, idx, data, what);
    if (r < 0)
      dmu_refuse (ob, level, idx);
  }
  if (r < 0) {
    zv_buf_put (data, size);
    return r;
  }
  *datap = data;
  return 0;
}

/*
 * Hold indirect block idx of 'level', loaded.  Its parent's lock is held
 * while the pointer is read and followed (see the theory comment).
 */
int
zv_dmu_hold_indirect (zv_object_t *ob, unsigned level, uint64_t idx,
                   zv_dbuf_t **dbp)
{
  zv_dbuf_t *db = zv_dbuf_hold (ob->ob_cache, ob, level, idx,
                                ZV_INDIRECT_SIZE);
  zv_dbuf_t *pdb = NULL;
  zv_blkptr_t bp;
  void *data;
  int r;

  ZV_ASSERT (level >= 1 && level < ob->ob_nlevels);
  pthread_mutex_lock (&db->db_mtx);
  if (db->db_state == ZV_DB_CACHED) {
    pthread_mutex_unlock (&db->db_mtx);
    zv_dbuf_count (ob->ob_cache, true);
    *dbp = db;
    return 0;
  }
  zv_dbuf_count (ob->ob_cache, false);
  if (level == ob->ob_nlevels - 1u) {
    ZV_VERIFY3U (idx, ==, 0);
    pthread_mutex_lock (&ob->ob_mtx);
    bp = ob->ob_root;
  }
  else {
    r = zv_dmu_hold_indirect (ob, level + 1, idx / F, &pdb);
    if (r < 0)
      goto fail;
    pthread_mutex_lock (&pdb->db_mtx);
    bp = zv_dmu_ind_entries (pdb->db_data)[idx % F];
  }
  r = dmu_read_bp (ob, &bp, level, idx, &data);
  if (r == 0 && data == NULL)
    data = dmu_new_indirect (ob, level, idx);
  if (pdb) {
    pthread_mutex_unlock (&pdb->db_mtx);
    zv_dbuf_rele (ob->ob_cache, pdb);
  }
  else
    pthread_mutex_unlock (&ob->ob_mtx);
  if (r < 0)
    goto fail;
  zv_dbuf_set_data (ob->ob_cache, db, data);
  pthread_mutex_unlock (&db->db_mtx);
  *dbp = db;
  return 0;

 fail:
  pthread_mutex_unlock (&db->db_mtx);
  zv_dbuf_rele (ob->ob_cache, db);
  return r;
}

/* The current pointer of data block blkid (stable while its dbuf's
 * db_mtx is held and it has no dirty record). */
int
zv_dmu_lookup_l0 (zv_object_t *ob, uint64_t blkid, zv_blkptr_t *bp)
{
  zv_dbuf_t *pdb;
  int r;

  if (ob->ob_nlevels == 1) {
    pthread_mutex_lock (&ob->ob_mtx);
    *bp = ob->ob_root;
    pthread_mutex_unlock (&ob->ob_mtx);
    return 0;
  }
  r = zv_dmu_hold_indirect (ob, 1, blkid / F, &pdb);
  if (r < 0)
    return r;
  pthread_mutex_lock (&pdb->db_mtx);
  *bp = zv_dmu_ind_entries (pdb->db_data)[blkid % F];
  pthread_mutex_unlock (&pdb->db_mtx);
  zv_dbuf_rele (ob->ob_cache, pdb);
  return 0;
}

/*
 * Make sure a data dbuf's synced content is known (db_mtx held): read it
 * through the tree if uncached.  A hole leaves db_data NULL.
 */
int
zv_dmu_fill_locked (zv_object_t *ob, zv_dbuf_t *db)
{
  zv_blkptr_t bp;
  void *data;
  int r;

  if (db->db_state == ZV_DB_CACHED) {
    zv_dbuf_count (ob->ob_cache, true);
    return 0;
  }
  zv_dbuf_count (ob->ob_cache, false);
  r = zv_dmu_lookup_l0 (ob, db->db_blkid, &bp);
  if (r < 0)
    return r;
  r = dmu_read_bp (ob, &bp, 0, db->db_blkid, &data);
  if (r < 0)
    return r;
  zv_dbuf_set_data (ob->ob_cache, db, data);
  return 0;
}

/* The bytes a read sees now (db_mtx held, content known or dirty):
 * NULL means zeros. */
static const void *
dmu_current_locked (zv_dbuf_t *db)
{
  zv_dirty_t *dr = zv_dbuf_newest_dirty (db);

  if (dr)
    return dr->dr_data;
  ZV_ASSERT (db->db_state == ZV_DB_CACHED);
  return db->db_data;
}

/* ---- partial records: a mask of grains written ---- */

/* Does [boff, boff + n) start and end on grain boundaries? */
bool
zv_dmu_grain_aligned (uint32_t boff, size_t n)
{
  return (boff | n) % ZV_DR_GRAIN == 0;
}

static inline bool
dmu_grain_valid (const zv_dirty_t *dr, uint32_t g)
{
  return dr->dr_valid[g / 64] >> (g % 64) & 1;
}

/* Are all the grains [boff, boff + n) touches written? */
static bool
dmu_grains_cover (const zv_dirty_t *dr, uint32_t boff, size_t n)
{
  for (uint32_t g = boff / ZV_DR_GRAIN;
       g <= (boff + n - 1) / ZV_DR_GRAIN; g++)
    if (!dmu_grain_valid (dr, g))
      return false;
  return true;
}

/* Mark [boff, boff + n) written (grain-aligned); a record whose every
 * grain is written is whole again. */
void
zv_dmu_mask_set (zv_object_t *ob, zv_dirty_t *dr, uint32_t boff, size_t n)
{
  uint32_t ng = ob->ob_blksz / ZV_DR_GRAIN;
  bool full = true;

  for (uint32_t g = boff / ZV_DR_GRAIN; g < (boff + n) / ZV_DR_GRAIN; g++)
    dr->dr_valid[g / 64] |= 1ull << (g % 64);
  for (uint32_t w = 0; w < ng / 64 && full; w++)
    full = dr->dr_valid[w] == UINT64_MAX;
  if (ng % 64 && full)
    full = dr->dr_valid[ng / 64] == (1ull << (ng % 64)) - 1;
  if (full)
    dr->dr_partial = false;
}

/*
 * Copy [boff, boff + n) of what the block reads as now into out: the
 * record's grains where written, 'base' (the content under the record;
 * NULL: zeros) elsewhere.  Runs of grains go in one copy each.
 */
static void
dmu_copy_merged (uint8_t *out, const zv_dirty_t *dr, const uint8_t *base,
                 uint32_t boff, size_t n)
{
  uint32_t end = boff + (uint32_t) n;

  while (boff < end) {
    uint32_t g = boff / ZV_DR_GRAIN;
    bool valid = dmu_grain_valid (dr, g);
    uint32_t e = (g + 1) * ZV_DR_GRAIN;

    while (e < end && dmu_grain_valid (dr, e / ZV_DR_GRAIN) == valid)
      e += ZV_DR_GRAIN;
    e = ZV_MIN (e, end);
    if (valid)
      zv_copy (out, (const uint8_t *) dr->dr_data + boff, e - boff);
    else if (base)
      zv_copy (out, base + boff, e - boff);
    else
      memset (out, 0, e - boff);
    out += e - boff;
    boff = e;
  }
}

/* Fill a partial record's unwritten grains from base (NULL: zeros): it
 * holds the whole block from now on (db_mtx held). */
void
zv_dmu_merge_locked (zv_object_t *ob, zv_dirty_t *dr, const uint8_t *base)
{
  uint8_t *d = dr->dr_data;

  ZV_ASSERT (dr->dr_partial && d != NULL);
  ZV_ASSERT (!dr->dr_sealed);
  for (uint32_t g = 0; g < ob->ob_blksz / ZV_DR_GRAIN; g++) {
    if (dmu_grain_valid (dr, g))
      continue;
    if (base)
      memcpy (d + g * ZV_DR_GRAIN, base + g * ZV_DR_GRAIN, ZV_DR_GRAIN);
    else
      memset (d + g * ZV_DR_GRAIN, 0, ZV_DR_GRAIN);
  }
  dr->dr_partial = false;
}

/* Merge a partial record now, reading the block's content if it is not
 * cached (db_mtx held): a synchronous read, for the paths that need the
 * whole block at once. */
int
zv_dmu_resolve_locked (zv_object_t *ob, zv_dbuf_t *db, zv_dirty_t *dr)
{
  int r;

  if (!dr->dr_partial)
    return 0;
  r = zv_dmu_fill_locked (ob, db);
  if (r == 0)
    zv_dmu_merge_locked (ob, dr, db->db_data);
  return r;
}

/*
 * Open context, before a change of data blocks [first, last] is taken:
 * one under an indirect block refused already (dmu_check_children) fails
 * with EIO here, not at the sync, which would suspend the pool over it
 * after the write was acknowledged.  Nothing is read (no read on the
 * write path): a block never read yet is checked when the sync (or a
 * read) loads it, and a change under it that reached the sync first
 * fails that sync (the pool suspends, with the message naming it).
 * Costs an atomic load while nothing was refused.
 */
int
zv_dmu_check_path (zv_object_t *ob, uint64_t first, uint64_t last)
{
  size_t n = atomic_load_explicit (&ob->ob_nrefused, memory_order_acquire);
  int r = 0;

  if (n == 0)
    return 0;
  pthread_mutex_lock (&ob->ob_refused_mtx);
  for (size_t k = 0; k < n && r == 0; k++) {
    unsigned level = (unsigned) (ob->ob_refused[k] >> 56);
    uint64_t idx = ob->ob_refused[k] & ((1ull << 56) - 1);
    uint64_t span = dmu_span (level);

    if (first / span <= idx && idx <= last / span) {
      zv_error ("object %" PRIu64 " blocks %" PRIu64 "-%" PRIu64 ": under "
                "indirect block (level %u, %" PRIu64 "), refused when it "
                "was read", ob->ob_id, first, last, level, idx);
      r = -EIO;
    }
  }
  pthread_mutex_unlock (&ob->ob_refused_mtx);
  return r;
}

/* Blocks of one read window at most: a longer read comes back for the
 * next window.  (The bits of dmu_batch_fill's result.) */
#define DMU_READ_WINDOW 64u

/*
 * The part [boff, boff + n) of a data block as a read sees it now, into
 * out (db_mtx held).  What it takes: the newest dirty record, or the
 * synced content, or both for a partial record whose written grains do
 * not cover the range.  Without may_read, a block whose synced content
 * is needed but not cached is left alone: returns 1 (the caller reads
 * it, in a batch with others).  'filled': the batch just cached it, so
 * it counts as the miss it was, not the hit it looks.
 */
static int
dmu_read_block_locked (zv_object_t *ob, zv_dbuf_t *db, uint32_t boff,
                       size_t n, uint8_t *out, bool may_read, bool filled)
{
  zv_dirty_t *dr = zv_dbuf_newest_dirty (db);
  /* A partial record needs the content under it, unless the range is
   * all written grains (the log fetching a write's data): the synced
   * content, which every record of this block sees the same outside
   * its grains (a later record's mask covers an earlier one's). */
  bool merged = dr && dr->dr_data && dr->dr_partial
    && !dmu_grains_cover (dr, boff, n);
  const uint8_t *src;

  if (dr == NULL || merged) {
    int r;

    if (db->db_state != ZV_DB_CACHED && !may_read)
      return 1;
    if (filled && db->db_state == ZV_DB_CACHED)
      zv_dbuf_count (ob->ob_cache, false);
    else if ((r = zv_dmu_fill_locked (ob, db)) < 0)
      return r;
  }
  if (merged) {
    dmu_copy_merged (out, dr, db->db_data, boff, n);
    return 0;
  }
  src = dmu_current_locked (db);
  if (src)
    zv_copy (out, src + boff, n);
  else
    memset (out, 0, n);
  return 0;
}

/*
 * Read the m uncached blocks dbs[] (held; no dirty record when looked at)
 * in one batch, all in flight together: a 128 KiB read of 16 KiB blocks
 * then waits for one device round trip, not eight.  No lock is held
 * across the I/O.  Then, under each block's db_mtx, what was read becomes
 * its content only if the block is still uncached and its pointer still
 * the one read: a sync may have replaced both meanwhile.  Anything this
 * leaves (a hole, a changed pointer, an error) the block-by-block path
 * does as before, and reports.  Returns bit k set for dbs[k] filled.
 */
static uint64_t
dmu_batch_fill (zv_object_t *ob, zv_dbuf_t *const *dbs, size_t m)
{
  zv_blkptr_t bps[DMU_READ_WINDOW];
  const zv_blkptr_t *rbps[DMU_READ_WINDOW];
  void *bufs[DMU_READ_WINDOW];
  const char *whats[DMU_READ_WINDOW];
  int res[DMU_READ_WINDOW];
  size_t idx[DMU_READ_WINDOW], k = 0;
  uint64_t filled = 0;

  for (size_t i = 0; i < m; i++) {
    zv_blkptr_t bp;

    if (zv_dmu_lookup_l0 (ob, dbs[i]->db_blkid, &bp) == 0
        && !zv_bp_is_hole (&bp) && zv_bp_size_is (&bp, ob->ob_blksz)
        && bp.bp_level == 0) {
      bps[k] = bp;
      idx[k] = i;
      k++;
    }
  }
  if (k < 2)
    return 0;   /* one block gains nothing over the path that follows */
  for (size_t j = 0; j < k; j++) {
    rbps[j] = &bps[j];
    bufs[j] = zv_buf_get (ob->ob_blksz);
    whats[j] = "volume block";
  }
  (void) zv_zio_read_many (ob->ob_spa, rbps, bufs, whats, res, k);
  for (size_t j = 0; j < k; j++) {
    zv_dbuf_t *db = dbs[idx[j]];
    zv_blkptr_t now;

    pthread_mutex_lock (&db->db_mtx);
    if (res[j] == 0 && db->db_state != ZV_DB_CACHED
        && zv_dmu_lookup_l0 (ob, db->db_blkid, &now) == 0
        && memcmp (&now, &bps[j], sizeof now) == 0) {
      zv_dbuf_set_data (ob->ob_cache, db, bufs[j]);
      bufs[j] = NULL;
      filled |= 1ull << idx[j];
    }
    pthread_mutex_unlock (&db->db_mtx);
    zv_buf_put (bufs[j], ob->ob_blksz);
  }
  return filled;
}

/*
 * One window of a read (at most DMU_READ_WINDOW blocks).  Each block is
 * held once: what the cache or a dirty record has is copied out at once,
 * under the block's db_mtx; the blocks left need their synced content
 * read.  Those without a dirty record are read in one batch
 * (dmu_batch_fill), then every block left is done one by one, reading
 * what the batch did not fill.  A read of cached blocks so costs one
 * hold, one db_mtx and one copy per block.
 */
static int
dmu_read_window (zv_object_t *ob, uint64_t off, size_t len, uint8_t *out)
{
  zv_dbuf_t *left[DMU_READ_WINDOW], *batch[DMU_READ_WINDOW];
  uint8_t *louts[DMU_READ_WINDOW];
  uint32_t lboffs[DMU_READ_WINDOW], lns[DMU_READ_WINDOW];
  uint64_t filled = 0;
  size_t nleft = 0, nbatch = 0, lbatch[DMU_READ_WINDOW];
  /* A read of one block has nothing to batch: it reads at once. */
  bool one = off % ob->ob_blksz + len <= ob->ob_blksz;
  int r = 0;

  while (len > 0) {
    uint64_t blkid = off / ob->ob_blksz;
    uint32_t boff = off % ob->ob_blksz;
    size_t n = ZV_MIN (len, (size_t) (ob->ob_blksz - boff));
    zv_dbuf_t *db = zv_dbuf_hold (ob->ob_cache, ob, 0, blkid, ob->ob_blksz);
    int k;

    pthread_mutex_lock (&db->db_mtx);
    k = dmu_read_block_locked (ob, db, boff, n, out, one, false);
    if (k == 1 && zv_dbuf_newest_dirty (db) == NULL) {
      lbatch[nbatch] = nleft;
      batch[nbatch++] = db;
    }
    pthread_mutex_unlock (&db->db_mtx);
    if (k == 1) {
      ZV_ASSERT (nleft < DMU_READ_WINDOW);
      left[nleft] = db;
      louts[nleft] = out;
      lboffs[nleft] = boff;
      lns[nleft] = (uint32_t) n;
      nleft++;
    }
    else {
      zv_dbuf_rele (ob->ob_cache, db);
      if (k < 0)
        r = k;
    }
    if (r < 0)
      break;
    out += n;
    off += n;
    len -= n;
  }
  if (r == 0 && nbatch >= 2) {
    uint64_t b = dmu_batch_fill (ob, batch, nbatch);

    for (size_t j = 0; j < nbatch; j++)
      if (b >> j & 1)
        filled |= 1ull << lbatch[j];
  }
  for (size_t i = 0; i < nleft; i++) {
    zv_dbuf_t *db = left[i];

    if (r == 0) {
      pthread_mutex_lock (&db->db_mtx);
      r = dmu_read_block_locked (ob, db, lboffs[i], lns[i], louts[i], true,
                                 filled >> i & 1);
      pthread_mutex_unlock (&db->db_mtx);
    }
    zv_dbuf_rele (ob->ob_cache, db);
  }
  return r;
}

/* Copy out of blocks, through the cache, a window at a time. */
int
zv_dmu_read_by_dnode (zv_object_t *ob, uint64_t off, size_t len, void *buf)
{
  uint8_t *out = buf;

  ZV_VERIFY (off + len <= ob->ob_nblocks * ob->ob_blksz);
  while (len > 0) {
    uint64_t room = (uint64_t) DMU_READ_WINDOW * ob->ob_blksz
      - off % ob->ob_blksz;
    size_t n = ZV_MIN (len, (size_t) room);
    int r = dmu_read_window (ob, off, n, out);

    if (r < 0)
      return r;
    out += n;
    off += n;
    len -= n;
  }
  return 0;
}

int
zv_dmu_block_is_hole (zv_object_t *ob, uint64_t blkid, bool *hole)
{
  zv_dbuf_t *db = zv_dbuf_find (ob->ob_cache, ob, 0, blkid);
  zv_blkptr_t bp;
  int r;

  if (db) {
    zv_dirty_t *dr;
    bool known = true;

    pthread_mutex_lock (&db->db_mtx);
    dr = zv_dbuf_newest_dirty (db);
    if (dr)
      *hole = dr->dr_data == NULL && !dr->dr_keep_alloc;
    else if (db->db_state == ZV_DB_CACHED)
      *hole = db->db_data == NULL;
    else
      known = false;
    pthread_mutex_unlock (&db->db_mtx);
    zv_dbuf_rele (ob->ob_cache, db);
    if (known)
      return 0;
  }
  /* Not dirty: the tree decides.  A block dirtied meanwhile is a race
   * any client accepts (extents are a snapshot of a moving target). */
  r = zv_dmu_lookup_l0 (ob, blkid, &bp);
  if (r < 0)
    return r;
  *hole = zv_bp_is_hole (&bp);
  return 0;
}

/* The synced tree's pointer of a data block (see dmu.h). */
int
zv_dmu_block_bp (zv_object_t *ob, uint64_t blkid, zv_blkptr_t *bp)
{
  if (blkid >= ob->ob_nblocks)
    return -EINVAL;
  return zv_dmu_lookup_l0 (ob, blkid, bp);
}


/* The walk's checks (dmu_walk.c), and a walk of its own (freeq.c). */
int
zv_dmu_check_child (zv_spa_t *spa, const zv_blkptr_t *bp, unsigned level,
                    uint64_t pbirth, const char *what)
{
  return dmu_check_child (spa, bp, level, pbirth, what);
}

int
zv_dmu_check_indirect (const void *buf, const zv_blkptr_t *bp, uint64_t obj,
                       unsigned level, uint64_t blkid, const char *what)
{
  return dmu_check_indirect (buf, bp, obj, level, blkid, what);
}

uint64_t
zv_dmu_span (unsigned level)
{
  return dmu_span (level);
}
