/* The relay's wire format, C side. pytriton_like/relay/protocol.py documents it and is the
 * reference; this file and that one must agree byte for byte (tests/unit/relay check the
 * Python side, the functional suite both together).
 *
 * Everything is little-endian. A message on the socket is a u64 length, then that many bytes:
 *   header   40 bytes  <HBBIQQIIII  version kind flags count batch_id value slot text_len data_offset reserved
 *   text     text_len bytes (HELLO: the instance name; a FAILED RESULT: the error)
 *   records  from the next multiple of 8: per request (BATCH) or per response (RESULT)
 *   data     from data_offset (a multiple of 64): the inline tensors, each at a multiple of 64
 * BATCH request record: <HHHBBIQ  n_inputs n_params n_outputs id_kind pad flags id
 *   with flags' TRACED bit: <Q, the id of Triton's trace of the request (a nested call's CALL names it
 *   in its header's value, to be traced as its child; 0: none), then
 *   id string (id_kind 2: id is its length), then n_params x (<BBHI type pad key_len value_len,
 *   key, value), then n_outputs x (<H len, name), then n_inputs tensor records.
 * RESULT response record: <HHI  n_outputs status error_len, error text, n_outputs tensor records.
 * Tensor record: <BBHIQQ  dtype ndim name_len where offset nbytes, ndim x <q dims, name.
 *   where 0: inline, at data_offset + offset; where 1: in the sender's arena of this slot. */
#ifndef PYTRITON_LIKE_WIRE_H
#define PYTRITON_LIKE_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define WIRE_VERSION 4

enum wire_kind {
  WIRE_HELLO = 1, WIRE_WELCOME = 2, WIRE_BATCH = 3, WIRE_RESULT = 4, WIRE_CANCEL = 5,
  WIRE_CALL = 6, WIRE_REPLY = 7, WIRE_MODEL = 8 /* nested calls (calls.h) */
};
enum wire_flag {
  WIRE_FINAL = 1, WIRE_FAILED = 2, WIRE_NEW_ARENA = 4,
  WIRE_STREAM = 16 /* CALL: a decoupled model's call, its responses streamed (their tensors inline) */
};
/* A nested call's connection has up to this many output arenas: a CALL's slot field is the mask of
 * those whose outputs the caller still holds, a REPLY's the one its outputs are in. */
#define WIRE_CALL_ARENAS 32u
enum wire_where { WIRE_INLINE = 0, WIRE_ARENA = 1 };
/* A request record's flags: Triton's sequence flags (START 1, END 2), and TRACED (BATCH only). */
#define WIRE_REQUEST_TRACED 0x100u
enum wire_id_kind { WIRE_ID_NONE = 0, WIRE_ID_UINT = 1, WIRE_ID_STRING = 2 };
enum wire_param_type { WIRE_PARAM_STRING = 0, WIRE_PARAM_INT = 1, WIRE_PARAM_BOOL = 2, WIRE_PARAM_DOUBLE = 3 };

#define WIRE_HEADER_SIZE 40u
#define WIRE_REQUEST_SIZE 20u
#define WIRE_PARAM_SIZE 8u
#define WIRE_RESPONSE_SIZE 8u
#define WIRE_TENSOR_SIZE 24u
#define WIRE_ALIGN 64u
#define WIRE_MAX_DIMS 32u
/* A message longer than this is refused as corrupt; large tensors travel in arenas anyway. */
#define WIRE_MAX_MESSAGE ((uint64_t)1 << 31)

struct wire_header {
  uint16_t version;
  uint8_t kind;
  uint8_t flags;
  uint32_t count;
  uint64_t batch_id;
  uint64_t value; /* RESULT: ns in the callable; HELLO: sender pid; WELCOME: shm threshold; BATCH: arena bytes used */
  uint32_t slot;
  uint32_t text_len;
  uint32_t data_offset;
  uint32_t reserved;
};

/* A growable byte buffer, reused from message to message. */
struct wire_buf {
  uint8_t* data;
  size_t len;
  size_t cap;
};

int wire_buf_reserve(struct wire_buf* buf, size_t extra); /* 0, or -1 when out of memory */
void wire_buf_free(struct wire_buf* buf);

/* Encoding: each appends to buf (reserve first: these do not check capacity). */
void wire_put_header(uint8_t* at, const struct wire_header* header);
void wire_put_bytes(struct wire_buf* buf, const void* data, size_t len);
void wire_put_u16(struct wire_buf* buf, uint16_t value);
void wire_put_u64(struct wire_buf* buf, uint64_t value);
void wire_pad(struct wire_buf* buf, size_t multiple);
void wire_put_request(struct wire_buf* buf, uint16_t n_inputs, uint16_t n_params, uint16_t n_outputs, uint8_t id_kind,
                      uint32_t flags, uint64_t id);
void wire_put_param(struct wire_buf* buf, uint8_t type, const char* key, uint16_t key_len, const void* value,
                    uint32_t value_len);
void wire_put_tensor(struct wire_buf* buf, uint8_t dtype, const int64_t* dims, uint8_t ndim, const char* name,
                     uint16_t name_len, uint8_t where, uint64_t offset, uint64_t nbytes);
size_t wire_align(size_t value, size_t multiple);

/* Decoding. wire_read_header checks the fixed header against the message length. */
const char* wire_read_header(const uint8_t* body, size_t len, struct wire_header* header);

struct wire_tensor {
  uint8_t dtype;
  uint8_t ndim;
  uint8_t where;
  uint16_t name_len;
  const char* name; /* not NUL-terminated */
  int64_t dims[WIRE_MAX_DIMS];
  uint64_t offset;
  uint64_t nbytes;
  const uint8_t* data; /* set by wire_check_result: where the bytes are (message or arena) */
};

struct wire_response {
  uint16_t n_outputs;
  uint16_t status; /* 0 ok, 1 failed: error holds why */
  uint32_t error_len;
  const char* error;
};

/* Iterates over the records of a RESULT that wire_check_result accepted. */
struct wire_cursor {
  const uint8_t* body;
  size_t len;
  size_t pos;
  const uint8_t* arena;
  size_t arena_len;
  uint32_t data_offset;
  size_t arena_end; /* after wire_check_result: where the last byte of the arena's tensors ends */
};

/* Checks a whole RESULT body: every record, length, dtype, shape, and that each tensor's bytes
 * lie within the message or within arena[0, arena_len). Returns NULL when it is well formed, or
 * a static string saying what is wrong. On success, *cursor is set to its first record. */
const char* wire_check_result(const uint8_t* body, size_t len, const uint8_t* arena, size_t arena_len,
                              struct wire_header* header, struct wire_cursor* cursor);
/* The next response record / tensor record of a checked RESULT (cannot fail after the check). */
const char* wire_next_response(struct wire_cursor* cursor, struct wire_response* response);
const char* wire_next_tensor(struct wire_cursor* cursor, struct wire_tensor* tensor);

/* A checked CALL (a nested call's request): the model, then one request record as in a BATCH.
 * text is "<model>\0<version>\0<request id>" (an empty version: the latest). */
struct wire_call {
  const char* model; /* NUL-terminated within the text */
  size_t model_len;
  const char* version; /* NUL-terminated within the text */
  size_t version_len;
  const char* request_id; /* not NUL-terminated */
  size_t request_id_len;
  uint16_t n_inputs;
  uint16_t n_params;
  uint16_t n_outputs;
  uint8_t id_kind;
  uint32_t flags; /* the request's sequence flags */
  uint64_t id;
  const char* id_text; /* id_kind WIRE_ID_STRING: id bytes, not NUL-terminated */
};

struct wire_param {
  uint8_t type;
  uint16_t key_len;
  uint32_t value_len;
  const char* key;
  const uint8_t* value;
};

/* Checks a whole CALL body: the text, the request record, every parameter, output name and input
 * tensor, each tensor's bytes within the message or arena[0, arena_len). NULL when well formed, else
 * what is wrong; on success *call is filled and *cursor points at the first parameter. */
const char* wire_check_call(const uint8_t* body, size_t len, const uint8_t* arena, size_t arena_len,
                            struct wire_header* header, struct wire_call* call, struct wire_cursor* cursor);
/* The next parameter / requested output name of a checked CALL (in that order; then its tensors
 * with wire_next_tensor). */
const char* wire_next_param(struct wire_cursor* cursor, struct wire_param* param);
const char* wire_next_name(struct wire_cursor* cursor, const char** name, uint16_t* name_len);
/* The model text of a MODEL or CALL: "<model>\0<version>"; NULL when well formed. */
const char* wire_model_text(const uint8_t* body, const struct wire_header* header, struct wire_call* call);

/* Bytes per element of a Triton data type; 0 for BYTES and unknown types. */
size_t wire_dtype_size(uint8_t dtype);

#endif
