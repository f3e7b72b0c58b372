"""The appendix 'How far the model carries', as the executed page answers it.

Its figures about DeepSeek-R1's Server runs are read back from the build and checked
against the LoadGen summaries in `data/mlperf_llm_latencies.csv`, so a page that
quoted another run, or mislabelled a range, fails here.
"""

from __future__ import annotations

import pytest
from conftest import glued

from inferlab.common.data import load_table

pytestmark = pytest.mark.build


@pytest.fixture(scope="module")
def answers(built_book) -> dict:
    return glued(built_book, "model_accuracy")


def test_the_r1_server_logs_it_quotes_are_the_tables(answers):
    logs = load_table("mlperf_llm_latencies")
    r1 = logs[logs["id"].str.contains("-deepseek-r1-")]
    assert answers["acc_r1_own_runs"] == len(r1) == 6
    assert answers["acc_r1_logs_tpot_lo"] == pytest.approx(r1["tpot_p99_ms"].min())
    assert answers["acc_r1_logs_tpot_hi"] == pytest.approx(r1["tpot_p99_ms"].max())
    assert answers["acc_r1_logs_ttft_lo"] == pytest.approx(r1["ttft_p99_ms"].min() / 1e3)
    assert answers["acc_r1_logs_ttft_hi"] == pytest.approx(r1["ttft_p99_ms"].max() / 1e3)
    nvidia = r1.set_index("id").loc["v5.1-nvidia-b200_sxm_180gbx8_trt-deepseek-r1-server"]
    # Little's law: completed queries a second times a query's mean time.
    assert answers["acc_r1_little_requests"] == pytest.approx(
        nvidia["completed_samples_per_s"] * nvidia["mean_latency_s"])
    assert answers["acc_r1_little_tpot_ms"] == pytest.approx(nvidia["tpot_p50_ms"])


def test_the_model_runs_r1_about_twice_as_fast_a_token_as_the_logs(answers):
    # "about half": every modelled p99 TPOT and the step at the engine's own batch.
    assert 0.4 * answers["acc_r1_logs_tpot_lo"] < answers["acc_r1_own_tpot_lo"]
    assert answers["acc_r1_own_tpot_hi"] < 0.6 * answers["acc_r1_logs_tpot_hi"]
    assert 0.35 < answers["acc_r1_little_step_ms"] / answers["acc_r1_little_tpot_ms"] < 0.6
    # First tokens: the model's slowest p99 is a small part of the logs' fastest.
    assert answers["acc_r1_own_ttft_hi"] / 1e3 < 0.1 * answers["acc_r1_logs_ttft_lo"]
    # The 8B comparison: its worst Offline miss is far from R1's.
    assert answers["acc_8b_offline_high"] < 0.5 < answers["acc_deepseek_r1_median"]


def test_the_attention_dp_wait_it_quotes_is_tensorrt_llms_measurement(answers):
    values = load_table("results").set_index("id")["value"]
    balanced = values["trtllm-blog10-dsv3-8xgb200-adp-balanced"]
    even = values["trtllm-blog10-dsv3-8xgb200-adp-balanced-sol"]
    assert answers["acc_adp_balanced"] == balanced
    assert answers["acc_adp_sol"] == even
    assert answers["acc_adp_baseline"] == values["trtllm-blog10-dsv3-8xgb200-adp-baseline"]
    assert answers["acc_adp_loss"] == pytest.approx(1 - balanced / even)
    # "a part of R1's gap, not most of it": a tenth against a miss of more than half.
    assert answers["acc_adp_loss"] < 0.15 and answers["acc_deepseek_r1_median"] > 0.5
