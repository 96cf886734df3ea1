"""Upstream's gRPC streams against a small fake of Triton's ModelStreamInfer: one request at a time
per stream, streams reused after a request ended; a request given up is never cancelled through
gRPC: its cancel key is handed on and its stream read on to the final response; close half-closes."""

import asyncio

import grpc
from tritonclient.grpc import service_pb2, service_pb2_grpc

from pytriton_like.openai.contract import PIECE_OUTPUT, ModelKind, OpenAIModel, Piece
from pytriton_like.openai.upstream import Upstream
from pytriton_like.relay_server.cancel_keys import CANCEL_KEY_PARAMETER

MODEL = OpenAIModel("m", ModelKind.TEXT, streaming=True, max_batch_size=1)


class FakeTriton(service_pb2_grpc.GRPCInferenceServiceServicer):
    """Answers each request of a stream with ``pieces`` pieces and an empty final response; counts
    the streams opened; with ``one_request_per_stream`` ends each stream after its first request."""

    def __init__(self, pieces=2, one_request_per_stream=False):
        self.pieces = pieces
        self.one_request_per_stream = one_request_per_stream
        self.streams = 0
        self.keys = []  # each request's cancel key
        self.cancelled = asyncio.Event()
        self.half_closed = 0  # streams the client ended with END_STREAM

    async def ModelStreamInfer(self, request_iterator, context):
        self.streams += 1
        ended = False
        try:
            async for request in request_iterator:
                self.keys.append(request.parameters[CANCEL_KEY_PARAMETER].string_param)
                for index in range(self.pieces):
                    yield self.answer(request.id, Piece(f"p{index}").to_json(), final=False)
                    await asyncio.sleep(0.001)
                yield self.answer(request.id, None, final=True)
                if self.one_request_per_stream:
                    break
            else:
                self.half_closed += 1
            ended = True
        finally:
            if not ended:  # the client cancelled the stream
                self.cancelled.set()

    @staticmethod
    def answer(request_id, piece, final):
        response = service_pb2.ModelInferResponse(model_name="m", id=request_id)
        if piece is not None:
            response.outputs.add(name=PIECE_OUTPUT, datatype="BYTES", shape=[1, 1])
            response.raw_output_contents.append(len(piece).to_bytes(4, "little") + piece)
        response.parameters["triton_final_response"].bool_param = final
        return service_pb2.ModelStreamInferResponse(infer_response=response)


async def serving(fake, body, on_abandoned=None):
    server = grpc.aio.server()
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(fake, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    upstream = Upstream(f"127.0.0.1:{port}", on_abandoned=on_abandoned)
    try:
        return await body(upstream)
    finally:
        await upstream.close()
        await server.stop(1)


async def texts(upstream):
    return [piece.text async for piece in upstream.stream(MODEL, b"{}", None)]


def test_a_stream_carries_the_next_request_once_one_ended():
    fake = FakeTriton()

    async def body(upstream):
        return [await texts(upstream) for _ in range(3)]

    assert asyncio.run(serving(fake, body)) == [["p0", "p1"]] * 3
    assert fake.streams == 1


def test_a_stream_that_ended_meanwhile_is_replaced():
    fake = FakeTriton(one_request_per_stream=True)

    async def body(upstream):
        first = await texts(upstream)
        await asyncio.sleep(0.1)  # the fake ends the stream
        return first, await texts(upstream)

    assert asyncio.run(serving(fake, body)) == (["p0", "p1"], ["p0", "p1"])
    assert fake.streams == 2


def test_a_request_given_up_hands_on_its_key_and_its_stream_is_read_to_the_end_then_reused():
    fake = FakeTriton(pieces=50)
    abandoned = []

    async def body(upstream):
        pieces = upstream.stream(MODEL, b"{}", None)
        assert (await pieces.__anext__()).text == "p0"
        await pieces.aclose()  # the client went away
        await asyncio.sleep(0.3)  # the fake sends the rest (50 ms), read on in the background
        return len(await texts(upstream))

    assert asyncio.run(serving(fake, body, on_abandoned=lambda model, key: abandoned.append((model, key)))) == 50
    assert not fake.cancelled.is_set()  # never RST_STREAM
    assert fake.streams == 1  # the stream was read to its final response, then carried the next request
    assert abandoned == [("m", fake.keys[0])] and len(set(fake.keys)) == 2


def test_a_request_given_up_while_awaited_is_not_cancelled_either():
    fake = FakeTriton(pieces=50)
    abandoned = []

    async def body(upstream):
        async def consume():
            async for _ in upstream.stream(MODEL, b"{}", None):
                await asyncio.sleep(0.01)

        task = asyncio.ensure_future(consume())
        await asyncio.sleep(0.05)
        task.cancel()  # as aiohttp cancels the handler of a client that went away
        await asyncio.gather(task, return_exceptions=True)

    asyncio.run(serving(fake, body, on_abandoned=lambda model, key: abandoned.append(key)))
    assert not fake.cancelled.is_set() and abandoned == fake.keys


def test_close_half_closes_the_kept_streams():
    fake = FakeTriton()

    async def body(upstream):
        await asyncio.gather(*(texts(upstream) for _ in range(3)))

    asyncio.run(serving(fake, body))
    assert fake.streams == 3 and fake.half_closed == 3 and not fake.cancelled.is_set()


def test_concurrent_requests_each_get_their_own_stream():
    fake = FakeTriton(pieces=20)

    async def body(upstream):
        return await asyncio.gather(*(texts(upstream) for _ in range(4)))

    answers = asyncio.run(serving(fake, body))
    assert answers == [[f"p{i}" for i in range(20)]] * 4 and fake.streams == 4
