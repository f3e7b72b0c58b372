"""Rebuild the four OpenAI tiktoken encodings that ship inside ``inferlab``.

Why: the book must run with no network, but the Python ``tiktoken`` package
downloads its encoding files from ``openaipublic.blob.core.windows.net`` the
first time ``tiktoken.get_encoding(name)`` is called. ``inferlab/__init__.py``
points ``TIKTOKEN_CACHE_DIR`` at ``inferlab/tiktoken_cache/``; this script fills
that folder so tiktoken finds the files there and never downloads anything.

Where the data comes from: the npm package ``tiktoken`` version 1.0.22 (the
JS/WASM bindings by dqbd, https://github.com/dqbd/tiktoken, license MIT per its
``package.json``; the tarball ships no separate LICENSE file). Get the tarball,
without installing anything, with::

    cd /tmp && npm pack tiktoken@1.0.22      # writes tiktoken-1.0.22.tgz

then run, from the repository root::

    python scripts/build_tiktoken_cache.py /tmp/tiktoken-1.0.22.tgz

Format: the tarball's ``package/encoders/<name>.json`` holds a ``bpe_ranks``
string of newline-separated lines ``! OFFSET tok1 tok2 ...``: the base64 tokens
``tok1, tok2, ...`` have the consecutive ranks ``OFFSET, OFFSET+1, ...``. (Two
lines for ``p50k_base``, because rank 50256 is the special ``<|endoftext|>``
and is not a mergeable token; one line for the other three.) The original
``<name>.tiktoken`` file is one line ``base64token rank\\n`` per token in rank
order, so we expand the lines back into that.

Checks: every rebuilt file must have exactly the sha256 that the *installed*
Python tiktoken expects (read from ``tiktoken_ext.openai_public``, not typed in
here), which is the same check tiktoken makes before using a cached file. Any
mismatch exits non-zero naming the encoding, and nothing is written.

Output: ``inferlab/tiktoken_cache/<sha1 of the URL>`` for each encoding, the
file name tiktoken's ``tiktoken.load.read_file_cached`` looks for, plus a
``README.md`` listing the files. ``pyproject.toml`` ships them as package data
(``[tool.setuptools.package-data] inferlab = ["tiktoken_cache/*"]``).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
import tarfile
from pathlib import Path
from unittest import mock

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "inferlab" / "tokens" / "tiktoken_cache"
NPM_NAME = "tiktoken"
NPM_VERSION = "1.0.22"
# Oldest first: GPT-3, Codex/GPT-3.5 completions, GPT-3.5/4, GPT-4o.
ENCODINGS = ("r50k_base", "p50k_base", "cl100k_base", "o200k_base")


class _Recorded(Exception):
    """Raised by the stand-in loader once it has seen the URL and hash."""

    def __init__(self, url: str, expected_hash: str | None) -> None:
        super().__init__(url)
        self.url = url
        self.expected_hash = expected_hash


def _record(url: str, expected_hash: str | None = None) -> dict[bytes, int]:
    raise _Recorded(url, expected_hash)


def expected_source(name: str) -> tuple[str, str]:
    """Return (URL, sha256 hex) that the installed tiktoken uses for ``name``.

    Runs tiktoken's own constructor for the encoding with ``load_tiktoken_bpe``
    replaced by a recorder, so the values are exactly tiktoken's, whatever its
    version, and nothing is downloaded.
    """
    from tiktoken_ext import openai_public

    constructor = openai_public.ENCODING_CONSTRUCTORS[name]
    with mock.patch.object(openai_public, "load_tiktoken_bpe", _record):
        try:
            constructor()
        except _Recorded as seen:
            if not seen.expected_hash:
                raise SystemExit(f"{name}: tiktoken gives no expected sha256") from None
            return seen.url, seen.expected_hash
    raise SystemExit(f"{name}: tiktoken does not load it with load_tiktoken_bpe")


def cache_file_name(url: str) -> str:
    """The name tiktoken gives a cached download: sha1 hex of the URL."""
    return hashlib.sha1(url.encode()).hexdigest()


def parse_bpe_ranks(name: str, bpe_ranks: str) -> list[tuple[str, int]]:
    """Expand ``! OFFSET tok1 tok2 ...`` lines into (base64 token, rank) pairs."""
    pairs: list[tuple[str, int]] = []
    for line_no, line in enumerate(bpe_ranks.split("\n"), start=1):
        if not line:
            continue
        marker, offset, *tokens = line.split(" ")
        if marker != "!" or not offset.isdigit():
            raise SystemExit(f"{name}: bpe_ranks line {line_no} does not start '! OFFSET'")
        start = int(offset)
        if pairs and start <= pairs[-1][1]:
            raise SystemExit(f"{name}: bpe_ranks line {line_no} goes back to rank {start}")
        pairs.extend((token, start + i) for i, token in enumerate(tokens))
    return pairs


def tiktoken_file_bytes(pairs: list[tuple[str, int]]) -> bytes:
    """The ``.tiktoken`` format: ``base64token rank\\n`` per token, in rank order."""
    return "".join(f"{token} {rank}\n" for token, rank in pairs).encode("ascii")


def read_package(tarball: Path) -> tuple[dict, dict[str, dict]]:
    """Return (package.json, {encoding name: encoders/<name>.json}) from the tarball."""
    with tarfile.open(tarball, "r:gz") as tar:

        def load(member: str) -> dict:
            handle = tar.extractfile(f"package/{member}")
            if handle is None:
                raise SystemExit(f"{tarball}: package/{member} is not a file")
            return json.load(handle)

        package = load("package.json")
        encoders = {name: load(f"encoders/{name}.json") for name in ENCODINGS}
    return package, encoders


def file_digest(path: Path, algorithm: str) -> bytes:
    return hashlib.new(algorithm, path.read_bytes()).digest()


def readme_text(rows: list[dict], package: dict, tarball: Path) -> str:
    integrity = "sha512-" + base64.b64encode(file_digest(tarball, "sha512")).decode()
    lines = [
        "# Bundled tiktoken encodings",
        "",
        "Generated by `scripts/build_tiktoken_cache.py`; do not edit by hand.",
        "",
        "`import inferlab` sets `TIKTOKEN_CACHE_DIR` to this folder (unless you set it",
        "yourself), so `tiktoken.get_encoding(name)` reads these files instead of",
        "downloading them. Each file is named by the sha1 hex of the URL tiktoken would",
        "download it from, which is how `tiktoken.load.read_file_cached` names its cache,",
        "and tiktoken checks each file's sha256 before using it.",
        "",
        "Caution: if a file here ever fails tiktoken's sha256 check, tiktoken deletes it",
        "and tries to download it again. Rebuild with the script rather than editing.",
        "",
        "| file | encoding | URL | sha256 | bytes | tokens |",
        "|---|---|---|---|---|---|",
    ]
    for row in rows:
        lines.append(
            f"| `{row['file']}` | {row['name']} | {row['url']} | `{row['sha256']}` "
            f"| {row['bytes']} | {row['tokens']} |"
        )
    lines += [
        "",
        "`p50k_edit` and `o200k_harmony` reuse the `p50k_base` and `o200k_base` files, so",
        "they load offline too. `gpt2` does not: tiktoken builds it from two other files",
        "(`vocab.bpe` and `encoder.json`) that are not bundled.",
        "",
        "## Source and license",
        "",
        f"- Source: the npm package `{package['name']}@{package['version']}`",
        f"  ({package.get('repository', {}).get('url', 'https://github.com/dqbd/tiktoken')}),",
        "  files `package/encoders/<name>.json`, field `bpe_ranks`. Obtain it with",
        f"  `npm pack {NPM_NAME}@{NPM_VERSION}`; the tarball used had npm integrity",
        f"  `{integrity}`",
        f"  (compare `npm view {NPM_NAME}@{NPM_VERSION} dist.integrity`).",
        f"- License of the npm package: {package.get('license', 'unknown')} (declared in its",
        "  `package.json`; the tarball contains no separate LICENSE file).",
        "- The encodings are OpenAI's, published with the Python `tiktoken` package",
        "  (https://github.com/openai/tiktoken), license MIT.",
        "- The bytes are identical to OpenAI's published files: each sha256 above is the",
        "  one the installed Python tiktoken (`tiktoken_ext/openai_public.py`) expects.",
        "",
    ]
    return "\n".join(lines)


def build(tarball: Path, out_dir: Path) -> list[dict]:
    """Rebuild, verify all four files, then write them and the README."""
    package, encoders = read_package(tarball)
    if package.get("name") != NPM_NAME:
        raise SystemExit(f"{tarball}: package is {package.get('name')!r}, not {NPM_NAME!r}")
    if package.get("version") != NPM_VERSION:
        print(
            f"warning: {tarball} is {NPM_NAME}@{package.get('version')}, "
            f"documented source is {NPM_VERSION}; the sha256 checks still apply",
            file=sys.stderr,
        )

    rows, contents, failures = [], {}, []
    for name in ENCODINGS:
        url, expected = expected_source(name)
        pairs = parse_bpe_ranks(name, encoders[name]["bpe_ranks"])
        data = tiktoken_file_bytes(pairs)
        got = hashlib.sha256(data).hexdigest()
        if got != expected:
            failures.append(f"{name}: sha256 {got} != tiktoken's expected {expected}")
            continue
        file_name = cache_file_name(url)
        contents[file_name] = data
        rows.append(
            dict(name=name, url=url, sha256=got, file=file_name, bytes=len(data), tokens=len(pairs))
        )
    if failures:
        raise SystemExit("hash mismatch, nothing written:\n  " + "\n  ".join(failures))

    out_dir.mkdir(parents=True, exist_ok=True)
    for file_name, data in contents.items():
        (out_dir / file_name).write_bytes(data)
    (out_dir / "README.md").write_text(readme_text(rows, package, tarball), encoding="utf-8")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tarball", type=Path, help=f"output of `npm pack {NPM_NAME}@{NPM_VERSION}`")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="cache folder to write")
    args = parser.parse_args(argv)
    for row in build(args.tarball, args.out):
        print(f"{row['name']:<12} {row['file']} {row['bytes']:>9} bytes sha256 {row['sha256']} ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
