/* A hostile local user beside `ste --malloc` run as root (tests/it/malloc.rs): watches a shared
 * directory with inotify and, in every directory created there whose name starts with "ste-",
 * tries at once to plant the shim's name, alternately as a file holding another library's bytes
 * and as a symlink to a victim file, plus symlinks at the first segment names.
 *
 *   shm_planter DIR LIBRARY VICTIM STOPFILE MARK
 *
 * Only the directories of a ste whose command line contains MARK are attacked (the name gives
 * ste's pid; /proc/PID/cmdline is readable by all): other tests' runs are left alone.
 * Prints "ready" once watching, and at the end (when STOPFILE exists)
 * "seen N entered N planted N": directories seen, opened, and names planted in them. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static char library[1 << 20];
static ssize_t library_len;

/* The pid of the ste that made the directory `name`: its first number. */
static long ste_pid(const char *name) {
    const char *digits = strpbrk(name, "0123456789");
    return digits ? atol(digits) : 0;
}

static int marked(long pid, const char *mark) {
    char path[64], cmdline[8192];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, cmdline, sizeof cmdline);
    close(fd);
    return n > 0 && memmem(cmdline, n, mark, strlen(mark)) != NULL;
}

static long now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000L + t.tv_nsec / 1000;
}

/* Tries for up to 20 ms: a directory made private from its creation is never entered. */
static void attack(int base, const char *name, const char *victim, int as_link, long *entered,
                   long *planted) {
    long until = now_us() + 20000;
    int dir = -1;
    while (dir < 0 && now_us() < until)
        dir = openat(base, name, O_RDONLY | O_DIRECTORY);
    if (dir < 0)
        return;
    (*entered)++;
    int done = 0;
    while (!done && now_us() < until) {
        if (as_link) {
            done = symlinkat(victim, dir, "ste_malloc.so") == 0;
        } else {
            int fd = openat(dir, "ste_malloc.so", O_WRONLY | O_CREAT | O_EXCL, 0755);
            if (fd >= 0) {
                done = write(fd, library, library_len) == library_len;
                close(fd);
            }
        }
    }
    *planted += done;
    /* Segment names of the command's first processes (pids just after ste's, which the
       directory's name gives): ste must never follow them. */
    long ste = ste_pid(name);
    char seg[64];
    for (long pid = ste + 1; ste && pid < ste + 16; pid++) {
        snprintf(seg, sizeof seg, "%ld.0", pid);
        *planted += symlinkat(victim, dir, seg) == 0;
    }
    close(dir);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: shm_planter DIR LIBRARY VICTIM STOPFILE MARK\n");
        return 2;
    }
    int lib = open(argv[2], O_RDONLY);
    if (lib < 0 || (library_len = read(lib, library, sizeof library)) <= 0) {
        perror(argv[2]);
        return 2;
    }
    int base = open(argv[1], O_RDONLY | O_DIRECTORY);
    int in = inotify_init1(IN_NONBLOCK);
    if (base < 0 || in < 0 || inotify_add_watch(in, argv[1], IN_CREATE | IN_MOVED_TO) < 0) {
        perror(argv[1]);
        return 2;
    }
    printf("ready\n");
    fflush(stdout);
    long seen = 0, entered = 0, planted = 0;
    char buf[64 * 1024] __attribute__((aligned(8)));
    for (;;) {
        struct pollfd p = {.fd = in, .events = POLLIN};
        if (poll(&p, 1, 50) == 0 && access(argv[4], F_OK) == 0)
            break;
        ssize_t n = read(in, buf, sizeof buf);
        for (char *e = buf; n > 0 && e < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)e;
            if ((ev->mask & IN_ISDIR) && ev->len && strncmp(ev->name, "ste-", 4) == 0 &&
                marked(ste_pid(ev->name), argv[5])) {
                seen++;
                attack(base, ev->name, argv[3], seen % 2, &entered, &planted);
            }
            e += sizeof *ev + ev->len;
        }
    }
    printf("seen %ld entered %ld planted %ld\n", seen, entered, planted);
    return 0;
}
