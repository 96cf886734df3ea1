#include "log.h"

#include <stdarg.h>
#include <stdio.h>

void relay_log(TRITONSERVER_LogLevel level, int line, const char* format, ...) {
  if (!TRITONSERVER_LogIsEnabled(level)) return;
  char message[1024];
  va_list arguments;
  va_start(arguments, format);
  vsnprintf(message, sizeof(message), format, arguments);
  va_end(arguments);
  TRITONSERVER_Error* error = TRITONSERVER_LogMessage(level, "pytriton_like", line, message);
  if (error != NULL) TRITONSERVER_ErrorDelete(error); /* nowhere else to say it */
}

int relay_check(TRITONSERVER_Error* error, int line) {
  if (error == NULL) return 0;
  relay_log(TRITONSERVER_LOG_ERROR, line, "%s", TRITONSERVER_ErrorMessage(error));
  TRITONSERVER_ErrorDelete(error);
  return 1;
}

TRITONSERVER_Error* error_new(TRITONSERVER_Error_Code code, const char* format, ...) {
  char message[1024];
  va_list arguments;
  va_start(arguments, format);
  vsnprintf(message, sizeof(message), format, arguments);
  va_end(arguments);
  return TRITONSERVER_ErrorNew(code, message);
}
