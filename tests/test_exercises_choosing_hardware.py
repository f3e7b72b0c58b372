"""The answers to the 'Choosing hardware' chapter's exercises, computed as the solutions do."""

from __future__ import annotations

import pytest

from inferlab.choosing import (
    MAX_COMPILE_FRACTION,
    MONTH_S,
    check_row,
    decide,
    family_floor,
    padding_waste,
    power_of_two_buckets,
    recompile_cost,
)
from inferlab.data import result
from inferlab.feasibility import Infeasible, layout
from inferlab.workload import Lengths


def test_ex_hw_chips():
    lpu8 = family_floor("DeepSeek-V3", "lpu", "int8").chips_to_hold
    lpu16 = family_floor("DeepSeek-V3", "lpu", "fp16").chips_to_hold
    h200 = family_floor("DeepSeek-V3", "gpu", "fp8").chips_to_hold
    assert lpu16 == pytest.approx(2 * lpu8, abs=1)
    assert 3000 < lpu8 < 3500
    assert h200 == 6  # 671 GB over 126.9 GB usable per H200


def test_ex_hw_compile():
    budget_s = MAX_COMPILE_FRACTION * MONTH_S
    five = budget_s / recompile_cost(1, compile_s_per_shape=300).compile_s_per_change
    thirty = budget_s / recompile_cost(1, compile_s_per_shape=1800).compile_s_per_change
    assert five == pytest.approx(25920 / 4200)
    assert thirty == pytest.approx(five / 6)


def test_ex_hw_padding():
    prompts = Lengths(1000, cv=0.5, min_tokens=1, max_tokens=4096)
    coarse = power_of_two_buckets(128, 4096, 1)
    fine = power_of_two_buckets(128, 4096, 2)
    assert len(coarse) == 6 and len(fine) == 11
    assert padding_waste(prompts, fine).fraction < padding_waste(prompts, coarse).fraction
    assert 0.2 < padding_waste(prompts, coarse).fraction < 0.4


def test_ex_hw_groq():
    row = check_row("Llama 3.3 70B", "LPU", 1400)
    plain = result("aa-groq-l31-70b-before-specdec")["value"]
    b200_fp4 = family_floor("Llama 3.1 70B", "gpu", "fp4", chip="NVIDIA B200", chips=8)
    assert row.ratio_to_hbm == pytest.approx(1.54, abs=0.01)
    assert row.ratio_to_pipeline == pytest.approx(1.23, abs=0.01)
    assert 1400 / plain == pytest.approx(5.6)
    assert b200_fp4.ceiling_tok_s > 1400  # on paper: 35 GB over 8 x 8 TB/s
    with pytest.raises(Infeasible) as refused:
        layout("Llama 3.1 70B", "NVIDIA B200", "fp4", tp=16)
    assert refused.value.kind == "domain"


def test_ex_hw_decide():
    support = decide(model="Llama 3.1 8B", precision="bf16", per_user_tok_s=40,
                     tail_ratio_max=2.0, changes_per_month=2, tokens_per_day=3e9)
    assert support.fits == ("gpu", "fixed-function")
    for verdict in support.verdicts:
        if not verdict.fits:
            assert verdict.against[0].computed_by == "feasibility.fewest_chips"
