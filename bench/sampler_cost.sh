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
RELEASE=$PWD/target/$(rustc -vV | sed -n 's/^host: //p')/release
STE=$RELEASE/ste
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
bench/small_project.sh "$SRC"
bench/paired.py --runs "$RUNS" --warmup 1 --json "$OUT/sampler-build.json" \
  --title "sampler on a build (make -j2, 40 files)" --prepare "make -s -C $SRC clean" \
  "bare=make -s -j2 -C $SRC" \
  "ste before=$BEFORE -o /dev/null -- make -s -j2 -C $SRC" \
  "ste after=$STE -o /dev/null -- make -s -j2 -C $SRC" | tee "$OUT/sampler-build.md"
