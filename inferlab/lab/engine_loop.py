"""The lab server's engine thread: continuous batching over the book's NumPy engine.

:class:`ServerConfig` says what the server runs and how many requests it holds;
:class:`EngineLoop` is the worker thread that owns the engine, admits requests from
the event loop, runs batched decode steps and streams each request's tokens back.
Used by :mod:`inferlab.lab.server`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from threadpoolctl import threadpool_limits

from inferlab.lab.engine import Engine, KVCache, greedy
from inferlab.lab.engine_sizes import DEFAULT_SIZE, EngineConfig
from inferlab.lab.openai_api import APIError

# The server's logger: an engine failure is the server's to report.
_log = logging.getLogger("inferlab.lab.server")


@dataclass(frozen=True)
class ServerConfig:
    """What the server runs and how many requests it holds.

    ``size`` names an engine size (:data:`inferlab.lab.engine_sizes.SIZES`), ``seed`` its
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


class ServedSequence:
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
    simulator's :class:`inferlab.serving.scheduler.Scheduler` is an engine's settings, not a loop).

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
        self._waiting: deque[ServedSequence] = deque()
        self._running: list[ServedSequence] = []
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

    def admit(self, sequence: ServedSequence) -> None:
        """Queue ``sequence``; raise :class:`~inferlab.lab.openai_api.APIError` 429 if the queue
        is full, 503 if stopping or failed."""
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

    def cancel(self, sequence: ServedSequence) -> None:
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

    def _finish(self, sequence: ServedSequence, reason: str, counter: str) -> None:
        sequence.cache = None
        self._counts[counter] += 1
        sequence.push(("end", reason))

    def _emit(self, sequence: ServedSequence, token: int) -> bool:
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


class Detokenizer:
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


