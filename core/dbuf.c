/*
 * dbuf.c: the buffer cache (see dbuf.h for the locking rules).
 *
 * Theory.  The cache is split into ZV_DBUF_SHARDS shards by a hash of
 * (object, level, blkid), each with its own mutex, hash table and LRU
 * list, so concurrent requests on different blocks rarely meet on a lock;
 * there is no global mutex.  A dbuf with holds is never evicted.  When the
 * last hold goes, a dbuf that holds content joins the head of its shard's
 * LRU; one without content is freed at once.  While a shard holds more
 * clean bytes than its share of the limit, its LRU tail is evicted.
 *
 * Only clean content counts against the limit: dirty records are bounded
 * by the txg engine's dirty_max and pin their dbuf with a hold.
 */
#include <config.h>

#include <errno.h>
#include <string.h>
#include <stdlib.h>
#include <stdatomic.h>
#include <unistd.h>

#include "zv_util.h"
#include "tunable.h"
#include "dbuf.h"
#include "mem.h"

#define ZV_DBUF_SHARDS 64u          /* power of two */
#define ZV_DBUF_BUCKETS 4096u       /* per shard, power of two */

typedef struct dbuf_shard {
  pthread_mutex_t ds_mtx;
  zv_dbuf_t *ds_buckets[ZV_DBUF_BUCKETS];
  zv_dbuf_t *ds_lru_head, *ds_lru_tail;   /* unheld dbufs, newest first */
  _Atomic uint64_t ds_bytes;              /* clean content bytes */
  uint64_t ds_count;
  uint64_t ds_holds;                      /* holds taken, ever */
} __attribute__ ((aligned (64))) dbuf_shard_t;

struct zv_dbuf_cache {
  uint64_t dc_limit;                      /* the ceiling */
  _Atomic uint64_t dc_target;             /* now (zv_dbuf_cache_set_target) */
  _Atomic uint64_t dc_shard_limit;        /* dc_target / ZV_DBUF_SHARDS */
  _Atomic uint64_t dc_hits, dc_misses, dc_evictions;
  dbuf_shard_t dc_shards[ZV_DBUF_SHARDS];
};

/* 64-bit mix of the key (splitmix64 finaliser). */
static uint64_t
dbuf_hash (const void *obj, uint8_t level, uint64_t blkid)
{
  uint64_t x = (uint64_t) (uintptr_t) obj ^ ((uint64_t) level << 56) ^ blkid;

  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}

/* Create an empty cache with a limit on clean bytes. */
zv_dbuf_cache_t *
zv_dbuf_cache_create (uint64_t limit)
{
  zv_dbuf_cache_t *c = zv_calloc (1, sizeof *c);

  c->dc_limit = limit;
  c->dc_target = limit;
  /* Per shard: a limit under 64 blocks caches little (the plugin asks
   * for at least 8 MiB). */
  c->dc_shard_limit = limit / ZV_DBUF_SHARDS;
  for (unsigned i = 0; i < ZV_DBUF_SHARDS; i++)
    pthread_mutex_init (&c->dc_shards[i].ds_mtx, NULL);
  return c;
}

/* Free a dbuf's memory (no longer reachable). */
static void
dbuf_free (dbuf_shard_t *s, zv_dbuf_t *db)
{
  for (unsigned t = 0; t < ZV_TXG_SIZE; t++)
    ZV_VERIFY (db->db_dirty[t] == NULL);
  if (db->db_data) {
    atomic_fetch_sub_explicit (&s->ds_bytes, db->db_size,
                               memory_order_seq_cst);
    zv_buf_put (db->db_data, db->db_size);
  }
  pthread_mutex_destroy (&db->db_mtx);
  free (db);
}

/* Unlink from the hash chain (shard mutex held). */
static void
dbuf_hash_remove (dbuf_shard_t *s, zv_dbuf_t *db)
{
  uint64_t h = dbuf_hash (db->db_obj, db->db_level, db->db_blkid);
  zv_dbuf_t **pp =
    &s->ds_buckets[(h / ZV_DBUF_SHARDS) & (ZV_DBUF_BUCKETS - 1)];

  while (*pp != db) {
    ZV_ASSERT (*pp != NULL);
    pp = &(*pp)->db_hnext;
  }
  *pp = db->db_hnext;
  s->ds_count--;
}

/* Unlink from the LRU (shard mutex held). */
static void
dbuf_lru_remove (dbuf_shard_t *s, zv_dbuf_t *db)
{
  if (db->db_lprev)
    db->db_lprev->db_lnext = db->db_lnext;
  else
    s->ds_lru_head = db->db_lnext;
  if (db->db_lnext)
    db->db_lnext->db_lprev = db->db_lprev;
  else
    s->ds_lru_tail = db->db_lprev;
  db->db_lprev = db->db_lnext = NULL;
}

/* Evict from the LRU tail while the shard is over its share. */
static void
dbuf_evict_some (zv_dbuf_cache_t *c, dbuf_shard_t *s)
{
  uint64_t lim = atomic_load_explicit (&c->dc_shard_limit,
                                      memory_order_relaxed);

  while (atomic_load_explicit (&s->ds_bytes, memory_order_seq_cst) > lim
         && s->ds_lru_tail != NULL) {
    zv_dbuf_t *db = s->ds_lru_tail;

    ZV_VERIFY3U (db->db_holds, ==, 0);
    dbuf_lru_remove (s, db);
    dbuf_hash_remove (s, db);
    dbuf_free (s, db);
    atomic_fetch_add_explicit (&c->dc_evictions, 1, memory_order_seq_cst);
  }
}

/* A new target under the ceiling: every shard evicts down to its share
 * now (held and dirty blocks stay; they are not counted or not
 * evictable), and keeps to it from then on. */
void
zv_dbuf_cache_set_target (zv_dbuf_cache_t *c, uint64_t target)
{
  target = ZV_MIN (target, c->dc_limit);
  atomic_store_explicit (&c->dc_target, target, memory_order_seq_cst);
  atomic_store_explicit (&c->dc_shard_limit, target / ZV_DBUF_SHARDS,
                         memory_order_seq_cst);
  for (unsigned i = 0; i < ZV_DBUF_SHARDS; i++) {
    dbuf_shard_t *s = &c->dc_shards[i];

    pthread_mutex_lock (&s->ds_mtx);
    dbuf_evict_some (c, s);
    pthread_mutex_unlock (&s->ds_mtx);
  }
}

/* Clean bytes cached now (no lock: a sum of counters). */
uint64_t
zv_dbuf_cache_bytes (zv_dbuf_cache_t *c)
{
  uint64_t b = 0;

  for (unsigned i = 0; i < ZV_DBUF_SHARDS; i++)
    b += atomic_load_explicit (&c->dc_shards[i].ds_bytes,
                               memory_order_relaxed);
  return b;
}

/* Destroy the cache; every dbuf must be unheld. */
void
zv_dbuf_cache_destroy (zv_dbuf_cache_t *c)
{
  if (c == NULL)
    return;
  for (unsigned i = 0; i < ZV_DBUF_SHARDS; i++) {
    dbuf_shard_t *s = &c->dc_shards[i];
    for (unsigned b = 0; b < ZV_DBUF_BUCKETS; b++) {
      zv_dbuf_t *db = s->ds_buckets[b];
      while (db) {
        zv_dbuf_t *next = db->db_hnext;
        ZV_VERIFY3U (db->db_holds, ==, 0);
        dbuf_free (s, db);
        db = next;
      }
    }
    pthread_mutex_destroy (&s->ds_mtx);
  }
  free (c);
}

/* Find in a shard (shard mutex held). */
static zv_dbuf_t *
dbuf_lookup (dbuf_shard_t *s, uint64_t h, const void *obj, uint8_t level,
             uint64_t blkid)
{
  zv_dbuf_t *db = s->ds_buckets[(h / ZV_DBUF_SHARDS) & (ZV_DBUF_BUCKETS - 1)];

  for (; db; db = db->db_hnext)
    if (db->db_obj == obj && db->db_level == level && db->db_blkid == blkid)
      return db;
  return NULL;
}

/* Take a hold on a found dbuf (shard mutex held). */
static void
dbuf_hold_locked (dbuf_shard_t *s, zv_dbuf_t *db)
{
  s->ds_holds++;
  if (db->db_holds++ == 0 && db->db_data != NULL)
    dbuf_lru_remove (s, db);
}

/* Find or create, held. */
zv_dbuf_t *
zv_dbuf_hold (zv_dbuf_cache_t *c, const void *obj, uint8_t level,
              uint64_t blkid, uint32_t size)
{
  uint64_t h = dbuf_hash (obj, level, blkid);
  unsigned si = h & (ZV_DBUF_SHARDS - 1);
  dbuf_shard_t *s = &c->dc_shards[si];
  zv_dbuf_t *db;

  pthread_mutex_lock (&s->ds_mtx);
  db = dbuf_lookup (s, h, obj, level, blkid);
  if (db) {
    ZV_VERIFY3U (db->db_size, ==, size);
    dbuf_hold_locked (s, db);
  }
  else {
    db = zv_calloc (1, sizeof *db);
    db->db_obj = obj;
    db->db_level = level;
    db->db_blkid = blkid;
    db->db_size = size;
    db->db_shard = si;
    db->db_holds = 1;
    s->ds_holds++;
    db->db_state = ZV_DB_UNCACHED;
    pthread_mutex_init (&db->db_mtx, NULL);
    zv_dbuf_t **bucket =
      &s->ds_buckets[(h / ZV_DBUF_SHARDS) & (ZV_DBUF_BUCKETS - 1)];
    db->db_hnext = *bucket;
    *bucket = db;
    s->ds_count++;
  }
  pthread_mutex_unlock (&s->ds_mtx);
  return db;
}

/* Find if cached, held. */
zv_dbuf_t *
zv_dbuf_find (zv_dbuf_cache_t *c, const void *obj, uint8_t level,
              uint64_t blkid)
{
  uint64_t h = dbuf_hash (obj, level, blkid);
  dbuf_shard_t *s = &c->dc_shards[h & (ZV_DBUF_SHARDS - 1)];
  zv_dbuf_t *db;

  pthread_mutex_lock (&s->ds_mtx);
  db = dbuf_lookup (s, h, obj, level, blkid);
  if (db)
    dbuf_hold_locked (s, db);
  pthread_mutex_unlock (&s->ds_mtx);
  return db;
}

/* Another hold on a held dbuf. */
void
zv_dbuf_add_hold (zv_dbuf_cache_t *c, zv_dbuf_t *db)
{
  dbuf_shard_t *s = &c->dc_shards[db->db_shard];

  pthread_mutex_lock (&s->ds_mtx);
  ZV_ASSERT3U (db->db_holds, >, 0);
  db->db_holds++;
  s->ds_holds++;
  pthread_mutex_unlock (&s->ds_mtx);
}

/* Drop a hold: park on the LRU, or free if it holds nothing. */
void
zv_dbuf_rele (zv_dbuf_cache_t *c, zv_dbuf_t *db)
{
  dbuf_shard_t *s = &c->dc_shards[db->db_shard];

  pthread_mutex_lock (&s->ds_mtx);
  ZV_ASSERT3U (db->db_holds, >, 0);
  if (--db->db_holds == 0) {
    if (db->db_data == NULL) {
      /* Nothing worth keeping (uncached, or a cached hole: cheap to
       * rediscover from the tree). */
      dbuf_hash_remove (s, db);
      dbuf_free (s, db);
    }
    else {
      db->db_lnext = s->ds_lru_head;
      db->db_lprev = NULL;
      if (s->ds_lru_head)
        s->ds_lru_head->db_lprev = db;
      s->ds_lru_head = db;
      if (s->ds_lru_tail == NULL)
        s->ds_lru_tail = db;
      dbuf_evict_some (c, s);
    }
  }
  pthread_mutex_unlock (&s->ds_mtx);
}

/* Replace the synced content (db_mtx held; the caller holds the dbuf). */
void
zv_dbuf_set_data (zv_dbuf_cache_t *c, zv_dbuf_t *db, void *data)
{
  dbuf_shard_t *s = &c->dc_shards[db->db_shard];

  if (db->db_data) {
    atomic_fetch_sub_explicit (&s->ds_bytes, db->db_size,
                               memory_order_seq_cst);
    zv_buf_put (db->db_data, db->db_size);
  }
  db->db_data = data;
  if (data)
    atomic_fetch_add_explicit (&s->ds_bytes, db->db_size,
                               memory_order_seq_cst);
  db->db_state = ZV_DB_CACHED;
}

/* Give the cached content away (db_mtx held). */
void *
zv_dbuf_take_data (zv_dbuf_cache_t *c, zv_dbuf_t *db)
{
  dbuf_shard_t *s = &c->dc_shards[db->db_shard];
  void *data = db->db_data;

  ZV_ASSERT (db->db_state == ZV_DB_CACHED && data != NULL);
  atomic_fetch_sub_explicit (&s->ds_bytes, db->db_size, memory_order_seq_cst);
  db->db_data = NULL;
  db->db_state = ZV_DB_UNCACHED;
  return data;
}

/* Newest dirty record (highest txg), db_mtx held. */
zv_dirty_t *
zv_dbuf_newest_dirty (zv_dbuf_t *db)
{
  zv_dirty_t *best = NULL;

  for (unsigned t = 0; t < ZV_TXG_SIZE; t++)
    if (db->db_dirty[t] && (best == NULL
                            || db->db_dirty[t]->dr_txg > best->dr_txg))
      best = db->db_dirty[t];
  return best;
}

/* Drop every unheld dbuf of an object. */
void
zv_dbuf_evict_object (zv_dbuf_cache_t *c, const void *obj)
{
  for (unsigned i = 0; i < ZV_DBUF_SHARDS; i++) {
    dbuf_shard_t *s = &c->dc_shards[i];

    pthread_mutex_lock (&s->ds_mtx);
    for (unsigned b = 0; b < ZV_DBUF_BUCKETS; b++) {
      zv_dbuf_t **pp = &s->ds_buckets[b];
      while (*pp) {
        zv_dbuf_t *db = *pp;
        if (db->db_obj == obj && db->db_holds == 0) {
          *pp = db->db_hnext;
          s->ds_count--;
          if (db->db_data)
            dbuf_lru_remove (s, db);
          dbuf_free (s, db);
        }
        else
          pp = &db->db_hnext;
      }
    }
    pthread_mutex_unlock (&s->ds_mtx);
  }
}

/* Counters for the stats file. */
void
zv_dbuf_get_stats (zv_dbuf_cache_t *c, zv_dbuf_stats_t *out)
{
  memset (out, 0, sizeof *out);
  out->cs_hits = atomic_load_explicit (&c->dc_hits, memory_order_seq_cst);
  out->cs_misses = atomic_load_explicit (&c->dc_misses, memory_order_seq_cst);
  out->cs_evictions = atomic_load_explicit (&c->dc_evictions,
                                           memory_order_seq_cst);
  out->cs_limit = c->dc_limit;
  out->cs_target = atomic_load_explicit (&c->dc_target, memory_order_seq_cst);
  for (unsigned i = 0; i < ZV_DBUF_SHARDS; i++) {
    dbuf_shard_t *s = &c->dc_shards[i];
    out->cs_bytes += atomic_load_explicit (&s->ds_bytes, memory_order_seq_cst);
    pthread_mutex_lock (&s->ds_mtx);
    out->cs_count += s->ds_count;
    out->cs_holds += s->ds_holds;
    pthread_mutex_unlock (&s->ds_mtx);
  }
}

/* A lookup found content in memory (hit) or went to disk (miss). */
void
zv_dbuf_count (zv_dbuf_cache_t *c, bool hit)
{
  atomic_fetch_add_explicit (hit ? &c->dc_hits : &c->dc_misses, 1,
                             memory_order_seq_cst);
}

/* ---- tunables (tunable.h) ---- */

/* cache_size: the limit of a pool's cache; 0 (auto) sizes it from RAM. */
static uint64_t zv_dbuf_cache_size = 0;

/* The limit a pool's cache gets unless its configuration names one:
 * cache_size, or half of physical memory (ARC's default ceiling on
 * Linux): the devices are opened O_DIRECT, so this cache is the only one
 * the pool's data has, and the memory monitor (mem.h) shrinks it when
 * the system needs the memory. */
uint64_t
zv_dbuf_cache_limit_default (void)
{
  uint64_t mem = zv_mem_physical ();

  if (zv_dbuf_cache_size != 0)
    return zv_dbuf_cache_size;
  return ZV_MAX (mem / 2, 8ull << 20);
}

const zv_tunable_t zv_dbuf_tunable_table[] = {
  { .tn_name = "cache_size", .tn_module = "dbuf",
    ZV_TUNABLE_VAR_U64 (zv_dbuf_cache_size),
    .tn_default = 0, .tn_min = 8ull << 20, .tn_max = 1ull << 40,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_flags = ZV_TUNABLE_F_AUTO,
    .tn_when = ZV_TUNABLE_AT_OPEN, .tn_reader = "the buffer cache",
    .tn_desc = "Limit of the clean data the buffer cache keeps (dirty "
    "data is bounded by dirty_max), its ceiling: it shrinks when the "
    "system runs short of memory (mem_free_target); auto is half of "
    "physical memory." },
  ZV_TUNABLE_END
};
