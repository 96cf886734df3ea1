/* Triton's traces of the requests in flight (traces.h). Triton traces requests at a rate: a few at
 * a time, so a short list, searched in full, does. */
#include "traces.h"

#include <pthread.h>
#include <stdlib.h>

#include "log.h"

struct traced {
  uint64_t id;
  TRITONSERVER_InferenceTrace* trace;
  TRITONBACKEND_Request* request;
  int children; /* nested calls traced as its children, in Triton's hands */
  int answered; /* traces_release came while children ran: the last of them gives the request back */
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

/* The entry of that id (lock held), or NULL. */
static struct traced* find(uint64_t id) {
  for (size_t i = 0; i < count; i++)
    if (list[i].id == id) return &list[i];
  return NULL;
}

uint64_t traces_add(TRITONBACKEND_Request* request) {
  TRITONSERVER_InferenceTrace* trace = trace_of(request);
  uint64_t id = 0;
  if (trace == NULL || relay_check(TRITONSERVER_InferenceTraceId(trace, &id), __LINE__) || id == 0) return 0;
  pthread_mutex_lock(&lock);
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
  list[count++] = (struct traced){id, trace, request, 0, 0};
  pthread_mutex_unlock(&lock);
  return id;
}

void traces_release(TRITONBACKEND_Request* request) {
  TRITONSERVER_InferenceTrace* trace = trace_of(request);
  if (trace != NULL) {
    uint64_t id = 0;
    relay_check(TRITONSERVER_InferenceTraceId(trace, &id), __LINE__);
    pthread_mutex_lock(&lock);
    struct traced* entry = find(id);
    if (entry != NULL && entry->children > 0) {
      entry->answered = 1;
      pthread_mutex_unlock(&lock);
      return;
    }
    if (entry != NULL) *entry = list[--count];
    pthread_mutex_unlock(&lock);
  }
  relay_check(TRITONBACKEND_RequestRelease(request, TRITONSERVER_REQUEST_RELEASE_ALL), __LINE__);
}

TRITONSERVER_InferenceTrace* traces_child(uint64_t parent) {
  if (parent == 0) return NULL;
  TRITONSERVER_InferenceTrace* child = NULL;
  pthread_mutex_lock(&lock);
  struct traced* entry = find(parent);
  if (entry != NULL && !entry->answered &&
      !relay_check(TRITONSERVER_InferenceTraceSpawnChildTrace(entry->trace, &child), __LINE__) && child != NULL)
    entry->children++;
  pthread_mutex_unlock(&lock);
  return child;
}

void traces_done(uint64_t parent) {
  if (parent == 0) return;
  TRITONBACKEND_Request* release = NULL;
  pthread_mutex_lock(&lock);
  struct traced* entry = find(parent);
  if (entry != NULL && --entry->children == 0 && entry->answered) {
    release = entry->request;
    *entry = list[--count];
  }
  pthread_mutex_unlock(&lock);
  if (release != NULL) relay_check(TRITONBACKEND_RequestRelease(release, TRITONSERVER_REQUEST_RELEASE_ALL), __LINE__);
}
