import string
t = string.Template("Dear $name, your tier is $tier.")
for uid in (10, 11):
    u = await fetch_user(user_id=uid)
    print(t.substitute(name=u["name"], tier=u["tier"]))
print(string.ascii_uppercase[:5], string.capwords("hello tool world"))
