#!/usr/bin/env bash
# Writes the small offline C project the paired build benchmarks compile (40 translation units
# of a few lines each, a main and a Makefile with `clean`) into DIR:
#   bench/small_project.sh DIR
set -euo pipefail
SRC=$1
mkdir -p "$SRC"
for i in $(seq 1 40); do
  cat > "$SRC/f$i.c" <<C
#include <stdio.h>
#include <string.h>
static int table[4096];
int f$i(int n) { for (int k = 0; k < 4096; k++) table[k] = k * n + $i; return table[n % 4096]; }
int g$i(const char *s) { char buf[256]; snprintf(buf, sizeof buf, "%s-%d", s, f$i($i)); return (int)strlen(buf); }
C
done
printf 'int main(void){return 0;}\n' > "$SRC/main.c"
cat > "$SRC/Makefile" <<'M'
OBJS := $(patsubst %.c,%.o,$(wildcard *.c))
prog: $(OBJS)
	$(CC) -o $@ $^
%.o: %.c
	$(CC) -O2 -c -o $@ $<
clean:
	rm -f *.o prog
M
