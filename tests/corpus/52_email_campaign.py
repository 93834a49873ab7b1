import asyncio

uids = [1, 2, 3, 404, 5, 6]
profiles = await asyncio.gather(*[fetch_user(user_id=u) for u in uids], return_exceptions=True)
targets = []
for uid, p in zip(uids, profiles):
    if isinstance(p, ToolError):
        print(f"skip user {uid}: {p}")
    elif p["tier"] == "free":
        print(f"skip user {uid}: free tier")
    else:
        targets.append(p)

emails = [(p["email"], f"Thanks, {p['name']}!") for p in targets]
emails.append(("broken-address", "Hi"))
results = await asyncio.gather(*[send_email(to=to, subject=subj, body="...") for to, subj in emails],
                               return_exceptions=True)
sent = 0
for (to, subj), r in zip(emails, results):
    if isinstance(r, Exception):
        print(f"FAIL {to}: {r}")
    else:
        sent += 1
        print(f"OK   {to:<20} {subj:<18} {r['message_id']}")
print(f"campaign: {sent}/{len(emails)} delivered")
