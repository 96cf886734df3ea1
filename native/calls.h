/* Nested calls: a bound callable calling a model of its own server, inside the server.
 *
 * A relay server's process (yours, or a worker process) connects to the backend's call socket (its
 * path comes with --backend-config=pytriton_like,calls-socket=PATH) and greets it with HELLO (the
 * access token, when one guards what the socket serves: calls-token). Then, one at a time per
 * connection, it asks about a model (MODEL: ready, and its config as JSON) or runs a request
 * (CALL): the backend builds a TRITONSERVER_InferenceRequest over the call's tensors as they lie in
 * the message or in the caller's arena (no copy), runs it with TRITONSERVER_ServerInferAsync as
 * Triton's Python backend runs BLS (traced as a child of the trace of the request it is made for:
 * traces.h), has the outputs written straight into its own arena for the
 * caller (the response allocator), and answers with REPLY messages. Closing the connection
 * cancels its call in Triton's core (what a caller's timeout does). pytriton_like/relay/calls.py
 * is the other end; the wire format is protocol.py's. */
#ifndef PYTRITON_LIKE_CALLS_H
#define PYTRITON_LIKE_CALLS_H

#include <stddef.h>

#include "triton_api.h"

/* The longest access token the socket asks for (a longer one stops the backend: backend.c). */
#define CALLS_MAX_TOKEN 1024

/* Listens at path (replacing a socket a dead tritonserver left there), on a thread of its own.
 * token: what a caller's HELLO must carry, or NULL. 0, or -1 with a message. */
int calls_start(const char* path, const char* token, char* message, size_t message_len);
/* The server the calls run in (TRITONBACKEND_ModelServer: known once a model loads). */
void calls_set_server(TRITONSERVER_Server* server);
/* Whether a request a backend instance was handed is a nested call's. Triton hands a backend the
 * very request a caller made (TRITONBACKEND_Request and TRITONSERVER_InferenceRequest are one
 * InferenceRequest in Triton's core). A nested call's stream left early ends with its end, which
 * its caller waits for; a network client's gets nothing more (stream_silenced, responses.h). */
int calls_made(const void* request);
/* Stops listening and ends every connection (their calls are cancelled); returns once the
 * calls still in Triton's hands are done. */
void calls_stop(void);

#endif
