// The floor of the ptrace tracker's cost: a minimal tracer with ste's options
// (PTRACE_SEIZE with TRACEFORK|VFORK|CLONE|EXEC|EXIT, no syscall stops) that does nothing at a
// stop but restart the tracee, so what it adds to a command is the cost of the stops alone.
// bench/trackers_cost.sh runs it side by side with the bare command and ste.
//
//   cc -O2 -o ptrace_floor bench/ptrace_floor.c
//   ./ptrace_floor [--reads] [--latency] -- COMMAND [ARGS]...
//
// --reads   also does at each stop the reads ste does there: /proc/PID/cmdline at the exec
//           stop, /proc/PID/status and /proc/PID/io at the exit stop (open, read, close each).
// --reads=vm as --reads, but argv is read from the tracee's memory (process_vm_readv from its
//           stack pointer) instead of /proc/PID/cmdline.
// --latency prints, on stderr, how many stops of each kind there were and the mean time from
//           waitpid returning a stop to the PTRACE_CONT that ends it.
// Exits with the command's status; prints its own CPU time (user+sys, RUSAGE_SELF) on stderr.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int reads, vm_argv, latency;
static char buf[65536];

static long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void read_file(int pid, const char *name) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/%s", pid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    while (read(fd, buf, sizeof buf) > 0) {}
    close(fd);
}

// argv at the exec stop from the tracee's memory (x86_64): the stack pointer from the
// registers, argc and argv[0] from the stack, then the strings until argc NULs.
static void read_argv_vm(int pid) {
    struct user_regs_struct regs;
    if (ptrace(PTRACE_GETREGS, pid, 0, &regs) < 0) return;
    unsigned long head[64];
    struct iovec local = {head, sizeof head}, remote = {(void *)regs.rsp, sizeof head};
    if (process_vm_readv(pid, &local, 1, &remote, 1, 0) < 16) return;
    unsigned long argc = head[0], at = head[1];
    size_t got = 0, nuls = 0;
    while (nuls < argc && got < sizeof buf) {
        local = (struct iovec){buf + got, 4096};
        remote = (struct iovec){(void *)(at + got), 4096};
        ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (n <= 0) return;
        for (ssize_t k = 0; k < n && nuls < argc; k++) nuls += buf[got + k] == 0;
        got += n;
    }
}

enum { K_FORK, K_EXEC, K_EXIT, K_STOP, K_SIGNAL, K_N };
static const char *kind_name[K_N] = {"fork/clone", "exec", "exit", "first/group", "signal"};
static long long stops[K_N], stop_ns[K_N];

int main(int argc, char **argv) {
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i++) {
        if (strcmp(argv[i], "--") == 0) { i++; break; }
        if (strcmp(argv[i], "--reads") == 0) reads = 1;
        else if (strcmp(argv[i], "--reads=vm") == 0) reads = vm_argv = 1;
        else if (strcmp(argv[i], "--latency") == 0) latency = 1;
        else { fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
    }
    if (i >= argc) { fprintf(stderr, "usage: %s [--reads] [--latency] -- CMD...\n", argv[0]); return 2; }
    int go[2];
    if (pipe2(go, O_CLOEXEC) < 0) { perror("pipe"); return 1; }
    pid_t root = fork();
    if (root == 0) {
        char c;
        close(go[1]);
        if (read(go[0], &c, 1) != 1) _exit(125);
        execvp(argv[i], argv + i);
        _exit(127);
    }
    close(go[0]);
    long opts = PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACECLONE |
                PTRACE_O_TRACEEXEC | PTRACE_O_TRACEEXIT;
    if (ptrace(PTRACE_SEIZE, root, 0, opts) < 0) { perror("PTRACE_SEIZE"); return 1; }
    if (write(go[1], "x", 1) != 1) return 1;
    close(go[1]);
    int code = 0;
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, __WALL);
        if (pid < 0) {
            if (errno == EINTR) continue;
            break;
        }
        long long t0 = latency ? now_ns() : 0;
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            if (pid == root) code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            continue;
        }
        if (!WIFSTOPPED(status)) continue;
        int sig = WSTOPSIG(status), event = status >> 16, kind, deliver = 0;
        unsigned long msg;
        switch (event) {
        case PTRACE_EVENT_FORK: case PTRACE_EVENT_VFORK: case PTRACE_EVENT_CLONE:
            kind = K_FORK;
            ptrace(PTRACE_GETEVENTMSG, pid, 0, &msg);
            break;
        case PTRACE_EVENT_EXEC:
            kind = K_EXEC;
            ptrace(PTRACE_GETEVENTMSG, pid, 0, &msg);
            if (vm_argv) read_argv_vm(pid);
            else if (reads) read_file(pid, "cmdline");
            break;
        case PTRACE_EVENT_EXIT:
            kind = K_EXIT;
            if (reads) { read_file(pid, "status"); read_file(pid, "io"); }
            break;
        case PTRACE_EVENT_STOP:
            kind = K_STOP;
            if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
                ptrace(PTRACE_LISTEN, pid, 0, 0);
                goto counted;
            }
            break;
        case 0:
            kind = K_SIGNAL;
            deliver = sig;
            break;
        default:
            kind = K_STOP;
        }
        ptrace(PTRACE_CONT, pid, 0, (long)deliver);
    counted:
        stops[kind]++;
        if (latency) stop_ns[kind] += now_ns() - t0;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    fprintf(stderr, "ptrace_floor: own CPU %.1f ms (user %.1f, sys %.1f)\n",
            (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3,
            ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3,
            ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3);
    if (latency)
        for (int k = 0; k < K_N; k++)
            if (stops[k])
                fprintf(stderr, "ptrace_floor: %-12s %7lld stops, %6.1f µs from waitpid to PTRACE_CONT\n",
                        kind_name[k], stops[k], stop_ns[k] / 1e3 / stops[k]);
    return code;
}
