"""The package stands on its own: installed from a wheel, it works from any folder, offline.

- ``pip wheel`` builds ``inferlab`` from a copy of the sources with this environment's
  setuptools (``--no-build-isolation --no-index``, so nothing is downloaded). The wheel
  holds every module and every file the package reads at run time: the tables and the
  sample texts and traces of ``data/`` (as ``inferlab.tables``), the tiktoken encodings
  and the Llama tokenizer files, byte for byte.
- Installed with ``--no-deps`` into a fresh virtual environment that sees this
  environment's packages for its dependencies, and run from a folder outside the
  repository with downloads made to fail, it runs every chapter's imports, and gives the
  same H200 chip, the same tables and the same token counts (all six tokenizers) as the
  repository, every ``inferlab`` module coming from the installed copy.
- An editable install reads the sources' ``data/`` in place: an edit to a CSV there
  reaches the loader at once, with no reinstall.
- Sources put on ``sys.path`` with no install at all still find ``data/`` next to
  ``inferlab/``.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import site
import subprocess
import sys
import venv
from pathlib import Path

import jupytext
import pytest
from conftest import ROOT

from inferlab import data, specs, token_counts

# Every folder this environment's packages come from; the fresh environments see them
# through a .pth file, so that installing inferlab there needs no download.
DEPENDENCY_DIRS = [*site.getsitepackages(), site.getusersitepackages()]

# Downloads fail at once: a tokenizer that reached for the network would raise.
OFFLINE = {"HTTP_PROXY": "http://127.0.0.1:9", "HTTPS_PROXY": "http://127.0.0.1:9",
           "ALL_PROXY": "http://127.0.0.1:9", "NO_PROXY": "", "HF_HUB_OFFLINE": "1"}


def _copy_sources(to: Path) -> Path:
    """Copy what a build reads (pyproject.toml, README.md, inferlab/, data/) to ``to``.

    Building from a copy keeps setuptools' build/ and egg-info folders out of the
    repository; caches and bytecode stay behind.
    """
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info")
    to.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, to / name)
    for name in ("inferlab", "data"):
        shutil.copytree(ROOT / name, to / name, ignore=ignore)
    return to


def _run(command: list, cwd: Path, env: dict | None = None) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    shown = " ".join(str(part) for part in command)[:300]
    assert done.returncode == 0, f"{shown} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _environment(folder: Path, wheel: Path) -> tuple[Path, Path]:
    """A fresh virtual environment with ``wheel`` installed alone; its python, site-packages.

    The wheel goes in first (``--no-deps --no-index``); only then does a .pth file make
    this environment's packages visible after the environment's own, so pip never
    mistakes this environment's inferlab for one it should replace.
    """
    venv.EnvBuilder(with_pip=False).create(folder)
    python = folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet",
          "--no-deps", "--no-index", str(wheel)], cwd=folder)
    where = "import sysconfig; print(sysconfig.get_path('purelib'))"
    purelib = Path(_run([str(python), "-c", where], cwd=folder).strip())
    (purelib / "zz_dependencies.pth").write_text("\n".join(DEPENDENCY_DIRS) + "\n")
    return python, purelib


def _reader_env() -> dict:
    """A reader's shell: no PYTHONPATH or tiktoken cache of ours, no network."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "TIKTOKEN_CACHE_DIR", "VIRTUAL_ENV")}
    return {**env, **OFFLINE, "PYTHONNOUSERSITE": "1", "MPLBACKEND": "Agg"}


def _chapter_imports() -> str:
    """Every top-level import statement in the chapters' code cells, once each."""
    statements: dict[str, None] = {}
    for chapter in sorted((ROOT / "book").glob("[0-9][0-9]_*.md")):
        for cell in jupytext.read(chapter).cells:
            if cell.cell_type == "code":
                for node in ast.parse(cell.source).body:
                    if isinstance(node, ast.Import | ast.ImportFrom):
                        statements[ast.unparse(node)] = None
    assert len(statements) > 20, "the chapters' imports were not found"
    return "\n".join(statements)


PROBE = """
import json, os, sys
{imports}
import inferlab
from inferlab import data, specs, token_counts

chip = specs.chip("NVIDIA H200 SXM")
counts = token_counts.count_tokens()
print(json.dumps({{
    "modules": sorted({{m.__file__ for name, m in sys.modules.items()
                        if name.split(".")[0] == "inferlab" and getattr(m, "__file__", None)}}),
    "data_dir": str(data.DATA_DIR),
    "tiktoken_cache": os.environ["TIKTOKEN_CACHE_DIR"],
    "chip": [chip.memory_bandwidth_bytes_per_s, chip.memory_capacity_bytes, chip.bf16_flop_per_s],
    "tables": {{name: data.load_table(name).to_json() for name in data.SCHEMAS}},
    "tokens": counts[["file", "tokenizer", "tokens"]].values.tolist(),
}}))
"""


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    sources = _copy_sources(root / "src")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
          "--no-index", "--wheel-dir", str(root / "dist"), str(sources)], cwd=root)
    (built,) = (root / "dist").glob("inferlab-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory) -> tuple[Path, Path]:
    return _environment(tmp_path_factory.mktemp("venv") / "env", wheel)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def test_the_installed_package_holds_every_module_and_data_file(installed):
    _, purelib = installed
    package = purelib / "inferlab"
    expected = {name: content for name, content in _files(ROOT / "inferlab").items()}
    expected.update({f"tables/{name}": content for name, content in _files(ROOT / "data").items()})
    found = _files(package)
    assert sorted(set(expected) - set(found)) == []  # nothing left behind
    assert sorted(set(found) - set(expected)) == []  # nothing foreign
    assert [name for name in expected if found[name] != expected[name]] == []
    for needed in ("tables/hardware.csv", "tables/texts/manifest.csv",
                   "tables/traces/guidellm_chat_c2/benchmarks.json",
                   "tokenizer_data/llama2.vocab", "tokenizer_data/llama3.tiktoken"):
        assert needed in found


def test_the_installed_package_works_from_another_folder_offline(installed, tmp_path):
    python, purelib = installed
    reader = tmp_path / "reader"
    reader.mkdir()
    out = _run([str(python), "-c", PROBE.format(imports=_chapter_imports())], cwd=reader,
               env=_reader_env())
    probe = json.loads(out.strip().splitlines()[-1])

    package = (purelib / "inferlab").resolve()
    modules = [Path(f).resolve() for f in probe["modules"]]
    assert len(modules) > 20  # the chapters import most of the package
    assert [m for m in modules if not m.is_relative_to(package)] == []
    assert Path(probe["data_dir"]).resolve() == package / "tables"
    assert Path(probe["tiktoken_cache"]).resolve() == package / "tiktoken_cache"
    assert not Path(probe["data_dir"]).resolve().is_relative_to(ROOT)

    h200 = specs.chip("NVIDIA H200 SXM")
    assert probe["chip"] == [h200.memory_bandwidth_bytes_per_s, h200.memory_capacity_bytes,
                             h200.bf16_flop_per_s]
    assert probe["tables"] == {name: data.load_table(name).to_json() for name in data.SCHEMAS}
    counts = token_counts.count_tokens()[["file", "tokenizer", "tokens"]].values.tolist()
    assert probe["tokens"] == counts
    assert {tokenizer for _, tokenizer, _ in probe["tokens"]} >= {"cl100k_base", "o200k_base",
                                                                 "llama2", "llama3"}


EDITABLE_PROBE = """
import inferlab.data, inferlab.tables
print(inferlab.tables.__file__)
print(inferlab.data.DATA_DIR)
try:
    print(len(inferlab.data.load_table("stacks")))
except inferlab.data.DataError as error:
    print(error)
"""


def test_an_editable_install_reads_the_sources_data_in_place(tmp_path):
    sources = _copy_sources(tmp_path / "src")
    # The PEP 660 hook pip calls for `pip install -e`, run with this environment's setuptools.
    built = _run([sys.executable, "-c", "from setuptools import build_meta; "
                  f"print(build_meta.build_editable({str(tmp_path / 'dist')!r}))"], cwd=sources)
    wheel = tmp_path / "dist" / built.strip().splitlines()[-1]
    python, _ = _environment(tmp_path / "env", wheel)
    reader = tmp_path / "reader"
    reader.mkdir()

    def probe() -> list[str]:
        return _run([str(python), "-c", EDITABLE_PROBE], cwd=reader,
                    env=_reader_env()).strip().splitlines()

    init, data_dir, stacks = probe()
    assert Path(init).resolve() == (sources / "data" / "__init__.py").resolve()
    assert Path(data_dir).resolve() == (sources / "data").resolve()
    assert int(stacks) == len(data.load_table("stacks"))

    table = sources / "data" / "stacks.csv"
    table.write_text(table.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    *_, error = probe()
    assert str(table.resolve()) in error and "no rows" in error


def test_sources_on_sys_path_without_an_install_find_data_next_to_the_package(tmp_path):
    # -S: no site-packages, so no editable install; ROOT first, this environment's packages
    # after it for pandas and numpy (added as plain folders: their .pth files do not run).
    code = ("import sys; sys.path[:0] = [sys.argv[1]]; sys.path += sys.argv[2:]; "
            "import importlib.util, inferlab.data; "
            "print(importlib.util.find_spec('inferlab.tables')); print(inferlab.data.DATA_DIR)")
    out = _run([sys.executable, "-S", "-c", code, str(ROOT), *DEPENDENCY_DIRS], cwd=tmp_path,
               env=_reader_env())
    spec, data_dir = out.strip().splitlines()
    assert spec == "None"
    assert Path(data_dir) == ROOT / "data"
