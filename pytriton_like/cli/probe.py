"""``pytriton_like serve``'s output probe: where the one call with a sample of ones runs, and what a
failed one tells the user to give instead.

A callable whose ``setup_worker(worker)`` loads its model is served with ``--workers N``: the
model exists only in the worker processes, so the probe runs in a process of its own, set up as a
worker is (``setup_worker`` first), and sends back the outputs it saw. A probe that fails says
which option would have spared it: ``--output`` always, ``--input`` when the sample's made-up
shape is the likely cause, ``--workers`` when only a worker would have run the setup.
"""

import dataclasses
import logging
import multiprocessing
import re
import traceback
from typing import Any, Callable, List, Sequence

import numpy as np

from ..models.worker_options import WorkerInfo, WorkerOptions
from ..model_config import Tensor
from .errors import CliError

__all__ = ["ProbeFailed", "has_worker_setup", "outputs_from_a_worker", "probe_failure_hints"]

logger = logging.getLogger(__name__)

# An error whose text reads as a shape mismatch: scikit-learn's "X has 1 features, but ... is
# expecting 20 features", numpy's "could not broadcast", torch's "mat1 and mat2 shapes cannot be
# multiplied", ONNX Runtime's "Got invalid dimensions for input".
_SHAPE_WORDS = re.compile(r"shape|feature|dimension|broadcast|\bsize\b|\brank\b|\baxis\b|\bexpect", re.IGNORECASE)


@dataclasses.dataclass(frozen=True)
class ProbeFailed:
    """Probe process to parent: the call (or the setup before it) raised; the error as text."""

    error_type: str
    message: str
    traceback: str


def has_worker_setup(func: Callable) -> bool:
    """Whether ``func`` is an object with a ``setup_worker(worker)`` hook (docs/workers.md)."""
    return callable(getattr(func, "setup_worker", None))


def outputs_from_a_worker(
    target: str,
    inputs: Sequence[Tensor],
    batching: bool,
    worker: WorkerInfo,
    *,
    load: Callable[[str], Callable],
    call: Callable[..., List[Tensor]],
) -> List[Tensor]:
    """The outputs of one call with a sample of ones, made in a spawned process where ``target``
    was imported again and its ``setup_worker(worker)`` ran first, as in a worker process.

    ``load(target)`` finds the callable there and ``call(func, inputs, batching, workers=N)`` makes
    the call (``serve.py``'s ``load_target`` and ``outputs_from_a_call``; module functions, so the
    spawned process finds them by name).

    Raises:
        CliError: the setup or the call failed (its message carries the error and what to give
            instead), the process died, or the setup took longer than a worker may.
    """
    timeout_s = WorkerOptions().setup_timeout_s
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=_probe_in_a_worker, args=(load, call, target, list(inputs), batching, worker, sender), daemon=True
    )
    process.start()
    sender.close()
    try:
        if not receiver.poll(timeout_s):
            raise CliError(
                f"cannot tell the outputs: {target}'s setup_worker did not finish in {timeout_s:.0f} s in the"
                " process that calls it once with a sample of ones; give them with --output NAME:DTYPE:SHAPE"
            )
        answer = receiver.recv()
    except EOFError:
        process.join(5)
        raise CliError(
            f"cannot tell the outputs: the process that calls {target} once with a sample of ones ended"
            f" (exit code {process.exitcode}) before it answered; give them with --output NAME:DTYPE:SHAPE"
        ) from None
    finally:
        receiver.close()
        if process.is_alive():
            process.kill()
        process.join(5)
    if isinstance(answer, ProbeFailed):
        logger.debug("the probe process failed (%s):\n%s", answer.error_type, answer.traceback or answer.message)
        raise CliError(answer.message)
    return answer


def probe_failure_hints(
    func: Callable, name: str, inputs: Sequence[Tensor], error: BaseException, workers: int
) -> List[str]:
    """What to give instead of the probe of ``func`` (called ``name``) that raised ``error``, most
    likely first, each a clause of the message."""
    hints = []
    if has_worker_setup(func) and workers <= 1:
        hints.append(
            f"{name} has a setup_worker method, which runs only in worker processes: with --workers N"
            " (N > 1) it runs before the call, in a process of its own"
        )
    variable = [spec for spec in inputs if -1 in spec.shape]
    if variable and _SHAPE_WORDS.search(f"{type(error).__name__} {error}"):
        shapes = ", ".join(f"{spec.name} {_sample_shape(spec)}" for spec in variable)
        example = variable[0]
        hints.append(
            f"the sample had 1 in each -1 dimension ({shapes}): if the callable needs a fixed size, give the"
            f" inputs with --input NAME:DTYPE:SHAPE, e.g. --input {example.name}:{_dtype_name(example)}:SIZE"
        )
    hints.append("give the outputs with --output NAME:DTYPE:SHAPE")
    return hints


def _probe_in_a_worker(
    load: Callable, call: Callable, target: str, inputs: List[Tensor], batching: bool, worker: WorkerInfo, sender: Any
) -> None:
    """The probe process's target: import, set up as a worker, call once, send the outputs (or why not)."""
    answer: Any
    try:
        func = load(target)
        func.setup_worker(worker)
        answer = call(func, inputs, batching, workers=worker.count)
    except CliError as exc:
        answer = ProbeFailed(type(exc).__name__, str(exc), "")
    except BaseException as exc:  # noqa: BLE001 - the parent must hear why, as text
        answer = ProbeFailed(
            type(exc).__name__,
            f"cannot tell the outputs: {target}'s setup_worker failed ({type(exc).__name__}: {exc});"
            " give them with --output NAME:DTYPE:SHAPE",
            traceback.format_exc(),
        )
    sender.send(answer)
    sender.close()


def _sample_shape(spec: Tensor) -> tuple:
    return tuple(1 if dim == -1 else dim for dim in spec.shape)


def _dtype_name(spec: Tensor) -> str:
    return "bytes" if spec.dtype in (bytes, object, np.bytes_) else np.dtype(spec.dtype).name
