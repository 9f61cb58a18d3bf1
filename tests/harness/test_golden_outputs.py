"""The golden-output guard itself (tests/golden_outputs.py): it reports every difference, runs the reference
commit's code, caches its fingerprints, and falls back to tests/golden/ only where that is meaningful."""

import copy
import json
import os
import subprocess
import sys

import pytest

import golden_outputs
from tiny_run import REPO_ROOT, cannot_run, run_script

DIGEST = "float32[2, 3]:" + "a" * 64
OTHER_DIGEST = "float32[2, 3]:" + "b" * 64
FINGERPRINT = {
    "evaluations.csv": "global_step,task,return_mean\n0,0,1.5\n128,0,2.5\n",
    "plasticity.csv": "global_step,task,network,rank\n0,0,critic,64\n",
    "checkpoint": {"actor": {"0.weight": DIGEST, "0.bias": DIGEST}, "env_states": [{"qpos": DIGEST}], "format": 3},
}
# the seven scripts of the reference commit 363535a (a move of REFERENCE_COMMIT may change this list)
REFERENCE_SCRIPTS = ["cb_continuous.py", "eppo_continuous.py", "pfo_continuous.py", "ppo_continuous.py",
                     "ppo_drnd_continuous.py", "ppo_redo_continuous.py", "ppo_snp_continuous.py"]


@pytest.fixture
def reference():
    """The tests that read REFERENCE_COMMIT: skipped without it (a shallow clone), failed in CI (cannot_run)."""
    if not golden_outputs.reference_available():
        cannot_run("REFERENCE_COMMIT is not in this clone's history (git fetch --unshallow)")


def changed(edit) -> dict:
    """Seeds 1 and 2 of FINGERPRINT, seed 2 edited by ``edit``."""
    seed = copy.deepcopy(FINGERPRINT)
    edit(seed)
    return {"1": FINGERPRINT, "2": seed}


def test_equal_fingerprints_have_no_differences():
    assert golden_outputs.differences({"1": FINGERPRINT}, {"1": copy.deepcopy(FINGERPRINT)}) == []


def test_one_changed_tensor_digest_is_reported_with_its_path():
    actual = changed(lambda seed: seed["checkpoint"]["actor"].update({"0.bias": OTHER_DIGEST}))
    assert golden_outputs.differences(actual, {"1": FINGERPRINT, "2": FINGERPRINT}) == [
        "seed 2: checkpoint['actor']['0.bias'] changed"]
    actual = changed(lambda seed: seed["checkpoint"]["env_states"][0].update({"qpos": OTHER_DIGEST}))
    assert golden_outputs.differences(actual, {"1": FINGERPRINT, "2": FINGERPRINT}) == [
        "seed 2: checkpoint['env_states'][0]['qpos'] changed"]


def test_one_changed_csv_row_is_reported_with_both_values():
    actual = changed(lambda seed: seed.update({"evaluations.csv": seed["evaluations.csv"].replace("2.5", "2.5000001")}))
    assert golden_outputs.differences(actual, {"1": FINGERPRINT, "2": FINGERPRINT}) == [
        "seed 2: evaluations.csv line 3 is '128,0,2.5000001', expected '128,0,2.5'"]
    actual = changed(lambda seed: seed.update({"plasticity.csv": seed["plasticity.csv"] + "0,0,actor,64\n"}))
    assert golden_outputs.differences(actual, {"1": FINGERPRINT, "2": FINGERPRINT}) == [
        "seed 2: plasticity.csv line 3 is '0,0,actor,64', expected None"]


def test_missing_new_and_plain_checkpoint_entries_and_other_seeds_are_reported():
    def edit(seed):
        del seed["checkpoint"]["actor"]
        seed["checkpoint"]["critic"] = {"0.weight": DIGEST}
        seed["checkpoint"]["format"] = 4

    assert golden_outputs.differences(changed(edit), {"1": FINGERPRINT, "2": FINGERPRINT}) == [
        "seed 2: checkpoint entry 'actor' is missing", "seed 2: checkpoint entry 'critic' is new",
        "seed 2: checkpoint['format'] is 4, expected 3"]
    assert golden_outputs.differences({"1": FINGERPRINT}, {"1": FINGERPRINT, "2": FINGERPRINT}) == [
        "seeds ['1'], expected ['1', '2']"]


def test_an_entry_newer_than_the_reference_is_compared_once_the_reference_has_it():
    """last_eval_return is not in REFERENCE_COMMIT's checkpoints: not "new" there, but a change of it or its absence
    is reported against a reference that has it."""
    def add(seed, digest=DIGEST):
        seed["checkpoint"]["last_eval_return"] = {"actor": {"log_std": digest}}

    assert golden_outputs.differences(changed(add), {"1": FINGERPRINT, "2": FINGERPRINT}) == []
    assert golden_outputs.differences(changed(lambda seed: add(seed, OTHER_DIGEST)), changed(add)) == [
        "seed 2: checkpoint['last_eval_return']['actor']['log_std'] changed"]
    assert golden_outputs.differences({"1": FINGERPRINT, "2": FINGERPRINT}, changed(add)) == [
        "seed 2: checkpoint entry 'last_eval_return' is missing"]


def test_an_entry_dropped_since_the_reference_is_not_missing_but_any_other_is():
    def add(seed, key):
        seed["checkpoint"][key] = {"actor": {"log_std": DIGEST}}

    reference = changed(lambda seed: add(seed, "initial_parameters"))
    assert golden_outputs.differences({"1": FINGERPRINT, "2": FINGERPRINT}, reference) == []
    assert golden_outputs.differences({"1": FINGERPRINT, "2": FINGERPRINT}, changed(lambda seed: add(seed, "rng"))) == [
        "seed 2: checkpoint entry 'rng' is missing"]


def test_run_script_runs_another_copy_from_its_own_root(tmp_path):
    """The reference run imports the reference copy's modules: run_script(repo_root=...) runs that copy's script
    with that copy as the working directory and first on the import path."""
    (tmp_path / "probe_continuous.py").write_text(
        "import os, helper\nprint(os.path.abspath(__file__), os.getcwd(), helper.WHERE)\n")
    (tmp_path / "helper.py").write_text("WHERE = 'copy'\n")
    result = run_script("probe_continuous.py", tmp_path / "run", tiny=False, repo_root=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [str(tmp_path / "probe_continuous.py"), str(tmp_path), "copy"]


def test_reference_is_unavailable_outside_its_history(tmp_path):
    assert not golden_outputs.reference_available(tmp_path)  # no repository at all
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert not golden_outputs.reference_available(tmp_path)  # a repository without the commit


def record(golden_dir, machine, **extra) -> dict:
    seeds = {"1": FINGERPRINT}
    with open(os.path.join(golden_dir, "ppo_continuous_k1.json"), "w") as f:
        json.dump({"machine": machine, "seeds": seeds, **extra}, f)
    return seeds


def test_without_the_reference_the_recorded_outputs_are_used_on_a_like_machine_only(tmp_path, monkeypatch):
    monkeypatch.setattr(golden_outputs, "GOLDEN_DIR", str(tmp_path))
    monkeypatch.setattr(golden_outputs, "reference_available", lambda repo_root=REPO_ROOT, commit=None: False)
    seeds = record(tmp_path, golden_outputs.machine())
    # what the work tree's fingerprint is compared with: the recorded one without the uncompared entries (format)
    expected = golden_outputs.without(seeds, golden_outputs.UNCOMPARED_KEYS)
    assert golden_outputs.expected_fingerprints("ppo_continuous.py", 1) == expected
    assert "format" in seeds["1"]["checkpoint"] and "format" not in expected["1"]["checkpoint"]
    record(tmp_path, {**golden_outputs.machine(), "cpu_capability": "SOMETHING ELSE"})
    with pytest.raises(golden_outputs.GoldenUnavailable, match="git fetch --unshallow"):
        golden_outputs.expected_fingerprints("ppo_continuous.py", 1)
    record(tmp_path, golden_outputs.machine(), commit="0" * 40)  # recorded for another reference
    with pytest.raises(golden_outputs.GoldenUnavailable, match="re-record"):
        golden_outputs.expected_fingerprints("ppo_continuous.py", 1)


def test_the_reference_scripts_are_those_of_the_reference_commit(reference):
    assert golden_outputs.reference_scripts() == REFERENCE_SCRIPTS


def test_the_reference_runs_once_from_an_exported_copy_then_comes_from_the_cache(reference, tmp_path, monkeypatch):
    monkeypatch.setattr(golden_outputs, "CACHE_DIR", str(tmp_path / "cache"))
    runs = []

    def fake_run(script, num_seeds, work_dir, repo_root):
        """Stands in for the tiny run: checks that it is given the reference commit's own script."""
        with open(os.path.join(repo_root, script), "rb") as f:
            exported = f.read()
        committed = subprocess.run(["git", "-C", REPO_ROOT, "show", f"{golden_outputs.REFERENCE_COMMIT}:{script}"],
                                   capture_output=True, check=True).stdout
        assert exported == committed and os.path.abspath(repo_root) != os.path.abspath(REPO_ROOT)
        runs.append(script)
        return {"1": FINGERPRINT}

    monkeypatch.setattr(golden_outputs, "run_fingerprints", fake_run)
    assert golden_outputs.reference_fingerprints("pfo_continuous.py", 1) == {"1": FINGERPRINT}
    assert golden_outputs.reference_fingerprints("pfo_continuous.py", 1) == {"1": FINGERPRINT}
    assert runs == ["pfo_continuous.py"]  # the second came from the cache
    path = golden_outputs.cache_path("pfo_continuous.py", 1)
    assert path.startswith(str(tmp_path / "cache" / golden_outputs.REFERENCE_COMMIT))
    assert os.listdir(os.path.dirname(path)) == ["pfo_continuous_k1.json"]  # no temporary file left behind
    with open(path) as f:
        assert json.load(f)["environment"] == golden_outputs.environment()


def test_the_recording_cli_refuses_without_the_reference(tmp_path):
    """python tests/golden_outputs.py records the reference commit's outputs, so it needs that commit: a copy of
    the harness in a repository without it exits 1 naming the fix."""
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "tests").mkdir()
    for name in ("golden_outputs.py", "tiny_run.py"):  # tiny_run's REPO_ROOT: the parent of tests/, tmp_path
        with open(os.path.join(REPO_ROOT, "tests", name)) as f:
            (tmp_path / "tests" / name).write_text(f.read())
    result = subprocess.run([sys.executable, str(tmp_path / "tests" / "golden_outputs.py")], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 1 and "git fetch --unshallow" in result.stderr, result.stderr
