/* Triton's traces of the requests in flight, which their callables' nested calls continue: the
 * trace of a nested call's request is a child of its caller's request's trace, as a BLS request's
 * is of its Python model's. Only requests Triton traces are kept: none while tracing is off.
 *
 * A request with children in Triton's hands is given back to Triton only after the last of them:
 * Triton's front end keeps what a trace records into, shared with its children, until the last
 * trace it knows of is released, and it learns of a child only at the child's first event. */
#ifndef PYTRITON_LIKE_TRACES_H
#define PYTRITON_LIKE_TRACES_H

#include <stdint.h>

#include "triton_api.h"

/* Keeps the request's trace while the request is in flight; its id (what the relay server gets with
 * the request, and a nested call names as its parent), or 0 when Triton does not trace the request. */
uint64_t traces_add(TRITONBACKEND_Request* request);
/* Gives the request back to Triton (TRITONBACKEND_RequestRelease) once it is answered: now, or, while
 * nested calls traced as its children are in Triton's hands, when the last of them is done. */
void traces_release(TRITONBACKEND_Request* request);
/* A new child of the trace of that id, for a request to hand to TRITONSERVER_ServerInferAsync (which
 * takes it over); the parent's request is then held until traces_done(parent). NULL, and nothing held,
 * when parent is 0 or names no request in flight (it was given back meanwhile). */
TRITONSERVER_InferenceTrace* traces_child(uint64_t parent);
/* A request traced with a child of parent is done (Triton gave it back, or never took it). */
void traces_done(uint64_t parent);

#endif
