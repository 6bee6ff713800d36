# Shared helpers for the bench scripts: build ste and the fixtures in release mode, and make the
# offline multi-process build used as the "real build" workload. Source it; it defines:
#   RELEASE            where cargo puts release builds (target/HOST-TRIPLE/release: the build
#                      names its target, .cargo/config.toml says why)
#   STE, FIXTURE       release binaries (STE a fresh copy: see fresh_copy)
#   fresh_copy BIN NAME  copy BIN afresh under RESULTS/fresh and print the copy's path
#   RESULTS            bench/results (git-ignored), where hyperfine exports go
#   make_c_project DIR N   write a C project of N translation units and a Makefile into DIR
#   need CMD...        fail with a message if a tool is missing

set -euo pipefail
BENCH_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$BENCH_DIR/.." && pwd)
RESULTS="$BENCH_DIR/results"
mkdir -p "$RESULTS"

need() {
    for c in "$@"; do
        command -v "$c" >/dev/null || { echo "bench: $c is needed (apt-get install $c)" >&2; exit 1; }
    done
}

(cd "$ROOT" && cargo build --release --quiet --bin ste --examples)
RELEASE="$ROOT/target/$(rustc -vV | sed -n 's/^host: //p')/release"
FIXTURE="$RELEASE/examples/fixture"

# The builds a bench compares run from copies made at its start, side by side: the page cache
# of a binary as the linker wrote it, or of a copy made long before, cost `ste true` up to
# 0.5 ms more than a fresh copy of the same file (13-18 more page faults: bench/README.md),
# more than the differences these benches look for.
fresh_copy() {
    mkdir -p "$RESULTS/fresh"
    cp "$1" "$RESULTS/fresh/$2"
    echo "$RESULTS/fresh/$2"
}
STE=$(fresh_copy "$RELEASE/ste" ste)

# A C project whose build is real gcc work: each unit has a few hundred lines of functions so
# cc1 runs for tens of milliseconds, as in a real build; make -j runs them in parallel and links.
make_c_project() {
    local dir=$1 n=$2
    mkdir -p "$dir"
    : > "$dir/units.mk"
    for i in $(seq 1 "$n"); do
        {
            echo "#include <stdio.h>"
            echo "#include <string.h>"
            echo "#include <stdlib.h>"
            for f in $(seq 1 40); do
                echo "static int f${f}(const char *s, int k) { int h = k; for (size_t j = 0; j < strlen(s); j++) h = h * 31 + s[j] * ${f}; if (h % 7 == ${f} % 7) h ^= (int)strtol(s, 0, 10); return h; }"
            done
            echo "int unit_${i}(int argc) { int acc = 0;"
            for f in $(seq 1 40); do echo "  acc += f${f}(\"unit ${i} fn ${f}\", argc);"; done
            echo "  return acc; }"
        } > "$dir/u$i.c"
        echo "OBJS += u$i.o" >> "$dir/units.mk"
    done
    {
        echo "#include <stdio.h>"
        for i in $(seq 1 "$n"); do echo "int unit_${i}(int);"; done
        echo "int main(int argc, char **argv) { long t = 0;"
        for i in $(seq 1 "$n"); do echo "  t += unit_${i}(argc);"; done
        echo "  printf(\"%ld\\n\", t); return 0; }"
    } > "$dir/main.c"
    cat > "$dir/Makefile" <<'EOF'
include units.mk
CFLAGS ?= -O2
prog: main.o $(OBJS)
	$(CC) -o $@ $^
%.o: %.c
	$(CC) $(CFLAGS) -c -o $@ $<
clean:
	rm -f prog *.o
.PHONY: clean
EOF
}
