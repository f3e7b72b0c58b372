"""A local OpenAI-compatible server for the lab engine, with continuous batching.

The endpoint lab benchmarks a real HTTP endpoint on the reader's own machine.
:class:`LabServer` serves :class:`inferlab.lab.engine.Engine` over the OpenAI API:

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
(:data:`~inferlab.lab.openai_api.UNSUPPORTED`: ``logprobs``, ``echo``, ``n`` above 1, ``best_of``,
``suffix``, ``logit_bias``, ``tools``, a non-text ``response_format``, ...) are
refused with 400 naming the parameter rather than silently ignored.
:func:`~inferlab.tokens.hf_tokenizer.write_tokenizer_dir` writes the server's tokenizer as
a Hugging Face ``tokenizer.json`` folder, so tools that count tokens with a Hugging Face
tokenizer (AIPerf, guidellm) load it offline.

Continuous batching: one worker thread owns the engine. At every step it
admits waiting requests (prefilling each prompt on its own), runs one batched
decode step for every running sequence, hands each new token to its request's
asyncio queue with ``loop.call_soon_threadsafe``, and retires the finished and
the cancelled. Requests therefore join and leave the batch between any two
decode steps (Yu et al., 2022, "Orca"; Kwon et al., 2023, vLLM). NumPy
releases the GIL inside BLAS, so the event loop keeps serving while a step runs.

The sequences of a running batch have different lengths, which the engine's
one-length :class:`~inferlab.lab.engine.KVCache` cannot hold, so each request keeps
its own cache and :meth:`~inferlab.lab.engine.Engine.decode_ragged` batches the
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
SIGINT or SIGTERM to ``python -m inferlab.lab.server``) ends every open stream with
``finish_reason: "abort"`` and ``data: [DONE]``.

Robustness, so that no request can hold up the others (each bound is a
:class:`~inferlab.lab.engine_loop.ServerConfig` field):

- a body over ``max_body_bytes`` gets 413, a ``Content-Type`` other than JSON
  415, JSON nested deeper than :data:`~inferlab.lab.openai_api.MAX_JSON_DEPTH` or
  numbers JSON cannot hold (token ids beyond the vocabulary, a 5,000-digit integer) 400;
- a prompt whose UTF-8 length alone proves it longer than the context (at
  most one token per byte count of the tokenizer's longest token) is refused
  before it is tokenized, and tokenizing runs in a worker thread, off the
  event loop;
- sampling parameters are range-checked (:data:`~inferlab.lab.openai_api.SAMPLING_RANGES`),
  400 naming the parameter and the range; 429 and 503 carry ``Retry-After``;
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
``python -m inferlab.lab.server --port 8000`` (``--model``, ``--eos-token-id`` and
``--tokenizer-dir`` as in :func:`main`). Used in the endpoint lab.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import itertools
import json
import signal
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict

import h11
import numpy as np
import uvicorn
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from uvicorn.protocols.http.h11_impl import H11Protocol

from inferlab.lab.engine import Engine
from inferlab.lab.engine_loop import Detokenizer, ServedSequence
from inferlab.lab.engine_loop import EngineLoop as EngineLoop
from inferlab.lab.engine_loop import ServerConfig as ServerConfig
from inferlab.lab.engine_loop import ServerStats as ServerStats
from inferlab.lab.engine_sizes import DEFAULT_SIZE, EngineConfig
from inferlab.lab.openai_api import MAX_JSON_DEPTH as MAX_JSON_DEPTH
from inferlab.lab.openai_api import RETRY_AFTER_S as RETRY_AFTER_S
from inferlab.lab.openai_api import SAMPLING_RANGES as SAMPLING_RANGES
from inferlab.lab.openai_api import UNSUPPORTED as UNSUPPORTED
from inferlab.lab.openai_api import APIError as APIError
from inferlab.lab.openai_api import (
    chat_messages,
    check_content_type,
    check_sampling,
    json_depth,
    longest_token_bytes,
    refuse_unsupported,
    shown,
)
from inferlab.tokens.hf_tokenizer import hf_tokenizer_json as hf_tokenizer_json
from inferlab.tokens.hf_tokenizer import write_tokenizer_dir as write_tokenizer_dir
from inferlab.tokens.tokenizers import get_tokenizer

#: The host the server binds to unless told otherwise (this machine only).
DEFAULT_HOST = "127.0.0.1"

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


async def _listen_for_disconnect(receive, scheduler: EngineLoop, sequence: ServedSequence) -> None:
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
        sequence: ServedSequence = self.job["sequence"]
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
        sequence: ServedSequence = self.job["sequence"]
        detok = Detokenizer(self.server.tokenizer)
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
        self._longest_token = longest_token_bytes(self.config.tokenizer)
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
            check_content_type(request)
            job = self._parse(await self._read_body(request), chat)
            if "text" in job:
                ids = await asyncio.get_running_loop().run_in_executor(
                    self._tokenize_pool, self.tokenizer.encode, job.pop("text"))
                self._check_length(len(ids), job, chat)
                job["prompt_ids"] = ids
            job["prompt_ids"] = (np.asarray(job["prompt_ids"] or [0], dtype=np.int64)
                                 % self.engine.config.vocab_size)
            job["sequence"] = ServedSequence(job["prompt_ids"], job["max_tokens"],
                                             job["ignore_eos"], asyncio.get_running_loop())
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
        if json_depth(body) > MAX_JSON_DEPTH:
            raise APIError(400, f"the body nests arrays or objects too deeply (at most "
                           f"{MAX_JSON_DEPTH} levels)")
        model = body.get("model")
        if not isinstance(model, str):
            raise APIError(400, "model: required, a string", "model")
        if model != self.config.model_name:
            raise APIError(404, f"The model `{model}` does not exist; this server serves "
                           f"`{self.config.model_name}`", "model", code="model_not_found")
        body = {key: value for key, value in body.items() if value is not None}
        check_sampling(body)
        refuse_unsupported(body)
        key = "max_completion_tokens" if chat and "max_completion_tokens" in body else "max_tokens"
        max_tokens = body.get(key, self.config.default_max_tokens)
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise APIError(400, f"{key}: got {shown(max_tokens)}; must be an integer >= 1", key)
        job = {"max_tokens": max_tokens}
        if chat:
            job["text"] = self._text_prompt(_chat_prompt(chat_messages(body.get("messages"))),
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
                        raise APIError(400, f"prompt: got the token id {shown(token, 40)}; "
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
        sequence: ServedSequence = job["sequence"]
        detok = Detokenizer(self.tokenizer)
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


def main(argv: list[str] | None = None) -> None:
    """``python -m inferlab.lab.server``: serve the lab engine until interrupted.

    ``--model`` sets the name clients must send, ``--eos-token-id`` an id that
    ends a request (unless it sets ``ignore_eos``), and ``--tokenizer-dir DIR``
    first writes the tokenizer folder of
    :func:`~inferlab.tokens.hf_tokenizer.write_tokenizer_dir` there.
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
