"""The serving model against audited MLPerf results: which configurations it predicts, and how well.

Several submitters often run the same configuration (eight H200s, the same stack, the same
format and scenario). The model cannot tell their rows apart, so it predicts each such
*group* once (:func:`inferlab.serving.calibration.row_key`) and compares the prediction with the
median of the group's reported results: a configuration many vendors submitted counts
once. A group holding a row a stack was fitted on is *fitted*; every other group, and every
group of a benchmark other than Llama 2 70B, is *held out*.

Llama 2 70B's rows are ``data/mlperf_llama2_70b.csv``; the other LLM benchmarks' rows
(Llama 3.1 8B, Llama 3.1 405B, Mixtral 8x7B, DeepSeek-R1) are
``data/mlperf_llm_results.csv``. Each benchmark is predicted on its own data set
(:meth:`inferlab.benchmark.workload.Workload.dataset`) under MLPerf's rules for it, run as long as
its submitters ran it (:func:`run_rules`), or a scaled copy of that for a page that must
build quickly.

A vendor's own throughput table is a second held-out test, of another kind: every request
of a row has the same lengths, from 128 tokens in and out to 20,000 in and 2,000 out, and
all are queued at once, as the fixed-lengths workload's steady Offline runs them
(:func:`vendor_table`, on ``data/trtllm_throughput.csv``).

Used by ``benchmarks/model_accuracy.py``, chapter 'Benchmark scenarios' and the appendix
'How far the model carries'.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, replace

import pandas as pd

from inferlab.benchmark.mlperf import BENCHMARK_MODELS, SCENARIOS, bounds
from inferlab.benchmark.verdict import MAX_QUERIES, RunRules, mlperf_rules
from inferlab.benchmark.workload import Workload
from inferlab.common import checks
from inferlab.common.data import load_table
from inferlab.model import specs
from inferlab.model.feasibility import Infeasible
from inferlab.predict import Prediction, predict
from inferlab.serving import calibration
from inferlab.serving.calibration import row_key, stack, stacks

#: The benchmarks no number of the model was fitted on, in the order they are scored.
HELD_OUT = ("llama3.1-8b", "llama3.1-405b", "mixtral-8x7b", "deepseek-r1")


@dataclass(frozen=True)
class Scored:
    """One group's prediction against the median of its reported results.

    ``key`` is ``(accelerator, accelerators, precision, scenario, stack)``; ``rows`` the
    ids of the audited rows in the group; ``fitted`` whether a stack was fitted on one
    of them.
    """

    benchmark: str
    key: tuple
    rows: tuple[str, ...]
    reported_tok_s: float
    prediction: Prediction
    fitted: bool

    @property
    def error(self) -> float:
        """Predicted over reported, less one."""
        return self.prediction.tokens_per_s / self.reported_tok_s - 1


def audited_rows(benchmark: str):
    """The audited rows of ``benchmark`` (one of ``llama2-70b`` and :data:`HELD_OUT`)."""
    checks.option("benchmark", benchmark, ("llama2-70b", *HELD_OUT))
    if benchmark == "llama2-70b":
        return load_table("mlperf_llama2_70b")
    table = load_table("mlperf_llm_results")
    return table[table["benchmark"] == benchmark]


def row_groups(table) -> tuple[dict[tuple, list[dict]], list[tuple[str, str]]]:
    """The modelled groups ``{key: [rows]}`` of an audited table and the skipped rows
    ``[(id, reason)]`` (software the book does not model, a chip it has no specs for)."""
    found, skipped = {}, []
    for row in table.to_dict("records"):
        key, reason = row_key(row)
        if key is None:
            skipped.append((row["id"], reason))
        else:
            found.setdefault(key, []).append(row)
    return found, skipped


def run_rules(benchmark: str, scenario: str, group, *, scale: float = 1.0) -> RunRules:
    """MLPerf's rules for ``benchmark``, lengthened to the run its rows record.

    A submitter may run longer than ``mlperf.conf`` asks (more queries, a longer minimum
    duration, set in ``user.conf``), and the run's LoadGen log says so: the rows'
    ``run_queries`` and ``run_duration_s``. A run of long answers gives another result
    when it is longer (a short Offline run is more drain tail; a short Server run can end
    before its queue has grown), so the model runs the group as one of its rows ran: the
    row of the lower median query count among those with a log (the others, from a
    results table, record nothing), never below MLPerf's minimum, times ``scale``. An
    Offline count is held to what a run may hold
    (:data:`~inferlab.benchmark.verdict.MAX_QUERIES`); a result of answers that short
    moves by well under a per cent past a million samples. A group with no log behind it
    gets MLPerf's minimum.
    """
    checks.option("benchmark", benchmark, ("llama2-70b", *HELD_OUT))
    checks.option("scenario", scenario, SCENARIOS)
    if isinstance(group, (str, bytes)) or not all(
            isinstance(row, dict) and _recorded(row.get("run_queries"))
            == _recorded(row.get("run_duration_s")) for row in group):
        raise ValueError("group: give the group's rows, each a dict with both of "
                         "run_queries and run_duration_s or neither (as row_groups gives them)")
    rules = mlperf_rules(benchmark, scale=scale)
    recorded = sorted((int(row["run_queries"]), float(row["run_duration_s"]))
                      for row in group if _recorded(row.get("run_queries")))
    if not recorded:
        return rules
    queries, duration = recorded[(len(recorded) - 1) // 2]
    count = math.ceil(queries * scale)
    if scenario == "Offline":
        most = MAX_QUERIES - MAX_QUERIES % rules.dataset_samples
        if count > most:
            # Held to the most a run may hold, the count sets the length; a longer minimum
            # duration would only ask the (faster) model for more samples than that.
            return replace(rules, offline_min_samples=most)
        rules = replace(rules, offline_min_samples=max(rules.offline_min_samples, count))
    else:
        rules = replace(rules, min_queries=max(rules.min_queries, count))
    return replace(rules, min_duration_s=max(rules.min_duration_s, duration * scale))


def _recorded(value) -> bool:
    return value is not None and not (isinstance(value, float) and math.isnan(value))


def score(benchmark: str, *, scenarios=SCENARIOS, scale: float = 1.0, stack_names=None,
          on_group=None) -> tuple[list[Scored], list[tuple[str, str]]]:
    """Predict every group of ``benchmark`` in ``scenarios`` and pair it with its median.

    Each group runs as long as its rows record (:func:`run_rules`); ``scale`` shortens
    that (:func:`inferlab.benchmark.verdict.mlperf_rules`);
    ``stack_names`` keeps only those stacks' groups. ``on_group``, if given, sees each
    :class:`Scored` as it is computed (a benchmark prints it). Returns the scored groups
    and the skipped rows with their reasons: a refused prediction, and a rate search that
    ended at its own limit rather than at a bound, are among them.
    """
    rows = audited_rows(benchmark)
    scale = checks.fraction("scale", scale, low_open=True)
    fitted_ids = {row_id for known in stacks().values() for row_id in known.fitted_on}
    found, skipped = row_groups(rows)
    scored = []
    for key, group in sorted(found.items()):
        scenario, name = key[3], key[4]
        if scenario not in scenarios or (stack_names and name not in stack_names):
            continue
        try:
            result = _predicted(benchmark, key,
                                run_rules(benchmark, scenario, group, scale=scale), scale)
        except (Infeasible, ValueError) as error:
            skipped.extend((row["id"], f"not predicted: {error}") for row in group)
            continue
        if result.at_ceiling:
            # Every rate the search tried passed: its answer is the search's limit, a
            # floor and not a prediction.
            skipped.extend((row["id"], f"not predicted: every rate up to "
                            f"{result.rate_per_s:,.0f} queries/s passed, the most the "
                            "search tries") for row in group)
            continue
        entry = Scored(benchmark, key, tuple(row["id"] for row in group), _reported(group),
                       result, any(row["id"] in fitted_ids for row in group))
        scored.append(entry)
        if on_group is not None:
            on_group(entry)
    return scored, skipped


def _reported(group) -> float:
    """The median of a group's reported results: one figure for a configuration that
    several submitters ran."""
    return statistics.median(row["tokens_per_s"] for row in group)


def _predicted(benchmark: str, key: tuple, rules: RunRules, scale: float = 1.0) -> Prediction:
    """The group ``key`` (``(accelerator, accelerators, precision, scenario, stack)``)
    predicted on ``benchmark``'s data set under ``rules``. A Server or Interactive run so
    long that, at the rates the search reaches, it would hold more queries than a run may
    (the search then stops with every rate passing) is halved in duration until it fits,
    down to MLPerf's minimum at ``scale``: past a few minutes, answers that short no longer
    move the result."""
    chip, chips, precision, scenario, name = key
    shortest = mlperf_rules(benchmark, scale=scale).min_duration_s
    while True:
        result = predict(chip, chips, BENCHMARK_MODELS[benchmark], precision, scenario,
                         workload=benchmark, stack=stack(name), rules=rules)
        if not result.at_ceiling or rules.min_duration_s <= shortest:
            return result
        rules = replace(rules, min_duration_s=max(shortest, rules.min_duration_s / 2))


@dataclass(frozen=True)
class RunLength:
    """One audited configuration modelled under MLPerf's shortest valid run and under the
    run its submitters made (:func:`run_length_effect`), beside what they reported.

    ``key`` is the group's ``(accelerator, accelerators, precision, scenario, stack)``.
    """

    key: tuple
    minimum: RunRules
    ran: RunRules
    minimum_tok_s: float
    ran_tok_s: float
    reported_tok_s: float


def run_length_effect(benchmark: str, chip: str, chips: int,
                      scenario: str = "Offline") -> RunLength:
    """How much the length of a run moves its result: the audited ``scenario`` group of
    ``chips`` x ``chip`` on ``benchmark``, modelled at MLPerf's minimum and as long as its
    rows record (:func:`run_rules`).

    Raises ``ValueError`` naming ``chip`` if ``benchmark`` has no such group.

    Used in chapter 'Benchmark scenarios' and the appendix 'How far the model carries'.
    """
    checks.option("benchmark", benchmark, HELD_OUT)
    checks.option("scenario", scenario, SCENARIOS)
    chips = checks.whole("chips", chips)
    name = specs.as_chip(chip).name
    found = [(key, group) for key, group in row_groups(audited_rows(benchmark))[0].items()
             if key[:2] == (name, chips) and key[3] == scenario]
    if not found:
        raise ValueError(f"chip: {benchmark} has no audited {scenario} result of {chips} x "
                         f"{name} that the model predicts")
    if len(found) > 1:
        raise ValueError(f"chip: {chips} x {name} ran {benchmark} {scenario} in "
                         f"{len(found)} ways (" + ", ".join(f"{k[2]} on {k[4]}" for k, _ in found)
                         + "); this compares one")
    key, group = found[0]
    minimum, ran = mlperf_rules(benchmark), run_rules(benchmark, scenario, group)
    return RunLength(key, minimum, ran, _predicted(benchmark, key, minimum).tokens_per_s,
                     _predicted(benchmark, key, ran).tokens_per_s, _reported(group))


@dataclass(frozen=True)
class AtOwnRate:
    """One audited Server or Interactive run modelled at the rate LoadGen issued it at.

    A Server result is the rate its submitter chose; the run's summary also records the
    latencies the system held at that rate (``data/mlperf_llm_latencies.csv``). Modelled
    at the same rate, the same engine and the same run length, the model's p99s meet
    those directly, without a search for the highest rate in between: its time per
    output token is its decode step at the batch that load builds.

    ``key`` is the run's group (``(accelerator, accelerators, precision, scenario,
    stack)``), ``rate_per_s`` LoadGen's scheduled rate, the ``measured_`` p99s LoadGen's.
    """

    id: str
    key: tuple
    rate_per_s: float
    measured_ttft_p99_s: float
    measured_tpot_p99_s: float
    prediction: Prediction

    @property
    def tpot_error(self) -> float:
        """The modelled p99 TPOT over the measured one, less one."""
        return self.prediction.tpot_p99_s / self.measured_tpot_p99_s - 1

    @property
    def ttft_error(self) -> float:
        """The modelled p99 TTFT over the measured one, less one."""
        return self.prediction.ttft_p99_s / self.measured_ttft_p99_s - 1


def at_own_rates(benchmark: str, *, scale: float = 1.0) -> list[AtOwnRate]:
    """Every audited Server and Interactive run of ``benchmark`` (one of :data:`HELD_OUT`)
    whose LoadGen summary ``data/mlperf_llm_latencies.csv`` records, modelled at its own
    scheduled rate (:func:`inferlab.predict.predict` with ``rate_per_s``) under the rules
    of its own run (:func:`run_rules` of that row alone, times ``scale``), in the order of
    the groups and rows of :func:`row_groups`. Runs of software the book has no stack for
    are left out, as the scoring leaves them out.

    Used in the appendix 'How far the model carries'.
    """
    checks.option("benchmark", benchmark, HELD_OUT)
    latencies = load_table("mlperf_llm_latencies").set_index("id")
    found = []
    for key, group in row_groups(audited_rows(benchmark))[0].items():
        chip, chips, precision, scenario, name = key
        for row in group:
            if row["id"] not in latencies.index:
                continue
            run = latencies.loc[row["id"]]
            rate = float(run["scheduled_samples_per_s"])
            prediction = predict(chip, chips, BENCHMARK_MODELS[benchmark], precision, scenario,
                                 workload=benchmark, stack=stack(name),
                                 rules=run_rules(benchmark, scenario, [row], scale=scale),
                                 rate_per_s=rate)
            found.append(AtOwnRate(row["id"], key, rate, float(run["ttft_p99_ms"]) / 1e3,
                                   float(run["tpot_p99_ms"]) / 1e3, prediction))
    return found


def bound_share(benchmark: str, row_id: str) -> float:
    """How near the run of audited row ``row_id`` of ``benchmark`` came to its scenario's
    bounds: the larger of its p99 TTFT and p99 TPOT, each as a share of its bound, from
    the run's LoadGen summary (``data/mlperf_llm_latencies.csv``, or for Llama 2 70B
    :func:`inferlab.serving.calibration.bound_share`); ``nan`` where no summary is
    recorded (an Offline run has none). A Server result well short of both bounds is the
    rate its submitter asked for, not the most the system holds."""
    checks.option("benchmark", benchmark, ("llama2-70b", *HELD_OUT))
    if benchmark == "llama2-70b":
        return calibration.bound_share(row_id)
    rows = audited_rows(benchmark).set_index("id")
    if row_id not in rows.index:
        raise ValueError(f"row_id: {row_id!r} is not a {benchmark} row of "
                         "data/mlperf_llm_results.csv")
    latencies = load_table("mlperf_llm_latencies").set_index("id")
    if row_id not in latencies.index:
        return math.nan
    limit = bounds(benchmark, rows.loc[row_id, "scenario"])
    run = latencies.loc[row_id]
    return max(float(run["ttft_p99_ms"]) / (limit.ttft_s * 1e3),
               float(run["tpot_p99_ms"]) / (limit.tpot_s * 1e3))


@dataclass(frozen=True)
class VendorRow:
    """One row of a vendor's throughput table beside the model's prediction of it.

    ``id`` is the row's in ``data/trtllm_throughput.csv``; ``mixture`` whether its model
    is a mixture of experts; ``reported_tok_s`` its output tokens a second over the run's
    ``tp x pp`` chips; ``prediction`` the same configuration's steady Offline run of fixed
    lengths.
    """

    id: str
    model: str
    mixture: bool
    accelerator: str
    tp: int
    pp: int
    precision: str
    input_tokens: int
    output_tokens: int
    reported_tok_s: float
    prediction: Prediction

    @property
    def error(self) -> float:
        """Predicted over reported, less one."""
        return self.prediction.tokens_per_s / self.reported_tok_s - 1

    @property
    def fitted(self) -> bool:
        """Never: no number of the model was fitted on a vendor's table
        (:func:`median_abs_error` counts every row)."""
        return False


def vendor_table(models=None) -> list[VendorRow]:
    """Every row of TensorRT-LLM's published throughput table
    (``data/trtllm_throughput.csv``: ``trtllm-bench``, every request queued at once, all of
    one input and output length) predicted by :func:`inferlab.predict.predict` at the
    row's own chips, layout and weight format, on the vendor's default stack for the chip,
    in the table's order. No number of the model was fitted on these rows, and the model
    is given only the lengths: neither the engine's batch limit nor its share of memory
    for the cache, which the table does not record. A mixture of experts spreads its
    experts over all ``tp`` chips of a stage (``ep = tp``): the page's command for those
    models sets an expert-parallel width without giving it per column. The choice moves
    a configuration's median error by up to six points and the median over the mixtures'
    rows by less than one (measured with ``ep = 1`` on the main tables' 110 rows).
    ``models`` keeps only those models' rows (names as the table gives them).

    Used in the appendix 'How far the model carries'.
    """
    table = load_table("trtllm_throughput")
    if models is not None:
        named = sorted(set(table["model"]))
        if isinstance(models, (str, bytes)) or not all(
                isinstance(name, str) and name in named for name in models):
            raise ValueError(f"models: give a list of names among {', '.join(named)}")
        table = table[table["model"].isin(list(models))]
    found = []
    for row in table.to_dict("records"):
        tp, pp = int(row["tp"]), int(row["pp"])
        mixture = specs.model(row["model"]).experts > 1
        prediction = predict(row["accelerator"], tp * pp, row["model"], row["precision"],
                             "Offline", tps=[tp], pp=pp, ep=tp if mixture else 1,
                             workload=Workload.fixed(int(row["input_tokens"]),
                                                     int(row["output_tokens"])))
        found.append(VendorRow(row["id"], row["model"], mixture, row["accelerator"], tp, pp,
                               row["precision"], int(row["input_tokens"]),
                               int(row["output_tokens"]), float(row["tokens_per_s"]),
                               prediction))
    return found


@dataclass(frozen=True)
class VendorConfiguration:
    """The rows of a vendor's table that share a model, chip, layout and weight format
    (:func:`vendor_configurations`): one configuration at its several lengths."""

    model: str
    mixture: bool
    accelerator: str
    tp: int
    pp: int
    precision: str
    rows: tuple[VendorRow, ...]

    @property
    def median_error(self) -> float:
        """The median of its rows' errors, with their signs."""
        return statistics.median(row.error for row in self.rows)

    @property
    def rank_agreement(self) -> float:
        """The rank (Spearman) correlation of modelled and reported rates over its rows,
        how far the model orders the configuration's lengths as the table does."""
        reported = pd.Series([row.reported_tok_s for row in self.rows])
        modelled = pd.Series([row.prediction.tokens_per_s for row in self.rows])
        return float(reported.rank().corr(modelled.rank()))


def vendor_configurations(rows) -> list[VendorConfiguration]:
    """The configurations of ``rows`` (of :func:`vendor_table`), in the order of their
    first rows. Used in the appendix 'How far the model carries'."""
    grouped = {}
    for row in rows:
        grouped.setdefault((row.model, row.mixture, row.accelerator, row.tp, row.pp,
                            row.precision), []).append(row)
    return [VendorConfiguration(*key, tuple(group)) for key, group in grouped.items()]


def median_abs_error(scored) -> float:
    """The median absolute error over the held-out groups of ``scored`` (each counted once)."""
    errors = [abs(entry.error) for entry in scored if not entry.fitted]
    if not errors:
        raise ValueError("scored: no held-out group to take a median of")
    return statistics.median(errors)
