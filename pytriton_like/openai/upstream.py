"""The endpoint's way to tritonserver: its gRPC endpoint, with ``grpc.aio`` and Triton's own messages.

One channel for the endpoint's life. A streaming model's request is one ``ModelStreamInfer``
call (the request written, the writing side closed, the responses read until the one Triton
flags final); cancelling the call — the client went away — makes Triton cancel the request,
and the relay then cancels the callable's task. Other requests are one ``ModelInfer`` call.
No tritonclient wrapper objects and no numpy on the way: the request is one BYTES element,
the answer one BYTES element (or an FP32 matrix). docs/architecture.md says why gRPC.
"""

import struct
from typing import AsyncIterator, List, Optional, Sequence, Tuple

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

from ..server.security import ACCESS_TOKEN_HEADER
from .contract import EMBEDDING_OUTPUT, PIECE_OUTPUT, REQUEST_INPUT, TEXT_INPUT, OpenAIModel, Piece
from .errors import APIError, from_triton

__all__ = ["Upstream"]

_FINAL = "triton_final_response"
_UNLIMITED = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]


class Upstream:
    """Calls to one tritonserver's gRPC endpoint (make it and use it on one event loop).

    Args:
        target: ``host:port`` of the gRPC endpoint.
        access_token: sent with every call (the ``inference`` group may be restricted).
    """

    def __init__(self, target: str, access_token: Optional[str] = None):
        self._channel = grpc.aio.insecure_channel(target, options=_UNLIMITED)
        self._stub = service_pb2_grpc.GRPCInferenceServiceStub(self._channel)
        self._metadata: Tuple[Tuple[str, str], ...] = ()
        if access_token:
            self._metadata = ((f"triton-grpc-protocol-{ACCESS_TOKEN_HEADER}", access_token),)

    async def close(self) -> None:
        """Close the channel (calls still running are cancelled)."""
        await self._channel.close()

    async def ready(self) -> bool:
        """Whether the server reports ready."""
        try:
            answer = await self._stub.ServerReady(service_pb2.ServerReadyRequest(), metadata=self._metadata)
        except grpc.aio.AioRpcError:
            return False
        return answer.ready

    async def stream(self, model: OpenAIModel, payload: bytes, priority: Optional[int]) -> AsyncIterator[Piece]:
        """The pieces a streaming model answers ``payload`` with; closing the iterator cancels the request.

        Raises:
            APIError: Triton refused or failed the request (before or after pieces came).
        """
        request = _request(model, REQUEST_INPUT, [payload], priority)
        request.parameters["triton_enable_empty_final_response"].bool_param = True
        call = self._stub.ModelStreamInfer(metadata=self._metadata)
        try:
            await call.write(request)
            await call.done_writing()
            async for answer in call:
                if answer.error_message:
                    raise from_triton(model.name, answer.error_message)
                response = answer.infer_response
                if response.outputs:
                    yield Piece.from_json(_elements(response, PIECE_OUTPUT)[0])
                if response.parameters[_FINAL].bool_param:
                    return
        except grpc.aio.AioRpcError as exc:
            raise _error(model, exc) from None
        finally:
            call.cancel()  # a no-op once the call ended; else Triton cancels the request

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
            return await self._stub.ModelInfer(request, metadata=self._metadata)
        except grpc.aio.AioRpcError as exc:
            raise _error(model, exc) from None


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


def _error(model: OpenAIModel, exc: "grpc.aio.AioRpcError") -> APIError:
    details = exc.details() or str(exc.code())
    if exc.code() == grpc.StatusCode.UNAVAILABLE and not any(s in details for s in ("queue", "timeout")):
        return APIError(503, "the inference server is not available; retry later", "server_error", None, "unavailable")
    return from_triton(model.name, details, not_found=exc.code() == grpc.StatusCode.NOT_FOUND)
