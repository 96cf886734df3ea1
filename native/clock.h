/* The monotonic clock the backend times with, in nanoseconds (as Triton's statistics take them). */
#ifndef PYTRITON_LIKE_CLOCK_H
#define PYTRITON_LIKE_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
