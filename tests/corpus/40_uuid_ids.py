import uuid

ids = [uuid.uuid4() for _ in range(3)]
for u in ids:
    print(u, u.version)
ns = uuid.uuid5(uuid.NAMESPACE_DNS, "example.com")
print("uuid5:", ns)
print("uuid3:", uuid.uuid3(uuid.NAMESPACE_URL, "https://example.com"))

jobs = {}
for city in ("Hanoi", "Manila", "Jakarta"):
    job_id = str(uuid.uuid4())[:8]
    jobs[job_id] = await get_weather(city=city)
for job_id in jobs:
    print(job_id, jobs[job_id]["city"], jobs[job_id]["temp"])

parsed = uuid.UUID("12345678-1234-5678-1234-567812345678")
print(parsed.hex, parsed.int % 1000, str(parsed).upper())
print("deterministic uuid5:", uuid.uuid5(uuid.NAMESPACE_OID, "baton") == uuid.uuid5(uuid.NAMESPACE_OID, "baton"))
res = await send_email(to="trace@example.com", subject=f"job {list(jobs)[0]}")
print("sent:", res["sent"])
