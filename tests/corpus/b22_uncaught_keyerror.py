def summarize(report):
    return f"{report['city']}: {report['pressure']}"

w = await get_weather(city="Bern")
print("got", w["city"])
print(summarize(w))
