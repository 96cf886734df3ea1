/* The reader of a model instance's connection: each message from its relay server (a RESULT,
 * checked, and handed to the slot it answers: responses.h), the relay server's loss (its connection
 * ends, or the user process is gone), and the thread that reads while several batches are in flight. */
#ifndef PYTRITON_LIKE_READER_H
#define PYTRITON_LIKE_READER_H

#include <stdint.h>

#include "instance.h"
#include "triton_api.h"

/* Waits for one message from the relay server (polling spin_ns first) and handles it; -1 once the
 * relay server is gone (lose_relay_server). */
int serve_one(struct instance_state* inst, uint64_t spin_ns);

/* Starts the instance's reader thread (serve_one until the relay server is gone). */
TRITONSERVER_Error* start_reader(struct instance_state* inst);

#endif
