# The texts of arithmetic and math errors are CPython 3.11's.
import math
import decimal
for expr in ["7 % 0", "7 // 0", "divmod(7, 0)", "7.0 // 0", "7.0 % 0", "divmod(7.5, 0)",
             "7.0 / 0", "7 / 0", "7 % 0.0", "0 ** -1", "0.0 ** -2", "math.fsum([1e308, 1e308])",
             "math.fsum([float('inf'), -float('inf')])", "math.sqrt(-1)", "math.log(0)",
             "math.acos(2)", "math.sin(float('inf'))", "math.factorial(-1)"]:
    try:
        eval(expr)
    except (ZeroDivisionError, OverflowError, ValueError) as e:
        print(f"{expr:<42} {type(e).__name__}: {e}")
ctx = decimal.Context(prec=5)
ctx.divide(decimal.Decimal(1), decimal.Decimal(3))
print(ctx.flags[decimal.Inexact], ctx.flags[decimal.DivisionByZero], ctx.traps[decimal.InvalidOperation])
