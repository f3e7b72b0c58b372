"""The book's remembered predictions (inferlab.common.memo): a key that changes with every
input, a stored answer used only where it is exactly what the code computes, and a store
that holds the committed code's answers, every one recomputed by the build in CI."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
from conftest import RESULTS_STORE, ROOT

from inferlab.benchmark.workload import Workload
from inferlab.common import memo
from inferlab.model.steptime import replica
from inferlab.serving.calibration import stack


def _call(name="f", arguments=None, value=2.0, calls=None):
    calls = [] if calls is None else calls

    def compute():
        calls.append(1)
        return value

    answer = memo.remembered(name, compute, {"x": 1.0} if arguments is None else arguments,
                             to_json=lambda v: {"v": v}, from_json=lambda d: d["v"])
    return answer, calls


def test_the_key_spells_out_every_field_even_those_repr_leaves_out():
    fitted = stack("TensorRT-LLM FP8")
    assert memo.key("f", {"s": fitted}) == memo.key("f", {"s": stack("TensorRT-LLM FP8")})
    other = dataclasses.replace(fitted, compute_efficiency=fitted.compute_efficiency + 1e-12)
    assert memo.key("f", {"s": fitted}) != memo.key("f", {"s": other})
    # Workload's arrival times are kept out of its repr, not out of the key.
    pairs = dataclasses.replace(Workload.fixed(100, 10), pairs=((100, 10), (200, 20)))
    early, late = (dataclasses.replace(pairs, arrival_s=(0.0, s)) for s in (0.5, 0.7))
    assert repr(early) == repr(late)
    assert memo.key("f", {"w": early}) != memo.key("f", {"w": late})
    assert memo.key("f", {"a": np.arange(3)}) != memo.key("f", {"a": np.arange(3.0)})
    assert memo.key("f", {"x": 1}) != memo.key("g", {"x": 1})


def test_an_argument_it_cannot_spell_out_is_refused():
    with pytest.raises(TypeError, match="cannot spell out a object"):
        memo.canonical({"x": object()})
    with pytest.raises(TypeError, match="cannot spell out a function"):
        memo.canonical(lambda tokens: tokens)
    # A replica's method is the replica's fields and the method's (fingerprinted) code.
    fast, slow = (replica("Llama 3.1 8B", "NVIDIA H200 SXM", compute_efficiency=e).prefill_s
                  for e in (0.8, 0.4))
    assert memo.canonical(fast) != memo.canonical(slow)


def test_the_store_is_off_unless_the_environment_names_it(monkeypatch, tmp_path):
    monkeypatch.delenv(memo.FOLDER_ENV, raising=False)
    _, calls = _call()
    _, calls = _call(calls=calls)
    assert calls == [1, 1]


def test_use_mode_takes_the_stored_answer_and_computes_only_once(monkeypatch, tmp_path):
    monkeypatch.setenv(memo.FOLDER_ENV, str(tmp_path))
    monkeypatch.delenv(memo.MODE_ENV, raising=False)
    first, calls = _call(value=float("nan"))
    again, calls = _call(value=5.0, calls=calls)  # what compute would say is not asked
    assert calls == [1] and np.isnan(first) and np.isnan(again)
    [record] = [json.loads(p.read_text()) for p in tmp_path.glob("*.json")]
    assert record["function"] == "f" and record["fingerprint"] == memo.fingerprint()


def test_read_mode_takes_a_stored_answer_and_stores_none(monkeypatch, tmp_path):
    monkeypatch.setenv(memo.FOLDER_ENV, str(tmp_path))
    monkeypatch.setenv(memo.MODE_ENV, "read")
    answer, calls = _call(value=3.0)
    assert answer == 3.0 and calls == [1] and list(tmp_path.iterdir()) == []
    monkeypatch.setenv(memo.MODE_ENV, "use")
    _call(value=3.0)  # stored now
    monkeypatch.setenv(memo.MODE_ENV, "read")
    answer, calls = _call(value=4.0)
    assert answer == 3.0 and calls == [], "read mode computed what was stored"


def test_check_mode_recomputes_and_refuses_a_stored_answer_the_code_no_longer_gives(
        monkeypatch, tmp_path):
    monkeypatch.setenv(memo.FOLDER_ENV, str(tmp_path))
    misses = tmp_path / "misses.txt"
    monkeypatch.setenv(memo.MISSES_ENV, str(misses))
    monkeypatch.setenv(memo.MODE_ENV, "check")
    _, calls = _call(value=2.0)
    assert misses.read_text().count("\n") == 1  # nothing stored yet: stored, and listed
    _, calls = _call(value=2.0, calls=calls)
    assert calls == [1, 1] and misses.read_text().count("\n") == 1
    with pytest.raises(memo.ChangedResult, match="differs from the one just computed"):
        _call(value=2.0000000001)


def test_a_stored_file_that_is_no_record_is_computed_again_and_listed(monkeypatch, tmp_path):
    monkeypatch.setenv(memo.FOLDER_ENV, str(tmp_path))
    misses = tmp_path / "misses.txt"
    monkeypatch.setenv(memo.MISSES_ENV, str(misses))
    monkeypatch.setenv(memo.MODE_ENV, "check")
    path = tmp_path / f"{memo.key('f', {'x': 1.0})}.json"
    path.write_text('<<<<<<< HEAD\n{"answer": {"v": 1.0}}\n')  # a merge left unresolved
    answer, calls = _call(value=2.0)
    assert answer == 2.0 and calls == [1] and misses.read_text() == f"{path.name}\n"
    assert json.loads(path.read_text())["answer"] == {"v": 2.0}


def test_an_unknown_mode_is_named(monkeypatch, tmp_path):
    monkeypatch.setenv(memo.FOLDER_ENV, str(tmp_path))
    monkeypatch.setenv(memo.MODE_ENV, "sometimes")
    with pytest.raises(ValueError, match="INFERLAB_RESULTS_MODE: 'sometimes' is not one of"):
        _call()


def test_prune_removes_only_answers_of_other_code(monkeypatch, tmp_path):
    monkeypatch.setenv(memo.FOLDER_ENV, str(tmp_path))
    _call()
    old = {"function": "f", "fingerprint": "0" * 64, "answer": {"v": 1.0}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "notes.json").write_text('{"not": "a stored answer"}')
    assert memo.stale(tmp_path) == [tmp_path / "old.json"]
    assert memo.prune(tmp_path) == 1
    assert sorted(p.name for p in tmp_path.glob("*.json")) == sorted(
        [memo.key("f", {"x": 1.0}) + ".json", "notes.json"])
    with pytest.raises(ValueError, match="folder: .* is not a folder"):
        memo.prune(tmp_path / "missing")


@pytest.mark.build
def test_the_store_holds_the_answers_of_the_committed_code(built_book):
    """The session's build recomputed every prediction of the pages and found each one
    stored (any stored answer that differed has already failed the build)."""
    assert built_book.returncode == 0, built_book.log[-3000:]
    misses = built_book.results_misses
    if misses is None:
        pytest.skip("the book was built outside this session's background build")
    missed = misses.read_text().split() if misses.is_file() else []
    store = ROOT / RESULTS_STORE
    stale = memo.stale(store)
    assert not missed and not stale, (
        f"{len(missed)} of the pages' predictions had no stored answer for this code (the "
        f"build has now stored them in {RESULTS_STORE}/) and {len(stale)} stored answers "
        f"belong to older code. Run `python -m inferlab.common.memo prune {RESULTS_STORE}` "
        "and commit the folder, so that a build from a fresh clone takes them.")


def test_a_predictions_key_covers_the_model_and_not_the_pages_the_lab_or_the_command_line():
    package = ROOT / "inferlab"
    files = {path.relative_to(package).as_posix()
             for path in memo.imported_files("inferlab.predict")}
    # Reached through imports inside functions too (the simulator's engines, the stacks).
    assert {"predict/__init__.py", "model/steptime.py", "serving/engines.py",
            "serving/calibration.py", "common/data.py", "benchmark/workload.py"} <= files
    assert not {f for f in files if f.startswith(("pages/", "lab/"))
                or f in ("predict/cli.py", "predict/__main__.py", "common/memo.py")}


def test_the_prune_command_the_readme_gives_runs(tmp_path):
    old = {"function": "inferlab.predict.predict", "fingerprint": "0" * 64, "answer": {}}
    (tmp_path / "old.json").write_text(json.dumps(old))
    done = subprocess.run([sys.executable, "-m", "inferlab.common.memo", "prune", str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("1 stored answers of older code removed")
    assert not (tmp_path / "old.json").exists()
    assert "python -m inferlab.common.memo prune book/_computed" in " ".join(
        (ROOT / "README.md").read_text(encoding="utf-8").split())
