/* Another user's library planted in the shim's place (tests/it/malloc.rs): if a program ever
 * loads it, it leaves a mark at $STE_TEST_EVIL_MARK, as whichever user ran it. */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void ran(void) {
    const char *mark = getenv("STE_TEST_EVIL_MARK");
    if (mark) {
        int fd = open(mark, O_WRONLY | O_CREAT, 0644);
        if (fd >= 0)
            close(fd);
    }
}
