"""The book's tables, installed with the package as ``inferlab.tables``.

This folder is the repository's ``data/``; ``pyproject.toml`` maps it to the package
``inferlab.tables`` so that every install of ``inferlab`` carries it (an editable
install reads this folder in place). ``inferlab.common.data`` finds it through
``importlib.resources``. There is no code here.
"""
