"""What `stethoscope explain` knows: one Signature per failure, kept as data.

Each record holds the regexes that recognise a failure, its finding type and severity, ranked causes
and fixes, and an optional parser that pulls the numbers out of the matching lines (OOM sizes, NCCL
sequence numbers, Xid codes, exit codes, …). The engine that applies them is `diagnose.logs`.

Roles: a `root` failure is a cause; a `symptom` (an NCCL timeout, a remote NCCL error) usually follows
another rank's failure; a `wrapper` (torchrun's ChildFailedError) only reports that a child died.
`supersedes` names less specific signatures that the same lines also match.
"""

from __future__ import annotations

from stethoscope.diagnose.log_model import Detail, Hit, Line, Signature, ranks_of
from stethoscope.diagnose.parsers_device import is_fragmented
from stethoscope.diagnose.signatures_device import DEVICE_SIGNATURES
from stethoscope.diagnose.signatures_process import PROCESS_SIGNATURES

__all__ = ["SIGNATURES", "Detail", "Hit", "Line", "Signature", "is_fragmented", "ranks_of"]

# Order matters: earlier signatures win ties; the halves are kept in their original order.
SIGNATURES: tuple[Signature, ...] = DEVICE_SIGNATURES + PROCESS_SIGNATURES
