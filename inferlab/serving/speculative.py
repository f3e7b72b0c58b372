"""Speculative decoding: more than one token per step of the large model.

A small draft model proposes ``k`` tokens one at a time; the large (target) model
then checks all ``k`` in one forward pass, keeps the longest prefix it agrees
with, and adds one token of its own. If each draft token is accepted with
probability ``a``, independently, the expected number of tokens one target pass
yields is

    E = 1 + a + a^2 + ... + a^k = (1 - a^(k+1)) / (1 - a)     (k + 1 when a = 1).

One cycle costs ``k`` draft steps plus one target pass. With the draft step
costing ``c`` target steps, and the target's check of ``k + 1`` positions
costing about one ordinary decode step, the speed-up over plain decoding is

    speedup = E / (1 + k c).

The one-step verification holds on chips with high-bandwidth memory (HBM), whose
ridge point is hundreds of FLOPs per byte: a batch-1 pass is memory-bound and reads
the same weights whether it scores one position or five. On machines that keep the
weights in on-chip SRAM (Groq, Cerebras) the ridge is a few FLOPs per byte, so
checking ``k + 1`` positions is compute-bound and costs several decode steps. There
the speed-ups below are upper bounds, and an acceptance rate derived from a claimed
speed-up (:func:`acceptance_rate_for_speedup`, :func:`least_acceptance_for_speedup`)
is a lower bound on the acceptance the claim needs.

Source: Leviathan, Kalman and Matias, "Fast Inference from Transformers via
Speculative Decoding" (ICML 2023), equations for the expected number of tokens
and the improvement factor; Chen et al. (2023) for speculative sampling. The
output distribution is the target model's own, so quality does not change;
only speed does. The independence of acceptances is the paper's simplifying
assumption; real acceptance depends on the text.

Used in chapter 'Choosing hardware'.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from inferlab.common import checks
from inferlab.common.bisection import bisect

#: The longest draft the functions below take, ten times the longest published drafts
#: (2 to 10 tokens); it bounds the search over draft lengths to a fraction of a second.
MAX_DRAFT_TOKENS = 100


def _draft_tokens(name: str, value) -> int:
    return checks.whole(name, value, minimum=0, maximum=MAX_DRAFT_TOKENS)


def expected_tokens_per_step(acceptance_rate, draft_tokens: int):
    """Expected tokens per target forward pass: (1 - a^(k+1)) / (1 - a); k + 1 at a = 1.

    ``acceptance_rate`` ``a`` is in [0, 1] and may be a numpy array (the result
    then has its shape); ``draft_tokens`` ``k`` is a whole number >= 0 (k = 0 is
    plain decoding, one token per pass). Source: Leviathan et al. (ICML 2023).

    Used in chapter 'Choosing hardware'.
    """
    k = _draft_tokens("draft_tokens", draft_tokens)
    a = checks.reals("acceptance_rate", acceptance_rate, low=0.0, high=1.0)
    # The closed form costs the same for any k; at a = 1 the sum is k + 1 exactly.
    below_one = a < 1
    gap = np.where(below_one, 1.0 - a, 1.0)
    total = np.where(below_one, (1.0 - a ** (k + 1)) / gap, k + 1.0)
    return float(total) if total.ndim == 0 else total


def speedup(acceptance_rate, draft_tokens: int, draft_cost_ratio: float):
    """Speed-up of speculative over plain decoding: E / (1 + k c).

    ``draft_cost_ratio`` ``c`` is the time of one draft step over one target step,
    in [0, 1]. Assumes the target's verification pass costs one decode step
    (memory-bound at batch 1 on HBM chips; on SRAM machines it costs more, so this is
    an upper bound there) and ignores the sampling overhead. Below 1 means the
    draft costs more than it saves. Source: Leviathan et al. (ICML 2023).

    Used in chapter 'Choosing hardware'.
    """
    k = _draft_tokens("draft_tokens", draft_tokens)
    c = checks.fraction("draft_cost_ratio", draft_cost_ratio)
    return expected_tokens_per_step(acceptance_rate, k) / (1.0 + k * c)


def speedup_curve(acceptance_rate: float, draft_tokens: np.ndarray,
                  draft_cost_ratio: float) -> np.ndarray:
    """:func:`speedup` at one acceptance rate for each draft length in ``draft_tokens``.

    The closed form over an array of k, for the explorer's curve and the best k.
    Used in chapter 'Choosing hardware'.
    """
    a = checks.fraction("acceptance_rate", acceptance_rate)
    ks = checks.wholes("draft_tokens", draft_tokens, minimum=0, maximum=MAX_DRAFT_TOKENS)
    c = checks.fraction("draft_cost_ratio", draft_cost_ratio)
    expected = (1.0 - a ** (ks + 1)) / (1.0 - a) if a < 1 else ks + 1.0
    return expected / (1.0 + ks * c)


@dataclass(frozen=True)
class SpeculativeEstimate:
    """One setting of speculative decoding and what it yields."""

    acceptance_rate: float
    draft_tokens: int
    draft_cost_ratio: float
    base_decode_tok_per_s: float
    expected_tokens_per_step: float
    cycle_cost_target_steps: float
    speedup: float

    @property
    def decode_tok_per_s(self) -> float:
        """The decode rate with speculation, the plain rate times the speed-up."""
        return self.base_decode_tok_per_s * self.speedup


def speculative_decoding(acceptance_rate: float, draft_tokens: int, draft_cost_ratio: float,
                         base_decode_tok_per_s: float) -> SpeculativeEstimate:
    """Expected tokens per target pass, cost of a cycle, speed-up and resulting decode rate.

    A scalar view of :func:`expected_tokens_per_step` and :func:`speedup` for one
    setting, with the plain decode rate it multiplies. Used in chapter 'Choosing hardware'.
    """
    a = checks.fraction("acceptance_rate", acceptance_rate)
    k = _draft_tokens("draft_tokens", draft_tokens)
    c = checks.fraction("draft_cost_ratio", draft_cost_ratio)
    base = checks.positive("base_decode_tok_per_s", base_decode_tok_per_s)
    expected = expected_tokens_per_step(a, k)
    return SpeculativeEstimate(a, k, c, base, expected, 1.0 + k * c, expected / (1.0 + k * c))


def acceptance_rate_for_speedup(target_speedup: float, draft_tokens: int,
                                draft_cost_ratio: float) -> float:
    """The acceptance rate at which speculative decoding reaches ``target_speedup``.

    Solves E(a, k) / (1 + k c) = target for a by bisection (E rises with a). Raises
    ``ValueError`` if the target exceeds the most this draft length can give,
    (k + 1) / (1 + k c) at a = 1; returns 0 if even a = 0 reaches it.

    Used in chapter 'Choosing hardware'.
    """
    target = checks.positive("target_speedup", target_speedup)
    k = _draft_tokens("draft_tokens", draft_tokens)
    c = checks.fraction("draft_cost_ratio", draft_cost_ratio)
    best = (k + 1) / (1.0 + k * c)
    if target > best:
        raise ValueError(
            f"target_speedup: {target_speedup!r} is out of reach; with draft_tokens={k} and "
            f"draft_cost_ratio={c:g} the most is {best:.3g} (every draft token accepted)"
        )
    if speedup(0.0, k, c) >= target:
        return 0.0
    return bisect(lambda a: speedup(a, k, c), target, 0.0, 1.0, iterations=60)


def least_acceptance_for_speedup(target_speedup: float, draft_cost_ratio: float,
                                 max_draft_tokens: int = 16) -> tuple[float, int]:
    """The lowest acceptance rate that reaches ``target_speedup`` with any k <= max_draft_tokens.

    Returns ``(acceptance_rate, draft_tokens)``: the most forgiving setting for the
    claim. When the returned ``draft_tokens`` equals ``max_draft_tokens`` the least
    acceptance sits at the edge of the search, and a longer draft may need less.
    Assumes verification costs one decode step (see the module docstring), so on
    SRAM machines the acceptance rate is a lower bound. Raises ``ValueError`` if no
    draft length up to ``max_draft_tokens`` can reach the target even with every
    draft token accepted.

    Used in chapter 'Choosing hardware'.
    """
    target = checks.positive("target_speedup", target_speedup)
    c = checks.fraction("draft_cost_ratio", draft_cost_ratio)
    top = _draft_tokens("max_draft_tokens", max_draft_tokens)
    options = []
    for k in range(top + 1):
        if target <= (k + 1) / (1.0 + k * c):
            options.append((acceptance_rate_for_speedup(target, k, c), k))
    if not options:
        raise ValueError(
            f"target_speedup: {target_speedup!r} is out of reach with draft_cost_ratio={c:g} "
            f"and at most {top} draft tokens, even if every draft token is accepted"
        )
    return min(options)


def best_draft_tokens(acceptance_rate: float, draft_cost_ratio: float,
                      max_draft_tokens: int = 16) -> int:
    """The draft length k in 0..max_draft_tokens with the largest speed-up (the smallest on ties).

    Used in chapter 'Choosing hardware'.
    """
    a = checks.fraction("acceptance_rate", acceptance_rate)
    c = checks.fraction("draft_cost_ratio", draft_cost_ratio)
    top = _draft_tokens("max_draft_tokens", max_draft_tokens)
    ks = np.arange(top + 1)
    return int(np.argmax(speedup_curve(a, ks, c)))
