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
  sources it was built from run uninstalled, every ``inferlab`` module coming from the
  installed copy.
- An editable install reads the sources' ``data/`` in place: an edit to a CSV there
  reaches the loader at once, with no reinstall.
- Sources put on ``sys.path`` with no install at all still find ``data/`` next to
  ``inferlab/``.
- Every third-party module that an ``inferlab`` module imports (or the inferlab modules
  it imports do) is declared: by the core dependencies, or for the endpoint lab and
  LoadGen modules by their extra.
- The requirement an exported notebook's first cell installs
  (``inferlab[notebooks] @ git+<repository>``) builds from a git repository, with the
  tables inside and the extra's requirements declared.
"""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import shutil
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import jupytext
import pytest
from conftest import ROOT, import_statements
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from inferlab.common import data, schemas

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import notebooks  # noqa: E402  (the exported notebooks' setup cell)

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
from inferlab.common import data, schemas
from inferlab.model import specs
from inferlab.tokens import token_counts

chip = specs.chip("NVIDIA H200 SXM")
counts = token_counts.count_tokens()
print(json.dumps({{
    "modules": sorted({{m.__file__ for name, m in sys.modules.items()
                        if name.split(".")[0] == "inferlab" and getattr(m, "__file__", None)}}),
    "data_dir": str(data.DATA_DIR),
    "tiktoken_cache": os.environ["TIKTOKEN_CACHE_DIR"],
    "chip": [chip.memory_bandwidth_bytes_per_s, chip.memory_capacity_bytes, chip.bf16_flop_per_s],
    "tables": {{name: data.load_table(name).to_json() for name in schemas.SCHEMAS}},
    "tokens": counts[["file", "tokenizer", "tokens"]].values.tolist(),
}}))
"""


def _from_sources(sources: Path, code: str, cwd: Path) -> str:
    """Run ``code`` with ``sources`` first on sys.path and no install of inferlab at all.

    ``-S`` skips site-packages, and with them any install of inferlab; this
    environment's packages follow ``sources`` as plain folders (their .pth files, an
    editable install's among them, do not run).
    """
    prefix = "import sys; sys.path[:0] = sys.argv[1:2]; sys.path += sys.argv[2:]\n"
    return _run([sys.executable, "-S", "-c", prefix + code, str(sources), *DEPENDENCY_DIRS],
                cwd=cwd, env=_reader_env())


@pytest.fixture(scope="module")
def build(tmp_path_factory) -> tuple[Path, Path]:
    """The wheel, and the copy of the sources it was built from (the repository may change
    while the tests run: what the wheel holds is compared with that copy)."""
    root = tmp_path_factory.mktemp("wheel")
    sources = _copy_sources(root / "src")
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
          "--no-index", "--wheel-dir", str(root / "dist"), str(sources)], cwd=root)
    (built,) = (root / "dist").glob("inferlab-*.whl")
    return built, sources


@pytest.fixture(scope="module")
def installed(build, tmp_path_factory) -> tuple[Path, Path]:
    return _environment(tmp_path_factory.mktemp("venv") / "env", build[0])


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts}


def test_the_installed_package_holds_every_module_and_data_file(build, installed):
    _, sources = build
    _, purelib = installed
    package = purelib / "inferlab"
    expected = dict(_files(sources / "inferlab"))
    expected.update({f"tables/{name}": body for name, body in _files(sources / "data").items()})
    found = _files(package)
    assert sorted(set(expected) - set(found)) == []  # nothing left behind
    assert sorted(set(found) - set(expected)) == []  # nothing foreign
    assert [name for name in expected if found[name] != expected[name]] == []
    for needed in ("tables/hardware.csv", "tables/texts/manifest.csv",
                   "tables/traces/guidellm_chat_c2/benchmarks.json",
                   "tokens/tokenizer_data/llama2.vocab", "tokens/tokenizer_data/llama3.tiktoken"):
        assert needed in found


def test_the_installed_package_works_from_another_folder_offline(build, installed, tmp_path):
    _, sources = build
    python, purelib = installed
    reader = tmp_path / "reader"
    reader.mkdir()
    code = PROBE.format(imports=_chapter_imports())
    out = _run([str(python), "-c", code], cwd=reader, env=_reader_env())
    probe = json.loads(out.strip().splitlines()[-1])
    # The same code on the sources the wheel was built from, not installed.
    expected = json.loads(_from_sources(sources, code, reader).strip().splitlines()[-1])

    package = (purelib / "inferlab").resolve()
    modules = [Path(f).resolve() for f in probe["modules"]]
    assert len(modules) > 20  # the chapters import most of the package
    assert [m for m in modules if not m.is_relative_to(package)] == []
    assert Path(probe["data_dir"]).resolve() == package / "tables"
    assert Path(probe["tiktoken_cache"]).resolve() == package / "tokens" / "tiktoken_cache"
    assert not Path(probe["data_dir"]).resolve().is_relative_to(ROOT)

    assert Path(expected["data_dir"]).resolve() == (sources / "data").resolve()
    assert probe["chip"] == expected["chip"]
    assert probe["chip"][0] > 1e12  # an H200 reads terabytes per second
    assert probe["tables"] == expected["tables"]
    assert sorted(probe["tables"]) == sorted(schemas.SCHEMAS)
    assert probe["tokens"] == expected["tokens"]
    assert {tokenizer for _, tokenizer, _ in probe["tokens"]} >= {"cl100k_base", "o200k_base",
                                                                 "llama2", "llama3"}
    assert min(tokens for *_, tokens in probe["tokens"]) > 0


EDITABLE_PROBE = """
import inferlab.common.data, inferlab.tables
print(inferlab.tables.__file__)
print(inferlab.common.data.DATA_DIR)
try:
    print(len(inferlab.common.data.load_table("stacks")))
except inferlab.common.data.DataError as error:
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
    assert int(stacks) == len(data.load_table("stacks", data_dir=sources / "data"))

    table = sources / "data" / "stacks.csv"
    table.write_text(table.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    *_, error = probe()
    assert str(table.resolve()) in error and "no rows" in error


def test_sources_on_sys_path_without_an_install_find_data_next_to_the_package(tmp_path):
    code = ("import importlib.util, inferlab.common.data\n"
            "print(importlib.util.find_spec('inferlab.tables'));"
            " print(inferlab.common.data.DATA_DIR)")
    spec, data_dir = _from_sources(ROOT, code, tmp_path).strip().splitlines()
    assert spec == "None"
    assert Path(data_dir) == ROOT / "data"


def test_the_notebooks_requirement_builds_from_a_git_url(tmp_path):
    repository = _copy_sources(tmp_path / "repository")
    git = ["git", "-c", "user.name=test", "-c", "user.email=test@example.org"]
    for command in (["init", "--quiet"], ["add", "."], ["commit", "--quiet", "-m", "sources"]):
        _run([*git, *command], cwd=repository)
    requirement = notebooks.REQUIREMENT.format(repository=repository.as_uri())
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
          "--no-index", "--wheel-dir", str(tmp_path / "dist"), requirement], cwd=tmp_path)
    (built,) = (tmp_path / "dist").glob("inferlab-*.whl")
    with zipfile.ZipFile(built) as archive:
        names = set(archive.namelist())
    requires = _requires(built)
    assert {f"inferlab/tables/{name}.csv" for name in schemas.SCHEMAS} <= names
    assert "inferlab/tables/texts/manifest.csv" in names
    assert _extra_closure(requires, "notebooks") >= {"myst-nb", "starlette", "uvicorn", "httpx",
                                                     "threadpoolctl", "mlcommons-loadgen"}
    assert "jupyter-book" not in _extra_closure(requires, "notebooks")  # that is "book"
    assert "starlette" not in _extra_closure(requires, None)  # the lab is optional


def _extra_closure(requires: list[str], extra: str | None) -> set[str]:
    """The distributions ``inferlab[extra]`` requires, following inferlab[...] references."""
    names: set[str] = set()
    pending, seen = [extra], set()
    while pending:
        current = pending.pop()
        seen.add(current)
        for line in requires:
            requirement = Requirement(line)
            if requirement.marker and not requirement.marker.evaluate({"extra": current or ""}):
                continue
            if requirement.name == "inferlab":
                pending.extend(e for e in requirement.extras if e not in seen)
            else:
                names.add(canonicalize_name(requirement.name))
    return names


def _requires(wheel: Path) -> list[str]:
    """The wheel's Requires-Dist lines: its dependencies, with their extras' markers."""
    with zipfile.ZipFile(wheel) as archive:
        (metadata,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        lines = archive.read(metadata).decode().splitlines()
    return [line.split(":", 1)[1].strip() for line in lines if line.startswith("Requires-Dist:")]


#: The extra a module (or package: every module in it) needs beyond the core dependencies;
#: every other module needs only the core.
EXTRA_OF_MODULE = {"lab.server": "lab", "lab.engine_loop": "lab", "lab.openai_api": "lab",
                   "lab.loadclient": "lab", "lab.endpoint_metrics": "lab",
                   "serving.real_loadgen": "loadgen", "pages.glue": "notebooks",
                   "pages.explorers": "notebooks"}


def _imported(path: Path) -> set[str]:
    """Every module ``path`` imports, at the top or inside functions."""
    names: set[str] = set()
    for module, name in import_statements(path):
        names.add(module)
        if module.split(".")[0] == "inferlab" and name is not None:
            names.add(f"{module}.{name}")  # from inferlab.model import specs
    return names


def test_every_third_party_import_is_declared(build):
    wheel, sources = build
    package = sources / "inferlab"
    modules = {p.relative_to(sources).with_suffix("").as_posix().replace("/", "."): p
               for p in package.rglob("*.py")}
    providers = importlib.metadata.packages_distributions()
    requires = _requires(wheel)
    core = _extra_closure(requires, None)
    undeclared = {}
    for name in modules:
        seen, pending, needed = set(), [name], set()
        while pending:  # the module and the inferlab modules it imports, transitively
            current = pending.pop()
            seen.add(current)
            for imported in _imported(modules[current]):
                top = imported.split(".")[0]
                if imported in modules:
                    pending.extend([imported] if imported not in seen else [])
                elif top not in sys.stdlib_module_names and top not in ("inferlab", "__future__"):
                    assert top in providers, f"{current} imports {top}, which nothing provides"
                    needed.update(canonicalize_name(d) for d in providers[top])
        local = name.removeprefix("inferlab.")
        # A module's own extra, else that of the package holding it (pages.explorers.live).
        parts = local.split(".")
        extra = next((EXTRA_OF_MODULE[".".join(parts[:n])] for n in range(len(parts), 0, -1)
                      if ".".join(parts[:n]) in EXTRA_OF_MODULE), None)
        allowed = core | (_extra_closure(requires, extra) if extra else set())
        if needed - allowed:
            undeclared[name] = sorted(needed - allowed)
    assert undeclared == {}
    assert {"numpy", "pandas", "matplotlib", "ipywidgets", "tiktoken"} <= core
