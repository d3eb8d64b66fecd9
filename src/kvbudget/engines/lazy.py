"""What an engine package gives to ``from kvbudget.engines.vllm import plan``: its planners' names, loaded when first
read (PEP 562), so that importing the package for its ``engine`` module (the registry does, on every command) loads
none of them."""

from __future__ import annotations

from collections.abc import Callable, Mapping


def lazy_exports(package: str, exports: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` giving each name of ``exports`` from the submodule it names (".policy" ...)."""

    def __getattr__(name: str) -> object:
        if name not in exports:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        from importlib import import_module

        return getattr(import_module(exports[name], package), name)

    return __getattr__
