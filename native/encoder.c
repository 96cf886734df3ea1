/* Encoding a batch of Triton's requests as the relay's BATCH message (encoder.h). */
#include "encoder.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "instance.h"
#include "log.h"
#include "settings.h"
#include "slots.h"
#include "traces.h"
#include "transport.h"
#include "wire.h"

#define RESERVE(buf, size)                                                                               \
  do {                                                                                                   \
    if (wire_buf_reserve((buf), (size)) != 0)                                                            \
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory encoding a batch");      \
  } while (0)

/* The correlation id of a request of a sequence model. */
static TRITONSERVER_Error* correlation_id(TRITONBACKEND_Request* request, uint8_t* kind, uint64_t* id,
                                          const char** text) {
  TRITONSERVER_Error* error = TRITONBACKEND_RequestCorrelationId(request, id);
  if (error == NULL) {
    *kind = *id ? WIRE_ID_UINT : WIRE_ID_NONE;
    return NULL;
  }
  TRITONSERVER_ErrorDelete(error); /* not an integer id: a string one */
  TRY(TRITONBACKEND_RequestCorrelationIdString(request, text));
  *id = strlen(*text);
  *kind = *id ? WIRE_ID_STRING : WIRE_ID_NONE;
  if (*id > 65535) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "correlation id too long");
  return NULL;
}

static TRITONSERVER_Error* encode_parameters(struct wire_buf* msg, TRITONBACKEND_Request* request, uint32_t count) {
  for (uint32_t i = 0; i < count; i++) {
    const char* key;
    TRITONSERVER_ParameterType type;
    const void* value;
    TRY(TRITONBACKEND_RequestParameter(request, i, &key, &type, &value));
    size_t key_len = strlen(key);
    uint8_t wire_type;
    size_t value_len;
    switch (type) {
      case TRITONSERVER_PARAMETER_STRING: wire_type = WIRE_PARAM_STRING; value_len = strlen(value); break;
      case TRITONSERVER_PARAMETER_INT: wire_type = WIRE_PARAM_INT; value_len = 8; break;
      case TRITONSERVER_PARAMETER_BOOL: wire_type = WIRE_PARAM_BOOL; value_len = 1; break;
      case TRITONSERVER_PARAMETER_DOUBLE: wire_type = WIRE_PARAM_DOUBLE; value_len = 8; break;
      default: continue; /* BYTES parameters do not come from the frontends */
    }
    if (key_len > 65535 || value_len > UINT32_MAX)
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "a request parameter is too long");
    uint8_t boolean = 0;
    if (type == TRITONSERVER_PARAMETER_BOOL) {
      boolean = *(const bool*)value ? 1 : 0;
      value = &boolean;
    }
    RESERVE(msg, WIRE_PARAM_SIZE + key_len + value_len);
    wire_put_param(msg, wire_type, key, (uint16_t)key_len, value, (uint32_t)value_len);
  }
  return NULL;
}

static TRITONSERVER_Error* copy_input(const struct input_ref* ref, uint8_t* to) {
  uint64_t copied = 0;
  for (uint32_t b = 0; b < ref->buffers; b++) {
    const void* buffer;
    uint64_t size;
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    int64_t memory_type_id = 0;
    TRY(TRITONBACKEND_InputBuffer(ref->input, b, &buffer, &size, &memory_type, &memory_type_id));
    if (memory_type == TRITONSERVER_MEMORY_GPU)
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "pytriton_like relays inputs in CPU memory only");
    if (size > ref->byte_size - copied)
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "an input's buffers exceed its size");
    if (size) memcpy(to + copied, buffer, size);
    copied += size;
  }
  if (copied != ref->byte_size)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "an input's buffers fall short of its size");
  return NULL;
}

TRITONSERVER_Error* encode_batch(struct instance_state* inst, struct slot* slot, char* message, size_t message_len) {
  struct settings* settings = &inst->model->settings;
  struct wire_buf* msg = &slot->msg;
  struct wire_buf* data = &slot->data;
  msg->len = data->len = 0;
  RESERVE(msg, WIRE_HEADER_SIZE);
  msg->len = WIRE_HEADER_SIZE;
  /* Pass 1: every input's properties, and the arena bytes the large ones need. */
  uint32_t total = 0;
  uint64_t arena_bytes = 0;
  uint64_t threshold = settings->decoupled ? UINT64_MAX : inst->threshold;
  for (uint32_t r = 0; r < slot->count; r++) {
    uint32_t count;
    TRY(TRITONBACKEND_RequestInputCount(slot->requests[r], &count));
    if (count > 65535) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "too many inputs");
    if (total + count > slot->inputs_cap) {
      uint32_t cap = slot->inputs_cap ? slot->inputs_cap : 16;
      while (cap < total + count) cap *= 2;
      struct input_ref* inputs = realloc(slot->inputs, cap * sizeof(*inputs));
      if (inputs == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory encoding a batch");
      slot->inputs = inputs;
      slot->inputs_cap = cap;
    }
    for (uint32_t i = 0; i < count; i++) {
      struct input_ref* ref = &slot->inputs[total + i];
      TRY(TRITONBACKEND_RequestInputByIndex(slot->requests[r], i, &ref->input));
      TRY(TRITONBACKEND_InputProperties(ref->input, &ref->name, &ref->dtype, &ref->shape, &ref->ndim, &ref->byte_size,
                                        &ref->buffers));
      if (ref->ndim > WIRE_MAX_DIMS || strlen(ref->name) > 65535)
        return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "an input has too many dimensions or too long a name");
      if (ref->byte_size && ref->byte_size >= threshold) arena_bytes += wire_align(ref->byte_size, WIRE_ALIGN);
      if (i == 0) slot->batch_size += settings->batching && ref->ndim > 0 ? (uint64_t)ref->shape[0] : 1;
    }
    if (count == 0) slot->batch_size += 1;
    total += count;
  }
  if (arena_bytes && arena_reserve(&slot->in, arena_bytes, settings->shm_limit, message, message_len) != 0)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNAVAILABLE, message);
  if (arena_bytes > slot->in.touched) slot->in.touched = arena_bytes;
  /* Pass 2: the records, and each tensor's bytes copied once: into the message or the arena. */
  uint64_t arena_offset = 0;
  uint32_t next = 0;
  for (uint32_t r = 0; r < slot->count; r++) {
    TRITONBACKEND_Request* request = slot->requests[r];
    uint32_t inputs, params = 0, outputs = 0, flags = 0;
    uint8_t id_kind = WIRE_ID_NONE;
    uint64_t id = 0;
    const char* id_text = NULL;
    TRY(TRITONBACKEND_RequestInputCount(request, &inputs));
    TRY(TRITONBACKEND_RequestParameterCount(request, &params));
    TRY(TRITONBACKEND_RequestOutputCount(request, &outputs));
    if (params > 65535 || outputs > 65535)
      return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "too many parameters or outputs");
    if (outputs == settings->outputs) outputs = 0; /* all of them: the default */
    if (settings->sequence) {
      TRY(TRITONBACKEND_RequestFlags(request, &flags));
      TRY(correlation_id(request, &id_kind, &id, &id_text));
    }
    uint64_t trace = traces_add(request);
    if (trace) flags |= WIRE_REQUEST_TRACED;
    RESERVE(msg, WIRE_REQUEST_SIZE + 8 + (id_kind == WIRE_ID_STRING ? id : 0));
    wire_put_request(msg, (uint16_t)inputs, (uint16_t)params, (uint16_t)outputs, id_kind, flags, id);
    if (trace) wire_put_u64(msg, trace);
    if (id_kind == WIRE_ID_STRING) wire_put_bytes(msg, id_text, id);
    TRY(encode_parameters(msg, request, params));
    for (uint32_t o = 0; o < outputs; o++) {
      const char* name;
      TRY(TRITONBACKEND_RequestOutputName(request, o, &name));
      size_t len = strlen(name);
      if (len > 65535) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "an output name is too long");
      RESERVE(msg, 2 + len);
      wire_put_u16(msg, (uint16_t)len);
      wire_put_bytes(msg, name, len);
    }
    for (uint32_t i = 0; i < inputs; i++, next++) {
      const struct input_ref* ref = &slot->inputs[next];
      size_t name_len = strlen(ref->name);
      uint64_t offset;
      uint8_t where;
      if (ref->byte_size && ref->byte_size >= threshold) {
        where = WIRE_ARENA;
        offset = arena_offset;
        TRY(copy_input(ref, slot->in.map + offset));
        arena_offset += wire_align(ref->byte_size, WIRE_ALIGN);
      } else {
        where = WIRE_INLINE;
        RESERVE(data, wire_align(ref->byte_size, WIRE_ALIGN));
        offset = data->len;
        TRY(copy_input(ref, data->data + offset));
        data->len += ref->byte_size;
        wire_pad(data, WIRE_ALIGN);
      }
      RESERVE(msg, WIRE_TENSOR_SIZE + 8u * ref->ndim + name_len);
      wire_put_tensor(msg, (uint8_t)ref->dtype, ref->shape, (uint8_t)ref->ndim, ref->name, (uint16_t)name_len, where,
                      offset, ref->byte_size);
    }
  }
  RESERVE(msg, WIRE_ALIGN);
  wire_pad(msg, WIRE_ALIGN);
  if (msg->len + data->len > WIRE_MAX_MESSAGE)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "a batch too large for the relay's messages");
  struct wire_header header = {WIRE_VERSION, WIRE_BATCH, slot->in.pending_fd >= 0 ? WIRE_NEW_ARENA : 0, slot->count,
                               slot->batch_id, arena_bytes, slot->index, 0, (uint32_t)msg->len, 0};
  wire_put_header(msg->data, &header);
  return NULL;
}

int null_request(TRITONBACKEND_Request* request) {
  uint8_t kind;
  uint64_t id;
  const char* text;
  TRITONSERVER_Error* error = correlation_id(request, &kind, &id, &text);
  if (error != NULL) {
    TRITONSERVER_ErrorDelete(error);
    return 0;
  }
  return kind == WIRE_ID_NONE;
}
