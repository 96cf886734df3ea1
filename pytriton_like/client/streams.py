"""The gRPC streams of ``DecoupledModelClient``: one per request in flight, pooled.

Each request gets a gRPC stream of its own (tritonclient.grpc has one stream per client, and a
stream's headers are fixed when it opens). The tritonclient.grpc clients that carry the streams
are pooled: a stream whose request finished carries the next one. A stream is cancelled only
while its request is still running (the caller left early); one whose request is over is ended
gracefully.
"""

import enum
import logging
import queue
import threading
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from .connections import tritonclient_module
from .core import is_final_response
from .url import Protocol

__all__ = ["End", "StreamedRequest", "Stream", "StreamPool"]

_LOGGER = logging.getLogger(__name__)


class End(enum.Enum):
    """How the request on a stream ended, which decides what becomes of the stream."""

    FINISHED = "finished"  # Triton's final flag came: nothing more can arrive, the stream carries the next request
    FAILED = "failed"  # an error came, the request's last response: close the stream without cancelling
    LEFT = "left"  # the caller stopped reading (timeout, break, close): cancel the rest


class StreamedRequest:
    """One request on a stream: the ``(result, error)`` pairs tritonclient delivers, and whether it is over."""

    def __init__(self) -> None:
        self.responses: "queue.SimpleQueue[Tuple[Any, Any]]" = queue.SimpleQueue()
        self.over = threading.Event()  # its last response or an error came, or it was cancelled

    def deliver(self, result: Any, error: Any) -> None:
        self.responses.put((result, error))
        if error is not None or is_final_response(result):
            self.over.set()


class Stream:
    """One tritonclient.grpc client and its gRPC stream, which carries one request at a time.

    tritonclient calls back from a thread of its own; the responses wait on the request's
    queue for the thread that iterates them. A stream whose request ended cleanly (Triton's
    final-response flag came, so nothing more can arrive for it) stays open for the next
    request with the same headers: opening a stream costs a thread and a round trip.
    """

    def __init__(self, address: str):
        self._client = tritonclient_module(Protocol.GRPC, asyncio=False).InferenceServerClient(address)
        self._lock = threading.Lock()  # send() and close() may run in different threads
        self._open = False
        self._broken = False  # something came while no request ran: the stream broke (e.g. a server restart)
        self._headers: Optional[Dict[str, str]] = None
        self._request: Optional[StreamedRequest] = None

    def _deliver(self, result: Any, error: Any) -> None:
        request = self._request
        if request is None or request.over.is_set():
            self._broken = True
            return
        request.deliver(result, error)

    def send(self, request_kwargs: Dict[str, Any], headers: Optional[Dict[str, str]]) -> StreamedRequest:
        """Sends a request, on a new stream if needed; returns the request its responses come to."""
        request = StreamedRequest()
        with self._lock:
            if self._open and (headers != self._headers or self._broken):
                # other headers, or the idle stream broke: start anew; nothing is in flight,
                # so the server just ends the old stream
                self._client.stop_stream(cancel_requests=False)
                self._open = False
            if not self._open:
                self._client.start_stream(callback=self._deliver, headers=headers)
                self._open, self._broken, self._headers = True, False, headers
            self._request = request
        self._client.async_stream_infer(**request_kwargs, enable_empty_final_response=True)
        return request

    def close(self, cancel: bool = True) -> None:
        """Ends the stream and closes the connection.

        Args:
            cancel: cancel what the server still does on the stream (an iterator waiting on it
                gets a CANCELLED error); otherwise close the request side and wait for the
                server to end the stream.
        """
        with self._lock:
            if self._open:
                self._open = False
                self._client.stop_stream(cancel_requests=cancel)
        try:
            self._client.close()
        except Exception:  # noqa: BLE001 - closing must not fail
            _LOGGER.debug("error while closing a tritonclient.grpc client", exc_info=True)


class StreamPool:
    """The streams of one client: idle ones to reuse, busy ones to cancel at ``close()``."""

    def __init__(self, address: str):
        self._address = address
        self._lock = threading.Lock()
        self._idle: List[Stream] = []
        self._busy: Set[Stream] = set()
        # streams of iterators dropped unfinished; their finalizer must not take the lock
        self._abandoned: "queue.SimpleQueue[Tuple[Stream, Optional[StreamedRequest]]]" = queue.SimpleQueue()
        self._running_on: List[Tuple[Stream, StreamedRequest]] = []  # dropped, their requests still running
        self._closed = False

    def acquire(self, check_open: Callable[[], None]) -> Stream:
        """An idle stream, or a new one; ``check_open`` raises once the client is closed."""
        self._collect_abandoned()
        with self._lock:
            check_open()
            stream = self._idle.pop() if self._idle else None
            if stream is not None:
                self._busy.add(stream)
                return stream
        stream = Stream(self._address)  # opening a channel is not done under the lock
        with self._lock:
            if not self._closed:
                self._busy.add(stream)
                return stream
        stream.close()
        check_open()
        raise AssertionError("a closed stream pool belongs to a closed client")  # pragma: no cover

    def release(self, stream: Stream, end: End) -> None:
        """Keeps a stream whose request finished for the next request; closes any other."""
        with self._lock:
            self._busy.discard(stream)
            if end is End.FINISHED and not self._closed:
                self._idle.append(stream)
                return
        # Not cancelling a stream whose request failed: the request is over already, and a cancel
        # racing its end has been seen to leave the model unable to unload (tritonserver 2.51).
        stream.close(cancel=end is not End.FAILED)

    def abandon(self, stream: Stream, running: Optional[StreamedRequest] = None) -> None:
        """Lets go of the stream of an iterator dropped unfinished; safe in a finalizer.

        Args:
            stream: the stream.
            running: ``None``: cancel the request now. Else the request, which runs to its end;
                its stream is closed by the first call after that.
        """
        if running is None:
            stream.close()  # the stream's own lock; no thread finalizing an iterator holds it
        self._abandoned.put((stream, running))  # SimpleQueue.put is reentrant: the pool's lock is left alone

    def close(self) -> None:
        """Cancels the streams in progress (their iterators raise) and closes every connection."""
        with self._lock:
            self._closed = True
            idle, busy = self._idle, self._busy
            self._idle, self._busy, self._running_on = [], set(), []
        for stream in busy:
            stream.close()
        for stream in idle:
            stream.close(cancel=False)  # nothing in flight: the server just ends the stream

    def _collect_abandoned(self) -> None:
        ended = []
        with self._lock:
            while not self._abandoned.empty():
                self._running_on.append(self._abandoned.get_nowait())
            running = []
            for stream, request in self._running_on:
                if request is None or request.over.is_set():
                    self._busy.discard(stream)
                    ended.append((stream, request))
                else:
                    running.append((stream, request))
            self._running_on = running
        for stream, request in ended:
            if request is not None:
                stream.close(cancel=False)  # its request is over: the server just ends the stream
