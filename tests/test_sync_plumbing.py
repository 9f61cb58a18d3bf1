"""scripts/sync_plumbing.py on a directory of small stand-in scripts: it discovers every *_continuous.py."""

import os
import subprocess
import sys

from tiny_run import REPO_ROOT

SYNC = os.path.join(REPO_ROOT, "scripts", "sync_plumbing.py")
MARKER = "# ==== The plumbing: from this line to the end, every *_continuous.py is byte-identical\n"
PLUMBING = MARKER + "def plumbing():\n    return 1\n"


def sync(root, *flags):
    return subprocess.run([sys.executable, SYNC, "--root", str(root), *flags], capture_output=True, text=True,
                          timeout=60)


def make_scripts(root, **scripts):
    """The template (ppo_continuous.py) with PLUMBING, and ``scripts`` (name without .py -> text)."""
    (root / "ppo_continuous.py").write_text("def method():\n    return 'ppo'\n\n" + PLUMBING)
    for name, text in scripts.items():
        (root / f"{name}.py").write_text(text)


def test_check_reports_a_new_script_whose_block_differs_and_sync_copies_the_template_into_it(tmp_path):
    new_method = "def method():\n    return 'x'\n\n"
    make_scripts(tmp_path, a_continuous=new_method + PLUMBING, x_continuous=new_method + PLUMBING.replace("1", "2"),
                 notes=PLUMBING.replace("1", "3"))  # not a *_continuous.py: not a script
    (tmp_path / "dir_continuous.py").mkdir()  # not a file: not a script
    checked = sync(tmp_path, "--check")
    assert checked.returncode == 1
    assert checked.stderr == "the plumbing block of x_continuous.py differs from ppo_continuous.py's\n"
    synced = sync(tmp_path)
    assert synced.returncode == 0
    assert synced.stdout == "updated: x_continuous.py (of a_continuous.py, x_continuous.py)\n"
    assert (tmp_path / "x_continuous.py").read_text() == new_method + PLUMBING  # the method kept, the block copied
    assert (tmp_path / "notes.py").read_text() == PLUMBING.replace("1", "3")
    assert sync(tmp_path, "--check").stdout == "differs: none (of a_continuous.py, x_continuous.py)\n"


def test_a_script_without_the_marker_fails_before_anything_is_written(tmp_path):
    make_scripts(tmp_path, a_continuous="def method():\n    return 'a'\n\n" + PLUMBING.replace("1", "2"),
                 b_continuous="def method():\n    return 'b'\n")  # still being written: no plumbing yet
    result = sync(tmp_path)
    assert result.returncode == 2 and result.stderr.startswith("error: b_continuous.py must contain the marker line")
    assert "Traceback" not in result.stderr
    assert (tmp_path / "a_continuous.py").read_text().endswith("return 2\n")  # not synced either
