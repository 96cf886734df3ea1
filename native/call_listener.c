/* Nested calls' socket (calls.h): the listener's thread accepts callers' connections, greets them,
 * answers their MODEL questions and starts their CALLs (call_request.c); a connection that closes
 * cancels its call in Triton's core. */
#define _GNU_SOURCE
#include "calls.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "call_conn.h"
#include "log.h"

#define STOP_WAIT_S 30 /* how long stopping waits for calls still in Triton's hands */

static struct {
  pthread_mutex_t lock; /* server, conns, live */
  pthread_cond_t changed;
  TRITONSERVER_Server* server;
  TRITONSERVER_ResponseAllocator* allocator;
  char path[108];
  char token[CALLS_MAX_TOKEN + 1];
  int has_token;
  int listen_fd;
  int epoll_fd;
  int stop_fd;
  pthread_t thread;
  int running;
  struct call_conn* conns; /* those the listener reads */
  int live;                /* connections not freed yet (read, or holding a call) */
} calls = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL, NULL, "", "", 0, -1, -1, -1, 0, 0, NULL, 0};

void calls_set_server(TRITONSERVER_Server* server) {
  pthread_mutex_lock(&calls.lock);
  calls.server = server;
  pthread_mutex_unlock(&calls.lock);
}

/* A message of the header alone (and a text): WELCOME, or a REPLY to a MODEL question. */
static void send_plain(struct call_conn* conn, uint8_t kind, uint8_t flags, uint64_t id, uint64_t value,
                       const char* text, size_t text_len) {
  uint8_t header_bytes[WIRE_HEADER_SIZE];
  struct wire_header header = {WIRE_VERSION, kind, flags, 0, id, value, 0, (uint32_t)text_len,
                               (uint32_t)(WIRE_HEADER_SIZE + text_len), 0};
  wire_put_header(header_bytes, &header);
  struct iovec iov[2] = {{header_bytes, sizeof(header_bytes)}, {(void*)text, text_len}};
  pthread_mutex_lock(&conn->lock);
  conn_send_locked(conn, iov, text_len ? 2 : 1, -1);
  pthread_mutex_unlock(&conn->lock);
}

static void conn_free(struct call_conn* conn) {
  close(conn->fd);
  if (conn->queue_fd >= 0) close(conn->queue_fd);
  wire_buf_free(&conn->queue);
  arena_free(&conn->in);
  for (uint32_t i = 0; i < WIRE_CALL_ARENAS; i++) arena_free(&conn->outs[i]);
  wire_buf_free(&conn->rx);
  wire_buf_free(&conn->spare);
  pthread_cond_destroy(&conn->room);
  pthread_mutex_destroy(&conn->lock);
  free(conn);
  pthread_mutex_lock(&calls.lock);
  calls.live--;
  pthread_cond_broadcast(&calls.changed);
  pthread_mutex_unlock(&calls.lock);
}

/* Drops one holder of the connection; the last one frees it. */
static void conn_put(struct call_conn* conn) {
  pthread_mutex_lock(&conn->lock);
  int last = --conn->refs == 0;
  pthread_mutex_unlock(&conn->lock);
  if (last) conn_free(conn);
}

void call_detach_locked(struct nested_call* call) {
  struct call_conn* conn = call->conn;
  conn->call = NULL;
  if (conn->spare.data == NULL) { /* its message buffer serves the next call */
    conn->spare = call->msg;
    call->msg.data = NULL;
    call->msg.len = call->msg.cap = 0;
  }
  if (call->in_touched > conn->in.touched) conn->in.touched = call->in_touched;
  arena_trim(&conn->in); /* what a large input used beyond ARENA_KEEP goes back */
}

void call_free(struct nested_call* call) {
  struct call_conn* conn = call->conn;
  wire_buf_free(&call->msg);
  wire_buf_free(&call->reply);
  wire_buf_free(&call->data);
  wire_buf_free(&call->text);
  free(call);
  conn_put(conn);
}

/* The caller went away (or the backend stops): its call is cancelled, the listener lets go. */
static void conn_end(struct call_conn* conn) {
  epoll_ctl(calls.epoll_fd, EPOLL_CTL_DEL, conn->fd, NULL);
  pthread_mutex_lock(&conn->lock);
  conn->closed = 1;
  pthread_cond_broadcast(&conn->room); /* a reply waiting for room goes nowhere */
  if (conn->call != NULL && conn->call->request != NULL)
    relay_check(TRITONSERVER_InferenceRequestCancel(conn->call->request), __LINE__);
  pthread_mutex_unlock(&conn->lock);
  pthread_mutex_lock(&calls.lock);
  for (struct call_conn** at = &calls.conns; *at != NULL; at = &(*at)->next) {
    if (*at == conn) {
      *at = conn->next;
      break;
    }
  }
  pthread_mutex_unlock(&calls.lock);
  conn_put(conn);
}

/* HELLO: the caller's threshold and arena limit, and the token when one is asked. */
static int greet(struct call_conn* conn, const struct wire_header* header) {
  const char* text = (const char*)conn->rx.data + WIRE_HEADER_SIZE;
  size_t len = header->text_len;
  int refused = calls.has_token && (len != strlen(calls.token) || memcmp(text, calls.token, len) != 0);
  if (refused) {
    static const char why[] = "the nested call's access token does not match the server's";
    send_plain(conn, WIRE_WELCOME, WIRE_FAILED, 0, 0, why, sizeof(why) - 1);
    return -1;
  }
  conn->threshold = header->value;
  conn->shm_limit = header->batch_id;
  conn->welcomed = 1;
  send_plain(conn, WIRE_WELCOME, 0, 0, 0, NULL, 0);
  return 0;
}

/* MODEL: whether the model is ready, and its config as JSON (value 1) when it is. */
static void describe(struct call_conn* conn, const struct wire_header* header) {
  struct wire_call fields;
  const char* problem = wire_model_text(conn->rx.data, header, &fields);
  char version_text[65] = "";
  if (problem == NULL) memcpy(version_text, fields.version, fields.version_len);
  char* end = version_text;
  long long version = fields.version_len ? strtoll(version_text, &end, 10) : -1;
  if (problem == NULL && fields.version_len && (*end != '\0' || version < 1)) problem = "failed to parse the model version";
  pthread_mutex_lock(&calls.lock);
  TRITONSERVER_Server* server = calls.server;
  pthread_mutex_unlock(&calls.lock);
  if (problem == NULL && server == NULL) problem = "tritonserver is not serving yet";
  if (problem != NULL) {
    send_plain(conn, WIRE_REPLY, WIRE_FINAL | WIRE_FAILED, header->batch_id, TRITONSERVER_ERROR_INVALID_ARG, problem,
               strlen(problem));
    return;
  }
  bool ready = false;
  TRITONSERVER_Message* config = NULL;
  TRITONSERVER_Error* error = TRITONSERVER_ServerModelIsReady(server, fields.model, version, &ready);
  if (error != NULL) { /* not a model of this server: not ready, and why */
    const char* why = TRITONSERVER_ErrorMessage(error);
    send_plain(conn, WIRE_REPLY, WIRE_FINAL, header->batch_id, 0, why, strlen(why));
    TRITONSERVER_ErrorDelete(error);
    return;
  }
  if (ready) error = TRITONSERVER_ServerModelConfig(server, fields.model, version, 1, &config);
  const char* json = "";
  size_t json_len = 0;
  if (error == NULL && config != NULL) error = TRITONSERVER_MessageSerializeToJson(config, &json, &json_len);
  if (error != NULL) {
    const char* why = TRITONSERVER_ErrorMessage(error);
    send_plain(conn, WIRE_REPLY, WIRE_FINAL | WIRE_FAILED, header->batch_id, TRITONSERVER_ErrorCode(error), why,
               strlen(why));
    TRITONSERVER_ErrorDelete(error);
  } else {
    send_plain(conn, WIRE_REPLY, WIRE_FINAL, header->batch_id, ready ? 1 : 0, json, json_len);
  }
  if (config != NULL) relay_check(TRITONSERVER_MessageDelete(config), __LINE__);
}

/* CALL: the connection's arenas brought up to date, the call handed to Triton. */
static int start_call(struct call_conn* conn, const struct wire_header* header, int fd) {
  pthread_mutex_lock(&conn->lock);
  int busy = conn->call != NULL;
  pthread_mutex_unlock(&conn->lock);
  if (busy) { /* one at a time: the caller broke the protocol */
    if (fd >= 0) close(fd);
    return -1;
  }
  const char* problem = NULL;
  if ((header->flags & WIRE_NEW_ARENA) && fd < 0) return -1;
  if (fd >= 0 && arena_adopt(&conn->in, fd, &problem) != 0) return -1;
  struct nested_call* call = calloc(1, sizeof(*call));
  if (call == NULL) return -1;
  call->conn = conn;
  call->id = header->batch_id;
  call->stream = (header->flags & WIRE_STREAM) != 0;
  call->reply_fd = -1;
  /* the outputs go to an output arena the caller does not hold, made already if one is */
  for (uint32_t i = 0; i < WIRE_CALL_ARENAS; i++) {
    if (header->slot & (1u << i)) continue;
    if (call->out == NULL || (call->out->map == NULL && conn->outs[i].map != NULL)) {
      call->out = &conn->outs[i];
      call->out_index = i;
    }
  }
  if (call->out != NULL) arena_trim(call->out); /* what its last large outputs used beyond ARENA_KEEP goes back */
  call->msg = conn->rx; /* the call keeps its message: Triton reads the inline inputs there */
  conn->rx = conn->spare;
  conn->spare.data = NULL;
  conn->spare.len = conn->spare.cap = 0;
  pthread_mutex_lock(&conn->lock);
  conn->call = call;
  conn->refs++;
  pthread_mutex_unlock(&conn->lock);
  pthread_mutex_lock(&calls.lock);
  TRITONSERVER_Server* server = calls.server;
  pthread_mutex_unlock(&calls.lock);
  TRITONSERVER_Error* error = call_start(call, server, calls.allocator);
  if (error != NULL) {
    call_fail(call, TRITONSERVER_ErrorCode(error), TRITONSERVER_ErrorMessage(error));
    TRITONSERVER_ErrorDelete(error);
  }
  return 0;
}

/* One message from a caller; -1 ends the connection. */
static int serve_message(struct call_conn* conn) {
  int fd = -1;
  const char* problem = NULL;
  int status = transport_recv(conn->fd, &conn->rx, &fd, &problem);
  if (status != 0 || conn->rx.len == 0) { /* the end (or an error), or a nudge */
    if (fd >= 0) close(fd);
    return status != 0 ? -1 : 0;
  }
  struct wire_header header;
  problem = wire_read_header(conn->rx.data, conn->rx.len, &header);
  if (problem != NULL) {
    if (!conn->welcomed) send_plain(conn, WIRE_WELCOME, WIRE_FAILED, 0, 0, problem, strlen(problem));
    if (fd >= 0) close(fd);
    return -1;
  }
  if (header.kind == WIRE_CALL && conn->welcomed) return start_call(conn, &header, fd);
  if (fd >= 0) close(fd);
  if (header.kind == WIRE_HELLO && !conn->welcomed) return greet(conn, &header);
  if (header.kind == WIRE_MODEL && conn->welcomed && conn->call == NULL) {
    describe(conn, &header);
    return 0;
  }
  return -1;
}

static void accept_caller(void) {
  int fd = accept4(calls.listen_fd, NULL, NULL, SOCK_CLOEXEC);
  if (fd < 0) return;
  struct call_conn* conn = calloc(1, sizeof(*conn));
  if (conn == NULL) {
    close(fd);
    return;
  }
  struct arena empty = ARENA_INIT;
  conn->fd = fd;
  conn->refs = 1;
  conn->queue_fd = -1;
  conn->epoll_fd = calls.epoll_fd;
  conn->in = empty;
  for (uint32_t i = 0; i < WIRE_CALL_ARENAS; i++) conn->outs[i] = empty;
  pthread_mutex_init(&conn->lock, NULL);
  conn_room_init(conn);
  struct epoll_event event = {.events = EPOLLIN, .data = {.ptr = conn}};
  pthread_mutex_lock(&calls.lock);
  conn->next = calls.conns;
  calls.conns = conn;
  calls.live++;
  pthread_mutex_unlock(&calls.lock);
  if (epoll_ctl(calls.epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) conn_end(conn);
}

static void* listener_main(void* argument) {
  (void)argument;
  conn_send_from_listener();
  struct epoll_event events[16];
  for (;;) {
    int count = epoll_wait(calls.epoll_fd, events, 16, -1);
    if (count < 0 && errno != EINTR) break;
    for (int i = 0; i < count; i++) {
      void* what = events[i].data.ptr;
      if (what == &calls.stop_fd) return NULL;
      if (what == &calls.listen_fd) {
        accept_caller();
        continue;
      }
      if (events[i].events & EPOLLOUT) conn_send_queued(what);
      if ((events[i].events & ~(uint32_t)EPOLLOUT) && serve_message(what) != 0) conn_end(what);
    }
  }
  relay_log(TRITONSERVER_LOG_ERROR, __LINE__, "nested calls' socket: %s", strerror(errno));
  return NULL;
}

static int listen_at(const char* path, char* message, size_t message_len) {
  struct sockaddr_un address;
  memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof(address.sun_path)) {
    snprintf(message, message_len, "the nested calls' socket path is too long: %s", path);
    return -1;
  }
  strcpy(address.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  unlink(path); /* what a tritonserver that died left there */
  /* only the server's user may connect (docs/security.md); its folder is the owner's alone too */
  if (fd < 0 || bind(fd, (struct sockaddr*)&address, sizeof(address)) != 0 || chmod(path, 0600) != 0 ||
      listen(fd, 64) != 0) {
    snprintf(message, message_len, "cannot listen for nested calls at %s: %s", path, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

int calls_start(const char* path, const char* token, char* message, size_t message_len) {
  snprintf(calls.path, sizeof(calls.path), "%s", path);
  calls.has_token = token != NULL;
  snprintf(calls.token, sizeof(calls.token), "%s", token != NULL ? token : "");
  TRITONSERVER_Error* error = call_allocator_new(&calls.allocator);
  if (error != NULL) {
    snprintf(message, message_len, "%s", TRITONSERVER_ErrorMessage(error));
    TRITONSERVER_ErrorDelete(error);
    return -1;
  }
  calls.listen_fd = listen_at(path, message, message_len);
  calls.epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  calls.stop_fd = eventfd(0, EFD_CLOEXEC);
  struct epoll_event listen_event = {.events = EPOLLIN, .data = {.ptr = &calls.listen_fd}};
  struct epoll_event stop_event = {.events = EPOLLIN, .data = {.ptr = &calls.stop_fd}};
  if (calls.listen_fd >= 0 && (calls.epoll_fd < 0 || calls.stop_fd < 0 ||
                               epoll_ctl(calls.epoll_fd, EPOLL_CTL_ADD, calls.listen_fd, &listen_event) != 0 ||
                               epoll_ctl(calls.epoll_fd, EPOLL_CTL_ADD, calls.stop_fd, &stop_event) != 0 ||
                               pthread_create(&calls.thread, NULL, listener_main, NULL) != 0))
    snprintf(message, message_len, "cannot start the nested calls' thread: %s", strerror(errno));
  else if (calls.listen_fd >= 0)
    calls.running = 1;
  if (calls.running) return 0;
  calls_stop();
  return -1;
}

void calls_stop(void) {
  if (calls.running) {
    uint64_t one = 1;
    if (write(calls.stop_fd, &one, sizeof(one)) != sizeof(one))
      relay_log(TRITONSERVER_LOG_WARN, __LINE__, "cannot stop the nested calls' thread");
    pthread_join(calls.thread, NULL);
    calls.running = 0;
  }
  for (;;) { /* the listener is gone: end every connection it read */
    pthread_mutex_lock(&calls.lock);
    struct call_conn* conn = calls.conns;
    pthread_mutex_unlock(&calls.lock);
    if (conn == NULL) break;
    conn_end(conn);
  }
  struct timespec deadline;
  clock_gettime(CLOCK_REALTIME, &deadline);
  deadline.tv_sec += STOP_WAIT_S;
  pthread_mutex_lock(&calls.lock);
  while (calls.live > 0 && pthread_cond_timedwait(&calls.changed, &calls.lock, &deadline) == 0) {
  }
  int left = calls.live;
  pthread_mutex_unlock(&calls.lock);
  if (left) relay_log(TRITONSERVER_LOG_WARN, __LINE__, "%d nested calls were still running at the end", left);
  if (calls.listen_fd >= 0) {
    close(calls.listen_fd);
    unlink(calls.path);
  }
  if (calls.epoll_fd >= 0) close(calls.epoll_fd);
  if (calls.stop_fd >= 0) close(calls.stop_fd);
  calls.listen_fd = calls.epoll_fd = calls.stop_fd = -1;
  if (calls.allocator != NULL && left == 0) {
    relay_check(TRITONSERVER_ResponseAllocatorDelete(calls.allocator), __LINE__);
    calls.allocator = NULL;
  }
}
