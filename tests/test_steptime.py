"""The step-time model of one replica: its pieces, its regimes, its closed forms and its errors."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.model import steptime as st
from inferlab.model.capacity import ACTIVATION_RESERVE_FRACTION
from inferlab.model.feasibility import Infeasible
from inferlab.model.parallel import allreduce_s
from inferlab.model.roofline import (
    activation_bytes_per_token,
    attention_flop_per_pair,
    flop_per_token,
)
from inferlab.model.specs import chip, model
from inferlab.pages.explorers import batching

H200 = "NVIDIA H200 SXM"
H100 = "NVIDIA H100 SXM"
B200 = "NVIDIA B200"


def test_llama2_70b_fp8_on_one_h200_has_the_published_shape():
    rep = st.replica("Llama 2 70B", H200, 1, "fp8")
    spec = model("Llama 2 70B")
    assert rep.weight_bytes == pytest.approx(spec.params_total)  # one byte per parameter
    assert rep.kv_bytes_per_token == 2 * 80 * 8 * 128  # K and V, 80 layers, 8 KV heads of 128
    usable = chip(H200).memory_capacity_bytes * (1 - ACTIVATION_RESERVE_FRACTION)
    assert rep.kv_capacity_tokens == int((usable - spec.params_total) // rep.kv_bytes_per_token)
    # Two FLOPs per parameter a token multiplies by: all but the embedding table it looks up.
    assert rep.flop_per_token == pytest.approx(2 * (spec.params_active - 32_000 * 8192))
    assert rep.allreduce_s(1000) == 0.0  # one chip: no all-reduce


def test_batch_1_decode_is_the_bandwidth_floor_plus_overhead():
    rep = st.replica("Llama 2 70B", H200, 1, "fp8", step_overhead_s=0.002)
    bandwidth = chip(H200).memory_bandwidth_bytes_per_s
    spec = model("Llama 2 70B")
    # Every weight but the embedding table, of which one row: 68.7 GB at one byte each.
    read = spec.params_total - spec.embedding_params + spec.hidden_size
    floor = (read + rep.kv_bytes_per_token * 1000) / bandwidth
    # ... plus the one token's activations between kernels (0.05 % of the floor here).
    activations = activation_bytes_per_token(spec) / bandwidth
    assert activations < 1e-3 * floor
    assert rep.decode_step_s(1, 1000) == pytest.approx(floor + activations + 0.002)


def test_the_step_is_matmuls_plus_attention_plus_overhead_with_the_ideal_roofline_at_overlap_1():
    rep = st.replica("Llama 2 70B", H200, 1, "fp8")
    small, large = rep.decode_step_s(8, 500), rep.decode_step_s(4096, 500)
    # The weights' kernels and the cache's kernels run one after the other.
    assert small == pytest.approx(float(rep.memory_s(8 * 500, 8) + rep.activation_s(8)))
    assert large == pytest.approx(float(rep.compute_s(4096) + rep.attention_s(4096 * 500)
                                        + rep.activation_s(4096)))
    # The ridge: compute of the ridge's tokens equals the weights' memory time.
    assert float(rep.compute_s(rep.ridge_tokens)) == pytest.approx(float(rep.memory_s(0)))


def test_activations_count_every_tensor_between_kernels_once_each_way():
    spec = model("Llama 3.1 8B")
    q, kv = 32 * 128, 8 * 128
    per_layer = 14 * 4096 + 3 * (q + 2 * kv) + 2 * q + 6 * 14336
    assert activation_bytes_per_token(spec) == 32 * per_layer * 2  # 16-bit
    # Tensor parallelism splits the heads and the MLP but every chip keeps the hidden vector.
    split = activation_bytes_per_token(spec, 8) - 8 * 32 * 14 * 4096 * 2
    assert split == pytest.approx(activation_bytes_per_token(spec) - 32 * 14 * 4096 * 2)
    # Widths grow the traffic, their squares the FLOPs: the small model carries more per FLOP.
    big = model("Llama 2 70B")
    ratio = (activation_bytes_per_token(spec) / flop_per_token(spec)) / (
        activation_bytes_per_token(big) / flop_per_token(big))
    assert 1.7 < ratio < 2.0
    # A mixture runs the MLP of each expert a token uses, and copies it there and back.
    mixtral = model("Mixtral 8x7B")
    dense_like = activation_bytes_per_token(spec) / 2 / 32 - 6 * 14336
    assert activation_bytes_per_token(mixtral) / 2 / 32 == pytest.approx(
        dense_like + 2 * 6 * 14336 + 2 * 3 * 4096)
    # With attention data-parallel each token's hidden vector lives on one chip only.
    assert activation_bytes_per_token(spec, 8, attention_dp=True) == pytest.approx(
        activation_bytes_per_token(spec))
    with pytest.raises(ValueError, match="tp"):
        activation_bytes_per_token(spec, 0)
    with pytest.raises(ValueError, match="attention_dp"):
        activation_bytes_per_token(spec, 8, attention_dp="yes")


def test_latent_attention_decodes_in_the_absorbed_form_with_three_times_the_arithmetic():
    r1 = model("DeepSeek-R1")
    decode = attention_flop_per_pair(r1, "decode")
    assert decode == 61 * 128 * (2 * (512 + 64) + 2 * 512)
    assert attention_flop_per_pair(r1, "prefill") == 61 * 128 * (2 * (128 + 64) + 2 * 128)
    assert 3 < decode / attention_flop_per_pair(r1, "prefill") < 4
    # Grouped-query attention has one form.
    llama = model("Llama 2 70B")
    assert attention_flop_per_pair(llama, "decode") == attention_flop_per_pair(llama) == (
        4 * 80 * 64 * 128)
    # In a step, pairs up to the tokens read are decode's; the rest a prompt's.
    rep = st.replica(r1, B200, 8, "fp4")
    peak = rep.attention_peak_flop_per_s
    assert float(rep.attention_s(1e6)) == pytest.approx(max(
        rep.kv_bytes_per_token * 1e6 / rep.bandwidth_bytes_per_s, decode * 1e6 / peak))
    assert float(rep.attention_s(1e6, 3e6)) == pytest.approx(
        (decode * 1e6 + attention_flop_per_pair(r1) * 2e6) / peak)
    with pytest.raises(ValueError, match="form"):
        attention_flop_per_pair(r1, "both")


def test_overlap_below_1_pays_part_of_the_shorter_resource():
    ideal = st.replica("Llama 2 70B", H200, 1, "fp8")
    half = ideal.with_efficiency(overlap=0.5)
    read, work = float(ideal.weights_s(100)), float(ideal.matmul_s(100))
    assert float(half.gemm_s(100)) == pytest.approx(max(read, work) + 0.5 * min(read, work))
    assert float(ideal.with_efficiency(overlap=0.0).gemm_s(100)) == pytest.approx(read + work)


def test_the_ridge_with_cache_reads_lies_beyond_the_weights_only_ridge():
    rep = st.replica("Llama 2 70B", H200, 1, "fp8")
    # Even without a cache the activations between kernels push it past the weights' ridge.
    assert rep.compute_bound_batch(0) == pytest.approx(
        float(rep.weights_s(1)) / float(rep.matmul_s(1) - rep.activation_s(1)))
    assert rep.compute_bound_batch(0) > rep.ridge_tokens
    assert rep.compute_bound_batch(1000) > rep.ridge_tokens
    # Long enough contexts make the cache cost more than the arithmetic per request.
    assert rep.compute_bound_batch(4000) == float("inf")


def test_fp4_runs_at_the_chips_native_4_bit_rate():
    fp4 = st.replica("Llama 2 70B", B200, 1, "fp4")
    fp8 = st.replica("Llama 2 70B", B200, 1, "fp8")
    assert fp4.peak_flop_per_s == pytest.approx(2 * fp8.peak_flop_per_s)
    assert fp4.weight_bytes == pytest.approx(fp8.weight_bytes / 2)
    with pytest.raises(ValueError, match="fp4 peak"):
        st.replica("Llama 2 70B", H200, 1, "fp4")


def test_efficiency_factors_scale_their_own_resource_only():
    base = st.replica("Llama 2 70B", H200, 1, "fp8")
    slow = base.with_efficiency(memory_efficiency=0.5, compute_efficiency=0.25)
    assert float(slow.memory_s(1000)) == pytest.approx(2 * float(base.memory_s(1000)))
    assert float(slow.compute_s(1000)) == pytest.approx(4 * float(base.compute_s(1000)))
    assert slow.ridge_tokens == pytest.approx(base.ridge_tokens / 2)


def test_tensor_parallel_splits_memory_and_adds_the_fastest_allreduce_per_direction():
    one = st.replica("Llama 2 70B", H200, 1, "fp8")
    eight = st.replica("Llama 2 70B", H200, 8, "fp8", allreduce_latency_s=5e-6)
    assert float(eight.memory_s(0)) == pytest.approx(float(one.memory_s(0)) / 8)
    spec, hw = model("Llama 2 70B"), chip(H200)
    assert hw.link_bytes_per_s == pytest.approx(450e9)  # NVLink 4: 900 GB/s is both directions
    for tokens in (1, 64, 4096):
        expected = 2 * spec.layers * allreduce_s(tokens * spec.hidden_size * 2.0, 8,
                                                 hw.link_bytes_per_s, 5e-6)
        assert float(eight.allreduce_s(tokens)) == pytest.approx(expected)
        fast = eight.step_function()(tokens, 1000, 1000, 1)
        assert fast == pytest.approx(eight.step_s(1000, tokens, logits=1))


def test_tensor_parallel_beyond_the_nvlink_domain_is_refused():
    with pytest.raises(Infeasible, match="8-chip scale-up domain") as error:
        st.replica("Llama 2 70B", H100, 16, "fp8")
    assert error.value.kind == "domain"
    with pytest.raises(Infeasible, match="needs a scale-up link"):
        st.replica("Llama 2 7B", "Apple M2 Max", 2, "bf16")


@pytest.mark.parametrize("chip_name", [H100, H200, B200])
def test_more_batch_never_lowers_aggregate_throughput_while_memory_bound(chip_name):
    rep = st.replica("Llama 2 70B", chip_name, 2, "fp8", step_overhead_s=0.001)
    batches = np.arange(1, int(rep.ridge_tokens))
    for context in (128, 1024, 4096):
        aggregate = batches / rep.decode_step_s(batches, context)
        per_user = 1 / rep.decode_step_s(batches, context)
        assert np.all(np.diff(aggregate) > 0)
        assert np.all(np.diff(per_user) <= 0)


def test_bad_input_names_the_argument():
    with pytest.raises(ValueError, match="tp"):
        st.replica("Llama 2 70B", H200, 0)
    with pytest.raises(ValueError, match="compute_efficiency"):
        st.replica("Llama 2 70B", H200, 1, compute_efficiency=1.5)
    with pytest.raises(ValueError, match="memory_efficiency"):
        st.replica("Llama 2 70B", H200, 1, memory_efficiency=0)
    with pytest.raises(ValueError, match="step_overhead_s"):
        st.replica("Llama 2 70B", H200, 1, step_overhead_s=-1e-3)
    with pytest.raises(ValueError, match="precision"):
        st.replica("Llama 2 70B", H200, 1, "fp5")
    with pytest.raises(ValueError, match="chip"):
        st.replica("Llama 2 70B", "No Such Chip", 1)


def test_a_model_that_leaves_no_room_for_the_cache_is_refused_with_the_chips_it_needs():
    with pytest.raises(Infeasible, match=r"needs at least 2 chips") as error:
        st.replica("Llama 2 70B", H100, 1, "fp16")
    assert error.value.kind == "capacity"
    assert st.replica("Llama 2 70B", H100, 2, "fp16").kv_capacity_tokens > 0


def test_steady_state_matches_its_formula_and_flags_what_does_not_fit():
    rep = st.replica("Llama 2 70B", H200, 1, "fp8", step_overhead_s=0.001)
    state = st.steady_state(rep, [1, 64, 5000], 300, 300)
    # Prefill work is spread over the output's steps, with its causal attention pairs.
    expected = rep.step_s(64 * (300 + 150), 64 * 2, 64 * (300 + 150) + 64 * 300 * 301 / 600)
    assert state.step_s[1] == pytest.approx(expected)
    assert state.aggregate_tok_s[1] == pytest.approx(64 / expected)
    # The step's parts, so that a caller can split it into the replica's terms.
    assert (state.tokens[1], state.context[1]) == (64 * 2, 64 * (300 + 150))
    assert state.pairs[1] == pytest.approx(64 * (300 + 150) + 64 * 300 * 301 / 600)
    assert list(state.fits) == [True, True, False]
    assert state.bound[0] == "memory" and state.bound[2] == "compute"
    with pytest.raises(ValueError, match="concurrency"):
        st.steady_state(rep, [0], 300, 300)
    with pytest.raises(ValueError, match="output_tokens"):
        st.steady_state(rep, [1], 300, 0)


def test_a_tighter_per_user_bound_never_allows_more_throughput():
    rep = st.replica("Llama 2 70B", H200, 1, "fp8", step_overhead_s=0.005)
    state = st.steady_state(rep, st.CONCURRENCY_GRID, 300, 294)
    allowed = [st.throughput_at_bound(state, bound) for bound in (1, 5, 10, 25, 50, 100)]
    assert all(a >= b for a, b in zip(allowed, allowed[1:], strict=False))
    with pytest.raises(ValueError, match="min_per_user_tok_s"):
        st.throughput_at_bound(state, -1)


def test_pareto_front_keeps_only_undominated_points():
    x, y = st.pareto_front([1, 2, 3, 2.5, 0.5], [10, 8, 2, 1, 9])
    assert list(x) == [1, 2, 3]
    assert list(y) == [10, 8, 2]


def test_fronts_rank_the_chips_as_their_specs_do():
    fronts = {name: st.interactivity_front(name, efficiency=0.65, step_overhead_s=0.001)
              for name in (H100, H200, B200)}
    for bound in (5, 25, 50):
        h100, h200, b200 = (fronts[name].throughput_at(bound) for name in (H100, H200, B200))
        assert h200 >= h100  # same compute, more bandwidth and memory
        assert b200 > h200
    # The front falls as interactivity rises: a faster user costs throughput.
    front = fronts[H200]
    assert np.all(np.diff(front.per_user_tok_s) > 0)
    assert np.all(np.diff(front.per_chip_tok_s) <= 0)


def test_per_step_overhead_is_what_makes_the_interactive_bound_cost_throughput():
    free = batching.curve_explorer_compute(step_overhead_ms=0.0)
    costly = batching.curve_explorer_compute(step_overhead_ms=10.0)
    for name in batching.CURVE_CHIPS:
        assert 0 <= free.drop(name) < 0.05
        assert costly.drop(name) > free.drop(name) + 0.1
    with pytest.raises(ValueError, match="step_overhead_ms"):
        batching.curve_explorer_compute(step_overhead_ms=-1)
    with pytest.raises(ValueError, match="efficiency"):
        batching.curve_explorer_compute(efficiency=0)


def test_a_cached_prefix_is_read_not_recomputed():
    rep = st.replica("Llama 3.1 8B", "NVIDIA H200 SXM", 1, "fp8", compute_efficiency=0.6,
                     memory_efficiency=0.8, step_overhead_s=0.002)
    prompt = 2000
    cold = rep.prefill_s(prompt)
    assert rep.prefill_s(prompt, 0) == pytest.approx(cold)
    # The uncached suffix goes through the weights, attending over every earlier token;
    # the whole prompt's cache is read.
    for cached in (500, 1500, 1999):
        new = prompt - cached
        assert rep.prefill_s(prompt, cached) == pytest.approx(
            rep.step_s(prompt, new, new * cached + new * (new + 1) / 2, logits=1))
    # More cached, never slower; a full hit still pays one token's step.
    times = rep.prefill_s(prompt, np.array([0, 500, 1000, 1500, 1999]))
    assert np.all(np.diff(times) < 0) and times[-1] >= rep.step_s(prompt, 1, prompt)
    for bad in (-1, prompt, 2.5e9, float("nan")):
        with pytest.raises(ValueError, match="cached_tokens: .* 0 to prompt_tokens - 1"):
            rep.prefill_s(prompt, bad)


def test_the_output_head_is_paid_once_per_sampled_token():
    rep = st.replica("Llama 3.1 8B", "NVIDIA H200 SXM", 1, "fp8", compute_efficiency=0.7)
    spec = rep.layout.model
    head = 2 * spec.vocab_size * spec.hidden_size
    assert rep.head_flop == head
    # A 1,000-token prompt multiplies by the head once: 999 heads fewer than 1,000
    # decoded tokens, and nothing else differs.
    saved = rep.matmul_s(1000) - rep.matmul_s(1000, 1)
    assert saved == pytest.approx(999 * head / (rep.peak_flop_per_s * 0.7))
    assert rep.prefill_s(1000) < rep.step_s(1000, 1000, 1000 * 1001 / 2)
    # Decode samples every token it computes: the default is every token.
    assert rep.decode_step_s(64, 500) == rep.step_s(64 * 500, 64, logits=64)
    # The scalar step the simulator runs agrees with the vectorised one.
    assert rep.step_function()(1000, 1000, 500_500, 1) == pytest.approx(
        rep.prefill_s(1000))
