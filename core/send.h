/*
 * send.h: send and receive of snapshots as a stream, and the changed
 * ranges between two snapshots (send.c has the theory; docs/format.md,
 * "Send streams", the wire format).
 */
#ifndef ZV_SEND_H
#define ZV_SEND_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <assert.h>

#include "format.h"

typedef struct zvol_pool zv_pool_t;

/* ---- the stream (little-endian, as format.h's structures) ---- */

#define ZV_STREAM_MAGIC   0x444e45534f565a00ull /* "\0ZVOSEND" */
/* Version 2: version 1 and WRITE_STORED records; both are received. */
#define ZV_STREAM_VERSION 2u
#define ZV_STREAM_VERSION_1 1u
#define ZV_STREAM_F_INCREMENTAL 0x1u
/* A WRITE record's payload at most (a multiple of every volblocksize). */
#define ZV_STREAM_MAX_WRITE (1u << 20)

typedef struct zv_stream_hdr {
  uint64_t sh_magic;
  uint32_t sh_version;
  uint32_t sh_flags;             /* ZV_STREAM_F_* */
  uint64_t sh_pool_guid;         /* the sending pool */
  uint64_t sh_to_id, sh_to_guid, sh_to_txg;       /* the snapshot sent */
  uint64_t sh_from_id, sh_from_guid, sh_from_txg; /* an incremental's base;
                                                     0 in a full stream */
  uint64_t sh_volsize;
  uint32_t sh_volblocksize;
  uint32_t sh_pad;
  uint64_t sh_creation_time;     /* the snapshot's, seconds */
  uint64_t sh_est_bytes;         /* WRITE payload the sender expects */
  char sh_volume[ZV_NAME_MAX];   /* names as sent, NUL-padded */
  char sh_snap[ZV_NAME_MAX];
  char sh_from_snap[ZV_NAME_MAX];
  uint64_t sh_reserved[25];
  zv_cksum_t sh_cksum;           /* XXH3-128 of the header, this field
                                    zeroed, seeded with the magic */
} zv_stream_hdr_t;
static_assert (sizeof (zv_stream_hdr_t) == 512, "stream header is 512 B");

enum zv_stream_rtype {
  ZV_SR_WRITE = 1,               /* length bytes of data follow */
  ZV_SR_FREE = 2,                /* the range reads as zeros */
  ZV_SR_END = 3,                 /* length: records before it; 16 bytes
                                    follow: the stream's checksum */
  /* Version 2: one volume block as the pool stores it, compressed:
   * length is the block size, flags the algorithm (compress.h) | the
   * stored size in 4 KiB units << 8, and that many bytes follow (the
   * stored block: docs/format.md, "Compressed blocks"). */
  ZV_SR_WRITE_STORED = 4,
};
#define ZV_SR_STORED_ALG(f)    ((f) & 0xffu)
#define ZV_SR_STORED_PSIZE(f)  (((f) >> 8 & 0xffu) * 4096u)

typedef struct zv_stream_rec {
  uint32_t sr_type;              /* zv_stream_rtype */
  uint32_t sr_flags;             /* 0 */
  uint64_t sr_seq;               /* its index, from 0 */
  uint64_t sr_offset, sr_length;
  zv_cksum_t sr_cksum;           /* of the record and its payload (this
                                    field zeroed), seeded zv_stream_seed */
} zv_stream_rec_t;
static_assert (sizeof (zv_stream_rec_t) == 48, "stream record is 48 B");

static inline uint64_t
zv_stream_seed (uint64_t to_guid, uint64_t seq)
{
  return to_guid ^ (seq + 1) * 0x9e3779b97f4a7c15ull;
}

/* ---- reading a stream: everything in it is hostile ---- */

/* Read up to len bytes: how many (fewer only at the stream's end, 0
 * there), or a negative errno. */
typedef int64_t (*zv_stream_read_fn) (void *arg, void *buf, size_t len);

typedef struct zv_stream_rd {
  zv_stream_read_fn rd_read;
  void *rd_arg;
  zv_stream_hdr_t rd_hdr;
  zv_cksum_stream_t *rd_sum;     /* every byte before the END record */
  zv_cksum_stream_t *rd_rsum;    /* the record being read */
  uint64_t rd_pos;               /* bytes read */
  uint64_t rd_seq;               /* records read */
  uint64_t rd_next_off;          /* the next record starts at or past it */
  bool rd_ended;
  uint8_t *rd_buf;               /* ZV_STREAM_MAX_WRITE */
  uint8_t *rd_dbuf;              /* a WRITE_STORED block, decompressed */
} zv_stream_rd_t;

/* Read and check the header: 0, or -EIO (logged) for anything that is
 * not a stream this version reads, or the reader's error. */
int zv_stream_rd_begin (zv_stream_rd_t *rd, zv_stream_read_fn fn, void *arg);
/* The next record: 1 (a WRITE, *data its payload, valid until the next
 * call, or a FREE; a WRITE_STORED, checked and decompressed, comes as
 * the WRITE of its block), 0 (the END: the whole stream verified), or -EIO
 * (logged: damaged, truncated, out of order...), or the reader's error. */
int zv_stream_rd_next (zv_stream_rd_t *rd, zv_stream_rec_t *rec,
                       const void **data);
void zv_stream_rd_end (zv_stream_rd_t *rd);

/* ---- the operations (zvol.h's zvol_send, zvol_receive, zvol_diff) ---- */

/* zvol_stream_io_t, field for field. */
typedef struct zv_stream_io {
  int sio_fd;
  int (*sio_write) (void *arg, const void *buf, size_t len);
  zv_stream_read_fn sio_read;
  void *sio_arg;
  void (*sio_progress) (void *arg, uint64_t done, uint64_t total);
  void *sio_progress_arg;
} zv_stream_io_t;

#define ZV_DIFF_WRITTEN 1u
#define ZV_DIFF_FREED   2u
typedef int (*zv_diff_fn) (void *arg, uint64_t off, uint64_t len,
                           unsigned kind);

int zv_send (zv_pool_t *p, const char *snap, const char *from,
             const zv_stream_io_t *io);
int zv_recv (zv_pool_t *p, const char *target, const zv_stream_io_t *io);
int zv_diff (zv_pool_t *p, const char *from, const char *to, zv_diff_fn fn,
             void *arg);
/* Read-write import: undo every receive that did not finish (a volume
 * whose record has ZV_DR_F_RECV_INCOMPLETE). */
void zv_recv_recover (zv_pool_t *p);

#endif /* ZV_SEND_H */
