"""The snapshot of a session's namespace that compaction carries over.

When a session passes its caps, its cells are folded into one base cell:
Python source that, run in fresh globals, binds again every name it can
carry. `snapshot(...)` writes that source from the globals the cells left
and names what it could not carry (`lost`); nothing is dropped silently.

What is carried, per name (the last top-level statement binding it, in
cell order, tells how it was made):
- a module, or an object bound by `import`/`from ... import`: that import,
  again;
- a function or class made by a top-level `def`/`class` statement (or an
  assignment such as `Point = namedtuple(...)` or `sq = lambda x: ...`):
  that statement, run again (its decorators too);
- plain values (numbers, strings, bytes, containers of them): literals;
- other objects `pickle` would keep (dataclass and other instances of the
  session's classes, `datetime`, `Decimal`, `Fraction`, `Counter`, ...):
  rebuilt from their `__reduce_ex__`, their class reached by name;
- another name's object: that name (identity kept between globals).

Everything else (generators, coroutines, tasks, open files, objects of the
runtime, values in a reference cycle, closures whose state changed) is
named in `lost`.

Invariants:
- The source binds only the names it carries (and two helpers it deletes
  at its end); every statement in it ran in fresh globals here, in its
  order, before it was kept: a statement that did not is left out and its
  name is lost (names it needed and lost make it lost in turn).
- No statement of the source makes a tool call at its top level or awaits.
"""

import builtins
import sys

#: A base's statements each follow a line `#baton-at <line> <file>`: the
#: runtime compiles each as if at that line of that file (a re-run `def`
#: keeps its cell's file and lines in tracebacks); `0 -` is the base's own.
SEGMENT = "#baton-at "


def segments(source):
    """`(line, file, text)` of each part of a base's source, in order
    (`file` None and `line` 0 for the base's own; the text before the first
    header too)."""
    parts = []
    line, name, lines = 0, None, []
    for text in source.splitlines(True):
        if text.startswith(SEGMENT):
            parts.append((line, name, "".join(lines)))
            at, _, name = text[len(SEGMENT):].rstrip("\n").partition(" ")
            line, name, lines = int(at), (None if name == "-" else name), []
        else:
            lines.append(text)
    parts.append((line, name, "".join(lines)))
    return [part for part in parts if part[2]]


#: The prologue and epilogue of every base: builtins and the rebuilder are
#: reached by names no program uses (a program may rebind `list` or `set`).
PROLOGUE = """import builtins as __baton_b
def __baton_new(f, args, state=None, items=None, pairs=None):
    obj = f(*args)
    if state is not None:
        if __baton_b.hasattr(__baton_b.type(obj), "__setstate__"):
            obj.__setstate__(state)
        else:
            slots = None
            if __baton_b.type(state) is __baton_b.tuple and __baton_b.len(state) == 2:
                state, slots = state
            if state:
                obj.__dict__.update(state)
            if slots:
                for k, v in slots.items():
                    __baton_b.object.__setattr__(obj, k, v)
    for x in items or ():
        obj.append(x)
    for k, v in pairs or ():
        obj[k] = v
    return obj
"""
EPILOGUE = SEGMENT + "0 -\ndel __baton_b, __baton_new\n"

#: Modules whose classes' instances are rebuilt from `__reduce_ex__`
#: (besides the session's own classes and the builtins').
REBUILT_MODULES = frozenset((
    "builtins", "datetime", "decimal", "fractions", "collections", "enum",
    "uuid", "pathlib", "re", "functools", "types", "array", "ipaddress",
    "zoneinfo", "string", "statistics", "copyreg", "numbers", "operator",
    "json", "math", "itertools",
))

#: Builtin types whose objects are running things: never rebuilt.
_RUNNING_TYPES = frozenset((
    "generator", "coroutine", "async_generator", "frame", "code", "traceback",
    "module", "function", "builtin_function_or_method", "cell",
))

_PLAIN_SCALARS = (int, bool, type(None), str, bytes)
_MAX_DEPTH = 100
_SKIPPED = frozenset(("__builtins__", "__name__", "__doc__"))


class Lost(Exception):
    """A value that cannot be carried."""


class TooLarge(Exception):
    """The base source would pass the code a program may have."""


def snapshot(g, cells, injected, fresh_globals, run, max_bytes=1 << 62):
    """The base source for the globals `g` and the names it loses.

    `cells`: `(filename, source)` of each cell run in `g`, in order;
    `injected`: what the runtime bound (skipped while the code left it);
    `fresh_globals()`: new globals as a base cell starts with;
    `run(text, globals)`: compiles and runs one statement's text;
    `max_bytes`: the longest source a base may have (`TooLarge` past it,
    before anything runs)."""
    import ast
    made_by = _last_bindings(ast, cells)
    module_name = g.get("__name__", "__main__")
    names = [
        n for n in list(g)
        if type(n) is str and n not in _SKIPPED
        and not (n in injected and g[n] is injected[n])
    ]
    writer = _Writer(g, names, module_name, max_bytes)
    for name in names:
        writer.classify(name, made_by.get(name))
    return writer.finish(fresh_globals, run)


def _last_bindings(ast, cells):
    """Each name's last top-level binding statement: `(kind, text, node,
    filename)`, kind `import`, `def` or `assign`, or None for another kind
    (a loop's target, an augmented assignment, a `del`...)."""
    made_by = {}
    for filename, source in cells:
        try:
            tree = ast.parse(source)
        except Exception:
            continue
        for node in _top_level(tree.body):
            for name, how in _bound_by(ast, source, node):
                made_by[name] = how and how + (filename,)
    return made_by


def _top_level(body):
    """The statements that run at a module's top level, nested blocks too
    (not function or class bodies)."""
    for node in body:
        yield node
        for field in ("body", "orelse", "finalbody"):
            inner = getattr(node, field, None)
            if isinstance(inner, list) and not _is_scope(node):
                yield from _top_level(inner)
        for handler in getattr(node, "handlers", ()) or ():
            yield from _top_level(handler.body)
        for case in getattr(node, "cases", ()) or ():
            yield from _top_level(case.body)


def _is_scope(node):
    return type(node).__name__ in ("FunctionDef", "AsyncFunctionDef", "ClassDef")


def _bound_by(ast, source, node):
    """`(name, how)` for each name `node` binds itself."""
    kind = type(node).__name__
    if kind in ("FunctionDef", "AsyncFunctionDef", "ClassDef"):
        decorators = "".join("@%s\n" % ast.get_source_segment(source, d) for d in node.decorator_list)
        text = decorators + (ast.get_source_segment(source, node) or "")
        return [(node.name, ("def", text, node))]
    if kind in ("Import", "ImportFrom"):
        return [(_alias_name(kind, a), ("import", _one_import(node, kind, a), node)) for a in node.names if a.name != "*"]
    if kind == "Assign":
        targets = [n for t in node.targets for n in _target_names(t)]
        simple = len(node.targets) == 1 and type(node.targets[0]).__name__ == "Name"
        runs = simple and not _awaits(ast, node.value)
        how = ("assign", ast.get_source_segment(source, node) or "", node) if runs else None
        return [(n, how) for n in targets]
    if kind in ("AnnAssign", "AugAssign"):
        return [(n, None) for n in _target_names(node.target)]
    if kind in ("For", "AsyncFor"):
        return [(n, None) for n in _target_names(node.target)]
    if kind in ("With", "AsyncWith"):
        return [(n, None) for item in node.items if item.optional_vars is not None for n in _target_names(item.optional_vars)]
    if kind == "Delete":
        return [(n, None) for t in node.targets for n in _target_names(t)]
    return []


def _alias_name(kind, alias):
    if alias.asname:
        return alias.asname
    return alias.name.split(".")[0] if kind == "Import" else alias.name


def _one_import(node, kind, alias):
    """The import statement that binds only `alias`'s name."""
    part = alias.name + (" as " + alias.asname if alias.asname else "")
    if kind == "Import":
        return "import " + part
    return "from %s%s import %s" % ("." * (node.level or 0), node.module or "", part)


def _target_names(target):
    kind = type(target).__name__
    if kind == "Name":
        return [target.id]
    if kind in ("Tuple", "List"):
        return [n for e in target.elts for n in _target_names(e)]
    if kind == "Starred":
        return _target_names(target.value)
    return []


def _awaits(ast, node):
    return any(type(n).__name__ in ("Await", "Yield", "YieldFrom") for n in ast.walk(node))


class _Writer:
    """Classifies each global and writes the statements that bind it."""

    def __init__(self, g, names, module_name, max_bytes):
        self.g = g
        self.room = max_bytes - len(PROLOGUE) - len(EPILOGUE)
        self.module_name = module_name
        #: Statements in the order to try: `(group, order, name, text,
        #: check)`; `check(made)` says whether what the statement made in
        #: fresh globals is like the value it stands for.
        self.statements = []
        self.lost = []
        #: The first global holding each object that is not a number or a
        #: string, by id (later ones are bound to it: identity is kept).
        self.first_name = {}
        for name in names:
            value = g[name]
            if type(value) not in _PLAIN_SCALARS + (float, complex):
                self.first_name.setdefault(id(value), name)

    def add(self, group, name, text, check=None):
        self.room -= len(text.encode("utf-8", "surrogatepass"))
        if self.room < 0:
            raise TooLarge()
        self.statements.append((group, len(self.statements), name, text, check))

    def classify(self, name, how):
        value = self.g[name]
        first = self.first_name.get(id(value))
        if first is not None and first != name:
            self.add(3, name, "%s0 -\n%s = %s\n" % (SEGMENT, name, first))
            return
        if how is not None and self._made_by(value, how):
            group = 0 if how[0] == "import" else 2
            kind, text, node, filename = how
            # Where the statement was: its functions' tracebacks say so.
            first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
            text = "%s%d %s\n%s\n" % (SEGMENT, first, filename, text.rstrip("\n"))
            self.add(group, name, text, lambda made: _alike(made, value))
            return
        try:
            text, plain = self.expression(value, 0, set(), top=True)
        except (Lost, RecursionError):
            self.lost.append(name)
            return
        self.add(1 if plain else 3, name, "%s0 -\n%s = %s\n" % (SEGMENT, name, text))

    def _made_by(self, value, how):
        """Whether running `how`'s statement again may make `value`."""
        kind, _text, node, filename = how
        if kind == "import":
            return True
        if isinstance(value, type):
            if kind == "def":
                return getattr(value, "__qualname__", None) == node.name and getattr(value, "__module__", None) == self.module_name
            return True
        # A function's code and closure are compared once it is made again;
        # any other object's state may have changed since it was made.
        return _code_file(value) == filename

    def expression(self, value, depth, active, top=False):
        """Python source for `value` and whether it is plain (no names)."""
        if depth > _MAX_DEPTH:
            raise Lost()
        kind = type(value)
        if kind in _PLAIN_SCALARS:
            return repr(value), True
        if kind is float:
            text = repr(value)
            return (text, True) if text not in ("inf", "-inf", "nan") else ("__baton_b.float(%r)" % text, False)
        if kind is complex:
            return "__baton_b.complex(%r)" % repr(value).strip("()"), False
        if not top:
            first = self.first_name.get(id(value))
            if first is not None:
                return first, False
        if id(value) in active:
            raise Lost()
        active.add(id(value))
        try:
            if kind in (list, tuple, set, frozenset, dict):
                return self._container(value, kind, depth, active)
            return self._rebuilt(value, depth, active, top), False
        finally:
            active.discard(id(value))

    def _container(self, value, kind, depth, active):
        plain = True
        parts = []
        items = dict.items(value) if kind is dict else value
        for item in items:
            if kind is dict:
                k, kp = self.expression(item[0], depth + 1, active)
                v, vp = self.expression(item[1], depth + 1, active)
                parts.append("%s: %s" % (k, v))
                plain = plain and kp and vp
            else:
                text, p = self.expression(item, depth + 1, active)
                parts.append(text)
                plain = plain and p
        body = ", ".join(parts)
        if kind is list:
            return "[%s]" % body, plain
        if kind is dict:
            return "{%s}" % body, plain
        if kind is tuple:
            return "(%s%s)" % (body, "," if len(parts) == 1 else ""), plain
        if kind is set:
            return ("{%s}" % body, plain) if parts else ("__baton_b.set()", False)
        return "__baton_b.frozenset([%s])" % body, False

    def _rebuilt(self, value, depth, active, top):
        """An object reached by name, or rebuilt from `__reduce_ex__`."""
        reached = self.reference(value, named=not top)
        if reached is not None:
            return reached
        if not self._rebuildable(type(value)):
            raise Lost()
        try:
            reduced = value.__reduce_ex__(4)
        except Exception:
            raise Lost()
        if not isinstance(reduced, tuple) or not 2 <= len(reduced) <= 5:
            raise Lost()
        maker, args, state, items, pairs = (list(reduced) + [None] * 3)[:5]
        made_by = self.reference(maker)
        if made_by is None or not isinstance(args, tuple):
            raise Lost()
        texts = [made_by, self.expression(args, depth + 1, active)[0]]
        texts.append(self.expression(state, depth + 1, active)[0])
        for rest in (items, pairs):
            texts.append("None" if rest is None else self.expression(list(rest), depth + 1, active)[0])
        return "__baton_new(%s)" % ", ".join(texts)

    def _rebuildable(self, cls):
        """Whether instances of `cls` may be rebuilt: not a running thing,
        and every class of its MRO the session's own or of a module listed
        above."""
        if isinstance(cls, type) and issubclass(cls, type):
            return False
        for base in cls.__mro__:
            module = getattr(base, "__module__", None)
            if module == "builtins" and base.__name__ in _RUNNING_TYPES:
                return False
            if module != self.module_name and module not in REBUILT_MODULES:
                return False
        return True

    def reference(self, value, named=True):
        """A name that reaches `value`: a global carried (unless not
        `named`), a module, a builtin, or a module's attribute; None when
        there is none."""
        first = self.first_name.get(id(value)) if named else None
        if first is not None:
            return first
        if type(value).__name__ == "module":
            return "__baton_b.__import__(%r, fromlist=['_'])" % value.__name__
        if getattr(builtins, getattr(value, "__name__", "") or "", None) is value:
            return "__baton_b.%s" % value.__name__
        module = getattr(value, "__module__", None)
        qualname = getattr(value, "__qualname__", None)
        if type(module) is not str or type(qualname) is not str or "<" in qualname:
            return None
        if module == self.module_name or module not in sys.modules:
            return None
        found = sys.modules[module]
        for part in qualname.split("."):
            found = getattr(found, part, None)
        if found is not value:
            return None
        return "__baton_b.__import__(%r, fromlist=['_']).%s" % (module, qualname)

    def finish(self, fresh_globals, run):
        """Runs each statement in fresh globals, in order (one that needs a
        name bound later tries again after it); keeps those that ran and
        made what they stand for."""
        scratch = fresh_globals()
        run(PROLOGUE, scratch)
        pending = sorted(self.statements, key=lambda s: s[:2])
        kept = []
        while pending:
            waiting = []
            for group, order, name, text, check in pending:
                try:
                    run(text, scratch)
                except NameError:
                    waiting.append((group, order, name, text, check))
                    continue
                except BaseException:
                    self.lost.append(name)
                    continue
                if check is not None and not check(scratch.get(name, _MISSING)):
                    self.lost.append(name)
                    scratch.pop(name, None)
                    continue
                kept.append(text)
            if len(waiting) == len(pending):
                self.lost.extend(s[2] for s in waiting)
                break
            pending = waiting
        return PROLOGUE + "".join(kept) + EPILOGUE, sorted(set(self.lost))


_MISSING = object()


def _alike(made, value):
    """Whether `made` (made again in fresh globals) stands for `value`: the
    same module or object, a class of the same name, or a function of the
    same code whose closure holds alike things."""
    if made is value:
        return True
    if made is _MISSING or type(made) is not type(value):
        return False
    if isinstance(value, type):
        return made.__qualname__ == value.__qualname__
    # The code itself differs: the session's was compiled from the cell's
    # program, whose tool calls the server rewrote.
    inner, made_inner = _innermost(value), _innermost(made)
    if getattr(inner, "__code__", None) is None or getattr(made_inner, "__code__", None) is None:
        return False
    if made_inner.__qualname__ != inner.__qualname__:
        return False
    return _same_cells(made_inner, inner)


def _same_cells(made, value):
    cells = getattr(value, "__closure__", None) or ()
    made_cells = getattr(made, "__closure__", None) or ()
    if len(cells) != len(made_cells):
        return False
    for a, b in zip(made_cells, cells):
        try:
            x, y = a.cell_contents, b.cell_contents
        except ValueError:
            return False
        if x is y or type(x) in _PLAIN_SCALARS + (float,) and type(x) is type(y) and x == y:
            continue
        if callable(x) and type(x) is type(y) and getattr(x, "__qualname__", 1) == getattr(y, "__qualname__", 2):
            continue
        return False
    return True


def _innermost(value):
    for _ in range(20):
        if getattr(value, "__code__", None) is not None:
            return value
        value = getattr(value, "__wrapped__", getattr(value, "__func__", None))
    return value


def _code_file(value):
    """The file of the code a function (or the function it wraps) came
    from."""
    for _ in range(20):
        code = getattr(value, "__code__", None)
        if code is not None:
            return code.co_filename
        value = getattr(value, "__wrapped__", getattr(value, "__func__", None))
        if value is None:
            return None
    return None
