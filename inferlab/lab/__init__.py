"""A serving engine, measured on the reader's own machine: the NumPy engine (``engine``,
``engine_loop``), timing loops and the machine's own bandwidth (``measure``, ``machine``),
the request timings (``timing``), the OpenAI-compatible server (``server``,
``openai_api``), the load client (``loadclient``) and the metrics of a run
(``endpoint_metrics``).
"""

from inferlab import submodule


def __getattr__(name: str):
    return submodule(__name__, name)
