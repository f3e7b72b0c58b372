"""Each benchmark tool's files read back as traces: AIPerf's ``profile_export_raw.jsonl`` and
summary, guidellm's JSON report, ``vllm bench serve``'s detailed result and LLMPerf's individual
responses. A reader rebuilds a :class:`~inferlab.benchmark.traces.Trace` (send times, streamed
chunks, usage) from what the tool recorded, so that :mod:`inferlab.lab.endpoint_metrics` can
apply every tool's definitions to the same run; :func:`read_trace` picks the reader by the
file's shape. A file that is none of these, or is malformed, raises ``ValueError`` naming it.

Used in chapter 'Benchmark a real endpoint'.
"""

from __future__ import annotations

import json
from pathlib import Path

from inferlab.benchmark.traces import RequestTrace, Trace
from inferlab.common import checks
from inferlab.lab.endpoint_metrics import PLACEHOLDER, aiperf_duration_s


def _choice_text(event: dict) -> str | None:
    """The text of one streamed event as the book's client reads it (``None``: no choice)."""
    choices = event.get("choices") or []
    if not choices:
        return None
    choice = choices[0]
    text = choice.get("text")
    if text is None:
        text = (choice.get("delta") or {}).get("content")
    return text or ""


def read_aiperf_raw(path) -> Trace:
    """AIPerf's raw profile export (``profile_export_raw.jsonl``) as a trace.

    Written by ``aiperf profile --export-level raw``; each line is one request
    with its send time (``start_perf_ns``), its HTTP status, the payload sent
    and every streamed event with its arrival time (``responses[].perf_ns``
    and ``packets``), which is what AIPerf's own metrics are computed from
    (``aiperf/records/inference_result_parser.py``). Times become seconds from
    the first send; ``duration_s`` is AIPerf's benchmark duration, from the sends'
    wall-clock times (``metadata.request_start_ns``) where the export records them
    (:func:`~inferlab.lab.endpoint_metrics.aiperf_duration_s`). AIPerf's per-record file
    (``profile_export.jsonl``) keeps no chunk text and is refused by name.
    """
    lines = [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines()
             if line.strip()]
    if not lines:
        raise ValueError(f"path: {path} holds no records")
    if "responses" not in lines[0]:
        raise ValueError(f"path: {path} is not a raw export (no 'responses'); rerun aiperf with "
                         "--export-level raw and read profile_export_raw.jsonl")
    t0 = min(record["start_perf_ns"] for record in lines)
    traces = []
    for index, record in enumerate(lines):
        times, texts, usage, finish = [], [], None, None
        last = record["start_perf_ns"]
        for response in record.get("responses") or []:
            last = response["perf_ns"]
            for packet in response.get("packets") or []:
                if packet.get("name") != "data" or packet.get("value", "").strip() == "[DONE]":
                    continue
                event = json.loads(packet["value"])
                times.append((response["perf_ns"] - t0) / 1e9)
                texts.append(_choice_text(event))
                usage = event.get("usage") or usage
                for choice in event.get("choices") or []:
                    finish = choice.get("finish_reason") or finish
        payload = record.get("payload") or {}
        status = record.get("status") or 0
        error = None if status == 200 and any(texts) else f"status {status}"
        traces.append(RequestTrace(
            index=index, scheduled_s=(record["start_perf_ns"] - t0) / 1e9,
            send_s=(record["start_perf_ns"] - t0) / 1e9, end_s=(last - t0) / 1e9,
            chunk_s=tuple(times), chunk_text=tuple(texts),
            prompt_tokens=(usage or {}).get("prompt_tokens"),
            completion_tokens=(usage or {}).get("completion_tokens"),
            finish_reason=finish, status=status, error=error,
            requested_output_tokens=int(payload.get("max_completion_tokens")
                                        or payload.get("max_tokens") or 0)))
    ok = [r for r in traces if r.ok]
    started = [(lines[r.index].get("metadata") or {}).get("request_start_ns") for r in ok]
    if not all(isinstance(start, int) for start in started):
        started = None  # an export without wall-clock sends: their monotonic times stand in
    duration = aiperf_duration_s(ok, started) if ok else 0.0
    model = str((lines[0].get("payload") or {}).get("model", ""))
    return Trace(tuple(traces), None, duration, "", model)


def read_aiperf_summary(path) -> dict[str, float]:
    """The aggregate numbers of AIPerf's ``profile_export_aiperf.json``, in seconds and tokens.

    Keys: ``ttft_mean_s``, ``request_latency_mean_s``, ``inter_token_latency_mean_s``,
    ``inter_chunk_latency_mean_s``, ``output_token_throughput_per_user_tok_s``,
    ``output_sequence_length_mean``, ``output_token_throughput_tok_s`` and
    ``benchmark_duration_s`` (the first seven as
    :func:`~inferlab.lab.endpoint_metrics.aiperf_summary` keys them; the duration is what
    :func:`read_aiperf_raw` gives as the trace's ``duration_s``), and ``window_s``, the
    profiling phase's window its throughput divides by.
    """
    from datetime import datetime

    data = json.loads(Path(path).read_text(encoding="utf-8"))
    ms = 1e-3
    window = (datetime.fromisoformat(data["end_time"])
              - datetime.fromisoformat(data["start_time"])).total_seconds()
    return {
        "window_s": window,
        "ttft_mean_s": data["time_to_first_token"]["avg"] * ms,
        "request_latency_mean_s": data["request_latency"]["avg"] * ms,
        "inter_token_latency_mean_s": data["inter_token_latency"]["avg"] * ms,
        "inter_chunk_latency_mean_s": data["inter_chunk_latency"]["avg"] * ms,
        "output_token_throughput_per_user_tok_s":
            data["output_token_throughput_per_user"]["avg"],
        "output_sequence_length_mean": data["output_sequence_length"]["avg"],
        "output_token_throughput_tok_s": data["output_token_throughput"]["avg"],
        "benchmark_duration_s": data["benchmark_duration"]["avg"],
    }


def read_guidellm(path, benchmark: int = 0) -> Trace:
    """One benchmark of guidellm's JSON report (``--output kind=json``) as a trace.

    guidellm keeps, per successful request (``requests.successful[]``), the
    send time (``info.timings.request_start``), the first and last content
    chunk (``first_token_iteration``, ``last_token_iteration``), the end of the
    stream (``request_end``), the output text and the usage counts, but not
    each chunk's time (``src/guidellm/schemas/request_stats.py``). The trace
    therefore has one placeholder content chunk at the first and one at the
    last content time, the whole text in ``output_text``: TTFT, latencies and
    the TPOT-like formulas are exact, per-chunk gaps (vLLM's ITL, AIPerf's
    inter chunk latency) are not in the file. Times are seconds from the
    benchmark's ``start_time``; ``duration_s`` is its ``duration``.
    """
    run = _guidellm_run(path, benchmark)
    t0 = run["start_time"]
    traces = []
    for index, stats in enumerate(run["requests"]["successful"]):
        timings = stats["info"]["timings"]
        first, last = timings["first_token_iteration"], timings["last_token_iteration"]
        times = (first - t0,) if last == first else (first - t0, last - t0)
        traces.append(RequestTrace(
            index=index, scheduled_s=timings["request_start"] - t0,
            send_s=timings["request_start"] - t0, end_s=timings["request_end"] - t0,
            chunk_s=times, chunk_text=(PLACEHOLDER,) * len(times),
            prompt_tokens=stats.get("prompt_tokens"),
            completion_tokens=stats.get("output_tokens"),
            output_text=stats.get("output") or ""))
    return Trace(tuple(traces), None, float(run["duration"]), "", "")


def _guidellm_run(path, benchmark: int) -> dict:
    runs = json.loads(Path(path).read_text(encoding="utf-8")).get("benchmarks") or []
    if not runs:
        raise ValueError(f"path: {path} holds no benchmark")
    return runs[checks.whole("benchmark", benchmark, minimum=0, maximum=len(runs) - 1)]


def read_guidellm_summary(path, benchmark: int = 0) -> dict[str, float]:
    """guidellm's own aggregates of one benchmark in seconds, keyed as
    :func:`~inferlab.lab.endpoint_metrics.guidellm_summary`."""
    metrics = _guidellm_run(path, benchmark)["metrics"]

    def stat(name: str, key: str) -> float:
        return float(metrics[name]["successful"][key])

    return {
        "ttft_mean_s": stat("time_to_first_token_ms", "mean") * 1e-3,
        "ttft_median_s": stat("time_to_first_token_ms", "median") * 1e-3,
        "itl_mean_s": stat("inter_token_latency_ms", "mean") * 1e-3,
        "itl_median_s": stat("inter_token_latency_ms", "median") * 1e-3,
        "tpot_mean_s": stat("time_per_output_token_ms", "mean") * 1e-3,
        "tpot_median_s": stat("time_per_output_token_ms", "median") * 1e-3,
        "request_latency_mean_s": stat("request_latency", "mean"),
        "output_tokens_per_s": stat("output_tokens_per_second", "mean"),
    }


def read_vllm_bench(path) -> Trace:
    """The result file of ``vllm bench serve --save-result --save-detailed`` as a trace.

    Its per-request lists (``vllm/benchmarks/serve.py``, the ``result`` dict of
    ``benchmark``) are ``input_lens`` (the client's prompt lengths), ``output_lens``
    (vLLM's output counts), ``ttfts``, ``itls`` (each request's gaps between
    choice chunks), ``latencies``, ``start_times`` (newer versions; without
    them every request is taken as sent at 0), ``generated_texts`` and
    ``errors``. A chunk is rebuilt at TTFT and after each gap, with a
    placeholder text; the stream ends at the latency. ``duration_s`` is the
    file's ``duration``.
    """
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    missing = [k for k in ("input_lens", "output_lens", "ttfts", "itls", "latencies",
                           "duration") if k not in data]
    if missing:
        raise ValueError(f"path: {path} lacks {', '.join(missing)}; save it with "
                         "vllm bench serve --save-result --save-detailed")
    n = len(data["ttfts"])
    starts = data.get("start_times") or [0.0] * n
    t0 = min(starts) if starts else 0.0
    texts = data.get("generated_texts") or [""] * n
    errors = data.get("errors") or [""] * n
    traces = []
    for i in range(n):
        send = starts[i] - t0
        times = [send + data["ttfts"][i]]
        for gap in data["itls"][i]:
            times.append(times[-1] + gap)
        traces.append(RequestTrace(
            index=i, scheduled_s=send, send_s=send, end_s=send + data["latencies"][i],
            chunk_s=tuple(times), chunk_text=(PLACEHOLDER,) * len(times),
            completion_tokens=data["output_lens"][i] or None,
            requested_prompt_tokens=data["input_lens"][i], output_text=texts[i],
            error=errors[i] or None))
    return Trace(tuple(traces), None, float(data["duration"]), "", str(data.get("model_id", "")))


def read_llmperf(path) -> Trace:
    """LLMPerf's ``*_individual_responses.json`` as a trace.

    Each entry holds what ``token_benchmark_ray.py`` records per request
    (the keys of ``src/llmperf/common_metrics.py``): ``ttft_s``,
    ``end_to_end_latency_s``, ``number_output_tokens`` (its Llama 2 count),
    ``number_input_tokens``, ``inter_token_latency_s`` and ``error_code``. No
    send times, chunk times or texts are kept, so each request starts at 0
    with one placeholder chunk at TTFT and ends at its latency, and its
    ``completion_tokens`` is LLMPerf's count (read it with
    ``llmperf_request(r, None)``). ``duration_s`` is not in the file (0).
    """
    rows = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(rows, list):
        raise ValueError(f"path: {path} must hold a JSON list of LLMPerf's request records")
    traces = []
    for i, row in enumerate(rows):
        failed = row.get("error_code") is not None
        ttft = row.get("ttft_s") or 0.0
        traces.append(RequestTrace(
            index=i, scheduled_s=0.0, send_s=0.0, end_s=float(row["end_to_end_latency_s"]),
            chunk_s=(float(ttft),), chunk_text=("" if failed else PLACEHOLDER,),
            prompt_tokens=row.get("number_input_tokens"),
            completion_tokens=row.get("number_output_tokens"),
            error=str(row.get("error_msg") or row["error_code"]) if failed else None))
    return Trace(tuple(traces), None, 0.0, "", "")


def read_trace(path) -> Trace:
    """A run any of the tools above recorded, told apart by what the file holds.

    AIPerf's raw export (JSON lines with ``responses``), guidellm's report (a JSON object
    with ``benchmarks``; its first benchmark), ``vllm bench serve``'s result (a JSON
    object with ``input_lens``) or LLMPerf's individual responses (a JSON list). Raises
    ``ValueError`` naming ``path`` and the formats for anything else.
    """
    text = Path(path).read_text(encoding="utf-8")
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        head = json.loads(first)
    except json.JSONDecodeError:
        head = None
    if isinstance(head, dict) and "responses" in head:
        return read_aiperf_raw(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    if isinstance(data, dict) and "benchmarks" in data:
        return read_guidellm(path)
    if isinstance(data, dict) and "input_lens" in data:
        return read_vllm_bench(path)
    if isinstance(data, list):
        return read_llmperf(path)
    raise ValueError(f"path: {path} is none of the traces read here: AIPerf's "
                     "profile_export_raw.jsonl, guidellm's JSON report, vllm bench serve's "
                     "--save-detailed result, LLMPerf's individual responses")

