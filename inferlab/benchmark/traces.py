"""What a load run records, request by request: the records every benchmark tool's
metrics are computed from.

A :class:`LoadSpec` says what load to offer; a :class:`RequestTrace` is one request as
the client saw it (send time, each streamed chunk's arrival and text, the server's
usage); a :class:`Trace` is one run. The lab's client (:mod:`inferlab.lab.loadclient`) writes
them, the readers of :mod:`inferlab.lab.tool_files` rebuild them from AIPerf's,
guidellm's, vLLM's and LLMPerf's files, and :meth:`inferlab.benchmark.workload.Workload.from_trace`
takes a workload from one. They are plain records, kept apart from the client so that
reading a trace needs no HTTP library.

Used in the endpoint lab.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class LoadSpec:
    """How much load to offer and in what shape (see the module docstring).

    Give ``concurrency`` for a closed loop or ``rate_per_s`` for an open loop
    (not both). ``requests`` and ``duration_s`` bound the run (whichever ends
    first: no request is sent after ``duration_s``); ``timeout_s`` bounds each
    network wait of a request (connecting, and every wait for the next bytes, the
    first token included: a request queued at the server waits that long).
    ``prompt_tokens`` and ``output_tokens`` are the means of the lengths,
    ``*_sd`` their standard deviations (0 for fixed lengths). ``chat``
    picks ``/chat/completions`` over ``/completions``. ``prompt_tokenizer``
    sizes the prompts. Raises ``ValueError`` naming the argument.
    """

    requests: int = 16
    concurrency: int | None = 1
    rate_per_s: float | None = None
    max_in_flight: int | None = None
    prompt_tokens: int = 64
    prompt_tokens_sd: float = 0.0
    output_tokens: int = 32
    output_tokens_sd: float = 0.0
    ignore_eos: bool = True
    chat: bool = False
    duration_s: float = 120.0
    timeout_s: float = 60.0
    seed: int = 0
    prompt_tokenizer: str = "cl100k_base"
    extra_body: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        if (self.concurrency is None) == (self.rate_per_s is None):
            raise ValueError(
                f"concurrency, rate_per_s: got {self.concurrency!r} and {self.rate_per_s!r}; "
                "give exactly one (closed loop or open loop)")
        for name in ("requests", "prompt_tokens", "output_tokens"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name}: got {value!r}; must be a whole number >= 1")
        for name in ("concurrency", "max_in_flight"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name}: got {value!r}; must be a whole number >= 1 or None")
        if self.rate_per_s is not None and not (math.isfinite(self.rate_per_s)
                                                and self.rate_per_s > 0):
            raise ValueError(f"rate_per_s: got {self.rate_per_s!r}; must be > 0")
        for name in ("prompt_tokens_sd", "output_tokens_sd"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"{name}: got {getattr(self, name)!r}; must be >= 0")
        for name in ("duration_s", "timeout_s"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name}: got {getattr(self, name)!r}; must be > 0")

    @property
    def mode(self) -> str:
        """``"closed"`` or ``"open"``."""
        return "closed" if self.concurrency is not None else "open"


@dataclass(frozen=True)
class RequestTrace:
    """Everything one request showed the client; times in seconds from the run's start.

    ``scheduled_s`` is when the load pattern wanted the request sent,
    ``send_s`` when it was sent (later only if the client had to wait for a
    free slot), ``end_s`` when the stream ended. ``chunk_s`` and
    ``chunk_text`` hold the arrival time and text of every streamed data
    event except ``[DONE]``; the text is ``""`` for an event whose choice
    carries no text (a chat role chunk) and ``None`` for an event with no
    choice at all (the usage chunk). ``prompt_tokens`` and
    ``completion_tokens`` are the server's usage counts (``None`` if it sent
    none). ``error`` is ``None`` for a request that succeeded.
    ``requested_prompt_tokens`` is the prompt length the client sized (vLLM's
    ``prompt_len``). ``output_text`` is set by the readers of other tools' files
    (:mod:`inferlab.lab.endpoint_metrics`) that keep chunk times but not each
    chunk's text: the chunks then carry a placeholder and the whole text is
    here.
    """

    index: int
    scheduled_s: float
    send_s: float
    end_s: float
    chunk_s: tuple[float, ...]
    chunk_text: tuple[str | None, ...]
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    status: int = 200
    error: str | None = None
    requested_prompt_tokens: int = 0
    requested_output_tokens: int = 0
    output_text: str | None = None

    @property
    def ok(self) -> bool:
        """True if the request succeeded and streamed some text."""
        return self.error is None and any(self.chunk_text)

    @property
    def text(self) -> str:
        """The whole generated text, which is ``output_text`` if set, else the chunks joined."""
        if self.output_text is not None:
            return self.output_text
        return "".join(t for t in self.chunk_text if t)


@dataclass(frozen=True)
class Trace:
    """One run: its requests' traces, its spec, and its wall-clock length ``duration_s``.

    ``duration_s`` runs from the first send to the last stream's end, the
    denominator that vLLM's serving benchmark divides totals by.
    """

    requests: tuple[RequestTrace, ...]
    spec: LoadSpec | None = None
    duration_s: float = 0.0
    base_url: str = ""
    model: str = ""

    @property
    def succeeded(self) -> tuple[RequestTrace, ...]:
        """The requests that succeeded."""
        return tuple(r for r in self.requests if r.ok)

    @property
    def errors(self) -> int:
        """How many requests failed."""
        return sum(1 for r in self.requests if not r.ok)
