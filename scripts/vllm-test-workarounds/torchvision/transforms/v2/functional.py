"""Test-only stub: every function raises when called."""

from torchvision.transforms.functional import InterpolationMode
from torchvision.transforms.functional import __getattr__ as __getattr__

__all__ = ["InterpolationMode"]
