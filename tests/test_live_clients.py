"""AIPerf and guidellm run live against the lab server; endpoint_metrics reproduces their numbers.

Each test runs the real tool (from its own virtual environment, tests/live_tools.py) for a
few requests against a lab server on a free port of 127.0.0.1, reads the per-request
records the tool exported with :mod:`inferlab.lab.endpoint_metrics`, applies that tool's
definition, and compares with what the tool reported in the same run. The files under
``data/traces/`` document one fixed run of each (tests/test_real_clients.py); these show
that the definitions still hold for whatever the tools and the server do today.

The engine is the "small" size: "tiny" writes a whole answer in well under a
millisecond, so it reaches the client in one read, every chunk gets the same
timestamp and AIPerf's inter token latency is 0 (it then leaves out the per-user rate).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
from pathlib import Path

import pytest

from inferlab.lab import endpoint_metrics as em
from inferlab.lab import tool_files
from inferlab.lab.server import LabServer, ServerConfig, write_tokenizer_dir

pytestmark = pytest.mark.live

REQUESTS, CONCURRENCY, PROMPT_TOKENS, OUTPUT_TOKENS = 6, 2, 32, 12

#: A tool's whole run (start-up, its requests, its exports): ~30 s on a busy 2-core machine.
RUN_TIMEOUT_S = 300

#: How far endpoint_metrics may be from AIPerf on AIPerf's own records, and why.
AIPERF_TOLERANCE = {
    # The same arithmetic on the same nanosecond timestamps and token counts.
    "ttft_mean_s": 1e-9,
    "request_latency_mean_s": 1e-9,
    "inter_token_latency_mean_s": 1e-9,
    "inter_chunk_latency_mean_s": 1e-9,
    "output_token_throughput_per_user_tok_s": 1e-9,
    "output_sequence_length_mean": 1e-9,
    # Its window (the divisor) is stored to the microsecond.
    "output_token_throughput_tok_s": 1e-5,
}

#: guidellm stores every request's timings and counts as it computed from them.
GUIDELLM_TOLERANCE = 1e-9


@pytest.fixture(scope="module")
def server():
    with LabServer(ServerConfig(size="small")) as running:
        yield running


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    # Both tools load the server's tokenizer offline from a Hugging Face folder.
    return write_tokenizer_dir(tmp_path_factory.mktemp("tokenizer"))


def run_tool(command: list[str], folder: Path, *outputs: Path) -> None:
    """Run ``command`` in ``folder``, wait at most RUN_TIMEOUT_S, kill whatever it started
    (AIPerf runs its services as child processes) and fail, with its output, unless it
    exited with 0 and wrote ``outputs`` (AIPerf exits with 0 after some failures)."""
    env = {key: value for key, value in os.environ.items() if key != "VIRTUAL_ENV"}
    log = folder / "tool.log"
    # AIPerf's scratch files (its ZeroMQ sockets, its mmap folders) go in a folder that is
    # removed afterwards, with a short path: a socket's path has at most 107 bytes.
    with tempfile.TemporaryDirectory(prefix="inferlab-") as scratch, \
            log.open("w", encoding="utf-8") as out:
        # The tokenizer is a local folder; what the tools cache of it stays in the test's
        # folder. (HF_HUB_OFFLINE=1 would make AIPerf 0.13 read the folder as a hub name.)
        env.update(HF_HOME=str(folder / "hf"), TMPDIR=scratch)
        process = subprocess.Popen(command, cwd=folder, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   start_new_session=True)
        try:
            returncode = process.wait(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            returncode = None
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    missing = [path.name for path in outputs if not path.is_file()]
    if returncode != 0 or missing:
        verdict = (f"did not finish in {RUN_TIMEOUT_S} s" if returncode is None
                   else f"exited with {returncode}" if returncode
                   else f"wrote no {', '.join(missing)}")
        text = log.read_text(encoding="utf-8", errors="replace")
        pytest.fail(f"{Path(command[0]).name} {verdict}; its output ends:\n{text[-4000:]}")


def relative_differences(ours: dict, reported: dict) -> dict[str, float]:
    return {key: abs(ours[key] - value) / abs(value) if value else abs(ours[key])
            for key, value in reported.items()}


def test_aiperf_live_numbers_from_its_raw_records(aiperf_tool, server, tokenizer, tmp_path):
    raw = tmp_path / "run" / "profile_export_raw.jsonl"
    summary = tmp_path / "run" / "profile_export_aiperf.json"
    before = server.stats().completed
    run_tool([str(aiperf_tool.executable), "profile",
              "--model-names", server.config.model_name,
              "--url", server.base_url.removesuffix("/v1"),
              "--endpoint-type", "chat", "--streaming", "--tokenizer", str(tokenizer),
              "--concurrency", str(CONCURRENCY), "--request-count", str(REQUESTS),
              "--isl", str(PROMPT_TOKENS), "--osl", str(OUTPUT_TOKENS),
              "--extra-inputs", "ignore_eos:true", "--export-level", "raw",
              "--artifact-dir", str(tmp_path / "run"), "--random-seed", "0",
              "--ui-type", "none"], tmp_path, raw, summary)
    trace = tool_files.read_aiperf_raw(raw)
    reported = tool_files.read_aiperf_summary(summary)
    assert len(trace.succeeded) == len(trace.requests) == REQUESTS
    assert server.stats().completed - before == REQUESTS
    assert {r.completion_tokens for r in trace.succeeded} == {OUTPUT_TOKENS}
    # Tokens arrived apart, so the latencies compared below are not all zero.
    assert reported["inter_token_latency_mean_s"] > 0
    # AIPerf's default: it re-tokenizes the streamed text with the server's tokenizer.
    ours = em.aiperf_summary(trace.succeeded, reported["window_s"],
                             em.tokenizer_counter(server.config.tokenizer))
    differences = relative_differences(ours, {key: reported[key] for key in AIPERF_TOLERANCE})
    print("AIPerf, relative differences:", json.dumps(differences, indent=1))
    assert {key: value for key, value in differences.items()
            if value > AIPERF_TOLERANCE[key]} == {}
    # Its duration runs from the sends' wall-clock times, which the trace reads too (to
    # the 256 ns step of a 64-bit float holding nanoseconds since 1970).
    assert trace.duration_s == pytest.approx(reported["benchmark_duration_s"], abs=1e-6)


def test_guidellm_live_numbers_from_its_request_records(guidellm_tool, server, tokenizer,
                                                        tmp_path):
    before = server.stats().completed
    report = tmp_path / "benchmarks.json"
    run_tool([str(guidellm_tool.executable), "run",
              "--backend", f"kind=openai_http,target={server.base_url.removesuffix('/v1')},"
                           f"model={server.config.model_name}",
              "--tokenizer", f"kind=huggingface_auto,model={tokenizer}",
              "--profile", f"kind=concurrent,streams={CONCURRENCY}",
              "--constraint", f"kind=max_requests,count={REQUESTS}",
              "--data", f"kind=synthetic_text,prompt_tokens={PROMPT_TOKENS},"
                        f"output_tokens={OUTPUT_TOKENS}",
              "--output", f"kind=json,path={report}", "--disable-console-interactive"],
             tmp_path, report)
    trace = tool_files.read_guidellm(report)
    reported = tool_files.read_guidellm_summary(report)
    assert len(trace.requests) == REQUESTS
    assert server.stats().completed - before == REQUESTS
    assert {r.completion_tokens for r in trace.requests} == {OUTPUT_TOKENS}
    ours = em.guidellm_summary(trace.requests, trace.duration_s)
    assert set(ours) == set(reported)
    differences = relative_differences(ours, reported)
    print("guidellm, relative differences:", json.dumps(differences, indent=1))
    assert max(differences.values()) <= GUIDELLM_TOLERANCE, differences
    # Its ITL leaves out the first token and its TPOT counts the wait for it.
    assert ours["tpot_mean_s"] > ours["itl_mean_s"] > 0
