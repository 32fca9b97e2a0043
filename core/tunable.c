/*
 * tunable.c: the registry of tunables (see tunable.h).
 *
 * Theory.  Each module owns its knobs: the variables are the module's,
 * and the table describing them is defined at the end of the module's
 * .c file, next to the code that reads them, so adding a knob touches one
 * file and the documentation follows by itself.  This file only knows the
 * list of tables (tunable_modules), in the order the documentation shows
 * them, and does the work common to every entry: lookup by name, parsing
 * and range checks, formatting, the generated --help and POD text, and
 * the consistency check the build runs over every table.
 *
 * The registry sits beside the lower modules, not above them: it refers
 * to their tables by extern declarations only and includes none of their
 * headers, so no module depends on it except through tunable.h's types,
 * and a table is plain data (a module's code never calls in here).
 *
 * Values are kept in the variables themselves, nothing is cached here:
 * a reader sees what the last set stored.  Setting is meant for the
 * single-threaded configuration phase and takes no lock; an entry read
 * "on every use" may be changed later only by a caller that accepts a
 * racy, word-sized update.
 *
 * Lookup is a linear scan: there are a few dozen keys and they are
 * looked up once each, at start-up.
 */
#include <config.h>

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tunable.h"

/* The modules' tables, each defined at the end of its module's .c. */
extern const zv_tunable_t zv_txg_tunable_table[];
extern const zv_tunable_t zv_zil_tunable_table[];
extern const zv_tunable_t zv_dbuf_tunable_table[];
extern const zv_tunable_t zv_pool_tunable_table[];
extern const zv_tunable_t zv_psync_tunable_table[];
extern const zv_tunable_t zv_freeq_tunable_table[];
extern const zv_tunable_t zv_zvol_tunable_table[];
extern const zv_tunable_t zv_zio_tunable_table[];
extern const zv_tunable_t zv_alloc_tunable_table[];
extern const zv_tunable_t zv_dev_tunable_table[];
extern const zv_tunable_t zv_dev_rados_tunable_table[];
extern const zv_tunable_t zv_dev_mirror_tunable_table[];
extern const zv_tunable_t zv_resilver_tunable_table[];
extern const zv_tunable_t zv_util_tunable_table[];
extern const zv_tunable_t zv_mem_tunable_table[];
extern const zv_tunable_t zv_ctl_tunable_table[];
extern const zv_tunable_t zv_check_tunable_table[];
extern const zv_tunable_t zv_scan_tunable_table[];
extern const zv_tunable_t zv_compq_tunable_table[];
extern const zv_tunable_t zv_dmu_tunable_table[];

typedef struct tunable_module {
  const char *tm_module;      /* every entry's tn_module */
  const char *tm_title;       /* the man page's heading */
  const zv_tunable_t *tm_table;
} tunable_module_t;

/* In the order of the documentation: the knobs users reach for first. */
static const tunable_module_t tunable_modules[] = {
  { "txg", "Transaction groups and the write throttle",
    zv_txg_tunable_table },
  { "zil", "The intent log", zv_zil_tunable_table },
  { "dbuf", "The buffer cache", zv_dbuf_tunable_table },
  { "dmu", "Objects and direct writes", zv_dmu_tunable_table },
  { "pool", "The pool", zv_pool_tunable_table },
  { "psync", "The txg sync", zv_psync_tunable_table },
  { "freeq", "Background frees of destroyed volumes and snapshots",
    zv_freeq_tunable_table },
  { "zvol", "The volume", zv_zvol_tunable_table },
  { "zio", "Block I/O", zv_zio_tunable_table },
  { "alloc", "Space allocation", zv_alloc_tunable_table },
  { "dev", "Devices", zv_dev_tunable_table },
  { "dev_rados", "RADOS devices", zv_dev_rados_tunable_table },
  { "dev_mirror", "Mirrors", zv_dev_mirror_tunable_table },
  { "resilver", "Resilvering a replaced side of a mirror",
    zv_resilver_tunable_table },
  { "util", "Block buffers", zv_util_tunable_table },
  { "mem", "Memory", zv_mem_tunable_table },
  { "ctl", "The control socket", zv_ctl_tunable_table },
  { "check", "The live check", zv_check_tunable_table },
  { "scan", "The scrub", zv_scan_tunable_table },
  { "compq", "Compression threads", zv_compq_tunable_table },
};
#define TUNABLE_NMODULES (sizeof tunable_modules / sizeof tunable_modules[0])

/* Width of the key column of --help, and of a whole line. */
#define TUNABLE_HELP_KEYW 30
#define TUNABLE_HELP_WIDTH 79

/* printf into err, if the caller gave room for a message. */
static void __attribute__ ((format (printf, 3, 4)))
tunable_err (char *err, size_t errlen, const char *fmt, ...)
{
  va_list ap;

  if (err == NULL || errlen == 0)
    return;
  va_start (ap, fmt);
  vsnprintf (err, errlen, fmt, ap);
  va_end (ap);
}

/* ---- lookup and iteration ---- */

int
zv_tunable_iter (zv_tunable_iter_fn fn, void *arg)
{
  for (size_t m = 0; m < TUNABLE_NMODULES; m++)
    for (const zv_tunable_t *tn = tunable_modules[m].tm_table;
         tn->tn_name != NULL; tn++) {
      int r = fn (tn, arg);
      if (r != 0)
        return r;
    }
  return 0;
}

const zv_tunable_t *
zv_tunable_lookup (const char *name)
{
  for (size_t m = 0; m < TUNABLE_NMODULES; m++)
    for (const zv_tunable_t *tn = tunable_modules[m].tm_table;
         tn->tn_name != NULL; tn++)
      if (strcmp (tn->tn_name, name) == 0)
        return tn;
  return NULL;
}

/* ---- values ---- */

uint64_t
zv_tunable_get (const zv_tunable_t *tn)
{
  switch (tn->tn_type) {
  case ZV_TUNABLE_TYPE_U64:
    return *tn->tn_var.tn_u64;
  case ZV_TUNABLE_TYPE_UINT:
  case ZV_TUNABLE_TYPE_ENUM:
    return *tn->tn_var.tn_uint;
  case ZV_TUNABLE_TYPE_BOOL:
    return *tn->tn_var.tn_bool;
  }
  abort ();                     /* every type is handled above */
}

/* Store a value already checked against the range.  Relaxed atomic
 * stores: a live tunable's reader on another thread may load it with
 * __atomic_load_n meanwhile (the resilver's pause, the mirror's read
 * side), and must see either value, whole. */
static void
tunable_store (const zv_tunable_t *tn, uint64_t v)
{
  switch (tn->tn_type) {
  case ZV_TUNABLE_TYPE_U64:
    __atomic_store_n (tn->tn_var.tn_u64, v, __ATOMIC_RELAXED);
    return;
  case ZV_TUNABLE_TYPE_UINT:
  case ZV_TUNABLE_TYPE_ENUM:
    __atomic_store_n (tn->tn_var.tn_uint, (unsigned) v, __ATOMIC_RELAXED);
    return;
  case ZV_TUNABLE_TYPE_BOOL:
    __atomic_store_n (tn->tn_var.tn_bool, v != 0, __ATOMIC_RELAXED);
    return;
  }
  abort ();                     /* every type is handled above */
}

void
zv_tunable_reset_all (void)
{
  for (size_t m = 0; m < TUNABLE_NMODULES; m++)
    for (const zv_tunable_t *tn = tunable_modules[m].tm_table;
         tn->tn_name != NULL; tn++)
      tunable_store (tn, tn->tn_default);
}

const char *
zv_tunable_unit_name (enum zv_tunable_unit unit)
{
  switch (unit) {
  case ZV_TUNABLE_UNIT_NONE: return "";
  case ZV_TUNABLE_UNIT_BYTES: return "bytes";
  case ZV_TUNABLE_UNIT_NS: return "ns";
  case ZV_TUNABLE_UNIT_MS: return "ms";
  case ZV_TUNABLE_UNIT_S: return "s";
  case ZV_TUNABLE_UNIT_PCT: return "%";
  case ZV_TUNABLE_UNIT_COUNT: return "";
  case ZV_TUNABLE_UNIT_LOG2: return "log2";
  }
  return "?";
}

const char *
zv_tunable_when_text (enum zv_tunable_when when)
{
  switch (when) {
  case ZV_TUNABLE_AT_CREATE: return "when a pool is created";
  case ZV_TUNABLE_AT_OPEN: return "when a pool is created or imported";
  case ZV_TUNABLE_AT_THREAD: return "when a thread first does I/O";
  case ZV_TUNABLE_AT_SYNC: return "at every txg sync";
  case ZV_TUNABLE_LIVE: return "on every use";
  }
  return "?";
}

/* What --help shows after the '=' of a numeric key. */
static const char *
tunable_placeholder (enum zv_tunable_unit unit)
{
  switch (unit) {
  case ZV_TUNABLE_UNIT_BYTES: return "SIZE";
  case ZV_TUNABLE_UNIT_NS: return "NS";
  case ZV_TUNABLE_UNIT_MS: return "MS";
  case ZV_TUNABLE_UNIT_S: return "SECONDS";
  case ZV_TUNABLE_UNIT_PCT: return "PERCENT";
  case ZV_TUNABLE_UNIT_COUNT: return "N";
  case ZV_TUNABLE_UNIT_LOG2: return "SHIFT";
  case ZV_TUNABLE_UNIT_NONE: break;
  }
  return "VALUE";
}

/* What the unit's number is, for a parse error. */
static const char *
tunable_expected (enum zv_tunable_unit unit)
{
  switch (unit) {
  case ZV_TUNABLE_UNIT_BYTES: return "a size (examples: 7680, 16K, 4G)";
  case ZV_TUNABLE_UNIT_NS: return "a whole number of nanoseconds";
  case ZV_TUNABLE_UNIT_MS: return "a whole number of milliseconds";
  case ZV_TUNABLE_UNIT_S: return "a whole number of seconds";
  case ZV_TUNABLE_UNIT_PCT: return "a percentage (a whole number)";
  case ZV_TUNABLE_UNIT_LOG2: return "a whole number (a power of two's "
                                    "exponent)";
  case ZV_TUNABLE_UNIT_COUNT:
  case ZV_TUNABLE_UNIT_NONE: break;
  }
  return "a whole number";
}

void
zv_tunable_format (const zv_tunable_t *tn, uint64_t v, char *buf, size_t len)
{
  static const char suffix[] = "KMGTPE";

  if (len == 0)
    return;
  if ((tn->tn_flags & ZV_TUNABLE_F_AUTO) && v == 0) {
    snprintf (buf, len, "auto");
    return;
  }
  switch (tn->tn_type) {
  case ZV_TUNABLE_TYPE_BOOL:
    snprintf (buf, len, "%s", v ? "true" : "false");
    return;
  case ZV_TUNABLE_TYPE_ENUM:
    if (v <= tn->tn_max)
      snprintf (buf, len, "%s", tn->tn_names[v]);
    else
      snprintf (buf, len, "%" PRIu64, v);
    return;
  case ZV_TUNABLE_TYPE_U64:
  case ZV_TUNABLE_TYPE_UINT:
    break;
  }
  if (tn->tn_unit == ZV_TUNABLE_UNIT_BYTES && v != 0) {
    /* The largest suffix that is exact: 1M, not 1024K; 7680 stays. */
    int s = -1;
    while (s + 1 < (int) sizeof suffix - 1
           && v % (1ull << (10 * (s + 2))) == 0)
      s++;
    if (s >= 0) {
      snprintf (buf, len, "%" PRIu64 "%c", v >> (10 * (s + 1)), suffix[s]);
      return;
    }
  }
  snprintf (buf, len, "%" PRIu64, v);
}

/* The allowed values, for a message: "1M to 1T bytes, or 0 (auto)". */
static void
tunable_range_text (const zv_tunable_t *tn, char *buf, size_t len)
{
  char lo[32], hi[32];
  const char *unit = zv_tunable_unit_name (tn->tn_unit);

  zv_tunable_format (tn, tn->tn_min, lo, sizeof lo);
  zv_tunable_format (tn, tn->tn_max, hi, sizeof hi);
  snprintf (buf, len, "%s to %s%s%s%s", lo, hi, *unit ? " " : "", unit,
            (tn->tn_flags & ZV_TUNABLE_F_AUTO) ? ", or 0 (auto)" : "");
}

/* An enumeration's names joined: "standard, always or disabled". */
static void
tunable_names_text (const zv_tunable_t *tn, const char *sep,
                    const char *last_sep, char *buf, size_t len)
{
  size_t off = 0;

  if (len == 0)
    return;
  buf[0] = '\0';
  for (uint64_t i = 0; i <= tn->tn_max && off < len; i++) {
    const char *s = i == 0 ? "" : i == tn->tn_max ? last_sep : sep;
    int n = snprintf (buf + off, len - off, "%s%s", s, tn->tn_names[i]);
    if (n < 0)
      break;
    off += (size_t) n;
  }
}

/* Store v (shown as 'text') if it is allowed. */
static int
tunable_set_checked (const zv_tunable_t *tn, uint64_t v, const char *text,
                     char *err, size_t errlen)
{
  char range[128];

  if ((tn->tn_flags & ZV_TUNABLE_F_AUTO) && v == 0) {
    tunable_store (tn, 0);
    return 0;
  }
  if (v < tn->tn_min || v > tn->tn_max) {
    if (tn->tn_type == ZV_TUNABLE_TYPE_ENUM) {
      tunable_names_text (tn, ", ", " or ", range, sizeof range);
      tunable_err (err, errlen, "%s=%s is out of range: use %s",
                   tn->tn_name, text, range);
    }
    else {
      tunable_range_text (tn, range, sizeof range);
      tunable_err (err, errlen, "%s=%s is out of range: it must be %s",
                   tn->tn_name, text, range);
    }
    return -ERANGE;
  }
  tunable_store (tn, v);
  return 0;
}

int
zv_tunable_set_value (const zv_tunable_t *tn, uint64_t v, char *err,
                      size_t errlen)
{
  char text[32];

  snprintf (text, sizeof text, "%" PRIu64, v);
  return tunable_set_checked (tn, v, text, err, errlen);
}

/*
 * A decimal number with, for sizes, a K..E suffix (and an optional B or
 * iB after it) and, for percentages, an optional %.  No sign, no spaces,
 * no hex: what a user writes for a size or a count.
 */
static int
tunable_parse_number (const zv_tunable_t *tn, const char *s, uint64_t *out)
{
  static const char suffix[] = "KMGTPE";
  const char *rest;
  char *end;
  uint64_t v;

  if (*s < '0' || *s > '9')
    return -EINVAL;
  errno = 0;
  v = strtoull (s, &end, 10);
  if (errno == ERANGE)
    return -ERANGE;
  rest = end;
  if (tn->tn_unit == ZV_TUNABLE_UNIT_BYTES && *rest != '\0') {
    char c = *rest >= 'a' && *rest <= 'z' ? (char) (*rest - 'a' + 'A')
      : *rest;
    const char *sp = strchr (suffix, c);
    unsigned shift;

    if (sp == NULL)
      return -EINVAL;
    shift = 10 * (unsigned) (sp - suffix + 1);
    if (v > (UINT64_MAX >> shift))
      return -ERANGE;
    v <<= shift;
    rest++;
    if (strcasecmp (rest, "b") == 0 || strcasecmp (rest, "ib") == 0)
      rest += strlen (rest);
  }
  else if (tn->tn_unit == ZV_TUNABLE_UNIT_PCT && *rest == '%')
    rest++;
  if (*rest != '\0')
    return -EINVAL;
  *out = v;
  return 0;
}

/* true/false and the usual synonyms (as nbdkit_parse_bool). */
static int
tunable_parse_bool (const char *s, uint64_t *out)
{
  static const char *const yes[] = { "1", "true", "yes", "on", NULL };
  static const char *const no[] = { "0", "false", "no", "off", NULL };

  for (unsigned i = 0; yes[i] != NULL; i++)
    if (strcasecmp (s, yes[i]) == 0) {
      *out = 1;
      return 0;
    }
  for (unsigned i = 0; no[i] != NULL; i++)
    if (strcasecmp (s, no[i]) == 0) {
      *out = 0;
      return 0;
    }
  return -EINVAL;
}

int
zv_tunable_set_entry (const zv_tunable_t *tn, const char *value, char *err,
                      size_t errlen)
{
  char range[128];
  uint64_t v = 0;
  int r;

  switch (tn->tn_type) {
  case ZV_TUNABLE_TYPE_BOOL:
    if (tunable_parse_bool (value, &v) < 0) {
      tunable_err (err, errlen, "%s=%s: expected true or false",
                   tn->tn_name, value);
      return -EINVAL;
    }
    break;
  case ZV_TUNABLE_TYPE_ENUM:
    for (v = 0; v <= tn->tn_max; v++)
      if (strcmp (value, tn->tn_names[v]) == 0)
        break;
    if (v > tn->tn_max) {
      tunable_names_text (tn, ", ", " or ", range, sizeof range);
      tunable_err (err, errlen, "%s=%s: use %s", tn->tn_name, value, range);
      return -EINVAL;
    }
    break;
  case ZV_TUNABLE_TYPE_U64:
  case ZV_TUNABLE_TYPE_UINT:
    if ((tn->tn_flags & ZV_TUNABLE_F_AUTO) && strcmp (value, "auto") == 0)
      break;
    r = tunable_parse_number (tn, value, &v);
    if (r == -ERANGE) {
      tunable_range_text (tn, range, sizeof range);
      tunable_err (err, errlen, "%s=%s is out of range: it must be %s",
                   tn->tn_name, value, range);
      return -ERANGE;
    }
    if (r < 0) {
      tunable_err (err, errlen, "%s=%s: expected %s%s", tn->tn_name, value,
                   tunable_expected (tn->tn_unit),
                   (tn->tn_flags & ZV_TUNABLE_F_AUTO) ? " or auto" : "");
      return -EINVAL;
    }
    break;
  }
  return tunable_set_checked (tn, v, value, err, errlen);
}

int
zv_tunable_set (const char *name, const char *value, char *err,
                size_t errlen)
{
  const zv_tunable_t *tn = zv_tunable_lookup (name);

  if (tn == NULL) {
    tunable_err (err, errlen, "unknown tunable '%s'", name);
    return -ENOENT;
  }
  return zv_tunable_set_entry (tn, value, err, errlen);
}

/* ---- generated documentation ---- */

/* "key=<SIZE>", "sync=standard|always|disabled", "flag=true|false". */
static void
tunable_key_text (const zv_tunable_t *tn, char *buf, size_t len)
{
  size_t off;

  switch (tn->tn_type) {
  case ZV_TUNABLE_TYPE_BOOL:
    snprintf (buf, len, "%s=true|false", tn->tn_name);
    return;
  case ZV_TUNABLE_TYPE_ENUM:
    snprintf (buf, len, "%s=", tn->tn_name);
    off = strlen (buf);
    tunable_names_text (tn, "|", "|", buf + off, len - off);
    return;
  case ZV_TUNABLE_TYPE_U64:
  case ZV_TUNABLE_TYPE_UINT:
    break;
  }
  snprintf (buf, len, "%s=<%s>", tn->tn_name,
            tunable_placeholder (tn->tn_unit));
}

/* Write 'text' from column 'col' (at least 'indent'), wrapped at the
 * line width with continuation lines indented to 'indent'. */
static void
tunable_wrap (FILE *fp, const char *text, unsigned col, unsigned indent)
{
  const char *p = text;
  bool first = true;

  while (*p != '\0') {
    size_t w = strcspn (p, " ");

    if (!first && col + 1 + w > TUNABLE_HELP_WIDTH) {
      fprintf (fp, "\n%*s", (int) indent, "");
      col = indent;
    }
    else if (!first) {
      fputc (' ', fp);
      col++;
    }
    fwrite (p, 1, w, fp);
    col += (unsigned) w;
    p += w;
    while (*p == ' ')
      p++;
    first = false;
  }
  fputc ('\n', fp);
}

static int
tunable_help_one (const zv_tunable_t *tn, void *arg)
{
  FILE *fp = arg;
  char key[256], def[32], range[128], text[512];
  size_t klen;

  tunable_key_text (tn, key, sizeof key);
  zv_tunable_format (tn, tn->tn_default, def, sizeof def);
  if (tn->tn_type == ZV_TUNABLE_TYPE_BOOL
      || tn->tn_type == ZV_TUNABLE_TYPE_ENUM)
    snprintf (text, sizeof text, "%s (default %s)", tn->tn_desc, def);
  else {
    tunable_range_text (tn, range, sizeof range);
    snprintf (text, sizeof text, "%s (default %s; %s)", tn->tn_desc, def,
              range);
  }
  /* The key, then the text from its column, or below it when the key
   * is too long to leave a space before that column. */
  fputs (key, fp);
  klen = strlen (key);
  if (klen >= TUNABLE_HELP_KEYW)
    fprintf (fp, "\n%*s", TUNABLE_HELP_KEYW, "");
  else
    fprintf (fp, "%*s", (int) (TUNABLE_HELP_KEYW - klen), "");
  tunable_wrap (fp, text, TUNABLE_HELP_KEYW, TUNABLE_HELP_KEYW);
  return 0;
}

void
zv_tunable_print_help (FILE *fp)
{
  (void) zv_tunable_iter (tunable_help_one, fp);
}

/* Text into POD: only < and > could start or end a formatting code. */
static void
tunable_pod_text (FILE *fp, const char *s)
{
  for (; *s != '\0'; s++) {
    if (*s == '<')
      fputs ("E<lt>", fp);
    else if (*s == '>')
      fputs ("E<gt>", fp);
    else
      fputc (*s, fp);
  }
}

static void
tunable_pod_item (FILE *fp, const zv_tunable_t *tn)
{
  char def[32], lo[32], hi[32];
  const char *unit = zv_tunable_unit_name (tn->tn_unit);

  fprintf (fp, "=item B<%s=>", tn->tn_name);
  switch (tn->tn_type) {
  case ZV_TUNABLE_TYPE_BOOL:
    fputs ("B<true>|B<false>", fp);
    break;
  case ZV_TUNABLE_TYPE_ENUM:
    for (uint64_t i = 0; i <= tn->tn_max; i++)
      fprintf (fp, "%sB<%s>", i ? "|" : "", tn->tn_names[i]);
    break;
  case ZV_TUNABLE_TYPE_U64:
  case ZV_TUNABLE_TYPE_UINT:
    fprintf (fp, "I<%s>", tunable_placeholder (tn->tn_unit));
    break;
  }
  fputs ("\n\n", fp);
  tunable_pod_text (fp, tn->tn_desc);
  fputs ("\n\n", fp);

  zv_tunable_format (tn, tn->tn_default, def, sizeof def);
  zv_tunable_format (tn, tn->tn_min, lo, sizeof lo);
  zv_tunable_format (tn, tn->tn_max, hi, sizeof hi);
  if (tn->tn_type == ZV_TUNABLE_TYPE_BOOL
      || tn->tn_type == ZV_TUNABLE_TYPE_ENUM)
    fprintf (fp, "Default C<%s>.", def);
  else
    fprintf (fp, "Default C<%s>; from C<%s> to C<%s>%s%s%s.", def, lo, hi,
             *unit ? " " : "", *unit ? unit : "",
             (tn->tn_flags & ZV_TUNABLE_F_AUTO) ? ", or C<0> or C<auto>"
             : "");
  fputs ("  Read by ", fp);
  tunable_pod_text (fp, tn->tn_reader);
  fprintf (fp, " %s.", zv_tunable_when_text (tn->tn_when));
  if (tn->tn_zfs != NULL)
    fprintf (fp, "  OpenZFS: C<%s>.", tn->tn_zfs);
  fputs ("\n\n", fp);
}

void
zv_tunable_print_pod (FILE *fp)
{
  for (size_t m = 0; m < TUNABLE_NMODULES; m++) {
    const tunable_module_t *tm = &tunable_modules[m];

    if (tm->tm_table[0].tn_name == NULL)
      continue;
    fprintf (fp, "=head2 %s (%s)\n\n=over 4\n\n", tm->tm_title,
             tm->tm_module);
    for (const zv_tunable_t *tn = tm->tm_table; tn->tn_name != NULL; tn++)
      tunable_pod_item (fp, tn);
    fputs ("=back\n\n", fp);
  }
}

/* ---- consistency of the tables ---- */

/* One problem: print it, count it. */
static void __attribute__ ((format (printf, 3, 4)))
tunable_problem (FILE *fp, unsigned *n, const char *fmt, ...)
{
  va_list ap;

  (*n)++;
  if (fp == NULL)
    return;
  va_start (ap, fmt);
  vfprintf (fp, fmt, ap);
  va_end (ap);
  fputc ('\n', fp);
}

/* A key is lower case letters, digits and '_', from a letter. */
static bool
tunable_name_ok (const char *s)
{
  if (s == NULL || *s < 'a' || *s > 'z')
    return false;
  for (; *s != '\0'; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
      return false;
  return true;
}

/* One sentence: not empty, on one line, ending with a full stop. */
static bool
tunable_sentence_ok (const char *s)
{
  size_t len = s ? strlen (s) : 0;

  return len > 1 && strchr (s, '\n') == NULL && s[len - 1] == '.';
}

static void
tunable_check_enum (FILE *fp, unsigned *n, const zv_tunable_t *tn)
{
  uint64_t count = 0;

  if (tn->tn_names == NULL) {
    tunable_problem (fp, n, "%s: an enumeration without names", tn->tn_name);
    return;
  }
  while (tn->tn_names[count] != NULL)
    count++;
  if (tn->tn_min != 0 || count != tn->tn_max + 1)
    tunable_problem (fp, n, "%s: %" PRIu64 " names for the range %" PRIu64
                     "..%" PRIu64, tn->tn_name, count, tn->tn_min,
                     tn->tn_max);
  for (uint64_t i = 0; i < count; i++) {
    if (!tunable_name_ok (tn->tn_names[i]))
      tunable_problem (fp, n, "%s: bad value name '%s'", tn->tn_name,
                       tn->tn_names[i]);
    for (uint64_t j = 0; j < i; j++)
      if (strcmp (tn->tn_names[i], tn->tn_names[j]) == 0)
        tunable_problem (fp, n, "%s: value name '%s' twice", tn->tn_name,
                         tn->tn_names[i]);
  }
}

static void
tunable_check_entry (FILE *fp, unsigned *n, const tunable_module_t *tm,
                     const zv_tunable_t *tn)
{
  bool number = tn->tn_type == ZV_TUNABLE_TYPE_U64
    || tn->tn_type == ZV_TUNABLE_TYPE_UINT;
  bool is_auto = (tn->tn_flags & ZV_TUNABLE_F_AUTO) != 0;

  if (!tunable_name_ok (tn->tn_name))
    tunable_problem (fp, n, "'%s': a key is lower case letters, digits "
                     "and _", tn->tn_name);
  if (tn->tn_module == NULL || strcmp (tn->tn_module, tm->tm_module) != 0)
    tunable_problem (fp, n, "%s: module '%s' in the table of '%s'",
                     tn->tn_name, tn->tn_module ? tn->tn_module : "(none)",
                     tm->tm_module);
  if (!tunable_sentence_ok (tn->tn_desc))
    tunable_problem (fp, n, "%s: the description must be one line, a "
                     "sentence ending in '.'", tn->tn_name);
  if (tn->tn_reader == NULL || *tn->tn_reader == '\0')
    tunable_problem (fp, n, "%s: no reader named", tn->tn_name);
  if (tn->tn_zfs != NULL && !tunable_name_ok (tn->tn_zfs))
    tunable_problem (fp, n, "%s: bad OpenZFS name '%s'", tn->tn_name,
                     tn->tn_zfs);
  if (tn->tn_var.tn_u64 == NULL)
    tunable_problem (fp, n, "%s: no variable", tn->tn_name);
  if (number == (tn->tn_unit == ZV_TUNABLE_UNIT_NONE))
    tunable_problem (fp, n, "%s: numbers have a unit, booleans and "
                     "enumerations none", tn->tn_name);
  if (is_auto && (!number || tn->tn_min == 0))
    tunable_problem (fp, n, "%s: auto is 0 outside a numeric range",
                     tn->tn_name);
  if (tn->tn_min > tn->tn_max)
    tunable_problem (fp, n, "%s: min %" PRIu64 " > max %" PRIu64,
                     tn->tn_name, tn->tn_min, tn->tn_max);
  if (tn->tn_type != ZV_TUNABLE_TYPE_U64 && tn->tn_max > UINT_MAX)
    tunable_problem (fp, n, "%s: max %" PRIu64 " does not fit the variable",
                     tn->tn_name, tn->tn_max);
  if (!(is_auto && tn->tn_default == 0)
      && (tn->tn_default < tn->tn_min || tn->tn_default > tn->tn_max))
    tunable_problem (fp, n, "%s: default %" PRIu64 " outside %" PRIu64
                     "..%" PRIu64, tn->tn_name, tn->tn_default, tn->tn_min,
                     tn->tn_max);
  if (tn->tn_type == ZV_TUNABLE_TYPE_BOOL && tn->tn_max != 1)
    tunable_problem (fp, n, "%s: a boolean ranges over 0..1", tn->tn_name);
  if (tn->tn_type == ZV_TUNABLE_TYPE_ENUM)
    tunable_check_enum (fp, n, tn);
  else if (tn->tn_names != NULL)
    tunable_problem (fp, n, "%s: value names on a non-enumeration",
                     tn->tn_name);
  if (tn->tn_when > ZV_TUNABLE_LIVE)
    tunable_problem (fp, n, "%s: bad tn_when %u", tn->tn_name,
                     (unsigned) tn->tn_when);
}

unsigned
zv_tunable_check (FILE *fp)
{
  unsigned n = 0;

  for (size_t m = 0; m < TUNABLE_NMODULES; m++) {
    const tunable_module_t *tm = &tunable_modules[m];

    for (const zv_tunable_t *tn = tm->tm_table; tn->tn_name != NULL; tn++) {
      tunable_check_entry (fp, &n, tm, tn);
      /* Unique over every table: the first entry of a name wins lookup. */
      for (size_t m2 = 0; m2 <= m; m2++)
        for (const zv_tunable_t *t2 = tunable_modules[m2].tm_table;
             t2 != tn && t2->tn_name != NULL; t2++)
          if (strcmp (t2->tn_name, tn->tn_name) == 0)
            tunable_problem (fp, &n, "%s: defined twice (%s and %s)",
                             tn->tn_name, t2->tn_module, tn->tn_module);
    }
  }
  return n;
}
