"""A live test whose tool cannot be installed is skipped with the reason, and fails in CI.

tests/test_live_clients.py runs AIPerf and guidellm from environments that
tests/live_tools.py installs from PyPI on first use. Here pip is cut off from every
index, as on a machine without the network, and the install fails at once.
"""

from __future__ import annotations

import shutil

import conftest
import live_tools
import pytest


@pytest.fixture
def offline(tmp_path, monkeypatch):
    monkeypatch.setenv("INFERLAB_TOOLS_CACHE", str(tmp_path / "tools"))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.delenv(live_tools.REQUIRE_ENV, raising=False)
    # This session's own installs (if any) stay out of it.
    monkeypatch.setattr(conftest, "_INSTALLS", {})
    monkeypatch.setattr(conftest, "_TOOL_LOGS", {})
    yield monkeypatch
    for process in conftest._INSTALLS.values():
        process.wait()
    if "logs" in conftest._TOOL_LOGS:
        shutil.rmtree(conftest._TOOL_LOGS["logs"])


@pytest.mark.parametrize(("required", "outcome"), [
    (False, pytest.skip.Exception),  # a reader's machine: the test says why it did not run
    (True, pytest.fail.Exception),   # CI (.ci/run sets the variable): it fails
])
def test_a_tool_that_cannot_be_installed_is_named_with_the_way_to_enable_it(offline, required,
                                                                            outcome):
    if required:
        offline.setenv(live_tools.REQUIRE_ENV, "1")
    with pytest.raises(outcome) as raised:
        conftest.ready_tool("aiperf")
    message = str(raised.value)
    assert "aiperf 0.13.0 could not be installed" in message
    assert "python tests/live_tools.py aiperf" in message
    assert f"{live_tools.REQUIRE_ENV}=1" in message
    # pip's own reason is quoted.
    assert "No matching distribution" in message
    assert not live_tools.TOOLS["aiperf"].ready()
