"""The worker's choice to give a large batch's input pages back before it places the outputs."""

import numpy as np

from pytriton_like.relay_server.batch import _may_hold_inputs


def test_the_worker_gives_inputs_back_early_only_when_no_output_is_a_view_of_them():
    mapping = bytearray(4096)
    inputs = np.frombuffer(mapping, np.float32)
    assert not _may_hold_inputs([{"y": inputs * 2}], mapping)
    assert _may_hold_inputs([{"y": inputs * 2}, {"y": inputs[10:20]}], mapping)
    assert _may_hold_inputs([{"y": [1.0, 2.0]}], mapping)  # not an array: not checked, kept
    assert _may_hold_inputs(["model 'M': an error"], mapping)
    assert _may_hold_inputs([{"y": inputs}], None)
