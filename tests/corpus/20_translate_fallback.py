phrase = "the quick brown fox"
wanted = ["fr", "xx", "de", "klingon", "ja", "es", "pt"]
translations = {}
for lang in wanted:
    try:
        t = await translate(text=phrase, target_lang=lang)
        translations[lang] = t["text"]
    except ToolError as e:
        print(f"{lang}: {e}; falling back to es")
        if "es" not in translations:
            translations["es"] = (await translate(text=phrase, target_lang="es"))["text"]

for lang in sorted(translations):
    print(f"{lang}: {translations[lang]}")
print("supported:", len(translations), "requested:", len(wanted))

unsupported = []
for lang in wanted:
    if lang not in translations:
        unsupported.append(lang)
print("unsupported:", unsupported)
