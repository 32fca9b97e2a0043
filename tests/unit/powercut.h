/*
 * powercut.h: a power-cut simulator for tests, on top of the device
 * layer's observer and fault hooks (core/dev.h).
 *
 * It plays a disk with a volatile write cache under every device it
 * watches: a write is "pending" until a flush makes it durable; a
 * completed flush makes durable every write that completed before the
 * flush was submitted.  A cut fails every later request with -EIO (the
 * engine suspends), and then, once nothing is in flight, rewrites each
 * 4 KiB sector that pending writes touched with one of its possible
 * contents: what it held before the first pending write, or what any
 * pending write put there (any subset of the pending writes persisted,
 * in any order), chosen at random from a seed.
 *
 * Typical use:
 *   pc_t *pc = pc_new (seed, PC_RANDOM);
 *   pc_watch (pc, true);          (devices opened from now on are watched)
 *   zvol_pool_open (...); ... I/O on other threads ...
 *   pc_cut (pc);                  (from any thread but the pool's)
 *   ... let the I/O threads fail and stop ...
 *   zvol_pool_close (pool);       (errors expected)
 *   pc_watch (pc, false);
 *   pc_free (pc);                 (after every watched device closed)
 * then import again and check.
 *
 * Devices are told apart by their zv_dev_t pointer: use a simulator for
 * one pool open (a device closed and another opened could share the
 * address).  Writes must be multiples of 4 KiB at 4 KiB offsets (as the
 * device layer requires).
 */
#ifndef ZV_POWERCUT_H
#define ZV_POWERCUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dev.h"

typedef struct pc pc_t;

enum pc_mode {
  PC_RANDOM = 0,      /* each touched sector: a random possible content */
  PC_KEEP_ALL,        /* lose nothing: the files stay as the I/O left them */
  PC_LOSE_ALL,        /* every pending write is lost */
};

typedef struct pc_stats {
  uint64_t ps_writes;         /* writes seen (submitted) */
  uint64_t ps_flushes;        /* flushes completed */
  uint64_t ps_durable;        /* writes a flush made durable */
  uint64_t ps_overlaps;       /* writes submitted over an in-flight one */
  uint64_t ps_failed;         /* requests the cut failed */
  uint64_t ps_cut_late;       /* cuts applied after the close (pc_cut) */
  uint64_t ps_cut_sectors;    /* sectors with pending writes at the cut */
  uint64_t ps_cut_old;        /* ... that went back to their durable content */
  uint64_t ps_cut_newest;     /* ... that kept the newest pending write */
  uint64_t ps_cut_other;      /* ... that got an older pending write */
  unsigned ps_devices;        /* devices seen */
} pc_stats_t;

pc_t *pc_new (uint64_t seed, enum pc_mode mode);
/* Forget everything; the devices it watched must all be closed. */
void pc_free (pc_t *pc);

/* Watch (on) every device opened from now on, or stop doing so (off). */
void pc_watch (pc_t *pc, bool on);
/* Watch a device already open, with nothing in flight on it. */
void pc_attach (pc_t *pc, zv_dev_t *dev);

/* Cut the power now and apply it to the files once the requests in
 * flight have completed: at once when they do within PC_CUT_WAIT_MS,
 * else at the next pc_settle(), pc_get_stats() or pc_free(), which must
 * then come after the pool's close (a write started ahead completes only
 * when a commit or the close finishes it).  Not from a thread that has
 * requests in flight (that is, not from an engine thread). */
#define PC_CUT_WAIT_MS 1000
void pc_cut (pc_t *pc);
/* Arm: the n-th device write from now (n >= 1) fails and cuts the power.
 * pc_settle() applies that cut to the files later. */
void pc_cut_after_writes (pc_t *pc, uint64_t n);
bool pc_is_cut (pc_t *pc);
/* Apply a cut to the files, once the requests in flight have completed;
 * a no-op when there was no cut, or when it was applied already. */
void pc_settle (pc_t *pc);

void pc_get_stats (pc_t *pc, pc_stats_t *st);
/* Log every write, flush and cut choice to fp (NULL: stop), for
 * debugging a failure. */
void pc_set_trace (pc_t *pc, FILE *fp);

/* Let a test see every write and flush as it is submitted (done == 0)
 * and completed, on the thread doing the I/O, after the simulator has
 * accounted for it.  Set it before any I/O it should see. */
typedef void (*pc_hook_fn) (void *arg, enum zv_dev_op op, int done,
                            uint64_t off, uint32_t len);
void pc_set_hook (pc_t *pc, pc_hook_fn fn, void *arg);

/* A fault hook of the test's own (zv_dev_fault_fn) on every watched
 * device: the simulator owns the devices' one fault hook and asks this
 * one first, so a test can fail requests (device errors) and cut the
 * power in one run.  A request it fails is not issued: the simulator
 * neither counts nor records it.  Set it before the devices are opened
 * (it is read without a lock). */
void pc_set_fault (pc_t *pc, zv_dev_fault_fn fn, void *arg);

#endif /* ZV_POWERCUT_H */
