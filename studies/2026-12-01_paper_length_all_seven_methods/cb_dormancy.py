"""The CB dormancy probe (README.md, "Why HalfCheetah's CB has the most dormant units"), read by its fixed rule.

    python studies/2026-12-01_paper_length_all_seven_methods/cb_dormancy.py \
        > studies/2026-12-01_paper_length_all_seven_methods/cb_dormancy_probe.md

Three arms on HalfCheetah-v5 paralysis back-one, seeds 1-5, the ends of tasks 0-3 (2 M steps per seed):
- CB, --weight-decay 0: the probe, cb_dormancy_probe/weight_decay_0/seed<k>/ (its small outputs);
- CB: this study's runs (outputs/, the paper's values for the setting, L2 1e-4);
- PPO: the v0.3 runs (studies/2026-11-29_paper_length_v0.3_defaults/outputs).
Per run, the dormant percentage (plasticity.csv) of the critic and of the actor averaged over those four task ends;
the probe against CB (paired, one-sided: CB above the probe) and against PPO (paired, one-sided: the probe above
PPO), then the README's reading. The returns of the same tasks (AULC per task, scripts/summarize.py's) are printed
beside it, for reading only.
"""

import csv
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
spec = importlib.util.spec_from_file_location("baselines_analyze", os.path.join(HERE, "analyze.py"))
analyze = importlib.util.module_from_spec(spec)
spec.loader.exec_module(analyze)
summarize, paper_length = analyze.summarize, analyze.paper_length

SETTING = os.path.join("paralysis", "HalfCheetah", "back-one")
TASKS = (0, 1, 2, 3)
SEEDS = (1, 2, 3, 4, 5)
ARMS = {  # label -> the folder of its seed<k> runs
    "CB, --weight-decay 0": os.path.join(HERE, "cb_dormancy_probe", "weight_decay_0"),
    "CB": os.path.join(HERE, "outputs", SETTING, "CB"),
    "PPO": os.path.join(analyze.ROOTS[1], SETTING, "PPO"),
}
PROBE, CB, PPO = ARMS


def dormant_at_task_ends(run_dir: str, steps_per_task: int) -> dict:
    """network -> [dormant percent at the end of each task of TASKS] from a run's plasticity.csv."""
    ends = {steps_per_task * (task + 1): task for task in TASKS}
    values = {network: {} for network in analyze.NETWORKS}
    with open(os.path.join(run_dir, "plasticity.csv")) as f:
        for row in csv.DictReader(f):
            step = int(row["global_step"])
            if step in ends and int(row["task"]) == ends[step]:
                values[row["network"]][ends[step]] = float(row["dormant_percent"])
    for network, by_task in values.items():
        if sorted(by_task) != list(TASKS):
            raise ValueError(f"{run_dir}: {network} lacks task ends {sorted(set(TASKS) - set(by_task))}")
    return {network: [by_task[task] for task in TASKS] for network, by_task in values.items()}


def probe_reading(dormant: dict) -> tuple:
    """dormant: arm -> network -> seed -> the average over the task ends. Returns (the reading, the p-values):
    p[network] = (p of CB above the probe, p of the probe above PPO), each paired and one-sided."""
    p = {network: (summarize.paired_pvalue(dormant[CB][network], dormant[PROBE][network])[0],
                   summarize.paired_pvalue(dormant[PROBE][network], dormant[PPO][network])[0])
         for network in analyze.NETWORKS}
    below_cb = [network for network in analyze.NETWORKS if p[network][0] < analyze.ALPHA]
    above_ppo = [network for network in analyze.NETWORKS if p[network][1] < analyze.ALPHA]
    if len(below_cb) == len(analyze.NETWORKS):
        reading = ("L2 is the cause" if not above_ppo else
                   f"L2 is a cause, not the only one (the probe still above PPO: {', '.join(above_ppo)})")
    elif not below_cb:
        reading = "not L2"
    else:
        reading = f"mixed: below CB in the {below_cb[0]} only; read per network"
    return reading, p


def main() -> int:
    dormant = {arm: {network: {} for network in analyze.NETWORKS} for arm in ARMS}
    aulc = {arm: {task: {} for task in TASKS} for arm in ARMS}
    for arm, folder in ARMS.items():
        for seed in SEEDS:
            run = summarize.load_run(os.path.join(folder, f"seed{seed}"))
            last = run.steps_per_task * len(TASKS)
            if not run.evaluations or run.evaluations[-1].global_step < last:
                print(f"error: {run.run_dir} has not reached step {last:,}", file=sys.stderr)
                return 2
            for network, values in dormant_at_task_ends(run.run_dir, run.steps_per_task).items():
                dormant[arm][network][seed] = sum(values) / len(values)
            task_aulcs = paper_length.task_aulcs(run.evaluations, run.steps_per_task, run.evaluations[-1].global_step)
            for task in TASKS:
                aulc[arm][task][seed] = task_aulcs[task]
    reading, p = probe_reading(dormant)
    print("# The CB dormancy probe: HalfCheetah-v5 paralysis back-one, seeds 1-5, tasks 0-3\n")
    print("Dormant units (%), each run's average over the ends of tasks 0-3, mean ± se over seeds:\n")
    print("| network | " + " | ".join(ARMS) + " | p, CB above the probe | p, the probe above PPO |")
    print("|---|" + "---|" * (len(ARMS) + 2))
    for network in analyze.NETWORKS:
        cells = ["{:.1f} ± {:.1f}".format(*summarize.mean_se(dormant[arm][network].values())) for arm in ARMS]
        print(f"| {network} | " + " | ".join(cells) + f" | {p[network][0]:.3f} | {p[network][1]:.3f} |")
    print(f"\n**The reading** (README.md, fixed before the results): {reading}.\n")
    print("AULC per task, mean ± se over seeds (for reading only):\n")
    print("| task | " + " | ".join(ARMS) + " |")
    print("|---|" + "---|" * len(ARMS))
    for task in TASKS:
        print(f"| {task} | " + " | ".join("{:,.0f} ± {:,.0f}".format(*summarize.mean_se(aulc[arm][task].values()))
                                        for arm in ARMS) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
