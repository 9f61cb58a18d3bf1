"""References written apart from the scripts, shared by the tests that check the scripts' math against them."""

import numpy as np


def brute_force_gae(rewards, values, next_values, terminations, dones, gamma, gae_lambda, next_value_vars=None):
    """GAE over a (T, envs) or (T,) rollout as double sums straight from the definitions, env by env (Eq. (1)):

        A_t = sum_{l>=0} (gamma lambda)^l prod_{k<l} (1 - done_{t+k}) delta_{t+l},
        delta_t = r_t + gamma (1 - term_t) V(s_{t+1}) - V(s_t),

    each sum running over step t's own episode, up to the step where it ends (termination or truncation) or the
    buffer does; ``next_values[t]`` is V of step t's true next state (the final one at a truncation). With
    ``next_value_vars`` also EPPO's future variance (Algorithm 1, line 13), a terminal next state adding none:

        S_t = sum_{l>=1} (gamma lambda)^{2l} prod_{k<l-1} (1 - done_{t+k}) (1 - term_{t+l-1}) var[V(s_{t+l})];

    returns A, or (A, S) with ``next_value_vars``."""
    rewards, values, next_values, terminations, dones = (
        np.asarray(x, dtype=np.float64) for x in (rewards, values, next_values, terminations, dones))
    one_env = rewards.ndim == 1
    if one_env:
        rewards, values, next_values, terminations, dones = (
            x[:, None] for x in (rewards, values, next_values, terminations, dones))
    variances = np.zeros_like(rewards) if next_value_vars is None else np.asarray(next_value_vars, np.float64)
    variances = variances.reshape(rewards.shape)
    num_steps, num_envs = rewards.shape
    decay = gamma * gae_lambda
    advantages, future_vars = np.zeros_like(rewards), np.zeros_like(rewards)
    for env in range(num_envs):
        for t in range(num_steps):
            for later in range(t, num_steps):
                terminal = terminations[later, env] == 1.0
                next_value, next_var = (0.0, 0.0) if terminal else (next_values[later, env], variances[later, env])
                advantages[t, env] += decay ** (later - t) * (rewards[later, env] + gamma * next_value - values[later, env])
                future_vars[t, env] += decay ** (2 * (later - t + 1)) * next_var
                if dones[later, env] == 1.0:
                    break
    if one_env:
        advantages, future_vars = advantages[:, 0], future_vars[:, 0]
    return advantages if next_value_vars is None else (advantages, future_vars)
