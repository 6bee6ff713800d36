#!/usr/bin/env bash
# What counting system calls costs: ste --syscalls=count and --syscalls (BPF, in the kernel)
# side by side with the bare command, strace -f -c and perf trace -s, in one hyperfine run per
# workload:
#   1. a loop of 2,000,000 getppid calls (the worst case: the cheapest system call), and
#   2. a real multi-process build: a generated C project of 100 files, `make -j2` with gcc.
# Also ste with its tracker only (no --syscalls) and the ptrace slow path, for context.
#
# Budgets (issue 4): on the getppid loop, counts <= 2x bare and with timing <= 5x bare; on the
# build, <= 1.10x bare.
#
# Needs root (BPF; perf trace), hyperfine, strace, linux-perf, gcc, make. Usage:
#   bench/syscalls.sh [RUNS]        (default 3 runs per command; strace and perf trace on the
#                                    loop take about a minute each per run)
# Results go to bench/results/syscalls-*.md and .json.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
calls=${CALLS:-2000000}
files=${FILES:-100}

for tool in hyperfine strace perf gcc make; do
	command -v "$tool" >/dev/null || { echo "bench/syscalls.sh: $tool is needed" >&2; exit 1; }
done
[ "$(id -u)" = 0 ] || { echo "bench/syscalls.sh: run as root (BPF, perf trace)" >&2; exit 1; }

cargo build --release --quiet --bin ste --example syscalls_fixture
RELEASE=$PWD/target/$(rustc -vV | sed -n 's/^host: //p')/release
ste=$RELEASE/ste
loop=$RELEASE/examples/syscalls_fixture
out=bench/results
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ste writes its report to /dev/null; strace and perf trace their summaries.
quiet="-o /dev/null"

echo "== getppid loop: $calls calls"
hyperfine --runs "$runs" --shell=none \
	--export-markdown "$out/syscalls-getppid.md" --export-json "$out/syscalls-getppid.json" \
	-n bare "$loop getppid $calls" \
	-n "ste --syscalls=count" "$ste $quiet --syscalls=count -- $loop getppid $calls" \
	-n "ste --syscalls" "$ste $quiet --syscalls -- $loop getppid $calls" \
	-n "ste (tracker only)" "$ste $quiet -- $loop getppid $calls" \
	-n "strace -f -c" "strace -f -c -o /dev/null -- $loop getppid $calls" \
	-n "perf trace -s" "perf trace -s -o /dev/null -- $loop getppid $calls"

# A C project of $files files, each with a few functions, and a Makefile.
project=$work/project
mkdir -p "$project"
for i in $(seq 1 "$files"); do
	{
		echo "#include <stdio.h>"
		echo "#include <stdlib.h>"
		echo "#include <string.h>"
		for f in 1 2 3 4 5 6 7 8; do
			echo "static int table_${f}[64] = { $(seq -s, 1 64) };"
			echo "int unit${i}_f${f}(int n) {"
			echo "  int s = 0; char buf[64];"
			echo "  for (int k = 0; k < n; k++) { s += table_${f}[k % 64] * k; snprintf(buf, sizeof buf, \"%d\", s); s ^= (int)strlen(buf); }"
			echo "  return s;"
			echo "}"
		done
	} >"$project/unit$i.c"
done
{
	echo "int main(void) { return 0; }"
} >"$project/main.c"
{
	echo "OBJS := \$(patsubst %.c,%.o,\$(wildcard *.c))"
	echo "prog: \$(OBJS)"
	printf '\t$(CC) -o $@ $^\n'
	echo "%.o: %.c"
	printf '\t$(CC) -O2 -c -o $@ $<\n'
	echo "clean:"
	printf '\trm -f *.o prog\n'
} >"$project/Makefile"

echo "== build: $files C files, make -j2"
cd "$project"
hyperfine --runs "$runs" --warmup 1 --shell=none --prepare "make -s clean" \
	--export-markdown "$OLDPWD/$out/syscalls-build.md" --export-json "$OLDPWD/$out/syscalls-build.json" \
	-n bare "make -s -j2" \
	-n "ste --syscalls=count" "$ste $quiet --syscalls=count -- make -s -j2" \
	-n "ste --syscalls" "$ste $quiet --syscalls -- make -s -j2" \
	-n "ste (tracker only)" "$ste $quiet -- make -s -j2" \
	-n "ste --syscalls --tracker ptrace --allow-ptrace" "$ste $quiet --tracker ptrace --allow-ptrace --syscalls -- make -s -j2" \
	-n "strace -f -c" "strace -f -c -o /dev/null -- make -s -j2" \
	-n "perf trace -s" "perf trace -s -o /dev/null -- make -s -j2"
cd "$OLDPWD"

echo
cat "$out/syscalls-getppid.md" "$out/syscalls-build.md"
