"""MkDocs hook: pages whose tables come from the code, so the docs cannot drift from it.

A page writes a marker comment and the hook replaces it with generated Markdown:

| marker | replaced by |
|---|---|
| ``rules NODE`` | the node's pre-validation rules, in order, with messages and codes |
| ``checks NODE`` | the checks this project adds after hipDNN's rules (``NODE.checks``) |
| ``post-rules NODE`` | the node's post-validation messages |
| ``slots NODE`` | slot, input/output, required, descriptor attribute |
| ``scalars NODE`` | flags and scalars with their descriptor attributes |
| ``unsupported ATTRIBUTES`` | cuDNN setters recorded as unsupported |
| ``tensor-rules`` | ``TensorAttributes.validate()`` messages |
| ``keywords`` | cudnn-frontend keyword → setter table |
| ``cli-help`` | ``hipdnn-graph --help`` of every subcommand |
| ``kit`` | the conformance kit's features and tolerances |
| ``include-if-exists PATH`` | PATH in a code block, or a note while it does not exist |

A marker is written ``<!-- hipdnn:rules SdpaBwdNode -->``.

Messages are read from the source with :mod:`ast`: f-string parts that depend on the node are
filled with its label, loop variables over literal tuples are expanded, and every other value is
shown as ``<expression>``. The hook also appends the pages of ``docs/notes/`` to the navigation.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import os
import re
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
MARKER = re.compile(r"^([ \t]*)<!-- hipdnn:([a-z-]+)(?: ([^ ]+))? -->", re.MULTILINE)

Env = dict[str, Any]


# ----- message extraction -----
def _literal_items(node: ast.expr, literals: dict[str, ast.expr]) -> list[ast.expr] | None:
    if isinstance(node, ast.Name) and node.id in literals:
        node = literals[node.id]
    if isinstance(node, ast.Tuple | ast.List):
        return list(node.elts)
    return None


def _bind(target: ast.expr, value: ast.expr | int, env: Env) -> Env:
    env = dict(env)
    if isinstance(target, ast.Name):
        if isinstance(value, int):
            env[target.id] = value
        elif isinstance(value, ast.Constant):
            env[target.id] = value.value
        else:
            env.pop(target.id, None)
    elif isinstance(target, ast.Tuple):
        if isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts):
            for t, v in zip(target.elts, value.elts, strict=True):
                env = _bind(t, v, env)
        else:
            for t in target.elts:
                env = _bind(t, ast.Name(id="?"), env)
    return env


def _loop_envs(stmt: ast.For, env: Env, literals: dict[str, ast.expr]) -> list[Env]:
    it = stmt.iter
    if isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "enumerate":
        items = _literal_items(it.args[0], literals) if it.args else None
        if items is not None and isinstance(stmt.target, ast.Tuple) and len(stmt.target.elts) == 2:
            index_t, value_t = stmt.target.elts
            return [_bind(value_t, v, _bind(index_t, i, env)) for i, v in enumerate(items)]
        return [env]
    items = _literal_items(it, literals)
    if items is None:
        return [env]
    return [_bind(stmt.target, item, env) for item in items]


def _render(node: ast.expr, env: Env, label: str) -> str:
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            elif isinstance(part, ast.FormattedValue):
                expr = part.value
                text = ast.unparse(expr)
                if text in ("node", "self.label", "kind"):
                    out.append(label)
                elif isinstance(expr, ast.Name) and expr.id in env:
                    out.append(str(env[expr.id]))
                else:
                    for name, value in env.items():  # dims[i] with i bound → dims[1]
                        text = re.sub(rf"\b{re.escape(name)}\b", str(value), text)
                    out.append(f"<{text}>")
        return "".join(out)
    return f"<{ast.unparse(node)}>"


def _code(node: ast.expr | None) -> str:
    if node is None:
        return "INVALID_VALUE"
    return ast.unparse(node).split(".")[-1]


def _calls(stmt: ast.stmt) -> Iterator[ast.Call]:
    for node in ast.walk(stmt):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name | ast.Attribute):
            yield node


def _messages_in(
    body: list[ast.stmt], envs: list[Env], label: str, out: list[tuple[str, str]]
) -> None:
    literals: dict[str, ast.expr] = {}
    for stmt in body:
        if (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Tuple | ast.List)
        ):
            literals[stmt.targets[0].id] = stmt.value
        if isinstance(stmt, ast.For):  # one iteration after the other, as the code runs
            for env in envs:
                for inner in _loop_envs(stmt, env, literals):
                    _messages_in(stmt.body, [inner], label, out)
            continue
        if isinstance(stmt, ast.If | ast.While | ast.With | ast.Try):
            for block in ("body", "orelse", "finalbody"):
                _messages_in(getattr(stmt, block, []) or [], envs, label, out)
            if isinstance(stmt, ast.Try):
                for handler in stmt.handlers:
                    _messages_in(handler.body, envs, label, out)
            continue
        for call in _calls(stmt):
            name = call.func.id if isinstance(call.func, ast.Name) else call.func.attr
            if name == "_fail" and call.args:
                msg, code = call.args[0], call.args[1] if len(call.args) > 1 else None
            elif name in ("HipdnnError",) and len(call.args) == 2:
                code, msg = call.args
            elif name == "check_shape" and len(call.args) == 5:  # sdpa_rules' shared helper
                what, source = (_render(call.args[i], {}, label) for i in (1, 4))
                text = f"{label}: {what} dims <dims> must match {source} dims <expected dims>"
                msg, code = ast.Constant(text), None
            else:
                continue
            for env in envs:
                item = (_render(msg, env, label), _code(code))
                if item not in out:
                    out.append(item)


def messages(func: Callable[..., Any], label: str) -> list[tuple[str, str]]:
    """``(message, error code name)`` pairs a rule or method can raise, in source order."""
    closure = inspect.getclosurevars(func).nonlocals
    if func.__name__ == "rule" and "inputs" in closure:  # sdpa_rules.required_slots
        return [(f"{label} missing {s} input", "ATTRIBUTE_NOT_SET") for s in closure["inputs"]] + [
            (f"{label} missing {s} output", "ATTRIBUTE_NOT_SET") for s in closure["outputs"]
        ]
    tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    fn = tree.body[0]
    assert isinstance(fn, ast.FunctionDef)
    out: list[tuple[str, str]] = []
    _messages_in(fn.body, [{}], label, out)
    return out


def _cell(text: str) -> str:
    return "`" + text.replace("|", "\\|") + "`"


def _doc(func: Callable[..., Any]) -> str:
    return (inspect.getdoc(func) or "").split("\n\n")[0].replace("\n", " ")


def _node_class(name: str) -> Any:
    import hipdnn_graph as hg

    return getattr(hg, name)


def rules_table(node_name: str, table: str = "rules") -> str:
    """Markdown table of a node's pre-validation rules, or of its added ``checks``."""
    cls = _node_class(node_name)
    rows = ["| # | rule | checks | code | message |", "|---|---|---|---|---|"]
    for i, rule in enumerate(getattr(cls, table)):
        name = "required_slots" if rule.__name__ == "rule" else rule.__name__
        first = True
        for msg, code in messages(rule, cls.label) or [
            ("(reason recorded by the setter)", "INVALID_VALUE")
        ]:
            msg = msg.replace("<a.get_unsupported_reason()>", "<the first recorded reason>")
            head = f"| {i} | `{name}` | {_doc(rule)} " if first else "| | | "
            rows.append(f"{head}| `{code}` | {_cell(msg)} |")
            first = False
    return "\n".join(rows)


def post_rules_table(node_name: str) -> str:
    """Markdown table of what a node's post-validation raises."""
    from hipdnn_graph.nodes import Node
    from hipdnn_graph.nodes import sdpa_rules as r

    cls = _node_class(node_name)
    sources: list[tuple[str, Callable[..., Any]]] = [
        ("Node.post_validate_node", Node.post_validate_node),
        (f"{node_name}.post_validate_node", cls.post_validate_node),
    ]
    for helper in ("check_shape", "check_layout"):  # shared helpers, when present
        if hasattr(r, helper):
            sources.append((helper, getattr(r, helper)))
    rows = ["| step | code | message |", "|---|---|---|"]
    for where, func in sources:
        for msg, code in messages(func, cls.label):
            msg = msg.replace("<self.name>", "<node name>")
            rows.append(f"| `{where}` | `{code}` | {_cell(msg)} |")
    see = "see [Concepts](concepts.md#tensor-validation)"
    rows.append(f"| every output tensor | | `TensorAttributes.validate()`, {see} |")
    return "\n".join(rows)


def tensor_rules_table() -> str:
    """Markdown table of ``TensorAttributes.validate()``."""
    from hipdnn_graph import TensorAttributes

    rows = ["| # | code | message |", "|---|---|---|"]
    for i, (msg, code) in enumerate(messages(TensorAttributes.validate, "Tensor"), 1):
        rows.append(f"| {i} | `{code}` | {_cell(msg)} |")
    return "\n".join(rows)


def _spec(node_name: str) -> Any:
    from hipdnn_graph.nodes.sdpa_bwd import SDPA_BWD_SPEC
    from hipdnn_graph.nodes.sdpa_fwd import SDPA_FWD_SPEC

    return SDPA_BWD_SPEC if node_name == "SdpaBwdNode" else SDPA_FWD_SPEC


def slots_table(node_name: str) -> str:
    """Slot table from the node's spec: descriptor attribute, hipDNN field and JSON key."""
    spec = _spec(node_name)
    rows = [
        "| slot | direction | required | descriptor attribute (id) | hipDNN field (number) |",
        "|---|---|---|---|---|",
    ]
    for slot in spec.slots:
        required = "yes" if slot.required else "optional"
        direction = "output" if slot.output else "input"
        attr = slot.attribute
        rows.append(
            f"| `{slot.name}` | {direction} | {required} | `{attr.name}` ({attr.value}) | "
            f"`{slot.wire}` ({slot.fb_slot}) |"
        )
    return "\n".join(rows)


def scalars_table(node_name: str) -> str:
    """Flags and scalars from the node's spec, with their descriptor attributes."""
    spec = _spec(node_name)
    rows = [
        "| member | descriptor type | written | descriptor attribute (id) | hipDNN field (no.) |",
        "|---|---|---|---|---|",
    ]
    for scalar in spec.scalars:
        attr, kind = scalar.attribute
        written = "always" if scalar.always else "when set"
        rows.append(
            f"| `{scalar.name}` | {kind.name} | {written} | `{attr.name}` ({attr.value}) | "
            f"`{scalar.name}` ({scalar.fb_slot}) |"
        )
    compute = spec.compute_type
    rows.append(
        f"| `compute_data_type` | DATA_TYPE | always | `{compute.name}` ({compute.value}) | "
        "the node's `compute_data_type` |"
    )
    rows.append("| `name` | CHAR | when named | `OPERATION_NAME_EXT` (60300) | the node's `name` |")
    return "\n".join(rows)


def unsupported_table(attributes_name: str) -> str:
    """The cuDNN setters an attributes class records as unsupported."""
    cls = _node_class(attributes_name)
    rows = ["| setter | recorded reason |", "|---|---|"]
    members = inspect.getmembers(cls, inspect.isfunction)
    members.sort(key=lambda item: inspect.getsourcelines(item[1])[1])
    for name, func in members:
        source = inspect.getsource(func)
        if "_record_unsupported" not in source or name.startswith("_"):
            continue
        reasons = re.findall(r'_record_unsupported\(\s*"([^"]+)"', source)
        note = " (only when called with True)" if "if value" in source else ""
        rows.append(f"| `{name}` | {_cell(reasons[0]) if reasons else ''}{note} |")
    return "\n".join(rows)


def keywords_table() -> str:
    """cudnn-frontend keyword → setter, for both SDPA methods."""
    from hipdnn_graph.graph.builders.sdpa_keywords import BACKWARD_KEYWORDS, FORWARD_KEYWORDS

    rows = ["| keyword | `sdpa` | `sdpa_backward` |", "|---|---|---|"]
    for key in dict.fromkeys([*FORWARD_KEYWORDS, *BACKWARD_KEYWORDS]):
        fwd, bwd = FORWARD_KEYWORDS.get(key), BACKWARD_KEYWORDS.get(key)
        rows.append(f"| `{key}` | {f'`{fwd}`' if fwd else '—'} | {f'`{bwd}`' if bwd else '—'} |")
    return "\n".join(rows)


def cli_help() -> str:
    """``--help`` of the command and each subcommand, as code blocks."""
    from hipdnn_graph.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    parsers: list[tuple[str, Any]] = [("hipdnn-graph --help", parser)]
    parsers += [(f"hipdnn-graph {name} --help", p) for name, p in sub.choices.items()]  # type: ignore[attr-defined]
    blocks = []
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "100"  # argparse wraps help to the terminal width
    try:
        for title, p in parsers:
            buffer = io.StringIO()
            with contextlib.redirect_stdout(buffer):
                p.print_help()
            blocks.append(f'```text title="{title}"\n{buffer.getvalue().rstrip()}\n```')
    finally:
        if old is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old
    return "\n\n".join(blocks)


def kit_tables() -> str:
    """The conformance kit's features and tolerances."""
    from hipdnn_graph.testing import FEATURES, TOLERANCES

    rows = ["| feature | what the generated graph uses |", "|---|---|"]
    rows += [f"| `{name}` | {text} |" for name, text in FEATURES.items()]
    rows += ["", "| io data type | rtol | atol |", "|---|---|---|"]
    rows += [f"| `{dt.name}` | {t.rtol:g} | {t.atol:g} |" for dt, t in TOLERANCES.items()]
    return "\n".join(rows)


def include_if_exists(path: str) -> str:
    """The file in a code block, or a note while it does not exist."""
    file = ROOT / path
    if not file.is_file():
        return f'!!! note "Not in this checkout yet"\n    `{path}` is not part of this checkout.'
    lang = {".py": "python", ".toml": "toml", ".md": "markdown"}.get(file.suffix, "text")
    return f'```{lang} title="{path}"\n{file.read_text().rstrip()}\n```'


GENERATORS: dict[str, Callable[..., str]] = {
    "rules": rules_table,
    "checks": lambda node_name: rules_table(node_name, "checks"),
    "post-rules": post_rules_table,
    "slots": slots_table,
    "scalars": scalars_table,
    "unsupported": unsupported_table,
    "tensor-rules": tensor_rules_table,
    "keywords": keywords_table,
    "cli-help": cli_help,
    "kit": kit_tables,
    "include-if-exists": include_if_exists,
}


def expand(markdown: str) -> str:
    """Replace every marker in ``markdown`` with its generated Markdown."""

    def replace(match: re.Match[str]) -> str:
        indent, kind, arg = match.group(1), match.group(2), match.group(3)
        generator = GENERATORS[kind]
        text = generator(arg) if arg else generator()
        return "\n".join(indent + line if line else line for line in text.splitlines())

    return MARKER.sub(replace, markdown)


# ----- Mermaid without its script -----
#: the Mermaid script served with the site (`make docs` takes it from the npm package)
MERMAID_SCRIPT = "javascripts/mermaid.min.js"
MERMAID_JS = ROOT / "docs" / MERMAID_SCRIPT
MERMAID_FENCE = re.compile(r"^([ \t]*)```[ \t]*mermaid[ \t]*$", re.MULTILINE)
MERMAID_NOTE = (
    "This diagram is shown as its Mermaid source: the site was built without "
    "`docs/javascripts/mermaid.min.js`, which `make docs` fetches with npm. Install npm and "
    "run `make docs` again to draw it."
)


def mermaid_as_source(markdown: str) -> str:
    """``markdown`` with each Mermaid fence turned into a plain code block under a note, for a
    site built without the Mermaid script (Material would otherwise fetch one from a CDN)."""

    def replace(match: re.Match[str]) -> str:
        indent = match.group(1)
        note = f'{indent}!!! note "Diagram source"\n{indent}    {MERMAID_NOTE}\n\n'
        return f'{note}{indent}```text title="Mermaid source"'

    return MERMAID_FENCE.sub(replace, markdown)


def without_mermaid_script(config: Any) -> Any:
    """``config`` without the Mermaid script in ``extra_javascript`` (no page then loads a
    script the site does not have)."""
    scripts = config.get("extra_javascript")
    if isinstance(scripts, list):
        scripts[:] = [s for s in scripts if str(s) != MERMAID_SCRIPT]
    return config


# ----- MkDocs events -----
def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    markdown = expand(markdown)
    return markdown if MERMAID_JS.is_file() else mermaid_as_source(markdown)


def on_config(config: Any, **kwargs: Any) -> Any:
    if not MERMAID_JS.is_file():
        config = without_mermaid_script(config)
    notes = sorted((ROOT / "docs" / "notes").glob("*.md"))
    nav = config.get("nav")
    if notes and isinstance(nav, list):
        entries = [{_title(p): f"notes/{p.name}"} for p in notes]
        nav.append({"Notes": entries})
    return config


def _title(path: Path) -> str:
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return path.stem.replace("_", " ").replace("-", " ").capitalize()
