#!/bin/bash
# setup.sh: install what nbdkit-zvol needs on Debian 12, then build it.
#
#   scripts/setup.sh [CONFIGURE-ARGS...]
#
# 1. Installs the build and test packages with apt-get (as root), skipping
#    apt entirely when every package is already installed, so a rerun is
#    fast and works without network.
# 2. Runs autoreconf when configure is missing or older than configure.ac.
# 3. Runs ./configure with CONFIGURE-ARGS when the tree is not configured
#    yet or was configured with other arguments (then "make clean", so no
#    object built with other flags survives, e.g. --enable-sanitizers).
# 4. make -j2.
#
# Safe to run again at any time.
set -euo pipefail

top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$top"

say () { echo "setup: $*"; }
die () { echo "setup: error: $*" >&2; exit 1; }

# ---- 1. packages ----
build_pkgs=(build-essential autoconf automake libtool pkg-config
            nbdkit nbdkit-plugin-dev libnbd-dev liburing-dev libcmocka-dev
            libxxhash-dev liblz4-dev libzstd-dev librados-dev perl)
# nbdfuse is part of libnbd-bin on Debian 12 (a package of its own in later
# releases: added below when apt knows it).
# clang and its sanitizer runtime (libFuzzer's is libclang-rt-14-dev, only
# recommended by clang) build the fuzz harnesses of tests/fuzz.
test_pkgs=(libnbd-bin python3-libnbd fuse3 fio e2fsprogs qemu-utils
           util-linux kmod clang libclang-rt-14-dev)
# The RADOS device's tests run a throw-away Ceph cluster (tests/ceph/).
test_pkgs+=(ceph-mon ceph-osd ceph-common)
# bench/run-bench.sh: charts (gnuplot-nox has the pngcairo terminal, no X)
# and instruction counts where the machine has no hardware counter
# (callgrind; its headers also name bench/core-bench's phases).
# The rados suite serves an rbd image with qemu-nbd: qemu's rbd driver
# is in qemu-block-extra.  lz4's command line measures the compressor's
# own speed on the bench's data (the ceiling of a compressed volume);
# xxhash's (xxhsum -b) the checksum's, for what compression saves.
bench_pkgs=(gnuplot-nox valgrind qemu-block-extra lz4 xxhash)

installed () {
    [ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null)" = "ii " ]
}

missing=()
for p in "${build_pkgs[@]}" "${test_pkgs[@]}" "${bench_pkgs[@]}"; do
    installed "$p" || missing+=("$p")
done
if ! command -v nbdfuse >/dev/null 2>&1 && ! installed nbdfuse; then
    missing+=(nbdfuse?)
fi

if [ ${#missing[@]} -eq 0 ]; then
    say "all packages already installed"
else
    command -v apt-get >/dev/null 2>&1 ||
        die "missing packages (${missing[*]}) and no apt-get: install them by hand"
    [ "$(id -u)" -eq 0 ] ||
        die "missing packages: ${missing[*]}; run as root (sudo $0) to install them"
    say "installing: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    pkgs=()
    for p in "${missing[@]}"; do
        if [ "$p" = "nbdfuse?" ]; then
            # Only where apt has a package of that name.
            if apt-cache show nbdfuse >/dev/null 2>&1; then pkgs+=(nbdfuse); fi
        else
            pkgs+=("$p")
        fi
    done
    if [ ${#pkgs[@]} -gt 0 ]; then
        apt-get install -y -q "${pkgs[@]}"
    fi
fi

# ---- 2. autoreconf ----
if [ ! -x configure ] || [ configure.ac -nt configure ]; then
    say "autoreconf -fi"
    mkdir -p m4     # configure.ac names it; libtoolize fills it
    autoreconf -fi
fi

# ---- 3. configure ----
# The arguments of the last configure run, shell-quoted, one line.
stamp=build-aux/configure-args
want=$(printf '%q ' "$@")
have=
[ -f "$stamp" ] && have=$(cat "$stamp")
if [ ! -f Makefile ] || [ ! -f config.status ] || [ "$want" != "$have" ]; then
    was_configured=no
    [ -f Makefile ] && was_configured=yes
    say "./configure $*"
    ./configure "$@"
    printf '%s\n' "$want" > "$stamp"
    if [ "$was_configured" = yes ]; then
        say "configure arguments changed: make clean"
        make -s clean
    fi
fi

# ---- 4. build ----
say "make -j2"
make -j2
say "built plugin/.libs/nbdkit-zvol-plugin.so"
