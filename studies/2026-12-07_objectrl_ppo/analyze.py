"""Phase 1 of the ObjectRL study: ObjectRL's PPO, our rebuild and our default PPO over the first 2 tasks (1 M steps),
and the pre-registered reading applied to them (README.md, "The reading").

    python studies/2026-12-07_objectrl_ppo/analyze.py > studies/2026-12-07_objectrl_ppo/phase1_tables.md
    python studies/2026-12-07_objectrl_ppo/analyze.py --plot studies/2026-12-07_objectrl_ppo/phase1_curves.png
    python studies/2026-12-07_objectrl_ppo/analyze.py --full-length \
        > studies/2026-12-07_objectrl_ppo/full_length_tables.md

Reads the collected outputs (outputs/paralysis/<Env>/back-one/<METHOD>/seed<k>/evaluations.csv) and our default
PPO's committed curves (2026-11-29_paper_length_v0.3_defaults, cut at 1 M). Cells with no run yet say so. With
--plot: each row's seed-mean curve over 0-1 M with its standard-error band (ObjectRL's own evaluation dashed), one
panel per env, the task change dotted and (Ant) the return of standing still dashed. With --full-length: the
full-length runs the rule calls for (outputs/full-length/, 9 × 500k, finished runs only) beside our default PPO's
(seeds 1-8) and the paper's PPO.
"""

import csv
import math
import sys
from pathlib import Path

from scipy import stats

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))
from scripts import runlist, summarize  # noqa: E402  (the repository's own tables and metrics)

DEFAULT_PPO = HERE.parent / "2026-11-29_paper_length_v0.3_defaults" / "outputs"
ENVS = ("Ant", "HalfCheetah")
SEEDS = (1, 2, 3)
PHASE_STEPS = 1_000_000
TASK_END = 500_000
STANDING_STILL = 994.0  # Ant-v5, zero actions (2026-11-27_why_ppo_does_not_walk_on_ant)
FAR_BELOW, AT_OURS = 0.70, 0.85  # the reading's HalfCheetah thresholds, as fractions of our default PPO's AULC
METHODS = (("PPO (ours, default)", DEFAULT_PPO, "PPO"), ("PPO_objectrl_flags", HERE / "outputs", "PPO_objectrl_flags"),
           ("ObjectRL_PPO", HERE / "outputs", "ObjectRL_PPO"))
# the rebuild with ObjectRL's choices that had no flag in phase 1's pin (launch.sh's CHOICE_FLAGS), one row each
CHOICES = tuple((method, HERE / "outputs", method)
                for method in ("PPO_objectrl_noshuffle", "PPO_objectrl_gaetrunc", "PPO_objectrl_both"))
# ObjectRL's PPO scored by ObjectRL's own evaluation (the mode unclipped, the control cost beyond the bounds
# charged): the column the adapter writes beside ours, and the first runs, whose adapter wrote only that return
UNCLIPPED = (("ObjectRL_PPO, its own evaluation (unclipped)", HERE / "outputs", "ObjectRL_PPO",
              "return_mean_unclipped"),
             ("ObjectRL_PPO, first runs (unclipped)", HERE / "outputs_unclipped_evaluation", "ObjectRL_PPO",
              "return_mean"))
ROWS = tuple(row + ("return_mean",) for row in METHODS + CHOICES) + UNCLIPPED  # (name, root, method, column)


def evaluations(root: Path, env: str, method: str, seed: int, column: str = "return_mean") -> dict | None:
    """{global_step: mean return} of one run up to PHASE_STEPS, or None unless it reached PHASE_STEPS."""
    path = root / "paralysis" / env / "back-one" / method / f"seed{seed}" / "evaluations.csv"
    if not path.exists():
        return None
    with open(path) as f:
        rows = {int(r["global_step"]): float(r[column]) for r in csv.DictReader(f)}
    return {s: r for s, r in rows.items() if s <= PHASE_STEPS} if PHASE_STEPS in rows else None


def seed_measures(curve: dict) -> dict:
    """AULC over 0-1 M (the mean of its evaluations), the returns at 500k and 1 M, and whether it walks (Ant)."""
    return {"aulc": sum(curve.values()) / len(curve), "at_500k": curve[TASK_END], "at_1m": curve[PHASE_STEPS],
            "walks_500k": curve[TASK_END] > STANDING_STILL,
            "walks_by_1m": max(curve[TASK_END], curve[PHASE_STEPS]) > STANDING_STILL}


def cell(root: Path, env: str, method: str, column: str = "return_mean") -> list | None:
    measures = [evaluations(root, env, method, seed, column) for seed in SEEDS]
    return None if any(m is None for m in measures) else [seed_measures(m) for m in measures]


def mean_curve(root: Path, env: str, method: str, column: str = "return_mean") -> tuple | None:
    """(steps, mean, se) over seeds 1-3 at each evaluation step of 0-1 M, or None unless every seed reached 1 M."""
    curves = [evaluations(root, env, method, seed, column) for seed in SEEDS]
    if any(c is None for c in curves):
        return None
    steps = sorted(curves[0])
    per_step = [mean_se([c[s] for c in curves]) for s in steps]
    return steps, [m for m, _ in per_step], [se for _, se in per_step]


def plot(path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(ENVS), figsize=(12, 4.2))
    for ax, env in zip(axes, ENVS):
        for color, (name, root, method, column) in enumerate(ROWS):  # one colour per row on both panels
            curve = mean_curve(root, env, method, column)
            if curve is None:
                continue
            steps, mean, se = curve
            x = [s / 1e6 for s in steps]
            dashed = (name, root, method, column) in UNCLIPPED
            ax.plot(x, mean, label=name, lw=1.3, color=f"C{color}", ls="--" if dashed else "-")
            ax.fill_between(x, [m - e for m, e in zip(mean, se)], [m + e for m, e in zip(mean, se)], alpha=0.15,
                            color=f"C{color}")
        ax.axvline(TASK_END / 1e6, color="grey", ls=":", lw=0.8)
        if env == "Ant":
            ax.axhline(STANDING_STILL, color="black", ls="--", lw=0.7, label="standing still")
        ax.set(xlabel="environment steps (M)", ylabel="evaluation return (10 episodes)",
               title=f"{env}-v5 paralysis back-one, seeds 1-3: mean ± se")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def mean_se(values: list) -> tuple:
    mean = sum(values) / len(values)
    se = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1) / len(values))
    return mean, se


def reading(env: str, cells: dict) -> list:
    """The README's outcomes, applied where their runs exist."""
    ours, rebuild, objectrl = (cells.get(name) for name, _, _ in METHODS[:3])
    lines = []
    if env == "Ant" and objectrl and rebuild:
        walks = {name: sum(m["walks_500k"] for m in runs) >= 2 for name, runs in
                 (("ObjectRL_PPO", objectrl), ("rebuild", rebuild))}
        outcome = {(True, False): "ObjectRL's PPO walks, our rebuild does not",
                   (False, False): "neither walks", (True, True): "both walk",
                   (False, True): "our rebuild walks, ObjectRL's PPO does not"}[walks["ObjectRL_PPO"], walks["rebuild"]]
        lines.append(f"Ant: {outcome} (walks within 500k: ObjectRL's PPO "
                     f"{sum(m['walks_500k'] for m in objectrl)} of 3 seeds, the rebuild "
                     f"{sum(m['walks_500k'] for m in rebuild)} of 3).")
        if any(m["walks_by_1m"] for m in objectrl):
            lines.append("The rule: ObjectRL's PPO walks on at least one seed by 1 M: Ant runs at full length "
                         "(after HalfCheetah's, if that runs).")
    if env == "HalfCheetah" and objectrl and ours:
        ratio = mean_se([m["aulc"] for m in objectrl])[0] / mean_se([m["aulc"] for m in ours])[0]
        outcome = ("far below ours, near the paper's level" if ratio <= FAR_BELOW else
                   "at ours" if ratio >= AT_OURS else "between the thresholds: undecided at 1 M")
        lines.append(f"HalfCheetah: ObjectRL's PPO is {outcome} (AULC 0-1 M {ratio:.2f} x our default PPO's).")
        if ratio < AT_OURS:
            lines.append("The rule: below 0.85 x ours: HalfCheetah runs at full length first.")
    return lines


def tables() -> str:
    out = ["# Phase 1: the first 2 tasks (1 M steps), seeds 1-3", "",
           "Regenerated by `python studies/2026-12-07_objectrl_ppo/analyze.py`. Mean ± standard error over seeds 1-3;",
           "Welch's two-sided p against our default PPO (3 seeds: a weak test; the reading rests on its thresholds).",
           ""]
    for env in ENVS:
        cells = {name: cell(root, env, method, column) for name, root, method, column in ROWS}
        out += [f"## {env}-v5 paralysis back-one", "",
                "| method | AULC 0-1 M | return at 500k | return at 1 M | × ours (AULC) | Welch p (AULC) |"
                + (" walks within 500k |" if env == "Ant" else ""),
                "|---|---|---|---|---|---|" + ("---|" if env == "Ant" else "")]
        ours = cells[METHODS[0][0]]
        for name, runs in cells.items():
            if runs is None:
                out.append(f"| {name} | no complete runs yet | | | | |" + (" |" if env == "Ant" else ""))
                continue
            row = [name] + ["{:,.0f} ± {:,.0f}".format(*mean_se([m[k] for m in runs]))
                            for k in ("aulc", "at_500k", "at_1m")]
            if name == METHODS[0][0]:
                row += ["1.00", ""]
            else:
                ratio = mean_se([m["aulc"] for m in runs])[0] / mean_se([m["aulc"] for m in ours])[0]
                p = stats.ttest_ind([m["aulc"] for m in runs], [m["aulc"] for m in ours], equal_var=False).pvalue
                row += [f"{ratio:.2f}", f"{p:.3f}"]
            if env == "Ant":
                row.append(f"{sum(m['walks_500k'] for m in runs)} of 3")
            out.append("| " + " | ".join(row) + " |")
        out += [""] + (reading(env, cells) or ["The reading: its runs are not complete yet."]) + [""]
    return "\n".join(out)


# ---- the full-length runs of the rule ----

FULL_LENGTH = HERE / "outputs" / "full-length"
PAPER_SEEDS = 15
OUR_SEEDS = tuple(range(1, 9))


def full_length_measures(root: Path, env: str, method: str, seeds, column: str = "return_mean") -> dict:
    """{seed: (AULC, Final Return)} of the finished 9 × 500k runs of ``method`` under ``root`` (the paper's metrics,
    scripts/summarize.py's), read from ``column``."""
    measures = {}
    for seed in seeds:
        run_dir = root / "paralysis" / env / "back-one" / method / f"seed{seed}"
        if not (run_dir / "summary.json").exists():
            continue
        with open(run_dir / "evaluations.csv") as f:
            curve = [summarize.Evaluation(int(r["global_step"]), int(r["task"]), float(r[column]))
                     for r in csv.DictReader(f)]
        measures[seed] = (summarize.aulc(curve), summarize.final_return(curve, TASK_END, 9))
    return measures


def full_length_tables(root: Path = FULL_LENGTH) -> str:
    paper = summarize.read_paper_results()
    out = ["# The full-length runs: 9 × 500k steps, paralysis back-one", "",
           "Regenerated by `python studies/2026-12-07_objectrl_ppo/analyze.py --full-length`. Mean ± standard error",
           "over the finished runs (n); Welch's two-sided p against our default PPO (seeds 1-8, v0.3's committed runs)",
           f"and against the paper's PPO (its mean ± se over {PAPER_SEEDS} seeds, its standard deviation se·√15).",
           ""]
    for env in ENVS:
        rows = [("ObjectRL_PPO, our evaluation", full_length_measures(root, env, "ObjectRL_PPO", range(1, 6))),
                ("ObjectRL_PPO, its own evaluation (unclipped)",
                 full_length_measures(root, env, "ObjectRL_PPO", range(1, 6), "return_mean_unclipped"))]
        if not rows[0][1]:
            continue
        ours = full_length_measures(DEFAULT_PPO, env, "PPO", OUR_SEEDS)
        setting = runlist.Setting("paralysis", env, "back-one")
        out += [f"## {env}-v5 paralysis back-one", "",
                "| PPO | n | AULC | Final Return | × ours (AULC) | Welch p, ours (AULC / Final) "
                "| Welch p, the paper's (AULC / Final) |", "|---|---|---|---|---|---|---|"]
        papers = {metric: paper[(metric, setting, "PPO")] for metric in ("aulc", "final_return")}
        out.append(f"| the paper's | {PAPER_SEEDS} | {papers['aulc'][0]:,.0f} ± {papers['aulc'][1]:,.0f} | "
                   f"{papers['final_return'][0]:,.0f} ± {papers['final_return'][1]:,.0f} | | | |")
        for name, measures in [("ours (default)", ours)] + rows:
            cells, p_ours, p_paper = [], [], []
            for index, metric in enumerate(("aulc", "final_return")):
                values = [m[index] for m in measures.values()]
                mean, se = mean_se(values)
                cells.append(f"{mean:,.0f} ± {se:,.0f}")
                p_ours.append(stats.ttest_ind(values, [m[index] for m in ours.values()], equal_var=False).pvalue)
                paper_mean, paper_se = papers[metric]
                p_paper.append(stats.ttest_ind_from_stats(mean, se * math.sqrt(len(values)), len(values), paper_mean,
                                                          paper_se * math.sqrt(PAPER_SEEDS), PAPER_SEEDS,
                                                          equal_var=False).pvalue)
            ratio = mean_se([m[0] for m in measures.values()])[0] / mean_se([m[0] for m in ours.values()])[0]
            mine = name == "ours (default)"
            out.append(f"| {name} | {len(measures)} | {cells[0]} | {cells[1]} | {ratio:.2f} | "
                       + ("" if mine else f"{p_ours[0]:.3f} / {p_ours[1]:.3f}") + f" | {p_paper[0]:.3f} / "
                       f"{p_paper[1]:.3f} |")
        out.append("")
    if len(out) == 6:
        out.append("No full-length run has finished yet.")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--plot"] and len(sys.argv) == 3:
        plot(sys.argv[2])
    elif sys.argv[1:] == ["--full-length"]:
        sys.stdout.write(full_length_tables())
    elif len(sys.argv) == 1:
        sys.stdout.write(tables())
    else:
        print(f"usage: {sys.argv[0]} [--plot FILE.png | --full-length]", file=sys.stderr)
        sys.exit(2)
