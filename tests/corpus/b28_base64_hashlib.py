import base64, hashlib, json
user = await fetch_user(user_id=42)
blob = json.dumps(user, sort_keys=True).encode()
print(base64.b64encode(blob).decode()[:40])
print(hashlib.sha256(blob).hexdigest())
print(hashlib.md5(user["email"].encode()).hexdigest())
round_trip = json.loads(base64.urlsafe_b64decode(base64.urlsafe_b64encode(blob)))
print(round_trip == user)
