# No tool calls: text processing.
from collections import Counter

text = """It was the best of times, it was the worst of times, it was the age of
wisdom, it was the age of foolishness, it was the epoch of belief, it was the
epoch of incredulity"""
words = [w.strip(",.").lower() for w in text.split()]
freq = Counter(words)
for word, n in sorted(freq.items(), key=lambda kv: (-kv[1], kv[0]))[:6]:
    print(f"{word:<8} {n}")
print("unique:", len(freq))
print("longest:", max(words, key=lambda w: (len(w), w)))
print("title:", text.splitlines()[0].title())
print("caesar:", "".join(chr((ord(c) - 97 + 3) % 26 + 97) if c.isalpha() else c for c in "hello world"))
print("palindromes:", [w for w in ["level", "baton", "racecar", "noon"] if w == w[::-1]])
print("swapcase:", "Baton Runs Python".swapcase())
print("center:", repr("mid".center(11, "*")))
print("partition:", "key=value=x".partition("="), "key=value=x".rpartition("="))
print("zfill:", "42".zfill(6), "-42".zfill(6))
print("translate:", "hello".translate(str.maketrans("lo", "01")))
print("encode:", "naïve".encode("utf-8"), len("naïve"), len("naïve".encode()))
print("isdigit etc:", "123".isdigit(), "abc".isalpha(), " ".isspace(), "Ab".istitle())
