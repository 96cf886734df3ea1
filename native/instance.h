/* A model instance of the relay's backend: its state, and its connection to its relay server (on a
 * thread of the user's process, or a worker process of its own: transport.h), lost when the relay
 * server goes and made again to a worker process that was started again. */
#ifndef PYTRITON_LIKE_INSTANCE_H
#define PYTRITON_LIKE_INSTANCE_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "metrics.h"
#include "settings.h"
#include "slots.h"
#include "triton_api.h"
#include "wire.h"

#define MAX_TEXT 65536u /* longest error text or name passed on to Triton */

/* One model version (TRITONBACKEND_ModelSetState). */
struct model_state {
  char name[256];
  char version[32];
  char dir[PATH_MAX];
  struct settings settings;
  struct model_metrics metrics;
};

/* One model instance (TRITONBACKEND_ModelInstanceSetState). */
struct instance_state {
  struct model_state* model;
  TRITONBACKEND_ModelInstance* instance;
  char name[256];
  char path[SETTINGS_MAX_PATH]; /* the relay server's socket */
  struct model_metrics* metrics; /* the model's, or the worker process's own (worker_metrics) */
  struct model_metrics worker_metrics;
  int fd;
  uint64_t threshold;
  pthread_mutex_t lock;
  pthread_cond_t changed;
  pthread_mutex_t send_lock;
  struct slot* slots;
  uint32_t n_slots;
  uint32_t busy;
  int dead;
  uint64_t lost_ns; /* when the relay server was lost */
  int stopping;
  char why[512];
  uint64_t next_id;
  pthread_t reader;
  int has_reader;
  uint64_t spin_ns;
  uint64_t typical_wait_ns;
  struct wire_buf rx;
  char text[MAX_TEXT + 1];
};

/* Makes the instance's state from relay.conf, connects it to its relay server (waiting for a worker
 * process being started again), greets it (HELLO, WELCOME: the model is ready only once its relay
 * server answered), starts its reader when several batches may be in flight, and hands the state
 * to Triton (TRITONBACKEND_ModelInstanceSetState); NULL, or the error that fails the load. */
TRITONSERVER_Error* start_instance(TRITONBACKEND_ModelInstance* instance, struct model_state* model, const char* name);
/* Waits for the batches in flight (FINALIZE_WAIT_S at most), ends the connection (the reader fails
 * what is still in flight) and frees the state. */
void stop_instance(struct instance_state* inst);

/* A worker process that died is started again by the user process's supervisor, listening at the
 * same path: connect to it and greet it. The first batch after the loss waits for it until
 * restart_wait_ms after the loss (holding that batch, so that Triton hands the next ones to the
 * instances whose worker processes live); later batches try once, and fail at once while it is not
 * back. Called by Execute only, which Triton never runs twice at once for one instance. */
void revive(struct instance_state* inst);
/* The relay server is gone: every batch sent to it fails now, and so will every later one. */
void lose_relay_server(struct instance_state* inst, const char* why);

/* Sends the slot's encoded batch; on failure fails it. 0 when sent. */
int send_batch(struct instance_state* inst, struct slot* slot);
/* Asks the relay server to stop the slot's batch (a stream none of whose requests listens any more). */
void send_cancel(struct instance_state* inst, struct slot* slot);

/* A NUL-terminated copy of len bytes (cut at MAX_TEXT) in the instance's scratch text. */
const char* scratch(struct instance_state* inst, const char* text, size_t len);

#endif
