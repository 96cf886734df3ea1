/* The relay's transport, C side: a Unix stream socket to the relay server carrying length-prefixed
 * messages (wire.h), and shared-memory arenas (sealed memfds) whose descriptors travel over the
 * same socket (SCM_RIGHTS): nothing of them is ever named in /dev/shm, so nothing can be left there. */
#ifndef PYTRITON_LIKE_TRANSPORT_H
#define PYTRITON_LIKE_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "wire.h"

/* Connects to the Unix socket at path; the descriptor, or -1 with errno set. */
int transport_connect(const char* path);

/* Sends one message: a u64 length (the sum of the iovecs' lengths), then the iovecs, with
 * pass_fd (when >= 0) attached. 0, or -1 with errno set (EPIPE: the relay server is gone). */
int transport_send(int fd, const struct iovec* iov, int iovcnt, int pass_fd);

/* As transport_send, but only what the socket takes now: 0 with *sent the bytes that went (of the
 * 8-byte length prefix, left in prefix, then the iovecs; pass_fd went if *sent > 0), or -1. */
int transport_send_now(int fd, const struct iovec* iov, int iovcnt, int pass_fd, uint8_t prefix[8],
                       size_t* sent);

/* len bytes of a message (framed already), as much as the socket takes now: as transport_send_now. */
int transport_send_bytes_now(int fd, const void* data, size_t len, int pass_fd, size_t* sent);

/* A message of length 0, telling the relay server a batch follows shortly. */
int transport_nudge(int fd);

/* Waits until fd is readable: polls without sleeping for spin_ns first, then sleeps up to
 * timeout_ms (-1: no limit). 1 readable, 0 timed out, -1 error. */
int transport_wait(int fd, uint64_t spin_ns, int timeout_ms);

/* Receives one message into buf (its len set to the message's). *received_fd is a descriptor
 * that came with it, or -1. 0 on success, 1 when the peer closed the connection between
 * messages, -1 on error with *error set (a closed connection inside a message, a length over
 * WIRE_MAX_MESSAGE, out of memory). */
int transport_recv(int fd, struct wire_buf* buf, int* received_fd, const char** error);

/* A shared-memory arena: one sealed memfd mapped here, read or written by one batch at a time. */
struct arena {
  uint8_t* map;
  size_t size;
  int pending_fd;  /* the descriptor still to send to the peer (fd itself), or -1 */
  int fd;          /* the arena's descriptor, kept to give pages back (arena_trim), or -1 */
  size_t reserved; /* bytes from the start whose pages are allocated (ours: what arena_reserve made sure of) */
  size_t touched;  /* bytes from the start a batch may have used since the last arena_trim */
};

#define ARENA_INIT {NULL, 0, -1, -1, 0, 0}

/* The pages an arena keeps between batches: those beyond it are given back after each batch that
 * used them, so an arena that grew for one large request holds no more than this once it is done.
 * pytriton_like/relay/shm.py (ARENA_KEEP_BYTES) says the same to the relay server. */
#define ARENA_KEEP ((size_t)16 << 20)

/* Makes sure the arena holds needed bytes, replacing it with a larger one when it does not
 * (the new one's descriptor is left in pending_fd), and that their pages are allocated (again, after
 * arena_trim). limit 0: no limit. 0, or -1 with a message. */
int arena_reserve(struct arena* arena, size_t needed, uint64_t limit, char* message, size_t message_len);

/* Maps a descriptor received from the peer (read-only), replacing the arena's mapping; takes fd.
 * Refuses one that is not sealed against shrinking (reading it could then kill the server). */
int arena_adopt(struct arena* arena, int fd, const char** error);

/* Gives back the pages of the arena from ARENA_KEEP to touched (a hole punched in the memfd: both
 * processes' mappings keep their size and read zeros there until written again). */
void arena_trim(struct arena* arena);

void arena_free(struct arena* arena);

#endif
