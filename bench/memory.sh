#!/usr/bin/env bash
# Overhead of issue 6's memory anatomy:
#   1. per malloc/free pair: the malloc loop timed inside the program in 200 chunks, the fastest
#      chunk's ns per round (`memory_fixture malloc-loop N chunks`), bare, under the interposition
#      floor (bench/malloc_floor.c: an LD_PRELOAD that only forwards, with tail calls, and with
#      a real call that looks at the result, as any counting interposer must), under plain ste
#      and under `ste --malloc`. The fastest chunk is the machine at its fastest, so these
#      compare across runs on a VM whose speed drifts by up to 2×;
#   2. whole runs against bare (target: `--malloc` on a malloc-heavy loop ≤ 1.10× bare), with
#      bench/paired.py (each round runs every command once in random order; the ratio is taken
#      within the round): the loop with blocks barely touched (the worst case: nothing but malloc
#      and free), with blocks filled (a program that uses what it allocates), and a real program
#      that lives on malloc (perl filling and emptying a hash);
#   3. `ste maps` on a process holding 4 GiB, as root (target: ≤ 1 s; absolute times, hyperfine).
# Run as root from anywhere: bench/memory.sh. N (loop rounds), GIB, ROUNDS (paired rounds, 20)
# and CHUNK_RUNS (per-pair runs, 7) can be overridden. Results: bench/results/memory-*.
source "$(dirname "$0")/lib.sh"
need hyperfine python3 cc perl
FX=$RELEASE/examples/memory_fixture
N=${N:-20000000}
GIB=${GIB:-4}
ROUNDS=${ROUNDS:-20}
CHUNK_RUNS=${CHUNK_RUNS:-7}
PAIRED=$BENCH_DIR/paired.py
FLOOR=$RESULTS/malloc_floor.so
FLOOR_CALL=$RESULTS/malloc_floor_call.so
cc -O2 -fPIC -shared -o "$FLOOR" "$BENCH_DIR/malloc_floor.c" -ldl
cc -O2 -fPIC -shared -DLOOK_AT_RESULT -o "$FLOOR_CALL" "$BENCH_DIR/malloc_floor.c" -ldl

echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
vmstat 1 3 | tail -1 | awk '{print "vmstat: us " $13 " sy " $14 " id " $15 " st " $17}'

echo "== ns per malloc/free round (fastest of 200 chunks of $((N / 200)) rounds; $CHUNK_RUNS runs in random order)"
python3 - "$CHUNK_RUNS" "$N" "$FX" "$FLOOR" "$FLOOR_CALL" "$STE" <<'EOF' | tee "$RESULTS/memory-per-round.md"
import os, random, statistics, subprocess, sys
runs, n, fx, floor, floor_call, ste = int(sys.argv[1]), sys.argv[2], *sys.argv[3:]
loop = [fx, "malloc-loop", n]
rows = [
    ("bare", [], {}),
    ("floor: forward by tail call", [], {"LD_PRELOAD": floor}),
    ("floor: forward by call (looks at the result)", [], {"LD_PRELOAD": floor_call}),
    ("ste", [ste, "-o", "/dev/null", "--"], {}),
    ("ste --malloc", [ste, "--malloc", "-o", "/dev/null", "--"], {}),
]
for fill in (False, True):
    got = {name: [] for name, _, _ in rows}
    for _ in range(runs):
        for name, pre, env in random.sample(rows, len(rows)):
            argv = pre + loop + (["fill"] if fill else []) + ["chunks"]
            out = subprocess.run(argv, env={**os.environ, **env}, check=True, capture_output=True, text=True).stdout
            line = next(l for l in out.splitlines() if l.startswith("ns-per-round "))
            got[name].append(float(line.split()[1]))
    base = min(got["bare"])
    print(f"\nblocks {'filled' if fill else 'barely touched'}:\n")
    print("| | ns per round, fastest chunk (min over runs) | median over runs | − bare (min) | × bare (min) |")
    print("|---|---|---|---|---|")
    for name, _, _ in rows:
        m = min(got[name])
        print(f"| {name} | {m:.2f} | {statistics.median(got[name]):.2f} | {m - base:+.2f} | {m / base:.3f} |")
EOF

# A real program that lives on malloc: perl (Debian's is built with glibc's malloc) filling a
# hash of a million strings of 0–199 bytes, then emptying it: ~5 million malloc-family calls.
PERL_HASH='my %h; for my $i (1..1000000) { $h{$i} = "x" x ($i % 200); } my $n = 0; for my $k (keys %h) { $n += length $h{$k}; delete $h{$k}; } exit($n == 99500000 ? 0 : 1);'
STE_Q="$STE -o /dev/null"
for fill in "" fill; do
    what=${fill:+blocks filled}
    what=${what:-blocks barely touched}
    echo
    "$PAIRED" --runs "$ROUNDS" --warmup 2 --json "$RESULTS/memory-loop${fill:+-fill}.json" \
        --title "--malloc on the malloc loop ($N rounds of free + malloc), $what" \
        "bare=$FX malloc-loop $N $fill" \
        "floor, tail call=env LD_PRELOAD=$FLOOR $FX malloc-loop $N $fill" \
        "floor, call=env LD_PRELOAD=$FLOOR_CALL $FX malloc-loop $N $fill" \
        "ste=$STE_Q -- $FX malloc-loop $N $fill" \
        "ste --malloc=$STE_Q --malloc -- $FX malloc-loop $N $fill"
done | tee "$RESULTS/memory-loop.md"
echo
"$PAIRED" --runs "$((ROUNDS / 2))" --warmup 1 --json "$RESULTS/memory-perl.json" \
    --title "--malloc on perl building and emptying a hash of a million strings" \
    "bare=perl -e '$PERL_HASH'" \
    "ste=$STE_Q -- perl -e '$PERL_HASH'" \
    "ste --malloc=$STE_Q --malloc -- perl -e '$PERL_HASH'" | tee "$RESULTS/memory-perl.md"

echo
echo "== ste maps on a process holding $GIB GiB"
if [ "$(id -u)" != 0 ]; then
    echo "(not root: page flags are not read, so this measures the unprivileged path)"
fi
fifo=$(mktemp -u)
mkfifo "$fifo"
"$FX" anon $((GIB * 1024)) nothp <"$fifo" >"$fifo.out" &
holder=$!
exec 3>"$fifo"
until grep -q ready "$fifo.out" 2>/dev/null; do sleep 0.1; done
cleanup() { exec 3>&-; wait "$holder" || true; rm -f "$fifo" "$fifo.out"; }
trap cleanup EXIT
hyperfine -N --warmup 1 --runs 5 --output null \
    -n "ste maps --summary ($GIB GiB)" "$STE maps --summary $holder" \
    -n "ste maps, every page range ($GIB GiB)" "$STE maps $holder"
