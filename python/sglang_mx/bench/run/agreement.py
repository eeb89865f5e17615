"""Agreement of an endpoint with a reference deployment of the same model (`bench verify
--reference URL`, issue 45 item 3): a throughput figure from a model that no longer computes what
it should (a broken quantization, a wrong kernel on one GPU) is worth nothing to a buyer.

On fixed prompts (data/agreement_prompts.json), teacher-forced so both servers are scored on the
same tokens:
1. the reference continues each prompt greedily (`--agreement-tokens` tokens);
2. both servers score prompt + continuation in one OpenAI completions request (`echo`,
   `logprobs` k, `max_tokens` 1), which returns each position's top-k log-probabilities (SGLang and
   vLLM both do: SGLang computes them from the first input token when `echo` and `logprobs` are
   set);
3. per position after the first: top-1 agreement (the same most likely next token), and KL(ref
   || endpoint) estimated from the top-k: the reference's top-k tokens plus one bucket for the
   rest of its mass; a token missing from the endpoint's top-k gets the endpoint's k-th
   log-probability (an upper bound on it, so the estimate errs low).

The gate: top-1 agreement at least the bound (the claim's `agreement.top1_min`, else
`--agreement-top1`, else DEFAULT_TOP1) and, where the claim states one, KL at most
`agreement.kl_max`. Agreement below the bound refutes the claim (claims/judge.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from sglang_mx.bench.load.limits import BenchError

PROMPTS_FILE = Path(__file__).parent / "data" / "agreement_prompts.json"
DEFAULT_TOP1 = 0.80  # a sound quantization agrees far above this; a broken one far below
TOP_K = 5


def load_prompts(path: Path = PROMPTS_FILE) -> list[str]:
    return json.loads(path.read_text())["prompts"]


def _post(client, url: str, body: dict) -> dict:
    import httpx

    try:
        r = client.post(f"{url}/v1/completions", json=body)
    except httpx.HTTPError as exc:
        raise BenchError(f"agreement: cannot reach {url}: {type(exc).__name__}: {exc}") from None
    if r.status_code != 200:
        raise BenchError(f"agreement: {url} answered {r.status_code}: {r.text[:200]}")
    try:
        return r.json()["choices"][0]
    except (ValueError, KeyError, IndexError):
        raise BenchError(f"agreement: {url} sent no completion choice: {r.text[:200]}") from None


def _scored(client, url: str, model: str, text: str) -> tuple[list[str], list[dict]]:
    body = {"model": model, "prompt": text, "max_tokens": 1, "temperature": 0,
            "echo": True, "logprobs": TOP_K}  # fmt: skip
    choice = _post(client, url, body)
    lp = choice.get("logprobs") or {}
    tokens, top = lp.get("tokens"), lp.get("top_logprobs")
    if not tokens or not top or len(top) != len(tokens) or len(tokens) < 2:
        raise BenchError(
            f"agreement: {url} returned no prompt log-probabilities for echo + logprobs "
            "(SGLang and vLLM do; this endpoint cannot be checked for agreement)"
        )
    return tokens, top


def _kl_topk(ref: dict, end: dict) -> float:
    """KL(ref || end) over ref's top-k tokens plus one bucket for the rest (module docstring)."""
    floor = min(end.values())
    p = {t: math.exp(v) for t, v in ref.items()}
    q = {t: math.exp(end.get(t, floor)) for t in ref}
    kl = sum(p[t] * (math.log(p[t]) - math.log(q[t])) for t in p if p[t] > 0)
    rest_p, rest_q = 1.0 - sum(p.values()), 1.0 - sum(q.values())
    if rest_p > 1e-9:
        kl += rest_p * (math.log(rest_p) - math.log(max(rest_q, 1e-9)))
    return max(kl, 0.0)


def _model(client, url: str, given: str | None) -> str:
    if given:
        return given
    try:
        return client.get(f"{url}/v1/models").json()["data"][0]["id"]
    except Exception as exc:
        raise BenchError(
            f"agreement: cannot read a model name from {url}/v1/models ({type(exc).__name__}); "
            "pass --model / --reference-model"
        ) from None


def measure(
    url: str,
    reference: str,
    model: str | None,
    reference_model: str | None,
    prompts: list[str],
    new_tokens: int,
    api_key: str | None = None,
    reference_api_key: str | None = None,
) -> dict:
    """Top-1 agreement and top-k KL of `url` against `reference` over `prompts` (see above)."""
    import httpx

    def client(key):
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(timeout=600, headers=headers)

    agree = positions = 0
    kls: list[float] = []
    per_prompt = []
    with client(api_key) as mine, client(reference_api_key) as theirs:
        model = _model(mine, url, model)
        reference_model = _model(theirs, reference, reference_model)
        for prompt in prompts:
            body = {"model": reference_model, "prompt": prompt, "max_tokens": new_tokens,
                    "temperature": 0}  # fmt: skip
            text = prompt + _post(theirs, reference, body).get("text", "")
            ref_tokens, ref_top = _scored(theirs, reference, reference_model, text)
            end_tokens, end_top = _scored(mine, url, model, text)
            # echo lists the text's tokens, then the one generated: each server's own, so only
            # the text's are compared; every position's distribution is (the last one's too,
            # the next token after the whole text)
            if end_tokens[:-1] != ref_tokens[:-1]:
                raise BenchError(
                    f"agreement: {url} and {reference} tokenize the same text differently "
                    f"({len(end_tokens) - 1} vs {len(ref_tokens) - 1} tokens): not the same model"
                )
            hits = n = 0
            for r, e in zip(ref_top[1:], end_top[1:], strict=True):  # the first has no context
                if not r or not e:
                    continue
                hits += max(r, key=r.get) == max(e, key=e.get)
                kls.append(_kl_topk(r, e))
                n += 1
            agree, positions = agree + hits, positions + n
            per_prompt.append({"positions": n, "top1": hits / n if n else None})
    if not positions:
        raise BenchError("agreement: no position was scored (prompts too short?)")
    return {
        "reference": reference,
        "model": model,
        "reference_model": reference_model,
        "prompts": len(prompts),
        "continuation_tokens": new_tokens,
        "positions": positions,
        "top1": agree / positions,
        "kl_topk_mean": sum(kls) / len(kls),
        "top_k": TOP_K,
        "per_prompt": per_prompt,
    }
