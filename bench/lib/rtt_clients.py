"""The clients bench/cpusplit.py and bench/gaps.py compare, each run against a fresh
picows echo. Their command lines and the echo's are the benchmark driver's
(`driver.Config`, from BENCH_VENV, MOONWIRE_BIN and FLOOR_BIN, which
bench/lib/rtt_clients.sh exports)."""
import subprocess
import sys

import driver

CLIENTS = ("moonwire", "picows", "floor")
CONFIG = driver.Config()


def check(script, clients):
    """Exits with a message naming the clients there is no command line for."""
    unknown = [c for c in clients if c not in CLIENTS]
    if unknown:
        sys.exit(f"{script}: no client {', '.join(unknown)} (CLIENTS takes {','.join(CLIENTS)})")


def start_echo(pin):
    """The picows echo on a free port, under `pin` (a taskset prefix or []): (process, port)."""
    server = subprocess.Popen(pin + CONFIG.server_argv("picows"), stdout=subprocess.PIPE, text=True)
    return server, server.stdout.readline().split()[1]


def client_argv(client, port, workload, count, size, kind):
    return CONFIG.peer_argv(client) + ["--url", f"ws://127.0.0.1:{port}/", "--workload", workload,
                                       "--n", str(count), "--size", str(size), "--type", kind]
