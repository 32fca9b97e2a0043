/*
 * fuzz_inputs.h: the layout of each harness's input, shared by the
 * harnesses (which parse it) and the seed maker (which writes seeds in
 * it).  Every layout is a few header bytes, then a sequence of entries;
 * an input that ends early is read as zeros (fuzz.h), so none is
 * invalid.  Multi-byte fields are little-endian.
 */
#ifndef ZV_FUZZ_INPUTS_H
#define ZV_FUZZ_INPUTS_H

#include <stdint.h>

#include "format.h"

/*
 * fuzz_label: [flags] [configuration 0] [configuration 1].  Each
 * configuration is sizeof (zv_config_phys_t) bytes; the device's size
 * is one of four.
 */
#define FZ_LABEL_SIZE_MASK   0x03u   /* index into fz_label_sizes */
#define FZ_LABEL_RAW0        0x04u   /* copy 0 not sealed */
#define FZ_LABEL_L1_SHIFT    3       /* label 1: */
#define FZ_LABEL_L1_SAME     0u      /*   copy 0, sealed at its offset */
#define FZ_LABEL_L1_INPUT    1u      /*   configuration 1 */
#define FZ_LABEL_L1_ZERO     2u      /*   zeros */
#define FZ_LABEL_L1_MOVED    3u      /*   copy 0 with label 0's seal */
#define FZ_LABEL_RING_UB     0x20u   /* a verifying uberblock in the ring */
#define FZ_LABEL_RAW1        0x40u   /* configuration 1 not sealed */
static const uint64_t fz_label_sizes[4] = {
  20ull << 20, 17ull << 20, ZV_MIN_DEV_SIZE, 16ull << 20,
};

/*
 * fuzz_uberblock: [devs-1 | max << 1] [guid u64], then entries
 * [device] [label] [slot] [flags] [uberblock: sizeof
 * (zv_uberblock_phys_t) bytes].  Devices are FZ_UB_DEVSIZE bytes.
 */
#define FZ_UB_DEVSIZE (17ull << 20)
#define FZ_UB_RAW 0x01u               /* entry flag: not sealed */

/*
 * fuzz_blkptr: [devs-1] [data end of each, u16 in 64 KiB units]
 * [volblocksize shift from 4K, | 0x80: a pool without the compression
 * feature], then entries [kind] and its bytes:
 */
enum fz_bp_kind {
  FZ_BP_PTR = 0,      /* a block pointer (64): zv_zio_bp_check */
  FZ_BP_DNODE = 1,    /* [type] + a dnode (128): zv_dmu_check_dnode */
  FZ_BP_IND = 2,      /* a log record (48) + its pointer (64):
                         zv_zil_ind_check */
  FZ_BP_COMP = 3,     /* [algorithm] [psize in sectors] [lsize shift from
                         4K] + up to psize bytes (zeros after): a stored
                         block, zv_comp_decompress */
  FZ_BP_NKINDS
};

/*
 * fuzz_tree: [object] [flags] [dnode (128)] [claims: count, then each
 * (sector u32, sectors u16)] then blocks [length u16] [bytes], block k
 * at slot k (fz_tree_slot) of a memory device, zeros after its bytes.
 */
enum fz_tree_obj { FZ_TREE_VOLUME = 0, FZ_TREE_SPACEMAP = 1,
                   FZ_TREE_DEFER = 2, FZ_TREE_DEADLIST = 3, FZ_TREE_NOBJS };
#define FZ_TREE_RAW    0x01u   /* no reseal */
#define FZ_TREE_READ   0x02u   /* volume: read it through the cache too */
#define FZ_TREE_BIG    0x04u   /* the large device (3 space-map chunks) */
#define FZ_TREE_SLOTS  8u
#define FZ_TREE_SLOTSZ (128u * 1024)
#define FZ_TREE_SMALL  (20ull << 20)
#define FZ_TREE_LARGE ((1ull << 30) + (64ull << 20))
#define FZ_TREE_VOLSIZE (8ull << 20)   /* the volume object's size */
static inline uint64_t
fz_tree_slot (unsigned k)
{
  return ZV_LABEL_SIZE + (uint64_t) k * FZ_TREE_SLOTSZ;   /* device 0 */
}

/*
 * fuzz_spacemap: [devs-1 (of 4)] [each device's data area, u16 in 64
 * KiB units], then operations [op] and its bytes (see fuzz_spacemap.c).
 */
enum fz_sm_op {
  FZ_SM_CHUNK = 0,    /* [dev] [idx u16] [length u16] [bytes] */
  FZ_SM_DEFER = 1,    /* [txg u8] [count u16] [blkid u8] [n] [n x 16] */
  FZ_SM_QUERY = 2,    /* [dva u64] [size u32] */
  FZ_SM_ALLOC = 3,    /* [size shift] */
  FZ_SM_FREE = 4,     /* [which u8] */
  FZ_SM_SYNC = 5,     /* next txg */
  FZ_SM_NOPS
};

/*
 * fuzz_zil: [flags] [slots-2] [head position u16, in sectors] [head
 * seq u16] [claim txg] [imported txg] [volblocksize shift] [volsize u16,
 * 64 KiB units] [regions: count, then (sector u16, sectors u8, state)]
 * then blocks
 * [ctl] [length u16] [records], ctl FZ_ZIL_B_NEXT followed by a u64.
 */
#define FZ_ZIL_CLAIMED   0x01u  /* header records the claim set */
#define FZ_ZIL_CLAIM_TXG 0x02u  /* claim_txg from the input */
#define FZ_ZIL_LIVE      0x04u  /* allocated space is live */
#define FZ_ZIL_NOREPLAY  0x08u  /* claim only */
#define FZ_ZIL_BADCOUNT  0x10u  /* the claim set's count is off by one */
#define FZ_ZIL_B_RAW     0x01u  /* block: not sealed */
#define FZ_ZIL_B_NEXT    0x02u  /* block: lh_next_dva from the input */
#define FZ_ZIL_B_SEQ     0x04u  /* block: its seq off by one */
#define FZ_ZIL_DEVSIZE   (20ull << 20)
#define FZ_ZIL_RING_OFF  (ZV_LABEL_SIZE + (1ull << 20))

/*
 * fuzz_image: [flags], then patches [kind] [index] [offset u16] [op]
 * [data].  Kinds are image.h's IK_*; FZ_IMG_COPY copies bytes from one
 * structure into another ([kind] [index] [offset u16] of the source, then
 * of the target, then [length-1]: two pointers naming one block, two
 * lists naming one extent); any other kind past IK_* is a raw patch
 * (index: the device, offset in 512-byte units).  op: bits 0-4 length-1,
 * bits 5-6 what (set, xor, add a signed byte, fill with a byte), bit 7
 * copy 0 only.  set and xor take length bytes of data, add and fill one.
 */
#define FZ_IMG_COPY 0x80u
#define FZ_IMG_SEL_MASK  0x03u  /* 0 a, 1 a2 (claimed), 2 b, 3 a */
#define FZ_IMG_RDONLY    0x04u
#define FZ_IMG_RAW       0x08u  /* no reseal */
#define FZ_IMG_POOLONLY  0x10u  /* no zvol_open */
#define FZ_IMG_REOPEN    0x20u  /* write, sync, close, import again */
#define FZ_IMG_OP_SET  0u
#define FZ_IMG_OP_XOR  1u
#define FZ_IMG_OP_ADD  2u
#define FZ_IMG_OP_FILL 3u
#define FZ_IMG_OP_COPY0 0x80u

#endif /* ZV_FUZZ_INPUTS_H */
