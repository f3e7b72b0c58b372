"""Build a reveal.js slide deck from each chapter, to open offline in a browser.

    python scripts/build_slides.py                      # every chapter in _toc.yml
    python scripts/build_slides.py book/04_tokenizers.md --out /tmp/slides

A chapter is a ``_toc.yml`` file whose name starts with two digits. Each one is read
with jupytext, executed afresh with nbclient in ``book/`` (so relative paths resolve
as in the book build), turned into slides by ``scripts/myst_to_slides.py`` (headings
start slides, glued numbers are filled in, solutions and hidden cells are dropped,
plotting code is hidden and its figure kept) and exported with nbconvert's
``SlidesExporter`` to ``<out>/<chapter>.slides.html`` (default out:
``_build/slides``). Figures are embedded in the deck as base64 images.

The out folder is self-contained and needs no network: reveal.js 4.0.2 (vendored in
``slides/reveal.js`` by ``scripts/vendor_revealjs.sh``) and MathJax (vendored in
``book/_static/mathjax``) are copied next to the decks, and the template drops the
CDN scripts nbconvert's reveal template would load (require.js, jQuery, mermaid,
Jupyter widgets, MathJax 2). Open ``<out>/index.html`` or a deck directly from disk;
press ``s`` for speaker view, ``?`` for keys.
"""

from __future__ import annotations

import argparse
import html
import shutil
import sys
import time
from pathlib import Path

import jupytext
from jinja2 import DictLoader
from nbclient import NotebookClient
from nbconvert import SlidesExporter
from traitlets.config import Config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from book_toc import toc_chapters  # noqa: E402
from myst_to_slides import author_year, slide_notebook  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
REVEAL = ROOT / "slides" / "reveal.js"
MATHJAX = ROOT / "book" / "_static" / "mathjax"
TIMEOUT = 1800  # seconds per cell; measurement cells time this machine

# nbconvert's reveal template with everything it would fetch from a CDN replaced by
# the copies next to the deck, and reveal.js started without require.js.
TEMPLATE = r"""{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mathjax -%}
<script>
window.MathJax = {
  tex: {inlineMath: [['$', '$'], ['\\(', '\\)']], displayMath: [['$$', '$$'], ['\\[', '\\]']],
        processEscapes: true, tags: 'ams'},
  chtml: {fontURL: 'mathjax/output/chtml/fonts/woff-v2'}
};
</script>
<script src="mathjax/tex-chtml.js" id="MathJax-script" async></script>
<style type="text/css">
.reveal .jp-RenderedImage img, .reveal .jp-OutputArea-output img {
  max-height: 520px; width: auto; display: block; margin: 0 auto; }
.reveal p.caption { font-size: 15px; line-height: 1.3; color: #444; margin-top: 0.3em; }
.reveal blockquote { width: 90%; font-size: 0.95em; text-align: left; }
.reveal .slides section { text-align: left; }
</style>
{%- endblock html_head_js_mathjax -%}
{% block footer_js %}
<script src="{{ resources.reveal.url_prefix }}/dist/reveal.js"></script>
<script src="{{ resources.reveal.url_prefix }}/plugin/notes/notes.js"></script>
<script>
Reveal.initialize({
  controls: true, progress: true, history: true, center: false,
  transition: "{{ resources.reveal.transition }}",
  slideNumber: "{{ resources.reveal.number }}",
  width: {{ resources.reveal.width }}, height: {{ resources.reveal.height }},
  plugins: [RevealNotes]
});
</script>
{% endblock footer_js %}
"""


def citations(bib: Path = ROOT / "book" / "references.bib") -> dict[str, str]:
    """``{key: "Author et al. (year)"}`` for the book's bibliography (empty without it)."""
    if not bib.is_file():
        return {}
    from pybtex.database import parse_file

    return {key: author_year(entry) for key, entry in parse_file(str(bib)).entries.items()}


def execute(chapter: Path, timeout: int = TIMEOUT):
    """The chapter read with jupytext and executed in its own folder."""
    nb = jupytext.read(chapter)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(chapter.parent)}})
    client.execute()
    return nb


def exporter() -> SlidesExporter:
    config = Config()
    config.SlidesExporter.reveal_url_prefix = "reveal.js"
    config.SlidesExporter.reveal_theme = "white"
    config.SlidesExporter.reveal_transition = "none"
    config.SlidesExporter.reveal_number = "c/t"
    config.SlidesExporter.reveal_width = "1100"
    config.SlidesExporter.reveal_height = "760"
    config.SlidesExporter.exclude_input_prompt = True
    config.SlidesExporter.exclude_output_prompt = True
    config.TagRemovePreprocessor.enabled = True
    config.TagRemovePreprocessor.remove_input_tags = ["hide-input", "remove-input"]
    slides = SlidesExporter(config=config, extra_loaders=[DictLoader({"offline.j2": TEMPLATE})])
    slides.template_file = "offline.j2"
    return slides


def build_deck(chapter: Path, out: Path, cites: dict[str, str] | None = None) -> Path:
    """Execute ``chapter`` and write its deck to ``<out>/<chapter>.slides.html``."""
    nb = execute(chapter)
    slides = slide_notebook(nb, cites if cites is not None else citations())
    title = next((line.lstrip("# ").strip() for line in chapter.read_text(
        encoding="utf8").splitlines() if line.startswith("# ")), chapter.stem)
    slides.metadata["title"] = title
    body, _ = exporter().from_notebook_node(slides, resources={"metadata": {"name": title}})
    deck = out / f"{chapter.stem}.slides.html"
    deck.write_text(body, encoding="utf8")
    return deck


def copy_assets(out: Path) -> None:
    """reveal.js and MathJax next to the decks, so that the folder works on its own."""
    for source, name in ((REVEAL, "reveal.js"), (MATHJAX, "mathjax")):
        if not source.is_dir():
            raise FileNotFoundError(f"{source} is missing; run scripts/vendor_"
                                    f"{'revealjs' if name == 'reveal.js' else 'mathjax'}.sh")
        shutil.rmtree(out / name, ignore_errors=True)
        shutil.copytree(source, out / name)


def write_index(out: Path, decks: list[Path]) -> None:
    items = "\n".join(
        f'<li><a href="{deck.name}">{html.escape(deck.name.removesuffix(".slides.html"))}</a></li>'
        for deck in sorted(out.glob("*.slides.html")))
    (out / "index.html").write_text(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<title>Slides</title></head>\n<body><h1>Slide decks</h1>\n<ul>\n"
        f"{items}\n</ul></body></html>\n", encoding="utf8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chapters", nargs="*", type=Path,
                        help="chapter .md files (default: every chapter in _toc.yml)")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "slides",
                        help="output folder (default: _build/slides)")
    args = parser.parse_args(argv)
    chapters = [c.resolve() for c in args.chapters] or toc_chapters()
    for chapter in chapters:
        if not chapter.is_file():
            parser.error(f"chapter: no such file {chapter}")
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    copy_assets(out)
    cites = citations()
    decks = []
    for chapter in chapters:
        start = time.perf_counter()
        deck = build_deck(chapter, out, cites)
        decks.append(deck)
        text = deck.read_text(encoding="utf8")
        print(f"{deck}: {text.count('<section')} slides, "
              f"{len(text.encode()) / 1e6:.1f} MB, {time.perf_counter() - start:.0f} s")
    write_index(out, decks)
    print(f"\nOpen {out / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
