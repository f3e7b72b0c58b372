"""Build the student or the instructor edition of the book from the same sources.

    python scripts/build_edition.py student      # solutions removed
    python scripts/build_edition.py instructor   # solutions shown expanded

It merges ``editions/<edition>.yml`` over ``_config.yml`` (nested keys merge, lists
and values are replaced), writes the result to ``_build/<edition>/_config.yml`` and
runs ``jupyter-book build`` with it; the site lands in
``_build/<edition>/_build/html``. Extra arguments (``-W -n --keep-going``, say) are
passed on to jupyter-book. ``--source`` builds another book folder (the tests use
a one-page book).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
EDITIONS = ("student", "instructor")

# jupyter-book's CLI module has no __main__ guard, so "-m" would silently do nothing.
JUPYTER_BOOK = [sys.executable, "-c", "from jupyter_book.cli.main import main; main()"]


def merge(base: dict, override: dict) -> dict:
    """``base`` updated by ``override``, recursively for nested mappings."""
    result = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(result.get(key), dict):
            result[key] = merge(result[key], value)
        else:
            result[key] = value
    return result


def edition_config(edition: str, source: Path = ROOT) -> dict:
    """The merged configuration of ``edition`` for the book in ``source``."""
    if edition not in EDITIONS:
        raise ValueError(f"edition: {edition!r} is not one of {', '.join(EDITIONS)}")
    base = yaml.safe_load((source / "_config.yml").read_text(encoding="utf8"))
    override = yaml.safe_load((ROOT / "editions" / f"{edition}.yml").read_text(encoding="utf8"))
    config = merge(base, override)
    # jupyter-book resolves local extension folders against the config file's folder,
    # and the merged file is written elsewhere, so make them absolute.
    extensions = config.get("sphinx", {}).get("local_extensions") or {}
    for name, folder in extensions.items():
        extensions[name] = str((source / folder).resolve())
    return config


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("edition", choices=EDITIONS)
    parser.add_argument("--source", type=Path, default=ROOT, help="the book's folder")
    parser.add_argument("--out", type=Path, default=None,
                        help="output folder (default: <source>/_build/<edition>)")
    args, extra = parser.parse_known_args(argv)
    source = args.source.resolve()
    out = (args.out or source / "_build" / args.edition).resolve()
    out.mkdir(parents=True, exist_ok=True)
    config = out / "_config.yml"
    config.write_text(yaml.safe_dump(edition_config(args.edition, source), sort_keys=False),
                      encoding="utf8")
    command = [*JUPYTER_BOOK, "build", str(source), "--config", str(config),
               "--path-output", str(out), *extra]
    code = subprocess.call(command, cwd=source)
    print(f"\n{args.edition} edition: {out / '_build' / 'html' / 'index.html'}")
    return code


if __name__ == "__main__":
    sys.exit(main())
