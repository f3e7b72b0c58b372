"""The lab's OpenAI-compatible server, over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import httpx
import numpy as np
import pytest

from inferlab.lab.engine import Engine
from inferlab.lab.engine_sizes import EngineConfig
from inferlab.lab.loadclient import LoadSpec, run_load
from inferlab.lab.server import LabServer, ServerConfig
from inferlab.tokens.tokenizers import get_tokenizer

TINY = ServerConfig(size="tiny", context_tokens=4096)
MODEL = "inferlab-tiny"
TIMEOUT = httpx.Timeout(30.0)


@pytest.fixture(scope="module")
def server():
    with LabServer(TINY) as running:
        yield running


@pytest.fixture(scope="module")
def small_engine():
    """The default size, whose decode steps are slow enough to hold a request running."""
    return Engine(EngineConfig.named("small"), show=None)


@pytest.fixture(scope="module")
def slow_server(small_engine):
    with LabServer(ServerConfig(context_tokens=8192), engine=small_engine) as running:
        yield running


@pytest.fixture()
def client():
    with httpx.Client(timeout=TIMEOUT) as c:
        yield c


def events(response) -> list:
    """The parsed ``data:`` events of a streamed response (``"[DONE]"`` kept as a string)."""
    out = []
    for line in response.iter_lines():
        if line.startswith("data: "):
            payload = line[len("data: "):]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
    return out


def expected_text(prompt: str, max_tokens: int) -> tuple[str, int]:
    tokenizer = get_tokenizer("cl100k_base")
    engine = Engine(EngineConfig.named("tiny"), show=None)
    ids = np.array(tokenizer.encode(prompt)) % engine.config.vocab_size
    out = engine.generate(ids[None, :], max_tokens)[0]
    return tokenizer.decode([int(t) for t in out]), len(ids)


def test_models_lists_the_served_model(server, client):
    body = client.get(server.base_url + "/models").json()
    assert [m["id"] for m in body["data"]] == [MODEL]


def test_completion_is_the_engine_greedy_output_with_usage(server, client):
    text, prompt_tokens = expected_text("The quick brown fox", 12)
    r = client.post(server.base_url + "/completions",
                    json={"model": MODEL, "prompt": "The quick brown fox", "max_tokens": 12})
    assert r.status_code == 200
    body = r.json()
    assert body["choices"][0]["text"] == text
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"] == {"prompt_tokens": prompt_tokens, "completion_tokens": 12,
                             "total_tokens": prompt_tokens + 12}


def test_streamed_completion_joins_to_the_same_text_and_ends_with_usage(server, client):
    text, prompt_tokens = expected_text("The quick brown fox", 12)
    body = {"model": MODEL, "prompt": "The quick brown fox", "max_tokens": 12, "stream": True,
            "stream_options": {"include_usage": True}}
    with client.stream("POST", server.base_url + "/completions", json=body) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        got = events(r)
    assert got[-1] == "[DONE]"
    usage_chunk = got[-2]
    assert usage_chunk["choices"] == []
    assert usage_chunk["usage"]["completion_tokens"] == 12
    assert usage_chunk["usage"]["prompt_tokens"] == prompt_tokens
    chunks = got[:-2]
    assert "".join(c["choices"][0]["text"] for c in chunks) == text
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["usage"] is None for c in chunks)


def test_chat_streams_role_then_content_and_whole_answer_matches(server, client):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8}
    whole = client.post(server.base_url + "/chat/completions", json=body).json()
    message = whole["choices"][0]["message"]
    assert message["role"] == "assistant" and whole["usage"]["completion_tokens"] == 8
    with client.stream("POST", server.base_url + "/chat/completions",
                       json={**body, "stream": True}) as r:
        got = events(r)
    assert got[-1] == "[DONE]"
    assert got[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in got[1:-1])
    assert streamed == message["content"]


@pytest.mark.parametrize(("path", "payload", "status", "param"), [
    ("/completions", b"{not json", 400, None),
    ("/completions", b"[1, 2]", 400, None),
    ("/completions", json.dumps({"model": MODEL}).encode(), 400, "prompt"),
    ("/completions", json.dumps({"model": MODEL, "prompt": "x", "max_tokens": 0}).encode(),
     400, "max_tokens"),
    ("/completions", json.dumps({"model": MODEL, "prompt": "x", "stream": "yes"}).encode(),
     400, "stream"),
    ("/chat/completions", json.dumps({"model": MODEL, "messages": []}).encode(), 400,
     "messages"),
    ("/completions", json.dumps({"model": "gpt-9", "prompt": "x"}).encode(), 404, "model"),
    ("/completions", json.dumps({"model": MODEL, "prompt": [1] * 4096}).encode(), 400,
     "prompt"),
])
def test_bad_requests_get_openai_error_bodies(server, client, path, payload, status, param):
    r = client.post(server.base_url + path, content=payload,
                    headers={"content-type": "application/json"})
    assert r.status_code == status
    error = r.json()["error"]
    assert error["message"] and error["type"]
    assert error["param"] == param


def test_prompt_longer_than_context_says_so(server, client):
    r = client.post(server.base_url + "/completions",
                    json={"model": MODEL, "prompt": [1] * 4000, "max_tokens": 200})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "context_length_exceeded"
    assert "4096" in r.json()["error"]["message"]


def test_a_fitting_prompt_with_too_many_max_tokens_names_max_tokens_and_the_room(
        server, client):
    # The prompt fits the 4,096-token context; the completion asked for does not.
    r = client.post(server.base_url + "/completions",
                    json={"model": MODEL, "prompt": [1] * 4000, "max_tokens": 200})
    error = r.json()["error"]
    assert r.status_code == 400 and error["param"] == "max_tokens"
    assert "max_tokens: got 200" in error["message"] and "leaves 96 " in error["message"]
    # A prompt that alone fills the context is the prompt's fault.
    r = client.post(server.base_url + "/completions",
                    json={"model": MODEL, "prompt": [1] * 4096, "max_tokens": 1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "prompt"


def test_a_chat_message_without_content_is_refused_by_its_index(server, client):
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user"}]
    r = client.post(server.base_url + "/chat/completions",
                    json={"model": MODEL, "messages": messages, "max_tokens": 2})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == "messages[1].content"
    # An assistant's tool call is the one message OpenAI's schema lets omit its content.
    call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    r = client.post(server.base_url + "/chat/completions", json={
        "model": MODEL, "max_tokens": 2,
        "messages": [{"role": "user", "content": "hi"}, call,
                     {"role": "user", "content": "and?"}]})
    assert r.status_code == 200, r.text


def test_eos_stops_a_request_unless_ignore_eos():
    engine = Engine(EngineConfig.named("tiny"), show=None)
    ids = np.array(get_tokenizer("cl100k_base").encode("stop here")) % 512
    generated = [int(t) for t in engine.generate(ids[None, :], 3)[0]]
    stop_at = generated.index(generated[2]) + 1  # the first time that id comes out
    with LabServer(ServerConfig(size="tiny", eos_token_id=generated[2])) as s, \
            httpx.Client(timeout=TIMEOUT) as c:
        body = {"model": MODEL, "prompt": "stop here", "max_tokens": 10}
        stopped = c.post(s.base_url + "/completions", json=body).json()
        assert stopped["choices"][0]["finish_reason"] == "stop"
        assert stopped["usage"]["completion_tokens"] == stop_at
        full = c.post(s.base_url + "/completions", json={**body, "ignore_eos": True}).json()
        assert full["choices"][0]["finish_reason"] == "length"
        assert full["usage"]["completion_tokens"] == 10


def test_over_the_limit_gets_429_and_a_freed_slot_serves_again(small_engine):
    config = ServerConfig(max_running=1, max_waiting=0, context_tokens=8192)
    with LabServer(config, engine=small_engine) as s, httpx.Client(timeout=TIMEOUT) as c:
        long = {"model": "inferlab-small", "prompt": "a", "max_tokens": 8000, "stream": True}
        with c.stream("POST", s.base_url + "/completions", json=long) as r:
            # Keep the line iterator referenced: a throwaway one is closed when it is
            # collected, which closes the stream and frees the slot (a race under load).
            lines = r.iter_lines()
            next(line for line in lines if line.startswith("data: "))
            refused = c.post(s.base_url + "/completions",
                             json={"model": "inferlab-small", "prompt": "b", "max_tokens": 2})
            assert refused.status_code == 429
            assert refused.json()["error"]["code"] == "rate_limit_exceeded"
        # Leaving the block closed the stream: the server cancels it and frees the slot.
        assert s.wait_for(lambda st: st.running == 0 and st.cancelled == 1, 10.0)
        assert s.stats().rejected == 1
        again = c.post(s.base_url + "/completions",
                       json={"model": "inferlab-small", "prompt": "b", "max_tokens": 2})
        assert again.status_code == 200


def test_a_disconnect_mid_stream_frees_the_slot_at_once(slow_server):
    server = slow_server
    before = server.stats()
    with httpx.Client(timeout=TIMEOUT) as c:
        body = {"model": "inferlab-small", "prompt": "a", "max_tokens": 4000, "stream": True}
        with c.stream("POST", server.base_url + "/completions", json=body) as r:
            lines = (line for line in r.iter_lines() if line.startswith("data: "))
            for _ in range(3):
                next(lines)
            assert server.stats().running == 1
    assert server.wait_for(lambda st: st.running == 0 and st.cancelled == before.cancelled + 1,
                           10.0)
    # Far fewer tokens than asked for were generated: the request stopped, not finished.
    assert server.stats().tokens - before.tokens < 4000


def test_shutdown_ends_open_streams_cleanly(small_engine):
    server = LabServer(ServerConfig(context_tokens=8192), engine=small_engine).start()
    closer = threading.Thread(target=server.close)
    with httpx.Client(timeout=TIMEOUT) as c:
        body = {"model": "inferlab-small", "prompt": "a", "max_tokens": 8000, "stream": True,
                "stream_options": {"include_usage": True}}
        with c.stream("POST", server.base_url + "/completions", json=body) as r:
            lines = r.iter_lines()
            next(line for line in lines if line.startswith("data: "))
            closer.start()
            rest = [line for line in lines if line.startswith("data: ")]
    closer.join(30)
    assert not closer.is_alive()
    assert rest[-1] == "data: [DONE]"
    finishes = [json.loads(line[6:])["choices"][0]["finish_reason"]
                for line in rest[:-1] if json.loads(line[6:])["choices"]]
    assert finishes[-1] == "abort"
    assert server.stats().aborted == 1


def test_the_server_holds_32_concurrent_streams(small_engine):
    with LabServer(ServerConfig(max_running=32), engine=small_engine) as s:
        trace = run_load(s.base_url, "inferlab-small",
                         LoadSpec(requests=32, concurrency=32, prompt_tokens=32,
                                  output_tokens=16, timeout_s=120))
        stats = s.stats()
    assert trace.errors == 0
    assert all(r.completion_tokens == 16 for r in trace.requests)
    # Batched: 32 x 16 tokens took far fewer decode steps than tokens.
    assert stats.tokens == 32 * 16
    assert stats.steps < stats.tokens / 4


def test_server_config_rejects_bad_values():
    with pytest.raises(ValueError, match="max_running"):
        ServerConfig(max_running=0)
    with pytest.raises(ValueError, match="size"):
        ServerConfig(size="enormous")


def test_health_and_model_by_id(server, client):
    assert client.get(server.base_url.removesuffix("/v1") + "/health").status_code == 200
    card = client.get(server.base_url + f"/models/{MODEL}").json()
    assert card["id"] == MODEL and card["object"] == "model"
    missing = client.get(server.base_url + "/models/gpt-4")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "model_not_found"


def test_unknown_paths_and_methods_get_openai_error_bodies(server, client):
    r = client.get(server.base_url + "/embeddings")
    assert r.status_code == 404 and "/v1/embeddings" in r.json()["error"]["message"]
    r = client.delete(server.base_url + "/models")
    assert r.status_code == 405 and "DELETE" in r.json()["error"]["message"]


def test_chat_content_may_be_a_list_of_text_parts(server, client):
    parts = {"model": MODEL, "max_tokens": 4, "messages": [
        {"role": "user", "content": [{"type": "text", "text": "Hello"},
                                     {"type": "text", "text": "there"}]}]}
    joined = {"model": MODEL, "max_tokens": 4,
              "messages": [{"role": "user", "content": "Hello\nthere"}]}
    a = client.post(server.base_url + "/chat/completions", json=parts).json()
    b = client.post(server.base_url + "/chat/completions", json=joined).json()
    assert a["choices"][0]["message"] == b["choices"][0]["message"]
    assert a["usage"] == b["usage"]
    image = {"model": MODEL, "messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "data:,"}}]}]}
    r = client.post(server.base_url + "/chat/completions", json=image)
    assert r.status_code == 400
    assert "image_url" in r.json()["error"]["message"]
    assert r.json()["error"]["param"] == "messages[0].content"


def test_null_means_not_given(server, client):
    body = {"model": MODEL, "prompt": "Hi", "max_tokens": None, "stream": None,
            "logprobs": None, "n": None, "stream_options": None, "ignore_eos": None}
    r = client.post(server.base_url + "/completions", json=body)
    assert r.status_code == 200
    assert r.json()["usage"]["completion_tokens"] == TINY.default_max_tokens


@pytest.mark.parametrize(("name", "value"), [
    ("logprobs", 2), ("echo", True), ("n", 2), ("best_of", 3), ("suffix", "end"),
    ("logit_bias", {"50256": -100}), ("tools", [{"type": "function"}]),
    ("response_format", {"type": "json_object"}), ("stop", ["\n"]),
])
def test_parameters_it_cannot_honour_are_refused_by_name(server, client, name, value):
    r = client.post(server.base_url + "/completions",
                    json={"model": MODEL, "prompt": "Hi", "max_tokens": 2, name: value})
    assert r.status_code == 400
    assert r.json()["error"]["param"] == name
    assert r.json()["error"]["message"].startswith(name)


def test_harmless_values_of_those_parameters_are_accepted(server, client):
    body = {"model": MODEL, "prompt": "Hi", "max_tokens": 2, "logprobs": False, "echo": False,
            "n": 1, "best_of": 1, "logit_bias": {}, "tools": [],
            "response_format": {"type": "text"}}
    assert client.post(server.base_url + "/completions", json=body).status_code == 200


def test_tokenizer_json_cuts_text_as_tiktoken_does(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from inferlab.lab.server import write_tokenizer_dir

    folder = write_tokenizer_dir(tmp_path / "tok")
    hf = tokenizers.Tokenizer.from_file(str(folder / "tokenizer.json"))
    ours = get_tokenizer("cl100k_base")
    texts = ["Hello world", "numbers 1234567 and 3.14159", "  spaces\n\nand\r\nlines ",
             "héllo wörld 日本語 🚀", "don't I'LL we've", "<|endoftext|> is plain text here",
             Path(__file__).read_text(encoding="utf-8")[:4000]]
    for text in texts:
        assert hf.encode(text, add_special_tokens=False).ids == ours.encode(text), text[:30]
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["bos_token"] is None
    with pytest.raises(ValueError, match="tokenizer"):
        write_tokenizer_dir(tmp_path / "bad", tokenizer="llama2")


def test_command_line_sets_model_and_eos(monkeypatch):
    from inferlab.lab import server as server_module

    seen = {}

    def fake_serve(self):
        seen["config"] = self.config

    monkeypatch.setattr(server_module.LabServer, "serve_forever", fake_serve)
    server_module.main(["--size", "tiny", "--model", "my-model", "--eos-token-id", "7"])
    assert seen["config"].model_name == "my-model"
    assert seen["config"].eos_token_id == 7
    with pytest.raises(ValueError, match="eos_token_id"):
        ServerConfig(eos_token_id=-1)
