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


def __getattr__(name: str):
    """Import a submodule on first use, so that ``import inferlab`` then
    ``inferlab.predict(...)`` (the predictor, callable) or ``inferlab.workload.Workload``
    work without importing every module at start-up."""
    import importlib
    import importlib.util

    if importlib.util.find_spec(f"{__name__}.{name}") is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(f"{__name__}.{name}")
