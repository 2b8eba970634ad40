"""torch building blocks: batched ensemble layers, the dropout MLP and PilotNet (images), learned-rate
dropout layers (concrete, Multi-Drop) and the flat-parameter MLP of the HyVI methods."""
from dubito.nn.batched import BatchedGaussianMLP, BatchedLinear, gaussian_nll, member_permutations
from dubito.nn.concrete_dropout import BernoulliDropout, ConcreteDropout, mc_mode, regularization
from dubito.nn.dropout_mlp import MLP
from dubito.nn.flat_mlp import FlatMLP
from dubito.nn.multidrop import MultiDrop
from dubito.nn.pilotnet import PilotNet

__all__ = ["BatchedLinear", "BatchedGaussianMLP", "BernoulliDropout", "ConcreteDropout", "FlatMLP", "MLP",
           "MultiDrop", "PilotNet", "gaussian_nll", "mc_mode", "member_permutations", "regularization"]
