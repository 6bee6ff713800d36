// The floor of the taskstats listener's cost (bench/accounting.sh): registers for the exit
// records of every possible CPU, as ste's accounts thread does (a 16 MiB receive buffer,
// TASKSTATS_CMD_ATTR_REGISTER_CPUMASK), runs a command, and drains the socket every 20 ms
// without decoding anything. What it adds to the command is the kernel's side: a record built
// and queued at every thread's exit. ste's cost over it is its own user space.
//
//     cc -O2 -o taskstats_floor bench/taskstats_floor.c
//     sudo ./taskstats_floor COMMAND [ARGS]...
//
// Prints the records drained on stderr; exits with the command's status (125 if it cannot
// register: taskstats needs CAP_NET_ADMIN).
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/taskstats.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define NLA_DATA(na) ((void *)((char *)(na) + NLA_HDRLEN))

static char buf[1 << 16];

// Sends one generic-netlink request with a single attribute.
static int request(int fd, unsigned short type, unsigned char cmd, unsigned short attr,
                   const void *data, int len) {
    struct {
        struct nlmsghdr n;
        struct genlmsghdr g;
        char attrs[256];
    } m;
    memset(&m, 0, sizeof m);
    m.n.nlmsg_len = NLMSG_LENGTH(GENL_HDRLEN);
    m.n.nlmsg_type = type;
    m.n.nlmsg_flags = NLM_F_REQUEST;
    m.g.cmd = cmd;
    m.g.version = 1;
    struct nlattr *na = (struct nlattr *)((char *)&m + m.n.nlmsg_len);
    na->nla_type = attr;
    na->nla_len = NLA_HDRLEN + len;
    memcpy(NLA_DATA(na), data, len);
    m.n.nlmsg_len += NLMSG_ALIGN(na->nla_len);
    return send(fd, &m, m.n.nlmsg_len, 0) < 0 ? -1 : 0;
}

// The TASKSTATS family's id, from the generic-netlink controller.
static int family(int fd) {
    if (request(fd, GENL_ID_CTRL, CTRL_CMD_GETFAMILY, CTRL_ATTR_FAMILY_NAME, TASKSTATS_GENL_NAME,
                strlen(TASKSTATS_GENL_NAME) + 1))
        return -1;
    int n = recv(fd, buf, sizeof buf, 0);
    struct nlmsghdr *h = (struct nlmsghdr *)buf;
    if (n < (int)NLMSG_HDRLEN || h->nlmsg_type == NLMSG_ERROR)
        return -1;
    struct nlattr *na = (struct nlattr *)((char *)NLMSG_DATA(h) + GENL_HDRLEN);
    int rem = h->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN;
    while (rem >= NLA_HDRLEN) {
        if (na->nla_type == CTRL_ATTR_FAMILY_ID)
            return *(unsigned short *)NLA_DATA(na);
        rem -= NLA_ALIGN(na->nla_len);
        na = (struct nlattr *)((char *)na + NLA_ALIGN(na->nla_len));
    }
    return -1;
}

static long drain(int fd) {
    long n = 0;
    while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
        n++;
    return n;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: taskstats_floor COMMAND [ARGS]...\n");
        return 2;
    }
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
    int size = 16 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof size);
    struct sockaddr_nl local = {.nl_family = AF_NETLINK};
    int id = fd < 0 || bind(fd, (struct sockaddr *)&local, sizeof local) ? -1 : family(fd);
    char cpus[64] = "0";
    FILE *f = fopen("/sys/devices/system/cpu/possible", "r");
    if (f) {
        if (fgets(cpus, sizeof cpus, f))
            cpus[strcspn(cpus, "\n")] = 0;
        fclose(f);
    }
    if (id < 0 ||
        request(fd, id, TASKSTATS_CMD_GET, TASKSTATS_CMD_ATTR_REGISTER_CPUMASK, cpus,
                strlen(cpus) + 1)) {
        perror("taskstats_floor: cannot register for taskstats exit records");
        return 125;
    }
    pid_t pid = fork();
    if (pid == 0) {
        execvp(argv[1], argv + 1);
        _exit(127);
    }
    // Waits on the command's end (a pidfd) with a 20 ms timeout, as the accounts thread wakes
    // on its tick or on the session's word: the end is seen at once, not at the next tick.
    int pidfd = syscall(SYS_pidfd_open, pid, 0);
    long records = 0;
    int status = 0;
    for (;;) {
        struct pollfd end = {.fd = pidfd, .events = POLLIN};
        poll(&end, pidfd < 0 ? 0 : 1, 20);
        records += drain(fd);
        if (waitpid(pid, &status, WNOHANG) == pid)
            break;
    }
    // Every exit of the command was queued before it was reaped.
    records += drain(fd);
    fprintf(stderr, "taskstats_floor: %ld records\n", records);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
