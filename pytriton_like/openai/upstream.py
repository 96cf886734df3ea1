"""The endpoint's way to tritonserver: its gRPC endpoint, with Triton's own messages.

One HTTP/2 connection for the endpoint's life (:mod:`.grpc_channel`; ``grpc.aio`` cost most of the
endpoint's CPU per piece). A streaming model's request is written on a
``ModelStreamInfer`` stream that carries one request at a time, and its responses are read
until the one Triton flags final; the stream then waits for the next request, since opening one
costs about 0.5 ms of the first piece.

A stream is never cancelled (``RST_STREAM``) while its request runs: tritonserver 2.51 aborts
when many streams of a model that streams without pause are cancelled
(docs/troubleshooting.md). A request given up before its end — the client went away — is tagged
with a random cancel key (a request parameter the relay reads, relay_server/cancel_keys.py), which
``on_abandoned`` hands on (the endpoint's process writes it to its parent, which ends that
request's generation); its stream is read on in the background, its pieces discarded, until the
final response, and then carries the next request. A stream not kept is half-closed
(``END_STREAM``), and read to its end. Other requests are one ``ModelInfer`` call.
No tritonclient wrapper objects and no numpy on the way: the request is one BYTES element,
the answer one BYTES element (or an FP32 matrix). docs/architecture.md says why gRPC.
"""

import asyncio
import logging
import secrets
import struct
from typing import AsyncIterator, Callable, List, Optional, Sequence, Set

from ..model_config.proto import service_pb2

from ..relay_server.cancel_keys import CANCEL_KEY_PARAMETER
from ..server.security import ACCESS_TOKEN_HEADER
from .grpc_channel import NOT_FOUND, UNAVAILABLE, Call, GrpcChannel, RpcError
from .contract import EMBEDDING_OUTPUT, PIECE_OUTPUT, REQUEST_INPUT, TEXT_INPUT, OpenAIModel, Piece
from .errors import APIError, from_triton

__all__ = ["Upstream"]

logger = logging.getLogger(__name__)

_FINAL = "triton_final_response"
_IDLE_STREAMS = 64  # streams kept open for the next requests
_SERVICE = "/inference.GRPCInferenceService/"
_CLOSE_GRACE_S = 5.0  # at close: how long the requests given up on may take to end
_HALF_CLOSE_WAIT_S = 1.0  # at close: how long half-closed streams may take to end


class Upstream:
    """Calls to one tritonserver's gRPC endpoint (make it and use it on one event loop).

    Args:
        target: ``host:port`` of the gRPC endpoint.
        access_token: sent with every call (the ``inference`` group may be restricted).
        on_abandoned: called with the model's name and the cancel key of a streamed request
            given up before its end, so that its generation is stopped through the library.
    """

    def __init__(self, target: str, access_token: Optional[str] = None,
                 on_abandoned: Optional[Callable[[str, str], None]] = None):
        metadata = ((f"triton-grpc-protocol-{ACCESS_TOKEN_HEADER}", access_token),) if access_token else ()
        self._channel = GrpcChannel(target, metadata)
        self._on_abandoned = on_abandoned
        self._idle: List[Call] = []  # streams whose last request ended, each for one request at a time
        self._reading: Set[asyncio.Task] = set()  # streams read on in the background (_read_on)
        self._closing = False
        self._sequence = 0
        self._key_prefix = secrets.token_hex(8)  # of this endpoint's cancel keys: random, not guessable

    async def close(self) -> None:
        """Close the channel: the requests given up on are waited for (a while), the kept streams
        half-closed; none is cancelled unless it outlasts the wait."""
        self._closing = True
        if self._reading:
            await asyncio.wait(set(self._reading), timeout=_CLOSE_GRACE_S)
        while self._idle:
            self._retire(self._idle.pop())
        if self._reading:
            await asyncio.wait(set(self._reading), timeout=_HALF_CLOSE_WAIT_S)
        for task in set(self._reading):
            task.cancel()
        self._channel.close()

    async def ready(self) -> bool:
        """Whether the server reports ready."""
        try:
            answer = await self._channel.unary(_SERVICE + "ServerReady", b"")  # an empty ServerReadyRequest
        except RpcError:
            return False
        return service_pb2.ServerReadyResponse.FromString(answer).ready

    async def stream(self, model: OpenAIModel, payload: bytes, priority: Optional[int]) -> AsyncIterator[Piece]:
        """The pieces a streaming model answers ``payload`` with; closing the iterator before its
        end gives the request up (its generation is stopped through its cancel key).

        Raises:
            APIError: Triton refused or failed the request (before or after pieces came).
        """
        request = _request(model, REQUEST_INPUT, [payload], priority)
        request.parameters["triton_enable_empty_final_response"].bool_param = True
        self._sequence += 1
        request.id = str(self._sequence)
        key = f"{self._key_prefix}-{self._sequence}"
        request.parameters[CANCEL_KEY_PARAMETER].string_param = key
        message = request.SerializeToString()
        while self._idle and self._idle[-1].done():  # ended meanwhile (the server stopped...)
            self._idle.pop()
        call: Optional[Call] = self._idle.pop() if self._idle else None
        in_flight = finished = False  # in flight: written, and its final response not read yet
        try:
            answer = None
            if call is not None:
                try:
                    await call.write(message)
                    in_flight = True
                    answer = await self._next(call)
                except RpcError:  # the kept stream had ended meanwhile (whatever ended it)
                    answer = None
                if answer is None:
                    in_flight = False
                    call = None
            if call is None:  # no kept stream, or it had ended: a new one
                call = await self._channel.open(_SERVICE + "ModelStreamInfer")
                await call.write(message)
                in_flight = True
                answer = await self._next(call)
            while True:
                if answer is None:
                    in_flight = False
                    raise _unavailable()
                if answer.error_message:
                    in_flight = False  # the stream is not reused: half-closed, read to its end
                    raise from_triton(model.name, answer.error_message)
                response = answer.infer_response
                if response.id != request.id:  # a bug: answered as every failure of the endpoint's own
                    raise RuntimeError(f"Triton answered request {response.id!r} on the stream of {request.id!r}")
                if response.outputs:
                    yield Piece.from_json(_elements(response, PIECE_OUTPUT)[0])
                if response.parameters[_FINAL].bool_param:
                    finished = True
                    return
                answer = await self._next(call)
        except RpcError as exc:
            in_flight = False  # the call ended
            raise _error(model, exc) from None
        finally:
            if call is not None:
                if finished:
                    self._keep(call)  # for the next request: opening a stream costs ~0.5 ms of its first piece
                elif in_flight and not call.done():  # given up: its generation is stopped, its stream read on
                    if self._on_abandoned is not None:
                        self._on_abandoned(model.name, key)
                    self._read_in_background(call, until_final=True)
                else:
                    self._retire(call)

    def _keep(self, call: Call) -> None:
        """A stream whose request ended: kept for the next request, or half-closed."""
        if self._closing or len(self._idle) >= _IDLE_STREAMS or call.done():
            self._retire(call)
        else:
            self._idle.append(call)

    def _retire(self, call: Call) -> None:
        """Half-close a stream not kept (never ``RST_STREAM``) and read it to its end."""
        if not call.done():
            call.done_writing()
            self._read_in_background(call, until_final=False)

    def _read_in_background(self, call: Call, until_final: bool) -> None:
        task = asyncio.ensure_future(self._read_on(call, until_final))
        self._reading.add(task)
        task.add_done_callback(self._reading.discard)

    async def _read_on(self, call: Call, until_final: bool) -> None:
        """Read ``call``'s answers, discarded: ``until_final``, until the final response of its
        request (then the stream is kept), else until the call ends."""
        try:
            while until_final:
                message = await call.read()
                if message is None:
                    return
                try:
                    answer = service_pb2.ModelStreamInferResponse.FromString(message)
                except Exception:  # noqa: BLE001 - not Triton's message: the stream is not reused
                    logger.warning("the answer of a request given up could not be read; its stream is not reused")
                    answer = None
                if answer is None or answer.error_message:
                    call.done_writing()
                    until_final = False
                elif answer.infer_response.parameters[_FINAL].bool_param:
                    self._keep(call)
                    return
            while await call.read() is not None:
                pass
        except RpcError:
            return

    @staticmethod
    async def _next(call: Call):
        answer = await call.read()
        return None if answer is None else service_pb2.ModelStreamInferResponse.FromString(answer)

    async def answer(self, model: OpenAIModel, payload: bytes, priority: Optional[int]) -> Piece:
        """The whole answer of a non-streaming text model."""
        response = await self._infer(model, _request(model, REQUEST_INPUT, [payload], priority))
        return Piece.from_json(_elements(response, PIECE_OUTPUT)[0])

    async def embed(self, model: OpenAIModel, texts: Sequence[bytes], priority: Optional[int]) -> List[List[float]]:
        """One vector per text (``texts`` at most the model's ``max_batch_size``)."""
        response = await self._infer(model, _request(model, TEXT_INPUT, texts, priority))
        for index, output in enumerate(response.outputs):
            if output.name == EMBEDDING_OUTPUT:
                rows, columns = output.shape
                values = struct.unpack(f"<{rows * columns}f", response.raw_output_contents[index])
                return [list(values[row * columns : (row + 1) * columns]) for row in range(rows)]
        raise APIError(500, f"model {model.name!r} gave no {EMBEDDING_OUTPUT}", "server_error")

    async def _infer(self, model: OpenAIModel, request) -> "service_pb2.ModelInferResponse":
        try:
            answer = await self._channel.unary(_SERVICE + "ModelInfer", request.SerializeToString())
        except RpcError as exc:
            raise _error(model, exc) from None
        return service_pb2.ModelInferResponse.FromString(answer)


def _request(model: OpenAIModel, name: str, elements: Sequence[bytes], priority: Optional[int]):
    shape = [len(elements), 1] if model.max_batch_size else [len(elements)]
    tensor = service_pb2.ModelInferRequest.InferInputTensor(name=name, datatype="BYTES", shape=shape)
    request = service_pb2.ModelInferRequest(model_name=model.name, inputs=[tensor])
    request.raw_input_contents.append(b"".join(struct.pack("<I", len(e)) + e for e in elements))
    if priority is not None:
        request.parameters["priority"].uint64_param = priority
    return request


def _elements(response, name: str) -> List[bytes]:
    """The elements of a BYTES output (Triton's serialisation: a 4-byte length before each)."""
    for index, output in enumerate(response.outputs):
        if output.name == name:
            raw, offset, elements = response.raw_output_contents[index], 0, []
            while offset < len(raw):
                (length,) = struct.unpack_from("<I", raw, offset)
                elements.append(raw[offset + 4 : offset + 4 + length])
                offset += 4 + length
            return elements
    return [b'{"text":""}']


def _unavailable() -> APIError:
    return APIError(503, "the inference server is not available; retry later", "server_error", None, "unavailable")


def _error(model: OpenAIModel, exc: RpcError) -> APIError:
    details = exc.details or f"gRPC status {exc.code}"
    if exc.code == UNAVAILABLE and not any(s in details for s in ("queue", "timeout")):
        return _unavailable()
    return from_triton(model.name, details, not_found=exc.code == NOT_FOUND)
