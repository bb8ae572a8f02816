"""Steadfast's Python package: the Core API for user trials (`steadfast.core`) and a REST
client for scripts and CI (`steadfast.Client`).

    import steadfast
    with steadfast.core.init() as ctx:
        ...

See docs/core-api.md. When a strictly newer `steadfast` is installed elsewhere (the user's own
pip install), importing this package loads that one instead (steadfast/_newer_install.py).
"""

from ._version import __version__

from ._newer_install import switch_to_newer_install as _switch_to_newer_install

if _switch_to_newer_install(__name__, __file__, __version__) is None:
    from . import core
    from .client import ApiError, Client

    __all__ = ["__version__", "core", "Client", "ApiError"]
