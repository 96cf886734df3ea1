"""The stub's connection to its worker: settings, socket, handshake, waiting for answers."""

import itertools
import json
import os

from .protocol import Kind, Message, ProtocolError, decode_message, encode_message
from .shm import ArenaReader, process_alive
from .transport import ChannelClosed, FramingError, connect
from .watchdog import exit_with_owner, stub_region

__all__ = ["Connection", "RelayError", "request_items", "sequence_request_items"]

# How often a waiting proxy checks that the user process is still alive.
LIVENESS_PERIOD_MS = 1000


class RelayError(Exception):
    """The worker could not be reached or answered out of protocol."""


class Connection:
    """One model instance's channel to its worker (transport.py), connected and greeted.

    Reads relay.json (written by the user process next to model.py) for the worker's address.
    """

    def __init__(self, args):
        version_dir = os.path.join(args["model_repository"], args["model_version"])
        with open(os.path.join(version_dir, "relay.json"), encoding="utf-8") as file:
            settings = json.load(file)
        self.index = int(args["model_instance_name"].rsplit("_", 1)[1])
        self.address = settings["sockets"][self.index]
        self.model = args["model_name"]
        self.owner_pid = int(settings["owner_pid"])
        self.tag = settings["tag"]
        self.decoupled = bool(settings.get("decoupled", False))
        self.sequence = bool(settings.get("sequence", False))
        self.shm_limit = settings.get("shm_limit_bytes")
        spin_us = int(settings.get("spin_us", 0))
        self.ids = itertools.count(1)
        self.reader = ArenaReader()
        exit_with_owner(self.owner_pid)
        try:
            self.channel = connect(self.address, spin_us)
        except OSError as exc:
            self.reader.close()
            raise RelayError(f"cannot reach the worker at {self.address}: {exc}") from exc
        try:
            self.send(
                encode_message(
                    Kind.HELLO,
                    extra={"instance": args["model_instance_name"], "pid": os.getpid(), "region": stub_region()},
                )
            )
            welcome = self.receive(0, timeout_ms=int(settings["handshake_timeout_s"] * 1000))
            if welcome.kind != Kind.WELCOME:
                raise RelayError(f"expected WELCOME from the worker at {self.address}, got {welcome.kind.name}")
            self.shm_threshold = int(welcome.extra["shm_threshold"])
        except BaseException:
            self.close()
            raise

    def nudge(self) -> None:
        """Tell the worker a batch follows (transport.py); RelayError if the worker is gone."""
        try:
            self.channel.nudge()
        except OSError as exc:
            raise RelayError(f"cannot send to the worker at {self.address}: {exc}") from exc

    def send(self, frames) -> None:
        """Send one message; RelayError if the worker is gone."""
        try:
            self.channel.send(frames)
        except OSError as exc:
            raise RelayError(f"cannot send to the worker at {self.address}: {exc}") from exc

    def receive(self, batch_id: int, timeout_ms: int = -1) -> Message:
        """The answer to ``batch_id``; waits while the user process lives (and ``timeout_ms``).

        One batch is in flight at a time, so an answer to any other is a protocol error.
        """
        waited = 0
        while True:
            try:
                frames = self.channel.recv(LIVENESS_PERIOD_MS)
            except (ChannelClosed, FramingError, OSError) as exc:
                # a stream socket cannot resync after bad framing, and a closed one is a dead worker
                raise RelayError(f"lost the worker at {self.address}: {exc}") from exc
            if frames is not None:
                message = decode_message(frames, self.reader)
                if message.batch_id != batch_id:
                    raise ProtocolError(f"got an answer to batch {message.batch_id} while waiting for {batch_id}")
                return message
            waited += LIVENESS_PERIOD_MS
            self.check_owner()
            if 0 <= timeout_ms <= waited:
                raise RelayError(f"no answer from the worker within {timeout_ms / 1000:.0f} s")

    def check_owner(self) -> None:
        """Raise RelayError if the user process that serves the model is gone."""
        if not process_alive(self.owner_pid):
            raise RelayError(f"the user process (pid {self.owner_pid}) that serves the model is gone")

    def close(self) -> None:
        self.channel.close()
        self.reader.close()


def request_items(requests) -> list:
    """Each request's header fields and input tensors, as encode_message takes them."""
    items = []
    for request in requests:
        tensors = {tensor.name(): tensor.as_numpy() for tensor in request.inputs()}
        fields = {}  # defaults left out: every field is JSON the relay encodes and decodes per request
        parameters = request.parameters()
        if parameters != "{}":
            fields["p"] = parameters
        requested = request.requested_output_names()
        if requested:
            fields["q"] = list(requested)
        items.append((fields, tensors))
    return items


def sequence_request_items(requests) -> list:
    """:func:`request_items` of a sequence model: each item also carries the request's
    correlation id ("c") and its flags ("g": Triton's sequence start/end bits)."""
    items = request_items(requests)
    for (fields, _), request in zip(items, requests):
        fields["c"] = request.correlation_id()
        fields["g"] = request.flags()
    return items
