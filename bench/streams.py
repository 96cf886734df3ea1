"""The OpenAI-style streaming client of the benchmarks: chat completions read as server-sent events.

One client for every server that streams ``/v1/chat/completions`` (pytriton_like's OpenAI
endpoint, LitServe's ``OpenAISpec``, the Ray Serve app of ``serve_ray.py``), as lean as the
protocol allows: aiohttp reads the raw events and a piece is recognised by its bytes, without
parsing its JSON (parsing is the client's cost, not the server's; :func:`check_stream` parses
every event once, before anything is timed). No openai package.

- :func:`read_stream`: one streamed answer: the time to its first piece, its pieces, whether it
  ended with ``data: [DONE]``;
- :func:`first_pieces`: the time to the first piece of requests sent one after another (c1);
- :func:`pieces_per_second`: pieces per second with clients asking one after another (c16).

Every loop is bounded in count and in time.
"""

import asyncio
import dataclasses
import json
import time
from typing import Awaitable, Callable, Dict, List, Optional, Sequence

import aiohttp

__all__ = ["StreamError", "StreamResult", "chat_body", "expected_text", "read_stream", "check_stream", "first_pieces",
           "pieces_per_second", "session"]

_EMPTY = (b'"content":""', b'"content": ""', b'"content":null', b'"content": null')
REQUEST_TIMEOUT_S = 60


class StreamError(RuntimeError):
    """A stream answered with an HTTP status other than 200."""

    def __init__(self, url: str, status: int, body: bytes):
        super().__init__(f"{url}: status {status}: {body[:300]!r}")
        self.status = status


@dataclasses.dataclass
class StreamResult:
    """One streamed answer: seconds to the first piece (None: none came), pieces, whether the
    stream ended with ``data: [DONE]``, and whether the client closed it on purpose (``cut``)."""

    first_s: Optional[float]
    pieces: int
    done: bool
    cut: bool = False


def chat_body(model: str) -> bytes:
    return json.dumps({"model": model, "messages": [{"role": "user", "content": "go"}], "stream": True}).encode()


def expected_text(pieces: int) -> str:
    """What the benchmarks' streaming models answer: `` t0 t1 ...``."""
    return "".join(f" t{index}" for index in range(pieces))


def session(connections: int = 64) -> aiohttp.ClientSession:
    return aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=connections),
                                 timeout=aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S))


def _is_piece(line: bytes) -> bool:
    return line.startswith(b"data: {") and b'"content":' in line and not any(empty in line for empty in _EMPTY)


async def read_stream(client: aiohttp.ClientSession, url: str, body: bytes, *,
                      cut_after: Optional[int] = None) -> StreamResult:
    """Stream one answer; with ``cut_after``, close the connection after that many pieces."""
    started = time.perf_counter()
    first, pieces, done = None, 0, False
    async with client.post(url, data=body, headers={"Content-Type": "application/json"}) as response:
        if response.status != 200:
            raise StreamError(url, response.status, await response.read())
        async for line in response.content:
            if _is_piece(line):
                pieces += 1
                if first is None:
                    first = time.perf_counter() - started
                if cut_after is not None and pieces >= cut_after:
                    response.close()
                    return StreamResult(first, pieces, False, cut=True)
            elif line.startswith(b"data: [DONE]"):
                done = True
    return StreamResult(first, pieces, done)


async def check_stream(url: str, model: str, pieces: int) -> None:
    """One answer, every event parsed: its text must be :func:`expected_text` and it must end
    with ``[DONE]``; the byte check :func:`read_stream` uses must count the same pieces."""
    async with session(1) as client:
        async with client.post(url, data=chat_body(model), headers={"Content-Type": "application/json"}) as response:
            raw = await response.read()
            if response.status != 200:
                raise StreamError(url, response.status, raw)
    text, counted, done = [], 0, False
    for line in raw.splitlines():
        if line.startswith(b"data: [DONE]"):
            done = True
        elif line.startswith(b"data: "):
            for choice in json.loads(line[6:])["choices"]:
                text.append((choice.get("delta") or {}).get("content") or "")
            counted += _is_piece(line)
    if "".join(text) != expected_text(pieces) or counted != pieces or not done:
        raise RuntimeError(f"{url}: a wrong stream: {counted} pieces counted, [DONE] {done}, text {''.join(text)[:80]!r}")


async def first_pieces(once: Callable[[], Awaitable[StreamResult]], *, requests: int, pieces: int, warmup: int = 5,
                       time_limit_s: float = 60.0) -> Dict[str, float]:
    """``requests`` answers one after another (after ``warmup``): the time to the first piece in
    ms (p50, p90) and of the whole answer (p50); every answer must be whole."""
    for _ in range(warmup):
        await once()
    firsts: List[float] = []
    wholes: List[float] = []
    deadline = time.monotonic() + time_limit_s
    while len(firsts) < requests and time.monotonic() < deadline:
        started = time.perf_counter()
        result = await once()
        wholes.append((time.perf_counter() - started) * 1e3)
        if result.pieces != pieces or result.first_s is None:
            raise RuntimeError(f"a stream of {result.pieces} pieces, not {pieces}")
        firsts.append(result.first_s * 1e3)
    firsts.sort()
    wholes.sort()
    return {"requests": len(firsts), "first_p50_ms": firsts[len(firsts) // 2],
            "first_p90_ms": firsts[int(len(firsts) * 0.9)], "whole_p50_ms": wholes[len(wholes) // 2]}


async def pieces_per_second(clients: Sequence[Callable[[], Awaitable[StreamResult]]], *, seconds: float,
                            pieces: int) -> Dict[str, float]:
    """Each client streams answers one after another for ``seconds``: pieces per second over all,
    and how many answers were not whole (fewer pieces, no ``[DONE]``) or failed."""
    counted = {"pieces": 0, "streams": 0, "not_whole": 0, "failed": 0}
    deadline = time.perf_counter() + seconds

    async def loop(once):
        while time.perf_counter() < deadline:
            try:
                result = await once()
            except (aiohttp.ClientError, asyncio.TimeoutError, RuntimeError):
                counted["failed"] += 1
                await asyncio.sleep(0.01)
                continue
            counted["pieces"] += result.pieces
            counted["streams"] += 1
            counted["not_whole"] += result.pieces != pieces or not result.done

    started = time.perf_counter()
    await asyncio.gather(*(loop(once) for once in clients))
    return {"pieces_per_s": counted["pieces"] / (time.perf_counter() - started), **counted}
