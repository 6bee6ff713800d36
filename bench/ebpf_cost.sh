#!/usr/bin/env bash
# The ebpf tracker's cost on the fork loop against its floor, part by part (issue 18).
#
#   bench/ebpf_cost.sh                  # RUNS=60 paired rounds by default
#   RUNS=100 N=1000 bench/ebpf_cost.sh
#
# 1. Paired rounds (bench/paired.py), side by side, each command adding one part to the one
#    before it: the bare loop of N /bin/true; the floor (examples/ebpf_floor.rs: ste's BPF
#    object with the per-process ledger's last-switch program, its loader and root
#    registration, and a reader that only drains the ring every 10 ms); the same floor without
#    the last-switch program (`--no-ledger`), the floor of ste's tracker alone; the floor in a
#    cgroup made as ste's accounting makes it; ste's tracker alone (`--no-accounting`, which
#    also leaves out the last-switch program); with the ledger (`--no-cgroup`); with the
#    cgroup (all of the accounting); and ste as it runs by default, i.e. with its memory
#    sampler. The sampler is all but off (`--sample-budget 0.01`) in the three before. `ste
#    true` against `true`, 50 ms apart (an additive figure: its last column), with both
#    floors.
# 2. The context switches and CPU of each of ste's threads on one run of the loop (perf stat
#    --per-thread), and the floor's records and wake-ups.
#
# Budgets (issue 18): ste ≤ 1.04× bare with accounting on, and within 2 % of its floor; `ste
# true` ≤ +4 ms. Results: bench/results/ebpf-cost*.
source "$(dirname "$0")/lib.sh"
need python3 perf

RUNS=${RUNS:-60}
N=${N:-1000}
LOOP="i=0; while [ \$i -lt $N ]; do /bin/true; i=\$((i+1)); done"
FLOOR=$(fresh_copy "$RELEASE/examples/ebpf_floor" ebpf_floor)
OFF="--sample-budget 0.01"

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$BENCH_DIR/paired.py" --runs "$RUNS" --warmup 2 --json "$RESULTS/ebpf-cost.json" \
    --title "The ebpf tracker against its floor, part by part: fork loop, $N /bin/true" \
    --against "+ sampler (ste)/ebpf floor, 10 ms timer, cgroup" \
    --against "+ sampler (ste)/ebpf floor, 10 ms timer" \
    --against "+ cgroup/ebpf floor, 10 ms timer, cgroup" \
    --against "ste tracker alone/ebpf floor, 10 ms timer, no ledger" \
    --against "ebpf floor, 10 ms timer/ebpf floor, 10 ms timer, no ledger" \
    "bare=sh -c '$LOOP'" \
    "ebpf floor, 10 ms timer=$FLOOR --timer 10 -- sh -c '$LOOP'" \
    "ebpf floor, 10 ms timer, no ledger=$FLOOR --timer 10 --no-ledger -- sh -c '$LOOP'" \
    "ebpf floor, 10 ms timer, cgroup=$FLOOR --timer 10 --cgroup -- sh -c '$LOOP'" \
    "ste tracker alone=$STE --no-accounting $OFF -q -o /dev/null -- sh -c '$LOOP'" \
    "+ ledger=$STE --no-cgroup $OFF -q -o /dev/null -- sh -c '$LOOP'" \
    "+ cgroup=$STE $OFF -q -o /dev/null -- sh -c '$LOOP'" \
    "+ sampler (ste)=$STE -q -o /dev/null -- sh -c '$LOOP'" \
    | tee "$RESULTS/ebpf-cost.md"
python3 "$BENCH_DIR/paired.py" --runs "$RUNS" --warmup 3 --prepare "sleep 0.05" \
    --json "$RESULTS/ebpf-cost-true.json" --title "ste true against true, 50 ms apart" \
    "true=true" \
    "ebpf floor, 10 ms timer=$FLOOR --timer 10 -- true" \
    "ebpf floor, 10 ms timer, cgroup=$FLOOR --timer 10 --cgroup -- true" \
    "ste true=$STE -q -o /dev/null -- true" \
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
