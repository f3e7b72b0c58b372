"""constraints.txt pins every requirement exactly, to a version the requirement allows.

CI installs ``requirements.txt`` under ``constraints.txt`` (``.ci/run``), so a reader
who does the same gets the versions the site was built with. These tests keep the
three files in step: a requirement added without re-freezing, or a pin the
requirement no longer allows, fails here rather than as a confusing pip error.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]


def pins() -> dict[str, str]:
    found = {}
    for number, line in enumerate((ROOT / "constraints.txt").read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, sep, version = line.partition("==")
        assert sep and version, f"constraints.txt line {number}: {line!r} is not name==version"
        found[canonicalize_name(name)] = version
    return found


def requirements_txt() -> list[Requirement]:
    lines = (ROOT / "requirements.txt").read_text().splitlines()
    return [Requirement(line.split("#")[0].strip()) for line in lines
            if line.strip() and not line.lstrip().startswith(("#", "-e"))]


def pyproject_requirements() -> list[Requirement]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    every = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        every += extra
    # The extras that name the package itself ("inferlab[lab]") are the package's own.
    return [req for req in map(Requirement, every) if canonicalize_name(req.name) != "inferlab"]


@pytest.mark.parametrize("requirement", requirements_txt() + pyproject_requirements(), ids=str)
def test_every_requirement_is_pinned_to_a_version_it_allows(requirement):
    pinned = pins().get(canonicalize_name(requirement.name))
    assert pinned is not None, (f"{requirement.name} has no pin in constraints.txt; run "
                                "python scripts/freeze_constraints.py")
    assert requirement.specifier.contains(pinned, prereleases=True), (
        f"constraints.txt pins {requirement.name}=={pinned}, which {requirement} excludes")


def test_ci_and_the_readme_install_under_the_constraints():
    assert "-c constraints.txt" in (ROOT / ".ci" / "run").read_text()
    assert "pip install -r requirements.txt -c constraints.txt" in (ROOT / "README.md").read_text()
