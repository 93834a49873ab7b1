import re

recipients = ["alice@example.com", "bob(at)example.com", "carol@example.org", "dave", "eve@corp.io"]
pattern = re.compile(r"^[\w.]+@[\w.]+\.\w+$")
sent, failed = [], []
for addr in recipients:
    looks_valid = bool(pattern.match(addr))
    try:
        res = await send_email(to=addr, subject="Quarterly update", body=f"Hi {addr.split('@')[0]}!")
        sent.append((addr, res["message_id"]))
        print(f"sent   {addr:<20} {res['message_id']} (regex ok: {looks_valid})")
    except ToolError as err:
        failed.append(addr)
        print(f"failed {addr:<20} {err} (regex ok: {looks_valid})")

print(f"{len(sent)} sent, {len(failed)} failed")
ids = sorted(mid for _, mid in sent)
print("ids:", ", ".join(ids))
# Try again for failed addresses with a fixed domain
for addr in failed:
    fixed = addr.replace("(at)", "@") if "(at)" in addr else addr + "@example.com"
    res = await send_email(to=fixed, subject="Quarterly update (retry)")
    print("retry", fixed, "->", res["sent"])
