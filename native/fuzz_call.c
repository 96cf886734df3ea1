/* libFuzzer target for the backend's decoder of nested calls (wire_check_call and the readers after
 * it): any bytes, as a CALL and as the caller's arena, must be refused with a message or read within
 * bounds. Built and run by `make fuzz` (clang, -fsanitize=fuzzer,address,undefined). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

static volatile uint8_t sink;

static void touch(const void* data, size_t len) {
  for (size_t k = 0; k < len; k++) sink ^= ((const uint8_t*)data)[k];
}

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  /* The first two bytes say how much of the input is the arena (the rest is the message). */
  if (size < 2) return 0;
  size_t arena_len = ((size_t)data[0] | (size_t)data[1] << 8) % (size - 1);
  size_t len = size - 2 - arena_len;
  /* copies, so that reading past them is caught */
  uint8_t* message = malloc(len ? len : 1);
  uint8_t* shared = malloc(arena_len ? arena_len : 1);
  memcpy(message, data + 2 + arena_len, len);
  memcpy(shared, data + 2, arena_len);
  struct wire_header header;
  struct wire_call call;
  struct wire_cursor cursor;
  if (wire_check_call(message, len, arena_len ? shared : NULL, arena_len, &header, &call, &cursor) == NULL) {
    touch(call.model, call.model_len);
    touch(call.version, call.version_len);
    touch(call.request_id, call.request_id_len);
    if (call.id_kind == WIRE_ID_STRING) touch(call.id_text, (size_t)call.id);
    for (uint16_t i = 0; i < call.n_params; i++) { /* checked: none of these can fail */
      struct wire_param param;
      if (wire_next_param(&cursor, &param) != NULL) abort();
      touch(param.key, param.key_len);
      touch(param.value, param.value_len);
    }
    for (uint16_t i = 0; i < call.n_outputs; i++) {
      const char* name;
      uint16_t name_len;
      if (wire_next_name(&cursor, &name, &name_len) != NULL) abort();
      touch(name, name_len);
    }
    for (uint16_t i = 0; i < call.n_inputs; i++) {
      struct wire_tensor tensor;
      if (wire_next_tensor(&cursor, &tensor) != NULL) abort();
      touch(tensor.name, tensor.name_len);
      touch(tensor.data, tensor.nbytes);
    }
  }
  free(message);
  free(shared);
  return 0;
}
