/* libFuzzer target for the backend's decoder of the relay server's answers (wire_check_result and the
 * readers after it): any bytes, as a message and as an arena, must be refused with a message or
 * read within bounds. Built and run by `make fuzz` (clang, -fsanitize=fuzzer,address,undefined). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  /* The first two bytes say how much of the input is the arena (the rest is the message). */
  if (size < 2) return 0;
  size_t arena_len = ((size_t)data[0] | (size_t)data[1] << 8) % (size - 1);
  const uint8_t* arena = data + 2;
  const uint8_t* body = data + 2 + arena_len;
  size_t len = size - 2 - arena_len;
  /* copies, so that reading past them is caught */
  uint8_t* message = malloc(len ? len : 1);
  uint8_t* shared = malloc(arena_len ? arena_len : 1);
  memcpy(message, body, len);
  memcpy(shared, arena, arena_len);
  struct wire_header header;
  struct wire_cursor cursor;
  if (wire_check_result(message, len, arena_len ? shared : NULL, arena_len, &header, &cursor) == NULL) {
    volatile uint8_t sink = 0;
    for (uint32_t i = 0; i < header.count; i++) {
      struct wire_response response;
      if (wire_next_response(&cursor, &response) != NULL) abort(); /* checked: cannot fail */
      for (uint32_t k = 0; k < response.error_len; k++) sink ^= (uint8_t)response.error[k];
      for (uint16_t j = 0; j < response.n_outputs; j++) {
        struct wire_tensor tensor;
        if (wire_next_tensor(&cursor, &tensor) != NULL) abort();
        for (uint16_t k = 0; k < tensor.name_len; k++) sink ^= (uint8_t)tensor.name[k];
        for (uint64_t k = 0; k < tensor.nbytes; k++) sink ^= tensor.data[k];
      }
    }
    (void)sink;
  }
  free(message);
  free(shared);
  return 0;
}
