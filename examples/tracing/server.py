#!/usr/bin/env python3
"""Serve models with OpenTelemetry spans around each request, printed as they end, and Triton's
own trace of each request, printed when the server stops.

``Pipeline`` calls ``WordCount`` (a nested call): WordCount's span is a child of Pipeline's, in
the same trace, and in Triton's trace the nested call's trace is a child of Pipeline's request's.

Needs ``opentelemetry-sdk`` (the package's ``[tracing]`` extra brings the OTLP exporter too).
A real deployment exports to a collector: ``bind(trace_config=["mode=opentelemetry",
"opentelemetry,url=http://collector:4318/v1/traces"])``; here a tracer of our own prints
each span's name and parent, so the example needs nothing running. docs/tracing.md.
"""

import json
import logging
import os
import tempfile

import numpy as np
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

from pytriton_like.decorators import batch, triton_context
from pytriton_like.model_config import ModelConfig, Tensor
from pytriton_like.tracing import set_telemetry_tracer
from pytriton_like.triton import Triton, TritonConfig

logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
logger = logging.getLogger("examples.tracing.server")


class PrintingExporter(SpanExporter):
    def export(self, spans):
        for span in spans:
            parent = f" (in {span.parent.span_id:016x})" if span.parent else ""
            print(f"span {span.name} {span.context.span_id:016x}{parent} model={span.attributes.get('pytriton_like.model_name')}", flush=True)
        return SpanExportResult.SUCCESS


def tokenize_and_count(requests):
    responses = []
    for request in requests:
        with request.traced_span("tokenize"):
            words = [bytes(item).decode().split() for item in request["text"].ravel()]
        with request.traced_span("count"):
            responses.append({"count": np.array([[len(w)] for w in words], dtype=np.int64)})
    return responses


@batch
@triton_context
def pipeline(triton_context, text):
    lowered = np.array([[bytes(item).lower()] for item in text.ravel()], dtype=np.object_)
    return triton_context.client("WordCount").infer_batch(text=lowered)


def print_triton_traces(trace_file):
    """Each trace of Triton's trace file (tritonserver writes it when it stops), with its parent."""
    with open(trace_file) as opened:
        records = json.load(opened)
    for record in records:
        if "model_name" in record:  # a trace's other records hold its timestamps
            parent = f" (in trace {record['parent_id']})" if "parent_id" in record else ""
            print(f"triton trace {record['id']} {record['model_name']}{parent}", flush=True)


def main():
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(PrintingExporter()))
    set_telemetry_tracer(provider.get_tracer("examples.tracing"))
    with tempfile.TemporaryDirectory() as folder:
        trace_file = os.path.join(folder, "trace.json")
        config = TritonConfig(trace_config=["mode=triton", f"triton,file={trace_file}", "rate=1", "level=TIMESTAMPS"])
        with Triton(config=config) as triton:
            for name, infer_func in (("WordCount", tokenize_and_count), ("Pipeline", pipeline)):
                triton.bind(
                    model_name=name,
                    infer_func=infer_func,
                    inputs=[Tensor(name="text", dtype=bytes, shape=(1,))],
                    outputs=[Tensor(name="count", dtype=np.int64, shape=(1,))],
                    config=ModelConfig(max_batch_size=8),
                )
            logger.info("serving WordCount and Pipeline with tracing; stop with Ctrl-C")
            triton.serve()
        print_triton_traces(trace_file)


if __name__ == "__main__":
    main()
