"""Build the lecture decks (reveal.js) with Sphinx, over the same project as the book.

    python scripts/build_slides.py                   # every deck -> _build/slides/
    python scripts/build_slides.py --out /tmp/slides --cache /path/to/_build/.jupyter_cache

Each chapter ``book/<chapter>.md`` has a deck ``slides/<chapter>.md``: short slides
written for a lecture, which take the chapter's figures, glued numbers and prose
(as speaker notes) through ``slides/_ext/lecture.py``. The decks are built by
sphinx-revealjs's ``revealjs`` builder with the book's own configuration and
extensions, so ``{numref}`` gives the book's numbers ("Fig. 5.3"), citations are
sphinxcontrib-bibtex's author-year text, and glue reads the chapter's executed
outputs. The chapters are executed through the book's jupyter-cache
(``_build/.jupyter_cache`` after ``jupyter-book build .``, or ``--cache``), so after
a book build nothing runs again; without a cache every chapter executes once.

The out folder is self-contained and needs no network: reveal.js comes from the
sphinx-revealjs wheel (its bundle is checked against :data:`REVEAL_SHA256`), MathJax
from ``book/_static/mathjax``. Open ``<out>/index.html``; in a deck press ``s`` for
the speaker view with the notes.
"""

from __future__ import annotations

import argparse
import hashlib
import html
import shutil
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
from book_toc import toc_chapters  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DECKS = ROOT / "slides"

# sha256 of dist/reveal.js (reveal.js 5.2.0) inside sphinx-revealjs 3.2.1 from PyPI,
# whose wheel has sha256 805bed3ca459346e0f01967d5ed1c40d6b7b917de1541e1e4566c8341fe7017b.
REVEAL_SHA256 = "46538b52db48724192f59bf46f5e851a18e302777c46f4a34c32709d010d6a29"

# The order myst-nb uses for HTML, widgets aside (a deck has no kernel).
MIME_ORDER = ["text/html", "image/svg+xml", "image/png", "image/jpeg", "text/markdown",
              "text/latex", "text/plain"]

REVEAL_CONFIG = {
    "controls": True, "progress": True, "hash": True, "center": False,
    "transition": "none", "slideNumber": "c/t", "width": 1280, "height": 800,
    "margin": 0.04,
}


def check_reveal() -> Path:
    """The reveal.js bundle sphinx-revealjs ships, refused unless it is the audited one."""
    import sphinx_revealjs

    bundle = Path(sphinx_revealjs.__file__).parent / "_static" / "revealjs" / "dist" / "reveal.js"
    digest = hashlib.sha256(bundle.read_bytes()).hexdigest()
    if digest != REVEAL_SHA256:
        raise SystemExit(f"{bundle}: sha256 {digest}, expected {REVEAL_SHA256}; install "
                         "the pinned sphinx-revealjs (pip install -c constraints.txt "
                         "sphinx-revealjs)")
    return bundle


def deck_files() -> list[Path]:
    """``slides/<chapter>.md`` for every chapter in ``_toc.yml``; a chapter without one
    is an error, so that a new chapter cannot ship without its lecture."""
    decks = [DECKS / chapter.name for chapter in toc_chapters()]
    missing = [deck.relative_to(ROOT).as_posix() for deck in decks if not deck.is_file()]
    if missing:
        raise SystemExit(f"no deck for these chapters: {', '.join(missing)}")
    return decks


def slides_toc(decks: list[Path], folder: Path) -> Path:
    """The book's table of contents with the decks as one more, unnumbered, part.

    The decks must be read with the chapters (for glue, numref and notes), and being
    last and unnumbered they leave every chapter's number as it is on the site."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf8"))
    toc["parts"].append({"caption": "Lecture decks", "chapters": [
        {"file": deck.relative_to(ROOT).with_suffix("").as_posix()} for deck in decks]})
    path = folder / "_toc.yml"
    path.write_text(yaml.safe_dump(toc, sort_keys=False), encoding="utf8")
    return path


def slides_config(folder: Path, toc: Path, cache: Path | None) -> Path:
    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf8"))
    sphinx = config.setdefault("sphinx", {})
    sphinx["extra_extensions"] = [*sphinx.get("extra_extensions", []), "sphinx_revealjs"]
    sphinx["local_extensions"] = {**sphinx.get("local_extensions", {}), "lecture": "slides/_ext"}
    settings = sphinx.setdefault("config", {})
    settings.update({
        "external_toc_path": str(toc),
        "revealjs_style_theme": "white",
        "revealjs_static_path": ["book/_static", "slides/_static"],
        "revealjs_css_files": ["lecture.css"],
        "revealjs_script_conf": REVEAL_CONFIG,
        # myst-nb picks outputs by builder name and knows only Sphinx's own builders.
        "nb_mime_priority_overrides": [
            ["revealjs", mime, rank] for rank, mime in enumerate(MIME_ORDER)],
        "revealjs_script_plugins": [
            {"name": "RevealNotes", "src": "revealjs/plugin/notes/notes.js"}],
    })
    if cache is not None:
        settings["nb_execution_cache_path"] = str(cache)
    path = folder / "_config.yml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf8")
    return path


def run_sphinx(decks: list[Path], work: Path, cache: Path | None) -> Path:
    from jupyter_book.sphinx import build_sphinx

    # jupyter-book resolves local extensions against the config's folder; ours is a copy.
    for folder in (ROOT / "book" / "_ext", ROOT / "slides" / "_ext"):
        if str(folder) not in sys.path:
            sys.path.insert(0, str(folder))
    toc = slides_toc(decks, work)
    config = slides_config(work, toc, cache)
    built = work / "revealjs"
    status = build_sphinx(ROOT, built, path_config=str(config), builder="revealjs", noconfig=True,
                          confoverrides={"latex_individualpages": False},
                          doctreedir=work / "doctrees", freshenv=True, warningiserror=True,
                          keep_going=True, quiet=True)
    if status != 0:
        raise SystemExit(f"the deck build failed ({status}); its warnings are above")
    return built


def collect(built: Path, out: Path, decks: list[Path]) -> list[Path]:
    """The decks and what they load into ``out``; the chapters rendered as decks are not."""
    shutil.rmtree(out, ignore_errors=True)
    (out / "slides").mkdir(parents=True)
    for name in ("_static", "_images"):
        if (built / name).is_dir():
            shutil.copytree(built / name, out / name)
    written = []
    for deck in decks:
        page = built / "slides" / f"{deck.stem}.html"
        shutil.copy(page, out / "slides" / page.name)
        written.append(out / "slides" / page.name)
    items = "\n".join(
        f'<li><a href="slides/{page.name}">{html.escape(page.stem)}</a></li>'
        for page in written)
    (out / "index.html").write_text(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<title>Lecture decks</title></head>\n<body><h1>Lecture decks</h1>\n"
        "<p>Open a deck; press <kbd>s</kbd> for the speaker view and its notes, "
        "<kbd>?</kbd> for the other keys.</p>\n<ul>\n"
        f"{items}\n</ul></body></html>\n", encoding="utf8")
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "slides",
                        help="output folder (default: _build/slides)")
    parser.add_argument("--cache", type=Path, default=None,
                        help="the book build's jupyter-cache (default: _build/.jupyter_cache)")
    args = parser.parse_args(argv)
    check_reveal()
    decks = deck_files()
    cache = args.cache.resolve() if args.cache else ROOT / "_build" / ".jupyter_cache"
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="inferlab-slides-") as folder:
        built = run_sphinx(decks, Path(folder), cache)
        written = collect(built, args.out.resolve(), decks)
    elapsed = time.perf_counter() - start
    for page in written:
        text = page.read_text(encoding="utf8")
        print(f"{page}: {text.count('<section') - text.count('<section><section')} "
              f"sections, {len(text.encode()) / 1e3:.0f} kB")
    print(f"{len(written)} decks in {elapsed:.0f} s; open {args.out.resolve() / 'index.html'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
