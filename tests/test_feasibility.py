"""The feasibility layer refuses what cannot run, says why and by how much; sweeps stop there."""

from __future__ import annotations

import math

import numpy as np
import pytest

from inferlab.model import feasibility as fz
from inferlab.model.capacity import ACTIVATION_RESERVE_FRACTION, kv_bytes_per_token, weight_bytes
from inferlab.model.parallel import chip_spread
from inferlab.model.specs import chip, model

H200 = "NVIDIA H200 SXM"
H100 = "NVIDIA H100 SXM"


def test_batch_1024_at_1000_tokens_on_one_h200_is_refused_for_capacity_with_the_shortfall():
    lay = fz.layout("Llama 2 70B", H200, "fp8")
    with pytest.raises(fz.Infeasible) as error:
        lay.check(1024, 1000)
    assert error.value.kind == "capacity"
    message = str(error.value)
    assert "167.8 GB of KV cache" in message and "at most 353 such requests fit" in message
    # The same layout holds exactly that many, and not one more.
    assert lay.max_batch(1000) == 353
    lay.check(353, 1000)
    with pytest.raises(fz.Infeasible):
        lay.check(354, 1000)


def test_capacity_arithmetic_is_weights_plus_cache_plus_reserve():
    lay = fz.layout("Llama 2 70B", H200, "fp8")
    spec, hw = model("Llama 2 70B"), chip(H200)
    free = hw.memory_capacity_bytes * (1 - ACTIVATION_RESERVE_FRACTION) - spec.params_total
    assert lay.kv_capacity_tokens == math.floor(free / kv_bytes_per_token(spec, "fp8"))


def test_a_context_beyond_the_models_limit_is_refused():
    lay = fz.layout("Llama 2 70B", H200, "fp8")
    with pytest.raises(fz.Infeasible, match=r"131,072 exceeds Llama 2 70B's context limit of "
                                            r"4,096 tokens \(by 126,976\)") as error:
        lay.check(16, 131_072)
    assert error.value.kind == "context"
    assert lay.max_context(16) == 4096  # the model's limit binds before the cache does
    assert lay.max_context(1000) == lay.kv_capacity_tokens // 1000


def test_tensor_parallelism_stays_inside_the_scale_up_domain():
    with pytest.raises(fz.Infeasible, match="exceeds the 8-chip scale-up domain") as error:
        fz.layout("Llama 2 70B", H100, "fp8", tp=16)
    assert error.value.kind == "domain"
    with pytest.raises(fz.Infeasible, match="12-chip scale-up domain"):
        fz.layout("Llama 2 70B", "AWS Inferentia2 (per chip)", "bf16", tp=32)
    # Pipeline stages may cross domains over the scale-out network.
    assert fz.layout("Llama 3.1 405B", H100, "bf16", tp=8, pp=2).chips == 16


def test_weights_that_do_not_fit_name_the_chips_needed():
    with pytest.raises(fz.Infeasible, match="needs at least 4 chips") as error:
        fz.layout("Llama 3.1 70B", "Cerebras WSE-3", "bf16")
    assert error.value.kind == "capacity"
    assert fz.fewest_chips("Llama 3.1 70B", "Cerebras WSE-3", "bf16") == 4
    assert fz.layout("Llama 3.1 70B", "Cerebras WSE-3", "bf16", pp=4).chips == 4


def test_max_batch_is_the_edge_of_the_feasible_region():
    lay = fz.layout("Llama 2 70B", H200, "fp8")
    for context in (128, 1000, 4096):
        edge = lay.max_batch(context)
        lay.check(edge, context)
        with pytest.raises(fz.Infeasible):
            lay.check(edge + 1, context)


def test_more_memory_never_shrinks_the_feasible_batch():
    contexts = np.array([256, 1024, 4096])
    small = np.array([fz.layout("Llama 2 70B", H100, "fp8").max_batch(c) for c in contexts])
    large = np.array([fz.layout("Llama 2 70B", H200, "fp8").max_batch(c) for c in contexts])
    assert np.all(large >= small)


def test_bad_arguments_name_themselves():
    with pytest.raises(ValueError, match="tp"):
        fz.layout("Llama 2 70B", H200, tp=0)
    with pytest.raises(ValueError, match="reserve_fraction"):
        fz.layout("Llama 2 70B", H200, reserve_fraction=1.0)
    with pytest.raises(ValueError, match="batch"):
        fz.layout("Llama 2 70B", H200).check(0, 100)
    with pytest.raises(ValueError, match="context_tokens"):
        fz.layout("Llama 2 70B", H200).check(1, -5)
    with pytest.raises(TypeError, match="chip"):
        fz.layout("Llama 2 70B", 3.5)


def test_pipelined_chips_are_bounded_by_one_chips_bandwidth_whatever_their_count():
    groq = "Groq LPU (GroqChip)"
    few = chip_spread("Llama 2 70B", groq, "int8")
    many = chip_spread("Llama 2 70B", groq, "int8", chips=2 * few.chips)
    bandwidth = chip(groq).memory_bandwidth_bytes_per_s
    spec = model("Llama 2 70B")
    # A token reads every weight but the embedding table, of which its one row.
    read = spec.params_total - spec.embedding_params + spec.hidden_size
    expected = bandwidth / weight_bytes(read, "int8")
    assert few.pipeline_tok_s == pytest.approx(expected)  # ~1.2k tok/s
    assert many.pipeline_tok_s == pytest.approx(few.pipeline_tok_s)
    assert many.tensor_parallel_tok_s == pytest.approx(2 * few.tensor_parallel_tok_s)
    assert few.tensor_parallel_tok_s > 100 * few.pipeline_tok_s
    with pytest.raises(fz.Infeasible, match="needs at least"):
        chip_spread("Llama 2 70B", groq, "int8", chips=10)


def test_floors_refuse_contexts_beyond_the_models_limit():
    from inferlab.model.roofline import model_decode_floor, throughput_at_max_batch
    spec = model("Llama 2 70B")
    with pytest.raises(fz.Infeasible, match="context limit"):
        model_decode_floor(spec, "fp8", 4.8e12, context_tokens=131_072, batch=16)
    with pytest.raises(fz.Infeasible, match="context limit"):
        throughput_at_max_batch(chip(H200), spec, "fp8", 8192)
    assert model_decode_floor(spec, "fp8", 4.8e12, context_tokens=4096).step_s > 0


def test_a_mixture_of_experts_reads_only_its_active_parameters_at_batch_1():
    spec = model("Mixtral 8x7B")
    spread = chip_spread(spec, "Groq LPU (GroqChip)", "int8")
    # Its dense part and two experts a layer, less the embedding rows it does not look up.
    read = spec.params_active - spec.embedding_params + spec.hidden_size
    assert spread.weight_bytes == pytest.approx(weight_bytes(read, "int8"))
    assert spread.chips == fz.fewest_chips(spec, "Groq LPU (GroqChip)", "int8",
                                            reserve_fraction=0.0)


def test_pipeline_stages_need_a_link_whose_rate_is_known():
    # Two Arc cards would hold Llama 3.1 70B at INT8 in two stages, but nothing in the data
    # says how fast a stage hands its activations on: the step would have no time (it was
    # NaN, and the planner's simulation of it never ended). The step model refuses it; the
    # feasibility layer itself allows it, since an SRAM pipeline in closed form needs no
    # hand-off time.
    arc = "Intel Arc Pro B60 Dual 48GB (per card)"
    from inferlab.model.steptime import replica

    with pytest.raises(fz.Infeasible, match="pp: 2 stages.*no link or scale-out rate") as error:
        replica("Llama 3.1 70B", arc, 1, "int8", pp=2)
    assert error.value.kind == "domain"


def test_every_feasible_layout_has_a_finite_step_time():
    from inferlab.model.steptime import replica

    spec = model("Llama 3.1 70B")
    checked = 0
    for hw in (chip(name) for name in ("Intel Arc Pro B60 Dual 48GB (per card)", "NVIDIA L40S",
                                       "AWS Inferentia2 (per chip)", H100)):
        for precision in ("fp8", "int8", "bf16"):
            for tp, pp in ((1, 1), (1, 2), (2, 1), (2, 2), (4, 1), (1, 4)):
                try:
                    fz.layout(spec, hw, precision, tp=tp, pp=pp)
                    rep = replica(spec, hw, tp, precision, pp=pp)
                except (fz.Infeasible, ValueError):
                    continue
                assert math.isfinite(float(rep.step_s(1000.0, 1))), (hw.name, precision, tp, pp)
                checked += 1
    assert checked >= 6


def test_the_one_layout_search_finds_the_shallowest_pipeline_per_width_and_says_why_not():
    big, h100 = model("Llama 3.1 405B"), chip("NVIDIA H100 SXM")
    # 406 GB of FP8 weights on 80 GB cards need six of them: each width takes the fewest
    # stages that reach that many, and a width past the eight-chip domain ends the search.
    found, last = fz.fitting_layouts(big, h100, "fp8", [1, 2, 4, 8, 16], [1, 2, 4, 8, 16],
                                     lambda tp, pp: True)
    assert found == [(1, 8), (2, 4), (4, 2), (8, 1)]
    assert last.kind == "domain"
    # What a caller allows is the only difference between the predictor's search and the
    # planner's: here no layout of four chips or fewer holds the weights, and the refusal
    # says how many would.
    found, last = fz.fitting_layouts(big, h100, "fp8", [1, 2, 4], [1, 2, 4],
                                     lambda tp, pp: tp * pp <= 4)
    assert found == [] and last.kind == "capacity" and "at least 6 chips" in str(last)
