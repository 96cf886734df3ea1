"""The user-process end of a decoupled (streaming) model instance's relay.

An asyncio loop on a thread of its own serves the instance's socket; each batch runs as a task
that streams the callable's responses back as RESULT messages, the last flagged FINAL. Batches
run concurrently: a slow one does not hold up the others.
"""

import asyncio
import logging
import os
import threading
import time
from typing import Optional, Set

import zmq
import zmq.asyncio

from ..proxy.protocol import Flags, Kind, Message, ProtocolError, decode_message, encode_message
from .calling import ResponseStream
from .handling import BatchHandler

__all__ = ["StreamWorker"]

logger = logging.getLogger(__name__)

_CLOSE_TIMEOUT_S = 10


class StreamWorker:
    """Serves one decoupled model instance: owns its context, socket, event loop and thread.

    Tensors go back as frames (no arena): several batches stream at once.
    """

    def __init__(self, *, handler: BatchHandler, stream: ResponseStream, address: str):
        self._handler = handler
        self._stream = stream
        self._context = zmq.asyncio.Context()
        self._socket = self._context.socket(zmq.ROUTER)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.bind(address)
        os.chmod(address[len("ipc://") :], 0o600)  # only the server's user may connect (docs/security.md)
        self._loop = asyncio.new_event_loop()
        self._tasks: Set[asyncio.Task] = set()
        self._main: Optional[asyncio.Task] = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"pytriton_like-stream-{address}", daemon=True)
        self._thread.start()
        self._started.wait()

    def close(self) -> None:
        """Cancel the batches still streaming and stop the loop."""
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._cancel)
            self._thread.join(_CLOSE_TIMEOUT_S)
        if self._thread.is_alive():
            logger.warning("model %s: a callable does not stop; leaving its worker behind", self._handler.model_name)
            return
        self._stream.close()
        self._socket.close(linger=0)
        self._context.term()
        self._loop.close()

    @property
    def busy(self) -> bool:
        """Whether a batch is still streaming."""
        return bool(self._tasks)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._main = self._loop.create_task(self._serve())
        self._started.set()
        try:
            self._loop.run_until_complete(self._main)
        except asyncio.CancelledError:
            pass
        finally:
            pending = [task for task in self._tasks if not task.done()]
            if pending:
                self._loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())

    def _cancel(self) -> None:
        for task in (*self._tasks, self._main):
            if task is not None:
                task.cancel()

    async def _serve(self) -> None:
        while True:
            peer, *frames = await self._socket.recv_multipart()
            try:
                message = decode_message(frames, writable=True)
            except ProtocolError as exc:
                logger.error("model %s: dropping a malformed message: %s", self._handler.model_name, exc)
                continue
            if message.kind is Kind.HELLO:
                await self._socket.send_multipart([peer, *self._handler.welcome(message)])
            elif message.kind is Kind.BATCH:
                task = asyncio.ensure_future(self._run_batch(peer, message))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            else:
                logger.error("model %s: unexpected %s message", self._handler.model_name, message.kind.name)

    async def _run_batch(self, peer: bytes, message: Message) -> None:
        handler = self._handler
        started = time.perf_counter_ns()
        try:
            requests = handler.requests(message)
            async for responses in self._stream(requests):
                frames = handler.result(message.batch_id, requests, responses, flags=Flags.NONE)
                await self._socket.send_multipart([peer, *frames])
            reply = encode_message(
                Kind.RESULT, message.batch_id, flags=Flags.FINAL, extra={"c": time.perf_counter_ns() - started}
            )
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the stream ends with the error, after what was sent
            reply = handler.failure(message.batch_id, exc, callable_ns=time.perf_counter_ns() - started)
        await self._socket.send_multipart([peer, *reply])
