"""Copy the shared blocks of ppo_continuous.py into the other algorithm scripts: the plumbing (from its marker line
to the end) and the run's settings (the last fields of Args, from their marker line to the end of the class).

    python scripts/sync_plumbing.py            # after changing either block in ppo_continuous.py
    python scripts/sync_plumbing.py --check    # exit 1 naming the scripts whose blocks differ (changes nothing)

Every *_continuous.py at the repository root holds the same two blocks (tests/plumbing/test_all_scripts.py checks
them byte for byte): a fix to the shared code or flags is made once, in the template, and copied with this script. The
scripts are discovered, not listed: a new method's *_continuous.py is covered as soon as it exists.
"""

import argparse
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATE = "ppo_continuous.py"
MARKER = "# ==== The plumbing:"
# The run's settings close the method's Args: every field from this line to the end of the class is shared
RUN_SETTINGS_MARKER = "    # ---- The run's settings, the same in every script"


def discover(root: str = REPO_ROOT) -> list[str]:
    """Every *_continuous.py at ``root`` but the template, sorted: the scripts that receive the template's block."""
    return sorted(name for name in os.listdir(root)
                  if name.endswith("_continuous.py") and name != TEMPLATE and os.path.isfile(os.path.join(root, name)))


SCRIPTS = tuple(discover())


def split(text: str, name: str) -> tuple[str, str]:
    """(the method, the plumbing block) of a script's text."""
    if text.count(MARKER) != 1:
        raise ValueError(f"{name} must contain the marker line {MARKER!r} exactly once")
    index = text.index(MARKER)
    return text[:index], text[index:]


def split_args(method: str, name: str) -> tuple[str, str, str]:
    """(before, the run's settings, after) of a script's method part: the settings run from their marker line to
    the end of the Args class (the next line that starts at column 0, less the blank lines before it)."""
    if method.count(RUN_SETTINGS_MARKER) != 1:
        raise ValueError(f"{name} must contain the line {RUN_SETTINGS_MARKER.strip()!r} (in Args) exactly once")
    start = method.index(RUN_SETTINGS_MARKER)
    lines = method[start:].splitlines(keepends=True)
    end = next((i for i, line in enumerate(lines) if line.strip() and not line[0].isspace()), len(lines))
    while end > 0 and not lines[end - 1].strip():
        end -= 1
    settings = "".join(lines[:end])
    return method[:start], settings, method[start + len(settings):]


def read(name: str, root: str = REPO_ROOT) -> str:
    with open(os.path.join(root, name)) as f:
        return f.read()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report the scripts whose block differs")
    parser.add_argument("--root", default=REPO_ROOT, help=argparse.SUPPRESS)  # another directory of scripts (tests)
    args = parser.parse_args()
    try:  # every script is split before any is written: one without a marker changes nothing
        template_method, plumbing = split(read(TEMPLATE, args.root), TEMPLATE)
        settings = split_args(template_method, TEMPLATE)[1]
        scripts = {}
        for name in discover(args.root):
            method, block = split(read(name, args.root), name)
            scripts[name] = (*split_args(method, name), block)
    except ValueError as error:
        print(f"error: {error} (as in {TEMPLATE})", file=sys.stderr)
        return 2
    differing = []
    for name, (before, own_settings, after, block) in scripts.items():
        if block == plumbing and own_settings == settings:
            continue
        differing.append(name)
        if not args.check:
            with open(os.path.join(args.root, name), "w") as f:
                f.write(before + settings + after + plumbing)
    if args.check and differing:
        print(f"the shared blocks of {', '.join(differing)} differ from {TEMPLATE}'s", file=sys.stderr)
        return 1
    print(f"{'differs' if args.check else 'updated'}: {', '.join(differing) or 'none'} (of {', '.join(scripts)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
