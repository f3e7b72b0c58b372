"""A local OpenAI-compatible server for the lab engine, with continuous batching.

The endpoint lab benchmarks a real HTTP endpoint on the reader's own machine.
:class:`LabServer` serves :class:`inferlab.engine.Engine` over the OpenAI API:

- ``POST /v1/completions`` and ``POST /v1/chat/completions``, streamed as
  server-sent events (``stream: true``, with ``stream_options.include_usage``
  for a final usage chunk) or returned whole; ``max_tokens`` and
  ``ignore_eos`` (vLLM's extension) fix the output length;
- ``GET /v1/models``, ``GET /v1/models/{id}``, ``GET /health`` (200 once the
  server accepts requests, as vLLM's), ``GET /inferlab/stats`` (the scheduler's
  counters).

What real clients send is accepted as the OpenAI API defines it: a chat
``content`` may be a string or a list of ``{"type": "text", "text": ...}``
parts (joined with newlines, as vLLM joins them; a part of any other type is
refused with 400 naming it); a message without ``content`` is refused with 400
naming ``messages[i].content`` unless it is an assistant's ``tool_calls``, which
OpenAI's schema lets omit it; and a JSON ``null`` counts as a parameter not given.
The server decodes greedily (sampling parameters such as
``temperature`` change nothing); parameters whose meaning it cannot deliver
(:data:`UNSUPPORTED`: ``logprobs``, ``echo``, ``n`` above 1, ``best_of``,
``suffix``, ``logit_bias``, ``tools``, a non-text ``response_format``, ...) are
refused with 400 naming the parameter rather than silently ignored.
:func:`write_tokenizer_dir` writes the server's tokenizer as a Hugging Face
``tokenizer.json`` folder, so tools that count tokens with a Hugging Face
tokenizer (AIPerf, guidellm) load it offline.

Continuous batching: one worker thread owns the engine. At every step it
admits waiting requests (prefilling each prompt on its own), runs one batched
decode step for every running sequence, hands each new token to its request's
asyncio queue with ``loop.call_soon_threadsafe``, and retires the finished and
the cancelled. Requests therefore join and leave the batch between any two
decode steps (Yu et al., 2022, "Orca"; Kwon et al., 2023, vLLM). NumPy
releases the GIL inside BLAS, so the event loop keeps serving while a step runs.

The sequences of a running batch have different lengths, which the engine's
one-length :class:`~inferlab.engine.KVCache` cannot hold, so each request keeps
its own cache and :meth:`~inferlab.engine.Engine.decode_ragged` batches the
weight multiplies of all sequences (the bytes that dominate a decode step) and
attends each sequence to its own cache, with the same layer code as every other
pass of the engine.

Tokens: the weights are random, so the text is gibberish, but every token is
the engine's greedy output decoded with one of the book's tokenizers
(``cl100k_base`` by default). The engine's vocabulary (16,384 ids for the
default size) is smaller than the tokenizer's, so prompt ids are taken modulo
the engine's vocabulary on the way in; every id the engine emits is below its
vocabulary and hence a valid id of a larger tokenizer. A size whose vocabulary
exceeds the tokenizer's is refused. With random weights the model practically
never emits an end-of-sequence token: set ``eos_token_id`` to make one id stop
a request (unless the request sets ``ignore_eos``).

Errors have OpenAI's body ``{"error": {"message", "type", "param", "code"}}``:
malformed JSON or fields 400, an unknown model or path 404, a wrong method 405, a prompt
longer than the context 400 naming the prompt, a prompt that fits but leaves less room
than ``max_tokens`` asks 400 naming ``max_tokens`` and the room it leaves (as vLLM does),
and 429 when ``max_running``
requests are running and ``max_waiting`` more are queued (requests beyond the
running batch wait in that queue; set ``max_waiting=0`` to refuse at once).
A client that disconnects, streamed or not, has its request cancelled at once and
its slot freed at the end of the decode step in flight. Closing the server (or
SIGINT or SIGTERM to ``python -m inferlab.server``) ends every open stream with
``finish_reason: "abort"`` and ``data: [DONE]``.

Robustness, so that no request can hold up the others (each bound is a
:class:`ServerConfig` field):

- a body over ``max_body_bytes`` gets 413, a ``Content-Type`` other than JSON
  415, JSON nested deeper than :data:`MAX_JSON_DEPTH` or numbers JSON cannot
  hold (token ids beyond the vocabulary, a 5,000-digit integer) 400;
- a prompt whose UTF-8 length alone proves it longer than the context (at
  most one token per byte count of the tokenizer's longest token) is refused
  before it is tokenized, and tokenizing runs in a worker thread, off the
  event loop;
- sampling parameters are range-checked (:data:`SAMPLING_RANGES`), 400 naming
  the parameter and the range; 429 and 503 carry ``Retry-After``;
- a connection gets ``request_timeout_s`` to send a request's headers and
  body, then 408 and is closed (a slowloris client cannot hold a descriptor
  for longer), and at most ``max_connections`` are open at once (503 beyond);
- if the engine thread fails, every request it held ends with an error
  (500, or an error event and ``[DONE]`` in a stream), ``GET /health``
  answers 503, and new requests get 503.

The worker thread runs BLAS on one thread (``threadpoolctl``): on a machine
with few cores, BLAS threads that spin between the small multiplies of a
decode step take the cores that the event loop and the clients need
(measured on a busy 2-core machine: 32 concurrent streams of the default size
took 30 s with two BLAS threads and 4.6 s with one). OpenBLAS's thread count
is process-wide, so the pin holds, for the whole process, while a server's
worker runs.

Use it as a context manager (``with LabServer() as server: server.base_url``;
a free port on 127.0.0.1, shut down on exit) or from the command line,
``python -m inferlab.server --port 8000`` (``--model``, ``--eos-token-id`` and
``--tokenizer-dir`` as in :func:`main`). Used in the endpoint lab.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import itertools
import json
import logging
import math
import signal
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

import h11
import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from threadpoolctl import threadpool_limits
from uvicorn.protocols.http.h11_impl import H11Protocol

from inferlab import checks
from inferlab.engine import (
    DEFAULT_SIZE,
    Engine,
    EngineConfig,
    KVCache,
    greedy,
)
from inferlab.tokenizers import get_tokenizer

#: The host the server binds to unless told otherwise (this machine only).
DEFAULT_HOST = "127.0.0.1"

#: The deepest nesting of JSON arrays and objects a request body may have (a real
#: request nests four levels: body, messages, a message, its content parts).
MAX_JSON_DEPTH = 32

#: Sampling parameters the server accepts (it decodes greedily, so they change
#: nothing) with their allowed ranges as OpenAI documents them: ``(low, high,
#: low_open)``; a value outside, or not a finite number, is refused with 400.
SAMPLING_RANGES: dict[str, tuple[float, float, bool]] = {
    "temperature": (0.0, 2.0, False),
    "top_p": (0.0, 1.0, True),
    "presence_penalty": (-2.0, 2.0, False),
    "frequency_penalty": (-2.0, 2.0, False),
}

#: Seconds a client is told to wait (``Retry-After``) after a 429 or a 503.
RETRY_AFTER_S = 1

_log = logging.getLogger("inferlab.server")

#: Parameters the server cannot honour, each with the values that ask for nothing
#: (and so are accepted); any other value is refused with 400 naming the parameter.
UNSUPPORTED: dict[str, tuple] = {
    "logprobs": (False, None),
    "top_logprobs": (0, None),
    "echo": (False, None),
    "n": (1, None),
    "best_of": (1, None),
    "suffix": ("", None),
    "logit_bias": ({}, None),
    "tools": ([], None),
    "tool_choice": ("none", "auto", None),
    "functions": ([], None),
    "function_call": ("none", "auto", None),
    "response_format": ({"type": "text"}, None),
    "stop": ([], "", None),
    "prompt_logprobs": (0, None),
    "guided_json": (None,),
    "guided_regex": (None,),
    "guided_choice": (None,),
    "guided_grammar": (None,),
}


@dataclass(frozen=True)
class ServerConfig:
    """What the server runs and how many requests it holds.

    ``size`` names an engine size (:data:`inferlab.engine.SIZES`), ``seed`` its
    weights, ``tokenizer`` the book tokenizer that turns prompts into ids and
    ids into text. ``max_running`` bounds the running batch, ``max_waiting``
    the queue behind it (429 beyond both). ``context_tokens`` bounds prompt
    plus ``max_tokens``. ``stream_interval`` is the number of tokens per
    streamed chunk (1: one chunk per token; more imitates servers that batch
    their stream). ``model`` is the name clients must send (``inferlab-<size>``
    by default). ``max_body_bytes`` bounds a request body (413 beyond),
    ``request_timeout_s`` the time a connection may take to send a request's
    headers and body (408 and closed after it), ``max_connections`` the open
    connections (503 beyond). Raises ``ValueError`` naming the argument for bad
    values.
    """

    size: str = DEFAULT_SIZE
    seed: int = 0
    tokenizer: str = "cl100k_base"
    max_running: int = 32
    max_waiting: int = 64
    context_tokens: int = 2048
    default_max_tokens: int = 16
    stream_interval: int = 1
    eos_token_id: int | None = None
    model: str | None = None
    max_body_bytes: int = 1 << 20
    request_timeout_s: float = 10.0
    max_connections: int = 512

    def __post_init__(self) -> None:
        for argument, minimum in (("max_running", 1), ("max_waiting", 0), ("context_tokens", 2),
                                  ("default_max_tokens", 1), ("stream_interval", 1),
                                  ("max_body_bytes", 64), ("max_connections", 1)):
            value = getattr(self, argument)
            if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
                raise ValueError(f"{argument}: got {value!r}; must be a whole number >= {minimum}")
        timeout = self.request_timeout_s
        if (not isinstance(timeout, int | float) or isinstance(timeout, bool)
                or not math.isfinite(timeout) or timeout <= 0):
            raise ValueError(f"request_timeout_s: got {timeout!r}; must be a number of "
                             "seconds > 0")
        eos = self.eos_token_id
        if eos is not None and (not isinstance(eos, int) or isinstance(eos, bool) or eos < 0):
            raise ValueError(f"eos_token_id: got {eos!r}; must be None or a token id >= 0")
        if self.model is not None and (not isinstance(self.model, str) or not self.model):
            raise ValueError(f"model: got {self.model!r}; must be None or a non-empty name")
        EngineConfig.named(self.size)

    @property
    def model_name(self) -> str:
        """The model id the server answers to."""
        return self.model or f"inferlab-{self.size}"


@dataclass(frozen=True)
class ServerStats:
    """A snapshot of the scheduler's counters (the server's ``/inferlab/stats``).

    ``running`` sequences are in the batch, ``waiting`` are queued for a slot;
    ``completed``, ``cancelled`` (client went away), ``aborted`` (server shut
    down), ``failed`` (the engine raised) and ``rejected`` (429) count requests
    since start; ``steps`` counts batched decode steps and ``tokens`` generated
    tokens.
    """

    running: int
    waiting: int
    completed: int
    cancelled: int
    aborted: int
    failed: int
    rejected: int
    steps: int
    tokens: int


class APIError(Exception):
    """An error the server answers with OpenAI's error body and an HTTP status."""

    def __init__(self, status: int, message: str, param: str | None = None,
                 error_type: str = "invalid_request_error", code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.param = status, message, param
        self.error_type, self.code = error_type, code

    def body(self) -> dict:
        """OpenAI's error body."""
        return {"error": {"message": self.message, "type": self.error_type,
                          "param": self.param, "code": self.code}}

    def response(self) -> JSONResponse:
        """The JSON response for this error (with ``Retry-After`` on 429 and 503)."""
        headers = {"retry-after": str(RETRY_AFTER_S)} if self.status in (429, 503) else None
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


class _Sequence:
    """One request inside the scheduler (worker-thread state plus its event-loop queue)."""

    __slots__ = ("prompt", "max_tokens", "ignore_eos", "loop", "queue", "cancelled",
                 "cache", "generated")

    def __init__(self, prompt: np.ndarray, max_tokens: int, ignore_eos: bool,
                 loop: asyncio.AbstractEventLoop) -> None:
        self.prompt, self.max_tokens, self.ignore_eos = prompt, max_tokens, ignore_eos
        self.loop = loop
        self.queue: asyncio.Queue = asyncio.Queue()
        self.cancelled = False
        self.cache: KVCache | None = None
        self.generated: list[int] = []

    def push(self, item: tuple) -> None:
        # RuntimeError: the event loop has closed, so nobody is listening.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(self.queue.put_nowait, item)


class EngineLoop:
    """The worker thread that owns the engine and runs continuous batching (the serving
    simulator's :class:`inferlab.scheduler.Scheduler` is an engine's settings, not a loop).

    ``admit`` queues a sequence (from the event loop), ``cancel`` marks one
    for removal, ``stop`` ends every sequence with ``"abort"`` and joins the
    thread. ``stats`` and ``wait_for`` read the counters under one condition
    variable, so a test can wait for a state instead of sleeping. If the
    engine raises, every sequence held ends with ``("error", message)``,
    ``failure`` says why, and ``admit`` refuses from then on.
    """

    def __init__(self, engine: Engine, config: ServerConfig) -> None:
        self.engine, self.config = engine, config
        self._condition = threading.Condition()
        self._waiting: deque[_Sequence] = deque()
        self._running: list[_Sequence] = []
        self._counts = dict.fromkeys(("completed", "cancelled", "aborted", "failed",
                                      "rejected", "steps", "tokens"), 0)
        self._stopping = False
        self._failure: str | None = None
        self._thread = threading.Thread(target=self._loop, name="inferlab-engine", daemon=True)

    def start(self) -> None:
        self._thread.start()

    @property
    def failure(self) -> str | None:
        """Why the engine thread failed (``None`` while it works)."""
        with self._condition:
            return self._failure

    @property
    def stopping(self) -> bool:
        """True once ``stop`` was called or the engine failed."""
        with self._condition:
            return self._stopping or self._failure is not None

    def admit(self, sequence: _Sequence) -> None:
        """Queue ``sequence``; raise :class:`APIError` 429 if the queue is full, 503 if stopping
        or failed."""
        with self._condition:
            if self._failure is not None:
                raise APIError(503, f"the engine failed ({self._failure}); this server "
                               "accepts no more requests", error_type="server_error",
                               code="engine_failed")
            if self._stopping:
                raise APIError(503, "the server is shutting down", error_type="server_error")
            held = len(self._running) + len(self._waiting)
            if held >= self.config.max_running + self.config.max_waiting:
                self._counts["rejected"] += 1
                raise APIError(
                    429, f"too many requests: {held} held (max_running="
                    f"{self.config.max_running} + max_waiting={self.config.max_waiting})",
                    error_type="rate_limit_error", code="rate_limit_exceeded")
            self._waiting.append(sequence)
            self._condition.notify_all()

    def cancel(self, sequence: _Sequence) -> None:
        """Mark ``sequence`` cancelled; the worker drops it before its next step."""
        with self._condition:
            sequence.cancelled = True
            self._condition.notify_all()

    def stats(self) -> ServerStats:
        with self._condition:
            return self._snapshot()

    def _snapshot(self) -> ServerStats:
        return ServerStats(running=len(self._running), waiting=len(self._waiting), **self._counts)

    def wait_for(self, predicate: Callable[[ServerStats], bool], timeout_s: float) -> bool:
        """Block until ``predicate(stats)`` holds or ``timeout_s`` passes; say whether it held."""
        with self._condition:
            return self._condition.wait_for(lambda: predicate(self._snapshot()), timeout_s)

    def stop(self, timeout_s: float = 10.0) -> None:
        """End every sequence with ``"abort"`` and join the thread (within ``timeout_s``)."""
        with self._condition:
            self._stopping = True
            self._condition.notify_all()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout_s)

    def _fail(self, error: BaseException) -> None:
        """End every sequence held with an error; refuse new ones from now on."""
        _log.error("the engine thread failed; ending %d requests",
                   len(self._running) + len(self._waiting), exc_info=error)
        with self._condition:
            self._failure = f"{type(error).__name__}: {error}"
            for sequence in [*self._running, *self._waiting]:
                sequence.cache = None
                self._counts["failed"] += 1
                sequence.push(("error", self._failure))
            self._running.clear()
            self._waiting.clear()
            self._condition.notify_all()

    def _finish(self, sequence: _Sequence, reason: str, counter: str) -> None:
        sequence.cache = None
        self._counts[counter] += 1
        sequence.push(("end", reason))

    def _emit(self, sequence: _Sequence, token: int) -> bool:
        """Hand ``token`` to the request; return True if the request is finished."""
        sequence.generated.append(token)
        self._counts["tokens"] += 1
        sequence.push(("token", token))
        eos = self.config.eos_token_id
        if eos is not None and token == eos and not sequence.ignore_eos:
            self._finish(sequence, "stop", "completed")
            return True
        if len(sequence.generated) >= sequence.max_tokens:
            self._finish(sequence, "length", "completed")
            return True
        return False

    def _loop(self) -> None:
        # One BLAS thread: see the module docstring.
        with threadpool_limits(limits=1, user_api="blas"):
            try:
                self._steps()
            except Exception as error:  # any failure of the engine ends its requests
                self._fail(error)

    def _steps(self) -> None:
        engine = self.engine
        while True:
            with self._condition:
                self._condition.wait_for(
                    lambda: self._stopping or self._waiting or self._running, timeout=1.0)
                if self._stopping:
                    for sequence in [*self._running, *self._waiting]:
                        self._finish(sequence, "abort", "aborted")
                    self._running.clear()
                    self._waiting.clear()
                    self._condition.notify_all()
                    return
                for sequence in [s for s in self._running if s.cancelled]:
                    self._running.remove(sequence)
                    self._finish(sequence, "cancelled", "cancelled")
                for sequence in [s for s in self._waiting if s.cancelled]:
                    self._waiting.remove(sequence)
                    self._finish(sequence, "cancelled", "cancelled")
                admitted = []
                free = self.config.max_running - len(self._running)
                while self._waiting and len(admitted) < free:
                    admitted.append(self._waiting.popleft())
                self._running.extend(admitted)
                running = list(self._running)
                self._condition.notify_all()
            finished = []
            for sequence in admitted:  # prefill outside the lock
                logits, sequence.cache = engine.prefill(
                    sequence.prompt[None, :], capacity=len(sequence.prompt) + sequence.max_tokens)
                with self._condition:
                    if self._emit(sequence, int(greedy(logits)[0])):
                        finished.append(sequence)
            decoding = [s for s in running if s not in admitted and s not in finished]
            if decoding:
                tokens = np.array([s.generated[-1] for s in decoding])
                logits = engine.decode_ragged(tokens, [s.cache for s in decoding])
                new = greedy(logits)
                with self._condition:
                    self._counts["steps"] += 1
                    for sequence, token in zip(decoding, new, strict=True):
                        if self._emit(sequence, int(token)):
                            finished.append(sequence)
            if finished:
                with self._condition:
                    for sequence in finished:
                        if sequence in self._running:
                            self._running.remove(sequence)
                    self._condition.notify_all()


class _Detokenizer:
    """Incremental detokenization: text of new tokens, holding back a split UTF-8 character.

    Decodes a short window of recent ids (the approach of Hugging Face's
    text-generation-inference) so each token costs the same however long the
    output, and keeps back text that ends in U+FFFD until the next token
    completes the character.
    """

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.ids = tokenizer, []
        self.prefix_offset = self.read_offset = 0

    def add(self, token: int, final: bool = False) -> str:
        if token >= 0:
            self.ids.append(token)
        return self._text(final)

    def _text(self, final: bool) -> str:
        decode = self.tokenizer.decode
        before = decode(self.ids[self.prefix_offset:self.read_offset])
        after = decode(self.ids[self.prefix_offset:])
        if len(after) > len(before) and (final or not after.endswith("\ufffd")):
            self.prefix_offset, self.read_offset = self.read_offset, len(self.ids)
            return after[len(before):]
        return ""


def _same(a, b) -> bool:
    """Equal and of the same JSON kind (so ``true`` is not ``1`` and ``1`` is not ``1.0``)."""
    return type(a) is type(b) and a == b


def _shown(value, limit: int = 80) -> str:
    """``value`` as JSON for an error message, cut to ``limit`` characters."""
    text = json.dumps(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _refuse_unsupported(body: dict) -> None:
    """Raise 400 naming the first parameter of :data:`UNSUPPORTED` set to a value that asks."""
    for name, harmless in UNSUPPORTED.items():
        if name in body and not any(_same(body[name], value) for value in harmless):
            allowed = " or ".join(json.dumps(v) for v in harmless if v is not None) or "null"
            raise APIError(400, f"{name}: got {_shown(body[name])}; this server cannot "
                           f"honour it (allowed: {allowed}, or leave it out)", name,
                           code="unsupported_parameter")


def _check_sampling(body: dict) -> None:
    """Raise 400 naming a sampling parameter outside :data:`SAMPLING_RANGES`, or a bad ``n``."""
    for name, (low, high, low_open) in SAMPLING_RANGES.items():
        if name not in body:
            continue
        value = body[name]
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not (number and math.isfinite(value) and (value > low if low_open else value >= low)
                and value <= high):
            interval = f"{'(' if low_open else '['}{low:g}, {high:g}]"
            raise APIError(400, f"{name}: got {_shown(value)}; must be a number in {interval}",
                           name)
    n = body.get("n", 1)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise APIError(400, f"n: got {_shown(n)}; must be an integer >= 1 (and this server "
                       "returns one choice, so 1)", "n")


def _json_depth(value) -> int:
    """How deeply arrays and objects nest in ``value`` (a scalar is 0), counted without
    recursion and stopping once past :data:`MAX_JSON_DEPTH`."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = item.values() if isinstance(item, dict) else item
        deepest = max(deepest, level)
        if deepest > MAX_JSON_DEPTH:
            break
        stack.extend((child, level + 1) for child in children
                     if isinstance(child, dict | list))
    return deepest if isinstance(value, dict | list) else 0


def _check_content_type(request: Request) -> None:
    """Raise 415 unless the body is declared as JSON (or not declared at all)."""
    declared = request.headers.get("content-type")
    if declared is None:
        return
    media = declared.split(";", 1)[0].strip().lower()
    if media == "application/json" or (media.startswith("application/")
                                       and media.endswith("+json")):
        return
    raise APIError(415, f"content-type: got {declared!r}; the body must be JSON "
                   "(application/json)", "content-type", code="unsupported_media_type")


@functools.cache
def _longest_token_bytes(tokenizer_name: str) -> int:
    """The UTF-8 length of the tokenizer's longest token (128 bytes for cl100k_base).

    No token covers more bytes, so a text of ``b`` bytes has at least
    ``ceil(b / longest)`` tokens: a bound that needs no tokenizing.
    """
    tokenizer = get_tokenizer(tokenizer_name)
    longest = 1
    for token in range(tokenizer.vocab_size):
        try:
            longest = max(longest, len(tokenizer._token_bytes(token)))
        except (KeyError, ValueError):  # an unassigned id
            continue
    return longest


def _chat_messages(messages) -> list[dict]:
    """Messages with each ``content`` as one string; 400 naming what is malformed.

    A ``content`` may be a string or a list of parts; text parts
    (``{"type": "text", "text": str}``) are joined with newlines, as vLLM joins
    them, and a part of another type (an image, audio) is refused by its type.
    """
    shape = "messages: required, a non-empty list of {role: str, content: str or text parts}"
    if not isinstance(messages, list) or not messages:
        raise APIError(400, shape, "messages")
    out = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise APIError(400, shape, "messages")
        content = message.get("content")
        if isinstance(content, list):
            texts = []
            for part in content:
                kind = part.get("type") if isinstance(part, dict) else None
                if kind != "text" or not isinstance(part.get("text"), str):
                    raise APIError(400, f"messages[{index}].content: part of type {kind!r} "
                                   "is not supported; this server reads text parts only "
                                   '({"type": "text", "text": str})',
                                   f"messages[{index}].content")
                texts.append(part["text"])
            content = "\n".join(texts)
        elif content is None and message["role"] == "assistant" and message.get("tool_calls"):
            content = ""  # an assistant's tool call carries no text, by OpenAI's schema
        elif content is None:
            raise APIError(400, f"messages[{index}].content: required (a string or a list of "
                           "text parts); only an assistant message with tool_calls may omit it",
                           f"messages[{index}].content")
        if not isinstance(content, str):
            raise APIError(400, shape, "messages")
        out.append({"role": message["role"], "content": content})
    return out


async def _http_error(request: Request, error: HTTPException) -> JSONResponse:
    """Starlette's 404 and 405 (no such path, wrong method) with OpenAI's error body."""
    if error.status_code == 405:
        message = f"method {request.method} is not allowed on {request.url.path}"
    elif error.status_code == 404:
        message = f"no route {request.method} {request.url.path} on this server"
    else:
        message = str(error.detail)
    return APIError(error.status_code, message, code=str(error.status_code)).response()


def _chat_prompt(messages) -> str:
    """The plain chat template this server uses: ``<|role|>`` lines, then the assistant's turn."""
    parts = [f"<|{m['role']}|>\n{m['content']}\n" for m in messages]
    return "".join(parts) + "<|assistant|>\n"


async def _listen_for_disconnect(receive, scheduler: EngineLoop, sequence: _Sequence) -> None:
    """Cancel ``sequence`` as soon as its client disconnects (and wake its reader)."""
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            scheduler.cancel(sequence)
            sequence.queue.put_nowait(("disconnect", None))
            return


def _engine_error(message: str) -> APIError:
    return APIError(500, f"the engine failed: {message}", error_type="server_error",
                    code="engine_failed")


class _WatchedResponse:
    """An ASGI response for one request that listens for ``http.disconnect`` meanwhile.

    A client that goes away cancels its request at once (its slot is free at the
    end of the decode step in flight) rather than when a write fails or, for a
    whole completion, only after ``max_tokens``. ``_respond`` does the work and
    sets ``job["done"]`` once the request has ended on its own.
    """

    def __init__(self, server: LabServer, job: dict) -> None:
        self.server, self.job = server, job

    async def __call__(self, scope, receive, send) -> None:
        sequence: _Sequence = self.job["sequence"]
        scheduler = self.server.scheduler
        listener = asyncio.ensure_future(_listen_for_disconnect(receive, scheduler, sequence))
        response = None
        try:
            response = await self._respond(send)
        except OSError:  # the client went away mid-write
            pass
        finally:
            listener.cancel()
            if not self.job.get("done"):
                scheduler.cancel(sequence)
        if response is not None:
            await response(scope, receive, send)

    async def _respond(self, send):
        raise NotImplementedError


class _WholeResponse(_WatchedResponse):
    """Waits for the whole completion and sends it as one JSON body (500 if the engine
    failed)."""

    async def _respond(self, send):
        sequence: _Sequence = self.job["sequence"]
        detok = _Detokenizer(self.server.tokenizer)
        text = []
        while True:
            kind, value = await sequence.queue.get()
            if kind == "disconnect":
                return None
            if kind == "token":
                text.append(detok.add(value))
                continue
            self.job["done"] = True
            if kind == "error":
                return _engine_error(value).response()
            text.append(detok.add(-1, final=True))
            return JSONResponse(self.server._whole_body(self.job, "".join(text), value))


class _SSEResponse(_WatchedResponse):
    """Streams server-sent events from the request's token queue."""

    async def _respond(self, send):
        await send({"type": "http.response.start", "status": 200, "headers": [
            (b"content-type", b"text/event-stream; charset=utf-8"),
            (b"cache-control", b"no-cache")]})
        async for event in self.server._events(self.job):
            await send({"type": "http.response.body", "body": event, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return None


class _DeadlineProtocol(H11Protocol):
    """uvicorn's h11 protocol with a deadline on receiving each request.

    A connection has ``request_timeout_s`` from its opening, or from the first
    byte of a request, to deliver that request's headers and whole body; after
    it the client gets 408 (if no response has begun) and the connection is
    closed, so a client that trickles bytes (slowloris) cannot hold a socket.
    Idle keep-alive connections are uvicorn's own keep-alive timeout's business.
    """

    def __init__(self, *args, request_timeout_s: float, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._request_timeout_s = request_timeout_s
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.SEND_BODY or (state is h11.IDLE and self.conn.trailing_data[0]):
            self._arm()
        else:
            self._disarm()

    def connection_lost(self, exc) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        if self._deadline is None:
            self._deadline = self.loop.call_later(self._request_timeout_s, self._expire)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expire(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):  # nothing sent yet
            body = json.dumps(APIError(
                408, f"the request was not received within {self._request_timeout_s:g} s "
                "(request_timeout_s)", code="request_timeout").body()).encode()
            self.transport.write(b"HTTP/1.1 408 Request Timeout\r\n"
                                 b"content-type: application/json\r\n"
                                 b"content-length: " + str(len(body)).encode() + b"\r\n"
                                 b"connection: close\r\n\r\n" + body)
        self.transport.close()


class _Uvicorn(uvicorn.Server):
    """uvicorn's server, which on shutdown (a signal, or ``close``) first has the scheduler
    end every open request with ``"abort"``, so streams close with ``[DONE]``."""

    def __init__(self, config: uvicorn.Config, scheduler: EngineLoop) -> None:
        super().__init__(config)
        self._scheduler = scheduler

    async def shutdown(self, sockets=None) -> None:
        await asyncio.to_thread(self._scheduler.stop)
        await super().shutdown(sockets=sockets)


class LabServer:
    """The lab engine behind an OpenAI-compatible HTTP API (see the module docstring).

    ``LabServer(config, host=..., port=0)`` builds the engine and the app;
    ``start()`` runs the scheduler and uvicorn in background threads on a free
    port (``port=0``) and returns when the server accepts connections;
    ``close()`` ends open streams and stops both. As a context manager it
    starts on entry and closes on exit. ``base_url`` is ``http://host:port/v1``.
    """

    def __init__(self, config: ServerConfig | None = None, *, host: str = DEFAULT_HOST,
                 port: int = 0, engine: Engine | None = None) -> None:
        self.config = config or ServerConfig()
        engine_config = EngineConfig.named(self.config.size)
        self.tokenizer = get_tokenizer(self.config.tokenizer)
        if engine_config.vocab_size > self.tokenizer.vocab_size:
            raise ValueError(
                f"tokenizer: {self.config.tokenizer!r} has {self.tokenizer.vocab_size} ids, fewer "
                f"than size {self.config.size!r}'s vocabulary of {engine_config.vocab_size}; "
                "pick a tokenizer with at least as many ids")
        self.engine = engine or Engine(engine_config, self.config.seed, show=None)
        self.scheduler = EngineLoop(self.engine, self.config)
        self.host, self._port = host, port
        self._ids = itertools.count()
        self._longest_token = _longest_token_bytes(self.config.tokenizer)
        # Tokenizing runs here, off the event loop (tiktoken releases the GIL).
        self._tokenize_pool = ThreadPoolExecutor(2, thread_name_prefix="inferlab-tokenize")
        self._uvicorn: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self.app = Starlette(routes=[
            Route("/health", self._health, methods=["GET"]),
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/v1/models/{model_id:path}", self._model, methods=["GET"]),
            Route("/v1/completions", self._completions, methods=["POST"]),
            Route("/v1/chat/completions", self._chat, methods=["POST"]),
            Route("/inferlab/stats", self._stats, methods=["GET"]),
        ], exception_handlers={HTTPException: _http_error})

    # -- lifecycle ---------------------------------------------------------------------------

    @property
    def port(self) -> int:
        """The port the server listens on (known once started)."""
        return self._port

    @property
    def base_url(self) -> str:
        """The OpenAI base URL, ``http://host:port/v1``."""
        return f"http://{self.host}:{self._port}/v1"

    def _uvicorn_config(self, **options) -> uvicorn.Config:
        protocol = functools.partial(_DeadlineProtocol,
                                     request_timeout_s=self.config.request_timeout_s)
        settings = {"log_level": "warning", "access_log": False, **options}
        # The bound on connections is this server's (_bounded), not uvicorn's
        # limit_concurrency, whose 503 is plain text where every other error here is JSON.
        return uvicorn.Config(self._bounded, lifespan="off", timeout_graceful_shutdown=5,
                              ws="none", http=protocol, interface="asgi3", **settings)

    async def _bounded(self, scope, receive, send) -> None:
        """The app behind the bound on open connections: a request that arrives while more
        than ``max_connections`` are open (its own included) gets an OpenAI-style 503 with
        ``Retry-After``, and its connection is closed."""
        server = self._uvicorn
        if (scope["type"] == "http" and server is not None
                and len(server.server_state.connections) > self.config.max_connections):
            error = APIError(503, f"more than {self.config.max_connections} connections are "
                             "open (max_connections); retry later", error_type="server_error",
                             code="too_many_connections")
            response = error.response()
            response.headers["connection"] = "close"
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def start(self, timeout_s: float = 30.0) -> LabServer:
        """Start the scheduler and the HTTP server in background threads."""
        if self._thread is not None:
            raise RuntimeError("the server is already started")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, self._port))
        sock.listen(256)
        self._socket, self._port = sock, sock.getsockname()[1]
        self.scheduler.start()
        self._uvicorn = _Uvicorn(self._uvicorn_config(), self.scheduler)
        started = threading.Event()
        original_startup = self._uvicorn.startup

        async def startup(sockets=None):
            await original_startup(sockets=sockets)
            started.set()

        self._uvicorn.startup = startup
        self._thread = threading.Thread(target=self._uvicorn.run, kwargs={"sockets": [sock]},
                                        name="inferlab-http", daemon=True)
        self._thread.start()
        if not started.wait(timeout_s):
            self.close()
            raise RuntimeError(f"the server did not start within {timeout_s} s")
        return self

    def close(self, timeout_s: float = 10.0) -> None:
        """End every open stream (``finish_reason: "abort"``), then stop the threads."""
        self.scheduler.stop(timeout_s)
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._socket is not None:
            self._socket.close()
        self._tokenize_pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> LabServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def stats(self) -> ServerStats:
        """The scheduler's counters now."""
        return self.scheduler.stats()

    def wait_for(self, predicate: Callable[[ServerStats], bool], timeout_s: float = 10.0) -> bool:
        """Wait until ``predicate(stats)`` holds; False if ``timeout_s`` passed first."""
        return self.scheduler.wait_for(predicate, timeout_s)

    def serve_forever(self) -> None:
        """Serve in this thread until interrupted (the command line's entry point)."""
        self.scheduler.start()
        config = self._uvicorn_config(host=self.host, port=self._port, log_level="info",
                                      access_log=True)
        try:
            _Uvicorn(config, self.scheduler).run()
        finally:
            self.scheduler.stop()
            self._tokenize_pool.shutdown(wait=True, cancel_futures=True)

    # -- handlers ----------------------------------------------------------------------------

    def _model_card(self) -> dict:
        name = self.config.model_name
        return {"id": name, "object": "model", "created": 0, "owned_by": "inferlab",
                "root": name, "parent": None, "max_model_len": self.config.context_tokens}

    async def _health(self, request: Request) -> JSONResponse:
        failure = self.scheduler.failure
        if failure is not None:
            return APIError(503, f"the engine failed ({failure})", error_type="server_error",
                            code="engine_failed").response()
        if self.scheduler.stopping:
            return APIError(503, "the server is shutting down",
                            error_type="server_error").response()
        return JSONResponse({})

    async def _models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [self._model_card()]})

    async def _model(self, request: Request) -> JSONResponse:
        model_id = request.path_params["model_id"]
        if model_id != self.config.model_name:
            return APIError(404, f"The model `{model_id}` does not exist; this server serves "
                            f"`{self.config.model_name}`", "model",
                            code="model_not_found").response()
        return JSONResponse(self._model_card())

    async def _stats(self, request: Request) -> JSONResponse:
        return JSONResponse(asdict(self.stats()))

    async def _completions(self, request: Request):
        return await self._handle(request, chat=False)

    async def _chat(self, request: Request):
        return await self._handle(request, chat=True)

    async def _handle(self, request: Request, chat: bool):
        try:
            _check_content_type(request)
            job = self._parse(await self._read_body(request), chat)
            if "text" in job:
                ids = await asyncio.get_running_loop().run_in_executor(
                    self._tokenize_pool, self.tokenizer.encode, job.pop("text"))
                self._check_length(len(ids), job, chat)
                job["prompt_ids"] = ids
            job["prompt_ids"] = (np.asarray(job["prompt_ids"] or [0], dtype=np.int64)
                                 % self.engine.config.vocab_size)
            job["sequence"] = _Sequence(job["prompt_ids"], job["max_tokens"], job["ignore_eos"],
                                        asyncio.get_running_loop())
            self.scheduler.admit(job["sequence"])
        except APIError as error:
            response = error.response()
            if error.status == 413:  # the rest of the body is not worth reading
                response.headers["connection"] = "close"
            return response
        except ClientDisconnect:  # gone before its body arrived: nobody reads an answer
            return JSONResponse({}, status_code=400)
        if job["stream"]:
            return _SSEResponse(self, job)
        return _WholeResponse(self, job)

    async def _read_body(self, request: Request) -> bytes:
        """The body, refused with 413 as soon as it is known to exceed ``max_body_bytes``."""
        limit = self.config.max_body_bytes

        def too_large(size: str) -> APIError:
            return APIError(413, f"the body is {size} bytes; at most {limit} are allowed "
                            "(max_body_bytes)", code="body_too_large")

        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise too_large(declared)
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise too_large(f"over {limit}")
            chunks.append(chunk)
        return b"".join(chunks)

    def _check_length(self, prompt_tokens: int, job: dict, chat: bool,
                      at_least: bool = False) -> None:
        """Raise 400 if the prompt plus ``max_tokens`` is longer than the context."""
        context, max_tokens = self.config.context_tokens, job["max_tokens"]
        if prompt_tokens + max_tokens > context:
            bound = "at least " if at_least else ""
            message = (f"This model's maximum context length is {context} tokens. However, "
                       f"you requested {bound}{prompt_tokens + max_tokens} tokens ({bound}"
                       f"{prompt_tokens} in the prompt, {max_tokens} for the completion).")
            if prompt_tokens < context:
                # The prompt fits: what must shrink is the completion it asked for, so the
                # error names max_tokens and the most this prompt leaves, as vLLM's does.
                room = context - prompt_tokens
                raise APIError(400, f"max_tokens: got {max_tokens}; this prompt leaves "
                               f"{'at most ' if at_least else ''}{room} of the context of "
                               f"{context} tokens. {message}", "max_tokens",
                               code="context_length_exceeded")
            raise APIError(400, message, "messages" if chat else "prompt",
                           code="context_length_exceeded")

    def _text_prompt(self, text: str, job: dict, chat: bool) -> str:
        """``text`` checked to be valid Unicode and not provably longer than the context."""
        param = "messages" if chat else "prompt"
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError as error:
            raise APIError(400, f"{param}: not valid Unicode ({error.reason} at character "
                           f"{error.start})", param) from error
        # No token is longer than the longest token, so this many tokens at least.
        self._check_length(-(-size // self._longest_token), job, chat, at_least=True)
        return text

    def _parse(self, raw: bytes, chat: bool) -> dict:
        try:
            body = json.loads(raw)
        except RecursionError as error:
            raise APIError(400, f"the body nests arrays or objects too deeply (at most "
                           f"{MAX_JSON_DEPTH} levels)") from error
        except ValueError as error:  # bad JSON, bad UTF-8, or an integer of 4,300+ digits
            raise APIError(400, f"the body is not valid JSON: {error}") from error
        if not isinstance(body, dict):
            raise APIError(400, "the body must be a JSON object")
        if _json_depth(body) > MAX_JSON_DEPTH:
            raise APIError(400, f"the body nests arrays or objects too deeply (at most "
                           f"{MAX_JSON_DEPTH} levels)")
        model = body.get("model")
        if not isinstance(model, str):
            raise APIError(400, "model: required, a string", "model")
        if model != self.config.model_name:
            raise APIError(404, f"The model `{model}` does not exist; this server serves "
                           f"`{self.config.model_name}`", "model", code="model_not_found")
        body = {key: value for key, value in body.items() if value is not None}
        _check_sampling(body)
        _refuse_unsupported(body)
        key = "max_completion_tokens" if chat and "max_completion_tokens" in body else "max_tokens"
        max_tokens = body.get(key, self.config.default_max_tokens)
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise APIError(400, f"{key}: got {_shown(max_tokens)}; must be an integer >= 1", key)
        job = {"max_tokens": max_tokens}
        if chat:
            job["text"] = self._text_prompt(_chat_prompt(_chat_messages(body.get("messages"))),
                                            job, chat)
        else:
            prompt = body.get("prompt")
            if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
                prompt = prompt[0]
            if isinstance(prompt, str):
                job["text"] = self._text_prompt(prompt, job, chat)
            elif isinstance(prompt, list) and prompt:
                self._check_length(len(prompt), job, chat)  # before looking at every id
                vocab = self.tokenizer.vocab_size
                for token in prompt:
                    if not (isinstance(token, int) and not isinstance(token, bool)
                            and 0 <= token < vocab):
                        raise APIError(400, f"prompt: got the token id {_shown(token, 40)}; "
                                       f"ids of {self.tokenizer.name} are integers from 0 to "
                                       f"{vocab - 1}", "prompt")
                job["prompt_ids"] = prompt
            else:
                raise APIError(400, "prompt: required, a string or a non-empty list of "
                               "token ids", "prompt")
        stream = body.get("stream", False)
        ignore_eos = body.get("ignore_eos", False)
        options = body.get("stream_options") or {}
        for name, value in (("stream", stream), ("ignore_eos", ignore_eos)):
            if not isinstance(value, bool):
                raise APIError(400, f"{name}: got {value!r}; must be true or false", name)
        if not isinstance(options, dict) or not isinstance(options.get("include_usage", False),
                                                           bool):
            raise APIError(400, "stream_options: must be an object with a boolean "
                           "include_usage", "stream_options")
        return {**job, "chat": chat, "stream": stream, "ignore_eos": ignore_eos,
                "include_usage": options.get("include_usage", False),
                "id": f"{'chatcmpl' if chat else 'cmpl'}-{next(self._ids)}",
                "created": int(time.time())}

    def _usage(self, job: dict) -> dict:
        prompt = len(job["prompt_ids"])
        completion = len(job["sequence"].generated)
        return {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": prompt + completion}

    def _whole_body(self, job: dict, text: str, finish: str) -> dict:
        head = {"id": job["id"], "created": job["created"], "model": self.config.model_name}
        if job["chat"]:
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "finish_reason": finish}
            return {**head, "object": "chat.completion", "choices": [choice],
                    "usage": self._usage(job)}
        choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish}
        return {**head, "object": "text_completion", "choices": [choice],
                "usage": self._usage(job)}

    def _chunk(self, job: dict, text: str | None, finish: str | None, role: bool = False) -> bytes:
        head = {"id": job["id"], "created": job["created"], "model": self.config.model_name}
        if job["chat"]:
            delta = {"role": "assistant", "content": ""} if role else (
                {"content": text} if text else {})
            body = {**head, "object": "chat.completion.chunk",
                    "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        else:
            body = {**head, "object": "text_completion",
                    "choices": [{"index": 0, "text": text or "", "logprobs": None,
                                 "finish_reason": finish}]}
        if job["include_usage"]:
            body["usage"] = None
        return b"data: " + json.dumps(body).encode() + b"\n\n"

    async def _events(self, job: dict):
        """The server-sent events of one streamed request, ending in ``data: [DONE]``."""
        sequence: _Sequence = job["sequence"]
        detok = _Detokenizer(self.tokenizer)
        interval = self.config.stream_interval
        pending, held = "", 0
        while True:
            kind, value = await sequence.queue.get()
            if kind == "disconnect":
                return
            if kind == "error":
                # As vLLM does: an error event in the stream, then the end of the stream.
                job["done"] = True
                yield b"data: " + json.dumps(_engine_error(value).body()).encode() + b"\n\n"
                yield b"data: [DONE]\n\n"
                return
            if job["chat"] and not job.get("role_sent"):
                # As vLLM does, the role chunk goes out with the first token, not before it.
                job["role_sent"] = True
                yield self._chunk(job, None, None, role=True)
            if kind == "token":
                pending += detok.add(value)
                held += 1
                if held >= interval and pending:
                    yield self._chunk(job, pending, None)
                    pending, held = "", 0
                continue
            job["done"] = True
            pending += detok.add(-1, final=True)
            yield self._chunk(job, pending, value)
            if job["include_usage"]:
                head = {"id": job["id"], "created": job["created"],
                        "model": self.config.model_name,
                        "object": "chat.completion.chunk" if job["chat"] else "text_completion"}
                usage = {**head, "choices": [], "usage": self._usage(job)}
                yield b"data: " + json.dumps(usage).encode() + b"\n\n"
            yield b"data: [DONE]\n\n"
            return


def _byte_alphabet() -> list[str]:
    """GPT-2's byte-to-character table: the character that stands for each byte 0-255.

    Printable Latin-1 bytes stand for themselves; the rest (controls, space,
    ...) take the characters from U+0100 upwards, in byte order. Hugging Face's
    byte-level BPE writes its vocabulary in these characters.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, spare = {}, 0
    for byte in range(256):
        if byte in printable:
            table[byte] = chr(byte)
        else:
            table[byte] = chr(256 + spare)
            spare += 1
    return [table[byte] for byte in range(256)]


def _oniguruma(pattern: str) -> str:
    """tiktoken's regex in the dialect of Hugging Face's regex engine (Oniguruma).

    tiktoken writes ``\\p{N}{1,3}+``, a possessive "one to three digits"; in
    Oniguruma ``{1,3}+`` means "one or more runs of one to three", which
    would keep a long number in one piece. Nothing follows it in its
    alternative, so the plain ``{1,3}`` matches the same.
    """
    return pattern.replace(r"\p{N}{1,3}+", r"\p{N}{1,3}")


def hf_tokenizer_json(tokenizer: str = "cl100k_base") -> dict:
    """One of the book's tiktoken encodings as a Hugging Face ``tokenizer.json`` (a dict).

    tiktoken's byte-level BPE merges, at every step, the adjacent pair whose
    concatenation has the lowest rank. Hugging Face's BPE merges the pair with
    the lowest merge rank. Listing, for every token, each split into two
    tokens ``(a, b)`` with the token's own rank as the merge's rank makes the
    two choose the same pair, so they cut text identically (the tests check
    this against tiktoken). The pre-tokenizer is the encoding's own regex. No
    special tokens are added: the book encodes every text as plain text (see
    :mod:`inferlab.tokenizers`), so ``"<|endoftext|>"`` in a prompt is counted
    as its characters by both. Built in a few seconds from the
    bundled vocabulary, so nothing is downloaded. Raises ``ValueError`` for a
    tokenizer that is not a tiktoken encoding.
    """
    from inferlab.tokenizers import TIKTOKEN_ENCODINGS

    if tokenizer not in TIKTOKEN_ENCODINGS:
        raise ValueError(f"tokenizer: got {tokenizer!r}; must be one of "
                         f"{sorted(TIKTOKEN_ENCODINGS)} (a tiktoken encoding)")
    import tiktoken

    encoding = tiktoken.get_encoding(tokenizer)
    ranks: dict[bytes, int] = encoding._mergeable_ranks
    alphabet = _byte_alphabet()

    def spell(token: bytes) -> str:
        return "".join(alphabet[b] for b in token)

    vocab = {spell(token): rank for token, rank in ranks.items()}
    merges = []
    for token, rank in ranks.items():
        for cut in range(1, len(token)):
            left, right = token[:cut], token[cut:]
            if left in ranks and right in ranks:
                merges.append((rank, ranks[left], spell(left), spell(right)))
    merges.sort()
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                  "use_regex": False}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": _oniguruma(encoding._pat_str)},
             "behavior": "Isolated", "invert": False},
            byte_level]},
        "post_processor": None,
        "decoder": byte_level,
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [[left, right] for *_, left, right in merges]},
    }


@functools.cache
def _tokenizer_json_text(tokenizer: str) -> str:
    # Rebuilding the merges of a 100k-token vocabulary takes seconds; a lab writes the
    # folder for each server it starts.
    return json.dumps(hf_tokenizer_json(tokenizer))


def write_tokenizer_dir(path, tokenizer: str = "cl100k_base",
                        context_tokens: int = 2048) -> Path:
    """Write ``tokenizer.json`` and ``tokenizer_config.json`` for the server's tokenizer.

    The folder is what ``AutoTokenizer.from_pretrained(path)`` reads offline,
    so AIPerf (``--tokenizer path``) and guidellm (``--processor path``) count
    tokens exactly as this server does. No BOS token is added (tiktoken
    encodings have none). Returns the folder's path. Used in the endpoint lab.
    """
    context_tokens = checks.whole("context_tokens", context_tokens)
    text = _tokenizer_json_text(checks.text("tokenizer", tokenizer))
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.json").write_text(text, encoding="utf-8")
    config = {"tokenizer_class": "PreTrainedTokenizerFast", "model_max_length": context_tokens,
              "bos_token": None, "eos_token": None, "add_bos_token": False,
              "add_eos_token": False, "clean_up_tokenization_spaces": False}
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=1),
                                                  encoding="utf-8")
    return folder


def main(argv: list[str] | None = None) -> None:
    """``python -m inferlab.server``: serve the lab engine until interrupted.

    ``--model`` sets the name clients must send, ``--eos-token-id`` an id that
    ends a request (unless it sets ``ignore_eos``), and ``--tokenizer-dir DIR``
    first writes the tokenizer folder of :func:`write_tokenizer_dir` there.
    """
    parser = argparse.ArgumentParser(description="Serve the inferlab engine over the OpenAI API.")
    parser.add_argument("--host", default=DEFAULT_HOST, help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--size", default=DEFAULT_SIZE, help="engine size (tiny, small, ...)")
    parser.add_argument("--tokenizer", default="cl100k_base")
    parser.add_argument("--max-running", type=int, default=32)
    parser.add_argument("--max-waiting", type=int, default=64)
    parser.add_argument("--context-tokens", type=int, default=2048)
    parser.add_argument("--stream-interval", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--model", default=None, help="model name (default inferlab-<size>)")
    parser.add_argument("--eos-token-id", type=int, default=None,
                        help="a token id that ends a request (default: none)")
    parser.add_argument("--tokenizer-dir", default=None,
                        help="write the tokenizer as a Hugging Face folder here first")
    args = parser.parse_args(argv)
    config = ServerConfig(size=args.size, seed=args.seed, tokenizer=args.tokenizer,
                          max_running=args.max_running, max_waiting=args.max_waiting,
                          context_tokens=args.context_tokens,
                          stream_interval=args.stream_interval,
                          eos_token_id=args.eos_token_id, model=args.model)
    if args.tokenizer_dir:
        folder = write_tokenizer_dir(args.tokenizer_dir, args.tokenizer, args.context_tokens)
        print(f"tokenizer written to {folder}", flush=True)
    server = LabServer(config, host=args.host, port=args.port)
    print(f"serving {config.model_name} at http://{args.host}:{args.port}/v1", flush=True)
    # uvicorn handles SIGINT and SIGTERM while it serves (open streams end with "abort"
    # and [DONE]), then raises the signal again: end quietly rather than with a traceback.
    previous = signal.signal(signal.SIGTERM, _exit_quietly)
    try:
        server.serve_forever()
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
    print("stopped", flush=True)


def _exit_quietly(signum, frame) -> None:
    raise SystemExit(0)


if __name__ == "__main__":
    main()
