/*
 * tunable.h: the registry of tunables.
 *
 * Every knob of the engine is a variable of the module that reads it,
 * described by one entry of that module's table, which sits at the end of
 * the module's .c file (as OpenZFS keeps ZFS_MODULE_PARAM there).  An
 * entry names the key the user writes (txg_timeout=5), the variable it
 * sets, its type, default, range and unit, who reads it and when, and a
 * one-line description.  The tables are the one source of the plugin's
 * key=value parsing, of its --help text and of the man page's list of
 * tunables, so none of them can drift from the code.
 *
 * Values are set before a pool opens (nbdkit's config phase): the
 * registry takes no lock, and a module reads its variables when the
 * entry's tn_when says (most when a pool opens, so a later change only
 * affects the next pool).  A default that depends on the machine is 0,
 * "auto" (ZV_TUNABLE_F_AUTO), and the reader computes it.
 */
#ifndef ZV_TUNABLE_H
#define ZV_TUNABLE_H

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The C type of the variable an entry sets. */
enum zv_tunable_type {
  ZV_TUNABLE_TYPE_U64 = 0,    /* uint64_t */
  ZV_TUNABLE_TYPE_UINT,       /* unsigned */
  ZV_TUNABLE_TYPE_BOOL,       /* bool */
  ZV_TUNABLE_TYPE_ENUM,       /* unsigned: an index into tn_names */
};

/* What a number counts.  Only sizes take K/M/G/T/P/E suffixes. */
enum zv_tunable_unit {
  ZV_TUNABLE_UNIT_NONE = 0,   /* bool, enum */
  ZV_TUNABLE_UNIT_BYTES,
  ZV_TUNABLE_UNIT_NS,
  ZV_TUNABLE_UNIT_MS,
  ZV_TUNABLE_UNIT_S,
  ZV_TUNABLE_UNIT_PCT,        /* a trailing % is accepted */
  ZV_TUNABLE_UNIT_COUNT,
  ZV_TUNABLE_UNIT_LOG2,       /* the value is a shift: 2^value */
};

/* When the reader looks at the variable, so when a change takes effect. */
enum zv_tunable_when {
  ZV_TUNABLE_AT_CREATE = 0,   /* when a pool is created */
  ZV_TUNABLE_AT_OPEN,         /* when a pool is created or imported */
  ZV_TUNABLE_AT_THREAD,       /* when a thread first does I/O */
  ZV_TUNABLE_AT_SYNC,         /* at every txg sync */
  ZV_TUNABLE_LIVE,            /* on every use */
};

/* 0 is accepted besides the range and means "the reader chooses". */
#define ZV_TUNABLE_F_AUTO 0x1u

typedef struct zv_tunable {
  const char *tn_name;        /* the key, as the user writes it */
  const char *tn_module;      /* the module whose variable it is */
  enum zv_tunable_type tn_type;
  union {
    uint64_t *tn_u64;
    unsigned *tn_uint;
    bool *tn_bool;
  } tn_var;
  uint64_t tn_default;        /* enum: an index; bool: 0 or 1 */
  uint64_t tn_min, tn_max;    /* inclusive; enum: 0, names - 1 */
  enum zv_tunable_unit tn_unit;
  unsigned tn_flags;          /* ZV_TUNABLE_F_* */
  const char *const *tn_names; /* enum: value names, NULL-terminated */
  enum zv_tunable_when tn_when;
  const char *tn_reader;      /* what reads it, for the documentation */
  const char *tn_desc;        /* one line, a sentence */
  const char *tn_zfs;         /* the OpenZFS tunable it mirrors, or NULL */
} zv_tunable_t;

/* Designators for the variable, so the compiler checks its type. */
#define ZV_TUNABLE_VAR_U64(v) \
  .tn_type = ZV_TUNABLE_TYPE_U64, .tn_var.tn_u64 = &(v)
#define ZV_TUNABLE_VAR_UINT(v) \
  .tn_type = ZV_TUNABLE_TYPE_UINT, .tn_var.tn_uint = &(v)
#define ZV_TUNABLE_VAR_BOOL(v) \
  .tn_type = ZV_TUNABLE_TYPE_BOOL, .tn_var.tn_bool = &(v), \
  .tn_min = 0, .tn_max = 1
/* 'names' is a NULL-terminated array of n names. */
#define ZV_TUNABLE_VAR_ENUM(v, names, n) \
  .tn_type = ZV_TUNABLE_TYPE_ENUM, .tn_var.tn_uint = &(v), \
  .tn_names = (names), .tn_min = 0, .tn_max = (n) - 1
/* Ends every table. */
#define ZV_TUNABLE_END { .tn_name = NULL }

/* The entry of a key, or NULL. */
const zv_tunable_t *zv_tunable_lookup (const char *name);

/*
 * Set a tunable from the text the user wrote.  Sizes take K, M, G, T, P
 * and E suffixes (powers of 1024, either case, optionally followed by B
 * or iB); percentages a trailing %; booleans true/false, yes/no, on/off,
 * 1/0; enumerations one of their names.  Numbers are decimal.  Returns 0,
 * or -ENOENT (unknown key), -EINVAL (not a value of that type) or -ERANGE
 * (outside the range) with the variable unchanged and a message naming
 * the key, the value, the range and the unit in err.
 */
int zv_tunable_set (const char *name, const char *value, char *err,
                    size_t errlen);
int zv_tunable_set_entry (const zv_tunable_t *tn, const char *value,
                          char *err, size_t errlen);
/* The same from a number (an index for an enumeration). */
int zv_tunable_set_value (const zv_tunable_t *tn, uint64_t v, char *err,
                          size_t errlen);

/* The variable's current value. */
uint64_t zv_tunable_get (const zv_tunable_t *tn);

/* Every entry, table by table; stops at and returns fn's first nonzero. */
typedef int (*zv_tunable_iter_fn) (const zv_tunable_t *tn, void *arg);
int zv_tunable_iter (zv_tunable_iter_fn fn, void *arg);

/* Every variable back to its default (tests). */
void zv_tunable_reset_all (void);

/* A value as the user would write it: 64M, 5, standard, true, auto. */
void zv_tunable_format (const zv_tunable_t *tn, uint64_t v, char *buf,
                        size_t len);
const char *zv_tunable_unit_name (enum zv_tunable_unit unit);
const char *zv_tunable_when_text (enum zv_tunable_when when);

/*
 * The generated documentation: the --help lines ("key=<VALUE>  what it
 * does (default; range)") and the man page's POD list, one =head2 per
 * module.
 */
void zv_tunable_print_help (FILE *fp);
void zv_tunable_print_pod (FILE *fp);

/*
 * Check the tables: names present, well formed and unique, descriptions
 * and readers not empty, min <= default <= max (or an auto 0), enum names
 * matching the range.  Prints each problem to fp (may be NULL); returns
 * how many.
 */
unsigned zv_tunable_check (FILE *fp);

#endif /* ZV_TUNABLE_H */
