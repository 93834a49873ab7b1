"""Writes a program of random set operations that prints every state.

`python3 set_programs.py SEED OPS` prints the program. Values are those
whose hash CPython does not seed (integers, also large and negative ones,
floats, tuples, booleans, a frozenset), so CPython 3.11 prints them in one
order every run; baton must print the same (tests/set_order.rs).
"""
import random, sys
rng = random.Random(int(sys.argv[1]))
def value():
    k = rng.random()
    if k < 0.5: return str(rng.randint(-40, 300))
    if k < 0.7: return str(rng.choice([1000, 2048, 4096, 65536, 10**9, -2**40, 2**61, 2**63, -1, -2]) + rng.randint(0, 9))
    if k < 0.85: return f"({rng.randint(0, 9)}, {rng.randint(0, 9)})"
    if k < 0.95: return repr(rng.choice([0.5, 1.25, -3.75, 1e10, 2.0, 1e-3]))
    return rng.choice(["True", "False", "(1, (2, 3))", "frozenset({1, 2})"])
def literal(n=None):
    n = rng.randint(0, 12) if n is None else n
    return "{" + ", ".join(value() for _ in range(n)) + "}" if n else "set()"
def listlit():
    return "[" + ", ".join(value() for _ in range(rng.randint(0, 15))) + "]"
lines = ["s = [" + ", ".join(literal() for _ in range(4)) + "]", "for x in s: print(x)"]
ops = [
    lambda a, b: f"s[{a}].add({value()})",
    lambda a, b: f"s[{a}].discard({value()})",
    lambda a, b: f"s[{a}] and print(s[{a}].pop())",
    lambda a, b: f"s[{a}].update({listlit()})",
    lambda a, b: f"s[{a}].update(s[{b}])",
    lambda a, b: f"s[{a}].update(dict.fromkeys({listlit()}))",
    lambda a, b: f"s[{a}] |= s[{b}]",
    lambda a, b: f"s[{a}] &= s[{b}]",
    lambda a, b: f"s[{a}] -= s[{b}]",
    lambda a, b: f"s[{a}] ^= s[{b}]",
    lambda a, b: f"s[{a}] = s[{a}] | s[{b}]",
    lambda a, b: f"s[{a}] = s[{a}] & s[{b}]",
    lambda a, b: f"s[{a}] = s[{a}] - s[{b}]",
    lambda a, b: f"s[{a}] = s[{a}] ^ s[{b}]",
    lambda a, b: f"s[{a}] = s[{a}].union({listlit()}, s[{b}])",
    lambda a, b: f"s[{a}] = s[{a}].intersection({listlit()})",
    lambda a, b: f"s[{a}] = s[{a}].difference({listlit()}, s[{b}])",
    lambda a, b: f"s[{a}] = s[{a}].symmetric_difference({listlit()})",
    lambda a, b: f"s[{a}].intersection_update(s[{b}], {listlit()})",
    lambda a, b: f"s[{a}].difference_update({listlit()})",
    lambda a, b: f"s[{a}].symmetric_difference_update(s[{b}])",
    lambda a, b: f"s[{a}] = s[{b}].copy()",
    lambda a, b: f"s[{a}] = set(s[{b}])",
    lambda a, b: f"s[{a}] = set(frozenset(s[{b}]))",
    lambda a, b: f"s[{a}] = {{x for x in s[{b}] if hash(x) % 3}}",
    lambda a, b: f"s[{a}] = {literal()}",
    lambda a, b: f"s[{a}] = set({listlit()})",
    lambda a, b: f"s[{a}].clear()",
    lambda a, b: f"for _ in range(min(3, len(s[{a}]))): s[{a}].pop()",
    lambda a, b: f"s[{a}] = set(dict.fromkeys(s[{b}]))",
    lambda a, b: f"print(list(s[{a}]), tuple(s[{b}]), dict.fromkeys(s[{a}]))",
    lambda a, b: f"print(*s[{a}], sep=',')",
    lambda a, b: f"it = iter(s[{a}]); next(it, None); print(list(it))",
]
for _ in range(int(sys.argv[2])):
    a, b = rng.randrange(4), rng.randrange(4)
    lines.append(rng.choice(ops)(a, b))
    lines.append(f"print({a}, s[{a}])")
print("\n".join(lines))
