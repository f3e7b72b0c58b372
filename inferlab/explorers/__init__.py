"""The book's explorers: sliders and menus over the model modules' pure functions.

One :class:`~inferlab.explorers.base.Explorer` per explorer, declared in the module of
its chapter (``inferlab.explorers.bandwidth`` for 'The memory-bandwidth floor', ...):
its controls, the function it calls, the tables it makes of the result and one
Vega-Lite chart (Altair) over them. A chapter displays it in a cell; in a notebook that
gives a live view that recomputes (``inferlab.explorers.live``), on the site a
static explorer over values precomputed when the book was built
(``inferlab.explorers.site``). Model modules never import this package, so
importing one loads no widget or chart library.
"""

from inferlab.explorers.base import (
    KINDS,
    REGISTRY,
    SITE_ENV,
    Choice,
    Explorer,
    Slider,
    Text,
    fixed_on_site,
    log_range,
    register,
    registered_explorers,
)

__all__ = ["KINDS", "REGISTRY", "SITE_ENV", "Choice", "Explorer", "Slider", "Text",
           "fixed_on_site", "log_range", "register", "registered_explorers"]
