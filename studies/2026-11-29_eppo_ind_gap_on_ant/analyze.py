"""The walk from PPO to EPPO_ind and the screen of the critic's readings, as Markdown tables.

    python studies/2026-11-29_eppo_ind_gap_on_ant/analyze.py studies/2026-11-29_eppo_ind_gap_on_ant/outputs \\
        [--plot studies/2026-11-29_eppo_ind_gap_on_ant/walk.png]
    # the live runs (partial ones cut)
    python studies/2026-11-29_eppo_ind_gap_on_ant/analyze.py /work/eppo_critic/runs
    # some configurations, cut where they are
    python studies/2026-11-29_eppo_ind_gap_on_ant/analyze.py ROOT --only PPO,EPPO_mse_mean

ROOT holds one folder per configuration (launch.sh's names), each with seed<k>/ run directories (evaluations.csv;
scalars.csv.gz from `launch.sh --collect`, or a live run's TensorBoard events). Every configuration is cut at the
step that all runs have reached (an unfinished study gives interim tables, marked so). Prints:

1. AULC (the mean evaluation return, scripts/summarize.py) and the return at the last task end per configuration:
   mean ± standard error over seeds, each seed's AULC, and for each step of the walk the one-sided paired t-test
   (the paper's) that it loses return against the line above;
2. AULC per task (the evaluations that measure the task, as
   studies/2026-11-26_paper_length_v0.1_defaults/analyze.py);
3. the critic's diagnostics (the evidential/ tags, means over each run's updates, then over seeds);
4. the rule (README): each candidate against the walk's EPPO_ind, paired by seed;
5. the rule's two pipeline checks for --norm-reward, when ROOT/checks/ holds them (launch.sh) and a --norm-reward
   line is among the configurations: PPO walks on the intact Ant-v5 within 500k steps, and PPO with --norm-reward
   is not lower on HalfCheetah back-one at 1 M steps;
6. the paper's kappa grid at the new default (Appendix B: EPPO_ind, kappa in {0.01, 0.05, 0.1}, by mean AULC),
   when its lines are there: the kappa it picks once every line has finished.
7. the evidence run after item 4 at the new default (README, "Evidence after item 4"): each such line against the
   line it changes by one flag, paired by seed, and against PPO+norm-reward.
"""

import argparse
import csv
import glob
import importlib.util
import os
import sys
import textwrap

import numpy as np
from scipy import stats

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, REPO)
from scripts import summarize  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import scalars  # noqa: E402

WALK = ("PPO", "EPPO_mse_mean", "EPPO_mean", "EPPO_ind")
CANDIDATES = {  # name: (may become the default, the baseline it must also reach)
    "EPPO_ind+hp-algorithm1": (True, "PPO"),
    "EPPO_ind+norm-reward": (True, "PPO+norm-reward"),
    "EPPO_ind+clip-none": (False, "PPO"),
    "EPPO_ind+nll-mse-omega": (False, "PPO"),
}
STEPS_PER_TASK = 500_000
DIAGNOSTICS = ("evidential/nu", "evidential/nu_min", "evidential/alpha", "evidential/beta",
               "evidential/value_var_max", "evidential/student_t_scale", "evidential/targets_outside_2_scales",
               "evidential/zeta", "evidential/error_near_termination", "evidential/error_elsewhere",
               "evidential/critic_grad_norm", "evidential/grad_share_omega", "losses/explained_variance")
BETTER_MARGIN = 0.10  # the rule: at least 10 % above today's EPPO_ind's mean AULC, and higher on every seed
ANT_CHECK = os.path.join("checks", "ant-intact-500k", "PPO+norm-reward")
HALFCHEETAH_CHECK = os.path.join("checks", "halfcheetah-back-one-1M")
WALK_WITHIN = 500_000  # the Ant check: a seed walks when an evaluation in (0, 500k] is above its standing-still return
CHECK_P = 0.05  # the HalfCheetah check fails when "norm-reward lower than today's PPO" has a paired p at or below it
# the paper's kappa grid for EPPO_ind (Appendix B) at the reading the rule chose; 0.01 is the screen's line
KAPPA_GRID = {0.01: "EPPO_ind+norm-reward", 0.05: "EPPO_ind+norm-reward_kappa0.05",
              0.1: "EPPO_ind+norm-reward_kappa0.1"}
# evidence only, after item 4 (README, "Evidence after item 4"): a line at the new default -> the line it changes by
# one flag (--critic-grad-clip none)
AT_NEW_DEFAULT = {"EPPO_ind+norm-reward+clip-none": "EPPO_ind+norm-reward"}


def standing_still_returns(seeds: list) -> dict:
    """Per seed: the zero action's mean evaluation return on Ant-v5 (the measure of
    studies/2026-11-27_why_ppo_does_not_walk_on_ant/analyze.py)."""
    spec = importlib.util.spec_from_file_location(
        "ant_walk_analyze", os.path.join(REPO, "studies", "2026-11-27_why_ppo_does_not_walk_on_ant", "analyze.py"))
    ant_walk = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ant_walk)
    return ant_walk.standing_still_returns(seeds)


def load_seeds(folder: str) -> dict:
    """{seed: evaluations} of the seed<k>/ run directories in ``folder`` that have evaluations."""
    found = {}
    for path in sorted(glob.glob(os.path.join(folder, "seed*", "evaluations.csv"))):
        evaluations = summarize.read_evaluations(path)
        if evaluations:
            found[int(os.path.basename(os.path.dirname(path))[len("seed"):])] = evaluations
    return found


def pipeline_checks(root: str) -> None:
    """The rule's two checks for a change to every script's pipeline (README, "The pipeline checks")."""
    ant = load_seeds(os.path.join(root, ANT_CHECK))
    cheetah = {name: load_seeds(os.path.join(root, HALFCHEETAH_CHECK, name)) for name in ("PPO", "PPO+norm-reward")}
    if not ant and not any(cheetah.values()):
        return
    print("\n#### The pipeline checks for --norm-reward (README, \"The pipeline checks\")\n")
    if ant:
        standing = standing_still_returns(sorted(ant))
        done = min(evaluations[-1].global_step for evaluations in ant.values())
        firsts = {seed: next((e.global_step for e in evaluations if 0 < e.global_step <= WALK_WITHIN
                              and e.return_mean > standing[seed]), None) for seed, evaluations in ant.items()}
        walking = sum(first is not None for first in firsts.values())
        verdict = ("passes" if walking >= 2 else "fails" if done >= WALK_WITHIN else "not decided yet")
        line = (f"Ant-v5 intact, PPO --norm-reward, up to step {done:,}: first evaluation above standing still "
                + ", ".join(f"seed {seed}: {'never' if first is None else f'{first:,}'} (standing still "
                            f"{standing[seed]:,.0f})" for seed, first in sorted(firsts.items()))
                + f"; {walking} of {len(firsts)} seeds walk within {WALK_WITHIN:,}: **{verdict}**")
        print(textwrap.fill(line, 120, break_long_words=False, break_on_hyphens=False) + "\n")  # Markdown lines <= 120
        # beside the rule's measure, what 2026-11-27_why_ppo_does_not_walk_on_ant's tables also show: how often, and
        # the return at the cut
        later = [(seed, e) for seed, evaluations in ant.items() for e in evaluations if 0 < e.global_step <= done]
        above = sum(e.return_mean > standing[seed] for seed, e in later)
        print(f"Evaluations above standing still: {above} of {len(later)}; return at step {done:,}: "
              + mean_se_text([cut(evaluations, done)[-1].return_mean for evaluations in ant.values()]) + "\n")
    if all(cheetah.values()):
        up_to = min(evaluations[-1].global_step for by_seed in cheetah.values() for evaluations in by_seed.values())
        aulcs = {name: {seed: summarize.aulc(cut(evaluations, up_to)) for seed, evaluations in by_seed.items()}
                 for name, by_seed in cheetah.items()}
        p = paired_lower_p(aulcs["PPO+norm-reward"], aulcs["PPO"])
        final = up_to >= 2 * STEPS_PER_TASK
        verdict = ("not decided yet" if not final or p == "n/a" else
                   "passes" if float(p) > CHECK_P else "fails")
        print(f"HalfCheetah-v5 back-one, AULC up to step {up_to:,}" + ("" if final else " (interim)") + ":\n")
        print("| configuration | AULC | per seed |\n|---|---|---|")
        for name, by_seed in aulcs.items():
            print(f"| {name} | {mean_se_text(by_seed.values())} | "
                  + ", ".join(f"{by_seed[seed]:,.0f}" for seed in sorted(by_seed)) + " |")
        print(f"\np (PPO+norm-reward lower than PPO, paired, one-sided) = {p}: **{verdict}**")


def kappa_grid(aulcs: dict, finished: bool) -> None:
    """The paper's kappa grid (Appendix B) at the new default: the kappa with the highest mean AULC, once every line
    has run the whole protocol; beside it, the paired one-sided p that each kappa is above 0.01 (not the rule's)."""
    lines = {kappa: name for kappa, name in KAPPA_GRID.items() if name in aulcs}
    if len(lines) < 2:
        return
    print("\n#### The paper's kappa grid at the new default (EPPO_ind, --norm-reward; Appendix B: by mean AULC)\n")
    print("| kappa | configuration | AULC | per seed | p (above kappa 0.01, paired, one-sided) |")
    print("|---|---|---|---|---|")
    means = {kappa: np.mean(list(aulcs[name].values())) for kappa, name in lines.items()}
    for kappa, name in lines.items():
        p = paired_lower_p(aulcs[KAPPA_GRID[0.01]], aulcs[name]) if kappa != 0.01 and 0.01 in lines else ""
        per_seed = ", ".join(f"{aulcs[name][s]:,.0f}" for s in sorted(aulcs[name]))
        print(f"| {kappa:g} | {name} | {mean_se_text(aulcs[name].values())} | {per_seed} | {p} |")
    best = max(means, key=means.get)
    if finished and len(lines) == len(KAPPA_GRID):
        print(f"\nThe grid picks **kappa {best:g}** (the highest mean AULC).")
    else:
        print(f"\nInterim: kappa {best:g} leads; the grid picks once its {len(KAPPA_GRID)} lines have finished.")


def gain_over(base: dict, line: dict) -> tuple:
    """Over the two lines' common seeds: whether ``line``'s AULC is higher on every seed, and its mean gain."""
    seeds = sorted(set(base) & set(line))
    every_seed = all(line[s] > base[s] for s in seeds)
    return every_seed, np.mean([line[s] for s in seeds]) / np.mean([base[s] for s in seeds]) - 1.0


def evidence_at_new_default(aulcs: dict) -> None:
    """Each AT_NEW_DEFAULT line against its one-flag base (higher on every seed, the mean gain, the paired one-sided
    p that it is higher) and the paired one-sided p that it is above PPO+norm-reward."""
    lines = {name: base for name, base in AT_NEW_DEFAULT.items() if name in aulcs and base in aulcs}
    if not lines:
        return
    print("\n#### Evidence at the new default (README, \"Evidence after item 4\"): each line against the line it "
          "changes by one flag, paired by seed\n")
    print("| line | against | higher on every seed | mean gain | p (higher, paired, one-sided) | "
          "p (above PPO+norm-reward, paired, one-sided) |")
    print("|---|---|---|---|---|---|")
    for name, base in lines.items():
        every_seed, gain = gain_over(aulcs[base], aulcs[name])
        above_ppo = paired_lower_p(aulcs["PPO+norm-reward"], aulcs[name]) if "PPO+norm-reward" in aulcs else "n/a"
        print(f"| {name} | {base} | {'yes' if every_seed else 'no'} | {gain:+.1%} | "
              f"{paired_lower_p(aulcs[base], aulcs[name])} | {above_ppo} |")


def read_scalars(run_dir: str) -> dict:
    """{tag: [(step, value)]} from scalars.csv.gz (collected), or from the live run (its events and carried scalars)."""
    path = os.path.join(run_dir, "scalars.csv.gz")
    pairs = scalars.read_csv(path) if os.path.exists(path) else scalars.collect(run_dir)
    found = {}
    for (tag, step), value in sorted(pairs.items()):
        found.setdefault(tag, []).append((step, value))
    return found


def load(root: str) -> dict:
    """{configuration: {seed: (run_dir, evaluations)}} of every configuration folder under ``root`` with evaluations."""
    runs = {}
    for folder in sorted(glob.glob(os.path.join(root, "*"))):
        by_seed = load_seeds(folder)
        if by_seed:
            runs[os.path.basename(folder)] = {seed: (os.path.join(folder, f"seed{seed}"), evaluations)
                                              for seed, evaluations in by_seed.items()}
    return runs


def cut(evaluations: list, up_to: int) -> list:
    return [e for e in evaluations if e.global_step <= up_to]


def mean_se_text(values) -> str:
    mean, se = summarize.mean_se(list(values))
    return f"{mean:,.0f} ± {se:,.0f}"


def paired_lower_p(lower: dict, higher: dict) -> str:
    """One-sided paired t-test that ``lower`` is below ``higher`` over their common seeds (the paper's test)."""
    seeds = sorted(set(lower) & set(higher))
    if len(seeds) < 2:
        return "n/a"
    difference = np.array([higher[s] - lower[s] for s in seeds])
    if np.all(difference == 0):
        return "1.000"
    return f"{stats.ttest_1samp(difference, 0.0, alternative='greater').pvalue:.3f}"


def report(root: str, plot_path=None, only=None) -> int:
    runs = load(root)
    if only:
        runs = {name: by_seed for name, by_seed in runs.items() if name in only}
    if not runs:
        print(f"error: no <configuration>/seed<k>/evaluations.csv under {root}", file=sys.stderr)
        return 2
    up_to = min(evaluations[-1].global_step for by_seed in runs.values() for _, evaluations in by_seed.values())
    tasks = max(1, -(-up_to // STEPS_PER_TASK))  # the tasks the evaluations up to the cut measure (task column)
    order = [name for name in (*WALK, "PPO+norm-reward", *CANDIDATES) if name in runs]
    order += sorted(set(runs) - set(order))
    aulcs = {name: {seed: summarize.aulc(cut(ev, up_to)) for seed, (_, ev) in runs[name].items()} for name in order}
    finished = up_to >= 5 * STEPS_PER_TASK
    print(f"### Ant-v5 paralysis back-one, seeds {', '.join(map(str, sorted(next(iter(runs.values())))))}, "
          f"up to step {up_to:,}" + ("" if finished else " (interim: the study has not finished)") + "\n")
    print("| configuration | AULC | per seed | return at the last evaluation | p (lower than the line above) |")
    print("|---|---|---|---|---|")
    for index, name in enumerate(order):
        last = [cut(ev, up_to)[-1].return_mean for _, ev in runs[name].values()]
        walk_above = [line for line in WALK[: WALK.index(name)] if line in aulcs] if name in WALK else []
        previous = walk_above[-1] if walk_above else None  # the walk's nearest step above that has runs
        p = paired_lower_p(aulcs[name], aulcs[previous]) if previous else ""
        per_seed = ", ".join(f"{aulcs[name][s]:,.0f}" for s in sorted(aulcs[name]))
        print(f"| {name} | {mean_se_text(aulcs[name].values())} | {per_seed} | {mean_se_text(last)} | {p} |")

    print("\n#### AULC per task (mean ± se over seeds)\n")
    print("| configuration | " + " | ".join(f"task {t}" for t in range(tasks)) + " |")
    print("|---|" + "---|" * tasks)
    for name in order:
        per_task = {}
        for _, evaluations in runs[name].values():
            for task in range(tasks):
                returns = [e.return_mean for e in cut(evaluations, up_to) if e.task == task]
                per_task.setdefault(task, []).append(np.mean(returns) if returns else np.nan)
        print(f"| {name} | " + " | ".join(mean_se_text(per_task[t]) for t in sorted(per_task)) + " |")

    print("\n#### The critic's diagnostics (mean over each run's updates up to the cut, then mean ± se over seeds)\n")
    print("| tag | " + " | ".join(order) + " |")
    print("|---|" + "---|" * len(order))
    run_scalars = {name: [read_scalars(run_dir) for run_dir, _ in runs[name].values()] for name in order}
    for tag in DIAGNOSTICS:
        cells = []
        for name in order:
            values = [np.nanmean([v for step, v in seed_scalars.get(tag, []) if step <= up_to])
                      for seed_scalars in run_scalars[name] if seed_scalars.get(tag)]
            cells.append("" if not values else f"{np.mean(values):.3g} ± {summarize.mean_se(values)[1]:.2g}")
        print(f"| {tag} | " + " | ".join(cells) + " |")

    candidates = [name for name in CANDIDATES if name in aulcs]
    if "EPPO_ind" in aulcs and candidates:
        print("\n#### The rule (README): each candidate against the walk's EPPO_ind, paired by seed\n")
        print("| candidate | may become the default | higher on every seed | mean gain | better | "
              "at least its PPO |")
        print("|---|---|---|---|---|---|")
        base = aulcs["EPPO_ind"]
        for name in candidates:
            allowed, ppo_line = CANDIDATES[name]
            every_seed, gain = gain_over(base, aulcs[name])
            better = every_seed and gain >= BETTER_MARGIN
            ppo_means = [np.mean(list(aulcs[line].values())) for line in {ppo_line, "PPO"} if line in aulcs]
            reaches = np.mean(list(aulcs[name].values())) >= max(ppo_means) if ppo_means else None
            print(f"| {name} | {'yes' if allowed else 'no (evidence only)'} | {'yes' if every_seed else 'no'} | "
                  f"{gain:+.1%} | {'yes' if better else 'no'} | "
                  f"{'n/a' if reaches is None else ('yes' if reaches else 'no')} |")

    if any("norm-reward" in name for name in runs):  # the checks bear on --norm-reward's lines alone
        pipeline_checks(root)
    kappa_grid(aulcs, finished)
    evidence_at_new_default(aulcs)

    if plot_path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(9, 4.5))
        for name in order:
            steps = [e.global_step for e in cut(next(iter(runs[name].values()))[1], up_to)]
            curves = np.array([[e.return_mean for e in cut(ev, up_to)][: len(steps)] for _, ev in runs[name].values()])
            mean = curves.mean(0)
            se = curves.std(0, ddof=1) / np.sqrt(len(curves)) if len(curves) > 1 else 0 * mean
            ax.plot(np.array(steps) / 1e6, mean, label=name)
            ax.fill_between(np.array(steps) / 1e6, mean - se, mean + se, alpha=0.2)
        for task in range(1, tasks):
            ax.axvline(task * STEPS_PER_TASK / 1e6, color="grey", lw=0.5)
        ax.set_xlabel("environment steps (M)")
        ax.set_ylabel("evaluation return (mean ± se over seeds)")
        ax.set_title("Ant-v5 paralysis back-one, seeds 1001-1003")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(plot_path, dpi=110)
        print(plot_path, file=sys.stderr)
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", help="a folder of <configuration>/seed<k>/ run directories")
    parser.add_argument("--plot", help="write the learning curves to this PNG")
    parser.add_argument("--only", help="these configurations alone, comma-separated (the cut is theirs)")
    args = parser.parse_args(argv)
    if not os.path.isdir(args.root):
        print(f"error: {args.root} is not a directory", file=sys.stderr)
        return 2
    return report(args.root, args.plot, args.only.split(",") if args.only else None)


if __name__ == "__main__":
    sys.exit(main())
