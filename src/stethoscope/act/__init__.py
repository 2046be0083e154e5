"""Act on findings: rules turn incidents into alerts, channels deliver them off the training thread.

    from stethoscope.act import AlertsConfig, Slack, Webhook
    mon = Monitor("runs/exp1", alerts=[Slack(os.environ["SLACK_WEBHOOK_URL"]), Webhook(url, min_severity="error")])
    mon = Monitor("runs/exp1", alerts="alerts.toml")   # or STETHOSCOPE_ALERTS=alerts.toml

`stethoscope alerts RUN` lists what was sent, to whom, and what failed.
"""

from stethoscope.act.alert import Alert
from stethoscope.act.channels import (
    Channel,
    Console,
    DeliveryError,
    Email,
    FanOut,
    JsonlFile,
    MemoryChannel,
    NullChannel,
    PagerDuty,
    Slack,
    Webhook,
)
from stethoscope.act.config import AlertsConfig, load_alerts, resolve_alerts
from stethoscope.act.rules import AlertRules, RuleConfig

__all__ = ["Alert", "AlertRules", "AlertsConfig", "Channel", "Console", "DeliveryError", "Email", "FanOut",
           "JsonlFile", "MemoryChannel", "NullChannel", "PagerDuty", "RuleConfig", "Slack", "Webhook", "load_alerts",
           "resolve_alerts"]
