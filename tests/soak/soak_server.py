"""The server the soak test loads: a few models on the ports given, until stdin closes."""

import sys

import numpy as np

from pytriton_like.decorators import batch
from pytriton_like.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton_like.triton import Triton, TritonConfig


@batch
def double(x):
    return {"y": x * 2}


def picky(requests):
    # A request whose first value is negative makes the callable fail: a "bad" request the
    # server must reject without harm to the others (batches of one, so it fails alone).
    if any(request["x"].size and request["x"].flat[0] < 0 for request in requests):
        raise ValueError("negative input")
    return [{"y": request["x"] * 2} for request in requests]


def main():
    http_port, grpc_port, metrics_port = map(int, sys.argv[1:4])
    config = TritonConfig(http_port=http_port, grpc_port=grpc_port, metrics_port=metrics_port)
    spec = dict(inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))])
    with Triton(config=config) as triton:
        triton.bind(model_name="Double", infer_func=[double, double], **spec,
                    config=ModelConfig(max_batch_size=64, batcher=DynamicBatcher(max_queue_delay_microseconds=100)))
        triton.bind(model_name="Picky", infer_func=picky, **spec, config=ModelConfig(max_batch_size=1))
        triton.run()
        print("READY", flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
