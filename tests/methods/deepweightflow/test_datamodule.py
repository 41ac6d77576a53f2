"""The weights DataModule: train/held-out split, flatten/unflatten round trip, optional PCA, bad sizes."""

from __future__ import annotations

import pytest
import torch

from litlab.core.errors import LitlabError
from litlab.datamodules.weights import WeightsDataModule, Zoo, flatten_params, unflatten_params
from litlab.methods.deepweightflow.zoo import train_zoo


@pytest.fixture(scope="module")
def zoo() -> Zoo:
    return train_zoo("mlp_4_16_3", "iris", 10, 1, 16, 1e-2, 0)


def test_vectors_round_trip_with_and_without_pca(zoo: Zoo) -> None:
    plain = WeightsDataModule(lambda: zoo, n_train=6, batch_size=2)
    plain.setup()
    assert plain.space.dim == 4 * 16 + 16 + 16 * 3 + 3 and len(plain.space.heldout) == 4
    flat = flatten_params(zoo.params)
    for k, v in unflatten_params(flat, plain.space.shapes).items():
        assert torch.equal(v, zoo.params[k])
    (batch,) = next(iter(plain.train_dataloader()))
    assert batch.shape == (2, plain.space.dim)
    reduced = WeightsDataModule(lambda: zoo, n_train=6, pca_components=5, batch_size=2)
    reduced.setup()
    assert reduced.space.dim == 5
    decoded = reduced.space.decode(reduced.space.encode(reduced.space.train.params))
    for k, v in decoded.items():  # 5 components span 6 centred training vectors (rank 5)
        torch.testing.assert_close(v, zoo.params[k][:6], atol=1e-4, rtol=0)


def test_bad_sizes_say_what_to_do(zoo: Zoo) -> None:
    with pytest.raises(LitlabError, match="n_train"):
        WeightsDataModule(lambda: zoo, n_train=10).setup()
    with pytest.raises(LitlabError, match="pca_components"):
        WeightsDataModule(lambda: zoo, n_train=6, pca_components=50).setup()
