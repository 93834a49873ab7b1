class Source:
    name = "base"

    def __init__(self):
        self.log = []

    async def fetch(self, key):
        raise NotImplementedError

    async def fetch_many(self, keys):
        out = {}
        for k in keys:
            try:
                out[k] = await self.fetch(k)
                self.log.append(f"{self.name}:{k}:ok")
            except ToolError as e:
                self.log.append(f"{self.name}:{k}:err")
                out[k] = None
        return out

    def __repr__(self):
        return f"{type(self).__name__}(log={len(self.log)})"


class WeatherSource(Source):
    name = "weather"

    async def fetch(self, key):
        return (await get_weather(city=key))["temp"]


class StockSource(Source):
    name = "stock"

    async def fetch(self, key):
        q = await get_stock_price(symbol=key)
        return q["price"]


class CachedStock(StockSource):
    name = "cached"

    def __init__(self):
        super().__init__()
        self.cache = {}

    async def fetch(self, key):
        if key not in self.cache:
            self.cache[key] = await super().fetch(key)
        return self.cache[key]


sources = [WeatherSource(), StockSource(), CachedStock()]
print(await sources[0].fetch_many(["Oran", "Atlantis", "Fez"]))
print(await sources[1].fetch_many(["IBM", "BRK.B", "GE"]))
print(await sources[2].fetch_many(["GE", "GE", "F"]))
for s in sources:
    print(s, s.log)
print([type(s).__mro__[1].__name__ for s in sources])
print(isinstance(sources[2], Source), issubclass(CachedStock, WeatherSource))
