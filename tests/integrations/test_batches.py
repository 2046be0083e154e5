"""What the adapters read from a batch: token ids, counts and per-sample fingerprints, without a host sync."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from stethoscope.integrations import batches  # noqa: E402
from stethoscope.testing import count_host_reads  # noqa: E402


def test_fingerprints_name_each_sequence_and_read_nothing_back():
    ids = torch.tensor([[1, 2, 3, 4], [4, 3, 2, 1], [1, 2, 3, 4]])
    with count_host_reads() as reads:
        tokens = batches.token_tensor({"input_ids": ids, "attention_mask": torch.ones_like(ids)})
        counted = batches.count(tokens)
        prints = batches.fingerprints(tokens)
    assert reads.count == 0  # on a GPU nothing here waits for the device
    assert counted == (12, 3)
    a, b, c = prints.tolist()
    assert a == c != b and a >= 0  # the same sequence, the same id; order matters
    assert batches.fingerprints(ids[:1]).tolist() == [a]  # independent of the rest of the batch


@pytest.mark.parametrize("batch", [
    lambda x: (x, x.float()), lambda x: [x.float(), x], lambda x: {"tokens": x}, lambda x: x,
])
def test_token_ids_are_found_in_the_usual_batch_shapes(batch):
    x = torch.zeros(2, 5, dtype=torch.long)
    assert batches.token_tensor(batch(x)) is x


def test_no_token_ids_means_no_count():
    assert batches.token_tensor((torch.zeros(2, 5), torch.zeros(2, dtype=torch.long))) is None
    assert batches.count(None) == (0, 0)
