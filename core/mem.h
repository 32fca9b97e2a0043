/*
 * mem.h: sizing caches to the memory the system can spare (mem.c).
 *
 * A client (a pool's buffer cache) registers with its ceiling, its floor
 * and two callbacks; one process-wide thread samples the memory the
 * system has available and moves every client's target between floor and
 * ceiling: down when available memory falls under mem_free_target, back
 * up, gradually, once there is twice that.  OpenZFS's ARC does the same
 * with the kernel's shrinkers; a user-space engine has only the numbers
 * the kernel publishes (MemAvailable in /proc/meminfo).
 */
#ifndef ZV_MEM_H
#define ZV_MEM_H

#include <stdint.h>

typedef struct zv_mem_client zv_mem_client_t;

/* The client's cached bytes now; and a new target to shrink or grow to
 * (called from the monitor thread, or from zv_mem_poll_now). */
typedef uint64_t (*zv_mem_size_fn) (void *arg);
typedef void (*zv_mem_apply_fn) (void *arg, uint64_t target);

/* Register: the target starts at max (min <= max).  The first client
 * starts the monitor thread, the last one to go stops it. */
zv_mem_client_t *zv_mem_register (uint64_t max, uint64_t min,
                                  zv_mem_size_fn size, zv_mem_apply_fn apply,
                                  void *arg);
/* Start the monitor thread again in a forked child (a server that forks
 * after opening its pool: zv_pool_start); harmless when it runs. */
void zv_mem_start (void);
/* After this returns no callback of the client runs any more. */
void zv_mem_unregister (zv_mem_client_t *mc);
uint64_t zv_mem_target (const zv_mem_client_t *mc);

/* Physical memory, bytes (4 GiB when the system does not say). */
uint64_t zv_mem_physical (void);
/* The free memory the monitor defends (the mem_free_target tunable, or
 * auto: a 32nd of physical memory, 64 MiB to 4 GiB). */
uint64_t zv_mem_free_target (void);

/* Tests: where available memory comes from (NULL: /proc/meminfo; the
 * function returns bytes, or a negative errno), and one sample now, on
 * the calling thread, as the monitor would take it. */
typedef int64_t (*zv_mem_source_fn) (void *arg);
void zv_mem_set_source (zv_mem_source_fn fn, void *arg);
void zv_mem_poll_now (void);

#endif /* ZV_MEM_H */
