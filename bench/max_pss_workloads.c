/* The seed's memory examples, for bench/max_pss.py (built there with gcc -O0, as the article
 * built fill.c without optimisation):
 *   fill           malloc 1 GiB and write it byte by byte, then exit (the peak is at the exit)
 *   fillfill       fill 1 GiB and free it, fork, the child fills 2 GiB the same way
 *   threads N MIB HOLD_MS  N threads each touch MIB MiB, all resident at once for HOLD_MS
 * Truth: 1 GiB, 2 GiB and N x MIB MiB, plus the program's own few hundred KiB. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void fill(uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++)
        p[i] = 'F';
}

static void malloc_and_fill(size_t n) {
    uint8_t *p = malloc(n);
    fill(p, n);
    free(p);
}

static pthread_barrier_t barrier;
static size_t per_thread;

static void *touch(void *arg) {
    (void)arg;
    uint8_t *p = malloc(per_thread);
    for (size_t i = 0; i < per_thread; i += 4096)
        p[i] = 1;
    pthread_barrier_wait(&barrier); /* all resident */
    pthread_barrier_wait(&barrier); /* released together */
    free(p);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "fill")) {
        size_t s = 1UL << 30;
        uint8_t *p = malloc(s);
        fill(p, s);
        return p[s - 1] == 'F' ? 0 : 1;
    }
    if (argc >= 2 && !strcmp(argv[1], "fillfill")) {
        malloc_and_fill(1UL << 30);
        pid_t pid = fork();
        if (pid == 0) {
            malloc_and_fill(1UL << 31);
            return 0;
        }
        waitpid(pid, NULL, 0);
        return 0;
    }
    if (argc >= 5 && !strcmp(argv[1], "threads")) {
        int n = atoi(argv[2]);
        per_thread = (size_t)atol(argv[3]) << 20;
        long hold_ms = atol(argv[4]);
        pthread_t t[n];
        pthread_barrier_init(&barrier, NULL, n + 1);
        for (int i = 0; i < n; i++)
            pthread_create(&t[i], NULL, touch, NULL);
        pthread_barrier_wait(&barrier);
        struct timespec d = {hold_ms / 1000, (hold_ms % 1000) * 1000000};
        nanosleep(&d, NULL);
        pthread_barrier_wait(&barrier);
        for (int i = 0; i < n; i++)
            pthread_join(t[i], NULL);
        return 0;
    }
    return 2;
}
