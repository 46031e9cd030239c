// libedit's GNU readline compatible interface (Debian libedit-dev), for the
// line editor of `moonwire connect` and `moonwire listen` at a terminal.
#include <stdio.h>
#include <editline/readline.h>
