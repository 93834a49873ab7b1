import asyncio
tasks = {asyncio.create_task(translate(text=w, target_lang="fr")) for w in ["hello", "world", "cat"]}
done, pending = await asyncio.wait(tasks)
print(len(done), "done,", len(pending), "pending")
texts = sorted(t.result()["text"] for t in done)
for text in texts:
    print(text)
