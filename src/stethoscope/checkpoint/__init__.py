"""Verified checkpoints: atomic saves with a hashed manifest, retention, resume from the newest good one.

Imports no torch until a checkpoint is saved or loaded.
"""

from __future__ import annotations

from stethoscope.checkpoint.disk import CheckpointInfo
from stethoscope.checkpoint.manager import CheckpointConfig, Checkpoints

__all__ = ["CheckpointConfig", "CheckpointInfo", "Checkpoints"]
