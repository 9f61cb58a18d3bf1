"""Non-stationary MuJoCo locomotion tasks of the EPPO paper (Appendix B, "Slippery" and "Paralysis").

A run trains on a sequence of tasks; the training script switches tasks with ``set_task`` every
``steps_per_task`` steps. Each task only edits the loaded ``MjModel``, so a change takes effect at the
next ``mj_step`` and survives ``reset()``. Two ways to step the tasks:

* ``BatchedEnv`` (what the algorithm scripts use): N simulations, each with its own task, reset noise and
  episode, stepped together in one ``mujoco.batch.Batch`` (GIL released, on several threads), with
  gymnasium v5's observations, rewards, terminations and time limit computed in numpy over all of them,
  bit for bit as gymnasium (``tests/modules/test_batched_env.py``).
* ``make_nonstationary_env``: the gymnasium wrapper (``env.unwrapped.model`` edited in place; it does
  not override ``step``), the reference that ``BatchedEnv`` is tested against and the API for code
  that wants a plain gymnasium env.

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

``BatchedEnv.get_state`` / ``set_state`` capture and restore one simulation's episode in progress, for
the scripts' checkpoints; ``get_env_state`` / ``set_env_state`` do the same for the gymnasium wrapper.

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


# ---------------------------------------------------------------------------------------------------
# BatchedEnv: N simulations of one setting through mujoco.batch, gymnasium v5's semantics bit for bit.
# ---------------------------------------------------------------------------------------------------

_STAGE_NONE = int(mujoco.mjtStage.mjSTAGE_NONE)
_STAGE_ACC = int(mujoco.mjtStage.mjSTAGE_ACC)


class BatchedEnv:
    """``num_sims`` simulations of HalfCheetah-v5 or Ant-v5 (gymnasium's default v5 kwargs) in one
    ``mujoco.batch.Batch(model, num_sims, nthread, persistent=True)``, each with its own task of the
    schedule of (experiment, strategy, friction_mode), its own reset-noise Generator and step counter.

    Every observation, reward, ``terminated`` and ``truncated`` equals, bit for bit, what
    ``make_nonstationary_env(env_id, experiment, strategy, friction_mode)`` (i.e. ``gymnasium.make``
    with its TimeLimit) returns for the same seeds, actions (same dtype) and task switches, at any
    ``nthread``; ``tests/modules/test_batched_env.py`` checks this.

    * ``reset(sim_ids=None, seeds=None) -> obs`` (len(ids), obs_dim): as ``env.reset(seed=s)`` per
      simulation; ``seeds[i] = None`` continues that simulation's Generator.
    * ``step(actions, sim_ids=None) -> (obs, reward, terminated, truncated)``, arrays over simulations
      ``sim_ids`` (None: all), actions (len(ids), nu); the others do not move. ``truncated`` is gymnasium's
      TimeLimit (``elapsed >= max_episode_steps``). There is no autoreset: the caller resets the simulations
      that ended (``terminated | truncated``); stepping one that ended continues it, as stepping
      ``gymnasium.make``'s env would.
    * ``set_task(sim_ids, task_index)`` as ``NonstationaryEnv.set_task`` for those simulations.
    * ``get_state(k)`` / ``set_state(k, state)``: one simulation's episode, as plain Python values.

    The control cost is computed in the dtype of ``actions`` exactly as gymnasium computes it on the
    action it is given (float32 actions give a float32 control cost), so pass the same array type.
    Paralysis scales ``actuator_gear`` without ``mj_setConst``, as ``NonstationaryEnv`` does.
    ``include_cfrc_ext_in_observation=False`` (Ant-v5 only) is gymnasium's kwarg of that name: the observation
    without the contact forces (27 entries instead of 105); the reward still charges their cost.
    """

    def __init__(
        self,
        env_id: str,
        experiment: str = "none",
        strategy: str | None = None,
        friction_mode: str = "floor",
        *,
        num_sims: int,
        nthread: int = 1,
        max_episode_steps: int = 1000,
        include_cfrc_ext_in_observation: bool = True,
    ):
        import mujoco.batch  # noqa: F401  (a submodule: not loaded by `import mujoco`)

        validate_setting(env_id, experiment, strategy, friction_mode)
        if num_sims < 1:
            raise ValueError(f"num_sims must be at least 1, got {num_sims}")
        if max_episode_steps < 1:
            raise ValueError(f"max_episode_steps must be at least 1, got {max_episode_steps}")
        self.env_id = env_id
        self.experiment = experiment
        self.strategy = strategy
        self.friction_mode = friction_mode
        self.num_sims = int(num_sims)
        self.max_episode_steps = int(max_episode_steps)
        self._schedule = task_schedule(env_id, experiment, strategy)
        if not include_cfrc_ext_in_observation and env_id != "Ant-v5":
            raise ValueError(f"include_cfrc_ext_in_observation=False applies to Ant-v5 only, not {env_id}")
        # Ant-v5's observation without its 78 contact-force entries is gymnasium's kwarg of the same name
        gym_kwargs = {} if include_cfrc_ext_in_observation else {"include_cfrc_ext_in_observation": False}

        # Build gymnasium's env once to take its compiled model and default v5 constants from it.
        with _without_settotalmass_warning():
            env = gym.make(env_id, **gym_kwargs)
        base = env.unwrapped
        model = base.model
        joints = actuator_joint_names(model)
        if joints != ACTUATOR_JOINTS[env_id]:
            raise ValueError(f"{env_id}: actuators drive joints {joints}, expected {ACTUATOR_JOINTS[env_id]}")
        self._floor_id = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_GEOM, FLOOR_GEOM)
        if self._floor_id < 0:
            raise ValueError(f"{env_id}: the model has no geom named {FLOOR_GEOM!r}")
        if experiment == "slippery" and friction_mode == "governing":
            other = np.delete(model.geom_priority, self._floor_id)
            model.geom_priority[self._floor_id] = int(other.max(initial=0)) + 1
        self._default_gear = model.actuator_gear[:, 0].copy()
        self._is_ant = env_id == "Ant-v5"
        self._frame_skip = int(base.frame_skip)
        self.dt = base.dt  # model.opt.timestep * frame_skip, as gymnasium computes it
        self._init_qpos = base.init_qpos.copy()
        self._init_qvel = base.init_qvel.copy()
        self._noise = base._reset_noise_scale
        self._ctrl_cost_weight = base._ctrl_cost_weight
        self._forward_reward_weight = base._forward_reward_weight
        if self._is_ant:
            if not base._exclude_current_positions_from_observation:
                raise ValueError("BatchedEnv supports Ant-v5's default observation (and without cfrc_ext) only")
            self._include_cfrc = bool(base._include_cfrc_ext_in_observation)
            self._contact_cost_weight = base._contact_cost_weight
            self._healthy_reward = base._healthy_reward
            self._terminate_when_unhealthy = base._terminate_when_unhealthy
            self._healthy_z_range = base._healthy_z_range
            self._contact_force_range = base._contact_force_range
            self._main_body = model.body(base._main_body).id
            self._skip_qpos = 2
        else:
            if not base._exclude_current_positions_from_observation:
                raise ValueError("BatchedEnv supports HalfCheetah-v5's default observation only")
            self._include_cfrc = False
            self._skip_qpos = 1
        self.single_observation_space = base.observation_space
        self.single_action_space = base.action_space
        self.model = model
        env.close()

        nq, nv, nu = model.nq, model.nv, model.nu
        self.action_dim = nu
        self._nq, self._nv = nq, nv
        cfrc_size = (model.nbody - 1) * 6 if self._is_ant and self._include_cfrc else 0
        self.observation_dim = nq - self._skip_qpos + nv + cfrc_size
        assert self.observation_dim == self.single_observation_space.shape[0]

        self._batch = mujoco.batch.Batch(model, self.num_sims, int(nthread), persistent=True)
        self.nthread = self._batch.nthread
        batch = self._batch
        self._qpos = batch.bind("qpos")
        self._qvel = batch.bind("qvel")
        self._ctrl = batch.bind("ctrl")
        self._state = batch.state
        if experiment == "slippery":
            self._friction = batch.expand("geom_friction")
        elif experiment == "paralysis":
            self._gear = batch.expand("actuator_gear")
        if self._is_ant:
            self._xpos = batch.bind("xpos")
            self._cfrc_out = batch.bind("cfrc_ext")
            # One MjData per simulation, refreshed from the batch with get_data(k, data) after each step
            # (allocation-free), where mj_rnePostConstraint computes cfrc_ext as gymnasium's
            # do_simulation does. It reads the contact forces and frames from the data, not the task's floor
            # friction or gear from the model, so the shared model serves every simulation (tests compare Ant
            # with gymnasium on differing slippery and paralysis tasks).
            self._datas = [batch.get_data(k) for k in range(self.num_sims)]
            self._cfrc_views = [d.cfrc_ext for d in self._datas]
            self._cfrc = np.zeros((self.num_sims, model.nbody, 6))
            self._clipped = np.zeros((self.num_sims, model.nbody, 6))
            offset, size = self._state_slice("qpos")
            assert np.shares_memory(self._state[:, offset : offset + nq], self._qpos)
            assert self._state_slice("qvel") == (offset + nq, nv)
            self._qpos_qvel = self._state[:, offset : offset + nq + nv]
            # torso x from the last call (kinematics at the start of the last substep, as data.xpos)
            self._x_before = np.zeros(self.num_sims)

        self._x = self._qpos[:, 0]  # HalfCheetah's forward position (a view)
        self._never_terminated = np.zeros(self.num_sims, dtype=bool)
        self._never_terminated.flags.writeable = False  # HalfCheetah's terminated, returned by every full step
        self._elapsed = np.zeros(self.num_sims, dtype=np.int64)
        self._was_reset = np.zeros(self.num_sims, dtype=bool)
        self._all_reset = False
        self._rngs: list[np.random.Generator | None] = [None] * self.num_sims
        self._seeds: list[int | None] = [None] * self.num_sims
        self._obs = np.zeros((self.num_sims, self.observation_dim))
        self._task = np.zeros(self.num_sims, dtype=np.int64)
        self.set_task(None, 0)

    # -- tasks ------------------------------------------------------------------------------------

    @property
    def num_tasks(self) -> int:
        return len(self._schedule)

    @property
    def task_index(self) -> np.ndarray:
        """Task index of every simulation (a copy)."""
        return self._task.copy()

    @property
    def elapsed_steps(self) -> np.ndarray:
        """Steps since each simulation's last reset (a copy)."""
        return self._elapsed.copy()

    def set_task(self, sim_ids, task_index: int) -> None:
        """Put simulations ``sim_ids`` (None: all) on task ``task_index``; acts at their next step."""
        ids = self._ids(sim_ids)
        index = operator.index(task_index)
        if not 0 <= index < self.num_tasks:
            raise ValueError(f"task index {index} out of range; valid choices: 0..{self.num_tasks - 1}")
        parameter = self._schedule[index]
        if self.experiment == "slippery":
            self._friction[ids, self._floor_id, 0] = parameter
        elif self.experiment == "paralysis":
            self._gear[ids, :, 0] = self._default_gear * np.asarray(parameter, dtype=np.float64)
        self._task[ids] = index

    def task_description(self, task: int) -> str:
        """As NonstationaryEnv.task_description for task index ``task``, e.g. 'friction=2.75'."""
        parameter = self._schedule[operator.index(task)]
        if self.experiment == "slippery":
            return f"friction={parameter:g}"
        if self.experiment == "paralysis":
            return "torque=[" + ",".join(f"{scale:g}" for scale in parameter) + "]"
        return "stationary"

    # -- episodes ---------------------------------------------------------------------------------

    def reset(self, sim_ids=None, seeds=None) -> np.ndarray:
        """Reset simulations ``sim_ids`` (None: all; any order) as gymnasium's ``env.reset(seed=seeds[i])``.

        With a seed, the simulation's Generator is ``gymnasium.utils.seeding.np_random(seed)``; with
        None it continues (created unseeded on first use, as gymnasium's). Returns their observations,
        in the order of ``sim_ids``.
        """
        ids = self._ids(sim_ids)
        if seeds is None:
            seeds = [None] * len(ids)
        elif len(seeds) != len(ids):
            raise ValueError(f"{len(seeds)} seeds for {len(ids)} simulations")
        batch = self._batch
        sorted_ids = np.sort(ids)  # the batch takes sorted ids; the caller's order is kept for obs
        batch.reset(sorted_ids, stage=_STAGE_NONE)  # mj_resetData
        noise = self._noise
        for k, seed in zip(ids.tolist(), seeds):
            if seed is not None:
                self._rngs[k], self._seeds[k] = gym.utils.seeding.np_random(seed)
            elif self._rngs[k] is None:
                self._rngs[k], self._seeds[k] = gym.utils.seeding.np_random()
            rng = self._rngs[k]
            # reset_model of half_cheetah_v5 / ant_v5: the same draws in the same order and dtype
            self._qpos[k] = self._init_qpos + rng.uniform(low=-noise, high=noise, size=self._nq)
            self._qvel[k] = self._init_qvel + noise * rng.standard_normal(self._nv)
        batch.forward(sorted_ids)  # set_state's mj_forward
        if self._is_ant:
            # after mj_resetData + mj_forward, cfrc_ext is whatever mj_forward left (no rnePostConstraint)
            self._cfrc[ids] = self._cfrc_out[ids]
            self._x_before[ids] = self._xpos[ids, self._main_body, 0]
        self._elapsed[ids] = 0
        self._was_reset[ids] = True
        obs = self._observation(ids)
        self._obs[ids] = obs
        return obs

    def step(self, actions, sim_ids=None) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Step simulations ``sim_ids`` (None: all; else ascending ids) by one env step (frame_skip substeps) with
        ``actions`` (len(ids), nu); the other simulations do not move.

        Returns their obs (len(ids), obs_dim) float64, reward (len(ids),) float64, terminated and truncated
        (len(ids),) bool. ``truncated`` is the one episode clock: steps since the last reset >= max_episode_steps
        (gymnasium's TimeLimit).
        """
        actions = np.asarray(actions)
        # all simulations: slice(None) indexes views of the whole batch (the fast path; the per-step cost of one
        # simulation counts at --num-seeds 1); a subset: an index array (copies)
        ids = slice(None) if sim_ids is None else self._ids(sim_ids)
        n = self.num_sims if sim_ids is None else ids.size
        if sim_ids is not None and n > 1 and not np.all(ids[1:] > ids[:-1]):
            raise ValueError(f"sim_ids must be ascending, got {ids.tolist()}")
        if actions.shape != (n, self.action_dim):
            raise ValueError(f"actions must have shape {(n, self.action_dim)}, got {actions.shape}")
        if not self._all_reset:
            if not self._was_reset.all():
                raise RuntimeError(f"simulations {np.flatnonzero(~self._was_reset).tolist()} were never reset")
            self._all_reset = True
        self._ctrl[ids] = actions
        if self._is_ant:
            obs, reward, terminated = self._ant_step(actions, ids, n)
        else:
            obs, reward, terminated = self._half_cheetah_step(actions, ids, n)
        self._elapsed[ids] += 1
        truncated = self._elapsed[ids] >= self.max_episode_steps
        self._obs[ids] = obs
        return obs, reward, terminated, truncated

    def control_cost(self, actions: np.ndarray) -> np.ndarray:
        """gymnasium's control_cost, per simulation: ctrl_cost_weight * sum(action^2) in the actions' dtype."""
        # np.add.reduce is np.sum without its Python wrapper: the same pairwise sum per row
        return self._ctrl_cost_weight * np.add.reduce(np.square(actions), axis=1)

    def _half_cheetah_step(self, actions: np.ndarray, ids, n: int) -> tuple:
        """half_cheetah_v5's step for simulations ``ids``: do_simulation, then _get_rew and _get_obs; it never
        terminates."""
        x_position_before = self._x[ids].copy()
        self._batch.step(None if isinstance(ids, slice) else ids, self._frame_skip)
        x_velocity = (self._x[ids] - x_position_before) / self.dt
        # _get_rew: forward_reward - ctrl_cost
        reward = self._forward_reward_weight * x_velocity - self.control_cost(actions)
        return self._observation(ids), reward, self._never_terminated[:n]

    def _ant_step(self, actions: np.ndarray, ids, n: int) -> tuple:
        """ant_v5's step for simulations ``ids``: do_simulation (with mj_rnePostConstraint for cfrc_ext), then
        _get_rew, terminated (not healthy) and _get_obs. The torso x before the step is the one kept from the last
        call (gymnasium reads data.body(main_body).xpos, the kinematics at the start of the last substep)."""
        x_position_before = self._x_before[ids].copy()
        self._batch.step(None if isinstance(ids, slice) else ids, self._frame_skip)
        batch, model, datas, views, cfrc = self._batch, self.model, self._datas, self._cfrc_views, self._cfrc
        for k in range(self.num_sims) if isinstance(ids, slice) else ids.tolist():
            batch.get_data(k, datas[k])
            mujoco.mj_rnePostConstraint(model, datas[k])
            cfrc[k] = views[k]
        x_position_after = self._xpos[ids, self._main_body, 0].copy()
        self._x_before[ids] = x_position_after
        x_velocity = (x_position_after - x_position_before) / self.dt
        # is_healthy: state_vector() = (qpos, qvel) finite (one slice of the state rows) and z in the healthy range
        min_z, max_z = self._healthy_z_range
        z = self._qpos[ids, 2]
        healthy = np.logical_and.reduce(np.isfinite(self._qpos_qvel[ids]), axis=1) & (min_z <= z) & (z <= max_z)
        # contact_forces (clipped cfrc_ext) and contact_cost
        min_value, max_value = self._contact_force_range
        contact_forces = np.clip(self._cfrc[ids], min_value, max_value, out=self._clipped[:n])
        contact_cost = self._contact_cost_weight * np.add.reduce(np.square(contact_forces).reshape(n, -1), axis=1)
        # _get_rew: forward_reward + healthy_reward - (ctrl_cost + contact_cost)
        rewards = x_velocity * self._forward_reward_weight + healthy * self._healthy_reward
        reward = rewards - (self.control_cost(actions) + contact_cost)
        terminated = ~healthy & bool(self._terminate_when_unhealthy)
        return self._observation(ids, contact_forces), reward, terminated

    def _observation(self, ids, contact_forces=None) -> np.ndarray:
        """gymnasium's _get_obs for simulations ids (an index array, or slice(None): all)."""
        qpos, qvel = self._qpos[ids], self._qvel[ids]
        n = qpos.shape[0]
        obs = np.empty((n, self.observation_dim))
        a = self._nq - self._skip_qpos
        b = a + self._nv
        obs[:, :a] = qpos[:, self._skip_qpos:]
        obs[:, a:b] = qvel
        if self._is_ant and self._include_cfrc:
            if contact_forces is None:
                min_value, max_value = self._contact_force_range
                contact_forces = np.clip(self._cfrc[ids], min_value, max_value)
            obs[:, b:] = contact_forces[:, 1:].reshape(n, -1)
        return obs

    # -- checkpoints ------------------------------------------------------------------------------

    def get_state(self, k: int) -> dict:
        """Simulation k's episode as plain Python values (torch.load(weights_only=True) can read it):
        the setting, task index, the batch's state row (mjSTATE_INTEGRATION), the torso x read by Ant's
        next forward reward, the last observation, elapsed steps and the Generator's state."""
        k = self._sim(k)
        rng = self._rngs[k]
        return {
            "setting": self._setting(),
            "task_index": int(self._task[k]),
            "mujoco_integration_state": self._state[k].tolist(),
            "x_before": float(self._x_before[k]) if self._is_ant else None,
            "cfrc_ext": self._cfrc[k].tolist() if self._is_ant else None,
            "observation": self._obs[k].tolist(),
            "elapsed_steps": int(self._elapsed[k]),
            "was_reset": bool(self._was_reset[k]),
            "np_random_state": None if rng is None else _plain(rng.bit_generator.state),
            "np_random_seed": self._seeds[k],
        }

    def set_state(self, k: int, state: dict) -> np.ndarray:
        """Restore a get_state() dict (from a BatchedEnv of the same setting) into simulation k;
        returns its observation."""
        k = self._sim(k)
        if state["setting"] != self._setting():
            raise ValueError(f"state was saved with setting {state['setting']}, this env has {self._setting()}")
        row = np.asarray(state["mujoco_integration_state"], dtype=np.float64)
        if row.shape != self._state[k].shape:
            raise ValueError(f"MuJoCo state has {row.size} values, this model needs {self._state.shape[1]}")
        self.set_task([k], state["task_index"])
        self._state[k] = row
        if self._is_ant:
            self._x_before[k] = state["x_before"]
            self._cfrc[k] = np.asarray(state["cfrc_ext"], dtype=np.float64)
        self._obs[k] = np.asarray(state["observation"], dtype=np.float64)
        self._elapsed[k] = state["elapsed_steps"]
        self._was_reset[k] = state["was_reset"]
        self._all_reset = False
        if state["np_random_state"] is None:
            self._rngs[k] = None
        else:
            bit_generator = getattr(np.random, state["np_random_state"]["bit_generator"])()
            bit_generator.state = state["np_random_state"]
            self._rngs[k] = np.random.Generator(bit_generator)
        self._seeds[k] = state["np_random_seed"]
        return self._obs[k].copy()

    # -- helpers ----------------------------------------------------------------------------------

    def _state_slice(self, field: str) -> tuple[int, int]:
        """(offset, size) of a state field in the batch's state rows."""
        view = self._batch.bind(field).reshape(self.num_sims, -1)
        offset = (view.__array_interface__["data"][0] - self._state.__array_interface__["data"][0]) // 8
        return int(offset), view.shape[1]

    def _setting(self) -> dict:
        return {
            "env_id": self.env_id,
            "experiment": self.experiment,
            "strategy": self.strategy if self.experiment != "none" else None,
            "friction_mode": self.friction_mode if self.experiment == "slippery" else None,
        }

    def _sim(self, k) -> int:
        k = operator.index(k)
        if not 0 <= k < self.num_sims:
            raise IndexError(f"simulation {k} out of range 0..{self.num_sims - 1}")
        return k

    def _ids(self, sim_ids) -> np.ndarray:
        if sim_ids is None:
            return np.arange(self.num_sims)
        ids = np.asarray(sim_ids, dtype=np.int64).reshape(-1)
        if ids.size and (ids.min() < 0 or ids.max() >= self.num_sims):
            raise IndexError(f"simulation ids {ids.tolist()} out of range 0..{self.num_sims - 1}")
        if np.unique(ids).size != ids.size:
            raise ValueError(f"simulation ids {ids.tolist()} repeat")
        return ids
