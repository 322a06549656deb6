"""The README's usage example runs and shows what it says."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_usage_block_runs():
    if not README.exists():
        pytest.skip("README.md is not shipped with this copy")
    code = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)[0]
    namespace = {}
    exec(compile(code, str(README), "exec"), namespace)
    assert namespace["search"].best_params_ == {"sigma": 0.5}
    assert namespace["auto"].n_clusters_ == 3 and len(namespace["auto"].cluster_path_) == 8


def test_demo_prints_table(capsys):
    from softkmeans.__main__ import main

    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    for name in ("KMeans (scikit-learn)", "SoftKMeans", "EntmaxKMeans", "AnnealedKMeans"):
        assert name in out


def test_command_line_shows_its_version_and_plain_help(capsys):
    """--version answered that a command was required; --help showed reST markup."""
    from softkmeans import __version__
    from softkmeans.__main__ import main

    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"softkmeans {__version__}"
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "``" not in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["compile", "--help"])
    assert "on-disk cache" in capsys.readouterr().out
