/* A nested call's responses (call_conn.h): the response allocator puts large outputs straight into
 * the connection's arena for the caller; each response Triton completes becomes a REPLY. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "call_conn.h"
#include "log.h"

/* buffer_userp of an output placed in the connection's arena (the others are malloc'd) */
static char IN_ARENA;

static TRITONSERVER_Error* out_of_memory(void) {
  return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory in a nested call's reply");
}

/* -- the reply ------------------------------------------------------------------------------ */

static void put_response_record(struct wire_buf* buf, uint16_t n_outputs) {
  uint8_t* at = buf->data + buf->len;
  memset(at, 0, WIRE_RESPONSE_SIZE);
  at[0] = (uint8_t)n_outputs;
  at[1] = (uint8_t)(n_outputs >> 8);
  buf->len += WIRE_RESPONSE_SIZE;
}

/* One output of a response, as TRITONSERVER_InferenceResponseOutput gives it. */
struct output {
  const char* name;
  TRITONSERVER_DataType dtype;
  const int64_t* shape;
  uint64_t ndim;
  const void* base;
  size_t size;
  TRITONSERVER_MemoryType memory_type;
  int64_t memory_type_id;
  void* userp;
};

static TRITONSERVER_Error* read_output(TRITONSERVER_InferenceResponse* response, uint32_t index, struct output* out) {
  return TRITONSERVER_InferenceResponseOutput(response, index, &out->name, &out->dtype, &out->shape, &out->ndim,
                                              &out->base, &out->size, &out->memory_type, &out->memory_type_id,
                                              &out->userp);
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
  if (call->arena_used) memcpy(grown.map, call->out->map, call->arena_used);
  size_t offset = wire_align(call->arena_used, WIRE_ALIGN);
  for (uint32_t i = 0; i < count; i++) {
    struct output out;
    TRY(read_output(response, i, &out));
    if (out.userp == &IN_ARENA || out.size < conn->threshold || conn->threshold == 0 || out.size == 0) continue;
    memcpy(grown.map + offset, out.base, out.size);
    offset += wire_align(out.size, WIRE_ALIGN);
  }
  arena_free(call->out);
  *call->out = grown;
  call->reply_fd = grown.pending_fd;
  call->out->pending_fd = -1;
  return NULL;
}

/* Encodes a REPLY of the response's outputs into call->reply / call->data. */
static TRITONSERVER_Error* encode_outputs(struct nested_call* call, TRITONSERVER_InferenceResponse* response) {
  struct call_conn* conn = call->conn;
  uint32_t count;
  TRY(TRITONSERVER_InferenceResponseOutputCount(response, &count));
  if (count > 65535) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "too many outputs");
  /* where the outputs in the arena were placed: grow_arena moves them to the same offsets of another */
  const uint8_t* placed = call->out != NULL ? call->out->map : NULL;
  if (call->overflow) TRY(grow_arena(call, response, count));
  struct wire_buf* msg = &call->reply;
  struct wire_buf* data = &call->data;
  msg->len = data->len = 0;
  if (wire_buf_reserve(msg, WIRE_HEADER_SIZE + WIRE_RESPONSE_SIZE) != 0) return out_of_memory();
  msg->len = WIRE_HEADER_SIZE;
  put_response_record(msg, (uint16_t)count);
  size_t overflow_at = wire_align(call->arena_used, WIRE_ALIGN);
  for (uint32_t i = 0; i < count; i++) {
    struct output out;
    TRY(read_output(response, i, &out));
    if (out.memory_type == TRITONSERVER_MEMORY_GPU)
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "nested calls take outputs in CPU memory only");
    size_t name_len = strlen(out.name);
    if (out.ndim > WIRE_MAX_DIMS || name_len > 65535)
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "an output has too many dimensions or too long a name");
    uint8_t where = WIRE_INLINE;
    uint64_t offset;
    if (out.userp == &IN_ARENA) {
      where = WIRE_ARENA;
      offset = (uint64_t)((const uint8_t*)out.base - placed);
    } else if (call->overflow && out.size && conn->threshold && out.size >= conn->threshold) {
      where = WIRE_ARENA; /* moved by grow_arena, in the same order */
      offset = overflow_at;
      overflow_at += wire_align(out.size, WIRE_ALIGN);
    } else {
      if (wire_buf_reserve(data, wire_align(out.size, WIRE_ALIGN)) != 0) return out_of_memory();
      offset = data->len;
      wire_put_bytes(data, out.base, out.size);
      wire_pad(data, WIRE_ALIGN);
    }
    if (wire_buf_reserve(msg, WIRE_TENSOR_SIZE + 8u * out.ndim + name_len) != 0) return out_of_memory();
    wire_put_tensor(msg, (uint8_t)out.dtype, out.shape, (uint8_t)out.ndim, out.name, (uint16_t)name_len, where, offset, out.size);
  }
  if (call->overflow) call->arena_used = overflow_at;
  if (call->out != NULL && call->arena_used > call->out->touched) call->out->touched = call->arena_used;
  if (wire_buf_reserve(msg, WIRE_ALIGN) != 0) return out_of_memory();
  wire_pad(msg, WIRE_ALIGN);
  return NULL;
}

static void put_header(struct nested_call* call, uint8_t flags, uint32_t count, uint64_t value, uint32_t text_len) {
  struct wire_header header = {WIRE_VERSION, WIRE_REPLY, flags, count, call->id, value, call->out_index, text_len,
                               (uint32_t)call->reply.len, 0};
  wire_put_header(call->reply.data, &header);
}

/* Sends call->reply (and its data); final: the call is done with it. conn->lock held. */
void send_reply(struct nested_call* call, int final) {
  if (final) call->reply.data[3] |= WIRE_FINAL;
  struct iovec iov[2] = {{call->reply.data, call->reply.len}, {call->data.data, call->data.len}};
  conn_send_locked(call->conn, iov, call->data.len ? 2 : 1, call->reply_fd);
  if (call->reply_fd >= 0) call->reply_fd = -1; /* the arena keeps its own descriptor */
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

void call_on_response(TRITONSERVER_InferenceResponse* response, const uint32_t flags, void* userp) {
  struct nested_call* call = userp;
  int final = (flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL) != 0;
  pthread_mutex_lock(&call->conn->lock);
  conn_wait_room_locked(call->conn);
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
  if (!call->stream && call->out != NULL && conn->threshold && byte_size >= conn->threshold) {
    size_t offset = wire_align(call->arena_used, WIRE_ALIGN);
    char message[256];
    /* the first large output may replace the arena (nothing of this call is in it yet); a later one
     * that does not fit waits in memory of its own until the reply (grow_arena) */
    if (offset == 0 || offset + byte_size <= call->out->size) {
      if (arena_reserve(call->out, offset + byte_size, conn->shm_limit, message, sizeof(message)) != 0)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, message);
      if (call->out->pending_fd >= 0) { /* replaced: the caller gets it with the reply */
        call->reply_fd = call->out->pending_fd;
        call->out->pending_fd = -1;
      }
      call->arena_used = offset + byte_size;
      *buffer = call->out->map + offset;
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
