# oracle: runtime (uses calls without await, baton's extension; CPython cannot run it)
# The program defines its own `translate`; the tool is reached through `tools`.
def translate(text, lang="fr"):
    res = tools.translate(text=text, target_lang=lang)
    return res["text"].upper()


print(translate("hello"))
print(translate("world", lang="ja"))


class Config:
    base_rate = get_exchange_rate(base="EUR", quote="USD")
    owner = fetch_user(user_id=26)["name"]

    @classmethod
    def convert(cls, eur):
        return round(eur * cls.base_rate, 2)

    @staticmethod
    def describe():
        return f"rates owned by {Config.owner}"


print(Config.base_rate, Config.convert(250), Config.describe())


def weather_or_default(city, default={"temp": None}):
    try:
        return get_weather(city=city)
    except ToolError:
        return default


print(weather_or_default("Atlantis")["temp"], weather_or_default("Ghent")["temp"])
search = "not the tool anymore"
print(search.upper(), tools.search(query="shadow", limit=1)[0]["title"])
