"""Copy the plumbing block of ppo_continuous.py (from its marker line to the end) into the other algorithm scripts.

    python scripts/sync_plumbing.py            # after changing the plumbing in ppo_continuous.py
    python scripts/sync_plumbing.py --check    # exit 1 naming the scripts whose block differs (changes nothing)

Every *_continuous.py at the repository root ends with the same block (tests/test_all_scripts.py checks it byte for
byte): a fix to the shared plumbing is made once, in the template, and copied with this script. The scripts are
discovered, not listed: a new method's *_continuous.py is covered as soon as it exists.
"""

import argparse
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATE = "ppo_continuous.py"
MARKER = "# ==== The plumbing:"


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


def read(name: str, root: str = REPO_ROOT) -> str:
    with open(os.path.join(root, name)) as f:
        return f.read()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report the scripts whose block differs")
    parser.add_argument("--root", default=REPO_ROOT, help=argparse.SUPPRESS)  # another directory of scripts (tests)
    args = parser.parse_args()
    try:  # every script is split before any is written: one without the marker changes nothing
        _, plumbing = split(read(TEMPLATE, args.root), TEMPLATE)
        scripts = {name: split(read(name, args.root), name) for name in discover(args.root)}
    except ValueError as error:
        print(f"error: {error} (the line where the plumbing block starts, as in {TEMPLATE})", file=sys.stderr)
        return 2
    differing = []
    for name, (method, block) in scripts.items():
        if block == plumbing:
            continue
        differing.append(name)
        if not args.check:
            with open(os.path.join(args.root, name), "w") as f:
                f.write(method + plumbing)
    if args.check and differing:
        print(f"the plumbing block of {', '.join(differing)} differs from {TEMPLATE}'s", file=sys.stderr)
        return 1
    print(f"{'differs' if args.check else 'updated'}: {', '.join(differing) or 'none'} (of {', '.join(scripts)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
