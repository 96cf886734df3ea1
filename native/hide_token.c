/* Preloaded into tritonserver (LD_PRELOAD, pytriton_like/server/security.py): hides the access
 * token of --http-restricted-api / --grpc-restricted-protocol from /proc/<pid>/cmdline.
 *
 * /proc/<pid>/cmdline reads the memory the kernel put argv in, and every local user can read it.
 * Before main runs, this constructor points each argv[i] that carries the token at a heap copy
 * (main parses the copy) and overwrites the token in the original memory with 'x', keeping its
 * length. Arguments without the marker are left alone, so the processes tritonserver starts (the
 * Python backend's stubs inherit LD_PRELOAD) are unchanged.
 */
#include <stdlib.h>
#include <string.h>

#define TOKEN_MARKER "triton-access-token="

__attribute__((constructor)) static void hide_access_token(int argc, char **argv, char **envp)
{
    (void)envp;
    if (argv == NULL)
        return;
    for (int i = 0; i < argc && argv[i] != NULL; i++) {
        char *marker = strstr(argv[i], TOKEN_MARKER);
        if (marker == NULL)
            continue;
        char *copy = strdup(argv[i]);
        if (copy == NULL)
            continue; /* leave the argument as it is: the server must still get its token */
        char *original = argv[i];
        argv[i] = copy;
        /* the token runs from the marker's '=' to the end of the argument ("groups:name=token") */
        char *token = original + (marker - original) + strlen(TOKEN_MARKER);
        memset(token, 'x', strlen(token));
    }
}
