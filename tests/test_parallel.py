"""Tensor parallelism: the floor falls as 1/tp; the all-reduces set a limit."""

from __future__ import annotations

import pytest

from inferlab.model import parallel as par
from inferlab.model.capacity import weight_bytes
from inferlab.model.specs import chip, model


def _step(tp, link=900e9, hop=0.0, batch=1, name="NVIDIA H100 SXM"):
    llama = model("Llama 2 70B")
    return par.tensor_parallel_step(
        weight_bytes(70e9, "fp16"), chip(name).memory_bandwidth_bytes_per_s, tp,
        layers=llama.layers, hidden_size=llama.hidden_size, link_bytes_per_s=link,
        batch=batch, hop_latency_s=hop)


def test_one_chip_has_no_communication_and_the_plain_floor():
    step = _step(1)
    assert step.allreduce_s == 0.0
    assert step.step_s * 1e3 == pytest.approx(41.8, abs=0.05)


def test_memory_time_falls_as_one_over_tp():
    for tp in (2, 4, 8):
        assert _step(tp).memory_s == pytest.approx(_step(1).memory_s / tp)


def test_ring_allreduce_formula():
    # 2 (p-1)/p x message / link, plus 2 (p-1) hops of latency.
    assert par.ring_allreduce_s(16384, 8, 900e9) == pytest.approx(2 * 7 / 8 * 16384 / 900e9)
    assert par.ring_allreduce_s(16384, 8, 900e9, 1e-6) == pytest.approx(
        14e-6 + 2 * 7 / 8 * 16384 / 900e9)
    assert par.ring_allreduce_s(16384, 1, 900e9, 1e-6) == 0.0


def test_two_allreduces_per_layer():
    assert _step(8).allreduces == 2 * 80


def test_speedup_is_below_tp_with_communication_and_equal_without():
    assert par.tensor_parallel_speedup(_step(1), _step(8)) < 8
    free = par.tensor_parallel_step(1e9, 1e12, 8, layers=0, hidden_size=8192,
                                    link_bytes_per_s=1e9)
    one = par.tensor_parallel_step(1e9, 1e12, 1, layers=0, hidden_size=8192,
                                   link_bytes_per_s=1e9)
    assert par.tensor_parallel_speedup(one, free) == pytest.approx(8)


def test_slower_link_and_more_latency_never_help():
    for tp in (2, 4, 8, 16):
        assert _step(tp, link=192e9).step_s >= _step(tp, link=900e9).step_s
        assert _step(tp, hop=2e-6).step_s >= _step(tp).step_s
        assert _step(tp, batch=64).allreduce_s >= _step(tp).allreduce_s


@pytest.mark.parametrize(
    ("kwargs", "argument"),
    [
        ({"tp": 0}, "tp"),
        ({"tp": 2.5}, "tp"),
        ({"link_bytes_per_s": 0}, "link_bytes_per_s"),
        ({"bandwidth_bytes_per_s": -1}, "bandwidth_bytes_per_s"),
        ({"hop_latency_s": -1e-6}, "hop_latency_s"),
        ({"layers": -1}, "layers"),
        ({"batch": 0}, "batch"),
    ],
)
def test_bad_input_names_the_argument(kwargs, argument):
    arguments = {"weight_bytes": 140e9, "bandwidth_bytes_per_s": 3.35e12, "tp": 8,
                 "layers": 80, "hidden_size": 8192, "link_bytes_per_s": 900e9}
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=argument):
        par.tensor_parallel_step(**arguments)
