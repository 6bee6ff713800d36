#!/usr/bin/env bash
# Reports on big runs (issue 5), rerunnable by anyone:
#  1. `ste report` of a synthetic record of N processes (default 100,000; made by
#     examples/reports_fixture.rs) as a root run records it (with the cgroup's and taskstats'
#     events): text (budget: under 2 s), HTML, Perfetto and CSV, side by side in one hyperfine
#     run, with text and HTML of the same record without accounting events (an unprivileged
#     netlink run's); the size of each output;
#  2. whether the HTML stays usable: its size, and how long headless Chromium takes from the
#     page's script starting to everything drawn (the page reports it in #ste-status);
#  3. what recording costs: bare, `ste` and `ste record` on the 2,000-exec shell loop.
# Usage: bench/reports.sh [PROCESSES]. Needs hyperfine; step 2 needs chromium (.ci/run).
# Results go to bench/results/reports/.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-100000}
OUT=bench/results/reports
mkdir -p "$OUT"
cargo build --release --bins --examples -q
RELEASE=$PWD/target/$(rustc -vV | sed -n 's/^host: //p')/release
STE=$RELEASE/ste
FIX=$RELEASE/examples/reports_fixture
REC=$OUT/synth-$N.ste
PLAIN=$OUT/synth-$N-no-accounting.ste

"$FIX" synth-record "$N" "$REC"
"$FIX" synth-record "$N" "$PLAIN" --no-accounting
for r in "$REC" "$PLAIN"; do
  echo "record $(basename "$r"): $(stat -c %s "$r") bytes ($(zcat "$r" | wc -c) bytes of JSON lines, $(zcat "$r" | wc -l) lines)"
done

# 1. Rendering, side by side.
hyperfine --warmup 1 --runs 5 --export-markdown "$OUT/render-$N.md" \
  -n text "$STE report $REC -o $OUT/synth.txt" \
  -n "text, no accounting" "$STE report $PLAIN -o $OUT/synth-plain.txt" \
  -n html "$STE report $REC -f html -o $OUT/synth.html" \
  -n "html, no accounting" "$STE report $PLAIN -f html -o $OUT/synth-plain.html" \
  -n perfetto "$STE report $REC -f perfetto -o $OUT/synth.trace.json" \
  -n csv "$STE report $REC -f csv-processes -o $OUT/synth.csv"
for f in synth.txt synth.html synth-plain.html synth.trace.json synth.csv; do
  echo "$f: $(stat -c %s "$OUT/$f") bytes"
done

# 2. The HTML in a browser.
if command -v chromium >/dev/null; then
  for i in 1 2 3; do
    profile=$(mktemp -d)
    chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
      --disable-background-networking --disable-component-update --disable-sync \
      --user-data-dir="$profile" --virtual-time-budget=60000 --dump-dom \
      "file://$PWD/$OUT/synth.html" 2>/dev/null |
      grep -o '<pre id="ste-status"[^<]*' | sed 's/.*>//' | tee -a "$OUT/html-status-$N.txt"
    echo
    rm -rf "$profile"
  done
else
  echo "chromium is not installed (.ci/run installs it): skipping the browser measurement" >&2
fi

# 3. The cost of recording on the fork loop.
LOOP='i=0; while [ $i -lt 2000 ]; do /bin/true; i=$((i+1)); done'
hyperfine --warmup 1 --runs 10 --export-markdown "$OUT/record-overhead.md" \
  -n bare "sh -c '$LOOP'" \
  -n ste "$STE -o /dev/null -- sh -c '$LOOP'" \
  -n "ste record" "$STE record -o $OUT/loop.ste --report-file /dev/null -- sh -c '$LOOP'" \
  -n "ste --html --perfetto" "$STE -o /dev/null --html $OUT/loop.html --perfetto $OUT/loop.trace.json -- sh -c '$LOOP'"
echo "loop record: $(stat -c %s "$OUT/loop.ste") bytes; html $(stat -c %s "$OUT/loop.html"); perfetto $(stat -c %s "$OUT/loop.trace.json")"
