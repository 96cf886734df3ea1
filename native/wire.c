/* The relay's wire codec (wire.h): encoding BATCH messages, checking and reading RESULTs.
 * No I/O and no Triton calls here, so the decoder can be fuzzed alone (fuzz_wire.c). */
#include "wire.h"

#include <stdlib.h>
#include <string.h>

int wire_buf_reserve(struct wire_buf* buf, size_t extra) {
  if (extra > SIZE_MAX / 2 - buf->len) return -1;
  size_t need = buf->len + extra;
  if (need <= buf->cap) return 0;
  size_t cap = buf->cap ? buf->cap : 4096;
  while (cap < need) cap *= 2;
  uint8_t* data = realloc(buf->data, cap);
  if (data == NULL) return -1;
  buf->data = data;
  buf->cap = cap;
  return 0;
}

void wire_buf_free(struct wire_buf* buf) {
  free(buf->data);
  buf->data = NULL;
  buf->len = buf->cap = 0;
}

size_t wire_align(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

static void put_le(uint8_t* at, uint64_t value, unsigned size) {
  for (unsigned i = 0; i < size; i++) at[i] = (uint8_t)(value >> (8 * i));
}

static uint64_t get_le(const uint8_t* at, unsigned size) {
  uint64_t value = 0;
  for (unsigned i = 0; i < size; i++) value |= (uint64_t)at[i] << (8 * i);
  return value;
}

void wire_put_header(uint8_t* at, const struct wire_header* h) {
  put_le(at, h->version, 2);
  at[2] = h->kind;
  at[3] = h->flags;
  put_le(at + 4, h->count, 4);
  put_le(at + 8, h->batch_id, 8);
  put_le(at + 16, h->value, 8);
  put_le(at + 24, h->slot, 4);
  put_le(at + 28, h->text_len, 4);
  put_le(at + 32, h->data_offset, 4);
  put_le(at + 36, h->reserved, 4);
}

void wire_put_bytes(struct wire_buf* buf, const void* data, size_t len) {
  if (len) memcpy(buf->data + buf->len, data, len);
  buf->len += len;
}

void wire_put_u16(struct wire_buf* buf, uint16_t value) {
  put_le(buf->data + buf->len, value, 2);
  buf->len += 2;
}

void wire_put_u64(struct wire_buf* buf, uint64_t value) {
  put_le(buf->data + buf->len, value, 8);
  buf->len += 8;
}

void wire_pad(struct wire_buf* buf, size_t multiple) {
  size_t end = wire_align(buf->len, multiple);
  memset(buf->data + buf->len, 0, end - buf->len);
  buf->len = end;
}

void wire_put_request(struct wire_buf* buf, uint16_t n_inputs, uint16_t n_params, uint16_t n_outputs, uint8_t id_kind,
                      uint32_t flags, uint64_t id) {
  uint8_t* at = buf->data + buf->len;
  put_le(at, n_inputs, 2);
  put_le(at + 2, n_params, 2);
  put_le(at + 4, n_outputs, 2);
  at[6] = id_kind;
  at[7] = 0;
  put_le(at + 8, flags, 4);
  put_le(at + 12, id, 8);
  buf->len += WIRE_REQUEST_SIZE;
}

void wire_put_param(struct wire_buf* buf, uint8_t type, const char* key, uint16_t key_len, const void* value,
                    uint32_t value_len) {
  uint8_t* at = buf->data + buf->len;
  at[0] = type;
  at[1] = 0;
  put_le(at + 2, key_len, 2);
  put_le(at + 4, value_len, 4);
  buf->len += WIRE_PARAM_SIZE;
  wire_put_bytes(buf, key, key_len);
  wire_put_bytes(buf, value, value_len);
}

void wire_put_tensor(struct wire_buf* buf, uint8_t dtype, const int64_t* dims, uint8_t ndim, const char* name,
                     uint16_t name_len, uint8_t where, uint64_t offset, uint64_t nbytes) {
  uint8_t* at = buf->data + buf->len;
  at[0] = dtype;
  at[1] = ndim;
  put_le(at + 2, name_len, 2);
  put_le(at + 4, where, 4);
  put_le(at + 8, offset, 8);
  put_le(at + 16, nbytes, 8);
  at += WIRE_TENSOR_SIZE;
  for (unsigned i = 0; i < ndim; i++) put_le(at + 8 * i, (uint64_t)dims[i], 8);
  buf->len += WIRE_TENSOR_SIZE + 8u * ndim;
  wire_put_bytes(buf, name, name_len);
}

size_t wire_dtype_size(uint8_t dtype) {
  switch (dtype) {
    case 1: case 2: case 6: return 1;         /* BOOL UINT8 INT8 */
    case 3: case 7: case 10: case 14: return 2; /* UINT16 INT16 FP16 BF16 */
    case 4: case 8: case 11: return 4;        /* UINT32 INT32 FP32 */
    case 5: case 9: case 12: return 8;        /* UINT64 INT64 FP64 */
    default: return 0;                        /* BYTES (13) and unknown */
  }
}

const char* wire_read_header(const uint8_t* body, size_t len, struct wire_header* h) {
  if (len < WIRE_HEADER_SIZE) return "message shorter than its header";
  h->version = (uint16_t)get_le(body, 2);
  h->kind = body[2];
  h->flags = body[3];
  h->count = (uint32_t)get_le(body + 4, 4);
  h->batch_id = get_le(body + 8, 8);
  h->value = get_le(body + 16, 8);
  h->slot = (uint32_t)get_le(body + 24, 4);
  h->text_len = (uint32_t)get_le(body + 28, 4);
  h->data_offset = (uint32_t)get_le(body + 32, 4);
  h->reserved = (uint32_t)get_le(body + 36, 4);
  if (h->version != WIRE_VERSION) return "wrong protocol version";
  if (h->text_len > len - WIRE_HEADER_SIZE) return "text runs past the message";
  if (h->data_offset > len) return "data section starts past the message";
  return NULL;
}

/* Unchecked readers: wire_check_result walks the same records with the checks first. */
static void read_response(struct wire_cursor* c, struct wire_response* r) {
  const uint8_t* at = c->body + c->pos;
  r->n_outputs = (uint16_t)get_le(at, 2);
  r->status = (uint16_t)get_le(at + 2, 2);
  r->error_len = (uint32_t)get_le(at + 4, 4);
  r->error = (const char*)at + WIRE_RESPONSE_SIZE;
}

static void read_tensor_fixed(const uint8_t* at, struct wire_tensor* t) {
  t->dtype = at[0];
  t->ndim = at[1];
  t->name_len = (uint16_t)get_le(at + 2, 2);
  uint32_t where = (uint32_t)get_le(at + 4, 4);
  t->where = where > 255 ? 255 : (uint8_t)where;
  t->offset = get_le(at + 8, 8);
  t->nbytes = get_le(at + 16, 8);
}

/* Triton's BYTES layout: count elements, each a u32 length and that many bytes, filling data exactly. */
static const char* check_bytes(const uint8_t* data, uint64_t nbytes, uint64_t count) {
  uint64_t pos = 0;
  for (uint64_t i = 0; i < count; i++) {
    if (nbytes - pos < 4) return "BYTES tensor ends inside an element length";
    uint64_t length = get_le(data + pos, 4);
    pos += 4;
    if (nbytes - pos < length) return "BYTES tensor ends inside an element";
    pos += length;
  }
  if (pos != nbytes) return "BYTES tensor has bytes past its elements";
  return NULL;
}

static const char* check_tensor(struct wire_cursor* c, struct wire_tensor* t) {
  if (c->len - c->pos < WIRE_TENSOR_SIZE) return "tensor record runs past the message";
  read_tensor_fixed(c->body + c->pos, t);
  c->pos += WIRE_TENSOR_SIZE;
  if (t->ndim > WIRE_MAX_DIMS) return "tensor has too many dimensions";
  if ((c->len - c->pos) / 8 < t->ndim) return "tensor dimensions run past the message";
  uint64_t count = 1;
  int overflow = 0;
  for (unsigned i = 0; i < t->ndim; i++) {
    int64_t dim = (int64_t)get_le(c->body + c->pos + 8 * i, 8);
    if (dim < 0) return "tensor has a negative dimension";
    t->dims[i] = dim;
    if (dim != 0 && count > UINT64_MAX / (uint64_t)dim) overflow = 1;
    else count *= (uint64_t)dim;
  }
  c->pos += 8u * t->ndim;
  if (t->name_len == 0) return "tensor has an empty name";
  if (c->len - c->pos < t->name_len) return "tensor name runs past the message";
  t->name = (const char*)c->body + c->pos;
  if (memchr(t->name, 0, t->name_len) != NULL) return "tensor name holds a NUL byte";
  c->pos += t->name_len;
  if (t->where == WIRE_INLINE) {
    size_t room = c->len - c->data_offset;
    if (t->offset > room || t->nbytes > room - t->offset) return "inline tensor runs past the message";
    t->data = c->body + c->data_offset + t->offset;
  } else if (t->where == WIRE_ARENA) {
    if (c->arena == NULL) return "tensor in an arena, but there is none";
    if (t->offset > c->arena_len || t->nbytes > c->arena_len - t->offset) return "tensor runs past the arena";
    t->data = c->arena + t->offset;
    if (t->offset + t->nbytes > c->arena_end) c->arena_end = (size_t)(t->offset + t->nbytes);
  } else {
    return "tensor has an unknown location";
  }
  if (t->dtype == 13) {
    if (overflow || count > t->nbytes / 4) return "BYTES tensor too short for its shape";
    return check_bytes(t->data, t->nbytes, count);
  }
  size_t size = wire_dtype_size(t->dtype);
  if (size == 0) return "tensor has an unknown data type";
  if (overflow || count > UINT64_MAX / size || count * size != t->nbytes) return "tensor size does not match its shape";
  return NULL;
}

const char* wire_check_result(const uint8_t* body, size_t len, const uint8_t* arena, size_t arena_len,
                              struct wire_header* header, struct wire_cursor* cursor) {
  const char* error = wire_read_header(body, len, header);
  if (error != NULL) return error;
  if (header->kind != WIRE_RESULT) return "expected a RESULT";
  if ((header->flags & WIRE_FAILED) && header->count != 0) return "a failed RESULT has responses";
  struct wire_cursor c = {body, len, wire_align(WIRE_HEADER_SIZE + (size_t)header->text_len, 8), arena, arena_len,
                          header->data_offset, 0};
  if (c.pos > len) c.pos = len;
  size_t first = c.pos;
  for (uint32_t i = 0; i < header->count; i++) {
    if (len - c.pos < WIRE_RESPONSE_SIZE) return "response record runs past the message";
    struct wire_response r;
    read_response(&c, &r);
    c.pos += WIRE_RESPONSE_SIZE;
    if (r.status > 1) return "response has an unknown status";
    if (r.status == 1 && r.n_outputs != 0) return "a failed response has outputs";
    if (r.error_len > len - c.pos) return "response error runs past the message";
    c.pos += r.error_len;
    for (uint16_t j = 0; j < r.n_outputs; j++) {
      struct wire_tensor t;
      error = check_tensor(&c, &t);
      if (error != NULL) return error;
    }
  }
  if (header->count != 0 && c.pos > header->data_offset) return "records run into the data section";
  *cursor = c;
  cursor->pos = first;
  return NULL;
}

const char* wire_next_response(struct wire_cursor* c, struct wire_response* r) {
  if (c->len - c->pos < WIRE_RESPONSE_SIZE) return "response record runs past the message";
  read_response(c, r);
  c->pos += WIRE_RESPONSE_SIZE;
  if (r->error_len > c->len - c->pos) return "response error runs past the message";
  c->pos += r->error_len;
  return NULL;
}

const char* wire_next_tensor(struct wire_cursor* c, struct wire_tensor* t) { return check_tensor(c, t); }

const char* wire_model_text(const uint8_t* body, const struct wire_header* header, struct wire_call* call) {
  const char* text = (const char*)body + WIRE_HEADER_SIZE;
  const char* end = text + header->text_len;
  const char* nul = memchr(text, 0, header->text_len);
  if (nul == NULL) return "the model text has no NUL after the name";
  call->model = text;
  call->model_len = (size_t)(nul - text);
  call->version = nul + 1;
  nul = memchr(call->version, 0, (size_t)(end - call->version));
  call->version_len = (size_t)((nul != NULL ? nul : end) - call->version);
  call->request_id = nul != NULL ? nul + 1 : end;
  call->request_id_len = (size_t)(end - call->request_id);
  if (call->model_len == 0 || call->model_len > 255) return "the model name is empty or too long";
  if (header->kind == WIRE_CALL && nul == NULL) return "the model text has no NUL after the version";
  if (call->version_len > 64 || call->request_id_len > 255) return "the model version or the request id is too long";
  if (memchr(call->request_id, 0, call->request_id_len) != NULL) return "the request id holds a NUL byte";
  return NULL;
}

const char* wire_next_param(struct wire_cursor* c, struct wire_param* p) {
  if (c->len - c->pos < WIRE_PARAM_SIZE) return "parameter record runs past the message";
  const uint8_t* at = c->body + c->pos;
  p->type = at[0];
  p->key_len = (uint16_t)get_le(at + 2, 2);
  p->value_len = (uint32_t)get_le(at + 4, 4);
  c->pos += WIRE_PARAM_SIZE;
  if (c->len - c->pos < p->key_len) return "parameter key runs past the message";
  p->key = (const char*)c->body + c->pos;
  c->pos += p->key_len;
  if (c->len - c->pos < p->value_len) return "parameter value runs past the message";
  p->value = c->body + c->pos;
  c->pos += p->value_len;
  if (p->key_len == 0 || memchr(p->key, 0, p->key_len) != NULL) return "parameter key is empty or holds a NUL byte";
  switch (p->type) {
    case WIRE_PARAM_STRING:
      if (memchr(p->value, 0, p->value_len) != NULL) return "text parameter holds a NUL byte";
      return NULL;
    case WIRE_PARAM_INT: case WIRE_PARAM_DOUBLE: return p->value_len == 8 ? NULL : "number parameter not of 8 bytes";
    case WIRE_PARAM_BOOL: return p->value_len == 1 ? NULL : "bool parameter not of 1 byte";
    default: return "parameter of an unknown type";
  }
}

const char* wire_next_name(struct wire_cursor* c, const char** name, uint16_t* name_len) {
  if (c->len - c->pos < 2) return "output name runs past the message";
  *name_len = (uint16_t)get_le(c->body + c->pos, 2);
  c->pos += 2;
  if (*name_len == 0 || c->len - c->pos < *name_len) return "output name is empty or runs past the message";
  *name = (const char*)c->body + c->pos;
  c->pos += *name_len;
  if (memchr(*name, 0, *name_len) != NULL) return "output name holds a NUL byte";
  return NULL;
}

const char* wire_check_call(const uint8_t* body, size_t len, const uint8_t* arena, size_t arena_len,
                            struct wire_header* header, struct wire_call* call, struct wire_cursor* cursor) {
  const char* error = wire_read_header(body, len, header);
  if (error != NULL) return error;
  if (header->kind != WIRE_CALL) return "expected a CALL";
  if (header->count != 1) return "a CALL holds one request";
  error = wire_model_text(body, header, call);
  if (error != NULL) return error;
  struct wire_cursor c = {body, len, wire_align(WIRE_HEADER_SIZE + (size_t)header->text_len, 8), arena, arena_len,
                          header->data_offset, 0};
  if (c.pos > len || len - c.pos < WIRE_REQUEST_SIZE) return "request record runs past the message";
  const uint8_t* at = body + c.pos;
  call->n_inputs = (uint16_t)get_le(at, 2);
  call->n_params = (uint16_t)get_le(at + 2, 2);
  call->n_outputs = (uint16_t)get_le(at + 4, 2);
  call->id_kind = at[6];
  call->flags = (uint32_t)get_le(at + 8, 4);
  call->id = get_le(at + 12, 8);
  call->id_text = NULL;
  c.pos += WIRE_REQUEST_SIZE;
  if (call->id_kind > WIRE_ID_STRING) return "request has an unknown id kind";
  if (call->flags & ~3u) return "request has unknown flags";
  if (call->id_kind == WIRE_ID_STRING) {
    if (call->id == 0 || call->id > 65535 || len - c.pos < call->id) return "request id text is empty or runs past the message";
    call->id_text = (const char*)body + c.pos;
    if (memchr(call->id_text, 0, (size_t)call->id) != NULL) return "request id text holds a NUL byte";
    c.pos += (size_t)call->id;
  }
  size_t first = c.pos;
  for (uint16_t i = 0; i < call->n_params; i++) {
    struct wire_param p;
    if ((error = wire_next_param(&c, &p)) != NULL) return error;
  }
  for (uint16_t i = 0; i < call->n_outputs; i++) {
    const char* name;
    uint16_t name_len;
    if ((error = wire_next_name(&c, &name, &name_len)) != NULL) return error;
  }
  for (uint16_t i = 0; i < call->n_inputs; i++) {
    struct wire_tensor t;
    if ((error = check_tensor(&c, &t)) != NULL) return error;
  }
  if (c.pos > header->data_offset) return "records run into the data section";
  *cursor = c;
  cursor->pos = first;
  return NULL;
}
