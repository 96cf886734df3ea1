/* Runs a program that gets a signal when the thread that started it ends (PR_SET_PDEATHSIG):
 *
 *   pdeathsig_exec <signal> <parent pid> <program> [argument ...]
 *
 * tritonserver gets SIGKILL when the user process dies, even by SIGKILL (server/process.py), and a
 * tune trial's `serve` gets SIGINT when tune dies (tune/trial_server.py). Setting the signal from
 * Python between fork and exec (subprocess's preexec_fn) runs the interpreter in the forked child
 * of a process with threads: a lock that another thread held at the fork (the allocator's, under
 * AddressSanitizer) can hold that child for ever before it execs, and the parent waiting for it.
 * Here the child of a plain fork and exec sets the signal itself, then becomes the program: the
 * same pid, the program's own arguments, the signal kept across execve. <parent pid> closes the
 * race of a parent that ended before the signal was set. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static long number(const char *text, long limit)
{
    char *end = NULL;
    errno = 0;
    long value = strtol(text, &end, 10);
    return (errno != 0 || end == text || *end != '\0' || value <= 0 || value >= limit) ? -1 : value;
}

int main(int argc, char **argv)
{
    long signum = argc >= 4 ? number(argv[1], NSIG) : -1;
    long parent = argc >= 4 ? number(argv[2], (long)1 << 30) : -1;
    if (signum < 0 || parent < 0) {
        fprintf(stderr, "usage: %s <signal> <parent pid> <program> [argument ...]\n", argv[0]);
        return 127;
    }
    if (prctl(PR_SET_PDEATHSIG, (unsigned long)signum, 0UL, 0UL, 0UL) != 0) {
        fprintf(stderr, "%s: cannot set the parent-death signal: %s\n", argv[0], strerror(errno));
        return 127;
    }
    if (getppid() != (pid_t)parent) { /* the parent ended before the signal was set: it will not come */
        fprintf(stderr, "%s: the process that started it has ended\n", argv[0]);
        return 127;
    }
    execv(argv[3], argv + 3);
    fprintf(stderr, "%s: cannot run %s: %s\n", argv[0], argv[3], strerror(errno));
    return 127;
}
