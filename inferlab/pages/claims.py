"""A claim card: what a speed claim states, what it leaves out, and what each gap could change.

A tokens-per-second figure is a measurement of one configuration. Nine facts
decide which configuration (the book's checklist): the phase the clock times,
the output length, the concurrency or latency bound, whose tokenizer counted the
tokens, how many chips, the precision, whether speculative decoding was on, the
prompt and context length, and whether anyone audited the run. A
:class:`Claim` holds the facts a claim states (``None`` where it is silent);
:func:`card` lists the missing ones with what each could change, and
:func:`claim_from_result` reads the facts a row of ``data/results.csv`` states.

Used in chapter 'Benchmark scenarios'.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from types import MappingProxyType

import pandas as pd

from inferlab.common.data import result

#: The nine facts of the checklist, in the order a card lists them.
FACTS = ("phase", "output_tokens", "concurrency", "tokenizer", "chip_count", "precision",
         "speculative_decoding", "context_tokens", "audited")

#: What each fact, left out, could change, and a pair of rows of ``data/results.csv``
#: (or ``None``) whose ratio shows the size of the effect on real claims.
OMISSION_EFFECTS = MappingProxyType({
    "phase": ("Whether the time to first token is inside the clock. A rate that starts after "
              "the first token is higher, most of all for short answers.",
              ("groq-claim-l2-70b", "llmperf-groq-l2-70b-throughput")),
    "output_tokens": ("How thinly the first-token wait is spread. The same server reports a "
                      "higher per-token rate for long answers than for short ones.", None),
    "concurrency": ("Per-user speed against aggregate throughput. One user streams fast on an "
                    "idle chip; a thousand share it; a looser latency bound admits more of them.",
                    ("mlperf-v5.1-nebius-8xb200-server", "mlperf-v5.1-nebius-8xb200-interactive")),
    "tokenizer": ("How many tokens the same text is. Rates in different tokenizers differ by "
                  "the ratio of their token counts.", None),
    "chip_count": ("Whether the figure is per chip or per system. A rack of 72 GPUs and a "
                   "server of 8 differ by the chip count before anything else.",
                   ("azure-gb200-nvl72-l2-70b-v4.1", "mlperf-v5.0-nvidia-8xb200-offline")),
    "precision": ("Bytes read per weight. FP8 halves the weight traffic of FP16 and 4-bit "
                  "halves it again, at a possible cost in quality.", None),
    "speculative_decoding": ("Tokens per forward pass. Accepted draft tokens multiply the "
                             "per-user rate on the same chips.",
                             ("aa-groq-l31-70b-specdec", "aa-groq-l31-70b-before-specdec")),
    "context_tokens": ("KV cache read per step and prefill work. Long prompts slow every "
                       "decode step and delay the first token.", None),
    "audited": ("Whether anyone but the claimant checked the run under published rules. An "
                "unaudited figure may be right, but nothing says it was measured as stated.",
                None),
})

AUDIT_STATES = ("yes", "no", "unverified")


@dataclass(frozen=True)
class Claim:
    """A speed claim and the facts it states; ``None`` means the claim does not say.

    ``value`` in ``unit``; ``phase`` (e.g. ``"after first token"``,
    ``"including TTFT"``, ``"whole run, aggregate"``); ``output_tokens`` and
    ``context_tokens`` as numbers or descriptions; ``concurrency`` (a number of
    users, or a description such as ``"Server bound"``); ``tokenizer``;
    ``chip_count``; ``precision``; ``speculative_decoding`` (``True``/``False``);
    ``audited`` (``"yes"``, ``"no"`` or ``"unverified"``).

    Raises ``ValueError`` for a non-positive value, chip count below 1 or an
    unknown audit state.

    Used in chapter 'Benchmark scenarios'.
    """

    label: str
    value: float
    unit: str
    phase: str | None = None
    output_tokens: int | str | None = None
    concurrency: int | str | None = None
    tokenizer: str | None = None
    chip_count: int | None = None
    precision: str | None = None
    speculative_decoding: bool | None = None
    context_tokens: int | str | None = None
    audited: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.value, (int, float)) or not math.isfinite(self.value) \
                or self.value <= 0:
            raise ValueError(f"value: {self.value!r} is not allowed; give a positive number")
        if self.chip_count is not None and (not isinstance(self.chip_count, int)
                                            or self.chip_count < 1):
            raise ValueError(f"chip_count: {self.chip_count!r} is not allowed; give None or a "
                             "whole number >= 1")
        if self.audited is not None and self.audited not in AUDIT_STATES:
            raise ValueError(f"audited: {self.audited!r} is not one of {', '.join(AUDIT_STATES)}")

    def stated(self) -> dict[str, object]:
        """The facts this claim states, in :data:`FACTS` order."""
        return {name: getattr(self, name) for name in FACTS if getattr(self, name) is not None}


@dataclass(frozen=True)
class ClaimCard:
    """A claim with what it states, what it does not, and what each gap could change.

    ``per_chip`` is the value divided by the chip count when that is stated and
    the unit is a rate, else ``None``. Used in chapter 'Benchmark scenarios'.
    """

    claim: Claim
    stated: tuple[tuple[str, object], ...]
    missing: tuple[str, ...]
    effects: tuple[tuple[str, str], ...]
    per_chip: float | None

    @property
    def complete(self) -> bool:
        """True when the claim states all nine facts."""
        return not self.missing

    def table(self) -> pd.DataFrame:
        """One row per fact: what the claim says, or what its absence could change."""
        said = dict(self.stated)
        effects = dict(self.effects)
        return pd.DataFrame({
            "fact": list(FACTS),
            "stated": [_show(said[name]) if name in said else "not stated" for name in FACTS],
            "if missing, could change": [effects.get(name, "") for name in FACTS],
        })


def _show(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float) and value.is_integer():
        return f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def card(claim: Claim) -> ClaimCard:
    """The claim card of ``claim``. Raises ``ValueError`` if ``claim`` is not a :class:`Claim`.

    Used in chapter 'Benchmark scenarios'.
    """
    if not isinstance(claim, Claim):
        raise ValueError(f"claim: {claim!r} is not a Claim")
    stated = tuple(claim.stated().items())
    missing = tuple(name for name in FACTS if getattr(claim, name) is None)
    effects = tuple((name, OMISSION_EFFECTS[name][0]) for name in missing)
    per_chip = None
    if claim.chip_count is not None and claim.unit == "tokens/s":
        per_chip = claim.value / claim.chip_count
    return ClaimCard(claim, stated, missing, effects, per_chip)


def omission_evidence() -> pd.DataFrame:
    """For each fact with an example pair in :data:`OMISSION_EFFECTS`, the two rows and
    their ratio: how far two real claims that differ in that fact lie apart.

    Used in chapter 'Benchmark scenarios'.
    """
    rows = []
    for name, (_, pair) in OMISSION_EFFECTS.items():
        if pair is None:
            continue
        high, low = (result(row_id) for row_id in pair)
        rows.append({"fact": name, "higher": row_name(high), "lower": row_name(low),
                     "higher value": high["value"], "lower value": low["value"],
                     "ratio": high["value"] / low["value"]})
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------------------
# Reading a row of data/results.csv
# --------------------------------------------------------------------------------------

_MLPERF_BOUNDS_TEXT = {
    "Server": "Server: Poisson arrivals, p99 TTFT <= 2 s and TPOT <= 200 ms",
    "Interactive": "Interactive: Poisson arrivals, p99 TTFT <= 450 ms and TPOT <= 40 ms",
    "Offline": "Offline: every query at once, no latency bound",
}


def claim_from_result(row: dict | str) -> Claim:
    """Read the facts a row of ``data/results.csv`` states (a row dict or its id).

    Only what the row's columns say is taken as stated: the scenario names the
    phase, concurrency and (for MLPerf and LLMPerf) the lengths and tokenizer
    fixed by the benchmark; ``accelerator_count`` the chips; the system name or
    scenario whether speculative decoding was on; ``audited`` the review. The
    precision is not a column, so it is stated only if the note names a format.
    Rows whose unit is not a rate (ratios, percentages) are read the same way.

    Used in chapter 'Benchmark scenarios'.
    """
    row = result(row) if isinstance(row, str) else dict(row)
    scenario = str(row.get("scenario", ""))
    metric = str(row.get("metric", ""))
    system = str(row.get("system", ""))
    note = str(row.get("note", ""))
    facts: dict[str, object] = {}
    count = row.get("accelerator_count")
    if count is not None and not (isinstance(count, float) and math.isnan(count)):
        facts["chip_count"] = int(count)
    audited = row.get("audited")
    if audited in AUDIT_STATES:
        facts["audited"] = audited
    mlperf = re.match(r"MLPerf (Offline|Server|Interactive)$", scenario)
    if mlperf:
        kind = mlperf.group(1)
        facts.update(phase="whole run, aggregate output tokens",
                     concurrency=_MLPERF_BOUNDS_TEXT[kind],
                     output_tokens="MLPerf data set (mean 294, at most 1,024)",
                     context_tokens="MLPerf data set (prompts up to 1,024)",
                     tokenizer="the model's own (Llama 2)")
    llmperf = re.match(r"LLMPerf \((\d+) in / (\d+) out, concurrency (\d+)\)", scenario)
    if llmperf:
        facts.update(phase="including TTFT", context_tokens=int(llmperf.group(1)),
                     output_tokens=int(llmperf.group(2)), concurrency=int(llmperf.group(3)),
                     tokenizer="one Llama 2 tokenizer for every model")
    if "single-stream" in scenario:
        facts["concurrency"] = 1
    if "Artificial Analysis" in scenario:
        facts["tokenizer"] = "tiktoken for every model"
        facts["phase"] = "after first token"
        found = re.search(r"(\d+)K-token input", scenario)
        if found:
            facts["context_tokens"] = int(found.group(1)) * 1000
    if "after first token" in metric:
        facts["phase"] = "after first token"
    if "specdec" in system.lower() or "speculative decoding" in system.lower():
        facts["speculative_decoding"] = True
    found = re.search(r"\b(FP8|FP16|BF16|INT8|INT4|16-bit)\b", note)
    if found:
        facts["precision"] = found.group(1)
    value = float(row["value"])
    return Claim(label=row_name(row) if "date_or_round" in row else str(row.get("id", system)),
                 value=value, unit=str(row.get("unit", "")), **facts)


def row_name(row: dict | str) -> str:
    """A row of ``data/results.csv`` as a reader names it: who, which model, under what,
    when ("NVIDIA DGX B200, Llama 2 70B, MLPerf Offline, v5.0"). Its id is a name for
    code, not for a table a reader sees.

    Used in chapter 'Benchmark scenarios'.
    """
    row = result(row) if isinstance(row, str) else dict(row)
    # The system's parenthesis is detail (the engine, a release's changes), except
    # whether it decoded speculatively, which tells two rows of one endpoint apart.
    system = re.sub(r" \([^)]*\)", "", str(row["system"]))
    if re.search(r"specdec|speculative decoding", str(row["system"]), flags=re.I):
        system += " with speculative decoding"
    when = str(row["date_or_round"]).replace("MLPerf Inference ", "")
    return f"{system}, {row['model']}, {row['scenario']}, {when}"


def cards_table(ids) -> pd.DataFrame:
    """One row per result id: value, chips, per chip, how many of the nine facts it
    states and which are missing.

    Used in chapter 'Benchmark scenarios'.
    """
    rows = []
    for row_id in ids:
        one = card(claim_from_result(row_id))
        rows.append({"claim": one.claim.label, "value": one.claim.value, "unit": one.claim.unit,
                     "chips": one.claim.chip_count, "per chip": one.per_chip,
                     "audited": one.claim.audited or "not stated",
                     "facts stated": len(one.stated), "missing": ", ".join(one.missing)})
    return pd.DataFrame(rows)

