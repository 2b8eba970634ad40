"""torch building blocks (batched ensemble layers; more to come: MLP, Gaussian head, dropout)."""
from dubito.nn.batched import BatchedGaussianMLP, BatchedLinear, gaussian_nll, member_permutations

__all__ = ["BatchedLinear", "BatchedGaussianMLP", "gaussian_nll", "member_permutations"]
