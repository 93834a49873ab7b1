# A cell that raises keeps what it bound before the exception.
a = 1
b = [a, 2]
# %% cell
c = a + 10
b.append(c)
raise ValueError("stop after binding c")
d = "never"
# %% cell
print(a, b, c)
print("d" in globals())
# %% cell
try:
    w = await get_weather(city="Atlantis")
except ToolError as e:
    print("tool failed:", e)
w = await get_weather(city="Berlin")
print(w["city"])
