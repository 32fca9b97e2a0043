/*
 * pool.h: the pool's internals, shared by pool.c and zvol.c only.
 */
#ifndef ZV_POOL_H
#define ZV_POOL_H

#include <pthread.h>

#include "zvol.h"
#include "format.h"
#include "zio.h"
#include "dbuf.h"
#include "dmu.h"
#include "flat.h"
#include "txg.h"
#include "zil.h"

struct zvol {
  zvol_pool_t *zv_pool;
  zv_object_t *zv_obj;        /* held for the volume's whole life */
  zv_txg_t *zv_txg;
  zv_zil_t *zv_zil;           /* NULL when read-only */
  pthread_mutex_t *zv_stripes; /* range locks, by block (zvol.c) */
  unsigned zv_sync;           /* ZVOL_SYNC_* */
  uint64_t zv_volsize;
  uint32_t zv_blksz;
  bool zv_readonly;
};

struct zvol_pool {
  zv_spa_t p_spa;
  char p_name[ZV_NAME_MAX];
  uint64_t p_volsize;
  uint32_t p_volblocksize;
  bool p_readonly;
  bool p_started;
  zv_dbuf_cache_t *p_cache;
  zv_txg_t *p_txg;
  zv_object_t p_vol;
  zv_flat_t p_spacemap[ZV_MAX_DEVS];
  zv_flat_t p_defer[2];
  zv_blkptr_t p_objset_bp;     /* as of the last synced txg */
  zv_dev_t *p_logdev;          /* separate log device, or NULL */
  zv_zil_header_t p_zil_hdr;   /* as created or imported */
  zv_zil_t *p_zil;
  uint64_t p_synced_txg;
  _Atomic uint64_t p_sync_passes; /* of the last sync (read by stats) */
  _Atomic unsigned p_sync_write_cap; /* its cap at its end (stats) */
  zv_defer_ent_t *p_defer_ents; /* sync scratch: this txg's frees */
  size_t p_defer_n, p_defer_cap;
  uint64_t p_ub_txg_seen;      /* newest txg in the labels at import */
  struct zvol p_zvol;
};

/* zvol.c: open the volume's intent log and replay it (pool_open). */
int zvol_log_open (zvol_pool_t *p, const zvol_pool_config_t *pc);
void zvol_log_free_stripes (zvol_t *zv);

#endif /* ZV_POOL_H */
