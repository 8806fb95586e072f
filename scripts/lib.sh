# shellcheck shell=bash disable=SC2034
# Shared helpers for the smaps_rollup workbench scripts. Source this file.

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# Large, reusable things (kernel git tree, object dirs, ccache) live outside
# the repository so a fresh clone reuses them. Override with SMAPS_CACHE.
CACHE=${SMAPS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/smaps-rollup}
KSRC=$CACHE/linux            # git repository: branches stock, base, series, stock-beside
KOUT=$CACHE/out              # kbuild output directories, one per variant
# Small per-checkout artefacts (initramfs, logs, results of a run).
BUILD=$REPO/build
TARBALL=${SMAPS_TARBALL:-/usr/src/linux-source-6.12.tar.xz}
export CCACHE_DIR=$CACHE/ccache
# The diff algorithm of patches/ (make-patches): histogram shows a new
# function as added, not interleaved with old lines it happens to match.
# Patch-ids depend on it, so whatever compares a commit with patches/ by
# patch-id diffs the commit with it too.
PATCH_DIFF=--histogram

# What defines a kernel: kernels/ (the variants, the preemption models,
# the config fragments, the stock-beside patch). The removal patch is
# base/ and the series' inputs series/, beside patches/.
KERNELS=$REPO/kernels
VARIANTS=$KERNELS/variants
MODELS=$KERNELS/models

# table_lines FILE: the lines of a table of kernels/, without comments.
table_lines() { awk '!/^#/ && NF' "$1"; }

# variant_names: every variant, one per line, in the order of the table.
variant_names() { table_lines "$VARIANTS" | awk '{ print $1 }'; }

# variant_field VARIANT N: field N of VARIANT's line (2 branch, 3 role,
# 4 model, 5 bench, 6 fragments, 7 arch); fails for an unknown variant.
variant_field() {
	table_lines "$VARIANTS" | awk -v v="$1" -v n="$2" '$1 == v { print $n; found = 1 }
		END { exit !found }'
}

# variant_branch VARIANT: the branch of the kernel tree it is built from.
variant_branch() { variant_field "$1" 2; }

# variant_role VARIANT: stock, base or series.
variant_role() { variant_field "$1" 3; }

# variant_model VARIANT: its preemption model (kernels/models).
variant_model() { variant_field "$1" 4; }

# variant_arch VARIANT: its kbuild architecture, x86_64 or um.
variant_arch() {
	local a
	a=$(variant_field "$1" 7) || return 1
	echo "${a:-x86_64}"
}

# variant_fragments VARIANT: the paths of its config fragments, in order,
# one per line.
variant_fragments() {
	local f
	f=$(variant_field "$1" 6) || return 1
	tr ',' '\n' <<<"$f" | sed "s|^|$KERNELS/configs/|"
}

# bench_variant ROLE MODEL: the variant that scripts/bench boots as ROLE
# (stock or series) in preemption model MODEL; fails unless there is
# exactly one.
bench_variant() {
	table_lines "$VARIANTS" | awk -v role="$1" -v model="$2" '
		$3 == role && $4 == model && $5 == "yes" { print $1; n++ }
		END { exit n != 1 }'
}

# bench_prepare VARIANT: what a benchmark does before it boots VARIANT:
# the missing dependencies, the bench programs ($BUILD/bench), and the
# kernel, built when it is not up to date. Prints nothing on stdout.
bench_prepare() {
	step "installing missing dependencies" "$REPO/scripts/deps" >&2
	step "building the benchmark programs into $BUILD/bench (guest/bench/Makefile)" \
		make -s -C "$REPO/guest/bench" OUTPUT="$BUILD/bench" >&2
	step "building the $1 kernel (scripts/build-kernel; quick when it is up to date)" \
		"$REPO/scripts/build-kernel" "$1" >/dev/null
}

# bench_series_kernel MODEL: what scripts/bench-icount and
# scripts/bench-trace do first: bench_prepare of the series kernel that
# scripts/bench boots in MODEL (a stock-beside variant). Prints the
# variant's name, and only that, on stdout.
bench_series_kernel() {
	local variant
	variant=$(bench_variant series "$1") ||
		die "kernels/variants has not exactly one bench variant of role series in model $1"
	bench_prepare "$variant"
	echo "$variant"
}

# model_names: the preemption models, one per line, the default first.
model_names() { table_lines "$MODELS" | awk '{ print $1 }'; }

# model_option MODEL: the kconfig option a kernel of MODEL has set; fails
# for an unknown model.
model_option() {
	table_lines "$MODELS" | awk -v m="$1" '$1 == m { print $2; found = 1 }
		END { exit !found }'
}

# kernel_out VARIANT: the kbuild output directory of a variant. With
# KSRC_OVERRIDE set (development only), the VARIANT-override one that
# scripts/build-kernel then builds.
kernel_out() { echo "$KOUT/$1${KSRC_OVERRIDE:+-override}"; }

# kernel_image VARIANT|BZIMAGE: the bzImage of a variant (the linux
# program of a UML one), or BZIMAGE as given.
kernel_image() {
	if [ "$(variant_arch "$1" 2>/dev/null)" = um ]; then
		echo "$(kernel_out "$1")/linux"
	elif variant_field "$1" 1 >/dev/null; then
		echo "$(kernel_out "$1")/arch/x86/boot/bzImage"
	else
		echo "$1"
	fi
}

# kernel_vmlinux VARIANT|BZIMAGE: the vmlinux built with that image (for
# decoding stacks): the one of its kbuild output directory, or for a
# bzImage elsewhere (scripts/bench's boot copies) the vmlinux beside it.
# The path printed may not exist.
kernel_vmlinux() {
	local img
	img=$(kernel_image "$1")
	case $img in
	*/arch/x86/boot/bzImage) echo "${img%/arch/x86/boot/bzImage}/vmlinux" ;;
	*/linux) echo "${img%/linux}/vmlinux" ;;
	*) echo "$(dirname "$img")/vmlinux" ;;
	esac
}

# kernel_config VARIANT: the .config of a built variant.
kernel_config() { echo "$(kernel_out "$1")/.config"; }

# vm_job TIMEOUT UID[:GID] VAR=VALUE... -- COMMAND [ARG...]: print the job
# that a guest's init runs with bash (guest/init, guest/uml-init): COMMAND
# in the current directory, with PATH, LANG and the VARs as its
# environment, as UID when that is not empty, for at most TIMEOUT seconds.
# The job writes "exit N" or "timeout" to the file $VMRUN_STATUS names.
vm_job() {
	local timeout=$1 uid=$2 env user=()
	shift 2
	env=("PATH=$PATH" "LANG=${LANG:-C.UTF-8}")
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		env+=("$1")
		shift
	done
	shift
	if [ -n "$uid" ]; then
		env+=(HOME=/tmp)
		user=(setpriv --reuid="${uid%%:*}" --regid="${uid#*:}" --clear-groups --)
	else
		env+=(HOME=/root)
	fi
	echo "# vm-run job, run by the guest's init"
	printf 'dir=%q timeout=%d\n' "$PWD" "$timeout"
	printf 'env=(%s)\nuser=(%s)\ncmd=(%s)\n' "$(quote "${env[@]}")" \
		"$(quote "${user[@]}")" "$(quote "$@")"
	cat <<'EOF'
cd -- "$dir" || { echo "exit 125" >"$VMRUN_STATUS"; exit; }
SECONDS=0 rc=0
env -i "${env[@]}" timeout -k 10 "$timeout" "${user[@]}" "${cmd[@]}" || rc=$?
if [ "$rc" -eq 124 ] && [ "$SECONDS" -ge "$timeout" ]; then
	echo timeout
else
	echo "exit $rc"
fi >"$VMRUN_STATUS"
EOF
}

# quote ARG...: the ARGs quoted for bash, nothing for no ARG.
quote() { [ $# -eq 0 ] || printf '%q ' "$@"; }

# qemu_command ACCEL MEM_MIB CPUS BZIMAGE INITRAMFS STATUS_FILE [ARG...]:
# set the array QEMU to the command line of a guest boot, the one
# scripts/vm-run and scripts/kvm-probe both run: no default devices, the
# kernel booted with the initramfs (guest/init) and the kernel command
# line "panic=-1 pci=noacpi ARG...", and guest/init's status port
# (vmrun.status) written to STATUS_FILE. vm-run adds its console, its 9p
# shares and its output port.
# pci=noacpi: PCI interrupts from the BIOS routing table. ACPI would run
# the DSDT's _PRT loop, which takes minutes under TCG on the debug kernel
# (AE_AML_LOOP_TIMEOUT, then no interrupt for the virtio devices). The
# ACPI tables themselves, hence the HPET, are still used.
qemu_command() {
	local accel=$1 mem=$2 cpus=$3 bzimage=$4 initramfs=$5 status=$6
	shift 6
	QEMU=(
		qemu-system-x86_64 -accel "$accel" -cpu max -smp "$cpus" -m "$mem"
		-nodefaults -no-user-config -display none -no-reboot
		-kernel "$bzimage" -initrd "$initramfs" -append "panic=-1 pci=noacpi $*"
		-device virtio-serial-pci
		-chardev "file,id=status,path=$status"
		-device 'virtserialport,chardev=status,name=vmrun.status'
	)
}

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
# vm-run fails a run whose console shows one; test-debug and the kcsan
# stage also scan the guest's dmesg (first_kernel_report).
KERNEL_REPORTS=('BUG:' 'kernel BUG at' 'WARNING:' 'Call Trace:' 'Oops'
	'general protection fault' 'Kernel panic' 'KASAN' 'UBSAN'
	'possible circular locking' 'possible recursive locking'
	'inconsistent lock state' 'DEBUG_LOCKS_WARN_ON' 'INFO: '
	'new suspected memory leak' 'unreferenced object' 'hung_task'
	'blocked for more than' 'self-detected stall' 'RCU stall'
	'Bad page' 'Bad rss-counter' 'refcount_t:' 'list_add corruption'
	'list_del corruption' 'printk messages dropped')

# without_kcsan_reports LOG: LOG without its KCSAN reports (from the line
# "BUG: KCSAN: ..." to the "=====" line that ends the report).
without_kcsan_reports() {
	awk '/BUG: KCSAN: / { skip = 1; next }
		skip && /====================/ { skip = 0; next }
		!skip' "$1"
}

# first_kernel_report [-K] LOG [PATTERN...]: print the first pattern of
# KERNEL_REPORTS, or of the PATTERNs, that LOG shows; exit 1 when there is
# none. -K leaves KCSAN reports out (they are classified by kcsan_reports).
first_kernel_report() {
	local filter=cat pattern text
	if [ "$1" = -K ]; then
		filter=without_kcsan_reports
		shift
	fi
	text=$("$filter" "$1") || return 1
	shift
	for pattern in "${KERNEL_REPORTS[@]}" "$@"; do
		if grep -qF -- "$pattern" <<<"$text"; then
			printf '%s\n' "$pattern"
			return 0
		fi
	done
	return 1
}

# kcsan_reports LOG: one line per distinct KCSAN report of LOG (by its
# "BUG: KCSAN:" line), in order: "smaps FUNC vs FUNC" when the functions
# of that line or of the stacks of the report mention smaps, task_mmu or
# mm_pgtable_move (smaps_rollup's code), else "other FUNC vs FUNC". The
# task's name (Comm:) and the other lines of the report do not count.
kcsan_reports() {
	awk 'function mine(s) { return s ~ /smaps|task_mmu|pgtable_move/ }
		{ line = $0; sub(/^\[ *[0-9.]+\] /, "", line) }
		in_report && line ~ /====================/ { in_report = 0; next }
		match(line, /BUG: KCSAN: /) {
			title = substr(line, RSTART + RLENGTH)
			sub(/^[^ ]+ in /, "", title)
			gsub(/ \/ /, " vs ", title)
			if (!(title in hit)) { order[++n] = title; hit[title] = 0 }
			hit[title] = hit[title] || mine(title)
			in_report = 1
			next
		}
		in_report && line ~ /^ *[A-Za-z_][A-Za-z0-9_.]*\+0x/ {
			hit[title] = hit[title] || mine(line)
		}
		END { for (i = 1; i <= n; i++) print (hit[order[i]] ? "smaps " : "other ") order[i] }' "$1"
}

# result ok|fail|skip NAME [REASON]: record one check as a TAP line on
# stdout and, when RESULTS names a file, in it. RESULT_PREFIX, if set,
# goes before NAME ("debug: " in test-debug).
result() {
	local name=${RESULT_PREFIX:-}$2 line
	case $1 in
	ok) line="ok - $name${3:+ ($3)}" ;;
	fail) line="not ok - $name${3:+ ($3)}" ;;
	skip) line="ok - $name # SKIP ${3:-}" ;;
	*) die "result: bad status $1" ;;
	esac
	[ -z "${RESULTS:-}" ] || echo "$line" >>"$RESULTS"
	printf '%s\n' "$line"
}

# tap_results NAME FILE RC: record the results of one kselftest_harness
# program that ran, one per test case from its TAP output FILE, and a
# failure for a plan not met or an exit status RC that the results do not
# explain.
tap_results() {
	local name=$1 file=$2 rc=$3 plan got bad passed skipped
	plan=$(sed -n 's/^1\.\.\([0-9][0-9]*\).*/\1/p' "$file" | head -n 1)
	read -r passed bad skipped < <("$REPO/scripts/tap-summary" --counts "$file" || true)
	got=$((passed + bad + skipped))
	# "ok 3 global.name # SKIP why" -> "ok - NAME: global.name # SKIP why"
	sed -nE "s|^(not )?ok [0-9]+ |\1ok - ${RESULT_PREFIX:-}$name: |p" "$file" |
		if [ -n "${RESULTS:-}" ]; then tee -a "$RESULTS"; else cat; fi
	if [ "$got" -eq 0 ]; then
		case $rc in
		0) result ok "$name" "no TAP results, exit 0" ;;
		4) result skip "$name" "no TAP results, exit 4" ;;
		*) result fail "$name" "no TAP results, exit $rc" ;;
		esac
	elif [ -n "$plan" ] && [ "$got" -lt "$plan" ]; then
		result fail "$name" "$got of $plan results, exit $rc"
	elif [ "$bad" -eq 0 ] && [ "$rc" -ne 0 ] && [ "$rc" -ne 4 ]; then
		result fail "$name" "all results ok but exit $rc"
	fi
}

# exit_result NAME RC: record a program by its exit status, as kselftest
# counts it (0 pass, 4 skip, anything else a failure).
exit_result() {
	case $2 in
	0) result ok "$1" ;;
	4) result skip "$1" "exit 4" ;;
	*) result fail "$1" "exit $2" ;;
	esac
}

# selftest_dir TOP: where the proc selftests of an export to TOP are built.
selftest_dir() { echo "$1/tools/testing/selftests/proc"; }

# selftest_progs DIR: the absolute paths of the programs that the proc
# Makefile in DIR builds (TEST_GEN_PROGS), one per line.
selftest_progs() {
	# shellcheck disable=SC2016 # $(TEST_GEN_PROGS) is for make, not the shell
	printf 'smaps-print-progs:\n\t@echo $(TEST_GEN_PROGS)\n' |
		selftest_make "$1" -f Makefile -f /dev/stdin smaps-print-progs |
		tr ' ' '\n' | sed '/^$/d'
}

# build_selftests BRANCH TOP [REGEX]: export the selftests of BRANCH of
# $KSRC to TOP and build the proc ones statically (export_selftests), then
# record one result per program matching REGEX (selftest_build_results).
# The programs that built are listed in TOP/progs. For every branch but
# stock, the workbench's own selftests (guest/selftests/*.c, never sent)
# are built beside the series' (workbench_build).
build_selftests() {
	export_selftests "$1" "$2" && selftest_build_results "$@"
}

# export_selftests BRANCH TOP: export tools/ of BRANCH of $KSRC to TOP and
# build its proc selftests statically; a failure is recorded as a result.
export_selftests() {
	local branch=$1 top=$2 dir
	dir=$(selftest_dir "$top")
	rm -rf "$top"
	mkdir -p "$top"
	if ! git -C "$KSRC" rev-parse -q --verify "refs/heads/$branch" >/dev/null; then
		result fail "selftests $branch" "no branch $branch in $KSRC (scripts/prepare-tree makes it)"
		return 1
	fi
	say "exporting tools/ of branch $branch to $top"
	if ! git -C "$KSRC" archive "$branch" tools/testing/selftests tools/include \
		tools/arch/x86 tools/scripts | tar -x -C "$top"; then
		result fail "selftests $branch" "git archive of $branch failed"
		return 1
	fi
	say "building $dir statically"
	selftest_make "$dir" -k USERLDFLAGS=-static -j"$(nproc)" >&2 || true
	[ "$branch" = stock ] || workbench_build "$top"
}

# WORKBENCH_SELFTESTS: the workbench's smaps_rollup selftests, kept out of
# the series (guest/selftests/smaps_rollup-wb-*.c and their headers). Each
# program's name starts with smaps_rollup-, so the plans pick it up.
WORKBENCH_SELFTESTS=$REPO/guest/selftests

# workbench_progs: the names of the workbench's selftest programs.
workbench_progs() {
	local src
	for src in "$WORKBENCH_SELFTESTS"/*.c; do
		[ -e "$src" ] || continue
		src=${src##*/}
		echo "${src%.c}"
	done
}

# workbench_build TOP: compile each workbench selftest statically into the
# proc selftests directory of the export in TOP, with the flags and include
# paths of the proc Makefile (lib.mk's), so that its smaps_rollup.h and
# kselftest_harness.h are the exported series' (log: DIR/NAME.build.log).
workbench_build() {
	local top=$1 dir name
	dir=$(selftest_dir "$top")
	while IFS= read -r name; do
		rm -f "$dir/$name"
		"${CC:-gcc}" -Wall -O2 -Wno-unused-function \
			-isystem "$top/tools/include/uapi" -D_GNU_SOURCE= \
			-I "$dir" -I "$WORKBENCH_SELFTESTS" -pthread -static \
			-o "$dir/$name" "$WORKBENCH_SELFTESTS/$name.c" \
			>"$dir/$name.build.log" 2>&1 || cat "$dir/$name.build.log" >&2
	done < <(workbench_progs)
}

# selftest_build_results BRANCH TOP [REGEX]: one result per program of the
# proc selftests built in TOP (export_selftests) that matches REGEX; the
# programs that built are listed in TOP/progs.
selftest_build_results() {
	local branch=$1 top=$2 only=${3:-.} dir p n=0
	dir=$(selftest_dir "$top")
	: >"$top/progs"
	while IFS= read -r p; do
		n=$((n + 1))
		if [ "${p%/*}" != "$dir" ]; then
			result fail "build $branch/${p##*/}" "the Makefile puts it in ${p%/*}, not $dir"
		elif [ -x "$p" ]; then
			result ok "build $branch/${p##*/}"
			echo "$p" >>"$top/progs"
		else
			result fail "build $branch/${p##*/}" "did not build"
		fi
	done < <(selftest_progs "$dir" | grep -E "$only")
	[ "$n" -gt 0 ] || result fail "selftests $branch" "the proc Makefile lists no program matching $only"
	[ "$branch" != stock ] || return 0
	# The workbench's, built by workbench_build beside them.
	while IFS= read -r p; do
		[[ $dir/$p =~ $only ]] || continue
		if [ -x "$dir/$p" ]; then
			result ok "build workbench/$p"
			echo "$dir/$p" >>"$top/progs"
		else
			result fail "build workbench/$p" "see $dir/$p.build.log"
		fi
	done < <(workbench_progs)
}

# plan_programs PREFIX KIND TIMEOUT PROGS [REGEX]: the lines of a plan for
# guest/run-plan (see there) that run each program listed in the file
# PROGS (a TOP/progs of selftest_build_results) whose name matches REGEX,
# as PREFIXNAME, its result read as KIND (tap or exit, see plan_results).
plan_programs() {
	local prefix=$1 kind=$2 limit=$3 progs=$4 only=${5:-.} p
	while IFS= read -r p; do
		[[ ${p##*/} =~ $only ]] || continue
		echo "$prefix${p##*/} $kind $limit $p"
	done <"$progs"
}

# plan_has_workbench PLAN PREFIX: a failure for each workbench program
# (workbench_progs) that PLAN does not run as PREFIXNAME: a build that
# lost workbench_build would otherwise run fewer programs and pass.
plan_has_workbench() {
	local p
	while IFS= read -r p; do
		grep -q "^$2$p " "$1" || result fail "$2$p" "not built, so not run"
	done < <(workbench_progs)
}

# plan_results PLAN OUT: record the results that guest/run-plan
# left in OUT: guest-setup, then each program of PLAN whose KIND is tap
# (tap_results) or exit (exit_result). A program without an exit status
# did not finish.
plan_results() {
	local plan=$1 out=$2 name kind rc
	rc=$(cat "$out/setup.rc" 2>/dev/null || echo none)
	if [ "$rc" = 0 ]; then
		result ok "guest-setup"
	else
		result fail "guest-setup" "exit $rc"
	fi
	while read -r name kind _; do
		case $kind in tap | exit) ;; *) continue ;; esac
		if [ ! -f "$out/$name.rc" ]; then
			result fail "$name" "did not finish (guest timed out or crashed)"
			continue
		fi
		rc=$(cat "$out/$name.rc")
		if [ "$kind" = tap ]; then
			tap_results "$name" "$out/$name.out" "$rc"
		else
			exit_result "$name" "$rc"
		fi
	done <"$plan"
	plan_times "$out"
}

# plan_times OUT: say which test cases that guest/run-plan ran into OUT
# took longest (its NAME.times files), for the margins of their timeouts.
# A record for the log, never a verdict.
plan_times() {
	local slow
	# awk reads all of sort's output: a head(1) that exits after 5 lines
	# kills sort with SIGPIPE if sort still writes by then, and pipefail
	# makes that the caller's exit status (141).
	slow=$(find "$1" -name '*.times' -exec cat {} + 2>/dev/null | sort -rn |
		awk 'NR <= 5 { printf "%s%.1f s %s", sep, $1 / 1000, $2; sep = "; " }')
	[ -z "$slow" ] || say "slowest test cases in $1: $slow"
}

# series_recipients FILE...: who gets a series touching FILEs (patches or
# a diff): scripts/get_maintainer.pl, people To and lists Cc, then
# series/recipients; one line each, "to ADDRESS" or "cc ADDRESS", each
# address once.
series_recipients() {
	local list r
	list=$(cd "$KSRC" && perl scripts/get_maintainer.pl --no-git --no-git-fallback \
		--no-rolestats --no-multiline --separator $'\n' "$@") ||
		die "scripts/get_maintainer.pl failed"
	{
		while IFS= read -r r; do
			case $r in
			'') ;;
			*@vger.kernel.org* | *@lists.*) echo "cc $r" ;;
			*) echo "to $r" ;;
			esac
		done <<<"$list"
		sed -e '/^#/d' -e '/^$/d' "$REPO/series/recipients"
	} | awk '!seen[substr($0, 4)]++'
}

# placeholder_address ADDRESS: true for an address that cannot be anybody's
# (the example domains of RFC 2606, localhost, .invalid).
placeholder_address() {
	case ${1,,} in
	*@example.org* | *@example.com* | *@example.net* | *@*.example* | *@localhost* | *.invalid*) return 0 ;;
	*) return 1 ;;
	esac
}

# git_k ARG...: git in the kernel tree $KSRC.
git_k() { git -C "$KSRC" "$@"; }

# series_patches: the patches of patches/ in series order, the cover letter
# left out; one path per line, nothing when there is none.
series_patches() {
	local p
	for p in "$REPO"/patches/*.patch; do
		case $p in *-0000-cover-letter.patch) ;; *) [ ! -f "$p" ] || echo "$p" ;; esac
	done
}

# series_cover_letter: the cover letter(s) of patches/, one path per line
# (one, unless patches/ is stale or empty).
series_cover_letter() {
	local p
	for p in "$REPO"/patches/*-0000-cover-letter.patch; do
		[ ! -f "$p" ] || echo "$p"
	done
}

# hold_lock FD FILE WHAT: hold FILE locked (flock on fd FD) until the
# calling script exits, waiting (and saying so) while WHAT holds it.
hold_lock() {
	mkdir -p "$(dirname "$2")"
	eval "exec $1>\"\$2\""
	if ! flock -n "$1"; then
		say "waiting for $3 to finish (lock $2)"
		flock "$1"
	fi
}

# build_lock: hold $CACHE/build.lock (fd 9) until the calling script exits.
# scripts/prepare-tree and scripts/build-kernel take it: they share the
# checkout in $KSRC.
build_lock() { hold_lock 9 "$CACHE/build.lock" "another prepare-tree or build-kernel"; }

# checkpatch_patch PATCH: checkpatch.pl with checkpatch_args on PATCH, run
# from / (outside any git repository, where it would look commit ids up).
# Its ERROR/WARNING/CHECK lines go to stderr (the end of its output when it
# fails without one), their number to stdout. Exit status 1 when there is
# one or checkpatch.pl fails.
checkpatch_patch() {
	local log n rc=0 args=()
	read -ra args <<<"$(checkpatch_args "$1")"
	log=$(cd / && perl "$KSRC/scripts/checkpatch.pl" "${args[@]}" "$1" 2>&1) || rc=$?
	n=$(grep -c -E ': (ERROR|WARNING|CHECK):' <<<"$log" || true)
	if [ "$n" -gt 0 ]; then
		grep -E ': (ERROR|WARNING|CHECK):' <<<"$log" | sed "s|^$REPO/||" >&2
	elif [ "$rc" -ne 0 ]; then
		say "checkpatch.pl exited $rc on ${1##*/}:"
		tail -n 3 <<<"$log" >&2
	fi
	echo "$n"
	[ "$n" -eq 0 ] && [ "$rc" -eq 0 ]
}

# base_checkout DIR PATCH...: a throwaway clone of $KSRC in DIR with branch
# base checked out, sparsely: only the directories that the PATCHes touch
# (seconds, not minutes; objects shared with $KSRC, which is not touched).
base_checkout() {
	local dir=$1 dirs=()
	shift
	mapfile -t dirs < <(sed -nE 's|^diff --git a/(.*) b/(.*)$|\1\n\2|p' "$@" |
		xargs -r -d '\n' dirname | grep -vx '\.' | sort -u)
	rm -rf "$dir"
	git clone -q --shared --no-checkout "$KSRC" "$dir" &&
		git -C "$dir" sparse-checkout set -- "${dirs[@]}" &&
		git -C "$dir" checkout -q -f -B base origin/base
}

# make_warning_free LOG MAKE-ARG...: make MAKE-ARGs with the output in LOG.
# Exit 1, showing the warnings and errors (else the end of LOG) on stderr,
# when make fails or LOG shows a warning.
make_warning_free() {
	local log=$1
	shift
	mkdir -p "$(dirname "$log")"
	if make "$@" >"$log" 2>&1 && ! grep -qi 'warning:' "$log"; then
		return 0
	fi
	grep -Ei -m 20 'warning:|error|fail' "$log" >&2 || tail -n 20 "$log" >&2
	return 1
}
