"""The JavaScript that draws the explorers: Vega, Vega-Lite and vega-embed in one script.

It comes from the PyPI package ``vl-convert-python``, which ships the three libraries
(BSD-3-Clause, by the University of Washington Interactive Data Lab) and bundles them
into one script that defines ``vegaEmbed``, ``vegaLite`` and ``vega`` on ``window``
and loads nothing else. The bundle is made with the Vega-Lite version that the installed
Altair writes its specs for, and refused unless its sha256 is :data:`BUNDLE_SHA256`, the
one recorded for the pinned versions: a different bundle is different code in every
reader's browser, so it must be looked at before it ships.

The site loads it as ``_static/explorers/vega.js`` (``book/_ext/explorers.py``); the
notebook's live view carries it inside its widget (:mod:`inferlab.pages.explorers.live`).
"""

from __future__ import annotations

import hashlib
from functools import cache

#: The versions :data:`BUNDLE_SHA256` was recorded with (constraints.txt pins them).
VL_CONVERT_VERSION = "1.9.0.post1"
VEGA_LITE_VERSION = "5.20"

#: sha256 of ``vl_convert.javascript_bundle(vl_version="5.20")`` from vl-convert-python
#: 1.9.0.post1: vega-embed 7.0.2, Vega-Lite 5.20 and Vega 6.2.0, 894,702 characters.
BUNDLE_SHA256 = "7884a7bb24c750fab92c22f5d4eff7e5918757d0d6ed189dbc9cecdb6931234a"


def vega_lite_version() -> str:
    """The Vega-Lite version (``"5.20"``) that the installed Altair writes specs for."""
    from altair.utils._importers import vl_version_for_vl_convert

    return vl_version_for_vl_convert().removeprefix("v").replace("_", ".")


@cache
def bundle() -> str:
    """The bundle's text, checked against :data:`BUNDLE_SHA256`.

    Raises ``RuntimeError`` naming the versions when the installed packages give another
    bundle (about two seconds to make; made once per process).
    """
    from importlib.metadata import version

    import vl_convert

    installed = version("vl-convert-python")
    wanted = vega_lite_version()
    text = vl_convert.javascript_bundle(vl_version=wanted)
    digest = hashlib.sha256(text.encode()).hexdigest()
    if digest != BUNDLE_SHA256:
        raise RuntimeError(
            f"the Vega bundle from vl-convert-python {installed} for Vega-Lite {wanted} has "
            f"sha256 {digest}; inferlab.pages.explorers.vega recorded {BUNDLE_SHA256} for "
            f"vl-convert-python {VL_CONVERT_VERSION} and Vega-Lite {VEGA_LITE_VERSION}. "
            "Install the pinned versions (pip install -c constraints.txt vl-convert-python "
            "altair), or review the new bundle and record its versions and sha256 there.")
    return text
