"""The endpoint's way to tritonserver: its gRPC endpoint, with Triton's own messages.

One HTTP/2 connection for the endpoint's life (:mod:`.channel`; ``grpc.aio`` cost most of the
endpoint's CPU per piece). A streaming model's request is written on a
``ModelStreamInfer`` stream that carries one request at a time, and its responses are read
until the one Triton flags final; the stream then waits for the next request, since opening one
costs about 0.5 ms of the first piece. Cancelling a stream whose request has not ended — the
client went away — makes Triton cancel the request (Triton cancels whole streams), and the relay
then cancels the callable's task. Other requests are one ``ModelInfer`` call.
No tritonclient wrapper objects and no numpy on the way: the request is one BYTES element,
the answer one BYTES element (or an FP32 matrix). docs/architecture.md says why gRPC.
"""

import struct
from typing import AsyncIterator, List, Optional, Sequence

from tritonclient.grpc import service_pb2

from ..server.security import ACCESS_TOKEN_HEADER
from .channel import NOT_FOUND, UNAVAILABLE, Call, Channel, RpcError
from .contract import EMBEDDING_OUTPUT, PIECE_OUTPUT, REQUEST_INPUT, TEXT_INPUT, OpenAIModel, Piece
from .errors import APIError, from_triton

__all__ = ["Upstream"]

_FINAL = "triton_final_response"
_IDLE_STREAMS = 64  # streams kept open for the next requests
_SERVICE = "/inference.GRPCInferenceService/"


class Upstream:
    """Calls to one tritonserver's gRPC endpoint (make it and use it on one event loop).

    Args:
        target: ``host:port`` of the gRPC endpoint.
        access_token: sent with every call (the ``inference`` group may be restricted).
    """

    def __init__(self, target: str, access_token: Optional[str] = None):
        metadata = ((f"triton-grpc-protocol-{ACCESS_TOKEN_HEADER}", access_token),) if access_token else ()
        self._channel = Channel(target, metadata)
        self._idle: List[Call] = []  # streams whose last request ended, each for one request at a time
        self._sequence = 0

    async def close(self) -> None:
        """Close the channel (calls still running are cancelled)."""
        while self._idle:
            self._idle.pop().cancel()
        self._channel.close()

    async def ready(self) -> bool:
        """Whether the server reports ready."""
        try:
            answer = await self._channel.unary(_SERVICE + "ServerReady", b"")  # an empty ServerReadyRequest
        except RpcError:
            return False
        return service_pb2.ServerReadyResponse.FromString(answer).ready

    async def stream(self, model: OpenAIModel, payload: bytes, priority: Optional[int]) -> AsyncIterator[Piece]:
        """The pieces a streaming model answers ``payload`` with; closing the iterator cancels the request.

        Raises:
            APIError: Triton refused or failed the request (before or after pieces came).
        """
        request = _request(model, REQUEST_INPUT, [payload], priority)
        request.parameters["triton_enable_empty_final_response"].bool_param = True
        self._sequence += 1
        request.id = str(self._sequence)
        message = request.SerializeToString()
        while self._idle and self._idle[-1].done():  # ended meanwhile (the server stopped...)
            self._idle.pop()
        call: Optional[Call] = self._idle.pop() if self._idle else None
        finished = False
        try:
            answer = None if call is None else await self._first(call, message, reused=True)
            if answer is None:  # no idle stream, or it had ended meanwhile: a new one
                if call is not None:
                    call.cancel()
                call = await self._channel.open(_SERVICE + "ModelStreamInfer")
                answer = await self._first(call, message, reused=False)
            while True:
                if answer is None:
                    raise _unavailable()
                if answer.error_message:
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
            raise _error(model, exc) from None
        finally:
            if call is not None:
                if finished and len(self._idle) < _IDLE_STREAMS:
                    self._idle.append(call)  # for the next request: opening a stream costs ~0.5 ms of its first piece
                else:
                    call.cancel()  # Triton cancels the request if it had not ended

    async def _first(self, call: Call, message: bytes, reused: bool):
        """The first answer to the request ``message`` written on ``call``; None if the stream had
        ended (a reused one: whatever ended it)."""
        try:
            await call.write(message)
            return await self._next(call)
        except RpcError:
            if reused:
                return None
            raise

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
