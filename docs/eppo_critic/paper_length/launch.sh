#!/usr/bin/env bash
# Issue 46, item 4: docs/paper_length's study again (its launcher, phases 1-3 and flags, nothing added) at the
# default this issue settled (reward normalization on, 823e260: tests/golden's REFERENCE_COMMIT), in its own root.
# PPO runs again too, since the change reaches every script's pipeline; the stationary anchor (phase 4) is left
# out: its invariant (task 0 = the unchanged Ant-v5) does not depend on the reward's scaling.
#
#   bash docs/eppo_critic/paper_length/launch.sh            # start (or resume) every unfinished run, in the background
#   bash docs/eppo_critic/paper_length/launch.sh --status   # steps done per run
#   bash docs/eppo_critic/paper_length/launch.sh --stop     # SIGTERM: every run writes a checkpoint and exits 75
#   bash docs/eppo_critic/paper_length/launch.sh --collect  # the small outputs into docs/eppo_critic/paper_length/outputs/
#   bash docs/eppo_critic/paper_length/launch.sh --stash    # after --stop: the resume points into .../paper_length/resume/
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PAPER_LENGTH_PIN=823e260cb382a2e453ddd5717aa0e8961beef018  # issue 46's default: reward normalization on
export PAPER_LENGTH_ROOT=${EPPO_CRITIC_PAPER_LENGTH_ROOT:-/work/eppo_critic_paper_length}
export PAPER_LENGTH_OUTPUTS=$HERE/outputs
export PAPER_LENGTH_ANCHOR=0
exec bash "$HERE/../../paper_length/launch.sh" "$@"
