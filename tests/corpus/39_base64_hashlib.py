import base64
import hashlib
import json

user = await fetch_user(user_id=33)
payload = json.dumps(user, sort_keys=True).encode()
b64 = base64.b64encode(payload).decode()
print("b64:", b64[:40] + "...")
print("decoded ok:", json.loads(base64.b64decode(b64)) == user)
print("urlsafe:", base64.urlsafe_b64encode(b"\xfb\xff\xfe").decode())
print("b32:", base64.b32encode(b"baton").decode())
print("hex:", base64.b16encode(b"hi").decode())

print("sha256:", hashlib.sha256(payload).hexdigest())
print("md5:", hashlib.md5(payload).hexdigest())
print("sha1:", hashlib.sha1(b"abc").hexdigest())
h = hashlib.sha256()
for city in ("Kyiv", "Lviv"):
    w = await get_weather(city=city)
    h.update(json.dumps(w, sort_keys=True).encode())
print("combined:", h.hexdigest()[:16])
print("blake2b:", hashlib.blake2b(b"x", digest_size=8).hexdigest())
token = base64.b64encode(hashlib.sha256(b"secret" + payload).digest()).decode()
print("token:", token)
