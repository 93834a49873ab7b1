# Files written in /mnt/data by one cell are read by later ones.
import os, json
with open("/mnt/data/notes.txt", "w") as f:
    f.write("first\n")
os.makedirs("/mnt/data/out", exist_ok=True)
# %% cell
with open("/mnt/data/notes.txt", "a") as f:
    f.write("second\n")
rates = await get_exchange_rate(base="EUR", quote="USD")
with open("/mnt/data/out/rate.json", "w") as f:
    json.dump({"base": "EUR", "rate": rates}, f)
# %% cell
print(open("/mnt/data/notes.txt").read().splitlines())
print(sorted(os.listdir("/mnt/data")), os.listdir("/mnt/data/out"))
print(json.load(open("/mnt/data/out/rate.json"))["base"])
os.remove("/mnt/data/notes.txt")
# %% cell
print(os.path.exists("/mnt/data/notes.txt"))
