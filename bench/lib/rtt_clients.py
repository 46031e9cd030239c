"""The clients bench/cpusplit.py and bench/gaps.py compare, each run against a fresh
picows echo: their command lines (from BENCH_VENV, MOONWIRE_BIN and FLOOR_BIN, which
bench/lib/rtt_clients.sh exports) and the echo server's start."""
import os
import subprocess
import sys

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = os.path.join(os.environ["BENCH_VENV"], "bin/python")
ARGV = {"moonwire": [os.environ["MOONWIRE_BIN"], "run", os.path.join(BENCH, "clients/peerbench_client.lua")],
        "picows": [PYTHON, os.path.join(BENCH, "peers/picows_client.py")],
        "floor": [os.environ["FLOOR_BIN"]]}


def check(script, clients):
    """Exits with a message naming the clients there is no command line for."""
    unknown = [c for c in clients if c not in ARGV]
    if unknown:
        sys.exit(f"{script}: no client {', '.join(unknown)} (CLIENTS takes {','.join(ARGV)})")


def start_echo(pin):
    """The picows echo on a free port, under `pin` (a taskset prefix or []): (process, port)."""
    server = subprocess.Popen(pin + [PYTHON, os.path.join(BENCH, "peers/echo_picows.py"), "0"],
                              stdout=subprocess.PIPE, text=True)
    return server, server.stdout.readline().split()[1]


def client_argv(client, port, workload, count, size, kind):
    return ARGV[client] + ["--url", f"ws://127.0.0.1:{port}/", "--workload", workload, "--n", str(count),
                           "--size", str(size), "--type", kind]
