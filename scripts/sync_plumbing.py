"""Copy the plumbing block of ppo_continuous.py (from its marker line to the end) into the other algorithm scripts.

    python scripts/sync_plumbing.py            # after changing the plumbing in ppo_continuous.py
    python scripts/sync_plumbing.py --check    # exit 1 naming the scripts whose block differs (changes nothing)

Every *_continuous.py ends with the same block (tests/test_all_scripts.py checks it byte for byte): a fix to the
shared plumbing is made once, in the template, and copied with this script.
"""

import argparse
import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEMPLATE = "ppo_continuous.py"
SCRIPTS = ("eppo_continuous.py", "pfo_continuous.py", "cb_continuous.py", "ppo_drnd_continuous.py")
MARKER = "# ==== The plumbing:"


def split(text: str, name: str) -> tuple[str, str]:
    """(the method, the plumbing block) of a script's text."""
    if text.count(MARKER) != 1:
        raise ValueError(f"{name} must contain the marker line {MARKER!r} exactly once")
    index = text.index(MARKER)
    return text[:index], text[index:]


def read(name: str) -> str:
    with open(os.path.join(REPO_ROOT, name)) as f:
        return f.read()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report the scripts whose block differs")
    args = parser.parse_args()
    _, plumbing = split(read(TEMPLATE), TEMPLATE)
    differing = []
    for name in SCRIPTS:
        method, block = split(read(name), name)
        if block == plumbing:
            continue
        differing.append(name)
        if not args.check:
            with open(os.path.join(REPO_ROOT, name), "w") as f:
                f.write(method + plumbing)
    if args.check and differing:
        print(f"the plumbing block of {', '.join(differing)} differs from {TEMPLATE}'s", file=sys.stderr)
        return 1
    print(f"{'differs' if args.check else 'updated'}: {', '.join(differing) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
