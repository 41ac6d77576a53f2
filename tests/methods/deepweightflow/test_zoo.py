"""Batched zoo training equals independent per-network training; zoos round-trip through safetensors;
BatchNorm statistics are recomputed exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from litlab.core.errors import LitlabError
from litlab.datamodules.weights import classification_data, load_zoo, save_zoo
from litlab.methods.deepweightflow.architectures import batched_logits, build_network, recompute_batchnorm
from litlab.methods.deepweightflow.canonical import align_zoo
from litlab.methods.deepweightflow.zoo import train_zoo

ARCH = {"name": "mlp", "sizes": [4, 8, 3]}


def test_batched_training_equals_independent_runs() -> None:
    epochs, batch, lr, seed, n = 2, 16, 1e-2, 3, 3
    zoo = train_zoo(ARCH, "iris", n, epochs, batch, lr, seed)
    data = classification_data("iris")
    count = len(data.y_train)
    generator = torch.Generator().manual_seed(seed)
    orders = [torch.rand(n, count, generator=generator).argsort(1) for _ in range(epochs)]
    for i in range(n):
        torch.manual_seed(seed + i)
        net = build_network(ARCH)
        optimizer = torch.optim.Adam(net.parameters(), lr=lr)
        for order in orders:
            for start in range(0, count - batch + 1, batch):
                index = order[i, start : start + batch]
                loss = torch.nn.functional.cross_entropy(net(data.x_train[index]), data.y_train[index])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        for name, value in net.state_dict().items():
            torch.testing.assert_close(zoo.params[name][i], value, atol=1e-5, rtol=1e-5)
        accuracy = (net(data.x_test).argmax(1) == data.y_test).float().mean()
        assert abs(float(accuracy) - float(zoo.accuracy[i])) < 1e-6


def test_zoo_round_trips_through_files(tmp_path: Path) -> None:
    zoo = train_zoo(ARCH, "iris", 4, 1, 16, 1e-2, 0)
    loaded = load_zoo(save_zoo(zoo, tmp_path / "zoo"))
    assert loaded.seeds == zoo.seeds and loaded.arch == zoo.arch and loaded.dataset == "iris"
    torch.testing.assert_close(loaded.accuracy, zoo.accuracy)
    for k in zoo.params:
        assert torch.equal(loaded.params[k], zoo.params[k])
    with pytest.raises(LitlabError, match="no zoo"):
        load_zoo(tmp_path / "missing")


def test_recomputed_batchnorm_statistics_are_the_data_statistics() -> None:
    arch = {"name": "cnn", "channels": 4}
    torch.manual_seed(0)
    nets = [build_network(arch) for _ in range(2)]
    names = [k for k in nets[0].state_dict() if "num_batches" not in k]
    params = {k: torch.stack([n.state_dict()[k] for n in nets]) for k in names}
    x = torch.rand(40, 64)
    fresh = recompute_batchnorm(arch, params, x)
    for i, net in enumerate(nets):
        features = net.conv1(x.reshape(-1, 1, 8, 8))  # what bn1 normalises
        mean = features.mean((0, 2, 3))
        torch.testing.assert_close(fresh["bn1.running_mean"][i], mean, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(
            fresh["bn1.running_var"][i], features.var((0, 2, 3), unbiased=True), atol=1e-5, rtol=1e-5
        )
    assert torch.equal(fresh["conv1.weight"], params["conv1.weight"])


@pytest.mark.parametrize(
    "arch",
    [
        {"name": "mlp", "sizes": [64, 16, 10]},
        {"name": "cnn", "channels": 4},
        {"name": "vit", "dim": 16, "heads": 2},
    ],
)
def test_canonicalised_zoo_keeps_every_network_function(arch: dict) -> None:
    zoo = train_zoo(arch, "digits", 3, 1, 256, 1e-2, 0)
    aligned = align_zoo(zoo)
    data = classification_data("digits")
    before = batched_logits(build_network(arch).eval(), zoo.params, data.x_test[:64])
    after = batched_logits(build_network(arch).eval(), aligned.params, data.x_test[:64])
    torch.testing.assert_close(after, before, atol=1e-5, rtol=1e-5)
    assert aligned.canonical and aligned.reference == 0
    for k in zoo.params:
        assert torch.equal(aligned.params[k][0], zoo.params[k][0])  # the reference is left unchanged
