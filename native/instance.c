/* A model instance and its connection to its relay server (instance.h). */
#include "instance.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "reader.h"
#include "settings.h"
#include "slots.h"
#include "transport.h"
#include "wire.h"

#define DECOUPLED_SLOTS 64u /* streaming batches in flight per instance */
#define FINALIZE_WAIT_S 30  /* how long unloading waits for batches still in flight */

const char* scratch(struct instance_state* inst, const char* text, size_t len) {
  if (len > MAX_TEXT) len = MAX_TEXT;
  memcpy(inst->text, text, len);
  inst->text[len] = '\0';
  return inst->text;
}

static void free_instance(struct instance_state* inst) {
  if (inst->metrics == &inst->worker_metrics) metrics_model_delete(&inst->worker_metrics);
  if (inst->fd >= 0) close(inst->fd);
  if (inst->slots != NULL) {
    for (uint32_t i = 0; i < inst->n_slots; i++) {
      struct slot* slot = &inst->slots[i];
      arena_free(&slot->in);
      arena_free(&slot->out);
      wire_buf_free(&slot->msg);
      wire_buf_free(&slot->data);
      free(slot->requests);
      free(slot->factories);
      free(slot->open);
      free(slot->inputs);
    }
    free(inst->slots);
  }
  wire_buf_free(&inst->rx);
  pthread_mutex_destroy(&inst->lock);
  pthread_mutex_destroy(&inst->send_lock);
  pthread_cond_destroy(&inst->changed);
  free(inst);
}

/* Connects to the relay server's socket; while nobody listens there (a worker process being started
 * again) tries again for up to wait_ms. A path that is missing fails at once. */
static int connect_waiting(const char* path, int wait_ms) {
  uint64_t deadline = now_ns() + (uint64_t)wait_ms * 1000000u;
  int fd;
  while ((fd = transport_connect(path)) < 0) {
    if (errno == ENOENT || now_ns() > deadline) return -1;
    struct timespec pause = {0, 20 * 1000 * 1000};
    nanosleep(&pause, NULL);
  }
  return fd;
}

/* HELLO, and the relay server's WELCOME: the model is ready only once its relay server answered. */
static TRITONSERVER_Error* handshake(struct instance_state* inst, const char* path) {
  size_t name_len = strlen(inst->name);
  uint8_t hello[WIRE_HEADER_SIZE];
  struct wire_header header = {WIRE_VERSION, WIRE_HELLO, 0, inst->n_slots, 0, (uint64_t)getpid(), 0,
                               (uint32_t)name_len, 0, 0};
  wire_put_header(hello, &header);
  struct iovec iov[2] = {{hello, sizeof(hello)}, {inst->name, name_len}};
  if (transport_send(inst->fd, iov, 2, -1) != 0)
    return error_new(TRITONSERVER_ERROR_UNAVAILABLE, "cannot greet the relay server at %s: %s", path, strerror(errno));
  int ready = transport_wait(inst->fd, 0, inst->model->settings.handshake_timeout_ms);
  int fd = -1;
  const char* problem = "no answer from the relay server";
  if (ready > 0 && transport_recv(inst->fd, &inst->rx, &fd, &problem) == 0) {
    if (fd >= 0) close(fd);
    uint16_t version = inst->rx.len >= 2 ? (uint16_t)(inst->rx.data[0] | inst->rx.data[1] << 8) : 0;
    if (version != WIRE_VERSION)
      return error_new(TRITONSERVER_ERROR_UNAVAILABLE,
                       "the relay server at %s speaks relay protocol version %u, this backend %u: the workspace's"
                       " backend and the library differ (reinstall pytriton_like)", path, version, WIRE_VERSION);
    problem = wire_read_header(inst->rx.data, inst->rx.len, &header);
    if (problem == NULL && header.kind != WIRE_WELCOME) problem = "the relay server did not answer WELCOME";
    if (problem == NULL && (header.flags & WIRE_FAILED))
      return error_new(TRITONSERVER_ERROR_UNAVAILABLE, "the relay server at %s refused the relay: %s", path,
                       scratch(inst, (const char*)inst->rx.data + WIRE_HEADER_SIZE, header.text_len));
  } else if (fd >= 0) {
    close(fd);
  }
  if (problem != NULL) return error_new(TRITONSERVER_ERROR_UNAVAILABLE, "relay server at %s: %s", path, problem);
  inst->threshold = header.value ? header.value : UINT64_MAX;
  return NULL;
}

TRITONSERVER_Error* start_instance(TRITONBACKEND_ModelInstance* instance, struct model_state* model, const char* name) {
  struct instance_state* inst = calloc(1, sizeof(*inst));
  if (inst == NULL) return TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
  inst->fd = -1;
  inst->model = model;
  inst->instance = instance;
  pthread_mutex_init(&inst->lock, NULL);
  pthread_mutex_init(&inst->send_lock, NULL);
  pthread_cond_init(&inst->changed, NULL);
  snprintf(inst->name, sizeof(inst->name), "%s", name);
  /* the instance's index is the number after the last '_' of its name (<model>_<index>) */
  const char* underscore = strrchr(name, '_');
  int index = underscore != NULL ? atoi(underscore + 1) : 0;
  const char* path = inst->path;
  char message[512];
  struct settings settings;
  TRITONSERVER_Error* error = NULL;
  inst->metrics = &inst->model->metrics;
  if (settings_read(inst->model->dir, index, &settings, inst->path, message, sizeof(message)) != 0) {
    error = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INVALID_ARG, message);
    goto failed;
  }
  if (settings.worker_processes) { /* a series of the relay's metrics per worker process */
    char worker[16];
    snprintf(worker, sizeof(worker), "%d", index);
    metrics_model_new(&inst->worker_metrics, inst->model->name, inst->model->version, worker);
    inst->metrics = &inst->worker_metrics;
  }
  inst->n_slots = settings.decoupled ? DECOUPLED_SLOTS : settings.in_flight;
  inst->spin_ns = settings.spin_us * 1000;
  inst->slots = calloc(inst->n_slots, sizeof(*inst->slots));
  if (inst->slots == NULL) {
    error = TRITONSERVER_ErrorNew(TRITONSERVER_ERROR_INTERNAL, "out of memory");
    goto failed;
  }
  for (uint32_t i = 0; i < inst->n_slots; i++) {
    struct arena empty = ARENA_INIT;
    inst->slots[i].index = i;
    inst->slots[i].in = empty;
    inst->slots[i].out = empty;
  }
  /* threads listen before the load; a worker process may be starting again meanwhile */
  inst->fd = connect_waiting(path, settings.worker_processes ? settings.restart_wait_ms : 0);
  if (inst->fd < 0) {
    error = error_new(TRITONSERVER_ERROR_UNAVAILABLE, "cannot reach the relay server at %s: %s", path, strerror(errno));
    goto failed;
  }
  error = handshake(inst, path);
  if (error != NULL) goto failed;
  if (inst->n_slots > 1) error = start_reader(inst);
  if (error != NULL) goto failed;
  error = TRITONBACKEND_ModelInstanceSetState(instance, inst);
  if (error == NULL) return NULL;
  if (inst->has_reader) {
    shutdown(inst->fd, SHUT_RDWR);
    pthread_join(inst->reader, NULL);
  }
failed:
  free_instance(inst);
  return error;
}

void stop_instance(struct instance_state* inst) {
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += FINALIZE_WAIT_S;
  pthread_mutex_lock(&inst->lock);
  while (inst->busy > 0 && !inst->dead && inst->has_reader) {
    if (pthread_cond_timedwait(&inst->changed, &inst->lock, &deadline) == ETIMEDOUT) break;
  }
  inst->stopping = 1;
  pthread_mutex_unlock(&inst->lock);
  shutdown(inst->fd, SHUT_RDWR); /* the reader sees the end and fails what is still in flight */
  if (inst->has_reader) pthread_join(inst->reader, NULL);
  free_instance(inst);
}

int send_batch(struct instance_state* inst, struct slot* slot) {
  pthread_mutex_lock(&inst->lock);
  int dead = inst->dead;
  if (!dead) slot->state = SLOT_SENT; /* from here the answer may come at any moment */
  pthread_mutex_unlock(&inst->lock);
  if (dead) {
    relay_failure(inst, slot, TRITONSERVER_ERROR_UNAVAILABLE, inst->why);
    return -1;
  }
  slot->compute_start_ns = now_ns();
  struct iovec iov[2] = {{slot->msg.data, slot->msg.len}, {slot->data.data, slot->data.len}};
  pthread_mutex_lock(&inst->send_lock);
  int sent = transport_send(inst->fd, iov, slot->data.len ? 2 : 1, slot->in.pending_fd);
  int error = errno;
  pthread_mutex_unlock(&inst->send_lock);
  if (sent == 0) {
    slot->in.pending_fd = -1; /* the peer has it; the arena keeps its own */
    return 0;
  }
  pthread_mutex_lock(&inst->lock);
  int ours = slot->state == SLOT_SENT; /* unless the reader failed it meanwhile */
  if (ours) slot->state = SLOT_FILLING;
  pthread_mutex_unlock(&inst->lock);
  if (ours) {
    char why[256];
    snprintf(why, sizeof(why), "cannot send to the relay server: %s", strerror(error));
    relay_failure(inst, slot, TRITONSERVER_ERROR_UNAVAILABLE, why);
  }
  return -1;
}

void send_cancel(struct instance_state* inst, struct slot* slot) {
  uint8_t body[WIRE_HEADER_SIZE];
  struct wire_header header = {WIRE_VERSION, WIRE_CANCEL, 0, 0, slot->batch_id, 0, slot->index, 0, 0, 0};
  wire_put_header(body, &header);
  struct iovec iov = {body, sizeof(body)};
  pthread_mutex_lock(&inst->send_lock);
  if (transport_send(inst->fd, &iov, 1, -1) != 0) relay_log(TRITONSERVER_LOG_WARN, __LINE__, "cannot cancel a batch");
  pthread_mutex_unlock(&inst->send_lock);
  slot->cancel_sent = 1;
}

void lose_relay_server(struct instance_state* inst, const char* why) {
  pthread_mutex_lock(&inst->lock);
  if (!inst->dead) {
    inst->dead = 1;
    inst->lost_ns = now_ns();
    if (inst->stopping)
      snprintf(inst->why, sizeof(inst->why), "model '%s' is unloading", inst->model->name);
    else
      snprintf(inst->why, sizeof(inst->why), "lost the relay server of model '%s': %s", inst->model->name, why);
    if (!inst->stopping) relay_log(TRITONSERVER_LOG_ERROR, __LINE__, "%s", inst->why);
  }
  pthread_cond_broadcast(&inst->changed);
  pthread_mutex_unlock(&inst->lock);
  fail_in_flight(inst, TRITONSERVER_ERROR_UNAVAILABLE, inst->why);
}

void revive(struct instance_state* inst) {
  if (!inst->has_reader && !inst->dead && transport_wait(inst->fd, 0, 0) > 0) {
    /* between batches nothing is due from the worker process: what is readable is its end (or a nudge) */
    serve_one(inst, 0);
  }
  pthread_mutex_lock(&inst->lock);
  int lost = inst->dead && !inst->stopping;
  uint64_t deadline = inst->lost_ns + (uint64_t)inst->model->settings.restart_wait_ms * 1000000u;
  pthread_mutex_unlock(&inst->lock);
  if (!lost) return;
  if (inst->has_reader) { /* it ended when the worker process was lost */
    pthread_join(inst->reader, NULL);
    inst->has_reader = 0;
  }
  uint64_t now = now_ns();
  int fd = connect_waiting(inst->path, deadline > now ? (int)((deadline - now) / 1000000u) : 0);
  if (fd < 0) return;
  close(inst->fd);
  inst->fd = fd;
  for (uint32_t i = 0; i < inst->n_slots; i++) { /* the new worker process knows none of the old arenas */
    struct arena empty = ARENA_INIT;
    arena_free(&inst->slots[i].in);
    arena_free(&inst->slots[i].out);
    inst->slots[i].in = empty;
    inst->slots[i].out = empty;
  }
  TRITONSERVER_Error* error = handshake(inst, inst->path);
  if (error == NULL && inst->n_slots > 1) error = start_reader(inst);
  if (error != NULL) {
    relay_log(TRITONSERVER_LOG_ERROR, __LINE__, "model '%s': the restarted worker process at %s: %s", inst->model->name,
              inst->path, TRITONSERVER_ErrorMessage(error));
    TRITONSERVER_ErrorDelete(error);
    return;
  }
  pthread_mutex_lock(&inst->lock);
  inst->dead = 0;
  inst->why[0] = '\0';
  inst->typical_wait_ns = 0;
  pthread_mutex_unlock(&inst->lock);
  relay_log(TRITONSERVER_LOG_INFO, __LINE__, "model '%s': instance %s reached its restarted worker process", inst->model->name,
            inst->name);
}
