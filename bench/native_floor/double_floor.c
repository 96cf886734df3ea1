/* The native floor of the benchmark: Double (y = 2x, FP32) computed inside tritonserver by a
 * minimal C backend, no relay and no Python. Built by bench/servers.py with the relay's own
 * declarations of Triton's API (native/triton_api.h). */
#include <stdint.h>
#include <string.h>

#include "triton_api.h"

static void answer(TRITONBACKEND_Request* request) {
  TRITONBACKEND_Input* input;
  TRITONBACKEND_Response* response;
  TRITONBACKEND_Output* output;
  const int64_t* shape;
  uint32_t dims, buffers;
  uint64_t size;
  TRITONSERVER_DataType dtype;
  const char* name;
  TRITONSERVER_Error* error = TRITONBACKEND_ResponseNew(&response, request);
  if (error == NULL) error = TRITONBACKEND_RequestInputByIndex(request, 0, &input);
  if (error == NULL) error = TRITONBACKEND_InputProperties(input, &name, &dtype, &shape, &dims, &size, &buffers);
  void* out = NULL;
  if (error == NULL) error = TRITONBACKEND_ResponseOutput(response, &output, "y", dtype, shape, dims);
  TRITONSERVER_MemoryType type = TRITONSERVER_MEMORY_CPU;
  int64_t type_id = 0;
  if (error == NULL) error = TRITONBACKEND_OutputBuffer(output, &out, size, &type, &type_id);
  uint64_t done = 0;
  for (uint32_t b = 0; error == NULL && b < buffers; b++) {
    const void* in;
    uint64_t length;
    error = TRITONBACKEND_InputBuffer(input, b, &in, &length, &type, &type_id);
    for (uint64_t i = 0; error == NULL && i < length / 4 && done + 4 * i < size; i++) {
      float value;
      memcpy(&value, (const char*)in + 4 * i, 4);
      value *= 2;
      memcpy((char*)out + done + 4 * i, &value, 4);
    }
    done += length;
  }
  TRITONSERVER_Error* sent = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, error);
  if (sent != NULL) TRITONSERVER_ErrorDelete(sent);
  if (error != NULL) TRITONSERVER_ErrorDelete(error);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests, const uint32_t count) {
  (void)instance;
  for (uint32_t i = 0; i < count; i++) {
    answer(requests[i]);
    TRITONSERVER_Error* error = TRITONBACKEND_RequestRelease(requests[i], TRITONSERVER_REQUEST_RELEASE_ALL);
    if (error != NULL) TRITONSERVER_ErrorDelete(error);
  }
  return NULL;
}
