"""Which models spin on their relay (models/model.py: usable_spin_us)."""

import os

import pytest

from pytriton_like.models.model import usable_spin_us


@pytest.mark.parametrize(
    "cpus, instances, expected",
    [(2, 1, 500), (2, 2, 0), (4, 2, 500), (4, 3, 0), (16, 8, 500), (1, 1, 0)],
)
def test_a_model_spins_only_while_each_instance_has_two_cpus(monkeypatch, cpus, instances, expected):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cpus)))
    assert usable_spin_us(500, instances) == expected


def test_zero_stays_zero(monkeypatch):
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(64)))
    assert usable_spin_us(0, 1) == 0
