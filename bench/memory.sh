#!/usr/bin/env bash
# Overhead of issue 6's memory anatomy, side by side with the bare command (hyperfine):
#   1. `ste --malloc` on a malloc-heavy loop (target: ≤ 1.10× bare), in two forms: blocks
#      barely touched (the worst case: nothing but malloc and free) and blocks filled; and on
#      a real program that lives on malloc (perl filling and emptying a hash);
#   2. `ste maps` on a process holding 4 GiB, as root (target: ≤ 1 s).
# Run as root from anywhere: bench/memory.sh. N (loop rounds) and GIB can be overridden.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release --quiet --examples
STE=$PWD/target/release/ste
FX=$PWD/target/release/examples/memory_fixture
N=${N:-20000000}
GIB=${GIB:-4}

echo "== --malloc on a malloc-heavy loop ($N rounds of free + malloc)"
hyperfine -N --warmup 2 --runs 10 \
  -n "bare, blocks touched" "$FX malloc-loop $N" \
  -n "ste --malloc, blocks touched" "$STE --malloc --output /dev/null -- $FX malloc-loop $N" \
  -n "ste, blocks touched" "$STE --output /dev/null -- $FX malloc-loop $N" \
  -n "bare, blocks filled" "$FX malloc-loop $N fill" \
  -n "ste --malloc, blocks filled" "$STE --malloc --output /dev/null -- $FX malloc-loop $N fill" \
  -n "ste, blocks filled" "$STE --output /dev/null -- $FX malloc-loop $N fill"

# A real program that lives on malloc: perl (Debian's is built with glibc's malloc) filling a
# hash of a million strings of 0–199 bytes, then emptying it: ~5 million malloc-family calls.
PERL_HASH='my %h; for my $i (1..1000000) { $h{$i} = "x" x ($i % 200); } my $n = 0; for my $k (keys %h) { $n += length $h{$k}; delete $h{$k}; } exit($n == 99500000 ? 0 : 1);'
echo "== --malloc on perl building and emptying a hash of a million strings"
hyperfine -N --warmup 1 --runs 5 \
  -n "bare, perl hash" "perl -e '$PERL_HASH'" \
  -n "ste --malloc, perl hash" "$STE --malloc --output /dev/null -- perl -e '$PERL_HASH'" \
  -n "ste, perl hash" "$STE --output /dev/null -- perl -e '$PERL_HASH'"

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
