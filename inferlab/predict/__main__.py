"""``python -m inferlab.predict``: the command line (:mod:`inferlab.predict.cli`)."""

import sys

from inferlab.predict.cli import main

sys.exit(main())
