"""What every layer uses: argument checks that name the argument and its range (``checks``), the
sourced tables of ``data/`` (``data``, checked against ``schemas``), and the bisection the
searches share (``bisection``).
"""

from inferlab import submodule


def __getattr__(name: str):
    return submodule(__name__, name)
