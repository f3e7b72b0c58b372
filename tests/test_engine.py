"""The NumPy engine computes what a transformer with a KV cache should, at small sizes."""

from __future__ import annotations

import numpy as np
import pytest

from inferlab.lab.engine import Engine, rms_norm, rope, rotary_angles, silu, softmax
from inferlab.lab.engine_sizes import (
    DEFAULT_SIZE,
    SIZES,
    EngineConfig,
    check_fits,
    decode_bytes,
    estimate,
    prefill_flop,
)
from inferlab.model.roofline import request_flop

# Float32 sums in a different order (one token at a time, or BLAS GEMV
# against GEMM) differ in the last bits; logits are of order one.
TOLERANCE = {"rtol": 1e-4, "atol": 1e-4}

# Grouped-query attention with 2 query heads per KV head, and a vocabulary
# small enough that the tests run in a fraction of a second.
CONFIG = EngineConfig(layers=3, model_width=64, heads=8, kv_heads=4, mlp_width=96,
                      vocab_size=300, name="test")


@pytest.fixture(scope="module")
def engine() -> Engine:
    return Engine(CONFIG, seed=1, show=None)


def prompts(batch: int, tokens: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, CONFIG.vocab_size, size=(batch, tokens))


def test_decoding_with_the_cache_equals_recomputing_without_it(engine):
    sequence = prompts(2, 12)
    full = engine.logits_without_cache(sequence)
    logits, cache = engine.prefill(sequence[:, :5], capacity=12)
    np.testing.assert_allclose(logits, full[:, 4], **TOLERANCE)
    for position in range(5, 12):
        logits = engine.decode_step(sequence[:, position], cache)
        np.testing.assert_allclose(logits, full[:, position], **TOLERANCE)
    assert cache.length == 12


def test_prefill_equals_feeding_the_prompt_one_token_at_a_time(engine):
    prompt = prompts(1, 9, seed=2)
    logits, prefilled = engine.prefill(prompt)
    stepped = engine.new_cache(1, 9)
    for position in range(9):
        one_at_a_time = engine.decode_step(prompt[:, position], stepped)
    np.testing.assert_allclose(logits, one_at_a_time, **TOLERANCE)
    for layer in range(CONFIG.layers):
        np.testing.assert_allclose(prefilled.keys[layer], stepped.keys[layer], **TOLERANCE)
        np.testing.assert_allclose(prefilled.values[layer], stepped.values[layer], **TOLERANCE)


def test_batched_decode_equals_decoding_each_sequence_alone(engine):
    batch = prompts(4, 6, seed=3)
    together = engine.generate(batch, new_tokens=6)
    logits_together, cache = engine.prefill(batch, capacity=8)
    next_together = engine.decode_step(together[:, 0], cache)
    for row in range(4):
        alone = engine.generate(batch[row : row + 1], new_tokens=6)
        np.testing.assert_array_equal(together[row], alone[0])
        logits_alone, cache_alone = engine.prefill(batch[row : row + 1], capacity=8)
        np.testing.assert_allclose(logits_together[row], logits_alone[0], **TOLERANCE)
        next_alone = engine.decode_step(together[row : row + 1, 0], cache_alone)
        np.testing.assert_allclose(next_together[row], next_alone[0], **TOLERANCE)


def test_greedy_generation_is_deterministic_for_a_seed():
    first = Engine(CONFIG, seed=7, show=None).generate(prompts(2, 4), new_tokens=5)
    second = Engine(CONFIG, seed=7, show=None).generate(prompts(2, 4), new_tokens=5)
    np.testing.assert_array_equal(first, second)
    assert first.shape == (2, 5)
    assert first.min() >= 0 and first.max() < CONFIG.vocab_size


def test_shapes_and_parameter_count_match_the_configuration(engine):
    d, f, head = CONFIG.model_width, CONFIG.mlp_width, CONFIG.model_width // CONFIG.heads
    kv = CONFIG.kv_heads * head
    assert engine.embedding.shape == (d, CONFIG.vocab_size)
    assert len(engine.layers) == CONFIG.layers
    layer = engine.layers[0]
    assert layer.qkv.shape == (d, d + 2 * kv)
    assert layer.attention_out.shape == (d, d)
    assert layer.gate_up.shape == (d, 2 * f)
    assert layer.down.shape == (f, d)
    per_layer = d * (d + 2 * kv) + d * d + 3 * d * f + 2 * d
    expected = CONFIG.vocab_size * d + CONFIG.layers * per_layer + d
    assert CONFIG.params == engine.params == expected
    assert engine.weight_bytes == CONFIG.weight_bytes == 4 * expected
    assert all(array.dtype == np.float32 for array in (engine.embedding, layer.qkv, layer.down))
    cache = engine.new_cache(3, 10)
    assert cache.keys[0].shape == (3, CONFIG.kv_heads, 10, head)
    assert cache.nbytes == 3 * 10 * CONFIG.kv_bytes_per_token
    logits, _ = engine.prefill(prompts(3, 4))
    assert logits.shape == (3, CONFIG.vocab_size)
    assert logits.dtype == np.float32


@pytest.mark.parametrize(
    ("changes", "argument"),
    [
        ({"heads": 5}, "heads"),
        ({"kv_heads": 3}, "kv_heads"),
        ({"layers": 0}, "layers"),
        ({"model_width": 0}, "model_width"),
        ({"mlp_width": -1}, "mlp_width"),
        ({"vocab_size": 0}, "vocab_size"),
        ({"kv_heads": 0}, "kv_heads"),
        ({"heads": 0}, "heads"),
        ({"layers": 2.5}, "layers"),
        ({"heads": 64}, "heads"),  # a head width of 1 cannot be rotated in pairs
    ],
)
def test_invalid_configurations_name_the_argument(changes, argument):
    fields = {"layers": 2, "model_width": 64, "heads": 8, "kv_heads": 4, "mlp_width": 96,
              "vocab_size": 100, **changes}
    with pytest.raises(ValueError, match=rf"^{argument}: "):
        EngineConfig(**fields)


def test_named_sizes_and_unknown_names():
    assert EngineConfig.named("small") is SIZES["small"] is EngineConfig.named()
    assert DEFAULT_SIZE == "small"
    weights = [SIZES[name].weight_bytes for name in ("tiny", "small", "medium", "large")]
    assert weights == sorted(weights)
    with pytest.raises(ValueError, match="name: unknown size 'huge'; known: tiny, small"):
        EngineConfig.named("huge")


def test_bad_inputs_to_the_forward_pass_raise(engine):
    cache = engine.new_cache(2, 4)
    with pytest.raises(ValueError, match="tokens: ids must be in 0..299"):
        engine.forward(np.array([[0, 300]]).reshape(2, 1), cache)
    with pytest.raises(ValueError, match="exceed the cache capacity of 4"):
        engine.forward(prompts(2, 5), cache)
    with pytest.raises(ValueError, match="does not match the cache's 2"):
        engine.forward(prompts(3, 1), cache)


def test_floors_follow_their_formulas():
    config = SIZES["small"]
    assert decode_bytes(config, 1, 0) == config.weight_bytes
    assert decode_bytes(config, 8, 100) == config.weight_bytes + 800 * config.kv_bytes_per_token
    layer_flop = 2 * config.layers * config.layer_matmul_params * 256
    head = 2 * config.vocab_size * config.model_width
    # The roofline's count, which every model's prediction uses; it takes every parameter
    # but the lookups as a multiply, the norms' gains too (2 x width a layer, and the
    # final norm's width), so it exceeds the matrix multiplies by exactly their share.
    gains = 2 * (2 * config.model_width * config.layers + config.model_width) * 256
    assert prefill_flop(config, 256) == layer_flop + gains + head
    assert prefill_flop(config, 256) == request_flop(config.spec, 256)
    # The head once per prompt, not once per prompt token.
    assert prefill_flop(config, 256, batch=3) == 3 * (layer_flop + gains + head)
    shown = estimate(config, bandwidth_bytes_per_s=50e9, flop_per_s=200e9)
    assert shown.weight_bytes == config.weight_bytes
    assert shown.decode_step_s == pytest.approx(decode_bytes(config, 1, 512) / 50e9)
    assert shown.memory_bytes > config.weight_bytes
    assert "small" in shown.describe() and "decode step >= " in shown.describe()
    # Short lines: a page's output box clips or scrolls a long one.
    assert max(len(line) for line in shown.describe().splitlines()) <= 88
    memory_only = estimate(config)
    assert memory_only.memory_bytes == shown.memory_bytes
    assert np.isnan(memory_only.decode_step_s) and "decode step" not in memory_only.describe()
    with pytest.raises(ValueError, match="flop_per_s: 0 is not allowed"):
        estimate(config, flop_per_s=0)


def test_a_size_that_does_not_fit_is_refused_with_the_estimate_and_the_limit():
    too_little = (100 * 2**20, "test figure")
    needs = estimate(SIZES["small"], bandwidth_bytes_per_s=50e9, flop_per_s=200e9)
    refusal = (
        rf"config: size 'small' needs an estimated {needs.memory_bytes / 2**30:.2f} GiB "
        rf"\({needs.memory_bytes} bytes\) at batch 1 x 512 tokens, over the limit of 0\.08 GiB "
        r"\(83886080 bytes = 80% of 0\.10 GiB available, test figure\)"
    )
    with pytest.raises(ValueError, match=refusal):
        Engine(SIZES["small"], show=None, available=too_little)
    with pytest.raises(ValueError, match=refusal):
        check_fits(needs, too_little)
    check_fits(estimate(SIZES["tiny"]), too_little)


def test_the_estimate_is_shown_before_the_weights_are_drawn():
    shown = []
    Engine(SIZES["tiny"], show=shown.append)
    assert len(shown) == 1 and shown[0].startswith("tiny:")


def test_building_blocks_match_their_formulas():
    x = np.array([[-1000.0, -1.0, 0.0, 2.0, 1000.0]], dtype=np.float32)
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        activated = silu(x)
        probabilities = softmax(x)
    # x / (1 + e^-x), worked out by hand.
    np.testing.assert_allclose(activated, [[0.0, -0.2689414, 0.0, 1.7615942, 1000.0]],
                               rtol=1e-6, atol=1e-30)
    np.testing.assert_allclose(probabilities.sum(), 1.0, rtol=1e-6)
    normalised = rms_norm(np.array([[3.0, 4.0]], dtype=np.float32), np.ones(2, np.float32), 0.0)
    np.testing.assert_allclose(normalised, [[3 / np.sqrt(12.5), 4 / np.sqrt(12.5)]], rtol=1e-6)
    # RoPE is a rotation: it keeps the length of every pair of dimensions.
    vectors = np.random.default_rng(0).standard_normal((1, 2, 3, 8)).astype(np.float32)
    cos, sin = rotary_angles(np.arange(3), 8, 10_000.0)
    rotated = rope(vectors, cos, sin)
    np.testing.assert_allclose(np.linalg.norm(rotated, axis=-1), np.linalg.norm(vectors, axis=-1),
                               rtol=1e-5)
    np.testing.assert_allclose(rotated[:, :, 0], vectors[:, :, 0])  # position 0: no rotation


def test_ragged_decode_matches_one_sequence_at_a_time():
    engine = Engine(EngineConfig.named("tiny"), show=None)
    rng = np.random.default_rng(1)
    prompts = [rng.integers(0, 512, n) for n in (3, 9, 5)]
    ragged, alone = [], []
    for p in prompts:
        logits, cache = engine.prefill(p[None, :], capacity=len(p) + 2)
        ragged.append((int(logits.argmax()), cache))
        _, cache2 = engine.prefill(p[None, :], capacity=len(p) + 2)
        alone.append(cache2)
    tokens = np.array([t for t, _ in ragged])
    batched = engine.decode_ragged(tokens, [c for _, c in ragged])
    for row, (token, cache) in enumerate(zip(tokens, alone, strict=True)):
        single = engine.decode_step(np.array([token]), cache)[0]
        np.testing.assert_allclose(batched[row], single, rtol=1e-4, atol=1e-4)
    assert [c.length for _, c in ragged] == [len(p) + 1 for p in prompts]
