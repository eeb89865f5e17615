"""A planted KV mis-read for test_fp8_kv_serving, active only in a server started with this
folder on PYTHONPATH and SGLANG_MX_PLANT_KV_GROUP_SCALE set: packed FP8 latent rows are read
with their first 128-value group at that multiple of its scale (a wrong scale on one group, the
break the FP8-KV bound must catch). Python imports `sitecustomize` at start in every process of
the server, so the scheduler reads the planted rows."""

import os

_SCALE = os.environ.get("SGLANG_MX_PLANT_KV_GROUP_SCALE")

if _SCALE:
    from sgl_kernel_rocm.attention import latent_layout

    _real = latent_layout.LatentLayout.unpack

    def _planted(self, rows, dtype=None):
        out = _real(self, rows) if dtype is None else _real(self, rows, dtype)
        if self.packed:
            out = out.clone()
            out[..., : self.group] *= float(_SCALE)
        return out

    latent_layout.LatentLayout.unpack = _planted
