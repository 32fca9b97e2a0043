/*
 * zvol.h: the engine's public API, the one header a front end (the nbdkit
 * plugin, the admin tool, a test) includes.  Self-contained: it includes
 * no other header of the engine, and everything declared here carries
 * ZVOL_API, the library's export list (the engine is built with hidden
 * visibility; nothing else leaves it).
 *
 * A pool lives on one or more devices (files or block devices).  Open or
 * create the pool, create volumes in it (they share its free space),
 * then open a volume of it by name.
 *
 * Every function that can fail returns 0 or a negative errno:
 *   -EIO      device error, or a block whose checksum does not verify
 *   -ENOSPC   the pool is full
 *   -EROFS    the pool was opened read-only
 *   -EINVAL   bad argument (out of range, bad configuration)
 *   -EBUSY    a device is in use by another process, or a volume is
 *             already open (or still open, for zvol_pool_close)
 *   -ENOENT   no volume of that name
 *   -EEXIST   a volume of that name exists already
 * with one readable message logged through the hook of zvol_set_log().
 * Memory is not one of them: as OpenZFS's KM_SLEEP, an allocation of the
 * engine never fails, it logs and aborts (docs/design.md says why).
 */
#ifndef ZVOL_H
#define ZVOL_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ZVOL_API __attribute__ ((visibility ("default")))

#define ZVOL_MAX_DEVS 16u
#define ZVOL_NAME_MAX 64u               /* names, with the NUL */
#define ZVOL_DEFAULT_VOLBLOCKSIZE 16384u
#define ZVOL_MIN_VOLBLOCKSIZE 4096u
#define ZVOL_MAX_VOLBLOCKSIZE (128u * 1024)

typedef struct zvol_pool zvol_pool_t;
typedef struct zvol zvol_t;

/* ---- messages ---- */

typedef enum zvol_log_level {
  ZVOL_LOG_DEBUG = 0,
  ZVOL_LOG_INFO = 1,
  ZVOL_LOG_WARN = 2,            /* shown like an error; the call goes on */
  ZVOL_LOG_ERROR = 3,
} zvol_log_level_t;

typedef void (*zvol_log_fn) (zvol_log_level_t level, const char *msg);

/* Route the engine's messages (NULL: the default, stderr). */
ZVOL_API void zvol_set_log (zvol_log_fn fn);
/* Lowest level the default hook prints (tests silence debug output). */
ZVOL_API void zvol_set_log_level (zvol_log_level_t level);

/* ---- pools ---- */

/* The transaction-group engine's tunables (OpenZFS's names and
 * defaults; zvol_pool_config_init fills them in). */
typedef struct zvol_txg_tunables {
  uint64_t tt_timeout_ms;          /* sync at least this often (5000) */
  uint64_t tt_dirty_max;           /* bytes; min(10% of RAM, 4 GiB) */
  unsigned tt_dirty_sync_pct;      /* sync from this share of it (20) */
  unsigned tt_delay_min_dirty_pct; /* throttle writers from here (60) */
  uint64_t tt_delay_scale_ns;      /* the delay curve's scale (500 us) */
  uint64_t tt_delay_max_ns;        /* its cap (100 ms) */
} zvol_txg_tunables_t;

typedef struct zvol_pool_config {
  const char *pc_devices[ZVOL_MAX_DEVS];
  unsigned pc_ndevices;
  bool pc_create;              /* create a new pool on the devices */
  bool pc_readonly;            /* import without writing anything */
  bool pc_rewind;              /* import: accept losing the newest txgs
                                  (their uberblocks or trees are damaged)
                                  and take the newest intact one */
  const char *pc_name;         /* create: pool name, default "zvol" */
  /* create: a first volume, named as the pool (0: none, the pool alone;
   * zvol_volume_create makes volumes later) */
  uint64_t pc_volsize;         /* bytes */
  uint32_t pc_volblocksize;    /* default 16 KiB */
  bool pc_sparse;              /* thin (no reservation), may exceed the
                                  pool; else its size is reserved */
  uint64_t pc_zil_size;        /* log ring in the pool (0: auto) */
  const char *pc_logdevice;    /* separate log device; create adds it,
                                  import needs it if the pool has one */
  uint64_t pc_cache_size;      /* buffer cache limit, bytes (0: auto) */
  zvol_txg_tunables_t pc_txg;
  /* Import progress (may be NULL): done out of total units. */
  void (*pc_progress) (void *arg, const char *what, uint64_t done,
                       uint64_t total);
  void *pc_progress_arg;
  /* Read-write import: what to do with an intent log that is damaged in
   * the middle of its chain or holds a record that makes no sense
   * (ZVOL_ZIL_RECOVER_*; anything but NONE is refused with create or
   * readonly). */
  unsigned pc_zil_recover;
  /* Import: walk and check the volume's whole tree now (every pointer's
   * fields, and one owner per sector), as OpenZFS's scrub would, instead
   * of checking each indirect block when it is first read (the default:
   * import time does not grow with the volume). */
  bool pc_verify_full;
  /* RADOS devices ("rados:CEPHPOOL/NAME", as device or log device): how
   * to reach the cluster (NULL: librados' defaults: $CEPH_CONF or
   * /etc/ceph/ceph.conf, client.admin, the configuration's keyring), and
   * with pc_create the sizes of the RADOS devices that do not exist yet
   * (bytes; 0: every device must exist).  A pool's devices are all of one
   * kind: RADOS, or files and block devices. */
  const char *pc_ceph_conf;
  const char *pc_ceph_user;        /* "admin" or "client.admin" */
  const char *pc_ceph_keyring;
  uint64_t pc_rados_size;          /* each data device made */
  uint64_t pc_rados_log_size;      /* the log device, if made */
  /* Import: a RADOS device another server holds is taken: that server's
   * client is blocklisted by the cluster (fenced: none of its requests
   * lands any more), its lock broken, and the import replays the log.
   * Only for a server that is dead or must stop: it loses the pool. */
  bool pc_rados_takeover;
  /* create: the compression of the volume made with the pool ("off",
   * "lz4", "zstd", "zstd-N"; NULL: lz4). */
  const char *pc_compression;
} zvol_pool_config_t;

#define ZVOL_ZIL_RECOVER_NONE     0u /* the import fails, saying what is lost */
#define ZVOL_ZIL_RECOVER_TRUNCATE 1u /* replay up to the damage, drop the rest */
#define ZVOL_ZIL_RECOVER_DISCARD  2u /* drop the whole log */

/* Defaults for every field. */
ZVOL_API void zvol_pool_config_init (zvol_pool_config_t *pc);

/*
 * A mirror device's name, "mirror:A,B[,C]" (two or three sides, files or
 * block devices, holding the same bytes): its sides, each a string to
 * free(), into sides[ZVOL_MAX_SIDES].  Returns the number of sides, 0
 * when the name is no mirror's, or -EINVAL with a message in err.
 */
ZVOL_API int zvol_device_mirror_sides (const char *name, char **sides,
                                       char *err, size_t errlen);

/*
 * Replace side OLD (an absolute path, as status shows it) of a mirror of
 * the pool by the device NEW (absolute; no pool's labels on it, at least
 * the mirror's size), and resilver NEW in the background: it takes every
 * write at once and is read once the resilver ends (zvol_pool_get_stats:
 * ps_resilver_*).  The resilver's position is recorded on NEW, so a
 * restart resumes it.  0 or a negative errno (logged).
 */
ZVOL_API int zvol_pool_replace (zvol_pool_t *pool, const char *old_side,
                                const char *new_side);

/*
 * Create (pc_create) or import the pool.  Nothing is written before every
 * check passed (devices exist, lockable, large enough, not part of another
 * pool for create; all present and of one pool for import).  A read-write
 * import claims what the volumes' intent logs hold, so the pool may sync
 * before a volume is opened and replays its log; it fails with -EIO when
 * a log is damaged where acknowledged writes would be lost, or holds a
 * record that makes no sense, unless pc_zil_recover says what to drop.
 * A read-only import never replays a log (it shows the last synced txg)
 * and only reports what the log holds.  An import that would
 * lose a txg that committed, or may have (the newest txg's tree does not
 * verify, or the uberblock slot after the newest intact one is damaged
 * in every copy), fails with -EIO and says what would be lost, unless
 * pc_rewind accepts it (read-only too: a read-only import never serves
 * an older txg in place of a newer one without it).
 */
ZVOL_API int zvol_pool_open (const zvol_pool_config_t *pc,
                             zvol_pool_t **poolp);
/*
 * The size to make a new thin device (a sparse file) for a one-device
 * pool that is to hold a volume of volsize bytes: the volume, a quarter
 * of it more and 128 MiB (labels, metadata, the intent log ring,
 * copy-on-write slack), and, with 'room', twice dirty_max as the
 * engine would take it now (the txg pipeline: a txg's dirty data and
 * the frees deferred by the two before it, which the space rules count
 * as used); rounded up to 1 MiB.  Without that room the pool is about
 * 80% full once the volume is written, and its txgs shrink to what the
 * free space allows.
 */
ZVOL_API uint64_t zvol_pool_create_size (uint64_t volsize, bool room);
/*
 * Write zeros over the first size bytes of the regular file path (a
 * device about to get a new pool) and make them durable: on a sparse
 * file, a txg write into a hole makes the host file system allocate, and
 * the intent log's next flush of the file then commits the file system's
 * journal too (docs/design.md, "Sync writes on a sparse pool file").
 * -EINVAL for anything but a regular file, else 0 or -errno; progress
 * ("preallocate", bytes written of size) at most once per percent.
 */
ZVOL_API int zvol_device_preallocate (const char *path, uint64_t size,
                                      void (*progress) (void *arg,
                                                        const char *what,
                                                        uint64_t done,
                                                        uint64_t total),
                                      void *arg);
/* Start the engine's threads (a server that forks: after the fork). */
ZVOL_API int zvol_pool_start (zvol_pool_t *pool);
/* Sync everything, stop threads, release devices; -EBUSY while a volume
 * is open (nothing is released then).  Returns the first error. */
ZVOL_API int zvol_pool_close (zvol_pool_t *pool);

ZVOL_API const char *zvol_pool_name (zvol_pool_t *pool);
ZVOL_API uint64_t zvol_pool_guid (zvol_pool_t *pool);
ZVOL_API bool zvol_pool_is_readonly (zvol_pool_t *pool);
/* 0 while the pool is healthy, else the error that suspended it (a txg
 * sync that failed: every write and flush then fails with it). */
ZVOL_API int zvol_pool_error (zvol_pool_t *pool);

/* ---- checking a pool offline ---- */

/*
 * zvol_pool_check imports the pool read-only (nothing is written, no log
 * replayed) and reads every block of it: the pool's own objects (objset,
 * space maps, deferred-free lists, dataset directory) and every
 * dataset's tree, data blocks included, each copy verified against its
 * checksum.  Then it compares what owns space with the space maps: space
 * allocated that nothing owns is leaked, space two owners claim is
 * doubly allocated (both named), a pointer at free space is reported.
 * Each problem goes to cr_problem as it is found, with a line saying
 * where (dataset, level, block id, device, offset); the counts are in
 * the report.  Progress goes to pc_progress ("check": data bytes read of
 * the total the trees hold).  Returns 0 when the check ran (clean when
 * cr_problems is 0), or the import's error when the pool could not be
 * imported at all (its message logged).
 */
typedef enum zvol_check_kind {
  ZVOL_CHECK_CKSUM = 1,     /* a copy whose checksum does not verify */
  ZVOL_CHECK_READ,          /* a copy the device could not read */
  ZVOL_CHECK_LOST,          /* a block no copy of which verifies */
  ZVOL_CHECK_TREE,          /* a tree whose walk stopped (not checked
                               past a block that fails its checks) */
  ZVOL_CHECK_FREE,          /* a pointer at free space or off the pool */
  ZVOL_CHECK_DOUBLE,        /* space two owners claim */
  ZVOL_CHECK_LEAK,          /* allocated space nothing owns */
} zvol_check_kind_t;

typedef struct zvol_check_problem {
  zvol_check_kind_t cp_kind;
  unsigned cp_dev;             /* device index in the pool */
  uint64_t cp_offset;          /* bytes, on that device */
  uint64_t cp_length;
  const char *cp_msg;          /* the whole of it, one line */
  /* A block of a volume's or snapshot's tree: which ("volume 'v'",
   * "snapshot 'v@s'"; NULL otherwise) and the bytes of it the block
   * holds (for an indirect block, the bytes it covers). */
  const char *cp_dataset;
  uint64_t cp_ds_offset, cp_ds_length;
  /* A scrub's bad copy (ZVOL_CHECK_CKSUM, _READ): 1 repaired, 0 not
   * tried (no copy verifies, or a check), -errno: the repair failed. */
  int cp_repair;
} zvol_check_problem_t;

typedef struct zvol_check_report {
  /* Set by the caller (may be NULL): each problem as it is found. */
  void (*cr_problem) (void *arg, const zvol_check_problem_t *cp);
  void *cr_problem_arg;
  /* Filled in by the check: */
  uint64_t cr_trees;           /* dataset trees walked */
  uint64_t cr_blocks;          /* blocks read (every copy of each) */
  uint64_t cr_bytes;           /* bytes read and verified */
  uint64_t cr_allocated;       /* bytes the space maps show allocated */
  uint64_t cr_cksum_errors, cr_read_errors, cr_lost_blocks;
  uint64_t cr_incomplete;      /* trees whose walk stopped early */
  uint64_t cr_free_refs;       /* pointers at free space */
  uint64_t cr_double, cr_double_bytes;  /* extents, bytes */
  uint64_t cr_leaked, cr_leaked_bytes;  /* extents, bytes */
  uint64_t cr_problems;        /* every problem found */
  /* A scrub's: bad copies rewritten and read back good, and bad copies
   * whose rewrite failed (a block no copy of which verifies is lost:
   * cr_lost_blocks). */
  uint64_t cr_repaired, cr_repair_failed;
} zvol_check_report_t;

ZVOL_API int zvol_pool_check (const zvol_pool_config_t *pc,
                              zvol_check_report_t *rep);
/*
 * The same check on a pool this process serves, while it serves: as of
 * its last committed txg T, whose blocks a hold keeps on disk (the
 * frees of later txgs are kept back, and persisted, until the check
 * ends).  It stops when a cancel descriptor (may be NULL, or -1 each)
 * turns readable (-ECANCELED), or when what the hold keeps back passes
 * check_hold_pct of the space that was free (-ENOSPC); -EBUSY while
 * another check runs, -EROFS on a read-only import.  Progress as
 * zvol_pool_check's.
 */
ZVOL_API int zvol_pool_check_live (zvol_pool_t *p, zvol_check_report_t *rep,
                                   const int cancel_fd[2],
                                   void (*progress) (void *arg,
                                                     const char *what,
                                                     uint64_t done,
                                                     uint64_t total),
                                   void *progress_arg);

/*
 * Scrub: the check, with every copy of every block read on every side
 * of its device (a mirror's each), and each copy that fails (read error
 * or checksum) rewritten in place from one that verifies, flushed and
 * read back (cr_repaired; cr_repair_failed when that does not work).  A
 * block no copy of which verifies cannot be repaired: it is reported
 * (ZVOL_CHECK_LOST, with its dataset and the bytes it holds).  The
 * repair writes nothing but the damaged copy's own bytes, so the
 * offline scrub imports as the check does (no txg, no log replayed)
 * and the live one holds frees as the live check does, and both stop,
 * and fail, as theirs do.  Progress says "scrub".  Nothing remains to
 * be done when cr_problems == cr_repaired.
 */
ZVOL_API int zvol_pool_scrub (const zvol_pool_config_t *pc,
                              zvol_check_report_t *rep);
ZVOL_API int zvol_pool_scrub_live (zvol_pool_t *p, zvol_check_report_t *rep,
                                   const int cancel_fd[2],
                                   void (*progress) (void *arg,
                                                     const char *what,
                                                     uint64_t done,
                                                     uint64_t total),
                                   void *progress_arg);

/*
 * The background scrub of a served pool (scrub.c): the live scrub run
 * by a thread of the server, in pieces (each on a view of the txg last
 * committed when it began, its frees held meanwhile; a piece ends when
 * the hold has kept back a quarter of what a check may, and the next goes
 * on from the same place on a new view), paused, resumed and canceled
 * while it runs.  zvol_scrub_start starts one (or resumes a paused
 * one: returns 1 then; -EBUSY while one scans, -EROFS on a read-only
 * import); zvol_scrub_pause and zvol_scrub_cancel stop it (pause keeps
 * its place; -ENOENT when none is scanning, or for cancel none paused
 * either); zvol_scrub_wait waits until it is no longer scanning
 * (-ECANCELED when a cancel descriptor turns readable), with progress
 * about once a second.  Its place and counts are written with every
 * txg (format.h, zv_scan_phys_t): a close of the pool stops it, and the
 * next start of the pool (zvol_pool_start) resumes it, as after a
 * crash; a paused one stays paused.  The tunables scan_yield_ms and
 * scan_rate_max make it give way to the clients.
 */
typedef enum zvol_scrub_state {
  ZVOL_SCRUB_NONE = 0,         /* none since the pool was opened */
  ZVOL_SCRUB_SCANNING,
  ZVOL_SCRUB_PAUSED,
  ZVOL_SCRUB_FINISHED,
  ZVOL_SCRUB_CANCELED,         /* by zvol_scrub_cancel, or an error */
} zvol_scrub_state_t;

#define ZVOL_SCRUB_DAMAGED_MAX 32
typedef struct zvol_scrub_damaged {
  char sd_dataset[2 * ZVOL_NAME_MAX + 24];  /* "volume 'v'", "snapshot
                                               'v@s'", or a pool object */
  uint64_t sd_offset, sd_length;            /* bytes of the dataset */
} zvol_scrub_damaged_t;

typedef struct zvol_scrub_status {
  zvol_scrub_state_t ss_state;
  int ss_error;                /* CANCELED by an error: it (negative) */
  uint64_t ss_examined, ss_total;   /* data bytes, of the trees */
  uint64_t ss_rate;            /* bytes a second while scanning */
  uint64_t ss_eta_s;           /* scanning: seconds left at that rate */
  uint64_t ss_elapsed_ns;      /* time spent scanning */
  uint64_t ss_pieces;          /* views walked */
  uint64_t ss_repaired, ss_repair_failed;   /* copies */
  uint64_t ss_cksum_errors, ss_read_errors; /* copies found bad */
  uint64_t ss_lost;            /* blocks that could not be repaired */
  uint64_t ss_problems, ss_other;  /* every problem; not about a copy
                                      (leaks, double allocations) */
  uint64_t ss_ndamaged;        /* damaged blocks found; the first
                                  ZVOL_SCRUB_DAMAGED_MAX listed: */
  zvol_scrub_damaged_t ss_damaged[ZVOL_SCRUB_DAMAGED_MAX];
} zvol_scrub_status_t;

ZVOL_API int zvol_scrub_start (zvol_pool_t *p);
ZVOL_API int zvol_scrub_pause (zvol_pool_t *p);
ZVOL_API int zvol_scrub_cancel (zvol_pool_t *p);
ZVOL_API int zvol_scrub_wait (zvol_pool_t *p, const int cancel_fd[2],
                              void (*progress) (void *arg, uint64_t done,
                                                uint64_t total),
                              void *arg);
ZVOL_API void zvol_scrub_get_status (zvol_pool_t *p, zvol_scrub_status_t *st);

/* ---- volumes ---- */

/*
 * Create a volume in the pool: 'name' is 1 to 63 of A-Z a-z 0-9 _ - . :,
 * not starting with '-' or '.' (-EINVAL otherwise, and for a size that
 * is not a nonzero multiple of 512 up to 1 PiB, a block size that is not
 * a power of two 4K-128K, a reservation above the size); -EEXIST when the
 * name is taken; -ENOSPC when the pool cannot keep the reservation (its
 * free space less the unused part of the others') or its intent log;
 * -EROFS on a read-only pool.  Returns when the volume is on disk.
 */
typedef struct zvol_volume_params {
  uint64_t vp_size;            /* bytes */
  uint32_t vp_blocksize;       /* 0: ZVOL_DEFAULT_VOLBLOCKSIZE */
  uint64_t vp_reservation;     /* bytes kept for it (0: thin) */
  /* "off", "lz4", "zstd" (level 3) or "zstd-N" (N 1..19); NULL: lz4.
   * On a pool of format version 2 (not upgraded) data is stored
   * uncompressed whatever it says.  A clone takes its origin's. */
  const char *vp_compression;
} zvol_volume_params_t;

ZVOL_API int zvol_volume_create (zvol_pool_t *pool, const char *name,
                                 const zvol_volume_params_t *vp);
/* Destroy a volume, or a snapshot "VOL@SNAP", and free what it alone
 * held (-ENOENT; -EBUSY while it is open, for a volume with snapshots,
 * for a snapshot with a clone; -EROFS).  Returns when the destroy is on
 * disk: the name is gone (and free for a new dataset), and what it
 * alone held is freed by the txg syncs that follow, in the background,
 * a bounded share each (ps_freeing shows what is left; a crash resumes
 * at the next import; zvol_pool_wait_freeing waits for the end). */
ZVOL_API int zvol_volume_destroy (zvol_pool_t *pool, const char *name);
/* What a recursive destroy of "VOL" or "VOL@SNAP" takes, in the order
 * to destroy it (every dataset after those that depend on it): with
 * ZVOL_DESTROY_SNAPSHOTS a volume's snapshots (oldest first), with
 * ZVOL_DESTROY_CLONES (implies it) every clone of a snapshot in the set,
 * with its own snapshots and clones, recursively.  Up to max names into
 * out, how many there are into *countp (call again with more room).
 * -ENOENT; -EBUSY when the flags leave out something that depends on
 * the set (a clone, a snapshot: the message says which). */
#define ZVOL_DESTROY_SNAPSHOTS 1u
#define ZVOL_DESTROY_CLONES    2u
typedef struct zvol_dsname {
  char dn_name[2 * ZVOL_NAME_MAX];
} zvol_dsname_t;
ZVOL_API int zvol_destroy_plan (zvol_pool_t *pool, const char *name,
                                unsigned flags, zvol_dsname_t *out,
                                size_t max, size_t *countp);

/*
 * Snapshots ("VOL@SNAP", SNAP named as a volume is).  A snapshot is taken
 * while the volume is written, in O(1) of its size: it holds every write
 * acknowledged before the call and none issued after it returns; no
 * client waits for it.  -EEXIST, -ENOENT (no such volume), -ENOSPC (the
 * volume's reservation would no longer fit), -EINVAL (a bad name).
 * A snapshot opens read-only (zvol_open with its name; writes -EROFS),
 * any number of times.
 */
ZVOL_API int zvol_snapshot_create (zvol_pool_t *pool, const char *name);
/* Roll the volume back to snapshot "VOL@SNAP", in metadata only: its
 * newest, or with destroy_newer an older one (the newer ones are
 * destroyed, newest first).  -EBUSY while the volume is open (no client
 * reads a mix of before and after); -EEXIST when SNAP is not the newest
 * and destroy_newer is false. */
ZVOL_API int zvol_snapshot_rollback (zvol_pool_t *pool, const char *name,
                                     bool destroy_newer);
/* A writable volume 'clone' from snapshot "VOL@SNAP", sharing its blocks
 * (vp: only vp_reservation is used; NULL: thin).  The snapshot cannot be
 * destroyed while the clone exists. */
ZVOL_API int zvol_volume_clone (zvol_pool_t *pool, const char *snapshot,
                                const char *clone,
                                const zvol_volume_params_t *vp);

#define ZVOL_KIND_VOLUME   1u
#define ZVOL_KIND_SNAPSHOT 2u
typedef struct zvol_volume_info {
  char vi_name[2 * ZVOL_NAME_MAX]; /* "VOL" or "VOL@SNAP" */
  uint64_t vi_id;
  uint64_t vi_volsize;
  uint32_t vi_blocksize;
  bool vi_open;
  uint64_t vi_reservation;
  uint64_t vi_referenced;      /* data bytes its tree holds (last sync) */
  /* A snapshot: the data only it holds (what its destroy frees).  A
   * volume: written + usedbysnapshots + its reservation's unused part. */
  uint64_t vi_used;
  uint64_t vi_avail;           /* the pool's free space less the others'
                                  unused reservations (volumes) */
  uint64_t vi_creation_txg, vi_creation_time;
  uint32_t vi_kind;            /* ZVOL_KIND_* */
  uint64_t vi_written;         /* data born after the previous snapshot */
  uint64_t vi_usedbysnapshots; /* a volume's: data only its snapshots hold */
  char vi_origin[2 * ZVOL_NAME_MAX]; /* a clone's snapshot, else "" */
  uint32_t vi_compression;     /* the property: zvol_compression_name */
  /* A volume's written in logical bytes (written counts compressed
   * blocks at their size on disk): its compressratio is
   * vi_logicalused / vi_written. */
  uint64_t vi_logicalused;
} zvol_volume_info_t;

/* The name of a compression property ("off", "lz4", "zstd-N"). */
ZVOL_API void zvol_compression_name (uint32_t compression, char *buf,
                                     size_t len);
/* Set a volume's compression ("off", "lz4", "zstd", "zstd-N"), offline or
 * while clients write: the writes synced from the next txg on use it,
 * blocks already written stay as they are.  -ENOENT, -EINVAL (a bad
 * value, a snapshot), -EROFS. */
ZVOL_API int zvol_volume_set_compression (zvol_pool_t *pool,
                                          const char *name,
                                          const char *value);

/* The pool's volumes, up to max into out (in directory order); returns
 * how many there are (call again with a larger array if more). */
ZVOL_API size_t zvol_volume_list (zvol_pool_t *pool, zvol_volume_info_t *out,
                                  size_t max);
/* The same for the kinds asked (ZVOL_LIST_*): each volume, then its
 * snapshots oldest first. */
#define ZVOL_LIST_VOLUMES   (1u << ZVOL_KIND_VOLUME)
#define ZVOL_LIST_SNAPSHOTS (1u << ZVOL_KIND_SNAPSHOT)
ZVOL_API size_t zvol_dataset_list (zvol_pool_t *pool, unsigned kinds,
                                   zvol_volume_info_t *out, size_t max);
/* Bytes a new volume or a write may still use. */
ZVOL_API uint64_t zvol_pool_avail (zvol_pool_t *pool);
/*
 * Send and receive (docs/format.md, "Send streams").  A stream goes to
 * or comes from sio_fd, or the callback when it is set: sio_write takes
 * every byte (0 or -errno); sio_read returns how many bytes it read, up
 * to len, fewer only at the stream's end (0 there), or -errno.  The
 * progress callback, if set, sees data bytes done out of a total (the
 * sender's estimate, never below done; done == total at the end).
 */
typedef struct zvol_stream_io {
  int sio_fd;
  int (*sio_write) (void *arg, const void *buf, size_t len);
  int64_t (*sio_read) (void *arg, void *buf, size_t len);
  void *sio_arg;
  void (*sio_progress) (void *arg, uint64_t done, uint64_t total);
  void *sio_progress_arg;
} zvol_stream_io_t;

/* Send snapshot "VOL@SNAP": all of it (from NULL), or what changed since
 * the older snapshot "VOL@OLDER" of the same volume, reading only the
 * blocks born between them.  -ENOENT, -EINVAL (not snapshots of one
 * volume, from not older), -EIO, or the writer's error. */
ZVOL_API int zvol_send (zvol_pool_t *pool, const char *snapshot,
                        const char *from, const zvol_stream_io_t *io);
/*
 * Receive a stream into 'target' ("VOL", or "VOL@SNAP" to name the
 * snapshot; else it is named as the one sent).  A full stream creates
 * the volume (thin) and its snapshot; an incremental one applies to the
 * existing volume whose newest snapshot is the stream's base (by its
 * guid) and that has not changed since (else -EBUSY: roll it back), and
 * ends with the new snapshot.  A damaged, truncated or out-of-order
 * stream is refused (-EIO, saying where), and so is one that does not
 * fit (-EINVAL, -EEXIST, -ENOENT); then nothing of it stays: the new
 * volume is destroyed or the target rolled back, also by the next import
 * after a crash.  -EROFS on a read-only pool.
 */
ZVOL_API int zvol_receive (zvol_pool_t *pool, const char *target,
                           const zvol_stream_io_t *io);

/* The ranges that differ between snapshot "VOL@A" and the newer "VOL@B"
 * (or the volume "VOL", which must be closed: -EBUSY), ascending: written
 * since A, or reading as zeros in B (freed, or holes of rewritten
 * metadata that may have been zeros in A too).  The walk reads only what
 * was born after A.  fn's nonzero return stops it (a positive one is not
 * an error: zvol_diff returns 0). */
#define ZVOL_DIFF_WRITTEN 1u
#define ZVOL_DIFF_FREED   2u
typedef int (*zvol_diff_fn) (void *arg, uint64_t off, uint64_t len,
                             unsigned kind);
ZVOL_API int zvol_diff (zvol_pool_t *pool, const char *from, const char *to,
                        zvol_diff_fn fn, void *arg);


#define ZVOL_SYNC_STANDARD 0u      /* flush and FUA are durable */
#define ZVOL_SYNC_ALWAYS   1u      /* every write is durable on return */
#define ZVOL_SYNC_DISABLED 2u      /* flush and FUA do nothing (unsafe) */
#define ZVOL_LOGBIAS_LATENCY    0u /* small writes copied into the log */
#define ZVOL_LOGBIAS_THROUGHPUT 1u /* data written in place, pointer logged */

typedef struct zvol_config {
  unsigned vc_sync;            /* ZVOL_SYNC_* */
  unsigned vc_logbias;         /* ZVOL_LOGBIAS_* */
  bool vc_flush_by_txg;        /* flush/FUA wait for a txg (no log) */
} zvol_config_t;

ZVOL_API void zvol_config_init (zvol_config_t *vc);

/*
 * Open the volume 'name' of the pool (NULL: the pool's only volume;
 * -ENOENT when it has none or several) and,
 * on a read-write pool, replay its intent log.  A volume is open at most
 * once at a time (-EBUSY); it is read-only when the pool is.
 */
ZVOL_API int zvol_open (zvol_pool_t *pool, const char *name,
                        const zvol_config_t *vc, zvol_t **zvp);
/* Make everything written durable and close.  Returns the first error
 * (the volume is closed anyway). */
ZVOL_API int zvol_close (zvol_t *zv);

ZVOL_API const char *zvol_name (zvol_t *zv);
ZVOL_API uint64_t zvol_size (zvol_t *zv);
ZVOL_API uint32_t zvol_blocksize (zvol_t *zv);
ZVOL_API bool zvol_is_readonly (zvol_t *zv);

/* I/O.  Any offset and length within the volume. */
#define ZVOL_FUA      0x1u   /* durable before returning */
#define ZVOL_MAY_TRIM 0x2u   /* zero: holes allowed */
#define ZVOL_FAST     0x4u   /* zero: fail -ENOTSUP rather than be slow */

ZVOL_API int zvol_read (zvol_t *zv, void *buf, uint64_t off, uint32_t len);
ZVOL_API int zvol_write (zvol_t *zv, const void *buf, uint64_t off,
                         uint32_t len, unsigned flags);
ZVOL_API int zvol_flush (zvol_t *zv);
ZVOL_API int zvol_trim (zvol_t *zv, uint64_t off, uint64_t len,
                        unsigned flags);
ZVOL_API int zvol_zero (zvol_t *zv, uint64_t off, uint64_t len,
                        unsigned flags);

/* Extents: calls fn for ascending, contiguous ranges from 'off'; a
 * nonzero return from fn stops the walk (a positive one is not an
 * error: zvol_extents then returns 0). */
#define ZVOL_EXTENT_HOLE 0x1u   /* unallocated, reads as zeros */
typedef int (*zvol_extent_fn) (void *arg, uint64_t off, uint64_t len,
                               unsigned type);
ZVOL_API int zvol_extents (zvol_t *zv, uint64_t off, uint64_t len,
                           zvol_extent_fn fn, void *arg);

/* ---- tunables ---- */

/*
 * The engine's tunables (every one is listed, with its range, unit and
 * when it is read, in the man page and by zvol_tunable_help).  Set them
 * before opening a pool: some are read when a pool is created or opened
 * (zvol_pool_config_init and zvol_config_init take their defaults from
 * them), others on every use.  Sizes take K, M, G, T suffixes,
 * percentages may end in %, booleans are true/false, choices by name,
 * and "auto" where the default is worked out.  Returns 0, -ENOENT (no
 * tunable of that name), -EINVAL (not a value of its type) or -ERANGE,
 * with the reason in err (the variable is unchanged then).
 */
ZVOL_API int zvol_tunable_set (const char *name, const char *value,
                               char *err, size_t errlen);
ZVOL_API bool zvol_tunable_exists (const char *name);
/* True for a tunable read only when a pool is created (zil_size): a
 * front end refuses it on import, where it would have no effect.  False
 * for any other name, known or not. */
ZVOL_API bool zvol_tunable_create_only (const char *name);
/* One line per tunable, as --help shows them; a string to free(). */
ZVOL_API char *zvol_tunable_help (void);

/* ---- statistics ---- */

/* One side of a mirror device (zvoladm status lists them under it). */
#define ZVOL_MAX_SIDES 3u
typedef struct zvol_side_stats {
  const char *ss_path;                  /* valid while the pool is open */
  bool ss_online;                       /* else FAULTED, for ss_why, or
                                           being resilvered */
  bool ss_resilvering;                  /* written, not read, until the
                                           resilver ends */
  char ss_why[160];
  uint64_t ss_reads, ss_writes;         /* requests done */
  uint64_t ss_read_errors, ss_write_errors, ss_cksum_errors;
} zvol_side_stats_t;

typedef struct zvol_pool_stats {
  const char *ps_name;                  /* valid while the pool is open */
  uint64_t ps_guid;
  unsigned ps_ndevs;
  const char *ps_dev_path[ZVOL_MAX_DEVS];
  bool ps_dev_direct[ZVOL_MAX_DEVS];    /* O_DIRECT in use */
  /* Errors since the pool was opened, per device (zpool status's READ,
   * WRITE and CKSUM): failed requests (a failed flush is a write error)
   * and block copies that did not verify. */
  uint64_t ps_dev_read_errors[ZVOL_MAX_DEVS];
  uint64_t ps_dev_write_errors[ZVOL_MAX_DEVS];
  uint64_t ps_dev_cksum_errors[ZVOL_MAX_DEVS];
  /* A mirror device's sides (0: the device is no mirror); it is
   * degraded while one of them is faulted, and so is the pool. */
  unsigned ps_dev_nsides[ZVOL_MAX_DEVS];
  bool ps_dev_degraded[ZVOL_MAX_DEVS];
  zvol_side_stats_t ps_dev_sides[ZVOL_MAX_DEVS][ZVOL_MAX_SIDES];
  bool ps_degraded;
  /* A resilver under way: its device and side, and how far it is (bytes
   * of the device's data area, offsets below ps_resilver_done copied). */
  bool ps_resilver_active;
  unsigned ps_resilver_dev, ps_resilver_side;
  uint64_t ps_resilver_done, ps_resilver_total;
  const char *ps_logdev_path;           /* separate log device, or NULL */
  uint64_t ps_logdev_read_errors, ps_logdev_write_errors;
  uint64_t ps_logdev_cksum_errors;
  uint64_t ps_space_total, ps_space_allocated;
  uint64_t ps_space_deferred;           /* freed, reusable in two txgs */
  uint64_t ps_space_reserved;           /* dirty data's reservations */
  uint64_t ps_space_held;               /* freed, kept back by a live
                                           check (not in _deferred) */
  uint64_t ps_txg_synced, ps_txg_open, ps_dirty_bytes;
  uint64_t ps_sync_passes_last;
  unsigned ps_sync_write_max_active_last;
  uint64_t ps_cache_bytes, ps_cache_limit, ps_cache_buffers;
  uint64_t ps_cache_hits, ps_cache_misses, ps_cache_evictions;
  uint64_t ps_cache_target;             /* <= limit: lowered while the
                                           system is short of memory */
  /* Bytes the txg syncs and in-place log writes wrote since the pool was
   * opened, every copy: volume data, and metadata (indirect blocks,
   * objsets, space maps, deferred-free lists, uberblocks). */
  uint64_t ps_written_data, ps_written_meta;
  /* ps_written_meta by kind: indirect blocks, objsets (dnodes), space
   * maps, deferred-free lists, dataset records, dead lists, uberblocks. */
  uint64_t ps_written_indirect, ps_written_objset, ps_written_spacemap;
  uint64_t ps_written_defer, ps_written_dsdir, ps_written_deadlist;
  uint64_t ps_written_uberblock;
  uint64_t ps_dirty_max;                /* the write throttle's limit */
  /* The throttle since the pool was opened: writers delayed on its
   * curve and the time they slept in all, writers stopped at
   * ps_dirty_max until a sync made room (OpenZFS's dmu_tx_delay and
   * dmu_tx_dirty_over_max). */
  uint64_t ps_throttle_delays, ps_throttle_delay_ns, ps_throttle_stalls;
  /* Destroyed volumes and snapshots whose blocks the txg syncs are still
   * freeing in the background (as zpool's freeing): data bytes left,
   * and how many datasets. */
  uint64_t ps_freeing, ps_freeing_datasets;
} zvol_pool_stats_t;

ZVOL_API void zvol_pool_get_stats (zvol_pool_t *pool, zvol_pool_stats_t *ps);
/* Wait until the background free of destroyed datasets is done and its
 * space is free again, syncing txgs meanwhile; progress (may be NULL) is
 * told the data bytes left (and the most seen) after each sync.  0,
 * -EIO when a free stopped at a block that fails (logged; it stays
 * queued, tried again at the next import), -EROFS on a read-only pool
 * with something left, -ECANCELED when one of cancel_fd (may be NULL;
 * -1: unused) turns readable or hangs up (a live client gone, a server
 * stopping: the free goes on, only the wait ends), or the error that
 * suspended the pool. */
ZVOL_API int zvol_pool_wait_freeing (zvol_pool_t *pool,
                                     const int cancel_fd[2],
                                     void (*progress) (void *arg,
                                                       uint64_t left,
                                                       uint64_t total),
                                     void *arg);

/* One row of the txg history (OpenZFS's txgs kstat). */
typedef struct zvol_txg_stats {
  uint64_t ts_txg;
  uint64_t ts_birth_ns;        /* since the engine started */
  char ts_state;               /* O open, Q quiescing, S syncing,
                                  C committed */
  uint64_t ts_ndirty, ts_nread, ts_nwritten, ts_reads, ts_writes;
  uint64_t ts_otime_ns, ts_qtime_ns, ts_wtime_ns, ts_stime_ns;
} zvol_txg_stats_t;
#define ZVOL_TXG_HISTORY 100u

/* The newest txgs, oldest first, at most 'max'; returns how many. */
ZVOL_API size_t zvol_pool_get_txgs (zvol_pool_t *pool, zvol_txg_stats_t *out,
                                    size_t max);

typedef struct zvol_stats {
  const char *vs_name;
  uint64_t vs_volsize;
  uint32_t vs_volblocksize;
  bool vs_readonly;
  uint64_t vs_direct_blocks;    /* data blocks written by their writers */
  /* The intent log (all zero and vs_log false when read-only). */
  bool vs_log;
  unsigned vs_sync, vs_logbias;
  const char *vs_log_device;            /* NULL: a ring in the pool */
  uint64_t vs_zil_lwbs_written, vs_zil_lwb_bytes;
  uint64_t vs_zil_ring_size, vs_zil_ring_used;
  uint64_t vs_zil_records_copied, vs_zil_records_need_copy;
  uint64_t vs_zil_records_indirect, vs_zil_records_free;
  uint64_t vs_zil_records_dropped;
  uint64_t vs_zil_commits, vs_zil_commit_fallbacks;
  uint64_t vs_zil_commit_latency_mean_ns, vs_zil_commit_latency_p99_ns;
  uint64_t vs_zil_lwb_latency_ewma_ns;
  uint64_t vs_zil_lwbs_ahead;           /* written before their commit */
  uint64_t vs_zil_commit_sleeps;        /* times a commit went to sleep */
} zvol_stats_t;

ZVOL_API void zvol_get_stats (zvol_t *zv, zvol_stats_t *vs);

/*
 * The tables as text, the format of the kstat files and of the admin
 * tool: "name value" lines of the pool's and (zv not NULL) the volume's
 * figures; the txg history in OpenZFS's columns.  A string to free().
 */
ZVOL_API char *zvol_format_stats (zvol_pool_t *pool, zvol_t *zv);
ZVOL_API char *zvol_format_txgs (zvol_pool_t *pool);

/*
 * The kstat writer: a thread that rewrites DIR/txgs and DIR/stats every
 * interval (atomically: a reader never sees half a table), and once more
 * when stopped.  'tick', if set, sees the txg table after each round (the
 * plugin logs its newest line).  Start it after a fork, like the pool.
 */
typedef struct zvol_kstat zvol_kstat_t;
typedef void (*zvol_kstat_tick_fn) (void *arg, const char *txgs);

/* mkdir -p DIR (0755): 0 or -errno. */
ZVOL_API int zvol_kstat_mkdir (const char *dir);
/* The default directory for a pool: /run/nbdkit-zvol/NAME as root, else
 * $XDG_RUNTIME_DIR/nbdkit-zvol/NAME, made if missing; NULL when neither
 * can be had (the reason is logged at debug level).  free() it. */
ZVOL_API char *zvol_kstat_default_dir (const char *pool_name);
/* dir NULL: no files, only the tick.  ex (NULL: the pool's tables only)
 * gives the volumes: DIR/stats has the pool's figures and the volume
 * 'volume''s (the default export; NULL or gone: the pool's alone), and
 * DIR/volumes/NAME/stats each volume's, as zvoladm stats POOL/NAME.  No
 * volume is held between rounds (zvol_exports_foreach).  Returns 0 or
 * -errno. */
typedef struct zvol_exports zvol_exports_t;
ZVOL_API int zvol_kstat_start (zvol_pool_t *pool, zvol_exports_t *ex,
                               const char *volume, const char *dir,
                               unsigned interval_ms,
                               zvol_kstat_tick_fn tick, void *arg,
                               zvol_kstat_t **ksp);
ZVOL_API void zvol_kstat_stop (zvol_kstat_t *ks);

/* ---- served volumes (exports.c) ---- */

/*
 * The volumes a server has open, by name, each with a count of the
 * clients (or commands) using it: what a front end serves from, and what
 * the admin commands of a running server act on.  A volume is opened on
 * its first hold (its intent log replayed then) and stays open until it
 * is destroyed or the table freed.  Thread-safe.
 */
/* vc: how volumes are opened (NULL: zvol_config_init's defaults). */
ZVOL_API zvol_exports_t *zvol_exports_new (zvol_pool_t *pool,
                                           const zvol_config_t *vc);
ZVOL_API zvol_pool_t *zvol_exports_pool (zvol_exports_t *ex);
/* Open every volume of the pool now (a server, before serving: every
 * log replayed first).  0 or the first error of zvol_open. */
ZVOL_API int zvol_exports_open_all (zvol_exports_t *ex);
/* Use the volume 'name' (opened if it is not): 0 and *zvp, or the error
 * of zvol_open (-ENOENT: no such volume, or it is being destroyed). */
ZVOL_API int zvol_exports_hold (zvol_exports_t *ex, const char *name,
                                zvol_t **zvp);
ZVOL_API void zvol_exports_rele (zvol_exports_t *ex, zvol_t *zv);
/* How many holds the volume 'name' has (0: none, or not open). */
ZVOL_API unsigned zvol_exports_holds (zvol_exports_t *ex, const char *name);
/* Destroy the volume 'name': -EBUSY (saying by how many) while it is
 * held, else it is closed and zvol_volume_destroy'ed; no hold of it
 * succeeds meanwhile. */
ZVOL_API int zvol_exports_destroy (zvol_exports_t *ex, const char *name);
/* Destroy the datasets names[0..n-1] in that order (zvol_destroy_plan's):
 * first every one is checked unheld (-EBUSY naming the first held, and
 * nothing is destroyed), then all are closed and no hold of any
 * succeeds until the last is destroyed.  Stops at the first failure
 * (those before it are gone).  dry_run: only the check. */
ZVOL_API int zvol_exports_destroy_set (zvol_exports_t *ex,
                                       const zvol_dsname_t *names, size_t n,
                                       bool dry_run);
/* Roll back to snapshot "VOL@SNAP" (zvol_snapshot_rollback) with VOL
 * closed: -EBUSY while a client holds it.  A snapshot opened by a hold
 * is closed again at its last release. */
ZVOL_API int zvol_exports_rollback (zvol_exports_t *ex, const char *snapshot,
                                    bool destroy_newer);
/* Receive a stream into "VOL" or "VOL@SNAP" (zvol_receive) with VOL
 * closed and no hold of it succeeding meanwhile: -EBUSY while a client
 * holds an existing VOL.  A new volume is served (opened by its first
 * hold) once the receive is done. */
ZVOL_API int zvol_exports_receive (zvol_exports_t *ex, const char *target,
                                   const zvol_stream_io_t *io);
/* fn on every volume of the pool (no snapshots), opened if it is not
 * (unless being changed, or a destroy ended since the listing): called
 * under the table's lock, so no destroy or rollback closes it meanwhile
 * (they wait for fn); fn must not call the table. */
typedef void (*zvol_exports_fn) (void *arg, const char *name, zvol_t *zv);
ZVOL_API void zvol_exports_foreach (zvol_exports_t *ex, zvol_exports_fn fn,
                                    void *arg);
/* Close every volume and free the table: the first error of zvol_close.
 * Waits (30 s at most) for the holds to end first; with some still
 * taken then, -EBUSY and nothing is closed or freed. */
ZVOL_API int zvol_exports_free (zvol_exports_t *ex);
/* Forget the holds still taken, for a server whose connections are all
 * gone without releasing theirs (nbdkit skips a connection's .close once
 * it is quitting, after it has waited for every connection's thread):
 * how many there were.  Never while a holder may still run. */
ZVOL_API unsigned zvol_exports_forget_holds (zvol_exports_t *ex);

/* ---- admin commands (admin.c) ---- */

/*
 * The commands of zvoladm, in its syntax (argv[0] is the command:
 * "create", "destroy", "list", "stats"), run on an open pool: the same
 * code offline (zvoladm imported the pool) and live (the control socket
 * of the server).  Output goes to out, messages ("zvoladm: ...", with
 * what the engine logged meanwhile on this thread) to err.  Returns the
 * exit code.
 */
#define ZVOL_ADMIN_OK    0
#define ZVOL_ADMIN_FAIL  1
#define ZVOL_ADMIN_USAGE 2
/* A later pool of one listing: no header line. */
#define ZVOL_ADMIN_NOHEADER 0x1u

/* What a command line needs before a pool is open (zvoladm's choice of
 * pool, devices, live or offline): zvol_admin_parse fills it. */
typedef struct zvol_admin_target {
  const char *at_cmd;          /* the command's name */
  bool at_make_pool;           /* create POOL DEV...: no pool to open */
  bool at_readonly;            /* only reads: a read-only import does */
  int at_optind;               /* argv index of the first operand */
  int at_noperands;            /* pool names (list), or 1 */
  char at_pool[ZVOL_NAME_MAX]; /* the first operand's pool, "" if none */
  const char *at_devs[ZVOL_MAX_DEVS];  /* -d DEVICE, in order */
  unsigned at_ndevs;
  unsigned at_stream;          /* ZVOL_ADMIN_STREAM_*: the tool's stdout
                                  (send) or stdin (receive), 0: none */
} zvol_admin_target_t;
#define ZVOL_ADMIN_STREAM_OUT 1u
#define ZVOL_ADMIN_STREAM_IN  2u

/* Parse a command line (argv[0] the command): ZVOL_ADMIN_OK, or
 * ZVOL_ADMIN_USAGE with the reason and the usage on err. */
ZVOL_API int zvol_admin_parse (int argc, char *const *argv,
                               zvol_admin_target_t *t, FILE *err);
ZVOL_API int zvol_admin_run (zvol_exports_t *ex, int argc, char *const *argv,
                             unsigned flags, FILE *out, FILE *err);
/*
 * The same with a command's stream (send, receive): ai_stream_fd, which
 * the command checks (type, direction; no terminal) and leaves open.
 * A stream stops (-ECANCELED) when one of ai_cancel_fd (-1: unused)
 * turns readable or hangs up: a live client gone, a server stopping.
 * Progress lines (-v) go to ai_progress at once, else to err.
 */
typedef struct zvol_admin_io {
  FILE *ai_out, *ai_err;
  int ai_stream_fd;
  int ai_cancel_fd[2];
  void (*ai_progress) (void *arg, const char *line);
  void *ai_progress_arg;
} zvol_admin_io_t;
ZVOL_API int zvol_admin_run_io (zvol_exports_t *ex, int argc,
                                char *const *argv, unsigned flags,
                                const zvol_admin_io_t *io);
/* The usage lines of every command ("  zvoladm create ..."). */
ZVOL_API void zvol_admin_print_usage (FILE *fp);
/* A size as the commands print it: for people (1.50M), or with exact
 * the bytes. */
ZVOL_API void zvol_admin_size (char *buf, size_t len, uint64_t v,
                               bool exact);
/*
 * A check's report as zvoladm prints it, offline and live alike: the
 * first ZVOL_CHECK_PRINT_LIST problems of each kind in full as they are
 * found (zvol_check_print_problem, a cr_problem callback on a
 * zvol_check_printer_t), then the summary (zvol_check_print_summary,
 * true when clean); zvol_check_progress_line formats a progress line.
 */
#define ZVOL_CHECK_PRINT_LIST 10
typedef struct zvol_check_printer {
  FILE *cp_out;
  bool cp_scrub;               /* a scrub's report: repairs counted, and
                                  clean when all was repaired */
  uint64_t cp_shown[ZVOL_CHECK_LEAK + 1];
  uint64_t cp_more;
} zvol_check_printer_t;
ZVOL_API void zvol_check_print_problem (void *printer,
                                        const zvol_check_problem_t *cp);
ZVOL_API bool zvol_check_print_summary (const zvol_check_printer_t *pr,
                                        const char *pool,
                                        const zvol_check_report_t *rep);
ZVOL_API void zvol_check_progress_line (char *buf, size_t len,
                                        const char *what, uint64_t done,
                                        uint64_t total);

/* ---- the control socket (ctl.c) ---- */

/*
 * A Unix stream socket through which zvoladm runs admin commands in a
 * running server: owner-only (mode 0600, the peer's uid must be the
 * server's or root's), one command at a time (the next waits up to the
 * tunable ctl_busy_wait, then fails), a stale socket of a dead server
 * replaced, the socket removed at stop.  Start it after a fork.
 */
typedef struct zvol_ctl zvol_ctl_t;

/* Listen on 'path' (made in a directory made 0700 if missing) and serve
 * the admin commands on ex.  -EADDRINUSE when a server answers there.
 * ZVOL_CTL_QUIET: why it cannot start is logged at debug level (the
 * default path, which is worth no error). */
#define ZVOL_CTL_QUIET 0x1u
ZVOL_API int zvol_ctl_start (zvol_exports_t *ex, const char *path,
                             unsigned flags, zvol_ctl_t **ctlp);
/* What zvol_ctl_start would find at path, nothing taken (a server checks
 * before it forks, where an error still reaches the terminal): 0 (free,
 * or a stale socket start would replace), -EADDRINUSE, -EEXIST (no
 * socket), -ENAMETOOLONG; said as zvol_ctl_start says it. */
ZVOL_API int zvol_ctl_check (const char *path, unsigned flags);
/* Stop (a running command finishes first) and remove the socket. */
ZVOL_API void zvol_ctl_stop (zvol_ctl_t *ctl);
/* Run one command through the socket at 'path': 0 with its exit code in
 * *exitp and its output written to out and err; -ECONNREFUSED or -ENOENT
 * when nothing answers there (the caller may go offline); -EPROTO for a
 * reply that makes no sense; other -errno. */
ZVOL_API int zvol_ctl_call (const char *path, int argc, char *const *argv,
                            unsigned flags, FILE *out, FILE *err,
                            int *exitp);
/* The same with a command's stream: stream_fd (the tool's stdout or
 * stdin) goes to the server with the request (SCM_RIGHTS), the server's
 * progress lines go to err as they come, and the reply is awaited as
 * long as the stream runs (the server stops it if this process dies). */
ZVOL_API int zvol_ctl_call_fd (const char *path, int argc,
                               char *const *argv, unsigned flags,
                               int stream_fd, FILE *out, FILE *err,
                               int *exitp);
/* DIR/file in the pool's runtime directory (zvol_kstat_default_dir's,
 * nothing made): where the control socket is by default.  NULL when there
 * is none (not root and no XDG_RUNTIME_DIR).  free() it. */
ZVOL_API char *zvol_runtime_path (const char *pool_name, const char *file);

#ifdef __cplusplus
}
#endif

#endif /* ZVOL_H */
