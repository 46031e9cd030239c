-- What a module sees as its globals.
return { assert = assert }
