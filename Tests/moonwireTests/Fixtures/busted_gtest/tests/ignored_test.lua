-- Not run: with spec/ here, busted's default ROOT wins over tests/.
it("must not run", function() error("tests/ ran") end)
