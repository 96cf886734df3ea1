#!/usr/bin/env python3
"""Call the models of server.py through a TritonRunner, synchronously and with asyncio, and use the
runner's server calls: metadata, log settings, shared-memory status, streaming (gRPC)."""

import argparse
import asyncio

import numpy as np

from pytriton_like.runner import TritonRunner


def call_sync(url: str, init_timeout_s: float) -> None:
    a = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)  # AddSub batches: batch axis first
    b = np.array([[0.5, 0.5], [1.0, 1.0]], dtype=np.float32)
    with TritonRunner(url, init_timeout_s=init_timeout_s) as runner:
        result = runner.AddSub.run(a, b)  # positionally, in the model's input order (waits for the server)
        print(f"[{url}] models: {', '.join(name for name in ('AddSub', 'Scale') if name in dir(runner))}")
        print(f"[{url}] sync AddSub add = {result.as_numpy('add').tolist()}")
        print(f"[{url}] sync AddSub output 'sub': {result.get_output('sub')}")
        scaled = runner.Scale.run(x=np.array([1.0, 2.0, 3.0], dtype=np.float32))  # by name; Scale takes no batch axis
        response = scaled.get_response()
        print(f"[{url}] sync Scale scaled = {scaled.as_numpy('scaled').tolist()}"
              f" (model {response['model_name']} version {response['model_version']})")
        print(f"[{url}] Scale ready: {runner.is_model_ready('Scale')}")
        # the server calls (BentoML's list); the restricted ones carry the token found on this host
        print(f"[{url}] server {runner.get_server_metadata()['version']} live: {runner.is_server_live()}")
        print(f"[{url}] AddSub inputs: {[i['name'] for i in runner.get_model_metadata('AddSub')['inputs']]}")
        print(f"[{url}] log format (TritonConfig.extra_args): {runner.get_log_settings()['log_format']}")
        print(f"[{url}] trace level: {runner.get_trace_settings()['trace_level']}")
        print(f"[{url}] system shared-memory regions: {runner.get_system_shared_memory_status()}")
        if url.startswith("grpc://"):  # Triton streams over gRPC only
            counted = [response["i"].item() for response in runner.Count.stream_infer(np.array([[3]], np.int32))]
            print(f"[{url}] stream_infer Count: {counted}")


async def call_async(url: str, init_timeout_s: float) -> None:
    async with TritonRunner(url, init_timeout_s=init_timeout_s) as runner:
        added, scaled = await asyncio.gather(
            runner.AddSub.async_run(np.ones((1, 2), np.float32), np.ones((1, 2), np.float32)),
            runner.Scale.async_run(np.array([0.5], np.float32)),
        )
        print(f"[{url}] async AddSub add = {added.as_numpy('add').tolist()}")
        print(f"[{url}] async Scale scaled = {scaled.as_numpy('scaled').tolist()}")
        config = await runner.async_get_model_config("AddSub")
        print(f"[{url}] AddSub max_batch_size: {config['max_batch_size']}")
        print(f"[{url}] async server ready: {await runner.async_is_server_ready()}")


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default="localhost", help="http://host:port or grpc://host:port (default: localhost)")
    parser.add_argument("--init-timeout-s", type=float, default=60.0)
    args = parser.parse_args()
    call_sync(args.url, args.init_timeout_s)
    asyncio.run(call_async(args.url, args.init_timeout_s))


if __name__ == "__main__":
    main()
