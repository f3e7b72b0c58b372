"""Turn an executed MyST chapter notebook into a slide notebook (used by build_slides.py).

Everything here is pure: it takes an executed ``nbformat`` notebook (read from a
chapter with jupytext and run with nbclient) and returns a new notebook whose cells
carry reveal.js slide metadata and hold plain Markdown that nbconvert can render:

- ``{glue:text}`key:fmt``` and ``{glue:md}`key``` are replaced by the values the
  executed notebook glued (myst-nb stores them as ``display_data`` outputs whose
  metadata is ``{"scrapbook": {"name": key, ...}}`` and whose data is under
  ``application/papermill.record/<mime>``), formatted the way myst-nb formats them;
- ``{term}`x <target>``` becomes ``x``, ``{cite:p}`` disappears, ``{cite:t}``
  becomes "Author et al. (year)" when the bibliography is given, ``{numref}`fig-x```
  becomes "Fig. N" (figures numbered in page order, as in the book);
- admonitions become block quotes with a bold title, an exercise becomes a
  ``### Exercise: title`` sub-slide, and every solution (plain or gated
  ``solution-start`` ... ``solution-end``, code cells inside included) is dropped;
- code cells tagged ``remove-cell`` or ``remove-output`` are dropped, glue and
  widget outputs and stderr are dropped, and a figure's caption follows its image.

Slide types: a ``#``/``##`` heading starts a slide, ``###`` and deeper a sub-slide;
prose continues the current slide until about :data:`SLIDE_CHARS` characters, then
continues on a new sub-slide (a paragraph ending in a colon keeps the next one with
it); a figure starts a sub-slide, short code shares the slide of the prose above it,
and whatever follows code starts a new sub-slide.
"""

from __future__ import annotations

import copy
import re
from ast import literal_eval
from collections.abc import Callable, Iterable

import nbformat

#: Characters of prose that fit on one slide before the text continues on a sub-slide.
SLIDE_CHARS = 900

GLUE_PREFIX = "application/papermill.record/"
DROPPED_TAGS = {"remove-cell", "remove-output"}
HIDDEN_INPUT_TAGS = {"hide-input", "remove-input"}

_ROLE = re.compile(r"\{([a-zA-Z][\w:+-]*)\}`([^`]*)`")
_FENCE_OPEN = re.compile(r"^(?P<fence>`{3,}|:{3,})\{(?P<name>[\w:-]+)\}[ \t]*(?P<arg>.*)$")
_PLAIN_FENCE = re.compile(r"^(`{3,}|~{3,})")
_OPTION = re.compile(r"^:([\w-]+):[ \t]*(.*)$")
_HEADING = re.compile(r"^(#{1,6})\s")


# --------------------------------------------------------------------------- glue


def glue_values(nb) -> dict[str, dict[str, str]]:
    """Every glued value of an executed notebook: ``{key: {mime type: data}}``."""
    values: dict[str, dict[str, str]] = {}
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            scrap = output.get("metadata", {}).get("scrapbook")
            if not scrap:
                continue
            prefix = scrap.get("mime_prefix", GLUE_PREFIX)
            values[scrap["name"]] = {
                mime[len(prefix):]: data for mime, data in output.get("data", {}).items()
                if mime.startswith(prefix)
            }
    return values


def format_plain(text: str, fmt_spec: str) -> str:
    """A glued ``text/plain`` value formatted as myst-nb's ``{glue:text}`` does."""
    try:
        value = literal_eval(text)
    except (SyntaxError, ValueError):
        value = text
    if fmt_spec == "":
        return str(value)
    kind = fmt_spec[-1]
    if kind == "s":
        value = str(value)
    elif kind in "bcdoxX":
        value = int(value)
    elif kind in "eEfFgGn%":
        value = float(value)
    return format(value, fmt_spec)


def _glue_text(role: str, content: str, glue: dict[str, dict[str, str]]) -> str:
    if role == "glue:md":
        key = content.split(":", 1)[0]
    else:
        key, _, fmt_spec = content.rpartition(":") if ":" in content else (content, "", "")
    if key not in glue:
        raise KeyError(f"glue key {key!r} is not glued by the notebook")
    data = glue[key]
    if role == "glue:md" and "text/markdown" in data:
        return str(data["text/markdown"])
    plain = str(data.get("text/plain", ""))
    if role == "glue:md":
        return format_plain(plain, "")
    return format_plain(plain, fmt_spec if ":" in content else "")


# --------------------------------------------------------------------------- roles


def author_year(entry) -> str:
    """``Author (year)``, ``A and B (year)`` or ``A et al. (year)`` for a pybtex entry."""
    people = entry.persons.get("author", [])
    names = [" ".join(p.last_names).replace("{", "").replace("}", "") for p in people]
    if not names:
        who = entry.fields.get("author", "").strip("{}") or entry.key
    elif len(names) == 1:
        who = names[0]
    elif len(names) == 2:
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who} ({entry.fields.get('year', 'n.d.')})"


def _target_text(content: str) -> str:
    """``text`` of a role written ``text <target>``, else the content itself."""
    match = re.match(r"^(.*?)\s*<[^<>]+>$", content, re.DOTALL)
    return match.group(1) if match else content


def resolve_roles(text: str, glue: dict[str, dict[str, str]] | None = None,
                  figures: dict[str, int] | None = None,
                  citations: dict[str, str] | None = None) -> str:
    """``text`` with every MyST role replaced by plain text (see the module docstring).

    A glue key the notebook did not glue raises ``KeyError``, as it fails the book build.
    """
    glue = glue or {}
    figures = figures or {}
    citations = citations or {}

    def replace(match: re.Match) -> str:
        role, content = match.group(1), match.group(2)
        if role.startswith("glue"):
            return _glue_text(role, content, glue)
        if role == "cite:p" or role == "cite:ps":
            return "\0"  # removed below, with the space before it
        if role.startswith("cite"):
            keys = [k.strip() for k in content.split(",")]
            return "; ".join(citations.get(k, k) for k in keys)
        if role == "numref":
            label = _target_text(content)
            target = content[len(label):].strip(" <>") or content
            number = figures.get(target)
            if label != content and "%s" in label:
                return label.replace("%s", str(number) if number else "")
            return f"Fig. {number}" if number else "Fig."
        return _target_text(content)

    text = _ROLE.sub(replace, text)
    text = re.sub(r"[ \t]*\0", "", text)
    # A citation removed before punctuation or at the end of a bracket leaves "( )" or " ,".
    return re.sub(r"\(\s*\)", "", text)


# --------------------------------------------------------------------------- directives


def _quote(title: str, body: list[str]) -> list[str]:
    lines = [f"> **{title}**" if title else ">", ">"]
    lines += [f"> {line}" if line.strip() else ">" for line in body]
    return lines


class Converter:
    """Directive conversion that remembers, across cells, whether it is inside a solution."""

    def __init__(self) -> None:
        self.in_solution = False

    def markdown(self, text: str) -> str:
        """MyST directives of one markdown cell turned into plain Markdown."""
        lines = text.splitlines()
        out: list[str] = []
        i = 0
        plain_fence = None
        while i < len(lines):
            line = lines[i]
            if plain_fence:
                if line.startswith(plain_fence):
                    plain_fence = None
                if not self.in_solution:
                    out.append(line)
                i += 1
                continue
            opening = _FENCE_OPEN.match(line)
            if not opening:
                fence = _PLAIN_FENCE.match(line)
                if fence:
                    plain_fence = fence.group(1)
                if not self.in_solution:
                    out.append(line)
                i += 1
                continue
            fence, name, arg = opening.group("fence"), opening.group("name"), opening.group("arg")
            end = i + 1
            while end < len(lines) and lines[end].rstrip() != fence:
                end += 1
            block = lines[i + 1:end]
            i = end + 1
            options: dict[str, str] = {}
            while block and _OPTION.match(block[0]):
                key, value = _OPTION.match(block[0]).groups()
                options[key] = value
                block = block[1:]
            if name == "solution-start":
                self.in_solution = True
            elif name == "solution-end":
                self.in_solution = False
            elif self.in_solution or name == "solution":
                continue
            elif name == "exercise":
                title = f"Exercise: {arg}" if arg else "Exercise"
                out += ["", f"### {title}", "", *self.markdown("\n".join(block)).splitlines()]
            elif name in ("math",):
                out += ["$$", *block, "$$"]
            else:
                title = arg or ("" if name == "admonition" else name.capitalize())
                out += _quote(title, self.markdown("\n".join(block)).splitlines())
        return "\n".join(out)


# --------------------------------------------------------------------------- slides


def split_blocks(text: str) -> list[str]:
    """Markdown split into headings and paragraphs; fenced code and math stay whole."""
    blocks: list[list[str]] = [[]]
    fence = None
    in_math = False
    for line in text.splitlines():
        stripped = line.strip()
        if fence is None and not in_math:
            if _HEADING.match(line):
                blocks += [[line], []]
                continue
            if not stripped:
                blocks.append([])
                continue
        blocks[-1].append(line)
        if fence:
            if stripped.startswith(fence):
                fence = None
        elif stripped.startswith("$$"):
            in_math = not in_math if stripped == "$$" or stripped.count("$$") == 1 else in_math
        else:
            match = _PLAIN_FENCE.match(stripped)
            if match:
                fence = match.group(1)
    return ["\n".join(block) for block in blocks if any(s.strip() for s in block)]


def _kept_outputs(outputs: Iterable[dict]) -> list[dict]:
    kept = []
    for output in outputs:
        if output.get("metadata", {}).get("scrapbook"):
            continue
        if output.get("output_type") == "stream" and output.get("name") == "stderr":
            continue
        data = output.get("data")
        if data is not None:
            data = {mime: value for mime, value in data.items()
                    if not mime.startswith(GLUE_PREFIX)
                    and mime != "application/vnd.jupyter.widget-view+json"}
            if not data or set(data) == {"text/plain"} and str(
                    data["text/plain"]).startswith(("<Figure size", "<IPython")):
                continue
            output = copy.deepcopy(output)
            output["data"] = data
        kept.append(output)
    return kept


def figure_numbers(nb) -> dict[str, int]:
    """``{figure name: number}`` for the code cells with ``mystnb: figure`` metadata."""
    numbers: dict[str, int] = {}
    for cell in nb.cells:
        figure = cell.get("metadata", {}).get("mystnb", {}).get("figure")
        if cell.cell_type == "code" and figure:
            numbers[figure.get("name", f"figure-{len(numbers) + 1}")] = len(numbers) + 1
    return numbers


def slide_notebook(nb, citations: dict[str, str] | None = None,
                   slide_chars: int = SLIDE_CHARS) -> nbformat.NotebookNode:
    """A new notebook: the executed chapter ``nb`` as slides (see the module docstring)."""
    glue = glue_values(nb)
    figures = figure_numbers(nb)
    resolve: Callable[[str], str] = lambda text: resolve_roles(  # noqa: E731
        text, glue, figures, citations)
    converter = Converter()
    cells: list = []
    used = 0  # characters of prose on the current slide
    follows_colon = False  # a paragraph ending in ":" keeps what it introduces with it

    def add_markdown(text: str, slide_type: str) -> None:
        cells.append(nbformat.v4.new_markdown_cell(
            text, metadata={"slideshow": {"slide_type": slide_type}}))

    for cell in nb.cells:
        tags = set(cell.get("metadata", {}).get("tags", []))
        if cell.cell_type == "markdown":
            text = resolve(converter.markdown(cell.source))
            for block in split_blocks(text):
                heading = _HEADING.match(block)
                if heading:
                    slide_type = "slide" if len(heading.group(1)) <= 2 else "subslide"
                    used = 0
                elif not cells or (used + len(block) > slide_chars and not follows_colon):
                    slide_type, used = "subslide", 0
                else:
                    slide_type = "-"
                used += len(block)
                follows_colon = block.rstrip().endswith(":")
                add_markdown(block, slide_type)
            continue
        if cell.cell_type != "code" or converter.in_solution or tags & DROPPED_TAGS:
            continue
        outputs = _kept_outputs(cell.get("outputs", []))
        hide_input = bool(tags & HIDDEN_INPUT_TAGS)
        if hide_input and not outputs:
            continue
        has_image = any(mime.startswith("image/") for output in outputs
                        for mime in output.get("data", {}))
        # Short code under a short paragraph shares its slide; figures get their own.
        fits = used and used + len(cell.source) + 400 <= slide_chars and not has_image
        new = nbformat.v4.new_code_cell(cell.source, metadata={
            "slideshow": {"slide_type": "-" if fits else "subslide"},
            "tags": sorted(tags & HIDDEN_INPUT_TAGS)})
        new.outputs = outputs
        new.execution_count = cell.get("execution_count")
        cells.append(new)
        used = slide_chars  # what follows a code cell starts a new sub-slide
        follows_colon = False
        figure = cell.get("metadata", {}).get("mystnb", {}).get("figure")
        if figure and figure.get("caption"):
            number = figures.get(figure.get("name"), "")
            caption = " ".join(resolve(figure["caption"]).split())
            add_markdown(f'<p class="caption"><b>Fig. {number}.</b> {caption}</p>', "-")

    slides = nbformat.v4.new_notebook(cells=cells)
    slides.metadata = {key: copy.deepcopy(value) for key, value in nb.metadata.items()
                       if key in ("kernelspec", "language_info")}
    return slides
