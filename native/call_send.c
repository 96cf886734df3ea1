/* What a caller's connection sends (call_conn.h): replies go out at once when the socket takes them,
 * and what it does not take waits in the connection's queue, which the listener's thread sends as
 * the caller reads. Triton's threads that answer (a called model's reader, for one) never wait for a
 * caller that is slow to read its stream; a reply that finds more than CALL_QUEUE_MAX bytes unread
 * before it drops the caller's connection (its call cancelled), so that tritonserver's memory stays
 * bounded. */
#define _GNU_SOURCE
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "call_conn.h"
#include "log.h"

#define CALL_QUEUE_MAX ((size_t)64 << 20)

static void drop_locked(struct call_conn* conn) {
  conn->closed = 1; /* the caller is gone, or reads nothing: the listener sees the end and lets go of it */
  shutdown(conn->fd, SHUT_RDWR);
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

void conn_send_locked(struct call_conn* conn, const struct iovec* iov, int iovcnt, int pass_fd) {
  if (conn->closed) return;
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
  } else {
    uint64_t length = 0;
    for (int i = 0; i < iovcnt; i++) length += iov[i].iov_len;
    for (int i = 0; i < 8; i++) prefix[i] = (uint8_t)(length >> (8 * i));
  }
  size_t waiting = conn->queue.len - conn->queue_sent;
  if (waiting > CALL_QUEUE_MAX) { /* a message of any size may wait, but none behind that much */
    relay_log(TRITONSERVER_LOG_WARN, __LINE__,
              "a nested call's caller left %zu bytes of replies unread: its connection is dropped, its call cancelled",
              waiting);
    drop_locked(conn);
    return;
  }
  size_t start = conn->queue.len;
  if ((pass_fd >= 0 && conn->queue_fd >= 0) || enqueue(conn, prefix, iov, iovcnt, sent) != 0) {
    drop_locked(conn);
    return;
  }
  if (pass_fd >= 0) { /* sent with the message's first byte, which waits in the queue */
    conn->queue_fd = dup(pass_fd);
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
    if (conn->queue_sent < end) break; /* no more room: the listener wakes again when there is */
  }
  if (conn->closed || conn->queue.len == conn->queue_sent) {
    conn->queue.len = conn->queue_sent = 0;
    watch_room(conn, 0);
  }
  pthread_mutex_unlock(&conn->lock);
}
