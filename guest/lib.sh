# shellcheck shell=bash disable=SC2034
# The helpers of the scripts that run in the guest (everything in guest/
# but /init, which runs under busybox). Source this file; it sources
# nothing from scripts/, which is the host's.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# The host's build directory, seen through the guest's read-only 9p share
# of the host root (the programs built there, the sample).
BUILD=$REPO/build

say() { printf '==> %s\n' "$*" >&2; }
die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# bench_guest_setup: the guest as the bench's measurements want it
# (guest/bench/measure, guest/bench/icount): zram swap for the cells with
# swap (guest/setup, which also starts KSM, which nothing there uses: it
# is stopped), room for 64k VMAs, the gaps unmapped, plus the readers'
# own, and 64 KiB folios for the anonymous faults of the m cells (the
# other cells' anonymous mappings are MADV_NOHUGEPAGE), PMD-sized THP for
# none of them, when the kernel has 64 KiB THP.
bench_guest_setup() {
	local thp=/sys/kernel/mm/transparent_hugepage
	"$REPO/guest/setup" >&2
	echo 0 >/sys/kernel/mm/ksm/run
	echo 262144 >/proc/sys/vm/max_map_count
	if [ -w $thp/hugepages-64kB/enabled ]; then
		echo always >$thp/hugepages-64kB/enabled
		echo never >"$thp/hugepages-$(($(cat $thp/hpage_pmd_size) >> 10))kB/enabled"
	fi
}
