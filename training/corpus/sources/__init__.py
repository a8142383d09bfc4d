"""Where corpus files come from: the standard library, PyPI wheels, npm tarballs, Debian packages."""
