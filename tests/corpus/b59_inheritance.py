class Tool:
    name = "base"
    async def run(self, **kw):
        raise NotImplementedError

class Weather(Tool):
    name = "weather"
    async def run(self, **kw):
        return (await get_weather(**kw))["temp"]

class Stock(Tool):
    name = "stock"
    async def run(self, **kw):
        return (await get_stock_price(**kw))["price"]

for tool, kw in [(Weather(), {"city": "Gdansk"}), (Stock(), {"symbol": "INTC"})]:
    print(tool.name, await tool.run(**kw), isinstance(tool, Tool))
try:
    await Tool().run()
except NotImplementedError:
    print("base not implemented")
