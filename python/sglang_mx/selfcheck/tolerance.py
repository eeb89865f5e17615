"""The self-check's bounds: the ones the kernel tests state, with their reasons
(test/sgl_kernel_rocm/attention_support.assert_bf16_close, moe_support.assert_moe_close,
test_attention_mla.test_dsa_indexer_scores_and_topk), here as verdicts instead of asserts."""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ToleranceVerdict:
    ok: bool
    max_err: float  # the worst |out - ref| (over the bound's own scale; see each check)
    tol: float  # the bound at that element
    detail: str = ""  # what failed, when not ok


def bf16_close(out: torch.Tensor, ref: torch.Tensor) -> ToleranceVerdict:
    """Decode attention: every output written (NaN poison gone) and within one bf16 ulp of the
    float64 reference, 2**-7 of the largest value (the kernels' math is fp32 on exactly the
    values the reference reads, so the bf16 output rounding dominates; the interpreter truncates,
    RNE on a GPU gives half that) plus 1e-4 of fp32 accumulation slack."""
    ref = ref.to(out.device).double()
    tol = 2.0**-7 * ref.abs().max().item() + 1e-4
    if torch.isnan(out).any():
        n = int(torch.isnan(out).sum())
        return ToleranceVerdict(False, float("nan"), tol, f"{n} output elements unwritten or NaN")
    err = (out.double() - ref).abs().max().item()
    if err > tol:
        return ToleranceVerdict(False, err, tol, f"max abs err {err:.3e} > {tol:.3e}")
    return ToleranceVerdict(True, err, tol)


def moe_close(out: torch.Tensor, ref: torch.Tensor, top_k: int) -> ToleranceVerdict:
    """Fused MoE (no shared output): per element (k + 1) * 2**-8 * max|ref| + 2**-7 * |ref| --
    the k weighted expert rows each rounded to bf16 in the per-slot buffer (2**-9 of their size,
    which the output bounds up to cancellation: one extra term of slack), and the output rounded
    once on each side (one bf16 ulp, 2**-7 of the element)."""
    out, ref = out.float(), ref.float().to(out.device)
    if not torch.isfinite(out).all():
        n = int((~torch.isfinite(out)).sum())
        return ToleranceVerdict(False, float("nan"), 0.0, f"{n} output elements non-finite")
    tol = (top_k + 1) * 2.0**-8 * ref.abs().max().item() + 2.0**-7 * ref.abs()
    diff = (out - ref).abs()
    worst = int((diff - tol).argmax())
    err, bound = diff.flatten()[worst].item(), tol.flatten()[worst].item()
    bad = int((diff > tol).sum())
    if bad:
        row, col = divmod(worst, ref.shape[-1])
        return ToleranceVerdict(
            False, err, bound, f"{bad} elements beyond the bound; worst [{row}, {col}]: "
            f"{err:.3e} > {bound:.3e}"
        )  # fmt: skip
    return ToleranceVerdict(True, err, bound)


# fp32 dot over 128 dims and a head sum of exact bf16/fp8 products: ~1e-6 relative.
SCORE_ATOL, SCORE_RTOL = 1e-4, 1e-5


def scores_close(scores: torch.Tensor, ref: torch.Tensor) -> ToleranceVerdict:
    """DSA indexer scores [B, L] vs the float64 reference: -inf exactly where the reference has
    it (past each length), and |s - ref| <= 1e-4 + 1e-5 |ref| elsewhere."""
    scores, ref = scores.double(), ref.to(scores.device).double()
    if scores.shape != ref.shape:
        return ToleranceVerdict(
            False, float("nan"), 0.0, f"scores {tuple(scores.shape)} != {ref.shape}"
        )
    if not torch.equal(torch.isinf(scores), torch.isinf(ref)):
        return ToleranceVerdict(False, float("nan"), 0.0, "-inf padding differs from the reference")
    fin = torch.isfinite(ref)
    if torch.isnan(scores[fin]).any():
        return ToleranceVerdict(False, float("nan"), 0.0, "NaN scores")
    diff = (scores[fin] - ref[fin]).abs()
    tol = SCORE_ATOL + SCORE_RTOL * ref[fin].abs()
    if diff.numel() == 0:
        return ToleranceVerdict(True, 0.0, SCORE_ATOL)
    worst = int((diff - tol).argmax())
    err, bound = diff[worst].item(), tol[worst].item()
    if err > bound:
        return ToleranceVerdict(False, err, bound, f"score err {err:.3e} > {bound:.3e}")
    return ToleranceVerdict(True, err, bound)


def topk_selection(
    idx: torch.Tensor, ref: torch.Tensor, lens: list[int], top_k: int
) -> ToleranceVerdict:
    """Each row lists min(top_k, n) distinct positions, then -1s, and no position left out
    scores above the lowest chosen one by more than twice the score tolerance (the kernel
    selects by its own scores, so near-ties may swap within it)."""
    idx, ref = idx.cpu(), ref.cpu().double()
    worst, worst_slack = 0.0, 0.0
    for b, n in enumerate(lens):
        chosen = idx[b][idx[b] >= 0].long()
        want = min(top_k, n)
        if chosen.numel() != want or chosen.unique().numel() != want or chosen.max() >= n:
            why = f"row {b}: {chosen.numel()} valid distinct positions below {n} expected {want}"
            return ToleranceVerdict(False, float("nan"), 0.0, why)
        if not (idx[b, want:] == -1).all():
            return ToleranceVerdict(
                False, float("nan"), 0.0, f"row {b}: no -1 padding after {want}"
            )
        rest = torch.ones(n, dtype=torch.bool)
        rest[chosen] = False
        if rest.any():
            low, high = ref[b, chosen].min().item(), ref[b, :n][rest].max().item()
            slack = 2 * (SCORE_ATOL + SCORE_RTOL * abs(low))
            if high - low > worst - worst_slack:
                worst, worst_slack = high - low, slack
            if high > low + slack:
                return ToleranceVerdict(False, high - low, slack, f"row {b}: a left-out key scores "
                               f"{high:.6g} above the lowest chosen {low:.6g}")  # fmt: skip
    return ToleranceVerdict(True, max(worst, 0.0), worst_slack)
