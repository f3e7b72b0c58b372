"""The book's explorers: sliders and menus over the model modules' pure functions.

One :class:`~inferlab.pages.explorers.base.Explorer` per explorer, declared in the module of
its chapter (``inferlab.pages.explorers.bandwidth`` for 'The memory-bandwidth floor', ...):
its controls, the function it calls, the tables it makes of the result and one
Vega-Lite chart (Altair) over them. A chapter displays it in a cell; in a notebook that
gives a live view that recomputes (``inferlab.pages.explorers.live``), on the site a
static explorer over values precomputed when the book was built
(``inferlab.pages.explorers.site``). Model modules never import this package, so
importing one loads no widget or chart library.
"""

import os

from inferlab.pages.explorers import base as _base
from inferlab.pages.explorers.base import (
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
)

__all__ = ["KINDS", "REGISTRY", "SITE_ENV", "Choice", "Explorer", "Slider", "Text",
           "fixed_on_site", "log_range", "register", "registered_explorers"]


def _render(explorer: Explorer, include=None, exclude=None) -> dict:
    """An explorer's mime bundle: the static view on the site, the live widget in a
    notebook. The views are imported here, when first shown, so that importing a model
    module or this package loads no widget library."""
    if os.environ.get(SITE_ENV):
        from inferlab.pages.explorers.site import static_html

        return {"text/html": static_html(explorer), "text/plain": f"<explorer {explorer.name}>"}
    from inferlab.pages.explorers.live import LiveView

    return LiveView(explorer)._repr_mimebundle_(include=include, exclude=exclude)


def registered_explorers() -> dict[str, Explorer]:
    """Every explorer of the book, by name: imports each module of this package (which
    registers its explorers) and returns :data:`~inferlab.pages.explorers.base.REGISTRY`."""
    import importlib
    import pkgutil

    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")
    return REGISTRY


_base.RENDER = _render
