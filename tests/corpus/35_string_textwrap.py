import string
import textwrap

hits = await search(query="history of the printing press", limit=3)
summary = " ".join(f"Result {i + 1} is titled '{h['title']}' and lives at {h['url']}." for i, h in enumerate(hits))
print(textwrap.fill(summary, width=48))
print()
print(textwrap.indent(textwrap.fill(summary, width=40), "> "))
print(textwrap.shorten(summary, width=60, placeholder=" [...]"))
print(textwrap.dedent("""\
    Indented block
      keeps relative
    indentation"""))

tmpl = string.Template("Dear $name, your $tier plan renews on $date.")
for uid in (4, 5):
    u = await fetch_user(user_id=uid)
    print(tmpl.substitute(name=u["name"], tier=u["tier"], date=u["signup"]))
print(tmpl.safe_substitute(name="X"))
print(string.ascii_uppercase[:6], string.digits, string.punctuation[:5])
print(string.capwords("the quick   brown fox"))
fmt = string.Formatter()
print(fmt.format("{0:>8}|{1:<6}|{2:^7}", "right", "left", "mid"))
tr = await translate(text="paragraph about presses", target_lang="fr")
print(textwrap.wrap(tr["text"], 10))
