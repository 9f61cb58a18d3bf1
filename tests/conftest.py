"""Make the top-level scripts and shared modules importable from tests."""

import os
import sys

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
    sys.path.insert(0, REPO_ROOT)

import torch

# One intra-op thread, as the scripts default to: deterministic, and faster than two threads competing with
# the subprocess runs of the end-to-end tests on a 2-core machine.
torch.set_num_threads(1)
