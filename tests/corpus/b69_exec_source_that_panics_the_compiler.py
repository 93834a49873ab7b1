exec("'a\xe9")
