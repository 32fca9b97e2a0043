/*
 * fuzz_zil: log blocks and their records, as a read-write import claims
 * them (zv_zil_claim: the chain walk and block verification, every
 * record's framing, type, flags and range, the in-place pointers'
 * checks, the ownership rule and the claim set) and as the volume's
 * open replays them (zv_zil_replay: the same checks, the record order,
 * and the records handed to the volume).
 *
 * The input (fuzz_inputs.h) is a log header as import would accept it
 * (import_check_zil's bounds), the allocator's state around the in-place
 * blocks, and a chain of log blocks whose records are the input's bytes;
 * the harness lays the blocks out in the ring as the writer does and
 * seals them, unless a block's flags say otherwise, so records reach the
 * checks.  Checked: results are the promised ones, the claim records
 * its txg and set, and every record replay hands on is inside the
 * volume, inside its block, in order, and (in place) named a block the
 * claim made allocated.
 */
#include <config.h>

#include "fuzz.h"
#include "fuzz_inputs.h"
#include "zil.h"
#include "txg.h"

static fz_memdev_t fz_md;
static zv_dev_t *fz_dev;
static volatile uint64_t fz_sink;   /* keeps the reads of record data */

int
LLVMFuzzerInitialize (int *argc, char ***argv)
{
  fz_setup ();
  fz_memdev_create (&fz_md, "zil", FZ_ZIL_DEVSIZE);
  fz_dev = fz_memdev_open (&fz_md);
  /* A small in-memory record ring: opened once per input. */
  zv_zil_itx_ring_shift = 6;
  return 0;
}

typedef struct fzl_state {
  zv_spa_t *zs_spa;
  zv_zil_t *zs_zl;
  uint32_t zs_blksz;
  uint64_t zs_volsize;
  uint64_t zs_claim;
  uint64_t zs_last_seq;
  unsigned zs_applied;
} fzl_state_t;

/* The volume's side of replay: what it is handed must be applicable. */
static int
fzl_replay_cb (void *arg, const zv_lr_t *lr, const void *data)
{
  fzl_state_t *st = arg;
  const uint8_t *p = data;
  uint64_t sum = 0;

  FZ_CHECK (lr->lr_type >= ZV_LR_WRITE && lr->lr_type <= ZV_LR_ZERO);
  FZ_CHECK (lr->lr_txg > st->zs_claim);
  FZ_CHECK (lr->lr_seq >= st->zs_last_seq);
  st->zs_last_seq = lr->lr_seq;
  FZ_CHECK (lr->lr_offset <= st->zs_volsize
            && lr->lr_length <= st->zs_volsize - lr->lr_offset);
  FZ_CHECK (lr->lr_reclen >= sizeof *lr && lr->lr_reclen % 8 == 0);
  FZ_CHECK (p == (const uint8_t *) (lr + 1));
  if (lr->lr_type == ZV_LR_WRITE) {
    FZ_CHECK (lr->lr_length <= lr->lr_reclen - sizeof *lr);
    for (uint64_t i = 0; i < lr->lr_length; i++)   /* inside its block */
      sum += p[i];
  }
  if (lr->lr_type == ZV_LR_WRITE_IND) {
    zv_blkptr_t bp;
    FZ_CHECK (lr->lr_reclen >= sizeof *lr + sizeof bp);
    memcpy (&bp, data, sizeof bp);
    FZ_CHECK (zv_zil_ind_check (st->zs_spa, lr, &bp, st->zs_blksz) == 0);
    FZ_CHECK (zv_alloc_is_allocated (st->zs_spa->spa_alloc, bp.bp_dva[0],
                                     st->zs_blksz));
  }
  if (lr->lr_flags != 0)
    FZ_CHECK (lr->lr_type == ZV_LR_ZERO && lr->lr_flags == ZV_LR_F_ZERO_ALLOC);
  fz_sink += sum;
  st->zs_applied++;
  return 0;
}

/* The pool's txg sync, as far as the log sees it. */
static int
fzl_sync_cb (void *arg, uint64_t txg, zv_txg_sync_stats_t *ss)
{
  fzl_state_t *st = arg;
  zv_zil_header_t zh;

  memset (ss, 0, sizeof *ss);
  zv_alloc_sync_begin (st->zs_spa->spa_alloc, txg);
  if (st->zs_zl) {
    zv_zil_sync_header (st->zs_zl, txg, &zh);
    zv_zil_synced (st->zs_zl, txg);
  }
  return 0;
}

static bool
fzl_live_cb (void *arg, uint64_t dva, uint32_t size, uint64_t blkid)
{
  return *(const bool *) arg;
}

static int
fzl_dva_cmp (const void *a, const void *b)
{
  uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

  return x < y ? -1 : x > y;
}

/* The in-place blocks the chain's records to replay name, sorted and
 * unique: the set a claim records (for FZ_ZIL_CLAIMED). */
static size_t
fzl_claim_set (const zv_zil_header_t *zh, uint64_t claim, uint64_t *dvas,
               size_t max)
{
  uint64_t ring = zh->zh_nslots * (uint64_t) zh->zh_blksz;
  uint64_t pos = zh->zh_head_pos, seq = zh->zh_head_seq;
  size_t n = 0;

  for (unsigned k = 0; k < 64; k++, seq++) {
    const zv_lwb_hdr_t *lh = (const zv_lwb_hdr_t *)
      (fz_md.md_map + FZ_ZIL_RING_OFF + pos % ring);
    uint32_t nused = ZV_MIN (lh->lh_nused, zh->zh_blksz - 64);
    if (lh->lh_magic != ZV_LWB_MAGIC || lh->lh_seq != seq
        || lh->lh_next_dva % ZV_SECTOR != 0)
      break;
    for (uint32_t p = 0; p + sizeof (zv_lr_t) <= nused;) {
      const zv_lr_t *lr = (const zv_lr_t *) ((const uint8_t *) (lh + 1) + p);
      if (lr->lr_reclen < sizeof *lr || lr->lr_reclen % 8
          || lr->lr_reclen > nused - p)
        break;
      if (lr->lr_type == ZV_LR_WRITE_IND && lr->lr_txg > claim
          && lr->lr_reclen >= sizeof *lr + sizeof (zv_blkptr_t) && n < max) {
        uint64_t dva;
        memcpy (&dva, lr + 1, sizeof dva);
        dvas[n++] = dva;
      }
      p += lr->lr_reclen;
    }
    pos = ZV_DVA_OFFSET (lh->lh_next_dva) - FZ_ZIL_RING_OFF
      + (pos - pos % ring);
  }
  qsort (dvas, n, sizeof *dvas, fzl_dva_cmp);
  size_t u = 0;
  for (size_t i = 0; i < n; i++)
    if (u == 0 || dvas[u - 1] != dvas[i])
      dvas[u++] = dvas[i];
  return u;
}

int
LLVMFuzzerTestOneInput (const uint8_t *data, size_t size)
{
  static uint64_t dvas[4096];
  fz_in_t in = fz_in (data, size);
  uint8_t flags = fz_u8 (&in);
  uint64_t nslots = 2 + fz_u8 (&in) % 15;
  uint64_t ring = nslots * ZV_ZIL_BLKSZ;
  uint64_t head_pos = (uint64_t) fz_u16 (&in) * ZV_SECTOR;
  uint64_t head_seq = ZV_MAX ((uint64_t) fz_u16 (&in), 1u);
  uint64_t claim_in = fz_u8 (&in);
  uint64_t imported = ZV_MAX ((uint64_t) fz_u8 (&in), 1u);
  uint32_t blksz = ZV_MIN_VOLBLOCKSIZE << (fz_u8 (&in) % 6);
  uint64_t volsize = ((uint64_t) fz_u16 (&in) + 1) << 16;
  uint64_t start = zv_data_start (), end = zv_data_end (FZ_ZIL_DEVSIZE);
  uint64_t ring_dva = ZV_DVA_MAKE (0, FZ_ZIL_RING_OFF);
  bool live = flags & FZ_ZIL_LIVE;
  fzl_state_t st = { .zs_blksz = blksz, .zs_volsize = volsize };
  zv_zil_header_t zh;
  zv_spa_t spa;
  unsigned nregions;
  int r;

  memset (&spa, 0, sizeof spa);
  spa.spa_devs[0] = fz_dev;
  spa.spa_ndevs = 1;
  spa.spa_guid = TL_GUID;
  spa.spa_data_end[0] = end;
  spa.spa_alloc = zv_alloc_create (1, &start, &end);
  st.zs_spa = &spa;
  zv_alloc_claim (spa.spa_alloc, ring_dva, (uint32_t) ring);

  /* Space around the in-place blocks: allocated, or freed and waiting. */
  nregions = fz_u8 (&in) % 8;
  for (unsigned i = 0; i < nregions; i++) {
    uint64_t off = start + (uint64_t) fz_u16 (&in) * ZV_SECTOR;
    uint32_t n = 1 + fz_u8 (&in) % 64;
    uint8_t state = fz_u8 (&in);
    if (off + (uint64_t) n * ZV_SECTOR > end)
      continue;
    zv_alloc_claim (spa.spa_alloc, ZV_DVA_MAKE (0, off), n * ZV_SECTOR);
    if ((state & 1) && !zv_alloc_may_claim (spa.spa_alloc,
                                            ZV_DVA_MAKE (0, off),
                                            n * ZV_SECTOR))
      zv_alloc_free_defer (spa.spa_alloc, imported, ZV_DVA_MAKE (0, off),
                           n * ZV_SECTOR);
  }

  /* A header import accepts (import_check_zil). */
  if (head_pos % ring + ZV_ZIL_BLKSZ > ring)
    head_pos -= head_pos % ring;
  memset (&zh, 0, sizeof zh);
  zh.zh_magic = ZV_ZIL_MAGIC;
  zh.zh_version = ZV_FORMAT_VERSION;
  zh.zh_blksz = ZV_ZIL_BLKSZ;
  zh.zh_ring_dva = ring_dva;
  zh.zh_nslots = nslots;
  zh.zh_guid = 0x5eed0fc4a1ull;
  zh.zh_head_seq = head_seq;
  zh.zh_head_pos = head_pos;
  if (flags & FZ_ZIL_CLAIM_TXG)
    zh.zh_claim_txg = ZV_MIN (claim_in, imported);

  /* The chain, laid out as the writer places it. */
  uint64_t pos = head_pos, seq = head_seq, laid = 0;
  while (fz_more (&in)) {
    uint8_t ctl = fz_u8 (&in);
    uint32_t nused = ZV_MIN ((uint32_t) fz_u16 (&in),
                             ZV_ZIL_BLKSZ - (uint32_t) sizeof (zv_lwb_hdr_t));
    uint32_t len = (uint32_t) ZV_P2ROUNDUP (sizeof (zv_lwb_hdr_t) + nused,
                                            ZV_SECTOR);
    uint8_t *blk = fz_md.md_map + FZ_ZIL_RING_OFF + pos % ring;
    zv_lwb_hdr_t *lh = (zv_lwb_hdr_t *) blk;
    uint64_t next = pos + len;

    if (laid + len + ZV_ZIL_BLKSZ > ring)
      break;
    if (next % ring + ZV_ZIL_BLKSZ > ring)
      next += ring - next % ring;
    laid += next - pos;
    memset (blk, 0, len);
    fz_bytes (&in, blk + sizeof *lh, nused);
    lh->lh_magic = ZV_LWB_MAGIC;
    lh->lh_version = ZV_FORMAT_VERSION;
    lh->lh_nused = nused;
    lh->lh_seq = seq + !!(ctl & FZ_ZIL_B_SEQ);
    lh->lh_next_seq = seq + 1;
    lh->lh_next_dva = ctl & FZ_ZIL_B_NEXT ? fz_u64 (&in)
      : ring_dva + next % ring;
    if (!(ctl & FZ_ZIL_B_RAW))
      zv_cksum_compute (blk, len, zh.zh_guid ^ (seq * 0x9e3779b97f4a7c15ull)
                        ^ ZV_LWB_MAGIC, &lh->lh_cksum);
    pos = next;
    seq++;
  }
  if (flags & FZ_ZIL_CLAIMED) {
    uint64_t claim = zh.zh_claim_txg ? zh.zh_claim_txg : imported;
    size_t n = fzl_claim_set (&zh, claim, dvas, sizeof dvas / sizeof dvas[0]);
    zh.zh_claim_txg = claim;
    zh.zh_flags = ZV_ZH_F_CLAIM_SET;
    zh.zh_claim_count = n + !!(flags & FZ_ZIL_BADCOUNT);
    zv_cksum_compute (dvas, n * sizeof *dvas, zh.zh_guid, &zh.zh_claim_cksum);
  }

  zv_zil_header_t before = zh;
  r = zv_zil_claim (&spa, NULL, &zh, imported, blksz, volsize,
                    ZV_ZIL_RECOVER_NONE, false, fzl_live_cb, &live);
  FZ_CHECK (r >= 0 || r == -EIO);
  if (r < 0)
    FZ_CHECK (memcmp (&before, &zh, sizeof zh) == 0);
  else {
    FZ_CHECK (zh.zh_claim_txg == (before.zh_claim_txg ? before.zh_claim_txg
                                  : imported));
    FZ_CHECK (zh.zh_flags & ZV_ZH_F_CLAIM_SET);
  }

  if (r >= 0 && !(flags & FZ_ZIL_NOREPLAY)) {
    zv_txg_tunables_t tt;
    zv_zil_tunables_t zt;
    zv_zil_ops_t ops = {
      .zo_replay = fzl_replay_cb, .zo_blksz = blksz, .zo_volsize = volsize,
    };
    zv_txg_t *tx;

    zv_txg_tunables_default (&tt);
    tt.tt_timeout_ms = 3600 * 1000;
    zv_zil_tunables_default (&zt);
    st.zs_claim = zh.zh_claim_txg;
    tx = zv_txg_create (&tt, imported + 1, fzl_sync_cb, &st);
    st.zs_zl = zv_zil_open (&spa, NULL, tx, &zh, &ops, &st, &zt);
    r = zv_zil_replay (st.zs_zl, imported, ZV_ZIL_RECOVER_NONE);
    FZ_CHECK (r == -EIO || (r >= 0 && (unsigned) r == st.zs_applied));
    zv_zil_close (st.zs_zl);
    st.zs_zl = NULL;
    zv_txg_destroy (tx);
  }

  zv_alloc_destroy (spa.spa_alloc);
  memset (fz_md.md_map + FZ_ZIL_RING_OFF, 0, ring);
  return 0;
}
