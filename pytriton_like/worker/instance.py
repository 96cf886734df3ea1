"""The user-process end of one model instance's relay: receive a batch, run the callable, reply."""

import functools
import json
import logging
import threading
from typing import Callable, List, Optional

import zmq

from ..exceptions import PyTritonUnrecoverableError
from ..proxy.protocol import Kind, Message, ProtocolError, decode_message, encode_message
from ..proxy.shm import ArenaReader, ArenaWriter
from ..proxy.types import Request
from .calling import BatchCall
from .outputs import OutputChecker, OutputError

__all__ = ["InstanceWorker", "DEFAULT_SHM_THRESHOLD"]

logger = logging.getLogger(__name__)

# Tensors from this size on travel through shared memory, smaller ones as ZeroMQ frames.
DEFAULT_SHM_THRESHOLD = 64 * 1024


class InstanceWorker:
    """Serves one model instance: owns its socket, its output arena and a thread.

    Args:
        call: the bound callable in the internal shape ``Requests -> Responses``; closed with the worker.
        address: ipc address to bind.
        on_unrecoverable: called (from the worker thread) with the error when the callable
            raises PyTritonUnrecoverableError.
    """

    def __init__(
        self,
        *,
        model_name: str,
        call: BatchCall,
        checker: OutputChecker,
        context: zmq.Context,
        address: str,
        owner_pid: int,
        arena_tag: str,
        on_unrecoverable: Callable[[BaseException], None],
        shm_threshold: int = DEFAULT_SHM_THRESHOLD,
    ):
        self._model_name = model_name
        self._call = call
        self._checker = checker
        self._on_unrecoverable = on_unrecoverable
        self._threshold = shm_threshold
        self._arena = ArenaWriter(owner_pid, arena_tag)
        self._reader = ArenaReader()
        self._socket = context.socket(zmq.ROUTER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.bind(address)
        self._thread = threading.Thread(target=self._serve, name=f"pytriton_like-{arena_tag}", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        handle = self._handle
        try:
            while True:
                frames = self._socket.recv_multipart()
                peer, frames = frames[0], frames[1:]
                try:
                    reply = handle(frames)
                except zmq.ContextTerminated:
                    raise
                except BaseException as exc:  # noqa: BLE001 - a dead worker must answer, not go silent
                    logger.critical("model %s: worker failed; failing every request from now on", self._model_name,
                                    exc_info=True)
                    handle = functools.partial(self._refuse, f"{type(exc).__name__}: {exc}")
                    reply = handle(frames)
                if reply is not None:
                    self._socket.send_multipart([peer, *reply])
        except zmq.ContextTerminated:
            pass
        finally:
            self._call.close()
            self._socket.close(linger=0)
            self._arena.close()
            self._reader.close()

    def _refuse(self, reason: str, frames) -> Optional[list]:
        """The handler of a worker that failed: every batch gets an error saying why."""
        try:
            message = decode_message(frames, self._reader)
        except ProtocolError:
            return None
        if message.kind is Kind.HELLO:
            return encode_message(Kind.WELCOME, extra={"shm_threshold": self._threshold})
        error = f"the worker of model {self._model_name!r} failed and serves no more requests: {reason}"
        return encode_message(Kind.RESULT, message.batch_id, error=error)

    def _result_item(self, request: Request, response) -> tuple:
        try:
            return {}, self._checker.check(response, _batch_size(request), request.requested_output_names)
        except OutputError as exc:
            logger.error("model %s: %s", self._model_name, exc)
            return {"e": f"model {self._model_name!r}: {exc}"}, {}

    def _handle(self, frames) -> Optional[list]:
        try:
            message = decode_message(frames, self._reader, writable=True)
        except ProtocolError as exc:
            logger.error("model %s: dropping a malformed message: %s", self._model_name, exc)
            return None
        if message.kind is Kind.HELLO:
            logger.debug("model %s: instance %s connected", self._model_name, message.extra.get("instance"))
            return encode_message(Kind.WELCOME, extra={"shm_threshold": self._threshold})
        if message.kind is Kind.BATCH:
            return self._run_batch(message)
        logger.error("model %s: unexpected %s message", self._model_name, message.kind.name)
        return None

    def _run_batch(self, message: Message) -> list:
        batch_id = message.batch_id
        try:
            requests = [_request(item, tensors) for item, tensors in zip(message.items, message.tensors)]
            responses = self._call(requests)
            _check_count(requests, responses)
        except Exception as exc:  # noqa: BLE001 - every failure of the callable becomes an error response
            logger.exception("model %s: the inference callable failed", self._model_name)
            if isinstance(exc, PyTritonUnrecoverableError):
                self._on_unrecoverable(exc)
            return encode_message(Kind.RESULT, batch_id, error=f"{type(exc).__name__}: {exc}")
        items = [self._result_item(request, response) for request, response in zip(requests, responses)]
        try:
            return encode_message(Kind.RESULT, batch_id, items, arena=self._arena, threshold=self._threshold)
        except (TypeError, ValueError, MemoryError, OSError) as exc:
            logger.exception("model %s: cannot send the callable's outputs", self._model_name)
            return encode_message(Kind.RESULT, batch_id, error=f"cannot send outputs: {type(exc).__name__}: {exc}")


def _request(item, tensors) -> Request:
    parameters = item.get("p")
    return Request(
        data=tensors,
        parameters=json.loads(parameters) if parameters else {},
        requested_output_names=item.get("q") or None,
    )


def _check_count(requests: List[Request], responses) -> None:
    if not isinstance(responses, (list, tuple)):
        raise TypeError(
            f"the inference callable must return a list with one dict of outputs per request,"
            f" got {type(responses).__name__}"
        )
    if len(responses) != len(requests):
        raise ValueError(f"the inference callable returned {len(responses)} responses for {len(requests)} requests")


def _batch_size(request: Request) -> Optional[int]:
    for array in request.data.values():
        return array.shape[0] if array.ndim else None
    return None
