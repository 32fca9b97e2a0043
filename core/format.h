/*
 * format.h: the on-disk format, version 3.  docs/format.md describes it
 * in prose; this header is the reference.  Version 3 is the pool's
 * (ZV_POOL_VERSION, the objset's header): version 2 (a dataset directory
 * instead of format 1's one volume) plus a feature mask (os_features,
 * and cf_features in every label): a reader refuses any bit it does not
 * know, so a later feature adds a bit, not a version.  The configuration
 * keeps cf_version 2 and says it carries the mask with a flag
 * (ZV_CF_F_FEATURES), which a version-2 reader refuses by name ("label
 * has unknown flags"): the one refusal it can give clearly.  The blocks
 * below the objset keep their version 1 headers (ZV_FORMAT_VERSION).
 *
 * Every field is fixed-width little-endian.  The structures below are laid
 * out so that their in-memory image on a little-endian host is the disk
 * image (static asserts check sizes and the byte order), and every parser
 * still treats what it reads as hostile: magic, version, checksum and
 * bounds are checked before a field is trusted.
 *
 * Device layout (every device of the pool):
 *
 *   0               256 KiB                         size-256K      size
 *   | label 0       | data area (allocatable)        | label 1       |
 *
 * A label holds the pool configuration (one 4 KiB block at its start) and
 * a ring of ZV_UB_COUNT uberblocks (4 KiB slots from 16 KiB on).  Txg T
 * writes slot T % ZV_UB_COUNT of every label of every device: first all
 * front labels, flush, then all back labels, flush; a torn write leaves
 * the other copy and the older slots intact.  Create fills every slot
 * with an empty uberblock (ZV_CF_F_UB_EMPTY), so a slot with no copy
 * that verifies was damaged, never merely unwritten.
 *
 * Everything else is copy-on-write: the uberblock points at the objset
 * block, the pool's object set, which holds the object descriptors
 * (dnodes): the dataset directory (one record per volume, each with its
 * volume's object and intent-log header), one space-map object per
 * device (the allocation bitmap, in 16 KiB chunks) and the deferred-free
 * lists of the last two txgs.  An object's blocks
 * hang from a tree of indirect blocks; every pointer (zv_blkptr_t) carries
 * its child's checksum (XXH3-128 seeded with the pool guid), birth txg and
 * sizes.  Metadata (every block but volume data: objset, indirect,
 * space-map and defer blocks) is written twice (ditto), on two devices
 * when the pool has more than one.
 */
#ifndef ZV_FORMAT_H
#define ZV_FORMAT_H

#include <stdint.h>
#include <assert.h>
#include <stddef.h>

#include "zv_util.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "format v1 maps its little-endian structures directly; port the encoders first"
#endif

/* Blocks below the objset: indirect, space-map and deferred-list
 * blocks, log blocks, uberblocks (unchanged since format 1). */
#define ZV_FORMAT_VERSION 1u
/* The pool's format: the objset header's version. */
#define ZV_POOL_VERSION 3u
/* Version 2: no feature mask (the fields are zero); still imported, and
 * written as version 2 (no compressed block) until zvoladm upgrade
 * (docs/design.md).  Also the configuration's cf_version in both. */
#define ZV_POOL_VERSION_2 2u
#define ZV_CONFIG_VERSION ZV_POOL_VERSION_2
/* The format-1 pool version, recognised only to refuse it clearly. */
#define ZV_POOL_VERSION_1 1u

#define ZV_LABEL_MAGIC    0x4c424c4c4f565a00ull /* "\0ZVOLLBL" */
#define ZV_UB_MAGIC       0x00ba5eb10c5a0000ull /* base block */
#define ZV_MBLK_MAGIC     0x4b4c424d4f565a00ull /* "\0ZVOMBLK" */

/*
 * Pool features (cf_features of every label, os_features of every
 * objset; a version-3 pool's feature set is the union of the two).  A
 * reader refuses a pool with a bit it does not know.
 * ZV_FEAT_COMPRESS: volume data blocks may be stored compressed
 * (bp_comp != 0, bp_psize < bp_lsize; compress.h); set at create.
 * ZV_FEAT_MIRROR: a device of the pool is a mirror of two or three sides
 * (dev_mirror.c), each with labels of its own that name the mirror and
 * which side they are (cf_mirror_nsides, cf_mirror_side,
 * cf_side_guids); set at create when a device is a mirror.  A reader
 * without it would take one side for the whole device and let the others
 * go stale.
 */
#define ZV_FEAT_COMPRESS 0x1ull
#define ZV_FEAT_MIRROR   0x2ull
#define ZV_FEAT_KNOWN    (ZV_FEAT_COMPRESS | ZV_FEAT_MIRROR)

/* Label geometry. */
#define ZV_LABEL_SIZE     (256u * 1024)
#define ZV_CONFIG_SIZE    4096u
#define ZV_UB_RING_OFFSET (16u * 1024)
#define ZV_UB_SIZE        4096u
#define ZV_UB_COUNT       ((ZV_LABEL_SIZE - ZV_UB_RING_OFFSET) / ZV_UB_SIZE)
#define ZV_NLABELS        2u

/* Smallest device: two labels and 16 MiB of data area. */
#define ZV_MIN_DEV_SIZE   (2ull * ZV_LABEL_SIZE + 16ull * 1024 * 1024)
#define ZV_MAX_DEVS       16u

/* Volume block sizes: powers of two in [min, max]. */
#define ZV_MIN_VOLBLOCKSIZE     4096u
#define ZV_MAX_VOLBLOCKSIZE     (128u * 1024)
#define ZV_DEFAULT_VOLBLOCKSIZE 16384u
#define ZV_NAME_MAX       64u

/* Block types (bp_type, mh_type). */
enum zv_blk_type {
  ZV_BT_NONE = 0,
  ZV_BT_VOLDATA = 1,     /* volume data (raw, no header) */
  ZV_BT_INDIRECT = 2,    /* header + block pointers */
  ZV_BT_OBJSET = 3,      /* header + dnodes */
  ZV_BT_SPACEMAP = 4,    /* allocation bitmap chunk (raw) */
  ZV_BT_DEFER = 5,       /* deferred-free entries (raw) */
  ZV_BT_DSDIR = 6,       /* dataset records (raw) */
  ZV_BT_DEADLIST = 7,    /* dead-list entries (raw; deadlist.c) */
  ZV_BT_MAX
};

/*
 * Block pointer, 64 bytes.  bp_dva[0] == 0 means a hole (offset 0 is
 * label space, never allocatable).  A dva is (vdev << 56) | byte offset.
 */
typedef struct zv_blkptr {
  uint64_t bp_dva[2];     /* copies; [1] == 0 when single */
  uint32_t bp_psize;      /* bytes on disk, multiple of ZV_SECTOR */
  uint32_t bp_lsize;      /* logical bytes (== psize unless compressed) */
  uint64_t bp_birth;      /* txg written */
  uint8_t bp_type;
  uint8_t bp_level;
  uint8_t bp_comp;        /* 0: none; else compress.h's algorithm, and
                             then psize < lsize (ZV_FEAT_COMPRESS) */
  uint8_t bp_ncopies;
  uint32_t bp_pad;
  uint64_t bp_fill;       /* non-hole L0 blocks below (1 for an L0) */
  zv_cksum_t bp_cksum;
} zv_blkptr_t;
static_assert (sizeof (zv_blkptr_t) == 64, "blkptr is 64 bytes");

static inline int
zv_bp_is_hole (const zv_blkptr_t *bp)
{
  return bp->bp_dva[0] == 0;
}

/* Header of every metadata block with structure (indirect, objset). */
typedef struct zv_mblk_hdr {
  uint64_t mh_magic;
  uint32_t mh_version;
  uint32_t mh_type;       /* enum zv_blk_type */
  uint64_t mh_txg;
  uint64_t mh_object;
  uint64_t mh_blkid;
  uint32_t mh_level;
  uint32_t mh_pad;
  uint64_t mh_reserved[2];
} zv_mblk_hdr_t;
static_assert (sizeof (zv_mblk_hdr_t) == 64, "mblk header is 64 bytes");

/* Indirect blocks: 16 KiB, one header slot then 255 pointers. */
#define ZV_INDIRECT_SIZE  16384u
#define ZV_INDIRECT_FANOUT ((ZV_INDIRECT_SIZE / sizeof (zv_blkptr_t)) - 1)
#define ZV_MAX_LEVELS     8u

/* Object descriptor (dnode), 128 bytes. */
typedef struct zv_dnode_phys {
  uint8_t dn_type;        /* ZV_BT_* of its data blocks; 0 = unused */
  uint8_t dn_nlevels;     /* 1: root is the only L0; n: n-1 indirect levels */
  uint16_t dn_pad;
  uint32_t dn_datablksz;
  uint64_t dn_size;       /* logical bytes */
  uint64_t dn_nblocks;    /* L0 blocks addressable (ceil(size/blksz)) */
  uint64_t dn_txg;        /* txg the object describes (defer lists) */
  zv_blkptr_t dn_root;
  uint64_t dn_reserved[4];
} zv_dnode_phys_t;
static_assert (sizeof (zv_dnode_phys_t) == 128, "dnode is 128 bytes");

/* Object numbers (mh_object).  Each object set numbers its own objects:
 * in the pool's, object 1 is the dataset directory; in a volume's, object
 * 1 is the volume (every volume's indirect blocks say 1, as format 1's
 * did; two volumes' blocks are told apart by their pointers' checksums
 * and by import's one owner per sector). */
#define ZV_OBJ_DSDIR      1u
#define ZV_OBJ_VOLUME     1u
#define ZV_OBJ_DEFER0     2u     /* defer slots 0 and 1 */
#define ZV_OBJ_SPACEMAP0  16u    /* spacemap of device i: 16 + i */

/*
 * Intent-log header, in the objset (128 bytes).  The log lives in a ring
 * of zh_nslots * zh_blksz bytes starting at zh_ring_dva (on the log
 * device, or a region allocated from the pool at create).  Log blocks
 * take roundup(64 + records, 4 KiB) bytes each, one after the other; a
 * block never crosses the ring's end (when fewer than zh_blksz bytes are
 * left, the next block starts over at the ring's start).  Replay starts
 * with block zh_head_seq at ring offset zh_head_pos % ring size and
 * follows the chain while blocks verify (zil_replay.c tells a torn tail
 * from a damaged block by the lh_durable_seq of the blocks after it).
 */
#define ZV_ZIL_BLKSZ (128u * 1024)           /* log block slot */
#define ZV_LOG_VDEV 255u                     /* dva device of the log device */
#define ZV_ZIL_MAGIC 0x4c495a4f565a0000ull   /* "\0\0ZVOZIL" */
typedef struct zv_zil_header {
  uint64_t zh_magic;
  uint32_t zh_version;
  uint32_t zh_blksz;
  uint64_t zh_ring_dva;
  uint64_t zh_nslots;
  uint64_t zh_guid;          /* this chain's incarnation: seeds checksums */
  uint64_t zh_head_seq;      /* oldest block that may hold unsynced records */
  uint64_t zh_claim_txg;     /* replay pending: records above this txg */
  uint64_t zh_flags;         /* ZV_ZH_F_* */
  uint64_t zh_head_pos;      /* logical byte position of the head block */
  uint64_t zh_claim_count;   /* in-place blocks the claim took (with flag) */
  zv_cksum_t zh_claim_cksum; /* of their sorted addresses (with flag) */
  uint64_t zh_trunc_seq;     /* replay ends in this block (with flag)... */
  uint64_t zh_trunc_off;     /* ...after this many bytes of its records */
  uint64_t zh_reserved[2];
} zv_zil_header_t;
/* zh_claim_count and zh_claim_cksum describe the blocks claimed at
 * zh_claim_txg: a later claim or the replay owns exactly those. */
#define ZV_ZH_F_CLAIM_SET 1ull
/* An import with zil_recover=truncate cut the chain where it was damaged
 * or held a record that makes no sense: replay stops at zh_trunc_seq,
 * zh_trunc_off bytes into its records, whatever follows (the decision
 * outlives a crash during the replay).  Both fields are 0 without it. */
#define ZV_ZH_F_TRUNCATED 2ull
static_assert (sizeof (zv_zil_header_t) == 128, "zil header is 128 bytes");

/*
 * Log block header (64 bytes), at the start of each block; the block is
 * written and checksummed up to roundup(64 + lh_nused, 4 KiB).  The
 * checksum (XXH3-128, this field zeroed) is seeded with the chain guid
 * and lh_seq; the next block is named before this one is written.
 */
#define ZV_LWB_MAGIC 0x42574c4f565a0000ull   /* "\0\0ZVOLWB" */
typedef struct zv_lwb_hdr {
  uint64_t lh_magic;
  uint32_t lh_version;
  uint32_t lh_nused;          /* record bytes after this header */
  uint64_t lh_seq;
  uint64_t lh_next_dva;       /* where block seq+1 goes */
  uint64_t lh_next_seq;       /* its checksum seed: (guid, seq + 1) */
  /* The highest seq of this chain whose block (and every one before it)
   * was written and flushed when this block was issued: those blocks'
   * records were acknowledged.  Always below lh_seq; 0 says nothing
   * (the field was padding, written as 0, before it had a meaning). */
  uint64_t lh_durable_seq;
  zv_cksum_t lh_cksum;
} zv_lwb_hdr_t;
static_assert (sizeof (zv_lwb_hdr_t) == 64, "lwb header is 64 bytes");

/* Log record header (48 bytes); reclen includes payload, multiple of 8. */
typedef struct zv_lr {
  uint32_t lr_type;
  uint32_t lr_reclen;
  uint64_t lr_seq;            /* the record's ticket: increasing */
  uint64_t lr_txg;            /* txg the change was applied in */
  uint64_t lr_offset;
  uint64_t lr_length;
  uint64_t lr_flags;          /* ZV_LR_F_* (once padding, always zero) */
} zv_lr_t;
static_assert (sizeof (zv_lr_t) == 48, "log record header is 48 bytes");

/*
 * A ZERO record whose blocks stay allocated (a zero without MAY_TRIM, the
 * client's NO_HOLE).  Without it a ZERO record makes holes, as every ZERO
 * record did before the flag existed; an older reader ignores the field
 * and replays holes, which still read as zeros.  No other bit is defined,
 * and no other record type carries any.
 */
#define ZV_LR_F_ZERO_ALLOC 0x1ull

/* Objset block (the pool's object set), 4 KiB. */
typedef struct zv_objset_phys {
  zv_mblk_hdr_t os_hdr;          /* mh_version: ZV_POOL_VERSION */
  uint64_t os_pool_guid;
  uint64_t os_txg;
  uint32_t os_ndevs;
  uint32_t os_pad;
  uint64_t os_next_dsid;         /* next dataset id (never reused) */
  uint64_t os_features;          /* ZV_FEAT_* (version 3; 0 before) */
  uint64_t os_reserved0[3];
  zv_dnode_phys_t os_dsdir;      /* the dataset directory */
  zv_dnode_phys_t os_defer[2];   /* slot txg % 2: frees of that txg */
  zv_dnode_phys_t os_spacemap[ZV_MAX_DEVS];
  zv_zil_header_t os_reserved_zil; /* format 1's log header; zero */
} zv_objset_phys_t;
#define ZV_OBJSET_SIZE 4096u
static_assert (sizeof (zv_objset_phys_t) <= ZV_OBJSET_SIZE, "objset fits");

/*
 * The scrub's place (scrub.c), in the objset block's last 256 bytes,
 * written with every txg while a scrub runs or is paused, all zero
 * otherwise (and in every pool written before it existed: a reader that
 * does not know it finds zeros or ignores it).  sp_cksum is XXH3-128 of
 * the record, the field zeroed, seeded with the pool guid.  The place:
 * phase 0 nothing done, 1 the trees (those with a dataset id below
 * sp_ds_id done, and in tree sp_ds_id the data bytes below sp_off), 2
 * the queued frees; the counts so far, for status.
 */
#define ZV_SCAN_MAGIC    0x4e4143534f565a00ull /* "\0ZVOSCAN" */
#define ZV_SCAN_VERSION  1u
#define ZV_SCAN_OFFSET   (ZV_OBJSET_SIZE - 256u)
#define ZV_SCAN_SCANNING 1u
#define ZV_SCAN_PAUSED   2u
typedef struct zv_scan_phys {
  uint64_t sp_magic;
  uint32_t sp_version;
  uint32_t sp_state;             /* ZV_SCAN_SCANNING or _PAUSED */
  uint32_t sp_phase;             /* 0, 1, 2 */
  uint32_t sp_pad;
  uint64_t sp_ds_id, sp_off;
  uint64_t sp_examined, sp_total;  /* data bytes */
  uint64_t sp_repaired, sp_repair_failed;
  uint64_t sp_cksum_errors, sp_read_errors, sp_lost;
  uint64_t sp_problems, sp_other;
  uint64_t sp_pieces, sp_elapsed_ns;
  uint64_t sp_reserved[14];      /* zero */
  zv_cksum_t sp_cksum;
} zv_scan_phys_t;
static_assert (sizeof (zv_scan_phys_t) == 256, "scan record is 256 bytes");
static_assert (sizeof (zv_objset_phys_t) <= ZV_SCAN_OFFSET,
               "the objset leaves room for the scan record");
static_assert (offsetof (zv_objset_phys_t, os_dsdir) == 128,
               "the directory is where format 1's volume was");

/*
 * Dataset record, 1 KiB, 16 per directory block; slot i of the
 * directory is record i.  A free slot is all zero.  dr_cksum (XXH3-128
 * of the record, the field zeroed) is seeded with the pool guid and the
 * slot (zv_dsrec_seed), so a record copied to another slot does not
 * verify.  The snapshot, clone and dead-list fields are in the format
 * now and zero until those are built (docs/format.md).
 */
#define ZV_DSREC_MAGIC   0x435253444f565a00ull /* "\0ZVODSRC" */
#define ZV_DSREC_VERSION 1u
#define ZV_DSREC_SIZE    1024u
#define ZV_DSDIR_BLKSZ   16384u
#define ZV_DSDIR_PER_BLK (ZV_DSDIR_BLKSZ / ZV_DSREC_SIZE)
/* One indirect level over the records: 255 blocks, 4080 datasets (a
 * deeper tree would cost every txg one more 16 KiB block, two copies). */
#define ZV_DSDIR_NBLOCKS 255u
static_assert (ZV_DSDIR_NBLOCKS == ZV_INDIRECT_FANOUT, "one indirect level");
#define ZV_DS_KIND_VOLUME   1u
#define ZV_DS_KIND_SNAPSHOT 2u
/* A destroyed dataset whose blocks are still being freed in the
 * background (freeq.c): an entry of the pool's free queue.  It keeps the
 * destroyed dataset's slot and id but no name in the namespace: its tree
 * (dr_volume, a volume's) or the dead list whose entries born after
 * dr_prev_snap_txg were its alone (dr_deadlist, a snapshot's), and how far
 * the free has gone (dr_free_cursor).  A reader from before it refuses the
 * kind, so never mistakes the queue for free space. */
#define ZV_DS_KIND_FREE     3u
/* dr_flags: a volume a receive is writing (send.c): import destroys it
 * (a full stream) or rolls it back to its newest snapshot (an
 * incremental one); no open while it is set. */
#define ZV_DR_F_RECV_INCOMPLETE 0x1ull
typedef struct zv_dsrec_phys {
  uint64_t dr_magic;
  uint32_t dr_version;
  uint32_t dr_kind;              /* ZV_DS_KIND_* */
  uint64_t dr_id;
  uint64_t dr_parent_id;         /* snapshot: its volume */
  uint64_t dr_origin_id;         /* clone: its snapshot */
  uint64_t dr_prev_snap_id;      /* newest snapshot (volume) / previous */
  uint64_t dr_prev_snap_txg;     /* its creation txg: the birth rule */
  uint64_t dr_creation_txg;
  uint64_t dr_creation_time;     /* seconds since the epoch */
  uint64_t dr_flags;             /* ZV_DR_F_*; any other bit refused */
  uint64_t dr_volsize;
  uint32_t dr_volblocksize;
  uint32_t dr_pad;
  uint64_t dr_reservation;       /* bytes kept for it; 0: thin */
  uint64_t dr_referenced;        /* data bytes its tree points at */
  uint64_t dr_used;              /* bytes its destroy would free */
  uint64_t dr_written;           /* data bytes born after prev_snap_txg */
  uint64_t dr_deadlist_bytes;
  char dr_name[ZV_NAME_MAX];
  zv_dnode_phys_t dr_volume;     /* the volume's object set: its object */
  zv_dnode_phys_t dr_deadlist;
  zv_zil_header_t dr_zil;        /* the volume's intent log */
  uint64_t dr_guid;              /* a snapshot's identity (send streams);
                                    0: none recorded (older records) */
  /* Kind ZV_DS_KIND_FREE only (0 in the others): the next data block
   * (tree) or dead-list entry (list) the background free looks at, and
   * the data bytes it had to free when it began (dr_used: those left). */
  uint64_t dr_free_cursor;
  uint64_t dr_free_total;
  /* A volume's compression property (compress.h: 0 off), and the
   * logical bytes of the blocks dr_written counts on disk (dr_written is
   * physical: compressed blocks count at their stored size); both 0 in
   * records from before, and in the other kinds. */
  uint32_t dr_compress;
  uint32_t dr_pad2;
  uint64_t dr_lwritten;
  uint64_t dr_reserved[48];
  zv_cksum_t dr_cksum;
} zv_dsrec_phys_t;
static_assert (sizeof (zv_dsrec_phys_t) == ZV_DSREC_SIZE,
               "dataset record is 1 KiB");
static_assert (offsetof (zv_dsrec_phys_t, dr_name) == 136
               && offsetof (zv_dsrec_phys_t, dr_volume) == 200
               && offsetof (zv_dsrec_phys_t, dr_zil) == 456
               && offsetof (zv_dsrec_phys_t, dr_guid) == 584
               && offsetof (zv_dsrec_phys_t, dr_free_cursor) == 592
               && offsetof (zv_dsrec_phys_t, dr_free_total) == 600
               && offsetof (zv_dsrec_phys_t, dr_compress) == 608
               && offsetof (zv_dsrec_phys_t, dr_lwritten) == 616
               && offsetof (zv_dsrec_phys_t, dr_cksum) == 1008,
               "dataset record layout (docs/format.md)");

static inline uint64_t
zv_dsrec_seed (uint64_t pool_guid, uint64_t slot)
{
  return pool_guid ^ (slot + 1) * 0x9e3779b97f4a7c15ull;
}

/* Dead-list entry, 32 bytes, 512 per 16 KiB block (snap.c: a block a
 * volume let go of that a snapshot still holds). */
typedef struct zv_deadlist_ent {
  uint64_t de_dva[2];            /* de_dva[1] is 0 with one copy */
  uint32_t de_psize;
  uint8_t de_ncopies;            /* 1 or 2 */
  uint8_t de_level;              /* 0: a data block, else indirect */
  uint8_t de_pad[2];
  uint64_t de_birth;
} zv_deadlist_ent_t;
static_assert (sizeof (zv_deadlist_ent_t) == 32, "dead-list entry is 32 bytes");
#define ZV_DEADLIST_BLKSZ 16384u
#define ZV_DEADLIST_PER_BLK (ZV_DEADLIST_BLKSZ / sizeof (zv_deadlist_ent_t))
#define ZV_OBJ_DEADLIST 8u

/* Deferred-free entry, 16 bytes. */
typedef struct zv_defer_ent {
  uint64_t de_dva;
  uint32_t de_size;
  uint32_t de_pad;
} zv_defer_ent_t;
static_assert (sizeof (zv_defer_ent_t) == 16, "defer entry is 16 bytes");
#define ZV_DEFER_BLKSZ 16384u

/* Pool configuration, the first 4 KiB of each label. */
typedef struct zv_config_phys {
  uint64_t cf_magic;
  uint32_t cf_version;
  uint32_t cf_ndevs;
  uint64_t cf_pool_guid;
  uint64_t cf_dev_guid;
  uint32_t cf_dev_index;
  uint32_t cf_volblocksize;
  uint64_t cf_dev_size;          /* bytes used of this device */
  uint64_t cf_volsize;
  uint64_t cf_create_time;       /* seconds since the epoch */
  uint64_t cf_flags;             /* ZV_CF_F_* (written as zero before) */
  char cf_name[ZV_NAME_MAX];
  uint64_t cf_dev_guids[ZV_MAX_DEVS];
  uint64_t cf_dev_sizes[ZV_MAX_DEVS];
  uint32_t cf_role;              /* ZV_ROLE_DATA or ZV_ROLE_LOG */
  uint32_t cf_pad2;
  uint64_t cf_log_guid;          /* the log device, 0 when none */
  uint64_t cf_log_size;
  uint64_t cf_features;          /* ZV_FEAT_* (with ZV_CF_F_FEATURES) */
  /* A side of a mirror (ZV_FEAT_MIRROR): the mirror's side count (2 or
   * 3; 0: this device is no mirror's), which side this label's device
   * is, and every side's guid.  The rest of the configuration (cf_dev_guid,
   * cf_dev_index, cf_dev_size) is the mirror's, the same on every side.
   * These were cf_reserved[4], written as zero. */
  uint32_t cf_mirror_nsides;
  uint32_t cf_mirror_side;
  uint64_t cf_side_guids[3];
  zv_cksum_t cf_cksum;           /* over the struct, this field zeroed */
} zv_config_phys_t;
static_assert (sizeof (zv_config_phys_t) <= ZV_CONFIG_SIZE, "config fits");
static_assert (offsetof (zv_config_phys_t, cf_mirror_nsides) + 32
               == offsetof (zv_config_phys_t, cf_cksum)
               && offsetof (zv_config_phys_t, cf_features) == 416
               && offsetof (zv_config_phys_t, cf_mirror_nsides) == 424,
               "the mirror fields are where cf_reserved was (format.md)");

#define ZV_ROLE_DATA 0u
#define ZV_ROLE_LOG  1u

/*
 * cf_flags.  ZV_CF_F_UB_EMPTY: create wrote an empty uberblock (below)
 * into every slot of every label, so a slot none of whose copies
 * verifies was damaged, never merely unwritten.  Pools created before
 * the flag have zeros there (an older reader never looked at the field,
 * and skips empty uberblocks: txg 0).  No other bit is defined; a
 * configuration with another one set is refused.
 */
#define ZV_CF_F_UB_EMPTY 0x1ull
/* cf_features holds the pool's feature mask and the objset is of
 * version ZV_POOL_VERSION (3).  A version-2 reader refuses the flag. */
#define ZV_CF_F_FEATURES 0x2ull
#define ZV_CF_F_KNOWN    (ZV_CF_F_UB_EMPTY | ZV_CF_F_FEATURES)

/*
 * Uberblock, one ring slot.  An empty uberblock (ub_flags
 * ZV_UB_F_EMPTY, txg 0, no root pointer, sealed and with the pool guid
 * like any other) fills a slot no txg has written yet; it is never a
 * candidate for import.  ub_flags was padding, always written as zero,
 * so every uberblock of a txg has flags 0; any other value is refused.
 */
typedef struct zv_uberblock_phys {
  uint64_t ub_magic;
  uint32_t ub_version;
  uint32_t ub_flags;             /* ZV_UB_F_* (once padding, zero) */
  uint64_t ub_txg;
  uint64_t ub_timestamp;         /* ns since the epoch */
  uint64_t ub_pool_guid;
  uint64_t ub_reserved[3];
  zv_blkptr_t ub_rootbp;         /* the objset block */
  zv_cksum_t ub_cksum;           /* over the struct, this field zeroed */
} zv_uberblock_phys_t;
static_assert (sizeof (zv_uberblock_phys_t) <= ZV_UB_SIZE, "uberblock fits");
#define ZV_UB_F_EMPTY 0x1u

/*
 * Resilver record (ZV_FEAT_MIRROR), 4 KiB into both labels of a side of
 * a mirror that is being resilvered (zvoladm replace: resilver.c): every
 * allocated sector of the data area below rs_pos was copied onto the
 * side and flushed.  Sealed like a configuration (offset-seeded).  The
 * area is zero when no resilver is under way (it always was).  A side
 * whose record verifies and names its pool, mirror and own guid is
 * written but not read until a resilver from rs_pos has finished.
 */
#define ZV_RESILVER_MAGIC  0x5653524c4f565a00ull /* "\0ZVOLRSV" */
#define ZV_RESILVER_OFFSET 4096u
#define ZV_RESILVER_VERSION 1u
typedef struct zv_resilver_phys {
  uint64_t rs_magic;
  uint32_t rs_version;
  uint32_t rs_flags;             /* none defined: zero */
  uint64_t rs_pool_guid;
  uint64_t rs_dev_guid;          /* the mirror's (cf_dev_guid) */
  uint64_t rs_side_guid;         /* this side's (cf_side_guids[i]) */
  uint64_t rs_pos;               /* data-area byte offset done below */
  uint64_t rs_reserved[10];
  zv_cksum_t rs_cksum;           /* over the struct, this field zeroed */
} zv_resilver_phys_t;
static_assert (sizeof (zv_resilver_phys_t) == 144, "resilver record");

/* Offset of label l (0 front, 1 back) on a device of 'size' bytes. */
static inline uint64_t
zv_label_offset (uint64_t size, unsigned l)
{
  return l == 0 ? 0 : ZV_P2ALIGN (size, ZV_SECTOR) - ZV_LABEL_SIZE;
}

/* Data area of a device of 'size' bytes. */
static inline uint64_t
zv_data_start (void)
{
  return ZV_LABEL_SIZE;
}
static inline uint64_t
zv_data_end (uint64_t size)
{
  return ZV_P2ALIGN (size, ZV_SECTOR) - ZV_LABEL_SIZE;
}

#endif /* ZV_FORMAT_H */
