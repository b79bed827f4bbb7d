"""Each compiled module of the package (ringcast._core, and any other ringcast._*.so) has a type stub
next to it (<name>.pyi) that says exactly what the module has.

Compared with the imported module (the build tree's or the installed one, whichever `import ringcast`
finds; the stub must lie next to it, as the wheel ships it): every name, both ways; for each class its
public methods and properties; for each function and method the parameter names and which have
defaults (from pybind11's signature line); a constant's type; an exception's base. A failure lists
every difference, e.g. "in ringcast._core, missing from _core.pyi: function sweep_abandoned(prefix: str
= '', dry_run: bool = False) -> list", so whoever adds a binding sees what to write.

Parts built only with an optional dependency: a stub comment line `# ---- ... present when HAVE_X ...`
makes every top-level name after it, up to the next `# ----` line, optional while the module's HAVE_X
is False.
"""
import ast
import importlib
import importlib.machinery
import re
from pathlib import Path
from typing import Dict, List, Optional, Set, Tuple

import pytest

import ringcast
import ringcast._core as core

PACKAGE_DIR = Path(core.__file__).parent
STUB = PACKAGE_DIR / "_core.pyi"


def compiled_modules() -> List[str]:
    names = set()
    for path in PACKAGE_DIR.iterdir():
        if any(path.name.endswith(suffix) for suffix in importlib.machinery.EXTENSION_SUFFIXES):
            names.add(path.name.split(".", 1)[0])
    return sorted(names)

# pybind11's own additions to every class, not part of ringcast's API.
_PYBIND11_EXTRAS = {"_pybind11_conduit_v1_"}


def _split_top_level(text: str) -> List[str]:
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def runtime_params(obj, name: str) -> Optional[List[Tuple[str, bool]]]:
    """[(parameter, has_default)] from pybind11's first docstring line `name(a: T, b: U = x) -> R`;
    None when there is no such line (overloads, or not a pybind11 function)."""
    doc = getattr(obj, "__doc__", None) or ""
    first = doc.lstrip().splitlines()[0] if doc.strip() else ""
    match = re.match(rf"{re.escape(name)}\((.*)\)\s*(->.*)?$", first)
    if not match or "Overloaded function" in doc:
        return None
    out = []
    for part in _split_top_level(match.group(1)):
        pname = part.split(":", 1)[0].split("=", 1)[0].strip()
        out.append((pname, " = " in part))
    return out


def runtime_overloads(obj, name: str) -> Optional[List[List[Tuple[str, bool]]]]:
    """The parameter lists of a pybind11 overloaded function (its "N. name(...) -> R" lines); None when
    it is not overloaded."""
    doc = getattr(obj, "__doc__", None) or ""
    if "Overloaded function." not in doc:
        return None
    out = []
    for line in doc.splitlines():
        match = re.match(rf"\s*\d+\. {re.escape(name)}\((.*)\)\s*(->.*)?$", line)
        if match:
            out.append([(part.split(":", 1)[0].split("=", 1)[0].strip(), " = " in part)
                        for part in _split_top_level(match.group(1))])
    return out


def _is_overload(fn: ast.FunctionDef) -> bool:
    return any((isinstance(d, ast.Name) and d.id == "overload") or (isinstance(d, ast.Attribute) and d.attr == "overload")
               for d in fn.decorator_list)


def check_callable(where: str, obj, name: str, defs: List[ast.FunctionDef], problems: List[str]) -> None:
    """Parameters of a function or method against its stub definition(s) (@overload ones for an
    overloaded binding)."""
    overloads = runtime_overloads(obj, name)
    if overloads is not None:
        stubbed = [d for d in defs if _is_overload(d)]
        if len(stubbed) != len(overloads):
            problems.append(f"{where}: {len(overloads)} overloads in the module {overloads}, {len(stubbed)} "
                            f"@overload definitions in the stub")
            return
        got, have = sorted(overloads), sorted(stub_params(d) for d in stubbed)
        if got != have:
            problems.append(f"{where}: overloads {got} in the module, {have} in the stub (name, has default)")
        return
    got_params = runtime_params(obj, name)
    if got_params is not None and got_params != stub_params(defs[0], got_params):
        problems.append(f"{where}: parameters {got_params} in the module, {stub_params(defs[0], got_params)} in the "
                        f"stub (name, has default; argN: positional-only, before `/`)")


def stub_params(fn: ast.FunctionDef, runtime: Optional[List[Tuple[str, bool]]] = None) -> List[Tuple[str, bool]]:
    """[(parameter, has_default)] of a stub function. A positional-only parameter (before `/`) stands for
    pybind11's nameless argN at that place in ``runtime`` (a binding without py::arg)."""
    args = fn.args.posonlyargs + fn.args.args
    n_default = len(fn.args.defaults)
    out = [(a.arg, i >= len(args) - n_default) for i, a in enumerate(args)]
    for i in range(len(fn.args.posonlyargs)):
        if runtime and i < len(runtime) and re.fullmatch(r"arg\d+", runtime[i][0]):
            out[i] = (runtime[i][0], out[i][1])
    out += [(a.arg, d is not None) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults)]
    return out


def _is_property(fn: ast.FunctionDef) -> bool:
    return any(isinstance(d, ast.Name) and d.id == "property" for d in fn.decorator_list)


def _describe(name: str, obj) -> str:
    if isinstance(obj, type):
        return f"class {name}"
    if callable(obj):
        doc = (obj.__doc__ or "").lstrip().splitlines()
        return f"function {doc[0] if doc else name + '(...)'}"
    return f"constant {name} ({type(obj).__name__})"


def optional_names(text: str, tree: ast.Module, module) -> Set[str]:
    """Top-level stub names inside a `present when HAVE_X` section whose flag is False in the module."""
    lines = text.splitlines()
    sections = []  # (first line, last line, flag)
    for i, line in enumerate(lines, start=1):
        if line.startswith("# ----"):
            if sections and sections[-1][1] is None:
                sections[-1] = (sections[-1][0], i - 1, sections[-1][2])
            flag = re.search(r"present when (HAVE_\w+)", line)
            if flag:
                sections.append((i, None, flag.group(1)))
    out = set()
    for first, last, flag in sections:
        if getattr(module, flag, False):
            continue
        for node in tree.body:
            if node.lineno > first and (last is None or node.lineno <= last):
                out.update(_defined_names(node))
    return out


def _defined_names(node: ast.stmt) -> List[str]:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return [node.target.id]
    if isinstance(node, ast.Assign):
        return [t.id for t in node.targets if isinstance(t, ast.Name)]
    return []


def compare(module=core, stub_path: Optional[Path] = None) -> List[str]:
    stub_path = stub_path or STUB
    short = stub_path.name
    modname = module.__name__
    problems: List[str] = []
    text = stub_path.read_text()
    tree = ast.parse(text, filename=str(stub_path))
    optional = optional_names(text, tree, module)
    stub: Dict[str, ast.stmt] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            stub[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            stub[node.target.id] = node
        elif isinstance(node, ast.Assign):
            stub.update({t.id: node for t in node.targets if isinstance(t, ast.Name)})
    runtime = {n: getattr(module, n) for n in dir(module) if not n.startswith("__")}

    for name in sorted(set(runtime) - set(stub)):
        problems.append(f"in {modname}, missing from {short}: {_describe(name, runtime[name])}")
    for name in sorted(n for n in set(stub) - set(runtime) - optional if not n.startswith("_")):
        problems.append(f"in {short}, not in {modname} (removed or renamed?): {name}")

    for name in sorted(set(runtime) & set(stub)):
        obj, node = runtime[name], stub[name]
        where = f"{short}:{node.lineno} {name}"
        if isinstance(obj, type) and issubclass(obj, BaseException):
            bases = [b.id for b in getattr(node, "bases", []) if isinstance(b, ast.Name)]
            actual = [b.__name__ for b in obj.__bases__]
            if bases != actual:
                problems.append(f"{where}: bases are {actual}, the stub says {bases}")
        elif isinstance(obj, type):
            if not isinstance(node, ast.ClassDef):
                problems.append(f"{where}: a class in the module, not in the stub")
                continue
            members = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef)}
            wanted = {m for m in vars(obj) if not m.startswith("_")} - _PYBIND11_EXTRAS
            wanted.add("__init__")
            for m in sorted(wanted - set(members)):
                problems.append(f"in {modname}, missing from {short}: {name}.{m}"
                                f" ({_describe(m, getattr(obj, m))})")
            for m in sorted(set(members) - wanted - {"__init__"}):
                if not m.startswith("_"):
                    problems.append(f"in {short}, not in {modname}: {name}.{m}")
            for m in sorted(wanted & set(members)):
                attr = vars(obj).get(m)
                if isinstance(attr, property) != _is_property(members[m]):
                    problems.append(f"{where}.{m}: property in one, method in the other")
                    continue
                if isinstance(attr, property):
                    continue
                defs = [f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == m]
                check_callable(f"{where}.{m}", getattr(obj, m), m, defs, problems)
        elif callable(obj):
            if not isinstance(node, ast.FunctionDef):
                problems.append(f"{where}: a function in the module, not in the stub")
                continue
            defs = [f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == name]
            check_callable(where, obj, name, defs, problems)
        else:
            annotation = getattr(node, "annotation", None)
            declared = annotation.id if isinstance(annotation, ast.Name) else None
            if declared != type(obj).__name__:
                problems.append(f"{where}: a {type(obj).__name__} in the module, annotated {declared}")
    return problems


def test_typing_files_are_shipped_next_to_the_modules():
    assert "_core" in compiled_modules()
    assert (PACKAGE_DIR / "py.typed").is_file(), f"py.typed missing in {PACKAGE_DIR}"
    missing = [f"{m}.pyi" for m in compiled_modules() if not (PACKAGE_DIR / f"{m}.pyi").is_file()]
    assert not missing, f"compiled modules without a stub in {PACKAGE_DIR}: {missing}"


@pytest.mark.parametrize("name", compiled_modules())
def test_stub_matches_the_compiled_module(name):
    stub_path = PACKAGE_DIR / f"{name}.pyi"
    if not stub_path.is_file():
        pytest.fail(f"ringcast.{name} has no stub {stub_path.name} (every public name must be typed)")
    problems = compare(importlib.import_module(f"ringcast.{name}"), stub_path)
    assert not problems, f"ringcast.{name} and {stub_path.name} differ:\n  " + "\n  ".join(problems)


def test_the_comparison_catches_a_difference(monkeypatch):
    # The check itself: a name the stub lacks, and a parameter renamed, are both reported by name.
    monkeypatch.setattr(core, "brand_new_binding", lambda: None, raising=False)
    original = STUB.read_text()
    renamed = original.replace("def remove_segment(name: str, /)", "def remove_segment(segment: str)").replace(
        "\nMAX_PARTS: int\n", "\nMAX_PARTS: int\ndef vanished_binding() -> None: ...\n")
    assert renamed != original
    real_read_text = Path.read_text
    monkeypatch.setattr(Path, "read_text", lambda self, *a, **k: renamed if self == STUB else real_read_text(self, *a, **k))
    problems = compare()
    assert any("in ringcast._core, missing from _core.pyi: function" in p and "brand_new_binding" in p
               for p in problems), problems
    assert any("remove_segment: parameters [('arg0', False)] in the module, [('segment', False)]" in p
               for p in problems), problems
    assert "in _core.pyi, not in ringcast._core (removed or renamed?): vanished_binding" in problems, problems
