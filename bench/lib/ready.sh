# Sourced by bench scripts: the address a server it started prints on its READY line,
# and waiting for a line a process it started prints.
#   url=$(ready_address FILE [SECONDS])
# Waits up to SECONDS (10) for a line "READY ADDRESS ..." in FILE (the server's standard
# output) and prints ADDRESS (a URL, or a port for the peers' echo servers); prints nothing
# if none came in time, so the caller says which server did not start.
ready_address() {
    local file=$1 tries=$(( ${2:-10} * 20 ))
    for _ in $(seq "$tries"); do grep -qs READY "$file" && break; sleep 0.05; done
    awk '/READY/{print $2; exit}' "$file"
}

# Waits until FILE holds a line containing TEXT, while process PID runs.
#   wait_line FILE TEXT PID [SECONDS]
# Returns 0 once the line is there, 1 when PID ended first, 2 when SECONDS (no limit
# unless given) passed; the caller says what did not happen.
wait_line() {
    local file=$1 text=$2 pid=$3 end=$(( SECONDS + ${4:-1000000000} ))
    until grep -qs "$text" "$file"; do
        kill -0 "$pid" 2>/dev/null || return 1
        [ $SECONDS -lt $end ] || return 2
        sleep 0.1
    done
}
