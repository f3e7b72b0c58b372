"""A serving engine, measured on the reader's own machine: the NumPy engine's sizes and
what each costs (``engine_sizes``), the engine itself (``engine``, ``engine_loop``),
timing loops and the machine's own bandwidth (``measure``, ``machine``), the request
timings (``timing``), the OpenAI-compatible server (``server``, ``openai_api``), the
load client (``loadclient``), each tool's metrics of a run (``endpoint_metrics``) and
its files read back (``tool_files``).
"""

from inferlab import submodule


def __getattr__(name: str):
    return submodule(__name__, name)
