"""The long-context trainer (scripts/train_tiny_glm5_long.py) computes what is served: its chunked,
sparse forward (scripts/long_attention.py) gives transformers' GlmMoeDsaForCausalLM logits (eager,
indexer active, top-k below the length so keys are dropped) and gradients on the bundled model,
fails on planted bugs, applies SGLang's own YaRN tables, and reads seeded long data whose held-out
split shares no file with training.

The baseline is the transformers forward the evaluators use (another implementation: full L x L
masked attention, the indexer's own top-k), and SGLang's DeepseekScalingRotaryEmbedding."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import long_attention as la  # noqa: E402
from long_rope import cos_sin, softmax_scale, yarn_parameters  # noqa: E402
from sglang_mx.assets import bundled_model_path  # noqa: E402
from sglang_mx_lab.testing import dsa_reference as dsa  # noqa: E402
from sglang_mx_lab.testing.corpus import held_out_ids  # noqa: E402

BF16 = bundled_model_path("glm5-bf16")
LENGTH, TOPK, CHUNK = 512, 64, 128  # every chunk past top-k: most queries drop keys
GRAD_LENGTH = 256  # the gradient check backpropagates through both forwards
# float32 on both sides, same weights; only the summation order of matmuls differs (measured
# max |diff| ~4e-5 on logits of magnitude ~20). A wrong key anywhere moves logits by > 1e-2.
TOL = 1e-3
YARN = yarn_parameters(factor=64, original=512)


def load(rope: dict | None = None):
    from transformers import GlmMoeDsaConfig, GlmMoeDsaForCausalLM

    cfg = GlmMoeDsaConfig.from_pretrained(BF16)
    if rope is not None:
        cfg.rope_parameters, cfg.max_position_embeddings = dict(rope), 32768
    model = GlmMoeDsaForCausalLM.from_pretrained(
        BF16, config=cfg, dtype=torch.float32, attn_implementation="eager"
    )
    dsa.set_index_topk(model, TOPK)
    return model.eval()


@pytest.fixture(scope="module")
def ids() -> torch.Tensor:
    from transformers import AutoTokenizer

    return held_out_ids(AutoTokenizer.from_pretrained(BF16), LENGTH + 1)


@pytest.fixture(scope="module")
def model():
    torch.set_num_threads(2)
    return load()


@pytest.fixture(scope="module")
def reference(model, ids) -> torch.Tensor:
    with torch.no_grad():
        return model(input_ids=ids[None, :-1], use_cache=False).logits[0]


def shifted_causal_mask(sel, a, b, union_share):
    """Planted bug: each query also sees the next token."""
    keys, mask = CHUNK_KEYS(sel, a, b, union_share)
    pos = torch.arange(b) if keys is None else keys
    return keys, mask | (pos[None, :] == torch.arange(a, b)[:, None] + 1)


def lowest_topk(q, k, w, scale, topk, chunk):
    """Planted bug: the indexer's k lowest-scored causal keys."""
    return SELECT(q, k, -w, scale, topk, chunk)


CHUNK_KEYS, SELECT = la.chunk_keys, la.select
PLANTED = {"chunk_keys": shifted_causal_mask, "select": lowest_topk}


@pytest.mark.parametrize("bug", [None, "chunk_keys", "select"])
def test_chunked_sparse_forward_is_the_served_forward(model, ids, reference, bug, monkeypatch):
    if bug:
        monkeypatch.setattr(la, bug, PLANTED[bug])
    with torch.no_grad():
        logits, _ = la.forward(model, ids[:-1], la.LongSettings(topk=TOPK, chunk=CHUNK))
    err = float((logits - reference).abs().max())
    print(f"planted {bug}: max |logit diff| {err:.2e}")
    if bug is None:
        assert err < TOL, f"chunked forward off transformers' by {err:.2e} (tolerance {TOL})"
    else:
        assert err > 10 * TOL, f"planted {bug} bug went unnoticed (max diff {err:.2e})"


def test_gradients_through_checkpointed_chunks_match(model, ids):
    """LM-loss gradients (chunk checkpointing on) against transformers' autograd."""
    ids = ids[: GRAD_LENGTH + 1]
    target = ids[1:]
    model.zero_grad()
    ref = model(input_ids=ids[None, :-1], use_cache=False).logits[0]
    torch.nn.functional.cross_entropy(ref, target).backward()
    names = ("model.layers.1.self_attn.q_b_proj.weight", "model.layers.3.mlp.experts.down_proj",
             "model.layers.0.self_attn.kv_b_proj.weight", "model.embed_tokens.weight")  # fmt: skip
    params = dict(model.named_parameters())
    want = {n: params[n].grad.clone() for n in names}
    model.zero_grad()
    st = la.LongSettings(
        topk=TOPK, chunk=CHUNK // 2, checkpoint_chunks=True, checkpoint_layers=True
    )
    logits, _ = la.forward(model, ids[:-1], st)
    torch.nn.functional.cross_entropy(logits, target).backward()
    for n in names:
        rel = float((params[n].grad - want[n]).norm() / want[n].norm())
        assert rel < 1e-4, f"{n}: gradient off by {rel:.2e} (relative)"
    model.zero_grad()


def test_indexer_loss_moves_only_the_indexer(model, ids):
    st = la.LongSettings(topk=TOPK, chunk=CHUNK, indexer_loss=True, shared_kl=False)
    model.zero_grad()
    _, kl = la.forward(model, ids[:-1], st)
    assert float(kl) > 0
    kl.backward()
    moved = {n.split(".self_attn.")[-1].split(".")[0] for n, p in model.named_parameters()
             if p.grad is not None and p.grad.abs().sum() > 0}  # fmt: skip
    assert moved == {"indexer"}, moved
    model.zero_grad()


def test_yarn_is_sglangs_and_transformers(ids):
    from sglang.srt.configs.model_config import compute_mla_mscale_scaling
    from sglang.srt.layers.rotary_embedding.rope_variant import DeepseekScalingRotaryEmbedding

    served = DeepseekScalingRotaryEmbedding(
        64, 64, 512, 10000, False, 64.0, torch.float32, beta_fast=32, beta_slow=1,
        mscale=1.0, mscale_all_dim=1.0, device="cpu",
    )  # fmt: skip
    cos, sin = cos_sin(YARN, 64, torch.arange(32768))
    table = served.cos_sin_cache.float()
    assert torch.allclose(torch.cat([cos, sin], -1), table, atol=1e-6, rtol=0)
    assert softmax_scale(YARN, 128) == pytest.approx(
        compute_mla_mscale_scaling(dict(YARN), 128**-0.5)
    )
    hf = load(YARN)
    pos = torch.arange(32768)[None]
    hf_cos, hf_sin = hf.model.rotary_emb(torch.zeros(1, dtype=torch.float32), pos)
    assert torch.allclose(hf_cos[0, :, :32], cos, atol=1e-6, rtol=0)
    assert torch.allclose(hf_sin[0, :, :32], sin, atol=1e-6, rtol=0)
    assert hf.model.layers[0].self_attn.scaling == pytest.approx(softmax_scale(YARN, 128))
    # and the whole forward under YaRN
    with torch.no_grad():
        want = hf(input_ids=ids[None, :-1], use_cache=False).logits[0]
        got, _ = la.forward(hf, ids[:-1], la.LongSettings(topk=TOPK, chunk=CHUNK))
    assert float((got - want).abs().max()) < TOL


def test_long_data_is_seeded_split_and_planted():
    from long_data import LongData
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(BF16)
    train, again = LongData(tok, "train", seed=3), LongData(tok, "train", seed=3)
    held = LongData(tok, "held", seed=3)
    assert not set(train.texts) & set(held.texts)
    a, b = train.sample(5, 4096), again.sample(5, 4096)
    assert torch.equal(a.ids, b.ids) and a.ids.numel() == 4097
    assert not torch.equal(a.ids, held.sample(5, 4096).ids)
    assert 1024 <= a.gap <= 4096
    text = tok.decode(a.ids[1:][a.answer])
    planted = tok.decode(a.ids[-a.gap :][:16])
    assert " = '" + text in planted, (text, planted)
    # the retrieval probe's fixed gap: the planted line that far back, the same value asked
    fixed = held.sample(5, 4096, gap=3000)
    assert fixed.gap == 3000 and fixed.answer.sum() == held.sample(5, 4096).answer.sum()
    value = tok.decode(fixed.ids[1:][fixed.answer])
    assert " = '" + value in tok.decode(fixed.ids[-fixed.gap :][:16])
    assert value == tok.decode(held.sample(5, 4096).ids[1:][held.sample(5, 4096).answer])


def test_long_data_plants_several_lines_each_asked_once():
    """--plants 4: four distinct lines, each planted once before the closing asserts at a gap
    from the seeded range, each value marked as an answer and found only in its own line; the
    first plant's gap and ask as with one plant (its assert last)."""
    import re

    from long_data import LongData
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(BF16)
    one = LongData(tok, "train", seed=3, min_gap=1024, max_gap=6000)
    four = LongData(tok, "train", seed=3, min_gap=1024, max_gap=6000, plants=4)
    s, first = four.sample(5, 8192), one.sample(5, 8192)
    assert s.ids.numel() == 8193 and s.gap == first.gap
    asked = re.findall(r"assert (\w+) == '(\w+)'", tok.decode(s.ids[-120:]))
    assert len(asked) == 4 and len({n for n, _ in asked}) == 4, asked
    assert asked[-1][1] == tok.decode(first.ids[1:][first.answer])
    assert "".join(v for _, v in asked) == tok.decode(s.ids[1:][s.answer]).replace(" ", "")
    body = tok.decode(s.ids[:-120])
    for name, value in asked:
        assert body.count(f"{name} = '{value}'") == 1, name
        at = len(tok(body[: body.index(f"{name} = '")], add_special_tokens=False)["input_ids"])
        assert 1024 - 64 <= 8193 - at <= 6000 + 64, (name, 8193 - at)
    with pytest.raises(ValueError, match="plants"):
        LongData(tok, "train", plants=0)
    with pytest.raises(ValueError, match="no room for 4 planted lines"):  # one gap for all four
        LongData(tok, "train", min_gap=2000, max_gap=2000, plants=4).sample(5, 8192)


def test_pose_positions_put_the_skip_between_the_plant_and_its_ask():
    """--pose-target: one skip, positions increasing and under the target, the planted line
    before it and the closing asserts after it (so the recall spans it), seeded."""
    import random

    from long_data import LongData, pose_positions
    from transformers import AutoTokenizer

    data = LongData(AutoTokenizer.from_pretrained(BF16), "train", seed=3, min_gap=512,
                    max_gap=3000, plants=2)  # fmt: skip
    spans = []
    for i in range(8):
        s = data.sample(i, 4096)
        pos = pose_positions(s, 32768, random.Random(i))
        assert torch.equal(pos, pose_positions(s, 32768, random.Random(i)))
        steps = pos[1:] - pos[:-1]
        assert int(pos[0]) == 0 and bool((steps >= 1).all()) and int(pos[-1]) < 32768
        assert int((steps > 1).sum()) <= 1
        at = int(torch.nonzero(steps > 1)[0]) + 1 if bool((steps > 1).any()) else 4096
        plant_end = 4097 - s.gap + s.plant_len
        assert plant_end <= at <= int(s.answer.nonzero()[0]) - 16, (at, plant_end)
        spans.append(int(pos[-1]) + 1)
    assert max(spans) > 16384, spans  # the skips reach far
    assert torch.equal(pose_positions(s, 4096, random.Random(0)), torch.arange(4096))


def test_chunked_forward_at_skipped_positions_is_transformers(ids):
    """The forward at PoSE positions (a skip of 20,000 at index 300, YaRN) against transformers'
    forward given the same position_ids; a forward that ignored them is planted and caught."""
    hf = load(YARN)
    pos = torch.arange(LENGTH)
    pos[300:] += 20_000
    st = la.LongSettings(topk=TOPK, chunk=CHUNK)
    with torch.no_grad():
        # an explicit all-ones mask: without one, transformers reads a position jump as the
        # start of a packed second sequence and masks what lies before it
        mask = torch.ones(1, LENGTH, dtype=torch.long)
        want = hf(input_ids=ids[None, :-1], position_ids=pos[None], attention_mask=mask,
                  use_cache=False).logits[0]  # fmt: skip
        got, _ = la.forward(hf, ids[:-1], st, positions=pos)
        ignored, _ = la.forward(hf, ids[:-1], st)
    assert float((got - want).abs().max()) < TOL
    assert float((ignored - want).abs().max()) > 10 * TOL


def test_answer_weight_adds_the_planted_values_cross_entropy(model, ids):
    """--answer-weight: the marked tokens' mean cross-entropy, reported and only when asked."""
    import train_tiny_glm5_long as trainer

    st = la.LongSettings(topk=TOPK, chunk=CHUNK, indexer_loss=True)
    answer = torch.zeros(LENGTH, dtype=torch.bool)
    answer[-6:-2] = True
    with torch.no_grad():
        logits, _ = la.forward(model, ids[:-1], st)
    want = float(torch.nn.functional.cross_entropy(logits[answer], ids[1:][answer]))
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # the step leaves the weights as they are
    got = trainer.train_step(model, opt, ids, st, "sparse", 1.0, answer, 2.0)
    assert abs(got["answer"] - want) < 1e-4, (got, want)
    assert "answer" not in trainer.train_step(model, opt, ids, st, "sparse", 1.0, answer, 0.0)
    model.zero_grad()


def test_query_weight_is_a_weighted_mean_of_each_querys_kl(model, ids):
    """--answer-kl-weight: forward's query_weight weighs each query's indexer KL on its own
    (weights 1 + c on marked queries: the all-query sum plus c times the marked queries' sum, over
    N + c * marked), in the dense warm-up and through the sparse selection."""
    marked = torch.zeros(LENGTH)
    marked[-40:-30] = 1.0
    c = 50.0
    for topk in (la.DENSE, TOPK):
        st = la.LongSettings(topk=topk, chunk=CHUNK, indexer_loss=True, checkpoint_chunks=False)
        with torch.no_grad():
            _, all_q = la.forward(model, ids[:-1], st)
            _, only = la.forward(model, ids[:-1], st, marked)
            _, both = la.forward(model, ids[:-1], st, 1.0 + c * marked)
        n, m = LENGTH, float(marked.sum())
        want = (float(all_q) * n + c * float(only) * m) / (n + c * m)
        assert abs(float(both) - want) < 1e-4 * want, (topk, float(both), want)
        assert abs(float(only) - float(all_q)) > 1e-3 * float(all_q)  # the marked queries differ


def test_grad_from_trains_the_tail_with_the_same_logits(model, ids):
    """--grad-tail (forward's grad_from): the same logits; the indexer KL is the tail queries'
    mean; a tail loss's gradient equals the full graph's where no path runs through a head row
    (the last layer's MLP, the final norm) and differs where the cut is (layer 0's projections:
    the head's keys reach the tail through three more layers of attention)."""
    tail_from = 3 * CHUNK
    full = la.LongSettings(topk=TOPK, chunk=CHUNK, indexer_loss=True, checkpoint_chunks=False)
    cut = la.LongSettings(topk=TOPK, chunk=CHUNK, indexer_loss=True, checkpoint_chunks=False,
                          grad_from=tail_from)  # fmt: skip
    rows = torch.arange(LENGTH) >= tail_from
    target = ids[1:][rows]
    params = dict(model.named_parameters())
    names = (
        "model.layers.3.mlp.experts.down_proj",
        "model.norm.weight",
        "model.layers.0.self_attn.kv_b_proj.weight",
        "model.layers.0.mlp.down_proj.weight",
    )
    grads = {}
    for key, st in (("full", full), ("cut", cut)):
        model.zero_grad()
        logits, kl = la.forward(model, ids[:-1], st)
        torch.nn.functional.cross_entropy(logits[rows], target).backward()
        grads[key] = {n: params[n].grad.clone() for n in names}
        grads[key]["logits"], grads[key]["kl"] = logits.detach(), float(kl.detach())
    model.zero_grad()
    err = float((grads["full"]["logits"] - grads["cut"]["logits"]).abs().max())
    assert err < 1e-5, f"grad_from changed the logits by {err:.2e}"
    with torch.no_grad():
        _, tail_kl = la.forward(model, ids[:-1], full, rows.float())
    assert abs(grads["cut"]["kl"] - float(tail_kl)) < 1e-5 * float(tail_kl)
    for n in names:
        rel = float((grads["cut"][n] - grads["full"][n]).norm() / grads["full"][n].norm())
        same = ".layers.3.mlp." in n or n == "model.norm.weight"
        print(f"{n}: cut vs full gradient, relative difference {rel:.2e}")
        assert (rel < 1e-4) if same else (1e-3 < rel < 1.0), f"{n}: relative difference {rel:.2e}"
    with pytest.raises(ValueError, match="multiple of chunk"):
        la.forward(model, ids[:-1], la.LongSettings(topk=TOPK, chunk=CHUNK, grad_from=100))


def test_grad_tail_reaches_back_to_every_answer_row():
    import train_tiny_glm5_long as trainer

    answer = torch.zeros(4096, dtype=torch.bool)
    assert trainer.grad_from(4096, 512, 1024, answer) == 3072
    answer[2900:2905] = True
    assert trainer.grad_from(4096, 512, 1024, answer) == 2560  # the chunk holding row 2900
    assert trainer.grad_from(4096, 512, 0, answer) == 0
    assert trainer.grad_from(4096, 512, 8192, None) == 0


def test_lr_schedule_warms_up_then_decays_or_holds():
    import train_tiny_glm5_long as trainer

    assert trainer.lr_scale(0, 0.0, "cosine") == pytest.approx(1 / 20)
    assert trainer.lr_scale(0, 0.0, "constant") == pytest.approx(1 / 20)
    assert trainer.lr_scale(19, 0.5, "cosine") == pytest.approx(0.5)
    assert trainer.lr_scale(100, 1.0, "cosine") == pytest.approx(0.0)
    assert trainer.lr_scale(100, 1.0, "constant") == 1.0  # held to the budget's end
    assert trainer.lr_scale(100, 1.3, "cosine") == pytest.approx(0.0)  # a step past the budget


def test_joint_stage_trains_everything_through_dense_attention(model, ids):
    """--stage joint: dense attention (no key dropped: the logits are the dense forward's, not the
    top-k one's), the LM loss reaches the main model and the KL the indexers, each in its own
    AdamW group at its own lr."""
    import train_tiny_glm5_long as trainer

    st = trainer.settings("joint", TOPK, CHUNK, LENGTH)
    assert st.topk == la.DENSE and st.shared_kl
    params = trainer.prepare(model, "joint")
    assert len(params) == len(list(model.parameters()))
    groups = trainer.param_groups(model, params, 3e-4, 1e-3)
    idx = {id(p) for p in trainer.indexer_params(model)}
    assert [g["base_lr"] for g in groups] == [3e-4, 1e-3]
    assert {id(p) for p in groups[1]["params"]} == idx
    assert not idx & {id(p) for p in groups[0]["params"]}
    opt = torch.optim.SGD(params, lr=0.0)  # the step leaves the weights as they are
    got = trainer.train_step(model, opt, ids, st, "joint", 1.0)
    with torch.no_grad():
        dense, _ = la.forward(model, ids[:-1], st)
        sparse, _ = la.forward(model, ids[:-1], la.LongSettings(topk=TOPK, chunk=CHUNK))
    want = float(torch.nn.functional.cross_entropy(dense, ids[1:]))
    assert abs(got["lm"] - want) < 1e-4 * want, (got, want)
    assert abs(float(torch.nn.functional.cross_entropy(sparse, ids[1:])) - want) > 1e-3
    assert got["indexer_kl"] > 0
    moved = {n.split(".self_attn.")[-1].split(".")[0] for n, p in model.named_parameters()
             if p.grad is not None and p.grad.abs().sum() > 0}  # fmt: skip
    assert {"indexer", "kv_b_proj"} <= moved, moved
    model.zero_grad()


def test_teacher_kl_is_the_teachers_kl_and_only_when_asked(model, ids):
    """--teacher: KL(teacher || model) on the next-token distribution, row mean, as torch's own
    kl_div computes it; zero for a teacher that is the model; added to the loss only when asked."""
    import train_tiny_glm5_long as trainer

    st = la.LongSettings(topk=TOPK, chunk=CHUNK, indexer_loss=True)
    with torch.no_grad():
        logits, _ = la.forward(model, ids[:-1], st)
    other = logits.flip(0)  # another distribution on every row
    want = torch.nn.functional.kl_div(torch.log_softmax(logits, -1), torch.log_softmax(other, -1),
                                      log_target=True, reduction="batchmean")  # fmt: skip
    assert abs(float(trainer.teacher_kl(other, logits)) - float(want)) < 1e-4 * float(want)
    assert float(trainer.teacher_kl(logits, logits)) < 1e-6 < float(want)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)  # the step leaves the weights as they are
    got = trainer.train_step(model, opt, ids, st, "sparse", 1.0, teacher_logits=other,
                             teacher_weight=0.5)  # fmt: skip
    assert abs(got["teacher_kl"] - float(want)) < 1e-3 * float(want), (got, want)
    taught = model.lm_head.weight.grad.clone()
    assert "teacher_kl" not in trainer.train_step(model, opt, ids, st, "sparse", 1.0,
                                                  teacher_logits=other)  # fmt: skip
    # the KL reaches the gradient only when weighted in
    assert (taught - model.lm_head.weight.grad).abs().max() > 1e-6
    model.zero_grad()
