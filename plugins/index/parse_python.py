"""Python through the standard ``ast``: classes, functions and methods with qualified
names, signatures and docstrings; imports with the names they bind, calls and base classes
as dotted references (``self.save``, ``helpers.parse``) that the graph resolves after the
build. Calls in module or class bodies (outside any function) belong to that module or class;
what a function defines inside it (functions, classes) is no node: their calls and the
classes' bases belong to the function."""

from __future__ import annotations

import ast

from plugins.index.chunker import Edge, Node, Parsed

_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
_BLOCKS = (ast.If, ast.Try, ast.With, ast.AsyncWith)
_SELF = ("self", "cls")


def _name(expr: ast.AST) -> str | None:
    if isinstance(expr, ast.Name):
        return expr.id
    if isinstance(expr, ast.Attribute):
        return expr.attr
    if isinstance(expr, ast.Subscript):
        return _name(expr.value)
    if isinstance(expr, ast.Call):
        return _name(expr.func)
    return None


def _ref(expr: ast.AST, in_class: bool) -> str:
    """``a.b.c`` for a chain of names; ``self.x`` / ``super.x`` inside a class; ``?.x`` when
    the receiver is not a name (a call's result, an item)."""
    if isinstance(expr, ast.Name):
        return "self" if in_class and expr.id in _SELF else expr.id
    if isinstance(expr, ast.Attribute):
        return f"{_ref(expr.value, in_class)}.{expr.attr}"
    if (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name)
            and expr.func.id == "super"):
        return "super"
    if isinstance(expr, ast.Subscript):
        return _ref(expr.value, in_class)
    return "?"


def _unknown_receiver(ref: str, name: str) -> str:
    """``?.x`` for any reference whose receiver could not be named (``a().b.x`` → ``?.b.x``)."""
    if ref == "?":
        return f"?.{name}"
    return "?." + ref.rsplit("?.", 1)[1] if "?." in ref else ref


def _type_ref(annotation: ast.AST | None) -> str | None:
    """The class an annotation names: ``Request``, ``falcon.Request``, ``Optional[Request]``,
    ``Request | None``, ``"Request"``; None for containers and anything else."""
    if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
        try:
            annotation = ast.parse(annotation.value, mode="eval").body
        except SyntaxError:
            return None
    if isinstance(annotation, ast.BinOp) and isinstance(annotation.op, ast.BitOr):
        sides = [a for a in (annotation.left, annotation.right)
                 if not (isinstance(a, ast.Constant) and a.value is None)]
        return _type_ref(sides[0]) if len(sides) == 1 else None
    if isinstance(annotation, ast.Subscript) and _name(annotation.value) == "Optional":
        return _type_ref(annotation.slice)
    if isinstance(annotation, (ast.Name, ast.Attribute)):
        ref = _ref(annotation, False)
        return ref if ref.rsplit(".", 1)[-1][:1].isupper() else None
    return None


def _local_types(fn) -> dict[str, str]:
    """What a function's parameters and locals are, where it says: annotations, and
    ``x = SomeClass(…)``; a call ``x.save()`` then reads ``SomeClass.save``. A parameter
    without an annotation reads ``@name`` (a pytest fixture of that name may type it)."""
    types: dict[str, str] = {}
    args = fn.args
    for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
        if arg.arg not in _SELF:
            types[arg.arg] = _type_ref(arg.annotation) or f"@{arg.arg}"
    for sub in ast.walk(fn):
        if isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name):
            target, found = sub.target.id, _type_ref(sub.annotation)
        elif (isinstance(sub, ast.Assign) and len(sub.targets) == 1
              and isinstance(sub.targets[0], ast.Name) and isinstance(sub.value, ast.Call)):
            target, found = sub.targets[0].id, _type_ref(sub.value.func)
        else:
            continue
        if found and types.get(target, "@").startswith("@"):
            types[target] = found
    return types


def _returns(fn, types: dict[str, str]) -> str | None:
    """What ``fn`` returns, as the ``returns`` edge's reference: its annotation's class, the
    class it constructs (``return Flask(…)``), a typed local, or ``()callee`` — whatever the
    function it calls returns (``return app.test_client()``)."""
    found = _type_ref(fn.returns)
    if found:
        return found
    for sub in _own_nodes(fn):
        if isinstance(sub, (ast.Return, ast.Yield)) and sub.value is not None:
            value = sub.value
            if isinstance(value, ast.Name) and value.id in types \
                    and not types[value.id].startswith("@"):
                return types[value.id]
            if isinstance(value, ast.Call) and _name(value.func):
                ref = _ref(value.func, False)
                if "?" in ref:
                    return None
                head, dot, rest = ref.partition(".")
                ref = f"{types[head]}.{rest}" if dot and head in types else ref
                return ref if _type_ref(value.func) else f"(){ref}"
            return None
    return None


def _own_nodes(fn):
    """The nodes of ``fn``'s body, not those of the functions and classes defined in it."""
    stack = list(fn.body)
    while stack:
        node = stack.pop(0)
        yield node
        if not isinstance(node, (*_DEFS, ast.ClassDef, ast.Lambda)):
            stack.extend(ast.iter_child_nodes(node))


def _signature(stmt) -> str:
    prefix = "async def" if isinstance(stmt, ast.AsyncFunctionDef) else "def"
    sig = f"{prefix} {stmt.name}({ast.unparse(stmt.args)})"
    return sig + (f" -> {ast.unparse(stmt.returns)}" if stmt.returns else "")


def _start(stmt) -> int:
    return min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])


def _calls(stmts, in_class: bool, types: dict[str, str] | None = None) -> dict[str, str]:
    """``{ref: bare name}`` of the calls in ``stmts``, in order of first appearance; a
    receiver whose class ``types`` knows is read as that class."""
    seen: dict[str, str] = {}
    for stmt in stmts:
        for sub in ast.walk(stmt):
            if isinstance(sub, ast.Call):
                name = _name(sub.func)
                if name:
                    ref = _unknown_receiver(_ref(sub.func, in_class), name)
                    head, dot, rest = ref.partition(".")
                    if dot and types and head in types:
                        ref = f"{types[head]}.{rest}"
                    seen.setdefault(ref, name)
    return seen


def _absolute(module: str, package: bool, level: int, name: str | None) -> str:
    """The absolute dotted module of ``from <dots><name> import …`` in ``module``."""
    if not level:
        return name or ""
    parts = [] if module == "__init__" else module.split(".")
    if not package:
        parts = parts[:-1]
    parts = parts[: len(parts) - (level - 1)] if level > 1 else parts
    return ".".join([*parts, *([name] if name else [])])


def _imports(tree: ast.Module, root: int, module: str, package: bool) -> list[Edge]:
    out = []
    for sub in ast.walk(tree):
        if isinstance(sub, ast.Import):
            for a in sub.names:
                out.append(Edge(root, "imports", a.name, ref=a.name,
                                alias=a.asname or a.name.split(".")[0]))
        elif isinstance(sub, ast.ImportFrom):
            base = _absolute(module, package, sub.level, sub.module)
            target = "." * sub.level + (sub.module or "")
            for a in sub.names:
                alias = "*" if a.name == "*" else (a.asname or a.name)
                out.append(Edge(root, "imports", target, ref=f"{base}#{a.name}", alias=alias))
    return out

def parse_python(source: str, module: str, package: bool = False) -> Parsed | None:
    """``package``: the file is a package's ``__init__`` (relative imports start there)."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None
    out = Parsed("python")
    lines = source.count("\n") + 1
    root = out.add(Node("module", module.rsplit(".", 1)[-1], module, 1, lines,
                        docstring=ast.get_docstring(tree) or ""))
    out.edges.extend(_imports(tree, root, module, package))

    def calls(idx: int, stmts, in_class: bool, types: dict[str, str] | None = None) -> None:
        out.edges.extend(Edge(idx, "calls", name, ref=ref)
                         for ref, name in _calls(stmts, in_class, types).items())

    def visit(body, parent: int, prefix: str, in_class: bool) -> list:
        """Adds the definitions in ``body``; returns its other statements."""
        rest = []
        for stmt in body:
            if isinstance(stmt, ast.ClassDef):
                bases = [ast.unparse(b) for b in stmt.bases]
                idx = out.add(Node("class", stmt.name, prefix + stmt.name, _start(stmt),
                                   stmt.end_lineno,
                                   signature=f"class {stmt.name}({', '.join(bases)})" if bases
                                   else f"class {stmt.name}",
                                   docstring=ast.get_docstring(stmt) or "", parent=parent))
                out.edges.extend(Edge(idx, "inherits", n, ref=_ref(b, False))
                                 for b in stmt.bases if (n := _name(b)))
                own = visit(stmt.body, idx, prefix + stmt.name + ".", True)
                calls(idx, [*stmt.decorator_list, *own], False)
            elif isinstance(stmt, _DEFS):
                idx = out.add(Node("method" if in_class else "function", stmt.name,
                                   prefix + stmt.name, _start(stmt), stmt.end_lineno,
                                   signature=_signature(stmt),
                                   docstring=ast.get_docstring(stmt) or "", parent=parent))
                types = _local_types(stmt)
                calls(idx, [stmt], in_class, types)
                # a class defined in the function is no node (as a nested function is not:
                # its calls are the function's): its bases are kept as the function's
                out.edges.extend(Edge(idx, "inherits", n, ref=_ref(b, False))
                                 for sub in ast.walk(stmt) if isinstance(sub, ast.ClassDef)
                                 for b in sub.bases if (n := _name(b)))
                returned = _returns(stmt, types)
                if returned:
                    out.edges.append(Edge(idx, "returns", returned.rsplit(".", 1)[-1],
                                          ref=returned))
            elif isinstance(stmt, _BLOCKS):
                inner = list(stmt.body) + list(getattr(stmt, "orelse", ()))
                inner += list(getattr(stmt, "finalbody", ()))
                for handler in getattr(stmt, "handlers", ()):
                    inner += handler.body
                rest += visit(inner, parent, prefix, in_class)
                rest += [getattr(stmt, "test", None), *getattr(stmt, "items", ())]
            else:
                rest.append(stmt)
        return [s for s in rest if s is not None]

    calls(root, visit(tree.body, root, "", False), False)
    return out
