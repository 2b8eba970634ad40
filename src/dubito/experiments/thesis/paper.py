"""The thesis' Table 4.1 and Laplace table as `PaperNumber`s, with the values it flags as unreliable."""

from __future__ import annotations

from dubito.experiments.base import PaperNumber
from dubito.experiments.thesis.vocab import DATASETS

# ---------------------------------------------------------------------------------- paper numbers

_COLS = ("accuracy", "brier", "nll", "ece", "ece_ood", "mce", "mce_ood", "miss_auroc", "ood_auroc", "miss_aupr",
         "ood_aupr")
#: Table 4.1 (§4.2.3): (mean, sd over 3 seeds) in the order of _COLS; ensembles without sd
TABLE41 = {
    "ori": ((0.568, .008), (0.722, .019), (3.242, .340), (0.304, .016), (0.633, .065), (0.461, .027), (0.362, .025),
            (0.750, .007), (0.664, .011), (0.802, .008), (0.751, .018)),
    "cdp": ((0.577, .008), (0.594, .013), (2.088, .181), (0.124, .023), (0.288, .048), (0.206, .015), (0.374, .018),
            (0.775, .008), (0.783, .022), (0.825, .007), (0.850, .022)),
    "mdp": ((0.599, .023), (0.566, .020), (1.940, .064), (0.114, .012), (0.383, .046), (0.199, .016), (0.367, .023),
            (0.780, .011), (0.709, .004), (0.838, .013), (0.788, .006)),
    "ensemble_cdp": ((0.604, None), (0.534, None), (1.452, None), (0.044, None), (0.042, None), (0.086, None),
                     (0.093, None), (0.798, None), (0.811, None), (0.845, None), (0.868, None)),
    "ensemble_mdp": ((0.645, None), (0.496, None), (1.389, None), (0.032, None), (0.170, None), (0.058, None),
                     (0.227, None), (0.789, None), (0.653, None), (0.875, None), (0.754, None)),
}
#: the Laplace table (§4.2.4, unnumbered; KFAC on trained cdp/mdp, scale 1, damping 15)
LAPLACE_TABLE = {
    "laplace_cdp": ((0.576, .009), (0.602, .011), (2.322, .350), (0.129, .058), (0.341, .157), (0.235, .073),
                    (0.406, .070), (0.779, .004), (0.782, .017), (0.826, .007), (0.849, .016)),
    "laplace_mdp": ((0.598, .024), (0.567, .018), (1.970, .117), (0.104, .018), (0.352, .061), (0.179, .029),
                    (0.352, .038), (0.776, .012), (0.711, .005), (0.837, .015), (0.798, .005)),
}
#: spec pitfalls 7-8: cells not to target
UNRELIABLE = {
    ("ori", "ece_ood"): "impossible: ECE w. OOD > MCE w. OOD (spec pitfall 7; columns swapped or another protocol)",
    ("mdp", "ece_ood"): "impossible: ECE w. OOD > MCE w. OOD (spec pitfall 7)",
    ("ori", "mce_ood"): "impossible pair with ECE w. OOD (spec pitfall 7)",
    ("mdp", "mce_ood"): "impossible pair with ECE w. OOD (spec pitfall 7)",
    ("ensemble_mdp", "accuracy"): "scrambled in the extraction; mapping uncertain (spec §4)",
    ("ensemble_mdp", "brier"): "scrambled in the extraction; mapping uncertain (spec §4)",
    ("ensemble_mdp", "nll"): "scrambled in the extraction; mapping uncertain (spec §4)",
}


def _paper_numbers() -> tuple[PaperNumber, ...]:
    out = []
    for ds in DATASETS:
        for table, src in ((TABLE41, "Table 4.1"), (LAPLACE_TABLE, "Laplace table §4.2.4")):
            for variant, vals in table.items():
                for key, (mean, sd) in zip(_COLS, vals):
                    bad = UNRELIABLE.get((variant, key))
                    note = "UniHB (not our data): compare directions, not values"
                    if key.startswith(("miss_", "ood_")):
                        note += "; measure unstated, ours conf (miss) / MI (OOD; conf for ori)"
                    if bad:
                        note = f"{FLAG_UNRELIABLE} unreliable: {bad}"
                    out.append(PaperNumber(ds, variant, key, float(mean), None if bad else sd, None, src,
                                           note + ("" if sd is not None else "; single value (no ±)")))
    return tuple(out)


FLAG_UNRELIABLE = "†"
