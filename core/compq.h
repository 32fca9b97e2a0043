/*
 * compq.h: the compression queue (compq.c): the data blocks of a txg
 * compressed and checksummed by worker threads while the sync thread
 * places and writes the ones already done.
 *
 * The sync thread fills an array of items, starts a job on it, and then
 * waits for the items in order (zv_compq_wait), compressing unclaimed
 * ones itself meanwhile, so a job always ends even with no worker.
 */
#ifndef ZV_COMPQ_H
#define ZV_COMPQ_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include "zv_util.h"

typedef struct zv_compq_item {
  const void *ci_src;           /* ci_lsize bytes; NULL: nothing to do */
  void *ci_dst;                 /* room for ci_lsize bytes; NULL: the
                                   queue takes a zv_buf_get buffer for a
                                   block past the early abort, keeps it
                                   only if the block is stored
                                   compressed, and the owner puts it */
  uint32_t ci_lsize;
  uint32_t ci_psize;            /* out: zv_comp_compress's result */
  bool ci_asked;                /* the early abort said no already */
  bool ci_cksum;                /* checksum what is to be stored, */
  uint64_t ci_seed;             /* with this seed, */
  zv_cksum_t ci_sum;            /* out: into here (ci_dst's psize bytes,
                                   or ci_src's lsize when psize is 0) */
  _Atomic bool ci_done;
} zv_compq_item_t;

typedef struct zv_compq_job {
  uint32_t cj_prop;             /* the compression property */
  zv_compq_item_t *cj_items;
  size_t cj_n;
  _Atomic size_t cj_next;       /* first item no thread has claimed */
  _Atomic size_t cj_limit;      /* workers claim no item from here on */
  size_t cj_window;             /* items workers may run ahead of the
                                   owner's wait (compress_ahead) */
  _Atomic unsigned cj_stalled;  /* workers asleep at cj_limit (counted
                                   under cq_lock, read by the owner) */
  size_t cj_ready;              /* items before it are done (the owner's) */
  _Atomic bool cj_waiting;      /* the owner sleeps on cj_cv */
  unsigned cj_refs;             /* workers inside the job (cq_lock) */
  bool cj_queued;               /* it had work: on the queue once */
  pthread_cond_t cj_cv;
  struct zv_compq_job *cj_link; /* the queue of jobs with work (cq_lock) */
} zv_compq_job_t;

/* Logical bytes of a txg a compressed volume's sync places and writes
 * at a time (tunable compress_piece). */
extern uint64_t zv_compq_piece;
/* Worker threads at most (tunable compress_threads; 0: one per online
 * processor). */
extern unsigned zv_compq_threads;
/* Logical bytes the workers may compress past the items the owner last
 * waited for (tunable compress_ahead). */
extern uint64_t zv_compq_ahead;

/* Start compressing items[0..n) with property prop (workers start on
 * the first job, up to compress_threads); an item without a source is
 * done from the start. */
void zv_compq_start (zv_compq_job_t *j, uint32_t prop,
                     zv_compq_item_t *items, size_t n);
/* Return once items[0..upto) are all compressed; the workers may then
 * claim items up to compress_ahead's worth past upto, and no further. */
void zv_compq_wait (zv_compq_job_t *j, size_t upto);
/* End the job: items not claimed yet are never compressed (a sync that
 * failed half-way), and no worker touches the job or its items after. */
void zv_compq_finish (zv_compq_job_t *j);

/* Counters (all jobs of the process): items compressed by workers and
 * by the jobs' owners, worker threads now. */
typedef struct zv_compq_stats {
  uint64_t cqs_by_workers, cqs_by_owner;
  unsigned cqs_threads;
} zv_compq_stats_t;
void zv_compq_get_stats (zv_compq_stats_t *out);

#endif /* ZV_COMPQ_H */
