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
    return out


def test_no_import_circle():
    """No module imports itself through others (packages' __init__ re-exports left out)."""
    modules = {".".join(p.relative_to(ROOT).with_suffix("").parts): p
               for p in PKG.rglob("*.py") if p.name != "__init__.py"}
    graph = {m: {d for d in _imports(p) if d in modules and d != m} for m, p in modules.items()}
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
