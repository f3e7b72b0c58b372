"""Offer every chapter as a notebook that runs when downloaded on its own.

At the end of an HTML build this writes each chapter (a page whose file name starts
with two digits) as ``notebooks/<chapter>.ipynb`` in the site, adds it as ".ipynb" to
the page's download button, and puts a link to it under the chapter's title.

The notebook is jupytext's conversion of the chapter (no outputs) with a setup cell
first that imports ``inferlab``, or finds a clone of the book in or above the
notebook's folder, or prints how to get one (``git clone ...; pip install -r
requirements.txt``) and stops with ``ModuleNotFoundError``. In the student edition
(``inferlab_edition = "student"``, see ``editions.py``) solutions are removed from the
notebooks too. ``scripts/export_notebooks.py`` writes the same notebooks from the
command line.

Config values: ``inferlab_repository``, the clone URL the setup cell prints.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import jupytext
import nbformat

#: Where the book's sources live; the setup cell's instructions name it.
REPOSITORY = "https://github.com/inferlab/tokens-per-second"

SETUP_MARKDOWN = """\
**Setup.** This notebook is one chapter of *Tokens per Second Is Not a Property of a
Chip*. It needs the book's helper package `inferlab` and its data. The next cell finds
them: an installed `inferlab` (`pip install -r requirements.txt` in a clone of the
repository installs it), or a clone of the repository in this notebook's folder or a
folder above it. If it finds neither, it prints how to get them:

```bash
git clone {repository}
cd {folder}
pip install -r requirements.txt
jupyter lab book/
```
"""

# The setup cell's code. ``find_inferlab`` is kept a function of its inputs so that the
# tests can run it with a fake import and a fake folder tree.
SETUP_CODE = '''\
# Setup: find the book's helper package `inferlab` (see the note above).
import importlib
import sys
from pathlib import Path

REPOSITORY = "{repository}"


def find_inferlab(start=None, import_module=importlib.import_module, path=sys.path):
    """Import inferlab, from the environment or from a clone of the book above `start`.

    Returns the imported module; raises ModuleNotFoundError with instructions otherwise.
    """
    get = (
        "Get them with:\\n\\n"
        f"    git clone {{REPOSITORY}}\\n"
        f"    cd {{REPOSITORY.rstrip('/').rsplit('/', 1)[-1]}}\\n"
        "    pip install -r requirements.txt\\n\\n"
        "then open this notebook from the clone's book/ folder (jupyter lab book/), or "
        "run `pip install -e <path of the clone>` in the environment of this kernel."
    )
    try:
        module = import_module("inferlab")
    except ModuleNotFoundError as error:
        if error.name not in (None, "inferlab"):
            raise  # inferlab is there but one of its requirements is not
        module = None
    if module is None:
        start = Path(start or Path.cwd()).resolve()
        name = REPOSITORY.rstrip("/").rsplit("/", 1)[-1]
        places = [place for folder in (start, *start.parents) for place in (folder, folder / name)]
        for folder in places:
            if (folder / "inferlab" / "__init__.py").is_file() and (folder / "data").is_dir():
                path.insert(0, str(folder))
                print(f"Using the book's repository at {{folder}}")
                module = import_module("inferlab")
                break
    if module is not None:
        if (Path(module.__file__).resolve().parent.parent / "data").is_dir():
            return module
        message = ("inferlab is installed without the book's data/ folder next to it "
                   "(install it editable, from a clone).\\n" + get)
        print(message)
        raise ModuleNotFoundError(message)
    message = (
        "This notebook needs the book's helper package `inferlab` and its data, and "
        "neither is installed nor found in this folder or a folder above it.\\n" + get
    )
    print(message)
    raise ModuleNotFoundError(message)


inferlab = find_inferlab()
'''


def setup_cells(repository: str = REPOSITORY) -> list:
    """The markdown note and the code cell that open every exported notebook."""
    folder = repository.rstrip("/").rsplit("/", 1)[-1]
    return [
        nbformat.v4.new_markdown_cell(SETUP_MARKDOWN.format(repository=repository,
                                                            folder=folder),
                                      metadata={"tags": ["setup"]}),
        nbformat.v4.new_code_cell(SETUP_CODE.format(repository=repository),
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
            f"once the book's package is installed, and its first cell says how.</p>")
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
