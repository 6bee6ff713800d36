/*
 * The floor of malloc interposition: an LD_PRELOAD library that forwards malloc, free, calloc
 * and realloc to glibc and counts nothing. Whatever any LD_PRELOAD interposer costs on this
 * machine, this pays: the program's call now lands in the preloaded library (its PLT slot
 * resolves there) and is passed on to glibc through one more indirect jump. bench/memory.sh
 * builds it twice and runs the malloc loop under each, next to ste's shim (shim/ste_malloc.c):
 *
 *   cc -O2 -fPIC -shared -o malloc_floor.so bench/malloc_floor.c -ldl
 *       tail calls (`jmp`): the least an interposer can add;
 *   cc -O2 -fPIC -shared -DLOOK_AT_RESULT -o malloc_floor_call.so bench/malloc_floor.c -ldl
 *       malloc, calloc and realloc call glibc and return its result through a compiler barrier,
 *       as any interposer that looks at the block it got back must (ste's shim reads the
 *       block's header): a real call and return, with its frame, instead of a jump.
 *
 * The targets are found with dlsym(RTLD_NEXT), as ste's shim finds them; before that (dlsym
 * may allocate) calls go straight to glibc's __libc_* entry points.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);

static void *(*next_malloc)(size_t) = __libc_malloc;
static void (*next_free)(void *) = __libc_free;
static void *(*next_calloc)(size_t, size_t) = __libc_calloc;
static void *(*next_realloc)(void *, size_t) = __libc_realloc;

__attribute__((constructor)) static void init(void) {
    void *m = dlsym(RTLD_NEXT, "malloc"), *f = dlsym(RTLD_NEXT, "free");
    void *c = dlsym(RTLD_NEXT, "calloc"), *r = dlsym(RTLD_NEXT, "realloc");
    if (m && f && c && r) {
        next_malloc = m;
        next_free = f;
        next_calloc = c;
        next_realloc = r;
    }
}

#ifdef LOOK_AT_RESULT
/* The result passes through a register the compiler must assume is read: no tail call. */
#define RETURN(p)                                                                                 \
    do {                                                                                          \
        void *r_ = (p);                                                                           \
        __asm__ volatile("" : "+r"(r_));                                                          \
        return r_;                                                                                \
    } while (0)
#else
#define RETURN(p) return (p)
#endif

void *malloc(size_t n) {
    RETURN(next_malloc(n));
}

void free(void *p) {
    next_free(p);
}

void *calloc(size_t k, size_t n) {
    RETURN(next_calloc(k, n));
}

void *realloc(void *p, size_t n) {
    RETURN(next_realloc(p, n));
}
