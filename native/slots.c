/* The slot pool of a model instance (slots.h). */
#include "slots.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "instance.h"
#include "log.h"
#include "metrics.h"
#include "responses.h"
#include "transport.h"

struct slot* acquire_slot(struct instance_state* inst) {
  struct slot* slot = NULL;
  pthread_mutex_lock(&inst->lock);
  while (!inst->dead && inst->busy == inst->n_slots) pthread_cond_wait(&inst->changed, &inst->lock);
  if (!inst->dead) {
    for (uint32_t i = 0; i < inst->n_slots; i++) {
      if (inst->slots[i].state == SLOT_FREE) {
        slot = &inst->slots[i];
        break;
      }
    }
    slot->state = SLOT_FILLING;
    slot->batch_id = ++inst->next_id;
    slot->count = 0;
    slot->cancel_sent = 0;
    inst->busy++;
  }
  pthread_mutex_unlock(&inst->lock);
  return slot;
}

int grow_slot(struct slot* slot, uint32_t count) {
  if (count <= slot->cap) return 0;
  uint32_t cap = slot->cap ? slot->cap : 16;
  while (cap < count) cap *= 2;
  TRITONBACKEND_Request** requests = realloc(slot->requests, cap * sizeof(*requests));
  if (requests == NULL) return -1;
  slot->requests = requests;
  TRITONBACKEND_ResponseFactory** factories = realloc(slot->factories, cap * sizeof(*factories));
  if (factories == NULL) return -1;
  slot->factories = factories;
  uint8_t* open = realloc(slot->open, cap);
  if (open == NULL) return -1;
  slot->open = open;
  slot->cap = cap;
  return 0;
}

void release_slot(struct instance_state* inst, struct slot* slot) {
  /* the batch is done with both arenas: what a large one used beyond ARENA_KEEP goes back */
  arena_trim(&slot->in);
  arena_trim(&slot->out);
  pthread_mutex_lock(&inst->lock);
  slot->state = SLOT_FREE;
  slot->count = 0;
  inst->busy--;
  pthread_cond_broadcast(&inst->changed);
  pthread_mutex_unlock(&inst->lock);
}

void fail_slot(struct instance_state* inst, struct slot* slot, TRITONSERVER_Error_Code code, const char* message,
               int relay) {
  int decoupled = inst->model->settings.decoupled;
  uint64_t failed = 0;
  uint64_t end = now_ns();
  uint64_t compute_start = slot->compute_start_ns ? slot->compute_start_ns : end;
  for (uint32_t i = 0; i < slot->count; i++) {
    if (decoupled) {
      if (slot->factories[i] == NULL) continue; /* its stream ended, and its request was released with it */
      if (slot->open[i] && !stream_silenced(slot->requests[i], slot->factories[i])) {
        TRITONBACKEND_Response* response;
        if (!relay_check(TRITONBACKEND_ResponseNewFromFactory(&response, slot->factories[i]), __LINE__))
          send_error_response(response, code, message);
        failed++;
      }
      relay_check(TRITONBACKEND_ResponseFactoryDelete(slot->factories[i]), __LINE__);
      slot->factories[i] = NULL;
    } else {
      respond_error(slot->requests[i], code, message);
      failed++;
    }
    finish_request(inst, slot->requests[i], 0, slot->exec_start_ns, compute_start, end);
  }
  metrics_add(inst->metrics, relay ? METRIC_RELAY_FAILURES : METRIC_CALLABLE_FAILURES, (double)failed);
  release_slot(inst, slot);
}

void relay_failure(struct instance_state* inst, struct slot* slot, TRITONSERVER_Error_Code code, const char* problem) {
  char message[1024];
  snprintf(message, sizeof(message), "pytriton_like relay failed for model '%s': %s", inst->model->name, problem);
  fail_slot(inst, slot, code, message, 1);
}

void fail_in_flight(struct instance_state* inst, TRITONSERVER_Error_Code code, const char* message) {
  for (uint32_t i = 0; i < inst->n_slots; i++) {
    pthread_mutex_lock(&inst->lock);
    int sent = inst->slots[i].state == SLOT_SENT;
    if (sent) inst->slots[i].state = SLOT_FILLING; /* ours to fail now */
    pthread_mutex_unlock(&inst->lock);
    if (sent) relay_failure(inst, &inst->slots[i], code, message);
  }
}
