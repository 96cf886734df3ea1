/* Logging through Triton's log, and Triton's errors: one made with a formatted message, one that
 * returns from the function that got it (TRY), and the one place a TRITONSERVER_Error that nobody
 * can be told about is logged and deleted. */
#ifndef PYTRITON_LIKE_LOG_H
#define PYTRITON_LIKE_LOG_H

#include "triton_api.h"

void relay_log(TRITONSERVER_LogLevel level, int line, const char* format, ...) __attribute__((format(printf, 3, 4)));
/* Logs and deletes error (when not NULL); returns whether there was one. */
int relay_check(TRITONSERVER_Error* error, int line);

/* A new error, its message formatted as printf's (cut at 1023 bytes). */
TRITONSERVER_Error* error_new(TRITONSERVER_Error_Code code, const char* format, ...)
    __attribute__((format(printf, 2, 3)));

/* Returns the error of call, when it fails, from the function that makes it. */
#define TRY(call)                                 \
  do {                                            \
    TRITONSERVER_Error* error_ = (call);          \
    if (error_ != NULL) return error_;            \
  } while (0)

#endif
