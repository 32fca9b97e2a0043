/*
 * import.c: read a pool back from its devices.
 *
 * Theory.
 * Import reads every label of every device, checks that the devices form
 * one complete pool, and tries the uberblocks newest first: the objset,
 * the space maps and deferred lists, and the volume's root pointer must
 * read and verify, and every pointer of them must point at allocated
 * space that nothing else owns (the pool's owner map, alloc.h: each
 * block's copies, the pending deferred frees, the log ring and the
 * volume's root take their sectors; a sector taken twice would be freed
 * twice, or while still in use).  The volume's tree below its root is
 * not walked: its cost would grow with the volume (seconds for tens of
 * GiB).  Each of its indirect blocks is checked as it is first read
 * (dmu.c: fields, and owners for its children, from the same map), and
 * a block that fails is refused then, with EIO for what it covers, as
 * OpenZFS verifies blocks when they are read and leaves the walk to
 * scrub.  verify=full (pc_verify_full) walks the whole tree at import
 * as before, taking every owner, so a damaged tree is found there and
 * the import rewinds or refuses.  The first uberblock that passes is
 * the candidate.  Then the
 * loss check (import_check_loss): importing it loses
 *   - every txg after it up to the newest valid uberblock N, when it is
 *     not N itself: those txgs committed (a txg's uberblock is written
 *     only after everything it wrote is flushed), so a tree that fails is
 *     damage, never a crash;
 *   - txg N+1 (and N+2... while the following slots are damaged too) when
 *     slot (N+1) % ZV_UB_COUNT holds no copy that verifies in any label
 *     of any device: a crash tears the copies of one label set at most
 *     (label.c), so a slot with none was damaged and may have held N+1.
 * Either refuses the import (-EIO, with what would be lost and how to
 * accept it) unless pc_rewind says to take the loss; taking it is a
 * warning, and a read-write import then empties the slots it gave up
 * (damaged ones, and those of the txgs newer than the one imported) so
 * that the next import neither refuses again nor meets a stale txg
 * newer than the pool's own.  Read-only imports refuse too: a warning
 * nobody asked for is no way to serve older data in place of newer.  A
 * pool created before its rings were prefilled (no ZV_CF_F_UB_EMPTY)
 * cannot tell a damaged slot from an unwritten one until the ring has
 * been written once (txg > ZV_UB_COUNT); below that it imports as
 * before, noted at info level.
 *
 * A rewind replays the imported txg's own intent-log header, never the
 * header of a txg it gave up (that objset does not verify, or its
 * uberblock is gone).  The chain from that header runs on into blocks
 * written after it as long as they verify (guid and seq seed each
 * checksum, an in-place block's pointer carries its checksum), so blocks
 * reused since, by the ring wrapping or by a later txg's allocations,
 * end it: what it recovers is flushed writes, never stale data.  When an
 * import came between the two txgs, the older header names the chain of
 * before it (every import begins a new one, which only later headers
 * name), and nothing flushed since is recovered: the refusal's message
 * says the loss includes such records (p_rewound tells the log's claim
 * that a vouched-for block may have been reused: zil_replay.c).
 *
 * A read-write import then claims each dataset's log (zv_zil_claim)
 * before anything can sync; a log damaged where acknowledged writes would
 * be lost, or holding a record that makes no sense, fails it there unless
 * the configuration's zil_recover says what to drop.  The claim takes
 * in-place blocks off the imported txg's pending deferred-free list; only
 * T's list is written by T's sync, so the first sync after a claim also
 * rewrites that one (psync_defer_prev), or T+1 would free blocks the
 * replay adopted.  A read-only import
 * claims nothing and replays nothing (zv_zil_inspect only reports what
 * the log holds).
 *
 * The dataset directory is read record by record (import_dsdir_cb): each
 * record alone (zv_dsdir_rec_check, dsdir.c: hostile data), then against
 * the others (ids, names, at most one volume on the log device) and the
 * pool (its log header, its root's space); then each volume's log is
 * claimed, and an in-place block a record names must be in no volume's
 * tree (import_space_live).
 *
 * A record of kind ZV_DS_KIND_FREE is a destroyed dataset the
 * background free has not finished (freeq.c): it is checked alone as
 * hostile data, its id against every record, and queued; its tree's
 * root or its dead list's object takes its owners with the pool's
 * metadata, the blocks below as the free reads them (or all at once
 * with verify=full, and in the checker's walk: zv_import_walk_freeq).
 *
 * Every owner is taken through import_take, and the walks that take a
 * tree's owners prune by the dataset's zv_import_ds_min_birth (the
 * blocks born after it are its own: snapshots set it).  The offline
 * checker (check.c) imports with p_check set: import_take then records
 * what the map refuses instead of failing, and the checker walks each
 * tree through zv_import_walk_tree, so it sees the same owners.
 *
 * State: an import fills the pool's structure (pool_impl.h) for one
 * uberblock at a time; one that fails is unloaded (zv_import_unload) and
 * the next older one tried.
 *
 * Locking: none of its own.  Import runs in zv_pool_open before the txg
 * engine or any volume exists; it takes dd_lock only where dsdir.c's
 * functions do.
 */
#include <config.h>

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <stdlib.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>

#include "pool_impl.h"
#include "snap.h"
#include "import.h"
#include "label.h"
#include "dbuf.h"
#include "mem.h"
#include "flat.h"
#include "tunable.h"
#include "check.h"
#include "scrub.h"

/* How to open the configuration's devices (RADOS ones: the cluster, and
 * with create the size of one not made yet). */
void
zv_import_dev_opts (const zv_pool_config_t *pc, bool log, zv_dev_opts_t *o)
{
  memset (o, 0, sizeof *o);
  o->do_ceph_conf = pc->pc_ceph_conf;
  o->do_ceph_user = pc->pc_ceph_user;
  o->do_ceph_keyring = pc->pc_ceph_keyring;
  o->do_takeover = pc->pc_rados_takeover && !pc->pc_create;
  /* A read-only import writes nothing, a mirror's repairs included. */
  o->do_no_repair = pc->pc_readonly;
  if (pc->pc_create)
    o->do_create_size = ZV_P2ALIGN (log ? pc->pc_rados_log_size
                                    : pc->pc_rados_size, ZV_SECTOR);
}

/* The memory monitor's view of the cache (mem.h). */
static uint64_t
import_cache_size (void *arg)
{
  return zv_dbuf_cache_bytes (arg);
}

static void
import_cache_apply (void *arg, uint64_t target)
{
  zv_dbuf_cache_set_target (arg, target);
}

/* Geometry shared by create and import. */
void
zv_import_setup (zv_pool_t *p, const zv_pool_config_t *pc)
{
  zv_spa_t *spa = &p->p_spa;
  uint64_t start[ZV_MAX_DEVS], end[ZV_MAX_DEVS];

  for (unsigned d = 0; d < spa->spa_ndevs; d++) {
    start[d] = zv_data_start ();
    end[d] = spa->spa_data_end[d];
  }
  spa->spa_alloc = zv_alloc_create (spa->spa_ndevs, start, end);
  uint64_t limit = pc->pc_cache_size ? pc->pc_cache_size
    : zv_dbuf_cache_limit_default ();
  p->p_cache = zv_dbuf_cache_create (limit);
  /* The configured size is a ceiling: the cache gives memory back when
   * the system runs short, down to a floor it needs to work. */
  p->p_cache_mem = zv_mem_register (limit, ZV_MIN (limit, ZV_MAX (limit / 64,
                                                                  32ull << 20)),
                                    import_cache_size, import_cache_apply,
                                    p->p_cache);
  for (unsigned d = 0; d < spa->spa_ndevs; d++)
    zv_flat_init (&p->p_spacemap[d], spa, ZV_OBJ_SPACEMAP0 + d,
                  ZV_BT_SPACEMAP, ZV_ALLOC_CHUNK,
                  zv_alloc_nchunks (spa->spa_alloc, d));
  for (unsigned i = 0; i < 2; i++)
    zv_flat_init (&p->p_defer[i], spa, ZV_OBJ_DEFER0 + i, ZV_BT_DEFER,
                  ZV_DEFER_BLKSZ, ZV_DEFER_NBLOCKS);
  zv_flat_init (&p->p_dd.dd_flat, spa, ZV_OBJ_DSDIR, ZV_BT_DSDIR,
                ZV_DSDIR_BLKSZ, ZV_DSDIR_NBLOCKS);
  p->p_capacity = 0;
  for (unsigned d = 0; d < spa->spa_ndevs; d++)
    p->p_capacity += end[d] - start[d];
}

/* Import: the devices must make one whole pool. */
static int
import_check_members (zv_pool_t *p, zv_dev_t **given, unsigned ngiven,
                    zv_config_phys_t *ref)
{
  zv_spa_t *spa = &p->p_spa;
  zv_config_phys_t cf[ZV_MAX_DEVS];
  char err[512];
  int r;

  ZV_VERIFY (ngiven >= 1 && ngiven <= ZV_MAX_DEVS);
  memset (cf, 0, sizeof cf);
  for (unsigned i = 0; i < ngiven; i++) {
    r = zv_label_read_config (given[i], &cf[i], NULL, err, sizeof err);
    if (r < 0) {
      zv_error ("%s%s", err, r == -ENOENT
                ? " (to make a new pool, pass create=true and size=)" : "");
      return r == -ENOENT ? -EINVAL : r;
    }
  }
  for (unsigned i = 0; i < ngiven; i++)
    if (cf[i].cf_role == ZV_ROLE_LOG) {
      zv_error ("%s is the log device of pool '%s': pass it with log=",
                zv_dev_path (given[i]), cf[i].cf_name);
      return -EINVAL;
    }
  *ref = cf[0];
  for (unsigned i = 1; i < ngiven; i++) {
    if (cf[i].cf_pool_guid != ref->cf_pool_guid) {
      zv_error ("%s belongs to pool '%s' (guid %016" PRIx64 "), not to "
                "pool '%s' (guid %016" PRIx64 ") of %s",
                zv_dev_path (given[i]), cf[i].cf_name, cf[i].cf_pool_guid,
                ref->cf_name, ref->cf_pool_guid, zv_dev_path (given[0]));
      return -EINVAL;
    }
  }
  if (ngiven != ref->cf_ndevs) {
    zv_error ("pool '%s' has %u device(s) but %u given: pass every device "
              "of the pool", ref->cf_name, ref->cf_ndevs, ngiven);
    return -EINVAL;
  }
  spa->spa_ndevs = ref->cf_ndevs;
  for (unsigned i = 0; i < ngiven; i++) {
    unsigned idx = cf[i].cf_dev_index;
    /* The index is checked against the device's own count: one past the
     * pool's would leave a slot of the pool empty (a NULL device). */
    if (idx >= ref->cf_ndevs || cf[i].cf_dev_guid != ref->cf_dev_guids[idx]
        || spa->spa_devs[idx] != NULL) {
      zv_error ("%s: device %u of pool '%s' does not match the pool's "
                "device table (given twice, or from an older pool)",
                zv_dev_path (given[i]), idx, ref->cf_name);
      return -EINVAL;
    }
    if (zv_dev_size (given[i]) < ref->cf_dev_sizes[idx]) {
      zv_error ("%s: device shrank (%" PRIu64 " bytes, pool needs %" PRIu64
                ")", zv_dev_path (given[i]), zv_dev_size (given[i]),
                ref->cf_dev_sizes[idx]);
      return -EINVAL;
    }
    spa->spa_devs[idx] = given[i];
    spa->spa_data_end[idx] = zv_data_end (ref->cf_dev_sizes[idx]);
  }
  return 0;
}

/* Import: the log device given must be the pool's, and must be given
 * when the pool has one. */
static int
import_check_logdev (zv_pool_t *p, const zv_pool_config_t *pc,
                   const zv_config_phys_t *ref)
{
  zv_config_phys_t cf;
  char err[1024];
  zv_dev_opts_t o;
  int r;

  if (ref->cf_log_guid == 0) {
    if (pc->pc_logdevice) {
      zv_error ("pool '%s' has no log device; %s cannot be added after "
                "create", ref->cf_name, pc->pc_logdevice);
      return -EINVAL;
    }
    return 0;
  }
  if (pc->pc_logdevice == NULL) {
    zv_error ("pool '%s' has a separate log device: pass it with log= "
              "(its records are needed to import)", ref->cf_name);
    return -EINVAL;
  }
  zv_import_dev_opts (pc, true, &o);
  r = zv_dev_open_opts (pc->pc_logdevice, &o, &p->p_logdev, err, sizeof err);
  if (r < 0) {
    zv_error ("%s", err);
    return r;
  }
  r = zv_label_read_config (p->p_logdev, &cf, NULL, err, sizeof err);
  if (r < 0) {
    zv_error ("%s", err);
    return r == -ENOENT ? -EINVAL : r;
  }
  if (cf.cf_pool_guid != ref->cf_pool_guid || cf.cf_role != ZV_ROLE_LOG
      || cf.cf_dev_guid != ref->cf_log_guid) {
    zv_error ("%s is not the log device of pool '%s'", pc->pc_logdevice,
              ref->cf_name);
    return -EINVAL;
  }
  if (cf.cf_dev_size != ref->cf_log_size) {
    zv_error ("%s: its label records %" PRIu64 " bytes, the pool's "
              "configuration %" PRIu64 " for its log device", pc->pc_logdevice,
              cf.cf_dev_size, ref->cf_log_size);
    return -EINVAL;
  }
  return 0;
}

/*
 * Import: the copies of a block the imported objset names must be
 * allocated space, and space nothing else owns (see alloc.h, the pool's
 * owners): two owners of a sector would each free it one day.
 */
/* Every owner is taken here, by import and by the offline checker
 * alike (p_check: check.c records a refusal and goes on, and names the
 * owners of space taken twice by taking them all again). */
static int
import_take (zv_pool_t *p, const char *what, unsigned level, uint64_t blkid,
           unsigned copy, uint64_t dva, uint32_t size)
{
  zv_check_who_t who = {
    .cw_what = what, .cw_level = level, .cw_blkid = blkid, .cw_copy = copy,
  };

  if (p->p_check)
    return zv_check_take (p->p_check, p->p_spa.spa_alloc, &who, dva, size);
  return zv_alloc_own (p->p_spa.spa_alloc, dva, size);
}

static int
import_own_bp (zv_pool_t *p, const zv_blkptr_t *bp, const char *what,
             unsigned level, uint64_t blkid)
{
  for (unsigned c = 0; c < bp->bp_ncopies && c < 2; c++) {
    int r = import_take (p, what, level, blkid, c + 1, bp->bp_dva[c],
                         bp->bp_psize);

    if (r == -EEXIST) {
      zv_error ("%s block (level %u, %" PRIu64 "): copy %u shares its "
                "space with another block", what, level, blkid, c + 1);
      return -EIO;
    }
    if (r < 0) {
      zv_error ("%s block (level %u, %" PRIu64 ") points at free space",
                what, level, blkid);
      return -EIO;
    }
  }
  return 0;
}

/* The full walk's state (verify=full, and the checker's walk). */
typedef struct import_verify {
  zv_pool_t *pv_pool;
  zv_pool_ds_t *pv_ds;
  const zv_pool_config_t *pv_pc;  /* NULL: no progress (the checker's) */
  uint64_t pv_done, pv_total;
  char pv_what[ZV_NAME_MAX + 16]; /* "volume 'NAME'" */
  zv_dmu_walk_fn pv_fn;           /* also sees each block (or NULL) */
  void *pv_arg;
} import_verify_t;

/* verify=full: every pointer of the volume tree must point at allocated
 * space that only it owns.  The walk gives each its owner, so the
 * indirect blocks it passed are checked (dmu.c skips them later). */
static int
import_verify_cb (void *arg, const zv_blkptr_t *bp, unsigned level,
                uint64_t blkid, const void *data)
{
  import_verify_t *pv = arg;
  zv_alloc_t *a = pv->pv_pool->p_spa.spa_alloc;
  int r = 0;

  /* The root took its space before the walk (import_load_ub). */
  if (level + 1u < pv->pv_ds->ds_obj.ob_nlevels || level == 0)
    r = import_own_bp (pv->pv_pool, bp, pv->pv_what, level, blkid);
  if (r < 0)
    return r;
  if (level > 0)
    zv_alloc_own_checked (a, bp->bp_dva[0]);
  if (pv->pv_fn) {
    r = pv->pv_fn (pv->pv_arg, bp, level, blkid, data);
    if (r != 0)
      return r;
  }
  if (pv->pv_pc == NULL)
    return 0;
  if (level == 1 || (level == 0 && blkid % 4096 == 0)) {
    pv->pv_done = ZV_MIN (pv->pv_total, level == 1
                          ? (blkid + 1) * ZV_INDIRECT_FANOUT : blkid + 1);
    if (pv->pv_pc->pc_progress && (level != 1 || blkid % 64 == 0))
      pv->pv_pc->pc_progress (pv->pv_pc->pc_progress_arg, "verify",
                              pv->pv_done, pv->pv_total);
  }
  return 0;
}

/* Space-map load: a chunk into the allocator. */
static int
import_chunk_load (void *arg, uint64_t blkid, const void *data)
{
  void **a = arg;
  return zv_alloc_chunk_load (a[0], (unsigned) (uintptr_t) a[1], blkid,
                              data);
}

/* Deferred-list load: re-queue the extents. */
typedef struct import_defer_load {
  zv_pool_t *dl_pool;
  uint64_t dl_txg;
  uint64_t dl_count;     /* entries still expected */
} import_defer_load_t;

/* Block blkid of a deferred-free list (see pool.h). */
int
zv_import_defer_load_block (zv_alloc_t *a, uint64_t txg, uint64_t count,
                          uint64_t blkid, const void *data)
{
  const zv_defer_ent_t *e = data;
  uint64_t first = blkid * ZV_DEFER_PER_BLK;

  for (uint64_t i = 0; i < ZV_DEFER_PER_BLK && first + i < count; i++) {
    if (e[i].de_size == 0 || e[i].de_size % ZV_SECTOR != 0
        || !zv_alloc_is_allocated (a, e[i].de_dva, e[i].de_size)) {
      zv_error ("deferred-free list of txg %" PRIu64 ": entry %" PRIu64
                " is not an allocated extent", txg, first + i);
      return -EIO;
    }
    zv_alloc_defer_load (a, txg, e[i].de_dva, e[i].de_size);
  }
  return 0;
}

static int
import_defer_load_cb (void *arg, uint64_t blkid, const void *data)
{
  import_defer_load_t *dl = arg;

  return zv_import_defer_load_block (dl->dl_pool->p_spa.spa_alloc, dl->dl_txg,
                                   dl->dl_count, blkid, data);
}

/*
 * Highest log head position and sequence number an import accepts.  Both
 * only grow (by one block, at most ZV_ZIL_BLKSZ bytes plus the ring end's
 * remainder) and restart at 1 / 0 after every replay; a log would need
 * decades at full speed to come near, and below this every sum of a
 * position with a ring size or a block size fits in 64 bits.
 */
#define IMPORT_ZIL_POS_MAX (1ull << 62)

/* The intent-log header from disk, of the objset of txg: ring inside its
 * device, in use; head and claim txg possible. */
static int
import_check_zil (zv_pool_t *p, const zv_zil_header_t *zh, uint64_t txg)
{
  uint64_t off = ZV_DVA_OFFSET (zh->zh_ring_dva);
  unsigned v = ZV_DVA_VDEV (zh->zh_ring_dva);
  uint64_t len = zh->zh_nslots * (uint64_t) zh->zh_blksz;

  if (zh->zh_magic != ZV_ZIL_MAGIC || zh->zh_version != ZV_FORMAT_VERSION
      || zh->zh_blksz != ZV_ZIL_BLKSZ || zh->zh_nslots < 2
      || zh->zh_nslots > (1ull << 32) || zh->zh_head_seq == 0
      || zh->zh_head_pos % ZV_SECTOR != 0
      || zh->zh_head_pos % len + zh->zh_blksz > len
      || off < zv_data_start () || off % ZV_SECTOR != 0) {
    zv_error ("intent log header is invalid");
    return -EIO;
  }
  /* A claim is the txg an import found, so it is never newer than the
   * objset carrying it; a larger one would make replay skip every record
   * (each is "older than the claim"), and a head near 2^64 would wrap the
   * position arithmetic: damage or a forgery, not "nothing to replay". */
  if (zh->zh_claim_txg > txg) {
    zv_error ("intent log header: claim txg %" PRIu64 " is after the txg "
              "of its objset (%" PRIu64 ")", zh->zh_claim_txg, txg);
    return -EIO;
  }
  if (zh->zh_head_pos >= IMPORT_ZIL_POS_MAX
      || zh->zh_head_seq >= IMPORT_ZIL_POS_MAX) {
    zv_error ("intent log header: head block %" PRIu64 " at position %"
              PRIu64 " is out of range", zh->zh_head_seq, zh->zh_head_pos);
    return -EIO;
  }
  /* A cut that a recovering import made (zil_recover=truncate) lies in
   * the chain, inside one block's records. */
  if ((zh->zh_flags & ZV_ZH_F_TRUNCATED)
      && (zh->zh_trunc_seq < zh->zh_head_seq
          || zh->zh_trunc_seq - zh->zh_head_seq > len / ZV_SECTOR
          || zh->zh_trunc_off >= zh->zh_blksz)) {
    zv_error ("intent log header: the cut at block %" PRIu64 ", byte %"
              PRIu64 " is outside the chain from block %" PRIu64,
              zh->zh_trunc_seq, zh->zh_trunc_off, zh->zh_head_seq);
    return -EIO;
  }
  if (v == ZV_LOG_VDEV) {
    if (p->p_logdev == NULL) {
      zv_error ("intent log header names a log device the pool does not "
                "have");
      return -EIO;
    }
    if (off + len > zv_data_end (zv_dev_size (p->p_logdev))) {
      zv_error ("intent log ring does not fit its log device");
      return -EIO;
    }
    return 0;
  }
  if (v >= p->p_spa.spa_ndevs || off + len > p->p_spa.spa_data_end[v]
      || len > UINT32_MAX
      || !zv_alloc_is_allocated (p->p_spa.spa_alloc, zh->zh_ring_dva,
                                 (uint32_t) len)) {
    zv_error ("intent log ring is outside the pool's allocated space");
    return -EIO;
  }
  return 0;
}

typedef struct import_dsdir {
  zv_pool_t *dl_pool;
  uint64_t dl_txg;
} import_dsdir_t;

/* A directory block at import: every record checked, alone (above) and
 * against the pool (unique id and name, its log header, its root), then
 * a dataset made of it. */
static int
import_dsdir_cb (void *arg, uint64_t blkid, const void *data)
{
  import_dsdir_t *dl = arg;
  zv_pool_t *p = dl->dl_pool;

  for (unsigned k = 0; k < ZV_DSDIR_PER_BLK; k++) {
    const zv_dsrec_phys_t *rec = (const zv_dsrec_phys_t *)
      ((const uint8_t *) data + k * ZV_DSREC_SIZE);
    uint64_t slot = blkid * ZV_DSDIR_PER_BLK + k;
    int r = zv_dsdir_rec_check (rec, slot, p->p_spa.spa_guid, dl->dl_txg,
                                 p->p_dd.dd_next_id);
    if (r == 1)
      continue;
    if (r < 0)
      return r;
    if ((slot + 1) * ZV_DSREC_SIZE > p->p_dd.dd_flat.fl_size) {
      zv_error ("dataset record %" PRIu64 ": past the directory's size",
                slot);
      return -EIO;
    }
    /* Ids are unique among every record, the queued frees' too. */
    const zv_freeq_ent_t *fe = zv_freeq_find_id (p, rec->dr_id);
    if (fe != NULL) {
      zv_error ("dataset record %" PRIu64 ": its id is also record %"
                PRIu64 "'s", slot, fe->fe_slot);
      return -EIO;
    }
    if (rec->dr_kind == ZV_DS_KIND_FREE) {
      for (size_t i = 0; i < p->p_dd.dd_nds; i++)
        if (p->p_dd.dd_dss[i]->ds_id == rec->dr_id) {
          zv_error ("dataset record %" PRIu64 ": its id is also record %"
                    PRIu64 "'s", slot, p->p_dd.dd_dss[i]->ds_slot);
          return -EIO;
        }
      if (!zv_bp_is_hole (&rec->dr_volume.dn_root)
          && zv_zio_bp_check (&p->p_spa, &rec->dr_volume.dn_root,
                              "background free's root") < 0) {
        zv_error ("dataset record %" PRIu64 " (a background free) is "
                  "refused", slot);
        return -EIO;
      }
      r = zv_freeq_load (p, rec, slot);
      if (r < 0)
        return r;
      continue;
    }
    bool snap = rec->dr_kind == ZV_DS_KIND_SNAPSHOT;
    for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
      const zv_pool_ds_t *o = p->p_dd.dd_dss[i];
      bool logs = !snap && o->ds_kind == ZV_DS_KIND_VOLUME
        && ZV_DVA_VDEV (o->ds_zil_hdr.zh_ring_dva) == ZV_LOG_VDEV
        && ZV_DVA_VDEV (rec->dr_zil.zh_ring_dva) == ZV_LOG_VDEV;
      /* Names are unique among a volume's snapshots, and among volumes. */
      bool same = o->ds_kind == rec->dr_kind
        && o->ds_parent_id == rec->dr_parent_id
        && strcmp (o->ds_name, rec->dr_name) == 0;
      if (o->ds_id == rec->dr_id || same || logs) {
        zv_error ("dataset record %" PRIu64 ": its %s is also record %"
                  PRIu64 "'s", slot, o->ds_id == rec->dr_id ? "id"
                  : logs ? "log device" : "name", o->ds_slot);
        return -EIO;
      }
    }
    r = snap ? 0 : import_check_zil (p, &rec->dr_zil, dl->dl_txg);
    if (r == 0 && !zv_bp_is_hole (&rec->dr_volume.dn_root)
        && zv_zio_bp_check (&p->p_spa, &rec->dr_volume.dn_root,
                            "volume root") < 0)
      r = -EIO;
    if (r < 0) {
      zv_error ("dataset record %" PRIu64 " (volume '%s') is refused", slot,
                rec->dr_name);
      return r;
    }
    zv_dsdir_init_t di = {
      .di_kind = rec->dr_kind, .di_parent_id = rec->dr_parent_id,
      .di_origin_id = rec->dr_origin_id,
      .di_prev_snap_id = rec->dr_prev_snap_id,
      .di_prev_snap_txg = rec->dr_prev_snap_txg,
      .di_written = rec->dr_written, .di_used = rec->dr_used,
      /* A record from before the field: its data was stored whole. */
      .di_lwritten = rec->dr_lwritten == 0 ? rec->dr_written
      : rec->dr_lwritten,
      .di_compress = rec->dr_compress,
      .di_name = rec->dr_name, .di_id = rec->dr_id, .di_slot = slot,
      .di_volsize = rec->dr_volsize, .di_blksz = rec->dr_volblocksize,
      .di_reservation = rec->dr_reservation,
      .di_creation_txg = rec->dr_creation_txg,
      .di_creation_time = rec->dr_creation_time,
      .di_guid = rec->dr_guid,
      .di_recv = (rec->dr_flags & ZV_DR_F_RECV_INCOMPLETE) != 0,
      .di_volume = &rec->dr_volume, .di_zil = snap ? NULL : &rec->dr_zil,
    };
    zv_dsdir_add (p, &di)->ds_rec = *rec;
  }
  return 0;
}

/* The blocks of a flat object (a space map, a deferred list), owned. */
static int
import_own_flat (zv_pool_t *p, const zv_flat_t *fl, const char *what)
{
  for (unsigned l = 0; l < fl->fl_nlevels; l++)
    for (uint64_t i = 0; i < fl->fl_len[l]; i++)
      if (!zv_bp_is_hole (&fl->fl_bps[l][i])) {
        int r = import_own_bp (p, &fl->fl_bps[l][i], what, l, i);
        if (r < 0)
          return r;
      }
  return 0;
}

typedef struct import_own_defer {
  zv_pool_t *od_pool;
  uint64_t od_txg;
  char od_what[64];
  int od_err;
} import_own_defer_t;

/* A pending deferred free owns its extent until it is applied: a block
 * still in use, or another entry, must not overlap it. */
static void
import_own_defer_cb (void *arg, uint64_t dva, uint32_t size)
{
  import_own_defer_t *od = arg;

  if (od->od_err == 0
      && import_take (od->od_pool, od->od_what, 0, 0, 0, dva, size) < 0) {
    zv_error ("deferred-free list of txg %" PRIu64 ": extent (device %u "
              "offset %" PRIu64 ", %" PRIu32 " bytes) shares its space with "
              "a block in use or another entry", od->od_txg,
              ZV_DVA_VDEV (dva), ZV_DVA_OFFSET (dva), size);
    od->od_err = -EIO;
  }
}

/*
 * Import: the owners of everything but the volume's tree below its root
 * (whose indirect blocks take their children's space as they are first
 * read, dmu.c, or all at once with verify=full): the objset, the space
 * maps' and deferred lists' blocks, the pending deferred frees, the log
 * ring and the volume's root block.
 */
static int
import_own_meta (zv_pool_t *p, const zv_blkptr_t *osbp,
               const zv_objset_phys_t *os)
{
  char what[4 * ZV_NAME_MAX + 32];
  int r;

  zv_alloc_own_begin (p->p_spa.spa_alloc);
  r = import_own_bp (p, osbp, "objset", 0, 0);
  if (r == 0)
    r = import_own_flat (p, &p->p_dd.dd_flat, "dataset directory");
  for (unsigned d = 0; d < p->p_spa.spa_ndevs && r == 0; d++) {
    snprintf (what, sizeof what, "space map %u", d);
    r = import_own_flat (p, &p->p_spacemap[d], what);
  }
  for (unsigned i = 0; i < 2 && r == 0; i++)
    r = import_own_flat (p, &p->p_defer[i], "deferred-free list");
  for (unsigned i = 0; i < 2 && r == 0; i++) {
    import_own_defer_t od = { .od_pool = p,
                            .od_txg = os->os_defer[i].dn_txg };
    snprintf (od.od_what, sizeof od.od_what, "deferred free of txg %" PRIu64,
              od.od_txg);
    /* Both lists in one txg would be the same allocator list: once. */
    if (os->os_defer[i].dn_size == 0
        || (i == 1 && os->os_defer[0].dn_size > 0
            && os->os_defer[0].dn_txg == od.od_txg))
      continue;
    zv_alloc_defer_foreach (p->p_spa.spa_alloc, od.od_txg,
                            import_own_defer_cb, &od);
    r = od.od_err;
  }
  for (size_t i = 0; i < p->p_dd.dd_nds && r == 0; i++) {
    zv_pool_ds_t *ds = p->p_dd.dd_dss[i];
    const zv_zil_header_t *zh = &ds->ds_zil_hdr;
    const zv_dnode_phys_t *dn = &ds->ds_rec.dr_volume;
    zv_flat_t *dlf = zv_deadlist_flat (&ds->ds_deadlist);

    if (dlf != NULL && (r = import_own_flat (p, dlf, "dead list")) < 0)
      break;
    /* A snapshot has no log; a root born before the dataset's newest
     * snapshot is that snapshot's (each dataset owns what was born after
     * its line: snap.c). */
    if (ds->ds_kind == ZV_DS_KIND_SNAPSHOT) {
      snprintf (what, sizeof what, "snapshot '%s@%s'",
                ds->ds_parent ? ds->ds_parent->ds_name : "?", ds->ds_name);
      if (!zv_bp_is_hole (&dn->dn_root)
          && dn->dn_root.bp_birth > zv_import_ds_min_birth (ds))
        r = import_own_bp (p, &dn->dn_root, what, dn->dn_nlevels - 1u, 0);
      continue;
    }
    snprintf (what, sizeof what, "intent log ring of '%s'", ds->ds_name);
    if (ZV_DVA_VDEV (zh->zh_ring_dva) != ZV_LOG_VDEV
        && import_take (p, what, 0, 0, 0, zh->zh_ring_dva,
                        (uint32_t) (zh->zh_nslots * zh->zh_blksz)) < 0) {
      zv_error ("volume '%s': intent log ring shares its space with a "
                "block in use", ds->ds_name);
      r = -EIO;
    }
    snprintf (what, sizeof what, "volume '%s'", ds->ds_name);
    if (r == 0 && !zv_bp_is_hole (&dn->dn_root)
        && dn->dn_root.bp_birth > zv_import_ds_min_birth (ds))
      r = import_own_bp (p, &dn->dn_root, what, dn->dn_nlevels - 1u, 0);
  }
  /* What the queued frees still hold: a tree's root (its blocks below
   * take their owners as the free reads them, freeq.c), a dead list's
   * object (its entries' blocks: as they are freed). */
  for (size_t i = 0; i < p->p_freeq.fq_n && r == 0; i++) {
    zv_freeq_ent_t *e = p->p_freeq.fq_ents[i];
    zv_flat_t *dlf = zv_deadlist_flat (&e->fe_dl);

    snprintf (what, sizeof what, "background free of %s", e->fe_shown);
    if (e->fe_tree)
      r = import_own_bp (p, &e->fe_dn.dn_root, what,
                         e->fe_dn.dn_nlevels - 1u, 0);
    else if (dlf != NULL)
      r = import_own_flat (p, dlf, what);
  }
  return r;
}

/*
 * The blocks of its tree a dataset owns: those born after this txg, its
 * previous snapshot's (a clone's: its origin's).  A block two datasets
 * share is owned once, by the oldest that has it (snap.c), and every
 * walk that takes owners (verify=full and the checker's) prunes by it.
 */
uint64_t
zv_import_ds_min_birth (const zv_pool_ds_t *ds)
{
  return ds->ds_prev_snap_txg;
}

/* One dataset's tree, walked for its owners (every block a pointer of
 * it names that it owns, each copy, but what skip leaves out);
 * pv->pv_fn sees every block too. */
static int
import_walk_skip (import_verify_t *pv, zv_pool_ds_t *ds, zv_dmu_skip_fn skip,
                  void *skip_arg)
{
  pv->pv_ds = ds;
  snprintf (pv->pv_what, sizeof pv->pv_what, "volume '%s'", ds->ds_name);
  return zv_dmu_walk_since_skip (&pv->pv_pool->p_spa, ds->ds_obj.ob_id,
                                 &ds->ds_rec.dr_volume,
                                 zv_import_ds_min_birth (ds), skip, skip_arg,
                                 import_verify_cb, pv);
}

static int
import_walk (import_verify_t *pv, zv_pool_ds_t *ds)
{
  return import_walk_skip (pv, ds, NULL, NULL);
}

int
zv_import_walk_tree (zv_pool_t *p, zv_pool_ds_t *ds, zv_dmu_walk_fn fn,
                     void *arg)
{
  return zv_import_walk_tree_skip (p, ds, NULL, NULL, fn, arg);
}

int
zv_import_walk_tree_skip (zv_pool_t *p, zv_pool_ds_t *ds,
                          zv_dmu_skip_fn skip, void *skip_arg,
                          zv_dmu_walk_fn fn, void *arg)
{
  import_verify_t pv = { .pv_pool = p, .pv_fn = fn, .pv_arg = arg };

  return import_walk_skip (&pv, ds, skip, skip_arg);
}

/* A queued free's walk for its owners: every block it still holds but
 * the root (import_own_meta took it), each copy; pv_fn sees each. */
typedef struct import_fq {
  zv_pool_t *if_pool;
  zv_freeq_ent_t *if_e;
  char if_what[3 * ZV_NAME_MAX + 32];
  zv_dmu_walk_fn if_fn;
  void *if_arg;
} import_fq_t;

static int
import_fq_cb (void *arg, const zv_blkptr_t *bp, unsigned level,
              uint64_t blkid, const void *data)
{
  import_fq_t *f = arg;
  int r = 0;

  if (level + 1u < f->if_e->fe_dn.dn_nlevels)
    r = import_own_bp (f->if_pool, bp, f->if_what, level, blkid);
  if (r < 0)
    return r;
  /* Its children are owned by this walk: the free's first read of it
   * takes nothing again (zv_alloc_own_children). */
  if (level > 0)
    zv_alloc_own_checked (f->if_pool->p_spa.spa_alloc, bp->bp_dva[0]);
  return f->if_fn ? f->if_fn (f->if_arg, bp, level, blkid, data) : 0;
}

static int
import_fq_ent_cb (void *arg, const zv_deadlist_ent_t *de)
{
  import_fq_t *f = arg;

  for (unsigned c = 0; c < de->de_ncopies && c < 2; c++)
    if (import_take (f->if_pool, f->if_what, de->de_level, 0, c + 1,
                     de->de_dva[c], de->de_psize) < 0) {
      zv_error ("%s: an entry's copy %u points at free space or shares "
                "its space with a block in use", f->if_what, c + 1);
      return -EIO;
    }
  return 0;
}

int
zv_import_walk_freeq (zv_pool_t *p, zv_freeq_ent_t *e, zv_dmu_walk_fn fn,
                      void *arg)
{
  import_fq_t f = { .if_pool = p, .if_e = e, .if_fn = fn, .if_arg = arg };
  int r;

  snprintf (f.if_what, sizeof f.if_what, "background free of %s",
            e->fe_shown);
  r = zv_freeq_walk (p, e, import_fq_cb, import_fq_ent_cb, &f);
  /* Every owner it holds is taken: the free takes none again. */
  if (r == 0)
    e->fe_own = false;
  return r;
}

/* The checker's last owners: the in-place blocks the datasets' logs
 * would claim, where nothing else owns them (the claim's rule: space a
 * tree uses is never a record's). */
static void
import_own_log_cb (void *arg, uint64_t dva, uint32_t size)
{
  zv_pool_t *p = arg;

  if (zv_alloc_is_allocated (p->p_spa.spa_alloc, dva, size))
    zv_alloc_own_rest (p->p_spa.spa_alloc, dva, size);
}

void
zv_import_own_log_blocks (zv_pool_t *p)
{
  for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
    zv_pool_ds_t *ds = p->p_dd.dd_dss[i];
    if (ds->ds_kind == ZV_DS_KIND_SNAPSHOT)
      continue;                 /* no log */
    zv_zil_foreach_claim (&p->p_spa, p->p_logdev, &ds->ds_zil_hdr,
                          p->p_synced_txg, ds->ds_blksz, ds->ds_volsize,
                          import_own_log_cb, p);
  }
}

/* Load everything uberblock 'ub' names, verifying as we go. */
static int
import_load_ub (zv_pool_t *p, const zv_pool_config_t *pc,
              const zv_uberblock_phys_t *ub)
{
  zv_spa_t *spa = &p->p_spa;
  const zv_blkptr_t *bp = &ub->ub_rootbp;
  zv_objset_phys_t *os = NULL;
  uint64_t txg = ub->ub_txg;
  char what[64];
  int r;

  snprintf (what, sizeof what, "objset of txg %" PRIu64, txg);
  /* Exactly what the sync writes (psync_meta): one objset block,
   * born in this txg (an older birth would be a block a later sync may
   * rewrite in place; a newer one a txg that never committed). */
  if (zv_bp_is_hole (bp) || bp->bp_type != ZV_BT_OBJSET
      || bp->bp_psize != ZV_OBJSET_SIZE || bp->bp_lsize != ZV_OBJSET_SIZE
      || bp->bp_level != 0 || bp->bp_comp != 0 || bp->bp_birth != txg
      || bp->bp_fill != 1 || bp->bp_ncopies < 1 || bp->bp_ncopies > 2) {
    zv_error ("%s: invalid root pointer (size %" PRIu32 "/%" PRIu32
              ", level %u, birth %" PRIu64 ", fill %" PRIu64 ", %u copies, "
              "compression %u)", what, bp->bp_psize, bp->bp_lsize,
              bp->bp_level, bp->bp_birth, bp->bp_fill, bp->bp_ncopies,
              bp->bp_comp);
    return -EIO;
  }
  os = zv_buf_alloc (ZV_OBJSET_SIZE);
  r = zv_zio_read (spa, bp, os, what);
  if (r < 0)
    goto out;
  /* The objset's version is the configuration's, or newer (a version-2
   * pool upgraded: its labels stay version 2). */
  if (os->os_hdr.mh_magic == ZV_MBLK_MAGIC
      && (os->os_hdr.mh_version > ZV_POOL_VERSION
          || (os->os_features & ~(os->os_hdr.mh_version >= ZV_POOL_VERSION
                                  ? ZV_FEAT_KNOWN : 0)) != 0)) {
    zv_error ("%s: pool '%s' is of format version %u with features 0x%"
              PRIx64 ", which this build does not read (it knows version %u, "
              "features 0x%llx): serve it with a newer release", what,
              p->p_name, os->os_hdr.mh_version, os->os_features,
              ZV_POOL_VERSION, (unsigned long long) ZV_FEAT_KNOWN);
    r = -EIO;
    goto out;
  }
  if (os->os_hdr.mh_magic != ZV_MBLK_MAGIC
      || os->os_hdr.mh_version < ZV_POOL_VERSION_2
      || os->os_hdr.mh_version < spa->spa_version
      || os->os_hdr.mh_type != ZV_BT_OBJSET || os->os_txg != txg
      || os->os_pool_guid != spa->spa_guid
      || os->os_ndevs != spa->spa_ndevs) {
    zv_error ("%s: header does not match the pool", what);
    r = -EIO;
    goto out;
  }
  /* No object of this objset can have been written after it. */
  for (unsigned i = 0; i < 3 + spa->spa_ndevs; i++) {
    const zv_dnode_phys_t *dn = i == 0 ? &os->os_dsdir
      : i < 3 ? &os->os_defer[i - 1] : &os->os_spacemap[i - 3];
    if (!zv_bp_is_hole (&dn->dn_root) && dn->dn_root.bp_birth > txg) {
      unsigned obj = i == 0 ? ZV_OBJ_DSDIR : i < 3 ? ZV_OBJ_DEFER0 + i - 1
        : ZV_OBJ_SPACEMAP0 + i - 3;
      zv_error ("%s: object %u's root block is born in txg %" PRIu64
                ", after the objset", what, obj, dn->dn_root.bp_birth);
      r = -EIO;
      goto out;
    }
  }
  zv_import_setup (p, pc);
  for (unsigned d = 0; d < spa->spa_ndevs && r == 0; d++) {
    void *arg[2] = { spa->spa_alloc, (void *) (uintptr_t) d };
    r = zv_flat_load (&p->p_spacemap[d], &os->os_spacemap[d],
                      import_chunk_load, arg);
  }
  for (unsigned i = 0; i < 2 && r == 0; i++) {
    const zv_dnode_phys_t *dn = &os->os_defer[i];
    import_defer_load_t dl = {
      .dl_pool = p, .dl_txg = dn->dn_txg,
      .dl_count = dn->dn_size / sizeof (zv_defer_ent_t),
    };
    if (dn->dn_size % sizeof (zv_defer_ent_t) != 0
        || (dn->dn_size > 0 && (dn->dn_txg > txg || dn->dn_txg + 2 <= txg))) {
      zv_error ("%s: deferred-free list %u is inconsistent (txg %" PRIu64
                ", %" PRIu64 " bytes)", what, i, dn->dn_txg, dn->dn_size);
      r = -EIO;
      break;
    }
    r = zv_flat_load (&p->p_defer[i], dn, import_defer_load_cb, &dl);
  }
  if (r < 0)
    goto out;
  if (os->os_next_dsid == 0 || os->os_next_dsid >= (1ull << 62)) {
    zv_error ("%s: next dataset id %" PRIu64 " is out of range", what,
              os->os_next_dsid);
    r = -EIO;
    goto out;
  }
  p->p_dd.dd_next_id = os->os_next_dsid;
  zv_scrub_phys_load (p, (const zv_scan_phys_t *) (const void *)
                      ((const uint8_t *) os + ZV_SCAN_OFFSET));
  spa->spa_version = os->os_hdr.mh_version;
  atomic_fetch_or (&spa->spa_features, os->os_features);
  {
    import_dsdir_t dl = { .dl_pool = p, .dl_txg = txg };
    r = zv_flat_load (&p->p_dd.dd_flat, &os->os_dsdir, import_dsdir_cb, &dl);
  }
  if (r == 0)
    r = zv_snap_link (p);
  if (r == 0)
    r = import_own_meta (p, bp, os);
  if (r < 0)
    goto out;
  /* The volumes' indirect blocks are checked as they are first read
   * (dmu.c), so import costs the same whatever the volumes hold;
   * verify=full checks every tree now, as a scrub would. */
  spa->spa_own_txg = txg;
  if (pc->pc_verify_full) {
    import_verify_t pv = { .pv_pool = p, .pv_pc = pc };
    for (size_t i = 0; i < p->p_dd.dd_nds; i++)
      pv.pv_total += p->p_dd.dd_dss[i]->ds_rec.dr_volume.dn_nblocks;
    for (size_t i = 0; i < p->p_dd.dd_nds && r == 0; i++)
      r = import_walk (&pv, p->p_dd.dd_dss[i]);
    for (size_t i = 0; i < p->p_freeq.fq_n && r == 0; i++)
      r = zv_import_walk_freeq (p, p->p_freeq.fq_ents[i], NULL, NULL);
    if (r < 0)
      goto out;
    p->p_verified = true;
    if (pc->pc_progress)
      pc->pc_progress (pc->pc_progress_arg, "verify", pv.pv_total,
                       pv.pv_total);
  }
  p->p_objset_bp = *bp;
  p->p_synced_txg = txg;
  zv_freeq_imported (p);
 out:
  zv_buf_free (os);
  return r;
}

/* Drop the space maps, deferred lists, cache and allocator (a failed
 * import_load_ub, so the next uberblock starts clean; and pool_free). */
void
zv_import_unload (zv_pool_t *p)
{
  zv_dsdir_drop_all (p);
  zv_freeq_drop_all (p);
  if (p->p_dd.dd_flat.fl_spa)
    zv_flat_fini (&p->p_dd.dd_flat);
  for (unsigned d = 0; d < ZV_MAX_DEVS; d++)
    if (p->p_spacemap[d].fl_spa)
      zv_flat_fini (&p->p_spacemap[d]);
  for (unsigned i = 0; i < 2; i++)
    if (p->p_defer[i].fl_spa)
      zv_flat_fini (&p->p_defer[i]);
  zv_mem_unregister (p->p_cache_mem);
  p->p_cache_mem = NULL;
  if (p->p_cache) {
    zv_dbuf_cache_destroy (p->p_cache);
    p->p_cache = NULL;
  }
  if (p->p_spa.spa_alloc) {
    zv_alloc_destroy (p->p_spa.spa_alloc);
    p->p_spa.spa_alloc = NULL;
  }
}

/*
 * The txgs after the newest valid uberblock 'newest' that may have
 * committed: the run of slots from (newest + 1) % ZV_UB_COUNT on that
 * hold no copy that verifies (marked in discard).  Without the prefilled
 * ring a slot that never held a txg (txg - ZV_UB_COUNT below 1) is zeros
 * when intact, so the run stops there: nothing can be told.
 */
static unsigned
import_ub_missing (bool prefilled, uint64_t newest, const zv_ub_slot_t *slots,
                 bool *discard)
{
  unsigned k = 0;

  for (unsigned j = 1; j < ZV_UB_COUNT; j++) {
    uint64_t txg = newest + j;
    unsigned s = (unsigned) (txg % ZV_UB_COUNT);

    if (slots[s].us_valid > 0 || (!prefilled && txg <= ZV_UB_COUNT))
      break;
    discard[s] = true;
    k++;
  }
  return k;
}

/* "txg A" or "txgs A to B" */
static void
import_txg_range (char *buf, size_t len, uint64_t a, uint64_t b)
{
  if (a == b)
    snprintf (buf, len, "txg %" PRIu64, a);
  else
    snprintf (buf, len, "txgs %" PRIu64 " to %" PRIu64, a, b);
}

/*
 * Would importing the loaded uberblock, cands[chosen], lose txgs that
 * committed or may have?  Say what, then refuse (-EIO) or, with
 * pc_rewind, warn and take it (see the theory comment).  cands[0] is the
 * newest uberblock found.
 */
static int
import_check_loss (zv_pool_t *p, const zv_pool_config_t *pc,
                 const zv_config_phys_t *ref, const zv_ub_cand_t *cands,
                 int chosen)
{
  zv_spa_t *spa = &p->p_spa;
  zv_ub_slot_t slots[ZV_UB_COUNT];
  bool discard[ZV_UB_COUNT] = { false };
  bool prefilled = (ref->cf_flags & ZV_CF_F_UB_EMPTY) != 0;
  uint64_t txg = p->p_synced_txg, newest = cands[0].uc_ub.ub_txg;
  char done[160] = "", maybe[384] = "", range[64];
  unsigned k;
  int r;

  ZV_VERIFY3U (txg, ==, cands[chosen].uc_ub.ub_txg);
  ZV_VERIFY3U (txg, <=, newest);
  r = zv_label_ring_state (spa->spa_devs, spa->spa_ndevs, spa->spa_guid,
                           slots);
  if (r < 0) {
    zv_error ("pool '%s': the uberblock rings cannot be read again",
              p->p_name);
    return r;
  }
  if (!prefilled)
    zv_info ("pool '%s' was created before uberblock rings were filled "
             "with empty uberblocks: a damaged uberblock slot is told from "
             "an unwritten one only once every slot has held a txg "
             "(after txg %u; the newest is %" PRIu64 ")", p->p_name,
             ZV_UB_COUNT, newest);
  k = import_ub_missing (prefilled, newest, slots, discard);
  if (k == 0 && chosen == 0) {
    if (pc->pc_rewind)
      zv_info ("pool '%s': rewind=true, but txg %" PRIu64 " is the newest "
               "and intact: nothing to rewind", p->p_name, txg);
    return 0;
  }

  if (txg < newest) {
    import_txg_range (range, sizeof range, txg + 1, newest);
    snprintf (done, sizeof done, "%s, which committed but whose tree does "
              "not verify", range);
  }
  else if (chosen > 0)           /* the same txg, written again later */
    snprintf (done, sizeof done, "the later uberblock of txg %" PRIu64
              ", whose tree does not verify", txg);
  if (k > 0) {
    unsigned s = (unsigned) ((newest + 1) % ZV_UB_COUNT);
    char slot[48];

    import_txg_range (range, sizeof range, newest + 1, newest + k);
    if (k == 1)
      snprintf (slot, sizeof slot, "its uberblock slot, %u, is", s);
    else
      snprintf (slot, sizeof slot, "their uberblock slots, %u to %u, are",
                s, (unsigned) ((newest + k) % ZV_UB_COUNT));
    snprintf (maybe, sizeof maybe, "%s%s, which may have committed (%s "
              "damaged in every copy: %u, both labels of %u device%s)",
              done[0] ? ", and " : "", range, slot, slots[s].us_copies,
              spa->spa_ndevs, spa->spa_ndevs == 1 ? "" : "s");
  }
  if (!pc->pc_rewind) {
    zv_error ("pool '%s': importing txg %" PRIu64 ", the newest intact "
              "one, would lose %s%s: the writes those txgs synced, and the "
              "intent-log records flushed after them that txg %" PRIu64
              "'s own log chain no longer reaches.  Refusing to import; "
              "to import txg %" PRIu64 " and accept that loss, pass "
              "rewind=true (with readonly=true to look at it first "
              "without writing anything)", p->p_name, txg, done, maybe,
              txg, txg);
    return -EIO;
  }
  zv_warn ("pool '%s': rewound to txg %" PRIu64 " (rewind=true), losing "
           "%s%s; %s", p->p_name, txg, done, maybe, p->p_readonly
           ? "read-only: nothing is written and the intent log is not "
           "replayed, so a read-write import refuses again without "
           "rewind=true"
           : "the intent log of that txg is replayed as far as its blocks "
           "are intact, and the uberblock slots given up are emptied");
  p->p_rewound = true;
  if (!p->p_readonly) {
    memcpy (p->p_ub_discard, discard, sizeof discard);
    p->p_ub_keep = cands[chosen].uc_ub;
    p->p_ub_discard_pending = true;
  }
  return 0;
}

/*
 * An accepted rewind, once every import check passed: empty the slots it
 * gave up (label by label, each flushed) so the acceptance is durable.
 * A crash in between leaves some copies: the next import asks again.
 */
int
zv_import_ub_discard (zv_pool_t *p)
{
  zv_spa_t *spa = &p->p_spa;
  unsigned n = 0;
  int r = 0;

  for (unsigned l = 0; l < ZV_NLABELS && r == 0; l++) {
    r = zv_label_discard (spa->spa_devs, spa->spa_ndevs, spa->spa_guid,
                          &p->p_ub_keep, p->p_ub_discard, l);
    if (r >= 0) {
      n += (unsigned) r;
      r = zv_zio_flush_all (spa);
    }
  }
  if (r < 0) {
    zv_error ("pool '%s': emptying the uberblock slots the rewind gave "
              "up failed: %s", p->p_name, strerror (-r));
    return r;
  }
  p->p_ub_discard_pending = false;
  zv_info ("pool '%s': emptied %u uberblock copies the rewind to txg %"
           PRIu64 " gave up", p->p_name, n, p->p_synced_txg);
  return 0;
}

/* Import an existing pool, refusing to lose committed txgs unasked. */
int
zv_import_pool (const zv_pool_config_t *pc, zv_pool_t *p, zv_dev_t **given)
{
  zv_spa_t *spa = &p->p_spa;
  zv_config_phys_t ref;
  enum { MAXCAND = ZV_UB_COUNT * ZV_NLABELS * 2 };
  zv_ub_cand_t *cands;
  int n, r, chosen;

  r = import_check_members (p, given, pc->pc_ndevices, &ref);
  if (r < 0)
    return r;
  /* A view borrows the served pool's log device, checked at its open. */
  r = p->p_view ? 0 : import_check_logdev (p, pc, &ref);
  if (r < 0)
    return r;
  spa->spa_guid = ref.cf_pool_guid;
  spa->spa_version = ref.cf_flags & ZV_CF_F_FEATURES ? ZV_POOL_VERSION
    : ZV_POOL_VERSION_2;
  atomic_store (&spa->spa_features, ref.cf_features);
  snprintf (p->p_name, sizeof p->p_name, "%s", ref.cf_name);

  cands = zv_calloc (MAXCAND, sizeof *cands);
  n = zv_label_collect_ubs (spa->spa_devs, spa->spa_ndevs, spa->spa_guid,
                            cands, MAXCAND);
  if (n <= 0) {
    zv_error ("pool '%s': no valid uberblock on any device%s", p->p_name,
              n < 0 ? " (labels unreadable)" : "");
    free (cands);
    return -EIO;
  }
  r = -EIO;
  for (chosen = 0; chosen < n; chosen++) {
    const zv_uberblock_phys_t *ub = &cands[chosen].uc_ub;
    /* A view (zv_pool_open_view) is of one txg, which a hold keeps. */
    if (p->p_view && ub->ub_txg != p->p_view_txg) {
      r = -ENOENT;
      continue;
    }
    r = import_load_ub (p, pc, ub);
    if (r == 0)
      break;
    zv_error ("pool '%s': uberblock of txg %" PRIu64 " does not verify; "
              "trying an older one", p->p_name, ub->ub_txg);
    zv_import_unload (p);
    if (p->p_check)
      zv_check_forget (p->p_check);
    if (p->p_view)
      break;                    /* its one txg does not verify */
  }
  if (r == 0 && !p->p_view)
    r = import_check_loss (p, pc, &ref, cands, chosen);
  else if (r == -ENOENT && p->p_view)
    zv_error ("pool '%s': the uberblock of txg %" PRIu64 " is not in the "
              "labels any more", p->p_name, p->p_view_txg);
  else if (r < 0)
    zv_error ("pool '%s': no uberblock's tree verifies; cannot import",
              p->p_name);
  free (cands);
  if (r < 0)
    return r;
  if (p->p_view)
    zv_debug ("pool '%s': a view of txg %" PRIu64 " for the live check",
              p->p_name, p->p_synced_txg);
  else
    zv_info ("imported pool '%s' (guid %016" PRIx64 ") at txg %" PRIu64,
             p->p_name, spa->spa_guid, p->p_synced_txg);
  return 0;
}

static bool import_space_live (void *arg, uint64_t dva, uint32_t size,
                             uint64_t blkid);

/*
 * A read-write import claims what the datasets' intent logs hold before
 * anything can sync: the in-place blocks their records point at become
 * allocated (else the next sync might allocate over them), and the
 * header records the imported txg, so that a replay after more txgs have
 * synced (the volume opened later, or a crash before it was) still
 * applies exactly the records of the txgs that never reached the disk.
 */
int
zv_import_claim_logs (zv_pool_t *p)
{
  for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
    zv_pool_ds_t *ds = p->p_dd.dd_dss[i];
    if (ds->ds_kind == ZV_DS_KIND_SNAPSHOT)
      continue;                 /* no log */
    int r = zv_zil_claim (&p->p_spa, p->p_logdev, &ds->ds_zil_hdr,
                          p->p_synced_txg, ds->ds_blksz, ds->ds_volsize,
                          p->p_zil_recover, p->p_rewound, import_space_live,
                          ds);

    if (r >= 0 && ds->ds_zil_hdr.zh_claim_count > 0)
      p->p_defer_rewrite = true;
    if (r < 0) {
      zv_error ("pool '%s': claiming the intent log of '%s' failed: %s",
                p->p_name, ds->ds_name, strerror (-r));
      return r;
    }
  }
  return 0;
}

/* A read-only import claims and replays nothing (it serves the synced
 * txg); it only says what the log holds, and whether a read-write import
 * would be refused. */
void
zv_import_inspect_logs (zv_pool_t *p)
{
  for (size_t i = 0; i < p->p_dd.dd_nds; i++)
    if (p->p_dd.dd_dss[i]->ds_kind == ZV_DS_KIND_VOLUME)
      zv_zil_inspect (&p->p_spa, p->p_logdev, &p->p_dd.dd_dss[i]->ds_zil_hdr,
                    p->p_synced_txg, p->p_dd.dd_dss[i]->ds_blksz,
                    p->p_dd.dd_dss[i]->ds_volsize, p->p_rewound);
}

/* Is [dva, dva+size) used by the synced tree?  For the log's claim: an
 * in-place block the bitmap shows allocated may still be the record's
 * (a sync that ran beside the write stored the bit), but never space the
 * objset of the imported txg reaches.  The pool's owners answer for what
 * import owned (the objset, space maps, deferred lists and frees, the
 * ring, the volume's root) and for the indirect blocks read so far; the
 * record's own block and every indirect block above it are read first
 * (each one's children take their owners as it loads, dmu.c), which
 * catches a record naming its own block's old copy or the indirect
 * blocks over it.  Space still unowned then can be another volume
 * block's: unless verify=full knew every owner, the tree is walked, only
 * for such a block (which only a crash leaves).  A pointer found later
 * naming space the claim took is refused as it loads (alloc.h). */
typedef struct import_live {
  uint64_t pl_dva;
  uint32_t pl_size;
} import_live_t;

static bool
import_overlaps (const import_live_t *pl, uint64_t dva, uint32_t size)
{
  return dva != 0 && ZV_DVA_VDEV (dva) == ZV_DVA_VDEV (pl->pl_dva)
    && dva < pl->pl_dva + pl->pl_size && pl->pl_dva < dva + size;
}

static int
import_live_fn (void *arg, const zv_blkptr_t *bp, unsigned level,
              uint64_t blkid, const void *data)
{
  const import_live_t *pl = arg;

  for (unsigned c = 0; c < bp->bp_ncopies && c < 2; c++)
    if (import_overlaps (pl, bp->bp_dva[c], bp->bp_psize))
      return 1;
  return 0;
}

static bool
import_space_live (void *arg, uint64_t dva, uint32_t size, uint64_t blkid)
{
  zv_pool_ds_t *ds = arg;
  zv_pool_t *p = ds->ds_pool;
  zv_alloc_t *a = p->p_spa.spa_alloc;
  zv_dnode_phys_t dn;
  zv_blkptr_t bp;
  import_live_t pl = { dva, size };

  if (zv_alloc_own_any (a, dva, size))
    return true;
  if (zv_dmu_block_bp (&ds->ds_obj, blkid, &bp) < 0)
    return true;              /* an error: assume live, refuse the claim */
  if (zv_alloc_own_any (a, dva, size))
    return true;
  if (p->p_verified)
    return false;
  /* Any volume's tree may hold it, not only the log's own, and so may
   * a destroyed one's that the queue still frees. */
  for (size_t i = 0; i < p->p_dd.dd_nds; i++) {
    zv_dmu_object_phys (&p->p_dd.dd_dss[i]->ds_obj, &dn);
    if (zv_dmu_walk (&p->p_spa, p->p_dd.dd_dss[i]->ds_obj.ob_id, &dn, false,
                     import_live_fn, &pl) != 0)
      return true;
  }
  for (size_t i = 0; i < p->p_freeq.fq_n; i++)
    if (p->p_freeq.fq_ents[i]->fe_tree
        && zv_freeq_walk (p, p->p_freeq.fq_ents[i], import_live_fn, NULL,
                          &pl) != 0)
      return true;
  return false;
}
