import numpy as np
import pytest

from softkmeans._core.responsibilities import RelaxationSpec
from softkmeans.experiments import Config, main, run
from softkmeans.experiments import _theory as th
from softkmeans.experiments._common import Progress, fit_slope, prepare
from softkmeans.experiments.rates import map_errors
from softkmeans.experiments.values import gaps

TINY = Config.quick(n_init=2, datasets=("separation_8", "iris"), betas=(0.5, 1.0, 3.0, 8.0),
                    sigma_ratios=(0.9, 1.1), alphas=(1.5, 2.0), beta_tildes=(2.0, 32.0),
                    c_values=(1.0, 2.0), n_temperatures=6, n_first_temperature=2,
                    path_sigmas=(2.0, 0.05, 5))


@pytest.fixture(scope="module")
def ctx():
    return prepare("iris", Config.quick(n_init=2))


def test_sigma_star_is_the_edge_of_the_hypothesis():
    pc = th.PathConstants(delta=0.3, rho=0.2, R=3.0, k=4)
    np.testing.assert_allclose(2 * pc.r_star * (2 * pc.R + pc.r_star), pc.delta / 2)
    s = th.critical_trajectory_sigma(pc)
    assert th.trajectory_epsilon(pc, 0.999 * s) <= pc.r_star
    assert th.trajectory_epsilon(pc, 1.001 * s) > pc.r_star
    np.testing.assert_allclose(th.trajectory_epsilon(pc, s), pc.r_star, rtol=1e-9)
    assert th.critical_trajectory_sigma(th.PathConstants(0.0, 0.2, 3.0, 4)) == 0.0


def test_identification_sigma_and_beta():
    assert th.identification_sigma(4.0) == 1.0  # sqrt(Delta)/2 at alpha = 3/2
    np.testing.assert_allclose(th.identification_sigma(4.0, 3.0), 2.0)
    np.testing.assert_allclose(th.beta(2.0, th.sigma_for_beta(2.0, 7.0)), 7.0)


def test_map_errors_match_the_direct_formula(ctx):
    m, sigma = 0, 0.4
    e_r, e_t = map_errors(ctx, m, sigma)
    resp = ctx.engine.responsibilities(ctx.lloyd[m].centers, RelaxationSpec("softmax", sigma))
    onehot = np.eye(ctx.k)[ctx.lloyd[m].stats.labels]
    soft_map = resp.T @ ctx.X / resp.sum(axis=0)[:, None]
    np.testing.assert_allclose(e_r, np.abs(resp - onehot).max(), rtol=1e-10)
    np.testing.assert_allclose(e_t, np.linalg.norm(soft_map - ctx.lloyd_means(m), axis=1).max(),
                               rtol=1e-8)


def test_gaps_are_stable_and_ordered(ctx):
    J, g, ge = gaps(ctx, ctx.lloyd[0].centers, 0.3)
    F = ctx.engine.estep(ctx.lloyd[0].centers, RelaxationSpec("softmax", 0.3)).objective
    np.testing.assert_allclose(g, J - F, rtol=1e-9)
    assert 0 <= ge < g <= th.softmax_ceiling(ctx.n, ctx.k, 0.3)
    sid = th.identification_sigma(ctx.margin_min[0])
    assert gaps(ctx, ctx.lloyd[0].centers, 0.99 * sid)[2] == 0.0


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


def test_main_cli(tmp_path, capsys):
    status = main(["reproduce", "--quick", "--n-init", "1", "--datasets", "separation_8",
                   "--families", "values", "--out", str(tmp_path), "--no-progress"])
    assert status == 0
    assert (tmp_path / "report.md").exists()
    assert "Report written" in capsys.readouterr().out


def test_unknown_family(tmp_path):
    with pytest.raises(ValueError, match="Unknown families"):
        run(out=tmp_path, config=TINY, families=("nope",))
