"""Alerts configuration: typed in code, or read from a TOML file, checked before training starts.

```toml
[[channel]]
type = "webhook"            # console | jsonl | webhook | slack | pagerduty | email
url = "http://127.0.0.1:8080/hook"
min_severity = "error"

[rules]                     # optional
cooldown_s = 600
escalate_after_s = 1800     # false: never

[delivery]                  # optional
timeout_s = 5
retries = 2
```

Secrets (webhook and Slack URLs, PagerDuty routing keys, SMTP passwords) are best given as the name
of an environment variable (`url_env`, `routing_key_env`, `password_env`, `headers_env`); they are
read once here and never printed or stored in the run. Any mistake raises ValueError with one line
naming the file and the key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from stethoscope.act.channels import (
    Console,
    Email,
    JsonlFile,
    PagerDuty,
    Slack,
    Webhook,
)
from stethoscope.act.rules import RuleConfig
from stethoscope.config import env_alerts_file, env_secret
from stethoscope.records import SEVERITIES

CHANNEL_TYPES = ("console", "jsonl", "webhook", "slack", "pagerduty", "email")

_KEYS: dict[str, tuple[str, ...]] = {
    "console": (),
    "jsonl": ("path",),
    "webhook": ("url", "url_env", "headers", "headers_env"),
    "slack": ("url", "url_env"),
    "pagerduty": ("routing_key", "routing_key_env", "url", "source"),
    "email": ("host", "port", "to", "from", "starttls", "username", "password", "password_env"),
}
_COMMON = ("type", "min_severity")
_TOP = ("channel", "rules", "delivery")
_MAX_TIMEOUT_S = 20.0  # within the 30 s the record writer is given to finish at close


@dataclass
class AlertsConfig:
    """Where alerts go and how: channels (objects with `send(alert)`), rules, delivery limits."""

    channels: list[Any]
    """Channel objects (`stethoscope.act.channels`); each may carry its own `min_severity`."""
    rules: RuleConfig = field(default_factory=RuleConfig)
    """How findings become alerts: severity floor, cooldown, escalation, resolve messages."""
    timeout_s: float = 5.0
    """Seconds one delivery try may take; also the most `Monitor.close()` waits for alerts to go out."""
    retries: int = 2
    """Tries after the first for a delivery that failed in a way that may pass (timeout, 5xx, 429)."""

    def __post_init__(self) -> None:
        if not self.channels:
            raise ValueError("alerts need at least one channel ([[channel]] with a type)")
        for ch in self.channels:
            if not callable(getattr(ch, "send", None)):
                raise ValueError(f"a channel needs a send(alert) method, got {ch!r}")
            _check_severity(getattr(ch, "min_severity", "warning"), "min_severity")
        if not isinstance(self.timeout_s, (int, float)) or not 0 < self.timeout_s <= _MAX_TIMEOUT_S:
            raise ValueError(f"delivery.timeout_s must be a number of seconds in (0, {_MAX_TIMEOUT_S:g}] (close() "
                             f"waits up to this for alerts to go out), got {self.timeout_s!r}")
        if not isinstance(self.retries, int) or isinstance(self.retries, bool) or not 0 <= self.retries <= 10:
            raise ValueError(f"delivery.retries must be an integer from 0 to 10, got {self.retries!r}")


def resolve_alerts(spec: Any) -> AlertsConfig | None:
    """What a Monitor's `alerts=` means: None ($STETHOSCOPE_ALERTS or nothing), False (nothing), a TOML
    path, an AlertsConfig, or a channel or list of channels (default rules)."""
    if spec is None:
        spec = env_alerts_file()
        if spec is None:
            return None
    if spec is False:
        return None
    if isinstance(spec, AlertsConfig):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        return load_alerts(spec)
    channels = list(spec) if isinstance(spec, (list, tuple)) else [spec]
    return AlertsConfig(channels)


def load_alerts(path: str | os.PathLike[str]) -> AlertsConfig:
    """Read an alerts TOML file; ValueError('FILE: key: problem') on any mistake."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        try:
            import tomli as tomllib  # type: ignore[no-redef]
        except ModuleNotFoundError:
            raise ValueError(f"{path}: reading TOML needs Python 3.11+ or the tomli package") from None
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ValueError(f"{path}: no such alerts file") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    try:
        return alerts_from_mapping(data)
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None


def alerts_from_mapping(data: dict[str, Any]) -> AlertsConfig:
    """The parsed TOML (or any mapping of the same shape) as an AlertsConfig."""
    unknown = sorted(set(data) - set(_TOP))
    if unknown:
        raise ValueError(f"unknown key {unknown[0]!r} (known: {', '.join(_TOP)})")
    tables = data.get("channel")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ValueError("channel: expected at least one [[channel]] table with a type")
    delivery = _table(data, "delivery", ("timeout_s", "retries"))
    timeout = delivery.get("timeout_s", 5.0)
    channels = [build_channel(t, i + 1, timeout) for i, t in enumerate(tables)]
    rules_table = dict(_table(data, "rules", tuple(RuleConfig.__dataclass_fields__)))
    if rules_table.get("escalate_after_s") is False:  # TOML has no null: false means never
        rules_table["escalate_after_s"] = None
    return AlertsConfig(channels, RuleConfig(**rules_table), timeout, delivery.get("retries", 2))


def build_channel(t: dict[str, Any], index: int = 1, timeout: Any = 5.0) -> Any:
    """One [[channel]] table as a channel object; ValueError names `channel N` and the key."""
    kind = t.get("type")
    where = f"channel {index}"
    if kind not in CHANNEL_TYPES:
        got = "no type" if kind is None else f"unknown type {kind!r}"
        raise ValueError(f"{where}.type: {got} (expected one of {', '.join(CHANNEL_TYPES)})")
    where = f"{where} ({kind})"
    allowed = _COMMON + _KEYS[kind]
    for key in t:
        if key not in allowed:
            raise ValueError(f"{where}: unknown key {key!r} (known: {', '.join(allowed)})")
    sev = t.get("min_severity")
    if sev is not None:
        _check_severity(sev, f"{where}.min_severity")
    opts = {"min_severity": sev} if sev is not None else {}
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise ValueError(f"delivery.timeout_s must be a number of seconds > 0, got {timeout!r}")
    try:
        return _BUILDERS[kind](t, where, opts, float(timeout))
    except ValueError as exc:
        msg = str(exc)
        raise ValueError(msg if msg.startswith(where) else f"{where}: {msg}") from None


def _console(t: dict[str, Any], where: str, opts: dict[str, Any], timeout: float) -> Any:
    return Console(**opts)


def _jsonl(t: dict[str, Any], where: str, opts: dict[str, Any], timeout: float) -> Any:
    return JsonlFile(_str(t, "path", where), **opts)


def _webhook(t: dict[str, Any], where: str, opts: dict[str, Any], timeout: float) -> Any:
    headers = {str(k): _text(v, f"{where}.headers.{k}") for k, v in _sub(t, "headers", where).items()}
    for header, var in _sub(t, "headers_env", where).items():
        headers[str(header)] = _env(_text(var, f"{where}.headers_env.{header}"), f"{where}.headers_env.{header}")
    return Webhook(_secret(t, "url", where), headers=headers, timeout=timeout, **opts)


def _slack(t: dict[str, Any], where: str, opts: dict[str, Any], timeout: float) -> Any:
    return Slack(_secret(t, "url", where), timeout=timeout, **opts)


def _pagerduty(t: dict[str, Any], where: str, opts: dict[str, Any], timeout: float) -> Any:
    extra = {k: _str(t, k, where) for k in ("url", "source") if k in t}
    return PagerDuty(_secret(t, "routing_key", where), timeout=timeout, **extra, **opts)


def _email(t: dict[str, Any], where: str, opts: dict[str, Any], timeout: float) -> Any:
    to = t.get("to")
    if isinstance(to, str):
        to = [to]
    if not isinstance(to, list) or not to or not all(isinstance(a, str) and "@" in a for a in to):
        raise ValueError(f"{where}.to: expected an address or a list of addresses")
    port = t.get("port", 25)
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise ValueError(f"{where}.port: expected a port number, got {port!r}")
    starttls = t.get("starttls", False)
    if not isinstance(starttls, bool):
        raise ValueError(f"{where}.starttls: expected true or false, got {starttls!r}")
    password = _secret(t, "password", where) if "password" in t or "password_env" in t else None
    username = _str(t, "username", where) if "username" in t else None
    if password is not None and username is None:
        raise ValueError(f"{where}.username: a password needs a username")
    sender = _str(t, "from", where) if "from" in t else "stethoscope@localhost"
    return Email(_str(t, "host", where), to, sender=sender, port=port, starttls=starttls, username=username,
                 password=password, timeout=timeout, **opts)


_BUILDERS = {"console": _console, "jsonl": _jsonl, "webhook": _webhook, "slack": _slack, "pagerduty": _pagerduty,
             "email": _email}


def _secret(t: dict[str, Any], key: str, where: str) -> str:
    """`key` written in the file, or read from the environment variable named by `key_env`."""
    if key in t and f"{key}_env" in t:
        raise ValueError(f"{where}: give {key} or {key}_env, not both")
    if f"{key}_env" in t:
        return _env(_text(t[f"{key}_env"], f"{where}.{key}_env"), f"{where}.{key}_env")
    if key not in t:
        raise ValueError(f"{where}: missing {key} (or {key}_env, the name of an environment variable holding it)")
    return _text(t[key], f"{where}.{key}")


def _env(var: str, where: str) -> str:
    value = env_secret(var)
    if value is None:
        raise ValueError(f"{where}: the environment variable {var} is not set")
    return value


def _str(t: dict[str, Any], key: str, where: str) -> str:
    if key not in t:
        raise ValueError(f"{where}: missing {key}")
    return _text(t[key], f"{where}.{key}")


def _text(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}: expected a non-empty string")
    return value


def _sub(t: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = t.get(key, {})
    if not isinstance(value, dict):
        raise ValueError(f"{where}.{key}: expected a table")
    return value


def _table(data: dict[str, Any], name: str, keys: tuple[str, ...]) -> dict[str, Any]:
    table = data.get(name, {})
    if not isinstance(table, dict):
        raise ValueError(f"{name}: expected a table [{name}]")
    for key in table:
        if key not in keys:
            raise ValueError(f"{name}: unknown key {key!r} (known: {', '.join(keys)})")
    return table


def _check_severity(value: Any, where: str) -> None:
    if value not in SEVERITIES:
        raise ValueError(f"{where}: expected one of {', '.join(SEVERITIES)}, got {value!r}")
