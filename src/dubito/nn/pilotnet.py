r"""PilotNet (Bojarski et al. 2016), scaled to small grey frames, with MC-dropout passes.

Bojarski, M. et al., "End to End Learning for Self-Driving Cars" (arXiv:1604.07316, 2016),
Fig. 4; the IC-NLM paper's network (spec ``shared/specs/icnlm.md`` §2.2 [C]) and its
benchmarks' trunk (§3.3 [C]); the scaled-down version of spec §5 (substitute data 2: "same
layer pattern, 10-unit ReLU last hidden layer").

``PilotNet(image_shape, hidden, out_features)`` maps flattened channel-first images
(n, C*H*W) -> (n, out_features):

    5 convolutions   24@5x5/2, 36@5x5/2, 48@5x5/2, 64@3x3/1, 64@3x3/1, each act(conv(h))
                     followed by dropout p,
    flatten,
    dense tail       `dubito.nn.dropout_mlp.MLP(flat, hidden, out_features, activation, p)`:
                     hidden layers act(W h + b) + dropout p, then a linear output.

Layer table for the default 64x64 grey frames (``dubito.data.load("driving")``), hidden
(100, 50, 10) (multiply-accumulates per image):

    layer     out shape     params    MACs
    input     1 x 64 x 64
    conv 1   24 x 30 x 30      624    0.54 M
    conv 2   36 x 13 x 13   21,636    3.65 M
    conv 3   48 x  5 x  5   43,248    1.08 M
    conv 4   64 x  3 x  3   27,712    0.25 M
    conv 5   64 x  1 x  1   36,928    0.04 M
    dense   100 / 50 / 10   12,060    0.01 M
    output    1                 11
    total                  142,219    5.57 M

(66x200 RGB, the paper's frames, gives its table: 31x98, 14x47, 5x22, 3x20, 1x18.)

Choices and their sources:

* Convolutions are "valid" (unpadded), as PilotNet's. Along an image axis shorter than the
  kernel (small images: 16x16 gives 6, 1, 1, 1, 1) the kernel is cut to the axis, so the
  layer has one output position and every weight sees data (zero padding would leave weights
  that only ever see zeros while counting in the fan-in of the initialisation); a 1x1 input
  gets a 1x1 kernel, a dense layer over channels. So the layer pattern never collapses.
  `conv_table` gives the resulting shapes.
* ReLU by default: "all activations are ReLU" (spec §2.2 [P]).
* No batch norm: the paper's IC-NLM network has BN after each convolution, but the MC-dropout
  benchmark has none (spec §3.3 [C]); we use one network for all baselines, and without BN
  a row's output never depends on the other rows of its batch. The PilotNet normalisation
  layer is the estimators' input scaling (one scalar mean and sd over all pixels).
* No 1164-unit dense layer: the default tail (100, 50, 10) is the one of the tabular
  baselines, and the flatten here has 64 values (1,152 in the paper).
* Dropout p after every convolution and every hidden dense layer, none on the output: the
  MC-dropout benchmark's "dropout 0.05 after every conv and dense layer" (spec §3.3 [C]).
  The masks are **per unit** (one Bernoulli per channel and position, Keras' ``Dropout``
  after ``Conv2D`` as in the benchmark's code), not per channel (spatial dropout), so that
  training and MC prediction use the benchmark's q(omega).
* Initialisation: PyTorch's defaults U(-1/sqrt(fan_in), 1/sqrt(fan_in)) from an optional CPU
  ``generator`` (`dubito.nn.dropout_mlp.init_uniform_`), convolutions first, then the tail.

Dropout modes (inverted dropout, as `MLP`): training mode without masks draws a mask per row
and unit from the ``generator`` given to ``forward``; ``sample_masks(T, generator)`` draws T
masks (one (T, C_l, H_l, W_l) tensor per convolution, then one (T, width) per hidden dense
layer), each ONE thinned network shared by every input row, and ``forward(x, masks)``
evaluates all T at once, (n, C*H*W) -> (T, n, out).

Cost of a masked pass: the first convolution runs once on the n rows; every later layer runs
on T n rows, so it holds about T n max_l(C_l H_l W_l) numbers per activation (21,600 per
(mask, row) at 64x64; a CPU convolution's unfolded input, up to 101,400, see
`activation_width`) and costs about T n x 5 M MACs (measured: 1.0-2.3 ms per (mask, 64x64 frame)
in float64 on one CPU thread). Callers chunk rows and masks (`dubito.regression.MCDropoutRegressor`
walks blocks of about 2^18 numbers on a CPU). The T masks themselves hold
sum_l C_l H_l W_l + sum(hidden) numbers each (29,684 at 64x64: 0.24 GB in float64 for
T = 1000). On a CPU in float64 a convolution treats each image on its own, so the T passes
equal T single-mask calls (on the same rows) bit for bit; on a GPU they agree to rounding.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import torch
from torch import nn

from dubito.nn.batched import ACTIVATIONS
from dubito.nn.dropout_mlp import MLP, init_uniform_

__all__ = ["CONV_LAYERS", "PilotNet", "activation_width", "check_image_shape", "conv_table"]

#: PilotNet's convolutions (Bojarski et al. 2016, Fig. 4; spec §2.2 [C]): (channels, kernel, stride).
CONV_LAYERS = ((24, 5, 2), (36, 5, 2), (48, 5, 2), (64, 3, 1), (64, 3, 1))


def check_image_shape(image_shape, name: str = "image_shape") -> tuple[int, int, int]:
    """(C, H, W) of positive ints; (H, W) means one channel. One ValueError otherwise."""
    dims = tuple(image_shape) if isinstance(image_shape, (tuple, list)) else ()
    if (len(dims) not in (2, 3) or any(isinstance(d, bool) or not isinstance(d, numbers.Integral) for d in dims)
            or min(dims) < 1):
        raise ValueError(
            f"{name} must be (C, H, W) or (H, W) of positive ints (the frame shape of the flattened "
            f"channel-first images, e.g. ds.meta['frame_shape']), got {image_shape!r}"
        )
    dims = tuple(int(d) for d in dims)
    return dims if len(dims) == 3 else (1, *dims)


def conv_table(image_shape) -> list[dict]:
    """One dict per convolution: in_channels, channels, kernel (kh, kw), stride, out_shape (C, H, W).

    Valid (unpadded) convolutions; along an axis shorter than PilotNet's kernel the kernel is
    cut to the axis (kernel = min(k, size), so one output position), never padded.
    """
    c, h, w = check_image_shape(image_shape)
    table = []
    for channels, k, stride in CONV_LAYERS:
        kh, kw = min(k, h), min(k, w)
        oh, ow = (h - kh) // stride + 1, (w - kw) // stride + 1
        table.append(dict(in_channels=c, channels=channels, kernel=(kh, kw), stride=stride,
                          out_shape=(channels, oh, ow)))
        c, h, w = channels, oh, ow
    return table


def activation_width(image_shape, hidden: Sequence[int] = ()) -> int:
    """The most numbers one input row holds at once in any layer, for sizing chunks of rows:
    max over the input C H W, each convolution's output C_l H_l W_l and its unfolded input
    C_{l-1} k_l^2 H_l W_l (the im2col buffer of a CPU convolution; 101,400 for conv 2 at
    64x64, the maximum), and the hidden widths."""
    table = conv_table(image_shape)
    sizes = [math.prod(check_image_shape(image_shape))]
    for t in table:
        sizes += [math.prod(t["out_shape"]), t["in_channels"] * math.prod(t["kernel"]) * math.prod(t["out_shape"][1:])]
    return max([*sizes, *hidden])


class PilotNet(nn.Module):
    """PilotNet conv trunk + `MLP` tail on flattened (n, C*H*W) images; see the module docstring.

    ``forward(x, masks=None, generator=None)``:

    * ``masks`` given (from `sample_masks`: 5 conv masks then one per hidden dense layer):
      x is (n, C*H*W) or (T, n, C*H*W); returns (T, n, out);
    * else, in training mode with ``dropout > 0``: per-row masks from ``generator``; (n, out);
    * else (evaluation): no dropout; (n, out).

    ``features(x)``: (n, hidden[-1]), the last hidden layer after its activation, no dropout.
    """

    def __init__(self, image_shape: tuple[int, int, int], hidden: Sequence[int] = (100, 50, 10),
                 out_features: int = 1, activation: str = "relu", dropout: float = 0.0, *, generator=None,
                 dtype=torch.float32, device="cpu"):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        if not 0.0 <= float(dropout) < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout!r}")
        self.image_shape = check_image_shape(image_shape)
        self.n_features = math.prod(self.image_shape)
        self.activation = activation
        self.dropout = float(dropout)
        self.table = conv_table(self.image_shape)
        self.conv_shapes = tuple(t["out_shape"] for t in self.table)
        self.convs = nn.ModuleList()
        for t in self.table:
            conv = nn.Conv2d(t["in_channels"], t["channels"], t["kernel"], stride=t["stride"], dtype=dtype,
                             device=device)
            init_uniform_(conv, generator)
            self.convs.append(conv)
        self.flat_features = math.prod(self.conv_shapes[-1])
        self.tail = MLP(self.flat_features, hidden, out_features, activation, dropout, generator=generator,
                        dtype=dtype, device=device)
        self.hidden = self.tail.hidden
        self.out_features = self.tail.out_features

    @property
    def activation_width(self) -> int:
        """The most numbers one row holds in any layer (for sizing chunks of rows)."""
        return activation_width(self.image_shape, self.hidden)

    def _images(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.n_features:
            raise ValueError(
                f"PilotNet for images {self.image_shape} takes rows of C*H*W = {self.n_features} values, "
                f"got {x.shape[-1]}"
            )
        return x.reshape(-1, *self.image_shape)

    def _trunk(self, x: torch.Tensor) -> torch.Tensor:
        """Convolutions without dropout, flattened: (n, C*H*W) -> (n, flat_features)."""
        act = ACTIVATIONS[self.activation]
        h = self._images(x)
        for conv in self.convs:
            h = act(conv(h))
        return h.flatten(1)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """psi(x), (n, hidden[-1]): the last hidden layer's output after its activation, with
        dropout off whatever the mode (the flattened last convolution when hidden = ())."""
        return self.tail.features(self._trunk(x))

    def sample_masks(self, n_masks: int, generator: torch.Generator | None = None,
                     dtype=torch.float64) -> list[torch.Tensor]:
        """T = ``n_masks`` dropout masks, entries 0 (dropped, probability p) or 1/(1-p): one
        (T, C_l, H_l, W_l) CPU tensor per convolution, then one (T, width) per hidden dense
        layer, drawn in that order from ``generator``."""
        keep = 1.0 - self.dropout
        conv = [
            (torch.rand((int(n_masks), *shape), generator=generator, dtype=torch.float64) >= self.dropout)
            .to(dtype) / keep
            for shape in self.conv_shapes
        ]
        return conv + self.tail.sample_masks(n_masks, generator, dtype)

    def forward(self, x: torch.Tensor, masks: Sequence[torch.Tensor] | None = None,
                generator: torch.Generator | None = None) -> torch.Tensor:
        if masks is not None:
            return self._forward_masked(x, masks)
        act = ACTIVATIONS[self.activation]
        h = self._images(x)
        for conv in self.convs:
            h = act(conv(h))
            if self.training and self.dropout > 0:
                # 0/1 in h's dtype in place: no bool mask to convert forward and back (the same values)
                kept = torch.rand(h.shape, generator=generator, dtype=h.dtype, device=h.device).ge_(self.dropout)
                h = h * kept / (1.0 - self.dropout)
        return self.tail(h.flatten(1), generator=generator)

    def _check_masks(self, masks: Sequence[torch.Tensor]) -> int:
        expected = [*self.conv_shapes, *((w,) for w in self.hidden)]
        if len(masks) != len(expected):
            raise ValueError(
                f"need one mask per convolution and per hidden layer ({len(self.conv_shapes)} + {len(self.hidden)} "
                f"= {len(expected)}, as from sample_masks), got {len(masks)}"
            )
        T = masks[0].shape[0]
        for i, (m, shape) in enumerate(zip(masks, expected)):
            if tuple(m.shape) != (T, *shape):
                raise ValueError(f"mask {i} must have shape {(T, *shape)} (T masks for that layer), "
                                 f"got {tuple(m.shape)}")
        return T

    def _forward_masked(self, x: torch.Tensor, masks: Sequence[torch.Tensor]) -> torch.Tensor:
        """All T thinned networks: (n, C*H*W) or (T, n, C*H*W) -> (T, n, out).

        The first convolution runs once on the n rows (for a 2-D x), the others on the T n
        stacked (mask, row) images; the dense tail is `MLP`'s masked pass. See the module
        docstring for the memory and the equality with single-mask calls.
        """
        act = ACTIVATIONS[self.activation]
        T = self._check_masks(masks)
        conv_masks, dense_masks = masks[: len(self.convs)], masks[len(self.convs) :]
        if x.dim() == 3 and x.shape[0] != T:
            raise ValueError(f"x holds {x.shape[0]} stacked inputs but there are T = {T} masks")
        lead, n = (T, x.shape[1]) if x.dim() == 3 else (1, x.shape[0])
        h = act(self.convs[0](self._images(x)))
        h = h.view(lead, n, *h.shape[1:]) * conv_masks[0].unsqueeze(1)  # (T, n, C, H, W)
        for conv, m in zip(self.convs[1:], conv_masks[1:]):
            h = act(conv(h.reshape(T * n, *h.shape[2:])))
            h = h.view(T, n, *h.shape[1:]) * m.unsqueeze(1)
        return self.tail._forward_masked(h.reshape(T, n, -1), dense_masks)

    def extra_repr(self) -> str:
        return (f"image_shape={self.image_shape}, hidden={self.hidden}, activation={self.activation!r}, "
                f"dropout={self.dropout}")
