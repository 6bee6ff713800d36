#!/usr/bin/env bash
# The ebpf tracker's cost on the fork loop, against its floor (issue 18).
#
#   bench/ebpf_cost.sh                  # RUNS=30 paired rounds by default
#   RUNS=60 bench/ebpf_cost.sh
#
# 1. Paired rounds (bench/paired.py), side by side: the bare loop of 2,000 /bin/true; the floor
#    (examples/ebpf_floor.rs: ste's BPF object, loader and root registration, and a reader that
#    only drains the ring buffer), woken for each record and drained every 10 ms; ste without
#    its accounting (taskstats, cgroup) and ste as it runs by default; `ste true` against
#    `true` (an additive figure: its last column).
# 2. The context switches and CPU of each of ste's threads on one run of the loop (perf stat
#    --per-thread), and the floor's records and wake-ups.
#
# Budgets (issue 18): ste ≤ 1.04× bare with accounting on, and within 2 % of its floor; `ste
# true` ≤ +4 ms. Results: bench/results/ebpf-cost*.
source "$(dirname "$0")/lib.sh"
need python3 perf

RUNS=${RUNS:-30}
LOOP='i=0; while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done'
FLOOR="$RELEASE/examples/ebpf_floor"

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$BENCH_DIR/paired.py" --runs "$RUNS" --warmup 2 --json "$RESULTS/ebpf-cost.json" \
    --title "The ebpf tracker against its floor: fork loop, 2,000 /bin/true" \
    "bare=sh -c '$LOOP'" \
    "ebpf floor=$FLOOR -- sh -c '$LOOP'" \
    "ebpf floor, 10 ms timer=$FLOOR --timer 10 -- sh -c '$LOOP'" \
    "ste --no-accounting=$STE --no-accounting -q -o /dev/null -- sh -c '$LOOP'" \
    "ste=$STE -q -o /dev/null -- sh -c '$LOOP'" \
    | tee "$RESULTS/ebpf-cost.md"
python3 "$BENCH_DIR/paired.py" --runs "$RUNS" --warmup 2 --json "$RESULTS/ebpf-cost-true.json" \
    --title "ste true against true" \
    "true=true" "ste true=$STE -q -o /dev/null -- true" \
    | tee "$RESULTS/ebpf-cost-true.md"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

echo
echo "ste's threads on one run of the loop (perf stat --per-thread, from 0.2 s in):"
"$STE" -q -o /dev/null -- sh -c "$LOOP" &
sleep 0.2
perf stat -e context-switches,task-clock --per-thread -p "$(pgrep -n -x ste)" 2>&1 \
    | grep -E '^ *ste' | sort -k2 -n -r
wait
echo "The floor's records and wake-ups:"
"$FLOOR" -- sh -c "$LOOP"
"$FLOOR" --timer 10 -- sh -c "$LOOP"
