"""The package's imports form no circle (issue 32): each module can be read, and
changed, knowing only the modules below it.

Every import inside ``inferlab/`` counts, at the top of a module or inside a function,
since a deferred import is still a dependency. ``from inferlab.x import name`` is an
arrow to ``inferlab.x``; ``from inferlab import y`` is an arrow to the module ``y`` when
there is one, and to the package itself otherwise.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import ROOT, import_statements

PACKAGE = ROOT / "inferlab"


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    where = ROOT / Path(*name.split("."))
    return where.with_suffix(".py").is_file() or (where / "__init__.py").is_file()


def arrows(path: Path) -> set[str]:
    """The ``inferlab`` modules ``path`` imports, anywhere in it."""
    found = set()
    for module, name in import_statements(path):
        if module.split(".")[0] != "inferlab":
            continue
        child = f"{module}.{name}"
        found.add(child if name is not None and is_module(child) else module)
    return found


def import_graph() -> dict[str, set[str]]:
    graph = {module_name(path): arrows(path) for path in PACKAGE.rglob("*.py")}
    return {name: {target for target in targets if target in graph and target != name}
            for name, targets in graph.items()}


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    """One circle of ``graph``, as the modules along it, or ``None``."""
    state: dict[str, int] = {}
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return path[path.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        state[node] = 2
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_circle_finder_finds_a_circle_and_only_a_circle():
    assert circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_the_graph_sees_deferred_imports():
    graph = import_graph()
    # The package imports its views only when an explorer is first shown.
    assert "inferlab.pages.explorers.live" in graph["inferlab.pages.explorers"]
    assert "inferlab.pages.explorers.base" in graph["inferlab.pages.explorers.site"]


def test_no_module_imports_itself_through_others():
    found = circle(import_graph())
    assert found is None, "an import circle: " + " -> ".join(found)


#: The package's layers, lowest first (inferlab/__init__.py): a module imports only from
#: layers before its own, or from its own folder. Two folders of one layer (the model and
#: the tokens; the modelled engine and the measured one) know nothing of each other. The
#: modules at the top of the package ("edge") are the questions a reader asks.
LAYERS = (("inferlab",), ("common",), ("benchmark",), ("model", "tokens"), ("serving", "lab"),
          ("edge",), ("pages",))
FOLDERS = {name for layer in LAYERS for name in layer}


def room(module: str) -> str:
    """The folder of ``module``: its subpackage, ``edge`` for a top-level module, or
    ``inferlab`` for the package itself."""
    parts = module.split(".")
    if len(parts) == 1:
        return "inferlab"
    return parts[1] if parts[1] in FOLDERS else "edge"


def layer(module: str) -> int:
    return next(index for index, names in enumerate(LAYERS) if room(module) in names)


def upward_arrows(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{source} -> {target}" for source, targets in graph.items()
                  for target in targets
                  if room(source) != room(target) and layer(target) >= layer(source))


def test_the_layer_check_sees_an_arrow_up_and_one_across():
    graph = {"inferlab.model.steptime": {"inferlab.serving.calibration",
                                         "inferlab.tokens.tokenizers",
                                         "inferlab.common.checks", "inferlab.model.specs"}}
    assert upward_arrows(graph) == ["inferlab.model.steptime -> inferlab.serving.calibration",
                                    "inferlab.model.steptime -> inferlab.tokens.tokenizers"]


def test_every_module_sits_in_a_layer_and_imports_only_the_layers_below():
    graph = import_graph()
    assert {room(module) for module in graph} == FOLDERS
    assert upward_arrows(graph) == []


def test_the_explorers_load_no_plotting_library():
    # Their colours come from inferlab.pages.colors; matplotlib is the figures' business.
    code = ("import sys; from inferlab.pages.explorers import registered_explorers;"
            " registered_explorers(); print('matplotlib' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


def test_no_module_draws_its_own_progress_bar():
    # The bar is the notebook's business: a loop that may be long takes it as an argument
    # (``progress=``), so the model and the lab never import the display.
    importers = sorted(name for name, targets in import_graph().items()
                       if "inferlab.pages.progress" in targets)
    assert importers == [], importers
