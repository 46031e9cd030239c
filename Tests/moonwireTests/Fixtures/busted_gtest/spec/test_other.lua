-- Not run: busted's pattern _spec does not match test_other.lua.
it("must not run", function() error("spec/test_other.lua ran") end)
