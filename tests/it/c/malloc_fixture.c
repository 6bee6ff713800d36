/*
 * Allocation patterns with a known answer, for the tests of `ste --malloc` (issue 6). Built by
 * the tests with the system's C compiler. No stdio: its buffers would add allocations the
 * tests do not expect; arrays of pointers come from mmap, not malloc, for the same reason.
 *
 *   count N SIZE        N mallocs of SIZE bytes, then N frees
 *   families            one call of each family: calloc(10, 100), realloc(NULL, 300),
 *                       memalign(64, 400), posix_memalign(128, 500), aligned_alloc(256, 512),
 *                       valloc(600); then one free of each (6 frees)
 *   arenas THREADS      THREADS threads, all alive at once, each mallocs 1000 blocks of 1 KiB
 *                       (each thread gets an arena of its own), then frees them
 *   large MIB           one malloc of MIB MiB (above the mmap threshold), written, freed;
 *                       then one of MIB/2 MiB, which glibc's raised threshold keeps in the heap
 *   fragment MIB HOLD   MIB MiB in blocks of 1,000 bytes, held HOLD ms; then frees all but
 *                       every 64th: the heap stays resident though the program holds 1/64 of
 *                       it; holds that HOLD ms
 *   scatter MIB HOLD BYTES
 *                       MIB MiB in blocks of BYTES bytes, written, then frees every other one:
 *                       free chunks that cannot merge, which every mallinfo2() walks; then for
 *                       HOLD ms one malloc + free per ms (so the shim answers ste's snapshot
 *                       requests), then exit()
 *   exec PROGRAM ARGS   exec PROGRAM (e.g. `env -i ...`), after one malloc of 100 bytes
 *   peak HOLD           the held peak (issue 20): 16 MiB in blocks of 1,000 bytes held HOLD ms;
 *                       then, for a few microseconds, 8 MiB more in blocks of 64 KiB (the
 *                       peak, which no periodic sample is likely to see); frees 3/4 of the
 *                       first blocks and holds the rest HOLD ms; frees everything
 *   threads T BLOCKS    the held peak of several threads: thread 0 hands 32 MiB of 1,000-byte
 *                       blocks to thread 1, which frees them (at most 16 in flight: each
 *                       thread's own account swings far, the image's hardly moves); then T
 *                       threads each hold BLOCKS blocks of 1,000 bytes at once (the peak), and
 *                       free them
 *   churn T N           T threads, each N rounds of free + malloc(16..1040) over 64 live blocks:
 *                       the malloc-heavy multi-threaded workload for the shim's cost
 *   truncate HOLD       one malloc, holds HOLD ms (ste maps its segment), then cuts its own
 *                       segment files to 0 bytes (ftruncate) and holds HOLD ms more without a
 *                       call; leaves with _exit (the shim's destructor would touch the cut
 *                       segment)
 * `peak` and `threads` print the chunk bytes they held at their peak to stderr
 * (`peak-chunk-bytes N`), from malloc_usable_size: a heap block's chunk is its usable size plus
 * glibc's 8-byte size word (every block here is below the mmap threshold).
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>
#include <stdio.h>

static void die(const char *why) {
    write(2, why, strlen(why));
    write(2, "\n", 1);
    _exit(2);
}

static long num(char **argv, int i) {
    if (!argv[i])
        die("usage: malloc_fixture count|families|arenas|large|fragment|scatter|peak|threads|churn|truncate|exec ARGS");
    return strtol(argv[i], NULL, 10);
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

static void **pointers(long n) {
    void **v = mmap(NULL, n * sizeof(void *), PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (v == MAP_FAILED)
        die("mmap");
    return v;
}

/* n blocks of `bytes` bytes, written. */
static void **blocks_of(long n, long bytes) {
    void **v = pointers(n);
    for (long i = 0; i < n; i++) {
        v[i] = malloc(bytes);
        if (!v[i])
            die("malloc");
        memset(v[i], 1, bytes);
    }
    return v;
}

static pthread_barrier_t barrier;

/* The chunk bytes of a heap block (see the header). */
static long chunk_of(void *p) {
    return (long)malloc_usable_size(p) + 8;
}

static void say_peak(long bytes) {
    char line[64], digits[24];
    int n = 0;
    do
        digits[n++] = (char)('0' + bytes % 10);
    while ((bytes /= 10) > 0);
    int k = 0;
    const char *head = "peak-chunk-bytes ";
    while (*head)
        line[k++] = *head++;
    while (n > 0)
        line[k++] = digits[--n];
    line[k++] = '\n';
    write(2, line, k);
}

/* `threads`: a ring of 16 pointers from thread 0 (producer) to thread 1 (consumer). */
#define RING 16
static void *ring[RING];
static unsigned long ring_head, ring_tail;
static long ring_blocks, hold_blocks;
static long hold_chunks;

static void *held_thread(void *arg) {
    long me = (long)arg;
    if (me == 0) {
        for (long i = 0; i < ring_blocks; i++) {
            void *p = malloc(1000);
            if (!p)
                die("malloc");
            while (__atomic_load_n(&ring_head, __ATOMIC_ACQUIRE) -
                       __atomic_load_n(&ring_tail, __ATOMIC_ACQUIRE) >=
                   RING)
                sched_yield();
            ring[ring_head % RING] = p;
            __atomic_store_n(&ring_head, ring_head + 1, __ATOMIC_RELEASE);
        }
    } else if (me == 1) {
        for (long i = 0; i < ring_blocks; i++) {
            while (__atomic_load_n(&ring_tail, __ATOMIC_ACQUIRE) ==
                   __atomic_load_n(&ring_head, __ATOMIC_ACQUIRE))
                sched_yield();
            free(ring[ring_tail % RING]);
            __atomic_store_n(&ring_tail, ring_tail + 1, __ATOMIC_RELEASE);
        }
    }
    pthread_barrier_wait(&barrier);
    void **v = blocks_of(hold_blocks, 1000);
    long mine = 0;
    for (long i = 0; i < hold_blocks; i++)
        mine += chunk_of(v[i]);
    __atomic_fetch_add(&hold_chunks, mine, __ATOMIC_RELAXED);
    pthread_barrier_wait(&barrier);
    for (long i = 0; i < hold_blocks; i++)
        free(v[i]);
    return NULL;
}

static long churn_rounds;

static void *churn_thread(void *arg) {
    unsigned long x = (unsigned long)arg * 2654435761u + 1;
    void *live[64] = {0};
    for (long i = 0; i < churn_rounds; i++) {
        x = x * 6364136223846793005u + 1442695040888963407u;
        unsigned k = (unsigned)(x >> 58);
        free(live[k]);
        live[k] = malloc(16 + (x >> 32) % 1025);
        if (!live[k])
            die("malloc");
        *(char *)live[k] = 1;
    }
    for (int k = 0; k < 64; k++)
        free(live[k]);
    return NULL;
}

static void run_threads(long n, void *(*fn)(void *)) {
    pthread_t *t = (pthread_t *)pointers(n);
    pthread_barrier_init(&barrier, NULL, n);
    for (long i = 0; i < n; i++)
        if (pthread_create(&t[i], NULL, fn, (void *)i) != 0)
            die("pthread_create");
    for (long i = 0; i < n; i++)
        pthread_join(t[i], NULL);
}

static void *arena_thread(void *arg) {
    (void)arg;
    void **blocks = pointers(1000);
    for (int i = 0; i < 1000; i++) {
        blocks[i] = malloc(1024);
        memset(blocks[i], 1, 1024);
    }
    pthread_barrier_wait(&barrier);
    for (int i = 0; i < 1000; i++)
        free(blocks[i]);
    return NULL;
}

int main(int argc, char **argv) {
    (void)argc;
    const char *what = argv[1] ? argv[1] : "";
    if (!strcmp(what, "count")) {
        long n = num(argv, 2), size = num(argv, 3);
        void **v = pointers(n);
        for (long i = 0; i < n; i++) {
            v[i] = malloc(size);
            if (!v[i])
                die("malloc");
            memset(v[i], 1, size);
        }
        for (long i = 0; i < n; i++)
            free(v[i]);
    } else if (!strcmp(what, "families")) {
        void *v[6];
        /* Through a volatile, or the compiler turns realloc(NULL, n) into malloc(n). */
        void *volatile none = NULL;
        v[0] = calloc(10, 100);
        v[1] = realloc(none, 300);
        v[2] = memalign(64, 400);
        if (posix_memalign(&v[3], 128, 500) != 0)
            die("posix_memalign");
        v[4] = aligned_alloc(256, 512);
        v[5] = valloc(600);
        for (int i = 0; i < 6; i++) {
            if (!v[i])
                die("allocation failed");
            free(v[i]);
        }
    } else if (!strcmp(what, "arenas")) {
        long n = num(argv, 2);
        pthread_t *t = (pthread_t *)pointers(n);
        pthread_barrier_init(&barrier, NULL, n);
        for (long i = 0; i < n; i++)
            if (pthread_create(&t[i], NULL, arena_thread, NULL) != 0)
                die("pthread_create");
        for (long i = 0; i < n; i++)
            pthread_join(t[i], NULL);
    } else if (!strcmp(what, "large")) {
        size_t len = (size_t)num(argv, 2) << 20;
        char *p = malloc(len);
        if (!p)
            die("malloc");
        for (size_t i = 0; i < len; i += 4096)
            p[i] = 1;
        free(p);
        char *half = malloc(len / 2);
        if (!half)
            die("malloc");
        half[0] = 1;
        free(half);
    } else if (!strcmp(what, "fragment")) {
        long n = num(argv, 2) * 1024, hold = num(argv, 3);
        void **v = blocks_of(n, 1000);
        sleep_ms(hold);
        for (long i = 0; i < n; i++)
            if (i % 64 != 63)
                free(v[i]);
        sleep_ms(hold);
    } else if (!strcmp(what, "scatter")) {
        long hold = num(argv, 3), bytes = num(argv, 4);
        long n = num(argv, 2) * 1024 * 1024 / bytes;
        void **v = blocks_of(n, bytes);
        for (long i = 0; i < n; i += 2)
            free(v[i]);
        for (long t = 0; t < hold; t++) {
            void *p = malloc(16);
            if (!p)
                die("malloc");
            free(p);
            sleep_ms(1);
        }
    } else if (!strcmp(what, "peak")) {
        long hold = num(argv, 2);
        long n = 16 * 1024 * 1024 / 1000, spike = 8 * 16;
        void **v = blocks_of(n, 1000);
        long held = 0;
        for (long i = 0; i < n; i++)
            held += chunk_of(v[i]);
        sleep_ms(hold);
        void **s = pointers(spike);
        long peak = held;
        for (long i = 0; i < spike; i++) {
            s[i] = malloc(64 * 1024);
            if (!s[i])
                die("malloc");
            peak += chunk_of(s[i]);
        }
        for (long i = 0; i < spike; i++)
            free(s[i]);
        for (long i = 0; i < n; i++)
            if (i % 4 != 0)
                free(v[i]);
        sleep_ms(hold);
        for (long i = 0; i < n; i += 4)
            free(v[i]);
        say_peak(peak);
    } else if (!strcmp(what, "threads")) {
        long n = num(argv, 2);
        hold_blocks = num(argv, 3);
        ring_blocks = 32l * 1024 * 1024 / 1000;
        if (n < 2)
            die("threads: at least 2");
        run_threads(n, held_thread);
        say_peak(hold_chunks);
    } else if (!strcmp(what, "churn")) {
        long n = num(argv, 2);
        churn_rounds = num(argv, 3);
        run_threads(n, churn_thread);
    } else if (!strcmp(what, "truncate")) {
        long hold = num(argv, 2);
        void *p = malloc(100);
        memset(p, 0, 100);
        const char *dir = getenv("STE_MALLOC_DIR");
        if (!dir)
            die("no STE_MALLOC_DIR: run under ste --malloc");
        sleep_ms(hold);
        char path[4096];
        int cut = 0;
        for (int n = 0; n < 16; n++) {
            snprintf(path, sizeof path, "%s/%d.%d", dir, (int)getpid(), n);
            int fd = open(path, O_RDWR);
            if (fd >= 0 && ftruncate(fd, 0) == 0)
                cut++;
        }
        if (!cut)
            die("no segment to cut");
        sleep_ms(hold);
        _exit(0);
    } else if (!strcmp(what, "exec")) {
        void *p = malloc(100);
        memset(p, 0, 100);
        if (!argv[2])
            die("exec what?");
        execvp(argv[2], argv + 2);
        die("exec failed");
    } else {
        num(argv, 99);
    }
    return 0;
}
