"""Every explorer of the book, by parametrised tests: a new explorer is covered at once.

The explorers of ``inferlab.pages.explorers`` (issue 16) must: open on the numbers the
chapter's text uses; label every control in whole words; change their tables whenever
any control moves; draw on the site exactly what the notebook draws at the same values,
from data that fit a page; and be the kind they say (an analytic explorer runs no
simulation). Importing a model module loads no widget or chart library.
"""

from __future__ import annotations

import json
import random
import subprocess
import sys
from functools import cache

import numpy as np
import pytest
from conftest import RESULTS_STORE, ROOT, glued

from inferlab.common import memo
from inferlab.pages.explorers import (
    KINDS,
    Choice,
    Explorer,
    Slider,
    Text,
    fixed_on_site,
    registered_explorers,
    site,
)
from inferlab.pages.explorers.base import REFUSAL

REGISTRY = registered_explorers()
NAMES = sorted(REGISTRY)


def chapter_text(explorer) -> str:
    return (ROOT / "book" / f"{explorer.chapter}.md").read_text(encoding="utf-8")


def test_every_chapter_with_an_explorer_cell_registers_it():
    assert {e.kind for e in REGISTRY.values()} <= set(KINDS)
    with_cells = {path.stem for path in (ROOT / "book").glob("0*.md")
                  if "explorer()" in path.read_text(encoding="utf-8")}
    assert with_cells <= {e.chapter for e in REGISTRY.values()}
    for explorer in REGISTRY.values():
        assert (ROOT / "book" / f"{explorer.chapter}.md").is_file(), explorer.chapter


# ------------------------------------------------------------------- the controls


def _values(explorer, **changes) -> dict:
    """The defaults with ``changes``, and any switch a changed control needs turned on."""
    values = {**explorer.defaults(), **changes}
    for name in changes:
        control = explorer.control(name)
        if control.only_when is not None:
            values[control.only_when[0]] = control.only_when[1]
    return values


def _shown(explorer, values) -> dict | str:
    """The tables at ``values``, or the refusal's message (which the explorer shows)."""
    try:
        return explorer.tables_at(**values)
    except ValueError as error:
        return str(error)


def _same(a: dict | str, b: dict | str) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return a.keys() == b.keys() and all(
        x.keys() == y.keys() and all(np.array_equal(x[c], y[c]) for c in x)
        for x, y in ((a[k], b[k]) for k in a))


def _moves(control) -> list:
    """The values a control is moved to: the site's other values, or, for a control the
    site fixes, the ends of the notebook's range or its other options (the notebook
    moves it, so it must change the figure there)."""
    if not fixed_on_site(control):
        return [value for value in control.site_values if value != control.default]
    if isinstance(control, Slider):
        return [value for value in (control.minimum, control.maximum)
                if value != control.default]
    if isinstance(control, Choice):
        return [value for value in control.options if value != control.default]
    return [control.default + " and a few more words"]


@pytest.mark.parametrize("name", NAMES)
def test_every_control_moved_changes_the_tables(name):
    explorer = REGISTRY[name]
    if explorer.kind == "measurement":
        pytest.skip("measurement explorers time real work; their compute has its own tests")
    for control in explorer.controls:
        start = _values(explorer, **{control.name: control.default})
        before = _shown(explorer, start)
        moved = _moves(control)
        # The first value that changes the picture is enough (the planner's take seconds).
        changed = next((value for value in moved if not _same(
            before, _shown(explorer, {**start, control.name: value}))), None)
        assert changed is not None, f"{name}: moving {control.name} over {moved} changed nothing"


@pytest.mark.parametrize("name", NAMES)
def test_labels_are_whole_words_shown_whole(name):
    from inferlab.pages.explorers.live import LiveView

    explorer = REGISTRY[name]
    view = LiveView(explorer)
    for control in explorer.controls:
        assert control.label == control.label.strip() and "…" not in control.label
        shown = view.controls[control.name]
        # "initial" sizes the label to its text; ipywidgets' default cuts it at 80 px.
        assert shown.description == control.label
        assert shown.style.description_width == "initial"
    # The site's inputs, without the grid of data behind them (a minute for the planner).
    bound = [p.param.to_dict()["bind"]["name"] for p in site.inputs(explorer)]
    assert bound == [c.label for c in explorer.controls]


@pytest.mark.parametrize("name", NAMES)
def test_controls_are_the_functions_arguments_with_defaults_on_the_grid(name):
    explorer = REGISTRY[name]
    for control in explorer.controls:
        assert control.default in control.site_values
        if isinstance(control, Slider):
            assert control.minimum <= min(control.grid) <= max(control.grid) <= control.maximum
            # Else the notebook's slider snaps it to a step and opens off the text.
            assert control.default_on_a_step, (
                f"{name}: {control.name}'s default {control.default!r} is between the "
                f"slider's steps of {control.step!r} from {control.minimum!r}")
        if isinstance(control, Choice):
            assert set(control.site_values) <= set(control.options)
        assert isinstance(control, Slider | Choice | Text)
    explorer.tables_at(**explorer.defaults())  # the defaults compute


@pytest.mark.build
@pytest.mark.parametrize("name", NAMES)
def test_defaults_are_the_numbers_the_chapter_glues(name, built_book):
    explorer = REGISTRY[name]
    answers = glued(built_book, explorer.chapter)
    keyed = [c for c in explorer.controls if c.glued]
    for control in keyed:
        assert control.glued in answers, f"{explorer.chapter} glues no {control.glued!r}"
        assert answers[control.glued] == pytest.approx(control.default, rel=1e-12), control.name


@pytest.mark.build
def test_chapter_two_explorers_open_on_the_chapters_worked_examples(built_book):
    """The floor explorer's first picture is section 'The floor''s KV-cache example, the
    roofline explorer's is section 'The roofline''s H100 at BF16."""
    answers = glued(built_book, "02_bandwidth_floor")
    floor = REGISTRY["bw_floor"]
    step = floor.tables_at(**floor.defaults())["step"]
    assert step["floor_ms"][0] == pytest.approx(answers["bw_kv_example_floor_ms"])
    assert step["weight_ms"][0] == pytest.approx(answers["bw_kv_example_weights_ms"])
    assert step["per_user_tok_s"][0] == pytest.approx(answers["bw_kv_example_user"])
    assert step["aggregate_tok_s"][0] == pytest.approx(answers["bw_kv_example_total"])
    roof = REGISTRY["bw_roofline"]
    tables = roof.tables_at(**roof.defaults())
    assert tables["ridge"]["intensity"][0] == pytest.approx(answers["bw_ridge_h100"])
    assert tables["prefill"]["intensity"][0] == pytest.approx(answers["bw_prefill_intensity"])


@pytest.mark.build
def test_chapter_one_explorers_open_on_the_chapters_puzzle(built_book):
    """The timeline opens on the request of section 'Two phases' (LLMPerf's shape at
    Groq's 270), the reconciliation on its 270 at LLMPerf's 150 tokens."""
    answers = glued(built_book, "01_prefill_decode")
    timeline = REGISTRY["pd_timeline"]
    clocks = timeline.tables_at(**timeline.defaults())["clocks"]
    assert clocks["ttft_ms"][0] == pytest.approx(answers["pd_tl_ttft_ms"])
    assert clocks["e2e_s"][0] == pytest.approx(answers["pd_tl_e2e_s"])
    reconcile = REGISTRY["pd_reconcile"]
    point = reconcile.tables_at(**reconcile.defaults())["point"]
    assert point["rate"][0] == pytest.approx(answers["pd_rate_150"])
    assert point["ttft_for_target_ms"][0] == pytest.approx(answers["pd_ttft_185_ms"])


@pytest.mark.build
def test_the_tail_explorer_opens_on_the_load_the_chapter_reads(built_book):
    """Section 'Load and the tail' reads its tail at load 0.9, batch limit 256, output
    spread 1: the explorer opens there, on the same simulated run."""
    answers = glued(built_book, "03_batching")
    tail = REGISTRY["batch_tail"]
    run = tail.tables_at(**tail.defaults())["run"]
    assert run["ttft_p99"][0] == pytest.approx(answers["batch_tail_ttft99_09"])
    assert run["ttft_p99"][0] / run["ttft_p50"][0] == pytest.approx(
        answers["batch_tail_ttft_ratio_09"])
    assert run["tpot_p50"][0] * 1e3 == pytest.approx(answers["batch_tail_tpot50_09"])
    assert run["tpot_p99"][0] * 1e3 == pytest.approx(answers["batch_tail_tpot99_09"])


@pytest.mark.build
def test_the_curve_explorer_opens_on_the_fronts_the_chapter_reads(built_book):
    """Section 'The throughput-interactivity curve' reads each chip's throughput at both
    bounds at the explorer's defaults: the explorer's first picture says the same."""
    answers = glued(built_book, "03_batching")
    curve = REGISTRY["batch_curve"]
    summary = curve.tables_at(**curve.defaults())["summary"]
    for chip, server, inter in zip(summary["chip"], summary["server"], summary["interactive"],
                                   strict=True):
        key = chip.split()[0].lower()
        assert server == pytest.approx(answers[f"batch_curve_{key}_server"]), chip
        assert inter == pytest.approx(answers[f"batch_curve_{key}_inter"]), chip


def test_the_pieces_explorer_opens_on_the_sentence_of_the_chapters_figure():
    from inferlab.pages.explorers import tokenization

    assert f"SENTENCE = {tokenization.SENTENCE!r}" in chapter_text(REGISTRY["tok_pieces"])
    assert REGISTRY["tok_pieces"].defaults()["text"] == tokenization.SENTENCE


@pytest.mark.build
def test_the_server_explorer_opens_on_the_rate_the_chapter_reads(built_book):
    """Section 'Searching for the Server rate' reads its sweep at 120 queries per second
    under the Server bounds: the explorer opens on that trial."""
    answers = glued(built_book, "05_scenarios")
    server = REGISTRY["scen_server"]
    trial = server.compute(**server.defaults()).summary
    assert trial.ttft_p99_s * 1e3 == pytest.approx(answers["scen_sweep_120_ttft_ms"])
    assert trial.tpot_p99_s * 1e3 == pytest.approx(answers["scen_sweep_120_tpot_ms"])


@pytest.mark.build
def test_the_speculative_explorer_opens_on_the_sections_worked_example(built_book):
    """Section 'Speculative decoding' works acceptance 0.8 and four draft tokens over
    Cerebras's launch rate: the explorer's first point is that estimate."""
    answers = glued(built_book, "07_choosing_hardware")
    explorer = REGISTRY["hw_speculative"]
    point = explorer.tables_at(**explorer.defaults())["point"]
    assert point["speedup"][0] == pytest.approx(answers["hw_spec_example_speedup"])
    assert point["per_pass"][0] == pytest.approx(answers["hw_spec_example_e"])


@pytest.mark.build
def test_the_plan_explorer_opens_on_the_chapters_own_service(built_book):
    """Chapter 'Sizing a deployment' plans Llama 3.1 8B, 1,000 tokens in and 200 out, a 2 s
    p99 TTFT, a 50 ms p99 TPOT, 20 requests a second: the planner explorer opens on that
    service, and its plans are the chapter's for the chips it shows."""
    answers = glued(built_book, "08_sizing")
    explorer = REGISTRY["hw_plan"]
    start = explorer.defaults()
    text = chapter_text(explorer)
    assert ('plan("Llama 3.1 8B", input_tokens=1000, output_tokens=200, ttft_p99_s=2.0,'
            in text and "tpot_p99_s=0.05, rate_per_s=20)" in text)
    assert (start["model"], start["input_tokens"], start["output_tokens"], start["ttft_p99_s"],
            start["tpot_p99_ms"], start["rate_per_s"]) == ("Llama 3.1 8B", 1000, 200, 2.0, 50,
                                                           20.0)
    found = explorer.compute(**start).planned
    assert found.best().chip == answers["hw_plan_cheapest"]
    assert found.plan_for("NVIDIA H200 SXM").usd_per_mtok == pytest.approx(
        answers["hw_plan_h200_usd"], rel=1e-3)


# ---------------------------------------------------------------------- the site


@cache
def site_spec(name: str):
    """The site's spec of explorer ``name`` and its grid, made as the build makes it: its
    predictions read from the book's store of answers where they are there (the planner's
    grid is a minute of simulation otherwise). The store is read, never written, so the
    build's check of it is unchanged; the notebook's side is always computed."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(memo.FOLDER_ENV, str(ROOT / RESULTS_STORE))
        patch.setenv(memo.MODE_ENV, "read")
        return site.site_spec(REGISTRY[name])


def _render(spec: dict) -> str:
    import vl_convert

    from inferlab.pages.explorers.vega import vega_lite_version

    return vl_convert.vegalite_to_svg(spec, vl_version=vega_lite_version())


def _notebook_spec(explorer, values: dict) -> dict:
    """The notebook's chart at ``values``, its data rounded as the site's are."""
    import altair as alt

    try:
        tables = explorer.tables_at(**values)
        data = {name: [dict(zip(t, row, strict=True)) for row in
                       zip(*(site.rounded(c) for c in t.values()), strict=True)]
                for name, t in tables.items()}
        data[REFUSAL] = []
    except ValueError as error:
        parts = explorer.tables_at(**explorer.defaults())
        data = {name: [] for name in parts}
        data[REFUSAL] = [{"text": f"Cannot compute: {error}"}]
    spec = explorer.figure(lambda n: alt.Chart(alt.Data(name=n))).to_dict(validate=False)
    spec["datasets"] = data
    return spec


def _site_at(spec: dict, explorer, point: tuple) -> dict:
    """The site's spec with its inputs set to grid ``point``."""
    spec = json.loads(json.dumps(spec))
    for param in spec["params"]:
        for control, index in zip(explorer.controls, point, strict=True):
            if param["name"] == site.PARAM.format(control.name):
                index = control.site_values.index(control.default) if index is None else index
                ranged = param["bind"]["input"] == "range"
                param["value"] = control.site_values[index] if ranged else index
    return spec


@pytest.mark.parametrize("name", NAMES)
def test_the_site_draws_what_the_notebook_draws_at_the_same_values(name):
    """Rendered by Vega itself (vl-convert): the site's inputs set to a grid point filter
    the precomputed data down to the very rows the function gives there."""
    explorer = REGISTRY[name]
    spec, grid = site_spec(name)
    points = sorted(grid.parts[REFUSAL], key=str)
    start = explorer.defaults()
    defaults = tuple(c.site_values.index(c.default) if explorer.active(c, start) else None
                     for c in explorer.controls)
    refused = [p for p in points if grid.parts[REFUSAL][p]]
    chosen = [defaults, *random.Random(16).sample(points, 3), *refused[:1]]
    for point in chosen:
        values = site.values_at(explorer, point)
        assert _render(_site_at(spec, explorer, point)) == _render(
            _notebook_spec(explorer, values)), f"{name} at {values}"


def test_each_chapters_explorer_data_fit_a_page():
    by_chapter: dict[str, int] = {}
    for name in NAMES:
        spec, _ = site_spec(name)
        size = len(json.dumps(spec, separators=(",", ":"), allow_nan=False).encode())
        by_chapter[REGISTRY[name].chapter] = by_chapter.get(REGISTRY[name].chapter, 0) + size
    assert max(by_chapter.values()) <= site.LIMIT_BYTES, by_chapter


def test_a_refused_value_shows_its_message_in_both_places():
    from inferlab.pages.explorers.live import LiveView

    roof = REGISTRY["bw_roofline"]
    view = LiveView(roof)
    view.controls["precision"].value = "fp4"  # the H100 has no published FP4 rate
    assert "fp4" in view.view.values[REFUSAL][0]["text"]
    assert all(not rows for part, rows in view.view.values.items() if part != REFUSAL)
    view.controls["precision"].value = "bf16"
    assert view.view.values[REFUSAL] == [] and view.view.values["decode"]
    assert site_spec("bw_roofline")[1].refused > 0


def test_a_control_that_applies_only_with_another_is_greyed_out_until_then():
    from inferlab.pages.explorers.live import LiveView

    view = LiveView(REGISTRY["bw_floor"])
    bandwidth = view.controls["bandwidth_tb_s"]
    assert bandwidth.disabled
    view.controls["chip"].value = "custom bandwidth"
    assert not bandwidth.disabled
    spec, _ = site_spec("bw_floor")
    assert spec["usermeta"]["only_when"] == {
        "ctl_bandwidth_tb_s": ["ctl_chip", REGISTRY["bw_floor"].control("chip")
                               .site_values.index("custom bandwidth")]}


def _small_explorer(kind: str = "analytic", calls: list | None = None,
                    **controls) -> Explorer:
    """An explorer of ``y = a x`` with its controls' grids as given; each computation's
    arguments are appended to ``calls``."""
    made = {"a": Slider("a", "slope", 0.0, 4.0, 0.5, default=1.0, grid=(1.0, 2.0)),
            "x": Slider("x", "input", 0.0, 10.0, 1.0, default=2.0, grid=(2.0,)), **controls}

    def line(a: float, x: float) -> dict:
        if calls is not None:
            calls.append((a, x))
        return {"y": a * x}

    import altair as alt

    return Explorer(name="small", kind=kind, chapter="02_bandwidth_floor",
                    controls=tuple(made.values()), compute=line,
                    tables=lambda result: {"point": {"y": [result["y"]]}},
                    chart=lambda part: part("point").mark_text().encode(
                        text="y:Q", x=alt.value(0), y=alt.value(0)))


def test_a_simulation_explorer_computes_the_next_moves_ahead_and_remembers_them():
    from inferlab.pages.explorers.live import LiveView

    calls: list = []
    view = LiveView(_small_explorer(kind="simulation", calls=calls))
    assert calls == [(1.0, 2.0)], "nothing is computed ahead before the first move"
    view.controls["a"].value = 1.5
    assert view.memo.idle(timeout_s=30)
    # One and two steps either way of each slider, within its range.
    ahead = {(1.5, 3.0), (1.5, 1.0), (2.0, 2.0), (1.0, 2.0), (1.5, 4.0), (1.5, 0.0),
             (2.5, 2.0), (0.5, 2.0)}
    assert set(calls) == {(1.0, 2.0), (1.5, 2.0)} | ahead
    assert all({"a": a, "x": x} in view.memo for a, x in ahead)
    computed = len(calls)
    view.controls["a"].value = 2.0  # computed ahead: shown without computing again
    assert view.view.values["point"] == [{"y": 4.0}]
    assert calls[computed:].count((2.0, 2.0)) == 0
    view.controls["x"].value = 9.0  # nowhere near: computed live
    assert view.view.values["point"] == [{"y": 18.0}]
    assert view.memo.idle(timeout_s=30)
    assert len(calls) == len(set(calls)), "a value was computed twice"


def test_neighbours_stay_in_range_and_skip_a_greyed_out_control():
    from inferlab.pages.explorers.prefetch import neighbours

    explorer = _small_explorer()
    near = neighbours(explorer, {"a": 0.0, "x": 10.0})
    assert near[:2] == [{"a": 0.5, "x": 10.0}, {"a": 0.0, "x": 9.0}]
    assert all(0 <= v["a"] <= 4 and 0 <= v["x"] <= 10 for v in near)
    floor = REGISTRY["bw_floor"]
    values = floor.defaults()
    assert not floor.active(floor.control("bandwidth_tb_s"), values)
    assert all(v["bandwidth_tb_s"] == values["bandwidth_tb_s"]
               for v in neighbours(floor, values))


def test_a_control_the_site_fixes_is_shown_disabled_and_named_in_the_note():
    """A grid of the default alone fixes a control on the site: its input is a menu of
    that one value, which explorers.js disables, and the note says it stays there."""
    explorer = _small_explorer()
    assert fixed_on_site(explorer.control("x")) and not fixed_on_site(explorer.control("a"))
    spec, grid = site.site_spec(explorer)
    assert grid.count == 2 and spec["usermeta"]["fixed"] == ["ctl_x"]
    bound = {p["name"]: p["bind"] for p in spec["params"] if "bind" in p}
    assert bound["ctl_x"]["input"] == "select" and bound["ctl_x"]["labels"] == ["2"]
    assert "input at 2 stays fixed" in site.static_html(explorer)
    assert "usermeta.fixed" in (ROOT / "book" / "_static" / "explorers.js").read_text()
    with pytest.raises(ValueError, match="grid"):
        Slider("x", "input", 0.0, 10.0, 1.0, default=2.0, grid=())
    with pytest.raises(ValueError, match="fixes"):
        _small_explorer(a=Slider("a", "slope", 0.0, 4.0, 0.5, default=1.0, grid=(1.0, 2.0),
                                 only_when=("x", 2.0)))


def test_the_plan_explorer_fixes_only_what_its_grid_cannot_afford():
    """The planner's site fixes the lengths, the TTFT bound and the precision (each value
    more multiplies the plans the build runs), never the model, the TPOT bound or the
    rate."""
    fixed = [c.name for c in REGISTRY["hw_plan"].controls if fixed_on_site(c)]
    assert fixed == ["input_tokens", "output_tokens", "ttft_p99_s", "precision"]
    # The decision guide's two controls move on the site too; they rerun no plan.
    others = [name for name in NAMES if name != "hw_plan"]
    assert not [(n, c.name) for n in others for c in REGISTRY[n].controls if fixed_on_site(c)]


def test_rounding_keeps_four_significant_figures_and_prints_short():
    values = site.rounded(np.array([16.60512, 0.000123456, 131072.0, 1234567.0, np.nan, 0.0,
                                    -2.5, np.inf]))
    assert values == [16.61, 0.0001235, 131100, 1235000, None, 0, -2.5, None]
    assert json.dumps(values) == "[16.61, 0.0001235, 131100, 1235000, null, 0, -2.5, null]"


# -------------------------------------------------------------- truthful kinds


# Counts the simulator's runs while an explorer computes its first picture, in a fresh
# interpreter: the simulator's results are cached (choosing.latency_spread), so in this
# process a simulation explorer that another test ran first would run none.
_SIMULATOR_RUNS = """
import sys
from inferlab.serving import simulator
from inferlab.pages.explorers import registered_explorers
explorer = registered_explorers()[sys.argv[1]]
runs = 0
def profile(frame, event, arg):
    global runs
    # Every simulated run ends in _result, whichever entry point or engine ran it.
    if event == "call" and frame.f_code is simulator._result.__code__:
        runs += 1
sys.setprofile(profile)
explorer.tables_at(**explorer.defaults())
sys.setprofile(None)
print(runs)
"""


@pytest.mark.parametrize("name", NAMES)
def test_an_explorer_is_the_kind_it_says(name):
    explorer = REGISTRY[name]
    runs = int(subprocess.run([sys.executable, "-c", _SIMULATOR_RUNS, name], capture_output=True,
                              text=True, check=True, cwd=ROOT).stdout)
    if explorer.kind == "analytic":
        assert runs == 0, f"{name} is registered analytic but runs the simulator"
    elif explorer.kind == "simulation":
        assert runs > 0, f"{name} is registered as a simulation but runs no simulation"


# ------------------------------------------------------- model modules stay light

MODEL_MODULES = ["common.bisection", "serving.calibration", "model.capacity", "common.checks",
                 "choosing", "pages.claims", "common.data", "lab.endpoint_metrics",
                 "model.feasibility", "serving.loadgen", "lab.measure", "benchmark.mlperf",
                 "model.parallel", "predict", "model.roofline", "serving.scheduler",
                 "serving.simulator", "model.specs", "serving.speculative", "model.steptime",
                 "lab.timing", "tokens.token_counts", "tokens.tokenizers", "benchmark.traffic"]

@pytest.mark.parametrize("module", MODEL_MODULES)
def test_importing_a_model_module_loads_no_widgets_or_pyplot(module):
    code = (f"import sys, inferlab.{module}; "
            "print([m for m in ('ipywidgets', 'matplotlib.pyplot', 'altair', 'anywidget') "
            "if m in sys.modules])")
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, cwd=ROOT).stdout.strip()
    assert loaded == "[]", f"inferlab.{module} loads {loaded}"


def test_the_vega_bundle_is_the_one_recorded_and_loads_nothing():
    import hashlib

    from inferlab.pages.explorers import vega

    text = vega.bundle()
    assert hashlib.sha256(text.encode()).hexdigest() == vega.BUNDLE_SHA256
    assert "window.vegaEmbed=" in text
    # The bundle reaches no server: no module import, dynamic or static, from a URL.
    assert "import(\"http" not in text and "from\"http" not in text and "esm.sh" not in text
