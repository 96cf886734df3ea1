"""The load generator against a stand-in HTTP server: requests as Triton reads them, answers checked."""

import asyncio
import json

import numpy as np
import pytest

from pytriton_like.model_config import Tensor
from pytriton_like.tune.load import Checker, Window, decode_answer, drive, encode_request
from pytriton_like.tune.samples import differences, make_samples, reference_answers
from pytriton_like.decorators import batch


def _parse_request(wire: bytes):
    head, _, body = wire.partition(b"\r\n\r\n")
    headers = dict(line.split(": ", 1) for line in head.decode().split("\r\n")[1:])
    header_length = int(headers["Inference-Header-Content-Length"])
    assert int(headers["Content-Length"]) == len(body)
    return json.loads(body[:header_length]), body[header_length:]


def _answer(outputs) -> bytes:
    """An HTTP answer as Triton writes one: a JSON header, then the binary tensors."""
    specs, blobs = [], []
    for name, array in outputs.items():
        blob = array.tobytes()
        specs.append({"name": name, "datatype": "FP32", "shape": list(array.shape),
                      "parameters": {"binary_data_size": len(blob)}})
        blobs.append(blob)
    header = json.dumps({"model_name": "m", "outputs": specs}).encode()
    body = header + b"".join(blobs)
    return (f"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nInference-Header-Content-Length:"
            f" {len(header)}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


def test_a_request_carries_each_input_in_binary_and_asks_for_binary_outputs():
    wire = encode_request("m", 8000, {"x": np.arange(3, dtype=np.float32).reshape(1, 3),
                                      "s": np.array([[b"ab", b"c"]], dtype=object)})
    assert wire.startswith(b"POST /v2/models/m/infer HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n")
    header, blobs = _parse_request(wire)
    assert header["parameters"] == {"binary_data_output": True}
    x, s = header["inputs"]
    assert (x["datatype"], x["shape"], x["parameters"]["binary_data_size"]) == ("FP32", [1, 3], 12)
    assert (s["datatype"], s["shape"]) == ("BYTES", [1, 2])
    assert blobs[:12] == np.arange(3, dtype=np.float32).tobytes() and blobs[12:] == b"\x02\x00\x00\x00ab\x01\x00\x00\x00c"


def test_answers_decode_binary_and_json_tensors():
    answer = _answer({"y": np.ones((1, 2), np.float32)})
    head, _, body = answer.partition(b"\r\n\r\n")
    length = int(dict(line.split(b": ", 1) for line in head.split(b"\r\n")[1:])[b"Inference-Header-Content-Length"])
    np.testing.assert_array_equal(decode_answer(body, length)["y"], np.ones((1, 2), np.float32))
    plain = json.dumps({"outputs": [{"name": "t", "datatype": "BYTES", "shape": [1, 1], "data": ["ok"]}]}).encode()
    assert decode_answer(plain, 0)["t"].tolist() == [[b"ok"]]


def test_samples_differ_per_request_and_the_reference_is_the_callable_alone():
    @batch
    def double(x):
        return {"y": x * 2}

    samples = make_samples([Tensor(name="x", dtype=np.float32, shape=(-1,))], True, {"x": [3]})
    assert [s.inputs["x"].tolist() for s in samples[:2]] == [[[1, 1, 1]], [[2, 2, 2]]]
    reference_answers(double, samples)
    assert samples[1].expected["y"].tolist() == [[4, 4, 4]]
    assert differences({"y": np.float32([1.0])}, {"y": np.float32([1.00001])}) is None  # within the tolerance
    assert differences({"y": np.int64([1])}, {"y": np.int64([2])}) == "output y: [2], expected [1]"
    assert differences({"y": np.ones((1, 2))}, {"y": np.ones((2, 1))}) == "output y: shape [2, 1], expected [1, 2]"
    with pytest.raises(ValueError, match="does not fit"):
        make_samples([Tensor(name="x", dtype=np.float32, shape=(-1,))], True, {"x": [3, 4]})


async def _serve_stand_in(handler):
    """A loopback HTTP server answering each request with ``handler(header, blobs)``; returns (server, port)."""
    async def connection(reader, writer):
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = int(next(line.split(b": ")[1] for line in head.split(b"\r\n") if line.startswith(b"Content-Length")))
                body = await reader.readexactly(length)
                writer.write(handler(*_parse_request(head + body)))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


def _double_handler(header, blobs):
    x = np.frombuffer(blobs, np.float32).reshape(header["inputs"][0]["shape"])
    return _answer({"y": x * 2})


def _run_level(handler, concurrency, wrong_after=None):
    samples = make_samples([Tensor(name="x", dtype=np.float32, shape=(-1,))], True, {})
    for sample in samples:
        sample.expected = {"y": sample.inputs["x"] * 2}

    async def main():
        server, port = await _serve_stand_in(handler)
        try:
            wires = [encode_request("m", port, s.inputs) for s in samples]
            window = Window(warmup_s=0.05, window_s=0.2, min_requests=5, max_window_s=2, request_timeout_s=5)
            return await drive(port, wires, Checker(samples), concurrency, window)
        finally:
            server.close()
            await server.wait_closed()

    return asyncio.run(main())


def test_a_level_counts_the_answers_of_its_window_and_checks_each():
    result = _run_level(_double_handler, 4)
    assert result.requests >= 5 and result.errors == 0 and result.wrong == 0 and result.problem is None
    assert result.throughput > 0 and 0 < result.percentile(50) <= result.percentile(99)


def test_a_wrong_answer_and_an_error_are_counted_and_said():
    wrong = _run_level(lambda header, blobs: _answer({"y": np.zeros((1, 1), np.float32)}), 2)
    assert wrong.wrong > 0 and wrong.requests == 0
    assert wrong.problem.startswith("a wrong answer: output y: [0], expected [")
    failing = _run_level(lambda header, blobs: b"HTTP/1.1 400 Bad Request\r\nContent-Length: 21\r\n\r\n"
                         b'{"error":"it broke!"}', 2)
    assert failing.errors > 0 and failing.problem == "HTTP 400: it broke!"
