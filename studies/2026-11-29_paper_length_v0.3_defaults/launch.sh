#!/usr/bin/env bash
# At v0.3's defaults (823e260, 2026-11-29): studies/2026-11-26_paper_length_v0.1_defaults's study again (its launcher, phases 1-3 and flags, nothing added) at the
# default 2026-11-29_eppo_ind_gap_on_ant settled (reward normalization on, 823e260: tests/golden's REFERENCE_COMMIT; pinned at 1fd797b,
# whose outputs are 823e260's bit for bit and whose EPPO also logs evidential/advantage_max_z), in its own root.
# PPO runs again too, since the change reaches every script's pipeline; the stationary anchor (phase 4) is left
# out: its invariant (task 0 = the unchanged Ant-v5) does not depend on the reward's scaling.
#
#   bash studies/2026-11-29_paper_length_v0.3_defaults/launch.sh            # start (or resume) every unfinished run, in the background
#   bash studies/2026-11-29_paper_length_v0.3_defaults/launch.sh --status   # steps done per run
#   bash studies/2026-11-29_paper_length_v0.3_defaults/launch.sh --stop     # SIGTERM: every run writes a checkpoint and exits 75
#   bash studies/2026-11-29_paper_length_v0.3_defaults/launch.sh --collect  # the small outputs into studies/2026-11-29_paper_length_v0.3_defaults/outputs/
#   bash studies/2026-11-29_paper_length_v0.3_defaults/launch.sh --stash    # after --stop: the resume points into .../2026-11-29_paper_length_v0.3_defaults/resume/
# Beside studies/2026-11-26_paper_length_v0.1_defaults's outputs, each EPPO_ind run's scalars of TAGS (kilobytes: ../2026-11-29_eppo_ind_gap_on_ant/scalars.py --tags) go with
# --collect into outputs/ and with --stash into resume/, and a launch puts the stashed ones back as the run's
# scalars.prev.csv.gz (the event files stay on the machine that wrote them): ../2026-11-29_eppo_ind_gap_on_ant/scalars.py's store modes.
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PAPER_LENGTH_PIN=1fd797bf2cbe66aa593899999acba88a4104a250  # 823e260's default + evidential/advantage_max_z
export PAPER_LENGTH_ROOT=${EPPO_CRITIC_PAPER_LENGTH_ROOT:-/work/eppo_critic_paper_length}
export PAPER_LENGTH_OUTPUTS=${EPPO_CRITIC_PAPER_LENGTH_OUTPUTS:-$HERE/outputs}  # both moved by the test alone
export PAPER_LENGTH_STORE=${EPPO_CRITIC_PAPER_LENGTH_STORE:-$HERE/resume}
export PAPER_LENGTH_ANCHOR=0
TAGS=evidential/advantage_max_z,evidential/value_var_max,evidential/nu_min
EPPO_RUNS="*/EPPO_ind/seed*"  # the runs whose scalars go along
RUNS=$PAPER_LENGTH_ROOT/runs
STORE=$PAPER_LENGTH_STORE
bash "$HERE/../2026-11-26_paper_length_v0.1_defaults/launch.sh" "$@" || exit
case ${1:-} in
    --collect) python3 "$HERE/../2026-11-29_eppo_ind_gap_on_ant/scalars.py" --collect "$RUNS" "$PAPER_LENGTH_OUTPUTS" --tags "$TAGS" --runs "$EPPO_RUNS" ;;
    --stash) python3 "$HERE/../2026-11-29_eppo_ind_gap_on_ant/scalars.py" --stash "$RUNS" "$STORE" --tags "$TAGS" --runs "$EPPO_RUNS" ;;
    "") python3 "$HERE/../2026-11-29_eppo_ind_gap_on_ant/scalars.py" --restore "$RUNS" "$STORE" ;;
esac
