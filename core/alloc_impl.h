/*
 * alloc_impl.h: the allocator's state, shared by its two files: alloc.c
 * (bitmaps, placement, deferred frees, chunks, reservation) and
 * alloc_own.c (who owns each sector of an imported pool).  Nothing else
 * includes it; the rest of the engine sees alloc.h.
 */
#ifndef ZV_ALLOC_IMPL_H
#define ZV_ALLOC_IMPL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "zv_util.h"
#include "alloc.h"

#define ZV_ALLOC_CHUNK_WORDS ((uint64_t) ZV_ALLOC_CHUNK / 8)
#define ZV_ALLOC_CHUNK_BITS ((uint64_t) ZV_ALLOC_CHUNK * 8)
#define ZV_ALLOC_NLISTS (ZV_TXG_DEFER + 1)
#define ZV_ALLOC_NONE UINT64_MAX

/* One device's bitmap and placement state. */
typedef struct zv_alloc_dev {
  uint64_t ad_start;        /* byte offset of bit 0 */
  uint64_t ad_end;          /* end of the area (exclusive) */
  uint64_t ad_nbits;        /* sectors in the area */
  uint64_t ad_minbit;       /* 1 when bit 0 would be dva 0, else 0 */
  uint64_t ad_free;         /* clear bits below ad_nbits */
  uint64_t ad_cursor;       /* next block of the segment goes here */
  uint64_t ad_seg_end;      /* end of the current segment (exclusive);
                               <= ad_cursor: none, pick one */
  uint64_t ad_ditto_cursor; /* after the last ditto copy placed apart */
  size_t ad_nchunks;
  uint64_t *ad_map;         /* ad_nchunks * ZV_ALLOC_CHUNK_WORDS words */
  uint8_t *ad_dirty;        /* one flag per chunk */
  /* Ownership since import (zv_alloc_own_begin; NULL before): */
  uint64_t *ad_unowned;     /* allocated at import, no owner seen yet */
  uint64_t *ad_checked;     /* an imported indirect block starts here
                               whose children have their owners */
} zv_alloc_dev_t;

/* A deferred free. */
typedef struct zv_alloc_defer_ent {
  uint64_t de_dva;
  uint64_t de_txg;
  uint32_t de_size;
} zv_alloc_defer_ent_t;

/* A growable list of deferred frees. */
typedef struct zv_alloc_defer_list {
  zv_alloc_defer_ent_t *dl_ents;
  size_t dl_count;
  size_t dl_cap;
} zv_alloc_defer_list_t;

/* An open-context allocation for txg ao_txg. */
typedef struct zv_alloc_open {
  uint64_t ao_dva;
  uint32_t ao_size;
  uint64_t ao_txg;
} zv_alloc_open_t;

struct zv_alloc {
  pthread_mutex_t a_lock;
  unsigned a_ndevs;
  unsigned a_rotor;                  /* device the next call starts on */
  zv_alloc_dev_t *a_devs;
  zv_alloc_defer_list_t a_defer[ZV_ALLOC_NLISTS];
  _Atomic uint64_t a_deferred;       /* bytes on the defer lists; written
                                      * under a_lock, read without it */
  uint64_t a_total;                  /* bytes in all areas */
  uint64_t a_slop;                   /* reserve() keeps this much back */
  _Atomic uint64_t a_allocated;      /* bytes of set bits */
  _Atomic uint64_t a_reserved;       /* bytes reserved by writers */
  bool a_own;                        /* ownership tracked (an import) */
  /* Open-context allocations of a later txg than the one syncing
   * (zv_alloc_block_open: in-place log blocks), kept out of the chunks
   * that sync writes (zv_alloc_chunk_save).  a_sync_txg: the txg whose
   * sync began last. */
  zv_alloc_open_t *a_open;
  size_t a_nopen, a_capopen;
  uint64_t a_sync_txg;
  /* The free hold (zv_alloc_hold_begin): frees of txgs after
   * a_hold_txg are not applied while a_hold is set.  Each sync's start
   * carries the frees it keeps back into its own txg; what the last two
   * carried (a_carry: the last one's) is held: a_held bytes in a_held_n
   * extents, part of a_deferred (written under a_lock, read without). */
  bool a_hold;
  uint64_t a_hold_txg;
  uint64_t a_carry, a_carry_n;
  _Atomic uint64_t a_held;
  _Atomic uint64_t a_held_n;
};

/* Lock wrappers: a failing pthread call is a bug, not a condition. */
static inline void
alloc_lock (zv_alloc_t *a)
{
  ZV_VERIFY (pthread_mutex_lock (&a->a_lock) == 0);
}

static inline void
alloc_unlock (zv_alloc_t *a)
{
  ZV_VERIFY (pthread_mutex_unlock (&a->a_lock) == 0);
}

/* Bitmap primitives (alloc.c; the caller holds a_lock, or owns the map). */
bool zv_alloc_bits_all_set (const uint64_t *map, uint64_t b, uint64_t n);
void zv_alloc_bits_mark (uint64_t *map, uint64_t b, uint64_t n, bool set);
bool zv_alloc_range_all_set (const zv_alloc_dev_t *d, uint64_t b,
                             uint64_t n);
/* (dva, size) as a device and a bit range; false when it is not
 * sector-aligned, empty, or not wholly inside one device's area. */
bool zv_alloc_extent (zv_alloc_t *a, uint64_t dva, uint32_t size,
                      zv_alloc_dev_t **dp, uint64_t *bp, uint64_t *np);

#endif /* ZV_ALLOC_IMPL_H */
