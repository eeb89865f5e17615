"""What the decode-attention tests share (the CPU numerics tests, the no-host-sync test and the
GPU test file): a scattered paged cache, the bf16-output check against a float64 reference and
the check of the DSA indexer's top-k selection."""

from __future__ import annotations

import torch


def scattered_pages(
    g: torch.Generator,
    pool: int,
    page: int,
    entry: tuple[int, ...],
    dtype: torch.dtype,
    rows: int,
    cols: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """A random cache of `pool` pages of `page` entries shaped `entry` (fp8 values x4, into the
    e4m3 range; the tests' dequant scales bring them back) and a [rows, cols] int32 block table
    of distinct pages scattered over the pool."""
    cache = torch.randn(pool, page, *entry, generator=g)
    cache = (cache * 4).to(dtype) if dtype == torch.float8_e4m3fn else cache.to(dtype)
    bt = torch.randperm(pool, generator=g)[: rows * cols].view(rows, cols)
    return cache, bt.to(torch.int32)


def assert_bf16_close(out: torch.Tensor, ref: torch.Tensor, note: str = "") -> None:
    """Every output written (the NaN poison is gone) and within one bf16 ulp of the reference:
    the kernels' math is fp32 on exactly the bf16/fp8 values the reference reads, so the bf16
    output rounding dominates (the interpreter's fp32->bf16 store truncates: 2**-7 of the
    largest value; RNE on a GPU gives half that), plus fp32 accumulation slack."""
    where = f" ({note})" if note else ""
    assert not torch.isnan(out).any(), f"poisoned (NaN) output elements were not written{where}"
    ref = ref.to(out.device)
    tol = 2.0**-7 * ref.abs().max().item() + 1e-4
    err = (out.double() - ref).abs().max().item()
    assert err <= tol, f"max abs err {err:.3e} > {tol:.3e}{where}"


def assert_topk_selection(
    idx: torch.Tensor, ref: torch.Tensor, lens: list[int], top_k: int, slack: float, note: str = ""
) -> None:
    """Each row of `idx` lists min(top_k, n) distinct positions, then -1s; no position left out
    scores above the lowest chosen one by more than `slack` (the kernel selects by its own
    scores, so near-ties may swap within their tolerance)."""
    for b, n in enumerate(lens):
        chosen = idx[b][idx[b] >= 0].long()
        assert chosen.numel() == min(top_k, n) and chosen.unique().numel() == chosen.numel()
        assert (idx[b, chosen.numel() :] == -1).all()
        rest = torch.ones(n, dtype=torch.bool)
        rest[chosen] = False
        if rest.any():
            assert ref[b, chosen].min() >= ref[b, :n][rest].max() - slack, note


MLA_LAUNCH_KEYS = ("BLOCK_H", "BLOCK_N", "KEYS_ON_M", "PREFETCH", "SPARSE")


def record_mla_launches(monkeypatch) -> list[dict]:
    """The tile constexprs and grid of each MLA / DSA decode launch, appended as mla_decode
    launches them (the kernel still runs): a tile the reference cannot tell apart shows here."""
    import importlib

    # The module: the package exports the function of the same name.
    mla = importlib.import_module("sgl_kernel_rocm.attention.mla_decode")
    seen: list[dict] = []
    kernel = mla._mla_decode_split_kernel

    class Recorder:
        def __getitem__(self, grid):
            def launch(*args, **kwargs):
                seen.append({k: kwargs.get(k) for k in MLA_LAUNCH_KEYS} | {"grid": tuple(grid)})
                return kernel[grid](*args, **kwargs)

            return launch

    monkeypatch.setattr(mla, "_mla_decode_split_kernel", Recorder())
    return seen
