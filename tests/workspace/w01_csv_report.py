import csv, json, os, statistics
from collections import defaultdict

with open("/mnt/data/config.json") as f:
    config = json.load(f)
totals = defaultdict(float)
units = []
with open("/mnt/data/sales.csv", newline="") as f:
    for row in csv.DictReader(f):
        totals[row["region"]] += int(row["units"]) * float(row["price"])
        units.append(int(row["units"]))
os.makedirs("/mnt/data/out", exist_ok=True)
with open("/mnt/data/out/report.csv", "w", newline="") as f:
    writer = csv.writer(f)
    writer.writerow(["region", "revenue", "over_threshold"])
    for region in config["regions"]:
        writer.writerow([region, f"{totals[region]:.2f}", totals[region] > config["threshold"]])
summary = {"mean_units": statistics.mean(units), "median_units": statistics.median(units),
           "currency": config["currency"]}
with open("/mnt/data/out/summary.json", "w") as f:
    json.dump(summary, f, indent=2)
print(open("/mnt/data/out/report.csv").read())
print(sorted(os.listdir("/mnt/data/out")), os.path.getsize("/mnt/data/out/summary.json"))
