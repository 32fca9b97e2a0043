/*
 * fuzz_spacemap: the allocator's state as import rebuilds it from disk:
 * space-map chunks (zv_alloc_chunk_load, which refuses bits past a
 * device's end) and deferred-free list blocks (zv_import_defer_load_block,
 * which takes only allocated extents) and the ownership check import
 * makes of the pending frees (no sector freed twice), then the queries
 * the intent log's claim asks of hostile addresses (zv_alloc_may_claim,
 * zv_alloc_is_allocated), then the allocator at work on what was loaded:
 * allocations, deferred frees and txg syncs, as the pool's syncs after
 * an import make them.
 *
 * The input (fuzz_inputs.h) is the devices' geometry and a list of
 * operations.  Checked: loads either succeed or fail with the promised
 * error, queries never claim space outside a device, the accounting
 * stays within the devices, and the loaded state never trips one of the
 * allocator's always-on assertions later (those guard the engine's own
 * bookkeeping, so a load that lets hostile data reach them is a bug).
 */
#include <config.h>

#include "fuzz.h"
#include "fuzz_inputs.h"
#include "alloc.h"
#include "pool.h"
#include "import.h"

#define SM_MAXDEVS 4u
#define SM_MAXBLOCKS 64u

static bool sm_owned_ok;

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fz_setup ();
  return 0;
}

static void
sm_own_cb (void *arg, uint64_t dva, uint32_t size)
{
  zv_alloc_owners_t *o = arg;

  if (zv_alloc_owners_take (o, dva, size) < 0)
    sm_owned_ok = false;
}

/* What import checks once the lists are loaded (import.c, import_own_meta):
 * no two pending deferred frees share a sector. */
static bool
sm_owners_ok (zv_alloc_t *a, const uint8_t *txgs)
{
  zv_alloc_owners_t *o = zv_alloc_owners_create (a);

  sm_owned_ok = true;
  for (unsigned t = 0; t < 256; t++)
    if (txgs[t])
      zv_alloc_defer_foreach (a, t, sm_own_cb, o);
  zv_alloc_owners_destroy (o);
  return sm_owned_ok;
}

/* The accounting; while loading, the lists may still overlap (their
 * ownership is checked once they are all in). */
static void
sm_check_space (zv_alloc_t *a, bool loading)
{
  zv_alloc_space_t sp;

  zv_alloc_get_space (a, &sp);
  FZ_CHECK (sp.as_allocated <= sp.as_total);
  if (!loading)
    FZ_CHECK (sp.as_deferred <= sp.as_allocated);
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static uint8_t chunk[ZV_ALLOC_CHUNK];
  static uint8_t ents[ZV_DEFER_BLKSZ];
  fz_in_t in = fz_in (data, size);
  unsigned ndevs = 1 + fz_u8 (&in) % SM_MAXDEVS;
  uint64_t start[SM_MAXDEVS], end[SM_MAXDEVS];
  uint64_t blocks[SM_MAXBLOCKS];
  uint32_t bsizes[SM_MAXBLOCKS];
  unsigned nblocks = 0;
  uint64_t txg = 1;
  zv_alloc_t *a;
  bool loading = true, lists = false;
  uint8_t txgs[256] = { 0 };
  uint8_t *loaded[SM_MAXDEVS];

  for (unsigned d = 0; d < ndevs; d++) {
    uint64_t area = ZV_MAX ((uint64_t) fz_u16 (&in), 1u) << 16;
    start[d] = zv_data_start ();
    end[d] = start[d] + area;
  }
  a = zv_alloc_create (ndevs, start, end);
  for (unsigned d = 0; d < ndevs; d++)
    loaded[d] = zv_calloc (ZV_MAX (zv_alloc_nchunks (a, d), (size_t) 1), 1);

  while (fz_more (&in)) {
    unsigned op = fz_u8 (&in) % FZ_SM_NOPS;
    int r;

    /* Import loads everything before the first allocation, and checks
     * the lists' ownership then. */
    if (loading && op != FZ_SM_CHUNK && op != FZ_SM_DEFER
        && op != FZ_SM_QUERY) {
      loading = false;
      if (!sm_owners_ok (a, txgs))
        goto out;
    }
    switch (op) {
    case FZ_SM_CHUNK: {
      unsigned d = fz_u8 (&in) % ndevs;
      size_t idx = fz_u16 (&in), n = ZV_MIN ((size_t) fz_u16 (&in),
                                             sizeof chunk);
      memset (chunk, 0, sizeof chunk);
      fz_bytes (&in, chunk, n);
      /* As import: every chunk once, before the deferred lists. */
      if (!loading || lists || idx >= zv_alloc_nchunks (a, d)
          || loaded[d][idx])
        break;
      loaded[d][idx] = 1;
      r = zv_alloc_chunk_load (a, d, idx, chunk);
      FZ_CHECK (r == 0 || r == -EINVAL);
      if (r < 0)
        goto out;             /* import gives up on this uberblock */
      break;
    }
    case FZ_SM_DEFER: {
      uint64_t dtxg = fz_u8 (&in), count = fz_u16 (&in);
      uint64_t blkid = fz_u8 (&in);
      size_t n = ZV_MIN ((size_t) fz_u8 (&in) * sizeof (zv_defer_ent_t),
                         sizeof ents);
      memset (ents, 0, sizeof ents);
      fz_bytes (&in, ents, n);
      if (!loading)
        break;
      lists = true;
      r = zv_import_defer_load_block (a, dtxg, count, blkid, ents);
      FZ_CHECK (r == 0 || r == -EIO);
      if (r < 0)
        goto out;
      txgs[dtxg] = 1;
      break;
    }
    case FZ_SM_QUERY: {
      uint64_t dva = fz_u64 (&in);
      uint32_t len = fz_u32 (&in);
      bool alloc = zv_alloc_is_allocated (a, dva, len);
      bool may = zv_alloc_may_claim (a, dva, len);
      /* Either answer yes only for an extent inside a device. */
      if (alloc || may) {
        unsigned v = ZV_DVA_VDEV (dva);
        FZ_CHECK (v < ndevs && len > 0 && len % ZV_SECTOR == 0);
        FZ_CHECK (ZV_DVA_OFFSET (dva) >= start[v]
                  && ZV_DVA_OFFSET (dva) + len <= end[v]);
      }
      break;
    }
    case FZ_SM_ALLOC: {
      uint32_t len = ZV_SECTOR << (fz_u8 (&in) % 6);
      uint64_t dva;
      if (nblocks == SM_MAXBLOCKS)
        break;
      if (zv_alloc_block (a, len, 0, &dva) == 0) {
        FZ_CHECK (zv_alloc_is_allocated (a, dva, len));
        blocks[nblocks] = dva;
        bsizes[nblocks++] = len;
      }
      break;
    }
    case FZ_SM_FREE: {
      unsigned i = fz_u8 (&in);
      if (nblocks == 0)
        break;
      i %= nblocks;
      zv_alloc_free_defer (a, txg, blocks[i], bsizes[i]);
      blocks[i] = blocks[--nblocks];
      bsizes[i] = bsizes[nblocks];
      break;
    }
    case FZ_SM_SYNC:
      zv_alloc_sync_begin (a, ++txg);
      break;
    }
    sm_check_space (a, loading);
  }
  if (loading && !sm_owners_ok (a, txgs))
    goto out;
  /* Every frees reaches the allocator in the end. */
  for (unsigned i = 0; i < 3; i++)
    zv_alloc_sync_begin (a, txg + 256 + i);
  sm_check_space (a, false);
 out:
  for (unsigned d = 0; d < ndevs; d++)
    free (loaded[d]);
  zv_alloc_destroy (a);
  return 0;
}
