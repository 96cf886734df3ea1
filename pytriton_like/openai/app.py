"""The OpenAI endpoint's routes (aiohttp): each request checked, forwarded to Triton, answered as OpenAI does.

Routes: ``GET /v1/models`` (and ``/v1/models/{model}``), ``POST /v1/chat/completions``,
``POST /v1/completions``, ``POST /v1/embeddings``, and ``GET /health`` (200 while tritonserver
reports ready, else 503; no key needed). A streamed answer is sent once the model gave its first
piece, so that a request Triton refuses (full queue, unknown model, a callable failing at once)
still gets its status code; an error after that is one last ``data: {"error": ...}`` event.
A client that reads more slowly than the model generates gets, once ``max_unread_bytes`` of a
stream's events wait to be sent, one last error event (code ``slow_reader``) and its request's
generation is stopped, so that one slow client costs bounded memory here and in tritonserver.
"""

import asyncio
import hmac
import json
import logging
import time
from typing import AsyncIterator, Callable, Dict, List, Optional

from aiohttp import web

from ..server.config import DEFAULT_OPENAI_MAX_UNREAD_BYTES
from .contract import ModelKind, OpenAIModel
from .errors import APIError, bad_request, internal_error, not_found_model
from .requests import Generation, parse_chat, parse_completion, parse_embedding
from .responses import DONE_EVENT, Choice, Reply, embeddings_body, event
from .upstream import Upstream

__all__ = ["Routes"]

logger = logging.getLogger(__name__)

_SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
_END = object()


class Routes:
    """The handlers of one endpoint.

    Args:
        upstream: the calls to tritonserver.
        catalog: the models served now, by name (bound models following the contract).
        api_key: the key every ``/v1`` request must carry as ``Authorization: Bearer``, or None.
        max_unread_bytes: per stream, the most bytes of events generated but not yet sent to the
            client (waiting here, or in the connection's write buffer).
    """

    def __init__(self, upstream: Upstream, catalog: Callable[[], Dict[str, OpenAIModel]], api_key: Optional[str],
                 max_unread_bytes: int = DEFAULT_OPENAI_MAX_UNREAD_BYTES):
        self._upstream = upstream
        self._catalog = catalog
        self._expected = f"Bearer {api_key}".encode() if api_key else None
        self._created = int(time.time())
        self._max_unread_bytes = max_unread_bytes

    def application(self, max_body_bytes: int) -> web.Application:
        """The aiohttp application."""
        app = web.Application(middlewares=[self._errors], client_max_size=max_body_bytes)
        app.router.add_get("/v1/models", self.list_models)
        app.router.add_get("/v1/models/{model:.+}", self.get_model)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/completions", self.completions)
        app.router.add_post("/v1/embeddings", self.embeddings)
        app.router.add_get("/health", self.health)
        return app

    @web.middleware
    async def _errors(self, request: web.Request, handler) -> web.StreamResponse:
        try:
            if request.path.startswith("/v1/"):
                self._authorize(request)
            return await handler(request)
        except APIError as error:
            return web.json_response(error.body(), status=error.status)
        except web.HTTPException as exc:  # aiohttp's own: unknown route, wrong method, body too large
            error = APIError(exc.status, exc.reason, "invalid_request_error", None, None)
            return web.json_response(error.body(), status=exc.status)
        except Exception as exc:  # noqa: BLE001 - a bug of ours: OpenAI's 500, the traceback in the log
            error = internal_error(exc)
            return web.json_response(error.body(), status=error.status)

    def _authorize(self, request: web.Request) -> None:
        if self._expected is None:
            return
        given = request.headers.get("Authorization", "").encode()
        if not hmac.compare_digest(given, self._expected):
            raise APIError(401, "Incorrect API key provided", "invalid_request_error", None, "invalid_api_key")

    # -- models ------------------------------------------------------------------------------

    async def list_models(self, request: web.Request) -> web.Response:
        data = [self._model_object(name) for name in sorted(self._catalog())]
        return web.json_response({"object": "list", "data": data})

    async def get_model(self, request: web.Request) -> web.Response:
        name = request.match_info["model"]
        if name not in self._catalog():
            raise not_found_model(name)
        return web.json_response(self._model_object(name))

    def _model_object(self, name: str) -> dict:
        return {"id": name, "object": "model", "created": self._created, "owned_by": "pytriton_like"}

    def _model(self, name: str, kind: ModelKind) -> OpenAIModel:
        model = self._catalog().get(name)
        if model is None:
            raise not_found_model(name)
        if model.kind is not kind:
            what = "an embedding model" if model.kind is ModelKind.EMBEDDING else "a text model"
            raise bad_request(f"model {name!r} is {what}: it does not serve this endpoint", "model", "wrong_model_kind")
        return model

    async def health(self, request: web.Request) -> web.Response:
        ready = await self._upstream.ready()
        return web.json_response({"status": "ready" if ready else "not ready"}, status=200 if ready else 503)

    # -- generation ----------------------------------------------------------------------------

    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, parse_chat(await _body(request)), chat=True)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, parse_completion(await _body(request)), chat=False)

    async def _generate(self, request: web.Request, generation: Generation, chat: bool) -> web.StreamResponse:
        model = self._model(generation.model, ModelKind.TEXT)
        reply = Reply(chat, generation.model, generation.choices)
        pieces = self._pieces(model, reply.choices, generation.priority)
        try:
            if not generation.stream:
                async for choice, piece in pieces:
                    if piece is not _END:
                        choice.add(piece)
                return web.json_response(reply.body())
            return await self._stream(request, reply, pieces, generation.include_usage)
        finally:
            await pieces.aclose()  # the client went away, or an error: the requests are cancelled

    async def _stream(self, request: web.Request, reply: Reply, pieces: AsyncIterator, include_usage: bool):
        first = await pieces.__anext__()  # an error now is answered with its status code
        response = web.StreamResponse(headers=_SSE_HEADERS)
        await response.prepare(request)
        events = [reply.first_chunk(choice) for choice in reply.choices] if reply.chat else []
        if self._events(reply, [first], events, include_usage):
            await response.write(b"".join(events))
            await response.write_eof()
            return response
        await response.write(b"".join(events))  # the first token, with the headers and the role
        # Then a reader task takes the pieces as they come, and each write sends every event that
        # arrived since the last one: one send per piece when the endpoint keeps up, fewer when busy.
        outbox = _Outbox()
        limit = self._max_unread_bytes

        async def read() -> None:
            try:
                async for item in pieces:
                    events = []
                    self._events(reply, [item], events, include_usage)
                    outbox.put(events)
                    if outbox.size + _write_buffer_size(request) > limit:
                        outbox.put([event(_slow_reader(limit).body())], end=True)
                        response.force_close()  # the connection closes once the client read the error
                        await pieces.aclose()  # the request is given up: its generation stops
                        return
                events = []
                self._events(reply, [_END], events, include_usage)
                outbox.put(events, end=True)
            except APIError as error:
                outbox.put([event(error.body())], end=True)
            except Exception as exc:  # noqa: BLE001 - the stream ends with an error event, not silence
                outbox.put([event(internal_error(exc).body())], end=True)

        reader = asyncio.ensure_future(read())
        try:
            while True:
                data, ended = await outbox.take()
                await response.write(data)
                if ended:
                    break
            await response.write_eof()
            return response
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)

    @staticmethod
    def _events(reply: Reply, items: list, events: List[bytes], include_usage: bool) -> bool:
        """Add the events of ``items`` to ``events``; whether the stream ended."""
        for item in items:
            if item is _END:
                if include_usage:
                    events.append(reply.usage_chunk())
                events.append(DONE_EVENT)
                return True
            if isinstance(item, APIError):
                events.append(event(item.body()))
                return True
            choice, piece = item
            if piece is _END:
                events.append(reply.last_chunk(choice))
            else:
                choice.add(piece)
                if piece.text:
                    events.append(reply.piece_chunk(choice, piece))
        return False

    async def _pieces(self, model: OpenAIModel, choices: List[Choice], priority: Optional[int]) -> AsyncIterator:
        """``(choice, piece)`` as the models give them, ``(choice, _END)`` when a choice ended.

        One choice is read directly; several are read by one task each, merged through a queue.
        """
        if len(choices) == 1:
            choice = self._choice(model, choices[0], priority)
            try:
                async for item in choice:
                    yield item
            finally:
                await choice.aclose()  # now, not when collected: its request is given up at once
            return
        queue: asyncio.Queue = asyncio.Queue()

        async def produce(choice: Choice) -> None:
            try:
                async for item in self._choice(model, choice, priority):
                    await queue.put(item)
            except APIError as error:
                await queue.put(error)
            except Exception as exc:  # noqa: BLE001 - as in _stream's reader: an error, not a hang
                await queue.put(internal_error(exc))

        tasks = [asyncio.ensure_future(produce(choice)) for choice in choices]
        try:
            ended = 0
            while ended < len(choices):
                item = await queue.get()
                if isinstance(item, APIError):
                    raise item
                ended += item[1] is _END
                yield item
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _choice(self, model: OpenAIModel, choice: Choice, priority: Optional[int]) -> AsyncIterator:
        payload = choice.request.to_json()
        if model.streaming:
            stream = self._upstream.stream(model, payload, priority)
            try:
                async for piece in stream:
                    yield choice, piece
            finally:
                await stream.aclose()
        else:
            yield choice, await self._upstream.answer(model, payload, priority)
        yield choice, _END

    # -- embeddings ------------------------------------------------------------------------------

    async def embeddings(self, request: web.Request) -> web.Response:
        parsed = parse_embedding(await _body(request))
        model = self._model(parsed.model, ModelKind.EMBEDDING)
        size = model.max_batch_size
        texts = [text.encode("utf-8") for text in parsed.texts]
        parts = [texts[start : start + size] for start in range(0, len(texts), size)]
        answers = await asyncio.gather(*(self._upstream.embed(model, part, parsed.priority) for part in parts))
        vectors = [vector for answer in answers for vector in answer]
        return web.json_response(embeddings_body(parsed.model, vectors, parsed.texts, parsed.base64))


class _Outbox:
    """One stream's events waiting to be written, their size, and whether the stream ended."""

    def __init__(self):
        self._events: List[bytes] = []
        self.size = 0
        self._ended = False
        self._ready = asyncio.Event()

    def put(self, events: List[bytes], end: bool = False) -> None:
        self._events.extend(events)
        self.size += sum(len(e) for e in events)
        self._ended = self._ended or end
        self._ready.set()

    async def take(self):
        """Every event waiting (once one is), joined, and whether the stream ended with them."""
        await self._ready.wait()
        await asyncio.sleep(0)  # let the pieces already received join this write
        data, ended = b"".join(self._events), self._ended
        self._events, self.size = [], 0
        self._ready.clear()
        return data, ended


def _write_buffer_size(request: web.Request) -> int:
    transport = request.transport
    return transport.get_write_buffer_size() if transport is not None else 0


def _slow_reader(limit: int) -> APIError:
    return APIError(
        500,
        f"the stream was ended: its client read it more slowly than the model generated it, and {limit} bytes"
        " waited to be sent (the server's TritonConfig.openai_max_unread_bytes)",
        "server_error", None, "slow_reader",
    )


async def _body(request: web.Request):
    try:
        return json.loads(await request.read())
    except (ValueError, UnicodeDecodeError):
        raise bad_request("the request body is not valid JSON") from None

