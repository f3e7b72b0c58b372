"""What a fixed-shape accelerator costs beyond its chips: recompiling, and padding.

A compiled-graph accelerator (Inferentia, a TPU, an LPU, a wafer) runs only the shapes
it was compiled for: a set of prompt buckets and batch sizes (a
:class:`~inferlab.serving.scheduler.FixedShape`). Two costs follow. Every change of model,
precision or shape recompiles each shape (:func:`recompile_cost`), at an assumed
:data:`COMPILE_S_PER_SHAPE` per shape; and every prompt is padded up to its bucket, so
the chip computes tokens nobody sent (:func:`padding_waste`). Finer buckets waste less
padding and cost more compiling (:func:`power_of_two_buckets`).

:mod:`inferlab.choosing` weighs these in its decision guide. Used in chapter 'Choosing
hardware' and its page 'Under the hood: fixed shapes'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from inferlab.benchmark.traffic import Lengths
from inferlab.common import checks
from inferlab.serving.scheduler import FixedShape

#: Minutes to compile one shape (one prompt bucket or one batch size) of a large model.
#: An ASSUMPTION for the book's sweeps, not a measurement: replace it with your own
#: compiler logs. The conclusions are stated as a function of it.
COMPILE_S_PER_SHAPE = 5 * 60.0

#: The most buckets :func:`power_of_two_buckets` gives: at :data:`COMPILE_S_PER_SHAPE`
#: each, 4,096 shapes take two weeks to compile, more than any deployment would.
MAX_BUCKETS = 4096

#: A month for compile budgets, 30 days.
MONTH_S = 30 * 86400.0


@dataclass(frozen=True)
class RecompileCost:
    """The compile time a change rate costs a fixed-shape deployment, per month."""

    changes_per_month: float
    shapes: int
    compile_s_per_change: float

    @property
    def compile_s_per_month(self) -> float:
        """Seconds of compiling per month — changes x shapes x seconds per shape."""
        return self.changes_per_month * self.compile_s_per_change

    @property
    def fraction_of_month(self) -> float:
        """Compile time as a share of a 30-day month."""
        return self.compile_s_per_month / MONTH_S


def compiled_shapes(shapes: FixedShape) -> int:
    """Graphs a fixed-shape server compiles: one per prompt bucket plus one per batch size.

    Assumption: prefill is compiled per prompt bucket and decode per batch size, as
    AWS Neuron's bucketing does; a compiler that compiles every (prompt, batch) pair
    would need the product instead.

    Used in chapter 'Choosing hardware'.
    """
    return len(shapes.prompt_buckets) + len(shapes.batch_buckets)


def recompile_cost(changes_per_month: float, shapes: FixedShape | None = None,
                   compile_s_per_shape: float = COMPILE_S_PER_SHAPE) -> RecompileCost:
    """Compile time per month for ``changes_per_month`` changes of model, precision or shapes.

    Formula: ``changes x compiled_shapes(shapes) x compile_s_per_shape``. Every change
    of model, of number format or of the shape set invalidates every compiled graph.
    ``compile_s_per_shape`` defaults to :data:`COMPILE_S_PER_SHAPE`, an assumption. A
    GPU serving stack has no such step (its cost is 0).

    Used in chapter 'Choosing hardware'.
    """
    changes = checks.non_negative("changes_per_month", changes_per_month)
    per_shape = checks.non_negative("compile_s_per_shape", compile_s_per_shape)
    shapes = shapes or FixedShape()
    count = compiled_shapes(shapes)
    return RecompileCost(changes, count, count * per_shape)


@dataclass(frozen=True)
class PaddingWaste:
    """Prompt tokens asked for against prompt tokens computed after padding to buckets."""

    buckets: tuple[int, ...]
    requested_tokens: int
    computed_tokens: int

    @property
    def fraction(self) -> float:
        """Share of the computed prefill tokens that are padding."""
        return 1.0 - self.requested_tokens / self.computed_tokens


def padding_waste(prompt: Lengths | np.ndarray, buckets=(128, 256, 512, 1024, 2048), *,
                  n: int = 20_000, seed: int = 0) -> PaddingWaste:
    """Padding waste of a prompt-length distribution on compiled prompt ``buckets``.

    ``prompt`` is a :class:`inferlab.benchmark.traffic.Lengths` (``n`` lengths are drawn with
    ``seed``) or an array of lengths. Each prompt is padded up to the next bucket
    (:meth:`inferlab.serving.scheduler.FixedShape.pad_prompt`); the waste is
    ``1 - sum(lengths) / sum(padded)``. A prompt above the largest bucket raises
    ``ValueError``. Decode-batch padding is not counted here; the simulator counts it.

    Used in chapter 'Choosing hardware'.
    """
    shapes = FixedShape(prompt_buckets=tuple(checks.wholes("buckets", buckets, increasing=True)))
    if isinstance(prompt, Lengths):
        count = checks.whole("n", n, maximum=checks.MAX_ITEMS)
        lengths = prompt.sample(count, np.random.default_rng(checks.seed("seed", seed)))
    else:
        lengths = checks.wholes("prompt", prompt)
        if lengths.ndim != 1:
            raise ValueError("prompt: give a 1-D array of lengths >= 1")
    top = shapes.prompt_buckets[-1]
    if lengths.max() > top:
        raise ValueError(f"prompt: a length of {int(lengths.max())} exceeds the largest bucket "
                         f"({top}); add a bucket or cap the lengths")
    index = np.searchsorted(np.asarray(shapes.prompt_buckets), lengths, side="left")
    padded = np.asarray(shapes.prompt_buckets)[index]
    return PaddingWaste(shapes.prompt_buckets, int(lengths.sum()), int(padded.sum()))


def power_of_two_buckets(smallest: int, largest: int, per_octave: int = 1) -> tuple[int, ...]:
    """Buckets from ``smallest`` to ``largest``, ``per_octave`` of them per doubling.

    ``per_octave=1`` gives 128, 256, 512, ...; ``per_octave=2`` adds the geometric
    midpoints. More buckets waste less padding and cost more compiles.

    At most :data:`MAX_BUCKETS` buckets.

    Used in chapter 'Choosing hardware'.
    """
    smallest = checks.whole("smallest", smallest)
    largest = checks.whole("largest", largest)
    per_octave = checks.whole("per_octave", per_octave)
    if largest < smallest:
        raise ValueError(f"largest: {largest} is below smallest ({smallest})")
    octaves = math.log2(largest / smallest)
    steps = max(1, math.ceil(octaves * per_octave))
    if steps > MAX_BUCKETS:
        raise ValueError(f"per_octave: {per_octave:,} per octave from {smallest:,} to "
                         f"{largest:,} is {steps:,} buckets; at most {MAX_BUCKETS:,} allowed")
    values = np.unique(np.rint(smallest * 2 ** (np.arange(steps + 1) / per_octave)).astype(int))
    values = values[values < largest]
    return tuple(int(v) for v in values) + (int(largest),)
