import asyncio
calls = [get_weather(city="Atlantis"), get_weather(city="Rio"), translate(text="hi", target_lang="xx")]
results = await asyncio.gather(*calls, return_exceptions=True)
for r in results:
    if isinstance(r, BaseException):
        print("ERR", type(r).__name__, r)
    else:
        print("OK ", r["city"])
