/*
 * zil.h: the intent log.  Flush and FUA wait for a log write, not a txg.
 *
 * Every change to the volume is logged in memory as it is applied (an
 * itx, numbered by a ticket); zv_zil_commit(t) returns once every record
 * up to ticket t is on stable storage, in log blocks on a ring of slots
 * (on a separate log device, or a region of the pool), or its txg has
 * synced.  Import replays what the log holds beyond the last synced txg.
 */
#ifndef ZV_ZIL_H
#define ZV_ZIL_H

#include <stdint.h>
#include <stdbool.h>

#include "format.h"
#include "zio.h"
#include "txg.h"
#include "dev.h"

typedef struct zv_zil zv_zil_t;

enum zv_sync_mode { ZV_SYNC_STANDARD = 0, ZV_SYNC_ALWAYS, ZV_SYNC_DISABLED };
enum zv_logbias { ZV_LOGBIAS_LATENCY = 0, ZV_LOGBIAS_THROUGHPUT };

/* Record types (lr_type). */
enum zv_lr_type {
  ZV_LR_NOP = 0,          /* padding, or a WRITE_IND that lost its block */
  ZV_LR_WRITE = 1,        /* data follows */
  ZV_LR_WRITE_IND = 2,    /* one volblock written in place: a blkptr follows */
  ZV_LR_TRIM = 3,
  ZV_LR_ZERO = 4,
};

/* What the log needs from the volume. */
typedef struct zv_zil_ops {
  /* Current content of [off, off+len) (a write fetched at commit). */
  int (*zo_read) (void *arg, uint64_t off, uint32_t len, void *buf);
  /*
   * Write block blkid's dirty data of txg now, to new space, and mark the
   * dirty record so the txg adopts that block: *bp gets its pointer.
   * -ENOENT when the block has no dirty record of txg any more (its txg
   * synced, or it changed since): the record is dropped.
   */
  int (*zo_write_block) (void *arg, uint64_t txg, uint64_t blkid,
                         zv_blkptr_t *bp);
  /* Replay: apply a record to the volume (under normal txgs); -ENODATA
   * says the log really ends before this record. */
  int (*zo_replay) (void *arg, const zv_lr_t *lr, const void *data);
  uint32_t zo_blksz;      /* the volume's block size */
  uint64_t zo_volsize;    /* and its size: records must lie inside */
} zv_zil_ops_t;

/* When a write's log block is issued before anybody commits it. */
enum zv_zil_write_ahead {
  ZV_ZIL_WA_OFF = 0,        /* only a commit issues log blocks */
  ZV_ZIL_WA_AUTO = 1,       /* while commits follow writes one by one */
  ZV_ZIL_WA_ALWAYS = 2,     /* after every write (tests) */
};

typedef struct zv_zil_tunables {
  enum zv_sync_mode zt_sync;
  enum zv_logbias zt_logbias;
  uint32_t zt_immediate_write_sz;   /* indirect from this size (32 KiB) */
  uint32_t zt_max_copied;           /* copy into the record up to (7680) */
  unsigned zt_commit_timeout_pct;   /* of the last log-block latency (30) */
  bool zt_legacy_txg_commit;        /* flush waits for a txg (benchmarks) */
  enum zv_zil_write_ahead zt_write_ahead; /* issue before the commit (auto) */
} zv_zil_tunables_t;

void zv_zil_tunables_default (zv_zil_tunables_t *zt);

/* log2 of the in-memory record ring's slots (18), read when a log opens;
 * a writer that finds the ring full waits for room. */
extern unsigned zv_zil_itx_ring_shift;

/*
 * Open the log of a pool: zh is the header from the objset as imported
 * (or as created).  'logdev' is the separate log device or NULL.  The
 * caller replays (zv_zil_replay) before anything else is logged.
 */
zv_zil_t *zv_zil_open (zv_spa_t *spa, zv_dev_t *logdev, zv_txg_t *tx,
                       const zv_zil_header_t *zh, const zv_zil_ops_t *ops,
                       void *arg, const zv_zil_tunables_t *zt);
void zv_zil_close (zv_zil_t *zl);

/* Log a write / trim / zero applied in txg; returns its ticket.  A
 * zero's lr_flags say how it was applied (ZV_LR_F_ZERO_ALLOC); a trim
 * has none.  'commit': the caller commits the write at once (FUA,
 * sync=always), so a small one is copied now; otherwise it is logged by
 * reference and its data read from the volume if a commit packs it. */
uint64_t zv_zil_log_write (zv_zil_t *zl, uint64_t txg, uint64_t off,
                           uint32_t len, const void *data, bool commit);
uint64_t zv_zil_log_free (zv_zil_t *zl, uint64_t txg, enum zv_lr_type type,
                          uint64_t off, uint64_t len, uint64_t lr_flags);

/* Make every record up to 'ticket' durable (0: every record so far). */
int zv_zil_commit (zv_zil_t *zl, uint64_t ticket);
/* A change that ended with 'ticket' was logged and nobody commits it yet:
 * if the log writes ahead (zt_write_ahead), have its log block written
 * now, on the log's own thread, so that the commit that follows finds it
 * in flight or durable.  Never waits. */
void zv_zil_write_ahead (zv_zil_t *zl, uint64_t ticket);

/*
 * Txg sync, syncing context: the header to store in the objset of txg
 * (zv_zil_sync_header), then, once that txg is on disk, zv_zil_synced
 * lets the log reuse the slots before the header's head.
 */
void zv_zil_sync_header (zv_zil_t *zl, uint64_t txg, zv_zil_header_t *zh);
void zv_zil_synced (zv_zil_t *zl, uint64_t txg);

/*
 * What an import does with a log that is damaged in the middle of its
 * chain (a block that does not verify, that a later block says was
 * durable), or that holds a record that makes no sense (zil_recover=).
 */
enum zv_zil_recover {
  ZV_ZIL_RECOVER_NONE = 0,      /* the import fails, saying what is lost */
  ZV_ZIL_RECOVER_TRUNCATE,      /* replay what precedes it, drop the rest */
  ZV_ZIL_RECOVER_DISCARD,       /* drop the whole log, whatever it holds */
};

/*
 * Replay every record the log holds beyond the txg the pool imported at,
 * in order, through zo_replay; then start a fresh chain.  Safe to crash
 * in: the header keeps the chain until the replayed txgs are on disk.
 * The import's claim (zv_zil_claim) judged the chain already; 'recover'
 * (the import's) decides only about an in-place block that does not
 * verify although its log block was durable.  Returns the number of
 * records applied, or a negative errno.
 */
int zv_zil_replay (zv_zil_t *zl, uint64_t imported_txg,
                   enum zv_zil_recover recover);

/*
 * Import (read-write), before anything syncs: claim the log whose header
 * is *zh.  Marks allocated every in-place block that a record of a txg
 * after imported_txg points at, and sets zh_claim_txg (when not set
 * yet), so the replay applies the same records however many txgs sync
 * before it.  Every record is checked first, as the replay will
 * (blksz and volsize are the volume's), and where the chain stops is
 * judged (zil_replay.c, replay_decide): a block in the middle that is
 * damaged, a record that makes no sense, or an in-place block the record
 * may not own (replay_claims_take; 'live' says whether space the bitmap
 * shows allocated is used by the synced tree; blkid is the record's
 * volume block) fails with -EIO and messages naming the block or
 * record, what is lost, and how to import anyway;
 * nothing is claimed.  With 'recover' the import goes on: TRUNCATE cuts
 * the chain there and records the cut in *zh, DISCARD starts *zh afresh
 * (a new, empty chain), each saying how many records of which txgs it
 * drops.  'rewound' says the import took an older txg than the newest
 * on disk: the txgs after it may have reused log space behind their
 * head, so a damaged-looking block ends the log (cut, and said) instead.
 * Returns the number of log blocks that replay whole, or a negative
 * errno.
 */
typedef bool (*zv_zil_live_fn) (void *arg, uint64_t dva, uint32_t size,
                                uint64_t blkid);
int zv_zil_claim (zv_spa_t *spa, zv_dev_t *logdev, zv_zil_header_t *zh,
                  uint64_t imported_txg, uint32_t blksz, uint64_t volsize,
                  enum zv_zil_recover recover, bool rewound,
                  zv_zil_live_fn live, void *live_arg);

/*
 * Import read-only (nothing is claimed or replayed): say what the log
 * holds that the import does not show, and whether a read-write import
 * would be refused (damage, a record that makes no sense).
 */
void zv_zil_inspect (zv_spa_t *spa, zv_dev_t *logdev,
                     const zv_zil_header_t *zh, uint64_t imported_txg,
                     uint32_t blksz, uint64_t volsize, bool rewound);

/*
 * The offline checker (check.c): fn sees the in-place block (one volume
 * block of blksz bytes) of each record a claim of this log would keep:
 * space that belongs to the log until the replay, not leaked.  Nothing
 * is claimed, judged or said.
 */
void zv_zil_foreach_claim (zv_spa_t *spa, zv_dev_t *logdev,
                           const zv_zil_header_t *zh, uint64_t imported_txg,
                           uint32_t blksz, uint64_t volsize,
                           zv_alloc_extent_fn fn, void *arg);

/*
 * The block pointer of an in-place (ZV_LR_WRITE_IND) record, read from
 * disk: one copy of one whole volume block (level 0, volume data, psize
 * and lsize blksz) inside the pool's data area, never a hole.  -EIO with
 * a message naming the record otherwise.  Ownership is the claim's.
 */
int zv_zil_ind_check (zv_spa_t *spa, const zv_lr_t *lr, const zv_blkptr_t *bp,
                      uint32_t blksz);

/* Statistics. */
typedef struct zv_zil_stats {
  enum zv_sync_mode zst_sync;
  enum zv_logbias zst_logbias;
  const char *zst_log_device;           /* NULL: a ring in the pool */
  uint64_t zst_lwbs_written, zst_lwb_bytes;
  uint64_t zst_ring_size, zst_ring_used;
  uint64_t zst_records_copied, zst_records_need_copy;
  uint64_t zst_records_indirect, zst_records_free, zst_records_dropped;
  uint64_t zst_commits, zst_commit_fallbacks;
  uint64_t zst_commit_latency_mean_ns, zst_commit_latency_p99_ns;
  uint64_t zst_lwb_latency_ewma_ns;
  uint64_t zst_lwbs_ahead;              /* written ahead of their commit */
  uint64_t zst_commit_sleeps;           /* a committer went to sleep */
} zv_zil_stats_t;
void zv_zil_get_stats (zv_zil_t *zl, zv_zil_stats_t *st);

/* Create: the header of a new log whose ring is at ring_dva. */
void zv_zil_header_init (zv_zil_header_t *zh, uint64_t ring_dva,
                         uint64_t nslots, uint32_t blksz);

#endif /* ZV_ZIL_H */
