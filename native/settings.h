/* The relay's settings for one model version, decided in Python (pytriton_like/models) and
 * handed over as relay.conf next to the version's files: one key=value per line, "version" first
 * (pytriton_like/relay/settings.py writes it). */
#ifndef PYTRITON_LIKE_SETTINGS_H
#define PYTRITON_LIKE_SETTINGS_H

#include <limits.h>
#include <stdint.h>

#define SETTINGS_MAX_PATH 108 /* a Unix socket path, NUL included */
#define SETTINGS_VERSION 2    /* the format of relay.conf this backend reads (relay/settings.py) */

struct settings {
  uint64_t owner_pid;        /* owner_pid: the user process serving the model */
  int decoupled;             /* decoupled: 1 for a streaming model */
  int sequence;              /* sequence: 1 for a model with a sequence batcher */
  int batching;              /* batching: 1 when the first dimension is the batch */
  uint64_t shm_limit;        /* shm_limit: largest arena in bytes, 0: no limit */
  uint64_t spin_us;          /* spin_us: how long to poll for an answer before sleeping */
  uint32_t in_flight;        /* in_flight: batches in flight per instance (non-decoupled) */
  uint32_t outputs;          /* outputs: how many outputs the model declares */
  int handshake_timeout_ms;  /* handshake_timeout_ms: how long to wait for WELCOME */
  int worker_processes;      /* worker_processes: 1 when each instance's relay server is a worker process of its
                                own, started again when it dies (its metrics get a worker label) */
  int restart_wait_ms;       /* restart_wait_ms: how long after losing its worker process an instance waits for
                                the restarted one with the batch it holds (the supervisor's grace) */
};

/* Reads dir/relay.conf. For instance (>= 0) also finds its socket ("socket.<index>=path").
 * 0, or -1 with a message (a file of another version than SETTINGS_VERSION is refused). */
int settings_read(const char* dir, int instance, struct settings* settings, char* socket_path, char* message,
                  unsigned message_len);

#endif
