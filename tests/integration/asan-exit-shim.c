/*
 * asan-exit-shim.c: preloaded into nbdkit, with the ASan runtime, only in
 * --enable-sanitizers test runs.
 *
 * nbdkit is not built with ASan, so the runtime is preloaded into it.  In
 * that setup nbdkit's exit (any nbdkit, the file plugin too) can block
 * for ever in p11-kit's library destructor, in freelocale(), on glibc's
 * locale lock.  The locale is freed only because the process is exiting,
 * so skipping the free loses nothing; it lets the tests see nbdkit's real
 * exit status.
 */
#include <locale.h>

void
freelocale (locale_t l)
{
  (void) l;
}
