"""Framing of relay messages on a Unix stream socket (proxy/transport.py)."""

import socket
import struct
import threading

import numpy as np
import pytest

from pytriton_like.proxy.transport import (
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
