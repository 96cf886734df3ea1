"""The user-process end of a decoupled (streaming) model instance's relay.

An asyncio loop on a thread of its own serves the instance's socket; each batch runs as a task
that streams the callable's responses back as RESULT messages, the last flagged FINAL. Batches
run concurrently: a slow one does not hold up the others. Tensors travel inline (no arena):
several batches stream at once. A CANCEL from the backend (every stream of the batch was
cancelled by its client) cancels the batch's task; so does :meth:`StreamServer.cancel` once
every request of a batch was cancelled by its key (:mod:`.cancel_keys`). Either way the
callable's generator is closed and the batch ends with its FINAL, so that Triton ends each
request's stream with its final response.
"""

import asyncio
import contextlib
import logging
import os
import threading
import time
from typing import Any, Dict, Optional, Set, Tuple

from ..relay.protocol import Flags, Kind, ProtocolError, decode_batch, encode_header, failed_result, read_header
from ..relay.transport import Channel, ChannelClosed, FramingError, listen
from .calling import ResponseStream
from .cancel_keys import CANCEL_KEY_PARAMETER, CancelKeys
from .handling import BatchHandler, Flag

__all__ = ["StreamServer"]

logger = logging.getLogger(__name__)

_CLOSE_TIMEOUT_S = 10


class StreamServer:
    """Serves one decoupled model instance: owns its socket, event loop and thread.

    Args:
        busy_flag: where to say whether a batch is streaming (an object with ``value``).
    """

    def __init__(self, *, handler: BatchHandler, stream: ResponseStream, address: str, busy_flag: Optional[Any] = None):
        self._handler = handler
        self._busy = busy_flag if busy_flag is not None else Flag()
        self._stream = stream
        self._listener = listen(address)
        self._loop = asyncio.new_event_loop()
        self._tasks: Set[asyncio.Task] = set()
        self._batches: Dict[Tuple[int, int], asyncio.Task] = {}  # (connection, batch id) -> its task
        self._channels: Dict[int, Channel] = {}
        self._keys = CancelKeys()  # used on the loop's thread only
        self._stopped: Optional[asyncio.Event] = None
        self._started = threading.Event()
        name = os.path.basename(self._listener.path)
        self._thread = threading.Thread(target=self._run, name=f"pytriton_like-stream-{name}", daemon=True)
        self._thread.start()
        self._started.wait()

    def close(self) -> None:
        """Cancel the batches still streaming and stop the loop."""
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop)
            self._thread.join(_CLOSE_TIMEOUT_S)
        if self._thread.is_alive():
            logger.warning("model %s: a callable does not stop; leaving its thread behind", self._handler.model_name)
            return
        self._stream.close()
        self._loop.close()

    def busy(self) -> bool:
        """Whether a batch is still streaming."""
        return bool(self._busy.value)

    def serving(self) -> bool:
        """Whether it takes batches: until it is closed."""
        return self._thread.is_alive()

    def cancel(self, key: str) -> None:
        """Cancel the request tagged with ``key`` (parameter ``CANCEL_KEY_PARAMETER``); from any thread.

        Once every request of its batch is cancelled, the batch ends as for the backend's CANCEL;
        a key of a batch that has not arrived yet is remembered for a while, and that batch then
        ends at once without calling the callable.
        """
        with contextlib.suppress(RuntimeError):  # the loop is closed: nothing streams any more
            self._loop.call_soon_threadsafe(self._cancel_key, key)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._stopped = asyncio.Event()
        self._loop.add_reader(self._listener.fileno(), self._accept)
        self._started.set()
        try:
            self._loop.run_until_complete(self._stopped.wait())
            for task in self._tasks:
                task.cancel()
            if self._tasks:
                self._loop.run_until_complete(asyncio.gather(*self._tasks, return_exceptions=True))
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        finally:
            self._loop.remove_reader(self._listener.fileno())
            for fd, channel in list(self._channels.items()):
                self._loop.remove_reader(fd)
                channel.close()
            self._listener.close()

    def _stop(self) -> None:
        self._stopped.set()

    def _cancel_key(self, key: str) -> None:
        batch = self._keys.cancel(key)
        task = self._batches.get(batch) if batch is not None else None
        if task is not None:
            task.cancel()

    def _accept(self) -> None:
        channel = self._listener.accept()
        self._channels[channel.fileno()] = channel
        self._loop.add_reader(channel.fileno(), self._receive, channel)

    def _drop(self, channel: Channel) -> None:
        fd = channel.fileno()
        self._loop.remove_reader(fd)
        self._channels.pop(fd, None)
        for (owner, _), task in list(self._batches.items()):
            if owner == fd:
                task.cancel()
        channel.close()

    def _receive(self, channel: Channel) -> None:
        try:
            body, fd = channel.recv()
        except ChannelClosed:
            self._drop(channel)
            return
        except (FramingError, OSError) as exc:
            logger.error("model %s: closing a broken connection: %s", self._handler.model_name, exc)
            self._drop(channel)
            return
        if fd is not None:
            os.close(fd)  # no arenas here
        if not body:
            return
        handler = self._handler
        try:
            if body[2:3] == bytes([Kind.HELLO]):
                welcome, _ = handler.welcome(body)
                channel.send([welcome])
                return
            header = read_header(body)
            if header.kind == Kind.CANCEL:
                task = self._batches.get((channel.fileno(), header.batch_id))
                if task is not None:
                    task.cancel()
                return
            batch = decode_batch(body)
        except (ProtocolError, ValueError) as exc:
            logger.error("model %s: malformed message from the backend: %s", handler.model_name, exc)
            with contextlib.suppress(ProtocolError, OSError):
                header = read_header(body)
                if header.kind == Kind.BATCH:
                    channel.send([failed_result(header.batch_id, header.slot, f"malformed batch: {exc}")])
            return
        except OSError:
            self._drop(channel)
            return
        key = (channel.fileno(), batch.batch_id)
        keys = [(request.parameters or {}).get(CANCEL_KEY_PARAMETER) for request in batch.requests]
        if self._keys.add(key, [k if isinstance(k, str) else None for k in keys]):
            # every request was cancelled while it waited in Triton's queue: end it, call nothing
            with contextlib.suppress(OSError):
                channel.send([_final(batch)])
            return
        task = self._loop.create_task(self._run_batch(channel, batch))
        self._tasks.add(task)
        self._busy.value = True
        self._batches[key] = task

        def done(finished, key=key):
            self._tasks.discard(finished)
            self._busy.value = bool(self._tasks)
            self._keys.remove(key)
            if self._batches.get(key) is finished:
                del self._batches[key]
            if finished.cancelled() and not self._stopped.is_set() and self._channels.get(key[0]) is channel:
                # cancelled before it started, so _run_batch could not answer: its slot is freed here
                with contextlib.suppress(OSError):
                    channel.send([_final(batch)])

        task.add_done_callback(done)

    async def _run_batch(self, channel: Channel, batch) -> None:
        handler = self._handler
        started = time.perf_counter_ns()
        requests = batch.requests
        stream = self._stream(requests)
        try:
            try:
                async for responses in stream:
                    parts, _ = handler.result(batch.batch_id, batch.slot, requests, responses, final=False)
                    channel.send(parts)
            finally:
                await stream.aclose()  # the callable's generator closed (its finally runs) before the FINAL
            reply = _final(batch, time.perf_counter_ns() - started)
        except asyncio.CancelledError:
            if self._stopped.is_set() or channel.fileno() not in self._channels:
                raise
            # the backend, or every request's cancel key, cancelled it: say it ended, so that its
            # slot is freed and Triton sends each request's final response
            reply = _final(batch, time.perf_counter_ns() - started)
        except OSError:
            return  # the connection is gone
        except Exception as exc:  # noqa: BLE001 - the stream ends with the error, after what was sent
            reply = handler.failure(batch.batch_id, batch.slot, exc, time.perf_counter_ns() - started)
        with contextlib.suppress(OSError):
            channel.send([reply])


def _final(batch, callable_ns: int = 0) -> bytes:
    """The FINAL RESULT that ends ``batch`` (no response of its own)."""
    return encode_header(Kind.RESULT, flags=Flags.FINAL, batch_id=batch.batch_id, slot=batch.slot, value=callable_ns)
