"""The backend protocol and the registry that picks one.

A backend is a device: it describes arrays it can take (pointer, shape, strides), knows
its architecture (with the real CU/SM count), and executes a Plan over a validated
Batch on its current stream. Backends import their GPU library lazily, inside the
module that implements them, so ``import portgemm`` works with none installed.
"""
from __future__ import annotations

import importlib
from typing import Protocol

from ..errors import ArgumentTypeError, DeviceUnavailable, UnknownBackend

# Tried in this order when backend=None.
ORDER = ("cuda", "hip", "numpy")
MODULES = {"cuda": "portgemm.backends.cuda", "hip": "portgemm.backends.hip",
           "numpy": "portgemm.backends.numpy"}


class Backend(Protocol):
    name: str

    def device_name(self) -> str: ...

    def arch(self):
        """The device's Arch (occupancy.archs), with its real compute-unit count."""

    def array_info(self, x):
        """ArrayInfo of an array this backend can compute on; LayoutError/TypeError otherwise."""

    def execute(self, plan, batch, gemms=None):
        """Launch the plan over the batch (asynchronously on the current stream). Returns
        the device descriptors it used (None on the host); a caller repeating the same
        batch may pass them back as ``gemms`` to skip rebuilding them."""

    def synchronize(self) -> None: ...

    # Optional:
    #   fast_devices: tuple of device-label prefixes ("cpu", "cuda:") whose NumPy / CuPy /
    #     torch lists problem.validate may read with arrays.gather instead of array_info.
    #   prepare(plan, batch) -> callable: the bound call (Plan.bind), launches only; without
    #     it a bound call is execute() reusing its descriptors.


_instances: dict[str, Backend] = {}


# What an object passed as ``backend=`` must have to be used as one (see Backend).
PROTOCOL = ("array_info", "execute", "arch")


def get_backend(name=None) -> Backend:
    """The named backend, or the first available in ORDER (``name=None``).

    ``name`` is one of ORDER, None, or an object implementing the Backend protocol
    (callable ``array_info``, ``execute`` and ``arch``), which is used as it is. An
    unknown name raises UnknownBackend (a ValueError), anything else ArgumentTypeError
    (a TypeError); a known backend that cannot run here raises DeviceUnavailable
    saying why."""
    if name is None:
        reasons = []
        for n in ORDER:
            try:
                return get_backend(n)
            except DeviceUnavailable as e:
                reasons.append(str(e))
        raise DeviceUnavailable("no backend available: " + "; ".join(reasons))
    if isinstance(name, str):
        inst = _instances.get(name)
        if inst is not None:
            return inst
    elif all(callable(getattr(name, m, None)) for m in PROTOCOL):
        return name  # an object implementing the protocol
    else:
        raise ArgumentTypeError(f"backend must be a name ({', '.join(ORDER)}), None or a "
                                f"backend object, got {type(name).__name__}")
    if name not in MODULES:
        raise UnknownBackend(f"unknown backend {name!r}; known: {', '.join(ORDER)}")
    try:
        mod = importlib.import_module(MODULES[name])
    except ImportError as e:
        raise DeviceUnavailable(f"{name} backend cannot be imported: {e}") from e
    inst = mod.create()  # raises DeviceUnavailable when the device/runtime is missing
    _instances[name] = inst
    return inst
