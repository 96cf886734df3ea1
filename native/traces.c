/* Triton's traces of the requests in flight (traces.h). Triton traces a request in rate: a few at
 * a time, so a short list, searched in full, does. */
#include "traces.h"

#include <pthread.h>
#include <stdlib.h>

#include "log.h"

struct traced {
  uint64_t id;
  TRITONSERVER_InferenceTrace* trace;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct traced* list;
static size_t count, cap;

/* The request's trace, or NULL (not traced, or a Triton built without tracing, which says so with an error). */
static TRITONSERVER_InferenceTrace* trace_of(TRITONBACKEND_Request* request) {
  TRITONSERVER_InferenceTrace* trace = NULL;
  TRITONSERVER_Error* error = TRITONBACKEND_RequestTrace(request, &trace);
  if (error != NULL) {
    TRITONSERVER_ErrorDelete(error);
    return NULL;
  }
  return trace;
}

uint64_t traces_add(TRITONBACKEND_Request* request) {
  TRITONSERVER_InferenceTrace* trace = trace_of(request);
  uint64_t id = 0;
  if (trace == NULL || relay_check(TRITONSERVER_InferenceTraceId(trace, &id), __LINE__) || id == 0) return 0;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < count; i++) {
    if (list[i].trace == trace) { /* its batch encoded again (for another worker process) */
      pthread_mutex_unlock(&lock);
      return id;
    }
  }
  if (count == cap) {
    size_t grown = cap ? 2 * cap : 16;
    struct traced* bigger = realloc(list, grown * sizeof(*list));
    if (bigger == NULL) { /* its nested calls go untraced */
      pthread_mutex_unlock(&lock);
      return 0;
    }
    list = bigger;
    cap = grown;
  }
  list[count++] = (struct traced){id, trace};
  pthread_mutex_unlock(&lock);
  return id;
}

void traces_remove(TRITONBACKEND_Request* request) {
  TRITONSERVER_InferenceTrace* trace = trace_of(request);
  if (trace == NULL) return;
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < count; i++) {
    if (list[i].trace == trace) {
      list[i] = list[--count];
      break;
    }
  }
  pthread_mutex_unlock(&lock);
}

TRITONSERVER_Error* traces_infer(uint64_t parent, TRITONSERVER_Server* server, TRITONSERVER_InferenceRequest* request) {
  if (parent == 0) return TRITONSERVER_ServerInferAsync(server, request, NULL);
  TRITONSERVER_InferenceTrace* child = NULL;
  /* the lock holds until Triton has the child: the parent's trace (and what Triton's front end
   * keeps for it, shared with its children from their first event on) lives until then */
  pthread_mutex_lock(&lock);
  for (size_t i = 0; i < count; i++) {
    if (list[i].id == parent) {
      if (relay_check(TRITONSERVER_InferenceTraceSpawnChildTrace(list[i].trace, &child), __LINE__)) child = NULL;
      break;
    }
  }
  TRITONSERVER_Error* error = TRITONSERVER_ServerInferAsync(server, request, child);
  pthread_mutex_unlock(&lock);
  return error;
}
