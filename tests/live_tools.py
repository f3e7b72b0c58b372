"""Virtual environments for the real benchmark tools that tests/test_live_clients.py runs.

AIPerf and guidellm pin packages the book also uses at other versions (huggingface-hub,
transformers, rich, pandas), so each tool lives in a virtual environment of its own,
installed from a pinned list in ``tests/tools/<tool>.txt`` with ``pip install --no-deps``:
only what the tool imports on the lab-server path, not the gigabytes its plain install
brings (``data/traces/README.md`` has the figures).

The environments sit outside the repository, in ``~/.cache/inferlab/tools/`` (under
``$XDG_CACHE_HOME`` if set; ``INFERLAB_TOOLS_CACHE`` names another folder), each in a
folder named for the tool, its version and a hash of its pinned list, so a developer
installs each once and a changed list installs afresh. An environment counts only once
its install finished (a marker file written last); a lock file lets two test sessions
share the cache without installing over each other.

``python tests/live_tools.py aiperf guidellm`` installs them (conftest.py starts this in
the background when the collected tests need a tool) and prints each folder.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: CI sets this (to 1) so that a tool that cannot be installed fails its tests instead of
#: skipping them; elsewhere a skip says why.
REQUIRE_ENV = "INFERLAB_REQUIRE_LIVE_TOOLS"

#: An install that has not finished by then is taken as hung (a cold one takes ~1 min).
INSTALL_TIMEOUT_S = 900

# Wheels only: nothing may need a compiler, and an install behaves the same everywhere.
PIP_OPTIONS = ["--only-binary", ":all:", "--disable-pip-version-check", "--no-input",
               "--progress-bar", "off"]


@dataclass(frozen=True)
class Tool:
    """One tool's pinned install: ``requirements`` (a file of exact pins) and, for a package
    whose right build is not on PyPI, ``alternatives``: pip arguments tried in order until
    one succeeds (the first that pip can find wins)."""

    name: str
    requirements: Path
    alternatives: tuple[tuple[str, ...], ...] = ()

    @property
    def pins(self) -> list[str]:
        lines = self.requirements.read_text(encoding="utf-8").splitlines()
        return [line.strip() for line in lines if line.strip() and not line.startswith("#")]

    @property
    def version(self) -> str:
        prefix = f"{self.name}=="
        return next(pin[len(prefix):] for pin in self.pins if pin.startswith(prefix))

    @property
    def home(self) -> Path:
        # The interpreter the environment is made with counts too: its python links to it.
        key = [*self.pins, *map(" ".join, self.alternatives), sys.base_prefix, sys.version]
        digest = hashlib.sha256("\n".join(key).encode()).hexdigest()[:10]
        return cache_root() / f"{self.name}-{self.version}-{digest}"

    @property
    def executable(self) -> Path:
        return self.home / "bin" / self.name

    @property
    def log(self) -> Path:
        return self.home.with_name(self.home.name + ".log")

    def ready(self) -> bool:
        # A finished environment whose interpreter still exists (it links to the one it
        # was made with, which an upgrade may have removed).
        return ((self.home / ".complete").is_file()
                and (self.home / "bin" / "python").resolve().is_file())


TOOLS = {
    "aiperf": Tool("aiperf", HERE / "tools" / "aiperf.txt"),
    # PyTorch's CPU build where pip can find it (it is not on PyPI); else PyPI's CUDA
    # build with the NVIDIA libraries it needs to import, the plain install's gigabytes.
    "guidellm": Tool("guidellm", HERE / "tools" / "guidellm.txt", alternatives=(
        ("--no-deps", "torch==2.13.0+cpu"),
        ("torch==2.13.0",),
    )),
}


def cache_root() -> Path:
    if os.environ.get("INFERLAB_TOOLS_CACHE"):
        return Path(os.environ["INFERLAB_TOOLS_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "inferlab" / "tools"


def install(tool: Tool, out=sys.stdout) -> Path:
    """Make ``tool``'s environment unless a finished one is there; return its folder.

    Raises ``subprocess.CalledProcessError`` if pip fails (its output went to ``out``)."""
    tool.home.parent.mkdir(parents=True, exist_ok=True)
    with open(tool.home.with_name(tool.home.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another session may be installing the same
        if tool.ready():
            print(f"{tool.name} {tool.version}: reusing {tool.home}", file=out, flush=True)
            return tool.home
        start = time.perf_counter()
        shutil.rmtree(tool.home, ignore_errors=True)  # an install that was cut short
        run = _runner(out)
        run([sys.executable, "-m", "venv", str(tool.home)])
        pip = [str(tool.home / "bin" / "python"), "-m", "pip", "install", *PIP_OPTIONS]
        run([*pip, "--no-deps", "-r", str(tool.requirements)])
        for number, alternative in enumerate(tool.alternatives, 1):
            try:  # the pins hold for whatever an alternative brings in
                run([*pip, "-c", str(tool.requirements), *alternative])
                break
            except subprocess.CalledProcessError:
                if number == len(tool.alternatives):
                    raise
        seconds = time.perf_counter() - start
        (tool.home / ".complete").write_text(f"installed in {seconds:.0f} s\n")
        print(f"{tool.name} {tool.version}: installed in {seconds:.0f} s, "
              f"{_megabytes(tool.home):.0f} MB, at {tool.home}", file=out, flush=True)
        return tool.home


def _runner(out):
    def run(command: list[str]) -> None:
        print("$", " ".join(command), file=out, flush=True)
        subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, check=True)
    return run


def _megabytes(folder: Path) -> float:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file()) / 1e6


if __name__ == "__main__":
    names = sys.argv[1:] or sorted(TOOLS)
    unknown = [name for name in names if name not in TOOLS]
    if unknown:
        sys.exit(f"unknown tool {unknown[0]!r}; known: {', '.join(sorted(TOOLS))}")
    for name in names:
        try:
            install(TOOLS[name])
        except subprocess.CalledProcessError as error:  # pip has said why, above
            sys.exit(f"{name}: {Path(error.cmd[0]).name} {' '.join(error.cmd[1:3])} exited "
                     f"with {error.returncode}")
