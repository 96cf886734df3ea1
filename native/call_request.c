/* A nested call in Triton's core (call_conn.h): the CALL becomes a TRITONSERVER_InferenceRequest
 * whose inputs are the caller's bytes where they lie (no copy); the response allocator puts large
 * outputs straight into the connection's arena for the caller; each response becomes a REPLY. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call_conn.h"
#include "log.h"

/* buffer_userp of an output placed in the connection's arena (the others are malloc'd) */
static char IN_ARENA;

#define TRY(call)                        \
  do {                                   \
    TRITONSERVER_Error* error_ = (call); \
    if (error_ != NULL) return error_;   \
  } while (0)

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

/* -- the reply ------------------------------------------------------------------------------ */

static void put_response_record(struct wire_buf* buf, uint16_t n_outputs) {
  uint8_t* at = buf->data + buf->len;
  memset(at, 0, WIRE_RESPONSE_SIZE);
  at[0] = (uint8_t)n_outputs;
  at[1] = (uint8_t)(n_outputs >> 8);
  buf->len += WIRE_RESPONSE_SIZE;
}

/* Moves the outputs that did not fit the arena (malloc'd) and those in it into a new, larger
 * arena: once, while the connection's arena grows to what its calls need. */
static TRITONSERVER_Error* grow_arena(struct nested_call* call, TRITONSERVER_InferenceResponse* response,
                                      uint32_t count) {
  struct call_conn* conn = call->conn;
  size_t needed = wire_align(call->arena_used, WIRE_ALIGN) + call->overflow;
  struct arena grown = ARENA_INIT;
  char message[256];
  if (arena_reserve(&grown, needed, conn->shm_limit, message, sizeof(message)) != 0)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, message);
  if (call->arena_used) memcpy(grown.map, conn->out.map, call->arena_used);
  size_t offset = wire_align(call->arena_used, WIRE_ALIGN);
  for (uint32_t i = 0; i < count; i++) {
    const char* name;
    TRITONSERVER_DataType dtype;
    const int64_t* shape;
    uint64_t ndim;
    const void* base;
    size_t size;
    TRITONSERVER_MemoryType memory_type;
    int64_t memory_type_id;
    void* userp;
    TRY(TRITONSERVER_InferenceResponseOutput(response, i, &name, &dtype, &shape, &ndim, &base, &size, &memory_type,
                                             &memory_type_id, &userp));
    if (userp == &IN_ARENA || size < conn->threshold || conn->threshold == 0 || size == 0) continue;
    memcpy(grown.map + offset, base, size);
    offset += wire_align(size, WIRE_ALIGN);
  }
  arena_free(&conn->out);
  conn->out = grown;
  call->reply_fd = grown.pending_fd;
  conn->out.pending_fd = -1;
  return NULL;
}

/* Encodes a REPLY of the response's outputs into call->reply / call->data. */
static TRITONSERVER_Error* encode_outputs(struct nested_call* call, TRITONSERVER_InferenceResponse* response) {
  struct call_conn* conn = call->conn;
  uint32_t count;
  TRY(TRITONSERVER_InferenceResponseOutputCount(response, &count));
  if (count > 65535) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "too many outputs");
  if (call->overflow) TRY(grow_arena(call, response, count));
  struct wire_buf* msg = &call->reply;
  struct wire_buf* data = &call->data;
  msg->len = data->len = 0;
  if (wire_buf_reserve(msg, WIRE_HEADER_SIZE + WIRE_RESPONSE_SIZE) != 0) return out_of_memory();
  msg->len = WIRE_HEADER_SIZE;
  put_response_record(msg, (uint16_t)count);
  size_t overflow_at = wire_align(call->arena_used, WIRE_ALIGN);
  for (uint32_t i = 0; i < count; i++) {
    const char* name;
    TRITONSERVER_DataType dtype;
    const int64_t* shape;
    uint64_t ndim;
    const void* base;
    size_t size;
    TRITONSERVER_MemoryType memory_type;
    int64_t memory_type_id;
    void* userp;
    TRY(TRITONSERVER_InferenceResponseOutput(response, i, &name, &dtype, &shape, &ndim, &base, &size, &memory_type,
                                             &memory_type_id, &userp));
    if (memory_type == TRITONSERVER_MEMORY_GPU)
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "nested calls take outputs in CPU memory only");
    size_t name_len = strlen(name);
    if (ndim > WIRE_MAX_DIMS || name_len > 65535)
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "an output has too many dimensions or too long a name");
    uint8_t where = WIRE_INLINE;
    uint64_t offset;
    if (userp == &IN_ARENA) {
      where = WIRE_ARENA;
      offset = (uint64_t)((const uint8_t*)base - conn->out.map);
    } else if (call->overflow && size && conn->threshold && size >= conn->threshold) {
      where = WIRE_ARENA; /* moved by grow_arena, in the same order */
      offset = overflow_at;
      overflow_at += wire_align(size, WIRE_ALIGN);
    } else {
      if (wire_buf_reserve(data, wire_align(size, WIRE_ALIGN)) != 0) return out_of_memory();
      offset = data->len;
      wire_put_bytes(data, base, size);
      wire_pad(data, WIRE_ALIGN);
    }
    if (wire_buf_reserve(msg, WIRE_TENSOR_SIZE + 8u * ndim + name_len) != 0) return out_of_memory();
    wire_put_tensor(msg, (uint8_t)dtype, shape, (uint8_t)ndim, name, (uint16_t)name_len, where, offset, size);
  }
  if (call->overflow) call->arena_used = overflow_at;
  if (call->arena_used > conn->out.touched) conn->out.touched = call->arena_used;
  if (wire_buf_reserve(msg, WIRE_ALIGN) != 0) return out_of_memory();
  wire_pad(msg, WIRE_ALIGN);
  return NULL;
}

static void put_header(struct nested_call* call, uint8_t flags, uint32_t count, uint64_t value, uint32_t text_len) {
  struct wire_header header = {WIRE_VERSION, WIRE_REPLY, flags, count, call->id, value, 0, text_len,
                               (uint32_t)call->reply.len, 0};
  wire_put_header(call->reply.data, &header);
}

/* Sends call->reply (and its data); final: the call is done with it. conn->lock held. */
static void send_reply(struct nested_call* call, int final) {
  if (final) call->reply.data[3] |= WIRE_FINAL;
  struct iovec iov[2] = {{call->reply.data, call->reply.len}, {call->data.data, call->data.len}};
  conn_send_locked(call->conn, iov, call->data.len ? 2 : 1, call->reply_fd);
  if (call->reply_fd >= 0) call->reply_fd = -1; /* the arena keeps its own (conn->out.fd) */
}

/* A REPLY failing the call with code and message, in call->reply. */
static void encode_failure(struct nested_call* call, TRITONSERVER_Error_Code code, const char* message) {
  size_t len = strlen(message);
  if (len > 65536) len = 65536;
  call->reply.len = call->data.len = 0;
  if (wire_buf_reserve(&call->reply, WIRE_HEADER_SIZE + len + WIRE_ALIGN) != 0) {
    len = 0; /* the failure goes without its text */
    if (wire_buf_reserve(&call->reply, WIRE_HEADER_SIZE + WIRE_ALIGN) != 0) return;
  }
  call->reply.len = WIRE_HEADER_SIZE;
  wire_put_bytes(&call->reply, message, len);
  wire_pad(&call->reply, WIRE_ALIGN);
  put_header(call, WIRE_FAILED, 0, (uint64_t)code, (uint32_t)len);
}

void call_fail(struct nested_call* call, TRITONSERVER_Error_Code code, const char* message) {
  pthread_mutex_lock(&call->conn->lock);
  call_detach_locked(call);
  encode_failure(call, code, message);
  if (call->reply.len) send_reply(call, 1);
  pthread_mutex_unlock(&call->conn->lock);
  call_free(call);
}

static void on_response(TRITONSERVER_InferenceResponse* response, const uint32_t flags, void* userp) {
  struct nested_call* call = userp;
  int final = (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  pthread_mutex_lock(&call->conn->lock);
  if (response != NULL) {
    TRITONSERVER_Error* failed = TRITONSERVER_InferenceResponseError(response); /* owned by the response */
    TRITONSERVER_Error* error = failed == NULL ? encode_outputs(call, response) : NULL;
    if (failed != NULL || error != NULL) {
      TRITONSERVER_Error* why = failed != NULL ? failed : error;
      encode_failure(call, TRITONSERVER_ErrorCode(why), TRITONSERVER_ErrorMessage(why));
      if (error != NULL) TRITONSERVER_ErrorDelete(error);
    } else {
      put_header(call, 0, 1, 0, 0);
    }
  } else {
    call->reply.len = call->data.len = 0;
    if (wire_buf_reserve(&call->reply, WIRE_ALIGN) == 0) {
      call->reply.len = WIRE_ALIGN; /* a header, padded: nothing more */
      memset(call->reply.data, 0, WIRE_ALIGN);
      put_header(call, 0, 0, 0, 0);
    }
  }
  int done = 0;
  if (!final) {
    if (call->reply.len) send_reply(call, 0);
  } else if (call->request == NULL) { /* given back already: the call is done */
    call_detach_locked(call);
    if (call->reply.len) send_reply(call, 1);
    done = 1;
  } else {
    call->final_waits = 1; /* sent when Triton gives the request back */
  }
  pthread_mutex_unlock(&call->conn->lock);
  if (response != NULL) relay_check(TRITONSERVER_InferenceResponseDelete(response), __LINE__);
  if (done) call_free(call);
}

static void on_release(TRITONSERVER_InferenceRequest* request, const uint32_t flags, void* userp) {
  if (!(flags & TRITONSERVER_REQUEST_RELEASE_ALL)) return;
  struct nested_call* call = userp;
  struct call_conn* conn = call->conn;
  pthread_mutex_lock(&conn->lock);
  call->request = NULL; /* no cancel reaches it from here */
  int done = call->final_waits;
  if (done) {
    call_detach_locked(call);
    if (call->reply.len) send_reply(call, 1);
  }
  pthread_mutex_unlock(&conn->lock);
  relay_check(TRITONSERVER_InferenceRequestDelete(request), __LINE__);
  if (done) call_free(call);
}

/* -- the allocator --------------------------------------------------------------------------- */

static TRITONSERVER_Error* allocate(TRITONSERVER_ResponseAllocator* allocator, const char* tensor_name,
                                   size_t byte_size, TRITONSERVER_MemoryType memory_type, int64_t memory_type_id,
                                   void* userp, void** buffer, void** buffer_userp,
                                   TRITONSERVER_MemoryType* actual_memory_type, int64_t* actual_memory_type_id) {
  (void)allocator, (void)tensor_name, (void)memory_type, (void)memory_type_id;
  struct nested_call* call = userp;
  struct call_conn* conn = call->conn;
  *actual_memory_type = TRITONSERVER_MEMORY_CPU;
  *actual_memory_type_id = 0;
  *buffer_userp = NULL;
  *buffer = NULL;
  if (byte_size == 0) return NULL;
  if (!call->stream && conn->threshold && byte_size >= conn->threshold) {
    size_t offset = wire_align(call->arena_used, WIRE_ALIGN);
    char message[256];
    /* the first large output may replace the arena (nothing of this call is in it yet); a later one
     * that does not fit waits in memory of its own until the reply (grow_arena) */
    if (offset == 0 || offset + byte_size <= conn->out.size) {
      if (arena_reserve(&conn->out, offset + byte_size, conn->shm_limit, message, sizeof(message)) != 0)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, message);
      if (conn->out.pending_fd >= 0) { /* replaced: the caller gets it with the reply */
        call->reply_fd = conn->out.pending_fd;
        conn->out.pending_fd = -1;
      }
      call->arena_used = offset + byte_size;
      *buffer = conn->out.map + offset;
      *buffer_userp = &IN_ARENA;
      return NULL;
    }
    call->overflow += wire_align(byte_size, WIRE_ALIGN);
  }
  *buffer = malloc(byte_size);
  if (*buffer == NULL) return out_of_memory();
  return NULL;
}

static TRITONSERVER_Error* release(TRITONSERVER_ResponseAllocator* allocator, void* buffer, void* buffer_userp,
                                   size_t byte_size, TRITONSERVER_MemoryType memory_type, int64_t memory_type_id) {
  (void)allocator, (void)byte_size, (void)memory_type, (void)memory_type_id;
  if (buffer_userp != &IN_ARENA) free(buffer);
  return NULL;
}

TRITONSERVER_Error* call_allocator_new(TRITONSERVER_ResponseAllocator** allocator) {
  return TRITONSERVER_ResponseAllocatorNew(allocator, allocate, release, NULL);
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
  if (error == NULL) error = TRITONSERVER_InferenceRequestSetResponseCallback(request, allocator, call, on_response, call);
  if (error == NULL) {
    pthread_mutex_lock(&conn->lock);
    call->request = request; /* before Triton may answer it */
    pthread_mutex_unlock(&conn->lock);
    error = TRITONSERVER_ServerInferAsync(server, request, NULL);
    if (error != NULL) {
      pthread_mutex_lock(&conn->lock);
      call->request = NULL;
      pthread_mutex_unlock(&conn->lock);
    }
  }
  if (error != NULL) relay_check(TRITONSERVER_InferenceRequestDelete(request), __LINE__);
  return error;
}
