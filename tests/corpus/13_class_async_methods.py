class WeatherService:
    def __init__(self, unit="C"):
        self.unit = unit
        self.cache = {}
        self.calls = 0

    async def get(self, city):
        if city not in self.cache:
            self.calls += 1
            self.cache[city] = await get_weather(city=city, unit=self.unit)
        return self.cache[city]

    async def warmer(self, a, b):
        wa, wb = await self.get(a), await self.get(b)
        return a if wa["temp"] >= wb["temp"] else b

    def report(self):
        for city in sorted(self.cache):
            w = self.cache[city]
            print(f"  {city}: {w['temp']}{self.unit}")


svc = WeatherService(unit="F")
pairs = [("Miami", "Boston"), ("Boston", "Chicago"), ("Miami", "Chicago"), ("Austin", "Miami")]
for a, b in pairs:
    print(f"{a} vs {b}: {await svc.warmer(a, b)} is warmer")
print("tool calls:", svc.calls, "cached:", len(svc.cache))
svc.report()
