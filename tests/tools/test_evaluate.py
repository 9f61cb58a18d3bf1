"""scripts/evaluate.py's unclipped return (ObjectRL's evaluation) against episodes stepped with unclipped actions."""

import numpy as np
import pytest

import nonstationary_envs
from scripts import evaluate


@pytest.mark.parametrize("env_id", ["HalfCheetah-v5", "Ant-v5"])
def test_unclipped_returns_are_those_of_episodes_stepped_unclipped(env_id):
    """Episodes stepped with actions clipped to the bounds, and the same episodes stepped with the actions as they
    are (MuJoCo clamps the torque of a ctrllimited actuator itself): the same observations step for step, and the
    unclipped episodes' returns are what unclipped_returns makes of the clipped ones. The episodes stop after
    different numbers of steps, as an evaluation's episodes end (Ant terminates)."""
    episodes, lengths = 3, np.array([40, 75, 120])
    clipped_env, unclipped_env = (nonstationary_envs.BatchedEnv(env_id, "paralysis", "back-one", num_sims=episodes)
                                  for _ in range(2))
    low, high = clipped_env.single_action_space.low, clipped_env.single_action_space.high
    seeds = [7 + 100 + i for i in range(episodes)]
    for env in (clipped_env, unclipped_env):
        env.set_task(None, 2)
    obs = clipped_env.reset(None, seeds)
    np.testing.assert_array_equal(obs, unclipped_env.reset(None, seeds))
    rng = np.random.default_rng(0)
    returns, reference, actions = np.zeros(episodes), np.zeros(episodes), []
    for step in range(lengths.max()):
        action = rng.uniform(-1.8, 1.8, (episodes, clipped_env.action_dim)).astype(np.float32)
        actions.append(action)
        ids = np.flatnonzero(step < lengths)
        next_obs, reward, _, _ = clipped_env.step(np.clip(action, low, high)[ids], ids)
        unclipped_obs, unclipped_reward, _, _ = unclipped_env.step(action[ids], ids)
        np.testing.assert_array_equal(next_obs, unclipped_obs)  # the same motion
        returns[ids] += reward
        reference[ids] += unclipped_reward
    unclipped, entries_beyond = evaluate.unclipped_returns(clipped_env, returns, lengths, actions)
    # the env sums its control cost in float32 (gymnasium's, in the actions' dtype): equal to its rounding
    np.testing.assert_allclose(unclipped, reference, rtol=1e-7, atol=1e-5)
    assert (unclipped < returns - 1).all()  # the control cost beyond the bounds was charged
    beyond = sum(int((np.abs(a) > 1)[step < lengths].sum()) for step, a in enumerate(actions))
    assert entries_beyond == beyond > 0
