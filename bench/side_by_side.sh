#!/usr/bin/env bash
# Every tracker against its floor and the peers, in one paired run per workload (issue 18):
#
#   BEFORE=/path/to/older/ste bench/side_by_side.sh          # RUNS=20, TRUE_RUNS=40
#   RUNS=30 BEFORE=... bench/side_by_side.sh loop build true # a subset of the workloads
#   GIT_SRC=/path/to/git-2.39 BIG_RUNS=4 bench/side_by_side.sh git
#
# Workloads: `loop` (2,000 /bin/true from sh), `build` (make -j2 of bench/small_project.sh's 40
# files, `make clean` before every command), `true` (back to back: each run of ste or a floor
# may wait in its attach for the previous one's detach, see bench/README.md), `true-spaced`
# (the same with 50 ms between commands, as a run alone meets it); and two long ones, with bare and ste
# only (each tracker, and BEFORE's default): `git` (make -j2 of git's source tree, GIT_SRC,
# e.g. from `apt-get source git`; ~1,700 processes, ~45 s) and `scale` (50,000 /bin/true).
# Each paired run (bench/paired.py: every round runs each command once, in a fresh random
# order; ratios within the round) has, side by side:
#   - the bare command;
#   - ste with each tracker (ebpf is root's default), and the same with BEFORE (an older build
#     of ste) when given;
#   - each tracker's floor: examples/ebpf_floor.rs woken per record and drained every 10 ms,
#     and the latter with the command in a cgroup made as ste's accounting makes it (the
#     kernel's price of the group); ste with its memory sampler all but off (0.01 % of a core,
#     the sampler's share of ste's cost);
#     bench/ptrace_floor.c with the reads ste makes at the stops; bench/netlink_floor.c with
#     the argv reads, on one socket and split (exec events alone wake it), and split with its
#     listener scheduled as ste's reader is (--in-time: nice -10, the shortest slice), the
#     only one that reads the argv of nearly every exec before the process ends, as ste must;
#     and those two (the ptrace floor, the netlink floor in time) in a cgroup made as ste's
#     accounting makes it (examples/in_cgroup.rs), each tracker's budget taken against both;
#   - the peers: `perf stat` (software counters: this VM has no hardware ones),
#     `/usr/bin/time -v`, `strace -f -c`.
# Then ste's own CPU per tracker on one run (its JSON `overhead.cpu_ns`).
# Results: bench/results/side-by-side-*.{md,json}.
source "$(dirname "$0")/lib.sh"
need python3 cc perf strace

RUNS=${RUNS:-20}
TRUE_RUNS=${TRUE_RUNS:-40}
BEFORE=${BEFORE:-}
[ -n "$BEFORE" ] && BEFORE=$(fresh_copy "$BEFORE" ste-before)
WORKLOADS=("$@")
[ ${#WORKLOADS[@]} -eq 0 ] && WORKLOADS=(loop build true)

EBPF_FLOOR=$(fresh_copy "$RELEASE/examples/ebpf_floor" ebpf_floor)
IN_CGROUP=$(fresh_copy "$RELEASE/examples/in_cgroup" in_cgroup)
PTRACE_FLOOR="$RESULTS/ptrace_floor"
NETLINK_FLOOR="$RESULTS/netlink_floor"
cc -O2 -o "$PTRACE_FLOOR" "$BENCH_DIR/ptrace_floor.c"
cc -O2 -o "$NETLINK_FLOOR" "$BENCH_DIR/netlink_floor.c"
PROJECT="$RESULTS/side-by-side-project"
"$BENCH_DIR/small_project.sh" "$PROJECT"

# The commands around WORK (a shell command line), one NAME=COMMAND per line; with `short`,
# only bare, ste with each tracker and BEFORE's default.
commands() {
    local work=$1 short=${2:-}
    echo "bare=$work"
    if [ -n "$short" ]; then
        for t in ebpf ptrace netlink; do
            echo "ste $t=$STE --tracker $t -q -o /dev/null -- $work"
        done
        [ -n "$BEFORE" ] && echo "before ebpf=$BEFORE -q -o /dev/null -- $work"
        return 0
    fi
    for t in ebpf ptrace netlink; do
        echo "ste $t=$STE --tracker $t -q -o /dev/null -- $work"
        [ -n "$BEFORE" ] && echo "before $t=$BEFORE --tracker $t -q -o /dev/null -- $work"
    done
    echo "ebpf floor=$EBPF_FLOOR -- $work"
    echo "ebpf floor, 10 ms timer=$EBPF_FLOOR --timer 10 -- $work"
    echo "ebpf floor, 10 ms timer, cgroup=$EBPF_FLOOR --timer 10 --cgroup -- $work"
    echo "ste ebpf, sampler off=$STE --sample-budget 0.01 -q -o /dev/null -- $work"
    echo "ptrace floor + reads=$PTRACE_FLOOR --reads -- $work"
    echo "ptrace floor + reads, cgroup=$IN_CGROUP -- $PTRACE_FLOOR --reads -- $work"
    echo "netlink floor + reads=$NETLINK_FLOOR --reads -- $work"
    echo "netlink floor split + reads=$NETLINK_FLOOR --split 20 --reads -- $work"
    echo "netlink floor split + reads in time=$NETLINK_FLOOR --split 20 --reads --in-time -- $work"
    echo "netlink floor split + reads in time, cgroup=$IN_CGROUP -- $NETLINK_FLOOR --split 20 --reads --in-time -- $work"
    echo "perf stat=perf stat -o /dev/null -- $work"
    echo "time -v=/usr/bin/time -v -o /dev/null $work"
    echo "strace -f -c=strace -f -c -o /dev/null $work"
}

paired() {
    local name=$1 work=$2 runs=$3 title=$4 short=$5
    shift 5
    local args=()
    while IFS= read -r line; do args+=("$line"); done < <(commands "$work" "$short")
    echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
    python3 "$BENCH_DIR/paired.py" --runs "$runs" --warmup 1 "$@" \
        --json "$RESULTS/side-by-side-$name.json" --title "$title" "${args[@]}" \
        | tee "$RESULTS/side-by-side-$name.md"
    echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
}

# Each tracker against its floor within the rounds (the budgets "within N % of its floor").
FLOORS=(--against "ste ebpf/ebpf floor, 10 ms timer, cgroup"
    --against "ste ptrace/ptrace floor + reads"
    --against "ste ptrace/ptrace floor + reads, cgroup"
    --against "ste netlink/netlink floor split + reads in time"
    --against "ste netlink/netlink floor split + reads in time, cgroup")

LOOP="sh -c 'i=0; while [ \$i -lt 2000 ]; do /bin/true; i=\$((i+1)); done'"
for w in "${WORKLOADS[@]}"; do
    case $w in
    loop) paired loop "$LOOP" "$RUNS" "Fork loop: 2,000 /bin/true" "" "${FLOORS[@]}" ;;
    build) paired build "make -s -j2 -C $PROJECT" "$RUNS" "make -j2 of 40 files" "" \
        --prepare "make -s -C $PROJECT clean" "${FLOORS[@]}" ;;
    true) paired true "true" "$TRUE_RUNS" "true" "" ;;
    true-spaced) paired true-spaced "true" "$TRUE_RUNS" "true, 50 ms between commands" "" \
        --prepare "sleep 0.05" ;;
    git)
        [ -d "${GIT_SRC:-}" ] || { echo "bench: set GIT_SRC to a git source tree" >&2; exit 2; }
        GIT_MAKE="make -s -j2 -C $GIT_SRC NO_CURL=1 NO_GETTEXT=1 NO_TCLTK=1 NO_PERL=1 NO_PYTHON=1"
        paired git "$GIT_MAKE all" "${BIG_RUNS:-4}" "make -j2 of git" short \
            --warmup 0 --prepare "$GIT_MAKE clean >/dev/null" ;;
    scale) paired scale "sh -c 'i=0; while [ \$i -lt 50000 ]; do /bin/true; i=\$((i+1)); done'" \
        "${BIG_RUNS:-4}" "Fork loop: 50,000 /bin/true" short --warmup 0 ;;
    *) echo "bench: unknown workload $w (loop, build, true, true-spaced, git, scale)" >&2; exit 2 ;;
    esac
done

echo
echo "ste's own CPU on one run of the fork loop (JSON overhead.cpu_ns):"
for t in ebpf ptrace netlink; do
    "$STE" --tracker "$t" -q -o /dev/null --json "$RESULTS/side-by-side-cpu.json" -- \
        sh -c 'i=0; while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done'
    python3 -c "import json,sys; d=json.load(open(sys.argv[1])); o=d['overhead']; print(f'  $t: {o[\"cpu_ns\"]/1e6:.1f} ms, lost {o[\"lost\"]}')" \
        "$RESULTS/side-by-side-cpu.json"
done
