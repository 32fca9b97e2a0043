/*
 * test_tunable.c: unit tests for the registry of tunables (core/tunable.c)
 * and for the modules reading what it sets.
 *
 * Every test ends by resetting every tunable to its default, so the tests
 * do not depend on each other's order.  The tables hold no boolean yet,
 * so booleans are tested through an entry of the test's own.
 */
#include <config.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zv_util.h"
#include "tunable.h"
#include "txg.h"
#include "zil.h"
#include "dbuf.h"
#include "zvol.h"

/* Set name=value, expecting r; returns the message. */
static const char *
t_set (const char *name, const char *value, int r)
{
  static char err[256];

  err[0] = '\0';
  assert_int_equal (zv_tunable_set (name, value, err, sizeof err), r);
  if (r == 0)
    assert_string_equal (err, "");
  else
    assert_true (err[0] != '\0');
  return err;
}

/* The current value of a key. */
static uint64_t
t_get (const char *name)
{
  const zv_tunable_t *tn = zv_tunable_lookup (name);

  assert_non_null (tn);
  return zv_tunable_get (tn);
}

/* Message m mentions s. */
static void
t_says (const char *m, const char *s)
{
  if (strstr (m, s) == NULL)
    fail_msg ("message \"%s\" does not mention \"%s\"", m, s);
}

static int
t_reset (void **state)
{
  (void) state;
  zv_tunable_reset_all ();
  return 0;
}

/* The tables are well formed, and every variable is at its default. */
static int
t_is_default (const zv_tunable_t *tn, void *arg)
{
  unsigned *n = arg;

  if (zv_tunable_get (tn) != tn->tn_default) {
    print_message ("%s is not at its default\n", tn->tn_name);
    (*n)++;
  }
  return 0;
}

static void
test_tables (void **state)
{
  unsigned n = 0;

  (void) state;
  assert_int_equal (zv_tunable_check (stderr), 0);
  assert_int_equal (zv_tunable_iter (t_is_default, &n), 0);
  assert_int_equal (n, 0);
  /* Each module's own knobs are found by name. */
  assert_string_equal (zv_tunable_lookup ("txg_timeout")->tn_module, "txg");
  assert_string_equal (zv_tunable_lookup ("sync")->tn_module, "zil");
  assert_string_equal (zv_tunable_lookup ("cache_size")->tn_module, "dbuf");
  assert_string_equal (zv_tunable_lookup ("dev_ring_entries")->tn_module,
                       "dev");
}

static void
test_set_in_range (void **state)
{
  (void) state;
  t_set ("txg_timeout", "30", 0);
  assert_int_equal (t_get ("txg_timeout"), 30);
  t_set ("txg_timeout", "1", 0);
  t_set ("txg_timeout", "3600", 0);       /* both ends are allowed */
  assert_int_equal (t_get ("txg_timeout"), 3600);

  t_set ("dirty_max", "64M", 0);
  assert_int_equal (t_get ("dirty_max"), 64ull << 20);
  t_set ("dirty_max", "2g", 0);
  assert_int_equal (t_get ("dirty_max"), 2ull << 30);
  t_set ("dirty_max", "1GiB", 0);
  assert_int_equal (t_get ("dirty_max"), 1ull << 30);
  t_set ("dirty_max", "2048KB", 0);
  assert_int_equal (t_get ("dirty_max"), 2ull << 20);
  t_set ("dirty_max", "1048576", 0);
  assert_int_equal (t_get ("dirty_max"), 1ull << 20);
  t_set ("dirty_max", "1T", 0);
  assert_int_equal (t_get ("dirty_max"), 1ull << 40);
  /* Auto: 0 or the word, outside the range. */
  t_set ("dirty_max", "0", 0);
  assert_int_equal (t_get ("dirty_max"), 0);
  t_set ("dirty_max", "64M", 0);
  t_set ("dirty_max", "auto", 0);
  assert_int_equal (t_get ("dirty_max"), 0);

  t_set ("dirty_sync_percent", "35%", 0);
  assert_int_equal (t_get ("dirty_sync_percent"), 35);
  t_set ("zil_itx_ring_shift", "4", 0);
  assert_int_equal (zv_zil_itx_ring_shift, 4);

  /* By number. */
  assert_int_equal (zv_tunable_set_value (zv_tunable_lookup ("delay_max"),
                                          5000000, NULL, 0), 0);
  assert_int_equal (t_get ("delay_max"), 5000000);
}

static void
test_out_of_range (void **state)
{
  const char *m;

  (void) state;
  t_set ("txg_timeout", "7", 0);
  m = t_set ("txg_timeout", "0", -ERANGE);
  t_says (m, "txg_timeout=0");
  t_says (m, "1 to 3600 s");
  t_set ("txg_timeout", "3601", -ERANGE);
  assert_int_equal (t_get ("txg_timeout"), 7);

  t_set ("dirty_max", "64M", 0);
  m = t_set ("dirty_max", "512K", -ERANGE);
  t_says (m, "dirty_max=512K");
  t_says (m, "1M to 1T bytes");
  t_says (m, "0 (auto)");
  t_set ("dirty_max", "2T", -ERANGE);
  /* Overflow, of the number or of its suffix. */
  t_set ("dirty_max", "99999999999999999999", -ERANGE);
  t_set ("dirty_max", "17179869184E", -ERANGE);
  assert_int_equal (t_get ("dirty_max"), 64ull << 20);

  m = t_set ("zil_itx_ring_shift", "25", -ERANGE);
  t_says (m, "2 to 24 log2");
  assert_int_equal (zv_zil_itx_ring_shift, 18);

  /* The min/max pairs cannot cross. */
  t_set ("zio_async_write_min_active", "11", -ERANGE);
  t_set ("zio_async_write_max_active", "9", -ERANGE);
  t_set ("zio_async_write_active_max_dirty_percent", "50", -ERANGE);

  /* By number: an unsigned variable never sees a value it cannot hold. */
  assert_int_equal (zv_tunable_set_value (zv_tunable_lookup ("txg_timeout"),
                                          (1ull << 32) + 5, NULL, 0),
                    -ERANGE);
  assert_int_equal (t_get ("txg_timeout"), 7);
}

static void
test_bad_syntax (void **state)
{
  static const char *const bad[] = {
    "", "abc", "-1", "+5", " 5", "5 ", "5x", "1.5", "0x10", "5s", NULL
  };
  const char *m;

  (void) state;
  t_set ("txg_timeout", "9", 0);
  for (unsigned i = 0; bad[i] != NULL; i++)
    t_set ("txg_timeout", bad[i], -EINVAL);
  m = t_set ("txg_timeout", "abc", -EINVAL);
  t_says (m, "txg_timeout=abc");
  t_says (m, "seconds");
  assert_int_equal (t_get ("txg_timeout"), 9);

  /* Suffixes are for sizes only; sizes take no other letters. */
  t_set ("dev_ring_entries", "1K", -EINVAL);
  t_set ("dirty_max", "1Q", -EINVAL);
  t_set ("dirty_max", "1MM", -EINVAL);
  t_set ("dirty_max", "1.5G", -EINVAL);
  m = t_set ("cache_size", "lots", -EINVAL);
  t_says (m, "cache_size=lots");
  t_says (m, "or auto");
  /* "auto" only where 0 means it. */
  t_set ("txg_timeout", "auto", -EINVAL);
  t_set ("dirty_sync_percent", "%", -EINVAL);
}

static void
test_unknown (void **state)
{
  const char *m;

  (void) state;
  assert_null (zv_tunable_lookup ("no_such_tunable"));
  assert_null (zv_tunable_lookup ("TXG_TIMEOUT"));
  m = t_set ("no_such_tunable", "1", -ENOENT);
  t_says (m, "no_such_tunable");
  t_set ("", "1", -ENOENT);
}

static void
test_bool (void **state)
{
  static bool flag;
  static const zv_tunable_t tn = {
    .tn_name = "test_flag", .tn_module = "test",
    ZV_TUNABLE_VAR_BOOL (flag), .tn_default = 0,
    .tn_when = ZV_TUNABLE_LIVE, .tn_reader = "this test",
    .tn_desc = "A flag.",
  };
  static const char *const yes[] = { "true", "TRUE", "yes", "on", "1", NULL };
  static const char *const no[] = { "false", "No", "off", "0", NULL };
  char err[128], buf[16];

  (void) state;
  for (unsigned i = 0; yes[i] != NULL; i++) {
    flag = false;
    assert_int_equal (zv_tunable_set_entry (&tn, yes[i], err, sizeof err), 0);
    assert_true (flag);
  }
  for (unsigned i = 0; no[i] != NULL; i++) {
    flag = true;
    assert_int_equal (zv_tunable_set_entry (&tn, no[i], err, sizeof err), 0);
    assert_false (flag);
  }
  flag = true;
  assert_int_equal (zv_tunable_set_entry (&tn, "maybe", err, sizeof err),
                    -EINVAL);
  t_says (err, "test_flag=maybe");
  t_says (err, "true or false");
  assert_int_equal (zv_tunable_set_entry (&tn, "2", err, sizeof err),
                    -EINVAL);
  assert_true (flag);
  assert_int_equal (zv_tunable_set_value (&tn, 2, err, sizeof err), -ERANGE);
  assert_true (flag);
  assert_int_equal (zv_tunable_get (&tn), 1);
  zv_tunable_format (&tn, 0, buf, sizeof buf);
  assert_string_equal (buf, "false");
}

static void
test_enum (void **state)
{
  zv_zil_tunables_t zt;
  const char *m;
  char buf[32];

  (void) state;
  t_set ("sync", "always", 0);
  t_set ("logbias", "throughput", 0);
  t_set ("flush", "txg", 0);
  zv_zil_tunables_default (&zt);
  assert_int_equal (zt.zt_sync, ZV_SYNC_ALWAYS);
  assert_int_equal (zt.zt_logbias, ZV_LOGBIAS_THROUGHPUT);
  assert_true (zt.zt_legacy_txg_commit);

  t_set ("sync", "disabled", 0);
  zv_zil_tunables_default (&zt);
  assert_int_equal (zt.zt_sync, ZV_SYNC_DISABLED);

  m = t_set ("sync", "sometimes", -EINVAL);
  t_says (m, "sync=sometimes");
  t_says (m, "standard, always or disabled");
  t_set ("sync", "Always", -EINVAL);     /* names are exact */
  t_set ("sync", "1", -EINVAL);          /* and not numbers */
  m = t_set ("flush", "", -EINVAL);
  t_says (m, "log or txg");
  assert_int_equal (t_get ("sync"), ZV_SYNC_DISABLED);

  assert_int_equal (zv_tunable_set_value (zv_tunable_lookup ("sync"), 3,
                                          NULL, 0), -ERANGE);
  assert_int_equal (zv_tunable_set_value (zv_tunable_lookup ("sync"),
                                          ZV_SYNC_STANDARD, NULL, 0), 0);
  zv_tunable_format (zv_tunable_lookup ("logbias"), ZV_LOGBIAS_LATENCY, buf,
                     sizeof buf);
  assert_string_equal (buf, "latency");
}

static void
test_reset (void **state)
{
  unsigned n = 0;

  (void) state;
  t_set ("txg_timeout", "60", 0);
  t_set ("dirty_max", "128M", 0);
  t_set ("sync", "always", 0);
  t_set ("zil_itx_ring_shift", "6", 0);
  t_set ("buf_cache_max", "0", 0);
  t_set ("alloc_slop_min", "1G", 0);
  zv_tunable_reset_all ();
  assert_int_equal (zv_tunable_iter (t_is_default, &n), 0);
  assert_int_equal (n, 0);
  assert_int_equal (t_get ("txg_timeout"), 5);
  assert_int_equal (t_get ("dirty_max"), 0);
  assert_int_equal (zv_zil_itx_ring_shift, 18);
}

/* zv_txg_tunables_default, which a pool's configuration starts from,
 * takes its values from the table's variables. */
/* A created pool's device: the volume, a quarter more and 128 MiB, and
 * with the txg pipeline's room twice dirty_max as set now; 1 MiB
 * rounding. */
static void
test_create_size (void **state)
{
  const uint64_t M = 1ull << 20;

  (void) state;
  t_set ("dirty_max", "64M", 0);
  assert_int_equal (zvol_pool_create_size (1024 * M, false), 1408 * M);
  assert_int_equal (zvol_pool_create_size (1024 * M, true), 1536 * M);
  assert_int_equal (zvol_pool_create_size (1, false), 129 * M);
  /* No wrap to a small size for a volume no device can hold. */
  assert_true (zvol_pool_create_size (UINT64_MAX - M, true) > (1ull << 62));
  t_set ("dirty_max", "1G", 0);
  assert_int_equal (zvol_pool_create_size (1024 * M, true),
                    (1408 + 2048) * M);
}

static void
test_txg_default_reflects (void **state)
{
  zv_txg_tunables_t tt;

  (void) state;
  zv_txg_tunables_default (&tt);
  assert_int_equal (tt.tt_timeout_ms, 5000);
  assert_int_equal (tt.tt_dirty_sync_pct, 20);
  assert_int_equal (tt.tt_delay_min_dirty_pct, 60);
  assert_int_equal (tt.tt_delay_scale_ns, 500000);
  assert_int_equal (tt.tt_delay_max_ns, 100000000);
  assert_true (tt.tt_dirty_max > 0 && tt.tt_dirty_max <= 4ull << 30);

  t_set ("txg_timeout", "2", 0);
  t_set ("dirty_max", "256M", 0);
  t_set ("dirty_sync_percent", "40", 0);
  t_set ("delay_min_dirty_percent", "70", 0);
  t_set ("delay_scale", "250000", 0);
  t_set ("delay_max", "50000000", 0);
  zv_txg_tunables_default (&tt);
  assert_int_equal (tt.tt_timeout_ms, 2000);
  assert_int_equal (tt.tt_dirty_max, 256ull << 20);
  assert_int_equal (tt.tt_dirty_sync_pct, 40);
  assert_int_equal (tt.tt_delay_min_dirty_pct, 70);
  assert_int_equal (tt.tt_delay_scale_ns, 250000);
  assert_int_equal (tt.tt_delay_max_ns, 50000000);

  /* Auto dirty_max follows its cap. */
  t_set ("dirty_max", "auto", 0);
  t_set ("dirty_max_max", "2M", 0);
  zv_txg_tunables_default (&tt);
  assert_true (tt.tt_dirty_max > 0 && tt.tt_dirty_max <= 2ull << 20);
}

static void
test_module_defaults (void **state)
{
  zv_zil_tunables_t zt;

  (void) state;
  zv_zil_tunables_default (&zt);
  assert_int_equal (zt.zt_sync, ZV_SYNC_STANDARD);
  assert_int_equal (zt.zt_logbias, ZV_LOGBIAS_LATENCY);
  assert_false (zt.zt_legacy_txg_commit);
  assert_int_equal (zt.zt_immediate_write_sz, 32768);
  assert_int_equal (zt.zt_max_copied, 7680);
  assert_int_equal (zt.zt_commit_timeout_pct, 30);
  t_set ("zil_max_copied", "4K", 0);
  t_set ("zil_commit_timeout_percent", "25", 0);
  zv_zil_tunables_default (&zt);
  assert_int_equal (zt.zt_max_copied, 4096);
  assert_int_equal (zt.zt_commit_timeout_pct, 25);

  /* auto: half of memory (test_mem checks the figure) */
  assert_true (zv_dbuf_cache_limit_default () > 0);
  t_set ("cache_size", "16M", 0);
  assert_int_equal (zv_dbuf_cache_limit_default (), 16ull << 20);
  t_set ("cache_size", "4M", -ERANGE);
  assert_int_equal (zv_dbuf_cache_limit_default (), 16ull << 20);
}

static void
test_format (void **state)
{
  const zv_tunable_t *tn = zv_tunable_lookup ("dirty_max");
  char buf[32];

  (void) state;
  zv_tunable_format (tn, 0, buf, sizeof buf);
  assert_string_equal (buf, "auto");
  zv_tunable_format (tn, 1ull << 20, buf, sizeof buf);
  assert_string_equal (buf, "1M");
  zv_tunable_format (tn, 3ull << 30, buf, sizeof buf);
  assert_string_equal (buf, "3G");
  zv_tunable_format (tn, 1536ull << 10, buf, sizeof buf);
  assert_string_equal (buf, "1536K");
  zv_tunable_format (tn, 7680, buf, sizeof buf);
  assert_string_equal (buf, "7680");
  zv_tunable_format (tn, 1ull << 60, buf, sizeof buf);
  assert_string_equal (buf, "1E");
  zv_tunable_format (zv_tunable_lookup ("txg_timeout"), 1024, buf,
                     sizeof buf);
  assert_string_equal (buf, "1024");        /* no suffix but for sizes */
  assert_string_equal (zv_tunable_unit_name (ZV_TUNABLE_UNIT_PCT), "%");
}

/* Text printed by fn, as one string. */
static char *
t_print (void (*fn) (FILE *))
{
  char *buf = NULL;
  size_t len = 0;
  FILE *fp = open_memstream (&buf, &len);

  assert_non_null (fp);
  fn (fp);
  assert_int_equal (fclose (fp), 0);
  assert_non_null (buf);
  return buf;
}

/* A copy of s with every run of white space one space (undoes the
 * wrapping of --help). */
static char *
t_squash (const char *s)
{
  char *out = malloc (strlen (s) + 1), *o = out;

  assert_non_null (out);
  for (; *s != '\0'; s++) {
    bool white = *s == ' ' || *s == '\n';
    if (!white)
      *o++ = *s;
    else if (o > out && o[-1] != ' ')
      *o++ = ' ';
  }
  *o = '\0';
  return out;
}

/* Every key has a line in --help and an item in the POD. */
static int
t_documented (const zv_tunable_t *tn, void *arg)
{
  char **docs = arg;
  char key[128];

  snprintf (key, sizeof key, "\n%s=", tn->tn_name);
  if (strncmp (docs[0], key + 1, strlen (key + 1)) != 0
      && strstr (docs[0], key) == NULL)
    fail_msg ("%s missing from --help", tn->tn_name);
  snprintf (key, sizeof key, "=item B<%s=>", tn->tn_name);
  if (strstr (docs[1], key) == NULL)
    fail_msg ("%s missing from the POD", tn->tn_name);
  return 0;
}

static void
test_docs (void **state)
{
  char *docs[2] = { t_print (zv_tunable_print_help),
                    t_print (zv_tunable_print_pod) };
  unsigned over = 0, back = 0;
  char *flat;

  (void) state;
  assert_int_equal (zv_tunable_iter (t_documented, docs), 0);
  t_says (docs[0], "txg_timeout=<SECONDS>");
  t_says (docs[0], "sync=standard|always|disabled");
  flat = t_squash (docs[0]);
  t_says (flat, "(default auto; 1M to 1T bytes, or 0 (auto))");
  t_says (flat, "(default 5; 1 to 3600 s)");
  free (flat);
  /* Lines fit a terminal, unless one word is longer. */
  for (char *line = docs[0], *nl; *line != '\0'; line = nl + 1) {
    nl = strchr (line, '\n');
    assert_non_null (nl);
    if (nl - line > 79 && memchr (line, ' ', (size_t) (nl - line)) != NULL)
      fail_msg ("help line too long: %.*s", (int) (nl - line), line);
  }
  t_says (docs[1], "=head2 Transaction groups");
  t_says (docs[1], "=item B<sync=>B<standard>|B<always>|B<disabled>");
  t_says (docs[1], "Default C<5>; from C<1> to C<3600> s.");
  for (char *p = docs[1]; (p = strstr (p, "\n=over")) != NULL; p++)
    over++;
  for (char *p = docs[1]; (p = strstr (p, "\n=back")) != NULL; p++)
    back++;
  assert_true (over > 0);
  assert_int_equal (over, back);
  free (docs[0]);
  free (docs[1]);
}

int
main (void)
{
  const struct CMUnitTest tests[] = {
    cmocka_unit_test_teardown (test_tables, t_reset),
    cmocka_unit_test_teardown (test_set_in_range, t_reset),
    cmocka_unit_test_teardown (test_out_of_range, t_reset),
    cmocka_unit_test_teardown (test_bad_syntax, t_reset),
    cmocka_unit_test_teardown (test_unknown, t_reset),
    cmocka_unit_test_teardown (test_bool, t_reset),
    cmocka_unit_test_teardown (test_enum, t_reset),
    cmocka_unit_test_teardown (test_reset, t_reset),
    cmocka_unit_test_teardown (test_txg_default_reflects, t_reset),
    cmocka_unit_test_teardown (test_create_size, t_reset),
    cmocka_unit_test_teardown (test_module_defaults, t_reset),
    cmocka_unit_test_teardown (test_format, t_reset),
    cmocka_unit_test_teardown (test_docs, t_reset),
  };

  zv_set_log_level (ZV_LOG_ERROR + 1);
  return cmocka_run_group_tests (tests, NULL, NULL);
}
