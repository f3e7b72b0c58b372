"""The chapters listed in ``_toc.yml``, for the scripts that turn chapters into other forms."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def toc_chapters(toc_file: Path = ROOT / "_toc.yml") -> list[Path]:
    """The chapter files of the table of contents: names that start with two digits."""
    toc = yaml.safe_load(toc_file.read_text(encoding="utf8"))
    files: list[str] = []

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    walk(toc.get("parts", []))
    walk(toc.get("chapters", []))
    root = toc_file.parent
    return [root / f"{name}.md" for name in files if re.match(r"\d\d", Path(name).name)]
