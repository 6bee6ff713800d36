#!/usr/bin/env bash
# The ptrace and netlink trackers' cost on the fork loop (issue 2), against their floors.
#
#   bench/trackers_cost.sh              # RUNS=20 paired rounds by default
#   RUNS=40 bench/trackers_cost.sh
#
# 1. Paired rounds (bench/paired.py: each round runs every command once, in random order, and
#    ratios are taken within the round), side by side: the bare loop;
#    - bench/ptrace_floor.c, a minimal tracer with ste's ptrace options that only restarts each
#      stop (the cost of the stops alone), and with --reads (plus the /proc reads ste needs at
#      them: argv at exec, status and io at exit);
#    - bench/netlink_floor.c, a minimal proc connector listener with ste's subscription that
#      only receives the events (the kernel's cost of sending them, and of waking a listener),
#      and with --reads (plus /proc/PID/cmdline at each exec, as ste must); --split 20: exec
#      events on a socket of their own, the only one that wakes it (fork and exit drained
#      every 20 ms); --in-time: scheduled as ste's reader (nice -10, the shortest slice), so
#      its reads come before the process ends (without it most of the loop's are too late);
#      --batch 5: never prompt (too late for argv), the cost of sending alone;
#    - ste with each tracker, with and without its accounting (taskstats, cgroup), and netlink
#      with its reader thread at nice 0 instead of -10 (STE_TRACKER_NICE=0: cheaper for the
#      loop, more argv gone before they are read; section 2 counts them); ste ebpf (root's
#      default), for comparison.
# 2. ste's own CPU per process of the loop (its JSON `overhead.cpu_ns`), the sampler's rounds
#    and cost, argv lost by netlink, for each tracker (median of CPU_RUNS=5 runs); the netlink
#    floor's own CPU, for comparison.
# 3. The floor tracer's stop-to-PTRACE_CONT latency per kind of stop, with and without reads,
#    and (4., with perf) the same for ste's tracer through `perf trace` (bench/ptrace_stops.py).
#
# Budgets (issue 2): ptrace ≤ 1.15× bare, netlink ≤ 1.05× bare. A tracker cannot cost less
# than its floor: where the floor is above the budget, the budget cannot be met on this
# machine. Results: bench/results/trackers-cost*.
source "$(dirname "$0")/lib.sh"
need python3 cc

RUNS=${RUNS:-20}
LOOP='i=0; while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done'
FLOOR="$RESULTS/ptrace_floor"
NLFLOOR="$RESULTS/netlink_floor"
cc -O2 -o "$FLOOR" "$BENCH_DIR/ptrace_floor.c"
cc -O2 -o "$NLFLOOR" "$BENCH_DIR/netlink_floor.c"

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 "$BENCH_DIR/paired.py" --runs "$RUNS" --warmup 1 --json "$RESULTS/trackers-cost.json" \
    --title "The trackers against their floors: fork loop, 2,000 /bin/true" \
    "bare=sh -c '$LOOP'" \
    "ptrace floor=$FLOOR -- sh -c '$LOOP'" \
    "ptrace floor + reads=$FLOOR --reads -- sh -c '$LOOP'" \
    "ste ptrace=$STE --tracker ptrace -o /dev/null -- sh -c '$LOOP'" \
    "ste ptrace --no-accounting=$STE --tracker ptrace --no-accounting -o /dev/null -- sh -c '$LOOP'" \
    "netlink floor=$NLFLOOR -- sh -c '$LOOP'" \
    "netlink floor + reads=$NLFLOOR --reads -- sh -c '$LOOP'" \
    "netlink floor, split + reads=$NLFLOOR --split 20 --reads -- sh -c '$LOOP'" \
    "netlink floor, split + reads in time=$NLFLOOR --split 20 --reads --in-time -- sh -c '$LOOP'" \
    "netlink floor, batched=$NLFLOOR --batch 5 -- sh -c '$LOOP'" \
    "ste netlink=$STE --tracker netlink -o /dev/null -- sh -c '$LOOP'" \
    "ste netlink --no-accounting=$STE --tracker netlink --no-accounting -o /dev/null -- sh -c '$LOOP'" \
    "ste netlink, reader at nice 0=env STE_TRACKER_NICE=0 $STE --tracker netlink -o /dev/null -- sh -c '$LOOP'" \
    "ste ebpf=$STE --tracker ebpf -o /dev/null -- sh -c '$LOOP'" \
    | tee "$RESULTS/trackers-cost.md"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

for t in ptrace netlink; do
    for acc in "" --no-accounting nice0; do
        nice=-10
        [ "$acc" = nice0 ] && { acc=; nice=0; }
        for r in $(seq "${CPU_RUNS:-5}"); do
            STE_TRACKER_NICE=$nice "$STE" --tracker $t $acc -o /dev/null --json "$RESULTS/trackers-cost-run.json" -- sh -c "$LOOP"
            python3 - "$RESULTS/trackers-cost-run.json" "$t${acc:+ $acc}, tracker at nice $nice" <<'EOF'
import json, sys
j = json.load(open(sys.argv[1]))
print(sys.argv[2], j['overhead']['cpu_ns'], j['totals']['processes'], j['sampler']['rounds'],
      j['sampler']['cpu_ns'], j['totals']['wall_ns'], j['overhead']['lost']['argv_unread'], sep='\t')
EOF
        done
    done
done > "$RESULTS/trackers-cost-cpu.tsv"
rm -f "$RESULTS/trackers-cost-run.json"

python3 - "$RESULTS" <<'EOF'
import json, statistics, sys
r = sys.argv[1]
rows = {}
for line in open(f"{r}/trackers-cost-cpu.tsv"):
    name, cpu, procs, rounds, scpu, wall, unread = line.rstrip("\n").split("\t")
    rows.setdefault(name, []).append((int(cpu), int(procs), int(rounds), int(scpu), int(wall), int(unread)))
print()
print("| ste | its CPU per process (median) | sampler rounds | sampler CPU (% of wall) | argv unread |")
print("|---|---|---|---|---|")
for name, v in rows.items():
    m = lambda f: statistics.median(f(x) for x in v)
    print(f"| {name} | {m(lambda x: x[0] / x[1] / 1000):.0f} µs | {m(lambda x: x[2]):.0f} | "
          f"{m(lambda x: x[3] / 1e6):.1f} ms ({m(lambda x: 100 * x[3] / x[4]):.2f} %) | {m(lambda x: x[5]):.0f} |")
EOF

echo
echo "The netlink floor's own CPU on the loop (events received, its user+sys):"
for reads in "" --reads "--reads --in-time"; do
    echo "  netlink_floor ${reads:-(no reads)}: $("$NLFLOOR" $reads -- sh -c "$LOOP" 2>&1 >/dev/null | sed 's/^netlink_floor: //')"
done

echo
echo "The floor tracer's stops (time from waitpid returning the stop to its PTRACE_CONT):"
for reads in "" --reads; do
    echo "ptrace_floor ${reads:-(no reads)}:"
    "$FLOOR" $reads --latency -- sh -c "$LOOP" 2>&1 | sed 's/^ptrace_floor: /  /'
done

# 4. The same latency for ste's tracer, read from `perf trace` (which adds to every traced call:
#    compare only with the floor measured the same way).
if command -v perf >/dev/null; then
    echo
    echo "Stops seen through perf trace (1,000 turns):"
    LOOP1K='i=0; while [ $i -lt 1000 ]; do /bin/true; i=$((i+1)); done'
    for who in "ste-ptrace:$STE --tracker ptrace --no-accounting -o /dev/null --" "ptrace_floor:$FLOOR --reads --"; do
        perf trace -e wait4,ptrace -o "$RESULTS/trackers-cost-trace.txt" -- ${who#*:} sh -c "$LOOP1K" 2>/dev/null
        echo "${who%%:*}:"
        python3 "$BENCH_DIR/ptrace_stops.py" "$RESULTS/trackers-cost-trace.txt" "${who%%:*}" | sed 's/^/  /'
    done
    rm -f "$RESULTS/trackers-cost-trace.txt"
fi
