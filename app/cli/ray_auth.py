"""Ray mode on a network refuses to start without Ray's token authentication (`configuration error: RAY_AUTH_MODE`).

Anyone who reaches a Ray cluster's ports can run code on every node, and Ray 2.60 leaves a `ray start` cluster
open unless RAY_AUTH_MODE=token (docs/deploying.md, Ray's network). The app cannot see how the head was started,
but it knows when it is deployed on a network: `serve` bound off loopback, or a head at an address off loopback.
"""

from __future__ import annotations

from collections.abc import Mapping

from app.cli.preflight import is_loopback
from app.core.config import Settings, SettingsError


def _ray_host(address: str) -> str | None:
    """The host of a RAY_ADDRESS (`host:port`, `[::1]:port`, `ray://host:port`); None for `auto` (a head on this host)."""
    if address in ("", "auto", "local"):
        return None
    rest = address.split("://", 1)[-1].split("/", 1)[0]
    host = rest.rpartition(":")[0] if rest.count(":") == 1 or rest.startswith("[") else rest
    return host.strip("[]")


def check_ray_auth(settings: Settings, command: str, host: str | None, env: Mapping[str, str]) -> None:
    """SettingsError when `serve` or `dispatcher` runs Ray mode on a network (serving off loopback, or a RAY_ADDRESS
    off loopback) without RAY_AUTH_MODE=token. One machine's loopback-only trial needs no token."""
    if settings.executor != "ray" or command not in ("serve", "dispatcher"):
        return
    address = settings.ray_address or env.get("RAY_ADDRESS", "")
    ray_host = _ray_host(address)
    if ray_host is not None and not is_loopback(ray_host):
        where = f"RAY_ADDRESS={address} (not a loopback address)"
    elif command == "serve" and host is not None and not is_loopback(host):
        where = f"serve --host {host} (not a loopback address)"
    else:
        return
    if env.get("RAY_AUTH_MODE", "") != "token":  # Ray's own spelling: it turns nothing on for "Token"
        got = f"got {env['RAY_AUTH_MODE']!r}" if env.get("RAY_AUTH_MODE") else "it is unset"
        raise SettingsError(
            f"RAY_AUTH_MODE: COURSE_EXECUTOR=ray with {where} needs Ray's token authentication, and {got}; "
            "set RAY_AUTH_MODE=token and the same long random RAY_AUTH_TOKEN here and on every Ray node "
            "(anyone who reaches an open Ray cluster can run code on it; docs/deploying.md, Ray's network)"
        )
