-- Prints the globals a test file starts with (T:name), for the definitions test.
local names = {}
for k in pairs(_G) do names[#names + 1] = "T:" .. k end
table.sort(names)
print(table.concat(names, "\n"))
it("lists the globals", function() end)
