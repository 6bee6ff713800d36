#!/usr/bin/env bash
# The ptrace and netlink trackers' cost on the fork loop (issue 2), against its floor.
#
#   bench/trackers_cost.sh              # RUNS=10 by default
#   RUNS=5 bench/trackers_cost.sh
#
# 1. One hyperfine run, side by side: the bare loop; bench/ptrace_floor.c, a minimal tracer with
#    ste's ptrace options that only restarts each stop (the cost of the stops alone), and with
#    --reads (plus the /proc reads ste needs at them: argv at exec, status and io at exit);
#    ste with each tracker, with and without its accounting (taskstats, cgroup).
# 2. ste's own CPU per process of the loop (its JSON `overhead.cpu_ns`), the sampler's rounds
#    and cost, argv lost by netlink, for each tracker (median of RUNS runs).
# 3. The floor tracer's stop-to-PTRACE_CONT latency per kind of stop, with and without reads,
#    and (4., with perf) the same for ste's tracer through `perf trace` (bench/ptrace_stops.py).
#
# Budgets (issue 2): ptrace ≤ 1.15× bare, netlink ≤ 1.05× bare. Wall times on a shared
# machine are noisy: compare within one hyperfine run, and read the CPU figures alongside.
# Results: bench/results/trackers-cost*.
source "$(dirname "$0")/lib.sh"
need hyperfine python3 cc

RUNS=${RUNS:-10}
LOOP='i=0; while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done'
FLOOR="$RESULTS/ptrace_floor"
cc -O2 -o "$FLOOR" "$BENCH_DIR/ptrace_floor.c"

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
hyperfine -N --warmup 1 --runs "$RUNS" \
    --export-json "$RESULTS/trackers-cost.json" --export-markdown "$RESULTS/trackers-cost.md" \
    -n bare "sh -c '$LOOP'" \
    -n "ptrace floor" "$FLOOR -- sh -c '$LOOP'" \
    -n "ptrace floor + reads" "$FLOOR --reads -- sh -c '$LOOP'" \
    -n "ste ptrace" "$STE --tracker ptrace -o /dev/null -- sh -c '$LOOP'" \
    -n "ste ptrace --no-accounting" "$STE --tracker ptrace --no-accounting -o /dev/null -- sh -c '$LOOP'" \
    -n "ste netlink" "$STE --tracker netlink -o /dev/null -- sh -c '$LOOP'" \
    -n "ste netlink --no-accounting" "$STE --tracker netlink --no-accounting -o /dev/null -- sh -c '$LOOP'"
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"

for t in ptrace netlink; do
    for acc in "" --no-accounting; do
        for r in $(seq "$RUNS"); do
            "$STE" --tracker $t $acc -o /dev/null --json "$RESULTS/trackers-cost-run.json" -- sh -c "$LOOP"
            python3 - "$RESULTS/trackers-cost-run.json" "$t${acc:+ $acc}" <<'EOF'
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
res = json.load(open(f"{r}/trackers-cost.json"))["results"]
bare = res[0]["mean"]
print("| command | mean | × bare | user + sys (all processes) |")
print("|---|---|---|---|")
for x in res:
    print(f"| {x['command']} | {x['mean']*1000:.0f} ms ± {x['stddev']*1000:.0f} | {x['mean']/bare:.3f} | {(x['user']+x['system'])*1000:.0f} ms |")
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
