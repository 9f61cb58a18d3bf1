"""Make the top-level scripts and shared modules importable from tests; `--script X_continuous.py` runs one script's
tests: its own (tests/methods/test_x.py) and the shared ones of tests/plumbing/test_all_scripts.py for it, script-wide
checks included (with ppo_continuous.py, the template, also the plumbing's units, tests/plumbing/test_plumbing.py).

The helpers (tiny_run, reference_math, golden_outputs, fake_algorithm) live here in tests/, the tests in its
subfolders: pytest puts this folder on sys.path (the default prepend import mode, no __init__.py), so a test file
anywhere below imports them by name."""

import os
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

import torch

from tiny_run import method_test_file

# One intra-op thread, as the scripts default to: deterministic, and faster than two threads competing with
# the subprocess runs of the end-to-end tests on a 2-core machine.
torch.set_num_threads(1)

TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = "ppo_continuous.py"
# Test files relative to tests/: the shared end-to-end tests, and the plumbing's units (the template's own copy)
SHARED_TESTS = os.path.join("plumbing", "test_all_scripts.py")
PLUMBING_UNITS = os.path.join("plumbing", "test_plumbing.py")


def pytest_addoption(parser):
    parser.addoption("--script", action="append", default=[], metavar="X_continuous.py",
                     help="run only this algorithm script's tests (repeatable): its own tests/methods/test_x.py (x: "
                          "the name without _continuous.py) and tests/plumbing/test_all_scripts.py's for it, with the "
                          "checks over every script; the template's single-script tests and the plumbing's units "
                          "(tests/plumbing/test_plumbing.py) with ppo_continuous.py only")


def pytest_configure(config):
    config.addinivalue_line("markers", "every_script: a check over every algorithm script at once (--script keeps it)")


def own_test_file(script: str) -> str:
    """x_continuous.py's own test file, relative to tests/ (tiny_run.method_test_file): ppo_continuous.py ->
    methods/test_ppo.py, ppo_redo_continuous.py -> methods/test_ppo_redo.py."""
    return method_test_file(script)


def selected_scripts(config) -> list:
    scripts = [os.path.basename(script) for script in config.getoption("--script")]
    available = sorted(name for name in os.listdir(REPO_ROOT) if name.endswith("_continuous.py"))
    unknown = [script for script in scripts if script not in available]
    if unknown:
        raise pytest.UsageError(f"--script {unknown[0]}: no such algorithm script; the scripts: {', '.join(available)}")
    return scripts


def is_for_script(item, scripts: list) -> bool:
    """Whether ``item`` is one of ``scripts``' tests: in its own test file; in test_plumbing.py when the template is
    selected; or in test_all_scripts.py, parametrized with it, or a check over every script at once (marked
    every_script: the plumbing's bytes, the method signatures), or a single-script test of the template (SCRIPTS[0])
    when the template is selected."""
    file = os.path.relpath(str(item.fspath), TESTS_DIR)
    if file in {own_test_file(script) for script in scripts} or (file == PLUMBING_UNITS and TEMPLATE in scripts):
        return True
    if file != SHARED_TESTS:
        return False
    parameters = item.callspec.params.values() if hasattr(item, "callspec") else ()
    by_script = [value for value in parameters if isinstance(value, str) and value.endswith("_continuous.py")]
    if by_script:
        return any(value in scripts for value in by_script)
    return item.get_closest_marker("every_script") is not None or TEMPLATE in scripts


def pytest_collection_modifyitems(config, items):
    scripts = selected_scripts(config)
    if not scripts:
        return
    kept = [item for item in items if is_for_script(item, scripts)]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept


def pytest_report_header(config):
    scripts = selected_scripts(config)
    if scripts:
        own = ", ".join(f"tests/{own_test_file(script)}" for script in scripts)
        if TEMPLATE in scripts:
            own += f", tests/{PLUMBING_UNITS}"
        return f"--script: {own} and tests/{SHARED_TESTS}'s tests of {', '.join(scripts)} (script-wide checks included)"
