"""The figures of one data set's section of a report: calibration, PIT and coverage from the pooled
PIT artefacts, 1-D curves, averaged curve layouts and grouped histograms (report_plots draws them)."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from dubito.experiments import report_plots as rp
from dubito.experiments.report_rows import DOT, FLAG, _Dataset, _slug
from dubito.plots import save_figure


def _plots(d: _Dataset, exp_name: str, plot_dir: Path, out_dir: Path) -> tuple[list[str], set[Path]]:
    """Draw the dataset's plots; return Markdown lines (relative links) and the files written."""

    lines: list[str] = []
    written: set[Path] = set()
    rel = plot_dir.relative_to(out_dir) if plot_dir.is_relative_to(out_dir) else plot_dir
    stem = _slug(d.name)

    def save(fig, suffix: str, alt: str):
        path = save_figure(fig, plot_dir / f"{stem}-{suffix}.png")
        written.add(path)
        lines.extend([f"![{alt}]({(rel / path.name).as_posix()})", ""])

    pits: dict[str, list[float]] = {}
    for m in d.methods:
        for r in d.rows:
            if r.method != m:
                continue
            pit = (r.artefacts or {}).get("pit")
            if not isinstance(pit, dict):
                continue
            for v, values in pit.items():
                label = d.label(m, v) if v in d.variants[m] else f"{m}{DOT}{v}"
                pits.setdefault(label, []).extend(float(x) for x in values if x is not None)
    if pits:
        lines.extend([
            "Calibration, PIT and coverage below pool the PIT values F(y) of the test points of all "
            "stored cells (splits × seeds). Coverage at level p is the fraction of PIT values in "
            "[(1 − p)/2, (1 + p)/2], i.e. of test responses inside the equal-tailed central p interval.",
            "",
        ])
        save(rp.figure_calibration(pits, title=f"{d.name}: calibration"), "calibration", f"{d.name} calibration")
        save(rp.figure_pit(pits, title=f"{d.name}: PIT histograms"), "pit", f"{d.name} PIT histograms")
        save(rp.figure_coverage(pits, title=f"{d.name}: interval coverage"), "coverage", f"{d.name} coverage")

    for m in d.methods:
        row = next((r for r in d.rows if r.method == m and "curve_1d" in (r.artefacts or {})), None)
        if row is None:
            continue
        where = f"{d.name}{DOT}{m}, split {row.split}, seed {row.seed}"
        try:
            curve = rp.check_curve_1d(row.artefacts["curve_1d"])
        except ValueError as exc:
            lines.extend([f"{FLAG} 1-D plot of {where} skipped: {exc}", ""])
            continue
        labelled = dict(row.artefacts["curve_1d"])
        labelled["variants"] = {d.label(m, v) if v in d.variants[m] else v: c for v, c in curve["variants"].items()}
        fig = rp.figure_curve_1d(labelled, title=f"{where}: data, true function, {curve['level']:.0%} predictive intervals")
        save(fig, f"curve_1d-{_slug(m)}", f"{where} predictive intervals")
    _curve_plots(d, save, lines)
    _group_histograms(d, save, lines)
    return lines, written


def _pool_curves(d: _Dataset, layout: str) -> tuple[dict | None, list[str]]:
    """Average one curve layout (`report_plots.CURVE_LAYOUTS`) over the dataset's cells.

    Returns ({shared arrays, "variants": {label: {field: mean array}}}, problem lines) or
    (None, lines) when no cell has the layout. Cells whose shared grids differ from the first
    cell's are left out (with a line saying so); histogram counts are summed over the distinct
    (split, seed) pairs (every method of a split stores the same test responses)."""

    shared: dict | None = None
    stacks: dict[str, dict[str, list[np.ndarray]]] = {}
    counts: dict[tuple[int, int], np.ndarray] = {}
    problems: list[str] = []
    for m in d.methods:
        for r in d.rows:
            if r.method != m or layout not in (r.artefacts or {}):
                continue
            where = f"{d.name}{DOT}{m}, split {r.split}, seed {r.seed}"
            try:
                c = rp.check_curves(layout, r.artefacts[layout])
            except ValueError as exc:
                problems.append(f"{FLAG} {layout} of {where} skipped: {exc}")
                continue
            keys = rp.CURVE_LAYOUTS[layout][0]
            if shared is None:
                shared = {k: c[k] for k in keys}
            elif any(c[k].shape != shared[k].shape or not np.allclose(c[k], shared[k]) for k in keys):
                problems.append(f"{FLAG} {layout} of {where} skipped: its grid differs from the other cells'")
                continue
            if "hist_counts" in c:
                counts.setdefault((r.split, r.seed), c["hist_counts"])
            for v, fields in c["variants"].items():
                label = d.label(m, v) if v in d.variants[m] else f"{m}{DOT}{v}"
                for f, a in fields.items():
                    stacks.setdefault(label, {}).setdefault(f, []).append(a)
    if shared is None:
        return None, problems
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns (no point kept) stay NaN
        shared["variants"] = {lab: {f: np.nanmean(np.stack(a), axis=0) for f, a in fs.items()}
                              for lab, fs in stacks.items()}
    if counts:
        shared["hist_counts"] = np.sum(list(counts.values()), axis=0)
    return shared, problems


def _group_histograms(d: _Dataset, save, lines: list[str]) -> None:
    """The ``sigma_hist`` artefacts (report_plots layout): counts summed over a method's cells, one
    panel per method; cells whose bin edges differ from the first cell's are left out."""

    edges, hists = None, {}
    for m in d.methods:
        for r in d.rows:
            h = (r.artefacts or {}).get("sigma_hist") if r.method == m else None
            if not isinstance(h, dict) or "edges_log10" not in h:
                continue
            edges = h["edges_log10"] if edges is None else edges
            if h["edges_log10"] != edges:
                continue
            label = d.label(m, d.variants[m][0]) if len(d.variants[m]) == 1 else m
            pooled = hists.setdefault(label, {})
            for group, counts in h.items():
                if group != "edges_log10":
                    counts = counts["counts"] if isinstance(counts, dict) else counts
                    pooled[group] = np.add(pooled.get(group, 0), np.asarray(counts, dtype=float))
    if hists:
        lines.extend(["sigma(x), the sd of the predictions at x, on the training, test and OOD points "
                      "(histograms of log10 sigma, each group normalised to density; counts summed over the "
                      "stored cells).", ""])
        save(rp.figure_group_histograms(edges, hists, title=f"{d.name}: sigma on train / test / OOD points"),
             "sigma_hist", f"{d.name} sigma histograms")


def _curve_plots(d: _Dataset, save, lines: list[str]) -> None:
    """The IC-NLM paper's Figs. 7-8 from the curve layouts, where the cells stored them."""

    md, problems = _pool_curves(d, "marginal_density")
    lines.extend(x for p in problems for x in (p, ""))
    if md is not None:
        lines.extend([
            "Marginal calibration (Fig. 7a of Hoffmann & Klein): the histogram of the test responses and each "
            "variant's average predictive density (1/n) Σ p(y | x_i), averaged over the stored cells.", ""])
        dens = {lab: f["value"] for lab, f in md["variants"].items()}
        save(rp.figure_marginal_density(md["grid"], md["hist_edges"], md["hist_counts"], dens,
                                        title=f"{d.name}: test responses and average predictive density"),
             "marginal_density", f"{d.name} marginal calibration")
    gap, problems = _pool_curves(d, "marginal_cdf_gap")
    lines.extend(x for p in problems for x in (p, ""))
    if gap is not None:
        save(rp.figure_marginal_cdf_gap(gap["grid"], {lab: f["value"] for lab, f in gap["variants"].items()},
                                        title=f"{d.name}: average predictive CDF minus empirical CDF"),
             "marginal_cdf_gap", f"{d.name} marginal CDF gap")
    cov, problems = _pool_curves(d, "coverage_levels")
    lines.extend(x for p in problems for x in (p, ""))
    if cov is not None:
        save(rp.figure_coverage_gap(cov["levels"], {lab: f["coverage"] for lab, f in cov["variants"].items()},
                                    title=f"{d.name}: coverage minus nominal at the paper's levels"),
             "coverage_gap", f"{d.name} coverage minus nominal")
    ev, problems = _pool_curves(d, "error_variance")
    lines.extend(x for p in problems for x in (p, ""))
    if ev is not None:
        lines.extend([
            "Error against predictive variance (Fig. 8b): left the MSE of the test points whose predictive "
            "variance is at most ν (ν decreasing to the right, as the paper); right the MSE of the share of "
            "points with the smallest variances. A variance that orders the errors gives curves that fall "
            "to the right / to the left.", ""])
        save(rp.figure_error_variance(ev["nu"], {lab: f["mse_nu"] for lab, f in ev["variants"].items()}, ev["share"],
                                      {lab: f["mse_share"] for lab, f in ev["variants"].items()},
                                      title=f"{d.name}: error against predictive variance"),
             "error_variance", f"{d.name} error against variance")
