/* The relay's transport (transport.h): framing on the Unix socket, descriptor passing, arenas. */
#define _GNU_SOURCE
#include "transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "clock.h"

int transport_connect(const char* path) {
  struct sockaddr_un address;
  memset(&address, 0, sizeof(address));
  address.sun_family = AF_UNIX;
  if (strlen(path) >= sizeof(address.sun_path)) {
    errno = ENAMETOOLONG;
    return -1;
  }
  strcpy(address.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr*)&address, sizeof(address)) != 0) {
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  }
  return fd;
}

/* sendmsg until every byte went, or (flags with MSG_DONTWAIT) until the socket takes no more; the
 * descriptor goes with the first bytes sent. 0 with *sent the bytes that went, or -1 with errno. */
static int send_iov(int fd, struct iovec* iov, int iovcnt, int pass_fd, int flags, size_t* sent) {
  union {
    struct cmsghdr header;
    char space[CMSG_SPACE(sizeof(int))];
  } control;
  *sent = 0;
  while (iovcnt > 0) {
    struct msghdr message;
    memset(&message, 0, sizeof(message));
    message.msg_iov = iov;
    message.msg_iovlen = (size_t)iovcnt;
    if (pass_fd >= 0) {
      memset(&control, 0, sizeof(control));
      message.msg_control = control.space;
      message.msg_controllen = sizeof(control.space);
      struct cmsghdr* cmsg = CMSG_FIRSTHDR(&message);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int));
      memcpy(CMSG_DATA(cmsg), &pass_fd, sizeof(int));
    }
    ssize_t count = sendmsg(fd, &message, flags | MSG_NOSIGNAL);
    if (count < 0) {
      if (errno == EINTR) continue;
      if ((flags & MSG_DONTWAIT) && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
      return -1;
    }
    pass_fd = -1;
    *sent += (size_t)count;
    size_t left = (size_t)count;
    while (iovcnt > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      iov++;
      iovcnt--;
    }
    if (iovcnt > 0) {
      iov->iov_base = (char*)iov->iov_base + left;
      iov->iov_len -= left;
    }
  }
  return 0;
}

#define MAX_IOV 8

/* The message's length prefix in prefix and, after it in all, the iovecs; the count of all's. */
static int framed(const struct iovec* iov, int iovcnt, uint8_t prefix[8], struct iovec* all, size_t* total) {
  uint64_t length = 0;
  for (int i = 0; i < iovcnt; i++) {
    length += iov[i].iov_len;
    all[i + 1] = iov[i];
  }
  for (int i = 0; i < 8; i++) prefix[i] = (uint8_t)(length >> (8 * i));
  all[0].iov_base = prefix;
  all[0].iov_len = 8;
  *total = 8 + length;
  return iovcnt + 1;
}

int transport_send(int fd, const struct iovec* iov, int iovcnt, int pass_fd) {
  struct iovec all[MAX_IOV + 1];
  uint8_t prefix[8];
  size_t total, sent;
  if (iovcnt > MAX_IOV) {
    errno = EINVAL;
    return -1;
  }
  return send_iov(fd, all, framed(iov, iovcnt, prefix, all, &total), pass_fd, 0, &sent);
}

int transport_send_now(int fd, const struct iovec* iov, int iovcnt, int pass_fd, uint8_t prefix[8],
                       size_t* sent) {
  struct iovec all[MAX_IOV + 1];
  size_t total;
  if (iovcnt > MAX_IOV) {
    errno = EINVAL;
    return -1;
  }
  return send_iov(fd, all, framed(iov, iovcnt, prefix, all, &total), pass_fd, MSG_DONTWAIT, sent);
}

int transport_send_bytes_now(int fd, const void* data, size_t len, int pass_fd, size_t* sent) {
  struct iovec iov = {(void*)data, len};
  return send_iov(fd, &iov, 1, pass_fd, MSG_DONTWAIT, sent);
}

int transport_nudge(int fd) {
  return transport_send(fd, NULL, 0, -1);
}

int transport_wait(int fd, uint64_t spin_ns, int timeout_ms) {
  struct pollfd entry = {fd, POLLIN, 0};
  if (spin_ns) {
    uint64_t deadline = now_ns() + spin_ns;
    do {
      int ready = poll(&entry, 1, 0);
      if (ready != 0) return ready < 0 ? -1 : 1;
    } while (now_ns() < deadline);
  }
  for (;;) {
    int ready = poll(&entry, 1, timeout_ms);
    if (ready >= 0) return ready > 0 ? 1 : 0;
    if (errno != EINTR) return -1;
  }
}

static void close_fds(struct msghdr* message, int* keep) {
  for (struct cmsghdr* cmsg = CMSG_FIRSTHDR(message); cmsg != NULL; cmsg = CMSG_NXTHDR(message, cmsg)) {
    if (cmsg->cmsg_level != SOL_SOCKET || cmsg->cmsg_type != SCM_RIGHTS) continue;
    size_t count = (cmsg->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; i++) {
      int fd;
      memcpy(&fd, CMSG_DATA(cmsg) + i * sizeof(int), sizeof(int));
      if (*keep < 0) *keep = fd;
      else close(fd); /* more than one: only the first is the arena's */
    }
  }
}

/* Reads exactly len bytes; the descriptors that come with them go to *received_fd. */
static int recv_exactly(int fd, uint8_t* at, size_t len, int* received_fd) {
  size_t got = 0;
  union {
    struct cmsghdr header;
    char space[CMSG_SPACE(4 * sizeof(int))];
  } control;
  while (got < len) {
    struct iovec iov = {at + got, len - got};
    struct msghdr message;
    memset(&message, 0, sizeof(message));
    message.msg_iov = &iov;
    message.msg_iovlen = 1;
    message.msg_control = control.space;
    message.msg_controllen = sizeof(control.space);
    ssize_t count = recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
    if (count < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (message.msg_controllen > 0) close_fds(&message, received_fd);
    if (count == 0) return got == 0 ? 1 : 2;
    got += (size_t)count;
  }
  return 0;
}

int transport_recv(int fd, struct wire_buf* buf, int* received_fd, const char** error) {
  uint8_t prefix[8];
  *received_fd = -1;
  buf->len = 0;
  int status = recv_exactly(fd, prefix, sizeof(prefix), received_fd);
  if (status == 1) return 1;
  if (status != 0) {
    *error = status < 0 ? "cannot read from the relay server's socket" : "the connection closed inside a message";
    return -1;
  }
  uint64_t length = 0;
  for (int i = 0; i < 8; i++) length |= (uint64_t)prefix[i] << (8 * i);
  if (length > WIRE_MAX_MESSAGE) {
    *error = "a message longer than the relay allows";
    return -1;
  }
  if (wire_buf_reserve(buf, (size_t)length) != 0) {
    *error = "out of memory for a message";
    return -1;
  }
  status = recv_exactly(fd, buf->data, (size_t)length, received_fd);
  if (status != 0) {
    *error = status < 0 ? "cannot read from the relay server's socket" : "the connection closed inside a message";
    return -1;
  }
  buf->len = (size_t)length;
  return 0;
}

#define SEALS (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

/* Allocates the pages of [start, end) of an arena mapped writable here, so that writing them
 * cannot fail: MADV_POPULATE_WRITE allocates and maps them in one pass (an error, not a signal,
 * when the system has no memory); posix_fallocate on kernels without it (about 4x slower here:
 * each page is then faulted in again by the write). 0, or an errno. */
static int allocate_pages(uint8_t* map, int fd, size_t start, size_t end) {
  size_t from = start - start % (size_t)sysconf(_SC_PAGESIZE);
  if (madvise(map + from, end - from, MADV_POPULATE_WRITE) == 0) return 0;
  if (errno != EINVAL) return errno;
  return posix_fallocate(fd, (off_t)start, (off_t)(end - start));
}

int arena_reserve(struct arena* arena, size_t needed, uint64_t limit, char* message, size_t message_len) {
  if (needed <= arena->reserved) return 0;
  if (needed <= arena->size) {
    /* pages arena_trim gave back: allocate them now, as for a new arena */
    int failed = allocate_pages(arena->map, arena->fd, arena->reserved, needed);
    if (failed) {
      snprintf(message, message_len, "a message needs %zu bytes of shared memory and the system cannot give them: %s",
               needed, strerror(failed));
      return -1;
    }
    arena->reserved = needed;
    return 0;
  }
  if (limit && needed > limit) {
    snprintf(message, message_len,
             "a message needs %zu bytes of shared memory, more than the relay's limit of %llu bytes"
             " (TritonConfig.shm_limit_bytes)",
             needed, (unsigned long long)limit);
    return -1;
  }
  size_t size = needed;
  if (arena->size && size < 2 * arena->size) size = 2 * arena->size;
  if (size < ((size_t)1 << 20)) size = (size_t)1 << 20;
  if (limit && size > limit) size = needed > limit ? needed : (size_t)limit;
  int fd = memfd_create("pytriton_like-arena", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (fd < 0) {
    snprintf(message, message_len, "cannot create shared memory: %s", strerror(errno));
    return -1;
  }
  void* map = MAP_FAILED;
  if (ftruncate(fd, (off_t)size) == 0 && fcntl(fd, F_ADD_SEALS, SEALS) == 0)
    map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    snprintf(message, message_len, "cannot map shared memory: %s", strerror(errno));
    close(fd);
    return -1;
  }
  /* Allocate the pages now: a write to a page the system cannot give would kill the server. The
   * rest of the size is address space only, allocated when a batch needs it. */
  int failed = allocate_pages(map, fd, 0, needed);
  if (failed) {
    snprintf(message, message_len, "a message needs %zu bytes of shared memory and the system cannot give them: %s",
             needed, strerror(failed));
    munmap(map, size);
    close(fd);
    return -1;
  }
  arena_free(arena);
  arena->map = map;
  arena->size = size;
  arena->pending_fd = fd;
  arena->fd = fd;
  arena->reserved = needed;
  return 0;
}

int arena_adopt(struct arena* arena, int fd, const char** error) {
  struct stat info;
  int seals = fcntl(fd, F_GET_SEALS);
  if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_SEAL)) != (F_SEAL_SHRINK | F_SEAL_SEAL)) {
    *error = "the relay server's arena is not sealed against shrinking";
    close(fd);
    return -1;
  }
  if (fstat(fd, &info) != 0 || info.st_size <= 0) {
    *error = "the relay server's arena is empty";
    close(fd);
    return -1;
  }
  void* map = mmap(NULL, (size_t)info.st_size, PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    close(fd);
    *error = "cannot map the relay server's arena";
    return -1;
  }
  arena_free(arena);
  arena->map = map;
  arena->size = (size_t)info.st_size;
  arena->fd = fd; /* kept: the backend gives the pages back once it has read them (arena_trim) */
  return 0;
}

void arena_trim(struct arena* arena) {
  if (arena->touched <= ARENA_KEEP || arena->fd < 0) return;
  size_t end = arena->touched < arena->size ? arena->touched : arena->size;
  if (end > ARENA_KEEP &&
      fallocate(arena->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)ARENA_KEEP, (off_t)(end - ARENA_KEEP)) != 0)
    return; /* the pages stay: a later trim tries again */
  arena->touched = ARENA_KEEP;
  if (arena->reserved > ARENA_KEEP) arena->reserved = ARENA_KEEP;
}

void arena_free(struct arena* arena) {
  if (arena->map != NULL) munmap(arena->map, arena->size);
  if (arena->fd >= 0) close(arena->fd);
  else if (arena->pending_fd >= 0) close(arena->pending_fd);
  arena->map = NULL;
  arena->size = 0;
  arena->pending_fd = -1;
  arena->fd = -1;
  arena->reserved = 0;
  arena->touched = 0;
}
