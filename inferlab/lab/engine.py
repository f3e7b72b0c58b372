"""A decoder-only transformer in NumPy, with real compute, for measuring inference.

The model has the shape of a modern open-weights LLM (Llama, Mistral, Qwen):
RMSNorm, rotary position embeddings (RoPE), grouped-query attention (GQA) with
a KV cache, and a SwiGLU MLP, with the token embedding reused as the output
head (tied embeddings, as in GPT-2, Gemma and Llama 3.2 1B). Its weights are
random numbers drawn from a seeded generator: nothing is downloaded, and the
*speed* of inference does not depend on what the weights say, only on their
shapes. That is what the engine is for: the chapters "prefill and decode",
"bandwidth floor" and "batching", and the endpoint lab, time it on the reader's
own machine and compare the times with the floors the roofline predicts.

Weights and activations are float32. Real deployments store bf16 or fp16
weights, but NumPy has no fast half-precision matrix multiply: BLAS has no
float16 routine, so NumPy runs float16 products in its own scalar loop
(measured: a 256 x 2048 by 2048 x 2048 product ran at 0.5 GFLOP/s in float16
and 244 GFLOP/s in float32 on a 2-core EPYC). Float32 is the precision in which
a NumPy engine reaches the memory bandwidth and FLOP/s of the machine. Every
byte count in this module is therefore 4 bytes per number; multiply by 0.5 for
what a bf16 model would read.

Layer weights are stored ``(in_features, out_features)`` and applied as
``x @ W``, as the equations are written, and the tied embedding likewise as the
output head's ``(width, vocab)`` (a token's embedding is a column). The layout
was chosen by measurement (2-core EPYC, OpenBLAS 0.3, float32). At batch 1
NumPy hands ``x @ W`` to BLAS as a matrix-vector product (GEMV), which streams
weights at 45-70 GB/s. At batch 2-16 it is a matrix product with a few rows
(small-M GEMM), which OpenBLAS runs by repacking the weights into its blocked
layout: 18-22 GB/s of weights from memory and only 31-35 GB/s with the weights
already in cache, so batch-8 decode is bound by repacking and arithmetic, not
by bandwidth. The PyTorch layout ``(out, in)`` with ``x @ W.T`` made batch-1
decode about 9% faster and batch-8 decode 6-10% slower; ``(in, out)`` is the
better compromise for a lab about batching. Splitting weights into cache-sized
panels, the usual advice against repacking, did not pay: 10-15% faster for a
``(vocab, width)`` head at batch 8, no faster or slower for ``(in, out)``
matrices.

Sizes are named in :data:`inferlab.lab.engine_sizes.SIZES`;
:func:`~inferlab.lab.engine_sizes.estimate` gives the memory and time a size needs
before anything is allocated, and :class:`Engine` refuses a size that would not fit in
free memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from inferlab.common import checks
from inferlab.lab.engine_sizes import (
    BYTES_PER_NUMBER,
    DTYPE,
    FREE_MEMORY_FRACTION,
    EngineConfig,
    available_memory_bytes,
    check_fits,
    estimate,
)

#: Caches above this many bytes are checked against free memory before they are allocated.
_CACHE_BYTES_CHECKED = 2**26


class KVCache:
    """Keys and values of every token seen so far, per layer, preallocated to ``capacity``.

    ``keys[layer]`` and ``values[layer]`` have shape ``(batch, kv_heads,
    capacity, head_width)``; positions ``0 .. length-1`` are filled. A cache is
    state that each forward pass appends to, so it is a mutable object rather
    than a frozen dataclass: writing new tokens in place into preallocated
    arrays keeps a decode step's cost to reading the cache, where growing it with
    ``np.concatenate`` would also copy all of it every step.
    """

    def __init__(self, config: EngineConfig, batch: int, capacity: int) -> None:
        batch = checks.whole("batch", batch, maximum=checks.MAX_ITEMS)
        capacity = checks.whole("capacity", capacity, maximum=checks.MAX_ITEMS)
        shape = (batch, config.kv_heads, capacity, config.head_width)
        needs = 2 * config.layers * math.prod(shape) * BYTES_PER_NUMBER
        refusal = (f"batch, capacity: a cache of {batch:,} x {capacity:,} tokens needs "
                   f"{needs / 2**30:.2f} GiB")
        # Free memory is read only for a large cache: a prefill builds a cache inside the
        # timed region of measure.ttft_by_prompt_length, and reading /proc costs there.
        if needs > _CACHE_BYTES_CHECKED:
            available, source = available_memory_bytes()
            if needs > FREE_MEMORY_FRACTION * available:
                raise ValueError(f"{refusal}, over {FREE_MEMORY_FRACTION:.0%} of the "
                                 f"{available / 2**30:.2f} GiB available ({source})")
        try:
            self.keys = [np.zeros(shape, DTYPE) for _ in range(config.layers)]
            self.values = [np.zeros(shape, DTYPE) for _ in range(config.layers)]
        except MemoryError:
            # A limit below what the OS reports free (a container's, ulimit -v) refuses it.
            raise ValueError(f"{refusal}, more than this process may allocate") from None
        self.batch = batch
        self.capacity = capacity
        self.length = 0

    def truncate(self, length: int) -> None:
        """Forget every position from ``length`` on (to time the same step again)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"length: got {length}; must be between 0 and {self.length}")
        self.length = length

    def fill_random(self, length: int, rng: np.random.Generator) -> None:
        """Fill positions ``0 .. length-1`` with random keys and values, for timing only.

        The cost of a decode step depends on how many positions the cache
        holds, not on their contents, so this stands in for prefilling a long
        context at a fraction of the time (chapter "batching").
        """
        if not 0 <= length <= self.capacity:
            raise ValueError(f"length: got {length}; must be between 0 and {self.capacity}")
        for keys, values in zip(self.keys, self.values, strict=True):
            keys[:, :, :length] = rng.standard_normal(keys[:, :, :length].shape, dtype=DTYPE)
            values[:, :, :length] = rng.standard_normal(values[:, :, :length].shape, dtype=DTYPE)
        self.length = length

    @property
    def nbytes(self) -> int:
        return sum(array.nbytes for array in self.keys + self.values)


@dataclass(frozen=True)
class LayerWeights:
    """One transformer block. Matrices are ``(in_features, out_features)``.

    Q, K and V are one matrix, and so are the MLP's gate and up projections:
    one matrix multiply instead of three (or two) reads the same bytes with
    fewer calls, which matters at batch-1 decode where each call is short.
    """

    attention_norm: np.ndarray  # (width,)
    qkv: np.ndarray  # (width, width + 2 * kv_width)
    attention_out: np.ndarray  # (width, width)
    mlp_norm: np.ndarray  # (width,)
    gate_up: np.ndarray  # (width, 2 * mlp_width)
    down: np.ndarray  # (mlp_width, width)


# The building blocks, each public with its arguments checked, and an unchecked twin that
# the forward pass calls on arrays it built itself: a check scans every element, and the
# forward pass calls these once per layer per step.


def _values(name: str, x) -> np.ndarray:
    """``x`` as an array in its own dtype (float32 stays float32), once checked finite."""
    checks.reals(name, x)
    return np.asarray(x)


def rms_norm(x: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    """``x / sqrt(mean(x^2) + eps) * gain`` over the last axis (Zhang & Sennrich, 2019)."""
    x, gain = _values("x", x), _values("gain", gain)
    if gain.shape != x.shape[-1:]:
        raise ValueError(f"gain: shape {gain.shape}; give one gain per element of x's last "
                         f"axis, shape {x.shape[-1:]}")
    result = _rms_norm(x, gain, checks.non_negative("eps", eps))
    return checks.finite_result(result, "x", "eps")


def _rms_norm(x: np.ndarray, gain: np.ndarray, eps: float) -> np.ndarray:
    mean_square = np.mean(np.square(x), axis=-1, keepdims=True)
    return x * (gain / np.sqrt(mean_square + eps))


def rotary_angles(
    positions: np.ndarray, head_width: int, base: float
) -> tuple[np.ndarray, np.ndarray]:
    """Cosine and sine of ``position x base^(-2i/head_width)``, ``(tokens, head_width/2)`` each.

    Computed once per forward pass and shared by every layer's queries and keys.
    ``base`` is above 1, as :class:`~inferlab.lab.engine_sizes.EngineConfig`'s ``rope_base``.
    """
    positions = checks.reals("positions", positions, low=0.0)
    head_width = checks.whole("head_width", head_width, minimum=2, maximum=checks.MAX_ITEMS)
    if positions.size * (head_width // 2) > checks.MAX_ITEMS:
        raise ValueError(f"positions, head_width: {positions.size:,} positions x "
                         f"{head_width // 2:,} angles is more than {checks.MAX_ITEMS:,}")
    return _rotary_angles(positions, head_width, checks.real("base", base, low=1.0,
                                                             low_open=True))


def _rotary_angles(positions, head_width: int, base: float) -> tuple[np.ndarray, np.ndarray]:
    half = head_width // 2
    inverse_frequency = base ** (-np.arange(half, dtype=np.float64) / half)
    angles = np.outer(positions, inverse_frequency)
    return np.cos(angles).astype(DTYPE), np.sin(angles).astype(DTYPE)


def rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    """Rotate pairs of dimensions of ``x`` ``(batch, heads, tokens, head_width)`` by position.

    ``cos`` and ``sin`` come from :func:`rotary_angles` for the tokens'
    absolute positions. Keys are rotated before they enter the cache, so a
    cached key carries its own position and decoding with the cache equals
    recomputing the whole sequence (Su et al., 2021, "RoFormer"; the half-split
    pairing of GPT-NeoX and Llama).
    """
    x, cos, sin = _values("x", x), _values("cos", cos), _values("sin", sin)
    half = x.shape[-1] // 2
    try:
        if cos.shape != sin.shape:
            raise ValueError
        np.broadcast_shapes(x[..., :half].shape, cos.shape)
    except ValueError:
        raise ValueError(f"cos, sin: shapes {cos.shape} and {sin.shape}; give one shape that "
                         f"fits half of x's last axis, {x[..., :half].shape}") from None
    return checks.finite_result(_rope(x, cos, sin), "x")


def _rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    first, second = x[..., :half], x[..., half:]
    return np.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


def silu(x: np.ndarray) -> np.ndarray:
    """``x * sigmoid(x)``, the gate nonlinearity of SwiGLU (Shazeer, 2020).

    Written with ``sigmoid(x) = (1 + tanh(x / 2)) / 2``, which cannot overflow
    where ``1 / (1 + exp(-x))`` would for ``x < -88`` in float32.
    """
    return _silu(_values("x", x))


def _silu(x: np.ndarray) -> np.ndarray:
    return x * (0.5 + 0.5 * np.tanh(0.5 * x))


def softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis, shifted by the maximum so ``exp`` cannot overflow."""
    x = _values("x", x)
    return _softmax(x if x.dtype.kind == "f" else x.astype(float))


def _softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=-1, keepdims=True)
    # In place: at batch 8 and long contexts the scores are megabytes, and each
    # temporary would be another pass through memory.
    np.exp(shifted, out=shifted)
    shifted /= shifted.sum(axis=-1, keepdims=True)
    return shifted


class Engine:
    """The model: seeded random weights, a forward pass with a KV cache, greedy decoding.

    ``Engine(config, seed)`` first works out the memory the size needs and refuses it with
    ``ValueError`` if it would not fit (see :func:`~inferlab.lab.engine_sizes.check_fits`;
    ``available`` overrides the free-memory figure, for tests). ``show`` (``print`` by default,
    ``None`` for silence) receives the :class:`~inferlab.lab.engine_sizes.Estimate` line before
    the weights are drawn, with time floors if the measured ``bandwidth_bytes_per_s`` and
    ``flop_per_s`` are given. The same seed gives the same weights. Chapters "prefill and
    decode", "bandwidth floor" and "batching".
    """

    def __init__(
        self,
        config: EngineConfig,
        seed: int = 0,
        *,
        bandwidth_bytes_per_s: float | None = None,
        flop_per_s: float | None = None,
        show: Callable[[str], object] | None = print,
        available: tuple[int, str] | None = None,
    ) -> None:
        self.config = config
        self.estimate = estimate(config, bandwidth_bytes_per_s, flop_per_s)
        check_fits(self.estimate, available)
        if show is not None:
            show(self.estimate.describe())
        rng = np.random.default_rng(checks.seed("seed", seed))
        d, f = config.model_width, config.mlp_width

        def matrix(rows: int, columns: int) -> np.ndarray:
            # Scaled by 1/sqrt(fan-in), the rows of an (in, out) matrix, so
            # activations stay of order one through the layers and the logits
            # are not all ties.
            weights = rng.standard_normal((rows, columns), dtype=DTYPE)
            weights *= DTYPE(1.0 / math.sqrt(rows))
            return weights

        # (width, vocab): column t is token t's embedding, and the whole matrix
        # is the output head (tied embeddings), whose fan-in is the width.
        self.embedding = matrix(d, config.vocab_size)
        self.layers = [
            LayerWeights(
                attention_norm=np.ones(d, DTYPE),
                qkv=matrix(d, d + 2 * config.kv_width),
                attention_out=matrix(d, d),
                mlp_norm=np.ones(d, DTYPE),
                gate_up=matrix(d, 2 * f),
                down=matrix(f, d),
            )
            for _ in range(config.layers)
        ]
        self.final_norm = np.ones(d, DTYPE)

    @property
    def params(self) -> int:
        """Parameters actually allocated (equals ``config.params``)."""
        arrays = [self.embedding, self.final_norm]
        for layer in self.layers:
            arrays += [layer.attention_norm, layer.qkv, layer.attention_out,
                       layer.mlp_norm, layer.gate_up, layer.down]
        return sum(array.size for array in arrays)

    @property
    def weight_bytes(self) -> int:
        return self.params * BYTES_PER_NUMBER

    def new_cache(self, batch: int, capacity: int) -> KVCache:
        """An empty KV cache for ``batch`` sequences of up to ``capacity`` tokens."""
        return KVCache(self.config, batch, capacity)

    def forward(self, tokens: np.ndarray, cache: KVCache, all_logits: bool = False) -> np.ndarray:
        """Run ``tokens`` ``(batch, new_tokens)`` through the model, appending to ``cache``.

        Prefill and decode are the same computation: a prefill passes the whole
        prompt (many tokens per sequence, matrix-matrix products), a decode step
        one token per sequence (matrix-vector products at batch 1). Returns the
        logits of the last position, ``(batch, vocab)``, or of every new
        position, ``(batch, new_tokens, vocab)``, if ``all_logits``.
        """
        config = self.config
        tokens = np.asarray(tokens)
        if tokens.ndim != 2 or tokens.shape[1] < 1:
            raise ValueError(
                f"tokens: got shape {tokens.shape}; "
                "must be (batch, new_tokens) with new_tokens >= 1"
            )
        batch, new = tokens.shape
        if batch != cache.batch:
            raise ValueError(f"tokens: batch {batch} does not match the cache's {cache.batch}")
        if cache.length + new > cache.capacity:
            raise ValueError(
                f"tokens: {new} new tokens after {cache.length} would exceed the cache "
                f"capacity of {cache.capacity}"
            )
        if tokens.min() < 0 or tokens.max() >= config.vocab_size:
            raise ValueError(f"tokens: ids must be in 0..{config.vocab_size - 1}")
        start, end = cache.length, cache.length + new
        positions = np.arange(start, end)
        cos, sin = _rotary_angles(positions, config.head_width, config.rope_base)
        heads, kv_heads, head_width = config.heads, config.kv_heads, config.head_width
        group = heads // kv_heads
        d = config.model_width

        # A new token at position start + i sees cache positions 0 .. start + i.
        causal = np.arange(end)[None, :] <= positions[:, None]
        mask = np.where(causal, 0.0, -np.inf).astype(DTYPE)

        # Columns of the (width, vocab) embedding: (width, batch, new) -> rows.
        x = self.embedding[:, tokens].transpose(1, 2, 0).reshape(batch * new, d)
        for index, layer in enumerate(self.layers):
            q, k, v = self._projections(layer, x, batch, new)
            q, k = _rope(q, cos, sin) * self._query_scale, _rope(k, cos, sin)
            keys, values = cache.keys[index], cache.values[index]
            keys[:, :, start:end] = k
            values[:, :, start:end] = v

            # Grouped-query attention: the `group` query heads that share a KV
            # head are stacked as rows of one matrix, so each cached key and
            # value is read once per KV head, not once per query head.
            q = q.reshape(batch, kv_heads, group * new, head_width)
            scores = q @ keys[:, :, :end].transpose(0, 1, 3, 2)
            scores.reshape(batch, kv_heads, group, new, end)[...] += mask
            weights = _softmax(scores).reshape(batch, kv_heads, group * new, end)
            attended = weights @ values[:, :, :end]
            attended = attended.reshape(batch, heads, new, head_width).transpose(0, 2, 1, 3)
            x = self._mlp(layer, x + attended.reshape(batch * new, d) @ layer.attention_out)
        cache.length = end

        x = x.reshape(batch, new, d)
        return self._logits(x if all_logits else x[:, -1])

    def decode_ragged(self, tokens: np.ndarray, caches: list[KVCache]) -> np.ndarray:
        """One decode step for sequences of different lengths, each with its own batch-1 cache.

        ``tokens`` ``(batch,)`` is each sequence's newest token. The weight matrix
        multiplies run once for the whole batch (one weight read shared by every
        sequence, the point of batching); attention runs per sequence over its own
        cache, whose lengths differ. Returns ``(batch, vocab)`` logits, equal (to
        float32 rounding) to :meth:`decode_step` on each sequence alone. The lab
        server (:mod:`inferlab.lab.server`) decodes its running requests with it.
        """
        tokens = np.asarray(tokens)
        if tokens.ndim != 1 or len(tokens) != len(caches) or not caches:
            raise ValueError(f"tokens: got shape {tokens.shape}; must be (len(caches),) >= 1")
        if len(caches) == 1:
            return self.decode_step(tokens, caches[0])
        for cache in caches:
            if cache.batch != 1 or cache.length + 1 > cache.capacity:
                raise ValueError("caches: each must be a batch-1 cache with room for one more "
                                 "token")
        config = self.config
        batch, d = len(caches), config.model_width
        heads, kv_heads, head_width = config.heads, config.kv_heads, config.head_width
        group = heads // kv_heads
        positions = np.array([cache.length for cache in caches])
        cos, sin = _rotary_angles(positions, head_width, config.rope_base)
        cos, sin = cos[:, None, None, :], sin[:, None, None, :]
        x = self.embedding[:, tokens].T
        attended = np.empty((batch, heads, head_width), DTYPE)
        for index, layer in enumerate(self.layers):
            q, k, v = self._projections(layer, x, batch, 1)
            q, k = _rope(q, cos, sin) * self._query_scale, _rope(k, cos, sin)
            for row, cache in enumerate(caches):
                end = positions[row] + 1
                keys, values = cache.keys[index][0], cache.values[index][0]
                keys[:, end - 1] = k[row, :, 0]
                values[:, end - 1] = v[row, :, 0]
                query = q[row].reshape(kv_heads, group, head_width)
                scores = query @ keys[:, :end].transpose(0, 2, 1)
                attended[row] = (_softmax(scores) @ values[:, :end]).reshape(heads, head_width)
            x = self._mlp(layer, x + attended.reshape(batch, d) @ layer.attention_out)
        for cache in caches:
            cache.length += 1
        return self._logits(x)

    # ---- the pieces every pass shares ----------------------------------------------

    @property
    def _query_scale(self):
        # Scaling the queries by 1/sqrt(head_width) scales the scores, on head_width
        # numbers per query instead of one per cached position.
        return DTYPE(1.0 / math.sqrt(self.config.head_width))

    def _projections(self, layer, x: np.ndarray, batch: int, new: int):
        """The layer's normed input through the fused QKV matrix, as ``(batch, heads, new,
        head_width)`` queries and ``(batch, kv_heads, new, head_width)`` keys and values."""
        config = self.config
        d, kv_width, head_width = config.model_width, config.kv_width, config.head_width
        qkv = _rms_norm(x, layer.attention_norm, config.norm_eps) @ layer.qkv

        def heads(columns, count):
            return columns.reshape(batch, new, count, head_width).transpose(0, 2, 1, 3)

        return (heads(qkv[:, :d], config.heads), heads(qkv[:, d:d + kv_width], config.kv_heads),
                heads(qkv[:, d + kv_width:], config.kv_heads))

    def _mlp(self, layer, x: np.ndarray) -> np.ndarray:
        """The residual stream after the layer's gated MLP (SwiGLU)."""
        config = self.config
        gate_up = _rms_norm(x, layer.mlp_norm, config.norm_eps) @ layer.gate_up
        gate, up = gate_up[:, :config.mlp_width], gate_up[:, config.mlp_width:]
        return x + (_silu(gate) * up) @ layer.down

    def _logits(self, x: np.ndarray) -> np.ndarray:
        # Tied embeddings: the output head is the embedding matrix.
        return _rms_norm(x, self.final_norm, self.config.norm_eps) @ self.embedding

    def prefill(
        self, prompts: np.ndarray, capacity: int | None = None
    ) -> tuple[np.ndarray, KVCache]:
        """Process equal-length ``prompts`` ``(batch, prompt_tokens)`` in one pass.

        Returns the logits of the last prompt position, from which the first
        output token is sampled (so its time is the time to first token, TTFT),
        and the filled cache, with room for ``capacity`` tokens in all
        (the prompt length by default).
        """
        prompts = np.asarray(prompts)
        if prompts.ndim != 2:
            raise ValueError(f"prompts: got shape {prompts.shape}; must be (batch, prompt_tokens)")
        cache = self.new_cache(prompts.shape[0], prompts.shape[1] if capacity is None else capacity)
        return self.forward(prompts, cache), cache

    def decode_step(self, tokens: np.ndarray, cache: KVCache) -> np.ndarray:
        """One decode step: one new token per sequence, ``(batch,)``; returns ``(batch, vocab)``."""
        tokens = np.asarray(tokens)
        if tokens.ndim != 1:
            raise ValueError(f"tokens: got shape {tokens.shape}; must be (batch,)")
        return self.forward(tokens[:, None], cache)

    def generate(self, prompts: np.ndarray, new_tokens: int) -> np.ndarray:
        """Greedy decoding: prefill, then ``new_tokens - 1`` decode steps; ``(batch, new_tokens)``.

        Greedy sampling takes the most likely token at each step, so the output
        is deterministic, which is what the equivalence tests need.
        """
        new_tokens = checks.whole("new_tokens", new_tokens, maximum=checks.MAX_ITEMS)
        prompts = np.asarray(prompts)
        if prompts.ndim != 2:
            raise ValueError(f"prompts: got shape {prompts.shape}; must be (batch, prompt_tokens)")
        logits, cache = self.prefill(prompts, capacity=prompts.shape[1] + new_tokens)
        output = [greedy(logits)]
        for _ in range(new_tokens - 1):
            output.append(greedy(self.decode_step(output[-1], cache)))
        return np.stack(output, axis=1)

    def logits_without_cache(self, tokens: np.ndarray) -> np.ndarray:
        """Logits of every position, recomputing the whole sequence from scratch.

        What decoding would cost with no KV cache; the tests check the cached
        path against it.
        """
        tokens = np.asarray(tokens)
        if tokens.ndim != 2:
            raise ValueError(f"tokens: got shape {tokens.shape}; must be (batch, tokens)")
        return self.forward(tokens, self.new_cache(*tokens.shape), all_logits=True)


def greedy(logits: np.ndarray) -> np.ndarray:
    """The most likely token of each row of ``logits`` (``(batch, vocab)`` -> ``(batch,)``).

    Only the shape is checked: the server and the timed decode loops call this every
    step, and a NaN logit still gives a token id.
    """
    array = np.asarray(logits)
    if array.ndim == 0 or array.shape[-1] == 0:
        raise ValueError(f"logits: shape {array.shape}; give at least one logit per row")
    return np.argmax(array, axis=-1)
