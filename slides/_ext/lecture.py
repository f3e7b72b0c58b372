"""Lecture decks over the book: slides written apart, figures and notes taken from the chapter.

A deck is ``slides/<chapter>.md`` for the chapter ``book/<chapter>.md``. It is an
ordinary MyST page read by the same Sphinx project as the book (so ``{numref}``,
``{cite:t}`` and glue resolve exactly as on the site), built with sphinx-revealjs by
``scripts/build_slides.py``. This extension adds what a deck needs from its chapter:

- ``{glue:text}`key:fmt``` in a deck means the key glued by its chapter (a key
  without ``::`` is read from ``/book/<chapter>.md``), so slide numbers are the
  chapter's computed numbers;
- ``{chapter-figure} fig-label``: the chapter's figure, its image and the first
  sentence of its caption, numbered as in the book ("Fig. 5.3");
- ``{chapter-notes} Section title``: speaker notes (``<aside class="notes">``) made
  of the chapter's own prose from that section (its title as in the chapter, or its
  id), optionally only the paragraphs from the one containing ``:from:`` to the one
  containing ``:to:`` (a paragraph ending in a colon keeps what it introduces).

A selector that matches nothing is an error, so a chapter edit that removes a
figure, a section or a quoted phrase fails the deck build instead of leaving a
slide out of step. Links become plain text: a deck folder holds no book pages, and a
lecture room may have no network.
"""

from __future__ import annotations

import re
from pathlib import PurePosixPath

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

DECK_FOLDER = "slides"
_GLUE_ROLE = re.compile(r"\{(glue(?::\w+)?)\}`(?![^`]*::)([^`]+)`")
# Body elements of a section that are prose (code cells, figures and outputs are not;
# nor is display math, which notes could show only as LaTeX source).
_PROSE = (nodes.paragraph, nodes.bullet_list, nodes.enumerated_list, nodes.block_quote,
          nodes.Admonition, nodes.definition_list)


class chapter_figure(nodes.General, nodes.Element):
    """Placeholder replaced by a copy of the chapter's figure once both are resolved."""


class chapter_notes(nodes.General, nodes.Element):
    """Placeholder replaced by the chapter's prose as speaker notes."""


def chapter_of(docname: str) -> str | None:
    """``book/<name>`` for the deck ``slides/<name>``, else None."""
    path = PurePosixPath(docname)
    if len(path.parts) == 2 and path.parts[0] == DECK_FOLDER:
        return f"book/{path.name}"
    return None


def _glue_in_chapter(chapter: str, match: re.Match) -> str:
    role, content = match.group(1), match.group(2)
    # myst-nb splits a text role's format off at the last colon, so a key without a
    # format needs an empty one or the page path's "::" would be taken for it.
    if role == "glue:text" and ":" not in content:
        content += ":"
    return f"{{{role}}}`/{chapter}.md::{content}`"


def _source_read(app, docname: str, source: list[str]) -> None:
    chapter = chapter_of(docname)
    if chapter:
        source[0] = _GLUE_ROLE.sub(lambda m: _glue_in_chapter(chapter, m), source[0])


class ChapterFigure(SphinxDirective):
    required_arguments = 1
    final_argument_whitespace = True
    option_spec = {"caption": directives.unchanged}

    def run(self):
        node = chapter_figure(label=self.arguments[0], caption=self.options.get("caption"))
        self.set_source_info(node)
        return [node]


class ChapterNotes(SphinxDirective):
    required_arguments = 1
    final_argument_whitespace = True
    option_spec = {"from": directives.unchanged, "to": directives.unchanged}

    def run(self):
        node = chapter_notes(section=self.arguments[0], start=self.options.get("from"),
                             end=self.options.get("to"))
        self.set_source_info(node)
        return [node]


_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'})


def _plain(text: str) -> str:
    """Text with its white space collapsed; Sphinx's smart quotes made plain again, so a
    deck can quote a chapter's phrase as it is written in the source."""
    return " ".join(text.translate(_QUOTES).split())


def _first_sentence(text: str) -> str:
    match = re.match(r"(.+?[.!?])(?:\s+[A-Z(]|$)", text)
    return match.group(1) if match else text


def _resolved_chapter(app, chapter: str):
    cache = app.env.__dict__.setdefault("lecture_chapters", {})
    if chapter not in cache:
        if chapter not in app.env.all_docs:
            raise ExtensionError(f"deck for {chapter}: no such page in the book")
        cache[chapter] = app.env.get_and_resolve_doctree(chapter, app.builder)
    return cache[chapter]


def _where(node) -> str:
    return f"{node.source}:{node.line}"


def _figure(app, chapter: str, doctree, node) -> nodes.Node:
    label = node["label"]
    found = [f for f in doctree.findall(nodes.figure) if label in f["ids"]]
    if not found:
        raise ExtensionError(f"{_where(node)}: {chapter} has no figure {label!r}")
    number = app.env.toc_fignumbers.get(chapter, {}).get("figure", {}).get(label)
    if not number:
        raise ExtensionError(f"{_where(node)}: figure {label!r} has no number in the book")
    figure = found[0].deepcopy()
    # The label survives as a class, for the test that compares numbers with the book's.
    figure["classes"] += ["lecture-figure", f"from-{label}"]
    caption = next(iter(figure.findall(nodes.caption)), None)
    fig = "Fig. " + ".".join(map(str, number))
    # The book's caption is a paragraph; a slide takes its first sentence unless the deck
    # gives its own (":caption:"), and the speaker can read the rest in the book.
    text = node["caption"] or (_first_sentence(_plain(caption.astext())) if caption else "")
    new_caption = nodes.caption("", "", nodes.strong("", fig + "."), nodes.Text(" " + text))
    for old in list(figure.findall(nodes.caption)):
        old.parent.remove(old)
    for legend in list(figure.findall(nodes.legend)):
        legend.parent.remove(legend)
    figure.append(new_caption)
    # Sphinx's writer wants an id on a numbered figure; one of the deck's own keeps it
    # from numbering the copy again (the number is already in the caption).
    for element in figure.findall(nodes.Element):
        element["ids"] = []
    figure["ids"] = [f"lecture-{label}"]
    return figure


def _notes(app, chapter: str, doctree, node) -> nodes.Node:
    from sphinx_revealjs._ext.notes import revealjs_notes

    section_id = node["section"]
    sections = [s for s in doctree.findall(nodes.section)
                if section_id in s["ids"] or _plain(s[0].astext()) == _plain(section_id)]
    if not sections:
        raise ExtensionError(f"{_where(node)}: {chapter} has no section {section_id!r}")
    # The site's "Run it live" box speaks of a page the deck does not show; the deck's
    # explorer slides say for themselves how to run the explorer.
    blocks = [child for child in sections[0].children if isinstance(child, _PROSE)
              and not (isinstance(child, nodes.Admonition)
                       and _plain(child[0].astext()) == "Run it live")]

    def index(phrase: str | None, default: int) -> int:
        if phrase is None:
            return default
        wanted = _plain(phrase)
        for i, block in enumerate(blocks):
            if wanted in _plain(block.astext()):
                return i
        raise ExtensionError(f"{_where(node)}: no paragraph of {chapter}#{section_id} "
                             f"contains {phrase!r}")

    first = index(node["start"], 0)
    last = index(node["end"], first if node["start"] else len(blocks) - 1)
    if last < first:
        raise ExtensionError(f"{_where(node)}: :to: comes before :from: in {section_id!r}")
    # A paragraph that ends in a colon introduces what follows it; keep them together.
    while last + 1 < len(blocks) and _plain(blocks[last].astext()).endswith(":"):
        last += 1
    notes = revealjs_notes()
    for block in blocks[first:last + 1]:
        notes.append(nodes.paragraph("", _plain(block.astext())))
    return notes


def _doctree_resolved(app, doctree, docname: str) -> None:
    chapter = chapter_of(docname)
    if not chapter or app.builder.name not in ("revealjs", "dirrevealjs"):
        return
    resolved = _resolved_chapter(app, chapter)
    for node in list(doctree.findall(chapter_figure)):
        node.replace_self(_figure(app, chapter, resolved, node))
    for node in list(doctree.findall(chapter_notes)):
        node.replace_self(_notes(app, chapter, resolved, node))
    for reference in list(doctree.findall(nodes.reference)):
        reference.replace_self(nodes.inline("", "", *reference.children))


def _deck_page(app, pagename, templatename, context, doctree) -> None:
    """A deck page without the book page's furniture. The "download this chapter" line
    that book/_ext/notebooks.py adds under every chapter-like title is not a slide, and
    a deck folder has no notebooks."""
    if not chapter_of(pagename):
        return
    if "body" in context:
        context["body"] = re.sub(r'<p class="inferlab-notebook">.*?</p>\n?', "",
                                 context["body"], flags=re.DOTALL)
    # The book's extensions register scripts for book pages (copy buttons, toggles, the
    # HTML theme's own), which expect Sphinx's page globals or files the revealjs builder
    # never copies; a deck keeps reveal.js, MathJax and inline configuration only.
    def kept(asset) -> bool:
        name = str(getattr(asset, "filename", "") or "")
        return not name or "revealjs" in name or "mathjax" in name or name.endswith("lecture.css")
    for key in ("script_files", "css_files"):
        context[key] = [asset for asset in context.get(key, []) if kept(asset)]
    # Neither are there neighbouring pages: the book's pages are not in a deck folder.
    context["prev"] = context["next"] = None


def _skip(self, node):
    raise nodes.SkipNode


def setup(app):
    app.add_node(chapter_figure, html=(_skip, None))
    app.add_node(chapter_notes, html=(_skip, None))
    app.add_directive("chapter-figure", ChapterFigure)
    app.add_directive("chapter-notes", ChapterNotes)
    app.connect("source-read", _source_read)
    app.connect("doctree-resolved", _doctree_resolved)
    app.connect("html-page-context", _deck_page, priority=700)  # after notebooks.py (600)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
