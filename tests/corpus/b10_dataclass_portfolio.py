from dataclasses import dataclass, field
import asyncio

@dataclass
class Holding:
    symbol: str
    shares: int
    price: float = 0.0

    @property
    def value(self):
        return round(self.shares * self.price, 2)

@dataclass
class Portfolio:
    holdings: list = field(default_factory=list)

    async def refresh(self):
        quotes = await asyncio.gather(*[get_stock_price(symbol=h.symbol) for h in self.holdings])
        for h, q in zip(self.holdings, quotes):
            h.price = q["price"]

    def total(self):
        return round(sum(h.value for h in self.holdings), 2)

p = Portfolio([Holding("AAPL", 10), Holding("GOOG", 3), Holding("NVDA", 7)])
await p.refresh()
for h in sorted(p.holdings, key=lambda h: h.value, reverse=True):
    print(h.symbol, h.shares, h.price, h.value)
print("total", p.total())
