"""A bound model: its resolved config, its callables and the workers that serve them."""

import logging
import os
import pathlib
import threading
from typing import Callable, List, Sequence

import zmq

from ..decorators import TritonContext, attach_triton_context
from ..model_config.triton_model_config import TritonModelConfig
from ..worker.calling import BatchCall
from ..worker.instance import InstanceWorker
from ..worker.outputs import OutputChecker
from .repository import remove_model_entry, write_model_entry

__all__ = ["Model"]

logger = logging.getLogger(__name__)

# How long a starting stub waits for its worker to answer HELLO.
_HANDSHAKE_TIMEOUT_S = 60
# How long stopping waits for callables still running.
_TEARDOWN_TIMEOUT_S = 10


class Model:
    """One bound model: ``len(infer_funcs)`` instances, each relayed to its own worker.

    Args:
        tag: short unique name of this binding, used for socket and shared-memory names.
    """

    def __init__(self, config: TritonModelConfig, infer_funcs: Sequence[Callable], strict: bool, tag: str):
        self.config = config
        self.strict = strict
        self._infer_funcs = list(infer_funcs)
        self._tag = tag
        self._context: zmq.Context = None
        self._workers: List[InstanceWorker] = []

    @property
    def name(self) -> str:
        return self.config.model_name

    def setup(self, repository: pathlib.Path, sockets: pathlib.Path, on_unrecoverable: Callable) -> None:
        """Start the workers (their sockets bound) and write the repository entry."""
        self._context = zmq.Context()
        addresses = [f"ipc://{sockets / f'{self._tag}-{index}'}" for index in range(len(self._infer_funcs))]
        checker = OutputChecker(self.config.outputs, self.config.batching, self.strict)
        for index, (infer_func, address) in enumerate(zip(self._infer_funcs, addresses)):
            attach_triton_context(infer_func, TritonContext(model_config=self.config))
            self._workers.append(
                InstanceWorker(
                    model_name=self.name,
                    call=BatchCall(infer_func),
                    checker=checker,
                    context=self._context,
                    address=address,
                    owner_pid=os.getpid(),
                    arena_tag=f"{self._tag}-{index}-out",
                    on_unrecoverable=on_unrecoverable,
                )
            )
        relay = {
            "owner_pid": os.getpid(),
            "tag": self._tag,
            "sockets": addresses,
            "handshake_timeout_s": _HANDSHAKE_TIMEOUT_S,
        }
        write_model_entry(repository, self.config, relay)

    def teardown(self, repository: pathlib.Path) -> None:
        """Stop the workers and remove the repository entry; the server must have unloaded the model."""
        if self._context is not None:
            # term() ends every worker's blocking receive, but waits for a callable still running;
            # a hung callable must not hang stop(), so wait for it only a while.
            terminator = threading.Thread(target=self._context.term, name=f"pytriton_like-{self._tag}-term", daemon=True)
            terminator.start()
            terminator.join(_TEARDOWN_TIMEOUT_S)
            if terminator.is_alive():
                logger.warning("model %s: a callable is still running; leaving its worker behind", self.name)
            self._context = None
            self._workers = []
        remove_model_entry(repository, self.name)
