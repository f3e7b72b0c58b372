"""inferlab: the helper package of the course on LLM inference speed.

Importing it makes tiktoken work with no network: the four OpenAI encodings
ship with the package (see ``scripts/build_tiktoken_cache.py``) and tiktoken is
pointed at them through ``TIKTOKEN_CACHE_DIR``, unless you set that yourself.
"""

import os
from pathlib import Path

TIKTOKEN_CACHE_DIR = Path(__file__).resolve().parent / "tiktoken_cache"

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


def __getattr__(name: str):
    """Import a submodule on first use, so that ``import inferlab`` then
    ``inferlab.predict(...)`` (the predictor, callable) or ``inferlab.workload.Workload``
    work without importing every module at start-up."""
    import importlib
    import importlib.util

    if importlib.util.find_spec(f"{__name__}.{name}") is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(f"{__name__}.{name}")
