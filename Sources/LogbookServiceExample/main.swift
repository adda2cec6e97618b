import LogbookLifecycle
print("placeholder")
