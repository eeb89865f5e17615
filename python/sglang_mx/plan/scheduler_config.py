"""Scheduler settings the simulator obeys, named after SGLang 0.5.23's ServerArgs and environment
(srt/server_args.py, srt/environ.py, srt/managers/schedule_policy.py)."""

from __future__ import annotations

from dataclasses import dataclass

from sglang_mx.capacity.tables import Overridable

# srt/managers/schedule_policy.py: LPM falls back to FCFS above this many waiting requests.
WAITING_QUEUE_PREFIX_MATCH_MAX = 128
# srt/environ.py: SGLANG_CLIP_MAX_NEW_TOKENS_ESTIMATION (new tokens counted per admitted request).
CLIP_MAX_NEW_TOKENS = 4096
# srt/environ.py: SGLANG_INIT_NEW_TOKEN_RATIO, SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR,
# SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS.
INIT_NEW_TOKEN_RATIO = 0.7
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
NEW_TOKEN_RATIO_DECAY_STEPS = 600
# srt/managers/schedule_batch.py: decode steps a retraction keeps room for.
RETRACT_DECODE_STEPS = 20


@dataclass(frozen=True)
class SchedulerConfig(Overridable):
    """One scheduler (one DP rank or one engine). `max_total_tokens` is its KV pool in tokens."""

    max_total_tokens: int
    max_running_requests: int = 1024
    schedule_policy: str = "lpm"  # lpm | fcfs
    chunked_prefill_size: int | None = 8192  # None: no chunking
    max_prefill_tokens: int = 16384
    page_size: int = 1
    enable_mixed_chunk: bool = False
    disable_radix_cache: bool = False
    schedule_conservativeness: float = 1.0
    cuda_graph: bool = True
    cuda_graph_max_bs: int = 256
    overlap_schedule: bool = True
    # CPU device: the overlap scheduler's "launch" is a synchronous forward, so a step's tokens
    # are sent after the NEXT step's forward (scheduler.event_loop_overlap processes batch N's
    # result after running batch N+1; the last token of a batch that leaves nothing to run goes
    # out at once). On a GPU that processing overlaps the next forward: no lag.
    sync_forward: bool = False

    def __post_init__(self) -> None:
        if self.schedule_policy not in ("lpm", "fcfs"):
            raise ValueError(f"schedule_policy {self.schedule_policy!r}: use lpm or fcfs")
        if self.max_total_tokens <= 0:
            raise ValueError(f"max_total_tokens {self.max_total_tokens} must be > 0 (no KV room)")
        if self.max_running_requests < 1 or self.page_size < 1:
            raise ValueError("max_running_requests and page_size must be >= 1")
        if self.chunked_prefill_size is not None and self.chunked_prefill_size < self.page_size:
            raise ValueError("chunked_prefill_size must be >= page_size (or None to disable)")

    @property
    def init_new_token_ratio(self) -> float:
        return min(INIT_NEW_TOKEN_RATIO * self.schedule_conservativeness, 1.0)

    @property
    def min_new_token_ratio(self) -> float:
        return min(self.init_new_token_ratio * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)

    @property
    def new_token_ratio_decay(self) -> float:
        return (self.init_new_token_ratio - self.min_new_token_ratio) / NEW_TOKEN_RATIO_DECAY_STEPS

    @classmethod
    def from_server_info(cls, info: dict) -> SchedulerConfig:
        """From a live server's /get_server_info (what it actually runs with)."""
        chunk = info.get("chunked_prefill_size")
        return cls(
            max_total_tokens=int(info["max_total_num_tokens"]),
            max_running_requests=int(info.get("max_running_requests") or 1024),
            schedule_policy=str(info.get("schedule_policy", "lpm")),
            chunked_prefill_size=None if chunk in (None, -1) else int(chunk),
            max_prefill_tokens=int(info.get("max_prefill_tokens", 16384)),
            page_size=int(info.get("page_size") or 1),
            enable_mixed_chunk=bool(info.get("enable_mixed_chunk", False)),
            disable_radix_cache=bool(info.get("disable_radix_cache", False)),
            schedule_conservativeness=float(info.get("schedule_conservativeness", 1.0)),
            cuda_graph=not bool(info.get("disable_cuda_graph", False)),
            cuda_graph_max_bs=int(info.get("cuda_graph_max_bs") or 0),
            overlap_schedule=not bool(info.get("disable_overlap_schedule", False)),
            sync_forward=str(info.get("device", "")) == "cpu"
            and not bool(info.get("disable_overlap_schedule", False)),
        )
