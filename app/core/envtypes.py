"""The types of COURSE_* values: how a raw environment string is read before app/core/config.py bounds it.

Each refusal is a ValueError whose text pydantic hands to config's `_first_error`, which names the variable.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BeforeValidator

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")
ON_OFF = f"{'/'.join(TRUE_WORDS)} or {'/'.join(FALSE_WORDS)}"


def _on_off(raw: object) -> object:
    """Only the usual spellings: `COURSE_DISPATCHER=false` must not read as on, nor `t` or `y` as anything."""
    if isinstance(raw, bool):
        return raw
    word = str(raw).strip().lower()
    if word in TRUE_WORDS or word in FALSE_WORDS:
        return word in TRUE_WORDS
    raise ValueError(f"got {raw!r}, expected {ON_OFF}")


def _smtp_scheme(url: str) -> str:
    if url and urlsplit(url).scheme not in ("smtp", "smtps", "smtp+starttls"):
        raise ValueError(f"got scheme {urlsplit(url).scheme!r}, expected smtp://, smtp+starttls:// or smtps://")
    return url


PERCENT_ENCODE = "python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=\"\"))' 'PASSWORD'"


def _database_url(url: str) -> str:
    """A password with `@` in it, not percent-encoded, splits the URL at the wrong `@`: `user:p@ss/w@db/course`
    reads as host `ss`, and the connection error then blames a host nobody typed. Refused here, before anything
    connects; the message never repeats the URL, which holds the password."""
    if "://" not in url:
        return url
    before_query = url.partition("?")[0]
    if before_query.count("@") > 1:
        raise ValueError(
            "the URL has more than one '@' before the database name, so a password (or user name) holds an '@' "
            "that splits it at the wrong place; percent-encode the password (@ as %40, / as %2F, : as %3A, "
            f"% as %25), e.g. with {PERCENT_ENCODE}"
        )
    return url


def _addresses(raw: str) -> str:
    """A comma-separated list of IP addresses and networks (`10.0.0.5, 10.1.0.0/16`), or `*`, as uvicorn's
    forwarded_allow_ips reads it; normalised to no spaces. A host name is refused: uvicorn compares addresses."""
    items = [item.strip() for item in raw.split(",") if item.strip()]
    for item in items:
        if item == "*":
            continue
        try:
            ipaddress.ip_network(item, strict=False)
        except ValueError:
            raise ValueError(
                f"got {item!r}, expected IP addresses or networks separated by commas (e.g. 127.0.0.1,10.0.0.0/8), "
                "or * for any"
            ) from None
    return ",".join(items)


def _public_url(url: str) -> str:
    parts = urlsplit(url)
    if url and (parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment):
        raise ValueError(f"got {url!r}, expected the address learners use, e.g. https://course.example.org")
    return url.rstrip("/")


def _cased(convert: Callable[[str], str]) -> BeforeValidator:
    """A choice in whatever case the operator typed: `COURSE_LOG_LEVEL=debug` means DEBUG."""
    return BeforeValidator(lambda raw: convert(raw.strip()) if isinstance(raw, str) else raw)


OnOff = Annotated[bool, BeforeValidator(_on_off)]
Environment = Annotated[Literal["development", "test", "production"], _cased(str.lower)]
LogLevel = Annotated[Literal["DEBUG", "INFO", "WARNING", "ERROR"], _cased(str.upper)]
Executor = Annotated[Literal["embedded", "ray"], _cased(str.lower)]
SmtpUrl = Annotated[str, AfterValidator(_smtp_scheme)]
DatabaseUrl = Annotated[str, AfterValidator(_database_url)]
Addresses = Annotated[str, AfterValidator(_addresses)]
PublicUrl = Annotated[str, AfterValidator(_public_url)]
