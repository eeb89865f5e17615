"""Claim files: a vendor's (or anyone's) performance claim as data, for `bench verify`.

A claim is a YAML or JSON mapping (schema 1; every field is listed in SCHEMA and in
docs/benchmark.md, "Claim files"); unknown fields and bad values are refused, one line per field:

    schema: 1
    id: glm52-mxfp4-mi355x-8x-2626
    model: {name: zai-org/GLM-5.2, quantization: mxfp4}
    hardware: {name: MI355X, gpus: 8}
    engine: {name: sglang, version: "?", flags: "--tp 8 ..."}
    workload: {input_len: 20000, output_len: 1000, hit_rate: 0.6, prefix_groups: 8,
               num_requests: 240, arrival: poisson, rate: 2.4}
    slo: {ttft_s: 5.0, percentile: 95}
    price: {usd_per_gpu_hour: 1.48, source: InferenceX TCO, date: "2026-11-30"}
    claimed: {figure: output_tok_s, value: 2626, per: node, source: "..."}

`workload` may instead name a trace: `{trace: FILE, trace_format: mooncake}` (relative to the
claim file). `claimed.figure` is a figure of a run summary (summary.FIGURES; refused when the
claim is read if it is not one of FIGURES): a throughput (higher is better) or a latency
distribution's percentile such as `tpot_s.p50` (lower is better)."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from sglang_mx.bench.load.limits import BenchError
from sglang_mx.capacity.workload import LengthDist, WorkloadSpec
from sglang_mx.measure.metrics import PERCENTILES, Slo
from sglang_mx.measure.summary import check_figures

SCHEMA_VERSION = 1
THROUGHPUTS = (
    "output_tok_s",
    "total_tok_s",
    "input_tok_s",
    "request_throughput",
    "goodput_req_s",
    "goodput_output_tok_s",
)
LATENCIES = ("ttft_s", "tpot_s", "itl_s", "e2e_s")
PER_USER = "output_tok_s_per_user"
FIGURES = (
    *THROUGHPUTS,
    *(
        f"{m}.{s}"
        for m in (*LATENCIES, PER_USER)
        for s in ("mean", *(f"p{q}" for q in PERCENTILES))
    ),
)
check_figures(FIGURES, "claims.FIGURES")  # a figure a claim may name is a summary's (summary.py)
TOLERANCE = 0.10  # measured may fall this far short of the claim and still reproduce it


class ClaimError(BenchError):
    """A claim file that cannot be used; its message has one line per bad field."""


def _str(v) -> str | None:
    return None if isinstance(v, str) and v.strip() else "must be a non-empty string"


def _pos_num(v) -> str | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0
    return None if ok else f"must be a number above 0 (got {v!r})"


def _pos_int(v) -> str | None:
    ok = isinstance(v, int) and not isinstance(v, bool) and v >= 1
    return None if ok else f"must be a whole number >= 1 (got {v!r})"


def _length(v) -> str | None:
    try:
        LengthDist.parse(v)
    except (ValueError, TypeError):
        return f"must be N, uniform:LO:HI or normal:MEAN:STD (got {v!r})"
    return None


def _hit(v) -> str | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v < 1
    return None if ok else f"must be a share in [0, 1) (got {v!r})"


def _choice(*options):
    def check(v) -> str | None:
        return (
            None if v in options else f"must be one of {', '.join(map(str, options))} (got {v!r})"
        )

    return check


def _any(v) -> str | None:
    return None


def _bool(v) -> str | None:
    return None if isinstance(v, bool) else f"must be true or false (got {v!r})"


def _share(v) -> str | None:
    ok = isinstance(v, (int, float)) and not isinstance(v, bool) and 0 <= v <= 1
    return None if ok else f"must be a number in [0, 1] (got {v!r})"


def _points(v) -> str | None:
    """A published table's rows: [{rate: REQ_S, value: FIGURE}, ...]."""
    if not isinstance(v, list) or not v:
        return "must be a list of {rate, value} rows"
    for i, row in enumerate(v):
        bad = not isinstance(row, dict) or set(row) != {"rate", "value"}
        if bad or _pos_num(row["rate"]) or _pos_num(row["value"]):
            return f"row {i + 1} must be {{rate: N > 0, value: N > 0}} (got {row!r})"
    return None


# workload fields that are WorkloadSpec's (Claim.spec passes them on): field -> (required, check)
SPEC_FIELDS: dict[str, tuple[bool, object]] = {
    "input_len": (False, _length),
    "output_len": (False, _length),
    "hit_rate": (False, _hit),
    "prefix_groups": (False, _pos_int),
    "turns": (False, _pos_int),
    "num_requests": (False, _pos_int),
    "arrival": (False, _choice("poisson", "fixed-rate", "concurrency")),
    "rate": (False, _pos_num),
    "concurrency": (False, _pos_int),
    "seed": (False, _any),
}
# A cost comparison with another claim file beside this one (`bench verify --check`);
# price_compared_with: the hardware the price was compared against.
COMPARE = {"claim": (True, _str), "cost_ratio_at_most": (True, _pos_num),
           "price_compared_with": (False, _str), "source": (False, _str)}  # fmt: skip
# A draft the figure was measured with (`bench verify` holds it to the run's real acceptance).
SPECULATIVE = {"algorithm": (True, _str), "accept_length": (False, _pos_num),
               "simulated": (False, _bool), "source": (False, _str)}  # fmt: skip
# section -> field -> (required, check)
SCHEMA: dict[str, dict[str, tuple[bool, object]]] = {
    "": {
        "schema": (True, _choice(SCHEMA_VERSION)),
        "id": (True, _str),
        "title": (False, _str),
        "notes": (False, _str),
        "tolerance": (False, _pos_num),
    },
    "model": {"name": (True, _str), "quantization": (False, _str), "source": (False, _str)},
    "hardware": {"name": (True, _str), "gpus": (True, _pos_int), "node": (False, _str)},
    "engine": {"name": (True, _str), "version": (False, _any), "flags": (False, _str)},
    "workload": {
        **SPEC_FIELDS,
        "trace": (False, _str),
        "trace_format": (False, _str),
        # a public trace this project does not ship (AgentX): the claim can be checked, not run
        "public_trace": (False, _str),
        "notes": (False, _str),
    },
    "slo": {
        "ttft_s": (False, _pos_num),
        "tpot_s": (False, _pos_num),
        "itl_s": (False, _pos_num),
        "e2e_s": (False, _pos_num),
        "percentile": (False, _choice(*PERCENTILES)),
    },
    "price": {"usd_per_gpu_hour": (True, _pos_num), "source": (True, _str), "date": (True, _any)},
    "claimed": {
        "figure": (True, _choice(*FIGURES)),
        "value": (True, _pos_num),
        "per": (True, _choice("node", "gpu")),
        "source": (True, _str),
        "note": (False, _str),
        "points": (False, _points),  # the published table the figure comes from
        "includes_cached_input": (False, _bool),
        "usd_per_m_tokens": (False, _pos_num),  # a cost per token the claim states
    },
    "compare": COMPARE,
    "speculative": SPECULATIVE,
    "accuracy": {"task": (True, _str), "score": (True, _share), "source": (True, _str)},
    # bounds on agreement with a reference deployment (bench verify --reference)
    "agreement": {"top1_min": (True, _share), "kl_max": (False, _pos_num), "source": (True, _str)},
}
REQUIRED_SECTIONS = ("model", "hardware", "engine", "workload", "price", "claimed")


@dataclass(frozen=True)
class Claim:
    path: Path
    raw: dict

    @property
    def id(self) -> str:
        return self.raw["id"]

    @property
    def figure(self) -> str:
        return self.raw["claimed"]["figure"]

    @property
    def value(self) -> float:
        return float(self.raw["claimed"]["value"])

    @property
    def per(self) -> str:
        return self.raw["claimed"]["per"]

    @property
    def higher_is_better(self) -> bool:
        return self.figure in THROUGHPUTS or self.figure.startswith(PER_USER)

    @property
    def tolerance(self) -> float:
        return float(self.raw.get("tolerance", TOLERANCE))

    @property
    def hardware(self) -> tuple[str, int]:
        return self.raw["hardware"]["name"], int(self.raw["hardware"]["gpus"])

    @property
    def trace_path(self) -> Path | None:
        t = self.raw["workload"].get("trace")
        return (self.path.parent / t) if t else None

    def slo(self) -> Slo:
        """The claim's SLO; a claim that states none is judged on throughput alone (its TTFT
        gate is infinite, so no repeat can miss it)."""
        s = self.raw.get("slo") or {}
        ttft = float(s.get("ttft_s", math.inf))
        return Slo(
            ttft_p95_s=ttft,
            ttft_s=None if math.isinf(ttft) else ttft,
            tpot_s=s.get("tpot_s"),
            itl_s=s.get("itl_s"),
            e2e_s=s.get("e2e_s"),
            percentile=int(s.get("percentile", 95)),
        )

    def spec(self) -> WorkloadSpec:
        """The claimed workload (unused for a trace claim, whose file is the workload)."""
        w = {k: v for k, v in self.raw["workload"].items() if k in SPEC_FIELDS}
        for key in ("input_len", "output_len"):
            if key in w:
                w[key] = LengthDist.parse(w[key])
        w.setdefault("prime", True)
        return WorkloadSpec(name=f"claim:{self.id}", **w)

    def describe(self) -> str:
        hw, gpus = self.hardware
        c = self.raw["claimed"]
        return f"{c['value']:g} {c['figure']} per {c['per']} on {gpus}x {hw} ({c['source']})"


def _check_section(name: str, body, errors: list[str]) -> None:
    fields = SCHEMA[name]
    where = f"{name}." if name else ""
    if not isinstance(body, dict):
        errors.append(f"{name}: must be a mapping of fields (got {type(body).__name__})")
        return
    for key, value in body.items():
        if key in SCHEMA and not name:
            continue  # a section, checked on its own
        if key not in fields:
            errors.append(f"{where}{key}: unknown field; known: {', '.join(fields)}")
            continue
        problem = fields[key][1](value)
        if problem:
            errors.append(f"{where}{key}: {problem}")
    for key, (required, _) in fields.items():
        if required and key not in body:
            errors.append(f"{where}{key}: missing (required)")


def validate(raw) -> list[str]:
    """One message per bad field ([] when the claim is usable)."""
    if not isinstance(raw, dict):
        return [f"the claim must be a mapping of fields (got {type(raw).__name__})"]
    errors: list[str] = []
    _check_section("", raw, errors)
    for section in REQUIRED_SECTIONS:
        if section not in raw:
            errors.append(f"{section}: missing section (required)")
    for section in SCHEMA:
        if section and section in raw:
            _check_section(section, raw[section], errors)
    w = raw.get("workload")
    if isinstance(w, dict) and not errors:
        lengths = "input_len" in w and "output_len" in w
        if not (w.get("trace") or w.get("public_trace") or lengths):
            errors.append("workload: give input_len and output_len, or a trace file")
        if w.get("arrival") == "concurrency" and "concurrency" not in w:
            errors.append("workload.concurrency: missing (required with arrival: concurrency)")
        if w.get("arrival") in ("poisson", "fixed-rate") and "rate" not in w:
            errors.append(f"workload.rate: missing (required with arrival: {w['arrival']})")
    return errors


def parse_text(text: str, suffix: str):
    """YAML (any suffix but .json) or JSON; a syntax error is a ClaimError naming the line."""
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise ClaimError(f"not valid JSON at line {exc.lineno}: {exc.msg}") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark else ""
        raise ClaimError(f"not valid YAML{at}: {getattr(exc, 'problem', exc)}") from None


def load_claim(path: str | Path) -> Claim:
    path = Path(path)
    if not path.is_file():
        raise ClaimError(f"no claim file at {path}")
    try:
        raw = parse_text(path.read_text(), path.suffix.lower())
    except ClaimError as exc:
        raise ClaimError(f"{path}: {exc}") from None
    errors = validate(raw)
    if errors:
        raise ClaimError("\n".join(f"{path}: {e}" for e in errors))
    claim = Claim(path, raw)
    if claim.trace_path is not None and not claim.trace_path.is_file():
        raise ClaimError(f"{path}: workload.trace: no file at {claim.trace_path}")
    compared = raw.get("compare", {}).get("claim")
    if compared and not (path.parent / compared).is_file():
        raise ClaimError(f"{path}: compare.claim: no claim file at {path.parent / compared}")
    return claim
