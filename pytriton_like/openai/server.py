"""``OpenAIServer``: starts, updates and stops the OpenAI endpoint's process (:mod:`.service`).

``Triton.run()`` starts it once tritonserver and the bound models are ready (when
``TritonConfig(allow_openai=True)``) and tells it the models as they are bound; ``stop()`` closes
it first — no new request is accepted, the streams still open are cancelled — before the models
are unloaded. Nothing of it remains: its process exits when its stdin closes, which happens
when this process closes it or dies (even by SIGKILL), and its port closes with it.

Once it listens, a thread reads its standard output: the acknowledgements :meth:`update` waits
for, and the streams the endpoint gave up on (``{"cancel": key, "model": name}``: its HTTP
client went away), handed to ``on_cancel`` so that their generation stops through the library
rather than through a cancelled gRPC stream (relay_server/cancel_keys.py).
"""

import ipaddress
import json
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
from .contract import OpenAIModel, catalog_to_json

__all__ = ["OpenAIServer", "is_loopback", "SERVICE_MODULE", "SHUTDOWN_GRACE_S"]

logger = logging.getLogger(__name__)

SERVICE_MODULE = "pytriton_like.openai.service"
# How long a stop waits for the endpoint's requests in progress before it cancels them.
SHUTDOWN_GRACE_S = 2.0
_START_TIMEOUT_S = 30
_STOP_TIMEOUT_S = 10


class OpenAIServer:
    """The OpenAI endpoint's process, serving until :meth:`close`.

    Args:
        host, port: where it listens.
        grpc_target: ``host:port`` of tritonserver's gRPC endpoint.
        access_token: Triton's access token (sent with every inference call), or None.
        api_key: the key clients must send (``Authorization: Bearer``), or None.
        models: the models it serves at first, by name (:meth:`update` changes them).
        on_cancel: called (on a thread of this object) with the model's name and the cancel key
            of a streamed request whose client went away.
        max_unread_bytes: per stream, the most bytes generated but not yet sent to the client
            (``TritonConfig.openai_max_unread_bytes``); None: the endpoint's default.

    Raises:
        PyTritonServerError: it could not start or listen (the port is taken...).
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        grpc_target: str,
        access_token: Optional[str],
        api_key: Optional[str],
        models: Dict[str, OpenAIModel],
        on_cancel: Optional[Callable[[str, str], None]] = None,
        max_unread_bytes: Optional[int] = None,
    ):
        self.host = host
        self.port = port
        self._lock = threading.Lock()
        self._on_cancel = on_cancel
        self._answers: "queue.Queue[Optional[dict]]" = queue.Queue()  # the lines that are no cancel; None: EOF
        self._reader: Optional[threading.Thread] = None
        self._process = subprocess.Popen(
            [sys.executable, "-m", SERVICE_MODULE], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=os.environ.copy(),
        )
        settings = {"host": host, "port": port, "grpc_target": grpc_target, "access_token": access_token, "api_key": api_key,
                    "max_unread_bytes": max_unread_bytes}
        try:
            self._send(json.dumps(settings).encode() + b"\n" + _models_line(models))
            answer = self._answer()
        except BaseException:
            self.close()
            raise
        if answer.get("ready") is not True:
            self.close()
            raise PyTritonServerError(
                f"cannot start the OpenAI endpoint on {host}:{port}: {answer.get('error', answer)}; choose another port"
                " with TritonConfig(openai_port=...)"
            )
        self._reader = threading.Thread(target=self._read, name="pytriton_like-openai-stdout", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        """The endpoint process's id."""
        return self._process.pid

    def __enter__(self) -> "OpenAIServer":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def update(self, models: Dict[str, OpenAIModel]) -> None:
        """Serve ``models`` from now on (the bound models changed); returns once the endpoint does."""
        try:
            with self._lock:
                self._send(_models_line(models))
                answer = self._answers.get(timeout=_START_TIMEOUT_S)
            if answer is None:
                raise PyTritonServerError(f"the OpenAI endpoint exited with code {self._process.wait()} (see stderr)")
        except queue.Empty:
            logger.warning("the OpenAI endpoint did not acknowledge the models within %s s", _START_TIMEOUT_S)
        except (OSError, ValueError, PyTritonServerError) as exc:
            logger.warning("cannot tell the OpenAI endpoint the models (it exited?): %s", exc)

    def close(self) -> None:
        """Close its stdin, so that it stops (open streams are cancelled after a 2 s grace); wait for it."""
        with self._lock:
            if self._process.stdin and not self._process.stdin.closed:
                try:
                    self._process.stdin.close()
                except OSError:
                    pass
        try:
            self._process.wait(_STOP_TIMEOUT_S + SHUTDOWN_GRACE_S)
        except subprocess.TimeoutExpired:
            logger.warning("the OpenAI endpoint did not stop within %s s; killing it", _STOP_TIMEOUT_S)
            self._process.kill()
            self._process.wait()
        if self._reader is not None:
            self._reader.join(_STOP_TIMEOUT_S)  # it ends at the end of the process's stdout
        if self._process.stdout:
            self._process.stdout.close()

    def _send(self, data: bytes) -> None:
        self._process.stdin.write(data)
        self._process.stdin.flush()

    def _answer(self) -> dict:
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
                    raise PyTritonServerError(f"the OpenAI endpoint exited with code {code} while starting (see stderr)")
                return json.loads(line)

    def _read(self) -> None:
        """The process's lines once it listens: cancels to ``on_cancel``, the others to :meth:`update`."""
        try:
            for line in self._process.stdout:
                try:
                    message = json.loads(line)
                except ValueError:
                    logger.warning("the OpenAI endpoint wrote a line that is not JSON: %r", line[:200])
                    continue
                if isinstance(message, dict) and "cancel" in message:
                    self._cancel(message)
                else:
                    self._answers.put(message)
        except (OSError, ValueError):  # closed under the thread
            pass
        finally:
            self._answers.put(None)

    def _cancel(self, message: dict) -> None:
        if self._on_cancel is None:
            return
        try:
            self._on_cancel(str(message.get("model")), str(message["cancel"]))
        except Exception:  # noqa: BLE001 - one cancel that failed must not stop the others
            logger.exception("cannot cancel the stream of model %r", message.get("model"))


def _models_line(models: Dict[str, OpenAIModel]) -> bytes:
    return json.dumps({"models": catalog_to_json(models)}).encode() + b"\n"


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
