#!/usr/bin/env bash
# ste's start-up (issue 2's budgets: `ste true` ≤ 5 ms more than `true`; ste's peak RSS ≤ 20 MiB
# on the fork loop), the slice of bench/core.sh that loading BPF decides, quick enough to rerun
# while changing the loader: `true`, `ste true` with each tracker and, with BEFORE=path, another
# ste binary's default (e.g. a build of an older commit) side by side in one hyperfine run;
# then each one's own CPU and peak RSS on `true` and on the fork loop (2,000 /bin/true).
#
#   bench/startup.sh                       # 100 runs each
#   RUNS=30 BEFORE=/tmp/old/ste bench/startup.sh
#
# Run as root to measure the ebpf tracker (the default as root). Results:
# bench/results/startup.{json,md}.
source "$(dirname "$0")/lib.sh"
need hyperfine python3

RUNS=${RUNS:-100}
FORK_LOOP="sh -c 'i=0; while [ \$i -lt 2000 ]; do /bin/true; i=\$((i+1)); done'"
TRACKERS=(ptrace netlink)
if [ "$(id -u)" = 0 ]; then TRACKERS=(ebpf ptrace netlink); fi

cmds=(-n true "true")
declare -A bins=()
for t in "${TRACKERS[@]}"; do
    cmds+=(-n "ste --tracker $t" "$STE --tracker $t -o /dev/null true")
    bins["ste --tracker $t"]="$STE --tracker $t"
done
if [ -n "${BEFORE:-}" ]; then
    cmds+=(-n "before: ste" "$BEFORE -o /dev/null true")
    bins["before: ste"]="$BEFORE"
fi
hyperfine -N --warmup 5 --runs "$RUNS" --export-json "$RESULTS/startup.json" \
    --export-markdown "$RESULTS/startup.md" "${cmds[@]}"

# Each one's own CPU and peak RSS, on `true` and on the fork loop.
for name in "${!bins[@]}"; do
    tag=${name//[^a-z]/_}
    ${bins[$name]} -o /dev/null --json "$RESULTS/startup-true-$tag.json" true
    eval "${bins[$name]} -o /dev/null --json $RESULTS/startup-forkloop-$tag.json -- $FORK_LOOP"
done

python3 - "$RESULTS" <<'EOF'
import json, sys
r = sys.argv[1]
res = json.load(open(f"{r}/startup.json"))["results"]
bare = res[0]
for x in res[1:]:
    tag = "".join(c if c.isalpha() and c.islower() else "_" for c in x["command"])
    t = json.load(open(f"{r}/startup-true-{tag}.json"))
    f = json.load(open(f"{r}/startup-forkloop-{tag}.json"))
    extra = (x["mean"] - bare["mean"]) * 1000
    med = (x["median"] - bare["median"]) * 1000
    print(f"`{x['command']}` − `true`: {extra:+.2f} ms mean, {med:+.2f} ms median "
          f"({x['mean']*1000:.2f} ms ± {x['stddev']*1000:.2f}); tracker {t['tracker']}, "
          f"ste's CPU {t['overhead']['cpu_ns']/1e6:.1f} ms, peak RSS {t['overhead']['max_rss_bytes']/2**20:.1f} MiB; "
          f"fork loop: peak RSS {f['overhead']['max_rss_bytes']/2**20:.1f} MiB")
EOF
