#!/usr/bin/env bash
# The paper's other five methods at its length: PFO, CB, PPO_DRND, EPPO_mean and EPPO_cor on Ant-v5 and
# HalfCheetah-v5 paralysis back-one, 9 tasks x 500k steps, an evaluation of 10 episodes every 20k steps, seeds 1-8,
# the scripts' defaults (README.md). studies/2026-11-26_paper_length_v0.1_defaults/launch.sh's launcher, its modes and resume store, with these
# methods and phases; PPO and EPPO_ind are studies/2026-11-29_paper_length_v0.3_defaults's runs (README.md: why they stand).
#
#   bash studies/2026-12-01_paper_length_all_seven_methods/launch.sh            # start (or resume) every unfinished run, in the background
#   bash studies/2026-12-01_paper_length_all_seven_methods/launch.sh --status   # steps done per run
#   bash studies/2026-12-01_paper_length_all_seven_methods/launch.sh --stop     # SIGTERM: every run writes a checkpoint and exits 75
#   bash studies/2026-12-01_paper_length_all_seven_methods/launch.sh --collect  # the small outputs into studies/2026-12-01_paper_length_all_seven_methods/outputs/
#   bash studies/2026-12-01_paper_length_all_seven_methods/launch.sh --stash    # after --stop: the resume points into .../resume/, to commit
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# the commit where CB takes the paper's values per setting (every method's runs: one pinned commit)
export PAPER_LENGTH_PIN=71aed1337848e5830a0888fac61c1a7aa30854c5
export PAPER_LENGTH_ROOT=${BASELINES_PAPER_LENGTH_ROOT:-/work/baselines_paper_length}
export PAPER_LENGTH_OUTPUTS=${BASELINES_PAPER_LENGTH_OUTPUTS:-$HERE/outputs}
export PAPER_LENGTH_STORE=${BASELINES_PAPER_LENGTH_STORE:-$HERE/resume}
export PAPER_LENGTH_ANCHOR=0
export PAPER_LENGTH_METHODS=PFO,CB,PPO_DRND,EPPO_mean,EPPO_cor
# one sweep over seeds 1-8, five seeds per process: each method and setting runs as the processes of seeds 1-5 and
# 6-8 (the same commands as two phases of 1-5 and 6-8 gave), Ant's first, then HalfCheetah's, method by method.
# Until 2026-12-05 06:58 UTC the study ran seeds 1-5 as a phase of its own; one sweep keeps both cores busy to the
# study's end instead of to a phase's, and a seed's outputs do not depend on which seeds share its process.
BOTH=paralysis/Ant/back-one,paralysis/HalfCheetah/back-one
export PAPER_LENGTH_PHASES="$BOTH 1-8 5"
exec bash "$HERE/../2026-11-26_paper_length_v0.1_defaults/launch.sh" "$@"
