"""The alerts file: the issue's minimal TOML works as written; every mistake fails at start, in one line."""

from __future__ import annotations

import os

import pytest

from stethoscope import Monitor
from stethoscope.act import Webhook, load_alerts

MINIMAL = '''
[[channel]]
type = "webhook"            # console | jsonl | webhook | slack | pagerduty | email
url = "http://127.0.0.1:8080/hook"
min_severity = "error"
'''


def _file(tmp_path, text: str):
    path = tmp_path / "alerts.toml"
    path.write_text(text)
    return path


def test_the_minimal_file_works_as_written(tmp_path):
    cfg = load_alerts(_file(tmp_path, MINIMAL))
    [ch] = cfg.channels
    assert isinstance(ch, Webhook) and ch.min_severity == "error" and ch.target == "http://127.0.0.1:8080/hook"
    assert cfg.timeout_s == 5.0 and cfg.retries == 2 and cfg.rules.cooldown_s == 600


def test_every_channel_type_with_its_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("SLACK_URL", "https://hooks.slack.com/services/T0/B0/SECRETSECRET")
    monkeypatch.setenv("PD_KEY", "pdkey-0123456789")
    monkeypatch.setenv("SMTP_PW", "smtp-pw-0123")
    cfg = load_alerts(_file(tmp_path, f'''
[delivery]
timeout_s = 2.5
retries = 1
[rules]
min_severity = "error"
cooldown_s = 60
escalate_after_s = 900
[[channel]]
type = "console"
[[channel]]
type = "jsonl"
path = "{tmp_path / 'alerts.jsonl'}"
[[channel]]
type = "webhook"
url = "https://example.com/hook"
headers_env = {{ Authorization = "PD_KEY" }}
[[channel]]
type = "slack"
url_env = "SLACK_URL"
[[channel]]
type = "pagerduty"
routing_key_env = "PD_KEY"
min_severity = "critical"
[[channel]]
type = "email"
host = "smtp.example.com"
port = 587
starttls = true
username = "runs"
password_env = "SMTP_PW"
from = "runs@example.com"
to = ["oncall@example.com", "ml@example.com"]
'''))
    names = [ch.name for ch in cfg.channels]
    assert names == ["console", "jsonl", "webhook", "slack", "pagerduty", "email"]
    assert cfg.timeout_s == 2.5 and cfg.retries == 1 and cfg.rules.min_severity == "error"
    never = load_alerts(_file(tmp_path, MINIMAL + "[rules]\nescalate_after_s = false\n"))
    assert never.rules.escalate_after_s is None
    targets = " ".join(str(ch.target) for ch in cfg.channels) + repr(cfg)
    for secret in ("SECRETSECRET", "pdkey-0123456789", "smtp-pw-0123"):
        assert secret not in targets


@pytest.mark.parametrize("text, says", [
    ('[[channel]]\ntype = "pager"\n', "channel 1.type: unknown type 'pager'"),
    ('[[channel]]\nurl = "http://x"\n', "channel 1.type: no type"),
    ('[[channel]]\ntype = "webhook"\nmin_severity = "error"\n', "channel 1 (webhook): missing url"),
    ('[[channel]]\ntype = "slack"\nurl_env = "NOT_SET_ANYWHERE"\n',
     "channel 1 (slack).url_env: the environment variable NOT_SET_ANYWHERE is not set"),
    ('[[channel]]\ntype = "webhook"\nurl = "ftp://x/y"\n', "channel 1 (webhook): url must be an http"),
    ('[[channel]]\ntype = "webhook"\nurl = "http://x"\nmin_severity = "loud"\n',
     "channel 1 (webhook).min_severity: expected one of"),
    ('[[channel]]\ntype = "webhook"\nurl = "http://x"\nmethod = "PUT"\n', "channel 1 (webhook): unknown key 'method'"),
    ('[[channel]]\ntype = "webhook"\nurl = "http://x"\n[rules]\ncooldown = 5\n', "rules: unknown key 'cooldown'"),
    ('[[channel]]\ntype = "webhook"\nurl = "http://x"\n[delivery]\ntimeout_s = -1\n', "delivery.timeout_s"),
    ('[[channel]]\ntype = "webhook"\nurl = "http://x"\n[delivery]\ntimeout_s = 60\n', "delivery.timeout_s must be"),
    ('[[channel]]\ntype = "jsonl"\n', "channel 1 (jsonl): missing path"),
    ('[[channel]]\ntype = "email"\nhost = "h"\n', "channel 1 (email).to: expected an address"),
    ('channels = 3\n', "unknown key 'channels'"),
    ('', "channel: expected at least one [[channel]]"),
    ('[[channel]\ntype = "webhook"\n', "not valid TOML"),
])
def test_a_bad_file_fails_in_one_line_naming_the_key(tmp_path, text, says):
    path = _file(tmp_path, text)
    with pytest.raises(ValueError) as exc:
        load_alerts(path)
    msg = str(exc.value)
    assert msg.startswith(f"{path}: ") and says in msg and "\n" not in msg, msg


def test_the_monitor_refuses_a_bad_file_at_creation_before_any_thread_or_store(tmp_path):
    path = _file(tmp_path, '[[channel]]\ntype = "webhook"\n')
    with pytest.raises(ValueError, match="missing url"):
        Monitor(tmp_path / "run", alerts=str(path))
    assert not (tmp_path / "run").exists()  # the leak fixture checks that no thread was left behind


def test_stethoscope_alerts_names_the_file_a_monitor_reads(tmp_path, monkeypatch):
    jsonl = tmp_path / "out.jsonl"
    monkeypatch.setenv("STETHOSCOPE_ALERTS", str(_file(tmp_path, f'[[channel]]\ntype = "jsonl"\npath = "{jsonl}"\n')))
    with Monitor(tmp_path / "run", strict=True) as mon:
        for step in range(30):
            mon.step(step, loss=float("nan") if step >= 10 else 2.0)
    assert jsonl.read_text().count('"kind": "trigger"') == 1
    monkeypatch.setenv("STETHOSCOPE_ALERTS", str(tmp_path / "missing.toml"))
    with pytest.raises(ValueError, match="no such alerts file"):
        Monitor(tmp_path / "run2")
    assert os.environ["STETHOSCOPE_ALERTS"].endswith("missing.toml")
    Monitor(tmp_path / "run3", alerts=False).close()  # False: none, whatever the environment says


def test_a_monitor_without_alerts_imports_no_channel(tmp_path):
    import subprocess
    import sys
    import textwrap

    from tests.conftest import REPO

    code = textwrap.dedent(f"""
        import sys
        from stethoscope import Monitor
        Monitor({str(tmp_path / 'run')!r}, serve=False).close()  # the probe server's http.server loads http.client
        print(sorted(m for m in ("stethoscope.act", "smtplib", "http.client") if m in sys.modules))
    """)
    env = {k: v for k, v in os.environ.items() if k != "STETHOSCOPE_ALERTS"}
    env["PYTHONPATH"] = str(REPO / "src")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == "[]", res.stdout + res.stderr
