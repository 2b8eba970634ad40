"""The paper's Table 1 as `PaperNumber`s."""

from __future__ import annotations

from dubito.experiments.base import PaperNumber

# ---------------------------------------------------------------------------------- paper

#: Table 1 (small comma2k19 validation set, n = 10,472): MAE, MSE, Accuracy I, II (%).
TABLE1 = {
    "Naive": (2.16, 14.61, 93.21, 65.12),
    "Deterministic": (1.42, 6.43, 98.19, 79.61),
    "IC-NLM ridge NUTS": (1.34, 6.28, 98.08, 82.22),
    "IC-NLM ridge VI": (1.34, 6.28, 98.08, 82.21),
    "IC-NLM horseshoe NUTS": (1.29, 5.67, 98.21, 82.75),
    "IC-NLM horseshoe VI": (1.29, 5.66, 98.21, 82.73),
    "MC dropout": (1.41, 6.35, 98.37, 80.08),
    "MDN": (1.36, 6.63, 98.16, 81.91),
}
TABLE1_NOTE = "not comparable (comma2k19 wheel degrees vs CarRacing road-wheel degrees; spec §5); no tolerance"


def _paper_numbers() -> tuple[PaperNumber, ...]:
    out = []
    for variant, (mae, mse, acc1, acc2) in TABLE1.items():
        src = "Table 1" + (" (HMC)" if "NUTS" in variant else "")
        for metric, value in (("mae", mae), ("mse", mse), ("acc_I", acc1 / 100), ("acc_II", acc2 / 100)):
            note = TABLE1_NOTE
            if metric.startswith("acc"):
                note = f"paper: {value * 100:.2f} % at {'6' if metric == 'acc_I' else '2'} deg, ours at the mapped " \
                       f"threshold; {TABLE1_NOTE}"
            out.append(PaperNumber("driving", variant, metric, value, None, None, src, note))
    return tuple(out)
