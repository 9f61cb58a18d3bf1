"""Which units are tau-dormant right after a recycle: the recycled ones (silent at birth) or others (moved by their
layer's LayerNorm)? One extra recycle on the final checkpoints of the screen's PPO_ReDo runs, scored on 256 states
of the final policy's own episode on the last task (docs/baselines.md, "PPO_ReDo (screen)").

    python studies/2026-11-26_redo_screen/diagnose_recycles.py HalfCheetah /tmp/redo_screen   (from the repository root)
"""
import dataclasses
import os
import sys
import types

import numpy as np
import torch

sys.path.insert(0, os.getcwd())
import nonstationary_envs  # noqa: E402
import ppo_redo_continuous as redo  # noqa: E402

env_id, root = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "/tmp/redo_screen"
for seed in (1001, 1002, 1003):
    ckpt = torch.load(f"{root}/{env_id}/PPO_ReDo/seed{seed}/checkpoint.pt", weights_only=False)
    args = redo.Args(**{k: v for k, v in ckpt["args"].items() if k in {f.name for f in dataclasses.fields(redo.Args)}})
    env = nonstationary_envs.BatchedEnv(f"{env_id}-v5", "paralysis", "back-one", "floor", num_sims=1, nthread=1,
                                        max_episode_steps=1000)
    env.set_task(None, 4)
    gens = [torch.Generator().manual_seed(seed)]
    agent = redo.make_agent(args, env.observation_dim, env.action_dim, gens, torch.device("cpu"))
    agent.actor.load_state_dict(ckpt["actor"]); agent.critic.load_state_dict(ckpt["critic"])
    agent.actor_optimizer.load_state_dict(ckpt["actor_optimizer"])
    agent.critic_optimizer.load_state_dict(ckpt["critic_optimizer"])
    rms = redo.RunningMeanStd(1, (env.observation_dim,)); rms.load_state_dict(ckpt["obs_rms"])
    obs = env.reset(None, [seed]).reshape(1, 1, -1); states = []
    for t in range(256):
        o = rms.normalize(obs, 10.0); states.append(o[0, 0])
        with torch.no_grad():
            a = agent.actor(torch.from_numpy(o)).numpy()
        nxt, r, term, trunc = env.step(a.reshape(1, -1))[:4]
        obs = nxt.reshape(1, 1, -1)
        if term.any(): obs = env.reset(np.array([0])).reshape(1, 1, -1)
    x = torch.from_numpy(np.stack(states))[None]
    for name in ("critic", "actor"):
        net = getattr(agent, name)
        before = [redo.dormant_mask(a[0], 0.025) for a in net.hidden_activations(x)]
        run = types.SimpleNamespace(agent=agent, generators=gens)
        a2 = dataclasses.replace(args, redo_frequency=1)
        res = redo.recycle_dormant_units(run, name, x, np.array([True]), a2)
        after = [redo.dormant_mask(a[0], 0.025) for a in net.hidden_activations(x)]
        born = [int((b & a).sum()) for b, a in zip(before, after)]
        new = [int((~b & a).sum()) for b, a in zip(before, after)]
        print(env_id, seed, name, "dormant before per layer", [int(b.sum()) for b in before],
              "recycled still dormant", born, "newly dormant others", new)
