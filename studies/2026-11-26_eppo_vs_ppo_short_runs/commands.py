"""Print the exact run commands of the EPPO study (studies/2026-11-26_eppo_vs_ppo_short_runs/README.md), one per line,
for `xargs -P`.

    # seeds 1001-1003
    python studies/2026-11-26_eppo_vs_ppo_short_runs/commands.py screen \\
        > studies/2026-11-26_eppo_vs_ppo_short_runs/screen_runs.txt
    # seeds 1-10
    python studies/2026-11-26_eppo_vs_ppo_short_runs/commands.py confirm \\
        > studies/2026-11-26_eppo_vs_ppo_short_runs/confirm_runs.txt
    # seeds 1001-1003
    python studies/2026-11-26_eppo_vs_ppo_short_runs/commands.py screen2 \\
        > studies/2026-11-26_eppo_vs_ppo_short_runs/screen2_runs.txt
    # seeds 1-10
    python studies/2026-11-26_eppo_vs_ppo_short_runs/commands.py confirm2 \\
        > studies/2026-11-26_eppo_vs_ppo_short_runs/confirm2_runs.txt
    # from the repository root
    xargs -P 16 -I{} sh -c '{}' < studies/2026-11-26_eppo_vs_ppo_short_runs/confirm_runs.txt

Each command line runs one seed of one cell into --run-dir <root>/<cell>/seed<N> (a finished run is skipped when a
command is repeated, an interrupted one resumes). HalfCheetah-v5 paralysis back-one, 5 tasks x 40k steps, 5
evaluation episodes, CPU (bit-identical across machines).
"""

import sys

COMMON = ("--env-id HalfCheetah-v5 --experiment paralysis --strategy back-one --num-tasks 5 --steps-per-task 40000 "
          "--eval-episodes 5 --no-cuda")
MEAN = "eppo_continuous.py --variant mean --kappa 0"
IND = "eppo_continuous.py --variant ind --kappa 0.01"  # the paper's kappa for HalfCheetah paralysis back-one
# Screening cells, in the order they ran (the most informative first).
SCREEN = {
    "EPPO_mean": MEAN,
    "EPPO_mean_mse": MEAN + " --critic-loss mse",
    "PPO": "ppo_continuous.py",
    "EPPO_mean_xi1": MEAN + " --xi 1",
    "EPPO_mean_prior_mode": MEAN + " --evidence-init prior-mode",
    "EPPO_ind_k0.01": IND,
    "EPPO_mean_hp_sum": MEAN + " --hyperprior-reduction sum",
    "EPPO_mean_exp": MEAN + " --evidence-transform exp",
    "EPPO_mean_no_norm_reward": MEAN + " --no-norm-reward",
    "EPPO_ind_k0.01_xi1": IND + " --xi 1",
    # second screen (after the confirmation): the open choice not yet ablated, and a xi between 0.01 and 1
    "EPPO_ind_k0.01_no_ucb_in_returns": IND + " --no-ucb-in-returns",
    "EPPO_mean_xi0.1": MEAN + " --xi 0.1",
    # EPPO_cor at the paper's kappa for this setting (scripts/paper_kappa.csv)
    "EPPO_cor_k0.05": "eppo_continuous.py --variant cor --kappa 0.05",
}
SCREEN2_CELLS = ["EPPO_ind_k0.01_no_ucb_in_returns", "EPPO_mean_xi0.1"]
# second confirmation: the paper's third variant, and the second screen's best cell
CONFIRM2_CELLS = ["EPPO_cor_k0.05", "EPPO_ind_k0.01_no_ucb_in_returns"]
CONFIRM_CELLS = ["PPO", "EPPO_mean_mse", "EPPO_ind_k0.01", "EPPO_mean", "EPPO_mean_xi1", "EPPO_ind_k0.01_xi1"]


def commands(cells, seeds, root):
    for cell in cells:
        script, *flags = SCREEN[cell].split(" ", 1)
        for seed in seeds:
            yield " ".join(["python3", script, *flags, COMMON, f"--seed {seed}", f"--run-dir {root}/{cell}/seed{seed}"])


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "confirm"
    if which == "screen":
        lines = commands([cell for cell in SCREEN if cell not in SCREEN2_CELLS + CONFIRM2_CELLS],
                         (1001, 1002, 1003), "runs_screen")
    elif which == "screen2":
        lines = commands(SCREEN2_CELLS, (1001, 1002, 1003), "runs_screen")
    elif which == "confirm2":
        lines = commands(CONFIRM2_CELLS, range(1, 11), "runs_confirm")
    elif which == "confirm":
        lines = commands(CONFIRM_CELLS, range(1, 11), "runs_confirm")
    else:
        sys.exit(f"error: argument must be screen, screen2, confirm or confirm2, got {which!r}")
    print("\n".join(lines))
