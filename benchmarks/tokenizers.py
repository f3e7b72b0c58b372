"""Does ``inferlab.tokenizers`` cost anything over calling tiktoken directly?

Counts the tokens of a ~1 MB text with ``get_tokenizer(name).count(text)`` and
with tiktoken's own ``Encoding.encode_ordinary(text)`` (what the interface
calls), takes the median wall time of 5 runs each (interleaved, after one
warm-up), and prints one line per tokenizer::

    tokenizer=NAME interface_over_direct=RATIO

RATIO is median(interface) / median(direct); the target is at most 1.2. The
text is built deterministically (fixed seed) from English-like prose and
Python-like code, or read from ``data/texts/*.txt`` when that folder has files.

Run from the repository root: ``python benchmarks/tokenizers.py``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import tiktoken

# Importing inferlab (here via inferlab.tokenizers) sets TIKTOKEN_CACHE_DIR, so the
# tiktoken.get_encoding calls below read the bundled files.
from inferlab.tokenizers import available_tokenizers, get_tokenizer

TEXTS_DIR = Path(__file__).resolve().parent.parent / "data" / "texts"
TARGET_BYTES = 1_000_000
REPEATS = 5

PROSE = (
    "the model reads each token once per step and the cache grows with the context "
    "while bandwidth limits decoding and compute limits prefill so batching helps "
    "throughput but latency suffers when requests wait for a slot on the accelerator"
)
WORDS = PROSE.split()
CODE_LINES = (
    "def step(cache, token_id, position):",
    "    logits = model.forward(token_id, cache=cache, position=position)",
    "    return int(logits.argmax(axis=-1))",
    "for i, request in enumerate(batch):",
    '        print(f"{i:>4} {request.id} tokens={len(request.ids)}")',
    "    if seconds_per_token > 0.05:  # 20 tokens/s",
    "        raise ValueError('too slow: ' + str(seconds_per_token))",
)


def synthetic_text(target_bytes: int = TARGET_BYTES, seed: int = 0) -> str:
    """About ``target_bytes`` of alternating prose paragraphs and code blocks."""
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < target_bytes:
        words = rng.choices(WORDS, k=rng.randint(40, 120))
        prose = " ".join(words).capitalize() + f". It took {rng.uniform(1, 99):.2f} ms.\n\n"
        code = "\n".join(rng.choices(CODE_LINES, k=rng.randint(4, 12))) + "\n\n"
        parts += [prose, code]
        size += len(prose) + len(code)
    return "".join(parts)


def benchmark_text() -> tuple[str, str]:
    """(text, description): ``data/texts/*.txt`` if present, else synthetic."""
    files = sorted(TEXTS_DIR.glob("*.txt")) if TEXTS_DIR.is_dir() else []
    if files:
        text = "".join(path.read_text(encoding="utf-8") for path in files)
        return text, f"{len(files)} files in {TEXTS_DIR}"
    return synthetic_text(), "synthetic prose and code, seed 0"


def seconds(function: Callable[[str], object], text: str) -> float:
    start = time.perf_counter()
    function(text)
    return time.perf_counter() - start


def ratio(name: str, text: str, repeats: int = REPEATS) -> float:
    """median(interface count) / median(direct tiktoken) over ``repeats`` runs."""
    interface = get_tokenizer(name).count
    encoding = tiktoken.get_encoding(name)

    def direct(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    assert interface(text) == direct(text)  # also the warm-up
    interface_s, direct_s = [], []
    for _ in range(repeats):
        interface_s.append(seconds(interface, text))
        direct_s.append(seconds(direct, text))
    return statistics.median(interface_s) / statistics.median(direct_s)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=REPEATS)
    args = parser.parse_args()
    text, _ = benchmark_text()
    for name in available_tokenizers():
        print(f"tokenizer={name} interface_over_direct={ratio(name, text, args.repeats):.3f}")


if __name__ == "__main__":
    main()
