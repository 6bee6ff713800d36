#!/usr/bin/env bash
# What a uprobe on a libc:memory_* SDT probe costs under `ste --malloc` (root: BPF): the SDT
# fixture (tests/it/c/sdt_fixture.c) firing HITS memory_arena_reuse_wait probes, bare and under
# ste, side by side with ste on the same fixture firing none (so ste's own start-up cancels out),
# and with --tracker ptrace (no uprobes: the probes stay single-byte nops).
#
#   per hit ≈ (ste --malloc, HITS − ste --malloc, 0 hits) / HITS
#
# Needs root, hyperfine, cc and sys/sdt.h (systemtap-sdt-dev). Usage:
#   bench/malloc_sdt.sh [RUNS]      (default 5; HITS=1000000 by default)
# Results go to bench/results/malloc-sdt.md and .json.
source "$(dirname "$0")/lib.sh"
need hyperfine cc
[ "$(id -u)" = 0 ] || { echo "bench/malloc_sdt.sh: run as root (uprobes need BPF)" >&2; exit 1; }
runs=${1:-5}
hits=${HITS:-1000000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 -o "$work/sdt_fixture" "$ROOT/tests/it/c/sdt_fixture.c"
fx=$work/sdt_fixture
quiet="-o /dev/null"
hyperfine --runs "$runs" --warmup 1 --shell=none \
	--export-markdown "$RESULTS/malloc-sdt.md" --export-json "$RESULTS/malloc-sdt.json" \
	-n "bare, $hits hits" "$fx 0 $hits" \
	-n "ste --malloc, 0 hits" "$STE $quiet --malloc -- $fx 0 0" \
	-n "ste --malloc, $hits hits" "$STE $quiet --malloc -- $fx 0 $hits" \
	-n "ste --malloc --tracker ptrace, $hits hits (no uprobes)" "$STE $quiet --malloc --tracker ptrace -- $fx 0 $hits"
