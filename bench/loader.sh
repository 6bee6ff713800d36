#!/usr/bin/env bash
# Before and after a change to the BPF loader, side by side in one hyperfine run per workload
# (fairer than two runs of the full benches on a shared machine): the bare command, the older
# ste (BEFORE, e.g. a release build of an older commit) and this tree's ste, on the workloads
# whose budgets the ebpf tracker's start-up weighs on:
#   1. `true` (issue 2: ste true ≤ 5 ms more than true),
#   2. 2,000,000 getppid calls with --syscalls=count and --syscalls (issue 4: ≤ 2× and ≤ 5×),
#   3. the SDT fixture firing 1,000,000 probes under --malloc (issue 6's uprobes),
#   4. 20,000,000 malloc/free rounds under --malloc (issue 6: ≤ 1.10×);
# then the cost per system call alone, timed inside a program (the minimum over 60 chunks of
# 50,000 getppid, robust to a busy machine), bare and under each ste, three times.
#
#   BEFORE=/tmp/old/target/x86_64-unknown-linux-gnu/release/ste bench/loader.sh [RUNS]     (default 10; as root)
#
# Needs root, hyperfine, cc and sys/sdt.h (systemtap-sdt-dev). Results: bench/results/loader-*.
source "$(dirname "$0")/lib.sh"
need hyperfine cc
[ "$(id -u)" = 0 ] || { echo "bench/loader.sh: run as root (BPF)" >&2; exit 1; }
[ -x "${BEFORE:-}" ] || { echo "bench/loader.sh: BEFORE=path/to/an/older/ste is needed" >&2; exit 1; }
runs=${1:-10}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
quiet="-o /dev/null"
cc -O1 -o "$work/sdt_fixture" "$ROOT/tests/it/c/sdt_fixture.c"
loop=$RELEASE/examples/syscalls_fixture
mem=$RELEASE/examples/memory_fixture
sdt=$work/sdt_fixture

compare() {
    local name=$1 cmd=$2; shift 2
    hyperfine -N --warmup 2 --runs "$runs" \
        --export-json "$RESULTS/loader-$name.json" --export-markdown "$RESULTS/loader-$name.md" \
        -n bare "$cmd" \
        -n "before $*" "$BEFORE $quiet $* -- $cmd" \
        -n "after $*" "$STE $quiet $* -- $cmd"
}

compare true "true"
compare getppid-count "$loop getppid 2000000" --syscalls=count
compare getppid-timed "$loop getppid 2000000" --syscalls
compare sdt "$sdt 0 1000000" --malloc
compare malloc-loop "$mem malloc-loop 20000000" --malloc

# Per call: ns per getppid, the fastest of 60 chunks.
cat >"$work/chunks.c" <<'EOF'
#include <stdio.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(void) {
	double best = 1e9;
	for (int c = 0; c < 60; c++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		for (int i = 0; i < 50000; i++)
			syscall(SYS_getppid);
		clock_gettime(CLOCK_MONOTONIC, &b);
		double ns = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 50000.0;
		if (ns < best)
			best = ns;
	}
	printf("%.1f\n", best);
	return 0;
}
EOF
cc -O2 -o "$work/chunks" "$work/chunks.c"
echo "== ns per getppid (fastest of 60 chunks of 50,000), three rounds" | tee "$RESULTS/loader-per-call.txt"
for round in 1 2 3; do
	line="bare $("$work/chunks")"
	for flag in --syscalls=count --syscalls; do
		line+=" | before $flag $($BEFORE $quiet $flag -- "$work/chunks")"
		line+=" | after $flag $($STE $quiet $flag -- "$work/chunks")"
	done
	echo "$line" | tee -a "$RESULTS/loader-per-call.txt"
done

for f in true getppid-count getppid-timed sdt malloc-loop; do
    echo "== $f"
    cat "$RESULTS/loader-$f.md"
done
