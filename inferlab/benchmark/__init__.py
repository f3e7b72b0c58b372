"""What a system is asked to do: MLPerf's scenarios, bounds and sample counts (``mlperf``),
LoadGen's early stopping (``early_stopping``) and its verdict on a run (``verdict``), arrival
processes and request lengths (``traffic``), the one ``Workload`` idea (``workload``), and the
exports of real benchmark tools (``traces``). It knows nothing of chips or models.
"""

from inferlab import submodule


def __getattr__(name: str):
    return submodule(__name__, name)
