import textwrap
paragraph = "Programmatic tool calling lets a model write code that calls tools in loops and in parallel."
langs = ["de", "es", "xx"]
for lang in langs:
    try:
        t = await translate(text=paragraph, target_lang=lang)
        print(f"--- {lang}")
        print(textwrap.fill(t["text"], width=40))
    except Exception as e:
        print(f"--- {lang}: {e}")
print(textwrap.shorten(paragraph, width=30, placeholder="..."))
