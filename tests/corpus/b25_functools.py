# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
from functools import reduce, partial, lru_cache
import operator

@lru_cache(maxsize=None)
def rate_cached(base, quote):
    return get_exchange_rate(base=base, quote=quote)

pairs = [("EUR", "USD"), ("GBP", "USD"), ("EUR", "USD"), ("GBP", "USD")]
rates = [rate_cached(b, q) for b, q in pairs]
print(rates)
print(rate_cached.cache_info().hits, "cache hits")
product = reduce(operator.mul, rates, 1.0)
print(round(product, 6))
to_fr = partial(translate, target_lang="fr")
print(to_fr(text="bonjour")["text"])
