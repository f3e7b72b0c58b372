"""Chips and models as frozen dataclasses in SI units, read from ``data/``.

The CSV tables keep the units their sources print (GB, GB/s, TFLOP/s); the
rest of the package works in bytes, bytes per second and FLOP per second.
This module is the one place where that conversion happens.

Used from the bandwidth chapter on; see the data appendix for the tables.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from inferlab.common import checks
from inferlab.common.data import load_table

GB = 1e9
TERA = 1e12


@dataclass(frozen=True)
class Chip:
    """One accelerator (or system) in SI units.

    ``chips`` is how many physical chips the row describes (12 for an
    inf2.48xlarge, 72 for a GB200 NVL72 rack); capacity and bandwidth are for
    the whole row. Peak rates are ``nan`` where no source gives them.

    ``link_bytes_per_s`` is the scale-up link (NVLink, Infinity Fabric, ICI,
    NeuronLink) of one chip *per direction*, what a collective can use; vendors
    usually quote the two-way sum, twice as much. ``domain_chips`` is how many chips
    share that fabric (8 on an HGX board, 72 in a GB200 NVL72 rack; 0 where no
    source gives one). ``scaleout_bytes_per_s`` is one chip's share of the network
    between domains, per direction (``nan`` where unknown). ``board_power_w`` is the
    chip's power limit (``nan`` where the table gives none); ``full_power_part`` names
    the row of the same silicon run at full power, for a card held to fewer watts (the
    H100 NVL and PCIe cards are the H100 SXM's die at 400 and 350 W), else ``""``.
    """

    name: str
    family: str
    chips: int
    memory_capacity_bytes: float
    memory_bandwidth_bytes_per_s: float
    bf16_flop_per_s: float
    fp8_flop_per_s: float
    fp4_flop_per_s: float
    int8_op_per_s: float
    link_bytes_per_s: float
    domain_chips: int
    scaleout_bytes_per_s: float
    board_power_w: float
    full_power_part: str
    source: str


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer's shape, as its published config gives it.

    A mixture of experts (``experts > 1``) routes each token to ``experts_per_token`` of
    its ``experts`` routed experts per MoE layer (each ``moe_intermediate_size`` wide),
    plus ``shared_experts`` that every token uses; ``dense_layers`` of its ``layers`` have
    an ordinary MLP of ``intermediate_size`` instead (DeepSeek-V3's first three). Multi-head
    latent attention (``attention == "mla"``) caches one ``kv_lora_rank``-wide latent and
    one ``qk_rope_head_dim``-wide rotary key per layer and token. ``sliding_layers`` of the
    layers attend only to the last ``sliding_window`` tokens (0 and 0 for none), so their
    cache stops growing there. ``tied_embeddings``: the input embedding table is also the
    output head.
    """

    name: str
    layers: int
    hidden_size: int
    attention_heads: int
    kv_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    params_total: float
    params_active: float
    experts: int
    experts_per_token: int
    context_length_tokens: int
    attention: str
    source: str
    moe_intermediate_size: int = 0
    shared_experts: int = 0
    dense_layers: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    sliding_window: int = 0
    sliding_layers: int = 0
    tied_embeddings: bool = False

    @property
    def embedding_params(self) -> float:
        """Parameters of the input embedding table, ``vocab_size x hidden_size``.

        A step reads one row of it per token, not the whole table; untied, it does no
        multiply either (a lookup), so it is left out of the FLOPs and the bytes a step
        reads whole.
        """
        return float(self.vocab_size * self.hidden_size)

    @property
    def lookup_params(self) -> float:
        """Parameters a step only looks up (one row per token) rather than multiplies by:
        the embedding table when it is not also the output head, else none."""
        return 0.0 if self.tied_embeddings else self.embedding_params

    @property
    def moe_layers(self) -> int:
        """Layers with routed experts (0 for a dense model)."""
        return 0 if self.experts <= 1 else self.layers - self.dense_layers


def _names(frame) -> str:
    return ", ".join(frame["name"])


@cache
def _hardware():
    return load_table("hardware")


@cache
def _models():
    return load_table("models")


def chip(name: str) -> Chip:
    """The row of ``data/hardware.csv`` called ``name``, converted to SI units.

    Raises ``ValueError`` naming the known chips if ``name`` is not one of them.
    """
    if not isinstance(name, str):
        raise ValueError(f"name: unknown chip {name!r}; known: {_names(_hardware())}")
    return _chip(name)


# Converted once per name: the explorers' site grids look chips up tens of thousands of
# times, and a pandas lookup costs a millisecond. Chip is frozen, so sharing one is safe.
@cache
def _chip(name: str) -> Chip:
    frame = _hardware()
    rows = frame[frame["name"] == name]
    if rows.empty:
        raise ValueError(f"name: unknown chip {name!r}; known: {_names(frame)}")
    row = rows.iloc[0]

    def scaled(column: str, factor: float) -> float:
        value = row[column]
        return math.nan if value is None or math.isnan(value) else float(value) * factor

    return Chip(
        name=row["name"],
        family=row["family"],
        chips=int(row["chips"]),
        memory_capacity_bytes=scaled("memory_capacity_gb", GB),
        memory_bandwidth_bytes_per_s=scaled("memory_bandwidth_gb_per_s", GB),
        bf16_flop_per_s=scaled("bf16_dense_tflop_per_s", TERA),
        fp8_flop_per_s=scaled("fp8_dense_tflop_per_s", TERA),
        fp4_flop_per_s=scaled("fp4_dense_tflop_per_s", TERA),
        int8_op_per_s=scaled("int8_dense_top_per_s", TERA),
        link_bytes_per_s=scaled("scaleup_gb_per_s_per_direction", GB),
        domain_chips=(0 if math.isnan(row["scaleup_domain_chips"])
                      else int(row["scaleup_domain_chips"])),
        scaleout_bytes_per_s=scaled("scaleout_gb_per_s_per_direction", GB),
        board_power_w=scaled("board_power_w", 1.0),
        full_power_part=(row["full_power_part"] if isinstance(row["full_power_part"], str)
                         else ""),
        source=row["source"],
    )


def chips() -> list[str]:
    """Names of every row in ``data/hardware.csv``, in file order."""
    return list(_hardware()["name"])


def model(name: str) -> ModelSpec:
    """The row of ``data/models.csv`` called ``name``.

    Raises ``ValueError`` naming the known models if ``name`` is not one of them.
    """
    if not isinstance(name, str):
        raise ValueError(f"name: unknown model {name!r}; known: {_names(_models())}")
    return _model(name)


@cache  # as _chip
def _model(name: str) -> ModelSpec:
    frame = _models()
    rows = frame[frame["name"] == name]
    if rows.empty:
        raise ValueError(f"name: unknown model {name!r}; known: {_names(frame)}")
    row = rows.iloc[0]
    return ModelSpec(
        name=row["name"],
        layers=int(row["layers"]),
        hidden_size=int(row["hidden_size"]),
        attention_heads=int(row["attention_heads"]),
        kv_heads=int(row["kv_heads"]),
        head_dim=int(row["head_dim"]),
        intermediate_size=int(row["intermediate_size"]),
        vocab_size=int(row["vocab_size"]),
        params_total=float(row["params_total"]),
        params_active=float(row["params_active"]),
        experts=int(row["experts"]),
        experts_per_token=int(row["experts_per_token"]),
        context_length_tokens=int(row["context_length_tokens"]),
        attention=row["attention"],
        source=row["source"],
        moe_intermediate_size=_whole_or_zero(row["moe_intermediate_size"]),
        shared_experts=int(row["shared_experts"]),
        dense_layers=int(row["dense_layers"]),
        kv_lora_rank=_whole_or_zero(row["kv_lora_rank"]),
        qk_rope_head_dim=_whole_or_zero(row["qk_rope_head_dim"]),
        sliding_window=_whole_or_zero(row["sliding_window"]),
        sliding_layers=_whole_or_zero(row["sliding_layers"]),
        tied_embeddings=row["tied_embeddings"] == "yes",
    )


def _whole_or_zero(value) -> int:
    """A whole-number cell, 0 where the table leaves it empty (the feature is absent)."""
    return 0 if value is None or (isinstance(value, float) and math.isnan(value)) else int(value)


def as_model(model, name: str = "model") -> ModelSpec:
    """``model`` if it is a :class:`ModelSpec`, else the row of ``data/models.csv`` it names.

    Every function that takes a model takes its name too. Raises ``ValueError`` naming
    ``name`` and the known models for an unknown name, ``TypeError`` for anything else.
    """
    return _spec(model, name, ModelSpec)


def as_chip(chip, name: str = "chip") -> Chip:
    """``chip`` if it is a :class:`Chip`, else the row of ``data/hardware.csv`` it names.

    Every function that takes a chip takes its name too; errors as :func:`as_model`.
    """
    return _spec(chip, name, Chip)


def _spec(value, name: str, kind: type):
    if isinstance(value, kind):
        return value
    checks.instance(name, value, (str, kind))
    try:
        return _BY_NAME[kind](value)
    except ValueError as error:
        raise ValueError(f"{name}: {str(error).removeprefix('name: ')}") from None


def models() -> list[str]:
    """Names of every row in ``data/models.csv``, in file order."""
    return list(_models()["name"])


# Vendor prefixes and row qualifiers a label can drop: the row's name stays the key.
_SHORTER = (("NVIDIA ", ""), ("AWS ", ""), ("Google ", ""), (" (per chip)", ""),
            (" (per GPU)", ""), (" (per card)", ""), (" (GroqChip)", ""),
            (" dual channel", " dual"))


def short_name(name: str) -> str:
    """A row's name as a figure labels it: ``"NVIDIA H100 SXM"`` -> ``"H100 SXM"``,
    ``"AWS Inferentia2 (per chip)"`` -> ``"Inferentia2"``, ``"Groq LPU (GroqChip)"`` ->
    ``"Groq LPU"``. Used in chapter 'The memory-bandwidth floor'."""
    name = checks.text("name", name)
    for long, short in _SHORTER:
        name = name.replace(long, short)
    return name


# The lookups by name, for _spec: as_chip's argument is called chip, like the function.
_BY_NAME = {ModelSpec: model, Chip: chip}
