"""Test-only stub: the names imported at module level."""

from torchvision.transforms import functional, v2
from torchvision.transforms.functional import InterpolationMode
from torchvision.transforms.functional import __getattr__ as __getattr__

__all__ = ["InterpolationMode", "functional", "v2"]
