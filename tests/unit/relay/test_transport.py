"""The relay's transport: framing, nudges, descriptors passed with a message, broken peers."""

import os
import socket
import struct

import pytest

from pytriton_like.relay.transport import Channel, ChannelClosed, FramingError, connect, listen


@pytest.fixture
def pair():
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    a, b = Channel(left), Channel(right)
    yield a, b
    a.close()
    b.close()


def test_parts_arrive_as_one_message(pair):
    a, b = pair
    a.send([b"ab", memoryview(b"cd"), bytearray(b"e")])
    body, fd = b.recv()
    assert (bytes(body), fd) == (b"abcde", None)


def test_a_large_message_arrives_whole(pair):
    a, b = pair
    import threading

    big = os.urandom(3 << 20)
    sender = threading.Thread(target=a.send, args=([big[:10], big[10:]],))
    sender.start()
    body, _ = b.recv()
    sender.join()
    assert bytes(body) == big


def test_a_nudge_is_an_empty_message(pair):
    a, b = pair
    a.send([])  # a message of length 0
    a.send([b"x"])
    assert bytes(b.recv()[0]) == b""
    assert bytes(b.recv()[0]) == b"x"


def test_a_descriptor_travels_with_its_message(pair):
    a, b = pair
    read_end, write_end = os.pipe()
    a.send([b"one"], fd=write_end)
    a.send([b"two"])
    body, fd = b.recv()
    assert bytes(body) == b"one" and fd is not None
    os.write(fd, b"!")
    assert os.read(read_end, 1) == b"!"
    assert b.recv()[1] is None
    for descriptor in (fd, read_end, write_end):
        os.close(descriptor)


def test_a_closed_peer_is_channel_closed(pair):
    a, b = pair
    a.close()
    with pytest.raises(ChannelClosed, match="closed$"):
        b.recv()


def test_a_peer_closing_inside_a_message_says_so(pair):
    a, b = pair
    a.socket.sendall(struct.pack("<Q", 10) + b"abc")
    a.close()
    with pytest.raises(ChannelClosed, match="inside a message"):
        b.recv()


def test_a_forged_length_is_a_framing_error(pair):
    a, b = pair
    a.socket.sendall(struct.pack("<Q", 1 << 40))
    with pytest.raises(FramingError):
        b.recv()


def test_listen_and_connect(tmp_path):
    listener = listen(f"unix://{tmp_path}/s")
    client = connect(f"unix://{tmp_path}/s")
    server = listener.accept()
    client.send([b"hi"])
    assert bytes(server.recv()[0]) == b"hi"
    for end in (client, server, listener):
        end.close()
    assert not (tmp_path / "s").exists()
    with pytest.raises(ValueError, match="unix://"):
        listen("ipc:///x")


@pytest.mark.parametrize("length", [10, 1 << 40], ids=["cut inside", "forged length"])
def test_a_descriptor_of_a_message_not_read_is_closed(pair, length):
    a, b = pair
    read_end, write_end = os.pipe()
    a.socket.sendmsg([struct.pack("<Q", length) + b"abc"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS,
                                                             struct.pack("i", write_end))])
    os.close(write_end)
    a.close()
    with pytest.raises((ChannelClosed, FramingError)):
        b.recv()
    assert os.read(read_end, 1) == b""  # every write end closed: the one that came too
    os.close(read_end)
