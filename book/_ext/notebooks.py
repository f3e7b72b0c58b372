"""Offer every chapter as a notebook that runs when downloaded on its own.

At the end of an HTML build this writes each chapter (a page whose file name starts
with two digits) as ``notebooks/<chapter>.ipynb`` in the site, adds it as ".ipynb" to
the page's download button, and puts a link to it under the chapter's title.

The notebook is jupytext's conversion of the chapter (no outputs) with a setup cell
first. Where the book's repository is published (``inferlab_repository``), the cell
installs ``inferlab`` with ``%pip`` from it when the kernel cannot import it (the package
carries its data, so nothing else is needed); until then it stops with how to install it
from a copy of the sources. A kernel that has ``inferlab`` passes it untouched. In the
student edition (``inferlab_edition = "student"``, see ``editions.py``) solutions are
removed from the notebooks too.
``scripts/export_notebooks.py`` writes the same notebooks from the command line.

JupyterLab cannot resolve a markdown cell's glue, citation and cross-reference roles
(jupyterlab-myst shows a glue role's key, a citation's key), so the notebook's text says
what the site says instead (:class:`SiteText`, from the build's Sphinx environment):
each glue role becomes the value the site prints, read from the glued outputs myst-nb
stored for the site (``<jupyter_execute>/book/<chapter>.glue.json``) and formatted by
myst-nb's own ``format_plain_text``; each ``{cite:p}``/``{cite:t}`` role the citation
the site prints, written by sphinxcontrib-bibtex's ``format_references`` in the book's
referencing style (``citations.py``); each ``{numref}`` the figure's number, as Sphinx
numbers it; each ``{term}`` and ``{func}`` its text.

Config values: ``inferlab_repository``, the published repository the setup cell installs
from (empty: none yet).
"""

from __future__ import annotations

import re
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import jupytext
import nbformat

#: Where the book's sources are published, as a git URL the setup cell can install from
#: (``_config.yml``: ``inferlab_repository``). Empty until whoever publishes the book sets
#: it: the setup cell then says how to install from a copy of the sources instead of
#: naming a repository that does not exist.
REPOSITORY = ""

#: What the setup cell installs from a published repository: the package with everything
#: a chapter imports (the package carries the book's tables and tokenizer files).
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

# Without a published repository there is nothing to install from over the network: the
# note says how to install from a copy of the sources, and the cell stops with the same
# words, so that no later cell fails half-way on a missing import.
LOCAL_MARKDOWN = """\
**Setup.** This notebook is one chapter of *Tokens per Second Is Not a Property of a
Chip*. It needs the book's helper package `inferlab`, which carries the book's data and
tokenizer files. Install it into this kernel's environment from a copy of the book's
sources (a clone, or an unpacked archive of one), with the libraries the chapters use:

```bash
pip install "/path/to/the/book[notebooks]"
```

or build a wheel there once (`pip wheel --no-deps . -w dist`) and install
`dist/inferlab-*.whl` on any machine. In the copy itself,
`pip install -r requirements.txt` installs it too (editable). The next cell checks
that it is there.
"""

LOCAL_CODE = """\
# Setup: the book's helper package `inferlab` must be installed in this kernel (see above).
import importlib.util

if importlib.util.find_spec("inferlab") is None:
    raise ModuleNotFoundError(
        "inferlab is not installed in this kernel: run pip install "
        "'/path/to/the/book[notebooks]' from a copy of the book's sources (or install a "
        "wheel built there), then restart the kernel")
import inferlab
"""


# Added to the setup note of a notebook whose roles were filled in from the site.
FILLED_MARKDOWN = """
The numbers in the text are the ones the book's site computed when it was built;
running the cells computes your own (cells that time this machine will differ).
"""


def setup_cells(repository: str = REPOSITORY, filled: bool = False) -> list:
    """The markdown note and the code cell that open every exported notebook: an install
    from ``repository`` where one is given, else the way to install from a copy of the
    sources; ``filled`` says the text's numbers are the site's."""
    if repository:
        requirement = REQUIREMENT.format(repository=repository)
        note = SETUP_MARKDOWN.format(requirement=requirement)
        code = SETUP_CODE.format(requirement=requirement)
    else:
        note, code = LOCAL_MARKDOWN, LOCAL_CODE
    return [
        nbformat.v4.new_markdown_cell(note + (FILLED_MARKDOWN if filled else ""),
                                      metadata={"tags": ["setup"]}),
        nbformat.v4.new_code_cell(code, metadata={"tags": ["setup"]}),
    ]


# --------------------------------------------------------------------------- the site's text

# myst-nb's glue roles ({glue}, {glue:any}, {glue:text}, {glue:md}), sphinxcontrib-bibtex's
# citations ({cite:p}, {cite:t}) and Sphinx's {numref}, {term} and {func}, with what is
# between the backticks.
_GLUE_ROLE = re.compile(r"\{glue(?::(any|text|md))?\}`([^`]+)`")
_CITE_ROLE = re.compile(r"\{cite:(p|t)\}`([^`]+)`")
_NUMREF_ROLE = re.compile(r"\{numref\}`([^`]+)`")
_TERM_ROLE = re.compile(r"\{term\}`([^`<]+?)\s*(?:<[^`>]+>)?`")
# Sphinx's {func}: "~" keeps the last name; the page adds "()" (add_function_parentheses).
_FUNC_ROLE = re.compile(r"\{func\}`(~?)([\w.]+)`")

#: Where a book build keeps its Sphinx environment, under its ``_build`` folder.
ENVIRONMENT = Path(".doctrees") / "environment.pickle"


def bibliography(bibfiles: list[Path]) -> tuple[dict, dict]:
    """The entries of ``bibfiles`` by key, and each one formatted by the book's style
    (``citations.LetteredStyle``: lettered labels over every entry, as the bibliography
    page, ``:all:``, lists them)."""
    from citations import LetteredStyle  # the sibling extension, on the same path
    from pybtex.database import BibliographyData, parse_file

    bib = BibliographyData()
    for path in bibfiles:
        bib.add_entries(parse_file(str(path)).entries.items())
    style = LetteredStyle()
    entries = list(style.sort(bib.entries.values()))
    return dict(bib.entries), {e.key: f for e, f in zip(entries, style.format_entries(entries),
                                                      strict=True)}


def load_environment(build: Path):
    """The Sphinx environment a book build left in ``build`` (its ``_build`` folder)."""
    import pickle

    path = build / ENVIRONMENT
    if not path.is_file():
        raise ValueError(f"build: no book build in {build} (no {ENVIRONMENT}); build the "
                         f"book first (jupyter-book build .)")
    with path.open("rb") as file:
        return pickle.load(file)


@dataclass(frozen=True)
class SiteText:
    """What the site prints for one chapter's glue, citation, figure and term roles.

    ``glue``: the chapter's glued outputs by key, as myst-nb stored them for the site's
    cross-page glue; ``where``: the file they came from (named when a key is missing);
    ``entries`` and ``formatted``: :func:`bibliography`; ``numbers``: every numbered
    target's label with the text ``{numref}`` prints for it ("Fig. 2.1").
    """

    chapter: str
    glue: dict
    where: str
    entries: dict
    formatted: dict
    numbers: dict

    @classmethod
    def of(cls, env, chapter: str) -> SiteText:
        """Chapter ``chapter`` (a file stem in ``book/``) as the build whose Sphinx
        environment is ``env`` printed it."""
        from myst_nb.ext.glue.crossref import read_glue_cache

        folder = env.mystnb_config.output_folder
        read_glue_cache.cache_clear()  # a later build may have rewritten the file
        glue = read_glue_cache(folder, f"book/{chapter}")
        bibfiles = [Path(env.srcdir) / name for name in env.config.bibtex_bibfiles]
        # Sphinx's numref: the target's number in its document, in numfig_format.
        numbers = {}
        for label, (docname, labelid, *_) in env.domaindata["std"]["labels"].items():
            for kind, numbered in env.toc_fignumbers.get(docname, {}).items():
                if labelid in numbered and kind in env.config.numfig_format:
                    number = ".".join(map(str, numbered[labelid]))
                    numbers[label] = env.config.numfig_format[kind] % number
        return cls(chapter, glue, str(Path(folder) / "book" / f"{chapter}.glue.json"),
                   *bibliography(bibfiles), numbers)

    def _output(self, key: str) -> dict:
        if "::" in key:
            raise ValueError(f"{self.chapter}: glue role {key!r} pastes from another page, "
                             f"which an exported notebook cannot show")
        if key not in self.glue:
            raise ValueError(f"{self.chapter}: no glued value {key!r} in {self.where}; "
                             f"build the book (jupyter-book build .) before exporting")
        return self.glue[key]["data"]

    def glue_role(self, kind: str | None, content: str) -> str:
        """The text myst-nb's role ``{glue:<kind>}`content``` puts in the page."""
        from myst_nb.core.variables import format_plain_text

        if kind == "text":  # "key:format", split at the last colon as myst-nb's role does
            key, fmt = content.rsplit(":", 1) if ":" in content else (content, "s")
            return format_plain_text(self._output(key)["text/plain"], fmt)
        if kind == "md":  # "key" or "key:markdown-flavour"
            return self._output(content.rsplit(":", 1)[0])["text/markdown"]
        data = self._output(content)
        if "text/markdown" in data:
            return data["text/markdown"]
        return format_plain_text(data["text/plain"], "")

    def citation(self, kind: str, keys: str) -> str:
        """The text sphinxcontrib-bibtex's ``{cite:<kind>}`keys``` puts in the page:
        "[Kwon et al., 2023; Williams et al., 2009]", or "Kwon et al. [2023]"."""
        import pybtex_docutils
        from citations import LetteredAuthorYear
        from sphinxcontrib.bibtex.style.referencing import format_references
        from sphinxcontrib.bibtex.style.template import SphinxReferenceInfo

        # The link each citation gets on the site is dropped; only its text is kept.
        builder = types.SimpleNamespace(name="notebook", get_relative_uri=lambda *_: "")
        references = []
        for key in (k.strip() for k in keys.split(",")):
            if key not in self.entries:
                raise ValueError(f"{self.chapter}: citation {key!r} is not in the "
                                 f"bibliography")
            info = SphinxReferenceInfo(builder, self.chapter, "bibliography", key, None, "",
                                       "")
            references.append((self.entries[key], self.formatted[key], info))
        text = format_references(LetteredAuthorYear(), kind, references)
        return "".join(node.astext() for node in text.render(pybtex_docutils.Backend()))

    def number(self, label: str) -> str:
        """The text ``{numref}`label``` puts in the page: "Fig. 2.1"."""
        if label not in self.numbers:
            raise ValueError(f"{self.chapter}: {{numref}} target {label!r} has no number in "
                             f"the build")
        return self.numbers[label]

    def fill(self, markdown: str) -> str:
        """``markdown`` with every glue, citation, numref, term and func role replaced by
        the text the site shows (without the link a term or function has there)."""
        markdown = _GLUE_ROLE.sub(lambda m: self.glue_role(m.group(1), m.group(2)), markdown)
        markdown = _CITE_ROLE.sub(lambda m: self.citation(m.group(1), m.group(2)), markdown)
        markdown = _NUMREF_ROLE.sub(lambda m: self.number(m.group(1)), markdown)
        markdown = _FUNC_ROLE.sub(_function, markdown)
        return _TERM_ROLE.sub(lambda m: m.group(1), markdown)


def _function(match: re.Match) -> str:
    """What Sphinx shows for ``{func}`name```: the name as code with "()" after it, only its
    last part when it starts with "~"."""
    name = match.group(2).rsplit(".", 1)[-1] if match.group(1) else match.group(2)
    return f"`{name}()`"


def chapter_notebook(chapter: Path, repository: str = REPOSITORY,
                     transform: Callable[[str], str] | None = None,
                     site: SiteText | None = None) -> nbformat.NotebookNode:
    """The chapter as a notebook: jupytext's conversion with the setup cells first.

    ``transform`` rewrites the MyST text before conversion (the student edition strips
    solutions with it). With ``site``, the glue and citation roles of the markdown cells
    read as the site prints them (:meth:`SiteText.fill`).
    """
    text = chapter.read_text(encoding="utf8")
    nb = jupytext.reads(transform(text) if transform else text, fmt="md:myst")
    if site is not None:
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = site.fill(cell.source)
    nb.cells = setup_cells(repository, filled=site is not None) + nb.cells
    nb.metadata.pop("jupytext", None)  # a plain notebook, not paired with the .md file
    nb.metadata.setdefault("kernelspec", {"display_name": "Python 3", "language": "python",
                                          "name": "python3"})
    return nb


def export(chapters: list[Path], out: Path, repository: str = REPOSITORY,
           transform: Callable[[str], str] | None = None,
           site: Callable[[Path], SiteText] | None = None) -> list[Path]:
    """Write ``<out>/<chapter>.ipynb`` for each chapter; return the paths written.
    ``site(chapter)``, if given, is the chapter's :class:`SiteText`."""
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for chapter in chapters:
        target = out / f"{chapter.stem}.ipynb"
        nb = chapter_notebook(chapter, repository, transform, site(chapter) if site else None)
        nbformat.write(nb, target)
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
           _transform(app.config), lambda chapter: SiteText.of(app.env, chapter.stem))


def setup(app):
    app.add_config_value("inferlab_repository", REPOSITORY, "html")
    app.connect("html-page-context", _link, priority=600)  # after the theme's buttons (501)
    app.connect("build-finished", _write)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
