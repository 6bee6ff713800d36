/*
 * A program with its own allocator: it defines malloc and friends (a bump allocator over a
 * static arena), so neither glibc's malloc nor ste's shim sees its calls. For the test that
 * `ste --malloc` reports such a program instead of showing it empty.
 */
#include <stddef.h>
#include <string.h>

static char arena[1 << 20] __attribute__((aligned(16)));
static size_t used;

void *malloc(size_t n) {
    size_t at = used;
    used += (n + 15) & ~(size_t)15;
    return used <= sizeof arena ? arena + at : NULL;
}

void free(void *p) {
    (void)p;
}

void *calloc(size_t k, size_t n) {
    void *p = malloc(k * n);
    if (p)
        memset(p, 0, k * n);
    return p;
}

void *realloc(void *old, size_t n) {
    void *p = malloc(n);
    if (p && old)
        memcpy(p, old, n);
    return p;
}

int main(void) {
    for (int i = 0; i < 100; i++) {
        char *p = malloc(100);
        p[0] = (char)i;
        free(p);
    }
    return 0;
}
