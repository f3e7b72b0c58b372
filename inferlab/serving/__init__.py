"""A serving engine, modelled: the batching configuration (``scheduler``) and the engines that
run it (``engines``), the step-by-step simulator (``simulator``), the stacks fitted on audited
results (``calibration``), speculative decoding (``speculative``), fixed compiled shapes
(``fixed_shapes``), and MLPerf's scenarios run against the model (``loadgen``) or through the
real LoadGen (``real_loadgen``).
"""

from inferlab import submodule


def __getattr__(name: str):
    return submodule(__name__, name)
