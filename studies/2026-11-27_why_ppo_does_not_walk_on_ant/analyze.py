"""The screen's table and figure, from the committed outputs (studies/2026-11-27_why_ppo_does_not_walk_on_ant/outputs/,
written by collect.py).

    python studies/2026-11-27_why_ppo_does_not_walk_on_ant/analyze.py \\
        > studies/2026-11-27_why_ppo_does_not_walk_on_ant/screen_tables.md
    python studies/2026-11-27_why_ppo_does_not_walk_on_ant/analyze.py \\
        --plot studies/2026-11-27_why_ppo_does_not_walk_on_ant/screen.png

Per configuration (ours: a row of configs.tsv, at the number of steps its directory names; SB3: its two
configurations), over its seeds (1001-1003, the grid-search seeds): the evaluation return (10 deterministic
episodes, the paper's protocol) at 250k, 500k and 1M steps, mean ± standard error; the fraction of the evaluations
after step 0 that are above standing still, and the first step where each seed gets above it; the mean length of
the training episodes and the policy's std over the 100k steps up to 250k and 500k.

Standing still: the return of the zero action on the same evaluation episodes (Ant-v5 reset with seed + 100 + i),
per seed, computed here with the simulator (about 990; the untrained policy of our default, whose actions are
near 0, earns the same at step 0).
"""

import argparse
import csv
import glob
import math
import os
import sys
import textwrap

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUTPUTS = os.path.join(HERE, "outputs")
MILESTONES = (250_000, 500_000, 1_000_000)
WINDOW = 100_000  # training statistics: the evaluation rows in (milestone - WINDOW, milestone]
SB3_DESCRIPTIONS = {
    "sb3_default": "Stable-Baselines3 PPO, its defaults (tanh 64×64, minibatch 64, std 1 learned, no normalization)",
    "sb3_paper": "the same with the paper's width, activation and minibatch (ReLU 256×256, minibatch 256)",
}


def read_rows(path: str) -> list:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def config_flags() -> dict:
    flags = {}
    with open(os.path.join(HERE, "configs.tsv")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                name, _, rest = line.rstrip("\n").partition("\t")
                flags[name] = rest.strip() or "(v0.1's defaults)"
    return flags


def standing_still_returns(seeds: list, episodes: int = 10) -> dict:
    """Per seed: the mean return of the zero action over the evaluation episodes of that seed."""
    sys.path.insert(0, REPO)
    from nonstationary_envs import BatchedEnv

    env = BatchedEnv("Ant-v5", num_sims=len(seeds) * episodes)
    env.reset(None, [seed + 100 + i for seed in seeds for i in range(episodes)])
    returns, running = np.zeros(env.num_sims), np.ones(env.num_sims, dtype=bool)
    zeros = np.zeros((env.num_sims, env.action_dim), np.float32)
    for _ in range(1000):
        ids = np.flatnonzero(running)
        if not ids.size:
            break
        _, reward, terminated, truncated = env.step(zeros[ids], None if ids.size == env.num_sims else ids)
        returns[ids] += reward
        running[ids] = ~(terminated | truncated)
    return {seed: float(returns[k * episodes : (k + 1) * episodes].mean()) for k, seed in enumerate(seeds)}


def discover() -> list:
    """(label, description, {seed: run_dir}) for every configuration with outputs, ours first."""
    flags, found = config_flags(), []
    for steps_dir in sorted(glob.glob(os.path.join(OUTPUTS, "[0-9]*")), key=lambda d: int(os.path.basename(d))):
        for name in flags:
            runs = sorted(glob.glob(os.path.join(steps_dir, name, "seed*")))
            if runs:
                label = f"{name} ({int(os.path.basename(steps_dir)) // 1000}k)"
                found.append((label, flags[name], {int(os.path.basename(r)[4:]): r for r in runs}))
    for name, description in SB3_DESCRIPTIONS.items():
        runs = sorted(glob.glob(os.path.join(OUTPUTS, "sb3", name, "seed*")))
        if runs:
            found.append((name, description, {int(os.path.basename(r)[4:]): r for r in runs}))
    return found


def mean_se(values: list) -> str:
    values = [v for v in values if v is not None and not math.isnan(v)]
    if not values:
        return ""
    if len(values) == 1:
        return f"{values[0]:,.0f} (1 seed)"
    return f"{np.mean(values):,.0f} ± {np.std(values, ddof=1) / math.sqrt(len(values)):,.0f}"


def at_step(rows: list, step: int, column: str = "return_mean"):
    """The evaluation at ``step``; between two evaluations (250k lies between 240k and 260k), their mean."""
    values = {int(row["global_step"]): float(row[column]) for row in rows if row[column] != ""}
    if step in values:
        return values[step]
    before = max((s for s in values if s < step), default=None)
    after = min((s for s in values if s > step), default=None)
    return None if before is None or after is None else (values[before] + values[after]) / 2


def window_mean(rows: list, step: int, column: str):
    if not rows or int(rows[-1]["global_step"]) < step:
        return None
    values = [float(r[column]) for r in rows if step - WINDOW < int(r["global_step"]) <= step and r[column] != ""]
    return float(np.mean(values)) if values else None


def summarize(configs: list, standing: dict) -> list:
    table = []
    for label, description, runs in configs:
        evaluations = {seed: read_rows(os.path.join(d, "evaluations.csv")) for seed, d in runs.items()}
        training = {seed: read_rows(os.path.join(d, "training.csv")) for seed, d in runs.items()}
        later = {seed: [r for r in rows if int(r["global_step"]) > 0] for seed, rows in evaluations.items()}
        above = sum(float(r["return_mean"]) > standing[seed] for seed, rows in later.items() for r in rows)
        total = sum(len(rows) for rows in later.values())
        first = [next((int(r["global_step"]) for r in rows if float(r["return_mean"]) > standing[seed]), None)
                 for seed, rows in later.items()]
        last_steps = [int(rows[-1]["global_step"]) for rows in evaluations.values()]
        table.append({
            "label": label, "description": description, "seeds": len(runs), "steps": min(last_steps),
            "returns": [mean_se([at_step(rows, m) for rows in evaluations.values()]) for m in MILESTONES],
            "above": f"{above / total:.0%} ({above}/{total})" if total else "",
            "first": ", ".join("never" if f is None else f"{f // 1000}k" for f in first),
            "length": [mean_se([window_mean(rows, m, "train_episode_length_mean") for rows in training.values()])
                       for m in MILESTONES[:2]],
            "std": [("{:.2f}".format(np.mean(v))
                     if (v := [x for x in (window_mean(rows, m, "policy_std_mean") for rows in training.values())
                               if x is not None])
                     else "") for m in MILESTONES[:2]],
        })
    return table


def print_tables(table: list, standing: dict) -> None:
    print("### The screen on the unchanged Ant-v5, seeds 1001-1003 (grid-search seeds)\n")
    note = ("Made by `python studies/2026-11-27_why_ppo_does_not_walk_on_ant/analyze.py` from "
            "`studies/2026-11-27_why_ppo_does_not_walk_on_ant/outputs/`. Return: the evaluation at that step "
            "(10 deterministic episodes), mean ± se over the seeds that reached it. Above standing still: evaluations "
            "after step 0 above the seed's zero-action return "
            f"({', '.join(f'{seed}: {value:,.0f}' for seed, value in standing.items())}). Episode length and std: "
            "mean over the evaluation rows of the 100k steps up to the milestone.")
    print(textwrap.fill(note, 120, break_long_words=False, break_on_hyphens=False) + "\n")  # Markdown lines <= 120
    print("| configuration | seeds | steps done | return 250k | return 500k | return 1M | above standing still | "
          "first above (per seed) | train episode length 250k / 500k | policy std 250k / 500k |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for row in table:
        print(f"| {row['label']} | {row['seeds']} | {row['steps']:,} | " + " | ".join(row["returns"])
              + f" | {row['above']} | {row['first']} | {' / '.join(x or '–' for x in row['length'])} | "
              + f"{' / '.join(x or '–' for x in row['std'])} |")
    print("\n| configuration | flags |\n|---|---|")
    for row in table:
        description = row["description"]
        print(f"| {row['label']} | {'`' + description + '`' if description.startswith('--') else description} |")


def plot(configs: list, standing: dict, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(18, 5))
    # a configuration run at 500k and at 1 M keeps one colour; its longer run is drawn thick and pale beneath
    names = [label.split(" (")[0] for label, _, _ in configs]
    order = {name: k for k, name in enumerate(dict.fromkeys(names))}  # one colour per configuration
    last_of_name = {name: index for index, name in enumerate(names)}  # configs list the shorter run first
    for index, (label, _, runs) in enumerate(configs):
        name = names[index]
        color = plt.cm.tab20((2 * order[name]) % 20 + (2 * order[name] // 20) % 2)  # dark tab20 colours, then light
        longer = names.count(name) > 1 and index == last_of_name[name]
        style = dict(linewidth=3.5, alpha=0.45, zorder=1) if longer else dict(linewidth=1.5, zorder=2)
        for column, axis, source in (("return_mean", axes[0], "evaluations.csv"),
                                     ("train_episode_length_mean", axes[1], "training.csv"),
                                     ("policy_std_mean", axes[2], "training.csv")):
            curves = {}
            for run_dir in runs.values():
                for row in read_rows(os.path.join(run_dir, source)):
                    if row[column] != "":
                        curves.setdefault(int(row["global_step"]), []).append(float(row[column]))
            steps = sorted(s for s, v in curves.items() if len(v) == len(runs))
            axis.plot(steps, [np.mean(curves[s]) for s in steps], color=color, label=label,
                      linestyle="--" if label in SB3_DESCRIPTIONS else "-", **style)
    if standing:  # Ant: the zero action's return; HalfCheetah cannot fall, and has none
        axes[0].axhline(np.mean(list(standing.values())), color="black", linewidth=0.8, linestyle=":",
                        label="standing still")
    for axis, title in zip(axes, ("evaluation return (seed mean)", "training episode length", "policy std")):
        axis.set_title(title)
        axis.set_xlabel("environment steps")
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plot", help="write the figure to this PNG instead of printing the tables")
    args = parser.parse_args()
    configs = discover()
    seeds = sorted({seed for _, _, runs in configs for seed in runs})
    standing = standing_still_returns(seeds)
    if args.plot:
        plot(configs, standing, args.plot)
    else:
        print_tables(summarize(configs, standing), standing)


if __name__ == "__main__":
    main()
