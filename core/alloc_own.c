/*
 * alloc_own.c: who owns each sector of an imported pool (alloc.h,
 * zv_alloc_own_*, zv_alloc_owners_*).
 *
 * Theory.  The allocator's checks of one extent (alloc.c) cannot see two
 * owners of one sector (two pointers naming one block, a deferred free
 * of a block still in use), whose second free would be a VERIFY failure
 * a txg or two after import, or would free space still in use.  So an
 * imported pool keeps a map of the sectors allocated at import that
 * have no owner yet (ad_unowned): import takes the metadata's, and each
 * indirect block of the volume takes its children's the first time it
 * is read (dmu.c), so a pointer naming free space, or space something
 * else owns (found before, or allocated since import), is refused
 * before anything can free through it.  Bits of the map only clear:
 * allocation and free need no upkeep of it.  ad_checked marks the
 * indirect blocks whose children took theirs, so one read again after
 * eviction takes nothing twice.  (zv_alloc_owners_* is the same check
 * as a throwaway map, for the fuzzers' whole-tree walks.)
 *
 * Locking: a_lock, as the rest of the allocator (alloc.c); the
 * throwaway map is its one thread's.
 */
#include <config.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "alloc_impl.h"

/* ---- ownership, for import ---- */

/*
 * A bit per sector of each device's area, as the allocator's bitmap, set
 * for each sector import has found an owner of (see alloc.h).  Only the
 * importing thread uses it, before anything can allocate: no lock.
 */
struct zv_alloc_owners {
  zv_alloc_t *ao_alloc;
  uint64_t **ao_map;           /* per device, ad_nchunks chunks of words */
};

zv_alloc_owners_t *
zv_alloc_owners_create (zv_alloc_t *a)
{
  zv_alloc_owners_t *o = zv_calloc (1, sizeof *o);

  o->ao_alloc = a;
  o->ao_map = zv_calloc (a->a_ndevs, sizeof *o->ao_map);
  for (unsigned i = 0; i < a->a_ndevs; i++)
    o->ao_map[i] = zv_calloc (ZV_MAX (a->a_devs[i].ad_nchunks, (size_t) 1),
                              ZV_ALLOC_CHUNK);
  return o;
}

void
zv_alloc_owners_destroy (zv_alloc_owners_t *o)
{
  if (o == NULL)
    return;
  for (unsigned i = 0; i < o->ao_alloc->a_ndevs; i++)
    free (o->ao_map[i]);
  free (o->ao_map);
  free (o);
}

/* Give [dva, dva + size) its owner: all of it, or none when a sector
 * has one already. */
int
zv_alloc_owners_take (zv_alloc_owners_t *o, uint64_t dva, uint32_t size)
{
  zv_alloc_dev_t *d;
  uint64_t *map, b, n;

  if (!zv_alloc_extent (o->ao_alloc, dva, size, &d, &b, &n))
    return -EINVAL;
  map = o->ao_map[d - o->ao_alloc->a_devs];
  for (uint64_t x = b; x < b + n; x++)
    if (map[x / 64] & (1ull << (x % 64)))
      return -EEXIST;
  zv_alloc_bits_mark (map, b, n, true);
  return 0;
}

/* ---- ownership since import, checked as the tree is read ---- */

/*
 * The pool's map of owners (see alloc.h): ad_unowned starts as a copy of
 * the bitmap as imported, and a sector leaves it once, when the first
 * pointer (or deferred free, or the log ring) that names it is found.
 * Space allocated since is never in it (it was free at import), so a
 * pointer first seen later can take only space that was allocated at
 * import and that nothing has claimed since: never free space, never
 * space of another block, whether that block was found on disk or
 * written since.  Bits only ever clear, so the map needs no upkeep in
 * the allocation and free paths.
 */
void
zv_alloc_own_begin (zv_alloc_t *a)
{
  alloc_lock (a);
  for (unsigned i = 0; i < a->a_ndevs; i++) {
    zv_alloc_dev_t *d = &a->a_devs[i];
    size_t bytes = ZV_MAX (d->ad_nchunks, (size_t) 1) * ZV_ALLOC_CHUNK;

    free (d->ad_unowned);
    free (d->ad_checked);
    d->ad_unowned = zv_calloc (1, bytes);
    d->ad_checked = zv_calloc (1, bytes);
    if (d->ad_nchunks > 0)
      memcpy (d->ad_unowned, d->ad_map, bytes);
  }
  a->a_own = true;
  alloc_unlock (a);
}

/* Take [b, b + n) of d for an owner (a_lock held): all or nothing. */
static int
alloc_own_locked (zv_alloc_dev_t *d, uint64_t b, uint64_t n)
{
  if (!zv_alloc_range_all_set (d, b, n))
    return -ENOENT;
  if (!zv_alloc_bits_all_set (d->ad_unowned, b, n))
    return -EEXIST;
  zv_alloc_bits_mark (d->ad_unowned, b, n, false);
  return 0;
}

int
zv_alloc_own (zv_alloc_t *a, uint64_t dva, uint32_t size)
{
  zv_alloc_dev_t *d;
  uint64_t b, n;
  int r = 0;

  if (!zv_alloc_extent (a, dva, size, &d, &b, &n))
    return -EINVAL;
  alloc_lock (a);
  if (a->a_own)
    r = alloc_own_locked (d, b, n);
  else if (!zv_alloc_range_all_set (d, b, n))
    r = -ENOENT;
  alloc_unlock (a);
  return r;
}

void
zv_alloc_own_rest (zv_alloc_t *a, uint64_t dva, uint32_t size)
{
  zv_alloc_dev_t *d;
  uint64_t b, n;

  if (!zv_alloc_extent (a, dva, size, &d, &b, &n))
    return;
  alloc_lock (a);
  if (a->a_own)
    zv_alloc_bits_mark (d->ad_unowned, b, n, false);
  alloc_unlock (a);
}

bool
zv_alloc_own_any (zv_alloc_t *a, uint64_t dva, uint32_t size)
{
  zv_alloc_dev_t *d;
  uint64_t b, n;
  bool r = false;

  if (!zv_alloc_extent (a, dva, size, &d, &b, &n))
    return true;
  alloc_lock (a);
  if (a->a_own)
    for (uint64_t x = b; x < b + n && !r; x++)
      r = (d->ad_map[x / 64] >> (x % 64) & 1)
        && !(d->ad_unowned[x / 64] >> (x % 64) & 1);
  alloc_unlock (a);
  return r;
}

int
zv_alloc_own_children (zv_alloc_t *a, uint64_t parent,
                       const zv_alloc_ext_t *ext, size_t n, size_t *bad)
{
  zv_alloc_dev_t *pd, *d;
  uint64_t pb, pn, b, m;
  size_t i;
  int r = 0;

  *bad = 0;
  if (!zv_alloc_extent (a, parent, ZV_SECTOR, &pd, &pb, &pn))
    return -EINVAL;
  alloc_lock (a);
  if (!a->a_own || (pd->ad_checked[pb / 64] >> (pb % 64) & 1)) {
    alloc_unlock (a);
    return 0;
  }
  for (i = 0; i < n && r == 0; i++) {
    if (!zv_alloc_extent (a, ext[i].ae_dva, ext[i].ae_size, &d, &b, &m))
      r = -EINVAL;
    else
      r = alloc_own_locked (d, b, m);
  }
  if (r < 0) {
    /* Nothing taken: the children before the bad one give theirs back
     * (they were all unowned, or they would have failed). */
    *bad = --i;
    while (i-- > 0) {
      ZV_VERIFY (zv_alloc_extent (a, ext[i].ae_dva, ext[i].ae_size, &d, &b, &m));
      zv_alloc_bits_mark (d->ad_unowned, b, m, true);
    }
  }
  else
    pd->ad_checked[pb / 64] |= 1ull << (pb % 64);
  alloc_unlock (a);
  return r;
}

void
zv_alloc_own_checked (zv_alloc_t *a, uint64_t parent)
{
  zv_alloc_dev_t *d;
  uint64_t b, n;

  if (!zv_alloc_extent (a, parent, ZV_SECTOR, &d, &b, &n))
    return;
  alloc_lock (a);
  if (a->a_own)
    d->ad_checked[b / 64] |= 1ull << (b % 64);
  alloc_unlock (a);
}

/* The runs still unowned, reported outside a_lock (the map is
 * import's, or the checker's, whose pool nothing else touches: no
 * allocation can change it meanwhile). */
void
zv_alloc_own_foreach_unowned (zv_alloc_t *a, zv_alloc_run_fn fn, void *arg)
{
  if (!a->a_own)
    return;
  for (unsigned v = 0; v < a->a_ndevs; v++) {
    const zv_alloc_dev_t *d = &a->a_devs[v];
    uint64_t b = 0;

    while (b < d->ad_nbits) {
      uint64_t w = d->ad_unowned[b / 64] >> (b % 64);

      if (w == 0) {             /* the rest of this word is owned */
        b = (b / 64 + 1) * 64;
        continue;
      }
      b += (uint64_t) __builtin_ctzll (w);
      if (b >= d->ad_nbits)
        break;
      uint64_t e = b;
      while (e < d->ad_nbits && (d->ad_unowned[e / 64] >> (e % 64) & 1))
        e++;
      fn (arg, v, d->ad_start + b * ZV_SECTOR, (e - b) * ZV_SECTOR);
      b = e;
    }
  }
}
