# No tool calls: pure computation.
def sieve(n):
    is_p = [True] * (n + 1)
    is_p[0] = is_p[1] = False
    for i in range(2, int(n ** 0.5) + 1):
        if is_p[i]:
            for j in range(i * i, n + 1, i):
                is_p[j] = False
    return [i for i, p in enumerate(is_p) if p]


primes = sieve(200)
print("count:", len(primes))
print("first 10:", primes[:10])
print("last 5:", primes[-5:])
twins = [(p, p + 2) for p in primes if p + 2 in primes]
print("twins:", twins[:6])


def fib():
    a, b = 0, 1
    while True:
        yield a
        a, b = b, a + b


gen = fib()
print("fib:", [next(gen) for _ in range(15)])
print("collatz 27 steps:", (lambda f, n: f(f, n))(lambda f, n: 0 if n == 1 else 1 + f(f, n // 2 if n % 2 == 0 else 3 * n + 1), 27))
print("2**100 =", 2 ** 100)
print("divmod:", divmod(-17, 5), -17 // 5, -17 % 5)
print("bin/hex/oct:", bin(255), hex(255), oct(8))
print("round half even:", [round(x) for x in (0.5, 1.5, 2.5, -0.5)])
print(f"{1234567.891:,.2f} {0.000123:.2e} {42:08b} {3.14159:.3g}")
