"""How a paged MLA latent cache stores one token's row [c_kv (512) | k_pe (64)]: the layouts
SGLang 0.5.23 writes for an MLA / DSA KV pool, as small objects that the decode kernel
(mla_decode.py) asks for its offsets and scales, with the torch pack and unpack beside them (the
references and the tests use those; the kernel never hard-codes a row's strides).

- plain: the row in one dtype, d_lat + d_rope elements: bf16/fp16/fp32, or FP8 e4m3 with one
  per-tensor dequant scale. SGLang writes FP8 this way on HIP (`set_mla_kv_buffer_triton_fp8_quant`:
  a cast, scale 1; e4m3fnuz on gfx942) and on CUDA for raw-layout DSA backends (trtllm, tilelang).
- packed_fp8: d_lat + 4 * d_lat / group + 2 * d_rope bytes (656 for GLM-5): c_kv as FP8 e4m3fn,
  one fp32 scale per `group` (128) values (amax / 448), then k_pe in bf16. SGLang's
  `quantize_k_cache_separate` layout, written for a DSATokenToKVPool that has
  `override_kv_cache_dim` (`dsa_kv_cache_store_fp8`: every non-HIP platform with a scaled-FP8
  DSA backend, e.g. flashmla_kv on Hopper and what SGLang resolves on a CPU box).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sgl_kernel_rocm.attention import fp8_bits

FP8_MAX = 448.0  # largest finite e4m3fn value: SGLang's per-group scale is amax / FP8_MAX
_FP8 = (torch.float8_e4m3fn, torch.float8_e4m3fnuz)
_SCALE_BYTES = 4  # one fp32 per group
_ROPE_DTYPE = torch.bfloat16  # the packed layout keeps k_pe as SGLang's pool stores it


@dataclass(frozen=True)
class LatentLayout:
    """One token's latent row in a paged cache [pages, page, row_width] (or [slots, 1, ...])."""

    packed: bool = False
    d_lat: int = 512
    d_rope: int = 64
    group: int = 128  # packed: latent values per fp32 scale

    def __post_init__(self) -> None:
        if self.d_lat <= 0 or self.d_rope < 0:
            raise ValueError(f"latent {self.d_lat} / rope {self.d_rope} dims must be positive")
        if self.packed and (self.group <= 0 or self.d_lat % self.group):
            raise ValueError(
                f"packed FP8 latent of {self.d_lat} values needs a group size dividing it, "
                f"got {self.group}"
            )

    @classmethod
    def plain(cls, d_lat: int = 512, d_rope: int = 64) -> LatentLayout:
        return cls(False, d_lat, d_rope)

    @classmethod
    def packed_fp8(cls, d_lat: int = 512, d_rope: int = 64, group: int = 128) -> LatentLayout:
        return cls(True, d_lat, d_rope, group)

    @property
    def name(self) -> str:
        return f"packed_fp8/{self.group}" if self.packed else "plain"

    @property
    def groups(self) -> int:
        return self.d_lat // self.group if self.packed else 1

    @property
    def scale_offset(self) -> int:
        """Packed: byte offset of the fp32 scales in a row (0 and unused for plain rows)."""
        return self.d_lat if self.packed else 0

    @property
    def rope_offset(self) -> int:
        """Offset of k_pe in a row: bytes for packed rows, elements for plain ones."""
        return self.d_lat + _SCALE_BYTES * self.groups if self.packed else self.d_lat

    @property
    def row_width(self) -> int:
        """A row's last-dim size: bytes for packed rows, elements for plain ones."""
        if self.packed:
            return self.rope_offset + self.d_rope * _ROPE_DTYPE.itemsize
        return self.d_lat + self.d_rope

    # -- what the kernel reads ------------------------------------------------------------

    def kernel_view(self, kv_cache: torch.Tensor) -> torch.Tensor:
        """The cache as the kernel reads it (packed: its bytes), after checking its rows."""
        width = kv_cache.shape[-1]
        if width != self.row_width:
            hint = ""
            packed = LatentLayout.packed_fp8(self.d_lat, self.d_rope)
            if not self.packed and width == packed.row_width:
                hint = " (rows of that width are the packed FP8 layout: LatentLayout.packed_fp8())"
            raise ValueError(
                f"{self.name} latent rows are {self.row_width} wide, the cache's are {width}{hint}"
            )
        if kv_cache.stride(-1) != 1:
            raise ValueError("the latent cache needs a contiguous last dim")
        if not self.packed:
            return kv_cache
        if kv_cache.dtype not in (torch.uint8, torch.float8_e4m3fn):
            raise ValueError(
                f"packed FP8 latent rows are bytes (uint8 or float8_e4m3fn), got {kv_cache.dtype}"
            )
        return kv_cache.view(torch.uint8)

    def code_dtype(self, kv_cache: torch.Tensor) -> torch.dtype:
        """The dtype of the latent values: the cache's for plain rows; e4m3fn when packed."""
        return torch.float8_e4m3fn if self.packed else kv_cache.dtype

    def kernel_constexprs(self, kv_cache: torch.Tensor, isa: str) -> dict[str, object]:
        """The MLA kernel's layout constexprs: PACKED, ROPE_OFF, SCALE_OFF, GROUP, NOPE_UNBIAS
        (2^bias: a bit-moved packed code times its group scale times this is its value), and
        the FP8 bit move's FP8_ISA / Q_LIFT / KV_UNSCALE (fp8_bits.latent_constexprs; packed rows
        are dequantized in the tile, so their scores and values need no folded factors)."""
        bits = fp8_bits.latent_constexprs(self.code_dtype(kv_cache), isa)
        out: dict[str, object] = {
            "PACKED": self.packed,
            "ROPE_OFF": self.rope_offset,
            "SCALE_OFF": self.scale_offset,
            "GROUP": self.group if self.packed else self.d_lat,
            "NOPE_UNBIAS": 1.0,
        }
        if self.packed:
            # KV_UNSCALE * Q_LIFT = 2^(bias - lift) * 2^lift = 2^bias for an FP8 code.
            out["NOPE_UNBIAS"] = float(bits["KV_UNSCALE"]) * float(bits["Q_LIFT"])
            bits = {"FP8_ISA": bits["FP8_ISA"], "Q_LIFT": 1.0, "KV_UNSCALE": 1.0}
        return out | bits

    # -- reference: unpack / pack ---------------------------------------------------------

    def unpack(self, rows: torch.Tensor, dtype: torch.dtype = torch.float64) -> torch.Tensor:
        """Rows [..., row_width] -> values [..., d_lat + d_rope] in `dtype` (plain rows: a cast;
        packed: codes times their group scale, in fp32 before the cast, then k_pe)."""
        if not self.packed:
            return rows.to(dtype)
        raw = self.kernel_view(rows)
        lead = raw.shape[:-1]
        codes = raw[..., : self.d_lat].contiguous().view(torch.float8_e4m3fn)
        end = self.scale_offset + _SCALE_BYTES * self.groups
        scales = raw[..., self.scale_offset : end].contiguous().view(torch.float32)
        rope = raw[..., self.rope_offset :].contiguous().view(_ROPE_DTYPE)
        wide = torch.float64 if dtype == torch.float64 else torch.float32
        grouped = codes.to(wide).view(*lead, self.groups, self.group)
        c = (grouped * scales.to(wide).unsqueeze(-1)).view(*lead, self.d_lat)
        return torch.cat([c.to(dtype), rope.to(dtype)], dim=-1)

    def quantize(
        self, k_nope: torch.Tensor, k_rope: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Packed: SGLang's `quantize_k_cache_separate` in torch (the same rule: scale =
        amax / 448 per group in fp32, values times 1/scale clamped to +-448, rounded to nearest
        even by torch's cast, as the GPU's cvt does): k_nope [T, (1,) d_lat] and k_rope
        [T, (1,) d_rope] -> (uint8 [T, 1, d_lat + 4 * groups], uint8 [T, 1, 2 * d_rope])."""
        if not self.packed:
            raise ValueError("only the packed FP8 layout quantizes rows; plain rows are a cast")
        nope = k_nope.reshape(k_nope.shape[0], -1)
        rope = k_rope.reshape(k_rope.shape[0], -1)
        if nope.shape[-1] != self.d_lat or rope.shape[-1] != self.d_rope:
            raise ValueError(
                f"k_nope [T, {self.d_lat}] and k_rope [T, {self.d_rope}] expected, got "
                f"{tuple(k_nope.shape)} and {tuple(k_rope.shape)}"
            )
        if nope.shape[0] != rope.shape[0]:
            raise ValueError(f"{nope.shape[0]} nope rows but {rope.shape[0]} rope rows")
        y = nope.float().view(-1, self.groups, self.group)
        scale = y.abs().amax(-1) / FP8_MAX
        q = (y * (1.0 / scale).unsqueeze(-1)).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
        nope_part = torch.cat([q.view(torch.uint8).flatten(1), scale.view(torch.uint8)], dim=-1)
        rope_part = rope.to(_ROPE_DTYPE).contiguous().view(torch.uint8)
        return nope_part.unsqueeze(1), rope_part.unsqueeze(1)

    def pack(self, latent: torch.Tensor, dtype: torch.dtype | None = None) -> torch.Tensor:
        """Values [..., d_lat + d_rope] -> rows [..., row_width]: packed rows as SGLang writes
        them (`quantize`); plain rows cast to `dtype` (for tests building caches)."""
        if latent.shape[-1] != self.d_lat + self.d_rope:
            raise ValueError(f"latent rows of {self.d_lat + self.d_rope} values expected")
        if not self.packed:
            if dtype is None:
                raise ValueError("plain rows need the cache dtype")
            return latent.to(dtype)
        lead = latent.shape[:-1]
        flat = latent.reshape(-1, latent.shape[-1])
        nope, rope = self.quantize(flat[:, : self.d_lat], flat[:, self.d_lat :])
        return torch.cat([nope, rope], dim=-1).view(*lead, self.row_width)


def is_fp8(dtype: torch.dtype) -> bool:
    return dtype in _FP8
