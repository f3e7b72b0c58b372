"""The book's presentation, on top of everything else: figure rules and plotting
(``figure_rules``, ``plotting``, ``charts``, ``colors``), glued numbers (``glue``),
progress bars (``progress``), marketing claims as cards (``claims``), and the explorers
(``explorers``).
"""

from inferlab import submodule


def __getattr__(name: str):
    return submodule(__name__, name)
