result = None
for attempt in range(1, 6):
    try:
        result = await flaky(attempt=attempt)
        print(f"attempt {attempt}: success")
        break
    except Exception as e:
        print(f"attempt {attempt}: {e}")
print("result:", result)
