#!/usr/bin/env bash
# The study's own environment: ObjectRL 0.2.1, as published on the package index, with its PPO's dependencies, in a
# virtual environment of its own (never the repository's). One command:
#
#   bash studies/2026-12-07_objectrl_ppo/install.sh          # creates studies/2026-12-07_objectrl_ppo/.venv
#
# ObjectRL 0.2.1 requires Python 3.12, and on 3.12 `torch==2.13.0` from the package index is the multi-GB CUDA
# build, so it runs on our Python 3.11 instead: its wheel is installed with --ignore-requires-python and the two
# lines that use 3.12-only syntax are rewritten (objectrl-0.2.1-python3.11.patch; test_objectrl_ppo.py checks that
# nothing else differs from the published modules). OBJECTRL_VENV=<dir> puts the environment elsewhere.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
VENV=${OBJECTRL_VENV:-$HERE/.venv}
WHEEL=objectrl-0.2.1-py3-none-any.whl
WHEEL_SHA256=ed4378aa982f6ae6850a4599836ac625c5d15851e93e3d388dc994d35f48ef80
PYTHON=${PYTHON:-python3.11}

"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet -r "$HERE/requirements-objectrl.txt"
mkdir -p "$VENV/wheels"
# the published wheel, for Python 3.12, without its dependencies (installed above, pinned)
"$VENV/bin/python" -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
    -d "$VENV/wheels" objectrl==0.2.1
echo "$WHEEL_SHA256  $VENV/wheels/$WHEEL" | sha256sum --check --quiet
"$VENV/bin/python" -m pip install --quiet --no-deps --no-compile --ignore-requires-python "$VENV/wheels/$WHEEL"
SITE=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
patch --quiet --forward -p1 -d "$SITE" < "$HERE/objectrl-0.2.1-python3.11.patch"
"$VENV/bin/python" -c "import objectrl.models.ppo, objectrl.experiments.control_experiment"
echo "objectrl 0.2.1 ready"
