/*
 * A program that takes malloc's address in its code and calls glibc's malloc through it.
 * Linked without PIE, the reference is an absolute address, so the link gives malloc a
 * canonical address inside the program: its dynamic symbol table holds malloc undefined but
 * with a value (its PLT entry), and dlsym(RTLD_DEFAULT, "malloc") returns that address, as
 * with Debian's python3. The test checks that ste's shim still counts the calls as glibc's
 * rather than report a malloc of the program's own.
 */
#include <stdlib.h>

int main(void) {
    void *(*volatile take)(size_t);
    take = malloc;
    for (int i = 0; i < 1000; i++)
        free(take(32));
    return 0;
}
