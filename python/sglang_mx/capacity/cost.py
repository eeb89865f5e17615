"""Cost per token: tok/s per node and per GPU, $/M output and total tokens from $/GPU-hour, and a
price sheet (prompt / cache-read / completion) priced separately to give revenue and margin."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class PriceSheet:
    """USD per million tokens a buyer pays; cached prompt tokens at the cache-read price."""

    prompt: float
    completion: float
    cache_read: float


def usd_per_million(price_per_gpu_hour: float, gpus: int, tok_s: float) -> float:
    """InferenceX formula: $/GPU-h x GPUs / (tok/s x 3600) x 1e6."""
    if tok_s <= 0:
        return math.inf
    return price_per_gpu_hour * gpus / (tok_s * 3600.0) * 1e6


def cost_report(
    summary,
    price_per_gpu_hour: float,
    gpus: int,
    nodes: int = 1,
    prices: PriceSheet | None = None,
    price_source: str = "",
) -> dict:
    """Cost figures of one run summary (measure/summary.py's RunSummary, read by attribute:
    capacity stands below measure) on `gpus` GPUs over `nodes`.
    Goodput per dollar counts only the output tokens of requests that met every SLO;
    `price_source` (where $/GPU-h came from) is carried into the report beside it."""
    out_s, total_s, input_s = summary.output_tok_s, summary.total_tok_s, summary.input_tok_s
    hit = summary.hit_rate or 0.0
    cached_s = input_s * hit
    node_hour = price_per_gpu_hour * gpus
    report = {
        "gpus": gpus,
        "nodes": nodes,
        "price_per_gpu_hour": price_per_gpu_hour,
        "cluster_usd_per_hour": node_hour,
        "output_tok_s_per_node": out_s / nodes,
        "total_tok_s_per_node": total_s / nodes,
        "output_tok_s_per_gpu": out_s / gpus,
        "total_tok_s_per_gpu": total_s / gpus,
        "usd_per_m_output": usd_per_million(price_per_gpu_hour, gpus, out_s),
        "usd_per_m_total": usd_per_million(price_per_gpu_hour, gpus, total_s),
        "usd_per_m_uncached_total": usd_per_million(price_per_gpu_hour, gpus, total_s - cached_s),
        "output_tokens_per_usd": out_s * 3600.0 / node_hour if node_hour else math.inf,
        "price_source": price_source,
    }
    good_s = summary.goodput_output_tok_s
    if good_s is not None:
        report["goodput_output_tokens_per_usd"] = (
            good_s * 3600.0 / node_hour if node_hour else math.inf
        )
        report["usd_per_m_goodput_output"] = usd_per_million(price_per_gpu_hour, gpus, good_s)
        report["goodput_requests_per_usd"] = (
            summary.goodput_req_s * 3600.0 / node_hour if node_hour else math.inf
        )
    if prices is not None:
        revenue_per_s = (
            (input_s - cached_s) * prices.prompt
            + cached_s * prices.cache_read
            + out_s * prices.completion
        ) / 1e6
        revenue_h = revenue_per_s * 3600.0
        report.update(
            {
                "prices_usd_per_m": asdict(prices),
                "revenue_usd_per_hour": revenue_h,
                "cache_read_revenue_usd_per_hour": cached_s * prices.cache_read / 1e6 * 3600.0,
                "margin_usd_per_hour": revenue_h - node_hour,
                "gross_margin": (revenue_h - node_hour) / revenue_h if revenue_h else -math.inf,
            }
        )
    return report
