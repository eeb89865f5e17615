"""What SGLang's EAGLE (NextN / MTP) speculative decoding needs on the CPU platform.

SGLang 0.5.23 serves EAGLE through platform seams (`supports_speculative_algorithm` on
`MxCpuPlatform`), but one step of its draft setup calls CUDA directly: the DeepSeek/GLM-5 model's
`set_embed_and_head` (how the NextN draft shares the target's embedding and lm_head) ends with
`torch.cuda.empty_cache(); torch.cuda.synchronize()`, which a CPU build of torch refuses. On a
CPU box the hook below does the same sharing without them."""

from __future__ import annotations

from sglang_mx.sglang_version import hook


def _share_embed_and_head(original, self, embed, head):
    """AROUND `DeepseekV2ForCausalLM.set_embed_and_head`: SGLang's body minus the CUDA calls."""
    del self.model.embed_tokens.weight
    del self.lm_head.weight
    self.model.embed_tokens.weight = embed
    self.lm_head.weight = head


def register() -> None:
    hook(
        "sglang.srt.models.deepseek_v2.DeepseekV2ForCausalLM.set_embed_and_head",
        _share_embed_and_head,
        "AROUND",
    )
