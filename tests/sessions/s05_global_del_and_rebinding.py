# global, del, and a tool's name rebound by the code.
counter = 0
def incr():
    global counter
    counter += 1
    return counter
incr()
temp = "scratch"
# %% cell
incr()
del temp
print(counter, "temp" in globals())
search = "my own search"
# %% cell
print(search, incr())
try:
    print(temp)
except NameError as e:
    print("NameError:", e)
w = await get_weather(city="Cairo")
print(w["unit"])
