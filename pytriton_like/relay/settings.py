"""``RelaySettings``: what the relay's backend needs to know of one model version, decided in Python.

Written as ``relay.conf`` next to the version's files (the backend reads it with
``native/settings.c`` when Triton loads the model): ``version=<SETTINGS_VERSION>`` first, then one
``key=value`` line per field (numbers; booleans as 0/1), then ``socket.<i>=<path>`` per instance.
The backend refuses a file of another version with a message naming both, so a backend library
and a Python package of different releases fail the load clearly instead of misreading it.
"""

import dataclasses
import pathlib
from typing import List, Tuple

__all__ = ["RelaySettings", "SETTINGS_FILE", "SETTINGS_VERSION"]

SETTINGS_FILE = "relay.conf"
SETTINGS_VERSION = 2  # native/settings.h: SETTINGS_VERSION


@dataclasses.dataclass(frozen=True)
class RelaySettings:
    """The relay's settings for one model version (``native/settings.h``'s ``struct settings``).

    Attributes:
        owner_pid: the process whose relay servers serve the model (the backend checks it is alive).
        sockets: the Unix socket of each instance's relay server, in instance order.
        decoupled: the model streams (any number of responses per request).
        sequence: the model has a sequence batcher (requests carry correlation ids).
        batching: the first dimension of every tensor is the batch.
        shm_limit: the largest shared-memory arena in bytes, per instance and direction (0: no limit).
        spin_us: how long the backend polls for an answer before it sleeps (0: it does not).
        in_flight: batches in flight per instance.
        outputs: how many outputs the model declares.
        handshake_timeout_ms: how long a starting instance waits for its relay server's WELCOME.
        worker_processes: each instance's relay server is a worker process of its own, started
            again when it dies (the relay metrics get a ``worker`` label); else threads of the
            owner process.
        restart_wait_ms: how long, after losing its worker process, an instance waits for the
            restarted one with the batch it holds (the grace of the worker processes' restart
            policy, :attr:`pytriton_like.supervisor.RestartPolicy.grace_s`); later batches try once.
        version: the format of the file (:data:`SETTINGS_VERSION`).
    """

    owner_pid: int
    sockets: Tuple[str, ...]
    decoupled: bool = False
    sequence: bool = False
    batching: bool = False
    shm_limit: int = 0
    spin_us: int = 0
    in_flight: int = 1
    outputs: int = 0
    handshake_timeout_ms: int = 60000
    worker_processes: bool = False
    restart_wait_ms: int = 0
    version: int = SETTINGS_VERSION

    def text(self) -> str:
        """The content of relay.conf."""
        lines: List[str] = [f"version={self.version}"]
        for field in dataclasses.fields(self):
            if field.name not in ("version", "sockets"):
                lines.append(f"{field.name}={int(getattr(self, field.name))}")
        lines += [f"socket.{index}={path}" for index, path in enumerate(self.sockets)]
        return "\n".join(lines) + "\n"

    def write(self, folder: pathlib.Path) -> pathlib.Path:
        """Write ``folder/relay.conf``."""
        path = folder / SETTINGS_FILE
        path.write_text(self.text(), encoding="utf-8")
        return path
