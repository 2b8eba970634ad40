"""dubito.graphed_steps on a machine without CUDA: the step runs as it is, the optimiser is left
alone, learning rates change in place where they are tensors. The graph capture itself is
tested against the eager loop in tests/test_cuda.py (skipped without a GPU)."""

import torch

from dubito import io
from dubito.graphed_steps import GraphedSteps, graphs_enabled, prepare_optimizer, set_learning_rate


def test_graphs_only_on_cuda_and_switchable(monkeypatch):
    assert not graphs_enabled("cpu")
    assert graphs_enabled("cuda")
    monkeypatch.setenv("DUBITO_CUDA_GRAPHS", "0")
    assert not graphs_enabled("cuda")


def test_cpu_runner_calls_the_step_every_time():
    calls = []

    def step(idx):
        calls.append(idx.clone())
        return idx.double().sum()

    run = GraphedSteps(step, device="cpu")
    for start in (0, 4, 8):  # two full batches and a partial one
        out = run(torch.arange(start, min(start + 4, 10)))
        assert out.item() == sum(range(start, min(start + 4, 10)))
    assert len(calls) == 3 and not run.captured


def test_prepare_optimizer_leaves_a_cpu_optimizer_alone_and_makes_cuda_ones_capturable():
    p = torch.nn.Parameter(torch.zeros(3))
    opt = torch.optim.Adam([p], lr=0.1)
    prepare_optimizer(opt, "cpu")
    assert opt.param_groups[0]["lr"] == 0.1 and not opt.param_groups[0]["capturable"]
    # what prepare_optimizer does on "cuda", checked here on the CPU: a tensor rate, set in place
    opt.param_groups[0]["lr"] = torch.tensor(0.1, dtype=torch.float64)
    rate = opt.param_groups[0]["lr"]
    set_learning_rate(opt, 0.025)
    assert opt.param_groups[0]["lr"] is rate and rate.item() == 0.025
    sgd = torch.optim.SGD([p], lr=0.1)
    set_learning_rate(sgd, 0.5)
    assert sgd.param_groups[0]["lr"] == 0.5


def test_prepare_optimizer_uses_the_multi_tensor_adam_with_the_same_arithmetic():
    """foreach=True is the faster implementation; it must train to the very same weights."""
    torch.manual_seed(0)
    X, y = torch.randn(64, 5), torch.randn(64, 1)
    weights = []
    for foreach in (None, False):
        torch.manual_seed(1)
        net = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.ReLU(), torch.nn.Linear(16, 1))
        opt = torch.optim.Adam(net.parameters(), lr=1e-2, weight_decay=1e-3, foreach=foreach)
        if foreach is None:
            prepare_optimizer(opt, "cpu")
            assert opt.param_groups[0]["foreach"] is True
        for _ in range(50):
            opt.zero_grad()
            ((net(X) - y) ** 2).mean().backward()
            opt.step()
        weights.append(torch.cat([q.detach().flatten() for q in net.parameters()]))
    assert torch.equal(weights[0], weights[1])
    fused = torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))], fused=True)
    prepare_optimizer(fused, "cpu")  # a fused optimiser is left as it is (foreach and fused exclude each other)
    assert not fused.param_groups[0]["foreach"]


def test_a_tensor_learning_rate_is_written_to_checkpoints_as_a_number():
    assert io.json_value({"lr": torch.tensor(0.25), "betas": (0.9, 0.999)}) == {"lr": 0.25, "betas": [0.9, 0.999]}
