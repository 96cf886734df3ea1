/* Reading relay.conf (settings.h). */
#include "settings.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int number(const char* text, uint64_t* value) {
  char* end;
  if (*text < '0' || *text > '9') return -1;
  unsigned long long parsed = strtoull(text, &end, 10);
  if (*end != '\0') return -1;
  *value = parsed;
  return 0;
}

int settings_read(const char* dir, int instance, struct settings* s, char* socket_path, char* message,
                  unsigned message_len) {
  char path[PATH_MAX];
  char line[512];
  char socket_key[32];
  snprintf(path, sizeof(path), "%s/relay.conf", dir);
  snprintf(socket_key, sizeof(socket_key), "socket.%d", instance);
  memset(s, 0, sizeof(*s));
  s->in_flight = 1;
  s->handshake_timeout_ms = 60000;
  if (socket_path != NULL) socket_path[0] = '\0';
  FILE* file = fopen(path, "re");
  if (file == NULL) {
    snprintf(message, message_len, "cannot read %s: is this a model bound by pytriton_like?", path);
    return -1;
  }
  int bad = 0;
  uint64_t version = 0; /* none written: a file of before the versioned format */
  while (fgets(line, sizeof(line), file) != NULL) {
    line[strcspn(line, "\n")] = '\0';
    char* equals = strchr(line, '=');
    if (line[0] == '\0' || line[0] == '#') continue;
    if (equals == NULL) {
      bad = 1;
      break;
    }
    *equals = '\0';
    const char* key = line;
    const char* text = equals + 1;
    uint64_t value = 0;
    if (strcmp(key, socket_key) == 0) {
      if (socket_path == NULL) continue;
      if (strlen(text) >= SETTINGS_MAX_PATH) {
        bad = 1;
        break;
      }
      strcpy(socket_path, text);
      continue;
    }
    if (strncmp(key, "socket.", 7) == 0) continue;
    if (number(text, &value) != 0) {
      bad = 1;
      break;
    }
    if (strcmp(key, "version") == 0) version = value;
    else if (strcmp(key, "owner_pid") == 0) s->owner_pid = value;
    else if (strcmp(key, "decoupled") == 0) s->decoupled = value != 0;
    else if (strcmp(key, "sequence") == 0) s->sequence = value != 0;
    else if (strcmp(key, "batching") == 0) s->batching = value != 0;
    else if (strcmp(key, "shm_limit") == 0) s->shm_limit = value;
    else if (strcmp(key, "spin_us") == 0) s->spin_us = value > 1000000 ? 1000000 : value;
    else if (strcmp(key, "in_flight") == 0) s->in_flight = value < 1 ? 1 : value > 16 ? 16 : (uint32_t)value;
    else if (strcmp(key, "outputs") == 0) s->outputs = value > 65535 ? 65535 : (uint32_t)value;
    else if (strcmp(key, "handshake_timeout_ms") == 0) s->handshake_timeout_ms = value > 3600000 ? 3600000 : (int)value;
    else if (strcmp(key, "worker_processes") == 0) s->worker_processes = value != 0;
    else if (strcmp(key, "restart_wait_ms") == 0) s->restart_wait_ms = value > 3600000 ? 3600000 : (int)value;
    /* unknown keys are ignored: a newer library may say more */
  }
  fclose(file);
  if (bad) {
    snprintf(message, message_len, "%s: a line is not key=value with a number", path);
    return -1;
  }
  if (version != SETTINGS_VERSION) {
    snprintf(message, message_len,
             "%s has settings version %llu, this relay backend reads version %d: the pytriton_like that bound"
             " the model and the one whose tritonserver loads it differ; use one release for both",
             path, (unsigned long long)version, SETTINGS_VERSION);
    return -1;
  }
  if (socket_path != NULL && socket_path[0] == '\0') {
    snprintf(message, message_len, "%s names no socket for instance %d", path, instance);
    return -1;
  }
  return 0;
}
