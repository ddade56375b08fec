"""Typed errors. Every error portgemm raises on purpose is a PortgemmError, and also
a ValueError or TypeError where the cause is a bad argument, so generic handlers work."""


class PortgemmError(Exception):
    """Base of every error portgemm raises on purpose."""


class ValidationError(PortgemmError, ValueError):
    """A batch argument is invalid; ``gemm`` is the offending GEMM index (None: whole batch)."""

    def __init__(self, message: str, gemm: int | None = None):
        self.gemm = gemm
        super().__init__(f"GEMM {gemm}: {message}" if gemm is not None else message)


class ShapeMismatch(ValidationError):
    """Inner dimensions, counts or output shapes do not agree."""


class DtypeError(PortgemmError, TypeError):
    """Mixed or unsupported dtypes."""

    def __init__(self, message: str, gemm: int | None = None):
        self.gemm = gemm
        super().__init__(f"GEMM {gemm}: {message}" if gemm is not None else message)


class LayoutError(ValidationError):
    """Strides the kernels cannot use (non-unit inner stride), or C overlapping A or B."""


class UnknownArch(PortgemmError, ValueError):
    """An architecture name that is not in the table."""


class ResourceError(PortgemmError, ValueError):
    """Kernel resources no workgroup can be launched with (too many threads, registers, LDS)."""


class UnknownStrategy(PortgemmError, ValueError):
    """A planner strategy name that is not registered."""


class UnknownBackend(PortgemmError, ValueError):
    """A backend name that is not registered (a usage error, unlike DeviceUnavailable)."""


class ArgumentTypeError(PortgemmError, TypeError):
    """An argument of the wrong kind, e.g. ``backend=`` or ``strategy=`` given a list."""


class DeviceUnavailable(PortgemmError, RuntimeError):
    """A known backend has no usable device or runtime here."""


class CompileError(PortgemmError, RuntimeError):
    """A kernel failed to compile; the message carries the compiler log."""


class DeviceError(PortgemmError, RuntimeError):
    """A GPU runtime call returned an error status."""


class PrecisionError(PortgemmError, ValueError):
    """A ``precision=`` mode that is unknown, or that does not apply to the request (a
    dtype other than float32, a strategy or option the tensor-core families do not take)."""


class PrecisionUnavailable(PrecisionError):
    """A precision mode the architecture or backend has no hardware for (TF32 tensor
    cores: occupancy.archs.TF32_MMA, sm_80 and sm_90)."""
