total = 0
for i in range(1, 15):
    r = await flaky(attempt=i * 2)
    total += r["attempt"]
print("rounds done, total", total)
