import math, json
primes = [n for n in range(2, 60) if all(n % d for d in range(2, int(math.sqrt(n)) + 1))]
print(primes)
print(json.dumps({"count": len(primes), "sum": sum(primes)}, sort_keys=True))
print(math.factorial(20), math.gcd(84, 36), round(math.pi, 6))
