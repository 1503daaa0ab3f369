"""One uvicorn server on 127.0.0.1 for a whole test session, whose app each test swaps.

Starting uvicorn costs tens of milliseconds and a thread; building ``app(catalog)`` over a fresh
lakehouse costs a few. So the session runs one server (``SessionServer``) in a thread, and each
test hands it a new app (``serve``): the next request reaches the new catalog. A test that needs
two servers at once (two processes on one lakehouse) asks for ``serve_second``, a second
listener on its own port. ``shared_server()`` is the same for code that has no fixture for it.
"""

from __future__ import annotations

import atexit
import threading
import time
from typing import Any

import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

START_TIMEOUT_SECONDS = 10.0


class SwappableApp:
    """An ASGI app that forwards to whichever app was set last."""

    def __init__(self) -> None:
        self.inner: ASGIApp | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        inner = self.inner
        if inner is None:
            raise RuntimeError("no app is being served")
        await inner(scope, receive, send)


class ThreadServer:
    """uvicorn on 127.0.0.1, port 0, in a daemon thread."""

    def __init__(self, app: ASGIApp) -> None:
        config = uvicorn.Config(
            app, host="127.0.0.1", port=0, log_level="warning", lifespan="off", access_log=False
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="rest-test-server", daemon=True)
        self.thread.start()
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the test REST server did not start")
            time.sleep(0.005)
        port = self.server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


class SessionServer:
    def __init__(self) -> None:
        self.first_app = SwappableApp()
        self.second_app = SwappableApp()
        self.first = ThreadServer(self.first_app)
        self.second: ThreadServer | None = None

    def serve(self, app: Any) -> str:
        """Serve ``app`` from now on; its base URL."""
        self.first_app.inner = app
        return self.first.url

    def serve_second(self, app: Any) -> str:
        """Serve ``app`` on a second port as well (another server process on one lakehouse)."""
        if self.second is None:
            self.second = ThreadServer(self.second_app)
        self.second_app.inner = app
        return self.second.url

    def stop(self) -> None:
        self.first.stop()
        if self.second is not None:
            self.second.stop()


_shared: SessionServer | None = None
_shared_lock = threading.Lock()


def shared_server() -> SessionServer:
    """The process's one ``SessionServer``, started on first use and stopped at exit: for test
    code outside ``tests/rest`` (the behaviour suite's "rest" backend) that has no fixture of
    its own for it."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = SessionServer()
            atexit.register(_shared.stop)
        return _shared
