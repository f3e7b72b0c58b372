"""The official openai SDK against the lab server: its parsed stream agrees with our metrics."""

from __future__ import annotations

import time

import pytest

from inferlab.lab import endpoint_metrics as em
from inferlab.lab.loadclient import RequestTrace
from inferlab.lab.server import LabServer, ServerConfig

openai = pytest.importorskip("openai")


@pytest.fixture(scope="module")
def server():
    with LabServer(ServerConfig(size="tiny")) as running:
        yield running


def sdk_trace(client, model: str, **kwargs) -> RequestTrace:
    """One streamed chat request through the SDK, timed chunk by chunk like the book's client."""
    t0 = time.perf_counter()
    stream = client.chat.completions.create(
        model=model, stream=True, stream_options={"include_usage": True}, **kwargs)
    times, texts, usage = [], [], None
    for chunk in stream:
        times.append(time.perf_counter() - t0)
        texts.append((chunk.choices[0].delta.content or "") if chunk.choices else None)
        usage = chunk.usage or usage
    return RequestTrace(index=0, scheduled_s=0.0, send_s=0.0, end_s=time.perf_counter() - t0,
                        chunk_s=tuple(times), chunk_text=tuple(texts),
                        prompt_tokens=usage.prompt_tokens,
                        completion_tokens=usage.completion_tokens)


def test_sdk_stream_agrees_with_endpoint_metrics(server):
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    model = client.models.list().data[0].id
    assert model == server.config.model_name
    r = sdk_trace(client, model, max_tokens=12, extra_body={"ignore_eos": True},
                  messages=[{"role": "user", "content": [{"type": "text", "text": "Hi"}]}])
    whole = client.chat.completions.create(
        model=model, max_tokens=12, extra_body={"ignore_eos": True},
        messages=[{"role": "user", "content": "Hi"}])
    # The SDK saw the role chunk, content chunks, the finish chunk and the usage chunk.
    assert r.chunk_text[0] == "" and r.chunk_text[-1] is None
    assert r.text == whole.choices[0].message.content
    assert r.completion_tokens == whole.usage.completion_tokens == 12
    v = em.vllm_summary([r], r.end_s)
    a = em.aiperf_summary([r], None, use_server_token_count=True)
    # vLLM's clock starts at the role chunk, AIPerf's at the first content.
    assert v["ttft_mean_s"] == pytest.approx(r.chunk_s[0])
    assert a["ttft_mean_s"] == pytest.approx(r.chunk_s[1])
    assert v["ttft_mean_s"] <= a["ttft_mean_s"]
    content = [t for t, text in zip(r.chunk_s, r.chunk_text, strict=True) if text]
    assert a["inter_token_latency_mean_s"] == pytest.approx((content[-1] - content[0]) / 11)


def test_sdk_raises_the_servers_errors(server):
    client = openai.OpenAI(base_url=server.base_url, api_key="unused", max_retries=0)
    with pytest.raises(openai.NotFoundError):
        client.chat.completions.create(model="gpt-4", messages=[{"role": "user", "content": "x"}])
    with pytest.raises(openai.BadRequestError, match="logprobs"):
        client.chat.completions.create(model=server.config.model_name, logprobs=True,
                                       messages=[{"role": "user", "content": "x"}])
