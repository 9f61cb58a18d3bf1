"""Tests for nonstationary_envs.py: task schedules of the EPPO paper (Appendix B), their effect on the
MuJoCo model and on trajectories, MuJoCo's friction combination rule, and checkpoint state restore."""

import pickle
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import gymnasium as gym
import mujoco
import numpy as np
import pytest

from nonstationary_envs import (
    ENV_IDS,
    actuator_joint_names,
    get_env_state,
    make_nonstationary_env,
    set_env_state,
    _without_settotalmass_warning,
    task_schedule,
    validate_setting,
)

REPO_ROOT = Path(__file__).resolve().parents[2]  # tests/<folder>/this file

# Reference values typed from Appendix B of the paper.
PAPER_FRICTION_INCREASING = (0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0, 2.25, 2.5, 2.75, 3.0, 3.25, 3.5, 3.75, 4.0)
PAPER_TORQUE_LEVELS = (1.0, 0.75, 0.5, 0.25, 0.0, 0.25, 0.5, 0.75, 1.0)
PAPER_PARALYSED_JOINTS = {
    ("Ant-v5", "back-one"): (6, 7),
    ("Ant-v5", "front-one"): (2, 3),
    ("Ant-v5", "back-two"): (0, 1, 6, 7),
    ("Ant-v5", "front-two"): (2, 3, 4, 5),
    ("Ant-v5", "cross"): (0, 1, 2, 3),
    ("Ant-v5", "parallel"): (2, 3, 6, 7),
    ("HalfCheetah-v5", "back-one"): (2,),
    ("HalfCheetah-v5", "front-one"): (5,),
    ("HalfCheetah-v5", "cross-v1"): (2, 4),
    ("HalfCheetah-v5", "cross-v2"): (1, 5),
}
# Joint driven by each actuator, from the <actuator> sections of gymnasium's ant.xml / half_cheetah.xml.
XML_ACTUATOR_JOINTS = {
    "Ant-v5": ("hip_4", "ankle_4", "hip_1", "ankle_1", "hip_2", "ankle_2", "hip_3", "ankle_3"),
    "HalfCheetah-v5": ("bthigh", "bshin", "bfoot", "fthigh", "fshin", "ffoot"),
}


def xml_path(env_id):
    """gymnasium's XML file of env_id (what gym.make compiles by default)."""
    assets = Path(gym.__file__).parent / "envs" / "mujoco" / "assets"
    return str(assets / {"Ant-v5": "ant.xml", "HalfCheetah-v5": "half_cheetah.xml"}[env_id])


def floor_id(model):
    return mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, "floor")


def rollout(env, num_steps, seed=0, action_seed=1):
    """Reset with `seed`, step the base env with fixed random actions; observations, rewards, and the
    set of sliding-friction values of all contacts seen."""
    base = env.unwrapped
    obs, _ = env.reset(seed=seed)
    actions = np.random.default_rng(action_seed).uniform(-1.0, 1.0, (num_steps, base.model.nu))
    observations, rewards, contact_friction = [obs], [], set()
    for action in actions:
        obs, reward, *_ = base.step(action)
        observations.append(obs)
        rewards.append(reward)
        contact_friction.update(float(base.data.contact[c].friction[0]) for c in range(base.data.ncon))
    return np.array(observations), np.array(rewards), contact_friction


def slippery_rollout(env_id, friction_mode, friction, num_steps=100):
    env = make_nonstationary_env(env_id, "slippery", "increasing", friction_mode)
    env.get_wrapper_attr("set_task")(PAPER_FRICTION_INCREASING.index(friction))
    return rollout(env, num_steps)


def test_schedule_lengths_and_values():
    for env_id in ENV_IDS:
        assert task_schedule(env_id, "slippery", "increasing") == list(PAPER_FRICTION_INCREASING)
        assert task_schedule(env_id, "slippery", "decreasing") == list(PAPER_FRICTION_INCREASING[::-1])
        assert task_schedule(env_id, "none", "anything") == [None]
    for (env_id, strategy), joints in PAPER_PARALYSED_JOINTS.items():
        schedule = task_schedule(env_id, "paralysis", strategy)
        num_actuators = len(XML_ACTUATOR_JOINTS[env_id])
        assert len(schedule) == 9
        for task, level in enumerate(PAPER_TORQUE_LEVELS):
            assert schedule[task] == tuple(level if a in joints else 1.0 for a in range(num_actuators))


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_actuator_order_matches_paper_indices(env_id):
    model = gym.make(env_id).unwrapped.model
    joints = tuple(
        mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, int(model.actuator_trnid[a, 0])) for a in range(model.nu)
    )
    assert joints == XML_ACTUATOR_JOINTS[env_id]
    assert actuator_joint_names(model) == joints
    if env_id == "HalfCheetah-v5":  # Ant's actuators have no names; HalfCheetah's are named after their joint
        names = tuple(mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_ACTUATOR, a) for a in range(model.nu))
        assert names == XML_ACTUATOR_JOINTS[env_id]


@pytest.mark.parametrize("env_id", ENV_IDS)
@pytest.mark.parametrize("strategy", ["decreasing", "increasing"])
def test_slippery_sets_floor_sliding_friction(env_id, strategy):
    default_friction = gym.make(env_id).unwrapped.model.geom_friction.copy()
    env = make_nonstationary_env(env_id, "slippery", strategy)
    model = env.unwrapped.model
    floor = floor_id(model)
    expected = PAPER_FRICTION_INCREASING if strategy == "increasing" else PAPER_FRICTION_INCREASING[::-1]
    assert env.get_wrapper_attr("num_tasks") == 15
    assert env.get_wrapper_attr("task_index") == 0 and model.geom_friction[floor, 0] == expected[0]
    for task, friction in enumerate(expected):
        env.get_wrapper_attr("set_task")(task)
        env.reset(seed=task)  # the change lives in the model and survives reset()
        assert env.get_wrapper_attr("task_index") == task
        assert env.get_wrapper_attr("task_description")() == f"friction={friction:g}"
        want = default_friction.copy()
        want[floor, 0] = friction  # torsional/rolling columns and every other geom untouched
        np.testing.assert_array_equal(model.geom_friction, want)
        assert not model.geom_priority.any()


@pytest.mark.parametrize(("env_id", "strategy"), sorted(PAPER_PARALYSED_JOINTS))
def test_paralysis_scales_gear_of_paper_joints(env_id, strategy):
    default_gear = gym.make(env_id).unwrapped.model.actuator_gear.copy()
    env = make_nonstationary_env(env_id, "paralysis", strategy)
    model = env.unwrapped.model
    joints = PAPER_PARALYSED_JOINTS[(env_id, strategy)]
    assert env.get_wrapper_attr("num_tasks") == 9
    for task, level in enumerate(PAPER_TORQUE_LEVELS):
        env.get_wrapper_attr("set_task")(task)
        want = default_gear.copy()
        want[list(joints), 0] *= level
        np.testing.assert_array_equal(model.actuator_gear, want)
        if level == 1.0:  # tasks 0 and 8: default gear restored bit for bit
            assert model.actuator_gear.tobytes() == default_gear.tobytes()
        scales = [level if a in joints else 1.0 for a in range(model.nu)]
        assert env.get_wrapper_attr("task_description")() == "torque=[" + ",".join(f"{s:g}" for s in scales) + "]"


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_paralysis_scales_applied_torque_not_control_cost(env_id):
    strategy = {"Ant-v5": "cross", "HalfCheetah-v5": "cross-v1"}[env_id]
    joints = PAPER_PARALYSED_JOINTS[(env_id, strategy)]
    default_gear = gym.make(env_id).unwrapped.model.actuator_gear[:, 0].copy()
    action = np.linspace(-0.9, 0.8, len(default_gear))
    results = {}
    for task in (0, 2, 4):  # torque levels 1, 0.5, 0
        env = make_nonstationary_env(env_id, "paralysis", strategy)
        env.get_wrapper_attr("set_task")(task)
        env.reset(seed=3)
        base = env.unwrapped
        _, _, _, _, info = base.step(action)
        dofs = base.model.jnt_dofadr[base.model.actuator_trnid[:, 0]]
        scales = np.array([PAPER_TORQUE_LEVELS[task] if a in joints else 1.0 for a in range(len(action))])
        # motor actuator: joint torque = gear * ctrl
        np.testing.assert_allclose(base.data.qfrc_actuator[dofs], default_gear * scales * action, rtol=1e-12, atol=0)
        results[task] = info["reward_ctrl"]
    assert results[0] == results[2] == results[4] < 0.0


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_none_is_the_plain_env(env_id):
    env = make_nonstationary_env(env_id, "none", "ignored")
    plain = gym.make(env_id)
    assert env.get_wrapper_attr("num_tasks") == 1 and env.get_wrapper_attr("task_description")() == "stationary"
    for field in ("geom_friction", "geom_priority", "actuator_gear"):
        np.testing.assert_array_equal(getattr(env.unwrapped.model, field), getattr(plain.unwrapped.model, field))
    actions = np.random.default_rng(0).uniform(-1.0, 1.0, (50, plain.action_space.shape[0]))
    obs_env, obs_plain = env.reset(seed=7)[0], plain.reset(seed=7)[0]
    np.testing.assert_array_equal(obs_env, obs_plain)
    for action in actions:  # through the wrapper's (inherited) step
        step_env, step_plain = env.step(action), plain.step(action)
        np.testing.assert_array_equal(step_env[0], step_plain[0])
        assert step_env[1:4] == step_plain[1:4]


def test_ant_floor_mode_below_body_friction_changes_nothing():
    # Equal priorities: contact friction = max(floor, body) = max(f, 1.0) for Ant (Appendix B setup).
    runs = {f: slippery_rollout("Ant-v5", "floor", f) for f in (0.5, 0.75, 1.0)}
    assert runs[0.5][2] == {1.0}
    for f in (0.5, 0.75):
        np.testing.assert_array_equal(runs[f][0], runs[1.0][0])
        np.testing.assert_array_equal(runs[f][1], runs[1.0][1])


def test_ant_governing_mode_floor_friction_applies():
    low, high = slippery_rollout("Ant-v5", "governing", 0.5), slippery_rollout("Ant-v5", "governing", 0.75)
    assert low[2] == {0.5} and high[2] == {0.75}
    assert not np.array_equal(low[0], high[0])
    # above the body friction both modes give max(f, 1.0) = f: bit-identical
    governing, floor = slippery_rollout("Ant-v5", "governing", 2.0), slippery_rollout("Ant-v5", "floor", 2.0)
    assert governing[2] == floor[2] == {2.0}
    np.testing.assert_array_equal(governing[0], floor[0])


def test_halfcheetah_floor_governs_in_both_modes():
    # HalfCheetah body friction 0.4 < 0.5, the lowest floor value: the modes coincide bit for bit.
    runs = {(m, f): slippery_rollout("HalfCheetah-v5", m, f) for m in ("floor", "governing") for f in (0.5, 0.75)}
    for mode in ("floor", "governing"):
        assert runs[(mode, 0.5)][2] == {0.5} and runs[(mode, 0.75)][2] == {0.75}
        assert not np.array_equal(runs[(mode, 0.5)][0], runs[(mode, 0.75)][0])
    for f in (0.5, 0.75):
        np.testing.assert_array_equal(runs[("floor", f)][0], runs[("governing", f)][0])


def test_governing_mode_sets_floor_priority():
    model = make_nonstationary_env("Ant-v5", "slippery", "decreasing", "governing").unwrapped.model
    want = np.zeros(model.ngeom, dtype=model.geom_priority.dtype)
    want[floor_id(model)] = 1
    np.testing.assert_array_equal(model.geom_priority, want)


BAD_SETTINGS = [
    (("Hopper-v5", "slippery", "decreasing", "floor"),
     "--env-id: 'Hopper-v5' is not a supported environment; choose one of Ant-v5, HalfCheetah-v5"),
    (("Ant-v5", "windy", "decreasing", "floor"),
     "--experiment: 'windy' is not an experiment; choose one of slippery, paralysis, none"),
    (("Ant-v5", "slippery", "sideways", "floor"),
     "--strategy: 'sideways' is not a slippery strategy; choose one of decreasing, increasing"),
    (("Ant-v5", "paralysis", "cross-v1", "floor"),
     "--strategy: 'cross-v1' is not a paralysis strategy for Ant-v5; "
     "choose one of back-one, front-one, back-two, front-two, cross, parallel"),
    (("HalfCheetah-v5", "paralysis", "cross", "floor"),
     "--strategy: 'cross' is not a paralysis strategy for HalfCheetah-v5; "
     "choose one of back-one, front-one, cross-v1, cross-v2"),
    (("Ant-v5", "slippery", "decreasing", "ice"),
     "--friction-mode: 'ice' is not a friction mode; choose one of floor, governing"),
]


@pytest.mark.parametrize(("setting", "message"), BAD_SETTINGS)
def test_bad_names_give_a_one_line_message_naming_the_flag_and_the_choices(setting, message):
    pattern = f"^{re.escape(message)}$"
    with pytest.raises(ValueError, match=pattern):
        validate_setting(*setting)
    with pytest.raises(ValueError, match=pattern):
        make_nonstationary_env(*setting)
    if setting[3] == "floor":
        with pytest.raises(ValueError, match=pattern):
            task_schedule(*setting[:3])


def test_task_index_out_of_range():
    env = make_nonstationary_env("HalfCheetah-v5", "slippery", "increasing")
    for index in (15, -1):
        with pytest.raises(ValueError, match=r"valid choices: 0\.\.14"):
            env.get_wrapper_attr("set_task")(index)
    assert env.get_wrapper_attr("task_index") == 0


def test_vector_env_call_reaches_wrapper():
    envs = gym.vector.SyncVectorEnv([lambda: make_nonstationary_env("HalfCheetah-v5", "slippery", "decreasing")] * 2)
    envs.call("set_task", 4)
    assert envs.get_attr("task_index") == (4, 4)
    assert envs.envs[1].unwrapped.model.geom_friction[floor_id(envs.envs[1].unwrapped.model), 0] == 3.0


def assert_plain_python(value):
    """Only types torch.load(weights_only=True) reads without allow-listing."""
    if isinstance(value, dict):
        for key, item in value.items():
            assert type(key) is str
            assert_plain_python(item)
    elif isinstance(value, list):
        for item in value:
            assert_plain_python(item)
    else:
        assert value is None or type(value) in (int, float, str, bool), type(value)


@pytest.mark.parametrize(
    ("env_id", "experiment", "strategy", "friction_mode", "task"),
    [
        ("Ant-v5", "paralysis", "cross", "floor", 3),
        ("Ant-v5", "slippery", "increasing", "governing", 1),
        ("HalfCheetah-v5", "slippery", "decreasing", "floor", 5),
    ],
)
def test_state_restore_continues_bit_identically(env_id, experiment, strategy, friction_mode, task):
    def make():
        return make_nonstationary_env(env_id, experiment, strategy, friction_mode, max_episode_steps=50)

    saved_steps, continued_steps = 30, 30  # TimeLimit truncates at step 50, inside the continued part
    env = make()
    env.get_wrapper_attr("set_task")(task)
    env.reset(seed=11)
    actions = np.random.default_rng(2).uniform(-1.0, 1.0, (saved_steps + continued_steps, env.action_space.shape[0]))
    for action in actions[:saved_steps]:
        last_obs = env.step(action)[0]
    state = get_env_state(env)
    assert_plain_python(state)
    state = pickle.loads(pickle.dumps(state))
    original = [env.step(action)[:4] for action in actions[saved_steps:]]
    original_reset_obs = env.reset()[0]
    assert [step[3] for step in original].index(True) == 50 - saved_steps - 1

    restored_env = make()
    set_env_state(restored_env, state)
    assert restored_env.get_wrapper_attr("task_index") == task
    np.testing.assert_array_equal(restored_env.unwrapped._get_obs(), last_obs)
    restored = [restored_env.step(action)[:4] for action in actions[saved_steps:]]
    for (obs_a, reward_a, *flags_a), (obs_b, reward_b, *flags_b) in zip(original, restored):
        np.testing.assert_array_equal(obs_a, obs_b)
        assert reward_a == reward_b and flags_a == flags_b
    np.testing.assert_array_equal(restored_env.reset()[0], original_reset_obs)


def test_state_restore_rejects_other_setting():
    env = make_nonstationary_env("Ant-v5", "paralysis", "cross")
    env.reset(seed=0)
    state = get_env_state(env)
    with pytest.raises(ValueError, match="setting"):
        set_env_state(make_nonstationary_env("Ant-v5", "paralysis", "parallel"), state)
    with pytest.raises(ValueError, match="wrappers"):
        set_env_state(make_nonstationary_env("Ant-v5", "paralysis", "cross", disable_env_checker=True), state)


QUIET_START_SCRIPT = textwrap.dedent(
    """
    import sys
    import mujoco, numpy as np
    sys.path.insert(0, sys.argv[1])
    from nonstationary_envs import make_nonstationary_env

    for env_id, experiment, strategy in [("HalfCheetah-v5", "paralysis", "back-one"),
                                         ("HalfCheetah-v5", "slippery", "increasing"),
                                         ("Ant-v5", "slippery", "decreasing"), ("Ant-v5", "paralysis", "cross")]:
        env = make_nonstationary_env(env_id, experiment, strategy)
        env.reset(seed=0)
        env.step(env.action_space.sample())
    print("== built ==", file=sys.stderr, flush=True)
    # Outside make_nonstationary_env nothing is filtered: a bare compile of the XML still warns ...
    mujoco.MjModel.from_xml_path(sys.argv[2])
    # ... and so does an unstable simulation.
    base = env.unwrapped
    base.data.qvel[:] = np.nan
    mujoco.mj_step(base.model, base.data)
    """
)


def test_env_creation_is_quiet_and_writes_no_mujoco_log(tmp_path):
    result = subprocess.run([sys.executable, "-c", QUIET_START_SCRIPT, str(REPO_ROOT), xml_path("HalfCheetah-v5")],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    building, after = result.stderr.split("== built ==\n")
    assert "WARNING" not in building and "WARNING" not in result.stdout, building + result.stdout
    assert "WARNING: compiler attribute 'settotalmass' is deprecated" in after  # other warnings are not hidden
    assert "WARNING: Nan, Inf or huge value in QVEL" in after
    assert list(tmp_path.iterdir()) == []  # no MUJOCO_LOG.TXT in the working directory


def test_settotalmass_filter_forwards_other_warnings_and_restores_the_handler():
    received = []
    mujoco.set_mju_user_warning(received.append)
    try:
        with _without_settotalmass_warning():
            mujoco.MjModel.from_xml_path(xml_path("HalfCheetah-v5"))  # settotalmass: dropped
            mujoco.get_mju_user_warning()("some other warning")
        assert received == ["some other warning"]
        assert mujoco.get_mju_user_warning() == received.append
        mujoco.MjModel.from_xml_path(xml_path("HalfCheetah-v5"))  # outside the block: passed on
        assert len(received) == 2 and received[1].startswith("compiler attribute 'settotalmass' is deprecated")
    finally:
        mujoco.set_mju_user_warning(None)


@pytest.mark.parametrize("env_id", ENV_IDS)
def test_masses_are_gymnasiums(env_id):
    # The model compiled from gymnasium's XML with MuJoCo's default warning path, bit for bit; HalfCheetah's
    # settotalmass="14" is applied.
    received = []
    mujoco.set_mju_user_warning(received.append)
    try:
        stock = mujoco.MjModel.from_xml_path(xml_path(env_id))
    finally:
        mujoco.set_mju_user_warning(None)
    model = make_nonstationary_env(env_id, "none", "ignored").unwrapped.model
    for field in ("body_mass", "body_inertia", "body_subtreemass", "dof_M0", "dof_invweight0"):
        assert getattr(model, field).tobytes() == getattr(stock, field).tobytes(), field
    if env_id == "HalfCheetah-v5":
        assert model.body_mass.sum() == pytest.approx(14.0, rel=1e-12)
