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
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"

read -r -a cargs <<< "${CONFIGURE_ARGS:-}"
bash scripts/setup.sh "${cargs[@]}"

echo "test: make -j2 check"
# A log left by an earlier run must not be mistaken for this one's.
rm -f test-suite.log tests/test-suite.log
rc=0
make -j2 check || rc=$?

# count NAME: the "# NAME: N" line of automake's summary (0 if absent).
count () {
    local n
    n=$(sed -n "s/^# $1: *\([0-9][0-9]*\)\$/\1/p" test-suite.log | head -n 1)
    echo "${n:-0}"
}

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
if [ -f test-suite.log ]; then
    echo "test: $(count PASS) passed, $(( $(count FAIL) + $(count ERROR) + $(count XPASS) )) failed, $(count SKIP) skipped"
fi
exit "$rc"
