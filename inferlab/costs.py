"""What a token costs: a chip-hour's price, the dollars per million tokens it buys at a
rate, the price at which two offers break even, and the energy a token takes.

Prices are rows of ``data/prices.csv`` (:class:`ChipPrice`, :func:`chip_price`), each
with its date and source; the arithmetic is the same for every family of chips. Used in
chapter 'Choosing hardware' and by :func:`inferlab.plan.plan`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from inferlab.common import checks
from inferlab.common.data import load_table


@dataclass(frozen=True)
class ChipPrice:
    """One row of a price file (``data/prices.csv``) per chip: dollars per chip-hour,
    when, from whom. :meth:`unpriced` stands for a chip with no row.

    Used in chapter 'Choosing hardware' and by :func:`inferlab.plan.plan`.
    """

    id: str
    chip: str
    usd_per_chip_hour: float
    offer: str
    price_kind: str
    date: str
    provider: str
    source: str

    @classmethod
    def from_row(cls, row) -> ChipPrice:
        """The price of one chip-hour in a row of a price file, whose ``usd_per_hour`` is
        for ``chips`` chips (an 8-GPU instance, a v5e-8 slice)."""
        return cls(row["id"], row["chip"], float(row["usd_per_hour"]) / int(row["chips"]),
                   row["offer"], row["price_kind"], str(row["date"]), row["provider"],
                   row["source"])

    @classmethod
    def unpriced(cls, chip: str) -> ChipPrice:
        """A chip no row prices: ``usd_per_chip_hour`` is ``nan``."""
        return cls("", chip, math.nan, "", "", "", "", "")

    @property
    def label(self) -> str:
        """The row in one line, with its id, the chip-hour, the offer and the date."""
        if not self.id:
            return "no price"
        return f"{self.id} (${self.usd_per_chip_hour:.2f}/chip-h, {self.offer}, {self.date})"


def chip_price(price_id: str = "packetai-b200-on-demand") -> ChipPrice:
    """The price of one chip-hour in row ``price_id`` of ``data/prices.csv``.

    The row's ``usd_per_hour`` is for ``chips`` chips (an 8-GPU instance, a v5e-8
    slice), so the chip-hour is that over ``chips``. Every row is a list price:
    on-demand or capacity-block rates as published, before any negotiated discount.

    Used in chapter 'Choosing hardware'.
    """
    checks.text("price_id", price_id)
    table = load_table("prices")
    rows = table[table["id"] == price_id]
    if rows.empty:
        raise ValueError(f"price_id: {price_id!r} is not in data/prices.csv; known: "
                         f"{', '.join(table['id'])}")
    return ChipPrice.from_row(rows.iloc[0])


def cost_per_million_tokens(chips: int = 8, usd_per_chip_hour: float = 3.75,
                            tokens_per_s: float = 10_000.0) -> float:
    """Dollars per million output tokens: ``chips x $/chip-hour / (tokens/s x 3600 / 1e6)``.

    ``tokens_per_s`` is what the ``chips`` serve together at the latency promise
    (:func:`inferlab.plan.plan`'s ``tokens_per_s_per_chip`` times its chips), not at the
    largest batch; the price is an input (a list
    price from :func:`chip_price`, or your own quote). Idle time is not counted: at
    less than full load the cost per token rises by the inverse of the load.

    Used in chapter 'Choosing hardware'.
    """
    count = checks.whole("chips", chips)
    price = checks.non_negative("usd_per_chip_hour", usd_per_chip_hour, high=1e6)
    rate = checks.rate("tokens_per_s", tokens_per_s, high=1e12)
    return checks.finite_result(count * price / (rate * 3600.0 / 1e6),
                                "chips", "usd_per_chip_hour", "tokens_per_s")


def break_even_usd_per_chip_hour(usd_per_mtok: float = 0.5,
                                 tokens_per_s_per_chip: float = 1000.0) -> float:
    """The chip-hour price at which a chip serving ``tokens_per_s_per_chip`` costs
    ``usd_per_mtok``: the cost formula solved for the price, ``$/Mtok x tok/s x 3600 / 1e6``.

    For machines whose chip-hour is not sold (Groq, Cerebras sell tokens): what a chip-hour
    would have to cost to match another system's $/Mtok. Used in chapter 'Choosing hardware'.
    """
    usd = checks.non_negative("usd_per_mtok", usd_per_mtok, high=1e6)
    rate = checks.positive("tokens_per_s_per_chip", tokens_per_s_per_chip, high=1e12)
    return usd * rate * 3600.0 / 1e6


def energy_per_token_j(board_power_w: float = 1000.0, tokens_per_s_per_chip: float = 1000.0
                       ) -> float:
    """Joules per output token of a chip at its power limit: ``W / (tokens/s)``.

    An upper bound on the chip's own energy (it draws its limit only when busy) that
    leaves out the host, the network and cooling. Used in chapter 'Choosing hardware'.
    """
    power = checks.positive("board_power_w", board_power_w, high=1e6)
    rate = checks.positive("tokens_per_s_per_chip", tokens_per_s_per_chip, high=1e12)
    return checks.finite_result(power / rate, "board_power_w", "tokens_per_s_per_chip")
