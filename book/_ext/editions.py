"""Student and instructor editions of the book, built from the same sources.

Set the Sphinx config value ``inferlab_edition`` (``scripts/build_edition.py`` does,
from ``editions/<name>.yml``):

- ``"student"``: every exercise solution is removed from the document tree, code
  cells and their outputs included, and from the page sources copied into the site
  (``_sources/``), so no solution text reaches the built HTML or the download button.
  sphinx-exercise's own ``hide_solutions`` is not enough for this book: it drops the
  ``solution-start`` directive but leaves the gated content (the explanation and the
  code cell with its output) in the page.
- ``"instructor"``: solutions are shown expanded, not in a dropdown.
- ``"default"`` (or unset): the site as the book's ``_config.yml`` builds it
  (solutions in collapsed dropdowns).

Solution code cells are still executed in every edition, so a student build checks
the same answers as the instructor build.
"""

from __future__ import annotations

import re
from pathlib import Path

from sphinx.transforms import SphinxTransform

EDITIONS = ("default", "student", "instructor")

# A gated solution in MyST source: from ```{solution-start} to the fence closing
# ```{solution-end}; and a plain solution directive (backtick or colon fence).
_GATED = re.compile(r"^(`{3,}|:{3,})\{solution-start\}.*?^\1\{solution-end\}[^\n]*\n\1[ \t]*$\n?",
                    re.MULTILINE | re.DOTALL)
_PLAIN = re.compile(r"^(`{3,}|:{3,})\{solution\}.*?^\1[ \t]*$\n?", re.MULTILINE | re.DOTALL)


def strip_solutions(text: str) -> str:
    """MyST source ``text`` with every solution block (gated or plain) removed."""
    return _PLAIN.sub("", _GATED.sub("", text))


def _solution_types():
    from sphinx_exercise.nodes import solution_end_node, solution_node, solution_start_node

    return solution_node, solution_start_node, solution_end_node


class EditionSolutions(SphinxTransform):
    """Remove (student) or expand (instructor) the merged solution nodes.

    Runs after sphinx-exercise merges gated solutions (its priority 10).
    """

    default_priority = 15

    def apply(self) -> None:
        edition = self.config.inferlab_edition
        if edition not in ("student", "instructor"):
            return
        types = _solution_types()
        for node in list(self.document.findall(lambda n: isinstance(n, types))):
            if edition == "student":
                node.parent.remove(node)
            else:
                node["classes"] = [c for c in node["classes"] if c != "dropdown"]


def _check_edition(app, config) -> None:
    if config.inferlab_edition not in EDITIONS:
        raise ValueError(f"inferlab_edition: {config.inferlab_edition!r} is not one of "
                         f"{', '.join(EDITIONS)}")


def _strip_sources(app, exception) -> None:
    """In the student edition, remove solutions from the page sources copied into the site."""
    if exception is not None or app.config.inferlab_edition != "student":
        return
    sources = Path(app.outdir) / "_sources"
    if not sources.is_dir():
        return
    for path in sources.rglob("*"):
        if path.suffix in (".md", ".txt") and path.is_file():
            text = path.read_text(encoding="utf8")
            stripped = strip_solutions(text)
            if stripped != text:
                path.write_text(stripped, encoding="utf8")


def setup(app):
    app.add_config_value("inferlab_edition", "default", "env")
    app.connect("config-inited", _check_edition)
    app.add_transform(EditionSolutions)
    app.connect("build-finished", _strip_sources)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
