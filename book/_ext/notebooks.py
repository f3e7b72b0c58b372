"""Offer every chapter as a notebook that runs when downloaded on its own.

At the end of an HTML build this writes each chapter (a page whose file name starts
with two digits) as ``notebooks/<chapter>.ipynb`` in the site, adds it as ".ipynb" to
the page's download button, and puts a link to it under the chapter's title.

The notebook is jupytext's conversion of the chapter (no outputs) with a setup cell
first that installs ``inferlab`` with ``%pip`` from the repository when the kernel
cannot import it (the package carries its data, so nothing else is needed), and
otherwise does nothing. In the student edition (``inferlab_edition = "student"``, see
``editions.py``) solutions are removed from the notebooks too.
``scripts/export_notebooks.py`` writes the same notebooks from the command line.

Config values: ``inferlab_repository``, the repository the setup cell installs from.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import jupytext
import nbformat

#: Where the book's sources live; the setup cell installs the package from there.
REPOSITORY = "https://github.com/inferlab/tokens-per-second"

#: What the setup cell installs: the package with everything a chapter imports, from the
#: repository (the package carries the book's tables and tokenizer files).
REQUIREMENT = "inferlab[notebooks] @ git+{repository}"

SETUP_MARKDOWN = """\
**Setup.** This notebook is one chapter of *Tokens per Second Is Not a Property of a
Chip*. It needs the book's helper package `inferlab`, which carries the book's data and
tokenizer files. If this kernel cannot import it, the next cell installs it, with the
libraries the chapters use (this needs git and the network once):

```bash
pip install "{requirement}"
```

In a clone of the repository, `pip install -r requirements.txt` installs it too
(editable), and the cell then installs nothing.
"""

# The setup cell: IPython's %pip installs into the kernel's own environment.
SETUP_CODE = """\
# Setup: install the book's helper package `inferlab` if this kernel lacks it (see above).
import importlib.util

if importlib.util.find_spec("inferlab") is None:
    %pip install --quiet "{requirement}"
    importlib.invalidate_caches()
import inferlab
"""


def setup_cells(repository: str = REPOSITORY) -> list:
    """The markdown note and the code cell that open every exported notebook."""
    requirement = REQUIREMENT.format(repository=repository)
    return [
        nbformat.v4.new_markdown_cell(SETUP_MARKDOWN.format(requirement=requirement),
                                      metadata={"tags": ["setup"]}),
        nbformat.v4.new_code_cell(SETUP_CODE.format(requirement=requirement),
                                  metadata={"tags": ["setup"]}),
    ]


def chapter_notebook(chapter: Path, repository: str = REPOSITORY,
                     transform: Callable[[str], str] | None = None) -> nbformat.NotebookNode:
    """The chapter as a notebook: jupytext's conversion with the setup cells first.

    ``transform`` rewrites the MyST text before conversion (the student edition strips
    solutions with it).
    """
    text = chapter.read_text(encoding="utf8")
    nb = jupytext.reads(transform(text) if transform else text, fmt="md:myst")
    nb.cells = setup_cells(repository) + nb.cells
    nb.metadata.pop("jupytext", None)  # a plain notebook, not paired with the .md file
    nb.metadata.setdefault("kernelspec", {"display_name": "Python 3", "language": "python",
                                          "name": "python3"})
    return nb


def export(chapters: list[Path], out: Path, repository: str = REPOSITORY,
           transform: Callable[[str], str] | None = None) -> list[Path]:
    """Write ``<out>/<chapter>.ipynb`` for each chapter; return the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for chapter in chapters:
        target = out / f"{chapter.stem}.ipynb"
        nbformat.write(chapter_notebook(chapter, repository, transform), target)
        written.append(target)
    return written



# --------------------------------------------------------------------------- Sphinx

FOLDER = "notebooks"  # in the site: <html>/notebooks/<chapter>.ipynb


def is_chapter(docname: str) -> bool:
    """Chapters are the pages whose file name starts with two digits."""
    return re.match(r"\d\d", docname.rsplit("/", 1)[-1]) is not None


def _transform(config) -> Callable[[str], str] | None:
    if getattr(config, "inferlab_edition", "default") != "student":
        return None
    from editions import strip_solutions  # the sibling extension, on the same path

    return strip_solutions


def _link(app, pagename, templatename, context, doctree) -> None:
    """Add the notebook to the download button and a link under the chapter's title."""
    if app.builder.format != "html" or not is_chapter(pagename) or "body" not in context:
        return
    url = f"{context['pathto'](FOLDER, 1)}/{pagename.rsplit('/', 1)[-1]}.ipynb"
    for group in context.get("header_buttons", []):
        if group.get("label") == "download-buttons":
            group["buttons"].insert(0, {
                "type": "link", "url": url, "text": ".ipynb", "icon": "fas fa-code",
                "tooltip": "Download this chapter as a notebook that runs on its own",
                "label": "download-notebook-button"})
    note = (f'<p class="inferlab-notebook"><a class="reference download" href="{url}" '
            f'download>Download this chapter as a notebook (.ipynb)</a>: it runs on its own '
            f"once its first cell has installed the book's package.</p>")
    context["body"] = re.sub(r"(</h1>)", lambda m: m.group(1) + "\n" + note,
                             context["body"], count=1)


def _write(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    chapters = [Path(app.env.doc2path(name)) for name in sorted(app.env.found_docs)
                if is_chapter(name)]
    export(chapters, Path(app.outdir) / FOLDER, app.config.inferlab_repository,
           _transform(app.config))


def setup(app):
    app.add_config_value("inferlab_repository", REPOSITORY, "html")
    app.connect("html-page-context", _link, priority=600)  # after the theme's buttons (501)
    app.connect("build-finished", _write)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
