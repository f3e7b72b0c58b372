"""The explorers on the site: precomputed when the book is built, drawn by Vega.

- Before any notebook runs, this sets ``inferlab.pages.explorers.SITE_ENV`` in the build's
  environment; the kernels myst-nb starts inherit it, so a chapter cell that displays
  an explorer gives the site's static explorer as ``text/html`` (its grid computed
  then), where a reader's kernel gives a live view and computes no grid.
- ``_static/explorers/vega.js`` is written from the pinned ``vl-convert-python``
  (:func:`inferlab.pages.explorers.vega.bundle`, which refuses a bundle whose sha256 was not
  recorded). A page that shows an explorer loads ``_static/explorers.js`` and
  ``_static/explorers.css``; the script loads the bundle when the first explorer comes
  near the window, and draws each explorer then.
- Each page's explorer data is logged, and a page carrying more than
  :data:`inferlab.pages.explorers.site.LIMIT_BYTES` fails the build.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from sphinx.errors import ExtensionError
from sphinx.util import logging

from inferlab.pages.explorers.base import SITE_ENV
from inferlab.pages.explorers.site import LIMIT_BYTES

logger = logging.getLogger(__name__)

BUNDLE = "explorers/vega.js"

# The site's builders. Others that write HTML (the lecture decks' revealjs) show no
# explorer: they need neither the grid nor the script.
SITE_BUILDERS = ("html", "dirhtml", "singlehtml")
_SIZE = re.compile(r'class="inferlab-explorer" data-explorer="([^"]+)" data-bytes="(\d+)"')


def _site_mode(app) -> None:
    if app.builder.name not in SITE_BUILDERS:
        return
    from inferlab.pages.explorers.vega import bundle

    try:
        bundle()  # refused now, before the notebooks run, rather than at the end
    except RuntimeError as error:
        raise ExtensionError(str(error)) from None
    os.environ[SITE_ENV] = "1"


def _scripts(app, pagename, templatename, context, doctree) -> None:
    found = _SIZE.findall(context.get("body", ""))
    if app.builder.name not in SITE_BUILDERS or not found:
        return
    total = sum(int(size) for _, size in found)
    logger.info(f"explorers: {pagename} carries {total:,} bytes of explorer data "
                f"({', '.join(f'{name} {int(size):,}' for name, size in found)})")
    if total > LIMIT_BYTES:
        raise ExtensionError(f"{pagename}: its explorers carry {total:,} bytes of data, "
                             f"more than {LIMIT_BYTES:,}; give their controls smaller grids")
    # A module, so that it can find the bundle beside itself; it loads the bundle only
    # when an explorer comes near the window.
    app.add_js_file("explorers.js", type="module")
    app.add_css_file("explorers.css")


def _write_bundle(app, exception) -> None:
    if exception is not None or app.builder.name not in SITE_BUILDERS:
        return
    from inferlab.pages.explorers.vega import bundle

    target = Path(app.outdir) / "_static" / BUNDLE
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(bundle(), encoding="utf-8")


def setup(app):
    app.connect("builder-inited", _site_mode)
    app.connect("html-page-context", _scripts)  # before scriptfix (900) copies the list
    app.connect("build-finished", _write_bundle)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
