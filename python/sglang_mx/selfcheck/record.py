"""The self-check record: each serving process writes one JSON file (SGLANG_MX_SELF_CHECK_DIR,
`<host>-<pid>.json`, rewritten whole after each check) listing its results; `sglang-mx info`
reads the files of live processes on this host, or the newest one when none is running."""

from __future__ import annotations

import json
import os
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sglang_mx.env import ENV

KEEP_FILES = 32  # files of exited processes beyond this many are removed when one is written


@dataclass(frozen=True)
class CheckResult:
    op: str  # e.g. "moe", "mla_decode", "dsa_sparse_decode", "dsa_indexer", "gqa_decode"
    shape: str  # the shapes it ran at (describe() of the case's shape)
    device: str
    passed: bool
    error: str  # why it was declined ("" when passed)
    max_err: float
    tol: float
    ms: float  # wall time of the check, build included
    serves: str  # what serves the op in this process after the check

    @property
    def key(self) -> str:
        return f"{self.op} [{self.shape}]"


_results: list[CheckResult] = []


def path_of_this_process() -> Path:
    return Path(ENV.self_check_dir) / f"{socket.gethostname()}-{os.getpid()}.json"


def add(result: CheckResult) -> Path:
    """Append `result` to this process's record and rewrite its file (atomically)."""
    _results.append(result)
    path = path_of_this_process()
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "results": [asdict(r) for r in _results],
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=1))
    tmp.replace(path)
    _prune(path.parent)
    return path


def _alive(record: dict[str, Any]) -> bool:
    if record.get("host") != socket.gethostname():
        return False
    try:
        os.kill(int(record["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's live process
        return True
    return True


def _prune(folder: Path) -> None:
    files = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in files[KEEP_FILES:]:
        try:
            if not _alive(json.loads(old.read_text())):
                old.unlink()
        except (OSError, ValueError, KeyError):
            continue


def load() -> list[dict[str, Any]]:
    """The records `info` reports: those of live processes on this host, else the newest one;
    each with its `path` and `alive`."""
    folder = Path(ENV.self_check_dir)
    records = []
    for p in sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True):
        try:
            body = json.loads(p.read_text())
        except (OSError, ValueError):
            continue
        records.append(body | {"path": str(p), "alive": _alive(body)})
    live = [r for r in records if r["alive"]]
    return live or records[:1]


def summary() -> dict[str, str]:
    """`sglang-mx info`'s self-check rows: the setting, which records, then one row per op and
    shape (passed on how many processes, or declined, why, and what serves instead)."""
    out = {"SGLANG_MX_SELF_CHECK": f"{ENV.self_check} (record: {ENV.self_check_dir})"}
    records = load()
    if not records:
        out["record"] = "none yet: a serving process writes one when it checks a kernel"
        return out
    procs = ", ".join(
        f"pid {r['pid']} {'running' if r['alive'] else 'exited'} ({r['written']})" for r in records
    )
    out["record"] = procs
    by_key: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        for res in r["results"]:
            by_key.setdefault(f"{res['op']} [{res['shape']}]", []).append(res | {"pid": r["pid"]})
    for key, results in by_key.items():
        bad = [r for r in results if not r["passed"]]
        if bad:
            r = bad[0]
            pids = ",".join(str(b["pid"]) for b in bad)
            out[key] = f"DECLINED (pid {pids}, {r['device']}): {r['error']}; {r['serves']} serves"
        else:
            worst = max(results, key=lambda r: r["max_err"] / r["tol"] if r["tol"] else 0.0)
            out[key] = (
                f"passed on {len(results)} process(es), {worst['device']}: max err "
                f"{worst['max_err']:.2e} <= {worst['tol']:.2e}, {worst['ms']:.0f} ms; "
                f"{worst['serves']} serves"
            )
    return out
