"""The site's explorer: the notebook's chart over tables precomputed on a grid.

When the book is built, :func:`static_html` calls the explorer's ``compute`` at every
point of its controls' grids (a product; a control with ``only_when`` only where it
applies) and keeps each part's tables, rounded to :data:`SIGNIFICANT` figures. The page
gets the explorer's own chart with one Vega-Lite parameter per control, bound to an HTML
input (a range slider for an evenly spaced grid, a menu otherwise), and each part's
layer filters the precomputed rows down to the point the inputs name. Nothing is
computed in the browser but that filter: every number shown is the function's.

Two things keep a page small, both lossless on the grid:

- a part stores only the controls it depends on: the grid is searched for controls
  whose every move leaves the part's rows as they were, and those are dropped (a chip's
  roofline does not depend on the model);
- a part is stored as dense arrays over the slots of the controls it depends on, so no
  point repeats its key: one array per column for a part of one row per point, or, for
  a part of several rows (a curve), each distinct set of rows once and an array of
  which set each slot shows. A column the same at every point (a curve's x values) is
  stored once.

A page's explorer data must stay under :data:`LIMIT_BYTES` (``book/_ext/explorers.py``
fails the build otherwise).
"""

from __future__ import annotations

import html
import itertools
import json
import math
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import pandas as pd

from inferlab.pages.explorers.base import REFUSAL, Choice, Control, Explorer, Slider, fixed_on_site

#: Significant figures kept of every precomputed number: more than a chart or a label
#: shows, and half the bytes of a full float.
SIGNIFICANT = 4

#: The most explorer data a page may carry, in bytes of JSON.
LIMIT_BYTES = 2_000_000

#: What a column's array over a part's slots is called in the page's data: no table's
#: column starts with "@".
STORED = "@{}"

#: What a parameter is called in the site's chart: it must be a JavaScript identifier
#: and clash with no signal Vega-Lite makes of its own (width, height, ...).
PARAM = "ctl_{}"


def label(value) -> str:
    """A grid value as a menu shows it: thousands separated, at most four significant
    figures (``131072`` -> ``"131,072"``, ``68.976648192`` -> ``"68.98"``)."""
    if isinstance(value, str):
        return value
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:,.4g}"


def evenly_spaced(values) -> bool:
    """Whether numeric grid ``values`` (two or more) step evenly, so a range slider can
    walk them."""
    steps = np.diff(np.asarray(values, dtype=float))
    if not len(steps):
        return False
    return bool(np.all(np.abs(steps - steps[0]) <= 1e-9 * abs(steps[0])))


def _ranged(control: Control) -> bool:
    return isinstance(control, Slider) and evenly_spaced(control.grid)


def points(explorer: Explorer) -> Iterator[tuple]:
    """Every point of the explorer's grid, as one index per control (in the order of
    ``explorer.controls``) into its site values; ``None`` where the control does not
    apply (``only_when``), which then holds its default."""
    controls = explorer.controls
    ranges = [range(len(control.site_values)) for control in controls]
    free = [i for i, control in enumerate(controls) if control.only_when is None]
    for combo in itertools.product(*(ranges[i] for i in free)):
        point = [None] * len(controls)
        for i, index in zip(free, combo, strict=True):
            point[i] = index
        choices = []
        for i, control in enumerate(controls):
            if control.only_when is None:
                choices.append((point[i],))
                continue
            other, wanted = control.only_when
            j = next(k for k, c in enumerate(controls) if c.name == other)
            applies = controls[j].site_values[point[j]] == wanted
            choices.append(tuple(ranges[i]) if applies else (None,))
        yield from itertools.product(*choices)


def values_at(explorer: Explorer, point: tuple) -> dict[str, object]:
    """The function's arguments at a grid ``point``."""
    return {control.name: control.default if index is None else control.site_values[index]
            for control, index in zip(explorer.controls, point, strict=True)}


def rounded(values) -> list:
    """Values of a column as JSON values: numbers to :data:`SIGNIFICANT` figures (whole
    ones as integers), ``nan`` and infinities as ``None``, anything else as it is."""
    values = np.asarray(values)
    if values.dtype == bool or not np.issubdtype(values.dtype, np.number):
        return [None if value is None or value is pd.NA else value for value in values.tolist()]
    x = values.astype(float)
    out = np.full(x.shape, np.nan)
    finite = np.isfinite(x)
    out[finite & (x == 0)] = 0.0
    nonzero = finite & (x != 0)
    decimals = SIGNIFICANT - 1 - np.floor(np.log10(np.abs(x[nonzero]))).astype(int)
    # Divide by an exact power of ten (never multiply by an inexact 0.01), so that the
    # result is the float nearest the decimal and prints as few digits as it has.
    up, down = 10.0 ** np.maximum(decimals, 0), 10.0 ** np.maximum(-decimals, 0)
    out[nonzero] = np.round(x[nonzero] * up / down) * down / up
    return [None if math.isnan(v) else int(v) if v.is_integer() and abs(v) < 2**53 else v
            for v in out.tolist()]


# Rows of one part at one point: a tuple of (column, values) pairs, hashable for grouping;
# () where the part has no rows (the function refused, or the part is empty there).
Rows = tuple


def _length(rows: Rows) -> int:
    return len(rows[0][1]) if rows else 0


@dataclass(frozen=True)
class Grid:
    """Each part's rows, rounded, at every point of an explorer's grid."""

    explorer: Explorer
    parts: dict[str, dict[tuple, Rows]]
    count: int

    @property
    def refused(self) -> int:
        """How many points the function refused."""
        return sum(1 for rows in self.parts[REFUSAL].values() if rows)


def precompute(explorer: Explorer) -> Grid:
    """Call the explorer's function at every point of its grid (see :func:`points`)."""
    names = list(explorer.tables_at(**explorer.defaults()))
    if REFUSAL in names or not all(name.isidentifier() for name in names):
        raise ValueError(f"{explorer.name}: parts must be identifiers other than "
                         f"{REFUSAL!r}, not {names}")
    raw: dict[str, dict[tuple, dict | None]] = {n: {} for n in [*names, REFUSAL]}
    for point in points(explorer):
        try:
            tables = explorer.tables_at(**values_at(explorer, point))
        except ValueError as error:
            tables = {REFUSAL: {"text": np.array([f"Cannot compute: {error}"])}}
        else:
            if set(tables) != set(names):
                raise ValueError(f"{explorer.name}: tables gave parts {sorted(tables)} at "
                                 f"{values_at(explorer, point)}, {sorted(names)} at the "
                                 "defaults")
        for name, found in raw.items():
            found[point] = tables.get(name)
    parts = {name: _rounded_rows(explorer, name, found) for name, found in raw.items()}
    return Grid(explorer, parts, len(raw[REFUSAL]))


def _rounded_rows(explorer, name, tables: dict[tuple, dict | None]) -> dict:
    """Each point's table as rounded rows."""
    present = [(point, table) for point, table in tables.items() if table is not None]
    names = list(present[0][1]) if present else []
    for point, table in present:
        if list(table) != names:
            raise ValueError(f"{explorer.name}: part {name!r} has columns {list(table)} at "
                             f"{values_at(explorer, point)}, {names} elsewhere")
    lengths = [len(table[names[0]]) if names else 0 for _, table in present]
    ends = np.cumsum(lengths)
    # One rounding per column over every point: a pass per point costs more than the
    # computation did.
    flat = {column: rounded(np.concatenate([table[column] for _, table in present]))
            for column in names}
    rows = {point: () for point in tables}
    for (point, _), end, length in zip(present, ends, lengths, strict=True):
        if length:
            rows[point] = tuple((column, tuple(flat[column][end - length:end]))
                                for column in names)
    return rows


def depends_on(rows_at: dict[tuple, Rows], controls: int) -> tuple[list[int], dict]:
    """The controls a part's rows depend on, and its rows keyed by those alone.

    Control ``i`` is dropped when every group of points that differ only in it has one
    set of rows, so the reduced table answers every point exactly as the full one did.
    Dropped positions hold ``"*"`` in the returned keys.
    """
    kept = []
    for i in range(controls):
        groups: dict[tuple, set] = defaultdict(set)
        for point, rows in rows_at.items():
            groups[point[:i] + ("*",) + point[i + 1:]].add(rows)
        if all(len(found) == 1 for found in groups.values()):
            rows_at = {point: found.pop() for point, found in groups.items()}
        else:
            kept.append(i)
    return kept, rows_at


def _current(control: Control) -> str:
    """A Vega expression: the index, in the control's site values, of the inputs' value."""
    param = PARAM.format(control.name)
    if _ranged(control):
        first, step = control.grid[0], control.grid[1] - control.grid[0]
        return f"round(({param} - {first!r}) / {step!r})"
    return param


@dataclass(frozen=True)
class Axis:
    """One dimension of a part's stored table: a control it depends on, or a control and
    the one that applies only for one of its values (``only_when``), merged into one, so
    that no slot is kept for a point that cannot be reached."""

    position: int  # of the control in explorer.controls
    size: int
    expression: str  # a Vega expression of the slot the inputs name
    slot: object  # point -> slot

    @staticmethod
    def of(explorer: Explorer, kept: list[int]) -> list[Axis]:
        controls = explorer.controls
        axes = []
        for i in kept:
            control = controls[i]
            n = len(control.site_values)
            dependent = next((j for j in kept if controls[j].only_when is not None
                              and controls[j].only_when[0] == control.name), None)
            if control.only_when is None and dependent is None:
                axes.append(Axis(i, n, _current(control), lambda point, i=i: point[i]))
            elif control.only_when is None:
                # The menu's slots, then one per value of the control it switches on.
                d = controls[dependent]
                on = control.site_values.index(d.only_when[1])
                axes.append(Axis(
                    i, n + len(d.site_values),
                    f"({_current(control)} == {on} ? {n} + {_current(d)} : "
                    f"{_current(control)})",
                    lambda point, i=i, j=dependent, n=n, on=on:
                        n + point[j] if point[i] == on else point[i]))
            elif control.only_when[0] not in [controls[k].name for k in kept]:
                # Its switch is not a key of this part: slot 0 while it does not apply.
                switch = explorer.control(control.only_when[0])
                on = switch.site_values.index(control.only_when[1])
                axes.append(Axis(
                    i, n + 1, f"({_current(switch)} == {on} ? 1 + {_current(control)} : 0)",
                    lambda point, i=i: 0 if point[i] is None else 1 + point[i]))
        return axes


def _index(axes: list[Axis]):
    """The Vega expression of the row-major index into a part's dense arrays, the same
    index of a point in Python, and the arrays' length."""
    strides, stride = [], 1
    for axis in reversed(axes):
        strides.insert(0, stride)
        stride *= axis.size
    expression = " + ".join(f"{s} * {a.expression}" if s != 1 else a.expression
                            for a, s in zip(axes, strides, strict=True)) or "0"

    def index(point) -> int:
        return sum(s * a.slot(point) for a, s in zip(axes, strides, strict=True))

    return expression, index, stride


@dataclass(frozen=True)
class Stored:
    """One part as the page carries it: its datums, the transforms that turn them back
    into the part's rows at the point the inputs name, and any parameter they read."""

    datums: list[dict]
    transforms: list[dict]
    params: dict[str, list]


def store(explorer: Explorer, name: str, rows_at: dict[tuple, Rows]) -> Stored:
    """How a part's rows at every point are stored and read back.

    A part with at most one row per point keeps one array per column over every slot of
    its axes, read at the inputs' index. A part with more keeps each distinct set of
    rows once (a block), an array of block numbers over the slots in a parameter, and
    unpacks the block the inputs name with a flatten transform.
    """
    kept, reduced = depends_on(rows_at, len(explorer.controls))
    axes = Axis.of(explorer, kept)
    expression, index, size = _index(axes)
    entries = [(index(point), rows) for point, rows in reduced.items() if _length(rows)]
    columns = [column for column, _ in entries[0][1]] if entries else []
    if not entries:
        return Stored([], [], {})
    if all(_length(rows) == 1 for _, rows in entries):
        # The arrays keep names of their own: Vega's calculate writes into the datum it
        # reads, so reading "x" into "x" would leave a number where the array was.
        dense = {STORED.format(column): [None] * size for column in columns}
        for slot, rows in entries:
            for column, values in rows:
                dense[STORED.format(column)][slot] = values[0]
        transforms = [{"calculate": f"datum[{json.dumps(STORED.format(c))}][{expression}]",
                       "as": c} for c in columns]
        present = " || ".join(f"isValid(datum[{json.dumps(c)}])" for c in columns)
        return Stored([dense], [*transforms, {"filter": present}], {})
    blocks: dict[Rows, int] = {}
    ids: list[int | None] = [None] * size
    for slot, rows in entries:
        ids[slot] = blocks.setdefault(rows, len(blocks))
    constant = {column: values for position, (column, values) in enumerate(entries[0][1])
                if all(rows[position][1] == values for rows in blocks)}
    datums = [{"#": number, **{column: list(values) for column, values in rows
                               if column not in constant}}
              for rows, number in blocks.items()]
    ids_param = f"ids_{name}"
    transforms = [{"filter": f"datum['#'] == {ids_param}[{expression}]"}]
    transforms += [{"calculate": json.dumps(list(values), allow_nan=False), "as": column}
                   for column, values in constant.items()]
    transforms.append({"flatten": columns})
    return Stored(datums, transforms, {ids_param: ids})


def _param(control: Control):
    import altair as alt

    name = PARAM.format(control.name)
    values = control.site_values
    if _ranged(control):
        step = values[1] - values[0]
        return alt.param(name=name, value=control.default, bind=alt.binding_range(
            min=values[0], max=values[-1], step=step, name=control.label))
    return alt.param(name=name, value=values.index(control.default), bind=alt.binding_select(
        options=list(range(len(values))), labels=[label(v) for v in values],
        name=control.label))


def inputs(explorer: Explorer) -> list:
    """The site's inputs of ``explorer``, one Vega-Lite parameter bound to each control and
    named by its label (a slider where the grid is evenly spaced, else a menu)."""
    return [_param(control) for control in explorer.controls]


def site_spec(explorer: Explorer) -> tuple[dict, Grid]:
    """The Vega-Lite spec of the site's explorer, with its data, and the grid behind it."""
    grid = precompute(explorer)
    stored = {name: store(explorer, name, rows_at) for name, rows_at in grid.parts.items()}
    dataset = f"{explorer.name}:{{}}".format

    def part(name: str):
        import altair as alt

        base = alt.Chart(alt.Data(name=dataset(name)))
        for transform in stored[name].transforms:
            base = _with(base, transform)
        return base

    import altair as alt

    lookups = [alt.param(name=name, value=ids) for s in stored.values()
               for name, ids in s.params.items()]
    chart = explorer.figure(part).add_params(*inputs(explorer), *lookups)
    only_when = {}
    for control in explorer.controls:
        if control.only_when is not None:
            other, value = control.only_when
            target = explorer.control(other)
            index = (target.site_values.index(value) if not _ranged(target) else value)
            only_when[PARAM.format(control.name)] = [PARAM.format(other), index]
    spec = chart.to_dict(validate=False)
    # explorers.js disables the inputs of fixed controls: a menu of their one value.
    spec["usermeta"] = {"only_when": only_when,
                        "fixed": [PARAM.format(c.name) for c in explorer.controls
                                  if fixed_on_site(c)]}
    spec["datasets"] = {dataset(name): s.datums for name, s in stored.items()}
    return spec, grid


def _with(chart, transform: dict):
    """``chart`` with one more Vega-Lite transform, given as its dict."""
    if "flatten" in transform:
        return chart.transform_flatten(transform["flatten"])
    if "filter" in transform:
        return chart.transform_filter(transform["filter"])
    return chart.transform_calculate(**{transform["as"]: transform["calculate"]})


def _listed(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def static_html(explorer: Explorer) -> str:
    """The explorer as the site shows it: its chart and controls, its precomputed data
    inline, and a note saying so. ``book/_ext/explorers.py`` loads the scripts that draw it."""
    spec, grid = site_spec(explorer)
    # "</" would end the script element early; JSON allows it escaped.
    data = json.dumps(spec, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    function = f"{explorer.compute.__module__}.{explorer.compute.__qualname__}"
    fewer = [f"{len(c.site_values)} of the {len(c.options)} for {c.label}"
             for c in explorer.controls if isinstance(c, Choice)
             and len(c.site_values) < len(c.options)]
    more = f" (here the menus offer {', '.join(fewer)})" if fewer else ""
    fixed = [f"{c.label} at {label(c.default)}" for c in explorer.controls if fixed_on_site(c)]
    held = (f" Here {_listed(fixed)} stay{'s' if len(fixed) == 1 else ''} fixed: "
            "each value more would multiply the simulations of the book's build."
            if fixed else "")
    note = (f"On this page the figure moves between values computed when the page was built: "
            f"{grid.count:,} combinations of the values the controls offer, each a result "
            f"of <code>{html.escape(function)}</code>.{html.escape(held)} Open the chapter "
            f"as a notebook to compute any other value, with every option"
            f"{html.escape(more)}.")
    return (f'<div class="inferlab-explorer" data-explorer="{html.escape(explorer.name)}" '
            f'data-bytes="{len(data.encode())}">'
            f'<div class="inferlab-explorer-view"></div>'
            f'<script type="application/json" class="inferlab-explorer-spec">{data}</script>'
            f'<p class="inferlab-explorer-note">{note}</p></div>')
