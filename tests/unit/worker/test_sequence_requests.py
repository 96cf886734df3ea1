"""A BATCH of a sequence model becomes Requests with their sequence id and start/end flags."""

import numpy as np

from pytriton_like.proxy.protocol import Kind, decode_message, encode_message
from pytriton_like.worker.handling import SEQUENCE_END, SEQUENCE_START, BatchHandler

X = {"x": np.ones((1, 1), np.int64)}


def requests_of(items):
    return BatchHandler.requests(decode_message(encode_message(Kind.BATCH, 1, items)))


def test_sequence_fields_come_from_the_header():
    items = [
        ({"p": "", "q": [], "c": 7, "g": SEQUENCE_START}, X),
        ({"p": "", "q": [], "c": "user-7", "g": 0}, X),
        ({"p": "", "q": [], "c": 9, "g": SEQUENCE_START | SEQUENCE_END}, X),
        ({"p": "", "q": [], "c": 3, "g": SEQUENCE_END}, X),
    ]
    seen = [(r.sequence_id, r.sequence_start, r.sequence_end) for r in requests_of(items)]
    assert seen == [(7, True, False), ("user-7", False, False), (9, True, True), (3, False, True)]


def test_plain_batch_has_no_sequence():
    (request,) = requests_of([({"p": "", "q": []}, X)])
    assert (request.sequence_id, request.sequence_start, request.sequence_end) == (None, False, False)
    np.testing.assert_array_equal(request["x"], X["x"])
