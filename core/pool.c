/*
 * pool.c: open (create or import), start and close a pool.
 *
 * Theory.  The pool is the root of everything on disk (psync.c tells the
 * txg sync, import.c how a pool is read back, dsdir.c its datasets).
 * This module is the pool's life: zv_pool_open checks that the devices
 * are distinct, opens them, and creates a pool on them (every check
 * first, then the labels, then txg 1 with its first volume if asked for
 * one) or imports one (import.c); a read-write import claims each
 * dataset's log (zv_import_claim_logs) before anything can sync, and an
 * accepted rewind empties the uberblock slots it gave up only once the
 * import passed every check.  Then the txg engine is made, with
 * zv_psync_txg as its callback; zv_pool_start starts its thread and
 * zv_pool_close stops it (refused while a volume is open), syncing what
 * is dirty, and frees everything.
 *
 * State: opening -> open (no thread, the callers may still replay logs
 * inline) -> started (the txg engine's thread) -> closed.
 *
 * Locking: open and create run before any thread starts, so they take
 * no lock of their own; the structure (pool_impl.h) is shared by the
 * pool's modules, each saying which fields its locks guard.
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
#include "send.h"
#include "import.h"
#include "psync.h"
#include "label.h"
#include "dbuf.h"
#include "compress.h"
#include "scrub.h"
#include "mem.h"
#include "flat.h"
#include "resilver.h"
#include "tunable.h"

/* zil_size: the log ring of a pool created without a log device (0: 64
 * MiB, or a sixteenth of a small pool). */
static uint64_t zv_pool_zil_size = 0;

/* Defaults for a pool configuration: the tunables' current values. */
void
zv_pool_config_init (zv_pool_config_t *pc)
{
  memset (pc, 0, sizeof *pc);
  pc->pc_volblocksize = ZV_DEFAULT_VOLBLOCKSIZE;
  pc->pc_name = "zvol";
  pc->pc_zil_size = zv_pool_zil_size;
  zv_txg_tunables_default (&pc->pc_txg);
}

/* A random, nonzero 64-bit id. */
static uint64_t
pool_random_guid (void)
{
  uint64_t g = 0;

  while (g == 0)
    if (getrandom (&g, sizeof g, 0) != sizeof g)
      g = (uint64_t) time (NULL) * 0x9e3779b97f4a7c15ull ^ (uint64_t) getpid ();
  return g;
}

/* Release everything a failed or finished open holds. */
static void
pool_free (zv_pool_t *p)
{
  if (p == NULL)
    return;
  zv_resilver_stop (p);
  if (p->p_txg)
    zv_txg_destroy (p->p_txg);
  /* Direct writes of a txg that never synced (a suspended pool) end
   * before the devices close and the counters they pay into go. */
  zv_zio_pending_wait_all (&p->p_spa);
  if (p->p_logdev && !p->p_view)
    zv_dev_close (p->p_logdev);
  zv_import_unload (p);
  for (unsigned d = 0; d < p->p_spa.spa_ndevs && !p->p_view; d++)
    if (p->p_spa.spa_devs[d])
      zv_dev_close (p->p_spa.spa_devs[d]);
  zv_dsdir_fini (p);
  free (p->p_defer_ents);
  free (p);
}

/*
 * The identity of a device for the duplicate checks: a block device is
 * its device number (two nodes of one disk are one device), anything
 * else its inode (a symlink, a hard link or another spelling of a path
 * leads to the same one).  false when the path cannot be looked at: its
 * open reports why.
 */
typedef struct pool_dev_id {
  bool di_known;
  bool di_blk;
  dev_t di_dev;                /* st_rdev of a block device, else st_dev */
  ino_t di_ino;                /* 0 for a block device */
} pool_dev_id_t;

static void
pool_dev_id (const char *path, pool_dev_id_t *id)
{
  struct stat st;

  memset (id, 0, sizeof *id);
  if (stat (path, &st) == -1)
    return;
  id->di_known = true;
  id->di_blk = S_ISBLK (st.st_mode);
  id->di_dev = id->di_blk ? st.st_rdev : st.st_dev;
  id->di_ino = id->di_blk ? 0 : st.st_ino;
}

/* The same path, or the same device or file under two names. */
static bool
pool_same_dev (const char *pa, const pool_dev_id_t *a, const char *pb,
               const pool_dev_id_t *b)
{
  if (strcmp (pa, pb) == 0)
    return true;
  return a->di_known && b->di_known && a->di_blk == b->di_blk
    && a->di_dev == b->di_dev && a->di_ino == b->di_ino;
}

/*
 * Before anything is opened: every data device is a different device,
 * and the log device is none of them.  Opening one twice would fail on
 * its lock, with a message about another process.
 */
static int
pool_check_distinct (const zv_pool_config_t *pc)
{
  pool_dev_id_t ids[ZV_MAX_DEVS * ZV_MIRROR_MAX_SIDES], logid;
  char *leaf[ZV_MAX_DEVS * ZV_MIRROR_MAX_SIDES];
  unsigned nleaves = 0;
  int r = 0;
  const char *rados = NULL, *local = NULL;

  /* One kind of device: a pool half in a cluster and half on this host
   * would have neither's properties (another server could not import it,
   * and the RADOS lock would not cover the local half). */
  for (unsigned i = 0; i <= pc->pc_ndevices; i++) {
    const char *d = i < pc->pc_ndevices ? pc->pc_devices[i]
      : pc->pc_logdevice;
    if (d == NULL)
      continue;
    if (zv_dev_path_is_rados (d))
      rados = rados ? rados : d;
    else
      local = local ? local : d;
  }
  if (rados != NULL && local != NULL) {
    zv_error ("%s is a RADOS device and %s is not: a pool's devices (its "
              "log device included) are all RADOS devices or all files and "
              "block devices", rados, local);
    return -EINVAL;
  }

  /* Every file or block device: a mirror's sides each count, so one
   * file cannot be a side and a device, or two sides. */
  for (unsigned i = 0; i < pc->pc_ndevices; i++) {
    const char *d = pc->pc_devices[i];
    char err[512];
    unsigned ns;

    if (!zv_dev_path_is_mirror (d)) {
      leaf[nleaves++] = zv_strdup (d);
      continue;
    }
    if (zv_dev_mirror_parse (d, leaf + nleaves, &ns, err, sizeof err) < 0) {
      zv_error ("%s", err);
      r = -EINVAL;
      goto out;
    }
    nleaves += ns;
  }
  for (unsigned i = 0; i < nleaves && r == 0; i++) {
    pool_dev_id (leaf[i], &ids[i]);
    for (unsigned j = 0; j < i; j++) {
      if (!pool_same_dev (leaf[i], &ids[i], leaf[j], &ids[j]))
        continue;
      if (strcmp (leaf[i], leaf[j]) == 0)
        zv_error ("%s: device given twice", leaf[i]);
      else
        zv_error ("%s and %s are the same %s: device given twice",
                  leaf[j], leaf[i], ids[i].di_blk ? "block device" : "file");
      r = -EINVAL;
      break;
    }
  }
 if (r < 0 || pc->pc_logdevice == NULL)
    goto out;
  if (zv_dev_path_is_mirror (pc->pc_logdevice)) {
    zv_error ("%s: a log device cannot be a mirror (only data devices "
              "can)", pc->pc_logdevice);
    r = -EINVAL;
    goto out;
  }
  pool_dev_id (pc->pc_logdevice, &logid);
  for (unsigned i = 0; i < nleaves; i++) {
    if (!pool_same_dev (pc->pc_logdevice, &logid, leaf[i], &ids[i]))
      continue;
    if (strcmp (pc->pc_logdevice, leaf[i]) == 0)
      zv_error ("%s is both a data device and the log device: the log "
                "device must be a separate device", pc->pc_logdevice);
    else
      zv_error ("log device %s is the data device %s (the same %s): the "
                "log device must be a separate device", pc->pc_logdevice,
                leaf[i], logid.di_blk ? "block device" : "file");
    r = -EINVAL;
    break;
  }
 out:
  for (unsigned i = 0; i < nleaves; i++)
    free (leaf[i]);
  return r;
}

/* Open and lock every device named in the configuration (distinct:
 * pool_check_distinct). */
static int
pool_open_devs (const zv_pool_config_t *pc, zv_dev_t **devs)
{
  char err[1024];
  zv_dev_opts_t o;

  zv_import_dev_opts (pc, false, &o);
  for (unsigned i = 0; i < pc->pc_ndevices; i++) {
    int r = zv_dev_open_opts (pc->pc_devices[i], &o, &devs[i], err,
                              sizeof err);
    if (r < 0) {
      zv_error ("%s", err);
      for (unsigned j = 0; j < i; j++)
        zv_dev_close (devs[j]);
      return r;
    }
  }
  return 0;
}

/* The throttle's view of space (zv_txg_space_fn). */
static void
pool_space_pressure (void *arg, uint64_t *inuse, uint64_t *cap)
{
  zv_alloc_pressure (arg, inuse, cap);
}

/* Finish opening: the txg engine, whose throttle sees space too. */
static void
pool_finish (zv_pool_t *p, const zv_pool_config_t *pc)
{
  p->p_txg = zv_txg_create (&pc->pc_txg, p->p_synced_txg + 1, zv_psync_txg,
                            p);
  zv_txg_set_space_fn (p->p_txg, pool_space_pressure, p->p_spa.spa_alloc);
  p->p_open_txg = p->p_synced_txg;
}

/*
 * The pool's geometry: how create shares out the devices' data areas.
 * The allocator keeps its slop back from writers so that a sync never
 * runs out (zv_alloc_slop, with its tunables); create also keeps room for
 * the metadata of a full volume and, without a log device, for the intent
 * log's ring.  The deferred-free lists' size is ZV_DEFER_NBLOCKS above.
 */
static const struct pool_geometry {
  unsigned pg_meta_shift;         /* metadata: 1/64 of the capacity... */
  uint64_t pg_meta_extra;         /* ...plus this */
  unsigned pg_zil_shift;          /* default ring: 1/16 of the capacity... */
  uint64_t pg_zil_max;            /* ...at most this */
  unsigned pg_zil_limit_shift;    /* any ring: at most 1/4 of it */
  unsigned pg_zil_min_blocks;     /* and at least this many log blocks */
} pool_geometry = {
  .pg_meta_shift = 6, .pg_meta_extra = 8ull << 20,
  .pg_zil_shift = 4, .pg_zil_max = 64ull << 20,
  .pg_zil_limit_shift = 2, .pg_zil_min_blocks = 4,
};

/* What create lays out, once every argument checked. */
typedef struct pool_layout {
  uint64_t pl_capacity;           /* data areas of the data devices */
  uint64_t pl_zil_ring;           /* bytes; 0 with a log device */
} pool_layout_t;

/* Create, step 1: the arguments. */
static int
pool_create_validate (const zv_pool_config_t *pc)
{
  uint32_t vbs = pc->pc_volblocksize;

  if (!zv_dsdir_blksz_valid (vbs)) {
    zv_error ("volblocksize %" PRIu32 " is invalid: a power of two from "
              "4K to 128K", vbs);
    return -EINVAL;
  }
  /* 0: the pool alone, its volumes created later. */
  if (pc->pc_volsize != 0 && !zv_dsdir_volsize_valid (pc->pc_volsize)) {
    zv_error ("volume size %" PRIu64 " is invalid: a nonzero multiple of "
              "512 bytes, at most 1 PiB", pc->pc_volsize);
    return -EINVAL;
  }
  if (pc->pc_name == NULL || !zv_name_is_valid (pc->pc_name, ZV_NAME_MAX)) {
    zv_error ("pool name must be 1 to %u characters of printable ASCII",
              ZV_NAME_MAX - 1);
    return -EINVAL;
  }
  uint32_t comp;
  if (pc->pc_compression
      && zv_comp_prop_parse (pc->pc_compression, &comp) < 0) {
    char shown[64];
    zv_str_printable (pc->pc_compression, 32, shown, sizeof shown);
    zv_error ("compression '%s' is invalid: off, lz4, zstd or zstd-N "
              "(N from 1 to %u)", shown, ZV_COMP_ZSTD_MAX_LEVEL);
    return -EINVAL;
  }
  return 0;
}

/* A device create may use: large enough, and no pool's labels on it. */
static int
pool_create_check_dev (zv_dev_t *dev, const char *role)
{
  uint64_t size = ZV_P2ALIGN (zv_dev_size (dev), ZV_SECTOR);
  zv_config_phys_t cf;
  char err[512];
  int r;

  /* A new mirror starts whole: every side there. */
  for (unsigned i = 0; i < zv_dev_nsides (dev); i++)
    if (!zv_dev_side_ok (dev, i)) {
      zv_error ("%s: side %s cannot be used (see above): a new mirror "
                "needs every side", zv_dev_path (dev),
                zv_dev_side_path (dev, i));
      return -EINVAL;
    }
  if (size < ZV_MIN_DEV_SIZE) {
    zv_error ("%s: %s too small (%" PRIu64 " bytes; at least %llu)",
              zv_dev_path (dev), role, size,
              (unsigned long long) ZV_MIN_DEV_SIZE);
    return -EINVAL;
  }
  /* Only a device that shows no sign of a pool is free: damaged labels,
   * or a configuration that verifies but fails its bounds, may sit over
   * a pool whose uberblocks, tree and data are intact. */
  r = zv_label_read_config (dev, &cf, NULL, err, sizeof err);
  if (r == 0)
    zv_error ("%s: already a device of pool '%s' (guid %016" PRIx64 "); "
              "refusing to overwrite it as a %s (import it without "
              "create=true, or wipe it first)", zv_dev_path (dev),
              cf.cf_name, cf.cf_pool_guid, role);
  else if (r == -EIO)
    zv_error ("%s; refusing to overwrite it as a %s (wipe it first if it "
              "really is unused)", err, role);
  else if (r != -ENOENT)
    zv_error ("%s: holds a pool configuration that verifies but is "
              "invalid (%s); refusing to overwrite it as a %s (wipe it "
              "first if it really is unused)", zv_dev_path (dev), err, role);
  return r == -ENOENT ? 0 : -EEXIST;
}

/* Create, step 2: check the devices and share out their space. */
/* A size as the user writes it (zil_size's format: 64M, 7680, auto). */
static void
pool_size_text (uint64_t v, char *buf, size_t len)
{
  const zv_tunable_t *tn = zv_tunable_lookup ("zil_size");

  if (tn != NULL)
    zv_tunable_format (tn, v, buf, len);
  else
    snprintf (buf, len, "%" PRIu64, v);
}

static int
pool_create_layout (const zv_pool_config_t *pc, zv_pool_t *p,
                    pool_layout_t *pl)
{
  const struct pool_geometry *g = &pool_geometry;
  zv_spa_t *spa = &p->p_spa;
  uint64_t cap = 0, ring = 0, slop, meta, usable;
  int r;

  for (unsigned d = 0; d < spa->spa_ndevs; d++) {
    r = pool_create_check_dev (spa->spa_devs[d], "device");
    if (r < 0)
      return r;
    spa->spa_data_end[d] = zv_data_end (zv_dev_size (spa->spa_devs[d]));
    cap += spa->spa_data_end[d] - zv_data_start ();
  }
  if (p->p_logdev) {
    r = pool_create_check_dev (p->p_logdev, "log device");
    if (r < 0)
      return r;
  }
  else {
    uint64_t lo = g->pg_zil_min_blocks * (uint64_t) ZV_ZIL_BLKSZ;
    uint64_t hi = ZV_P2ALIGN (cap >> g->pg_zil_limit_shift, ZV_ZIL_BLKSZ);

    ring = pc->pc_zil_size ? pc->pc_zil_size
      : ZV_MIN (g->pg_zil_max, cap >> g->pg_zil_shift);
    ring = ZV_P2ALIGN (ring, ZV_ZIL_BLKSZ);
    if (ring < lo || ring > hi) {
      char given[32], los[32], his[32], caps[32];

      pool_size_text (pc->pc_zil_size, given, sizeof given);
      pool_size_text (lo, los, sizeof los);
      pool_size_text (hi, his, sizeof his);
      pool_size_text (cap, caps, sizeof caps);
      if (hi < lo)
        zv_error ("zil_size=%s: the pool (%s of data space) is too small "
                  "for an intent log ring, which needs at least %s (%u log "
                  "blocks of %uK) and at most a quarter of the pool: use "
                  "larger devices or a log device (log=)", given, caps, los,
                  g->pg_zil_min_blocks, ZV_ZIL_BLKSZ / 1024);
      else
        zv_error ("zil_size=%s does not fit this pool: the intent log "
                  "ring must be from %s (%u log blocks of %uK) to %s (a "
                  "quarter of the pool's %s of data space)", given, los,
                  g->pg_zil_min_blocks, ZV_ZIL_BLKSZ / 1024, his, caps);
      return -EINVAL;
    }
  }
  slop = zv_alloc_slop (cap) + ring;
  meta = (cap >> g->pg_meta_shift) + g->pg_meta_extra;
  usable = cap > slop + meta ? cap - slop - meta : 0;
  if (pc->pc_volsize != 0 && !pc->pc_sparse && pc->pc_volsize > usable) {
    zv_error ("devices too small for a %" PRIu64 "-byte volume: %" PRIu64
              " bytes usable of %" PRIu64 " (grow the devices, shrink "
              "size=, or pass sparse=true for a thin volume)",
              pc->pc_volsize, usable, cap);
    return -EINVAL;
  }
  pl->pl_capacity = cap;
  pl->pl_zil_ring = ring;
  return 0;
}

/* Label one device with the pool's configuration. */
static int
pool_label_dev (zv_dev_t *dev, const zv_config_phys_t *cf)
{
  int r = zv_label_init (dev, cf);

  if (r < 0)
    zv_error ("%s: writing the labels failed: %s", zv_dev_path (dev),
              strerror (-r));
  return r;
}

/* Create, step 3: the configuration, into every device's labels. */
static int
pool_create_labels (const zv_pool_config_t *pc, zv_pool_t *p)
{
  zv_spa_t *spa = &p->p_spa;
  zv_config_phys_t cf;
  int r = 0;

  memset (&cf, 0, sizeof cf);
  cf.cf_magic = ZV_LABEL_MAGIC;
  cf.cf_version = ZV_CONFIG_VERSION;
  cf.cf_ndevs = spa->spa_ndevs;
  cf.cf_pool_guid = pool_random_guid ();
  cf.cf_volblocksize = pc->pc_volblocksize;
  cf.cf_volsize = pc->pc_volsize;
  cf.cf_create_time = (uint64_t) time (NULL);
  /* Every ring slot starts as a valid empty uberblock (label.c), so a
   * slot that does not verify was damaged, not merely unwritten. */
  cf.cf_flags = ZV_CF_F_UB_EMPTY;
  /* A new pool is of version 3 and may hold compressed blocks from its
   * first txg. */
  cf.cf_flags |= ZV_CF_F_FEATURES;
  cf.cf_features = ZV_FEAT_COMPRESS;
  snprintf (cf.cf_name, sizeof cf.cf_name, "%s", pc->pc_name);
  for (unsigned d = 0; d < spa->spa_ndevs; d++) {
    cf.cf_dev_guids[d] = pool_random_guid ();
    cf.cf_dev_sizes[d] = ZV_P2ALIGN (zv_dev_size (spa->spa_devs[d]),
                                     ZV_SECTOR);
  }
  if (p->p_logdev) {
    cf.cf_log_guid = pool_random_guid ();
    cf.cf_log_size = ZV_P2ALIGN (zv_dev_size (p->p_logdev), ZV_SECTOR);
  }
  /* A mirror needs the feature: a reader without it would take one
   * side for the device. */
  for (unsigned d = 0; d < spa->spa_ndevs; d++)
    if (zv_dev_is_mirror (spa->spa_devs[d]))
      cf.cf_features |= ZV_FEAT_MIRROR;
  for (unsigned d = 0; d < spa->spa_ndevs && r == 0; d++) {
    zv_dev_t *dev = spa->spa_devs[d];

    cf.cf_dev_index = d;
    cf.cf_dev_guid = cf.cf_dev_guids[d];
    cf.cf_dev_size = cf.cf_dev_sizes[d];
    cf.cf_mirror_nsides = 0;
    memset (cf.cf_side_guids, 0, sizeof cf.cf_side_guids);
    if (zv_dev_is_mirror (dev)) {
      cf.cf_mirror_nsides = zv_dev_nsides (dev);
      for (unsigned i = 0; i < cf.cf_mirror_nsides; i++)
        cf.cf_side_guids[i] = pool_random_guid ();
    }
    r = pool_label_dev (dev, &cf);
  }
  cf.cf_mirror_nsides = 0;
  memset (cf.cf_side_guids, 0, sizeof cf.cf_side_guids);
  if (r == 0 && p->p_logdev) {
    zv_config_phys_t lcf = cf;
    lcf.cf_role = ZV_ROLE_LOG;
    lcf.cf_dev_index = 0;
    lcf.cf_dev_guid = cf.cf_log_guid;
    lcf.cf_dev_size = cf.cf_log_size;
    r = pool_label_dev (p->p_logdev, &lcf);
  }
  if (r < 0)
    return r;
  spa->spa_guid = cf.cf_pool_guid;
  spa->spa_version = ZV_POOL_VERSION;
  atomic_store (&spa->spa_features, cf.cf_features);
  snprintf (p->p_name, sizeof p->p_name, "%s", cf.cf_name);
  return 0;
}

/* The ring of a volume created after the pool: zil_size, or 64 MiB (a
 * sixteenth of a small pool), within what create accepts. */
uint64_t
zv_pool_default_ring (const zv_pool_t *p)
{
  const struct pool_geometry *g = &pool_geometry;
  uint64_t lo = g->pg_zil_min_blocks * (uint64_t) ZV_ZIL_BLKSZ;
  uint64_t hi = ZV_P2ALIGN (p->p_capacity >> g->pg_zil_limit_shift,
                            ZV_ZIL_BLKSZ);
  uint64_t ring = zv_pool_zil_size ? zv_pool_zil_size
    : ZV_MIN (g->pg_zil_max, p->p_capacity >> g->pg_zil_shift);

  ring = ZV_P2ALIGN (ring, ZV_ZIL_BLKSZ);
  return ZV_MAX (lo, ZV_MIN (ring, ZV_MAX (hi, lo)));
}

/* zvol_volume_create: a volume created after its pool gets the default
 * ring (zil_size), which the pool's geometry bounds. */
int
zv_pool_volume_create (zv_pool_t *p, const char *name, uint64_t volsize,
                       uint32_t blksz, uint64_t reservation,
                       uint32_t compress)
{
  return zv_dsdir_create (p, name, volsize, blksz, reservation,
                          zv_pool_default_ring (p), compress);
}

int
zv_pool_volume_clone (zv_pool_t *p, const char *snap, const char *name,
                      uint64_t reservation)
{
  return zv_snap_clone (p, snap, name, reservation, zv_pool_default_ring (p));
}

/* The property of the volume made with the pool (checked already). */
static uint32_t
pool_create_compression (const zv_pool_config_t *pc)
{
  uint32_t comp = ZV_COMP_DEFAULT;

  if (pc->pc_compression)
    ZV_VERIFY (zv_comp_prop_parse (pc->pc_compression, &comp) == 0);
  return comp;
}

/* Create a new pool: every check first, then the labels, then txg 1
 * with its first volume if asked for one. */
static int
pool_create (const zv_pool_config_t *pc, zv_pool_t *p)
{
  zv_spa_t *spa = &p->p_spa;
  zv_txg_sync_stats_t st;
  pool_layout_t pl;
  int r = pool_create_validate (pc);

  if (r == 0)
    r = pool_create_layout (pc, p, &pl);
  /* The volume made with the pool is named as the pool, each byte a
   * volume's name cannot hold ('/', '@', a space, a leading '-' or '.')
   * made '_'. */
  char vname[ZV_NAME_MAX];
  if (r == 0) {
    snprintf (vname, sizeof vname, "%s", pc->pc_name);
    for (size_t i = 0; vname[i] != '\0'; i++) {
      char t[2] = { vname[i], '\0' };
      if (!zv_dsdir_name_valid (t) && !(i > 0 && (t[0] == '-'
                                                  || t[0] == '.')))
        vname[i] = '_';
    }
  }
  /* Every check passed: from here on we write. */
  if (r == 0)
    r = pool_create_labels (pc, p);
  if (r < 0)
    return r;
  zv_import_setup (p, pc);
  p->p_dd.dd_next_id = 1;
  zv_alloc_dirty_all (spa->spa_alloc);
  if (pc->pc_volsize != 0)
    r = zv_dsdir_create_locked (p, vname, pc->pc_volsize,
                               pc->pc_volblocksize,
                               pc->pc_sparse ? 0 : pc->pc_volsize,
                               pl.pl_zil_ring ? pl.pl_zil_ring
                               : zv_pool_default_ring (p), 1, false, NULL,
                               pool_create_compression (pc));
  if (r == 0)
    r = zv_psync_txg (p, 1, &st);
  if (r < 0)
    return r;
  if (pc->pc_volsize != 0)
    zv_info ("created pool '%s' (guid %016" PRIx64 "): %u device(s), "
             "%" PRIu64 "-byte volume, volblocksize %" PRIu32, p->p_name,
             spa->spa_guid, spa->spa_ndevs, pc->pc_volsize,
             pc->pc_volblocksize);
  else
    zv_info ("created pool '%s' (guid %016" PRIx64 "): %u device(s), no "
             "volume yet", p->p_name, spa->spa_guid, spa->spa_ndevs);
  return 0;
}

/* Create or import. */
static int pool_open (const zv_pool_config_t *pc, zv_check_t *ck,
                      zv_pool_t **poolp);

int
zv_pool_open (const zv_pool_config_t *pc, zv_pool_t **poolp)
{
  return pool_open (pc, NULL, poolp);
}

int
zv_pool_open_check (const zv_pool_config_t *pc, zv_check_t *ck,
                    zv_pool_t **poolp)
{
  ZV_VERIFY (pc->pc_readonly && !pc->pc_create);
  return pool_open (pc, ck, poolp);
}

/* The view's cache: its own (the server's holds the live txg's blocks),
 * small, as the walk reads each block once or a few times. */
#define POOL_VIEW_CACHE (64ull << 20)

int
zv_pool_open_view (zv_pool_t *live, uint64_t txg, zv_check_t *ck,
                   zv_pool_t **viewp)
{
  zv_dev_t *devs[ZV_MAX_DEVS] = { 0 };
  zv_pool_config_t pc;
  zv_pool_t *p;
  int r;

  *viewp = NULL;
  zv_pool_config_init (&pc);
  pc.pc_readonly = true;
  pc.pc_ndevices = live->p_spa.spa_ndevs;
  pc.pc_cache_size = POOL_VIEW_CACHE;
  memcpy (devs, live->p_spa.spa_devs, sizeof devs);
  p = zv_calloc (1, sizeof *p);
  p->p_readonly = true;
  p->p_check = ck;
  p->p_view = true;
  p->p_view_txg = txg;
  p->p_logdev = live->p_logdev;
  zv_dsdir_init (p);
  r = zv_import_pool (&pc, p, devs);
  if (r == 0)
    pool_finish (p, &pc);
  if (r < 0) {
    pool_free (p);
    return r;
  }
  *viewp = p;
  return 0;
}

static int
pool_open (const zv_pool_config_t *pc, zv_check_t *ck, zv_pool_t **poolp)
{
  zv_dev_t *devs[ZV_MAX_DEVS] = { 0 };
  zv_pool_t *p;
  int r;

  *poolp = NULL;
  if (pc->pc_ndevices == 0 || pc->pc_ndevices > ZV_MAX_DEVS) {
    zv_error ("a pool needs 1 to %u devices (%u given)", ZV_MAX_DEVS,
              pc->pc_ndevices);
    return -EINVAL;
  }
  if (pc->pc_create && pc->pc_logdevice != NULL && pc->pc_zil_size != 0) {
    char given[32];

    pool_size_text (pc->pc_zil_size, given, sizeof given);
    zv_error ("zil_size=%s sizes the intent log's ring inside the pool, "
              "which a pool with a log device does not have: the whole of "
              "%s holds the log (drop zil_size= or log=)", given,
              pc->pc_logdevice);
    return -EINVAL;
  }
  if (pc->pc_zil_recover > ZV_ZIL_RECOVER_DISCARD) {
    zv_error ("zil_recover: unknown mode %u", (unsigned) pc->pc_zil_recover);
    return -EINVAL;
  }
  /* Recovery drops records a replay would apply: only a read-write
   * import replays, so anywhere else it would mean nothing. */
  if (pc->pc_zil_recover != ZV_ZIL_RECOVER_NONE
      && (pc->pc_create || pc->pc_readonly)) {
    zv_error ("zil_recover= applies to a read-write import only: %s",
              pc->pc_create ? "a new pool has no intent log to recover"
              : "a read-only import never replays the intent log (it "
              "shows the last synced txg)");
    return -EINVAL;
  }
  r = pool_check_distinct (pc);
  if (r < 0)
    return r;
  r = pool_open_devs (pc, devs);
  if (r < 0)
    return r;
  p = zv_calloc (1, sizeof *p);
  p->p_readonly = pc->pc_readonly;
  p->p_zil_recover = pc->pc_zil_recover;
  p->p_check = ck;
  zv_dsdir_init (p);
  if (pc->pc_create) {
    if (pc->pc_readonly) {
      zv_error ("cannot create a pool read-only");
      r = -EINVAL;
    }
    else {
      char err[1024];
      p->p_spa.spa_ndevs = pc->pc_ndevices;
      memcpy (p->p_spa.spa_devs, devs, sizeof devs);
      r = 0;
      if (pc->pc_logdevice) {
        zv_dev_opts_t o;
        zv_import_dev_opts (pc, true, &o);
        r = zv_dev_open_opts (pc->pc_logdevice, &o, &p->p_logdev, err,
                              sizeof err);
        if (r < 0)
          zv_error ("%s", err);
      }
      if (r == 0)
        r = pool_create (pc, p);
    }
  }
  else {
    r = zv_import_pool (pc, p, devs);
    if (r < 0) {
      /* Devices not yet placed into the pool are ours to close. */
      for (unsigned i = 0; i < pc->pc_ndevices; i++) {
        bool placed = false;
        for (unsigned d = 0; d < p->p_spa.spa_ndevs; d++)
          placed |= p->p_spa.spa_devs[d] == devs[i];
        if (!placed)
          zv_dev_close (devs[i]);
      }
    }
  }
  if (r == 0)
    pool_finish (p, pc);
  if (r == 0 && !pc->pc_create && !p->p_readonly)
    r = zv_import_claim_logs (p);
  else if (r == 0 && !pc->pc_create)
    zv_import_inspect_logs (p);
  if (r == 0 && p->p_ub_discard_pending)
    r = zv_import_ub_discard (p);
  /* A receive a crash cut short is undone before anyone opens it. */
  if (r == 0 && !pc->pc_create && !p->p_readonly)
    zv_recv_recover (p);
  if (r < 0) {
    pool_free (p);
    return r;
  }
  *poolp = p;
  return 0;
}

/* Start the txg engine's thread. */
int
zv_pool_start (zv_pool_t *p)
{
  int r;

  zv_mem_start ();
  if (p->p_readonly || p->p_started)
    return 0;
  zv_scrub_pool_init (p);
  r = zv_txg_start (p->p_txg);
  if (r == 0)
    p->p_started = true;
  /* An import with destroyed datasets left to free: the thread syncs
   * for them even while nothing is written (freeq.c). */
  if (r == 0 && zv_freeq_pending (p))
    zv_txg_kick (p->p_txg, zv_txg_open_txg (p->p_txg));
  /* A scrub that was running when the pool was last written goes on. */
  if (r == 0)
    zv_scrub_pool_started (p);
  /* A side a resilver had not finished: it goes on. */
  if (r == 0 && zv_resilver_resume (p) < 0)
    zv_error ("pool '%s': a side's resilver could not resume (the side "
              "stays out of service; replace it again)", p->p_name);
  return r;
}

/* Sync, stop, release. */
int
zv_pool_close (zv_pool_t *p)
{
  char busy[ZV_NAME_MAX];
  int r = 0;

  if (p == NULL)
    return 0;
  if (zv_dsdir_held (p, busy, sizeof busy)) {
    zv_error ("pool '%s': volume '%s' is still open; close it first",
              p->p_name, busy);
    return -EBUSY;
  }
  /* A scrub running stops first: its views read the pool's devices,
   * and its hold keeps frees back. */
  zv_scrub_stop_for_close (p);
  /* A background free in progress stays queued for the next import:
   * the stop syncs what is dirty, not the whole queue. */
  atomic_store (&p->p_closing, true);
  /* The resilver stops first, its position recorded: the next import
   * resumes it. */
  zv_resilver_stop (p);
  if (!p->p_readonly)
    r = zv_txg_stop (p->p_txg);
  if (r == 0 && !p->p_view)
    zv_info ("pool '%s' exported at txg %" PRIu64, p->p_name,
             p->p_synced_txg);
  zv_scrub_free (p);
  pool_free (p);
  return r;
}

const char *
zv_pool_name (zv_pool_t *p)
{
  return p->p_name;
}

uint64_t
zv_pool_guid (zv_pool_t *p)
{
  return p->p_spa.spa_guid;
}

bool
zv_pool_is_readonly (zv_pool_t *p)
{
  return p->p_readonly;
}

zv_spa_t *
zv_pool_spa (zv_pool_t *p)
{
  return &p->p_spa;
}

zv_txg_t *
zv_pool_txg (zv_pool_t *p)
{
  return p->p_txg;
}

zv_dev_t *
zv_pool_logdev (zv_pool_t *p)
{
  return p->p_logdev;
}

const zv_blkptr_t *
zv_pool_rootbp (zv_pool_t *p)
{
  return &p->p_objset_bp;
}

uint64_t
zv_pool_open_txg (zv_pool_t *p)
{
  return p->p_open_txg;
}

enum zv_zil_recover
zv_pool_zil_recover (zv_pool_t *p)
{
  return p->p_zil_recover;
}

bool
zv_pool_space_pending (zv_pool_t *p)
{
  zv_alloc_space_t sp;

  zv_alloc_get_space (p->p_spa.spa_alloc, &sp);
  return sp.as_deferred > 0 || sp.as_reserved > 0 || zv_freeq_pending (p);
}

int
zv_pool_sync (zv_pool_t *p)
{
  if (p->p_readonly)
    return 0;
  return zv_txg_wait_synced (p->p_txg, 0);
}

zv_dbuf_cache_t *
zv_pool_cache (zv_pool_t *p)
{
  return p->p_cache;
}

void
zv_pool_last_sync (zv_pool_t *p, uint64_t *passes, unsigned *write_cap)
{
  *passes = atomic_load_explicit (&p->p_sync_passes, memory_order_relaxed);
  *write_cap = atomic_load_explicit (&p->p_sync_write_cap,
                                     memory_order_relaxed);
}

/* ---- tunables (tunable.h) ---- */
const zv_tunable_t zv_pool_tunable_table[] = {
  { .tn_name = "zil_size", .tn_module = "pool",
    ZV_TUNABLE_VAR_U64 (zv_pool_zil_size),
    .tn_default = 0, .tn_min = 4 * ZV_ZIL_BLKSZ, .tn_max = 1ull << 40,
    .tn_unit = ZV_TUNABLE_UNIT_BYTES, .tn_flags = ZV_TUNABLE_F_AUTO,
    .tn_when = ZV_TUNABLE_AT_CREATE, .tn_reader = "pool creation",
    .tn_desc = "Without log= (refused with it), the size of the intent "
    "log's ring inside the pool of the volume created with the pool (and "
    "of each volume created later in this process), at most a quarter of "
    "the pool; auto is 64M, or a sixteenth of a small pool." },
  ZV_TUNABLE_END
};
