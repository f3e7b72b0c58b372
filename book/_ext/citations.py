"""Author-year citations that tell two works apart: "MLCommons, 2025a", "MLCommons, 2025b".

sphinxcontrib-bibtex's ``author_year`` style writes each entry's author and year as
they stand, so the seven MLCommons works of 2025 all cite as "MLCommons, 2025" and a
group reads "[MLCommons, 2025, MLCommons, 2025]": the reader cannot tell which entry
of the bibliography is meant, nor where one citation ends. The author-date convention
(APA, Chicago, natbib) adds a letter to the year of works that would read alike. The
extension does that for the book:

- ``author_year_lettered``, a pybtex formatting style (``bibtex_default_style``):
  sphinxcontrib-bibtex's default (alpha) formatting and order, with each entry labelled
  "Author, Year" as the citation shows it, lettered where two would read the same;
- ``author_year_lettered``, a referencing style (``bibtex_reference_style``): the
  author-year citations, with the lettered year and ``;`` between the works of a group.

So a citation reads exactly as the bibliography labels its entry. Neither needs
anything but the two packages the book already uses; both are registered as plugins
the way sphinxcontrib-bibtex documents for custom styles.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pybtex.plugin
from pybtex.richtext import Text
from pybtex.style.formatting.alpha import Style as AlphaStyle
from pybtex.style.labels.alpha import LabelStyle as AlphaLabels
from sphinxcontrib.bibtex.plugin import register_plugin
from sphinxcontrib.bibtex.style.referencing import BracketStyle
from sphinxcontrib.bibtex.style.referencing.author_year import AuthorYearReferenceStyle
from sphinxcontrib.bibtex.style.referencing.basic_author_year import (
    BasicAuthorYearParentheticalReferenceStyle,
    BasicAuthorYearTextualReferenceStyle,
)
from sphinxcontrib.bibtex.style.template import (
    join,
    join2,
    node,
    post_text,
    pre_text,
    reference,
    year,
)

NAME = "author_year_lettered"

#: Between the author and the year, as sphinxcontrib-bibtex's author-year style has it.
AUTHOR_YEAR_SEP = ", "


def label(entry) -> str:
    """The citation text of ``entry`` before any letter: "Kwon et al., 2023"."""
    style = BasicAuthorYearParentheticalReferenceStyle()
    template = join(sep=AUTHOR_YEAR_SEP)[style.person.author_or_editor_or_title(full=False),
                                          year]
    return template.format_data({"entry": entry, "style": style}).render_as("text")


class LetteredLabels(AlphaLabels):
    """Labels "Author, Year", with a, b, ... after the year of entries that share one
    (pybtex's alpha labels letter their duplicates the same way, in the same order)."""

    def format_label(self, entry):
        return label(entry)


class LetteredStyle(AlphaStyle):
    """sphinxcontrib-bibtex's default formatting (alpha), labelled :class:`LetteredLabels`."""

    default_label_style = LetteredLabels


@node
def lettered_year(children, data):
    """The year as the entry's bibliography label has it, letter included: "2025a"."""
    assert not children
    return Text(data["formatted_entry"].label.rsplit(AUTHOR_YEAR_SEP, 1)[-1])


@dataclass
class _Parenthetical(BasicAuthorYearParentheticalReferenceStyle):
    def inner(self, role_name):
        return join2(sep1=self.pre_text_sep, sep2=self.post_text_sep)[
            pre_text,
            reference[join(sep=self.author_year_sep)[
                self.person.author_or_editor_or_title(full="s" in role_name), lettered_year]],
            post_text,
        ]


@dataclass
class _Textual(BasicAuthorYearTextualReferenceStyle):
    def inner(self, role_name):
        return join(sep=self.text_reference_sep)[
            self.person.author_or_editor_or_title(full="s" in role_name),
            join[self.bracket.left,
                 join2(sep1=self.pre_text_sep, sep2=self.post_text_sep)[
                     pre_text, reference[lettered_year], post_text],
                 self.bracket.right],
        ]


@dataclass
class LetteredAuthorYear(AuthorYearReferenceStyle):
    """sphinxcontrib-bibtex's author-year citations with the lettered year, and works in
    a group separated by ``;`` (the ``,`` already parts each author from the year)."""

    bracket_parenthetical: BracketStyle = field(default_factory=lambda: BracketStyle(sep="; "))
    bracket_textual: BracketStyle = field(default_factory=lambda: BracketStyle(sep="; "))

    def __post_init__(self):
        super().__post_init__()
        lettered = [
            _Parenthetical(bracket=self.bracket_parenthetical, person=self.person,
                           author_year_sep=self.author_year_sep,
                           pre_text_sep=self.pre_text_sep, post_text_sep=self.post_text_sep),
            _Textual(bracket=self.bracket_textual, person=self.person,
                     text_reference_sep=self.text_reference_sep,
                     pre_text_sep=self.pre_text_sep, post_text_sep=self.post_text_sep),
        ]
        self.styles[:2] = lettered
        self.role_style.update((role, style) for style in lettered for role in style.role_names())


def setup(app):
    # force: a second build in one process (the tests') registers the same classes again.
    pybtex.plugin.register_plugin("pybtex.style.formatting", NAME, LetteredStyle, force=True)
    register_plugin("sphinxcontrib.bibtex.style.referencing", NAME, LetteredAuthorYear,
                    force=True)
    # Registering plugins touches no build state, so workers may read in parallel.
    return {"parallel_read_safe": True, "parallel_write_safe": True}
