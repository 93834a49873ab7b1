import asyncio
words = ["one", "two", "three"]
langs = ["fr", "de", "es"]
out = await asyncio.gather(*[translate(text=w, target_lang=l) for w, l in zip(words, langs)])
for i, (w, t) in enumerate(zip(words, out), start=1):
    print(i, w, "->", t["text"], t["lang"])
