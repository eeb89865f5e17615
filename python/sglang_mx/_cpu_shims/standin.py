"""Stand-in modules: attribute access always works (so import-time references succeed); calling
anything raises an error that names exactly what was called and why it is missing."""

from __future__ import annotations

import sys
import types


class StandInCalled(NotImplementedError):
    pass


class StandIn:
    """Placeholder for an attribute of a missing package: chains attributes, raises on call."""

    def __init__(self, qualname: str, why: str) -> None:
        self._qualname = qualname
        self._why = why

    def __getattr__(self, name: str) -> StandIn:
        if name.startswith("__"):
            raise AttributeError(name)
        return StandIn(f"{self._qualname}.{name}", self._why)

    def __call__(self, *args, **kwargs):
        raise StandInCalled(f"{self._qualname} was called, but {self._why}")

    def __repr__(self) -> str:
        return f"<sglang_mx stand-in {self._qualname}>"


class StandInModule(types.ModuleType):
    _why = "this is a stand-in"

    def __getattr__(self, name: str) -> StandIn:
        if name.startswith("__"):
            raise AttributeError(name)
        return StandIn(f"{self.__name__}.{name}", self._why)


def install(package_module: types.ModuleType, submodules: list[str], why: str) -> None:
    """Turn `package_module` and the named dotted submodules into stand-in modules."""
    package_module.__class__ = StandInModule
    package_module._why = why
    for sub in submodules:
        full = f"{package_module.__name__}.{sub}"
        if full in sys.modules:
            continue
        mod = StandInModule(full)
        mod._why = why
        mod.__path__ = []  # a package, so deeper dotted imports resolve through sys.modules
        sys.modules[full] = mod
        parent_name, _, leaf = full.rpartition(".")
        setattr(sys.modules[parent_name], leaf, mod) if parent_name in sys.modules else None
