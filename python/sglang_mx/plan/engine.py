"""One SGLang scheduler (one engine or one DP-attention rank), step by step.

Mirrors SGLang 0.5.23's event loop (srt/managers/scheduler.py get_next_batch_to_run): a prefill
batch, when one can be formed, runs before decode; PrefillAdder (schedule_policy.py) admits
waiting requests under the KV budget (available + evictable - running requests' reserved new
tokens x new_token_ratio), max_prefill_tokens, the chunked-prefill size and
max_running_requests; the policy is LPM while <= 128 requests wait, else FCFS; decode retracts
the least-advanced requests when the next step does not fit (schedule_batch.retract_decode)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sglang_mx.plan.radix import RadixSim, truncate_runs
from sglang_mx.plan.request import SimRequest
from sglang_mx.plan.scheduler_config import (
    CLIP_MAX_NEW_TOKENS,
    RETRACT_DECODE_STEPS,
    WAITING_QUEUE_PREFIX_MATCH_MAX,
    SchedulerConfig,
)
from sglang_mx.plan.stepcost import Work


@dataclass
class Planned:
    """A batch chosen for one forward pass: prefill pieces (request, start, tokens) and decode
    rows (the whole running batch for a decode step; also prefill's rows when mixed)."""

    prefill: list[tuple[SimRequest, int, int]] = field(default_factory=list)
    decode: list[SimRequest] = field(default_factory=list)
    kv_limited: bool = False  # admission stopped on the KV budget, or decode retracted

    def work(self) -> Work:
        return Work(
            prefill=[(start, n) for _, start, n in self.prefill],
            decode=[r.fill_len for r in self.decode],
        )

    @property
    def empty(self) -> bool:
        return not self.prefill and not self.decode


class Engine:
    def __init__(
        self, cfg: SchedulerConfig, emitted_per_decode: float = 1.0, role: str = "both"
    ) -> None:
        if role not in ("both", "prefill", "decode"):
            raise ValueError(f"engine role {role!r}: use both, prefill or decode")
        self.cfg = cfg
        self.role = role  # prefill / decode: one side of a disaggregated pair
        self.handoff: list[SimRequest] = []  # prefilled requests leaving a prefill engine
        self.cache = RadixSim(cfg.page_size, cfg.disable_radix_cache)
        self.waiting: list[SimRequest] = []
        self.running: list[SimRequest] = []
        self.chunked: SimRequest | None = None
        self.ratio = cfg.init_new_token_ratio
        self.batch_is_full = False
        self.private = 0
        self.emitted = emitted_per_decode
        self.retractions = 0
        # tokens given by the last complete(): (request, index of its first new token_times entry)
        self.given: list[tuple[SimRequest, int]] = []
        self.joined: list[SimRequest] = []  # PD decode: requests the last schedule took in

    # -- KV pool -------------------------------------------------------------------------------
    @property
    def available(self) -> int:
        return self.cfg.max_total_tokens - self.cache.total_tokens - self.private

    def _alloc(self, req: SimRequest, n: int) -> None:
        if self.available < n:
            self.cache.evict(n - self.available)
        req.private += n
        self.private += n

    def _free(self, req: SimRequest) -> None:
        self.private -= req.private
        req.private = 0

    def _relock(self, req: SimRequest, node) -> None:
        if req.node is not None:
            self.cache.unlock(req.node)
        req.node = node
        if node is not None:
            self.cache.lock(node)

    def usage(self) -> float:
        """Share of the KV pool held by running requests (tree tokens in use + private)."""
        return (self.cache.locked_tokens + self.private) / self.cfg.max_total_tokens

    @property
    def busy(self) -> bool:
        return bool(self.waiting or self.running or self.chunked)

    def add(self, req: SimRequest) -> None:
        self.waiting.append(req)
        if not self.running:
            self.batch_is_full = False

    # -- scheduling ------------------------------------------------------------------------------
    def schedule(self, now: float) -> Planned:
        if self.role == "decode":
            self._admit_transferred(now)
            plan = Planned()
        else:
            plan = self._prefill(now)
        if plan.prefill:
            if self.cfg.enable_mixed_chunk and self.running and self._decode_fits():
                plan.decode = list(self.running)
                for r in plan.decode:
                    self._alloc(r, 1)
            return plan
        if self.running:
            kv_limited = self._retract_if_needed()
            for r in self.running:
                self._alloc(r, 1)
            return Planned(decode=list(self.running), kv_limited=kv_limited)
        if not self.waiting and not self.chunked:
            self.ratio = self.cfg.init_new_token_ratio
        return plan

    def _admit_transferred(self, now: float) -> None:
        """Decode side of PD: a request arrives with its KV; it joins the running batch once
        its tokens plus its reserved new tokens fit (no prefill compute here). The client sees
        the first token (sampled by prefill, shipped with the KV) now: SGLang's decode scheduler
        streams it when it builds the prebuilt batch (disaggregation/decode.py
        get_next_disagg_decode_batch_to_run -> process_batch_result_prebuilt)."""
        self.joined = []
        while self.waiting and len(self.running) < self.cfg.max_running_requests:
            r = self.waiting[0]
            reserved = sum(
                min(max(x.output_len - x.out, 0), CLIP_MAX_NEW_TOKENS) * self.ratio
                for x in self.running
            )
            room = self.available + self.cache.evictable_tokens - reserved
            if r.fill_len + min(r.output_len - r.out, CLIP_MAX_NEW_TOKENS) >= room:
                break
            self.waiting.pop(0)
            r.prefix, r.inserted, r.node = r.fill_len, 0, None
            self._alloc(r, r.fill_len)
            self.running.append(r)
            self.joined.append(r)
            if r.token_times:
                r.token_times[0] = r.first_token = now

    def _page_up(self, n: int) -> int:
        p = self.cfg.page_size
        return -(-n // p) * p

    def _sort_waiting(self, now: float) -> dict[int, tuple]:
        """Prefix match of each waiting request; LPM sorts by it (stable), FCFS keeps order."""
        matches = {id(r): self.cache.match(r.fill_runs(), now) for r in self.waiting}
        lpm = self.cfg.schedule_policy == "lpm"
        if lpm and len(self.waiting) <= WAITING_QUEUE_PREFIX_MATCH_MAX:
            self.waiting.sort(key=lambda r: -matches[id(r)][1])
        return matches

    def _prefill(self, now: float) -> Planned:
        cfg, plan = self.cfg, Planned()
        if (self.batch_is_full or not self.waiting) and self.chunked is None:
            return plan
        if len(self.running) >= cfg.max_running_requests and self.chunked is None:
            self.batch_is_full = True
            return plan
        matches = self._sort_waiting(now)
        rem_total = self.available + self.cache.evictable_tokens
        rem_total -= sum(
            min(max(r.output_len - r.out, 0), CLIP_MAX_NEW_TOKENS) * self.ratio
            for r in self.running
        )
        rem_input = cfg.max_prefill_tokens
        rem_chunk = cfg.chunked_prefill_size if cfg.chunked_prefill_size else math.inf
        if self.chunked is not None:
            r = self.chunked
            n = min(r.fill_len - r.prefix, rem_chunk, max(int(rem_total), 0))
            if n < r.fill_len - r.prefix:
                n -= n % cfg.page_size
            if n > 0:
                plan.prefill.append((r, r.prefix, n))
                self._alloc(r, n)
                rem_total -= n
                rem_input -= n
                rem_chunk -= n
            self.chunked = None if n == r.fill_len - r.prefix else r
        admitted = []
        for r in self.waiting:
            if len(self.running) + len(plan.prefill) >= cfg.max_running_requests:
                self.batch_is_full = True
                break
            node, cached = matches[id(r)]
            extend = r.fill_len - cached
            total = extend + min(max(r.output_len - r.out, 0), CLIP_MAX_NEW_TOKENS)
            if total >= rem_total:
                self.batch_is_full = plan.kv_limited = True
                break
            if rem_input <= 0 or rem_chunk <= 0:
                break
            need = self._page_up(extend)
            if need >= rem_input and plan.prefill:
                break
            if need <= rem_chunk:
                n = extend
            else:
                n = int(rem_chunk) - int(rem_chunk) % cfg.page_size
                if n <= 0:
                    break
                self.chunked = r
            if r.cached < 0:
                r.cached = cached
            r.prefix = r.inserted = cached
            self._relock(r, node if cached else None)
            self._alloc(r, n)
            plan.prefill.append((r, cached, n))
            admitted.append(r)
            rem_total -= n + (0 if self.chunked is r else total - extend)
            rem_input -= need if n == extend else n
            rem_chunk -= need if n == extend else n
            if self.chunked is r:
                break
        if admitted:
            ids = {id(r) for r in admitted}
            self.waiting = [r for r in self.waiting if id(r) not in ids]
        return plan

    def _decode_fits(self, reqs: list[SimRequest] | None = None) -> bool:
        reqs = self.running if reqs is None else reqs
        return self.available + self.cache.evictable_tokens >= len(reqs)

    def _retract_if_needed(self) -> bool:
        if self._decode_fits():
            return False
        keep = sorted(self.running, key=lambda r: (r.out, -r.input_len), reverse=True)
        first = True
        while len(keep) > 1 and (first or not self._decode_fits(keep)):
            first = False
            r = keep.pop()
            self._free(r)
            self._relock(r, None)
            r.prefix = r.inserted = 0
            r.retractions += 1
            self.retractions += 1
            self.waiting.insert(0, r)
        self.running = keep
        decoded = sum(r.out for r in keep)
        max_new = sum(r.output_len for r in keep) or 1
        self.ratio = min(1.0, (decoded + RETRACT_DECODE_STEPS * len(keep)) / max_new)
        self.batch_is_full = False
        return True

    # -- completion ------------------------------------------------------------------------------
    def complete(self, plan: Planned, end: float) -> list[SimRequest]:
        """Apply a finished forward pass at time `end`; returns requests that finished."""
        finished = []
        self.given = []
        for r, start, n in plan.prefill:
            r.prefix = start + n
            self._insert(r, end)
            if r.prefix >= r.fill_len:
                self._emit(r, end, 1.0)
                if self.role == "prefill" and not r.done:
                    self._finish(r, end, final=False)
                    self.handoff.append(r)
                elif r.done:
                    self._finish(r, end)
                    finished.append(r)
                else:
                    self.running.append(r)
        for r in plan.decode:
            if r.done:
                continue
            r.prefix += 1
            self._emit(r, end, self.emitted)
            if r.done:
                self._finish(r, end)
                finished.append(r)
        if finished:
            gone = {id(r) for r in finished}
            self.running = [r for r in self.running if id(r) not in gone]
            self.batch_is_full = False
        if plan.decode and not plan.prefill:
            self.ratio = max(
                self.ratio - self.cfg.new_token_ratio_decay, self.cfg.min_new_token_ratio
            )
        return finished

    def _emit(self, r: SimRequest, end: float, tokens: float) -> None:
        r.out_carry += tokens
        k = min(int(r.out_carry), r.output_len - r.out)
        r.out_carry -= int(r.out_carry)
        if math.isnan(r.first_token):
            r.first_token = end
        self.given.append((r, len(r.token_times)))
        r.token_times += [end] * k
        r.out += k

    def _insert(self, r: SimRequest, now: float) -> None:
        runs = truncate_runs(r.fill_runs(), r.prefix)
        node, _ = self.cache.insert(runs, now)
        aligned = r.prefix - r.prefix % self.cfg.page_size
        moved = max(aligned - r.inserted, 0) if not self.cache.disabled else 0
        r.private -= moved
        self.private -= moved
        r.inserted = max(aligned, r.inserted)
        self._relock(r, node if node is not self.cache.root else None)

    def _finish(self, r: SimRequest, end: float, final: bool = True) -> None:
        self._insert(r, end)  # prompt + output tokens that have KV (the last one has none)
        self._relock(r, None)
        self._free(r)
        if final:
            r.finish = end
