"""The wheel ships every package: a package missing from pyproject's list works in an editable
install (and so in every other test) but is absent from a regular one."""
import pathlib
import tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_every_package_is_listed_in_pyproject():
    conf = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(conf["packages"])
    dirs = {"nbaccel": "nbaccel", "nbaccel_ext": "nbaccel_ext"} | conf.get("package-dir", {})
    found = set()
    for name, rel in dirs.items():
        base = ROOT / rel
        for init in base.rglob("__init__.py"):
            parts = init.parent.relative_to(base).parts
            found.add(".".join((name,) + parts))
    assert found - listed == set(), "packages missing from pyproject.toml's packages list"
