/* Triton's traces of the requests in flight, which their callables' nested calls continue: the
 * trace of a nested call's request is a child of its caller's request's trace, as a BLS request's
 * is of its Python model's. Only requests Triton traces are kept: none while tracing is off. */
#ifndef PYTRITON_LIKE_TRACES_H
#define PYTRITON_LIKE_TRACES_H

#include <stdint.h>

#include "triton_api.h"

/* Keeps the request's trace while the request is in flight; its id (what the relay server gets with
 * the request, and a nested call names as its parent), or 0 when Triton does not trace the request. */
uint64_t traces_add(TRITONBACKEND_Request* request);
/* Forgets the request's trace, before the request is given back to Triton (which ends the trace). */
void traces_remove(TRITONBACKEND_Request* request);
/* TRITONSERVER_ServerInferAsync(server, request, trace), where trace is a new child of the trace of that
 * id when its request is still in flight (else none: it was answered meanwhile, or parent is 0). The
 * parent's request is not given back before Triton has taken the request and its trace. */
TRITONSERVER_Error* traces_infer(uint64_t parent, TRITONSERVER_Server* server, TRITONSERVER_InferenceRequest* request);

#endif
