"""Drives `moonwire lua` as a person does: its REPL through a pseudo-terminal (pexpect),
against a Python websockets echo server started here.

usage: python lua_repl.py MOONWIRE CASE      (run by LuaCommandTests.swift)
Exits 0 when the case holds; otherwise prints what was expected and what was seen.
Every wait has a deadline; nothing sleeps for an event that can be awaited.
"""
import queue
import re

import pexpect
from websockets.exceptions import ConnectionClosed

from harness import DEADLINE, check, run_case, spawn, websocket_server


class EchoServer:
    """websockets in a thread of its own: echoes every message; records how clients closed."""

    def __init__(self):
        self.closes = queue.Queue()

        async def handler(ws):
            try:
                async for message in ws:
                    await ws.send(message)
            except ConnectionClosed:
                pass
            rcvd = ws.protocol.close_rcvd
            self.closes.put(rcvd.code if rcvd else None)

        self.url = websocket_server(handler)


def lua(*args):
    return spawn("lua", *args)


PROMPT = "\r\n> "


def case_tty_echo():
    """Connect at the prompt, send, see the echo printed by a handler; multi-line input;
    a message printed while a line is half typed; Ctrl-D exits 0 and closes with 1001."""
    server = EchoServer()
    c = lua()
    c.expect(re.escape("Lua 5.4"))
    c.expect("> ")
    c.sendline(f'c = mw.connect("{server.url}")')
    c.expect(PROMPT)
    c.sendline('c:on_message(function(_, m) print("got " .. m) end)')
    c.expect(PROMPT)
    c.sendline('c:send("hello")')
    c.expect("got hello")
    # A bare expression and =expr print through mw.inspect.
    c.sendline("=c:state()")
    c.expect('"open"')
    c.sendline("mw.json.decode('[1,2]')")
    c.expect(re.escape("{ 1, 2 }"))
    # An incomplete chunk asks for more with >>.
    c.sendline("for i = 1, 2 do")
    c.expect(">> ")
    c.sendline('c:send("n" .. i)')
    c.expect(">> ")
    c.sendline("end")
    c.expect("got n1")
    c.expect("got n2")
    c.expect("> ")
    # A chunk can wait, as a script's main chunk can.
    c.sendline('c:send("waited") mw.sleep(0.05) print("after the sleep")')
    c.expect("got waited")
    c.expect("after the sleep")
    c.expect("> ")
    # A message arriving while a line is half typed prints above it; the line survives.
    c.sendline('mw.after(0.3, function() c:send("late") end)')
    c.expect(PROMPT)
    c.send("x = 4")
    c.expect("got late")
    c.sendline("2")
    c.expect(PROMPT)
    c.sendline("=x")
    c.expect("\r\n42\r\n")
    # Errors print with their place and the REPL goes on.
    c.sendline('error("boom")')
    c.expect(re.escape("stdin:1: boom"))
    c.expect("> ")
    c.sendeof()
    c.expect(pexpect.EOF)
    c.close()
    check(c.exitstatus == 0, f"exit status {c.exitstatus}, signal {c.signalstatus}")
    code = server.closes.get(timeout=DEADLINE)
    check(code == 1001, f"the connection closed with {code}, not 1001 (going away)")


def case_tty_interrupt():
    """Ctrl-C while a chunk waits or computes stops it with "interrupted!" and the prompt
    comes back, the connection still open; Ctrl-C at the prompt exits 130."""
    server = EchoServer()
    c = lua()
    c.expect("> ")
    c.sendline(f'c = mw.connect("{server.url}") c:wait_open(5)')
    c.expect(PROMPT)
    # The output, not the echo of the typed line: "sleep" .. "ing" is what shows the
    # chunk is running (Ctrl-C before it would end the REPL at its prompt).
    c.sendline('print("sleep" .. "ing") mw.sleep(60) print("wo" .. "ke")')
    c.expect("sleeping")
    c.sendintr()
    c.expect(re.escape("stdin:1: interrupted! (waiting in mw.sleep)"))
    c.expect("> ")
    c.sendline('print("spin" .. "ning") while true do end')
    c.expect("spinning")
    c.sendintr()
    c.expect(re.escape("stdin:1: interrupted!"))
    c.expect("> ")
    # The REPL and the connection go on.
    c.sendline('c:on_message(function(_, m) print("got " .. m) end) c:send("still")')
    c.expect("got still")
    c.expect("> ")
    c.sendline("=c:state()")
    c.expect('"open"')
    c.expect("> ")
    c.sendintr()
    c.expect(pexpect.EOF)
    c.close()
    check("woke" not in c.before, "the abandoned chunk woke up")
    check(c.exitstatus == 130, f"exit status {c.exitstatus}, signal {c.signalstatus}")


run_case(globals())
