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
