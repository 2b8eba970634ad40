r"""Small classifiers with the thesis's head and dropout sites, and dropout insertion for user models.

Layout (spec §5.2, the thesis's ResNet50 + 3 FC head at small width, §2.2):

    feature block -> [D] FC(h1) ReLU -> [D] FC(h2) ReLU -> [D] FC(h3) ReLU -> [D] FC(K)

with a dropout site [D] on the input of each head layer (4 sites: "at the flatten layer and these
three new FC layers", spec §2.2) and none inside the feature block (the thesis keeps the backbone
deterministic). Feature block:

* ``"mlp"``: FC(p -> ``features``) ReLU (spec §5.2: "MLP 64 -> 256");
* ``"cnn"``: 2 x [conv 3x3 (padding 1) -> BatchNorm -> ReLU -> max-pool 2] with ``channels``
  (16, 32) [R ours], then flatten (spec §5.2: "a 2-conv CNN"). Input (B, C, H, W); H, W >= 4.

Defaults ``features = 256`` and ``hidden = (256, 256, 256)`` are the spec's §5.2 widths. Each
[D] is `BernoulliDropout`, `ConcreteDropout` or `MultiDrop` *wrapping* the FC layer it feeds (so
its regulariser sees that layer's weight); ``dropout="none"`` gives the same net without dropout
(the "ori" baseline, spec §2.2). Initialisation: PyTorch's defaults (seed torch's generator).
"""

from __future__ import annotations

from collections.abc import Sequence

from torch import nn

from dubito.nn.concrete_dropout import (
    BernoulliDropout,
    ConcreteDropout,
    StochasticDropout,
)
from dubito.nn.multidrop import MultiDrop

__all__ = ["CNN_CHANNELS", "DROPOUTS", "build_network", "insert_dropout", "make_dropout"]

#: The dropout variants of `MCDropoutClassifier` ("none" = the deterministic "ori" baseline).
DROPOUTS = ("bernoulli", "concrete", "multidrop", "none")

#: Channels of the two convolutions of the "cnn" feature block [R ours].
CNN_CHANNELS = (16, 32)


def _is_module_network(network) -> bool:
    """Whether ``network`` is a user's network (an nn.Module or a callable returning one), not a built-in name."""
    return isinstance(network, nn.Module) or (callable(network) and not isinstance(network, str))


def make_dropout(kind: str, layer: nn.Module, *, p: float = 0.1, temperature: float = 0.1,
                 weight_regularizer: float = 3.5e-6, dropout_regularizer: float | None = None,
                 weight_term: str = "kl", mc_sampler: str = "relaxed") -> nn.Module:
    """``layer`` wrapped by the dropout of ``kind`` (``p`` = the fixed rate, or the initial rate of
    the learned ones); ``"none"`` returns ``layer`` itself."""
    if kind == "bernoulli":
        return BernoulliDropout(p, layer, weight_regularizer=weight_regularizer)
    if kind == "concrete":
        return ConcreteDropout(layer, init_p=p, temperature=temperature, weight_regularizer=weight_regularizer,
                               dropout_regularizer=dropout_regularizer, weight_term=weight_term,
                               mc_sampler=mc_sampler)
    if kind == "multidrop":
        return MultiDrop(layer, init_p=p, temperature=temperature, weight_regularizer=weight_regularizer,
                         dropout_regularizer=dropout_regularizer, weight_term=weight_term, mc_sampler=mc_sampler)
    if kind == "none":
        return layer
    raise ValueError(f"dropout must be one of {list(DROPOUTS)}, got {kind!r}")


def _feature_block(network: str, n_features: int, features: int, image_shape) -> tuple[nn.Module, int]:
    if network == "mlp":
        return nn.Sequential(nn.Linear(n_features, features), nn.ReLU()), features
    c, h, w = image_shape
    if h < 4 or w < 4:
        raise ValueError(f"network='cnn' pools twice by 2, so images need H, W >= 4; image_shape is {image_shape}")
    c1, c2 = CNN_CHANNELS
    block = nn.Sequential(
        nn.Conv2d(c, c1, 3, padding=1), nn.BatchNorm2d(c1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(c1, c2, 3, padding=1), nn.BatchNorm2d(c2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
    )
    return block, c2 * (h // 4) * (w // 4)


def build_network(network: str, n_features: int, n_classes: int, *, dropout: str = "bernoulli", p: float = 0.1,
                  features: int = 256, hidden: Sequence[int] = (256, 256, 256), image_shape=None,
                  **dropout_kwargs) -> nn.Sequential:
    """The module docstring's network: (B, p) for "mlp" or (B, C, H, W) for "cnn" -> (B, K) logits."""
    if network not in ("mlp", "cnn"):
        raise ValueError(f"network must be 'mlp', 'cnn' or a torch nn.Module, got {network!r}")
    if network == "cnn" and image_shape is None:
        raise ValueError("network='cnn' needs image_shape=(C, H, W)")
    block, width = _feature_block(network, n_features, features, image_shape)
    layers: list[nn.Module] = [block]
    widths = (width, *hidden)
    for i in range(len(hidden)):
        layers += [make_dropout(dropout, nn.Linear(widths[i], widths[i + 1]), p=p, **dropout_kwargs), nn.ReLU()]
    layers.append(make_dropout(dropout, nn.Linear(widths[-1], n_classes), p=p, **dropout_kwargs))
    return nn.Sequential(*layers)


def insert_dropout(model: nn.Module, kind: str, **kwargs) -> nn.Module:
    """Wrap the head of ``model`` (its last ``nn.Linear`` in registration order) in place by the
    dropout of ``kind``, i.e. dropout on the head's input (the thesis: a pretrained backbone with a
    new head). Returns ``model`` (unchanged if the head already sits in one of our dropout
    layers). A model without an ``nn.Linear`` raises ValueError."""
    if kind == "none":
        raise ValueError("insert_dropout needs a dropout kind ('bernoulli', 'concrete' or 'multidrop'), got 'none'")
    wrapped = {id(m.layer) for m in model.modules() if isinstance(m, StochasticDropout)}
    found = None
    for qualname, module in model.named_modules():  # depth-first: the head comes last
        if isinstance(module, nn.Linear) and qualname:
            found = qualname
    if found is None:
        raise ValueError(f"insert_dropout found no nn.Linear head in {type(model).__name__} to put dropout before; "
                         "add dropout layers yourself (e.g. dubito.nn.concrete_dropout.ConcreteDropout(head))")
    parent_name, _, name = found.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    head = getattr(parent, name)
    if id(head) in wrapped:  # the head already has one of our dropout layers on its input
        return model
    setattr(parent, name, make_dropout(kind, head, **kwargs))
    return model
