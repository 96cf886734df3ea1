/* The part of Triton's C API that the relay backend calls, declared from the documented
 * interface (include/triton/core/tritonbackend.h and tritonserver.h of Triton 2.51).
 * The functions are left undefined here: they resolve at load time against the
 * libtritonserver that the bundled tritonserver binary links. */
#ifndef PYTRITON_LIKE_TRITON_API_H
#define PYTRITON_LIKE_TRITON_API_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RELAY_EXPORT __attribute__((visibility("default")))

/* The API versions this backend was written against (Triton 2.51). A server whose major differs or
 * whose minor is older refuses it (TRITONBACKEND_Initialize). The minor may be set on the command
 * line (-DRELAY_BACKEND_API_MINOR=...): the test of that refusal builds a backend needing a newer one. */
#define RELAY_BACKEND_API_MAJOR 1
#ifndef RELAY_BACKEND_API_MINOR
#define RELAY_BACKEND_API_MINOR 19
#endif

typedef struct TRITONSERVER_Error TRITONSERVER_Error;
typedef struct TRITONSERVER_Parameter TRITONSERVER_Parameter;
typedef struct TRITONSERVER_Message TRITONSERVER_Message;
typedef struct TRITONSERVER_MetricFamily TRITONSERVER_MetricFamily;
typedef struct TRITONSERVER_Metric TRITONSERVER_Metric;
typedef struct TRITONBACKEND_Backend TRITONBACKEND_Backend;
typedef struct TRITONBACKEND_Model TRITONBACKEND_Model;
typedef struct TRITONBACKEND_ModelInstance TRITONBACKEND_ModelInstance;
typedef struct TRITONBACKEND_Request TRITONBACKEND_Request;
typedef struct TRITONBACKEND_Input TRITONBACKEND_Input;
typedef struct TRITONBACKEND_Output TRITONBACKEND_Output;
typedef struct TRITONBACKEND_Response TRITONBACKEND_Response;
typedef struct TRITONBACKEND_ResponseFactory TRITONBACKEND_ResponseFactory;
typedef struct TRITONSERVER_Server TRITONSERVER_Server;
typedef struct TRITONSERVER_InferenceRequest TRITONSERVER_InferenceRequest;
typedef struct TRITONSERVER_InferenceResponse TRITONSERVER_InferenceResponse;
typedef struct TRITONSERVER_InferenceTrace TRITONSERVER_InferenceTrace;
typedef struct TRITONSERVER_ResponseAllocator TRITONSERVER_ResponseAllocator;

/* Enumerations: the values are Triton's (declaration order in tritonserver.h). */
typedef enum {
  TRITONSERVER_TYPE_INVALID = 0, TRITONSERVER_TYPE_BOOL = 1, TRITONSERVER_TYPE_UINT8 = 2,
  TRITONSERVER_TYPE_UINT16 = 3, TRITONSERVER_TYPE_UINT32 = 4, TRITONSERVER_TYPE_UINT64 = 5,
  TRITONSERVER_TYPE_INT8 = 6, TRITONSERVER_TYPE_INT16 = 7, TRITONSERVER_TYPE_INT32 = 8,
  TRITONSERVER_TYPE_INT64 = 9, TRITONSERVER_TYPE_FP16 = 10, TRITONSERVER_TYPE_FP32 = 11,
  TRITONSERVER_TYPE_FP64 = 12, TRITONSERVER_TYPE_BYTES = 13, TRITONSERVER_TYPE_BF16 = 14
} TRITONSERVER_DataType;

typedef enum { TRITONSERVER_MEMORY_CPU = 0, TRITONSERVER_MEMORY_CPU_PINNED = 1, TRITONSERVER_MEMORY_GPU = 2 }
    TRITONSERVER_MemoryType;

typedef enum {
  TRITONSERVER_PARAMETER_STRING = 0, TRITONSERVER_PARAMETER_INT = 1, TRITONSERVER_PARAMETER_BOOL = 2,
  TRITONSERVER_PARAMETER_DOUBLE = 3, TRITONSERVER_PARAMETER_BYTES = 4
} TRITONSERVER_ParameterType;

typedef enum { TRITONSERVER_LOG_INFO = 0, TRITONSERVER_LOG_WARN = 1, TRITONSERVER_LOG_ERROR = 2, TRITONSERVER_LOG_VERBOSE = 3 }
    TRITONSERVER_LogLevel;

typedef enum {
  TRITONSERVER_ERROR_UNKNOWN = 0, TRITONSERVER_ERROR_INTERNAL = 1, TRITONSERVER_ERROR_NOT_FOUND = 2,
  TRITONSERVER_ERROR_INVALID_ARG = 3, TRITONSERVER_ERROR_UNAVAILABLE = 4, TRITONSERVER_ERROR_UNSUPPORTED = 5,
  TRITONSERVER_ERROR_ALREADY_EXISTS = 6, TRITONSERVER_ERROR_CANCELLED = 7
} TRITONSERVER_Error_Code;

typedef enum { TRITONSERVER_METRIC_KIND_COUNTER = 0, TRITONSERVER_METRIC_KIND_GAUGE = 1 } TRITONSERVER_MetricKind;

typedef enum { TRITONBACKEND_ARTIFACT_FILESYSTEM = 0 } TRITONBACKEND_ArtifactType;

#define TRITONSERVER_REQUEST_FLAG_SEQUENCE_START 1u
#define TRITONSERVER_REQUEST_FLAG_SEQUENCE_END 2u
#define TRITONSERVER_REQUEST_RELEASE_ALL 1u
#define TRITONSERVER_RESPONSE_COMPLETE_FINAL 1u

/* tritonserver.h */
TRITONSERVER_Error* TRITONSERVER_ErrorNew(TRITONSERVER_Error_Code code, const char* msg);
TRITONSERVER_Error* TRITONSERVER_MessageSerializeToJson(TRITONSERVER_Message* message, const char** base, size_t* byte_size);
void TRITONSERVER_ErrorDelete(TRITONSERVER_Error* error);
const char* TRITONSERVER_ErrorMessage(TRITONSERVER_Error* error);
bool TRITONSERVER_LogIsEnabled(TRITONSERVER_LogLevel level);
TRITONSERVER_Error* TRITONSERVER_LogMessage(TRITONSERVER_LogLevel level, const char* filename, const int line,
                                            const char* msg);
TRITONSERVER_Parameter* TRITONSERVER_ParameterNew(const char* name, const TRITONSERVER_ParameterType type,
                                                  const void* value);
void TRITONSERVER_ParameterDelete(TRITONSERVER_Parameter* parameter);
TRITONSERVER_Error* TRITONSERVER_MetricFamilyNew(TRITONSERVER_MetricFamily** family, const TRITONSERVER_MetricKind kind,
                                                 const char* name, const char* description);
TRITONSERVER_Error* TRITONSERVER_MetricFamilyDelete(TRITONSERVER_MetricFamily* family);
TRITONSERVER_Error* TRITONSERVER_MetricNew(TRITONSERVER_Metric** metric, TRITONSERVER_MetricFamily* family,
                                           const TRITONSERVER_Parameter** labels, const uint64_t label_count);
TRITONSERVER_Error* TRITONSERVER_MetricDelete(TRITONSERVER_Metric* metric);
TRITONSERVER_Error* TRITONSERVER_MetricIncrement(TRITONSERVER_Metric* metric, double value);

/* tritonserver.h: running an inference request in Triton's core (nested calls, calls.h) */
TRITONSERVER_Error_Code TRITONSERVER_ErrorCode(TRITONSERVER_Error* error);
TRITONSERVER_Error* TRITONSERVER_MessageDelete(TRITONSERVER_Message* message);
typedef TRITONSERVER_Error* (*TRITONSERVER_ResponseAllocatorAllocFn_t)(
    TRITONSERVER_ResponseAllocator* allocator, const char* tensor_name, size_t byte_size,
    TRITONSERVER_MemoryType memory_type, int64_t memory_type_id, void* userp, void** buffer, void** buffer_userp,
    TRITONSERVER_MemoryType* actual_memory_type, int64_t* actual_memory_type_id);
typedef TRITONSERVER_Error* (*TRITONSERVER_ResponseAllocatorReleaseFn_t)(
    TRITONSERVER_ResponseAllocator* allocator, void* buffer, void* buffer_userp, size_t byte_size,
    TRITONSERVER_MemoryType memory_type, int64_t memory_type_id);
typedef TRITONSERVER_Error* (*TRITONSERVER_ResponseAllocatorStartFn_t)(TRITONSERVER_ResponseAllocator* allocator,
                                                                       void* userp);
typedef void (*TRITONSERVER_InferenceRequestReleaseFn_t)(TRITONSERVER_InferenceRequest* request, const uint32_t flags,
                                                         void* userp);
typedef void (*TRITONSERVER_InferenceResponseCompleteFn_t)(TRITONSERVER_InferenceResponse* response,
                                                           const uint32_t flags, void* userp);
TRITONSERVER_Error* TRITONSERVER_ResponseAllocatorNew(TRITONSERVER_ResponseAllocator** allocator,
                                                      TRITONSERVER_ResponseAllocatorAllocFn_t alloc_fn,
                                                      TRITONSERVER_ResponseAllocatorReleaseFn_t release_fn,
                                                      TRITONSERVER_ResponseAllocatorStartFn_t start_fn);
TRITONSERVER_Error* TRITONSERVER_ResponseAllocatorDelete(TRITONSERVER_ResponseAllocator* allocator);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestNew(TRITONSERVER_InferenceRequest** request,
                                                     TRITONSERVER_Server* server, const char* model_name,
                                                     const int64_t model_version);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestDelete(TRITONSERVER_InferenceRequest* request);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetId(TRITONSERVER_InferenceRequest* request, const char* id);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetFlags(TRITONSERVER_InferenceRequest* request, uint32_t flags);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetCorrelationId(TRITONSERVER_InferenceRequest* request,
                                                                  uint64_t correlation_id);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetCorrelationIdString(TRITONSERVER_InferenceRequest* request,
                                                                        const char* correlation_id);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestCancel(TRITONSERVER_InferenceRequest* request);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestAddInput(TRITONSERVER_InferenceRequest* request, const char* name,
                                                          const TRITONSERVER_DataType datatype, const int64_t* shape,
                                                          uint64_t dim_count);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestAppendInputData(TRITONSERVER_InferenceRequest* request,
                                                                 const char* name, const void* base, size_t byte_size,
                                                                 TRITONSERVER_MemoryType memory_type,
                                                                 int64_t memory_type_id);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestAddRequestedOutput(TRITONSERVER_InferenceRequest* request,
                                                                    const char* name);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetReleaseCallback(TRITONSERVER_InferenceRequest* request,
                                                                    TRITONSERVER_InferenceRequestReleaseFn_t release_fn,
                                                                    void* release_userp);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetResponseCallback(
    TRITONSERVER_InferenceRequest* request, TRITONSERVER_ResponseAllocator* allocator, void* allocator_userp,
    TRITONSERVER_InferenceResponseCompleteFn_t response_fn, void* response_userp);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetStringParameter(TRITONSERVER_InferenceRequest* request,
                                                                    const char* key, const char* value);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetIntParameter(TRITONSERVER_InferenceRequest* request,
                                                                 const char* key, const int64_t value);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetBoolParameter(TRITONSERVER_InferenceRequest* request,
                                                                  const char* key, const bool value);
TRITONSERVER_Error* TRITONSERVER_InferenceRequestSetDoubleParameter(TRITONSERVER_InferenceRequest* request,
                                                                    const char* key, const double value);
TRITONSERVER_Error* TRITONSERVER_InferenceResponseDelete(TRITONSERVER_InferenceResponse* response);
TRITONSERVER_Error* TRITONSERVER_InferenceResponseError(TRITONSERVER_InferenceResponse* response);
TRITONSERVER_Error* TRITONSERVER_InferenceResponseOutputCount(TRITONSERVER_InferenceResponse* response,
                                                              uint32_t* count);
TRITONSERVER_Error* TRITONSERVER_InferenceResponseOutput(TRITONSERVER_InferenceResponse* response,
                                                         const uint32_t index, const char** name,
                                                         TRITONSERVER_DataType* datatype, const int64_t** shape,
                                                         uint64_t* dim_count, const void** base, size_t* byte_size,
                                                         TRITONSERVER_MemoryType* memory_type,
                                                         int64_t* memory_type_id, void** userp);
TRITONSERVER_Error* TRITONSERVER_ServerModelIsReady(TRITONSERVER_Server* server, const char* model_name,
                                                    const int64_t model_version, bool* ready);
TRITONSERVER_Error* TRITONSERVER_ServerModelConfig(TRITONSERVER_Server* server, const char* model_name,
                                                   const int64_t model_version, const uint32_t config_version,
                                                   TRITONSERVER_Message** model_config);
TRITONSERVER_Error* TRITONSERVER_ServerInferAsync(TRITONSERVER_Server* server, TRITONSERVER_InferenceRequest* request,
                                                  TRITONSERVER_InferenceTrace* trace);
TRITONSERVER_Error* TRITONSERVER_InferenceTraceId(TRITONSERVER_InferenceTrace* trace, uint64_t* id);
TRITONSERVER_Error* TRITONSERVER_InferenceTraceSpawnChildTrace(TRITONSERVER_InferenceTrace* trace,
                                                              TRITONSERVER_InferenceTrace** child_trace);

/* tritonbackend.h: what Triton provides */
TRITONSERVER_Error* TRITONBACKEND_ModelServer(TRITONBACKEND_Model* model, TRITONSERVER_Server** server);
TRITONSERVER_Error* TRITONBACKEND_ApiVersion(uint32_t* major, uint32_t* minor);
/* The --backend-config options of this backend, as JSON {"cmdline": {"key": "value", ...}}; owned by Triton. */
TRITONSERVER_Error* TRITONBACKEND_BackendConfig(TRITONBACKEND_Backend* backend, TRITONSERVER_Message** backend_config);
TRITONSERVER_Error* TRITONBACKEND_ModelName(TRITONBACKEND_Model* model, const char** name);
TRITONSERVER_Error* TRITONBACKEND_ModelVersion(TRITONBACKEND_Model* model, uint64_t* version);
TRITONSERVER_Error* TRITONBACKEND_ModelRepository(TRITONBACKEND_Model* model, TRITONBACKEND_ArtifactType* artifact_type,
                                                  const char** location);
TRITONSERVER_Error* TRITONBACKEND_ModelState(TRITONBACKEND_Model* model, void** state);
TRITONSERVER_Error* TRITONBACKEND_ModelSetState(TRITONBACKEND_Model* model, void* state);
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceName(TRITONBACKEND_ModelInstance* instance, const char** name);
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceModel(TRITONBACKEND_ModelInstance* instance, TRITONBACKEND_Model** model);
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceState(TRITONBACKEND_ModelInstance* instance, void** state);
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceSetState(TRITONBACKEND_ModelInstance* instance, void* state);
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportStatistics(TRITONBACKEND_ModelInstance* instance,
                                                                TRITONBACKEND_Request* request, const bool success,
                                                                const uint64_t exec_start_ns,
                                                                const uint64_t compute_start_ns,
                                                                const uint64_t compute_end_ns,
                                                                const uint64_t exec_end_ns);
TRITONSERVER_Error* TRITONBACKEND_ModelInstanceReportBatchStatistics(TRITONBACKEND_ModelInstance* instance,
                                                                     const uint64_t batch_size,
                                                                     const uint64_t exec_start_ns,
                                                                     const uint64_t compute_start_ns,
                                                                     const uint64_t compute_end_ns,
                                                                     const uint64_t exec_end_ns);
TRITONSERVER_Error* TRITONBACKEND_RequestCorrelationId(TRITONBACKEND_Request* request, uint64_t* id);
TRITONSERVER_Error* TRITONBACKEND_RequestCorrelationIdString(TRITONBACKEND_Request* request, const char** id);
TRITONSERVER_Error* TRITONBACKEND_RequestFlags(TRITONBACKEND_Request* request, uint32_t* flags);
TRITONSERVER_Error* TRITONBACKEND_RequestIsCancelled(TRITONBACKEND_Request* request, bool* is_cancelled);
TRITONSERVER_Error* TRITONBACKEND_RequestParameterCount(TRITONBACKEND_Request* request, uint32_t* count);
TRITONSERVER_Error* TRITONBACKEND_RequestParameter(TRITONBACKEND_Request* request, const uint32_t index,
                                                   const char** key, TRITONSERVER_ParameterType* type,
                                                   const void** vvalue);
TRITONSERVER_Error* TRITONBACKEND_RequestInputCount(TRITONBACKEND_Request* request, uint32_t* count);
TRITONSERVER_Error* TRITONBACKEND_RequestInputByIndex(TRITONBACKEND_Request* request, const uint32_t index,
                                                      TRITONBACKEND_Input** input);
TRITONSERVER_Error* TRITONBACKEND_RequestOutputCount(TRITONBACKEND_Request* request, uint32_t* count);
TRITONSERVER_Error* TRITONBACKEND_RequestOutputName(TRITONBACKEND_Request* request, const uint32_t index,
                                                    const char** output_name);
TRITONSERVER_Error* TRITONBACKEND_RequestRelease(TRITONBACKEND_Request* request, uint32_t release_flags);
TRITONSERVER_Error* TRITONBACKEND_RequestTrace(TRITONBACKEND_Request* request, TRITONSERVER_InferenceTrace** trace);
TRITONSERVER_Error* TRITONBACKEND_InputProperties(TRITONBACKEND_Input* input, const char** name,
                                                  TRITONSERVER_DataType* datatype, const int64_t** shape,
                                                  uint32_t* dims_count, uint64_t* byte_size, uint32_t* buffer_count);
TRITONSERVER_Error* TRITONBACKEND_InputBuffer(TRITONBACKEND_Input* input, const uint32_t index, const void** buffer,
                                              uint64_t* buffer_byte_size, TRITONSERVER_MemoryType* memory_type,
                                              int64_t* memory_type_id);
TRITONSERVER_Error* TRITONBACKEND_OutputBuffer(TRITONBACKEND_Output* output, void** buffer,
                                               const uint64_t buffer_byte_size, TRITONSERVER_MemoryType* memory_type,
                                               int64_t* memory_type_id);
TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryNew(TRITONBACKEND_ResponseFactory** factory,
                                                     TRITONBACKEND_Request* request);
TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryDelete(TRITONBACKEND_ResponseFactory* factory);
TRITONSERVER_Error* TRITONBACKEND_ResponseFactorySendFlags(TRITONBACKEND_ResponseFactory* factory,
                                                           const uint32_t send_flags);
TRITONSERVER_Error* TRITONBACKEND_ResponseFactoryIsCancelled(TRITONBACKEND_ResponseFactory* factory,
                                                             bool* is_cancelled);
TRITONSERVER_Error* TRITONBACKEND_ResponseNew(TRITONBACKEND_Response** response, TRITONBACKEND_Request* request);
TRITONSERVER_Error* TRITONBACKEND_ResponseNewFromFactory(TRITONBACKEND_Response** response,
                                                         TRITONBACKEND_ResponseFactory* factory);
TRITONSERVER_Error* TRITONBACKEND_ResponseDelete(TRITONBACKEND_Response* response);
TRITONSERVER_Error* TRITONBACKEND_ResponseOutput(TRITONBACKEND_Response* response, TRITONBACKEND_Output** output,
                                                 const char* name, const TRITONSERVER_DataType datatype,
                                                 const int64_t* shape, const uint32_t dims_count);
TRITONSERVER_Error* TRITONBACKEND_ResponseSend(TRITONBACKEND_Response* response, const uint32_t send_flags,
                                               TRITONSERVER_Error* error);

/* tritonbackend.h: what this backend implements */
RELAY_EXPORT TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend);
RELAY_EXPORT TRITONSERVER_Error* TRITONBACKEND_Finalize(TRITONBACKEND_Backend* backend);
RELAY_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model);
RELAY_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model);
RELAY_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance);
RELAY_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance);
RELAY_EXPORT TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                                    TRITONBACKEND_Request** requests,
                                                                    const uint32_t request_count);

#endif
