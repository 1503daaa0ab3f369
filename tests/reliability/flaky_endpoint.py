"""A TCP endpoint on 127.0.0.1 in front of a real server (moto's S3) whose connections can be
reset or refused for a while: a store whose network fails as a real one does.

``FlakyEndpoint(target_port)`` listens on a port of its own and forwards every connection, byte
for byte, to ``127.0.0.1:target_port``. Two faults, each for a given number of seconds:

    reset_requests_for(s)   every connection open at that moment is reset (TCP RST, SO_LINGER
                            0: the client reads "Connection reset by peer"); then, until the
                            time is up (and, with ``at_least=n``, until n requests were
                            reset), each request is forwarded and its connection reset
                            before the answer comes back, unless that same request (method
                            and target) was reset before in this window. So every request in
                            the window fails
                            once, possibly after taking effect (as a request in flight does),
                            and its retry gets through: what an S3 client meets while a load
                            balancer drops connections. The port keeps accepting.
    refuse_for(s)           the open connections are reset and nothing listens on the port:
                            every connect is refused (ECONNREFUSED), as when the server is
                            down. The port stays bound meanwhile (never listened on, so
                            nothing else takes it) and listens again when the time is up.

``on_connection`` (optional) is called with the number of connections accepted so far, before
the new one is served: a test starts a fault from there, at a known point of a command's work.
``requests_reset`` and ``connections_reset`` count what the faults did, so that a test can
show that a fault really met its client; ``forwarded`` lists the request line of every request
that went through. Nothing above TCP is faked: the client's own retries,
timeouts and error translation run as they would against S3.
"""

from __future__ import annotations

import contextlib
import math
import re
import socket
import struct
import threading
import time
from collections.abc import Callable
from types import TracebackType

__all__ = ["FlakyEndpoint"]

_RST_LINGER = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() sends RST, not FIN
# The start of a chunk that is an HTTP/1.1 request's head: a client sends each head in one
# write, on a fresh connection or a kept-alive one (bodies are binary files, never this).
_REQUEST_LINE = re.compile(rb"(?:GET|HEAD|PUT|POST|DELETE) \S+ HTTP/1\.1\r\n")


def _reset(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RST_LINGER)
    with contextlib.suppress(OSError):
        sock.close()


class _Connection:
    """One forwarded connection: the client's socket and the upstream one."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.doomed = False
        self.muted = False  # set before a request to be reset is forwarded: no answer goes back
        self.closed = threading.Event()  # set once both sockets are closed (an RST when doomed)

    def doom(self) -> None:
        """Reset the client's side: the pumps are woken without a FIN, and the client's socket
        is closed with an RST by the thread that serves it."""
        self.doomed = True
        with contextlib.suppress(OSError):
            self.client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RST_LINGER)
        for sock, how in ((self.client, socket.SHUT_RD), (self.upstream, socket.SHUT_RDWR)):
            with contextlib.suppress(OSError):
                sock.shutdown(how)


class FlakyEndpoint:
    """See the module doc. A context manager: ``with FlakyEndpoint(port) as flaky: ...``."""

    def __init__(
        self,
        target_port: int,
        target_host: str = "127.0.0.1",
        on_connection: Callable[[int], None] | None = None,
    ) -> None:
        self.target = (target_host, target_port)
        self.on_connection = on_connection
        self._lock = threading.Lock()
        self._mode = "forward"  # "forward" | "reset" | "refuse"
        self._until = 0.0
        self._open: set[_Connection] = set()
        self._reset_requests: set[bytes] = set()
        self._window_on_first_request: float | None = None
        self._at_least = 0  # the reset window stays open until this many requests were reset
        self._stopped = threading.Event()
        self._listener = self._bind(0)
        self.port: int = self._listener.getsockname()[1]
        self._listener.listen(64)
        self.connections = 0
        self.requests_reset = 0
        self.connections_reset = 0
        self.forwarded: list[str] = []  # the request line of every request forwarded, in order
        self._thread = threading.Thread(target=self._serve, name="flaky-endpoint", daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- faults --------------------------------------------------------------------------------

    def reset_requests_for(
        self, seconds: float, *, from_first_request: bool = False, at_least: int = 0
    ) -> None:
        """The reset fault (see the module docstring). ``from_first_request``: the window's
        seconds count from the first request that arrives, not from now, so a client that is
        slow to start (a loaded machine building its S3 client) still meets the fault.
        ``at_least``: the window does not close before that many requests were reset, however
        long the client takes between them (its back-off and a loaded machine can make a few
        seconds hold a single request)."""
        self._fault("reset", math.inf if from_first_request else seconds, at_least)
        if from_first_request:
            with self._lock:
                self._window_on_first_request = seconds

    def refuse_for(self, seconds: float) -> None:
        self._fault("refuse", seconds)

    def _fault(self, mode: str, seconds: float, at_least: int = 0) -> None:
        with self._lock:
            self._mode, self._until = mode, time.monotonic() + seconds
            self._window_on_first_request = None
            self._at_least = at_least
            self._reset_requests.clear()  # each window resets each request once
            victims, self._open = self._open, set()
            self.connections_reset += len(victims)
            if mode == "refuse":
                self._listener.close()
        for connection in victims:
            connection.doom()
        # The RST leaves when each victim's serving thread closes its socket: wait for that, so
        # that the client's next request cannot go out on a kept-alive connection that is
        # doomed but not yet reset (it would be lost unsent, never reaching the fault).
        for connection in victims:
            connection.closed.wait(5)
        if mode == "refuse":
            # A bound socket that does not listen answers a SYN with RST: refused. The port is
            # free again once the reset connections, which hold it too, are closed.
            deadline = time.monotonic() + 5
            while True:
                try:
                    listener = self._bind(self.port)
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.01)
            with self._lock:
                self._listener = listener

    def _mode_now(self) -> str:
        """The mode in force, ending an expired fault (listening again after a refusal)."""
        with self._lock:
            short = self._mode == "reset" and len(self._reset_requests) < self._at_least
            if self._mode != "forward" and time.monotonic() >= self._until and not short:
                if self._mode == "refuse":
                    self._listener.listen(64)
                self._mode = "forward"
            return self._mode

    def _first_reset_of(self, line: bytes) -> bool:
        """True when the request of ``line`` (its request line) is to be reset now: a reset
        window is open and this request has not been reset before."""
        if self._mode_now() != "reset":
            return False
        with self._lock:
            if self._window_on_first_request is not None:
                self._until = time.monotonic() + self._window_on_first_request
                self._window_on_first_request = None
            if line in self._reset_requests:
                return False
            self._reset_requests.add(line)
            self.requests_reset += 1
            return True

    # -- serving -------------------------------------------------------------------------------

    @staticmethod
    def _bind(port: int) -> socket.socket:
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.settimeout(0.05)
        return sock

    def _serve(self) -> None:
        while not self._stopped.is_set():
            if self._mode_now() == "refuse":
                time.sleep(0.01)
                continue
            with self._lock:
                listener = self._listener
            try:
                client, _ = listener.accept()
            except OSError:  # the timeout, or a listener a refusal just closed
                continue
            self.connections += 1
            if self.on_connection is not None:
                self.on_connection(self.connections)
            if self._mode_now() == "refuse":  # the hook refused: this one is too late for it
                _reset(client)
                continue
            threading.Thread(target=self._forward, args=(client,), daemon=True).start()

    def _forward(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            _reset(client)
            return
        client.settimeout(None)
        upstream.settimeout(None)
        connection = _Connection(client, upstream)
        with self._lock:
            self._open.add(connection)
        back = threading.Thread(target=self._pump, args=(connection, upstream, client), daemon=True)
        back.start()
        self._pump(connection, client, upstream, examine=True)
        back.join()
        with self._lock:
            self._open.discard(connection)
        if connection.doomed:
            _reset(client)
        with contextlib.suppress(OSError):
            client.close()
        with contextlib.suppress(OSError):
            upstream.close()
        connection.closed.set()

    def _pump(
        self,
        connection: _Connection,
        source: socket.socket,
        sink: socket.socket,
        examine: bool = False,
    ) -> None:
        """Copy until the source ends or fails; then end both directions (with a FIN, unless
        the connection is being reset: then its RST is all the client gets). With ``examine``
        (the client's side) a request's head may doom the connection once it has been
        forwarded: the answer is muted first, so that none of it can reach the client before
        the reset (on a loaded machine the target answered between the forward and the doom,
        and a request meant to lose its answer got it)."""
        try:
            while not connection.doomed:
                data = source.recv(65536)
                if not data or connection.doomed:
                    break
                if connection.muted and not examine:
                    continue  # an answer to a request being reset: dropped
                reset = False
                if examine and _REQUEST_LINE.match(data):
                    line = data.split(b"\r\n", 1)[0]
                    self.forwarded.append(line.decode("latin-1"))
                    reset = connection.muted = self._first_reset_of(line)
                sink.sendall(data)
                if reset:
                    connection.doom()
        except OSError:
            pass
        if not connection.doomed:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    # -- lifetime ------------------------------------------------------------------------------

    def start(self) -> FlakyEndpoint:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(5)
        with self._lock:
            victims, self._open = self._open, set()
            self._listener.close()
        for connection in victims:
            connection.doom()

    def __enter__(self) -> FlakyEndpoint:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
