# A task cancelled before it ever ran makes no call; one cancelled after its
# first step, before the pause, makes none either; one that ran does.
never = asyncio.create_task(send_email(to="ceo@example.com", subject="draft"))
never.cancel()
try:
    await never
except asyncio.CancelledError:
    print("cancelled before it started")

started = asyncio.create_task(send_email(to="cfo@example.com", subject="draft"))
await asyncio.sleep(0)
started.cancel()
try:
    await started
except asyncio.CancelledError:
    print("cancelled after it started")

done = asyncio.create_task(get_weather(city="Lima"))
w = await done
print("ran:", w["city"], done.done(), done.cancelled())
