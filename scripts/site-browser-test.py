#!/usr/bin/env python3
"""Uses the results site's forms in headless Chromium as a person would (part of scripts/site-browser-test.sh).

Drives Chromium over the DevTools protocol on a pipe (--remote-debugging-pipe:
JSON messages separated by NUL on fds 3 and 4, no websocket library needed).
Bounded: every wait has a deadline.

  upload: opens /upload, chooses the file, types the token, presses Upload,
          waits for the run's page and screenshots it; prints its path.
  filter-compare: opens /, types GPU into the filter form and sets the dates,
          presses Filter, checks the filtered list (EXPECT runs, without
          ABSENT), ticks the first two runs' checkboxes (the second row's first),
          presses "Compare selected", checks the comparison of those two with the
          first ticked as the baseline (A) and screenshots it; prints the
          comparison's path and query.

Usage: site-browser-test.py upload SITE_URL TOKEN FILE SCREENSHOT.png [CHROMIUM ARGS...]
       site-browser-test.py filter-compare SITE_URL GPU FROM TO EXPECT ABSENT SHOT.png [CHROMIUM ARGS...]
Exits 1 with the reason on failure.
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
        chromium = [os.environ.get("CHROMIUM", "chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
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


# What Chromium answers when an evaluation meets a navigation half-way.
NAVIGATING = ("Inspected target navigated or closed", "Execution context was destroyed",
              "Cannot find context with specified id")


class Page:
    """One tab of the browser, opened at a URL."""

    def __init__(self, b, url):
        self.b = b
        target = b.call("Target.createTarget", url=url)["targetId"]
        self.s = b.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]

    def evaluate(self, expr):
        r = self.b.call("Runtime.evaluate", session=self.s, expression=expr, returnByValue=True)
        return r.get("result", {}).get("value")

    def wait_for(self, expr, what):
        while not self._settled(expr):
            if time.monotonic() - self.b.start > DEADLINE_S:
                raise TimeoutError(f"waited {DEADLINE_S} s for {what}")
            time.sleep(0.2)

    def _settled(self, expr):
        """The expression's value, or False while the tab is between two pages.

        A form's submit navigates; an evaluation that lands in that gap finds its page gone
        ("Inspected target navigated or closed", "Execution context was destroyed") and is
        asked again, as a person waits for the next page to appear."""
        try:
            return self.evaluate(expr)
        except RuntimeError as e:
            if any(gap in str(e) for gap in NAVIGATING):
                return False
            raise

    def node(self, selector):
        root = self.b.call("DOM.getDocument", session=self.s)["root"]["nodeId"]
        node = self.b.call("DOM.querySelector", session=self.s, nodeId=root, selector=selector)["nodeId"]
        if not node:
            raise RuntimeError(f"no {selector} on the page")
        return node

    def click(self, selector):
        """A click at the element's centre, as a person would."""
        node = self.node(selector)
        self.b.call("DOM.scrollIntoViewIfNeeded", session=self.s, nodeId=node)
        quad = self.b.call("DOM.getContentQuads", session=self.s, nodeId=node)["quads"][0]
        x, y = sum(quad[0::2]) / 4, sum(quad[1::2]) / 4
        for kind in ("mousePressed", "mouseReleased"):
            self.b.call("Input.dispatchMouseEvent", session=self.s, type=kind, x=x, y=y, button="left", clickCount=1)

    def type_into(self, selector, text):
        self.b.call("DOM.focus", session=self.s, nodeId=self.node(selector))
        self.b.call("Input.insertText", session=self.s, text=text)

    def screenshot(self, shot):
        png = self.b.call("Page.captureScreenshot", session=self.s, format="png", captureBeyondViewport=True)["data"]
        with open(shot, "wb") as f:
            f.write(base64.b64decode(png))


def upload(b, site, token, path, shot):
    p = Page(b, f"{site}/upload")
    p.wait_for("document.readyState === 'complete' && !!document.querySelector('form.upload')", "the upload form")
    file_input = p.node("input[type=file]")
    b.call("DOM.setFileInputFiles", session=p.s, nodeId=file_input, files=[os.path.abspath(path)])
    p.type_into("input[name=token]", token)
    p.click("form.upload button[type=submit]")
    p.wait_for("location.pathname.startsWith('/runs/') && document.readyState === 'complete'", "the run's page")
    where = p.evaluate("location.pathname")
    if not p.evaluate("!!document.querySelector('#sustained-decode')"):
        raise RuntimeError(f"{where} is not a run page")
    p.screenshot(shot)
    return where


def filter_compare(b, site, gpu, day_from, day_to, expect, absent, shot):
    p = Page(b, f"{site}/")
    p.wait_for("document.readyState === 'complete' && !!document.querySelector('form.filters')", "the filter form")
    p.type_into("form.filters input[name=gpu]", gpu)
    # a date input takes its value as YYYY-MM-DD whatever the locale shows
    for name, day in (("from", day_from), ("to", day_to)):
        p.evaluate(f"document.querySelector('form.filters input[name={name}]').value = {json.dumps(day)}")
    p.click("form.filters button[type=submit]")
    p.wait_for(f"location.search.includes('gpu={gpu}') && document.readyState === 'complete'", "the filtered list")
    for key, day in (("from", day_from), ("to", day_to)):
        if f"{key}={day}" not in p.evaluate("location.search"):
            raise RuntimeError(f"the filter form did not send {key}={day}: {p.evaluate('location.href')}")
    shown = p.evaluate("[...document.querySelectorAll('table.runs input[name=ids]')].map(c => c.value)")
    if sorted(shown) != sorted(expect):
        raise RuntimeError(f"the filtered list shows {shown}, expected {expect}")
    if absent in shown:
        raise RuntimeError(f"the filtered list shows {absent}")
    # ticked against the table's order: the first run ticked is the baseline (A)
    chosen = list(reversed(shown[:2]))
    for run in chosen:
        p.click(f"table.runs input[name=ids][value='{run}']")
    ticked = p.evaluate("[...document.querySelectorAll('table.runs input[name=ids]:checked')].map(c => c.value)")
    if sorted(ticked) != sorted(chosen):
        raise RuntimeError(f"ticked {ticked}, meant {chosen}")
    p.click("button[form=compare][type=submit]")
    p.wait_for("location.pathname === '/compare' && document.readyState === 'complete'", "the comparison")
    query = p.evaluate("location.search")
    sent = p.evaluate("new URLSearchParams(location.search).getAll('ids').join(',')")
    if sent != ",".join(chosen):
        raise RuntimeError(f"the comparison's query is {query}, expected the ids {chosen} in the order ticked")
    if "Comparing 2 runs" not in p.evaluate("document.body.innerText"):
        raise RuntimeError(f"/compare{query} is not a comparison of 2 runs")
    baseline = p.evaluate("document.querySelector('ol.runkey li a').getAttribute('href')")
    if baseline != f"/runs/{chosen[0]}":
        raise RuntimeError(f"the baseline (A) is {baseline}, expected the first run ticked, {chosen[0]}")
    p.screenshot(shot)
    return f"/compare{query}"


def main():
    mode, site, *args = sys.argv[1:]
    if mode == "upload":
        token, path, shot, *extra = args
        b = Browser(extra)
        run = lambda: upload(b, site, token, path, shot)
    elif mode == "filter-compare":
        gpu, day_from, day_to, expect, absent, shot, *extra = args
        b = Browser(extra)
        run = lambda: filter_compare(b, site, gpu, day_from, day_to, expect.split(","), absent, shot)
    else:
        raise ValueError(f"unknown mode {mode}")
    try:
        print(run())
    finally:
        b.close()


if __name__ == "__main__":
    try:
        main()
    except Exception as e:  # one line of why for the shell script
        print(f"site-browser-test: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
