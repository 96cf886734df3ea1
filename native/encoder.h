/* Encoding a batch of Triton's requests as the relay's BATCH message (wire.h): each request's
 * parameters, correlation id and requested outputs, and its inputs' bytes copied once, into the
 * message (small ones) or into the slot's shared-memory arena (from the relay server's threshold). */
#ifndef PYTRITON_LIKE_ENCODER_H
#define PYTRITON_LIKE_ENCODER_H

#include <stddef.h>

#include "instance.h"
#include "triton_api.h"

/* Encodes the slot's requests as a BATCH in slot->msg (records) and slot->data (inline tensors).
 * message (message_len bytes) is room for the text of an arena that cannot be made. */
TRITONSERVER_Error* encode_batch(struct instance_state* inst, struct slot* slot, char* message, size_t message_len);

/* Whether a request is one of the sequence batcher's null requests (no correlation id): they
 * fill idle batch slots, and their responses are thrown away. */
int null_request(TRITONBACKEND_Request* request);

#endif
