/* The reader of a model instance's connection (reader.h). */
#include "reader.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <unistd.h>

#include "clock.h"
#include "instance.h"
#include "log.h"
#include "responses.h"
#include "slots.h"
#include "transport.h"
#include "wire.h"

#define LIVENESS_MS 1000 /* how often a waiting relay checks that the user process lives */

/* Handles one message from the relay server (in inst->rx); fd is a descriptor that came with it or -1. */
static void dispatch(struct instance_state* inst, int fd) {
  struct wire_header header;
  const char* problem = wire_read_header(inst->rx.data, inst->rx.len, &header);
  /* A header whose own lengths do not fit still names its batch when its fixed fields arrived. */
  int named = inst->rx.len >= WIRE_HEADER_SIZE && header.version == WIRE_VERSION && header.kind == WIRE_RESULT &&
              header.slot < inst->n_slots;
  struct slot* slot = NULL;
  if (named) {
    slot = &inst->slots[header.slot];
    pthread_mutex_lock(&inst->lock);
    named = slot->state == SLOT_SENT && slot->batch_id == header.batch_id;
    if (named) slot->state = SLOT_FILLING; /* ours while we answer */
    pthread_mutex_unlock(&inst->lock);
  }
  if (!named) {
    char message[512];
    snprintf(message, sizeof(message), "malformed answer from the relay server: %s",
             problem != NULL ? problem : "an answer to no batch in flight");
    relay_log(TRITONSERVER_LOG_ERROR, __LINE__, "model %s: %s", inst->model->name, message);
    if (fd >= 0) close(fd);
    /* which batch it was meant for is unknown: none of those in flight can trust its answer */
    fail_in_flight(inst, TRITONSERVER_ERROR_INTERNAL, message);
    return;
  }
  if ((header.flags & WIRE_NEW_ARENA) && fd < 0) problem = "a new arena was announced but none came";
  if (fd >= 0) {
    if (header.flags & WIRE_NEW_ARENA) arena_adopt(&slot->out, fd, &problem);
    else close(fd);
  }
  struct wire_cursor cursor;
  if (problem == NULL)
    problem = wire_check_result(inst->rx.data, inst->rx.len, slot->out.map, slot->out.size, &header, &cursor);
  if (problem == NULL && cursor.arena_end > slot->out.touched) slot->out.touched = cursor.arena_end;
  if (problem == NULL && !(header.flags & WIRE_FAILED) && header.count != slot->count &&
      !(inst->model->settings.decoupled && header.count == 0))
    problem = "the relay server answered another number of responses than requests";
  if (problem != NULL) {
    char message[512];
    snprintf(message, sizeof(message), "malformed answer from the relay server: %s", problem);
    relay_log(TRITONSERVER_LOG_ERROR, __LINE__, "model %s: %s", inst->model->name, message);
    relay_failure(inst, slot, TRITONSERVER_ERROR_INTERNAL, message);
    return;
  }
  /* the relay server answered: it is done with the inputs, whose pages can go before the outputs are copied */
  arena_trim(&slot->in);
  if (inst->model->settings.decoupled) {
    if (!stream_result(inst, slot, &header, &cursor)) {
      pthread_mutex_lock(&inst->lock);
      slot->state = SLOT_SENT; /* more to come */
      pthread_mutex_unlock(&inst->lock);
    }
  } else {
    batch_result(inst, slot, &header, &cursor);
  }
}

static int owner_alive(struct instance_state* inst) {
  pid_t pid = (pid_t)inst->model->settings.owner_pid;
  return pid <= 0 || kill(pid, 0) == 0 || errno != ESRCH;
}

int serve_one(struct instance_state* inst, uint64_t spin_ns) {
  uint64_t started = spin_ns ? now_ns() : 0;
  int ready = transport_wait(inst->fd, inst->typical_wait_ns > spin_ns ? 0 : spin_ns, LIVENESS_MS);
  if (ready == 0) {
    if (owner_alive(inst)) return 0;
    char why[128];
    snprintf(why, sizeof(why), "the user process (pid %llu) that serves the model is gone",
             (unsigned long long)inst->model->settings.owner_pid);
    lose_relay_server(inst, why);
    return -1;
  }
  if (spin_ns) {
    /* a moving average of about the last eight waits; one slow answer counts as at most twice the spin */
    uint64_t waited = now_ns() - started;
    if (waited > 2 * spin_ns) waited = 2 * spin_ns;
    inst->typical_wait_ns = inst->typical_wait_ns - inst->typical_wait_ns / 8 + waited / 8;
  }
  int fd = -1;
  const char* error = "cannot poll the relay server's socket";
  int status = ready < 0 ? -1 : transport_recv(inst->fd, &inst->rx, &fd, &error);
  if (status != 0) {
    if (fd >= 0) close(fd);
    lose_relay_server(inst, status == 1 ? "the connection closed (its process exited or stopped serving)" : error);
    return -1;
  }
  if (inst->rx.len == 0) {
    if (fd >= 0) close(fd);
    return 0; /* a nudge: nothing to do */
  }
  dispatch(inst, fd);
  return 0;
}

static void* reader_main(void* argument) {
  struct instance_state* inst = argument;
  while (serve_one(inst, 0) == 0) {
  }
  return NULL;
}

TRITONSERVER_Error* start_reader(struct instance_state* inst) {
  if (pthread_create(&inst->reader, NULL, reader_main, inst) != 0)
    return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "cannot start the relay's thread");
  inst->has_reader = 1;
  return NULL;
}
