# Third-party modules: CPython's ModuleNotFoundError and what to use instead.
for name in ["pandas", "numpy.linalg", "matplotlib.pyplot", "requests", "sklearn.linear_model"]:
    try:
        __import__(name)
    except ModuleNotFoundError as e:
        print(type(e).__name__, e.name, "|", str(e).split(". ")[0])
import statistics
print(statistics.mean([1, 2, 3, 4]))
import pandas as pd
