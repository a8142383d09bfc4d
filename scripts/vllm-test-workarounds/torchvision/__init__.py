"""Test-only stub of torchvision (see README.md here): import succeeds, any use raises."""

from torchvision import io, transforms

__version__ = "0.0.0+dgemma-test-stub"
__all__ = ["io", "transforms"]
