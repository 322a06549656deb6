import sys

import numpy as np
import pytest

from softkmeans import diagnostics
from softkmeans._core import bounds
from softkmeans._core.responsibilities import RelaxationSpec
from softkmeans.experiments import Config, main, run
from softkmeans.experiments._common import Progress, fit_slope, prepare
from softkmeans.experiments.rates import map_errors, reference_constants
from softkmeans.experiments.values import gaps

TINY = Config.quick(n_init=2, datasets=("separation_8", "iris"), betas=(0.5, 1.0, 3.0, 8.0),
                    sigma_ratios=(0.9, 1.1), alphas=(1.5, 2.0), beta_tildes=(2.0, 32.0),
                    c_values=(1.0, 2.0), n_temperatures=6, n_first_temperature=2,
                    path_sigmas=(2.0, 0.05, 5))


@pytest.fixture(scope="module")
def ctx():
    return prepare("iris", Config.quick(n_init=2))


def test_lloyd_path_constants_match_the_diagnostics(ctx):
    from softkmeans.experiments._paths import lloyd_path, trajectory_constants

    lp = lloyd_path(ctx, 0)
    public = diagnostics.fixed_point_constants(ctx.X, lp["centers"], sigma=0.2)
    for key in ("delta", "rho", "R"):
        np.testing.assert_allclose(lp[key], public[key], rtol=1e-12)
    ours = trajectory_constants(ctx, lp, 0.2)
    for key in ("eps", "r_star", "sigma_star"):
        np.testing.assert_allclose(ours[key], public[key], rtol=1e-12)
    s = bounds.trajectory_sigma_star(lp["delta"], lp["R"], lp["rho"], ctx.k)
    assert s == ours["sigma_star"] > 0
    assert trajectory_constants(ctx, lp, 0.999 * s)["hypothesis"]
    assert not trajectory_constants(ctx, lp, 1.001 * s)["hypothesis"]


def test_sigma_for_beta_inverts_beta():
    np.testing.assert_allclose(bounds.beta(2.0, bounds.sigma_for_beta(2.0, 7.0)), 7.0)


def test_sigma_at_the_identification_boundary_is_never_rounded_up():
    """At beta = 2 the row at the smallest margin stays one-hot: sigma^2 <= Delta / 4."""
    margins = np.random.default_rng(0).uniform(1e-3, 10.0, 10_000)
    sigma = bounds.sigma_for_beta(margins, 2.0)
    assert np.all(sigma * sigma <= margins / 4.0)
    assert np.all(sigma >= np.nextafter(np.sqrt(margins / 4.0), 0.0))  # an ulp at most
    assert isinstance(bounds.sigma_for_beta(2.0, 7.0), float)


def test_map_errors_match_the_direct_formula(ctx):
    m, sigma = 0, 0.4
    e_r, e_t = map_errors(ctx, m, sigma)
    centers = ctx.lloyd[m].centers
    resp = ctx.engine.responsibilities(centers, RelaxationSpec("softmax", sigma))
    onehot = np.eye(ctx.k)[ctx.lloyd[m].stats.labels]
    soft_map = resp.T @ ctx.X / resp.sum(axis=0)[:, None]
    lloyd_map = onehot.T @ ctx.X / onehot.sum(axis=0)[:, None]
    np.testing.assert_allclose(e_r, np.abs(resp - onehot).max(), rtol=1e-10)
    np.testing.assert_allclose(e_t, np.linalg.norm(soft_map - lloyd_map, axis=1), rtol=1e-8)


def test_reference_constants_are_those_of_thm_18(ctx):
    m = 0
    B, rho, _, tol_t = reference_constants(ctx, m)
    public_B, _ = diagnostics.radii(ctx.X, ctx.lloyd[m].centers)
    np.testing.assert_allclose(B, public_B, rtol=1e-12)  # over all observations, not S_j
    assert rho == diagnostics.balance(ctx.X, ctx.lloyd[m].centers)
    sigma = 0.3
    _, errors = map_errors(ctx, m, sigma)
    bound, q = diagnostics.centroid_map_bound(ctx.X, ctx.lloyd[m].centers, sigma)
    np.testing.assert_allclose(bounds.centroid_map_bound(B, rho, q), bound, rtol=1e-12)
    assert np.all(errors <= bound + tol_t)


def test_rate_record_against_the_formulas(ctx):
    from softkmeans.experiments.rates import _run_one

    betas = np.array([0.5, 1.0, 2.0, 4.0, 8.0, 16.0])
    rec = _run_one(ctx, 0, betas)
    assert rec["violations_Er"] == rec["violations_ET"] == rec["entmax_violations"] == 0
    margin, rho = ctx.margin_min[0], rec["rho"]
    q = np.array([bounds.q_factor(margin, s, ctx.k) for s in bounds.sigma_for_beta(margin, betas)])
    informative = betas[(q < 1) & (q / (1 - q) < rho)]
    assert rec["beta_informative"] == informative.min()
    np.testing.assert_allclose(rec["Er_bound_ratio_b8"] * rec["_Er"][4], q[4], rtol=1e-12)
    assert rec["_Er"][4] <= q[4]


def test_gaps_are_stable_and_ordered(ctx):
    centers = ctx.lloyd[0].centers
    J, g, ge = gaps(ctx, centers, 0.3)
    cert = diagnostics.objective_gaps(ctx.X, centers, 0.3)
    assert cert.all_hold
    np.testing.assert_allclose([J, g, ge], [cert.constants[key] for key in
                                            ("inertia", "softmax_gap", "tsallis_gap")], rtol=1e-12)
    assert 0 <= ge < g <= bounds.softmax_uniform_bound(ctx.n, 0.3, ctx.k)
    sid = float(bounds.identification_sigma(ctx.margin_min[0], 1.5))
    assert gaps(ctx, centers, 0.99 * sid)[2] == 0.0


def test_fit_slope():
    x = np.linspace(2, 10, 7)
    assert fit_slope(x, 3 - 1.5 * x) == pytest.approx(-1.5)
    assert np.isnan(fit_slope([1, 2], [1, 2]))


def test_progress_writes_lines():
    import io

    buf = io.StringIO()
    bar = Progress(4, "demo", stream=buf)
    for _ in range(4):
        bar.update()
    assert "4/4" in buf.getvalue()


def test_run_writes_report_figures_and_records(tmp_path):
    path = run(out=tmp_path, config=TINY, progress=False)
    text = path.read_text()
    for section in ("## 7.3", "## 7.5", "## 7.6", "## 7.7", "## 7.8", "Paper claims"):
        assert section in text
    for fig in ("rate_collapse.png", "identification.png", "value_gaps.png",
                "trajectories.png"):
        assert (tmp_path / fig).stat().st_size > 0
    for rec in ("rates", "values", "dynamics", "trajectories", "annealing"):
        assert (tmp_path / "records" / f"{rec}.csv").exists()
    # deterministic theorems must hold whatever the size
    for claim in ("bounds (Lemma 17, Thm 18) hold in every record | 0 violations | 0 violations",
                  "Per observation: one-hot exactly when"):
        assert claim in text
    assert "| 7.5 | Uniform bounds" in text and "**no**" not in text.split("Uniform")[1][:200]
    assert "| 7.8 | First temperature brings DA-Entmax to one configuration" in text


def test_main_cli(tmp_path, capsys):
    status = main(["reproduce", "--quick", "--n-init", "1", "--datasets", "separation_8",
                   "--families", "values", "--out", str(tmp_path), "--no-progress"])
    assert status == 0
    assert (tmp_path / "report.md").exists()
    assert "Report written" in capsys.readouterr().out


def test_without_matplotlib_the_report_is_written_without_figures(tmp_path, monkeypatch):
    """The run used to end in ModuleNotFoundError after every experiment, writing nothing."""
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    config = Config.quick(n_init=1, datasets=("separation_8",))
    with pytest.warns(UserWarning, match="matplotlib is not installed"):
        path = run(out=tmp_path, config=config, families=("values",), progress=False)
    assert "## 7.5" in path.read_text()
    assert (tmp_path / "records" / "values.csv").exists()
    assert not list(tmp_path.glob("*.png"))


def test_a_matplotlib_that_fails_to_import_leaves_the_figures_out(tmp_path, monkeypatch):
    """A matplotlib found but broken used to end the run in ImportError, writing no report."""
    broken = tmp_path / "site"
    (broken / "matplotlib").mkdir(parents=True)
    (broken / "matplotlib" / "__init__.py").write_text("raise ImportError('for another numpy')")
    monkeypatch.syspath_prepend(str(broken))
    for name in [name for name in sys.modules if name.split(".")[0] == "matplotlib"]:
        monkeypatch.delitem(sys.modules, name)
    config = Config.quick(n_init=1, datasets=("separation_8",))
    with pytest.warns(UserWarning, match="could not be imported .*for another numpy"):
        path = run(out=tmp_path / "out", config=config, families=("values",), progress=False)
    assert "## 7.5" in path.read_text()
    assert not list((tmp_path / "out").glob("*.png"))


@pytest.mark.parametrize(("config", "mode"), [
    (Config.quick(n_init=2, datasets=("iris",), seed=3), "quick"),
    (Config.full(n_init=5), "full"),
    (Config.quick(n_temperatures=3), "custom"),
])
def test_the_report_names_the_mode_of_its_config(config, mode):
    """run() labelled every explicit config "full", quick ones included."""
    assert config.mode == mode


def test_unknown_family(tmp_path):
    with pytest.raises(ValueError, match="Unknown families"):
        run(out=tmp_path, config=TINY, families=("nope",))


@pytest.mark.parametrize(("changes", "match"), [
    ({"n_init": 0}, "n_init must be a positive integer"),
    ({"max_iter": 2.5}, "max_iter must be a positive integer"),
    ({"tol": -1.0}, "tol must be non-negative"),
    ({"datasets": ("nosuch",)}, "datasets must be some of"),
    ({"datasets": ()}, "datasets must be some of"),
    ({"seed": -1}, "seed must be an integer"),
    ({"datasets": ("iris", "wine", "iris")}, "datasets lists iris more than once"),
])
def test_bad_config_is_named(changes, match):
    with pytest.raises(ValueError, match=match):
        Config.quick(**changes)


@pytest.mark.parametrize(("args", "match"), [
    (["--n-init", "0"], "n_init must be a positive integer"),
    (["--datasets", "nosuch"], "datasets must be some of"),
    (["--datasets", "iris", "iris"], "datasets lists iris more than once"),
    (["--out", "/proc/softkmeans-cannot-be-here"], "cannot write to the output folder"),
    (["--out", "/proc"], "cannot write to the output folder"),  # exists, not writable
    (["--out", ""], "--out needs a folder name"),  # wrote into the current folder
    (["--seed", "-1"], "seed must be an integer in [0, 2**32)"),
    (["--seed", str(2**32)], "seed must be an integer in [0, 2**32)"),
])
def test_cli_reports_bad_arguments_without_a_traceback(args, match, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["reproduce", "--quick", "--no-progress", *args])
    assert exit_info.value.code == 2
    assert match in capsys.readouterr().err


def test_demo_refuses_a_bad_seed_without_a_traceback(capsys):
    from softkmeans.__main__ import main as command_line

    with pytest.raises(SystemExit) as exit_info:
        command_line(["demo", "--random-state", "-1"])
    assert exit_info.value.code == 2
    assert "must be an integer in [0, 2**32)" in capsys.readouterr().err
