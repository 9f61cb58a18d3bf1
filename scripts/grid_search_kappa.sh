#!/usr/bin/env bash
# The paper's kappa grid search (Appendix "Grid search details for kappa of EPPO"): every kappa of
# the grid, on seeds 1001-1003 (left out of the main results), via scripts/sweep.sh into a separate
# root; then per setting and variant the kappa with the best mean AULC (scripts/summarize.py
# --select-kappa), written in the format of scripts/paper_kappa.csv.
#
#   scripts/grid_search_kappa.sh --root runs/kappa_grid --workers 4 [--settings ... | default --all] \
#       [--grid-cor 0.01,0.1,0.25] [--grid-ind 0.01,0.05,0.1] [--output FILE] [sweep.sh flags] [-- EXTRA FLAGS]
#
# Default grids: the paper's Table "Hyperparameters" and text (EPPO_cor {0.01, 0.1, 0.25}, EPPO_ind
# {0.01, 0.05, 0.1}); note that the paper's selected values (Table "kappa_values") use 0.05 for
# EPPO_cor and 0.25 for EPPO_ind, outside these grids (see docs/sweeps.md). Runs go to
# <root>/kappa<K>/<experiment>/<env>/<strategy>/<method>/seed<k>; a relaunch resumes the grid.
# --select-only skips the sweep (e.g. after running the same grid with scripts/slurm_sweep.sh
# --kappa-grid EPPO_cor=... --kappa-grid EPPO_ind=... --seeds 1001-1003 --root ROOT).
set -u

SCRIPTS_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOLS_PYTHON=${EPPO_TOOLS_PYTHON:-python3}

root=runs/kappa_grid grid_cor=0.01,0.1,0.25 grid_ind=0.01,0.05,0.1 methods=EPPO_cor,EPPO_ind seeds=1001-1003
output='' select_only=0 dry_run=0 has_selection=0
sweep_args=()
extra=()
need() { [[ $2 -ge 2 ]] || { echo "error: $1 needs a value" >&2; exit 2; }; }
while [[ $# -gt 0 ]]; do
    case $1 in
        -h | --help) sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        --root) need "$1" $#; root=$2; shift 2 ;;
        --grid-cor) need "$1" $#; grid_cor=$2; shift 2 ;;
        --grid-ind) need "$1" $#; grid_ind=$2; shift 2 ;;
        --methods) need "$1" $#; methods=$2; shift 2 ;;
        --seeds) need "$1" $#; seeds=$2; shift 2 ;;
        --output) need "$1" $#; output=$2; shift 2 ;;
        --select-only) select_only=1; shift ;;
        --dry-run) dry_run=1; sweep_args+=("$1"); shift ;;
        --settings | --experiments | --envs | --strategies) need "$1" $#; has_selection=1; sweep_args+=("$1" "$2"); shift 2 ;;
        --all) has_selection=1; sweep_args+=("$1"); shift ;;
        --kappa | --kappa-grid) echo "error: $1 is set by the grid search; use --grid-cor/--grid-ind" >&2; exit 2 ;;
        --) shift; extra=("$@"); break ;;
        *) sweep_args+=("$1"); shift ;;
    esac
done
((has_selection)) || sweep_args+=(--all)
output=${output:-$root/kappa_selected.csv}
grids=()
IFS=, read -r -a method_list <<<"$methods"
for method in "${method_list[@]}"; do
    case $method in
        EPPO_cor) grids+=(--kappa-grid "EPPO_cor=$grid_cor") ;;
        EPPO_ind) grids+=(--kappa-grid "EPPO_ind=$grid_ind") ;;
        *) echo "error: --methods takes EPPO_cor and/or EPPO_ind, got '$method'" >&2; exit 2 ;;
    esac
done

if ((!select_only)); then
    "$SCRIPTS_DIR/sweep.sh" --methods "$methods" --seeds "$seeds" --root "$root" "${grids[@]}" "${sweep_args[@]}" -- "${extra[@]}"
    rc=$?
    ((dry_run)) && exit "$rc"
    if ((rc != 0)); then
        echo "grid search: the sweep did not finish every run (exit $rc); no kappa selected. Relaunch to resume." >&2
        exit "$rc"
    fi
fi
"$TOOLS_PYTHON" "$SCRIPTS_DIR/summarize.py" "$root" --select-kappa --output "$output" || exit $?
echo "selected kappa per setting (best mean AULC over seeds $seeds) -> $output"
cat "$output"
