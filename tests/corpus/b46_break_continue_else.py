for uid in [0, 5, 200, 8]:
    try:
        u = await fetch_user(user_id=uid)
    except Exception as e:
        print("skip", uid, e)
        continue
    if u["tier"] == "enterprise":
        print("found enterprise", u["name"])
        break
    print("not enterprise", u["name"])
else:
    print("none found")
