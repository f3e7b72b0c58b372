"""The sizes of the lab's engine, and what each costs before anything is allocated.

A size (:class:`EngineConfig`, named in :data:`SIZES`) is the shape of a decoder-only
transformer: depth, width, heads, MLP width and vocabulary. Everything a size costs
follows from that shape alone: its parameters, its float32 weights and cache (counted by
:mod:`inferlab.model.capacity` and :func:`inferlab.model.roofline.decode_pass` on
:attr:`EngineConfig.spec`, as every model's are), the memory a batch needs and the time
floors of a decode step and a prefill (:func:`estimate`). :func:`check_fits` refuses a
size that would not fit in free memory, before :class:`inferlab.lab.engine.Engine` draws
a single weight.

Used by the chapters "prefill and decode", "bandwidth floor" and "batching", and by the
endpoint lab's server.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from inferlab.common import checks
from inferlab.model import capacity, specs
from inferlab.model.roofline import decode_pass, request_flop

#: The format of every weight, activation and cached key or value (see above for why), and
#: its bytes, as :func:`inferlab.model.capacity.bytes_per_param` counts them.
PRECISION = "fp32"
BYTES_PER_NUMBER = int(capacity.bytes_per_param(PRECISION))
DTYPE = np.float32

#: The size the chapters build unless the reader picks another (see :data:`SIZES`).
DEFAULT_SIZE = "small"

#: A size must fit in this fraction of the memory the OS reports as available,
#: leaving room for the notebook, the plotting library and the OS itself.
FREE_MEMORY_FRACTION = 0.8


@dataclass(frozen=True)
class EngineConfig:
    """The shape of the model: what the parameter count and every timing depend on.

    ``heads`` query heads share ``kv_heads`` key/value heads (grouped-query
    attention; ``kv_heads == heads`` is ordinary multi-head attention, 1 is
    multi-query attention). Each head has ``model_width // heads`` dimensions.
    ``mlp_width`` is the SwiGLU hidden width (Llama uses about 2.7 x the model
    width). Used by the chapters "prefill and decode", "bandwidth floor" and
    "batching".

    Raises ``ValueError`` naming the argument for sizes below 1, ``heads`` not
    dividing ``model_width``, ``kv_heads`` not dividing ``heads``, or an odd head
    width (RoPE rotates pairs of dimensions).
    """

    layers: int
    model_width: int
    heads: int
    kv_heads: int
    mlp_width: int
    vocab_size: int
    name: str = "custom"
    rope_base: float = 10_000.0
    norm_eps: float = 1e-5

    def __post_init__(self) -> None:
        for argument in ("layers", "model_width", "heads", "kv_heads", "mlp_width", "vocab_size"):
            checks.whole(argument, getattr(self, argument), maximum=checks.MAX_ITEMS)
        if self.model_width % self.heads:
            raise ValueError(
                f"heads: got {self.heads}, which does not divide model_width={self.model_width}; "
                "heads must divide model_width"
            )
        if self.heads % self.kv_heads:
            raise ValueError(
                f"kv_heads: got {self.kv_heads}, which does not divide heads={self.heads}; "
                "kv_heads must divide heads"
            )
        if self.head_width % 2:
            raise ValueError(
                f"heads: got {self.heads}, giving an odd head width {self.head_width}; "
                "RoPE needs model_width // heads to be even"
            )
        checks.real("rope_base", self.rope_base, low=1.0, low_open=True)
        checks.positive("norm_eps", self.norm_eps)

    @classmethod
    def named(cls, name: str = DEFAULT_SIZE) -> EngineConfig:
        """The size called ``name`` in :data:`SIZES` (:data:`DEFAULT_SIZE` if none).

        Raises ``ValueError`` listing the names for an unknown one.
        """
        if name not in SIZES:
            raise ValueError(f"name: unknown size {name!r}; known: {', '.join(SIZES)}")
        return SIZES[name]

    @property
    def head_width(self) -> int:
        return self.model_width // self.heads

    @property
    def kv_width(self) -> int:
        """Width of the keys (and of the values) of one token in one layer."""
        return self.kv_heads * self.head_width

    @property
    def layer_matmul_params(self) -> int:
        """Weights one token multiplies by in one layer (QKV, output, gate/up and down)."""
        d, f = self.model_width, self.mlp_width
        return d * (d + 2 * self.kv_width) + d * d + 3 * d * f

    @property
    def params(self) -> int:
        """Every parameter (tied embedding, layers with their two RMSNorm gains, final norm)."""
        d = self.model_width
        return self.vocab_size * d + self.layers * (self.layer_matmul_params + 2 * d) + d

    @property
    def spec(self) -> specs.ModelSpec:
        """This shape as the book's models are described (:class:`~inferlab.model.specs.ModelSpec`),
        so that its weights and cache are counted by the same functions as every model's
        (:mod:`inferlab.model.capacity`): a dense model whose embedding table is also its
        output head, with its own parameter count."""
        return specs.ModelSpec(
            name=f"lab engine '{self.name}'", layers=self.layers, hidden_size=self.model_width,
            attention_heads=self.heads, kv_heads=self.kv_heads, head_dim=self.head_width,
            intermediate_size=self.mlp_width, vocab_size=self.vocab_size,
            params_total=float(self.params), params_active=float(self.params), experts=1,
            experts_per_token=1, context_length_tokens=checks.MAX_ITEMS,
            attention="mha" if self.kv_heads == self.heads else "gqa",
            source="inferlab.lab.engine_sizes.SIZES", tied_embeddings=True)

    @property
    def weight_bytes(self) -> int:
        """Bytes of all weights in float32; a decode step reads every one of them once."""
        return int(capacity.weight_bytes(self.params, PRECISION))

    @property
    def kv_bytes_per_token(self) -> int:
        """Bytes one token adds to the KV cache (keys and values, every layer, float32)."""
        return int(capacity.kv_bytes_per_token(self.spec, PRECISION))


#: The named sizes. Width and depth are chosen so each layer's weights are tens
#: of MiB: a decode step then spends its time streaming weights, not in the ~40
#: NumPy calls per layer (a few microseconds each) that a model of many thin
#: layers would pay more often. Measured on a 2-core EPYC (32 MiB L3, ~50 GB/s,
#: ~250 GFLOP/s): "tiny" (0.5 MiB of weights) runs any cell in well under a
#: second and is for tests; "small" (236 MiB, 7x that cache, so decode reads from
#: DRAM) builds in about 1 s, decodes a batch-1 step in about 5 ms and makes a
#: TTFT sweep over 64-512 prompt tokens with 5 repeats a 4 s cell; "medium"
#: (1.25 GiB) makes that cell 15 s; "large" (4.6 GiB, the shape of Llama 3.2 1B
#: in float32) 55 s, with a 110 ms decode step.
SIZES: dict[str, EngineConfig] = {
    "tiny": EngineConfig(
        layers=2, model_width=64, heads=4, kv_heads=2, mlp_width=176, vocab_size=512,
        name="tiny",
    ),
    "small": EngineConfig(
        layers=4, model_width=1024, heads=16, kv_heads=4, mlp_width=2816, vocab_size=16384,
        name="small",
    ),
    "medium": EngineConfig(
        layers=6, model_width=2048, heads=16, kv_heads=4, mlp_width=5632, vocab_size=32000,
        name="medium",
    ),
    "large": EngineConfig(
        layers=16, model_width=2048, heads=32, kv_heads=8, mlp_width=8192, vocab_size=128256,
        name="large",
    ),
}

def available_memory_bytes() -> tuple[int, str]:
    """Memory the OS can give this process without swapping, and where the number came from.

    Linux: ``MemAvailable`` from ``/proc/meminfo`` (the kernel's own estimate,
    which counts reclaimable page cache). Elsewhere, or if that line is missing:
    free physical pages from ``os.sysconf``; failing that, half the physical
    memory, an assumption stated in the returned source.
    """
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024, "MemAvailable in /proc/meminfo"
    page_bytes = os.sysconf("SC_PAGE_SIZE")
    if "SC_AVPHYS_PAGES" in os.sysconf_names:
        return os.sysconf("SC_AVPHYS_PAGES") * page_bytes, "free pages from os.sysconf"
    return (
        os.sysconf("SC_PHYS_PAGES") * page_bytes // 2,
        "assumed half of physical memory (no free-memory figure on this OS)",
    )


@dataclass(frozen=True)
class Estimate:
    """What a size will cost, worked out from its shape before anything is allocated.

    ``memory_bytes`` adds up the weights, a KV cache of ``batch`` x
    ``context_tokens`` and the largest prefill activations (attention scores
    dominate). The times are floors: weight and KV bytes over
    ``bandwidth_bytes_per_s`` for one decode step, and :func:`prefill_flop` over
    ``flop_per_s`` for a batch-1 prefill of ``context_tokens``; they are ``nan``
    when no rate was given. ``init_s`` assumes weights are drawn and scaled at
    6e7 parameters a second, the rate measured building "small" (0.85 s) and
    "large" (20 s) on a 2-core EPYC with NumPy 2.4.
    """

    config: EngineConfig
    batch: int
    context_tokens: int
    params: int
    weight_bytes: int
    kv_bytes_per_token: int
    memory_bytes: int
    init_s: float
    bandwidth_bytes_per_s: float
    decode_step_s: float
    flop_per_s: float
    prefill_s: float

    def describe(self) -> str:
        """A few short lines for a chapter to show before it builds the model (one
        line each, so that a page's output box never has to clip or scroll them)."""
        gib = 2**30
        lines = [
            f"{self.config.name}: {self.params / 1e6:.1f} M parameters, "
            f"{self.weight_bytes / gib:.2f} GiB of float32 weights",
            f"{self.memory_bytes / gib:.2f} GiB in all at batch {self.batch} x "
            f"{self.context_tokens} tokens; about {self.init_s:.1f} s to build",
        ]
        if math.isfinite(self.decode_step_s):
            lines.append(f"decode step >= {self.decode_step_s * 1e3:.1f} ms at "
                         f"{self.bandwidth_bytes_per_s / 1e9:.0f} GB/s")
        if math.isfinite(self.prefill_s):
            lines.append(f"prefill of {self.context_tokens} tokens >= {self.prefill_s:.2f} s at "
                         f"{self.flop_per_s / 1e9:.0f} GFLOP/s")
        return "\n".join(lines)


# Only for the "time to build" line of an estimate; see Estimate.
_BUILD_PARAMS_PER_S = 6e7


def prefill_flop(config: EngineConfig, prompt_tokens: int, batch: int = 1) -> float:
    """FLOPs of the weight matrix multiplies in a prefill of ``batch`` prompts: the compute
    floor of TTFT.

    Counted by the roofline's own :func:`~inferlab.model.roofline.request_flop` for this
    shape (:attr:`EngineConfig.spec`), so the lab checks its measurements against the
    formula every model's prediction uses: two FLOPs per weight per token through the
    layers, and the output head once per prompt, at its last position. Attention scores
    (about ``4 x tokens^2 x width`` per layer) are left out, so this is a lower bound on
    the work. Used by "prefill and decode".
    """
    batch = checks.whole("batch", batch)
    prompt_tokens = checks.whole("prompt_tokens", prompt_tokens)
    return batch * request_flop(config.spec, prompt_tokens, 1)


def decode_bytes(config: EngineConfig, batch: int, context_tokens: int) -> int:
    """Bytes one decode step must read: all weights once, plus every sequence's KV cache.

    ``weight_bytes + batch x context_tokens x kv_bytes_per_token``: the weights
    are shared by the batch, the cache is not. The numerator of the bandwidth
    floor (chapter "bandwidth floor"), counted by the roofline's own
    :func:`~inferlab.model.roofline.decode_pass`, so the lab checks its measurements
    against the formula every model's floor uses.
    """
    batch = checks.whole("batch", batch)
    context_tokens = checks.whole("context_tokens", context_tokens, minimum=0)
    step = decode_pass(config.params, PRECISION, kv_bytes_per_token=config.kv_bytes_per_token,
                       context_tokens=context_tokens, batch=batch)
    return int(step.bytes_moved)


def estimate(
    config: EngineConfig,
    bandwidth_bytes_per_s: float | None = None,
    flop_per_s: float | None = None,
    batch: int = 1,
    context_tokens: int = 512,
) -> Estimate:
    """Memory and time floors of ``config``, from its shape alone (nothing is allocated).

    Pass the bandwidth and FLOP/s measured by :mod:`inferlab.lab.machine` for the
    time floors ``decode_bytes / bandwidth`` and ``prefill_flop / flop_per_s``;
    without them only memory and build time are estimated. Used before
    building a model in "prefill and decode" and "batching".
    """
    batch = checks.whole("batch", batch)
    context_tokens = checks.whole("context_tokens", context_tokens)
    bandwidth = (math.nan if bandwidth_bytes_per_s is None
                 else checks.positive("bandwidth_bytes_per_s", bandwidth_bytes_per_s))
    flops = math.nan if flop_per_s is None else checks.positive("flop_per_s", flop_per_s)
    kv_cache = batch * context_tokens * config.kv_bytes_per_token
    # The peak of a prefill of the whole context: the attention scores and
    # their softmax (batch x heads x tokens^2 each), next to the residual
    # stream, its normalised copy, the QKV output and the MLP's gate/up and
    # SwiGLU temporaries (about 4 x mlp_width per token).
    tokens = batch * context_tokens
    activations = BYTES_PER_NUMBER * (
        2 * batch * config.heads * context_tokens**2
        + tokens * (4 * config.model_width + 4 * config.mlp_width)
    )
    return Estimate(
        config=config,
        batch=batch,
        context_tokens=context_tokens,
        params=config.params,
        weight_bytes=config.weight_bytes,
        kv_bytes_per_token=config.kv_bytes_per_token,
        memory_bytes=config.weight_bytes + kv_cache + activations,
        init_s=config.params / _BUILD_PARAMS_PER_S,
        bandwidth_bytes_per_s=bandwidth,
        decode_step_s=decode_bytes(config, batch, context_tokens) / bandwidth,
        flop_per_s=flops,
        prefill_s=prefill_flop(config, context_tokens) / flops,
    )


def check_fits(needs: Estimate, available: tuple[int, str] | None = None) -> None:
    """Refuse a size whose estimated memory exceeds 80% of the available memory.

    ``available`` is ``(bytes, source)`` as :func:`available_memory_bytes`
    returns it (the default). The ``ValueError`` names the size, the estimate,
    the limit and where the free-memory figure came from, so the reader can
    pick a smaller size or free memory. Called by :class:`~inferlab.lab.engine.Engine` before it
    allocates anything.
    """
    available_bytes, source = available if available is not None else available_memory_bytes()
    limit = int(FREE_MEMORY_FRACTION * available_bytes)
    if needs.memory_bytes > limit:
        gib = 2**30
        raise ValueError(
            f"config: size {needs.config.name!r} needs an estimated "
            f"{needs.memory_bytes / gib:.2f} GiB ({needs.memory_bytes} bytes) at batch "
            f"{needs.batch} x {needs.context_tokens} tokens, over the limit of "
            f"{limit / gib:.2f} GiB ({limit} bytes = {FREE_MEMORY_FRACTION:.0%} of "
            f"{available_bytes / gib:.2f} GiB available, {source}); "
            "choose a smaller size or free memory"
        )
