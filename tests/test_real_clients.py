"""endpoint_metrics reproduces AIPerf's and guidellm's own numbers from their own records.

The files under ``data/traces/`` were written by the real tools run against the
lab server (``data/traces/README.md`` has the commands, versions and date).
Each test reads a tool's per-request records into the book's trace type,
applies that tool's definition from :mod:`inferlab.lab.endpoint_metrics`, and
compares with the aggregate the tool itself reported in the same run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inferlab.lab import endpoint_metrics as em
from inferlab.lab import tool_files

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


@pytest.mark.parametrize(("folder", "server_count"), [
    ("aiperf_chat_c2", False),              # AIPerf's default: re-tokenized text
    ("aiperf_chat_c2_server_count", True),  # --use-server-token-count
])
def test_aiperf_numbers_from_aiperfs_raw_records(folder, server_count):
    trace = tool_files.read_aiperf_raw(TRACES / folder / "profile_export_raw.jsonl")
    reported = tool_files.read_aiperf_summary(TRACES / folder / "profile_export_aiperf.json")
    assert len(trace.succeeded) == len(trace.requests) == 8
    # AIPerf loaded the server's tokenizer.json; it cuts text as cl100k_base does.
    ours = em.aiperf_summary(trace.succeeded, reported["window_s"],
                             em.tokenizer_counter("cl100k_base"),
                             use_server_token_count=server_count)
    for key in ("ttft_mean_s", "request_latency_mean_s", "inter_token_latency_mean_s",
                "inter_chunk_latency_mean_s", "output_token_throughput_per_user_tok_s",
                "output_sequence_length_mean"):
        assert ours[key] == pytest.approx(reported[key], rel=1e-9), key
    # The phase window is stored to the microsecond.
    assert ours["output_token_throughput_tok_s"] == pytest.approx(
        reported["output_token_throughput_tok_s"], rel=1e-5)
    # AIPerf dates the sends on the wall clock and times the requests on the monotonic
    # one; with the export's wall-clock sends the duration is its own arithmetic, to the
    # 256 ns step of a 64-bit float holding nanoseconds since 1970 (its accumulators').
    assert trace.duration_s == pytest.approx(reported["benchmark_duration_s"], abs=1e-6)


def test_aiperf_default_count_differs_from_the_servers():
    default = tool_files.read_aiperf_summary(
        TRACES / "aiperf_chat_c2" / "profile_export_aiperf.json")
    trace = tool_files.read_aiperf_raw(TRACES / "aiperf_chat_c2" / "profile_export_raw.jsonl")
    usage = sum(r.completion_tokens for r in trace.succeeded) / len(trace.succeeded)
    # Re-tokenizing the streamed gibberish does not give back the tokens generated.
    assert usage == 16
    assert default["output_sequence_length_mean"] != usage


def test_guidellm_numbers_from_guidellms_request_records():
    path = TRACES / "guidellm_chat_c2" / "benchmarks.json"
    trace = tool_files.read_guidellm(path)
    reported = tool_files.read_guidellm_summary(path)
    ours = em.guidellm_summary(trace.requests, trace.duration_s)
    assert set(ours) == set(reported)
    for key, value in reported.items():
        assert ours[key] == pytest.approx(value, rel=1e-9), key
    # Its ITL excludes the first token and its TPOT includes the wait for it.
    assert ours["tpot_mean_s"] > ours["itl_mean_s"]


def test_guidellm_reader_refuses_a_missing_benchmark():
    with pytest.raises(ValueError, match="benchmark"):
        tool_files.read_guidellm(TRACES / "guidellm_chat_c2" / "benchmarks.json", benchmark=3)
