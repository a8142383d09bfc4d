"""Python packages from PyPI, as wheels; each wheel's METADATA decides its license."""

from __future__ import annotations

import re
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path

from training.corpus.licenses import license_from_wheel_metadata
from training.corpus.sources.base import Candidate, Source, SourceInfo, run_fetch, version_key


def _normalize_dist(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def cached_wheel(name: str, cache: Path) -> Path | None:
    norm = _normalize_dist(name)
    found = [p for p in cache.glob("*.whl") if _normalize_dist(p.name.split("-")[0]) == norm]
    if not found:
        return None
    return max(found, key=lambda p: version_key(p.name.split("-")[1]))


def fetch_wheel(name: str, cache: Path, offline: bool) -> Path | None:
    """The newest cached wheel of `name`, downloading it with pip when missing."""
    cache.mkdir(parents=True, exist_ok=True)
    if (hit := cached_wheel(name, cache)) is not None or offline:
        return hit
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:"]
    cmd += ["--python-version", "3.11", "--quiet", "-d", str(cache), name]
    if not run_fetch(cmd, name):
        return None
    return cached_wheel(name, cache)


def wheel_files(name: str, cache: Path, offline: bool, langs: set[str]) -> Source:
    info = SourceInfo(name, "pypi")
    if "python" not in langs:
        info.skipped = "language not requested"
        return info, iter(())
    wheel = fetch_wheel(name, cache, offline)
    if wheel is None:
        info.skipped = "not fetched"
        return info, iter(())
    info.version = wheel.name.split("-")[1]
    with zipfile.ZipFile(wheel) as zf:
        meta = next((n for n in zf.namelist() if n.endswith(".dist-info/METADATA")), None)
        verdict = license_from_wheel_metadata(zf.read(meta).decode("utf-8", "replace")) if meta else None
    if verdict is None:
        info.skipped = "wheel without METADATA"
        return info, iter(())
    if not info.judged(verdict):
        return info, iter(())

    def walk() -> Iterator[Candidate]:
        with zipfile.ZipFile(wheel) as zf:
            for member in sorted(zf.namelist()):
                if not member.endswith(".py") or ".dist-info/" in member:
                    continue
                yield Candidate(f"{name}-{info.version}/{member}", "python", zf.read(member), info.license)

    return info, walk()


# Popular, well-written pure-Python (or mostly Python) packages. Their wheels' metadata decides the
# license; the copyleft and MPL ones on the list (e.g. hypothesis, certifi, tqdm) are refused there.
PYPI_PACKAGES: tuple[str, ...] = (
    "requests", "urllib3", "idna", "charset-normalizer", "flask", "werkzeug", "jinja2", "markupsafe",
    "itsdangerous", "click", "attrs", "cattrs", "rich", "textual", "httpx", "httpcore", "anyio", "h11",
    "pydantic", "django", "djangorestframework", "numpy", "pandas", "scikit-learn", "sympy", "networkx",
    "more-itertools", "black", "starlette", "fastapi", "typer", "sqlalchemy", "alembic", "pytest",
    "pluggy", "pip", "setuptools", "wheel", "virtualenv", "tox", "nox", "build", "packaging", "pyyaml",
    "tomli", "tomlkit", "marshmallow", "celery", "kombu", "redis", "pymongo", "tornado", "twisted",
    "aiohttp", "yarl", "multidict", "pygments", "jedi", "parso", "mypy", "flake8", "pycodestyle",
    "pyflakes", "isort", "autopep8", "yapf", "coverage", "six", "python-dateutil", "pytz", "arrow",
    "pendulum", "loguru", "structlog", "cachetools", "toolz", "dask", "xarray", "scrapy",
    "beautifulsoup4", "html5lib", "bleach", "markdown", "mistune", "nltk", "transformers", "accelerate",
    "datasets", "peft", "diffusers", "huggingface-hub", "tiktoken", "einops", "jax", "flax", "optax",
    "keras", "openai", "anthropic", "sphinx", "docutils", "jsonschema", "referencing", "uvicorn",
    "gunicorn", "websockets", "bottle", "falcon", "sanic", "tenacity", "wrapt", "decorator", "boltons",
    "funcy", "glom", "pydash", "cerberus", "voluptuous", "schema", "pyparsing", "lark", "ply", "sqlparse",
    "prompt-toolkit", "ipython", "traitlets", "jupyter-client", "nbformat", "pexpect", "ptyprocess",
    "platformdirs", "filelock", "fsspec", "invoke", "fabric", "fire", "docopt", "sh", "plumbum",
    "pyserial", "graphene", "strawberry-graphql", "aiofiles", "mongoengine", "peewee", "elasticsearch",
    "kafka-python", "pika", "google-auth", "oauthlib", "requests-oauthlib", "pyjwt", "passlib", "wtforms",
    "flask-sqlalchemy", "channels", "selenium", "pytest-asyncio", "pytest-cov", "mock", "freezegun",
    "factory-boy", "responses", "vcrpy", "pre-commit", "cookiecutter", "mako", "dataclasses-json",
    "twine", "colorama", "termcolor", "tabulate", "prettytable", "humanize", "inflect", "python-slugify",
    "validators", "email-validator", "dnspython", "netaddr", "pyasn1", "rsa", "ecdsa", "jsonpatch",
    "jsonpointer", "sortedcontainers", "eventlet", "astor", "asttokens", "executing", "stack-data",
    "pure-eval", "icecream", "hy", "statsmodels", "seaborn", "scikit-image", "imageio", "geopandas",
    "folium", "param", "questionary", "blessed", "libcst", "hatchling", "flit-core", "poetry-core", "pdm",
    "pyproject-hooks", "typing-extensions", "mypy-extensions", "matplotlib", "scipy", "bokeh", "sqlmodel",
    "pydantic-settings", "msgpack", "cryptography", "pyopenssl", "paramiko", "tqdm", "certifi",
    "hypothesis", "pylint", "urwid", "unidecode", "pathspec",
)  # fmt: skip
