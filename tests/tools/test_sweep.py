"""scripts/sweep.sh + scripts/runlist.py + scripts/run_one.sh, against tests/fake_algorithm.py and one real tiny run."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from scripts import runlist, summarize
from tests.fake_algorithm import FAKE_SCRIPT, TINY_FLAGS

REPO_ROOT = runlist.REPO_ROOT
SWEEP = os.path.join(REPO_ROOT, "scripts", "sweep.sh")
PY = sys.executable


@pytest.fixture
def fake_scripts(tmp_path):
    """A scripts dir whose ppo_continuous.py / eppo_continuous.py are the fake algorithm."""
    directory = tmp_path / "algorithms"
    directory.mkdir()
    for name in ("ppo_continuous.py", "eppo_continuous.py"):
        shutil.copy(FAKE_SCRIPT, directory / name)
    return str(directory)


def sweep(*args, env=None, **kwargs):
    environment = {**os.environ, "EPPO_TOOLS_PYTHON": PY, **(env or {})}
    return subprocess.run(["bash", SWEEP, *args], capture_output=True, text=True, env=environment, timeout=120,
                          **kwargs)


def test_dry_run_lists_the_expected_commands(tmp_path):
    root = str(tmp_path / "root")
    result = sweep("--methods", "PPO,EPPO_ind", "--settings", "paralysis/HalfCheetah/back-one,slippery/Ant/increasing",
                   "--seeds", "1-2", "--root", root, "--python", "py", "--gpus", "0,1", "--dry-run",
                   "--", "--num-envs", "2")  # fmt: skip
    assert result.returncode == 0, result.stderr
    ppo, eppo = os.path.join(REPO_ROOT, "ppo_continuous.py"), os.path.join(REPO_ROOT, "eppo_continuous.py")
    threads = max(1, len(os.sched_getaffinity(0)) // 2)  # the cores divided between the 2 workers (--gpus 0,1)
    expected = []
    for setting, env_id, kappa in (("paralysis/HalfCheetah/back-one", "HalfCheetah-v5", "0.01"),
                                   ("slippery/Ant/increasing", "Ant-v5", "0.25")):
        experiment, _, strategy = setting.split("/")
        # the kappas of paper_kappa.csv
        for script, method, flags in ((ppo, "PPO", ""), (eppo, "EPPO_ind", f" --variant ind --kappa {kappa}")):
            for seed in (1, 2):
                run_dir = os.path.join(root, setting, method, f"seed{seed}")
                expected.append(f"py {script} --env-id {env_id} --experiment {experiment} --strategy {strategy}{flags} "
                                f"--seed {seed} --run-dir {run_dir} --num-envs 2 --env-threads {threads}")  # fmt: skip
    gpus = ["0", "1"] * 4
    assert result.stdout.splitlines() == [f"CUDA_VISIBLE_DEVICES={g} {c}" for g, c in zip(gpus, expected)]
    assert "8 runs: 0 already finished (skipped), 8 to run with 2 worker(s)" in result.stderr


def test_all_settings_and_kappa_override():
    runs = runlist.build_runs(["EPPO_cor"], runlist.select_settings(all_settings=True), [1], "/r", kappa=0.5)
    assert len(runs) == 14 and all(run.argv[run.argv.index("--kappa") + 1] == "0.5" for run in runs)
    settings = runlist.select_settings(experiments="paralysis", envs="HalfCheetah")
    assert [s.strategy for s in settings] == ["back-one", "front-one", "cross-v1", "cross-v2"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--methods", "PPO,SAC", "--all"],
         "unknown method 'SAC'; valid: PPO, PFO, CB, PPO_DRND, EPPO_mean, EPPO_cor, EPPO_ind"),
        (["--settings", "paralysis/Hopper/back-one"], "unknown env 'Hopper'; valid: Ant, HalfCheetah"),
        (["--all", "--seeds", "3-1"], "seed range '3-1' is empty"),
        (["--all", "--workers", "0"], "--workers must be a positive integer"),
        (["--all", "--", "--seed", "4"], "extra flag '--seed' is set by the sweep itself"),
        (["--methods", "EPPO_cor", "--settings", "paralysis/Ant/my-own"],
         "EPPO_cor needs --kappa for paralysis/Ant/my-own"),
    ],
)
def test_invalid_arguments_exit_2_with_the_valid_choices(tmp_path, args, message):
    result = sweep(*args, "--root", str(tmp_path), "--dry-run")
    assert result.returncode == 2
    assert message in result.stderr


def test_a_script_not_in_the_table_is_a_method_named_by_its_method_name(tmp_path):
    """Every *_continuous.py of --scripts-dir that METHODS does not list is a method: named by the string literal
    its method_name returns (FOO), else by its file name (BAR_BAZ: its method_name computes the name); --methods
    builds its command as any other's, and method_for_script finds it. Discovery reads the scripts without
    importing them (runlist.py stays free of torch)."""
    scripts = tmp_path / "algorithms"
    scripts.mkdir()
    (scripts / "foo_continuous.py").write_text('import torch\n\n\ndef method_name(args) -> str:\n    """Its name."""\n'
                                               '    return "FOO"  # FOO:\n')
    (scripts / "bar_baz_continuous.py").write_text('def method_name(args):\n    return "BAR" + args.suffix\n')
    root = str(tmp_path / "root")
    result = subprocess.run(
        [PY, "-c", "import sys; sys.path.insert(0, sys.argv[1]); import runlist; code = runlist.main(sys.argv[2:]); "
                   "assert 'torch' not in sys.modules, 'runlist imported torch'; sys.exit(code)",
         os.path.join(REPO_ROOT, "scripts"), "--methods", "FOO,BAR_BAZ", "--settings", "paralysis/HalfCheetah/back-one",
         "--seeds", "3", "--root", root, "--python", "py", "--scripts-dir", str(scripts)],
        capture_output=True, text=True, timeout=60)  # fmt: skip
    assert result.returncode == 0, result.stderr
    expected = []
    for method, script in (("FOO", "foo_continuous.py"), ("BAR_BAZ", "bar_baz_continuous.py")):
        directory = os.path.join(root, "paralysis", "HalfCheetah", "back-one", method, "seed3")
        expected.append(f"{directory}\tpy {scripts / script} --env-id HalfCheetah-v5 --experiment paralysis "
                        f"--strategy back-one --seed 3 --run-dir {directory}")
    assert result.stdout.splitlines() == expected
    assert runlist.method_for_script(str(scripts / "foo_continuous.py"), scripts_dir=str(scripts)) == "FOO"
    assert runlist.method_for_script("bar_baz_continuous.py", scripts_dir=str(scripts)) == "BAR_BAZ"
    assert runlist.method_for_script("baz_continuous.py", scripts_dir=str(scripts)) is None
    # the paper's methods keep their table order and fixed flags, the discovered ones follow
    assert list(runlist.all_methods(str(scripts))) == [*runlist.METHODS, "BAR_BAZ", "FOO"]


def test_tiny_sweep_finishes_and_relaunch_skips(tmp_path, fake_scripts):
    root = str(tmp_path / "root")
    args = ["--methods", "PPO", "--settings", "paralysis/HalfCheetah/back-one", "--seeds", "1-2", "--root", root,
            "--scripts-dir", fake_scripts, "--python", PY, "--workers", "2"]  # fmt: skip
    first = sweep(*args)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "2 finished now, 0 already finished, 0 failed" in first.stdout
    runs = summarize.load_runs(root)
    assert [(r.seed, r.complete) for r in runs] == [(1, True), (2, True)]
    assert runs[0].aulc == pytest.approx(10 + (0 + 128 + 256 + 384 + 512) / 5 / 100)  # fake: 10 * seed + step / 100
    log = os.path.join(runs[0].run_dir, "stdout.log")
    assert "ready: seed=1" in open(log).read()
    size = os.path.getsize(log)

    second = sweep(*args)
    assert second.returncode == 0
    assert "0 finished now, 2 already finished" in second.stdout
    assert os.path.getsize(log) == size  # nothing was started again


def test_failed_run_is_reported_and_preempted_run_retried(tmp_path, fake_scripts):
    root = str(tmp_path / "root")
    result = sweep("--methods", "PPO", "--settings", "paralysis/HalfCheetah/back-one", "--seeds", "1,2", "--root", root,
                   "--scripts-dir", fake_scripts, "--python", PY, "--workers", "2",
                   env={"FAKE_FAIL_SEEDS": "2", "FAKE_PREEMPT_ONCE": "1"})  # fmt: skip
    assert result.returncode == 1
    seed1, seed2 = (runlist.run_dir(root, runlist.Setting("paralysis", "HalfCheetah", "back-one"), "PPO", s)
                    for s in (1, 2))
    assert f"preempted (exit 75), retrying once: {seed1}" in result.stdout
    assert f"FAILED exit 3: {seed2} (log: {seed2}/stderr.log)" in result.stdout
    assert "1 finished now, 0 already finished, 1 failed" in result.stdout
    assert (os.path.isfile(os.path.join(seed1, "summary.json"))
            and not os.path.exists(os.path.join(seed2, "summary.json")))
    assert "too many non-finite steps (fake)" in open(os.path.join(seed2, "stderr.log")).read()


def test_sigterm_stops_the_sweep_and_relaunch_resumes(tmp_path, fake_scripts):
    root = str(tmp_path / "root")
    args = ["bash", SWEEP, "--methods", "PPO", "--settings", "paralysis/HalfCheetah/back-one", "--seeds", "1-3",
            "--root", root, "--scripts-dir", fake_scripts, "--python", PY, "--workers", "2"]  # fmt: skip
    process = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "EPPO_TOOLS_PYTHON": PY, "FAKE_SLEEP": "60"})  # fmt: skip
    logs = [os.path.join(root, "paralysis/HalfCheetah/back-one/PPO", f"seed{s}", "stdout.log") for s in (1, 2)]
    deadline = time.time() + 60
    while not all(os.path.exists(p) and "ready" in open(p).read() for p in logs):  # both runs installed their handler
        assert time.time() < deadline and process.poll() is None
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    stdout, _ = process.communicate(timeout=30)
    assert process.returncode == 75
    assert "0 failed, 2 preempted, 1 not started" in stdout

    resumed = sweep(*args[2:])
    assert resumed.returncode == 0
    assert "3 finished now, 0 already finished" in resumed.stdout


def test_real_tiny_ppo_run_with_two_seeds_per_process(tmp_path):
    """Real ppo_continuous.py runs through the sweep (CONTRACT's tiny configuration), seeds 1-3 packed two per
    process: seeds 1 and 2 share a process, seed 3 runs alone, and every seed writes its own run directory."""
    root = str(tmp_path / "root")
    result = sweep("--methods", "PPO", "--settings", "paralysis/HalfCheetah/back-one", "--seeds", "1-3", "--root", root,
                   "--seeds-per-process", "2", "--python", PY, "--", *TINY_FLAGS)  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    runs = sorted(summarize.load_runs(root), key=lambda run: run.seed)
    assert [run.seed for run in runs] == [1, 2, 3]
    for run in runs:
        assert run.complete, run.problems
        assert (run.method, run.num_tasks, run.steps_per_task) == ("PPO", 2, 256)
        assert len(run.evaluations) == 5  # steps 0, 128, 256, 384, 512
    assert "2 runs: 2 finished now" in result.stdout  # two processes


def test_packs_hold_consecutive_pending_seeds(tmp_path):
    assert runlist.seed_packs([1, 2, 3, 4, 5], 2) == [[1, 2], [3, 4], [5]]
    assert runlist.seed_packs([1, 3, 4, 5, 9], 4) == [[1], [3, 4, 5], [9]]
    root = str(tmp_path / "root")
    setting = runlist.Setting("paralysis", "HalfCheetah", "back-one")
    finished = runlist.run_dir(root, setting, "PPO", 2)
    os.makedirs(finished)
    open(os.path.join(finished, "summary.json"), "w").close()
    runs = runlist.build_runs(["PPO"], [setting], [1, 2, 3, 4, 5], root, seeds_per_process=3, pending_only=True,
                              kappa_table={})
    assert [run.run_dir for run in runs] == [runlist.run_dir(root, setting, "PPO", s) for s in (1, 3)]
    second = runs[1].argv
    assert second[second.index("--seed") + 1 : second.index("--seed") + 4] == ("3", "--num-seeds", "3")
    assert second[second.index("--run-dir") + 1] == runlist.run_dir(root, setting, "PPO", "{seed}")
    assert "--num-seeds" not in runs[0].argv  # a pack of one is a plain one-seed run


def test_grid_search_selects_kappa_by_mean_aulc(tmp_path, fake_scripts):
    root = str(tmp_path / "grid")
    result = subprocess.run(
        ["bash", os.path.join(REPO_ROOT, "scripts", "grid_search_kappa.sh"), "--root", root,
         "--settings", "slippery/Ant/increasing", "--grid-cor", "0.01,0.25", "--grid-ind", "0.05,0.1",
         "--seeds", "1001-1002", "--workers", "2", "--scripts-dir", fake_scripts, "--python", PY],
        capture_output=True, text=True, env={**os.environ, "EPPO_TOOLS_PYTHON": PY}, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "8 finished now" in result.stdout
    assert os.path.isfile(os.path.join(root, "kappa0.25", "slippery/Ant/increasing/EPPO_cor/seed1001/summary.json"))
    # the fake's returns grow with kappa (+ 100 * kappa): the largest kappa of each grid wins
    with open(os.path.join(root, "kappa_selected.csv")) as f:
        assert f.read() == "experiment,env,strategy,kappa_cor,kappa_ind\nslippery,Ant,increasing,0.25,0.1\n"


def test_cb_runs_carry_no_maturity_or_replacement_flags_so_the_script_takes_the_papers_per_setting():
    """cb_continuous.py picks the paper's values per setting itself (tests/methods/test_cb.py): the run list adds
    none."""
    settings = [runlist.Setting("slippery", "HalfCheetah", "increasing"),
                runlist.Setting("paralysis", "HalfCheetah", "back-one"),
                runlist.Setting("paralysis", "Ant", "back-one")]  # fmt: skip
    runs = runlist.build_runs(["CB"], settings, [1], "root")
    assert [run.argv[run.argv.index("--strategy") + 2 : run.argv.index("--seed")] for run in runs] == [(), (), ()]


def test_each_worker_gets_its_share_of_the_cores_unless_env_threads_is_given(tmp_path):
    """sweep.sh gives every run --env-threads (CPUs available) / --workers, at least 1; an explicit
    -- --env-threads T is kept as the only one."""
    base = ["--methods", "PPO", "--settings", "paralysis/HalfCheetah/back-one", "--seeds", "1", "--root",
            str(tmp_path), "--python", "py", "--dry-run"]
    cores = len(os.sched_getaffinity(0))
    for workers, threads in ((1, cores), (2 * cores + 1, 1)):
        result = sweep(*base, "--workers", str(workers), env={"OMP_NUM_THREADS": "1"})  # nproc must ignore it
        assert result.returncode == 0, result.stderr
        assert result.stdout.split()[-2:] == ["--env-threads", str(threads)]
    result = sweep(*base, "--", "--env-threads", "3")
    assert result.stdout.count("--env-threads") == 1 and result.stdout.split()[-2:] == ["--env-threads", "3"]


def test_slurm_runs_get_their_cpus_as_env_threads(tmp_path):
    """slurm_sweep.sh (dry run, no SLURM needed) gives every run --env-threads = --cpus-per-task, or the extra
    flags' own --env-threads."""
    slurm = os.path.join(os.path.dirname(SWEEP), "slurm_sweep.sh")
    base = ["bash", slurm, "--methods", "PPO", "--settings", "paralysis/HalfCheetah/back-one", "--seeds", "1",
            "--root", str(tmp_path), "--cpus-per-task", "3", "--dry-run"]
    environment = {**os.environ, "EPPO_TOOLS_PYTHON": PY}
    for extra, threads in (([], "3"), (["--", "--env-threads", "5"], "5")):
        result = subprocess.run(base + extra, capture_output=True, text=True, env=environment, timeout=60)
        assert result.returncode == 0, result.stderr
        command = [line for line in result.stdout.splitlines() if "ppo_continuous.py" in line][0]
        assert command.count("--env-threads") == 1 and command.split()[-2:] == ["--env-threads", threads]
