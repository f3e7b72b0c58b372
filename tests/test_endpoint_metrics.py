"""Each tool's metrics on two constructed traces, every answer worked by hand below."""

from __future__ import annotations

import json
import math

import pytest

from inferlab.benchmark.mlperf import LatencyBounds
from inferlab.lab import endpoint_metrics as em
from inferlab.lab import tool_files
from inferlab.lab.loadclient import RequestTrace

# Request A (completions): sent at 0; one token per chunk at 0.5, 0.6, 0.7, 0.8 s;
# a usage-only chunk (no choice) at 0.8 s; stream ends at 0.9 s; the server counts 4
# output and 10 prompt tokens for a prompt the client sized at 8.
A = RequestTrace(index=0, scheduled_s=0.0, send_s=0.0, end_s=0.9,
                 chunk_s=(0.5, 0.6, 0.7, 0.8, 0.8), chunk_text=("a", "b", "c", "d", None),
                 prompt_tokens=10, completion_tokens=4, requested_prompt_tokens=8)
# Request B (chat): sent at 1.0; an empty role chunk at 1.3; all four tokens in one
# chunk "abcd" at 1.5; ends at 1.6; the server counts 4 (and 10 prompt tokens, 8 sized).
B = RequestTrace(index=1, scheduled_s=1.0, send_s=1.0, end_s=1.6,
                 chunk_s=(1.3, 1.5), chunk_text=("", "abcd"),
                 prompt_tokens=10, completion_tokens=4, requested_prompt_tokens=8)


def chars(text: str) -> int:
    """A stand-in tokenizer: one token per character."""
    return len(text)


def test_ttft_depends_on_which_chunk_counts():
    assert em.first_content_s(A) == pytest.approx(0.5)
    assert em.first_choice_s(A) == pytest.approx(0.5)
    # B's empty role chunk is a choice (vLLM starts the clock) but has no content.
    assert em.first_choice_s(B) == pytest.approx(0.3)
    assert em.first_content_s(B) == pytest.approx(0.5)
    # vLLM's latency ends at the last choice chunk, not at the usage chunk or [DONE].
    assert em.last_choice_s(A) == pytest.approx(0.8)
    assert em.e2e_s(A) == pytest.approx(0.9)


def test_tpot_excludes_the_first_token_and_ends_at_the_last_choice():
    # A: (0.8 - 0.5) / (4 - 1) = 0.1 s; B: (0.5 - 0.3) / 3 = 0.0667 s.
    assert em.tpot_s(A) == pytest.approx(0.1)
    assert em.tpot_s(B) == pytest.approx(0.2 / 3)
    with pytest.raises(ValueError, match="tokens"):
        em.tpot_s(A, tokens=1)


def test_llmperf_divides_its_summed_gaps_by_the_events_it_received():
    r = em.llmperf_request(A, chars)
    # The last content chunk came 0.8 s after sending; 4 choice events: 0.8 / 4 = 0.2 s.
    assert r.inter_token_latency_s == pytest.approx(0.2)
    # 4 counted tokens over the 0.9 s end-to-end latency.
    assert r.output_throughput_tok_s == pytest.approx(4 / 0.9)
    # B: two events (the role chunk and "abcd"), the last content at 0.5 s: 0.25 s.
    assert em.llmperf_request(B, chars).inter_token_latency_s == pytest.approx(0.25)


def test_counting_a_bos_token_raises_llmperfs_throughput_not_its_itl():
    def with_bos(text):
        return len(text) + 1

    r = em.llmperf_request(A, with_bos)
    assert r.output_tokens == 5
    assert r.inter_token_latency_s == pytest.approx(0.8 / 4)
    assert r.output_throughput_tok_s == pytest.approx(5 / 0.9)


def test_vllm_itl_is_per_chunk_and_pooled():
    # A's gaps between chunks with a choice: 0.1, 0.1, 0.1; B's: 1.5 - 1.3 = 0.2.
    v = em.vllm_summary([A, B], duration_s=1.6)
    assert v["itl_mean_s"] == pytest.approx((0.1 * 3 + 0.2) / 4)
    assert v["itl_median_s"] == pytest.approx(0.1)
    assert v["ttft_mean_s"] == pytest.approx((0.5 + 0.3) / 2)
    assert v["tpot_median_s"] == pytest.approx((0.1 + 0.2 / 3) / 2)
    assert v["e2el_mean_s"] == pytest.approx((0.8 + 0.5) / 2)
    # 8 output tokens over 1.6 s; the total adds the client's 8 + 8 prompt tokens.
    assert v["output_throughput_tok_s"] == pytest.approx(8 / 1.6)
    assert v["total_token_throughput_tok_s"] == pytest.approx(24 / 1.6)
    assert v["request_throughput_per_s"] == pytest.approx(2 / 1.6)
    # The newest vLLM source takes the server's 10 + 10 instead.
    server = em.vllm_summary([A, B], duration_s=1.6, prompt_source="server")
    assert server["total_token_throughput_tok_s"] == pytest.approx(28 / 1.6)
    with pytest.raises(ValueError, match="prompt_source"):
        em.vllm_summary([A], 1.0, prompt_source="usage")


def test_vllm_retokenizes_when_the_server_sends_no_usage():
    no_usage = RequestTrace(index=3, scheduled_s=0, send_s=0, end_s=1.0, chunk_s=(0.4, 0.7),
                            chunk_text=("ab", "cdef"))
    with pytest.raises(ValueError, match="count_tokens"):
        em.vllm_summary([no_usage], 1.0)
    v = em.vllm_summary([no_usage], 1.0, count_tokens=chars)
    # 6 characters: TPOT = (0.7 - 0.4) / 5.
    assert v["output_throughput_tok_s"] == pytest.approx(6.0)
    assert v["tpot_mean_s"] == pytest.approx(0.3 / 5)


def test_goodput_counts_requests_within_every_slo():
    # TTFT SLO 400 ms: A (500 ms) misses, B (300 ms) meets: 1 request in 1.6 s.
    v = em.vllm_summary([A, B], duration_s=1.6, slo_ttft_ms=400)
    assert v["request_goodput_per_s"] == pytest.approx(1 / 1.6)
    # Adding a TPOT SLO of 80 ms keeps B (66.7 ms).
    both = em.vllm_summary([A, B], duration_s=1.6, slo_ttft_ms=400, slo_tpot_ms=80)
    assert both["request_goodput_per_s"] == pytest.approx(1 / 1.6)
    # Latency SLO 600 ms: A (800 ms to its last choice) misses, B (500 ms) meets.
    e2el = em.vllm_summary([A, B], duration_s=1.6, slo_e2el_ms=600)
    assert e2el["request_goodput_per_s"] == pytest.approx(1 / 1.6)
    none = em.vllm_summary([A, B], duration_s=1.6, slo_ttft_ms=250)
    assert none["request_goodput_per_s"] == 0


def test_mlperf_starts_at_the_first_token_not_the_role_chunk():
    # Role chunk at 0.05 s, first text at 0.3 s, then one token every 0.1 s.
    r = RequestTrace(index=0, scheduled_s=0, send_s=0, end_s=0.6, chunk_s=(0.05, 0.3, 0.4, 0.5),
                     chunk_text=("", "a", "b", "c"), completion_tokens=3)
    m = em.mlperf_summary([r], duration_s=0.6)
    assert m["ttft_p99_s"] == pytest.approx(0.3)
    assert m["tpot_p99_s"] == pytest.approx(0.1)


def test_mlperf_takes_loadgen_p99_and_reports_only_the_aggregate_rate():
    # TTFT 0.5 s for both (B's text at 1.5 s); TPOT 0.1 s (A) and 0 (B's one chunk).
    # Two values: LoadGen's index floor(2 x 0.99) = 1, the larger.
    m = em.mlperf_summary([A, B], duration_s=1.6)
    assert m["ttft_p99_s"] == pytest.approx(0.5)
    assert m["tpot_p99_s"] == pytest.approx(0.1)
    assert m["tokens_per_s"] == pytest.approx(5.0)
    assert math.isnan(m["valid"])
    assert em.mlperf_summary([A, B], 1.6, LatencyBounds(0.6, 0.2))["valid"] == 1.0
    assert em.mlperf_summary([A, B], 1.6, LatencyBounds(0.6, 0.05))["valid"] == 0.0
    assert not any(key.startswith("MLPerf: 1 /") for key in em.headline_rates([A, B], 1.6, chars))


def test_aiperf_counts_content_chunks_only_and_retokenizes_by_default():
    a = em.aiperf_summary([A], None, chars)
    # TTFT 0.5 s, request latency to the last content chunk 0.8 s (not the 0.9 s end).
    assert a["ttft_mean_s"] == pytest.approx(0.5)
    assert a["request_latency_mean_s"] == pytest.approx(0.8)
    assert a["inter_token_latency_mean_s"] == pytest.approx(0.3 / 3)
    assert a["output_token_throughput_per_user_tok_s"] == pytest.approx(10.0)
    # B's inter chunk latency has no gap: its role chunk is not a response.
    b = em.aiperf_summary([B], None, chars)
    assert math.isnan(b["inter_chunk_latency_mean_s"])
    assert b["ttft_mean_s"] == pytest.approx(0.5)
    # Pooled over A and B: A's three 0.1 s gaps. Duration: first send 0, last content 1.5 s.
    both = em.aiperf_summary([A, B], None, chars)
    assert both["inter_chunk_latency_mean_s"] == pytest.approx(0.1)
    assert em.aiperf_duration_s([A, B]) == pytest.approx(1.5)
    # Wall-clock sends 0.25 s apart: the last content chunk of B ends 0.25 s later.
    assert em.aiperf_duration_s([A, B], [10**18, 10**18 + 250_000_000]) == pytest.approx(
        max(em.last_content_s(A), 0.25 + em.last_content_s(B)))
    with pytest.raises(ValueError, match="started_ns"):
        em.aiperf_duration_s([A, B], [10**18])
    assert both["output_token_throughput_tok_s"] == pytest.approx(8 / 1.5)
    with pytest.raises(ValueError, match="count_tokens"):
        em.aiperf_summary([A])


def test_aiperf_server_token_count_switch_reads_the_usage():
    def doubled(text):
        return 2 * len(text)

    retokenized = em.aiperf_summary([A], None, doubled)
    assert retokenized["output_sequence_length_mean"] == 8
    assert retokenized["inter_token_latency_mean_s"] == pytest.approx(0.3 / 7)
    server = em.aiperf_summary([A], None, doubled, use_server_token_count=True)
    assert server["output_sequence_length_mean"] == 4
    assert server["inter_token_latency_mean_s"] == pytest.approx(0.3 / 3)


def test_guidellm_itl_is_vllms_tpot_and_its_tpot_is_llmperfs_formula():
    g = em.guidellm_summary([A], duration_s=0.9)
    # ITL: (0.8 - 0.5) / 3; TPOT: 0.8 / 4, TTFT included.
    assert g["itl_mean_s"] == pytest.approx(0.1)
    assert g["tpot_mean_s"] == pytest.approx(0.2)
    both = em.guidellm_summary([A, B], duration_s=1.6)
    # Token-weighted: ITL (0.3 + 0) / (3 + 3); TPOT (0.8 + 0.5) / (4 + 4).
    assert both["itl_mean_s"] == pytest.approx(0.05)
    assert both["tpot_mean_s"] == pytest.approx(1.3 / 8)
    # Median without interpolation: 0.125 (B) holds half the weight.
    assert both["tpot_median_s"] == pytest.approx(0.125)
    assert both["request_latency_mean_s"] == pytest.approx(0.75)
    assert both["output_tokens_per_s"] == pytest.approx(5.0)


def test_inferencemax_interactivity_and_per_gpu_throughput():
    x = em.inferencemax_summary([A, B], duration_s=1.6, gpus=2)
    median_tpot_ms = (100 + 200 / 3) / 2
    assert x["interactivity_median_tok_s_user"] == pytest.approx(1000 / median_tpot_ms)
    assert x["throughput_per_gpu_tok_s"] == pytest.approx(24 / 1.6 / 2)
    assert x["output_throughput_per_gpu_tok_s"] == pytest.approx(8 / 1.6 / 2)


def test_headlines_disagree_on_the_same_requests():
    rates = em.headline_rates([A, B], duration_s=1.6, count_tokens=chars)
    assert list(rates) == [f"{tool}: {name}" for tool, name, _ in em.HEADLINES]
    # LLMPerf mean of 4 / 0.9 and 4 / 0.6; vLLM median TPOT's reciprocal.
    assert rates["LLMPerf: request output throughput (mean)"] == pytest.approx(
        (4 / 0.9 + 4 / 0.6) / 2)
    assert rates["vLLM: 1 / TPOT (median)"] == pytest.approx(1 / ((0.1 + 0.2 / 3) / 2))
    assert rates["guidellm: 1 / TPOT (mean)"] == pytest.approx(8 / 1.3)
    assert rates["MLPerf: tokens per second (all users)"] == pytest.approx(5.0)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="requests"):
        em.vllm_summary([], 1.0)
    with pytest.raises(ValueError, match="duration_s"):
        em.mlperf_summary([A], 0.0)
    with pytest.raises(ValueError, match="gpus"):
        em.inferencemax_summary([A], 1.0, gpus=0)
    with pytest.raises(ValueError, match="prompt_tokens"):
        em.synthetic_request(0.1, 0.01, 4, prompt_tokens=0)
    backwards = RequestTrace(index=2, scheduled_s=0, send_s=0, end_s=1, chunk_s=(0.5, 0.4),
                             chunk_text=("a", "b"))
    with pytest.raises(ValueError, match="decrease"):
        em.first_content_s(backwards)


def test_llama2_counter_adds_bos():
    assert em.llama2_counter(True)("Hello") == em.llama2_counter(False)("Hello") + 1


def test_reads_a_vllm_bench_serve_detailed_result(tmp_path):
    # The keys vllm/benchmarks/serve.py writes with --save-result --save-detailed.
    result = {"duration": 2.0, "completed": 2, "total_input_tokens": 16,
              "total_output_tokens": 7, "input_lens": [8, 8], "output_lens": [4, 3],
              "ttfts": [0.3, 0.5], "itls": [[0.1, 0.1, 0.1], [0.2, 0.2]],
              "latencies": [0.6, 0.9], "start_times": [100.0, 100.5],
              "generated_texts": ["abcd", "xyz"], "errors": ["", ""]}
    path = tmp_path / "vllm.json"
    path.write_text(json.dumps(result))
    trace = tool_files.read_vllm_bench(path)
    assert trace.duration_s == 2.0
    second = trace.requests[1]
    assert second.send_s == pytest.approx(0.5)
    assert second.chunk_s == pytest.approx((1.0, 1.2, 1.4))
    assert second.text == "xyz"
    v = em.vllm_summary(trace.requests, trace.duration_s)
    # vLLM's own: TTFT mean 0.4; TPOT (0.6 - 0.3) / 3 = 0.1 and (0.9 - 0.5) / 2 = 0.2.
    assert v["ttft_mean_s"] == pytest.approx(0.4)
    assert v["tpot_mean_s"] == pytest.approx(0.15)
    assert v["itl_mean_s"] == pytest.approx(0.7 / 5)
    assert v["total_token_throughput_tok_s"] == pytest.approx(23 / 2.0)
    path.write_text(json.dumps({"duration": 1.0}))
    with pytest.raises(ValueError, match="save-detailed"):
        tool_files.read_vllm_bench(path)


def test_reads_llmperf_individual_responses(tmp_path):
    # The keys of src/llmperf/common_metrics.py, as token_benchmark_ray.py dumps them.
    rows = [{"error_code": None, "error_msg": "", "inter_token_latency_s": 0.02,
             "ttft_s": 0.4, "end_to_end_latency_s": 1.2,
             "request_output_throughput_token_per_s": 50 / 1.2, "number_total_tokens": 150,
             "number_output_tokens": 50, "number_input_tokens": 100},
            {"error_code": 429, "error_msg": "too many", "inter_token_latency_s": 0,
             "ttft_s": 0, "end_to_end_latency_s": 0.1,
             "request_output_throughput_token_per_s": 0, "number_total_tokens": 100,
             "number_output_tokens": 0, "number_input_tokens": 100}]
    path = tmp_path / "llmperf_individual_responses.json"
    path.write_text(json.dumps(rows))
    trace = tool_files.read_llmperf(path)
    ok, failed = trace.requests
    assert failed.error == "too many" and not failed.ok
    r = em.llmperf_request(ok, None)
    assert r.ttft_s == pytest.approx(0.4)
    expected = rows[0]["request_output_throughput_token_per_s"]
    assert r.output_throughput_tok_s == pytest.approx(expected)


def test_refuses_aiperfs_records_file(tmp_path):
    path = tmp_path / "profile_export.jsonl"
    path.write_text(json.dumps({"metadata": {}, "metrics": {}}) + "\n")
    with pytest.raises(ValueError, match="export-level raw"):
        tool_files.read_aiperf_raw(path)
