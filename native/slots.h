/* The batches in flight of a model instance: one slot each, reused from batch to batch with what it
 * holds (its arenas, its message buffers), taken from the instance's pool and given back to it. */
#ifndef PYTRITON_LIKE_SLOTS_H
#define PYTRITON_LIKE_SLOTS_H

#include <stdint.h>

#include "transport.h"
#include "triton_api.h"
#include "wire.h"

struct instance_state;

/* FILLING: Execute's or the reader's, being filled or answered; SENT: the relay server's, whose
 * answer may come at any moment. */
enum slot_state { SLOT_FREE, SLOT_FILLING, SLOT_SENT };

/* One input of a batch being encoded (encoder.c). */
struct input_ref {
  TRITONBACKEND_Input* input;
  const char* name;
  TRITONSERVER_DataType dtype;
  const int64_t* shape;
  uint32_t ndim;
  uint64_t byte_size;
  uint32_t buffers;
};

/* One batch in flight, and what it reuses from batch to batch. */
struct slot {
  enum slot_state state;
  uint32_t index;
  uint64_t batch_id;
  TRITONBACKEND_Request** requests; /* the requests sent to the relay server (not the sequence batcher's null ones) */
  TRITONBACKEND_ResponseFactory** factories; /* decoupled: one stream per request */
  uint8_t* open;                             /* decoupled: the stream still waits for its final response */
  uint32_t count;
  uint32_t cap;
  uint64_t exec_start_ns;
  uint64_t compute_start_ns;
  uint64_t batch_size;
  int cancel_sent;
  struct arena in;  /* ours: the large inputs */
  struct arena out; /* the relay server's: the large outputs */
  struct wire_buf msg;
  struct wire_buf data;
  struct input_ref* inputs;
  uint32_t inputs_cap;
};

void release_slot(struct instance_state* inst, struct slot* slot);
/* Fails every request (or open stream) of the slot with message, then frees it; relay: the failure
 * is the relay's (its metric), not the callable's. */
void fail_slot(struct instance_state* inst, struct slot* slot, TRITONSERVER_Error_Code code, const char* message,
               int relay);

#endif
