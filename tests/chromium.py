"""Headless Chromium (Debian's ``chromium``) driven over its DevTools protocol, for tests
that open a page as a person would: evaluate script in it, capture console errors, take
screenshots.  The protocol travels over a websocket on 127.0.0.1 (aiohttp, a project
dependency); nothing leaves the machine."""

from __future__ import annotations

import asyncio
import base64
import io
import itertools
import json
import re
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import numpy as np

CHROMIUM_MISSING = ("chromium is not installed: run bin/setup-envs (it installs Debian's `chromium` package "
                    "when missing), or `apt-get install chromium`")


def chromium_path() -> str | None:
    return shutil.which("chromium")


def pixel_spread(png: bytes) -> tuple[float, float]:
    """(standard deviation of the grey levels, share of pixels that differ from the most
    common level) of a PNG: both are ~0 for a blank image."""
    import matplotlib.image

    img = matplotlib.image.imread(io.BytesIO(png), format="png")
    grey = np.asarray(img, dtype=float)[..., :3].mean(axis=-1) if img.ndim == 3 else np.asarray(img, dtype=float)
    levels, counts = np.unique(np.round(grey * 255), return_counts=True)
    background = levels[np.argmax(counts)]
    return float(grey.std()), float(np.mean(np.abs(np.round(grey * 255) - background) > 8))


class Chromium:
    """One headless browser with one page; ``async with Chromium(profile_dir) as page``."""

    def __init__(self, profile_dir: Path, width: int = 1400, height: int = 1000, timeout_s: float = 60.0) -> None:
        self.profile_dir, self.size, self.timeout_s = profile_dir, (width, height), timeout_s
        self.events: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future] = {}
        self._waiters: list[tuple[str, asyncio.Future]] = []

    async def __aenter__(self) -> "Chromium":
        exe = chromium_path()
        if exe is None:
            raise RuntimeError(CHROMIUM_MISSING)
        self.proc = await asyncio.create_subprocess_exec(
            exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
            "--disable-extensions", "--disable-background-networking", "--remote-debugging-address=127.0.0.1",
            "--remote-debugging-port=0", f"--user-data-dir={self.profile_dir}",
            f"--window-size={self.size[0]},{self.size[1]}", "about:blank",
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)
        browser_ws = await asyncio.wait_for(self._devtools_url(), self.timeout_s)
        port = re.match(r"ws://[^:]+:(\d+)/", browser_ws).group(1)
        self.http = aiohttp.ClientSession()
        async with self.http.get(f"http://127.0.0.1:{port}/json/list") as resp:
            pages = [t for t in await resp.json() if t["type"] == "page"]
        self.ws = await self.http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.create_task(self._read())
        for domain in ("Page", "Runtime", "Log"):
            await self.send(f"{domain}.enable")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._reader.cancel()
        await self.ws.close()
        await self.http.close()
        self.proc.terminate()
        try:
            await asyncio.wait_for(self.proc.wait(), 10)
        except asyncio.TimeoutError:
            self.proc.kill()
            await self.proc.wait()

    async def _devtools_url(self) -> str:
        while True:
            line = (await self.proc.stderr.readline()).decode(errors="replace")
            if not line:
                raise RuntimeError("chromium exited before it printed its DevTools address")
            m = re.search(r"DevTools listening on (ws://\S+)", line)
            if m:
                asyncio.create_task(self._drain())
                return m.group(1)

    async def _drain(self) -> None:
        while await self.proc.stderr.readline():
            pass

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data and data["id"] in self._pending:
                self._pending.pop(data["id"]).set_result(data)
                continue
            self.events.append(data)
            for method, fut in list(self._waiters):
                if data.get("method") == method and not fut.done():
                    fut.set_result(data)
                    self._waiters.remove((method, fut))

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        i = next(self._ids)
        fut = asyncio.get_running_loop().create_future()
        self._pending[i] = fut
        await self.ws.send_str(json.dumps({"id": i, "method": method, "params": params}))
        reply = await asyncio.wait_for(fut, self.timeout_s)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply["result"]

    async def open(self, url: str) -> None:
        fut = asyncio.get_running_loop().create_future()
        self._waiters.append(("Page.loadEventFired", fut))
        await self.send("Page.navigate", url=url)
        await asyncio.wait_for(fut, self.timeout_s)

    async def js(self, expression: str, context_id: int | None = None) -> Any:
        """The value of ``expression`` (awaited if a promise); a thrown error raises here."""
        params: dict[str, Any] = {"expression": expression, "awaitPromise": True, "returnByValue": True}
        if context_id is not None:
            params["contextId"] = context_id
        out = await self.send("Runtime.evaluate", **params)
        if "exceptionDetails" in out:
            raise RuntimeError(f"script failed: {out['exceptionDetails']}")
        return out["result"].get("value")

    async def wait_for(self, expression: str, timeout_s: float = 20.0, context_id: int | None = None) -> Any:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            value = await self.js(expression, context_id)
            if value:
                return value
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"timed out waiting for: {expression}")
            await asyncio.sleep(0.1)

    async def screenshot(self, clip: dict[str, float] | None = None) -> bytes:
        params: dict[str, Any] = {"format": "png"}
        if clip:
            params["clip"] = {**clip, "scale": 1}
        return base64.b64decode((await self.send("Page.captureScreenshot", **params))["data"])

    async def frame_context(self, url_prefix: str, timeout_s: float = 20.0) -> int:
        """An execution context inside the child frame whose URL starts with ``url_prefix``
        (waits until the frame has navigated there)."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            tree = (await self.send("Page.getFrameTree"))["frameTree"]
            frames = [c["frame"] for c in tree.get("childFrames", []) if c["frame"].get("url", "").startswith(url_prefix)]
            if frames:
                return (await self.send("Page.createIsolatedWorld", frameId=frames[0]["id"]))["executionContextId"]
            if asyncio.get_running_loop().time() > deadline:
                urls = [c["frame"].get("url", "")[:40] for c in tree.get("childFrames", [])]
                raise TimeoutError(f"no child frame at {url_prefix}...; frames: {urls}")
            await asyncio.sleep(0.1)

    def errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries seen so far."""
        out = []
        for ev in self.events:
            p = ev.get("params", {})
            if ev.get("method") == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.append(f"uncaught: {(d.get('exception') or {}).get('description') or d.get('text')}")
            elif ev.get("method") == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
                out.append("console.error: " + " ".join(str(a.get("value", a.get("description"))) for a in p["args"]))
            elif ev.get("method") == "Log.entryAdded" and p["entry"].get("level") == "error":
                out.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        return out
