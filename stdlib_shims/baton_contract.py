"""Tool contracts at the call site: binds a call's arguments to its tool's
signature as CPython binds a `def`, then checks the values against the
reduced schema the server made of each parameter (`src/contract.rs`).

Invariants:
- Binding errors are CPython's TypeErrors, word for word and in CPython's
  order: keyword arguments first (unexpected, or given twice), then too
  many positional arguments, then missing ones.
- The checker enforces exactly the keywords a reduced schema can hold
  (`type`, `enum`, `properties`, `required`, `additionalProperties`,
  `items`) with JSON Schema's meaning, so it agrees with the `jsonschema`
  crate the server checks with (a property test holds them to it).
- No imports: this module runs unchanged in a child and under CPython.
"""

_PYTHON_TYPES = {
    "string": "str",
    "integer": "int",
    "number": "int or float",
    "boolean": "bool",
    "array": "list",
    "object": "dict",
    "null": "None",
}


def _plural(count, word):
    return "%d %s%s" % (count, word, "" if count == 1 else "s")


def _names(names):
    quoted = ["'%s'" % name for name in names]
    if len(quoted) == 1:
        return quoted[0]
    if len(quoted) == 2:
        return "%s and %s" % tuple(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


def bind(python, params, optional, accepts_more, args, kwargs):
    """The call's input: its arguments by name, as `def python(*params)`
    (the optional ones defaulting to None, and `**kwargs` when
    `accepts_more`) would bind them. Optional arguments given None are
    left out."""
    bound = {}
    for name, value in zip(params, args):
        bound[name] = value
    for name, value in kwargs.items():
        if name not in params and not accepts_more:
            raise TypeError("%s() got an unexpected keyword argument '%s'" % (python, name))
        if name in bound:
            raise TypeError("%s() got multiple values for argument '%s'" % (python, name))
        bound[name] = value
    if len(args) > len(params):
        required = len(params) - len(optional)
        if optional:
            takes = "from %d to %d positional arguments" % (required, len(params))
        else:
            takes = _plural(len(params), "positional argument")
        raise TypeError("%s() takes %s but %d %s given"
                        % (python, takes, len(args), "was" if len(args) == 1 else "were"))
    missing = [name for name in params if name not in bound and name not in optional]
    if missing:
        raise TypeError("%s() missing %s: %s"
                        % (python, _plural(len(missing), "required positional argument"), _names(missing)))
    for name in optional:
        if name in bound and bound[name] is None:
            del bound[name]
    return bound


def check(python, tool_input, checks):
    """Raises TypeError (a wrong type, a missing or unexpected key) or
    ValueError (a value outside an `enum`) for the first argument of
    `tool_input` (a dict of JSON values) that its reduced schema refuses."""
    for name, value in tool_input.items():
        schema = checks.get(name)
        if schema:
            if len(schema) == 1 and value.__class__ is _EXACTLY.get(schema.get("type")):
                # The common case, settled without a call: a scalar of
                # exactly the one type its schema names.
                continue
            problem = _problem(value, schema, "'%s'" % name)
            if problem is not None:
                kind, text = problem
                raise kind("%s() argument %s" % (python, text))


#: A schema's only keyword `type`, and the one class whose values it takes
#: without a look at the value (`bool` is not `int` here, nor `int` a
#: `number`: those go the long way).
_EXACTLY = {"string": str, "boolean": bool, "integer": int, "number": float, "null": type(None)}


def _kind(value):
    """The JSON type of a value (`integer` for an int, `number` for a
    float), or None for what JSON cannot hold."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return None


def _is(value, kind, wanted):
    if kind == wanted:
        return True
    if wanted == "number":
        return kind == "integer"
    if wanted == "integer":
        return kind == "number" and value == value and value not in (float("inf"), float("-inf")) \
            and value == int(value)
    return False


def _same(a, b):
    """JSON equality: numbers by value, never a boolean for a number."""
    ka, kb = _kind(a), _kind(b)
    if ka in ("integer", "number") and kb in ("integer", "number"):
        return a == b
    if ka != kb:
        return False
    if ka == "array":
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if ka == "object":
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def _problem(value, schema, where):
    """`(exception type, text)` for the first thing `schema` refuses in
    `value`, else None."""
    kind = _kind(value)
    wanted = schema.get("type")
    if wanted is not None:
        options = wanted if isinstance(wanted, list) else [wanted]
        if not any(_is(value, kind, option) for option in options):
            expected = " or ".join(_PYTHON_TYPES[option] for option in options)
            return (TypeError, "%s must be %s, not %s" % (where, expected, type(value).__name__))
    members = schema.get("enum")
    if members is not None and not any(_same(value, member) for member in members):
        shown = ", ".join(repr(member) for member in members)
        return (ValueError, "%s must be one of %s, not %r" % (where, shown, value))
    if kind == "object":
        return _object_problem(value, schema, where)
    if kind == "array":
        items = schema.get("items")
        if items:
            for index, item in enumerate(value):
                problem = _problem(item, items, "%s[%d]" % (where, index))
                if problem is not None:
                    return problem
    return None


def _object_problem(value, schema, where):
    properties = schema.get("properties", {})
    for key in schema.get("required", ()):
        if key not in value:
            return (TypeError, "%s is missing required key %r" % (where, key))
    extra = schema.get("additionalProperties")
    for key, item in value.items():
        if not isinstance(key, str):
            continue
        if key in properties:
            sub = properties[key]
        elif extra is False:
            return (TypeError, "%s has an unexpected key %r" % (where, key))
        else:
            sub = extra
        if sub:
            problem = _problem(item, sub, "%s[%r]" % (where, key))
            if problem is not None:
                return problem
    return None
