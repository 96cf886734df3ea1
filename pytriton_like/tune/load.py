"""The load generator: N clients in a closed loop, each sending its next request when its last
one is answered, over HTTP/1.1 with the KServe v2 binary tensor extension, every answer checked.

Each request is encoded once, before any is timed, and answers are compared as bytes with the
first right answer to the same request (decoded and compared as arrays only when the bytes
differ), so that a client costs little CPU: on a machine of few cores the load generator shares
them with the server it measures. Traffic goes only to 127.0.0.1; every loop is bounded in time.
"""

import asyncio
import dataclasses
import json
import time
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from tritonclient.utils import deserialize_bytes_tensor, np_to_triton_dtype, serialize_byte_tensor, triton_to_np_dtype

from .samples import Sample, differences

__all__ = ["Window", "LevelResult", "Checker", "encode_request", "decode_answer", "drive"]

HOST = "127.0.0.1"
_HEADER_LENGTH = b"inference-header-content-length"


@dataclasses.dataclass(frozen=True)
class Window:
    """How long a level is driven: ``warmup_s`` unmeasured, then ``window_s`` measured, longer (up
    to ``max_window_s``) until ``min_requests`` were answered; a request unanswered after
    ``request_timeout_s`` fails."""

    warmup_s: float = 0.3
    window_s: float = 1.0
    min_requests: int = 20
    max_window_s: float = 10.0
    request_timeout_s: float = 60.0


@dataclasses.dataclass
class LevelResult:
    """What one concurrency level measured (latencies in ms, of the answers that came in the window)."""

    concurrency: int
    seconds: float
    latencies_ms: List[float]
    errors: int = 0
    wrong: int = 0
    first_error: Optional[str] = None
    first_wrong: Optional[str] = None

    @property
    def problem(self) -> Optional[str]:
        """The first failure, else the first wrong answer (None: neither)."""
        return self.first_error or self.first_wrong

    @property
    def requests(self) -> int:
        return len(self.latencies_ms)

    @property
    def throughput(self) -> float:
        return self.requests / self.seconds if self.seconds > 0 else 0.0

    def percentile(self, q: float) -> float:
        return float(np.percentile(self.latencies_ms, q)) if self.latencies_ms else float("nan")


def encode_request(model: str, port: int, inputs: Dict[str, np.ndarray]) -> bytes:
    """One HTTP request asking ``model`` for all its outputs, tensors in binary."""
    specs, blobs = [], []
    for name, array in inputs.items():
        if array.dtype.kind in "OSU":
            serialized = serialize_byte_tensor(np.asarray(array, dtype=object))  # one bytes item, not a buffer
            blob = serialized.item() if serialized.size else b""
            datatype = "BYTES"
        else:
            blob = np.ascontiguousarray(array).tobytes()
            datatype = np_to_triton_dtype(array.dtype)
        specs.append({"name": name, "shape": list(array.shape), "datatype": datatype,
                      "parameters": {"binary_data_size": len(blob)}})
        blobs.append(blob)
    header = json.dumps({"inputs": specs, "parameters": {"binary_data_output": True}}).encode()
    body = header + b"".join(blobs)
    head = (
        f"POST /v2/models/{model}/infer HTTP/1.1\r\nHost: {HOST}:{port}\r\n"
        f"Content-Type: application/octet-stream\r\nInference-Header-Content-Length: {len(header)}\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode()
    return head + body


def decode_answer(body: bytes, header_length: int) -> Dict[str, np.ndarray]:
    """The outputs of an answer (binary or JSON tensors)."""
    header = json.loads(body[:header_length] if header_length else body)
    offset = header_length
    outputs = {}
    for output in header.get("outputs", []):
        shape = output["shape"]
        size = (output.get("parameters") or {}).get("binary_data_size")
        if size is None:
            data = output["data"]
            dtype = object if output["datatype"] == "BYTES" else triton_to_np_dtype(output["datatype"])
            array = np.array([item.encode() if isinstance(item, str) else item for item in data], dtype=dtype)
        else:
            blob = body[offset:offset + size]
            offset += size
            if output["datatype"] == "BYTES":
                array = deserialize_bytes_tensor(blob)
            else:
                array = np.frombuffer(blob, dtype=triton_to_np_dtype(output["datatype"]))
        outputs[output["name"]] = array.reshape(shape)
    return outputs


class Checker:
    """Checks each answer against its sample's expected one; a sample without one (the callable
    could not be called here) takes the first answer it gets as its reference."""

    def __init__(self, samples: Sequence[Sample]):
        self.samples = list(samples)
        self._known: List[Optional[bytes]] = [None] * len(self.samples)

    def check(self, index: int, body: bytes, header_length: int) -> Optional[str]:
        if body == self._known[index]:
            return None
        try:
            got = decode_answer(body, header_length)
        except (ValueError, KeyError, TypeError) as exc:
            return f"an answer that does not decode ({type(exc).__name__}: {exc})"
        sample = self.samples[index]
        if sample.expected is None:
            sample.expected = got
        problem = differences(sample.expected, got)
        if problem is None and self._known[index] is None:
            self._known[index] = body
        return problem


class _Connection:
    def __init__(self, port: int):
        self._port = port
        self._reader: Optional[asyncio.StreamReader] = None
        self._writer: Optional[asyncio.StreamWriter] = None

    async def infer(self, wire: bytes) -> Tuple[int, bytes, int]:
        """``(HTTP status, body, inference header length)`` of one request."""
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(HOST, self._port)
        self._writer.write(wire)
        head = await self._reader.readuntil(b"\r\n\r\n")
        status_line, _, rest = head.partition(b"\r\n")
        status = int(status_line.split(b" ", 2)[1])
        length = header_length = 0
        for line in rest.split(b"\r\n"):
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == _HEADER_LENGTH:
                header_length = int(value)
        body = await self._reader.readexactly(length) if length else b""
        return status, body, header_length

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


async def drive(port: int, wires: Sequence[bytes], checker: Checker, concurrency: int, window: Window,
                on_window=None) -> LevelResult:
    """``concurrency`` clients in a closed loop for one level; the answers that come within the
    measured window make the result. ``on_window(start)`` / ``on_window(None)`` is called when the
    window opens and closes (the caller samples the server's CPU then)."""
    result = LevelResult(concurrency=concurrency, seconds=0.0, latencies_ms=[])
    state = {"measuring": False, "stop": False}
    went_wrong = asyncio.Event()  # the first failure or wrong answer ends the level: its numbers will not count
    loop = asyncio.get_running_loop()

    async def client(number: int) -> None:
        connection = _Connection(port)
        index = number
        try:
            while not state["stop"]:
                sample = index % len(wires)
                index += 1
                started = time.perf_counter()
                try:
                    status, body, header_length = await asyncio.wait_for(
                        connection.infer(wires[sample]), window.request_timeout_s
                    )
                except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, ValueError,
                        asyncio.TimeoutError) as exc:
                    result.errors += 1
                    result.first_error = result.first_error or _failure(exc, window)
                    went_wrong.set()
                    connection.close()
                    connection = _Connection(port)
                    continue
                took_ms = (time.perf_counter() - started) * 1e3
                if status != 200:
                    result.errors += 1
                    result.first_error = result.first_error or f"HTTP {status}: {_error_text(body)}"
                    went_wrong.set()
                    continue
                problem = checker.check(sample, body, header_length)
                if problem is not None:
                    result.wrong += 1
                    result.first_wrong = result.first_wrong or f"a wrong answer: {problem}"
                    went_wrong.set()
                elif state["measuring"]:
                    result.latencies_ms.append(took_ms)
        finally:
            connection.close()

    tasks = [asyncio.ensure_future(client(number)) for number in range(concurrency)]
    watched = [*tasks, asyncio.ensure_future(went_wrong.wait())]
    try:
        await _sleep_unless_failed(window.warmup_s, watched)
        state["measuring"] = True
        started = loop.time()
        if on_window is not None:
            on_window(started)
        await _sleep_unless_failed(window.window_s, watched)
        while (result.requests < window.min_requests and loop.time() - started < window.max_window_s
               and not went_wrong.is_set()):
            await _sleep_unless_failed(0.05, watched)
        state["measuring"] = False
        result.seconds = loop.time() - started
        if on_window is not None:
            on_window(None)
        state["stop"] = True
        await asyncio.wait(tasks, timeout=window.request_timeout_s)
    finally:
        state["stop"] = True
        for task in watched:
            task.cancel()
        await asyncio.gather(*watched, return_exceptions=True)
    for task in tasks:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()
    return result


async def _sleep_unless_failed(seconds: float, tasks) -> None:
    """Wait ``seconds``; sooner if a task ended (a client with an exception, raised then; or the
    one that waits for something to go wrong)."""
    done, _ = await asyncio.wait(tasks, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    for task in done:
        if not task.cancelled() and task.exception() is not None:
            raise task.exception()


def _failure(exc: BaseException, window: Window) -> str:
    if isinstance(exc, asyncio.TimeoutError):
        return f"no answer within {window.request_timeout_s:g} s"
    if isinstance(exc, asyncio.IncompleteReadError):
        return "the server closed the connection"
    return f"{type(exc).__name__}: {exc}"


def _error_text(body: bytes) -> str:
    try:
        return str(json.loads(body)["error"])
    except (ValueError, KeyError, TypeError):
        return body[:300].decode("utf-8", "replace")
