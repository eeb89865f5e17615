"""mx_dsa decode under CUDA graphs, checked on CPU through SGLang 0.5.23's own graph plumbing.

No GPU here, so no torch.cuda.graph: the test plays the decode CUDA-graph runner's part with
SGLang's real pieces -- its decode input-buffer registry (`build_decode_registry`: the static
req_pool_indices / seq_lens / out_cache_loc, padded rows reset to 0 / the backend's fill value by
`fill_from`) and its replay view (`build_replay_fb_view`) -- on a real DSATokenToKVPool (page 64).
"Capture" at bs 4 runs `init_forward_metadata_out_graph(in_capture=True)` and then the body a
graph would record, on the capture ForwardBatch: `init_forward_metadata_in_graph`, the indexer's
key store and top-k, and sparse decode with the KV write. A "replay" refills the registry from a
real batch (3, then 2 requests, padded to 4), calls out_graph on the replay view and runs the very
same body again. The kernels are sgl_kernel_rocm's Triton ones through TRITON_INTERPRET=1.
Checked: the replayed rows equal eager decode (the same kernels, and the torch path), with every
step's new-token slots poisoned before it runs and holding its latent (the backend's own
set_kv_buffer) and index key after; buffer addresses and launch grids do not move between
capture and replays; the body and the replay prep read no device value on the host.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from dsa_pool_support import PAGE, dsa_pool

TOPK = 128
HEADS, INDEX_HEADS = 4, 4
GRAPH_BS = 4
WIDTH = 512  # req_to_token row width: the graph path's block table covers it (8 pages)
OWN_PAGES = 5  # pages each request row owns (up to 320 tokens); the rest of the row is slot 0


@pytest.fixture(scope="module")
def pool():
    return dsa_pool(size=2048, layers=1)


class Scene:
    """req_to_token rows 1.. own scattered whole pages (row 0 is SGLang's padding row, slot 0 its
    padding page); random latent and index keys everywhere; per-request decode inputs."""

    def __init__(self, pool, seed: int) -> None:
        from sglang_mx.attention.dsa import index_k_pages

        g = torch.Generator().manual_seed(seed)
        self.pool = pool
        self.req_to_token = torch.zeros(5, WIDTH, dtype=torch.int32)
        pages = torch.randperm(pool.size // PAGE - 1, generator=g)[: 4 * OWN_PAGES] + 1
        for row in range(1, 5):
            own = pages[(row - 1) * OWN_PAGES : row * OWN_PAGES]
            slots = (own[:, None] * PAGE + torch.arange(PAGE)).flatten()
            self.req_to_token[row, : len(slots)] = slots.to(torch.int32)
        kv = pool.get_key_buffer(0)
        kv.copy_(torch.randn(kv.shape, generator=g))
        self.index_buf = pool.get_index_k_with_scale_buffer(0)
        self.index_k = index_k_pages.IndexKLayout(PAGE, 128)
        slots = self.req_to_token[self.req_to_token > 0].long()
        self.index_k.store(self.index_buf, slots, torch.randn(len(slots), 128, generator=g))
        self.new_tokens(seed)
        self.layer = SimpleNamespace(
            layer_id=0, tp_q_head_num=HEADS, v_head_dim=512, scaling=192**-0.5
        )

    def new_tokens(self, seed: int) -> None:
        """Fresh per-row decode inputs (one row per request row): the new token's query, index
        query and weights, latent `k` and index key."""
        g = torch.Generator().manual_seed(seed)
        n = 5
        self.q_index = torch.randn(n, INDEX_HEADS, 128, generator=g)
        self.weights = torch.rand(n, INDEX_HEADS, generator=g)
        self.q = torch.randn(n, HEADS * 576, generator=g)
        self.k = torch.randn(n, 1, 576, generator=g)
        self.key = torch.randn(n, 128, generator=g)

    def poison_new_slots(self, rows: list[int], lens: list[int], seed: int) -> None:
        """Random latent and index keys at the slots this step writes (each row's last token),
        so only the step's own writes can put the right values there before it reads them."""
        g = torch.Generator().manual_seed(seed)
        loc = self.batch(rows, lens).out_cache_loc
        kv = self.pool.get_key_buffer(0)
        kv[loc] = torch.randn(kv[loc].shape, generator=g).to(kv.dtype) * 3
        self.index_k.store(self.index_buf, loc, torch.randn(len(loc), 128, generator=g))

    def assert_written(self, rows: list[int], lens: list[int]) -> None:
        """The slots hold this step's latent (the backend's set_kv_buffer) and index key."""
        from sglang_mx.attention.dsa import index_k_pages

        loc = self.batch(rows, lens).out_cache_loc
        kv = self.pool.get_key_buffer(0)
        assert torch.equal(kv[loc], self.k[rows].to(kv.dtype)), "latent not written"
        want = self.index_k.load(self.index_buf, loc)
        q, scale = index_k_pages.quantize(self.key[rows])
        assert torch.equal(want, q.float() * scale[:, None]), "index key not written"

    def backend(self, triton: bool, monkeypatch):
        from sglang_mx.attention.dsa import backend as mx_dsa

        monkeypatch.setenv(mx_dsa.FORCE_TRITON_ENV, "1" if triton else "0")
        runner = SimpleNamespace(
            device="cpu",
            req_to_token_pool=SimpleNamespace(req_to_token=self.req_to_token),
            token_to_kv_pool=self.pool,
            page_size=PAGE,
        )
        return mx_dsa.MxDsaAttnBackend(runner)

    def batch(self, rows: list[int], lens: list[int]):
        """A real decode ForwardBatch: each row's new token is its last position."""
        from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode

        idx = torch.tensor(rows, dtype=torch.int64)
        seq = torch.tensor(lens, dtype=torch.int64)
        loc = self.req_to_token[idx, seq - 1].long()
        return ForwardBatch(
            forward_mode=ForwardMode.DECODE,
            batch_size=len(rows),
            input_ids=torch.zeros(len(rows), dtype=torch.int64),
            req_pool_indices=idx,
            seq_lens=seq,
            seq_lens_cpu=seq.clone(),
            out_cache_loc=loc,
            seq_lens_sum=sum(lens),
            positions=seq - 1,
        )

    def step(self, backend, fb, q_index, weights, q, k, key):
        """One layer's decode, as the model runs it: the indexer stores the new index key and
        takes its top-k, attention writes the new latent and attends the top-k."""
        self.index_k.store(self.index_buf, fb.out_cache_loc, key)
        topk = backend.index_topk(q_index, weights, self.index_buf, fb, TOPK)
        out = backend.forward_decode(q, k, None, self.layer, fb, topk_indices=topk)
        return topk, out

    def eager(self, backend, rows: list[int], lens: list[int]):
        fb = self.batch(rows, lens)
        backend.init_forward_metadata(fb)
        return self.step(backend, fb, *self.inputs(rows))

    def fresh_step(self, b: int, rows: list[int], lens: list[int], run, poison_seed: int):
        """Batch b's new tokens (the same for every backend), its slots poisoned, then `run`;
        after it, its slots must hold what the step wrote."""
        self.new_tokens(1000 + b)
        self.poison_new_slots(rows, lens, poison_seed)
        out = run(rows, lens)
        self.assert_written(rows, lens)
        return out

    def inputs(self, rows: list[int]):
        return self.q_index[rows], self.weights[rows], self.q[rows], self.k[rows], self.key[rows]


class GraphRun:
    """The decode CUDA-graph runner's part for one captured batch size, with SGLang's registry
    and replay view: `capture()` once, then `replay(rows, lens)` for any batch <= GRAPH_BS."""

    def __init__(self, scene: Scene, backend) -> None:
        from sglang.srt.model_executor.cuda_graph_buffer_registry import build_decode_registry
        from sglang.srt.model_executor.forward_batch_info import ForwardBatch, ForwardMode

        self.scene, self.backend = scene, backend
        backend.init_cuda_graph_state(max_bs=8, max_num_tokens=8)
        self.fill = backend.get_cuda_graph_seq_len_fill_value()
        self.registry = build_decode_registry(
            device=torch.device("cpu"),
            max_bs=8,
            max_num_token=8,
            seq_len_fill_value=self.fill,
            cache_loc_dtype=torch.int64,
        )
        slot = {n: self.registry.get_slot(n).slice_for(GRAPH_BS, GRAPH_BS) for n in
                ("input_ids", "req_pool_indices", "seq_lens", "seq_lens_cpu", "out_cache_loc",
                 "positions")}  # fmt: skip
        self.buffers = SimpleNamespace(
            **{n: self.registry.get_slot(n).buffer for n in slot},
            encoder_lens=None,
            mamba_track_indices=None,
        )
        # The capture batch (what capture_prepare builds): its tensors are the static slots.
        self.fb = ForwardBatch(
            forward_mode=ForwardMode.DECODE,
            batch_size=GRAPH_BS,
            seq_lens_sum=int(slot["seq_lens"].sum()),
            can_run_decode_cuda_graph=True,
            **slot,
        )
        # The model's static per-token inputs (what the graph's earlier layers would produce).
        self.static = [torch.zeros((GRAPH_BS, *t.shape[1:])) for t in scene.inputs([1])]

    def body(self):
        """What the graph records: the in-graph metadata prep, then the layer's decode."""
        self.backend.init_forward_metadata_in_graph(self.fb)
        return self.scene.step(self.backend, self.fb, *self.static)

    def capture(self):
        self.backend.init_forward_metadata_out_graph(self.fb, in_capture=True)
        return self.body()

    def load(self, rows: list[int], lens: list[int]) -> None:
        """load_batch: refill the static slots from the real batch, then the replay view's
        out-of-graph prep (SGLang's own helpers, as DecodeCudaGraphRunner calls them)."""
        from sglang.srt.model_executor.forward_batch_info import ForwardMode
        from sglang.srt.model_executor.runner.decode_cuda_graph_runner import (
            build_replay_fb_view,
        )

        real = self.scene.batch(rows, lens)
        n = len(rows)
        self.registry.fill_from(
            real, raw_bs=n, padded_bs=GRAPH_BS, raw_num_tokens=n, padded_num_tokens=GRAPH_BS
        )
        for buf, src in zip(self.static, self.scene.inputs(rows), strict=True):
            buf.zero_()
            buf[:n] = src
        self.view = build_replay_fb_view(
            forward_batch=real,
            buffers=self.buffers,
            bs=GRAPH_BS,
            raw_bs=n,
            num_tokens=GRAPH_BS,
            global_num_tokens_cpu=None,
            seq_len_fill_value=self.fill,
            capture_forward_mode=ForwardMode.DECODE,
            is_encoder_decoder=False,
        )

    def replay(self, rows: list[int], lens: list[int]):
        self.load(rows, lens)
        self.backend.init_forward_metadata_out_graph(self.view)
        topk, out = self.body()
        return topk[: len(rows)], out[: len(rows)]


class _LaunchSpy:
    """Stands in for a Triton kernel object: records each launch's grid and the addresses of the
    arguments at `ptr_args`, then launches the real kernel."""

    def __init__(self, kernel, ptr_args: tuple[int, ...]) -> None:
        self.kernel, self.ptr_args, self.launches = kernel, ptr_args, []

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches.append((tuple(grid), *(args[i].data_ptr() for i in self.ptr_args)))
            return self.kernel[grid](*args, **kwargs)

        return launch


BATCHES = [([1, 2, 3], [100, 200, 300]), ([4, 2], [70, 260])]  # dense (< top-k) and sparse rows


def test_graph_decode_replays_match_eager_decode(pool, monkeypatch):
    import importlib

    scene = Scene(pool, seed=3)
    refs = {}
    for triton in (False, True):
        backend = scene.backend(triton, monkeypatch)
        eager = lambda rows, lens, be=backend: scene.eager(be, rows, lens)  # noqa: E731
        refs[triton] = [
            scene.fresh_step(b, rows, lens, eager, poison_seed=10 * b + triton)
            for b, (rows, lens) in enumerate(BATCHES)
        ]
        assert (backend.table is not None) == triton

    mla = importlib.import_module("sgl_kernel_rocm.attention.mla_decode")
    idx = importlib.import_module("sgl_kernel_rocm.attention.dsa_indexer")
    spies = (
        _LaunchSpy(mla._mla_decode_split_kernel, (2, 3)),
        _LaunchSpy(idx._indexer_score_kernel, (4, 5)),
    )
    monkeypatch.setattr(mla, "_mla_decode_split_kernel", spies[0])
    monkeypatch.setattr(idx, "_indexer_score_kernel", spies[1])
    run = GraphRun(scene, scene.backend(False, monkeypatch))  # graphs always take the kernels
    run.capture()
    captured = [spy.launches[-1] for spy in spies]
    table, seq = run.backend.cuda_graph_table, run.backend.cuda_graph_seq_lens
    assert captured[0][1:] == (table.data_ptr(), seq.data_ptr())
    assert captured[1][1:] == (table.data_ptr(), seq.data_ptr())

    for b, (rows, lens) in enumerate(BATCHES):
        # Each replay finds random values where its new tokens go (not the eager run's
        # writes): a graph body that skipped the KV write would read them.
        topk, out = scene.fresh_step(b, rows, lens, run.replay, poison_seed=10 * b + 7)
        assert [spy.launches[-1] for spy in spies] == captured, "grid or buffer moved"
        k_topk, k_out = refs[True][b]
        t_topk, t_out = refs[False][b]
        for r, n in enumerate(lens):
            chosen = set(topk[r].tolist())
            assert chosen == set(k_topk[r].tolist()) == set(t_topk[r].tolist())
            assert len(chosen - {-1}) == min(n, TOPK)
        # The same kernels over the same keys: only the score row's width differs (the whole
        # req_to_token row vs this batch's longest request), so fp32 round-off at most.
        torch.testing.assert_close(out, k_out, atol=1e-5, rtol=1e-5)
        # Against the torch path, the bound test_dsa_kernel_paths uses for these kernels.
        torch.testing.assert_close(out, t_out, atol=1e-4, rtol=1e-4)
        # The padded rows were refilled: row 0 of req_to_token, one token.
        assert run.backend.seq_lens[len(rows) :].tolist() == [run.fill] * (GRAPH_BS - len(rows))
    assert run.backend.table.data_ptr() == table.data_ptr()
    # Sparsity is real in what the graph served: the 300-token row is not dense attention.
    scene.new_tokens(1000)  # batch 0's tokens (their latent is still in the pool)
    assert not torch.allclose(refs[False][0][1][2], _dense(scene, [3], [300])[0], atol=1e-3)


def _dense(scene: Scene, rows, lens):
    from sglang_mx.attention.dsa import sparse_math

    q = scene.q[rows].reshape(len(rows), HEADS, 576)
    reqs = [
        sparse_math.Request(i, 1, n, scene.req_to_token[r, :n].long())
        for i, (r, n) in enumerate(zip(rows, lens, strict=True))
    ]
    kv = scene.pool.get_key_buffer(0)
    return sparse_math.mla_attend(q, kv, reqs, scene.layer.scaling, 512).reshape(len(rows), -1)


def test_graph_path_reads_no_device_value_on_the_host(pool, monkeypatch):
    """The replay prep (out_graph) and everything a graph records (in_graph, index-key store,
    indexer top-k, KV write, sparse decode) run with host syncs forbidden; so does the eager
    kernel decode, which may read only SGLang's host-side seq_lens_cpu."""
    from sglang_mx_lab.testing.host_sync import HostSyncError, forbid_host_sync

    scene = Scene(pool, seed=4)
    run = GraphRun(scene, scene.backend(False, monkeypatch))
    with forbid_host_sync():
        run.capture()
    rows, lens = BATCHES[0]
    run.load(rows, lens)
    with forbid_host_sync():
        run.backend.init_forward_metadata_out_graph(run.view)
        topk, out = run.body()
        with pytest.raises(HostSyncError):  # the guard is live where the body ran
            int(run.backend.seq_lens.max())
    assert (topk[:3] >= 0).sum(1).tolist() == [100, TOPK, TOPK]

    eager = scene.backend(True, monkeypatch)
    fb = scene.batch(rows, lens)
    with forbid_host_sync(host=[fb.seq_lens_cpu]):
        eager.init_forward_metadata(fb)
        _, eager_out = scene.step(eager, fb, *scene.inputs(rows))
    torch.testing.assert_close(out[:3], eager_out, atol=1e-5, rtol=1e-5)


def test_graph_hooks_refuse_what_they_do_not_capture(pool, monkeypatch):
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    scene = Scene(pool, seed=5)
    backend = scene.backend(False, monkeypatch)
    fb = scene.batch([1], [10])
    with pytest.raises(RuntimeError, match="init_cuda_graph_state was not called"):
        backend.init_forward_metadata_out_graph(fb, in_capture=True)
    backend.init_cuda_graph_state(max_bs=2, max_num_tokens=2)
    assert backend.cuda_graph_table.shape == (2, WIDTH // PAGE)
    fb.forward_mode = ForwardMode.TARGET_VERIFY
    with pytest.raises(RuntimeError, match="decode only, not TARGET_VERIFY.*--disable-cuda-graph"):
        backend.init_forward_metadata_out_graph(fb, in_capture=True)
    big = scene.batch([1, 2, 3], [10, 10, 10])
    with pytest.raises(ValueError, match="batch 3 exceeds"):
        backend.init_forward_metadata_out_graph(big, in_capture=True)
