recipients = ["ada@example.com", "bad-address", "grace@example.com"]
sent, failed = [], []
for to in recipients:
    try:
        r = await send_email(to=to, subject="Hello", body="Quarterly update")
        sent.append((to, r["message_id"]))
    except Exception as e:
        failed.append(str(e))
print("sent:")
for to, mid in sent:
    print(" ", to, mid)
print("failed:", failed)
