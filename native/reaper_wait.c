/* The reaper's idle half: waits for the user process to exit, then becomes the clean-up.
 *
 *   pytriton_like_reaper_wait <owner pid> <program> [argument ...]
 *
 * A reaper is started with every server (pytriton_like/server/reaper.py). It spends its life
 * waiting, so the waiting is done here, in a process of a few hundred KiB, instead of in a Python
 * interpreter (about 14 MiB of RSS); once the owner has exited it execs <program> (Python, with
 * the clean-up's code). A normal stop ends it with SIGTERM, whose default action it keeps. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

static void wait_for_exit(pid_t owner)
{
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, owner, 0);
    if (fd >= 0) {
        struct pollfd exited = {.fd = fd, .events = POLLIN, .revents = 0};
        while (poll(&exited, 1, -1) < 0 && errno == EINTR) {
        }
        close(fd);
        return;
    }
    if (errno == ESRCH)
        return; /* gone already */
#endif
    /* No pidfd (kernel before 5.3): the owner started us, so we are reparented when it exits. */
    while (getppid() == owner)
        sleep(1);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s <owner pid> <program> [argument ...]\n", argv[0]);
        return 2;
    }
    char *end = NULL;
    errno = 0;
    long owner = strtol(argv[1], &end, 10);
    if (errno != 0 || end == argv[1] || *end != '\0' || owner <= 0 || owner > 0x3fffffff) {
        fprintf(stderr, "%s: not a process id: %s\n", argv[0], argv[1]);
        return 2;
    }
    wait_for_exit((pid_t)owner);
    execv(argv[2], argv + 2);
    fprintf(stderr, "%s: cannot run %s: %s\n", argv[0], argv[2], strerror(errno));
    return 127;
}
