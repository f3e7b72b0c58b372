"""The OpenAI API as the lab server reads it: what a request may hold, and the errors.

:class:`APIError` is an error answered with OpenAI's body and an HTTP status; the
checks below refuse what a request cannot mean (unsupported parameters, sampling
values out of range, JSON nested too deep, malformed chat messages), each with 400
naming the parameter. Used by :mod:`inferlab.lab.server` and :mod:`inferlab.lab.engine_loop`.
"""

from __future__ import annotations

import functools
import json
import math

from starlette.requests import Request
from starlette.responses import JSONResponse

from inferlab.tokens.tokenizers import get_tokenizer

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



def same_json(a, b) -> bool:
    """Equal and of the same JSON kind (so ``true`` is not ``1`` and ``1`` is not ``1.0``)."""
    return type(a) is type(b) and a == b


def shown(value, limit: int = 80) -> str:
    """``value`` as JSON for an error message, cut to ``limit`` characters."""
    text = json.dumps(value)
    return text if len(text) <= limit else text[:limit] + "..."


def refuse_unsupported(body: dict) -> None:
    """Raise 400 naming the first parameter of :data:`UNSUPPORTED` set to a value that asks."""
    for name, harmless in UNSUPPORTED.items():
        if name in body and not any(same_json(body[name], value) for value in harmless):
            allowed = " or ".join(json.dumps(v) for v in harmless if v is not None) or "null"
            raise APIError(400, f"{name}: got {shown(body[name])}; this server cannot "
                           f"honour it (allowed: {allowed}, or leave it out)", name,
                           code="unsupported_parameter")


def check_sampling(body: dict) -> None:
    """Raise 400 naming a sampling parameter outside :data:`SAMPLING_RANGES`, or a bad ``n``."""
    for name, (low, high, low_open) in SAMPLING_RANGES.items():
        if name not in body:
            continue
        value = body[name]
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not (number and math.isfinite(value) and (value > low if low_open else value >= low)
                and value <= high):
            interval = f"{'(' if low_open else '['}{low:g}, {high:g}]"
            raise APIError(400, f"{name}: got {shown(value)}; must be a number in {interval}",
                           name)
    n = body.get("n", 1)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise APIError(400, f"n: got {shown(n)}; must be an integer >= 1 (and this server "
                       "returns one choice, so 1)", "n")


def json_depth(value) -> int:
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


def check_content_type(request: Request) -> None:
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
def longest_token_bytes(tokenizer_name: str) -> int:
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


def chat_messages(messages) -> list[dict]:
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


