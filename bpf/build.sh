#!/bin/sh
# Regenerates the committed BPF objects (bpf/*.bpf.o) from their sources (bpf/*.bpf.c).
#
#   bpf/build.sh          rebuild them in place
#   bpf/build.sh DIR      build them into DIR (the reproducibility test compares those)
#
# Needs clang 14 (Debian 12's), llvm (llvm-strip) and libbpf-dev (bpf_helpers.h); `.ci/run`
# installs them. `cargo build` does not run this: the objects are committed, so building ste
# needs no clang. The build is reproducible: relative source paths, no DWARF and no local labels
# in the output (the loader needs only the .BTF section, where the maps are defined), nothing
# from the build machine.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
mkdir -p "$out"
out=$(cd "$out" && pwd)
want=14
have=$(clang --version | sed -n 's/.*clang version \([0-9]*\)\..*/\1/p' | head -n 1)
if [ "$have" != "$want" ]; then
	echo "bpf/build.sh: clang $want is needed (found '${have:-none}'): another version emits other bytes" >&2
	exit 1
fi
cd "$here"
for src in *.bpf.c; do
	obj="$out/${src%.c}.o"
	clang -O2 -g -target bpf -mcpu=v3 -D__TARGET_ARCH_x86 \
		-I"/usr/include/$(clang -print-multiarch)" \
		-fdebug-compilation-dir=. -fdebug-prefix-map="$here"=. \
		-Wall -Werror -c "$src" -o "$obj"
	# Without the compiler's local labels (LBB*): no relocation names them, and the loader
	# reads every symbol of the object at each run.
	llvm-strip -g --discard-all "$obj"
done
