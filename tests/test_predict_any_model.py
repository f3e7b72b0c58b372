"""The predictor beyond Llama 2 70B: any model, any workload, any layout, and its refusals."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import subprocess
import sys

import pytest

import inferlab
from inferlab.benchmark.workload import Workload
from inferlab.model import specs
from inferlab.model.feasibility import Infeasible
from inferlab.model.steptime import replica
from inferlab.predict import accepted_models, layout_options, predict
from inferlab.serving.calibration import stack_for
from inferlab.serving.scheduler import Scheduler

H200, B200, H100 = "NVIDIA H200 SXM", "NVIDIA B200", "NVIDIA H100 SXM"
CHAT = Workload.fixed(1000, 200)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inferlab.predict", *args],
                          capture_output=True, text=True, timeout=300)


def test_list_models_prints_every_model_one_a_line():
    done = run_cli("--list-models")
    assert done.returncode == 0
    assert done.stdout.splitlines() == accepted_models() == specs.models()
    assert {"Llama 3.1 8B", "Llama 3.1 405B", "Mixtral 8x7B", "DeepSeek-R1", "Qwen3 30B-A3B",
            "gpt-oss 120B", "Llama 4 Maverick"} <= set(accepted_models())


def test_fixed_lengths_from_the_command_line_are_the_functions_steady_offline():
    done = run_cli("--chip", H200, "--chips", "8", "--model", "Llama 3.1 8B",
                   "--input-tokens", "1000", "--output-tokens", "200", "--json")
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    same = predict(H200, 8, "Llama 3.1 8B", "fp8", workload=CHAT)
    assert found["tokens_per_s"] == pytest.approx(same.tokens_per_s, rel=1e-12)
    assert found["rules"] == "steady Offline" and found["valid"] is True
    assert found["workload"] == "fixed lengths: 1,000 in, 200 out"
    # The package itself is callable as the predictor.
    assert inferlab.predict(H200, 8, "Llama 3.1 8B", workload=CHAT) == same


def test_bad_lengths_and_long_requests_are_refused_by_name_with_the_limit():
    done = run_cli("--chip", H200, "--model", "Llama 3.1 8B", "--input-tokens", "0",
                   "--output-tokens", "200")
    assert done.returncode == 2 and "input_tokens: 0 is not allowed" in done.stderr
    done = run_cli("--chip", H200, "--model", "Llama 3.1 8B", "--input-tokens", "100",
                   "--output-tokens", "-5")
    assert done.returncode == 2 and "output_tokens" in done.stderr
    with pytest.raises(ValueError, match=r"input_tokens \+ output_tokens: 4,200 tokens.*"
                                         r"context of 4,096 tokens"):
        predict(H200, 8, "Llama 2 70B", workload=Workload.fixed(4000, 200))
    done = run_cli("--chip", H200, "--model", "No Such Model", "--input-tokens", "10",
                   "--output-tokens", "10")
    assert done.returncode == 2 and "unknown model 'No Such Model'; known: Llama 2 7B" \
        in done.stderr


def test_a_layout_that_does_not_fit_is_refused_with_the_gigabytes_it_needs():
    with pytest.raises(Infeasible, match=r"405B at fp8 needs 405\.9 GB of weights"):
        predict(H100, 4, "Llama 3.1 405B", workload=CHAT)
    done = run_cli("--chip", H100, "--chips", "4", "--model", "Llama 3.1 405B",
                   "--input-tokens", "1000", "--output-tokens", "200")
    assert done.returncode == 2 and "405.9 GB" in done.stderr and "tokens/s" not in done.stdout


def test_models_beyond_one_domain_run_in_pipeline_stages():
    # 405B at 16 bits (812 GB) needs more than one 8-GPU H100 board: two stages of eight.
    assert (8, 2) in layout_options(H100, 16, "Llama 3.1 405B", "bf16")
    with pytest.raises(Infeasible, match="needs 811.7 GB of weights"):
        layout_options(H100, 8, "Llama 3.1 405B", "bf16")
    found = predict(H100, 16, "Llama 3.1 405B", "bf16", workload=CHAT)
    assert found.pp >= 2 and found.tp * found.pp * found.replicas == 16
    assert found.tp <= specs.chip(H100).domain_chips and found.tokens_per_s > 0


def test_a_hand_built_stack_runs_as_built():
    fitted = stack_for(H200, "fp8")
    small = dataclasses.replace(fitted, name="eight at a time",
                                custom_engine=Scheduler(max_batch=8, token_budget=2048))
    tight = predict(H200, 8, "Llama 3.1 8B", workload=CHAT, stack=small)
    assert tight.batch <= 8 and tight.stack == "eight at a time"
    assert small.engine(H200, "Offline")["source"] == "the engine built into stack " \
        "'eight at a time'"
    assert tight.tokens_per_s < predict(H200, 8, "Llama 3.1 8B", workload=CHAT).tokens_per_s
    # A stack named on the command line is looked up once, at the entry.
    done = run_cli("--chip", H200, "--model", "Llama 3.1 8B", "--input-tokens", "100",
                   "--output-tokens", "50", "--stack", "No Such Stack")
    assert done.returncode == 2 and "stack: unknown stack 'No Such Stack'" in done.stderr


def test_csv_rows_the_model_refuses_get_their_reason_and_the_rest_is_predicted(tmp_path):
    source = tmp_path / "in.csv"
    source.write_text(
        "chip,chips,model,precision,scenario,tp,pp,input_tokens,output_tokens\n"
        f"{H200},8,Llama 3.1 8B,fp8,Offline,,,1000,200\n"
        f"{H100},4,Llama 3.1 405B,fp8,Offline,,,1000,200\n"
        f"{H200},8,Llama 9,fp8,Offline,,,1000,200\n"
        f"{H200},8,Llama 3.1 8B,fp8,Offline,2,,500,100\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    done = run_cli("--csv", str(source), "--out", str(out))
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert len(rows) == 4
    assert float(rows[0]["tokens_per_s"]) > 0 and rows[0]["refused"] == ""
    assert rows[1]["tokens_per_s"] == "" and "405.9 GB" in rows[1]["refused"]
    assert rows[2]["tokens_per_s"] == "" and "unknown model 'Llama 9'" in rows[2]["refused"]
    assert rows[3]["tp"] == "2" and float(rows[3]["tokens_per_s"]) > 0
    # A malformed file still fails whole, with its file, line and column.
    source.write_text("chip,chips,model,precision,scenario,tp\n"
                      f"{H200},8,Llama 3.1 8B,fp8,Offline,two\n", encoding="utf-8")
    done = run_cli("--csv", str(source), "--out", str(out))
    assert done.returncode == 2 and "line 2, column 'tp'" in done.stderr


def test_more_output_never_lifts_throughput_past_the_decode_bound():
    # The cheapest step of a batch reads only the prompt's cache: no schedule beats
    # batch / decode_step(batch, prompt) output tokens per second, whatever the output.
    prompt = 1000
    rep = replica("Llama 3.1 8B", H200, 1, "fp8",
                  **stack_for(H200, "fp8").replica_parameters(H200, "fp8", "Llama 3.1 8B"))
    engine = stack_for(H200, "fp8").scheduler(H200, "Offline")
    most = min(engine.max_batch, rep.kv_capacity_tokens // (prompt + 1))
    bound = 8 * max(b / rep.decode_step_s(b, prompt) for b in range(1, most + 1))
    rates = [predict(H200, 8, "Llama 3.1 8B", workload=Workload.fixed(prompt, out))
             .tokens_per_s for out in (16, 64, 256, 1024, 2048)]
    assert all(rate <= bound for rate in rates)
    # Short answers pay for their prefill: the bound is approached from below.
    assert rates[0] < rates[2] < bound


@pytest.mark.parametrize("model", ["Llama 3.1 8B", "Llama 3.1 70B", "Mixtral 8x7B"])
def test_fp4_is_never_slower_than_fp8_on_a_chip_with_fp4(model):
    same = stack_for(B200, "fp8")  # one stack, so only the format differs
    fp8 = predict(B200, 8, model, "fp8", workload=CHAT, stack=same)
    fp4 = predict(B200, 8, model, "fp4", workload=CHAT, stack=same)
    assert fp4.tokens_per_s >= fp8.tokens_per_s


@pytest.mark.parametrize("model", ["Llama 3.1 70B", "Llama 3.1 405B", "Mixtral 8x7B",
                                   "DeepSeek-V3"])
def test_tensor_parallel_inside_a_domain_is_never_slower_per_request_than_across_it(model):
    # The same sixteen chips' worth of work per request: eight in one domain against four
    # and a second stage in another (one request's token must pass both stages).
    precision = "fp4"
    inside = replica(model, B200, 8, precision)
    across = replica(model, B200, 4, precision, pp=2)
    for context in (1, 1000, 8000):
        assert inside.decode_step_s(1, context) <= across.decode_step_s(1, context)


def test_expert_parallelism_replaces_the_expert_all_reduce_with_all_to_alls():
    plain = replica("Mixtral 8x7B", B200, 8, "fp4", allreduce_latency_s=5e-6)
    spread = replica("Mixtral 8x7B", B200, 8, "fp4", ep=8, allreduce_latency_s=5e-6)
    # Two experts a token: fewer bytes cross the links when whole experts sit on each chip.
    assert spread.allreduce_s(1024) < plain.allreduce_s(1024)
    assert spread.weights_s(1024) == plain.weights_s(1024)  # the same bytes read
    # Eight experts a token over eight chips move as much as the all-reduce they replace.
    deep = replica("DeepSeek-V3", B200, 8, "fp4", ep=8, allreduce_latency_s=5e-6)
    assert deep.allreduce_s(1024) <= replica("DeepSeek-V3", B200, 8, "fp4",
                                             allreduce_latency_s=5e-6).allreduce_s(1024)
    with pytest.raises(ValueError, match="ep: 3 must divide tp=8"):
        replica("DeepSeek-V3", B200, 8, "fp4", ep=3)
    with pytest.raises(ValueError, match="ep: 2 must divide tp=2 and Llama 3.1 8B's 1"):
        replica("Llama 3.1 8B", B200, 2, "fp8", ep=2)


def test_a_mixture_reads_more_experts_as_the_batch_grows_and_the_floor_says_so():
    from inferlab.model.roofline import model_decode_floor, params_read

    spec = specs.model("Mixtral 8x7B")
    reads = [params_read(spec, t) for t in (1, 2, 8, 64, 512)]
    assert reads == sorted(reads) and reads[-1] == pytest.approx(
        spec.params_total - spec.embedding_params + 512 * spec.hidden_size, rel=1e-6)
    bandwidth = specs.chip(H200).memory_bandwidth_bytes_per_s
    one = model_decode_floor(spec, "fp8", bandwidth, batch=1)
    many = model_decode_floor(spec, "fp8", bandwidth, batch=64)
    assert many.weight_bytes > 3 * one.weight_bytes


def test_sliding_window_layers_hold_no_more_than_their_window():
    from inferlab.model.capacity import kv_bytes_for_context, kv_bytes_per_token

    oss = specs.model("gpt-oss 120B")  # 18 of 36 layers attend within 128 tokens
    per_token = kv_bytes_per_token(oss, "fp8")
    assert kv_bytes_for_context(oss, 100, "fp8") == pytest.approx(100 * per_token)
    long = kv_bytes_for_context(oss, 100_000, "fp8")
    assert long == pytest.approx(per_token / 36 * (18 * 100_000 + 18 * 128))
    # A dense model without windows holds its whole context in every layer.
    llama = specs.model("Llama 3.1 8B")
    assert kv_bytes_for_context(llama, 5000) == pytest.approx(5000 * kv_bytes_per_token(llama))


def test_every_model_is_predicted_on_a_chip_that_holds_it():
    for name in accepted_models():
        spec = specs.model(name)
        workload = Workload.fixed(512, 128)
        precision = "fp4" if spec.params_total > 500e9 else "fp8"
        found = predict(B200, 8, spec, precision, workload=workload)
        assert found.valid and math.isfinite(found.tokens_per_s) and found.tokens_per_s > 0


def test_a_request_too_long_for_the_narrowest_layout_is_served_by_a_wider_one():
    # 131,000 tokens of one request fit Llama 3.1 70B's context but not one H100's cache
    # beside the weights: the search skips the layouts that cannot hold it.
    from inferlab.benchmark.workload import Workload
    from inferlab.model.feasibility import Infeasible
    from inferlab.predict import predict

    long = Workload.fixed(130_000, 1_000)
    found = predict("NVIDIA H100 SXM", 8, "Llama 3.1 70B", "fp8", workload=long)
    assert found.valid and found.tokens_per_s > 0 and found.tp > 1
    with pytest.raises(Infeasible, match="131,000 tokens"):
        predict("NVIDIA H100 SXM", 8, "Llama 3.1 70B", "fp8", workload=long, tps=[1])
