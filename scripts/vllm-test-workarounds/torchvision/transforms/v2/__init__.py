"""Test-only stub: `torchvision.transforms.v2.functional` and nothing usable."""

from torchvision.transforms.functional import __getattr__ as __getattr__
from torchvision.transforms.v2 import functional

__all__ = ["functional"]
