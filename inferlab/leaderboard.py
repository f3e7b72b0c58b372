"""A public leaderboard's speeds read row by row against the bounds the book derives.

Each row of the leaderboard snapshot (``data/leaderboard.csv``) names a model, a hardware
family and a claimed decode speed. :func:`check_row` maps the model to a row of
``data/models.csv`` and the family to one of :data:`inferlab.choosing.FAMILIES`, then says
which bound the claim sits under: single-stream decoding on an HBM node, a pipeline of
SRAM chips, or only speculative decoding (``VERDICTS``). Every assumption a mapping
makes is written beside it.

Used in chapter 'Choosing hardware'.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from inferlab.choosing import family_floor
from inferlab.common import checks
from inferlab.common.data import load_table

#: How a leaderboard model name maps to a row of ``data/models.csv``, with the assumption.
#: ``None``: the table has no architecture for it, so no floor can be computed.
LEADERBOARD_MODELS: dict[str, tuple[str | None, str]] = {
    "Llama 3.3 70B": ("Llama 3.3 70B", "its own row of data/models.csv (the Llama 3.1 70B "
                      "architecture, Meta's model card; only the weights differ)"),
    "Llama 3.3 8B": ("Llama 3.1 8B", "ASSUMED: no Llama 3.3 8B config in data/models.csv; "
                     "taken as the Llama 3.1 8B shape"),
    "DeepSeek V3.2": ("DeepSeek-V3", "ASSUMED: V3.2 keeps DeepSeek-V3's 671B total / 37B "
                      "active parameters; its sparse attention changes only the KV reads"),
    "DeepSeek R1": ("DeepSeek-R1", "its own row of data/models.csv (post-trained from "
                    "DeepSeek-V3-Base: the same architecture)"),
}


#: How a leaderboard hardware family maps to a family of this module (``None``: unknown).
LEADERBOARD_FAMILIES: dict[str, str | None] = {
    "GPU cloud": "gpu",
    "LPU": "lpu",
    "wafer-scale (WSE-3)": "dataflow",
    "reconfigurable dataflow": "dataflow",
    "first-party API": None,
}


#: The leaderboard families whose chips hold the weights in on-chip SRAM. SambaNova's
#: SN40L ("reconfigurable dataflow") keeps them in HBM and DDR behind its on-chip SRAM
#: (Prabhakar et al., "SambaNova SN40L", arXiv:2405.07518, 2024), so plain decoding on it
#: is bounded like any HBM machine's.
WEIGHTS_IN_SRAM = frozenset({"LPU", "wafer-scale (WSE-3)"})


#: The HBM node the leaderboard is checked against — 8 x B200 at FP8 in one NVLink
#: domain, an ideal split with no communication cost. It is the common 8-GPU unit, not
#: the largest the data allow: a GB200 NVL72 rack's 72-GPU domain, or 4-bit weights,
#: raise it.
HBM_NODE_CHIP = "NVIDIA B200"


HBM_NODE_CHIPS = 8


HBM_NODE_PRECISION = "fp8"


#: The precision each SRAM family's own bounds are computed at (Cerebras serves native
#: 16-bit weights per its launch claim in data/results.csv; Groq is assumed 8-bit).
SRAM_PRECISION: dict[str, str] = {"lpu": "int8", "dataflow": "fp16"}


VERDICTS = ("unknown model",
            "single-stream on HBM",
            "beyond HBM, within the SRAM pipeline bound",
            "beyond the SRAM pipeline bound: split layers or speculation",
            "beyond every bound: speculative decoding",
            "beyond HBM with weights in HBM: speculative decoding")


@dataclass(frozen=True)
class RowCheck:
    """One leaderboard row against the bounds.

    ``hbm_ceiling_tok_s``: the single-stream ceiling of the reference HBM node
    (``HBM_NODE_CHIPS`` x :data:`HBM_NODE_CHIP` at FP8, ideal tensor parallelism);
    ``pipeline_tok_s``, ``tensor_parallel_tok_s``, ``compute_tok_s`` and
    ``chips_to_hold``: the row's own SRAM chips, where the data have a row for them
    (``nan`` otherwise; ``compute_tok_s`` is the pipeline's FLOP bound, ``nan`` where no
    peak is published); ``verdict``: one of ``VERDICTS``.
    """

    rank: int
    model: str
    provider: str
    hardware_family: str
    claimed_tok_s: float
    architecture: str | None
    hbm_ceiling_tok_s: float
    pipeline_tok_s: float
    tensor_parallel_tok_s: float
    compute_tok_s: float
    chips_to_hold: float
    verdict: str
    assumption: str

    @property
    def ratio_to_hbm(self) -> float:
        """Claimed rate over the HBM node's ceiling (above 1 — plain HBM decoding cannot do it)."""
        return self.claimed_tok_s / self.hbm_ceiling_tok_s

    @property
    def ratio_to_pipeline(self) -> float:
        """Claimed rate over the own chips' pipeline bound (``nan`` without SRAM bounds)."""
        return self.claimed_tok_s / self.pipeline_tok_s


def check_row(model: str, hardware_family: str, claimed_tok_s: float, *, rank: int = 0,
              provider: str = "") -> RowCheck:
    """Check one leaderboard row (model name, hardware family, output tok/s per user).

    Steps: map the model to an architecture (:data:`LEADERBOARD_MODELS`; unknown
    models cannot be checked); compute the HBM node's single-stream ceiling
    (:func:`~inferlab.choosing.family_floor` on 8 x B200 at FP8, active weights, no KV cache, ideal
    tensor parallelism inside the NVLink domain). A claim at or under it is plain
    decoding an HBM node could give. Above it:

    - weights in HBM (GPU clouds; SambaNova, :data:`WEIGHTS_IN_SRAM`): speculative
      decoding (or fewer bits, a larger NVLink domain, a smaller model than named);
    - weights in SRAM (Groq, Cerebras): the row's own chips are laid out as the
      feasibility layer allows, a pipeline over the fewest that hold the model at
      :data:`SRAM_PRECISION` (:func:`~inferlab.choosing.family_floor`). At or under the pipeline
      bound, plain decoding on them could explain it; between the pipeline and the ideal
      tensor-parallel bound, only a split of layers across chips (whose network the book does
      not model) or speculative decoding; above the ideal bound, only speculative decoding.

    All leaderboard rates are per user, for one request's stream.

    Used in chapter 'Choosing hardware'.
    """
    claimed = checks.positive("claimed_tok_s", claimed_tok_s)
    checks.option("hardware_family", hardware_family, LEADERBOARD_FAMILIES)
    family = LEADERBOARD_FAMILIES[hardware_family]
    architecture, note = LEADERBOARD_MODELS.get(
        model, (None, "no architecture in data/models.csv: size unknown, no floor"))
    nan = math.nan
    if architecture is None:
        return RowCheck(rank, model, provider, hardware_family, claimed, None, nan, nan, nan,
                        nan, nan, VERDICTS[0], note)
    hbm = family_floor(architecture, "gpu", HBM_NODE_PRECISION, chip=HBM_NODE_CHIP,
                       chips=HBM_NODE_CHIPS)
    pipeline = ideal = compute = chips = nan
    if hardware_family in WEIGHTS_IN_SRAM:
        own = family_floor(architecture, family, SRAM_PRECISION[family])
        pipeline, ideal, compute = own.pipeline_tok_s, own.tensor_parallel_tok_s, own.compute_tok_s
        chips = float(own.chips_to_hold)
        note += (f"; own bounds on {own.chips_used:,} x {own.chip} at {own.precision}, "
                 f"pipelined, bound by {own.binds}")
    elif hardware_family == "reconfigurable dataflow":
        note += ("; SambaNova's SN40L keeps weights in HBM and DDR and has no row in "
                 "data/hardware.csv, so the HBM node's ceiling is taken as its bound")
    if claimed <= hbm.ceiling_tok_s:
        verdict = VERDICTS[1]
    elif hardware_family not in WEIGHTS_IN_SRAM:
        verdict = VERDICTS[5]
    elif claimed <= pipeline:
        verdict = VERDICTS[2]
    elif claimed <= ideal:
        verdict = VERDICTS[3]
    else:
        verdict = VERDICTS[4]
    return RowCheck(rank, model, provider, hardware_family, claimed, architecture,
                    hbm.ceiling_tok_s, pipeline, ideal, compute, chips, verdict, note)


def check_leaderboard(data_dir=None) -> pd.DataFrame:
    """:func:`check_row` for every row of ``data/leaderboard.csv``, as a table.

    Used in chapter 'Choosing hardware'.
    """
    board = load_table("leaderboard", data_dir)
    rows = []
    for _, row in board.iterrows():
        check = check_row(row["model"], row["hardware_family"], float(row["output_tokens_per_s"]),
                          rank=int(row["rank"]), provider=row["provider"])
        rows.append({"rank": check.rank, "model": check.model, "provider": check.provider,
                     "hardware": check.hardware_family, "claimed_tok_s": check.claimed_tok_s,
                     "ttft_ms": float(row["ttft_ms"]), "architecture": check.architecture,
                     "hbm_ceiling_tok_s": check.hbm_ceiling_tok_s,
                     "pipeline_tok_s": check.pipeline_tok_s,
                     "tensor_parallel_tok_s": check.tensor_parallel_tok_s,
                     "compute_tok_s": check.compute_tok_s,
                     "chips_to_hold": check.chips_to_hold, "verdict": check.verdict,
                     "assumption": check.assumption})
    return pd.DataFrame(rows)

