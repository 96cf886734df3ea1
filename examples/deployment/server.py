#!/usr/bin/env python3
"""A service ready for a container, a load balancer and Kubernetes (docs/deployment.md).

Everything about the server comes from ``PYTRITON_TRITON_CONFIG_*`` environment variables (ports,
addresses, ``DRAIN_SECS``...), so this one script runs as it is under ``examples/run.py``, in the
image of ``deploy/Dockerfile``, in the pods of ``deploy/kubernetes/`` and as each replica of the
rolling-restart test (``make test-deploy``).

On SIGTERM it drains: ``/v2/health/ready`` turns 400 at once, requests keep being served for
``drain_secs`` (5 s by default), then the requests in flight finish and it exits with code 0.
SIGINT (Ctrl-C) stops it without draining.
"""

import logging

import numpy as np

from pytriton_like.decorators import batch
from pytriton_like.model_config import DynamicBatcher, ModelConfig, Tensor
from pytriton_like.triton import Triton, TritonLifecyclePolicy


@batch
def linear(x):
    return {"y": 2 * x + 1}


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # The server starts at serve(), with the model loaded, so /v2/health/ready turns 200 only once
    # it can answer. (By default `with Triton()` starts it at once, as PyTriton's does: ready,
    # with no model yet, until bind() has loaded it — a probe could send traffic too early.)
    policy = TritonLifecyclePolicy(launch_triton_on_startup=False)
    with Triton(triton_lifecycle_policy=policy) as triton:  # TritonConfig from the environment
        triton.bind(
            model_name="Linear",
            infer_func=linear,
            inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
            config=ModelConfig(max_batch_size=64, batcher=DynamicBatcher(max_queue_delay_microseconds=100)),
        )
        triton.serve()


if __name__ == "__main__":
    main()
