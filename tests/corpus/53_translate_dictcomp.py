# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
langs = ["fr", "de", "es", "ja"]
phrase = "see you tomorrow"
pending = {lang: translate(text=phrase, target_lang=lang) for lang in langs}
print("requested:", sorted(pending))
for lang in langs:
    print(f"{lang}: {pending[lang]['text']}")

lengths = {lang: len(pending[lang]["text"]) for lang in langs}
print("lengths:", lengths)
pair = (translate(text="yes", target_lang="fr"), translate(text="no", target_lang="fr"))
print("pair:", pair[0]["text"], "/", pair[1]["text"])
greetings = [translate(text=w, target_lang="es") for w in ("hello", "goodbye", "thanks")]
print("as list:", [g["text"] for g in greetings])
print("contains lang key:", all("lang" in g for g in greetings))
print("str of one:", str(greetings[0]))
