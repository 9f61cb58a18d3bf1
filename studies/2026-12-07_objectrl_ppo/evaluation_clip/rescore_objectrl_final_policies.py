"""The final policies (1 M steps) of phase 1's first ObjectRL runs, scored both ways by the fixed adapter's
evaluation: ours (the mode clipped to the bounds) and ObjectRL's (unclipped), 10 episodes on task 1.

    python studies/2026-12-07_objectrl_ppo/evaluation_clip/rescore_objectrl_final_policies.py RUN_DIR ENV SEED

RUN_DIR: a first run's directory (its objectrl_logs/ hold ObjectRL's own checkpoint of the final agent). The actor's
mean is computed by hand from the checkpoint's weights (Linear, LayerNorm without gain and shift, ReLU, twice, then
Linear), as ObjectRL's actor computes it, so this runs with the repository's requirements; its rounding differs from
ObjectRL's own forward pass in the last digits, so the unclipped return agrees with the run's logged row to about
1e-9 relative, not bit for bit.
"""

import glob
import json
import sys
import types
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import objectrl_envs  # noqa: E402


def main(run_dir: str, env: str, seed: int) -> dict:
    torch.set_num_threads(1)
    checkpoint = sorted(glob.glob(f"{run_dir}/objectrl_logs/*/ppo/seed_*/*/checkpoint.pt"))[-1]
    state = torch.load(checkpoint, weights_only=True)
    prefix = "actor.model.arch.model."
    weights = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}

    def mean(x):
        for layer in ("0", "3"):
            x = torch.relu(torch.nn.functional.layer_norm(x @ weights[f"{layer}.weight"].T + weights[f"{layer}.bias"],
                                                          (weights[f"{layer}.bias"].shape[0],)))
        return x @ weights["6.weight"].T + weights["6.bias"]

    class Agent:
        def select_action(self, state, is_training=False):
            with torch.no_grad():
                return {"action": mean(state)}

    args = types.SimpleNamespace(env_id=f"{env}-v5", experiment="paralysis", strategy="back-one",
                                 friction_mode="floor", steps_per_task=500_000)
    eval_env = objectrl_envs.adapter_make_env(args)("eval", seed, None, eval_env=True)
    ours, objectrls = objectrl_envs.evaluate_episodes(Agent(), eval_env, 1, seed, 10)
    return {"run_dir": run_dir, "env": env, "seed": seed, "task": 1, "episodes": 10,
            "return_mean": float(ours.mean()), "return_mean_unclipped": float(objectrls.mean())}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
