// The floor of the netlink tracker's cost: a minimal proc connector listener with ste's
// subscription (4 MiB receive buffer, the 6.6+ kernel filter to fork/exec/exit events) that
// only receives the events, so what it adds to a command is the cost of the kernel sending
// them (in the forking, exec'ing and exiting tasks) and of their delivery to a listener
// woken on another CPU. bench/trackers_cost.sh runs it side by side with the bare command and
// ste's netlink tracker.
//
//   cc -O2 -o netlink_floor bench/netlink_floor.c
//   ./netlink_floor [--reads] [--in-time] [--no-filter] [--batch MS] [--split MS] -- COMMAND...
//
// --reads      also reads /proc/PID/cmdline at each exec event, as ste must (open, read, close),
//              and counts the reads that returned an argv (a process already gone returns none)
// --in-time    runs the listener as ste runs its netlink reader (nice -10, the scheduler's
//              shortest slice on Linux 6.12+), so that an exec event preempts the new image on
//              its CPU and the read comes before a short process ends, as ste's must
// --no-filter  subscribes without the kernel filter (every proc event is delivered)
// --batch MS   sleeps MS ms after draining the socket, so the events pile up and the listener is
//              not woken for each (too late to read the argv of short processes: what the
//              kernel's sending costs without the wake-ups a prompt listener takes)
// --split MS   two sockets: exec events on one, received (and read, --reads) at once; fork
//              and exit events on the other, which never wakes the listener and is drained
//              every MS ms
// Needs CAP_NET_ADMIN (root), as the proc connector does. The command starts once the
// subscription is sent. Exits with the command's status; prints the events received
// and its own CPU time (user+sys, RUSAGE_SELF) on stderr.
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 16];
static char argv_buf[1 << 16];

static void die(const char *what) {
    perror(what);
    exit(125);
}

static void subscribe(int fd, int filter, unsigned int events) {
    struct {
        struct nlmsghdr nl;
        struct cn_msg cn;
        enum proc_cn_mcast_op op;
        // 6.6+: struct proc_input's event_type after the op.
        unsigned int events;
    } __attribute__((packed)) m;
    memset(&m, 0, sizeof m);
    size_t payload = sizeof(m.op) + (filter ? sizeof(m.events) : 0);
    m.nl.nlmsg_len = NLMSG_LENGTH(sizeof(struct cn_msg) + payload);
    m.nl.nlmsg_type = NLMSG_DONE;
    m.cn.id.idx = CN_IDX_PROC;
    m.cn.id.val = CN_VAL_PROC;
    m.cn.len = payload;
    m.op = PROC_CN_MCAST_LISTEN;
    m.events = events;
    if (send(fd, &m, m.nl.nlmsg_len, 0) < 0)
        die("send PROC_CN_MCAST_LISTEN");
}

static long argv_read;

static void read_cmdline(int pid) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n, total = 0;
    while ((n = read(fd, argv_buf, sizeof argv_buf)) > 0)
        total += n;
    close(fd);
    if (total > 0)
        argv_read++;
}

/* As ste's netlink reader asks (`kernel::calls::set_thread_slice`): sched_attr's runtime is
 * the slice a SCHED_OTHER task asks for (Linux 6.12+; ignored before). */
struct sched_attr_v1 {
    unsigned int size, policy;
    unsigned long long flags;
    int nice;
    unsigned int priority;
    unsigned long long runtime, deadline, period;
};

static void in_time(void) {
    setpriority(PRIO_PROCESS, 0, -10);
    struct sched_attr_v1 a = {0};
    if (syscall(SYS_sched_getattr, 0, &a, sizeof a, 0) == 0) {
        a.size = sizeof a;
        a.runtime = 100000;
        syscall(SYS_sched_setattr, 0, &a, 0);
    }
}

/* A proc connector socket (its port id chosen by the kernel, so there may be two) with ste's
 * receive buffer, listening to `events` (with the filter). */
static int open_socket(int filter, unsigned int events) {
    int fd = socket(PF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_CONNECTOR);
    if (fd < 0)
        die("socket(NETLINK_CONNECTOR)");
    int rcvbuf = 4 << 20;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC};
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
        die("bind");
    subscribe(fd, filter, events);
    return fd;
}

static long events, execs, overruns;
static int reads;

/* Receives everything waiting on `fd`. */
static void drain(int fd) {
    for (;;) {
        ssize_t len = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (len < 0) {
            if (errno == ENOBUFS) {
                overruns++;
                continue;
            }
            if (errno != EINTR && errno != EAGAIN)
                die("recv");
            return;
        }
        for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)len);
             h = NLMSG_NEXT(h, len)) {
            struct cn_msg *cn = NLMSG_DATA(h);
            struct proc_event *ev = (struct proc_event *)cn->data;
            events++;
            if (ev->what == PROC_EVENT_EXEC) {
                execs++;
                if (reads)
                    read_cmdline(ev->event_data.exec.process_tgid);
            }
        }
    }
}

static long long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv) {
    int filter = 1, timely = 0, i = 1;
    long batch_ms = 0, split_ms = 0;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        if (!strcmp(argv[i], "--reads"))
            reads = 1;
        else if (!strcmp(argv[i], "--in-time"))
            timely = 1;
        else if (!strcmp(argv[i], "--no-filter"))
            filter = 0;
        else if (!strcmp(argv[i], "--batch") && i + 1 < argc)
            batch_ms = atol(argv[++i]);
        else if (!strcmp(argv[i], "--split") && i + 1 < argc)
            split_ms = atol(argv[++i]);
        else {
            fprintf(stderr, "usage: netlink_floor [--reads] [--in-time] [--no-filter] [--batch MS] [--split MS] -- COMMAND...\n");
            return 125;
        }
    }
    if (i + 1 >= argc) {
        fprintf(stderr, "usage: netlink_floor [--reads] [--in-time] [--no-filter] [--batch MS] [--split MS] -- COMMAND...\n");
        return 125;
    }
    char **cmd = argv + i + 1;

    int fd = open_socket(filter, split_ms ? PROC_EVENT_EXEC
                                          : PROC_EVENT_FORK | PROC_EVENT_EXEC | PROC_EVENT_EXIT);
    int slow = split_ms ? open_socket(filter, PROC_EVENT_FORK | PROC_EVENT_EXIT) : -1;
    // SIGCHLD through a signalfd, so the end of the command wakes the loop at once.
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, NULL);
    int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
    if (sfd < 0)
        die("signalfd");
    // The subscription was sent before the fork: the command's events all reach the socket.
    pid_t child = fork();
    if (child < 0)
        die("fork");
    if (child == 0) {
        sigprocmask(SIG_UNBLOCK, &chld, NULL);
        execvp(cmd[0], cmd);
        _exit(errno == ENOENT ? 127 : 126);
    }

    if (timely)
        in_time();
    int status = 0, done = 0;
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = sfd, .events = POLLIN}};
    long long next_slow = now_ms() + split_ms;
    while (!done) {
        int timeout = -1;
        if (split_ms) {
            long long left = next_slow - now_ms();
            if (left <= 0) {
                drain(slow);
                next_slow = now_ms() + split_ms;
                left = split_ms;
            }
            timeout = (int)left;
        }
        if (poll(p, 2, timeout) < 0 && errno != EINTR)
            die("poll");
        if (p[0].revents) {
            // Drain what is there, then (--batch) let the next events pile up.
            drain(fd);
            if (batch_ms) {
                struct timespec ts = {batch_ms / 1000, (batch_ms % 1000) * 1000000};
                nanosleep(&ts, NULL);
            }
        }
        if (p[1].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof si) > 0) {
            }
            if (waitpid(child, &status, WNOHANG) == child)
                done = 1;
        }
    }
    if (split_ms)
        drain(slow);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    long long cpu_us = ru.ru_utime.tv_sec * 1000000LL + ru.ru_utime.tv_usec +
                       ru.ru_stime.tv_sec * 1000000LL + ru.ru_stime.tv_usec;
    fprintf(stderr, "netlink_floor: %ld events, %ld execs (%ld argv read), %ld overruns, cpu %lld us\n",
            events, execs, argv_read, overruns, cpu_us);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
}
