"""A headless Chromium driven over the DevTools protocol for the UI's browser tests, with the
standard library only: ``--remote-debugging-pipe`` (commands in on fd 3, answers and events out
on fd 4, each a JSON message ended by a NUL byte), so neither Playwright nor a websocket client
is needed. Every browser starts with a fresh profile (an empty localStorage: a first visit)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "chrome")


def find_chromium() -> str | None:
    """The path of a Chromium/Chrome on this machine, or None."""
    for name in CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless Chromium with one page. ``open(url)``, ``js(expr)``, ``wait_for(expr)``,
    ``screenshot(path)``; a context manager that ends the browser and removes its profile."""

    def __init__(self, executable: str, width: int = 1400, height: int = 900):
        self.profile = tempfile.mkdtemp(prefix="fedsweep-chromium-")
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()

        def wire():  # runs in the child before exec: the pipes become fds 3 and 4
            for source, target in ((to_child_r, 3), (from_child_w, 4)):
                if source == target:
                    os.set_inheritable(target, True)
                else:
                    os.dup2(source, target)

        self.proc = subprocess.Popen(
            [
                executable,
                "--headless=new",
                "--remote-debugging-pipe",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--no-first-run",
                "--no-default-browser-check",
                f"--user-data-dir={self.profile}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            preexec_fn=wire,  # noqa: PLW1509 - a single-threaded test helper
            pass_fds=(3, 4),  # kept open past the child's close_fds
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next((t for t in targets if t["type"] == "page"), None)
        target = page["targetId"] if page else self.call("Target.createTarget", url="about:blank")
        if isinstance(target, dict):
            target = target["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)[
            "sessionId"
        ]
        self.call("Page.enable", session=True)
        self.call("Runtime.enable", session=True)
        self.call(
            "Emulation.setDeviceMetricsOverride",
            session=True,
            width=width,
            height=height,
            deviceScaleFactor=1,
            mobile=False,
        )

    # ------------------------------------------------------------------ the protocol
    def _read_message(self, timeout: float) -> dict:
        import select

        deadline = time.monotonic() + timeout
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("no answer from the browser in time")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if ready:
                chunk = os.read(self._from_child, 1 << 20)
                if not chunk:
                    raise BrowserError("the browser exited")
                self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        return json.loads(raw)

    def call(self, method: str, *, session: bool = False, timeout: float = 30, **params):
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._to_child, json.dumps(message).encode() + b"\0")
        while True:
            answer = self._read_message(timeout)
            if answer.get("id") == self._next_id:
                if "error" in answer:
                    raise BrowserError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    # ------------------------------------------------------------------ what tests use
    def open(self, url: str) -> None:
        self.call("Page.navigate", session=True, url=url)

    def js(self, expression: str):
        """The value of a JavaScript expression in the page (awaited if a promise)."""
        result = self.call(
            "Runtime.evaluate",
            session=True,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30, every: float = 0.2):
        """Poll ``expression`` until it is truthy; its value, or BrowserError at the deadline
        (with the page's address and the start of its text, to say where it was)."""
        deadline = time.monotonic() + timeout
        probe = f"(() => {{ const v = ({expression}); return v instanceof Node ? true : v; }})()"
        while True:
            value = self.js(probe)
            if value:
                return value
            if time.monotonic() > deadline:
                where = self.js("location.href")
                text = (self.js("document.body ? document.body.innerText : ''") or "")[:300]
                raise BrowserError(f"timed out waiting for {expression} at {where}: {text!r}")
            time.sleep(every)

    def screenshot(self, path: str | Path) -> Path:
        data = self.call("Page.captureScreenshot", session=True, format="png")["data"]
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout=5)
        except (BrowserError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
