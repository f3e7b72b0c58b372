"""inferlab: the helper package of the course on LLM inference speed.

Its folders are its layers, each importing only the ones above it in this list:

- ``common``: argument checks, the data tables, bisection, remembered results.
- ``benchmark``: what a system is asked to do: MLPerf's definitions and early stopping,
  arrival processes, workloads, and the traces of real benchmark tools.
- ``model`` and ``tokens``: how long one step of a model takes on a chip (specs,
  capacity, feasibility, roofline, parallelism, the step time); and how text becomes
  tokens (the tokenizers and their counts).
- ``serving`` and ``lab``: a serving engine modelled (scheduler, simulator, fitted
  stacks, LoadGen's scenarios) and one measured on the reader's own machine (the NumPy
  engine, the server, the load client, endpoint metrics).
- ``predict``, ``plan`` (with ``sizing``, its search per chip), ``choosing`` (with
  ``leaderboard``) and ``accuracy``: the questions a reader asks of the
  model, at the top of the package: what will this system do, what should I deploy, and
  how well does the model answer on results it never saw.
- ``pages``: the book's presentation: figures, charts, glue, progress bars, the
  explorers.

Importing it makes tiktoken work with no network: the four OpenAI encodings
ship with the package (see ``scripts/build_tiktoken_cache.py``) and tiktoken is
pointed at them through ``TIKTOKEN_CACHE_DIR``, unless you set that yourself.
"""

import os
from pathlib import Path

TIKTOKEN_CACHE_DIR = Path(__file__).resolve().parent / "tokens" / "tiktoken_cache"

# setdefault: a reader who keeps their own tiktoken cache keeps using it.
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(TIKTOKEN_CACHE_DIR))

__version__ = "0.1.0"


def callable_module(name: str, function) -> None:
    """Make the module called ``name`` callable as ``function``, so that ``import
    inferlab; inferlab.plan(...)`` runs the planner while ``python -m inferlab.plan`` and
    ``from inferlab.plan import plan`` keep working. A module's class may be swapped for
    a subclass of ``ModuleType`` (Python 3.5+)."""
    import sys
    import types

    class CallableModule(types.ModuleType):
        __doc__ = f"The module {name}, callable as {function.__name__}."

        def __call__(self, *args, **kwargs):
            return function(*args, **kwargs)

    # The class belongs to the module it makes callable, so that tools resolving the
    # module's names (Sphinx's cross-references) look there, not here.
    CallableModule.__module__ = name
    sys.modules[name].__class__ = CallableModule


def submodule(package: str, name: str):
    """The submodule ``name`` of ``package``, imported on first use, so that ``import
    inferlab`` then ``inferlab.predict(...)`` (the predictor, callable) or
    ``inferlab.benchmark.workload.Workload`` work without importing every module at
    start-up. Each subpackage's ``__getattr__`` calls it."""
    import importlib
    import importlib.util

    if importlib.util.find_spec(f"{package}.{name}") is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    return importlib.import_module(f"{package}.{name}")


def __getattr__(name: str):
    return submodule(__name__, name)
