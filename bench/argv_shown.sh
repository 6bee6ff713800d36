#!/usr/bin/env bash
# How many of a build's execs each tracker shows with their argv: the small 40-file project
# (bench/small_project.sh) and a heavier one whose cc1 runs for tens of milliseconds
# (make_c_project, 40 units), `make -s -j2` from clean, RUNS times under each tracker.
#
#   bench/argv_shown.sh                     # RUNS=3
#   BEFORE=/path/to/older/ste bench/argv_shown.sh
#
# Prints, per run: execs, argv shown, unread (the process was gone before the read) and
# doubtful (it may have exec'd again first: `track::argv_check`). ptrace and ebpf read argv at
# the exec itself; netlink reads it from /proc on the exec's event.
source "$(dirname "$0")/lib.sh"
need python3 make cc

RUNS=${RUNS:-3}
SMALL="$RESULTS/argv-small"
HEAVY="$RESULTS/argv-heavy"
"$BENCH_DIR/small_project.sh" "$SMALL"
make_c_project "$HEAVY" 40
BUILDS=("$STE")
[ -n "${BEFORE:-}" ] && BUILDS+=("$(fresh_copy "$BEFORE" ste-before)")

for project in "$SMALL" "$HEAVY"; do
    for ste in "${BUILDS[@]}"; do
        for tracker in ebpf ptrace netlink; do
            for _ in $(seq 1 "$RUNS"); do
                make -s -C "$project" clean >/dev/null 2>&1 || true
                "$ste" --tracker "$tracker" -q -o /dev/null --json "$RESULTS/argv.json" \
                    -- make -s -j2 -C "$project" >/dev/null
                python3 - "$RESULTS/argv.json" "$(basename "$project")" "$(basename "$ste")" "$tracker" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
lost = run["overhead"]["lost"]
shown = sum(1 for p in run["processes"] for x in p["execs"] if x.get("argv") is not None)
print(f"{sys.argv[2]:12s} {sys.argv[3]:10s} {sys.argv[4]:8s} execs {run['totals']['execs']:4d}"
      f"  shown {shown:4d}  unread {lost['argv_unread']:3d}  doubtful {lost['argv_doubtful']:3d}")
PY
            done
        done
    done
done | tee "$RESULTS/argv-shown.txt"
