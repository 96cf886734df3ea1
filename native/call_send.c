/* What a caller's connection sends (call_conn.h): a reply goes out at once when the socket takes it,
 * and what the socket does not take waits in the connection's queue, which the listener's thread
 * sends as the caller reads. So a Triton thread that answers (a called model's reader, for one)
 * does not wait for a caller slow to read its stream, up to CALL_QUEUE_MAX bytes unread. Past that
 * the next response of the call waits for the caller to read (conn_wait_room_locked), so that
 * tritonserver's memory stays bounded, and a caller that reads nothing for CALL_QUEUE_STALL_S is
 * dropped (its call cancelled), so that no thread of Triton's waits for ever. The listener's
 * thread never waits: it sends the queues. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "call_conn.h"
#include "log.h"

#define CALL_QUEUE_MAX ((size_t)64 << 20)
#define CALL_QUEUE_KEEP ((size_t)1 << 20) /* the capacity an empty queue keeps */
#define CALL_QUEUE_STALL_S 30

static _Thread_local int listening;

void conn_send_from_listener(void) { listening = 1; }

static void drop_locked(struct call_conn* conn) {
  conn->closed = 1; /* the caller is gone: the listener sees the end and lets go of it */
  shutdown(conn->fd, SHUT_RDWR);
  pthread_cond_broadcast(&conn->room);
}

/* Has the listener wake for the socket's room (more: 1) or not. */
static void watch_room(struct call_conn* conn, int more) {
  struct epoll_event event = {.events = EPOLLIN | (more ? EPOLLOUT : 0), .data = {.ptr = conn}};
  epoll_ctl(conn->epoll_fd, EPOLL_CTL_MOD, conn->fd, &event); /* fails only once conn_end removed it */
}

/* Appends the bytes of the framed message from skip on to the queue; 0, or -1 when out of memory. */
static int enqueue(struct call_conn* conn, const uint8_t prefix[8], const struct iovec* iov, int iovcnt, size_t skip) {
  struct iovec all[9] = {{(void*)prefix, 8}};
  size_t total = 8;
  for (int i = 0; i < iovcnt; i++) {
    all[i + 1] = iov[i];
    total += iov[i].iov_len;
  }
  if (wire_buf_reserve(&conn->queue, total - skip) != 0) return -1;
  for (int i = 0; i <= iovcnt; i++) {
    size_t part = all[i].iov_len;
    if (skip >= part) {
      skip -= part;
      continue;
    }
    wire_put_bytes(&conn->queue, (const uint8_t*)all[i].iov_base + skip, part - skip);
    skip = 0;
  }
  return 0;
}

/* Moves the bytes not sent yet to the queue's start, once the sent ones are the larger part. */
static void compact(struct call_conn* conn) {
  size_t left = conn->queue.len - conn->queue_sent;
  if (conn->queue_sent < left) return;
  memmove(conn->queue.data, conn->queue.data + conn->queue_sent, left);
  if (conn->queue_fd >= 0) conn->queue_fd_at -= conn->queue_sent;
  conn->queue.len = left;
  conn->queue_sent = 0;
}

void conn_room_init(struct call_conn* conn) {
  pthread_condattr_t attributes;
  pthread_condattr_init(&attributes);
  pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
  pthread_cond_init(&conn->room, &attributes);
  pthread_condattr_destroy(&attributes);
}

void conn_wait_room_locked(struct call_conn* conn) {
  if (listening) return;
  while (!conn->closed && conn->queue.len - conn->queue_sent > CALL_QUEUE_MAX) {
    struct timespec deadline = conn->queue_progress;
    deadline.tv_sec += CALL_QUEUE_STALL_S;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > deadline.tv_sec || (now.tv_sec == deadline.tv_sec && now.tv_nsec >= deadline.tv_nsec)) {
      relay_log(TRITONSERVER_LOG_WARN, __LINE__,
                "a nested call's caller read none of %zu bytes of replies in %d s: its call is cancelled",
                conn->queue.len - conn->queue_sent, CALL_QUEUE_STALL_S);
      drop_locked(conn);
      return;
    }
    pthread_cond_timedwait(&conn->room, &conn->lock, &deadline); /* the listener sends as the caller reads */
  }
}

void conn_send_locked(struct call_conn* conn, const struct iovec* iov, int iovcnt, int pass_fd) {
  if (conn->closed || iovcnt > 8) return;
  uint8_t prefix[8];
  size_t sent = 0;
  int queued = conn->queue.len > conn->queue_sent;
  if (!queued) {
    if (transport_send_now(conn->fd, iov, iovcnt, pass_fd, prefix, &sent) != 0) {
      drop_locked(conn);
      return;
    }
    size_t total = 8;
    for (int i = 0; i < iovcnt; i++) total += iov[i].iov_len;
    if (sent == total) return;
    if (sent > 0) pass_fd = -1; /* it went with the first bytes */
    conn->queue.len = conn->queue_sent = 0;
    clock_gettime(CLOCK_MONOTONIC, &conn->queue_progress);
  } else {
    compact(conn);
    uint64_t length = 0;
    for (int i = 0; i < iovcnt; i++) length += iov[i].iov_len;
    for (int i = 0; i < 8; i++) prefix[i] = (uint8_t)(length >> (8 * i));
  }
  size_t start = conn->queue.len;
  if ((pass_fd >= 0 && conn->queue_fd >= 0) || enqueue(conn, prefix, iov, iovcnt, sent) != 0) {
    drop_locked(conn);
    return;
  }
  if (pass_fd >= 0) { /* sent with the message's first byte, which waits in the queue */
    conn->queue_fd = fcntl(pass_fd, F_DUPFD_CLOEXEC, 0);
    conn->queue_fd_at = start;
    if (conn->queue_fd < 0) {
      drop_locked(conn);
      return;
    }
  }
  if (!queued) watch_room(conn, 1);
}

void conn_send_queued(struct call_conn* conn) {
  pthread_mutex_lock(&conn->lock);
  while (!conn->closed && conn->queue.len > conn->queue_sent) {
    size_t end = conn->queue.len;
    int pass_fd = -1;
    if (conn->queue_fd >= 0 && conn->queue_fd_at > conn->queue_sent) end = conn->queue_fd_at; /* up to its message */
    if (conn->queue_fd >= 0 && conn->queue_fd_at == conn->queue_sent) pass_fd = conn->queue_fd;
    size_t sent = 0;
    if (transport_send_bytes_now(conn->fd, conn->queue.data + conn->queue_sent, end - conn->queue_sent, pass_fd,
                                 &sent) != 0) {
      drop_locked(conn);
      break;
    }
    if (sent > 0 && pass_fd >= 0) {
      close(conn->queue_fd);
      conn->queue_fd = -1;
    }
    conn->queue_sent += sent;
    if (sent > 0) clock_gettime(CLOCK_MONOTONIC, &conn->queue_progress);
    if (conn->queue_sent < end) break; /* no more room: the listener wakes again when there is */
  }
  if (conn->closed || conn->queue.len == conn->queue_sent) {
    conn->queue.len = conn->queue_sent = 0;
    if (conn->queue.cap > CALL_QUEUE_KEEP) wire_buf_free(&conn->queue);
    watch_room(conn, 0);
  } else {
    compact(conn);
  }
  pthread_cond_broadcast(&conn->room);
  pthread_mutex_unlock(&conn->lock);
}
