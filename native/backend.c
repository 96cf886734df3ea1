/* libtriton_pytriton_like.so: Triton's entry points for a model bound by pytriton_like.
 *
 * Each model instance is connected to its relay server, on a thread of the user's process or in a
 * worker process (instance.c, over transport.h). Execute takes a free slot (slots.c), encodes the
 * batch (encoder.c; wire.h: small tensors in the message, large ones copied once into the slot's
 * shared-memory arena), sends it, and the relay server's RESULT becomes the responses (reader.c,
 * responses.c). A non-decoupled instance with one batch in flight waits for the answer inside
 * Execute; with more (settings in_flight) or a decoupled model, Execute returns once the batch is
 * sent and a thread per instance (its reader) answers. */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "calls.h"
#include "clock.h"
#include "encoder.h"
#include "instance.h"
#include "log.h"
#include "metrics.h"
#include "reader.h"
#include "responses.h"
#include "settings.h"
#include "slots.h"
#include "triton_api.h"

/* The value of --backend-config=pytriton_like,<key>=<value> in value (empty when absent). The config
 * is JSON ({"cmdline":{"server-restarts":"N",...}}): a value's escaped quotes, backslashes and slashes
 * are read back. 0, or -1 when the value is there but longer than value_len - 1 or holds another
 * escape: never a part of it, which would be another value. */
static int backend_option(TRITONBACKEND_Backend* backend, const char* key, char* value, size_t value_len) {
  TRITONSERVER_Message* message;
  const char* json;
  size_t size;
  value[0] = '\0';
  if (relay_check(TRITONBACKEND_BackendConfig(backend, &message), __LINE__) ||
      relay_check(TRITONSERVER_MessageSerializeToJson(message, &json, &size), __LINE__))
    return 0;
  char pattern[64];
  int pattern_len = snprintf(pattern, sizeof(pattern), "\"%s\":\"", key);
  const char* end = json + size;
  for (const char* at = json; at + pattern_len <= end; at++) {
    if (memcmp(at, pattern, (size_t)pattern_len) != 0) continue;
    size_t len = 0;
    for (at += pattern_len; at < end; at++) {
      if (*at == '"') {
        value[len] = '\0';
        return 0;
      }
      if (*at == '\\' && (++at == end || (*at != '"' && *at != '\\' && *at != '/'))) break;
      if (len + 1 >= value_len) break;
      value[len++] = *at;
    }
    value[0] = '\0';
    return -1;
  }
  return 0;
}

/* Nested calls' socket (calls.h), when --backend-config gives its path (calls-socket) and the token
 * it asks for (calls-token, after the access token's marker that hides it from /proc/<pid>/cmdline).
 * A token that cannot be read whole stops the backend: the socket never goes without it. */
static TRITONSERVER_Error* start_calls(TRITONBACKEND_Backend* backend) {
  char socket_path[SETTINGS_MAX_PATH], token[CALLS_MAX_TOKEN + sizeof("triton-access-token=")];
  if (backend_option(backend, "calls-socket", socket_path, sizeof(socket_path)) != 0)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, "the nested calls' socket path is too long");
  if (backend_option(backend, "calls-token", token, sizeof(token)) != 0)
    return error_new(TRITONSERVER_ERROR_INVALID_ARG,
                     "nested calls take an access token of at most %d printable ASCII characters"
                     " (TritonSecurityConfig.access_token)",
                     CALLS_MAX_TOKEN);
  if (socket_path[0] == '\0') return NULL;
  static const char marker[] = "triton-access-token=";
  const char* token_value = strncmp(token, marker, sizeof(marker) - 1) == 0 ? token + sizeof(marker) - 1 : NULL;
  char message[512];
  if (calls_start(socket_path, token_value, message, sizeof(message)) != 0)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, message);
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  uint32_t major, minor;
  TRY(TRITONBACKEND_ApiVersion(&major, &minor));
  if (major != RELAY_BACKEND_API_MAJOR || minor < RELAY_BACKEND_API_MINOR)
    return error_new(TRITONSERVER_ERROR_UNSUPPORTED,
                     "the pytriton_like backend needs Triton's backend API %d.%d or a later 1.x, this server has %u.%u",
                     RELAY_BACKEND_API_MAJOR, RELAY_BACKEND_API_MINOR, major, minor);
  TRY(start_calls(backend));
  char restarts[32];
  (void)backend_option(backend, "server-restarts", restarts, sizeof(restarts));
  metrics_families_new(strtoull(restarts, NULL, 10));
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend) {
  (void)backend;
  calls_stop();
  metrics_families_delete();
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  const char* name;
  const char* location;
  uint64_t version;
  TRITONBACKEND_ArtifactType artifact;
  TRY(TRITONBACKEND_ModelName(model, &name));
  TRY(TRITONBACKEND_ModelVersion(model, &version));
  TRY(TRITONBACKEND_ModelRepository(model, &artifact, &location));
  TRITONSERVER_Server* server;
  TRY(TRITONBACKEND_ModelServer(model, &server));
  calls_set_server(server); /* the server nested calls run in */
  struct model_state* state = calloc(1, sizeof(*state));
  if (state == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  snprintf(state->name, sizeof(state->name), "%s", name);
  snprintf(state->version, sizeof(state->version), "%llu", (unsigned long long)version);
  snprintf(state->dir, sizeof(state->dir), "%s/%llu", location, (unsigned long long)version);
  char message[512];
  if (settings_read(state->dir, -1, &state->settings, NULL, message, sizeof(message)) != 0) {
    free(state);
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, message);
  }
  /* worker processes: each instance has the model's series, labelled with its worker process */
  if (!state->settings.worker_processes) metrics_model_new(&state->metrics, state->name, state->version, NULL);
  TRITONSERVER_Error* error = TRITONBACKEND_ModelSetState(model, state);
  if (error != NULL) {
    metrics_model_delete(&state->metrics);
    free(state);
  }
  return error;
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* state;
  TRY(TRITONBACKEND_ModelState(model, &state));
  struct model_state* model_state = state;
  if (model_state == NULL) return NULL; /* Triton finalizes a model whose initialize failed, too */
  metrics_model_delete(&model_state->metrics);
  free(model_state);
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  const char* name;
  TRITONBACKEND_Model* model;
  void* model_state;
  TRY(TRITONBACKEND_ModelInstanceName(instance, &name));
  TRY(TRITONBACKEND_ModelInstanceModel(instance, &model));
  TRY(TRITONBACKEND_ModelState(model, &model_state));
  return start_instance(instance, model_state, name);
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  void* state;
  TRY(TRITONBACKEND_ModelInstanceState(instance, &state));
  if (state != NULL) stop_instance(state); /* Triton finalizes an instance whose initialization failed too */
  return NULL;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests, const uint32_t request_count) {
  uint64_t exec_start = now_ns();
  void* state;
  TRY(TRITONBACKEND_ModelInstanceState(instance, &state));
  struct instance_state* inst = state;
  struct settings* settings = &inst->model->settings;
  if (settings->worker_processes) revive(inst);
  struct slot* slot = acquire_slot(inst);
  if (slot == NULL || grow_slot(slot, request_count) != 0) {
    const char* why = slot == NULL ? inst->why : "out of memory";
    char message[1024];
    snprintf(message, sizeof(message), "pytriton_like relay failed for model '%s': %s", inst->model->name, why);
    for (uint32_t i = 0; i < request_count; i++) {
      respond_error(requests[i], TRITONSERVER_ERROR_UNAVAILABLE, message);
      finish_request(inst, requests[i], 0, exec_start, exec_start, exec_start);
    }
    metrics_add(inst->metrics, METRIC_RELAY_FAILURES, request_count);
    if (slot != NULL) release_slot(inst, slot);
    return NULL;
  }
  slot->exec_start_ns = exec_start;
  slot->compute_start_ns = 0;
  slot->batch_size = 0;
  for (uint32_t i = 0; i < request_count; i++) {
    TRITONBACKEND_Request* request = requests[i];
    bool cancelled = false;
    relay_check(TRITONBACKEND_RequestIsCancelled(request, &cancelled), __LINE__);
    if (cancelled) { /* a stream its client cancelled gets nothing (stream_silenced, responses.h) */
      if (!settings->decoupled || calls_made(request))
        respond_error(request, TRITONSERVER_ERROR_CANCELLED, "the request was cancelled");
      finish_request(inst, request, 0, exec_start, exec_start, exec_start);
      continue;
    }
    if (settings->sequence && null_request(request)) {
      TRITONBACKEND_Response* response;
      if (!relay_check(TRITONBACKEND_ResponseNew(&response, request), __LINE__))
        relay_check(TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, NULL), __LINE__);
      finish_request(inst, request, 1, exec_start, exec_start, exec_start);
      continue;
    }
    if (settings->decoupled) {
      TRITONSERVER_Error* error = TRITONBACKEND_ResponseFactoryNew(&slot->factories[slot->count], request);
      if (error != NULL) {
        respond_error(request, TRITONSERVER_ERROR_INTERNAL, TRITONSERVER_ErrorMessage(error));
        TRITONSERVER_ErrorDelete(error);
        finish_request(inst, request, 0, exec_start, exec_start, exec_start);
        continue;
      }
      slot->open[slot->count] = 1;
    }
    slot->requests[slot->count++] = request;
  }
  if (slot->count == 0) {
    release_slot(inst, slot);
    return NULL;
  }
  metrics_add(inst->metrics, METRIC_REQUESTS, slot->count);
  metrics_add(inst->metrics, METRIC_BATCHES, 1);
  char message[512] = "";
  /* the reader may answer and free the slot as soon as it is sent: Execute does not touch it after.
   * A decoupled model's requests are released when their streams end (stream_result, fail_slot): until
   * then a caller that goes away can still cancel its request in Triton's core (a nested call's stream
   * left early, call_listener.c), which the next response sees. */
  int sent = 0;
  TRITONSERVER_Error* error = encode_batch(inst, slot, message, sizeof(message));
  if (error != NULL) {
    relay_failure(inst, slot, TRITONSERVER_ERROR_INTERNAL, TRITONSERVER_ErrorMessage(error));
    TRITONSERVER_ErrorDelete(error);
  } else {
    sent = send_batch(inst, slot) == 0;
  }
  {
    if (sent && !inst->has_reader) {
      /* one batch in flight: wait for its answer here */
      while (slot->state != SLOT_FREE && serve_one(inst, inst->spin_ns) == 0) {
      }
    }
  }
  if (inst->has_reader) {
    /* return once the next batch has a slot: Triton forms it meanwhile */
    pthread_mutex_lock(&inst->lock);
    while (!inst->dead && inst->busy == inst->n_slots) pthread_cond_wait(&inst->changed, &inst->lock);
    pthread_mutex_unlock(&inst->lock);
  }
  return NULL;
}
