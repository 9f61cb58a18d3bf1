"""Tests for nonstationary_envs.BatchedEnv: every observation, reward, terminated and truncated flag equals
gymnasium's (make_nonstationary_env, i.e. gymnasium.make with its TimeLimit) bit for bit, with per-simulation
tasks, task switches, seeded and unseeded resets and episode ends; thread count independence; and
get_state/set_state round trips."""

import json

import numpy as np
import pytest

from nonstationary_envs import BatchedEnv, make_nonstationary_env

NUM_SIMS = 4


def _assert_same_as_gymnasium(
    env_id,
    experiment,
    strategy,
    friction_mode,
    *,
    tasks,
    switches,
    seeds,
    steps,
    max_episode_steps,
    action_scale=1.0,
    action_dtype=np.float32,
    reseed_every=3,
    action_seed=0,
    gym_kwargs=None,
):
    """Run BatchedEnv and one gymnasium env per simulation side by side; compare everything with
    np.array_equal. tasks: initial task per simulation; switches: {step: [(sim, task), ...]}.
    Ended simulations are reset, every reseed_every-th end with a fresh seed, the others continuing
    their Generator. gym_kwargs go to both (BatchedEnv's keyword of the same name). Returns (number of sim-steps
    compared, terminations, truncations)."""
    n = len(tasks)
    gym_kwargs = gym_kwargs or {}
    batch = BatchedEnv(
        env_id, experiment, strategy, friction_mode, num_sims=n, nthread=1, max_episode_steps=max_episode_steps,
        **gym_kwargs,
    )
    refs = [
        make_nonstationary_env(env_id, experiment, strategy, friction_mode, max_episode_steps=max_episode_steps,
                               **gym_kwargs)
        for _ in range(n)
    ]
    for k, task in enumerate(tasks):
        batch.set_task([k], task)
        refs[k].get_wrapper_attr("set_task")(task)
    assert batch.task_index.tolist() == list(tasks)
    for k in range(n):
        assert batch.task_description(tasks[k]) == refs[k].get_wrapper_attr("task_description")()

    obs = batch.reset(None, seeds=list(seeds))
    assert obs.dtype == np.float64 and obs.shape == (n, batch.observation_dim)
    for k in range(n):
        ref_obs, _ = refs[k].reset(seed=seeds[k])
        assert np.array_equal(obs[k], ref_obs), (k, "initial reset")

    rng = np.random.default_rng(action_seed)
    ends = terminations = truncations = 0
    next_seed = 1000 + int(seeds[0])
    for t in range(steps):
        for k, task in switches.get(t, ()):
            batch.set_task([k], task)
            refs[k].get_wrapper_attr("set_task")(task)
        actions = rng.uniform(-action_scale, action_scale, size=(n, batch.action_dim)).astype(action_dtype)
        obs, reward, terminated, truncated = batch.step(actions)
        assert obs.dtype == np.float64 and reward.dtype == np.float64
        assert terminated.dtype == bool and truncated.dtype == bool
        for k in range(n):
            ref_obs, ref_reward, ref_terminated, ref_truncated, _ = refs[k].step(actions[k])
            assert np.array_equal(obs[k], ref_obs), (t, k, np.abs(obs[k] - ref_obs).max())
            assert np.array_equal(reward[k], ref_reward), (t, k, reward[k], ref_reward)
            assert terminated[k] == ref_terminated, (t, k)
            assert truncated[k] == ref_truncated, (t, k)
        terminations += int(terminated.sum())
        truncations += int(truncated.sum())
        done = np.flatnonzero(terminated | truncated)
        if done.size:
            reset_seeds = []
            for _ in done:
                ends += 1
                if ends % reseed_every == 0:
                    reset_seeds.append(next_seed)
                    next_seed += 1
                else:
                    reset_seeds.append(None)
            obs = batch.reset(done, seeds=reset_seeds)
            for j, k in enumerate(done):
                ref_obs, _ = refs[k].reset(seed=reset_seeds[j])
                assert np.array_equal(obs[j], ref_obs), (t, k, "reset")
    return steps * n, terminations, truncations


@pytest.mark.parametrize(
    "experiment, strategy, friction_mode, tasks, switches, max_steps, action_dtype",
    [
        # floor mode: tasks 14 (4.0) 10 (3.0) 6 (2.0) 1 (0.75, governed by the body's 1.0 on Ant)
        ("slippery", "decreasing", "floor", (14, 10, 6, 1), {90: [(0, 13), (2, 3)], 200: [(1, 0)]}, 1000, np.float32),
        # governing mode: floor 0.5 and 0.75 do hold on Ant
        ("slippery", "increasing", "governing", (0, 1, 7, 14), {60: [(3, 0), (1, 2)], 170: [(0, 9)]}, 120, np.float64),
        ("paralysis", "cross", "floor", (0, 2, 4, 6), {75: [(0, 4), (2, 8)], 180: [(1, 3), (3, 4)]}, 1000, np.float32),
    ],
)
def test_ant_matches_gymnasium(experiment, strategy, friction_mode, tasks, switches, max_steps, action_dtype):
    compared, terminations, truncations = _assert_same_as_gymnasium(
        "Ant-v5",
        experiment,
        strategy,
        friction_mode,
        tasks=tasks,
        switches=switches,
        seeds=(11, 22, 33, 44),
        steps=250,
        max_episode_steps=max_steps,
        action_dtype=action_dtype,
    )
    assert compared == 1000
    # the episode ends (and the resets after them) were really exercised
    assert terminations > 0
    if max_steps < 250:
        assert truncations > 0


@pytest.mark.parametrize(
    "experiment, strategy, friction_mode, tasks, switches, action_scale, action_dtype",
    [
        ("slippery", "decreasing", "floor", (14, 11, 3, 0), {70: [(0, 2), (3, 12)], 190: [(2, 7)]}, 1.0, np.float32),
        ("slippery", "increasing", "governing", (0, 4, 9, 14), {40: [(1, 0)], 130: [(0, 14), (3, 1)]}, 1.0, np.float64),
        # actions beyond the action space: gymnasium neither clips them nor their control cost
        ("paralysis", "cross-v1", "floor", (0, 3, 4, 5), {55: [(0, 4), (2, 0)], 160: [(3, 8)]}, 2.0, np.float32),
    ],
)
def test_half_cheetah_matches_gymnasium(experiment, strategy, friction_mode, tasks, switches, action_scale,
                                        action_dtype):
    compared, terminations, truncations = _assert_same_as_gymnasium(
        "HalfCheetah-v5",
        experiment,
        strategy,
        friction_mode,
        tasks=tasks,
        switches=switches,
        seeds=(5, 6, 7, 8),
        steps=250,
        max_episode_steps=60,
        action_scale=action_scale,
        action_dtype=action_dtype,
        reseed_every=2,
    )
    assert compared == 1000
    assert terminations == 0  # HalfCheetah never terminates
    assert truncations == 4 * (250 // 60)


def test_stationary_matches_gymnasium():
    for env_id in ("Ant-v5", "HalfCheetah-v5"):
        _assert_same_as_gymnasium(
            env_id, "none", None, "floor", tasks=(0, 0), switches={}, seeds=(3, 4), steps=60, max_episode_steps=25
        )


def test_ant_without_contact_forces_matches_gymnasium():
    """--no-include-cfrc-ext-in-observation: gymnasium's Ant-v5 with include_cfrc_ext_in_observation=False (27
    entries: the 105 less the 78 contact forces), bit for bit, on paralysis tasks with episode ends."""
    kwargs = {"include_cfrc_ext_in_observation": False}
    compared, terminations, _ = _assert_same_as_gymnasium(
        "Ant-v5", "paralysis", "back-one", "floor", tasks=(0, 1, 2, 3), switches={80: [(0, 2)]}, seeds=(7, 8, 9, 10),
        steps=200, max_episode_steps=1000, gym_kwargs=kwargs)
    assert compared == 800 and terminations > 0
    assert BatchedEnv("Ant-v5", num_sims=1, **kwargs).observation_dim == 27
    assert BatchedEnv("Ant-v5", num_sims=1).observation_dim == 105
    with pytest.raises(ValueError, match="Ant-v5 only"):
        BatchedEnv("HalfCheetah-v5", num_sims=1, **kwargs)


def test_tasks_change_the_trajectories():
    """Guards the comparisons above: the per-simulation tasks must give different physics."""
    for env_id, experiment, strategy, friction_mode, tasks in [
        ("Ant-v5", "paralysis", "cross", "floor", (0, 4)),
        ("Ant-v5", "slippery", "increasing", "governing", (0, 2)),
        ("HalfCheetah-v5", "slippery", "increasing", "floor", (0, 1)),
    ]:
        batch = BatchedEnv(env_id, experiment, strategy, friction_mode, num_sims=2)
        for k, task in enumerate(tasks):
            batch.set_task([k], task)
        batch.reset(None, seeds=[9, 9])
        actions = np.random.default_rng(0).uniform(-1, 1, size=(40, 2, batch.action_dim))
        observations = [batch.step(a)[0] for a in actions]
        assert not np.array_equal(observations[-1][0], observations[-1][1]), env_id


def _rollout(batch, steps, seed):
    """Random actions, ended simulations reset (unseeded); returns everything step and reset gave."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        result = batch.step(rng.uniform(-1, 1, size=(batch.num_sims, batch.action_dim)))
        out.extend(np.array(x, copy=True) for x in result)
        done = np.flatnonzero(result[2] | result[3])
        if done.size:
            out.append(batch.reset(done))
    return out


@pytest.mark.parametrize("env_id", ["Ant-v5", "HalfCheetah-v5"])
def test_thread_count_does_not_change_results(env_id):
    results = []
    for nthread in (1, 2):
        batch = BatchedEnv(env_id, "paralysis", "cross-v2" if env_id == "HalfCheetah-v5" else "back-two",
                           num_sims=4, nthread=nthread, max_episode_steps=50)
        assert batch.nthread == nthread
        batch.set_task([1, 3], 4)
        batch.set_task([2], 2)
        out = [batch.reset(None, seeds=[1, 2, 3, 4])] + _rollout(batch, 120, seed=5)
        results.append((out, batch.get_state(0), batch.get_state(3)))
    (out1, *states1), (out2, *states2) = results
    assert len(out1) == len(out2)
    assert all(np.array_equal(a, b) for a, b in zip(out1, out2))
    assert states1 == states2


@pytest.mark.parametrize("env_id", ["Ant-v5", "HalfCheetah-v5"])
def test_get_state_set_state_round_trip(env_id):
    setting = ("slippery", "increasing", "governing")
    batch = BatchedEnv(env_id, *setting, num_sims=3, max_episode_steps=40)
    batch.set_task([0], 1)
    batch.set_task([1], 12)
    batch.reset(None, seeds=[7, None, 9])
    _rollout(batch, 25, seed=1)  # mid-episode (and, for Ant, possibly after a reset)
    states = [json.loads(json.dumps(batch.get_state(k))) for k in range(3)]  # plain Python values only
    last_obs = [np.asarray(s["observation"]) for s in states]
    expected = _rollout(batch, 60, seed=2)  # crosses the 40-step limit: unseeded resets use the restored RNG

    # a fresh env, simulations restored into permuted slots, tasks differing from the saved ones beforehand
    restored = BatchedEnv(env_id, *setting, num_sims=3, max_episode_steps=40)
    restored.set_task(None, 5)
    restored.reset(None, seeds=[100, 101, 102])
    restored.step(np.zeros((3, restored.action_dim)))
    permutation = [2, 0, 1]
    for k, slot in enumerate(permutation):
        obs = restored.set_state(slot, states[k])
        assert np.array_equal(obs, last_obs[k])
    assert restored.task_index[permutation].tolist() == [s["task_index"] for s in states]
    inverse = np.argsort(permutation)
    rng = np.random.default_rng(2)
    got = []
    for _ in range(60):
        actions = rng.uniform(-1, 1, size=(3, restored.action_dim))
        result = restored.step(actions[inverse])
        got.extend(np.array(x, copy=True)[permutation] for x in result)
        done_restored = np.flatnonzero(result[2] | result[3])
        if done_restored.size:
            # reset in the original simulations' order, so that the outputs line up
            done_original = np.sort(inverse[done_restored])
            slots = [permutation[k] for k in done_original]
            got.append(restored.reset(slots))
    assert len(got) == len(expected)
    assert all(np.array_equal(a, b) for a, b in zip(got, expected))


def test_set_state_rejects_other_setting_and_step_requires_reset():
    batch = BatchedEnv("HalfCheetah-v5", "slippery", "increasing", num_sims=2)
    with pytest.raises(RuntimeError, match="never reset"):
        batch.step(np.zeros((2, batch.action_dim)))
    batch.reset(None, seeds=[0, 1])
    other = BatchedEnv("HalfCheetah-v5", "paralysis", "cross-v1", num_sims=1)
    with pytest.raises(ValueError, match="setting"):
        other.set_state(0, batch.get_state(0))
    with pytest.raises(ValueError, match="out of range"):
        batch.set_task([0], batch.num_tasks)
    with pytest.raises(ValueError, match="shape"):
        batch.step(np.zeros((3, batch.action_dim)))


@pytest.mark.parametrize("env_id", ["Ant-v5", "HalfCheetah-v5"])
def test_stepping_a_subset_moves_only_those_simulations_as_gymnasium_does(env_id):
    """step(actions, sim_ids): the chosen simulations take exactly gymnasium's step, the others stay where they are
    (their next step continues from there): each simulation is compared with its own gymnasium env, stepped only
    when chosen, over 300 steps with random subsets, task changes and episode ends."""
    batch = BatchedEnv(env_id, "paralysis", "back-one", num_sims=NUM_SIMS, nthread=2, max_episode_steps=40)
    refs = [make_nonstationary_env(env_id, "paralysis", "back-one", max_episode_steps=40) for _ in range(NUM_SIMS)]
    obs = batch.reset(None, seeds=list(range(10, 10 + NUM_SIMS)))
    for k in range(NUM_SIMS):
        assert np.array_equal(obs[k], refs[k].reset(seed=10 + k)[0])
    rng = np.random.default_rng(3)
    stepped = 0
    for t in range(300):
        if t == 150:
            batch.set_task([1, 3], 2)
            for k in (1, 3):
                refs[k].get_wrapper_attr("set_task")(2)
        ids = np.flatnonzero(rng.random(NUM_SIMS) < 0.6)
        if ids.size == 0:
            continue
        before = batch.get_state(int(np.setdiff1d(np.arange(NUM_SIMS), ids)[0])) if ids.size < NUM_SIMS else None
        actions = rng.uniform(-1, 1, size=(ids.size, batch.action_dim)).astype(np.float32)
        obs, reward, terminated, truncated = batch.step(actions, ids)
        if before is not None:  # a simulation that was not chosen did not move
            assert batch.get_state(int(np.setdiff1d(np.arange(NUM_SIMS), ids)[0])) == before
        for row, k in enumerate(ids):
            ref_obs, ref_reward, ref_terminated, ref_truncated, _ = refs[k].step(actions[row])
            assert np.array_equal(obs[row], ref_obs) and reward[row] == ref_reward, (t, k)
            assert terminated[row] == ref_terminated and truncated[row] == ref_truncated, (t, k)
            stepped += 1
        ended = ids[terminated | truncated]
        if ended.size:
            obs_reset = batch.reset(ended)
            for row, k in enumerate(ended):
                assert np.array_equal(obs_reset[row], refs[k].reset()[0])
    assert stepped > 500
    with pytest.raises(ValueError, match="ascending"):
        batch.step(np.zeros((2, batch.action_dim), np.float32), [2, 1])
