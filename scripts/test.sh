#!/bin/bash
# test.sh: install, build and run the whole test suite (make check).
#
#   scripts/test.sh
#   CONFIGURE_ARGS=--enable-sanitizers scripts/test.sh   # ASan + UBSan
#   CONFIGURE_ARGS=--enable-tsan scripts/test.sh         # TSan (unit tests)
#
# CONFIGURE_ARGS (split on spaces) goes to ./configure; when it differs
# from the last run the tree is reconfigured and rebuilt from clean.
# Exits with the status of make check; on failure prints the test log.
# The last two lines count the test programs, then the test cases (cmocka
# cases and integration checks; scripts/count-tests.sh says how):
#   test: programs: N passed, N failed, N skipped
#   test: N passed, N failed, N skipped
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"

read -r -a cargs <<< "${CONFIGURE_ARGS:-}"
bash scripts/setup.sh "${cargs[@]}"

echo "test: make -j2 check"
# Logs left by an earlier run must not be mistaken for this one's: the
# summary, and each test's log and result (a test that does not run this
# time then counts as failed, not as its last result).
rm -f test-suite.log tests/test-suite.log
for log in $(make -s --no-print-directory print-test-logs 2>/dev/null || :); do
    rm -f "$log" "${log%.log}.trs"
done
rc=0
make -j2 check || rc=$?

if [ "$rc" -ne 0 ]; then
    # A non-recursive automake tree keeps the summary log at the top.
    for log in test-suite.log tests/test-suite.log; do
        if [ -f "$log" ]; then
            echo "test: ---- $log ----"
            cat "$log"
        fi
    done
    echo "test: make check failed (exit $rc)"
else
    echo "test: make check passed"
fi
bash scripts/count-tests.sh "$top" test || :
exit "$rc"
