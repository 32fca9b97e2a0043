/*
 * dbuf.h: the buffer cache.  One zv_dbuf_t per cached block of an object
 * (volume data blocks and their indirect blocks), found by (object, level,
 * blkid) in a sharded hash.  A dbuf holds the block's last synced content
 * and at most one dirty record per txg not yet synced, in ZV_TXG_SIZE
 * slots (txg.h).
 *
 * Locking.  A shard mutex guards its hash chains, its LRU list and the
 * hold counts of its dbufs; db_mtx guards a dbuf's content (state, data,
 * dirty records) and may be held across the I/O that fills it.  A shard
 * mutex is a leaf: it may be taken with a db_mtx held (hold and rele do
 * that), never the other way round.  Eviction frees only dbufs with no
 * holds (a dirty record holds its dbuf, the sync holds what it works on),
 * so it needs no db_mtx.
 */
#ifndef ZV_DBUF_H
#define ZV_DBUF_H

#include <stdint.h>
#include <stdbool.h>
#include <pthread.h>

#include "format.h"
#include "txg.h"
#include "zio.h"

typedef struct zv_dbuf zv_dbuf_t;
typedef struct zv_dbuf_cache zv_dbuf_cache_t;

/* The grain of a partial record's mask: the smallest write a client sends. */
#define ZV_DR_GRAIN 512u
#define ZV_DR_MASK_WORDS (ZV_MAX_BLKSZ / ZV_DR_GRAIN / 64)

/*
 * A block's change in one txg.  dr_data == NULL: the block is freed, or,
 * with dr_keep_alloc, it is all zeros and stays allocated (a zero without
 * MAY_TRIM: the sync writes it from a shared zero block, so a huge zero
 * needs no buffer per block).  With dr_partial, only the grains set in
 * dr_valid hold the block's bytes; the others are the content it had
 * before (on disk, or cached), merged in by whoever needs the whole
 * block: the sync, an in-place write for the log, a write that is not
 * grain-aligned (dmu.c).
 */
typedef struct zv_dirty {
  uint64_t dr_txg;
  zv_dbuf_t *dr_dbuf;
  void *dr_data;
  struct zv_dirty *dr_next;      /* the object's per-txg list */
  /* Under db_mtx: */
  bool dr_keep_alloc;            /* written even if all zeros, never a hole */
  bool dr_syncing;               /* the txg sync has taken it */
  bool dr_overridden;            /* dr_data already written at dr_override */
  bool dr_partial;               /* dr_data valid only where dr_valid says */
  /* Sealed by the write that filled the whole block (dmu.c): dr_cksum
   * is dr_data's checksum, and dr_incomp says the early abort refused
   * it; any other change of dr_data breaks the seal. */
  bool dr_sealed;
  bool dr_incomp;
  uint64_t dr_valid[ZV_DR_MASK_WORDS];  /* bit g: grain g written */
  zv_cksum_t dr_cksum;
  zv_blkptr_t dr_override;       /* (the intent log wrote it in place) */
  /* A direct write's blocks on their way (zio.h): dr_override is good
   * only once it is done without error.  Held while set. */
  struct zv_zio_pending *dr_pending;
} zv_dirty_t;

enum zv_dbuf_state {
  ZV_DB_UNCACHED = 0,   /* content unknown: read it through the tree */
  ZV_DB_CACHED = 1,     /* db_data is the synced content (NULL: a hole) */
};

struct zv_dbuf {
  /* Identity: immutable. */
  const void *db_obj;
  uint64_t db_blkid;
  uint32_t db_size;
  uint8_t db_level;
  /* Cache linkage and holds: under the shard mutex. */
  struct zv_dbuf *db_hnext;
  struct zv_dbuf *db_lprev, *db_lnext;
  uint32_t db_holds;
  uint32_t db_shard;
  /* Content: under db_mtx. */
  pthread_mutex_t db_mtx;
  enum zv_dbuf_state db_state;
  void *db_data;
  zv_dirty_t *db_dirty[ZV_TXG_SIZE];
};

/* 'limit' bytes of clean cached data (dirty data is not counted). */
zv_dbuf_cache_t *zv_dbuf_cache_create (uint64_t limit);
/* The limit from the cache_size tunable (auto: from physical memory). */
uint64_t zv_dbuf_cache_limit_default (void);
/* Every dbuf must be released; frees them all. */
void zv_dbuf_cache_destroy (zv_dbuf_cache_t *c);
/* Keep at most target (<= the limit) clean bytes from now on, evicting
 * down to it at once (the memory monitor's lever: mem.h). */
void zv_dbuf_cache_set_target (zv_dbuf_cache_t *c, uint64_t target);
uint64_t zv_dbuf_cache_bytes (zv_dbuf_cache_t *c);

/* Find or create the dbuf, with a hold.  Never fails (aborts on ENOMEM). */
zv_dbuf_t *zv_dbuf_hold (zv_dbuf_cache_t *c, const void *obj, uint8_t level,
                         uint64_t blkid, uint32_t size);
/* Find the dbuf if it is cached, with a hold; NULL otherwise. */
zv_dbuf_t *zv_dbuf_find (zv_dbuf_cache_t *c, const void *obj, uint8_t level,
                         uint64_t blkid);
/* Take another hold on a dbuf already held. */
void zv_dbuf_add_hold (zv_dbuf_cache_t *c, zv_dbuf_t *db);
/* Drop a hold; may evict clean dbufs while over the limit. */
void zv_dbuf_rele (zv_dbuf_cache_t *c, zv_dbuf_t *db);

/*
 * Set the synced content (db_mtx held): takes ownership of data (NULL: a
 * hole), frees the previous content, keeps the byte count.
 */
void zv_dbuf_set_data (zv_dbuf_cache_t *c, zv_dbuf_t *db, void *data);

/*
 * Hand the cached content to the caller (db_mtx held, db cached and not a
 * hole): db becomes uncached until zv_dbuf_set_data gives it content again.
 * A dirty record takes its block this way instead of copying it.
 */
void *zv_dbuf_take_data (zv_dbuf_cache_t *c, zv_dbuf_t *db);

/* The newest dirty record of db (db_mtx held), or NULL. */
zv_dirty_t *zv_dbuf_newest_dirty (zv_dbuf_t *db);

/* Evict every unheld dbuf of obj (an object going away). */
void zv_dbuf_evict_object (zv_dbuf_cache_t *c, const void *obj);

typedef struct zv_dbuf_stats {
  uint64_t cs_hits, cs_misses, cs_evictions;
  uint64_t cs_bytes, cs_count, cs_limit;
  uint64_t cs_target;           /* under cs_limit while memory is short */
  uint64_t cs_holds;            /* holds taken since the cache was made */
} zv_dbuf_stats_t;
void zv_dbuf_get_stats (zv_dbuf_cache_t *c, zv_dbuf_stats_t *out);
/* Count a lookup that found content (hit) or had to read (miss). */
void zv_dbuf_count (zv_dbuf_cache_t *c, bool hit);

#endif /* ZV_DBUF_H */
