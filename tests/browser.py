"""Headless Chromium for the page tests, driven over the DevTools protocol on a pipe.

``--remote-debugging-pipe`` makes Chromium read protocol messages (JSON, NUL-terminated) on
file descriptor 3 and write on 4: no websocket library and no port. ``render`` loads a page,
records every request it makes and every console error or uncaught exception, and saves a
full-page screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_browser() -> str | None:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    return None


@dataclass
class PageResult:
    requests: list[str] = field(default_factory=list)
    console_errors: list[str] = field(default_factory=list)
    width: int = 0
    height: int = 0
    title: str = ""


class _Pipe:
    def __init__(self, proc: subprocess.Popen[bytes], write_fd: int, read_fd: int) -> None:
        self.proc, self.write_fd, self.read_fd = proc, write_fd, read_fd
        self.buffer = b""
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise TimeoutError("no answer from the browser")
            chunk = os.read(self.read_fd, 1 << 20)
            if not chunk:
                raise RuntimeError("the browser closed its pipe")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        message: dict[str, Any] = json.loads(raw)
        return message

    def call(
        self,
        method: str,
        params: dict[str, Any] | None = None,
        session: str | None = None,
        timeout: float = 60,
    ) -> dict[str, Any]:
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.write_fd, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            answer = self._read_message(deadline)
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                result: dict[str, Any] = answer.get("result", {})
                return result
            self.events.append(answer)

    def wait_for(self, method: str, timeout: float = 60) -> dict[str, Any]:
        for event in self.events:
            if event.get("method") == method:
                return event
        deadline = time.monotonic() + timeout
        while True:
            event = self._read_message(deadline)
            self.events.append(event)
            if event.get("method") == method:
                return event


def render(
    browser: str, url: str, screenshot: Path, width: int = 1280, height: int = 900
) -> PageResult:
    """Load ``url``; save a full-page PNG at ``screenshot``; what the page requested and logged."""
    to_chrome_r, to_chrome_w = os.pipe()
    from_chrome_r, from_chrome_w = os.pipe()

    def child_fds() -> None:  # in the child: its ends of the pipes become fds 3 and 4
        read_end, write_end = os.dup(to_chrome_r), os.dup(from_chrome_w)
        os.dup2(read_end, 3)
        os.dup2(write_end, 4)
        os.set_inheritable(3, True)
        os.set_inheritable(4, True)

    profile = tempfile.mkdtemp(prefix="lakecore-chromium-")
    args = [
        browser,
        "--headless=new",
        "--remote-debugging-pipe",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--no-default-browser-check",
        "--disable-extensions",
        "--hide-scrollbars",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        f"--window-size={width},{height}",
    ]
    proc = subprocess.Popen(
        args,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(3, 4),
        preexec_fn=child_fds,
    )
    os.close(to_chrome_r)
    os.close(from_chrome_w)
    pipe = _Pipe(proc, to_chrome_w, from_chrome_r)
    result = PageResult()
    try:
        target = pipe.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = pipe.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Network", "Runtime", "Log"):
            pipe.call(f"{domain}.enable", session=session)
        pipe.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        pipe.events.clear()
        pipe.call("Page.navigate", {"url": url}, session=session)
        pipe.wait_for("Page.loadEventFired")
        time.sleep(0.3)  # late console messages
        pipe.call("Runtime.evaluate", {"expression": "1"}, session=session)
        metrics = pipe.call("Page.getLayoutMetrics", session=session)
        size = metrics.get("cssContentSize") or metrics["contentSize"]
        result.width, result.height = int(size["width"]), int(size["height"])
        result.title = pipe.call(
            "Runtime.evaluate",
            {"expression": "document.title", "returnByValue": True},
            session=session,
        )["result"].get("value", "")
        shot = pipe.call(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {
                    "x": 0,
                    "y": 0,
                    "width": max(width, result.width),
                    "height": result.height,
                    "scale": 1,
                },
            },
            session=session,
        )
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.write_bytes(base64.b64decode(shot["data"]))
        for event in pipe.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Network.requestWillBeSent":
                result.requests.append(params["request"]["url"])
            elif method == "Runtime.exceptionThrown":
                result.console_errors.append(str(params.get("exceptionDetails", {}).get("text")))
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                result.console_errors.append(json.dumps(params.get("args", []))[:300])
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                result.console_errors.append(str(params["entry"].get("text")))
        with contextlib.suppress(Exception):
            pipe.call("Browser.close", timeout=10)
    finally:
        os.close(to_chrome_w)
        os.close(from_chrome_r)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(profile, ignore_errors=True)
    return result
