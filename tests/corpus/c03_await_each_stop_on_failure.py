# Coroutines made up front, awaited one at a time; the loop stops at the first
# failure, and the calls after it are never made (CPython never makes them).
recipients = ["ann@example.com", "bob@example.com", "not-an-address", "dan@example.com", "eve@example.com"]
pending = [send_email(to=r, subject="Quarterly report") for r in recipients]
sent = 0
for address, coro in zip(recipients, pending):
    try:
        receipt = await coro
    except ToolError as e:
        print("stopping at", address, "-", e)
        break
    sent += 1
    print("sent to", address, receipt["message_id"])
print("sent", sent, "of", len(recipients))
