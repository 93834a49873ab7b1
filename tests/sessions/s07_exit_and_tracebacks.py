# sys.exit(0) ends a cell quietly; an error raised in an earlier cell's
# function shows that cell's lines.
import sys
def check(x):
    if x < 0:
        raise ValueError("negative: %d" % x)
    return x * 2
print(check(2))
# %% cell
print("before exit")
sys.exit(0)
print("after exit")
# %% cell
values = [3, 1]
print([check(v) for v in values])
check(-5)
# %% cell
print("still here", values)
