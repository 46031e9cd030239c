"""Drives `moonwire connect` and `moonwire listen` as people and scripts use them: through a
pseudo-terminal (pexpect) and through pipes, against real servers started here (Python
websockets, an asyncio TCP server) or against `moonwire listen` itself.

usage: python cli_sessions.py MOONWIRE CASE      (run by InteractiveSessionTests.swift)
Exits 0 when the case holds; otherwise prints what was expected and what was seen.
Every wait has a deadline; nothing sleeps for an event that can be awaited.
"""
import asyncio
import json
import os
import queue
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading

import pexpect
from websockets.exceptions import ConnectionClosed

from harness import DEADLINE, HOME, MOONWIRE, check, env, in_thread, run_case, spawn, websocket_server

ESC = re.escape


class WebSocketServer:
    """websockets in a thread of its own. Echoes; a few words make it do more. Records the
    request headers, what it received and how each client closed, as events on a queue."""

    def __init__(self):
        self.events = queue.Queue()

        async def handler(ws):
            self.events.put(("headers", {k.lower(): v for k, v in ws.request.headers.raw_items()}))
            try:
                async for message in ws:
                    self.events.put(("message", message))
                    if message == "__binary__":
                        await ws.send(b"\x00\x01hello\xff")
                    elif message == "__json__":
                        await ws.send('{"a":1,"b":[true,null],"c":{}}')
                    elif message == "__flood__":
                        for i in range(5000):
                            await ws.send(f"flood {i}")
                    elif message == "__drop__":
                        ws.transport.abort()
                    elif message == "__badutf8__":
                        ws.transport.write(bytes([0x81, 0x02, 0xFF, 0xFE]))  # a text frame that is not UTF-8
                    elif isinstance(message, str) and message.startswith("__close__ "):
                        _, code, *reason = message.split(" ")
                        await ws.close(int(code), " ".join(reason))
                    else:
                        await ws.send(message)
            except ConnectionClosed:
                pass
            rcvd = ws.protocol.close_rcvd
            self.events.put(("close", rcvd.code if rcvd else None, rcvd.reason if rcvd else None))

        self.url = websocket_server(handler)
        self.port = int(self.url.rsplit(":", 1)[1].strip("/"))

    def wait_for(self, kind):
        while True:
            try:
                event = self.events.get(timeout=DEADLINE)
            except queue.Empty:
                raise AssertionError(f"the server saw no {kind} event in {DEADLINE} s")
            if event[0] == kind:
                return event


class UppercaseTCPServer:
    """Line-framed TCP: answers every line with it in capitals."""

    def __init__(self):

        async def handler(reader, writer):
            while line := await reader.readline():
                writer.write(line.upper())
                await writer.drain()
            writer.close()

        async def start():
            server = await asyncio.start_server(handler, "127.0.0.1", 0)
            self.port = server.sockets[0].getsockname()[1]

        in_thread(start)
        self.url = f"tcp://127.0.0.1:{self.port}"


def run(*args, input="", **extra_env):
    return subprocess.run([MOONWIRE, *args], input=input, capture_output=True, text=True, timeout=DEADLINE, env=env(**extra_env))


class Listener:
    """`moonwire listen ARGS` with pipes, its stdin kept open; `url` is where it listens."""

    def __init__(self, *args):
        self.process = subprocess.Popen([MOONWIRE, "listen", *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, env=env())
        line = self.process.stderr.readline()
        found = re.search(r"listening on (\w+://[0-9.:]+/?)", line)
        if not found:
            self.process.kill()
            raise AssertionError(f"listen did not say where it listens: {line!r}")
        self.url = found.group(1)

    def interrupt(self):
        self.process.send_signal(signal.SIGINT)
        return self.process.wait(timeout=DEADLINE)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        if self.process.poll() is None:
            self.process.kill()


def ended(child):
    child.expect(pexpect.EOF)
    child.close()
    return child.exitstatus


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# Coloured markers: `> ` green for sent, `< ` cyan for received.
SENT = ESC("\x1b[32m>\x1b[0m ")
RECEIVED = ESC("\x1b[36m<\x1b[0m ")


def case_tty_session():
    server = WebSocketServer()
    c = spawn("connect", "-H", "X-Test: yes", "--json", server.url)
    c.expect("connected to")
    headers = server.wait_for("headers")[1]
    check(headers.get("x-test") == "yes", f"header not sent: {headers}")
    c.sendline("hello")
    c.expect(SENT + "hello")
    c.expect(RECEIVED + "hello")
    c.sendline("__binary__")
    c.expect(RECEIVED + "binary, 8 bytes")
    c.expect(ESC("00000000  00 01 68 65 6c 6c 6f ff") + r"\s+" + ESC("|..hello.|"))
    c.sendline("__json__")
    c.expect(RECEIVED + ESC('{\r\n  "a": 1,\r\n  "b": [\r\n    true,\r\n    null\r\n  ],\r\n  "c": {}\r\n}'))
    c.sendline("/ping abc")
    c.expect(r"pong abc after [0-9.]+ ms")
    c.sendline("/binary zz")
    c.expect("invalid hex digit")
    c.sendline("//slash")
    c.expect(RECEIVED + "/slash")
    check(server.wait_for("message")[1] == "hello", "the server did not get hello first")
    c.sendline("/stats")
    c.expect(r"sent \d+ messages")
    # A flood faster than the terminal: all of it arrives, in order, and the prompt still works.
    c.sendline("__flood__")
    c.expect(RECEIVED + "flood 4999\r\n")
    c.sendline("after the flood")
    c.expect(RECEIVED + "after the flood")
    c.sendcontrol("c")
    code = server.wait_for("close")
    check(code[1] == 1000, f"Ctrl-C gave the server {code}, not 1000")
    status = ended(c)
    check(status == 130, f"exit status after Ctrl-C: {status}, not 130")


def case_tty_close_no_color():
    server = WebSocketServer()
    c = spawn("connect", server.url, NO_COLOR="1")
    c.expect("connected to")
    c.sendline("plain")
    c.expect("> plain")
    c.expect("< plain")
    c.sendline("/close 4000 bye")
    code = server.wait_for("close")
    check(code[1:] == (4000, "bye"), f"the server saw {code}")
    c.expect(ESC('closed by us: 4000 "bye"'))
    out = c.before
    status = ended(c)
    check("\x1b[3" not in out, f"colours with NO_COLOR: {out!r}")
    check(status == 0, f"exit status after /close: {status}")


def case_tty_second_interrupt():
    # A server that never answers the close: the second Ctrl-C must not wait for it.
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    c = spawn("connect", f"ws://127.0.0.1:{listener.getsockname()[1]}/")
    c.expect("connecting to")
    c.sendcontrol("c")
    c.expect("Ctrl-C again")
    c.sendcontrol("c")
    status = ended(c)
    check(status == 130 or c.signalstatus == signal.SIGINT, f"exit after two Ctrl-C: {status}")
    listener.close()


def case_pipe_session():
    server = WebSocketServer()
    r = run("connect", server.url, input="one\ntwo\n")
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    check(r.stdout == "one\ntwo\n", f"stdout {r.stdout!r}")
    check("\x1b[" not in r.stdout + r.stderr, "colours in a pipe")
    check("closed by us: 1000" in r.stderr, f"stderr {r.stderr!r}")
    check(server.wait_for("close")[1] == 1000, "the server did not see 1000")

    r = run("connect", "--jsonl", "-x", "first", server.url, input="__binary__\n")
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    events = [json.loads(line) for line in r.stdout.splitlines()]
    kinds = [(e["direction"], e["kind"]) for e in events]
    check(("out", "text") in kinds and ("in", "binary") in kinds and ("out", "close") in kinds, f"events {kinds}")
    received = [e for e in events if e["direction"] == "in" and e["kind"] in ("text", "binary")]
    check([e["data"] for e in received] == ["first", "000168656c6c6fff"], f"received {received}")
    check(all("time" in e for e in events), "an event without a time")
    check(server.wait_for("close")[1] == 1000, "the server did not see 1000")

    # --binary input, --binary-as base64, /file, --timestamps.
    payload = os.path.join(HOME, "payload.bin")
    with open(payload, "wb") as f:
        f.write(b"\x00\xffhi")
    r = run("connect", "--binary", "--binary-as", "base64", "--timestamps", server.url,
            input=f"000168656c6c6fff\n/file {payload}\n/file /no/such/file\n")
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    lines = r.stdout.splitlines()
    check([l[13:] for l in lines] == ["AAFoZWxsb/8=", "AP9oaQ=="], f"stdout {r.stdout!r}")
    check(all(re.match(r"\d\d:\d\d:\d\d\.\d{3} ", l) for l in lines), f"no timestamps: {lines}")
    check("/file: cannot read '/no/such/file': No such file or directory" in r.stderr, f"stderr {r.stderr!r}")
    check(server.wait_for("close")[1] == 1000, "the server did not see 1000")

    r = run("connect", "--jsonl", server.url, input="/close 4000 done\n")
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    close = [json.loads(line) for line in r.stdout.splitlines() if '"close"' in line][0]
    check((close["code"], close["reason"]) == (4000, "done"), f"close {close}")
    check(server.wait_for("close")[1:] == (4000, "done"), "the server did not see 4000 done")


def case_exit_codes():
    server = WebSocketServer()
    r = run("connect", server.url, input="__close__ 4001 go away\n")
    check(r.returncode == 1, f"4001 from the peer: exit {r.returncode}")
    check('closed by the peer: 4001 "go away"' in r.stderr, f"stderr {r.stderr!r}")
    r = run("connect", server.url, input="__close__ 1001 restart\n")
    check(r.returncode == 0, f"1001 from the peer: exit {r.returncode}: {r.stderr}")
    r = run("connect", server.url, input="__badutf8__\n")
    check(r.returncode == 1, f"invalid UTF-8: exit {r.returncode}")
    check("1007 (invalid payload data)" in r.stderr, f"stderr {r.stderr!r}")
    r = run("connect", f"ws://127.0.0.1:{free_port()}/")
    check(r.returncode == 1, f"refused: exit {r.returncode}")
    check("cannot connect to" in r.stderr and "refused" in r.stderr, f"stderr {r.stderr!r}")
    for args, words in [
        (["-H", "novalue", server.url], "-H 'novalue' is not a header"),
        (["http://127.0.0.1:1/"], "ws://, wss://, tcp:// or tls://"),
        (["--framing", "bogus", "tcp://127.0.0.1:1"], "--framing 'bogus'"),
        (["--bogus", server.url], "--bogus"),
        (["--header"], "--header"),
    ]:
        r = run("connect", *args)
        check(r.returncode == 2, f"{args}: exit {r.returncode}")
        lines = r.stderr.strip().splitlines()
        check(len(lines) == 1 and words in lines[0], f"{args}: stderr {r.stderr!r}")
    help = run("connect", "-h")
    check(help.returncode == 0 and "--header" in help.stdout, "connect -h is not help")
    check(run("listen", "-h").returncode == 0, "listen -h is not help")
    for shell in ("bash", "zsh", "fish"):
        r = run("--generate-completion-script", shell)
        check(r.returncode == 0 and "listen" in r.stdout and "subprotocol" in r.stdout, f"{shell} completions: {r.returncode}")
    for args in (["listen", "wss://127.0.0.1:0"], ["listen", "--tls-key", "k.pem", "9000"], ["listen", "--framing", "line", "ws://127.0.0.1:0"]):
        r = run(*args)
        check(r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, f"{args}: exit {r.returncode} {r.stderr!r}")
    rows = help.stdout.count("\n")
    check(rows <= 45, f"connect --help is {rows} lines")


def case_tcp_line():
    server = UppercaseTCPServer()
    r = run("connect", server.url, input="abc\ndéf\n")
    check(r.returncode == 0, f"exit {r.returncode}: {r.stderr}")
    check(r.stdout == "ABC\nDéF\n", f"stdout {r.stdout!r}")
    # length:2 framing, both ways, with moonwire listen --echo as the peer.
    with Listener("--echo", "--framing", "length:2", "tcp://127.0.0.1:0") as listen:
        r = run("connect", "--framing", "length:2", "-w", "0.5", listen.url, input="framed\n/binary 00ff\n")
        check(r.returncode == 0 and r.stdout == "framed\n00ff\n", f"length:2: exit {r.returncode} {r.stdout!r} {r.stderr!r}")
        check(listen.interrupt() == 130, "listen did not exit 130")


def case_listen_relay():
    listen = spawn("listen", "--relay", "ws://127.0.0.1:0")
    listen.expect(r"listening on (ws://[0-9.:]+/)")
    url = listen.match.group(1)
    a = spawn("connect", url)
    a.expect("connected to")
    listen.expect(ESC("[1] ") + ".*connected from")
    b = spawn("connect", url, NO_COLOR="1")
    b.expect("connected to")
    listen.expect(ESC("[2] ") + ".*connected from")
    a.sendline("hi from A")
    listen.expect(ESC("[1] ") + RECEIVED + "hi from A")
    b.expect("< hi from A")
    listen.sendline("/to 1 just for A")
    a.expect(RECEIVED + "just for A")
    listen.sendline("to everyone")
    a.expect(RECEIVED + "to everyone")
    b.expect("< to everyone")
    listen.sendline("/binary 0102")
    b.expect("00000000  01 02")
    listen.sendline("/to 9 nobody")
    listen.expect("there is no peer 9")
    listen.sendcontrol("c")
    a.expect(ESC("closed by the peer: 1001 (going away)"))
    b.expect(ESC("closed by the peer: 1001 (going away)"))
    check(ended(a) == 0 and ended(b) == 0, "the clients did not exit 0 after 1001")
    check(ended(listen) == 130, "listen did not exit 130 after Ctrl-C")


def case_tty_listen_end_of_input():
    listen = spawn("listen", "ws://127.0.0.1:0", NO_COLOR="1")
    listen.expect(r"listening on (ws://[0-9.:]+/)")
    a = spawn("connect", listen.match.group(1), NO_COLOR="1")
    a.expect("connected to")
    listen.expect(r"\[1\] connected from")
    listen.sendline("/peers")
    listen.expect(r"\[1\] 127.0.0.1:\d+ /: received 0, sent 0")
    listen.sendcontrol("d")
    a.expect(ESC("closed by the peer: 1001 (going away)"))
    check(ended(listen) == 0, "listen did not exit 0 after Ctrl-D")
    check(ended(a) == 0, "connect did not exit 0 after 1001")


def case_listen_pipes():
    # listen with its stdin a pipe that stays open, --echo, TCP line framing; a piped connect.
    listen = subprocess.Popen([MOONWIRE, "listen", "--echo", "--jsonl", "tcp://127.0.0.1:0"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env())
    try:
        first = json.loads(listen.stdout.readline())
        check(first["kind"] == "listen", f"first event {first}")
        url = first["url"]
        r = run("connect", url, input="ping\n")
        check(r.returncode == 0 and r.stdout == "ping\n", f"echo over TCP: exit {r.returncode} {r.stdout!r} {r.stderr!r}")
        seen = []
        while not any(e["kind"] == "close" for e in seen):
            seen.append(json.loads(listen.stdout.readline()))
        kinds = [(e["direction"], e["kind"], e.get("data")) for e in seen]
        check(("in", "text", "ping") in kinds and ("out", "text", "ping") in kinds, f"events {kinds}")
        check(all(e.get("peer") == 1 for e in seen), f"peer ids {seen}")
        listen.send_signal(signal.SIGINT)
        check(listen.wait(timeout=DEADLINE) == 130, f"listen exit {listen.returncode}")
    finally:
        if listen.poll() is None:
            listen.kill()


def case_listen_script():
    handlers = os.path.join(HOME, "handlers.lua")
    with open(handlers, "w") as f:
        f.write(
            "local server = ...\n"
            "function on_connect(peer) peer:send('welcome ' .. peer.id) end\n"
            "function on_message(peer, msg)\n"
            "  if msg == 'boom' then error('boom') end\n"
            "  peer:send('got ' .. msg .. ' of ' .. #server:peers())\n"
            "end\n"
        )
    with Listener("--script", handlers, "ws://127.0.0.1:0") as listen:
        r = run("connect", listen.url, input="ping\n")
        check(r.returncode == 0 and r.stdout == "welcome 1\ngot ping of 1\n", f"exit {r.returncode} {r.stdout!r} {r.stderr!r}")
        # Shown as listen shows them without --script: messages on stdout, events on stderr.
        check(listen.process.stdout.readline() == "[1] ping\n", "no message line")
        # An error in a handler points at the handler's line and ends listen with 1.
        run("connect", listen.url, input="boom\n")
        check(listen.process.wait(timeout=DEADLINE) == 1, f"listen exit {listen.process.returncode}")
        rest = listen.process.stderr.read()
        check("handlers.lua:4: boom" in rest, f"stderr {rest!r}")
        check("moonwire: [1] connected from 127.0.0.1:" in rest, f"no connect line in {rest!r}")
    # The example in examples/ and docs/cli.md.
    with Listener("--script", "examples/listen_greeter.lua", "ws://127.0.0.1:0") as listen:
        r = run("connect", listen.url, input="who\n")
        check(r.returncode == 0 and r.stdout == "welcome, you are 1\n1 connected\n", f"greeter: {r.stdout!r} {r.stderr!r}")
        # One listen: with --script, input lines and commands still reach the peers.
        client = subprocess.Popen([MOONWIRE, "connect", listen.url], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=env())
        try:
            check(client.stdout.readline() == "welcome, you are 2\n", "no welcome for the second peer")
            listen.process.stdin.write("/to 2 from the console\n")
            listen.process.stdin.flush()
            check(client.stdout.readline() == "from the console\n", "/to did not reach the peer")
            client.stdin.close()
            check(client.wait(timeout=DEADLINE) == 0, f"connect exit {client.returncode}")
        finally:
            if client.poll() is None:
                client.kill()
        check(listen.interrupt() == 130, "listen did not exit 130")


def case_tty_reconnect():
    server = WebSocketServer()
    c = spawn("connect", "--reconnect", server.url, NO_COLOR="1")
    c.expect("connected to")
    c.sendline("__drop__")
    c.expect(r"connection lost: 1006")
    c.expect(r"reconnecting in [0-9.]+ s \(attempt 1\)")
    c.expect("reconnected to")
    c.sendline("after")
    c.expect("< after")
    c.sendcontrol("d")
    status = ended(c)
    check(status == 0, f"exit after Ctrl-D: {status}")


def case_tls():
    # A self-signed certificate for 127.0.0.1: listen serves wss:// with it, connect trusts it with --ca.
    cert, key = os.path.join(HOME, "cert.pem"), os.path.join(HOME, "key.pem")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
                    "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=DEADLINE)
    with Listener("--echo", "--tls-cert", cert, "--tls-key", key, "ws://127.0.0.1:0") as listen:
        check(listen.url.startswith("wss://"), f"not TLS: {listen.url}")
        r = run("connect", "--ca", cert, listen.url, input="secret\n")
        check(r.returncode == 0 and r.stdout == "secret\n", f"--ca: exit {r.returncode} {r.stdout!r} {r.stderr!r}")
        r = run("connect", listen.url, input="secret\n")
        check(r.returncode == 1 and "cannot connect to" in r.stderr and "tls" in r.stderr, f"untrusted: {r.returncode} {r.stderr!r}")
        r = run("connect", "--insecure", listen.url, input="again\n")
        check(r.returncode == 0 and r.stdout == "again\n", f"--insecure: exit {r.returncode} {r.stderr!r}")
        r = run("connect", "-k", listen.url, input="short\n")
        check(r.returncode == 0 and r.stdout == "short\n", f"-k: exit {r.returncode} {r.stderr!r}")
        check(listen.interrupt() == 130, "listen did not exit 130")


class Mosquitto:
    """Debian's mosquitto in the foreground on free loopback ports (`url`: its WebSocket one), stopped by PID."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="moonwire-mosquitto-")
        self.port = free_port()
        conf = os.path.join(self.dir, "mosquitto.conf")
        with open(conf, "w") as f:
            # mosquitto 2.0 does not start with a WebSocket listener alone: a TCP one comes first.
            f.write(f"user root\nlog_dest stderr\nlistener {free_port()} 127.0.0.1\nallow_anonymous true\n"
                    f"listener {self.port} 127.0.0.1\nprotocol websockets\nallow_anonymous true\n")
        self.process = subprocess.Popen(["/usr/sbin/mosquitto", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"ws://127.0.0.1:{self.port}/"
        for _ in range(DEADLINE * 20):
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                check(self.process.poll() is None, "mosquitto did not start")
                threading.Event().wait(0.05)
        raise AssertionError("mosquitto did not listen")

    def __enter__(self):
        return self

    def __exit__(self, *_):
        # SIGKILL: nothing of it needs keeping, and the test runner's children inherit a blocked
        # SIGTERM (a blocked signal stays blocked across exec): it would leave mosquitto running.
        self.process.kill()
        self.process.wait(timeout=DEADLINE)
        shutil.rmtree(self.dir, ignore_errors=True)


def case_tty_protocol_mqtt():
    """connect --protocol mqtt at a terminal: subscribe, publish, the message decoded, Ctrl-D exits 0."""
    with Mosquitto() as broker:
        c = spawn("connect", "--protocol", "mqtt", broker.url)
        c.expect("CONNACK")
        c.expect("mqtt> ")
        c.sendline("sub moonwire/tty/#")
        c.expect(SENT + ESC("SUBSCRIBE moonwire/tty/# qos 0"))
        c.expect(ESC("SUBACK: moonwire/tty/# granted QoS 0"))
        c.sendline('pub moonwire/tty/a "hello there" 1')
        c.expect(RECEIVED + ESC("moonwire/tty/a hello there"))
        # A line without a command publishes to the last pub's topic.
        c.sendline("plain words")
        c.expect(RECEIVED + ESC("moonwire/tty/a plain words"))
        c.sendline("/help")
        c.expect(ESC("pub topic payload [qos] [retain]"))
        c.sendline("pub only-a-topic")
        c.expect(ESC("pub needs payload"))
        c.sendcontrol("d")
        c.expect("closed: 1000")
        status = ended(c)
        check(status == 0, f"exit status after Ctrl-D: {status}, not 0")
        # Ctrl-C closes and exits 130, as plain connect.
        c = spawn("connect", "--protocol", "mqtt", broker.url)
        c.expect("mqtt> ")
        c.sendcontrol("c")
        status = ended(c)
        check(status == 130, f"exit status after Ctrl-C: {status}, not 130")
        r = run("connect", "--protocol", "smtp", broker.url)
        check(r.returncode == 2 and "not one moonwire speaks" in r.stderr, f"--protocol smtp: {r.returncode} {r.stderr!r}")



class Piped:
    """`moonwire ARGS` with pipes, stdin kept open; its stdout and stderr read line by line
    in threads, so that a case waits for a line instead of for the end."""

    def __init__(self, *args):
        self.process = subprocess.Popen([MOONWIRE, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, env=env())
        self.lines = {"out": queue.Queue(), "err": queue.Queue()}
        self.seen = {"out": "", "err": ""}
        for name, stream in (("out", self.process.stdout), ("err", self.process.stderr)):
            threading.Thread(target=self._read, args=(stream, self.lines[name]), daemon=True).start()

    @staticmethod
    def _read(stream, lines):
        for line in stream:
            lines.put(line)
        lines.put(None)

    def send(self, line):
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def expect(self, text, stream="out"):
        """Reads `stream` up to a line that contains `text`; returns what was read."""
        read = ""
        while True:
            try:
                line = self.lines[stream].get(timeout=DEADLINE)
            except queue.Empty:
                raise AssertionError(f"no {text!r} on std{stream} in {DEADLINE} s; read {read!r}")
            if line is None:
                raise AssertionError(f"std{stream} ended before {text!r}; read {read!r}")
            read += line
            self.seen[stream] += line
            if text in line:
                return read

    def finish(self):
        """Closes stdin; the exit status once the process has ended."""
        self.process.stdin.close()
        return self.process.wait(timeout=DEADLINE)

    def __enter__(self):
        return self

    def __exit__(self, *_):
        if self.process.poll() is None:
            self.process.kill()


class FormatServer:
    """websockets answering MessagePack or CBOR (Python's msgpack, cbor2): each binary message
    decoded and put on `values`, then answered with a message of every kind of value around
    it (64-bit extremes, bytes, an ext type or a tag, an empty array); "bad" gets bytes that
    do not decode, "text please" a text frame."""

    def __init__(self, fmt):
        import cbor2
        import msgpack
        self.values = queue.Queue()
        if fmt == "msgpack":
            loads, dumps, special, self.bad = msgpack.unpackb, msgpack.packb, msgpack.ExtType(5, b"ab"), b"\xc1"
        else:
            loads, dumps, special, self.bad = cbor2.loads, cbor2.dumps, cbor2.CBORTag(4000, 7), b"\xff"

        async def handler(ws):
            async for message in ws:
                if isinstance(message, str):
                    await ws.send("text: " + message)
                    continue
                value = loads(message)
                self.values.put(value)
                if value == "bad":
                    await ws.send(self.bad)
                elif value == "text please":
                    await ws.send("plain text")
                else:
                    await ws.send(dumps({"got": value, "big": 2**63 - 1, "neg": -2**63, "raw": b"\x00\xff",
                                         "x": special, "empty": []}))

        self.url = websocket_server(handler)

    def value(self):
        return self.values.get(timeout=DEADLINE)


def formats_connect(fmt, bytes_call, special_shown, constructor, constructed):
    """connect --FMT against FormatServer: lines (JSON, exact; a Lua constructor) encoded,
    replies shown decoded, a reply that does not decode shown in words with its hex, the
    session going on; returns the recording made with --record."""
    server = FormatServer(fmt)
    recording = os.path.join(HOME, f"{fmt}.jsonl")
    with Piped("connect", f"--{fmt}", "--record", recording, server.url) as c:
        c.send('{"op":"hi","id":9007199254740993,"list":[]}')
        shown = c.expect("x = ")
        shown += c.expect("}")
        for part in ["big = 9223372036854775807", "neg = -9223372036854775808", f'raw = {bytes_call}("\\x00\\xff")',
                     f"x = {special_shown}", "empty = array()", 'got = { id = 9007199254740993, list = array(), op = "hi" }']:
            check(part in shown, f"{part!r} not in what connect --{fmt} showed: {shown!r}")
        got = server.value()
        check(got == {"op": "hi", "id": 9007199254740993, "list": []}, f"the server decoded {got!r}")
        c.send(constructor)
        c.expect("x = ")
        got = server.value()
        check(got in constructed, f"the server decoded {got!r}, not {constructed[0]!r}")
        c.send('"bad"')
        line = c.expect("decode: ")
        check(line.strip().endswith(": " + server.bad.hex()), f"a message that does not decode: {line!r}")
        c.send("not json (")
        err = c.expect("not sent: ", stream="err")
        name = "MessagePack" if fmt == "msgpack" else "CBOR"
        check(f"{name}: a JSON value or a Lua value expected" in err, f"stderr {err!r}")
        c.send('"text please"')
        check(c.expect("plain text") == "plain text\n", "a text frame is shown as text")
        code = c.finish()
        check(code == 0, f"exit {code}: {c.process.stderr.read()!r}")
    return recording


def case_formats_connect():
    """connect --msgpack and --cbor against Python's msgpack and cbor2; the usage errors."""
    import cbor2
    import msgpack
    formats_connect("msgpack", "bin", 'ext(5, "ab")', '{ key = bin("\\0\\1"), t = ext(7, "z"), n = null }',
                    [{"key": b"\x00\x01", "t": msgpack.ExtType(7, b"z"), "n": None}])
    formats_connect("cbor", "bytes", "tagged(4000, 7)", "{ key = bytes(\"\\0\\1\"), t = tagged(4001, { 1, 2.5 }) }",
                    # cbor2 reads an array inside a tag as a tuple (it may be a map key)
                    [{"key": b"\x00\x01", "t": cbor2.CBORTag(4001, v)} for v in ((1, 2.5), [1, 2.5])])
    # At a terminal: what goes out and what comes in decoded after their markers; a message
    # that does not decode in red words and as a hexdump; Ctrl-D closes with 1000.
    server = FormatServer("msgpack")
    c = spawn("connect", "--msgpack", server.url)
    c.expect("connected to")
    c.sendline('{"id":1}')
    c.expect(SENT + ESC("{ id = 1 }"))
    c.expect(RECEIVED + ESC("{"))
    c.expect(ESC("got = { id = 1 },"))
    c.sendline('"bad"')
    c.expect(RECEIVED + ESC("\x1b[31mdecode: value: 0xc1 is not a MessagePack type (byte 0)\x1b[0m"))
    c.expect(ESC("00000000  c1"))
    c.sendcontrol("d")
    status = ended(c)
    check(status == 0, f"exit status after Ctrl-D: {status}")

    for args, words in [
        (["--msgpack", "--cbor"], "--msgpack and --cbor each say what binary messages are"),
        (["--proto", "examples/chat.proto", "--type", "chat.Envelope", "--cbor"], "--proto and --cbor each say"),
        (["--binary", "--msgpack"], "--binary and --msgpack both say how lines are sent"),
    ]:
        for command in ("connect", "listen"):
            r = run(command, *args, "ws://127.0.0.1:1/")
            check(r.returncode == 2 and words in r.stderr, f"{command} {args}: exit {r.returncode}, {r.stderr!r}")


def case_formats_listen():
    """listen --cbor and --msgpack: a Python client's messages (cbor2, msgpack) shown decoded,
    a line typed at the listener encoded and sent binary; a message that does not decode
    shown in words and hex, and the server goes on."""
    import cbor2
    import msgpack
    from websockets.sync.client import connect as ws_connect
    for fmt, dumps, loads, bad in [("cbor", cbor2.dumps, cbor2.loads, b"\xff"), ("msgpack", msgpack.packb, msgpack.unpackb, b"\xc1")]:
        with Piped("listen", f"--{fmt}", "0") as listener:
            url = re.search(r"listening on (\S+)", listener.expect("listening on", stream="err")).group(1)
            with ws_connect(url) as ws:
                listener.expect("connected", stream="err")
                ws.send(dumps({"id": -2**63, "blob": b"\x01\x02"}))
                bytes_call = "bytes" if fmt == "cbor" else "bin"
                line = listener.expect("id = ")
                check(f'{{ blob = {bytes_call}("\\x01\\x02"), id = -9223372036854775808 }}' in line, f"listen --{fmt} showed {line!r}")
                ws.send(bad)
                line = listener.expect("decode: ")
                check(line.strip().endswith(bad.hex()), f"a message that does not decode: {line!r}")
                listener.send("nope (")
                listener.expect("not sent: ", stream="err")
                listener.send('{"n":9223372036854775807,"s":"x"}')
                reply = ws.recv(timeout=DEADLINE)
                check(isinstance(reply, bytes) and loads(reply) == {"n": 2**63 - 1, "s": "x"}, f"the client got {reply!r}")
            listener.process.send_signal(signal.SIGINT)
            check(listener.process.wait(timeout=DEADLINE) == 130, "listen did not exit 130 after Ctrl-C")


def serve_once(recording, flags, messages):
    """`replay RECORDING --serve --once FLAGS`, a client sending MESSAGES in turn, each
    after the replies to the one before; returns the exit status, stderr and the replies."""
    from websockets.sync.client import connect as ws_connect
    server = subprocess.Popen([MOONWIRE, "replay", recording, "--serve", "ws://127.0.0.1:0/", "--once", "--speed", "0", *flags],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    replies = []
    try:
        url = re.search(r"on (ws://\S+)", server.stdout.readline()).group(1)
        with ws_connect(url) as ws:
            try:
                for message in messages:
                    ws.send(message)
                    replies.append(ws.recv(timeout=DEADLINE))
                while True:
                    replies.append(ws.recv(timeout=DEADLINE))
            except ConnectionClosed:
                pass
        return server.wait(timeout=DEADLINE), server.stderr.read(), replies
    finally:
        server.kill()
        server.wait()


def case_formats_replay():
    """A connect --msgpack --record session: the recording keeps the bytes (base64, as
    msgpack-python wrote them); replay FILE shows them as hex, --msgpack decoded,
    --cbor as a decode error with the bytes, and the example server talked to."""
    import msgpack
    recording = formats_connect("msgpack", "bin", 'ext(5, "ab")', "{ n = 1 }", [{"n": 1}])
    import base64
    with open(recording) as f:
        events = [json.loads(line) for line in f][1:]
    incoming = [base64.b64decode(e["data"]) for e in events if e.get("event") == "message" and e["dir"] == "in" and e["kind"] == "binary"]
    check(msgpack.unpackb(incoming[0])["got"]["id"] == 9007199254740993, f"recorded {incoming[0]!r}")
    check(incoming[2] == b"\xc1", f"the bytes that did not decode were recorded as {incoming[2]!r}")

    r = run("replay", recording, "--msgpack")
    check(r.returncode == 0, f"replay --msgpack: exit {r.returncode}: {r.stderr!r}")
    check(re.search(r"^\d+\.\d{4} \[1\] open ws://", r.stdout, re.M), f"no open line: {r.stdout!r}")
    check(re.search(r'^\d+\.\d{4} \[1\] > \{ id = 9007199254740993, list = array\(\), op = "hi" \}$', r.stdout, re.M), f"sent: {r.stdout!r}")
    check('  raw = bin("\\x00\\xff"),' in r.stdout, f"received: {r.stdout!r}")
    check(re.search(r"\[1\] < decode: value: 0xc1 is not a MessagePack type \(byte 0\); 1 bytes: c1$", r.stdout, re.M), f"bad: {r.stdout!r}")
    check(re.search(r"\[1\] < plain text$", r.stdout, re.M) and re.search(r"\[1\] closed 1000 .*by local$", r.stdout, re.M), f"text, close: {r.stdout!r}")

    r = run("replay", recording)
    check(r.returncode == 0 and re.search(r"\[1\] < binary, 1 bytes: c1$", r.stdout, re.M), f"replay without a codec: {r.stdout!r} {r.stderr!r}")
    r = run("replay", recording, "--show", "--cbor")
    check(r.returncode == 0 and "< decode: " in r.stdout, f"replay --cbor of MessagePack: {r.stdout!r}")
    r = run("replay", recording, "--generate-test", "-o", os.path.join(HOME, "t.lua"), "--msgpack")
    check(r.returncode == 2 and "--msgpack is for --show, --serve and --client" in r.stderr, f"replay --generate-test --msgpack: {r.returncode} {r.stderr!r}")

    # --serve --msgpack matches binary messages as values: the first client message
    # encoded by msgpack-python, keys in another order, matches; a changed value does
    # not, and the difference names the field. Without --msgpack the bytes must match.
    sent = [base64.b64decode(e["data"]) for e in events if e.get("event") == "message" and e["dir"] == "out" and e["kind"] == "binary"]
    first = msgpack.packb({"list": [], "op": "hi", "id": 9007199254740993})
    check(first != sent[0] and msgpack.unpackb(first) == msgpack.unpackb(sent[0]), f"re-encoded {first!r} against {sent[0]!r}")
    code, err, replies = serve_once(recording, ["--msgpack"], [first, msgpack.packb({"n": 2})])
    check(code == 1 and msgpack.unpackb(replies[0])["got"]["id"] == 9007199254740993, f"exit {code}, replies {replies!r}")
    check("exchange 1 matched" in err and "exchange 2: the client's message differs" in err
          and "$.n: expected 1, got 2" in err, f"stderr: {err!r}")
    code, err, _ = serve_once(recording, [], [first])
    check(code == 1 and "exchange 1: the client's message differs" in err and "base64:" in err, f"without --msgpack: {code} {err!r}")

    # --proto: a bytes field that is not UTF-8 is matched by its bytes (\xfe against
    # \xff differs), while the same message with its fields in another order matches.
    proto = os.path.join(HOME, "raw.proto")
    with open(proto, "w") as f:
        f.write('syntax = "proto3";\nmessage Raw { bytes b = 1; string s = 2; }\n')
    raw = os.path.join(HOME, "raw.jsonl")
    recorded = b"\x0a\x01\xfe\x12\x01x"    # b = "\xfe", s = "x"
    lines = [{"moonwire_recording": 1, "moonwire": "0.1.0", "started": "2026-11-27T00:00:00.000Z", "url": "ws://127.0.0.1:9/",
              "headers": {}, "secrets": "redacted"},
             {"t": 0.001, "c": 1, "event": "open", "url": "ws://127.0.0.1:9/"},
             {"t": 0.002, "c": 1, "event": "message", "dir": "out", "kind": "binary", "data": base64.b64encode(recorded).decode()},
             {"t": 0.003, "c": 1, "event": "message", "dir": "in", "kind": "binary", "data": base64.b64encode(b"\x12\x02ok").decode()},
             {"t": 0.004, "c": 1, "event": "close", "code": 1000, "reason": "", "by": "peer", "clean": True}]
    with open(raw, "w") as f:
        f.write("".join(json.dumps(line) + "\n" for line in lines))
    flags = ["--proto", proto, "--type", "Raw"]
    code, err, replies = serve_once(raw, flags, [b"\x12\x01x\x0a\x01\xfe"])
    check(code == 0 and replies == [b"\x12\x02ok"], f"the same message, fields reordered: exit {code}, {replies!r}, {err!r}")
    code, err, _ = serve_once(raw, flags, [b"\x0a\x01\xff\x12\x01x"])
    check(code == 1 and re.search(r"\$\.b: expected .*xfe.*, got .*xff", err), f"a bytes field with another byte: exit {code}, {err!r}")

    # The example server (codec = "cbor") and connect --cbor.
    server = subprocess.Popen([MOONWIRE, "run", "examples/formats_server.lua", "cbor", "ws://127.0.0.1:0/"],
                              stdout=subprocess.PIPE, text=True, env=env())
    try:
        url = server.stdout.readline().strip()
        with Piped("connect", "--cbor", url) as c:
            c.send('{"op":"quote","symbol":"BTC"}')
            shown = c.expect("symbol = ")
            shown += c.expect("}")
            for part in ["at = tagged(1, 1700000000)", "fills = array()", "id = 9223372036854775807",
                         "px = 91234.5", 'sig = bytes("\\x00\\x01\\xfe\\xff")', 'symbol = "BTC"']:
                check(part in shown, f"{part!r} not in {shown!r}")
            c.send('[1, "two"]')
            check('{ echo = { 1, "two" } }' in c.expect("echo"), "the echo")
            check(c.finish() == 0, "connect --cbor did not exit 0")
    finally:
        server.kill()
        server.wait()


run_case(globals())
