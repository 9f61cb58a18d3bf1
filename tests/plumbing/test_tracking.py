"""--track (Weights & Biases) with the pinned wandb, offline: start, TensorBoard sync, resume into the same run.

The plumbing is byte-identical in every script (test_all_scripts checks it), so the template stands for all.
No network: WANDB_MODE=offline writes the W&B run into <run_dir>/wandb/offline-run-<time>-<id>/run-<id>.wandb.
"""

import os
import sys

import pytest

from tiny_run import REPO_ROOT, cannot_run, run_script, run_until_checkpoint_then_stop

sys.path.insert(0, REPO_ROOT)
import ppo_continuous  # noqa: E402

SCRIPT = "ppo_continuous.py"


@pytest.fixture(scope="module", autouse=True)
def wandb_installed():
    """requirements.txt pins wandb: without it these tests skip, or fail in CI (cannot_run)."""
    try:
        import wandb  # noqa: F401
    except ImportError:
        cannot_run("wandb is not installed (pip install -r requirements.txt)")


def offline_env(tmp_path) -> dict:
    return {"WANDB_MODE": "offline", "WANDB_SILENT": "true", "WANDB_CONFIG_DIR": str(tmp_path / "wandb_config"),
            "WANDB_CACHE_DIR": str(tmp_path / "wandb_cache"), "WANDB_DATA_DIR": str(tmp_path / "wandb_data")}


def wandb_runs(run_dir) -> list:
    """The offline W&B runs written in a run directory: (directory name, bytes of its run-<id>.wandb)."""
    root = run_dir / "wandb"
    runs = []
    for name in sorted(os.listdir(root)):
        if name.startswith("offline-run-"):
            (record,) = [f for f in os.listdir(root / name) if f.endswith(".wandb")]
            runs.append((name, (root / name / record).read_bytes()))
    return runs


def test_wandb_run_id_is_kept_and_an_unusable_file_is_replaced(tmp_path):
    first = ppo_continuous.wandb_run_id(str(tmp_path))
    assert len(first) == 8 and first.isalnum() and first == first.lower()
    assert ppo_continuous.wandb_run_id(str(tmp_path)) == first  # a resumed run continues the same W&B run
    for unusable in ("", "\n", "bad id!"):  # "" is what the start that died on wandb.util.generate_id left
        (tmp_path / "wandb_id.txt").write_text(unusable)
        replaced = ppo_continuous.wandb_run_id(str(tmp_path))
        assert len(replaced) == 8 and replaced.isalnum()
        assert (tmp_path / "wandb_id.txt").read_text() == replaced
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".tmp")]


def test_track_offline_syncs_tensorboard_and_resumes_into_the_same_wandb_run(tmp_path):
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "wandb_id.txt").write_text("")  # the directory an earlier, failed start left behind
    flags = ["--track", "--checkpoint-frequency", "128", "--steps-per-task", "512"]
    stopped = run_until_checkpoint_then_stop(SCRIPT, run_dir, run_dir / "checkpoint.pt", *flags,
                                             env=offline_env(tmp_path), timeout=180)
    assert stopped.returncode == 75, (stopped.stdout[-2000:], stopped.stderr[-2000:])
    wandb_id = (run_dir / "wandb_id.txt").read_text()
    assert len(wandb_id) == 8

    resumed = run_script(SCRIPT, run_dir, *flags, env=offline_env(tmp_path))
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (run_dir / "summary.json").exists()
    assert (run_dir / "wandb_id.txt").read_text() == wandb_id
    runs = wandb_runs(run_dir)
    # two sessions, both under the run directory's id: W&B appends the second to the first when synced
    assert len(runs) == 2 and all(name.endswith(f"-{wandb_id}") for name, _ in runs)
    for _, record in runs:
        # the TensorBoard scalars reach W&B (sync_tensorboard): CleanRL's losses/ and our eval/ tags
        assert b"losses/value_loss" in record and b"eval/episodic_return" in record
