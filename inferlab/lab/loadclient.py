"""A benchmark client for any OpenAI-compatible endpoint, recording a trace per request.

:func:`run_load` drives a server (this book's :mod:`inferlab.lab.server`, vLLM,
llama.cpp's server, Ollama, a hosted API) through ``POST /completions`` or
``POST /chat/completions`` with ``stream: true`` and records, for every
request, when it was meant to be sent, when it was sent, the arrival time and
text of every streamed chunk, and the server's usage counts. The metrics of
each tool are computed afterwards from that one trace by
:mod:`inferlab.lab.endpoint_metrics`, so every tool's definition is applied to the
same run.

Two ways to offer load (:class:`~inferlab.benchmark.traces.LoadSpec`):

- closed loop: ``concurrency`` users, each sending its next request as soon as
  its previous one ends (LLMPerf's and ``vllm bench serve
  --max-concurrency``'s model);
- open loop: Poisson arrivals at ``rate_per_s`` (MLPerf's Server scenario,
  ``vllm bench serve --request-rate``), optionally capped at
  ``max_in_flight`` requests, in which case a request waits for a free slot
  and its *scheduled* time differs from its *send* time, the gap that
  coordinated omission hides.

Prompt and output lengths are fixed or drawn from a normal distribution
(rounded, at least 1), as LLMPerf draws them. Prompts are random English words
cut to a token count with a book tokenizer; each request's prompt differs, so a
prefix cache cannot serve one request from another's work. ``ignore_eos``
asks the server to generate exactly ``max_tokens`` (vLLM and this book's server
honour it; servers that do not know it ignore it or refuse it).

The run is bounded by ``requests`` and ``duration_s``; every network wait has
a timeout. On a slow or busy machine, size a run from a rate you measured
(:func:`requests_within`) and set ``timeout_s`` from it too, rather than fixing
both for a fast machine. It runs its own asyncio loop in a fresh thread, so it works the same
in a script and in a notebook whose loop is already running. Used in the
endpoint lab.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import threading
import time
from contextlib import closing

import httpx
import numpy as np

from inferlab.benchmark.traces import LoadSpec, RequestTrace, Trace
from inferlab.common import checks
from inferlab.tokens.tokenizers import available_tokenizers, get_tokenizer

# Common English words to build prompts from (gibberish in any order, but
# tokenized as real words by every tokenizer).
_WORD_TEXT = (
    "the of and to in is you that it he was for on are as with his they at be this have "
    "from or one had by word but not what all were we when your can said there use an each "
    "which she do how their if will up other about out many then them these so some her "
    "would make like him into time has look two more write go see number no way could "
    "people my than first water been call who oil its now find long down day did get come "
    "made may part over new sound take only little work know place year live me back give "
    "most very after thing our just name good sentence man think say great where help "
    "through much before line right too mean old any same tell boy follow came want show "
    "also around form three small set put end does another well large must big even such "
    "because turn here why ask went men read need land different home us move try kind hand "
    "picture again change off play spell air away animal house point page letter mother "
    "answer found study still learn should america world high every near add food between "
    "own below country plant last school father keep tree never start city earth eye light "
    "thought head under story saw"
)
_WORDS = tuple(_WORD_TEXT.split())


def requests_within(rate_per_s: float, budget_s: float, at_least: int = 1,
                    at_most: int | None = None) -> int:
    """How many requests a run at ``rate_per_s`` completes in ``budget_s`` seconds.

    ``round(rate_per_s * budget_s)``, kept between ``at_least`` and ``at_most``
    (if given). Measure the rate on the machine that will run the load (a
    short run's ``len(trace.succeeded) / trace.duration_s``), so a slow machine
    runs fewer requests in the same time instead of running out of it. Used in
    the endpoint lab. Raises ``ValueError`` naming the argument.
    """
    for name, value in (("rate_per_s", rate_per_s), ("budget_s", budget_s)):
        if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
            raise ValueError(f"{name}: got {value!r}; must be a finite number > 0")
    if not isinstance(at_least, int) or at_least < 1:
        raise ValueError(f"at_least: got {at_least!r}; must be a whole number >= 1")
    if at_most is not None and (not isinstance(at_most, int) or at_most < at_least):
        raise ValueError(f"at_most: got {at_most!r}; must be None or a whole number >= "
                         f"at_least ({at_least})")
    count = max(at_least, round(rate_per_s * budget_s))
    return count if at_most is None else min(count, at_most)


def _lengths(mean: int, sd: float, n: int, rng: np.random.Generator) -> np.ndarray:
    if sd == 0:
        return np.full(n, mean, dtype=int)
    return np.maximum(1, np.rint(rng.normal(mean, sd, n))).astype(int)


def make_prompt(tokens: int, rng: np.random.Generator, tokenizer: str = "cl100k_base") -> str:
    """Random English words cut to ``tokens`` tokens of ``tokenizer``, a new text per call.

    At most ``inferlab.common.checks.MAX_ITEMS`` tokens: twice as many words are drawn.
    """
    tokens = checks.whole("tokens", tokens, maximum=checks.MAX_ITEMS)
    checks.instance("rng", rng, np.random.Generator)
    tok = get_tokenizer(checks.option("tokenizer", tokenizer, available_tokenizers()))
    words = rng.choice(_WORDS, size=2 * tokens + 8)
    ids = tok.encode(" ".join(words))[:tokens]
    return tok.decode(ids)


def _parse_event(line: str) -> dict | None:
    """The JSON of one ``data:`` line; ``None`` for other lines and for ``[DONE]``."""
    if not line.startswith("data:"):
        return None
    payload = line[5:].strip()
    if payload == "[DONE]":
        return None
    return json.loads(payload)


async def _one_request(client: httpx.AsyncClient, url: str, body: dict, index: int,
                       scheduled_s: float, t0: float, requested: tuple[int, int]) -> RequestTrace:
    send = time.perf_counter()
    times, texts = [], []
    usage, finish, status, error = None, None, 0, None
    try:
        async with client.stream("POST", url, json=body) as response:
            status = response.status_code
            if status != 200:
                raw = await response.aread()
                try:
                    error = json.loads(raw)["error"]["message"]
                except (ValueError, KeyError, TypeError):
                    error = raw.decode(errors="replace")[:200]
            else:
                async for line in response.aiter_lines():
                    if line.strip() == "data: [DONE]":
                        break
                    data = _parse_event(line)
                    if data is None:
                        continue
                    now = time.perf_counter()
                    if "error" in data:
                        error = str(data["error"])
                        break
                    choices = data.get("choices") or []
                    text = None
                    if choices:
                        choice = choices[0]
                        text = choice.get("text")
                        if text is None:
                            text = (choice.get("delta") or {}).get("content")
                        text = text or ""
                        finish = choice.get("finish_reason") or finish
                    if data.get("usage"):
                        usage = data["usage"]
                    times.append(now - t0)
                    texts.append(text)
    except (httpx.HTTPError, ValueError) as caught:
        error = f"{type(caught).__name__}: {caught}"
    end = time.perf_counter()
    if error is None and not any(texts):
        error = "no text streamed"
    return RequestTrace(
        index=index, scheduled_s=scheduled_s, send_s=send - t0, end_s=end - t0,
        chunk_s=tuple(times), chunk_text=tuple(texts),
        prompt_tokens=(usage or {}).get("prompt_tokens"),
        completion_tokens=(usage or {}).get("completion_tokens"),
        finish_reason=finish, status=status, error=error,
        requested_prompt_tokens=requested[0], requested_output_tokens=requested[1])


def _bodies(spec: LoadSpec, model: str) -> list[tuple[dict, tuple[int, int]]]:
    rng = np.random.default_rng(spec.seed)
    prompts = _lengths(spec.prompt_tokens, spec.prompt_tokens_sd, spec.requests, rng)
    outputs = _lengths(spec.output_tokens, spec.output_tokens_sd, spec.requests, rng)
    bodies = []
    for p, o in zip(prompts, outputs, strict=True):
        text = make_prompt(int(p), rng, spec.prompt_tokenizer)
        body = {"model": model, "max_tokens": int(o), "stream": True,
                "stream_options": {"include_usage": True}, "temperature": 0.0}
        if spec.chat:
            body["messages"] = [{"role": "user", "content": text}]
        else:
            body["prompt"] = text
        if spec.ignore_eos:
            body["ignore_eos"] = True
        body.update(spec.extra_body)
        bodies.append((body, (int(p), int(o))))
    return bodies


async def _run(base_url: str, model: str, spec: LoadSpec, api_key: str | None,
               traces: list[RequestTrace]) -> Trace:
    url = base_url.rstrip("/") + ("/chat/completions" if spec.chat else "/completions")
    bodies = _bodies(spec, model)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    timeout = httpx.Timeout(spec.timeout_s)
    async with httpx.AsyncClient(headers=headers, limits=limits, timeout=timeout) as client:
        t0 = time.perf_counter()
        if spec.mode == "closed":
            counter = iter(range(spec.requests))

            async def user() -> None:
                for index in counter:
                    now = time.perf_counter() - t0
                    if now > spec.duration_s:
                        return
                    body, requested = bodies[index]
                    traces.append(await _one_request(client, url, body, index, now, t0,
                                                     requested))

            await asyncio.gather(*(user() for _ in range(spec.concurrency)))
        else:
            rng = np.random.default_rng(spec.seed + 1)
            arrivals = np.cumsum(rng.exponential(1.0 / spec.rate_per_s, spec.requests))
            slots = asyncio.Semaphore(spec.max_in_flight or spec.requests)
            tasks = []

            async def send(index: int, scheduled: float) -> None:
                async with slots:
                    body, requested = bodies[index]
                    traces.append(await _one_request(client, url, body, index, scheduled,
                                                     t0, requested))

            for index, arrival in enumerate(arrivals):
                if arrival > spec.duration_s:
                    break
                delay = t0 + arrival - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)  # the arrival schedule itself, not a wait
                tasks.append(asyncio.ensure_future(send(index, float(arrival))))
            await asyncio.gather(*tasks)
    traces.sort(key=lambda r: r.index)
    duration = (max(r.end_s for r in traces) - min(r.send_s for r in traces)) if traces else 0.0
    return Trace(tuple(traces), spec, duration, base_url, model)


def run_load(base_url: str, model: str, spec: LoadSpec | None = None, *,
             api_key: str | None = None, progress=None) -> Trace:
    """Run ``spec`` against the OpenAI-compatible server at ``base_url`` and return the trace.

    ``base_url`` ends in ``/v1`` (``http://127.0.0.1:8000/v1`` for vLLM,
    ``http://127.0.0.1:11434/v1`` for Ollama); ``model`` is the name the
    server knows. ``api_key`` defaults to the ``OPENAI_API_KEY`` environment
    variable, sent as a bearer token when set. Runs in its own thread and
    event loop, so it can be called from a notebook. ``progress`` draws a bar of the
    requests answered (pass :func:`inferlab.pages.progress.progress`; ``None`` shows nothing).
    """
    spec = spec or LoadSpec()
    api_key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
    result: dict = {}
    finished: list[RequestTrace] = []  # grown by the run's thread, counted by this one

    def target() -> None:
        try:
            result["trace"] = asyncio.run(_run(base_url, model, spec, api_key, finished))
        except BaseException as error:  # handed to the caller below
            result["error"] = error

    thread = threading.Thread(target=target, name="inferlab-loadclient", daemon=True)
    thread.start()
    deadline = time.monotonic() + spec.duration_s + spec.timeout_s + 30.0
    # The bar is drawn from this thread, which owns the notebook output, not from the run's loop.
    with closing(checks.shown("progress", progress, range(spec.requests),
                              label="Requests answered")) as ticks:
        shown = 0
        while thread.is_alive() and time.monotonic() < deadline:
            thread.join(min(0.25, max(0.0, deadline - time.monotonic())))
            for _ in range(len(finished) - shown):
                next(ticks, None)
            shown = len(finished)
    if thread.is_alive():
        raise TimeoutError(f"the run did not end within duration_s + timeout_s + 30 s "
                           f"({spec.duration_s + spec.timeout_s + 30.0:.0f} s)")
    if "error" in result:
        raise result["error"]
    return result["trace"]
