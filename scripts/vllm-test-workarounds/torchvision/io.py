"""Test-only stub: the names imported at module level; every function raises when called."""

import enum

from torchvision.transforms.functional import __getattr__ as __getattr__


class ImageReadMode(enum.Enum):
    UNCHANGED = 0
    GRAY = 1
    GRAY_ALPHA = 2
    RGB = 3
    RGB_ALPHA = 4
