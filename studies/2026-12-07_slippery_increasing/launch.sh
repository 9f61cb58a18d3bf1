#!/usr/bin/env bash
# The paper's Table 1 where it claims the most: slippery `increasing` on Ant-v5 and HalfCheetah-v5, 15 tasks x 500k
# steps, an evaluation of 10 episodes every 20k steps, seeds 1-8, PPO and the three EPPO variants at the scripts'
# defaults and the paper's kappa per setting (README.md). studies/2026-11-26_paper_length_v0.1_defaults/launch.sh's launcher, its modes and
# resume store, with these methods and phases.
#
#   bash studies/2026-12-07_slippery_increasing/launch.sh            # start (or resume) every unfinished run, in the background
#   bash studies/2026-12-07_slippery_increasing/launch.sh --status   # steps done per run
#   bash studies/2026-12-07_slippery_increasing/launch.sh --stop     # SIGTERM: every run writes a checkpoint and exits 75
#   bash studies/2026-12-07_slippery_increasing/launch.sh --collect  # the small outputs into studies/2026-12-07_slippery_increasing/outputs/
#   bash studies/2026-12-07_slippery_increasing/launch.sh --stash    # after --stop: the resume points into .../resume/, to commit
#
# PAPER_LENGTH_WORKERS=1 runs one process at a time (the core another study leaves; the next launch resumes with two).
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# main on 2026-12-07 (every method's runs: one pinned commit)
export PAPER_LENGTH_PIN=8c9228ce23bf6f274e3d723e09ea87a39760f9da
export PAPER_LENGTH_ROOT=${SLIPPERY_INCREASING_ROOT:-/work/slippery_increasing}
export PAPER_LENGTH_OUTPUTS=${SLIPPERY_INCREASING_OUTPUTS:-$HERE/outputs}
export PAPER_LENGTH_STORE=${SLIPPERY_INCREASING_STORE:-$HERE/resume}
export PAPER_LENGTH_ANCHOR=0
export PAPER_LENGTH_METHODS=PPO,EPPO_mean,EPPO_cor,EPPO_ind
# Two phases, seeds 1-5 (one --num-seeds 5 process per method and setting), then seeds 6-8 (--num-seeds 3), each
# HalfCheetah's four processes first, then Ant's: the 5-seed tables of HalfCheetah come after about a fifth of the
# study and Ant's after about three fifths, where one sweep over seeds 1-8 would give no 5-seed table of the second
# setting before its 8 (README.md, "Order").
BOTH=slippery/HalfCheetah/increasing,slippery/Ant/increasing
export PAPER_LENGTH_PHASES="$BOTH 1-5 5;$BOTH 6-8 3"
exec bash "$HERE/../2026-11-26_paper_length_v0.1_defaults/launch.sh" "$@"
