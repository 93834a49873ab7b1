# Tools look like functions: a signature, a docstring; a tool without a
# schema takes any keyword argument.
import inspect

for tool in (get_weather, search, forecast, book_trip, ping, send_email):
    print(tool.__name__, inspect.signature(tool), "|", tool.__doc__)
params = inspect.signature(forecast).parameters
print([(p.name, p.default) for p in params.values()])
print(inspect.signature(get_weather).bind("Oslo").arguments)
r = await ping(anything=1, goes=[2, 3])
print(r)
try:
    ping(1)
except TypeError as e:
    print("TypeError:", e)
