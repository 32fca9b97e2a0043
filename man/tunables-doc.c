/*
 * tunables-doc.c: the documentation of the engine's tunables, printed
 * from their tables (core/tunable.h), so that it cannot drift from them.
 *
 *   tunables-doc --pod    the man page's list of tunables, in POD; the
 *                         build puts it where nbdkit-zvol-plugin.pod has
 *                         its @ZVOL_TUNABLES@ line
 *   tunables-doc --help   the lines the plugin's --help shows
 *   tunables-doc [--check]
 *                         check the tables only (make check runs it so)
 *
 * Every mode checks the tables first and fails on a problem, so a bad
 * entry breaks the build of the man page, not just the test: a default
 * outside its range, a key defined twice, an empty description.  It also
 * checks that each variable starts at its entry's default, which only a
 * fresh process can see: the variable's initialiser and the table's
 * default are written separately and must agree.
 */
#include <config.h>

#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tunable.h"

/* A variable whose initial value is not its table default. */
static int
td_check_initial (const zv_tunable_t *tn, void *arg)
{
  unsigned *bad = arg;
  uint64_t v = zv_tunable_get (tn);

  if (v != tn->tn_default) {
    fprintf (stderr, "%s: the variable starts at %" PRIu64 ", the table's "
             "default is %" PRIu64 "\n", tn->tn_name, v, tn->tn_default);
    (*bad)++;
  }
  return 0;
}

/* Count the entries. */
static int
td_count (const zv_tunable_t *tn, void *arg)
{
  (void) tn;
  (*(unsigned *) arg)++;
  return 0;
}

int
main (int argc, char **argv)
{
  const char *mode = argc > 1 ? argv[1] : "--check";
  bool check = strcmp (mode, "--check") == 0;
  unsigned bad = zv_tunable_check (stderr), entries = 0;

  (void) zv_tunable_iter (td_check_initial, &bad);
  (void) zv_tunable_iter (td_count, &entries);
  /* As a test (make check): a case per entry, in the suite's count. */
  if (check)
    printf ("%u passed, %u failed\n", entries > bad ? entries - bad : 0,
            bad);
  if (bad != 0) {
    fprintf (stderr, "%s: %u problem%s in the tunables' tables\n", argv[0],
             bad, bad == 1 ? "" : "s");
    return 1;
  }
  if (strcmp (mode, "--pod") == 0)
    zv_tunable_print_pod (stdout);
  else if (strcmp (mode, "--help") == 0)
    zv_tunable_print_help (stdout);
  else if (!check) {
    fprintf (stderr, "usage: %s [--pod | --help | --check]\n", argv[0]);
    return 2;
  }
  return fflush (stdout) == 0 && !ferror (stdout) ? 0 : 1;
}
