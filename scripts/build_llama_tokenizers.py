"""Rebuild the Llama 2 and Llama 3 tokenizer files that ship inside ``inferlab``.

Why: the tokenizers chapter counts text with the tokenizers of the Llama models
(the book's running examples, and the tokenizer LLMPerf counts every model's
output with), and the book must run with no network. This script turns the
data of two npm packages into small files under ``inferlab/tokens/tokenizer_data/``.

Where the data comes from (get the tarballs without installing anything)::

    cd /tmp && npm pack llama-tokenizer-js@1.2.2 llama3-tokenizer-js@1.2.0

- ``llama-tokenizer-js`` 1.2.2 by belladore.ai (MIT): the Llama 1/2 tokenizer
  (SentencePiece BPE, 32,000 tokens, byte fallback). ``llama-tokenizer.js``
  holds ``llama_vocab_base64`` (the token strings joined by newlines, UTF-8,
  base64; the line number is the token id) and ``llama_merges_binary`` (base64
  of little-endian uint16 pairs ``left_id, right_id``, one pair per merge, in
  priority order).
- ``llama3-tokenizer-js`` 1.2.0 by belladore.ai (MIT): the Llama 3 / 3.1
  tokenizer (byte-level BPE like tiktoken, 128,000 tokens plus 256 special).
  ``src/data-converted.js`` holds the vocabulary in the same newline format
  (byte-level "GPT-2 unicode" strings) and the merges packed as 17-bit ids,
  big-endian bit order; ``src/llama3-tokenizer.js`` holds the split regex and
  the special tokens.

The vocabularies and merges themselves are Meta's (Llama 2 Community License,
Llama 3 / 3.1 Community License); the README written next to the files says so.

Outputs, in ``inferlab/tokens/tokenizer_data/``:

- ``llama2.vocab``: 32,000 lines, the token strings ("▁" marks a space);
- ``llama2.merges``: one merge per line, ``left_id right_id``, highest priority first;
- ``llama3.tiktoken``: ``base64(token bytes) rank`` per line, tiktoken's own file
  format, where rank = token id;
- ``llama3.json``: the split regex, the special tokens and their ids;
- ``llama2_source_tests.json`` and ``llama3_source_tests.json``: the packages'
  own test strings and expected ids, read out of their ``defaultTests``;
- ``reference_encodings.json``: for each ``data/texts/*.txt``, the number of
  tokens and the sha256 of the ids the JavaScript tokenizers produce;
- ``README.md``: sources, licenses, npm integrity and sha256 of every file.

Checks before anything is written: every Llama 2 merge yields a token in the
vocabulary and no token has a "▁" after another character (which is what lets
the Python encoder cut text before each run of spaces); the Llama 3 merges are
ordered by the rank of the token they make (which is what makes tiktoken's
rank-order merging equal to the merge list); and the Python tokenizers built
from the new files reproduce every expected id of both packages' tests.

The test strings and reference encodings come from running the packages
themselves, so this script needs ``node`` (18 or later) on the PATH; the
tokenizers it writes need nothing but Python and tiktoken.

Run from the repository root::

    python scripts/build_llama_tokenizers.py /tmp/llama-tokenizer-js-1.2.2.tgz \\
        /tmp/llama3-tokenizer-js-1.2.0.tgz
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import re
import shutil
import struct
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_OUT = REPO / "inferlab" / "tokens" / "tokenizer_data"
TEXTS_DIR = REPO / "data" / "texts"

LLAMA2_NPM = ("llama-tokenizer-js", "1.2.2")
LLAMA3_NPM = ("llama3-tokenizer-js", "1.2.0")

# Runs both packages in node: their own tests (read out of ``defaultTests`` by
# redefining the test helpers after the test body, which JavaScript's function
# hoisting lets the later definitions win), Llama 3's special tokens, and the
# reference encodings of the texts given on the command line.
NODE_SCRIPT = r"""
import fs from 'node:fs';
import crypto from 'node:crypto';
const [llama2Path, llama3Path, ...texts] = process.argv.slice(2);
const llama2 = (await import(llama2Path)).default;
const llama3 = (await import(llama3Path)).default;

function sourceTests(tokenizer) {
  const src = Object.getPrototypeOf(tokenizer).defaultTests.toString();
  const body = src.slice(src.indexOf('{') + 1, src.lastIndexOf('}'));
  const hooks = `
    function testCase(input, ids) {
      REC.push({kind: 'encode', input, ids, bos: true, preceding_space: true}) }
    function testDecodeOnly(ids, output, bos = true, preceding_space = true) {
      REC.push({kind: 'decode', ids, output, bos, preceding_space}) }
    function testEncode(input, ids, options) {
      const o = options === undefined ? {bos: true, eos: true} : options;
      REC.push({kind: 'encode', input, ids, bos: o.bos, eos: o.eos}) }
    function testDecode(ids, output) { REC.push({kind: 'decode', ids, output}) }
    function testEncodeAndDecode(input, ids) {
      REC.push({kind: 'encode', input, ids, bos: false, eos: false});
      REC.push({kind: 'decode', ids, output: input}) }
    function testOptimisticCount(input, count) {
      REC.push({kind: 'optimistic_count', input, count}) }
    function isEqual(a, b) { return true }
  `;
  const REC = [];
  const log = console.log;
  console.log = () => {};
  try {
    new Function('tokenizer', 'REC', body + hooks)(tokenizer, REC);
  } finally {
    console.log = log;
  }
  return REC;
}

function digest(ids) {
  const sha256 = crypto.createHash('sha256').update(ids.join(',')).digest('hex');
  return {count: ids.length, sha256};
}

const reference = {};
for (const path of texts) {
  const text = fs.readFileSync(path, 'utf8');
  reference[path] = {
    text_sha256: crypto.createHash('sha256').update(text, 'utf8').digest('hex'),
    llama2: digest(llama2.encode(text, false, true)),
    llama3: digest(llama3.encode(text, {bos: false, eos: false})),
  };
}
console.log(JSON.stringify({
  llama2_tests: sourceTests(llama2),
  llama3_tests: sourceTests(llama3),
  llama3_special_tokens: llama3.vocabById.slice(128000),
  reference,
}));
"""


def _js_string(source: str, name: str, where: str) -> str:
    """The value of ``const NAME = "..."`` in a JavaScript file (JSON-compatible escapes)."""
    match = re.search(rf'const {name} = ("(?:[^"\\]|\\.)*")', source)
    if match is None:
        raise SystemExit(f"{where}: no string constant {name}")
    return json.loads(match.group(1))


def _unpack(tarball: Path, expected: tuple[str, str], into: Path) -> tuple[Path, str]:
    """Extract an npm tarball; return (package folder, sha512 integrity of the tarball)."""
    data = tarball.read_bytes()
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    with tarfile.open(tarball, "r:gz") as tar:
        tar.extractall(into, filter="data")
    package_dir = into / "package"
    package = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))
    name, version = expected
    if package.get("name") != name:
        raise SystemExit(f"{tarball}: package is {package.get('name')!r}, not {name!r}")
    if package.get("version") != version:
        print(
            f"warning: {tarball} is {name}@{package.get('version')}, documented source is "
            f"{version}; the checks below still apply",
            file=sys.stderr,
        )
    return package_dir, integrity


def read_llama2(package_dir: Path) -> tuple[list[str], list[tuple[int, int]]]:
    """(vocabulary, merges) of llama-tokenizer-js."""
    path = package_dir / "llama-tokenizer.js"
    source = path.read_text(encoding="utf-8")
    vocab = base64.b64decode(_js_string(source, "llama_vocab_base64", path)).decode("utf-8")
    tokens = vocab.split("\n")
    packed = base64.b64decode(_js_string(source, "llama_merges_binary", path))
    ids = struct.unpack(f"<{len(packed) // 2}H", packed)
    merges = list(zip(ids[0::2], ids[1::2], strict=True))
    return tokens, merges


def check_llama2(tokens: list[str], merges: list[tuple[int, int]]) -> None:
    """The properties the Python encoder relies on; exits naming the first that fails."""
    if len(tokens) != 32000 or tokens[:3] != ["<unk>", "<s>", "</s>"]:
        raise SystemExit(
            f"llama2: expected 32,000 tokens starting <unk> <s> </s>, got {len(tokens)}")
    if [tokens[3 + b] for b in range(256)] != [f"<0x{b:02X}>" for b in range(256)]:
        raise SystemExit("llama2: ids 3-258 are not the byte tokens <0x00> ... <0xFF>")
    index = {token: i for i, token in enumerate(tokens)}
    if len(index) != len(tokens):
        raise SystemExit("llama2: the vocabulary has duplicate tokens")
    if len(set(merges)) != len(merges):
        raise SystemExit("llama2: duplicate merges")
    for rank, (left, right) in enumerate(merges):
        if tokens[left] + tokens[right] not in index:
            raise SystemExit(f"llama2: merge {rank} makes a token not in the vocabulary")
        if left < 259 or right < 259:
            raise SystemExit(f"llama2: merge {rank} involves a byte token")
    crossing = [token for token in tokens if re.search("[^▁]▁", token)]
    if crossing:
        raise SystemExit(f"llama2: tokens with '▁' after another character: {crossing[:5]}")


def _bytes_to_unicode() -> dict[str, int]:
    """GPT-2's byte <-> printable-character table, as characters to bytes."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1),
                 *range(ord("®"), ord("ÿ") + 1)]
    chars = list(printable)
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            chars.append(256 + extra)
            extra += 1
    return {chr(char): byte for byte, char in zip(printable, chars, strict=True)}


def read_llama3(package_dir: Path) -> tuple[list[bytes], list[tuple[int, int]], str]:
    """(token bytes by id, merges, split regex) of llama3-tokenizer-js."""
    data_path = package_dir / "src" / "data-converted.js"
    data = data_path.read_text(encoding="utf-8")
    vocab = base64.b64decode(_js_string(data, "llama_vocab_base64", data_path)).decode("utf-8")
    to_byte = _bytes_to_unicode()
    token_bytes = [bytes(to_byte[char] for char in token) for token in vocab.split("\n")]
    packed = base64.b64decode(_js_string(data, "llama_merges_binary", data_path))
    bit_string = "".join(f"{byte:08b}" for byte in packed)
    ids = [int(bit_string[i : i + 17], 2) for i in range(0, len(bit_string) - 16, 17)]
    ids = ids[: len(ids) - len(ids) % 2]
    merges = list(zip(ids[0::2], ids[1::2], strict=True))
    code_path = package_dir / "src" / "llama3-tokenizer.js"
    pattern = _js_string(code_path.read_text(encoding="utf-8"), "DIRTY_LLAMA3_REGEX_STRING",
                         code_path)
    return token_bytes, merges, pattern


def check_llama3(token_bytes: list[bytes], merges: list[tuple[int, int]]) -> None:
    """Byte-level BPE whose merge order is the rank order of the tokens it makes."""
    if len(token_bytes) != 128000:
        raise SystemExit(f"llama3: expected 128,000 tokens, got {len(token_bytes)}")
    rank = {token: i for i, token in enumerate(token_bytes)}
    if len(rank) != len(token_bytes):
        raise SystemExit("llama3: the vocabulary has duplicate tokens")
    if any(bytes([b]) not in rank for b in range(256)):
        raise SystemExit("llama3: some single byte has no token")
    previous = -1
    for k, (left, right) in enumerate(merges):
        made = rank.get(token_bytes[left] + token_bytes[right])
        if made is None:
            raise SystemExit(f"llama3: merge {k} makes a token not in the vocabulary")
        if made < previous:
            raise SystemExit(f"llama3: merge {k} is out of rank order; tiktoken would differ")
        previous = made


def run_node(package2: Path, package3: Path, texts: list[Path]) -> dict:
    """Run the packages in node: their tests, Llama 3's specials, reference encodings."""
    node = shutil.which("node")
    if node is None:
        raise SystemExit("node is needed to read the packages' tests; install Node.js 18+")
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "extract.mjs"
        script.write_text(NODE_SCRIPT, encoding="utf-8")
        result = subprocess.run(
            [node, str(script), str(package2 / "llama-tokenizer.js"),
             str(package3 / "bundle" / "llama3-tokenizer-with-baked-data.js"),
             *map(str, texts)],
            capture_output=True, text=True, check=False,
        )
    if result.returncode != 0:
        raise SystemExit(f"node failed:\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def file_contents(
    l2_tokens: list[str], l2_merges: list[tuple[int, int]], l3_bytes: list[bytes],
    pattern: str, specials: list[str], node: dict, texts: list[Path],
) -> dict[str, bytes]:
    """Every output file's bytes, keyed by file name."""
    reference = {}
    for path in texts:
        entry = node["reference"][str(path)]
        reference[path.name] = entry
    l3_meta = {
        "pat_str": pattern,
        "special_tokens": {token: 128000 + i for i, token in enumerate(specials)},
        "bos_token": "<|begin_of_text|>",
        "eos_token": "<|end_of_text|>",
    }
    l2_meta_tests = {"source": f"{LLAMA2_NPM[0]}@{LLAMA2_NPM[1]} defaultTests",
                     "cases": node["llama2_tests"]}
    l3_meta_tests = {"source": f"{LLAMA3_NPM[0]}@{LLAMA3_NPM[1]} defaultTests",
                     "cases": node["llama3_tests"]}

    def dump(value: object) -> bytes:
        return (json.dumps(value, ensure_ascii=False, indent=1) + "\n").encode("utf-8")

    return {
        "llama2.vocab": ("\n".join(l2_tokens) + "\n").encode("utf-8"),
        "llama2.merges": "".join(f"{a} {b}\n" for a, b in l2_merges).encode("ascii"),
        "llama3.tiktoken": b"".join(
            base64.b64encode(token) + f" {rank}\n".encode() for rank, token in enumerate(l3_bytes)
        ),
        "llama3.json": dump(l3_meta),
        "llama2_source_tests.json": dump(l2_meta_tests),
        "llama3_source_tests.json": dump(l3_meta_tests),
        "reference_encodings.json": dump(
            {"source": "the npm packages run in node: llama2 = encode(text, false, true) "
                       "(no BOS, with the leading space); llama3 = encode(text, "
                       "{bos: false, eos: false}); sha256 of the ids joined by commas",
             "texts": reference}
        ),
    }


def readme_text(contents: dict[str, bytes], integrity: dict[str, str]) -> str:
    rows = "\n".join(
        f"| `{name}` | {len(data):,} | `{hashlib.sha256(data).hexdigest()}` |"
        for name, data in contents.items()
    )
    (n2, v2), (n3, v3) = LLAMA2_NPM, LLAMA3_NPM
    return f"""# Bundled Llama tokenizers

Generated by `scripts/build_llama_tokenizers.py`; do not edit by hand. Read by
`inferlab.tokens.sentencepiece_bpe` (Llama 2) and `inferlab.tokens.tokenizers` (Llama 3,
through tiktoken). Nothing is downloaded at run time.

| file | bytes | sha256 |
|---|---|---|
{rows}

## Sources

- Llama 1/2: the npm package `{n2}@{v2}`
  (https://github.com/belladoreai/llama-tokenizer-js), constants
  `llama_vocab_base64` and `llama_merges_binary` in `llama-tokenizer.js`;
  tarball integrity `{integrity['llama2']}`
  (compare `npm view {n2}@{v2} dist.integrity`).
- Llama 3 / 3.1: the npm package `{n3}@{v3}`
  (https://github.com/belladoreai/llama3-tokenizer-js), constants in
  `src/data-converted.js` and `src/llama3-tokenizer.js`; tarball integrity
  `{integrity['llama3']}`
  (compare `npm view {n3}@{v3} dist.integrity`).
- `*_source_tests.json`: the packages' own `defaultTests` (test strings and
  expected ids), read by running the packages in node.
- `reference_encodings.json`: token counts and id hashes the packages produce
  for the book's sample texts in `data/texts/`.

Format note: `llama2.vocab` must be read as bytes and split on "\\n" only: a
few tokens hold a carriage return (id 15231 is `",\\r`), which text-mode
reading would turn into a newline.

## Licenses

- Both npm packages: MIT, copyright 2023 belladore.ai (their `LICENSE.md`).
- The vocabularies and merges are Meta's, from the tokenizers released with
  Llama 2 and Llama 3, and are Llama Materials under Meta's licenses:
  "Llama 2 is licensed under the LLAMA 2 Community License, Copyright (c) Meta
  Platforms, Inc. All Rights Reserved." and "Meta Llama 3 is licensed under the
  Meta Llama 3 Community License, Copyright (c) Meta Platforms, Inc. All Rights
  Reserved." Built with Meta Llama 3. The files are redistributed with their
  content unchanged (only re-encoded), to count and display tokens.
"""


def build(tarball2: Path, tarball3: Path, out_dir: Path) -> dict[str, bytes]:
    """Read both tarballs, check everything, then write the files and the README."""
    texts = sorted(TEXTS_DIR.glob("*.txt"))
    with tempfile.TemporaryDirectory() as tmp:
        package2, integrity2 = _unpack(tarball2, LLAMA2_NPM, Path(tmp) / "l2")
        package3, integrity3 = _unpack(tarball3, LLAMA3_NPM, Path(tmp) / "l3")
        l2_tokens, l2_merges = read_llama2(package2)
        check_llama2(l2_tokens, l2_merges)
        l3_bytes, l3_merges, pattern = read_llama3(package3)
        check_llama3(l3_bytes, l3_merges)
        node = run_node(package2, package3, texts)
    specials = node["llama3_special_tokens"]
    if len(specials) != 256:
        raise SystemExit(f"llama3: expected 256 special tokens, got {len(specials)}")
    contents = file_contents(l2_tokens, l2_merges, l3_bytes, pattern, specials, node, texts)
    contents["README.md"] = readme_text(
        contents, {"llama2": integrity2, "llama3": integrity3}
    ).encode("utf-8")

    # Write to a scratch folder, rebuild the tokenizers from it, and check every
    # expected id before replacing anything in ``out_dir``.
    with tempfile.TemporaryDirectory() as tmp:
        for name, data in contents.items():
            (Path(tmp) / name).write_bytes(data)
        failures = verify(Path(tmp))
        if failures:
            raise SystemExit("the rebuilt tokenizers disagree with the packages, nothing "
                             "written:\n  " + "\n  ".join(failures[:20]))
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, data in contents.items():
        (out_dir / name).write_bytes(data)
    return contents


def verify(data_dir: Path) -> list[str]:
    """Every disagreement between the Python tokenizers in ``data_dir`` and the packages."""
    sys.path.insert(0, str(REPO))
    from inferlab.tokens import sentencepiece_bpe, tokenizers

    llama2 = sentencepiece_bpe.load(data_dir, "llama2")
    llama3 = tokenizers.llama3_encoding(data_dir)
    failures = []
    for case in json.loads((data_dir / "llama2_source_tests.json").read_text())["cases"]:
        if case["kind"] == "encode":
            got = llama2.encode(case["input"], add_bos=case["bos"],
                                add_preceding_space=case["preceding_space"])
            if got != case["ids"]:
                failures.append(
                    f"llama2 encode {case['input'][:30]!r}: {got[:8]} != {case['ids'][:8]}")
        else:
            got = llama2.decode(case["ids"], skip_bos=case["bos"],
                                remove_preceding_space=case["preceding_space"])
            if got != case["output"]:
                failures.append(f"llama2 decode {case['ids'][:8]}: {got!r} != {case['output']!r}")
    for case in json.loads((data_dir / "llama3_source_tests.json").read_text())["cases"]:
        if case["kind"] == "encode":
            got = llama3.encode(case["input"], allowed_special="all")
            got = [128000] * case["bos"] + got + [128001] * case["eos"]
            if got != case["ids"]:
                failures.append(
                    f"llama3 encode {case['input'][:30]!r}: {got[:8]} != {case['ids'][:8]}")
        elif case["kind"] == "decode":
            got = llama3.decode(case["ids"])
            if got != case["output"]:
                failures.append(f"llama3 decode {case['ids'][:8]}: {got!r} != {case['output']!r}")
    reference = json.loads((data_dir / "reference_encodings.json").read_text())["texts"]
    for name, entry in reference.items():
        text = (TEXTS_DIR / name).read_text(encoding="utf-8")
        for tokenizer_name, ids in (("llama2", llama2.encode(text, add_bos=False)),
                                    ("llama3", llama3.encode_ordinary(text))):
            digest = hashlib.sha256(",".join(map(str, ids)).encode()).hexdigest()
            if digest != entry[tokenizer_name]["sha256"]:
                failures.append(f"{tokenizer_name} on {name}: {len(ids)} tokens, "
                                f"package gives {entry[tokenizer_name]['count']}")
    return failures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("llama2_tarball", type=Path,
                        help=f"output of `npm pack {LLAMA2_NPM[0]}@{LLAMA2_NPM[1]}`")
    parser.add_argument("llama3_tarball", type=Path,
                        help=f"output of `npm pack {LLAMA3_NPM[0]}@{LLAMA3_NPM[1]}`")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="folder to write")
    args = parser.parse_args(argv)
    contents = build(args.llama2_tarball, args.llama3_tarball, args.out)
    for name, data in contents.items():
        print(f"{name:<28} {len(data):>9} bytes sha256 {hashlib.sha256(data).hexdigest()}")
    print("all source tests and reference encodings reproduced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
