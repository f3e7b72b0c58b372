"""What the chapters print reads as a reader expects: rounded numbers, names, whole lines.

Issue 18 found outputs such as 0.30000000000000004, DataFrames with a dozen significant
digits, internal row ids in tables shown to readers and lines cut off at the right of
the page. These tests read every output of every chapter in the strict build's executed
notebooks (``build``): the printed text, the value a cell shows and the HTML of its
tables. The page's output column holds :data:`OUTPUT_CHARS` characters of its
monospace font; a longer line scrolls out of sight. ``tests/test_site.py`` checks the
same in a browser, for the HTML tables too.
"""

from __future__ import annotations

import html
import json
import re

import pytest
from conftest import ROOT

from inferlab.pages import figure_rules

CHAPTERS = sorted(path.stem for path in (ROOT / "book").glob("[0-9][0-9]_*.md"))

#: Every page that runs code: the chapters, the introduction and the data appendix. The
#: appendix's tables show row ids on purpose (they are the key a reader adds rows by), so
#: the test of ids reads the chapters only.
PAGES = sorted(path.stem for path in (ROOT / "book").glob("*.md")
               if "```{code-cell}" in path.read_text(encoding="utf-8"))

#: Characters of output that fit on one line of the page: the theme sets outputs in
#: 14 px monospace (8.43 px a character) in a column 688 px wide less 16 px of padding
#: a side at a 1,280 px window, measured in Chromium on the built site.
OUTPUT_CHARS = 77

#: The most significant digits a printed number with a decimal point may have. pandas
#: shows six decimals, so an unformatted column prints 3.642857 (seven) or
#: 12345.678901 (eleven); Python prints 0.1 + 0.2 as 0.30000000000000004 (seventeen).
MAX_SIGNIFICANT = 6

DECIMAL = re.compile(r"(?<![\w.])\d+\.\d+(?![\w.])")


def _text_of(html_text: str) -> str:
    """The text an HTML output shows: not its styles, nor the data of its scripts (an
    explorer's tables, which the page formats before it shows them)."""
    shown = re.sub(r"<(style|script)\b.*?</\1>", " ", html_text, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", shown))


def shown(notebook: dict) -> list[tuple[int, str, str]]:
    """Every output a reader sees, as ``(cell index, kind, text)``: streams, the text
    of a value (its HTML's text when it has HTML, as the page shows that instead)."""
    found = []
    for index, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "code" or "remove-output" in cell["metadata"].get("tags", []) \
                or "remove-cell" in cell["metadata"].get("tags", []):
            continue
        for output in cell.get("outputs", []):
            if output["output_type"] == "stream":
                found.append((index, "text", "".join(output["text"])))
            elif output["output_type"] in ("execute_result", "display_data"):
                data = output["data"]
                if "text/html" in data:
                    found.append((index, "html", _text_of("".join(data["text/html"]))))
                elif "text/plain" in data and not any(key.startswith("image/") for key in data):
                    found.append((index, "text", "".join(data["text/plain"])))
    return found


def unrounded(text: str) -> list[str]:
    return [number for number in DECIMAL.findall(text)
            if len(number.replace(".", "").lstrip("0")) > MAX_SIGNIFICANT]


def long_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if len(line) > OUTPUT_CHARS]


def ids_in(text: str) -> list[str]:
    return sorted({word for word in re.split(r"[\s,;()\[\]'\"]+", text)
                   if word in figure_rules.row_ids()})


def test_the_checks_catch_what_the_review_found():
    assert unrounded("0.30000000000000004") == ["0.30000000000000004"]
    assert unrounded("3.642857 characters") == ["3.642857"]
    assert unrounded("12345.678901") == ["12345.678901"]
    assert unrounded("Llama 3.1 70B at 1,234.5 tok/s, 0.75 words, 2.1e-05, v5.0, "
                     "0.003913 s, 0.123457") == []
    assert _text_of('<p>0.5</p><script type="application/json">{"x": 0.1234567}</script>'
                    ).split() == ["0.5"]
    assert long_lines("x" * (OUTPUT_CHARS + 1) + "\nshort") == ["x" * (OUTPUT_CHARS + 1)]
    assert ids_in("row mlperf-v5.0-nvidia-8xb200-offline, Llama 2 70B") == [
        "mlperf-v5.0-nvidia-8xb200-offline"]


def _notebook(built_book, chapter: str) -> dict:
    path = built_book.html.parent / "jupyter_execute" / "book" / f"{chapter}.ipynb"
    assert path.is_file(), f"{path}: not executed; the log ends:\n{built_book.log[-2000:]}"
    return json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.build
@pytest.mark.parametrize("chapter", PAGES)
def test_outputs_print_rounded_numbers(built_book, chapter):
    bad = [(index, number) for index, _, text in shown(_notebook(built_book, chapter))
           for number in unrounded(text)]
    assert not bad, f"{chapter}: unrounded numbers (cell, number): {bad[:10]}"


@pytest.mark.build
@pytest.mark.parametrize("chapter", PAGES)
def test_printed_lines_fit_the_page(built_book, chapter):
    bad = [(index, line) for index, kind, text in shown(_notebook(built_book, chapter))
           if kind == "text" for line in long_lines(text)]
    assert not bad, (f"{chapter}: lines longer than {OUTPUT_CHARS} characters "
                     f"(cell, line): {bad[:5]}")


@pytest.mark.build
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_outputs_name_rows_not_ids(built_book, chapter):
    bad = [(index, ids) for index, _, text in shown(_notebook(built_book, chapter))
           if (ids := ids_in(text))]
    assert not bad, f"{chapter}: internal row ids shown to readers (cell, ids): {bad[:5]}"
