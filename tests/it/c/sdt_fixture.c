/* Fires glibc's malloc SDT probes (provider libc) with known arguments, for ste --malloc's
 * uprobes: K memory_arena_new(arena, size) with sizes 4096, 2*4096, …, K*4096; M
 * memory_arena_reuse_wait(mutex, arena, avoid); 3 memory_sbrk_more(brk, 4096) with a constant
 * size. With a third argument, it then forks a child that execs this program again without it
 * (so the tree hits every probe twice). Usage: sdt_fixture K M [again] */
#include <stdlib.h>
#include <sys/sdt.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	long k = atol(argv[1]), m = atol(argv[2]);
	static char arena[64];
	volatile long scale = 4096;
	for (long i = 1; i <= k; i++) {
		long size = i * scale;
		DTRACE_PROBE2(libc, memory_arena_new, arena, size);
	}
	for (long i = 0; i < m; i++) {
		void *mutex = arena + (i & 7);
		DTRACE_PROBE3(libc, memory_arena_reuse_wait, mutex, arena, (void *)0);
	}
	for (int i = 0; i < 3; i++)
		DTRACE_PROBE2(libc, memory_sbrk_more, arena, 4096L);
	if (argc > 3) {
		pid_t pid = fork();
		if (pid == 0) {
			execl("/proc/self/exe", argv[0], argv[1], argv[2], (char *)0);
			_exit(127);
		}
		int status;
		if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
			return 1;
	}
	return 0;
}
