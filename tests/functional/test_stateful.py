"""Stateful models: a sequence batcher routes each sequence to one instance, in order, with start/end flags.

Two instances each keep a running sum per open sequence in their own state; several sequences
run interleaved and concurrently, from every client over HTTP and gRPC, with int and str ids.
"""

import asyncio
import itertools
import threading

import numpy as np
import pytest

from pytriton_like.client import AsyncioModelClient, FuturesModelClient, ModelClient
from pytriton_like.client.exceptions import PyTritonClientInferenceServerError
from pytriton_like.model_config import ModelConfig, SequenceBatcher, Tensor
from pytriton_like.triton import Triton

from .conftest import checked_for_leaks, free_config, url_of

SEQUENCES = 6
STEPS = 10
# Long enough that a starved client thread on a busy machine does not lose its sequence.
IDLE_US = 60_000_000
_INT_IDS = itertools.count(1)


class RunningSum:
    """One model instance: a running sum per open sequence, in this instance's own state."""

    def __init__(self, index):
        self.index = index
        self.sums = {}
        self.seen = []  # (sequence_id, sequence_start, sequence_end) of each request, in order

    def __call__(self, requests):
        responses = []
        for request in requests:
            key = request.sequence_id
            if request.sequence_start:
                self.sums[key] = 0
            # a KeyError here: the sequence reached an instance that did not see its start
            self.sums[key] += int(request["x"].reshape(-1)[0])
            self.seen.append((key, request.sequence_start, request.sequence_end))
            responses.append({"sum": np.array([[self.sums[key]]]), "instance": np.array([[self.index]])})
            if request.sequence_end:
                del self.sums[key]
        return responses


MODELS = {
    "SumDirect": SequenceBatcher(max_sequence_idle_microseconds=IDLE_US),
    "SumOldest": SequenceBatcher(strategy="oldest", max_candidate_sequences=4, max_sequence_idle_microseconds=IDLE_US),
}


@pytest.fixture(scope="module")
def server():
    config = free_config()
    instances = {name: [RunningSum(0), RunningSum(1)] for name in MODELS}
    with checked_for_leaks(), Triton(config=config) as triton:
        for name, batcher in MODELS.items():
            triton.bind(
                model_name=name,
                infer_func=instances[name],
                inputs=[Tensor(name="x", dtype=np.int64, shape=(1,))],
                outputs=[Tensor(name="sum", dtype=np.int64, shape=(1,)), Tensor(name="instance", dtype=np.int32, shape=(1,))],
                config=ModelConfig(max_batch_size=4, sequence_batcher=batcher),
            )
        triton.run()
        yield config, instances



def value(sequence, step):
    return (sequence + 1) * 100 + step


def step_args(step, sequence_id):
    return {"sequence_id": sequence_id, "sequence_start": step == 0, "sequence_end": step == STEPS - 1}


def new_ids(tag):
    """Half int, half str ids, unique in the module."""
    return [next(_INT_IDS) if n % 2 else f"{tag}-{n}" for n in range(SEQUENCES)]


def run_sync(url, model, ids):
    answers = {sequence_id: [] for sequence_id in ids}

    def one(sequence, sequence_id):
        with ModelClient(url, model) as client:
            for step in range(STEPS):
                x = np.array([value(sequence, step)], np.int64)
                answers[sequence_id].append(client.infer_sample(x, **step_args(step, sequence_id)))

    threads = [threading.Thread(target=one, args=(n, sequence_id)) for n, sequence_id in enumerate(ids)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answers


def run_asyncio(url, model, ids):
    answers = {sequence_id: [] for sequence_id in ids}

    async def main():
        async with AsyncioModelClient(url, model) as client:

            async def one(sequence, sequence_id):
                for step in range(STEPS):
                    x = np.array([value(sequence, step)], np.int64)
                    answers[sequence_id].append(await client.infer_sample(x, **step_args(step, sequence_id)))

            await asyncio.gather(*(one(n, sequence_id) for n, sequence_id in enumerate(ids)))

    asyncio.run(main())
    return answers


def run_futures(url, model, ids):
    # each sequence's next step goes once its previous one answered; the sequences run side by side
    answers = {sequence_id: [] for sequence_id in ids}
    with FuturesModelClient(url, model, max_workers=SEQUENCES) as client:
        for step in range(STEPS):
            futures = {
                sequence_id: client.infer_sample(np.array([value(n, step)], np.int64), **step_args(step, sequence_id))
                for n, sequence_id in enumerate(ids)
            }
            for sequence_id, future in futures.items():
                answers[sequence_id].append(future.result())
    return answers


RUNNERS = {"sync": run_sync, "asyncio": run_asyncio, "futures": run_futures}


def check_sequences(instances, ids, answers):
    for n, sequence_id in enumerate(ids):
        expected = list(itertools.accumulate(value(n, step) for step in range(STEPS)))
        assert [int(answer["sum"][0]) for answer in answers[sequence_id]] == expected, sequence_id
        served_by = {int(answer["instance"][0]) for answer in answers[sequence_id]}
        assert len(served_by) == 1, f"sequence {sequence_id!r} went to instances {served_by}"
        (instance,) = served_by
        flags = [(start, end) for key, start, end in instances[instance].seen if key == sequence_id]
        assert flags == [(True, False)] + [(False, False)] * (STEPS - 2) + [(False, True)], sequence_id
        assert type(next(key for key, *_ in instances[instance].seen if key == sequence_id)) is type(sequence_id)
    for instance in instances:  # every sequence ended: its state is gone
        assert not set(ids) & set(instance.sums)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("kind", sorted(RUNNERS))
def test_interleaved_sequences_keep_their_own_running_sum(server, kind, protocol):
    config, instances = server
    ids = new_ids(f"{kind}-{protocol}")
    answers = RUNNERS[kind](url_of(config, protocol), "SumDirect", ids)
    check_sequences(instances["SumDirect"], ids, answers)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_oldest_strategy_keeps_sequences_in_order_too(server, protocol):
    config, instances = server
    ids = new_ids(f"oldest-{protocol}")
    check_sequences(instances["SumOldest"], ids, run_sync(url_of(config, protocol), "SumOldest", ids))


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_loaded_config_has_the_sequence_batcher(server, protocol):
    config, _ = server
    with ModelClient(url_of(config, protocol), "SumOldest") as client:
        loaded = client.model_config
    # Triton fills in preferred_batch_size (max_batch_size) for the oldest strategy
    assert loaded.sequence_batcher == SequenceBatcher(
        strategy="oldest", max_candidate_sequences=4, max_sequence_idle_microseconds=IDLE_US, preferred_batch_size=(4,)
    )
    assert loaded.batcher is None and loaded.instance_count == 2


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_requests_outside_a_proper_sequence_get_triton_s_error(server, protocol):
    config, instances = server
    x = np.array([1], np.int64)
    with ModelClient(url_of(config, protocol), "SumDirect") as client:
        with pytest.raises(PyTritonClientInferenceServerError, match="must specify a non-zero or non-empty correlation ID"):
            client.infer_sample(x)
        with pytest.raises(PyTritonClientInferenceServerError, match="START flag"):
            client.infer_sample(x, sequence_id=f"no-start-{protocol}")
    assert not any(key == f"no-start-{protocol}" for instance in instances["SumDirect"] for key, *_ in instance.seen)
