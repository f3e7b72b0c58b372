"""A serving engine, modelled: the batching configuration (``scheduler``) and the engines that
run it (``engines``; a pipeline's lanes in lock step, ``pipeline``), the step-by-step
simulator (``simulator``), the stacks fitted on audited results (``calibration``),
speculative decoding (``speculative``), fixed compiled shapes (``fixed_shapes``), MLPerf's
scenarios run against the model (``loadgen``) or through the real LoadGen
(``real_loadgen``), and the book's running example server (``example``).
"""

from inferlab import submodule


def __getattr__(name: str):
    return submodule(__name__, name)
