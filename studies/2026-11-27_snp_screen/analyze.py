"""Summarize the PPO_SnP screen (docs/baselines.md, "PPO_SnP (screen)"): each seed's AULC (mean of
evaluations.csv's return_mean over all evaluations), final return and dormant-unit percentage at the task ends
(plasticity.csv), beside PPO's from the PPO_ReDo screen (studies/2026-11-26_redo_screen/analysis.txt: the same
setting, flags and seeds), and the paired differences (PPO_SnP - PPO) with the paired one-sided t-test
(H1: PPO_SnP > PPO).

    python studies/2026-11-27_snp_screen/analyze.py /work/snp_screen > studies/2026-11-27_snp_screen/analysis.txt
"""

import importlib.util
import os
import re
import sys

import numpy as np
from scipy import stats

HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location("redo_screen_analyze",
                                               os.path.join(HERE, "..", "2026-11-26_redo_screen", "analyze.py"))
redo_screen = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(redo_screen)  # its rows() and mean_se(), the same definitions for both screens


def ppo_from_redo_screen(env: str = "HalfCheetah") -> dict:
    """{seed: (AULC, final, critic dormant % at the task ends)} of PPO in
    studies/2026-11-26_redo_screen/analysis.txt."""
    with open(os.path.join(HERE, "..", "2026-11-26_redo_screen", "analysis.txt")) as f:
        section = f.read().split(f"\n{env} PPO\n", 1)[1].split("\n\n", 1)[0]
    pattern = r"seed(\d+): AULC (-?\d+), final (-?\d+);.*critic dormant % at task ends ([\d. ]+)"
    return {int(seed): (float(aulc), float(final), [float(v) for v in dormant.split()])
            for seed, aulc, final, dormant in re.findall(pattern, section)}


def snp_runs(root: str, env: str = "HalfCheetah") -> dict:
    """{seed: (AULC, final, critic dormant % at the task ends)} of the finished PPO_SnP runs under ``root``."""
    found = {}
    for seed in (1001, 1002, 1003):
        seed_dir = os.path.join(root, env, "PPO_SnP", f"seed{seed}")
        if not os.path.exists(os.path.join(seed_dir, "summary.json")):
            continue
        returns = [float(r["return_mean"]) for r in redo_screen.rows(os.path.join(seed_dir, "evaluations.csv"))]
        task_ends = [r for r in redo_screen.rows(os.path.join(seed_dir, "plasticity.csv"))
                     if int(r["global_step"]) > 0 and r["network"] == "critic"]
        found[seed] = (float(np.mean(returns)), returns[-1], [float(r["dormant_percent"]) for r in task_ends])
    return found


def main(root: str) -> None:
    ppo, snp = ppo_from_redo_screen(), snp_runs(root)
    seeds = sorted(set(ppo) & set(snp))
    print("HalfCheetah paralysis back-one, 5 tasks x 40k steps, seeds " + ", ".join(map(str, seeds)))
    for name, runs in (("PPO (the PPO_ReDo screen)", ppo), ("PPO_SnP", snp)):
        aulc, final = [runs[s][0] for s in seeds], [runs[s][1] for s in seeds]
        dormant = np.mean([runs[s][2] for s in seeds], axis=0)
        print(f"{name}: AULC per seed {' / '.join(f'{v:.0f}' for v in aulc)} "
              f"({'%.0f +- %.0f' % redo_screen.mean_se(aulc)}); "
              f"final {' / '.join(f'{v:.0f}' for v in final)} ({'%.0f +- %.0f' % redo_screen.mean_se(final)}); "
              f"critic dormant % at the task ends {' '.join(f'{v:.1f}' for v in dormant)} (mean {dormant.mean():.1f})")
    for index, metric in ((0, "AULC"), (1, "final")):
        difference = [snp[s][index] - ppo[s][index] for s in seeds]
        test = stats.ttest_rel([snp[s][index] for s in seeds], [ppo[s][index] for s in seeds], alternative="greater")
        print(f"{metric} difference (PPO_SnP - PPO): {', '.join(f'{v:+.0f}' for v in difference)} "
              f"({'%+.0f +- %.0f' % redo_screen.mean_se(difference)}); paired one-sided t-test p = {test.pvalue:.2f}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/work/snp_screen")
