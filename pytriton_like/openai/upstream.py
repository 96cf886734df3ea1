"""The endpoint's way to tritonserver: its HTTP endpoint for streams, its gRPC endpoint for the rest.

A streamed request without a priority is one POST to Triton's ``generate_stream`` (server-sent
events, read with aiohttp on the endpoint's event loop): it costs the endpoint less than half the
CPU per piece of a gRPC stream (grpc.aio hands each message over from its poller thread;
docs/architecture.md has the numbers). Closing the connection — the client went away — makes
Triton cancel the request, and the relay then cancels the callable's task. Triton's generate
extension does not apply a request's priority, so a streamed request with one is a
``ModelStreamInfer`` call (the request written, the writing side closed, the responses read
until the one Triton flags final; cancelling the call cancels the request). Other requests are
one ``ModelInfer`` call. No tritonclient wrapper objects and no numpy on the way: the request is
one BYTES element, the answer one BYTES element (or an FP32 matrix).
"""

import json
import logging
import struct
from typing import AsyncIterator, List, Optional, Sequence, Tuple
from urllib.parse import quote

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

from ..server.security import ACCESS_TOKEN_HEADER
from .contract import EMBEDDING_OUTPUT, PIECE_OUTPUT, REQUEST_INPUT, TEXT_INPUT, OpenAIModel, Piece
from .errors import APIError, from_triton
from .event_stream import EventStreams, HTTPStatusError

__all__ = ["Upstream"]

logger = logging.getLogger(__name__)

_FINAL = "triton_final_response"
_UNLIMITED = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]


class Upstream:
    """Calls to one tritonserver (make it and use it on one running event loop).

    Args:
        grpc_target: ``host:port`` of the gRPC endpoint.
        http_target: ``host:port`` of the HTTP endpoint.
        access_token: sent with every call (the ``inference`` group may be restricted).
    """

    def __init__(self, grpc_target: str, http_target: str, access_token: Optional[str] = None):
        self._channel = grpc.aio.insecure_channel(grpc_target, options=_UNLIMITED)
        self._stub = service_pb2_grpc.GRPCInferenceServiceStub(self._channel)
        self._metadata: Tuple[Tuple[str, str], ...] = ()
        headers = {}
        if access_token:
            self._metadata = ((f"triton-grpc-protocol-{ACCESS_TOKEN_HEADER}", access_token),)
            headers[ACCESS_TOKEN_HEADER] = access_token
        host, port = http_target.rsplit(":", 1)
        self._streams = EventStreams(host, int(port), headers)

    async def close(self) -> None:
        """Close the connections (calls still running are cancelled)."""
        self._streams.close()
        await self._channel.close()

    async def ready(self) -> bool:
        """Whether the server reports ready."""
        try:
            answer = await self._stub.ServerReady(service_pb2.ServerReadyRequest(), metadata=self._metadata)
        except grpc.aio.AioRpcError:
            return False
        return answer.ready

    def stream(self, model: OpenAIModel, payload: bytes, priority: Optional[int]) -> AsyncIterator[Piece]:
        """The pieces a streaming model answers ``payload`` with; closing the iterator cancels the request.

        Raises:
            APIError: Triton refused or failed the request (before or after pieces came).
        """
        if priority is None:
            return self._stream_http(model, payload)
        return self._stream_grpc(model, payload, priority)

    async def _stream_http(self, model: OpenAIModel, payload: bytes) -> AsyncIterator[Piece]:
        body = b'{"%s":%s}' % (REQUEST_INPUT.encode(), json.dumps(payload.decode()).encode())
        events = self._streams.events(f"/v2/models/{quote(model.name, safe='')}/generate_stream", body)
        try:
            async for batch in events:
                for data in batch:
                    answer = json.loads(data)
                    if "error" in answer:
                        raise from_triton(model.name, answer["error"])
                    piece = answer.get(PIECE_OUTPUT)
                    if piece is not None:
                        yield Piece.from_json(piece)
        except HTTPStatusError as exc:
            raise from_triton(model.name, _http_error_message(exc.body), not_found=exc.status == 404) from None
        except OSError as exc:
            raise _unavailable(exc) from None
        finally:
            await events.aclose()  # closes the connection if the answer did not end: Triton cancels the request

    async def _stream_grpc(self, model: OpenAIModel, payload: bytes, priority: int) -> AsyncIterator[Piece]:
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
        return _unavailable(exc)
    return from_triton(model.name, details, not_found=exc.code() == grpc.StatusCode.NOT_FOUND)


def _http_error_message(body: bytes) -> str:
    """The message of Triton's HTTP error body (``{"error": "..."}``), or the body itself."""
    try:
        return str(json.loads(body)["error"])
    except (ValueError, KeyError, TypeError):
        return body.decode("utf-8", "replace")


def _unavailable(exc: Exception) -> APIError:
    logger.warning("the inference server is not available: %s", exc)
    return APIError(503, "the inference server is not available; retry later", "server_error", None, "unavailable")
