"""OpenTelemetry spans around the inference callables, in the user's process (optional).

With ``opentelemetry`` installed and a tracer chosen — :func:`set_telemetry_tracer` (PyTriton's
``pytriton.proxy.telemetry.set_telemetry_tracer``), or Triton's own trace settings
``["mode=opentelemetry", "opentelemetry,url=...", ...]`` in ``bind(trace_config=...)`` /
``TritonConfig.trace_config`` — every request a bound callable handles gets a span
``proxy_inference_callable`` (PyTriton's name) with the model's name and version, ended when the
callable answered the request, marked ERROR with the exception when it failed. The callable sees
it as ``request.span`` and opens child spans with ``request.traced_span(name)``; while it handles
a batch of one request, that request's span is the current one. A request whose parameters carry
a W3C ``traceparent`` (e.g. a client header forwarded by ``http_header_forward_pattern``, or a
nested call of a traced callable: :func:`carry_trace`) continues that trace. Without a tracer
nothing changes and nothing of OpenTelemetry is imported. See docs/tracing.md.
"""

import contextlib
import functools
import importlib.util
import inspect
import logging
import threading
from typing import Any, Callable, Dict, List, Optional

__all__ = [
    "set_telemetry_tracer",
    "get_telemetry_tracer",
    "build_proxy_tracer_from_triton_config",
    "model_tracer",
    "traced",
    "carry_trace",
]

logger = logging.getLogger(__name__)

SPAN_NAME = "proxy_inference_callable"
_PIP = "pip install opentelemetry-api opentelemetry-sdk opentelemetry-exporter-otlp"

_lock = threading.Lock()
_tracer: Optional[Any] = None


def set_telemetry_tracer(tracer: Any) -> None:
    """Set the OpenTelemetry tracer the spans of every model bound from now on use (once per process).

    A tracer set here does not reach spawned worker processes (``bind(..., workers=N)``): they
    build theirs from the model's ``trace_config``.

    Args:
        tracer: an OpenTelemetry tracer, e.g. ``opentelemetry.trace.get_tracer(__name__)`` of a
            configured provider.

    Raises:
        ValueError: a tracer was set already (as PyTriton).

    Example:
        >>> from opentelemetry import trace                                 # doctest: +SKIP
        >>> set_telemetry_tracer(trace.get_tracer("my-service"))            # doctest: +SKIP
    """
    global _tracer
    with _lock:
        if _tracer is not None:
            raise ValueError("Telemetry tracer is already set")
        _tracer = tracer


def get_telemetry_tracer() -> Optional[Any]:
    """The tracer set by :func:`set_telemetry_tracer` (or built from a trace config), else None."""
    return _tracer


def _reset_telemetry_tracer() -> None:
    """Forget the tracer (tests)."""
    global _tracer
    with _lock:
        _tracer = None


def build_proxy_tracer_from_triton_config(trace_config: List[str]) -> Any:
    """A tracer exporting over OTLP/HTTP to the ``opentelemetry,url=`` of Triton's trace settings.

    ``opentelemetry,resource=key=value`` items become the resource's attributes (``service.name``...).

    Args:
        trace_config: Triton's trace settings, e.g. ``["mode=opentelemetry",
            "opentelemetry,url=http://collector:4318/v1/traces"]``.

    Raises:
        ImportError: opentelemetry (api, sdk, OTLP exporter) is not installed.
        ValueError: the settings do not say ``mode=opentelemetry`` or give no url.
    """
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        raise ImportError(f"OpenTelemetry is not installed. Please install it using '{_PIP}'.")
    if not any("mode=opentelemetry" in item for item in trace_config):
        raise ValueError("Only opentelemetry mode is supported")
    url = next((item.split("opentelemetry,url=", 1)[1] for item in trace_config if "opentelemetry,url=" in item), None)
    if url is None:
        raise ValueError("opentelemetry,url is required")
    attributes = {}
    for item in trace_config:
        if item.startswith("opentelemetry,resource="):
            for pair in item.split("opentelemetry,resource=", 1)[1].split(","):
                key, _, value = pair.partition("=")
                attributes[key] = value
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # noqa: PLC0415
    from opentelemetry.sdk.resources import Resource  # noqa: PLC0415
    from opentelemetry.sdk.trace import TracerProvider  # noqa: PLC0415
    from opentelemetry.sdk.trace.export import BatchSpanProcessor  # noqa: PLC0415

    provider = TracerProvider(resource=Resource(attributes=attributes))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=url)))
    return provider.get_tracer(__name__)


def model_tracer(trace_config: Optional[List[str]]) -> Optional[Any]:
    """The tracer a model bound with ``trace_config`` uses: the one set, else one built from an
    OpenTelemetry trace config (and set, as PyTriton does), else None (no spans).

    Args:
        trace_config: the model's trace settings (``bind(trace_config=...)``, else
            ``TritonConfig.trace_config``), or ``None``.

    Raises:
        ImportError: the settings ask for OpenTelemetry and it is not installed.
    """
    global _tracer
    if _tracer is not None:
        return _tracer
    if not trace_config or not any("mode=opentelemetry" in item for item in trace_config):
        return None
    tracer = build_proxy_tracer_from_triton_config(trace_config)
    with _lock:
        if _tracer is None:
            _tracer = tracer
        return _tracer


def traced(infer_func: Callable, tracer: Any, model_name: str, model_version: int) -> Callable:
    """``infer_func`` with a span per request around each call; the same kind of callable
    (function, coroutine function, generator or async generator function).

    Args:
        infer_func: the inference callable to wrap.
        tracer: the OpenTelemetry tracer that starts the spans.
        model_name: the model's name, a span attribute (``pytriton_like.model_name``).
        model_version: the model's version, a span attribute (``pytriton_like.model_version``).
    """
    attributes = {"pytriton_like.model_name": model_name, "pytriton_like.model_version": model_version}

    def start(requests):
        spans = []
        for request in requests:
            span = tracer.start_span(SPAN_NAME, context=_parent_context(request), attributes=attributes)
            _set_span(request, span, tracer)
            spans.append(span)
        return spans

    def end(spans, error: Optional[BaseException] = None):
        for span in spans:
            if error is not None:
                from opentelemetry.trace import Status, StatusCode  # noqa: PLC0415 - installed when spans exist

                span.record_exception(error)
                span.set_status(Status(StatusCode.ERROR, str(error)))
            span.end()

    call = getattr(infer_func, "__call__", None)
    if inspect.isasyncgenfunction(infer_func) or inspect.isasyncgenfunction(call):

        async def agen_wrapper(requests, *args, **kwargs):
            spans = start(requests)
            generator = infer_func(requests, *args, **kwargs)
            try:
                while True:
                    with _current(spans):
                        try:
                            responses = await generator.__anext__()
                        except StopAsyncIteration:
                            break
                    yield responses
            except BaseException as exc:
                await generator.aclose()
                end(spans, exc)
                raise
            end(spans)

        return functools.wraps(infer_func)(agen_wrapper)
    if inspect.iscoroutinefunction(infer_func) or inspect.iscoroutinefunction(call):

        async def coro_wrapper(requests, *args, **kwargs):
            spans = start(requests)
            try:
                with _current(spans):
                    result = await infer_func(requests, *args, **kwargs)
            except BaseException as exc:
                end(spans, exc)
                raise
            end(spans)
            return result

        return functools.wraps(infer_func)(coro_wrapper)
    if inspect.isgeneratorfunction(infer_func) or inspect.isgeneratorfunction(call):

        def gen_wrapper(requests, *args, **kwargs):
            spans = start(requests)
            generator = infer_func(requests, *args, **kwargs)
            try:
                while True:
                    with _current(spans):
                        try:
                            responses = next(generator)
                        except StopIteration:
                            break
                    yield responses
            except BaseException as exc:
                generator.close()
                end(spans, exc)
                raise
            end(spans)

        return functools.wraps(infer_func)(gen_wrapper)

    def wrapper(requests, *args, **kwargs):
        spans = start(requests)
        try:
            with _current(spans):
                result = infer_func(requests, *args, **kwargs)
        except BaseException as exc:
            end(spans, exc)
            raise
        end(spans)
        return result

    return functools.wraps(infer_func)(wrapper)


def carry_trace(parameters: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """A call's parameters with the W3C ``traceparent`` of the span current in this thread or task
    among them, so that the called model's spans continue its trace. Nested calls add it
    themselves; a client made with a url adds it with ``parameters=carry_trace(...)``.

    Parameters that carry a ``traceparent`` already, no tracer, or no current span: ``parameters``
    as they are (nothing of OpenTelemetry is imported without a tracer).
    """
    if _tracer is None or (parameters and "traceparent" in parameters):
        return parameters
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator  # noqa: PLC0415

    carrier: Dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    if "traceparent" not in carrier:
        return parameters
    return {"traceparent": carrier["traceparent"], **(parameters or {})}


def _current(spans: List[Any]) -> Any:
    """The span of a batch of one request made current while the callable runs (a nested call
    carries it: :func:`carry_trace`); a batch of several has no current span of ours."""
    if len(spans) != 1:
        return contextlib.nullcontext()
    from opentelemetry.trace import use_span  # noqa: PLC0415 - installed when spans exist

    # the wrapper records the exception and the status itself, when the request ends
    return use_span(spans[0], end_on_exit=False, record_exception=False, set_status_on_exception=False)


def _parent_context(request) -> Optional[Any]:
    parameters = getattr(request, "parameters", None) or {}
    traceparent = parameters.get("traceparent")
    if not isinstance(traceparent, str):
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator  # noqa: PLC0415

    return TraceContextTextMapPropagator().extract({"traceparent": traceparent})


def _set_span(request, span, tracer) -> None:
    try:
        request.span = span
        request._span_opener = functools.partial(_child_span, tracer, span)  # noqa: SLF001 - Request's hook for us
    except AttributeError:  # a plain dict given by a test
        logger.debug("request %r takes no span", type(request).__name__)


def _child_span(tracer, parent, span_name: str, **kwargs):
    from opentelemetry import trace  # noqa: PLC0415 - installed when spans exist

    return tracer.start_as_current_span(span_name, context=trace.set_span_in_context(parent), **kwargs)
