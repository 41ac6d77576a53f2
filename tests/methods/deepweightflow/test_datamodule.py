"""The weights DataModule: train/held-out split, flatten/unflatten round trip, optional PCA, bad sizes, and
the model/data contract (data_spec -> bind_data, declared metrics) with the Fitter-trained generator."""

from __future__ import annotations

import inspect
from functools import partial

import pytest
import torch

from litlab import contract
from litlab.core.errors import ConfigError, LitlabError
from litlab.datamodules.weights import WeightsDataModule, Zoo, flatten_params, unflatten_params
from litlab.methods.deepweightflow import module as module_file
from litlab.methods.deepweightflow.module import FlowMatchingGenerator
from litlab.methods.deepweightflow.training import fit_generator
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


def test_data_spec_binds_the_generator_which_declares_its_metrics(zoo: Zoo) -> None:
    data = WeightsDataModule(lambda: zoo, n_train=6, batch_size=2)
    spec = data.data_spec()
    module = FlowMatchingGenerator(partial(torch.optim.AdamW, lr=1e-3), hidden=16, ensemble_sizes=[2, 4])
    contract.check_pair(module, data)
    contract.bind(module, data)
    assert spec["dim"] == data.space.dim and module.space is data.space
    assert (
        module.net.trunk[0].in_features == spec["dim"] + 64
        and module.net.trunk[-1].out_features == spec["dim"]
    )
    contract.check_metric(module, "test/gen_acc_mean")
    assert "test/ensemble_acc_4" in module.logged_metrics()
    with pytest.raises(ConfigError, match="test/acc"):
        contract.check_metric(module, "test/acc")
    assert "trainer.datamodule" not in inspect.getsource(module_file)


def test_fit_generator_is_seeded_and_samples_whole_networks(zoo: Zoo) -> None:
    first, second = (fit_generator("flow", zoo, 6, steps=20, hidden=16, seed=3) for _ in range(2))
    for a, b in zip(first.state_dict().values(), second.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    params = first.generate(3)
    assert {k: v.shape[1:] for k, v in params.items()} == {k: v.shape[1:] for k, v in zoo.params.items()}
    with pytest.raises(LitlabError, match="unknown generator"):
        fit_generator("gan", zoo, 6, steps=1)
