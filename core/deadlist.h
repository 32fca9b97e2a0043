/*
 * deadlist.h: a dataset's dead list: the blocks its tree let go of that
 * an older snapshot still holds (snap.c has the rule), kept as an object
 * of 32-byte entries (docs/format.md, "Dead lists").
 *
 * Only the sync thread (or import, before it starts) touches one.
 */
#ifndef ZV_DEADLIST_H
#define ZV_DEADLIST_H

#include <stdint.h>
#include <stdbool.h>

#include "format.h"
#include "flat.h"
#include "zio.h"

typedef struct zv_deadlist {
  zv_spa_t *dl_spa;
  bool dl_has_obj;                /* dl_fl is set up (else: a hole) */
  zv_flat_t dl_fl;
  uint64_t dl_n;                  /* entries */
  uint64_t dl_bytes;              /* data bytes (level-0 entries) */
  /* Entries [dl_mem_first, dl_n) in memory: those no sync has written
   * and the rest of the block they share.  dl_tail_known: the entries of
   * the last, partial block are among them (else still only on disk). */
  zv_deadlist_ent_t *dl_mem;
  size_t dl_mem_cap;
  uint64_t dl_mem_first;
  bool dl_tail_known;
} zv_deadlist_t;

/* The most entries a dead list holds (F^2 blocks of 512). */
#define ZV_DEADLIST_MAX_ENTS \
  ((uint64_t) ZV_INDIRECT_FANOUT * ZV_INDIRECT_FANOUT * ZV_DEADLIST_PER_BLK)

void zv_deadlist_init (zv_deadlist_t *dl, zv_spa_t *spa);
void zv_deadlist_fini (zv_deadlist_t *dl);
/*
 * The list of a record (hostile data): its descriptor's shape, and
 * 'bytes' as the record says (checked when the entries are read).
 * Reads only its pointer tree.  0 or -EIO, logged with 'what'.
 */
int zv_deadlist_load (zv_deadlist_t *dl, zv_spa_t *spa,
                      const zv_dnode_phys_t *dn, uint64_t bytes,
                      const char *what);
/* Descriptor shape only (import's record check, the fuzz harness). */
bool zv_deadlist_dnode_valid (const zv_dnode_phys_t *dn);

/* Add the block bp (killed in txg).  -EFBIG when the list is full. */
int zv_deadlist_append (zv_deadlist_t *dl, const zv_blkptr_t *bp,
                        uint64_t txg);
int zv_deadlist_append_ent (zv_deadlist_t *dl, const zv_deadlist_ent_t *e,
                            uint64_t txg);
/* Every entry, oldest first, each checked (hostile data: -EIO logged
 * with 'what'); fn's nonzero return stops the walk and is returned. */
typedef int (*zv_deadlist_fn) (void *arg, const zv_deadlist_ent_t *e);
int zv_deadlist_iterate (zv_deadlist_t *dl, const char *what,
                         zv_deadlist_fn fn, void *arg);
/* Entries [from, ...), checked for their fields only (whoever frees
 * one checks its space): fn returns 0 to go on, 1 to stop before the
 * entry (not consumed), or an error.  *next: the first entry not
 * consumed.  Returns 0 (also when fn stopped it) or the error. */
int zv_deadlist_iterate_from (zv_deadlist_t *dl, const char *what,
                              uint64_t from, zv_deadlist_fn fn, void *arg,
                              uint64_t *next);
/* Write what changed (txg's sync). */
int zv_deadlist_sync (zv_deadlist_t *dl, uint64_t txg);
/* Free the object's own blocks in txg (not the blocks it lists): the
 * list is empty after. */
void zv_deadlist_free_obj (zv_deadlist_t *dl, uint64_t txg);
/* dst (empty) takes src's list; src is empty after. */
void zv_deadlist_move (zv_deadlist_t *dst, zv_deadlist_t *src);
/* The descriptor for the record (all zero when there is no object). */
void zv_deadlist_phys (const zv_deadlist_t *dl, zv_dnode_phys_t *dn);
/* The object's tree, for import's owners (NULL: none). */
zv_flat_t *zv_deadlist_flat (zv_deadlist_t *dl);

#endif /* ZV_DEADLIST_H */
