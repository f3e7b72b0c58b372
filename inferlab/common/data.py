"""Load the book's sourced tables from ``data/`` through one checked loader.

Every table is a tidy CSV: one row per thing, units in the column names, and a
``source`` column. :func:`load_table` checks each table against its schema and
names the file, the physical line and the column of anything malformed, so that
a bad row is caught where it is added rather than as a wrong figure three
chapters later.

The checks, in the order they run:

1. Bytes. The file must be UTF-8. A byte-order mark at the very start is
   tolerated and dropped: Excel's "CSV UTF-8" export writes one, it carries no
   data, and the table then loads exactly as it would without it. Any other
   undecodable byte is reported with its line, column and value.
2. Syntax. The CSV is split by a strict reader (RFC 4180 quoting): a quote
   inside an unquoted cell, text after a closing quote or a quote that never
   closes is an error, as is a cell longer than ``MAX_CELL_CHARS``. Lines
   are counted physically, so a quoted cell spanning several lines does not
   shift the line numbers of what follows.
3. Header. Every column of the schema, no other, none twice and none unnamed
   (a trailing comma), and at least one row below it.
4. Cells. Each row has as many cells as the header; each cell is empty only if
   its column allows it, one of the allowed values for text, and for numbers
   plain ASCII decimal notation (``1_000``, ``1,000`` or non-ASCII digits,
   which Python's ``float`` would accept, are refused).
5. Plausibility. Every number column declares the range a real value can take,
   with the reason (a TB/s figure typed into a GB/s column, a zero bandwidth);
   some ranges depend on another column (the hardware family, the unit) or are
   per chip (the value divided by the row's chip count).
6. Cross-field rules (``RULES``): active parameters at most the total,
   key/value heads dividing the attention heads, and the like.
7. Keys (``KEYS``): no two rows share a key.

Used by every chapter; the tables themselves are described in the data appendix.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from inferlab.common.schemas import (
    KEYS,
    PLACEHOLDER_SOURCES,
    RULES,
    SCHEMAS,
    Column,
    _ByColumn,
    _figure,
    _present,
)


def _tables_folder() -> Path:
    """The folder holding the tables: the package ``inferlab.tables``.

    ``pyproject.toml`` installs the repository's ``data/`` as that package, so a wheel
    or ``pip install .`` carries it inside ``inferlab``, and an editable install maps it
    to the repository's own ``data/`` (an edit to a CSV there counts at once). A source
    tree put on ``sys.path`` without installing has no such package; there the tables
    are the ``data/`` next to ``inferlab/``.
    """
    try:
        folder = resources.files("inferlab.tables")
    except ModuleNotFoundError:
        return Path(__file__).resolve().parents[2] / "data"
    if not isinstance(folder, Path):  # e.g. imported from a zip archive
        raise ImportError(f"inferlab.tables: the tables must be files on disk, found {folder!r}; "
                          f"install inferlab with pip rather than importing it from an archive")
    return folder


#: The folder the tables are read from (``data/`` of the repository, installed as
#: ``inferlab.tables``); the sample texts are in its ``texts/`` and the benchmark
#: tools' traces in ``traces/``.
DATA_DIR = _tables_folder()

#: The longest cell the loader accepts, in characters. The longest real cell (a
#: hardware source list) is about 1,500 characters; a cell many times that is a
#: paste accident, such as a whole web page in a note.
MAX_CELL_CHARS = 10_000


class DataError(ValueError):
    """A table in ``data/`` does not match its schema."""


class _Malformed(Exception):
    """A syntax error found by :func:`_records`, located for the caller to name."""

    def __init__(self, line: int, cell: int, char: int, reason: str) -> None:
        super().__init__(reason)
        self.line, self.cell, self.char, self.reason = line, cell, char, reason


_BARE = re.compile(r'[^,"\r\n]*')
_BREAK = re.compile(r"\r\n|\r|\n")


class _Cell(NamedTuple):
    # A tuple rather than a frozen dataclass: a table of 28,000 rows makes 150,000 cells.
    text: str
    line: int  # the physical line the cell starts on
    char: int  # its first character's position on that line, from 1


def _records(text: str) -> Iterator[list[_Cell]]:
    """Split CSV text into records of cells, strictly, counting physical lines.

    Blank lines are skipped. Raises :class:`_Malformed` for a quote inside an
    unquoted cell, text after a closing quote, or a quote that never closes.
    """
    pos, line, line_start, end = 0, 1, 0, len(text)
    while pos < end:
        blank = _BREAK.match(text, pos)
        if blank:
            pos, line, line_start = blank.end(), line + 1, blank.end()
            continue
        record: list[_Cell] = []
        while True:
            start_line, start_char = line, pos - line_start + 1  # where this cell begins
            quoted = pos < end and text[pos] == '"'
            if quoted:
                close = pos + 1
                while True:
                    close = text.find('"', close)
                    if close == -1:
                        raise _Malformed(line, len(record) + 1, start_char,
                                         "this quoted cell is never closed")
                    if text.startswith('""', close):
                        close += 2
                        continue
                    break
                inside = text[pos + 1:close]
                breaks = list(_BREAK.finditer(inside))
                if breaks:
                    line += len(breaks)
                    line_start = pos + 1 + breaks[-1].end()
                value = inside.replace('""', '"')
                pos = close + 1
            else:
                bare = _BARE.match(text, pos)
                value = bare.group()
                pos = bare.end()
            record.append(_Cell(value, start_line, start_char))
            if pos == end:
                yield record
                return
            if text[pos] == ",":
                pos += 1
                continue
            newline = _BREAK.match(text, pos)
            if newline:
                pos, line, line_start = newline.end(), line + 1, newline.end()
                yield record
                break
            where = pos - line_start + 1
            if quoted:
                reason = f"text after the closing quote at character {where}"
            else:
                reason = (f"a quote inside an unquoted cell at character {where}; quote the "
                          'whole cell and double the quote ("")')
            raise _Malformed(line, len(record), start_char, reason)


_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NUMBER_CHARS = set("0123456789+-.eE")
_UNDECODABLE = re.compile("[\udc80-\udcff]")


def _parse(value: str, column: Column) -> object:
    """Turn one CSV cell into a Python value, or raise ValueError saying why not."""
    if column.kind == "source":
        bare = value.strip().lower()
        if bare in PLACEHOLDER_SOURCES or not bare.strip(".…"):
            raise ValueError(f"{value!r} is a placeholder, not a source; name where the figure "
                             "was published (an address, a paper, a file)")
        return value
    if column.kind == "text":
        if column.allowed is not None and value not in column.allowed:
            raise ValueError(f"{value!r} is not one of {', '.join(column.allowed)}")
        return value
    if value.lstrip("+-").lower() in ("inf", "infinity", "nan"):
        raise ValueError(f"{value!r} is not a finite number")
    if not _NUMBER.fullmatch(value):
        odd = next((c for c in value if c not in _NUMBER_CHARS), None)
        detail = "" if odd is None else f" (character {odd!r}, U+{ord(odd):04X})"
        raise ValueError(
            f"{value!r} is not a number{detail}; write ASCII digits with an optional '.' "
            "and exponent, without '_', ',' or spaces")
    if column.kind == "integer":
        if not _INTEGER.fullmatch(value):
            raise ValueError(f"{value!r} is not a whole number; write digits only")
        return int(value)
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{value!r} is not a finite number")
    return number


def _implausible(value: float, column: Column, row: dict) -> str | None:
    """Why ``value`` is out of its column's plausible range, or ``None``."""
    bounds = column.plausible
    context = ""
    if isinstance(bounds, _ByColumn):
        context = f" for {bounds.column} {row[bounds.column]!r}"
        bounds = bounds.ranges[row[bounds.column]]
    checked = value if bounds.per is None or row[bounds.per] == 1 else value / row[bounds.per]
    if bounds.low <= checked <= bounds.high:
        return None
    shown = _figure(value)
    if bounds.per is not None:
        context = f" per {bounds.per.removesuffix('s')}{context}"
        if row[bounds.per] != 1:
            shown = (f"{_figure(value)} over {row[bounds.per]} {bounds.per} is "
                     f"{_figure(checked)} per {bounds.per.removesuffix('s')}, which")
    unit = f" {bounds.unit}" if bounds.unit else ""
    return (f"{shown} is outside the plausible range {_figure(bounds.low)} to "
            f"{_figure(bounds.high)}{unit}{context} ({bounds.why})")


def _key_value(value: object) -> object:
    return " ".join(value.split()).casefold() if isinstance(value, str) else value


def load_table(name: str, data_dir: Path | str | None = None) -> pd.DataFrame:
    """Read ``data/<name>.csv``, check it against its schema, return a DataFrame.

    Parameters
    ----------
    name:
        One of the keys of :data:`~inferlab.common.schemas.SCHEMAS` (``"hardware"``, ``"models"``,
        ``"results"``, ``"leaderboard"``, ...).
    data_dir:
        Folder holding the CSV files; the repository's ``data/`` by default (tests
        point it at a corrupted copy).

    Raises
    ------
    ValueError
        For an unknown table name.
    DataError
        (a ``ValueError``) naming the file, the physical line and the column (its
        position and name) of anything the checks listed in the module docstring
        find, with the allowed values or range.
    """
    path = Path(data_dir) if data_dir is not None else DATA_DIR
    return read_table(name, path / f"{name}.csv")


def read_table(name: str, path: Path | str) -> pd.DataFrame:
    """Read the file ``path`` as a table of kind ``name`` (one of
    :data:`~inferlab.common.schemas.SCHEMAS`), with the checks of :func:`load_table`: a reader's
    own price file, say."""
    if name not in SCHEMAS:
        raise ValueError(f"name: unknown table {name!r}; allowed: {', '.join(sorted(SCHEMAS))}")
    schema = SCHEMAS[name]
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: file not found")
    text = path.read_bytes().decode("utf-8", errors="surrogateescape")
    text = text.removeprefix("\ufeff")  # Excel's byte-order mark: no data, see above

    header: list[str] = []

    def where(line: int, index: int) -> str:
        if not header:  # the header itself is being read
            return f"{path}, line {line}, column {index}"
        label = repr(header[index - 1]) if index <= len(header) else "beyond the header"
        return f"{path}, line {line}, column {index} ({label})"

    records = _records(text)
    try:
        head = next(records, None)
        if head is None:
            raise DataError(f"{path}, line 1: the file is empty; expected the header "
                            f"{','.join(schema)}")
        header = [cell.text for cell in head]
        _check_header(path, head, schema)
        rows = []
        rules = RULES.get(name, ())
        for cells in records:
            rows.append(_check_row(cells, header, schema, rules, where))
    except _Malformed as error:
        raise DataError(f"{where(error.line, error.cell)}: {error.reason}") from None
    if not rows:
        raise DataError(f"{path}, line {head[-1].line + 1}: the header has no rows below it")

    frame = pd.DataFrame.from_records([values for values, _ in rows], columns=list(schema))
    for key in KEYS[name]:
        seen: dict[tuple, int] = {}
        for values, lines in rows:
            value = tuple(_key_value(values[column]) for column in key)
            first = seen.setdefault(value, lines[key[0]])
            if first != lines[key[0]]:
                shown = tuple(values[c] for c in key) if len(key) > 1 else values[key[0]]
                columns = ", ".join(repr(c) for c in key)
                raise DataError(
                    f"{where(lines[key[0]], header.index(key[0]) + 1)}: duplicate value "
                    f"{shown!r} of the key {columns}, first on line {first}")
    return frame


def _check_header(path: Path, head: list[_Cell], schema: dict[str, Column]) -> None:
    """Raise DataError unless the header names each schema column exactly once."""
    names = [cell.text for cell in head]
    for index, cell in enumerate(head, start=1):
        if _UNDECODABLE.search(cell.text):
            raise DataError(f"{path}, line {cell.line}, column {index}: the header is not "
                            "valid UTF-8")
        if cell.text.strip() == "":
            raise DataError(f"{path}, line {cell.line}, column {index}: an unnamed column "
                            "(a trailing comma in the header?)")
        if cell.text in names[:index - 1]:
            raise DataError(f"{path}, line {cell.line}, column {index}: {cell.text!r} "
                            f"appears twice (also column {names.index(cell.text) + 1})")
    missing = [column for column in schema if column not in names]
    if missing:
        raise DataError(f"{path}, line 1: missing column(s) {', '.join(missing)}")
    extra = [(i, c) for i, c in enumerate(names, start=1) if c not in schema]
    if extra:
        listed = ", ".join(f"{c!r} (column {i})" for i, c in extra)
        raise DataError(f"{path}, line 1: unexpected column(s) {listed}; allowed: "
                        f"{', '.join(schema)}")


def _check_row(cells: list[_Cell], header: list[str], schema: dict[str, Column],
               rules: tuple[Callable[[dict], tuple[str, str] | None], ...],
               where: Callable[[int, int], str]) -> tuple[dict, dict]:
    """One record checked and parsed: its values and the line of each column."""
    width = len(header)
    if len(cells) != width:
        index = min(len(cells), width + 1)
        raise DataError(f"{where(cells[index - 1].line, index)}: the row has {len(cells)} "
                        f"cells but the header has {width} columns")
    values: dict[str, object] = {}
    lines: dict[str, int] = {}
    for index, (column_name, cell) in enumerate(zip(header, cells, strict=True), start=1):
        bad = _UNDECODABLE.search(cell.text)
        if bad:
            line = cell.line + len(_BREAK.findall(cell.text[:bad.start()]))
            byte = ord(bad.group()) - 0xDC00
            raise DataError(f"{where(line, index)}: byte 0x{byte:02X} at character "
                            f"{bad.start() + 1} of the cell is not UTF-8; save the file as "
                            "UTF-8")
        if len(cell.text) > MAX_CELL_CHARS:
            raise DataError(f"{where(cell.line, index)}: the cell is {len(cell.text):,} "
                            f"characters long; at most {MAX_CELL_CHARS:,} are allowed")
        column = schema[column_name]
        lines[column_name] = cell.line
        value = cell.text.strip()
        if value == "":
            if column.required:
                raise DataError(f"{where(cell.line, index)}: empty, but required")
            values[column_name] = None if column.kind in ("text", "source") else math.nan
            continue
        try:
            values[column_name] = _parse(value, column)
        except ValueError as error:
            raise DataError(f"{where(cell.line, index)}: {error}") from None
    for index, column_name in enumerate(header, start=1):
        column, value = schema[column_name], values[column_name]
        if column.plausible is None or not _present(value):
            continue
        reason = _implausible(value, column, values)
        if reason:
            raise DataError(f"{where(lines[column_name], index)}: {reason}")
    for rule in rules:
        broken = rule(values)
        if broken:
            column_name, reason = broken
            raise DataError(f"{where(lines[column_name], header.index(column_name) + 1)}: "
                            f"{reason}")
    return {column: values[column] for column in schema}, lines


def result(result_id: str, data_dir: Path | str | None = None) -> dict:
    """One published figure from ``data/results.csv``, as a dict of its columns.

    Chapters quote reported figures through this, so the value, its unit, its
    source and whether it was audited travel together. Raises ``ValueError``
    naming the known ids if ``result_id`` is not one of them.
    """
    frame = load_table("results", data_dir)
    rows = frame[frame["id"] == result_id]
    if rows.empty:
        raise ValueError(
            f"result_id: unknown id {result_id!r}; known: {', '.join(frame['id'])}"
        )
    return rows.iloc[0].to_dict()
