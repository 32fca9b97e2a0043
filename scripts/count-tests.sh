#!/bin/bash
# count-tests.sh: count the test cases of a "make check" run from its logs.
#
#   scripts/count-tests.sh [BUILDDIR [PREFIX]]
#
# BUILDDIR is the top of the tree make check ran in (default: .), PREFIX
# the word the lines start with (default: test).  The tests are the ones
# the tree's Makefile runs (make print-test-logs); for each, its .trs says
# how the program ended and its .log what it counted:
#
#   - a cmocka program: the cases of its final report, "[  PASSED  ] N
#     test(s).", "[  SKIPPED ] N test(s), listed below:" and " N FAILED
#     TEST(S)" (failures and errors), or without that line the "[  ERROR
#     ] NAME" lines (a setup that failed);
#   - an integration script: its last "N passed, N failed" line
#     (zv_summary in tests/integration/functions.sh); a skipped script
#     (exit 77) is one skipped case, with the "SKIP: ..." reason it printed;
#   - a program that crashed or was killed before its final report: the
#     cases it finished, plus one failed case for the one it died in;
#   - a program with no count at all (not run, not built, a hang killed by
#     a timeout, a script that died early) is one failed case, and so is a
#     program that failed though it counted no failed case (a sanitizer
#     report at exit, say).
#
# It prints a line for each program that failed or skipped something
# (with the failed and skipped cases, and why each skip happened), then
#
#   PREFIX: programs: N passed, N failed, N skipped
#   PREFIX: N passed, N failed, N skipped
#
# the second line last.  Exit status: 0 when no case failed, 1 otherwise,
# 2 when there is nothing to count.
set -uo pipefail

dir=${1:-.}
prefix=${2:-test}

if [ ! -d "$dir" ]; then
    echo "$prefix: count-tests: $dir is not a directory" >&2
    exit 2
fi
cd "$dir" || exit 2

# The tests' logs: what the Makefile runs, or failing that (a tree whose
# Makefile predates print-test-logs) every result file present.
if ! logs=$(make -s --no-print-directory print-test-logs 2>/dev/null) ||
   [ -z "$logs" ]; then
    logs=$(find . -name '*.trs' -printf '%P\n' 2>/dev/null | sort |
           sed 's/\.trs$/.log/')
fi
if [ -z "$logs" ]; then
    echo "$prefix: count-tests: no tests found in $dir" >&2
    exit 2
fi

# Read one log; print "COUNT KIND PASSED FAILED SKIPPED" and then the
# cases worth naming: "FAIL NAME", "SKIP NAME<tab>WHY", "SKIPWHY WHY" (a
# skipped script's reason), "CHECK LINE" (a script's failed checks).
count_log () {
    awk '
    function num(s) { gsub(/[^0-9]/, "", s); return s + 0 }
    BEGIN { havep = 0; p = 0; s = 0; f = -1; run = 0; ok = 0
            nfail = 0; nerr = 0; nskip = 0; sp = ""; sf = ""; cur = "" }
    # cmocka: the final report (written to stderr, so whole lines, though
    # a buffered stdout may put them after part of another line).
    match($0, /\[  PASSED  \] [0-9]+ test\(s\)\./) {
        havep = 1; p += num(substr($0, RSTART, RLENGTH)) }
    match($0, /\[  SKIPPED \] [0-9]+ test\(s\), listed below:/) {
        s += num(substr($0, RSTART, RLENGTH)) }
    match($0, / [0-9]+ FAILED TEST\(S\)/) {
        f = (f < 0 ? 0 : f) + num(substr($0, RSTART, RLENGTH)) }
    # cmocka: one line per case.
    match($0, /\[ RUN      \] [^ ]+/) {
        run = 1; cur = substr($0, RSTART + 13, RLENGTH - 13) }
    /\[       OK \] / { ok++ }
    /^skipped: / || / skipped$/ {
        w = $0; sub(/^skipped: /, "", w); why[cur] = w }
    match($0, /\[  SKIPPED \] [A-Za-z_][A-Za-z_0-9]*$/) {
        n = substr($0, RSTART + 13, RLENGTH - 13)
        if (!(n in skipped)) { skipped[n] = 1; order[nskip++] = n } }
    match($0, /\[  FAILED  \] [A-Za-z_][A-Za-z_0-9]*$/) {
        n = substr($0, RSTART + 13, RLENGTH - 13)
        if (!(n in failed)) { failed[n] = 1; forder[nfail++] = n } }
    match($0, /\[  ERROR   \] [A-Za-z_][A-Za-z_0-9]*$/) {
        n = substr($0, RSTART + 13, RLENGTH - 13)
        if (!(n in failed)) { failed[n] = 1; forder[nfail++] = n }
        nerr++ }
    # Integration scripts.
    /^[0-9]+ passed, [0-9]+ failed$/ { sp = $1; sf = $3 }
    /^SKIP: / { swhy = substr($0, 7) }
    # A C program that skips whole (exit 77) says "PROG: skipped: WHY".
    match($0, /^[A-Za-z_][A-Za-z_0-9]*: skipped: /) {
        swhy = substr($0, RLENGTH + 1) }
    /^FAIL: / { checks[ncheck++] = substr($0, 7) }
    END {
        if (havep)
            printf "COUNT cmocka %d %d %d\n", p, (f >= 0 ? f : nerr), s
        else if (run)
            printf "COUNT died %d %d %d\n", ok, nfail + 1, nskip
        else if (sp != "")
            printf "COUNT script %d %d 0\n", sp, sf
        else
            printf "COUNT none 0 0 0\n"
        for (i = 0; i < nfail; i++)
            printf "FAIL %s\n", forder[i]
        for (i = 0; i < nskip; i++)
            printf "SKIP %s\t%s\n", order[i],
                (order[i] in why) ? why[order[i]] : "(no reason given)"
        if (swhy != "")
            printf "SKIPWHY %s\n", swhy
        for (i = 0; i < ncheck && i < 5; i++)
            printf "CHECK %s\n", checks[i]
    }' "$1"
}

tp=0 tf=0 ts=0          # cases
pp=0 pf=0 ps=0          # programs
for log in $logs; do
    trs=${log%.log}.trs
    name=${log%.log}
    result=
    if [ -f "$trs" ]; then
        result=$(sed -n 's/^:test-result: *//p' "$trs" | head -n 1)
    fi
    case $result in
        PASS|XFAIL) pp=$((pp + 1)) ;;
        SKIP) ps=$((ps + 1)) ;;
        *) pf=$((pf + 1)) ;;
    esac

    kind=none p=0 f=0 s=0 notes=()
    if [ -f "$log" ]; then
        while IFS= read -r line; do
            case $line in
                COUNT\ *) read -r _ kind p f s <<<"$line" ;;
                FAIL\ *) notes+=("failed ${line#FAIL }") ;;
                SKIP\ *) w=${line#SKIP }
                         notes+=("skipped ${w%%$'\t'*}: ${w#*$'\t'}") ;;
                SKIPWHY\ *) notes+=("skipped: ${line#SKIPWHY }") ;;
                CHECK\ *) notes+=("failed check: ${line#CHECK }") ;;
            esac
        done < <(count_log "$log")
    fi

    why=
    if [ -z "$result" ]; then
        why="no result: it did not run"
        p=0 f=1 s=0
    elif [ "$result" = SKIP ] && [ "$kind" != cmocka ]; then
        p=0 f=0 s=1
        [ ${#notes[@]} -gt 0 ] || notes+=("skipped: (no reason given)")
    elif [ "$kind" = none ]; then
        why="no count in its log, result $result"
        f=1
    elif [ "$kind" = died ]; then
        why="died before its final report, result $result"
    fi
    if [ "$f" -eq 0 ] && [ "$result" != PASS ] && [ "$result" != SKIP ] &&
       [ "$result" != XFAIL ]; then
        why="result $result though no case failed"
        f=1
    fi
    tp=$((tp + p)) tf=$((tf + f)) ts=$((ts + s))

    if [ "$f" -gt 0 ] || [ "$s" -gt 0 ]; then
        echo "$prefix: $name: $p passed, $f failed, $s skipped${why:+ ($why)}"
        for n in ${notes[@]+"${notes[@]}"}; do
            echo "$prefix:   $n"
        done
    fi
done

echo "$prefix: programs: $pp passed, $pf failed, $ps skipped"
echo "$prefix: $tp passed, $tf failed, $ts skipped"
[ "$tf" -eq 0 ]
