"""JavaScript, TypeScript, Go, Rust and Java through tree-sitter.

Grammars come compiled inside their PyPI wheels (``tree-sitter-python`` & co.); nothing is
fetched at run time (``tree-sitter-language-pack`` would download them, so it is not used).
One walker serves every language; a ``Spec`` names each grammar's node types.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass, field
from functools import lru_cache

from plugins.index import bindings
from plugins.index.chunker import Edge, Node, Parsed


@dataclass(frozen=True)
class Spec:
    module: str  # the wheel's module, e.g. ``tree_sitter_go``
    function: str  # its function returning the grammar pointer
    classes: frozenset[str]  # container node types → class nodes
    functions: frozenset[str]  # function/method node types
    imports: frozenset[str]
    calls: frozenset[str]
    heritage: frozenset[str] = frozenset()  # children of a class that name its bases
    comments: frozenset[str] = frozenset({"comment"})
    declarators: frozenset[str] = frozenset()  # `const f = () => …` holders
    name_fields: tuple[str, ...] = ("name",)
    extra: dict = field(default_factory=dict, hash=False, compare=False)


def _s(*names: str) -> frozenset[str]:
    return frozenset(names)


_JS = dict(classes=_s("class_declaration", "class", "abstract_class_declaration",
                      "interface_declaration"),
           functions=_s("function_declaration", "generator_function_declaration",
                        "method_definition", "method_signature", "abstract_method_signature"),
           imports=_s("import_statement"), calls=_s("call_expression", "new_expression"),
           heritage=_s("class_heritage", "extends_clause", "implements_clause",
                       "extends_type_clause"),
           declarators=_s("variable_declarator"))

SPECS: dict[str, Spec] = {
    "javascript": Spec("tree_sitter_javascript", "language", **_JS),
    "typescript": Spec("tree_sitter_typescript", "language_typescript", **_JS),
    "tsx": Spec("tree_sitter_typescript", "language_tsx", **_JS),
    "go": Spec("tree_sitter_go", "language", classes=_s("type_spec"),
               functions=_s("function_declaration", "method_declaration", "method_elem"),
               imports=_s("import_spec"), calls=_s("call_expression")),
    "rust": Spec("tree_sitter_rust", "language",
                 classes=_s("struct_item", "enum_item", "trait_item", "impl_item", "mod_item",
                            "union_item"),
                 functions=_s("function_item", "function_signature_item"),
                 imports=_s("use_declaration"), calls=_s("call_expression", "macro_invocation"),
                 comments=_s("line_comment", "block_comment"), name_fields=("name", "type")),
    "java": Spec("tree_sitter_java", "language",
                 classes=_s("class_declaration", "interface_declaration", "enum_declaration",
                            "record_declaration", "annotation_type_declaration"),
                 functions=_s("method_declaration", "constructor_declaration"),
                 imports=_s("import_declaration"), calls=_s("method_invocation",
                                                            "object_creation_expression"),
                 heritage=_s("superclass", "super_interfaces", "extends_interfaces"),
                 comments=_s("line_comment", "block_comment")),
}
_FUNCTION_VALUES = _s("arrow_function", "function_expression", "function", "generator_function")
_IDENT = re.compile(r"[A-Za-z_$][\w$]*")


@lru_cache(maxsize=None)
def parser_for(language: str):
    """A parser with the grammar from its installed wheel (imported, never downloaded)."""
    import tree_sitter
    spec = SPECS[language]
    grammar = getattr(importlib.import_module(spec.module), spec.function)()
    return tree_sitter.Parser(tree_sitter.Language(grammar))


def _text(node) -> str:
    return node.text.decode("utf-8", "replace") if node is not None else ""


def _name(node, spec: Spec) -> str:
    for fname in spec.name_fields:
        child = node.child_by_field_name(fname)
        if child is not None:
            return _text(child)
    return ""


def _callee(node) -> str:
    """The called name: the last identifier of ``f``, ``a.b.f``, ``T::f``, ``new F``."""
    target = (node.child_by_field_name("function") or node.child_by_field_name("constructor")
              or node.child_by_field_name("macro") or node.child_by_field_name("name")
              or node.child_by_field_name("type"))
    while target is not None and not target.type.endswith("identifier"):
        nxt = (target.child_by_field_name("property") or target.child_by_field_name("field")
               or target.child_by_field_name("name"))
        if nxt is None:
            named = target.named_children
            nxt = named[-1] if named else None
        target = nxt
    return _text(target).rsplit("::", 1)[-1]


_NAMES = ("identifier", "property_identifier", "field_identifier", "type_identifier",
          "package_identifier", "scoped_type_identifier")
_SELF = ("this", "self", "Self")
_CHAINS = {"member_expression": ("object", "property"), "selector_expression": ("operand", "field"),
           "field_expression": ("value", "field"), "scoped_identifier": ("path", "name"),
           "method_invocation": ("object", "name"), "field_access": ("object", "field")}


def _reference(node, selves: frozenset[str] = frozenset()) -> str:
    """A callee as a dotted path: ``a.b.f``; ``self.f`` for ``this``/``self``/``Self`` and a
    Go method's receiver (``selves``); ``super.f``; ``?`` for what is not a name."""
    if node is None:
        return "?"
    kind = node.type
    if kind in _NAMES or kind == "identifier":
        text = _text(node)
        return "self" if text in _SELF or text in selves else text
    if kind in _SELF:
        return "self"
    if kind == "super":
        return "super"
    if kind in ("generic_function", "generic_type"):
        return _reference(node.child_by_field_name("function") or node.named_children[0], selves)
    chain = _CHAINS.get(kind)
    if chain is not None:
        head, tail = (node.child_by_field_name(f) for f in chain)
        if tail is None:
            return "?"
        sep = "::" if kind == "scoped_identifier" else "."  # a Rust path, not a value
        return (_reference(head, selves) + sep if head is not None else "") + _text(tail)
    return "?"


def _call_ref(node, selves: frozenset[str]) -> str:
    if node.type == "method_invocation":  # Java: object.name(…), or name(…) on this
        ref = _reference(node, selves)
    else:
        ref = _reference(node.child_by_field_name("function")
                         or node.child_by_field_name("constructor")
                         or node.child_by_field_name("macro")
                         or node.child_by_field_name("type"), selves)
    return "?." + ref.rsplit("?.", 1)[1] if "?." in ref else ref


# Rust keywords a parenthesised group may follow inside a macro's tokens (`if (a)`, `match (x)`)
_RUST_KEYWORDS = frozenset({"if", "else", "while", "match", "return", "for", "in", "loop", "as",
                            "let", "mut", "ref", "move", "fn", "impl", "where", "unsafe", "async",
                            "await", "dyn", "box", "yield", "break", "continue", "const",
                            "static", "struct", "enum", "type", "use", "mod", "pub", "crate"})
_PATH_HEADS = ("identifier", "self", "crate", "super", "metavariable")


def _macro_calls(macro) -> list[tuple[str, str]]:
    """``(ref, name)`` of the calls written in a Rust macro's arguments, which the grammar
    leaves as a token tree: an identifier followed by a parenthesised group, with the path or
    receiver before it (``area(&s)``, ``Sq::new(2.0)``, ``self.side()``, ``make().run()`` →
    ``?.run``). Nested macros are walked too (``format!`` inside ``println!``)."""
    found = []
    stack = [c for c in macro.named_children if c.type == "token_tree"]
    while stack:
        tree = stack.pop()
        tokens = tree.children
        for i, tok in enumerate(tokens):
            if tok.type != "token_tree":
                continue
            stack.append(tok)
            if i >= 2 and tokens[i - 1].type == "!" and tokens[i - 2].type == "identifier":
                found.append((_text(tokens[i - 2]),) * 2)  # a macro in a macro: as one outside
                continue
            if i == 0 or not _text(tok).startswith("(") or tokens[i - 1].type != "identifier":
                continue
            name = _text(tokens[i - 1])
            if name in _RUST_KEYWORDS:
                continue
            parts, j = [name], i - 2
            while j >= 1 and tokens[j].type in ("::", "."):
                head, sep = tokens[j - 1], tokens[j].type
                if head.type not in _PATH_HEADS or (head.type == "identifier"
                                                    and _text(head) in _RUST_KEYWORDS):
                    parts = ["?"]  # `f().g(`, `<T as Tr>::g(`: a receiver with no name
                    break
                text = _text(head)
                parts[:0] = ["self" if text in _SELF else text, sep]
                j -= 2
            if parts == ["?"]:
                found.append((f"?.{name}", name))
                continue
            found.append(("".join(parts), name))
    return found


def _import(node) -> str:
    for child in node.named_children:
        if child.type in ("string", "interpreted_string_literal", "raw_string_literal"):
            return _text(child).strip("\"'`")
    text = _text(node).strip().rstrip(";")
    for word in ("import", "use", "pub", "static"):
        text = text.removeprefix(word).strip()
    return text


def _doc(node, spec: Spec) -> str:
    """The comment block right above a declaration, without its markers."""
    # `export class …`, `const f = …`: the comment sits above the wrapper
    while (node.prev_named_sibling is None and node.parent is not None
           and node.parent.parent is not None
           and node.parent.start_point[0] == node.start_point[0]):
        node = node.parent
    parts, prev, line = [], node.prev_named_sibling, node.start_point[0]
    while prev is not None and prev.type in spec.comments and prev.end_point[0] >= line - 1:
        parts.insert(0, _text(prev))
        line, prev = prev.start_point[0], prev.prev_named_sibling
    text = "\n".join(parts)
    text = re.sub(r"^\s*(/\*\*?|\*/|\*|///?!?|//)", "", text, flags=re.M)
    return text.replace("*/", "").strip()


def _signature(node) -> str:
    body = node.child_by_field_name("body")
    end = body.start_byte if body is not None else node.end_byte
    head = node.text[: end - node.start_byte].decode("utf-8", "replace")
    return " ".join(head.split())[:240]


def _bases(heritage) -> list[str]:
    """The dotted names a class's heritage clause lists (generic arguments left out)."""
    found = []
    stack = list(heritage.named_children)
    while stack:
        cur = stack.pop(0)
        if cur.type in ("type_arguments", "type_parameters"):
            continue
        ref = _reference(cur)
        if ref != "?" and ref not in ("extends", "implements"):
            found.append(ref)
        else:
            stack[:0] = cur.named_children
    return found


def _receiver_names(node) -> frozenset[str]:
    """A Go method's receiver variable (``g`` in ``func (g *Greeter) …``): it means self."""
    receiver = node.child_by_field_name("receiver")
    if receiver is None:
        return frozenset()
    return frozenset(_text(p.child_by_field_name("name")) for p in receiver.named_children
                     if p.child_by_field_name("name") is not None)


def _receiver(node) -> str:
    receiver = node.child_by_field_name("receiver")
    if receiver is None:
        return ""
    names = _IDENT.findall(_text(receiver))
    return names[-1] if names else ""


def _in_module(ref: str, mods: tuple[str, ...]) -> str:
    """A Rust ``use`` path written inside the inline modules ``mods`` of a file, from the
    file itself: in ``mod tests`` ``super::area`` is the file's own ``self::area``, and
    ``self::x`` is ``self::tests::x``."""
    spec, hash_, member = ref.partition("#")
    parts = spec.split("::") if spec else []
    if parts[:1] == ["self"]:
        parts = ["self", *mods, *parts[1:]]
    elif parts[:1] == ["super"]:
        up = next((i for i, p in enumerate(parts) if p != "super"), len(parts))
        if up <= len(mods):
            parts = ["self", *mods[:len(mods) - up], *parts[up:]]
        else:
            parts = ["super"] * (up - len(mods)) + parts[up:]
    return "::".join(parts) + hash_ + member


def parse(language: str, source: str, module: str) -> Parsed | None:
    spec = SPECS[language]
    try:
        tree = parser_for(language).parse(source.encode("utf-8", "surrogatepass"))
    except (ValueError, UnicodeError):
        return None
    out = Parsed(language)
    root = out.add(Node("module", module.rsplit(".", 1)[-1], module, 1,
                        tree.root_node.end_point[0] + 1))
    types: dict[str, int] = {}

    def calls_in(node, src: int, selves: frozenset[str] = frozenset()) -> None:
        """The calls in a function, and the bases of the classes it defines (no nodes)."""
        seen: dict[str, str] = {}
        bases: dict[str, None] = {}
        stack = [node]
        while stack:
            cur = stack.pop()
            if cur.type in spec.classes and cur is not node:
                bases.update((ref, None) for sub in cur.named_children
                             if sub.type in spec.heritage for ref in _bases(sub))
            if cur.type in spec.calls:
                name = _callee(cur)
                if name:
                    ref = _call_ref(cur, selves)
                    seen.setdefault(f"?.{name}" if ref == "?" else ref, name)
            if cur.type == "macro_invocation":
                for ref, name in _macro_calls(cur):
                    seen.setdefault(ref, name)
            stack.extend(cur.named_children)
        out.edges.extend(Edge(src, "calls", name, ref=ref) for ref, name in seen.items())
        out.edges.extend(Edge(src, "inherits", ref.rsplit(".", 1)[-1], ref=ref) for ref in bases)

    def imports(node, mods: tuple[str, ...] = ()) -> None:
        target = _import(node)
        found = [(_in_module(ref, mods), alias) if mods else (ref, alias)
                 for ref, alias in bindings.READERS[language](node)]
        out.edges.extend(Edge(root, "imports", target, ref=ref, alias=alias)
                         for ref, alias in found or [(target, "")])

    def add(node, kind: str, name: str, parent: int, prefix: str) -> int:
        return out.add(Node(kind, name, prefix + name, node.start_point[0] + 1,
                            node.end_point[0] + 1, signature=_signature(node),
                            docstring=_doc(node, spec), parent=parent))

    def visit(node, parent: int, prefix: str, in_class: bool, mods: tuple[str, ...] = ()
              ) -> None:
        """``mods``: the Rust modules declared inline around ``node`` (``mod tests { … }``),
        which ``self`` and ``super`` in a ``use`` start from."""
        for child in node.named_children:
            kind = child.type
            if kind == "mod_item" and child.child_by_field_name("body") is None:
                imports(child, mods)  # `mod m;`: the module lives in its own file
            elif kind in spec.classes:
                name = _name(child, spec) or kind
                idx = add(child, "class", name, parent, prefix)
                types.setdefault(name, idx)
                for sub in child.named_children:
                    if sub.type in spec.heritage:
                        out.edges.extend(Edge(idx, "inherits", ref.rsplit(".", 1)[-1], ref=ref)
                                         for ref in _bases(sub))
                trait = child.child_by_field_name("trait")
                if trait is not None:
                    ref = _reference(trait)
                    out.edges.append(Edge(idx, "inherits", ref.rsplit(".", 1)[-1], ref=ref))
                body = child.child_by_field_name("body") or child.child_by_field_name("type")
                inner = (*mods, name) if kind == "mod_item" else mods
                visit(body if body is not None else child, idx, prefix + name + ".", True, inner)
            elif kind in spec.functions:
                receiver = _receiver(child)
                method = in_class or bool(receiver) or kind in ("method_elem", "method_signature")
                owner = types.get(receiver, parent) if receiver else parent
                idx = add(child, "method" if method else "function", _name(child, spec) or kind,
                          owner, prefix + (receiver + "." if receiver else ""))
                calls_in(child, idx, _receiver_names(child))
            elif kind in spec.declarators and (child.child_by_field_name("value") is not None
                                               and child.child_by_field_name("value").type
                                               in _FUNCTION_VALUES):
                idx = add(child, "method" if in_class else "function", _name(child, spec),
                          parent, prefix)
                calls_in(child, idx)
            elif kind in spec.imports or (kind == "export_statement"
                                          and child.child_by_field_name("source") is not None):
                imports(child, mods)
            elif kind in spec.declarators and language in ("javascript", "typescript", "tsx") \
                    and any(bindings.require(child)):
                out.edges.extend(Edge(root, "imports", ref.split("#")[0], ref=ref, alias=alias)
                                 for ref, alias in bindings.require(child))
            else:
                visit(child, parent, prefix, in_class, mods)

    visit(tree.root_node, root, "", False)
    return out
