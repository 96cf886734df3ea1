/* Triton's responses (responses.h). */
#include "responses.h"

#include <stdbool.h>
#include <string.h>

#include "calls.h"
#include "clock.h"
#include "instance.h"
#include "log.h"
#include "metrics.h"
#include "slots.h"
#include "traces.h"
#include "transport.h"
#include "wire.h"

void send_error_response(TRITONBACKEND_Response* response, TRITONSERVER_Error_Code code, const char* message) {
  TRITONSERVER_Error* error = TRITONSERVER_ErrorNew(code, message);
  relay_check(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, error), __LINE__);
  TRITONSERVER_ErrorDelete(error);
}

void respond_error(TRITONBACKEND_Request* request, TRITONSERVER_Error_Code code, const char* message) {
  TRITONBACKEND_Response* response;
  if (relay_check(TRITONBACKEND_ResponseNew(&response, request), __LINE__)) return;
  send_error_response(response, code, message);
}

void finish_request(struct instance_state* inst, TRITONBACKEND_Request* request, int success,
                    uint64_t exec_start, uint64_t compute_start, uint64_t compute_end) {
  relay_check(TRITONBACKEND_ModelInstanceReportStatistics(inst->instance, request, success, exec_start, compute_start,
                                                          compute_end, now_ns()),
              __LINE__);
  traces_release(request);
}

/* Adds the tensors of one RESULT response record to response; NULL, or the error that fails it. */
static TRITONSERVER_Error* add_outputs(struct instance_state* inst, struct wire_cursor* cursor,
                                       const struct wire_response* record, TRITONBACKEND_Response* response) {
  TRITONSERVER_Error* error = NULL;
  for (uint16_t i = 0; i < record->n_outputs; i++) {
    struct wire_tensor tensor;
    const char* problem = wire_next_tensor(cursor, &tensor);
    if (problem != NULL) { /* cannot happen after wire_check_result; never leak the earlier error */
      if (error != NULL) TRITONSERVER_ErrorDelete(error);
      return error_new(TRITONSERVER_ERROR_INTERNAL, "malformed answer from the relay server: %s", problem);
    }
    if (error != NULL) continue; /* walk past the rest */
    TRITONBACKEND_Output* output;
    error = TRITONBACKEND_ResponseOutput(response, &output, scratch(inst, tensor.name, tensor.name_len),
                                         (TRITONSERVER_DataType)tensor.dtype, tensor.dims, tensor.ndim);
    if (error != NULL) continue;
    void* buffer;
    TRITONSERVER_MemoryType memory_type = TRITONSERVER_MEMORY_CPU;
    int64_t memory_type_id = 0;
    error = TRITONBACKEND_OutputBuffer(output, &buffer, tensor.nbytes, &memory_type, &memory_type_id);
    if (error != NULL) continue;
    if (memory_type == TRITONSERVER_MEMORY_GPU) {
      error = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_UNSUPPORTED, "pytriton_like relays outputs in CPU memory only");
      continue;
    }
    if (tensor.nbytes) memcpy(buffer, tensor.data, tensor.nbytes);
  }
  return error;
}

/* Sends one response built from a RESULT record; whether it succeeded. read_all: the arena whose
 * outputs are all copied once this one's are (its pages go back before the response is sent, which
 * for gRPC serializes it inside ResponseSend), or NULL. */
static int send_record(struct instance_state* inst, struct wire_cursor* cursor, const struct wire_response* record,
                       TRITONBACKEND_Response* response, uint32_t flags, struct arena* read_all) {
  if (record->status != 0) {
    send_error_response(response, TRITONSERVER_ERROR_INTERNAL, scratch(inst, record->error, record->error_len));
    return 0;
  }
  TRITONSERVER_Error* error = add_outputs(inst, cursor, record, response);
  if (read_all != NULL) arena_trim(read_all);
  relay_check(TRITONBACKEND_ResponseSend(response, flags, error), __LINE__);
  if (error == NULL) return 1;
  TRITONSERVER_ErrorDelete(error);
  return 0;
}

void batch_result(struct instance_state* inst, struct slot* slot, const struct wire_header* header,
                  struct wire_cursor* cursor) {
  uint64_t compute_end = now_ns();
  uint64_t failures = 0;
  int failed_batch = (header->flags & WIRE_FAILED) != 0;
  const char* batch_error = failed_batch ? scratch(inst, (const char*)cursor->body + WIRE_HEADER_SIZE, header->text_len) : NULL;
  for (uint32_t i = 0; i < slot->count; i++) {
    TRITONBACKEND_Request* request = slot->requests[i];
    int success = 0;
    TRITONBACKEND_Response* response;
    if (failed_batch) {
      respond_error(request, TRITONSERVER_ERROR_INTERNAL, batch_error);
    } else {
      struct wire_response record;
      wire_next_response(cursor, &record);
      if (!relay_check(TRITONBACKEND_ResponseNew(&response, request), __LINE__))
        success = send_record(inst, cursor, &record, response, TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                              i + 1 == slot->count ? &slot->out : NULL);
    }
    failures += !success;
    finish_request(inst, request, success, slot->exec_start_ns, slot->compute_start_ns, compute_end);
  }
  uint64_t end = now_ns();
  relay_check(TRITONBACKEND_ModelInstanceReportBatchStatistics(inst->instance, slot->batch_size, slot->exec_start_ns,
                                                               slot->compute_start_ns, compute_end, end),
              __LINE__);
  uint64_t callable_ns = header->value;
  uint64_t exec_ns = end - slot->exec_start_ns;
  metrics_add(inst->metrics, METRIC_CALLABLE_FAILURES, (double)failures);
  metrics_add(inst->metrics, METRIC_CALLABLE_US, (double)(callable_ns / 1000));
  metrics_add(inst->metrics, METRIC_RELAY_US, exec_ns > callable_ns ? (double)((exec_ns - callable_ns) / 1000) : 0.0);
  release_slot(inst, slot);
}

int stream_result(struct instance_state* inst, struct slot* slot, const struct wire_header* header,
                  struct wire_cursor* cursor) {
  int final = (header->flags & WIRE_FINAL) != 0;
  if (header->flags & WIRE_FAILED) {
    metrics_add(inst->metrics, METRIC_CALLABLE_US, (double)(header->value / 1000));
    fail_slot(inst, slot, TRITONSERVER_ERROR_INTERNAL,
              scratch(inst, (const char*)cursor->body + WIRE_HEADER_SIZE, header->text_len), 0);
    return 1;
  }
  uint64_t failures = 0;
  uint32_t open = 0;
  for (uint32_t i = 0; i < header->count; i++) {
    struct wire_response record;
    wire_next_response(cursor, &record);
    bool cancelled = false;
    if (slot->open[i]) relay_check(TRITONBACKEND_ResponseFactoryIsCancelled(slot->factories[i], &cancelled), __LINE__);
    if (cancelled && calls_made(slot->requests[i])) /* a nested call's stream left early: its end, now */
      relay_check(TRITONBACKEND_ResponseFactorySendFlags(slot->factories[i], TRITONSERVER_RESPONSE_COMPLETE_FINAL),
                  __LINE__);
    TRITONBACKEND_Response* response = NULL;
    if (!slot->open[i] || cancelled ||
        relay_check(TRITONBACKEND_ResponseNewFromFactory(&response, slot->factories[i]), __LINE__)) {
      for (uint16_t j = 0; j < record.n_outputs; j++) {
        struct wire_tensor skipped;
        wire_next_tensor(cursor, &skipped);
      }
      /* a stream its client cancelled gets nothing more (stream_silenced, responses.h) */
      slot->open[i] = 0;
      continue;
    }
    if (record.status != 0) {
      failures++;
      slot->open[i] = 0;
    }
    send_record(inst, cursor, &record, response, final ? TRITONSERVER_RESPONSE_COMPLETE_FINAL : 0, NULL);
    if (final) slot->open[i] = 0;
  }
  for (uint32_t i = 0; i < slot->count; i++) open += slot->open[i];
  metrics_add(inst->metrics, METRIC_CALLABLE_FAILURES, (double)failures);
  if (!final) {
    if (open == 0 && !slot->cancel_sent) send_cancel(inst, slot);
    return 0;
  }
  metrics_add(inst->metrics, METRIC_CALLABLE_US, (double)(header->value / 1000));
  uint64_t end = now_ns();
  for (uint32_t i = 0; i < slot->count; i++) {
    if (slot->open[i] && !stream_silenced(slot->requests[i], slot->factories[i]))
      relay_check(TRITONBACKEND_ResponseFactorySendFlags(slot->factories[i], TRITONSERVER_RESPONSE_COMPLETE_FINAL),
                  __LINE__);
    relay_check(TRITONBACKEND_ResponseFactoryDelete(slot->factories[i]), __LINE__);
    slot->factories[i] = NULL;
    slot->open[i] = 0;
    finish_request(inst, slot->requests[i], 1, slot->exec_start_ns, slot->compute_start_ns, end);
  }
  release_slot(inst, slot);
  return 1;
}

int stream_silenced(TRITONBACKEND_Request* request, TRITONBACKEND_ResponseFactory* factory) {
  bool cancelled = false;
  relay_check(TRITONBACKEND_ResponseFactoryIsCancelled(factory, &cancelled), __LINE__);
  return cancelled && !calls_made(request);
}
