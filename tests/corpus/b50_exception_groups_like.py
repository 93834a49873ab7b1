errors = []
async def safe(coro_fn, **kw):
    try:
        return await coro_fn(**kw)
    except Exception as e:
        errors.append(f"{coro_fn.__name__}: {e}")
        return None

a = await safe(get_weather, city="Atlantis")
b = await safe(send_email, to="nobody", subject="x")
c = await safe(get_weather, city="Bonn")
print(a, b, c["city"])
print("\n".join(errors))
