"""Remembered results: a slow, deterministic computation stored under a key that changes
whenever anything it could depend on changes.

The book's build predicts a few thousand configurations (the calibration page, the
accuracy page, the sizing explorer's grid), minutes of simulation that give the same
answer every time the code and the tables are the same. :func:`remembered` keeps each
answer in a folder of JSON files, one per call, named by a key made of

- the function's name and its arguments, every field of every object among them
  (:func:`canonical`; an argument it cannot spell out exactly is refused, never
  guessed), and
- the *fingerprint* of its inputs: the source of every module of the package the
  function's module imports, directly or through others, and every file of the tables
  (:func:`fingerprint`).

Edit one of those modules or a table and every key changes: nothing stored before is used
again. (An edit of the pages, the lab or the command lines changes no key.)

It is off unless the environment turns it on, so a reader's own call always computes.
``INFERLAB_RESULTS`` names the folder (the book's build sets it to ``book/_computed``,
``book/_ext/freshness.py``) and ``INFERLAB_RESULTS_MODE`` says how to use it:

``use`` (the default)
    return the stored answer if there is one; otherwise compute it and store it.
``read``
    return the stored answer if there is one; otherwise compute it and store nothing.
    The tests read the book's store this way (``tests/test_explorers.py``), so that they
    never add an answer the check below should have found missing.
``check``
    always compute. A stored answer must equal the new one exactly, or
    :class:`ChangedResult` is raised (the computation is not deterministic, or the key
    misses an input); a missing one is stored, and its key is appended to the file
    ``INFERLAB_RESULTS_MISSES`` names, if any. The tests build the book this way, so
    CI recomputes every number and fails if the stored answers are not those of the
    code as committed (``tests/test_results_store.py``).

Used by :func:`inferlab.predict.predict`.
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import json
import math
import os
import tempfile
import types
from collections.abc import Callable
from functools import cache
from pathlib import Path

import numpy as np

#: The environment variables that turn the store on (see the module docstring).
FOLDER_ENV = "INFERLAB_RESULTS"
MODE_ENV = "INFERLAB_RESULTS_MODE"
MISSES_ENV = "INFERLAB_RESULTS_MISSES"
MODES = ("use", "read", "check")

_PACKAGE = Path(__file__).resolve().parents[1]
_THIS_FILE = Path(__file__).resolve()


class ChangedResult(ValueError):
    """A recomputed answer differs from the one stored under the same key."""


def _tables_folder() -> Path:
    from inferlab.common.data import DATA_DIR

    return Path(DATA_DIR)


def digest(files, base: Path) -> str:
    """The SHA-256 of ``files``, each by its path relative to ``base`` and its bytes."""
    total = hashlib.sha256()
    for path in sorted(Path(f) for f in files):
        total.update(f"{path.relative_to(base).as_posix()}\0".encode())
        total.update(hashlib.sha256(path.read_bytes()).digest())
    return total.hexdigest()


def _module_file(name: str) -> Path | None:
    """The source file of the package's module ``name`` (``inferlab.a.b``), if it is one."""
    parts = name.split(".")
    if parts[0] != _PACKAGE.name:
        return None
    base = _PACKAGE.joinpath(*parts[1:])
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path
    return None


def _run_on_import(tree: ast.Module):
    """Every node of a module but those under ``if __name__ == "__main__":``, which runs
    only as a program."""
    waiting = list(tree.body)
    while waiting:
        node = waiting.pop()
        if isinstance(node, ast.If) and ast.unparse(node.test) in (
                "__name__ == '__main__'", "'__main__' == __name__"):
            continue
        yield node
        waiting.extend(ast.iter_child_nodes(node))


def imported_files(module: str) -> set[Path]:
    """The source files of ``module`` and of every module of the package it imports, at its
    top or inside a function, and those import in turn, with the packages' ``__init__``
    (what runs only as a program is left out). This module itself is left out: it stores
    answers and computes none."""
    found: set[Path] = set()
    waiting = [module]
    while waiting:
        name = waiting.pop()
        parts = name.split(".")
        for depth in range(1, len(parts) + 1):  # a module's packages run first
            path = _module_file(".".join(parts[:depth]))
            # The store keeps answers and computes none: editing it keeps every key.
            if path is None or path in found or path == _THIS_FILE:
                continue
            found.add(path)
            for node in _run_on_import(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    waiting.extend(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    waiting.append(node.module)
                    # "from a.b import c" imports the module a.b.c where there is one.
                    waiting.extend(f"{node.module}.{alias.name}" for alias in node.names)
    return found


@cache
def fingerprint(module: str | None = None) -> str:
    """The digest of every input of a computation in ``module``: the files of the
    package it imports (:func:`imported_files`) and every file of the tables. Without a
    module, every file of the package: ``book/_ext/freshness.py`` takes that to tell
    whether the book's cached notebooks are still the code's."""
    if module is None:
        code = [p for p in _PACKAGE.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    else:
        code = imported_files(module)
    tables = _tables_folder()
    return digest(code, _PACKAGE.parent) + digest(
        [p for p in tables.rglob("*") if p.is_file()], tables.parent)


def canonical(value):
    """``value`` as plain JSON data that spells out all of it: dataclasses field by field
    (with their class), arrays by type, shape and the digest of their bytes, floats by
    their exact ``repr``, a module's function by its name and a dataclass's method by its
    name and the value it is bound to. Raises ``TypeError`` for anything else (a lambda,
    a closure), naming its type."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return {"float": repr(value)}
    if isinstance(value, np.generic):
        return canonical(value.item())
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value)
        return {"array": str(data.dtype), "shape": list(data.shape),
                "sha256": hashlib.sha256(data.tobytes()).hexdigest()}
    if isinstance(value, tuple | list):
        return [canonical(item) for item in value]
    if isinstance(value, dict):
        return {"dict": [[canonical(k), canonical(v)] for k, v in
                         sorted(value.items(), key=lambda item: repr(item[0]))]}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        kind = type(value)
        return {"class": f"{kind.__module__}.{kind.__qualname__}",
                "fields": {f.name: canonical(getattr(value, f.name))
                           for f in dataclasses.fields(value)}}
    if isinstance(value, types.MethodType) and dataclasses.is_dataclass(value.__self__):
        # A method of a value (a replica's prefill_s, say): its code is fingerprinted, so
        # the value it is bound to says the rest.
        return {"method": value.__func__.__qualname__, "of": canonical(value.__self__)}
    if isinstance(value, types.FunctionType) and "<locals>" not in value.__qualname__ \
            and value.__closure__ is None:
        return {"function": f"{value.__module__}.{value.__qualname__}"}
    raise TypeError(f"canonical: cannot spell out a {type(value).__qualname__} exactly, "
                    "so no key can stand for it")


def _module_of(name: str) -> str | None:
    """The module a remembered function's name (``inferlab.predict.predict``) lives in;
    ``None`` for a name outside the package, whose inputs are the whole package."""
    module = name.rpartition(".")[0]
    return module if _module_file(module) is not None else None


def key(name: str, arguments: dict) -> str:
    """The file name a call's answer is stored under: the digest of the fingerprint, the
    function's name and its canonical arguments."""
    text = json.dumps([fingerprint(_module_of(name)), name, canonical(arguments)],
                      sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _settings() -> tuple[Path, str] | None:
    folder = os.environ.get(FOLDER_ENV)
    if not folder:
        return None
    mode = os.environ.get(MODE_ENV) or "use"
    if mode not in MODES:
        raise ValueError(f"{MODE_ENV}: {mode!r} is not one of {', '.join(MODES)}")
    return Path(folder), mode


def _write(path: Path, record: dict) -> None:
    # Written whole, then renamed: two build workers storing at once never leave half a
    # file, and a reader sees the old file or the new one.
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False,
                                     encoding="utf-8") as out:
        json.dump(record, out, indent=1, sort_keys=True, allow_nan=True)
    os.replace(out.name, path)


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _read(path: Path) -> dict | None:
    """The record stored at ``path``; ``None`` if there is none, or if what is there is no
    record (a file cut short, a merge conflict's markers): it is then computed and
    written again, and listed as missing in check mode."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and "answer" in record else None


def remembered(name: str, compute: Callable[[], object], arguments: dict, *,
               to_json: Callable[[object], dict], from_json: Callable[[dict], object]):
    """``compute()``, or its stored answer when the store is on (module docstring).

    ``arguments`` are everything ``compute`` depends on besides the fingerprinted
    files; ``to_json`` and ``from_json`` turn its answer into JSON data and back,
    exactly."""
    settings = _settings()
    if settings is None:
        return compute()
    folder, mode = settings
    path = folder / f"{key(name, arguments)}.json"
    stored = _read(path)
    if stored is not None and mode in ("use", "read"):
        return from_json(stored["answer"])
    answer = compute()
    if mode == "read":
        return answer
    data = to_json(answer)
    if stored is not None:
        if not _same(stored["answer"], json.loads(json.dumps(data, allow_nan=True))):
            raise ChangedResult(f"{name}: the answer stored in {path} differs from the one "
                                f"just computed for the same code, tables and arguments:\n"
                                f"stored {stored['answer']}\ncomputed {data}")
        return answer
    _write(path, {"function": name, "fingerprint": fingerprint(_module_of(name)),
                  "answer": data})
    misses = os.environ.get(MISSES_ENV)
    if mode == "check" and misses:
        with open(misses, "a", encoding="utf-8") as out:  # one short line: appends atomically
            out.write(f"{path.name}\n")
    return answer


def stale(folder) -> list[Path]:
    """The answers stored in ``folder`` under another fingerprint than today's code and
    tables give their function. Only files written by :func:`remembered` are counted."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ValueError(f"folder: {str(folder)!r} is not a folder of stored answers")
    found = []
    for path in sorted(folder.glob("*.json")):
        record = _read(path)
        if record is None or not isinstance(record.get("function"), str) \
                or "fingerprint" not in record:
            continue
        if record["fingerprint"] != fingerprint(_module_of(record["function"])):
            found.append(path)
    return found


def prune(folder) -> int:
    """Delete the :func:`stale` answers stored in ``folder``; return how many."""
    removed = stale(folder)
    for path in removed:
        path.unlink(missing_ok=True)
    return len(removed)


def main(argv: list[str] | None = None) -> int:
    """``python -m inferlab.common.memo prune FOLDER``: drop the answers of older code."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("command", choices=["prune"])
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    print(f"{prune(args.folder)} stored answers of older code removed from {args.folder}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
