"""The book's colours, in one place that loads no plotting library.

The matplotlib figures (:mod:`inferlab.pages.plotting`) and the explorers' Vega-Lite charts
(``inferlab.pages.explorers.marks``) take them from here, so a figure and an explorer
give the same kind of number the same colour.
"""

#: The colour of each kind of number a figure shows (timed here, computed by the book's
#: formulas, or someone's published claim).
KIND_COLORS = {
    "measured": "#1b7837",
    "modelled": "#2166ac",
    "reported": "#b2182b",
}

#: Colours for series that are not a kind (chips, tokenizers, scenarios), colour-blind safe.
PALETTE = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]
