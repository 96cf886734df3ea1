/* A nested call in Triton's core (call_conn.h): the CALL becomes a TRITONSERVER_InferenceRequest
 * whose inputs are the caller's bytes where they lie (no copy), handed to Triton; its responses are
 * call_reply.c's. The call ends when Triton gave its request back and sent its last response. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call_conn.h"
#include "calls.h"
#include "log.h"
#include "traces.h"

/* The calls whose requests Triton holds (calls_made): few at a time, linked by made_next. */
static pthread_mutex_t made_lock = PTHREAD_MUTEX_INITIALIZER;
static struct nested_call* made;

static void made_add(struct nested_call* call, TRITONSERVER_InferenceRequest* request) {
  pthread_mutex_lock(&made_lock);
  call->made = request;
  call->made_next = made;
  made = call;
  pthread_mutex_unlock(&made_lock);
}

static void made_remove(struct nested_call* call) {
  pthread_mutex_lock(&made_lock);
  for (struct nested_call** at = &made; *at != NULL; at = &(*at)->made_next) {
    if (*at == call) {
      *at = call->made_next;
      break;
    }
  }
  call->made = NULL;
  pthread_mutex_unlock(&made_lock);
}

int calls_made(const void* request) {
  pthread_mutex_lock(&made_lock);
  const struct nested_call* call = made;
  while (call != NULL && call->made != request) call = call->made_next;
  pthread_mutex_unlock(&made_lock);
  return call != NULL;
}

static TRITONSERVER_Error* out_of_memory(void) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory in a nested call");
}

/* A NUL-terminated copy of len bytes in call->text (valid until the next one). */
static const char* text_of(struct nested_call* call, const char* bytes, size_t len) {
  call->text.len = 0;
  if (wire_buf_reserve(&call->text, len + 1) != 0) return NULL;
  wire_put_bytes(&call->text, bytes, len);
  call->text.data[len] = '\0';
  return (const char*)call->text.data;
}

static TRITONSERVER_Error* add_parameter(struct nested_call* call, TRITONSERVER_InferenceRequest* request,
                                         const struct wire_param* param) {
  char key[256];
  if (param->key_len >= sizeof(key))
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "a request parameter's name is too long");
  memcpy(key, param->key, param->key_len);
  key[param->key_len] = '\0';
  int64_t number;
  double real;
  switch (param->type) {
    case WIRE_PARAM_STRING: {
      const char* value = text_of(call, (const char*)param->value, param->value_len);
      if (value == NULL) return out_of_memory();
      return TRITONSERVER_InferenceRequestSetStringParameter(request, key, value);
    }
    case WIRE_PARAM_INT:
      memcpy(&number, param->value, 8); /* both ends are little-endian (wire.h) */
      return TRITONSERVER_InferenceRequestSetIntParameter(request, key, number);
    case WIRE_PARAM_BOOL:
      return TRITONSERVER_InferenceRequestSetBoolParameter(request, key, param->value[0] != 0);
    default:
      memcpy(&real, param->value, 8);
      return TRITONSERVER_InferenceRequestSetDoubleParameter(request, key, real);
  }
}

/* Everything of the checked CALL onto the request: id, sequence, parameters, outputs, inputs. */
static TRITONSERVER_Error* fill(struct nested_call* call, TRITONSERVER_InferenceRequest* request,
                                const struct wire_call* fields, struct wire_cursor* cursor) {
  if (fields->request_id_len) {
    const char* id = text_of(call, fields->request_id, fields->request_id_len);
    if (id == NULL) return out_of_memory();
    TRY(TRITONSERVER_InferenceRequestSetId(request, id));
  }
  if (fields->flags) TRY(TRITONSERVER_InferenceRequestSetFlags(request, fields->flags));
  if (fields->id_kind == WIRE_ID_UINT) TRY(TRITONSERVER_InferenceRequestSetCorrelationId(request, fields->id));
  if (fields->id_kind == WIRE_ID_STRING) {
    const char* id = text_of(call, fields->id_text, (size_t)fields->id);
    if (id == NULL) return out_of_memory();
    TRY(TRITONSERVER_InferenceRequestSetCorrelationIdString(request, id));
  }
  for (uint16_t i = 0; i < fields->n_params; i++) {
    struct wire_param param;
    wire_next_param(cursor, &param); /* checked by wire_check_call: cannot fail */
    TRY(add_parameter(call, request, &param));
  }
  for (uint16_t i = 0; i < fields->n_outputs; i++) {
    const char* name;
    uint16_t name_len;
    wire_next_name(cursor, &name, &name_len);
    const char* copy = text_of(call, name, name_len);
    if (copy == NULL) return out_of_memory();
    TRY(TRITONSERVER_InferenceRequestAddRequestedOutput(request, copy));
  }
  for (uint16_t i = 0; i < fields->n_inputs; i++) {
    struct wire_tensor tensor;
    wire_next_tensor(cursor, &tensor);
    const char* name = text_of(call, tensor.name, tensor.name_len);
    if (name == NULL) return out_of_memory();
    TRY(TRITONSERVER_InferenceRequestAddInput(request, name, (TRITONSERVER_DataType)tensor.dtype, tensor.dims,
                                              tensor.ndim));
    if (tensor.nbytes)
      TRY(TRITONSERVER_InferenceRequestAppendInputData(request, name, tensor.data, tensor.nbytes,
                                                       TRITONSERVER_MEMORY_CPU, 0));
  }
  if (cursor->arena_end > call->in_touched) call->in_touched = cursor->arena_end;
  return NULL;
}

static void on_release(TRITONSERVER_InferenceRequest* request, const uint32_t flags, void* userp) {
  if (!(flags & TRITONSERVER_REQUEST_RELEASE_ALL)) return;
  struct nested_call* call = userp;
  struct call_conn* conn = call->conn;
  /* before Triton may reuse its address, and while the call is surely alive: once request is NULL
   * the last response, on another thread, may free it */
  made_remove(call);
  pthread_mutex_lock(&conn->lock);
  conn_wait_room_locked(conn);
  call->request = NULL; /* no cancel reaches it from here */
  int done = call->final_waits;
  if (done) {
    call_detach_locked(call);
    if (call->reply.len) send_reply(call, 1);
  }
  uint64_t trace_parent = call->trace_parent;
  pthread_mutex_unlock(&conn->lock);
  relay_check(TRITONSERVER_InferenceRequestDelete(request), __LINE__);
  traces_done(trace_parent); /* the caller's request may be given back now */
  if (done) call_free(call);
}

/* -- starting a call -------------------------------------------------------------------------- */

static TRITONSERVER_Error* model_version(const struct wire_call* fields, int64_t* version) {
  *version = -1;
  if (fields->version_len == 0) return NULL;
  char text[65];
  memcpy(text, fields->version, fields->version_len);
  text[fields->version_len] = '\0';
  char* end;
  long long parsed = strtoll(text, &end, 10);
  if (*end != '\0' || parsed < 1)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "failed to parse the model version");
  *version = parsed;
  return NULL;
}

TRITONSERVER_Error* call_start(struct nested_call* call, TRITONSERVER_Server* server,
                               TRITONSERVER_ResponseAllocator* allocator) {
  struct call_conn* conn = call->conn;
  struct wire_header header;
  struct wire_call fields;
  struct wire_cursor cursor;
  const char* problem = wire_check_call(call->msg.data, call->msg.len, conn->in.map, conn->in.size, &header, &fields,
                                        &cursor);
  if (problem != NULL) {
    char message[256];
    snprintf(message, sizeof(message), "a malformed nested call: %s", problem);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, message);
  }
  if (server == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, "tritonserver is not serving yet");
  int64_t version;
  TRY(model_version(&fields, &version));
  TRITONSERVER_InferenceRequest* request;
  TRY(TRITONSERVER_InferenceRequestNew(&request, server, fields.model, version));
  TRITONSERVER_Error* error = fill(call, request, &fields, &cursor);
  if (error == NULL) error = TRITONSERVER_InferenceRequestSetReleaseCallback(request, on_release, call);
  if (error == NULL) error = TRITONSERVER_InferenceRequestSetResponseCallback(request, allocator, call, call_on_response, call);
  if (error == NULL) {
    pthread_mutex_lock(&conn->lock);
    call->request = request; /* before Triton may answer it */
    pthread_mutex_unlock(&conn->lock);
    made_add(call, request);
    TRITONSERVER_InferenceTrace* trace = traces_child(header.value); /* a child of its caller's request's trace */
    call->trace_parent = trace != NULL ? header.value : 0;
    error = TRITONSERVER_ServerInferAsync(server, request, trace);
    if (error != NULL) {
      made_remove(call);
      traces_done(call->trace_parent);
      pthread_mutex_lock(&conn->lock);
      call->request = NULL;
      call->trace_parent = 0;
      pthread_mutex_unlock(&conn->lock);
    }
  }
  if (error != NULL) relay_check(TRITONSERVER_InferenceRequestDelete(request), __LINE__);
  return error;
}
