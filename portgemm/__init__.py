"""portgemm: variable-size batched GEMM in one launch, planned by an occupancy model.

    C_i = alpha_i * op(A_i) @ op(B_i) + beta_i * C_i      for i in range(batch)
"""
from .errors import (ArgumentTypeError, CompileError, DeviceError, DeviceUnavailable,
                     DtypeError, LayoutError, PortgemmError, PrecisionError,
                     PrecisionUnavailable, ResourceError, ShapeMismatch, UnknownArch,
                     UnknownBackend, UnknownStrategy, ValidationError)
from .plan import Plan
from .planner import plan, set_default_resources, strategies
from .kernels.resources import DEFAULT_PROVIDER as _DEFAULT_RESOURCES

# The planner reads kernel figures only through a provider handed to it; this layer,
# which sees both, hands it the kernels' one (plan(..., resources=) overrides it).
set_default_resources(_DEFAULT_RESOURCES)

from .api import bind, gemm_vbatched, run
from .grouped import gemm_grouped, gemm_grouped_general

__all__ = [
    "gemm_vbatched", "gemm_grouped", "gemm_grouped_general", "plan", "Plan", "run", "bind",
    "strategies",
    "PortgemmError", "ValidationError", "ShapeMismatch", "DtypeError", "LayoutError",
    "UnknownArch", "UnknownStrategy", "UnknownBackend", "ArgumentTypeError", "ResourceError",
    "DeviceUnavailable", "CompileError", "DeviceError", "PrecisionError", "PrecisionUnavailable",
]
__version__ = "0.1.0"
