"""Where alerts go: console, JSONL file, webhook, Slack, PagerDuty, email; plus null, fan-out and memory."""

from stethoscope.act.channels.base import Channel, DeliveryError, FanOut, NullChannel
from stethoscope.act.channels.console import Console
from stethoscope.act.channels.email import Email
from stethoscope.act.channels.jsonl import JsonlFile
from stethoscope.act.channels.memory import MemoryChannel
from stethoscope.act.channels.pagerduty import PagerDuty
from stethoscope.act.channels.slack import Slack
from stethoscope.act.channels.webhook import Webhook

__all__ = ["Channel", "Console", "DeliveryError", "Email", "FanOut", "JsonlFile", "MemoryChannel", "NullChannel",
           "PagerDuty", "Slack", "Webhook"]
