"""`sglang-mx bench verify --check CLAIM`: read a claim before any run (issue 45, item 5).

No endpoint is needed. Three readings, each a list of findings:

- **arithmetic**: what the claimed figure implies per request at the claimed rate (a throughput
  of output tokens / rate = output tokens per request, which the workload states), for the
  claim's own figure and for every published row it lists (`claimed.points`); the figure per
  node and per GPU; output, total and uncached-input totals from the workload's lengths; a
  stated $/M tokens against the InferenceX formula at the claim's own price.
- **price basis**: $/M tokens at the claim's price and at each sourced price in
  capacity/data/hardware.json; for a cost comparison (`compare:`), the price ratio the claimed
  cost ratio needs and the cost ratio at each sourced pair of prices, and whether price and
  performance are compared against the same hardware.
- **unstated**: what a buyer needs and the claim leaves out (engine version and flags,
  quantization, speculative acceptance and whether it was simulated, accuracy, SLO).

A finding is `inconsistent` (the claim contradicts itself or its sources: exit status 1), a
`caveat` (consistent, but not the figure it looks like: simulated acceptance, cached input in a
total), `unstated`, or a `note`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path

# A throughput may imply this much more per request than the workload states before the claim
# is called inconsistent: a finite Poisson run delivers a little more or less than rate x
# length, and a published figure is rounded.
ARITHMETIC_TOLERANCE = 0.05
TOKEN_FIGURES = ("output_tok_s", "total_tok_s", "input_tok_s", "goodput_output_tok_s")
UNSTATED_WORDS = ("", "?", "not stated", "unknown", "n/a")

INCONSISTENT, CAVEAT, UNSTATED, NOTE = "inconsistent", "caveat", "unstated", "note"


@dataclass(frozen=True)
class Finding:
    topic: str  # arithmetic | price | unstated
    level: str  # inconsistent | caveat | unstated | note
    text: str


def _unstated(value) -> bool:
    return value is None or (isinstance(value, str) and value.strip().lower() in UNSTATED_WORDS)


def _fmt(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"


def node_value(claim, value: float | None = None) -> float:
    """The claimed figure per node (a per-GPU figure times the claim's GPUs)."""
    v = claim.value if value is None else value
    return v * claim.hardware[1] if claim.per == "gpu" else v


def tokens_per_request(claim) -> dict[str, float] | None:
    """Mean input, output, total and uncached-total tokens per request of a length workload."""
    w = claim.raw["workload"]
    if "input_len" not in w or "output_len" not in w:
        return None
    spec = claim.spec()
    n_in, n_out = spec.input_len.mean, spec.output_len.mean
    cached = n_in * spec.hit_rate
    return {
        "input": n_in,
        "output": n_out,
        "total": n_in + n_out,
        "uncached_total": n_in - cached + n_out,
        "cached_input": cached,
    }


def _per_request_of(figure: str, per_req: dict[str, float]) -> float:
    return {
        "output_tok_s": per_req["output"],
        "goodput_output_tok_s": per_req["output"],
        "total_tok_s": per_req["total"],
        "input_tok_s": per_req["input"],
    }[figure]


def arithmetic(claim) -> tuple[list[Finding], dict]:
    """The claim's figures against each other and against its workload."""
    found: list[Finding] = []
    facts: dict = {}
    w, c = claim.raw["workload"], claim.raw["claimed"]
    gpus = claim.hardware[1]
    per_req = tokens_per_request(claim)
    figure = claim.figure
    if figure in TOKEN_FIGURES or figure == "request_throughput":
        node = node_value(claim)
        facts["per_node"], facts["per_gpu"] = node, node / gpus
        found.append(
            Finding(
                "arithmetic",
                NOTE,
                f"{figure}: {_fmt(node)} per node = {_fmt(node / gpus)} per GPU on {gpus} GPUs",
            )
        )
    rate = w.get("rate") if w.get("arrival") in ("poisson", "fixed-rate") else None
    points = [(float(p["rate"]), float(p["value"])) for p in c.get("points", [])]
    if rate and not any(math.isclose(r, rate) for r, _ in points):
        points.append((float(rate), claim.value))
    if figure == "request_throughput":
        for r, v in points:
            if node_value(claim, v) > r * (1 + ARITHMETIC_TOLERANCE):
                found.append(
                    Finding(
                        "arithmetic",
                        INCONSISTENT,
                        f"{_fmt(node_value(claim, v))} req/s served at an offered "
                        f"{r:g} req/s: more than was sent",
                    )
                )
    elif figure in TOKEN_FIGURES and per_req and points:
        expected = _per_request_of(figure, per_req)
        rows = []
        for r, v in sorted(points):
            implied = node_value(claim, v) / r
            excess = implied / expected - 1
            rows.append({"rate": r, "value": v, "tokens_per_request": implied, "excess": excess})
            text = (
                f"at {r:g} req/s, {_fmt(node_value(claim, v))} {figure} per node is "
                f"{_fmt(implied)} tokens per request; the workload's {figure[:-6]} tokens "
                f"per request are {_fmt(expected)} ({excess:+.1%})"
            )
            if excess > ARITHMETIC_TOLERANCE:
                found.append(
                    Finding(
                        "arithmetic",
                        INCONSISTENT,
                        text + ": more tokens than the offered load holds",
                    )
                )
            elif excess < -ARITHMETIC_TOLERANCE:
                found.append(
                    Finding(
                        "arithmetic",
                        NOTE,
                        text + ": below it (a ramp or drain "
                        "in the window, or requests that did not finish)",
                    )
                )
            else:
                found.append(Finding("arithmetic", NOTE, text + ": consistent"))
        facts["rows"] = rows
    elif figure in TOKEN_FIGURES and not per_req:
        found.append(
            Finding(
                "arithmetic",
                UNSTATED,
                (
                    f"the workload is {w['public_trace']} (the claim can be read, not run here); "
                    if w.get("public_trace")
                    else ""
                )
                + "the workload's lengths are not stated: the figure cannot be checked against "
                "the offered load",
            )
        )
    if figure in TOKEN_FIGURES and per_req:
        node = node_value(claim)
        share = {k: per_req[k] / _per_request_of(figure, per_req) for k in per_req}
        facts["totals_per_node"] = {k: node * s for k, s in share.items()}
        t = facts["totals_per_node"]
        found.append(
            Finding(
                "arithmetic",
                NOTE,
                f"per node that is {_fmt(t['output'])} output, {_fmt(t['total'])} "
                f"total and {_fmt(t['uncached_total'])} uncached (computed) tokens/s; "
                f"{_fmt(t['cached_input'])} tokens/s of the input are prefix-cache "
                "hits",
            )
        )
    if c.get("includes_cached_input") or (
        figure in ("total_tok_s", "input_tok_s") and per_req and per_req["cached_input"] > 0
    ):
        found.append(
            Finding(
                "arithmetic",
                CAVEAT,
                f"{figure} counts cached input tokens, which are read from the "
                "prefix cache rather than computed: compare it, and a cost per "
                "token from it, only with totals counted the same way",
            )
        )
    usd = c.get("usd_per_m_tokens")
    if usd is not None and figure in TOKEN_FIGURES:
        from sglang_mx.capacity.cost import usd_per_million

        price = float(claim.raw["price"]["usd_per_gpu_hour"])
        formula = usd_per_million(price, gpus, node_value(claim))
        facts["usd_per_m_formula"] = formula
        off = usd / formula - 1
        level = INCONSISTENT if abs(off) > ARITHMETIC_TOLERANCE else NOTE
        found.append(
            Finding(
                "arithmetic",
                level,
                f"stated ${usd:g}/M tokens; ${price:g}/GPU-h x {gpus} GPUs / "
                f"({_fmt(node_value(claim))} tok/s x 3600) x 1e6 = ${formula:.3g}/M "
                f"({off:+.1%})",
            )
        )
    return found, facts


def sourced_prices(hardware: str) -> list[tuple[float, str]]:
    """($/GPU-h, source) for `hardware` from capacity/data/hardware.json; [] when unknown."""
    from sglang_mx.capacity.hardware import get_hardware

    try:
        hw = get_hardware(hardware)
    except KeyError:
        return []
    return [(hw.price_per_gpu_hour, f"data/hardware.json {hw.name}: {hw.price_source}")]


def _price_sources(claim) -> dict[str, tuple[float, str]]:
    """The claim's own $/GPU-h and the hardware table's, by kind: a comparison pairs like with
    like (the claim's price with the compared claim's, the table's with the table's)."""
    p = claim.raw["price"]
    out = {"claim": (float(p["usd_per_gpu_hour"]), f"the claim's: {p['source']} ({p['date']})")}
    for price, source in sourced_prices(claim.hardware[0]):
        out["table"] = (price, source)
    return out


def _price_options(claim) -> list[tuple[float, str]]:
    """Each distinct sourced $/GPU-h of the claim's hardware, the claim's own first."""
    out: list[tuple[float, str]] = []
    for price, source in _price_sources(claim).values():
        if not any(math.isclose(price, seen) for seen, _ in out):
            out.append((price, source))
    return out


def price_basis(claim, compared=None) -> tuple[list[Finding], dict]:
    """$/M tokens at every sourced price; for a cost comparison the price ratio it needs."""
    from sglang_mx.capacity.cost import usd_per_million

    found: list[Finding] = []
    facts: dict = {"own": []}
    if claim.figure not in TOKEN_FIGURES:
        return [
            Finding(
                "price",
                NOTE,
                f"{claim.figure} is not a token throughput: no cost per token follows from it",
            )
        ], facts
    gpus, node = claim.hardware[1], node_value(claim)
    for price, source in _price_options(claim):
        cost = usd_per_million(price, gpus, node)
        facts["own"].append({"usd_per_gpu_hour": price, "source": source, "usd_per_m": cost})
        found.append(
            Finding(
                "price",
                NOTE,
                f"${cost:.3g} per M {claim.figure[:-6]} tokens at ${price:g}/GPU-h ({source})",
            )
        )
    cmp = claim.raw.get("compare")
    if not cmp or compared is None:
        return found, facts
    name, other = claim.hardware[0], compared.hardware[0]
    if compared.figure != claim.figure:
        found.append(
            Finding(
                "price",
                INCONSISTENT,
                f"compared with {compared.id}, which claims {compared.figure}, not {claim.figure}",
            )
        )
        return found, facts
    if tokens_per_request(compared) != tokens_per_request(claim):
        found.append(
            Finding("price", INCONSISTENT, f"compared with {compared.id}, whose workload differs")
        )
    mine, theirs = node / gpus, node_value(compared) / compared.hardware[1]  # per GPU
    perf = mine / theirs
    limit = float(cmp["cost_ratio_at_most"])
    needed = (1 / perf) / limit  # price_other / price_mine the claimed cost ratio needs
    facts["compare"] = {
        "claim": compared.id,
        "perf_ratio_per_gpu": perf,
        "cost_ratio_claimed_at_most": limit,
        "price_ratio_needed": needed,
        "at_prices": [],
    }
    found.append(
        Finding(
            "price",
            NOTE,
            f"per GPU {name} does {perf:.3g}x the {claim.figure} of {other} "
            f"({_fmt(mine)} vs {_fmt(theirs)}); a cost per token at most {limit:g}x "
            f"{other}'s needs {other} GPU-hours to cost at least {needed:.3g}x "
            f"{name} GPU-hours",
        )
    )
    mine_src, other_src = _price_sources(claim), _price_sources(compared)
    pairs: list[tuple[float, str, float, str]] = []
    for kind in ("claim", "table"):
        if kind in mine_src and kind in other_src:
            pair = (*mine_src[kind], *other_src[kind])
            if not any(math.isclose(pair[0], q[0]) and math.isclose(pair[2], q[2]) for q in pairs):
                pairs.append(pair)
    supported = False
    for p_mine, s_mine, p_other, s_other in pairs:
        ratio = (p_mine / p_other) / perf
        supported |= ratio <= limit
        facts["compare"]["at_prices"].append(
            {
                "price": p_mine,
                "source": s_mine,
                "other_price": p_other,
                "other_source": s_other,
                "cost_ratio": ratio,
            }
        )
        cheaper = f" ({1 - ratio:.0%} cheaper)" if ratio < 1 else ""
        found.append(
            Finding(
                "price",
                NOTE,
                f"at ${p_mine:g} ({s_mine}) vs ${p_other:g} ({s_other}) per GPU-h "
                f"the cost per token is {ratio:.3g}x {other}'s{cheaper}",
            )
        )
    if not supported:
        found.append(
            Finding(
                "price",
                INCONSISTENT,
                f"the claimed cost ratio (at most {limit:g}x {other}'s) holds at none "
                f"of the sourced prices: it needs {other} at {needed:.3g}x {name}'s "
                "price per GPU-hour",
            )
        )
    basis = cmp.get("price_compared_with")
    if basis and basis.lower() != other.lower():
        found.append(
            Finding(
                "price",
                INCONSISTENT,
                f"the price is compared against {basis} while the performance is "
                f"compared against {other}",
            )
        )
    return found, facts


def unstated(claim) -> list[Finding]:
    """What a buyer needs to weigh the claim and the claim does not say."""
    raw, out = claim.raw, []

    def missing(what: str, why: str) -> None:
        out.append(Finding("unstated", UNSTATED, f"{what} not stated: {why}"))

    engine, model = raw["engine"], raw["model"]
    if _unstated(engine.get("name")):
        missing("engine", "the serving stack behind the figure is unknown")
    if _unstated(engine.get("version")):
        missing("engine version", "figures move between releases of the same engine")
    if _unstated(engine.get("flags")):
        missing("engine flags", "parallelism, batch limits and KV dtype swing throughput")
    if _unstated(model.get("quantization")):
        missing("quantization", "the precision served decides both speed and accuracy")
    spec = raw.get("speculative")
    if spec is None:
        missing(
            "speculative decoding",
            "whether MTP/EAGLE ran, its accept length, and whether "
            "acceptance was real or simulated (SGLANG_SIMULATE_ACC_LEN)",
        )
    elif spec.get("simulated"):
        length = spec.get("accept_length")
        at = f" at accept length {length:g}" if length else ""
        out.append(
            Finding(
                "unstated",
                CAVEAT,
                f"acceptance was simulated{at} (SGLANG_SIMULATE_ACC_LEN): the "
                "throughput is not one a real draft delivered; a run judges it "
                "against the acceptance its draft really reaches",
            )
        )
    elif "accept_length" not in spec:
        missing("accept length", "speculative decoding ran, but how many drafts landed is unknown")
    if raw.get("accuracy") is None:
        missing(
            "accuracy",
            "a fast endpoint can still serve a broken model (e.g. GSM8K 0.32 on "
            "GLM-5.1-MXFP4, sglang #25742)",
        )
    if not raw.get("slo"):
        missing("SLO", "a throughput without a latency bound can be bought with unusable latency")
    return out


def load_compared(claim):
    """The claim a `compare:` section names (a file beside the claim), or None."""
    from sglang_mx.bench.claims.claim_file import load_claim

    cmp = claim.raw.get("compare")
    return load_claim(Path(claim.path).parent / cmp["claim"]) if cmp else None


def check(claim) -> dict:
    """Every finding and the figures behind them, as one JSON-ready record."""
    compared = load_compared(claim)
    arith, arith_facts = arithmetic(claim)
    price, price_facts = price_basis(claim, compared)
    findings = arith + price + unstated(claim)
    return {
        "claim": claim.id,
        "claim_text": claim.describe(),
        "compared_with": compared.id if compared else None,
        "consistent": not any(f.level == INCONSISTENT for f in findings),
        "findings": [asdict(f) for f in findings],
        "arithmetic": arith_facts,
        "price": price_facts,
    }


def render(record: dict) -> str:
    """The check as text: verdict line first, then each topic's findings."""
    head = "consistent" if record["consistent"] else "INCONSISTENT"
    n_bad = sum(f["level"] == INCONSISTENT for f in record["findings"])
    lines = [
        f"claim {record['claim']}: {record['claim_text']}",
        f"check: {head}" + (f" ({n_bad} of the findings below)" if n_bad else ""),
    ]
    titles = {"arithmetic": "Arithmetic", "price": "Price basis", "unstated": "Unstated"}
    for topic, title in titles.items():
        rows = [f for f in record["findings"] if f["topic"] == topic]
        if rows:
            lines += ["", f"{title}:"]
            marks = {INCONSISTENT: "!!", CAVEAT: "!?", UNSTATED: "??", NOTE: "  "}
            lines += [f"{marks[f['level']]} {f['text']}" for f in rows]
    return "\n".join(lines)
