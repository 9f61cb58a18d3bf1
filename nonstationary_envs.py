"""Non-stationary MuJoCo locomotion tasks of the EPPO paper (Appendix B, "Slippery" and "Paralysis").

A run trains on a sequence of tasks; the training script switches tasks with ``set_task(i)`` every
``steps_per_task`` steps. Each task only edits the loaded ``MjModel`` (``env.unwrapped.model``), so a
change takes effect at the next ``mj_step``, survives ``reset()``, and stepping costs nothing extra:
the wrapper does not override ``step``.

* slippery (15 tasks): sliding friction of the geom named ``floor`` goes 4.0, 3.75, ..., 0.5
  (``decreasing``) or 0.5, 0.75, ..., 4.0 (``increasing``).
  MuJoCo combines the friction of two touching geoms of equal priority with an element-wise maximum.
  HalfCheetah's body geoms have friction 0.4, so the floor governs every task. Ant's body geoms have
  friction 1.0, so floor values 0.5 and 0.75 give contacts with friction 1.0, the same as floor 1.0.
  ``friction_mode="floor"`` (default) reproduces this, the setup of the paper, which edited the floor in
  the XML files. ``friction_mode="governing"`` also gives the floor a higher ``geom_priority``. MuJoCo
  then takes all contact parameters of a floor contact from the floor, so the floor's friction holds
  for every contact. The other parameters (condim, solref, solimp) are the same on both sides in
  these two XML files, so nothing else changes.
* paralysis (9 tasks): the torque of the selected actuators is scaled by 1, .75, .5, .25, 0, .25, .5,
  .75, 1 by scaling ``model.actuator_gear[idx, 0]``, starting from a saved copy of the default gear.
  The policy still outputs full actions, and the reward's control cost (computed on the action) stays
  the same. Level 1 restores the default gear exactly.
* none: one stationary task. The model is left unchanged.

``get_env_state`` / ``set_env_state`` capture and restore an episode in progress, for checkpoints.

Importing this module turns off MuJoCo's log file (``MUJOCO_LOG.TXT``, which MuJoCo appends to in the
current directory for every warning); warnings are still printed to stderr. ``make_nonstationary_env``
drops the one known warning of gymnasium's ``half_cheetah.xml`` (the deprecated ``settotalmass``
compiler attribute) while the env is built; every other MuJoCo warning is printed as before.
"""

from __future__ import annotations

import contextlib
import operator
import sys
from typing import Any

import gymnasium as gym
import mujoco
import numpy as np

ENV_IDS = ("Ant-v5", "HalfCheetah-v5")
EXPERIMENTS = ("slippery", "paralysis", "none")
FRICTION_MODES = ("floor", "governing")
SLIPPERY_STRATEGIES = ("decreasing", "increasing")

# Appendix B, slippery: "minimum at 0.5 and the maximum at 4.0 ... change the friction by 0.25,
# resulting in 15 distinct tasks".
FRICTION_MIN = 0.5
FRICTION_MAX = 4.0
FRICTION_STEP = 0.25
# Appendix B, paralysis: torque capacity [100, 75, 50, 25, 0, 25, 50, 75, 100] %.
TORQUE_LEVELS = (1.0, 0.75, 0.5, 0.25, 0.0, 0.25, 0.5, 0.75, 1.0)

# Joint driven by each actuator, in actuator (= action) order. Ant's actuators are unnamed in ant.xml,
# so the ordering is checked through the joint each actuator drives (actuator_trnid).
ACTUATOR_JOINTS = {
    "Ant-v5": ("hip_4", "ankle_4", "hip_1", "ankle_1", "hip_2", "ankle_2", "hip_3", "ankle_3"),
    "HalfCheetah-v5": ("bthigh", "bshin", "bfoot", "fthigh", "fshin", "ffoot"),
}
# Appendix B, "Paralysis on ant" / "Paralysis on halfCheetah": affected joints = action indices.
PARALYSIS_ACTUATORS = {
    "Ant-v5": {
        "back-one": (6, 7),
        "front-one": (2, 3),
        "back-two": (0, 1, 6, 7),
        "front-two": (2, 3, 4, 5),
        "cross": (0, 1, 2, 3),
        "parallel": (2, 3, 6, 7),
    },
    "HalfCheetah-v5": {
        "back-one": (2,),
        "front-one": (5,),
        "cross-v1": (2, 4),
        "cross-v2": (1, 5),
    },
}
FLOOR_GEOM = "floor"

# Data fields that gymnasium reads before the next mj_step recomputes them: Ant-v5's forward reward
# uses torso xpos from before the step, and Ant-v5's observation uses cfrc_ext. After mj_step they
# come from the kinematics at the start of the last substep, so they cannot be recomputed from the
# integration state and are stored as well.
_DERIVED_FIELDS = ("xpos", "cfrc_ext")
_INTEGRATION = mujoco.mjtState.mjSTATE_INTEGRATION

# gymnasium's half_cheetah.xml has <compiler settotalmass="14">. MuJoCo 4 still applies it (the compiled
# masses are the ones gymnasium intends) but warns at every compile, i.e. for every training and evaluation
# env. The warning is about the XML file, not about anything a run can change, so it is dropped while
# make_nonstationary_env builds an env; all other warnings pass.
_SETTOTALMASS_DEPRECATION = "compiler attribute 'settotalmass' is deprecated"


def _disable_mujoco_log_file() -> None:
    """Stop MuJoCo's default log handler from appending to MUJOCO_LOG.TXT in the current directory.

    By default every MuJoCo warning and error is both printed and written to that file, which lands in
    the checkout or the run's working directory. Printing stays on (mju_setLogConfig's logto_console).
    """
    config = mujoco.MjLogConfig.get()
    if config.logto_file:
        config.logto_file = False
        config.set()


_disable_mujoco_log_file()


@contextlib.contextmanager
def _without_settotalmass_warning():
    """Drop MuJoCo's settotalmass deprecation warning inside the block; forward every other warning.

    Other warnings go to the previously installed handler, or, with none installed, to stderr in the
    format of MuJoCo's default handler. The previous handler is restored on exit, so warnings raised
    while stepping (e.g. "Nan, Inf or huge value in QACC") never pass through this filter.
    """
    previous = mujoco.get_mju_user_warning()

    def handler(message: str) -> None:
        if message.startswith(_SETTOTALMASS_DEPRECATION):
            return
        if previous is not None:
            previous(message)
        else:
            print(f"WARNING: {message}\n", file=sys.stderr, flush=True)

    mujoco.set_mju_user_warning(handler)
    try:
        yield
    finally:
        mujoco.set_mju_user_warning(previous)


def valid_strategies(env_id: str, experiment: str) -> tuple[str, ...]:
    """Strategy names allowed for (env_id, experiment); empty for "none", which ignores the strategy."""
    _check_choice("--env-id", env_id, "is not a supported environment", ENV_IDS)
    _check_choice("--experiment", experiment, "is not an experiment", EXPERIMENTS)
    if experiment == "slippery":
        return SLIPPERY_STRATEGIES
    if experiment == "paralysis":
        return tuple(PARALYSIS_ACTUATORS[env_id])
    return ()


def validate_setting(env_id: str, experiment: str, strategy: str, friction_mode: str = "floor") -> None:
    """Raise ValueError if the setting is unknown; build nothing.

    The message is one line naming the command-line flag and the valid choices, e.g.
    "--strategy: 'cross-v1' is not a paralysis strategy for Ant-v5; choose one of back-one, front-one, ...".
    """
    strategies = valid_strategies(env_id, experiment)
    _check_choice("--friction-mode", friction_mode, "is not a friction mode", FRICTION_MODES)
    if experiment == "slippery":
        _check_choice("--strategy", strategy, "is not a slippery strategy", strategies)
    elif experiment == "paralysis":
        _check_choice("--strategy", strategy, f"is not a paralysis strategy for {env_id}", strategies)


def task_schedule(env_id: str, experiment: str, strategy: str) -> list:
    """Per-task parameters, in task order.

    slippery: floor sliding friction (float). paralysis: torque scale per actuator (tuple of floats,
    in action order). none: [None].
    """
    validate_setting(env_id, experiment, strategy)
    if experiment == "slippery":
        num_tasks = round((FRICTION_MAX - FRICTION_MIN) / FRICTION_STEP) + 1
        increasing = [FRICTION_MIN + FRICTION_STEP * i for i in range(num_tasks)]
        return increasing if strategy == "increasing" else increasing[::-1]
    if experiment == "paralysis":
        paralysed = PARALYSIS_ACTUATORS[env_id][strategy]
        num_actuators = len(ACTUATOR_JOINTS[env_id])
        return [
            tuple(level if a in paralysed else 1.0 for a in range(num_actuators))
            for level in TORQUE_LEVELS
        ]
    return [None]


class NonstationaryEnv(gym.Wrapper, gym.utils.RecordConstructorArgs):
    """Switches the task of a MuJoCo locomotion env by editing its MjModel; step() is inherited as is."""

    def __init__(self, env: gym.Env, env_id: str, experiment: str, strategy: str, friction_mode: str = "floor"):
        validate_setting(env_id, experiment, strategy, friction_mode)
        gym.utils.RecordConstructorArgs.__init__(
            self, env_id=env_id, experiment=experiment, strategy=strategy, friction_mode=friction_mode
        )
        gym.Wrapper.__init__(self, env)
        self.env_id = env_id
        self.experiment = experiment
        self.strategy = strategy
        self.friction_mode = friction_mode
        self._schedule = task_schedule(env_id, experiment, strategy)

        model = env.unwrapped.model
        joints = actuator_joint_names(model)
        if joints != ACTUATOR_JOINTS[env_id]:
            raise ValueError(
                f"{env_id}: actuators drive joints {joints}, expected {ACTUATOR_JOINTS[env_id]} "
                "(the paralysis indices of the paper assume the default XML)"
            )
        self._floor_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, FLOOR_GEOM)
        if self._floor_id < 0:
            raise ValueError(f"{env_id}: the model has no geom named {FLOOR_GEOM!r}")
        self._default_gear = model.actuator_gear[:, 0].copy()
        if experiment == "slippery" and friction_mode == "governing":
            # Different priorities: MuJoCo copies every contact parameter from the higher-priority geom
            # (mj_contactParam), so the floor's friction is used instead of max(floor, body).
            other = np.delete(model.geom_priority, self._floor_id)
            model.geom_priority[self._floor_id] = int(other.max(initial=0)) + 1
        self._task_index = 0
        self.set_task(0)

    @property
    def task_index(self) -> int:
        return self._task_index

    @property
    def num_tasks(self) -> int:
        return len(self._schedule)

    def set_task(self, index: int) -> None:
        """Switch to task `index` (0-based); acts on env.unwrapped.model at once."""
        index = operator.index(index)
        if not 0 <= index < self.num_tasks:
            raise ValueError(f"task index {index} out of range; valid choices: 0..{self.num_tasks - 1}")
        model = self.env.unwrapped.model
        parameter = self._schedule[index]
        if self.experiment == "slippery":
            model.geom_friction[self._floor_id, 0] = parameter
        elif self.experiment == "paralysis":
            # The scaled gear multiplies the force of ctrl; ctrl (= the action) and the control cost
            # computed from it are untouched. Level 1.0 gives back the saved default gear exactly.
            model.actuator_gear[:, 0] = self._default_gear * np.asarray(parameter, dtype=np.float64)
        self._task_index = index

    def task_description(self) -> str:
        """Short string for logs, e.g. 'friction=2.75' or 'torque=[1,1,0.5,0.5,1,1,1,1]'."""
        parameter = self._schedule[self._task_index]
        if self.experiment == "slippery":
            return f"friction={parameter:g}"
        if self.experiment == "paralysis":
            return "torque=[" + ",".join(f"{scale:g}" for scale in parameter) + "]"
        return "stationary"


def make_nonstationary_env(
    env_id: str, experiment: str, strategy: str, friction_mode: str = "floor", **gym_kwargs: Any
) -> gym.Env:
    """gym.make(env_id, **gym_kwargs) wrapped in NonstationaryEnv, set to task 0.

    Reach the API through env.get_wrapper_attr: set_task, task_index, num_tasks, task_description.
    """
    validate_setting(env_id, experiment, strategy, friction_mode)
    with _without_settotalmass_warning():
        env = gym.make(env_id, **gym_kwargs)
    return NonstationaryEnv(env, env_id, experiment, strategy, friction_mode)


def actuator_joint_names(model: mujoco.MjModel) -> tuple[str, ...]:
    """Name of the joint driven by each actuator, in actuator order."""
    return tuple(
        mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_JOINT, int(model.actuator_trnid[a, 0]))
        for a in range(model.nu)
    )


def get_env_state(env: gym.Env) -> dict:
    """Everything needed to continue the current episode bit-identically, as plain Python values.

    Holds the setting, the task index, MuJoCo's integration state (mjSTATE_INTEGRATION: time, qpos,
    qvel, act, warmstart, ctrl, applied forces, ...), the derived fields read before the next step,
    the base env's np_random bit-generator state, and the step counter of each TimeLimit wrapper in the
    chain. Only dict/list/int/float/str/bool/None, so torch.load(weights_only=True) can
    read it back. The state of other wrappers (e.g. NormalizeObservation) is not included.
    """
    wrapper = _find_nonstationary_wrapper(env)
    base = env.unwrapped
    model, data = base.model, base.data
    integration_state = np.empty(mujoco.mj_stateSize(model, _INTEGRATION), dtype=np.float64)
    mujoco.mj_getState(model, data, integration_state, _INTEGRATION)
    return {
        "setting": _setting(wrapper),
        "task_index": wrapper.task_index,
        "mujoco_integration_state": integration_state.tolist(),
        "derived": {field: getattr(data, field).tolist() for field in _DERIVED_FIELDS},
        "np_random_state": _plain(base.np_random.bit_generator.state),
        "np_random_seed": base.np_random_seed,
        "wrappers": [_wrapper_counters(w) for w in _wrapper_chain(env)],
    }


def set_env_state(env: gym.Env, state: dict) -> None:
    """Restore a get_env_state() dict into an env made with the same arguments (resets it once first)."""
    wrapper = _find_nonstationary_wrapper(env)
    if state["setting"] != _setting(wrapper):
        raise ValueError(f"state was saved with setting {state['setting']}, this env has {_setting(wrapper)}")
    chain = _wrapper_chain(env)
    saved_names = [entry["class"] for entry in state["wrappers"]]
    names = [type(w).__name__ for w in chain]
    if saved_names != names:
        raise ValueError(f"state was saved with wrappers {saved_names}, this env has {names}")

    # One reset first: gymnasium's OrderEnforcing and PassiveEnvChecker reject or crash on a step()
    # in a freshly made env; everything the reset touches is overwritten below.
    env.reset()
    wrapper.set_task(state["task_index"])
    base = env.unwrapped
    model, data = base.model, base.data
    integration_state = np.asarray(state["mujoco_integration_state"], dtype=np.float64)
    expected_size = mujoco.mj_stateSize(model, _INTEGRATION)
    if integration_state.shape != (expected_size,):
        raise ValueError(f"MuJoCo state has {integration_state.size} values, this model needs {expected_size}")
    mujoco.mj_setState(model, data, integration_state, _INTEGRATION)
    for field in _DERIVED_FIELDS:
        getattr(data, field)[:] = np.asarray(state["derived"][field], dtype=np.float64)

    base.np_random.bit_generator.state = state["np_random_state"]
    # Only informational (gymnasium's np_random_seed property); no public setter keeps it.
    base._np_random_seed = state["np_random_seed"]
    for w, entry in zip(chain, state["wrappers"]):
        if isinstance(w, gym.wrappers.TimeLimit):
            w._elapsed_steps = entry["elapsed_steps"]


def _check_choice(flag: str, value: str, what: str, choices: tuple[str, ...]) -> None:
    """ValueError "{flag}: {value!r} {what}; choose one of {choices}" unless value is one of choices."""
    if value not in choices:
        raise ValueError(f"{flag}: {value!r} {what}; choose one of {', '.join(choices)}")


def _setting(wrapper: NonstationaryEnv) -> dict:
    return {
        "env_id": wrapper.env_id,
        "experiment": wrapper.experiment,
        "strategy": wrapper.strategy if wrapper.experiment != "none" else None,
        "friction_mode": wrapper.friction_mode if wrapper.experiment == "slippery" else None,
    }


def _wrapper_chain(env: gym.Env) -> list[gym.Wrapper]:
    chain = []
    while isinstance(env, gym.Wrapper):
        chain.append(env)
        env = env.env
    return chain


def _find_nonstationary_wrapper(env: gym.Env) -> NonstationaryEnv:
    for w in _wrapper_chain(env):
        if isinstance(w, NonstationaryEnv):
            return w
    raise TypeError("expected an env from make_nonstationary_env (or a wrapper around one)")


def _wrapper_counters(wrapper: gym.Wrapper) -> dict:
    entry: dict[str, Any] = {"class": type(wrapper).__name__}
    if isinstance(wrapper, gym.wrappers.TimeLimit):
        entry["elapsed_steps"] = wrapper._elapsed_steps
    return entry


def _plain(value: Any) -> Any:
    """Nested dicts of numpy scalars -> plain Python values."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, np.generic):
        return value.item()
    return value
