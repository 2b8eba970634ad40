"""What every estimator shares: its seeds and its torch device.

(Growing into the one estimator base of issue 19: input checks, standardisation, validated
fitting (`dubito.early_stopping`), persistence and diagnostics move here as they are unified.)
"""

from __future__ import annotations

import numpy as np
import torch
from sklearn.utils import check_random_state

__all__ = ["check_device", "seed_base", "seeds_from"]


def seed_base(random_state) -> int:
    """The int a fit derives all its random streams from: ``random_state`` itself when it is an
    int, else one draw of ``check_random_state(random_state)`` (None: fresh entropy)."""
    if isinstance(random_state, (int, np.integer)) and not isinstance(random_state, bool):
        return int(random_state)
    return int(check_random_state(random_state).randint(0, 2**31 - 1))


def seeds_from(random_state, k: int) -> list[int]:
    """k independent 63-bit seeds from ``random_state`` (None, int or numpy RandomState):
    the children of ``numpy.random.SeedSequence(seed_base(random_state))``."""
    children = np.random.SeedSequence(seed_base(random_state)).spawn(k)
    return [int(c.generate_state(1, np.uint64)[0] >> np.uint64(1)) for c in children]


def check_device(device) -> torch.device:
    """``device`` as a ``torch.device``; one ValueError for a malformed name or CUDA that is absent."""
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be a torch device string such as 'cpu' or 'cuda', got {device!r}: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={device!r} but CUDA is not available here; use device='cpu'")
    return dev
