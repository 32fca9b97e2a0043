/*
 * plugin.c: the nbdkit plugin.  Glue only: parse the configuration, open
 * the pool, map nbdkit's callbacks onto core/zvol.h and the engine's
 * negative errnos onto errno.
 *
 * Theory of operation
 * -------------------
 * The engine holds one pool; each of its volumes is an export of the same
 * name (.list_exports, so nbdinfo --list shows them).  The volumes are
 * held through the engine's table of served volumes (zvol_exports_*):
 * get_ready opens every volume there (replaying each one's intent log
 * before anything is served); .open holds the client's volume (opening it
 * if it was created since, by an admin command) and its handle is the
 * volume, which every data callback uses; .close releases it.  So a
 * volume created through the control socket is served at once, and one
 * a client has open cannot be destroyed (EBUSY).  The empty name is the
 * default export: volume=NAME, else the pool's only volume at start
 * (with several and no volume=, the empty name is refused, naming the
 * exports).  A name that is no volume is refused at .open with a message
 * naming the pool (the client sees the export as unknown).
 *
 * Lifecycle (nbdkit drives it, one thread, in this order):
 *
 *   config (xN)      remember each key in zp_* variables, or set the
 *                    engine's tunable of that name (zvol_tunable_set);
 *                    a key given twice is refused (only device= may
 *                    repeat); paths are made absolute now, because the
 *                    server later changes directory to "/".
 *   config_complete  check the combination (device given, size, sparse
 *                    and create-only tunables only with create, rewind
 *                    only on import, ...).
 *                    Nothing is touched on disk yet.  Devices named twice
 *                    (also as the log device) are the engine's check.
 *   get_ready        create a missing backing file (create=true, one
 *                    device), resolve the device paths, zvol_pool_open,
 *                    zvol_exports_open_all (every volume opened, each
 *                    replaying its intent log).
 *                    Errors here are the last ones the user sees on the
 *                    terminal: the server exits non-zero before serving.
 *   after_fork       zvol_pool_start (the engine's threads), then the kstat
 *                    writer (zvol_kstat_start: the pool's and every
 *                    volume's figures through the served volumes' table,
 *                    no volume held between rounds) and the control socket
 *                    (zvol_ctl_start: control=PATH, by default the
 *                    pool's runtime directory's "control"; control=off).  Threads must not be
 *                    started before nbdkit forks into the background,
 *                    because fork keeps only the calling thread.
 *   cleanup          stop the control socket (a running command
 *                    finishes) and the kstat writer, close the volumes
 *                    (zvol_exports_free) and the pool (each syncs).
 *
 * RADOS devices (device= or log= "rados:CEPHPOOL/NAME") are names, not
 * paths: they are neither made absolute nor stat'ed nor resolved, and the
 * engine makes them at create (ceph_conf=, ceph_user=, ceph_keyring=,
 * device_size=, log_size= go into the pool configuration).  librados
 * keeps threads of its own, which nbdkit's fork into the background
 * leaves behind, so after_fork refuses to serve a pool with RADOS devices
 * in a process other than get_ready's: such a server runs with -f.
 *
 * Requests arrive in the PARALLEL thread model: many at once, from many
 * connections.  The plugin keeps no per-request state and takes no lock;
 * the engine does its own locking.
 *
 * Errors: every engine function returns 0 or -errno and has already logged
 * a message through the log hook (zp_log -> nbdkit_error), so a data
 * callback only sets errno and returns -1 (errno_is_preserved is 1).
 */
#include <config.h>

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <inttypes.h>
#include <stdbool.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <pthread.h>
#include <time.h>
#include <sys/types.h>
#include <sys/stat.h>

#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#include "zvol.h"

#ifndef PACKAGE_VERSION
#define PACKAGE_VERSION "unknown"
#endif

/*
 * Debug flag: nbdkit -D zvol.txg=1 logs (with -v) the newest line of the
 * txg history once a second.  Exported through plugin.syms (zvol_debug_*).
 */
NBDKIT_DLL_PUBLIC int zvol_debug_txg = 0;

/* Largest request we advertise (the NBD spec's safe limit). */
#define ZP_MAX_BLOCK (32u << 20)
/* Smallest: the engine accepts any offset and length. */
#define ZP_MIN_BLOCK 512u

/* Size a RADOS log device is made with, unless log_size= says. */
#define ZP_RADOS_LOG_SIZE (256ull << 20)

/* How often the kstat thread rewrites its files, in seconds. */
#define ZP_KSTAT_INTERVAL_S 1

/* ---- configuration, filled in by zp_config ---- */
static char *zp_devices[ZVOL_MAX_DEVS];  /* absolute, later real paths */
static unsigned zp_ndevices;
static bool zp_create;
static bool zp_readonly;
static bool zp_rewind;                   /* rewind=true: accept a loss */
static bool zp_rewind_given;             /* rewind= seen (any value) */
static uint64_t zp_volsize;              /* 0: not given */
static uint32_t zp_volblocksize;         /* 0: not given */
static const char *zp_name;              /* NULL: not given */
static const char *zp_default_volume;    /* volume=: the default export */
static char *zp_logdev;                  /* log=: separate log device */
static bool zp_sparse;                   /* sparse=true: thin volume */
static const char *zp_compression;       /* compression=: NULL not given */
static char *zp_kstat_dir;               /* NULL: default directory */
static bool zp_kstat_none;               /* kstat=none */
static char *zp_control;                 /* control=PATH, absolute */
static bool zp_control_off;              /* control=off */
static bool zp_sparse_given;             /* sparse= seen (any value) */
static bool zp_preallocate;              /* preallocate=true: write the
                                            new file whole (create=true) */
static bool zp_preallocate_given;        /* preallocate= seen */
static unsigned zp_zil_recover;          /* zil_recover=: ZVOL_ZIL_RECOVER_* */
static bool zp_verify_full;              /* verify=full: walk the tree */
static bool zp_verify_given;             /* verify= seen (any value) */
static char *zp_create_only_tunable;     /* first such tunable seen */
static char *zp_ceph_conf;               /* ceph_conf=, absolute */
static const char *zp_ceph_user;         /* ceph_user= */
static char *zp_ceph_keyring;            /* ceph_keyring=, absolute */
static uint64_t zp_rados_size;           /* device_size=: 0 not given */
static uint64_t zp_rados_log_size;       /* log_size=: 0 not given */
static bool zp_takeover;                 /* takeover=true */
static char **zp_keys_seen;              /* every key but device= */
static size_t zp_nkeys_seen;

/* ---- runtime ---- */
static zvol_pool_t *zp_pool;
/* The volumes served, get_ready to cleanup; a connection's handle is
 * the volume it holds there. */
static zvol_exports_t *zp_exports;
/* the default export, or "" */
static char zp_default[sizeof ((zvol_volume_info_t *) 0)->vi_name];
static zvol_ctl_t *zp_ctl;      /* the control socket, after_fork..cleanup */
static char *zp_created_file;   /* file we created or grew in get_ready */
static bool zp_created_new;     /* ... and it did not exist before */
static pid_t zp_ready_pid;      /* the process get_ready ran in */

static zvol_kstat_t *zp_kstat;   /* the kstat writer, after_fork..cleanup */
static char *zp_kstat_path;     /* directory in use, or NULL */
static char *zp_kstat_last_txg; /* last line logged for -D zvol.txg=1 */

/* Route the engine's messages: errors to nbdkit_error (always shown),
 * warnings too (nbdkit has no warning level of its own), the rest to
 * nbdkit_debug (shown with -v). */
static void
zp_log (zvol_log_level_t level, const char *msg)
{
  if (level == ZVOL_LOG_ERROR)
    nbdkit_error ("%s", msg);
  else if (level == ZVOL_LOG_WARN)
    nbdkit_error ("warning: %s", msg);
  else
    nbdkit_debug ("%s", msg);
}

/* Install the log hook as soon as the plugin is loaded, so that even a
 * config-time message from the engine reaches nbdkit's log. */
static void
zp_load (void)
{
  zvol_set_log (zp_log);
}

/* Free what config allocated. */
static void
zp_unload (void)
{
  unsigned i;

  for (i = 0; i < zp_ndevices; i++)
    free (zp_devices[i]);
  zp_ndevices = 0;
  free (zp_kstat_dir);
  free (zp_control);
  free (zp_logdev);
  free (zp_ceph_conf);
  free (zp_ceph_keyring);
  for (size_t k = 0; k < zp_nkeys_seen; k++)
    free (zp_keys_seen[k]);
  free (zp_keys_seen);
  zp_keys_seen = NULL;
  zp_nkeys_seen = 0;
  free (zp_create_only_tunable);
  free (zp_kstat_path);
  free (zp_kstat_last_txg);
  free (zp_created_file);
  zvol_set_log (NULL);
}

/* Parse a size (nbdkit_parse_size suffixes), naming the key on error
 * (nbdkit's own message only shows the string). */
static int
zp_parse_size (const char *key, const char *value, int64_t *out)
{
  int64_t v = nbdkit_parse_size (value);

  if (v == -1) {
    nbdkit_error ("%s=%s: not a size (examples: 16K, 4G)", key, value);
    return -1;
  }
  *out = v;
  return 0;
}

/* Parse a boolean, naming the key on error. */
static int
zp_parse_bool (const char *key, const char *value)
{
  int r = nbdkit_parse_bool (value);

  if (r == -1)
    nbdkit_error ("%s=%s: expected true or false", key, value);
  return r;
}

/* Parse a size that must be positive. */
static int
zp_parse_positive_size (const char *key, const char *value, uint64_t *out)
{
  int64_t v;

  if (zp_parse_size (key, value, &v) == -1)
    return -1;
  if (v == 0) {
    nbdkit_error ("%s must be greater than zero", key);
    return -1;
  }
  *out = (uint64_t) v;
  return 0;
}

/* Every key but device= may be given once: a second readonly= or
 * create= must not quietly undo the first.  Records the key. */
static int
zp_key_once (const char *key)
{
  char **keys;

  if (strcmp (key, "device") == 0)
    return 0;
  for (size_t k = 0; k < zp_nkeys_seen; k++)
    if (strcmp (zp_keys_seen[k], key) == 0) {
      nbdkit_error ("%s= given twice: each parameter may be given once "
                    "(only device= may be repeated)", key);
      return -1;
    }
  keys = realloc (zp_keys_seen, (zp_nkeys_seen + 1) * sizeof *keys);
  if (keys == NULL) {
    nbdkit_error ("realloc: %m");
    return -1;
  }
  zp_keys_seen = keys;
  zp_keys_seen[zp_nkeys_seen] = strdup (key);
  if (zp_keys_seen[zp_nkeys_seen] == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  zp_nkeys_seen++;
  return 0;
}

/* A RADOS device name ("rados:CEPHPOOL/NAME"): not a path, so neither
 * made absolute nor resolved; the engine checks the rest of it. */
static bool
zp_is_rados (const char *dev)
{
  return strncmp (dev, "rados:", 6) == 0;
}

/*
 * A mirror's name with each side passed through fn (made absolute, or
 * resolved); NULL after an error (said).  fn returns a string to free(),
 * or NULL after saying why.
 */
static char *
zp_mirror_map (const char *value, char *(*fn) (const char *))
{
  char *sides[ZVOL_MAX_SIDES], err[512], *out = NULL, *p;
  size_t len = strlen ("mirror:") + 1;
  int n = zvol_device_mirror_sides (value, sides, err, sizeof err);

  if (n < 0) {
    nbdkit_error ("%s", err);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    char *m = fn (sides[i]);
    free (sides[i]);
    sides[i] = m;
  }
  for (int i = 0; i < n; i++) {
    if (sides[i] == NULL)
      goto out;
    len += strlen (sides[i]) + 1;
  }
  out = malloc (len);
  if (out == NULL) {
    nbdkit_error ("malloc: %m");
    goto out;
  }
  p = out + sprintf (out, "mirror:");
  for (int i = 0; i < n; i++)
    p += sprintf (p, "%s%s", i ? "," : "", sides[i]);
 out:
  for (int i = 0; i < n; i++)
    free (sides[i]);
  return out;
}

static bool
zp_is_mirror (const char *dev)
{
  return strncmp (dev, "mirror:", 7) == 0;
}

/* A mirror's side that does not exist (degraded import) keeps the
 * absolute name it was given: the engine says it is missing. */
static char *
zp_side_realpath (const char *side)
{
  struct stat st;

  if (stat (side, &st) == -1 && errno == ENOENT)
    return strdup (side);
  return nbdkit_realpath (side);
}

/* A device or log device: a RADOS name as it is, a path made absolute
 * (the server chdirs to "/" later), a mirror's sides each so. */
static char *
zp_device_arg (const char *value)
{
  char *s;

  if (zp_is_mirror (value))
    return zp_mirror_map (value, nbdkit_absolute_path);
  if (!zp_is_rados (value))
    return nbdkit_absolute_path (value);
  s = strdup (value);
  if (s == NULL)
    nbdkit_error ("strdup: %m");
  return s;
}

/* Any RADOS device among device= and log=? */
static bool
zp_any_rados (void)
{
  for (unsigned i = 0; i < zp_ndevices; i++)
    if (zp_is_rados (zp_devices[i]))
      return true;
  return zp_logdev != NULL && zp_is_rados (zp_logdev);
}

/* One key=value from the command line.  Only remember it; the
 * combination is checked in zp_config_complete. */
static int
zp_config (const char *key, const char *value)
{
  if (zp_key_once (key) == -1)
    return -1;
  if (strcmp (key, "volume") == 0) {
    if (*value == '\0') {
      nbdkit_error ("volume must not be empty");
      return -1;
    }
    zp_default_volume = value;  /* nbdkit keeps config strings alive */
  }
  else if (strcmp (key, "device") == 0) {
    if (zp_ndevices >= ZVOL_MAX_DEVS) {
      nbdkit_error ("too many devices: at most %u device= parameters",
                    (unsigned) ZVOL_MAX_DEVS);
      return -1;
    }
    /* Absolute now (the server chdirs to "/" later); the symlinks are
     * resolved in get_ready, once a file we are asked to create exists. */
    zp_devices[zp_ndevices] = zp_device_arg (value);
    if (zp_devices[zp_ndevices] == NULL)
      return -1;
    zp_ndevices++;
  }
  else if (strcmp (key, "create") == 0) {
    int r = zp_parse_bool (key, value);
    if (r == -1)
      return -1;
    zp_create = r;
  }
  else if (strcmp (key, "readonly") == 0) {
    int r = zp_parse_bool (key, value);
    if (r == -1)
      return -1;
    zp_readonly = r;
  }
  else if (strcmp (key, "rewind") == 0) {
    int r = zp_parse_bool (key, value);
    if (r == -1)
      return -1;
    zp_rewind = r;
    zp_rewind_given = true;
  }
  else if (strcmp (key, "size") == 0) {
    if (zp_parse_positive_size (key, value, &zp_volsize) == -1)
      return -1;
  }
  else if (strcmp (key, "volblocksize") == 0) {
    int64_t v;
    if (zp_parse_size (key, value, &v) == -1)
      return -1;
    if (v < ZVOL_MIN_VOLBLOCKSIZE || v > ZVOL_MAX_VOLBLOCKSIZE ||
        (v & (v - 1)) != 0) {
      nbdkit_error ("volblocksize=%s: it must be a power of two between "
                    "%uK and %uK", value, ZVOL_MIN_VOLBLOCKSIZE / 1024,
                    ZVOL_MAX_VOLBLOCKSIZE / 1024);
      return -1;
    }
    zp_volblocksize = (uint32_t) v;
  }
  else if (strcmp (key, "name") == 0) {
    if (*value == '\0') {
      nbdkit_error ("name must not be empty");
      return -1;
    }
    zp_name = value;    /* nbdkit keeps config strings alive */
  }
  else if (strcmp (key, "log") == 0) {
    zp_logdev = zp_device_arg (value);
    if (zp_logdev == NULL)
      return -1;
  }
  else if (strcmp (key, "ceph_conf") == 0) {
    zp_ceph_conf = nbdkit_absolute_path (value);
    if (zp_ceph_conf == NULL)
      return -1;
  }
  else if (strcmp (key, "ceph_keyring") == 0) {
    zp_ceph_keyring = nbdkit_absolute_path (value);
    if (zp_ceph_keyring == NULL)
      return -1;
  }
  else if (strcmp (key, "ceph_user") == 0) {
    if (*value == '\0') {
      nbdkit_error ("ceph_user must not be empty");
      return -1;
    }
    zp_ceph_user = value;
  }
  else if (strcmp (key, "device_size") == 0) {
    if (zp_parse_positive_size (key, value, &zp_rados_size) == -1)
      return -1;
  }
  else if (strcmp (key, "takeover") == 0) {
    int r = zp_parse_bool (key, value);
    if (r == -1)
      return -1;
    zp_takeover = r;
  }
  else if (strcmp (key, "log_size") == 0) {
    if (zp_parse_positive_size (key, value, &zp_rados_log_size) == -1)
      return -1;
  }
  else if (strcmp (key, "compression") == 0) {
    /* Checked by the engine at create (its message names the values). */
    zp_compression = value;
  }
  else if (strcmp (key, "sparse") == 0) {
    int r = zp_parse_bool (key, value);
    if (r == -1)
      return -1;
    zp_sparse = r;
    zp_sparse_given = true;
  }
  else if (strcmp (key, "preallocate") == 0) {
    int r = zp_parse_bool (key, value);
    if (r == -1)
      return -1;
    zp_preallocate = r;
    zp_preallocate_given = true;
  }
  else if (strcmp (key, "zil_recover") == 0) {
    if (strcmp (value, "none") == 0)
      zp_zil_recover = ZVOL_ZIL_RECOVER_NONE;
    else if (strcmp (value, "truncate") == 0)
      zp_zil_recover = ZVOL_ZIL_RECOVER_TRUNCATE;
    else if (strcmp (value, "discard") == 0)
      zp_zil_recover = ZVOL_ZIL_RECOVER_DISCARD;
    else {
      nbdkit_error ("zil_recover=%s: use none, truncate or discard", value);
      return -1;
    }
  }
  else if (strcmp (key, "verify") == 0) {
    if (strcmp (value, "full") == 0)
      zp_verify_full = true;
    else if (strcmp (value, "lazy") == 0)
      zp_verify_full = false;
    else {
      nbdkit_error ("verify=%s: use lazy or full", value);
      return -1;
    }
    zp_verify_given = true;
  }
  else if (strcmp (key, "control") == 0) {
    zp_control_off = strcmp (value, "off") == 0;
    if (!zp_control_off) {
      if (*value == '\0') {
        nbdkit_error ("control must not be empty (a socket path, or off)");
        return -1;
      }
      zp_control = nbdkit_absolute_path (value);
      if (zp_control == NULL)
        return -1;
    }
  }
  else if (strcmp (key, "kstat") == 0) {
    zp_kstat_none = strcmp (value, "none") == 0;
    if (!zp_kstat_none) {
      zp_kstat_dir = nbdkit_absolute_path (value);
      if (zp_kstat_dir == NULL)
        return -1;
    }
  }
  else if (zvol_tunable_exists (key)) {
    /* An engine tunable: the engine parses it (sizes, percentages,
     * names) and checks its range; the pool and volume configurations
     * take their defaults from it. */
    char err[256];

    if (zvol_tunable_set (key, value, err, sizeof err) < 0) {
      nbdkit_error ("%s", err);
      return -1;
    }
    if (zp_create_only_tunable == NULL && zvol_tunable_create_only (key)) {
      zp_create_only_tunable = strdup (key);
      if (zp_create_only_tunable == NULL) {
        nbdkit_error ("strdup: %m");
        return -1;
      }
    }
  }
  else {
    nbdkit_error ("unknown parameter '%s' (see nbdkit zvol --help)", key);
    return -1;
  }
  return 0;
}

/* Check the combination of parameters before anything touches a disk. */
static int
zp_config_complete (void)
{
  unsigned i;
  struct stat st;

  if (zp_ndevices == 0) {
    nbdkit_error ("no device given: use device=FILE (or just FILE) "
                  "to name the pool's backing file or block device");
    return -1;
  }
  if (!zp_create) {
    if (zp_volsize != 0) {
      nbdkit_error ("size= is only used with create=true (an existing "
                    "pool's volume size is stored in the pool)");
      return -1;
    }
    if (zp_volblocksize != 0) {
      nbdkit_error ("volblocksize= is only used with create=true");
      return -1;
    }
    if (zp_name != NULL) {
      nbdkit_error ("name= is only used with create=true");
      return -1;
    }
    if (zp_sparse_given) {
      nbdkit_error ("sparse= is only used with create=true");
      return -1;
    }
    if (zp_preallocate_given) {
      nbdkit_error ("preallocate= is only used with create=true");
      return -1;
    }
    if (zp_compression != NULL) {
      nbdkit_error ("compression= is only used with create=true (change "
                    "a volume's with zvoladm set compression=)");
      return -1;
    }
    if (zp_create_only_tunable != NULL) {
      nbdkit_error ("%s= is only used with create=true (the tunable is "
                    "read when a pool is created)", zp_create_only_tunable);
      return -1;
    }
  }
  else {
    if (zp_volsize == 0) {
      nbdkit_error ("create=true needs size=SIZE (the volume size, "
                    "e.g. size=4G)");
      return -1;
    }
    if (zp_readonly) {
      nbdkit_error ("create=true and readonly=true cannot be combined");
      return -1;
    }
    if (zp_rewind_given) {
      nbdkit_error ("rewind= is only used on import (a new pool has "
                    "nothing to rewind)");
      return -1;
    }
    if (zp_verify_given) {
      nbdkit_error ("verify= is only used on import (a new pool has "
                    "nothing to verify)");
      return -1;
    }
  }

  if (!zp_any_rados ()) {
    const char *k = zp_ceph_conf ? "ceph_conf" : zp_ceph_user ? "ceph_user"
      : zp_ceph_keyring ? "ceph_keyring" : zp_rados_size ? "device_size"
      : zp_rados_log_size ? "log_size" : zp_takeover ? "takeover" : NULL;
    if (k != NULL) {
      nbdkit_error ("%s= is only used with RADOS devices "
                    "(device=rados:CEPHPOOL/NAME)", k);
      return -1;
    }
  }
  /* Only a file the plugin makes is preallocated: one device, not on
   * RADOS (whose objects are thin by design). */
  if (zp_preallocate && (zp_any_rados () || zp_ndevices > 1)) {
    nbdkit_error ("preallocate=true is only used with one device that is "
                  "a file (or a mirror of files) create=true makes");
    return -1;
  }
  if (zp_create && zp_takeover) {
    nbdkit_error ("takeover=true is only used on import (it takes a pool "
                  "that another server holds)");
    return -1;
  }
  if (!zp_create && (zp_rados_size || zp_rados_log_size)) {
    nbdkit_error ("%s= is only used with create=true (a RADOS device's size "
                  "is stored with it)",
                  zp_rados_size ? "device_size" : "log_size");
    return -1;
  }

  for (i = 0; i < zp_ndevices; i++) {
    if (zp_is_rados (zp_devices[i]))
      continue;           /* the engine finds out (and makes it) */
    if (zp_is_mirror (zp_devices[i]))
      continue;           /* the engine says which side is missing */
    if (stat (zp_devices[i], &st) == 0)
      continue;
    if (errno == ENOENT && zp_create && zp_ndevices == 1)
      continue;           /* created sparse in get_ready */
    if (errno == ENOENT && zp_create)
      nbdkit_error ("device %s does not exist: with several devices, "
                    "create=true needs every device to exist already",
                    zp_devices[i]);
    else if (errno == ENOENT)
      nbdkit_error ("device %s does not exist (to make a new pool, add "
                    "create=true size=SIZE)", zp_devices[i]);
    else
      nbdkit_error ("device %s: %m", zp_devices[i]);
    return -1;
  }
  return 0;
}

/* create=true with one device that does not exist (or is an empty regular
 * file): make a sparse file of zvol_pool_create_size bytes, with the txg
 * pipeline's room (see the man page). */
static void zp_progress (void *arg, const char *what, uint64_t done,
                         uint64_t total);

static int
zp_create_backing_file (const char *path)
{
  struct stat st;
  uint64_t size = zvol_pool_create_size (zp_volsize, true);
  int fd, r;
  bool is_new;

  if (stat (path, &st) == 0) {
    if (!(S_ISREG (st.st_mode) && st.st_size == 0)) {
      if (zp_preallocate) {
        nbdkit_error ("preallocate=true: %s exists and is not an empty "
                      "file (preallocate writes only a file that "
                      "create=true makes)", path);
        return -1;
      }
      return 0;           /* the engine checks it is big enough */
    }
    is_new = false;
    fd = open (path, O_WRONLY | O_CLOEXEC);
  }
  else {
    is_new = true;
    fd = open (path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  }
  if (fd == -1) {
    nbdkit_error ("create %s: %m", path);
    return -1;
  }
  r = ftruncate (fd, (off_t) size);
  if (r == -1) {
    int saved = errno;
    close (fd);
    errno = saved;
  }
  else
    r = close (fd);
  if (r == -1)
    nbdkit_error ("create %s: set size to %" PRIu64 " bytes: %m",
                  path, size);
  else if (zp_preallocate) {
    int last_pct = -1;

    nbdkit_debug ("preallocate: writing %s whole (%" PRIu64 " bytes)",
                  path, size);
    r = zvol_device_preallocate (path, size, zp_progress, &last_pct);
    if (r < 0) {
      errno = -r;
      nbdkit_error ("create %s: preallocate: write %" PRIu64 " bytes of "
                    "zeros: %m", path, size);
      r = -1;
    }
  }
  if (r == -1) {
    if (is_new)
      unlink (path);
    else if (truncate (path, 0) == -1)
      nbdkit_debug ("truncate %s: %m", path);
    return -1;
  }
  zp_created_new = is_new;
  zp_created_file = strdup (path);
  if (zp_created_file == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  nbdkit_debug ("created %s backing file %s of %" PRIu64 " bytes",
                zp_preallocate ? "preallocated" : "sparse", path, size);
  return 0;
}

/* Import progress, shown with -v: one line per whole percent. */
static void
zp_progress (void *arg, const char *what, uint64_t done, uint64_t total)
{
  int *last = arg;
  int pct = total ? (int) (done * 100 / total) : 100;

  if (pct == *last)
    return;
  *last = pct;
  nbdkit_debug ("%s: %d%%", what ? what : "import", pct);
}

/* kstat=DIR: create it before the pool is opened, so that a directory we
 * cannot use is an error with nothing to undo. */
static int
zp_kstat_setup_explicit (void)
{
  int r;

  if (zp_kstat_dir == NULL)
    return 0;
  r = zvol_kstat_mkdir (zp_kstat_dir);
  if (r < 0) {
    errno = -r;
    nbdkit_error ("kstat directory %s: %m", zp_kstat_dir);
    return -1;
  }
  zp_kstat_path = strdup (zp_kstat_dir);
  if (zp_kstat_path == NULL) {
    nbdkit_error ("strdup: %m");
    return -1;
  }
  return 0;
}

/* Open every volume of the pool (each replays its intent log) and pick
 * the default export. */
static int
zp_open_volumes (const zvol_config_t *vc)
{
  zvol_volume_info_t vi;
  size_t n = zvol_volume_list (zp_pool, &vi, 1);
  int r;

  if (n == 0) {
    nbdkit_error ("pool %s has no volume to serve (create one with "
                  "zvoladm create -V SIZE %s/NAME)", zvol_pool_name (zp_pool),
                  zvol_pool_name (zp_pool));
    return -1;
  }
  zp_exports = zvol_exports_new (zp_pool, vc);
  r = zvol_exports_open_all (zp_exports);
  if (r < 0) {
    errno = -r;
    nbdkit_error ("could not open the volumes of pool %s: %m",
                  zvol_pool_name (zp_pool));
    return -1;
  }
  if (zp_default_volume != NULL) {
    zvol_t *zv;
    if (zvol_exports_hold (zp_exports, zp_default_volume, &zv) < 0) {
      nbdkit_error ("volume=%s: pool %s has no such volume",
                    zp_default_volume, zvol_pool_name (zp_pool));
      return -1;
    }
    zvol_exports_rele (zp_exports, zv);
    snprintf (zp_default, sizeof zp_default, "%s", zp_default_volume);
  }
  else if (n == 1)
    snprintf (zp_default, sizeof zp_default, "%s", vi.vi_name);
  return 0;
}

/* Create (create=true) or import the pool.  This is the last callback
 * whose errors reach the user's terminal, so everything that can fail
 * (missing devices, locks, a damaged pool) fails here. */
static int
zp_get_ready (void)
{
  zvol_pool_config_t pc;
  zvol_config_t vc;
  unsigned i;
  int r, last_pct = -1;

  if (zp_kstat_setup_explicit () == -1)
    return -1;
  /* control=PATH taken by another server: said while the terminal still
   * shows it, nothing done yet (the socket is taken after the fork). */
  if (zp_control && zvol_ctl_check (zp_control, 0) < 0) {
    nbdkit_error ("control=%s cannot be used (see above)", zp_control);
    return -1;
  }
  if (zp_create && zp_ndevices == 1 && zp_is_mirror (zp_devices[0])) {
    /* A new mirror of files: each side made as a lone device is. */
    char *sides[ZVOL_MAX_SIDES], err[512];
    int n = zvol_device_mirror_sides (zp_devices[0], sides, err, sizeof err);
    int bad = 0;

    if (n < 0) {
      nbdkit_error ("%s", err);
      return -1;
    }
    for (int k = 0; k < n; k++) {
      if (bad == 0 && zp_create_backing_file (sides[k]) == -1)
        bad = -1;
      free (sides[k]);
    }
    if (bad == -1)
      return -1;
  }
  else if (zp_create && zp_ndevices == 1 && !zp_is_rados (zp_devices[0]) &&
      zp_create_backing_file (zp_devices[0]) == -1)
    return -1;

  /* Every device exists now: resolve symlinks. */
  for (i = 0; i < zp_ndevices; i++) {
    char *real;
    if (zp_is_rados (zp_devices[i]))
      continue;
    if (zp_is_mirror (zp_devices[i]))
      real = zp_mirror_map (zp_devices[i], zp_side_realpath);
    else
      real = nbdkit_realpath (zp_devices[i]);
    if (real == NULL)
      goto fail;
    free (zp_devices[i]);
    zp_devices[i] = real;
  }

  zvol_pool_config_init (&pc);
  for (i = 0; i < zp_ndevices; i++)
    pc.pc_devices[i] = zp_devices[i];
  pc.pc_ndevices = zp_ndevices;
  pc.pc_create = zp_create;
  /* nbdkit -r cannot be seen here (1.32 has no API for it); such a server
   * keeps the pool writable but every connection is read-only. */
  pc.pc_readonly = zp_readonly;
  pc.pc_rewind = zp_rewind;
  if (zp_create) {
    pc.pc_volsize = zp_volsize;
    if (zp_volblocksize)
      pc.pc_volblocksize = zp_volblocksize;
    if (zp_name)
      pc.pc_name = zp_name;
    pc.pc_compression = zp_compression;
  }
  /* The tunables (txg, cache, log ring) came in through zp_config:
   * zvol_pool_config_init and zvol_config_init read them. */
  pc.pc_logdevice = zp_logdev;
  /* The engine refuses it with create or readonly, saying why. */
  pc.pc_zil_recover = zp_zil_recover;
  pc.pc_verify_full = zp_verify_full;
  if (zp_create)
    pc.pc_sparse = zp_sparse;
  pc.pc_progress = zp_progress;
  pc.pc_progress_arg = &last_pct;
  pc.pc_ceph_conf = zp_ceph_conf;
  pc.pc_ceph_user = zp_ceph_user;
  pc.pc_ceph_keyring = zp_ceph_keyring;
  pc.pc_rados_takeover = zp_takeover;
  if (zp_create) {
    /* RADOS devices are thin, as our backing files: by default each is
     * its share of the volume plus the slack.  Not the txg pipeline's
     * room a file gets: the gain was measured on files only. */
    pc.pc_rados_size = zp_rados_size ? zp_rados_size
      : zvol_pool_create_size ((zp_volsize + zp_ndevices - 1) / zp_ndevices,
                               false);
    pc.pc_rados_log_size = zp_rados_log_size ? zp_rados_log_size
      : ZP_RADOS_LOG_SIZE;
  }
  zp_ready_pid = getpid ();

  r = zvol_pool_open (&pc, &zp_pool);
  if (r < 0) {
    errno = -r;
    nbdkit_error ("could not %s the pool on %s%s: %m",
                  zp_create ? "create" : "import", zp_devices[0],
                  zp_ndevices > 1 ? " and other devices" : "");
    zp_pool = NULL;
    goto fail;
  }
  zvol_config_init (&vc);
  if (zp_open_volumes (&vc) == -1) {
    zvol_exports_free (zp_exports);
    zp_exports = NULL;
    /* Nothing was written for the volumes: the pool closes cleanly. */
    zvol_pool_close (zp_pool);
    zp_pool = NULL;
    goto fail;
  }
  nbdkit_debug ("pool %s (guid %016" PRIx64 ") %s: %zu volume(s)%s%s%s",
                zvol_pool_name (zp_pool), zvol_pool_guid (zp_pool),
                zp_create ? "created" : "imported",
                zvol_volume_list (zp_pool, NULL, 0),
                zvol_pool_is_readonly (zp_pool) ? ", read-only" : "",
                zp_default[0] ? ", the default export " : "", zp_default);

  if (!zp_kstat_none && zp_kstat_path == NULL)
    zp_kstat_path = zvol_kstat_default_dir (zvol_pool_name (zp_pool));
  if (zp_kstat_path)
    nbdkit_debug ("kstat files: %s/txgs, %s/stats and %s/volumes/NAME/stats",
                  zp_kstat_path, zp_kstat_path, zp_kstat_path);
  else
    nbdkit_debug ("kstat files disabled");
  return 0;

 fail:
  /* Do not leave behind a file that holds no pool: remove it, or make
   * an empty file we grew empty again. */
  if (zp_created_file) {
    if (zp_created_new)
      unlink (zp_created_file);
    else if (truncate (zp_created_file, 0) == -1)
      nbdkit_debug ("truncate %s: %m", zp_created_file);
    free (zp_created_file);
    zp_created_file = NULL;
  }
  return -1;
}

/* -D zvol.txg=1: log the newest line of the txg history when it changes
 * (the kstat writer's tick). */
static void
zp_kstat_debug_txg (void *arg, const char *txgs)
{
  const char *end = txgs + strlen (txgs), *start;

  while (end > txgs && end[-1] == '\n')
    end--;
  for (start = end; start > txgs && start[-1] != '\n'; start--)
    ;
  if (start == end)
    return;
  if (zp_kstat_last_txg && strlen (zp_kstat_last_txg) == (size_t) (end - start)
      && memcmp (zp_kstat_last_txg, start, (size_t) (end - start)) == 0)
    return;
  free (zp_kstat_last_txg);
  zp_kstat_last_txg = strndup (start, (size_t) (end - start));
  nbdkit_debug ("txg: %.*s", (int) (end - start), start);
}

/* The control socket: control=PATH must work (the server refuses to
 * start otherwise); the default place is worth no refusal (another pool
 * of the same name may be served, or there is no runtime directory). */
static int
zp_control_start (void)
{
  char *path;
  int r;

  if (zp_control_off)
    return 0;
  path = zp_control ? strdup (zp_control)
    : zvol_runtime_path (zvol_pool_name (zp_pool), "control");
  if (path == NULL) {
    nbdkit_debug ("no control socket: not root and no XDG_RUNTIME_DIR "
                  "(use control=PATH)");
    return 0;
  }
  r = zvol_ctl_start (zp_exports, path, zp_control ? 0 : ZVOL_CTL_QUIET,
                      &zp_ctl);
  if (r < 0 && zp_control) {
    errno = -r;
    nbdkit_error ("control=%s: %m", path);
    free (path);
    return -1;
  }
  if (r < 0)
    nbdkit_debug ("no control socket at %s (see above; control=PATH names "
                  "another)", path);
  else
    nbdkit_debug ("control socket: %s", path);
  free (path);
  return 0;
}

/* After nbdkit forked: start the engine's threads, then ours. */
static int
zp_after_fork (void)
{
  int r;

  /* librados' threads stay behind in the parent: a RADOS device opened
   * before the fork cannot do I/O here. */
  if (getpid () != zp_ready_pid && zp_any_rados ()) {
    nbdkit_error ("RADOS devices need nbdkit in the foreground (-f): the "
                  "pool was opened before nbdkit forked into the "
                  "background, and librados does not survive a fork");
    return -1;
  }
  r = zvol_pool_start (zp_pool);

  if (r < 0) {
    errno = -r;
    nbdkit_error ("could not start the pool's threads: %m");
    return -1;
  }
  /* The statistics files are not worth refusing to serve for.  The
   * writer reads the volumes through the table at each round and holds
   * none in between: the default export can be destroyed or rolled back
   * live like any other. */
  if (zp_kstat_path || zvol_debug_txg) {
    if (zvol_kstat_start (zp_pool, zp_exports,
                          zp_default[0] ? zp_default : NULL, zp_kstat_path,
                          ZP_KSTAT_INTERVAL_S * 1000,
                          zvol_debug_txg ? zp_kstat_debug_txg : NULL, NULL,
                          &zp_kstat) < 0)
      nbdkit_error ("serving without kstat files");
  }
  return zp_control_start ();
}

/* Shutdown: everything written is synced by zvol_pool_close, so a
 * clean stop (Ctrl-C, SIGTERM) leaves nothing for the intent log. */
static void
zp_cleanup (void)
{
  int r;

  zvol_ctl_stop (zp_ctl);
  zp_ctl = NULL;
  zvol_kstat_stop (zp_kstat);
  zp_kstat = NULL;
  if (zp_pool == NULL)
    return;
  /* nbdkit calls this once every connection's thread has ended, but a
   * connection that ended after the quit began never got its .close
   * (nbdkit does not call the plugin then): its hold is forgotten, or
   * the table would wait for it in vain and the pool stay unsynced. */
  {
    unsigned left = zvol_exports_forget_holds (zp_exports);
    if (left > 0)
      nbdkit_debug ("zvol: %u connection hold%s without a close (the "
                    "client left while nbdkit was quitting)", left,
                    left > 1 ? "s" : "");
  }
  r = zvol_exports_free (zp_exports);
  if (r == -EBUSY) {
    nbdkit_error ("closing the pool: connections still hold volumes");
    return;                     /* nothing to free under them */
  }
  zp_exports = NULL;
  if (r < 0) {
    errno = -r;
    nbdkit_error ("closing the volumes: %m");
  }
  r = zvol_pool_close (zp_pool);
  if (r < 0) {
    errno = -r;
    nbdkit_error ("closing the pool: %m");
  }
  zp_pool = NULL;
}

/* Every volume is an export of its name. */
static int
zp_list_exports (int readonly, int is_tls, struct nbdkit_exports *exports)
{
  size_t n = zvol_volume_list (zp_pool, NULL, 0);
  zvol_volume_info_t *vi = calloc (n ? n : 1, sizeof *vi);
  int r = 0;

  if (vi == NULL) {
    nbdkit_error ("calloc: %m");
    return -1;
  }
  n = zvol_volume_list (zp_pool, vi, n);   /* fewer, if one went meanwhile */
  for (size_t i = 0; i < n && r == 0; i++)
    r = nbdkit_add_export (exports, vi[i].vi_name, NULL);
  free (vi);
  return r;
}

/* Several volumes, no volume=, and a client asked for the empty name. */
static void
zp_no_default (void)
{
  nbdkit_error ("pool %s has %zu volumes and no default export (volume=): "
                "ask for one by name (nbdinfo --list shows them)",
                zvol_pool_name (zp_pool), zvol_volume_list (zp_pool, NULL, 0));
}

/* The empty name: volume=, or the only volume. */
static const char *
zp_default_export (int readonly, int is_tls)
{
  if (zp_default[0] == '\0') {
    zp_no_default ();
    return NULL;
  }
  return zp_default;
}

/* The client's export name (anything it sent: only compared, and shown
 * escaped by the engine's rules) picks the volume; the handle is it. */
static void *
zp_open (int readonly)
{
  const char *name = nbdkit_export_name ();
  zvol_t *zv;
  int r;

  if (name == NULL || *name == '\0') {
    if (zp_default[0] == '\0') {
      zp_no_default ();
      return NULL;
    }
    name = zp_default;
  }
  /* The engine's message names the pool and the volume (escaped). */
  r = zvol_exports_hold (zp_exports, name, &zv);
  if (r < 0) {
    errno = -r;
    return NULL;
  }
  return zv;
}

/* The connection's hold on its volume ends. */
static void
zp_close (void *handle)
{
  zvol_exports_rele (zp_exports, handle);
}

#define ZP_ZV(h) ((zvol_t *) (h))

static int64_t
zp_get_size (void *handle)
{
  return (int64_t) zvol_size (ZP_ZV (handle));
}

/* Any offset and length works; the volume block size avoids a
 * read-modify-write in the engine. */
static int
zp_block_size (void *handle, uint32_t *minimum, uint32_t *preferred,
               uint32_t *maximum)
{
  *minimum = ZP_MIN_BLOCK;
  *preferred = zvol_blocksize (ZP_ZV (handle));
  *maximum = ZP_MAX_BLOCK;
  return 0;
}

static int
zp_can_write (void *handle)
{
  return !zvol_is_readonly (ZP_ZV (handle));
}

static int
zp_can_one (void *handle)
{
  return 1;
}

/* FUA reaches the engine, which makes just that write durable. */
static int
zp_can_fua (void *handle)
{
  return NBDKIT_FUA_NATIVE;
}

/*
 * Multi-conn is safe: all connections share one volume, and a flush (or
 * a FUA write) waits until everything the pool had acknowledged before it
 * is durable, whichever connection wrote it.  So a flush on one
 * connection covers every connection's completed writes.
 */
static int
zp_can_multi_conn (void *handle)
{
  return 1;
}

static int
zp_can_cache (void *handle)
{
  return NBDKIT_CACHE_NONE;
}

/* Turn an engine result into the plugin convention.  The engine has
 * logged the cause already (EROFS included: "pool 'x' is read-only"). */
static int
zp_result (int r)
{
  if (r >= 0)
    return 0;
  errno = -r;
  return -1;
}

static unsigned
zp_flags (uint32_t flags)
{
  unsigned f = 0;

  if (flags & NBDKIT_FLAG_FUA)
    f |= ZVOL_FUA;
  if (flags & NBDKIT_FLAG_MAY_TRIM)
    f |= ZVOL_MAY_TRIM;
  if (flags & NBDKIT_FLAG_FAST_ZERO)
    f |= ZVOL_FAST;
  return f;
}

/*
 * A read or write longer than the maximum block size we advertise is
 * refused with EINVAL, as the NBD spec allows, before anything is read or
 * written.  nbdkit 1.32 does not enforce a plugin's maximum itself (it
 * only refuses data requests above its own 64 MiB limit), and a client
 * may ignore the advertised size (libnbd with strict mode off does).
 * Trim, zero and extents carry no payload and may be longer.
 */
static int
zp_too_long (const char *what, uint32_t count)
{
  if (count <= ZP_MAX_BLOCK)
    return 0;
  nbdkit_error ("%s of %" PRIu32 " bytes refused: larger than the "
                "advertised maximum block size %u", what, count, ZP_MAX_BLOCK);
  errno = EINVAL;
  return 1;
}

static int
zp_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
          uint32_t flags)
{
  if (zp_too_long ("read", count))
    return -1;
  return zp_result (zvol_read (ZP_ZV (handle), buf, offset, count));
}

static int
zp_pwrite (void *handle, const void *buf, uint32_t count, uint64_t offset,
           uint32_t flags)
{
  if (zp_too_long ("write", count))
    return -1;
  return zp_result (zvol_write (ZP_ZV (handle), buf, offset, count, zp_flags (flags)));
}

/* Flush: the whole pool, so it covers every connection (multi-conn). */
static int
zp_flush (void *handle, uint32_t flags)
{
  return zp_result (zvol_flush (ZP_ZV (handle)));
}

static int
zp_trim (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return zp_result (zvol_trim (ZP_ZV (handle), offset, count, zp_flags (flags)));
}

/*
 * Zero: nbdkit sets MAY_TRIM unless the client said NO_HOLE.  With it,
 * whole blocks become holes; without, the range stays allocated (its
 * blocks are written with zeros at the txg sync).  FAST_ZERO is
 * advertised and honoured: with MAY_TRIM the zero only frees blocks and
 * succeeds; without, it costs what writing zeros costs (every block
 * written, space taken), so the engine refuses it with ENOTSUP before
 * changing anything, which nbdkit passes to the client (and, since
 * FAST_ZERO was set, does not turn into a write of zeros).
 */
static int
zp_zero (void *handle, uint32_t count, uint64_t offset, uint32_t flags)
{
  return zp_result (zvol_zero (ZP_ZV (handle), offset, count, zp_flags (flags)));
}

/* State of one extents call. */
struct zp_extents_ctx {
  struct nbdkit_extents *ec_extents;
  bool ec_req_one;
  int ec_err;                /* errno from nbdkit_add_extent, or 0 */
};

/*
 * zvol_extents callback: one range.  A nonzero return asks the engine to
 * stop walking (REQ_ONE after the first range, or nbdkit_add_extent
 * failed: the error is kept in ec_err, not in the return value).
 */
static int
zp_extent_cb (void *arg, uint64_t off, uint64_t len, unsigned type)
{
  struct zp_extents_ctx *ec = arg;
  uint32_t t = 0;

  if (type & ZVOL_EXTENT_HOLE)
    t = NBDKIT_EXTENT_HOLE | NBDKIT_EXTENT_ZERO;
  if (nbdkit_add_extent (ec->ec_extents, off, len, t) == -1) {
    ec->ec_err = errno ? errno : EIO;
    return 1;
  }
  return ec->ec_req_one ? 1 : 0;
}

static int
zp_extents (void *handle, uint32_t count, uint64_t offset, uint32_t flags,
            struct nbdkit_extents *extents)
{
  struct zp_extents_ctx ec = {
    .ec_extents = extents,
    .ec_req_one = (flags & NBDKIT_FLAG_REQ_ONE) != 0,
    .ec_err = 0,
  };
  int r = zvol_extents (ZP_ZV (handle), offset, count, zp_extent_cb, &ec);

  if (ec.ec_err) {
    errno = ec.ec_err;
    return -1;
  }
  /* A positive r is our own "stop" passed back by the engine. */
  return zp_result (r < 0 ? r : 0);
}

/* nbdkit zvol --dump-plugin: what this build supports. */
static void
zp_dump_plugin (void)
{
  printf ("zvol_version=%s\n", PACKAGE_VERSION);
  printf ("zvol_volblocksize_default=%u\n", ZVOL_DEFAULT_VOLBLOCKSIZE);
  printf ("zvol_max_devices=%u\n", (unsigned) ZVOL_MAX_DEVS);
  printf ("zvol_fua=native\n");
  printf ("zvol_multi_conn=yes\n");
  printf ("zvol_intent_log=yes\n");
}

/* The keys that are not tunables; a line per tunable follows, from the
 * engine's tables (zp_help_init). */
#define zp_config_help \
  "device=<FILE|DEV>             (required, repeatable) File or block device,\n" \
  "                              or rados:CEPHPOOL/NAME (a RADOS device).\n" \
  "create=true                   Create a new pool (otherwise import).\n" \
  "size=<SIZE>                   With create: volume size (e.g. 4G).\n" \
  "volblocksize=<SIZE>           With create: volume block size, 4K..128K (16K).\n" \
  "name=<NAME>                   With create: pool name (zvol); its volume\n" \
  "                              is named as the pool.\n" \
  "volume=<NAME>                 The default export (the empty name); without\n" \
  "                              it the pool's only volume.\n" \
  "readonly=true                 Import read-only: nothing is written.\n" \
  "rewind=true                   Import the newest intact txg although newer\n" \
  "                              ones are damaged (accepts their loss).\n" \
  "log=<FILE|DEV>                Separate intent-log device (create adds it).\n" \
  "sparse=true                   With create: the volume may exceed the pool.\n" \
  "preallocate=true              With create: write the new file whole first.\n" \
  "compression=<VALUE>           With create: the volume's compression, off,\n" \
  "                              lz4 (the default), zstd or zstd-N.\n" \
  "ceph_conf=<FILE>              RADOS: Ceph configuration ($CEPH_CONF,\n" \
  "                              /etc/ceph/ceph.conf).\n" \
  "ceph_user=<NAME>              RADOS: Ceph user (admin).\n" \
  "ceph_keyring=<FILE>           RADOS: keyring (the configuration's).\n" \
  "device_size=<SIZE>            With create: size of each RADOS device made\n" \
  "                              (its share of size= plus 25% + 128M).\n" \
  "log_size=<SIZE>               With create: size of a RADOS log device made\n" \
  "                              (256M).\n" \
  "takeover=true                 RADOS import: fence (blocklist) the server\n" \
  "                              holding the pool, break its locks, take it.\n" \
  "kstat=<DIR>|none              Where to write the txgs and stats files.\n" \
  "control=<SOCKET>|off          The control socket zvoladm runs commands\n" \
  "                              through (the pool's runtime directory's\n" \
  "                              control file).\n" \
  "verify=full                   Import: check the volume's whole tree now\n" \
  "                              (default lazy: each block when first read).\n" \
  "zil_recover=truncate|discard  Import although the intent log is damaged:\n" \
  "                              replay up to the damage, or none of it.\n" \
  "Tunables (see nbdkit-zvol-plugin(1)):\n"

static struct nbdkit_plugin plugin = {
  .name = "zvol",
  .longname = "nbdkit zvol plugin",
  .version = PACKAGE_VERSION,
  .description = "copy-on-write, checksummed, transactional volume",
  .load = zp_load,
  .unload = zp_unload,
  .config = zp_config,
  .config_complete = zp_config_complete,
  .config_help = zp_config_help,
  .magic_config_key = "device",
  .dump_plugin = zp_dump_plugin,
  .get_ready = zp_get_ready,
  .after_fork = zp_after_fork,
  .cleanup = zp_cleanup,
  .list_exports = zp_list_exports,
  .default_export = zp_default_export,
  .open = zp_open,
  .close = zp_close,
  .get_size = zp_get_size,
  .block_size = zp_block_size,
  .can_write = zp_can_write,
  .can_flush = zp_can_one,
  .can_fua = zp_can_fua,
  .can_trim = zp_can_one,
  .can_zero = zp_can_one,
  .can_fast_zero = zp_can_one,     /* honoured, see zp_zero */
  .can_extents = zp_can_one,
  .can_multi_conn = zp_can_multi_conn,
  .can_cache = zp_can_cache,
  .pread = zp_pread,
  .pwrite = zp_pwrite,
  .flush = zp_flush,
  .trim = zp_trim,
  .zero = zp_zero,
  .extents = zp_extents,
  .errno_is_preserved = 1,
};

/*
 * The --help text: zp_config_help, then a line per tunable.  Built when
 * the plugin is loaded (dlopen), before nbdkit calls plugin_init and
 * copies the struct, so .load would be too late; kept for the life of
 * the process.
 */
static char *zp_help;

static void __attribute__ ((constructor))
zp_help_init (void)
{
  char *tun = zvol_tunable_help ();
  size_t n;

  if (tun == NULL)
    return;
  if (asprintf (&zp_help, "%s%s", zp_config_help, tun) < 0)
    zp_help = NULL;
  free (tun);
  if (zp_help == NULL)
    return;
  n = strlen (zp_help);
  if (n > 0 && zp_help[n - 1] == '\n')
    zp_help[n - 1] = '\0';
  plugin.config_help = zp_help;
}

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL
NBDKIT_REGISTER_PLUGIN (plugin)
