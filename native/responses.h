/* Triton's responses: those a RESULT from the relay server becomes, for a batch (one final response
 * per request, then Triton's statistics) or a stream (decoupled: each request's responses through
 * its factory), and the error responses the relay sends itself. */
#ifndef PYTRITON_LIKE_RESPONSES_H
#define PYTRITON_LIKE_RESPONSES_H

#include <stdint.h>

#include "instance.h"
#include "triton_api.h"
#include "wire.h"

/* Sends response, final, failed with message. */
void send_error_response(TRITONBACKEND_Response* response, TRITONSERVER_Error_Code code, const char* message);
/* Answers request with one final response failed with message. */
void respond_error(TRITONBACKEND_Request* request, TRITONSERVER_Error_Code code, const char* message);
/* Reports the request's statistics to Triton and releases it. */
void finish_request(struct instance_state* inst, TRITONBACKEND_Request* request, int success, uint64_t exec_start,
                    uint64_t compute_start, uint64_t compute_end);

/* Answers the slot's requests from a checked RESULT (cursor at its records), reports the batch's
 * statistics and metrics, and frees the slot. */
void batch_result(struct instance_state* inst, struct slot* slot, const struct wire_header* header,
                  struct wire_cursor* cursor);
/* Sends a streaming RESULT's responses; whether the batch ended (its slot released). */
int stream_result(struct instance_state* inst, struct slot* slot, const struct wire_header* header,
                  struct wire_cursor* cursor);

/* Whether a stream gets nothing more, not even its end: its client cancelled it, and it is not a
 * nested call's (calls_made, whose caller waits for the end). tritonserver 2.51's gRPC front end can
 * abort (SIGABRT, SIGSEGV) on a response to a stream its client cancelled (fixed in later Triton:
 * server PRs #7325, #7840, #8078, #8220). Triton keeps about 40 KB per stream so left until it is
 * restarted (docs/reliability.md). */
int stream_silenced(TRITONBACKEND_Request* request, TRITONBACKEND_ResponseFactory* factory);

#endif
