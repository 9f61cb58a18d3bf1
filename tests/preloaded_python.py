"""A Python interpreter that has imported torch, gymnasium, mujoco and the scripts' other third-party modules once,
and forks a child for each script the tests run: tiny_run.py's runs start in ~0.1 s instead of ~3 s (most of it
`import torch`), about half of the suite's time on a 2-core machine.

A child is what `python SCRIPT ARGS...` (or `python -c CODE ARGS...`) would be: its own process, stdin /dev/null,
stdout and stderr into the files the request names, the request's working directory and environment, sys.argv and
sys.path[0] as the interpreter sets them, the default signal dispositions, the interpreter's exit (the threads
joined, atexit, the streams flushed) with the script's exit code, an uncaught exception's traceback; only the
interpreter's teardown is skipped. What it cannot
be is a fresh import of the preloaded modules: tiny_run.py therefore starts a fresh interpreter instead when a run's
environment differs from this server's in a variable that those modules read when they are imported (PYTHON*, OMP_*,
...), and the golden tests hold the outputs of both kinds of run to the same bytes.

Protocol, one JSON line each way (tiny_run.PreloadedPython is the client): the server prints "ready" once its
imports are done; a request {"argv": [...], "cwd": ..., "env": {...}, "stdout": path, "stderr": path} is answered
["started", pid], and each child's end ["exit", pid, returncode] (negative: killed by that signal, as in
subprocess). End of input: the server exits (children still running go on).
"""

import builtins
import importlib.machinery
import json
import os
import select
import signal
import sys
import types

# Not this folder: the children's sys.path[0] is their script's folder, and the server's imports see no test helper.
del sys.path[0]
for module in sys.argv[1].split(","):
    __import__(module)


def serve() -> dict:
    """Answer requests until one forks: returns that request in the child; the server never returns."""
    wakeup_read, wakeup_write = os.pipe()  # SIGCHLD wakes the select below
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    print("ready", flush=True)
    pending = b""
    while True:
        readable, _, _ = select.select([0, wakeup_read], [], [])
        if wakeup_read in readable:
            os.read(wakeup_read, 4096)
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            print(json.dumps(["exit", pid, os.waitstatus_to_exitcode(status)]), flush=True)
        if 0 not in readable:
            continue
        chunk = os.read(0, 1 << 16)
        if not chunk:
            sys.exit(0)
        pending += chunk
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            pid = os.fork()
            if pid == 0:
                signal.set_wakeup_fd(-1)
                signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                os.close(wakeup_read)
                os.close(wakeup_write)
                return request
            print(json.dumps(["started", pid]), flush=True)


request = serve()
# The child: its streams replace the server's (fds 0-2 were the server's pipes; nothing else of the server's is open)
os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
for fd, name in ((1, "stdout"), (2, "stderr")):
    os.dup2(os.open(request[name], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
os.chdir(request["cwd"])
os.environ.clear()
os.environ.update(request["env"])
sys.argv = list(request["argv"])
if sys.argv[0] == "-c":  # python -c CODE ARGS...: sys.argv ['-c', ARGS...], sys.path[0] '' (the working directory)
    filename, source = "<string>", sys.argv.pop(1)
    sys.path.insert(0, "")
    main_module = types.ModuleType("__main__")
    main_module.__loader__ = importlib.machinery.BuiltinImporter
else:  # python SCRIPT ARGS...: sys.path[0] the script's folder
    filename = os.path.abspath(sys.argv[0])
    with open(filename, "rb") as script:
        source = script.read()
    sys.path.insert(0, os.path.dirname(filename))
    main_module = types.ModuleType("__main__")
    main_module.__loader__ = importlib.machinery.SourceFileLoader("__main__", filename)
    main_module.__file__, main_module.__cached__ = filename, None
main_module.__annotations__, main_module.__builtins__, main_module.__spec__ = {}, builtins, None
# The script's module is __main__, not this server's (multiprocessing, imported above, took this one as __mp_main__)
sys.modules["__main__"] = sys.modules["__mp_main__"] = main_module
del request, serve


def run_script() -> int:
    """The script, as the interpreter runs it: its exit code, an uncaught exception's traceback (exit 1)."""
    try:
        exec(compile(source, filename, "exec", dont_inherit=True), main_module.__dict__)
    except SystemExit as exit_status:
        if exit_status.code is None or isinstance(exit_status.code, int):
            return exit_status.code or 0
        print(exit_status.code, file=sys.stderr)
        return 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        return -signal.SIGINT if isinstance(sys.exc_info()[1], KeyboardInterrupt) else 1
    return 0


exit_code = run_script()
# The interpreter's exit up to its teardown (Py_FinalizeEx): the threads joined, atexit, the streams flushed (exit
# 120 if that fails). The teardown itself, which frees every object of the preloaded modules and so writes to every
# page the fork shared (~1 s per child), is skipped: os._exit.
import threading  # noqa: E402

threading._shutdown()
import atexit  # noqa: E402

atexit._run_exitfuncs()
for stream in (sys.stdout, sys.stderr):
    try:
        stream.flush()
    except Exception:
        exit_code = exit_code or 120
if exit_code == -signal.SIGINT:  # an uncaught KeyboardInterrupt ends the process by SIGINT, as Python's own exit
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGINT)
os._exit(exit_code & 0xFF)
