class WeatherService:
    def __init__(self, unit="C"):
        self.unit = unit
        self.calls = 0

    async def temp(self, city):
        self.calls += 1
        w = await get_weather(city=city, unit=self.unit)
        return w["temp"]

    async def compare(self, a, b):
        ta, tb = await self.temp(a), await self.temp(b)
        return a if ta >= tb else b

svc = WeatherService(unit="F")
print(await svc.compare("Miami", "Boston"))
print(await svc.compare("Dubai", "Oslo"))
print("calls:", svc.calls)
