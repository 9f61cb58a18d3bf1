#!/usr/bin/env bash
# At v0.2's defaults (d3270e2, 2026-11-27): studies/2026-11-26_paper_length_v0.1_defaults's study again (its launcher, phases and flags, nothing added) at the commit of the new
# default that studies/2026-11-27_why_ppo_does_not_walk_on_ant settled (--log-std-init -1, no observation or reward normalization), in its own root.
#
#   bash studies/2026-11-27_paper_length_v0.2_defaults/launch.sh            # start (or resume) every unfinished run, in the background
#   bash studies/2026-11-27_paper_length_v0.2_defaults/launch.sh --status   # steps done per run
#   bash studies/2026-11-27_paper_length_v0.2_defaults/launch.sh --stop     # SIGTERM: every run writes a checkpoint and exits 75
#   bash studies/2026-11-27_paper_length_v0.2_defaults/launch.sh --collect  # the small outputs into studies/2026-11-27_paper_length_v0.2_defaults/outputs/
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PAPER_LENGTH_PIN=d3270e2666667835da00fe1e6d0bc168967adca6  # the new default; tests/golden's REFERENCE_COMMIT
export PAPER_LENGTH_ROOT=${NEW_DEFAULT_ROOT:-/work/paper_length_new_default}
export PAPER_LENGTH_OUTPUTS=$HERE/outputs
exec bash "$HERE/../2026-11-26_paper_length_v0.1_defaults/launch.sh" "$@"
