/*
 * compress.h: inline compression of volume data blocks (compress.c).
 *
 * A volume's property (dr_compress in its dataset record) is an
 * algorithm in the low byte and, for zstd, a level in the next; a block
 * pointer's bp_comp names only the algorithm (the level does not matter
 * to a reader).  docs/format.md has the layout of a compressed block.
 */
#ifndef ZV_COMPRESS_H
#define ZV_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Algorithms (bp_comp, and the property's low byte). */
enum zv_comp_alg {
  ZV_COMP_OFF = 0,        /* stored as written */
  ZV_COMP_LZ4 = 1,
  ZV_COMP_ZSTD = 2,
  ZV_COMP_NALGS
};

/* The property: (level << 8) | alg.  0 is off (every record written
 * before the property existed says 0, and those volumes were never
 * compressed). */
#define ZV_COMP_PROP(alg, level) ((uint32_t) (alg) | (uint32_t) (level) << 8)
#define ZV_COMP_PROP_ALG(p)   ((p) & 0xffu)
#define ZV_COMP_PROP_LEVEL(p) ((p) >> 8 & 0xffu)
#define ZV_COMP_ZSTD_DEFAULT_LEVEL 3u
#define ZV_COMP_ZSTD_MAX_LEVEL     19u
#define ZV_COMP_DEFAULT ZV_COMP_PROP (ZV_COMP_LZ4, 0)

/* Bytes of the header in front of a compressed block's payload: the
 * payload's length, little-endian (the block is padded to ZV_SECTOR). */
#define ZV_COMP_HDR 4u

/* Is p a property this build writes (alg known, level in range)? */
bool zv_comp_prop_valid (uint32_t p);
/* "off", "lz4", "zstd", "zstd-N" <-> the property; parse: 0 or -EINVAL. */
int zv_comp_prop_parse (const char *s, uint32_t *p);
void zv_comp_prop_name (uint32_t p, char *buf, size_t len);

/*
 * Compress the lsize bytes of src with property p into dst (room for
 * lsize bytes).  Returns the bytes to store (a multiple of ZV_SECTOR,
 * header and zero padding included), or 0 when the block is to be
 * stored as it is: the property is off, the sample says the data will
 * not compress (zv_comp_predict), or it saved less than an eighth.
 */
uint32_t zv_comp_compress (uint32_t p, const void *src, uint32_t lsize,
                           void *dst);
/* The same for a block whose writer asked the early abort already
 * (zv_comp_refuses said no): the sample is not taken again. */
uint32_t zv_comp_compress_asked (uint32_t p, const void *src,
                                 uint32_t lsize, void *dst);
/*
 * Decompress a verified block of psize bytes (algorithm alg) into dst,
 * which must come out exactly lsize bytes.  0, or -EIO when the header,
 * the payload or the size is not what a writer stores (the message,
 * naming 'what', says which); never writes past dst's lsize bytes.
 */
int zv_comp_decompress (unsigned alg, const void *src, uint32_t psize,
                        void *dst, uint32_t lsize, const char *what);

/* The early abort: does a sample of the block look incompressible? */
bool zv_comp_predict_incompressible (const void *src, uint32_t len);
/*
 * The early abort asked by the block's writer, while the data is in its
 * cache (dmu.c): would zv_comp_compress with property p refuse src at
 * once?  The sync then stores the block as it is and counts it with
 * zv_comp_count_refused, as zv_comp_compress would have.
 */
bool zv_comp_refuses (uint32_t p, const void *src, uint32_t lsize);
void zv_comp_count_refused (void);

/* Counters of the compressor (all threads), for the kstat file. */
typedef struct zv_comp_stats {
  uint64_t cs_tried;          /* blocks handed to zv_comp_compress */
  uint64_t cs_aborted;        /* of them, refused by the sample */
  uint64_t cs_kept;           /* compressed, but saved too little */
  uint64_t cs_compressed;     /* stored compressed */
} zv_comp_stats_t;
void zv_comp_stats (zv_comp_stats_t *out);

/* The early abort on or off (tests and measurements). */
void zv_comp_set_predict (bool on);

#endif /* ZV_COMPRESS_H */
