"""torch building blocks: batched ensemble layers, the dropout MLP and PilotNet (images)."""
from dubito.nn.batched import BatchedGaussianMLP, BatchedLinear, gaussian_nll, member_permutations
from dubito.nn.dropout_mlp import MLP
from dubito.nn.pilotnet import PilotNet

__all__ = ["BatchedLinear", "BatchedGaussianMLP", "MLP", "PilotNet", "gaussian_nll", "member_permutations"]
