"""scripts/sync_plumbing.py on a directory of small stand-in scripts: it discovers every *_continuous.py."""

import os
import subprocess
import sys

from tiny_run import REPO_ROOT

SYNC = os.path.join(REPO_ROOT, "scripts", "sync_plumbing.py")
MARKER = "# ==== The plumbing: from this line to the end, every *_continuous.py is byte-identical\n"
PLUMBING = MARKER + "def plumbing():\n    return 1\n"
SETTINGS = "    # ---- The run's settings, the same in every script (scripts/sync_plumbing.py copies them) ----\n"


def args_class(own: str, seed: int = 1) -> str:
    """An Args class: the method's own field ``own``, then the run's settings (one field, ``seed``)."""
    return f"class Args:\n    {own}: int = 0\n\n{SETTINGS}    seed: int = {seed}\n    \"\"\"the seed\"\"\"\n\n\n"


def sync(root, *flags):
    return subprocess.run([sys.executable, SYNC, "--root", str(root), *flags], capture_output=True, text=True,
                          timeout=60)


def make_scripts(root, **scripts):
    """The template (ppo_continuous.py) with PLUMBING, and ``scripts`` (name without .py -> text)."""
    (root / "ppo_continuous.py").write_text(args_class("lr") + "def method():\n    return 'ppo'\n\n" + PLUMBING)
    for name, text in scripts.items():
        (root / f"{name}.py").write_text(text)


def test_check_reports_a_new_script_whose_block_differs_and_sync_copies_the_template_into_it(tmp_path):
    new_method = "def method():\n    return 'x'\n\n"
    make_scripts(tmp_path, a_continuous=args_class("kappa") + new_method + PLUMBING,
                 x_continuous=args_class("xi") + new_method + PLUMBING.replace("1", "2"),
                 y_continuous=args_class("rho", seed=7) + new_method + PLUMBING,  # only its run settings differ
                 notes=PLUMBING.replace("1", "3"))  # not a *_continuous.py: not a script
    (tmp_path / "dir_continuous.py").mkdir()  # not a file: not a script
    checked = sync(tmp_path, "--check")
    assert checked.returncode == 1
    assert checked.stderr == "the shared blocks of x_continuous.py, y_continuous.py differ from ppo_continuous.py's\n"
    synced = sync(tmp_path)
    assert synced.returncode == 0
    assert synced.stdout == ("updated: x_continuous.py, y_continuous.py (of a_continuous.py, x_continuous.py, "
                             "y_continuous.py)\n")
    # the method (its own Args fields included) kept, the blocks copied
    assert (tmp_path / "x_continuous.py").read_text() == args_class("xi") + new_method + PLUMBING
    assert (tmp_path / "y_continuous.py").read_text() == args_class("rho") + new_method + PLUMBING
    assert (tmp_path / "notes.py").read_text() == PLUMBING.replace("1", "3")
    assert sync(tmp_path, "--check").stdout == "differs: none (of a_continuous.py, x_continuous.py, y_continuous.py)\n"


def test_a_script_without_the_marker_fails_before_anything_is_written(tmp_path):
    make_scripts(tmp_path,
                 a_continuous=args_class("a") + "def method():\n    return 'a'\n\n" + PLUMBING.replace("1", "2"),
                 b_continuous="def method():\n    return 'b'\n",  # still being written: no plumbing yet
                 c_continuous="class Args:\n    c: int = 0\n\n\n" + PLUMBING)  # nor the run's settings
    result = sync(tmp_path)
    assert result.returncode == 2 and result.stderr.startswith("error: b_continuous.py must contain the marker line")
    assert "Traceback" not in result.stderr
    assert (tmp_path / "a_continuous.py").read_text().endswith("return 2\n")  # not synced either
    os.remove(tmp_path / "b_continuous.py")
    result = sync(tmp_path)
    assert result.returncode == 2
    assert 'c_continuous.py must contain the line "# ---- The run\'s settings' in result.stderr
    assert (tmp_path / "a_continuous.py").read_text().endswith("return 2\n")
