"""A TCP server whose peers stop reading: for bench/slow_readers.sh.

Every connection is paused (no read) from its accept until SIGUSR1; from then on it
reads and counts bytes. A small receive buffer (4 KiB, set on the listening socket,
which accepted sockets inherit) keeps what the kernel holds for a stalled peer small.
Prints "READY PORT" once listening; once every connection it accepted has ended after
the resume, prints "RECEIVED connections=N bytes=B" and exits.
"""

import asyncio
import signal
import socket
import sys


class Peer(asyncio.Protocol):
    def __init__(self, server):
        self.server = server

    def connection_made(self, transport):
        self.transport = transport
        self.server.open.add(self)
        self.server.accepted += 1
        if not self.server.resumed:
            transport.pause_reading()

    def data_received(self, data):
        self.server.bytes += len(data)

    def connection_lost(self, exc):
        self.server.open.discard(self)
        if self.server.resumed and not self.server.open:
            self.server.done.set()


class Server:
    def __init__(self):
        self.open = set()
        self.accepted = 0
        self.bytes = 0
        self.resumed = False
        self.done = asyncio.Event()

    def resume(self):
        self.resumed = True
        for peer in list(self.open):
            peer.transport.resume_reading()
        if not self.open:
            self.done.set()


async def main(host):
    server = Server()
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    listener.bind((host, 0))
    listener.listen(8192)
    loop = asyncio.get_running_loop()
    await loop.create_server(lambda: Peer(server), sock=listener)
    loop.add_signal_handler(signal.SIGUSR1, server.resume)
    print("READY", listener.getsockname()[1], flush=True)
    await server.done.wait()
    print(f"RECEIVED connections={server.accepted} bytes={server.bytes}", flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else "127.0.0.1"))
