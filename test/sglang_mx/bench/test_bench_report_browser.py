"""The report a buyer reads (issue 45 item 8), rendered by a real headless browser: `bench verify`
against the fake server writes report.html; Debian's chromium (installed by `make setup`)
screenshots it and tesseract reads the screenshot. The verdict is the first thing on the page
and its reasons, the acceptance gate and the claim's own arithmetic are on it, as pixels."""

from __future__ import annotations

import argparse
import shutil
import subprocess

from bench_processes import fake_server_process
from claim_files import write_claim
from sglang_mx.bench.cli import verbs as bench_cli


def _tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is missing: `make setup` installs it (Debian chromium, tesseract-ocr)"
    return path


def _screenshot(html, png) -> None:
    subprocess.run(
        [_tool("chromium"), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--window-size=1100,1500", f"--screenshot={png}", html.as_uri()],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip


def _read(png) -> str:
    out = subprocess.run([_tool("tesseract"), str(png), "stdout"], check=True,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    return " ".join(out.stdout.split())


def test_the_rendered_report_shows_the_verdict_first(tmp_path, tiny_tokenizer):
    tiny_tokenizer.save(str(tmp_path / "tokenizer.json"))
    speculative = {"algorithm": "EAGLE", "accept_length": 2.0, "source": "test"}
    claim = write_claim(tmp_path, 1.0, speculative=speculative)
    out = tmp_path / "out"
    parser = argparse.ArgumentParser()
    bench_cli.register(parser.add_subparsers())
    with fake_server_process() as url:  # the fake runs no draft: the acceptance gate refutes
        args = parser.parse_args(["bench", "verify", claim, "--url", url, "--tokenizer",
                                  str(tmp_path), "--hardware", "MI355X", "--repeats", "2",
                                  "--warmup", "0", "--no-progress", "-o", str(out)])  # fmt: skip
        assert args.func(args) == 1
    png = tmp_path / "report.png"
    _screenshot(out / "report.html", png)
    assert png.stat().st_size > 10_000
    text = _read(png)
    first = text.find("Verdict: NOT REPRODUCED")
    assert first >= 0, text[:600]
    # The verdict comes before everything but the run's header (date, hardware, versions)
    for later in ("Reasons", "Accuracy and acceptance", "arithmetic and price"):
        at = text.find(later)
        assert at > first, (later, text[:1500])
    assert "draft is off" in text, text[:1500]
