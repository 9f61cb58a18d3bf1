"""The code's two line budgets: no line of a tracked Python file over 120 characters, and the plumbing (from its marker
line to the end of a script) short enough to read in one sitting. The plumbing's is a ratchet: PLUMBING_LINES is its
current ceiling, which may come down but never rise above PLUMBING_TARGET.
"""

import os
import subprocess

from scripts import sync_plumbing

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MAX_LINE = 120
PLUMBING_LINES = 1399  # the plumbing's length today: it may shrink, never grow
PLUMBING_TARGET = 1400  # the most the plumbing may hold


def long_lines(path: str) -> list:
    with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as f:
        return [number for number, line in enumerate(f.read().splitlines(), start=1) if len(line) > MAX_LINE]


def test_no_python_line_is_over_120_characters():
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=REPO_ROOT, capture_output=True, text=True,
                           check=True).stdout.split()
    assert any(name.endswith("_continuous.py") for name in files)  # the listing found the scripts
    found = {path: lines for path in files if (lines := long_lines(path))}
    assert not found, found


def test_the_plumbing_stays_within_its_line_budget():
    with open(os.path.join(REPO_ROOT, sync_plumbing.TEMPLATE), encoding="utf-8") as f:
        _, plumbing = sync_plumbing.split(f.read(), sync_plumbing.TEMPLATE)
    assert PLUMBING_LINES <= PLUMBING_TARGET, (PLUMBING_LINES, PLUMBING_TARGET)  # the ceiling is never raised past it
    assert len(plumbing.splitlines()) <= PLUMBING_LINES, (len(plumbing.splitlines()), PLUMBING_LINES)


# The plumbing's helper for method authors: no script calls it, by design (docs/reading-guide.md)
UNCALLED_BY_DESIGN = {"initial_parameters"}


def test_every_plumbing_function_is_used_by_a_script():
    """Each function and class defined in the plumbing is referenced, besides its own definition, by at least one
    script (a call, a base class, a callback passed on; the helpers for methods, such as fresh_draw, by the methods
    that re-initialize units): the synchronized copy carries no dead code."""
    import ast

    defined, used = set(), set()
    for script in sync_plumbing.SCRIPTS:
        with open(os.path.join(REPO_ROOT, script), encoding="utf-8") as f:
            source = f.read()
        _, plumbing = sync_plumbing.split(source, script)
        defined |= {node.name for node in ast.parse(plumbing).body
                    if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Name):
                used.add(node.id)
            elif isinstance(node, ast.Attribute):
                used.add(node.attr)
    assert len(defined) > 50  # the plumbing was found
    assert not defined - used - UNCALLED_BY_DESIGN, sorted(defined - used - UNCALLED_BY_DESIGN)
