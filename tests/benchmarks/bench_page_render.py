"""The page's live Markdown render (run on demand, never in the unit suite)::

    python -m tests.benchmarks.bench_page_render [--rounds 20]

While an answer streams, the page renders it at most once a frame (``static/render.js``
``streamAnswer``: markdown-it, DOMPurify, code highlighting, citation links, for the answer's
last top-level block only); once done it renders all of it once (``renderAnswer``). This times
both in headless Chromium for answers of 2,000 to 32,000 characters (the stored cap) of prose,
citations, lists and shell code blocks, streamed 40 characters a frame. Target: a streaming
frame's p95 at 32,000 characters stays under one 60 Hz frame (16.7 ms), so a long answer
still streams smoothly; the final render is reported for information.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

STATIC = Path(__file__).resolve().parents[2] / "Plugin" / "varaverk_dock" / "static"
SCRIPTS = ["vendor/markdown-it.min.js", "vendor/purify.min.js", "vendor/highlight.min.js",
           "render.js"]
CHROMIUM = "/usr/bin/chromium"
FRAME_MS = 1000 / 60

PIECE = ("## Mirror\n\nThe cap is `MIRROR_MAX_DELETE_PCT` "
         "[Backup/rsync_mirror.sh › CONFIGURATION › MIRROR_MAX_DELETE_PCT].\n\n"
         "- first, check the share\n- then run it\n\n"
         "```bash\nrsync --archive --delete /srv/photos/ backup@harbor02:/mnt/mirror/\n"
         "echo done\n```\n\n> Keep a copy.\n\n")

STEP = 40  # characters a frame

TIMES = """([text, rounds, step]) => {
  const R = window.VaraverkRender;
  const target = document.createElement("div");
  document.body.appendChild(target);
  const ctx = { sources: [{ citation: "Backup/rsync_mirror.sh › CONFIGURATION › " +
                            "MIRROR_MAX_DELETE_PCT", path: "Backup/rsync_mirror.sh" }] };
  const frames = [];
  for (let end = step; end < text.length + step; end += step) {
    const t0 = performance.now();
    R.streamAnswer(target, text.slice(0, end), ctx);
    frames.push(performance.now() - t0);
  }
  const streamed = target.innerHTML;
  const full = [];
  for (let i = 0; i < rounds; i++) {
    const t0 = performance.now();
    R.renderAnswer(target, text, ctx);
    full.push(performance.now() - t0);
  }
  return { frames, full, same: streamed === target.innerHTML };
}"""


def main() -> int:
    from playwright.sync_api import sync_playwright

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    worst_p95 = 0.0
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        page = browser.new_page()
        page.set_content("<!doctype html><html><body></body></html>")
        for script in SCRIPTS:
            page.add_script_tag(path=str(STATIC / script))
        print(f"{'chars':>7} {'frame p50':>10} {'frame p95':>10} {'frame max':>10} "
              f"{'final p50 ms':>13} {'same':>5}")
        for chars in (2_000, 8_000, 16_000, 32_000):
            text = (PIECE * (chars // len(PIECE) + 1))[:chars]
            r = page.evaluate(TIMES, [text, args.rounds, STEP])
            frames = sorted(r["frames"])
            p95 = frames[int(len(frames) * 0.95)]
            print(f"{chars:>7} {statistics.median(frames):>10.2f} {p95:>10.2f} "
                  f"{frames[-1]:>10.2f} {statistics.median(r['full'][2:]):>13.2f} "
                  f"{str(r['same']):>5}")
            worst_p95 = p95
        browser.close()
    verdict = "ok" if worst_p95 <= FRAME_MS else "OVER"
    print(f"32,000 characters: streaming frame p95 {worst_p95:.2f} ms, target "
          f"{FRAME_MS:.1f} ms: {verdict}")
    return 0 if worst_p95 <= FRAME_MS else 1


if __name__ == "__main__":
    raise SystemExit(main())
