#!/usr/bin/env bash
# test-exports.sh: the engine's public face is core/zvol.h, and only it.
#
# - zvol.h is self-contained: it includes no other header of the engine,
#   and a file that includes nothing else compiles with -Werror.
# - libzvol.so exports exactly the functions zvol.h declares with
#   ZVOL_API (the version script and -fvisibility=hidden together), and
#   every one of them.
# - The plugin uses nothing of the engine but those functions: each
#   engine symbol its object file needs is a zvol_ one.

set -euo pipefail
source "$(dirname "$0")/functions.sh"

requires nm --version
requires cc --version
zv_setup

top=${ZVOL_TOP_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${ZVOL_TOP_BUILDDIR:-$top}
hdr=$top/core/zvol.h
lib=$build/core/.libs/libzvol.so
core=$build/core/.libs/libzvolcore.a
plugin_obj=$build/plugin/.libs/nbdkit_zvol_plugin_la-plugin.o
for f in "$hdr" "$lib" "$core" "$plugin_obj"; do
    [ -e "$f" ] || die "missing $f (build first)"
done

# 1. Self-contained.
if grep -n '^#include "' "$hdr"; then
    zv_fail "zvol.h includes another engine header"
else
    zv_pass "zvol.h includes no other engine header"
fi
printf '#include "zvol.h"\nint main (void) { zvol_pool_config_t pc; zvol_pool_config_init (&pc); return (int) pc.pc_ndevices; }\n' \
    > "$ZV_TMP/alone.c"
check "a file that includes only zvol.h compiles" \
    cc -std=gnu11 -Wall -Wextra -Werror -I"$top/core" -c "$ZV_TMP/alone.c" \
       -o "$ZV_TMP/alone.o"

# 2. The export list.  Declared: every identifier followed by " (" on a
# ZVOL_API declaration (the declarations may wrap, the name does not).
grep -v '^#define ZVOL_API' "$hdr" | tr '\n' ' ' | grep -o 'ZVOL_API [^;(]*(' | \
    sed -E 's/.*[ *]([a-z_0-9]+) *\($/\1/' | sort -u > "$ZV_TMP/declared"
nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBR]$/ {print $3}' | sort -u \
    > "$ZV_TMP/exported"
[ -s "$ZV_TMP/declared" ] || die "found no ZVOL_API declaration in zvol.h"
zv_log "$(wc -l < "$ZV_TMP/declared") functions declared, $(wc -l < "$ZV_TMP/exported") symbols exported"
if diff -u "$ZV_TMP/declared" "$ZV_TMP/exported"; then
    zv_pass "libzvol.so exports exactly what zvol.h declares"
else
    zv_fail "libzvol.so's exports differ from zvol.h's declarations (diff above)"
fi

# 3. The plugin needs nothing of the engine but the public API.
nm --defined-only -g "$core" | awk 'NF == 3 {print $3}' | sort -u \
    > "$ZV_TMP/engine"
nm -u "$plugin_obj" | awk '{print $NF}' | sort -u > "$ZV_TMP/plugin_needs"
comm -12 "$ZV_TMP/engine" "$ZV_TMP/plugin_needs" | grep -v '^zvol_' \
    > "$ZV_TMP/leaks" || true
if [ -s "$ZV_TMP/leaks" ]; then
    cat "$ZV_TMP/leaks"
    zv_fail "the plugin calls engine internals (listed above)"
else
    zv_pass "the plugin calls only zvol.h's functions of the engine"
fi

zv_summary
