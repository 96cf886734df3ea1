/* What the two halves of nested calls share (calls.h): a caller's connection, read by the
 * listener's thread (call_listener.c), and the call in flight on it, run in Triton's core
 * (call_request.c) and answered from Triton's threads (call_reply.c). */
#ifndef PYTRITON_LIKE_CALL_CONN_H
#define PYTRITON_LIKE_CALL_CONN_H

#include <pthread.h>
#include <stdint.h>

#include "transport.h"
#include "triton_api.h"
#include "wire.h"

struct nested_call;

/* One caller's connection. Its arenas change only between calls (the listener's thread, no call
 * in flight); lock guards the rest and every send. */
struct call_conn {
  int fd;
  pthread_mutex_t lock;
  int refs;         /* the listener's while it reads the connection, and one for the call in flight */
  int closed;       /* the caller went away (or the backend stops): nothing more is sent */
  int welcomed;     /* HELLO came and was accepted */
  uint64_t threshold; /* outputs of this many bytes and more go into the arena (0: none do) */
  uint64_t shm_limit; /* the largest arena (0: no limit) */
  struct arena in;  /* the caller's: large inputs, read by Triton in place */
  struct arena outs[WIRE_CALL_ARENAS]; /* ours: large outputs, written by Triton's backends in place */
  struct wire_buf rx;    /* the message being read */
  struct wire_buf spare; /* a message buffer for the next call (the last call's, given back) */
  struct wire_buf queue; /* bytes the socket did not take yet (call_send.c), from queue_sent on */
  size_t queue_sent;
  int queue_fd;          /* a descriptor to send with the queue's byte at queue_fd_at, or -1 */
  size_t queue_fd_at;
  int epoll_fd;          /* the listener's, which wakes for the socket's room while the queue holds bytes */
  pthread_cond_t room;   /* signalled as the queue's bytes go (or the connection closes) */
  struct timespec queue_progress; /* when the caller last took some (CLOCK_MONOTONIC) */
  struct nested_call* call; /* in flight, or NULL */
  struct call_conn* next;   /* the listener's list */
};

/* A call in flight: done once Triton gave its request back and sent its last response (both
 * are needed before the caller may reuse its arena or send another call). */
struct nested_call {
  struct call_conn* conn;
  uint64_t id;
  int stream;                             /* a decoupled model's: responses streamed, tensors inline */
  TRITONSERVER_InferenceRequest* request; /* NULL once given back */
  struct wire_buf msg;                    /* the CALL: its inline tensors are the inputs Triton reads */
  struct wire_buf reply;                  /* the reply being built; a last one waits here for the release */
  struct wire_buf data;                   /* its inline tensors */
  struct wire_buf text;                   /* NUL-terminated copies handed to Triton */
  int final_waits;  /* the last response came before the request was given back: reply holds it */
  int reply_fd;     /* the new output arena's descriptor for the reply, or -1 */
  struct arena* out; /* the output arena of this call (one the caller does not hold), or NULL: inline */
  uint32_t out_index; /* its index in conn->outs */
  size_t arena_used; /* bytes of the output arena this call's outputs use */
  size_t overflow;   /* bytes of large outputs that did not fit the arena: placed in it at the reply */
  size_t in_touched; /* bytes of conn->in this call's inputs use */
  uint64_t trace_parent; /* the trace its request's trace is a child of (traces.h), or 0 */
  const void* made;  /* its request while Triton holds it (calls_made), or NULL */
  struct nested_call* made_next;
};

/* call_request.c */
/* Builds the CALL in call->msg into a request and hands it to Triton; on an error nothing of it is
 * left in Triton's hands (call->request NULL) and the caller answers it (call_fail). */
TRITONSERVER_Error* call_start(struct nested_call* call, TRITONSERVER_Server* server,
                               TRITONSERVER_ResponseAllocator* allocator);

/* call_reply.c */
TRITONSERVER_Error* call_allocator_new(TRITONSERVER_ResponseAllocator** allocator);
/* Triton's response callback of a nested call's request. */
void call_on_response(TRITONSERVER_InferenceResponse* response, const uint32_t flags, void* userp);
/* Sends call->reply (and its data), FINAL when final (conn->lock held). */
void send_reply(struct nested_call* call, int final);
/* Fails a call that never reached Triton: a FINAL REPLY, and the call freed. */
void call_fail(struct nested_call* call, TRITONSERVER_Error_Code code, const char* message);

/* call_listener.c */
/* The call is done (conn->lock held, before its last reply goes): the connection may take another. */
void call_detach_locked(struct nested_call* call);
/* Frees a detached call, and the connection if it held it last. */
void call_free(struct nested_call* call);

/* call_send.c */
/* Sends a message on the connection, or queues what the socket does not take now (conn->lock
 * held); nothing when it is closed. pass_fd is lent: the queue keeps a copy of it. */
void conn_send_locked(struct call_conn* conn, const struct iovec* iov, int iovcnt, int pass_fd);
/* Waits, while more than CALL_QUEUE_MAX bytes are queued, for the caller to read (conn->lock held,
 * released meanwhile: a callback calls it first, before it reads or changes the call); drops a
 * caller that reads nothing for CALL_QUEUE_STALL_S. Not on the listener's thread. */
void conn_wait_room_locked(struct call_conn* conn);
void conn_room_init(struct call_conn* conn);
/* Marks the calling thread as the listener's, which never waits in conn_wait_room_locked. */
void conn_send_from_listener(void);
/* Sends what the queue holds, as the socket takes it (the listener's thread, when it has room). */
void conn_send_queued(struct call_conn* conn);

#endif
