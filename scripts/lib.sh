# shellcheck shell=bash disable=SC2034
# Shared helpers for the smaps_rollup workbench scripts. Source this file.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Large, reusable things (kernel git tree, object dirs, ccache) live outside
# the repository so a fresh clone reuses them. Override with SMAPS_CACHE.
CACHE=${SMAPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/smaps-rollup}
KSRC=$CACHE/linux            # git repository: branches stock, base, series
KOUT=$CACHE/out              # kbuild output directories, one per variant
# Small per-checkout artefacts (initramfs, logs, results of a run).
BUILD=$REPO/build
TARBALL=${SMAPS_TARBALL:-/usr/src/linux-source-6.12.tar.xz}
export CCACHE_DIR=$CACHE/ccache

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# step NAME CMD...: run a long step, announcing it and naming it on failure.
step() {
	local name=$1
	shift
	say "$name"
	"$@" || die "step failed: $name"
}

# need_space DIR MIB: refuse to start a step that cannot fit on disk.
need_space() {
	local avail
	mkdir -p "$1"
	avail=$(df -Pm "$1" | awk 'NR == 2 { print $4 }')
	[ "$avail" -ge "$2" ] ||
		die "not enough disk space in $1: ${avail} MiB free, ${2} MiB needed"
}

# checkpatch_args PATCH: checkpatch.pl options for PATCH, with --ignore for
# the message types that series/checkpatch-accepted lists for it (each is
# justified in the cover letter).
checkpatch_args() {
	local sub type ignore=''
	while read -r sub type; do
		case $sub in '' | '#'*) continue ;; esac
		case ${1##*/} in *"$sub"*) ignore+=${ignore:+,}$type ;; esac
	done <"$REPO/series/checkpatch-accepted"
	echo "--strict --no-tree --terse${ignore:+ --ignore $ignore}"
}

# selftest_make DIR ARG...: make in a kselftest directory, silently.
# OUTPUT is passed explicitly: lib.mk sets it only when make runs at
# MAKELEVEL 0, so under `make test` the programs would be written to, and
# later found in, / (stale ones from an earlier run included).
selftest_make() {
	local dir=$1
	shift
	make -s -C "$dir" OUTPUT="$dir" "$@"
}

# What a kernel log must not show: the start of every report the kernel
# prints for a bug, a sanitizer finding, a lock problem, a leak or a stall.
# vm-run fails a run whose console shows one; test-debug also scans the
# guest's dmesg.
KERNEL_REPORTS=('BUG:' 'kernel BUG at' 'WARNING:' 'Call Trace:' 'Oops'
	'general protection fault' 'Kernel panic' 'KASAN' 'UBSAN'
	'possible circular locking' 'possible recursive locking'
	'inconsistent lock state' 'DEBUG_LOCKS_WARN_ON' 'INFO: '
	'new suspected memory leak' 'unreferenced object' 'hung_task'
	'blocked for more than' 'self-detected stall' 'RCU stall'
	'Bad page' 'Bad rss-counter' 'refcount_t:' 'list_add corruption'
	'list_del corruption' 'printk messages dropped')
