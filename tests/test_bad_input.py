"""Every public callable of the modules ``book/api.md`` documents, fed right-typed bad values.

The callables are read from the page's ``automodule`` directives, so a new function is
covered without a new test. Each is first called with good arguments (its defaults, else
:data:`GOOD`); then Hypothesis replaces one argument at a time with a bad value of the
same kind: negative, zero, NaN, +-inf, huge, empty, an unknown name. Allowed outcomes are
a result with no non-finite number where the good call had a finite one, or a
``ValueError`` / ``TypeError`` whose message names the replaced argument. Anything else
(another exception, running past :data:`LIMIT_S`, running out of the memory bound) fails.

Pure records (dataclasses without ``__post_init__``, named tuples, exceptions) compute
nothing from their fields and are not called; :data:`EXEMPT` lists, with reasons, the
few callables whose job is to start servers or time the reader's machine.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import math
import re
import resource
import signal
import tempfile
from functools import cache
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

API_PAGE = ROOT / "book" / "api.md"
TRACES = ROOT / "data" / "traces"

#: Wall-clock seconds one call may take; the good calls below take well under a tenth.
LIMIT_S = 3.0

#: A good call may take longer: the first one of a module imports and loads its data.
GOOD_LIMIT_S = 30.0

#: Memory a call may add to the test process before an allocation fails (MemoryError).
MEMORY_HEADROOM_BYTES = 3 * 2**30

#: Bad-value calls per callable; with a fixed seed, the same ones on every run.
EXAMPLES_PER_CALLABLE = 40

#: Fewer calls for the callables whose good call takes seconds (a tokenizer written out,
#: a whole prediction), so that the test stays within a minute.
FEWER_EXAMPLES = {"hf_tokenizer.write_tokenizer_dir": 4, "hf_tokenizer.hf_tokenizer_json": 4,
                  "predict.predict": 10}

#: Callables not fuzzed, and why. Each starts something long-lived or times the machine.
EXEMPT = {
    "server.LabServer": "starts an HTTP server on a port (tests/test_server_robustness.py)",
    "server.main": "runs the server until interrupted",
    "engine_loop.EngineLoop": "starts the engine thread of a running server",
    "engine_loop.ServedSequence": "made by a running server for a request it admitted, on its "
                                  "event loop",
    "loadclient.run_load": "sends requests to a live endpoint for up to duration_s",
    "real_loadgen.run": "runs MLCommons LoadGen for min_duration_s of wall-clock time",
    "machine.probe_bandwidth": "times memory bandwidth of this machine over many repeats",
    "machine.probe_matmul": "times matrix products of this machine over many repeats",
    "machine.measured_bandwidth": "times this machine's memory and keeps the figure in a folder",
    "measure.time_repeats": "a timing loop of the reader's function",
    "measure.ttft_by_prompt_length": "times prefill of the NumPy engine at each length",
    "measure.decode_step_times": "times decode steps of the NumPy engine at each size",
    "predict.cli.main": "the command line; tests/test_predict.py runs it as a program",
    "memo.prune": "deletes stored answers in the folder it is given (test_results_store.py)",
    "memo.stale": "reads every JSON file of the folder it is given (test_results_store.py)",
    # Not long-running, but it parses a trace only a LoadGen run writes (test_real_loadgen).
    "real_loadgen.read_trace": "needs the trace file of a real LoadGen run",
    # Its request log is a QueryLog, whose checks are fuzzed as verdict.QueryLog.
    "simulator.SimResult": "built by simulate from its engine's record, never by a caller",
}


# --- what book/api.md documents -----------------------------------------------------------


def _directives(text: str) -> list[tuple[str, list[str]]]:
    """``(module, listed members)`` for each automodule; an empty list means all members."""
    found = []
    for block in re.finditer(r"\.\. automodule:: (\S+)\n((?:[ \t]+\S.*\n)*)", text):
        members = re.search(r":members:(.*(?:\n[ \t]{6,}\S.*)*)", block.group(2))
        listed = members.group(1).replace("\n", " ").split(",") if members else []
        found.append((block.group(1), [name.strip() for name in listed if name.strip()]))
    return found


def _public(module) -> list[str]:
    return [name for name, value in vars(module).items()
            if not name.startswith("_") and callable(value)
            and getattr(value, "__module__", None) == module.__name__]


def _is_record(value) -> bool:
    if not inspect.isclass(value):
        return False
    plain_dataclass = dataclasses.is_dataclass(value) and not hasattr(value, "__post_init__")
    return plain_dataclass or issubclass(value, (BaseException, tuple))


#: The package's layers (inferlab/__init__.py): a key names a module without its layer, as
#: ``explorers.base`` for ``inferlab.pages.explorers.base``; module names are unique.
LAYERS = {"common", "benchmark", "model", "tokens", "serving", "lab", "pages"}


def short_module(name: str) -> str:
    parts = name.split(".")[1:]
    return ".".join(parts[1:] if parts and parts[0] in LAYERS else parts)


@cache
def documented() -> dict[str, object]:
    """Every public callable the API page documents, keyed ``module.name``."""
    table = {}
    for module_name, listed in _directives(API_PAGE.read_text()):
        module = importlib.import_module(module_name)
        for name in listed or _public(module):
            value = getattr(module, name)
            if callable(value):
                table[f"{short_module(module_name)}.{name}"] = value
    return table


def _methods(cls) -> list[str]:
    """Public methods of a frozen dataclass: pure functions of a value (``Lengths.sample``).

    Stateful objects (engines, caches, policies) are left out: their methods take the
    engine's own state, which no caller outside the package builds.
    """
    parameters = getattr(cls, "__dataclass_params__", None)
    if parameters is None or not parameters.frozen:
        return []
    return [name for name, value in vars(cls).items()
            if not name.startswith("_") and inspect.isfunction(value)]


def fuzzed() -> list[str]:
    """The names called here: functions, classes that check, and the methods of those."""
    names = []
    for name, value in documented().items():
        if _is_record(value) or name in EXEMPT:
            continue
        names.append(name)
        if inspect.isclass(value):
            names += [f"{name}.{method}" for method in _methods(value)]
    return names


# --- good arguments ---------------------------------------------------------------------


def _replica():
    from inferlab.model import steptime
    return steptime.replica("Llama 3.1 8B", "NVIDIA H100 SXM")


def _requests():
    from inferlab.benchmark import traffic
    return traffic.make_requests(8, traffic.Lengths(64), traffic.Lengths(16),
                                  rate_per_s=10.0, seed=0)


def _trace_requests():
    from inferlab.lab import endpoint_metrics
    return [endpoint_metrics.synthetic_request(0.1, 0.01, 8),
            endpoint_metrics.synthetic_request(0.2, 0.02, 4)]


def _query_log():
    from inferlab.benchmark import verdict
    issued = np.arange(4, dtype=float)
    return verdict.QueryLog(issued, issued + 0.1, issued + 0.5, np.full(4, 8))


def _engine_config():
    from inferlab.lab import engine_sizes
    return engine_sizes.EngineConfig(layers=1, model_width=16, heads=2, kv_heads=1,
                                     mlp_width=32, vocab_size=64)


def _steady_state():
    from inferlab.model import steptime
    return steptime.steady_state(_replica(), [1, 8, 64], 300, 300)


def _parallel_step():
    from inferlab.model import parallel
    return parallel.tensor_parallel_step(1e9, 1e12, 2, layers=2, hidden_size=64,
                                         link_bytes_per_s=1e11)


def _figure():
    import matplotlib.pyplot as plt
    figure, _ = plt.subplots()
    plt.close(figure)
    return figure


def _axes():
    return _figure().axes[0]


def _script():
    from inferlab.serving import real_loadgen
    return real_loadgen.Script(np.full(4, 0.05), np.full(4, 0.01), np.full(4, 8))


def _slider():
    from inferlab.pages.explorers import Slider
    return Slider("speed", "speed (tok/s)", 1.0, 100.0, 1.0, default=10.0, grid=(1.0, 10.0))


def _explorer():
    import altair as alt

    from inferlab.pages.explorers import Explorer
    return Explorer("fuzz_explorer", "analytic", "02_bandwidth_floor", (_slider(),),
                    lambda speed: speed, lambda result: {"point": {"speed": [result]}},
                    lambda part: part("point").mark_point().encode(x="speed:Q",
                                                                    y=alt.value(0)))


def _fixed_shape():
    from inferlab.serving import scheduler
    return scheduler.FixedShape()


def _token_counts():
    from inferlab.tokens import token_counts
    return token_counts.count_tokens(tokenizers=("cl100k_base", "o200k_base"))


#: A good value for each argument without a default, by name; callables build the value
#: when first needed. ``"module.function.argument"`` overrides a name for one function.
GOOD = {
    "acceptance_rate": 0.8, "accelerator": "NVIDIA H100 SXM", "arrival_s": np.zeros(2),
    "ax": _axes, "bandwidth_bytes_per_s": 3.35e12, "bandwidth_tb_s": 3.35, "base": 1e4,
    "base_decode_tok_per_s": 100.0, "batch": 2, "bound_s": 1.0, "budget": 512,
    "budget_s": 10.0, "bytes_moved": 1e9, "bytes_read": 1e9, "capacity": 256,
    "capacity_bytes": 80e9, "capacity_bytes_per_chip": 80e9, "changes_per_month": 1.0,
    "chapter": "01_prefill_decode", "chars_per_token": 4.0, "chip": "NVIDIA H100 SXM",
    "chips": 2, "claimed_tok_s": 100.0, "concurrency": [1, 8], "config": _engine_config,
    "context_tokens": 1024, "count_tokens": len, "counts": _token_counts,
    "cos": np.ones((1, 2)), "decode_tok_per_s": 50.0, "denominator": "o200k_base",
    "draft_cost_ratio": 0.05, "draft_tokens": 4, "duration_s": 1.0, "e2e_s": 2.0,
    "eps": 1e-5, "expected_latency_s": 0.01, "family": "NVIDIA", "fig": _figure,
    "finish_s": np.ones(2), "first_token_s": np.full(2, 0.5), "flop": 1e12,
    "flop_per_s": 1e12, "fraction": 0.5, "function": math.sqrt, "gain": np.ones(4),
    "hardware_family": "NVIDIA", "head_width": 4, "heads": 2, "hidden_size": 64,
    "high": 4.0, "ids": ["groq-claim-l2-70b"], "intensity_flop_per_byte": 10.0,
    "iterations": 10, "k": 2, "k_max": 8, "kind": "open-loop",
    "kv_bytes_per_token": 1e5, "kv_heads": 1, "kv_kib_per_token": 128.0, "label": "claim",
    "largest": 2048, "latencies_s": np.linspace(0.1, 1.0, 100), "layers": 2,
    "link_bytes_per_s": 1e11, "llama2_tokens": 100, "log": _query_log, "logits": np.ones(4),
    "low": 1.0, "m0": 0.01, "m1": 0.001, "max_batch": 8, "mean_tokens": 64.0,
    "measure": lambda x: x, "merges": [(0, 1)], "message_bytes": 1e6,
    "min_duration_s": 1.0, "min_per_user_tok_s": 10.0, "mlp_width": 32,
    "model": "Llama 3.1 8B", "model_width": 16, "n": 4, "name": "NVIDIA H100 SXM",
    "needs": lambda: importlib.import_module("inferlab.lab.engine_sizes").estimate(
        _engine_config()),
    "numerator": "cl100k_base", "output_cv": 1.0, "output_tokens": 100,
    "overlatency": 1, "own_tok_s": 100.0, "own_tokens": 100, "params": 8e9,
    "params_active": 8e9, "params_b": 8.0, "peak_flop_per_s": 1e15,
    "per_chip": [1.0, 2.0], "per_user": [2.0, 1.0], "percentile": 0.9,
    "positions": np.arange(2), "precision": "fp8", "prefill_tok_per_s": 1000.0,
    "prompt": lambda: importlib.import_module("inferlab.benchmark.traffic").Lengths(64),
    "prompt_tokens": 64, "q": 0.5, "r": lambda: _trace_requests()[0],
    "rate_per_s": 10.0, "rate_with_ttft_tok_per_s": 40.0, "rep": _replica,
    "repeats": 2, "replica": _replica, "replicas": 1, "requests": _requests,
    "reserve_output_tokens": 16, "result_id": "groq-claim-l2-70b", "rng": np.random.default_rng,
    "rows": list, "scenario": "Server", "scheduled_s": np.arange(30000.0), "seconds": np.ones(3),
    "sin": np.zeros((1, 2)), "smallest": 128, "software": "TensorRT-LLM",
"state": _steady_state, "step_1": _parallel_step,
    "step_s": 0.01, "step_tp": _parallel_step, "table": list, "target": 2.0,
    "target_speedup": 2.0, "tau": 0.1, "text": "hello world", "tok_per_s": 10.0,
    "tok_s": 100.0, "tokens": 8, "tokens_from": 100.0, "tokens_per_word": 1.3,
    "tokens_to": 120.0, "total_bytes": 1e11, "tp": 2, "tpot_bound_s": 0.1,
    "tpot_p99_s": 0.2, "tpot_s": 0.01, "transfer_bytes_per_s": 1e10, "ttft_bound_s": 2.0,
    "ttft_p99_s": 5.0, "ttft_s": 0.5, "underlatency": 100, "unit": "tok/s",
    "value": 1.0, "values": [1.0, 2.0, 3.0], "vocab_size": 64, "weight_bytes": 16e9,
    "words_per_minute": 240.0, "words_per_token": 0.75, "x": np.ones((1, 4)),
    "script": _script, "control": _slider, "shape": _fixed_shape, "shapes": _fixed_shape,
    "pool": lambda: importlib.import_module("inferlab.serving.scheduler").PrefillPool(
        lambda tokens: 1e-4 * tokens, 1e5, 1e10),
"key": "fuzz", "compute": dict, "render": str, "controls": dict,
    "figure": _figure,
    "rules": lambda: importlib.import_module("inferlab.benchmark.verdict").mlperf_rules(),
    "workload": lambda: importlib.import_module("inferlab.benchmark.workload").Workload(),
    "system": lambda: importlib.import_module("inferlab.serving.example").example_system(),
    "scheduler": lambda: importlib.import_module("inferlab.serving.scheduler").Scheduler(),
    "passes": lambda: (lambda x: x < 3), "trial": lambda: (lambda x: x < 3.0),
    "row": lambda: importlib.import_module("inferlab.common.data").result("groq-claim-l2-70b"),
    "claim": lambda: importlib.import_module("inferlab.pages.claims").claim_from_result(
        "groq-claim-l2-70b"),
    "path": lambda: None, "outdir": lambda: None, "test_settings": lambda: None,
    "engine.KVCache.batch": 1, "traffic.Requests.prompt_tokens": np.full(2, 8),
    "traffic.Requests.output_tokens": np.full(2, 4), "verdict.QueryLog.output_tokens":
        np.full(2, 4), "verdict.QueryLog.percentile.metric": "ttft",
    "feasibility.fitting_layouts.widths": [1, 2], "feasibility.fitting_layouts.stages": [1, 2],
    "feasibility.fitting_layouts.allowed": lambda: lambda tp, pp: True,
    "early_stopping.binomial_cdf.n": 10, "bisection.least_integer.low": 0,
    "bisection.least_integer.high": 8, "bisection.bisect.target": 1.5,
    "sentencepiece_bpe.SentencePieceBPE.tokens": ["a", "b", "ab"],
    "real_loadgen.Script.ttft_s": np.full(2, 0.1), "real_loadgen.Script.tpot_s":
        np.full(2, 0.01), "real_loadgen.Script.tokens": np.full(2, 4),
    "traffic.Requests.arrival_s": np.array([0.0, 1.0]), "mlperf.bounds.model": "llama2-70b",
    "timing.rate_with_ttft_tok_per_s.output_tokens": 100,
    "explorers.name": "speed", "explorers.label": "speed (tok/s)", "explorers.minimum": 1.0,
    "explorers.maximum": 100.0, "explorers.step": 1.0, "explorers.base.Slider.default": 10.0,
    "explorers.base.Slider.grid": (1.0, 10.0), "explorers.options": ("fp8", "fp16"),
    "explorers.base.Choice.default": "fp8", "explorers.base.Text.default": "a sentence",
    "explorers.base.Text.grid": ("a sentence", "another"), "explorers.kind": "analytic",
    "explorers.base.log_range.default": 30.0, "explorers.low": 1.0, "explorers.high": 1e3,
    "explorers.chapter": "02_bandwidth_floor", "explorers.controls": lambda: (_slider(),),
    "explorers.compute": lambda speed: speed,
    "explorers.tables": lambda: _explorer().tables, "explorers.chart": lambda: _explorer().chart,
    "explorers.factory": lambda: _explorer, "explorers.registry": lambda: {},
    "explorers.values": lambda: {"speed": 10.0},
    "explorers.explorer": lambda: _explorer(), "explorers.candidates": lambda: [],
    "explorers.timeout_s": 1.0, "explorers.limit": 8,
    "explorers.prefetch.Memo.compute": lambda: (lambda values: values),
    "explorers.part": lambda: (lambda name: __import__("altair").Chart(
        __import__("altair").Data(name=name))),
    "data.load_table.name": "hardware", "data.read_table.name": "prices",
    "data.read_table.path": ROOT / "data" / "prices.csv",
"endpoint_metrics.tokenizer_counter.name":
        "cl100k_base", "tokenizers.get_tokenizer.name": "cl100k_base",
    "specs.model.name": "Llama 3.1 8B", "loadgen.System.name": "fuzz",
    "claims.cards_table.ids": ["groq-claim-l2-70b"],
    "endpoint_metrics.requests": _trace_requests, "loadgen.model": "llama2-70b",
    "choosing.family": "gpu", "leaderboard.check_row.hardware_family": "GPU cloud",
    "traffic.Requests.kind": "poisson", "traffic.DatasetLengths.samples": (16, 64),
    "traffic.DatasetLengths.from_counts.lengths": [16, 64],
    "traffic.DatasetLengths.from_counts.counts": [1, 2],
    "calibration.stack.name": "TensorRT-LLM FP8", "row_id": "v5.1-nebius-8xh200sxm-server",
    "stack_name": "TensorRT-LLM FP8", "simulator.fit_efficiency.target": 0.5,
    "prefill_s": lambda: (lambda tokens: 1e-4 * tokens), "use_server_token_count": False,
    "result": lambda: importlib.import_module("inferlab.serving.simulator").simulate(
        _replica(), _requests()),
    "loadgen.log_of_runs.results": lambda: [importlib.import_module(
        "inferlab.serving.simulator").simulate(_replica(), _requests())],
    "simulator.simulate_lanes.lanes": lambda: [_requests()],
    "pipeline.LockStep.engines": lambda: [importlib.import_module(
        "inferlab.serving.engines").ContinuousEngine(
        _replica(), _requests(),
        importlib.import_module("inferlab.serving.scheduler").Scheduler())],
    "count": 10,
    "output": lambda: importlib.import_module("inferlab.benchmark.traffic").Lengths(16),
    "bisection.highest_passing.trial": lambda: (lambda x: (x < 3.0, x)),
    "memo.canonical.value": (1, 2.5, "a"), "memo.key.name": "f", "memo.key.arguments": {"x": 1},
    "mlperf.time_per_output_token.first_token_s": 0.2,
    "mlperf.time_per_output_token.last_token_s": 1.1,
    "mlperf.time_per_output_token.output_tokens": 10, "memo.remembered.name": "f",
    "memo.remembered.compute": lambda: (lambda: 3.0),
    "memo.remembered.arguments": {"x": 1.0}, "memo.remembered.to_json": lambda: float,
    "memo.remembered.from_json": lambda: float, "memo.imported_files.module": "inferlab.predict",
    "memo.digest.files": lambda: [Path(__file__)], "memo.digest.base": ROOT,
    "hf_tokenizer.write_tokenizer_dir.path": lambda: Path(tempfile.mkdtemp()),
    "engine.Engine.show": None, "traffic.make_requests.rate_per_s": 10.0,
    "loadgen.run_scenario.rate_per_s": 5.0, "loadgen.server_trial.rate": 5.0,
    "plan.plan.rate_per_s": 10.0, "plan.plan.chips": ["NVIDIA H200 SXM"],
    "plan.plan.input_tokens": 500, "plan.plan.output_tokens": 100, "plan.plan.requests": 300,
    "plan.plan.tpot_p99_s": 0.05,
    "sizing.stack": lambda: importlib.import_module("inferlab.serving.calibration").stack(
        "TensorRT-LLM FP8"),
    "plan.result": lambda: __import__("inferlab.plan").plan.plan(
        "Llama 3.1 8B", input_tokens=500, output_tokens=100, tpot_p99_s=0.05, rate_per_s=10,
        chips=["NVIDIA H200 SXM"], requests=300),
    "loadgen.System.ceiling_rate_per_s.prompts": np.full(2, 300),
    "loadgen.System.ceiling_rate_per_s.outputs": np.full(2, 294),
    "scheduler.PrefillPool.ready_s.prompt_tokens": np.full(2, 8),
    "engines.RoundPrefill.steps": 4, "engines.RoundPrefill.min_queries": 2,
    "endpoint_metrics.aiperf_summary.count_tokens": len,
    "loadgen.rules": lambda: importlib.import_module("inferlab.benchmark.verdict").mlperf_rules(
        scale=0.01),
    "tool_files.read_guidellm.path": TRACES / "guidellm_chat_c2" / "benchmarks.json",
    "tool_files.read_guidellm_summary.path":
        TRACES / "guidellm_chat_c2" / "benchmarks.json",
    "progress.progress.items": [1.0, 2.0, 3.0],
    "plotting.plain_log_axis.axis": lambda: _axes().xaxis,
    "plotting.plain_log_axis.ticks": [1.0, 10.0, 100.0], "plotting.ordered_shades.count": 4,
    "charts.chips": ["NVIDIA H100 SXM"], "charts.lines": [("a", [1.0, 2.0], [1.0, 2.0], "k", "-")],
    "charts.limit": 4096.0, "charts.labels": ["a", "b", "c"],
    "charts.kinds": ["measured", "modelled", "reported"], "charts.points": [(1, False, 1.0, 1e12)],
    "charts.rooflines.points": [("decode", 1.0, 1e12, "o")],
    "charts.contexts": [256.0, 512.0], "charts.ratios": [1.0, 1.2], "charts.bandwidth_ratio": 1.4,
    "charts.claim": 1.5, "charts.audited": [1.3], "charts.span": (300.0, 600.0),
    "model_name": "Llama 3.1 8B", "input_tokens": 64,
    "accuracy.benchmark": "deepseek-r1", "accuracy.scenarios": ("Offline",),
    "accuracy.bound_share.row_id": "v5.1-nvidia-b200_sxm_180gbx8_trt-deepseek-r1-server",
    "accuracy.vendor_table.models": ["Llama 3.1 8B"],
    "accuracy.row_groups.table": lambda: __import__("inferlab.accuracy").accuracy.audited_rows(
        "deepseek-r1"),
    "accuracy.run_rules.group": lambda: next(iter(__import__("inferlab.accuracy").accuracy
                                                  .row_groups(__import__("inferlab.accuracy")
                                                              .accuracy.audited_rows(
                                                                  "deepseek-r1"))[0].values())),
    "accuracy.run_length_effect.chip": "NVIDIA B200", "accuracy.run_length_effect.chips": 8,
    "accuracy.median_abs_error.scored": lambda: __import__("inferlab.accuracy").accuracy.score(
        "deepseek-r1", scenarios=("Offline",))[0],
    "calibration.Stack.compute_efficiency": 0.5, "calibration.Stack.step_overhead_s": 0.01,
    "workload.check_fits_context.context_tokens": 4096,
    "workload.Workload.dataset.name": "llama3.1-8b",
    "workload.dataset_lengths.name": "mixtral-8x7b",
    "trace": lambda: importlib.import_module("inferlab.lab.endpoint_metrics").read_guidellm(
        TRACES / "guidellm_chat_c2" / "benchmarks.json"),
    "tool_files.read_trace.path": TRACES / "guidellm_chat_c2" / "benchmarks.json",
    "predict.as_stack.value": None, "predict.as_workload.value": None,
    "charts.tps": [1, 2], "charts.ideal": [1.0, 2.0], "charts.curves": [("ring", 1e-6, [1.0, 1.8])],
}


#: Entries of GOOD that are themselves the argument (a function), not a builder of it.
PLAIN_CALLABLES = {"function", "measure", "count_tokens", "compute", "render"}


def _good(owner: str, parameter: inspect.Parameter):
    """The good value of one argument: an override for ``owner``, its default, else GOOD."""
    module = owner.split(".")[0]
    keys = [f"{owner}.{parameter.name}", f"{module}.{parameter.name}"]
    if parameter.default is inspect.Parameter.empty:
        keys.append(parameter.name)
    for key in keys:
        if key in GOOD:
            value = GOOD[key]
            plain = parameter.name in PLAIN_CALLABLES or isinstance(value, type)
            return value if plain or not callable(value) else value()
    if parameter.default is not inspect.Parameter.empty:
        return parameter.default
    raise LookupError(f"no good value for {owner}({parameter.name}); add one to GOOD")


# --- bad values ----------------------------------------------------------------------------

HUGE_COUNTS = (10**12, 2**63, 10**30)
BAD = {
    "count": st.one_of(st.sampled_from((-1, 0, True, *HUGE_COUNTS)),
                       st.integers(-(2**70), 2**70)),
    "number": st.one_of(st.sampled_from((-1.0, 0.0, math.nan, math.inf, -math.inf, 1e300,
                                         -1e300, 5e-324, True)), st.floats()),
    "name": st.one_of(st.sampled_from(("", "no such name", " ")), st.text(max_size=8)),
    "numbers": st.one_of(st.sampled_from(([], [math.nan], [-1.0], [math.inf], [1e300],
                                          [0.0], [-(2**70)])),
                         st.lists(st.floats(), max_size=4)),
}


def _kind(parameter: inspect.Parameter, good) -> str | None:
    """Which bad values fit the argument: judged by its good value, else its annotation."""
    annotation = str(parameter.annotation)
    if isinstance(good, bool) or annotation == "bool":
        return None
    if isinstance(good, (int, np.integer)):
        return "count"
    if isinstance(good, (float, np.floating)):
        return "number"
    if isinstance(good, str):
        return "name"
    if isinstance(good, (list, tuple, np.ndarray)) and len(good):
        try:
            items = np.ravel(good)
        except ValueError:  # records of mixed shape (a label beside an array) are not numbers
            return None
        if all(isinstance(item, (int, float, np.number)) for item in items):
            return "numbers"
    if good is None:
        for word, kind in (("int", "count"), ("float", "number"), ("str", "name")):
            if annotation.startswith(word):
                return kind
    return None


# --- calling with a time and memory bound -----------------------------------------------


class Overran(BaseException):
    """Raised into a call that runs past LIMIT_S (a BaseException, so no handler eats it)."""


def _overran(signum, frame):
    raise Overran(f"still running after {LIMIT_S} s")


@pytest.fixture(scope="module", autouse=True)
def bounded_memory():
    """Cap the address space so a huge allocation fails at once instead of swapping."""
    with open("/proc/self/status") as status:
        size_kib = next(int(line.split()[1]) for line in status if line.startswith("VmSize"))
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (size_kib * 1024 + MEMORY_HEADROOM_BYTES, hard))
    previous = signal.signal(signal.SIGALRM, _overran)
    yield
    signal.signal(signal.SIGALRM, previous)
    resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _bounded_call(function, arguments: dict, limit_s: float = LIMIT_S):
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        return function(**arguments)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _non_finite(value, path: str = "", depth: int = 0) -> set[str]:
    """Where ``value`` holds NaN or an infinity: scalars, arrays, records and containers."""
    if isinstance(value, bool) or depth > 3:
        return set()
    if isinstance(value, (float, np.floating)):
        return set() if math.isfinite(value) else {path}
    if isinstance(value, np.ndarray) and value.dtype.kind in "fc":
        return set() if np.all(np.isfinite(value)) else {path}
    if isinstance(value, pd.DataFrame):
        value = {column: value[column].to_numpy() for column in value.columns}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {field.name: getattr(value, field.name) for field in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)) and len(value) <= 64:
        value = dict(enumerate(value))
    if isinstance(value, dict):
        return set().union(*(_non_finite(item, f"{path}.{key}", depth + 1)
                             for key, item in value.items()))
    return set()


# --- the test ------------------------------------------------------------------------------


def _resolve(name: str):
    """The callable called ``name`` and its owner's name, binding methods to a good instance."""
    table = documented()
    if name in table:
        return table[name], name
    owner, method = name.rsplit(".", 1)
    return getattr(_good_call(owner)[1], method), name


def _parameters(function) -> list[inspect.Parameter]:
    return [parameter for parameter in inspect.signature(function).parameters.values()
            if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)]


@cache
def _good_call(name: str) -> tuple[dict, object]:
    """Good arguments for ``name`` and what the call returns with them."""
    function, owner = _resolve(name)
    arguments = {parameter.name: _good(owner, parameter) for parameter in _parameters(function)}
    return arguments, _bounded_call(function, arguments, GOOD_LIMIT_S)


def _fuzzable(name: str) -> dict[str, str]:
    """The arguments of ``name`` that have bad values of their kind, with that kind."""
    function, owner = _resolve(name)
    kinds = {parameter.name: _kind(parameter, _good(owner, parameter))
             for parameter in _parameters(function)}
    return {argument: kind for argument, kind in kinds.items() if kind}


def _names(error: Exception, argument: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(argument)}(?!\w)", str(error)) is not None


def _names_an_argument(error: Exception, argument: str, arguments: dict) -> bool:
    """The message names the replaced argument, or another of the call that it clashes with
    (``high`` below ``low``, a target out of the range the bounds give)."""
    return _names(error, argument) or any(_names(error, other) for other in arguments)


def check_bad_call(name: str, argument: str, bad) -> None:
    """Call ``name`` with its good arguments but ``argument=bad``; assert an allowed outcome."""
    function, _ = _resolve(name)
    arguments, good_result = _good_call(name)
    call = f"{name}({argument}={bad!r})"
    try:
        result = _bounded_call(function, {**arguments, argument: bad})
    except (ValueError, TypeError) as error:
        assert _names_an_argument(error, argument, arguments), \
            f"{call}: message names no argument of the call: {error}"
        return
    except Overran:
        pytest.fail(f"{call} ran past {LIMIT_S} s")
    except Exception as error:  # noqa: BLE001 - any other type is the failure being looked for
        pytest.fail(f"{call} raised {type(error).__name__}: {error}")
    new = _non_finite(result) - _non_finite(good_result)
    assert not new, f"{call} returned non-finite values at {sorted(new)}"


@pytest.mark.parametrize("name", fuzzed())
def test_bad_values_are_refused_by_name(name):
    kinds = _fuzzable(name)
    if not kinds:
        pytest.skip("no argument of a kind that has bad values")

    @settings(max_examples=FEWER_EXAMPLES.get(name, EXAMPLES_PER_CALLABLE), derandomize=True,
              database=None,
              deadline=None, phases=(Phase.explicit, Phase.generate),
              suppress_health_check=list(HealthCheck))
    @given(data=st.data())
    def run(data):
        argument = data.draw(st.sampled_from(sorted(kinds)), label="argument")
        check_bad_call(name, argument, data.draw(BAD[kinds[argument]], label="bad"))

    run()


#: The values at which finite arguments overflow a formula: the least positive float, whose
#: reciprocal is infinite, and a huge one. The fuzz draws them only now and then; every
#: numeric argument of every callable meets each of them here.
EXTREMES = {"number": (5e-324, 1e300), "numbers": ([5e-324], [1e300])}


def _extremes(name: str) -> dict[str, tuple]:
    """The numeric arguments of ``name``, each with its kind's :data:`EXTREMES`."""
    return {argument: EXTREMES[kind] for argument, kind in _fuzzable(name).items()
            if kind in EXTREMES}


@pytest.mark.parametrize("name", [name for name in fuzzed() if _extremes(name)])
def test_extreme_but_finite_values_are_refused_or_give_finite_results(name):
    for argument, values in _extremes(name).items():
        for value in values:
            check_bad_call(name, argument, value)


def test_every_documented_callable_is_fuzzed_or_exempt_for_a_reason():
    table = documented()
    assert len(table) > 150
    assert set(EXEMPT) <= set(table), set(EXEMPT) - set(table)
    assert all(reason.strip() for reason in EXEMPT.values())
