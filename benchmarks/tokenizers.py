"""Does ``inferlab.tokenizers`` cost anything over calling the tokenizer directly?

Counts the tokens of a ~1 MB text with ``get_tokenizer(name).count(text)`` and
with the library the interface wraps, called directly, takes the median wall
time of 5 runs each (interleaved, after one warm-up), and prints one line per
tokenizer::

    tokenizer=NAME interface_over_direct=RATIO direct_mb_per_s=SPEED

RATIO is median(interface) / median(direct); the target is at most 1.2. SPEED
is the direct call's throughput in MB (10^6 bytes of UTF-8) per second.

"Directly" means: tiktoken's ``Encoding.encode_ordinary(text)`` for OpenAI's
four encodings and for ``llama3`` (a tiktoken ``Encoding`` built from the
bundled files); for ``llama2``, the pure-Python encoder's own
``SentencePieceBPE.encode(text, add_bos=False)``. The Llama 2 encoder caches
the ids of each piece of text (a word and the spaces before it); its cache is
emptied before every timed run of either kind, so both pay for encoding every
distinct word once, as a fresh process would.

The text is ``data/texts/*.txt`` (prose in eight languages, code, JSON,
numbers) repeated to at least 1 MB, or, if that folder is empty, synthetic
English-like prose and Python-like code built with a fixed seed. A last line
gives the Llama 2 encoder's speed on one copy of the texts with an empty cache,
where every word is new to it: its worst case for ordinary text.

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
from inferlab import sentencepiece_bpe
from inferlab.tokenizers import available_tokenizers, get_tokenizer, llama3_encoding

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


def benchmark_text(target_bytes: int = TARGET_BYTES) -> tuple[str, str]:
    """(text, description): ``data/texts/*.txt`` repeated to ``target_bytes``, else synthetic."""
    files = sorted(TEXTS_DIR.glob("*.txt")) if TEXTS_DIR.is_dir() else []
    if files:
        text = "".join(path.read_text(encoding="utf-8") for path in files)
        copies = -(-target_bytes // len(text.encode("utf-8")))
        return text * copies, f"{len(files)} files in {TEXTS_DIR}, {copies} copies"
    return synthetic_text(target_bytes), "synthetic prose and code, seed 0"


def seconds(function: Callable[[str], object], text: str) -> float:
    start = time.perf_counter()
    function(text)
    return time.perf_counter() - start


def direct_counter(name: str) -> tuple[Callable[[str], int], Callable[[], None]]:
    """(count function calling the library directly, reset before each timed run)."""
    if name == "llama2":
        model = sentencepiece_bpe.load()

        def count(text: str) -> int:
            return len(model.encode(text, add_bos=False))

        return count, model.clear_cache
    encoding = llama3_encoding() if name == "llama3" else tiktoken.get_encoding(name)

    def count(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    return count, lambda: None


def ratio(name: str, text: str, repeats: int = REPEATS) -> tuple[float, float]:
    """(median(interface count) / median(direct call), direct MB/s) over ``repeats`` runs."""
    interface = get_tokenizer(name).count
    direct, reset = direct_counter(name)
    assert interface(text) == direct(text)  # also the warm-up
    interface_s, direct_s = [], []
    for _ in range(repeats):
        reset()
        interface_s.append(seconds(interface, text))
        reset()
        direct_s.append(seconds(direct, text))
    megabytes = len(text.encode("utf-8")) / 1e6
    return statistics.median(interface_s) / statistics.median(direct_s), megabytes / (
        statistics.median(direct_s))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=REPEATS)
    args = parser.parse_args()
    text, description = benchmark_text()
    print(f"# {len(text.encode('utf-8')) / 1e6:.2f} MB: {description}")
    for name in available_tokenizers():
        over, speed = ratio(name, text, args.repeats)
        print(f"tokenizer={name} interface_over_direct={over:.3f} direct_mb_per_s={speed:.1f}")
    # The Llama 2 encoder's speed on text whose every word is new to it.
    once, _ = benchmark_text(target_bytes=1)
    model = sentencepiece_bpe.load()
    times = []
    for _ in range(args.repeats):
        model.clear_cache()
        times.append(seconds(lambda t: model.encode(t, add_bos=False), once))
    speed = len(once.encode("utf-8")) / 1e6 / statistics.median(times)
    print(f"tokenizer=llama2 first_pass_mb_per_s={speed:.1f} "
          f"(one copy, {len(once.encode('utf-8')):,} bytes, empty cache)")


if __name__ == "__main__":
    main()
