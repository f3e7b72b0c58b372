"""How long one step of a model takes on a chip: the chips and models (``specs``), memory
(``capacity``), what fits (``feasibility``), the roofline and a model's FLOPs and bytes
(``roofline``), tensor, pipeline and expert parallelism (``parallel``), and the five-term
step time of one replica (``steptime``).
"""

from inferlab import submodule


def __getattr__(name: str):
    return submodule(__name__, name)
