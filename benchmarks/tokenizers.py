"""Does ``inferlab.tokens.tokenizers`` cost anything over calling the tokenizer directly?

Counts tokens with ``get_tokenizer(name).count(text)`` and with the library the
interface wraps, called directly, and prints one line per tokenizer and text::

    text=KIND tokenizer=NAME interface_over_direct=RATIO direct_mb_per_s=SPEED runs=N

RATIO is median(interface) / median(direct); the target is at most 1.2. SPEED
is the direct call's median throughput in MB (10^6 bytes of UTF-8) per second.

Every timed call sees text it has not seen before. Repeating a text to make it
long would not do: the Llama 2 encoder caches the ids of each piece (a word and
the spaces before it), so every copy after the first is a run of cache hits, and
the figure would be a cache's speed, not an encoder's. Two texts are timed:

- ``corpus``: ``data/texts/*.txt`` (prose in eight languages, code, JSON,
  numbers; about 36 kB, no part repeated), once per run with the Llama 2 cache
  emptied before every call, as a fresh process would see it.
- ``unique``: about 1 MB of seeded text per run (a new seed for every run, so no
  run repeats another's text): English-like prose of pseudo-words built from
  random syllables, numbers and Python-like code with random identifiers. Few
  words repeat, so it is close to the Llama 2 encoder's worst case; tiktoken's
  encoders have no such cache and are timed the same way.

Within a run, the interface and the direct call time the same text, each after
the cache is emptied; the order alternates between runs. Medians over the runs
(``--repeats``; 15 for the corpus, 5 for the 1 MB text by default), after one
untimed warm-up.

Run from the repository root: ``python benchmarks/tokenizers.py``.
"""

from __future__ import annotations

import argparse
import random
import statistics
import string
import time
from collections.abc import Callable
from pathlib import Path

import tiktoken

# Importing inferlab (here via inferlab.tokens.tokenizers) sets TIKTOKEN_CACHE_DIR, so the
# tiktoken.get_encoding calls below read the bundled files.
from inferlab.tokens import sentencepiece_bpe
from inferlab.tokens.tokenizers import available_tokenizers, get_tokenizer, llama3_encoding

TEXTS_DIR = Path(__file__).resolve().parent.parent / "data" / "texts"
UNIQUE_BYTES = 1_000_000
CORPUS_REPEATS = 15
UNIQUE_REPEATS = 5

CONSONANTS = "bcdfghjklmnprstvwz"
VOWELS = "aeiou"


def _word(rng: random.Random) -> str:
    """A pseudo-word of one to four consonant-vowel syllables (about 10^8 possible)."""
    return "".join(rng.choice(CONSONANTS) + rng.choice(VOWELS)
                   for _ in range(rng.randint(1, 4)))


def _identifier(rng: random.Random) -> str:
    return "_".join(_word(rng) for _ in range(rng.randint(1, 3)))


def unique_text(target_bytes: int = UNIQUE_BYTES, seed: int = 0) -> str:
    """About ``target_bytes`` of seeded prose, numbers and code in which few words repeat."""
    rng = random.Random(seed)
    parts: list[str] = []
    size = 0
    while size < target_bytes:
        words = [_word(rng) for _ in range(rng.randint(40, 120))]
        prose = (" ".join(words).capitalize()
                 + f". It took {rng.uniform(1, 999):.{rng.randint(1, 4)}f} ms"
                 + f" on {rng.randint(1, 10**6):,} tokens.\n\n")
        code = "\n".join(
            f"{' ' * 4 * rng.randint(0, 2)}{_identifier(rng)} = "
            f"{_identifier(rng)}({_identifier(rng)}, {rng.randint(0, 10**5)})"
            f"  # {rng.choice(string.ascii_uppercase)}{_word(rng)}"
            for _ in range(rng.randint(4, 12))) + "\n\n"
        parts += [prose, code]
        size += len(prose.encode("utf-8")) + len(code.encode("utf-8"))
    return "".join(parts)


def corpus_text() -> str:
    """The shipped sample texts, each once, or '' if the folder is empty."""
    files = sorted(TEXTS_DIR.glob("*.txt")) if TEXTS_DIR.is_dir() else []
    return "".join(path.read_text(encoding="utf-8") for path in files)


def seconds(function: Callable[[str], object], text: str) -> float:
    start = time.perf_counter()
    function(text)
    return time.perf_counter() - start


def direct_counter(name: str) -> tuple[Callable[[str], int], Callable[[], None]]:
    """(count function calling the library directly, reset before each timed call)."""
    if name == "llama2":
        model = sentencepiece_bpe.load()

        def count(text: str) -> int:
            return len(model.encode(text, add_bos=False))

        return count, model.clear_cache
    encoding = llama3_encoding() if name == "llama3" else tiktoken.get_encoding(name)

    def count(text: str) -> int:
        return len(encoding.encode_ordinary(text))

    return count, lambda: None


def ratio(name: str, texts: Callable[[int], str], repeats: int) -> tuple[float, float]:
    """(median(interface) / median(direct), direct MB/s): run ``i`` times ``texts(i)``."""
    interface = get_tokenizer(name).count
    direct, reset = direct_counter(name)
    warm = texts(-1)
    reset()
    assert interface(warm) == direct(warm)  # also the warm-up
    interface_s, direct_s, megabytes = [], [], []
    for run in range(repeats):
        text = texts(run)
        megabytes.append(len(text.encode("utf-8")) / 1e6)
        pair = [(interface, interface_s), (direct, direct_s)]
        for function, times in pair if run % 2 == 0 else pair[::-1]:
            reset()
            times.append(seconds(function, text))
    speeds = [mb / s for mb, s in zip(megabytes, direct_s, strict=True)]
    return statistics.median(interface_s) / statistics.median(direct_s), statistics.median(speeds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=None,
                        help="runs per text (default: 15 for the corpus, 5 for the 1 MB text)")
    parser.add_argument("--unique-bytes", type=int, default=UNIQUE_BYTES)
    args = parser.parse_args()
    corpus = corpus_text()
    unique_cache: dict[int, str] = {}

    def unique(run: int) -> str:
        if run not in unique_cache:
            unique_cache.clear()  # one text in memory at a time
            unique_cache[run] = unique_text(args.unique_bytes, seed=run + 1)
        return unique_cache[run]

    texts: list[tuple[str, Callable[[int], str], int]] = []
    if corpus:
        texts.append(("corpus", lambda run: corpus, args.repeats or CORPUS_REPEATS))
        print(f"# corpus: {len(corpus.encode('utf-8')):,} bytes of {TEXTS_DIR}/*.txt, "
              "each run the whole corpus once, cache emptied before every call")
    texts.append(("unique", unique, args.repeats or UNIQUE_REPEATS))
    print(f"# unique: about {args.unique_bytes / 1e6:.2f} MB of seeded text per run, "
          "a new seed every run")
    for kind, make, repeats in texts:
        for name in available_tokenizers():
            over, speed = ratio(name, make, repeats)
            print(f"text={kind} tokenizer={name} interface_over_direct={over:.3f} "
                  f"direct_mb_per_s={speed:.2f} runs={repeats}")
    # What repeating the corpus would have reported for the Llama 2 encoder.
    model = sentencepiece_bpe.load()
    copies = 10
    model.clear_cache()
    repeated = seconds(lambda t: model.encode(t, add_bos=False), corpus * copies)
    model.clear_cache()
    once = seconds(lambda t: model.encode(t, add_bos=False), corpus)
    print(f"# llama2 on {copies} copies of the corpus in one call: "
          f"{copies * len(corpus.encode('utf-8')) / 1e6 / repeated:.2f} MB/s, against "
          f"{len(corpus.encode('utf-8')) / 1e6 / once:.2f} MB/s on one copy "
          "(copies 2 onwards hit the piece cache)")


if __name__ == "__main__":
    main()
