"""Framing of relay messages on a Unix stream socket (proxy/transport.py)."""

import socket
import struct
import threading
import time

import numpy as np
import pytest

from pytriton_like.proxy.transport import (
    NUDGE,
    ChannelClosed,
    FramingError,
    UnixChannel,
    ZmqChannel,
    connect,
    recv_frames,
    send_frames,
)


@pytest.fixture
def pair():
    left, right = socket.socketpair()
    with left, right:
        yield left, right


def test_frames_arrive_as_sent(pair):
    left, right = pair
    array = np.arange(6, dtype=np.float32)
    send_frames(left, [b"header", memoryview(array).cast("B"), b""])
    frames = recv_frames(right)
    assert [bytes(frame) for frame in frames] == [b"header", array.tobytes(), b""]


def test_a_large_message_is_sent_frame_by_frame_and_arrives_whole(pair):
    left, right = pair
    big = bytes(range(256)) * 4096  # 1 MiB: more than the socket buffer, so sent and read in parts
    received = []
    reader = threading.Thread(target=lambda: received.append(recv_frames(right)))
    reader.start()
    send_frames(left, [b"h", big])
    reader.join(10)
    assert [bytes(frame) for frame in received[0]] == [b"h", big]


def test_a_nudge_is_a_message_of_no_frames(pair):
    left, right = pair
    left.sendall(NUDGE)
    send_frames(left, [b"after"])
    assert recv_frames(right) == []
    assert [bytes(frame) for frame in recv_frames(right)] == [b"after"]


@pytest.mark.parametrize("spin_us, sent", [(0, b""), (100, NUDGE)])
def test_a_channel_nudges_only_when_it_spins(tmp_path, spin_us, sent):
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen()
        channel = connect(f"unix://{path}", spin_us=spin_us)
        peer, _ = listener.accept()
        with peer:
            channel.nudge()
            channel.close()
            assert peer.recv(100) == sent


def test_a_closed_peer_is_channel_closed(pair):
    left, right = pair
    left.close()
    with pytest.raises(ChannelClosed, match="the connection closed$"):
        recv_frames(right)


def test_a_peer_closing_inside_a_message_says_so(pair):
    left, right = pair
    left.sendall(struct.pack("<Q", 100) + b"only a part")
    left.close()
    with pytest.raises(ChannelClosed, match="inside a message"):
        recv_frames(right)


@pytest.mark.parametrize(
    "wire, message",
    [
        (struct.pack("<Q", 2) + b"ab", "a message of 2 bytes"),
        (struct.pack("<Q", 1 << 40), "a message of"),
        (struct.pack("<QI", 4, 3), "3 frames do not fit in 4 bytes"),
        (struct.pack("<QIQ", 12, 1, 5), "frames of 5 bytes in a message of 0"),
    ],
)
def test_bytes_that_are_not_a_framed_message_are_a_framing_error(pair, wire, message):
    left, right = pair
    left.sendall(wire)
    with pytest.raises(FramingError, match=message):
        recv_frames(right)


def test_connect_picks_the_transport_by_scheme(tmp_path):
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen()
        channel = connect(f"unix://{path}")
        try:
            assert isinstance(channel, UnixChannel)
            assert channel.recv(0) is None  # nothing sent yet
        finally:
            channel.close()
    channel = connect(f"ipc://{tmp_path}/z")
    try:
        assert isinstance(channel, ZmqChannel)
    finally:
        channel.close()
    with pytest.raises(ValueError, match="unknown relay address 'tcp://x'"):
        connect("tcp://x")


class DelayedEcho:
    """The worker's end of a channel: sends each message back after ``delay_s``."""

    def __init__(self, listener: socket.socket):
        self.delay_s = 0.0
        self._listener = listener
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        peer, _ = self._listener.accept()
        with peer:
            while True:
                try:
                    frames = recv_frames(peer)
                except ChannelClosed:
                    return
                time.sleep(self.delay_s)
                send_frames(peer, frames)

    def join(self):
        self._thread.join(10)


@pytest.fixture
def spinning(tmp_path):
    """A UnixChannel spinning 5 ms, connected to a DelayedEcho."""
    path = tmp_path / "s"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listener:
        listener.bind(str(path))
        listener.listen()
        echo = DelayedEcho(listener)
        channel = connect(f"unix://{path}", spin_us=5000)
        try:
            yield channel, echo
        finally:
            channel.close()
            echo.join()


def round_trip_cpu_ns(channel: UnixChannel, payload: bytes) -> int:
    """CPU time this thread spends waiting for the echo of one message."""
    channel.send([payload])
    started = time.thread_time_ns()
    frames = channel.recv(5000)
    spent = time.thread_time_ns() - started
    assert [bytes(frame) for frame in frames] == [payload]
    return spent


def test_a_spinning_channel_gets_answers_during_and_after_its_spin(spinning):
    channel, echo = spinning
    for delay_s in (0.0, 0.02, 0.0):  # within the 5 ms spin, past it, within it again
        echo.delay_s = delay_s
        channel.send([b"ping %g" % delay_s])
        assert [bytes(frame) for frame in channel.recv(5000)] == [b"ping %g" % delay_s]
    started = time.monotonic()
    assert channel.recv(50) is None  # nothing sent: None once the spin and the timeout are over
    assert time.monotonic() - started >= 0.05


def test_answers_slower_than_the_spin_stop_it_and_quick_ones_bring_it_back(spinning):
    channel, echo = spinning
    echo.delay_s = 0.02  # four times the spin
    for _ in range(20):
        round_trip_cpu_ns(channel, b"slow")
    # the channel now sleeps at once: waiting 20 ms costs next to no CPU
    assert max(round_trip_cpu_ns(channel, b"slow") for _ in range(3)) < 1_000_000
    echo.delay_s = 0.0
    for _ in range(30):
        round_trip_cpu_ns(channel, b"quick")
    # spinning again: a 20 ms answer now costs the spin's CPU before the channel sleeps
    echo.delay_s = 0.02
    assert round_trip_cpu_ns(channel, b"slow") >= 1_500_000
