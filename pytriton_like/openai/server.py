"""``OpenAIServer``: the OpenAI endpoint's process (:mod:`.service`) as a child of the run's
supervisor: it starts, updates and stops it, speaking :mod:`.stdio_protocol` on its standard streams.

``Triton.run()`` launches it, through the run's supervisor, once tritonserver and the bound
models are ready (when ``TritonConfig(allow_openai=True)``), and tells it the models as they are
bound; ``stop()`` closes it first — no new request is accepted, the streams still open are
cancelled — before the models are unloaded. A process that dies is started again by the
supervisor, on the same port, with the models bound at that moment. Nothing of it remains: its
process exits when its stdin closes, which happens when this process closes it or dies (even by
SIGKILL), and its port closes with it.

Once it listens, a thread reads its standard output: the acknowledgements :meth:`update` waits
for, and the streams the endpoint gave up on (``Cancel``: its HTTP client went away, or read too
slowly), handed to ``on_cancel`` so that their generation stops through the library rather than
through a cancelled gRPC stream (relay_server/cancel_keys.py).
"""

import ipaddress
import logging
import os
import queue
import select
import subprocess
import sys
import threading
import time
from typing import Callable, Dict, Optional

from ..exceptions import PyTritonServerError
from ..server.command_line import connect_host
from ..server.config import TritonConfig
from ..supervisor import Child, describe_exit
from .contract import OpenAIModel
from .stdio_protocol import (
    SERVICE_MODULE, SHUTDOWN_GRACE_S, Answer, Cancel, Failed, Models, Ready, Settings, decode_answer, encode,
)

__all__ = ["OpenAIServer", "is_loopback"]

logger = logging.getLogger(__name__)

_START_TIMEOUT_S = 30
_STOP_TIMEOUT_S = 10


class OpenAIServer(Child):
    """The OpenAI endpoint's process, serving until :meth:`close`; a supervised child (it does
    nothing until the supervisor starts it).

    Args:
        host, port: where it listens.
        grpc_target: ``host:port`` of tritonserver's gRPC endpoint.
        access_token: Triton's access token (sent with every inference call), or None.
        api_key: the key clients must send (``Authorization: Bearer``), or None.
        models: the models it serves, by name, at each start (:meth:`update` tells it changes).
        on_cancel: called (on a thread of this object) with the model's name and the cancel key
            of a streamed request the endpoint gave up on.
        max_unread_bytes: per stream, the most bytes generated but not yet sent to the client
            (``TritonConfig.openai_max_unread_bytes``); None: the default.
    """

    name = "the OpenAI endpoint"

    def __init__(
        self,
        *,
        host: str,
        port: int,
        grpc_target: str,
        access_token: Optional[str],
        api_key: Optional[str],
        models: Callable[[], Dict[str, OpenAIModel]],
        on_cancel: Optional[Callable[[str, str], None]] = None,
        max_unread_bytes: Optional[int] = None,
    ):
        self.host = host
        self.port = port
        self._settings = Settings(host, port, grpc_target, access_token, api_key, max_unread_bytes)
        self._on_cancel = on_cancel
        self._answers: "queue.Queue[Optional[Answer]]" = queue.Queue()  # this process's lines that are no Cancel
        self._reader: Optional[threading.Thread] = None
        self._models = models
        self._lock = threading.Lock()
        self._process: Optional[subprocess.Popen] = None
        self._pidfd = -1

    @classmethod
    def for_config(
        cls,
        config: TritonConfig,
        *,
        access_token: Optional[str],
        models: Callable[[], Dict[str, OpenAIModel]],
        on_cancel: Optional[Callable[[str, str], None]] = None,
    ) -> "OpenAIServer":
        """The endpoint ``config`` asks for (``allow_openai``), forwarding to its server's gRPC
        endpoint; logs a warning when it listens beyond loopback without an API key."""
        host = config.openai_address or "0.0.0.0"
        port = config.openai_endpoint_port()
        if not config.openai_api_key and not is_loopback(host):
            logger.warning(
                "the OpenAI endpoint listens on %s:%d without an API key: anybody who reaches that port can call"
                " its models (TritonConfig(openai_api_key=...) requires one; docs/openai.md)",
                host, port,
            )
        return cls(
            host=host,
            port=port,
            grpc_target=f"{connect_host(config.grpc_address)}:{config.ports['gRPC']}",
            access_token=access_token,
            api_key=config.openai_api_key,
            models=models,
            on_cancel=on_cancel,
            max_unread_bytes=config.openai_unread_limit(),
        )

    def start(self) -> None:
        with self._lock:
            self._release()
            self._answers = queue.Queue()
            self._process = subprocess.Popen(
                [sys.executable, "-m", SERVICE_MODULE], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                env=os.environ.copy(),
            )
            self._pidfd = os.pidfd_open(self._process.pid)
            try:
                self._send(encode(self._settings) + encode(Models(self._models())))
            except OSError:
                pass  # it exited already: ready() says why

    def ready(self) -> None:
        """Wait for its "ready" line.

        Raises:
            PyTritonServerError: it could not start or listen (the port is taken...).
        """
        try:
            with self._lock:
                answer = self._answer()
                if isinstance(answer, Ready):  # from now on a thread reads its lines (before update() may wait)
                    self._reader = threading.Thread(
                        target=self._read, args=(self._process.stdout, self._answers),
                        name="pytriton_like-openai-stdout", daemon=True,
                    )
                    self._reader.start()
        except BaseException:
            self.close()
            raise
        if not isinstance(answer, Ready):
            self.close()
            why = answer.error if isinstance(answer, Failed) else answer
            raise PyTritonServerError(
                f"cannot start the OpenAI endpoint on {self.host}:{self.port}: {why}; choose"
                " another port with TritonConfig(openai_port=...)"
            )

    def sentinel(self) -> int:
        return self._pidfd

    def exit_cause(self) -> str:
        return describe_exit(self._process.wait())

    def stop(self) -> None:
        self.close()

    def __enter__(self) -> "OpenAIServer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def update(self, models: Dict[str, OpenAIModel]) -> None:
        """Serve ``models`` from now on (the bound models changed); returns once the endpoint does."""
        try:
            with self._lock:
                if self._process is None:
                    return  # being started again: it reads the models bound then
                self._send(encode(Models(models)))
                answer = self._answers.get(timeout=_START_TIMEOUT_S)
            if answer is None:
                raise PyTritonServerError("it exited (see stderr)")
        except queue.Empty:
            logger.warning("the OpenAI endpoint did not acknowledge the models within %s s", _START_TIMEOUT_S)
        except (OSError, ValueError, PyTritonServerError) as exc:
            logger.warning("cannot tell the OpenAI endpoint the models (it exited?): %s", exc)

    def close(self) -> None:
        """Close its stdin, so that it stops (open streams are given up after a 2 s grace, their generations
        stopped by cancel key); wait for it."""
        process = self._process
        if process is None:
            return
        # not under the lock: a start waiting for its "ready" holds it, and must see the end
        if process.stdin and not process.stdin.closed:
            try:
                process.stdin.close()
            except OSError:
                pass
        try:
            process.wait(_STOP_TIMEOUT_S + SHUTDOWN_GRACE_S)
        except subprocess.TimeoutExpired:
            logger.warning("the OpenAI endpoint did not stop within %s s; killing it", _STOP_TIMEOUT_S)
            process.kill()
            process.wait()
        self._release()

    def _release(self) -> None:
        """Forget the last process (it ended), its pipes and its pidfd."""
        process, self._process = self._process, None
        if process is not None:
            if process.poll() is None:
                process.kill()
                process.wait()
            reader, self._reader = self._reader, None
            if reader is not None:
                reader.join(_STOP_TIMEOUT_S)  # it ends at the end of the process's stdout
            for stream in (process.stdin, process.stdout):
                if stream is not None and not stream.closed:
                    try:
                        stream.close()
                    except OSError:
                        pass
        if self._pidfd >= 0:
            os.close(self._pidfd)
            self._pidfd = -1

    def _send(self, data: bytes) -> None:
        self._process.stdin.write(data)
        self._process.stdin.flush()

    def _answer(self) -> Answer:
        """The process's next line, waited for up to the start timeout."""
        stdout = self._process.stdout
        deadline = time.monotonic() + _START_TIMEOUT_S
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PyTritonServerError(f"the OpenAI endpoint did not start within {_START_TIMEOUT_S} s")
            ready, _, _ = select.select([stdout], [], [], remaining)
            if ready:
                line = stdout.readline()
                if not line:
                    code = self._process.wait()
                    raise PyTritonServerError(f"the OpenAI endpoint {describe_exit(code)} while starting (see stderr)")
                return decode_answer(line)

    def _read(self, stdout, answers: "queue.Queue[Optional[Answer]]") -> None:
        """One process's lines once it listens: cancels to ``on_cancel``, the others to :meth:`update`."""
        try:
            for line in stdout:
                try:
                    message = decode_answer(line)
                except ValueError:
                    logger.warning("the OpenAI endpoint wrote a line that is no message: %r", line[:200])
                    continue
                if isinstance(message, Cancel):
                    self._cancel(message)
                else:
                    answers.put(message)
        except (OSError, ValueError):  # closed under the thread
            pass
        finally:
            answers.put(None)

    def _cancel(self, message: Cancel) -> None:
        if self._on_cancel is None:
            return
        try:
            self._on_cancel(message.model, message.key)
        except Exception:  # noqa: BLE001 - one cancel that failed must not stop the others
            logger.exception("cannot cancel the stream of model %r", message.model)


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
