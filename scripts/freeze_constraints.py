"""Write constraints.txt: the exact version of every package in this environment.

    python scripts/freeze_constraints.py

Run it in the environment CI built (``.ci/run``), after changing requirements.txt,
so that `pip install -r requirements.txt -c constraints.txt` gives a reader the
versions the published site was built and tested with.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HEADER = """\
# The exact versions CI installed and tested the book with, for
#   pip install -r requirements.txt -c constraints.txt
# Written by scripts/freeze_constraints.py (Linux x86-64, the Python CI runs); a reader
# on another platform can leave out "-c constraints.txt" and get the newest versions
# requirements.txt allows.
"""


def main() -> None:
    frozen = subprocess.run([sys.executable, "-m", "pip", "freeze", "--all", "--exclude-editable"],
                            check=True, capture_output=True, text=True).stdout.splitlines()
    # pip itself is upgraded by .ci/run before anything else is installed.
    pins = sorted((line for line in frozen if line and not line.lower().startswith("pip==")),
                  key=str.lower)
    (ROOT / "constraints.txt").write_text(HEADER + "\n".join(pins) + "\n", encoding="utf-8")
    print(f"constraints.txt: {len(pins)} pins")


if __name__ == "__main__":
    main()
