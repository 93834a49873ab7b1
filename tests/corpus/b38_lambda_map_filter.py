# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
ids = [1, 2, 3, 4, 5]
names = list(map(lambda i: fetch_user(user_id=i)["name"], ids))
print(names)
pro = list(filter(lambda i: fetch_user(user_id=i)["tier"] == "pro", ids))
print(pro)
