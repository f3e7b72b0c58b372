"""What every layer uses: argument checks that name the argument and its range (``checks``), the
sourced tables of ``data/`` (``data``, checked against ``schemas``), the bisection the
searches share (``bisection``), and the store of results remembered for the code and
tables that made them (``memo``).
"""

from inferlab import submodule


def __getattr__(name: str):
    return submodule(__name__, name)
