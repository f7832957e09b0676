raise ValueError("the script itself is broken")
