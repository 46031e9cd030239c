# Sourced by bench/run.sh and bench/spread.sh (from the repository's root):
# floor_build NAME compiles bench/floor/NAME.c with cc -O2 into .build/bench-floor/NAME
# when that is missing or older than the source (or bench/floor/floor_common.h), and
# prints the binary's path.
floor_build() {
    local src="bench/floor/$1.c" bin="$PWD/.build/bench-floor/$1"
    if [ ! -x "$bin" ] || [ "$src" -nt "$bin" ] || [ bench/floor/floor_common.h -nt "$bin" ]; then
        echo "bench: cc -O2 $src -> $bin" >&2
        mkdir -p "$(dirname "$bin")"
        cc -O2 -Wall -Wextra -pthread -o "$bin" "$src" -lm >&2
    fi
    echo "$bin"
}
