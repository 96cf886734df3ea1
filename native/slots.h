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

/* A free slot, marked FILLING (waiting while all are busy); NULL when the relay server is gone
 * (inst->why says why). */
struct slot* acquire_slot(struct instance_state* inst);
/* Makes room in the slot for a batch of count requests; 0, or -1 out of memory. */
int grow_slot(struct slot* slot, uint32_t count);
/* Gives the slot back to the pool (what its arenas used beyond ARENA_KEEP goes back too). */
void release_slot(struct instance_state* inst, struct slot* slot);
/* Fails every request (or open stream) of the slot with message, then frees it; relay: the failure
 * counts as the relay's (its metric), else as the callable's. */
void fail_slot(struct instance_state* inst, struct slot* slot, TRITONSERVER_Error_Code code, const char* message,
               int relay);
/* The relay failed the slot's batch: fails it with "pytriton_like relay failed for model ...: problem".
 * UNAVAILABLE (HTTP 503) when the relay server is gone: worth a retry on another server; INTERNAL for
 * the rest. */
void relay_failure(struct instance_state* inst, struct slot* slot, TRITONSERVER_Error_Code code, const char* problem);
/* Fails every batch sent and not yet answered (the relay server is gone, or an answer says not
 * which batch it is for). */
void fail_in_flight(struct instance_state* inst, TRITONSERVER_Error_Code code, const char* message);

#endif
