"""`python -m pytest tests --script X_continuous.py` (tests/conftest.py) runs one script's tests: its own test file
(tests/methods/test_x.py) and the shared tests for it, with the checks over every script that `-k x` would drop."""

import re
import subprocess
import sys

from tiny_run import REPO_ROOT

SHARED = "tests/plumbing/test_all_scripts.py::"
EVERY_SCRIPT = {SHARED + "test_the_plumbing_block_is_byte_identical_in_every_script",
                SHARED + "test_every_script_gives_the_plumbing_the_same_method_signatures"}


def collected(*arguments) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:xdist",
                           "-p", "no:cacheprovider", *arguments],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)


def test_script_option_keeps_the_scripts_own_and_shared_tests_and_the_every_script_checks():
    result = collected("tests/plumbing/test_all_scripts.py", "tests/methods/test_ppo_redo.py",
                       "tests/methods/test_ppo_snp.py", "--script", "ppo_redo_continuous.py")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    ids = {line for line in result.stdout.splitlines() if "::" in line}
    shared = {i for i in ids if i.startswith(SHARED)}
    assert EVERY_SCRIPT <= shared  # what `-k redo` would drop
    # each kept shared test is parametrized with the script (its last parameter, as in [commit-flags-script])
    assert {i for i in shared - EVERY_SCRIPT if not re.search(r"[\[-]ppo_redo_continuous\.py\]$", i)} == set()
    assert (SHARED + "test_two_seed_run_is_golden_resumes_bit_for_bit_and_each_seed_is_independent"
            "[ppo_redo_continuous.py]") in ids
    assert SHARED + "test_nonfinite_gradients_are_skipped_and_counted[ppo_redo_continuous.py]" in ids
    own = {i for i in ids if i.startswith("tests/methods/test_ppo_redo.py::")}
    assert len(own) > 5 and ids == shared | own  # nothing of test_ppo_snp.py, nothing of the template's own tests

    template = collected("tests/plumbing/test_all_scripts.py", "--script", "ppo_continuous.py")
    assert template.returncode == 0, template.stdout[-2000:] + template.stderr[-2000:]
    # the template's alone
    assert SHARED + "test_a_checkpoint_of_an_older_format_is_refused_in_one_line" in template.stdout
    assert "[ppo_redo_continuous.py]" not in template.stdout and EVERY_SCRIPT <= set(template.stdout.splitlines())


def test_an_unknown_script_is_a_usage_error_naming_the_scripts():
    result = collected("tests/harness/test_script_option.py", "--script", "ppo_x_continuous.py")
    assert result.returncode == 4, result.stdout[-2000:] + result.stderr[-2000:]
    assert "--script ppo_x_continuous.py: no such algorithm script; the scripts: cb_continuous.py" in result.stderr
    assert "Traceback" not in result.stderr
