/* Logging through Triton's log, and the one place a TRITONSERVER_Error that nobody can be
 * told about is logged and deleted. */
#ifndef PYTRITON_LIKE_LOG_H
#define PYTRITON_LIKE_LOG_H

#include "triton_api.h"

void relay_log(TRITONSERVER_LogLevel level, int line, const char* format, ...) __attribute__((format(printf, 3, 4)));
/* Logs and deletes error (when not NULL); returns whether there was one. */
int relay_check(TRITONSERVER_Error* error, int line);

#endif
