"""Test-only workaround (see README.md here): Triton's backend registered under the name `cpu`."""

import os

if os.environ.get("TRITON_INTERPRET") == "1":
    try:
        from triton.backends import backends

        if "cpu" not in backends and backends:
            backends["cpu"] = backends.get("nvidia") or next(iter(backends.values()))
    except Exception as err:  # a broken alias shows as vLLM's own error at start
        print(f"dgemma test workaround: no Triton cpu alias: {err}")
