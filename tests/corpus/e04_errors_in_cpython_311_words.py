# Errors agents catch and print, in CPython 3.11's words: builtins, lists,
# abstract classes, slots, notes, decimal, json; no warnings that 3.11 does
# not give; NormalDist's seeded samples. (The oracle runs the pure-Python
# datetime, whose range errors are worded otherwise than CPython's C module
# that baton follows: those are checked in tests/tool_contracts.rs.)
import abc
import datetime
import decimal
import json
import re
import statistics

w = await get_weather(city="Lima")


def attempt(label, f):
    try:
        print(label, "ok", f())
    except Exception as e:
        print(label, type(e).__name__, e)


def unpack(values):
    a, b = values
    return a, b


class Agent(abc.ABC):
    @abc.abstractmethod
    def run(self): ...

    @abc.abstractmethod
    def plan(self): ...


class Slotted:
    __slots__ = ("city",)


def set_slot():
    Slotted().temp = w["temp"]


def note():
    e = ValueError("bad")
    e.add_note(42)


attempt("min", lambda: min([]))
attempt("max", lambda: max(x for x in []))
attempt("unpack", lambda: unpack([1, 2, 3]))
attempt("unpack dict", lambda: unpack({"a": 1, "b": 2, "c": 3}))
attempt("concat", lambda: [w["temp"]] + (2,))
attempt("remove", lambda: [1, 2].remove(5))
attempt("index", lambda: ["a", "b"].index("z"))
attempt("abstract", lambda: Agent())
attempt("slots", set_slot)
attempt("note", note)
attempt("decimal", lambda: decimal.Decimal("€15"))
attempt("decimal div", lambda: decimal.Decimal(w["temp"]) / 0)
attempt("json array", lambda: json.loads("[1, 2,]"))
attempt("json object", lambda: json.loads('{"a": 1,  }'))
attempt("json nan", lambda: json.dumps(float("nan"), allow_nan=False))
attempt("re.sub", lambda: re.sub("a", "b", "aAa", re.IGNORECASE))
attempt("utc", lambda: datetime.datetime.utcfromtimestamp(86400 * 365))
attempt("samples", lambda: [round(x, 6) for x in statistics.NormalDist(10, 2).samples(3, seed=99)])
attempt("geometric mean", lambda: round(statistics.geometric_mean([w["temp"], 2, 8]), 6))
attempt("geometric mean of a zero", lambda: statistics.geometric_mean([0, w["temp"]]))
attempt("geometric mean of a negative", lambda: statistics.geometric_mean([-1, 2]))
attempt("geometric mean of nothing", lambda: statistics.geometric_mean([]))
attempt("quantiles", lambda: statistics.quantiles([w["temp"], 3, 9, 12], n=4))
attempt("quantiles of one", lambda: statistics.quantiles([w["temp"]], n=4))
