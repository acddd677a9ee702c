#!/usr/bin/env python3
"""Uploads a run through the results site's form in headless Chromium (issue 7).

Drives Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe:
JSON messages separated by NUL on fds 3 and 4, no websocket library needed):
opens /upload, chooses the file, types the token, presses Upload, waits for the
run's page and screenshots it. Bounded: every wait has a deadline.

Usage: site-browser-test.py SITE_URL TOKEN FILE SCREENSHOT.png [CHROMIUM ARGS...]
Prints the run page's path on success; exits 1 with the reason otherwise.
"""

import base64
import fcntl
import json
import os
import subprocess
import sys
import tempfile
import time

DEADLINE_S = 60


class Browser:
    def __init__(self, extra_args):
        self.profile = tempfile.mkdtemp(prefix="site-browser-")
        to_chrome_r, self.to_chrome_w = os.pipe()
        self.from_chrome_r, from_chrome_w = os.pipe()
        # Chromium reads commands on fd 3 and writes replies on fd 4: the shell
        # moves the pipe's ends there, whatever numbers they have here
        chromium = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                    "--remote-debugging-pipe", f"--user-data-dir={self.profile}", "--window-size=1280,1600",
                    *extra_args, "about:blank"]
        # (copied above 10 first, so that neither end already is 3 or 4)
        child_r = fcntl.fcntl(to_chrome_r, fcntl.F_DUPFD, 10)
        child_w = fcntl.fcntl(from_chrome_w, fcntl.F_DUPFD, 10)
        for fd in (to_chrome_r, from_chrome_w):
            os.close(fd)
        redirect = f'exec "$@" 3<&{child_r} 4>&{child_w} {child_r}<&- {child_w}>&-'
        self.proc = subprocess.Popen(
            ["bash", "-c", redirect, "bash", *chromium],
            pass_fds=(child_r, child_w), stdout=subprocess.DEVNULL,
            stderr=open(os.environ.get("CHROMIUM_LOG", os.devnull), "w"),
        )
        os.close(child_r)
        os.close(child_w)
        self.next_id = 0
        self.buf = b""
        self.start = time.monotonic()

    def left(self):
        left = DEADLINE_S - (time.monotonic() - self.start)
        if left <= 0:
            raise TimeoutError(f"gave up after {DEADLINE_S} s")
        return left

    def _read_message(self):
        import select
        while b"\0" not in self.buf:
            ready, _, _ = select.select([self.from_chrome_r], [], [], self.left())
            if not ready:
                raise TimeoutError("Chromium stopped answering")
            chunk = os.read(self.from_chrome_r, 1 << 16)
            if not chunk:
                raise RuntimeError("Chromium closed the pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method, session=None, **params):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self.to_chrome_w, json.dumps(msg).encode() + b"\0")
        while True:
            reply = self._read_message()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})

    def close(self):
        try:
            self.call("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        subprocess.run(["rm", "-rf", self.profile], check=False)


def main():
    site, token, path, shot, *extra = sys.argv[1:]
    b = Browser(extra)
    try:
        target = b.call("Target.createTarget", url=f"{site}/upload")["targetId"]
        s = b.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

        def evaluate(expr):
            r = b.call("Runtime.evaluate", session=s, expression=expr, returnByValue=True)
            return r.get("result", {}).get("value")

        def wait_for(expr, what):
            while not evaluate(expr):
                if time.monotonic() - b.start > DEADLINE_S:
                    raise TimeoutError(f"waited {DEADLINE_S} s for {what}")
                time.sleep(0.2)

        wait_for("document.readyState === 'complete' && !!document.querySelector('form.upload')", "the upload form")
        root = b.call("DOM.getDocument", session=s)["root"]["nodeId"]
        file_input = b.call("DOM.querySelector", session=s, nodeId=root, selector="input[type=file]")["nodeId"]
        b.call("DOM.setFileInputFiles", session=s, nodeId=file_input, files=[os.path.abspath(path)])
        token_input = b.call("DOM.querySelector", session=s, nodeId=root, selector="input[name=token]")["nodeId"]
        b.call("DOM.focus", session=s, nodeId=token_input)
        b.call("Input.insertText", session=s, text=token)
        # press the button as a person would: a click at its centre
        button = b.call("DOM.querySelector", session=s, nodeId=root, selector="form.upload button[type=submit]")["nodeId"]
        b.call("DOM.scrollIntoViewIfNeeded", session=s, nodeId=button)
        quad = b.call("DOM.getContentQuads", session=s, nodeId=button)["quads"][0]
        x, y = sum(quad[0::2]) / 4, sum(quad[1::2]) / 4
        for kind in ("mousePressed", "mouseReleased"):
            b.call("Input.dispatchMouseEvent", session=s, type=kind, x=x, y=y, button="left", clickCount=1)
        wait_for("location.pathname.startsWith('/runs/') && document.readyState === 'complete'", "the run's page")
        where = evaluate("location.pathname")
        if not evaluate("!!document.querySelector('#sustained-decode')"):
            raise RuntimeError(f"{where} is not a run page")
        png = b.call("Page.captureScreenshot", session=s, format="png", captureBeyondViewport=True)["data"]
        with open(shot, "wb") as f:
            f.write(base64.b64decode(png))
        print(where)
    finally:
        b.close()


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # one line of why for the shell script
        print(f"site-browser-test: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
