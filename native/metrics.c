/* The relay's metrics (metrics.h): counters incremented per batch straight from C. */
#include "metrics.h"

#include <stddef.h>
#include <stdio.h>

#include "log.h"

enum family { FAMILY_REQUESTS, FAMILY_BATCHES, FAMILY_FAILURES, FAMILY_CALLABLE_US, FAMILY_RELAY_US, FAMILY_COUNT };

static const struct {
  const char* name;
  const char* description;
} FAMILIES[FAMILY_COUNT] = {
    {"pytriton_like_requests", "Requests the relay handed to the callable's process"},
    {"pytriton_like_batches", "Batches (executions) the relay handed to the callable's process"},
    {"pytriton_like_request_failures",
     "Requests that failed, by where: the callable (raised, bad outputs) or the relay"},
    {"pytriton_like_callable_duration_us", "Time spent in the callable, microseconds"},
    {"pytriton_like_relay_duration_us",
     "Time the relay added to the callable's (the instance's execution time minus the callable's), microseconds"},
};

/* metric -> (family, reason label or NULL) */
static const struct {
  enum family family;
  const char* reason;
} METRICS[METRIC_COUNT] = {
    {FAMILY_REQUESTS, NULL},   {FAMILY_BATCHES, NULL},     {FAMILY_FAILURES, "callable"},
    {FAMILY_FAILURES, "relay"}, {FAMILY_CALLABLE_US, NULL}, {FAMILY_RELAY_US, NULL},
};

static TRITONSERVER_MetricFamily* families[FAMILY_COUNT];
static TRITONSERVER_MetricFamily* restarts_family;
static TRITONSERVER_Metric* restarts;

/* One series without labels: the restarts of tritonserver before this process, counted by the user
 * process's supervisor (a counter that goes on across restarts, as Prometheus expects of one). */
static void restarts_new(uint64_t server_restarts) {
  TRITONSERVER_Error* error =
      TRITONSERVER_MetricFamilyNew(&restarts_family, TRITONSERVER_METRIC_KIND_COUNTER, "pytriton_like_server_restarts",
                                   "Times tritonserver exited unexpectedly and was started again by pytriton_like");
  if (error != NULL) {
    relay_log(TRITONSERVER_LOG_WARN, __LINE__, "the restarts metric is off: %s", TRITONSERVER_ErrorMessage(error));
    TRITONSERVER_ErrorDelete(error);
    restarts_family = NULL;
    return;
  }
  if (relay_check(TRITONSERVER_MetricNew(&restarts, restarts_family, NULL, 0), __LINE__)) {
    restarts = NULL;
    return;
  }
  if (server_restarts > 0) relay_check(TRITONSERVER_MetricIncrement(restarts, (double)server_restarts), __LINE__);
}

void metrics_families_new(uint64_t server_restarts) {
  restarts_new(server_restarts);
  for (int i = 0; i < FAMILY_COUNT; i++) {
    TRITONSERVER_Error* error =
        TRITONSERVER_MetricFamilyNew(&families[i], TRITONSERVER_METRIC_KIND_COUNTER, FAMILIES[i].name,
                                     FAMILIES[i].description);
    if (error != NULL) {
      relay_log(TRITONSERVER_LOG_WARN, __LINE__, "the relay's metrics are off: %s", TRITONSERVER_ErrorMessage(error));
      TRITONSERVER_ErrorDelete(error);
      families[i] = NULL;
    }
  }
}

void metrics_families_delete(void) {
  if (restarts != NULL) relay_check(TRITONSERVER_MetricDelete(restarts), __LINE__);
  if (restarts_family != NULL) relay_check(TRITONSERVER_MetricFamilyDelete(restarts_family), __LINE__);
  restarts = NULL;
  restarts_family = NULL;
  for (int i = 0; i < FAMILY_COUNT; i++) {
    if (families[i] == NULL) continue;
    relay_check(TRITONSERVER_MetricFamilyDelete(families[i]), __LINE__);
    families[i] = NULL;
  }
}

void metrics_model_new(struct model_metrics* metrics, const char* model, const char* version, const char* worker) {
  for (int i = 0; i < METRIC_COUNT; i++) {
    metrics->metric[i] = NULL;
    TRITONSERVER_MetricFamily* family = families[METRICS[i].family];
    if (family == NULL) continue;
    const TRITONSERVER_Parameter* labels[4];
    uint64_t count = 0;
    labels[count++] = TRITONSERVER_ParameterNew("model", TRITONSERVER_PARAMETER_STRING, model);
    labels[count++] = TRITONSERVER_ParameterNew("version", TRITONSERVER_PARAMETER_STRING, version);
    if (worker != NULL) labels[count++] = TRITONSERVER_ParameterNew("worker", TRITONSERVER_PARAMETER_STRING, worker);
    if (METRICS[i].reason != NULL)
      labels[count++] = TRITONSERVER_ParameterNew("reason", TRITONSERVER_PARAMETER_STRING, METRICS[i].reason);
    int made = 1;
    for (uint64_t j = 0; j < count; j++) made &= labels[j] != NULL;
    if (made) relay_check(TRITONSERVER_MetricNew(&metrics->metric[i], family, labels, count), __LINE__);
    for (uint64_t j = 0; j < count; j++)
      if (labels[j] != NULL) TRITONSERVER_ParameterDelete((TRITONSERVER_Parameter*)labels[j]);
  }
}

void metrics_model_delete(struct model_metrics* metrics) {
  for (int i = 0; i < METRIC_COUNT; i++) {
    if (metrics->metric[i] != NULL) relay_check(TRITONSERVER_MetricDelete(metrics->metric[i]), __LINE__);
    metrics->metric[i] = NULL;
  }
}

void metrics_add(struct model_metrics* metrics, enum metric which, double value) {
  if (metrics->metric[which] != NULL && value > 0)
    relay_check(TRITONSERVER_MetricIncrement(metrics->metric[which], value), __LINE__);
}
