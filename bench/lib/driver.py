#!/usr/bin/env python3
"""moonwire's benchmark driver (run it through bench/run.sh, which installs the
peers and builds moonwire first).

Sections, each configured by environment variables (see bench/README.md):
  dispatch   moonwire-bench --json: the Lua <-> Swift bridge in nanoseconds
  rtt        32 B ping-pong, every peer client and moonwire against the picows
             echo server, plus moonwire against its own echo server
  pipelined  the same for windowed throughput at 32 B, 1 KiB and 64 KiB
  drained    the moonwire client paced by its send budget vs pipelined
  metrics    the moonwire pipelined 32 B client with metrics off vs on (--summary,
             --summary-json, --metrics-port scraped every second)
  spread     bench/spread.sh: moonwire clients and moonwire's broadcasting server,
             and its C floor (FLOOR=1, bench/floor/bcastfloor.c)
  conns      thousands of idle moonwire connections with a heartbeat: memory and
             idle CPU per connection, client and server in separate processes
  fanout     C connections, one message each per tick, against the picows server

Writes bench/results/latest.md (tables, targets met or missed) and
bench/results/latest.json (every run and the medians). Every child process runs
in its own process group with a timeout and is killed when the driver ends.
"""
import datetime
import json
import os
import platform
import re
import resource
import select
import shlex
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROOT = os.path.dirname(BENCH)
PEERS_DIR = os.path.join(BENCH, "peers")
E = os.environ.get

QUICK = {"N_RTT": "5000", "PIPE": "32:20000,1024:10000,65536:500", "CONNS": "200", "FANOUT_T": "3",
         "REPEAT": "1", "IDLE_CONNS": "200", "IDLE_SECONDS": "3", "SPREAD_CLIENTS": "200", "N_JSON": "20000",
         "SPREAD_ROUNDS": "20", "METRICS_N": "100000"}
KNOBS = ("QUICK", "WORKLOADS", "PEERS", "REPEAT", "N_RTT", "N_JSON", "PIPE", "PIPE_TYPE", "CONNS", "FANOUT_T",
         "FANOUT_REPEAT", "CONNECT_CONCURRENCY", "IDLE_CONNS", "HEARTBEAT", "IDLE_SECONDS",
         "SPREAD_CLIENTS", "SPREAD_ROUNDS", "SPREAD_INTERVAL", "PIN_CPU", "MOONWIRE_BIN", "MOONWIRE_BENCH_BIN", "METRICS_N",
         "FLOOR_BIN")
ALL_WORKLOADS = ("dispatch", "rtt", "pipelined", "json", "drained", "metrics", "spread", "conns", "fanout")
ECHO_WORKLOADS = ("rtt", "pipelined", "json")
JSON_SIZE = 332  # bench/json/trade.json, the JSON echo bot's message
ALL_PEERS = ("node-ws", "websockets", "picows", "floor", "moonwire")
# How tables name a client; floor is bench/floor/wsfloor.c, the C baseline (no target compares with it).
PEER_LABELS = {"floor": "floor (C)"}
PORT_BUDGET = 24000  # of the 28232 ephemeral ports (32768-60999); tcp_tw_reuse=2 reuses loopback ones
SETTLE_S = 2


def where(cpu):
    """Where the rtt and pipelined clients and servers run, for tables: PIN_CPU ("" = nowhere)."""
    return f"client and server on CPU {cpu}" if cpu else "client and server unpinned"


def env_list(name, default):
    return [x.strip() for x in E(name, default).replace(" ", ",").split(",") if x.strip()]


def log(*words):
    print(time.strftime("%H:%M:%S"), *words, file=sys.stderr, flush=True)


class Config:
    def __init__(self):
        if E("QUICK") == "1":  # an explicit knob still wins over the QUICK size
            for key, value in QUICK.items():
                os.environ.setdefault(key, value)
        self.bin = os.path.abspath(E("MOONWIRE_BIN", os.path.join(ROOT, ".build/release/moonwire")))
        self.bench_bin = E("MOONWIRE_BENCH_BIN", os.path.join(os.path.dirname(self.bin), "moonwire-bench"))
        self.floor_bin = os.path.abspath(E("FLOOR_BIN", os.path.join(ROOT, ".build/bench-floor/wsfloor")))
        self.venv = E("BENCH_VENV", "/tmp/moonwire-benchvenv")
        self.workloads = [w for w in env_list("WORKLOADS", ",".join(ALL_WORKLOADS)) if w in ALL_WORKLOADS]
        self.peers = [p for p in env_list("PEERS", ",".join(ALL_PEERS)) if p in ALL_PEERS]
        self.repeat = int(E("REPEAT", "3"))
        self.n_rtt = int(E("N_RTT", "50000"))
        self.n_json = int(E("N_JSON", "200000"))
        self.pipe = [tuple(int(x) for x in item.split(":"))
                     for item in env_list("PIPE", "32:200000,1024:100000,65536:5000")]
        self.pipe_type = E("PIPE_TYPE", "binary")
        self.fanout_conns = [int(c) for c in env_list("CONNS", "1000,10000")]
        self.fanout_t = int(E("FANOUT_T", "10"))
        self.fanout_repeat = int(E("FANOUT_REPEAT", "1"))
        self.concurrency = int(E("CONNECT_CONCURRENCY", "200"))
        self.idle_conns = [int(c) for c in env_list("IDLE_CONNS", "1000,5000,15000")]
        self.heartbeat = float(E("HEARTBEAT", "30"))  # the default: a ping after 30 s of silence
        self.idle_seconds = float(E("IDLE_SECONDS", "30"))  # one whole heartbeat period
        self.spread_clients = [int(x) for x in E("SPREAD_CLIENTS", "1000,10000,20000").split(",") if x]
        self.spread_rounds = int(E("SPREAD_ROUNDS", "100"))
        self.spread_interval = float(E("SPREAD_INTERVAL", "0.1"))  # the 10 rounds a second
        self.cpu = E("PIN_CPU", "1")  # empty: nothing pinned
        self.where = where(self.cpu)
        self.metrics_n = int(E("METRICS_N", "1000000"))

    def peer_argv(self, peer, run_flags=()):
        python = os.path.join(self.venv, "bin/python")
        return {"node-ws": ["node", os.path.join(PEERS_DIR, "node_ws_client.js")],
                "websockets": [python, os.path.join(PEERS_DIR, "websockets_client.py")],
                "picows": [python, os.path.join(PEERS_DIR, "picows_client.py")],
                "floor": [self.floor_bin],
                "moonwire": [self.bin, "run", *run_flags, os.path.join(BENCH, "clients/peerbench_client.lua")]}[peer]

    def server_argv(self, server):
        return {"picows": [os.path.join(self.venv, "bin/python"), os.path.join(PEERS_DIR, "echo_picows.py"), "0"],
                "moonwire": [self.bin, "run", os.path.join(BENCH, "servers/echo.lua"), "0"]}[server]


SERVER_NAMES = {"picows": "picows (bench/peers/echo_picows.py)", "moonwire": "moonwire (bench/servers/echo.lua)"}


# ---------------------------------------------------------------- processes

class Children:
    """Every process the driver starts, each the leader of its own process group."""

    def __init__(self):
        self.live = set()

    def start(self, argv, env=None, **kw):
        env = dict(os.environ, NODE_PATH="/usr/share/nodejs", **(env or {}))
        proc = subprocess.Popen(argv, start_new_session=True, env=env, **kw)
        self.live.add(proc)
        return proc

    def kill(self, proc, grace=5.0):
        """SIGTERM to the group, SIGKILL after `grace` seconds."""
        if proc.poll() is None:
            self._signal(proc, signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                pass
        self._signal(proc, signal.SIGKILL)  # also whatever the leader left behind
        proc.wait()
        self.live.discard(proc)

    def run(self, argv, timeout, **kw):
        """Runs argv to its end or for at most `timeout` seconds.
        Returns (rc, stdout, stderr, timed_out, wall_s)."""
        start = time.monotonic()
        proc = self.start(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)
        try:
            out, err = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            self._signal(proc, signal.SIGKILL)
            out, err = proc.communicate()
            timed_out = True
        self.kill(proc)
        return proc.returncode, out, err, timed_out, round(time.monotonic() - start, 3)

    def kill_all(self):
        for proc in list(self.live):
            self.kill(proc, grace=1.0)

    @staticmethod
    def _signal(proc, sig):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass


CHILDREN = Children()


class Lines:
    """A child's stdout read line by line without blocking past a deadline
    (os.read on the pipe: a buffered reader would hide lines from select)."""

    def __init__(self, proc):
        self.fd = proc.stdout.fileno()
        self.buffer = b""
        self.seen = []

    def wait_for(self, prefix, deadline):
        """The words of the first new line starting with prefix, or None at the deadline or EOF."""
        while True:
            while b"\n" in self.buffer:
                line, self.buffer = self.buffer.split(b"\n", 1)
                text = line.decode(errors="replace")
                self.seen.append(text)
                if text.startswith(prefix):
                    return text.split()
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.fd], [], [], left)[0]:
                return None
            chunk = os.read(self.fd, 65536)
            if not chunk:
                return None
            self.buffer += chunk


def taskset(pin):
    return ["taskset", "-c", CFG.cpu] if pin else []


def start_server(server, pin):
    errors = tempfile.TemporaryFile(mode="w+")
    proc = CHILDREN.start(taskset(pin) + CFG.server_argv(server), stdout=subprocess.PIPE, stderr=errors)
    ready = Lines(proc).wait_for("READY", time.monotonic() + 30)
    if not ready:
        CHILDREN.kill(proc)
        errors.seek(0)
        raise RuntimeError(f"echo server {server} did not start: {errors.read()[-400:]}")
    proc.errors = errors
    return proc, int(ready[1])


def stop_server(proc):
    CHILDREN.kill(proc, grace=10.0)
    proc.errors.close()


def proc_cpu_s(pid):
    """utime + stime of a live process, in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return None


def proc_rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return int(re.search(r"VmRSS:\s+(\d+)", f.read()).group(1))
    except (OSError, AttributeError):
        return None


def time_wait_count():
    try:
        out = subprocess.run(["ss", "-tanH", "state", "time-wait"], capture_output=True, text=True,
                             timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return out.count("\n")


def wait_for_ports(conns, limit_s=90):
    """Waits while TIME_WAIT sockets + conns would exceed the ephemeral port budget."""
    waited = 0
    while waited < limit_s and time_wait_count() + conns >= PORT_BUDGET:
        time.sleep(1)
        waited += 1
    if waited:
        log(f"  waited {waited}s for TIME_WAIT sockets to drain")


def last_json(text):
    for line in reversed(text.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return None


def run_timed(argv, timeout, pin):
    """Runs a client under GNU time. Returns (rc, stdout, stderr, wall_s, timed_out, maxrss_kb, cpu_s)."""
    with tempfile.NamedTemporaryFile(prefix="mwbench-time", delete=False) as tf:
        usage_file = tf.name
    full = taskset(pin) + ["/usr/bin/time", "-q", "-f", "%M %U %S", "-o", usage_file] + argv
    rc, out, err, timed_out, wall = CHILDREN.run(full, timeout)
    maxrss = cpu = None
    try:
        with open(usage_file) as f:
            rss, user, system = f.read().split()[-3:]
        maxrss, cpu = int(rss), round(float(user) + float(system), 3)
    except (OSError, ValueError):
        pass
    os.unlink(usage_file)
    return rc, out, err, wall, timed_out, maxrss, cpu


# ---------------------------------------------------------------- sections

def client_args(url, spec, label):
    std = {"url": url, "workload": spec["workload"], "n": spec.get("n", 0), "size": spec.get("size", 32),
           "type": spec.get("type", "text"), "window": 0, "conns": spec.get("conns", 1),
           "duration": spec.get("duration", 1), "concurrency": spec.get("concurrency", CFG.concurrency),
           "label": label}
    if spec.get("budget"):
        std["budget"] = spec["budget"]
    return [x for key, value in std.items() for x in ("--" + key, str(value))]


def peer_run(peer, server, spec, rep):
    """One client run against a fresh echo server; the client's JSON line plus
    what the driver measured around it."""
    pin = bool(CFG.cpu) and spec["workload"] in ("rtt", "pipelined", "drained", "json")
    ids = {"peer": peer, "server": server, "workload": spec["workload"], "size": spec.get("size"),
           "n": spec.get("n"), "conns": spec.get("conns"), "rep": rep, "pinned": pin}
    try:
        srv, port = start_server(server, pin)
    except RuntimeError as e:
        log(f"  {peer} -> {server}: {e}")
        return dict(ids, ok=False, error=str(e))
    argv = CFG.peer_argv(peer, spec.get("run_flags", ())) + client_args(f"ws://127.0.0.1:{port}/", spec, peer)
    scraper = Scraper(spec["scrape_port"]) if spec.get("scrape_port") else None
    try:
        server_cpu0 = proc_cpu_s(srv.pid)
        rc, out, err, wall, timed_out, maxrss, cpu = run_timed(argv, spec["timeout"], pin)
        server_cpu1 = proc_cpu_s(srv.pid)
    finally:
        stop_server(srv)
        if scraper:
            scraper.finish()
    res = last_json(out) or {"ok": False, "error": "no JSON line"}
    if scraper:
        res["scrapes"] = scraper.scrapes
    if rc != 0 or timed_out:
        res["ok"] = False
    if not res.get("ok"):
        res["stderr_tail"] = err[-600:]
        if timed_out:
            res["error"] = f"timed out after {spec['timeout']} s"
    res.update(ids, rc=rc, wall_s=wall, client_cpu_s=cpu, maxrss_kb=maxrss, cmd=shlex.join(argv),
               server_cpu_s=(round(server_cpu1 - server_cpu0, 3)
                             if server_cpu0 is not None and server_cpu1 is not None else None))
    log(f"  {peer:10s} -> {server:8s} {spec['workload']:9s} size={spec.get('size')} "
        f"{'conns=%s ' % spec['conns'] if spec.get('conns') else ''}ok={res.get('ok')} wall={wall}s"
        + ("" if res.get("ok") else f" error={res.get('error')}"))
    return res


def echo_pairs():
    pairs = [(peer, "picows") for peer in CFG.peers]
    if "moonwire" in CFG.peers:
        pairs.append(("moonwire", "moonwire"))
    return pairs


def section_echo(workload):
    if workload == "rtt":
        specs = [{"workload": "rtt", "n": CFG.n_rtt, "size": 32, "type": "text", "timeout": 300}]
    elif workload == "json":
        # The JSON echo bot (decode, read a field, encode, send) with the 332-byte trade
        # message; the floor client has no JSON codec.
        specs = [{"workload": "json", "n": CFG.n_json, "size": JSON_SIZE, "type": "text", "timeout": 300}]
    else:
        specs = [{"workload": "pipelined", "n": n, "size": size, "type": CFG.pipe_type, "timeout": 300}
                 for size, n in CFG.pipe]
    runs, pairs = [], echo_pairs()
    if workload == "json":
        pairs = [(peer, server) for peer, server in pairs if peer != "floor"]
    for spec in specs:
        for rep in range(CFG.repeat):
            shift = rep % len(pairs)  # a different client goes first each repetition
            for peer, server in pairs[shift:] + pairs[:shift]:
                runs.append(peer_run(peer, server, spec, rep))
    return runs


def pipe_window_bytes(size):
    """The bytes the pipelined client keeps in flight (its window, as in the client)."""
    return max(16, min(1024, (4 * 1048576) // max(1, size))) * size


def section_drained():
    """The send budget's cost: the moonwire client against the picows echo at 1 KiB and
    64 KiB, pipelined (a window of messages in flight, the queue never full) and drained
    (send until "queue full", then c:drain()) twice: with the default budget (16 MiB) and
    with a budget of the pipelined window's bytes (the same bytes in flight); rotating,
    REPEAT times each."""
    runs = []
    for size, n in CFG.pipe:
        if size not in (1024, 65536):
            continue
        modes = [("pipelined", None), ("drained", None), ("drained", pipe_window_bytes(size))]
        for rep in range(CFG.repeat):
            for workload, budget in modes[rep % 3:] + modes[:rep % 3]:
                spec = {"workload": workload, "n": n, "size": size, "type": CFG.pipe_type, "timeout": 300,
                        "budget": budget}
                res = peer_run("moonwire", "picows", spec, rep)
                res["budget"] = budget
                runs.append(res)
    return runs


class Scraper(threading.Thread):
    """GETs /metrics on a port once a second while a client runs, as Prometheus
    would (15 times as often as its default interval); counts the answers."""

    def __init__(self, port):
        super().__init__(daemon=True)
        self.url, self.scrapes, self.done = f"http://127.0.0.1:{port}/metrics", 0, threading.Event()
        self.start()

    def run(self):
        while not self.done.wait(1.0):
            try:
                with urllib.request.urlopen(self.url, timeout=2) as answer:
                    if answer.status == 200 and answer.read():
                        self.scrapes += 1
            except OSError:
                pass  # not listening yet, or the run just ended

    def finish(self):
        self.done.set()
        self.join()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def section_metrics():
    """What measuring costs: the moonwire pipelined 32 B client against the picows
    echo with metrics off (a plain run) and on (what a measured run with a
    Prometheus scrape uses: --summary, --summary-json, --metrics-port, scraped
    every second), alternating, REPEAT times each."""
    runs = []
    for rep in range(CFG.repeat):
        for mode in (("off", "on") if rep % 2 == 0 else ("on", "off")):
            spec = {"workload": "pipelined", "n": CFG.metrics_n, "size": 32, "type": CFG.pipe_type, "timeout": 300}
            summary_file = None
            if mode == "on":
                fd, summary_file = tempfile.mkstemp(prefix="mwbench-summary", suffix=".json")
                os.close(fd)
                port = free_port()
                spec.update(run_flags=["--summary", "--summary-json", summary_file, "--metrics-port", str(port)],
                            scrape_port=port)
            run = peer_run("moonwire", "picows", spec, rep)
            if summary_file:
                try:
                    with open(summary_file) as f:
                        run["summary_metrics"] = len(json.load(f).get("metrics", []))
                except (OSError, ValueError):
                    run["ok"], run["error"] = False, "no --summary-json file"
                os.unlink(summary_file)
            run.update(workload="metrics", mode=mode)
            runs.append(run)
    return runs


def summarize_metrics(runs):
    def rate(mode):
        return median([r.get("msgs_per_s") for r in runs if r["mode"] == mode])
    off, on = rate("off"), rate("on")
    on_runs = [r for r in runs if r["mode"] == "on"]
    return [{"size": 32, "n": runs[0].get("n") if runs else None, "runs": len(runs),
             "ok": all(r.get("ok") for r in runs), "off_msgs_per_s": off, "on_msgs_per_s": on,
             "ratio": on / off if on and off else None,
             "off_client_cpu_s": median([r.get("client_cpu_s") for r in runs if r["mode"] == "off"]),
             "on_client_cpu_s": median([r.get("client_cpu_s") for r in on_runs]),
             "scrapes": median([r.get("scrapes") for r in on_runs]),
             "off_maxrss_kb": median([r.get("maxrss_kb") for r in runs if r["mode"] == "off"]),
             "on_maxrss_kb": median([r.get("maxrss_kb") for r in on_runs])}]


def summarize_drained(runs):
    rows = []
    for size in sorted({r["size"] for r in runs}):
        pipe = median([r.get("msgs_per_s") for r in runs if r["size"] == size and r["workload"] == "pipelined"])
        drained = [r for r in runs if r["size"] == size and r["workload"] == "drained" and not r.get("budget")]
        rate = median([r.get("msgs_per_s") for r in drained])
        same = [r for r in runs if r["size"] == size and r["workload"] == "drained" and r.get("budget")]
        same_rate = median([r.get("msgs_per_s") for r in same])
        rows.append({"size": size, "n": drained[0].get("n") if drained else None,
                     "ok": all(r.get("ok") for r in runs if r["size"] == size),
                     "pipelined_msgs_per_s": pipe, "drained_msgs_per_s": rate,
                     "drained_mib_per_s": median([r.get("mib_per_s") for r in drained]),
                     "refusals": median([r.get("refusals") for r in drained]),
                     "maxrss_kb": median([r.get("maxrss_kb") for r in drained]),
                     "ratio": rate / pipe if rate and pipe else None,
                     "window_budget": pipe_window_bytes(size), "window_budget_msgs_per_s": same_rate,
                     "window_budget_ratio": same_rate / pipe if same_rate and pipe else None})
    return rows


def section_fanout():
    runs = []
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    for conns in CFG.fanout_conns:
        spec = {"workload": "fanout", "conns": conns, "duration": CFG.fanout_t, "size": 32, "type": "text",
                "n": 0, "concurrency": CFG.concurrency, "timeout": CFG.fanout_t + 180}
        if conns + 100 > nofile:
            log(f"  skip fanout {conns}: ulimit -n is {nofile}")
            continue
        for rep in range(CFG.fanout_repeat):
            for peer in CFG.peers:
                wait_for_ports(conns)
                runs.append(peer_run(peer, "picows", spec, rep))
    return runs


def section_dispatch():
    if not os.access(CFG.bench_bin, os.X_OK):
        log(f"  dispatch not measured: {CFG.bench_bin} not found")
        return [{"ok": False, "measured": False, "error": f"{CFG.bench_bin} not found"}]
    argv = [CFG.bench_bin, "--json"]
    rc, out, err, timed_out, wall = CHILDREN.run(argv, 300)
    res = last_json(out)
    if timed_out or res is None or "dispatch_ns" not in res:
        if timed_out:
            why = "timed out after 300 s"
        elif rc != 0:
            first = next((line for line in err.splitlines() if line.strip()), "")
            why = f"moonwire-bench --json exited with {rc}: {first[:200]}"
        else:
            why = "no JSON line with dispatch_ns (moonwire-bench without --json?)"
        log(f"  dispatch not measured: {why}")
        return [{"ok": False, "measured": False, "cmd": shlex.join(argv), "rc": rc, "error": why,
                 "stdout_tail": out[-600:], "stderr_tail": err[-300:]}]
    res.update(ok=True, measured=True, cmd=shlex.join(argv), wall_s=wall)
    log(f"  dispatch_ns={res['dispatch_ns']}")
    return [res]


def section_spread():
    results = []
    for clients in CFG.spread_clients:
        results.append(spread_run(clients, CFG.spread_rounds))
        results.append(spread_run(clients, CFG.spread_rounds, floor=True))
    return results


def spread_run(clients, rounds, floor=False):
    """One bench/spread.sh run: moonwire, or with floor its C floor (bench/floor/bcastfloor.c),
    which runs one process pair and so only up to one process's descriptor limit."""
    client = PEER_LABELS["floor"] if floor else "moonwire"
    per_process = resource.getrlimit(resource.RLIMIT_NOFILE)[1] - 256  # as spread.sh counts
    if floor and clients > per_process:
        log(f"  skip spread floor {clients}: above one process's {per_process} descriptors")
        return {"client": client, "clients": clients, "rounds": rounds, "ok": None, "measured": False,
                "error": f"not run: the floor is one process pair, {clients} connections exceed {per_process}"}
    wait_for_ports(clients)
    argv = ["bash", os.path.join(BENCH, "spread.sh"), str(clients), str(rounds)]
    env = {"MOONWIRE_BIN": CFG.bin, "INTERVAL": f"{CFG.spread_interval:g}"}
    if floor:
        env["FLOOR"] = "1"
    rc, out, err, timed_out, wall = CHILDREN.run(argv, rounds * CFG.spread_interval + 300, env=env, cwd=ROOT)
    res = last_json(out) or {"error": "no JSON line"}
    res["ok"] = rc == 0 and not timed_out and res.get("complete_rounds") == rounds
    if not res["ok"]:
        res["stderr_tail"] = err[-600:]
    prefix = "FLOOR=1 " if floor else "MOONWIRE_BIN=" + shlex.quote(CFG.bin) + " "
    res.update(client=client, interval_s=CFG.spread_interval, rc=rc, wall_s=wall, timed_out=timed_out,
               cmd=f"INTERVAL={CFG.spread_interval:g} " + prefix + shlex.join(argv[1:]))
    log(f"  spread {client} clients={clients} ok={res['ok']} spread_p99_ms={res.get('spread_p99_ms')}")
    return res


def idle_conns_run(conns):
    """conns_client.lua against moonwire's echo server. RSS and CPU come from
    /proc: RSS before dialing and after every dial ended (client's own lines),
    then CPU and RSS of both processes over an idle window."""
    wait_for_ports(conns)
    res = {"workload": "conns", "conns": conns, "heartbeat_s": CFG.heartbeat, "idle_window_s": CFG.idle_seconds}
    try:
        srv, port = start_server("moonwire", pin=False)
    except RuntimeError as e:
        return dict(res, ok=False, error=str(e))
    server_rss0 = proc_rss_kb(srv.pid)
    hold = SETTLE_S + CFG.idle_seconds + 2
    argv = [CFG.bin, "run", os.path.join(BENCH, "clients/conns_client.lua"), f"ws://127.0.0.1:{port}/",
            str(conns), f"{CFG.heartbeat:g}", f"{hold:g}", str(CFG.concurrency)]
    res["cmd"] = shlex.join(argv)
    errors = tempfile.TemporaryFile(mode="w+")
    client = CHILDREN.start(argv, stdout=subprocess.PIPE, stderr=errors)
    lines = Lines(client)
    try:
        base = lines.wait_for("BASE_RSS_KB", time.monotonic() + 30)
        opened = base and lines.wait_for("ALL_OPEN", time.monotonic() + 60 + conns / 20)
        if not opened:
            raise RuntimeError("client did not report ALL_OPEN in time")
        res.update(base_rss_kb=int(base[1]), opened=int(opened[1]), failed=int(opened[2]),
                   connect_s=float(opened[3]), open_rss_kb=int(opened[4]), server_base_rss_kb=server_rss0)
        time.sleep(SETTLE_S)
        before = (time.monotonic(), proc_cpu_s(client.pid), proc_cpu_s(srv.pid))
        time.sleep(CFG.idle_seconds)
        after = (time.monotonic(), proc_cpu_s(client.pid), proc_cpu_s(srv.pid))
        idle_rss, server_rss = proc_rss_kb(client.pid), proc_rss_kb(srv.pid)
        if None in before + after or idle_rss is None or server_rss is None:
            raise RuntimeError("client or server exited during the idle window")
        window = after[0] - before[0]
        per = max(1, res["opened"])
        res.update(idle_rss_kb=idle_rss, server_rss_kb=server_rss,
                   idle_cpu_pct=round(100 * (after[1] - before[1]) / window, 2),
                   server_idle_cpu_pct=round(100 * (after[2] - before[2]) / window, 2),
                   kib_per_conn=round((idle_rss - res["base_rss_kb"]) / per, 2),
                   kib_per_conn_open=round((res["open_rss_kb"] - res["base_rss_kb"]) / per, 2),
                   kib_per_conn_total=round(idle_rss / per, 2),
                   server_kib_per_conn=round((server_rss - server_rss0) / per, 2))
        lines.wait_for("{", time.monotonic() + hold + 30)
        res["client"] = last_json("\n".join(lines.seen))
        res["ok"] = bool(res["client"] and res["client"].get("ok"))
        if not res["ok"]:
            res["error"] = "not every connection opened and stayed open" if res["client"] else "no JSON line"
    except RuntimeError as e:
        res.update(ok=False, error=str(e))
    finally:
        CHILDREN.kill(client)
        stop_server(srv)
        if not res.get("ok"):
            errors.seek(0)
            res["stderr_tail"] = errors.read()[-600:]
        errors.close()
    log(f"  conns={conns} ok={res.get('ok')} connect_s={res.get('connect_s')} "
        f"KiB/conn={res.get('kib_per_conn')} idle_cpu%={res.get('idle_cpu_pct')}"
        + ("" if res.get("ok") else f" error={res.get('error')}"))
    return res


def section_conns():
    nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    runs = []
    for conns in CFG.idle_conns:
        if conns + 100 > nofile:
            log(f"  skip conns {conns}: ulimit -n is {nofile}")
            runs.append({"conns": conns, "ok": False, "error": f"ulimit -n is {nofile}"})
            continue
        runs.append(idle_conns_run(conns))
    return runs


# ---------------------------------------------------------------- summaries

def median(values):
    values = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return statistics.median(values) if values else None


def summarize_echo(runs):
    """Medians per (workload, size, peer, server), in the order the pairs were run."""
    groups = {}
    for r in runs:
        groups.setdefault((r["workload"], r["size"], r["peer"], r["server"]), []).append(r)
    rows = []
    for (workload, size, peer, server), rs in groups.items():
        rates = [r["msgs_per_s"] for r in rs if isinstance(r.get("msgs_per_s"), (int, float))]
        row = {"workload": workload, "size": size, "n": rs[0].get("n"), "peer": peer, "server": server,
               "runs": len(rs), "ok": all(r.get("ok") for r in rs),
               "range_pct": (100 * (max(rates) - min(rates)) / statistics.median(rates)) if len(rates) > 1 else None}
        for key in ("msgs_per_s", "mib_per_s", "p50_us", "p99_us", "client_cpu_s", "server_cpu_s", "maxrss_kb"):
            row[key] = median([r.get(key) for r in rs])
        rows.append(row)
    for row in rows:
        mw = next((x for x in rows if x["workload"] == row["workload"] and x["size"] == row["size"]
                   and x["peer"] == "moonwire" and x["server"] == "picows"), None)
        row["moonwire_ratio"] = (mw["msgs_per_s"] / row["msgs_per_s"]
                                 if mw and mw["msgs_per_s"] and row["msgs_per_s"] else None)
    return rows


def find(rows, **match):
    return next((r for r in rows if all(r.get(k) == v for k, v in match.items())), None)


def number(v):
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def targets(summary):
    """The issue's targets, each with the measured value and whether it is met
    (None: not measured in this run)."""
    echo, conns = summary.get("echo", []), summary.get("conns", [])
    fanout, dispatch = summary.get("fanout", []), summary.get("dispatch", [])
    out = []

    def add(name, value, unit, ok):
        value = number(value)
        out.append({"target": name, "value": value, "met": None if value is None else ok(value),
                    "measured": "not measured" if value is None else unit.format(value)})

    for workload, size, need in (("rtt", 32, 1.1), ("pipelined", 32, 1.2), ("pipelined", 1024, 1.2)):
        row = find(echo, workload=workload, size=size, peer="picows", server="picows")
        add(f"{workload} {fmt_size(size)}: moonwire ≥ {need}× picows msgs/s (both against the picows echo)",
            row and row["moonwire_ratio"], "{:.2f}×", lambda v, need=need: v >= need)
    others = [r for r in echo if r["workload"] == "json" and r["server"] == "picows" and r["peer"] != "moonwire"]
    ahead = min((r["moonwire_ratio"] for r in others if r["moonwire_ratio"]), default=None)
    add("json 332 B: moonwire (codec = \"json\") ahead of every peer's JSON echo bot (msgs/s, picows echo)",
        ahead if others and all(r["moonwire_ratio"] for r in others) else None, "{:.2f}× the best",
        lambda v: v > 1.0)
    row = find(echo, workload="pipelined", size=65536, peer="moonwire", server="picows")
    floor = find(echo, workload="pipelined", size=65536, peer="floor", server="picows")
    add("pipelined 64 KiB: moonwire ≥ 0.95× the C floor client's MiB/s (both against the picows echo)",
        row and floor and row["mib_per_s"] and floor["mib_per_s"] and row["mib_per_s"] / floor["mib_per_s"],
        "{:.2f}× the floor", lambda v: v >= 0.95)
    row = find(conns, conns=15000, ok=True) or {}
    add("conns 15 000: client RSS < 8 KiB per connection ((RSS idle − RSS before dialing) / C)",
        row.get("kib_per_conn"), "{:.2f} KiB", lambda v: v < 8)
    add(f"conns 15 000: client idle CPU < 5 % of one core (heartbeat every {CFG.heartbeat:g} s)",
        row.get("idle_cpu_pct"), "{:.2f} %", lambda v: v < 5)
    row = find(fanout, conns=10000, peer="moonwire", ok=True) or {}
    peers = [r.get("spread_p99_ms_max") for r in fanout
             if r.get("conns") == 10000 and r.get("ok") and r.get("peer") not in ("moonwire", "floor")]
    best = min((v for v in peers if number(v) is not None), default=None)
    add("fanout 10 000 clients: moonwire spread p99 (worst tick) at most the best peer's in the same run",
        row.get("spread_p99_ms_max") / best if best and number(row.get("spread_p99_ms_max")) else None,
        "{:.2f}× the best peer's", lambda v: v <= 1.0)
    spread = summary.get("spread", [])
    row = find(spread, clients=10000, client="moonwire") or {}
    floor = find(spread, clients=10000, client=PEER_LABELS["floor"]) or {}
    every = row.get("complete_rounds") == row.get("rounds", CFG.spread_rounds) if row else None
    add(f"broadcast to 10 000 clients every {CFG.spread_interval:g} s: every round complete and spread p99 < 50 ms",
        row.get("spread_p99_ms") if every else None, "{:.1f} ms", lambda v: v < 50)
    add("broadcast to 10 000 clients: the C floor's spread p99 in the same run (what this machine allows; < 50 ms?)",
        floor.get("spread_p99_ms") if floor.get("ok") else None, "{:.1f} ms", lambda v: v < 50)
    row = find(spread, clients=20000, client="moonwire") or {}
    add("broadcast to 20 000 clients: one client process (processes used)", row.get("processes") if row.get("ok") else None,
        "{:.0f}", lambda v: v == 1)
    for size in (1024, 65536):
        row = find(summary.get("drained", []), size=size) or {}
        add(f"drained {fmt_size(size)}: drain-paced ≥ 0.9× pipelined msgs/s, same bytes in flight (moonwire → picows)",
            row.get("window_budget_ratio"), "{:.2f}×", lambda v: v >= 0.9)
    row = find(summary.get("metrics", []), size=32) or {}
    add("metrics 32 B: pipelined with metrics on ≥ 0.95× metrics off msgs/s (moonwire → picows)",
        row.get("ratio"), "{:.3f}×", lambda v: v >= 0.95)
    row = find(dispatch, measured=True) or {}
    add("dispatch < 0.5 µs (moonwire-bench dispatch_ns)", row.get("dispatch_ns"), "{:.0f} ns", lambda v: v < 500)
    return out


# ---------------------------------------------------------------- report

def fmt(v, digits=0):
    if v is None:
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    return f"{v:,.{digits}f}"


def fmt_size(size):
    return f"{size // 1024} KiB" if size >= 1024 else f"{size} B"


def mib(kb):
    return kb / 1024 if isinstance(kb, (int, float)) else None


def table(header, rows):
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def echo_tables(rows):
    out = []
    for workload in ECHO_WORKLOADS:
        sizes = sorted({r["size"] for r in rows if r["workload"] == workload})
        for size in sizes:
            group = [r for r in rows if r["workload"] == workload and r["size"] == size]
            n = group[0]["n"]
            if workload == "rtt":
                out.append(f"### rtt — {fmt_size(size)} text, n = {n:,}, {CFG.where}")
                header = ["client", "server", "ok", "msgs/s", "range %", "p50 µs", "p99 µs", "client CPU s",
                          "max RSS MiB", "moonwire ÷ client"]
                body = [[peer_label(r), r["server"], fmt(r["ok"]), fmt(r["msgs_per_s"]), fmt(r["range_pct"]),
                         fmt(r["p50_us"], 1), fmt(r["p99_us"], 1), fmt(r["client_cpu_s"], 2),
                         fmt(mib(r["maxrss_kb"]), 1), ratio_cell(r)] for r in group]
            else:
                if workload == "json":
                    out.append(f"### json — the JSON echo bot (decode, read a field, encode, send), {size} B "
                               f"text pipelined, n = {n:,}, {CFG.where}; moonwire "
                               "codec = \"json\", node ws JSON.parse/stringify, picows orjson, websockets json")
                else:
                    out.append(f"### pipelined — {fmt_size(size)} {CFG.pipe_type}, n = {n:,}, "
                               f"{CFG.where}")
                header = ["client", "server", "ok", "msgs/s", "MiB/s", "range %", "client CPU s", "max RSS MiB",
                          "moonwire ÷ client"]
                body = [[peer_label(r), r["server"], fmt(r["ok"]), fmt(r["msgs_per_s"]), fmt(r["mib_per_s"], 1),
                         fmt(r["range_pct"]), fmt(r["client_cpu_s"], 2), fmt(mib(r["maxrss_kb"]), 1),
                         ratio_cell(r)] for r in group]
            out += ["", table(header, body), ""]
    return out


def peer_label(row):
    return PEER_LABELS.get(row["peer"], row["peer"])


def ratio_cell(row):
    if row["peer"] == "moonwire":
        return "–"
    return f"{row['moonwire_ratio']:.2f}×" if row["moonwire_ratio"] else "–"


def fanout_tables(runs):
    out = []
    for conns in sorted({r["conns"] for r in runs}):
        group = [r for r in runs if r["conns"] == conns]
        out.append(f"### fanout — {conns:,} connections, {CFG.fanout_t} ticks, server picows, unpinned")
        header = ["client", "ok", "connect s", "VmHWM MiB", "max RSS MiB", "client CPU s", "lat p50 ms",
                  "lat p99 ms", "spread p99 ms", "spread max ms", "received / expected"]
        body = [[peer_label(r), fmt(r.get("ok")), fmt(r.get("connect_s"), 2), fmt(mib(r.get("vmhwm_kb")), 1),
                 fmt(mib(r.get("maxrss_kb")), 1), fmt(r.get("client_cpu_s"), 2), fmt(r.get("lat_p50_ms_med"), 1),
                 fmt(r.get("lat_p99_ms_max"), 1), fmt(r.get("spread_p99_ms_max"), 1),
                 fmt(r.get("spread_max_ms"), 1), f"{r.get('received', '–')} / {r.get('expected', '–')}"]
                for r in group]
        out += ["", table(header, body), ""]
    return out


def conns_table(runs):
    header = ["conns", "ok", "opened", "connect s", "RSS before MiB", "RSS idle MiB", "KiB/conn (Δ)",
              "KiB/conn (total)", "idle CPU %", "server KiB/conn", "server idle CPU %", "closed in hold"]
    body = []
    for r in runs:
        client = r.get("client") or {}
        body.append([f"{r['conns']:,}", fmt(r.get("ok")), fmt(r.get("opened")), fmt(r.get("connect_s"), 2),
                     fmt(mib(r.get("base_rss_kb")), 1), fmt(mib(r.get("idle_rss_kb")), 1),
                     fmt(r.get("kib_per_conn"), 2), fmt(r.get("kib_per_conn_total"), 2),
                     fmt(r.get("idle_cpu_pct"), 2), fmt(r.get("server_kib_per_conn"), 2),
                     fmt(r.get("server_idle_cpu_pct"), 2), fmt(client.get("closed_during_hold"))])
    return [f"### conns — moonwire client ↔ moonwire server (bench/servers/echo.lua), separate processes, "
            f"heartbeat every {CFG.heartbeat:g} s, idle CPU over {CFG.idle_seconds:g} s",
            "", "Targets: < 8 KiB per connection (Δ column), idle CPU < 5 % of one core.", "",
            table(header, body), ""]


def spread_table(runs):
    def cpu(r, side):
        user, sys_ = r.get(f"{side}_user_ms"), r.get(f"{side}_sys_ms")
        return "–" if user is None or sys_ is None else f"{user:.1f} + {sys_:.1f}"

    body = [[fmt(s.get("clients")), s.get("client", "moonwire"), s.get("processes", 1 if s.get("measured", True) else "–"),
             s.get("rounds", CFG.spread_rounds), fmt(s.get("ok")), fmt(s.get("complete_rounds")),
             fmt(s.get("spread_p50_ms"), 2), fmt(s.get("spread_p99_ms"), 2), fmt(s.get("latency_p50_ms"), 2),
             fmt(s.get("latency_p99_ms"), 2), fmt(s.get("server_write_ms_p50"), 1), fmt(s.get("server_write_ms_p99"), 1),
             cpu(s, "server"), cpu(s, "client")] for s in runs]
    notes = [f"- {s['clients']:,} {s.get('client')}: {s['error']}" for s in runs if s.get("measured") is False]
    return [table(["clients", "client", "processes", "rounds", "ok", "complete rounds", "spread p50 ms",
                   "spread p99 ms", "latency p50 ms", "latency p99 ms", "server write p50 ms", "server write p99 ms",
                   "server CPU ms/round (user + sys)", "client CPU ms/round (user + sys)"], body),
            "", "Spread is first-to-last receipt of one broadcast over every client, p99 over the rounds. "
            "floor (C): `FLOOR=1 bench/spread.sh` (`bench/floor/bcastfloor.c`), the same writes and reads with no "
            "framework: one write() per connection per round, one epoll loop reading the frames; its server write "
            "(first to last write of a round) and CPU per round (getrusage over the rounds) are only measured there.",
            ""] + notes + ([""] if notes else [])


def errors_list(runs):
    out = []
    for r in runs:
        if r.get("ok") is False and r.get("measured", True):
            who = " ".join(str(r[k]) for k in ("workload", "peer", "server", "size", "conns") if r.get(k))
            out.append(f"- {who or 'run'}: {r.get('error', '')} {str(r.get('stderr_tail', ''))[-300:]!r}")
    return out


def render_md(meta, summary, runs, target_rows):
    lines = [f"# moonwire benchmarks — {meta['date']}", ""]
    if not meta["complete"]:
        lines += [f"**INCOMPLETE RUN**: {meta.get('stopped', '')}", ""]
    lines += [f"- command: `{meta['command']}`",
              f"- host: {meta['host']['nproc']} CPUs ({meta['host']['cpu']}), kernel {meta['host']['kernel']}, "
              f"nofile {meta['host']['nofile']}",
              f"- moonwire: commit `{meta['commit']}`, binary `{meta['bin']}` ({meta['bin_version']}, "
              f"built {meta['bin_mtime']})",
              f"- peers: {meta['peer_versions']}",
              f"- duration: {meta['duration_s']:.0f} s; REPEAT={CFG.repeat} (tables show medians)",
              "- servers: rtt/pipelined — picows echo (`bench/peers/echo_picows.py`) for every client, plus one "
              "moonwire row against moonwire's own echo (`bench/servers/echo.lua`), "
              f"{CFG.where}; fanout — picows echo, unpinned; conns — moonwire echo, unpinned; spread — "
              "`bench/spread.sh` (moonwire server broadcasting to moonwire clients, and its C floor "
              "`bench/floor/bcastfloor.c`); dispatch — `moonwire-bench --json`.",
              "", "## Targets", "",
              table(["target", "measured", "met"],
                    [[t["target"], t["measured"], "–" if t["met"] is None else ("met" if t["met"] else "**missed**")]
                     for t in target_rows]), ""]
    if summary.get("echo"):
        lines += ["## rtt, pipelined and json", "",
                  "“moonwire ÷ client” is the moonwire client's median msgs/s against the picows server "
                  "divided by this row's.", ""] + echo_tables(summary["echo"])
    if summary.get("drained"):
        lines += ["## drained — send budget vs pipelined (moonwire client, picows echo, "
                  f"{CFG.where})", "",
                  "drained: `if not c:send(m) then c:drain() end` with the default budget (1024 messages, "
                  "16 MiB), and with `queue.bytes` set to the bytes the pipelined window keeps in flight "
                  "(1 MiB at 1 KiB, 4 MiB at 64 KiB); pipelined: the window above, the queue never full.", "",
                  table(["size", "n", "ok", "pipelined msgs/s", "drained msgs/s (16 MiB)", "÷ pipelined",
                         "drained msgs/s (window bytes)", "÷ pipelined", "drained MiB/s (16 MiB)",
                         "refusals (16 MiB)", "max RSS MiB (16 MiB)"],
                        [[fmt_size(r["size"]), f"{r['n']:,}" if r["n"] else "–", fmt(r["ok"]),
                          fmt(r["pipelined_msgs_per_s"]), fmt(r["drained_msgs_per_s"]), fmt(r["ratio"], 2),
                          fmt(r.get("window_budget_msgs_per_s")), fmt(r.get("window_budget_ratio"), 2),
                          fmt(r["drained_mib_per_s"], 1), fmt(r["refusals"]),
                          fmt(mib(r["maxrss_kb"]), 1)] for r in summary["drained"]]), ""]
    if summary.get("metrics"):
        lines += [f"## metrics — what measuring costs (moonwire pipelined client, picows echo, {CFG.where})", "",
                  "off: `moonwire run peerbench_client.lua …`; on: `moonwire run --summary --summary-json FILE "
                  "--metrics-port PORT peerbench_client.lua …` with `/metrics` scraped every second; "
                  "alternating, medians.", "",
                  table(["size", "n", "runs", "ok", "off msgs/s", "on msgs/s", "on ÷ off", "off CPU s",
                         "on CPU s", "scrapes per run", "off max RSS MiB", "on max RSS MiB"],
                        [[fmt_size(r["size"]), f"{r['n']:,}" if r["n"] else "–", r["runs"], fmt(r["ok"]),
                          fmt(r["off_msgs_per_s"]), fmt(r["on_msgs_per_s"]), fmt(r["ratio"], 3),
                          fmt(r["off_client_cpu_s"], 2), fmt(r["on_client_cpu_s"], 2), fmt(r["scrapes"]),
                          fmt(mib(r["off_maxrss_kb"]), 1), fmt(mib(r["on_maxrss_kb"]), 1)]
                         for r in summary["metrics"]]), ""]
    if summary.get("fanout"):
        lines += ["## fanout", ""] + fanout_tables(summary["fanout"])
    if summary.get("conns"):
        lines += ["## conns", ""] + conns_table(summary["conns"])
    if summary.get("spread"):
        lines += ["## spread — moonwire server broadcasting to moonwire clients (bench/spread.sh), "
                  f"a round every {CFG.spread_interval:g} s", ""] + spread_table(summary["spread"])
    if summary.get("dispatch"):
        d = summary["dispatch"][0]
        if d.get("measured"):
            row = [fmt(d.get(k), 1) for k in ("lua_to_swift_ns", "bridge_overhead_ns", "swift_to_lua_ns", "dispatch_ns")]
        else:
            row = ["not measured"] * 4
        lines += ["## dispatch — moonwire-bench --json", "",
                  table(["lua → swift ns", "bridge overhead ns", "swift → lua ns", "dispatch ns"], [row]), ""]
        if not d.get("measured"):
            lines += [f"Not measured: {d.get('error')}.", ""]
    problems = errors_list(runs)
    if problems:
        lines += ["## Failed runs", ""] + problems + [""]
    return "\n".join(lines)


def command_line():
    """The knobs the caller set (not the QUICK defaults) and the command."""
    knobs = [f"{k}={shlex.quote(v)}" for k, v in GIVEN_KNOBS.items()]
    return " ".join(knobs + ["bench/run.sh"])


def metadata(start, complete, stopped):
    def output(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=ROOT).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    commit = output(["git", "rev-parse", "--short", "HEAD"])
    if output(["git", "status", "--porcelain", "--untracked-files=no", "--", "Sources", "Package.swift"]):
        commit += " (Sources modified)"
    cpu = re.search(r"model name\s*:\s*(.*)", open("/proc/cpuinfo").read())
    python = os.path.join(CFG.venv, "bin/python")
    versions = output([python, "-c", "import websockets, picows, uvloop; "
                       "print(f'websockets {websockets.__version__}, picows {picows.__version__}, "
                       "uvloop {uvloop.__version__}')"])
    node_ws = output(["node", "-p", "'node ' + process.version + ', ws ' + "
                      "require('/usr/share/nodejs/ws/package.json').version"])
    return {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S"), "complete": complete,
            "stopped": stopped, "command": command_line(), "commit": commit, "bin": CFG.bin,
            "bin_version": output([CFG.bin, "--version"]), "bench_bin": CFG.bench_bin,
            "bin_mtime": (datetime.datetime.fromtimestamp(os.path.getmtime(CFG.bin)).strftime("%Y-%m-%d %H:%M")
                          if os.path.exists(CFG.bin) else "missing"),
            "peer_versions": ", ".join(v for v in (node_ws, versions) if v),
            "duration_s": time.monotonic() - start,
            "host": {"name": platform.node(), "nproc": os.cpu_count(), "kernel": platform.release(),
                     "cpu": cpu.group(1).strip() if cpu else "?",
                     "nofile": resource.getrlimit(resource.RLIMIT_NOFILE)[0]},
            "config": {k: os.environ[k] for k in KNOBS if k in os.environ},
            "knobs_given": GIVEN_KNOBS}


def write_results(start, summary, runs, complete, stopped=""):
    outdir = os.path.join(BENCH, "results")
    os.makedirs(outdir, exist_ok=True)
    meta = metadata(start, complete, stopped)
    target_rows = targets(summary)
    doc = {"meta": meta, "targets": target_rows, "summary": summary, "runs": runs}
    for name, text in (("latest.json", json.dumps(doc, indent=1, default=str) + "\n"),
                       ("latest.md", render_md(meta, summary, runs, target_rows) + "\n")):
        with open(os.path.join(outdir, name + ".tmp"), "w") as f:
            f.write(text)
        os.replace(os.path.join(outdir, name + ".tmp"), os.path.join(outdir, name))
    log(f"wrote {outdir}/latest.md and latest.json")


def stop_on_signal(signum, _frame):
    raise SystemExit(128 + signum)


def main():
    global CFG, GIVEN_KNOBS
    built = (("MOONWIRE_BIN", "MOONWIRE_BENCH_BIN") if E("BENCH_BUILT") == "1" else ()) + \
        (("FLOOR_BIN",) if E("FLOOR_BUILT") == "1" else ())
    GIVEN_KNOBS = {k: os.environ[k] for k in KNOBS if k in os.environ and k not in built}
    CFG = Config()
    signal.signal(signal.SIGTERM, stop_on_signal)
    signal.signal(signal.SIGINT, stop_on_signal)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (resource.getrlimit(resource.RLIMIT_NOFILE)[1],) * 2)
    except (ValueError, OSError):
        pass
    start = time.monotonic()
    log(f"bench: workloads={CFG.workloads} peers={CFG.peers} repeat={CFG.repeat} bin={CFG.bin}")
    summary, runs = {}, []
    complete, stopped = False, ""
    try:
        for workload in CFG.workloads:
            log(f"== {workload}")
            if workload in ECHO_WORKLOADS:
                new = section_echo(workload)
                runs += new
                summary["echo"] = summarize_echo([r for r in runs if r.get("workload") in ECHO_WORKLOADS])
                continue
            new = {"dispatch": section_dispatch, "spread": section_spread, "conns": section_conns,
                   "fanout": section_fanout, "drained": section_drained, "metrics": section_metrics}[workload]()
            for r in new:
                r.setdefault("workload", workload)
            runs += new
            summarize = {"drained": summarize_drained, "metrics": summarize_metrics}.get(workload)
            summary[workload] = summarize(new) if summarize else new
        complete = True
    except SystemExit as e:
        stopped = f"stopped by signal (exit {e.code})"
        raise
    except Exception as e:  # noqa: BLE001 - still write what was measured
        stopped = f"driver error: {e!r}"
        raise
    finally:
        CHILDREN.kill_all()
        write_results(start, summary, runs, complete, stopped)
    failed = sum(1 for r in runs if r.get("ok") is False and r.get("measured", True))
    log(f"done in {time.monotonic() - start:.0f} s; {failed} failed run(s)")
    print(open(os.path.join(BENCH, "results/latest.md")).read())


if __name__ == "__main__":
    main()
