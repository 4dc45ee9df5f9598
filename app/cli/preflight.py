"""Checks the command line makes before it starts a server or a dispatcher, beyond what the settings validate
alone: the address a server binds to and the packages the chosen executor needs on this host."""

from __future__ import annotations

import importlib.util
import ipaddress

from app.core.config import DEV_SECRET, Settings, SettingsError

LOOPBACK_NAMES = ("localhost",)


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 or localhost: only this machine can reach a server bound there."""
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to any interface


def check_bind(settings: Settings, host: str) -> None:
    """Refuse to serve a network with the published development key: anyone could sign a cookie with it."""
    if settings.secret_key == DEV_SECRET and not is_loopback(host):
        raise SettingsError(
            f"COURSE_SECRET_KEY: the development default may only serve on a loopback address, not --host {host}; "
            "set COURSE_SECRET_KEY to a long random string (and COURSE_ENV=production for a real deployment)"
        )


def check_executor(settings: Settings, command: str) -> None:
    """A dispatcher (run alone, or started by `serve`) needs the ray package here; without it, it would die in a
    ModuleNotFoundError traceback and serve would restart it for ever."""
    runs_dispatcher = command == "dispatcher" or (command == "serve" and settings.dispatcher)
    if settings.executor == "ray" and runs_dispatcher and importlib.util.find_spec("ray") is None:
        where = (
            ""
            if command == "dispatcher"
            else " (serve starts the dispatcher; COURSE_DISPATCHER=0 if it runs elsewhere)"
        )
        raise SettingsError(
            f"COURSE_EXECUTOR: ray needs the ray package on this host{where}; install it with "
            ".venv/bin/python -m pip install -c constraints.txt -e '.[ray]'"
        )
