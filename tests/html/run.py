#!/usr/bin/env python3
"""`rnnc show FILE --html -o PAGE` loaded in headless Chromium (issue 7).

For each case below (lstm, gru, bitagger: two loops on two streams, charlm:
an imported file, escape.rnn: `<script>`, `&` and quotes in comments), rnnc
writes the page; Chromium (Debian's `chromium`, driven over the DevTools
protocol on --remote-debugging-pipe: fd 3 in, fd 4 out, JSON messages ended
by NUL; no pip package) loads it from a file:// URL and this checks:

  - no console error, no uncaught exception, no error in the browser log;
  - nothing fetched: no resource entries, no <script>, no <link>;
  - the graph's <svg> has a non-zero bounding box and has node elements, and
    each node links to a source line;
  - every link to an anchor (HTML `a[href^="#"]` and SVG `a` with an
    xlink:href) names an element id that exists, and ids are unique;
  - the equations link to kernels and the kernels link back;
  - the timeline has one lane per stream (two for bitagger);
  - the emitted code on the page is exactly what `rnnc compile --target cpu`
    writes;
  - escape.rnn: the comment text is shown as text, no element was injected.

A screenshot of each page (the top of it, and the schedule section) is
written to OUT/<case>.png and OUT/<case>-schedule.png, beside OUT/<case>.html;
the paths are printed.

No chromium or no Graphviz `dot`: prints why and exits 77 (ctest reports it
as skipped). Every step is bounded in time; Chromium is killed on exit.

Usage: run.py --rnnc PATH --samples DIR --out DIR [-k SUBSTRING]"""
import argparse
import base64
import json
import os
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))

# (name, file relative to --samples or to this folder, extra rnnc args, streams)
CASES = [
    ("lstm", "samples:lstm.rnn", [], 1),
    ("gru", "samples:gru.rnn", ["-D", "I=32", "-D", "H=48"], 1),
    ("bitagger", "samples:bitagger.rnn", ["-D", "V=50", "-D", "E=16", "-D", "H=24"], 2),
    ("charlm", "samples:charlm.rnn", [], None),
    ("escape", "here:escape.rnn", [], None),
]

STEP_SECONDS = 60


class Fail(Exception):
    pass


def find_browser():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """Headless Chromium over --remote-debugging-pipe."""

    def __init__(self, exe, profile):
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def fds_3_and_4():
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-pipe",
                "--user-data-dir=" + profile, "--no-first-run", "--no-default-browser-check",
                "--disable-extensions", "--disable-background-networking", "--disable-sync",
                "--hide-scrollbars", "--mute-audio", "--window-size=1400,1800", "about:blank"]
        # fds 3 and 4 are made in the child (pass_fds cannot renumber), so close_fds is off:
        # every other fd of this process is non-inheritable (PEP 446).
        with open(os.path.join(profile, "stderr.txt"), "wb") as log:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                                         close_fds=False, preexec_fn=fds_3_and_4)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.messages = queue.Queue()
        self.next_id = 0
        self.events = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        buf = b""
        while True:
            try:
                chunk = os.read(self.from_browser, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                self.messages.put(None)
                return
            buf += chunk
            while b"\0" in buf:
                msg, buf = buf.split(b"\0", 1)
                self.messages.put(json.loads(msg))

    def _next(self, deadline):
        left = deadline - time.monotonic()
        if left <= 0:
            raise Fail("Chromium did not answer within %d s" % STEP_SECONDS)
        try:
            msg = self.messages.get(timeout=left)
        except queue.Empty:
            raise Fail("Chromium did not answer within %d s" % STEP_SECONDS)
        if msg is None:
            raise Fail("Chromium closed the pipe (exit %s)" % self.proc.poll())
        return msg

    def send(self, method, params=None, session=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        os.write(self.to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + STEP_SECONDS
        while True:
            reply = self._next(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise Fail("%s: %s" % (method, reply["error"]))
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method):
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        deadline = time.monotonic() + STEP_SECONDS
        while True:
            msg = self._next(deadline)
            if msg.get("method") == method:
                return msg
            self.events.append(msg)

    def close(self):
        try:
            if self.proc.poll() is None:
                os.write(self.to_browser, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
                self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.to_browser, self.from_browser):
            try:
                os.close(fd)
            except OSError:
                pass


# Runs in the page; returns what the checks need as one JSON object.
PAGE_FACTS = r"""
(() => {
  const ids = new Map();
  for (const el of document.querySelectorAll('[id]')) ids.set(el.id, (ids.get(el.id) || 0) + 1);
  const hrefs = [];
  for (const a of document.querySelectorAll('a')) {
    const h = a.getAttribute('href') || a.getAttributeNS('http://www.w3.org/1999/xlink', 'href');
    if (h && h.startsWith('#')) hrefs.push(h.slice(1));
  }
  const missing = hrefs.filter(h => !document.getElementById(decodeURIComponent(h)));
  const svg = document.querySelector('#graph-svg svg');
  let box = null;
  if (svg) { const b = svg.getBBox(); box = [b.width, b.height]; }
  const rect = svg ? svg.getBoundingClientRect() : null;
  const nodes = svg ? svg.querySelectorAll('g.node').length : 0;
  const nodeLinks = svg ? [...svg.querySelectorAll('g.node a')].filter(a =>
      (a.getAttributeNS('http://www.w3.org/1999/xlink', 'href') || a.getAttribute('href') || '').startsWith('#line')
      || (a.getAttributeNS('http://www.w3.org/1999/xlink', 'href') || '').includes('-line-')).length : 0;
  const lineToKernel = [...document.querySelectorAll('table.src tr.computed a.k')].length;
  const kernelToLine = [...document.querySelectorAll('tr[id^="kernel-"] a[href*="line-"]')].length;
  const kernels = document.querySelectorAll('tr[id^="kernel-"]').length;
  const lanes = [...document.querySelectorAll('#schedule ~ .timeline')].map(t => t.querySelectorAll('.lane').length);
  // Stage boxes of one timeline must not overlap, and each lane label must be visible.
  const overlaps = [];
  for (const t of document.querySelectorAll('.timeline')) {
    const boxes = [...t.querySelectorAll('.stage, .lane')].map(e => [e.id || e.textContent, e.getBoundingClientRect()]);
    for (let i = 0; i < boxes.length; ++i)
      for (let j = i + 1; j < boxes.length; ++j) {
        const [a, r] = boxes[i], [b, q] = boxes[j];
        if (r.left < q.right - 1 && q.left < r.right - 1 && r.top < q.bottom - 1 && q.top < r.bottom - 1)
          overlaps.push(a + ' / ' + b);
      }
  }
  const sched = document.getElementById('schedule');
  const code = document.getElementById('code');
  return {
    hrefs: hrefs.length, missing: missing.slice(0, 20),
    duplicates: [...ids].filter(([k, n]) => n > 1).map(([k]) => k).slice(0, 20),
    box, rect: rect ? [rect.width, rect.height] : null, nodes, nodeLinks,
    lineToKernel, kernelToLine, kernels, lanes, overlaps: overlaps.slice(0, 10),
    scripts: document.querySelectorAll('script').length,
    links: document.querySelectorAll('link, iframe, img, object, embed').length,
    resources: performance.getEntriesByType('resource').length,
    text: document.body.innerText,
    scheduleClip: sched ? [0, sched.getBoundingClientRect().top + window.scrollY,
                           document.documentElement.scrollWidth,
                           document.getElementById('kernels').getBoundingClientRect().top - sched.getBoundingClientRect().top]
                        : null,
    codeDefs: code ? document.querySelectorAll('pre.code a.def').length : 0,
    codeText: code ? document.querySelector('#code ~ pre.code').textContent : '',
  };
})()
"""


def errors_in(events):
    out = []
    for e in events:
        m, p = e.get("method"), e.get("params", {})
        if m == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            out.append("exception: %s" % d.get("exception", {}).get("description", d.get("text")))
        elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append("console.%s: %s" % (p["type"], [a.get("value", a.get("description")) for a in p.get("args", [])]))
        elif m == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append("log: %s (%s)" % (p["entry"].get("text"), p["entry"].get("url", "")))
    return out


def check_page(browser, page, out_dir, name, streams, bundle_source=None):
    target = browser.send("Target.createTarget", {"url": "about:blank"})["targetId"]
    session = browser.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
    try:
        for domain in ("Runtime", "Log", "Page"):
            browser.send(domain + ".enable", session=session)
        browser.events.clear()
        nav = browser.send("Page.navigate", {"url": "file://" + os.path.abspath(page)}, session=session)
        if nav.get("errorText"):
            raise Fail("navigate: %s" % nav["errorText"])
        browser.wait_event("Page.loadEventFired")
        facts = browser.send("Runtime.evaluate", {"expression": PAGE_FACTS, "returnByValue": True},
                             session=session)
        if "exceptionDetails" in facts:
            raise Fail("the checks threw: %s" % facts["exceptionDetails"])
        f = facts["result"]["value"]
        shot = browser.send("Page.captureScreenshot", {"format": "png"}, session=session)
        png = os.path.join(out_dir, name + ".png")
        with open(png, "wb") as fh:
            fh.write(base64.b64decode(shot["data"]))
        shots = [png]
        if f["scheduleClip"]:
            x, y, w, h = f["scheduleClip"]
            shot = browser.send("Page.captureScreenshot", {
                "format": "png", "captureBeyondViewport": True,
                "clip": {"x": x, "y": y, "width": min(w, 1400), "height": max(1, min(h, 3000)), "scale": 1}},
                session=session)
            png = os.path.join(out_dir, name + "-schedule.png")
            with open(png, "wb") as fh:
                fh.write(base64.b64decode(shot["data"]))
            shots.append(png)
        # Let late console messages arrive before judging.
        browser.send("Runtime.evaluate", {"expression": "1"}, session=session)
        problems = errors_in(browser.events)
        if f["missing"]:
            problems.append("links to no element: %s" % f["missing"])
        if f["duplicates"]:
            problems.append("ids used twice: %s" % f["duplicates"])
        if not f["box"] or f["box"][0] <= 0 or f["box"][1] <= 0 or not f["rect"] or f["rect"][0] <= 0:
            problems.append("the graph's svg has no size: bbox %s, rect %s" % (f["box"], f["rect"]))
        if f["overlaps"]:
            problems.append("schedule boxes overlap: %s" % f["overlaps"])
        if f["nodes"] == 0:
            problems.append("the graph's svg has no nodes")
        if f["nodeLinks"] == 0:
            problems.append("no graph node links to a source line")
        if f["scripts"] or f["links"] or f["resources"]:
            problems.append("not self-contained: %d script, %d link/img/..., %d resources fetched"
                            % (f["scripts"], f["links"], f["resources"]))
        if f["lineToKernel"] == 0 or f["kernelToLine"] == 0 or f["kernels"] == 0:
            problems.append("equations and kernels not linked: %d line->kernel, %d kernel->line, %d kernels"
                            % (f["lineToKernel"], f["kernelToLine"], f["kernels"]))
        if f["codeDefs"] == 0:
            problems.append("the emitted code has no kernel anchors")
        if bundle_source is not None and f["codeText"] != bundle_source:
            problems.append("the emitted code on the page is not what `rnnc compile --target cpu` writes")
        if streams is not None and (not f["lanes"] or f["lanes"][0] != streams):
            problems.append("expected %d stream lanes in the forward timeline, got %s" % (streams, f["lanes"]))
        if name == "escape":
            for text in ("<script>alert('rnnc')</script>", "a < b && c > d", '"quoted"'):
                if text not in f["text"]:
                    problems.append("the comment %r is not shown as text" % text)
        summary = "%d anchor links, %d graph nodes (%d linked), %d kernels" % (
            f["hrefs"], f["nodes"], f["nodeLinks"], f["kernels"])
        return problems, shots, summary
    finally:
        browser.send("Target.closeTarget", {"targetId": target})


def compiled_source(rnnc, src, extra, out_dir):
    """The .cpp `rnnc compile --target cpu` writes for `src` (None if it fails)."""
    with tempfile.TemporaryDirectory(dir=out_dir) as tmp:
        p = subprocess.run([rnnc, "compile", src, "--target", "cpu", "-o", tmp] + extra,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
        sources = [f for f in os.listdir(tmp) if f.endswith(".cpp")]
        if p.returncode != 0 or len(sources) != 1:
            return None
        with open(os.path.join(tmp, sources[0]), encoding="utf-8", errors="replace") as fh:
            return fh.read()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rnnc", required=True)
    ap.add_argument("--samples", default=os.path.join(HERE, "..", "..", "samples"))
    ap.add_argument("--out", default="html-test")
    ap.add_argument("-k", default="")
    args = ap.parse_args()

    exe = find_browser()
    if not exe:
        print("SKIP: no chromium on PATH (tools/install-deps.sh installs it)")
        return 77
    if not (os.environ.get("RNNC_DOT") or shutil.which("dot")):
        print("SKIP: no Graphviz dot on PATH (tools/install-deps.sh installs graphviz)")
        return 77
    os.makedirs(args.out, exist_ok=True)
    profile = tempfile.mkdtemp(prefix="rnnc-html-chromium-")
    browser = None
    failed = 0
    try:
        browser = Browser(exe, profile)
        browser.send("Target.setDiscoverTargets", {"discover": False})
        for name, where, extra, streams in CASES:
            if args.k not in name:
                continue
            base, rel = where.split(":", 1)
            src = os.path.normpath(os.path.join(args.samples if base == "samples" else HERE, rel))
            page = os.path.join(args.out, name + ".html")
            if os.path.exists(page):
                os.remove(page)
            cmd = [args.rnnc, "show", src, "--html", "-o", page] + extra
            try:
                p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300)
            except subprocess.TimeoutExpired:
                print("FAIL %s: rnnc took more than 300 s" % name)
                failed += 1
                continue
            if p.returncode != 0 or not os.path.exists(page):
                print("FAIL %s: %s exited %d\n%s" % (name, " ".join(cmd), p.returncode, p.stdout))
                failed += 1
                continue
            source = compiled_source(args.rnnc, src, extra, args.out)
            try:
                problems, shots, summary = check_page(browser, page, args.out, name, streams, source)
            except Fail as e:
                problems, shots, summary = [str(e)], [], ""
            if source is None:
                problems.append("rnnc compile --target cpu failed, so the page's code was not compared")
            if problems:
                failed += 1
                print("FAIL %s (%s):\n  %s" % (name, page, "\n  ".join(problems)))
            else:
                print("PASS %s: %s" % (name, summary))
            for s in shots:
                print("  screenshot: %s" % os.path.abspath(s))
    except Fail as e:
        print("FAIL: %s" % e)
        failed += 1
    finally:
        if browser:
            browser.close()
        shutil.rmtree(profile, ignore_errors=True)
    print("%d failed" % failed)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
