import asyncio
jobs = []
for s in ["UBER", "LYFT"]:
    jobs.append(get_stock_price(symbol=s))
jobs.append(get_weather(city="SF"))
res = await asyncio.gather(*jobs)
print(res[0]["symbol"], res[1]["symbol"], res[2]["city"])
