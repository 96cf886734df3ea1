/* The relay's own Prometheus metrics on Triton's metrics endpoint (docs/metrics.md). */
#ifndef PYTRITON_LIKE_METRICS_H
#define PYTRITON_LIKE_METRICS_H

#include "triton_api.h"

enum metric {
  METRIC_REQUESTS,
  METRIC_BATCHES,
  METRIC_CALLABLE_FAILURES,
  METRIC_RELAY_FAILURES,
  METRIC_CALLABLE_US,
  METRIC_RELAY_US,
  METRIC_COUNT
};

/* One model version's counters (labels model and version, and worker for a model served by worker
 * processes: one series per worker process); all NULL when metrics are off. */
struct model_metrics {
  TRITONSERVER_Metric* metric[METRIC_COUNT];
};

/* The families, once per backend (a family's series vanish when it is deleted); server_restarts: how
 * many times the user process started tritonserver again (--backend-config server-restarts). */
void metrics_families_new(uint64_t server_restarts);
void metrics_families_delete(void);
/* worker: the worker process's index as text, or NULL for the model's series. */
void metrics_model_new(struct model_metrics* metrics, const char* model, const char* version, const char* worker);
void metrics_model_delete(struct model_metrics* metrics);
void metrics_add(struct model_metrics* metrics, enum metric which, double value);

#endif
