// The kernel matrix's workloads (tests/kernels/), each with a known answer, in one program
// that the runner builds twice: static (every case, on any kernel's initramfs) and dynamic
// (`malloc`, which needs ld.so for ste's LD_PRELOAD shim).
//
//   fix true                 exit 0 at once
//   fix loop N PROG ARG...   fork and exec PROG N times, one after another: N + 1 execs
//   fix threads N            N threads besides the main one, each joined
//   fix fill MIB             touch MIB MiB of anonymous memory page by page, exit at once
//   fix getppid N            N getppid system calls (raw, no libc cache)
//   fix signal N             kill itself with signal N
//   fix malloc N             N malloc(64) + free pairs
//
// Touching one byte a page rather than memset: the kernel zeroes each page as it faults it
// in, so the memory is as resident either way, and under QEMU's emulation memset's user-space
// loop doubled the case's time. The fill exits right after its last page: what it held is gone
// before a sampler that reads it now and then can look again, as in the report that had Max
// PSS "exact" at 4 MB for this program.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void *idle(void *arg)
{
	return arg;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: fix true|loop|threads|fill|getppid|signal|malloc ...\n");
		return 2;
	}
	const char *what = argv[1];
	long n = argc > 2 ? atol(argv[2]) : 0;
	if (!strcmp(what, "true"))
		return 0;
	if (!strcmp(what, "loop") && argc > 3) {
		for (long i = 0; i < n; i++) {
			pid_t pid = fork();
			if (pid < 0)
				return 1;
			if (pid == 0) {
				execv(argv[3], argv + 3);
				_exit(127);
			}
			int status;
			if (waitpid(pid, &status, 0) != pid || status != 0)
				return 1;
		}
		return 0;
	}
	if (!strcmp(what, "threads")) {
		pthread_t t[64];
		if (n > 64)
			return 2;
		for (long i = 0; i < n; i++)
			if (pthread_create(&t[i], NULL, idle, NULL))
				return 1;
		for (long i = 0; i < n; i++)
			pthread_join(t[i], NULL);
		return 0;
	}
	if (!strcmp(what, "fill")) {
		size_t bytes = (size_t)n << 20;
		char *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (p == MAP_FAILED)
			return 1;
		// Small pages, as most programs' memory: the counts the kernel keeps per page are
		// what the matrix checks.
		madvise(p, bytes, MADV_NOHUGEPAGE);
		for (size_t i = 0; i < bytes; i += 4096)
			p[i] = 1;
		return 0;
	}
	if (!strcmp(what, "getppid")) {
		for (long i = 0; i < n; i++)
			syscall(SYS_getppid);
		return 0;
	}
	if (!strcmp(what, "signal")) {
		kill(getpid(), (int)n);
		return 1;
	}
	if (!strcmp(what, "malloc")) {
		for (long i = 0; i < n; i++) {
			void *volatile p = malloc(64);
			free(p);
		}
		return 0;
	}
	fprintf(stderr, "fix: unknown workload %s\n", what);
	return 2;
}
