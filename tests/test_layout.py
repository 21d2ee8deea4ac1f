"""The tree matches docs/layout.md, imports form no circle, message tags never collide."""

import ast
import re
from pathlib import Path

from mpi_harness import ROOT

PKG = ROOT / "mpicomm"
LAYOUT = (ROOT / "docs" / "layout.md").read_text()


def _named_paths() -> set[str]:
    """Every `mpicomm/...` package or module named in layout.md's tree block."""
    block = LAYOUT.split("```")[1]
    names, parent = set(), None
    for line in block.splitlines():
        m = re.match(r"^  (\w+)/", line)
        if not line.startswith(" "):  # a folder beside mpicomm/ (experiments/, tests/)
            parent = None
        if m:
            parent = m.group(1)
            names.add(parent + "/")
        if parent:
            for mod in re.findall(r"\b(\w+)\.py\b", line):
                names.add(f"{parent}/{mod}.py")
    return names


def test_layout_names_only_what_exists():
    """Every package and module layout.md names under mpicomm/ exists."""
    named = _named_paths()
    assert len(named) > 20
    missing = [n for n in named if not (PKG / n).exists()]
    assert not missing, f"docs/layout.md names what is not in mpicomm/: {sorted(missing)}"


def test_layout_names_every_subpackage():
    """Every subpackage of mpicomm/ is named in layout.md."""
    named = _named_paths()
    subpackages = sorted(p.name + "/" for p in PKG.iterdir()
                         if p.is_dir() and (p / "__init__.py").exists())
    assert [s for s in subpackages if s not in named] == []


def test_layout_names_every_module():
    """Every module of every subpackage is named in layout.md, beside its package."""
    named = _named_paths()
    modules = sorted(f"{p.parent.name}/{p.name}" for p in PKG.glob("*/*.py")
                     if p.name != "__init__.py")
    assert [m for m in modules if m not in named] == []


def test_layout_layers_are_the_import_contracts():
    """The layers layout.md draws, top to bottom, are pyproject.toml's import contract."""
    import tomllib

    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in contracts["contracts"] if c["type"] == "layers")["layers"]
    block = LAYOUT.split("The layers, top to bottom")[1].split("```")[1]
    drawn = [re.sub(r"\s{2,}.*$", "", line).strip() for line in block.strip().splitlines()]
    assert drawn == layers


def _imports(path: Path) -> set[str]:
    """The mpicomm modules ``path`` imports (any depth, also inside functions)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("mpicomm")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 \
                and node.module.startswith("mpicomm"):
            out.add(node.module)
            out |= {f"{node.module}.{a.name}" for a in node.names}
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "import_module" \
                and node.args and isinstance(node.args[0], ast.Constant) \
                and str(node.args[0].value).startswith("mpicomm"):  # importlib, lazily
            out.add(node.args[0].value)
    # importing mpicomm.a.b runs mpicomm/a/__init__.py first
    return out | {".".join(m.split(".")[:k]) for m in out for k in range(2, m.count(".") + 1)}


def _module_name(path: Path) -> str:
    """``mpicomm/codecs/__init__.py`` -> ``mpicomm.codecs``; other files by their path."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_import_circle():
    """No module imports itself through others, packages' ``__init__.py`` included: importing
    ``mpicomm.x.y`` runs ``mpicomm/x/__init__.py`` first, so a package's __init__ that imports
    a module that imports a higher package back is a circle too."""
    modules = {_module_name(p): p for p in PKG.rglob("*.py")}
    modules.pop("mpicomm")  # the public names, loaded lazily on first use (layout.md)

    def deps(m: str, p: Path) -> set[str]:
        out = {d for d in _imports(p) if d in modules and d != m}
        # a package's __init__ imports its modules; a module does not depend on its own package
        return {d for d in out if not m.startswith(d + ".")}

    graph = {m: deps(m, p) for m, p in modules.items()}
    allowed: set[frozenset] = set()
    circles = []
    for start in graph:
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    circles.append(frozenset(path))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert not {c for c in circles if c not in allowed}, sorted(map(sorted, set(circles)))


def test_the_virtual_clock_stays_behind_its_seam():
    """Issue 31 item 3: reducers, engines, train, bench and cli reach the virtual clock
    through ``mpicomm.core.clock`` and the transport (``mpicomm.p2p``'s names) only:
    ``mpicomm.p2p.virtual`` is imported only inside ``p2p/`` (``__init__.py`` files too)."""
    seam = "mpicomm.p2p.virtual"
    outside = sorted(str(p.relative_to(ROOT)) for p in PKG.rglob("*.py")
                     if p.parent.name != "p2p" and p.name != "clock.py"
                     and any(m == seam or m.startswith(seam + ".") for m in _imports(p)))
    assert outside == [], outside


def test_message_tags_are_distinct():
    from mpicomm.core import tags

    values = list(tags.TAGS.values())
    assert len(values) == len(set(values)), tags.TAGS
    for base, width in tags.RANGES.items():
        lo, hi = tags.TAGS[base], tags.TAGS[base] + width
        assert not [n for n, v in tags.TAGS.items() if n != base and lo <= v < hi]


def test_experiments_hold_only_what_a_command_runs():
    """experiments/ is the pipeline: each script is run by run_all.sh (or another of its
    shell scripts) or a command named in the README, a docs page or a test; one-off
    investigations live in docs/investigations/, each named by the page whose paragraph it
    backs (two were named nowhere)."""
    docs = "\n".join(p.read_text() for p in (ROOT / "docs").glob("*.md"))
    users = "\n".join([docs, (ROOT / "README.md").read_text(),
                       *(p.read_text() for p in (ROOT / "experiments").glob("*.sh")),
                       *(p.read_text() for p in (ROOT / "tests").rglob("*.py"))])
    scripts = [p for p in (ROOT / "experiments").iterdir() if p.suffix in (".py", ".sh")]
    assert [p.name for p in scripts if f"experiments/{p.name}" not in users] == []
    investigations = (ROOT / "docs" / "investigations").glob("*.py")
    assert [p.name for p in investigations if f"docs/investigations/{p.name}" not in docs] == []


def test_each_test_folder_matches_a_package_folder():
    """tests/ mirrors mpicomm/: a test folder is named after the subpackage it tests (beside the
    harness's own: rank scripts, stand-in packages, the real-hosts tier)."""
    own = {"scripts", "fake_cupy", "fake_nvtx", "multihost", "torch_adapter", "__pycache__"}
    subpackages = {p.name for p in PKG.iterdir() if (p / "__init__.py").exists()}
    folders = {p.name for p in (ROOT / "tests").iterdir() if p.is_dir()} - own
    assert sorted(folders - subpackages) == []
    assert {"train", "nn", "parallel", "engine", "cli", "core", "bench", "costmodel"} <= folders


def test_no_function_in_train_or_cli_is_over_60_lines():
    """Issue 31's target: a function of train/ or cli/ reads in one screen."""
    long = []
    for folder in ("train", "cli"):
        for path in sorted((ROOT / "mpicomm" / folder).glob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = node.end_lineno - node.lineno + 1
                    if lines > 60:
                        long.append(f"{folder}/{path.name}:{node.lineno} {node.name}: {lines}")
    assert not long, long
