#!/usr/bin/env bash
# The memory sampler's cost on workloads with many short processes, before and after a change,
# side by side in one paired run (bench/paired.py: every round runs each command once in a
# fresh random order; ratios within the round):
#   bare | ste BEFORE (a binary built from the older commit) | ste (this tree)
# on a fork loop (500 /bin/true) and a build (make -j2 of 40 small C files).
# Issue 20's budget: the counter ticks add at most 1 % to either.
#
#   bench/sampler_cost.sh BEFORE_STE [LOOP_RUNS] [BUILD_RUNS]
# Needs python3, gcc, make. Results: bench/results/sampler-*.{md,json}
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=$1
LOOP_RUNS=${2:-60}
RUNS=${3:-20}
cargo build --release --quiet
STE=$PWD/target/release/ste
OUT=$PWD/bench/results
mkdir -p "$OUT"

LOOP='i=0; while [ $i -lt 500 ]; do /bin/true; i=$((i+1)); done'
bench/paired.py --runs "$LOOP_RUNS" --warmup 3 --json "$OUT/sampler-forkloop.json" \
  --title "sampler on the fork loop (500 /bin/true)" \
  "bare=sh -c '$LOOP'" \
  "ste before=$BEFORE -o /dev/null -- sh -c '$LOOP'" \
  "ste after=$STE -o /dev/null -- sh -c '$LOOP'" | tee "$OUT/sampler-forkloop.md"

SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
for i in $(seq 1 40); do
  cat > "$SRC/f$i.c" <<C
#include <stdio.h>
#include <string.h>
static int table[4096];
int f$i(int n) { for (int k = 0; k < 4096; k++) table[k] = k * n + $i; return table[n % 4096]; }
int g$i(const char *s) { char buf[256]; snprintf(buf, sizeof buf, "%s-%d", s, f$i($i)); return (int)strlen(buf); }
C
done
printf 'int main(void){return 0;}\n' > "$SRC/main.c"
cat > "$SRC/Makefile" <<'M'
OBJS := $(patsubst %.c,%.o,$(wildcard *.c))
prog: $(OBJS)
	$(CC) -o $@ $^
%.o: %.c
	$(CC) -O2 -c -o $@ $<
clean:
	rm -f *.o prog
M
bench/paired.py --runs "$RUNS" --warmup 1 --json "$OUT/sampler-build.json" \
  --title "sampler on a build (make -j2, 40 files)" --prepare "make -s -C $SRC clean" \
  "bare=make -s -j2 -C $SRC" \
  "ste before=$BEFORE -o /dev/null -- make -s -j2 -C $SRC" \
  "ste after=$STE -o /dev/null -- make -s -j2 -C $SRC" | tee "$OUT/sampler-build.md"
