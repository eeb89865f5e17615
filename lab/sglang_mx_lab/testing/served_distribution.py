"""A served model's full next-token distributions over a prompt, compared with a reference model's:
the KL / top-1 check the quantized-checkpoint serving tests share (GLM-4.5 and GLM-5 tiny models),
and the log lines that say which MXFP4 paths served.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import torch

# Source text in the style of the corpus (not copied from it), as one held-out sample.
HELD_OUT_TEXT = """def _check_arg_types(funcname, *args):
    hasstr = hasbytes = False
    for s in args:
        if isinstance(s, str):
            hasstr = True
        elif isinstance(s, bytes):
            hasbytes = True
        else:
            raise TypeError(f"{funcname}() argument must be str or bytes, not {type(s)}")
"""


def held_out_prompt_ids(model_dir: str | Path) -> list[int]:
    """HELD_OUT_TEXT twice, in the model's tokenizer, without special tokens."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(model_dir))
    return tok.encode(HELD_OUT_TEXT * 2, add_special_tokens=False)


@torch.no_grad()
def reference_logprobs(model, ids: list[int]) -> torch.Tensor:
    """log p(next | prefix) of a transformers model, float64, [T-1, V]."""
    logits = model(torch.tensor([ids])).logits[0].double()
    return torch.log_softmax(logits, -1)[:-1]


def greedy_generate(url: str, max_new_tokens: int, timeout: float = 600, **fields) -> dict:
    """One temperature-0 SGLang /generate call; `fields` are the rest of the body (text or
    input_ids, logprob options). A status other than 200 fails with the server's body."""
    body = {**fields, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0}}
    r = httpx.post(f"{url}/generate", json=body, timeout=timeout)
    assert r.status_code == 200, r.text
    return r.json()


def served_logprobs(url: str, ids: list[int], vocab: int) -> torch.Tensor:
    """The server's full next-token distributions over the prompt, [T-1, V]."""
    out = greedy_generate(
        url, 1, input_ids=ids, return_logprob=True, logprob_start_len=0, top_logprobs_num=vocab
    )
    rows = out["meta_info"]["input_top_logprobs"][1:]
    out = torch.full((len(rows), vocab), float("-inf"), dtype=torch.float64)
    for i, row in enumerate(rows):
        for lp, token, _ in row:
            out[i, token] = lp
    return out


def kl_and_top1(reference: torch.Tensor, served: torch.Tensor) -> tuple[float, float]:
    """(mean KL(reference || served) in nats, share of positions whose argmax agrees)."""
    assert served.shape == reference.shape and bool(torch.isfinite(served).all())
    kl = (reference.exp() * (reference - served)).sum(-1)
    top1 = (reference.argmax(-1) == served.argmax(-1)).double().mean()
    return float(kl.mean()), float(top1)


def check_mxfp4_log(log: str, mode: str, linears: int, moe_layers: int = 3) -> None:
    """The server's log says our MXFP4 MoE serves every MoE layer and `linears` MXFP4 linears
    load, each of them in `mode` (W4A4 or W4A16)."""
    assert log.count("sglang_mx: MXFP4 experts") == moe_layers
    assert log.count("sglang_mx: MXFP4 linear") == linears
    assert all(mode in line for line in log.splitlines() if "sglang_mx: MXFP4 " in line)


def served_kl_top1(url: str, ids: list[int], reference: torch.Tensor, vocab: int):
    """kl_and_top1 of the server's distributions over `ids` against the reference's."""
    return kl_and_top1(reference, served_logprobs(url, ids, vocab))
