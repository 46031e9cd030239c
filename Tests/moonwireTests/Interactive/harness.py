"""What the drivers of moonwire's interactive commands share (lua_repl.py, cli_sessions.py):
the binary under test and the case to run (argv), a deadline for every wait, a HOME of their
own, a terminal's environment, pexpect children, servers on an asyncio loop in a thread of
their own, and running one case by name.
"""
import asyncio
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading

import pexpect
from websockets.asyncio.server import serve

MOONWIRE = sys.argv[1]
DEADLINE = 30  # seconds: for any single wait (a loaded machine is slow, never this slow)
HOME = tempfile.mkdtemp(prefix="moonwire-tty-")


def env(**extra):
    e = dict(os.environ, HOME=HOME, TERM="xterm", COLUMNS="120", LINES="40")
    e.pop("NO_COLOR", None)
    e.update(extra)
    return e


def spawn(*args, **extra_env):
    """`moonwire ARGS` on a pseudo-terminal of 40 x 120, its output echoed to ours."""
    child = pexpect.spawn(MOONWIRE, list(args), env=env(**extra_env), encoding="utf-8", timeout=DEADLINE, dimensions=(40, 120))
    child.logfile_read = sys.stdout
    return child


def check(condition, what):
    if not condition:
        raise AssertionError(what)


def in_thread(start):
    """Runs the coroutine function `start` (it opens a server, keeps what the caller needs,
    and returns) on an asyncio loop of its own, in a daemon thread kept alive for the run;
    returns once `start` has returned."""
    ready = threading.Event()

    async def main():
        await start()
        ready.set()
        await asyncio.Future()

    threading.Thread(target=lambda: asyncio.run(main()), daemon=True).start()
    assert ready.wait(DEADLINE), "the server did not start"


def websocket_server(handler):
    """A websockets server with `handler` on a free port, in a thread; returns its URL."""
    where = {}

    async def start():
        server = await serve(handler, "127.0.0.1", 0)
        where["url"] = f"ws://127.0.0.1:{server.sockets[0].getsockname()[1]}/"

    in_thread(start)
    return where["url"]


def run_case(cases):
    """Runs the case named by argv[2] (the function case_NAME in `cases`) and exits 0 when it
    holds; otherwise prints what was expected and what was seen, and exits 1."""
    name = sys.argv[2]
    try:
        cases["case_" + name]()
    except (AssertionError, pexpect.ExceptionPexpect, queue.Empty, subprocess.TimeoutExpired) as error:
        print(f"\nFAILED {name}: {error}", flush=True)
        sys.exit(1)
    finally:
        shutil.rmtree(HOME, ignore_errors=True)
    print(f"\nPASSED {name}", flush=True)
